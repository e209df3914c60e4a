/*
 * neon_qblock_decode.h - one weight block decoded into NEON registers, for
 * the matmuls of neon_qblock.h: the integer form of kernels_impl.h
 * (rkm_qblock), with the bit layouts of qblock.c. Two families:
 *
 * Super-blocks of 256 (Q2_K..Q6_K, IQ4_XS, against q8_K activations):
 * A block is read as two halves of 128 values, each 8 int8x16 vectors in
 * value order (vector j: values 128h + 16j .. +15), so that a half is one
 * run of 8 activation vectors. Q3_K and Q6_K are left unsigned (u = q + 4,
 * q + 32): the matmul takes the offset off once per block through the
 * activations' sums of 16 instead of once per vector. The scales come as
 * int32 vectors (lane j of s[k]: sub-block 4k + j), the mins (and the
 * offset types' scales) as int16 for the widening multiply with the sums.
 *
 * Blocks of 32 (IQ4_NL, MXFP4, Q4_1, Q5_0, Q5_1, against q8_0
 * activations): the 32 values as two vectors, d (and dmin = -m for Q4_1
 * and Q5_1, whose single min multiplies the activations' sum of 32).
 *
 * Included by neon_qblock.h only (after neon_impl.h); header-only, every
 * function inlined into its caller so the type is a constant there.
 * Stateless.
 */
#include <string.h>

#include "kernels/quant_tables.h"

/* d (at p[l] + off) and the f16 after it, of 4 blocks, as float lanes */
N_INLINE void n_f16_pair4(const uint8_t *const p[4], const int off, float32x4_t *d0, float32x4_t *d1)
{
    uint32x4_t v = vdupq_n_u32(0);
    v = vld1q_lane_u32((const uint32_t *)(const void *)(p[0] + off), v, 0);
    v = vld1q_lane_u32((const uint32_t *)(const void *)(p[1] + off), v, 1);
    v = vld1q_lane_u32((const uint32_t *)(const void *)(p[2] + off), v, 2);
    v = vld1q_lane_u32((const uint32_t *)(const void *)(p[3] + off), v, 3);
    *d0 = vcvt_f32_f16(vreinterpret_f16_u16(vmovn_u32(v)));
    *d1 = vcvt_f32_f16(vreinterpret_f16_u16(vshrn_n_u32(v, 16)));
}

N_INLINE float32x4_t n_f16_at4(const uint8_t *const p[4], const int off)
{
    return n_f16x4((const rkm_f16 *)(const void *)(p[0] + off), (const rkm_f16 *)(const void *)(p[1] + off),
                   (const rkm_f16 *)(const void *)(p[2] + off), (const rkm_f16 *)(const void *)(p[3] + off));
}

