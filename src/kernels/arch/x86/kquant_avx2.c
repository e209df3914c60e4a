/*
 * kquant_avx2.c - AVX2 matmuls of the K-quants (Q2_K..Q6_K), IQ4_XS,
 * IQ4_NL, MXFP4 and the 32-value Q4_1, Q5_0, Q5_1, bit-identical to the reference (the contract in
 * kernels_impl.h): integer sums in vectors, reduced exactly, then the
 * reference's float steps lane by lane, four weight rows to a vector.
 * Compiled with -mavx2 -mfma -mf16c (by suffix); the AVX-512 sets inherit
 * these entries from the AVX2 set.
 *
 * A super-block of 256 values is 8 chunks of 32. Each chunk decodes to 32
 * bytes: unsigned quants u (Q2_K..Q6_K; Q3_K and Q6_K store q + 4 and
 * q + 32, taken off afterwards as 4 or 32 times sum(sc * x-sums of 16),
 * which is exact) or signed levels (the IQ4 lookups: sign trick,
 * |w| x sign(w)*x). vpmaddubsw gives pair sums (at most 2 * 63 * 127 or
 * 2 * 127 * 127: no saturation), vpmaddwd multiplies them by the group
 * scales of 16 values (both halves of a chunk may differ) and sums to
 * int32. Mins use the activations' sums of 16 (kernels_impl.h).
 *
 * Stateless; safe from any thread.
 */
#include "kernels/arch/x86/kquant_x86.h"
#include "kernels/arch/x86/kquant_x86_impl.h"

/* Weight rows [r, r+RW) (RW 4 or 1) times activation row i. */
KQ_INLINE void kq_rows(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RW)
{
    const size_t bb = rkm_type_block_bytes(type), rb = a->w_row_bytes;
    const int64_t nb = a->n_in / 256;
    const uint8_t *w = (const uint8_t *)a->w + (size_t)r * rb;
    const int8_t *xq = a->xq + i * a->n_in;
    const float *xd = a->xd + i * nb;
    const int32_t *xs = a->xs + i * (a->n_in / 16);
    const size_t pfd = a->m == 1 ? KQ_PF_BYTES : 0;
    __m128 acc4 = _mm_setzero_ps();
    float acc1 = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const __m256i bs16 = kq_has_min(type) || kq_offset(type) > 0 ? act_sums16(xs + 16 * b) : _mm256_setzero_si256();
        __m256i is[4], ms[4];
        float d[4], dm[4];
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) {
            const uint8_t *blk = w + rr * rb + (size_t)b * bb;
            if (pfd) prefetch_block(blk + pfd, bb);
            kq_head h;
            kq_head_of(type, blk, &h);
            is[rr] = kq_isum(type, blk, &h, xq + 256 * b, bs16);
            ms[rr] = kq_has_min(type) ? _mm256_madd_epi16(h.mn16, bs16) : _mm256_setzero_si256();
            d[rr] = h.d;
            dm[rr] = h.dmin;
        }
        if (RW == 4) {
            const __m128 dx = _mm_set1_ps(xd[b]);
            const __m128 dd = _mm_mul_ps(_mm_loadu_ps(d), dx);
            acc4 = _mm_fmadd_ps(dd, _mm_cvtepi32_ps(hsum4(is[0], is[1], is[2], is[3])), acc4);
            if (kq_has_min(type)) {
                const __m128 dmn = _mm_xor_ps(_mm_mul_ps(_mm_loadu_ps(dm), dx), _mm_set1_ps(-0.0f));
                acc4 = _mm_fmadd_ps(dmn, _mm_cvtepi32_ps(hsum4(ms[0], ms[1], ms[2], ms[3])), acc4);
            }
        } else {
            acc1 = fmaf(d[0] * xd[b], (float)rkm_x86_hsum_epi32(is[0]), acc1);
            if (kq_has_min(type)) acc1 = fmaf(-(dm[0] * xd[b]), (float)rkm_x86_hsum_epi32(ms[0]), acc1);
        }
    }
    float *y = a->y + i * a->ldy + r;
    if (RW == 4) _mm_storeu_ps(y, acc4);
    else y[0] = acc1;
}

/* ------------------------------------------- 32-value blocks (q8_0 acts) */
/* The 32 fifth bits of q5_0 / q5_1 (bit k of qh for value k) as 0x10 in
 * byte k. */
KQ_INLINE __m256i q5_high(const uint8_t *qhp)
{
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                         3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), sel);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The 32 quants of a block: signed levels (IQ4_NL, MXFP4: *sgn = 1) or
 * unsigned u (Q4_1, Q5_1: x = d u + m; Q5_0: x = d (u - 16)). */
