/* stb_image_config.h — the stb_image options ringgrad uses, set before every include of
 * <stb/stb_image.h> so that the declarations and the implementation (data/stb_image.c) agree.
 *
 * Only the 8-bit formats an image folder holds are compiled in. Sizes are checked by
 * data/image_io.c before anything is decoded (RG_IMAGE_MAX_SIDE and RG_IMAGE_MAX_PIXELS in
 * ringgrad/dataset.h); stb's own dimension limit is left at its default (2^24) so that stbi_info
 * reports what a hostile header claims instead of failing with "unknown image type". As a second
 * line, every allocation stb makes goes through rg_stbi_malloc, which refuses anything larger than
 * the biggest image the limits allow, so no header can make the decoder take gigabytes.
 * STBI_ASSERT is off in every build type: some of stb's assertions depend on the input (the fuzz
 * target found a damaged progressive JPEG that trips one in stbi__jpeg_huff_decode, right after
 * stb's own bounds check), and a Debug build must not abort where a Release build returns an
 * error. Memory safety is what the fuzz target checks, under ASan and UBSan. */
#ifndef RG_STB_IMAGE_CONFIG_H
#define RG_STB_IMAGE_CONFIG_H

#include <stddef.h>

#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_ONLY_TGA
#define STBI_ONLY_PNM
#define STBI_ASSERT(x) ((void)0)
#define STBI_NO_STDIO /* files are read by image_io.c, which refuses FIFOs and devices */

void *rg_stbi_malloc(size_t bytes);
void *rg_stbi_realloc(void *p, size_t bytes);
#define STBI_MALLOC(sz) rg_stbi_malloc(sz)
#define STBI_REALLOC(p, sz) rg_stbi_realloc(p, sz)
#define STBI_FREE(p) free(p)

#endif
