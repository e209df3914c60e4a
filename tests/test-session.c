/*
 * test-session.c - the session API on converted fixtures: chunk-size
 * invariance, eval vs eval_all, truncate (including the sliding-window
 * ring being recomputed), save/load round trip and its error paths, a full
 * context, cancel, embeddings, seeds, statistics, bad arguments, and two
 * sessions of one model on two threads, manifests whose shapes do not
 * match the weights.
 */
#include <math.h>
#include <pthread.h>

#include <cjson/cJSON.h>

#include "common/test.h"
#include "rkmojo.h"
#include "runtime/budget.h"
#include "runtime/model.h"

static char qdir[1024], gdir[1024];

static int convert(const char *shared, const char *name, char *out, size_t cap)
{
    char gguf[1024];
    snprintf(gguf, sizeof gguf, "%s/fixtures/%s.gguf", shared, name);
    snprintf(out, cap, "%s/%s.rkmojo", test_tmpdir(), name);
    return test_rkmojo("/dev/null", "convert %s %s --quant keep 2>/dev/null", gguf, out);
}

static rkm_session *new_session(rkm_model *m, int n_ctx, int n_chunk)
{
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = n_ctx;
    sp.n_chunk = n_chunk;
    sp.sampler.temperature = 0;
    return rkm_session_new(m, &sp);
}

static double max_diff(const float *a, const float *b, int n)
{
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static void prompt_ids(int32_t *ids, int n, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % 508);
    }
}

/* Logits after ids with the given chunk size. */
static void logits_with_chunk(rkm_model *m, const int32_t *ids, int n, int chunk, float *out)
{
    rkm_session *s = new_session(m, 512, chunk);
    CHECK(s && rkm_session_eval(s, ids, n, out) == 0);
    rkm_session_free(s);
}

static void test_chunks(rkm_model *m, const char *name)
{
    int nv = rkm_model_n_vocab(m);
    int32_t ids[200];
    prompt_ids(ids, 200, 7);
    float *a = malloc(sizeof(float) * nv), *b = malloc(sizeof(float) * nv), *c = malloc(sizeof(float) * nv);
    logits_with_chunk(m, ids, 200, 128, a);
    logits_with_chunk(m, ids, 200, 1, b);
    logits_with_chunk(m, ids, 200, 33, c);
    double d1 = max_diff(a, b, nv), d2 = max_diff(a, c, nv);
    CHECK_MSG(d1 < 1e-3 && d2 < 1e-3, "%s: chunk sizes change the logits: %g %g", name, d1, d2);
    /* eval_all's last row equals eval's logits; row k equals a prefix eval */
    float *all = malloc(sizeof(float) * (size_t)nv * 200);
    rkm_session *s = new_session(m, 512, 64);
    CHECK(rkm_session_eval_all(s, ids, 200, all) == 0);
    CHECK(max_diff(all + (size_t)199 * nv, a, nv) < 1e-3);
    logits_with_chunk(m, ids, 100, 64, b);
    CHECK(max_diff(all + (size_t)99 * nv, b, nv) < 1e-3);
    /* embedding: logits = output . embedding */
    float *e = malloc(sizeof(float) * rkm_model_n_embd(m));
    CHECK(rkm_session_embedding(s, e) == 0);
    if (m->output.type == RKM_TYPE_F32) {
        const float *w = m->output.data;
        int E = rkm_model_n_embd(m);
        double d = 0;
        for (int t = 0; t < nv; t++) {
            double z = 0;
            for (int i = 0; i < E; i++) z += (double)w[(size_t)t * E + i] * e[i];
            if (m->hp.final_softcap > 0) z = m->hp.final_softcap * tanh(z / m->hp.final_softcap);
            d = fmax(d, fabs(z - a[t]));
        }
        CHECK_MSG(d < 1e-3, "%s: logits != output . embedding (%g)", name, d);
    }
    rkm_session_free(s);
    free(e);
    free(all);
    free(a);
    free(b);
    free(c);
}

static void test_truncate(rkm_model *m, const char *name, int cut)
{
    int nv = rkm_model_n_vocab(m);
    int32_t ids[220];
    prompt_ids(ids, 220, 11);
    float *a = malloc(sizeof(float) * nv), *b = malloc(sizeof(float) * nv);
    rkm_session *s = new_session(m, 512, 16);
    CHECK(rkm_session_eval(s, ids, cut, a) == 0);
    CHECK(rkm_session_eval(s, ids + cut, 220 - cut, NULL) == 0);
    CHECK(rkm_session_n_past(s) == 220);
    CHECK(rkm_session_truncate(s, cut) == 0);
    CHECK(rkm_session_n_past(s) == cut);
    /* the same last token again after dropping it: same logits */
    CHECK(rkm_session_truncate(s, cut - 1) == 0);
    CHECK(rkm_session_eval(s, ids + cut - 1, 1, b) == 0);
    CHECK_MSG(max_diff(a, b, nv) < 1e-3, "%s: truncate to %d changes the logits (%g)", name, cut, max_diff(a, b, nv));
    int n;
    const int32_t *t = rkm_session_tokens(s, &n);
    CHECK(n == cut && !memcmp(t, ids, sizeof(int32_t) * cut));
    CHECK(rkm_session_truncate(s, cut + 1) == RKM_EINVAL);
    rkm_session_free(s);
    free(a);
    free(b);
}

static int count_tok(int32_t id, void *u)
{
    int32_t *v = u;
    v[++v[0]] = id;
    return v[0] >= 20;
}

/* rkm_session_copy: a copy continues as the original does (same logits,
 * same greedy tokens), over another conversation it held, into a smaller
 * sliding-window ring; refused into a context too small or another model */
