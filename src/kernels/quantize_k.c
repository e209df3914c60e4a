/*
 * quantize_k.c - f32 rows to ggml's searched block types: the K-quants
 * Q2_K..Q6_K, the non-linear IQ4_NL and IQ4_XS, and MXFP4, without an
 * importance matrix, in ggml's byte layouts (written next to each decoder
 * in quant.c and quant_iq.c). Reached through rkm_quantize_row.
 *
 * The searches are ggml's, as its ggml_quantize_chunk runs them when given
 * no importance matrix (ggml-quants.c; re-derived here, not copied), and
 * every float operation is done in ggml's order, so that for finite inputs
 * in a type's range the bytes equal ggml's (tests/test-quantize.c):
 *   - Q2_K, Q4_K, Q5_K: per sub-block a fit x ~ scale*q - min over a few
 *     trial scales (fit_scale_min), then the scales and mins as 4- or 6-bit
 *     multiples of one f16 pair, then every value re-rounded on its grid;
 *   - Q3_K, Q6_K: a signed scale per 16 values (fit_q3: greedy changes of
 *     one quant at a time; fit_q6: 18 more trial scales), then 6- or 8-bit
 *     multiples of one f16 d;
 *   - IQ4_NL, IQ4_XS: 15 trial scales onto the 16 non-linear levels per 32
 *     values, x^2 as the weights (IQ4_XS: then 6-bit sub-scales);
 *   - MXFP4: the OCP shared exponent floor(log2(amax)) - 2, each value to
 *     its nearest e2m1 level.
 * Where ggml's arithmetic leaves its domain this file departs from it on
 * purpose, so that no input is undefined behaviour and every finite input
 * decodes to finite values: rounding clamps to +-(2^22 - 1) (ggml's
 * float-adder rounding is garbage beyond, and maps inf to the lowest
 * level), a scale past the f16 range is stored as +-65504 instead of inf
 * and a NaN scale as 0, a sub-scale is clamped to its field instead of
 * wrapping, MXFP4's exponent is clamped to [0, 254] (ggml casts a
 * negative float to uint8_t for amax < 2^-125), and no float is divided
 * by zero (ggml does, when a range overflows to inf). As in ggml,
 * accuracy drops outside the range of the f16 scales: for gaussian rows
 * of standard deviation above ~1e5 (the x^2-weighted sums of the IQ4
 * search overflow, Q2_K's d saturates), and below ~1e-3 for Q6_K and
 * IQ4_XS, ~1e-4 for the others (the super-scale d goes subnormal);
 * MXFP4's exponent covers all floats.
 *
 * Stateless, no globals: any thread; deterministic (the only libm calls
 * are sqrtf, floorf and log2f, as in ggml).
 */
#include "kernels/quant.h"
#include "kernels/quant_tables.h"

#include <math.h>
#include <string.h>

/* Sub-blocks whose largest magnitude is below this are all zero (ggml's
 * GROUP_MAX_EPS). */
#define ZERO_EPS 1e-15f

/* Round half to even through the float adder (ggml's nearest_int), with
 * the argument clamped to where that is exact; NaN rounds to 0. */
