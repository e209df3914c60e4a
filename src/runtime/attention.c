/*
 * attention.c - the KV cache (f16) and grouped-query attention with RoPE
 * (and its scalings), sliding windows, soft-capping and sinks.
 *
 * KV layout per layer: f16, head-major (model.h: rkm_kv_k / rkm_kv_v), so
 * a head's keys for consecutive positions are one contiguous run. Latent
 * attention (deepseek2) keeps one row per position, the normed latent and
 * the rotated shared key, and no V rows: its values are the latent, read
 * from the K rows. Full-
 * attention layers are linear (row = position, n_ctx rows); sliding-window
 * layers are a ring of window + n_chunk rows (row = position % cap), which
 * holds every key a chunk of n_chunk queries can see. Rows given as an
 * image's embeddings that attend both ways (s->att_full, Gemma 4) see the
 * keys up to the chunk's last row as well; the ring holds those too.
 *
 * Numerics follow llama.cpp's non-flash CPU path: Q is rounded to f16
 * before the Q.K products, the scale is applied inside the softmax, and the
 * probabilities are rounded to f16 before the product with V.
 *
 * Threads: rkm_attention splits (query row, head) pairs over the model's
 * pool; each thread has its own score / f16 scratch rows in the session.
 * The session owns the cache (huge-page mappings, rkm_map_weights);
 * rkm_kv_free unmaps it.
 */
#include <math.h>

#include "runtime/model.h"

/* Bytes of one layer's K (dim k_dim) or V (v_dim) rows. */
static size_t kv_bytes(const rkm_kv_layer *kv, int dim) { return sizeof(rkm_f16) * (size_t)kv->cap * (size_t)dim; }

int rkm_kv_init(rkm_session *s)
{
    const rkm_model *m = s->m;
    int nl = m->hp.n_layer;
    s->kv = calloc((size_t)nl, sizeof(rkm_kv_layer));
    if (!s->kv) return rkm_err(RKM_ENOMEM, "session: out of memory for the KV cache");
    for (int il = 0; il < nl; il++) {
        const rkm_layer *L = &m->layers[il];
        rkm_kv_layer *kv = &s->kv[il];
        if (L->recurrent) continue; /* no rows: its state is the session's rs */
        kv->n_kv = L->n_kv;
        kv->hd_k = L->hd_k;
        kv->hd_v = L->hd_v;
        kv->k_dim = L->n_kv * L->hd_k;
        kv->v_dim = L->mla ? 0 : L->n_kv * L->hd_v;
        kv->cap = s->n_ctx;
        if (L->is_swa && m->hp.sliding_window + s->n_chunk < s->n_ctx) {
            kv->cap = m->hp.sliding_window + s->n_chunk;
            kv->ring = 1;
        }
        /* mapped like the weights (2 MiB huge pages where the kernel
         * gives them): a head's keys are one long run that attention
         * streams, and with 4 KiB pages every 4 KiB of it costs a TLB
         * miss and restarts the hardware prefetcher (olmoe q4_0 decode
         * from 2048 tokens: 21.3 / 23.5 against 20.3 / 21.8 tok/s). The
         * cost: the heads' runs share huge pages, so the whole cache is
         * resident from the first tokens, as the memory plan counts it
         * (llama.cpp clears its whole cache up front too). */
        kv->k = rkm_map_weights(kv_bytes(kv, kv->k_dim));
        kv->v = kv->v_dim ? rkm_map_weights(kv_bytes(kv, kv->v_dim)) : NULL;
        if (!kv->k || (kv->v_dim && !kv->v)) return rkm_err(RKM_ENOMEM, "session: out of memory for the KV cache (layer %d)", il);
    }
    return 0;
}

void rkm_kv_free(rkm_session *s)
{
    if (!s->kv) return;
    for (int il = 0; il < s->m->hp.n_layer; il++) {
        const rkm_kv_layer *kv = &s->kv[il];
        if (!kv->k) continue;
        rkm_unmap_weights(kv->k, kv_bytes(kv, kv->k_dim));
        if (kv->v) rkm_unmap_weights(kv->v, kv_bytes(kv, kv->v_dim));
    }
    free(s->kv);
    s->kv = NULL;
}