static void test_copy(rkm_model *m, rkm_model *other, const char *name, int n)
{
    int nv = rkm_model_n_vocab(m);
    int32_t ids[300], other_ids[40];
    prompt_ids(ids, n, 5);
    prompt_ids(other_ids, 40, 9);
    rkm_session *a = new_session(m, 512, 64), *b = new_session(m, 512, 16), *small = new_session(m, n - 1, 16);
    rkm_session *o = new_session(other, 512, 64);
    CHECK(a && b && small && o);
    if (!a || !b || !small || !o) return;
    CHECK(rkm_session_eval(a, ids, n, NULL) == 0);
    CHECK(rkm_session_eval(b, other_ids, 40, NULL) == 0); /* something to overwrite */
    CHECK_MSG(rkm_session_copy(b, a) == 0, "%s", rkm_last_error());
    CHECK(rkm_session_n_past(b) == n);
    float *la = malloc(sizeof(float) * nv), *lb = malloc(sizeof(float) * nv);
    CHECK(rkm_session_eval(a, NULL, 0, la) == 0 && rkm_session_eval(b, NULL, 0, lb) == 0);
    CHECK_MSG(max_diff(la, lb, nv) == 0, "%s: copied logits differ", name);
    int32_t ga[32] = {0}, gb[32] = {0};
    CHECK(rkm_session_generate(a, 20, count_tok, ga) == 0 && rkm_session_generate(b, 20, count_tok, gb) == 0);
    CHECK_MSG(ga[0] == 20 && !memcmp(ga, gb, sizeof ga), "%s: a copy continues differently", name);
    CHECK(rkm_session_copy(small, a) == RKM_ECTXFULL);
    CHECK(rkm_session_copy(o, a) == RKM_EINVAL && rkm_session_copy(a, a) == RKM_EINVAL);
    printf("%s: a copy of %d tokens continues as the original\n", name, n);
    free(la);
    free(lb);
    rkm_session_free(a);
    rkm_session_free(b);
    rkm_session_free(small);
    rkm_session_free(o);
}

static void test_save_load(rkm_model *m, rkm_model *other, const char *name)
{
    int32_t ids[150];
    prompt_ids(ids, 150, 5);
    char path[1100];
    snprintf(path, sizeof path, "%s/%s.session", test_tmpdir(), name);
    rkm_session *s = new_session(m, 512, 32);
    CHECK(rkm_session_eval(s, ids, 149, NULL) == 0);
    CHECK(rkm_session_save(s, path) == 0);
    int nv = rkm_model_n_vocab(m);
    float *la = malloc(sizeof(float) * nv), *lb = malloc(sizeof(float) * nv);
    CHECK(rkm_session_eval(s, ids + 149, 1, la) == 0);
    int32_t g1[32] = {0}, g2[32] = {0};
    CHECK(rkm_session_generate(s, 20, count_tok, g1) == 0);
    rkm_session *r = new_session(m, 512, 8); /* other chunk: other ring size */
    CHECK(rkm_session_load(r, path) == 0);
    CHECK(rkm_session_n_past(r) == 149);
    /* the next position from the restored cache and state: the same logits, bit for bit */
    CHECK(rkm_session_eval(r, ids + 149, 1, lb) == 0);
    CHECK_MSG(max_diff(la, lb, nv) == 0, "%s: logits after load differ by %g", name, max_diff(la, lb, nv));
    free(la);
    free(lb);
    CHECK(rkm_session_n_past(r) == 150);
    CHECK(rkm_session_generate(r, 20, count_tok, g2) == 0);
    CHECK_MSG(g1[0] == g2[0] && !memcmp(g1, g2, sizeof g1), "%s: generation after load differs", name);
    /* corrupt one byte: checksum */
    size_t len;
    char *data = rkm_read_file(path, &len);
    CHECK(data != NULL);
    if (data) {
        char bad[1200];
        snprintf(bad, sizeof bad, "%s.bad", path);
        data[len / 2] ^= 0x40;
        FILE *f = fopen(bad, "wb");
        fwrite(data, 1, len, f);
        fclose(f);
        CHECK(rkm_session_load(r, bad) == RKM_ECHECKSUM);
        CHECK(rkm_session_n_past(r) == 0);
        data[len / 2] ^= 0x40;
        f = fopen(bad, "wb");
        fwrite(data, 1, len / 3, f); /* truncated */
        fclose(f);
        int rc = rkm_session_load(r, bad);
        CHECK(rc == RKM_ECHECKSUM || rc == RKM_EFORMAT);
        f = fopen(bad, "wb");
        fwrite("garbage", 1, 7, f);
        fclose(f);
        CHECK(rkm_session_load(r, bad) == RKM_EFORMAT);
        free(data);
    }
    CHECK(rkm_session_load(r, "/nonexistent/x") < 0);
    if (other) {
        rkm_session *o = new_session(other, 512, 32);
        CHECK(rkm_session_load(o, path) == RKM_EFORMAT);
        rkm_session_free(o);
    }
    /* too small a context for the saved tokens */
    rkm_session *tiny = new_session(m, 64, 16);
    CHECK(rkm_session_load(tiny, path) == RKM_ECTXFULL);
    rkm_session_free(tiny);
    rkm_session_free(r);
    rkm_session_free(s);
}

static int cancel_after;
static void cancel_trace(void *u, int il, const char *what, const float *x, int rows, int cols)
{
    /* in the second chunk (8 rows each) */
    if (il == cancel_after && !strcmp(what, "layer_out") && rkm_session_n_past(u) >= 8) rkm_session_cancel(u);
}

/* Recurrent layers: a truncation restores the latest snapshot of the
 * state at or before its position (the end of the last prompt chunks)
 * and evaluates only the tokens after it; the logits and greedy ids then
 * equal a cold run's. A chunk canceled part-way leaves the state ahead of
 * the kept positions: the next evaluation puts it back first. */
