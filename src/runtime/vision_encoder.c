/*
 * vision_encoder.c - the vision towers of vision.h: an mmproj file's
 * weights read through the projector's table (format/vision.c), and the
 * encoder's forward pass as llama.cpp's mtmd computes it (models/ of
 * tools/mtmd): the patch embedding as one matmul over the image's patches
 * (im2col order: channel, row, column), the ViT blocks with the row-split
 * matmuls of kernels/ on the pool, attention over all patches (no mask)
 * split by head across the pool, then the projector: gemma4v (2-D RoPE
 * over each head's halves, average pooling) and qwen3vl_merger (patches
 * in 2x2 merge order, resized learned positions, vision M-RoPE, merged
 * patches through the merger MLP and the deep-stack mergers).
 *
 * Weights: matrices keep their file type when the matmuls run it
 * natively (else dequantized to F32 once, at load); vectors (norms,
 * biases, position tables, scales) are F32.
 */
#include "runtime/vision.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "format/gguf.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/rknn_i8.h"
#include "runtime/model.h"
#include "util/common.h"

typedef struct {
    int type;    /* enum rkm_type of data; F32 for vectors */
    void *data;  /* NULL: absent (optional) */
    void *npu;   /* the matrix as rknn_i8 for the NPU (rkm_vision_bind), or NULL */
    int64_t ne[4];
    uint64_t bytes;
    /* Gemma 4's clippable linears: the input clamped to [in_lo, in_hi]
     * and the output to [out_lo, out_hi] (the file's NAME.input_min,
     * .input_max, .output_min, .output_max scalars beside NAME.weight) */
    int clamp;
    float in_lo, in_hi, out_lo, out_hi;
} vweight;

struct rkm_vision {
    rkm_vision_hparams hp;
    vweight *w;  /* [(n_layer + 1) * RKM_V_ROLE_COUNT]: globals in row 0, layer il in row il + 1 */
    uint64_t bytes;
    rkm_model *npu_model; /* bound: its backend runs the matrices' rknn_i8 copies */
    int mm_rc;            /* the first NPU failure of an encode (0: none) */
};

static vweight *W(const rkm_vision *v, int role, int il) { return &v->w[(size_t)(il + 1) * RKM_V_ROLE_COUNT + role]; }
static const float *F(const rkm_vision *v, int role, int il) { return W(v, role, il)->data; }

const rkm_vision_hparams *rkm_vision_hparams_of(const rkm_vision *v) { return &v->hp; }
int rkm_vision_n_out(const rkm_vision *v) { return v->hp.proj_dim * (1 + v->hp.n_deepstack); }
uint64_t rkm_vision_bytes(const rkm_vision *v) { return v->bytes; }

void rkm_vision_free(rkm_vision *v)
{
    if (!v) return;
    for (int i = 0; v->w && i < (v->hp.n_layer + 1) * RKM_V_ROLE_COUNT; i++) {
        free(v->w[i].data);
        rkm_free_aligned(v->w[i].npu);
    }
    free(v->w);
    free(v);
}

/* The clamp scalars of matrix NAME.weight, where the file has them. */
static int read_clamp(const rkm_gguf *g, const char *name, vweight *w)
{
    static const char *const sfx[4] = {".input_min", ".input_max", ".output_min", ".output_max"};
    float *dst[4] = {&w->in_lo, &w->in_hi, &w->out_lo, &w->out_hi};
    w->in_lo = w->out_lo = -FLT_MAX;
    w->in_hi = w->out_hi = FLT_MAX;
    size_t base = strlen(name);
    if (base < 7 || strcmp(name + base - 7, ".weight")) return 0;
    base -= 7;
    for (int i = 0; i < 4; i++) {
        char sname[128];
        snprintf(sname, sizeof sname, "%.*s%s", (int)base, name, sfx[i]);
        const rkm_gguf_tensor *t = rkm_gguf_tensor_find(g, sname);
        if (!t) continue;
        uint8_t raw[16];
        const size_t rb = rkm_type_row_bytes(t->type, 1);
        if (t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] != 1 || !rkm_type_readable(t->type) || rb > sizeof raw || rb != t->nbytes)
            return rkm_err(RKM_EFORMAT, "%s: a clamp bound must be one value", sname);
        int rc = rkm_gguf_read(g, t, 0, raw, rb);
        if (rc) return rkm_err_prefix(rc, "%s", sname);
        rkm_dequantize_row(t->type, raw, dst[i], 1);
        if (isnan(*dst[i])) return rkm_err(RKM_EFORMAT, "%s: NaN", sname);
        w->clamp = 1;
    }
    if (w->clamp && (w->in_lo > w->in_hi || w->out_lo > w->out_hi))
        return rkm_err(RKM_EFORMAT, "%.*s: a clamp whose minimum exceeds its maximum", (int)base, name);
    return 0;
}

