/*
 * kernels_avx2.c - x86-64 kernels for AVX2 + FMA + F16C (Haswell and
 * later, Zen). Compiled with -mavx2 -mfma -mf16c (Makefile, by suffix) and
 * only called when the CPU has those (dispatch.c).
 *
 * Quantized matmuls: int8 x int8 products with vpmaddubsw (u8 x s8 -> s16
 * pairs) and vpmaddwd (-> s32), converted to float once per block and
 * scaled by d_w * d_x with an FMA, like ggml. q8_0 x q8_0 uses the sign
 * trick (|w| x sign(w)*x); q4_0 keeps its nibbles unsigned (0..15) and
 * subtracts 8 * (x pairs) per 16-bit lane (precomputed once per activation
 * block), which stays exact: every intermediate fits its lane.
 * Tiles: RW weight rows x RX activation rows share each loaded block
 * (RW=4, RX=1 for decode; 2 x 4 for prefill), so prefill reads each weight
 * block once per four tokens from L1 instead of once per token.
 *
 * Stateless; safe from any thread.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/arch/x86/kquant_x86.h"
#include "kernels/arch/x86/x86_common.h"
#include "kernels/kernels_impl.h"
#include "kernels/quant_tables.h"
#include "util/common.h"

/* ------------------------------------------------------ quantization */
static void quantize_act_avx2(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s)
{
    int64_t nb = n / RKM_QK8_0;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * 32;
        __m256 v[4], amax = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            amax = _mm256_max_ps(amax, rkm_x86_abs_ps(v[k]));
        }
        float am = rkm_x86_hmax_ps(amax);
        float db = am / 127.0f;
        float id = db != 0.0f ? 1.0f / db : 0.0f;
        __m256 idv = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(rkm_x86_roundf_ps(_mm256_mul_ps(v[k], idv)));
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        /* packs interleave 128-bit lanes: 0 1 2 3 -> fix with a permute */
        __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(qs + b * 32), p8);
        d[b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        s[b] = rkm_x86_hsum_epi32(sum);
    }
}

/* q8_K activations (kernels_impl.h), exactly as rkm_quantize_act_k: the
 * first value of largest magnitude gives iscale = -127/max; q rounded
 * half to even (vroundps), saturated to int8 by the packs, NaN to 0. */
static void quantize_act_k_avx2(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s16)
{
    for (int64_t b = 0; b < n / RKM_QK_K; b++) {
        const float *xb = x + b * RKM_QK_K;
        __m256 am = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int k = 0; k < 32; k++) {
            __m256 v = _mm256_loadu_ps(xb + 8 * k);
            am = _mm256_max_ps(am, rkm_x86_abs_ps(v));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        const float amax = rkm_x86_hmax_ps(am);
        if (!(amax > 0.0f) || _mm256_movemask_ps(nan)) { /* all zero, or NaN: the reference's path */
            rkm_quantize_act_k(xb, RKM_QK_K, qs + b * RKM_QK_K, d + b, s16 + b * 16);
            continue;
        }
        int j = 0;
        for (int k = 0; k < 32; k++) {
            int msk = _mm256_movemask_ps(
                _mm256_cmp_ps(rkm_x86_abs_ps(_mm256_loadu_ps(xb + 8 * k)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (msk) {
                j = 8 * k + __builtin_ctz((unsigned)msk);
                break;
            }
        }
        const float iscale = -127.0f / xb[j];
        const __m256 is = _mm256_set1_ps(iscale);
        __m256i g[16];
        for (int k = 0; k < 8; k++) {
            __m256i q[4];
            for (int t = 0; t < 4; t++) {
                __m256 v = _mm256_mul_ps(is, _mm256_loadu_ps(xb + 32 * k + 8 * t));
                v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                v = _mm256_andnot_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), v);
                q[t] = _mm256_cvtps_epi32(v);
            }
            g[2 * k] = _mm256_add_epi32(q[0], q[1]);
            g[2 * k + 1] = _mm256_add_epi32(q[2], q[3]);
            __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(qs + b * RKM_QK_K + 32 * k), p8);
        }
        /* the 16 sums of 16: exact integer reductions (a q of 128 cannot
         * occur: |iscale * x| <= 127) */
        for (int h = 0; h < 2; h++) {
            __m256i *v = g + 8 * h;
            __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
            __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
            __m256i r = _mm256_add_epi32(_mm256_permute2x128_si256(t, u, 0x20), _mm256_permute2x128_si256(t, u, 0x31));
            _mm256_storeu_si256((__m256i *)(s16 + b * 16 + 8 * h), r);
        }
        d[b] = 1.0f / iscale;
    }
}

/* ------------------------------------------------------------- q8_0 */
#define AVX2_ALWAYS_INLINE static inline __attribute__((always_inline))

/* Weight scales: a table lookup (two loads) instead of vcvtph2ps, whose
 * shuffles compete with the nibble unpacking for port 5. */
