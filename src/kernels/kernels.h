/*
 * kernels.h - the compute kernels the forward pass calls, and the thread
 * pool that runs them.
 *
 * Every op has a portable scalar reference (kernels_ref.c); the hot ones
 * have per-ISA versions in arch/x86 (AVX2, AVX-512/VNNI) and arch/arm (NEON,
 * dot product), chosen once at start-up (rkm_kernels_init) from the CPU's
 * features. Tests compare each variant with the reference.
 *
 * Matrices follow GGUF: a weight W of type wtype has n_out rows of n_in
 * contiguous values (ggml ne = [n_in, n_out]); y = W x.
 *
 * Threads: the pool is persistent (no thread creation per op); a pool is
 * driven by one thread at a time (its owner), which also does a share of
 * the work. Kernels themselves are stateless.
 */
#ifndef RKM_KERNELS_H
#define RKM_KERNELS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"

/* ------------------------------------------------------------- pool */
typedef struct rkm_pool rkm_pool;
/* n_threads <= 0: the number of performance cores. */
rkm_pool *rkm_pool_new(int n_threads);
void rkm_pool_free(rkm_pool *p);
int rkm_pool_n_threads(const rkm_pool *p);
typedef void (*rkm_pool_fn)(void *ctx, int ith, int nth);
/* Runs fn(ctx, ith, nth) for ith = 0..nth-1 on the pool's threads (the
 * caller runs ith 0) and returns when all are done. p may be NULL (nth 1). */
void rkm_pool_run(rkm_pool *p, rkm_pool_fn fn, void *ctx);
/* The owner is about to block for a while (IO): idle workers sleep at once
 * instead of spinning, until the next rkm_pool_run. */
void rkm_pool_park(rkm_pool *p);
/* Work sharing for pool jobs over rows [0, total): claims the next run of
 * rows from *next (start in *r0, count returned, 0 when none are left).
 * Runs are at most `chunk` rows and shrink to half a fair share of what
 * is left near the end (guided scheduling), so the threads finish
 * together; a run starts at a multiple of `grain` (total itself need not
 * be one). */
int64_t rkm_pool_take(_Atomic int64_t *next, int64_t total, int64_t chunk, int64_t grain, int nth, int64_t *r0);

/* Selects the best implementations for this CPU (idempotent, thread-safe).
 * RKM_KERNELS=ref|avx2|avxvnni|avx512|avx512vnni|neon|dotprod in the
 * environment forces one (docs/KERNELS.md). */
void rkm_kernels_init(void);
/* Name of the selected implementation ("avx512vnni", "dotprod", "ref", ...). */
const char *rkm_kernels_name(void);
/* The implementations this CPU can run, best first (always ends with
 * "ref"): fills up to cap names, returns how many there are. */
int rkm_kernels_list(const char **names, int cap);
/* Switches to the named implementation: 0, RKM_EINVAL (unknown) or
 * RKM_EUNSUPPORTED (CPU lacks it). For tests and benchmarks: not safe
 * while another thread runs a kernel. */
int rkm_kernels_select(const char *name);

/* ------------------------------------------------------------ matmul */
/* Y[m][n_out] (row stride ldy) = X[m][n_in] (row stride n_in) . W^T.
 * wtype: any type rkm_type_matmul (quant.h) accepts. For the quantized types the
 * activations are quantized first, as ggml does (to q8_0 blocks for Q8_0,
 * Q4_0, IQ4_NL, MXFP4; to q8_K super-blocks for the K-quants and IQ4_XS),
 * and multiplied in integers. Rows of W are split across the pool's
 * threads. */
void rkm_matmul(rkm_pool *pool, int wtype, const void *w, int64_t n_in, int64_t n_out,
                const float *x, int64_t m, float *y, int64_t ldy);

/* Batched small matmuls (rkm_mm_multi: gate and up of every expert split
 * in row chunks): rkm_matmul on the calling thread alone that reuses the
 * activations it quantized for this thread's previous rkm_matmul_reuse
 * when x, n_in and m are the same and no rkm_matmul_reuse_begin (nor plain
 * rkm_matmul) came in between. The caller guarantees that x's contents did
 * not change since: call rkm_matmul_reuse_begin at the start of each job. */
void rkm_matmul_reuse_begin(void);
void rkm_matmul_reuse(int wtype, const void *w, int64_t n_in, int64_t n_out, const float *x, int64_t m, float *y,
                      int64_t ldy);

