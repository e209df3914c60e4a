/*
 * quant.h - tensor element types and their block layouts, shared by the
 * file formats (GGUF, .rkmojo), the converter and the kernels.
 *
 * Type numbers are ggml's (GGUF stores them), so a .rkmojo dtype and a GGUF
 * tensor type are the same integer. Layouts (little-endian, blocks along the
 * contiguous dimension ne[0]):
 *   Q8_0: 32 values = f16 d + int8 q[32]              (34 bytes), x = d*q
 *   Q4_0: 32 values = f16 d + uint8 qs[16]            (18 bytes),
 *         x[i] = d*((qs[i] & 15) - 8), x[i+16] = d*((qs[i] >> 4) - 8)
 *   Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ1_S..IQ4_XS, TQ1_0, TQ2_0, MXFP4:
 *   ggml's layouts (ggml-common.h); the byte layout of each is written
 *   next to its decoder (quant.c for the K-quants, quant_iq.c for the
 *   others). Q4_1, Q5_*, Q2_K..Q6_K, every IQ type and MXFP4 run
 *   natively (rkm_type_matmul); TQ1_0 and TQ2_0 are dequantized by the
 *   converter (to q8_0, without loss). Of
 *   these, Q4_1, Q5_0 and Q5_1 can also be written (quant.c, ggml's
 *   reference rounding), and Q2_K..Q6_K, IQ4_NL, IQ4_XS and MXFP4
 *   (quantize_k.c, ggml's searches without an importance matrix).
 *   Q8_1, Q8_K: ggml's intermediate types, known but not readable.
 *
 * Owns: the type table and the scalar quantize/dequantize references
 * (quant.c, quant_iq.c, quantize_k.c). No state; safe from any thread.
 */
#ifndef RKM_QUANT_H
#define RKM_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/fp16.h"

enum rkm_type {
    RKM_TYPE_F32 = 0,
    RKM_TYPE_F16 = 1,
    RKM_TYPE_Q4_0 = 2,
    RKM_TYPE_Q4_1 = 3,
    RKM_TYPE_Q5_0 = 6,
    RKM_TYPE_Q5_1 = 7,
    RKM_TYPE_Q8_0 = 8,
    RKM_TYPE_Q8_1 = 9,
    RKM_TYPE_Q2_K = 10,
    RKM_TYPE_Q3_K = 11,
    RKM_TYPE_Q4_K = 12,
    RKM_TYPE_Q5_K = 13,
    RKM_TYPE_Q6_K = 14,
    RKM_TYPE_Q8_K = 15,
    RKM_TYPE_IQ2_XXS = 16,
    RKM_TYPE_IQ2_XS = 17,
    RKM_TYPE_IQ3_XXS = 18,
    RKM_TYPE_IQ1_S = 19,
    RKM_TYPE_IQ4_NL = 20,
    RKM_TYPE_IQ3_S = 21,
    RKM_TYPE_IQ2_S = 22,
    RKM_TYPE_IQ4_XS = 23,
    RKM_TYPE_IQ1_M = 29,
    RKM_TYPE_BF16 = 30,
    RKM_TYPE_TQ1_0 = 34,
    RKM_TYPE_TQ2_0 = 35,
    RKM_TYPE_MXFP4 = 39,
    /* rkmojo's own, never in a GGUF: int8 per-output-channel in the
     * RK3588 NPU's native B layout + f32 scales (kernels/rknn_i8.h); a
     * matrix of N rows of K is K*N + 4*N bytes ("row" = K + 4 bytes). */
    RKM_TYPE_RKNN_I8 = 64,
    RKM_TYPE_COUNT = 65
};
/* Flag on Q8_0 / Q4_0: rows interleaved in groups of 16 (the matmuls'
 * packed layout, kernels.h), named "q8_0_x16" / "q4_0_x16". Same bytes
 * per row as the plain type; routed-expert parts may be stored so. */
#define RKM_TYPE_PACKED 0x100
/* 1 for the packed types (q8_0_x16, q4_0_x16), else 0. */
int rkm_type_packed(int type);

#define RKM_QK8_0 32
#define RKM_QK4_0 32
#define RKM_QK_K 256

typedef struct {
    rkm_f16 d;
    int8_t qs[RKM_QK8_0];
} rkm_block_q8_0;

