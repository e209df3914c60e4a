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
 * Decode (m = 1) takes four weight rows per step, one from each quarter
 * of its range (four streams); prefill decodes a weight super-block once
 * and multiplies it by four activation rows.
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

/* Decode: weight rows row[0..3] times activation row 0. The four rows are
 * far apart in the caller's range, so they are four sequential streams
 * (each prefetched ahead), which DRAM serves faster than one. */
KQ_INLINE void zq_rows4(const rkm_mm_args *a, const int type, const int64_t row[4])
{
    const size_t bb = rkm_type_block_bytes(type), rb = a->w_row_bytes;
    const int64_t nb = a->n_in / 256;
    const uint8_t *w[4];
    for (int rr = 0; rr < 4; rr++) w[rr] = (const uint8_t *)a->w + (size_t)row[rr] * rb;
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256i bs16 = zq_bs16(type, a->xs + 16 * b);
        __m256i is[4], ms[4];
        float d[4], dm[4];
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; rr++) {
            const uint8_t *blk = w[rr] + (size_t)b * bb;
            prefetch_block(blk + KQ_PF_BYTES, bb);
            zq z;
            zq_decode(type, blk, &z);
            zq_dot(type, &z, a->xq + 256 * b, bs16, &is[rr], &ms[rr]);
            d[rr] = z.d;
            dm[rr] = z.dmin;
        }
        const __m128 dx = _mm_set1_ps(a->xd[b]);
        const __m128 dd = _mm_setr_ps(d[0], d[1], d[2], d[3]);
        acc = _mm_fmadd_ps(_mm_mul_ps(dd, dx), _mm_cvtepi32_ps(hsum4(is[0], is[1], is[2], is[3])), acc);
        if (kq_has_min(type)) {
            const __m128 dmn = _mm_xor_ps(_mm_mul_ps(_mm_setr_ps(dm[0], dm[1], dm[2], dm[3]), dx), _mm_set1_ps(-0.0f));
            acc = _mm_fmadd_ps(dmn, _mm_cvtepi32_ps(hsum4(ms[0], ms[1], ms[2], ms[3])), acc);
        }
    }
    float out[4];
    _mm_storeu_ps(out, acc);
    for (int rr = 0; rr < 4; rr++) a->y[row[rr]] = out[rr];
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

/* ------------------------------------ prefill: 16-row tiles, lanes = rows
 * For m >= ZT_MIN_M a group of 16 weight rows is decoded once into a tile
 * whose zmm lanes are the 16 rows: column k of a super-block holds values
 * 4k..4k+3 of every row (unsigned u, IQ4_XS + 128), so vpdpbusd against
 * four broadcast activation bytes gives each row's partial dot in its own
 * lane and no horizontal sums are needed. Per sub-block (32 values, or 16
 * for Q2_K, Q3_K, Q6_K) the dot is multiplied by the rows' scales
 * (vpmulld); the offsets (Q3_K 4, Q6_K 32, IQ4_XS 128: isum -= off *
 * sum_s sc[s] xs[s]) and the mins (msum = sum_s mn[s] xs[s]) are
 * vpdpwssd of the rows' (scale, scale) or (min, min) int16 pairs by the
 * activations' sub-block sums. The integers are the reference's exactly,
 * and the float step is its fma per lane, so the results are too. Four
 * activation rows share each weight load. */
#define ZT_MIN_M 8

/* 1 for the super-block types' tiles (K-quants, IQ4_XS), 0 for the
 * 32-value types' (below) */
KQ_INLINE int zt_superblocks(const int type)
{
    return type == RKM_TYPE_Q2_K || type == RKM_TYPE_Q3_K || type == RKM_TYPE_Q4_K || type == RKM_TYPE_Q5_K ||
           type == RKM_TYPE_Q6_K || type == RKM_TYPE_IQ4_XS;
}

/* sub-blocks of a super-block: 8 of 32 values, or 16 of 16 */
KQ_INLINE int zt_nsub(const int type)
{
    return type == RKM_TYPE_Q2_K || type == RKM_TYPE_Q3_K || type == RKM_TYPE_Q6_K ? 16 : 8;
}

/* zmm of one super-block's tile: 64 columns, the scales of each
 * sub-block (int32), (scale, scale) and (min, min) pairs of sub-blocks
 * 2t, 2t+1 (int16), then d and dmin */
KQ_INLINE int zt_sc(const int type) { (void)type; return 64; }
KQ_INLINE int zt_scp(const int type) { return 64 + zt_nsub(type); }
KQ_INLINE int zt_mnp(const int type) { return 64 + zt_nsub(type) + zt_nsub(type) / 2; }
KQ_INLINE int zt_dv(const int type) { return 64 + 2 * zt_nsub(type); }
KQ_INLINE int zt_zmm(const int type) { return zt_dv(type) + 2; }

/* r[k] <- dword k of each of r[0..7] (an 8 x 8 transpose). */
KQ_INLINE void zt_tr8(__m256i *r)
{
    __m256i t[8], u[8];
    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    for (int h = 0; h < 2; h++) {
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
        r[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
}

/* Rows [r, r+16) into the tile t (nb super-blocks): each super-block's
 * 16 rows decoded into bytes (u), then turned into columns 8 x 8 dwords
 * at a time. */
KQ_INLINE void zt_pack(const rkm_mm_args *a, const int type, int64_t r, __m512i *t)
{
    const size_t bb = rkm_type_block_bytes(type);
    const int64_t nb = a->n_in / 256;
    const int ns = zt_nsub(type);
    _Alignas(64) uint8_t u[16][256];
    _Alignas(32) uint32_t sp[16][8], mp[16][8];
    for (int64_t b = 0; b < nb; b++) {
        __m512i *tb = t + b * zt_zmm(type);
        for (int rr = 0; rr < 16; rr++) {
            const uint8_t *blk = (const uint8_t *)a->w + (size_t)(r + rr) * a->w_row_bytes + (size_t)b * bb;
            kq_head h;
            kq_head_of(type, blk, &h);
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                __m256i v = kq_chunk(type, blk, c);
                if (type == RKM_TYPE_IQ4_XS) v = _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
                _mm256_store_si256((__m256i *)(u[rr] + 32 * c), v);
            }
            /* the sub-block scales (and mins) as int16 pairs, one dword
             * per pair of sub-blocks (the 32-value types' group scales
             * come twice: every other one) */
            __m256i scp = h.sc16, mnp = h.mn16;
            if (ns == 8) {
                const __m256i ev = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8,
                                                    9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
                scp = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(scp, ev), 0x08);
                mnp = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(mnp, ev), 0x08);
            }
            _mm256_store_si256((__m256i *)sp[rr], scp);
            _mm256_store_si256((__m256i *)mp[rr], mnp);
            ((float *)(tb + zt_dv(type)))[rr] = h.d;
            ((float *)(tb + zt_dv(type) + 1))[rr] = kq_has_min(type) ? h.dmin : 0.0f;
        }
        {
            __m256i lo[8], hi[8], lm[8], hm[8];
            for (int k = 0; k < 8; k++) {
                lo[k] = _mm256_load_si256((const __m256i *)sp[k]);
                hi[k] = _mm256_load_si256((const __m256i *)sp[8 + k]);
                lm[k] = _mm256_load_si256((const __m256i *)mp[k]);
                hm[k] = _mm256_load_si256((const __m256i *)mp[8 + k]);
            }
            zt_tr8(lo);
            zt_tr8(hi);
            zt_tr8(lm);
            zt_tr8(hm);
            for (int tp = 0; tp < ns / 2; tp++) {
                const __m512i pr = _mm512_inserti64x4(_mm512_castsi256_si512(lo[tp]), hi[tp], 1);
                _mm512_store_si512(tb + zt_scp(type) + tp, pr);
                _mm512_store_si512(tb + zt_mnp(type) + tp, _mm512_inserti64x4(_mm512_castsi256_si512(lm[tp]), hm[tp], 1));
                _mm512_store_si512(tb + zt_sc(type) + 2 * tp, _mm512_srai_epi32(_mm512_slli_epi32(pr, 16), 16));
                _mm512_store_si512(tb + zt_sc(type) + 2 * tp + 1, _mm512_srai_epi32(pr, 16));
            }
        }
        for (int c = 0; c < 8; c++) {
            __m256i lo[8], hi[8];
            for (int k = 0; k < 8; k++) {
                lo[k] = _mm256_load_si256((const __m256i *)(u[k] + 32 * c));
                hi[k] = _mm256_load_si256((const __m256i *)(u[8 + k] + 32 * c));
            }
            zt_tr8(lo);
            zt_tr8(hi);
            for (int j = 0; j < 8; j++) _mm512_store_si512(tb + 8 * c + j, _mm512_inserti64x4(_mm512_castsi256_si512(lo[j]), hi[j], 1));
        }
    }
}

