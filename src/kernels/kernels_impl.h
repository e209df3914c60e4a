/*
 * kernels_impl.h - internal interface between the kernel dispatcher
 * (dispatch.c), the scalar reference (kernels_ref.c) and the per-ISA
 * implementations (arch/x86, arch/arm). Not part of the public API.
 *
 * Each implementation fills an rkm_kernel_set; entries it leaves NULL fall
 * back to the reference. Kernels are stateless and thread-safe.
 *
 * Quantized activations ("q8 activations"): the matmul driver quantizes
 * each row of X to q8_0 exactly like ggml's quantize_row_q8_0 (blocks of
 * 32, d = max|x|/127 rounded to fp16, q = roundf(x/d)) but stores them as
 * structure-of-arrays so SIMD loads are aligned and the scale is already a
 * float:
 *   qs[i*nb*32 + b*32 + j]  int8 values (row i, block b)
 *   d[i*nb + b]             the fp16-rounded scale, as float
 *   s[i*nb + b]             sum of the 32 qs of the block (q4_0 weights
 *                           store nibbles 0..15 = value + 8, so
 *                           sum(w*x) = sum(nib*x) - 8*s exactly)
 * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights take these. The
 * K-quants, IQ4_XS and the grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
 * IQ2_S, IQ3_XXS, IQ3_S; super-blocks of 256) take "q8_K activations", as ggml's Q8_K: blocks
 * of 256 with an unrounded float scale (the value m of largest magnitude
 * maps to -127: d = 1/(-127/m), q = rint(x/d)), in the same arrays:
 *   qs[i*n_in + k]          int8 values
 *   d[i*(n_in/256) + b]     the block's scale
 *   s[i*(n_in/16) + g]      sum of the 16 qs of group g (the sub-block
 *                           mins of Q2_K, Q4_K, Q5_K multiply these)
 *
 * Native weight blocks in integer form (rkm_qblock, qblock.c): every block
 * of the types above is d * sc[s] * q[k] - dmin * mn[s] for value k of
 * sub-block s = k / sub, with int8 q and small integer sc, mn. Against
 * activations (dx, qx) of the same block, each kernel set computes
 *   isum = sum_s sc[s] * sum_{k in s} q[k] qx[k]     (exact, int32)
 *   msum = sum_s mn[s] * sum_{k in s} qx[k]          (exact, int32)
 *   acc = fmaf(d * dx, (float)isum, acc)
 *   acc = fmaf(-(dmin * dx), (float)msum, acc)       (K-quants with mins)
 *   acc = fmaf(-dmin, xm, acc)                       (q4_1, q5_1: dmin = -m)
 * where xm, per block of 32 activations, is ggml's q8_1 "s": the block's
 * unrounded scale amax/127 times sum qx, rounded to f16 (as llama.cpp
 * computes the min term of these two types),
 * block after block, so every set gives bit-identical results for these
 * types, at any m, thread count or row split (tests/test-kernels-types.c).
 * The grid types' sub-block scales are (2s+1)/8, (2s+1)/4 or 2s+1 times
 * d: their integer form takes sc = 2s+1 and d/8, d/4 or d (exact).
 */
#ifndef RKM_KERNELS_IMPL_H
#define RKM_KERNELS_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

/* One matmul job: Y[i][r] for activation rows i in [0, m) and weight rows
 * r in [r0, r1) (the range is passed separately). */
typedef struct {
    const void *w;       /* n_out rows of w_row_bytes */
    size_t w_row_bytes;
    int64_t n_in, n_out, m;
    const float *x;      /* f32 activations, row stride n_in (F32/F16 weights) */
    const int8_t *xq;    /* q8 activations (Q8_0/Q4_0 weights), see above */
    const float *xd;
    const int32_t *xs;
    const float *xm;     /* per 32 q8 activations: f16(amax/127 * sum) (Q4_1/Q5_1) */
    float *y;
    int64_t ldy;
    int type;            /* the weight type (for entries serving several) */
} rkm_mm_args;

typedef void (*rkm_mm_fn)(const rkm_mm_args *a, int64_t r0, int64_t r1);

