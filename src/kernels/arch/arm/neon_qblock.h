/*
 * neon_qblock.h - the NEON matmuls of the block types in integer form
 * (kernels_impl.h): Q2_K..Q6_K, IQ4_XS and the IQ1-IQ3 grid types against
 * q8_K activations, IQ4_NL, MXFP4, Q4_1, Q5_0 and Q5_1 against q8_0 ones.
 * Included after neon_impl.h by kernels_neon.c and kernels_dotprod.c, so
 * it is compiled twice like it.
 *
 * The contract is bit-identity with the reference: per block the exact
 * integer isum (and msum), then acc = fma(d dx, isum, acc) (and
 * acc = fma(-(dmin dx), msum, acc)), block after block. So the integer
 * sums are formed in int32 lanes (sdot, or smull/smlal into 16 bits and
 * a widening pairwise add: two products of |w| <= 127 and |x| <= 128, or
 * four of |w| <= 31, fit a 16-bit lane), reduced exactly, and the float
 * step is done on 4 independent (weight row, activation row) pairs at
 * once, one pair a lane: a lane-wise fma is the reference's fmaf.
 *
 * Direct tiles (qb_tile): RW weight rows x RX activation rows, RW * RX <=
 * 4, lane L = rr * RX + c; per block kq_block or b32_block forms the
 * integer sums and qb_block_fma the float step. A weight block is decoded
 * once into registers (neon_qblock_decode.h) and multiplied by the RX
 * activation rows. Decode
 * (m = 1) runs 4 x 1 tiles, prefetching each row PF_BYTES ahead; prefill
 * runs 1 x 4 tiles (each block decoded once per 4 activation rows), and
 * in the dot-product build, for m >= IL_MIN_M, 4-row tiles repacked once
 * into interleaved rows (lane r = weight row r, the layout of neon_impl.h's
 * il_compute) that serve every activation row: sdot by element puts each
 * row's sub-block sum straight into its lane, and the sub-block scales of
 * 4 rows are one vector.
 *
 * Stateless apart from rkm_kernel_scratch; safe from any thread.
 */
#include "kernels/arch/arm/neon_qblock_decode.h"

/* ------------------------------------------------------- integer dots */
/* int32 lanes summing to the dot product of 16 int8 pairs */
N_INLINE int32x4_t n_dot16(int8x16_t w, int8x16_t x)
{
#if RKM_NEON_DOTPROD
    return vdotq_s32(vdupq_n_s32(0), w, x);
#else
    return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x));
#endif
}

/* n_dot32 for |w| <= 31: plain NEON sums four products in a 16-bit lane */
N_INLINE int32x4_t n_dot32_small(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1)
{
#if RKM_NEON_DOTPROD
    return n_dot32(w0, w1, x0, x1);
#else
    int16x8_t p = vmull_s8(vget_low_s8(w0), vget_low_s8(x0));
    p = vmlal_high_s8(p, w0, x0);
    p = vmlal_s8(p, vget_low_s8(w1), vget_low_s8(x1));
    return vpaddlq_s16(vmlal_high_s8(p, w1, x1));
#endif
}

/* lane j: the sum of the lanes of tj */
N_INLINE int32x4_t n_sum4(int32x4_t t0, int32x4_t t1, int32x4_t t2, int32x4_t t3)
{
    return vpaddq_s32(vpaddq_s32(t0, t1), vpaddq_s32(t2, t3));
}

/* ip + lanes summing to sum_s sc[s] * dot(q, x) over the sub-blocks of
 * half h (q, x: its 128 values) */
N_INLINE int32x4_t kq_dot_half(const int8x16_t q[8], const int8_t *x, const int h, const int type, const kq_scales *sc,
                               int32x4_t ip)
{
    int32x4_t t[8];
    if (kq_sub(type) == 16) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) t[j] = n_dot16(q[j], vld1q_s8(x + 16 * j));
        ip = vmlaq_s32(ip, n_sum4(t[0], t[1], t[2], t[3]), sc->s[2 * h]);
        return vmlaq_s32(ip, n_sum4(t[4], t[5], t[6], t[7]), sc->s[2 * h + 1]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const int8x16_t x0 = vld1q_s8(x + 32 * k), x1 = vld1q_s8(x + 32 * k + 16);
        t[k] = kq_small(type) ? n_dot32_small(q[2 * k], q[2 * k + 1], x0, x1) : n_dot32(q[2 * k], q[2 * k + 1], x0, x1);
    }
    return vmlaq_s32(ip, n_sum4(t[0], t[1], t[2], t[3]), sc->s[h]);
}

