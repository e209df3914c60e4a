/*
 * plan.h - what a model will do on a device before it runs there
 * (`rkmojo plan`): the memory plan of the budget the device leaves, the
 * expert-cache hit rate at that plan (from a recorded routing trace
 * replayed under the cache's own policy, or a floor without one), the
 * bytes a decode token reads from memory and from disk, the decode
 * speeds the device's memory and disk allow, and, where the device's
 * kernels were measured (`this`), a predicted decode speed.
 *
 * Owns the table of device profiles (boards with their nominal figures;
 * "this" machine is measured by the caller's probes and passed as a
 * profile of its own). Pure computation on the caller's thread; nothing
 * is allocated.
 */
#ifndef RKM_PLAN_H
#define RKM_PLAN_H

#include <stdint.h>

#include "format/model_dir.h"
#include "runtime/budget.h"

/* A device as the plan sees it. mem_bytes is the RAM; the budget is
 * mem_bytes less reserve_bytes (the system, other programs) unless the
 * caller gives one. */
typedef struct rkm_device {
    const char *name;
    const char *desc;     /* one line: SoC, cores, memory, storage */
    uint64_t mem_bytes;
    uint64_t reserve_bytes;
    double mem_gbs;       /* memory read bandwidth of the decode threads, GB/s */
    double disk_mbs;      /* large O_DIRECT reads, MB/s */
    int cores;            /* the decode threads (big cores) */
    double check_gbs;     /* expert checksums on one thread, GB/s (0: not measured) */
} rkm_device;

/* The memory a device keeps for its system and other programs. */
#define RKM_PLAN_RESERVE_BYTES ((uint64_t)1 << 30)

/* The board profiles, and their count. */
extern const rkm_device rkm_devices[];
extern const int rkm_n_devices;
/* By name, or NULL. */
const rkm_device *rkm_device_find(const char *name);

typedef struct rkm_plan {
    rkm_budget budget;      /* the memory plan (rkm_budget_plan) */
    int shared_pool;        /* the cache's default scope at this plan: one pool for all layers */
    double hit_rate;        /* of routed-expert requests, 0..1 */
    double mem_bytes_tok;   /* weights read from memory per decode token */
    double disk_bytes_tok;  /* expert bytes read from disk per decode token (the misses) */
    double t_mem_s, t_disk_s; /* their times at the device's rates */
    double tok_s_overlapped;  /* 1 / max(t_mem, t_disk): reads fully hidden behind compute */
    double tok_s_serial;      /* 1 / (t_mem + t_disk): none hidden */
    double t_compute_s;       /* the token's matmuls at the measured kernel rates (0: not measured) */
    double t_check_s;         /* the misses' checksums at dev->check_gbs (0: not measured) */
    double tok_s_predicted;   /* 1 / (t_compute + t_disk + t_check) (0: not measured) */
} rkm_plan;

/* The weights a decode token reads, by the type the kernels run them as
 * (matrices of a packable type packed, as the engine packs them at load
 * or read), each type with the shape of its largest matrix (a routed
 * part: its top-k experts' rows together, as one pool job runs them):
 * what a kernel probe per type measures. */
typedef struct rkm_plan_wtype {
    int type;
    int64_t n_in, n_out; /* of its largest matrix */
    double bytes;        /* a decode token's, of this type */
} rkm_plan_wtype;
#define RKM_PLAN_MAX_WTYPES 16

/* Weights one decode token reads from memory: every resident matrix but
 * an untied token embedding (one row a token), plus top-k expert blobs in
 * every MoE layer (bench --limits' count). */
double rkm_plan_weight_bytes(const rkm_model_dir *md);
/* rkm_plan_weight_bytes split by type into out[0..return) (at most cap
 * types; the rest folded into the last). */
int rkm_plan_weight_types(const rkm_model_dir *md, rkm_plan_wtype *out, int cap);
/* The budget for dev: its memory less its reserve. */
uint64_t rkm_plan_device_budget(const rkm_device *dev);
/* The memory plan: out->budget for budget_bytes (0: the device's) and
 * n_ctx, and the cache scope the engine picks at that plan. Returns 0, or
 * rkm_budget_plan's error (RKM_EBUDGET: the budget cannot hold the fixed
 * parts plus top-k slots per layer) with out->budget filled. */
int rkm_plan_memory(const rkm_model_dir *md, const rkm_device *dev, uint64_t budget_bytes, int n_ctx, rkm_plan *out);
/* The hit rate of slots per layer with routing spread evenly over the
 * experts (each requested expert cached with probability slots /
 * n_expert): the floor a recorded trace improves on. */
double rkm_plan_uniform_hit_rate(const rkm_model_dir *md, int slots);
/* The rest of *out from its memory plan and hit_rate (0..1): bytes per
 * token from memory and disk and the decode speeds dev allows; with
 * t_compute_s > 0 (a token's matmuls at the device's measured kernel
 * rates) also the predicted speed: that compute, then the misses' reads
 * and their checksums (a layer's misses are known only once its router
 * has run, and a read expert is checked before it is used, so they wait;
 * measured runs here hide little of them, docs/STREAMING.md). */
void rkm_plan_speed(const rkm_model_dir *md, const rkm_device *dev, double hit_rate, double t_compute_s, rkm_plan *out);

#endif
