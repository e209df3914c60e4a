/*
 * kquant_x86_impl.h - the AVX2 building blocks of the K-quant, IQ4 and
 * MXFP4 matmuls (decoding a super-block's scales and 32-value chunks,
 * exact integer reductions), shared by kquant_avx2.c and
 * kquant_avx512vnni.c; each includes it and compiles it with its own ISA
 * flags (at least AVX2 + FMA + F16C). The numbers these must reproduce
 * are in kernels_impl.h; the block layouts in qblock.c. Stateless.
 */
#ifndef RKM_KQUANT_X86_IMPL_H
#define RKM_KQUANT_X86_IMPL_H

#include <immintrin.h>
#include <string.h>

#include "kernels/arch/x86/x86_common.h"
#include "kernels/kernels_impl.h"
#include "kernels/quant_tables.h"

#define KQ_INLINE static inline __attribute__((always_inline))

/* Bytes ahead of the rows being read that decode prefetches. */
#define KQ_PF_BYTES 4096

/* One super-block's group scales and mins (16 groups of 16 values; the
 * 32-value sub-blocks of Q4_K, Q5_K and IQ4_XS fill two groups each). */
typedef struct {
    __m256i sd[2]; /* dword k of sd[h] = scale of group 8h+k in both halves */
    __m256i sc16;  /* the 16 group scales */
    __m256i mn16;  /* the 16 group mins (zero without mins) */
    float d, dmin;
} kq_head;

KQ_INLINE float f16_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return rkm_x86_f16_table[h];
}

/* 16 int16 scales -> the duplicated dwords the per-chunk permute reads. */
KQ_INLINE void head_sd(kq_head *h)
{
    const __m256i lo = _mm256_set1_epi32(0xffff);
    __m256i a = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(h->sc16));
    __m256i b = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(h->sc16, 1));
    h->sd[0] = _mm256_or_si256(_mm256_and_si256(a, lo), _mm256_slli_epi32(a, 16));
    h->sd[1] = _mm256_or_si256(_mm256_and_si256(b, lo), _mm256_slli_epi32(b, 16));
}

/* 8 sub-block values (bytes) -> 16 int16 groups, each twice. */
KQ_INLINE __m256i dup8(uint32_t lo4, uint32_t hi4)
{
    __m128i v = _mm_set_epi32(0, 0, (int)hi4, (int)lo4);
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, v));
}

/* The 8 6-bit scales (mins = 0) or mins (1) of a Q4_K / Q5_K super-block
 * (12 packed bytes at 4) as 8 bytes. */
KQ_INLINE uint64_t kq_scales8(const uint8_t *b, const int mins)
{
    uint32_t u[3];
    memcpy(u, b + 4, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t lo = mins ? u[1] & m6 : u[0] & m6;
    const uint32_t hi = mins ? ((u[2] >> 4) & m4) | ((u[1] >> 6) & m2) << 4 : (u[2] & m4) | ((u[0] >> 6) & m2) << 4;
    return (uint64_t)lo | (uint64_t)hi << 32;
}

KQ_INLINE void kq_head_of(const int type, const uint8_t *b, kq_head *h)
{
    switch (type) {
    case RKM_TYPE_Q4_K:
    case RKM_TYPE_Q5_K: {
        const uint64_t sc = kq_scales8(b, 0), mn = kq_scales8(b, 1);
        h->sc16 = dup8((uint32_t)sc, (uint32_t)(sc >> 32));
        h->mn16 = dup8((uint32_t)mn, (uint32_t)(mn >> 32));
        h->d = f16_at(b);
        h->dmin = f16_at(b + 2);
        break;
    }
    case RKM_TYPE_Q2_K: {
        __m128i v = _mm_loadu_si128((const __m128i *)b);
        h->sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(v, _mm_set1_epi8(15)));
        h->mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15)));
        h->d = f16_at(b + 80);
        h->dmin = f16_at(b + 82);
        break;
    }
    case RKM_TYPE_Q3_K: {
        /* 16 6-bit scales: low nibbles in bytes 0-7 (groups 0-7 low, 8-15
         * high), the 2 high bits in bytes 8-11 (byte 8 + g % 4, bits 2(g/4)) */
        const uint8_t *s = b + 96;
        uint64_t l8;
        uint32_t h4;
        memcpy(&l8, s, 8);
        memcpy(&h4, s + 8, 4);
        __m128i lo = _mm_set_epi64x((long long)((l8 >> 4) & 0x0f0f0f0f0f0f0f0full), (long long)(l8 & 0x0f0f0f0f0f0f0f0full));
        /* high bits: group g takes bits 2(g/4) of byte g % 4 */
        uint32_t hb[4];
        for (int k = 0; k < 4; k++) hb[k] = ((h4 >> (2 * k)) & 0x03030303u) << 4;
        __m128i hi = _mm_setr_epi32((int)hb[0], (int)hb[1], (int)hb[2], (int)hb[3]);
        h->sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_or_si128(lo, hi)), _mm256_set1_epi16(32));
        h->mn16 = _mm256_setzero_si256();
        h->d = f16_at(b + 108);
        break;
    }
    case RKM_TYPE_Q6_K:
        h->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
        h->mn16 = _mm256_setzero_si256();
        h->d = f16_at(b + 208);
        break;
    case RKM_TYPE_IQ4_XS: {
        uint16_t sh;
        memcpy(&sh, b + 2, 2);
        uint32_t lo4, sl;
        memcpy(&sl, b + 4, 4);
        /* ls of sub-block ib: nibble ib of scales_l | 2 bits ib of scales_h << 4 */
        uint8_t ls[8];
        for (int ib = 0; ib < 8; ib++) ls[ib] = (uint8_t)(((sl >> 4 * ib) & 0xf) | ((sh >> 2 * ib) & 3) << 4);
        memcpy(&lo4, ls, 4);
        uint32_t hi4;
        memcpy(&hi4, ls + 4, 4);
        h->sc16 = _mm256_sub_epi16(dup8(lo4, hi4), _mm256_set1_epi16(32));
        h->mn16 = _mm256_setzero_si256();
        h->d = f16_at(b);
        break;
    }
    }
    head_sd(h);
}

