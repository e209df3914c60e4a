/*
 * trace.h - routing traces: which experts each layer asked the expert
 * cache for, recorded to a file (rkmojo run --trace-out, or RKM_TRACE_OUT)
 * and replayed offline under LRU, LFU and Belady's optimal policy
 * (rkmojo trace-sim) to size the cache for a workload.
 *
 * File layout (version 2, little-endian; version 1 is version 2 without
 * prediction records):
 *   header, 32 bytes:
 *     char     magic[8]  "RKMTRACE"
 *     uint32   version   1
 *     uint32   n_layer   model layers
 *     uint32   n_expert  routed experts per MoE layer (<= 65535)
 *     uint32   top_k     experts per token
 *     uint64   reserved  0
 *   records until end of file, each 8 + 2 * n bytes:
 *     uint32   token     index of the forward pass (token or prefill chunk)
 *     uint16   layer     | 0x8000 for a prediction record
 *     uint16   n         experts in this request (1..n_expert)
 *     uint16   ids[n]
 * One record is one rkm_expert_cache_request: a decoded token's top-k, or
 * the union of a prefill chunk's experts (a tile of it). A prediction
 * record is one prefetch hint (rkm_expert_cache_prefetch: the experts a
 * layer ahead's router named, --prefetch); its token is that of the latest
 * request before it. The simulator replays requests only; a hint is scored
 * against the next request of its layer, as the live cache scores it.
 */
#ifndef RKM_TRACE_H
#define RKM_TRACE_H

#include <stdint.h>

#include "runtime/cache_policy.h" /* the victim choice and LFU aging it replays */

#define RKM_TRACE_MAGIC "RKMTRACE"
#define RKM_TRACE_VERSION 2
#define RKM_TRACE_PREDICTED 0x8000 /* layer flag of a prediction record */

enum { RKM_SIM_LRU = 0, RKM_SIM_LFU = 1, RKM_SIM_BELADY = 2 };

typedef struct rkm_trace_writer rkm_trace_writer;

rkm_trace_writer *rkm_trace_writer_open(const char *path, int n_layer, int n_expert, int top_k);
/* Appends one record. Thread-safe. */
int rkm_trace_write(rkm_trace_writer *w, uint32_t token, int layer, const int *ids, int n);
/* Appends one prediction record (a prefetch hint for layer). Thread-safe. */
int rkm_trace_write_prediction(rkm_trace_writer *w, uint32_t token, int layer, const int *ids, int n);
/* Flushes and closes; returns the first write error, if any. NULL is fine. */
int rkm_trace_writer_close(rkm_trace_writer *w);

typedef struct rkm_trace_rec {
    uint32_t token;
    uint16_t layer;
    uint16_t n;
    uint32_t first;   /* index of ids[0] in rkm_trace.ids */
    int64_t at;       /* predictions: requests before it in the file */
} rkm_trace_rec;

typedef struct rkm_trace {
    int n_layer, n_expert, top_k;
    int64_t n_rec;
    rkm_trace_rec *recs;  /* the requests */
    int64_t n_pred;
    rkm_trace_rec *preds; /* the prediction records */
    uint16_t *ids;
    int64_t n_ids;
} rkm_trace;

/* The predictions' accuracy per layer: each hint scored against the next
 * request of its layer (a later hint for the layer replacing it first):
 * named[l] of that request's distinct experts were in the hint, out of
 * requested[l] (n_layer entries each, zeroed first). */
void rkm_trace_prediction(const rkm_trace *t, uint64_t *named, uint64_t *requested);

/* Loads and validates a trace file (untrusted: every field is checked). */
rkm_trace *rkm_trace_load(const char *path);
rkm_trace *rkm_trace_parse(const void *data, uint64_t n);
void rkm_trace_free(rkm_trace *t);

typedef struct rkm_sim_result {
    uint64_t hits, misses;
    /* of the requests of one token's routing (n = top-k: decoding; a
     * prefill chunk's union is larger), replayed after whatever came
     * before them */
    uint64_t decode_hits, decode_misses;
    uint64_t *layer_hits, *layer_misses; /* n_layer each, or NULL */
} rkm_sim_result;

/* Replays t with `slots` per layer under policy, with the expert cache's
 * rules: duplicates in a request count once; a request's hits are pinned
 * before its misses pick victims; LRU and LFU choose victims with the
 * cache's own function (cache_policy.h: an empty slot first, LRU the least
 * recently requested, LFU the least requested with counts kept while not
 * cached and aged every RKM_LFU_AGE requests of the layer; ties: least
 * recent, then lower layer, then lower id); Belady the one whose next
 * request is farthest (never: first; ties: lower layer, then lower id).
 * res->layer_* may be NULL; if not, they are filled. */
int rkm_trace_simulate(const rkm_trace *t, int policy, int slots, rkm_sim_result *res);
/* The same with global != 0: one pool of slots x (MoE layers in the
 * trace) shared by every layer, a miss evicting the policy's choice among
 * all layers' unpinned experts (LFU counts compare across layers: each
 * layer sees one request per token): the expert cache with shared_slots
 * (--cache-scope shared), replayed exactly. */
int rkm_trace_simulate_pool(const rkm_trace *t, int policy, int slots, int global, rkm_sim_result *res);
const char *rkm_sim_policy_name(int policy);

#endif