AVX2_ALWAYS_INLINE __m256 scale8(rkm_f16 d) { return _mm256_broadcast_ss(&rkm_x86_f16_table[d]); }

/* Software prefetch of the tile PF bytes ahead: the rows of a tile are
 * short streams (a few KiB) that the hardware prefetcher would pick up
 * too late; PF covers the DRAM latency at the per-core bandwidth. */
#define PF_BYTES 4096

AVX2_ALWAYS_INLINE void q8_0_tile(const rkm_mm_args *a, int64_t r, int64_t i, const int RW, const int RX)
{
    const int64_t nb = a->n_in / 32;
    const rkm_block_q8_0 *w[4];
    const int8_t *xq[4];
    const float *xd[4];
    __m256 acc[4][4];
    const __m256i ones = _mm256_set1_epi16(1);
    const size_t tile = (size_t)RW * a->w_row_bytes, pfd = tile * ((PF_BYTES + tile - 1) / tile);
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++) w[rr] = (const rkm_block_q8_0 *)((const char *)a->w + (r + rr) * a->w_row_bytes);
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
        xq[c] = a->xq + (i + c) * nb * 32;
        xd[c] = a->xd + (i + c) * nb;
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[rr][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i wv[4], aw[4];
        __m256 dw[4];
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) {
            if (RX == 1) _mm_prefetch((const char *)&w[rr][b] + pfd, _MM_HINT_T0);
            wv[rr] = _mm256_loadu_si256((const __m256i *)w[rr][b].qs);
            aw[rr] = _mm256_sign_epi8(wv[rr], wv[rr]);
            dw[rr] = scale8(w[rr][b].d);
        }
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            __m256i xv = _mm256_load_si256((const __m256i *)(xq[c] + b * 32));
            __m256 dx = _mm256_broadcast_ss(xd[c] + b);
#pragma GCC unroll 4
            for (int rr = 0; rr < RW; rr++) {
                __m256i p16 = _mm256_maddubs_epi16(aw[rr], _mm256_sign_epi8(xv, wv[rr]));
                __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                acc[rr][c] = _mm256_fmadd_ps(p, _mm256_mul_ps(dw[rr], dx), acc[rr][c]);
            }
        }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) a->y[(i + c) * a->ldy + r + rr] = rkm_x86_hsum_ps(acc[rr][c]);
}

/* ------------------------------------------------------------- q4_0 */
/* 16 bytes of packed nibbles -> 32 bytes 0..15 (low nibbles first). The
 * 128-bit broadcast is a pure load and the variable shift runs on ports
 * 0/1, keeping port 5 free. */
AVX2_ALWAYS_INLINE __m256i q4_nibbles(const uint8_t *qs)
{
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    v = _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(15));
}

AVX2_ALWAYS_INLINE void q4_0_tile(const rkm_mm_args *a, int64_t r, int64_t i, const int RW, const int RX)
{
    const int64_t nb = a->n_in / 32;
    const rkm_block_q4_0 *w[4];
    const int8_t *xq[4];
    const float *xd[4];
    __m256 acc[4][4];
    const __m256i ones = _mm256_set1_epi16(1), eights = _mm256_set1_epi8(8);
    const size_t tile = (size_t)RW * a->w_row_bytes, pfd = tile * ((PF_BYTES + tile - 1) / tile);
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++) w[rr] = (const rkm_block_q4_0 *)((const char *)a->w + (r + rr) * a->w_row_bytes);
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
        xq[c] = a->xq + (i + c) * nb * 32;
        xd[c] = a->xd + (i + c) * nb;
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[rr][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i nib[4];
        __m256 dw[4];
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) {
            if (RX == 1 && (b & 1) == 0) _mm_prefetch((const char *)&w[rr][b] + pfd, _MM_HINT_T0);
            nib[rr] = q4_nibbles(w[rr][b].qs);
            dw[rr] = scale8(w[rr][b].d);
        }
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            __m256i xv = _mm256_load_si256((const __m256i *)(xq[c] + b * 32));
            __m256i cx = _mm256_maddubs_epi16(eights, xv); /* 8 * (x pairs) */
            __m256 dx = _mm256_broadcast_ss(xd[c] + b);
#pragma GCC unroll 4
            for (int rr = 0; rr < RW; rr++) {
                __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(nib[rr], xv), cx);
                __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                acc[rr][c] = _mm256_fmadd_ps(p, _mm256_mul_ps(dw[rr], dx), acc[rr][c]);
            }
        }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) a->y[(i + c) * a->ldy + r + rr] = rkm_x86_hsum_ps(acc[rr][c]);
}

/* ---------------------------------------------------------- f32 / f16 */
/* f16: 0 f32, 1 f16, 2 bf16 */
AVX2_ALWAYS_INLINE __m256 load_w8(const void *w, int64_t k, int f16)
{
    if (f16 == 2)
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const rkm_bf16 *)w + k))), 16));
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const rkm_f16 *)w + k)));
    return _mm256_loadu_ps((const float *)w + k);
}

