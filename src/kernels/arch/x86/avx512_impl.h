/*
 * avx512_impl.h - the AVX-512 quantized matmuls, written once and compiled
 * twice: kernels_avx512.c (AVX512F/BW/VL/DQ: vpmaddubsw + vpmaddwd) and
 * kernels_avx512vnni.c (RKM_AVX512_VNNI: vpdpbusd, one instruction for
 * u8 x s8 -> s32 with accumulate). The including file defines
 * RKM_AVX512_VNNI (0/1) and RKM_AVX512_NAME (the set's name).
 *
 * A zmm holds two consecutive blocks (lanes 0-7 block b, 8-15 block b+1),
 * so each int8 instruction covers 64 products and the float scaling
 * (convert, d_w*d_x, FMA) is shared by two blocks. Odd block counts end
 * with a half pair whose upper half is zero.
 *
 * q8_0 weights x q8 activations: |w| (u8) times x with w's sign applied.
 * q4_0 weights: the unsigned nibbles (0..15 = value + 8) times x, minus
 * 8*x: with VNNI the accumulator starts at -s (the block's sum of x) in
 * each of its 8 lanes (8 * -s = -8s); without VNNI 8*(x pairs) is
 * subtracted from the 16-bit pair sums. Both are exact integer algebra.
 *
 * Tiles: 4 weight rows x 1 activation row for decode (with software
 * prefetch one tile group ahead), 4 x 3 for prefill (12 accumulators);
 * the VNNI build adds the interleaved-rows prefill path at the end of this
 * file. Stateless apart from rkm_kernel_scratch; safe from any thread.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/arch/x86/x86_common.h"
#include "kernels/kernels_impl.h"
#include "kernels/quant_tables.h"

#define Z_INLINE static inline __attribute__((always_inline))
#define PF_BYTES 4096

/* [t[d0] x 8, t[d1] x 8] */
Z_INLINE __m512 z_scales(rkm_f16 d0, rkm_f16 d1, const int half)
{
    __m256 lo = _mm256_broadcast_ss(&rkm_x86_f16_table[d0]);
    if (half) return _mm512_zextps256_ps512(lo);
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), _mm256_broadcast_ss(&rkm_x86_f16_table[d1]), 1);
}

/* Activation pair: 64 bytes of qs (32 if half, the rest zero: a half
 * pair's upper lanes must be exact zeros, not undefined values). */
Z_INLINE __m512i z_load_x(const int8_t *p, const int half)
{
    if (half) return _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_loadu_si512((const void *)p);
}

/* [dx0 x 8, dx1 x 8] from two consecutive floats. */
Z_INLINE __m512 z_dx(const float *d, const int half)
{
    if (half) return _mm512_zextps256_ps512(_mm256_broadcast_ss(d));
    __m512 v = _mm512_castps128_ps512(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)d)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), v);
}

#if RKM_AVX512_VNNI
#define Z_DOT_U8S8(acc, u, s) _mm512_dpbusd_epi32((acc), (u), (s))
#else
#define Z_DOT_U8S8(acc, u, s) _mm512_add_epi32((acc), _mm512_madd_epi16(_mm512_maddubs_epi16((u), (s)), _mm512_set1_epi16(1)))
#endif

/* ------------------------------------------------------------- q8_0 */
Z_INLINE void z_q8_0_pair(const rkm_mm_args *a, const rkm_block_q8_0 *const *w, const int8_t *const *xq,
                          const float *const *xd, int64_t b, __m512 acc[4][4], size_t pfd, const int RW,
                          const int RX, const int half)
{
    __m512i aw[4];
    __mmask64 mw[4];
    __m512 dw[4];
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++) {
        if (RX == 1) _mm_prefetch((const char *)&w[rr][b] + pfd, _MM_HINT_T0);
        __m512i wv;
        if (half) wv = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)w[rr][b].qs));
        else
            wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)w[rr][b].qs)),
                                    _mm256_loadu_si256((const __m256i *)w[rr][b + 1].qs), 1);
        aw[rr] = _mm512_abs_epi8(wv);
        mw[rr] = _mm512_movepi8_mask(wv);
        dw[rr] = z_scales(w[rr][b].d, half ? 0 : w[rr][b + 1].d, half);
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
        __m512i xv = z_load_x(xq[c] + b * 32, half);
        __m512 dx = z_dx(xd[c] + b, half);
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) {
            __m512i sx = _mm512_mask_sub_epi8(xv, mw[rr], _mm512_setzero_si512(), xv);
            __m512i p = Z_DOT_U8S8(_mm512_setzero_si512(), aw[rr], sx);
            acc[rr][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw[rr], dx), acc[rr][c]);
        }
    }
}

