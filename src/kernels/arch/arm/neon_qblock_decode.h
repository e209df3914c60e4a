/*
 * neon_qblock_decode.h - one weight block of the K-quants and IQ4_XS
 * (super-blocks of 256) decoded into NEON registers, for the matmuls of
 * neon_qblock.h: the integer form of kernels_impl.h (rkm_qblock), with
 * the bit layouts of qblock.c.
 *
 * A block is read as two halves of 128 values, each 8 int8x16 vectors in
 * value order (vector j: values 128h + 16j .. +15), so that a half is one
 * run of 8 activation vectors. Q3_K and Q6_K are left unsigned (u = q + 4,
 * q + 32): the matmul takes the offset off once per block through the
 * activations' sums of 16 instead of once per vector. The scales come as
 * int32 vectors (lane j of s[k]: sub-block 4k + j), the mins (and the
 * offset types' scales) as int16 for the widening multiply with the sums.
 *
 * Included by neon_qblock.h only (after neon_impl.h); header-only, every
 * function inlined into its caller so the type is a constant there.
 * Stateless.
 */
#include <string.h>

#include "kernels/quant_tables.h"

/* ----------------------------------------------------------- the types */
N_INLINE int kq_block_bytes(const int type)
{
    switch (type) {
    case RKM_TYPE_Q2_K: return 84;
    case RKM_TYPE_Q3_K: return 110;
    case RKM_TYPE_Q4_K: return 144;
    case RKM_TYPE_Q5_K: return 176;
    case RKM_TYPE_Q6_K: return 210;
    default: return 136; /* IQ4_XS */
    }
}

/* values per sub-block (one scale each) */
N_INLINE int kq_sub(const int type)
{
    return type == RKM_TYPE_Q2_K || type == RKM_TYPE_Q3_K || type == RKM_TYPE_Q6_K ? 16 : 32;
}

N_INLINE int kq_has_min(const int type)
{
    return type == RKM_TYPE_Q2_K || type == RKM_TYPE_Q4_K || type == RKM_TYPE_Q5_K;
}

/* u - q of kq_half's values */
N_INLINE int kq_offset(const int type) { return type == RKM_TYPE_Q3_K ? 4 : type == RKM_TYPE_Q6_K ? 32 : 0; }

/* |u| <= 31: four products with activations (|x| <= 127) fit an int16
 * lane (plain NEON's widening multiply-accumulate) */
N_INLINE int kq_small(const int type) { return type != RKM_TYPE_IQ4_XS; }

/* byte offset of the f16 d (dmin follows it in the types with mins) */
N_INLINE int kq_d_offset(const int type)
{
    switch (type) {
    case RKM_TYPE_Q2_K: return 80;
    case RKM_TYPE_Q3_K: return 108;
    case RKM_TYPE_Q6_K: return 208;
    default: return 0;
    }
}

/* ------------------------------------------------------------- scales */
typedef struct {
    int32x4_t s[4];   /* lane j of s[k]: scale of sub-block 4k + j (s[0..1] for sub-blocks of 32) */
    int16x8_t m16[2]; /* mins (kq_has_min), or the scales (kq_offset), in sub-block order */
} kq_scales;

N_INLINE void kq_widen_scales(int16x8_t lo, int16x8_t hi, const int n, kq_scales *o)
{
    o->s[0] = vmovl_s16(vget_low_s16(lo));
    o->s[1] = vmovl_high_s16(lo);
    if (n == 16) {
        o->s[2] = vmovl_s16(vget_low_s16(hi));
        o->s[3] = vmovl_high_s16(hi);
    }
}