/* The scales of chunk c's 16 pair sums: group 2c in the low half, 2c+1 in
 * the high half. */
KQ_INLINE __m256i chunk_scales(const kq_head *h, int c)
{
    const int g = (2 * c) & 7;
    return _mm256_permutevar8x32_epi32(h->sd[c >> 2], _mm256_setr_epi32(g, g, g, g, g + 1, g + 1, g + 1, g + 1));
}

/* 16 bytes of nibbles -> 32 bytes 0..15 (low nibbles, then high). */
KQ_INLINE __m256i nibbles16(const uint8_t *qs)
{
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    v = _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(15));
}

/* Chunk c (values 32c..32c+31) of a super-block. */
KQ_INLINE __m256i kq_chunk(const int type, const uint8_t *b, const int c)
{
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    switch (type) {
    case RKM_TYPE_Q4_K:
    case RKM_TYPE_Q5_K: {
        __m256i v = _mm256_loadu_si256((const __m256i *)(b + (type == RKM_TYPE_Q5_K ? 48 : 16) + 32 * (c >> 1)));
        __m256i u = (c & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
        if (type == RKM_TYPE_Q5_K) {
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
            u = _mm256_or_si256(u, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, c), m1), 4));
        }
        return u;
    }
    case RKM_TYPE_Q6_K: {
        const int hf = c >> 2, cc = c & 3;
        __m256i ql = _mm256_loadu_si256((const __m256i *)(b + 64 * hf + 32 * (cc & 1)));
        __m256i lo = cc < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
        __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * hf));
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * cc), m3);
        return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    }
    case RKM_TYPE_Q3_K: {
        __m256i q = _mm256_loadu_si256((const __m256i *)(b + 32 + 32 * (c >> 2)));
        __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (c & 3)), m3);
        __m256i hm = _mm256_loadu_si256((const __m256i *)b);
        return _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, c), m1), 2));
    }
    case RKM_TYPE_Q2_K: {
        __m256i q = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * (c >> 2)));
        return _mm256_and_si256(_mm256_srli_epi16(q, 2 * (c & 3)), m3);
    }
    default: { /* IQ4_XS: signed levels */
        const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rkm_kvalues_iq4nl));
        return _mm256_shuffle_epi8(kv, nibbles16(b + 8 + 16 * c));
    }
    }
}

KQ_INLINE int kq_offset(const int type) { return type == RKM_TYPE_Q6_K ? 5 : type == RKM_TYPE_Q3_K ? 2 : -1; }
KQ_INLINE int kq_has_min(const int type)
{
    return type == RKM_TYPE_Q2_K || type == RKM_TYPE_Q4_K || type == RKM_TYPE_Q5_K;
}

