/*
 * test-batch.c - rkm_batch_eval: sequences advanced together give each the
 * logits (bit for bit) and greedy tokens it gets alone. Three prompts of
 * different lengths prefill in one pass; then they decode together, each
 * leaving at its own limit (one after 6 tokens, as a cancelled request
 * would), and a fourth
 * joins mid-way with its whole prompt in the same pass as the others'
 * decoded tokens. On the qwen3moe and gemma4 fixtures (sliding-window
 * ring) and a small DeepSeek-V3-shaped model (latent attention). Also the
 * argument checks, and the passes' expert-cache counters shared out among
 * the sessions' stats.
 */
#include <math.h>
#include <string.h>

#include "common/test.h"

#include "rkmojo.h"

#define N_SEQ 4
#define MAX_GEN 24

static const int plen[N_SEQ] = {5, 23, 70, 31};  /* prompt lengths */
static const int ngen[N_SEQ] = {12, 6, 24, 10};  /* tokens each generates */
static const int join_at = 5;                     /* the step sequence 3 joins at */

static void prompt(int32_t *ids, int n, uint32_t seed, int n_vocab)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % (uint32_t)(n_vocab - 4));
    }
}

static rkm_session *new_session(rkm_model *m)
{
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = 256;
    sp.n_chunk = 128;
    sp.sampler.temperature = 0;
    return rkm_session_new(m, &sp);
}

/* Alone: the prompt, then greedy tokens, keeping every step's logits. */
static void run_alone(rkm_model *m, const int32_t *p, int np, int ng, int32_t *out, float *lg)
{
    int nv = rkm_model_n_vocab(m);
    rkm_session *s = new_session(m);
    CHECK(s && rkm_session_eval(s, p, np, lg) == 0);
    for (int g = 0; g < ng; g++) {
        CHECK(rkm_session_sample(s, &out[g]) == 0);
        CHECK(rkm_session_eval(s, &out[g], 1, lg + (size_t)(g + 1) * nv) == 0);
    }
    rkm_session_free(s);
}

static void check_model(rkm_model *m, const char *name)
{
    int nv = rkm_model_n_vocab(m);
    int32_t p[N_SEQ][128], alone[N_SEQ][MAX_GEN], got[N_SEQ][MAX_GEN];
    float *la[N_SEQ], *lb = malloc(sizeof(float) * (size_t)nv);
    for (int i = 0; i < N_SEQ; i++) {
        prompt(p[i], plen[i], 11u + 7u * (uint32_t)i, nv);
        la[i] = malloc(sizeof(float) * (size_t)nv * (MAX_GEN + 1));
        run_alone(m, p[i], plen[i], ngen[i], alone[i], la[i]);
    }
    rkm_batch *b = rkm_batch_new(m, 128, 256);
    CHECK_MSG(b != NULL, "%s", rkm_last_error());
    rkm_session *s[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) s[i] = new_session(m);
    int done[N_SEQ] = {0}, joined[N_SEQ] = {1, 1, 1, 0}, bad_logits = 0, steps = 0;
    int32_t tok[N_SEQ];
    /* the first pass: three prompts */
    rkm_session *ss[N_SEQ];
    const int32_t *ids[N_SEQ];
    int n[N_SEQ], k = 0;
    for (int i = 0; i < 3; i++) ss[k] = s[i], ids[k] = p[i], n[k++] = plen[i];
    CHECK_MSG(rkm_batch_eval(b, ss, ids, n, k) == 0, "%s", rkm_last_error());
    for (int step = 0;; step++) {
        /* each joined, unfinished sequence samples from its logits and
         * checks them against its run alone */
        k = 0;
        for (int i = 0; i < N_SEQ; i++) {
            if (!joined[i] || done[i] >= ngen[i]) continue;
            CHECK(rkm_session_eval(s[i], NULL, 0, lb) == 0); /* its logits */
            bad_logits += memcmp(lb, la[i] + (size_t)done[i] * nv, sizeof(float) * (size_t)nv) != 0;
            CHECK(rkm_session_sample(s[i], &tok[i]) == 0);
            got[i][done[i]++] = tok[i];
            if (done[i] < ngen[i]) ss[k] = s[i], ids[k] = &tok[i], n[k++] = 1;
        }
        if (step == join_at) { /* a new request: its whole prompt in this pass */
            joined[3] = 1;
            ss[k] = s[3], ids[k] = p[3], n[k++] = plen[3];
        }
        if (!k) break;
        CHECK_MSG(rkm_batch_eval(b, ss, ids, n, k) == 0, "%s", rkm_last_error());
        steps++;
    }
    int bad_ids = 0;
    for (int i = 0; i < N_SEQ; i++) {
        CHECK_EQ_INT(done[i], ngen[i]);
        bad_ids += memcmp(got[i], alone[i], sizeof(int32_t) * (size_t)ngen[i]) != 0;
        CHECK_EQ_INT(rkm_session_n_past(s[i]), plen[i] + ngen[i] - 1); /* the last token is not fed back */
    }
    CHECK_MSG(bad_ids == 0, "%s: %d sequences' greedy tokens differ from their runs alone", name, bad_ids);
    CHECK_MSG(bad_logits == 0, "%s: %d steps' logits differ from the runs alone", name, bad_logits);
    /* the passes' expert lookups are shared out among the sessions by rows:
     * each has its part, the longest prompt the largest */
    uint64_t look[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) {
        rkm_stats st;
        rkm_session_stats(s[i], &st);
        look[i] = st.expert_hits + st.expert_misses;
        CHECK_MSG(look[i] > 0, "%s: sequence %d has no expert lookups in its stats", name, i);
    }
    CHECK_MSG(look[2] > look[1] && look[2] > look[0], "%s: lookups %llu %llu %llu not by rows", name,
              (unsigned long long)look[0], (unsigned long long)look[1], (unsigned long long)look[2]);
    printf("%s: %d passes, %d sequences, tokens and logits as alone\n", name, steps + 1, N_SEQ);
    for (int i = 0; i < N_SEQ; i++) {
        rkm_session_free(s[i]);
        free(la[i]);
    }
    free(lb);
    rkm_batch_free(b);
}

