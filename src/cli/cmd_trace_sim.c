/*
 * cmd_trace_sim.c - `rkmojo trace-sim ROUTES.bin [--slots 8,16,24,32]
 * [--per-layer] [--json]`: replays a routing trace (written by
 * `rkmojo run --trace-out` or RKM_TRACE_OUT) under LRU, LFU and Belady's
 * optimal policy and prints the expert-cache hit rates side by side, to
 * size --expert-cache-slots / --mem-budget for a workload.
 * Single-threaded; everything it allocates is freed before it returns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "runtime/trace.h"
#include "util/common.h"

#define MAX_SLOT_LIST 64

static int parse_slots(const char *s, int *out, int cap)
{
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > 65535 || n >= cap) return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

static double rate(uint64_t h, uint64_t m) { return h + m ? 100.0 * (double)h / (double)(h + m) : 0.0; }

typedef struct slot_list {
    int v[MAX_SLOT_LIST];
    int n;
} slot_list;

static int slots_opt(const char *v, void *dst)
{
    slot_list *l = dst;
    l->n = parse_slots(v, l->v, MAX_SLOT_LIST);
    return l->n > 0 ? 0 : -1;
}

int rkm_cmd_trace_sim(int argc, char **argv)
{
    slot_list sl = {.n = 0};
    int *slots = sl.v, per_layer = 0, json = 0, global = 0, first;
    const rkm_opt opts[] = {
        {"slots", 0, RKM_OPT_CALL, &sl, .arg = "N,N,...", .fn = slots_opt,
         .values = "a list of positive integers, comma-separated",
         .help = "slot counts to try (default: top-k, 2x, 4x, half and all experts)"},
        {"global", 0, RKM_OPT_FLAG, &global,
         .help = "the same budget as one pool of N x layers slots shared by all layers\n"
                 "(the expert cache's --cache-scope shared)"},
        {"per-layer", 0, RKM_OPT_FLAG, &per_layer, .help = "also print the hit rate of every layer"},
        {"json", 0, RKM_OPT_FLAG, &json, .help = "machine-readable output"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "trace-sim",
        "usage: rkmojo trace-sim ROUTES.bin [--slots N,N,...] [--global] [--per-layer] [--json]\n"
        "  Replays a routing trace (rkmojo run --trace-out FILE) with N expert slots per layer\n"
        "  under LRU, LFU and Belady's optimal policy and prints the hit rates.\n\n",
        NULL, {opts}, 1,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, &first);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    if (first == argc) return rkm_opts_error(&cmd, "needs ROUTES.bin");
    const char *path = argv[first];
    int n_slots = sl.n;
    rkm_trace *t = rkm_trace_load(path);
    if (!t) {
        fprintf(stderr, "rkmojo trace-sim: %s\n", rkm_last_error());
        return 1;
    }
    if (n_slots == 0) {
        int cand[5] = {t->top_k, 2 * t->top_k, 4 * t->top_k, t->n_expert / 2, t->n_expert};
        for (int i = 0; i < 5; i++) {
            int v = RKM_MIN(cand[i], t->n_expert), dup = 0;
            for (int j = 0; j < n_slots; j++) dup |= slots[j] == v;
            if (v > 0 && !dup) slots[n_slots++] = v;
        }
    }
    int64_t n_tok = 0;
    uint32_t last_tok = UINT32_MAX;
    for (int64_t r = 0; r < t->n_rec; r++)
        if (t->recs[r].token != last_tok) n_tok++, last_tok = t->recs[r].token;
    uint64_t *lh = calloc((size_t)t->n_layer * 3, sizeof(uint64_t));
    uint64_t *lm = calloc((size_t)t->n_layer * 3, sizeof(uint64_t));
    cJSON *root = json ? cJSON_CreateObject() : NULL;
    cJSON *rows = NULL;
    int rc = 0;
    if (!lh || !lm) {
        fprintf(stderr, "rkmojo trace-sim: out of memory\n");
        rc = 1;
        goto out;
    }
    if (json) {
        cJSON_AddStringToObject(root, "trace", path);
        cJSON_AddNumberToObject(root, "n_layer", t->n_layer);
        cJSON_AddNumberToObject(root, "n_expert", t->n_expert);
        cJSON_AddNumberToObject(root, "top_k", t->top_k);
        cJSON_AddNumberToObject(root, "records", (double)t->n_rec);
        cJSON_AddNumberToObject(root, "passes", (double)n_tok);
        cJSON_AddBoolToObject(root, "global", global);
        rows = cJSON_AddArrayToObject(root, "results");
    } else {
        printf("%s: %lld requests over %lld forward passes, %d layers, %d experts, top-%d\n", path,
               (long long)t->n_rec, (long long)n_tok, t->n_layer, t->n_expert, t->top_k);
        printf("%8s %10s %10s %10s   (expert-cache hit rate per policy%s)\n", "slots", "lru", "lfu", "belady",
               global ? "; slots x layers in one pool" : "");
    }
    for (int si = 0; si < n_slots; si++) {
        rkm_sim_result res[3];
        for (int p = 0; p < 3; p++) {
            res[p] = (rkm_sim_result){.layer_hits = lh + (size_t)p * t->n_layer,
                                      .layer_misses = lm + (size_t)p * t->n_layer};
            if (rkm_trace_simulate_pool(t, p, slots[si], global, &res[p])) {
                fprintf(stderr, "rkmojo trace-sim: %s\n", rkm_last_error());
                rc = 1;
                goto out;
            }
        }
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "slots", slots[si]);
            for (int p = 0; p < 3; p++) {
                cJSON *po = cJSON_AddObjectToObject(o, rkm_sim_policy_name(p));
                cJSON_AddNumberToObject(po, "hits", (double)res[p].hits);
                cJSON_AddNumberToObject(po, "misses", (double)res[p].misses);
                cJSON_AddNumberToObject(po, "hit_rate", rate(res[p].hits, res[p].misses) / 100.0);
                if (res[p].decode_hits + res[p].decode_misses)
                    cJSON_AddNumberToObject(po, "decode_hit_rate", rate(res[p].decode_hits, res[p].decode_misses) / 100.0);
                else
                    cJSON_AddNullToObject(po, "decode_hit_rate");
                if (per_layer) {
                    cJSON *arr = cJSON_AddArrayToObject(po, "layer_hit_rate");
                    for (int l = 0; l < t->n_layer; l++)
                        if (res[p].layer_hits[l] + res[p].layer_misses[l])
                            cJSON_AddItemToArray(
                                arr, cJSON_CreateNumber(rate(res[p].layer_hits[l], res[p].layer_misses[l]) / 100.0));
                }
            }
            cJSON_AddItemToArray(rows, o);
        } else {
            printf("%8d %9.1f%% %9.1f%% %9.1f%%\n", slots[si], rate(res[0].hits, res[0].misses),
                   rate(res[1].hits, res[1].misses), rate(res[2].hits, res[2].misses));
            uint64_t nd = res[0].decode_hits + res[0].decode_misses;
            if (nd && nd < res[0].hits + res[0].misses) /* prefill chunks too: the decoded tokens apart */
                printf("%8s %9.1f%% %9.1f%% %9.1f%%   decoded tokens' requests\n", "",
                       rate(res[0].decode_hits, res[0].decode_misses), rate(res[1].decode_hits, res[1].decode_misses),
                       rate(res[2].decode_hits, res[2].decode_misses));
            if (per_layer)
                for (int l = 0; l < t->n_layer; l++) {
                    if (!(res[0].layer_hits[l] + res[0].layer_misses[l])) continue;
                    printf("%8s %9.1f%% %9.1f%% %9.1f%%   layer %d\n", "",
                           rate(res[0].layer_hits[l], res[0].layer_misses[l]),
                           rate(res[1].layer_hits[l], res[1].layer_misses[l]),
                           rate(res[2].layer_hits[l], res[2].layer_misses[l]), l);
                }
        }
    }
    if (t->n_pred > 0) { /* prefetch hints a layer ahead (--prefetch): named / requested */
        uint64_t all_n = 0, all_r = 0;
        rkm_trace_prediction(t, lh, lm);
        for (int l = 0; l < t->n_layer; l++) all_n += lh[l], all_r += lm[l];
        if (json) {
            cJSON *po = cJSON_AddObjectToObject(root, "prediction");
            cJSON_AddNumberToObject(po, "hints", (double)t->n_pred);
            cJSON_AddNumberToObject(po, "named", (double)all_n);
            cJSON_AddNumberToObject(po, "requested", (double)all_r);
            cJSON_AddNumberToObject(po, "accuracy", rate(all_n, all_r - all_n) / 100.0);
            cJSON *arr = cJSON_AddArrayToObject(po, "layers");
            for (int l = 0; l < t->n_layer; l++) {
                if (!lm[l]) continue;
                cJSON *lo = cJSON_CreateObject();
                cJSON_AddNumberToObject(lo, "layer", l);
                cJSON_AddNumberToObject(lo, "accuracy", rate(lh[l], lm[l] - lh[l]) / 100.0);
                cJSON_AddItemToArray(arr, lo);
            }
        } else {
            printf("prediction a layer ahead: %lld hints named %.1f%% of the %llu experts the next requests asked for\n",
                   (long long)t->n_pred, rate(all_n, all_r - all_n), (unsigned long long)all_r);
            if (per_layer)
                for (int l = 0; l < t->n_layer; l++)
                    if (lm[l]) printf("%8s %9.1f%%   layer %d\n", "", rate(lh[l], lm[l] - lh[l]), l);
        }
    }
    if (json) {
        char *s = cJSON_Print(root);
        if (s) puts(s);
        free(s);
    }
out:
    cJSON_Delete(root);
    free(lh);
    free(lm);
    rkm_trace_free(t);
    return rc;
}