static void test_snapshots(rkm_model *m, const char *name)
{
    int nv = rkm_model_n_vocab(m);
    int32_t ids[260];
    prompt_ids(ids, 260, 21);
    float *a = malloc(sizeof(float) * nv), *b = malloc(sizeof(float) * nv);
    rkm_session *s = new_session(m, 512, 64);
    CHECK(rkm_session_eval(s, ids, 200, NULL) == 0); /* snapshots at 128, 192, 200 */
    for (int i = 200; i < 220; i++) CHECK(rkm_session_eval(s, ids + i, 1, NULL) == 0); /* decoding keeps none */
    rkm_stats st;
    /* a session file keeps the snapshots (the server's disk prompt cache) */
    char path[1100];
    snprintf(path, sizeof path, "%s/%s-snap.session", test_tmpdir(), name);
    CHECK(rkm_session_save(s, path) == 0);
    rkm_session *r = new_session(m, 512, 64);
    CHECK(rkm_session_load(r, path) == 0);
    rkm_session_stats_reset(r);
    CHECK(rkm_session_truncate(r, 205) == 0);
    rkm_session_stats(r, &st);
    CHECK_MSG(st.n_prompt == 5, "%s: a loaded session's truncation evaluated %d tokens, not 5", name, st.n_prompt);
    CHECK(rkm_session_eval(r, ids + 205, 1, b) == 0);
    rkm_session_free(r);
    rkm_session_stats_reset(s);
    CHECK(rkm_session_truncate(s, 205) == 0);
    rkm_session_stats(s, &st);
    CHECK_MSG(st.n_prompt == 5, "%s: truncation to 205 evaluated %d tokens, not the 5 after the snapshot at 200", name,
              st.n_prompt);
    CHECK(rkm_session_eval(s, ids + 205, 1, a) == 0);
    CHECK_MSG(max_diff(a, b, nv) == 0, "%s: the loaded session's replay differs (%g)", name, max_diff(a, b, nv));
    logits_with_chunk(m, ids, 206, 64, b);
    CHECK_MSG(max_diff(a, b, nv) < 1e-3, "%s: logits after a snapshot's replay differ from a cold run by %g", name,
              max_diff(a, b, nv));
    /* the same greedy continuation as a cold session */
    rkm_session *c = new_session(m, 512, 64);
    CHECK(rkm_session_eval(c, ids, 206, NULL) == 0);
    int32_t g1[32] = {0}, g2[32] = {0};
    CHECK(rkm_session_generate(s, 20, count_tok, g1) == 0 && rkm_session_generate(c, 20, count_tok, g2) == 0);
    CHECK_MSG(g1[0] == 20 && !memcmp(g1, g2, sizeof g1), "%s: greedy ids after prefix reuse differ from a cold run", name);
    /* before every snapshot: from position 0 */
    rkm_session_stats_reset(s);
    CHECK(rkm_session_truncate(s, 100) == 0);
    rkm_session_stats(s, &st);
    CHECK_MSG(st.n_prompt == 100, "%s: truncation to 100 evaluated %d tokens", name, st.n_prompt);
    /* a chunk canceled in its third layer: the next evaluation first puts
     * the state back where the kept positions end */
    cancel_after = 2;
    s->trace = cancel_trace;
    s->trace_user = s;
    CHECK(rkm_session_eval(s, ids + 100, 100, NULL) == RKM_ECANCELED);
    s->trace = NULL;
    int kept = rkm_session_n_past(s);
    CHECK(kept >= 100 && kept < 200);
    CHECK(rkm_session_eval(s, ids + kept, 200 - kept, a) == 0);
    logits_with_chunk(m, ids, 200, 64, b);
    CHECK_MSG(max_diff(a, b, nv) < 1e-3, "%s: logits after a canceled chunk differ from a cold run by %g", name,
              max_diff(a, b, nv));
    rkm_session_free(c);
    rkm_session_free(s);
    free(a);
    free(b);
}

static void test_errors(rkm_model *m)
{
    int32_t ids[40];
    prompt_ids(ids, 40, 3);
    rkm_session *s = new_session(m, 32, 8);
    int32_t id;
    CHECK(rkm_session_sample(s, &id) == RKM_EINVAL); /* nothing evaluated */
    CHECK(rkm_session_generate(s, 4, NULL, NULL) == RKM_EINVAL);
    int32_t bad = 100000;
    CHECK(rkm_session_eval(s, &bad, 1, NULL) == RKM_EINVAL);
    bad = -1;
    CHECK(rkm_session_eval(s, &bad, 1, NULL) == RKM_EINVAL);
    CHECK(rkm_session_eval(s, ids, 40, NULL) == RKM_ECTXFULL);
    CHECK(strstr(rkm_last_error(), "context") != NULL);
    CHECK(rkm_session_n_past(s) == 0);
    CHECK(rkm_session_eval(s, ids, 30, NULL) == 0);
    int32_t got[64] = {0};
    /* the context fills during generation: an error, not a crash */
    CHECK(rkm_session_generate(s, 10, count_tok, got) == RKM_ECTXFULL);
    CHECK(rkm_session_n_past(s) == 32);
    /* cancel: the flag is checked between layers */
    rkm_session_truncate(s, 0);
    cancel_after = 1;
    s->trace = cancel_trace;
    s->trace_user = s;
    CHECK(rkm_session_eval(s, ids, 20, NULL) == RKM_ECANCELED);
    CHECK(rkm_session_n_past(s) == 8); /* the first chunk stayed */
    s->trace = NULL;
    CHECK(rkm_session_eval(s, ids + 8, 12, NULL) == 0);
    CHECK(rkm_session_n_past(s) == 20);
    rkm_stats st;
    rkm_session_stats(s, &st);
    CHECK(st.n_prompt >= 20);
    rkm_session_stats_reset(s);
    rkm_session_stats(s, &st);
    CHECK(st.n_prompt == 0 && st.n_gen == 0);
    rkm_session_free(s);
    rkm_session_free(NULL);
    CHECK(rkm_model_open("/nonexistent-dir", NULL) == NULL);
    CHECK(strlen(rkm_last_error()) > 0);
}

