/*
 * kernels_neon.c - baseline ARMv8.0 NEON (every AArch64 core: Cortex-A53/A55/A72, ...)
 * kernels; the body is neon_impl.h and neon_qblock.h, compiled with this file's flags
 * (Makefile, by suffix). Stateless.
 */
#define RKM_NEON_DOTPROD 0
#define RKM_NEON_SUFFIX neon
#include "kernels/arch/arm/neon_impl.h"
#include "kernels/arch/arm/neon_qblock.h"

/* The bandwidth probe's read (kernels_impl.h): 128-bit loads, four
 * accumulators; streams 4 prefetches each stream 2 KiB ahead. The
 * dot-product set inherits it. */
static uint64_t read_sum_neon(const uint64_t *p, size_t n, int streams)
{
    uint64x2_t s0 = vdupq_n_u64(0), s1 = s0, s2 = s0, s3 = s0;
    if (streams == 4) {
        size_t q = n / 4;
        const uint64_t *a = p, *b = a + q, *c = b + q, *d = c + q;
        for (size_t i = 0; i < q; i += 8) {
            __builtin_prefetch((const char *)(a + i) + 2048);
            __builtin_prefetch((const char *)(b + i) + 2048);
            __builtin_prefetch((const char *)(c + i) + 2048);
            __builtin_prefetch((const char *)(d + i) + 2048);
            for (int k = 0; k < 8; k += 2) {
                s0 = vaddq_u64(s0, vld1q_u64(a + i + k));
                s1 = vaddq_u64(s1, vld1q_u64(b + i + k));
                s2 = vaddq_u64(s2, vld1q_u64(c + i + k));
                s3 = vaddq_u64(s3, vld1q_u64(d + i + k));
            }
        }
    } else {
        for (size_t i = 0; i < n; i += 8) {
            s0 = vaddq_u64(s0, vld1q_u64(p + i));
            s1 = vaddq_u64(s1, vld1q_u64(p + i + 2));
            s2 = vaddq_u64(s2, vld1q_u64(p + i + 4));
            s3 = vaddq_u64(s3, vld1q_u64(p + i + 6));
        }
    }
    s0 = vaddq_u64(vaddq_u64(s0, s1), vaddq_u64(s2, s3));
    return vgetq_lane_u64(s0, 0) + vgetq_lane_u64(s0, 1);
}

/* The gated delta rule's step (kernels.h) in blocks of 16 value columns
 * held in registers while the rows stream by; each lane does the
 * reference's multiply and fused multiply-adds in its order. The
 * dot-product set inherits it. */
static void delta_step_neon(float *t, const float *q, const float *k, const float *v, float decay, float beta, float qk,
                            int64_t n, float *o, float *d)
{
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        float32x4_t s[4], a[4];
        for (int b = 0; b < 4; b++) s[b] = a[b] = vdupq_n_f32(0.0f);
        for (int64_t i = 0; i < n; i++) {
            float *r = t + i * n + j;
            for (int b = 0; b < 4; b++) {
                float32x4_t x = vmulq_n_f32(vld1q_f32(r + 4 * b), decay);
                vst1q_f32(r + 4 * b, x);
                s[b] = vfmaq_n_f32(s[b], x, k[i]);
                a[b] = vfmaq_n_f32(a[b], x, q[i]);
            }
        }
        for (int b = 0; b < 4; b++) {
            vst1q_f32(d + j + 4 * b, s[b]);
            vst1q_f32(o + j + 4 * b, a[b]);
        }
    }
    rkm_delta_cols(t, q, k, decay, n, j, o, d); /* the columns past the last block */
    for (j = 0; j + 4 <= n; j += 4) {
        float32x4_t x = vmulq_n_f32(vsubq_f32(vld1q_f32(v + j), vld1q_f32(d + j)), beta);
        vst1q_f32(d + j, x);
        vst1q_f32(o + j, vfmaq_n_f32(vld1q_f32(o + j), x, qk));
    }
    for (; j < n; j++) {
        d[j] = (v[j] - d[j]) * beta;
        o[j] = fmaf(qk, d[j], o[j]);
    }
    for (int64_t i = 0; i < n; i++) {
        float *r = t + i * n;
        for (j = 0; j + 4 <= n; j += 4) vst1q_f32(r + j, vfmaq_n_f32(vld1q_f32(r + j), vld1q_f32(d + j), k[i]));
        for (; j < n; j++) r[j] = fmaf(k[i], d[j], r[j]);
    }
}

/* A Mamba-2 scan step (kernels.h): the state as the reference computes
 * it, the sum in two sets of four lanes. The dot-product set inherits it. */
