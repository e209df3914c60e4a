/*
 * model.c - rkm_model_open/close: maps a .rkmojo directory, binds the
 * weight views of every layer (rkm_layer) from the architecture's tensor
 * table (format/arch.h: names, shapes, presence), creates the
 * thread pool and the expert cache, and loads the tokenizer.
 *
 * Owns: the model dir (mapping), the vectors it had to dequantize at load
 * (model->owned), the pool, the expert cache, the tokenizer and the chat
 * template. Threads: built by one thread; afterwards read-only except what
 * model->lock guards (see model.h).
 */
#include "runtime/model.h"
#include "text/grammar.h"

#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/backend.h"
#include "kernels/rknn_i8.h"
#include "runtime/budget.h"
#include "runtime/model_text.h"
#include "util/knobs.h"

void rkm_model_params_default(rkm_model_params *p)
{
    memset(p, 0, sizeof *p);
    p->prefetch = -1;
}

void rkm_sampler_params_for_model(const rkm_model *m, rkm_sampler_params *p)
{
    rkm_sampler_params_default(p);
    if (!m || !m->md) return;
    const rkm_sampling_hint *h = &m->md->sampling;
    if (h->set & RKM_SAMPLING_TEMPERATURE) p->temperature = h->temperature;
    if (h->set & RKM_SAMPLING_TOP_K) p->top_k = h->top_k;
    if (h->set & RKM_SAMPLING_TOP_P) p->top_p = h->top_p;
    if (h->set & RKM_SAMPLING_MIN_P) p->min_p = h->min_p;
    if (h->set & RKM_SAMPLING_REPEAT_PENALTY) p->repeat_penalty = h->repeat_penalty;
    if (h->set & RKM_SAMPLING_REPEAT_LAST_N) p->repeat_last_n = h->repeat_last_n;
}

/* The word of a model knob among words[] (index), -1 if unset, -2 (with
 * the message) if it is none of them. */
