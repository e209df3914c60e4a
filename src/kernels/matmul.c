/*
 * matmul.c - batches of independent matmuls as one pool job, and the
 * pool-or-caller choice by work (matmul.h).
 *
 * Threads: the pool's; each worker claims guided runs of the batch's rows
 * (rkm_pool_take) and writes only those rows' outputs.
 */
#include "kernels/matmul.h"

#include <stdatomic.h>

#include "util/common.h"

rkm_pool *rkm_pool_for(rkm_pool *pool, double work)
{
    return work < RKM_POOL_MIN_WORK ? NULL : pool;
}

typedef struct {
    const rkm_mm_task *t;
    int n;
    int64_t chunk;
    int64_t first[RKM_MM_MULTI_MAX_TASKS + 1]; /* first row of each task in the job's row space */
    _Atomic int64_t next;
} multi_job;

/* The tasks' rows laid end to end, each task padded to whole 16-row groups
 * (the packed kernels' grain), are claimed in guided runs (rkm_pool_take);
 * a run may span the end of one task and the start of the next. */
static void multi_worker(void *ctx, int ith, int nth)
{
    multi_job *j = ctx;
    int ti = 0;
    (void)ith;
    /* a task's runs, and the gate/up pair of an expert, share x: each
     * thread quantizes it once per run of rows with the same x */
    rkm_matmul_reuse_begin();
    int64_t u0, nu;
    while ((nu = rkm_pool_take(&j->next, j->first[j->n], j->chunk, 16, nth, &u0)) > 0) {
        for (int64_t u = u0, end = u0 + nu; u < end;) {
            while (u >= j->first[ti + 1]) ti++;
            const rkm_mm_task *t = &j->t[ti];
            int64_t r0 = u - j->first[ti], r1 = RKM_MIN(end, j->first[ti + 1]) - j->first[ti];
            u = j->first[ti] + r1;
            r1 = RKM_MIN(r1, t->n_out);
            if (r0 >= r1) continue; /* the padding */
            size_t rb = rkm_type_row_bytes(t->type, t->n_in);
            rkm_matmul_reuse(t->type, (const uint8_t *)t->w + (size_t)r0 * rb, t->n_in, r1 - r0, t->x, t->m,
                             t->y + r0, t->ldy);
        }
    }
}

void rkm_mm_multi(rkm_pool *pool, const rkm_mm_task *t, int n)
{
    double work = 0;
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        work += (double)t[i].n_in * (double)t[i].n_out * (double)t[i].m;
        rows += t[i].n_out;
    }
    int nth = rkm_pool_n_threads(pool);
    if (!pool || nth <= 1 || work < RKM_POOL_MIN_WORK || n > RKM_MM_MULTI_MAX_TASKS) {
        for (int i = 0; i < n; i++)
            rkm_matmul(rkm_pool_for(pool, (double)t[i].n_in * t[i].n_out * t[i].m), t[i].type, t[i].w, t[i].n_in,
                       t[i].n_out, t[i].x, t[i].m, t[i].y, t[i].ldy);
        return;
    }
    multi_job j;
    j.t = t;
    j.n = n;
    /* runs of at most about an eighth of a thread's share, whole groups */
    j.chunk = RKM_ALIGN_UP(RKM_MAX(rows / (8 * nth), 16), 16);
    j.first[0] = 0;
    for (int i = 0; i < n; i++) j.first[i + 1] = j.first[i] + RKM_ALIGN_UP(t[i].n_out, 16);
    atomic_store_explicit(&j.next, 0, memory_order_relaxed);
    rkm_pool_run(pool, multi_worker, &j);
}
