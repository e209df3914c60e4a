/*
 * rknn_i8.c - the rknn_i8 weight type (layout in rknn_i8.h): the packer the
 * converter calls, the unpacker, the per-row activation quantization the
 * NPU path shares, and the CPU fallback kernel.
 *
 * Stateless; any thread. rkm_rknn_i8_matmul_cpu allocates its quantized
 * activations per call and frees them before returning.
 */
#include "kernels/rknn_i8.h"

#include <math.h>

#include "util/common.h"

#define T RKM_RKNN_I8_TILE

int rkm_rknn_i8_shape_ok(int64_t K, int64_t N)
{
    return K > 0 && N > 0 && K % T == 0 && N % T == 0;
}

size_t rkm_rknn_i8_bytes(int64_t K, int64_t N)
{
    return (size_t)K * (size_t)N + 4 * (size_t)N;
}

static size_t idx(int64_t K, int64_t n, int64_t k)
{
    return (size_t)(((n / T) * (K / T) + k / T) * T * T + (n % T) * T + k % T);
}

const float *rkm_rknn_i8_scales(const void *src, int64_t K, int64_t N)
{
    return (const float *)((const uint8_t *)src + (size_t)K * (size_t)N);
}

void rkm_rknn_i8_pack(const float *w, int64_t K, int64_t N, void *dst)
{
    rkm_rknn_i8_pack_rows(w, K, N, 0, N, dst);
}

void rkm_rknn_i8_pack_rows(const float *w, int64_t K, int64_t N, int64_t n0, int64_t nr, void *dst)
{
    int8_t *q = dst;
    float *sc = (float *)((uint8_t *)dst + (size_t)K * (size_t)N);
    for (int64_t n = n0; n < n0 + nr; n++) {
        const float *row = w + (size_t)(n - n0) * (size_t)K;
        float amax = 0;
        for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(row[k]));
        float s = amax / 127.0f, inv = s > 0 ? 1.0f / s : 0.0f;
        for (int64_t k = 0; k < K; k++) {
            long v = lrintf(row[k] * inv);
            q[idx(K, n, k)] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        sc[n] = s;
    }
}

void rkm_rknn_i8_unpack(const void *src, int64_t K, int64_t N, float *w)
{
    const int8_t *q = src;
    const float *sc = rkm_rknn_i8_scales(src, K, N);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) w[(size_t)n * (size_t)K + (size_t)k] = sc[n] * (float)q[idx(K, n, k)];
}

float rkm_rknn_quantize_act(const float *x, int64_t n, int8_t *q)
{
    float amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = amax / 127.0f, inv = s > 0 ? 1.0f / s : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        long v = lrintf(x[i] * inv);
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return s;
}

typedef struct {
    const int8_t *w;
    const float *bs;
    int64_t K, N, m;
    const int8_t *xq;
    const float *as;
    float *y;
    int64_t ldy;
} cpu_job;

static void cpu_worker(void *ctx, int ith, int nth)
{
    cpu_job *j = ctx;
    int64_t nt = j->N / T, kt = j->K / T;
    for (int64_t t = ith; t < nt; t += nth) {
        const int8_t *tile = j->w + (size_t)(t * kt) * T * T;
        for (int64_t r = 0; r < j->m; r++) {
            const int8_t *xr = j->xq + (size_t)r * (size_t)j->K;
            int64_t acc[T] = {0}; /* exact for any K, like the NPU path */
            for (int64_t b = 0; b < kt; b++) {
                const int8_t *blk = tile + (size_t)b * T * T, *xb = xr + b * T;
                for (int c = 0; c < T; c++) {
                    const int8_t *wr = blk + c * T;
                    int32_t s = 0;
                    for (int i = 0; i < T; i++) s += (int32_t)wr[i] * (int32_t)xb[i];
                    acc[c] += s;
                }
            }
            float *yr = j->y + (size_t)r * (size_t)j->ldy + t * T;
            for (int c = 0; c < T; c++) yr[c] = rkm_rknn_dequant(acc[c], j->as[r], j->bs[t * T + c]);
        }
    }
}

void rkm_rknn_i8_matmul_cpu(rkm_pool *pool, const void *w, int64_t K, int64_t N, const float *x, int64_t m,
                            float *y, int64_t ldy)
{
    int8_t *xq = malloc((size_t)m * (size_t)K + 1);
    float *as = malloc(sizeof(float) * (size_t)m + 1);
    RKM_ASSERT(xq && as); /* like the kernels' scratch: no way to report from here */
    for (int64_t r = 0; r < m; r++) as[r] = rkm_rknn_quantize_act(x + (size_t)r * (size_t)K, K, xq + (size_t)r * (size_t)K);
    cpu_job j = {w, rkm_rknn_i8_scales(w, K, N), K, N, m, xq, as, y, ldy};
    rkm_pool_run((double)K * (double)N * (double)m < 65536.0 ? NULL : pool, cpu_worker, &j);
    free(xq);
    free(as);
}