AVX2_ALWAYS_INLINE float load_w1(const void *w, int64_t k, int f16)
{
    if (f16 == 2) return rkm_bf16_to_f32(((const rkm_bf16 *)w)[k]);
    return f16 ? _cvtsh_ss(((const rkm_f16 *)w)[k]) : ((const float *)w)[k];
}

AVX2_ALWAYS_INLINE void fp_tile(const rkm_mm_args *a, int64_t r, int64_t i, const int RW, const int RX,
                                const int f16)
{
    const int64_t n = a->n_in, n8 = n & ~(int64_t)7;
    const void *w[4];
    const float *x[4];
    __m256 acc[4][4];
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++) w[rr] = (const char *)a->w + (r + rr) * a->w_row_bytes;
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) x[c] = a->x + (i + c) * n;
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[rr][c] = _mm256_setzero_ps();
    for (int64_t k = 0; k < n8; k += 8) {
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) {
            __m256 wv = load_w8(w[rr], k, f16);
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) acc[rr][c] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[c] + k), acc[rr][c]);
        }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            float s = rkm_x86_hsum_ps(acc[rr][c]);
            for (int64_t k = n8; k < n; k++) s += load_w1(w[rr], k, f16) * x[c][k];
            a->y[(i + c) * a->ldy + r + rr] = s;
        }
}

/* Row/column tiling shared by all types: the big tile where it fits, then
 * single rows and single activation rows for the remainders. Many
 * activation rows (prefill, image patches) are taken in blocks of about
 * 256 KiB (a multiple of 4 rows), each block against all of the thread's
 * weight rows, so that a block stays in L2 while the weights stream past
 * it once per block instead of once per pair of weight rows. The tiles
 * are the same as without blocks (only the last block has a remainder),
 * so the results are too. */
