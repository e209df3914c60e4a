/*
 * ranges.h - do byte ranges of a file overlap? The file parsers' check
 * that no two tensors share data, in n log n (sorted by offset) over the
 * caller's array, read through range(ctx, i).
 *
 * Pure; any thread. Nothing is kept.
 */
#ifndef RKM_UTIL_RANGES_H
#define RKM_UTIL_RANGES_H

#include <stdint.h>

typedef void (*rkm_range_of)(const void *ctx, int i, uint64_t *off, uint64_t *len);

/* 1 when two of the n ranges overlap (their indices in *a, *b, a's range
 * first), 0 when none does (empty ranges overlap nothing), -1 when out of
 * memory. */
int rkm_ranges_overlap(int n, rkm_range_of range, const void *ctx, int *a, int *b);

#endif
