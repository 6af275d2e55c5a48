/* safetensors.h — reading and writing the safetensors format (huggingface/safetensors):
 *
 *   [8 bytes: header length N, little-endian u64][N bytes: JSON header][data]
 *   header: {"__metadata__": {"key": "value", ...},
 *            "fc1.weight": {"dtype": "F32", "shape": [128, 784], "data_offsets": [begin, end]},
 * ...}
 *
 * Offsets are relative to the start of the data section; tensors are contiguous, row-major and
 * little-endian; the data section is covered exactly, with no gaps or overlaps. A file opened
 * here has been checked entirely (header length against the file size, JSON, dtypes, shapes
 * against offsets, offsets against the data section) before any entry is returned, so a
 * corrupt file is an error message and never an out-of-bounds read. */
#ifndef RG_SAFETENSORS_H
#define RG_SAFETENSORS_H

#include "ringgrad/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ringgrad/params.h"
#include "ringgrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RG_SAFETENSORS_MAX_HEADER 100000000 /* bytes, as the reference implementation */
#define RG_SAFETENSORS_MAX_DIMS 16

typedef struct {
    /* read-only: filled by the file handle, valid while it is open */
    const char *name;  /* borrowed from the file handle */
    const char *dtype; /* "F32", "I64", ...: one of the format's dtypes */
    size_t elem_size;  /* bytes per element */
    int ndim;
    int64_t shape[RG_SAFETENSORS_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* byte range within the data section */
} rg_safetensors_entry;

typedef struct rg_safetensors rg_safetensors;

/* A metadata pair for writing. */
typedef struct {
    const char *key, *value;
} rg_safetensors_kv;

/* Opens and validates `path`. On success *out is the handle (close it with
 * rg_safetensors_close). Returns RG_ENOENT (missing file), RG_EIO (unreadable) or RG_ECORRUPT
 * with rg_last_error() naming the file and what is wrong. */
RG_API RG_NODISCARD rg_status rg_safetensors_open(const char *path, rg_safetensors **out);
/* Closes the file and frees the handle and its entries. NULL is a no-op. */
RG_API void rg_safetensors_close(rg_safetensors *f);

/* The file's path, its entries (sorted by name) and a lookup by name (NULL if absent). The
 * strings and entries are borrowed from f. */
RG_API const char *rg_safetensors_path(const rg_safetensors *f);
RG_API int rg_safetensors_count(const rg_safetensors *f);
RG_API const rg_safetensors_entry *rg_safetensors_entry_at(const rg_safetensors *f, int i);
RG_API const rg_safetensors_entry *rg_safetensors_find(const rg_safetensors *f, const char *name);
/* The value of metadata key `key`, or NULL. Borrowed from f. */
RG_API const char *rg_safetensors_meta(const rg_safetensors *f, const char *key);

/* Reads entry e's bytes (e->end - e->begin of them) into host memory dst. RG_EIO on a failed
 * read (the file changed under us). */
RG_API RG_NODISCARD
rg_status rg_safetensors_read(rg_safetensors *f, const rg_safetensors_entry *e, void *dst);
/* Reads entry e into tensor t (any device). e must match t's dtype and shape: RG_EMISMATCH
 * naming the tensor and the file otherwise. */
RG_API RG_NODISCARD
rg_status rg_safetensors_read_tensor(rg_safetensors *f, const rg_safetensors_entry *e,
                                     rg_tensor *t);
/* RG_OK when e has t's dtype and shape, else RG_EMISMATCH with a message naming both. */
RG_API RG_NODISCARD
rg_status rg_safetensors_check_entry(const rg_safetensors *f, const rg_safetensors_entry *e,
                                     const rg_tensor *t);

/* The format's name of a ringgrad dtype ("F32"). Static string. */
RG_API const char *rg_safetensors_dtype_name(rg_dtype dt);

/* Writes n tensors (any devices; names must be unique) and n_meta metadata pairs to `path`
 * atomically: a temporary file in the same directory is written, flushed and fsync'ed, then
 * renamed over `path`, and the directory is fsync'ed, so that `path` is always either the old
 * file or the complete new one. Returns RG_OK or RG_EIO naming the path and the reason. */
RG_API RG_NODISCARD
rg_status rg_safetensors_save(const char *path, const rg_named_tensor *tensors, int n,
                              const rg_safetensors_kv *meta, int n_meta);

#ifdef __cplusplus
}
#endif

#endif
