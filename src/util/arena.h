/*
 * arena.h - the one bump allocator of rkmojo: many small allocations that
 * all die together (a tokenizer's token strings, a template's nodes and
 * values during one parse or render). Blocks of at least block_bytes are
 * chained; one larger request gets a block of its own. Memory is 16-byte
 * aligned.
 *
 * Threads: an arena belongs to one thread at a time. Ownership: everything
 * allocated from it is freed by rkm_arena_free, never one by one.
 */
#ifndef RKM_UTIL_ARENA_H
#define RKM_UTIL_ARENA_H

#include <stddef.h>

typedef struct rkm_arena_block rkm_arena_block;

typedef struct rkm_arena {
    rkm_arena_block *head;
    size_t block_bytes; /* 0: 1 MiB */
    size_t total_bytes; /* allocated from malloc so far */
} rkm_arena;

/* n bytes (uninitialised), or NULL when malloc fails. */
void *rkm_arena_alloc(rkm_arena *a, size_t n);
/* n zeroed bytes, or NULL. */
void *rkm_arena_calloc(rkm_arena *a, size_t n);
/* A NUL-terminated copy of s[0..n), or NULL. */
char *rkm_arena_strndup(rkm_arena *a, const char *s, size_t n);
/* Frees every block; the arena can be used again. */
void rkm_arena_free(rkm_arena *a);

#endif