/* ------------------------------------------------------- direct tiles */
/* A compiler barrier at each weight row of a tile: without it GCC keeps
 * the block's 16 activation vectors in registers across the 4 rows and
 * spills the rest; reading them again from L1 per row is cheaper. */
#define N_RELOAD() __asm__ volatile("" ::: "memory")

/* super-blocks of 256 (else blocks of 32) */
N_INLINE int qb_is_k(const int type)
{
    return type != RKM_TYPE_IQ4_NL && type != RKM_TYPE_MXFP4 && type != RKM_TYPE_Q4_1 && type != RKM_TYPE_Q5_0 &&
           type != RKM_TYPE_Q5_1;
}

/* weight rows (rows past RW repeat row r) and activation rows of a tile */
typedef struct {
    const uint8_t *w[4];
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xs[4];
    const float *xm[4];  /* Q4_1 / Q5_1: the min term's activation sums */
    int64_t nb;  /* blocks a row */
    size_t pfd;  /* the prefetch distance */
    int8x16_t kv; /* IQ4 / MXFP4 levels */
} qb_rows;

/* the prefetch distance: whole tiles ahead, at least PF_BYTES */
N_INLINE size_t qb_pf_distance(const rkm_mm_args *a, const int RW)
{
    const size_t tile = (size_t)RW * a->w_row_bytes;
    return tile * ((PF_BYTES + tile - 1) / tile);
}

N_INLINE void qb_rows_init(const rkm_mm_args *a, int64_t r, int64_t i, const int RW, const int RX, const int type,
                           qb_rows *t)
{
    const int k = qb_is_k(type);
    t->nb = a->n_in / (k ? 256 : 32);
    t->pfd = qb_pf_distance(a, RW);
    t->kv = k ? vld1q_s8(rkm_kvalues_iq4nl) : b32_levels(type);
#pragma GCC unroll 4
    for (int rr = 0; rr < 4; rr++) t->w[rr] = (const uint8_t *)a->w + (r + (rr < RW ? rr : 0)) * a->w_row_bytes;
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
        t->xq[c] = a->xq + (i + c) * a->n_in;
        t->xd[c] = a->xd + (i + c) * (a->n_in / (k ? 256 : 32));
        t->xs[c] = a->xs + (i + c) * (a->n_in / (k ? 16 : 32)); /* sums of 16 (q8_K) or 32 */
        t->xm[c] = !k && b32_has_min(type) ? a->xm + (i + c) * (a->n_in / 32) : NULL;
    }
}

/* lane L: the block of weight row L / RX (lanes past the tile: row 0) */
N_INLINE void qb_lane_blocks(const qb_rows *t, size_t off, const int RW, const int RX, const uint8_t *p[4])
{
#pragma GCC unroll 4
    for (int l = 0; l < 4; l++) p[l] = t->w[l < RW * RX ? l / RX : 0] + off;
}

/* lane L: the activation scale of row L % RX, block b */
N_INLINE float32x4_t qb_lane_act(const float *const v[4], int64_t b, const int RX)
{
    if (RX == 1) return vdupq_n_f32(v[0][b]);
    return (float32x4_t){v[0][b], v[1 % RX][b], v[2 % RX][b], v[3 % RX][b]};
}

N_INLINE void qb_store(const rkm_mm_args *a, float32x4_t acc, int64_t r, int64_t i, const int RW, const int RX)
{
    if (RW == 4) {
        vst1q_f32(a->y + i * a->ldy + r, acc);
        return;
    }
    float o[4];
    vst1q_f32(o, acc);
#pragma GCC unroll 4
    for (int l = 0; l < RW * RX; l++) a->y[(i + l % RX) * a->ldy + r + l / RX] = o[l];
}