static int load_tensor(const rkm_gguf *g, const rkm_vtensor_info *ti, int il, vweight *out)
{
    char name[96];
    int rc = rkm_vision_tensor_name(ti, il, name, sizeof name);
    if (rc) return rc;
    const rkm_gguf_tensor *t = rkm_gguf_tensor_find(g, name);
    if (!t) return 0; /* optional (rkm_vision_read checked the others) */
    uint8_t *raw = malloc(t->nbytes ? t->nbytes : 1);
    if (!raw) return rkm_err(RKM_ENOMEM, "out of memory reading %s", name);
    if ((rc = rkm_gguf_read(g, t, 0, raw, t->nbytes))) {
        free(raw);
        return rkm_err_prefix(rc, "%s", name);
    }
    memcpy(out->ne, t->ne, sizeof out->ne);
    const int vec = (ti->flags & RKM_VT_F32) || ti->n_dims == 1;
    /* (mtmd's patch embedding is a convolution: never clamped) */
    if (!vec && ti->role != RKM_V_PATCH_EMBD && ti->role != RKM_V_PATCH_EMBD_1 && (rc = read_clamp(g, name, out))) {
        free(raw);
        return rc;
    }
    if (!vec && rkm_type_matmul(t->type)) {
        out->type = t->type;
        out->data = raw;
        out->bytes = t->nbytes;
        return 0;
    }
    /* vectors, and matrices of types the matmuls do not run: F32 */
    const int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *f = malloc(sizeof(float) * (size_t)RKM_MAX(n, 1));
    if (!f) {
        free(raw);
        return rkm_err(RKM_ENOMEM, "out of memory reading %s", name);
    }
    const size_t rb = rkm_type_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < n / t->ne[0]; r++) rkm_dequantize_row(t->type, raw + (size_t)r * rb, f + r * t->ne[0], t->ne[0]);
    free(raw);
    out->type = RKM_TYPE_F32;
    out->data = f;
    out->bytes = sizeof(float) * (uint64_t)n;
    return 0;
}

rkm_vision *rkm_vision_load(const char *path)
{
    rkm_gguf *g = rkm_gguf_open(path);
    if (!g) return NULL;
    rkm_vision *v = calloc(1, sizeof *v);
    int rc = v ? rkm_vision_read(g, &v->hp) : rkm_err(RKM_ENOMEM, "out of memory");
    if (!rc && !(v->w = calloc((size_t)(v->hp.n_layer + 1) * RKM_V_ROLE_COUNT, sizeof *v->w)))
        rc = rkm_err(RKM_ENOMEM, "out of memory");
    const rkm_proj_info *p = rc ? NULL : rkm_proj_info_of(v->hp.proj);
    for (int il = -1; p && !rc && il < v->hp.n_layer; il++)
        for (int i = 0; !rc && i < p->n_tensors; i++) {
            const rkm_vtensor_info *ti = &p->tensors[i];
            if (!rkm_vision_tensor_expected(&v->hp, ti, il)) continue;
            vweight *w = W(v, ti->role, il);
            rc = load_tensor(g, ti, il, w);
            v->bytes += w->bytes;
        }
    rkm_gguf_close(g);
    if (rc) {
        rkm_vision_free(v);
        rkm_err_prefix(rc, "%s", path);
        return NULL;
    }
    return v;
}

/* ------------------------------------------------------------ pieces */

/* A weight's matrix shape: n_in values per row, n_out rows. */
static void mat_dims(const vweight *w, int64_t *n_in, int64_t *n_out)
{
    *n_in = w->ne[0] * (w->ne[2] > 1 ? w->ne[1] * w->ne[2] : 1); /* conv kernels: p x p x 3 */
    *n_out = w->ne[2] > 1 ? w->ne[3] : w->ne[1];
}

/* y[m][n_out] = x[m][n_in] . W^T: through the bound model's NPU when the
 * matrix has an rknn_i8 copy and there are enough rows, else on the CPU.
 * An NPU failure is kept in v->mm_rc (the encode returns it). */
static void mm(rkm_vision *v, rkm_pool *pool, const vweight *w, const float *x, int64_t m, float *y)
{
    int64_t n_in, n_out;
    mat_dims(w, &n_in, &n_out);
    if (w->clamp) { /* a clippable linear: on a clamped copy of x, then y clamped */
        float *xc = malloc(sizeof(float) * (size_t)(m * n_in));
        if (!xc) {
            if (!v->mm_rc) v->mm_rc = rkm_err(RKM_ENOMEM, "vision tower: out of memory");
            return;
        }
        for (int64_t i = 0; i < m * n_in; i++) xc[i] = fminf(fmaxf(x[i], w->in_lo), w->in_hi);
        vweight plain = *w;
        plain.clamp = 0;
        mm(v, pool, &plain, xc, m, y);
        free(xc);
        for (int64_t i = 0; i < m * n_out; i++) y[i] = fminf(fmaxf(y[i], w->out_lo), w->out_hi);
        return;
    }
    if (w->npu && v->npu_model && m >= RKM_NPU_DENSE_MIN_ROWS) {
        if (v->mm_rc) return;
        rkm_mm_task t = {RKM_TYPE_RKNN_I8, w->npu, n_in, n_out, x, m, y, n_out};
        pthread_mutex_lock(&v->npu_model->lock); /* the backend is driven by the lock's holder */
        v->mm_rc = rkm_backend_mm(v->npu_model->backend, pool, &t, 1, 0);
        pthread_mutex_unlock(&v->npu_model->lock);
        return;
    }
    rkm_matmul(rkm_pool_for(pool, (double)m * n_in * n_out), w->type, w->data, n_in, n_out, x, m, y, n_out);
}

