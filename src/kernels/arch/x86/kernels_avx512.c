/*
 * kernels_avx512.c - AVX-512 (F/BW/VL/DQ, without VNNI: Skylake-SP,
 * Cascade Lake without it enabled, ...) quantized matmuls (the body is
 * avx512_impl.h) and the float-weight matmuls (f32, f16, bf16; the VNNI
 * set inherits them). The other entries come from the AVX2 set (dispatch.c
 * chains them). Stateless.
 */
#define RKM_AVX512_VNNI 0
#include "kernels/arch/x86/avx512_impl.h"
#include "util/common.h"

Z_DEFINE_MM(mm_q8_0_avx512, z_q8_0_tile)
Z_DEFINE_MM(mm_q4_0_avx512, z_q4_0_tile)

/* ----------------------------------------------------- f32 / f16 / bf16
 * Float weights (the vision towers, f32/f16/bf16 text models): 4 weight
 * rows by 4 activation rows of 16-lane FMAs, 8 loads for 16 FMAs (the
 * AVX2 tile's 2 x 4 of 8 lanes needs 6 for 8); the last n_in % 16 values
 * by masked loads. Activation rows in blocks of about 256 KiB as in the
 * AVX2 set, so that a block stays in L2 while the weights stream past. */
/* f16: 0 f32, 1 f16, 2 bf16; the lanes of mask only (the rest 0) */
static inline __attribute__((always_inline)) __m512 zload_w16(const void *w, int64_t k, int f16, __mmask16 mask)
{
    if (f16 == 2)
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, (const rkm_bf16 *)w + k)), 16));
    if (f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, (const rkm_f16 *)w + k));
    return _mm512_maskz_loadu_ps(mask, (const float *)w + k);
}

static inline __attribute__((always_inline)) void z_fp_tile(const rkm_mm_args *a, int64_t r, int64_t i, const int RW,
                                                            const int RX, const int f16)
{
    const int64_t n = a->n_in, n16 = n & ~(int64_t)15;
    const void *w[4];
    const float *x[4];
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++) w[rr] = (const char *)a->w + (r + rr) * a->w_row_bytes;
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) x[c] = a->x + (i + c) * n;
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[rr][c] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n16; k += 16) {
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) {
            const __m512 wv = zload_w16(w[rr], k, f16, 0xffff);
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) acc[rr][c] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x[c] + k), acc[rr][c]);
        }
    }
    if (n16 < n) {
        const __mmask16 m = (__mmask16)((1u << (n - n16)) - 1);
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) {
            const __m512 wv = zload_w16(w[rr], n16, f16, m);
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) acc[rr][c] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x[c] + n16), acc[rr][c]);
        }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) a->y[(i + c) * a->ldy + r + rr] = _mm512_reduce_add_ps(acc[rr][c]);
}

#define Z_FP_DEFINE_MM(NAME, F16)                                                               \
    static void NAME(const rkm_mm_args *a, int64_t r0, int64_t r1)                              \
    {                                                                                           \
        int64_t r = r0;                                                                         \
        if (a->m == 1) {                                                                        \
            for (; r + 4 <= r1; r += 4) z_fp_tile(a, r, 0, 4, 1, F16);                          \
            for (; r < r1; r++) z_fp_tile(a, r, 0, 1, 1, F16);                                  \
            return;                                                                             \
        }                                                                                       \
        const int64_t bi = RKM_MAX((int64_t)4, ((int64_t)65536 / RKM_MAX(a->n_in, (int64_t)1)) & ~(int64_t)3); \
        for (int64_t i0 = 0; i0 < a->m; i0 += bi) {                                             \
            const int64_t i1 = RKM_MIN(a->m, i0 + bi);                                          \
            for (r = r0; r + 4 <= r1; r += 4) {                                                 \
                int64_t i = i0;                                                                 \
                for (; i + 4 <= i1; i += 4) z_fp_tile(a, r, i, 4, 4, F16);                      \
                for (; i < i1; i++) z_fp_tile(a, r, i, 4, 1, F16);                              \
            }                                                                                   \
            for (; r < r1; r++) {                                                               \
                int64_t i = i0;                                                                 \
                for (; i + 4 <= i1; i += 4) z_fp_tile(a, r, i, 1, 4, F16);                      \
                for (; i < i1; i++) z_fp_tile(a, r, i, 1, 1, F16);                              \
            }                                                                                   \
        }                                                                                       \
    }

