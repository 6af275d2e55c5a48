/* replay.c — runs a fuzz target's entry function (LLVMFuzzerTestOneInput) over files, without
 * libFuzzer, so that the normal test suite (and its ASan build) replays every seed and every
 * regression input of tests/fuzz/<target>/ on each run.
 *   replay_<target> FILE|DIR...   (a DIR: every regular file in it, one level deep) */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return fprintf(stderr, "replay: cannot open %s\n", path), 1;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) return fprintf(stderr, "replay: out of memory for %s\n", path), 1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) return fprintf(stderr, "replay: no %s\n", argv[i]), 1;
        if (!S_ISDIR(st.st_mode)) {
            bad += run_file(argv[i]), files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        for (struct dirent *e; d && (e = readdir(d));) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
            if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) bad += run_file(p), files++;
        }
        if (d) closedir(d);
    }
    printf("replay: %d inputs, no crash\n", files);
    return bad ? 1 : files ? 0 : 1;
}
