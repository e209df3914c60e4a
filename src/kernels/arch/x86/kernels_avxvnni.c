/*
 * kernels_avxvnni.c - prefill q8_0/q4_0 matmuls for CPUs with AVX-VNNI
 * (VEX-encoded vpdpbusd on ymm: Alder Lake and later client cores,
 * Sapphire Rapids, Zen 5) but possibly without AVX-512, e.g. most laptops.
 * Compiled with -mavxvnni -mavx2 -mfma -mf16c. Everything else, and
 * prefill with few rows (m < IL_MIN_M), comes from the AVX2 set.
 *
 * Same interleaved-rows scheme as the AVX-512 VNNI file (see there and
 * docs/KERNELS.md), with 8 rows per ymm: each tile of 8 weight rows is
 * repacked on the fly (a 8 x 4 dword transpose per block) so that lane r
 * holds 4 consecutive values of row r; one vpdpbusd multiplies 8 rows by 4
 * broadcast activation bytes, and the float scaling is done once per 8
 * rows. q4_0 nibbles stay unsigned (sum starts at -8 * sum(x)); q8_0
 * values get +128 (sum starts at -128 * sum(x)). Exact integer algebra.
 *
 * Stateless apart from rkm_kernel_scratch; safe from any thread.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/arch/x86/x86_common.h"
#include "kernels/kernels_impl.h"

#define V_INLINE static inline __attribute__((always_inline))
#define IL_ROWS 8
#define IL_MIN_M 6
#define IL_BLOCK_BYTES (32 + 8 * 32)

/* 8 rows of 16 bytes (p[rr] + off) -> t[h], lane r = dword h of row r */
V_INLINE void il_transpose8x4(const uint8_t *const *p, size_t off, __m256i t[4])
{
    __m128i half[2][4];
    for (int k = 0; k < 2; k++) {
        __m128i r0 = _mm_loadu_si128((const __m128i *)(p[4 * k] + off));
        __m128i r1 = _mm_loadu_si128((const __m128i *)(p[4 * k + 1] + off));
        __m128i r2 = _mm_loadu_si128((const __m128i *)(p[4 * k + 2] + off));
        __m128i r3 = _mm_loadu_si128((const __m128i *)(p[4 * k + 3] + off));
        __m128i a0 = _mm_unpacklo_epi32(r0, r1), a1 = _mm_unpackhi_epi32(r0, r1);
        __m128i a2 = _mm_unpacklo_epi32(r2, r3), a3 = _mm_unpackhi_epi32(r2, r3);
        half[k][0] = _mm_unpacklo_epi64(a0, a2);
        half[k][1] = _mm_unpackhi_epi64(a0, a2);
        half[k][2] = _mm_unpacklo_epi64(a1, a3);
        half[k][3] = _mm_unpackhi_epi64(a1, a3);
    }
    for (int h = 0; h < 4; h++) t[h] = _mm256_set_m128i(half[1][h], half[0][h]);
}

static void il_repack(const rkm_mm_args *a, int64_t r, int64_t nb, char *buf, const int q4)
{
    const size_t bb = q4 ? sizeof(rkm_block_q4_0) : sizeof(rkm_block_q8_0);
    const __m256i m4 = _mm256_set1_epi8(15), flip = _mm256_set1_epi8((char)0x80);
    const uint8_t *p[IL_ROWS];
    for (int64_t b = 0; b < nb; b++) {
        float *sc = (float *)(buf + b * IL_BLOCK_BYTES);
        __m256i *q = (__m256i *)(buf + b * IL_BLOCK_BYTES + 32), t[4];
        for (int rr = 0; rr < IL_ROWS; rr++) {
            const char *blk = (const char *)a->w + (r + rr) * a->w_row_bytes + b * bb;
            rkm_f16 d;
            memcpy(&d, blk, sizeof d);
            sc[rr] = rkm_x86_f16_table[d];
            p[rr] = (const uint8_t *)blk + sizeof(rkm_f16);
        }
        il_transpose8x4(p, 0, t);
        if (q4) {
            for (int h = 0; h < 4; h++) {
                _mm256_store_si256(q + h, _mm256_and_si256(t[h], m4));
                _mm256_store_si256(q + h + 4, _mm256_and_si256(_mm256_srli_epi16(t[h], 4), m4));
            }
        } else {
            for (int h = 0; h < 4; h++) _mm256_store_si256(q + h, _mm256_xor_si256(t[h], flip));
            il_transpose8x4(p, 16, t);
            for (int h = 0; h < 4; h++) _mm256_store_si256(q + h + 4, _mm256_xor_si256(t[h], flip));
        }
    }
}