static int knob_word(int id, const char *const *words, int n_words)
{
    const char *v = rkm_knob(id);
    if (!v) return -1;
    for (int i = 0; i < n_words; i++)
        if (!strcmp(v, words[i])) return i;
    char list[128] = "";
    for (int i = 0; i < n_words; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", words[i]);
    rkm_err(RKM_EINVAL, "%s must be one of %s (got '%s')", rkm_knob_info_of(id)->name, list, v);
    return -2;
}

int rkm_model_params_from_knobs(rkm_model_params *p)
{
    static const char *const npu_dense[] = {"1", "0", "force"};
    static const char *const pack[] = {"1", "0", "resident"};
    static const char *const on_off[] = {"0", "1"};
    static const char *const verify[] = {"always", "first", "never"};
    static const char *const io[] = {"auto", "pread", "uring"};
    int w;
    const char *bk = rkm_knob(RKM_KNOB_BACKEND);
    if (bk && (w = rkm_backend_kind_from_name(bk)) < 0)
        return rkm_err(RKM_EINVAL, "RKM_BACKEND must be auto, cpu or rknn (got '%s')", bk);
    if (bk && p->backend == RKM_BACKEND_AUTO) p->backend = w;
    if ((w = knob_word(RKM_KNOB_NPU_DENSE, npu_dense, 3)) == -2) return RKM_EINVAL;
    if (w >= 0 && p->npu_dense == 0) p->npu_dense = w;
    if ((w = knob_word(RKM_KNOB_PACK, pack, 3)) == -2) return RKM_EINVAL;
    if (w >= 0 && p->pack == 0) p->pack = w;
    if ((w = knob_word(RKM_KNOB_LAZY_EXPERTS, on_off, 2)) == -2) return RKM_EINVAL;
    if (w == 1) p->lazy_experts = 1;
    if ((w = knob_word(RKM_KNOB_VERIFY, verify, 3)) == -2) return RKM_EINVAL;
    if (w >= 0 && p->verify == 0) p->verify = w;
    static const char *const verify_res[] = {"load", "background", "never"};
    if ((w = knob_word(RKM_KNOB_VERIFY_RESIDENT, verify_res, 3)) == -2) return RKM_EINVAL;
    if (w >= 0 && p->verify_resident == 0) p->verify_resident = w;
    if ((w = knob_word(RKM_KNOB_PREFAULT, on_off, 2)) == -2) return RKM_EINVAL;
    if (w >= 0 && p->prefault == 0) p->prefault = w == 1 ? 2 : 1;
    if ((w = knob_word(RKM_KNOB_IO_BACKEND, io, 3)) == -2) return RKM_EINVAL;
    if (w >= 0 && p->io_backend == 0) p->io_backend = w;
    if (!p->trace_out) p->trace_out = rkm_knob(RKM_KNOB_TRACE_OUT);
    return 0;
}

/* Hands buf to the model (freed at close); on failure frees buf itself:
 * 0 or RKM_ENOMEM. */
static int own(rkm_model *m, void *buf)
{
    float **o = buf ? realloc(m->owned, sizeof(float *) * (size_t)(m->n_owned + 1)) : NULL;
    if (!o) {
        free(buf);
        return RKM_ENOMEM;
    }
    m->owned = o;
    m->owned[m->n_owned++] = buf;
    return 0;
}

/* A vector of n floats; dequantized into an owned buffer when not f32. */
static int vec(rkm_model *m, const char *name, int64_t n, int required, const float **out)
{
    *out = NULL;
    const rkm_tensor_view *t = rkm_model_dir_tensor(m->md, name);
    if (!t) return required ? rkm_err(RKM_EFORMAT, "model: missing tensor %s", name) : 0;
    int64_t ne = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (ne != n) return rkm_err(RKM_EFORMAT, "model: %s has %lld values, expected %lld", name, (long long)ne, (long long)n);
    if (!t->data) return rkm_err(RKM_EFORMAT, "model: %s is not mapped", name);
    if (t->type == RKM_TYPE_F32) {
        *out = t->data;
        return 0;
    }
    if (!rkm_type_readable(t->type) || n % rkm_type_block_size(t->type))
        return rkm_err(RKM_EUNSUPPORTED, "model: %s has type %d", name, t->type);
    float *buf = malloc(sizeof(float) * (size_t)n);
    if (own(m, buf)) return rkm_err(RKM_ENOMEM, "model: out of memory");
    rkm_dequantize_row(t->type, t->data, buf, n);
    *out = buf;
    return 0;
}

static int mat_type_ok(int type)
{
    return rkm_type_matmul(type) && !rkm_type_packed(type);
}

/* A matrix n_in -> n_out. */
static int mat(rkm_model *m, const char *name, int64_t n_in, int64_t n_out, int required, rkm_mat *out)
{
    memset(out, 0, sizeof *out);
    const rkm_tensor_view *t = rkm_model_dir_tensor(m->md, name);
    if (!t) return required ? rkm_err(RKM_EFORMAT, "model: missing tensor %s", name) : 0;
    if (t->ne[0] != n_in || t->ne[1] * t->ne[2] * t->ne[3] != n_out)
        return rkm_err(RKM_EFORMAT, "model: %s has shape [%lld, %lld], expected [%lld, %lld]", name,
                       (long long)t->ne[0], (long long)t->ne[1], (long long)n_in, (long long)n_out);
    if (!mat_type_ok(t->type))
        return rkm_err(RKM_EUNSUPPORTED, "model: %s: matrices of type %s are not supported (convert with --quant)",
                       name, rkm_type_name(t->type) ? rkm_type_name(t->type) : "?");
    if (!t->data || !rkm_type_row_bytes(t->type, n_in) || t->nbytes < rkm_type_row_bytes(t->type, n_in) * (uint64_t)n_out)
        return rkm_err(RKM_EFORMAT, "model: %s is truncated", name);
    out->type = t->type;
    out->n_in = n_in;
    out->n_out = n_out;
    out->data = t->data;
    return 0;
}

/* The rkm_layer field each per-layer role of the architecture tables
 * (format/arch.h) binds to; the shapes come from the table. */
enum { FIELD_VEC, FIELD_MAT, FIELD_SCALAR };
#define FV(role, f) {RKM_TENSOR_##role, FIELD_VEC, offsetof(rkm_layer, f)}
#define FM(role, f) {RKM_TENSOR_##role, FIELD_MAT, offsetof(rkm_layer, f)}
static const struct {
    int role, kind;
    size_t off;
} layer_fields[] = {
    FV(ATTN_NORM, attn_norm),         FM(ATTN_Q, wq),
    FM(ATTN_K, wk),                   FM(ATTN_V, wv),
    FM(ATTN_OUT, wo),                 FV(ATTN_Q_BIAS, bq),
    FV(ATTN_K_BIAS, bk),              FV(ATTN_V_BIAS, bv),
    FV(ATTN_Q_NORM, q_norm),          FV(ATTN_K_NORM, k_norm),
    FV(ATTN_POST_NORM, post_attn_norm), FV(FFN_NORM, ffn_norm),
    FM(FFN_GATE, ffn_gate),           FM(FFN_UP, ffn_up),
    FM(FFN_DOWN, ffn_down),           FV(FFN_POST_NORM_1, post_ffw_norm_1),
    FV(FFN_PRE_NORM_2, pre_ffw_norm_2), FM(FFN_GATE_INP, router),
    FV(FFN_GATE_INP_SCALE, router_scale), FV(FFN_DOWN_EXPS_SCALE, expert_scale),
    FM(FFN_GATE_INP_SHEXP, sh_gate_inp), FM(FFN_GATE_SHEXP, sh_gate),
    FM(FFN_UP_SHEXP, sh_up),          FM(FFN_DOWN_SHEXP, sh_down),
    FV(FFN_POST_NORM_2, post_ffw_norm_2), FV(FFN_POST_NORM, post_ffw_norm),
    FV(ATTN_OUT_BIAS, bo),            FV(ATTN_SINKS, sinks),
    FV(FFN_GATE_INP_BIAS, router_b),  FV(FFN_GATE_EXPS_BIAS, exp_gate_b),
    FV(FFN_UP_EXPS_BIAS, exp_up_b),   FV(FFN_DOWN_EXPS_BIAS, exp_down_b),
    FV(FFN_EXP_PROBS_B, exp_probs_b), FM(ATTN_Q_A, wq_a),
    FV(ATTN_Q_A_NORM, q_a_norm),      FM(ATTN_Q_B, wq_b),
    FM(ATTN_KV_A_MQA, wkv_a),         FV(ATTN_KV_A_NORM, kv_a_norm),
    FM(ATTN_K_B, wk_b),               FM(ATTN_V_B, wv_b),
    FM(SSM_IN, ssm_in),               FM(SSM_GATE_Z, ssm_z),
    FV(SSM_CONV1D, ssm_conv),         FV(SSM_DT, ssm_dt),
    FV(SSM_A, ssm_a),                 FM(SSM_BETA, ssm_beta),
    FM(SSM_ALPHA, ssm_alpha),         FV(SSM_NORM, ssm_norm),
    FM(SSM_OUT, ssm_out),             FM(SSM_IN_QKVZ, ssm_in_qkvz),
    FM(SSM_BETA_ALPHA, ssm_ba),       FM(SHORTCONV_IN, sc_in),
    FV(SHORTCONV_CONV, ssm_conv),     FM(SHORTCONV_OUT, sc_out),
    FV(SSM_CONV1D_BIAS, ssm_conv_b),  FV(SSM_D, ssm_d),
    {RKM_TENSOR_LAYER_OUT_SCALE, FIELD_SCALAR, offsetof(rkm_layer, out_scale)},
};

/* Binds every tensor of the arch's table that layer il holds. */
static int bind_rows(rkm_model *m, rkm_layer *L, int il)
{
    const rkm_hparams *hp = &m->hp;
    const rkm_arch_info *a = rkm_arch_info_of(hp->arch);
    L->out_scale = 1.0f;
    for (int i = 0; a && i < a->n_tensors; i++) {
        const rkm_tensor_info *t = &a->tensors[i];
        if (t->layers == RKM_LAYERS_GLOBAL || rkm_tensor_role_is_expert(t->role) || !rkm_hparams_tensor_expected(hp, t, il))
            continue;
        size_t f = 0;
        while (f < RKM_ARRAY_LEN(layer_fields) && layer_fields[f].role != t->role) f++;
        if (f == RKM_ARRAY_LEN(layer_fields)) return rkm_err(RKM_EUNSUPPORTED, "model: no layer field for %s", t->gguf);
        char name[128];
        int64_t ne[3];
        rkm_hparams_tensor_ne(hp, t, il, ne);
        int req = rkm_hparams_tensor_required(hp, t, il), rc = rkm_arch_format(t->gguf, il, 0, name, sizeof name);
        void *dst = (char *)L + layer_fields[f].off;
        const float *v = NULL;
        if (!rc && layer_fields[f].kind == FIELD_MAT) rc = mat(m, name, ne[0], ne[1] * ne[2], req, dst);
        else if (!rc) rc = vec(m, name, ne[0] * ne[1] * ne[2], req, layer_fields[f].kind == FIELD_VEC ? dst : (void *)&v);
        if (rc) return rc;
        if (v) *(float *)dst = v[0];
    }
    return 0;
}

/* A recurrent layer's convolution kernel kernel-major (K rows of the
 * channels), as rkm_conv_step reads it; the file holds it channel-major. */
static int conv_kernel_major(rkm_model *m, rkm_layer *L)
{
    const int K = m->hp.ssm_d_conv;
    const rkm_tensor_info *t =
        rkm_arch_tensor(m->hp.arch, m->hp.recr_kind == RKM_RECR_SHORTCONV ? RKM_TENSOR_SHORTCONV_CONV : RKM_TENSOR_SSM_CONV1D);
    int64_t ne[3] = {1, 1, 1};
    if (!t || rkm_hparams_tensor_ne(&m->hp, t, (int)(L - m->layers), ne) != 2 || ne[0] != K)
        return rkm_err(RKM_EFORMAT, "model: layer %d: convolution shape", (int)(L - m->layers));
    const int64_t ch = ne[1];
    float *buf = malloc(sizeof(float) * (size_t)(ch * K));
    if (own(m, buf)) return rkm_err(RKM_ENOMEM, "model: out of memory");
    for (int64_t c = 0; c < ch; c++)
        for (int k = 0; k < K; k++) buf[(int64_t)k * ch + c] = L->ssm_conv[c * K + k];
    L->ssm_conv = buf;
    return 0;
}

static int bind_layer(rkm_model *m, int il)
{
    const rkm_hparams *hp = &m->hp;
    rkm_layer *L = &m->layers[il];
    int E = hp->n_embd, rc;
    L->is_swa = hp->sliding_window > 0 && hp->swa_layer[il];
    L->n_kv = hp->n_head_kv[il];
    L->hd_k = L->is_swa ? hp->head_dim_swa : hp->head_dim;
    L->hd_v = L->is_swa ? hp->head_dim_swa : hp->head_dim_v;
    int rope_dim = L->is_swa ? hp->rope_dim_swa : hp->rope_dim;
    L->recurrent = rkm_hparams_is_recurrent(hp, il);
    if (L->recurrent && L->n_kv == 0) L->n_kv = 1; /* LFM2's recurrent layers have none: geometry unused */
    if (L->n_kv <= 0 || hp->n_head % L->n_kv || L->hd_k <= 0 || L->hd_v <= 0 || rope_dim > L->hd_k ||
        L->hd_k > RKM_MAX_HEAD_DIM || L->hd_v > RKM_MAX_HEAD_DIM ||
        rope_dim < 0 || (rope_dim & 1))
        return rkm_err(RKM_EFORMAT, "model: layer %d: bad attention geometry", il);
    L->v_from_k = hp->v_from_k_full && !L->is_swa;
    if (L->v_from_k && L->hd_v != L->hd_k) return rkm_err(RKM_EFORMAT, "model: layer %d: V from K needs equal head dims", il);
    L->rs_off = m->rs_floats;
    m->rs_floats += rkm_hparams_recurrent_state_floats(hp, il);
    if (hp->attn_q_gate && L->hd_v != L->hd_k) return rkm_err(RKM_EFORMAT, "model: layer %d: gated attention needs equal head dims", il);
    int qd = hp->n_head * L->hd_k * (hp->attn_q_gate ? 2 : 1), kd = L->n_kv * L->hd_k, vd = L->n_kv * L->hd_v;
    m->max_hd = RKM_MAX(m->max_hd, RKM_MAX(L->hd_k, L->hd_v));
    m->max_qdim = RKM_MAX(m->max_qdim, RKM_MAX(qd, hp->n_head * L->hd_v));
    if (hp->kv_lora_rank > 0) /* latent attention's query projection and heads' values pass there too */
        m->max_qdim = RKM_MAX(m->max_qdim, hp->n_head * RKM_MAX(hp->head_dim_k_mla, hp->head_dim_v_mla));
    m->max_kvdim = RKM_MAX(m->max_kvdim, RKM_MAX(kd, vd));
    /* the global frequency divisors apply to the full-attention layers */
    const rkm_tensor_info *rf = rkm_arch_tensor(hp->arch, RKM_TENSOR_ROPE_FREQS);
    char name[128];
    const float *freqs = NULL;
    if (!L->is_swa && rf && rkm_hparams_tensor_expected(hp, rf, -1) && !rkm_arch_format(rf->gguf, -1, 0, name, sizeof name) &&
        (rc = vec(m, name, rope_dim / 2, rkm_hparams_tensor_required(hp, rf, -1), &freqs)))
        return rc;
    rkm_rope_setup(&L->rope, hp, rope_dim, L->is_swa ? hp->rope_theta_swa : hp->rope_theta, freqs);
    if ((rc = bind_rows(m, L, il))) return rc;
    if (L->recurrent && L->ssm_conv && (rc = conv_kernel_major(m, L))) return rc;
    L->mla = hp->kv_lora_rank > 0;
    L->wk_b.heads = L->wv_b.heads = hp->n_head;
    L->kq_scale = rkm_attn_scale(hp, L);
    if (rkm_hparams_is_moe_layer(hp, il)) {
        L->el = rkm_model_dir_expert_layer(m->md, il);
        if (!L->el) return rkm_err(RKM_EFORMAT, "model: layer %d has no expert file", il);
        const rkm_expert_layer *el = L->el;
        int ff = (int)el->part[RKM_PART_GATE].ne[1];
        if (el->n_expert != hp->n_expert || el->part[RKM_PART_GATE].ne[0] != E ||
            el->part[RKM_PART_UP].ne[0] != E || el->part[RKM_PART_UP].ne[1] != ff ||
            el->part[RKM_PART_DOWN].ne[0] != ff || el->part[RKM_PART_DOWN].ne[1] != E || ff <= 0 ||
            (hp->n_ff_exp > 0 && hp->n_ff_exp != ff))
            return rkm_err(RKM_EFORMAT, "model: layer %d: expert shapes do not match the model", il);
        for (int k = 0; k < RKM_PART_COUNT; k++) {
            const rkm_expert_part *pt = &el->part[k];
            int npu = pt->type == RKM_TYPE_RKNN_I8 && rkm_rknn_i8_shape_ok(pt->ne[0], pt->ne[1]);
            if ((!mat_type_ok(pt->type) && !npu && !rkm_type_packed(pt->type)) || !rkm_type_row_bytes(pt->type, pt->ne[0]) ||
                pt->offset + rkm_type_row_bytes(pt->type, pt->ne[0]) * (uint64_t)pt->ne[1] > el->blob_bytes)
                return rkm_err(RKM_EFORMAT, "model: layer %d: bad expert part %d", il, k);
        }
        if (m->n_ff_exp && m->n_ff_exp != ff) return rkm_err(RKM_EFORMAT, "model: expert width differs between layers");
        m->n_ff_exp = ff;
    }
    return 0;
}

/* Resident q8_0/q4_0 matrices are copied in the packed layout (kernels.h),
 * which the matmuls read fastest, into one huge-page arena (decode streams
 * every one of them per token; 4 KiB pages would cost a TLB miss per page);
 * the mapped pages they came from are dropped (clean file pages: anything
 * that reads them again, e.g. the embedding lookup of a tied LM head,
 * faults them back). packed_bytes: w's bytes if it gets packed, else 0;
 * its place in the arena is that rounded up to 64. */
static size_t packed_bytes(const rkm_mat *w)
{
    if (!w->data || rkm_pack_type(w->type, w->n_out) == w->type) return 0;
    if (w->heads > 1 && (w->n_out / w->heads) % RKM_PACK_ROWS) return 0; /* a head must be whole groups */
    return rkm_type_row_bytes(w->type, w->n_in) * (size_t)w->n_out;
}

static int pack_mat(rkm_model *m, rkm_mat *w)
{
    size_t raw = packed_bytes(w);
    if (!raw) return 0;
    RKM_ASSERT(m->arena_used + RKM_ALIGN_UP(raw, 64) <= m->arena_bytes);
    uint8_t *buf = m->arena + m->arena_used;
    m->arena_used += RKM_ALIGN_UP(raw, 64);
    memcpy(buf, w->data, raw);
    int rc = rkm_pack_rows(w->type, buf, w->n_in, w->n_out);
    if (rc) return rc;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t lo = RKM_ALIGN_UP((uintptr_t)w->data, (uintptr_t)pg), hi = ((uintptr_t)w->data + raw) & ~((uintptr_t)pg - 1);
    if (pg > 0 && hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
    w->data = buf;
    w->type = rkm_pack_type(w->type, w->n_out);
    return 0;
}

int rkm_layer_mats(rkm_layer *L, rkm_mat *out[RKM_LAYER_MATS])
{
    rkm_mat *all[RKM_LAYER_MATS] = {&L->wq,       &L->wk,     &L->wv,      &L->wo,    &L->ffn_gate, &L->ffn_up,
                                    &L->ffn_down, &L->router, &L->sh_gate, &L->sh_up, &L->sh_down,  &L->sh_gate_inp,
                                    &L->wq_a,     &L->wq_b,   &L->wkv_a,   &L->wk_b,  &L->wv_b,
                                    &L->ssm_in,   &L->ssm_z,  &L->ssm_beta, &L->ssm_alpha, &L->ssm_out,
                                    &L->ssm_in_qkvz, &L->ssm_ba, &L->sc_in, &L->sc_out};
    memcpy(out, all, sizeof all);
    return RKM_LAYER_MATS;
}

static int pack_resident(rkm_model *m)
{
    size_t total = RKM_ALIGN_UP(packed_bytes(&m->output), 64);
    for (int il = 0; il < m->hp.n_layer; il++) {
        rkm_mat *mats[RKM_LAYER_MATS];
        int nm = rkm_layer_mats(&m->layers[il], mats);
        for (int i = 0; i < nm; i++) total += RKM_ALIGN_UP(packed_bytes(mats[i]), 64);
    }
    if (!total) return 0;
    m->arena = rkm_map_weights(total);
    if (!m->arena) return rkm_err(RKM_ENOMEM, "model: out of memory (%zu bytes of packed weights)", total);
    m->arena_bytes = total;
    int rc = pack_mat(m, &m->output);
    for (int il = 0; !rc && il < m->hp.n_layer; il++) {
        rkm_layer *L = &m->layers[il];
        rkm_mat *mats[RKM_LAYER_MATS];
        int nm = rkm_layer_mats(L, mats);
        for (int i = 0; !rc && i < nm; i++) rc = pack_mat(m, mats[i]);
    }
    return rc;
}

/* Dense projections on the NPU at prefill (docs/NPU.md): with the RKNN
 * backend, every resident attention / dense-FFN / shared-expert matrix
 * whose shape the NPU takes gets an rknn_i8 copy (int8 per output channel,
 * the NPU's native B layout), used by rkm_model_mm for chunks of at least
 * RKM_NPU_DENSE_MIN_ROWS rows; decoding stays on the CPU kernels, where
 * the measurements in NOTES put it. The copies cost about one byte per
 * weight beyond the resident core, so they are made only without a
 * memory budget. rkm_model_params.npu_dense: 1 off; 2 also on the CPU
 * backend (its rknn_i8 kernel: the tests compare the two paths). */
static int npu_dense(rkm_model *m, const rkm_model_params *p)
{
    int force = p->npu_dense == 2;
    if (p->npu_dense == 1) return 0;
    if (!force && (!rkm_backend_rknn(m->backend) || p->mem_budget_bytes)) return 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        rkm_layer *L = &m->layers[il];
        rkm_mat *mats[RKM_LAYER_MATS];
        int nm = rkm_layer_mats(L, mats);
        for (int i = 0; i < nm; i++) {
            rkm_mat *w = mats[i];
            /* the router stays exact (it picks the experts), the gate
             * input has one row */
            if (w == &L->router || w == &L->sh_gate_inp || w->heads > 1) continue;
            if (!w->data || !rkm_rknn_i8_shape_ok(w->n_in, w->n_out) || !rkm_type_readable(w->type)) continue;
            void *buf = rkm_alloc_aligned(rkm_rknn_i8_bytes(w->n_in, w->n_out), 64);
            float *rows = malloc(sizeof(float) * (size_t)w->n_in * RKM_RKNN_I8_TILE);
            float **o = buf && rows ? realloc(m->owned, sizeof(float *) * (size_t)(m->n_owned + 1)) : NULL;
            if (!o) {
                rkm_free_aligned(buf);
                free(rows);
                return rkm_err(RKM_ENOMEM, "model: out of memory for the NPU's copies of the dense matrices");
            }
            m->owned = o;
            m->owned[m->n_owned++] = buf;
            size_t rb = rkm_type_row_bytes(w->type, w->n_in);
            for (int64_t n0 = 0; n0 < w->n_out; n0 += RKM_RKNN_I8_TILE) {
                for (int r = 0; r < RKM_RKNN_I8_TILE; r++)
                    rkm_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)(n0 + r) * rb,
                                       rows + (size_t)r * w->n_in, w->n_in);
                rkm_rknn_i8_pack_rows(rows, w->n_in, w->n_out, n0, RKM_RKNN_I8_TILE, buf);
            }
            free(rows);
            w->npu = buf;
        }
    }
    return 0;
}