KQ_INLINE __m256i blk32_quants(const int type, const uint8_t *b)
{
    switch (type) {
    case RKM_TYPE_Q4_1: return nibbles16(b + 4);
    case RKM_TYPE_Q5_0: return _mm256_or_si256(nibbles16(b + 6), q5_high(b + 2));
    case RKM_TYPE_Q5_1: return _mm256_or_si256(nibbles16(b + 8), q5_high(b + 4));
    default: {
        const int8_t *tab = type == RKM_TYPE_MXFP4 ? rkm_kvalues_mxfp4 : rkm_kvalues_iq4nl;
        const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tab));
        return _mm256_shuffle_epi8(kv, nibbles16(b + (type == RKM_TYPE_MXFP4 ? 1 : 2)));
    }
    }
}

KQ_INLINE void b32_rows(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RW)
{
    const size_t bb = rkm_type_block_bytes(type), rb = a->w_row_bytes;
    const int64_t nb = a->n_in / 32;
    const uint8_t *w = (const uint8_t *)a->w + (size_t)r * rb;
    const int8_t *xq = a->xq + i * a->n_in;
    const float *xd = a->xd + i * nb;
    const int32_t *xs = a->xs + i * nb;
    const float *xm = blk32_min(type) ? a->xm + i * nb : NULL;
    const size_t pfd = a->m == 1 ? KQ_PF_BYTES : 0;
    const __m256i ones = _mm256_set1_epi16(1);
    __m128 acc4 = _mm_setzero_ps();
    float acc1 = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const __m256i xv = _mm256_load_si256((const __m256i *)(xq + 32 * b));
        __m256i is[4];
        float d[4], dm[4];
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) {
            const uint8_t *blk = w + rr * rb + (size_t)b * bb;
            if (pfd && (b & 3) == 0) prefetch_block(blk + pfd, 2 * bb);
            __m256i q = blk32_quants(type, blk), p;
            if (blk32_signed(type)) p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(xv, q));
            else p = _mm256_maddubs_epi16(q, xv);
            is[rr] = _mm256_madd_epi16(p, ones);
            d[rr] = blk32_d(type, blk);
            if (blk32_min(type)) dm[rr] = -f16_at(blk + 2);
        }
        /* q5_0 stores q + 16: exactly 16 * sum(x) too many */
        const int32_t off = type == RKM_TYPE_Q5_0 ? 16 * xs[b] : 0;
        if (RW == 4) {
            const __m128 dx = _mm_set1_ps(xd[b]);
            __m128i isum = hsum4(is[0], is[1], is[2], is[3]);
            if (off) isum = _mm_sub_epi32(isum, _mm_set1_epi32(off));
            acc4 = _mm_fmadd_ps(_mm_mul_ps(_mm_loadu_ps(d), dx), _mm_cvtepi32_ps(isum), acc4);
            if (blk32_min(type)) {
                const __m128 m = _mm_xor_ps(_mm_loadu_ps(dm), _mm_set1_ps(-0.0f));
                acc4 = _mm_fmadd_ps(m, _mm_set1_ps(xm[b]), acc4);
            }
        } else {
            acc1 = fmaf(d[0] * xd[b], (float)(rkm_x86_hsum_epi32(is[0]) - off), acc1);
            if (blk32_min(type)) acc1 = fmaf(-dm[0], xm[b], acc1);
        }
    }
    float *y = a->y + i * a->ldy + r;
    if (RW == 4) _mm_storeu_ps(y, acc4);
    else y[0] = acc1;
}

/* Four rows at a time, the rest one by one; every activation row. */
#define KQ_DEFINE(NAME, ROWS, TYPE)                                                    \
    void NAME(const rkm_mm_args *a, int64_t r0, int64_t r1)                            \
    {                                                                                  \
        int64_t r = r0;                                                                \
        for (; r + 4 <= r1; r += 4)                                                    \
            for (int64_t i = 0; i < a->m; i++) ROWS(a, TYPE, r, i, 4);                 \
        for (; r < r1; r++)                                                            \
            for (int64_t i = 0; i < a->m; i++) ROWS(a, TYPE, r, i, 1);                 \
    }

KQ_DEFINE(rkm_mm_q2_k_avx2, kq_rows, RKM_TYPE_Q2_K)
KQ_DEFINE(rkm_mm_q3_k_avx2, kq_rows, RKM_TYPE_Q3_K)
KQ_DEFINE(rkm_mm_q4_k_avx2, kq_rows, RKM_TYPE_Q4_K)
KQ_DEFINE(rkm_mm_q5_k_avx2, kq_rows, RKM_TYPE_Q5_K)
KQ_DEFINE(rkm_mm_q6_k_avx2, kq_rows, RKM_TYPE_Q6_K)
KQ_DEFINE(rkm_mm_iq4_xs_avx2, kq_rows, RKM_TYPE_IQ4_XS)
KQ_DEFINE(rkm_mm_q4_1_avx2, b32_rows, RKM_TYPE_Q4_1)
KQ_DEFINE(rkm_mm_q5_0_avx2, b32_rows, RKM_TYPE_Q5_0)
KQ_DEFINE(rkm_mm_q5_1_avx2, b32_rows, RKM_TYPE_Q5_1)
KQ_DEFINE(rkm_mm_iq4_nl_avx2, b32_rows, RKM_TYPE_IQ4_NL)
KQ_DEFINE(rkm_mm_mxfp4_avx2, b32_rows, RKM_TYPE_MXFP4)

