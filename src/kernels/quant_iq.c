/*
 * quant_iq.c - scalar decoders of ggml's grid and non-linear types (IQ1_S,
 * IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS), its
 * ternary types (TQ1_0, TQ2_0) and MXFP4, one block at a time, reached
 * through rkm_dequantize_row (quant.c). The grids and levels are the
 * generated quant_tables.c. Each block layout (little-endian, offsets in
 * bytes) is written above its decoder; every value is computed in ggml's
 * order of float operations, so the floats are bit-identical to ggml's
 * to_float, NaN and infinite scales included (tests/test-ggml-types.c).
 * Any bytes are valid input: indices are masked to their table's size.
 * Stateless; any thread.
 */
#include "kernels/quant.h"
#include "kernels/quant_tables.h"

#include <string.h>

/* v with sign bit j of signs applied, as a negation: ggml writes a multiply
 * by a selected -1.f, which its build compiles to a sign flip, NaNs
 * included; a multiply here would keep a NaN's sign at some optimization
 * levels and not at others. */
static inline float sgn(float v, unsigned signs, int j)
{
    return signs & (1u << j) ? -v : v;
}

/* IQ2_XXS (66): f16 d; per 32 values 8 bytes: 4 grid indices (8 bits),
 * then a u32 of 4 x 7 sign bits and a 4-bit scale s (top bits).
 * x = d*(0.5+s)*0.25 * grid * sign. */
static void deq_iq2_xxs(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *g = b + 2 + 8 * ib;
        const uint32_t aux = rkm_le32(g + 4);
        const float db = d * (0.5f + (aux >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++, y += 8) {
            const uint8_t *grid = rkm_iq2xxs_grid[g[l]];
            const unsigned s = rkm_iq_signs8((aux >> 7 * l) & 127);
            for (int j = 0; j < 8; j++) y[j] = sgn(db * grid[j], s, j);
        }
    }
}

/* IQ2_XS (74): f16 d; qs u16[32] (9-bit grid index | 7 sign bits << 9);
 * scales[8] (two 4-bit scales per 32 values, one per 16). */
static void deq_iq2_xs(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t sc = b[66 + ib];
        const float db[2] = {d * (0.5f + (sc & 0xf)) * 0.25f, d * (0.5f + (sc >> 4)) * 0.25f};
        for (int l = 0; l < 4; l++, y += 8) {
            const unsigned q = rkm_le16(b + 2 + 2 * (4 * ib + l));
            const uint8_t *grid = rkm_iq2xs_grid[q & 511];
            const unsigned s = rkm_iq_signs8(q >> 9);
            for (int j = 0; j < 8; j++) y[j] = sgn(db[l / 2] * grid[j], s, j);
        }
    }
}

/* IQ2_S (82): f16 d; qs[32] low 8 index bits, signs[32] (8 explicit sign
 * bits per 8 values), qh[8] (2 high index bits per index), scales[8]. */
static void deq_iq2_s(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b);
    const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
    for (int ib = 0; ib < 8; ib++, qs += 4, signs += 4) {
        const float db[2] = {d * (0.5f + (scales[ib] & 0xf)) * 0.25f, d * (0.5f + (scales[ib] >> 4)) * 0.25f};
        for (int l = 0; l < 4; l++, y += 8) {
            const uint8_t *grid = rkm_iq2s_grid[qs[l] | ((qh[ib] >> (2 * l)) & 3) << 8];
            for (int j = 0; j < 8; j++) y[j] = sgn(db[l / 2] * grid[j], signs[l], j);
        }
    }
}

/* IQ3_XXS (98): f16 d; qs[64] grid indices (4 values each); per 32 values
 * a u32 of 4 x 7 sign bits and a 4-bit scale s. x = d*(0.5+s)*0.5 * ... */
