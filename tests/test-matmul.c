/*
 * test-matmul.c - kernels/matmul.c: rkm_mm_multi equals one rkm_matmul per
 * task (bit for bit) for f32, q8_0 and q4_0 weights, odd row counts, 1 to
 * 9 activation rows, with no pool and 2- and 3-thread pools, for a batch
 * of many small tasks (every task's rows split across threads and runs
 * spanning task ends), for a task's output in a wider row (ldy), and past
 * RKM_MM_MULTI_MAX_TASKS (one task at a time); rkm_pool_for's threshold.
 */
#include <stdint.h>

#include "common/test.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"

static uint32_t seed = 1;

static float frnd(void) { return (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f; }

static void *make_weights(int type, int64_t n_in, int64_t n_out)
{
    float *f = malloc(sizeof(float) * (size_t)(n_in * n_out));
    size_t rb = rkm_type_row_bytes(type, n_in);
    uint8_t *w = malloc(rb * (size_t)n_out);
    for (int64_t j = 0; j < n_in * n_out; j++) f[j] = frnd();
    for (int64_t r = 0; r < n_out; r++) rkm_quantize_row(type, f + r * n_in, w + (size_t)r * rb, n_in);
    free(f);
    return w;
}

/* n tasks of the given types/outs on one x; ldy = out + pad. */
static void check_batch(rkm_pool *pool, int n, const int *types, const int64_t *outs, int64_t n_in, int64_t m,
                        int pad, const char *what)
{
    rkm_mm_task *t = calloc((size_t)n, sizeof *t);
    void **w = calloc((size_t)n, sizeof *w);
    float **ya = calloc((size_t)n, sizeof *ya), **yb = calloc((size_t)n, sizeof *yb);
    float *x = malloc(sizeof(float) * (size_t)(n_in * m));
    for (int64_t i = 0; i < n_in * m; i++) x[i] = frnd();
    for (int i = 0; i < n; i++) {
        int64_t ldy = outs[i] + pad;
        w[i] = make_weights(types[i], n_in, outs[i]);
        ya[i] = calloc((size_t)(m * ldy), sizeof(float));
        yb[i] = calloc((size_t)(m * ldy), sizeof(float));
        t[i] = (rkm_mm_task){types[i], w[i], n_in, outs[i], x, m, ya[i], ldy};
        rkm_matmul(NULL, types[i], w[i], n_in, outs[i], x, m, yb[i], ldy);
    }
    rkm_mm_multi(pool, t, n);
    int bad = -1;
    for (int i = 0; i < n; i++)
        if (memcmp(ya[i], yb[i], sizeof(float) * (size_t)(m * (outs[i] + pad))) && bad < 0) bad = i;
    CHECK_MSG(bad < 0, "%s: task %d differs (m %lld, %d threads)", what, bad, (long long)m,
              rkm_pool_n_threads(pool));
    for (int i = 0; i < n; i++) {
        free(w[i]);
        free(ya[i]);
        free(yb[i]);
    }
    free(t), free(w), free(ya), free(yb), free(x);
}

int main(void)
{
    rkm_kernels_init();
    CHECK(rkm_pool_for((rkm_pool *)&seed, RKM_POOL_MIN_WORK - 1) == NULL);
    CHECK(rkm_pool_for((rkm_pool *)&seed, RKM_POOL_MIN_WORK) == (rkm_pool *)&seed);
    rkm_pool *pools[3] = {NULL, rkm_pool_new(2), rkm_pool_new(3)};
    CHECK(pools[1] && pools[2]);
    static const int types3[3] = {RKM_TYPE_F32, RKM_TYPE_Q8_0, RKM_TYPE_Q4_0};
    static const int64_t outs3[3] = {200, 333, 77};
    for (int p = 0; p < 3; p++)
        for (int64_t m = 1; m <= 9; m += 2) {
            check_batch(pools[p], 3, types3, outs3, 256, m, 0, "three types");
            check_batch(pools[p], 3, types3, outs3, 96, m, 5, "ldy wider than the output");
        }
    /* many small tasks (a layer's gate/up of 64 experts): runs span task ends */
    enum { N = 128 };
    int types[N];
    int64_t outs[N];
    for (int i = 0; i < N; i++) {
        types[i] = i % 3 == 0 ? RKM_TYPE_Q8_0 : RKM_TYPE_Q4_0;
        outs[i] = 17 + (i * 13) % 50;
    }
    check_batch(pools[1], N, types, outs, 64, 1, 0, "128 small tasks");
    check_batch(pools[2], N, types, outs, 64, 4, 0, "128 small tasks");
    /* more tasks than one job takes: run one at a time, same results */
    int *tb = malloc(sizeof(int) * (RKM_MM_MULTI_MAX_TASKS + 3));
    int64_t *ob = malloc(sizeof(int64_t) * (RKM_MM_MULTI_MAX_TASKS + 3));
    for (int i = 0; i < RKM_MM_MULTI_MAX_TASKS + 3; i++) tb[i] = RKM_TYPE_Q8_0, ob[i] = 16 + i % 3;
    check_batch(pools[1], RKM_MM_MULTI_MAX_TASKS + 3, tb, ob, 32, 2, 0, "past the task cap");
    free(tb);
    free(ob);
    rkm_pool_free(pools[1]);
    rkm_pool_free(pools[2]);
    return test_done();
}