static inline int round_int(float v)
{
    if (v != v) return 0;
    if (v > 4194303.f) v = 4194303.f;
    if (v < -4194303.f) v = -4194303.f;
    const float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Stores v as the f16 at p (saturated: see the header) and returns the
 * stored value as a float. */
static float store_f16(uint8_t *p, float v)
{
    if (v != v) v = 0.0f;
    if (v >= 65520.f) v = 65504.f; /* from 65520 on, f16 rounds to inf */
    if (v <= -65520.f) v = -65504.f;
    const rkm_f16 h = rkm_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
    return rkm_f16_to_f32(h);
}

/* Value j of a 2-bit array of 256 (Q2_K, Q3_K's low bits): byte 32*(j/128)
 * + j%32, bits 2*((j/32)%4). */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < 256; j += 128, qs += 32)
        for (int l = 0; l < 32; l++)
            qs[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* ------------------------------------------------- scale + min (Q2/4/5_K) */

static inline float fit_err(float diff, int mad)
{
    return mad ? fabsf(diff) : diff * diff;
}

/* Fits the n (<= 32) values x ~ scale*L - min, L in [0, nmax], min >= 0,
 * minimizing the w-weighted squared error (mad: absolute error). Starts
 * from the grid spanning [min(x, 0), max(x)], then tries the scales
 * (rmin + rdelta*k + nmax) / range for k = 0..nstep, each with the least
 * squares scale and min of its rounding. Returns the scale; *min_out gets
 * min. ggml's make_qkx2_quants. */
static float fit_scale_min(const float *x, const float *w, int n, int nmax, float rmin, float rdelta, int nstep,
                           int mad, uint8_t *L, float *min_out)
{
    float lo = x[0], hi = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *min_out = -lo;
        return 0.0f;
    }
    float iscale = nmax / (hi - lo), scale = iscale ? 1 / iscale : 0.0f, best = 0; /* 0: the range overflowed */
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(round_int(iscale * (x[i] - lo)), 0, nmax);
        best += w[i] * fit_err(scale * L[i] + lo - x[i], mad);
    }
    uint8_t trial[32];
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * k + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(round_int(iscale * (x[i] - lo)), 0, nmax);
            trial[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / D, m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (m > 0) {
            m = 0;
            s = sum_xl / sum_l2;
        }
        float e = 0;
        for (int i = 0; i < n; i++) e += w[i] * fit_err(s * trial[i] + m - x[i], mad);
        if (e < best) {
            memcpy(L, trial, (size_t)n);
            best = e;
            scale = s;
            lo = m;
        }
    }
    *min_out = -lo;
    return scale;
}

/* Q2_K (84): scales[16] (4-bit scale | 4-bit min << 4 per 16 values),
 * qs[64] (2-bit), f16 d, f16 dmin. Weights |x|, absolute error. */
static void quantize_q2_k(const float *x, uint8_t *b)
{
    uint8_t L[256], *sc = b;
    float scale[16], min[16], w[16], max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; j++) {
        for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
        scale[j] = fit_scale_min(x + 16 * j, w, 16, 3, -0.5f, 0.1f, 15, 1, L + 16 * j, &min[j]);
        if (scale[j] > max_scale) max_scale = scale[j];
        if (min[j] > max_min) max_min = min[j];
    }
    memset(sc, 0, 16);
    float d = 0, dmin = 0;
    if (max_scale > 0) {
        const float iscale = 15.f / max_scale;
        for (int j = 0; j < 16; j++) sc[j] = (uint8_t)clampi(round_int(iscale * scale[j]), 0, 15);
        d = store_f16(b + 80, max_scale / 15.f);
    } else {
        store_f16(b + 80, 0.0f);
    }
    if (max_min > 0) {
        const float iscale = 15.f / max_min;
        for (int j = 0; j < 16; j++) sc[j] |= (uint8_t)(clampi(round_int(iscale * min[j]), 0, 15) << 4);
        dmin = store_f16(b + 82, max_min / 15.f);
    } else {
        store_f16(b + 82, 0.0f);
    }
    for (int j = 0; j < 16; j++) {
        const float dl = d * (sc[j] & 0xF);
        if (!dl) continue;
        const float ml = dmin * (sc[j] >> 4);
        for (int l = 0; l < 16; l++) L[16 * j + l] = (uint8_t)clampi(round_int((x[16 * j + l] + ml) / dl), 0, 3);
    }
    pack_2bit(L, b + 16);
}

/* Q4_K and Q5_K: f16 d, f16 dmin, then 8 6-bit scales and mins of 32
 * values packed in 12 bytes (quant.c's scale_min_k4 reads them back).
 * Weights rms(x) + |x| per sub-block. Writes b[0..15] and the 256 quants
 * to L. */