static void deq_iq3_xxs(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b);
    const uint8_t *qs = b + 2;
    for (int ib = 0; ib < 8; ib++, qs += 8) {
        const uint32_t aux = rkm_le32(b + 66 + 4 * ib);
        const float db = d * (0.5f + (aux >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++, y += 8) {
            const unsigned s = rkm_iq_signs8((aux >> 7 * l) & 127);
            const uint8_t *g1 = rkm_iq3xxs_grid[qs[2 * l]], *g2 = rkm_iq3xxs_grid[qs[2 * l + 1]];
            for (int j = 0; j < 4; j++) {
                y[j] = sgn(db * g1[j], s, j);
                y[j + 4] = sgn(db * g2[j], s, j + 4);
            }
        }
    }
}

/* IQ3_S (110): f16 d; qs[64] low index bits; qh[8] (9th bit of the 8
 * indices of 32 values); signs[32]; scales[4] (4-bit s per 32 values,
 * x = d*(1+2s) * grid * sign). */
static void deq_iq3_s(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b);
    const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
    for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4) {
        const int s = ib % 2 ? scales[ib / 2] >> 4 : scales[ib / 2] & 0xf;
        const float db = d * (1 + 2 * s);
        for (int l = 0; l < 4; l++, y += 8) {
            const uint8_t *g1 = rkm_iq3s_grid[qs[2 * l] | ((qh[ib] >> (2 * l)) & 1) << 8];
            const uint8_t *g2 = rkm_iq3s_grid[qs[2 * l + 1] | ((qh[ib] >> (2 * l + 1)) & 1) << 8];
            for (int j = 0; j < 4; j++) {
                y[j] = sgn(db * g1[j], signs[l], j);
                y[j + 4] = sgn(db * g2[j], signs[l], j + 4);
            }
        }
    }
}

/* IQ1_S (50): f16 d; qs[32] low 8 bits of 11-bit grid indices; qh u16[8],
 * per 32 values: 4 x 3 high index bits, a 3-bit scale s (bits 12-14) and
 * the sign of the offset (bit 15). x = d*(2s+1) * (grid + offset). */
static void deq_iq1_s(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b);
    const uint8_t *qs = b + 2;
    for (int ib = 0; ib < 8; ib++, qs += 4) {
        const unsigned qh = rkm_le16(b + 34 + 2 * ib);
        const float dl = d * (2 * ((qh >> 12) & 7) + 1);
        const float delta = qh & 0x8000 ? -rkm_iq1s_delta : rkm_iq1s_delta;
        for (int l = 0; l < 4; l++, y += 8) {
            const int8_t *grid = rkm_iq1s_grid[qs[l] | ((qh >> 3 * l) & 7) << 8];
            for (int j = 0; j < 8; j++) y[j] = dl * (grid[j] + delta);
        }
    }
}

/* IQ1_M (56): qs[32] low index bits; qh[16] (per 8 values 3 high index
 * bits and an offset sign, two groups a byte); scales u16[4]: per 16
 * values a 3-bit scale s, and in the top nibbles of the four u16 the f16
 * d. x = d*(2s+1) * (grid + offset). */
static void deq_iq1_m(const uint8_t *b, float *y)
{
    const uint8_t *qs = b, *qh = b + 32;
    unsigned sc[4];
    for (int i = 0; i < 4; i++) sc[i] = rkm_le16(b + 48 + 2 * i);
    const float d = rkm_f16_to_f32((rkm_f16)((sc[0] >> 12) | ((sc[1] >> 8) & 0xf0) | ((sc[2] >> 4) & 0xf00) | (sc[3] & 0xf000)));
    for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
        const float dl[2] = {d * (2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1),
                             d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1)};
        for (int l = 0; l < 4; l++, y += 8) {
            const unsigned h = l % 2 ? qh[l / 2] >> 4 : qh[l / 2] & 0xf;
            const int8_t *grid = rkm_iq1s_grid[qs[l] | (h & 7) << 8];
            const float delta = h & 8 ? -rkm_iq1s_delta : rkm_iq1s_delta;
            for (int j = 0; j < 8; j++) y[j] = dl[l / 2] * (grid[j] + delta);
        }
    }
}

/* IQ4_NL (18): f16 d; qs[16]: value j is level qs[j] & 15, value j+16 is
 * qs[j] >> 4. x = d * level. */