typedef struct {
    const char *name;
    /* One-time set-up (tables), run before the set is first used. */
    void (*init)(void);
    /* Quantizes one row of n values (n % 32 == 0) to q8 activations. */
    void (*quantize_act)(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s);
    /* The same to q8_K activations (n % 256 == 0), bit-identical to
     * rkm_quantize_act_k. */
    void (*quantize_act_k)(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s16);
    rkm_mm_fn mm_f32, mm_f16, mm_q8_0, mm_q4_0;
    /* The other native types (bit-identical across sets, see above);
     * K-quants and IQ4_XS take q8_K activations, the rest q8_0. */
    rkm_mm_fn mm_bf16, mm_q4_1, mm_q5_0, mm_q5_1, mm_q2_k, mm_q3_k, mm_q4_k, mm_q5_k, mm_q6_k, mm_iq4_nl, mm_iq4_xs,
        mm_mxfp4;
    /* The grid types (a->type), q8_K activations: rows decoded to integer
     * form (rkm_grid_decode_row) and multiplied as such. */
    rkm_mm_fn mm_grid;
    /* Packed weights (kernels.h): whole groups only, r0 and r1 multiples
     * of RKM_PACK_ROWS; must compute exactly as the reference does. */
    rkm_mm_fn mm_q8_0_p, mm_q4_0_p, mm_mxfp4_p, mm_iq4_nl_p;
    /* Packed Q2_K..Q6_K and IQ4_XS (q8_K activations). */
    rkm_mm_fn mm_q2_k_p, mm_q3_k_p, mm_q4_k_p, mm_q5_k_p, mm_q6_k_p, mm_iq4_xs_p;
    void (*rmsnorm)(float *out, const float *x, const float *w, int64_t n, float eps);
    void (*softmax)(float *x, int64_t n);
    void (*swiglu)(float *out, const float *g, const float *u, int64_t n);
    void (*geglu)(float *out, const float *g, const float *u, int64_t n);
    void (*gelu)(float *out, const float *x, int64_t n);
    void (*f32_to_f16)(const float *x, rkm_f16 *y, int64_t n);
    void (*f16_to_f32)(const rkm_f16 *x, float *y, int64_t n);
    float (*dot_f32_f16)(const float *x, const rkm_f16 *y, int64_t n);
    void (*axpy_f16)(float *y, float a, const rkm_f16 *x, int64_t n);
    /* rkm_delta_step (kernels.h); every set computes each element with the
     * reference's multiplies and fused multiply-adds in its order. */
    void (*delta_step)(float *t, const float *q, const float *k, const float *v, float decay, float beta, float qk,
                       int64_t n, float *o, float *d);
    /* rkm_scan_step (kernels.h): the state's elements exactly as the
     * reference computes them; the sum in the set's own order. */
    float (*scan_step)(float *st, const float *b, const float *c, float da, float xdt, int64_t n);
    /* rkm_conv_step (kernels.h); every set does the reference's fused
     * multiply-adds in its order (rkm_conv_cols). */
    void (*conv_step)(float *win, const float *w, const float *x, int64_t ch, int K, float *out);
    /* Many rows at once (attention over the KV cache), each row computed
     * exactly as the single-row entry above does; optional: NULL runs the
     * single-row entry row by row (dispatch.c). */
    void (*dot_f32_f16_rows)(const float *x, const rkm_f16 *y, int64_t stride, int64_t rows, int64_t n, float *out);
    void (*axpy_f16_rows)(float *y, const float *a, const rkm_f16 *x, int64_t stride, int64_t rows, int64_t n);
    /* The memory-bandwidth probe's read (membw.c): a checksum of n words
     * (n % 64 == 0, p 64-byte aligned) read with the widest loads the set
     * has; streams 1 reads them in order, 4 as four interleaved streams
     * with software prefetch ahead (the decode kernels' pattern). */
    uint64_t (*read_sum)(const uint64_t *p, size_t n, int streams);
} rkm_kernel_set;

/* The scalar pieces of the recurrent kernels, which the reference is made
 * of and the SIMD sets use past their last whole block, so that every set
 * computes those elements with the same operations.
 * rkm_delta_cols: rkm_delta_step's first pass over value columns [j0, n):
 * the decay, then k^T t into d and q^T t into o, rows in order. */