int rkm_vision_bind(rkm_vision *v, rkm_model *m)
{
    if (!m || v->npu_model == m || !rkm_backend_rknn(m->backend)) return v->npu_model == m && m ? 1 : 0;
    for (int i = 0; i < (v->hp.n_layer + 1) * RKM_V_ROLE_COUNT; i++) {
        vweight *w = &v->w[i];
        int64_t n_in, n_out;
        mat_dims(w, &n_in, &n_out);
        if (!w->data || w->ne[1] < 2 || w->npu || !rkm_rknn_i8_shape_ok(n_in, n_out) || !rkm_type_readable(w->type))
            continue;
        void *buf = rkm_alloc_aligned(rkm_rknn_i8_bytes(n_in, n_out), 64);
        float *rows = malloc(sizeof(float) * (size_t)n_in * RKM_RKNN_I8_TILE);
        if (!buf || !rows) {
            rkm_free_aligned(buf);
            free(rows);
            return rkm_err(RKM_ENOMEM, "vision tower: out of memory for the NPU's copies");
        }
        const size_t rb = rkm_type_row_bytes(w->type, n_in);
        for (int64_t n0 = 0; n0 < n_out; n0 += RKM_RKNN_I8_TILE) {
            for (int r = 0; r < RKM_RKNN_I8_TILE; r++)
                rkm_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)(n0 + r) * rb, rows + (size_t)r * n_in, n_in);
            rkm_rknn_i8_pack_rows(rows, n_in, n_out, n0, RKM_RKNN_I8_TILE, buf);
        }
        free(rows);
        w->npu = buf;
    }
    v->npu_model = m;
    return 1;
}

/* rows of n contiguous values, each RMS-normed in place (times w if given) */
static void rms_rows(float *x, const float *w, int64_t rows, int64_t n, float eps)
{
    for (int64_t r = 0; r < rows; r++) rkm_rmsnorm(x + r * n, x + r * n, w, n, eps);
}

static float gelu_quick(float x) { return x / (1.0f + expf(-1.702f * x)); }

/* Query rows per block of the attention: the scores of a block are
 * ATT_BLOCK x N floats, so a tower of 16384 patches needs 32 MiB for
 * them, not N x N. */
#define ATT_BLOCK 512

/* Scratch floats attention() needs for N patches of head size hd. */
static size_t attention_scratch(int N, int hd)
{
    const size_t B = (size_t)RKM_MIN(N, ATT_BLOCK);
    return B * (size_t)N + B * (size_t)hd * 2 + (size_t)N * hd * 2;
}

/* Attention of every patch over every patch (no mask), head by head and
 * ATT_BLOCK query rows at a time, as two matmuls on the pool: S = Q_h
 * K_h^T * scale, softmax by row, then O_h = S V_h. q [N][n_head * hd], k
 * and v [N][n_kv * hd], o like q; scratch: attention_scratch(N, hd). */
static void attention(rkm_pool *pool, const float *q, const float *k, const float *v, float *o, int N, int n_head,
                      int n_kv, int hd, float scale, float *scratch)
{
    const int B = RKM_MIN(N, ATT_BLOCK);
    float *S = scratch, *qh = S + (size_t)B * N, *oh = qh + (size_t)B * hd, *kh = oh + (size_t)B * hd;
    float *vt = kh + (size_t)N * hd;
    const int qs = n_head * hd, ks = n_kv * hd, group = n_head / n_kv;
    for (int h = 0; h < n_head; h++) {
        const int kvh = h / group;
        if (h % group == 0) {
            for (int i = 0; i < N; i++) {
                memcpy(kh + (size_t)i * hd, k + (size_t)i * ks + (size_t)kvh * hd, sizeof(float) * (size_t)hd);
                for (int e = 0; e < hd; e++) vt[(size_t)e * N + i] = v[(size_t)i * ks + (size_t)kvh * hd + e];
            }
        }
        for (int i0 = 0; i0 < N; i0 += B) {
            const int nb = RKM_MIN(B, N - i0);
            for (int i = 0; i < nb; i++)
                memcpy(qh + (size_t)i * hd, q + (size_t)(i0 + i) * qs + (size_t)h * hd, sizeof(float) * (size_t)hd);
            rkm_matmul(rkm_pool_for(pool, (double)nb * N * hd), RKM_TYPE_F32, kh, hd, N, qh, nb, S, N);
            for (int i = 0; i < nb; i++) {
                float *row = S + (size_t)i * N;
                if (scale != 1.0f)
                    for (int t = 0; t < N; t++) row[t] *= scale;
                rkm_softmax(row, N);
            }
            rkm_matmul(rkm_pool_for(pool, (double)nb * N * hd), RKM_TYPE_F32, vt, N, hd, S, nb, oh, hd);
            for (int i = 0; i < nb; i++)
                memcpy(o + (size_t)(i0 + i) * qs + (size_t)h * hd, oh + (size_t)i * hd, sizeof(float) * (size_t)hd);
        }
    }
}

