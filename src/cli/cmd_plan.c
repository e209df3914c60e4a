/*
 * cmd_plan.c - `rkmojo plan -m MODEL [--device NAME|this] [--mem SIZE]
 * [--mem-budget SIZE] [--ctx N] [--trace ROUTES.bin | --hit-rate PCT]
 * [--json]`: what MODEL will do on a device before it runs there (the
 * memory plan, the expert-cache hit rate, the bytes a decode token reads
 * from memory and disk, the decode speeds they allow, and on "this"
 * machine a predicted decode speed; runtime/plan.h). "this" measures the
 * machine it runs on with `bench --limits`' probes and a decode matmul
 * probe per weight type;
 * `--devices` lists the board profiles.
 * Single-threaded apart from the probes' pool; everything it opens is
 * closed before it returns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/bench_limits.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "kernels/kernels.h"
#include "runtime/io_engine.h"
#include "runtime/plan.h"
#include "runtime/trace.h"
#include "util/common.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static int list_devices(void)
{
    printf("%-12s %10s %10s %10s %6s  %s\n", "device", "memory", "mem GB/s", "disk MB/s", "cores", "what");
    for (int i = 0; i < rkm_n_devices; i++) {
        const rkm_device *d = &rkm_devices[i];
        printf("%-12s %6.0f GiB %10.1f %10.0f %6d  %s\n", d->name, d->mem_bytes / GIB, d->mem_gbs, d->disk_mbs,
               d->cores, d->desc);
    }
    printf("%-12s %10s %10s %10s %6s  %s\n", "this", "measured", "measured", "measured", "nproc",
           "the machine plan runs on: its RAM, a memory probe and O_DIRECT reads of the model's expert files");
    return 0;
}

#define PROBE_ROWS 4096
#define PROBE_BYTES ((size_t)256 << 20)

/* "this": RAM from sysconf, memory, disk and checksum rates from the
 * probes bench_limits.h has, the decode threads one per online core; and
 * *t_compute (s): a decode token's weights at the rates its kernels run
 * them here (wt, gbs: each weight type probed on its largest matrix's
 * shape, at most PROBE_ROWS rows since the rate is per byte, from memory;
 * 0 when a type cannot be probed). */
static int measure_this(const rkm_model_dir *md, int threads, rkm_device *d, rkm_plan_wtype *wt, double *gbs, int *n_wt,
                        double *t_compute)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    d->cores = threads > 0 ? threads : ncpu > 0 ? (int)ncpu : 1;
    d->mem_bytes = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    d->reserve_bytes = RKM_PLAN_RESERVE_BYTES;
    rkm_pool *pool = rkm_pool_new(d->cores);
    if (!pool) return rkm_err(RKM_ENOMEM, "plan: no thread pool");
    d->mem_gbs = rkm_bench_mem_read_gbs(pool, (size_t)1 << 30);
    *n_wt = rkm_plan_weight_types(md, wt, RKM_PLAN_MAX_WTYPES);
    double t = 0;
    int measured = 1; /* a type not measurable: no prediction */
    for (int i = 0; i < *n_wt; i++) {
        gbs[i] = rkm_bench_matmul_gbs(pool, wt[i].type, wt[i].n_in, RKM_MIN(wt[i].n_out, PROBE_ROWS), PROBE_BYTES, 0.5);
        if (gbs[i] > 0) t += wt[i].bytes / (gbs[i] * 1e9);
        else measured = 0;
    }
    *t_compute = measured ? t : 0;
    rkm_pool_free(pool);
    d->check_gbs = rkm_bench_hash_gbs();
    return rkm_bench_model_disk_mbs(md, RKM_IO_DEFAULT_THREADS, &d->disk_mbs);
}

/* The hit rate of the trace at the plan: LFU (the cache's default), the
 * shared pool where the engine would use it. */
