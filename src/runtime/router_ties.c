/*
 * router_ties.c - the router-tie analysis of a token sequence: which
 * positions a close routing decision can change. The sequence is
 * evaluated once with the router margins recorded; then every decision
 * whose margin is under a threshold is forced, one at a time, to the
 * runner-up expert (rkm_session_router_flip) and the sequence evaluated
 * again from that position. A position whose top-1 then changes, or whose
 * top two logits come within tie_gap, is a router tie: rounding noise
 * (another engine's, another kernel set's) may decide it either way, as
 * it may an output near-tie. Comparisons with a reference set such
 * positions aside.
 *
 * Threads: the caller's, on its session (which it leaves truncated to
 * some prefix of the ids, no flip set, not recording). Memory: the
 * result's arrays belong to it; rkm_router_ties_free frees them.
 */
#include <math.h>
#include <stdlib.h>

#include "runtime/model.h"

/* Top-1 of a row of logits and its logit gap to the runner-up. */
static int top1(const float *l, int nv, float *gap)
{
    int best = 0;
    float mx = l[0], second = -INFINITY;
    for (int j = 1; j < nv; j++) {
        if (l[j] > mx) {
            second = mx;
            mx = l[j];
            best = j;
        } else if (l[j] > second) {
            second = l[j];
        }
    }
    *gap = mx - second;
    return best;
}

void rkm_router_ties_free(rkm_router_ties *t)
{
    if (!t) return;
    free(t->top1);
    free(t->gap);
    free(t->min_margin);
    free(t->min_layer);
    free(t->tie);
    free(t->margins);
    memset(t, 0, sizeof *t);
}

int rkm_router_ties_run(rkm_session *s, const int32_t *ids, int n, float thresh, float tie_gap, rkm_router_ties *t)
{
    if (!s || !ids || !t || n < 1 || n > s->n_ctx || !(thresh >= 0) || !(tie_gap >= 0))
        return rkm_err(RKM_EINVAL, "router ties: %d ids (at most n_ctx %d), threshold %g, gap %g", n,
                       s ? s->n_ctx : 0, thresh, tie_gap);
    memset(t, 0, sizeof *t);
    int nv = s->m->hp.n_vocab, nl = s->m->hp.n_layer, rc;
    float *lg = malloc(sizeof(float) * (size_t)n * (size_t)nv);
    t->top1 = malloc(sizeof(int) * (size_t)n);
    t->gap = malloc(sizeof(float) * (size_t)n);
    t->min_margin = malloc(sizeof(float) * (size_t)n);
    t->min_layer = malloc(sizeof(int) * (size_t)n);
    t->tie = calloc((size_t)n, 1);
    t->margins = malloc(sizeof(float) * (size_t)n * (size_t)nl);
    if (!lg || !t->top1 || !t->gap || !t->min_margin || !t->min_layer || !t->tie || !t->margins) {
        rc = rkm_err(RKM_ENOMEM, "router ties: out of memory for %d positions", n);
        goto out;
    }
    if ((rc = rkm_session_truncate(s, 0)) || (rc = rkm_session_record_router(s, 1)) ||
        (rc = rkm_session_eval_all(s, ids, n, lg)) || (rc = rkm_session_router_margins(s, 0, n, t->margins)))
        goto out;
    rkm_session_record_router(s, 0);
    for (int p = 0; p < n; p++) {
        t->top1[p] = top1(lg + (size_t)p * nv, nv, &t->gap[p]);
        t->min_margin[p] = INFINITY;
        t->min_layer[p] = -1;
        for (int il = 0; il < nl; il++) {
            float v = t->margins[(size_t)p * nl + il];
            if (v == v && v < t->min_margin[p]) t->min_margin[p] = v, t->min_layer[p] = il;
        }
    }
    /* a flip at p can only mark positions from p on, so each evaluation
     * stops at the last position not yet marked (open), and a flip with
     * none left after it is counted but not evaluated */
    int open = n - 1;
    for (int p = 0; p < n; p++)
        for (int il = 0; il < nl; il++) {
            if (!(t->margins[(size_t)p * nl + il] < thresh)) continue; /* NaN: no routed experts */
            t->n_flipped++;
            while (open >= 0 && t->tie[open]) open--;
            if (open < p) continue;
            if ((rc = rkm_session_truncate(s, p)) || (rc = rkm_session_router_flip(s, il, p)) ||
                (rc = rkm_session_eval_all(s, ids + p, open - p + 1, lg)))
                goto out;
            rkm_session_router_flip(s, -1, 0);
            for (int r = p; r <= open; r++) {
                float g;
                int b = top1(lg + (size_t)(r - p) * nv, nv, &g);
                if (b != t->top1[r] || g < tie_gap) t->tie[r] = 1;
            }
        }
out:
    rkm_session_router_flip(s, -1, 0);
    rkm_session_record_router(s, 0);
    free(lg);
    if (rc) rkm_router_ties_free(t);
    return rc;
}
