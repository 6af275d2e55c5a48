/* scope.c — step scopes: a per-thread stack of (tensor list, arena).
 *
 * What it teaches: the cheapest memory management for a training loop is to not manage tensors
 * one by one. Everything a step makes is threaded on one list and freed in one sweep; the arena
 * is kept and reused, so a steady-state step makes no system allocations. The tape is autograd's
 * (autograd/tape.c): its nodes come from this arena, and it knows a new scope by its serial. */
#include "tensor/scope_impl.h"

#include <stdlib.h>
#include <string.h>

#include "tensor/backend_impl.h"

#define ARENA_CHUNK (256 * 1024)

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char mem[];
} arena_chunk;

typedef struct {
    rg_tensor *tensors;        /* adopted tensors, newest first */
    arena_chunk *chunks, *cur; /* chunks are kept across steps; cur is the one being filled */
    uint64_t serial;           /* rg_scope_serial */
} scope;

static _Thread_local scope scopes[RG_SCOPE_MAX_DEPTH];
static _Thread_local int depth;
static _Thread_local uint64_t last_serial;

static scope *top(const char *what) {
    RG_CHECK(depth > 0, "%s: no step scope is open; wrap the step in rg_scope_begin()/rg_scope_end()",
             what);
    return &scopes[depth - 1];
}

void rg_scope_begin(void) {
    RG_CHECK(depth < RG_SCOPE_MAX_DEPTH, "rg_scope_begin: scopes nested deeper than %d",
             RG_SCOPE_MAX_DEPTH);
    scope *s = &scopes[depth++];
    s->tensors = NULL;
    s->cur = s->chunks;
    for (arena_chunk *c = s->chunks; c; c = c->next) c->used = 0;
    s->serial = ++last_serial;
}

static void free_scoped(rg_tensor *t) {
    if (t->flags & RG_TENSOR_OWNS_DATA) rg_backend_for(t->device)->free(t->data, rg_tensor_nbytes(t));
    /* the header itself lives in the arena */
}

void rg_scope_end(void) {
    scope *s = top("rg_scope_end");
    for (rg_tensor *t = s->tensors, *next; t; t = next) {
        next = t->scope_next;
        free_scoped(t);
    }
    s->tensors = NULL;
    s->serial = 0;
    depth--;
}

int rg_scope_depth(void) { return depth; }

void *rg_scope_alloc(size_t bytes) {
    scope *s = top("rg_scope_alloc");
    bytes = (bytes + 15) & ~(size_t)15;
    while (s->cur && s->cur->used + bytes > s->cur->size) s->cur = s->cur->next;
    if (!s->cur) {
        size_t size = bytes > ARENA_CHUNK ? bytes : ARENA_CHUNK;
        arena_chunk *c = malloc(sizeof *c + size);
        RG_CHECK(c, "rg_scope_alloc: out of host memory (%zu bytes)", size);
        c->size = size, c->used = 0, c->next = NULL;
        /* append, so that chunks are reused in the same order next step */
        arena_chunk **tail = &s->chunks;
        while (*tail) tail = &(*tail)->next;
        *tail = c;
        s->cur = c;
    }
    void *p = s->cur->mem + s->cur->used;
    s->cur->used += bytes;
    memset(p, 0, bytes);
    return p;
}

void rg_scope_adopt(rg_tensor *t) {
    scope *s = top("rg_scope_adopt");
    t->flags |= RG_TENSOR_SCOPED;
    t->scope_next = s->tensors;
    s->tensors = t;
}

bool rg_scope_owns(const void *p) {
    if (depth == 0) return false;
    const unsigned char *b = p;
    for (const arena_chunk *c = scopes[depth - 1].chunks; c; c = c->next)
        if (b >= c->mem && b < c->mem + c->used) return true;
    return false;
}

uint64_t rg_scope_serial(void) { return depth > 0 ? scopes[depth - 1].serial : 0; }
