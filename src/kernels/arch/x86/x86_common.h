/*
 * x86_common.h - AVX2 helpers shared by the x86 kernel files (each file
 * includes it and compiles the helpers with its own ISA flags; include it
 * only from files built with at least -mavx2 -mfma -mf16c).
 *
 * The vector exp/tanh are accurate to about 2 ulp (Cephes-style
 * polynomial on r = x - n ln2, |r| <= ln2/2), handle overflow to inf,
 * gradual underflow to subnormals and 0, and propagate NaN.
 */
#ifndef RKM_X86_COMMON_H
#define RKM_X86_COMMON_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "kernels/arch/x86/x86_tables.h"

/* A vector the compiler must hold as it is at this point. An integer
 * accumulator passed through it after each add is summed in the order
 * written, in one register: otherwise GCC reassociates a tile's chains of
 * vpmaddubsw sums into trees whose products it spills to the stack, and
 * the loop runs at the stack's store-to-load latency (the packed Q4_K
 * prefill here: 120 -> 165 GOP/s a thread). */
#define RKM_X86_PIN(v) __asm__("" : "+x"(v))

/* Attention's row-batched f16 kernels prefetch every line of the rows
 * this many bytes ahead of the one they compute (a head's keys or values
 * are one contiguous run per thread). */
#define RKM_X86_KV_PF_BYTES 2048

static inline void rkm_x86_prefetch_f16_row(const uint16_t *row, int64_t n)
{
    for (int64_t b = 0; b < n * 2; b += 64) _mm_prefetch((const char *)row + b, _MM_HINT_T0);
}

/* Rows of `stride` f16 values that make RKM_X86_KV_PF_BYTES, at least one. */
static inline int64_t rkm_x86_kv_pf_rows(int64_t stride)
{
    int64_t rb = stride * 2;
    return rb >= RKM_X86_KV_PF_BYTES ? 1 : (RKM_X86_KV_PF_BYTES + rb - 1) / rb;
}

static inline __m256 rkm_x86_abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static inline float rkm_x86_hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float rkm_x86_hmax_ps(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int32_t rkm_x86_hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* roundf (half away from zero), exactly: t = trunc(v); v - t is exact;
 * step away from zero when |v - t| >= 0.5. ggml's reference quantizer uses
 * roundf, so the SIMD quantizers must too (round-to-even would differ on
 * exact ties). */
static inline __m256 rkm_x86_roundf_ps(__m256 v)
{
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 frac = rkm_x86_abs_ps(_mm256_sub_ps(v, t));
    __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    __m256 ge = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    return _mm256_add_ps(t, _mm256_and_ps(ge, step));
}

static inline __m256i rkm_x86_tail_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256 rkm_x86_exp_ps(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(88.7228394f), lo = _mm256_set1_ps(-104.0f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n in two factors so n in [-150, 128] stays representable */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
    res = _mm256_blendv_ps(res, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    res = _mm256_blendv_ps(res, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* tanh(z) = 1 - 2 / (exp(2z) + 1): absolute error a few ulp of 1, which
 * is what GELU needs (it adds 1 to it). */
static inline __m256 rkm_x86_tanh_ps(__m256 z)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = rkm_x86_exp_ps(_mm256_add_ps(z, z));
    return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
}

#endif