#define DEFINE_MM(NAME, TILE, ...)                                                    \
    static void NAME(const rkm_mm_args *a, int64_t r0, int64_t r1)                    \
    {                                                                                 \
        int64_t r = r0;                                                               \
        if (a->m == 1) {                                                              \
            for (; r + 4 <= r1; r += 4) TILE(a, r, 0, 4, 1, ##__VA_ARGS__);           \
            for (; r < r1; r++) TILE(a, r, 0, 1, 1, ##__VA_ARGS__);                   \
            return;                                                                   \
        }                                                                             \
        const int64_t bi = RKM_MAX((int64_t)4, ((int64_t)65536 / RKM_MAX(a->n_in, (int64_t)1)) & ~(int64_t)3); \
        for (int64_t i0 = 0; i0 < a->m; i0 += bi) {                                   \
            const int64_t i1 = RKM_MIN(a->m, i0 + bi);                                \
            for (r = r0; r + 2 <= r1; r += 2) {                                       \
                int64_t i = i0;                                                       \
                for (; i + 4 <= i1; i += 4) TILE(a, r, i, 2, 4, ##__VA_ARGS__);       \
                for (; i < i1; i++) TILE(a, r, i, 2, 1, ##__VA_ARGS__);               \
            }                                                                         \
            for (; r < r1; r++) {                                                     \
                int64_t i = i0;                                                       \
                for (; i + 4 <= i1; i += 4) TILE(a, r, i, 1, 4, ##__VA_ARGS__);       \
                for (; i < i1; i++) TILE(a, r, i, 1, 1, ##__VA_ARGS__);               \
            }                                                                         \
        }                                                                             \
    }

DEFINE_MM(mm_q8_0_avx2, q8_0_tile)
DEFINE_MM(mm_q4_0_avx2, q4_0_tile)
DEFINE_MM(mm_f32_avx2, fp_tile, 0)
DEFINE_MM(mm_f16_avx2, fp_tile, 1)
DEFINE_MM(mm_bf16_avx2, fp_tile, 2)

/* ------------------------------------------------ packed weights ----
 * The packed layout (kernels.h): per block of a 16-row group, 16 fp16
 * scales (MXFP4: exponent bytes) and 4 (q4_0, MXFP4, IQ4_NL) / 8 (q8_0) 64-byte parts of one 4-byte word per
 * row. A ymm holds 8 rows' words, so a group is two halves of 8 rows;
 * part g multiplies the broadcast activation bytes 4g..4g+3. q4_0:
 * nibbles (0..15) x x with vpmaddubsw, the 8 parts' 16-bit pair sums
 * added in 16 bits (at most 8 * 2 * 15 * 127 = 30480: exact), then one
 * vpmaddwd and -8 * sum(x). q8_0: the sign trick per part, pair sums at
 * most 2 * 128 * 127 = 32512, widened per part. Then exactly the
 * reference's float step: acc = fma(float(isum), d_w * d_x, acc). */
static inline __attribute__((always_inline)) int32_t pk2_x4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* NG groups (16 * NG rows) x RX activation rows: decode (RX = 1) reads NG
 * groups as parallel streams, which the memory system serves faster than
 * one; prefill (NG = 1) unpacks each part once for up to 4 activation
 * rows. */
static inline __attribute__((always_inline)) void pk2_rows(const rkm_mm_args *a, int64_t r, int64_t i, const int RX,
                                                           const int NG, const int type)
{
    const int64_t nb = a->n_in / 32;
    const size_t bb = rkm_pk_block(type), gstride = a->w_row_bytes * RKM_PACK_ROWS;
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const __m256i kv = _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rkm_kvalues_mxfp4)),
                                       _mm256_set1_epi8(12));
    const __m256i knl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rkm_kvalues_iq4nl));
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    __m256 acc[4][2][4];
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[k][0][c] = acc[k][1][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * bb;
            if (RX == 1) /* every line of the block, 4 KiB ahead in its stream */
                for (size_t l = 0; l < bb; l += 64) _mm_prefetch((const char *)blk + 4096 + l, _MM_HINT_T0);
#pragma GCC unroll 4
            for (int hf = 0; hf < 2; hf++) {
                __m256 dw;
                __m256i isum[4];
                if (type == RKM_TYPE_MXFP4) {
                    /* 2^(e-128): (e - 1) << 23, subnormal below e = 2;
                     * levels + 12 (0..24) by vpshufb, the lows' and the
                     * highs' pair sums in 16 bits apart (4 x 2 x 24 x 128
                     * = 24576 each: exact), - 12 * sum(x) */
                    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 8 * hf)));
                    const __m256i nrm = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
                    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
                    dw = _mm256_castsi256_ps(_mm256_blendv_epi8(nrm, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
                    __m256i slo[4], shi[4];
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++) slo[c] = shi[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
                    for (int h = 0; h < 4; h++) {
                        __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 16 + 64 * h + 32 * hf));
                        __m256i lo = _mm256_shuffle_epi8(kv, _mm256_and_si256(v, m4));
                        __m256i hi = _mm256_shuffle_epi8(kv, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
#pragma GCC unroll 4
                        for (int c = 0; c < RX; c++) {
                            const int8_t *xb = a->xq + (i + c) * nb * 32 + b * 32;
                            slo[c] = _mm256_add_epi16(slo[c], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(pk2_x4(xb + 4 * h))));
                            shi[c] = _mm256_add_epi16(shi[c], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(pk2_x4(xb + 16 + 4 * h))));
                            RKM_X86_PIN(slo[c]);
                            RKM_X86_PIN(shi[c]);
                        }
                    }
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++)
                        isum[c] = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(slo[c], ones), _mm256_madd_epi16(shi[c], ones)),
                                                   _mm256_set1_epi32(-12 * a->xs[(i + c) * nb + b]));
                } else if (type == RKM_TYPE_IQ4_NL) {
                    /* the signed levels by vpshufb, the sign trick per
                     * part (pairs at most 2 x 127 x 127 = 32258), each
                     * part widened by vpmaddwd */
                    dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * hf)));
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
                    for (int h = 0; h < 4; h++) {
                        __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * h + 32 * hf));
                        __m256i lo = _mm256_shuffle_epi8(knl, _mm256_and_si256(v, m4));
                        __m256i hi = _mm256_shuffle_epi8(knl, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
                        __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
#pragma GCC unroll 4
                        for (int c = 0; c < RX; c++) {
                            const int8_t *xb = a->xq + (i + c) * nb * 32 + b * 32;
                            __m256i pl = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(_mm256_set1_epi32(pk2_x4(xb + 4 * h)), lo));
                            __m256i ph = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(_mm256_set1_epi32(pk2_x4(xb + 16 + 4 * h)), hi));
                            isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(pl, ones), _mm256_madd_epi16(ph, ones)));
                            RKM_X86_PIN(isum[c]);
                        }
                    }
                } else if (type == RKM_TYPE_Q4_0) {
                    dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * hf)));
                    __m256i s16[4];
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++) s16[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
                    for (int h = 0; h < 4; h++) {
                        __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * h + 32 * hf));
                        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#pragma GCC unroll 4
                        for (int c = 0; c < RX; c++) {
                            const int8_t *xb = a->xq + (i + c) * nb * 32 + b * 32;
                            s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(pk2_x4(xb + 4 * h))));
                            s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(pk2_x4(xb + 16 + 4 * h))));
                        }
                    }
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++)
                        isum[c] = _mm256_add_epi32(_mm256_madd_epi16(s16[c], ones), _mm256_set1_epi32(-8 * a->xs[(i + c) * nb + b]));
                } else {
                    dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * hf)));
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
                    for (int g = 0; g < 8; g++) {
                        __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * g + 32 * hf));
                        __m256i av = _mm256_abs_epi8(v);
