/*
 * neon_impl.h - AArch64 NEON kernels, written once and compiled twice:
 * kernels_neon.c (baseline ARMv8.0: int8 products with smull/smlal and
 * pairwise widening adds) and kernels_dotprod.c (RKM_NEON_DOTPROD: ARMv8.2
 * sdot, four int8 products per 32-bit lane in one instruction, e.g. the
 * Cortex-A76 cores of an RK3588). The including file defines
 * RKM_NEON_DOTPROD (0/1) and RKM_NEON_SUFFIX.
 *
 * Quantized matmuls: per block, the integer dot product of 32 int8 pairs
 * in int32 lanes, converted to float once and accumulated with a
 * by-element FMA: the d_w * d_x products of a tile (RW rows x one
 * activation row) are one vector multiply, and lane rr of it scales row
 * rr. q4_0 nibbles become signed (nibble - 8) before the product.
 * Tiles: 4 weight rows x 1 activation row for decode, 4 x 4 for prefill
 * (16 float accumulators, 32 registers in all); the dot-product build
 * uses interleaved rows for prefill instead (see below).
 *
 * Plain NEON's 16-bit intermediate sums two products of |value| <= 127
 * (at most 32258): exact for every block the quantizers produce. A
 * malformed file with -128 weights could wrap there; it cannot crash.
 *
 * f32, f16 and bf16 weights: float tiles of the same shapes (bf16 widened
 * with a shift). The other block types (K-quants, IQ4, MXFP4, Q4_1,
 * Q5_0, Q5_1) are neon_qblock.h, which the including files add after
 * this one.
 *
 * Element ops: vector exp (Cephes polynomial, about 2 ulp), f16
 * conversions with fcvtl/fcvtn (ARMv8.0), roundf with frinta (ties away
 * from zero, exactly ggml's quantizer). Stateless apart from
 * rkm_kernel_scratch; safe from any thread.
 */
#include <arm_neon.h>
#include <math.h>

#include "kernels/kernels_impl.h"
#include "kernels/quant_tables.h"

#define N_INLINE static inline __attribute__((always_inline))
#define N_CAT2(a, b) a##b
#define N_CAT(a, b) N_CAT2(a, b)
#define N_FN(name) N_CAT(name, RKM_NEON_SUFFIX)
#define PF_BYTES 2048

N_INLINE float32x4_t n_f16x4(const rkm_f16 *p0, const rkm_f16 *p1, const rkm_f16 *p2, const rkm_f16 *p3)
{
    uint16x4_t v = vdup_n_u16(0);
    v = vld1_lane_u16(p0, v, 0);
    v = vld1_lane_u16(p1, v, 1);
    v = vld1_lane_u16(p2, v, 2);
    v = vld1_lane_u16(p3, v, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(v));
}

/* int32x4 lanes whose sum is the dot product of 32 int8 pairs */
N_INLINE int32x4_t n_dot32(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1)
{
#if RKM_NEON_DOTPROD
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
#else
    int16x8_t a = vmull_s8(vget_low_s8(w0), vget_low_s8(x0));
    a = vmlal_high_s8(a, w0, x0);
    int16x8_t b = vmull_s8(vget_low_s8(w1), vget_low_s8(x1));
    b = vmlal_high_s8(b, w1, x1);
    return vpadalq_s16(vpaddlq_s16(a), b);
#endif
}

/* ------------------------------------------------------ quantization */
static void N_FN(quantize_act_)(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s)
{
    int64_t nb = n / RKM_QK8_0;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * 32;
        float32x4_t v[8], amax = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(xb + 4 * k);
            amax = vmaxq_f32(amax, vabsq_f32(v[k]));
        }
        float am = vmaxvq_f32(amax);
        float db = am / 127.0f;
        float id = db != 0.0f ? 1.0f / db : 0.0f;
        int32x4_t q[8], sum = vdupq_n_s32(0);
        for (int k = 0; k < 8; k++) {
            q[k] = vcvtq_s32_f32(vrndaq_f32(vmulq_n_f32(v[k], id)));
            sum = vaddq_s32(sum, q[k]);
        }
        for (int k = 0; k < 8; k += 4) {
            int16x8_t a = vcombine_s16(vmovn_s32(q[k]), vmovn_s32(q[k + 1]));
            int16x8_t c = vcombine_s16(vmovn_s32(q[k + 2]), vmovn_s32(q[k + 3]));
            vst1q_s8(qs + b * 32 + 4 * k, vcombine_s8(vmovn_s16(a), vmovn_s16(c)));
        }
        d[b] = vgetq_lane_f32(vcvt_f32_f16(vcvt_f16_f32(vdupq_n_f32(db))), 0);
        s[b] = vaddvq_s32(sum);
    }
}

/* q8_K activations, bit-identical to rkm_quantize_act_k: per 256 values
 * the first value m of largest magnitude (NaN ignored, as the reference's
 * comparisons do: fmaxnm), q = rint(x * -127/m) (frintn: ties to even)
 * clamped to [-128, 127] with NaN as 0, d = 1/(-127/m), sums of 16. */
static void N_FN(quantize_act_k_)(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s16)
{
    for (int64_t b = 0; b < n / RKM_QK_K; b++) {
        const float *xb = x + b * RKM_QK_K;
        float32x4_t am = vdupq_n_f32(0.0f);
        for (int j = 0; j < RKM_QK_K; j += 4) am = vmaxnmq_f32(am, vabsq_f32(vld1q_f32(xb + j)));
        const float amax = vmaxnmvq_f32(am);
        float max = 0.0f;
        for (int j = 0; amax != 0.0f && j < RKM_QK_K; j += 4)
            if (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(xb + j)), vdupq_n_f32(amax)))) {
                int l = 0;
                while (fabsf(xb[j + l]) != amax) l++;
                max = xb[j + l];
                break;
            }
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        for (int g = 0; g < RKM_QK_K / 16; g++) {
            int32x4_t q[4];
            for (int k = 0; k < 4; k++) {
                float32x4_t v = vrndnq_f32(vmulq_n_f32(vld1q_f32(xb + 16 * g + 4 * k), iscale));
                v = vbslq_f32(vceqq_f32(v, v), v, vdupq_n_f32(0.0f));
                q[k] = vcvtq_s32_f32(vminq_f32(vmaxq_f32(v, vdupq_n_f32(-128.0f)), vdupq_n_f32(127.0f)));
            }
            int16x8_t lo = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
            int16x8_t hi = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            vst1q_s8(qs + b * RKM_QK_K + 16 * g, vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)));
            s16[b * (RKM_QK_K / 16) + g] = vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
        }
        d[b] = amax != 0.0f ? 1.0f / iscale : 0.0f;
    }
}

/* ------------------------------------------------------ q8_0 / q4_0 */
N_INLINE void n_load_w(const void *blk, int q4, int8x16_t *w0, int8x16_t *w1)
{
    if (q4) {
        const rkm_block_q4_0 *b = blk;
        uint8x16_t q = vld1q_u8(b->qs);
        int8x16_t e = vdupq_n_s8(8);
        *w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), e);
        *w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), e);
    } else {
        const rkm_block_q8_0 *b = blk;
        *w0 = vld1q_s8(b->qs);
        *w1 = vld1q_s8(b->qs + 16);
    }
}