N_INLINE void qb_prefetch(const uint8_t *p, const int bytes)
{
#pragma GCC unroll 4
    for (int o = 0; o < bytes; o += 64) __builtin_prefetch(p + o);
}


/* The reference's float step of block b for the tile's 4 lanes:
 * acc = fma(d dx, isum, acc), then acc = fma(-(dmin dx), msum, acc). */
N_INLINE float32x4_t qb_block_fma(const qb_rows *t, float32x4_t acc, int64_t b, const int RW, const int RX,
                                  const int type, int32x4_t isum, int32x4_t msum)
{
    const uint8_t *p[4];
    float32x4_t d, dmin;
    if (qb_is_k(type)) {
        qb_lane_blocks(t, (size_t)b * kq_block_bytes(type), RW, RX, p);
        kq_load_d(p, type, &d, &dmin);
    } else {
        qb_lane_blocks(t, (size_t)b * b32_bytes(type), RW, RX, p);
        b32_load_d(p, type, &d, &dmin);
    }
    const float32x4_t dx = qb_lane_act(t->xd, b, RX);
    acc = vfmaq_f32(acc, vmulq_f32(d, dx), vcvtq_f32_s32(isum));
    if (qb_is_k(type) && kq_has_min(type)) acc = vfmsq_f32(acc, vmulq_f32(dmin, dx), vcvtq_f32_s32(msum));
    else if (!qb_is_k(type) && b32_has_min(type)) acc = vfmsq_f32(acc, dmin, qb_lane_act(t->xm, b, RX));
    return acc;
}

/* Block b of a K-quant / IQ4_XS tile: lane L's exact isum and msum. */
N_INLINE void kq_block(const qb_rows *t, int64_t b, const int RW, const int RX, const int type, int32x4_t *isum_out,
                       int32x4_t *msum_out)
{
    const int bb = kq_block_bytes(type), ns = 256 / kq_sub(type), off = kq_offset(type), mins = kq_has_min(type);
    int32x4_t isum[4], msum[4];
#pragma GCC unroll 4
    for (int l = 0; l < 4; l++) isum[l] = msum[l] = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++) {
        const uint8_t *blk = t->w[rr] + (size_t)b * bb;
        N_RELOAD();
        if (RX == 1) qb_prefetch(blk + t->pfd, bb);
        kq_scales sc;
        kq_load_scales(blk, type, &sc);
        int32x4_t ip[4];
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) ip[c] = vdupq_n_s32(0);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            int8x16_t q[8];
            kq_half(blk, h, type, t->kv, q);
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) {
                if (RX > 1) N_RELOAD();
                ip[c] = kq_dot_half(q, t->xq[c] + 256 * b + 128 * h, h, type, &sc, ip[c]);
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            int16x8_t bs[2];
            if (mins || off) kq_bsums(t->xs[c] + 16 * b, kq_sub(type), bs);
            /* Q3_K, Q6_K: sum_s sc[s] dot(u - off, x) = ... - off sum_s sc[s] sum(x) */
            if (off) ip[c] = vmlsq_n_s32(ip[c], kq_dot_sums(sc.m16, bs, ns), off);
            if (mins) msum[rr * RX + c] = kq_dot_sums(sc.m16, bs, ns);
            isum[rr * RX + c] = ip[c];
        }
    }
    *isum_out = n_sum4(isum[0], isum[1], isum[2], isum[3]);
    *msum_out = n_sum4(msum[0], msum[1], msum[2], msum[3]);
}

/* Block b of a tile of 32-value blocks: lane L's isum, and msum = the
 * activations' sum of 32 for Q4_1 / Q5_1 (one min of weight 1). */
N_INLINE void b32_block(const qb_rows *t, int64_t b, const int RW, const int RX, const int type, int32x4_t *isum_out,
                        int32x4_t *msum_out)
{
    const int bb = b32_bytes(type);
    int8x16_t x0[4], x1[4];
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) {
        x0[c] = vld1q_s8(t->xq[c] + 32 * b);
        x1[c] = vld1q_s8(t->xq[c] + 32 * b + 16);
    }
    int32x4_t isum[4];
