/*
 * kquant_avx512vnni.c - AVX-512 VNNI matmuls of the K-quants (Q2_K..Q6_K)
 * and IQ4_XS, bit-identical to the reference (kernels_impl.h), as the
 * AVX2 versions (kquant_avx2.c) whose decoding they share
 * (kquant_x86_impl.h). Compiled with the AVX-512 VNNI flags (by suffix).
 *
 * A super-block is four zmm of 64 quants. vpdpbusd sums four u8 x s8
 * products into each int32 lane: lanes 4g..4g+3 of a zmm belong to group
 * g of 16 values. Each lane (at most 4 * 63 * 127 = 32004 for the
 * K-quants: it fits int16) is multiplied by its group's scale with
 * vpmaddwd against (scale, 0) pairs; IQ4_XS's levels are stored + 128
 * (vpdpbusd wants them unsigned, and 4 * 241 * 127 does not fit int16),
 * scaled with vpmulld and corrected by 128 * sum(sc * x-sums) exactly.
 * Decode (m = 1) takes four weight rows per step; prefill decodes a
 * weight super-block once and multiplies it by four activation rows.
 *
 * Stateless; safe from any thread.
 */
#include "kernels/arch/x86/kquant_x86.h"
#include "kernels/arch/x86/kquant_x86_impl.h"

/* One weight row's super-block, ready for the dot products. */
typedef struct {
    __m512i u[4], s[4];
    __m256i sc16, mn16;
    float d, dmin;
} zq;

KQ_INLINE int zq_offset(const int type) { return type == RKM_TYPE_IQ4_XS ? 7 : kq_offset(type); }

KQ_INLINE void zq_decode(const int type, const uint8_t *b, zq *z)
{
    kq_head h;
    kq_head_of(type, b, &h);
    z->sc16 = h.sc16;
    z->mn16 = h.mn16;
    z->d = h.d;
    z->dmin = h.dmin;
    const __m512i sc32 = _mm512_cvtepi16_epi32(h.sc16);
    const __m512i lo16 = _mm512_set1_epi32(0xffff);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i u = _mm512_inserti64x4(_mm512_castsi256_si512(kq_chunk(type, b, 2 * j)), kq_chunk(type, b, 2 * j + 1), 1);
        if (type == RKM_TYPE_IQ4_XS) u = _mm512_xor_si512(u, _mm512_set1_epi8((char)0x80));
        z->u[j] = u;
        const int g = 4 * j;
        __m512i s = _mm512_permutexvar_epi32(
            _mm512_setr_epi32(g, g, g, g, g + 1, g + 1, g + 1, g + 1, g + 2, g + 2, g + 2, g + 2, g + 3, g + 3, g + 3, g + 3),
            sc32);
        z->s[j] = type == RKM_TYPE_IQ4_XS ? s : _mm512_and_si512(s, lo16);
    }
}

/* isum as 8 int32 lanes to be summed, and msum likewise, of one row's
 * super-block against one activation row (x, its sums of 16 bs16). */
KQ_INLINE void zq_dot(const int type, const zq *z, const int8_t *x, __m256i bs16, __m256i *is, __m256i *ms)
{
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), z->u[j], _mm512_load_si512(x + 64 * j));
        acc = _mm512_add_epi32(acc, type == RKM_TYPE_IQ4_XS ? _mm512_mullo_epi32(dp, z->s[j]) : _mm512_madd_epi16(dp, z->s[j]));
    }
    __m256i a = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
    if (zq_offset(type) > 0) a = _mm256_sub_epi32(a, _mm256_slli_epi32(_mm256_madd_epi16(z->sc16, bs16), zq_offset(type)));
    *is = a;
    *ms = kq_has_min(type) ? _mm256_madd_epi16(z->mn16, bs16) : _mm256_setzero_si256();
}

KQ_INLINE __m256i zq_bs16(const int type, const int32_t *xs)
{
    return kq_has_min(type) || zq_offset(type) > 0 ? act_sums16(xs) : _mm256_setzero_si256();
}