N_INLINE void n_tile(const rkm_mm_args *a, int64_t r, int64_t i, const int RW, const int RX, const int q4)
{
    const int64_t nb = a->n_in / 32;
    const size_t bb = q4 ? sizeof(rkm_block_q4_0) : sizeof(rkm_block_q8_0);
    const char *w[4];
    const int8_t *xq[4];
    const float *xd[4];
    float32x4_t acc[4][4];
    const size_t tile = (size_t)RW * a->w_row_bytes, pfd = tile * ((PF_BYTES + tile - 1) / tile);
#pragma GCC unroll 4
    for (int rr = 0; rr < 4; rr++) w[rr] = (const char *)a->w + (r + (rr < RW ? rr : 0)) * a->w_row_bytes;
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
        xq[c] = a->xq + (i + c) * nb * 32;
        xd[c] = a->xd + (i + c) * nb;
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[rr][c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int8x16_t w0[4], w1[4];
        const rkm_f16 *dp[4];
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; rr++) {
            const char *blk = w[rr] + b * bb;
            dp[rr] = (const rkm_f16 *)blk; /* d is the first field of both blocks */
            if (rr < RW) {
                if (RX == 1) __builtin_prefetch(blk + pfd);
                n_load_w(blk, q4, &w0[rr], &w1[rr]);
            }
        }
        /* lane rr: d_w of row rr (rows past RW repeat row 0, unused) */
        float32x4_t dw = n_f16x4(dp[0], dp[1], dp[2], dp[3]);
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            int8x16_t x0 = vld1q_s8(xq[c] + b * 32), x1 = vld1q_s8(xq[c] + b * 32 + 16);
            float32x4_t dd = vmulq_n_f32(dw, xd[c][b]);
#pragma GCC unroll 4
            for (int rr = 0; rr < RW; rr++) {
                float32x4_t p = vcvtq_f32_s32(n_dot32(w0[rr], w1[rr], x0, x1));
                switch (rr) { /* the lane index must be a constant */
                case 0: acc[rr][c] = vfmaq_laneq_f32(acc[rr][c], p, dd, 0); break;
                case 1: acc[rr][c] = vfmaq_laneq_f32(acc[rr][c], p, dd, 1); break;
                case 2: acc[rr][c] = vfmaq_laneq_f32(acc[rr][c], p, dd, 2); break;
                default: acc[rr][c] = vfmaq_laneq_f32(acc[rr][c], p, dd, 3); break;
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) a->y[(i + c) * a->ldy + r + rr] = vaddvq_f32(acc[rr][c]);
}

#if RKM_NEON_DOTPROD
/* ---------------------------------------- prefill: interleaved rows ----
 * For m >= IL_MIN_M, q4_0/q8_0 weights are repacked on the fly, 4 rows at
 * a time, so that 32-bit lane r of a vector belongs to weight row r: per
 * block, 4 float scales and 8 vectors whose lane r holds 4 values of row
 * r (k = 4g..4g+3). One sdot by element (vdotq_laneq_s32: activation
 * bytes 4g..4g+3 against all four rows) covers 16 products of 4 rows, a
 * block is 8 of them, and the float scaling is done once per 4 rows
 * instead of once per row. The repacked tile stays in L1/L2 and serves
 * every activation row. q4_0 nibbles stay 0..15 (value + 8); the integer
 * sum starts at -8 * sum(x) instead. The other types of 32 values
 * (neon_qblock.h: IQ4_NL, MXFP4, Q4_1, Q5_0, Q5_1) are repacked into the
 * same layout as their integer values (il_store32), Q4_1 and Q5_1 with
 * their mins after each block. */
#define IL_ROWS 4
#define IL_MIN_M 4
#define IL_BLOCK_BYTES (16 + 8 * 16)

/* 4 rows of 16 bytes -> t[h], lane r = dword h of row r */
N_INLINE void il_transpose4x4(const uint8_t *const *p, size_t off, int32x4_t t[4])
{
    int32x4_t r0 = vreinterpretq_s32_u8(vld1q_u8(p[0] + off)), r1 = vreinterpretq_s32_u8(vld1q_u8(p[1] + off));
    int32x4_t r2 = vreinterpretq_s32_u8(vld1q_u8(p[2] + off)), r3 = vreinterpretq_s32_u8(vld1q_u8(p[3] + off));
    int32x4_t a0 = vtrn1q_s32(r0, r1), a1 = vtrn2q_s32(r0, r1), a2 = vtrn1q_s32(r2, r3), a3 = vtrn2q_s32(r2, r3);
    t[0] = vreinterpretq_s32_s64(vtrn1q_s64(vreinterpretq_s64_s32(a0), vreinterpretq_s64_s32(a2)));
    t[1] = vreinterpretq_s32_s64(vtrn1q_s64(vreinterpretq_s64_s32(a1), vreinterpretq_s64_s32(a3)));
    t[2] = vreinterpretq_s32_s64(vtrn2q_s64(vreinterpretq_s64_s32(a0), vreinterpretq_s64_s32(a2)));
    t[3] = vreinterpretq_s32_s64(vtrn2q_s64(vreinterpretq_s64_s32(a1), vreinterpretq_s64_s32(a3)));
}

/* 4 rows of 32 int8 values in order (p[r]) -> the 8 vectors at q */
N_INLINE void il_store32(const uint8_t *const *p, int8_t *q)
{
    int32x4_t t[4];
    il_transpose4x4(p, 0, t);
    for (int h = 0; h < 4; h++) vst1q_s32((int32_t *)(void *)(q + 16 * h), t[h]);
    il_transpose4x4(p, 16, t);
    for (int h = 0; h < 4; h++) vst1q_s32((int32_t *)(void *)(q + 16 * (h + 4)), t[h]);
}

static void il_repack(const rkm_mm_args *a, int64_t r, int64_t nb, char *buf, const int q4)
{
    const size_t bb = q4 ? sizeof(rkm_block_q4_0) : sizeof(rkm_block_q8_0);
    const uint8_t *p[IL_ROWS];
    for (int64_t b = 0; b < nb; b++) {
        float *sc = (float *)(buf + b * IL_BLOCK_BYTES);
        int8_t *q = (int8_t *)(buf + b * IL_BLOCK_BYTES + 16);
        const rkm_f16 *dp[IL_ROWS];
        for (int rr = 0; rr < IL_ROWS; rr++) {
            const char *blk = (const char *)a->w + (r + rr) * a->w_row_bytes + b * bb;
            dp[rr] = (const rkm_f16 *)blk;
            p[rr] = (const uint8_t *)blk + sizeof(rkm_f16);
        }
        vst1q_f32(sc, n_f16x4(dp[0], dp[1], dp[2], dp[3]));
        if (q4) {
            int32x4_t t[4];
            il_transpose4x4(p, 0, t);
            for (int h = 0; h < 4; h++) {
                uint8x16_t v = vreinterpretq_u8_s32(t[h]);
                vst1q_u8((uint8_t *)q + 16 * h, vandq_u8(v, vdupq_n_u8(15)));
                vst1q_u8((uint8_t *)q + 16 * (h + 4), vshrq_n_u8(v, 4));
            }
        } else {
            il_store32(p, q);
        }
    }
}

/* mins (Q4_1, Q5_1 of neon_qblock.h): each block is followed by the 4
 * rows' dmin (IL_MIN_BYTES more), and acc = fma(-dmin, xm, acc) */
#define IL_MIN_BYTES 16

N_INLINE void il_compute(const rkm_mm_args *a, const char *buf, int64_t r, int64_t i, const int RX, const int q4,
                         const int mins)
{
    const int64_t nb = a->n_in / 32;
    const size_t bs = IL_BLOCK_BYTES + (mins ? IL_MIN_BYTES : 0);
    float32x4_t acc[4];
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xs[4];
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
        acc[c] = vdupq_n_f32(0.0f);
        xq[c] = a->xq + (i + c) * nb * 32;
        xd[c] = a->xd + (i + c) * nb;
        xs[c] = a->xs + (i + c) * nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const float32x4_t sc = vld1q_f32((const float *)(buf + b * bs));
        const int8_t *q = (const int8_t *)(buf + b * bs + 16);
        int8x16_t w[8];
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) w[g] = vld1q_s8(q + 16 * g);
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            int8x16_t x0 = vld1q_s8(xq[c] + b * 32), x1 = vld1q_s8(xq[c] + b * 32 + 16);
            int32x4_t s0 = vdupq_n_s32(q4 ? -8 * xs[c][b] : 0), s1 = vdupq_n_s32(0);
            s0 = vdotq_laneq_s32(s0, w[0], x0, 0);
            s1 = vdotq_laneq_s32(s1, w[1], x0, 1);
            s0 = vdotq_laneq_s32(s0, w[2], x0, 2);
            s1 = vdotq_laneq_s32(s1, w[3], x0, 3);
            s0 = vdotq_laneq_s32(s0, w[4], x1, 0);
            s1 = vdotq_laneq_s32(s1, w[5], x1, 1);
            s0 = vdotq_laneq_s32(s0, w[6], x1, 2);
            s1 = vdotq_laneq_s32(s1, w[7], x1, 3);
            float32x4_t p = vcvtq_f32_s32(vaddq_s32(s0, s1));
            acc[c] = vfmaq_f32(acc[c], p, vmulq_n_f32(sc, xd[c][b]));
            if (mins) {
                const float32x4_t dmin = vld1q_f32((const float *)(buf + b * bs + IL_BLOCK_BYTES));
                acc[c] = vfmsq_f32(acc[c], dmin, vdupq_n_f32(a->xm[(i + c) * nb + b]));
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) vst1q_f32(a->y + (i + c) * a->ldy + r, acc[c]);
}

