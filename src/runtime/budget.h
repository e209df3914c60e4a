/*
 * budget.h - sizing the engine from a memory budget (--mem-budget).
 *
 * What counts (process RSS; expert reads use O_DIRECT, so the page cache
 * does not grow with them):
 *   resident   resident.bin, mapped and touched every token
 *   kv         f16 K and V rows: n_ctx per full-attention layer,
 *              min(n_ctx, window + chunk) per sliding-window layer,
 *              times n_sessions
 *   scratch    activations of one prefill chunk (estimate, or the
 *              caller's figure)
 *   overhead   code, libc, thread stacks, tokenizer (fixed estimate)
 *   cache      slots_per_layer * sum of the MoE layers' blob strides
 * The slot count is what is left divided by one slot in every MoE layer,
 * capped at the expert count. The minimum is top-k slots per layer (one
 * token's experts must fit at once); below it the plan fails with
 * RKM_EBUDGET and a message giving every figure.
 */
#ifndef RKM_BUDGET_H
#define RKM_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "format/model_dir.h"

/* Snapshots of a session's recurrent state kept for truncation
 * (session.c), counted with the state in the KV bytes. */
#define RKM_RS_SNAPSHOTS 3

typedef struct rkm_budget_opts {
    int n_chunk;              /* prefill chunk rows; 0: 128 */
    int n_sessions;           /* KV caches held at once; 0: 1 */
    uint64_t scratch_bytes;   /* 0: estimate from the hparams */
    uint64_t overhead_bytes;  /* 0: 48 MiB */
    int min_slots;            /* 0: n_expert_used */
} rkm_budget_opts;

typedef struct rkm_budget {
    uint64_t budget_bytes;    /* 0: no budget (every expert cached) */
    uint64_t resident_bytes;  /* held in memory: resident.bin less lookup-only embeddings */
    uint64_t embd_file_bytes; /* untied token embeddings, read a row per token, not held */
    uint64_t kv_bytes;        /* n_sessions caches of n_ctx tokens */
    int n_sessions, n_ctx;
    uint64_t scratch_bytes;
    uint64_t overhead_bytes;
    uint64_t slot_bytes;      /* one slot in every MoE layer */
    int min_slots, max_slots; /* top-k, expert count */
    int slots_per_layer;      /* the plan (max_slots when unbudgeted) */
    uint64_t cache_bytes;     /* slots_per_layer * slot_bytes */
    uint64_t total_bytes;     /* everything above */
    uint64_t all_experts_bytes; /* every routed expert (max_slots * slot_bytes) */
} rkm_budget;

/* Fills *out. Returns 0, RKM_EINVAL, or RKM_EBUDGET (with *out filled and a
 * message with the numbers) when the budget cannot hold the fixed parts
 * plus min_slots per layer. Dense models: slots 0, the same accounting. */
int rkm_budget_plan(const rkm_model_dir *md, uint64_t budget_bytes, int n_ctx, const rkm_budget_opts *opts,
                    rkm_budget *out);
/* The expert cache's default scope at slots per layer: one pool shared
 * by every MoE layer from 4x top-k slots per layer up. Measured
 * (trace-sim --global on qwen3-30b-a3b, live runs on olmoe), a smaller
 * pool lets the busiest layers thrash the others under LFU (47% -> 41%
 * hits at 8 slots, equal at 32, better from 40). */
static inline int rkm_budget_default_shared(int slots, int top_k) { return slots >= 4 * top_k; }
/* KV bytes of one session of n_ctx tokens. */
uint64_t rkm_budget_kv_bytes(const rkm_hparams *hp, int n_ctx, int n_chunk);
/* One line per figure into buf, for --verbose and the bench header. */
const char *rkm_budget_describe(const rkm_budget *b, char *buf, size_t cap);

#endif
