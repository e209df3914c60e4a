/*
 * session.c - the session API of rkmojo.h: one KV cache, sampler and
 * scratch per session; prompt evaluation in chunks, generation, cancel,
 * statistics, and saving / restoring the KV state; batches (several
 * sessions' rows in one forward pass, with a scratch session of their
 * own that has no KV cache).
 *
 * Threads: a session or a batch is driven by one thread at a time;
 * rkm_session_cancel and rkm_batch_cancel may come from any thread (an
 * atomic flag checked between layers). A session or batch owns
 * everything it allocates; rkm_session_free / rkm_batch_free release it
 * (a batch never owns the sessions passed to it).
 *
 * Session file (little-endian, version 1):
 *   magic "RKMSESS1", u32 version, u32 n_layer, u64 model_id, u32 n_past,
 *   u32 n_vocab, u32 n_embd, u32 have_logits,
 *   i32 tokens[n_past], f32 logits[n_vocab], f32 embd[n_embd],
 *   per layer: u32 first (oldest position stored), u32 k_dim, u32 v_dim,
 *              then for p in first..n_past-1: f16 K[k_dim], f16 V[v_dim]
 *   with recurrent layers: u32 state floats, f32 state, u32 snapshots,
 *              each u32 position, f32 state;
 *   with multi-axis RoPE: i32 positions[n_past][RKM_MPOS];
 *   u64 XXH3 of everything before it.
 */
#include <fcntl.h>
#include <math.h>
#include <unistd.h>

#include "runtime/model.h"
#include "runtime/constrain.h"

void rkm_session_params_default(rkm_session_params *p)
{
    memset(p, 0, sizeof *p);
    rkm_sampler_params_default(&p->sampler);
}

static void *scratch(size_t n_floats)
{
    return rkm_alloc_aligned(sizeof(float) * (n_floats ? n_floats : 1), 64);
}

static int alloc_scratch(rkm_session *s)
{
    const rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    size_t R = (size_t)s->n_chunk, E = (size_t)hp->n_embd;
    size_t k = (size_t)RKM_MAX(hp->n_expert_used, 1);
    size_t ff = (size_t)RKM_MAX(hp->n_ff, hp->n_ff_shexp);
    size_t ffe = R * k * (size_t)m->n_ff_exp;
    size_t nth = (size_t)m->n_threads;
    s->x = scratch(R * E);
    s->cur = scratch(R * E);
    s->cur2 = scratch(R * E);
    s->tmp = scratch(R * E);
    s->ffn = scratch(R * E);
    s->ffn2 = scratch(R * E);
    s->q = scratch(R * (size_t)m->max_qdim);
    s->att = scratch(R * (size_t)m->max_qdim);
    s->k = scratch(R * (size_t)m->max_kvdim);
    s->v = scratch(R * (size_t)m->max_kvdim);
    s->ge = scratch(RKM_MAX(R * ff, ffe));
    s->ue = scratch(RKM_MAX(R * ff, ffe));
    s->scores = scratch(nth * (size_t)s->n_ctx);
    s->q16 = rkm_alloc_aligned(sizeof(rkm_f16) * nth * (size_t)m->max_hd, 64);
    s->p16 = rkm_alloc_aligned(sizeof(rkm_f16) * nth * (size_t)s->n_ctx, 64);
    s->router = scratch(R * (size_t)RKM_MAX(hp->n_expert, 1));
    s->sel = malloc(sizeof(int) * R * k);
    s->selw = scratch(R * k);
    s->margin = scratch(R);
    s->xe = scratch(R * k * E);
    s->erows = malloc(sizeof(int) * R * k);
    s->epos = malloc(sizeof(int) * R * k);
    s->logits = scratch((size_t)hp->n_vocab);
    s->embd = scratch(E);
    s->tokens = malloc(sizeof(int32_t) * (size_t)s->n_ctx);
    if (hp->rope_sec_t + hp->rope_sec_h + hp->rope_sec_w + hp->rope_sec_e > 0 &&
        !(s->mpos = malloc(sizeof(int32_t) * RKM_MPOS * (size_t)s->n_ctx)))
        return rkm_err(RKM_ENOMEM, "session: out of memory for the positions");
    s->embd_row = malloc(rkm_type_row_bytes(m->tok_embd_type, E));
    if (hp->kv_lora_rank > 0 &&
        !(s->mla = scratch(R * RKM_MAX((size_t)hp->n_head * (size_t)RKM_MAX(hp->kv_lora_rank, hp->head_dim_k_mla - hp->rope_dim),
                                       (size_t)hp->q_lora_rank))))
        return rkm_err(RKM_ENOMEM, "session: out of memory for scratch buffers");
    if (hp->kv_lora_rank > 0 && !(s->mla_tasks = malloc(sizeof *s->mla_tasks * (size_t)hp->n_head)))
        return rkm_err(RKM_ENOMEM, "session: out of memory for scratch buffers");
    if (hp->attn_q_gate && !(s->gate = scratch(R * (size_t)m->max_qdim / 2)))
        return rkm_err(RKM_ENOMEM, "session: out of memory for scratch buffers");
    if (m->rs_floats) {
        size_t wx, wz, wba, wo;
        rkm_recurrent_row_floats(hp, &wx, &wz, &wba, &wo);
        s->rs = scratch(m->rs_floats);
        s->ssm_x = scratch(R * wx);
        s->ssm_z = scratch(R * wz);
        s->ssm_ba = scratch(R * wba);
        s->ssm_o = scratch(R * wo);
        if (!s->rs || !s->ssm_x || !s->ssm_z || !s->ssm_ba || !s->ssm_o)
            return rkm_err(RKM_ENOMEM, "session: out of memory for the recurrent state");
        memset(s->rs, 0, sizeof(float) * m->rs_floats);
    }
    if (!s->x || !s->cur || !s->cur2 || !s->tmp || !s->ffn || !s->ffn2 || !s->q || !s->att || !s->k || !s->v ||
        !s->ge || !s->ue || !s->scores || !s->q16 || !s->p16 || !s->router || !s->sel || !s->selw || !s->margin || !s->xe ||
        !s->epos || !s->erows || !s->logits || !s->embd || !s->tokens || !s->embd_row)
        return rkm_err(RKM_ENOMEM, "session: out of memory for scratch buffers");
    return 0;
}

