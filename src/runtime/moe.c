/*
 * moe.c - feed-forward blocks: dense gated FFNs and the routed-expert
 * layer (router softmax, top-k, renormalisation, per-expert scales, shared
 * expert).
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
#include <pthread.h>
#include <stdatomic.h>

#include "backend/backend.h"
#include "runtime/model.h"

rkm_pool *rkm_pool_for(rkm_pool *pool, double work)
{
    return work < RKM_POOL_MIN_WORK ? NULL : pool;
}

void rkm_matmul_mat(rkm_pool *pool, const rkm_mat *w, const float *x, int64_t m, float *y)
{
    rkm_matmul(rkm_pool_for(pool, (double)w->n_in * (double)w->n_out * (double)m), w->type, w->data, w->n_in,
               w->n_out, x, m, y, w->n_out);
}

rkm_mm_task rkm_mm_task_of(const rkm_mat *w, const float *x, int64_t m, float *y)
{
    rkm_mm_task t = {w->type, w->data, w->n_in, w->n_out, x, m, y, w->n_out};
    return t;
}

/* The type of an expert part as the cache holds it (packed when the
 * model packs, see rkm_expert_cache_params.pack). */
static int part_type(const rkm_model *m, const rkm_expert_part *p)
{
    return m->pack_experts ? rkm_pack_type(p->type, p->ne[1]) : p->type;
}

typedef struct {
    const rkm_mm_task *t;
    int n;
    int64_t chunk;
    int64_t first[2 * RKM_MAX_EXPERTS + 4]; /* first row of each task in the job's row space */
    _Atomic int64_t next;
} multi_job;

/* The tasks' rows laid end to end, each task padded to whole 16-row groups
 * (the packed kernels' grain), are claimed in guided runs (rkm_pool_take);
 * a run may span the end of one task and the start of the next. */
static void multi_worker(void *ctx, int ith, int nth)
{
    multi_job *j = ctx;
    int ti = 0;
    (void)ith;
    /* a task's runs, and the gate/up pair of an expert, share x: each
     * thread quantizes it once per run of rows with the same x */
    rkm_matmul_reuse_begin();
    int64_t u0, nu;
    while ((nu = rkm_pool_take(&j->next, j->first[j->n], j->chunk, 16, nth, &u0)) > 0) {
        for (int64_t u = u0, end = u0 + nu; u < end;) {
            while (u >= j->first[ti + 1]) ti++;
            const rkm_mm_task *t = &j->t[ti];
            int64_t r0 = u - j->first[ti], r1 = RKM_MIN(end, j->first[ti + 1]) - j->first[ti];
            u = j->first[ti] + r1;
            r1 = RKM_MIN(r1, t->n_out);
            if (r0 >= r1) continue; /* the padding */
            size_t rb = rkm_type_row_bytes(t->type, t->n_in);
            rkm_matmul_reuse(t->type, (const uint8_t *)t->w + (size_t)r0 * rb, t->n_in, r1 - r0, t->x, t->m,
                             t->y + r0, t->ldy);
        }
    }
}

void rkm_mm_multi(rkm_pool *pool, const rkm_mm_task *t, int n)
{
    double work = 0;
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        work += (double)t[i].n_in * (double)t[i].n_out * (double)t[i].m;
        rows += t[i].n_out;
    }
    int nth = rkm_pool_n_threads(pool);
    if (!pool || nth <= 1 || work < RKM_POOL_MIN_WORK || n > 2 * RKM_MAX_EXPERTS + 2) {
        for (int i = 0; i < n; i++)
            rkm_matmul(rkm_pool_for(pool, (double)t[i].n_in * t[i].n_out * t[i].m), t[i].type, t[i].w, t[i].n_in,
                       t[i].n_out, t[i].x, t[i].m, t[i].y, t[i].ldy);
        return;
    }
    multi_job j;
    j.t = t;
    j.n = n;
    /* runs of at most about an eighth of a thread's share, whole groups */
    j.chunk = RKM_ALIGN_UP(RKM_MAX(rows / (8 * nth), 16), 16);
    j.first[0] = 0;
    for (int i = 0; i < n; i++) j.first[i + 1] = j.first[i] + RKM_ALIGN_UP(t[i].n_out, 16);
    atomic_store_explicit(&j.next, 0, memory_order_relaxed);
    rkm_pool_run(pool, multi_worker, &j);
}

/* ggml's CPU GELU: y = f16(gelu_tanh(f16(x))) through a 65536-entry table
 * for -10 < x < 10, 0 below, x above. Emulated because the goldens come
 * from it (an exact GELU moves gemma4's probabilities by ~1e-3). */
