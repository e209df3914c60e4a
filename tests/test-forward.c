/*
 * test-forward.c - the forward pass against llama.cpp's goldens
 * (../shared/fixtures) and against a float64 reference (tests/ref/).
 *
 * For every fixture: convert it (rkmojo convert --quant keep), then per
 * case:
 *   - free-running greedy through rkm_session_generate: ids identical to
 *     the golden up to the first near-tie step (f32 files);
 *   - teacher-forced (feeding the golden ids, prefill in chunks of 16 to
 *     exercise chunking and the sliding-window ring): top-1 equal at every
 *     non-near-tie step and the golden's top-5 probabilities within the
 *     file's top5_abs_tol (f32 files); top-1 agreement >= the README's
 *     figure for q8_0 files;
 *   - case 0 and 1 also run through the float64 reference and are compared
 *     layer by layer (max abs diff and cosine printed on failure).
 * RKM_FIXTURE=name runs one fixture only.
 */
#include <cjson/cJSON.h>
#include <math.h>

#include "common/test.h"
#include "ref/ref_forward.c"
#include "rkmojo.h"
#include "runtime/model.h"

typedef struct {
    const char *name;
    int quant;      /* q8_0 file */
    int min_agree;  /* of 96 teacher-forced steps (q8_0) */
} fixture;

static const fixture fixtures[] = {
    {"qwen3moe-f32", 0, 0}, {"qwen2moe-f32", 0, 0}, {"olmoe-f32", 0, 0},     {"mixtral-f32", 0, 0},
    {"gemma4-f32", 0, 0},   {"llama-f32", 0, 0},    {"qwen3-f32", 0, 0},     {"qwen3moe-q8_0", 1, 93},
    {"gemma4-q8_0", 1, 91},
};

static cJSON *load_json(const char *path)
{
    size_t len;
    char *s = rkm_read_file(path, &len);
    if (!s) return NULL;
    cJSON *j = cJSON_ParseWithLength(s, len);
    free(s);
    return j;
}

static int ids_of(const cJSON *arr, int32_t *out, int cap)
{
    int n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        if (n < cap) out[n] = (int32_t)it->valueint;
        n++;
    }
    return n;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

typedef struct {
    int n_gen;
    int32_t ids[64];
} gen_ctx;

static int on_tok(int32_t id, void *u)
{
    gen_ctx *g = u;
    if (g->n_gen < 64) g->ids[g->n_gen] = id;
    g->n_gen++;
    return g->n_gen >= 32;
}

/* ---------------------------------------------------- layer by layer */

typedef struct {
    int n, E, NL;
    double *ref;   /* (NL + 2) stages x 2 kinds x n x E; stage il+1 */
    double *eng;
    uint8_t *seen;
    rkm_session *s;
} trace_buf;

static int stage_index(int il, const char *what)
{
    /* embd -> 0; (il, attn_out) -> 2*il+1; (il, layer_out) -> 2*il+2; final -> 2*NL+1 */
    if (il < 0) return 0;
    if (!strcmp(what, "attn_out")) return 2 * il + 1;
    if (!strcmp(what, "layer_out")) return 2 * il + 2;
    return 2 * il + 1; /* final_norm with il = NL */
}

static void ref_tr(void *u, int il, const char *what, const double *x, int n, int E)
{
    trace_buf *t = u;
    int st = stage_index(il, what);
    memcpy(t->ref + (size_t)st * t->n * E, x, sizeof(double) * (size_t)n * E);
}

static void eng_tr(void *u, int il, const char *what, const float *x, int rows, int cols)
{
    trace_buf *t = u;
    if (!strcmp(what, "router_margin")) return; /* not a stage */
    int st = stage_index(il, what);
    int pos0 = rkm_session_n_past(t->s);
    if (!strcmp(what, "final_norm")) pos0 += 0; /* rows are the chunk's last rows */
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) t->eng[((size_t)st * t->n + pos0 + r) * cols + c] = x[(size_t)r * cols + c];
}

/* Returns the first stage that differs (-1: none); stage 0 is the
 * embeddings, 2*il+1 layer il's attention, 2*il+2 its feed-forward. */