static uint64_t model_identity(const rkm_model_dir *md)
{
    rkm_hasher *h = rkm_hasher_new();
    if (!h) return 0;
    rkm_hasher_update(h, &md->hp, sizeof md->hp);
    for (int i = 0; i < md->n_tensors; i++) {
        rkm_hasher_update(h, md->tensors[i].name, strlen(md->tensors[i].name));
        rkm_hasher_update(h, &md->tensors[i].checksum, sizeof(uint64_t));
    }
    for (int i = 0; i < md->n_expert_layers; i++)
        rkm_hasher_update(h, md->experts[i].checksums, sizeof(uint64_t) * (size_t)md->experts[i].n_expert);
    uint64_t id = rkm_hasher_digest(h);
    rkm_hasher_free(h);
    return id;
}

static void *verifier_main(void *arg)
{
    rkm_model *m = arg;
    int rc = rkm_model_dir_verify_resident(m->md, &m->verify_stop);
    if (rc < 0) {
        snprintf(m->bad_msg, sizeof m->bad_msg, "%s", rkm_last_error()); /* this thread's message */
        atomic_store_explicit(&m->bad, rc, memory_order_release);
    }
    else if (rc == 0) atomic_store(&m->verify_done, 1);
    return NULL;
}

int rkm_model_check(const rkm_model *m)
{
    int bad = atomic_load_explicit(&m->bad, memory_order_acquire);
    if (bad) return rkm_err(bad, "%s", m->bad_msg);
    return rkm_model_dir_mapping_ok(m->md);
}