/* The tile t (rows [r, r+16)) times activation rows [i, i+XN), XN <= 4. */
KQ_INLINE void zt_acts(const rkm_mm_args *a, const int type, const __m512i *t, int64_t r, int64_t i, const int XN)
{
    const int64_t nb = a->n_in / 256, ng = a->n_in / 16;
    const int ns = zt_nsub(type), cols = 64 / ns, gs = 16 / ns;
    __m512 acc[4];
    for (int c = 0; c < 4; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m512i *tb = t + b * zt_zmm(type);
        __m512i is[4];
        for (int c = 0; c < 4; c++) is[c] = _mm512_setzero_si512();
        for (int sb = 0; sb < ns; sb++) {
            __m512i d0[4], d1[4];
            for (int c = 0; c < 4; c++) d0[c] = d1[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = 0; k < cols; k += 2) {
                const __m512i w0 = _mm512_load_si512(tb + sb * cols + k), w1 = _mm512_load_si512(tb + sb * cols + k + 1);
#pragma GCC unroll 4
                for (int c = 0; c < XN; c++) {
                    const int8_t *x = a->xq + (i + c) * a->n_in + 256 * b + 4 * (sb * cols + k);
                    int32_t x0, x1;
                    memcpy(&x0, x, 4);
                    memcpy(&x1, x + 4, 4);
                    d0[c] = _mm512_dpbusd_epi32(d0[c], w0, _mm512_set1_epi32(x0));
                    d1[c] = _mm512_dpbusd_epi32(d1[c], w1, _mm512_set1_epi32(x1));
                }
            }
            const __m512i scv = _mm512_load_si512(tb + zt_sc(type) + sb);
#pragma GCC unroll 4
            for (int c = 0; c < XN; c++) is[c] = _mm512_add_epi32(is[c], _mm512_mullo_epi32(_mm512_add_epi32(d0[c], d1[c]), scv));
        }
#pragma GCC unroll 4
        for (int c = 0; c < XN; c++) {
            const int32_t *xs = a->xs + (i + c) * ng + 16 * b;
            const float dx = a->xd[(i + c) * nb + b];
            __m512i corr = _mm512_setzero_si512(), ms = _mm512_setzero_si512();
            if (zq_offset(type) > 0 || kq_has_min(type))
                for (int tp = 0; tp < ns / 2; tp++) {
                    /* the activations' sums of sub-blocks 2tp and 2tp+1 */
                    int32_t s0 = 0, s1 = 0;
                    for (int g = 0; g < gs; g++) s0 += xs[(2 * tp) * gs + g], s1 += xs[(2 * tp + 1) * gs + g];
                    const __m512i xp = _mm512_set1_epi32((int32_t)(((uint32_t)s0 & 0xffff) | (uint32_t)s1 << 16));
                    if (zq_offset(type) > 0) corr = _mm512_dpwssd_epi32(corr, _mm512_load_si512(tb + zt_scp(type) + tp), xp);
                    if (kq_has_min(type)) ms = _mm512_dpwssd_epi32(ms, _mm512_load_si512(tb + zt_mnp(type) + tp), xp);
                }
            __m512i isum = is[c];
            if (zq_offset(type) > 0) isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(corr, zq_offset(type)));
            const __m512 dxv = _mm512_set1_ps(dx);
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps((const float *)(tb + zt_dv(type))), dxv),
                                     _mm512_cvtepi32_ps(isum), acc[c]);
            if (kq_has_min(type)) {
                const __m512 dmn = _mm512_castsi512_ps(_mm512_xor_si512(
                    _mm512_castps_si512(_mm512_mul_ps(_mm512_load_ps((const float *)(tb + zt_dv(type) + 1)), dxv)),
                    _mm512_set1_epi32((int)0x80000000u)));
                acc[c] = _mm512_fmadd_ps(dmn, _mm512_cvtepi32_ps(ms), acc[c]);
            }
        }
    }
    for (int c = 0; c < XN; c++) _mm512_storeu_ps(a->y + (i + c) * a->ldy + r, acc[c]);
}

/* Whole 16-row groups of [r0, r1) on tiles, every type (below the
 * 32-value types' tiles); returns the first row not done. */
KQ_INLINE int64_t zt_mm(const rkm_mm_args *a, const int type, int64_t r0, int64_t r1);

/* Decode of Q4_K (m = 1) straight from the 128 nibble bytes: bytes
 * [64h, 64h + 64) hold as low nibbles the values of chunks 4h and 4h + 2
 * (32 each) and as high nibbles chunks 4h + 1 and 4h + 3, so the
 * activations are rearranged once per call to that order (q4k_xperm) and
 * a row's super-block is two loads, four masks or shifts and four
 * vpdpbusd. Each product's sub-block scale (lanes 0-7 one sub-block, 8-15
 * another) is a permute of the row's 8 scales; the sums are zq_dot's. */
KQ_INLINE void q4k_xperm(const int8_t *x, int64_t nb, int8_t *xp)
{
    for (int64_t b = 0; b < nb; b++, x += 256, xp += 256) {
        /* zmm j of a super-block: chunks (c, c + 2) with c = 0, 1, 4, 5 */
        static const int ch[4] = {0, 1, 4, 5};
        for (int j = 0; j < 4; j++) {
            memcpy(xp + 64 * j, x + 32 * ch[j], 32);
            memcpy(xp + 64 * j + 32, x + 32 * (ch[j] + 2), 32);
        }
    }
}

