/*
 * cmd_bench.c - `rkmojo bench`: prefill and decode speed of a model under a
 * memory budget, with the expert-streaming figures that explain them: hit
 * rate (overall and per layer), bytes read and IO wait per token, read
 * bandwidth, peak RSS. `--force-text FILE` feeds a real text token by token
 * (teacher forcing) so the routing sees realistic token statistics even on
 * synthetic weights, whose own greedy output is a degenerate loop.
 *
 * Single-threaded driver (the library's pool computes). Reads per-layer
 * cache counters through the model's internal header (runtime/model.h):
 * the public API has no per-layer figure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cjson/cJSON.h>

#include "cli/bench_limits.h"
#include "cli/cli.h"
#include "cli/gen_common.h"
#include "runtime/budget.h"
#include "runtime/io_engine.h"
#include "runtime/model.h"
#include "util/common.h"

static const char *default_text =
    "The history of the printing press begins in the fifteenth century, when movable metal type made it "
    "possible to reproduce a page many times at low cost. Within a few decades presses had spread to every "
    "major city of Europe, and the number of books in circulation grew from thousands to millions. Scholars "
    "argue about the consequences: faster spread of ideas, standardised spelling, new markets for authors, "
    "and the political pamphlet. A modern computer reads a file from a solid state disk in a similar spirit: "
    "it copies blocks of fixed size into memory, and a program that knows which blocks it will need next can "
    "ask for them early, so that the processor never waits. Cooking rice well needs the right ratio of water, "
    "a lid that closes, and patience; the grains should rest for ten minutes after the heat is turned off. ";

typedef struct phase {
    int n;
    double t;
    double cpu;   /* user + system CPU seconds of the process (all threads) */
    rkm_stats st;
} phase;

/* CPU time of the process: with other programs on the machine, wall time
 * varies with their load, CPU time much less. */
static double cpu_now(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

static double per_s(double x, double t) { return t > 0 ? x / t : 0; }

#define BENCH_MAX_REPEAT 100

/* Adds one run's phase into the totals. */
static void phase_add(phase *sum, const phase *p)
{
    sum->n += p->n;
    sum->t += p->t;
    sum->cpu += p->cpu;
    sum->st.expert_hits += p->st.expert_hits;
    sum->st.expert_misses += p->st.expert_misses;
    sum->st.bytes_read += p->st.bytes_read;
    sum->st.io_wait_s += p->st.io_wait_s;
    sum->st.grammar_picks += p->st.grammar_picks;
    sum->st.grammar_masked += p->st.grammar_masked;
    sum->st.grammar_masks_built += p->st.grammar_masks_built;
}

/* Median, mean, sample standard deviation, min and max of n values. */
typedef struct spread {
    double median, mean, sd, min, max;
} spread;

static spread spread_of(const double *v, int n)
{
    spread r = {0};
    if (n <= 0) return r;
    double s[BENCH_MAX_REPEAT];
    memcpy(s, v, sizeof(double) * (size_t)n);
    r.median = rkm_bench_sort_median(s, n);
    r.min = s[0];
    r.max = s[n - 1];
    for (int i = 0; i < n; i++) r.mean += s[i] / n;
    for (int i = 0; i < n && n > 1; i++) r.sd += (s[i] - r.mean) * (s[i] - r.mean) / (n - 1);
    r.sd = sqrt(r.sd);
    return r;
}

static cJSON *spread_json(const double *v, int n)
{
    spread r = spread_of(v, n);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "median", r.median);
    cJSON_AddNumberToObject(o, "mean", r.mean);
    cJSON_AddNumberToObject(o, "sd", r.sd);
    cJSON_AddNumberToObject(o, "min", r.min);
    cJSON_AddNumberToObject(o, "max", r.max);
    cJSON *a = cJSON_AddArrayToObject(o, "runs");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return o;
}

static void spread_print(const char *what, const double *v, int n)
{
    spread r = spread_of(v, n);
    printf("%s tok/s over %d runs: median %.2f, mean %.2f ± %.2f, min %.2f, max %.2f (", what, n, r.median, r.mean,
           r.sd, r.min, r.max);
    for (int i = 0; i < n; i++) printf("%s%.2f", i ? " " : "", v[i]);
    printf(")\n");
}