N_INLINE void kq_load_scales(const uint8_t *b, const int type, kq_scales *o)
{
    switch (type) {
    case RKM_TYPE_Q2_K: { /* 16 bytes: scale in the low nibble, min in the high */
        const uint8x16_t v = vld1q_u8(b);
        const uint8x16_t sc = vandq_u8(v, vdupq_n_u8(15)), mn = vshrq_n_u8(v, 4);
        kq_widen_scales(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(sc))),
                        vreinterpretq_s16_u16(vmovl_high_u8(sc)), 16, o);
        o->m16[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn)));
        o->m16[1] = vreinterpretq_s16_u16(vmovl_high_u8(mn));
        break;
    }
    case RKM_TYPE_Q3_K: { /* 6-bit scales - 32: low nibbles in 8 bytes, 2-bit highs in 4 */
        const uint8x8_t lo8 = vld1_u8(b + 96);
        uint32_t hw;
        memcpy(&hw, b + 104, 4); /* not a 16-byte load: the block ends 2 bytes later */
        const int32x4_t sh = {0, -2, -4, -6};
        /* byte 4k + j: bits 2k..2k+1 of byte j (sub-block 4k + j) */
        uint8x16_t hi = vreinterpretq_u8_u32(vandq_u32(vshlq_u32(vdupq_n_u32(hw), sh), vdupq_n_u32(0x03030303u)));
        uint8x16_t lo = vcombine_u8(vand_u8(lo8, vdup_n_u8(15)), vshr_n_u8(lo8, 4));
        int8x16_t sc = vsubq_s8(vreinterpretq_s8_u8(vsliq_n_u8(lo, hi, 4)), vdupq_n_s8(32));
        o->m16[0] = vmovl_s8(vget_low_s8(sc));
        o->m16[1] = vmovl_high_s8(sc);
        kq_widen_scales(o->m16[0], o->m16[1], 16, o);
        break;
    }
    case RKM_TYPE_Q4_K:
    case RKM_TYPE_Q5_K: { /* 12 bytes: 8 6-bit scales and 8 6-bit mins */
        uint32_t w[3];
        memcpy(w, b + 4, 12);
        const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x30303030u;
        const uint32_t sc_hi = (w[2] & m4) | ((w[0] >> 2) & m2), mn_hi = ((w[2] >> 4) & m4) | ((w[1] >> 2) & m2);
        const uint8x8_t sc = vcreate_u8((w[0] & m6) | (uint64_t)sc_hi << 32);
        const uint8x8_t mn = vcreate_u8((w[1] & m6) | (uint64_t)mn_hi << 32);
        kq_widen_scales(vreinterpretq_s16_u16(vmovl_u8(sc)), vdupq_n_s16(0), 8, o);
        o->m16[0] = vreinterpretq_s16_u16(vmovl_u8(mn));
        break;
    }
    case RKM_TYPE_Q6_K: { /* 16 int8 scales */
        const int8x16_t sc = vld1q_s8((const int8_t *)b + 192);
        o->m16[0] = vmovl_s8(vget_low_s8(sc));
        o->m16[1] = vmovl_high_s8(sc);
        kq_widen_scales(o->m16[0], o->m16[1], 16, o);
        break;
    }
    default: { /* IQ4_XS: 8 6-bit scales - 32, 2-bit highs in a u16, low nibbles in 4 bytes */
        uint32_t lw;
        memcpy(&lw, b + 4, 4);
        const uint16_t hw = (uint16_t)(b[2] | b[3] << 8);
        const int16x8_t sh = {0, -2, -4, -6, -8, -10, -12, -14};
        const uint8x8_t l = vcreate_u8(lw);
        const uint16x8_t lo = vmovl_u8(vzip1_u8(vand_u8(l, vdup_n_u8(15)), vshr_n_u8(l, 4)));
        const uint16x8_t hi = vandq_u16(vshlq_u16(vdupq_n_u16(hw), sh), vdupq_n_u16(3));
        kq_widen_scales(vsubq_s16(vreinterpretq_s16_u16(vsliq_n_u16(lo, hi, 4)), vdupq_n_s16(32)), vdupq_n_s16(0), 8, o);
        break;
    }
    }
}

/* -------------------------------------------------------------- values */
/* Half h of block b: q[j] = values 128h + 16j .. +15 (u for Q3_K/Q6_K).
 * kv: the IQ4 levels (IQ4_XS only). */
