/*
 * expert_cache.h - where the forward pass gets routed experts from: a
 * per-layer cache of expert blobs in aligned slot buffers, filled from the
 * model's per-layer expert files by IO threads (O_DIRECT pread / io_uring),
 * with LFU or LRU eviction and optional prefetch. With slots_per_layer equal
 * to the expert count and no budget, every expert stays resident after its
 * first read.
 *
 * Protocol per layer (one compute thread drives a cache):
 *   rkm_expert_cache_request(c, il, ids, n)  -- after top-k: pins these
 *        experts (n <= rkm_expert_cache_slots(c)), starts reads for misses,
 *        returns at once
 *   rkm_expert_cache_get(c, il, e, &blob)    -- blocks until expert e is
 *        loaded; blob = gate|up|down as described by the model_dir layer
 *   rkm_expert_cache_release(c, il)          -- unpins the layer's experts
 * il is the model's layer number (as in rkm_model_dir_expert_layer). Pins
 * of several requests on one layer add up until release (prefill tiles:
 * release between tiles); more pins than slots is RKM_EINVAL.
 * A failed read (EIO, short read, checksum mismatch) makes get return the
 * error; the slot is not left holding bad data and later requests retry.
 * Blobs returned by get stay valid until release of that layer. Every
 * entry point is thread-safe, but pins are per layer, not per caller: two
 * sessions running the same layer at once must be serialised by the
 * caller. docs/STREAMING.md describes the design. Implemented by
 * expert_cache_slots.c (slots, requests, reads), expert_cache_fill.c
 * (background threads) and cache_policy.c (the victim choice).
 */
#ifndef RKM_EXPERT_CACHE_H
#define RKM_EXPERT_CACHE_H

#include <stddef.h> /* model_dir.h uses size_t */
#include <stdint.h>

#include "format/model_dir.h"
#include "runtime/cache_policy.h" /* RKM_CACHE_LFU, RKM_CACHE_LRU */

typedef struct rkm_expert_cache_params {
    int slots_per_layer;   /* 0: every expert of a layer (fully resident) */
    int policy;            /* RKM_CACHE_LFU (aging, recency tie-break; cache_policy.h) or RKM_CACHE_LRU */
    int prefetch;          /* 0/1 */
    int io_threads;        /* 0: default */
    int direct_io;         /* 1: O_DIRECT when the file system allows */
    /* Added after the first five; zero means the default. */
    int verify;            /* RKM_VERIFY_ALWAYS (0), _FIRST or _NEVER */
    int prefault;          /* slot pages populated ahead: 0 when budgeted, 1 never, 2 always */
    int io_backend;        /* 0 auto (io_uring if built in and allowed), 1 pread, 2 io_uring */
    uint32_t chunk_bytes;  /* one blob is read as parallel chunks of this size; 0: 512 KiB */
    const char *trace_out; /* routing trace file (trace.h); NULL: $RKM_TRACE_OUT or none */
    int pack;              /* 1: q8_0/q4_0 parts are repacked (kernels.h rkm_pack_rows) after
                            * each read is verified; get() then returns packed blobs */
    /* Slot memory from the caller (the NPU backend: buffers the NPU reads
     * in place, docs/NPU.md); slot_alloc NULL: rkm_alloc_aligned. alloc
     * returns bytes aligned to RKM_EXPERT_ALIGN, or NULL (out of memory);
     * slot_filled runs on the IO thread once a blob is verified (and
     * packed), before any get() returns it. */
    void *(*slot_alloc)(void *user, size_t bytes);
    void (*slot_free)(void *user, void *buf);
    void (*slot_filled)(void *user, void *buf, size_t bytes);
    void *slot_user;
    int fill;              /* 1: a fully resident cache reads every expert in the background
                            * from creation (fill_main), if they fit in MemAvailable */
    int shared_slots;      /* 1: with slots_per_layer < experts, the layers' slots form one
                            * pool of slots_per_layer x layers (same bytes): a miss evicts
                            * the policy's choice among every layer's unpinned experts
                            * (trace-sim --global); needs equal blob sizes, else per layer */
} rkm_expert_cache_params;

/* Checksum policy. ALWAYS (default): every read into a slot is checked
 * before any get may see it (XXH3 runs at >10 GB/s, ten times the disk, on
 * an IO thread while the compute thread works). FIRST: only the first read
 * of each expert since the cache was created. NEVER: for measurements. */
enum { RKM_VERIFY_ALWAYS = 0, RKM_VERIFY_FIRST = 1, RKM_VERIFY_NEVER = 2 };