const char *rkm_model_plan(const rkm_model *m, int *n_seq, int *n_ctx, char *buf, size_t cap)
{
    if (n_seq) *n_seq = m->plan_n_seq;
    if (n_ctx) *n_ctx = m->plan_n_ctx;
    return rkm_budget_describe(&m->plan, buf, cap);
}

int rkm_model_files_changed(const rkm_model *m) { return rkm_model_dir_changed(m->md); }
int rkm_model_verified(const rkm_model *m) { return atomic_load(&m->verify_done); }

/* Sessions planned for with plan_n_seq -1: at most this many. */
#define AUTO_SEQ_MAX 4

/* The memory plan (budget.h: resident weights, plan_n_seq sessions' KV of
 * plan_n_ctx tokens, one scratch, then expert slots) into m->plan. With
 * plan_n_seq -1: AUTO_SEQ_MAX sessions without a budget; with one, the most
 * (down to 1) whose KV leaves at least 3/4 of the expert slots that one
 * session's plan has. RKM_EBUDGET (message set) when even one session does
 * not fit. */
static int make_plan(rkm_model *m, const rkm_model_params *p)
{
    int n_ctx = p->plan_n_ctx > 0 ? p->plan_n_ctx : rkm_hparams_default_ctx(&m->hp);
    int n_seq = p->plan_n_seq > 0 ? p->plan_n_seq : 1;
    rkm_budget_opts o = {.n_sessions = n_seq};
    int rc = rkm_budget_plan(m->md, p->mem_budget_bytes, n_ctx, &o, &m->plan);
    if (p->plan_n_seq < 0 && !rc) {
        int one = m->plan.slots_per_layer;
        for (n_seq = AUTO_SEQ_MAX; n_seq > 1; n_seq--) {
            rkm_budget b;
            o.n_sessions = n_seq;
            if (!rkm_budget_plan(m->md, p->mem_budget_bytes, n_ctx, &o, &b) &&
                (!p->mem_budget_bytes || 4 * (int64_t)b.slots_per_layer >= 3 * (int64_t)one)) {
                m->plan = b;
                break;
            }
        }
    }
    m->plan_n_seq = n_seq;
    m->plan_n_ctx = n_ctx;
    return rc;
}