N_INLINE void kq_half(const uint8_t *b, const int h, const int type, int8x16_t kv, int8x16_t q[8])
{
    const uint8x16_t m1 = vdupq_n_u8(1), m3 = vdupq_n_u8(3), m15 = vdupq_n_u8(15);
    uint8x16_t u[8];
    switch (type) {
    case RKM_TYPE_Q2_K: { /* 2-bit fields j of 32 bytes: values 32j + 16g + l */
        const uint8x16_t v0 = vld1q_u8(b + 16 + 32 * h), v1 = vld1q_u8(b + 32 + 32 * h);
        u[0] = vandq_u8(v0, m3);
        u[1] = vandq_u8(v1, m3);
        u[2] = vandq_u8(vshrq_n_u8(v0, 2), m3);
        u[3] = vandq_u8(vshrq_n_u8(v1, 2), m3);
        u[4] = vandq_u8(vshrq_n_u8(v0, 4), m3);
        u[5] = vandq_u8(vshrq_n_u8(v1, 4), m3);
        u[6] = vshrq_n_u8(v0, 6);
        u[7] = vshrq_n_u8(v1, 6);
        break;
    }
    case RKM_TYPE_Q3_K: { /* as Q2_K, plus bit 4h + j of the high mask as bit 2 */
        const uint8x16_t v0 = vld1q_u8(b + 32 + 32 * h), v1 = vld1q_u8(b + 48 + 32 * h);
        uint8x16_t h0 = vld1q_u8(b), h1 = vld1q_u8(b + 16);
        if (h) {
            h0 = vshrq_n_u8(h0, 4);
            h1 = vshrq_n_u8(h1, 4);
        }
        u[0] = vsliq_n_u8(v0, vandq_u8(h0, m1), 2);
        u[1] = vsliq_n_u8(v1, vandq_u8(h1, m1), 2);
        u[2] = vsliq_n_u8(vshrq_n_u8(v0, 2), vandq_u8(vshrq_n_u8(h0, 1), m1), 2);
        u[3] = vsliq_n_u8(vshrq_n_u8(v1, 2), vandq_u8(vshrq_n_u8(h1, 1), m1), 2);
        u[4] = vsliq_n_u8(vshrq_n_u8(v0, 4), vandq_u8(vshrq_n_u8(h0, 2), m1), 2);
        u[5] = vsliq_n_u8(vshrq_n_u8(v1, 4), vandq_u8(vshrq_n_u8(h1, 2), m1), 2);
        u[6] = vsliq_n_u8(vshrq_n_u8(v0, 6), vandq_u8(vshrq_n_u8(h0, 3), m1), 2);
        u[7] = vsliq_n_u8(vshrq_n_u8(v1, 6), vandq_u8(vshrq_n_u8(h1, 3), m1), 2);
        break;
    }
    case RKM_TYPE_Q4_K:
    case RKM_TYPE_Q5_K: { /* chunk c = 2h + k of 32 bytes: low nibbles, then high nibbles */
        const int q5 = type == RKM_TYPE_Q5_K;
        const uint8_t *ql = b + (q5 ? 48 : 16) + 64 * h;
        uint8x16_t h0 = vdupq_n_u8(0), h1 = h0;
        if (q5) { /* bits 2c, 2c + 1 of the 32 high bytes */
            h0 = vld1q_u8(b + 16);
            h1 = vld1q_u8(b + 32);
            if (h) {
                h0 = vshrq_n_u8(h0, 4);
                h1 = vshrq_n_u8(h1, 4);
            }
        }
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++) {
            const uint8x16_t v0 = vld1q_u8(ql + 32 * k), v1 = vld1q_u8(ql + 32 * k + 16);
            if (q5) {
                const uint8x16_t g0 = k ? vshrq_n_u8(h0, 2) : h0, g1 = k ? vshrq_n_u8(h1, 2) : h1;
                u[4 * k] = vsliq_n_u8(v0, vandq_u8(g0, m1), 4);
                u[4 * k + 1] = vsliq_n_u8(v1, vandq_u8(g1, m1), 4);
                u[4 * k + 2] = vsriq_n_u8(vshlq_n_u8(vandq_u8(g0, vdupq_n_u8(2)), 3), v0, 4);
                u[4 * k + 3] = vsriq_n_u8(vshlq_n_u8(vandq_u8(g1, vdupq_n_u8(2)), 3), v1, 4);
            } else {
                u[4 * k] = vandq_u8(v0, m15);
                u[4 * k + 1] = vandq_u8(v1, m15);
                u[4 * k + 2] = vshrq_n_u8(v0, 4);
                u[4 * k + 3] = vshrq_n_u8(v1, 4);
            }
        }
        break;
    }
    case RKM_TYPE_Q6_K: { /* low nibbles of 64 bytes, then high nibbles; 2-bit highs from 32 bytes */
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const uint8x16_t a0 = vld1q_u8(ql), a1 = vld1q_u8(ql + 16), c0 = vld1q_u8(ql + 32), c1 = vld1q_u8(ql + 48);
        const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16), m48 = vdupq_n_u8(0x30);
        u[0] = vsliq_n_u8(a0, vandq_u8(h0, m3), 4);
        u[1] = vsliq_n_u8(a1, vandq_u8(h1, m3), 4);
        u[2] = vsliq_n_u8(c0, vandq_u8(vshrq_n_u8(h0, 2), m3), 4);
        u[3] = vsliq_n_u8(c1, vandq_u8(vshrq_n_u8(h1, 2), m3), 4);
        u[4] = vsriq_n_u8(vandq_u8(h0, m48), a0, 4);
        u[5] = vsriq_n_u8(vandq_u8(h1, m48), a1, 4);
        u[6] = vsriq_n_u8(vandq_u8(vshrq_n_u8(h0, 2), m48), c0, 4);
        u[7] = vsriq_n_u8(vandq_u8(vshrq_n_u8(h1, 2), m48), c1, 4);
        break;
    }
    default: { /* IQ4_XS: sub-block 4h + k of 16 bytes, low nibbles then high, through the levels */
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const uint8x16_t v = vld1q_u8(b + 8 + 64 * h + 16 * k);
            q[2 * k] = vqtbl1q_s8(kv, vandq_u8(v, m15));
            q[2 * k + 1] = vqtbl1q_s8(kv, vshrq_n_u8(v, 4));
        }
        return;
    }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) q[j] = vreinterpretq_s8_u8(u[j]);
}