/* ------------------------------------------------------------- q4_0 */
Z_INLINE void z_q4_0_pair(const rkm_mm_args *a, const rkm_block_q4_0 *const *w, const int8_t *const *xq,
                          const float *const *xd, const int32_t *const *xs, int64_t b, __m512 acc[4][4],
                          size_t pfd, const int RW, const int RX, const int half)
{
    __m512i nib[4];
    __m512 dw[4];
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++) {
        if (RX == 1) _mm_prefetch((const char *)&w[rr][b] + pfd, _MM_HINT_T0);
        /* [qs_b, qs_b, qs_b+1, qs_b+1] >> (0, 4, 0, 4) & 15 */
        __m256i lo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)w[rr][b].qs));
        __m512i v;
        if (half) v = _mm512_zextsi256_si512(lo);
        else
            v = _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                                   _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)w[rr][b + 1].qs)), 1);
        nib[rr] = _mm512_and_si512(_mm512_srlv_epi64(v, shifts), _mm512_set1_epi8(15));
        dw[rr] = z_scales(w[rr][b].d, half ? 0 : w[rr][b + 1].d, half);
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
        __m512i xv = z_load_x(xq[c] + b * 32, half);
        __m512 dx = z_dx(xd[c] + b, half);
#if RKM_AVX512_VNNI
        /* -s of each block in its 8 lanes */
        __m512i init = _mm512_sub_epi32(_mm512_setzero_si512(),
                                        half ? _mm512_zextsi256_si512(_mm256_set1_epi32(xs[c][b]))
                                             : _mm512_inserti64x4(_mm512_set1_epi32(xs[c][b]),
                                                                  _mm256_set1_epi32(xs[c][b + 1]), 1));
#else
        __m512i cx = _mm512_maddubs_epi16(_mm512_set1_epi8(8), xv);
#endif
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) {
#if RKM_AVX512_VNNI
            __m512i p = _mm512_dpbusd_epi32(init, nib[rr], xv);
#else
            __m512i p = _mm512_madd_epi16(_mm512_sub_epi16(_mm512_maddubs_epi16(nib[rr], xv), cx),
                                          _mm512_set1_epi16(1));
#endif
            acc[rr][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw[rr], dx), acc[rr][c]);
        }
    }
}

#define Z_TILE(NAME, BLOCK, PAIR_CALL)                                                            \
    Z_INLINE void NAME(const rkm_mm_args *a, int64_t r, int64_t i, const int RW, const int RX)   \
    {                                                                                             \
        const int64_t nb = a->n_in / 32;                                                          \
        const BLOCK *w[4];                                                                        \
        const int8_t *xq[4];                                                                      \
        const float *xd[4];                                                                       \
        const int32_t *xs[4];                                                                     \
        __m512 acc[4][4];                                                                         \
        const size_t tile = (size_t)RW * a->w_row_bytes, pfd = tile * ((PF_BYTES + tile - 1) / tile); \
        _Pragma("GCC unroll 4") for (int rr = 0; rr < RW; rr++) w[rr] =                           \
            (const BLOCK *)((const char *)a->w + (r + rr) * a->w_row_bytes);                      \
        _Pragma("GCC unroll 4") for (int c = 0; c < RX; c++)                                     \
        {                                                                                         \
            xq[c] = a->xq + (i + c) * nb * 32;                                                    \
            xd[c] = a->xd + (i + c) * nb;                                                         \
            xs[c] = a->xs + (i + c) * nb;                                                         \
        }                                                                                         \
        _Pragma("GCC unroll 4") for (int rr = 0; rr < RW; rr++)                                   \
            _Pragma("GCC unroll 4") for (int c = 0; c < RX; c++) acc[rr][c] = _mm512_setzero_ps(); \
        int64_t b = 0;                                                                            \
        for (; b + 2 <= nb; b += 2) PAIR_CALL(0);                                                 \
        if (b < nb) PAIR_CALL(1);                                                                 \
        _Pragma("GCC unroll 4") for (int rr = 0; rr < RW; rr++)                                   \
            _Pragma("GCC unroll 4") for (int c = 0; c < RX; c++)                                  \
                a->y[(i + c) * a->ldy + r + rr] = _mm512_reduce_add_ps(acc[rr][c]);                \
        (void)xs;                                                                                 \
    }