N_INLINE void il_mm(const rkm_mm_args *a, int64_t r0, int64_t r1, const int q4)
{
    const int64_t nb = a->n_in / 32;
    char *buf = rkm_kernel_scratch((size_t)nb * IL_BLOCK_BYTES);
    int64_t r = r0;
    for (; r + IL_ROWS <= r1; r += IL_ROWS) {
        il_repack(a, r, nb, buf, q4);
        int64_t i = 0;
        for (; i + 4 <= a->m; i += 4) il_compute(a, buf, r, i, 4, q4, 0);
        for (; i < a->m; i++) il_compute(a, buf, r, i, 1, q4, 0);
    }
    for (; r < r1; r++)
        for (int64_t i = 0; i < a->m; i++) n_tile(a, r, i, 1, 1, q4);
}
#endif

/* ------------------------------------------------ packed weights ----
 * The packed layout (kernels.h): per block of a 16-row group, 16 fp16
 * scales (MXFP4: exponent bytes) and 4 (q4_0, MXFP4, IQ4_NL) / 8 (q8_0)
 * 64-byte parts of one 4-byte word per row;
 * a q register holds one word of 4 rows (a quad), so a group is 4 quads and
 * part g multiplies activation bytes 4g..4g+3 (lane g % 4 of x0 / x1).
 * sdot: vdotq_laneq_s32 per part. Plain NEON: smull/smull2 against the 4
 * activation bytes repeated, pairwise add to 16 bits (|pair| <= 2*128*127)
 * and sadalp into the row's 32-bit lane. Either way the exact integer
 * block sum (q4_0 from -8 * sum(x)), then the reference's float step
 * acc = fma(float(isum), d_w * d_x, acc), so the results are bit-identical
 * to every other set's. */
/* The 4 rows' dots of 4 words (w) by the 16 activation bytes x, plus init. */
N_INLINE int32x4_t pk_dot4(const int8x16_t w[4], int8x16_t x, int32x4_t init)
{
#if RKM_NEON_DOTPROD
    int32x4_t s0 = init, s1 = vdupq_n_s32(0);
    s0 = vdotq_laneq_s32(s0, w[0], x, 0);
    s1 = vdotq_laneq_s32(s1, w[1], x, 1);
    s0 = vdotq_laneq_s32(s0, w[2], x, 2);
    s1 = vdotq_laneq_s32(s1, w[3], x, 3);
    return vaddq_s32(s0, s1);
#else
    int32x4_t s = init;
#define PK4_STEP(G, L)                                                                                \
    do {                                                                                              \
        int8x16_t xr = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), L));             \
        int16x8_t pl = vmull_s8(vget_low_s8(w[G]), vget_low_s8(xr)), ph = vmull_high_s8(w[G], xr);     \
        s = vpadalq_s16(s, vpaddq_s16(pl, ph));                                                       \
    } while (0)
    PK4_STEP(0, 0);
    PK4_STEP(1, 1);
    PK4_STEP(2, 2);
    PK4_STEP(3, 3);
#undef PK4_STEP
    return s;
#endif
}

N_INLINE int32x4_t pk_dot(const int8x16_t w[8], int8x16_t x0, int8x16_t x1, int32x4_t init)
{
    return pk_dot4(w + 4, x1, pk_dot4(w, x0, init));
}

/* Quad qd (rows 4qd..4qd+3) of block blk: 4 float scales, 8 weight
 * vectors (q4_0: nibbles 0..15, the -8 comes from the block's sum of x;
 * MXFP4, IQ4_NL: the signed levels by table lookup). */
N_INLINE float32x4_t pk_unpack(const uint8_t *blk, int qd, const int type, int8x16_t w[8])
{
    if (type == RKM_TYPE_MXFP4) {
        const int8x16_t kv = vld1q_s8(rkm_kvalues_mxfp4);
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            uint8x16_t v = vld1q_u8(blk + 16 + 64 * h + 16 * qd);
            w[h] = vqtbl1q_s8(kv, vandq_u8(v, vdupq_n_u8(15)));
            w[h + 4] = vqtbl1q_s8(kv, vshrq_n_u8(v, 4));
        }
        /* 2^(e-128): (e - 1) << 23, subnormal below e = 2 */
        uint32_t e4;
        memcpy(&e4, blk + 4 * qd, 4);
        const uint32x4_t e = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(e4))));
        const uint32x4_t nrm = vshlq_n_u32(vsubq_u32(e, vdupq_n_u32(1)), 23);
        const uint32x4_t sub = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(e));
        return vreinterpretq_f32_u32(vbslq_u32(vcltq_u32(e, vdupq_n_u32(2)), sub, nrm));
    }
    if (type == RKM_TYPE_IQ4_NL) {
        const int8x16_t kv = vld1q_s8(rkm_kvalues_iq4nl);
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            uint8x16_t v = vld1q_u8(blk + 32 + 64 * h + 16 * qd);
            w[h] = vqtbl1q_s8(kv, vandq_u8(v, vdupq_n_u8(15)));
            w[h + 4] = vqtbl1q_s8(kv, vshrq_n_u8(v, 4));
        }
    } else if (type == RKM_TYPE_Q4_0) {
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            uint8x16_t v = vld1q_u8(blk + 32 + 64 * h + 16 * qd);
            w[h] = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(15)));
            w[h + 4] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        }
    } else {
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) w[g] = vld1q_s8((const int8_t *)blk + 32 + 64 * g + 16 * qd);
    }
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(blk + 8 * qd))));
}