V_INLINE int32_t il_x4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

V_INLINE void il_compute(const rkm_mm_args *a, const char *buf, int64_t r, int64_t i, const int RX, const int bias)
{
    const int64_t nb = a->n_in / 32;
    __m256 acc[2];
    const int8_t *xq[2];
    const float *xd[2];
    const int32_t *xs[2];
#pragma GCC unroll 2
    for (int c = 0; c < RX; c++) {
        acc[c] = _mm256_setzero_ps();
        xq[c] = a->xq + (i + c) * nb * 32;
        xd[c] = a->xd + (i + c) * nb;
        xs[c] = a->xs + (i + c) * nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const __m256 sc = _mm256_load_ps((const float *)(buf + b * IL_BLOCK_BYTES));
        const __m256i *q = (const __m256i *)(buf + b * IL_BLOCK_BYTES + 32);
        __m256i w[8];
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) w[g] = _mm256_load_si256(q + g);
#pragma GCC unroll 2
        for (int c = 0; c < RX; c++) {
            const int8_t *xb = xq[c] + b * 32;
            __m256i s0 = _mm256_set1_epi32(-bias * xs[c][b]), s1 = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int g = 0; g < 8; g += 2) {
                s0 = _mm256_dpbusd_avx_epi32(s0, w[g], _mm256_set1_epi32(il_x4(xb + 4 * g)));
                s1 = _mm256_dpbusd_avx_epi32(s1, w[g + 1], _mm256_set1_epi32(il_x4(xb + 4 * g + 4)));
            }
            __m256 pv = _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1));
            acc[c] = _mm256_fmadd_ps(pv, _mm256_mul_ps(sc, _mm256_broadcast_ss(xd[c] + b)), acc[c]);
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < RX; c++) _mm256_storeu_ps(a->y + (i + c) * a->ldy + r, acc[c]);
}

V_INLINE void il_mm(const rkm_mm_args *a, int64_t r0, int64_t r1, const int q4)
{
    const int64_t nb = a->n_in / 32;
    char *buf = rkm_kernel_scratch((size_t)nb * IL_BLOCK_BYTES);
    int64_t r = r0;
    for (; r + IL_ROWS <= r1; r += IL_ROWS) {
        il_repack(a, r, nb, buf, q4);
        int64_t i = 0;
        for (; i + 2 <= a->m; i += 2) il_compute(a, buf, r, i, 2, q4 ? 8 : 128);
        for (; i < a->m; i++) il_compute(a, buf, r, i, 1, q4 ? 8 : 128);
    }
    if (r < r1) (q4 ? rkm_kernels_avx2.mm_q4_0 : rkm_kernels_avx2.mm_q8_0)(a, r, r1);
}

static void mm_q8_0_avxvnni(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    if (a->m >= IL_MIN_M) il_mm(a, r0, r1, 0);
    else rkm_kernels_avx2.mm_q8_0(a, r0, r1);
}

static void mm_q4_0_avxvnni(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    if (a->m >= IL_MIN_M) il_mm(a, r0, r1, 1);
    else rkm_kernels_avx2.mm_q4_0(a, r0, r1);
}

const rkm_kernel_set rkm_kernels_avxvnni = {
    .name = "avxvnni",
    .mm_q8_0 = mm_q8_0_avxvnni,
    .mm_q4_0 = mm_q4_0_avxvnni,
};