/* ---------------------------------------------------------------- RoPE */

/* YaRN's correction dim: the pair index whose wavelength fits n_rot turns
 * into the original context (ggml's rope_yarn_corr_dim). */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* llama.cpp's YaRN magnitude for a scale and an mscale */
static float yarn_mscale(float scale, float mscale) { return scale <= 1.0f ? 1.0f : 0.1f * mscale * logf(scale) + 1.0f; }

void rkm_rope_setup(rkm_rope *r, const rkm_hparams *hp, int dim, float theta, const float *freqs)
{
    memset(r, 0, sizeof *r);
    r->dim = dim;
    r->neox = hp->rope_neox;
    r->theta = theta;
    r->freqs = freqs;
    r->freq_scale = hp->rope_scaling == RKM_ROPE_SCALING_NONE ? 1.0f : hp->rope_freq_scale;
    r->ext_factor = hp->yarn_ext_factor >= 0 ? hp->yarn_ext_factor
                  : hp->rope_scaling == RKM_ROPE_SCALING_YARN ? 1.0f : 0.0f;
    /* the attention factor llama.cpp's context derives (llama_context),
     * then ggml's rope multiplies it by 1 + 0.1 ln(factor) where it mixes */
    float af = hp->yarn_attn_factor;
    if (r->ext_factor != 0) {
        float factor = 1.0f / r->freq_scale;
        /* mscale_all_dim; deepseek2's mscale is mscale_all_dim when that is not 1 */
        float all = hp->yarn_log_mul, ms = hp->arch == RKM_ARCH_DEEPSEEK2 && all != 1.0f ? all : 1.0f;
        af = all != 0 ? yarn_mscale(factor, ms) / yarn_mscale(factor, all) : yarn_mscale(factor, 1.0f);
        af *= 1.0f / (1.0f + 0.1f * logf(factor));
    }
    af *= hp->rope_attn_factor;
    r->attn_factor = af;
    r->mscale = r->ext_factor != 0 ? af * (1.0f + 0.1f * logf(1.0f / r->freq_scale)) : af;
    /* multi-axis: llama.cpp's interleaved sections (IMROPE: Qwen3.5,
     * Qwen3-VL), pair i in sector i mod the sections' sum: height every
     * third from 1 within 3 x its section, width every third from 2,
     * time every third from 0, the rest the extra axis */
    const int sec[4] = {hp->rope_sec_t, hp->rope_sec_h, hp->rope_sec_w, hp->rope_sec_e};
    const int sum = sec[0] + sec[1] + sec[2] + sec[3];
    r->multi = sum > 0 && dim > 0;
    for (int i = 0; r->multi && i < dim / 2 && i < RKM_ROPE_MAX_PAIRS; i++) {
        const int sector = i % sum;
        r->axis[i] = sector % 3 == 1 && sector < 3 * sec[1]   ? 1
                     : sector % 3 == 2 && sector < 3 * sec[2] ? 2
                     : sector % 3 == 0 && sector < 3 * sec[0] ? 0
                                                              : 3;
    }
    int n_orig = hp->rope_orig_ctx > 0 ? hp->rope_orig_ctx : hp->n_ctx_train;
    if (dim > 0) {
        float lo = floorf(yarn_corr_dim(dim, n_orig, hp->yarn_beta_fast, theta));
        float hi = ceilf(yarn_corr_dim(dim, n_orig, hp->yarn_beta_slow, theta));
        r->corr[0] = RKM_MAX(0.0f, lo);
        r->corr[1] = RKM_MIN((float)(dim - 1), hi);
    }
}

