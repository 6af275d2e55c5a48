/* bytes.h — a byte count on a benchmark's command line: 4096, 64K, 16M, 1G (powers of 1024). */
#ifndef RG_BENCH_BYTES_H
#define RG_BENCH_BYTES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* s as bytes; anything else (0, a negative number, another suffix) ends the program with exit 2,
 * naming prog. */
static inline int64_t bench_parse_bytes(const char *prog, const char *s) {
    char *end;
    double v = strtod(s, &end);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (!(v > 0) || end == s || (*end && (!shift || end[1]))) {
        fprintf(stderr, "%s: bad size '%s' (e.g. 4096, 64K, 16M)\n", prog, s);
        exit(2);
    }
    return (int64_t)(v * (double)((int64_t)1 << shift));
}

#endif