typedef struct lim {
    int ok;
    double mem_gbs, disk_mbs, w_bytes, disk_bytes, overlap_tok_s, serial_tok_s;
} lim;

/* Passes of the weights-only read after each run's decode (--limits). */
#define BENCH_WPASS_PASSES 5
static double hit_rate(const rkm_stats *s)
{
    uint64_t a = s->expert_hits + s->expert_misses;
    return a ? (double)s->expert_hits / (double)a : 0;
}

static cJSON *phase_json(const phase *p, const char *what)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tokens", p->n);
    cJSON_AddNumberToObject(o, "seconds", p->t);
    cJSON_AddNumberToObject(o, "tok_s", per_s(p->n, p->t));
    cJSON_AddNumberToObject(o, "cpu_s", p->cpu);
    cJSON_AddNumberToObject(o, "expert_hits", (double)p->st.expert_hits);
    cJSON_AddNumberToObject(o, "expert_misses", (double)p->st.expert_misses);
    cJSON_AddNumberToObject(o, "hit_rate", hit_rate(&p->st));
    cJSON_AddNumberToObject(o, "bytes_read", (double)p->st.bytes_read);
    cJSON_AddNumberToObject(o, "bytes_per_token", p->n ? (double)p->st.bytes_read / p->n : 0);
    cJSON_AddNumberToObject(o, "io_wait_s", p->st.io_wait_s);
    cJSON_AddNumberToObject(o, "io_wait_ms_per_token", p->n ? 1e3 * p->st.io_wait_s / p->n : 0);
    cJSON_AddNumberToObject(o, "read_mb_s", per_s((double)p->st.bytes_read / 1e6, p->t));
    (void)what;
    return o;
}

static void phase_print(FILE *f, const phase *p, const char *what)
{
    char b[32];
    fprintf(f,
            "%-8s %5d tok %9.2f tok/s (CPU %.0f ms/tok)  hit %5.1f%%  read %s (%.1f MB/tok, %.0f MB/s)  "
            "IO wait %.1f ms/tok\n",
            what, p->n, per_s(p->n, p->t), p->n ? 1e3 * p->cpu / p->n : 0, 100 * hit_rate(&p->st),
            rkm_fmt_bytes(p->st.bytes_read, b, sizeof b),
            p->n ? (double)p->st.bytes_read / 1e6 / p->n : 0, per_s((double)p->st.bytes_read / 1e6, p->t),
            p->n ? 1e3 * p->st.io_wait_s / p->n : 0);
}

/* --parallel N: N sequences decoding together (rkm_batch_eval). */
typedef struct {
    int n_seq, pre_n, dec_n, steps;
    double pre_t, dec_t;
    rkm_expert_cache_stats cs;
} par_result;

/* Sequence i's prompt: the prompt's tokens after the first rotated by 7i,
 * so that the sequences differ and route differently. */
static void par_prompt(const int32_t *pids, int np, int i, int32_t *out)
{
    out[0] = pids[0];
    for (int j = 1; j < np; j++) out[j] = pids[1 + (j - 1 + 7 * i) % (np - 1)];
}

/* N sessions: their prompts prefilled together (each pass takes up to
 * max_rows / N rows of each), then n_decode greedy steps of all of them
 * in one pass each. */
