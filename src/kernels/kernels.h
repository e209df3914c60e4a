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
 * wtype: F32, F16, Q8_0, Q4_0. For Q8_0/Q4_0 weights the activations are
 * quantized to q8_0 blocks first (as ggml does) and multiplied in integers.
 * Rows of W are split across the pool's threads. */
void rkm_matmul(rkm_pool *pool, int wtype, const void *w, int64_t n_in, int64_t n_out,
                const float *x, int64_t m, float *y, int64_t ldy);

/* ------------------------------------------------------- element ops */
/* out = x / rms(x) * w (w may be NULL: no weight); out may alias x. */
void rkm_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);
/* In-place softmax of n values. */
void rkm_softmax(float *x, int64_t n);
/* out[i] = silu(g[i]) * u[i]; out[i] = gelu_tanh(g[i]) * u[i]. */
void rkm_swiglu(float *out, const float *g, const float *u, int64_t n);
void rkm_geglu(float *out, const float *g, const float *u, int64_t n);
float rkm_gelu_tanh(float x);

/* f16 vectors (KV cache). */
void rkm_f32_to_f16_row(const float *x, rkm_f16 *y, int64_t n);
void rkm_f16_to_f32_row(const rkm_f16 *x, float *y, int64_t n);
/* dot of an f32 vector with an f16 vector. */
float rkm_dot_f32_f16(const float *x, const rkm_f16 *y, int64_t n);
/* y += a * x (x f16). */
void rkm_axpy_f16(float *y, float a, const rkm_f16 *x, int64_t n);

#endif