static int compare_layers(const char *name, rkm_model *m, const rkm_model_dir *md, const int32_t *ids, int n,
                          double cos_min, double rel_tol)
{
    const rkm_hparams *hp = &md->hp;
    int E = hp->n_embd, NL = hp->n_layer, ns = 2 * NL + 2;
    trace_buf t = {n, E, NL, calloc((size_t)ns * n * E, sizeof(double)), calloc((size_t)ns * n * E, sizeof(double)),
                   NULL, NULL};
    ref_model r = {md, hp};
    double *lg = malloc(sizeof(double) * hp->n_vocab);
    ref_forward(&r, ids, n, lg, ref_tr, &t);
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = 512;
    sp.n_chunk = 8;
    rkm_session *s = rkm_session_new(m, &sp);
    t.s = s;
    s->trace = eng_tr;
    s->trace_user = &t;
    /* eval_all: the final norm of every row is traced */
    float *all = malloc(sizeof(float) * (size_t)n * hp->n_vocab);
    CHECK(rkm_session_eval_all(s, ids, n, all) == 0);
    int first_bad = -1;
    for (int st = 0; st < ns; st++) {
        double maxd = 0, maxr = 0, dot = 0, na = 0, nb = 0;
        for (size_t i = 0; i < (size_t)n * E; i++) {
            double a = t.ref[(size_t)st * n * E + i], b = t.eng[(size_t)st * n * E + i];
            maxd = fmax(maxd, fabs(a - b));
            maxr = fmax(maxr, fabs(a));
            dot += a * b;
            na += a * a;
            nb += b * b;
        }
        double cs = dot / sqrt(na * nb + 1e-300);
        int ok = cs >= cos_min && (rel_tol <= 0 || maxd <= rel_tol * maxr);
        if (rel_tol <= 0 && getenv("RKM_VERBOSE")) {
            /* quantized files: rows whose 8-bit rounding or expert choice
             * flipped drift apart layer after layer (the engine's f16 KV
             * against the reference's exact one), so only the overall
             * cosine is bounded; RKM_VERBOSE shows the rows */
            int off = 0;
            for (int row = 0; row < n; row++) {
                double d2 = 0, a2 = 0, b2 = 0;
                for (int c = 0; c < E; c++) {
                    double a = t.ref[((size_t)st * n + row) * E + c], b = t.eng[((size_t)st * n + row) * E + c];
                    d2 += a * b;
                    a2 += a * a;
                    b2 += b * b;
                }
                off += d2 / sqrt(a2 * b2 + 1e-300) < 0.9999;
            }
            fprintf(stderr, "%s stage %d: cosine %.6f, %d/%d rows below 0.9999\n", name, st, cs, off, n);
        }
        if (!ok && first_bad < 0) {
            first_bad = st;
            const char *what = st == 0 ? "embeddings" : st == ns - 1 ? "final norm" : st % 2 ? "attention" : "feed-forward";
            fprintf(stderr, "%s: engine vs float64 reference differ first at layer %d (%s): max abs diff %.3g (max |x| %.3g), cosine %.8f\n",
                    name, st == 0 ? -1 : (st - 1) / 2, what, maxd, maxr, cs);
        }
    }
    free(all);
    free(lg);
    rkm_session_free(s);
    free(t.ref);
    free(t.eng);
    return first_bad;
}

static int ref_top1(const rkm_model_dir *md, const int32_t *ids, int n)
{
    ref_model r = {md, &md->hp};
    double *lg = malloc(sizeof(double) * md->hp.n_vocab);
    ref_forward(&r, ids, n, lg, NULL, NULL);
    int b = 0;
    for (int i = 1; i < md->hp.n_vocab; i++)
        if (lg[i] > lg[b]) b = i;
    free(lg);
    return b;
}

static int read_ids(const char *path, int32_t *out, int cap)
{
    FILE *f = fopen(path, "r");
    int n = 0, v;
    if (!f) return -1;
    while (fscanf(f, "%d", &v) == 1) {
        if (n < cap) out[n] = v;
        n++;
    }
    fclose(f);
    return n;
}