static int trace_hit_rate(const char *path, const rkm_model_dir *md, const rkm_plan *p, double *hit)
{
    rkm_trace *t = rkm_trace_load(path);
    if (!t) return -1;
    int rc = 0;
    if (t->n_expert != md->hp.n_expert || t->n_layer != md->hp.n_layer || t->top_k != md->hp.n_expert_used)
        rc = rkm_err(RKM_EINVAL, "plan: %s was recorded on %d layers x %d experts, top-%d; the model has %d x %d, top-%d",
                     path, t->n_layer, t->n_expert, t->top_k, md->hp.n_layer, md->hp.n_expert, md->hp.n_expert_used);
    rkm_sim_result r = {0};
    if (!rc && t->n_rec == 0) rc = rkm_err(RKM_EINVAL, "plan: %s holds no routed requests", path);
    if (!rc && p->budget.slots_per_layer < md->hp.n_expert) { /* else every expert is held */
        rc = rkm_trace_simulate_pool(t, RKM_SIM_LFU, p->budget.slots_per_layer, p->shared_pool, &r);
        /* decode is what plan predicts: the one-token requests' rate,
         * after the prefill's requests warmed the cache (all of them in a
         * trace without one-token requests) */
        if (!rc) *hit = r.decode_hits + r.decode_misses ? (double)r.decode_hits / (double)(r.decode_hits + r.decode_misses)
                                                        : (double)r.hits / (double)(r.hits + r.misses);
    }
    rkm_trace_free(t);
    return rc;
}