#pragma GCC unroll 4
                        for (int c = 0; c < RX; c++) {
                            const int8_t *xb = a->xq + (i + c) * nb * 32 + b * 32;
                            __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(_mm256_set1_epi32(pk2_x4(xb + 4 * g)), v));
                            isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, ones));
                            RKM_X86_PIN(isum[c]);
                        }
                    }
                }
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++)
                    acc[k][hf][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(dw, _mm256_set1_ps(a->xd[(i + c) * nb + b])),
                                                    acc[k][hf][c]);
            }
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            _mm256_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k, acc[k][0][c]);
            _mm256_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k + 8, acc[k][1][c]);
        }
}

static inline __attribute__((always_inline)) void pk2_mm(const rkm_mm_args *a, int64_t r0, int64_t r1, const int type)
{
    int64_t r = r0;
    /* q4_0 is bound by its vpmaddubsw, which tiling does not save: its
     * rows run one by one over 4 groups (measured 145 against 121 GOP/s
     * tiled in cache); the others' unpacking is shared by 4 rows */
    if (a->m == 1 || type == RKM_TYPE_Q4_0)
        for (; r + 4 * RKM_PACK_ROWS <= r1; r += 4 * RKM_PACK_ROWS)
            for (int64_t i = 0; i < a->m; i++) pk2_rows(a, r, i, 1, 4, type);
    for (; r + RKM_PACK_ROWS <= r1; r += RKM_PACK_ROWS) {
        int64_t i = 0;
        for (; i + 4 <= a->m; i += 4) pk2_rows(a, r, i, 4, 1, type);
        for (; i + 2 <= a->m; i += 2) pk2_rows(a, r, i, 2, 1, type);
        for (; i < a->m; i++) pk2_rows(a, r, i, 1, 1, type);
    }
}

static void mm_q8_0_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk2_mm(a, r0, r1, RKM_TYPE_Q8_0); }
static void mm_q4_0_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk2_mm(a, r0, r1, RKM_TYPE_Q4_0); }
static void mm_mxfp4_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk2_mm(a, r0, r1, RKM_TYPE_MXFP4); }
static void mm_iq4_nl_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk2_mm(a, r0, r1, RKM_TYPE_IQ4_NL); }

/* --------------------------------------------------------- element ops */
static void rmsnorm_avx2(float *out, const float *x, const float *w, int64_t n, float eps)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    float sum = rkm_x86_hsum_ps(_mm256_add_ps(s0, s1));
    for (; i < n; i++) sum += x[i] * x[i];
    float scale = 1.0f / sqrtf(sum / (float)n + eps);
    __m256 sv = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), sv);
        if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(out + i, v);
    }
    for (; i < n; i++) out[i] = w ? x[i] * scale * w[i] : x[i] * scale;
}

/* Applies f to 8-float chunks of n values, with a masked tail. */
#define MAP8(n, BODY)                                                           \
    do {                                                                        \
        int64_t i_ = 0;                                                         \
        for (; i_ + 8 <= (n); i_ += 8) {                                        \
            const int64_t i = i_;                                               \
            const __m256i mask = _mm256_set1_epi32(-1);                         \
            BODY;                                                               \
        }                                                                       \
        if (i_ < (n)) {                                                         \
            const int64_t i = i_;                                               \
            const __m256i mask = rkm_x86_tail_mask((int)((n) - i_));            \
            BODY;                                                               \
        }                                                                       \
    } while (0)

static void softmax_avx2(float *x, int64_t n)
{
    if (n <= 0) return;
    __m256 mx = _mm256_set1_ps(-INFINITY);
    MAP8(n, mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY),
                                                     _mm256_maskload_ps(x + i, mask),
                                                     _mm256_castsi256_ps(mask))));
    __m256 mv = _mm256_set1_ps(rkm_x86_hmax_ps(mx));
    __m256 sum = _mm256_setzero_ps();
    MAP8(n, {
        __m256 e = rkm_x86_exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), mv));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
        sum = _mm256_add_ps(sum, e);
        _mm256_maskstore_ps(x + i, mask, e);
    });
    __m256 inv = _mm256_set1_ps(1.0f / rkm_x86_hsum_ps(sum));
    MAP8(n, _mm256_maskstore_ps(x + i, mask, _mm256_mul_ps(_mm256_maskload_ps(x + i, mask), inv)));
}

static void swiglu_avx2(float *out, const float *g, const float *u, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    MAP8(n, {
        __m256 gv = _mm256_maskload_ps(g + i, mask);
        __m256 e = rkm_x86_exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        __m256 s = _mm256_div_ps(gv, _mm256_add_ps(one, e));
        _mm256_maskstore_ps(out + i, mask, _mm256_mul_ps(s, _mm256_maskload_ps(u + i, mask)));
    });
}