static void cli_case(const fixture *fx, const char *dir, const int32_t *prompt, int np, const int32_t *gid,
                     const int *near, int ns)
{
    char *list = malloc(16 * (size_t)(np + ns) + 16), out[1100];
    int32_t got[1024];
    size_t o = 0;
    for (int i = 0; i < np; i++) o += (size_t)sprintf(list + o, "%s%d", i ? "," : "", prompt[i]);
    snprintf(out, sizeof out, "%s/%s.ids", test_tmpdir(), fx->name);
    int first_near = ns;
    for (int k = 0; k < ns; k++)
        if (near[k]) {
            first_near = k;
            break;
        }
    if (!fx->quant) {
        int rc = test_rkmojo(out, "run -m %s --prompt-ids %s --print-ids -n %d --temp 0 -q -t 2", dir, list, ns);
        CHECK_EQ_INT(rc, 0);
        int n = read_ids(out, got, 1024);
        int lead = 0;
        while (lead < n && lead < ns && got[lead] == gid[lead]) lead++;
        CHECK_MSG(lead >= first_near, "%s: rkmojo run --print-ids differs at step %d", fx->name, lead);
    }
    if (!fx->quant) {
        /* text output and --stop: cut right before the stop string's first occurrence */
        char txt[1100];
        snprintf(txt, sizeof txt, "%s/%s.txt", test_tmpdir(), fx->name);
        CHECK_EQ_INT(test_rkmojo(txt, "run -m %s --prompt-ids %s -n 12 --temp 0 -q", dir, list), 0);
        size_t len = 0;
        char *full = rkm_read_file(txt, &len);
        int k = -1;
        for (size_t i = 4; full && i + 3 < len; i++) {
            char st[4] = {full[i], full[i + 1], full[i + 2], 0};
            if (strchr(st, '\n') || strchr(st, '\'') || strchr(st, '\\') || (unsigned char)st[0] >= 0x80 ||
                (unsigned char)st[2] >= 0x80 || !st[0] || !st[1] || !st[2])
                continue;
            if ((size_t)(strstr(full, st) - full) == i) {
                k = (int)i;
                break;
            }
        }
        CHECK_MSG(k > 0, "%s: no usable stop string in the output", fx->name);
        if (k > 0) {
            char st[4] = {full[k], full[k + 1], full[k + 2], 0};
            CHECK_EQ_INT(test_rkmojo(txt, "run -m %s --prompt-ids %s -n 12 --temp 0 -q --stop '%s'", dir, list, st), 0);
            size_t l2 = 0;
            char *cut = rkm_read_file(txt, &l2);
            CHECK_MSG(cut && l2 == (size_t)k + 1 && !memcmp(cut, full, (size_t)k) && cut[k] == '\n',
                      "%s: --stop '%s' gave %zu bytes, expected %d", fx->name, st, l2, k + 1);
            free(cut);
        }
        free(full);
    }
    /* teacher forcing through perplexity: prompt + golden ids */
    for (int k = 0; k + 1 < ns; k++) o += (size_t)sprintf(list + o, ",%d", gid[k]);
    int rc = test_rkmojo(out, "perplexity -m %s --ids %s --print-top1 -q -t 2 2>/dev/null", dir, list);
    CHECK_EQ_INT(rc, 0);
    int n = read_ids(out, got, 1024), agree = 0;
    CHECK_EQ_INT(n, np + ns - 1);
    for (int k = 0; k < ns && np - 1 + k < n; k++) {
        agree += got[np - 1 + k] == gid[k];
        if (!fx->quant && !near[k]) CHECK_MSG(got[np - 1 + k] == gid[k], "%s: perplexity --print-top1 step %d", fx->name, k);
    }
    if (fx->quant) CHECK_MSG(agree >= ns - 3, "%s: perplexity --print-top1 agrees on %d/%d", fx->name, agree, ns);
    free(list);
}