static void test_seeds(rkm_model *m)
{
    int32_t ids[20];
    prompt_ids(ids, 20, 9);
    int32_t out[3][32];
    for (int k = 0; k < 3; k++) {
        rkm_session_params sp;
        rkm_session_params_default(&sp);
        sp.n_ctx = 128;
        sp.sampler.temperature = 1.5f;
        sp.sampler.top_k = 0;
        sp.sampler.top_p = 1;
        sp.sampler.seed = k < 2 ? 42 : 43;
        rkm_session *s = rkm_session_new(m, &sp);
        memset(out[k], 0, sizeof out[k]);
        CHECK(rkm_session_eval(s, ids, 20, NULL) == 0);
        CHECK(rkm_session_generate(s, 20, count_tok, out[k]) == 0);
        rkm_stats st;
        rkm_session_stats(s, &st);
        CHECK(st.n_gen == out[k][0] - 1 || st.n_gen == out[k][0]);
        rkm_session_free(s);
    }
    CHECK(!memcmp(out[0], out[1], sizeof out[0]));
    CHECK(memcmp(out[0], out[2], sizeof out[0]) != 0);
    /* set_sampler: same settings and seed on a fresh session, same tokens */
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = 128;
    rkm_session *s = rkm_session_new(m, &sp);
    rkm_sampler_params smp;
    rkm_sampler_params_default(&smp);
    smp.temperature = 1.5f;
    smp.top_k = 0;
    smp.top_p = 1;
    smp.seed = 42;
    CHECK(rkm_session_set_sampler(s, &smp) == 0);
    int32_t again[32] = {0};
    CHECK(rkm_session_eval(s, ids, 20, NULL) == 0);
    CHECK(rkm_session_generate(s, 20, count_tok, again) == 0);
    CHECK(!memcmp(out[0], again, sizeof again));
    smp.top_p = 2;
    CHECK(rkm_session_set_sampler(s, &smp) == RKM_EINVAL);
    rkm_session_free(s);
}

typedef struct {
    rkm_model *m;
    int32_t ids[100];
    float *logits;
} thr_job;

static void *thr_main(void *u)
{
    thr_job *j = u;
    rkm_session *s = new_session(j->m, 256, 16);
    for (int i = 0; i < 3 && s; i++) {
        rkm_session_truncate(s, 0);
        rkm_session_eval(s, j->ids, 100, j->logits);
    }
    rkm_session_free(s);
    return NULL;
}

static void test_threads(rkm_model *m)
{
    int nv = rkm_model_n_vocab(m);
    thr_job a = {m, {0}, malloc(sizeof(float) * nv)}, b = {m, {0}, malloc(sizeof(float) * nv)};
    prompt_ids(a.ids, 100, 21);
    prompt_ids(b.ids, 100, 22);
    float *ra = malloc(sizeof(float) * nv), *rb = malloc(sizeof(float) * nv);
    logits_with_chunk(m, a.ids, 100, 16, ra);
    logits_with_chunk(m, b.ids, 100, 16, rb);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, thr_main, &a);
    pthread_create(&tb, NULL, thr_main, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(max_diff(a.logits, ra, nv) == 0 && max_diff(b.logits, rb, nv) == 0);
    free(a.logits);
    free(b.logits);
    free(ra);
    free(rb);
}

/* A copy of src's manifest with hparams[key] = val, the data files linked. */
static int mutate(const char *src, const char *dst, const char *key, double val)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", src);
    size_t len;
    char *txt = rkm_read_file(path, &len);
    if (!txt) return -1;
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    cJSON *hp = cJSON_GetObjectItem(j, "hparams");
    cJSON *it = cJSON_GetObjectItem(hp, key);
    if (!it) {
        cJSON_Delete(j);
        return -1;
    }
    cJSON_SetNumberValue(it, val);
    char *out = cJSON_Print(j);
    cJSON_Delete(j);
    test_sh("rm -rf '%s' && mkdir -p '%s' && ln -s '%s/resident.bin' '%s/experts' '%s/tokenizer.gguf' '%s/'", dst, dst,
            src, src, src, dst);
    snprintf(path, sizeof path, "%s/manifest.json", dst);
    FILE *f = fopen(path, "w");
    fputs(out, f);
    fclose(f);
    free(out);
    return 0;
}

static void test_bad_models(void)
{
    static const struct {
        const char *key;
        double val;
    } muts[] = {{"n_head", 8},   {"head_dim", 16},  {"n_expert", 16},    {"n_ff_exp", 32}, {"n_vocab", 1024},
                {"n_embd", 256}, {"rope_dim", 64}, {"n_expert_used", 9}, {"n_layer", 5},   {"head_dim_v", 16}};
    char dst[1100];
    snprintf(dst, sizeof dst, "%s/mutated.rkmojo", test_tmpdir());
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        CHECK(mutate(qdir, dst, muts[i].key, muts[i].val) == 0);
        rkm_model *m = rkm_model_open(dst, NULL);
        CHECK_MSG(m == NULL, "a manifest with %s = %g opened", muts[i].key, muts[i].val);
        CHECK(strlen(rkm_last_error()) > 0);
        rkm_model_close(m);
    }
}

