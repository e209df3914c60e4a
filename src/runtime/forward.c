/*
 * forward.c - one chunk of the transformer forward pass: embeddings, every
 * layer (attention, grouped-query or latent, or a recurrent layer
 * (recurrent.c), then the dense / routed feed-forward of the
 * architecture), final norm and LM head.
 *
 * The chunk's rows go through each op together (matmuls with m = rows), so
 * prefill runs at matrix-matrix speed and routed experts are computed once
 * per chunk (moe.c). Decoding is a chunk of one row.
 *
 * Threads: the session's thread, holding model->lock for the whole chunk
 * (the pool and the expert cache are the model's). All buffers are the
 * session's preallocated scratch.
 */
#include <math.h>

#include "runtime/model.h"

static void norm_rows(float *out, const float *x, const float *w, int rows, int n, float eps)
{
    for (int r = 0; r < rows; r++) rkm_rmsnorm(out + (size_t)r * n, x + (size_t)r * n, w, n, eps);
}

static void add_bias(float *y, const float *b, int rows, int n)
{
    if (!b) return;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < n; c++) y[(size_t)r * n + c] += b[c];
}

/* What a block's output is scaled by before its residual add (Granite's
 * residual_scale, else 1). */
static float block_scale(const rkm_hparams *hp) { return hp->residual_scale > 0 ? hp->residual_scale : 1.0f; }

static void trace(rkm_session *s, int il, const char *what, const float *x, int rows, int cols)
{
    if (s->trace) s->trace(s->trace_user, il, what, x, rows, cols);
}

/* RoPE of the row at position row of sequence q: at its multi-axis
 * position where the model has one (q->mpos), else at row. */
static void rope_row(const rkm_rope *r, const rkm_session *q, int row, float *x, int n_heads, int hd)
{
    if (q->mpos && r->multi) rkm_rope_apply4(r, x, n_heads, hd, q->mpos + (size_t)row * RKM_MPOS);
    else rkm_rope_apply(r, x, n_heads, hd, row);
}

/* Attention block of layer il for the chunk's rows (each segment's rows
 * at its positions, over its sequence's cache): reads s->cur, writes the
 * projected output into s->tmp. */
