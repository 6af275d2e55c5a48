/* strbuf.c — a growing string (see strbuf.h). */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL; false (and oom) when it cannot be had. */
static bool reserve(rg_strbuf *b, size_t n) {
    if (b->oom) return false;
    if (b->len + n + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) return b->oom = true, false;
    b->s = p, b->cap = cap;
    return true;
}

void rg_strbuf_put(rg_strbuf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void rg_strbuf_puts(rg_strbuf *b, const char *s) { rg_strbuf_put(b, s, strlen(s)); }

void rg_strbuf_printf(rg_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void rg_strbuf_json_string(rg_strbuf *b, const char *s) {
    rg_strbuf_put(b, "\"", 1);
    for (const char *run = s;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c && c != '"' && c != '\\' && c >= 0x20) continue;
        rg_strbuf_put(b, run, (size_t)(s - run)); /* the plain bytes before this one */
        if (!c) break;
        if (c == '"' || c == '\\')
            rg_strbuf_printf(b, "\\%c", c);
        else
            rg_strbuf_printf(b, "\\u%04x", c);
        run = s + 1;
    }
    rg_strbuf_put(b, "\"", 1);
}
