/*
 * test-routing.c - the router's top-k as each gating weighs it
 * (rkm_moe_route_row), against a plain reference written here from the
 * definitions (llama.cpp's build_moe_ffn): softmax, softmax of the top-k
 * logits, and sigmoid scores chosen with a selection bias, with expert
 * groups (the n_group_used groups whose two best keys sum highest),
 * renormalisation and the routed scale; the margin; bad group counts
 * refused by the hyper-parameter check.
 */
#include <math.h>

#include "common/test.h"
#include "format/hparams.h"
#include "runtime/model.h"

#define NE 16

/* The reference: keys, groups, top-k by sorting (ties: lower id). */
static void ref_route(const rkm_hparams *hp, const float *logit, const float *bias, int *sel, float *w)
{
    int ne = hp->n_expert, k = hp->n_expert_used;
    double p[NE], key[NE];
    if (hp->expert_gating == RKM_GATING_SIGMOID) {
        for (int e = 0; e < ne; e++) p[e] = 1 / (1 + exp(-(double)logit[e]));
        for (int e = 0; e < ne; e++) key[e] = p[e] + (bias ? bias[e] : 0);
    } else {
        double mx = -INFINITY, sum = 0;
        for (int e = 0; e < ne; e++) mx = fmax(mx, logit[e]);
        for (int e = 0; e < ne; e++) sum += p[e] = exp(logit[e] - mx);
        for (int e = 0; e < ne; e++) p[e] /= sum;
        for (int e = 0; e < ne; e++) key[e] = hp->expert_gating == RKM_GATING_SOFTMAX_WEIGHT ? logit[e] : p[e];
    }
    int allowed[NE];
    for (int e = 0; e < ne; e++) allowed[e] = 1;
    if (hp->n_expert_group > 1) {
        int per = ne / hp->n_expert_group, rank[NE];
        double gs[NE];
        for (int g = 0; g < hp->n_expert_group; g++) {
            double v[NE] = {0};
            for (int i = 0; i < per; i++) v[i] = key[g * per + i];
            for (int a = 0; a < per; a++) /* descending */
                for (int b = a + 1; b < per; b++)
                    if (v[b] > v[a]) { double t = v[a]; v[a] = v[b]; v[b] = t; }
            gs[g] = v[0] + (per > 1 ? v[1] : 0);
            rank[g] = 0;
        }
        for (int g = 0; g < hp->n_expert_group; g++)
            for (int h = 0; h < hp->n_expert_group; h++)
                if (gs[h] > gs[g] || (gs[h] == gs[g] && h < g)) rank[g]++;
        for (int e = 0; e < ne; e++) allowed[e] = rank[e / per] < hp->n_group_used;
    }
    int used[NE] = {0};
    for (int j = 0; j < k; j++) {
        int b = -1;
        for (int e = 0; e < ne; e++)
            if (allowed[e] && !used[e] && (b < 0 || key[e] > key[b])) b = e;
        used[b] = 1;
        sel[j] = b;
    }
    double ww[NE], sum = 0;
    if (hp->expert_gating == RKM_GATING_SOFTMAX_WEIGHT) {
        double mx = -INFINITY;
        for (int j = 0; j < k; j++) mx = fmax(mx, logit[sel[j]]);
        for (int j = 0; j < k; j++) sum += ww[j] = exp(logit[sel[j]] - mx);
        for (int j = 0; j < k; j++) ww[j] /= sum;
    } else {
        for (int j = 0; j < k; j++) ww[j] = p[sel[j]];
    }
    if (hp->expert_norm_topk) {
        sum = 0;
        for (int j = 0; j < k; j++) sum += ww[j];
        for (int j = 0; j < k; j++) ww[j] /= fmax(sum, 6.103515625e-5);
    }
    for (int j = 0; j < k; j++) w[j] = (float)(ww[j] * hp->expert_weights_scale);
}

/* rkm_moe_route_row on a copy of logit, with bias as the layer's
 * selection bias; returns the margin. */
static float route(const rkm_hparams *hp, const float *logit, const float *bias, int *sel, float *w)
{
    rkm_layer L;
    memset(&L, 0, sizeof L);
    L.exp_probs_b = bias;
    float lg[NE];
    memcpy(lg, logit, sizeof lg);
    return rkm_moe_route_row(hp, &L, lg, sel, w, 0);
}

static int check_case(const char *what, const rkm_hparams *hp, const float *logit, const float *bias)
{
    float w[NE], rw[NE];
    int sel[NE + 1], rsel[NE];
    route(hp, logit, bias, sel, w);
    ref_route(hp, logit, bias, rsel, rw);
    int ok = 1;
    for (int j = 0; j < hp->n_expert_used; j++) ok &= sel[j] == rsel[j] && fabsf(w[j] - rw[j]) <= 1e-6f * (1 + fabsf(rw[j]));
    CHECK_MSG(ok, "%s: expert %d weight %g, reference %d %g", what, sel[0], (double)w[0], rsel[0], (double)rw[0]);
    return ok;
}

