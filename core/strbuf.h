/* strbuf.h — a growing string for the JSON the library writes (the timeline's trace events, the
 * safetensors header). Failure to grow is sticky: after it, every call is a no-op and `oom` is
 * true, so a writer builds the whole text and checks once at the end.
 *
 *   rg_strbuf b = {0};
 *   rg_strbuf_puts(&b, "{\"name\":");
 *   rg_strbuf_json_string(&b, name);
 *   rg_strbuf_printf(&b, ",\"n\":%d}", n);
 *   if (b.oom) ... RG_ENOMEM ...;   use b.s (NUL-terminated, b.len bytes); free(b.s) */
#ifndef RG_CORE_STRBUF_H
#define RG_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *s;    /* NUL-terminated once anything was added; owned, free() it */
    size_t len; /* bytes before the NUL */
    size_t cap;
    bool oom;   /* a growth failed; the text is incomplete */
} rg_strbuf;

void rg_strbuf_put(rg_strbuf *b, const char *s, size_t n);
void rg_strbuf_puts(rg_strbuf *b, const char *s);
void rg_strbuf_printf(rg_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string literal: quotes, backslashes and control characters escaped. */
void rg_strbuf_json_string(rg_strbuf *b, const char *s);

#endif