/* Rss of this process's mapping of a file whose path ends with `suffix`
 * (/proc/self/smaps), in bytes; -1 when there is none. */
static long long mapping_rss(const char *suffix)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[1024], perm[8];
    long long rss = -1, kb;
    unsigned long lo, hi, off, ino;
    unsigned dmaj, dmin;
    int in = 0, at;
    size_t ls = strlen(suffix);
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\n");
        line[n] = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &lo, &hi, perm, &off, &dmaj, &dmin, &ino, &at) == 7) {
            in = n >= ls && !strcmp(line + n - ls, suffix); /* a mapping's header: the path ends the line */
        } else if (in && sscanf(line, "Rss: %lld kB", &kb) == 1) {
            rss = (rss < 0 ? 0 : rss) + kb * 1024;
        }
    }
    fclose(f);
    return rss;
}

/* Untied token embeddings are only looked up: their rows are read from
 * resident.bin (rkm_model_dir_pread) and never mapped in, so looking up
 * tokens all over a 50k vocabulary leaves the table out of the process's
 * memory, and the memory plan does not count it. Tied ones (Gemma 4: the
 * LM head) stay counted. */
/* The tiny preset with GPT-2's 50k vocabulary, synthesized, converted
 * into TMPDIR/NAME.rkmojo and opened; NULL (checked) on failure. */
static rkm_model *open_gpt2_vocab_model(const char *shared, const char *name)
{
    char gguf[1024], dir[1024];
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", test_tmpdir(), name);
    snprintf(dir, sizeof dir, "%s/%s.rkmojo", test_tmpdir(), name);
    CHECK(test_rkmojo("/dev/null", "synth --preset tiny --set n_layer=2 --vocab-from %s/vocab/ggml-vocab-gpt-2.gguf "
                      "-o %s --quiet && %s convert %s %s --quiet", shared, gguf, test_rkmojo_bin(), gguf, dir) == 0);
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.n_threads = 2;
    rkm_model *m = rkm_model_open(dir, &mp);
    CHECK_MSG(m != NULL, "%s", rkm_last_error());
    return m;
}

static void test_embd_lookup(const char *shared)
{
    rkm_model *m = open_gpt2_vocab_model(shared, "bigv");
    if (!m) return;
    const rkm_tensor_view *te = rkm_model_dir_tensor(m->md, "token_embd.weight");
    uint64_t eb = rkm_model_dir_lookup_embd_bytes(m->md);
    CHECK(te && eb == te->nbytes && eb > 4u << 20 && m->embd_pread);
    rkm_budget b;
    CHECK(rkm_budget_plan(m->md, 0, 256, NULL, &b) == 0);
    CHECK(b.embd_file_bytes == eb && b.resident_bytes == m->md->resident_bytes - eb);
    char desc[512];
    CHECK(strstr(rkm_budget_describe(&b, desc, sizeof desc), "token embeddings") != NULL);
    /* pread gives the file's bytes; past the end is a clear error */
    uint8_t row[256];
    size_t rb = rkm_type_row_bytes(te->type, rkm_model_n_embd(m));
    CHECK(rb <= sizeof row);
    uint8_t want[256];
    char rpath[1100];
    snprintf(rpath, sizeof rpath, "%s/resident.bin", m->md->path);
    FILE *rf = fopen(rpath, "rb"); /* not through the mapping: touching it would map the page in */
    CHECK(rf && fseek(rf, (long)(te->offset + 1000 * rb), SEEK_SET) == 0 && fread(want, 1, rb, rf) == rb);
    if (rf) fclose(rf);
    CHECK(rkm_model_dir_pread(m->md, te->offset + 1000 * rb, row, rb) == 0 && !memcmp(row, want, rb));
    CHECK(rkm_model_dir_pread(m->md, m->md->resident_bytes - 10, row, 20) == RKM_EIO &&
          strstr(rkm_last_error(), "run past"));
    /* every 25th id of the vocabulary: every page of the table has a row */
    int nv = rkm_model_n_vocab(m), n = 0;
    rkm_session *s = new_session(m, 512, 128);
    CHECK(s != NULL);
    int32_t ids[500];
    for (int i = 0; s && i < nv; i += 25) {
        ids[n++] = i;
        if (n == 500 || i + 25 >= nv) {
            CHECK(rkm_session_truncate(s, 0) == 0 && rkm_session_eval(s, ids, n, NULL) == 0);
            n = 0;
        }
    }
    long long rss = mapping_rss("bigv.rkmojo/resident.bin");
    printf("embeddings %llu bytes read per token; resident.bin mapping holds %lld bytes after %d lookups\n",
           (unsigned long long)eb, rss, nv / 25);
    CHECK_MSG(rss >= 0 && rss < (long long)(eb / 4), "resident.bin mapping Rss %lld of a %llu-byte table", rss,
              (unsigned long long)eb);
    rkm_session_free(s);
    rkm_model_close(m);
    /* tied (Gemma 4's LM head is token_embd): resident, counted */
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.n_threads = 2;
    rkm_model *g = rkm_model_open(gdir, &mp);
    CHECK(g && !g->embd_pread && rkm_model_dir_lookup_embd_bytes(g->md) == 0);
    if (g) {
        CHECK(rkm_budget_plan(g->md, 0, 256, NULL, &b) == 0 && b.embd_file_bytes == 0 &&
              b.resident_bytes == g->md->resident_bytes);
        rkm_model_close(g);
    }
}

/* Router margins and forced flips (rkm_session_record_router,
 * _router_margins, _router_flip): the margins recorded are the ones the
 * trace callback sees, non-negative, NaN where nothing was evaluated; a
 * flip changes the logits from its position on and nothing before; the
 * flipped decision keeps its margin; cleared, the logits come back. */