/* ----------------------------------- grid types (rows decoded, q8_K acts) */
/* Four weight rows at a time (fewer at the end: the missing lanes repeat
 * the first row) are decoded once into the integer form (grid_rows.c),
 * each chunk's two group scales spread to the 16 int16 lanes vpmaddwd
 * pairs with, and multiplied by every activation row: |q| <= 62, so the
 * sign trick's pair sums stay below 2^15 (kernels_impl.h). */
void rkm_mm_grid_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    const int64_t n = a->n_in, nb = n / 256;
    uint8_t *buf = rkm_kernel_scratch((size_t)4 * (2 * (size_t)n + (size_t)nb * 4) + (size_t)nb * 32);
    int8_t *q = (int8_t *)buf;
    __m256i *se = (__m256i *)(buf + 4 * (size_t)n);
    float *dd = (float *)(buf + 8 * (size_t)n);
    int16_t *sc = (int16_t *)(dd + 4 * nb);
    for (int64_t r = r0; r < r1; r += 4) {
        const int rw = r1 - r < 4 ? (int)(r1 - r) : 4;
        for (int rr = 0; rr < 4; rr++) {
            const uint8_t *w = (const uint8_t *)a->w + (size_t)(r + (rr < rw ? rr : 0)) * a->w_row_bytes;
            rkm_grid_decode_row(a->type, w, nb, q + rr * n, sc, dd + rr * nb);
            for (int64_t c = 0; c < 8 * nb; c++)
                se[rr * 8 * nb + c] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * c + 1]), _mm_set1_epi16(sc[2 * c]));
        }
        for (int64_t i = 0; i < a->m; i++) {
            const int8_t *xq = a->xq + i * n;
            const float *xd = a->xd + i * nb;
            __m128 acc = _mm_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                __m256i is[4];
                for (int rr = 0; rr < 4; rr++) is[rr] = _mm256_setzero_si256();
#pragma GCC unroll 2
                for (int c = 0; c < 8; c++) {
                    const __m256i xv = _mm256_load_si256((const __m256i *)(xq + 256 * b + 32 * c));
#pragma GCC unroll 4
                    for (int rr = 0; rr < 4; rr++) {
                        const __m256i u = _mm256_load_si256((const __m256i *)(q + rr * n + 256 * b + 32 * c));
                        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(u, u), _mm256_sign_epi8(xv, u));
                        is[rr] = _mm256_add_epi32(is[rr], _mm256_madd_epi16(p, se[(rr * nb + b) * 8 + c]));
                    }
                }
                const __m128 d4 = _mm_setr_ps(dd[b], dd[nb + b], dd[2 * nb + b], dd[3 * nb + b]);
                acc = _mm_fmadd_ps(_mm_mul_ps(d4, _mm_set1_ps(xd[b])), _mm_cvtepi32_ps(hsum4(is[0], is[1], is[2], is[3])),
                                   acc);
            }
            float out[4];
            _mm_storeu_ps(out, acc);
            memcpy(a->y + i * a->ldy + r, out, (size_t)rw * sizeof(float));
        }
    }
}

/* ------------------------------------------------- packed Q4_K ----
 * The packed layout (kernels.h) in two halves of 8 rows (the first and
 * second 32 bytes of each 64-byte part), one row per int32 lane: per
 * sub-block of 32 values, 8 vpmaddubsw of the nibbles by the 4 activation
 * bytes each part holds summed in 16 bits (at most 8 x 2 x 15 x 128 =
 * 30720), then one vpmaddwd by ones, times the sub-block's 6-bit scale;
 * the mins times the activations' sums of 32; the reference's two fused
 * multiply-adds per row and super-block (bit-identical to it). Decode
 * reads PKK2_STREAMS groups as streams prefetched 2 KiB ahead: one, as
 * the AVX-512 kernels (kquant_avx512vnni.c; here Q4_K from memory at
 * expert shapes 13 -> 23 GB/s, Q6_K 8 -> 19, resident olmoe Q4_K_M
 * 35 -> 54 tok/s against four); prefill takes 4 activation rows at a
 * time. */
#define PKK2_PF_BYTES 2048
#ifndef PKK2_STREAMS
#define PKK2_STREAMS 1
#endif

/* The row loop of the packed 256-value kernels here that take 2
 * activation rows at a time in prefill (kquant_x86_impl.h); Q4_K, Q5_K
 * and Q6_K take 4. */
#define PKK2_DRIVE(FN, a, type, r0, r1) PKQ_DRIVE(FN, a, type, r0, r1, PKK2_STREAMS, 2)

