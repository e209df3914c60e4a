/*
 * matmul.h - matrix products above the single kernel call: the choice
 * between the pool and the calling thread by the amount of work, and
 * batches of independent small matmuls run as one pool job (decoding:
 * Q/K/V, or the gate/up of every expert a token routed to).
 *
 * Threads: called by the thread that drives the pool (pool.c); the
 * tasks' outputs must not overlap. Ownership: tasks point at the caller's
 * weights and buffers.
 */
#ifndef RKM_KERNELS_MATMUL_H
#define RKM_KERNELS_MATMUL_H

#include <stdint.h>

#include "kernels/kernels.h"

/* Below this many multiply-adds an op runs on the calling thread: waking
 * the other threads costs more than it saves. */
#define RKM_POOL_MIN_WORK 65536.0
/* The pool, or NULL (run on the calling thread) for an op of `work`
 * multiply-adds. */
rkm_pool *rkm_pool_for(rkm_pool *pool, double work);

/* One matmul of a batch: y[m][ldy] (first n_out columns) = x[m][n_in] . W^T
 * for W of n_out rows of type `type`. */
typedef struct rkm_mm_task {
    int type;
    const void *w;
    int64_t n_in, n_out;
    const float *x;
    int64_t m;
    float *y;
    int64_t ldy;
} rkm_mm_task;

/* Batched matmuls pay off up to this many rows (beyond, one matmul at a
 * time quantizes the activations once and splits its own rows). */
#define RKM_MM_MULTI_MAX_ROWS 8
/* Tasks one batch takes in one pool job (the gate and up of 1024 experts
 * and a shared expert's pair); a larger batch runs one task at a time. */
#define RKM_MM_MULTI_MAX_TASKS 2050

/* Several independent matmuls in one pool run: their weight rows are
 * split into chunks that the threads take in turn, each chunk computed by
 * rkm_matmul_reuse on the taking thread. Fewer pool wake-ups than one run
 * per matrix, which is what small m spends most of its time on. Results
 * equal one rkm_matmul per task. */
void rkm_mm_multi(rkm_pool *pool, const rkm_mm_task *t, int n);

#endif