static rkm_session *session_new(rkm_model *m, const rkm_session_params *p, int with_kv);

rkm_session *rkm_session_new(rkm_model *m, const rkm_session_params *p) { return session_new(m, p, 1); }

/* A session without a KV cache: a batch's scratch. */
static rkm_session *session_new(rkm_model *m, const rkm_session_params *p, int with_kv)
{
    rkm_session_params dp;
    if (!m) {
        rkm_err(RKM_EINVAL, "session: no model");
        return NULL;
    }
    if (!p) {
        rkm_session_params_default(&dp);
        p = &dp;
    }
    rkm_session *s = calloc(1, sizeof *s);
    if (!s) {
        rkm_err(RKM_ENOMEM, "session: out of memory");
        return NULL;
    }
    s->m = m;
    s->p = *p;
    s->n_ctx = p->n_ctx > 0 ? p->n_ctx : rkm_hparams_default_ctx(&m->hp);
    s->n_chunk = p->n_chunk > 0 ? p->n_chunk : 128;
    if (s->n_ctx > (1 << 24) || p->n_ctx < 0 || p->n_chunk < 0 || s->n_chunk > 65536) {
        rkm_err(RKM_EINVAL, "session: n_ctx %d / n_chunk %d out of range", p->n_ctx, p->n_chunk);
        free(s);
        return NULL;
    }
    if (s->n_chunk > s->n_ctx) s->n_chunk = s->n_ctx;
    atomic_init(&s->cancel, 0);
    s->t_first = -1;
    s->flip_layer = s->flip_pos = -1;
    if (alloc_scratch(s) || (with_kv && rkm_kv_init(s))) goto fail;
    s->sampler = rkm_sampler_new(&p->sampler, m->hp.n_vocab);
    if (!s->sampler) goto fail;
    return s;
fail:
    rkm_session_free(s);
    return NULL;
}

void rkm_session_free(rkm_session *s)
{
    if (!s) return;
    rkm_kv_free(s);
    rkm_sampler_free(s->sampler);
    rkm_constraint_free(s->grammar);
    float *fl[] = {s->x, s->cur, s->cur2, s->tmp, s->ffn, s->ffn2, s->q, s->att, s->k, s->v, s->ge, s->ue, s->mla,
                   s->scores, s->router, s->selw, s->margin, s->xe, s->logits, s->embd, s->gate, s->rs,
                   s->ssm_x, s->ssm_z, s->ssm_ba, s->ssm_o};
    for (size_t i = 0; i < RKM_ARRAY_LEN(fl); i++) rkm_free_aligned(fl[i]);
    rkm_free_aligned(s->q16);
    rkm_free_aligned(s->p16);
    free(s->sel);
    free(s->mla_tasks);
    free(s->route_margin);
    free(s->erows);
    free(s->epos);
    free(s->embd_row);
    free(s->tokens);
    free(s->mpos);
    for (int i = 0; i < RKM_RS_SNAPSHOTS; i++) free(s->snap[i].rs);
    free(s);
}

int rkm_session_n_past(const rkm_session *s) { return s->n_past; }
int rkm_session_n_ctx(const rkm_session *s) { return s->n_ctx; }

const int32_t *rkm_session_tokens(const rkm_session *s, int *n)
{
    if (n) *n = s->n_past;
    return s->tokens;
}

void rkm_session_cancel(rkm_session *s)
{
    if (s) atomic_store(&s->cancel, 1);
}

/* Expert-cache counters before a call, to add the call's share to stats. */
typedef struct {
    rkm_expert_cache_stats c;
} cache_mark;

static void mark(const rkm_session *s, cache_mark *mk)
{
    memset(mk, 0, sizeof *mk);
    if (s->m->cache) rkm_expert_cache_get_stats(s->m->cache, &mk->c);
}

static void account(rkm_session *s, const cache_mark *mk)
{
    if (!s->m->cache) return;
    rkm_expert_cache_stats now;
    rkm_expert_cache_get_stats(s->m->cache, &now);
    s->st.expert_hits += now.hits - mk->c.hits;
    s->st.expert_misses += now.misses - mk->c.misses;
    s->st.bytes_read += now.bytes_read - mk->c.bytes_read;
    s->st.io_wait_s += now.io_wait_s - mk->c.io_wait_s;
}

/* ------------------------------------------------------------ batches */

struct rkm_batch {
    rkm_model *m;
    rkm_session *sc;  /* the pass's scratch (no KV cache of its own) */
    int max_rows;
    int cap_seq;      /* sequences the buffers below hold */
    rkm_seg *seg;
    float *logits;    /* cap_seq x n_vocab */
    int32_t *ids;     /* max_rows */
};

rkm_batch *rkm_batch_new(rkm_model *m, int max_rows, int n_ctx)
{
    if (!m || max_rows < 1 || max_rows > 65536 || n_ctx < 0) {
        rkm_err(RKM_EINVAL, "batch: bad arguments");
        return NULL;
    }
    rkm_batch *b = calloc(1, sizeof *b);
    if (!b) {
        rkm_err(RKM_ENOMEM, "batch: out of memory");
        return NULL;
    }
    rkm_session_params p;
    rkm_session_params_default(&p);
    p.n_ctx = n_ctx;
    p.n_chunk = max_rows;
    b->m = m;
    b->sc = session_new(m, &p, 0); /* its error is the message */
    b->ids = malloc(sizeof(int32_t) * (size_t)max_rows);
    if (!b->sc || !b->ids) {
        if (b->sc) rkm_err(RKM_ENOMEM, "batch: out of memory");
        rkm_batch_free(b);
        return NULL;
    }
    b->max_rows = b->sc->n_chunk;
    return b;
}