static float *trace_margins; /* n_layer x 64 */
static int trace_pos0, trace_nl;
static void margin_trace(void *u, int il, const char *what, const float *x, int rows, int cols)
{
    if (strcmp(what, "router_margin") || cols != 1) return;
    for (int r = 0; r < rows && trace_pos0 + r < 64; r++) trace_margins[(trace_pos0 + r) * trace_nl + il] = x[r];
}

static void test_router(rkm_model *m, const char *name)
{
    int nl = rkm_model_n_layer(m), nv = rkm_model_n_vocab(m), n = 64;
    int32_t ids[64];
    prompt_ids(ids, n, 5);
    float *mg = malloc(sizeof(float) * (size_t)n * nl), *lg = malloc(sizeof(float) * (size_t)n * nv);
    float *lg2 = malloc(sizeof(float) * (size_t)n * nv), *mg2 = malloc(sizeof(float) * (size_t)n * nl);
    trace_margins = calloc((size_t)n * nl, sizeof(float));
    trace_nl = nl;
    rkm_session *s = new_session(m, 256, 16);
    CHECK(rkm_session_router_margins(s, 0, 1, mg) != 0); /* not recording */
    CHECK(rkm_session_record_router(s, 1) == 0);
    s->trace = margin_trace;
    for (int i = 0; i < n; i += 16) {
        trace_pos0 = i;
        CHECK(rkm_session_eval_all(s, ids + i, 16, lg + (size_t)i * nv) == 0);
    }
    s->trace = NULL;
    CHECK(rkm_session_router_margins(s, 0, n, mg) == 0);
    int moe_layers = 0, bad = 0, best_l = -1;
    float best = -1;
    for (int il = 0; il < nl; il++) moe_layers += s->m->layers[il].el != NULL;
    for (int p = 0; p < n; p++)
        for (int il = 0; il < nl; il++) {
            float v = mg[p * nl + il];
            if (!s->m->layers[il].el) {
                bad += v == v;
                continue;
            }
            bad += !(v >= 0 && v <= 1) || v != trace_margins[p * nl + il];
            if (p == 40 && v > best) best = v, best_l = il;
        }
    CHECK_MSG(moe_layers > 0 && bad == 0, "%s: %d margins not as traced, out of [0, 1] or set for dense layers", name,
              bad);
    CHECK(rkm_session_router_margins(s, n, 1, mg2) == 0 && mg2[best_l] != mg2[best_l]); /* not evaluated: NaN */
    CHECK(rkm_session_router_margins(s, 250, 10, mg2) != 0);                            /* past n_ctx */
    CHECK(rkm_session_router_flip(s, nl, 3) != 0);
    CHECK(rkm_session_router_flip(s, best_l, 300) != 0);
    /* flip the clearest decision at position 40: logits change from 40 on */
    CHECK(rkm_session_truncate(s, 40) == 0 && rkm_session_router_flip(s, best_l, 40) == 0);
    CHECK(rkm_session_eval_all(s, ids + 40, n - 40, lg2 + (size_t)40 * nv) == 0);
    CHECK(rkm_session_router_margins(s, 40, 1, mg2) == 0);
    CHECK_MSG(mg2[best_l] == best, "%s: the flipped decision's margin %g, was %g", name, mg2[best_l], best);
    double d40 = max_diff(lg + (size_t)40 * nv, lg2 + (size_t)40 * nv, nv);
    CHECK_MSG(d40 > 1e-4, "%s: flipping layer %d at 40 (margin %g) moved its logits by %g", name, best_l, best, d40);
    /* cleared: the same logits as before */
    CHECK(rkm_session_router_flip(s, -1, 0) == 0 && rkm_session_truncate(s, 40) == 0);
    CHECK(rkm_session_eval_all(s, ids + 40, n - 40, lg2 + (size_t)40 * nv) == 0);
    CHECK_MSG(max_diff(lg + (size_t)40 * nv, lg2 + (size_t)40 * nv, (n - 40) * nv) == 0, "%s: cleared flip", name);
    CHECK(rkm_session_record_router(s, 0) == 0 && rkm_session_router_margins(s, 0, 1, mg) != 0);
    rkm_session_free(s);
    free(trace_margins);
    free(mg);
    free(mg2);
    free(lg);
    free(lg2);
}

typedef struct {
    rkm_model *m;
    char text[8192];
    size_t n;
} text_acc;

static int add_text(int32_t id, void *user)
{
    text_acc *t = user;
    int k = rkm_token_to_piece(t->m, id, t->text + t->n, (int)(sizeof t->text - t->n - 1));
    if (k > 0) t->n += (size_t)k;
    t->text[t->n] = 0;
    return 0;
}

/* Generates from a fresh session under grammar gbnf: the text, and whether
 * it ended with an end-of-generation token (*ended). */
static const char *constrained(rkm_model *m, const char *gbnf, float temp, uint64_t seed, int n_max, int *ended,
                               text_acc *t)
{
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = 1024;
    sp.sampler.temperature = temp;
    sp.sampler.seed = seed;
    rkm_session *s = rkm_session_new(m, &sp);
    int32_t ids[4] = {464, 1332, 318, 25}; /* "The output is:" */
    t->m = m;
    t->n = 0;
    t->text[0] = 0;
    CHECK(s && rkm_session_eval(s, ids, 4, NULL) == 0 && rkm_session_set_grammar(s, gbnf) == 0);
    int before = s ? rkm_session_n_past(s) : 0;
    CHECK_MSG(rkm_session_generate(s, n_max, add_text, t) == 0, "%s", rkm_last_error());
    /* generate stops at the end-of-generation token without feeding it */
    *ended = s && rkm_session_n_past(s) - before < n_max;
    rkm_session_free(s);
    return t->text;
}