#pragma GCC unroll 4
    for (int l = 0; l < 4; l++) isum[l] = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int rr = 0; rr < RW; rr++) {
        const uint8_t *blk = t->w[rr] + (size_t)b * bb;
        if (RX == 1) __builtin_prefetch(blk + t->pfd);
        int8x16_t w[2];
        b32_values(blk, type, t->kv, w);
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) isum[rr * RX + c] = n_dot32(w[0], w[1], x0[c], x1[c]);
    }
    *isum_out = n_sum4(isum[0], isum[1], isum[2], isum[3]);
    *msum_out = b32_has_min(type) ? (int32x4_t){t->xs[0][b], t->xs[1 % RX][b], t->xs[2 % RX][b], t->xs[3 % RX][b]}
                                  : vdupq_n_s32(0);
}

N_INLINE void qb_tile(const rkm_mm_args *a, int64_t r, int64_t i, const int RW, const int RX, const int type)
{
    qb_rows t;
    qb_rows_init(a, r, i, RW, RX, type, &t);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < t.nb; b++) {
        int32x4_t isum, msum;
        if (qb_is_k(type)) kq_block(&t, b, RW, RX, type, &isum, &msum);
        else b32_block(&t, b, RW, RX, type, &isum, &msum);
        acc = qb_block_fma(&t, acc, b, RW, RX, type, isum, msum);
    }
    qb_store(a, acc, r, i, RW, RX);
}

/* weight row r against every activation row */
N_INLINE void qb_row(const rkm_mm_args *a, int64_t r, const int type)
{
    int64_t i = 0;
    for (; i + 4 <= a->m; i += 4) qb_tile(a, r, i, 1, 4, type);
    switch (a->m - i) {
    case 3: qb_tile(a, r, i, 1, 3, type); break;
    case 2: qb_tile(a, r, i, 1, 2, type); break;
    case 1: qb_tile(a, r, i, 1, 1, type); break;
    default: break;
    }
}

#if RKM_NEON_DOTPROD
/* ------------------------------------- prefill: interleaved rows (sdot) --
 * One 256-value block of 4 rows in the scratch: its values as 64 vectors
 * (vector v, lane r: values 4v..4v+3 of row r, offsets taken off), then
 * d and dmin of the 4 rows, and per sub-block the 4 rows' scales and mins. */
#define KIL_D 1024
#define KIL_DMIN (KIL_D + 16)
#define KIL_SC (KIL_DMIN + 16)
#define KIL_MN (KIL_SC + 16 * 16)
#define KIL_BYTES (KIL_MN + 16 * 16)

/* 4 rows of int32[4 n] -> lane r of vector j: element j of row r */
N_INLINE void kil_transpose(int32_t rows[4][16], const int n, int32_t *out)
{
    const uint8_t *p[4] = {(const uint8_t *)rows[0], (const uint8_t *)rows[1], (const uint8_t *)rows[2],
                           (const uint8_t *)rows[3]};
    for (int k = 0; k < n / 4; k++) {
        int32x4_t t[4];
        il_transpose4x4(p, 16 * (size_t)k, t);
        for (int g = 0; g < 4; g++) vst1q_s32(out + 16 * k + 4 * g, t[g]);
    }
}