static int attention_block(rkm_session *s, int il, const rkm_seg *seg, int nseg, int n)
{
    int rc;
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const rkm_layer *L = &m->layers[il];
    rkm_pool *pool = m->pool;
    int nh = hp->n_head, hd = L->hd_k, hv = L->hd_v, nkv = L->n_kv;
    int qd = nh * hd, kd = nkv * hd, vd = nkv * hv;
    float eps = hp->rms_eps;

    if (n <= RKM_MM_MULTI_MAX_ROWS) {
        rkm_mm_task t[3] = {rkm_mm_task_of(&L->wq, s->cur, n, s->q), rkm_mm_task_of(&L->wk, s->cur, n, s->k),
                            rkm_mm_task_of(&L->wv, s->cur, n, s->v)};
        rkm_mm_multi(pool, t, L->v_from_k ? 2 : 3);
    } else if ((rc = rkm_model_mm(m, &L->wq, s->cur, n, s->q)) || (rc = rkm_model_mm(m, &L->wk, s->cur, n, s->k)) ||
               (!L->v_from_k && (rc = rkm_model_mm(m, &L->wv, s->cur, n, s->v)))) {
        return rc;
    }
    if (L->v_from_k) memcpy(s->v, s->k, sizeof(float) * (size_t)n * kd);
    if (hp->attn_q_gate) /* each head's query, then its gate: the gates aside, the queries packed */
        for (int r = 0; r < n; r++)
            for (int h = 0; h < nh; h++) {
                const float *src = s->q + ((size_t)r * nh + h) * 2 * hd;
                memcpy(s->gate + ((size_t)r * nh + h) * hd, src + hd, sizeof(float) * (size_t)hd);
                memmove(s->q + ((size_t)r * nh + h) * hd, src, sizeof(float) * (size_t)hd); /* never ahead of src */
            }
    add_bias(s->q, L->bq, n, qd);
    add_bias(s->k, L->bk, n, kd);
    add_bias(s->v, L->bv, n, vd);
    for (int i = 0; i < nseg; i++)
        for (int j = 0; j < seg[i].n; j++) {
            int r = seg[i].row0 + j;
            float *q = s->q + (size_t)r * qd, *k = s->k + (size_t)r * kd, *v = s->v + (size_t)r * vd;
            if (hp->qk_norm == RKM_QK_NORM_HEAD) {
                for (int h = 0; h < nh; h++) rkm_rmsnorm(q + (size_t)h * hd, q + (size_t)h * hd, L->q_norm, hd, eps);
                for (int h = 0; h < nkv; h++) rkm_rmsnorm(k + (size_t)h * hd, k + (size_t)h * hd, L->k_norm, hd, eps);
            } else if (hp->qk_norm == RKM_QK_NORM_FULL) {
                rkm_rmsnorm(q, q, L->q_norm, qd, eps);
                rkm_rmsnorm(k, k, L->k_norm, kd, eps);
            }
            if (hp->v_norm)
                for (int h = 0; h < nkv; h++) rkm_rmsnorm(v + (size_t)h * hv, v + (size_t)h * hv, NULL, hv, eps);
            if (L->rope.dim > 0) {
                rope_row(&L->rope, seg[i].s, seg[i].pos0 + j, q, nh, hd);
                rope_row(&L->rope, seg[i].s, seg[i].pos0 + j, k, nkv, hd);
            }
        }
    for (int i = 0; i < nseg; i++) {
        const size_t r0 = (size_t)seg[i].row0;
        rkm_kv_layer *kv = &seg[i].s->kv[il];
        rkm_kv_store(kv, s->k + r0 * kd, s->v + r0 * vd, seg[i].pos0, seg[i].n);
        rkm_attention(s, kv, il, seg[i].pos0, seg[i].n, s->q + r0 * qd, s->att + r0 * nh * hv);
    }
    if (hp->attn_q_gate)
        for (size_t i = 0; i < (size_t)n * nh * hv; i++) s->att[i] /= 1.0f + expf(-s->gate[i]);
    if ((rc = rkm_model_mm(m, &L->wo, s->att, n, s->tmp))) return rc;
    add_bias(s->tmp, L->bo, n, hp->n_embd);
    if (L->post_attn_norm) norm_rows(s->tmp, s->tmp, L->post_attn_norm, n, hp->n_embd, eps);
    return 0;
}

/* y[r][h] (heads of w's stack, y_head floats apart in rows of ldy) =
 * head h of w times x[r][h] (heads x_head floats apart in rows of
 * x_row): decode as one pool job over every head (s->mla_tasks), prefill
 * head by head through a gather into s->mla. */
static void heads_mm(rkm_session *s, const rkm_mat *w, const float *x, int x_row, int x_head, int n, float *y, int ldy,
                     int y_head)
{
    const int nh = w->heads;
    const int64_t n_in = w->n_in;
    if (n <= RKM_MM_MULTI_MAX_ROWS) {
        rkm_mm_task *t = s->mla_tasks;
        for (int h = 0; h < nh; h++) {
            const float *xh = x + (size_t)h * x_head;
            if (n > 1) { /* the head's rows, contiguous */
                float *g = s->mla + (size_t)h * n * n_in;
                for (int r = 0; r < n; r++) memcpy(g + (size_t)r * n_in, xh + (size_t)r * x_row, sizeof(float) * (size_t)n_in);
                xh = g;
            }
            rkm_mat wh = rkm_mat_head(w, h);
            t[h] = rkm_mm_task_of(&wh, xh, n, y + (size_t)h * y_head);
            t[h].ldy = ldy;
        }
        rkm_mm_multi(s->m->pool, t, nh);
        return;
    }
    for (int h = 0; h < nh; h++) {
        for (int r = 0; r < n; r++)
            memcpy(s->mla + (size_t)r * n_in, x + (size_t)r * x_row + (size_t)h * x_head, sizeof(float) * (size_t)n_in);
        rkm_mat wh = rkm_mat_head(w, h);
        rkm_matmul(s->m->pool, wh.type, wh.data, wh.n_in, wh.n_out, s->mla, n, y + (size_t)h * y_head, ldy);
    }
}

