/* args.h — a developer benchmark's options: a numeric value that is not a number in its range
 * ends the program with exit 2 and a message naming the option (atoi read "--threads -3" as -3
 * threads, and "--factor nan" as a loop that stopped after one size), and --help prints the
 * usage and exits 0. Parsed before MPI starts, so every rank says the same and exits alike. */
#ifndef RG_BENCH_ARGS_H
#define RG_BENCH_ARGS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An option the program does not know, or one missing its value: exit 2 with the usage. */
static inline void bench_usage_error(const char *prog, const char *what, const char *arg,
                                     const char *usage) {
    fprintf(stderr, "%s: %s '%s'\n%s", prog, what, arg, usage);
    exit(2);
}

/* The value after option argv[*i], which *i then points at; its absence is a usage error. Called
 * from the branch that recognised the option, so that an unknown one is named as unknown. */
static inline const char *bench_value(const char *prog, int argc, char **argv, int *i,
                                      const char *usage) {
    if (*i + 1 >= argc) bench_usage_error(prog, "a value is missing after", argv[*i], usage);
    return argv[++*i];
}

/* v (the value after flag) as a whole number in [lo, hi]. */
static inline long long bench_int(const char *prog, const char *flag, const char *v, long long lo,
                                  long long hi) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "%s: %s needs a whole number from %lld to %lld, not '%s'\n", prog, flag, lo,
                hi, v);
        exit(2);
    }
    return x;
}

/* v as a finite number in [lo, hi]. */
static inline double bench_num(const char *prog, const char *flag, const char *v, double lo,
                               double hi) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "%s: %s needs a number from %g to %g, not '%s'\n", prog, flag, lo, hi, v);
        exit(2);
    }
    return x;
}

/* --help or -h: prints usage (the program's synopsis) to stdout and exits 0. */
static inline void bench_help(int argc, char **argv, const char *usage) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            exit(0);
        }
}

#endif
