/*
 * pack.c - the packed ("interleaved rows") layout of q8_0 / q4_0 / MXFP4 / IQ4_NL / Q4_K / Q5_K / Q6_K / IQ4_XS weight
 * matrices (layout in kernels.h): type helpers and the in-place repack
 * from the plain GGUF layout, which the model loader runs on resident
 * matrices and the expert cache on each expert blob of a model stored
 * plain, and the converter on each expert it writes; and the inverse, for
 * readers that want plain rows (the tests' float64 reference).
 *
 * Threads: stateless; rkm_pack_rows may run on any thread (the expert
 * cache calls it on its IO threads) on memory nobody else touches yet.
 * Ownership: rkm_pack_rows allocates one group's worth of temporary
 * bytes and frees it before returning.
 */
#include "kernels/kernels_impl.h"
#include "util/common.h"

int rkm_pack_type(int type, int64_t n_out)
{
    if (rkm_pk_block(type) && n_out >= RKM_PACK_ROWS) return type | RKM_TYPE_PACKED;
    return type;
}

int rkm_unpack_type(int type) { return type & ~RKM_TYPE_PACKED; }

/* 4 rows x 4 words (16 bytes at p[k]) -> 4 x 16 bytes at o + 64 h: word h
 * of the 4 rows. With the baseline vector unit of the architecture (SSE2,
 * NEON: no extra flags), as the expert cache packs every blob it reads. */
#if defined(__x86_64__)
#include <emmintrin.h>
static void transpose4(const uint8_t *const p[4], uint8_t *o)
{
    __m128i r0 = _mm_loadu_si128((const __m128i *)p[0]), r1 = _mm_loadu_si128((const __m128i *)p[1]);
    __m128i r2 = _mm_loadu_si128((const __m128i *)p[2]), r3 = _mm_loadu_si128((const __m128i *)p[3]);
    __m128i a = _mm_unpacklo_epi32(r0, r1), b = _mm_unpackhi_epi32(r0, r1);
    __m128i c = _mm_unpacklo_epi32(r2, r3), d = _mm_unpackhi_epi32(r2, r3);
    _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi64(a, c));
    _mm_storeu_si128((__m128i *)(o + 64), _mm_unpackhi_epi64(a, c));
    _mm_storeu_si128((__m128i *)(o + 128), _mm_unpacklo_epi64(b, d));
    _mm_storeu_si128((__m128i *)(o + 192), _mm_unpackhi_epi64(b, d));
}
#elif defined(__aarch64__)
#include <arm_neon.h>
static void transpose4(const uint8_t *const p[4], uint8_t *o)
{
    uint32x4_t r0 = vreinterpretq_u32_u8(vld1q_u8(p[0])), r1 = vreinterpretq_u32_u8(vld1q_u8(p[1]));
    uint32x4_t r2 = vreinterpretq_u32_u8(vld1q_u8(p[2])), r3 = vreinterpretq_u32_u8(vld1q_u8(p[3]));
    uint32x4_t a = vtrn1q_u32(r0, r1), b = vtrn2q_u32(r0, r1), c = vtrn1q_u32(r2, r3), d = vtrn2q_u32(r2, r3);
    vst1q_u8(o, vreinterpretq_u8_u64(vtrn1q_u64(vreinterpretq_u64_u32(a), vreinterpretq_u64_u32(c))));
    vst1q_u8(o + 64, vreinterpretq_u8_u64(vtrn1q_u64(vreinterpretq_u64_u32(b), vreinterpretq_u64_u32(d))));
    vst1q_u8(o + 128, vreinterpretq_u8_u64(vtrn2q_u64(vreinterpretq_u64_u32(a), vreinterpretq_u64_u32(c))));
    vst1q_u8(o + 192, vreinterpretq_u8_u64(vtrn2q_u64(vreinterpretq_u64_u32(b), vreinterpretq_u64_u32(d))));
}
#else
static void transpose4(const uint8_t *const p[4], uint8_t *o)
{
    for (int k = 0; k < 4; k++)
        for (int h = 0; h < 4; h++) memcpy(o + 64 * h + 4 * k, p[k] + 4 * h, 4);
}
#endif

/* One group: src = 16 plain rows of rb bytes, dst = the packed group.
 * A plain block is its scale (sb bytes) then its qs; the packed block
 * the 16 scales, then the parts. */
/* The block head of row r to and from its place in the packed head
 * (kernels.h: field by field, 16 rows each): two 2-byte fields, then n
 * scale bytes. Q4_K / Q5_K: d, dmin, 12 scale bytes; IQ4_XS: d,
 * scales_h, the 4 scales_l bytes. */
static void k_head_pack(uint8_t *o, const uint8_t *row, int r, int n)
{
    memcpy(o + 2 * r, row, 2);
    memcpy(o + 32 + 2 * r, row + 2, 2);
    for (int k = 0; k < n; k++) o[64 + 16 * k + r] = row[4 + k];
}

static void k_head_unpack(uint8_t *row, const uint8_t *o, int r, int n)
{
    memcpy(row, o + 2 * r, 2);
    memcpy(row + 2, o + 32 + 2 * r, 2);
    for (int k = 0; k < n; k++) row[4 + k] = o[64 + 16 * k + r];
}