void rkm_batch_free(rkm_batch *b)
{
    if (!b) return;
    rkm_session_free(b->sc);
    free(b->seg);
    rkm_free_aligned(b->logits);
    free(b->ids);
    free(b);
}

void rkm_batch_cancel(rkm_batch *b)
{
    if (b) atomic_store(&b->sc->cancel, 1);
}

int rkm_batch_eval(rkm_batch *b, rkm_session *const *ss, const int32_t *const *ids, const int *n, int n_seq)
{
    if (!b || !ss || !ids || !n || n_seq < 1) return rkm_err(RKM_EINVAL, "batch: bad arguments");
    const int nv = b->m->hp.n_vocab;
    int rows = 0;
    for (int i = 0; i < n_seq; i++) {
        if (!ss[i] || ss[i]->m != b->m) return rkm_err(RKM_EINVAL, "batch: sequence %d is not a session of the batch's model", i);
        if (n[i] < 1 || !ids[i]) return rkm_err(RKM_EINVAL, "batch: sequence %d has no tokens", i);
        for (int j = 0; j < i; j++)
            if (ss[j] == ss[i]) return rkm_err(RKM_EINVAL, "batch: session of sequence %d passed twice", i);
        if (n[i] > b->max_rows - rows) return rkm_err(RKM_EINVAL, "batch: more than its %d rows", b->max_rows);
        /* a sliding-window ring holds the window and one chunk of the session's rows */
        for (int il = 0; il < b->m->hp.n_layer; il++)
            if (ss[i]->kv[il].ring && n[i] > ss[i]->n_chunk)
                return rkm_err(RKM_EINVAL, "batch: sequence %d has %d rows; its session's sliding-window cache takes %d a pass",
                               i, n[i], ss[i]->n_chunk);
        rows += n[i];
    }
    if (n_seq > b->cap_seq) {
        rkm_seg *ns = realloc(b->seg, sizeof *ns * (size_t)n_seq);
        if (ns) b->seg = ns;
        float *lg = rkm_alloc_aligned(sizeof(float) * (size_t)n_seq * (size_t)nv, 64);
        if (!ns || !lg) {
            rkm_free_aligned(lg);
            return rkm_err(RKM_ENOMEM, "batch: out of memory for %d sequences' logits", n_seq);
        }
        rkm_free_aligned(b->logits);
        b->logits = lg;
        b->cap_seq = n_seq;
    }
    for (int i = 0; i < n_seq; i++) { /* a failed pass left recurrent states ahead of their positions */
        int rrc = ss[i]->rs_dirty ? rkm_session_truncate(ss[i], ss[i]->n_past) : 0;
        if (rrc) return rrc;
    }
    for (int i = 0, r = 0; i < n_seq; r += n[i++]) {
        b->seg[i] = (rkm_seg){ss[i], r, n[i], ss[i]->n_past};
        memcpy(b->ids + r, ids[i], sizeof(int32_t) * (size_t)n[i]);
    }
    atomic_store(&b->sc->cancel, 0);
    double t0 = rkm_now();
    for (int i = 0; i < n_seq; i++) {
        ss[i]->have_logits = 0;
        if (ss[i]->t_first < 0) ss[i]->t_first = t0;
    }
    cache_mark mk;
    mark(b->sc, &mk);
    int rc = rkm_forward_rows(b->sc, b->seg, n_seq, b->ids, rows, b->logits, 0);
    if (rc) return rc;
    double dt = rkm_now() - t0;
    /* the pass's expert-cache counters, shared out by rows (the last
     * sequence takes the remainder, so the sessions' sums are the pass's) */
    account(b->sc, &mk);
    rkm_stats pass = b->sc->st;
    memset(&b->sc->st, 0, sizeof b->sc->st);
    uint64_t given[3] = {0, 0, 0};
    for (int i = 0; i < n_seq; i++) {
        rkm_session *s = ss[i];
        memcpy(s->logits, b->logits + (size_t)i * nv, sizeof(float) * (size_t)nv);
        s->have_logits = 1;
        s->st.n_prompt += n[i];
        s->st.t_prompt_s += dt;
        int last = i == n_seq - 1;
        uint64_t h = last ? pass.expert_hits - given[0] : pass.expert_hits * (uint64_t)n[i] / (uint64_t)rows;
        uint64_t m = last ? pass.expert_misses - given[1] : pass.expert_misses * (uint64_t)n[i] / (uint64_t)rows;
        uint64_t r = last ? pass.bytes_read - given[2] : pass.bytes_read * (uint64_t)n[i] / (uint64_t)rows;
        given[0] += h, given[1] += m, given[2] += r;
        s->st.expert_hits += h;
        s->st.expert_misses += m;
        s->st.bytes_read += r;
        s->st.io_wait_s += pass.io_wait_s * n[i] / rows;
    }
    return 0;
}

