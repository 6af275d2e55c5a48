/* hash.h — FNV-1a, 64 bits: the fingerprints the ranks compare (dist/ddp.c: models and bucket
 * plans) and the buffer checksums of ringgrad-train --buffer-checksum. Not for hash tables fed
 * by an adversary, and not a checksum against tampering. */
#ifndef RG_CORE_HASH_H
#define RG_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define RG_FNV1A_BASIS 14695981039346656037ull /* the offset basis: the hash of nothing */

/* h updated with the n bytes at p; start from RG_FNV1A_BASIS and chain calls for more pieces. */
static inline uint64_t rg_fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull; /* the FNV prime */
    return h;
}

#endif
