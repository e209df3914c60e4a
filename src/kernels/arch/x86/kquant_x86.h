/*
 * kquant_x86.h - the x86 matmuls of the K-quants, IQ4, MXFP4 and the
 * IQ1-IQ3 grid types (kquant_avx2.c, kquant_avx512vnni.c), for the x86
 * kernel sets to take.
 * Stateless.
 */
#ifndef RKM_KQUANT_X86_H
#define RKM_KQUANT_X86_H

#include "kernels/kernels_impl.h"

void rkm_mm_q4_1_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q5_0_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q5_1_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q2_k_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q3_k_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q4_k_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q5_k_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q6_k_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_iq4_xs_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_iq4_nl_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_mxfp4_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
/* the grid types (a->type) */
void rkm_mm_grid_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
/* packed Q4_K, Q5_K and Q6_K (kernels.h): whole 16-row groups */
void rkm_mm_q4_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q5_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q6_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_iq4_xs_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q3_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q2_k_p_avx2(const rkm_mm_args *a, int64_t r0, int64_t r1);

/* kquant_avx512vnni.c */
void rkm_mm_q2_k_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q3_k_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q4_k_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q5_k_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q6_k_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_iq4_xs_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q4_1_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q5_0_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q5_1_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_iq4_nl_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_mxfp4_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
/* packed Q4_K, Q5_K and Q6_K (kernels.h): whole 16-row groups */
void rkm_mm_q4_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q5_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q6_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_iq4_xs_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q3_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);
void rkm_mm_q2_k_p_avx512vnni(const rkm_mm_args *a, int64_t r0, int64_t r1);

#endif