/* Evaluates ids in chunks; rows of logits as asked (NULL, last, all). */
static int eval_chunks(rkm_session *s, const int32_t *ids, int n, float *last, float *all)
{
    if (n < 0 || (n > 0 && !ids)) return rkm_err(RKM_EINVAL, "eval: bad arguments");
    if (n == 0) {
        if (last) {
            if (!s->have_logits) return rkm_err(RKM_EINVAL, "eval: nothing evaluated yet");
            memcpy(last, s->logits, sizeof(float) * (size_t)s->m->hp.n_vocab);
        }
        return 0;
    }
    if (s->n_past + n > s->n_ctx)
        return rkm_err(RKM_ECTXFULL, "context is full: %d tokens held + %d new > n_ctx %d", s->n_past, n, s->n_ctx);
    int rc = s->rs_dirty ? rkm_session_truncate(s, s->n_past) : 0; /* the state back in step first */
    if (rc) return rc;
    atomic_store(&s->cancel, 0);
    double t0 = rkm_now();
    if (s->t_first < 0) s->t_first = t0;
    cache_mark mk;
    mark(s, &mk);
    int nv = s->m->hp.n_vocab;
    for (int i = 0; i < n && !rc; i += s->n_chunk) {
        int c = RKM_MIN(s->n_chunk, n - i);
        int is_last = i + c == n;
        s->have_logits = 0;
        if (all) rc = rkm_forward_chunk(s, ids + i, c, all + (size_t)i * nv, 1);
        else rc = rkm_forward_chunk(s, ids + i, c, is_last ? s->logits : NULL, 0);
        if (!rc) s->st.n_prompt += c;
    }
    if (!rc) {
        if (all) memcpy(s->logits, all + (size_t)(n - 1) * nv, sizeof(float) * (size_t)nv);
        s->have_logits = 1;
        if (last) memcpy(last, s->logits, sizeof(float) * (size_t)nv);
    }
    s->st.t_prompt_s += rkm_now() - t0;
    account(s, &mk);
    return rc;
}

int rkm_session_eval(rkm_session *s, const int32_t *ids, int n, float *logits)
{
    if (!s) return rkm_err(RKM_EINVAL, "eval: no session");
    return eval_chunks(s, ids, n, logits, NULL);
}

int32_t rkm_media_token(uint64_t key, int i)
{
    uint64_t h = key ^ ((uint64_t)(uint32_t)i * 0x9E3779B97F4A7C15ull);
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull; /* splitmix64's finaliser */
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    return -2 - (int32_t)(h & 0x3fffffff);
}

int rkm_session_n_pos(const rkm_session *s)
{
    return s->mpos && s->n_past ? s->mpos[(size_t)(s->n_past - 1) * RKM_MPOS + 4] : s->n_past;
}

int rkm_session_n_embd_in(const rkm_session *s) { return s->m->hp.n_embd * (1 + s->m->hp.n_deepstack); }

int rkm_session_eval_embd(rkm_session *s, const float *rows, int n, int nx, uint64_t key, int bidirectional,
                          float *logits)
{
    if (!s || !rows || n < 1 || nx < 0 || (nx > 0 && n % nx)) return rkm_err(RKM_EINVAL, "eval_embd: bad arguments");
    if (bidirectional && n > s->n_chunk)
        return rkm_err(RKM_EINVAL,
                       "an image of %d tokens is evaluated in one piece, and the session's prefill chunk holds %d "
                       "(n_chunk)",
                       n, s->n_chunk);
    if (s->n_past + n > s->n_ctx)
        return rkm_err(RKM_ECTXFULL, "context is full: %d tokens held + %d new > n_ctx %d", s->n_past, n, s->n_ctx);
    int rc = s->rs_dirty ? rkm_session_truncate(s, s->n_past) : 0;
    if (rc) return rc;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    if (!ids) return rkm_err(RKM_ENOMEM, "eval_embd: out of memory");
    for (int i = 0; i < n; i++) ids[i] = rkm_media_token(key, i);
    atomic_store(&s->cancel, 0);
    double t0 = rkm_now();
    if (s->t_first < 0) s->t_first = t0;
    cache_mark mk;
    mark(s, &mk);
    if (s->mpos) { /* multi-axis positions: the grid's rows and columns from the next text position */
        const int32_t p0 = (int32_t)rkm_session_n_pos(s), w = nx > 0 ? nx : n, h = n / w;
        for (int i = 0; i < n; i++) {
            int32_t *d = s->mpos + (size_t)(s->n_past + i) * RKM_MPOS;
            d[0] = p0;
            d[1] = p0 + i / w;
            d[2] = p0 + i % w;
            d[3] = 0;
            d[4] = p0 + RKM_MAX(w, h);
        }
    }
    const size_t stride = (size_t)rkm_session_n_embd_in(s);
    for (int i = 0; i < n && !rc; i += s->n_chunk) {
        int c = RKM_MIN(s->n_chunk, n - i), is_last = i + c == n;
        s->have_logits = 0;
        rc = rkm_forward_embd(s, rows + (size_t)i * stride, ids + i, c, is_last ? s->logits : NULL, bidirectional);
        if (!rc) s->st.n_prompt += c;
    }
    if (!rc) {
        s->have_logits = 1;
        if (logits) memcpy(logits, s->logits, sizeof(float) * (size_t)s->m->hp.n_vocab);
    }
    s->st.t_prompt_s += rkm_now() - t0;
    account(s, &mk);
    free(ids);
    return rc;
}

int rkm_session_eval_all(rkm_session *s, const int32_t *ids, int n, float *logits_all)
{
    if (!s || !logits_all) return rkm_err(RKM_EINVAL, "eval_all: bad arguments");
    return eval_chunks(s, ids, n, NULL, logits_all);
}

int rkm_session_set_sampler(rkm_session *s, const rkm_sampler_params *p)
{
    if (!s || !p) return rkm_err(RKM_EINVAL, "set_sampler: bad arguments");
    if (!(p->temperature >= 0) || p->top_k < 0 || !(p->top_p >= 0 && p->top_p <= 1) ||
        !(p->min_p >= 0 && p->min_p <= 1) || !(p->repeat_penalty >= 0))
        return rkm_err(RKM_EINVAL, "set_sampler: parameter out of range");
    s->p.sampler = *p;
    rkm_sampler_set_params(s->sampler, p);
    rkm_sampler_seed(s->sampler, p->seed);
    return 0;
}

int rkm_session_set_grammar(rkm_session *s, const char *gbnf)
{
    if (!s) return rkm_err(RKM_EINVAL, "set_grammar: no session");
    rkm_constraint *c = NULL;
    if (gbnf) {
        int rc = rkm_constraint_new(s->m, gbnf, &c);
        if (rc) return rc;
    }
    rkm_constraint_free(s->grammar);
    s->grammar = c;
    return 0;
}