/* The activations' 16 sums of 16 of super-block b, as int16 (each at most
 * 16 * 127). */
KQ_INLINE __m256i act_sums16(const int32_t *s)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)s), b = _mm256_loadu_si256((const __m256i *)(s + 8));
    return _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
}

/* isum (as 8 int32 lanes to be summed) of one row's super-block. */
KQ_INLINE __m256i kq_isum(const int type, const uint8_t *b, const kq_head *h, const int8_t *x, __m256i bs16)
{
    __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        __m256i u = kq_chunk(type, b, c), xv = _mm256_load_si256((const __m256i *)(x + 32 * c)), p;
        if (type == RKM_TYPE_IQ4_XS) p = _mm256_maddubs_epi16(_mm256_sign_epi8(u, u), _mm256_sign_epi8(xv, u));
        else p = _mm256_maddubs_epi16(u, xv);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, chunk_scales(h, c)));
    }
    if (kq_offset(type) > 0)
        acc = _mm256_sub_epi32(acc, _mm256_slli_epi32(_mm256_madd_epi16(h->sc16, bs16), kq_offset(type)));
    return acc;
}

/* The four rows' sums of four vectors of int32 lanes, exactly. */
KQ_INLINE __m128i hsum4(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

KQ_INLINE void prefetch_block(const uint8_t *p, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* Decode of packed K-quant groups read as NG parallel streams: the block
 * of bytes blkb at offset off of group k, dist bytes ahead in its stream,
 * where stream k continues with group k + NG (the caller's next step). */
KQ_INLINE void prefetch_stream(const uint8_t *grp, int k, int NG, size_t gstride, size_t off, size_t blkb, size_t dist)
{
    const size_t o = off + dist;
    prefetch_block(grp + (o < gstride ? k * gstride + o : (k + NG) * gstride + o - gstride), blkb);
}

/* The row loop of every packed 256-value kernel of both sets: decode
 * (m = 1) over STREAMS groups at a time, prefill up to RXMAX (8, 4 or 2)
 * activation rows per weight group, then 2, then 1; FN(a, type, r, i,
 * RX, NG) computes RX activation rows from i by NG groups from row r. */
#define PKQ_DRIVE(FN, a, type, r0, r1, STREAMS, RXMAX)                                             \
    do {                                                                                           \
        int64_t r_ = (r0);                                                                         \
        if ((a)->m == 1) {                                                                         \
            for (; r_ + (STREAMS) * RKM_PACK_ROWS <= (r1); r_ += (STREAMS) * RKM_PACK_ROWS)        \
                FN(a, type, r_, 0, 1, STREAMS);                                                    \
            for (; r_ + RKM_PACK_ROWS <= (r1); r_ += RKM_PACK_ROWS) FN(a, type, r_, 0, 1, 1);      \
            break;                                                                                 \
        }                                                                                          \
        for (; r_ + RKM_PACK_ROWS <= (r1); r_ += RKM_PACK_ROWS) {                                  \
            int64_t i_ = 0;                                                                        \
            for (; (RXMAX) >= 8 && i_ + 8 <= (a)->m; i_ += 8)                                      \
                FN(a, type, r_, i_, (RXMAX) >= 8 ? 8 : 2, 1);                                      \
            for (; (RXMAX) >= 4 && i_ + 4 <= (a)->m; i_ += 4) /* RX a valid count either way */  \
                FN(a, type, r_, i_, (RXMAX) >= 4 ? 4 : 2, 1);                                      \
            for (; i_ + 2 <= (a)->m; i_ += 2) FN(a, type, r_, i_, 2, 1);                           \
            for (; i_ < (a)->m; i_++) FN(a, type, r_, i_, 1, 1);                                   \
        }                                                                                          \
    } while (0)

KQ_INLINE int blk32_signed(const int type) { return type == RKM_TYPE_IQ4_NL || type == RKM_TYPE_MXFP4; }
KQ_INLINE int blk32_min(const int type) { return type == RKM_TYPE_Q4_1 || type == RKM_TYPE_Q5_1; }

KQ_INLINE float blk32_d(const int type, const uint8_t *b)
{
    return type == RKM_TYPE_MXFP4 ? rkm_e8m0_half(b[0]) : f16_at(b);
}

#endif