/* gelu_tanh of 8 lanes: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))) */
AVX2_ALWAYS_INLINE __m256 gelu8(__m256 xv)
{
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 c0 = _mm256_set1_ps(0.79788456080286535587989211986876f), c1 = _mm256_set1_ps(0.044715f);
    __m256 z = _mm256_mul_ps(_mm256_mul_ps(c0, xv), _mm256_fmadd_ps(_mm256_mul_ps(c1, xv), xv, one));
    return _mm256_mul_ps(_mm256_mul_ps(half, xv), _mm256_add_ps(one, rkm_x86_tanh_ps(z)));
}

static void geglu_avx2(float *out, const float *g, const float *u, int64_t n)
{
    MAP8(n, _mm256_maskstore_ps(out + i, mask,
                                _mm256_mul_ps(gelu8(_mm256_maskload_ps(g + i, mask)), _mm256_maskload_ps(u + i, mask))));
}

static void gelu_avx2(float *out, const float *x, int64_t n)
{
    MAP8(n, _mm256_maskstore_ps(out + i, mask, gelu8(_mm256_maskload_ps(x + i, mask))));
}

static void f32_to_f16_avx2(const float *x, rkm_f16 *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

static void f16_to_f32_avx2(const rkm_f16 *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

static float dot_f32_f16_avx2(const float *x, const rkm_f16 *y, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i))), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8),
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i + 8))), s1);
    }
    float s = rkm_x86_hsum_ps(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += x[i] * _cvtsh_ss(y[i]);
    return s;
}

static void axpy_f16_avx2(float *y, float a, const rkm_f16 *x, int64_t n)
{
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))),
                                                _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * _cvtsh_ss(x[i]);
}

/* The gated delta rule's step (kernels.h) in blocks of 32 value columns:
 * the block's sums stay in registers while the rows stream by; each lane
 * does the reference's multiply and fused multiply-adds in its order. */
static void delta_step_avx2(float *t, const float *q, const float *k, const float *v, float decay, float beta, float qk,
                            int64_t n, float *o, float *d)
{
    const __m256 dv = _mm256_set1_ps(decay);
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 s[4], a[4];
        for (int b = 0; b < 4; b++) s[b] = a[b] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n; i++) {
            float *r = t + i * n + j;
            __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
            for (int b = 0; b < 4; b++) {
                __m256 x = _mm256_mul_ps(_mm256_loadu_ps(r + 8 * b), dv);
                _mm256_storeu_ps(r + 8 * b, x);
                s[b] = _mm256_fmadd_ps(ki, x, s[b]);
                a[b] = _mm256_fmadd_ps(qi, x, a[b]);
            }
        }
        for (int b = 0; b < 4; b++) {
            _mm256_storeu_ps(d + j + 8 * b, s[b]);
            _mm256_storeu_ps(o + j + 8 * b, a[b]);
        }
    }
    rkm_delta_cols(t, q, k, decay, n, j, o, d); /* the columns past the last block */
    const __m256 bv = _mm256_set1_ps(beta), qv = _mm256_set1_ps(qk);
    for (j = 0; j + 8 <= n; j += 8) {
        __m256 x = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + j), _mm256_loadu_ps(d + j)), bv);
        _mm256_storeu_ps(d + j, x);
        _mm256_storeu_ps(o + j, _mm256_fmadd_ps(qv, x, _mm256_loadu_ps(o + j)));
    }
    for (; j < n; j++) {
        d[j] = (v[j] - d[j]) * beta;
        o[j] = fmaf(qk, d[j], o[j]);
    }
    for (int64_t i = 0; i < n; i++) {
        float *r = t + i * n;
        __m256 ki = _mm256_set1_ps(k[i]);
        for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(r + j, _mm256_fmadd_ps(ki, _mm256_loadu_ps(d + j), _mm256_loadu_ps(r + j)));
        for (; j < n; j++) r[j] = fmaf(k[i], d[j], r[j]);
    }
}

/* A Mamba-2 scan step (kernels.h): the state as the reference computes
 * it, the sum in eight lanes. */
static float scan_step_avx2(float *st, const float *b, const float *c, float da, float xdt, int64_t n)
{
    const __m256 dav = _mm256_set1_ps(da), xv = _mm256_set1_ps(xdt);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 s = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(st + i), dav), _mm256_mul_ps(_mm256_loadu_ps(b + i), xv));
        _mm256_storeu_ps(st + i, s);
        acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(c + i), acc);
    }
    return rkm_scan_tail(st, b, c, da, xdt, i, n, rkm_x86_hsum_ps(acc));
}

/* A causal convolution's step (kernels.h) eight channels at a time, each
 * lane doing the reference's fused multiply-adds in its order. */
