/* agree.c — the ranks agree on their configuration before anything else talks over the network.
 *
 * What it teaches: settings that must be equal on every rank (the backend, the batch size, the
 * learning rate, ...) are cheapest to check once, at start-up, over the bootstrap (MPI), before the
 * chosen communicator exists: two ranks on different backends could not even meet on either of
 * them, and two ranks with different learning rates would train silently apart. Every rank
 * gathers every rank's "name value" lines and so computes the same verdict and message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm_impl.h"

/* The value of line `name` in a "name value\n..." text, copied into out ("(absent)" if none). */
static void value_of(const char *text, const char *name, size_t name_len, char *out, size_t cap) {
    for (const char *l = text; *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        if (len > name_len && strncmp(l, name, name_len) == 0 && l[name_len] == ' ') {
            snprintf(out, cap, "%.*s", (int)(len - name_len - 1), l + name_len + 1);
            return;
        }
        l += len + (end ? 1 : 0);
    }
    snprintf(out, cap, "(absent)");
}

/* Appends "; NAME is A on rank 0, B on rank 1" to msg for every setting of rank 0 on which some
 * rank differs (at most 8 ranks named per setting). Returns the number of settings. */
static int describe(char **texts, int size, char *msg, size_t cap) {
    int bad = 0;
    size_t n = strlen(msg);
    for (const char *l = texts[0]; *l;) {
        const char *end = strchr(l, '\n'), *sp = strchr(l, ' ');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        size_t name_len = sp && sp < l + len ? (size_t)(sp - l) : len;
        char v0[256], v[256];
        value_of(texts[0], l, name_len, v0, sizeof v0);
        bool differs = false;
        for (int r = 1; r < size && !differs; r++) {
            value_of(texts[r], l, name_len, v, sizeof v);
            differs = strcmp(v, v0) != 0;
        }
        if (differs && n < cap) {
            n += (size_t)snprintf(msg + n, cap - n, "%s%.*s is %s on rank 0", bad ? "; " : "",
                                  (int)name_len, l, v0);
            for (int r = 1, named = 1; r < size && named < 8 && n < cap; r++) {
                value_of(texts[r], l, name_len, v, sizeof v);
                if (strcmp(v, v0) == 0 && size > 8) continue;
                n += (size_t)snprintf(msg + n, cap - n, ", %s on rank %d", v, r);
                named++;
            }
            bad++;
        }
        l += len + (end ? 1 : 0);
    }
    /* settings rank 0 does not have at all, from the first rank that has each */
    for (int r = 1; r < size; r++)
        for (const char *l = texts[r]; *l;) {
            const char *end = strchr(l, '\n'), *sp = strchr(l, ' ');
            size_t len = end ? (size_t)(end - l) : strlen(l);
            size_t name_len = sp && sp < l + len ? (size_t)(sp - l) : len;
            char v[256];
            bool seen = false;
            for (int q = 0; q < r && !seen; q++) {
                value_of(texts[q], l, name_len, v, sizeof v);
                seen = strcmp(v, "(absent)") != 0;
            }
            if (!seen && n < cap) {
                value_of(texts[r], l, name_len, v, sizeof v);
                n += (size_t)snprintf(msg + n, cap - n, "%s%.*s is (absent) on rank 0, %s on rank %d",
                                      bad ? "; " : "", (int)name_len, l, v, r);
                bad++;
            }
            l += len + (end ? 1 : 0);
        }
    return bad;
}

rg_status rg_dist_agree_config(rg_dist *d, const char *config) {
    if (!d->launched || d->size == 1) return RG_OK;
    int len = (int)strlen(config) + 1;
    int *lens = calloc((size_t)d->size, sizeof *lens), *offs = calloc((size_t)d->size, sizeof *offs);
    char **texts = calloc((size_t)d->size, sizeof *texts);
    /* a few bytes per rank: running out here is the process's end (RG_CHECK aborts the job) */
    RG_CHECK(lens && offs && texts, "rg_dist_init: out of memory for %d ranks", d->size);
    MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, MPI_COMM_WORLD);
    size_t total = 0;
    for (int r = 0; r < d->size; r++) offs[r] = (int)total, total += (size_t)lens[r];
    char *all = malloc(total);
    RG_CHECK(all, "rg_dist_init: out of memory for %zu bytes of settings", total);
    MPI_Allgatherv(config, len, MPI_CHAR, all, lens, offs, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < d->size; r++) texts[r] = all + offs[r];
    bool same = true;
    for (int r = 1; r < d->size && same; r++) same = strcmp(texts[r], texts[0]) == 0;
    rg_status s = RG_OK;
    if (!same) {
        char msg[2048] = "";
        if (describe(texts, d->size, msg, sizeof msg) == 0) /* only some ranks have a setting */
            snprintf(msg, sizeof msg, "rank 0 sends \"%.200s\" (another build on some ranks?)",
                     texts[0]);
        s = rg_error(RG_EMISMATCH, "the ranks' settings differ (each must be the same on every "
                     "rank): %s", msg);
    }
    free(lens), free(offs), free(all), free(texts);
    return s;
}