Z_FP_DEFINE_MM(mm_f32_avx512, 0)
Z_FP_DEFINE_MM(mm_f16_avx512, 1)
Z_FP_DEFINE_MM(mm_bf16_avx512, 2)

/* The bandwidth probe's read (kernels_impl.h) with 512-bit loads; the
 * AVX-512 VNNI set inherits it. */
static uint64_t read_sum_avx512(const uint64_t *p, size_t n, int streams)
{
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    if (streams == 4) {
        size_t q = n / 4;
        const uint64_t *a = p, *b = a + q, *c = b + q, *d = c + q;
        for (size_t i = 0; i < q; i += 8) {
            _mm_prefetch((const char *)(a + i) + 2048, _MM_HINT_T0);
            _mm_prefetch((const char *)(b + i) + 2048, _MM_HINT_T0);
            _mm_prefetch((const char *)(c + i) + 2048, _MM_HINT_T0);
            _mm_prefetch((const char *)(d + i) + 2048, _MM_HINT_T0);
            s0 = _mm512_add_epi64(s0, _mm512_load_si512(a + i));
            s1 = _mm512_add_epi64(s1, _mm512_load_si512(b + i));
            s2 = _mm512_add_epi64(s2, _mm512_load_si512(c + i));
            s3 = _mm512_add_epi64(s3, _mm512_load_si512(d + i));
        }
    } else {
        for (size_t i = 0; i < n; i += 32) {
            s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
            s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 8));
            s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 16));
            s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 24));
        }
    }
    s0 = _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3));
    /* lanes summed unsigned: _mm512_reduce_add_epi64 adds signed (UB on wrap) */
    uint64_t o[8], r = 0;
    _mm512_storeu_si512(o, s0);
    for (int i = 0; i < 8; i++) r += o[i];
    return r;
}

/* ---------------------------------------- attention over the f16 KV
 * The dot / axpy with f16 keys and values at 16 lanes: half the
 * conversions and FMAs of the AVX2 forms, which leave the attention of a
 * long context short of the memory bandwidth. Row-batched forms give each
 * row exactly the single-row result (same lanes, same order, same
 * reduction); axpy is elementwise, so its value does not depend on the
 * width, only on which elements take the fused path (vector: fused;
 * scalar tail: multiply, then add, as in every set). The rows a batched
 * call walks are prefetched RKM_X86_KV_PF_BYTES ahead, as in the AVX2
 * forms. The VNNI set inherits these. */

static inline __m512 cvt16(const rkm_f16 *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

static inline float dot_tail(float s, const float *x, const rkm_f16 *y, int64_t i, int64_t n)
{
    for (; i < n; i++) s += x[i] * _cvtsh_ss(y[i]);
    return s;
}

static float dot_f32_f16_avx512(const float *x, const rkm_f16 *y, int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), cvt16(y + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), cvt16(y + i + 16), s1);
    }
    if (i + 16 <= n) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), cvt16(y + i), s0);
        i += 16;
    }
    return dot_tail(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)), x, y, i, n);
}

