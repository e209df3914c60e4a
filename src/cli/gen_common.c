/*
 * gen_common.c - options and output helpers shared by the run, chat,
 * perplexity and demo subcommands (see gen_common.h). Single-threaded
 * (the CLI's main thread).
 */
#include "cli/gen_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/common.h"

void rkm_gen_opts_init(rkm_gen_opts *o)
{
    memset(o, 0, sizeof *o);
    rkm_model_params_default(&o->mp);
    rkm_session_params_default(&o->sp);
}

static int num(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double d = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end || !(d >= lo && d <= hi)) {
        fprintf(stderr, "rkmojo: %s needs a number in [%g, %g]\n", opt, lo, hi);
        return -1;
    }
    *out = d;
    return 0;
}

int rkm_gen_opts_parse(rkm_gen_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    double d;
    rkm_sampler_params *sp = &o->sp.sampler;
#define NUM(lo, hi)                                   \
    do {                                              \
        if (num(a, v, lo, hi, &d)) return -1;         \
        (*i)++;                                       \
    } while (0)
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        if (!v) return fprintf(stderr, "rkmojo: %s needs a value\n", a), -1;
        o->model = v;
        (*i)++;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        NUM(0, 1024);
        o->mp.n_threads = (int)d;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
        NUM(0, 1 << 24);
        o->sp.n_ctx = (int)d;
    } else if (!strcmp(a, "--chunk")) {
        NUM(1, 65536);
        o->sp.n_chunk = (int)d;
    } else if (!strcmp(a, "--slots") || !strcmp(a, "--expert-cache-slots")) {
        NUM(0, 1 << 20);
        o->mp.expert_cache_slots = (int)d;
    } else if (!strcmp(a, "--budget") || !strcmp(a, "--mem-budget")) {
        int64_t b = v ? rkm_parse_bytes(v) : -1;
        if (b < 0) return fprintf(stderr, "rkmojo: %s needs a size (e.g. 4G)\n", a), -1;
        o->mp.mem_budget_bytes = (uint64_t)b;
        (*i)++;
    } else if (!strcmp(a, "--prefetch") && v) {
        if (strcmp(v, "on") && strcmp(v, "off")) return fprintf(stderr, "rkmojo: --prefetch on|off\n"), -1;
        o->mp.prefetch = !strcmp(v, "on");
        (*i)++;
    } else if (!strcmp(a, "--backend") && v) {
        if (!strcmp(v, "auto")) o->mp.backend = 0;
        else if (!strcmp(v, "cpu")) o->mp.backend = 1;
        else if (!strcmp(v, "rknn")) o->mp.backend = 2;
        else return fprintf(stderr, "rkmojo: --backend auto|cpu|rknn\n"), -1;
        (*i)++;
    } else if (!strcmp(a, "--cache-policy") && v) {
        if (strcmp(v, "lfu") && strcmp(v, "lru")) return fprintf(stderr, "rkmojo: --cache-policy lfu|lru\n"), -1;
        o->mp.cache_policy = !strcmp(v, "lru");
        (*i)++;
    } else if (!strcmp(a, "--trace-out")) {
        /* the expert cache records routes to the file named here (trace.h) */
        if (!v) return fprintf(stderr, "rkmojo: --trace-out needs a file\n"), -1;
        setenv("RKM_TRACE_OUT", v, 1);
        (*i)++;
    } else if (!strcmp(a, "--cache-scope") && v) {
        if (strcmp(v, "layer") && strcmp(v, "shared"))
            return fprintf(stderr, "rkmojo: --cache-scope layer|shared\n"), -1;
        o->mp.cache_scope = !strcmp(v, "layer") ? 1 : 2;
        (*i)++;
    } else if (!strcmp(a, "--lazy-experts")) {
        o->mp.lazy_experts = 1;
    } else if (!strcmp(a, "--io-threads")) {
        NUM(0, 256);
        o->mp.io_threads = (int)d;
    } else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) {
        NUM(0, 100);
        sp->temperature = (float)d;
    } else if (!strcmp(a, "--top-k")) {
        NUM(0, 1e9);
        sp->top_k = (int)d;
    } else if (!strcmp(a, "--top-p")) {
        NUM(0, 1);
        sp->top_p = (float)d;
    } else if (!strcmp(a, "--min-p")) {
        NUM(0, 1);
        sp->min_p = (float)d;
    } else if (!strcmp(a, "--repeat-penalty")) {
        NUM(0, 100);
        sp->repeat_penalty = (float)d;
    } else if (!strcmp(a, "--repeat-last-n")) {
        NUM(-1, 1e9);
        sp->repeat_last_n = (int)d;
    } else if (!strcmp(a, "--presence-penalty")) {
        NUM(-100, 100);
        sp->presence_penalty = (float)d;
    } else if (!strcmp(a, "--frequency-penalty")) {
        NUM(-100, 100);
        sp->frequency_penalty = (float)d;
    } else if (!strcmp(a, "--seed")) {
        NUM(0, 1.8e19);
        sp->seed = (uint64_t)d;
        o->seed_given = 1;
    } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
        o->quiet = 1;
    } else {
        return 0;
    }
#undef NUM
    return 1;
}

void rkm_gen_opts_usage(FILE *f, int sampling)
{
    fprintf(f, "  -m, --model DIR        the converted .rkmojo model directory (required)\n"
               "  -t, --threads N        compute threads (default: the performance cores)\n"
               "  -c, --ctx N            context size in tokens (default min(4096, trained))\n"
               "  --chunk N              prefill chunk rows (default 128)\n"
               "  --mem-budget SIZE      memory budget (e.g. 2G): experts streamed from disk (alias --budget)\n"
               "  --expert-cache-slots N expert cache slots per MoE layer (alias --slots)\n"
               "  --trace-out FILE       record the routing (token, layer, experts) for rkmojo trace-sim\n"
               "  --cache-policy lfu|lru, --prefetch on|off, --io-threads N   (docs/STREAMING.md)\n"
               "  --lazy-experts         no budget: read each expert on first use, not all in the background\n"
               "  --cache-scope S        shared (one pool of slots for all MoE layers; the default from\n"
               "                         4x top-k slots per layer up) or layer\n"
               "  --backend auto|cpu|rknn where the expert matmuls run (default auto, or $RKM_BACKEND; docs/NPU.md)\n"
               "  -q, --quiet            no statistics footer\n");
    if (sampling)
        fprintf(f, "  --temp T               temperature (default 0.2; 0 = greedy)\n"
                   "  --top-k K              (default 64; 0 = off)\n"
                   "  --top-p P              (default 0.95; 1 = off)\n"
                   "  --min-p P              (default 0 = off)\n"
                   "  --repeat-penalty R     (default 1 = off), --repeat-last-n N (64)\n"
                   "  --presence-penalty X, --frequency-penalty X   (OpenAI semantics)\n"
                   "  --seed N               random seed (default: from the clock)\n");
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
    *m = rkm_model_open(o->model, &o->mp);
    if (!*m) {
        fprintf(stderr, "rkmojo: cannot open %s: %s\n", o->model, rkm_last_error());
        return 1;
    }
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