typedef struct {
    rkm_f16 d;
    uint8_t qs[RKM_QK4_0 / 2];
} rkm_block_q4_0;

_Static_assert(sizeof(rkm_block_q8_0) == 34, "q8_0 block is 34 bytes");
_Static_assert(sizeof(rkm_block_q4_0) == 18, "q4_0 block is 18 bytes");

/* A block's little-endian fields: u16, u32, and an f16 as float. */
static inline unsigned rkm_le16(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }
static inline uint32_t rkm_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline float rkm_f16_le(const uint8_t *p) { return rkm_f16_to_f32((rkm_f16)rkm_le16(p)); }

/* MXFP4's scale: 2^(e-128) exactly (its levels are stored doubled);
 * subnormal for e < 2. */
static inline float rkm_e8m0_half(uint8_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float d;
    memcpy(&d, &bits, 4);
    return d;
}

/* Name ("f32", "q8_0", ...) or NULL for an unknown type. */
const char *rkm_type_name(int type);
/* Parses a name (case-insensitive); -1 if unknown. */
int rkm_type_from_name(const char *name);
/* Values per block (1 for f32/f16/bf16) and bytes per block; 0 if unknown. */
int rkm_type_block_size(int type);
size_t rkm_type_block_bytes(int type);
/* Bytes of a row of n values; 0 if n is not a multiple of the block size
 * or the type is unknown. */
size_t rkm_type_row_bytes(int type, int64_t n);
/* True if the converter can read (dequantize) this type. */
int rkm_type_readable(int type);
/* True if the matmuls (kernels.h) run weights of this type natively: F32,
 * F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, MXFP4 and the
 * packed forms. */
int rkm_type_matmul(int type);
/* 1 for the IQ1-IQ3 grid types: IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S. */
int rkm_type_grid(int type);

/* The first value (f32, f16, bf16) or block (the f16 scales of the block
 * types) of a row of n values that is NaN or infinite, or -1: a row the
 * converter may copy as it is must not hold one. MXFP4's E8M0 scales
 * are always finite; IQ1_M's f16 scale is gathered from four nibbles. */
int64_t rkm_row_find_nonfinite(int type, const void *row, int64_t n);

/* Reference conversions of one row of n values (n a multiple of the block
 * size). dequantize supports every readable type, bit for bit as ggml's
 * to_float (tests/test-ggml-types.c); any bytes are valid input. */
void rkm_dequantize_row(int type, const void *src, float *dst, int64_t n);
/* One block of an IQ, TQ or MXFP4 type (quant_iq.c); 0 if type is one of
 * them, else -1 and y untouched. */
int rkm_dequantize_block_iq(int type, const uint8_t *b, float *y);
/* quantize supports F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (quant.c,
 * the bytes of ggml's quantize_row_*_ref) and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
 * IQ4_NL, IQ4_XS, MXFP4 (rkm_quantize_row_k); any other type gives a
 * zeroed row. The searched types saturate their f16 scales, so every
 * finite input decodes to finite values; the 32-value types keep ggml's
 * reference bytes, whose f16 scale becomes inf for blocks beyond about
 * 65504 times their number of levels. NaN and infinities are safe but
 * meaningless. */
void rkm_quantize_row(int type, const float *src, void *dst, int64_t n);
/* The types of quantize_k.c, with the bytes of ggml_quantize_chunk(type,
 * ..., imatrix NULL) for finite inputs in the type's range; 0 if type is
 * one of them, else -1 and dst untouched. */
int rkm_quantize_row_k(int type, const float *src, void *dst, int64_t n);

void rkm_quantize_row_q8_0(const float *x, rkm_block_q8_0 *y, int64_t n);
/* q8_0 without loss for the types whose values are an f16 scale times
 * small integers (Q5_0, TQ1_0, TQ2_0): y takes each source block's scale
 * and deq / d. deq is the row as rkm_dequantize_row gives it. 1 if every
 * block was exact (y then dequantizes to deq bit for bit), else 0 (y
 * undefined: quantize it as usual). */
int rkm_quantize_row_q8_0_exact(int type, const void *src, const float *deq, rkm_block_q8_0 *y, int64_t n);
/* 1 for the types rkm_quantize_row_q8_0_exact converts. */
int rkm_type_q8_0_exact(int type);
void rkm_quantize_row_q4_0(const float *x, rkm_block_q4_0 *y, int64_t n);

#endif