/* RX activation rows x the 16 rows of the group at row r. */
N_INLINE void pk_compute(const rkm_mm_args *a, int64_t r, int64_t i, const int RX, const int type)
{
    const int64_t nb = a->n_in / 32;
    const size_t bb = rkm_pk_block(type);
    const int q4 = type == RKM_TYPE_Q4_0;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    float32x4_t acc[4][4];
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xs[4];
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
#pragma GCC unroll 4
        for (int qd = 0; qd < 4; qd++) acc[qd][c] = vdupq_n_f32(0.0f);
        xq[c] = a->xq + (i + c) * nb * 32;
        xd[c] = a->xd + (i + c) * nb;
        xs[c] = a->xs + (i + c) * nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * bb;
        if (RX == 1)
            for (int o = 0; o < (int)bb; o += 64) __builtin_prefetch(blk + PF_BYTES + o);
#pragma GCC unroll 4
        for (int qd = 0; qd < 4; qd++) {
            int8x16_t w[8];
            float32x4_t dw = pk_unpack(blk, qd, type, w);
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) {
                const int8_t *xb = xq[c] + b * 32;
                int32x4_t s = pk_dot(w, vld1q_s8(xb), vld1q_s8(xb + 16), vdupq_n_s32(q4 ? -8 * xs[c][b] : 0));
                acc[qd][c] = vfmaq_f32(acc[qd][c], vcvtq_f32_s32(s), vmulq_n_f32(dw, xd[c][b]));
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int qd = 0; qd < 4; qd++) vst1q_f32(a->y + (i + c) * a->ldy + r + 4 * qd, acc[qd][c]);
}

#if RKM_NEON_DOTPROD
/* Quad qd of a packed group into il_compute's scratch layout. */
static void pk_to_il(const uint8_t *grp, int qd, int64_t nb, char *buf, const int type)
{
    const size_t bb = rkm_pk_block(type);
    for (int64_t b = 0; b < nb; b++) {
        int8x16_t w[8];
        vst1q_f32((float *)(buf + b * IL_BLOCK_BYTES), pk_unpack(grp + (size_t)b * bb, qd, type, w));
        for (int g = 0; g < 8; g++) vst1q_s8((int8_t *)(buf + b * IL_BLOCK_BYTES + 16 + 16 * g), w[g]);
    }
}
#endif

N_INLINE void pk_mm(const rkm_mm_args *a, int64_t r0, int64_t r1, const int type)
{
#if RKM_NEON_DOTPROD
    if (a->m >= IL_MIN_M) {
        const int64_t nb = a->n_in / 32;
        char *buf = rkm_kernel_scratch((size_t)nb * IL_BLOCK_BYTES);
        for (int64_t r = r0; r + RKM_PACK_ROWS <= r1; r += RKM_PACK_ROWS)
            for (int qd = 0; qd < 4; qd++) {
                pk_to_il((const uint8_t *)a->w + (size_t)r * a->w_row_bytes, qd, nb, buf, type);
                int64_t i = 0;
                for (; i + 4 <= a->m; i += 4) il_compute(a, buf, r + 4 * qd, i, 4, type == RKM_TYPE_Q4_0, 0);
                for (; i < a->m; i++) il_compute(a, buf, r + 4 * qd, i, 1, type == RKM_TYPE_Q4_0, 0);
            }
        return;
    }
#endif
    for (int64_t r = r0; r + RKM_PACK_ROWS <= r1; r += RKM_PACK_ROWS) {
        int64_t i = 0;
        for (; i + 2 <= a->m; i += 2) pk_compute(a, r, i, 2, type);
        for (; i < a->m; i++) pk_compute(a, r, i, 1, type);
    }
}

static void N_FN(mm_q8_0_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk_mm(a, r0, r1, RKM_TYPE_Q8_0); }
static void N_FN(mm_q4_0_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk_mm(a, r0, r1, RKM_TYPE_Q4_0); }
static void N_FN(mm_mxfp4_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk_mm(a, r0, r1, RKM_TYPE_MXFP4); }
static void N_FN(mm_iq4_nl_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk_mm(a, r0, r1, RKM_TYPE_IQ4_NL); }

/* The row loop of every packed 256-value kernel here: 16 weight rows by
 * up to 2 activation rows at a time; FN(a, type, r, i, RX). */
#define PKN_DRIVE(FN, a, type, r0, r1)                                         \
    do {                                                                       \
        for (int64_t r_ = (r0); r_ + RKM_PACK_ROWS <= (r1); r_ += RKM_PACK_ROWS) { \
            int64_t i_ = 0;                                                    \
            for (; i_ + 2 <= (a)->m; i_ += 2) FN(a, type, r_, i_, 2);          \
            for (; i_ < (a)->m; i_++) FN(a, type, r_, i_, 1);                  \
        }                                                                      \
    } while (0)

/* Packed Q4_K and Q5_K (kernels.h): a quad of 4 rows per q register, as
 * above; per 32-value sub-block the 8 words of low (or high) nibbles
 * (Q5_K: with the fifth bit, bit 2c + k of the qh word for sub-block
 * 2c + k, put in as bit 4 by vsli) against the activations by pk_dot
 * (0..31 as signed bytes), times the sub-block's 6-bit scale; the mins
 * times the activations' sums of 32; the reference's two fused
 * multiply-adds per row and super-block. */
N_INLINE void pkk_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX)
{
    const int q5 = type == RKM_TYPE_Q5_K;
    const int blkb = (int)rkm_pk_block(type), qs_at = q5 ? 256 + 8 * 64 : 256;
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    float32x4_t acc[4][2];
#pragma GCC unroll 4
    for (int qd = 0; qd < 4; qd++)
#pragma GCC unroll 2
        for (int c = 0; c < RX; c++) acc[qd][c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * blkb;
        if (RX == 1)
            for (int o = 0; o < blkb; o += 64) __builtin_prefetch(blk + PF_BYTES + o);
#pragma GCC unroll 1
        for (int qd = 0; qd < 4; qd++) {
            uint32x4_t S[12];
#pragma GCC unroll 12
            for (int k = 0; k < 12; k++) {
                uint32_t v4;
                memcpy(&v4, blk + 64 + 16 * k + 4 * qd, 4);
                S[k] = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v4))));
            }
            int32x4_t sc[8], mn[8];
#pragma GCC unroll 4
            for (int s = 0; s < 4; s++) {
                sc[s] = vreinterpretq_s32_u32(vandq_u32(S[s], vdupq_n_u32(63)));
                mn[s] = vreinterpretq_s32_u32(vandq_u32(S[s + 4], vdupq_n_u32(63)));
                sc[s + 4] = vreinterpretq_s32_u32(
                    vorrq_u32(vandq_u32(S[s + 8], vdupq_n_u32(15)), vshlq_n_u32(vshrq_n_u32(S[s], 6), 4)));
                mn[s + 4] = vreinterpretq_s32_u32(vorrq_u32(vshrq_n_u32(S[s + 8], 4), vshlq_n_u32(vshrq_n_u32(S[s + 4], 6), 4)));
            }
            const float32x4_t d4 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(blk + 8 * qd))));
            const float32x4_t dm4 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(blk + 32 + 8 * qd))));
            int32x4_t isum[2], msum[2];
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++) {
                const int32_t *xs = a->xs + (i + c) * ng16 + 16 * b;
                int32x4_t ms = vdupq_n_s32(0);
#pragma GCC unroll 8
                for (int s = 0; s < 8; s++) ms = vmlaq_n_s32(ms, mn[s], xs[2 * s] + xs[2 * s + 1]);
                msum[c] = ms;
                isum[c] = vdupq_n_s32(0);
            }