static void conv_step_avx2(float *win, const float *w, const float *x, int64_t ch, int K, float *out)
{
    int64_t c = 0;
    for (; c + 8 <= ch; c += 8) {
        __m256 xc = _mm256_loadu_ps(x + c), acc = _mm256_setzero_ps();
        for (int k = 0; k < K - 1; k++)
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + (int64_t)k * ch + c), _mm256_loadu_ps(win + (int64_t)k * ch + c), acc);
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + (int64_t)(K - 1) * ch + c), xc, acc);
        for (int k = 0; k + 1 < K - 1; k++)
            _mm256_storeu_ps(win + (int64_t)k * ch + c, _mm256_loadu_ps(win + (int64_t)(k + 1) * ch + c));
        if (K > 1) _mm256_storeu_ps(win + (int64_t)(K - 2) * ch + c, xc);
        _mm256_storeu_ps(out + c, acc);
    }
    rkm_conv_cols(win, w, x, ch, K, c, out);
}

/* Row-batched forms: each row exactly as dot_f32_f16_avx2 / a row of
 * axpy_f16_avx2 computes it. Attention runs them over a head's keys or
 * values, one run of contiguous rows per thread: without software
 * prefetch the two cores stream such runs at ~12 GB/s, so the rows
 * RKM_X86_KV_PF_BYTES ahead are prefetched (results do not change). */
static void dot_f32_f16_rows_avx2(const float *x, const rkm_f16 *y, int64_t stride, int64_t rows, int64_t n,
                                  float *out)
{
    int64_t r = 0;
    const int64_t ahead = rkm_x86_kv_pf_rows(stride);
    /* four rows at a time: eight independent FMA chains instead of two
     * (one row's dot is latency-bound), each row's sums in exactly
     * dot_f32_f16_avx2's order */
    for (; r + 4 <= rows; r += 4) {
        const rkm_f16 *y0 = y + r * stride;
        for (int64_t j = r + ahead; j < r + ahead + 4 && j < rows; j++) rkm_x86_prefetch_f16_row(y + j * stride, n);
        __m256 s0[4], s1[4];
        for (int j = 0; j < 4; j++) s0[j] = s1[j] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            __m256 xa = _mm256_loadu_ps(x + i), xb = _mm256_loadu_ps(x + i + 8);
            for (int j = 0; j < 4; j++) {
                const rkm_f16 *yr = y0 + j * stride + i;
                s0[j] = _mm256_fmadd_ps(xa, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)yr)), s0[j]);
                s1[j] = _mm256_fmadd_ps(xb, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(yr + 8))), s1[j]);
            }
        }
        for (int j = 0; j < 4; j++) {
            float sj = rkm_x86_hsum_ps(_mm256_add_ps(s0[j], s1[j]));
            for (int64_t t = i; t < n; t++) sj += x[t] * _cvtsh_ss(y0[j * stride + t]);
            out[r + j] = sj;
        }
    }
    for (; r < rows; r++) out[r] = dot_f32_f16_avx2(x, y + r * stride, n);
}

static void axpy_f16_rows_avx2(float *y, const float *a, const rkm_f16 *x, int64_t stride, int64_t rows, int64_t n)
{
    int64_t i = 0;
    const int64_t ahead = rkm_x86_kv_pf_rows(stride);
    /* 64 columns (8 accumulators) at a time, y in registers across rows:
     * per element the same fma sequence as row-by-row axpy. The first
     * pass prefetches whole rows; the later ones find them in L2. */
    for (; i + 64 <= n; i += 64) {
        __m256 acc[8];
        for (int j = 0; j < 8; j++) acc[j] = _mm256_loadu_ps(y + i + 8 * j);
        for (int64_t r = 0; r < rows; r++) {
            if (i == 0 && r + ahead < rows) rkm_x86_prefetch_f16_row(x + (r + ahead) * stride, n);
            __m256 av = _mm256_set1_ps(a[r]);
            const rkm_f16 *xr = x + r * stride + i;
            for (int j = 0; j < 8; j++)
                acc[j] = _mm256_fmadd_ps(av, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(xr + 8 * j))), acc[j]);
        }
        for (int j = 0; j < 8; j++) _mm256_storeu_ps(y + i + 8 * j, acc[j]);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_loadu_ps(y + i);
        for (int64_t r = 0; r < rows; r++)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(a[r]),
                                  _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + r * stride + i))), acc);
        _mm256_storeu_ps(y + i, acc);
    }
    for (; i < n; i++)
        for (int64_t r = 0; r < rows; r++) y[i] += a[r] * _cvtsh_ss(x[r * stride + i]);
}

/* The bandwidth probe's read (kernels_impl.h): 256-bit loads, four
 * accumulators; streams 4 prefetches each stream 2 KiB ahead. */
