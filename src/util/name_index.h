/*
 * name_index.h - an open-addressing table from names to the indices of an
 * array the caller owns (tensor and key tables of the file parsers), so
 * lookups and duplicate checks cost O(1) and parsing stays linear in the
 * file. The table holds indices only; names are read back through the
 * caller's name_of(ctx, i).
 *
 * Threads: a table belongs to its creator; lookups on a finished table may
 * run on any thread. Ownership: rkm_name_index_free releases the slots.
 */
#ifndef RKM_UTIL_NAME_INDEX_H
#define RKM_UTIL_NAME_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef const char *(*rkm_name_of)(const void *ctx, int i);

typedef struct rkm_name_index {
    int *slot;    /* -1 empty, else an index */
    uint32_t cap; /* a power of two, at least twice the names */
} rkm_name_index;

/* Room for n names; 0, or -1 when out of memory. */
int rkm_name_index_init(rkm_name_index *x, size_t n);
void rkm_name_index_free(rkm_name_index *x);
/* The index of name, or -1. */
int rkm_name_index_find(const rkm_name_index *x, const char *name, rkm_name_of name_of, const void *ctx);
/* Adds entry i under name: -1 when added, else the index already there. */
int rkm_name_index_add(rkm_name_index *x, const char *name, int i, rkm_name_of name_of, const void *ctx);

#endif