KQ_INLINE void q4k_rows4(const rkm_mm_args *a, const int64_t row[4], const int8_t *xp)
{
    const size_t bb = 144, rb = a->w_row_bytes;
    const int64_t nb = a->n_in / 256;
    const uint8_t *w[4];
    for (int rr = 0; rr < 4; rr++) w[rr] = (const uint8_t *)a->w + (size_t)row[rr] * rb;
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i ix[4] = {
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2),
        _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3),
        _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6),
        _mm512_setr_epi32(5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7)};
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *xb = xp + 256 * b;
        const __m512i x0 = _mm512_load_si512(xb), x1 = _mm512_load_si512(xb + 64), x2 = _mm512_load_si512(xb + 128),
                      x3 = _mm512_load_si512(xb + 192);
        /* the activations' sums of 32, as int16 (each at most 32 * 127) */
        const __m256i s16 = act_sums16(a->xs + 16 * b);
        const __m128i bs32 = _mm_packs_epi32(
            _mm256_castsi256_si128(_mm256_madd_epi16(s16, _mm256_set1_epi16(1))),
            _mm256_extracti128_si256(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), 1));
        __m256i is[4], ms[4];
        float d[4], dm[4];
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; rr++) {
            const uint8_t *blk = w[rr] + (size_t)b * bb;
            prefetch_block(blk + KQ_PF_BYTES, bb);
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long)kq_scales8(blk, 0)));
            const __m128i mn = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)kq_scales8(blk, 1)));
            const __m512i q0 = _mm512_loadu_si512(blk + 16), q1 = _mm512_loadu_si512(blk + 80);
            __m512i t = _mm512_madd_epi16(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(q0, m4), x0),
                                          _mm512_permutexvar_epi32(ix[0], sc));
            t = _mm512_add_epi32(t, _mm512_madd_epi16(_mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                                          _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4), x1),
                                                      _mm512_permutexvar_epi32(ix[1], sc)));
            t = _mm512_add_epi32(t, _mm512_madd_epi16(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(q1, m4), x2),
                                                      _mm512_permutexvar_epi32(ix[2], sc)));
            t = _mm512_add_epi32(t, _mm512_madd_epi16(_mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                                          _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4), x3),
                                                      _mm512_permutexvar_epi32(ix[3], sc)));
            is[rr] = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
            ms[rr] = _mm256_castsi128_si256(_mm_madd_epi16(mn, bs32));
            d[rr] = f16_at(blk);
            dm[rr] = f16_at(blk + 2);
        }
        const __m128 dx = _mm_set1_ps(a->xd[b]);
        acc = _mm_fmadd_ps(_mm_mul_ps(_mm_setr_ps(d[0], d[1], d[2], d[3]), dx), _mm_cvtepi32_ps(hsum4(is[0], is[1], is[2], is[3])), acc);
        const __m128 dmn = _mm_xor_ps(_mm_mul_ps(_mm_setr_ps(dm[0], dm[1], dm[2], dm[3]), dx), _mm_set1_ps(-0.0f));
        const __m128i msum = _mm_hadd_epi32(_mm_hadd_epi32(_mm256_castsi256_si128(ms[0]), _mm256_castsi256_si128(ms[1])),
                                            _mm_hadd_epi32(_mm256_castsi256_si128(ms[2]), _mm256_castsi256_si128(ms[3])));
        acc = _mm_fmadd_ps(dmn, _mm_cvtepi32_ps(msum), acc);
    }
    float out[4];
    _mm_storeu_ps(out, acc);
    for (int rr = 0; rr < 4; rr++) a->y[row[rr]] = out[rr];
}

KQ_INLINE void zq_mm(const rkm_mm_args *a, const int type, int64_t r0, int64_t r1)
{
    if (a->m >= ZT_MIN_M && r0 % 16 == 0) r0 = zt_mm(a, type, r0, r1);
    if (a->m == 1) {
        /* four quarters of the range side by side */
        const int64_t q = (r1 - r0) / 4;
        if (type == RKM_TYPE_Q4_K && q > 0) {
            int8_t *xp = rkm_kernel_scratch((size_t)a->n_in);
            q4k_xperm(a->xq, a->n_in / 256, xp);
            for (int64_t k = 0; k < q; k++) {
                const int64_t row[4] = {r0 + k, r0 + q + k, r0 + 2 * q + k, r0 + 3 * q + k};
                q4k_rows4(a, row, xp);
            }
        } else
            for (int64_t k = 0; k < q; k++) {
                const int64_t row[4] = {r0 + k, r0 + q + k, r0 + 2 * q + k, r0 + 3 * q + k};
                zq_rows4(a, type, row);
            }
        for (int64_t r = r0 + 4 * q; r < r1; r++) zq_acts(a, type, r, 0, 1);
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

/* ------------------------------------------- 32-value blocks (q8_0 acts)
 * Two blocks of a row make a zmm of 64 quants, unsigned for vpdpbusd:
 * IQ4_NL / MXFP4 levels + 128 and Q5_0's q + 16 (both taken off as
 * offset * sum(x), exactly), Q4_1 / Q5_1's q as they are (their min
 * multiplies sum(x)). Four rows' lanes are reduced together to the
 * (row, block) sums, then the reference's float steps per block. */
KQ_INLINE int zb_off(const int type)
{
    return type == RKM_TYPE_Q5_0 ? 16 : type == RKM_TYPE_IQ4_NL || type == RKM_TYPE_MXFP4 ? 128 : 0;
}

/* 2 x 16 bytes of nibbles -> 64 bytes 0..15: lo A, hi A, lo B, hi B. */
KQ_INLINE __m512i zb_nibbles(const uint8_t *qa, const uint8_t *qb)
{
    __m512i y = _mm512_castsi256_si512(
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)qa)), _mm_loadu_si128((const __m128i *)qb), 1));
    __m512i z = _mm512_shuffle_i64x2(y, y, _MM_SHUFFLE(1, 1, 0, 0));
    z = _mm512_srlv_epi64(z, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
    return _mm512_and_si512(z, _mm512_set1_epi8(15));
}

KQ_INLINE __m512i zb_quants(const int type, const uint8_t *ba, const uint8_t *bb)
{
    switch (type) {
    case RKM_TYPE_Q4_1: return zb_nibbles(ba + 4, bb + 4);
    case RKM_TYPE_Q5_0:
    case RKM_TYPE_Q5_1: {
        const int at = type == RKM_TYPE_Q5_0 ? 2 : 4;
        uint32_t ha, hb;
        memcpy(&ha, ba + at, 4);
        memcpy(&hb, bb + at, 4);
        const __m512i hi = _mm512_and_si512(_mm512_movm_epi8((__mmask64)ha | (__mmask64)hb << 32), _mm512_set1_epi8(0x10));
        return _mm512_or_si512(zb_nibbles(ba + at + 4, bb + at + 4), hi);
    }
    default: {
        const int8_t *tab = type == RKM_TYPE_MXFP4 ? rkm_kvalues_mxfp4 : rkm_kvalues_iq4nl;
        const __m512i kv = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tab));
        const int at = type == RKM_TYPE_MXFP4 ? 1 : 2;
        return _mm512_xor_si512(_mm512_shuffle_epi8(kv, zb_nibbles(ba + at, bb + at)), _mm512_set1_epi8((char)0x80));
    }
    }
}

/* Four rows' [block A | block B] lane sums -> [A of rows 0-3 | B of rows 0-3]. */
KQ_INLINE __m256i zb_reduce(__m512i r0, __m512i r1, __m512i r2, __m512i r3)
{
    __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(r0, r1), _mm512_unpackhi_epi32(r0, r1));
    __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(r2, r3), _mm512_unpackhi_epi32(r2, r3));
    __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
    t = _mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
}

/* Weight rows row[0..3] times activation rows [i, i+XN): each pair of a
 * row's blocks decoded once for all activation rows. Decode passes rows
 * from the four quarters of its range (four streams), prefill four
 * consecutive ones. */