/* ---------------------------------------------------------- row scales */
/* d (and dmin) of 4 blocks as float lanes */
N_INLINE void kq_load_d(const uint8_t *const p[4], const int type, float32x4_t *d, float32x4_t *dmin)
{
    const int o = kq_d_offset(type);
    if (kq_has_min(type)) { /* d and dmin adjacent: one 32-bit lane a block */
        uint32x4_t v = vdupq_n_u32(0);
        v = vld1q_lane_u32((const uint32_t *)(const void *)(p[0] + o), v, 0);
        v = vld1q_lane_u32((const uint32_t *)(const void *)(p[1] + o), v, 1);
        v = vld1q_lane_u32((const uint32_t *)(const void *)(p[2] + o), v, 2);
        v = vld1q_lane_u32((const uint32_t *)(const void *)(p[3] + o), v, 3);
        *d = vcvt_f32_f16(vreinterpret_f16_u16(vmovn_u32(v)));
        *dmin = vcvt_f32_f16(vreinterpret_f16_u16(vshrn_n_u32(v, 16)));
    } else {
        *d = n_f16x4((const rkm_f16 *)(const void *)(p[0] + o), (const rkm_f16 *)(const void *)(p[1] + o),
                     (const rkm_f16 *)(const void *)(p[2] + o), (const rkm_f16 *)(const void *)(p[3] + o));
        *dmin = vdupq_n_f32(0.0f);
    }
}

/* The activations' sums for the mins and offsets, as int16 (|sum| <= 32 *
 * 127): per sub-block of 32 (pairs of the sums of 16), or the 16 sums. */
N_INLINE void kq_bsums(const int32_t *xs, const int sub, int16x8_t bs[2])
{
    const int32x4_t s0 = vld1q_s32(xs), s1 = vld1q_s32(xs + 4), s2 = vld1q_s32(xs + 8), s3 = vld1q_s32(xs + 12);
    if (sub == 32) {
        bs[0] = vcombine_s16(vmovn_s32(vpaddq_s32(s0, s1)), vmovn_s32(vpaddq_s32(s2, s3)));
        bs[1] = vdupq_n_s16(0);
    } else {
        bs[0] = vcombine_s16(vmovn_s32(s0), vmovn_s32(s1));
        bs[1] = vcombine_s16(vmovn_s32(s2), vmovn_s32(s3));
    }
}

/* int32 lanes summing to sum_s m16[s] * bs[s] (n = 8 or 16 sub-blocks) */
N_INLINE int32x4_t kq_dot_sums(const int16x8_t m16[2], const int16x8_t bs[2], const int n)
{
    int32x4_t s = vmull_s16(vget_low_s16(m16[0]), vget_low_s16(bs[0]));
    s = vmlal_high_s16(s, m16[0], bs[0]);
    if (n == 16) {
        s = vmlal_s16(s, vget_low_s16(m16[1]), vget_low_s16(bs[1]));
        s = vmlal_high_s16(s, m16[1], bs[1]);
    }
    return s;
}
