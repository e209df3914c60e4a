/*
 * gen_common.c - option tables and output helpers shared by the run, chat,
 * perplexity, demo and bench subcommands (see gen_common.h). Single-threaded
 * (the CLI's main thread).
 */
#include "cli/gen_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/common.h"

void rkm_gen_opts_init(rkm_gen_opts *o, int sampling)
{
    memset(o, 0, sizeof *o);
    rkm_model_params_default(&o->mp);
    rkm_session_params_default(&o->sp);
    rkm_sampler_params *sp = &o->sp.sampler;
    const rkm_opt model[] = {
        {"model", 'm', RKM_OPT_STR, &o->model, .arg = "DIR", .help = "the converted .rkmojo model directory"},
        {"threads", 't', RKM_OPT_INT, &o->mp.n_threads, 0, 1024, "N", .help = "compute threads (default: the performance cores)"},
        {"ctx-size", 'c', RKM_OPT_INT, &o->sp.n_ctx, 0, 1 << 24, "N", .help = "context size in tokens (default min(4096, trained))",
         .alias = "ctx"},
        {"mem-budget", 0, RKM_OPT_SIZE, &o->mp.mem_budget_bytes, 0, 1e18, "SIZE",
         "memory budget (e.g. 2G): experts streamed from disk", .alias = "budget"},
        {"expert-cache-slots", 0, RKM_OPT_INT, &o->mp.expert_cache_slots, 0, 1 << 20, "N",
         "expert cache slots per MoE layer (instead of a budget)", .alias = "slots"},
        {"cache-policy", 0, RKM_OPT_ENUM, &o->mp.cache_policy, 0, 0, .values = "lfu|lru",
         .help = "expert cache eviction (default lfu; docs/STREAMING.md)"},
        {"prefetch", 0, RKM_OPT_ENUM, &o->mp.prefetch, 0, 0, .values = "off|on",
         .help = "next-layer expert prefetch (default off)"},
        {"cache-scope", 0, RKM_OPT_ENUM, &o->mp.cache_scope, 1, 0, .values = "layer|shared",
         .help = "shared: one pool of slots for all MoE layers (the default from\n"
                 "4x top-k slots per layer up); layer: each layer its own"},
        {"lazy-experts", 0, RKM_OPT_FLAG, &o->mp.lazy_experts,
         .help = "no budget: read each expert on first use, not all in the background"},
        {"io-threads", 0, RKM_OPT_INT, &o->mp.io_threads, 0, 256, "N", .help = "expert read threads"},
        {"backend", 0, RKM_OPT_ENUM, &o->mp.backend, 0, 0, .values = "auto|cpu|rknn",
         .help = "where the expert matmuls run (default auto, or $RKM_BACKEND; docs/NPU.md)"},
        {0},
    };
    const rkm_opt session[] = {
        {"chunk", 0, RKM_OPT_INT, &o->sp.n_chunk, 1, 65536, "N", .help = "prefill chunk rows (default 128)"},
        {"trace-out", 0, RKM_OPT_STR, &o->mp.trace_out, .arg = "FILE",
         .help = "record the routing (token, layer, experts) for rkmojo trace-sim"},
        {"quiet", 'q', RKM_OPT_FLAG, &o->quiet, .help = "no statistics footer"},
        {0},
    };
#define SHOWN(text) (sampling ? (text) : NULL)
    const rkm_opt sampler[] = {
        {"temp", 0, RKM_OPT_FLOAT, &sp->temperature, 0, 100, "T",
         .help = SHOWN("temperature (default 0.8, or the model's own; 0 = greedy)"), .alias = "temperature",
         .given = &o->sampling_given[0]},
        {"top-k", 0, RKM_OPT_INT, &sp->top_k, 0, 1e9, "K", .help = SHOWN("(default 40; 0 = off)"),
         .given = &o->sampling_given[1]},
        {"top-p", 0, RKM_OPT_FLOAT, &sp->top_p, 0, 1, "P", .help = SHOWN("(default 0.95; 1 = off)"),
         .given = &o->sampling_given[2]},
        {"min-p", 0, RKM_OPT_FLOAT, &sp->min_p, 0, 1, "P", .help = SHOWN("(default 0.05; 0 = off)"),
         .given = &o->sampling_given[3]},
        {"repeat-penalty", 0, RKM_OPT_FLOAT, &sp->repeat_penalty, 0, 100, "R", .help = SHOWN("(default 1 = off)"),
         .given = &o->sampling_given[4]},
        {"repeat-last-n", 0, RKM_OPT_INT, &sp->repeat_last_n, -1, 1e9, "N",
         .help = SHOWN("window of the repeat penalty (default 64)"), .given = &o->sampling_given[5]},
        {"presence-penalty", 0, RKM_OPT_FLOAT, &sp->presence_penalty, -100, 100, "X",
         .help = SHOWN("(OpenAI semantics, default 0)"), .given = &o->sampling_given[6]},
        {"frequency-penalty", 0, RKM_OPT_FLOAT, &sp->frequency_penalty, -100, 100, "X",
         .help = SHOWN("(OpenAI semantics, default 0)"), .given = &o->sampling_given[7]},
        {"seed", 0, RKM_OPT_U64, &sp->seed, 0, 18446744073709551615.0, "N", .help = SHOWN("random seed (default: from the clock)"),
         .given = &o->seed_given},
        {0},
    };
#undef SHOWN
    _Static_assert(sizeof model <= sizeof o->model_opts, "model_opts too small");
    _Static_assert(sizeof session <= sizeof o->session_opts, "session_opts too small");
    _Static_assert(sizeof sampler <= sizeof o->sampling_opts, "sampling_opts too small");
    memcpy(o->model_opts, model, sizeof model);
    memcpy(o->session_opts, session, sizeof session);
    memcpy(o->sampling_opts, sampler, sizeof sampler);
}

