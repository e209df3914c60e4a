/*
 * moe.c - the routed-expert layer: router (and its bias), softmax and
 * top-k as the architecture gates them, renormalisation, per-expert scales
 * and biases, the shared expert beside the routed ones (its dense FFN is
 * ffn.c's).
 *
 * A chunk of n rows is routed first; then rows are grouped by expert and
 * each selected expert runs ONCE for all its rows (one matmul with m = its
 * row count). Experts come from the expert cache in tiles of at most
 * rkm_expert_cache_slots (half of it when they do not all fit, so the next
 * tile is read while one computes): request(tile), get each, compute,
 * unpin or release. Each
 * (row, slot) output is kept apart and the slots are summed in top-k order
 * afterwards, as llama.cpp does, so the result does not depend on the
 * grouping.
 *
 * Threads: called by the session's thread with model->lock held; the
 * matmuls use the model's pool. Scratch belongs to the session.
 */
#include <math.h>

#include "backend/backend.h"
#include "runtime/model.h"

_Static_assert(2 * RKM_MAX_EXPERTS + 2 <= RKM_MM_MULTI_MAX_TASKS,
               "a layer's gate/up batch must fit one rkm_mm_multi job");

/* The type of an expert part as the cache holds it (packed when the
 * model packs, see rkm_expert_cache_params.pack). */
static int part_type(const rkm_model *m, const rkm_expert_part *p)
{
    return m->pack_experts ? rkm_pack_type(p->type, p->ne[1]) : p->type;
}

/* The top-k of one row's router logits as the architecture weighs them
 * (hp->expert_gating):
 *   softmax         softmax over all, top-k of the probabilities
 *   softmax_weight  top-k of the logits, a softmax over those k (gpt-oss)
 *   sigmoid         sigmoid scores; top-k of score + L->exp_probs_b (the
 *                   selection bias), weighed by the unbiased scores
 * With expert groups, only the n_group_used groups whose two best
 * selection keys sum highest take part. Then renormalisation
 * (expert_norm_topk, the sum clamped as llama.cpp does), the routed scale
 * and per-expert scales. Ties go to the lower id (lower group).
 *
 * Returns the row's router margin: the k-th selection's key minus the
 * best key left out, keys being the softmax over all experts for the
 * softmax gatings and the biased scores for sigmoid (+inf when every
 * expert that may be chosen is). flip: the runner-up takes the k-th
 * selection's place (a debugging knob, see rkm_session_router_flip).
 * logits is overwritten. */
float rkm_moe_route_row(const rkm_hparams *hp, const rkm_layer *L, float *logits, int *sel, float *w, int flip)
{
    int ne = hp->n_expert, k = hp->n_expert_used;
    int gating = hp->expert_gating;
    float raw[RKM_MAX_EXPERTS], key[RKM_MAX_EXPERTS];
    if (L->router_b)
        for (int e = 0; e < ne; e++) logits[e] += L->router_b[e];
    if (gating == RKM_GATING_SIGMOID) {
        for (int e = 0; e < ne; e++) logits[e] = 1.0f / (1.0f + expf(-logits[e]));
        for (int e = 0; e < ne; e++) key[e] = logits[e] + (L->exp_probs_b ? L->exp_probs_b[e] : 0.0f);
    } else {
        if (gating == RKM_GATING_SOFTMAX_WEIGHT) memcpy(raw, logits, sizeof(float) * (size_t)ne);
        rkm_softmax(logits, ne);
        memcpy(key, gating == RKM_GATING_SOFTMAX_WEIGHT ? raw : logits, sizeof(float) * (size_t)ne);
    }
    /* groups: keep the n_group_used best by the sum of their two best keys */
    int ng = hp->n_expert_group, n_open = ne;
    uint8_t shut[RKM_MAX_EXPERTS] = {0};
    if (ng > 1) {
        int per = ne / ng;
        float gs[RKM_MAX_EXPERTS];
        int keep[RKM_MAX_EXPERTS] = {0};
        for (int g = 0; g < ng; g++) {
            float b1 = -INFINITY, b2 = -INFINITY;
            for (int e = g * per; e < (g + 1) * per; e++) {
                if (key[e] > b1) b2 = b1, b1 = key[e];
                else if (key[e] > b2) b2 = key[e];
            }
            gs[g] = per > 1 ? b1 + b2 : b1;
        }
        for (int j = 0; j < hp->n_group_used; j++) {
            int best = -1;
            for (int g = 0; g < ng; g++)
                if (!keep[g] && (best < 0 || gs[g] > gs[best])) best = g;
            keep[best] = 1;
        }
        for (int g = 0; g < ng; g++)
            if (!keep[g])
                for (int e = g * per; e < (g + 1) * per; e++) shut[e] = 1;
        n_open = hp->n_group_used * per;
    }
    /* the k best, then the runner-up (the (k+1)-th) when there is one */
    int runner = -1;
    for (int j = 0; j <= k && j < n_open; j++) {
        int best = -1;
        for (int e = 0; e < ne; e++) {
            int taken = 0;
            for (int t = 0; t < j; t++) taken |= sel[t] == e;
            if (taken || shut[e]) continue;
            if (best < 0 || key[e] > key[best]) best = e;
        }
        if (j == k) {
            runner = best;
            break;
        }
        sel[j] = best;
    }
    float margin = INFINITY;
    if (runner >= 0) {
        margin = gating == RKM_GATING_SIGMOID ? key[sel[k - 1]] - key[runner] : logits[sel[k - 1]] - logits[runner];
        if (flip) sel[k - 1] = runner;
    }
    if (gating == RKM_GATING_SOFTMAX_WEIGHT) {
        for (int j = 0; j < k; j++) w[j] = raw[sel[j]];
        rkm_softmax(w, k);
    } else {
        for (int j = 0; j < k; j++) w[j] = logits[sel[j]];
    }
    if (hp->expert_norm_topk) {
        float sum = 0;
        for (int j = 0; j < k; j++) sum += w[j];
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        for (int j = 0; j < k; j++) w[j] /= sum;
    }
    if (hp->expert_weights_scale != 1.0f)
        for (int j = 0; j < k; j++) w[j] *= hp->expert_weights_scale;
    if (L->expert_scale)
        for (int j = 0; j < k; j++) w[j] *= L->expert_scale[sel[j]];
    return margin;
}