KQ_INLINE void zb_rows(const rkm_mm_args *a, const int type, const int64_t row[4], int64_t i, const int XN)
{
    const size_t bb = rkm_type_block_bytes(type), rb = a->w_row_bytes;
    const int64_t nb = a->n_in / 32;
    const uint8_t *w[4];
    for (int rr = 0; rr < 4; rr++) w[rr] = (const uint8_t *)a->w + (size_t)row[rr] * rb;
    const int has_min = blk32_min(type);
    const size_t pfd = a->m == 1 ? KQ_PF_BYTES : 0;
    __m128 acc[4];
    for (int c = 0; c < XN; c++) acc[c] = _mm_setzero_ps();
    /* whole pairs of blocks, then a last single block (nb odd) as a pair
     * with itself whose second half is dropped */
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        __m512i u[4];
        __m128 d[2], m[2];
        float dv[2][4], mv[2][4];
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; rr++) {
            const uint8_t *ba = w[rr] + (size_t)b * bb, *bq = two ? ba + bb : ba;
            if (pfd && (b & 3) == 0) prefetch_block(ba + pfd, 4 * bb);
            u[rr] = zb_quants(type, ba, bq);
            dv[0][rr] = blk32_d(type, ba);
            dv[1][rr] = blk32_d(type, bq);
            if (has_min) mv[0][rr] = f16_at(ba + 2), mv[1][rr] = f16_at(bq + 2);
        }
        for (int h = 0; h < 2; h++) {
            d[h] = _mm_setr_ps(dv[h][0], dv[h][1], dv[h][2], dv[h][3]);
            m[h] = has_min ? _mm_setr_ps(mv[h][0], mv[h][1], mv[h][2], mv[h][3]) : _mm_setzero_ps();
        }
#pragma GCC unroll 4
        for (int c = 0; c < XN; c++) {
            const int64_t ii = i + c;
            const int8_t *xq = a->xq + ii * a->n_in + 32 * b;
            const __m512i xv = two ? _mm512_loadu_si512(xq) : _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)xq));
            __m256i s = zb_reduce(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], xv),
                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[1], xv),
                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[2], xv),
                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[3], xv));
            for (int h = 0; h < 1 + two; h++) {
                const int32_t xsum = a->xs[ii * nb + b + h];
                __m128i isum = h ? _mm256_extracti128_si256(s, 1) : _mm256_castsi256_si128(s);
                if (zb_off(type)) isum = _mm_sub_epi32(isum, _mm_set1_epi32(zb_off(type) * xsum));
                const __m128 dx = _mm_set1_ps(a->xd[ii * nb + b + h]);
                acc[c] = _mm_fmadd_ps(_mm_mul_ps(d[h], dx), _mm_cvtepi32_ps(isum), acc[c]);
                if (has_min) acc[c] = _mm_fmadd_ps(m[h], _mm_set1_ps(a->xm[ii * nb + b + h]), acc[c]);
            }
        }
    }
    for (int c = 0; c < XN; c++) {
        float out[4];
        _mm_storeu_ps(out, acc[c]);
        for (int rr = 0; rr < 4; rr++) a->y[(i + c) * a->ldy + row[rr]] = out[rr];
    }
}

/* Prefill of the 32-value types on 16-row tiles, as the K-quants' above:
 * per pair of blocks 16 columns (4 values x 16 rows; levels + 128, Q5_0's
 * q + 16, taken off as offset * sum(x)), the rows' d (and Q4_1 / Q5_1's
 * m) of each block as float lanes; per block and activation row the
 * reference's integer sum and fma steps, lane by lane. */
#define ZBT_ZMM 20 /* 16 columns, d of blocks A and B, m of A and B */

KQ_INLINE void zbt_pack(const rkm_mm_args *a, const int type, int64_t r, __m512i *t)
{
    const size_t bb = rkm_type_block_bytes(type);
    const int64_t nb = a->n_in / 32;
    _Alignas(64) uint8_t u[16][64];
    for (int64_t b = 0; b < nb; b += 2) {
        __m512i *tb = t + (b / 2) * ZBT_ZMM;
        for (int rr = 0; rr < 16; rr++) {
            const uint8_t *ba = (const uint8_t *)a->w + (size_t)(r + rr) * a->w_row_bytes + (size_t)b * bb;
            const uint8_t *bq = b + 1 < nb ? ba + bb : ba;
            _mm512_store_si512(u[rr], zb_quants(type, ba, bq));
            ((float *)(tb + 16))[rr] = blk32_d(type, ba);
            ((float *)(tb + 17))[rr] = blk32_d(type, bq);
            ((float *)(tb + 18))[rr] = blk32_min(type) ? f16_at(ba + 2) : 0.0f;
            ((float *)(tb + 19))[rr] = blk32_min(type) ? f16_at(bq + 2) : 0.0f;
        }
        for (int q = 0; q < 2; q++) {
            __m256i lo[8], hi[8];
            for (int k = 0; k < 8; k++) {
                lo[k] = _mm256_load_si256((const __m256i *)(u[k] + 32 * q));
                hi[k] = _mm256_load_si256((const __m256i *)(u[8 + k] + 32 * q));
            }
            zt_tr8(lo);
            zt_tr8(hi);
            for (int j = 0; j < 8; j++) _mm512_store_si512(tb + 8 * q + j, _mm512_inserti64x4(_mm512_castsi256_si512(lo[j]), hi[j], 1));
        }
    }
}

KQ_INLINE void zbt_acts(const rkm_mm_args *a, const int type, const __m512i *t, int64_t r, int64_t i, const int XN)
{
    const int64_t nb = a->n_in / 32;
    __m512 acc[4];
    for (int c = 0; c < 4; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m512i *tb = t + (b / 2) * ZBT_ZMM + 8 * (b % 2);
        __m512i d0[4], d1[4];
        for (int c = 0; c < 4; c++) d0[c] = d1[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int k = 0; k < 8; k += 2) {
            const __m512i w0 = _mm512_load_si512(tb + k), w1 = _mm512_load_si512(tb + k + 1);
#pragma GCC unroll 4
            for (int c = 0; c < XN; c++) {
                const int8_t *x = a->xq + (i + c) * a->n_in + 32 * b + 4 * k;
                int32_t x0, x1;
                memcpy(&x0, x, 4);
                memcpy(&x1, x + 4, 4);
                d0[c] = _mm512_dpbusd_epi32(d0[c], w0, _mm512_set1_epi32(x0));
                d1[c] = _mm512_dpbusd_epi32(d1[c], w1, _mm512_set1_epi32(x1));
            }
        }
        const __m512 dv = _mm512_load_ps((const float *)(t + (b / 2) * ZBT_ZMM + 16 + b % 2));
        const __m512 mv = _mm512_load_ps((const float *)(t + (b / 2) * ZBT_ZMM + 18 + b % 2));
#pragma GCC unroll 4
        for (int c = 0; c < XN; c++) {
            const int32_t xsum = a->xs[(i + c) * nb + b];
            __m512i isum = _mm512_add_epi32(d0[c], d1[c]);
            if (zb_off(type)) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(zb_off(type) * xsum));
            const __m512 dx = _mm512_set1_ps(a->xd[(i + c) * nb + b]);
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dv, dx), _mm512_cvtepi32_ps(isum), acc[c]);
            if (blk32_min(type)) acc[c] = _mm512_fmadd_ps(mv, _mm512_set1_ps(a->xm[(i + c) * nb + b]), acc[c]);
        }
    }
    for (int c = 0; c < XN; c++) _mm512_storeu_ps(a->y + (i + c) * a->ldy + r, acc[c]);
}