#pragma GCC unroll 1
            for (int j = 0; j < 4; j++) {
                int8x16_t lo[8], hi[8];
#pragma GCC unroll 8
                for (int hh = 0; hh < 8; hh++) {
                    uint8x16_t v = vld1q_u8(blk + qs_at + 64 * (8 * j + hh) + 16 * qd);
                    uint8x16_t l = vandq_u8(v, vdupq_n_u8(15)), u = vshrq_n_u8(v, 4);
                    if (q5) {
                        /* bits 2j and 2j + 1 of the qh word to bits 0 and 1 */
                        const uint8x16_t h = vshlq_u8(vld1q_u8(blk + 256 + 64 * hh + 16 * qd), vdupq_n_s8((int8_t)(-2 * j)));
                        l = vsliq_n_u8(l, vandq_u8(h, vdupq_n_u8(1)), 4);
                        u = vsliq_n_u8(u, vshrq_n_u8(vshlq_n_u8(h, 6), 7), 4);
                    }
                    lo[hh] = vreinterpretq_s8_u8(l);
                    hi[hh] = vreinterpretq_s8_u8(u);
                }
#pragma GCC unroll 2
                for (int c = 0; c < RX; c++) {
                    const int8_t *xb = a->xq + (i + c) * a->n_in + 256 * b + 64 * j;
                    int32x4_t dlo = pk_dot(lo, vld1q_s8(xb), vld1q_s8(xb + 16), vdupq_n_s32(0));
                    int32x4_t dhi = pk_dot(hi, vld1q_s8(xb + 32), vld1q_s8(xb + 48), vdupq_n_s32(0));
                    isum[c] = vmlaq_s32(vmlaq_s32(isum[c], dlo, sc[2 * j]), dhi, sc[2 * j + 1]);
                }
            }
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++) {
                const float dx = a->xd[(i + c) * nb + b];
                acc[qd][c] = vfmaq_f32(acc[qd][c], vmulq_n_f32(d4, dx), vcvtq_f32_s32(isum[c]));
                acc[qd][c] = vfmaq_f32(acc[qd][c], vnegq_f32(vmulq_n_f32(dm4, dx)), vcvtq_f32_s32(msum[c]));
            }
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int qd = 0; qd < 4; qd++) vst1q_f32(a->y + (i + c) * a->ldy + r + 4 * qd, acc[qd][c]);
}

static void N_FN(mm_q4_k_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKN_DRIVE(pkk_compute, a, RKM_TYPE_Q4_K, r0, r1); }
static void N_FN(mm_q5_k_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKN_DRIVE(pkk_compute, a, RKM_TYPE_Q5_K, r0, r1); }

/* Packed Q6_K (kernels.h): a quad of 4 rows per q register. For l =
 * 4t..4t+3 of half n, ql parts A (bytes l), B (bytes 32 + l) and qh part H
 * give the levels q + 32 of the four quarters by shift-and-insert, with
 * H03 = H & 0x33 and H0C = (H >> 2) & 0x33 (fields 0, 2 and 1, 3 at bits
 * 0-1 and 4-5):
 *   values l:      sli(A, H03, 4)   (H03 << 4 | A & 15)
 *   values 32 + l: sli(B, H0C, 4)
 *   values 64 + l: sri(H03, A, 4)   (A >> 4 | H03 & 0xf0)
 *   values 96 + l: sri(H0C, B, 4)
 * A sub-block of 16 values is 4 words by lane against 16 activation bytes,
 * into an accumulator that starts at -32 x their sum (so it ends at the
 * exact dot of (q - 32) x), times the rows' int8 scales; the reference's
 * fused multiply-add per row and super-block. */
N_INLINE void pk6_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX)
{
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const uint8x16_t m33 = vdupq_n_u8(0x33);
    float32x4_t acc[4][2];
#pragma GCC unroll 4
    for (int qd = 0; qd < 4; qd++)
#pragma GCC unroll 2
        for (int c = 0; c < RX; c++) acc[qd][c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * RKM_PK_Q6_K_BLOCK, *parts = blk + 288;
        if (RX == 1)
            for (int o = 0; o < RKM_PK_Q6_K_BLOCK; o += 64) __builtin_prefetch(blk + PF_BYTES + o);
#pragma GCC unroll 1
        for (int qd = 0; qd < 4; qd++) {
            int32x4_t isum[2];
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++) isum[c] = vdupq_n_s32(0);
#pragma GCC unroll 1
            for (int hq = 0; hq < 4; hq++) { /* half n = hq / 2; l in 16q..16q+15, q = hq % 2 */
                const int n = hq >> 1, q = hq & 1;
                int8x16_t v[4][4]; /* [quarter][word] */
#pragma GCC unroll 4
                for (int tt = 0; tt < 4; tt++) {
                    const int t = 4 * q + tt;
                    const uint8x16_t A = vld1q_u8(parts + 64 * (16 * n + t) + 16 * qd);
                    const uint8x16_t B = vld1q_u8(parts + 64 * (16 * n + 8 + t) + 16 * qd);
                    const uint8x16_t H = vld1q_u8(parts + 64 * (32 + 8 * n + t) + 16 * qd);
                    const uint8x16_t h03 = vandq_u8(H, m33), h0c = vandq_u8(vshrq_n_u8(H, 2), m33);
                    v[0][tt] = vreinterpretq_s8_u8(vsliq_n_u8(A, h03, 4));
                    v[1][tt] = vreinterpretq_s8_u8(vsliq_n_u8(B, h0c, 4));
                    v[2][tt] = vreinterpretq_s8_u8(vsriq_n_u8(h03, A, 4));
                    v[3][tt] = vreinterpretq_s8_u8(vsriq_n_u8(h0c, B, 4));
                }
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++) {
                    const int sb = 8 * n + 2 * u + q;
                    uint32_t v4;
                    memcpy(&v4, blk + 32 + 16 * sb + 4 * qd, 4);
                    const int32x4_t sc = vmovl_s16(vget_low_s16(vmovl_s8(vcreate_s8(v4))));
#pragma GCC unroll 2
                    for (int c = 0; c < RX; c++) {
                        const int8x16_t xv = vld1q_s8(a->xq + (i + c) * a->n_in + 256 * b + 128 * n + 32 * u + 16 * q);
                        const int32x4_t dot = pk_dot4(v[u], xv, vdupq_n_s32(-32 * a->xs[(i + c) * ng16 + 16 * b + sb]));
                        isum[c] = vmlaq_s32(isum[c], dot, sc);
                    }
                }
            }
            const float32x4_t d4 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(blk + 8 * qd))));
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++)
                acc[qd][c] = vfmaq_f32(acc[qd][c], vmulq_n_f32(d4, a->xd[(i + c) * nb + b]), vcvtq_f32_s32(isum[c]));
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int qd = 0; qd < 4; qd++) vst1q_f32(a->y + (i + c) * a->ldy + r + 4 * qd, acc[qd][c]);
}