/* Decoding with streamed experts: the next MoE layer's router applied to
 * this layer's router input guesses its experts, so their reads overlap
 * this layer's compute (a hint; a wrong guess costs only bandwidth). */
static void prefetch_next(rkm_session *s, int il, const float *rin)
{
    const rkm_model *m = s->m;
    int nl = il + 1;
    while (nl < m->hp.n_layer && !m->layers[nl].el) nl++;
    if (nl >= m->hp.n_layer) return;
    float lg[RKM_MAX_EXPERTS], w[RKM_MAX_EXPERTS];
    int ids[RKM_MAX_EXPERTS];
    rkm_matmul_mat(m->pool, &m->layers[nl].router, rin, 1, lg);
    rkm_moe_route_row(&m->hp, &m->layers[nl], lg, ids, w, 0); /* the gating's own choice */
    rkm_expert_cache_prefetch(m->cache, nl, ids, m->hp.n_expert_used);
}

int rkm_moe_route(rkm_session *s, int il, const float *rin, int n)
{
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const rkm_layer *L = &m->layers[il];
    int ne = hp->n_expert, k = hp->n_expert_used;
    rkm_moe_state *ms = &s->moe;

    rkm_matmul_mat(m->pool, &L->router, rin, n, s->router);
    for (int r = 0; r < n; r++) {
        int pos = s->n_past + r; /* rkm_forward_chunk moves n_past after the chunk */
        float mg = rkm_moe_route_row(&m->hp, L, s->router + (size_t)r * ne, s->sel + (size_t)r * k, s->selw + (size_t)r * k,
                             il == s->flip_layer && pos == s->flip_pos);
        if (s->route_margin) s->route_margin[(size_t)pos * hp->n_layer + il] = mg;
        s->margin[r] = mg;
    }
    if (s->trace) s->trace(s->trace_user, il, "router_margin", s->margin, n, 1);

    if (m->prefetch && n == 1) prefetch_next(s, il, rin);

    /* group (row, slot) entries by expert: counting sort */
    int *cnt = ms->cnt, *start = ms->start, *ids = ms->ids, n_ids = 0;
    memset(cnt, 0, sizeof(int) * (size_t)ne);
    for (int i = 0; i < n * k; i++) cnt[s->sel[i]]++;
    start[0] = 0;
    for (int e = 0; e < ne; e++) {
        start[e + 1] = start[e] + cnt[e];
        if (cnt[e]) ids[n_ids++] = e;
    }
    int fill[RKM_MAX_EXPERTS];
    memcpy(fill, start, sizeof(int) * (size_t)ne);
    for (int i = 0; i < n * k; i++) {
        int at = fill[s->sel[i]]++;
        s->erows[at] = i;
        s->epos[i] = at;
    }

    int slots = m->cache ? rkm_expert_cache_slots(m->cache) : 0;
    if (slots <= 0 || slots > n_ids) slots = n_ids;
    /* When the chunk's experts outnumber the slots, tiles of half the slots
     * let the next tile's reads run while this one computes: request(t+1),
     * compute t, unpin(t). Outputs are kept per (row, slot) and summed in
     * top-k order, so the tiling never changes the result. */
    ms->il = il;
    ms->n = n;
    ms->n_ids = n_ids;
    ms->overlap = slots < n_ids && slots >= 2;
    ms->tile = ms->overlap ? slots / 2 : slots;
    ms->next = 0;
    /* the first tile (and the next) are requested now, so their reads run
     * while the caller computes what does not need them */
    int nt = RKM_MIN(ms->tile, n_ids);
    int rc = nt > 0 ? rkm_expert_cache_request(m->cache, il, ids, nt) : 0;
    ms->next = nt;
    if (!rc && ms->overlap && ms->next < n_ids) {
        int nn = RKM_MIN(ms->tile, n_ids - ms->next);
        rc = rkm_expert_cache_request(m->cache, il, ids + ms->next, nn);
        ms->next += nn;
    }
    if (rc) rkm_expert_cache_release(m->cache, il);
    return rc;
}