int rkm_session_sample(rkm_session *s, int32_t *out_id)
{
    if (!s || !out_id) return rkm_err(RKM_EINVAL, "sample: bad arguments");
    if (!s->have_logits) return rkm_err(RKM_EINVAL, "sample: no logits (evaluate a prompt first)");
    if (s->grammar) {
        int rc = rkm_constraint_sample(s->grammar, s->sampler, s->logits, s->tokens, s->n_past, out_id, &s->st);
        if (rc) return rc;
    } else {
        *out_id = rkm_sampler_sample(s->sampler, s->logits, s->tokens, s->n_past);
    }
    if (!s->ttft_done && s->t_first >= 0) {
        s->st.ttft_s = rkm_now() - s->t_first;
        s->ttft_done = 1;
    }
    return 0;
}

int rkm_session_generate(rkm_session *s, int n_max, rkm_token_cb cb, void *user)
{
    if (!s) return rkm_err(RKM_EINVAL, "generate: no session");
    if (!s->have_logits) return rkm_err(RKM_EINVAL, "generate: evaluate a prompt first");
    atomic_store(&s->cancel, 0);
    int rc = 0;
    for (int i = 0; i < n_max; i++) {
        if (atomic_load(&s->cancel)) return rkm_err(RKM_ECANCELED, "canceled");
        int32_t id;
        if ((rc = rkm_session_sample(s, &id))) return rc;
        if (rkm_token_is_eog(s->m, id)) break;
        if (cb && cb(id, user)) break;
        if (s->n_past + 1 > s->n_ctx)
            return rkm_err(RKM_ECTXFULL, "context is full (n_ctx %d)", s->n_ctx);
        double t0 = rkm_now();
        cache_mark mk;
        mark(s, &mk);
        s->have_logits = 0;
        rc = rkm_forward_chunk(s, &id, 1, s->logits, 0);
        s->st.t_gen_s += rkm_now() - t0;
        account(s, &mk);
        if (rc) return rc;
        s->have_logits = 1;
        s->st.n_gen++;
    }
    return 0;
}

int rkm_session_logprobs(const rkm_session *s, int32_t id, int k, float *lp, int32_t *top_ids, float *top_lps)
{
    int nv = s->m->hp.n_vocab;
    if (!s->have_logits) return rkm_err(RKM_EINVAL, "logprobs: no logits");
    if (id < 0 || id >= nv || k < 0 || k > 64) return rkm_err(RKM_EINVAL, "logprobs: bad arguments");
    const float *l = s->logits;
    float mx = -INFINITY;
    for (int i = 0; i < nv; i++) mx = l[i] > mx ? l[i] : mx;
    double sum = 0;
    for (int i = 0; i < nv; i++) sum += exp((double)l[i] - mx);
    float lse = mx + (float)log(sum);
    *lp = l[id] - lse;
    /* the k best by insertion (k is small) */
    int n = 0;
    for (int i = 0; i < nv && k > 0; i++) {
        if (n == k && l[i] <= l[top_ids[n - 1]]) continue;
        int at = n < k ? n++ : k - 1;
        while (at > 0 && l[top_ids[at - 1]] < l[i]) {
            top_ids[at] = top_ids[at - 1];
            at--;
        }
        top_ids[at] = i;
    }
    for (int i = 0; i < n; i++) top_lps[i] = l[top_ids[i]] - lse;
    return 0;
}

int rkm_session_embedding(const rkm_session *s, float *out)
{
    if (!s || !out) return rkm_err(RKM_EINVAL, "embedding: bad arguments");
    if (!s->have_logits && s->n_past == 0) return rkm_err(RKM_EINVAL, "embedding: nothing evaluated yet");
    memcpy(out, s->embd, sizeof(float) * (size_t)s->m->hp.n_embd);
    return 0;
}

int rkm_session_record_router(rkm_session *s, int on)
{
    if (!s) return rkm_err(RKM_EINVAL, "record_router: no session");
    if (!on) {
        free(s->route_margin);
        s->route_margin = NULL;
        return 0;
    }
    if (s->route_margin) return 0;
    size_t cnt = (size_t)s->n_ctx * (size_t)s->m->hp.n_layer;
    s->route_margin = malloc(sizeof(float) * cnt);
    if (!s->route_margin) return rkm_err(RKM_ENOMEM, "record_router: out of memory for %zu margins", cnt);
    for (size_t i = 0; i < cnt; i++) s->route_margin[i] = NAN;
    return 0;
}

int rkm_session_router_margins(const rkm_session *s, int pos, int n, float *out)
{
    if (!s || !out || pos < 0 || n < 0 || pos + n > s->n_ctx)
        return rkm_err(RKM_EINVAL, "router_margins: positions [%d, %d) not in the context", pos, pos + n);
    if (!s->route_margin) return rkm_err(RKM_EINVAL, "router_margins: not recording (rkm_session_record_router)");
    memcpy(out, s->route_margin + (size_t)pos * s->m->hp.n_layer, sizeof(float) * (size_t)n * s->m->hp.n_layer);
    return 0;
}

int rkm_session_router_flip(rkm_session *s, int il, int pos)
{
    if (!s) return rkm_err(RKM_EINVAL, "router_flip: no session");
    if (il < 0) {
        s->flip_layer = s->flip_pos = -1;
        return 0;
    }
    if (il >= s->m->hp.n_layer || !s->m->layers[il].el || pos < 0 || pos >= s->n_ctx)
        return rkm_err(RKM_EINVAL, "router_flip: layer %d has no routed experts or position %d is out of the context",
                       il, pos);
    s->flip_layer = il;
    s->flip_pos = pos;
    return 0;
}

void rkm_session_stats(const rkm_session *s, rkm_stats *out) { *out = s->st; }

void rkm_session_stats_reset(rkm_session *s)
{
    memset(&s->st, 0, sizeof s->st);
    s->t_first = -1;
    s->ttft_done = 0;
}