static void deq_iq4_nl(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * rkm_kvalues_iq4nl[b[2 + j] & 0xf];
        y[j + 16] = d * rkm_kvalues_iq4nl[b[2 + j] >> 4];
    }
}

/* IQ4_XS (136): f16 d; u16 scales_h (2 high bits per 32 values);
 * scales_l[4] (4 low bits per 32 values); qs[128] as IQ4_NL per 32 values.
 * x = d*(scale-32) * level. */
static void deq_iq4_xs(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b);
    const unsigned sh = rkm_le16(b + 2);
    const uint8_t *qs = b + 8;
    for (int ib = 0; ib < 8; ib++, qs += 16, y += 32) {
        const int ls = ((b[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | ((sh >> 2 * ib) & 3) << 4;
        const float dl = d * (ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * rkm_kvalues_iq4nl[qs[j] & 0xf];
            y[j + 16] = dl * rkm_kvalues_iq4nl[qs[j] >> 4];
        }
    }
}

/* TQ1_0 (54): qs[48] (5 trits a byte as a base-3 fraction of 256: trit n
 * is the top trit of byte*3^n), qh[4] (4 trits a byte), f16 d. The first
 * 32 bytes give 5 x 32 values, the next 16 bytes 5 x 16, qh 4 x 4.
 * x = (trit - 1) * d. */
static float trit(uint8_t byte, int n)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t q = (uint8_t)(byte * pow3[n]);
    return (float)((int)((unsigned)q * 3 >> 8) - 1);
}

static void deq_tq1_0(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b + 52);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++) *y++ = trit(b[m], n) * d;
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++) *y++ = trit(b[32 + m], n) * d;
    for (int n = 0; n < 4; n++)
        for (int m = 0; m < 4; m++) *y++ = trit(b[48 + m], n) * d;
}

/* TQ2_0 (66): qs[64] (2-bit q, 4 per byte across 32-byte strips), f16 d.
 * x = (q - 1) * d. */
static void deq_tq2_0(const uint8_t *b, float *y)
{
    const float d = rkm_f16_le(b + 64);
    for (int j = 0; j < 64; j += 32)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++) *y++ = (float)(((b[j + m] >> (2 * l)) & 3) - 1) * d;
}

/* MXFP4 (17): E8M0 exponent e, qs[16] as IQ4_NL with the e2m1 levels.
 * x = level * 2^(e-128) (the levels are stored doubled). */
static void deq_mxfp4(const uint8_t *b, float *y)
{
    const float d = rkm_e8m0_half(b[0]);
    for (int j = 0; j < 16; j++) {
        y[j] = rkm_kvalues_mxfp4[b[1 + j] & 0xf] * d;
        y[j + 16] = rkm_kvalues_mxfp4[b[1 + j] >> 4] * d;
    }
}

int rkm_dequantize_block_iq(int type, const uint8_t *b, float *y)
{
    switch (type) {
    case RKM_TYPE_IQ2_XXS: deq_iq2_xxs(b, y); return 0;
    case RKM_TYPE_IQ2_XS: deq_iq2_xs(b, y); return 0;
    case RKM_TYPE_IQ2_S: deq_iq2_s(b, y); return 0;
    case RKM_TYPE_IQ3_XXS: deq_iq3_xxs(b, y); return 0;
    case RKM_TYPE_IQ3_S: deq_iq3_s(b, y); return 0;
    case RKM_TYPE_IQ1_S: deq_iq1_s(b, y); return 0;
    case RKM_TYPE_IQ1_M: deq_iq1_m(b, y); return 0;
    case RKM_TYPE_IQ4_NL: deq_iq4_nl(b, y); return 0;
    case RKM_TYPE_IQ4_XS: deq_iq4_xs(b, y); return 0;
    case RKM_TYPE_TQ1_0: deq_tq1_0(b, y); return 0;
    case RKM_TYPE_TQ2_0: deq_tq2_0(b, y); return 0;
    case RKM_TYPE_MXFP4: deq_mxfp4(b, y); return 0;
    default: return -1;
    }
}
