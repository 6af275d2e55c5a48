/* fuzz_file.h — shared by the fuzz targets (tests/fuzz/fuzz_*.c): the readers under test take a
 * path, so each input is written to one temporary file per process first. */
#ifndef RG_FUZZ_FILE_H
#define RG_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Writes data to a per-process temporary file named after `tag`; returns its path (static). */
static inline const char *fuzz_write_file(const char *tag, const uint8_t *data, size_t size) {
    static char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/rg-fuzz-%s-%d", dir && *dir ? dir : "/tmp", tag, (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

#endif