/* Oldest position whose KV rows layer il still holds. */
static int kv_first(const rkm_session *s, int il)
{
    const rkm_kv_layer *kv = &s->kv[il];
    int lo = kv->ring ? RKM_MAX(0, s->n_past - kv->cap) : 0;
    return RKM_MAX(lo, kv->valid_from);
}

void rkm_session_rs_snapshot(rkm_session *s)
{
    const size_t bytes = sizeof(float) * s->m->rs_floats;
    int k = 0; /* the one at this position, else a free one, else the earliest */
    for (int i = 0; i < RKM_RS_SNAPSHOTS; i++) {
        if (s->snap[i].pos == s->n_past) {
            k = i;
            break;
        }
        if (s->snap[i].pos < s->snap[k].pos) k = i;
    }
    if (!s->snap[k].rs && !(s->snap[k].rs = malloc(bytes))) return; /* a later truncation evaluates more */
    memcpy(s->snap[k].rs, s->rs, bytes);
    s->snap[k].pos = s->n_past;
}

/* Forgets the snapshots past position n. */
static void rs_forget(rkm_session *s, int n)
{
    for (int i = 0; i < RKM_RS_SNAPSHOTS; i++)
        if (s->snap[i].pos > n) s->snap[i].pos = 0;
}

void rkm_session_rs_reset(rkm_session *s)
{
    memset(s->rs, 0, sizeof(float) * s->m->rs_floats);
    rs_forget(s, 0);
    s->rs_dirty = 0;
}

int rkm_session_truncate(rkm_session *s, int n)
{
    if (!s || n < 0 || n > s->n_past) return rkm_err(RKM_EINVAL, "truncate: %d not in [0, %d]", n, s ? s->n_past : 0);
    if (n == s->n_past && !s->rs_dirty) return 0;
    /* Sliding layers need the window before n. If the ring has overwritten
     * it, the tokens are evaluated again from position 0: a row's keys
     * depend on the windows of every layer below it, so no shorter replay
     * is exact. */
    int need = n;
    for (int il = 0; il < s->m->hp.n_layer; il++) {
        if (!s->m->layers[il].is_swa) continue;
        int lo = RKM_MAX(0, n - s->m->hp.sliding_window);
        if (lo < kv_first(s, il)) need = 0;
    }
    int k = -1;
    if (s->m->rs_floats) {
        /* a recurrent state cannot be cut back: from the latest snapshot
         * at or before n (else from 0), the tokens after it again */
        for (int i = 0; i < RKM_RS_SNAPSHOTS; i++)
            if (s->snap[i].pos > 0 && s->snap[i].pos <= need && s->snap[i].pos <= n &&
                (k < 0 || s->snap[i].pos > s->snap[k].pos))
                k = i;
        need = k < 0 ? 0 : s->snap[k].pos;
    }
    /* rows given as embeddings (an image) cannot be evaluated again */
    for (int i = need; i < n; i++)
        if (s->tokens[i] < 0)
            return rkm_err(RKM_EUNSUPPORTED,
                           "truncate to %d would evaluate positions %d.. again, and position %d holds an image's row; "
                           "start the sequence over",
                           n, need, i);
    if (s->m->rs_floats) {
        rs_forget(s, n);
        if (k >= 0) memcpy(s->rs, s->snap[k].rs, sizeof(float) * s->m->rs_floats);
        s->rs_dirty = 0;
    }
    s->n_past = n;
    s->have_logits = 0;
    if (need == 0)
        for (int il = 0; il < s->m->hp.n_layer; il++) s->kv[il].valid_from = 0;
    if (need < n) {
        int32_t *tail = malloc(sizeof(int32_t) * (size_t)(n - need));
        if (!tail) {
            s->rs_dirty = s->m->rs_floats > 0; /* a state restored to `need`, n_past n */
            return rkm_err(RKM_ENOMEM, "truncate: out of memory");
        }
        memcpy(tail, s->tokens + need, sizeof(int32_t) * (size_t)(n - need));
        s->n_past = need;
        int rc = eval_chunks(s, tail, n - need, NULL, NULL);
        free(tail);
        if (rc) return rc;
    }
    return 0;
}

/* Copies rows [first, n_past) of one head's K or V run from src to dst
 * (head-major, so runs of consecutive rows are contiguous in both unless a
 * ring wraps: then row by row). */
static void copy_rows(const rkm_kv_layer *dk, const rkm_kv_layer *sk, int v, int kh, int first, int n_past)
{
    int hd = v ? (sk->v_dim ? sk->hd_v : sk->hd_k) : sk->hd_k;
    for (int p = first; p < n_past;) {
        int rs = sk->ring ? p % sk->cap : p, rd = dk->ring ? p % dk->cap : p;
        int run = n_past - p;
        if (sk->ring) run = RKM_MIN(run, sk->cap - rs);
        if (dk->ring) run = RKM_MIN(run, dk->cap - rd);
        rkm_f16 *d = v ? rkm_kv_v(dk, kh, rd) : rkm_kv_k(dk, kh, rd);
        const rkm_f16 *s = v ? rkm_kv_v(sk, kh, rs) : rkm_kv_k(sk, kh, rs);
        memcpy(d, s, sizeof(rkm_f16) * (size_t)hd * (size_t)run);
        p += run;
    }
}

