/*
 * recurrent.c - the recurrent layers, as llama.cpp computes them: LFM2's
 * gated short convolution (shortconv_block), Mamba-2 (Granite 4.0-H,
 * mamba2_block), and Gated DeltaNet (Qwen3.5
 * / 3.6, qwen35 and qwen35moe; Qwen3-Next): the input projections, a short
 * causal convolution over the last ssm_d_conv positions (SiLU), per-head
 * L2-normed queries and keys, and per value head a d_state x d_state state
 * S updated by the gated delta rule
 *
 *     S = exp(g) S;  d = (v - S k) beta;  S += d k^T;  o = S q / sqrt(d_state)
 *
 * with beta = sigmoid(b), g = softplus(a + dt_bias) * ssm_a (ssm_a =
 * -exp(A_log)); then an RMSNorm of each head's output times SiLU(z), and
 * the output projection. Value head h reads key head h % key heads (the
 * tiling llama.cpp's Qwen3.5 GGUF assumes), or h / (value heads per key
 * head) where the heads are grouped (Qwen3-Next, whose projections also
 * come per key head: fused_inputs).
 *
 * State: a session's s->rs holds every recurrent layer's state one after
 * the other (rkm_recurrent_state): the convolution's last ssm_d_conv - 1
 * inputs (kernel-major), then for Gated DeltaNet the value heads'
 * matrices, transposed (row i is key dim i over the value dims: S^T,
 * which rkm_delta_step streams row by row), for Mamba-2 each inner dim's
 * d_state values (rkm_scan_step); LFM2's is the window alone. A sequence
 * starting at position 0 starts from zeros (forward.c). The state cannot
 * be cut back: rkm_session_truncate restores a snapshot taken at the end
 * of a prompt chunk and evaluates the tokens after it (session.c).
 *
 * The convolution runs through rkm_conv_step (the kernel transposed to
 * kernel-major at load, model.c).
 *
 * Threads: the forward pass's (model->lock held); the heads are shared
 * over the pool, one job per sequence segment, each head taking the
 * segment's rows in order.
 */
#include <math.h>
#include <string.h>

#include "runtime/model.h"

float *rkm_recurrent_state(const rkm_session *s, int il) { return s->rs + s->m->layers[il].rs_off; }

