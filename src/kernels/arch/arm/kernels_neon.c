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
    .rmsnorm = rmsnorm_neon,
    .softmax = softmax_neon,
    .swiglu = swiglu_neon,
    .geglu = geglu_neon,
    .f32_to_f16 = f32_to_f16_neon,
    .f16_to_f32 = f16_to_f32_neon,
    .dot_f32_f16 = dot_f32_f16_neon,
    .axpy_f16 = axpy_f16_neon,
    .dot_f32_f16_rows = dot_f32_f16_rows_neon,
    .axpy_f16_rows = axpy_f16_rows_neon,
    .read_sum = read_sum_neon,
};