/* rows x n values += the bias b (an expert's, gpt-oss) */
static void add_rows(float *y, const float *b, int rows, int n)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < n; c++) y[(size_t)r * n + c] += b[c];
}

/* o = y * w (acc 0) or o += y * w, the product rounded before the add. */
static void scale_acc(float *restrict o, const float *restrict y, float w, int n, int acc)
{
    int c = 0;
    /* blocks of 4 lanes, which -O2 turns into vector ops */
    if (acc)
        for (; c + 4 <= n; c += 4) {
            o[c] += y[c] * w;
            o[c + 1] += y[c + 1] * w;
            o[c + 2] += y[c + 2] * w;
            o[c + 3] += y[c + 3] * w;
        }
    else
        for (; c + 4 <= n; c += 4) {
            o[c] = y[c] * w;
            o[c + 1] = y[c + 1] * w;
            o[c + 2] = y[c + 2] * w;
            o[c + 3] = y[c + 3] * w;
        }
    for (; c < n; c++) o[c] = acc ? o[c] + y[c] * w : y[c] * w;
}

int rkm_moe_experts(rkm_session *s, int il, const float *x, int n, float *out)
{
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const rkm_layer *L = &m->layers[il];
    const rkm_expert_layer *el = L->el;
    int E = hp->n_embd, k = hp->n_expert_used, ff = m->n_ff_exp;
    rkm_pool *pool = m->pool;
    rkm_moe_state *ms = &s->moe;
    RKM_ASSERT(ms->il == il && ms->n == n);
    const int *cnt = ms->cnt, *start = ms->start, *ids = ms->ids;
    const int n_ids = ms->n_ids, tile = ms->tile, overlap = ms->overlap;
    const rkm_expert_part *pg = &el->part[RKM_PART_GATE], *pu = &el->part[RKM_PART_UP],
                          *pd = &el->part[RKM_PART_DOWN];
    for (int t0 = 0; t0 < n_ids; t0 += tile) {
        int nt = RKM_MIN(tile, n_ids - t0);
        int rc = 0;
        if (ms->next < t0 + nt) {
            rc = rkm_expert_cache_request(m->cache, il, ids + t0, nt);
            ms->next = t0 + nt;
        }
        if (!rc && overlap && ms->next < n_ids && ms->next < t0 + nt + tile) { /* the next tile, once */
            int nn = RKM_MIN(tile, n_ids - ms->next);
            rc = rkm_expert_cache_request(m->cache, il, ids + ms->next, nn);
            ms->next += nn;
        }
        if (rc) {
            rkm_expert_cache_release(m->cache, il);
            return rc;
        }
        /* Compute the tile's experts as their reads land: each round takes
         * every expert that is ready (try_get), blocking on the first
         * pending one only when none is. A round runs its experts'
         * gate/up matmuls in one batched pool run and their down matmuls
         * in another when rows are few (decoding); with many rows each
         * matmul splits its own rows. Entries are grouped by expert, so
         * expert e's rows sit at start[e] in xe / ge / ue. */
        uint8_t done[RKM_MAX_EXPERTS];
        int batch[RKM_MAX_EXPERTS];
        const uint8_t *blobs[RKM_MAX_EXPERTS];
        memset(done, 0, (size_t)nt);
        for (int left = nt; left > 0;) {
            int nb = 0, first = -1;
            for (int t = 0; t < nt; t++) {
                if (done[t]) continue;
                if (first < 0) first = t;
                const uint8_t *blob = NULL;
                rc = rkm_expert_cache_try_get(m->cache, il, ids[t0 + t], &blob);
                if (rc < 0) break;
                if (rc == 1) {
                    batch[nb] = t;
                    blobs[nb++] = blob;
                }
            }
            if (rc >= 0 && nb == 0) {
                rkm_pool_park(pool); /* a read to wait for: the spinners give way to the IO threads */
                rc = rkm_expert_cache_get(m->cache, il, ids[t0 + first], &blobs[0]);
                batch[nb++] = first;
            }
            if (rc < 0) {
                rkm_expert_cache_release(m->cache, il);
                return rc;
            }
            rkm_mm_task tk[2 * RKM_MAX_EXPERTS];
            for (int b = 0; b < nb; b++) {
                int e = ids[t0 + batch[b]], me = cnt[e];
                const int *rows = s->erows + start[e];
                const float *xe = x + (size_t)(rows[0] / k) * E; /* one row: read in place */
                if (me > 1) {
                    float *g = s->xe + (size_t)start[e] * E;
                    for (int i = 0; i < me; i++)
                        memcpy(g + (size_t)i * E, x + (size_t)(rows[i] / k) * E, sizeof(float) * (size_t)E);
                    xe = g;
                }
                float *ge = s->ge + (size_t)start[e] * ff, *ue = s->ue + (size_t)start[e] * ff;
                tk[2 * b] = (rkm_mm_task){part_type(m, pg), blobs[b] + pg->offset, E, ff, xe, me, ge, ff};
                tk[2 * b + 1] = (rkm_mm_task){part_type(m, pu), blobs[b] + pu->offset, E, ff, xe, me, ue, ff};
            }
            int few = n <= RKM_MM_MULTI_MAX_ROWS;
            rc = rkm_backend_mm(m->backend, pool, tk, 2 * nb, few);
            for (int b = 0; b < nb; b++) {
                int e = ids[t0 + batch[b]];
                float *ge = s->ge + (size_t)start[e] * ff, *ue = s->ue + (size_t)start[e] * ff;
                if (L->exp_gate_b) add_rows(ge, L->exp_gate_b + (size_t)e * ff, cnt[e], ff);
                if (L->exp_up_b) add_rows(ue, L->exp_up_b + (size_t)e * ff, cnt[e], ff);
                rkm_glu(m, ge, ge, ue, (int64_t)cnt[e] * ff);
                /* down: its output replaces the gathered input rows */
                tk[b] = (rkm_mm_task){part_type(m, pd), blobs[b] + pd->offset, ff, E, ge, cnt[e],
                                      s->xe + (size_t)start[e] * E, E};
            }
            if (!rc) rc = rkm_backend_mm(m->backend, pool, tk, nb, few);
            if (rc) {
                rkm_expert_cache_release(m->cache, il);
                return rc;
            }
            if (L->exp_down_b)
                for (int b = 0; b < nb; b++) {
                    int e = ids[t0 + batch[b]];
                    add_rows(s->xe + (size_t)start[e] * E, L->exp_down_b + (size_t)e * E, cnt[e], E);
                }
            for (int b = 0; b < nb; b++) {
                done[batch[b]] = 1;
                left--;
            }
        }
        if (overlap) rkm_expert_cache_unpin(m->cache, il, ids + t0, nt);
        else rkm_expert_cache_release(m->cache, il);
    }
    if (overlap) rkm_expert_cache_release(m->cache, il);
    /* out = sum over the top-k slots, in slot order, of weight * output:
     * each product rounded, then added, whatever the grouping was */
    for (int r = 0; r < n; r++)
        for (int j = 0; j < k; j++)
            scale_acc(out + (size_t)r * E, s->xe + (size_t)s->epos[r * k + j] * E, s->selw[r * k + j], E, j > 0);

    return 0;
}

