/*
 * rknn_i8.h - the rknn_i8 weight type (RKM_TYPE_RKNN_I8, docs/FORMAT.md):
 * a matrix W of N output rows by K inputs stored for the NPU, as
 *
 *   K*N int8 values in the RK3588/RK3576 native B layout of an INT8 matmul,
 *       (N/32, K/32, 32, 32): for each 32-row tile of W, for each 32-column
 *       tile, the 32 rows' 32 values; W[n][k] is at byte
 *       ((n/32)*(K/32) + k/32)*1024 + (n%32)*32 + k%32
 *   N f32 per-output-channel scales (W[n][k] ~ scale[n] * q)
 *
 * K and N must be multiples of 32. Activations are quantized per row to
 * int8 (symmetric, scale max|x|/127) and products accumulated in integers;
 * y = acc * (a_scale * b_scale). The NPU path (rknn.c) and the CPU kernel
 * here use the same quantization and the same final conversion, so both
 * give bit-identical outputs whenever the NPU's int32 sums are exact.
 *
 * Stateless; any thread. The CPU kernel is reference-quality plain C
 * (split over the pool by 32-column tiles), the fallback when no NPU is
 * present, not a fast path.
 */
#ifndef RKM_KERNELS_RKNN_I8_H
#define RKM_KERNELS_RKNN_I8_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define RKM_RKNN_I8_TILE 32 /* subN = subK of the int8 native B layout */

/* K, N usable for the type (positive multiples of 32). */
int rkm_rknn_i8_shape_ok(int64_t K, int64_t N);
/* Bytes of one matrix: K*N + 4*N. */
size_t rkm_rknn_i8_bytes(int64_t K, int64_t N);
/* Quantizes W (N rows of K floats, row-major) per output row into dst
 * (rkm_rknn_i8_bytes). A zero row gets scale 0. */
void rkm_rknn_i8_pack(const float *w, int64_t K, int64_t N, void *dst);
/* The same for rows n0..n0+nr-1 of the matrix only (w holds those nr
 * rows; n0 a multiple of 32): the converter packs 32 rows at a time. */
void rkm_rknn_i8_pack_rows(const float *w, int64_t K, int64_t N, int64_t n0, int64_t nr, void *dst);
/* The inverse (for tests and the quality report): W ~ scale * q. */
void rkm_rknn_i8_unpack(const void *src, int64_t K, int64_t N, float *w);
/* The scales of a packed matrix (N floats after the K*N bytes). */
const float *rkm_rknn_i8_scales(const void *src, int64_t K, int64_t N);

/* Per-row symmetric int8 quantization of n values; returns the scale
 * (0 for a zero row). q = round(x / scale), within [-127, 127]. */
float rkm_rknn_quantize_act(const float *x, int64_t n, int8_t *q);
/* The one conversion of an integer sum to float both paths use. */
static inline float rkm_rknn_dequant(int64_t acc, float a_scale, float b_scale)
{
    return (float)acc * (a_scale * b_scale);
}

/* Y[m][N] (row stride ldy) = X[m][K] . W^T on the CPU. */
void rkm_rknn_i8_matmul_cpu(rkm_pool *pool, const void *w, int64_t K, int64_t N, const float *x, int64_t m,
                            float *y, int64_t ldy);

#endif