#define Q8_PAIR(half) z_q8_0_pair(a, w, xq, xd, b, acc, pfd, RW, RX, half)
#define Q4_PAIR(half) z_q4_0_pair(a, w, xq, xd, xs, b, acc, pfd, RW, RX, half)
Z_TILE(z_q8_0_tile, rkm_block_q8_0, Q8_PAIR)
Z_TILE(z_q4_0_tile, rkm_block_q4_0, Q4_PAIR)

#define Z_DEFINE_MM(NAME, TILE)                                                     \
    static void NAME(const rkm_mm_args *a, int64_t r0, int64_t r1)                  \
    {                                                                               \
        int64_t r = r0;                                                             \
        if (a->m == 1) {                                                            \
            for (; r + 4 <= r1; r += 4) TILE(a, r, 0, 4, 1);                        \
            for (; r < r1; r++) TILE(a, r, 0, 1, 1);                                \
            return;                                                                 \
        }                                                                           \
        for (; r + 4 <= r1; r += 4) {                                               \
            int64_t i = 0;                                                          \
            for (; i + 3 <= a->m; i += 3) TILE(a, r, i, 4, 3);                      \
            for (; i < a->m; i++) TILE(a, r, i, 4, 1);                              \
        }                                                                           \
        for (; r < r1; r++) {                                                       \
            int64_t i = 0;                                                          \
            for (; i + 3 <= a->m; i += 3) TILE(a, r, i, 1, 3);                      \
            for (; i < a->m; i++) TILE(a, r, i, 1, 1);                              \
        }                                                                           \
    }

#if RKM_AVX512_VNNI
/* ---------------------------------------- prefill: interleaved rows ----
 * For m >= IL_MIN_M, q4_0 and q8_0 weights are repacked on the fly, 16 rows at a
 * time, so that lane r of a zmm belongs to weight row r: per block, 16
 * float scales and 8 zmm whose lane r holds row r's nibbles k = 4g..4g+3
 * (g = 0..7). One vpdpbusd then multiplies 16 rows by 4 activation
 * values (broadcast), a block is 8 of them, and the float scaling
 * (convert, d_w * d_x, FMA) is done once per 16 rows instead of once per
 * row: about 0.8 instructions per block-row instead of 3.4. The repacked
 * tile (576 bytes per block) stays in L1/L2 and is reused by every
 * activation row; repacking costs about as much as one activation row, so
 * it pays from m = 6 on (measured). Outputs are 16 consecutive floats per
 * row. */
#define IL_ROWS 16
#define IL_MIN_M 6
#define IL_BLOCK_BYTES (64 + 8 * 64)

/* 16 rows of 16 bytes (p[rr] + off) -> t[h], lane r = dword h of row r:
 * a 16 x 4 dword transpose in two rounds of vpermt2d. */