static void N_FN(mm_q6_k_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKN_DRIVE(pk6_compute, a, RKM_TYPE_Q6_K, r0, r1); }

/* Packed IQ4_XS (kernels.h): a quad of 4 rows per q register. A sub-block
 * of 32 values is 4 parts: the signed levels of their low nibbles (values
 * l) and high ones (16 + l) by table lookup, 4 words by lane against 16
 * activation bytes each (pk_dot4), the exact dot; times the rows' 6-bit
 * scales (scales_l nibble | scales_h pair << 4, minus 32); the
 * reference's fused multiply-add per row and super-block. */
N_INLINE void pkx_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX)
{
    const int64_t nb = a->n_in / 256;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const int8x16_t kv = vld1q_s8(rkm_kvalues_iq4nl);
    float32x4_t acc[4][2];
#pragma GCC unroll 4
    for (int qd = 0; qd < 4; qd++)
#pragma GCC unroll 2
        for (int c = 0; c < RX; c++) acc[qd][c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * RKM_PK_IQ4_XS_BLOCK;
        if (RX == 1)
            for (int o = 0; o < RKM_PK_IQ4_XS_BLOCK; o += 64) __builtin_prefetch(blk + PF_BYTES + o);
#pragma GCC unroll 1
        for (int qd = 0; qd < 4; qd++) {
            const uint32x4_t sh = vmovl_u16(vld1_u16((const uint16_t *)(blk + 32 + 8 * qd)));
            int32x4_t isum[2];
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++) isum[c] = vdupq_n_s32(0);
#pragma GCC unroll 1
            for (int ib = 0; ib < 8; ib++) {
                uint32_t v4;
                memcpy(&v4, blk + 64 + 16 * (ib >> 1) + 4 * qd, 4);
                const uint32x4_t sl = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v4))));
                const uint32x4_t lo4 = vandq_u32(vshlq_u32(sl, vdupq_n_s32(-4 * (ib & 1))), vdupq_n_u32(15));
                const uint32x4_t hi2 = vandq_u32(vshlq_u32(sh, vdupq_n_s32(-2 * ib)), vdupq_n_u32(3));
                const int32x4_t sc = vsubq_s32(vreinterpretq_s32_u32(vorrq_u32(lo4, vshlq_n_u32(hi2, 4))), vdupq_n_s32(32));
                int8x16_t lo[4], hi[4];
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    const uint8x16_t v = vld1q_u8(blk + 128 + 64 * (4 * ib + t) + 16 * qd);
                    lo[t] = vqtbl1q_s8(kv, vandq_u8(v, vdupq_n_u8(15)));
                    hi[t] = vqtbl1q_s8(kv, vshrq_n_u8(v, 4));
                }
#pragma GCC unroll 2
                for (int c = 0; c < RX; c++) {
                    const int8_t *xb = a->xq + (i + c) * a->n_in + 256 * b + 32 * ib;
                    const int32x4_t dot = pk_dot4(hi, vld1q_s8(xb + 16), pk_dot4(lo, vld1q_s8(xb), vdupq_n_s32(0)));
                    isum[c] = vmlaq_s32(isum[c], dot, sc);
                }
            }
            const float32x4_t d4 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(blk + 8 * qd))));
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++)
                acc[qd][c] = vfmaq_f32(acc[qd][c], vmulq_n_f32(d4, a->xd[(i + c) * nb + b]), vcvtq_f32_s32(isum[c]));
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int qd = 0; qd < 4; qd++) vst1q_f32(a->y + (i + c) * a->ldy + r + 4 * qd, acc[qd][c]);
}

static void N_FN(mm_iq4_xs_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKN_DRIVE(pkx_compute, a, RKM_TYPE_IQ4_XS, r0, r1); }

/* Packed Q3_K and Q2_K (kernels.h): a quad of 4 rows per q register. The
 * levels of sub-block s = 8n + 2j + g are the 2-bit fields at bits 2j of
 * `qs` parts 8n + 4g + t (Q3_K: after its 8 `hmask` parts) with, for
 * Q3_K, bit 4n + j of `hmask` part 4g + t inserted as bit 2 (0..7, the
 * value + 4); 4 words by lane against 16 activation bytes (pk_dot4) into
 * an accumulator that starts at -4 x their sum (Q3_K; Q2_K's mins times
 * the sums go apart); times the rows' scales; the reference's fused
 * multiply-add(s) per row and super-block. */
N_INLINE void pk23_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX)
{
    const int q3 = type == RKM_TYPE_Q3_K;
    const int blkb = (int)rkm_pk_block(type), parts_at = q3 ? 224 : 320;
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    float32x4_t acc[4][2];
#pragma GCC unroll 4
    for (int qd = 0; qd < 4; qd++)
#pragma GCC unroll 2
        for (int c = 0; c < RX; c++) acc[qd][c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * blkb, *parts = blk + parts_at;
        if (RX == 1)
            for (int o = 0; o < blkb; o += 64) __builtin_prefetch(blk + PF_BYTES + o);
#pragma GCC unroll 1
        for (int qd = 0; qd < 4; qd++) {
            int32x4_t sc[16], isum[2], msum[2];
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++) isum[c] = msum[c] = vdupq_n_s32(0);
#pragma GCC unroll 16
            for (int s = 0; s < 16; s++) {
                uint32_t v4;
                memcpy(&v4, blk + (q3 ? 32 + 16 * (s & 7) : 64 + 16 * s) + 4 * qd, 4);
                const uint32x4_t v = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v4))));
                if (q3) {
                    memcpy(&v4, blk + 32 + 16 * (8 + (s & 3)) + 4 * qd, 4);
                    const uint32x4_t hi = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v4))));
                    const uint32x4_t l4 = vandq_u32(s < 8 ? v : vshrq_n_u32(v, 4), vdupq_n_u32(15));
                    const uint32x4_t h2 = vandq_u32(vshlq_u32(hi, vdupq_n_s32(-2 * (s >> 2))), vdupq_n_u32(3));
                    sc[s] = vsubq_s32(vreinterpretq_s32_u32(vorrq_u32(l4, vshlq_n_u32(h2, 4))), vdupq_n_s32(32));
                } else {
                    sc[s] = vreinterpretq_s32_u32(vandq_u32(v, vdupq_n_u32(15)));
                    const int32x4_t mn = vreinterpretq_s32_u32(vshrq_n_u32(v, 4));
#pragma GCC unroll 2
                    for (int c = 0; c < RX; c++) msum[c] = vmlaq_n_s32(msum[c], mn, a->xs[(i + c) * ng16 + 16 * b + s]);
                }
            }
