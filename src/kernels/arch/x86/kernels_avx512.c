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

/* The bandwidth probe's read (kernels_impl.h) with 512-bit loads; the
 * AVX-512 VNNI set inherits it. */
static uint64_t read_sum_avx512(const uint64_t *p, size_t n, int streams)
{
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    if (streams == 4) {
        size_t q = n / 4;
        const uint64_t *a = p, *b = a + q, *c = b + q, *d = c + q;
        for (size_t i = 0; i < q; i += 8) {
            _mm_prefetch((const char *)(a + i) + 2048, _MM_HINT_T0);
            _mm_prefetch((const char *)(b + i) + 2048, _MM_HINT_T0);
            _mm_prefetch((const char *)(c + i) + 2048, _MM_HINT_T0);
            _mm_prefetch((const char *)(d + i) + 2048, _MM_HINT_T0);
            s0 = _mm512_add_epi64(s0, _mm512_load_si512(a + i));
            s1 = _mm512_add_epi64(s1, _mm512_load_si512(b + i));
            s2 = _mm512_add_epi64(s2, _mm512_load_si512(c + i));
            s3 = _mm512_add_epi64(s3, _mm512_load_si512(d + i));
        }
    } else {
        for (size_t i = 0; i < n; i += 32) {
            s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
            s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 8));
            s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 16));
            s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 24));
        }
    }
    s0 = _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3));
    /* lanes summed unsigned: _mm512_reduce_add_epi64 adds signed (UB on wrap) */
    uint64_t o[8], r = 0;
    _mm512_storeu_si512(o, s0);
    for (int i = 0; i < 8; i++) r += o[i];
    return r;
}

const rkm_kernel_set rkm_kernels_avx512 = {
    .name = "avx512",
    .mm_q8_0 = mm_q8_0_avx512,
    .mm_q4_0 = mm_q4_0_avx512,
    .read_sum = read_sum_avx512,
};