int main(void)
{
    uint64_t seed = 7;
    rkm_hparams hp;
    rkm_hparams_init(&hp, RKM_ARCH_QWEN3MOE);
    hp.n_expert = NE;
    int cases = 0;
    for (int t = 0; t < 400; t++) {
        float logit[NE], bias[NE];
        for (int e = 0; e < NE; e++) {
            logit[e] = ((float)(test_rand(&seed) % 2001) - 1000) / 250.0f;
            bias[e] = ((float)(test_rand(&seed) % 2001) - 1000) / 2000.0f;
        }
        hp.expert_gating = t % 3 == 0 ? RKM_GATING_SOFTMAX : t % 3 == 1 ? RKM_GATING_SOFTMAX_WEIGHT : RKM_GATING_SIGMOID;
        hp.expert_norm_topk = (t / 3) % 2;
        hp.expert_weights_scale = (t / 6) % 2 ? 2.5f : 1.0f;
        static const int groups[][2] = {{0, 0}, {4, 2}, {8, 3}, {2, 1}};
        hp.n_expert_group = groups[(t / 12) % 4][0];
        hp.n_group_used = groups[(t / 12) % 4][1];
        hp.n_expert_used = 1 + (int)(test_rand(&seed) % 4);
        if (hp.n_expert_group > 1 && hp.n_expert_used > hp.n_group_used * (NE / hp.n_expert_group))
            hp.n_expert_used = hp.n_group_used * (NE / hp.n_expert_group);
        char what[96];
        snprintf(what, sizeof what, "case %d (gating %d, groups %d/%d, k %d)", t, hp.expert_gating, hp.n_group_used,
                 hp.n_expert_group, hp.n_expert_used);
        cases += check_case(what, &hp, logit, hp.expert_gating == RKM_GATING_SIGMOID ? bias : NULL);
    }
    printf("%d routing cases agree with the reference\n", cases);

    /* the bias chooses, the unbiased score weighs: expert 3 has the best
     * score, expert 5 wins by its bias */
    {
        float logit[NE] = {0}, bias[NE] = {0};
        logit[3] = 2.0f;
        logit[5] = 1.0f;
        bias[5] = 0.5f;
        hp.expert_gating = RKM_GATING_SIGMOID;
        hp.n_expert_group = hp.n_group_used = 0;
        hp.n_expert_used = 1;
        hp.expert_norm_topk = 0;
        hp.expert_weights_scale = 2.0f;
        int sel[2];
        float w[2];
        float margin = route(&hp, logit, bias, sel, w);
        float s5 = 1 / (1 + expf(-1.0f)), s3 = 1 / (1 + expf(-2.0f));
        CHECK_EQ_INT(sel[0], 5);
        CHECK_NEAR(w[0], 2.0f * s5, 1e-6);
        CHECK_NEAR(margin, (s5 + 0.5f) - s3, 1e-6);
    }
    /* groups: expert 0 has the single best key, but its group's two best
     * sum lower than two others' */
    {
        float logit[NE], bias[NE] = {0};
        for (int e = 0; e < NE; e++) logit[e] = -4.0f;
        logit[0] = 4.0f;  /* group 0: 4, -4 */
        logit[2] = logit[3] = 2.0f; /* group 1 */
        logit[4] = logit[5] = 1.5f; /* group 2 */
        hp.n_expert_group = 8;
        hp.n_group_used = 2;
        hp.n_expert_used = 2;
        hp.expert_weights_scale = 1.0f;
        int sel[3];
        float w[3];
        route(&hp, logit, bias, sel, w);
        CHECK_MSG(sel[0] == 2 && sel[1] == 3, "groups: chose %d %d", sel[0], sel[1]);
    }
    /* bad group counts are refused */
    rkm_hparams_init(&hp, RKM_ARCH_QWEN3MOE);
    hp.n_layer = 2;
    hp.n_embd = 64;
    hp.n_head = 4;
    hp.head_dim = hp.head_dim_v = hp.head_dim_swa = hp.rope_dim = 16;
    for (int i = 0; i < 2; i++) hp.n_head_kv[i] = 4;
    hp.n_vocab = 100;
    hp.n_ctx_train = 128;
    hp.n_expert = 12;
    hp.n_expert_used = 2;
    hp.n_ff_exp = 32;
    CHECK_MSG(rkm_hparams_validate(&hp) == 0, "%s", rkm_last_error());
    hp.n_expert_group = 5;
    hp.n_group_used = 1;
    CHECK(rkm_hparams_validate(&hp) != 0 && strstr(rkm_last_error(), "do not divide"));
    hp.n_expert_group = 4;
    hp.n_group_used = 5;
    CHECK(rkm_hparams_validate(&hp) != 0 && strstr(rkm_last_error(), "groups used"));
    hp.n_group_used = 1;
    hp.n_expert_used = 4;
    CHECK(rkm_hparams_validate(&hp) != 0 && strstr(rkm_last_error(), "exceeds"));
    hp.n_expert_used = 2;
    hp.expert_weights_scale = NAN;
    CHECK(rkm_hparams_validate(&hp) != 0 && strstr(rkm_last_error(), "scale"));
    return test_done();
}