static rkm_f16 gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
    for (uint32_t i = 0; i < (1u << 16); i++) gelu_table[i] = rkm_f32_to_f16(rkm_gelu_tanh(rkm_f16_to_f32((rkm_f16)i)));
}

void rkm_glu(const rkm_model *m, float *out, const float *g, const float *u, int64_t n)
{
    if (m->hp.act != RKM_ACT_GELU_TANH) {
        rkm_swiglu(out, g, u, n);
        return;
    }
    pthread_once(&gelu_once, gelu_table_init);
    for (int64_t i = 0; i < n; i++) {
        float x = g[i], y;
        if (x <= -10.0f) y = 0.0f;
        else if (x >= 10.0f) y = x;
        else y = rkm_f16_to_f32(gelu_table[rkm_f32_to_f16(x)]);
        out[i] = y * u[i];
    }
}

int rkm_model_mm(const rkm_model *m, const rkm_mat *w, const float *x, int64_t n, float *y)
{
    if (w->npu && n >= RKM_NPU_DENSE_MIN_ROWS) {
        rkm_mm_task t = {RKM_TYPE_RKNN_I8, w->npu, w->n_in, w->n_out, x, n, y, w->n_out};
        return rkm_backend_mm(m->backend, m->pool, &t, 1, 0);
    }
    rkm_matmul_mat(m->pool, w, x, n, y);
    return 0;
}

int rkm_ffn_dense(rkm_session *s, const rkm_mat *gate, const rkm_mat *up, const rkm_mat *down,
                  const float *x, int n, float *out, float *tg, float *tu)
{
    const rkm_model *m = s->m;
    int64_t ff = gate->n_out;
    int rc;
    if (n <= RKM_MM_MULTI_MAX_ROWS) {
        rkm_mm_task t[2] = {rkm_mm_task_of(gate, x, n, tg), rkm_mm_task_of(up, x, n, tu)};
        rkm_mm_multi(m->pool, t, 2);
    } else if ((rc = rkm_model_mm(m, gate, x, n, tg)) || (rc = rkm_model_mm(m, up, x, n, tu))) {
        return rc;
    }
    rkm_glu(s->m, tg, tg, tu, (int64_t)n * ff);
    return rkm_model_mm(m, down, tg, n, out);
}

/* Softmax over the router logits of one row, top-k (ties: lower id), then
 * renormalisation and per-expert scales as the architecture says. */
static void route_row(const rkm_model *m, const rkm_layer *L, float *logits, int *sel, float *w)
{
    const rkm_hparams *hp = &m->hp;
    int ne = hp->n_expert, k = hp->n_expert_used;
    rkm_softmax(logits, ne);
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < ne; e++) {
            int taken = 0;
            for (int t = 0; t < j; t++) taken |= sel[t] == e;
            if (taken) continue;
            if (best < 0 || logits[e] > logits[best]) best = e;
        }
        sel[j] = best;
        w[j] = logits[best];
    }
    if (hp->expert_norm_topk) {
        float sum = 0;
        for (int j = 0; j < k; j++) sum += w[j];
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        for (int j = 0; j < k; j++) w[j] /= sum;
    }
    if (L->expert_scale)
        for (int j = 0; j < k; j++) w[j] *= L->expert_scale[sel[j]];
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
    int ne = m->hp.n_expert, k = m->hp.n_expert_used;
    float lg[RKM_MAX_EXPERTS];
    rkm_matmul_mat(m->pool, &m->layers[nl].router, rin, 1, lg);
    int ids[RKM_MAX_EXPERTS], n_ids = 0;
    for (int j = 0; j < k; j++) {
        int b = -1;
        for (int e = 0; e < ne; e++)
            if (lg[e] > -INFINITY && (b < 0 || lg[e] > lg[b])) b = e;
        if (b < 0) break; /* NaN logits: fewer hints */
        ids[n_ids++] = b;
        lg[b] = -INFINITY;
    }
    if (n_ids) rkm_expert_cache_prefetch(m->cache, nl, ids, n_ids);
}

int rkm_moe_route(rkm_session *s, int il, const float *rin, int n)
{
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const rkm_layer *L = &m->layers[il];
    int ne = hp->n_expert, k = hp->n_expert_used;
    rkm_moe_state *ms = &s->moe;

    rkm_matmul_mat(m->pool, &L->router, rin, n, s->router);
    for (int r = 0; r < n; r++)
        route_row(m, L, s->router + (size_t)r * ne, s->sel + (size_t)r * k, s->selw + (size_t)r * k);

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