/* The 8 sub-blocks' scales and mins of one half (8 rows) of a group, as
 * int32 rows of a table in memory (sc[s], mn[s]): held in registers they
 * crowd out the sums of the loop that reads them. */
KQ_INLINE void pkk2_scales(const uint8_t *blk, int half, int32_t sc[8][8], int32_t mn[8][8])
{
    const __m256i m63 = _mm256_set1_epi32(63), m15 = _mm256_set1_epi32(15);
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 64 + 16 * s + 8 * half)));
        const __m256i m = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 64 + 16 * (s + 4) + 8 * half)));
        const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 64 + 16 * (s + 8) + 8 * half)));
        _mm256_store_si256((__m256i *)sc[s], _mm256_and_si256(a, m63));
        _mm256_store_si256((__m256i *)mn[s], _mm256_and_si256(m, m63));
        _mm256_store_si256((__m256i *)sc[s + 4], _mm256_or_si256(_mm256_and_si256(e, m15), _mm256_slli_epi32(_mm256_srli_epi32(a, 6), 4)));
        _mm256_store_si256((__m256i *)mn[s + 4], _mm256_or_si256(_mm256_srli_epi32(e, 4), _mm256_slli_epi32(_mm256_srli_epi32(m, 6), 4)));
    }
}

/* RX (up to 4) activation rows x NG groups from row r of packed Q4_K or
 * Q5_K. A sub-block at a time (its 8 parts' low or high nibbles, Q5_K's
 * fifth bit, bit s of the qh word, masked and shifted to bit 4, or'ed in),
 * so that the RX 16-bit sums, the int32 sums and the unpacking stay in
 * registers: kept in memory, they bound the loop by store-to-load
 * latency. Q5_K's 16-bit sums are widened every 4 parts (at most 4 x 2 x
 * 31 x 128 = 31744). */
KQ_INLINE void pkk2_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX, const int NG)
{
    const int q5 = type == RKM_TYPE_Q5_K;
    const size_t blkb = rkm_pk_block(type), qs_at = q5 ? 256 + 8 * 64 : 256;
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const size_t gstride = a->w_row_bytes * RKM_PACK_ROWS;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1), m10 = _mm256_set1_epi8(0x10);
    __m256 acc[4][2][4];
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) acc[k][h][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * blkb;
            if (RX == 1) prefetch_stream(grp, k, NG, gstride, (size_t)b * blkb, blkb, PKK2_PF_BYTES);
#pragma GCC unroll 1
            for (int h = 0; h < 2; h++) {
                int32_t sc[8][8] __attribute__((aligned(32))), mn[8][8] __attribute__((aligned(32)));
                __m256i isum[4];
                pkk2_scales(blk, h, sc, mn);
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 1
                for (int j = 0; j < 4; j++)
#pragma GCC unroll 2
                    for (int hi = 0; hi < 2; hi++) { /* sub-block 2j + hi */
                        const int s = 2 * j + hi;
                        __m256i s16[4];
#pragma GCC unroll 4
                        for (int c = 0; c < RX; c++) s16[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
                        for (int hh = 0; hh < 8; hh++) {
                            const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + qs_at + 64 * (8 * j + hh) + 32 * h));
                            __m256i w = _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, m4);
                            if (q5) {
                                const __m256i hb = _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)(blk + 256 + 64 * hh + 32 * h)),
                                                                    _mm_cvtsi32_si128(s));
                                w = _mm256_or_si256(w, _mm256_and_si256(_mm256_slli_epi16(hb, 4), m10));
                            }
#pragma GCC unroll 4
                            for (int c = 0; c < RX; c++) {
                                int32_t x;
                                memcpy(&x, a->xq + (i + c) * a->n_in + 256 * b + 32 * s + 4 * hh, 4);
                                s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(w, _mm256_set1_epi32(x)));
                                RKM_X86_PIN(s16[c]);
                                if (q5 && hh == 3) {
                                    isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(_mm256_madd_epi16(s16[c], ones), _mm256_load_si256((const __m256i *)sc[s])));
                                    s16[c] = _mm256_setzero_si256();
                                }
                            }
                        }
#pragma GCC unroll 4
                        for (int c = 0; c < RX; c++)
                            isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(_mm256_madd_epi16(s16[c], ones), _mm256_load_si256((const __m256i *)sc[s])));
                    }
                const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
                const __m256 dm8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * h)));
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++) {
                    const int32_t *xs = a->xs + (i + c) * ng16 + 16 * b;
                    __m256i ms = _mm256_setzero_si256();
#pragma GCC unroll 8
                    for (int s = 0; s < 8; s++)
                        ms = _mm256_add_epi32(ms, _mm256_mullo_epi32(_mm256_load_si256((const __m256i *)mn[s]), _mm256_set1_epi32(xs[2 * s] + xs[2 * s + 1])));
                    const __m256 dx = _mm256_set1_ps(a->xd[(i + c) * nb + b]);
                    acc[k][h][c] = _mm256_fmadd_ps(_mm256_mul_ps(d8, dx), _mm256_cvtepi32_ps(isum[c]), acc[k][h][c]);
                    const __m256 ndm = _mm256_xor_ps(_mm256_mul_ps(dm8, dx), _mm256_set1_ps(-0.0f));
                    acc[k][h][c] = _mm256_fmadd_ps(ndm, _mm256_cvtepi32_ps(ms), acc[k][h][c]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++)
            for (int h = 0; h < 2; h++)
                _mm256_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k + 8 * h, acc[k][h][c]);
}