/* r0 is a multiple of 16, as the prefill grain is. */
KQ_INLINE int64_t zt_mm(const rkm_mm_args *a, const int type, int64_t r0, int64_t r1)
{
    const int k = zt_superblocks(type);
    const size_t zmm = k ? (size_t)(a->n_in / 256) * (size_t)zt_zmm(type) : (size_t)((a->n_in / 32 + 1) / 2) * ZBT_ZMM;
    __m512i *t = rkm_kernel_scratch(zmm * sizeof(__m512i));
    int64_t r = r0;
    for (; r + 16 <= r1; r += 16) {
        if (k) zt_pack(a, type, r, t);
        else zbt_pack(a, type, r, t);
#define ZT_ACTS(XN) (k ? zt_acts(a, type, t, r, i, XN) : zbt_acts(a, type, t, r, i, XN))
        int64_t i = 0;
        for (; i + 4 <= a->m; i += 4) ZT_ACTS(4);
        if (a->m - i == 3) ZT_ACTS(3);
        else if (a->m - i == 2) ZT_ACTS(2);
        else if (a->m - i == 1) ZT_ACTS(1);
#undef ZT_ACTS
    }
    return r;
}

/* Decode of MXFP4 and IQ4_NL (m = 1), four blocks of a row a step: their
 * 4 x 16 nibble bytes as one zmm (128-bit lane k = block k), whose low
 * nibbles are values 0-15 of each block and high nibbles 16-31, against
 * the activations rearranged once per call to that order (zb4_xperm);
 * the levels + 128 by one vpshufb, two vpdpbusd, and each block's sum in
 * the four dwords of its lane. Four rows' (row, block) sums are gathered
 * by unpacks, then the reference's steps per block, in order. */
KQ_INLINE void zb4_xperm(const int8_t *x, int64_t nb, int8_t *xp)
{
    for (int64_t b = 0; b + 4 <= nb; b += 4, x += 128, xp += 128)
        for (int k = 0; k < 4; k++) {
            memcpy(xp + 16 * k, x + 32 * k, 16);
            memcpy(xp + 64 + 16 * k, x + 32 * k + 16, 16);
        }
}

KQ_INLINE void zb4_rows4(const rkm_mm_args *a, const int type, const int64_t row[4], const int8_t *xp)
{
    const size_t bb = rkm_type_block_bytes(type), rb = a->w_row_bytes;
    const int at = type == RKM_TYPE_MXFP4 ? 1 : 2;
    const int64_t nb = a->n_in / 32;
    const uint8_t *w[4];
    for (int rr = 0; rr < 4; rr++) w[rr] = (const uint8_t *)a->w + (size_t)row[rr] * rb;
    const __m512i kv = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(type == RKM_TYPE_MXFP4 ? rkm_kvalues_mxfp4 : rkm_kvalues_iq4nl)));
    const __m512i m4 = _mm512_set1_epi8(15), x80 = _mm512_set1_epi8((char)0x80);
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b + 4 <= nb; b += 4) {
        const __m512i xl = _mm512_load_si512(xp + 32 * b), xh = _mm512_load_si512(xp + 32 * b + 64);
        __m512i t[4];
        float d[4][4];
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; rr++) {
            const uint8_t *p = w[rr] + (size_t)b * bb;
            if ((b & 7) == 0) prefetch_block(p + KQ_PF_BYTES, 8 * bb);
            __m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p + at)));
            q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(p + bb + at)), 1);
            q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(p + 2 * bb + at)), 2);
            q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(p + 3 * bb + at)), 3);
            const __m512i lo = _mm512_xor_si512(_mm512_shuffle_epi8(kv, _mm512_and_si512(q, m4)), x80);
            const __m512i hi = _mm512_xor_si512(_mm512_shuffle_epi8(kv, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)), x80);
            t[rr] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xl), hi, xh);
            for (int k = 0; k < 4; k++) d[k][rr] = blk32_d(type, p + k * bb);
        }
        /* lane 4k + rr of s: block b + k of row rr */
        const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(t[0], t[1]), _mm512_unpackhi_epi32(t[0], t[1]));
        const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(t[2], t[3]), _mm512_unpackhi_epi32(t[2], t[3]));
        const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
        _Alignas(64) int32_t sv[16];
        _mm512_store_si512(sv, s);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m128i isum = _mm_sub_epi32(_mm_load_si128((const __m128i *)(sv + 4 * k)), _mm_set1_epi32(128 * a->xs[b + k]));
            acc = _mm_fmadd_ps(_mm_mul_ps(_mm_loadu_ps(d[k]), _mm_set1_ps(a->xd[b + k])), _mm_cvtepi32_ps(isum), acc);
        }
    }
    float out[4];
    _mm_storeu_ps(out, acc);
    for (int rr = 0; rr < 4; rr++) a->y[row[rr]] = out[rr];
}

KQ_INLINE void zb_mm(const rkm_mm_args *a, const int type, int64_t r0, int64_t r1)
{
    int64_t r = r0;
    if (a->m >= ZT_MIN_M && r0 % 16 == 0) r = r0 = zt_mm(a, type, r0, r1);
    if (a->m == 1) {
        const int64_t q = (r1 - r0) / 4;
        const int four = (type == RKM_TYPE_MXFP4 || type == RKM_TYPE_IQ4_NL) && a->n_in % 128 == 0;
        int8_t *xp = four ? rkm_kernel_scratch((size_t)a->n_in) : NULL;
        if (four) zb4_xperm(a->xq, a->n_in / 32, xp);
        for (int64_t k = 0; k < q; k++) {
            const int64_t row[4] = {r0 + k, r0 + q + k, r0 + 2 * q + k, r0 + 3 * q + k};
            if (four) zb4_rows4(a, type, row, xp);
            else zb_rows(a, type, row, 0, 1);
        }
        r = r0 + 4 * q;
    } else
        for (; r + 4 <= r1; r += 4) {
            const int64_t row[4] = {r, r + 1, r + 2, r + 3};
            int64_t i = 0;
            for (; i + 4 <= a->m; i += 4) zb_rows(a, type, row, i, 4);
            for (; i < a->m; i++) zb_rows(a, type, row, i, 1);
        }
    if (r < r1) { /* the last rows: the AVX2 kernel */
        switch (type) {
        case RKM_TYPE_Q4_1: rkm_mm_q4_1_avx2(a, r, r1); break;
        case RKM_TYPE_Q5_0: rkm_mm_q5_0_avx2(a, r, r1); break;
        case RKM_TYPE_Q5_1: rkm_mm_q5_1_avx2(a, r, r1); break;
        case RKM_TYPE_IQ4_NL: rkm_mm_iq4_nl_avx2(a, r, r1); break;
        default: rkm_mm_mxfp4_avx2(a, r, r1); break;
        }
    }
}

#define ZB_DEFINE(NAME, TYPE) \
    void NAME(const rkm_mm_args *a, int64_t r0, int64_t r1) { zb_mm(a, TYPE, r0, r1); }

ZB_DEFINE(rkm_mm_q4_1_avx512vnni, RKM_TYPE_Q4_1)
ZB_DEFINE(rkm_mm_q5_0_avx512vnni, RKM_TYPE_Q5_0)
ZB_DEFINE(rkm_mm_q5_1_avx512vnni, RKM_TYPE_Q5_1)
ZB_DEFINE(rkm_mm_iq4_nl_avx512vnni, RKM_TYPE_IQ4_NL)
ZB_DEFINE(rkm_mm_mxfp4_avx512vnni, RKM_TYPE_MXFP4)