static void run_fixture(const char *shared, const fixture *fx)
{
    char gguf[1024], gold[1024], dir[1024];
    snprintf(gguf, sizeof gguf, "%s/fixtures/%s.gguf", shared, fx->name);
    snprintf(gold, sizeof gold, "%s/fixtures/%s.golden.json", shared, fx->name);
    snprintf(dir, sizeof dir, "%s/%s.rkmojo", test_tmpdir(), fx->name);
    int rc = test_rkmojo("/dev/null", "convert %s %s --quant keep 2>/dev/null", gguf, dir);
    CHECK_MSG(rc == 0, "convert %s failed (%d)", fx->name, rc);
    if (rc) return;
    cJSON *j = load_json(gold);
    CHECK_MSG(j != NULL, "cannot parse %s", gold);
    if (!j) return;
    double tol = cJSON_GetObjectItem(j, "top5_abs_tol")->valuedouble;
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.n_threads = 2;
    rkm_model *m = rkm_model_open(dir, &mp);
    CHECK_MSG(m != NULL, "open %s: %s", dir, rkm_last_error());
    if (!m) {
        cJSON_Delete(j);
        return;
    }
    int nv = rkm_model_n_vocab(m);
    float *lg = malloc(sizeof(float) * nv);
    int agree = 0, total = 0, gen_ok_cases = 0, n_cases = 0, cut_out = 0, cut_router = 0, hard = 0;
    double max_dp = 0;
    const cJSON *cs;
    int ci = 0;
    cJSON_ArrayForEach(cs, cJSON_GetObjectItem(j, "cases"))
    {
        int32_t prompt[512 + 64], gid[64];
        int near[64], router[64] = {0};
        int np = ids_of(cJSON_GetObjectItem(cs, "prompt_ids"), prompt, 512);
        const cJSON *steps = cJSON_GetObjectItem(cs, "steps"), *st;
        int ns = 0;
        cJSON_ArrayForEach(st, steps)
        {
            if (ns < 64) {
                gid[ns] = cJSON_GetObjectItem(st, "id")->valueint;
                near[ns] = cJSON_IsTrue(cJSON_GetObjectItem(st, "near_tie"));
            }
            ns++;
        }
        if (np > 512 || ns > 64) {
            CHECK_MSG(0, "%s: case too large", fx->name);
            continue;
        }
        n_cases++;
        rkm_session_params sp;
        rkm_session_params_default(&sp);
        sp.n_ctx = 512 + 64;
        sp.sampler.temperature = 0;
        /* 0. router ties on the golden's trajectory: a step that forcing
         * the runner-up at one decision under 2e-3 changes (or brings
         * within the near-tie gap) is set aside, as a near-tie is */
        rkm_session *s = rkm_session_new(m, &sp);
        CHECK(s != NULL);
        if (!s) break;
        memcpy(prompt + np, gid, sizeof(int32_t) * (size_t)(ns - 1));
        rkm_router_ties ties;
        CHECK_MSG(rkm_router_ties_run(s, prompt, np + ns - 1, 2e-3f, fx->quant ? 0.05f : 0.005f, &ties) == 0, "%s",
                  rkm_last_error());
        for (int k = 0; k < ns && ties.tie; k++) router[k] = ties.tie[np - 1 + k];
        rkm_router_ties_free(&ties);
        rkm_session_free(s);
        /* 1. free-running greedy with the public API */
        s = rkm_session_new(m, &sp);
        CHECK(s != NULL);
        if (!s) break;
        CHECK(rkm_session_eval(s, prompt, np, NULL) == 0);
        gen_ctx g = {0};
        CHECK(rkm_session_generate(s, ns, on_tok, &g) == 0);
        int first_near = ns;
        for (int k = 0; k < ns; k++)
            if (near[k] || router[k]) {
                first_near = k;
                break;
            }
        int lead = 0;
        while (lead < g.n_gen && lead < ns && g.ids[lead] == gid[lead]) lead++;
        if (!fx->quant) {
            CHECK_MSG(lead >= first_near, "%s case %d: greedy ids differ at step %d (first near-tie %d): got %d want %d",
                      fx->name, ci, lead, first_near, lead < g.n_gen ? g.ids[lead] : -1, gid[lead]);
            gen_ok_cases += lead >= first_near;
        }
        rkm_session_free(s);

        /* 2. teacher-forced, prefill in chunks of 16 */
        sp.n_chunk = 16;
        s = rkm_session_new(m, &sp);
        CHECK(s != NULL);
        if (!s) break;
        CHECK(rkm_session_eval(s, prompt, np, lg) == 0);
        int k = 0;
        cJSON_ArrayForEach(st, steps)
        {
            int top = argmax(lg, nv);
            total++;
            agree += top == gid[k];
            cut_out += near[k];
            cut_router += !near[k] && router[k];
            hard += !near[k] && !router[k] && top != gid[k];
            if (!fx->quant && !near[k] && !router[k])
                CHECK_MSG(top == gid[k], "%s case %d step %d: top-1 %d, golden %d", fx->name, ci, k, top, gid[k]);
            /* probabilities over the full vocabulary, in double */
            double mx = lg[top], sum = 0;
            for (int i = 0; i < nv; i++) sum += exp((double)lg[i] - mx);
            const cJSON *t5;
            cJSON_ArrayForEach(t5, cJSON_GetObjectItem(st, "top5"))
            {
                int id = cJSON_GetArrayItem(t5, 0)->valueint;
                double pg = cJSON_GetArrayItem(t5, 1)->valuedouble;
                double pe = exp((double)lg[id] - mx) / sum;
                double dp = fabs(pe - pg);
                if (dp > max_dp) max_dp = dp;
                if (!fx->quant)
                    CHECK_MSG(dp <= tol, "%s case %d step %d: p[%d] = %.6f, golden %.6f (tol %g)", fx->name, ci, k, id,
                              pe, pg, tol);
            }
            int32_t next = gid[k];
            CHECK(rkm_session_eval(s, &next, 1, lg) == 0);
            k++;
        }
        rkm_session_free(s);

        /* 3. layer by layer against the float64 reference (short cases) */
        if (ci < 2) {
            /* q8_0: the reference emulates ggml's q8_0 activations; an 8-bit
             * rounding or expert choice may still flip for a row (the
             * engine's f16 KV), hence the looser bounds */
            if (fx->quant) {
                ref_emulate_q8 = 1;
                int bad = compare_layers(fx->name, m, m->md, prompt, np, 0.99, 0);
                CHECK_MSG(bad < 0, "%s: layer-by-layer comparison failed", fx->name);
                ref_emulate_q8 = 0;
            }
            else {
                int bad = compare_layers(fx->name, m, m->md, prompt, np, 0.99999, 0.01);
                CHECK_MSG(bad < 0, "%s: layer-by-layer comparison failed", fx->name);
                if (ci == 0) {
                    /* the comparison finds a planted fault: the wrong RoPE
                     * ordering shows in layer 0's attention */
                    for (int il = 0; il < m->hp.n_layer; il++) m->layers[il].rope.neox ^= 1;
                    fprintf(stderr, "(planted fault, the next line is expected)\n");
                    CHECK_EQ_INT(compare_layers(fx->name, m, m->md, prompt, np, 0.99999, 0.01), 1);
                    for (int il = 0; il < m->hp.n_layer; il++) m->layers[il].rope.neox ^= 1;
                }
                int rt = ref_top1(m->md, prompt, np);
                CHECK_MSG(rt == gid[0], "%s case %d: the float64 reference predicts %d, golden %d", fx->name, ci, rt, gid[0]);
            }
        }
        /* 4. the CLI: run --prompt-ids --print-ids, perplexity --print-top1 */
        if (ci == 0) cli_case(fx, dir, prompt, np, gid, near, ns);
        ci++;
    }
    if (fx->quant) {
        CHECK_MSG(agree >= fx->min_agree, "%s: teacher-forced top-1 agreement %d/%d < %d", fx->name, agree, total,
                  fx->min_agree);
        CHECK_MSG(hard <= 1, "%s: %d teacher-forced steps differ outside near-ties and router ties", fx->name, hard);
    }
    printf("%-14s top-1 %d/%d (set aside: %d near-ties, %d router ties; %d apart outside them), max |dp| %.2e (tol "
           "%g)%s\n",
           fx->name, agree, total, cut_out, cut_router, hard, max_dp, tol,
           fx->quant ? "" : (gen_ok_cases == n_cases ? ", greedy ok" : ", greedy FAILED"));
    free(lg);
    rkm_model_close(m);
    cJSON_Delete(j);
}

int main(void)
{
    const char *shared = test_require_shared();
    const char *only = getenv("RKM_FIXTURE");
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        if (only && strcmp(only, fixtures[i].name)) continue;
        run_fixture(shared, &fixtures[i]);
    }
    return test_done();
}