/* The working rows of a ViT over N patches: cols (the patches, then the
 * FFN's rows: cols_w floats a patch, zeroed), the residual x and a copy h
 * (E), queries and attention outputs (Q), keys and values (KV), the
 * attention's scratch. */
typedef struct {
    float *cols, *x, *h, *q, *k, *v, *o, *scratch;
} vit_rows;

static void vit_rows_free(vit_rows *b)
{
    free(b->cols);
    free(b->x);
    free(b->h);
    free(b->q);
    free(b->k);
    free(b->v);
    free(b->o);
    free(b->scratch);
    memset(b, 0, sizeof *b);
}

static int vit_rows_alloc(vit_rows *b, int N, size_t cols_w, int E, int Q, int KV, int hd)
{
    b->cols = calloc((size_t)N * cols_w, sizeof(float));
    b->x = malloc(sizeof(float) * (size_t)N * E);
    b->h = malloc(sizeof(float) * (size_t)N * E);
    b->q = malloc(sizeof(float) * (size_t)N * Q);
    b->k = malloc(sizeof(float) * (size_t)N * KV);
    b->v = malloc(sizeof(float) * (size_t)N * KV);
    b->o = malloc(sizeof(float) * (size_t)N * Q);
    b->scratch = malloc(sizeof(float) * attention_scratch(N, hd));
    if (b->cols && b->x && b->h && b->q && b->k && b->v && b->o && b->scratch) return 0;
    vit_rows_free(b);
    return RKM_ENOMEM;
}

/* ------------------------------------------------------------ gemma4v */

