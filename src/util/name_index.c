/*
 * name_index.c - see name_index.h.
 */
#include "util/name_index.h"

#include <stdlib.h>
#include <string.h>

#include "util/common.h"

int rkm_name_index_init(rkm_name_index *x, size_t n)
{
    uint32_t c = 16;
    while (c < 2 * n && c < (1u << 30)) c <<= 1;
    x->slot = malloc(sizeof(int) * c);
    x->cap = x->slot ? c : 0;
    if (!x->slot) return -1;
    memset(x->slot, 0xff, sizeof(int) * c);
    return 0;
}

void rkm_name_index_free(rkm_name_index *x)
{
    free(x->slot);
    x->slot = NULL;
    x->cap = 0;
}

static uint32_t slot_of(const rkm_name_index *x, const char *name, rkm_name_of name_of, const void *ctx)
{
    uint32_t m = x->cap - 1, h = (uint32_t)rkm_hash(name, strlen(name)) & m;
    while (x->slot[h] >= 0 && strcmp(name_of(ctx, x->slot[h]), name)) h = (h + 1) & m;
    return h;
}

int rkm_name_index_find(const rkm_name_index *x, const char *name, rkm_name_of name_of, const void *ctx)
{
    if (!x->slot || !name) return -1;
    return x->slot[slot_of(x, name, name_of, ctx)];
}

int rkm_name_index_add(rkm_name_index *x, const char *name, int i, rkm_name_of name_of, const void *ctx)
{
    uint32_t h = slot_of(x, name, name_of, ctx);
    if (x->slot[h] >= 0) return x->slot[h];
    x->slot[h] = i;
    return -1;
}
