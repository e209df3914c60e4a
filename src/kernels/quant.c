/*
 * quant.c - the type table and the scalar reference conversions between
 * f32 and every element type rkmojo reads or writes (layouts in quant.h):
 * the float types, the 32-value block types and the K-quants here, the IQ,
 * TQ and MXFP4 decoders in quant_iq.c, the searched quantizers (K-quants,
 * IQ4, MXFP4) in quantize_k.c. Each decoder computes in ggml's
 * order of float operations, so that it is bit-identical to ggml's
 * to_float (tests/test-ggml-types.c). The converter uses these; the
 * kernels' tests compare against them. Stateless; any thread.
 */
#include "kernels/quant.h"
#include "util/common.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *name;
    int block;
    size_t bytes;
    int readable;
} type_info;

static const type_info types[RKM_TYPE_COUNT] = {
    [RKM_TYPE_F32] = {"f32", 1, 4, 1},
    [RKM_TYPE_F16] = {"f16", 1, 2, 1},
    [RKM_TYPE_BF16] = {"bf16", 1, 2, 1},
    [RKM_TYPE_Q4_0] = {"q4_0", 32, 18, 1},
    [RKM_TYPE_Q4_1] = {"q4_1", 32, 20, 1},
    [RKM_TYPE_Q5_0] = {"q5_0", 32, 22, 1},
    [RKM_TYPE_Q5_1] = {"q5_1", 32, 24, 1},
    [RKM_TYPE_Q8_0] = {"q8_0", 32, 34, 1},
    [RKM_TYPE_Q8_1] = {"q8_1", 32, 36, 0},
    [RKM_TYPE_Q2_K] = {"q2_k", 256, 84, 1},
    [RKM_TYPE_Q3_K] = {"q3_k", 256, 110, 1},
    [RKM_TYPE_Q4_K] = {"q4_k", 256, 144, 1},
    [RKM_TYPE_Q5_K] = {"q5_k", 256, 176, 1},
    [RKM_TYPE_Q6_K] = {"q6_k", 256, 210, 1},
    [RKM_TYPE_Q8_K] = {"q8_k", 256, 292, 0},
    [RKM_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, 1},
    [RKM_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, 1},
    [RKM_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, 1},
    [RKM_TYPE_IQ1_S] = {"iq1_s", 256, 50, 1},
    [RKM_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, 1},
    [RKM_TYPE_IQ3_S] = {"iq3_s", 256, 110, 1},
    [RKM_TYPE_IQ2_S] = {"iq2_s", 256, 82, 1},
    [RKM_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, 1},
    [RKM_TYPE_IQ1_M] = {"iq1_m", 256, 56, 1},
    [RKM_TYPE_TQ1_0] = {"tq1_0", 256, 54, 1},
    [RKM_TYPE_TQ2_0] = {"tq2_0", 256, 66, 1},
    [RKM_TYPE_MXFP4] = {"mxfp4", 32, 17, 1},
    [RKM_TYPE_RKNN_I8] = {"rknn_i8", 32, 32, 0}, /* + 4 bytes of scale per row */
};

static const type_info *info(int type)
{
    if (type < 0 || type >= RKM_TYPE_COUNT || !types[type].name) return NULL;
    return &types[type];
}

/* The types with a packed layout (kernels.h) and the packed type's name. */
static const struct {
    int base;
    const char *name;
} packed_types[] = {
    {RKM_TYPE_Q8_0, "q8_0_x16"}, {RKM_TYPE_Q4_0, "q4_0_x16"}, {RKM_TYPE_MXFP4, "mxfp4_x16"},
    {RKM_TYPE_Q4_K, "q4_k_x16"}, {RKM_TYPE_Q5_K, "q5_k_x16"}, {RKM_TYPE_Q6_K, "q6_k_x16"},
    {RKM_TYPE_IQ4_NL, "iq4_nl_x16"}, {RKM_TYPE_IQ4_XS, "iq4_xs_x16"}, {RKM_TYPE_Q3_K, "q3_k_x16"},
    {RKM_TYPE_Q2_K, "q2_k_x16"},
};