/* Multi-head latent attention (deepseek2) of layer il, in the absorbed
 * form llama.cpp runs: the cache row of a position is its normed latent
 * and its rotated key, shared by all heads (one KV head); each head's
 * no-RoPE query part is taken into the latent space by attn_k_b, so its
 * scores are products with the cached rows; the probabilities' sum of
 * latents leaves through the head's attn_v_b, then attn_output. Reads
 * s->cur, writes s->tmp. Buffers: s->att holds the query projection until
 * the attention overwrites it with the heads' latents; s->q the absorbed
 * queries, then the heads' values. */
static int mla_block(rkm_session *s, int il, const rkm_seg *seg, int nseg, int n)
{
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const rkm_layer *L = &m->layers[il];
    const int nh = hp->n_head, kq = hp->head_dim_k_mla, rd = hp->rope_dim, nope = kq - rd;
    const int lat = hp->kv_lora_rank, dk = lat + rd, vm = hp->head_dim_v_mla;
    const float eps = hp->rms_eps;
    float *qp = s->att, *kva = s->k;
    int rc;
    const rkm_mat *wq1 = L->wq_a.data ? &L->wq_a : &L->wq;
    float *q1 = L->wq_a.data ? s->mla : qp;
    if (n <= RKM_MM_MULTI_MAX_ROWS) {
        rkm_mm_task t[2] = {rkm_mm_task_of(wq1, s->cur, n, q1), rkm_mm_task_of(&L->wkv_a, s->cur, n, kva)};
        rkm_mm_multi(m->pool, t, 2);
    } else if ((rc = rkm_model_mm(m, wq1, s->cur, n, q1)) || (rc = rkm_model_mm(m, &L->wkv_a, s->cur, n, kva))) {
        return rc;
    }
    if (L->wq_a.data) { /* the q LoRA: norm, then up */
        norm_rows(q1, q1, L->q_a_norm, n, hp->q_lora_rank, eps);
        if ((rc = rkm_model_mm(m, &L->wq_b, q1, n, qp))) return rc;
    }
    for (int i = 0; i < nseg; i++)
        for (int j = 0; j < seg[i].n; j++) {
            int r = seg[i].row0 + j;
            float *k = kva + (size_t)r * dk;
            rkm_rmsnorm(k, k, L->kv_a_norm, lat, eps);
            rkm_rope_apply(&L->rope, k + lat, 1, rd, seg[i].pos0 + j);
            rkm_rope_apply(&L->rope, qp + (size_t)r * nh * kq + nope, nh, kq, seg[i].pos0 + j);
        }
    for (int i = 0; i < nseg; i++)
        rkm_kv_store(&seg[i].s->kv[il], kva + (size_t)seg[i].row0 * dk, NULL, seg[i].pos0, seg[i].n);
    /* absorbed queries: [attn_k_b . q_nope, q_pe] per head */
    heads_mm(s, &L->wk_b, qp, nh * kq, kq, n, s->q, nh * dk, dk);
    for (int r = 0; r < n; r++)
        for (int h = 0; h < nh; h++)
            memcpy(s->q + ((size_t)r * nh + h) * dk + lat, qp + ((size_t)r * nh + h) * kq + nope, sizeof(float) * (size_t)rd);
    for (int i = 0; i < nseg; i++) {
        const size_t r0 = (size_t)seg[i].row0;
        rkm_attention(s, &seg[i].s->kv[il], il, seg[i].pos0, seg[i].n, s->q + r0 * nh * dk, s->att + r0 * nh * lat);
    }
    /* the heads' values from their latents, then the output projection */
    heads_mm(s, &L->wv_b, s->att, nh * lat, lat, n, s->q, nh * vm, vm);
    return rkm_model_mm(m, &L->wo, s->q, n, s->tmp);
}