void rkm_mm_q4_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    PKQ_DRIVE(pkk2_compute, a, RKM_TYPE_Q4_K, r0, r1, PKK2_STREAMS, 4);
}
void rkm_mm_q5_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    PKQ_DRIVE(pkk2_compute, a, RKM_TYPE_Q5_K, r0, r1, PKK2_STREAMS, 4);
}

/* ------------------------------------------------- packed Q6_K ----
 * The packed layout (kernels.h) in two halves of 8 rows, one row per int32
 * lane. The levels q + 32 of a quarter u (values 32u + l, l = 4t..4t+3 of
 * half n) come from a ql part (A: bytes l, quarters 0 and 2; B: bytes
 * 32 + l, quarters 1 and 3) and the qh part (bytes l, field u):
 * (nibble & 15) | ((field << 4) & 0x30). Per sub-block of 16 values: two
 * pairs of vpmaddubsw of the levels by the 4 activation bytes of each
 * word, each pair summed in 16 bits (at most 2 x 2 x 63 x 128 = 32256)
 * and multiplied by the rows' int8 scale (in both 16-bit halves of the
 * row's lane) by vpmaddwd into one int32 sum per activation row, so the
 * level build is shared by up to 8 activation rows with every sum in a
 * register. The + 32 comes off as 32 x sum(scale x the activations' sum
 * of 16), two sub-blocks to a vpmaddwd (sums of 16 fit 16 bits); the
 * integer total is the reference's exact one, then its fused
 * multiply-add per row and super-block (bit-identical to it). Decode
 * reads as packed Q4_K (PKK2_STREAMS); prefill takes 8 activation rows at
 * a time. */
#ifndef PK62_RX
#define PK62_RX 8
#endif

/* The level q + 32 of quarter u from its ql and qh parts (32 bytes at
 * 8 rows each). */
KQ_INLINE __m256i pk62_level(const uint8_t *ql_at, const uint8_t *qh_at, int u)
{
    const __m256i ql = _mm256_loadu_si256((const __m256i *)ql_at), qh = _mm256_loadu_si256((const __m256i *)qh_at);
    const __m256i lo = _mm256_and_si256(u < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(15));
    const __m256i hs = u == 0 ? _mm256_slli_epi16(qh, 4) : u == 1 ? _mm256_slli_epi16(qh, 2) : u == 2 ? qh : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hs, _mm256_set1_epi8(0x30)));
}

/* The activations' 16 sums of 16 of super-block b as int16 pairs (sub-
 * blocks 2p, 2p + 1 in int32 p). */
KQ_INLINE void pk62_xs_pairs(const int32_t *xs, int32_t out[8])
{
    const __m256i v = _mm256_packs_epi32(_mm256_loadu_si256((const __m256i *)xs), _mm256_loadu_si256((const __m256i *)(xs + 8)));
    _mm256_store_si256((__m256i *)out, _mm256_permute4x64_epi64(v, _MM_SHUFFLE(3, 1, 2, 0)));
}

KQ_INLINE void pk62_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX, const int NG)
{
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const size_t gstride = a->w_row_bytes * RKM_PACK_ROWS;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    __m256 acc[4][2][8];
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 8
            for (int c = 0; c < RX; c++) acc[k][h][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        int32_t xsp[8][8] __attribute__((aligned(32)));
        /* the RX rows' 256 activations side by side: each read is then
         * one base and a constant (one row, decode, is read in place) */
        int8_t xt[8 * 256] __attribute__((aligned(32)));
        const int8_t *xb = RX == 1 ? a->xq + i * a->n_in + 256 * b : xt;
#pragma GCC unroll 8
        for (int c = 0; c < RX; c++) {
            pk62_xs_pairs(a->xs + (i + c) * ng16 + 16 * b, xsp[c]);
            if (RX > 1) memcpy(xt + 256 * c, a->xq + (i + c) * a->n_in + 256 * b, 256);
        }
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * RKM_PK_Q6_K_BLOCK, *parts = blk + 288;
            if (RX == 1) prefetch_stream(grp, k, NG, gstride, (size_t)b * RKM_PK_Q6_K_BLOCK, RKM_PK_Q6_K_BLOCK, PKK2_PF_BYTES);
#pragma GCC unroll 1
            for (int h = 0; h < 2; h++) {
                __m256i isum[8];
                /* -32 x sum(scale x sum of 16), as the starting sums */
#pragma GCC unroll 8
                for (int c = 0; c < RX; c++) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 1
                for (int p = 0; p < 8; p++) {
                    const __m128i s0 = _mm_loadl_epi64((const __m128i *)(blk + 32 + 32 * p + 8 * h));
                    const __m128i s1 = _mm_loadl_epi64((const __m128i *)(blk + 48 + 32 * p + 8 * h));
                    const __m256i scp = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s0, s1));
#pragma GCC unroll 8
                    for (int c = 0; c < RX; c++) isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(scp, _mm256_set1_epi32(xsp[c][p])));
                }