int rkm_session_copy(rkm_session *dst, const rkm_session *src)
{
    if (!dst || !src || dst == src || dst->m != src->m)
        return rkm_err(RKM_EINVAL, "session copy: two sessions of one model needed");
    if (src->n_past > dst->n_ctx)
        return rkm_err(RKM_ECTXFULL, "session copy: %d tokens do not fit in n_ctx %d", src->n_past, dst->n_ctx);
    const rkm_hparams *hp = &src->m->hp;
    for (int il = 0; il < hp->n_layer; il++) {
        const rkm_kv_layer *sk = &src->kv[il];
        rkm_kv_layer *dk = &dst->kv[il];
        /* the rows src holds; a smaller ring in dst keeps the last of them
         * (its window and a chunk: all that later queries see) */
        int first = kv_first(src, il);
        if (dk->ring) first = RKM_MAX(first, src->n_past - dk->cap);
        for (int kh = 0; kh < sk->n_kv; kh++) {
            copy_rows(dk, sk, 0, kh, first, src->n_past);
            if (sk->v_dim) copy_rows(dk, sk, 1, kh, first, src->n_past);
        }
        dk->valid_from = first;
    }
    if (src->m->rs_floats) {
        memcpy(dst->rs, src->rs, sizeof(float) * src->m->rs_floats);
        rs_forget(dst, 0); /* its snapshots were another conversation's */
        dst->rs_dirty = src->rs_dirty;
    }
    memcpy(dst->tokens, src->tokens, sizeof(int32_t) * (size_t)src->n_past);
    if (src->mpos) memcpy(dst->mpos, src->mpos, sizeof(int32_t) * RKM_MPOS * (size_t)src->n_past);
    memcpy(dst->logits, src->logits, sizeof(float) * (size_t)hp->n_vocab);
    memcpy(dst->embd, src->embd, sizeof(float) * (size_t)hp->n_embd);
    dst->n_past = src->n_past;
    dst->have_logits = src->have_logits;
    return 0;
}

/* ------------------------------------------------------- save / load */

typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom;
} wbuf;