void rkm_recurrent_row_floats(const rkm_hparams *hp, size_t *x, size_t *z, size_t *ba, size_t *o)
{
    const size_t inner = (size_t)hp->ssm_d_inner, ch = 2 * (size_t)hp->ssm_n_group * (size_t)hp->ssm_d_state + inner;
    *z = inner;
    *ba = 2 * (size_t)hp->ssm_dt_rank;
    switch (hp->recr_kind) {
    case RKM_RECR_SHORTCONV: /* b, c, x; the gated outputs */
        *x = 3 * (size_t)hp->n_embd;
        *o = (size_t)hp->n_embd;
        break;
    case RKM_RECR_MAMBA2: /* z, x B C, dt; the outputs */
        *x = inner + ch + (size_t)hp->ssm_dt_rank;
        *o = inner;
        break;
    default: /* q k v; the outputs, or the fused projections before fused_inputs takes them apart */
        *x = ch;
        *o = inner + (hp->ssm_fused_in ? ch : 0);
        break;
    }
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static float siluf(float x) { return x / (1.0f + expf(-x)); }
static float softplusf(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

static void l2_norm(float *x, int n, float eps)
{
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * x[i];
    float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int i = 0; i < n; i++) x[i] *= scale;
}

/* One position of the convolution over every channel of x (the window
 * conv and the kernel w kernel-major: rkm_conv_step), plus the bias if
 * any, through SiLU, in place (Gated DeltaNet, Mamba-2). */
static void conv_silu(float *conv, const float *w, const float *bias, float *x, int ch, int K)
{
    rkm_conv_step(conv, w, x, ch, K, x);
    for (int c = 0; c < ch; c++) x[c] = siluf(bias ? x[c] + bias[c] : x[c]);
}

/* The delta rule over a run of value heads (a pool job): each head
 * takes the segment's rows in order (the heads are independent, so one
 * job covers every row of a sequence's segment). */
typedef struct {
    const rkm_hparams *hp;
    const rkm_layer *L;
    float *st;          /* the layer's head states */
    const float *x;     /* the rows' convolved q, k, v (ch apart) */
    const float *ba;    /* the rows' beta and alpha inputs (H each, 2H apart) */
    const float *z;     /* the rows' gates (inner apart) */
    float *o;           /* the rows' outputs (inner apart) */
    int n;              /* rows */
} delta_job;

static void delta_heads(void *ctx, int ith, int nth)
{
    const delta_job *j = ctx;
    const rkm_hparams *hp = j->hp;
    const int H = hp->ssm_dt_rank, Hk = hp->ssm_n_group, S = hp->ssm_d_state, inner = hp->ssm_d_inner;
    const size_t ch = (size_t)2 * Hk * S + (size_t)inner;
    const float scale = 1.0f / sqrtf((float)S), eps = hp->rms_eps;
    float qs[RKM_MAX_SSM_STATE], d[RKM_MAX_SSM_STATE];
    int h0 = (int)((int64_t)H * ith / nth), h1 = (int)((int64_t)H * (ith + 1) / nth);
    for (int h = h0; h < h1; h++) {
        const int kh = hp->ssm_grouped ? h / (H / Hk) : h % Hk;
        for (int r = 0; r < j->n; r++) {
            const float *x = j->x + r * ch, *ba = j->ba + (size_t)r * 2 * H;
            const float *q = x + (size_t)kh * S, *k = x + (size_t)(Hk + kh) * S, *v = x + (size_t)2 * Hk * S + (size_t)h * S;
            float qk = 0;
            for (int i = 0; i < S; i++) {
                qs[i] = q[i] * scale;
                qk += qs[i] * k[i];
            }
            float beta = sigmoidf(ba[h]);
            float decay = expf(softplusf(ba[H + h] + j->L->ssm_dt[h]) * j->L->ssm_a[h]);
            float *o = j->o + (size_t)r * inner + (size_t)h * S;
            rkm_delta_step(j->st + (size_t)h * S * S, qs, k, v, decay, beta, qk, S, o, d);
            /* gated RMSNorm: norm(o) * silu(z) */
            rkm_rmsnorm(o, o, j->L->ssm_norm, S, eps);
            const float *z = j->z + (size_t)r * inner + (size_t)h * S;
            for (int e = 0; e < S; e++) o[e] *= siluf(z[e]);
        }
    }
}

/* Qwen3-Next's projections, which group the value heads by key head:
 * beta and alpha in one (per key head: its r value heads' betas, then
 * their alphas), and in older files q, k, v and z in one (per key head:
 * q, k, then its value heads' v, then their z). Into the layout of the
 * split projections: s->ssm_x [q | k | v], s->ssm_z, s->ssm_ba [beta |
 * alpha]. */
static int fused_inputs(rkm_session *s, const rkm_layer *L, int n)
{
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const int H = hp->ssm_dt_rank, Hk = hp->ssm_n_group, S = hp->ssm_d_state, r = H / Hk;
    const int inner = hp->ssm_d_inner, ch = 2 * Hk * S + inner;
    int rc;
    if (hp->ssm_fused_in) {
        float *t = s->ssm_o; /* n x (ch + inner), until the rows below use it */
        if ((rc = rkm_model_mm(m, &L->ssm_in_qkvz, s->cur, n, t))) return rc;
        for (int row = 0; row < n; row++) {
            const float *src = t + (size_t)row * (ch + inner);
            float *x = s->ssm_x + (size_t)row * ch, *z = s->ssm_z + (size_t)row * inner;
            for (int g = 0; g < Hk; g++, src += 2 * S + 2 * r * S) {
                memcpy(x + (size_t)g * S, src, sizeof(float) * (size_t)S);
                memcpy(x + (size_t)(Hk + g) * S, src + S, sizeof(float) * (size_t)S);
                memcpy(x + (size_t)2 * Hk * S + (size_t)g * r * S, src + 2 * S, sizeof(float) * (size_t)r * S);
                memcpy(z + (size_t)g * r * S, src + 2 * S + r * S, sizeof(float) * (size_t)r * S);
            }
        }
    } else if (n <= RKM_MM_MULTI_MAX_ROWS) {
        rkm_mm_task t[2] = {rkm_mm_task_of(&L->ssm_in, s->cur, n, s->ssm_x), rkm_mm_task_of(&L->ssm_z, s->cur, n, s->ssm_z)};
        rkm_mm_multi(m->pool, t, 2);
    } else if ((rc = rkm_model_mm(m, &L->ssm_in, s->cur, n, s->ssm_x)) || (rc = rkm_model_mm(m, &L->ssm_z, s->cur, n, s->ssm_z))) {
        return rc;
    }
    if ((rc = rkm_model_mm(m, &L->ssm_ba, s->cur, n, s->ssm_ba))) return rc;
    float *tmp = s->ssm_o; /* 2H <= inner */
    for (int row = 0; row < n; row++) {
        float *ba = s->ssm_ba + (size_t)row * 2 * H;
        memcpy(tmp, ba, sizeof(float) * 2 * (size_t)H);
        for (int g = 0; g < Hk; g++)
            for (int i = 0; i < r; i++) {
                ba[g * r + i] = tmp[g * 2 * r + i];
                ba[H + g * r + i] = tmp[g * 2 * r + r + i];
            }
    }
    return 0;
}

/* LFM2's gated short convolution: in_proj gives b, c and x per channel;
 * the causal convolution over the last K values of b*x (weights oldest
 * first), gated by c, then out_proj. The state: the last K - 1 values of
 * b*x. */
static int shortconv_block(rkm_session *s, int il, const rkm_seg *seg, int nseg, int n)
{
    rkm_model *m = s->m;
    const rkm_layer *L = &m->layers[il];
    const int E = m->hp.n_embd, K = m->hp.ssm_d_conv;
    int rc;
    if ((rc = rkm_model_mm(m, &L->sc_in, s->cur, n, s->ssm_x))) return rc;
    for (int i = 0; i < nseg; i++) {
        float *conv = rkm_recurrent_state(seg[i].s, il);
        for (int jr = 0; jr < seg[i].n; jr++) {
            int r = seg[i].row0 + jr;
            const float *b = s->ssm_x + (size_t)r * 3 * E, *c = b + E, *x = b + 2 * E;
            float *y = s->ssm_o + (size_t)r * E;
            for (int e = 0; e < E; e++) y[e] = b[e] * x[e];
            rkm_conv_step(conv, L->ssm_conv, y, E, K, y);
            for (int e = 0; e < E; e++) y[e] *= c[e];
        }
    }
    return rkm_model_mm(m, &L->sc_out, s->ssm_o, n, s->tmp);
}

/* Mamba-2's scan over a run of heads (a pool job), each head taking the
 * segment's rows in order. */
typedef struct {
    const rkm_hparams *hp;
    const rkm_layer *L;
    float *st;          /* the layer's (inner x state) scan state */
    const float *xbc;   /* the rows' convolved x, B, C (nin apart) */
    const float *dt;    /* the rows' dt inputs (heads; nin apart) */
    float *y;           /* the rows' outputs (inner apart) */
    int n;              /* rows */
    size_t nin;         /* the in_proj row */
} mamba_job;

static void mamba_heads(void *ctx, int ith, int nth)
{
    const mamba_job *j = ctx;
    const rkm_hparams *hp = j->hp;
    const int nh = hp->ssm_dt_rank, ng = hp->ssm_n_group, ds = hp->ssm_d_state, di = hp->ssm_d_inner, hd = di / nh;
    int h0 = (int)((int64_t)nh * ith / nth), h1 = (int)((int64_t)nh * (ith + 1) / nth);
    for (int h = h0; h < h1; h++) {
        const int g = h / (nh / ng);
        for (int r = 0; r < j->n; r++) {
            const float *xbc = j->xbc + r * j->nin, *dt = j->dt + r * j->nin;
            float *y = j->y + (size_t)r * di;
            const float dtp = softplusf(dt[h] + j->L->ssm_dt[h]), dA = expf(dtp * j->L->ssm_a[h]);
            const float *B = xbc + di + (size_t)g * ds, *C = xbc + di + (size_t)ng * ds + (size_t)g * ds;
            for (int d = 0; d < hd; d++) {
                const int ii = h * hd + d;
                const float xdt = xbc[ii] * dtp;
                float sum = rkm_scan_step(j->st + (size_t)ii * ds, B, C, dA, xdt, ds);
                y[ii] = sum + xbc[ii] * j->L->ssm_d[h];
            }
        }
    }
}

/* Mamba-2 (Granite 4.0-H): in_proj gives z, x B C and dt; a causal
 * convolution with a bias over x B C (SiLU); per head h (B and C of group
 * h / (heads per group)) the scan state[d][i] = exp(softplus(dt + bias) A)
 * state[d][i] + B[i] x[d] softplus(...), y[d] = state[d] . C + D x[d];
 * then y * SiLU(z), an RMSNorm per group, and out_proj. The state: the
 * convolution's last K - 1 inputs, then inner x d_state. */
static int mamba2_block(rkm_session *s, int il, const rkm_seg *seg, int nseg, int n)
{
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const rkm_layer *L = &m->layers[il];
    const int K = hp->ssm_d_conv, di = hp->ssm_d_inner, ng = hp->ssm_n_group, ds = hp->ssm_d_state, nh = hp->ssm_dt_rank;
    const int ch = di + 2 * ng * ds, nin = di + ch + nh, gw = di / ng;
    int rc;
    if ((rc = rkm_model_mm(m, &L->ssm_in_qkvz, s->cur, n, s->ssm_x))) return rc;
    for (int i = 0; i < nseg; i++) {
        float *conv = rkm_recurrent_state(seg[i].s, il);
        float *st = conv + (size_t)(K - 1) * ch;
        const int r0 = seg[i].row0;
        for (int jr = 0; jr < seg[i].n; jr++)
            conv_silu(conv, L->ssm_conv, L->ssm_conv_b, s->ssm_x + (size_t)(r0 + jr) * nin + di, ch, K);
        float *z0 = s->ssm_x + (size_t)r0 * nin;
        mamba_job j = {hp, L, st, z0 + di, z0 + di + ch, s->ssm_o + (size_t)r0 * di, seg[i].n, (size_t)nin};
        rkm_pool_run(rkm_pool_for(m->pool, (double)di * ds * 3 * seg[i].n), mamba_heads, &j);
        for (int jr = 0; jr < seg[i].n; jr++) {
            const float *z = z0 + (size_t)jr * nin;
            float *y = s->ssm_o + (size_t)(r0 + jr) * di;
            for (int e = 0; e < di; e++) y[e] *= siluf(z[e]);
            for (int g = 0; g < ng; g++) rkm_rmsnorm(y + (size_t)g * gw, y + (size_t)g * gw, L->ssm_norm + (size_t)g * gw, gw, hp->rms_eps);
        }
    }
    return rkm_model_mm(m, &L->ssm_out, s->ssm_o, n, s->tmp);
}

int rkm_recurrent_block(rkm_session *s, int il, const rkm_seg *seg, int nseg, int n)
{
    if (s->m->hp.recr_kind == RKM_RECR_SHORTCONV) return shortconv_block(s, il, seg, nseg, n);
    if (s->m->hp.recr_kind == RKM_RECR_MAMBA2) return mamba2_block(s, il, seg, nseg, n);
    rkm_model *m = s->m;
    const rkm_hparams *hp = &m->hp;
    const rkm_layer *L = &m->layers[il];
    const int H = hp->ssm_dt_rank, Hk = hp->ssm_n_group, S = hp->ssm_d_state, K = hp->ssm_d_conv;
    const int inner = hp->ssm_d_inner, ch = 2 * Hk * S + inner;
    const float eps = hp->rms_eps;
    int rc;
    /* the ba rows: beta's H inputs, then alpha's */
    if (hp->ssm_fused_in || hp->ssm_grouped) {
        if ((rc = fused_inputs(s, L, n))) return rc;
    } else if (n <= RKM_MM_MULTI_MAX_ROWS) {
        rkm_mm_task t[4] = {rkm_mm_task_of(&L->ssm_in, s->cur, n, s->ssm_x), rkm_mm_task_of(&L->ssm_z, s->cur, n, s->ssm_z),
                            rkm_mm_task_of(&L->ssm_beta, s->cur, n, s->ssm_ba),
                            rkm_mm_task_of(&L->ssm_alpha, s->cur, n, s->ssm_ba + H)};
        t[2].ldy = t[3].ldy = 2 * H;
        rkm_mm_multi(m->pool, t, 4);
    } else {
        if ((rc = rkm_model_mm(m, &L->ssm_in, s->cur, n, s->ssm_x)) || (rc = rkm_model_mm(m, &L->ssm_z, s->cur, n, s->ssm_z)))
            return rc;
        /* beta then alpha, each row's pair side by side */
        rkm_matmul(m->pool, L->ssm_beta.type, L->ssm_beta.data, L->ssm_beta.n_in, L->ssm_beta.n_out, s->cur, n, s->ssm_ba, 2 * H);
        rkm_matmul(m->pool, L->ssm_alpha.type, L->ssm_alpha.data, L->ssm_alpha.n_in, L->ssm_alpha.n_out, s->cur, n,
                   s->ssm_ba + H, 2 * H);
    }
    for (int i = 0; i < nseg; i++) {
        float *conv = rkm_recurrent_state(seg[i].s, il);
        float *st = conv + (size_t)(K - 1) * ch;
        const int r0 = seg[i].row0;
        for (int jr = 0; jr < seg[i].n; jr++) {
            float *x = s->ssm_x + (size_t)(r0 + jr) * ch;
            conv_silu(conv, L->ssm_conv, NULL, x, ch, K);
            for (int h = 0; h < 2 * Hk; h++) l2_norm(x + (size_t)h * S, S, eps);
        }
        delta_job j = {hp, L, st, s->ssm_x + (size_t)r0 * ch, s->ssm_ba + (size_t)r0 * 2 * H, s->ssm_z + (size_t)r0 * inner,
                       s->ssm_o + (size_t)r0 * inner, seg[i].n};
        rkm_pool_run(rkm_pool_for(m->pool, (double)H * S * S * 4 * seg[i].n), delta_heads, &j);
    }
    return rkm_model_mm(m, &L->ssm_out, s->ssm_o, n, s->tmp);
}
