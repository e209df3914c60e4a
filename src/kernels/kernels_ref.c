/*
 * kernels_ref.c - the portable scalar reference of every kernel. The SIMD
 * versions are tested against it, and any entry an ISA set leaves NULL
 * falls back to it. Numerics follow ggml's reference code (float
 * accumulation of per-block integer dot products, double sums in rmsnorm
 * and softmax) so results can be compared with llama.cpp's.
 *
 * Stateless: callable from any thread; nothing is allocated.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/quant_tables.h"

void rkm_quantize_act_ref(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s)
{
    int64_t nb = n / RKM_QK8_0;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * RKM_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < RKM_QK8_0; j++) {
            float v = fabsf(xb[j]);
            if (v > amax) amax = v;
        }
        float db = amax / 127.0f;
        float id = db != 0.0f ? 1.0f / db : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < RKM_QK8_0; j++) {
            float v = roundf(xb[j] * id);
            int q = v != v ? 0 : (int)v; /* NaN in, 0 out: never UB */
            qs[b * RKM_QK8_0 + j] = (int8_t)q;
            sum += q;
        }
        d[b] = rkm_f16_to_f32(rkm_f32_to_f16(db));
        if (s) s[b] = sum;
    }
}

void rkm_quantize_act_k(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s16)
{
    /* As ggml's Q8_K: the value of largest magnitude m maps to -127
     * (scale 1/(-127/m), so d is negative for a positive m), q rounded half
     * to even and at most 127. */
    for (int64_t b = 0; b < n / RKM_QK_K; b++) {
        const float *xb = x + b * RKM_QK_K;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < RKM_QK_K; j++) {
            float v = fabsf(xb[j]);
            if (v > amax) amax = v, max = xb[j];
        }
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        for (int g = 0; g < RKM_QK_K / 16; g++) {
            int32_t sum = 0;
            for (int j = 16 * g; j < 16 * g + 16; j++) {
                float v = rintf(iscale * xb[j]);
                int q = v != v ? 0 : v > 127.0f ? 127 : v < -128.0f ? -128 : (int)v;
                qs[b * RKM_QK_K + j] = (int8_t)q;
                sum += q;
            }
            s16[b * (RKM_QK_K / 16) + g] = sum;
        }
        d[b] = amax != 0.0f ? 1.0f / iscale : 0.0f;
    }
}

static void mm_f32_ref(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    for (int64_t i = 0; i < a->m; i++) {
        const float *x = a->x + i * a->n_in;
        for (int64_t r = r0; r < r1; r++) {
            const float *w = (const float *)((const char *)a->w + r * a->w_row_bytes);
            float sum = 0.0f;
            for (int64_t k = 0; k < a->n_in; k++) sum += w[k] * x[k];
            a->y[i * a->ldy + r] = sum;
        }
    }
}

/* f16 (bf16 0) or bf16 (1) weights, f32 activations. */
static void mm_half_ref(const rkm_mm_args *a, int64_t r0, int64_t r1, const int bf16)
{
    for (int64_t i = 0; i < a->m; i++) {
        const float *x = a->x + i * a->n_in;
        for (int64_t r = r0; r < r1; r++) {
            const uint16_t *w = (const uint16_t *)((const char *)a->w + r * a->w_row_bytes);
            float sum = 0.0f;
            for (int64_t k = 0; k < a->n_in; k++) sum += (bf16 ? rkm_bf16_to_f32(w[k]) : rkm_f16_to_f32(w[k])) * x[k];
            a->y[i * a->ldy + r] = sum;
        }
    }
}

static void mm_f16_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_half_ref(a, r0, r1, 0); }
static void mm_bf16_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_half_ref(a, r0, r1, 1); }

/* Native block types in integer form (kernels_impl.h): per block the
 * exact isum and msum, then one or two fused multiply-adds. */
/* packed: the rows are 16-row groups of packed Q2_K..Q6_K, IQ4_NL or IQ4_XS (r0, r1
 * multiples of 16), read back block by block: the same arithmetic as the
 * plain rows. */
