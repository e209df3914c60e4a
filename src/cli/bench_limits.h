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
/* O_DIRECT reads of 1 MiB (less for small files) at n_threads in
 * parallel, `bytes` in all, from the concatenation of the files (each
 * byte read once while they hold enough): MB/s (1e6 bytes) in *mbs. 0 or
 * an RKM_E* code. */
int rkm_bench_disk_read_mbs(const char *const *paths, int n_paths, uint64_t bytes, int n_threads, double *mbs);
/* Weight bytes the CPU reads from memory for one decode token: every
 * resident matrix (the token embedding row aside) plus n_expert_used
 * expert blobs per MoE layer. KV-cache reads are not counted. */
double rkm_bench_weight_bytes_per_token(const rkm_model *m);

#endif