#pragma GCC unroll 8
                for (int c = 0; c < RX; c++) isum[c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(isum[c], 5));
#pragma GCC unroll 1
                for (int hq = 0; hq < 4; hq++) {
                    /* sub-blocks s = 8n + 2u + q: half n, quarter u, values l in 16q..16q+15 */
                    const int n = hq >> 1, q = hq & 1;
                    const uint8_t *pl = parts + 64 * (16 * n + 4 * q) + 32 * h, *ph = parts + 64 * (32 + 8 * n + 4 * q) + 32 * h;
                    const uint8_t *scb = blk + 32 + 16 * (8 * n + q) + 8 * h;
                    const int8_t *xh = xb + 128 * n + 16 * q;
#pragma GCC unroll 4
                    for (int u = 0; u < 4; u++) {
                        /* the parts are read again for each quarter: held, they would crowd out the sums */
                        size_t z = 0;
                        __asm__("" : "+r"(z));
                        const __m128i s8 = _mm_loadl_epi64((const __m128i *)(scb + 32 * u));
                        const __m256i sc = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s8, s8));
#pragma GCC unroll 2
                        for (int t = 0; t < 4; t += 2) {
                            const __m256i w0 = pk62_level(pl + z + 64 * (8 * (u & 1) + t), ph + z + 64 * t, u);
                            const __m256i w1 = pk62_level(pl + z + 64 * (8 * (u & 1) + t + 1), ph + z + 64 * (t + 1), u);
#pragma GCC unroll 8
                            for (int c = 0; c < RX; c++) {
                                int32_t x0, x1;
                                memcpy(&x0, xh + 256 * c + 32 * u + 4 * t, 4);
                                memcpy(&x1, xh + 256 * c + 32 * u + 4 * t + 4, 4);
                                const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(w0, _mm256_set1_epi32(x0)),
                                                                   _mm256_maddubs_epi16(w1, _mm256_set1_epi32(x1)));
                                isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, sc));
                                RKM_X86_PIN(isum[c]);
                            }
                        }
                    }
                }
                const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
#pragma GCC unroll 8
                for (int c = 0; c < RX; c++)
                    acc[k][h][c] = _mm256_fmadd_ps(_mm256_mul_ps(d8, _mm256_set1_ps(a->xd[(i + c) * nb + b])),
                                                   _mm256_cvtepi32_ps(isum[c]), acc[k][h][c]);
            }
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++)
            for (int h = 0; h < 2; h++)
                _mm256_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k + 8 * h, acc[k][h][c]);
}

void rkm_mm_q6_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    PKQ_DRIVE(pk62_compute, a, RKM_TYPE_Q6_K, r0, r1, PKK2_STREAMS, PK62_RX);
}

/* ------------------------------------------------- packed IQ4_XS ----
 * The packed layout (kernels.h) in two halves of 8 rows, one row per int32
 * lane. A sub-block of 32 values is 4 parts (low nibbles: values l, high:
 * 16 + l), whose signed levels come from one vpshufb each; the sign trick
 * (vpmaddubsw of |level| by x with the level's sign, pairs at most 2 x
 * 127 x 127 = 32258) and one vpmaddwd by ones per part give the exact dot,
 * which the rows' 6-bit scales (scales_l nibble | scales_h pair << 4,
 * minus 32) multiply (vpmulld); the reference's fused multiply-add per
 * row and super-block (bit-identical to it). Decode reads as packed
 * Q4_K (PKK2_STREAMS); prefill takes 2 activation rows at a time. */
KQ_INLINE void pkx2_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX, const int NG)
{
    const int64_t nb = a->n_in / 256;
    const size_t gstride = a->w_row_bytes * RKM_PACK_ROWS;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const __m256i knl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rkm_kvalues_iq4nl));
    __m256 acc[4][2][2];
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++) acc[k][h][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * RKM_PK_IQ4_XS_BLOCK;
            if (RX == 1) prefetch_stream(grp, k, NG, gstride, (size_t)b * RKM_PK_IQ4_XS_BLOCK, RKM_PK_IQ4_XS_BLOCK, PKK2_PF_BYTES);
#pragma GCC unroll 1
            for (int h = 0; h < 2; h++) {
                const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * h)));
                __m256i isum[2];