static void mm_qblock_any(const rkm_mm_args *a, int64_t r0, int64_t r1, int type, int packed)
{
    const int bs = rkm_qblock_values(type);
    const size_t bb = rkm_type_block_bytes(type);
    const int64_t nb = a->n_in / bs, ng = a->n_in / (bs == 256 ? 16 : 32);
    rkm_qblock o;
    uint8_t plain[256];
    for (int64_t i = 0; i < a->m; i++) {
        const int8_t *xq = a->xq + i * a->n_in;
        const float *xd = a->xd + i * nb;
        const int32_t *xs = a->xs + i * ng;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *w = (const uint8_t *)a->w + r * a->w_row_bytes;
            const uint8_t *grp = (const uint8_t *)a->w + (r - (r - r0) % RKM_PACK_ROWS) * a->w_row_bytes;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                if (packed) rkm_pk_unpack_row(type, grp + (size_t)b * rkm_pk_block(type), (int)((r - r0) % RKM_PACK_ROWS), plain);
                rkm_qblock_unpack(type, packed ? plain : w + (size_t)b * bb, &o);
                const int8_t *xb = xq + b * bs;
                int32_t isum = 0, msum = 0;
                for (int s = 0; s < bs / o.sub; s++) {
                    int32_t dot = 0;
                    for (int k = s * o.sub; k < (s + 1) * o.sub; k++) dot += o.q[k] * xb[k];
                    isum += o.sc[s] * dot;
                    if (o.has_min) {
                        /* xs: sums of 16 (q8_K activations) or of 32 (q8_0) */
                        int32_t bsum = 0;
                        if (bs == 32) bsum = xs[b];
                        else
                            for (int g = s * o.sub / 16; g < (s + 1) * o.sub / 16; g++) bsum += xs[b * 16 + g];
                        msum += o.mn[s] * bsum;
                    }
                }
                acc = fmaf(o.d * xd[b], (float)isum, acc);
                if (o.has_min && bs == 32) acc = fmaf(-o.dmin, a->xm[i * nb + b], acc);
                else if (o.has_min) acc = fmaf(-(o.dmin * xd[b]), (float)msum, acc);
            }
            a->y[i * a->ldy + r] = acc;
        }
    }
}

static void mm_qblock_ref(const rkm_mm_args *a, int64_t r0, int64_t r1, int type) { mm_qblock_any(a, r0, r1, type, 0); }
static void mm_q4_k_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_qblock_any(a, r0, r1, RKM_TYPE_Q4_K, 1); }
static void mm_q5_k_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_qblock_any(a, r0, r1, RKM_TYPE_Q5_K, 1); }
static void mm_q6_k_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_qblock_any(a, r0, r1, RKM_TYPE_Q6_K, 1); }
static void mm_iq4_nl_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_qblock_any(a, r0, r1, RKM_TYPE_IQ4_NL, 1); }
static void mm_iq4_xs_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_qblock_any(a, r0, r1, RKM_TYPE_IQ4_XS, 1); }
static void mm_q3_k_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_qblock_any(a, r0, r1, RKM_TYPE_Q3_K, 1); }
static void mm_q2_k_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_qblock_any(a, r0, r1, RKM_TYPE_Q2_K, 1); }

#define QBLOCK_REF(name, type) \
    static void mm_##name##_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_qblock_ref(a, r0, r1, type); }
QBLOCK_REF(q4_1, RKM_TYPE_Q4_1)
QBLOCK_REF(q5_0, RKM_TYPE_Q5_0)
QBLOCK_REF(q5_1, RKM_TYPE_Q5_1)
QBLOCK_REF(q2_k, RKM_TYPE_Q2_K)
QBLOCK_REF(q3_k, RKM_TYPE_Q3_K)
QBLOCK_REF(q4_k, RKM_TYPE_Q4_K)
QBLOCK_REF(q5_k, RKM_TYPE_Q5_K)
QBLOCK_REF(q6_k, RKM_TYPE_Q6_K)
QBLOCK_REF(iq4_nl, RKM_TYPE_IQ4_NL)
QBLOCK_REF(iq4_xs, RKM_TYPE_IQ4_XS)
QBLOCK_REF(mxfp4, RKM_TYPE_MXFP4)
#undef QBLOCK_REF
static void mm_grid_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_qblock_ref(a, r0, r1, a->type); }

static void mm_q8_0_ref(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    int64_t nb = a->n_in / RKM_QK8_0;
    for (int64_t i = 0; i < a->m; i++) {
        const int8_t *xq = a->xq + i * nb * RKM_QK8_0;
        const float *xd = a->xd + i * nb;
        for (int64_t r = r0; r < r1; r++) {
            const rkm_block_q8_0 *w =
                (const rkm_block_q8_0 *)((const char *)a->w + r * a->w_row_bytes);
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int32_t sumi = 0;
                for (int j = 0; j < RKM_QK8_0; j++)
                    sumi += (int32_t)w[b].qs[j] * xq[b * RKM_QK8_0 + j];
                sum += (float)sumi * (rkm_f16_to_f32(w[b].d) * xd[b]);
            }
            a->y[i * a->ldy + r] = sum;
        }
    }
}