N_INLINE void kil_repack(const rkm_mm_args *a, int64_t r, char *buf, const int type)
{
    const int64_t nb = a->n_in / 256;
    const int bb = kq_block_bytes(type), ns = 256 / kq_sub(type), off = kq_offset(type);
    const int8x16_t kv = vld1q_s8(rkm_kvalues_iq4nl);
    int8_t v[4][256] __attribute__((aligned(16)));
    int32_t sc[4][16], mn[4][16];
    for (int64_t b = 0; b < nb; b++) {
        char *o = buf + b * KIL_BYTES;
        const uint8_t *p[4];
        for (int rr = 0; rr < 4; rr++) p[rr] = (const uint8_t *)a->w + (r + rr) * a->w_row_bytes + b * bb;
        float32x4_t d, dmin;
        kq_load_d(p, type, &d, &dmin);
        vst1q_f32((float *)(o + KIL_D), d);
        vst1q_f32((float *)(o + KIL_DMIN), dmin);
        for (int rr = 0; rr < 4; rr++) {
            kq_scales s;
            kq_load_scales(p[rr], type, &s);
            for (int k = 0; k < ns / 4; k++) vst1q_s32(sc[rr] + 4 * k, s.s[k]);
            if (kq_has_min(type))
                for (int k = 0; k < ns / 8; k++) {
                    vst1q_s32(mn[rr] + 8 * k, vmovl_s16(vget_low_s16(s.m16[k])));
                    vst1q_s32(mn[rr] + 8 * k + 4, vmovl_high_s16(s.m16[k]));
                }
            for (int h = 0; h < 2; h++) {
                int8x16_t q[8];
                kq_half(p[rr], h, type, kv, q);
                for (int j = 0; j < 8; j++) vst1q_s8(v[rr] + 128 * h + 16 * j, vsubq_s8(q[j], vdupq_n_s8((int8_t)off)));
            }
        }
        const uint8_t *vp[4] = {(const uint8_t *)v[0], (const uint8_t *)v[1], (const uint8_t *)v[2],
                                (const uint8_t *)v[3]};
        for (int j = 0; j < 16; j++) {
            int32x4_t t[4];
            il_transpose4x4(vp, 16 * (size_t)j, t);
            for (int g = 0; g < 4; g++) vst1q_s32((int32_t *)(void *)(o + 64 * j + 16 * g), t[g]);
        }
        kil_transpose(sc, ns, (int32_t *)(void *)(o + KIL_SC));
        if (kq_has_min(type)) kil_transpose(mn, ns, (int32_t *)(void *)(o + KIL_MN));
    }
}

/* t + lane r: row r's 16 values of vectors w[0..3] times x */
N_INLINE int32x4_t kil_dot16(int32x4_t t, const int8x16_t w[4], int8x16_t x)
{
    t = vdotq_laneq_s32(t, w[0], x, 0);
    t = vdotq_laneq_s32(t, w[1], x, 1);
    t = vdotq_laneq_s32(t, w[2], x, 2);
    return vdotq_laneq_s32(t, w[3], x, 3);
}

/* ms + lane r: sum_j mins of sub-block 4k + j of row r times lane j of bs */
N_INLINE int32x4_t kil_mins4(int32x4_t ms, const int32_t *mn, int32x4_t bs)
{
    ms = vmlaq_laneq_s32(ms, vld1q_s32(mn), bs, 0);
    ms = vmlaq_laneq_s32(ms, vld1q_s32(mn + 4), bs, 1);
    ms = vmlaq_laneq_s32(ms, vld1q_s32(mn + 8), bs, 2);
    return vmlaq_laneq_s32(ms, vld1q_s32(mn + 12), bs, 3);
}

/* RX activation rows x the 4 repacked rows at row r */
N_INLINE void kil_compute(const rkm_mm_args *a, const char *buf, int64_t r, int64_t i, const int RX, const int type)
{
    const int64_t nb = a->n_in / 256;
    const int sub = kq_sub(type), ns = 256 / sub, mins = kq_has_min(type);
    qb_rows t;
    qb_rows_init(a, r, i, 4, RX, type, &t);
    float32x4_t acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) acc[c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const char *o = buf + b * KIL_BYTES;
        int32x4_t is[4], ms[4], ts[4];
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) is[c] = ms[c] = ts[c] = vdupq_n_s32(0);
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) { /* 16 values */
            int8x16_t w[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) w[k] = vld1q_s8((const int8_t *)o + 64 * g + 16 * k);
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) ts[c] = kil_dot16(ts[c], w, vld1q_s8(t.xq[c] + 256 * b + 16 * g));
            if (sub == 16 || g % 2) { /* the end of a sub-block */
                const int32x4_t scv = vld1q_s32((const int32_t *)(const void *)(o + KIL_SC) + 4 * (g * 16 / sub));
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++) {
                    is[c] = vmlaq_s32(is[c], ts[c], scv);
                    ts[c] = vdupq_n_s32(0);
                }
            }
        }
        N_RELOAD(); /* the mins after the values, not interleaved with them */
        if (mins)