int rkm_type_packed(int type)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(packed_types); i++)
        if (type == (packed_types[i].base | RKM_TYPE_PACKED)) return 1;
    return 0;
}

const char *rkm_type_name(int type)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(packed_types); i++)
        if (type == (packed_types[i].base | RKM_TYPE_PACKED)) return packed_types[i].name;
    const type_info *t = info(type);
    return t ? t->name : NULL;
}

int rkm_type_from_name(const char *name)
{
    if (!name) return -1;
    for (size_t i = 0; i < RKM_ARRAY_LEN(packed_types); i++)
        if (!strcasecmp(name, packed_types[i].name)) return packed_types[i].base | RKM_TYPE_PACKED;
    for (int i = 0; i < RKM_TYPE_COUNT; i++) {
        if (!types[i].name) continue;
        const char *a = types[i].name, *b = name;
        while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
        if (!*a && !*b) return i;
    }
    return -1;
}

int rkm_type_block_size(int type)
{
    const type_info *t = info(type);
    return t ? t->block : 0;
}

size_t rkm_type_block_bytes(int type)
{
    const type_info *t = info(type);
    return t ? t->bytes : 0;
}

size_t rkm_type_row_bytes(int type, int64_t n)
{
    if (rkm_type_packed(type)) type &= ~RKM_TYPE_PACKED;
    const type_info *t = info(type);
    if (!t || n < 0 || n % t->block) return 0;
    if (type == RKM_TYPE_RKNN_I8) return (size_t)n + 4; /* its row's f32 scale is stored after the matrix */
    return (size_t)(n / t->block) * t->bytes;
}

int rkm_type_readable(int type)
{
    const type_info *t = info(type);
    return t && t->readable;
}

int rkm_type_matmul(int type)
{
    if (rkm_type_packed(type)) return 1;
    switch (type) {
    case RKM_TYPE_F32:
    case RKM_TYPE_F16:
    case RKM_TYPE_BF16:
    case RKM_TYPE_Q8_0:
    case RKM_TYPE_Q4_0:
    case RKM_TYPE_Q4_1:
    case RKM_TYPE_Q5_0:
    case RKM_TYPE_Q5_1:
    case RKM_TYPE_Q2_K:
    case RKM_TYPE_Q3_K:
    case RKM_TYPE_Q4_K:
    case RKM_TYPE_Q5_K:
    case RKM_TYPE_Q6_K:
    case RKM_TYPE_IQ4_NL:
    case RKM_TYPE_IQ4_XS:
    case RKM_TYPE_MXFP4: return 1;
    default: return rkm_type_grid(type);
    }
}

int rkm_type_grid(int type)
{
    switch (type) {
    case RKM_TYPE_IQ1_S:
    case RKM_TYPE_IQ1_M:
    case RKM_TYPE_IQ2_XXS:
    case RKM_TYPE_IQ2_XS:
    case RKM_TYPE_IQ2_S:
    case RKM_TYPE_IQ3_XXS:
    case RKM_TYPE_IQ3_S: return 1;
    default: return 0;
    }
}

