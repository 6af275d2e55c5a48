/* json.c — a recursive-descent JSON parser with a depth limit.
 *
 * What it teaches: a parser for untrusted input checks the remaining length before every read,
 * bounds its recursion, and says where it stopped. Each value becomes a heap node; strings are
 * unescaped into their own buffers (\uXXXX, surrogate pairs included) and checked to be UTF-8. */
#include "models/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t n, pos;
    int depth;
    char *err;
    size_t errlen;
    bool failed;
} parser;

static const char *const kind_names[] = {"null", "bool", "number", "string", "array", "object"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == RG_JSON_KIND_COUNT, "json kind names");

const char *rg_json_kind_name(rg_json_kind k) {
    return (unsigned)k < RG_JSON_KIND_COUNT ? kind_names[k] : "<bad kind>";
}

static void *fail(parser *p, const char *fmt, ...) {
    if (!p->failed) {
        char msg[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        snprintf(p->err, p->errlen, "invalid JSON at byte %zu: %s", p->pos, msg);
        p->failed = true;
    }
    return NULL;
}

static void skip_ws(parser *p) {
    while (p->pos < p->n && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos]) p->pos++;
}

static bool accept(parser *p, const char *word) {
    size_t k = strlen(word);
    if (p->n - p->pos < k || memcmp(p->s + p->pos, word, k) != 0) return false;
    p->pos += k;
    return true;
}

static rg_json *new_node(parser *p, rg_json_kind kind) {
    rg_json *v = calloc(1, sizeof *v);
    if (!v) return fail(p, "out of memory");
    v->kind = kind;
    v->offset = p->pos;
    return v;
}

void rg_json_free(rg_json *v) {
    while (v) {
        rg_json *next = v->next;
        rg_json_free(v->child);
        free(v->str);
        free(v->key);
        free(v);
        v = next;
    }
}

/* ---- strings ---- */

static int hex4(parser *p) {
    if (p->n - p->pos < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos + (size_t)i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    p->pos += 4;
    return v;
}

static size_t put_utf8(char *out, uint32_t cp) {
    if (cp < 0x80) return out[0] = (char)cp, 1;
    if (cp < 0x800) return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at s[0, n), or 0 (overlong forms and surrogates rejected). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    size_t len = s[0] < 0x80             ? 1
                 : (s[0] & 0xE0) == 0xC0 ? 2
                 : (s[0] & 0xF0) == 0xE0 ? 3
                 : (s[0] & 0xF8) == 0xF0 ? 4
                                         : 0;
    if (len == 0 || len > n) return 0;
    uint32_t cp = len == 1 ? s[0] : s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* The code point of an escape after the backslash, or -1. */
static int32_t escape(parser *p) {
    if (p->pos >= p->n) return -1;
    char c = p->s[p->pos++];
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) return (unsigned char)to[hit - from];
    if (c != 'u') return -1;
    int hi = hex4(p);
    if (hi < 0 || (hi >= 0xDC00 && hi <= 0xDFFF)) return -1;
    if (hi < 0xD800 || hi > 0xDBFF) return hi;
    if (!accept(p, "\\u")) return -1; /* a high surrogate needs its low half */
    int lo = hex4(p);
    if (lo < 0xDC00 || lo > 0xDFFF) return -1;
    return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
}

/* Parses a string starting at the opening quote into a new buffer. */
static char *parse_string(parser *p) {
    p->pos++; /* the opening quote */
    size_t end = p->pos;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n) return fail(p, "unterminated string");
    char *out = malloc(end - p->pos + 1); /* unescaping never lengthens */
    if (!out) return fail(p, "out of memory");
    size_t k = 0;
    while (p->s[p->pos] != '"') {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c < 0x20) return free(out), fail(p, "control character in string");
        if (c == '\\') {
            p->pos++;
            int32_t cp = escape(p);
            if (cp <= 0) return free(out), fail(p, cp == 0 ? "\\u0000 in string" : "bad escape");
            k += put_utf8(out + k, (uint32_t)cp);
            continue;
        }
        size_t len = utf8_len((const unsigned char *)p->s + p->pos, end - p->pos);
        if (!len) return free(out), fail(p, "invalid UTF-8 in string");
        memcpy(out + k, p->s + p->pos, len);
        k += len, p->pos += len;
    }
    p->pos++; /* the closing quote */
    out[k] = '\0';
    return out;
}

/* ---- numbers: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? ---- */

static size_t digits(parser *p) {
    size_t start = p->pos;
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    return p->pos - start;
}