/* -------------------------------------------- packed Q4_K and Q5_K ----
 * The 16 rows of a packed group (kernels.h) sit in the 16 int32 lanes: a
 * part of 64 bytes is one 4-byte word of each row, so one vpdpbusd adds 4
 * nibble x activation products to each row's sum of its sub-block (Q5_K:
 * the fifth bit of sub-block 2c + k, bit 2c + k of the qh word, shifted to
 * bit 4 and put in by one vpternlogd bit-select into the masked nibbles), the
 * sub-block sums are scaled by their 6-bit scales (vpmulld), the mins by
 * the activations' sums of 32, and each super-block ends in the
 * reference's two fused multiply-adds per row. Decode (m = 1) reads
 * PKK_STREAMS groups as parallel streams, prefetched PKK_PF_BYTES ahead;
 * prefill takes up to 4 activation rows per weight group.
 *
 * One stream: a packed super-block is 2-3.4 KiB a group, and at expert
 * shapes (768-2048 rows) four groups read side by side left Q4_K at 25
 * and Q6_K at 18 GB/s from memory against 31 and 26 with one (bench-kernels
 * -k avx512vnni -T q4_kp,q6_kp -m 1 -n 2048 -o 1024 / -o 768); resident
 * olmoe Q4_K_M decode went from 49-51 to 69-72 tok/s. At 256 x 4096-sized
 * calls they tie. Packed q4_0 / q8_0 (288-544 bytes a block) keep four. */
#ifndef PKK_PF_BYTES
#define PKK_PF_BYTES 2048
#endif
#ifndef PKK_STREAMS
#define PKK_STREAMS 1
#endif

/* The row loop of every packed 256-value kernel here (kquant_x86_impl.h). */
#define PKK_DRIVE(FN, a, type, r0, r1) PKQ_DRIVE(FN, a, type, r0, r1, PKK_STREAMS, 4)

/* The 8 sub-blocks' scales and mins of the group's 16 rows, as int32. */
KQ_INLINE void pkk_scales(const uint8_t *blk, __m512i sc[8], __m512i mn[8])
{
    __m512i S[12];
#pragma GCC unroll 12
    for (int k = 0; k < 12; k++) S[k] = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 64 + 16 * k)));
    const __m512i m63 = _mm512_set1_epi32(63), m15 = _mm512_set1_epi32(15);
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        sc[s] = _mm512_and_si512(S[s], m63);
        mn[s] = _mm512_and_si512(S[s + 4], m63);
        sc[s + 4] = _mm512_or_si512(_mm512_and_si512(S[s + 8], m15), _mm512_slli_epi32(_mm512_srli_epi32(S[s], 6), 4));
        mn[s + 4] = _mm512_or_si512(_mm512_srli_epi32(S[s + 8], 4), _mm512_slli_epi32(_mm512_srli_epi32(S[s + 4], 6), 4));
    }
}

/* Nibbles n (bits 4-7 zero) with the fifth bit at bit 4 of h: bits 0-3
 * and 5-7 from n, bit 4 from h. */
#define PKK_NIB5 0xD8 /* c ? b : a, c the 0x10 mask */

/* RX activation rows x NG groups from row r (NG * 16 weight rows) of
 * packed Q4_K or Q5_K. */
KQ_INLINE void pkk_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX, const int NG)
{
    const int q5 = type == RKM_TYPE_Q5_K;
    const size_t blkb = rkm_pk_block(type), qs_at = q5 ? 256 + 8 * 64 : 256;
    const __m512i m10 = _mm512_set1_epi8(0x10);
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const size_t gstride = a->w_row_bytes * RKM_PACK_ROWS;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[k][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * blkb;
            if (RX == 1) prefetch_stream(grp, k, NG, gstride, (size_t)b * blkb, blkb, PKK_PF_BYTES);
            __m512i sc[8], mn[8];
            pkk_scales(blk, sc, mn);
            const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
            const __m512 dm16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
            __m512i isum[4], msum[4];
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) {
                const int32_t *xs = a->xs + (i + c) * ng16 + 16 * b;
                __m512i ms = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int s = 0; s < 8; s++) ms = _mm512_add_epi32(ms, _mm512_mullo_epi32(mn[s], _mm512_set1_epi32(xs[2 * s] + xs[2 * s + 1])));
                msum[c] = ms;
                isum[c] = _mm512_setzero_si512();
            }
#pragma GCC unroll 1
            for (int j = 0; j < 4; j++) {
                __m512i dlo[4], dhi[4];
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++) dlo[c] = dhi[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int hh = 0; hh < 8; hh++) {
                    const __m512i v = _mm512_loadu_si512((const void *)(blk + qs_at + 64 * (8 * j + hh)));
                    __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    if (q5) {
                        /* bits 2j and 2j + 1 of the qh word to bits 0 and 1 */
                        const __m512i h = _mm512_srl_epi16(_mm512_loadu_si512((const void *)(blk + 256 + 64 * hh)), _mm_cvtsi32_si128(2 * j));
                        lo = _mm512_ternarylogic_epi32(lo, _mm512_slli_epi16(h, 4), m10, PKK_NIB5);
                        hi = _mm512_ternarylogic_epi32(hi, _mm512_slli_epi16(h, 3), m10, PKK_NIB5);
                    }
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++) {
                        const int8_t *xb = a->xq + (i + c) * a->n_in + 256 * b + 64 * j + 4 * hh;
                        int32_t x0, x1;
                        memcpy(&x0, xb, 4);
                        memcpy(&x1, xb + 32, 4);
                        dlo[c] = _mm512_dpbusd_epi32(dlo[c], lo, _mm512_set1_epi32(x0));
                        dhi[c] = _mm512_dpbusd_epi32(dhi[c], hi, _mm512_set1_epi32(x1));
                    }
                }
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++)
                    isum[c] = _mm512_add_epi32(isum[c], _mm512_add_epi32(_mm512_mullo_epi32(dlo[c], sc[2 * j]),
                                                                         _mm512_mullo_epi32(dhi[c], sc[2 * j + 1])));
            }
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) {
                const __m512 dx = _mm512_set1_ps(a->xd[(i + c) * nb + b]);
                acc[k][c] = _mm512_fmadd_ps(_mm512_mul_ps(d16, dx), _mm512_cvtepi32_ps(isum[c]), acc[k][c]);
                const __m512 ndm = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(dm16, dx)),
                                                                        _mm512_set1_epi32((int)0x80000000u)));
                acc[k][c] = _mm512_fmadd_ps(ndm, _mm512_cvtepi32_ps(msum[c]), acc[k][c]);
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) _mm512_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k, acc[k][c]);
}

void rkm_mm_q4_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKK_DRIVE(pkk_compute, a, RKM_TYPE_Q4_K, r0, r1); }
void rkm_mm_q5_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKK_DRIVE(pkk_compute, a, RKM_TYPE_Q5_K, r0, r1); }

/* ------------------------------------------------- packed Q6_K ----
 * As packed Q4_K, 16 rows in the lanes (layout in kernels.h). Four words
 * of levels come from one qh part and two ql parts: for l = 4t..4t+3 of
 * half n, ql part A (bytes l) and B (bytes 32 + l) and qh part H (bytes
 * l). With H03 = H & 0x33 and H0C = H & 0xCC (fields 0, 2 and 1, 3), each
 * level is one bit-select (vpternlogd: low nibble from the ql side, bits
 * 4-5 from the qh side, whose bits 6-7 are zero after the mask and a
 * 16-bit shift):
 *   values l:      A & 15        | H03 << 4
 *   values 32 + l: B & 15        | H0C << 2
 *   values 64 + l: (A >> 4) & 15 | H03
 *   values 96 + l: (B >> 4) & 15 | H0C >> 2
 * The levels are q + 32 (unsigned, as vpdpbusd wants). Each sub-block of
 * 16 values is four vpdpbusd into an accumulator that starts at -32 x the
 * activations' sum of 16, so it ends at the reference's exact dot of
 * (q - 32) x; it is scaled by the rows' int8 scales (vpmulld) and the
 * super-block ends in the reference's fused multiply-add per row. Decode
 * reads PKK_STREAMS groups as parallel streams, as packed Q4_K; prefill
 * decodes a group's levels once for up to 4 activation rows (16
 * accumulators). */
