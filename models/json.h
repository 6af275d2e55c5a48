/* json.h — a small, strict JSON reader (RFC 8259) for safetensors headers and other metadata.
 *
 * The whole text is parsed into a tree of nodes; nothing in the input can make it read out of
 * bounds, recurse without limit or accept invalid UTF-8. Duplicate object keys are kept (callers
 * that care check them, in O(n log n)). */
#ifndef RG_JSON_H
#define RG_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RG_JSON_MAX_DEPTH 64

typedef enum {
    RG_JSON_NULL,
    RG_JSON_BOOL,
    RG_JSON_NUMBER,
    RG_JSON_STRING,
    RG_JSON_ARRAY,
    RG_JSON_OBJECT,
    RG_JSON_KIND_COUNT
} rg_json_kind;

typedef struct rg_json rg_json;
struct rg_json {
    rg_json_kind kind;
    bool boolean;    /* RG_JSON_BOOL */
    bool is_int;     /* RG_JSON_NUMBER written without fraction or exponent, fitting int64 */
    int64_t integer; /* when is_int */
    double number;   /* RG_JSON_NUMBER */
    char *str;       /* RG_JSON_STRING: UTF-8, NUL-terminated (a \u0000 escape is rejected) */
    char *key;       /* the member name, for a member of an object; else NULL */
    rg_json *child;  /* first element or member */
    rg_json *next;   /* next sibling */
    int64_t count;   /* number of elements or members */
    size_t offset;   /* byte offset of the value in the text, for messages */
};

/* Parses text[0, n) (one value, whitespace around it allowed). Returns the tree (free with
 * rg_json_free), or NULL with a message naming the byte offset written into err (errlen bytes). */
rg_json *rg_json_parse(const char *text, size_t n, char *err, size_t errlen);

/* Frees a tree. NULL is a no-op. */
void rg_json_free(rg_json *v);

/* The first member of object `obj` named `key`, or NULL (also when obj is not an object). */
const rg_json *rg_json_get(const rg_json *obj, const char *key);

/* "string", "object", ...: for messages. Static string. */
const char *rg_json_kind_name(rg_json_kind k);

#endif
