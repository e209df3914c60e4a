/*
 * kernels_dotprod.c - ARMv8.2 dot product (sdot) + fp16 (Cortex-A55/A76 and later; the RK3588)
 * kernels; the body is neon_impl.h and neon_qblock.h, compiled with this file's flags
 * (Makefile, by suffix). Stateless.
 */
#define RKM_NEON_DOTPROD 1
#define RKM_NEON_SUFFIX dotprod
#include "kernels/arch/arm/neon_impl.h"
#include "kernels/arch/arm/neon_qblock.h"

const rkm_kernel_set rkm_kernels_dotprod = {
    .name = "dotprod",
    .quantize_act = quantize_act_dotprod,
    .quantize_act_k = quantize_act_k_dotprod,
    .mm_f32 = mm_f32_dotprod,
    .mm_f16 = mm_f16_dotprod,
    .mm_q8_0 = mm_q8_0_dotprod,
    .mm_q4_0 = mm_q4_0_dotprod,
    .mm_bf16 = mm_bf16_dotprod,
    .mm_q4_1 = mm_q4_1_dotprod,
    .mm_q5_0 = mm_q5_0_dotprod,
    .mm_q5_1 = mm_q5_1_dotprod,
    .mm_q2_k = mm_q2_k_dotprod,
    .mm_q3_k = mm_q3_k_dotprod,
    .mm_q4_k = mm_q4_k_dotprod,
    .mm_q5_k = mm_q5_k_dotprod,
    .mm_q6_k = mm_q6_k_dotprod,
    .mm_iq4_nl = mm_iq4_nl_dotprod,
    .mm_iq4_xs = mm_iq4_xs_dotprod,
    .mm_mxfp4 = mm_mxfp4_dotprod,
    .mm_grid = mm_grid_dotprod,
    .mm_q8_0_p = mm_q8_0_p_dotprod,
    .mm_q4_0_p = mm_q4_0_p_dotprod,
    .mm_mxfp4_p = mm_mxfp4_p_dotprod,
    .mm_iq4_nl_p = mm_iq4_nl_p_dotprod,
    .mm_iq4_xs_p = mm_iq4_xs_p_dotprod,
    .mm_q3_k_p = mm_q3_k_p_dotprod,
    .mm_q2_k_p = mm_q2_k_p_dotprod,
    .mm_q4_k_p = mm_q4_k_p_dotprod,
    .mm_q5_k_p = mm_q5_k_p_dotprod,
    .mm_q6_k_p = mm_q6_k_p_dotprod,
    .rmsnorm = rmsnorm_dotprod,
    .softmax = softmax_dotprod,
    .swiglu = swiglu_dotprod,
    .geglu = geglu_dotprod,
    .gelu = gelu_dotprod,
    .f32_to_f16 = f32_to_f16_dotprod,
    .f16_to_f32 = f16_to_f32_dotprod,
    .dot_f32_f16 = dot_f32_f16_dotprod,
    .axpy_f16 = axpy_f16_dotprod,
    .dot_f32_f16_rows = dot_f32_f16_rows_dotprod,
    .axpy_f16_rows = axpy_f16_rows_dotprod,
};
