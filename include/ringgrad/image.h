/* image.h — reading one image file safely: PNG, JPEG, BMP, TGA and PNM through stb_image.
 *
 * Image files come from users and the internet, so every reader here treats the file as hostile:
 * only regular files are opened (a FIFO or a device would block or never end), the size the
 * header claims is checked against the limits below before a byte is decoded, and stb_image's
 * allocations are capped too (data/stb_image_config.h). Every failure is an rg_status whose
 * message names the file; nothing aborts. */
#ifndef RG_IMAGE_H
#define RG_IMAGE_H

#include "ringgrad/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ringgrad/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest images accepted: at most 16384 pixels on a side and 64 Mi pixels (8192 x 8192) in
 * all, and files of at most 256 MiB. A header claiming more is an error naming the file and its
 * claimed size, found before anything is allocated for the pixels. */
#ifndef RG_IMAGE_MAX_SIDE /* the fuzz target builds data/image_io.c with smaller limits */
#define RG_IMAGE_MAX_SIDE 16384
#define RG_IMAGE_MAX_PIXELS ((int64_t)1 << 26)
#endif
#define RG_IMAGE_MAX_FILE_BYTES ((int64_t)1 << 28)

/* A decoded image: (C,H,W) planar bytes, as the network wants them (files are interleaved). */
typedef struct {
    uint8_t *px; /* (c,h,w); owned, freed by rg_image_deinit() */
    int c, h, w;
} rg_image;

/* The size and channel count (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA) a file's header declares,
 * checked against the limits; reads only the start of the file when it can. RG_ENOENT when the
 * file is missing, RG_EIO when it cannot be read or is not a regular file, RG_ECORRUPT when it is
 * not an image of a known format, is damaged, or is too large. */
RG_API RG_NODISCARD rg_status rg_image_info(const char *path, int *w, int *h, int *channels);

/* Decodes a file into *out with `channels` planes (1: gray, 3: RGB; colour is converted with
 * stb_image's rules, alpha dropped). Statuses as rg_image_info(); *out is zeroed on failure. */
RG_API RG_NODISCARD rg_status rg_image_load(const char *path, int channels, rg_image *out);

/* The same from n bytes in memory; `name` is what messages call them. */
RG_API RG_NODISCARD rg_status rg_image_decode(const char *name, const void *data, size_t n,
                                              int channels, rg_image *out);

/* Frees img->px and zeroes *img. NULL is a no-op. */
RG_API void rg_image_deinit(rg_image *img);

#ifdef __cplusplus
}
#endif

#endif