#define PK6_SEL 0xE4 /* c ? a : b, c the 0x0F mask */

KQ_INLINE void pk6_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX, const int NG)
{
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const size_t gstride = a->w_row_bytes * RKM_PACK_ROWS;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const __m512i m4 = _mm512_set1_epi8(15), m33 = _mm512_set1_epi8(0x33), mcc = _mm512_set1_epi8((char)0xcc);
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[k][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        int32_t nx[4][16] __attribute__((aligned(64))); /* -32 x the activations' sums of 16 */
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++)
            _mm512_store_si512(nx[c], _mm512_sub_epi32(_mm512_setzero_si512(),
                                                       _mm512_slli_epi32(_mm512_loadu_si512(a->xs + (i + c) * ng16 + 16 * b), 5)));
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * RKM_PK_Q6_K_BLOCK;
            if (RX == 1) prefetch_stream(grp, k, NG, gstride, (size_t)b * RKM_PK_Q6_K_BLOCK, RKM_PK_Q6_K_BLOCK, PKK_PF_BYTES);
            const uint8_t *parts = blk + 288;
            __m512i isum[4];
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) isum[c] = _mm512_setzero_si512();
#pragma GCC unroll 1
            for (int hq = 0; hq < 4; hq++) { /* half n = hq / 2; l in 16q..16q+15, q = hq % 2 */
                const int n = hq >> 1, q = hq & 1;
                __m512i d[4][4];
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
                    for (int u = 0; u < 4; u++) d[c][u] = _mm512_set1_epi32(nx[c][8 * n + q + 2 * u]);
#pragma GCC unroll 4
                for (int tt = 0; tt < 4; tt++) {
                    const int t = 4 * q + tt;
                    const __m512i vA = _mm512_loadu_si512((const void *)(parts + 64 * (16 * n + t)));
                    const __m512i vB = _mm512_loadu_si512((const void *)(parts + 64 * (16 * n + 8 + t)));
                    const __m512i vH = _mm512_loadu_si512((const void *)(parts + 64 * (32 + 8 * n + t)));
                    const __m512i h03 = _mm512_and_si512(vH, m33), h0c = _mm512_and_si512(vH, mcc);
                    __m512i v[4];
                    v[0] = _mm512_ternarylogic_epi32(vA, _mm512_slli_epi16(h03, 4), m4, PK6_SEL);
                    v[1] = _mm512_ternarylogic_epi32(vB, _mm512_slli_epi16(h0c, 2), m4, PK6_SEL);
                    v[2] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(vA, 4), h03, m4, PK6_SEL);
                    v[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(vB, 4), _mm512_srli_epi16(h0c, 2), m4, PK6_SEL);
#pragma GCC unroll 4
                    for (int u = 0; u < 4; u++)
#pragma GCC unroll 4
                        for (int c = 0; c < RX; c++) {
                            int32_t xv;
                            memcpy(&xv, a->xq + (i + c) * a->n_in + 256 * b + 128 * n + 32 * u + 4 * t, 4);
                            d[c][u] = _mm512_dpbusd_epi32(d[c][u], v[u], _mm512_set1_epi32(xv));
                        }
                }
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++) {
                    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * (8 * n + q + 2 * u))));
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(d[c][u], sc));
                }
            }
            const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++)
                acc[k][c] = _mm512_fmadd_ps(_mm512_mul_ps(d16, _mm512_set1_ps(a->xd[(i + c) * nb + b])),
                                            _mm512_cvtepi32_ps(isum[c]), acc[k][c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) _mm512_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k, acc[k][c]);
}

void rkm_mm_q6_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKK_DRIVE(pk6_compute, a, RKM_TYPE_Q6_K, r0, r1); }

/* ------------------------------------------------- packed IQ4_XS ----
 * As packed Q4_K, 16 rows in the lanes (layout in kernels.h). A sub-block
 * of 32 values is 4 parts: their low nibbles hold values l (0..15) and
 * the high ones 16 + l, looked up by vpshufb as level + 128 (1..241,
 * unsigned as vpdpbusd wants), so 8 vpdpbusd into an accumulator that
 * starts at -128 x the activations' sum of 32 end at the reference's exact
 * dot of the levels by x. The rows' 6-bit scales (scales_l nibble |
 * scales_h pair << 4, minus 32) come from the head's three fields by
 * shifts and masks, scale the sub-block sums (vpmulld), and each
 * super-block ends in the reference's fused multiply-add per row. Decode
 * reads PKK_STREAMS groups as parallel streams; prefill takes up to 4
 * activation rows per weight group. */
KQ_INLINE void pkx_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX, const int NG)
{
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const size_t gstride = a->w_row_bytes * RKM_PACK_ROWS;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const __m512i m4 = _mm512_set1_epi8(15), m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
    const __m512i kv = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)rkm_kvalues_iq4nl)),
                                       _mm512_set1_epi8((char)0x80));
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[k][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * RKM_PK_IQ4_XS_BLOCK;
            if (RX == 1) prefetch_stream(grp, k, NG, gstride, (size_t)b * RKM_PK_IQ4_XS_BLOCK, RKM_PK_IQ4_XS_BLOCK, PKK_PF_BYTES);
            const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(blk + 32)));
            __m512i isum[4];
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) isum[c] = _mm512_setzero_si512();
#pragma GCC unroll 1
            for (int ib = 0; ib < 8; ib++) {
                const __m512i sl = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 64 + 16 * (ib >> 1))));
                const __m512i lo4 = _mm512_and_si512(_mm512_srl_epi32(sl, _mm_cvtsi32_si128(4 * (ib & 1))), m15);
                const __m512i hi2 = _mm512_and_si512(_mm512_srl_epi32(sh, _mm_cvtsi32_si128(2 * ib)), m3);
                const __m512i sc = _mm512_sub_epi32(_mm512_or_si512(lo4, _mm512_slli_epi32(hi2, 4)), _mm512_set1_epi32(32));
                __m512i d0[4], d1[4];
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++) {
                    const int32_t *xs = a->xs + (i + c) * ng16 + 16 * b + 2 * ib;
                    d0[c] = _mm512_set1_epi32(-128 * (xs[0] + xs[1]));
                    d1[c] = _mm512_setzero_si512();
                }
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    const __m512i v = _mm512_loadu_si512((const void *)(blk + 128 + 64 * (4 * ib + t)));
                    const __m512i lo = _mm512_shuffle_epi8(kv, _mm512_and_si512(v, m4));
                    const __m512i hi = _mm512_shuffle_epi8(kv, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++) {
                        const int8_t *xb = a->xq + (i + c) * a->n_in + 256 * b + 32 * ib + 4 * t;
                        int32_t x0, x1;
                        memcpy(&x0, xb, 4);
                        memcpy(&x1, xb + 16, 4);
                        d0[c] = _mm512_dpbusd_epi32(d0[c], lo, _mm512_set1_epi32(x0));
                        d1[c] = _mm512_dpbusd_epi32(d1[c], hi, _mm512_set1_epi32(x1));
                    }
                }
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(_mm512_add_epi32(d0[c], d1[c]), sc));
            }
            const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++)
                acc[k][c] = _mm512_fmadd_ps(_mm512_mul_ps(d16, _mm512_set1_ps(a->xd[(i + c) * nb + b])),
                                            _mm512_cvtepi32_ps(isum[c]), acc[k][c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) _mm512_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k, acc[k][c]);
}