static void mm_q4_0_ref(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    int64_t nb = a->n_in / RKM_QK4_0;
    for (int64_t i = 0; i < a->m; i++) {
        const int8_t *xq = a->xq + i * nb * RKM_QK8_0;
        const float *xd = a->xd + i * nb;
        for (int64_t r = r0; r < r1; r++) {
            const rkm_block_q4_0 *w =
                (const rkm_block_q4_0 *)((const char *)a->w + r * a->w_row_bytes);
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const int8_t *xb = xq + b * RKM_QK8_0;
                int32_t sumi = 0;
                for (int j = 0; j < RKM_QK4_0 / 2; j++) {
                    int lo = (w[b].qs[j] & 15) - 8, hi = (w[b].qs[j] >> 4) - 8;
                    sumi += lo * xb[j] + hi * xb[j + RKM_QK4_0 / 2];
                }
                sum += (float)sumi * (rkm_f16_to_f32(w[b].d) * xd[b]);
            }
            a->y[i * a->ldy + r] = sum;
        }
    }
}

/* Packed weights (layout in kernels.h): whole 16-row groups. Every SIMD
 * set must reproduce this bit for bit: per block the exact integer dot
 * product, then one fused multiply-add with the product of the scales
 * (as the plain types' references do). */
static void mm_packed_ref(const rkm_mm_args *a, int64_t r0, int64_t r1, const int type)
{
    const int64_t nb = a->n_in / 32;
    const size_t bb = rkm_pk_block(type), hb = RKM_PACK_ROWS * rkm_pk_scale_bytes(type);
    const int parts = type == RKM_TYPE_Q8_0 ? 8 : 4;
    for (int64_t r = r0; r + RKM_PACK_ROWS <= r1; r += RKM_PACK_ROWS) {
        const uint8_t *g = (const uint8_t *)a->w + (size_t)r * a->w_row_bytes;
        for (int64_t i = 0; i < a->m; i++) {
            const int8_t *xq = a->xq + i * nb * 32;
            const float *xd = a->xd + i * nb;
            for (int rr = 0; rr < RKM_PACK_ROWS; rr++) {
                float acc = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    const uint8_t *blk = g + (size_t)b * bb;
                    const int8_t *xb = xq + b * 32;
                    const float d = type == RKM_TYPE_MXFP4 ? rkm_e8m0_half(blk[rr]) : rkm_f16_le(blk + 2 * rr);
                    int32_t isum = 0;
                    for (int h = 0; h < parts; h++)
                        for (int j = 0; j < 4; j++) {
                            const uint8_t v = blk[hb + 64 * h + 4 * rr + j];
                            if (type == RKM_TYPE_Q4_0)
                                isum += ((v & 15) - 8) * xb[4 * h + j] + ((v >> 4) - 8) * xb[16 + 4 * h + j];
                            else if (type == RKM_TYPE_MXFP4)
                                isum += rkm_kvalues_mxfp4[v & 15] * xb[4 * h + j] +
                                        rkm_kvalues_mxfp4[v >> 4] * xb[16 + 4 * h + j];
                            else isum += (int8_t)v * xb[4 * h + j];
                        }
                    acc = fmaf((float)isum, d * xd[b], acc);
                }
                a->y[i * a->ldy + r + rr] = acc;
            }
        }
    }
}

static void mm_q8_0_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_packed_ref(a, r0, r1, RKM_TYPE_Q8_0); }
static void mm_q4_0_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_packed_ref(a, r0, r1, RKM_TYPE_Q4_0); }
static void mm_mxfp4_p_ref(const rkm_mm_args *a, int64_t r0, int64_t r1) { mm_packed_ref(a, r0, r1, RKM_TYPE_MXFP4); }

static void rmsnorm_ref(float *out, const float *x, const float *w, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] * scale;
        out[i] = w ? v * w[i] : v;
    }
}

static void softmax_ref(float *x, int64_t n)
{
    if (n <= 0) return;
    float mx = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

static void swiglu_ref(float *out, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

float rkm_gelu_tanh(float x)
{
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, coef_a = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + coef_a * x * x)));
}

static void gelu_ref(float *out, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = rkm_gelu_tanh(x[i]);
}

static void geglu_ref(float *out, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = rkm_gelu_tanh(g[i]) * u[i];
}