int64_t rkm_row_find_nonfinite(int type, const void *row, int64_t n)
{
    const uint8_t *p = row;
    switch (type) {
    case RKM_TYPE_F32:
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            if ((u & 0x7f800000u) == 0x7f800000u) return i;
        }
        return -1;
    case RKM_TYPE_F16:
    case RKM_TYPE_BF16: {
        const unsigned exp = type == RKM_TYPE_F16 ? 0x7c00u : 0x7f80u;
        for (int64_t i = 0; i < n; i++)
            if (((p[2 * i] | p[2 * i + 1] << 8) & exp) == exp) return i;
        return -1;
    }
    default: break;
    }
    /* offsets of a block's f16 scales (-1: none) */
    int at[2] = {-1, -1};
    switch (type) {
    case RKM_TYPE_Q4_0:
    case RKM_TYPE_Q5_0:
    case RKM_TYPE_Q8_0:
    case RKM_TYPE_IQ4_NL:
    case RKM_TYPE_IQ4_XS:
    case RKM_TYPE_IQ1_S:
    case RKM_TYPE_IQ2_XXS:
    case RKM_TYPE_IQ2_XS:
    case RKM_TYPE_IQ2_S:
    case RKM_TYPE_IQ3_XXS:
    case RKM_TYPE_IQ3_S: at[0] = 0; break;
    case RKM_TYPE_IQ1_M:
        /* the f16 scale is the top nibbles of the four u16 at 48 */
        for (int64_t b = 0; b < n / 256; b++) {
            const uint8_t *s = p + (size_t)b * 56 + 48;
            const unsigned dh = (unsigned)(s[1] >> 4) | (unsigned)(s[3] & 0xf0) | (unsigned)(s[5] >> 4) << 8 |
                                (unsigned)(s[7] & 0xf0) << 8;
            if ((dh & 0x7c00) == 0x7c00) return b * 256;
        }
        return -1;
    case RKM_TYPE_Q4_1:
    case RKM_TYPE_Q5_1:
    case RKM_TYPE_Q4_K:
    case RKM_TYPE_Q5_K: at[0] = 0, at[1] = 2; break;
    case RKM_TYPE_Q2_K: at[0] = 80, at[1] = 82; break;
    case RKM_TYPE_Q3_K: at[0] = 108; break;
    case RKM_TYPE_Q6_K: at[0] = 208; break;
    default: return -1;
    }
    const int bs = rkm_type_block_size(type);
    const size_t bb = rkm_type_block_bytes(type);
    for (int64_t b = 0; b < n / bs; b++)
        for (int k = 0; k < 2 && at[k] >= 0; k++) {
            const uint8_t *s = p + (size_t)b * bb + at[k];
            if (((s[0] | s[1] << 8) & 0x7c00) == 0x7c00) return b * bs;
        }
    return -1;
}

/* ------------------------------------------------------------ quantize */

/* A quant of the 32-value types with an offset (q4_0, q4_1, q5_0, q5_1): v + 0.5
 * truncated, as ggml's casts do on its range, limited to [0, top]; a NaN
 * (a block of infinities) gives 0 instead of ggml's undefined cast. */
static inline int offset_quant(float v, int top)
{
    return v >= (float)top ? top : v > 0.0f ? (int)v : 0;
}

/* roundf(v) as q8_0's int8, as ggml on finite input; a NaN (from a block
 * with infinities) gives 0 instead of an undefined cast. */
static inline int8_t q8_quant(float v)
{
    v = roundf(v);
    return (int8_t)(v >= 127.0f ? 127 : v <= -128.0f ? -128 : v == v ? (int)v : 0);
}

void rkm_quantize_row_q8_0(const float *x, rkm_block_q8_0 *y, int64_t n)
{
    for (int64_t b = 0; b < n / RKM_QK8_0; b++) {
        const float *xb = x + b * RKM_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < RKM_QK8_0; j++) amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127.0f;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = rkm_f32_to_f16(d);
        for (int j = 0; j < RKM_QK8_0; j++) y[b].qs[j] = q8_quant(xb[j] * id);
    }
}