static int encode_gemma4v(rkm_vision *v, rkm_pool *pool, const float *img, int Wd, int Ht, float **out, int *n_tok)
{
    const rkm_vision_hparams *hp = &v->hp;
    const int p = hp->patch_size, px = Wd / p, py = Ht / p, N = px * py, E = hp->n_embd;
    const int hd = hp->head_dim, Q = hp->n_head * hd, KV = hp->n_head_kv * hd, FF = hp->n_ff, k = hp->n_merge;
    if (px > hp->n_pos || py > hp->n_pos)
        return rkm_err(RKM_EINVAL, "a grid of %dx%d patches exceeds the position table (%d)", px, py, hp->n_pos);
    const size_t pp3 = (size_t)3 * p * p;
    vit_rows b = {0};
    const int ox = px / k, oy = py / k, T = ox * oy;
    float *pooled = malloc(sizeof(float) * (size_t)T * E);
    float *res = malloc(sizeof(float) * (size_t)T * hp->proj_dim);
    int rc = vit_rows_alloc(&b, N, RKM_MAX(pp3, (size_t)FF * 2), E, Q, KV, hd);
    float *cols = b.cols, *x = b.x, *h = b.h, *q = b.q, *kk = b.k, *vv = b.v, *o = b.o, *scratch = b.scratch;
    if (rc || !pooled || !res) {
        rc = rkm_err(RKM_ENOMEM, "out of memory encoding a %dx%d image", Wd, Ht);
        goto out;
    }
    /* patches (2x - 1), in the conv kernel's order: channel, row, column */
    for (int i = 0; i < N; i++) {
        const int cx = i % px, cy = i / px;
        float *c = cols + (size_t)i * pp3;
        for (int ch = 0; ch < 3; ch++)
            for (int ky = 0; ky < p; ky++)
                for (int kx = 0; kx < p; kx++)
                    *c++ = 2.0f * img[(size_t)ch * Wd * Ht + (size_t)(cy * p + ky) * Wd + cx * p + kx] - 1.0f;
    }
    mm(v, pool, W(v, RKM_V_PATCH_EMBD, -1), cols, N, x);
    const rkm_rope rope = {.dim = hd / 2, .neox = 1, .theta = hp->rope_theta, .freq_scale = 1.0f, .attn_factor = 1.0f,
                           .mscale = 1.0f};
    /* the learned 2-D position: a row of the x table and one of the y table */
    const float *pos = F(v, RKM_V_POS_EMBD, -1);
    for (int i = 0; i < N; i++) {
        const float *tx = pos + (size_t)(i % px) * E, *ty = pos + ((size_t)hp->n_pos + i / px) * E;
        for (int e = 0; e < E; e++) x[(size_t)i * E + e] += tx[e] + ty[e];
    }
    for (int il = 0; il < hp->n_layer; il++) {
        memcpy(h, x, sizeof(float) * (size_t)N * E);
        rms_rows(h, F(v, RKM_V_LN1_W, il), N, E, hp->eps);
        mm(v, pool, W(v, RKM_V_ATTN_Q, il), h, N, q);
        mm(v, pool, W(v, RKM_V_ATTN_K, il), h, N, kk);
        mm(v, pool, W(v, RKM_V_ATTN_V, il), h, N, vv);
        rms_rows(q, F(v, RKM_V_ATTN_Q_NORM, il), (int64_t)N * hp->n_head, hd, hp->eps);
        rms_rows(kk, F(v, RKM_V_ATTN_K_NORM, il), (int64_t)N * hp->n_head_kv, hd, hp->eps);
        rms_rows(vv, NULL, (int64_t)N * hp->n_head_kv, hd, hp->eps);
        /* 2-D RoPE: each head's first half turned by the column, the second
         * by the row, each half a NEOX rotation of its own (the text
         * model's rkm_rope_apply, without scaling) */
        for (int i = 0; i < N; i++) {
            rkm_rope_apply(&rope, q + (size_t)i * Q, hp->n_head, hd, i % px);
            rkm_rope_apply(&rope, q + (size_t)i * Q + hd / 2, hp->n_head, hd, i / px);
            rkm_rope_apply(&rope, kk + (size_t)i * KV, hp->n_head_kv, hd, i % px);
            rkm_rope_apply(&rope, kk + (size_t)i * KV + hd / 2, hp->n_head_kv, hd, i / px);
        }
        attention(pool, q, kk, vv, o, N, hp->n_head, hp->n_head_kv, hd, 1.0f, scratch);
        mm(v, pool, W(v, RKM_V_ATTN_OUT, il), o, N, h);
        rms_rows(h, F(v, RKM_V_ATTN_POST_NORM, il), N, E, hp->eps);
        for (size_t i = 0; i < (size_t)N * E; i++) x[i] += h[i];
        memcpy(h, x, sizeof(float) * (size_t)N * E);
        rms_rows(h, F(v, RKM_V_LN2_W, il), N, E, hp->eps);
        float *g = cols, *u = cols + (size_t)N * FF;
        mm(v, pool, W(v, RKM_V_FFN_GATE, il), h, N, g);
        mm(v, pool, W(v, RKM_V_FFN_UP, il), h, N, u);
        if (hp->ffn == RKM_VFFN_GELU) rkm_geglu(g, g, u, (int64_t)N * FF);
        else if (hp->ffn == RKM_VFFN_SILU) rkm_swiglu(g, g, u, (int64_t)N * FF);
        else
            for (size_t i = 0; i < (size_t)N * FF; i++) g[i] = gelu_quick(g[i]) * u[i];
        mm(v, pool, W(v, RKM_V_FFN_DOWN, il), g, N, h);
        rms_rows(h, F(v, RKM_V_FFN_POST_NORM, il), N, E, hp->eps);
        for (size_t i = 0; i < (size_t)N * E; i++) x[i] += h[i];
        const float *ls = F(v, RKM_V_OUT_SCALE, il);
        if (ls)
            for (size_t i = 0; i < (size_t)N * E; i++) x[i] *= ls[0];
    }
    /* k x k average pooling, times sqrt(n_embd) */
    const float gain = sqrtf((float)E);
    for (int t = 0; t < T; t++) {
        const int tx = t % ox, ty = t / ox;
        float *d = pooled + (size_t)t * E;
        for (int e = 0; e < E; e++) {
            float s = 0;
            for (int dy = 0; dy < k; dy++)
                for (int dx = 0; dx < k; dx++) s += x[((size_t)(ty * k + dy) * px + tx * k + dx) * E + e];
            d[e] = s / (float)(k * k) * gain;
        }
    }
    const float *sb = F(v, RKM_V_STD_BIAS, -1), *ss = F(v, RKM_V_STD_SCALE, -1);
    if (sb && ss)
        for (int t = 0; t < T; t++)
            for (int e = 0; e < E; e++) pooled[(size_t)t * E + e] = (pooled[(size_t)t * E + e] - sb[e]) * ss[e];
    rms_rows(pooled, NULL, T, E, hp->eps);
    mm(v, pool, W(v, RKM_V_MM_INPUT_PROJ, -1), pooled, T, res);
    *out = res;
    res = NULL;
    *n_tok = T;
out:
    vit_rows_free(&b);
    free(pooled);
    free(res);
    return rc;
}

/* ------------------------------------------------------------ qwen3vl */

/* rows of n values, each layer-normed in place: (x - mean) / sqrt(var +
 * eps) * w + b (ggml_norm, then the weight and bias) */
