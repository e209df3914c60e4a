/*
 * arena.c - the bump allocator (arena.h).
 */
#include "util/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct rkm_arena_block {
    rkm_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *rkm_arena_alloc(rkm_arena *a, size_t n)
{
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t bb = a->block_bytes ? a->block_bytes : ((size_t)1 << 20);
        size_t cap = n > bb ? n : bb;
        rkm_arena_block *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->used = 0;
        b->cap = cap;
        a->total_bytes += cap;
        if (a->head && n > bb) {
            /* a large one-off: keep the current block for the small ones */
            b->next = a->head->next;
            a->head->next = b;
            b->used = n;
            return b->data;
        }
        b->next = a->head;
        a->head = b;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

void *rkm_arena_calloc(rkm_arena *a, size_t n)
{
    void *p = rkm_arena_alloc(a, n);
    if (p) memset(p, 0, n);
    return p;
}

char *rkm_arena_strndup(rkm_arena *a, const char *s, size_t n)
{
    char *p = rkm_arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void rkm_arena_free(rkm_arena *a)
{
    while (a->head) {
        rkm_arena_block *n = a->head->next;
        free(a->head);
        a->head = n;
    }
    a->total_bytes = 0;
}
