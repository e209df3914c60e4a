/*
 * ref_forward.c - a naive float64 reference of the forward pass, written
 * separately from src/runtime from the architecture descriptions in
 * ../shared/fixtures/README.md and ../shared/ARCHITECTURES.md. No f16 KV,
 * no activation quantization, exact GELU, one token at a time over the
 * whole sequence: slow and simple, so a disagreement with the engine points
 * at the engine's layer and op (test-forward.c compares them layer by
 * layer).
 *
 * Included by tests/test-forward.c (the Makefile builds tests/test-*.c
 * only). Reads weights through src/format/model_dir.h and dequantizes
 * them with the reference rkm_dequantize_row. Single-threaded; everything
 * is freed by ref_close.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/model_dir.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"

#define RKM_MAX_EXPERTS_REF 512 /* the reference caches one layer's experts */

typedef struct ref_model {
    const rkm_model_dir *md;
    const rkm_hparams *hp;
} ref_model;

/* Called with the residual stream after each stage: il = -1 for the
 * embeddings, il = n_layer for the final norm; x is n x n_embd. */
typedef void (*ref_trace_fn)(void *user, int il, const char *what, const double *x, int n, int n_embd);

static double *ref_deq(int type, const void *src, int64_t n)
{
    float *f = malloc(sizeof(float) * (size_t)n);
    double *d = malloc(sizeof(double) * (size_t)n);
    rkm_dequantize_row(type, src, f, n);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    free(f);
    return d;
}

static void ref_register(const double *p, int type);

/* Whole tensor as doubles (NULL if absent). */
static double *ref_tensor(const ref_model *r, const char *fmt, int il)
{
    char name[128];
    snprintf(name, sizeof name, fmt, il);
    const rkm_tensor_view *t = rkm_model_dir_tensor(r->md, name);
    if (!t) return NULL;
    double *d = ref_deq(t->type, t->data, t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    ref_register(d, t->type);
    return d;
}

/* Weights of a quantized type (q8_0, q4_0) are multiplied, like ggml's CPU
 * backend does, with activations rounded to q8_0 blocks (d = max|x|/127 as
 * f16, q = round(x/d)) when ref_emulate_q8 is set. The matrices' types are
 * remembered by address when they are loaded. */
static int ref_emulate_q8;
static struct {
    const double *p;
    int quant;
} ref_reg[1 << 14];
static unsigned ref_nreg;

static void ref_register(const double *p, int type)
{
    ref_reg[ref_nreg++ % (1u << 14)].p = p;
    ref_reg[(ref_nreg - 1) % (1u << 14)].quant = type == RKM_TYPE_Q8_0 || type == RKM_TYPE_Q4_0;
}

static int ref_is_quant(const double *p)
{
    for (unsigned i = 0; i < (1u << 14) && i < ref_nreg; i++) {
        unsigned k = (ref_nreg - 1 - i) % (1u << 14);
        if (ref_reg[k].p == p) return ref_reg[k].quant;
    }
    return 0;
}

static void ref_matvec(const double *w, int n_in, int n_out, const double *xin, double *y)
{
    const double *x = xin;
    double *xq = NULL;
    if (ref_emulate_q8 && n_in % 32 == 0 && ref_is_quant(w)) {
        xq = malloc(sizeof(double) * n_in);
        for (int b = 0; b < n_in; b += 32) {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf((float)xin[b + i]));
            float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            double dh = rkm_f16_to_f32(rkm_f32_to_f16(d));
            for (int i = 0; i < 32; i++) xq[b + i] = roundf((float)xin[b + i] * id) * dh;
        }
        x = xq;
    }
    for (int o = 0; o < n_out; o++) {
        double s = 0;
        for (int i = 0; i < n_in; i++) s += w[(size_t)o * n_in + i] * x[i];
        y[o] = s;
    }
    free(xq);
}

static void ref_rms(double *x, int n, const double *w, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double sc = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) x[i] = x[i] * sc * (w ? w[i] : 1.0);
}

static double ref_act(const rkm_hparams *hp, double g)
{
    if (hp->act == RKM_ACT_GELU_TANH)
        return 0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
    return g / (1.0 + exp(-g));
}

static void ref_rope(double *v, int hd, int rd, int neox, double base, const double *freqs, int pos)
{
    for (int i = 0; i < rd / 2; i++) {
        double th = pos * pow(base, -2.0 * i / rd);
        if (freqs) th /= freqs[i];
        int a = neox ? i : 2 * i, b = neox ? i + rd / 2 : 2 * i + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * cos(th) - x1 * sin(th);
        v[b] = x0 * sin(th) + x1 * cos(th);
    }
    (void)hd;
}