static void ln_rows(float *x, const float *w, const float *b, int64_t rows, int64_t n, float eps)
{
    for (int64_t r = 0; r < rows; r++) {
        float *v = x + r * n;
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += v[i];
        const float mean = (float)(sum / (double)n);
        double sq = 0;
        for (int64_t i = 0; i < n; i++) {
            v[i] -= mean;
            sq += (double)v[i] * v[i];
        }
        const float scale = 1.0f / sqrtf((float)(sq / (double)n) + eps);
        for (int64_t i = 0; i < n; i++) v[i] = v[i] * scale * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

/* y[m][n] += bias[n] */
static void add_bias(float *y, const float *bias, int64_t m, int64_t n)
{
    if (!bias) return;
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < n; i++) y[r * n + i] += bias[i];
}

static void gelu_rows(float *x, int64_t n, int ffn)
{
    if (ffn == RKM_VFFN_GELU) {
        rkm_gelu(x, x, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) x[i] = ffn == RKM_VFFN_SILU ? x[i] / (1.0f + expf(-x[i])) : gelu_quick(x[i]);
}

/* The learned square position table (side x side rows of E) resized to a
 * pw x ph grid as Qwen3-VL resizes it (transformers'
 * fast_pos_embed_interpolate: bilinear, corners aligned; mtmd's
 * ggml_interpolate with GGML_SCALE_FLAG_ALIGN_CORNERS, in its float
 * arithmetic): out [ph * pw][E], x fastest. */
static void resize_pos(const float *tab, int side, int E, int pw, int ph, float *out)
{
    if (pw == side && ph == side) {
        memcpy(out, tab, sizeof(float) * (size_t)side * side * E);
        return;
    }
    const float sf0 = pw > 1 && side > 1 ? (float)(pw - 1) / (float)(side - 1) : (float)pw / (float)side;
    const float sf1 = ph > 1 && side > 1 ? (float)(ph - 1) / (float)(side - 1) : (float)ph / (float)side;
    for (int i1 = 0; i1 < ph; i1++) {
        const float y = (float)i1 / sf1;
        const int y0 = RKM_MAX(0, RKM_MIN((int)floorf(y), side - 1)), y1 = RKM_MAX(0, RKM_MIN((int)floorf(y) + 1, side - 1));
        const float dy = fmaxf(0.0f, fminf(y - floorf(y), 1.0f));
        for (int i0 = 0; i0 < pw; i0++) {
            const float x = (float)i0 / sf0;
            const int x0 = RKM_MAX(0, RKM_MIN((int)floorf(x), side - 1)), x1 = RKM_MAX(0, RKM_MIN((int)floorf(x) + 1, side - 1));
            const float dx = fmaxf(0.0f, fminf(x - floorf(x), 1.0f));
            const float *a = tab + ((size_t)y0 * side + x0) * E, *b = tab + ((size_t)y0 * side + x1) * E;
            const float *c = tab + ((size_t)y1 * side + x0) * E, *d = tab + ((size_t)y1 * side + x1) * E;
            float *o = out + ((size_t)i1 * pw + i0) * E;
            for (int e = 0; e < E; e++)
                o[e] = a[e] * (1 - dx) * (1 - dy) + b[e] * dx * (1 - dy) + c[e] * (1 - dx) * dy + d[e] * dx * dy;
        }
    }
}

/* Qwen3-VL's vision RoPE (ggml's rope_multi in vision mode, sections of
 * hd/4, over hd/2 dimensions): pair (i, i + hd/2) of each head turned by
 * row * base^i for i < hd/4 and by column * base^(i - hd/4) above, base =
 * theta^(-4/hd), the angles grown step by step as ggml grows them. */
static void rope_vision_table(int hd, float theta, int row, int col, float *cs)
{
    const int quarter = hd / 4;
    const float scale = powf(theta, -2.0f / (float)(hd / 2));
    float tr = (float)row, tc = (float)col;
    for (int i = 0; i < hd / 2; i++) {
        if (i == quarter) tc = (float)col; /* each section starts over */
        const float a = i < quarter ? tr : tc;
        cs[2 * i] = cosf(a);
        cs[2 * i + 1] = sinf(a);
        tr *= scale;
        tc *= scale;
    }
}

static void rope_vision_apply(float *x, int n_head, int hd, const float *cs)
{
    const int half = hd / 2;
    for (int h = 0; h < n_head; h++) {
        float *v = x + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            const float x0 = v[i], x1 = v[i + half], c = cs[2 * i], s = cs[2 * i + 1];
            v[i] = x0 * c - x1 * s;
            v[i + half] = x0 * s + x1 * c;
        }
    }
}

/* The merger of 2x2 patches: rows of 4E (four patches in merge order)
 * normed (ln_w/ln_b, if any), fc1 + bias, GELU, fc2 + bias into out
 * [T][out_stride] at column col. */
static void merge_mlp(rkm_vision *v, rkm_pool *pool, const float *x, int T, int ln_w, int ln_b, int fc1, int fc1_b,
                      int fc2, int fc2_b, int il, float *tmp_in, float *tmp_mid, float *tmp_out, float *out, int out_stride,
                      int col)
{
    const rkm_vision_hparams *hp = &v->hp;
    const int M = 4 * hp->n_embd, P = hp->proj_dim;
    memcpy(tmp_in, x, sizeof(float) * (size_t)T * M);
    if (ln_w >= 0) ln_rows(tmp_in, F(v, ln_w, il), F(v, ln_b, il), T, M, hp->eps);
    mm(v, pool, W(v, fc1, il), tmp_in, T, tmp_mid);
    add_bias(tmp_mid, F(v, fc1_b, il), T, M);
    gelu_rows(tmp_mid, (int64_t)T * M, RKM_VFFN_GELU);
    mm(v, pool, W(v, fc2, il), tmp_mid, T, tmp_out);
    add_bias(tmp_out, F(v, fc2_b, il), T, P);
    for (int t = 0; t < T; t++) memcpy(out + (size_t)t * out_stride + col, tmp_out + (size_t)t * P, sizeof(float) * (size_t)P);
}

static int encode_qwen3vl(rkm_vision *v, rkm_pool *pool, const float *img, int Wd, int Ht, float **out, int *n_tok)
{
    const rkm_vision_hparams *hp = &v->hp;
    const int p = hp->patch_size, px = Wd / p, py = Ht / p, N = px * py, E = hp->n_embd, hd = hp->head_dim;
    const int FF = hp->n_ff, T = N / 4, P = hp->proj_dim, n_out = rkm_vision_n_out(v), M = 4 * E;
    int side = 1;
    while ((side + 1) * (side + 1) <= hp->n_pos) side++;
    const size_t pp3 = (size_t)3 * p * p;
    vit_rows b = {0};
    float *cs = malloc(sizeof(float) * (size_t)N * hd);
    float *mid = malloc(sizeof(float) * (size_t)T * M), *po = malloc(sizeof(float) * (size_t)T * P);
    float *res = malloc(sizeof(float) * (size_t)T * n_out);
    int rc = vit_rows_alloc(&b, N, RKM_MAX(pp3, (size_t)RKM_MAX(FF, 3 * E)), E, E, E, hd);
    float *cols = b.cols, *x = b.x, *h = b.h, *q = b.q, *kk = b.k, *vv = b.v, *o = b.o, *scratch = b.scratch;
    if (rc || !cs || !mid || !po || !res) {
        rc = rkm_err(RKM_ENOMEM, "out of memory encoding a %dx%d image", Wd, Ht);
        goto out;
    }
    /* patches in merge order (each 2x2 block's four, row by row, the
     * blocks row by row), the conv kernel's order within one: channel,
     * row, column; token t is patch (prow[t], pcol[t]) */
    for (int t = 0; t < N; t++) {
        const int blk = t / 4, bx = blk % (px / 2), by = blk / (px / 2);
        const int cy = 2 * by + (t / 2) % 2, cx = 2 * bx + t % 2;
        float *c = cols + (size_t)t * pp3;
        for (int ch = 0; ch < 3; ch++)
            for (int ky = 0; ky < p; ky++)
                for (int kx = 0; kx < p; kx++) *c++ = img[(size_t)ch * Wd * Ht + (size_t)(cy * p + ky) * Wd + cx * p + kx];
        rope_vision_table(hd, hp->rope_theta, cy, cx, cs + (size_t)t * hd);
    }
    /* the two temporal kernels see the same frame: their sum */
    mm(v, pool, W(v, RKM_V_PATCH_EMBD, -1), cols, N, x);
    mm(v, pool, W(v, RKM_V_PATCH_EMBD_1, -1), cols, N, h);
    for (size_t i = 0; i < (size_t)N * E; i++) x[i] += h[i];
    add_bias(x, F(v, RKM_V_PATCH_BIAS, -1), N, E);
    /* the learned positions, resized to the grid, in merge order */
    resize_pos(F(v, RKM_V_POS_EMBD, -1), side, E, px, py, h);
    for (int t = 0; t < N; t++) {
        const int blk = t / 4, bx = blk % (px / 2), by = blk / (px / 2);
        const int cy = 2 * by + (t / 2) % 2, cx = 2 * bx + t % 2;
        const float *pe = h + ((size_t)cy * px + cx) * E;
        for (int e = 0; e < E; e++) x[(size_t)t * E + e] += pe[e];
    }
    const float kq_scale = 1.0f / sqrtf((float)hd);
    float *qkv = cols;
    int ds_col = P;
    for (int il = 0; il < hp->n_layer; il++) {
        memcpy(h, x, sizeof(float) * (size_t)N * E);
        ln_rows(h, F(v, RKM_V_LN1_W, il), F(v, RKM_V_LN1_B, il), N, E, hp->eps);
        mm(v, pool, W(v, RKM_V_ATTN_QKV, il), h, N, qkv);
        add_bias(qkv, F(v, RKM_V_ATTN_QKV_B, il), N, 3 * E);
        for (int t = 0; t < N; t++) {
            const float *r = qkv + (size_t)t * 3 * E;
            memcpy(q + (size_t)t * E, r, sizeof(float) * (size_t)E);
            memcpy(kk + (size_t)t * E, r + E, sizeof(float) * (size_t)E);
            memcpy(vv + (size_t)t * E, r + 2 * E, sizeof(float) * (size_t)E);
            rope_vision_apply(q + (size_t)t * E, hp->n_head, hd, cs + (size_t)t * hd);
            rope_vision_apply(kk + (size_t)t * E, hp->n_head, hd, cs + (size_t)t * hd);
        }
        attention(pool, q, kk, vv, o, N, hp->n_head, hp->n_head, hd, kq_scale, scratch);
        mm(v, pool, W(v, RKM_V_ATTN_OUT, il), o, N, h);
        add_bias(h, F(v, RKM_V_ATTN_OUT_B, il), N, E);
        for (size_t i = 0; i < (size_t)N * E; i++) x[i] += h[i];
        memcpy(h, x, sizeof(float) * (size_t)N * E);
        ln_rows(h, F(v, RKM_V_LN2_W, il), F(v, RKM_V_LN2_B, il), N, E, hp->eps);
        mm(v, pool, W(v, RKM_V_FFN_UP, il), h, N, cols);
        add_bias(cols, F(v, RKM_V_FFN_UP_B, il), N, FF);
        gelu_rows(cols, (int64_t)N * FF, hp->ffn);
        mm(v, pool, W(v, RKM_V_FFN_DOWN, il), cols, N, h);
        add_bias(h, F(v, RKM_V_FFN_DOWN_B, il), N, E);
        for (size_t i = 0; i < (size_t)N * E; i++) x[i] += h[i];
        if (hp->deepstack[il]) { /* this layer's features through its own merger, after the main ones */
            merge_mlp(v, pool, x, T, RKM_V_DS_NORM_W, RKM_V_DS_NORM_B, RKM_V_DS_FC1_W, RKM_V_DS_FC1_B, RKM_V_DS_FC2_W, RKM_V_DS_FC2_B,
                      il, q, mid, po, res, n_out, ds_col);
            ds_col += P;
        }
    }
    ln_rows(x, F(v, RKM_V_POST_LN_W, -1), F(v, RKM_V_POST_LN_B, -1), N, E, hp->eps);
    merge_mlp(v, pool, x, T, -1, -1, RKM_V_MM0_W, RKM_V_MM0_B, RKM_V_MM2_W, RKM_V_MM2_B, -1, q, mid, po, res, n_out, 0);
    *out = res;
    res = NULL;
    *n_tok = T;
out:
    vit_rows_free(&b);
    free(cs);
    free(mid);
    free(po);
    free(res);
    return rc;
}

int rkm_vision_limit_tokens(rkm_vision *v, int min_tokens, int max_tokens)
{
    return rkm_vision_token_limits(&v->hp, min_tokens, max_tokens);
}

int rkm_vision_supported(const rkm_vision *v)
{
    if (v->hp.proj == RKM_PROJ_GEMMA4V || v->hp.proj == RKM_PROJ_QWEN3VL) return 0;
    return rkm_err(RKM_EUNSUPPORTED, "the %s vision encoder is not implemented yet", rkm_proj_info_of(v->hp.proj)->name);
}

int rkm_vision_encode(rkm_vision *v, rkm_pool *pool, const float *img, int w, int h, float **out, int *n_tokens)
{
    v->mm_rc = 0;
    *out = NULL;
    *n_tokens = 0;
    const int side = v->hp.patch_size * v->hp.n_merge;
    if (w < side || h < side || w % side || h % side)
        return rkm_err(RKM_EINVAL, "a %dx%d image is not a grid of %d-pixel cells", w, h, side);
    int rc;
    switch (v->hp.proj) {
    case RKM_PROJ_GEMMA4V:
    case RKM_PROJ_QWEN3VL:
        rc = v->hp.proj == RKM_PROJ_GEMMA4V ? encode_gemma4v(v, pool, img, w, h, out, n_tokens)
                                            : encode_qwen3vl(v, pool, img, w, h, out, n_tokens);
        if (!rc && v->mm_rc) { /* a matmul failed (the NPU, memory): the rows are not the tower's */
            free(*out);
            *out = NULL;
            *n_tokens = 0;
            rc = rkm_err_prefix(v->mm_rc, "vision tower on the NPU");
        }
        return rc;
    default:
        return rkm_err(RKM_EUNSUPPORTED, "the %s encoder is not implemented yet", rkm_proj_info_of(v->hp.proj)->name);
    }
}
