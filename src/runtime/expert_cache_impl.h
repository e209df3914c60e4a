/*
 * expert_cache_impl.h - the expert cache's state, shared by its slot state
 * machine (expert_cache_slots.c: request/get/unpin/release, reads, life) and its
 * background threads (expert_cache_fill.c: the prefault and the fill). Private to
 * those two files; the API is expert_cache.h.
 *
 * Locking: c->mu guards every slot field except the bytes of a LOADING
 * slot's buffer (written by the IO engine, read by the finishing IO
 * thread; nobody else touches a LOADING slot), every layer_cache field
 * that changes after creation (slot_of, freq, n_req, verified, hits,
 * misses, cand, the prediction marks and counts), the stats, the fault table and hook, fill_done, tick and
 * the trace fields. c->cv is broadcast when a slot leaves LOADING and when
 * fill_done is set. bg_stop is atomic. Everything else is written once in
 * rkm_expert_cache_new, before any other thread starts, and only read
 * afterwards (slot buffers' addresses, layers, fds, params).
 * Lock order: c->mu, then io->mu (rkm_io_submit and rkm_io_promote are
 * called with c->mu held; IO callbacks take c->mu without holding io->mu).
 */
#ifndef RKM_EXPERT_CACHE_IMPL_H
#define RKM_EXPERT_CACHE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "runtime/cache_policy.h"
#include "runtime/expert_cache.h"
#include "runtime/io_engine.h"
#include "runtime/trace.h"

enum { SLOT_EMPTY = 0, SLOT_LOADING, SLOT_READY, SLOT_ERROR };

#define RKM_CACHE_MAX_FAULTS 16

typedef struct layer_cache layer_cache;

typedef struct slot {
    layer_cache *lc;    /* the layer of the expert it holds (any layer of a shared pool) */
    int expert;         /* -1: none */
    int state;
    int pinned;
    int prefetched;     /* read started by a prefetch and not yet requested */
    int filling;        /* read started by the background fill, not yet requested */
    uint64_t last_use;  /* tick of the last request that used it */
    int err;            /* SLOT_ERROR: the code */
    char msg[256];      /* SLOT_ERROR: the message */
    uint8_t *buf;       /* blob_stride bytes, 4096-aligned */
    /* the read in flight (LOADING) */
    int chunks_left;
    int n_chunks;
    int io_err;         /* first errno of a chunk */
    uint64_t io_err_off;
    uint64_t valid;     /* contiguous bytes read from the blob start */
    double t_submit;
    rkm_io_op *ops;     /* max_chunks */
} slot;

struct layer_cache {
    struct rkm_expert_cache *c;
    const rkm_expert_layer *el;
    int il;
    int fd;
    int direct;
    int n_slots;        /* entries of slots[]: the pool when shared */
    int cap;            /* experts one layer may pin at once (slots_per_layer) */
    int shares;         /* slots[], cand[] and the arena are layer 0's (shared pool) */
    slot *slots;
    rkm_policy_slot *cand; /* n_slots: the policy's view of slots[], filled per choice */
    uint8_t *arena;     /* the slot buffers, one huge-page mapping (no slot_alloc) */
    size_t arena_bytes;
    int *slot_of;       /* n_expert: slot index or -1 */
    uint64_t *freq;     /* n_expert: LFU counts (cache_policy.h) */
    uint64_t n_req;     /* requests of this layer (LFU aging) */
    uint8_t *verified;  /* n_expert: checksum checked once (VERIFY_FIRST) */
    uint64_t hits, misses;
    /* The last prefetch hint, until the layer's next request scores it:
     * predicted[e] marks the experts it named (n_expert entries). */
    uint8_t *predicted;
    int pred_pending;
    uint64_t pred_named, pred_requested; /* requested experts the hint named; all of them */
};

typedef struct rkm_cache_fault {
    int kind; /* 0 eio, 1 short, 2 corrupt */
    int il, e, count;
} rkm_cache_fault;

struct rkm_expert_cache {
    const rkm_model_dir *md;
    rkm_expert_cache_params p;
    int n_layers;                  /* expert layers */
    layer_cache *layers;
    int layer_idx[RKM_MAX_LAYERS]; /* model layer -> index or -1 */
    int max_chunks;
    uint32_t chunk_bytes;
    uint64_t tick;
    uint64_t bytes;
    rkm_io *io;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rkm_expert_cache_stats st;
    rkm_expert_fault_fn fault_fn;
    void *fault_user;
    rkm_cache_fault faults[RKM_CACHE_MAX_FAULTS]; /* from RKM_FAULT */
    int n_faults;
    int shared;                    /* the layers' slots are one pool (layer 0's) */
    rkm_trace_writer *trace;       /* NULL: not recording */
    uint32_t trace_token;          /* forward passes seen so far */
    int trace_last_il;
    /* expert_cache_fill.c */
    pthread_t prefault_thr;        /* populates the slot buffers (budgeted caches) */
    int prefault_started;
    pthread_t fill_thr;            /* reads every expert ahead (fully resident, params.fill) */
    int fill_started;
    int fill_done;                 /* c->cv is broadcast when it is set */
    atomic_int bg_stop;            /* both background threads stop */
};

/* expert_cache_slots.c, called with c->mu held. */
/* The slot of lc's pool a new blob may go to (the policy's choice, a free
 * one first), or -1 while every slot is pinned or being read. */
int rkm_expert_cache__victim(struct rkm_expert_cache *c, layer_cache *lc);
/* Gives slot s of lc's pool to expert e of lc (forgetting its old one). */
void rkm_expert_cache__assign(layer_cache *lc, int s, int e);
/* Submits the chunk reads of expert e into sl, which becomes LOADING. */
void rkm_expert_cache__start_read(struct rkm_expert_cache *c, layer_cache *lc, slot *sl, int e, int prio);

/* expert_cache_fill.c, called by rkm_expert_cache_new and _free without c->mu. */
/* Starts the prefault thread (budgeted caches) or the fill thread (fully
 * resident ones with params.fill), as the configuration calls for. */
void rkm_expert_cache__fill_start(struct rkm_expert_cache *c);
/* Stops both and joins them; the cache stays consistent for free. */
void rkm_expert_cache__fill_stop(struct rkm_expert_cache *c);

#endif