static void f32_to_f16_ref(const float *x, rkm_f16 *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = rkm_f32_to_f16(x[i]);
}

static void f16_to_f32_ref(const rkm_f16 *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = rkm_f16_to_f32(x[i]);
}

static float dot_f32_f16_ref(const float *x, const rkm_f16 *y, int64_t n)
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * rkm_f16_to_f32(y[i]);
    return sum;
}

static void axpy_f16_ref(float *y, float a, const rkm_f16 *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += a * rkm_f16_to_f32(x[i]);
}

/* The gated delta rule's step (kernels.h), element by element: a
 * multiply for the decay, fused multiply-adds for the sums and the
 * update, rows in order, which is what each SIMD lane of the other sets
 * does (the first pass column by column: rkm_delta_cols). */
static void delta_step_ref(float *t, const float *q, const float *k, const float *v, float decay, float beta, float qk,
                           int64_t n, float *o, float *d)
{
    rkm_delta_cols(t, q, k, decay, n, 0, o, d);
    for (int64_t j = 0; j < n; j++) d[j] = (v[j] - d[j]) * beta;
    for (int64_t i = 0; i < n; i++) {
        float *r = t + i * n;
        for (int64_t j = 0; j < n; j++) r[j] = fmaf(k[i], d[j], r[j]);
    }
    for (int64_t j = 0; j < n; j++) o[j] = fmaf(qk, d[j], o[j]);
}

static float scan_step_ref(float *st, const float *b, const float *c, float da, float xdt, int64_t n)
{
    return rkm_scan_tail(st, b, c, da, xdt, 0, n, 0.0f);
}

static void conv_step_ref(float *win, const float *w, const float *x, int64_t ch, int K, float *out)
{
    rkm_conv_cols(win, w, x, ch, K, 0, out);
}

/* The wrapping sum of n words; eight accumulators so that the loop is not
 * one long dependency chain (compilers vectorise it). */
static uint64_t read_sum_ref(const uint64_t *p, size_t n, int streams)
{
    (void)streams;
    uint64_t a[8] = {0};
    for (size_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++) a[k] += p[i + k];
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

const rkm_kernel_set rkm_kernels_ref = {
    .name = "ref",
    .quantize_act = rkm_quantize_act_ref,
    .quantize_act_k = rkm_quantize_act_k,
    .mm_f32 = mm_f32_ref,
    .mm_f16 = mm_f16_ref,
    .mm_q8_0 = mm_q8_0_ref,
    .mm_q4_0 = mm_q4_0_ref,
    .mm_bf16 = mm_bf16_ref,
    .mm_q4_1 = mm_q4_1_ref,
    .mm_q5_0 = mm_q5_0_ref,
    .mm_q5_1 = mm_q5_1_ref,
    .mm_q2_k = mm_q2_k_ref,
    .mm_q3_k = mm_q3_k_ref,
    .mm_q4_k = mm_q4_k_ref,
    .mm_q5_k = mm_q5_k_ref,
    .mm_q6_k = mm_q6_k_ref,
    .mm_iq4_nl = mm_iq4_nl_ref,
    .mm_iq4_xs = mm_iq4_xs_ref,
    .mm_mxfp4 = mm_mxfp4_ref,
    .mm_grid = mm_grid_ref,
    .mm_q8_0_p = mm_q8_0_p_ref,
    .mm_q4_0_p = mm_q4_0_p_ref,
    .mm_mxfp4_p = mm_mxfp4_p_ref,
    .mm_iq4_nl_p = mm_iq4_nl_p_ref,
    .mm_q4_k_p = mm_q4_k_p_ref,
    .mm_q5_k_p = mm_q5_k_p_ref,
    .mm_q6_k_p = mm_q6_k_p_ref,
    .mm_iq4_xs_p = mm_iq4_xs_p_ref,
    .mm_q3_k_p = mm_q3_k_p_ref,
    .mm_q2_k_p = mm_q2_k_p_ref,
    .rmsnorm = rmsnorm_ref,
    .softmax = softmax_ref,
    .swiglu = swiglu_ref,
    .geglu = geglu_ref,
    .gelu = gelu_ref,
    .f32_to_f16 = f32_to_f16_ref,
    .f16_to_f32 = f16_to_f32_ref,
    .dot_f32_f16 = dot_f32_f16_ref,
    .axpy_f16 = axpy_f16_ref,
    .delta_step = delta_step_ref,
    .scan_step = scan_step_ref,
    .conv_step = conv_step_ref,
    .read_sum = read_sum_ref,
};
