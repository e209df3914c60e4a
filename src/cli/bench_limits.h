/*
 * bench_limits.h - machine probes and per-token byte counts behind
 * `rkmojo bench --limits` (bench_limits.c).
 */
#ifndef RKM_CLI_BENCH_LIMITS_H
#define RKM_CLI_BENCH_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/model.h"

/* The memory read bandwidth on the pool's threads (kernels/membw.h, best
 * pass over a second on a `bytes` buffer): GB/s (1e9 bytes), 0 if the
 * probe could not run. */
double rkm_bench_mem_read_gbs(rkm_pool *pool, size_t bytes);
/* The rate at which the pool's threads run decode matmuls (m = 1) of
 * weight type `type` (packed types included) on n_in x n_out matrices:
 * GB/s (1e9 bytes) of weights, the median of the passes over `seconds`
 * (at least 3) through copies that make `bytes` in all, so that the weights come from memory as
 * a decoded token's do. 0 if it could not run (no memory, n_in not a
 * multiple of the type's block). */
double rkm_bench_matmul_gbs(rkm_pool *pool, int type, int64_t n_in, int64_t n_out, size_t bytes, double seconds);
/* The expert checksum (rkm_hash, which the IO thread runs on every
 * expert it reads) on the calling thread: GB/s over a 64 MiB buffer, the
 * median of 5 passes after one untimed; 0 without the memory. */
double rkm_bench_hash_gbs(void);
/* O_DIRECT reads of 1 MiB (less for small files) at n_threads in
 * parallel, `bytes` in all, from the concatenation of the files (each
 * byte read once while they hold enough): MB/s (1e6 bytes) in *mbs. 0 or
 * an RKM_E* code. */
int rkm_bench_disk_read_mbs(const char *const *paths, int n_paths, uint64_t bytes, int n_threads, double *mbs);
/* rkm_bench_disk_read_mbs over a model's expert files (the last layer's
 * first), 512 MiB in all at n_threads. 0 (*mbs 0 for a model without
 * expert files) or an RKM_E* code. */
int rkm_bench_model_disk_mbs(const rkm_model_dir *md, int n_threads, double *mbs);
/* Weight bytes the CPU reads from memory for one decode token: every
 * resident matrix (the token embedding row aside) plus n_expert_used
 * expert blobs per MoE layer. KV-cache reads are not counted. */
double rkm_bench_weight_bytes_per_token(const rkm_model *m);

/* The weight ranges one decode token reads, for a read-only pass over
 * them (kernels/membw.h): every resident matrix in forward order, each
 * MoE layer's n_expert_used experts (spread over the layer: experts
 * 0, n/k, 2n/k, ...) and the LM head. Only when every expert is in memory
 * for good (no cache, or a full cache whose fill has finished), so the
 * ranges stay valid while decoding goes on: else NULL with the reason in
 * *why. Does not keep experts pinned. */
typedef struct rkm_bench_wpass rkm_bench_wpass;
rkm_bench_wpass *rkm_bench_wpass_new(rkm_model *m, const char **why);
void rkm_bench_wpass_free(rkm_bench_wpass *w);
/* Bytes one pass reads (the ranges' whole 512-byte runs). */
double rkm_bench_wpass_bytes(const rkm_bench_wpass *w);
/* Sorts v[0..n) (n >= 1) ascending; returns the median. */
double rkm_bench_sort_median(double *v, int n);
/* The median of n passes on the pool, in seconds. */
double rkm_bench_wpass_run(rkm_bench_wpass *w, rkm_pool *pool, int n);

#endif