void rkm_quantize_row_q4_0(const float *x, rkm_block_q4_0 *y, int64_t n)
{
    /* d = (value of largest magnitude) / -8, so that value maps exactly to
     * -8 and the 16 levels [-8, 7] are all used. */
    for (int64_t b = 0; b < n / RKM_QK4_0; b++) {
        const float *xb = x + b * RKM_QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < RKM_QK4_0; j++) {
            if (fabsf(xb[j]) > amax) {
                amax = fabsf(xb[j]);
                max = xb[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = rkm_f32_to_f16(d);
        for (int j = 0; j < RKM_QK4_0 / 2; j++) {
            const int q0 = offset_quant(xb[j] * id + 8.5f, 15), q1 = offset_quant(xb[j + RKM_QK4_0 / 2] * id + 8.5f, 15);
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}


/* The low nibbles of q[0..15] and q[16..31] into qs, the fifth bits into
 * the little-endian 32-bit qh (bit j of value j), as ggml's q5 layouts. */
static void pack_q5(const int *q, uint8_t *qh, uint8_t *qs)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
        h |= (uint32_t)((q[j] >> 4) & 1) << j;
        h |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
}

static void store_f16_le(uint8_t *p, float v)
{
    const rkm_f16 h = rkm_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* q4_1 and q5_1: the block's range over 2^bits - 1 steps from its min
 * (ggml's quantize_row_q4_1_ref / q5_1_ref). q4_1: f16 d, f16 m, qs[16];
 * q5_1: f16 d, f16 m, qh[4], qs[16]. */
static void quantize_row_min(int bits, const float *x, uint8_t *y, int64_t n)
{
    const int top = (1 << bits) - 1;
    const size_t bb = bits == 4 ? 20 : 24;
    for (int64_t b = 0; b < n / 32; b++, x += 32, y += bb) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < 32; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / (float)top;
        const float id = d ? 1.0f / d : 0.0f;
        store_f16_le(y, d);
        store_f16_le(y + 2, min);
        int q[32];
        for (int j = 0; j < 32; j++) q[j] = offset_quant((x[j] - min) * id + 0.5f, top);
        if (bits == 4)
            for (int j = 0; j < 16; j++) y[4 + j] = (uint8_t)(q[j] | (q[j + 16] << 4));
        else
            pack_q5(q, y + 4, y + 8);
    }
}

/* q5_0: as q4_0 with 32 levels, d = (value of largest magnitude) / -16
 * (ggml's quantize_row_q5_0_ref): f16 d, qh[4], qs[16]. */
static void quantize_row_q5_0(const float *x, uint8_t *y, int64_t n)
{
    for (int64_t b = 0; b < n / 32; b++, x += 32, y += 22) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -16.0f;
        const float id = d ? 1.0f / d : 0.0f;
        store_f16_le(y, d);
        int q[32];
        for (int j = 0; j < 32; j++) q[j] = offset_quant(x[j] * id + 16.5f, 31);
        pack_q5(q, y + 2, y + 6);
    }
}

/* Where a type's block keeps its f16 scale (and its values per block)
 * if its values are that scale times small integers; 0 if not one. */
static int exact_scale(int type, size_t *at, int *per)
{
    switch (type) {
    case RKM_TYPE_Q5_0: *at = 0, *per = 32; return 1;
    case RKM_TYPE_TQ1_0: *at = 52, *per = 256; return 1;
    case RKM_TYPE_TQ2_0: *at = 64, *per = 256; return 1;
    default: return 0;
    }
}

int rkm_type_q8_0_exact(int type)
{
    size_t at;
    int per;
    return exact_scale(type, &at, &per);
}

int rkm_quantize_row_q8_0_exact(int type, const void *src, const float *deq, rkm_block_q8_0 *y, int64_t n)
{
    size_t at;
    int per;
    if (!exact_scale(type, &at, &per)) return 0;
    const uint8_t *p = src;
    const size_t bb = rkm_type_block_bytes(type);
    for (int64_t b = 0; b < n / RKM_QK8_0; b++) {
        const uint8_t *sb = p + (size_t)(b * RKM_QK8_0 / per) * bb + at;
        const rkm_f16 dh = (rkm_f16)(sb[0] | (sb[1] << 8));
        const float d = rkm_f16_to_f32(dh);
        y[b].d = dh;
        for (int j = 0; j < RKM_QK8_0; j++) {
            const float v = deq[b * RKM_QK8_0 + j];
            const float q = v == 0.0f ? 0.0f : v / d;
            if (!(q >= -127.0f && q <= 127.0f) || q != (float)(int)q || d * (float)(int)q != v) return 0;
            y[b].qs[j] = (int8_t)(int)q;
        }
    }
    return 1;
}

void rkm_quantize_row(int type, const float *src, void *dst, int64_t n)
{
    switch (type) {
    case RKM_TYPE_F32: memcpy(dst, src, (size_t)n * 4); break;
    case RKM_TYPE_F16:
        for (int64_t i = 0; i < n; i++) ((rkm_f16 *)dst)[i] = rkm_f32_to_f16(src[i]);
        break;
    case RKM_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((rkm_bf16 *)dst)[i] = rkm_f32_to_bf16(src[i]);
        break;
    case RKM_TYPE_Q8_0: rkm_quantize_row_q8_0(src, dst, n); break;
    case RKM_TYPE_Q4_0: rkm_quantize_row_q4_0(src, dst, n); break;
    case RKM_TYPE_Q4_1: quantize_row_min(4, src, dst, n); break;
    case RKM_TYPE_Q5_0: quantize_row_q5_0(src, dst, n); break;
    case RKM_TYPE_Q5_1: quantize_row_min(5, src, dst, n); break;
    default:
        if (rkm_quantize_row_k(type, src, dst, n)) memset(dst, 0, rkm_type_row_bytes(type, n));
        break;
    }
}

/* ---------------------------------------------------------- dequantize */

/* 6-bit scale and min j of a q4_K/q5_K super-block (12 packed bytes). */
static void scale_min_k4(int j, const uint8_t *q, int *d, int *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* q2_K: scales[16] (low nibble scale, high nibble min, per 16 values),
 * qs[64] (2-bit quants, 4 per byte across 32-byte strips), f16 d, dmin.
 * x = d*scale*q - dmin*min. */
static void deq_q2_k(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b + 80), dmin = rkm_f16_le(b + 82);
    const uint8_t *sc = b, *q = b + 16;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2)
            for (int g = 0; g < 2; g++, sc++) {
                const float dl = d * (*sc & 0xF), ml = dmin * (*sc >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * ((q[16 * g + l] >> shift) & 3) - ml;
            }
}

/* q3_K: hmask[32] (third bit, one bit plane per 32-value group), qs[64]
 * (low 2 bits, as q2_K), scales[12] (16 6-bit scales: low nibbles in bytes
 * 0-7, high 2 bits in bytes 8-11), f16 d. x = d*(scale-32)*(q - 4 if the
 * hmask bit is clear). */
static void deq_q3_k(const uint8_t *b, float *y)
{
    const uint8_t *hm = b, *q = b + 32, *s = b + 96;
    const float d = rkm_f16_le(b + 108);
    int j = 0;
    uint8_t m = 1;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2, m <<= 1)
            for (int g = 0; g < 2; g++, j++) {
                int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4, hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
                const float dl = d * ((lo | hi << 4) - 32);
                for (int l = 0; l < 16; l++)
                    *y++ = dl * (((q[16 * g + l] >> shift) & 3) - ((hm[16 * g + l] & m) ? 0 : 4));
            }
}

static void deq_q4_k(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b), dmin = rkm_f16_le(b + 2);
    const uint8_t *sc = b + 4, *q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
        int s1, m1, s2, m2;
        scale_min_k4(is, sc, &s1, &m1);
        scale_min_k4(is + 1, sc, &s2, &m2);
        for (int l = 0; l < 32; l++) *y++ = d * s1 * (q[l] & 0xF) - dmin * m1;
        for (int l = 0; l < 32; l++) *y++ = d * s2 * (q[l] >> 4) - dmin * m2;
    }
}