Z_INLINE void il_transpose16x4(const uint8_t *const *p, size_t off, __m512i t[4])
{
    /* level 1: lane 8h' + j <- row j (0-7) of the pair, dword h' (+2) */
    const __m512i ia = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i ib = _mm512_add_epi32(ia, _mm512_set1_epi32(2));
    /* level 2: rows 0-7 from the first source, 8-15 from the second */
    const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i i1 = _mm512_add_epi32(i0, _mm512_set1_epi32(8));
    __m512i z[4];
    for (int k = 0; k < 4; k++) {
        z[k] = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p[4 * k] + off)));
        z[k] = _mm512_inserti32x4(z[k], _mm_loadu_si128((const __m128i *)(p[4 * k + 1] + off)), 1);
        z[k] = _mm512_inserti32x4(z[k], _mm_loadu_si128((const __m128i *)(p[4 * k + 2] + off)), 2);
        z[k] = _mm512_inserti32x4(z[k], _mm_loadu_si128((const __m128i *)(p[4 * k + 3] + off)), 3);
    }
    __m512i ua = _mm512_permutex2var_epi32(z[0], ia, z[1]), ub = _mm512_permutex2var_epi32(z[0], ib, z[1]);
    __m512i va = _mm512_permutex2var_epi32(z[2], ia, z[3]), vb = _mm512_permutex2var_epi32(z[2], ib, z[3]);
    t[0] = _mm512_permutex2var_epi32(ua, i0, va);
    t[1] = _mm512_permutex2var_epi32(ua, i1, va);
    t[2] = _mm512_permutex2var_epi32(ub, i0, vb);
    t[3] = _mm512_permutex2var_epi32(ub, i1, vb);
}

/* q4_0: dword h of the packed bytes holds k = 4h..4h+3 in its low nibbles
 * and k = 16+4h.. in its high nibbles, so zmm g < 4 is (dword g) & 0x0f
 * and zmm g >= 4 is (dword g-4) >> 4: both pair with activation bytes
 * 4g..4g+3. The nibbles are value + 8 (unsigned): the dot product gets
 * -8 * sum(x) (IL_BIAS). */
static void il_repack_q4_0(const rkm_mm_args *a, int64_t r, int64_t nb, char *buf)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    const uint8_t *p[IL_ROWS];
    for (int64_t b = 0; b < nb; b++) {
        float *sc = (float *)(buf + b * IL_BLOCK_BYTES);
        __m512i *q = (__m512i *)(buf + b * IL_BLOCK_BYTES + 64), t[4];
        for (int rr = 0; rr < IL_ROWS; rr++) {
            const rkm_block_q4_0 *blk = (const rkm_block_q4_0 *)((const char *)a->w + (r + rr) * a->w_row_bytes) + b;
            p[rr] = blk->qs;
            sc[rr] = rkm_x86_f16_table[blk->d];
        }
        il_transpose16x4(p, 0, t);
        for (int h = 0; h < 4; h++) {
            _mm512_store_si512(q + h, _mm512_and_si512(t[h], m4));
            _mm512_store_si512(q + h + 4, _mm512_and_si512(_mm512_srli_epi16(t[h], 4), m4));
        }
    }
}

/* q8_0: dword g of the 32 values is k = 4g..4g+3; the values get +128
 * (xor 0x80) to be the unsigned operand: the dot product gets -128 *
 * sum(x). */
static void il_repack_q8_0(const rkm_mm_args *a, int64_t r, int64_t nb, char *buf)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const uint8_t *p[IL_ROWS];
    for (int64_t b = 0; b < nb; b++) {
        float *sc = (float *)(buf + b * IL_BLOCK_BYTES);
        __m512i *q = (__m512i *)(buf + b * IL_BLOCK_BYTES + 64), t[4];
        for (int rr = 0; rr < IL_ROWS; rr++) {
            const rkm_block_q8_0 *blk = (const rkm_block_q8_0 *)((const char *)a->w + (r + rr) * a->w_row_bytes) + b;
            p[rr] = (const uint8_t *)blk->qs;
            sc[rr] = rkm_x86_f16_table[blk->d];
        }
        il_transpose16x4(p, 0, t);
        for (int h = 0; h < 4; h++) _mm512_store_si512(q + h, _mm512_xor_si512(t[h], flip));
        il_transpose16x4(p, 16, t);
        for (int h = 0; h < 4; h++) _mm512_store_si512(q + h + 4, _mm512_xor_si512(t[h], flip));
    }
}