#pragma GCC unroll 4
            for (int k = 0; k < ns / 4; k++)
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++) {
                    const int32_t *xs = t.xs[c] + 16 * b;
                    const int32x4_t bs = sub == 16 ? vld1q_s32(xs + 4 * k)
                                                   : vpaddq_s32(vld1q_s32(xs + 8 * k), vld1q_s32(xs + 8 * k + 4));
                    ms[c] = kil_mins4(ms[c], (const int32_t *)(const void *)(o + KIL_MN) + 16 * k, bs);
                }
        const float32x4_t d = vld1q_f32((const float *)(const void *)(o + KIL_D));
        const float32x4_t dmin = vld1q_f32((const float *)(const void *)(o + KIL_DMIN));
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) {
            acc[c] = vfmaq_f32(acc[c], vmulq_n_f32(d, t.xd[c][b]), vcvtq_f32_s32(is[c]));
            if (mins) acc[c] = vfmsq_f32(acc[c], vmulq_n_f32(dmin, t.xd[c][b]), vcvtq_f32_s32(ms[c]));
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++) vst1q_f32(a->y + (i + c) * a->ldy + r, acc[c]);
}

/* Blocks of 32 into il_compute's layout (neon_impl.h): 4 rows' d, their
 * values, and for Q4_1 / Q5_1 their dmin. */
N_INLINE void b32_il_repack(const rkm_mm_args *a, int64_t r, char *buf, const int type)
{
    const int64_t nb = a->n_in / 32;
    const int bb = b32_bytes(type), mins = b32_has_min(type);
    const size_t bs = IL_BLOCK_BYTES + (mins ? IL_MIN_BYTES : 0);
    const int8x16_t kv = b32_levels(type);
    int8_t v[4][32] __attribute__((aligned(16)));
    const uint8_t *vp[4] = {(const uint8_t *)v[0], (const uint8_t *)v[1], (const uint8_t *)v[2],
                            (const uint8_t *)v[3]};
    for (int64_t b = 0; b < nb; b++) {
        char *o = buf + b * bs;
        const uint8_t *p[4];
        for (int rr = 0; rr < 4; rr++) {
            p[rr] = (const uint8_t *)a->w + (r + rr) * a->w_row_bytes + b * bb;
            int8x16_t w[2];
            b32_values(p[rr], type, kv, w);
            vst1q_s8(v[rr], w[0]);
            vst1q_s8(v[rr] + 16, w[1]);
        }
        float32x4_t d, dmin;
        b32_load_d(p, type, &d, &dmin);
        vst1q_f32((float *)(void *)o, d);
        if (mins) vst1q_f32((float *)(void *)(o + IL_BLOCK_BYTES), dmin);
        il_store32(vp, (int8_t *)(o + 16));
    }
}

N_INLINE void qb_il_mm(const rkm_mm_args *a, int64_t r0, int64_t r1, const int type)
{
    const int k = qb_is_k(type), mins = !k && b32_has_min(type);
    const int64_t nb = a->n_in / (k ? 256 : 32);
    char *buf = rkm_kernel_scratch((size_t)nb * (k ? KIL_BYTES : IL_BLOCK_BYTES + (mins ? IL_MIN_BYTES : 0)));
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        if (k) kil_repack(a, r, buf, type);
        else b32_il_repack(a, r, buf, type);
        int64_t i = 0;
        for (; i + 4 <= a->m; i += 4) {
            if (k) kil_compute(a, buf, r, i, 4, type);
            else il_compute(a, buf, r, i, 4, 0, mins);
        }
        for (; i < a->m; i++) {
            if (k) kil_compute(a, buf, r, i, 1, type);
            else il_compute(a, buf, r, i, 1, 0, mins);
        }
    }
    for (; r < r1; r++) qb_row(a, r, type);
}
#endif

N_INLINE void qb_mm(const rkm_mm_args *a, int64_t r0, int64_t r1, const int type)
{
    if (a->m == 1) {
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) qb_tile(a, r, 0, 4, 1, type);
        for (; r < r1; r++) qb_tile(a, r, 0, 1, 1, type);
        return;
    }