/* Decode: weight rows [r, r+4) times activation row i. */
KQ_INLINE void zq_rows4(const rkm_mm_args *a, const int type, int64_t r, int64_t i)
{
    const size_t bb = rkm_type_block_bytes(type), rb = a->w_row_bytes;
    const int64_t nb = a->n_in / 256;
    const uint8_t *w = (const uint8_t *)a->w + (size_t)r * rb;
    const int8_t *xq = a->xq + i * a->n_in;
    const float *xd = a->xd + i * nb;
    const int32_t *xs = a->xs + i * (a->n_in / 16);
    const size_t pfd = a->m == 1 ? KQ_PF_BYTES : 0;
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256i bs16 = zq_bs16(type, xs + 16 * b);
        __m256i is[4], ms[4];
        float d[4], dm[4];
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; rr++) {
            const uint8_t *blk = w + rr * rb + (size_t)b * bb;
            if (pfd) prefetch_block(blk + pfd, bb);
            zq z;
            zq_decode(type, blk, &z);
            zq_dot(type, &z, xq + 256 * b, bs16, &is[rr], &ms[rr]);
            d[rr] = z.d;
            dm[rr] = z.dmin;
        }
        const __m128 dx = _mm_set1_ps(xd[b]);
        acc = _mm_fmadd_ps(_mm_mul_ps(_mm_loadu_ps(d), dx), _mm_cvtepi32_ps(hsum4(is[0], is[1], is[2], is[3])), acc);
        if (kq_has_min(type)) {
            const __m128 dmn = _mm_xor_ps(_mm_mul_ps(_mm_loadu_ps(dm), dx), _mm_set1_ps(-0.0f));
            acc = _mm_fmadd_ps(dmn, _mm_cvtepi32_ps(hsum4(ms[0], ms[1], ms[2], ms[3])), acc);
        }
    }
    _mm_storeu_ps(a->y + i * a->ldy + r, acc);
}

/* Prefill: weight row r times activation rows [i, i+XN), XN <= 4; the
 * row's super-block is decoded once for all of them. */
KQ_INLINE void zq_acts(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int XN)
{
    const size_t bb = rkm_type_block_bytes(type);
    const int64_t nb = a->n_in / 256, ng = a->n_in / 16;
    const uint8_t *w = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        zq z;
        zq_decode(type, w + (size_t)b * bb, &z);
        __m256i is[4], ms[4];
        float dx[4] = {0};
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            if (c < XN) {
                const int64_t ii = i + c;
                zq_dot(type, &z, a->xq + ii * a->n_in + 256 * b, zq_bs16(type, a->xs + ii * ng + 16 * b), &is[c], &ms[c]);
                dx[c] = a->xd[ii * nb + b];
            } else
                is[c] = ms[c] = _mm256_setzero_si256();
        }
        const __m128 dxv = _mm_loadu_ps(dx);
        acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(z.d), dxv), _mm_cvtepi32_ps(hsum4(is[0], is[1], is[2], is[3])), acc);
        if (kq_has_min(type)) {
            const __m128 dmn = _mm_xor_ps(_mm_mul_ps(_mm_set1_ps(z.dmin), dxv), _mm_set1_ps(-0.0f));
            acc = _mm_fmadd_ps(dmn, _mm_cvtepi32_ps(hsum4(ms[0], ms[1], ms[2], ms[3])), acc);
        }
    }
    float out[4];
    _mm_storeu_ps(out, acc);
    for (int c = 0; c < XN; c++) a->y[(i + c) * a->ldy + r] = out[c];
}

KQ_INLINE void zq_mm(const rkm_mm_args *a, const int type, int64_t r0, int64_t r1)
{
    if (a->m == 1) {
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) zq_rows4(a, type, r, 0);
        for (; r < r1; r++) zq_acts(a, type, r, 0, 1);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t i = 0;
        for (; i + 4 <= a->m; i += 4) zq_acts(a, type, r, i, 4);
        if (a->m - i == 3) zq_acts(a, type, r, i, 3);
        else if (a->m - i == 2) zq_acts(a, type, r, i, 2);
        else if (a->m - i == 1) zq_acts(a, type, r, i, 1);
    }
}

#define ZQ_DEFINE(NAME, TYPE) \
    void NAME(const rkm_mm_args *a, int64_t r0, int64_t r1) { zq_mm(a, TYPE, r0, r1); }

ZQ_DEFINE(rkm_mm_q2_k_avx512vnni, RKM_TYPE_Q2_K)
ZQ_DEFINE(rkm_mm_q3_k_avx512vnni, RKM_TYPE_Q3_K)
ZQ_DEFINE(rkm_mm_q4_k_avx512vnni, RKM_TYPE_Q4_K)
ZQ_DEFINE(rkm_mm_q5_k_avx512vnni, RKM_TYPE_Q5_K)
ZQ_DEFINE(rkm_mm_q6_k_avx512vnni, RKM_TYPE_Q6_K)
ZQ_DEFINE(rkm_mm_iq4_xs_avx512vnni, RKM_TYPE_IQ4_XS)