static int bench_parallel(rkm_model *m, const rkm_session_params *sp, const int32_t *pids, int np, int n_decode, int N,
                          par_result *r)
{
    memset(r, 0, sizeof *r);
    r->n_seq = N;
    int max_rows = RKM_MAX(N, sp->n_chunk > 0 ? sp->n_chunk : 128), rc = 0;
    rkm_session **ss = calloc((size_t)N, sizeof *ss);
    int32_t *pr = malloc(sizeof(int32_t) * (size_t)N * (size_t)np), *tok = malloc(sizeof(int32_t) * (size_t)N);
    const int32_t **ids = malloc(sizeof *ids * (size_t)N);
    int *cnt = malloc(sizeof(int) * (size_t)N);
    rkm_batch *b = NULL;
    if (!ss || !pr || !tok || !ids || !cnt) rc = rkm_err(RKM_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < N; i++) {
        if (!(ss[i] = rkm_session_new(m, sp))) rc = RKM_ENOMEM;
        else par_prompt(pids, np, i, pr + (size_t)i * np);
    }
    if (!rc && !(b = rkm_batch_new(m, max_rows, rkm_session_n_ctx(ss[0])))) rc = RKM_ENOMEM;
    double t0 = rkm_now();
    for (int done = 0; !rc && done < np;) {
        int q = RKM_MIN(np - done, RKM_MAX(1, max_rows / N));
        for (int i = 0; i < N; i++) ids[i] = pr + (size_t)i * np + done, cnt[i] = q;
        rc = rkm_batch_eval(b, ss, ids, cnt, N);
        done += q;
    }
    r->pre_t = rkm_now() - t0;
    r->pre_n = np * N;
    if (m->cache) rkm_expert_cache_reset_stats(m->cache);
    t0 = rkm_now();
    for (int step = 0; !rc && step < n_decode; step++) {
        for (int i = 0; !rc && i < N; i++) {
            rc = rkm_session_sample(ss[i], &tok[i]);
            ids[i] = &tok[i];
            cnt[i] = 1;
        }
        if (!rc) rc = rkm_batch_eval(b, ss, ids, cnt, N);
        r->steps += !rc;
    }
    r->dec_t = rkm_now() - t0;
    r->dec_n = r->steps * N;
    if (m->cache) rkm_expert_cache_get_stats(m->cache, &r->cs);
    rkm_batch_free(b);
    for (int i = 0; ss && i < N; i++) rkm_session_free(ss[i]);
    free(ss);
    free(pr);
    free(tok);
    free(ids);
    free(cnt);
    return rc;
}