/* Feed-forward of layer il on the residual s->x; adds its output. */
static int ffn_block(rkm_session *s, int il, int n)
{
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const rkm_layer *L = &m->layers[il];
    int E = hp->n_embd, rc;
    float eps = hp->rms_eps;
    size_t rowsz = (size_t)n * E;
    int moe = L->el != NULL;

    if (!hp->gemma4_norms) {
        norm_rows(s->cur, s->x, L->ffn_norm, n, E, eps);
        if (moe) {
            if ((rc = rkm_moe_forward(s, il, s->cur, s->cur, n, s->ffn))) return rc;
        } else if ((rc = rkm_ffn_dense(s, &L->ffn_gate, &L->ffn_up, &L->ffn_down, s->cur, n, s->ffn, s->ge, s->ue))) {
            return rc;
        }
        const float rsc = block_scale(hp);
        for (size_t i = 0; i < rowsz; i++) s->x[i] += s->ffn[i] * rsc;
        return 0;
    }
    /* gemma4: dense MLP and routed experts side by side, sandwich norms.
     * Both read the post-attention residual x, so the experts are routed
     * (and their reads started) first, and the dense MLP runs while they
     * are read. */
    if (moe) {
        /* router input: rms_norm(x) / sqrt(n_embd) * scale */
        float inv = 1.0f / sqrtf((float)E);
        norm_rows(s->cur, s->x, NULL, n, E, eps);
        for (int r = 0; r < n; r++) {
            float *c = s->cur + (size_t)r * E;
            for (int i = 0; i < E; i++) {
                c[i] *= inv;
                if (L->router_scale) c[i] *= L->router_scale[i];
            }
        }
        if ((rc = rkm_moe_route(s, il, s->cur, n))) return rc;
        norm_rows(s->cur2, s->x, L->pre_ffw_norm_2, n, E, eps);
    }
    norm_rows(s->cur, s->x, L->ffn_norm, n, E, eps);
    if ((rc = rkm_ffn_dense(s, &L->ffn_gate, &L->ffn_up, &L->ffn_down, s->cur, n, s->ffn, s->ge, s->ue))) {
        if (moe) rkm_expert_cache_release(m->cache, il); /* the routed experts' pins */
        return rc;
    }
    if (moe) {
        if (L->post_ffw_norm_1) norm_rows(s->ffn, s->ffn, L->post_ffw_norm_1, n, E, eps);
        if ((rc = rkm_moe_experts(s, il, s->cur2, n, s->ffn2))) return rc;
        if (L->post_ffw_norm_2) norm_rows(s->ffn2, s->ffn2, L->post_ffw_norm_2, n, E, eps);
        for (size_t i = 0; i < rowsz; i++) s->ffn[i] += s->ffn2[i];
    }
    norm_rows(s->ffn, s->ffn, L->post_ffw_norm, n, E, eps);
    for (size_t i = 0; i < rowsz; i++) s->x[i] = (s->x[i] + s->ffn[i]) * L->out_scale;
    return 0;
}

static void lm_head(rkm_session *s, const float *h, int rows, float *logits)
{
    const rkm_model *m = s->m;
    rkm_matmul_mat(m->pool, &m->output, h, rows, logits);
    float c = m->hp.final_softcap;
    if (m->hp.logit_scale > 0) { /* Granite */
        size_t nv = (size_t)rows * m->hp.n_vocab;
        for (size_t i = 0; i < nv; i++) logits[i] /= m->hp.logit_scale;
    }
    if (c > 0) {
        size_t nv = (size_t)rows * m->hp.n_vocab;
        for (size_t i = 0; i < nv; i++) logits[i] = c * tanhf(logits[i] / c);
    }
}