#if RKM_NEON_DOTPROD
    if (a->m >= IL_MIN_M) {
        qb_il_mm(a, r0, r1, type);
        return;
    }
#endif
    for (int64_t r = r0; r < r1; r++) qb_row(a, r, type);
}

#define QB_DEFINE(name, type) \
    static void N_FN(mm_##name##_)(const rkm_mm_args *a, int64_t r0, int64_t r1) { qb_mm(a, r0, r1, type); }
QB_DEFINE(q2_k, RKM_TYPE_Q2_K)
QB_DEFINE(q3_k, RKM_TYPE_Q3_K)
QB_DEFINE(q4_k, RKM_TYPE_Q4_K)
QB_DEFINE(q5_k, RKM_TYPE_Q5_K)
QB_DEFINE(q6_k, RKM_TYPE_Q6_K)
QB_DEFINE(iq4_xs, RKM_TYPE_IQ4_XS)
QB_DEFINE(iq4_nl, RKM_TYPE_IQ4_NL)
QB_DEFINE(mxfp4, RKM_TYPE_MXFP4)
QB_DEFINE(q4_1, RKM_TYPE_Q4_1)
QB_DEFINE(q5_0, RKM_TYPE_Q5_0)
QB_DEFINE(q5_1, RKM_TYPE_Q5_1)
#undef QB_DEFINE

/* ------------------------------------------------ grid types (decoded) */
/* IQ1_S .. IQ3_S (a->type): four weight rows at a time (fewer at the end:
 * the missing lanes repeat the first row) decoded once into integer form
 * (grid_rows.c), then multiplied by every activation row; lane rr of the
 * float step is weight row rr. |q| <= 62: n_dot16's 16-bit pairs hold. */
static void N_FN(mm_grid_)(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    const int64_t n = a->n_in, nb = n / 256;
    char *buf = rkm_kernel_scratch((size_t)4 * ((size_t)n + (size_t)nb * (16 * sizeof(int16_t) + sizeof(float))));
    int8_t *q = (int8_t *)buf;
    int16_t *sc = (int16_t *)(void *)(buf + 4 * (size_t)n);
    float *dd = (float *)(void *)(sc + 4 * 16 * nb);
    for (int64_t r = r0; r < r1; r += 4) {
        const int rw = r1 - r < 4 ? (int)(r1 - r) : 4;
        for (int rr = 0; rr < 4; rr++) {
            const uint8_t *w = (const uint8_t *)a->w + (size_t)(r + (rr < rw ? rr : 0)) * a->w_row_bytes;
            rkm_grid_decode_row(a->type, w, nb, q + rr * n, sc + rr * 16 * nb, dd + rr * nb);
        }
        for (int64_t i = 0; i < a->m; i++) {
            const int8_t *xq = a->xq + i * n;
            const float *xd = a->xd + i * nb;
            float32x4_t acc = vdupq_n_f32(0.0f);
            for (int64_t b = 0; b < nb; b++) {
                int32x4_t is[4];
#pragma GCC unroll 4
                for (int rr = 0; rr < 4; rr++) {
                    const int8_t *qb = q + rr * n + 256 * b;
                    const int16_t *sb = sc + (rr * nb + b) * 16;
                    int32x4_t t = vdupq_n_s32(0);
#pragma GCC unroll 4
                    for (int g = 0; g < 16; g++)
                        t = vmlaq_n_s32(t, n_dot16(vld1q_s8(qb + 16 * g), vld1q_s8(xq + 256 * b + 16 * g)), sb[g]);
                    is[rr] = t;
                }
                const float dv[4] = {dd[b], dd[nb + b], dd[2 * nb + b], dd[3 * nb + b]};
                acc = vfmaq_f32(acc, vmulq_n_f32(vld1q_f32(dv), xd[b]), vcvtq_f32_s32(n_sum4(is[0], is[1], is[2], is[3])));
            }
            float out[4];
            vst1q_f32(out, acc);
            memcpy(a->y + i * a->ldy + r, out, (size_t)rw * sizeof(float));
        }
    }
}