/* ------------------------------------------- packed (interleaved) rows
 * A layout of q8_0 / q4_0 / MXFP4 / IQ4_NL / Q2_K..Q6_K / IQ4_XS matrices for the
 * matmuls: type RKM_TYPE_PACKED | RKM_TYPE_Q8_0 (or any of the others), quant.h. Made at load for resident matrices;
 * routed experts are stored in it by `rkmojo convert` (docs/FORMAT.md), so
 * a read expert needs no repacking. Rows go in groups
 * of RKM_PACK_ROWS = 16; within a group, block b (values 32b..32b+31) of
 * the 16 rows is stored as
 *   16 scales (row order): fp16, 32 bytes (MXFP4: exponent bytes, 16), then
 *   q4_0: 4 x 64 bytes: part h (0..3) holds, for rows 0..15, 4 bytes each:
 *         bytes 4h..4h+3 of the row's qs (low nibbles = values 4h..4h+3,
 *         high nibbles = values 16+4h..16+4h+3): 288 bytes = 16 x 18;
 *   MXFP4: the same 4 parts of nibbles (level indices): 272 = 16 x 17;
 *   IQ4_NL: q4_0's block exactly (nibbles = level indices): 288;
 *   q8_0: 8 x 64 bytes: part g (0..7) holds, for rows 0..15, values
 *         4g..4g+3 (int8): 544 bytes = 16 x 34.
 * Q4_K's block is a super-block of 256 values: the 16 rows' d (fp16, 32
 *   bytes), their dmin (32 bytes), then scale byte k (0..11) of the 16 rows
 *   at 64 + 16k (192 bytes), then 32 parts of 64 bytes: part h holds, for
 *   rows 0..15, bytes 4h..4h+3 of the row's qs (low nibbles: values
 *   64c + l, high: 64c + 32 + l, with c = h / 8, l = 4 (h % 8) + 0..3):
 *   2304 bytes = 16 x 144.
 * Q5_K's: Q4_K's head (256 bytes), then 8 parts of the rows' qh words
 *   (bytes 4h..4h+3 of qh: bits 2c and 2c + 1 of byte l are the fifth
 *   bits of values 64c + l and 64c + 32 + l), then Q4_K's 32 parts of qs:
 *   2816 bytes = 16 x 176.
 * Q6_K's block (256 values): the 16 rows' d (32 bytes), then scale byte k
 *   (0..15, int8) of the 16 rows at 32 + 16k (256 bytes), then 48 parts
 *   of 64 bytes: part h holds, for rows 0..15, bytes 4h..4h+3 of the
 *   row's ql (h < 32) and qh (h >= 32: qh bytes 4(h-32)..): 3360 bytes =
 *   16 x 210.
 * IQ4_XS's block (256 values): the 16 rows' d (32 bytes), their scales_h
 *   (32 bytes), then scales_l byte k (0..3) of the 16 rows at 64 + 16k
 *   (64 bytes), then 32 parts of 64 bytes: part h holds, for rows 0..15,
 *   bytes 4h..4h+3 of the row's qs (sub-block h / 4; low nibbles: values
 *   32 (h / 4) + l, high: 32 (h / 4) + 16 + l, l = 4 (h % 4) + 0..3):
 *   2176 bytes = 16 x 136.
 * Q3_K's block (256 values): the 16 rows' d (32 bytes), then scale byte k
 *   (0..11) of the 16 rows at 32 + 16k (192 bytes), then 24 parts of 64
 *   bytes: part h holds, for rows 0..15, bytes 4h..4h+3 of the row's
 *   hmask (h < 8) and qs (h >= 8: qs bytes 4(h-8)..): 1760 bytes = 16 x 110.
 * Q2_K's block (256 values): the 16 rows' d (32 bytes), their dmin (32
 *   bytes), then scale byte k (0..15) of the 16 rows at 64 + 16k (256
 *   bytes), then 16 parts of 64 bytes: part h holds, for rows 0..15, bytes
 *   4h..4h+3 of the row's qs: 1344 bytes = 16 x 84.
 * A group takes exactly the bytes of its 16 plain rows, so row r of a
 * group boundary (r % 16 == 0) still starts at r * row_bytes and a matrix
 * can be split at group boundaries. Rows past the last whole group stay
 * plain. One 4-byte word belongs to one row: one vpdpbusd / sdot-by-lane
 * multiplies 16 (or 4) rows by 4 activation values, and the float scaling
 * is shared by 16 rows.
 *
 * Every kernel set computes a packed row as the reference does: per
 * block the exact integer dot product, then acc = fma(float(isum),
 * d_w * d_x, acc) block after block, so all sets give bit-identical
 * results for packed weights, at any m, thread count or row split. */
