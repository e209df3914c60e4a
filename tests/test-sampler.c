/*
 * test-sampler.c - the sampler's distributions, checked statistically with
 * fixed seeds against distributions computed here independently: greedy,
 * temperature, top-k, top-p, min-p, repetition / presence / frequency
 * penalties; same seed, same draws.
 */
#include <math.h>

#include "common/test.h"
#include "runtime/sampler.h"

#define NV 16
#define DRAWS 40000

static const float base_logits[NV] = {2.0f, 1.5f, 1.4f, 0.3f, -0.2f, 0.9f, -1.0f, 0.0f,
                                      1.0f, -2.0f, 0.5f, 0.1f, -0.5f, 1.2f, -3.0f, 0.7f};

/* Expected distribution: penalised logits l, keep mask, temperature t. */
static void expect(const float *l, const int *keep, double t, double *p)
{
    double mx = -1e300, s = 0;
    for (int i = 0; i < NV; i++)
        if (keep[i] && l[i] > mx) mx = l[i];
    for (int i = 0; i < NV; i++) s += p[i] = keep[i] ? exp((l[i] - mx) / t) : 0;
    for (int i = 0; i < NV; i++) p[i] /= s;
}

/* Indices sorted by descending logit (stable by id). */
static void order(const float *l, int *idx)
{
    for (int i = 0; i < NV; i++) idx[i] = i;
    for (int i = 1; i < NV; i++)
        for (int j = i; j > 0 && (l[idx[j]] > l[idx[j - 1]]); j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
}

/* Draws DRAWS samples, compares frequencies with p: every id within 5
 * standard deviations, excluded ids never drawn; also compares
 * rkm_sampler_probs with p. */
static void check_dist(const char *what, const rkm_sampler_params *sp, const float *l, const int32_t *hist, int nh,
                       const double *p)
{
    rkm_sampler *s = rkm_sampler_new(sp, NV);
    CHECK(s != NULL);
    if (!s) return;
    int cnt[NV] = {0}, bad = 0;
    for (int i = 0; i < DRAWS; i++) {
        int32_t id = rkm_sampler_sample(s, l, hist, nh);
        if (id >= 0 && id < NV) cnt[id]++;
        else bad++;
    }
    CHECK_MSG(bad == 0, "%s: %d ids out of range", what, bad);
    float probs[NV];
    rkm_sampler_probs(s, l, hist, nh, probs);
    double chi = 0;
    for (int i = 0; i < NV; i++) {
        double f = (double)cnt[i] / DRAWS, sd = sqrt(p[i] * (1 - p[i]) / DRAWS);
        if (p[i] == 0) CHECK_MSG(cnt[i] == 0, "%s: id %d excluded but drawn %d times", what, i, cnt[i]);
        else CHECK_MSG(fabs(f - p[i]) <= 5 * sd + 1e-9, "%s: id %d freq %.4f expected %.4f", what, i, f, p[i]);
        CHECK_MSG(fabs(probs[i] - p[i]) < 1e-5, "%s: probs[%d] %.6f expected %.6f", what, i, probs[i], p[i]);
        if (p[i] > 0) chi += (cnt[i] - DRAWS * p[i]) * (cnt[i] - DRAWS * p[i]) / (DRAWS * p[i]);
    }
    printf("%-22s chi2 %.1f\n", what, chi);
    rkm_sampler_free(s);
}

static void base_params(rkm_sampler_params *sp)
{
    rkm_sampler_params_default(sp);
    sp->temperature = 1.0f;
    sp->top_k = 0;
    sp->top_p = 1.0f;
    sp->min_p = 0.0f;
    sp->repeat_penalty = 1.0f;
    sp->seed = 1234;
}

/* The one set of defaults (docs/SERVER.md), and the per-model entry point
 * that starts from it. */
static void test_defaults(void)
{
    rkm_sampler_params d, m;
    rkm_sampler_params_default(&d);
    CHECK_NEAR(d.temperature, 0.8, 1e-6);
    CHECK_EQ_INT(d.top_k, 40);
    CHECK_NEAR(d.top_p, 0.95, 1e-6);
    CHECK_NEAR(d.min_p, 0.05, 1e-6);
    CHECK_NEAR(d.repeat_penalty, 1.0, 1e-9);
    CHECK_EQ_INT(d.repeat_last_n, 64);
    CHECK_NEAR(d.presence_penalty, 0, 1e-9);
    CHECK_NEAR(d.frequency_penalty, 0, 1e-9);
    rkm_sampler_params_for_model(NULL, &m);
    CHECK(!memcmp(&d, &m, sizeof d));
}

int main(void)
{
    test_defaults();
    rkm_sampler_params sp;
    double p[NV];
    int keep[NV], idx[NV];
    float l[NV];
    memcpy(l, base_logits, sizeof l);
    order(l, idx);

    /* greedy: the argmax, lowest id on ties */
    base_params(&sp);
    sp.temperature = 0;
    rkm_sampler *g = rkm_sampler_new(&sp, NV);
    CHECK(rkm_sampler_sample(g, l, NULL, 0) == 0);
    float tie[NV] = {0};
    tie[5] = tie[9] = 3.0f;
    CHECK(rkm_sampler_sample(g, tie, NULL, 0) == 5);
    rkm_sampler_free(g);

    /* temperature */
    for (int i = 0; i < NV; i++) keep[i] = 1;
    base_params(&sp);
    expect(l, keep, 1.0, p);
    check_dist("temperature 1", &sp, l, NULL, 0, p);
    sp.temperature = 0.5f;
    expect(l, keep, 0.5, p);
    check_dist("temperature 0.5", &sp, l, NULL, 0, p);
    sp.temperature = 2.0f;
    expect(l, keep, 2.0, p);
    check_dist("temperature 2", &sp, l, NULL, 0, p);

    /* top-k 3 at temperature 0.7 */
    base_params(&sp);
    sp.top_k = 3;
    sp.temperature = 0.7f;
    for (int i = 0; i < NV; i++) keep[i] = 0;
    for (int i = 0; i < 3; i++) keep[idx[i]] = 1;
    expect(l, keep, 0.7, p);
    check_dist("top-k 3", &sp, l, NULL, 0, p);

    /* top-p 0.6: smallest prefix (by probability at T=1) reaching 0.6 */
    base_params(&sp);
    sp.top_p = 0.6f;
    for (int i = 0; i < NV; i++) keep[i] = 1;
    double p1[NV];
    expect(l, keep, 1.0, p1);
    double cum = 0;
    for (int i = 0; i < NV; i++) keep[i] = 0;
    for (int i = 0; i < NV && cum < 0.6; i++) {
        keep[idx[i]] = 1;
        cum += p1[idx[i]];
    }
    expect(l, keep, 1.0, p);
    check_dist("top-p 0.6", &sp, l, NULL, 0, p);

    /* min-p 0.3: p_i >= 0.3 p_max */
    base_params(&sp);
    sp.min_p = 0.3f;
    for (int i = 0; i < NV; i++) keep[i] = p1[i] >= 0.3 * p1[idx[0]];
    expect(l, keep, 1.0, p);
    check_dist("min-p 0.3", &sp, l, NULL, 0, p);

    /* repeat penalty 1.5 over the last 4 of the history */
    int32_t hist[] = {3, 0, 0, 1, 6, 13};
    base_params(&sp);
    sp.repeat_penalty = 1.5f;
    sp.repeat_last_n = 4;
    float lp[NV];
    memcpy(lp, l, sizeof lp);
    int pen[] = {0, 1, 6, 13}; /* ids in the last 4 */
    for (int i = 0; i < 4; i++) lp[pen[i]] = lp[pen[i]] > 0 ? lp[pen[i]] / 1.5f : lp[pen[i]] * 1.5f;
    for (int i = 0; i < NV; i++) keep[i] = 1;
    expect(lp, keep, 1.0, p);
    check_dist("repeat penalty 1.5", &sp, l, hist, 6, p);

    /* presence 0.5 + frequency 0.25 over the whole history */
    base_params(&sp);
    sp.presence_penalty = 0.5f;
    sp.frequency_penalty = 0.25f;
    sp.repeat_last_n = -1;
    memcpy(lp, l, sizeof lp);
    int c[NV] = {0};
    for (int i = 0; i < 6; i++) c[hist[i]]++;
    for (int i = 0; i < NV; i++)
        if (c[i]) lp[i] -= 0.25f * c[i] + 0.5f;
    expect(lp, keep, 1.0, p);
    check_dist("presence + frequency", &sp, l, hist, 6, p);

    /* greedy after penalties: the argmax of the penalised logits, computed
     * without sorting; the counts are reset after each call */
    {
        base_params(&sp);
        sp.temperature = 0;
        sp.repeat_penalty = 1.5f;
        sp.repeat_last_n = 4;
        rkm_sampler *gp = rkm_sampler_new(&sp, NV);
        CHECK(rkm_sampler_sample(gp, l, NULL, 0) == 0); /* no history: no penalty */
        CHECK(rkm_sampler_sample(gp, l, hist, 6) == 2); /* 0 and 1 penalised below 1.4 */
        CHECK(rkm_sampler_sample(gp, l, hist, 6) == 2);
        float probs[NV];
        rkm_sampler_probs(gp, l, hist, 6, probs);
        for (int i = 0; i < NV; i++) CHECK(probs[i] == (i == 2 ? 1.0f : 0.0f));
        rkm_sampler_free(gp);

        base_params(&sp);
        sp.temperature = 0;
        sp.frequency_penalty = 0.06f;
        sp.repeat_last_n = -1;
        gp = rkm_sampler_new(&sp, NV);
        float two[NV];
        for (int i = 0; i < NV; i++) two[i] = -5.0f;
        two[0] = 1.0f;
        two[1] = 0.9f;
        int32_t h0[] = {0};
        /* 0.94 beats 0.9 each time; a count left over would make it 0.88 */
        CHECK(rkm_sampler_sample(gp, two, h0, 1) == 0);
        CHECK(rkm_sampler_sample(gp, two, h0, 1) == 0);
        int32_t h00[] = {0, 0, 0}; /* three times: 0.82 < 0.9 */
        CHECK(rkm_sampler_sample(gp, two, h00, 3) == 1);
        /* NaN never wins; all NaN gives 0 */
        float nan[NV];
        for (int i = 0; i < NV; i++) nan[i] = NAN;
        CHECK(rkm_sampler_sample(gp, nan, NULL, 0) == 0);
        nan[7] = -1.0f;
        CHECK(rkm_sampler_sample(gp, nan, NULL, 0) == 7);
        rkm_sampler_free(gp);
    }

    /* seeds: same seed same draws, another seed other draws */
    base_params(&sp);
    rkm_sampler *a = rkm_sampler_new(&sp, NV), *b = rkm_sampler_new(&sp, NV);
    sp.seed = 99;
    rkm_sampler *d = rkm_sampler_new(&sp, NV);
    int same_ab = 1, same_ad = 1;
    for (int i = 0; i < 200; i++) {
        int32_t x = rkm_sampler_sample(a, l, NULL, 0), y = rkm_sampler_sample(b, l, NULL, 0),
                z = rkm_sampler_sample(d, l, NULL, 0);
        same_ab &= x == y;
        same_ad &= x == z;
    }
    CHECK(same_ab);
    CHECK(!same_ad);
    /* reseeding restarts the sequence */
    rkm_sampler_seed(a, 1234);
    rkm_sampler_seed(b, 1234);
    int same = 1;
    for (int i = 0; i < 50; i++) same &= rkm_sampler_sample(a, l, NULL, 0) == rkm_sampler_sample(b, l, NULL, 0);
    CHECK(same);
    rkm_sampler_free(a);
    rkm_sampler_free(b);
    rkm_sampler_free(d);

    /* bad input */
    CHECK(rkm_sampler_new(&sp, 0) == NULL);
    return test_done();
}