/* y = down(act(gate x) * up x) with dequantized matrices. */
static void ref_glu(const rkm_hparams *hp, const double *g, const double *u, const double *d, int E, int ff,
                    const double *x, double *y)
{
    double *a = malloc(sizeof(double) * ff), *b = malloc(sizeof(double) * ff);
    ref_matvec(g, E, ff, x, a);
    ref_matvec(u, E, ff, x, b);
    for (int i = 0; i < ff; i++) a[i] = ref_act(hp, a[i]) * b[i];
    ref_matvec(d, ff, E, a, y);
    free(a);
    free(b);
}

/* Routed experts of layer il for one row x (router input rin). */
static void ref_moe(const ref_model *r, int il, const double *x, const double *rin, double *y, double **exp_cache)
{
    const rkm_hparams *hp = r->hp;
    int E = hp->n_embd, ne = hp->n_expert, k = hp->n_expert_used;
    const rkm_expert_layer *el = rkm_model_dir_expert_layer(r->md, il);
    double *wr = ref_tensor(r, "blk.%d.ffn_gate_inp.weight", il);
    double *es = ref_tensor(r, "blk.%d.ffn_down_exps.scale", il);
    double *p = malloc(sizeof(double) * ne);
    ref_matvec(wr, E, ne, rin, p);
    double mx = p[0], sum = 0;
    for (int e = 1; e < ne; e++) mx = fmax(mx, p[e]);
    for (int e = 0; e < ne; e++) sum += (p[e] = exp(p[e] - mx));
    for (int e = 0; e < ne; e++) p[e] /= sum;
    int sel[64];
    double w[64], wsum = 0;
    for (int j = 0; j < k; j++) {
        int b = -1;
        for (int e = 0; e < ne; e++) {
            int used = 0;
            for (int t = 0; t < j; t++) used |= sel[t] == e;
            if (!used && (b < 0 || p[e] > p[b])) b = e;
        }
        sel[j] = b;
        w[j] = p[b];
        wsum += p[b];
    }
    memset(y, 0, sizeof(double) * E);
    double *o = malloc(sizeof(double) * E);
    int ff = (int)el->part[RKM_PART_GATE].ne[1];
    for (int j = 0; j < k; j++) {
        int e = sel[j];
        double *W = exp_cache[e];
        if (!W) {
            uint8_t *blob = malloc(el->blob_stride);
            rkm_model_dir_read_expert(r->md, il, e, blob, 1);
            size_t n1 = (size_t)ff * E;
            W = malloc(sizeof(double) * 3 * n1);
            for (int pt = 0; pt < 3; pt++) {
                int ty = el->part[pt].type;
                if (ty & RKM_TYPE_PACKED) { /* the stored rows interleaved: plain them first */
                    ty = rkm_unpack_type(ty);
                    rkm_unpack_rows(ty, blob + el->part[pt].offset, el->part[pt].ne[0], el->part[pt].ne[1]);
                }
                double *d = ref_deq(ty, blob + el->part[pt].offset, (int64_t)n1);
                memcpy(W + pt * n1, d, sizeof(double) * n1);
                free(d);
            }
            free(blob);
            for (int pt = 0; pt < 3; pt++) ref_register(W + pt * n1, rkm_unpack_type(el->part[pt].type));
            exp_cache[e] = W;
        }
        size_t n1 = (size_t)ff * E;
        ref_glu(hp, W, W + n1, W + 2 * n1, E, ff, x, o);
        double g = hp->expert_norm_topk ? w[j] / wsum : w[j];
        if (es) g *= es[e];
        for (int c = 0; c < E; c++) y[c] += g * o[c];
    }
    free(o);
    free(p);
    free(wr);
    free(es);
}

/* Runs ids[0..n) from an empty context; logits of the last position into
 * logits (n_vocab). Returns 0. */
