/*
 * kernels_avx512.c - AVX-512 (F/BW/VL/DQ, without VNNI: Skylake-SP,
 * Cascade Lake without it enabled, ...) quantized matmuls; the body is
 * avx512_impl.h. The other entries come from the AVX2 set (dispatch.c
 * chains them). Stateless.
 */
#define RKM_AVX512_VNNI 0
#include "kernels/arch/x86/avx512_impl.h"

Z_DEFINE_MM(mm_q8_0_avx512, z_q8_0_tile)
Z_DEFINE_MM(mm_q4_0_avx512, z_q4_0_tile)

const rkm_kernel_set rkm_kernels_avx512 = {
    .name = "avx512",
    .mm_q8_0 = mm_q8_0_avx512,
    .mm_q4_0 = mm_q4_0_avx512,
};