static void quantize_scale_min_k4(const float *x, int nmax, float rmin, int nstep, uint8_t *b, uint8_t *L)
{
    float scale[8], min[8], w[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scale[j] = fit_scale_min(xs, w, 32, nmax, rmin, 0.1f, nstep, 0, L + 32 * j, &min[j]);
        if (scale[j] > max_scale) max_scale = scale[j];
        if (min[j] > max_min) max_min = min[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    int ls[8], lm[8];
    uint8_t *sc = b + 4;
    memset(sc, 0, 12);
    for (int j = 0; j < 8; j++) {
        ls[j] = clampi(round_int(inv_scale * scale[j]), 0, 63);
        lm[j] = clampi(round_int(inv_min * min[j]), 0, 63);
        if (j < 4) {
            sc[j] = (uint8_t)ls[j];
            sc[j + 4] = (uint8_t)lm[j];
        } else { /* low nibbles in bytes 8-11, the top 2 bits over bytes 0-7 */
            sc[j + 4] = (uint8_t)((ls[j] & 0xF) | (lm[j] & 0xF) << 4);
            sc[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            sc[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
    const float d = store_f16(b, max_scale / 63.f), dmin = store_f16(b + 2, max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        const float dl = d * ls[j];
        if (!dl) continue;
        const float ml = dmin * lm[j];
        for (int l = 0; l < 32; l++) L[32 * j + l] = (uint8_t)clampi(round_int((x[32 * j + l] + ml) / dl), 0, nmax);
    }
}

/* Q4_K (144): d, dmin, scales[12], qs[128] (per 64 values: 32 bytes, low
 * nibble the first 32, high nibble the next). */
static void quantize_q4_k(const float *x, uint8_t *b)
{
    uint8_t L[256], *q = b + 16;
    quantize_scale_min_k4(x, 15, -1.f, 20, b, L);
    for (int j = 0; j < 256; j += 64, q += 32)
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
}

/* Q5_K (176): d, dmin, scales[12], qh[32] (5th bits: value 64g + l in bit
 * 2g of qh[l], 64g + 32 + l in bit 2g+1), qs[128] as Q4_K. */
static void quantize_q5_k(const float *x, uint8_t *b)
{
    uint8_t L[256], *qh = b + 16, *ql = b + 48;
    quantize_scale_min_k4(x, 31, -0.5f, 15, b, L);
    memset(qh, 0, 32);
    for (int j = 0, g = 0; j < 256; j += 64, g++, ql += 32)
        for (int l = 0; l < 32; l++) {
            const int l1 = L[j + l], l2 = L[j + l + 32];
            qh[l] |= (uint8_t)((l1 >> 4) << 2 * g | (l2 >> 4) << (2 * g + 1));
            ql[l] = (uint8_t)((l1 & 0xF) | (l2 & 0xF) << 4);
        }
}

/* ------------------------------------------------- signed scale (Q3/Q6_K) */

/* Rounds iscale*x into [lo, hi] (stored in l) and sums with the weights
 * x^2: *sxl = sum w*x*l, *sll = sum w*l*l. */
static void x2_sums(const float *x, float iscale, int lo, int hi, int8_t *l, float *sxl, float *sll)
{
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < 16; i++) {
        l[i] = (int8_t)clampi(round_int(iscale * x[i]), lo, hi);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l[i];
        suml2 += w * l[i] * l[i];
    }
    *sxl = sumlx;
    *sll = suml2;
}

/* The first grid of the Q3_K and Q6_K searches over 16 values: the one
 * that puts the value of largest magnitude (*max) on -nmax, l in [-nmax,
 * nmax - 1], with its x2_sums. 0 (and L all 0) for an all-zero group. */
static int x2_first_grid(const float *x, int nmax, uint8_t *L, int8_t *l, float *max_out, float *sxl, float *sll)
{
    float amax = 0, max = 0;
    for (int i = 0; i < 16; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < ZERO_EPS) {
        memset(L, 0, 16);
        return 0;
    }
    *max_out = max;
    x2_sums(x, -nmax / max, -nmax, nmax - 1, l, sxl, sll);
    return 1;
}

/* Q3_K's 16 values: l in [-4, 3] from the grid that puts the largest
 * magnitude on -4, then up to 5 passes that move one l at a time to its
 * best value for the others' scale when that raises (sum w x l)^2 / sum w
 * l^2. L gets l + 4 (all 0 for an all-zero group); returns the scale.
 * ggml's make_q3_quants with rmse. */
static float fit_q3(const float *x, uint8_t *L)
{
    int8_t l[16];
    float max, sumlx, suml2;
    if (!x2_first_grid(x, 4, L, l, &max, &sumlx, &suml2)) return 0.0f;
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < 16; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * l[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * l[i] * l[i];
            const int nl = clampi(round_int(x[i] * sl2 / slx), -4, 3);
            if (nl == l[i]) continue;
            slx += w * x[i] * nl;
            sl2 += w * nl * nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                l[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < 16; i++) L[i] = (uint8_t)(l[i] + 4);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Q6_K's 16 values: l in [-32, 31] for the grids that put the largest
 * magnitude on -(32 + 0.1k), k = -9..9, keeping the best by (sum w x
 * l)^2 / sum w l^2. L gets l + 32 (all 0 for an all-zero group); returns
 * the least-squares scale. ggml's make_qx_quants, rmse_type 1. */
static float fit_q6(const float *x, uint8_t *L)
{
    int8_t l[16], trial[16];
    float max, sumlx, suml2;
    if (!x2_first_grid(x, 32, L, l, &max, &sumlx, &suml2)) return 0.0f;
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int k = -9; k <= 9; k++) {
        if (!k) continue;
        x2_sums(x, -(32 + 0.1f * k) / max, -32, 31, trial, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            memcpy(l, trial, sizeof l);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    for (int i = 0; i < 16; i++) L[i] = (uint8_t)(l[i] + 32);
    return scale;
}

/* Fits each of the 16 groups of 16 values with fit (fit_q3, fit_q6) into
 * scale[] and L; returns the scale of largest magnitude, *max_abs gets its
 * magnitude. */
static float fit_groups(const float *x, float (*fit)(const float *, uint8_t *), float *scale, uint8_t *L, float *max_abs)
{
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        scale[j] = fit(x + 16 * j, L + 16 * j);
        if (fabsf(scale[j]) > amax) {
            amax = fabsf(scale[j]);
            max_scale = scale[j];
        }
    }
    *max_abs = amax;
    return max_scale;
}

/* Re-rounds each group j on its final grid d*ls[j]: l in [-nmax, nmax-1],
 * L = l + nmax. A group whose grid is 0 keeps the L of its fit. */
static void requantize_groups(const float *x, float d, const int *ls, int nmax, uint8_t *L)
{
    for (int j = 0; j < 16; j++) {
        const float dl = d * ls[j];
        if (!dl) continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (uint8_t)(clampi(round_int(x[16 * j + l] / dl), -nmax, nmax - 1) + nmax);
    }
}

/* Q3_K (110): hmask[32] (bit j/32 of hmask[j%32]: value j's third bit),
 * qs[64] (low 2 bits), scales[12] (16 6-bit scales + 32: low nibbles in
 * bytes 0-7, j and j+8 sharing one, the top 2 bits of j in byte 8 + j%4 at
 * bit 2*(j/4)), f16 d. */
static void quantize_q3_k(const float *x, uint8_t *b)
{
    uint8_t L[256], *hm = b, *sc = b + 96;
    float scale[16], amax;
    const float max_scale = fit_groups(x, fit_q3, scale, L, &amax);
    memset(sc, 0, 12);
    int ls[16] = {0}; /* 6-bit scale - 32 */
    float d = 0;
    if (max_scale) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < 16; j++) {
            ls[j] = clampi(round_int(iscale * scale[j]), -32, 31);
            const int l = ls[j] + 32;
            sc[j % 8] |= (uint8_t)((l & 0xF) << 4 * (j / 8));
            sc[8 + j % 4] |= (uint8_t)((l >> 4) << 2 * (j / 4));
        }
        d = store_f16(b + 108, iscale ? 1 / iscale : max_scale); /* iscale 0: max_scale is inf */
    } else {
        store_f16(b + 108, 0.0f);
    }
    requantize_groups(x, d, ls, 4, L);
    memset(hm, 0, 32);
    for (int j = 0; j < 256; j++)
        if (L[j] > 3) {
            hm[j % 32] |= (uint8_t)(1u << (j / 32));
            L[j] -= 4;
        }
    pack_2bit(L, b + 32);
}

/* Q6_K (210): ql[128] (low nibbles: per 128 values, byte l holds values l
 * and l+64, byte 32+l values l+32 and l+96), qh[64] (the top 2 bits of
 * those four, 2 bits each), int8 scales[16], f16 d. */
static void quantize_q6_k(const float *x, uint8_t *b)
{
    uint8_t L[256];
    float scale[16], max_abs;
    const float max_scale = fit_groups(x, fit_q6, scale, L, &max_abs);
    if (max_abs < ZERO_EPS) {
        memset(b, 0, 210);
        return;
    }
    const float iscale = -128.f / max_scale;
    const float d = store_f16(b + 208, iscale ? 1 / iscale : max_scale); /* iscale 0: max_scale is inf */
    int ls[16];
    for (int j = 0; j < 16; j++) {
        ls[j] = clampi(round_int(iscale * scale[j]), -128, 127);
        b[192 + j] = (uint8_t)(int8_t)ls[j];
    }
    requantize_groups(x, d, ls, 32, L);
    uint8_t *ql = b, *qh = b + 128;
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            const uint8_t *v = L + j + l;
            ql[l] = (uint8_t)((v[0] & 0xF) | (v[64] & 0xF) << 4);
            ql[l + 32] = (uint8_t)((v[32] & 0xF) | (v[96] & 0xF) << 4);
            qh[l] = (uint8_t)(v[0] >> 4 | (v[32] >> 4) << 2 | (v[64] >> 4) << 4 | (v[96] >> 4) << 6);
        }
}

/* ------------------------------------------------------- IQ4_NL, IQ4_XS */

/* Index of the IQ4 level nearest to v (a tie goes to the upper one); any
 * float, NaN included, gives an index. */
static int iq4_level(float v)
{
    const int8_t *k = rkm_kvalues_iq4nl;
    if (v <= k[0]) return 0;
    if (v >= k[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < k[mid]) hi = mid;
        else lo = mid;
    }
    return v - k[lo] < k[hi] - v ? lo : hi;
}

/* With the 32 values mapped to their nearest level of id*x: *sqx = sum
 * w*q*x, *sq2 = sum w*q*q. */
static void iq4_sums(const float *x, const float *w, float id, float *sqx, float *sq2)
{
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        const float q = rkm_kvalues_iq4nl[iq4_level(id * x[j])];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    *sqx = sumqx;
    *sq2 = sumq2;
}

/* The scale of 32 values on the IQ4 levels (0 if all are zero): the
 * least-squares scale of the best of the grids that put the largest
 * magnitude on level (t - 127), t = -7..7, by (sum w q x)^2 / sum w q^2,
 * w = x^2. ggml's quantize_row_iq4_nl_impl (no weights, ntry 7). */
static float fit_iq4(const float *x)
{
    float w[32], amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        w[j] = x[j] * x[j];
        const float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax < ZERO_EPS) return 0.0f;
    const int k0 = rkm_kvalues_iq4nl[0];
    float sumqx, sumq2;
    iq4_sums(x, w, 1 / (-max / k0), &sumqx, &sumq2);
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.f, best = d * sumqx;
    for (int t = -7; t <= 7; t++) {
        iq4_sums(x, w, (t + k0) / max, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* 32 values onto the levels of scale dl (nibbles: value j low in byte j,
 * value j+16 high). */
static void iq4_pack(const float *x, float dl, uint8_t *qs)
{
    const float id = dl ? 1 / dl : 0.f;
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(iq4_level(id * x[j]) | iq4_level(id * x[j + 16]) << 4);
}

/* Stores the f16 scale d at p and returns the scale to place the values
 * with: d itself, unrounded, as ggml does, unless the f16 saturated. */
static float store_iq4_scale(uint8_t *p, float d)
{
    const float stored = store_f16(p, d);
    return d != d || fabsf(d) >= 65520.f ? stored : d;
}

/* IQ4_NL (18): f16 d, qs[16]. */
static void quantize_iq4_nl(const float *x, uint8_t *b)
{
    iq4_pack(x, store_iq4_scale(b, fit_iq4(x)), b + 2);
}

/* IQ4_XS (136): f16 d, u16 scales_h (2 high bits of sub-block ib at bit
 * 2ib), scales_l[4] (low nibbles, ib odd in the high one), qs[128] as
 * IQ4_NL per 32 values. Sub-scale ls - 32 in [-32, 31] of d = -(largest
 * sub-block scale)/32, placed with the unrounded d as ggml does. */
static void quantize_iq4_xs(const float *x, uint8_t *b)
{
    float scale[8], max_scale = 0, amax = 0;
    for (int ib = 0; ib < 8; ib++) {
        scale[ib] = fit_iq4(x + 32 * ib);
        if (fabsf(scale[ib]) > amax) {
            amax = fabsf(scale[ib]);
            max_scale = scale[ib];
        }
    }
    const float d = store_iq4_scale(b, -max_scale / 32), id = d ? 1 / d : 0.f;
    unsigned sh = 0;
    memset(b + 4, 0, 4);
    for (int ib = 0; ib < 8; ib++) {
        const int l = clampi(round_int(id * scale[ib]), -32, 31);
        iq4_pack(x + 32 * ib, d * l, b + 8 + 16 * ib);
        b[4 + ib / 2] |= (uint8_t)(((l + 32) & 0xF) << 4 * (ib % 2));
        sh |= (unsigned)((l + 32) >> 4) << 2 * ib;
    }
    b[2] = (uint8_t)sh;
    b[3] = (uint8_t)(sh >> 8);
}

/* ---------------------------------------------------------------- MXFP4 */

/* MXFP4 (17): E8M0 exponent e, qs[16] as IQ4_NL with the (doubled) e2m1
 * levels; x = level * 2^(e-128). */
static void quantize_mxfp4(const float *x, uint8_t *b)
{
    float amax = 0;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]);
    int e = 0;
    if (amax > 0) {
        const float t = floorf(log2f(amax)) - 2 + 127;
        e = t >= 254.f ? 254 : t > 0.f ? (int)t : 0;
    }
    const float d = ldexpf(1.0f, e - 128);
    b[0] = (uint8_t)e;
    for (int j = 0; j < 16; j++) {
        int c[2] = {0, 0};
        for (int h = 0; h < 2; h++) {
            const float v = x[j + 16 * h];
            float best = fabsf(rkm_kvalues_mxfp4[0] * d - v);
            for (int i = 1; i < 16; i++) {
                const float err = fabsf(rkm_kvalues_mxfp4[i] * d - v);
                if (err < best) {
                    best = err;
                    c[h] = i;
                }
            }
        }
        b[1 + j] = (uint8_t)(c[0] | c[1] << 4);
    }
}

/* ------------------------------------------------------------- dispatch */

int rkm_quantize_row_k(int type, const float *x, void *dst, int64_t n)
{
    void (*block)(const float *, uint8_t *);
    switch (type) {
    case RKM_TYPE_Q2_K: block = quantize_q2_k; break;
    case RKM_TYPE_Q3_K: block = quantize_q3_k; break;
    case RKM_TYPE_Q4_K: block = quantize_q4_k; break;
    case RKM_TYPE_Q5_K: block = quantize_q5_k; break;
    case RKM_TYPE_Q6_K: block = quantize_q6_k; break;
    case RKM_TYPE_IQ4_NL: block = quantize_iq4_nl; break;
    case RKM_TYPE_IQ4_XS: block = quantize_iq4_xs; break;
    case RKM_TYPE_MXFP4: block = quantize_mxfp4; break;
    default: return -1;
    }
    const int bs = rkm_type_block_size(type);
    const size_t bb = rkm_type_block_bytes(type);
    uint8_t *p = dst;
    for (int64_t i = 0; i < n / bs; i++) block(x + i * bs, p + (size_t)i * bb);
    return 0;
}