int rkm_moe_forward(rkm_session *s, int il, const float *x, const float *rin, int n, float *out)
{
    const rkm_layer *L = &s->m->layers[il];
    int E = s->m->hp.n_embd;
    int rc = rkm_moe_route(s, il, rin, n);
    if (rc) return rc;
    /* the shared expert (qwen2moe) runs while the routed experts are read */
    float *sh = NULL;
    if (L->sh_gate.data) {
        sh = s->ffn2;
        if ((rc = rkm_ffn_dense(s, &L->sh_gate, &L->sh_up, &L->sh_down, x, n, sh, s->ge, s->ue))) {
            rkm_expert_cache_release(s->m->cache, il); /* the routed experts' pins */
            return rc;
        }
    }
    if ((rc = rkm_moe_experts(s, il, x, n, out))) return rc;
    if (sh) {
        /* scaled by sigmoid(gate_inp . x) */
        for (int r = 0; r < n; r++) {
            float g = 1.0f;
            if (L->sh_gate_inp.data) {
                rkm_matmul_mat(NULL, &L->sh_gate_inp, x + (size_t)r * E, 1, &g);
                g = 1.0f / (1.0f + expf(-g));
            }
            float *o = out + (size_t)r * E;
            const float *h = sh + (size_t)r * E;
            for (int c = 0; c < E; c++) o[c] += h[c] * g;
        }
    }
    return 0;
}