/* ---------------------------------------------------------- the types */
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
        const int16x8_t sc = vsubq_s16(vreinterpretq_s16_u16(vsliq_n_u16(lo, hi, 4)), vdupq_n_s16(32));
        kq_widen_scales(sc, vdupq_n_s16(0), 8, o);
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
    if (kq_has_min(type)) n_f16_pair4(p, o, d, dmin); /* d and dmin adjacent: one 32-bit lane a block */
    else {
        *d = n_f16_at4(p, o);
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

/* ------------------------------------------------------ blocks of 32 */
N_INLINE int b32_bytes(const int type)
{
    switch (type) {
    case RKM_TYPE_MXFP4: return 17; /* e8m0, 16 nibble pairs */
    case RKM_TYPE_Q4_1: return 20;  /* d, m, 16 nibble pairs */
    case RKM_TYPE_Q5_0: return 22;  /* d, 32 fifth bits, 16 nibble pairs */
    case RKM_TYPE_Q5_1: return 24;  /* d, m, 32 fifth bits, 16 nibble pairs */
    default: return 18;             /* IQ4_NL: d, 16 nibble pairs */
    }
}

N_INLINE int b32_has_min(const int type) { return type == RKM_TYPE_Q4_1 || type == RKM_TYPE_Q5_1; }

/* the levels of IQ4_NL, MXFP4 (the others take none) */
N_INLINE int8x16_t b32_levels(const int type)
{
    return vld1q_s8(type == RKM_TYPE_MXFP4 ? rkm_kvalues_mxfp4 : rkm_kvalues_iq4nl);
}

/* MXFP4's scales of 4 blocks (first byte e: 2^(e-128), rkm_e8m0_half) */
N_INLINE float32x4_t n_e8m0x4(const uint8_t *const p[4])
{
    const uint32x4_t e = {p[0][0], p[1][0], p[2][0], p[3][0]};
    const uint32x4_t normal = vshlq_n_u32(vsubq_u32(e, vdupq_n_u32(1)), 23);
    const uint32x4_t sub = vshlq_u32(vdupq_n_u32(0x00200000u), vreinterpretq_s32_u32(e)); /* e < 2 */
    return vreinterpretq_f32_u32(vbslq_u32(vcltq_u32(e, vdupq_n_u32(2)), sub, normal));
}

/* d (and dmin = -m) of 4 blocks as float lanes */
N_INLINE void b32_load_d(const uint8_t *const p[4], const int type, float32x4_t *d, float32x4_t *dmin)
{
    *dmin = vdupq_n_f32(0.0f);
    if (type == RKM_TYPE_MXFP4) *d = n_e8m0x4(p);
    else if (b32_has_min(type)) {
        n_f16_pair4(p, 0, d, dmin);
        *dmin = vnegq_f32(*dmin);
    } else *d = n_f16_at4(p, 0);
}

/* value k's fifth bit (bit k of the 32 bits at p) as 16 in byte k of h[k / 16] */
N_INLINE void b32_fifth_bits(const uint8_t *p, uint8x16_t h[2])
{
    uint32_t qh;
    memcpy(&qh, p, 4);
    const uint8x16_t v = vreinterpretq_u8_u32(vdupq_n_u32(qh));
    const uint8x16_t i0 = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    const uint8x16_t i1 = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    const uint8x16_t bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    h[0] = vandq_u8(vtstq_u8(vqtbl1q_u8(v, i0), bit), vdupq_n_u8(16));
    h[1] = vandq_u8(vtstq_u8(vqtbl1q_u8(v, i1), bit), vdupq_n_u8(16));
}

/* the 32 values of block b: w[0] values 0..15 (low nibbles), w[1] 16..31 */
N_INLINE void b32_values(const uint8_t *b, const int type, int8x16_t kv, int8x16_t w[2])
{
    const int q5 = type == RKM_TYPE_Q5_0 || type == RKM_TYPE_Q5_1;
    const int qoff = b32_bytes(type) - 16; /* the nibbles end the block */
    const uint8x16_t v = vld1q_u8(b + qoff);
    uint8x16_t lo = vandq_u8(v, vdupq_n_u8(15)), hi = vshrq_n_u8(v, 4);
    if (type == RKM_TYPE_IQ4_NL || type == RKM_TYPE_MXFP4) {
        w[0] = vqtbl1q_s8(kv, lo);
        w[1] = vqtbl1q_s8(kv, hi);
        return;
    }
    if (q5) {
        uint8x16_t h[2];
        b32_fifth_bits(b + qoff - 4, h);
        lo = vorrq_u8(lo, h[0]);
        hi = vorrq_u8(hi, h[1]);
    }
    w[0] = vreinterpretq_s8_u8(lo);
    w[1] = vreinterpretq_s8_u8(hi);
    if (type == RKM_TYPE_Q5_0) { /* stored q + 16 */
        w[0] = vsubq_s8(w[0], vdupq_n_s8(16));
        w[1] = vsubq_s8(w[1], vdupq_n_s8(16));
    }
}