Z_INLINE int32_t il_x4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

Z_INLINE void il_compute(const rkm_mm_args *a, const char *buf, int64_t r, int64_t i, const int RX, const int bias)
{
    const int64_t nb = a->n_in / 32;
    __m512 acc[4];
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xs[4];
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
        acc[c] = _mm512_setzero_ps();
        xq[c] = a->xq + (i + c) * nb * 32;
        xd[c] = a->xd + (i + c) * nb;
        xs[c] = a->xs + (i + c) * nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const __m512 sc = _mm512_load_ps((const float *)(buf + b * IL_BLOCK_BYTES));
        const __m512i *q = (const __m512i *)(buf + b * IL_BLOCK_BYTES + 64);
        __m512i w[8];
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) w[g] = _mm512_load_si512(q + g);
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            const int8_t *xb = xq[c] + b * 32;
            /* two chains for latency; -bias * sum(x) undoes the offset */
            __m512i s0 = _mm512_set1_epi32(-bias * xs[c][b]), s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int g = 0; g < 8; g += 2) {
                s0 = _mm512_dpbusd_epi32(s0, w[g], _mm512_set1_epi32(il_x4(xb + 4 * g)));
                s1 = _mm512_dpbusd_epi32(s1, w[g + 1], _mm512_set1_epi32(il_x4(xb + 4 * g + 4)));
            }
            __m512 p = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
            acc[c] = _mm512_fmadd_ps(p, _mm512_mul_ps(sc, _mm512_set1_ps(xd[c][b])), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) _mm512_storeu_ps(a->y + (i + c) * a->ldy + r, acc[c]);
}

#define IL_DEFINE_MM(NAME, REPACK, BIAS, TILE)                                             \
    static void NAME(const rkm_mm_args *a, int64_t r0, int64_t r1)                          \
    {                                                                                       \
        const int64_t nb = a->n_in / 32;                                                    \
        int64_t r = r0;                                                                     \
        char *buf = rkm_kernel_scratch((size_t)nb * IL_BLOCK_BYTES);                        \
        for (; r + IL_ROWS <= r1; r += IL_ROWS) {                                           \
            REPACK(a, r, nb, buf);                                                          \
            int64_t i = 0;                                                                  \
            for (; i + 4 <= a->m; i += 4) il_compute(a, buf, r, i, 4, BIAS);                \
            for (; i < a->m; i++) il_compute(a, buf, r, i, 1, BIAS);                        \
        }                                                                                   \
        for (; r + 4 <= r1; r += 4) {                                                       \
            int64_t i = 0;                                                                  \
            for (; i + 3 <= a->m; i += 3) TILE(a, r, i, 4, 3);                              \
            for (; i < a->m; i++) TILE(a, r, i, 4, 1);                                      \
        }                                                                                   \
        for (; r < r1; r++)                                                                 \
            for (int64_t i = 0; i < a->m; i++) TILE(a, r, i, 1, 1);                         \
    }

IL_DEFINE_MM(mm_q4_0_il, il_repack_q4_0, 8, z_q4_0_tile)
IL_DEFINE_MM(mm_q8_0_il, il_repack_q8_0, 128, z_q8_0_tile)

/* ------------------------------------------------ packed weights ----
 * The packed layout (kernels.h) is the interleaved layout above minus the
 * nibble split and the scale conversion, stored at load time: a block of
 * a 16-row group is 16 fp16 scales (MXFP4: 16 exponent bytes) and 4
 * (q4_0, MXFP4) or 8 (q8_0) zmm of one 4-byte word per row, read as one
 * sequential stream. Decode (m < 6) unpacks each block in registers
 * (and/shift, MXFP4's table lookup, or the +128 flip for q8_0)
 * and runs the il_compute arithmetic on it; prefill unpacks a group into
 * the il scratch once and reuses il_compute, so both give exactly the
 * reference's per-row result (integer block sums, then one FMA per block
 * with d_w * d_x).
 *
 * Decode prefetches every line of a block PK_PF_BYTES ahead in its
 * stream. 2 KiB beat 4 KiB by 1-7% on the olmoe q4_0 expert and LM-head
 * matvecs (both distances timed on alternate tokens of one decode run,
 * which cancels the host's drift), and tied on q8_0; 8 KiB was worse and
 * none at all 12% worse. */