int rkm_cmd_plan(int argc, char **argv)
{
    const char *model = NULL, *device = "this", *trace = NULL;
    uint64_t mem = 0, budget = 0;
    int n_ctx = 0, json = 0, devices = 0, threads = 0, hit_given = 0;
    double hit_pct = -1;
    const rkm_opt opts[] = {
        {"model", 'm', RKM_OPT_STR, &model, .arg = "DIR", .help = "the .rkmojo model directory"},
        {"device", 'd', RKM_OPT_STR, &device, .arg = "NAME",
         .help = "a board profile (--devices lists them) or \"this\" (default): this machine, measured"},
        {"mem", 0, RKM_OPT_SIZE, &mem, 1 << 20, 1e18, "SIZE", .help = "the device's RAM instead of the profile's"},
        {"mem-budget", 0, RKM_OPT_SIZE, &budget, 1 << 20, 1e18, "SIZE",
         .help = "the memory rkmojo may use (default: the RAM less 1 GiB for the system)"},
        {"ctx-size", 'c', RKM_OPT_INT, &n_ctx, 1, 1 << 24, "N", .help = "context size (default min(4096, trained))",
         .alias = "ctx"},
        {"trace", 0, RKM_OPT_STR, &trace, .arg = "ROUTES.bin",
         .help = "the hit rate of this routing trace (rkmojo run --trace-out) replayed at the plan"},
        {"hit-rate", 0, RKM_OPT_DOUBLE, &hit_pct, 0, 100, "PCT", .help = "the expert-cache hit rate to assume",
         .given = &hit_given},
        {"threads", 't', RKM_OPT_INT, &threads, 1, 1024, "N", .help = "\"this\": the decode threads (default: all cores)"},
        {"devices", 0, RKM_OPT_FLAG, &devices, .help = "list the device profiles"},
        {"json", 0, RKM_OPT_FLAG, &json, .help = "machine-readable output"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "plan",
        "usage: rkmojo plan -m MODEL [--device NAME|this] [--mem SIZE] [--mem-budget SIZE] [--ctx N]\n"
        "                   [--trace ROUTES.bin | --hit-rate PCT] [--json]\n"
        "       rkmojo plan --devices\n"
        "  What MODEL will do on a device: the memory plan, the expert-cache hit rate, the bytes a\n"
        "  decode token reads from memory and from disk, and the decode speeds those allow.\n\n",
        "Without --trace or --hit-rate the hit rate is the floor of routing spread evenly over the\n"
        "experts; a trace of your own prompts (rkmojo run --trace-out ROUTES.bin, any budget) gives\n"
        "the cache's real rate. The speeds are bounds: the memory and disk time of a token's bytes,\n"
        "overlapped or one after the other. On this machine (--device this) plan also runs each\n"
        "weight type's decode matmul and predicts the speed: those matmuls, then the misses' reads.\n",
        {opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    if (devices) return list_devices();
    if (!model) {
        fprintf(stderr, "rkmojo plan: needs -m MODEL (or --devices)\n");
        return 2;
    }
    if (trace && hit_given) {
        fprintf(stderr, "rkmojo plan: --trace and --hit-rate exclude each other\n");
        return 2;
    }
    rkm_device dev;
    double t_compute = 0, gbs[RKM_PLAN_MAX_WTYPES];
    rkm_plan_wtype wt[RKM_PLAN_MAX_WTYPES];
    int n_wt = 0;
    const rkm_device *prof = strcmp(device, "this") ? rkm_device_find(device) : NULL;
    if (strcmp(device, "this") && !prof) {
        fprintf(stderr, "rkmojo plan: unknown device '%s' (rkmojo plan --devices lists them)\n", device);
        return 2;
    }
    rkm_model_dir *md = rkm_model_dir_open(model);
    if (!md) {
        fprintf(stderr, "rkmojo plan: %s\n", rkm_last_error());
        return 1;
    }
    int rc = 1;
    cJSON *root = NULL;
    if (prof) dev = *prof;
    else {
        dev = (rkm_device){.name = "this", .desc = "this machine, measured"};
        if (measure_this(md, threads, &dev, wt, gbs, &n_wt, &t_compute)) {
            fprintf(stderr, "rkmojo plan: measuring this machine: %s\n", rkm_last_error());
            goto out;
        }
    }
    if (mem) dev.mem_bytes = mem;
    if (!n_ctx) n_ctx = rkm_hparams_default_ctx(&md->hp);
    rkm_plan p;
    if (rkm_plan_memory(md, &dev, budget, n_ctx, &p)) {
        fprintf(stderr, "rkmojo plan: %s\n", rkm_last_error());
        goto out;
    }
    const rkm_budget *b = &p.budget;
    double hit = hit_given ? hit_pct / 100.0 : rkm_plan_uniform_hit_rate(md, b->slots_per_layer);
    const char *hit_from = hit_given ? "given" : "uniform routing (a floor)";
    if (trace) {
        if (trace_hit_rate(trace, md, &p, &hit)) {
            fprintf(stderr, "rkmojo plan: %s\n", rkm_last_error());
            goto out;
        }
        hit_from = "trace, LFU";
    }
    rkm_plan_speed(md, &dev, hit, t_compute, &p);
    if (b->slots_per_layer >= md->hp.n_expert) hit_from = "every expert held";
    if (json) {
        root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "model", model);
        cJSON *d = cJSON_AddObjectToObject(root, "device");
        cJSON_AddStringToObject(d, "name", dev.name);
        cJSON_AddStringToObject(d, "desc", dev.desc);
        cJSON_AddNumberToObject(d, "mem_bytes", (double)dev.mem_bytes);
        cJSON_AddNumberToObject(d, "mem_read_gb_s", dev.mem_gbs);
        cJSON_AddNumberToObject(d, "disk_read_mb_s", dev.disk_mbs);
        cJSON_AddNumberToObject(d, "cores", dev.cores);
        if (dev.check_gbs > 0) cJSON_AddNumberToObject(d, "checksum_gb_s", dev.check_gbs);
        cJSON_AddNumberToObject(root, "n_ctx", n_ctx);
        cJSON_AddNumberToObject(root, "budget_bytes", (double)b->budget_bytes);
        cJSON_AddNumberToObject(root, "resident_bytes", (double)b->resident_bytes);
        cJSON_AddNumberToObject(root, "kv_bytes", (double)b->kv_bytes);
        cJSON_AddNumberToObject(root, "cache_bytes", (double)b->cache_bytes);
        cJSON_AddNumberToObject(root, "all_experts_bytes", (double)b->all_experts_bytes);
        cJSON_AddNumberToObject(root, "slots_per_layer", b->slots_per_layer);
        cJSON_AddNumberToObject(root, "n_expert", md->hp.n_expert);
        cJSON_AddStringToObject(root, "cache_scope", p.shared_pool ? "shared" : "layer");
        cJSON_AddNumberToObject(root, "hit_rate", p.hit_rate);
        cJSON_AddStringToObject(root, "hit_rate_from", hit_from);
        cJSON_AddNumberToObject(root, "mem_bytes_per_token", p.mem_bytes_tok);
        cJSON_AddNumberToObject(root, "disk_bytes_per_token", p.disk_bytes_tok);
        cJSON_AddNumberToObject(root, "decode_tok_s_overlapped", p.tok_s_overlapped);
        cJSON_AddNumberToObject(root, "decode_tok_s_serial", p.tok_s_serial);
        if (n_wt) {
            cJSON *k = cJSON_AddArrayToObject(root, "kernel_rates");
            for (int i = 0; i < n_wt; i++) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "type", rkm_type_name(wt[i].type));
                cJSON_AddNumberToObject(e, "bytes_per_token", wt[i].bytes);
                cJSON_AddNumberToObject(e, "gb_s", gbs[i]);
                cJSON_AddItemToArray(k, e);
            }
        }
        if (p.tok_s_predicted > 0) {
            cJSON_AddNumberToObject(root, "compute_s_per_token", p.t_compute_s);
            cJSON_AddNumberToObject(root, "checksum_s_per_token", p.t_check_s);
            cJSON_AddNumberToObject(root, "decode_tok_s_predicted", p.tok_s_predicted);
        } else
            cJSON_AddNullToObject(root, "decode_tok_s_predicted");
        char *s = cJSON_Print(root);
        if (s) puts(s);
        free(s);
    } else {
        printf("model   %s: %s, %d layers, %d experts of which %d a token\n", model, rkm_arch_name(md->hp.arch), md->hp.n_layer,
               md->hp.n_expert, md->hp.n_expert_used);
        printf("device  %s: %s\n        %.1f GiB of memory, memory %.1f GB/s, disk %.0f MB/s, %d cores\n", dev.name,
               dev.desc, dev.mem_bytes / GIB, dev.mem_gbs, dev.disk_mbs, dev.cores);
        printf("memory  budget %.2f GiB: resident %.2f GiB, KV %.2f GiB (%d tokens), scratch and overhead %.2f GiB,\n"
               "        expert cache %.2f GiB = %d of %d slots per layer (%s) of %.2f GiB of experts\n",
               b->budget_bytes / GIB, b->resident_bytes / GIB, b->kv_bytes / GIB, n_ctx,
               (b->scratch_bytes + b->overhead_bytes) / GIB, b->cache_bytes / GIB, b->slots_per_layer,
               md->hp.n_expert, p.shared_pool ? "one pool for all layers" : "each layer its own",
               b->all_experts_bytes / GIB);
        printf("hits    %.1f%% of routed experts (%s)\n", 100.0 * p.hit_rate, hit_from);
        printf("token   reads %.0f MB from memory (%.1f ms) and %.1f MB from disk (%.1f ms)\n", p.mem_bytes_tok / 1e6,
               1e3 * p.t_mem_s, p.disk_bytes_tok / 1e6, 1e3 * p.t_disk_s);
        printf("decode  at most %.2f tok/s with the reads hidden behind compute, %.2f tok/s with none hidden\n",
               p.tok_s_overlapped, p.tok_s_serial);
        for (int i = 0; i < n_wt; i++)
            printf("%s %s %.0f MB a token at %.1f GB/s%s", i ? "," : "kernels", rkm_type_name(wt[i].type), wt[i].bytes / 1e6, gbs[i],
                   i + 1 == n_wt ? " (decode matmuls measured here)\n" : "");
        if (p.tok_s_predicted > 0)
            printf("        predicted %.2f tok/s: the matmuls %.1f ms at this machine's kernel rates, then the misses'\n"
                   "        reads %.1f ms and checksums %.1f ms (%.1f GB/s)\n",
                   p.tok_s_predicted, 1e3 * p.t_compute_s, 1e3 * p.t_disk_s, 1e3 * p.t_check_s, dev.check_gbs);
        else
            printf("        (no prediction: the device's kernels are not measured; run plan on it with --device this)\n");
    }
    rc = 0;
out:
    cJSON_Delete(root);
    rkm_model_dir_close(md);
    return rc;
}