/* Expert slots per layer: explicit, or from the memory plan, or 0 (every
 * expert stays resident). < 0: error (message set). */
static int cache_slots(const rkm_model *m, const rkm_model_params *p, int plan_rc)
{
    if (p->expert_cache_slots > 0) return RKM_MIN(p->expert_cache_slots, m->hp.n_expert);
    if (!p->mem_budget_bytes || !m->md->n_expert_layers) return 0;
    if (plan_rc) return -1;
    return m->plan.slots_per_layer >= m->hp.n_expert ? 0 : m->plan.slots_per_layer;
}

rkm_model *rkm_model_open(const char *dir, const rkm_model_params *params)
{
    rkm_model_params dp;
    if (!params) {
        rkm_model_params_default(&dp);
        params = &dp;
    }
    if (!dir) {
        rkm_err(RKM_EINVAL, "model: no directory");
        return NULL;
    }
    rkm_kernels_init();
    rkm_model *m = calloc(1, sizeof *m);
    if (!m) {
        rkm_err(RKM_ENOMEM, "model: out of memory");
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->trie_lock, NULL);
    m->md = rkm_model_dir_open(dir);
    if (!m->md) goto fail;
    m->hp = m->md->hp;
    const rkm_hparams *hp = &m->hp;
    if (rkm_hparams_validate(hp)) goto fail;
    if (hp->n_layer <= 0 || hp->n_layer > RKM_MAX_LAYERS || hp->n_embd <= 0 || hp->n_vocab <= 0 ||
        hp->n_head <= 0 || hp->n_expert > RKM_MAX_EXPERTS ||
        (hp->n_expert > 0 && (hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert))) {
        rkm_err(RKM_EFORMAT, "model: bad hyper-parameters");
        goto fail;
    }
    m->layers = calloc((size_t)hp->n_layer, sizeof(rkm_layer));
    if (!m->layers) {
        rkm_err(RKM_ENOMEM, "model: out of memory");
        goto fail;
    }
    const rkm_tensor_view *te = rkm_model_dir_role(m->md, RKM_TENSOR_TOKEN_EMBD, -1);
    if (!te || te->ne[0] != hp->n_embd || te->ne[1] != hp->n_vocab || !te->data ||
        !rkm_type_readable(te->type) || !rkm_type_row_bytes(te->type, hp->n_embd)) {
        rkm_err(RKM_EFORMAT, "model: missing or bad token embeddings (%s)", rkm_arch_tensor(hp->arch, RKM_TENSOR_TOKEN_EMBD)->gguf);
        goto fail;
    }
    m->tok_embd = te->data;
    m->tok_embd_type = te->type;
    /* untied: the LM head is output.weight and the table is only looked up */
    m->embd_pread = rkm_model_dir_lookup_embd_bytes(m->md) > 0;
    m->embd_off = te->offset;
    char name[128];
    if (!rkm_arch_tensor_name(hp->arch, RKM_TENSOR_OUTPUT_NORM, -1, name, sizeof name) ||
        vec(m, name, hp->n_embd, 1, &m->output_norm))
        goto fail;
    /* the LM head: output.weight, or the embeddings when tied */
    if (!rkm_arch_tensor_name(hp->arch, m->embd_pread ? RKM_TENSOR_OUTPUT : RKM_TENSOR_TOKEN_EMBD, -1, name, sizeof name) ||
        mat(m, name, hp->n_embd, hp->n_vocab, 1, &m->output))
        goto fail;
    for (int il = 0; il < hp->n_layer; il++)
        if (bind_layer(m, il)) {
            rkm_err_prefix(RKM_EFORMAT, "%s", dir);
            goto fail;
        }
    if (params->verify_resident == 0) { /* before packing reads the same pages */
        if (rkm_model_dir_verify_resident(m->md, NULL)) goto fail;
        atomic_store(&m->verify_done, 1);
    }
    m->model_id = model_identity(m->md);
    /* pack 1 keeps the file's layout, 2 packs only the resident matrices
     * (A/B measurements) */
    m->pack = params->pack != 1;
    m->pack_experts = m->pack && params->pack != 2;
    int has_npu = 0;
    for (int i = 0; i < m->md->n_expert_layers; i++)
        for (int k = 0; k < RKM_PART_COUNT; k++) has_npu |= m->md->experts[i].part[k].type == RKM_TYPE_RKNN_I8;
    m->backend = rkm_backend_open(params->backend, has_npu);
    if (!m->backend) goto fail;
    if (npu_dense(m, params)) goto fail; /* from the file's layout, so before packing */
    if (m->pack && pack_resident(m)) goto fail;
    m->n_threads = params->n_threads;
    m->pool = rkm_pool_new(params->n_threads);
    if (!m->pool) goto fail;
    m->n_threads = rkm_pool_n_threads(m->pool);
    int plan_rc = make_plan(m, params);
    if (m->md->n_expert_layers > 0) {
        int slots = cache_slots(m, params, plan_rc);
        if (slots < 0) goto fail;
        /* the plan states the slots there are (explicit ones included) */
        m->plan.total_bytes -= m->plan.cache_bytes;
        m->plan.slots_per_layer = slots ? slots : m->plan.max_slots;
        m->plan.cache_bytes = m->plan.slot_bytes * (uint64_t)m->plan.slots_per_layer;
        m->plan.total_bytes += m->plan.cache_bytes;
        rkm_expert_cache_params cp = {0};
        cp.slots_per_layer = slots;
        cp.policy = params->cache_policy;
        /* prefetch: off unless asked for; measured, it read 20-30% more
         * and decoded 2-10% slower in every streamed case (STREAMING.md) */
        cp.prefetch = params->prefetch < 0 ? 0 : params->prefetch;
        m->prefetch = cp.prefetch;
        cp.io_threads = params->io_threads;
        cp.trace_out = params->trace_out;
        cp.direct_io = 1; /* experts never go through the page cache (RSS is the whole cost) */
        if (has_npu && rkm_backend_rknn(m->backend)) { /* slots in NPU memory: no copy per run */
            cp.slot_alloc = rkm_backend_slot_alloc;
            cp.slot_free = rkm_backend_slot_free;
            cp.slot_filled = rkm_backend_slot_filled;
            cp.slot_user = m->backend;
        }
        cp.pack = m->pack_experts;
        cp.fill = !params->lazy_experts;
        cp.shared_slots = params->cache_scope == 2 ||
                          (params->cache_scope == 0 && rkm_budget_default_shared(slots, m->hp.n_expert_used));
        /* Checksums (docs/STREAMING.md): every read is verified unless
         * a measurement asks for first-read-only or none */
        cp.verify = params->verify == 1 ? RKM_VERIFY_FIRST : params->verify == 2 ? RKM_VERIFY_NEVER : RKM_VERIFY_ALWAYS;
        cp.io_backend = params->io_backend;
        cp.prefault = params->prefault;
        m->cache = rkm_expert_cache_new(m->md, &cp);
        if (!m->cache) goto fail;
    }
    if (rkm_model_text_load(m->md, dir, m->hp.n_vocab, &m->tok, &m->chat_template)) goto fail;
    if (params->verify_resident == 1) {
        if (pthread_create(&m->verifier, NULL, verifier_main, m) != 0) {
            rkm_err(RKM_ENOMEM, "model: cannot start the check of the resident weights");
            goto fail;
        }
        m->verifier_started = 1;
    }
    return m;
fail:
    rkm_model_close(m);
    return NULL;
}

void rkm_model_close(rkm_model *m)
{
    if (!m) return;
    if (m->verifier_started) {
        atomic_store(&m->verify_stop, 1);
        pthread_join(m->verifier, NULL);
    }
    rkm_model_text_free(m->tok, m->chat_template);
    rkm_expert_cache_free(m->cache);
    rkm_backend_free(m->backend);
    rkm_pool_free(m->pool);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    rkm_unmap_weights(m->arena, m->arena_bytes);
    free(m->owned);
    free(m->layers);
    rkm_model_dir_close(m->md);
    rkm_gtrie_free(m->trie);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->trie_lock);
    free(m);
}

int rkm_model_n_vocab(const rkm_model *m) { return m->hp.n_vocab; }
int rkm_model_n_embd(const rkm_model *m) { return m->hp.n_embd; }
int rkm_model_n_layer(const rkm_model *m) { return m->hp.n_layer; }
int rkm_model_n_ctx_train(const rkm_model *m) { return m->hp.n_ctx_train; }
const char *rkm_model_arch(const rkm_model *m) { return m->hp.arch_name; }
const char *rkm_model_backend(const rkm_model *m) { return rkm_backend_reason(m->backend); }
const char *rkm_model_chat_template(const rkm_model *m) { return m->chat_template; }