static int ref_forward(const ref_model *r, const int32_t *ids, int n, double *logits, ref_trace_fn tr, void *user)
{
    const rkm_hparams *hp = r->hp;
    int E = hp->n_embd, nh = hp->n_head, NL = hp->n_layer;
    double eps = hp->rms_eps;
    double *x = calloc((size_t)n * E, sizeof(double));
    const rkm_tensor_view *te = rkm_model_dir_tensor(r->md, "token_embd.weight");
    size_t rb = rkm_type_row_bytes(te->type, E);
    for (int t = 0; t < n; t++) {
        double *row = ref_deq(te->type, (const uint8_t *)te->data + (size_t)ids[t] * rb, E);
        for (int c = 0; c < E; c++) x[(size_t)t * E + c] = row[c] * (hp->embed_scale > 0 ? hp->embed_scale : 1.0);
        free(row);
    }
    if (tr) tr(user, -1, "embd", x, n, E);
    double *h = malloc(sizeof(double) * E), *o = malloc(sizeof(double) * E), *f = malloc(sizeof(double) * E);
    for (int il = 0; il < NL; il++) {
        int swa = hp->sliding_window > 0 && hp->swa_layer[il];
        int nkv = hp->n_head_kv[il];
        int hd = swa ? hp->head_dim_swa : hp->head_dim, hv = swa ? hp->head_dim_swa : hp->head_dim_v;
        int rd = swa ? hp->rope_dim_swa : hp->rope_dim;
        double base = swa ? hp->rope_theta_swa : hp->rope_theta;
        int vfk = hp->v_from_k_full && !swa;
        double *an = ref_tensor(r, "blk.%d.attn_norm.weight", il);
        double *wq = ref_tensor(r, "blk.%d.attn_q.weight", il), *wk = ref_tensor(r, "blk.%d.attn_k.weight", il);
        double *wv = vfk ? NULL : ref_tensor(r, "blk.%d.attn_v.weight", il);
        double *wo = ref_tensor(r, "blk.%d.attn_output.weight", il);
        double *bq = ref_tensor(r, "blk.%d.attn_q.bias", il), *bk = ref_tensor(r, "blk.%d.attn_k.bias", il);
        double *bv = ref_tensor(r, "blk.%d.attn_v.bias", il);
        double *qn = ref_tensor(r, "blk.%d.attn_q_norm.weight", il), *kn = ref_tensor(r, "blk.%d.attn_k_norm.weight", il);
        double *freqs = swa || !hp->has_rope_freqs ? NULL : ref_tensor(r, "rope_freqs.weight", 0);
        double *pan = ref_tensor(r, "blk.%d.post_attention_norm.weight", il);
        int qd = nh * hd, kd = nkv * hd, vd = nkv * hv;
        double *Q = malloc(sizeof(double) * (size_t)n * qd), *K = malloc(sizeof(double) * (size_t)n * kd);
        double *V = malloc(sizeof(double) * (size_t)n * vd);
        for (int t = 0; t < n; t++) {
            memcpy(h, x + (size_t)t * E, sizeof(double) * E);
            ref_rms(h, E, an, eps);
            double *q = Q + (size_t)t * qd, *k = K + (size_t)t * kd, *v = V + (size_t)t * vd;
            ref_matvec(wq, E, qd, h, q);
            ref_matvec(wk, E, kd, h, k);
            if (vfk) memcpy(v, k, sizeof(double) * kd);
            else ref_matvec(wv, E, vd, h, v);
            for (int i = 0; bq && i < qd; i++) q[i] += bq[i];
            for (int i = 0; bk && i < kd; i++) k[i] += bk[i];
            for (int i = 0; bv && i < vd; i++) v[i] += bv[i];
            if (hp->qk_norm == RKM_QK_NORM_HEAD) {
                for (int a = 0; a < nh; a++) ref_rms(q + a * hd, hd, qn, eps);
                for (int a = 0; a < nkv; a++) ref_rms(k + a * hd, hd, kn, eps);
            } else if (hp->qk_norm == RKM_QK_NORM_FULL) {
                ref_rms(q, qd, qn, eps);
                ref_rms(k, kd, kn, eps);
            }
            if (hp->v_norm)
                for (int a = 0; a < nkv; a++) ref_rms(v + a * hv, hv, NULL, eps);
            for (int a = 0; a < nh; a++) ref_rope(q + a * hd, hd, rd, hp->rope_neox, base, freqs, t);
            for (int a = 0; a < nkv; a++) ref_rope(k + a * hd, hd, rd, hp->rope_neox, base, freqs, t);
        }
        double scale = hp->attn_scale > 0 ? hp->attn_scale : 1.0 / sqrt((double)hd);
        double *att = malloc(sizeof(double) * (size_t)nh * hv), *sc = malloc(sizeof(double) * n);
        for (int t = 0; t < n; t++) {
            int lo = swa ? (t - hp->sliding_window + 1 > 0 ? t - hp->sliding_window + 1 : 0) : 0;
            for (int a = 0; a < nh; a++) {
                int kh = a / (nh / nkv);
                double mx = -1e300, sum = 0;
                for (int j = lo; j <= t; j++) {
                    double s = 0;
                    for (int i = 0; i < hd; i++) s += Q[(size_t)t * qd + a * hd + i] * K[(size_t)j * kd + kh * hd + i];
                    if (hp->attn_softcap > 0) s = hp->attn_softcap * tanh(s / hp->attn_softcap);
                    sc[j] = s * scale;
                    mx = fmax(mx, sc[j]);
                }
                for (int j = lo; j <= t; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int i = 0; i < hv; i++) {
                    double acc = 0;
                    for (int j = lo; j <= t; j++) acc += sc[j] / sum * V[(size_t)j * vd + kh * hv + i];
                    att[a * hv + i] = acc;
                }
            }
            ref_matvec(wo, nh * hv, E, att, o);
            if (pan) ref_rms(o, E, pan, eps);
            for (int c = 0; c < E; c++) x[(size_t)t * E + c] += o[c];
        }
        if (tr) tr(user, il, "attn_out", x, n, E);
        free(att);
        free(sc);
        /* feed-forward */
        double *fn = ref_tensor(r, "blk.%d.ffn_norm.weight", il);
        double *g = ref_tensor(r, "blk.%d.ffn_gate.weight", il), *u = ref_tensor(r, "blk.%d.ffn_up.weight", il);
        double *d = ref_tensor(r, "blk.%d.ffn_down.weight", il);
        int moe = rkm_hparams_is_moe_layer(hp, il);
        double *ecache[RKM_MAX_EXPERTS_REF] = {0};
        double *sg = ref_tensor(r, "blk.%d.ffn_gate_shexp.weight", il), *su = ref_tensor(r, "blk.%d.ffn_up_shexp.weight", il);
        double *sd = ref_tensor(r, "blk.%d.ffn_down_shexp.weight", il);
        double *sgi = ref_tensor(r, "blk.%d.ffn_gate_inp_shexp.weight", il);
        double *pf1 = ref_tensor(r, "blk.%d.post_ffw_norm_1.weight", il), *pf2 = ref_tensor(r, "blk.%d.pre_ffw_norm_2.weight", il);
        double *pof2 = ref_tensor(r, "blk.%d.post_ffw_norm_2.weight", il), *pof = ref_tensor(r, "blk.%d.post_ffw_norm.weight", il);
        double *rsc = ref_tensor(r, "blk.%d.ffn_gate_inp.scale", il), *los = ref_tensor(r, "blk.%d.layer_output_scale.weight", il);
        double *h2 = malloc(sizeof(double) * E), *o2 = malloc(sizeof(double) * E);
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * E;
            memcpy(h, xt, sizeof(double) * E);
            ref_rms(h, E, fn, eps);
            if (!hp->gemma4_norms) {
                if (moe) {
                    ref_moe(r, il, h, h, f, ecache);
                    if (sg) {
                        ref_glu(hp, sg, su, sd, E, hp->n_ff_shexp, h, o);
                        double gate = 1;
                        if (sgi) {
                            double z = 0;
                            for (int c = 0; c < E; c++) z += sgi[c] * h[c];
                            gate = 1 / (1 + exp(-z));
                        }
                        for (int c = 0; c < E; c++) f[c] += gate * o[c];
                    }
                } else {
                    ref_glu(hp, g, u, d, E, hp->n_ff, h, f);
                }
                for (int c = 0; c < E; c++) xt[c] += f[c];
            } else {
                ref_glu(hp, g, u, d, E, hp->n_ff, h, f);
                if (moe) {
                    ref_rms(f, E, pf1, eps);
                    memcpy(h, xt, sizeof(double) * E);
                    ref_rms(h, E, NULL, eps);
                    for (int c = 0; c < E; c++) h[c] = h[c] / sqrt((double)E) * (rsc ? rsc[c] : 1);
                    memcpy(h2, xt, sizeof(double) * E);
                    ref_rms(h2, E, pf2, eps);
                    ref_moe(r, il, h2, h, o2, ecache);
                    ref_rms(o2, E, pof2, eps);
                    for (int c = 0; c < E; c++) f[c] += o2[c];
                }
                ref_rms(f, E, pof, eps);
                for (int c = 0; c < E; c++) xt[c] = (xt[c] + f[c]) * (los ? los[0] : 1);
            }
        }
        if (tr) tr(user, il, "layer_out", x, n, E);
        for (int e = 0; e < RKM_MAX_EXPERTS_REF; e++) free(ecache[e]);
        double *fr[] = {an, wq, wk, wv, wo, bq, bk, bv, qn, kn, freqs, pan, Q, K, V, fn, g, u, d,
                        sg, su, sd, sgi, pf1, pf2, pof2, pof, rsc, los, h2, o2};
        for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    }
    double *on = ref_tensor(r, "output_norm.weight", 0);
    double *wout = hp->tied_output ? NULL : ref_tensor(r, "output.weight", 0);
    if (!wout) wout = ref_tensor(r, "token_embd.weight", 0);
    for (int t = 0; t < n; t++) ref_rms(x + (size_t)t * E, E, on, eps);
    if (tr) tr(user, NL, "final_norm", x, n, E);
    ref_matvec(wout, E, hp->n_vocab, x + (size_t)(n - 1) * E, logits);
    if (hp->final_softcap > 0)
        for (int i = 0; i < hp->n_vocab; i++) logits[i] = hp->final_softcap * tanh(logits[i] / hp->final_softcap);
    free(on);
    free(wout);
    free(h);
    free(o);
    free(f);
    free(x);
    return 0;
}