#ifndef PK_PF_BYTES
#define PK_PF_BYTES 2048
#endif
#ifndef PK_STREAMS
#define PK_STREAMS 4
#endif

/* A packed block (type Q8_0, Q4_0, MXFP4 or IQ4_NL) as 16 float scales and
 * 8 zmm of unsigned bytes, value + pk_bias(type): q4_0 nibbles as they
 * are, q8_0 flipped by 128, MXFP4 levels (-12..12) looked up as level +
 * 12, IQ4_NL levels (-127..113) as level + 128. */
Z_INLINE int pk_bias(const int type)
{
    return type == RKM_TYPE_Q8_0 || type == RKM_TYPE_IQ4_NL ? 128 : type == RKM_TYPE_Q4_0 ? 8 : 12;
}

Z_INLINE void pk_unpack(const uint8_t *blk, const int type, __m512i w[8], __m512 *dw)
{
    if (type == RKM_TYPE_MXFP4) {
        /* the exponent e - 128 as a float: pk_scale multiplies by
         * 2^(e-128) with scalef, which rounds once as the product does */
        const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)blk));
        *dw = _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128)));
        const __m512i kv = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)rkm_kvalues_mxfp4)),
                                           _mm512_set1_epi8(12));
        const __m512i m4 = _mm512_set1_epi8(15);
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            __m512i v = _mm512_loadu_si512((const void *)(blk + 16 + 64 * h));
            w[h] = _mm512_shuffle_epi8(kv, _mm512_and_si512(v, m4));
            w[h + 4] = _mm512_shuffle_epi8(kv, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        return;
    }
    *dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    if (type == RKM_TYPE_IQ4_NL) {
        const __m512i kv = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)rkm_kvalues_iq4nl)),
                                           _mm512_set1_epi8((char)0x80));
        const __m512i m4 = _mm512_set1_epi8(15);
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            __m512i v = _mm512_loadu_si512((const void *)(blk + 32 + 64 * h));
            w[h] = _mm512_shuffle_epi8(kv, _mm512_and_si512(v, m4));
            w[h + 4] = _mm512_shuffle_epi8(kv, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
    } else if (type == RKM_TYPE_Q4_0) {
        const __m512i m4 = _mm512_set1_epi8(15);
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            __m512i v = _mm512_loadu_si512((const void *)(blk + 32 + 64 * h));
            w[h] = _mm512_and_si512(v, m4);
            w[h + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
    } else {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) w[g] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(blk + 32 + 64 * g)), flip);
    }
}

/* The 16 rows' weight scales times the activation block's scale dx, from
 * pk_unpack's dw: a product, or for MXFP4 dx * 2^dw (exact powers of two:
 * the same rounding as the product of 2^dw's float and dx). */
Z_INLINE __m512 pk_scale(const int type, __m512 dw, float dx)
{
    return type == RKM_TYPE_MXFP4 ? _mm512_scalef_ps(_mm512_set1_ps(dx), dw) : _mm512_mul_ps(dw, _mm512_set1_ps(dx));
}

/* RX activation rows x NG groups (NG * 16 weight rows): NG > 1 reads NG
 * groups as parallel streams, which the memory system serves faster than
 * one stream per core (decode). */