static void dot_f32_f16_rows_avx512(const float *x, const rkm_f16 *y, int64_t stride, int64_t rows, int64_t n,
                                    float *out)
{
    const int64_t ahead = rkm_x86_kv_pf_rows(stride);
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        const rkm_f16 *y0 = y + r * stride;
        for (int64_t j = r + ahead; j < r + ahead + 4 && j < rows; j++) rkm_x86_prefetch_f16_row(y + j * stride, n);
        __m512 s0[4], s1[4];
        for (int j = 0; j < 4; j++) s0[j] = s1[j] = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            __m512 xa = _mm512_loadu_ps(x + i), xb = _mm512_loadu_ps(x + i + 16);
            for (int j = 0; j < 4; j++) {
                s0[j] = _mm512_fmadd_ps(xa, cvt16(y0 + j * stride + i), s0[j]);
                s1[j] = _mm512_fmadd_ps(xb, cvt16(y0 + j * stride + i + 16), s1[j]);
            }
        }
        int64_t i16 = i;
        if (i + 16 <= n) {
            __m512 xa = _mm512_loadu_ps(x + i);
            for (int j = 0; j < 4; j++) s0[j] = _mm512_fmadd_ps(xa, cvt16(y0 + j * stride + i), s0[j]);
            i16 = i + 16;
        }
        for (int j = 0; j < 4; j++)
            out[r + j] = dot_tail(_mm512_reduce_add_ps(_mm512_add_ps(s0[j], s1[j])), x, y0 + j * stride, i16, n);
    }
    for (; r < rows; r++) out[r] = dot_f32_f16_avx512(x, y + r * stride, n);
}

/* y[i] += a * x[i] over [i0, n) by the fixed partition: 16 lanes, then 8,
 * then scalar (multiply, add). */
static inline void axpy_from(float *y, float a, const rkm_f16 *x, int64_t i, int64_t n)
{
    __m512 av = _mm512_set1_ps(a);
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, cvt16(x + i), _mm512_loadu_ps(y + i)));
    if (i + 8 <= n) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm512_castps512_ps256(av),
                                                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))),
                                                _mm256_loadu_ps(y + i)));
        i += 8;
    }
    for (; i < n; i++) y[i] += a * _cvtsh_ss(x[i]);
}

static void axpy_f16_avx512(float *y, float a, const rkm_f16 *x, int64_t n) { axpy_from(y, a, x, 0, n); }

static void axpy_f16_rows_avx512(float *y, const float *a, const rkm_f16 *x, int64_t stride, int64_t rows,
                                 int64_t n)
{
    const int64_t ahead = rkm_x86_kv_pf_rows(stride);
    int64_t i = 0;
    /* 128 columns (8 accumulators: a whole 128-wide head) at a time, y in
     * registers across rows; the first pass prefetches whole rows */
    for (; i + 128 <= n; i += 128) {
        __m512 acc[8];
        for (int j = 0; j < 8; j++) acc[j] = _mm512_loadu_ps(y + i + 16 * j);
        for (int64_t r = 0; r < rows; r++) {
            if (i == 0 && r + ahead < rows) rkm_x86_prefetch_f16_row(x + (r + ahead) * stride, n);
            __m512 av = _mm512_set1_ps(a[r]);
            const rkm_f16 *xr = x + r * stride + i;
            for (int j = 0; j < 8; j++) acc[j] = _mm512_fmadd_ps(av, cvt16(xr + 16 * j), acc[j]);
        }
        for (int j = 0; j < 8; j++) _mm512_storeu_ps(y + i + 16 * j, acc[j]);
    }
    for (; i + 16 <= n; i += 16) {
        __m512 acc = _mm512_loadu_ps(y + i);
        for (int64_t r = 0; r < rows; r++) acc = _mm512_fmadd_ps(_mm512_set1_ps(a[r]), cvt16(x + r * stride + i), acc);
        _mm512_storeu_ps(y + i, acc);
    }
    /* the rest by the single-row partition, row by row */
    if (i < n)
        for (int64_t r = 0; r < rows; r++) axpy_from(y, a[r], x + r * stride, i, n);
}

const rkm_kernel_set rkm_kernels_avx512 = {
    .name = "avx512",
    .mm_q8_0 = mm_q8_0_avx512,
    .mm_q4_0 = mm_q4_0_avx512,
    .mm_f32 = mm_f32_avx512,
    .mm_f16 = mm_f16_avx512,
    .mm_bf16 = mm_bf16_avx512,
    .dot_f32_f16 = dot_f32_f16_avx512,
    .axpy_f16 = axpy_f16_avx512,
    .dot_f32_f16_rows = dot_f32_f16_rows_avx512,
    .axpy_f16_rows = axpy_f16_rows_avx512,
    .read_sum = read_sum_avx512,
};