#define RKM_PACK_ROWS 16
/* The packed type of a q8_0 / q4_0 / MXFP4 / IQ4_NL / Q2_K..Q6_K / IQ4_XS matrix with at
 * least one whole group (else type unchanged); the plain type of a packed
 * one. */
int rkm_pack_type(int type, int64_t n_out);
int rkm_unpack_type(int type);
/* Packs n_out plain rows of a packable type (above) in place (each whole
 * group of 16; the tail rows are left as they are). 0 or RKM_ENOMEM. */
int rkm_pack_rows(int type, void *w, int64_t n_in, int64_t n_out);
/* The inverse: packed groups back to plain rows, in place (type is the
 * plain type). 0, RKM_EINVAL or RKM_ENOMEM. */
int rkm_unpack_rows(int type, void *w, int64_t n_in, int64_t n_out);

/* ------------------------------------------------------- element ops */
/* out = x / rms(x) * w (w may be NULL: no weight); out may alias x. */
void rkm_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);
/* In-place softmax of n values. */
void rkm_softmax(float *x, int64_t n);
/* out[i] = silu(g[i]) * u[i]; out[i] = gelu_tanh(g[i]) * u[i]. */
void rkm_swiglu(float *out, const float *g, const float *u, int64_t n);
void rkm_geglu(float *out, const float *g, const float *u, int64_t n);
/* out[i] = gelu_tanh(x[i]) (the vision towers' FFNs); out may alias x. */
void rkm_gelu(float *out, const float *x, int64_t n);
float rkm_gelu_tanh(float x);

/* One token's step of the gated delta rule on one head's n x n state t
 * (row i: key dim i over the n value dims): t *= decay; with
 * sk = k^T t and o = q^T t over the decayed state, d = (v - sk) * beta,
 * t += k d^T, o += qk * d, so that o = q^T t of the new state when qk is
 * q . k. o and d get n values each. Exact: every set gives the
 * reference's bits (runtime/recurrent.c). */
void rkm_delta_step(float *t, const float *q, const float *k, const float *v, float decay, float beta, float qk,
                    int64_t n, float *o, float *d);

/* One Mamba-2 scan step of one state row of n values (runtime/recurrent.c):
 * st[i] = st[i] * da + b[i] * xdt (a multiply, a multiply and an add, as
 * ggml computes it); returns sum st[i] * c[i] over the new state. */
float rkm_scan_step(float *st, const float *b, const float *c, float da, float xdt, int64_t n);

/* One position of a causal depthwise convolution over ch channels
 * (runtime/recurrent.c: Gated DeltaNet's, LFM2's and Mamba-2's): win holds
 * the last K - 1 inputs (K - 1 rows of ch, oldest first) and w the kernel
 * (K rows of ch, oldest tap first); out[c] = sum over k of w[k][c] times
 * input k (the window's, then x[c]), fused multiply-adds in that order
 * from 0; the window then moves on by x. out may be x. Exact: every set
 * gives the reference's bits. */
void rkm_conv_step(float *win, const float *w, const float *x, int64_t ch, int K, float *out);

/* f16 vectors (KV cache). */
void rkm_f32_to_f16_row(const float *x, rkm_f16 *y, int64_t n);
void rkm_f16_to_f32_row(const rkm_f16 *x, float *y, int64_t n);
/* dot of an f32 vector with an f16 vector. */
float rkm_dot_f32_f16(const float *x, const rkm_f16 *y, int64_t n);
/* y += a * x (x f16). */
void rkm_axpy_f16(float *y, float a, const rkm_f16 *x, int64_t n);
/* The same over `rows` f16 rows `stride` elements apart (attention over
 * the KV cache): out[r] = dot(x, y + r*stride); y += sum over r, in row
 * order, of a[r] * (x + r*stride). Bit-identical to calling the single-row
 * functions row by row, without a call per row (and for axpy with y kept
 * in registers across rows). */
void rkm_dot_f32_f16_rows(const float *x, const rkm_f16 *y, int64_t stride, int64_t rows, int64_t n, float *out);
void rkm_axpy_f16_rows(float *y, const float *a, const rkm_f16 *x, int64_t stride, int64_t rows, int64_t n);

#endif
