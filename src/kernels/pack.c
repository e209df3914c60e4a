/*
 * pack.c - the packed ("interleaved rows") layout of q8_0 / q4_0 / MXFP4 / IQ4_NL / Q2_K..Q6_K / IQ4_XS weight
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

/* Each packable type's block head: its fields in the plain block (byte
 * offset, bytes per item, items), laid out in the packed head in this
 * order, each item for the 16 rows together (kernels.h); and where the
 * plain block's quant words start (they run to the end of the block, or
 * up to the head when it comes last). */
typedef struct {
    uint8_t at, size, n;
} head_field;

static const struct {
    int type;
    uint8_t words_at;
    head_field f[3];
} heads[] = {
    {RKM_TYPE_Q8_0, 2, {{0, 2, 1}}},
    {RKM_TYPE_Q4_0, 2, {{0, 2, 1}}},
    {RKM_TYPE_IQ4_NL, 2, {{0, 2, 1}}},
    {RKM_TYPE_MXFP4, 1, {{0, 1, 1}}},
    {RKM_TYPE_Q4_K, 16, {{0, 2, 1}, {2, 2, 1}, {4, 1, 12}}},   /* d, dmin, scale bytes */
    {RKM_TYPE_Q5_K, 16, {{0, 2, 1}, {2, 2, 1}, {4, 1, 12}}},   /* the same; qh then qs as words */
    {RKM_TYPE_Q6_K, 0, {{208, 2, 1}, {192, 1, 16}}},           /* d, int8 scales; ql, qh */
    {RKM_TYPE_IQ4_XS, 8, {{0, 2, 1}, {2, 2, 1}, {4, 1, 4}}},   /* d, scales_h, scales_l */
    {RKM_TYPE_Q3_K, 0, {{108, 2, 1}, {96, 1, 12}}},            /* d, scale bytes; hmask, qs */
    {RKM_TYPE_Q2_K, 16, {{80, 2, 1}, {82, 2, 1}, {0, 1, 16}}}, /* d, dmin, scale bytes */
};

static int head_of(int type)
{
    for (int i = 0; i < (int)RKM_ARRAY_LEN(heads); i++)
        if (heads[i].type == type) return i;
    return -1;
}

size_t rkm_pk_scale_bytes(int type)
{
    int h = head_of(type);
    size_t n = 0;
    for (int f = 0; h >= 0 && f < 3; f++) n += (size_t)heads[h].f[f].size * heads[h].f[f].n;
    return n;
}

/* Row r's head between its plain block (row) and the packed head (o):
 * to_packed 1 packs, 0 unpacks. */
static void head_move(int h, uint8_t *o, uint8_t *row, int r, int to_packed)
{
    size_t at = 0;
    for (int f = 0; f < 3 && heads[h].f[f].n; f++) {
        const head_field *hf = &heads[h].f[f];
        for (int k = 0; k < hf->n; k++, at += (size_t)RKM_PACK_ROWS * hf->size) {
            uint8_t *p = o + at + (size_t)hf->size * r, *q = row + hf->at + (size_t)hf->size * k;
            if (to_packed) memcpy(p, q, hf->size);
            else memcpy(q, p, hf->size);
        }
    }
}

/* One group: src = 16 plain rows of rb bytes, dst = the packed group. */
static void pack_group(int type, uint8_t *dst, const uint8_t *src, size_t rb, int64_t nb)
{
    const int hd = head_of(type);
    const size_t bb = rkm_type_block_bytes(type), sb = rkm_pk_scale_bytes(type), hb = RKM_PACK_ROWS * sb;
    const size_t wa = heads[hd].words_at;
    const int words = (int)(bb - sb) / 4; /* 4-byte words of a block's quants: 4 to 48 */
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * rkm_pk_block(type);
        for (int r = 0; r < RKM_PACK_ROWS; r++) head_move(hd, o, (uint8_t *)(src + (size_t)r * rb + (size_t)b * bb), r, 1);
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
    const int hd = head_of(type);
    const size_t sb = rkm_pk_scale_bytes(type), hb = RKM_PACK_ROWS * sb, wa = heads[hd].words_at;
    const int words = (int)(rkm_type_block_bytes(type) - sb) / 4; /* 4-byte words of a block's quants */
    head_move(hd, (uint8_t *)o, row, r, 0);
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