static rg_json *parse_number(parser *p) {
    rg_json *v = new_node(p, RG_JSON_NUMBER);
    if (!v) return NULL;
    size_t start = p->pos;
    bool neg = accept(p, "-"), is_int = true;
    size_t int_start = p->pos, nd = digits(p);
    if (nd == 0 || (nd > 1 && p->s[int_start] == '0')) return free(v), fail(p, "bad number");
    if (accept(p, ".")) {
        if (!digits(p)) return free(v), fail(p, "bad number: no digits after '.'");
        is_int = false;
    }
    if (p->pos < p->n && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (!accept(p, "+")) accept(p, "-");
        if (!digits(p)) return free(v), fail(p, "bad number: no digits in the exponent");
        is_int = false;
    }
    /* the integer value, if it is one and fits int64 */
    uint64_t mag = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (size_t i = int_start; is_int && i < int_start + nd; i++) {
        uint64_t d = (uint64_t)(p->s[i] - '0');
        if (mag > (limit - d) / 10)
            is_int = false;
        else
            mag = mag * 10 + d;
    }
    v->is_int = is_int;
    if (is_int) v->integer = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    char buf[64];
    size_t len = p->pos - start;
    if (len < sizeof buf) { /* longer numbers only matter as integers (or not at all) */
        memcpy(buf, p->s + start, len);
        buf[len] = '\0';
        v->number = strtod(buf, NULL);
    } else {
        v->number = is_int ? (double)v->integer : 0.0;
    }
    return v;
}

/* ---- values ---- */

static rg_json *parse_value(parser *p);

/* Parses the members (object) or elements (array) after the opening bracket. */
static rg_json *parse_container(parser *p, bool object) {
    rg_json *v = new_node(p, object ? RG_JSON_OBJECT : RG_JSON_ARRAY);
    if (!v) return NULL;
    if (++p->depth > RG_JSON_MAX_DEPTH)
        return free(v), fail(p, "nested deeper than %d", RG_JSON_MAX_DEPTH);
    p->pos++; /* '{' or '[' */
    rg_json **tail = &v->child;
    skip_ws(p);
    bool first = true;
    while (!accept(p, object ? "}" : "]")) {
        if (!first && (skip_ws(p), !accept(p, ",")))
            return rg_json_free(v), fail(p, "expected ',' or a closing bracket");
        skip_ws(p);
        char *key = NULL;
        if (object) {
            if (p->pos >= p->n || p->s[p->pos] != '"')
                return rg_json_free(v), fail(p, "expected a member name");
            if (!(key = parse_string(p))) return rg_json_free(v), NULL;
            skip_ws(p);
            if (!accept(p, ":")) return free(key), rg_json_free(v), fail(p, "expected ':'");
        }
        rg_json *item = parse_value(p);
        if (!item) return free(key), rg_json_free(v), NULL;
        item->key = key;
        *tail = item, tail = &item->next;
        v->count++;
        first = false;
        skip_ws(p);
    }
    p->depth--;
    return v;
}

static rg_json *parse_value(parser *p) {
    skip_ws(p);
    if (p->pos >= p->n) return fail(p, "unexpected end of input");
    char c = p->s[p->pos];
    if (c == '{' || c == '[') return parse_container(p, c == '{');
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p);
    rg_json *v = NULL;
    if (c == '"') {
        if (!(v = new_node(p, RG_JSON_STRING))) return NULL;
        if (!(v->str = parse_string(p))) return free(v), NULL;
        return v;
    }
    static const struct {
        const char *word;
        rg_json_kind kind;
        bool value;
    } words[] = {{"null", RG_JSON_NULL, false},
                 {"true", RG_JSON_BOOL, true},
                 {"false", RG_JSON_BOOL, false}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t at = p->pos;
        if (!accept(p, words[i].word)) continue;
        if (!(v = new_node(p, words[i].kind))) return NULL;
        v->offset = at, v->boolean = words[i].value;
        return v;
    }
    return fail(p, "unexpected character 0x%02x", (unsigned char)c);
}

rg_json *rg_json_parse(const char *text, size_t n, char *err, size_t errlen) {
    parser p = {.s = text, .n = n, .err = err, .errlen = errlen};
    if (errlen) err[0] = '\0';
    rg_json *v = parse_value(&p);
    if (!v) return NULL;
    skip_ws(&p);
    if (p.pos != n) return rg_json_free(v), fail(&p, "trailing characters after the value");
    return v;
}

const rg_json *rg_json_get(const rg_json *obj, const char *key) {
    if (!obj || obj->kind != RG_JSON_OBJECT) return NULL;
    for (const rg_json *m = obj->child; m; m = m->next)
        if (strcmp(m->key, key) == 0) return m;
    return NULL;
}