void rkm_mm_iq4_xs_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKK_DRIVE(pkx_compute, a, RKM_TYPE_IQ4_XS, r0, r1); }

/* ------------------------------------------ packed Q3_K and Q2_K ----
 * As packed Q4_K, 16 rows in the lanes (layouts in kernels.h). Sub-block
 * s = 8n + 2j + g (16 values: half n, quarter j, g-th 16) is 4 parts of
 * `qs` (Q3_K: after its 8 parts of `hmask`), t = 0..3: the 2-bit levels at
 * bits 2j of part 8n + 4g + t, and for Q3_K bit 4n + j of `hmask` part
 * 4g + t as bit 2 (a level of 0..7, the value + 4). Four vpdpbusd make a
 * sub-block's dot, in an accumulator that starts at -4 x the activations'
 * sum of 16 for Q3_K (so it ends at the exact dot of the values) and 0 for
 * Q2_K (its mins times those sums go apart, as the reference has them);
 * the rows' scales (Q3_K: 6 bits from two scale bytes, minus 32; Q2_K: the
 * low nibble, the min the high one) are made once per super-block into a
 * table, multiply the sub-block dots (vpmulld), and each super-block ends
 * in the reference's fused multiply-add(s) per row. Decode reads
 * PKK_STREAMS groups as parallel streams; prefill takes up to 4
 * activation rows per weight group. */
#define PK3_OR_AND 0xEA /* (a & b) | c */

KQ_INLINE void pk23_compute(const rkm_mm_args *a, const int type, int64_t r, int64_t i, const int RX, const int NG)
{
    const int q3 = type == RKM_TYPE_Q3_K;
    const size_t blkb = rkm_pk_block(type), parts_at = q3 ? 224 : 320;
    const int64_t nb = a->n_in / 256, ng16 = a->n_in / 16;
    const size_t gstride = a->w_row_bytes * RKM_PACK_ROWS;
    const uint8_t *grp = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
    const __m512i m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(4), m15 = _mm512_set1_epi32(15);
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int k = 0; k < NG; k++)
#pragma GCC unroll 4
        for (int c = 0; c < RX; c++) acc[k][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) {
            const uint8_t *blk = grp + k * gstride + (size_t)b * blkb, *parts = blk + parts_at;
            if (RX == 1) prefetch_stream(grp, k, NG, gstride, (size_t)b * blkb, blkb, PKK_PF_BYTES);
            int32_t sc[16][16] __attribute__((aligned(64)));
            __m512i isum[4], msum[4];
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) isum[c] = msum[c] = _mm512_setzero_si512();
            if (q3) {
#pragma GCC unroll 16
                for (int s = 0; s < 16; s++) {
                    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * (s & 7))));
                    const __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * (8 + (s & 3)))));
                    const __m512i l4 = _mm512_and_si512(s < 8 ? lo : _mm512_srli_epi32(lo, 4), m15);
                    const __m512i h2 = _mm512_and_si512(_mm512_srli_epi32(hi, 2 * (s >> 2)), _mm512_set1_epi32(3));
                    _mm512_store_si512(sc[s], _mm512_sub_epi32(_mm512_or_si512(l4, _mm512_slli_epi32(h2, 4)), _mm512_set1_epi32(32)));
                }
            } else {
#pragma GCC unroll 16
                for (int s = 0; s < 16; s++) {
                    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 64 + 16 * s)));
                    _mm512_store_si512(sc[s], _mm512_and_si512(v, m15));
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++)
                        msum[c] = _mm512_add_epi32(msum[c], _mm512_mullo_epi32(_mm512_srli_epi32(v, 4),
                                                                               _mm512_set1_epi32(a->xs[(i + c) * ng16 + 16 * b + s])));
                }
            }
#pragma GCC unroll 1
            for (int ng = 0; ng < 4; ng++) { /* n = ng / 2, g = ng % 2 */
                const int n = ng >> 1, g = ng & 1;
                __m512i d[4][4];
#pragma GCC unroll 4
                for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
                    for (int j = 0; j < 4; j++)
                        d[c][j] = q3 ? _mm512_set1_epi32(-4 * a->xs[(i + c) * ng16 + 16 * b + 8 * n + 2 * j + g]) : _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    const __m512i P = _mm512_loadu_si512((const void *)(parts + 64 * ((q3 ? 8 : 0) + 8 * n + 4 * g + t)));
                    __m512i H = _mm512_setzero_si512();
                    if (q3) H = _mm512_srl_epi16(_mm512_loadu_si512((const void *)(parts + 64 * (4 * g + t))), _mm_cvtsi32_si128(4 * n));
#pragma GCC unroll 4
                    for (int j = 0; j < 4; j++) {
                        __m512i lvl = _mm512_and_si512(j ? _mm512_srli_epi16(P, 2 * j) : P, m3);
                        if (q3) {
                            const __m512i hj = j == 0 ? _mm512_slli_epi16(H, 2) : j == 1 ? _mm512_slli_epi16(H, 1) : j == 2 ? H : _mm512_srli_epi16(H, 1);
                            lvl = _mm512_ternarylogic_epi32(hj, m4, lvl, PK3_OR_AND);
                        }
#pragma GCC unroll 4
                        for (int c = 0; c < RX; c++) {
                            int32_t xv;
                            memcpy(&xv, a->xq + (i + c) * a->n_in + 256 * b + 128 * n + 32 * j + 16 * g + 4 * t, 4);
                            d[c][j] = _mm512_dpbusd_epi32(d[c][j], lvl, _mm512_set1_epi32(xv));
                        }
                    }
                }
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const __m512i s = _mm512_load_si512(sc[8 * n + 2 * j + g]);
#pragma GCC unroll 4
                    for (int c = 0; c < RX; c++) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(d[c][j], s));
                }
            }
            const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
#pragma GCC unroll 4
            for (int c = 0; c < RX; c++) {
                const __m512 dx = _mm512_set1_ps(a->xd[(i + c) * nb + b]);
                acc[k][c] = _mm512_fmadd_ps(_mm512_mul_ps(d16, dx), _mm512_cvtepi32_ps(isum[c]), acc[k][c]);
                if (!q3) {
                    const __m512 dm16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
                    const __m512 ndm = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(dm16, dx)),
                                                                            _mm512_set1_epi32((int)0x80000000u)));
                    acc[k][c] = _mm512_fmadd_ps(ndm, _mm512_cvtepi32_ps(msum[c]), acc[k][c]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < RX; c++)
#pragma GCC unroll 4
        for (int k = 0; k < NG; k++) _mm512_storeu_ps(a->y + (i + c) * a->ldy + r + RKM_PACK_ROWS * k, acc[k][c]);
}

void rkm_mm_q3_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKK_DRIVE(pk23_compute, a, RKM_TYPE_Q3_K, r0, r1); }
void rkm_mm_q2_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { PKK_DRIVE(pk23_compute, a, RKM_TYPE_Q2_K, r0, r1); }