#pragma GCC unroll 1
            for (int ng = 0; ng < 4; ng++) { /* n = ng / 2, g = ng % 2 */
                const int n = ng >> 1, g = ng & 1;
                int8x16_t v[4][4]; /* [quarter j][part t] */
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    const uint8x16_t P = vld1q_u8(parts + 64 * ((q3 ? 8 : 0) + 8 * n + 4 * g + t) + 16 * qd);
                    uint8x16_t H = vdupq_n_u8(0);
                    if (q3) H = vshlq_u8(vld1q_u8(parts + 64 * (4 * g + t) + 16 * qd), vdupq_n_s8((int8_t)(-4 * n)));
#pragma GCC unroll 4
                    for (int j = 0; j < 4; j++) {
                        uint8x16_t lvl = vandq_u8(vshlq_u8(P, vdupq_n_s8((int8_t)(-2 * j))), vdupq_n_u8(3));
                        if (q3) lvl = vorrq_u8(lvl, vandq_u8(vshlq_u8(H, vdupq_n_s8((int8_t)(2 - j))), vdupq_n_u8(4)));
                        v[j][t] = vreinterpretq_s8_u8(lvl);
                    }
                }
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const int s = 8 * n + 2 * j + g;
#pragma GCC unroll 2
                    for (int c = 0; c < RX; c++) {
                        const int8x16_t xv = vld1q_s8(a->xq + (i + c) * a->n_in + 256 * b + 128 * n + 32 * j + 16 * g);
                        const int32x4_t dot = pk_dot4(v[j], xv, vdupq_n_s32(q3 ? -4 * a->xs[(i + c) * ng16 + 16 * b + s] : 0));
                        isum[c] = vmlaq_s32(isum[c], dot, sc[s]);
                    }
                }
            }
            const float32x4_t d4 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(blk + 8 * qd))));
#pragma GCC unroll 2
            for (int c = 0; c < RX; c++) {
                const float dx = a->xd[(i + c) * nb + b];
                acc[qd][c] = vfmaq_f32(acc[qd][c], vmulq_n_f32(d4, dx), vcvtq_f32_s32(isum[c]));
                if (!q3) {
                    const float32x4_t dm4 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(blk + 32 + 8 * qd))));
                    acc[qd][c] = vfmaq_f32(acc[qd][c], vnegq_f32(vmulq_n_f32(dm4, dx)), vcvtq_f32_s32(msum[c]));
                }
            }
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int qd = 0; qd < 4; qd++) vst1q_f32(a->y + (i + c) * a->ldy + r + 4 * qd, acc[qd][c]);
}

static void N_FN(mm_q3_k_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKN_DRIVE(pk23_compute, a, RKM_TYPE_Q3_K, r0, r1); }
static void N_FN(mm_q2_k_p_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKN_DRIVE(pk23_compute, a, RKM_TYPE_Q2_K, r0, r1); }

/* ---------------------------------------------------------- f32 / f16 */
/* float weights: kind 0 f32, 1 f16, 2 bf16 */
N_INLINE float32x4_t n_load_w4(const void *w, int64_t k, const int kind)
{
    if (kind == 1) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)w + k)));
    if (kind == 2) return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)w + k), 16));
    return vld1q_f32((const float *)w + k);
}

N_INLINE float n_load_w1(const void *w, int64_t k, const int kind)
{
    if (kind == 1) return rkm_f16_to_f32(((const rkm_f16 *)w)[k]);
    if (kind == 2) return rkm_bf16_to_f32(((const rkm_bf16 *)w)[k]);
    return ((const float *)w)[k];
}

N_INLINE void n_fp_tile(const rkm_mm_args *a, int64_t r, int64_t i, const int RW, const int RX, const int kind)
{
    const int64_t n = a->n_in, n4 = n & ~(int64_t)3;
    const void *w[4];
    const float *x[4];
    float32x4_t acc[4][4];
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++) w[rr] = (const char *)a->w + (r + rr) * a->w_row_bytes;
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) x[c] = a->x + (i + c) * n;
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[rr][c] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < n4; k += 4) {
        float32x4_t wv[4];
#pragma GCC unroll 4
        for (int rr = 0; rr < RW; rr++) wv[rr] = n_load_w4(w[rr], k, kind);
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            float32x4_t xv = vld1q_f32(x[c] + k);
#pragma GCC unroll 4
            for (int rr = 0; rr < RW; rr++) acc[rr][c] = vfmaq_f32(acc[rr][c], wv[rr], xv);
        }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            float s = vaddvq_f32(acc[rr][c]);
            for (int64_t k = n4; k < n; k++) s += n_load_w1(w[rr], k, kind) * x[c][k];
            a->y[(i + c) * a->ldy + r + rr] = s;
        }
}

#define N_DEFINE_MM(NAME, TILE, ARG)                                                \
    static void NAME(const rkm_mm_args *a, int64_t r0, int64_t r1)                  \
    {                                                                               \
        int64_t r = r0;                                                             \
        if (a->m == 1) {                                                            \
            for (; r + 4 <= r1; r += 4) TILE(a, r, 0, 4, 1, ARG);                   \
            for (; r < r1; r++) TILE(a, r, 0, 1, 1, ARG);                           \
            return;                                                                 \
        }                                                                           \
        for (; r + 4 <= r1; r += 4) {                                               \
            int64_t i = 0;                                                          \
            for (; i + 4 <= a->m; i += 4) TILE(a, r, i, 4, 4, ARG);                 \
            for (; i < a->m; i++) TILE(a, r, i, 4, 1, ARG);                         \
        }                                                                           \
        for (; r < r1; r++) {                                                       \
            int64_t i = 0;                                                          \
            for (; i + 4 <= a->m; i += 4) TILE(a, r, i, 1, 4, ARG);                 \
            for (; i < a->m; i++) TILE(a, r, i, 1, 1, ARG);                         \
        }                                                                           \
    }

#if RKM_NEON_DOTPROD
N_DEFINE_MM(mm_q8_0_tiles, n_tile, 0)
N_DEFINE_MM(mm_q4_0_tiles, n_tile, 1)
static void N_FN(mm_q8_0_)(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    if (a->m >= IL_MIN_M) il_mm(a, r0, r1, 0);
    else mm_q8_0_tiles(a, r0, r1);
}
static void N_FN(mm_q4_0_)(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    if (a->m >= IL_MIN_M) il_mm(a, r0, r1, 1);
    else mm_q4_0_tiles(a, r0, r1);
}
#else
N_DEFINE_MM(N_FN(mm_q8_0_), n_tile, 0)
N_DEFINE_MM(N_FN(mm_q4_0_), n_tile, 1)
#endif
N_DEFINE_MM(N_FN(mm_f32_), n_fp_tile, 0)
N_DEFINE_MM(N_FN(mm_f16_), n_fp_tile, 1)
N_DEFINE_MM(N_FN(mm_bf16_), n_fp_tile, 2)

/* --------------------------------------------------------- element ops */
N_INLINE float32x4_t n_exp(float32x4_t x)
{
    const float32x4_t hi = vdupq_n_f32(88.7228394f), lo = vdupq_n_f32(-104.0f);
    float32x4_t xc = vminq_f32(vmaxq_f32(x, lo), hi);
    float32x4_t n = vrndnq_f32(vmulq_n_f32(xc, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(xc, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    int32x4_t ni = vcvtq_s32_f32(n);
    int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
    float32x4_t f1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
    float32x4_t f2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
    float32x4_t res = vmulq_f32(vmulq_f32(p, f1), f2);
    res = vbslq_f32(vcgtq_f32(x, hi), vdupq_n_f32(INFINITY), res);
    res = vbslq_f32(vcltq_f32(x, lo), vdupq_n_f32(0.0f), res);
    return vbslq_f32(vceqq_f32(x, x), res, x); /* NaN in, NaN out */
}

static void N_FN(rmsnorm_)(float *out, const float *x, const float *w, int64_t n, float eps)
{
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
        s0 = vfmaq_f32(s0, a, a);
        s1 = vfmaq_f32(s1, b, b);
    }
    float sum = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) sum += x[i] * x[i];
    float scale = 1.0f / sqrtf(sum / (float)n + eps);
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t v = vmulq_n_f32(vld1q_f32(x + i), scale);
        if (w) v = vmulq_f32(v, vld1q_f32(w + i));
        vst1q_f32(out + i, v);
    }
    for (; i < n; i++) out[i] = w ? x[i] * scale * w[i] : x[i] * scale;
}