#pragma GCC unroll 2
                for (int c = 0; c < RX; c++) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 1
                for (int ib = 0; ib < 8; ib++) {
                    const __m256i sl = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 64 + 16 * (ib >> 1) + 8 * h)));
                    const __m256i lo4 = _mm256_and_si256(_mm256_srl_epi32(sl, _mm_cvtsi32_si128(4 * (ib & 1))), _mm256_set1_epi32(15));
                    const __m256i hi2 = _mm256_and_si256(_mm256_srl_epi32(sh, _mm_cvtsi32_si128(2 * ib)), _mm256_set1_epi32(3));
                    const __m256i sc = _mm256_sub_epi32(_mm256_or_si256(lo4, _mm256_slli_epi32(hi2, 4)), _mm256_set1_epi32(32));
                    __m256i d[2];
#pragma GCC unroll 2
                    for (int c = 0; c < RX; c++) d[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
                    for (int t = 0; t < 4; t++) {
                        const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 128 + 64 * (4 * ib + t) + 32 * h));
                        const __m256i lo = _mm256_shuffle_epi8(knl, _mm256_and_si256(v, m4));
                        const __m256i hi = _mm256_shuffle_epi8(knl, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
                        const __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
#pragma GCC unroll 2
                        for (int c = 0; c < RX; c++) {
                            const int8_t *xb = a->xq + (i + c) * a->n_in + 256 * b + 32 * ib + 4 * t;
                            int32_t x0, x1;
                            memcpy(&x0, xb, 4);
                            memcpy(&x1, xb + 16, 4);
                            const __m256i pl = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(_mm256_set1_epi32(x0), lo));
                            const __m256i ph = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(_mm256_set1_epi32(x1), hi));
                            d[c] = _mm256_add_epi32(d[c], _mm256_add_epi32(_mm256_madd_epi16(pl, ones), _mm256_madd_epi16(ph, ones)));
                            RKM_X86_PIN(d[c]);
                        }
                    }
#pragma GCC unroll 2
                    for (int c = 0; c < RX; c++) isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(d[c], sc));
                }
                const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
#pragma GCC unroll 2
                for (int c = 0; c < RX; c++)
                    acc[k][h][c] = _mm256_fmadd_ps(_mm256_mul_ps(d8, _mm256_set1_ps(a->xd[(i + c) * nb + b])),
                                                   _mm256_cvtepi32_ps(isum[c]), acc[k][h][c]);
            }
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++)
            for (int h = 0; h < 2; h++)
                _mm256_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k + 8 * h, acc[k][h][c]);
}

void rkm_mm_iq4_xs_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKK2_DRIVE(pkx2_compute, a, RKM_TYPE_IQ4_XS, r0, r1); }

/* ------------------------------------------ packed Q3_K and Q2_K ----
 * The packed layouts (kernels.h) in two halves of 8 rows, one row per
 * int32 lane; the levels as the AVX-512 VNNI kernel makes them (2-bit
 * fields of the `qs` parts, Q3_K's `hmask` bit as bit 2: 0..7, the value
 * + 4). A sub-block's 4 parts: vpmaddubsw of the levels by the 4
 * activation bytes of each word, summed in 16 bits (at most 4 x 2 x 7 x
 * 127 = 7112), widened by vpmaddwd by ones into an accumulator that starts
 * at -4 x the activations' sum of 16 (Q3_K) or 0 (Q2_K, whose mins times
 * those sums go apart); times the rows' scales (vpmulld), made once per
 * super-block into a table; the reference's fused multiply-add(s) per row
 * and super-block (bit-identical to it). Decode reads as packed Q4_K
 * (PKK2_STREAMS); prefill takes 2 activation rows at a time. */
KQ_INLINE void pk232_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX, const int NG)
{
    const int q3 = type == RKM_TYPE_Q3_K;
    const size_t blkb = rkm_pk_block(type), parts_at = q3 ? 224 : 320;
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const size_t gstride = a->w_row_bytes * RKM_PACK_ROWS;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4), m15 = _mm256_set1_epi32(15), ones = _mm256_set1_epi16(1);
    __m256 acc[4][2][2];
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++) acc[k][h][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * blkb, *parts = blk + parts_at;
            if (RX == 1) prefetch_stream(grp, k, NG, gstride, (size_t)b * blkb, blkb, PKK2_PF_BYTES);
#pragma GCC unroll 1
            for (int h = 0; h < 2; h++) {
                int32_t sc[16][8] __attribute__((aligned(32)));
                __m256i isum[2], msum[2];
#pragma GCC unroll 2
                for (int c = 0; c < RX; c++) isum[c] = msum[c] = _mm256_setzero_si256();
                if (q3) {
#pragma GCC unroll 16
                    for (int s = 0; s < 16; s++) {
                        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * (s & 7) + 8 * h)));
                        const __m256i hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * (8 + (s & 3)) + 8 * h)));
                        const __m256i l4 = _mm256_and_si256(s < 8 ? lo : _mm256_srli_epi32(lo, 4), m15);
                        const __m256i h2 = _mm256_and_si256(_mm256_srli_epi32(hi, 2 * (s >> 2)), _mm256_set1_epi32(3));
                        _mm256_store_si256((__m256i *)sc[s],
                                           _mm256_sub_epi32(_mm256_or_si256(l4, _mm256_slli_epi32(h2, 4)), _mm256_set1_epi32(32)));
                    }
                } else {
#pragma GCC unroll 16
                    for (int s = 0; s < 16; s++) {
                        const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 64 + 16 * s + 8 * h)));
                        _mm256_store_si256((__m256i *)sc[s], _mm256_and_si256(v, m15));