/* RoPE as ggml computes it: theta_i = pos * base^(-2i/dim) built by
 * repeated f32 multiplication (one angle per axis, each grown the same
 * way; pair i takes its axis's), divided by freqs[i] when given, then
 * interpolated (times freq_scale) and, with YaRN, mixed back toward the
 * unscaled angle on the high-frequency pairs (ramp between corr[0] and
 * corr[1]); cos and sin times mscale. NeoX pairs (i, i + dim/2), otherwise
 * (2i, 2i+1); dims >= dim untouched. */
void rkm_rope_apply4(const rkm_rope *r, float *x, int n_heads, int hd, const int32_t pos[4])
{
    float cs[RKM_ROPE_MAX_PAIRS], sn[RKM_ROPE_MAX_PAIRS];
    int half = RKM_MIN(r->dim / 2, RKM_ROPE_MAX_PAIRS);
    float theta_scale = powf(r->theta, -2.0f / (float)r->dim);
    float theta[4] = {(float)pos[0], (float)pos[1], (float)pos[2], (float)pos[3]};
    for (int i = 0; i < half; i++) {
        const float th = theta[r->multi ? r->axis[i] : 0];
        float t_ex = r->freqs ? th / r->freqs[i] : th;
        float t = r->freq_scale * t_ex;
        if (r->ext_factor != 0.0f) {
            float y = ((float)i - r->corr[0]) / RKM_MAX(0.001f, r->corr[1] - r->corr[0]);
            float mix = (1.0f - RKM_MIN(1.0f, RKM_MAX(0.0f, y))) * r->ext_factor;
            t = t * (1 - mix) + t_ex * mix;
        }
        cs[i] = cosf(t) * r->mscale;
        sn[i] = sinf(t) * r->mscale;
        for (int a = 0; a < 4; a++) theta[a] *= theta_scale;
    }
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            int a = r->neox ? i : 2 * i, b = r->neox ? i + half : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * cs[i] - x1 * sn[i];
            v[b] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

void rkm_rope_apply(const rkm_rope *r, float *x, int n_heads, int hd, int pos)
{
    const int32_t p[4] = {pos, pos, pos, 0};
    rkm_rope_apply4(r, x, n_heads, hd, p);
}

float rkm_attn_scale(const rkm_hparams *hp, const rkm_layer *L)
{
    if (!L->mla) return hp->attn_scale > 0 ? hp->attn_scale : 1.0f / sqrtf((float)L->hd_k);
    /* llama.cpp's deepseek2 graph: the context's attention factor with
     * YaRN's cancelling factor taken back, times 1 + 0.1 mscale_all_dim
     * ln(factor), squared */
    const float lf = logf(1.0f / L->rope.freq_scale);
    const float org = L->rope.attn_factor * (1.0f + 0.1f * lf);
    const float ms = org * (1.0f + 0.1f * hp->yarn_log_mul * lf);
    return ms * ms / sqrtf((float)hp->head_dim_k_mla);
}

static inline int kv_row(const rkm_kv_layer *kv, int pos) { return kv->ring ? pos % kv->cap : pos; }

/* Positions p..pos are contiguous KV rows but for one wrap of a ring: the
 * first row of the run starting at p in *row, its length returned. */
static inline int kv_run(const rkm_kv_layer *kv, int p, int pos, int *row)
{
    *row = kv_row(kv, p);
    return RKM_MIN(pos - p + 1, kv->ring ? kv->cap - *row : pos - p + 1);
}

void rkm_kv_store(rkm_kv_layer *kv, const float *k, const float *v, int pos0, int n)
{
    for (int r = 0; r < n; r++) {
        int row = kv_row(kv, pos0 + r);
        for (int h = 0; h < kv->n_kv; h++) {
            rkm_f32_to_f16_row(k + (size_t)r * kv->k_dim + (size_t)h * kv->hd_k, rkm_kv_k(kv, h, row), kv->hd_k);
            if (kv->v_dim)
                rkm_f32_to_f16_row(v + (size_t)r * kv->v_dim + (size_t)h * kv->hd_v, rkm_kv_v(kv, h, row), kv->hd_v);
        }
    }
}

typedef struct {
    rkm_session *s;          /* the scratch (scores, f16 rows) */
    const rkm_kv_layer *kv;  /* the sequence's cache */
    const float *q;
    float *att;
    int il, pos0, n;
} att_job;

static void att_worker(void *ctx, int ith, int nth)
{
    const att_job *j = ctx;
    rkm_session *s = j->s;
    const rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const rkm_layer *L = &m->layers[j->il];
    const rkm_kv_layer *kv = j->kv;
    int nh = hp->n_head, hd = L->hd_k, hv = L->hd_v, gq = nh / L->n_kv;
    float scale = L->kq_scale;
    float cap = hp->attn_softcap;
    float *sc = s->scores + (size_t)ith * s->n_ctx;
    rkm_f16 *q16 = s->q16 + (size_t)ith * m->max_hd;
    rkm_f16 *p16 = s->p16 + (size_t)ith * s->n_ctx;
    float qr[RKM_MAX_HEAD_DIM];
    int total = j->n * nh;
    for (int t = ith; t < total; t += nth) {
        int r = t / nh, h = t % nh;
        int pos = j->pos0 + r;
        int hi = s->att_full ? j->pos0 + j->n - 1 : pos; /* the last key this row sees */
        int lo = 0;
        if (L->is_swa && hp->sliding_window > 0) lo = RKM_MAX(0, pos - hp->sliding_window + 1);
        const float *q = j->q + (size_t)r * nh * hd + (size_t)h * hd;
        rkm_f32_to_f16_row(q, q16, hd);
        rkm_f16_to_f32_row(q16, qr, hd);
        int kh = h / gq;
        float mx = -INFINITY;
        for (int p = lo, row, len; p <= hi; p += len) { /* at most two runs of rows */
            len = kv_run(kv, p, hi, &row);
            rkm_dot_f32_f16_rows(qr, rkm_kv_k(kv, kh, row), hd, len, hd, sc + (p - lo));
        }
        int cnt = hi - lo + 1;
        for (int i = 0; i < cnt; i++) {
            float d = sc[i];
            if (cap > 0) d = cap * tanhf(d / cap);
            d *= scale;
            sc[i] = d;
            if (d > mx) mx = d;
        }
        /* a sink (gpt-oss) joins the max and the denominator, as if it
         * were one more score with no value */
        if (L->sinks && L->sinks[h] > mx) mx = L->sinks[h];
        double sum = L->sinks ? (double)expf(L->sinks[h] - mx) : 0.0;
        for (int i = 0; i < cnt; i++) {
            float e = expf(sc[i] - mx);
            sc[i] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < cnt; i++) sc[i] *= inv;
        /* the weights rounded to f16, as ggml multiplies them */
        rkm_f32_to_f16_row(sc, p16, cnt);
        rkm_f16_to_f32_row(p16, sc, cnt);
        float *out = j->att + (size_t)r * nh * hv + (size_t)h * hv;
        memset(out, 0, sizeof(float) * (size_t)hv);
        for (int p = lo, row, len; p <= hi; p += len) {
            len = kv_run(kv, p, hi, &row);
            rkm_axpy_f16_rows(out, sc + (p - lo), rkm_kv_v(kv, kh, row), rkm_kv_v_stride(kv), len, hv);
        }
    }
}

void rkm_attention(rkm_session *s, const rkm_kv_layer *kv, int il, int pos0, int n, const float *q, float *att)
{
    RKM_ASSERT(pos0 + n <= s->n_ctx); /* the scratch's score rows */
    att_job j = {s, kv, q, att, il, pos0, n};
    const rkm_layer *L = &s->m->layers[il];
    int span = L->is_swa && s->m->hp.sliding_window > 0 ? RKM_MIN(pos0 + n, s->m->hp.sliding_window) : pos0 + n;
    double work = (double)n * s->m->hp.n_head * span * (L->hd_k + L->hd_v);
    rkm_pool_run(rkm_pool_for(s->m->pool, work), att_worker, &j);
}