static void N_FN(softmax_)(float *x, int64_t n)
{
    if (n <= 0) return;
    float mx = x[0];
    int64_t i = 0;
    float32x4_t mv = vdupq_n_f32(-INFINITY);
    for (; i + 4 <= n; i += 4) mv = vmaxq_f32(mv, vld1q_f32(x + i));
    if (n >= 4) mx = vmaxvq_f32(mv);
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float32x4_t sum = vdupq_n_f32(0.0f), m4 = vdupq_n_f32(mx);
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t e = n_exp(vsubq_f32(vld1q_f32(x + i), m4));
        sum = vaddq_f32(sum, e);
        vst1q_f32(x + i, e);
    }
    float s = vaddvq_f32(sum);
    if (i < n) {
        float t[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (int64_t k = i; k < n; k++) t[k - i] = x[k] - mx;
        float32x4_t e = n_exp(vld1q_f32(t));
        float o[4];
        vst1q_f32(o, e);
        for (int64_t k = i; k < n; k++) {
            x[k] = o[k - i];
            s += o[k - i];
        }
    }
    float inv = 1.0f / s;
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; i++) x[i] *= inv;
}

N_INLINE float32x4_t n_silu(float32x4_t g)
{
    return vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), n_exp(vnegq_f32(g))));
}

N_INLINE float32x4_t n_gelu(float32x4_t x)
{
    const float32x4_t one = vdupq_n_f32(1.0f);
    float32x4_t z = vmulq_f32(vmulq_n_f32(x, 0.79788456080286535587989211986876f),
                              vfmaq_f32(one, vmulq_n_f32(x, 0.044715f), x));
    float32x4_t e = n_exp(vaddq_f32(z, z));
    float32x4_t t = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
    return vmulq_f32(vmulq_n_f32(x, 0.5f), vaddq_f32(one, t));
}

#define N_GLU(NAME, ACT)                                                            \
    static void NAME(float *out, const float *g, const float *u, int64_t n)         \
    {                                                                               \
        int64_t i = 0;                                                              \
        for (; i + 4 <= n; i += 4)                                                  \
            vst1q_f32(out + i, vmulq_f32(ACT(vld1q_f32(g + i)), vld1q_f32(u + i))); \
        if (i < n) {                                                                \
            float tg[4] = {0}, tu[4] = {0}, o[4];                                   \
            for (int64_t k = i; k < n; k++) {                                       \
                tg[k - i] = g[k];                                                   \
                tu[k - i] = u[k];                                                   \
            }                                                                       \
            vst1q_f32(o, vmulq_f32(ACT(vld1q_f32(tg)), vld1q_f32(tu)));             \
            for (int64_t k = i; k < n; k++) out[k] = o[k - i];                      \
        }                                                                           \
    }

N_GLU(N_FN(swiglu_), n_silu)
N_GLU(N_FN(geglu_), n_gelu)

static void N_FN(gelu_)(float *out, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, n_gelu(vld1q_f32(x + i)));
    if (i < n) {
        float t[4] = {0}, o[4];
        for (int64_t k = i; k < n; k++) t[k - i] = x[k];
        vst1q_f32(o, n_gelu(vld1q_f32(t)));
        for (int64_t k = i; k < n; k++) out[k] = o[k - i];
    }
}

static void N_FN(f32_to_f16_)(const float *x, rkm_f16 *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = rkm_f32_to_f16(x[i]);
}

static void N_FN(f16_to_f32_)(const rkm_f16 *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    for (; i < n; i++) y[i] = rkm_f16_to_f32(x[i]);
}

static float N_FN(dot_f32_f16_)(const float *x, const rkm_f16 *y, int64_t n)
{
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(x + i), vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(y + i))));
        s1 = vfmaq_f32(s1, vld1q_f32(x + i + 4), vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(y + i + 4))));
    }
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) s += x[i] * rkm_f16_to_f32(y[i]);
    return s;
}

static void N_FN(axpy_f16_)(float *y, float a, const rkm_f16 *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))), a));
    for (; i < n; i++) y[i] += a * rkm_f16_to_f32(x[i]);
}

/* Row-batched forms: each row exactly as the single-row functions above. */
static void N_FN(dot_f32_f16_rows_)(const float *x, const rkm_f16 *y, int64_t stride, int64_t rows, int64_t n,
                                    float *out)
{
    int64_t r = 0;
    /* four rows at a time: eight independent FMA chains instead of two,
     * each row's sums in exactly the single-row order */
    for (; r + 4 <= rows; r += 4) {
        const rkm_f16 *y0 = y + r * stride;
        float32x4_t s0[4], s1[4];
        for (int j = 0; j < 4; j++) s0[j] = s1[j] = vdupq_n_f32(0.0f);
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            float32x4_t xa = vld1q_f32(x + i), xb = vld1q_f32(x + i + 4);
            for (int j = 0; j < 4; j++) {
                const rkm_f16 *yr = y0 + j * stride + i;
                s0[j] = vfmaq_f32(s0[j], xa, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(yr))));
                s1[j] = vfmaq_f32(s1[j], xb, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(yr + 4))));
            }
        }
        for (int j = 0; j < 4; j++) {
            float sj = vaddvq_f32(vaddq_f32(s0[j], s1[j]));
            for (int64_t t = i; t < n; t++) sj += x[t] * rkm_f16_to_f32(y0[j * stride + t]);
            out[r + j] = sj;
        }
    }
    for (; r < rows; r++) out[r] = N_FN(dot_f32_f16_)(x, y + r * stride, n);
}

static void N_FN(axpy_f16_rows_)(float *y, const float *a, const rkm_f16 *x, int64_t stride, int64_t rows,
                                 int64_t n)
{
    int64_t i = 0;
    /* 32 columns (8 accumulators) at a time, y in registers across rows */
    for (; i + 32 <= n; i += 32) {
        float32x4_t acc[8];
        for (int j = 0; j < 8; j++) acc[j] = vld1q_f32(y + i + 4 * j);
        for (int64_t r = 0; r < rows; r++) {
            const rkm_f16 *xr = x + r * stride + i;
            for (int j = 0; j < 8; j++)
                acc[j] = vfmaq_n_f32(acc[j], vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(xr + 4 * j))), a[r]);
        }
        for (int j = 0; j < 8; j++) vst1q_f32(y + i + 4 * j, acc[j]);
    }
    for (; i + 4 <= n; i += 4) {
        float32x4_t acc = vld1q_f32(y + i);
        for (int64_t r = 0; r < rows; r++)
            acc = vfmaq_n_f32(acc, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + r * stride + i))), a[r]);
        vst1q_f32(y + i, acc);
    }
    for (; i < n; i++)
        for (int64_t r = 0; r < rows; r++) y[i] += a[r] * rkm_f16_to_f32(x[r * stride + i]);
}
