/*
 * membw.c - the memory read-bandwidth probe (membw.h). The reads are the
 * active kernel set's read_sum (kernels_impl.h): the widest loads the CPU
 * has, since a narrow loop would understate the bandwidth and flatter
 * every ratio measured against it.
 */
#include "kernels/membw.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "kernels/kernels_impl.h"
#include "util/common.h"

struct rkm_membw {
    uint64_t *buf;
    size_t bytes;
    size_t n_words;
    int streams;       /* the pattern of the next pass: 1 or 4 */
    uint64_t sink[64]; /* the sums, so no read is optimised away */
};

rkm_membw *rkm_membw_new(size_t bytes)
{
    rkm_membw *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->bytes = bytes & ~(size_t)4095;
    b->n_words = b->bytes / 8;
    b->streams = 1;
    b->buf = b->bytes ? rkm_map_weights(b->bytes) : NULL;
    if (!b->buf) {
        free(b);
        return NULL;
    }
    for (size_t i = 0; i < b->n_words; i++) b->buf[i] = i * 0x9e3779b97f4a7c15ull;
    return b;
}

void rkm_membw_free(rkm_membw *b)
{
    if (!b) return;
    rkm_unmap_weights(b->buf, b->bytes);
    free(b);
}

static void probe_fn(void *ctx, int ith, int nth)
{
    rkm_membw *b = ctx;
    /* slices of whole 512-byte runs, so four streams split evenly */
    size_t lo = b->n_words * (size_t)ith / (size_t)nth & ~(size_t)63;
    size_t hi = b->n_words * (size_t)(ith + 1) / (size_t)nth & ~(size_t)63;
    b->sink[ith % 64] = hi > lo ? rkm_kernels_active()->read_sum(b->buf + lo, hi - lo, b->streams) : 0;
}

double rkm_membw_pass(rkm_membw *b, rkm_pool *pool)
{
    double t0 = rkm_now();
    rkm_pool_run(pool, probe_fn, b);
    double dt = rkm_now() - t0;
    b->streams = b->streams == 4 ? 1 : 4;
    return dt > 0 ? (double)b->bytes / dt / 1e9 : 0;
}

double rkm_membw_probe(rkm_membw *b, rkm_pool *pool, double seconds)
{
    double best = 0, t_end = rkm_now() + seconds;
    for (int pass = 0; pass < 3 || rkm_now() < t_end; pass++) {
        double g = rkm_membw_pass(b, pool);
        if (g > best) best = g;
    }
    return best;
}

typedef struct {
    const rkm_membw_range *r;
    int n;
    _Atomic uint64_t sum; /* of every word read, so no read is optimised away */
} ranges_job;

size_t rkm_membw_range_extent(const rkm_membw_range *r, uintptr_t *start)
{
    uintptr_t a = RKM_ALIGN_UP((uintptr_t)r->p, 64), e = (uintptr_t)r->p + r->bytes;
    *start = a;
    return e >= a + 512 ? (size_t)((e - a) & ~(uintptr_t)511) : 0;
}

static void ranges_fn(void *ctx, int ith, int nth)
{
    ranges_job *j = ctx;
    uint64_t sum = 0;
    for (int i = 0; i < j->n; i++) {
        uintptr_t a;
        size_t words = rkm_membw_range_extent(&j->r[i], &a) / 8;
        if (!words) continue;
        size_t lo = words * (size_t)ith / (size_t)nth & ~(size_t)63;
        size_t hi = ith == nth - 1 ? words : words * (size_t)(ith + 1) / (size_t)nth & ~(size_t)63;
        if (hi > lo) sum += rkm_kernels_active()->read_sum((const uint64_t *)a + lo, hi - lo, 4);
    }
    atomic_fetch_add_explicit(&j->sum, sum, memory_order_relaxed);
}

double rkm_membw_read_ranges(rkm_pool *pool, const rkm_membw_range *r, int n, uint64_t *sum)
{
    ranges_job j = {r, n, 0};
    double t0 = rkm_now();
    rkm_pool_run(pool, ranges_fn, &j);
    double t = rkm_now() - t0;
    if (sum) *sum = atomic_load(&j.sum);
    return t;
}