static float scan_step_neon(float *st, const float *b, const float *c, float da, float xdt, int64_t n)
{
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t s0 = vaddq_f32(vmulq_n_f32(vld1q_f32(st + i), da), vmulq_n_f32(vld1q_f32(b + i), xdt));
        float32x4_t s1 = vaddq_f32(vmulq_n_f32(vld1q_f32(st + i + 4), da), vmulq_n_f32(vld1q_f32(b + i + 4), xdt));
        vst1q_f32(st + i, s0);
        vst1q_f32(st + i + 4, s1);
        a0 = vfmaq_f32(a0, s0, vld1q_f32(c + i));
        a1 = vfmaq_f32(a1, s1, vld1q_f32(c + i + 4));
    }
    return rkm_scan_tail(st, b, c, da, xdt, i, n, vaddvq_f32(vaddq_f32(a0, a1)));
}

/* A causal convolution's step (kernels.h) four channels at a time, each
 * lane doing the reference's fused multiply-adds in its order. The
 * dot-product set inherits it. */
static void conv_step_neon(float *win, const float *w, const float *x, int64_t ch, int K, float *out)
{
    int64_t c = 0;
    for (; c + 4 <= ch; c += 4) {
        float32x4_t xc = vld1q_f32(x + c), acc = vdupq_n_f32(0.0f);
        for (int k = 0; k < K - 1; k++)
            acc = vfmaq_f32(acc, vld1q_f32(w + (int64_t)k * ch + c), vld1q_f32(win + (int64_t)k * ch + c));
        acc = vfmaq_f32(acc, vld1q_f32(w + (int64_t)(K - 1) * ch + c), xc);
        for (int k = 0; k + 1 < K - 1; k++) vst1q_f32(win + (int64_t)k * ch + c, vld1q_f32(win + (int64_t)(k + 1) * ch + c));
        if (K > 1) vst1q_f32(win + (int64_t)(K - 2) * ch + c, xc);
        vst1q_f32(out + c, acc);
    }
    rkm_conv_cols(win, w, x, ch, K, c, out);
}

const rkm_kernel_set rkm_kernels_neon = {
    .name = "neon",
    .quantize_act = quantize_act_neon,
    .quantize_act_k = quantize_act_k_neon,
    .mm_f32 = mm_f32_neon,
    .mm_f16 = mm_f16_neon,
    .mm_q8_0 = mm_q8_0_neon,
    .mm_q4_0 = mm_q4_0_neon,
    .mm_bf16 = mm_bf16_neon,
    .mm_q4_1 = mm_q4_1_neon,
    .mm_q5_0 = mm_q5_0_neon,
    .mm_q5_1 = mm_q5_1_neon,
    .mm_q2_k = mm_q2_k_neon,
    .mm_q3_k = mm_q3_k_neon,
    .mm_q4_k = mm_q4_k_neon,
    .mm_q5_k = mm_q5_k_neon,
    .mm_q6_k = mm_q6_k_neon,
    .mm_iq4_nl = mm_iq4_nl_neon,
    .mm_iq4_xs = mm_iq4_xs_neon,
    .mm_mxfp4 = mm_mxfp4_neon,
    .mm_grid = mm_grid_neon,
    .mm_q8_0_p = mm_q8_0_p_neon,
    .mm_q4_0_p = mm_q4_0_p_neon,
    .mm_mxfp4_p = mm_mxfp4_p_neon,
    .mm_iq4_nl_p = mm_iq4_nl_p_neon,
    .mm_iq4_xs_p = mm_iq4_xs_p_neon,
    .mm_q3_k_p = mm_q3_k_p_neon,
    .mm_q2_k_p = mm_q2_k_p_neon,
    .mm_q4_k_p = mm_q4_k_p_neon,
    .mm_q5_k_p = mm_q5_k_p_neon,
    .mm_q6_k_p = mm_q6_k_p_neon,
    .rmsnorm = rmsnorm_neon,
    .softmax = softmax_neon,
    .swiglu = swiglu_neon,
    .geglu = geglu_neon,
    .gelu = gelu_neon,
    .f32_to_f16 = f32_to_f16_neon,
    .f16_to_f32 = f16_to_f32_neon,
    .dot_f32_f16 = dot_f32_f16_neon,
    .axpy_f16 = axpy_f16_neon,
    .delta_step = delta_step_neon,
    .scan_step = scan_step_neon,
    .conv_step = conv_step_neon,
    .dot_f32_f16_rows = dot_f32_f16_rows_neon,
    .axpy_f16_rows = axpy_f16_rows_neon,
    .read_sum = read_sum_neon,
};