static void deq_q5_k(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b), dmin = rkm_f16_le(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *ql = b + 48;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
        int s1, m1, s2, m2;
        scale_min_k4(is, sc, &s1, &m1);
        scale_min_k4(is + 1, sc, &s2, &m2);
        for (int l = 0; l < 32; l++) *y++ = d * s1 * ((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - dmin * m1;
        for (int l = 0; l < 32; l++) *y++ = d * s2 * ((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - dmin * m2;
    }
}

static void deq_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = rkm_f16_le(b + 208);
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
        }
    }
}

void rkm_dequantize_row(int type, const void *src, float *y, int64_t n)
{
    const uint8_t *p = src;
    switch (type) {
    case RKM_TYPE_F32: memcpy(y, src, (size_t)n * 4); return;
    case RKM_TYPE_F16:
        for (int64_t i = 0; i < n; i++) y[i] = rkm_f16_le(p + 2 * i);
        return;
    case RKM_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) y[i] = rkm_bf16_to_f32((rkm_bf16)(p[2 * i] | (p[2 * i + 1] << 8)));
        return;
    default: break;
    }
    const int bs = rkm_type_block_size(type);
    const size_t bb = rkm_type_block_bytes(type);
    if (!bs) { /* unknown type: callers check readability; never divide by 0 */
        for (int64_t i = 0; i < n; i++) y[i] = 0.0f;
        return;
    }
    for (int64_t b = 0; b < n / bs; b++, p += bb, y += bs) {
        switch (type) {
        case RKM_TYPE_Q8_0: {
            const float d = rkm_f16_le(p);
            for (int j = 0; j < 32; j++) y[j] = d * (int8_t)p[2 + j];
            break;
        }
        case RKM_TYPE_Q4_0: {
            const float d = rkm_f16_le(p);
            for (int j = 0; j < 16; j++) {
                y[j] = d * ((p[2 + j] & 0xF) - 8);
                y[j + 16] = d * ((p[2 + j] >> 4) - 8);
            }
            break;
        }
        case RKM_TYPE_Q4_1: {
            const float d = rkm_f16_le(p), m = rkm_f16_le(p + 2);
            for (int j = 0; j < 16; j++) {
                y[j] = d * (p[4 + j] & 0xF) + m;
                y[j + 16] = d * (p[4 + j] >> 4) + m;
            }
            break;
        }
        case RKM_TYPE_Q5_0:
        case RKM_TYPE_Q5_1: {
            const int has_m = type == RKM_TYPE_Q5_1;
            const float d = rkm_f16_le(p), m = has_m ? rkm_f16_le(p + 2) : 0.0f;
            const uint8_t *qhp = p + (has_m ? 4 : 2), *qs = qhp + 4;
            uint32_t qh = (uint32_t)qhp[0] | ((uint32_t)qhp[1] << 8) | ((uint32_t)qhp[2] << 16) | ((uint32_t)qhp[3] << 24);
            const int off = has_m ? 0 : 16;
            for (int j = 0; j < 16; j++) {
                int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
                int q0 = ((qs[j] & 0xF) | h0) - off, q1 = ((qs[j] >> 4) | h1) - off;
                /* q5_0 adds no min: d * 0 stays -0 for a negative d, as in ggml */
                y[j] = has_m ? d * q0 + m : d * q0;
                y[j + 16] = has_m ? d * q1 + m : d * q1;
            }
            break;
        }
        case RKM_TYPE_Q2_K: deq_q2_k(p, y); break;
        case RKM_TYPE_Q3_K: deq_q3_k(p, y); break;
        case RKM_TYPE_Q4_K: deq_q4_k(p, y); break;
        case RKM_TYPE_Q5_K: deq_q5_k(p, y); break;
        case RKM_TYPE_Q6_K: deq_q6_k(p, y); break;
        default:
            if (rkm_dequantize_block_iq(type, p, y))
                for (int j = 0; j < bs; j++) y[j] = 0.0f;
            break;
        }
    }
}