static uint64_t read_sum_avx2(const uint64_t *p, size_t n, int streams)
{
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    if (streams == 4) {
        size_t q = n / 4;
        const uint64_t *a = p, *b = a + q, *c = b + q, *d = c + q;
        for (size_t i = 0; i < q; i += 8) {
            _mm_prefetch((const char *)(a + i) + 2048, _MM_HINT_T0);
            _mm_prefetch((const char *)(b + i) + 2048, _MM_HINT_T0);
            _mm_prefetch((const char *)(c + i) + 2048, _MM_HINT_T0);
            _mm_prefetch((const char *)(d + i) + 2048, _MM_HINT_T0);
            s0 = _mm256_add_epi64(s0, _mm256_add_epi64(_mm256_load_si256((const __m256i *)(a + i)),
                                                       _mm256_load_si256((const __m256i *)(a + i + 4))));
            s1 = _mm256_add_epi64(s1, _mm256_add_epi64(_mm256_load_si256((const __m256i *)(b + i)),
                                                       _mm256_load_si256((const __m256i *)(b + i + 4))));
            s2 = _mm256_add_epi64(s2, _mm256_add_epi64(_mm256_load_si256((const __m256i *)(c + i)),
                                                       _mm256_load_si256((const __m256i *)(c + i + 4))));
            s3 = _mm256_add_epi64(s3, _mm256_add_epi64(_mm256_load_si256((const __m256i *)(d + i)),
                                                       _mm256_load_si256((const __m256i *)(d + i + 4))));
        }
    } else {
        for (size_t i = 0; i < n; i += 16) {
            s0 = _mm256_add_epi64(s0, _mm256_load_si256((const __m256i *)(p + i)));
            s1 = _mm256_add_epi64(s1, _mm256_load_si256((const __m256i *)(p + i + 4)));
            s2 = _mm256_add_epi64(s2, _mm256_load_si256((const __m256i *)(p + i + 8)));
            s3 = _mm256_add_epi64(s3, _mm256_load_si256((const __m256i *)(p + i + 12)));
        }
    }
    s0 = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
    uint64_t o[4];
    _mm256_storeu_si256((__m256i *)o, s0);
    return o[0] + o[1] + o[2] + o[3];
}

const rkm_kernel_set rkm_kernels_avx2 = {
    .name = "avx2",
    .init = rkm_x86_init_f16_table,
    .quantize_act = quantize_act_avx2,
    .quantize_act_k = quantize_act_k_avx2,
    .mm_f32 = mm_f32_avx2,
    .mm_f16 = mm_f16_avx2,
    .mm_q8_0 = mm_q8_0_avx2,
    .mm_q4_0 = mm_q4_0_avx2,
    .mm_bf16 = mm_bf16_avx2,
    .mm_q4_1 = rkm_mm_q4_1_avx2,
    .mm_q5_0 = rkm_mm_q5_0_avx2,
    .mm_q5_1 = rkm_mm_q5_1_avx2,
    .mm_q2_k = rkm_mm_q2_k_avx2,
    .mm_q3_k = rkm_mm_q3_k_avx2,
    .mm_q4_k = rkm_mm_q4_k_avx2,
    .mm_q4_k_p = rkm_mm_q4_k_p_avx2,
    .mm_q5_k_p = rkm_mm_q5_k_p_avx2,
    .mm_q6_k_p = rkm_mm_q6_k_p_avx2,
    .mm_q5_k = rkm_mm_q5_k_avx2,
    .mm_q6_k = rkm_mm_q6_k_avx2,
    .mm_iq4_nl = rkm_mm_iq4_nl_avx2,
    .mm_iq4_xs = rkm_mm_iq4_xs_avx2,
    .mm_mxfp4 = rkm_mm_mxfp4_avx2,
    .mm_grid = rkm_mm_grid_avx2,
    .mm_q8_0_p = mm_q8_0_p_avx2,
    .mm_q4_0_p = mm_q4_0_p_avx2,
    .mm_mxfp4_p = mm_mxfp4_p_avx2,
    .mm_iq4_nl_p = mm_iq4_nl_p_avx2,
    .mm_iq4_xs_p = rkm_mm_iq4_xs_p_avx2,
    .mm_q3_k_p = rkm_mm_q3_k_p_avx2,
    .mm_q2_k_p = rkm_mm_q2_k_p_avx2,
    .rmsnorm = rmsnorm_avx2,
    .softmax = softmax_avx2,
    .swiglu = swiglu_avx2,
    .geglu = geglu_avx2,
    .gelu = gelu_avx2,
    .f32_to_f16 = f32_to_f16_avx2,
    .f16_to_f32 = f16_to_f32_avx2,
    .dot_f32_f16 = dot_f32_f16_avx2,
    .axpy_f16 = axpy_f16_avx2,
    .delta_step = delta_step_avx2,
    .scan_step = scan_step_avx2,
    .conv_step = conv_step_avx2,
    .dot_f32_f16_rows = dot_f32_f16_rows_avx2,
    .axpy_f16_rows = axpy_f16_rows_avx2,
    .read_sum = read_sum_avx2,
};