static void put(wbuf *b, const void *d, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_u32(wbuf *b, uint32_t v) { put(b, &v, 4); }

int rkm_session_save(const rkm_session *s, const char *path)
{
    if (!s || !path) return rkm_err(RKM_EINVAL, "session save: bad arguments");
    const rkm_hparams *hp = &s->m->hp;
    wbuf b = {0};
    put(&b, "RKMSESS1", 8);
    put_u32(&b, 1);
    put_u32(&b, (uint32_t)hp->n_layer);
    put(&b, &s->m->model_id, 8);
    put_u32(&b, (uint32_t)s->n_past);
    put_u32(&b, (uint32_t)hp->n_vocab);
    put_u32(&b, (uint32_t)hp->n_embd);
    put_u32(&b, (uint32_t)s->have_logits);
    put(&b, s->tokens, sizeof(int32_t) * (size_t)s->n_past);
    put(&b, s->logits, sizeof(float) * (size_t)hp->n_vocab);
    put(&b, s->embd, sizeof(float) * (size_t)hp->n_embd);
    for (int il = 0; il < hp->n_layer; il++) {
        const rkm_kv_layer *kv = &s->kv[il];
        int first = kv_first(s, il);
        put_u32(&b, (uint32_t)first);
        put_u32(&b, (uint32_t)kv->k_dim);
        put_u32(&b, (uint32_t)kv->v_dim);
        for (int p = first; p < s->n_past; p++) {
            int row = kv->ring ? p % kv->cap : p;
            for (int h = 0; h < kv->n_kv; h++) put(&b, rkm_kv_k(kv, h, row), sizeof(rkm_f16) * (size_t)kv->hd_k);
            for (int h = 0; kv->v_dim && h < kv->n_kv; h++) put(&b, rkm_kv_v(kv, h, row), sizeof(rkm_f16) * (size_t)kv->hd_v);
        }
    }
    if (s->m->rs_floats) { /* the recurrent layers' state after the last position, then its snapshots */
        put_u32(&b, (uint32_t)s->m->rs_floats);
        put(&b, s->rs, sizeof(float) * s->m->rs_floats);
        uint32_t ns = 0;
        for (int i = 0; i < RKM_RS_SNAPSHOTS; i++) ns += s->snap[i].pos > 0;
        put_u32(&b, ns);
        for (int i = 0; i < RKM_RS_SNAPSHOTS; i++)
            if (s->snap[i].pos > 0) {
                put_u32(&b, (uint32_t)s->snap[i].pos);
                put(&b, s->snap[i].rs, sizeof(float) * s->m->rs_floats);
            }
    }
    if (s->mpos) put(&b, s->mpos, sizeof(int32_t) * RKM_MPOS * (size_t)s->n_past);
    if (b.oom) {
        free(b.p);
        return rkm_err(RKM_ENOMEM, "session save: out of memory");
    }
    uint64_t h = rkm_hash(b.p, b.n);
    put(&b, &h, 8);
    /* a session holds a conversation: readable by its owner only */
    int rc = b.oom ? rkm_err(RKM_ENOMEM, "session save: out of memory") : rkm_write_file_atomic_mode(path, b.p, b.n, 0600);
    free(b.p);
    return rc;
}

typedef struct {
    const uint8_t *p;
    size_t n, off;
} rbuf;

static int get(rbuf *b, void *d, size_t n)
{
    if (n > b->n - b->off) return -1;
    memcpy(d, b->p + b->off, n);
    b->off += n;
    return 0;
}

static int get_u32(rbuf *b, uint32_t *v) { return get(b, v, 4); }

int rkm_session_load(rkm_session *s, const char *path)
{
    if (!s || !path) return rkm_err(RKM_EINVAL, "session load: bad arguments");
    const rkm_hparams *hp = &s->m->hp;
    size_t len;
    uint8_t *data = (uint8_t *)rkm_read_file(path, &len);
    if (!data) return rkm_err_prefix(RKM_EIO, "session load");
    int rc = RKM_EFORMAT;
    rbuf b = {data, len, 0};
    char magic[8];
    uint32_t ver, nl, n_past, nv, ne, have;
    uint64_t id, h;
    if (len < 16 + 8 || get(&b, magic, 8) || memcmp(magic, "RKMSESS1", 8)) {
        rkm_err(RKM_EFORMAT, "%s: not an rkmojo session file", path);
        goto out;
    }
    memcpy(&h, data + len - 8, 8);
    if (rkm_hash(data, len - 8) != h) {
        rc = rkm_err(RKM_ECHECKSUM, "%s: checksum mismatch", path);
        goto out;
    }
    b.n = len - 8;
    if (get_u32(&b, &ver) || get_u32(&b, &nl) || get(&b, &id, 8) || get_u32(&b, &n_past) || get_u32(&b, &nv) ||
        get_u32(&b, &ne) || get_u32(&b, &have)) {
        rkm_err(RKM_EFORMAT, "%s: truncated header", path);
        goto out;
    }
    if (ver != 1 || nl != (uint32_t)hp->n_layer || nv != (uint32_t)hp->n_vocab || ne != (uint32_t)hp->n_embd ||
        id != s->m->model_id) {
        rkm_err(RKM_EFORMAT, "%s: saved from another model or version", path);
        goto out;
    }
    if (n_past > (uint32_t)s->n_ctx) {
        rc = rkm_err(RKM_ECTXFULL, "%s: %u tokens do not fit in n_ctx %d", path, n_past, s->n_ctx);
        goto out;
    }
    if (get(&b, s->tokens, sizeof(int32_t) * n_past) || get(&b, s->logits, sizeof(float) * nv) ||
        get(&b, s->embd, sizeof(float) * ne)) {
        rkm_err(RKM_EFORMAT, "%s: truncated", path);
        goto out;
    }
    for (uint32_t i = 0; i < n_past; i++)
        if (s->tokens[i] == -1 || s->tokens[i] >= hp->n_vocab) { /* below -1: an image's row (rkm_media_token) */
            rkm_err(RKM_EFORMAT, "%s: bad token id", path);
            goto out;
        }
    for (int il = 0; il < hp->n_layer; il++) {
        rkm_kv_layer *kv = &s->kv[il];
        uint32_t first, kd, vd;
        if (get_u32(&b, &first) || get_u32(&b, &kd) || get_u32(&b, &vd) || kd != (uint32_t)kv->k_dim ||
            vd != (uint32_t)kv->v_dim || first > n_past) {
            rkm_err(RKM_EFORMAT, "%s: bad layer %d header", path, il);
            goto out;
        }
        /* full layers need every row, sliding ones the last window */
        int swa = s->m->layers[il].is_swa;
        if (!swa && first != 0) {
            rkm_err(RKM_EFORMAT, "%s: layer %d lacks rows", path, il);
            goto out;
        }
        if (swa && n_past - first < RKM_MIN(n_past, (uint32_t)hp->sliding_window)) {
            rkm_err(RKM_EFORMAT, "%s: layer %d lacks window rows", path, il);
            goto out;
        }
        size_t rowb = sizeof(rkm_f16) * (kd + vd);
        if ((size_t)(n_past - first) * rowb > b.n - b.off) {
            rkm_err(RKM_EFORMAT, "%s: truncated KV", path);
            goto out;
        }
        kv->valid_from = (int)first;
        for (uint32_t p = first; p < n_past; p++) {
            int row = kv->ring ? (int)(p % (uint32_t)kv->cap) : (int)p;
            for (int kh = 0; kh < kv->n_kv; kh++) get(&b, rkm_kv_k(kv, kh, row), sizeof(rkm_f16) * (size_t)kv->hd_k);
            for (int kh = 0; kv->v_dim && kh < kv->n_kv; kh++) get(&b, rkm_kv_v(kv, kh, row), sizeof(rkm_f16) * (size_t)kv->hd_v);
        }
    }
    rs_forget(s, 0);
    if (s->m->rs_floats) {
        uint32_t nf, ns;
        if (get_u32(&b, &nf) || nf != s->m->rs_floats || get(&b, s->rs, sizeof(float) * nf) || get_u32(&b, &ns) ||
            ns > RKM_RS_SNAPSHOTS) {
            rkm_err(RKM_EFORMAT, "%s: no recurrent state of this model", path);
            goto out;
        }
        int bad = 0;
        for (uint32_t i = 0; i < nf; i++) bad |= !isfinite(s->rs[i]);
        for (uint32_t k = 0; k < ns && !bad; k++) {
            uint32_t pos;
            if (!s->snap[k].rs && !(s->snap[k].rs = malloc(sizeof(float) * nf))) {
                rc = rkm_err(RKM_ENOMEM, "%s: out of memory for a state snapshot", path);
                goto out;
            }
            if (get_u32(&b, &pos) || pos < 1 || pos > n_past || get(&b, s->snap[k].rs, sizeof(float) * nf)) {
                rkm_err(RKM_EFORMAT, "%s: bad state snapshot %u", path, k);
                goto out;
            }
            for (uint32_t i = 0; i < nf; i++) bad |= !isfinite(s->snap[k].rs[i]);
            s->snap[k].pos = (int)pos;
        }
        if (bad) {
            rkm_err(RKM_EFORMAT, "%s: the recurrent state holds a value that is not a finite number", path);
            goto out;
        }
    }
    if (s->mpos) {
        if (get(&b, s->mpos, sizeof(int32_t) * RKM_MPOS * n_past)) {
            rkm_err(RKM_EFORMAT, "%s: truncated positions", path);
            goto out;
        }
        for (size_t i = 0; i < (size_t)RKM_MPOS * n_past; i++)
            if (s->mpos[i] < 0 || s->mpos[i] > s->n_ctx) {
                rkm_err(RKM_EFORMAT, "%s: a position out of range", path);
                goto out;
            }
    }
    if (b.off != b.n) {
        rkm_err(RKM_EFORMAT, "%s: trailing bytes", path);
        goto out;
    }
    s->n_past = (int)n_past;
    s->have_logits = have != 0;
    s->rs_dirty = 0;
    rc = 0;
out:
    if (rc) {
        rs_forget(s, 0);
        s->n_past = 0;
        s->have_logits = 0;
        for (int il = 0; il < hp->n_layer; il++) s->kv[il].valid_from = 0;
    }
    free(data);
    return rc;
}