/* Q6_K's: d (plain bytes 208..209), then its 16 scale bytes (192..207). */
static void k6_head_pack(uint8_t *o, const uint8_t *row, int r)
{
    memcpy(o + 2 * r, row + 208, 2);
    for (int k = 0; k < 16; k++) o[32 + 16 * k + r] = row[192 + k];
}

static void k6_head_unpack(uint8_t *row, const uint8_t *o, int r)
{
    memcpy(row + 208, o + 2 * r, 2);
    for (int k = 0; k < 16; k++) row[192 + k] = o[32 + 16 * k + r];
}

static void pack_group(int type, uint8_t *dst, const uint8_t *src, size_t rb, int64_t nb)
{
    const size_t bb = rkm_type_block_bytes(type), sb = rkm_pk_scale_bytes(type), hb = RKM_PACK_ROWS * sb;
    const size_t wa = rkm_pk_words_at(type);
    const int words = (int)(bb - sb) / 4; /* 4-byte words of a block's quants: 4, 8, 32 or 48 */
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * rkm_pk_block(type);
        for (int r = 0; r < RKM_PACK_ROWS; r++) {
            const uint8_t *row = src + (size_t)r * rb + (size_t)b * bb;
            if (type == RKM_TYPE_Q4_K || type == RKM_TYPE_Q5_K) k_head_pack(o, row, r, 12);
            else if (type == RKM_TYPE_IQ4_XS) k_head_pack(o, row, r, 4);
            else if (type == RKM_TYPE_Q6_K) k6_head_pack(o, row, r);
            else memcpy(o + sb * r, row, sb);
        }
        for (int w4 = 0; w4 < words; w4 += 4) /* parts w4..w4+3: words w4..w4+3 */
            for (int qd = 0; qd < RKM_PACK_ROWS / 4; qd++) {
                const uint8_t *p[4];
                for (int k = 0; k < 4; k++) p[k] = src + (size_t)(4 * qd + k) * rb + (size_t)b * bb + wa + 4 * w4;
                transpose4(p, o + hb + 64 * w4 + 16 * qd);
            }
    }
}

void rkm_pk_unpack_row(int type, const uint8_t *o, int r, uint8_t *row)
{
    const size_t sb = rkm_pk_scale_bytes(type), hb = RKM_PACK_ROWS * sb, wa = rkm_pk_words_at(type);
    const int words = (int)(rkm_type_block_bytes(type) - sb) / 4; /* 4-byte words of a block's quants */
    if (type == RKM_TYPE_Q4_K || type == RKM_TYPE_Q5_K) k_head_unpack(row, o, r, 12);
    else if (type == RKM_TYPE_IQ4_XS) k_head_unpack(row, o, r, 4);
    else if (type == RKM_TYPE_Q6_K) k6_head_unpack(row, o, r);
    else memcpy(row, o + sb * r, sb);
    for (int h = 0; h < words; h++) memcpy(row + wa + 4 * h, o + hb + 64 * h + 4 * r, 4);
}

/* One group back: src = the packed group, dst = 16 plain rows. */
static void unpack_group(int type, uint8_t *dst, const uint8_t *src, size_t rb, int64_t nb)
{
    const size_t bb = rkm_type_block_bytes(type);
    for (int64_t b = 0; b < nb; b++)
        for (int r = 0; r < RKM_PACK_ROWS; r++)
            rkm_pk_unpack_row(type, src + (size_t)b * rkm_pk_block(type), r, dst + (size_t)r * rb + (size_t)b * bb);
}

typedef void (*group_fn)(int type, uint8_t *dst, const uint8_t *src, size_t rb, int64_t nb);

/* Rewrites each whole group of 16 rows in place through one group's
 * temporary copy (what = "pack" / "unpack" for the messages). */
static int regroup(int type, void *w, int64_t n_in, int64_t n_out, group_fn fn, const char *what)
{
    if (!rkm_pk_block(type) || n_in % rkm_pk_values(type))
        return rkm_err(RKM_EINVAL, "%s: type %d with %lld columns cannot be packed", what, type, (long long)n_in);
    size_t rb = rkm_type_row_bytes(type, n_in), gb = rb * RKM_PACK_ROWS;
    int64_t n_groups = n_out / RKM_PACK_ROWS;
    if (n_groups <= 0) return 0;
    uint8_t *tmp = malloc(gb);
    if (!tmp) return rkm_err(RKM_ENOMEM, "%s: out of memory", what);
    for (int64_t g = 0; g < n_groups; g++) {
        uint8_t *p = (uint8_t *)w + (size_t)g * gb;
        memcpy(tmp, p, gb);
        fn(type, p, tmp, rb, n_in / rkm_pk_values(type));
    }
    free(tmp);
    return 0;
}

int rkm_pack_rows(int type, void *w, int64_t n_in, int64_t n_out)
{
    return regroup(type, w, n_in, n_out, pack_group, "pack");
}

int rkm_unpack_rows(int type, void *w, int64_t n_in, int64_t n_out)
{
    return regroup(type, w, n_in, n_out, unpack_group, "unpack");
}