/* Constrained generation with a real 50k BPE vocabulary (byte tokens for
 * pieces of characters included) and random weights: every output is a
 * sentence of the grammar, ended by the model's end-of-generation token;
 * a JSON schema gives schema-valid JSON at any temperature. */
static void test_grammar(const char *shared)
{
    rkm_model *m = open_gpt2_vocab_model(shared, "gram");
    if (!m) return;
    text_acc *t = malloc(sizeof *t);
    int ended;
    /* five digits, then the end, greedy and sampled */
    for (int seed = 0; seed < 4; seed++) {
        const char *out = constrained(m, "root ::= [0-9]{5}", seed ? 1.0f : 0.0f, (uint64_t)seed, 20, &ended, t);
        CHECK_MSG(strlen(out) == 5 && strspn(out, "0123456789") == 5 && ended, "digits: '%s' (ended %d)", out, ended);
    }
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
                         "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},"
                         "\"maxItems\":3}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";
    char *gb = rkm_json_schema_grammar(schema, strlen(schema));
    CHECK(gb != NULL);
    int valid = 0;
    for (int seed = 0; gb && seed < 12; seed++) {
        const char *out = constrained(m, gb, seed % 3 == 0 ? 0.0f : seed % 3 == 1 ? 0.8f : 1.5f, (uint64_t)seed, 400, &ended, t);
        cJSON *j = cJSON_Parse(out);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name"), *age = cJSON_GetObjectItemCaseSensitive(j, "age");
        const cJSON *tags = cJSON_GetObjectItemCaseSensitive(j, "tags");
        int ok = ended && cJSON_IsObject(j) && cJSON_IsString(name) && cJSON_IsNumber(age) &&
                 (!tags || (cJSON_IsArray(tags) && cJSON_GetArraySize(tags) <= 3));
        int n_keys = 0;
        for (const cJSON *k = j ? j->child : NULL; k; k = k->next) n_keys++;
        ok = ok && n_keys == 2 + (tags != NULL);
        for (const cJSON *x = tags ? tags->child : NULL; ok && x; x = x->next)
            ok = cJSON_IsString(x) && (!strcmp(x->valuestring, "a") || !strcmp(x->valuestring, "b"));
        size_t chars = 0;
        for (const char *p = cJSON_IsString(name) ? name->valuestring : ""; *p; p++) chars += ((unsigned char)*p & 0xC0) != 0x80;
        ok = ok && chars <= 12;
        CHECK_MSG(ok, "seed %d: not schema-valid (ended %d): %s", seed, ended, out);
        valid += ok;
        cJSON_Delete(j);
    }
    CHECK(valid == 12);
    free(gb);
    /* a bad grammar is refused, the session keeps working */
    rkm_session *s = new_session(m, 256, 64);
    CHECK(rkm_session_set_grammar(s, "root ::= nothing") == RKM_EINVAL && strstr(rkm_last_error(), "'nothing'"));
    CHECK(rkm_session_set_grammar(s, NULL) == 0);
    rkm_session_free(s);
    CHECK(!rkm_json_schema_grammar("{\"type\":\"string\",\"pattern\":\"a\"}", 34) && strstr(rkm_last_error(), "'pattern'"));
    free(t);
    rkm_model_close(m);
}

/* The small DeepSeek-shaped model (latent attention: the KV cache has no
 * V rows), opened. */
static rkm_model *open_small(const char *shared, const rkm_model_params *mp, const char *which)
{
    char dir[1024];
    CHECK(test_small(shared, which, dir, sizeof dir) == 0);
    rkm_model *m = rkm_model_open(dir, mp);
    CHECK_MSG(m != NULL, "%s", rkm_last_error());
    return m;
}

/* plan_n_seq: the KV of that many sessions in the memory plan; -1: up
 * to 4, fewer when the budget would lose expert slots to them */
static void test_plan_seq(const char *dir)
{
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.n_threads = 2;
    mp.plan_n_ctx = 512;
    char desc[512];
    int n_seq = 0, n_ctx = 0;
    mp.plan_n_seq = -1; /* no budget: 4 */
    rkm_model *m = rkm_model_open(dir, &mp);
    CHECK_MSG(m != NULL, "%s", rkm_last_error());
    if (!m) return;
    rkm_model_plan(m, &n_seq, &n_ctx, desc, sizeof desc);
    CHECK_MSG(n_seq == 4 && n_ctx == 512 && strstr(desc, "(4 sessions x 512 tokens)"), "%d %d %s", n_seq, n_ctx, desc);
    /* a budget that holds one session and top-k slots per layer, exactly */
    rkm_budget b;
    CHECK(rkm_budget_plan(m->md, 0, 512, NULL, &b) == 0);
    uint64_t exact = b.resident_bytes + b.kv_bytes + b.scratch_bytes + b.overhead_bytes + b.slot_bytes * (uint64_t)b.min_slots;
    rkm_model_close(m);
    mp.mem_budget_bytes = exact;
    m = rkm_model_open(dir, &mp);
    CHECK_MSG(m != NULL, "%s", rkm_last_error());
    if (m) {
        rkm_model_plan(m, &n_seq, NULL, desc, sizeof desc);
        CHECK_MSG(n_seq == 1 && strstr(desc, "(1 session x 512 tokens)"), "%d %s", n_seq, desc);
        rkm_model_close(m);
    }
    /* generous: every expert and 4 sessions fit */
    mp.mem_budget_bytes = exact + 4 * b.kv_bytes + b.slot_bytes * (uint64_t)b.max_slots;
    m = rkm_model_open(dir, &mp);
    CHECK_MSG(m != NULL, "%s", rkm_last_error());
    if (m) {
        rkm_model_plan(m, &n_seq, NULL, desc, sizeof desc);
        CHECK_MSG(n_seq == 4, "%d %s", n_seq, desc);
        rkm_model_close(m);
    }
    /* asked for 3 sessions in the exact budget: refused, with the figures */
    mp.mem_budget_bytes = exact;
    mp.plan_n_seq = 3;
    m = rkm_model_open(dir, &mp);
    CHECK(m == NULL && strstr(rkm_last_error(), "too small"));
    rkm_model_close(m);
}

