/*
 * kernels_neon.c - baseline ARMv8.0 NEON (every AArch64 core: Cortex-A53/A55/A72, ...)
 * kernels; the body is neon_impl.h, compiled with this file's flags
 * (Makefile, by suffix). Stateless.
 */
#define RKM_NEON_DOTPROD 0
#define RKM_NEON_SUFFIX neon
#include "kernels/arch/arm/neon_impl.h"

const rkm_kernel_set rkm_kernels_neon = {
    .name = "neon",
    .quantize_act = quantize_act_neon,
    .mm_f32 = mm_f32_neon,
    .mm_f16 = mm_f16_neon,
    .mm_q8_0 = mm_q8_0_neon,
    .mm_q4_0 = mm_q4_0_neon,
    .mm_q8_0_p = mm_q8_0_p_neon,
    .mm_q4_0_p = mm_q4_0_p_neon,
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
};
