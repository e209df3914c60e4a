/*
 * kernels_avx512vnni.c - AVX-512 VNNI (vpdpbusd: Ice Lake, Sapphire
 * Rapids, Zen 4 and later) quantized matmuls; the body is avx512_impl.h.
 * The other entries come from the AVX-512 and AVX2 sets (dispatch.c
 * chains them). Stateless.
 */
#define RKM_AVX512_VNNI 1
#include "kernels/arch/x86/avx512_impl.h"
#include "kernels/arch/x86/kquant_x86.h"

Z_DEFINE_MM(mm_q8_0_tiles, z_q8_0_tile)

static void mm_q8_0_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    if (a->m >= IL_MIN_M) mm_q8_0_il(a, r0, r1);
    else mm_q8_0_tiles(a, r0, r1);
}
Z_DEFINE_MM(mm_q4_0_tiles, z_q4_0_tile)

static void mm_q4_0_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1)
{
    if (a->m >= IL_MIN_M) mm_q4_0_il(a, r0, r1);
    else mm_q4_0_tiles(a, r0, r1);
}

static void mm_q8_0_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk_mm(a, r0, r1, RKM_TYPE_Q8_0); }
static void mm_q4_0_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk_mm(a, r0, r1, RKM_TYPE_Q4_0); }
static void mm_mxfp4_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk_mm(a, r0, r1, RKM_TYPE_MXFP4); }
static void mm_iq4_nl_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1) { pk_mm(a, r0, r1, RKM_TYPE_IQ4_NL); }

const rkm_kernel_set rkm_kernels_avx512vnni = {
    .name = "avx512vnni",
    .mm_q8_0 = mm_q8_0_avx512vnni,
    .mm_q4_0 = mm_q4_0_avx512vnni,
    .mm_q8_0_p = mm_q8_0_p_avx512vnni,
    .mm_q4_0_p = mm_q4_0_p_avx512vnni,
    .mm_mxfp4_p = mm_mxfp4_p_avx512vnni,
    .mm_iq4_nl_p = mm_iq4_nl_p_avx512vnni,
    .mm_iq4_xs_p = rkm_mm_iq4_xs_p_avx512vnni,
    .mm_q3_k_p = rkm_mm_q3_k_p_avx512vnni,
    .mm_q2_k_p = rkm_mm_q2_k_p_avx512vnni,
    .mm_q4_k_p = rkm_mm_q4_k_p_avx512vnni,
    .mm_q5_k_p = rkm_mm_q5_k_p_avx512vnni,
    .mm_q6_k_p = rkm_mm_q6_k_p_avx512vnni,
    .mm_q2_k = rkm_mm_q2_k_avx512vnni,
    .mm_q3_k = rkm_mm_q3_k_avx512vnni,
    .mm_q4_k = rkm_mm_q4_k_avx512vnni,
    .mm_q5_k = rkm_mm_q5_k_avx512vnni,
    .mm_q6_k = rkm_mm_q6_k_avx512vnni,
    .mm_iq4_xs = rkm_mm_iq4_xs_avx512vnni,
    .mm_q4_1 = rkm_mm_q4_1_avx512vnni,
    .mm_q5_0 = rkm_mm_q5_0_avx512vnni,
    .mm_q5_1 = rkm_mm_q5_1_avx512vnni,
    .mm_iq4_nl = rkm_mm_iq4_nl_avx512vnni,
    .mm_mxfp4 = rkm_mm_mxfp4_avx512vnni,
};