int main(void)
{
    const char *shared = test_require_shared();
    CHECK(convert(shared, "qwen3moe-f32", qdir, sizeof qdir) == 0);
    CHECK(convert(shared, "gemma4-f32", gdir, sizeof gdir) == 0);
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.n_threads = 2;
    rkm_model *q = rkm_model_open(qdir, &mp);
    rkm_model *g = rkm_model_open(gdir, &mp);
    CHECK_MSG(q && g, "%s", rkm_last_error());
    if (!q || !g) return test_done();
    CHECK(!strcmp(rkm_model_arch(q), "qwen3moe"));
    CHECK(rkm_model_n_vocab(q) == 512 && rkm_model_n_embd(q) == 128 && rkm_model_n_ctx_train(q) == 512);
    test_chunks(q, "qwen3moe");
    test_chunks(g, "gemma4");
    test_truncate(q, "qwen3moe", 150);
    test_truncate(g, "gemma4", 40);  /* ring (32 + 16 rows) overwritten: recomputed */
    test_truncate(g, "gemma4", 210); /* within the ring */
    test_copy(q, g, "qwen3moe", 150);
    test_copy(g, q, "gemma4", 200); /* past the window: the copy's smaller ring keeps its end */
    test_save_load(q, g, "qwen3moe");
    test_save_load(g, q, "gemma4");
    rkm_model *d = open_small(shared, &mp, "ds");
    if (d) {
        test_chunks(d, "deepseek2");
        test_truncate(d, "deepseek2", 150);
        test_copy(d, q, "deepseek2", 150); /* latent rows, no V */
        test_save_load(d, q, "deepseek2");
        rkm_model_close(d);
    }
    /* recurrent layers (Gated DeltaNet, short convolutions, Mamba-2): a
     * state carried across chunks, evaluated again from a snapshot on
     * truncation, copied, saved and restored */
    static const char *const hybrid[][2] = {{"q35", "qwen35moe"}, {"lfm2", "lfm2moe"}, {"granite", "granitehybrid"}};
    for (size_t i = 0; i < RKM_ARRAY_LEN(hybrid); i++) {
        rkm_model *h = open_small(shared, &mp, hybrid[i][0]);
        if (!h) continue;
        const char *name = hybrid[i][1];
        CHECK(!strcmp(rkm_model_arch(h), name));
        test_chunks(h, name);
        test_truncate(h, name, 150);
        test_copy(h, q, name, 150);
        test_save_load(h, q, name);
        test_snapshots(h, name);
        rkm_model_close(h);
    }
    test_errors(q);
    test_router(q, "qwen3moe");
    test_router(g, "gemma4");
    test_seeds(q);
    test_threads(q);
    test_bad_models();
    test_plan_seq(qdir);
    /* an expert cache with fewer slots than experts gives the same logits */
    rkm_model_params sp = mp;
    sp.expert_cache_slots = 2;
    sp.cache_scope = 2; /* one pool (the default only pools from 4x top-k slots) */
    rkm_model *q2 = rkm_model_open(qdir, &sp);
    CHECK_MSG(q2 != NULL, "%s", rkm_last_error());
    if (q2) {
        int nv = rkm_model_n_vocab(q);
        int32_t ids[130];
        prompt_ids(ids, 130, 77);
        float *a = malloc(sizeof(float) * nv), *b = malloc(sizeof(float) * nv);
        logits_with_chunk(q, ids, 130, 128, a);
        logits_with_chunk(q2, ids, 130, 128, b);
        CHECK_MSG(max_diff(a, b, nv) == 0, "2 slots: %g", max_diff(a, b, nv));
        /* decoding with prefetch hints: the same greedy tokens */
        int32_t g1[32] = {0}, g2[32] = {0};
        rkm_session *s = new_session(q2, 256, 128), *s1 = new_session(q, 256, 128);
        CHECK(rkm_session_eval(s, ids, 130, NULL) == 0 && rkm_session_eval(s1, ids, 130, NULL) == 0);
        CHECK(rkm_session_generate(s, 20, count_tok, g2) == 0 && rkm_session_generate(s1, 20, count_tok, g1) == 0);
        CHECK(g1[0] > 0 && !memcmp(g1, g2, sizeof g1));
        rkm_stats st;
        rkm_session_stats(s, &st);
        CHECK(st.expert_misses > 0);
        rkm_session_free(s);
        rkm_session_free(s1);
        /* per-layer slots: the same logits */
        rkm_model_params lp = sp;
        lp.cache_scope = 1;
        rkm_model *q3 = rkm_model_open(qdir, &lp);
        CHECK_MSG(q3 != NULL, "%s", rkm_last_error());
        if (q3) {
            logits_with_chunk(q3, ids, 130, 128, b);
            CHECK_MSG(max_diff(a, b, nv) == 0, "2 slots per layer: %g", max_diff(a, b, nv));
            rkm_model_close(q3);
        }
        free(a);
        free(b);
        rkm_model_close(q2);
    }
    rkm_model_close(q);
    rkm_model_close(g);
    test_embd_lookup(shared);
    test_grammar(shared);
    return test_done();
}
