/*
 * membw.h - the memory read-bandwidth probe: the ceiling a decode token's
 * weight reads are measured against, by bench-kernels (each matvec as a
 * share of it) and `rkmojo bench --limits` (the decode speed it allows).
 * One probe, so the two report the same machine.
 *
 * Threads: a probe runs its passes on the caller's pool (the kernels'
 * threads, so it reads with the cores and loads the matmuls use); one
 * caller at a time per probe. The probe owns its buffer.
 */
#ifndef RKM_KERNELS_MEMBW_H
#define RKM_KERNELS_MEMBW_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef struct rkm_membw rkm_membw;

/* A probe over a buffer of `bytes` (make it far larger than the caches),
 * mapped like the weights (rkm_map_weights) and written once. NULL: out
 * of memory. */
rkm_membw *rkm_membw_new(size_t bytes);
void rkm_membw_free(rkm_membw *b);
/* One read of the whole buffer split over the pool's threads, in GB/s
 * (1e9 bytes). Successive passes alternate one sequential stream per
 * thread and four prefetched streams (the decode kernels' pattern, which
 * can beat one stream); keep the best of several. */
double rkm_membw_pass(rkm_membw *b, rkm_pool *pool);
/* The best pass over at least `seconds` and at least three passes. */
double rkm_membw_probe(rkm_membw *b, rkm_pool *pool, double seconds);

/* Memory that is read but not owned (a model's weights, say). */
typedef struct {
    const void *p;
    size_t bytes;
} rkm_membw_range;

/* One read of every range, in order, on the pool: each thread reads its
 * share of each range (four prefetched streams, the decode kernels'
 * pattern) and goes on to the next range without waiting for the others,
 * so the pass is the time the bytes alone take, without the arithmetic
 * and the synchronisation between matrices a forward pass adds. Bytes
 * before the first 64-byte boundary of a range and after its last whole
 * 512 bytes are skipped. Returns the seconds it took; *sum (if not NULL)
 * gets the sum, modulo 2^64, of the 64-bit words read. */
double rkm_membw_read_ranges(rkm_pool *pool, const rkm_membw_range *r, int n, uint64_t *sum);
/* The part of a range a read covers: its first 64-byte boundary in
 * *start, the byte count (whole 512-byte runs, 0 if none) returned. */
size_t rkm_membw_range_extent(const rkm_membw_range *r, uintptr_t *start);

#endif