static inline void rkm_delta_cols(float *t, const float *q, const float *k, float decay, int64_t n, int64_t j0, float *o,
                                  float *d)
{
    for (int64_t j = j0; j < n; j++) {
        float s = 0.0f, a = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            float x = t[i * n + j] * decay;
            t[i * n + j] = x;
            s = fmaf(k[i], x, s);
            a = fmaf(q[i], x, a);
        }
        d[j] = s;
        o[j] = a;
    }
}

/* rkm_scan_step over the state values [i0, n), added to sum. */
static inline float rkm_scan_tail(float *st, const float *b, const float *c, float da, float xdt, int64_t i0, int64_t n,
                                  float sum)
{
    for (int64_t i = i0; i < n; i++) {
        st[i] = st[i] * da + b[i] * xdt;
        sum += st[i] * c[i];
    }
    return sum;
}

/* rkm_conv_step over the channels [c0, ch). */
static inline void rkm_conv_cols(float *win, const float *w, const float *x, int64_t ch, int K, int64_t c0, float *out)
{
    for (int64_t c = c0; c < ch; c++) {
        float xc = x[c], acc = 0.0f;
        for (int k = 0; k < K - 1; k++) acc = fmaf(w[(int64_t)k * ch + c], win[(int64_t)k * ch + c], acc);
        acc = fmaf(w[(int64_t)(K - 1) * ch + c], xc, acc);
        for (int k = 0; k + 1 < K - 1; k++) win[(int64_t)k * ch + c] = win[(int64_t)(k + 1) * ch + c];
        if (K > 1) win[(int64_t)(K - 2) * ch + c] = xc;
        out[c] = acc;
    }
}

/* The reference (every entry set). */
extern const rkm_kernel_set rkm_kernels_ref;

/* Per-ISA sets; defined only on their architecture. */
#if defined(__x86_64__)
extern const rkm_kernel_set rkm_kernels_avx2;
extern const rkm_kernel_set rkm_kernels_avx512;
extern const rkm_kernel_set rkm_kernels_avx512vnni;
extern const rkm_kernel_set rkm_kernels_avxvnni;
#endif
#if defined(__aarch64__)
extern const rkm_kernel_set rkm_kernels_neon;
extern const rkm_kernel_set rkm_kernels_dotprod;
#endif

/* Packed-layout block sizes (bytes of one block of a 16-row group). */
#define RKM_PK_Q4_0_BLOCK (RKM_PACK_ROWS * 18)
#define RKM_PK_Q8_0_BLOCK (RKM_PACK_ROWS * 34)
_Static_assert(RKM_PK_Q4_0_BLOCK == 32 + 4 * 64, "packed q4_0 block");
#define RKM_PK_MXFP4_BLOCK (RKM_PACK_ROWS * 17)
_Static_assert(RKM_PK_Q8_0_BLOCK == 32 + 8 * 64, "packed q8_0 block");
_Static_assert(RKM_PK_MXFP4_BLOCK == 16 + 4 * 64, "packed mxfp4 block");

#define RKM_PK_Q4_K_BLOCK (RKM_PACK_ROWS * 144)
_Static_assert(RKM_PK_Q4_K_BLOCK == 256 + 32 * 64, "packed q4_k block");
#define RKM_PK_Q5_K_BLOCK (RKM_PACK_ROWS * 176)
_Static_assert(RKM_PK_Q5_K_BLOCK == 256 + 40 * 64, "packed q5_k block");
#define RKM_PK_Q6_K_BLOCK (RKM_PACK_ROWS * 210)
_Static_assert(RKM_PK_Q6_K_BLOCK == 288 + 48 * 64, "packed q6_k block");
#define RKM_PK_IQ4_XS_BLOCK (RKM_PACK_ROWS * 136)
_Static_assert(RKM_PK_IQ4_XS_BLOCK == 128 + 32 * 64, "packed iq4_xs block");
#define RKM_PK_Q3_K_BLOCK (RKM_PACK_ROWS * 110)
_Static_assert(RKM_PK_Q3_K_BLOCK == 224 + 24 * 64, "packed q3_k block");
#define RKM_PK_Q2_K_BLOCK (RKM_PACK_ROWS * 84)
_Static_assert(RKM_PK_Q2_K_BLOCK == 320 + 16 * 64, "packed q2_k block");