int rkm_cmd_bench(int argc, char **argv)
{
    rkm_gen_opts o;
    rkm_gen_opts_init(&o, 0);
    const char *prompt = NULL, *prompt_file = NULL, *force_file = NULL, *schema = NULL;
    char *gbnf = NULL;
    int n_prompt = 128, n_decode = 128, json = 0, per_layer = 0, limits = 0, warm = 0, depth = -1, reps = 1, par = 0;
    const rkm_opt opts[] = {
        {"prompt", 'p', RKM_OPT_STR, &prompt, .arg = "TEXT", .help = "prompt text (default: a built-in English paragraph)"},
        {"prompt-file", 0, RKM_OPT_STR, &prompt_file, .arg = "FILE", .help = "prompt from a file"},
        {"prompt-tokens", 0, RKM_OPT_INT, &n_prompt, 1, 1 << 24, "N",
         .help = "prompt length in tokens (default 128; the text is repeated)"},
        {"n-predict", 'n', RKM_OPT_INT, &n_decode, 0, 1 << 24, "N", .help = "tokens to decode (default 128)"},
        {"depth", 0, RKM_OPT_INT, &depth, -1, 1 << 24, "N",
         .help = "decode from a context of the prompt's first N tokens (0: empty,\n"
                 "as llama-bench's tg); default: after the whole prompt"},
        {"force-text", 0, RKM_OPT_STR, &force_file, .arg = "FILE",
         .help = "decode by feeding FILE's tokens one by one (teacher forcing)"},
        {"per-layer", 0, RKM_OPT_FLAG, &per_layer, .help = "print the hit rate of every MoE layer"},
        {"json-schema", 0, RKM_OPT_STR, &schema, .arg = "FILE|JSON",
         .help = "sample under this JSON schema's grammar ('object': any object),\n"
                 "to measure constrained decoding"},
        {"warm", 0, RKM_OPT_FLAG, &warm,
         .help = "run the prompt once untimed first, so prefill is measured with\n"
                 "the experts it needs already read, and, with every expert resident,\n"
                 "after the background read of all of them (a resident model's steady state)"},
        {"limits", 0, RKM_OPT_FLAG, &limits,
         .help = "probe memory and disk bandwidth and print the decode speed\n"
                 "they allow, given the bytes per token and the hit rate; with\n"
                 "every expert in memory, also read the same weights alone\n"
                 "after each run and give the decode speed as a share of that"},
        {"repeat", 'r', RKM_OPT_INT, &reps, 1, BENCH_MAX_REPEAT, "N",
         .help = "measure prefill and decode N times in this process (default 1)\n"
                 "and report the median, mean, spread and every run; the phase\n"
                 "figures are then totals over the runs, the cache and per-layer\n"
                 "figures the last run's"},
        {"parallel", 0, RKM_OPT_INT, &par, 2, 256, "N",
         .help = "then N sequences together (the prompt rotated per sequence):\n"
                 "prefilled in shared passes, decoded in one pass per step\n"
                 "(rkm_batch_eval); prints their total and per-sequence speed"},
        {"json", 0, RKM_OPT_FLAG, &json, .help = "machine-readable output on stdout"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "bench", "usage: rkmojo bench -m MODEL [options]\n\n", NULL,
        {opts, o.model_opts, o.session_opts, o.sampling_opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    o.sp.sampler.temperature = 0; /* greedy: the run is reproducible */
    o.sampling_given[0] = 1;
    o.seed_given = 1;
    rkm_model *m;
    rkm_session *s;
    double t_open = rkm_now();
    int rc = rkm_gen_open(&o, &m, &s);
    if (rc) return rc;
    t_open = rkm_now() - t_open;

    int32_t *pids = NULL, *fids = NULL;
    int n_fids = 0, np = 0;
    char *text = NULL;
    cJSON *root = NULL;
    rkm_bench_wpass *wp = NULL; /* --limits: the weights-only pass */
    const char *wp_why = NULL;
    rc = 1;
    if (prompt_file) {
        size_t len;
        text = rkm_read_file(prompt_file, &len);
        if (!text) {
            fprintf(stderr, "rkmojo bench: %s\n", rkm_last_error());
            goto out;
        }
    }
    if (schema) {
        char *js = !strcmp(schema, "object") ? NULL : schema[0] == '{' ? strdup(schema) : rkm_read_file(schema, NULL);
        if (strcmp(schema, "object") && !js) {
            fprintf(stderr, "rkmojo bench: %s\n", rkm_last_error());
            goto out;
        }
        gbnf = rkm_json_schema_grammar(js, js ? strlen(js) : 0);
        free(js);
        if (!gbnf) {
            fprintf(stderr, "rkmojo bench: %s\n", rkm_last_error());
            goto out;
        }
    }
    const char *src = text ? text : prompt ? prompt : default_text;
    int n_src = rkm_tokenize_alloc(m, src, strlen(src), 1, 0, &pids);
    if (n_src <= 0) {
        fprintf(stderr, "rkmojo bench: cannot tokenize the prompt: %s\n", rkm_last_error());
        goto out;
    }
    if (!prompt && !prompt_file) { /* repeat the paragraph up to n_prompt tokens */
        int32_t *b = realloc(pids, sizeof(int32_t) * (size_t)RKM_MAX(n_prompt, n_src));
        if (!b) goto out;
        pids = b;
        for (int i = n_src; i < n_prompt; i++) pids[i] = pids[1 + (i - 1) % RKM_MAX(n_src - 1, 1)];
        np = n_prompt;
    } else {
        np = RKM_MIN(n_src, n_prompt);
    }
    if (force_file) {
        size_t len;
        char *ft = rkm_read_file(force_file, &len);
        if (!ft) {
            fprintf(stderr, "rkmojo bench: %s\n", rkm_last_error());
            goto out;
        }
        n_fids = rkm_tokenize_alloc(m, ft, strlen(ft), 0, 0, &fids);
        free(ft);
        if (n_fids <= 0) {
            fprintf(stderr, "rkmojo bench: cannot tokenize %s\n", force_file);
            goto out;
        }
        if (n_decode > n_fids) n_decode = n_fids;
    }

    /* --warm: the same prompt once, untimed, then forgotten; a resident
     * model's background expert read finished */
    if (warm && (rkm_session_eval(s, pids, np, NULL) || rkm_session_truncate(s, 0))) {
        fprintf(stderr, "rkmojo bench: warm-up failed: %s\n", rkm_last_error());
        goto out;
    }
    if (warm && m->cache) rkm_expert_cache_wait_fill(m->cache);
    /* Each run: prefill from an empty context, then decode greedy tokens
     * (EOG ignored so that every run decodes n) or the forced text, from
     * the --depth context. The phase figures add up over the runs. */
    phase pre = {0}, dec = {0};
    double pre_tps[BENCH_MAX_REPEAT], dec_tps[BENCH_MAX_REPEAT], ttfts[BENCH_MAX_REPEAT];
    /* --limits: after each run's decode, the same weights read alone
     * (bench_limits.h), so each run has a ceiling measured moments after
     * it; made after the first run, which a background expert fill may
     * overlap */
    double wp_tps[BENCH_MAX_REPEAT], wp_share[BENCH_MAX_REPEAT];
    for (int rep = 0; rep < reps; rep++) {
        if (rep > 0 && rkm_session_truncate(s, 0)) {
            fprintf(stderr, "rkmojo bench: %s\n", rkm_last_error());
            goto out;
        }
        phase p1 = {.n = np}, p2 = {0};
        if (gbnf && rkm_session_set_grammar(s, gbnf)) { /* a fresh grammar state each run */
            fprintf(stderr, "rkmojo bench: %s\n", rkm_last_error());
            goto out;
        }
        rkm_session_stats_reset(s);
        if (m->cache) rkm_expert_cache_reset_stats(m->cache);
        double t0 = rkm_now(), c0 = cpu_now();
        if (rkm_session_eval(s, pids, np, NULL)) {
            fprintf(stderr, "rkmojo bench: prefill failed: %s\n", rkm_last_error());
            goto out;
        }
        p1.t = rkm_now() - t0;
        p1.cpu = cpu_now() - c0;
        int32_t id;
        if (rkm_session_sample(s, &id)) goto out;
        rkm_session_stats(s, &p1.st);
        ttfts[rep] = p1.st.ttft_s;
        if (depth >= 0 && depth < np && rkm_session_truncate(s, depth)) {
            fprintf(stderr, "rkmojo bench: --depth: %s\n", rkm_last_error());
            goto out;
        }
        rkm_session_stats_reset(s);
        if (m->cache) rkm_expert_cache_reset_stats(m->cache);
        t0 = rkm_now(), c0 = cpu_now();
        for (int i = 0; i < n_decode; i++) {
            int32_t next = force_file ? fids[i] : id;
            if (rkm_session_eval(s, &next, 1, NULL)) {
                fprintf(stderr, "rkmojo bench: decode failed at token %d: %s\n", i, rkm_last_error());
                goto out;
            }
            if (!force_file && rkm_session_sample(s, &id)) goto out;
            p2.n++;
        }
        p2.t = rkm_now() - t0;
        p2.cpu = cpu_now() - c0;
        rkm_session_stats(s, &p2.st);
        pre_tps[rep] = per_s(p1.n, p1.t);
        dec_tps[rep] = per_s(p2.n, p2.t);
        if (limits && p2.n > 0 && rep == 0) wp = rkm_bench_wpass_new(m, &wp_why);
        if (wp) {
            wp_tps[rep] = per_s(1, rkm_bench_wpass_run(wp, m->pool, BENCH_WPASS_PASSES));
            wp_share[rep] = per_s(dec_tps[rep], wp_tps[rep]);
        }
        phase_add(&pre, &p1);
        phase_add(&dec, &p2);
    }
    double ttft = spread_of(ttfts, reps).median;

    par_result pr = {0};
    if (par && bench_parallel(m, &o.sp, pids, np, n_decode, par, &pr)) {
        fprintf(stderr, "rkmojo bench: --parallel %d: %s\n", par, rkm_last_error());
        goto out;
    }
    uint64_t rss = rkm_peak_rss_bytes(); /* before the probes' buffers */
    /* The decode limits: the weights a token needs are read from memory
     * (hits and freshly read experts alike), the misses from disk first.
     * Perfect overlap gives max(mem, disk) per token, none gives the sum. */
    lim L = {0};
    if (limits && dec.n > 0) {
        L.mem_gbs = rkm_bench_mem_read_gbs(m->pool, (size_t)1 << 30);
        L.w_bytes = rkm_bench_weight_bytes_per_token(m);
        L.disk_bytes = (double)dec.st.bytes_read / dec.n;
        if (rkm_bench_model_disk_mbs(m->md, o.mp.io_threads > 0 ? o.mp.io_threads : RKM_IO_DEFAULT_THREADS, &L.disk_mbs))
            fprintf(stderr, "rkmojo bench: disk probe: %s\n", rkm_last_error());
        double tm = L.mem_gbs > 0 ? L.w_bytes / (L.mem_gbs * 1e9) : 0;
        double td = L.disk_mbs > 0 ? L.disk_bytes / (L.disk_mbs * 1e6) : 0;
        L.overlap_tok_s = per_s(1, RKM_MAX(tm, td));
        L.serial_tok_s = per_s(1, tm + td);
        L.ok = L.mem_gbs > 0;
    }

    rkm_budget plan;
    int plan_rc = rkm_budget_plan(m->md, o.mp.mem_budget_bytes, o.sp.n_ctx, NULL, &plan);
    int slots = m->cache ? rkm_expert_cache_slots(m->cache) : 0;
    if (json) {
        root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "model", o.model);
        cJSON_AddStringToObject(root, "arch", rkm_model_arch(m));
        cJSON_AddNumberToObject(root, "threads", m->n_threads);
        cJSON_AddNumberToObject(root, "mem_budget_bytes", (double)o.mp.mem_budget_bytes);
        cJSON_AddNumberToObject(root, "slots_per_layer", slots);
        cJSON_AddNumberToObject(root, "n_expert", m->hp.n_expert);
        cJSON_AddStringToObject(root, "policy", o.mp.cache_policy ? "lru" : "lfu");
        cJSON_AddStringToObject(root, "cache_scope",
                                m->cache && rkm_expert_cache_shared(m->cache) ? "shared" : "layer");
        cJSON_AddBoolToObject(root, "prefetch", m->prefetch > 0);
        cJSON_AddStringToObject(root, "io_backend", m->cache ? rkm_expert_cache_io_backend(m->cache) : "none");
        cJSON_AddBoolToObject(root, "direct_io", m->cache && rkm_expert_cache_direct(m->cache));
        cJSON_AddNumberToObject(root, "expert_cache_bytes", m->cache ? (double)rkm_expert_cache_bytes(m->cache) : 0);
        cJSON_AddNumberToObject(root, "open_s", t_open);
        cJSON_AddNumberToObject(root, "ttft_s", ttft);
        cJSON_AddItemToObject(root, "prefill", phase_json(&pre, "prefill"));
        cJSON_AddItemToObject(root, "decode", phase_json(&dec, "decode"));
        cJSON_AddBoolToObject(root, "teacher_forced", force_file != NULL);
        cJSON_AddBoolToObject(root, "warm", warm);
        cJSON_AddNumberToObject(root, "decode_depth", depth >= 0 && depth < np ? depth : np);
        cJSON_AddNumberToObject(root, "repeat", reps);
        cJSON_AddItemToObject(root, "prefill_tok_s", spread_json(pre_tps, reps));
        cJSON_AddItemToObject(root, "decode_tok_s", spread_json(dec_tps, reps));
        cJSON_AddNumberToObject(root, "peak_rss_bytes", (double)rss);
        if (L.ok) {
            cJSON *lo = cJSON_AddObjectToObject(root, "limits");
            cJSON_AddNumberToObject(lo, "mem_read_gb_s", L.mem_gbs);
            cJSON_AddNumberToObject(lo, "disk_read_mb_s", L.disk_mbs);
            cJSON_AddNumberToObject(lo, "weight_bytes_per_token", L.w_bytes);
            cJSON_AddNumberToObject(lo, "disk_bytes_per_token", L.disk_bytes);
            cJSON_AddNumberToObject(lo, "decode_tok_s_overlapped", L.overlap_tok_s);
            cJSON_AddNumberToObject(lo, "decode_tok_s_serial", L.serial_tok_s);
            cJSON_AddNumberToObject(lo, "decode_share_of_overlapped", per_s(per_s(dec.n, dec.t), L.overlap_tok_s));
            if (wp) {
                cJSON_AddNumberToObject(lo, "weights_pass_bytes", rkm_bench_wpass_bytes(wp));
                cJSON_AddItemToObject(lo, "weights_pass_tok_s", spread_json(wp_tps, reps));
                cJSON_AddItemToObject(lo, "decode_share_of_weights_pass", spread_json(wp_share, reps));
            } else if (wp_why) {
                cJSON_AddStringToObject(lo, "weights_pass_skipped", wp_why);
            }
        }
        if (!plan_rc) cJSON_AddNumberToObject(root, "plan_total_bytes", (double)plan.total_bytes);
        if (par) {
            cJSON *po = cJSON_AddObjectToObject(root, "parallel");
            cJSON_AddNumberToObject(po, "sequences", pr.n_seq);
            cJSON_AddNumberToObject(po, "prefill_tok_s", per_s(pr.pre_n, pr.pre_t));
            cJSON_AddNumberToObject(po, "decode_tok_s", per_s(pr.dec_n, pr.dec_t));
            cJSON_AddNumberToObject(po, "decode_steps_s", per_s(pr.steps, pr.dec_t));
            cJSON_AddNumberToObject(po, "decode_bytes_read", (double)pr.cs.bytes_read);
            cJSON_AddNumberToObject(po, "decode_hits", (double)pr.cs.hits);
            cJSON_AddNumberToObject(po, "decode_misses", (double)pr.cs.misses);
        }
        if (m->cache) {
            rkm_expert_cache_stats cs;
            rkm_expert_cache_get_stats(m->cache, &cs);
            cJSON *co = cJSON_AddObjectToObject(root, "decode_cache");
            cJSON_AddNumberToObject(co, "hits", (double)cs.hits);
            cJSON_AddNumberToObject(co, "misses", (double)cs.misses);
            cJSON_AddNumberToObject(co, "prefetch_issued", (double)cs.prefetch_issued);
            cJSON_AddNumberToObject(co, "prefetch_hits", (double)cs.prefetch_hits);
            cJSON_AddNumberToObject(co, "bytes_read", (double)cs.bytes_read);
            cJSON_AddNumberToObject(co, "io_wait_s", cs.io_wait_s);
            cJSON_AddNumberToObject(co, "read_s", cs.read_s);
            cJSON_AddNumberToObject(co, "errors", (double)cs.errors);
            cJSON *arr = cJSON_AddArrayToObject(root, "decode_layer_hit_rate");
            for (int il = 0; il < m->hp.n_layer; il++) {
                uint64_t h, mi;
                rkm_expert_cache_layer_stats(m->cache, il, &h, &mi);
                if (h + mi) cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)h / (double)(h + mi)));
            }
            uint64_t pn, pq;
            rkm_expert_cache_layer_prediction(m->cache, -1, &pn, &pq);
            if (pq) { /* --prefetch on: how well the layer-ahead router named the experts */
                cJSON *po = cJSON_AddObjectToObject(root, "decode_prediction");
                cJSON_AddNumberToObject(po, "named", (double)pn);
                cJSON_AddNumberToObject(po, "requested", (double)pq);
                cJSON_AddNumberToObject(po, "accuracy", (double)pn / (double)pq);
                cJSON *la = cJSON_AddArrayToObject(po, "layers");
                for (int il = 0; il < m->hp.n_layer; il++) {
                    rkm_expert_cache_layer_prediction(m->cache, il, &pn, &pq);
                    if (!pq) continue;
                    cJSON *lo = cJSON_CreateObject();
                    cJSON_AddNumberToObject(lo, "layer", il);
                    cJSON_AddNumberToObject(lo, "accuracy", (double)pn / (double)pq);
                    cJSON_AddItemToArray(la, lo);
                }
            }
        }
        char *js = cJSON_Print(root);
        if (js) puts(js);
        free(js);
    } else {
        char b1[32], b2[32];
        printf("model %s (%s), %d threads, open %.2f s\n", o.model, rkm_model_arch(m), m->n_threads, t_open);
        if (m->cache)
            printf("expert cache: %d of %d slots per layer%s (%s), %s, prefetch %s, %s reads%s, budget %s\n", slots,
                   m->hp.n_expert, rkm_expert_cache_shared(m->cache) ? " in one shared pool" : "",
                   rkm_fmt_bytes(rkm_expert_cache_bytes(m->cache), b1, sizeof b1),
                   o.mp.cache_policy ? "lru" : "lfu", m->prefetch > 0 ? "on" : "off",
                   rkm_expert_cache_io_backend(m->cache), rkm_expert_cache_direct(m->cache) ? " (O_DIRECT)" : "",
                   o.mp.mem_budget_bytes ? rkm_fmt_bytes(o.mp.mem_budget_bytes, b2, sizeof b2) : "none");
        char desc[512];
        if (!plan_rc) printf("plan: %s\n", rkm_budget_describe(&plan, desc, sizeof desc));
        if (warm) printf("prefill measured warm (--warm: the prompt ran once before, untimed)\n");
        phase_print(stdout, &pre, "prefill");
        if (depth >= 0 && depth < np) printf("decode measured from a context of %d tokens (--depth)\n", depth);
        phase_print(stdout, &dec, force_file ? "forced" : "decode");
        if (gbnf)
            printf("grammar: %d picks, %d (%.1f%%) broke it and were redrawn masked, %d masks walked over the vocabulary\n",
                   dec.st.grammar_picks, dec.st.grammar_masked,
                   dec.st.grammar_picks ? 100.0 * dec.st.grammar_masked / dec.st.grammar_picks : 0,
                   dec.st.grammar_masks_built);
        if (reps > 1) {
            printf("%d runs in this process (the phase lines above are their totals):\n", reps);
            spread_print("prefill", pre_tps, reps);
            spread_print(force_file ? "forced" : "decode", dec_tps, reps);
        }
        if (par) {
            uint64_t acc = pr.cs.hits + pr.cs.misses;
            printf("parallel %d sequences: prefill %d tok %.2f tok/s; decode %d steps, %.2f tok/s in total (%.2f per "
                   "sequence), hit %.1f%%, read %.1f MB per step\n",
                   pr.n_seq, pr.pre_n, per_s(pr.pre_n, pr.pre_t), pr.steps, per_s(pr.dec_n, pr.dec_t),
                   per_s(pr.steps, pr.dec_t), acc ? 100.0 * (double)pr.cs.hits / (double)acc : 100.0,
                   pr.steps ? (double)pr.cs.bytes_read / pr.steps / 1e6 : 0);
        }
        printf("TTFT %.0f ms%s, peak RSS %s\n", ttft * 1e3, reps > 1 ? " (median)" : "",
               rkm_fmt_bytes(rss, b1, sizeof b1));
        if (L.ok) {
            char dk[48] = "disk not measured";
            if (L.disk_mbs > 0) snprintf(dk, sizeof dk, "disk %.0f MB/s (O_DIRECT)", L.disk_mbs);
            printf("limits: memory %.1f GB/s (%d threads), %s; a decode token reads %.0f MB of weights from memory "
                   "and %.1f MB from disk\n",
                   L.mem_gbs, m->n_threads, dk, L.w_bytes / 1e6, L.disk_bytes / 1e6);
            printf("limits: decode at most %.2f tok/s (IO and compute fully overlapped), %.2f tok/s (serial); "
                   "measured %.2f = %.0f%% of the first\n",
                   L.overlap_tok_s, L.serial_tok_s, per_s(dec.n, dec.t),
                   100 * per_s(per_s(dec.n, dec.t), L.overlap_tok_s));
            if (wp) {
                spread a = spread_of(wp_tps, reps), b = spread_of(wp_share, reps);
                printf("limits: the same %.0f MB read alone (no arithmetic, no barriers; median of %d passes after "
                       "each run): %.2f tok/s%s; decode reached %.1f%% of it%s\n",
                       rkm_bench_wpass_bytes(wp) / 1e6, BENCH_WPASS_PASSES, a.median, reps > 1 ? " (median)" : "",
                       100 * b.median, reps > 1 ? " (median of the runs' shares)" : "");
            } else if (wp_why) {
                printf("limits: no weights-only pass: %s\n", wp_why);
            }
        }
        uint64_t pn = 0, pq = 0;
        if (m->cache) rkm_expert_cache_layer_prediction(m->cache, -1, &pn, &pq);
        if (pq) {
            printf("decode prediction: the router a layer ahead named %.1f%% of the %llu experts requested after it",
                   100.0 * (double)pn / (double)pq, (unsigned long long)pq);
            if (per_layer)
                for (int il = 0; il < m->hp.n_layer; il++) {
                    rkm_expert_cache_layer_prediction(m->cache, il, &pn, &pq);
                    if (pq) printf(" %d:%.0f%%", il, 100.0 * (double)pn / (double)pq);
                }
            printf("\n");
        }
        if (m->cache && per_layer) {
            printf("decode hit rate per MoE layer:");
            for (int il = 0; il < m->hp.n_layer; il++) {
                uint64_t h, mi;
                rkm_expert_cache_layer_stats(m->cache, il, &h, &mi);
                if (h + mi) printf(" %d:%.0f%%", il, 100.0 * (double)h / (double)(h + mi));
            }
            printf("\n");
        }
    }
    rc = 0;
out:
    rkm_bench_wpass_free(wp);
    cJSON_Delete(root);
    free(text);
    free(gbnf);
    free(pids);
    free(fids);
    rkm_session_free(s);
    rkm_model_close(m);
    return rc;
}