/* hits: requested experts already in a slot (or being read by a prefetch);
 * misses: requested experts that had to be read (also those the background
 * fill was still reading); fill_reads, fill_bytes: blobs the fill read,
 * kept out of bytes_read and read_s; prefetch_issued: reads
 * started by prefetch hints; prefetch_hits: of those, how many a later
 * request used (also counted in hits); bytes_read: from disk, all reads;
 * io_wait_s: time get() blocked waiting for a read; read_s: summed duration
 * of blob reads (submit to verified), errors: failed blob reads. */
typedef struct rkm_expert_cache_stats {
    uint64_t hits, misses, prefetch_hits, prefetch_issued;
    uint64_t bytes_read;
    double io_wait_s;
    double read_s;
    uint64_t errors;
    uint64_t fill_reads, fill_bytes;
} rkm_expert_cache_stats;

typedef struct rkm_expert_cache rkm_expert_cache;

rkm_expert_cache *rkm_expert_cache_new(const rkm_model_dir *md, const rkm_expert_cache_params *p);
void rkm_expert_cache_free(rkm_expert_cache *c);
int rkm_expert_cache_slots(const rkm_expert_cache *c);
/* Bytes the cache allocates (slots * blob strides over all layers). */
uint64_t rkm_expert_cache_bytes(const rkm_expert_cache *c);
int rkm_expert_cache_request(rkm_expert_cache *c, int il, const int *ids, int n);
int rkm_expert_cache_get(rkm_expert_cache *c, int il, int e, const uint8_t **blob);
void rkm_expert_cache_release(rkm_expert_cache *c, int il);
/* Unpins only these experts of layer il (a prefill tile that is done), so
 * the next tile can be requested, and read, before the current one is
 * computed: with tiles of at most slots/2 experts, request(tile t+1),
 * compute tile t, unpin(tile t). Unknown or unpinned ids are ignored. */
void rkm_expert_cache_unpin(rkm_expert_cache *c, int il, const int *ids, int n);
/* Hint: these experts of layer il are likely next (may be ignored). */
void rkm_expert_cache_prefetch(rkm_expert_cache *c, int il, const int *ids, int n);
void rkm_expert_cache_get_stats(const rkm_expert_cache *c, rkm_expert_cache_stats *s);
void rkm_expert_cache_reset_stats(rkm_expert_cache *c);

/* Non-blocking get: 1 and *blob when expert e is loaded, 0 while it is
 * being read, or the read's error. Lets the caller compute experts in the
 * order they land (accumulate them in a fixed order for invariance). */
int rkm_expert_cache_try_get(rkm_expert_cache *c, int il, int e, const uint8_t **blob);
/* Waits until the background fill (params.fill) has read every expert,
 * or was never started; returns how many experts are loaded. */
int rkm_expert_cache_wait_fill(rkm_expert_cache *c);
/* Hits and misses of one model layer since the last reset (0 if none). */
void rkm_expert_cache_layer_stats(const rkm_expert_cache *c, int il, uint64_t *hits, uint64_t *misses);
/* The prefetch hints' accuracy since the last reset: of the experts the
 * first request of layer il after a hint for it named (duplicates once),
 * *named were in the hint, out of *requested; il -1: every layer summed.
 * Hints are taken only with params.prefetch. */
void rkm_expert_cache_layer_prediction(const rkm_expert_cache *c, int il, uint64_t *named, uint64_t *requested);
/* "pread" or "io_uring", and whether the expert files use O_DIRECT. */
const char *rkm_expert_cache_io_backend(const rkm_expert_cache *c);
/* 1 if the layers' slots form one pool (params.shared_slots took effect). */
int rkm_expert_cache_shared(const rkm_expert_cache *c);
int rkm_expert_cache_direct(const rkm_expert_cache *c);

/* Fault injection (tests): called on an IO thread after each blob read and
 * before its checksum; may alter buf, lower *got (a short read) or return
 * a negative RKM_E* code (the read fails with it). The environment variable
 * RKM_FAULT=kind:layer:expert:count[,...] (kind eio, short or corrupt;
 * expert -1 = any) injects the same faults without code, e.g. for the CLI. */
typedef int (*rkm_expert_fault_fn)(void *user, int il, int e, uint8_t *buf, uint64_t *got);
void rkm_expert_cache_set_fault_hook(rkm_expert_cache *c, rkm_expert_fault_fn fn, void *user);

#endif