/* The packed block's bytes for a plain type (0: not packable) and the
 * values one block holds. IQ4_NL's packed block is q4_0's. */
static inline size_t rkm_pk_block(int type)
{
    return type == RKM_TYPE_Q8_0                              ? RKM_PK_Q8_0_BLOCK
           : type == RKM_TYPE_Q4_0 || type == RKM_TYPE_IQ4_NL ? RKM_PK_Q4_0_BLOCK
           : type == RKM_TYPE_MXFP4                           ? RKM_PK_MXFP4_BLOCK
           : type == RKM_TYPE_Q4_K                            ? RKM_PK_Q4_K_BLOCK
           : type == RKM_TYPE_Q5_K                            ? RKM_PK_Q5_K_BLOCK
           : type == RKM_TYPE_Q6_K                            ? RKM_PK_Q6_K_BLOCK
           : type == RKM_TYPE_IQ4_XS                          ? RKM_PK_IQ4_XS_BLOCK
           : type == RKM_TYPE_Q3_K                            ? RKM_PK_Q3_K_BLOCK
           : type == RKM_TYPE_Q2_K                            ? RKM_PK_Q2_K_BLOCK
                                                              : 0;
}
static inline int rkm_pk_values(int type) { return rkm_type_block_size(type); }
/* The bytes of one row's block head (its scales: q4_0's d, Q4_K's d, dmin
 * and 12 scale bytes, ...), which the packed block leads with, field by
 * field (pack.c's table, kernels.h's layouts). */
size_t rkm_pk_scale_bytes(int type);
/* Row r (0..15) of the packed block o of plain type, as its plain block's
 * bytes at row (pack.c; the reference kernels read packed rows with it). */
void rkm_pk_unpack_row(int type, const uint8_t *o, int r, uint8_t *row);

/* The active set (after rkm_kernels_init), every entry non-NULL. */
const rkm_kernel_set *rkm_kernels_active(void);

/* A 64-byte aligned buffer of at least bytes, private to the calling
 * thread and reused by its next call (kernels' temporary repacking). */
void *rkm_kernel_scratch(size_t bytes);

/* Shared by the reference and the SIMD quantizers' tails: ggml's rounding
 * (roundf: half away from zero) of x * (1/d). */
void rkm_quantize_act_ref(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s);
/* q8_K activations of one row of n values (n % 256 == 0), above: the
 * reference of the sets' quantize_act_k. */
void rkm_quantize_act_k(const float *x, int64_t n, int8_t *qs, float *d, int32_t *s16);

/* ------------------------------------------- weight blocks, integer form */
typedef struct {
    int8_t q[256];
    int16_t sc[16], mn[16]; /* per sub-block; mn all 0 unless has_min */
    float d, dmin;
    int sub;                /* sub-block length: 16 or 32 */
    int has_min;
} rkm_qblock;
/* Values per block of a native type (32 or 256), 0 for the others. */
int rkm_qblock_values(int type);
/* Block b (rkm_type_block_bytes(type) bytes) in integer form; 0, or -1
 * if the type has none. Any bytes are valid input. */
int rkm_qblock_unpack(int type, const uint8_t *b, rkm_qblock *o);
/* 1 if type takes q8_K activations. */
int rkm_type_acts_k(int type);

/* The grid types' fast decoder (grid_rows.c) for the SIMD sets: nb
 * super-blocks of one row into q (256 int8 values each), sc (16 int16
 * scales each, one per 16 values: the 32-value sub-blocks' scale twice)
 * and d (one float each), exactly the integer form rkm_qblock_unpack
 * gives. 0, or -1 if type is not a grid type. Any bytes are valid input. */
int rkm_grid_decode_row(int type, const uint8_t *w, int64_t nb, int8_t *q, int16_t *sc, float *d);

#endif