Z_INLINE void pk_compute(const rkm_mm_args *a, int64_t r, int64_t i, const int RX, const int NG, const int type)
{
    const int64_t nb = a->n_in / 32;
    const size_t bb = rkm_pk_block(type), gstride = a->w_row_bytes * IL_ROWS;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const int bias = pk_bias(type);
    __m512 acc[4][4];
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xs[4];
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) acc[k][c] = _mm512_setzero_ps();
        xq[c] = a->xq + (i + c) * nb * 32;
        xd[c] = a->xd + (i + c) * nb;
        xs[c] = a->xs + (i + c) * nb;
    }
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * bb;
            if (RX == 1 && PK_PF_BYTES) {
                /* stream k continues with group k + NG (the next call's):
                 * prefetching past the end of group k would hit group k + 1,
                 * which stream k + 1 is reading, and leave the start of the
                 * next groups cold (a 2048-wide q4_0 group is 18 KiB) */
                size_t o = (size_t)b * bb + PK_PF_BYTES;
                const char *pf = (const char *)grp + (o < gstride ? k * gstride + o : (k + NG) * gstride + o - gstride);
#pragma GCC unroll 9
                for (size_t l = 0; l < bb; l += 64) _mm_prefetch(pf + l, _MM_HINT_T0);
            }
            __m512i w[8];
            __m512 dw;
            pk_unpack(blk, type, w, &dw);
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) {
                const int8_t *xb = xq[c] + b * 32;
                __m512i s0 = _mm512_set1_epi32(-bias * xs[c][b]), s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int g = 0; g < 8; g += 2) {
                    s0 = _mm512_dpbusd_epi32(s0, w[g], _mm512_set1_epi32(il_x4(xb + 4 * g)));
                    s1 = _mm512_dpbusd_epi32(s1, w[g + 1], _mm512_set1_epi32(il_x4(xb + 4 * g + 4)));
                }
                __m512 p = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
                acc[k][c] = _mm512_fmadd_ps(p, pk_scale(type, dw, xd[c][b]), acc[k][c]);
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) _mm512_storeu_ps(a->y + (i + c) * a->ldy + r + IL_ROWS * k, acc[k][c]);
}

/* A packed group into the il scratch layout (float scales, unpacked zmm). */
static void pk_to_il(const uint8_t *grp, int64_t nb, char *buf, const int type)
{
    const size_t bb = rkm_pk_block(type);
    for (int64_t b = 0; b < nb; b++) {
        __m512i w[8];
        __m512 dw;
        pk_unpack(grp + (size_t)b * bb, type, w, &dw);
        _mm512_store_ps((float *)(buf + b * IL_BLOCK_BYTES), pk_scale(type, dw, 1.0f));
        __m512i *q = (__m512i *)(buf + b * IL_BLOCK_BYTES + 64);
        for (int g = 0; g < 8; g++) _mm512_store_si512(q + g, w[g]);
    }
}

Z_INLINE void pk_mm(const rkm_mm_args *a, int64_t r0, int64_t r1, const int type)
{
    const int64_t nb = a->n_in / 32;
    char *buf = a->m >= IL_MIN_M ? rkm_kernel_scratch((size_t)nb * IL_BLOCK_BYTES) : NULL;
    int64_t r = r0;
    if (buf) {
        for (; r + IL_ROWS <= r1; r += IL_ROWS) {
            pk_to_il((const uint8_t *)a->w + (size_t)r * a->w_row_bytes, nb, buf, type);
            int64_t i = 0;
            for (; i + 4 <= a->m; i += 4) il_compute(a, buf, r, i, 4, pk_bias(type));
            for (; i < a->m; i++) il_compute(a, buf, r, i, 1, pk_bias(type));
        }
        return;
    }
    if (a->m == 1) {
        for (; r + PK_STREAMS * IL_ROWS <= r1; r += PK_STREAMS * IL_ROWS) pk_compute(a, r, 0, 1, PK_STREAMS, type);
        for (; r + IL_ROWS <= r1; r += IL_ROWS) pk_compute(a, r, 0, 1, 1, type);
        return;
    }
    for (; r + 2 * IL_ROWS <= r1; r += 2 * IL_ROWS) {
        int64_t i = 0;
        for (; i + 2 <= a->m; i += 2) pk_compute(a, r, i, 2, 2, type);
        for (; i < a->m; i++) pk_compute(a, r, i, 1, 2, type);
    }
    for (; r + IL_ROWS <= r1; r += IL_ROWS) {
        int64_t i = 0;
        for (; i + 2 <= a->m; i += 2) pk_compute(a, r, i, 2, 1, type);
        for (; i < a->m; i++) pk_compute(a, r, i, 1, 1, type);
    }
}
#endif