int rkm_gen_open(rkm_gen_opts *o, rkm_model **m, rkm_session **s)
{
    *m = NULL;
    *s = NULL;
    if (!o->model) {
        fprintf(stderr, "rkmojo: -m MODEL is required\n");
        return 2;
    }
    if (!o->seed_given) o->sp.sampler.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    if (!o->mp.plan_n_ctx) o->mp.plan_n_ctx = o->sp.n_ctx; /* the budget plans for --ctx */
    if (rkm_model_params_from_knobs(&o->mp)) {
        fprintf(stderr, "rkmojo: %s\n", rkm_last_error());
        return 2;
    }
    *m = rkm_model_open(o->model, &o->mp);
    if (!*m) {
        fprintf(stderr, "rkmojo: cannot open %s: %s\n", o->model, rkm_last_error());
        return 1;
    }
    /* sampling the user did not set comes from the model's defaults */
    rkm_sampler_params base, *sp = &o->sp.sampler;
    rkm_sampler_params_for_model(*m, &base);
    if (!o->sampling_given[0]) sp->temperature = base.temperature;
    if (!o->sampling_given[1]) sp->top_k = base.top_k;
    if (!o->sampling_given[2]) sp->top_p = base.top_p;
    if (!o->sampling_given[3]) sp->min_p = base.min_p;
    if (!o->sampling_given[4]) sp->repeat_penalty = base.repeat_penalty;
    if (!o->sampling_given[5]) sp->repeat_last_n = base.repeat_last_n;
    if (!o->sampling_given[6]) sp->presence_penalty = base.presence_penalty;
    if (!o->sampling_given[7]) sp->frequency_penalty = base.frequency_penalty;
    /* the backend line, unless it only says the model has no NPU weights */
    if (!o->quiet && strncmp(rkm_model_backend(*m), "cpu: the model has no NPU", 25))
        fprintf(stderr, "rkmojo: backend %s\n", rkm_model_backend(*m));
    *s = rkm_session_new(*m, &o->sp);
    if (!*s) {
        fprintf(stderr, "rkmojo: cannot create a session: %s\n", rkm_last_error());
        rkm_model_close(*m);
        *m = NULL;
        return 1;
    }
    return 0;
}

int rkm_parse_ids(const char *s, int32_t **ids)
{
    int n = 0, cap = 16;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    if (!v) return -1;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t' || *p == '[' || *p == ']') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            fprintf(stderr, "rkmojo: bad token id list near '%.16s'\n", p);
            free(v);
            return -1;
        }
        if (n == cap) {
            int32_t *nv = realloc(v, sizeof(int32_t) * (size_t)(cap *= 2));
            if (!nv) {
                free(v);
                return -1;
            }
            v = nv;
        }
        v[n++] = (int32_t)x;
        p = end;
    }
    *ids = v;
    return n;
}

/* ------------------------------------------------------ text output */

void rkm_text_out_init(rkm_text_out *t, const rkm_model *m, FILE *f, const char **stop, int n_stop)
{
    memset(t, 0, sizeof *t);
    t->f = f;
    t->t = rkm_textout_new(m, stop, n_stop);
}

static void emit(rkm_text_out *t, const char *s, size_t n)
{
    if (!n) return;
    if (t->f) {
        fwrite(s, 1, n, t->f);
        fflush(t->f);
    }
    if (t->keep_all) rkm_buf_add(&t->all, s, n);
}

int rkm_text_out_push(rkm_text_out *t, int32_t id)
{
    if (!t->t) return 0;
    const char *s;
    size_t n;
    int rc = rkm_textout_push_token(t->t, id, &s, &n);
    if (rc >= 0) emit(t, s, n);
    return rc == 1;
}

void rkm_text_out_finish(rkm_text_out *t)
{
    const char *s;
    size_t n;
    if (t->t && rkm_textout_flush(t->t, &s, &n) >= 0) emit(t, s, n);
}

void rkm_text_out_free(rkm_text_out *t)
{
    rkm_textout_free(t->t);
    rkm_buf_free(&t->all);
    memset(t, 0, sizeof *t);
}

void rkm_print_footer(FILE *f, const rkm_stats *st)
{
    char rss[32];
    fprintf(f, "\n[prompt %d tok | TTFT %.0f ms | prefill %.1f tok/s | decode %d tok, %.2f tok/s | peak RSS %s",
            st->n_prompt, st->ttft_s * 1e3, st->t_prompt_s > 0 ? st->n_prompt / st->t_prompt_s : 0.0, st->n_gen,
            st->t_gen_s > 0 ? st->n_gen / st->t_gen_s : 0.0, rkm_fmt_bytes(rkm_peak_rss_bytes(), rss, sizeof rss));
    if (st->expert_hits + st->expert_misses) {
        char rd[32];
        fprintf(f, " | experts hit %.1f%%, read %s, IO wait %.2f s",
                100.0 * (double)st->expert_hits / (double)(st->expert_hits + st->expert_misses),
                rkm_fmt_bytes(st->bytes_read, rd, sizeof rd), st->io_wait_s);
    }
    fprintf(f, "]\n");
}