static void check_errors(rkm_model *m, rkm_model *other)
{
    rkm_batch *b = rkm_batch_new(m, 8, 64);
    CHECK(b != NULL);
    rkm_session *a = new_session(m), *o = new_session(other);
    int32_t t[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    const int32_t *ids[2] = {t, t};
    int n[2] = {4, 4};
    rkm_session *two[2] = {a, a};
    CHECK(rkm_batch_eval(b, two, ids, n, 2) == RKM_EINVAL); /* the same session twice */
    two[1] = o;
    CHECK(rkm_batch_eval(b, two, ids, n, 2) == RKM_EINVAL); /* another model's */
    n[0] = 9;
    CHECK(rkm_batch_eval(b, two, ids, n, 1) == RKM_EINVAL); /* over max_rows */
    n[0] = 0;
    CHECK(rkm_batch_eval(b, two, ids, n, 1) == RKM_EINVAL);
    int32_t badtok = 1 << 30;
    const int32_t *bi[1] = {&badtok};
    n[0] = 1;
    CHECK(rkm_batch_eval(b, two, bi, n, 1) == RKM_EINVAL);
    CHECK(rkm_session_n_past(a) == 0);
    CHECK(rkm_batch_new(m, 0, 64) == NULL && rkm_batch_new(NULL, 4, 64) == NULL);
    rkm_session_free(a);
    rkm_session_free(o);
    rkm_batch_free(b);
}

/* A sliding-window ring holds the window and one chunk of its session's
 * rows: more rows of that session in one pass are refused, not corrupted. */
static void check_ring(rkm_model *m)
{
    rkm_batch *b = rkm_batch_new(m, 64, 256);
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = 256;
    sp.n_chunk = 16;
    rkm_session *s = rkm_session_new(m, &sp);
    CHECK(b && s);
    int32_t t[40];
    for (int i = 0; i < 40; i++) t[i] = 10 + i;
    const int32_t *ids[1] = {t};
    int n[1] = {17};
    CHECK(rkm_batch_eval(b, &s, ids, n, 1) == RKM_EINVAL);
    CHECK(strstr(rkm_last_error(), "sliding-window") != NULL);
    CHECK(rkm_session_n_past(s) == 0);
    n[0] = 16;
    CHECK(rkm_batch_eval(b, &s, ids, n, 1) == 0);
    rkm_session_free(s);
    rkm_batch_free(b);
}

int main(void)
{
    const char *shared = test_require_shared();
    const char *names[] = {"qwen3moe-q8_0", "gemma4-q8_0"};
    rkm_model *ms[2] = {NULL, NULL};
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.n_threads = 2;
    for (int i = 0; i < 2; i++) {
        char gguf[1024], dir[1024];
        snprintf(gguf, sizeof gguf, "%s/fixtures/%s.gguf", shared, names[i]);
        snprintf(dir, sizeof dir, "%s/%s.rkmojo", test_tmpdir(), names[i]);
        CHECK(test_rkmojo("/dev/null", "convert %s %s --quant keep --quiet", gguf, dir) == 0);
        ms[i] = rkm_model_open(dir, &mp);
        CHECK_MSG(ms[i] != NULL, "%s", rkm_last_error());
    }
    if (ms[0] && ms[1]) {
        check_model(ms[0], names[0]);
        check_model(ms[1], names[1]);
        check_errors(ms[0], ms[1]);
        check_ring(ms[1]);
    }
    char dir[1024];
    CHECK(test_small(shared, "ds", dir, sizeof dir) == 0);
    rkm_model *d = rkm_model_open(dir, &mp);
    CHECK_MSG(d != NULL, "%s", rkm_last_error());
    if (d) check_model(d, "deepseek-v3 (latent attention)");
    rkm_model_close(d);
    for (int i = 0; i < 2; i++) rkm_model_close(ms[i]);
    return test_done();
}
