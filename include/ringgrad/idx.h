/* idx.h — the IDX file format of MNIST and Fashion-MNIST, read through zlib.
 *
 * An IDX file is a 4-byte big-endian magic number (0x00 0x00 <type> <ndim>), ndim big-endian
 * uint32 dimensions, then prod(dims) elements in row-major order. Only type 0x08 (unsigned byte)
 * is supported: labels are 0x00000801 (N), images 0x00000803 (N,H,W).
 *
 * The reader trusts nothing in the file: the magic number, every dimension, the total size and
 * the exact byte count (a truncated file and trailing garbage are both errors) are checked before
 * the data is used, and the buffer grows with the data actually read, so a 100-byte file that
 * claims 4 GiB never makes a 4 GiB allocation. Gzipped and plain files are both accepted (zlib's
 * gzread passes non-gzip files through unchanged). A gzip stream cut short, even only its
 * checksum trailer, is "truncated"; bytes after a complete gzip stream are skipped by zlib itself
 * and not seen (the data they follow has passed the gzip CRC check). */
#ifndef RG_IDX_H
#define RG_IDX_H

#include "ringgrad/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ringgrad/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RG_IDX_MAX_DIMS 4
#define RG_IDX_TYPE_U8 0x08
/* Largest payload the reader accepts (4 GiB): a sanity cap against absurd headers. */
#define RG_IDX_MAX_BYTES ((int64_t)1 << 32)

/* The contents of one IDX file. Caller-owned struct; release with rg_idx_deinit(). */
typedef struct {
    /* read-only: filled by the reader; the caller frees data */
    int ndim;
    int64_t dims[RG_IDX_MAX_DIMS];
    uint8_t *data; /* prod(dims) bytes, row-major; owned (malloc) */
    size_t nbytes;
} rg_idx;

/* Reads the IDX file at `path` (gzipped or plain), which must hold unsigned bytes with exactly
 * `ndim` dimensions (1 for labels, 3 for images). On success fills *out and returns RG_OK.
 * Otherwise *out is left empty (safe to deinit) and the status is
 *   RG_ENOENT    the file does not exist,
 *   RG_EIO       it cannot be opened or read,
 *   RG_ECORRUPT  bad magic number, zero or absurd dimensions, truncated data, trailing bytes, or
 *                a damaged gzip stream,
 *   RG_ENOMEM    no memory for the data;
 * rg_last_error() names the file and what is wrong. */
RG_API RG_NODISCARD rg_status rg_idx_read(const char *path, int ndim, rg_idx *out);

/* Frees the data and empties a. NULL and empty structs are fine. */
RG_API void rg_idx_deinit(rg_idx *a);

#ifdef __cplusplus
}
#endif

#endif