/* The rows' input is ids looked up in the embedding table, or with embd
 * the rows given (n x n_embd x (1 + n_deepstack), unscaled: the input,
 * then the rows added after the first layers) and ids only recorded;
 * full: the rows attend to each other both ways (rkm_forward_embd). */
static int forward(rkm_session *s, const rkm_seg *seg, int nseg, const int32_t *ids, const float *embd, int n,
                   float *logits, int all_rows, int full)
{
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    int E = hp->n_embd, rc = 0;
    if (n <= 0 || n > s->n_chunk || nseg < 1 || (all_rows && nseg != 1))
        return rkm_err(RKM_EINVAL, "forward: %d rows in %d sequences (chunk %d)", n, nseg, s->n_chunk);
    for (int i = 0, row = 0; i < nseg; row += seg[i++].n) {
        const rkm_session *q = seg[i].s;
        if (seg[i].row0 != row || seg[i].n < 1 || q->m != m || seg[i].pos0 != q->n_past)
            return rkm_err(RKM_EINVAL, "forward: bad segment %d", i);
        if (seg[i].pos0 + seg[i].n > q->n_ctx)
            return rkm_err(RKM_ECTXFULL, "context is full: %d tokens held, %d more do not fit in n_ctx %d", seg[i].pos0,
                           seg[i].n, q->n_ctx);
        if (seg[i].pos0 + seg[i].n > s->n_ctx)
            return rkm_err(RKM_EINVAL, "forward: position %d beyond the scratch's %d", seg[i].pos0 + seg[i].n, s->n_ctx);
        if (i == nseg - 1 && row + seg[i].n != n) return rkm_err(RKM_EINVAL, "forward: segments do not cover the rows");
    }
    for (int r = 0; r < n && !embd; r++)
        if (ids[r] < 0 || ids[r] >= hp->n_vocab)
            return rkm_err(RKM_EINVAL, "token id %d out of range (vocabulary %d)", ids[r], hp->n_vocab);

    if ((rc = rkm_model_check(m))) return rc;
    pthread_mutex_lock(&m->lock);
    s->att_full = full;
    size_t rb = rkm_type_row_bytes(m->tok_embd_type, E);
    float es = hp->embed_scale > 0 ? hp->embed_scale : 1.0f;
    /* an input row: the embedding, then the deep-stack rows (Qwen3-VL) */
    const size_t stride = (size_t)E * (1 + (size_t)hp->n_deepstack);
    for (int r = 0; r < n && embd; r++) memcpy(s->x + (size_t)r * E, embd + r * stride, sizeof(float) * (size_t)E);
    /* text rows' multi-axis positions: each axis the text position, which
     * follows the row before (an image's rows got theirs from
     * rkm_session_eval_embd) */
    for (int i = 0; i < nseg && !embd; i++) {
        int32_t *mp = seg[i].s->mpos;
        for (int j = 0; mp && j < seg[i].n; j++) {
            const int row = seg[i].pos0 + j;
            const int32_t p = row ? mp[(size_t)(row - 1) * RKM_MPOS + 4] : 0;
            int32_t *d = mp + (size_t)row * RKM_MPOS;
            d[0] = d[1] = d[2] = p;
            d[3] = 0;
            d[4] = p + 1;
        }
    }
    for (int r = 0; r < n && !embd; r++) {
        float *x = s->x + (size_t)r * E;
        const uint8_t *row = (const uint8_t *)m->tok_embd + (size_t)ids[r] * rb;
        if (m->embd_pread) {
            if ((rc = rkm_model_dir_pread(m->md, m->embd_off + (uint64_t)ids[r] * rb, s->embd_row, rb))) {
                rkm_err_prefix(rc, "token %d's embedding", ids[r]);
                goto out;
            }
            row = s->embd_row;
        }
        rkm_dequantize_row(m->tok_embd_type, row, x, E);
        if (es != 1.0f)
            for (int i = 0; i < E; i++) x[i] *= es;
    }
    trace(s, -1, "embd", s->x, n, E);
    /* a sequence from its start: recurrent layers from a zero state */
    for (int i = 0; i < nseg && m->rs_floats; i++)
        if (seg[i].pos0 == 0) rkm_session_rs_reset(seg[i].s);

    for (int il = 0; il < hp->n_layer; il++) {
        const rkm_layer *L = &m->layers[il];
        norm_rows(s->cur, s->x, L->attn_norm, n, E, hp->rms_eps);
        if ((rc = L->recurrent ? rkm_recurrent_block(s, il, seg, nseg, n)
                  : L->mla     ? mla_block(s, il, seg, nseg, n)
                               : attention_block(s, il, seg, nseg, n)))
            goto out;
        const float rsc = block_scale(hp);
        for (size_t i = 0; i < (size_t)n * E; i++) s->x[i] += s->tmp[i] * rsc;
        trace(s, il, "attn_out", s->x, n, E);
        if ((rc = ffn_block(s, il, n))) goto out;
        trace(s, il, "layer_out", s->x, n, E);
        if (embd && il < hp->n_deepstack) { /* the image's deep-stack row of this layer */
            for (int r = 0; r < n; r++) {
                const float *ds = embd + r * stride + (size_t)(il + 1) * E;
                float *x = s->x + (size_t)r * E;
                for (int e = 0; e < E; e++) x[e] += ds[e];
            }
            trace(s, il, "deepstack_out", s->x, n, E);
        }
        if (atomic_load(&s->cancel)) {
            rc = rkm_err(RKM_ECANCELED, "canceled");
            goto out;
        }
    }
    /* final norm: all rows when every row's logits are wanted, else each
     * sequence's last row */
    int rows = all_rows ? n : nseg;
    if (all_rows) norm_rows(s->cur, s->x, m->output_norm, n, E, hp->rms_eps);
    else
        for (int i = 0; i < nseg; i++)
            norm_rows(s->cur + (size_t)i * E, s->x + (size_t)(seg[i].row0 + seg[i].n - 1) * E, m->output_norm, 1, E,
                      hp->rms_eps);
    trace(s, hp->n_layer, "final_norm", s->cur, rows, E);
    for (int i = 0; i < nseg; i++)
        memcpy(seg[i].s->embd, s->cur + (size_t)(all_rows ? n - 1 : i) * E, sizeof(float) * (size_t)E);
    if (logits) lm_head(s, s->cur, rows, logits);
    if ((rc = rkm_model_check(m))) goto out; /* weights damaged under us: the results are wrong */
    for (int i = 0; i < nseg; i++) {
        memcpy(seg[i].s->tokens + seg[i].pos0, ids + seg[i].row0, sizeof(int32_t) * (size_t)seg[i].n);
        seg[i].s->n_past = seg[i].pos0 + seg[i].n;
        if (m->rs_floats && seg[i].n > 1) rkm_session_rs_snapshot(seg[i].s);
    }
out:
    /* a chunk that failed part-way left recurrent states ahead of n_past */
    for (int i = 0; rc && m->rs_floats && i < nseg; i++) seg[i].s->rs_dirty = 1;
    s->att_full = 0;
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int rkm_forward_rows(rkm_session *s, const rkm_seg *seg, int nseg, const int32_t *ids, int n, float *logits,
                     int all_rows)
{
    return forward(s, seg, nseg, ids, NULL, n, logits, all_rows, 0);
}

int rkm_forward_chunk(rkm_session *s, const int32_t *ids, int n, float *logits, int all_rows)
{
    rkm_seg one = {s, 0, n, s->n_past};
    return forward(s, &one, 1, ids, NULL, n, logits, all_rows, 0);
}

int rkm_forward_embd(rkm_session *s, const float *rows, const int32_t *ids, int n, float *logits, int full)
{
    rkm_seg one = {s, 0, n, s->n_past};
    return forward(s, &one, 1, ids, rows, n, logits, 0, full);
}