#pragma GCC unroll 2
                        for (int c = 0; c < RX; c++)
                            msum[c] = _mm256_add_epi32(msum[c], _mm256_mullo_epi32(_mm256_srli_epi32(v, 4),
                                                                                   _mm256_set1_epi32(a->xs[(i + c) * ng16 + 16 * b + s])));
                    }
                }
#pragma GCC unroll 1
                for (int ng = 0; ng < 4; ng++) { /* n = ng / 2, g = ng % 2 */
                    const int n = ng >> 1, g = ng & 1;
                    __m256i s16[2][4];
#pragma GCC unroll 2
                    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
                        for (int j = 0; j < 4; j++) s16[c][j] = _mm256_setzero_si256();
#pragma GCC unroll 4
                    for (int t = 0; t < 4; t++) {
                        const __m256i P = _mm256_loadu_si256((const __m256i *)(parts + 64 * ((q3 ? 8 : 0) + 8 * n + 4 * g + t) + 32 * h));
                        __m256i H = _mm256_setzero_si256();
                        if (q3)
                            H = _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)(parts + 64 * (4 * g + t) + 32 * h)), _mm_cvtsi32_si128(4 * n));
#pragma GCC unroll 4
                        for (int j = 0; j < 4; j++) {
                            __m256i lvl = _mm256_and_si256(j ? _mm256_srli_epi16(P, 2 * j) : P, m3);
                            if (q3) {
                                const __m256i hj = j == 0 ? _mm256_slli_epi16(H, 2) : j == 1 ? _mm256_slli_epi16(H, 1) : j == 2 ? H : _mm256_srli_epi16(H, 1);
                                lvl = _mm256_or_si256(lvl, _mm256_and_si256(hj, m4));
                            }
#pragma GCC unroll 2
                            for (int c = 0; c < RX; c++) {
                                int32_t xv;
                                memcpy(&xv, a->xq + (i + c) * a->n_in + 256 * b + 128 * n + 32 * j + 16 * g + 4 * t, 4);
                                s16[c][j] = _mm256_add_epi16(s16[c][j], _mm256_maddubs_epi16(lvl, _mm256_set1_epi32(xv)));
                                RKM_X86_PIN(s16[c][j]);
                            }
                        }
                    }
#pragma GCC unroll 4
                    for (int j = 0; j < 4; j++) {
                        const int s = 8 * n + 2 * j + g;
                        const __m256i scv = _mm256_load_si256((const __m256i *)sc[s]);
#pragma GCC unroll 2
                        for (int c = 0; c < RX; c++) {
                            __m256i dj = _mm256_madd_epi16(s16[c][j], ones);
                            if (q3) dj = _mm256_add_epi32(dj, _mm256_set1_epi32(-4 * a->xs[(i + c) * ng16 + 16 * b + s]));
                            isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(dj, scv));
                        }
                    }
                }
                const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
#pragma GCC unroll 2
                for (int c = 0; c < RX; c++) {
                    const __m256 dx = _mm256_set1_ps(a->xd[(i + c) * nb + b]);
                    acc[k][h][c] = _mm256_fmadd_ps(_mm256_mul_ps(d8, dx), _mm256_cvtepi32_ps(isum[c]), acc[k][h][c]);
                    if (!q3) {
                        const __m256 dm8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * h)));
                        const __m256 ndm = _mm256_xor_ps(_mm256_mul_ps(dm8, dx), _mm256_set1_ps(-0.0f));
                        acc[k][h][c] = _mm256_fmadd_ps(ndm, _mm256_cvtepi32_ps(msum[c]), acc[k][h][c]);
                    }
                }
            }
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++)
            for (int h = 0; h < 2; h++)
                _mm256_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k + 8 * h, acc[k][h][c]);
}

void rkm_mm_q3_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKK2_DRIVE(pk232_compute, a, RKM_TYPE_Q3_K, r0, r1); }
void rkm_mm_q2_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKK2_DRIVE(pk232_compute, a, RKM_TYPE_Q2_K, r0, r1); }
