/*
 * hparams.c - the hyper-parameters: defaults (common ones here, the
 * architecture's from arch.c's table), validation, the rows of arch.c's
 * tensor tables evaluated for a model (presence, shape), and reading
 * GGUF metadata through the table's keys ("<arch>.block_count" etc.).
 * Stateless; any thread.
 */
#include "format/hparams.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

#include "format/gguf.h"
#include "util/common.h"

#define HI(f) {#f, offsetof(rkm_hparams, f), RKM_HP_INT, 0}
#define HF(f) {#f, offsetof(rkm_hparams, f), RKM_HP_FLOAT, 0}
#define HB(f) {#f, offsetof(rkm_hparams, f), RKM_HP_BOOL, 0}
#define HIO(f) {#f, offsetof(rkm_hparams, f), RKM_HP_INT, 1}
#define HFO(f) {#f, offsetof(rkm_hparams, f), RKM_HP_FLOAT, 1}
static const rkm_hparams_field hp_fields[] = {
    HI(n_layer), HI(n_embd), HI(n_head), HI(head_dim), HI(head_dim_v), HI(head_dim_swa), HI(n_vocab),
    HI(n_ctx_train), HI(n_ff), HI(n_expert), HI(n_expert_used), HI(n_ff_exp), HI(n_ff_shexp),
    HI(n_layer_dense_lead), HB(expert_norm_topk), HI(expert_gating), HB(shexp_gate), HI(act), HF(rms_eps),
    HI(qk_norm), HB(has_qkv_bias), HB(rope_neox), HF(rope_theta), HF(rope_theta_swa), HI(rope_dim),
    HI(rope_dim_swa), HB(has_rope_freqs), HI(sliding_window), HF(attn_scale), HF(attn_softcap),
    HF(final_softcap), HF(embed_scale), HB(tied_output), HB(v_from_k_full), HB(v_norm), HB(gemma4_norms),
    HIO(rope_scaling), HFO(rope_freq_scale), HIO(rope_orig_ctx), HFO(rope_attn_factor), HFO(yarn_ext_factor),
    HFO(yarn_attn_factor), HFO(yarn_beta_fast), HFO(yarn_beta_slow), HFO(yarn_log_mul),
    HFO(expert_weights_scale), HIO(n_expert_group), HIO(n_group_used), HIO(q_lora_rank), HIO(kv_lora_rank),
    HIO(head_dim_k_mla), HIO(head_dim_v_mla), HIO(ssm_d_conv), HIO(ssm_d_inner), HIO(ssm_d_state),
    HIO(ssm_dt_rank), HIO(ssm_n_group), HIO(attn_q_gate), HIO(ssm_grouped), HIO(ssm_fused_in), HIO(recr_kind),
    HFO(residual_scale), HFO(logit_scale), HIO(n_deepstack), HIO(rope_sec_t), HIO(rope_sec_h), HIO(rope_sec_w),
    HIO(rope_sec_e),
};

static const char *const rope_scaling_names[] = {"none", "linear", "yarn"};

int rkm_rope_scaling_from_name(const char *s)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(rope_scaling_names); i++)
        if (!strcmp(s, rope_scaling_names[i])) return (int)i;
    return -1;
}

const char *rkm_rope_scaling_name(int t)
{
    return t >= 0 && t < (int)RKM_ARRAY_LEN(rope_scaling_names) ? rope_scaling_names[t] : NULL;
}


int rkm_hparams_n_fields(void) { return (int)RKM_ARRAY_LEN(hp_fields); }
const rkm_hparams_field *rkm_hparams_field_at(int i) { return &hp_fields[i]; }

static int set_num(rkm_hparams *hp, const char *key, double v)
{
    if (!strcmp(key, "n_head_kv")) {
        for (int i = 0; i < RKM_MAX_LAYERS; i++) hp->n_head_kv[i] = (int)v;
        return 0;
    }
    for (size_t i = 0; i < RKM_ARRAY_LEN(hp_fields); i++) {
        if (strcmp(hp_fields[i].name, key)) continue;
        char *p = (char *)hp + hp_fields[i].off;
        if (hp_fields[i].kind == RKM_HP_FLOAT) *(float *)p = (float)v;
        else *(int *)p = (int)v;
        return 0;
    }
    return rkm_err(RKM_EINVAL, "unknown hyper-parameter '%s'", key);
}

int rkm_hparams_set(rkm_hparams *hp, const char *key, const char *value)
{
    if (!strcmp(key, "rope_scaling") && rkm_rope_scaling_from_name(value) >= 0) {
        hp->rope_scaling = rkm_rope_scaling_from_name(value);
        return 0;
    }
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end) return rkm_err(RKM_EINVAL, "'%s' is not a number (for %s)", value, key);
    return set_num(hp, key, v);
}

void rkm_hparams_init(rkm_hparams *hp, int arch)
{
    memset(hp, 0, sizeof *hp);
    hp->arch = arch;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", rkm_arch_name(arch));
    hp->rms_eps = 1e-5f;
    hp->rope_theta = 10000.0f;
    hp->embed_scale = 1.0f;
    hp->act = RKM_ACT_SILU;
    hp->rope_freq_scale = 1.0f;
    hp->rope_attn_factor = 1.0f;
    hp->yarn_ext_factor = -1.0f;
    hp->yarn_attn_factor = 1.0f;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->expert_weights_scale = 1.0f;
    const rkm_arch_info *a = rkm_arch_info_of(arch);
    for (int i = 0; a && i < RKM_ARCH_MAX_DEFAULTS && a->defaults[i].field; i++)
        RKM_ASSERT(set_num(hp, a->defaults[i].field, a->defaults[i].value) == 0); /* test-format checks the table */
}

#define BAD(...) rkm_err(RKM_EFORMAT, __VA_ARGS__)

/* Multi-head latent attention's geometry: the cache row is the latent
 * and the shared RoPE key, the values the latent. */
static int validate_mla(const rkm_hparams *hp)
{
    if (hp->arch == RKM_ARCH_DEEPSEEK2 && hp->kv_lora_rank <= 0)
        return BAD("deepseek2 without a latent rank (kv_lora_rank): the GGUF predates llama.cpp's split "
                   "attn_k_b / attn_v_b (convert it again from the checkpoint)");
    if (hp->kv_lora_rank == 0 && hp->q_lora_rank == 0) return 0;
    if (hp->kv_lora_rank < 1 || hp->kv_lora_rank > hp->n_embd)
        return BAD("latent rank %d out of range (1..hidden size %d)", hp->kv_lora_rank, hp->n_embd);
    if (hp->q_lora_rank < 0 || hp->q_lora_rank > 65536) return BAD("q LoRA rank %d out of range", hp->q_lora_rank);
    if (hp->rope_dim < 2 || hp->head_dim_k_mla <= hp->rope_dim || hp->head_dim_k_mla > RKM_MAX_MLA_HEAD ||
        hp->head_dim_v_mla < 1 || hp->head_dim_v_mla > RKM_MAX_MLA_HEAD)
        return BAD("latent attention: key head %d (with %d rotated) or value head %d out of range", hp->head_dim_k_mla,
                   hp->rope_dim, hp->head_dim_v_mla);
    if (hp->head_dim != hp->kv_lora_rank + hp->rope_dim || hp->head_dim_v != hp->kv_lora_rank)
        return BAD("latent attention: key length %d and value length %d must be the latent rank %d plus the %d "
                   "rotated dims, and the latent rank",
                   hp->head_dim, hp->head_dim_v, hp->kv_lora_rank, hp->rope_dim);
    for (int i = 0; i < hp->n_layer; i++)
        if (hp->n_head_kv[i] != 1) return BAD("latent attention: layer %d has %d kv heads (one latent)", i, hp->n_head_kv[i]);
    if (hp->sliding_window > 0) return BAD("latent attention with a sliding window is not supported");
    return 0;
}

/* Gated DeltaNet's geometry: value heads in whole groups of key heads,
 * the value head as wide as the key head (the state is square), a
 * kernel of at least one position. */
static int validate_recurrent(const rkm_hparams *hp)
{
    int any = 0;
    for (int i = 0; i < hp->n_layer; i++) any |= hp->recr_layer[i];
    if (!any) return 0;
    if (hp->ssm_d_conv < 1 || hp->ssm_d_conv > 64)
        return BAD("recurrent layers: convolution kernel %d out of range (1..64)", hp->ssm_d_conv);
    if (hp->recr_kind == RKM_RECR_SHORTCONV) return 0;
    if (hp->recr_kind == RKM_RECR_MAMBA2) {
        if (hp->ssm_d_state < 1 || hp->ssm_d_state > RKM_MAX_SSM_STATE || hp->ssm_n_group < 1 || hp->ssm_dt_rank < 1 ||
            hp->ssm_dt_rank % hp->ssm_n_group || hp->ssm_d_inner < 1 || hp->ssm_d_inner % hp->ssm_dt_rank ||
            hp->ssm_d_inner % hp->ssm_n_group)
            return BAD("Mamba-2 layers: inner size %d, %d heads, %d groups and state %d do not divide", hp->ssm_d_inner,
                       hp->ssm_dt_rank, hp->ssm_n_group, hp->ssm_d_state);
        return 0;
    }
    if (hp->recr_kind != RKM_RECR_DELTANET) return BAD("unknown recurrent layer kind %d", hp->recr_kind);
    if (hp->ssm_d_state < 1 || hp->ssm_d_state > RKM_MAX_SSM_STATE || hp->ssm_n_group < 1 || hp->ssm_dt_rank < 1 ||
        hp->ssm_dt_rank > 4096 || hp->ssm_dt_rank % hp->ssm_n_group)
        return BAD("recurrent layers: %d value heads are not whole groups of %d key heads (state %d)", hp->ssm_dt_rank,
                   hp->ssm_n_group, hp->ssm_d_state);
    if (hp->ssm_d_inner != hp->ssm_dt_rank * hp->ssm_d_state)
        return BAD("recurrent layers: inner size %d is not %d value heads of the state size %d", hp->ssm_d_inner,
                   hp->ssm_dt_rank, hp->ssm_d_state);
    return 0;
}

int rkm_hparams_validate(const rkm_hparams *hp)
{
    int rc;
    if (hp->arch <= RKM_ARCH_UNKNOWN || hp->arch >= RKM_ARCH_COUNT) return BAD("unknown architecture");
    if (hp->n_layer < 1 || hp->n_layer > RKM_MAX_LAYERS) return BAD("n_layer %d out of range", hp->n_layer);
    if (hp->n_embd < 1 || hp->n_embd > 65536) return BAD("n_embd %d out of range", hp->n_embd);
    if (hp->n_head < 1 || hp->n_head > 1024) return BAD("n_head %d out of range", hp->n_head);
    if (hp->head_dim < 1 || hp->head_dim > 4096 || hp->head_dim_v < 1 || hp->head_dim_v > 4096)
        return BAD("head_dim out of range");
    if (hp->head_dim_swa < 0 || hp->head_dim_swa > 4096) return BAD("head_dim_swa out of range");
    if (hp->n_vocab < 1 || hp->n_vocab > (1 << 24)) return BAD("n_vocab %d out of range", hp->n_vocab);
    if (hp->n_ctx_train < 1) return BAD("n_ctx_train %d out of range", hp->n_ctx_train);
    for (int i = 0; i < hp->n_layer; i++) {
        int kv = hp->n_head_kv[i];
        if (hp->recr_layer[i]) continue; /* no attention */
        if (kv < 1 || kv > hp->n_head || hp->n_head % kv)
            return BAD("layer %d: %d kv heads do not divide %d heads", i, kv, hp->n_head);
        if (hp->swa_layer[i] && hp->sliding_window < 1) return BAD("layer %d is sliding but the window is 0", i);
    }
    if (hp->n_expert < 0 || hp->n_expert > 4096) return BAD("n_expert %d out of range", hp->n_expert);
    if (hp->n_expert > 0) {
        if (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert)
            return BAD("top-k %d out of range for %d experts", hp->n_expert_used, hp->n_expert);
        if (hp->n_ff_exp < 1) return BAD("expert FFN width %d out of range", hp->n_ff_exp);
    } else if (hp->n_ff < 1) {
        return BAD("dense FFN width %d out of range", hp->n_ff);
    }
    if (hp->expert_gating < RKM_GATING_SOFTMAX || hp->expert_gating > RKM_GATING_SIGMOID)
        return BAD("unknown expert gating %d", hp->expert_gating);
    if (!(hp->expert_weights_scale > 0 && isfinite(hp->expert_weights_scale)))
        return BAD("the routed weights' scale %g is not a positive number", (double)hp->expert_weights_scale);
    if (hp->n_expert_group > 1) {
        if (hp->n_expert <= 0 || hp->n_expert % hp->n_expert_group)
            return BAD("%d expert groups do not divide %d experts", hp->n_expert_group, hp->n_expert);
        if (hp->n_group_used < 1 || hp->n_group_used > hp->n_expert_group)
            return BAD("%d groups used of %d expert groups", hp->n_group_used, hp->n_expert_group);
        if (hp->n_expert_used > hp->n_group_used * (hp->n_expert / hp->n_expert_group))
            return BAD("top-k %d exceeds the %d experts of the %d groups used", hp->n_expert_used,
                       hp->n_group_used * (hp->n_expert / hp->n_expert_group), hp->n_group_used);
    } else if (hp->n_expert_group < 0 || hp->n_group_used < 0) {
        return BAD("negative expert group counts");
    }
    if (hp->act < RKM_ACT_SILU || hp->act > RKM_ACT_SWIGLU_OAI) return BAD("unknown activation %d", hp->act);
    if (hp->n_layer_dense_lead < 0 || hp->n_layer_dense_lead > hp->n_layer) return BAD("bad n_layer_dense_lead");
    if (hp->n_deepstack < 0 || hp->n_deepstack > hp->n_layer) return BAD("n_deepstack %d out of range", hp->n_deepstack);
    if (!(hp->rms_eps > 0 && hp->rms_eps < 1)) return BAD("the norm epsilon %g is out of range (0, 1)", (double)hp->rms_eps);
    if (!(hp->rope_theta > 0 && isfinite(hp->rope_theta)) ||
        (hp->sliding_window > 0 && !(hp->rope_theta_swa > 0 && isfinite(hp->rope_theta_swa))))
        return BAD("the RoPE base %g (sliding layers %g) is not a positive number", (double)hp->rope_theta,
                   (double)hp->rope_theta_swa);
    if (hp->rope_dim < 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return BAD("rope_dim %d invalid for head_dim %d", hp->rope_dim, hp->head_dim);
    if (hp->rope_dim_swa < 0 || (hp->head_dim_swa && hp->rope_dim_swa > hp->head_dim_swa) || hp->rope_dim_swa % 2)
        return BAD("rope_dim_swa %d invalid", hp->rope_dim_swa);
    if (hp->rope_scaling < RKM_ROPE_SCALING_NONE || hp->rope_scaling > RKM_ROPE_SCALING_YARN)
        return BAD("unknown RoPE scaling type %d", hp->rope_scaling);
    if (!(hp->rope_freq_scale > 0 && hp->rope_freq_scale <= 1024) || !(hp->rope_attn_factor > 0 && hp->rope_attn_factor < 1e3) ||
        !(hp->yarn_attn_factor > 0 && hp->yarn_attn_factor < 1e3))
        return BAD("RoPE scaling: factor 1/%g or attention factor %g out of range", (double)hp->rope_freq_scale,
                   (double)hp->rope_attn_factor);
    if (hp->rope_scaling == RKM_ROPE_SCALING_YARN) {
        if (!(hp->rope_freq_scale <= 1))
            return BAD("YaRN: factor %g is under 1 (it stretches the original context)", 1.0 / hp->rope_freq_scale);
        if (hp->rope_orig_ctx < 0 || hp->rope_orig_ctx > hp->n_ctx_train)
            return BAD("YaRN: original context %d is negative or over the trained context %d", hp->rope_orig_ctx,
                       hp->n_ctx_train);
        if (!(hp->yarn_beta_slow > 0 && hp->yarn_beta_fast > hp->yarn_beta_slow && hp->yarn_beta_fast < 1e4))
            return BAD("YaRN: beta_fast %g must exceed beta_slow %g > 0", (double)hp->yarn_beta_fast,
                       (double)hp->yarn_beta_slow);
        if (!(hp->yarn_ext_factor <= 1 && (hp->yarn_ext_factor >= 0 || hp->yarn_ext_factor == -1)) ||
            !(hp->yarn_log_mul >= 0 && hp->yarn_log_mul < 100))
            return BAD("YaRN: ext_factor %g or log multiplier %g out of range", (double)hp->yarn_ext_factor,
                       (double)hp->yarn_log_mul);
    }
    if (!(hp->residual_scale >= 0 && hp->residual_scale < 1e6) || !(hp->logit_scale >= 0 && hp->logit_scale < 1e6) ||
        !(hp->attn_scale >= 0 && hp->attn_scale < 1e6))
        return BAD("a residual, logit or attention scale is negative or not a finite number");
    if (!(hp->embed_scale > 0 && isfinite(hp->embed_scale)) || !isfinite(hp->final_softcap) || hp->final_softcap < 0 ||
        !isfinite(hp->attn_softcap) || hp->attn_softcap < 0)
        return BAD("a soft cap or the embedding scale is not a finite non-negative number");
    if (!isfinite(hp->yarn_ext_factor) || !isfinite(hp->yarn_beta_fast) || !isfinite(hp->yarn_beta_slow) ||
        !isfinite(hp->yarn_log_mul))
        return BAD("a YaRN parameter is not a finite number");
    if ((rc = validate_recurrent(hp))) return rc;
    return validate_mla(hp);
}

/* ------------------------------------------------------ tensor rows */

static int when(const rkm_hparams *hp, int w, int il)
{
    switch (w) {
    case RKM_WHEN_ALWAYS: return 1;
    case RKM_WHEN_UNTIED: return !hp->tied_output;
    case RKM_WHEN_ROPE_FREQS: return hp->has_rope_freqs;
    case RKM_WHEN_QKV_BIAS: return hp->has_qkv_bias;
    case RKM_WHEN_QK_NORM: return hp->qk_norm != RKM_QK_NORM_NONE;
    case RKM_WHEN_V_PROJ: return !hp->v_from_k_full || (il >= 0 && hp->swa_layer[il]);
    case RKM_WHEN_SHEXP: return hp->n_ff_shexp > 0;
    case RKM_WHEN_SHEXP_GATE: return hp->n_ff_shexp > 0 && hp->shexp_gate;
    case RKM_WHEN_Q_LORA: return hp->q_lora_rank > 0;
    case RKM_WHEN_NO_Q_LORA: return hp->q_lora_rank == 0;
    case RKM_WHEN_SIGMOID: return hp->expert_gating == RKM_GATING_SIGMOID;
    case RKM_WHEN_ATTN_LAYER: return !rkm_hparams_is_recurrent(hp, il);
    case RKM_WHEN_RECR_LAYER: return rkm_hparams_is_recurrent(hp, il);
    case RKM_WHEN_RECR_SPLIT: return rkm_hparams_is_recurrent(hp, il) && !hp->ssm_fused_in;
    case RKM_WHEN_RECR_FUSED: return rkm_hparams_is_recurrent(hp, il) && hp->ssm_fused_in;
    default: return 0;
    }
}

int rkm_hparams_tensor_expected(const rkm_hparams *hp, const rkm_tensor_info *t, int il)
{
    int in_layers = t->layers == RKM_LAYERS_GLOBAL ? il < 0
                  : il < 0 || il >= hp->n_layer ? 0
                  : t->layers == RKM_LAYERS_ALL ? 1
                  : t->layers == RKM_LAYERS_MOE ? rkm_hparams_is_moe_layer(hp, il)
                                                : !rkm_hparams_is_moe_layer(hp, il);
    return in_layers && when(hp, t->when, il);
}

int rkm_hparams_tensor_required(const rkm_hparams *hp, const rkm_tensor_info *t, int il)
{
    return rkm_hparams_tensor_expected(hp, t, il) && when(hp, t->need, il);
}

static int64_t dim(const rkm_hparams *hp, int d, int il)
{
    int swa = il >= 0 && il < hp->n_layer && hp->swa_layer[il];
    int64_t hd = swa ? hp->head_dim_swa : hp->head_dim, hdv = swa ? hp->head_dim_swa : hp->head_dim_v;
    int64_t kv = il >= 0 && il < RKM_MAX_LAYERS ? hp->n_head_kv[il] : 0, nh = hp->n_head;
    if (hp->kv_lora_rank > 0) hd = hp->head_dim_k_mla, hdv = hp->head_dim_v_mla; /* the projections' heads */
    switch (d) {
    case RKM_DIM_EMBD: return hp->n_embd;
    case RKM_DIM_VOCAB: return hp->n_vocab;
    case RKM_DIM_Q: return nh * hd * (hp->attn_q_gate ? 2 : 1);
    case RKM_DIM_K: return kv * hd;
    case RKM_DIM_V: return kv * hdv;
    case RKM_DIM_O: return nh * hdv;
    case RKM_DIM_QK_NORM_Q: return hp->qk_norm == RKM_QK_NORM_FULL ? nh * hd : hd;
    case RKM_DIM_QK_NORM_K: return hp->qk_norm == RKM_QK_NORM_FULL ? kv * hd : hd;
    case RKM_DIM_FF: return hp->n_ff;
    case RKM_DIM_FF_EXP: return hp->n_ff_exp;
    case RKM_DIM_FF_EXP_X2: return 2 * (int64_t)hp->n_ff_exp;
    case RKM_DIM_FF_SHEXP: return hp->n_ff_shexp;
    case RKM_DIM_EXPERT: return hp->n_expert;
    case RKM_DIM_ROPE_PAIRS: return hp->rope_dim / 2;
    case RKM_DIM_HEAD: return hp->n_head;
    case RKM_DIM_Q_LORA: return hp->q_lora_rank;
    case RKM_DIM_KV_LORA: return hp->kv_lora_rank;
    case RKM_DIM_KV_A: return (int64_t)hp->kv_lora_rank + hp->rope_dim;
    case RKM_DIM_QK_NOPE: return (int64_t)hp->head_dim_k_mla - hp->rope_dim;
    case RKM_DIM_V_MLA: return hp->head_dim_v_mla;
    case RKM_DIM_SSM_CONV: return hp->ssm_d_conv;
    case RKM_DIM_SSM_CH: return 2 * (int64_t)hp->ssm_n_group * hp->ssm_d_state + hp->ssm_d_inner;
    case RKM_DIM_SSM_INNER: return hp->ssm_d_inner;
    case RKM_DIM_SSM_HEADS: return hp->ssm_dt_rank;
    case RKM_DIM_SSM_HEAD_V: return hp->ssm_dt_rank > 0 ? hp->ssm_d_inner / hp->ssm_dt_rank : 0;
    case RKM_DIM_SSM_QKVZ: return 2 * (int64_t)hp->ssm_n_group * hp->ssm_d_state + 2 * (int64_t)hp->ssm_d_inner;
    case RKM_DIM_SSM_HEADS2: return 2 * (int64_t)hp->ssm_dt_rank;
    case RKM_DIM_EMBD_X3: return 3 * (int64_t)hp->n_embd;
    case RKM_DIM_SSM_MAMBA_IN:
        return 2 * (int64_t)hp->ssm_d_inner + 2 * (int64_t)hp->ssm_n_group * hp->ssm_d_state + hp->ssm_dt_rank;
    case RKM_DIM_SSM_GROUP_W: return hp->ssm_n_group > 0 ? hp->ssm_d_inner / hp->ssm_n_group : 0;
    case RKM_DIM_SSM_GROUPS: return hp->ssm_n_group;
    default: return 1;
    }
}

int rkm_hparams_tensor_ne(const rkm_hparams *hp, const rkm_tensor_info *t, int il, int64_t ne[3])
{
    for (int d = 0; d < 3; d++) ne[d] = d < t->n_dims ? dim(hp, t->ne[d], il) : 1;
    return t->n_dims;
}

size_t rkm_hparams_recurrent_state_floats(const rkm_hparams *hp, int il)
{
    if (!rkm_hparams_is_recurrent(hp, il) || hp->ssm_d_conv < 1) return 0;
    if (hp->recr_kind == RKM_RECR_SHORTCONV) return (size_t)(hp->ssm_d_conv - 1) * (size_t)hp->n_embd;
    if (hp->recr_kind == RKM_RECR_MAMBA2) /* the convolution's window over x B C; each head's dim x state */
        return (size_t)(hp->ssm_d_conv - 1) * ((size_t)hp->ssm_d_inner + 2 * (size_t)hp->ssm_n_group * hp->ssm_d_state) +
               (size_t)hp->ssm_d_inner * (size_t)hp->ssm_d_state;
    size_t ch = 2 * (size_t)hp->ssm_n_group * (size_t)hp->ssm_d_state + (size_t)hp->ssm_d_inner;
    size_t sd = (size_t)hp->ssm_d_state;
    return (size_t)(hp->ssm_d_conv - 1) * ch + (size_t)hp->ssm_dt_rank * sd * sd;
}

/* ---------------------------------------------------------- from GGUF */

/* "<arch>.<suffix>" of field's GGUF key into k ("" if the arch has none). */
static const char *gkey(const char *ga, int arch, const char *field, char *k, size_t cap)
{
    const rkm_hparam_key *key = rkm_arch_key(arch, field);
    if (key && key->gguf) snprintf(k, cap, "%s.%s", ga, key->gguf);
    else k[0] = 0;
    return k;
}

static int need_int(const rkm_gguf *g, const char *k, int *out)
{
    int64_t v;
    int rc = rkm_gguf_get_int(g, k, &v);
    if (rc == RKM_ENOENT) return rkm_err(RKM_EFORMAT, "GGUF metadata lacks '%s'", k);
    if (rc) return rc;
    if (v < 0 || v > INT32_MAX) return rkm_err(RKM_EFORMAT, "GGUF '%s' = %lld is out of range", k, (long long)v);
    *out = (int)v;
    return 0;
}

static void opt_int(const rkm_gguf *g, const char *k, int *out)
{
    int64_t v;
    if (rkm_gguf_get_int(g, k, &v) == 0 && v >= 0 && v <= INT32_MAX) *out = (int)v;
}

/* A value that is not finite (NaN, inf, or too large for a float) is kept
 * as it is: rkm_hparams_validate refuses it with a message. */
static void opt_float(const rkm_gguf *g, const char *k, float *out)
{
    double v;
    /* beyond float range (a cast would be undefined): infinity, refused */
    if (rkm_gguf_get_float(g, k, &v) == 0) *out = !isfinite(v) || fabs(v) <= FLT_MAX ? (float)v : (float)copysign(INFINITY, v);
}

static int *int_field(rkm_hparams *hp, const char *name)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(hp_fields); i++)
        if (!strcmp(hp_fields[i].name, name)) return (int *)((char *)hp + hp_fields[i].off);
    RKM_ASSERT(!"no such int field");
    return NULL;
}

static const rkm_gguf_tensor *role_tensor(const rkm_gguf *g, int arch, int role, int il)
{
    char tn[128];
    return rkm_arch_tensor_name(arch, role, il, tn, sizeof tn) ? rkm_gguf_tensor_find(g, tn) : NULL;
}

/* "<arch>.rope.scaling.*" as llama.cpp reads them: the type (linear when
 * only a factor is given), the factor (or the older rope.scale_linear),
 * YaRN's original context, attention factor and ramp. */
static int rope_scaling_from_gguf(const rkm_gguf *g, const char *ga, rkm_hparams *hp)
{
    char k[160];
    float factor = 0;
    snprintf(k, sizeof k, "%s.rope.scaling.factor", ga);
    opt_float(g, k, &factor);
    if (factor == 0) {
        snprintf(k, sizeof k, "%s.rope.scale_linear", ga);
        opt_float(g, k, &factor);
    }
    snprintf(k, sizeof k, "%s.rope.scaling.type", ga);
    const char *type = rkm_gguf_get_str(g, k);
    int t = type ? rkm_rope_scaling_from_name(type) : factor != 0 ? RKM_ROPE_SCALING_LINEAR : RKM_ROPE_SCALING_NONE;
    if (t < 0) return rkm_err(RKM_EUNSUPPORTED, "RoPE scaling '%s' is not supported (none, linear, yarn)", type);
    if (factor < 0 || !isfinite(factor)) return rkm_err(RKM_EFORMAT, "%s.rope.scaling.factor %g is not a factor", ga, (double)factor);
    hp->rope_scaling = t;
    hp->rope_freq_scale = t != RKM_ROPE_SCALING_NONE && factor != 0 ? 1.0f / factor : 1.0f;
    static const struct {
        const char *key;
        size_t off;
    } fl[] = {
        {"rope.scaling.attn_factor", offsetof(rkm_hparams, rope_attn_factor)},
        {"rope.scaling.yarn_ext_factor", offsetof(rkm_hparams, yarn_ext_factor)},
        {"rope.scaling.yarn_attn_factor", offsetof(rkm_hparams, yarn_attn_factor)},
        {"rope.scaling.yarn_beta_fast", offsetof(rkm_hparams, yarn_beta_fast)},
        {"rope.scaling.yarn_beta_slow", offsetof(rkm_hparams, yarn_beta_slow)},
        {"rope.scaling.yarn_log_multiplier", offsetof(rkm_hparams, yarn_log_mul)},
    };
    for (size_t i = 0; i < RKM_ARRAY_LEN(fl); i++) {
        snprintf(k, sizeof k, "%s.%s", ga, fl[i].key);
        opt_float(g, k, (float *)((char *)hp + fl[i].off));
    }
    snprintf(k, sizeof k, "%s.rope.scaling.original_context_length", ga);
    opt_int(g, k, &hp->rope_orig_ctx);
    return 0;
}

/* Gated DeltaNet's keys (ssm.*), which layers are recurrent (the
 * attention.recurrent_layers bools, else every layer but each
 * full_attention_interval-th, 4 by default, as llama.cpp reads them). */
static int recurrent_from_gguf(const rkm_gguf *g, const char *ga, rkm_hparams *hp)
{
    char k[160];
    static const struct {
        const char *key;
        size_t off;
    } ks[] = {
        {"ssm.conv_kernel", offsetof(rkm_hparams, ssm_d_conv)},   {"ssm.inner_size", offsetof(rkm_hparams, ssm_d_inner)},
        {"ssm.state_size", offsetof(rkm_hparams, ssm_d_state)},   {"ssm.time_step_rank", offsetof(rkm_hparams, ssm_dt_rank)},
        {"ssm.group_count", offsetof(rkm_hparams, ssm_n_group)},
    };
    if (hp->arch == RKM_ARCH_LFM2 || hp->arch == RKM_ARCH_LFM2MOE) {
        /* the layers without kv heads convolve; with a sliding window, the
         * attention layers slide */
        snprintf(k, sizeof k, "%s.shortconv.l_cache", ga);
        if (rkm_gguf_find(g, k) < 0) return rkm_err(RKM_EFORMAT, "GGUF metadata lacks '%s'", k);
        opt_int(g, k, &hp->ssm_d_conv);
        if (hp->ssm_d_conv < 2) return rkm_err(RKM_EFORMAT, "%s %d: a convolution needs a kernel of 2 or more", k, hp->ssm_d_conv);
        for (int i = 0; i < hp->n_layer; i++) {
            hp->recr_layer[i] = hp->n_head_kv[i] == 0;
            hp->swa_layer[i] = hp->sliding_window > 0 && !hp->recr_layer[i];
        }
        return 0;
    }
    int any = 0;
    for (size_t i = 0; i < RKM_ARRAY_LEN(ks); i++) {
        snprintf(k, sizeof k, "%s.%s", ga, ks[i].key);
        int found = rkm_gguf_find(g, k) >= 0;
        if (found) opt_int(g, k, (int *)((char *)hp + ks[i].off));
        any |= found;
    }
    if (!any) return 0;
    if (hp->arch != RKM_ARCH_QWEN35MOE && hp->arch != RKM_ARCH_QWEN35 && hp->arch != RKM_ARCH_QWEN3NEXT &&
        hp->arch != RKM_ARCH_GRANITEHYBRID)
        return rkm_err(RKM_EUNSUPPORTED, "%s: recurrent (ssm) layers are not supported for this architecture", ga);
    if (hp->arch == RKM_ARCH_GRANITEHYBRID) {
        /* the layers without kv heads are Mamba-2; Granite's scales; no
         * RoPE unless rope.scaling.finetuned says so (4.0-H: NoPE) */
        for (int i = 0; i < hp->n_layer; i++) hp->recr_layer[i] = hp->n_head_kv[i] == 0;
        static const struct {
            const char *key;
            size_t off;
        } sc[] = {
            {"embedding_scale", offsetof(rkm_hparams, embed_scale)}, {"residual_scale", offsetof(rkm_hparams, residual_scale)},
            {"logit_scale", offsetof(rkm_hparams, logit_scale)},     {"attention.scale", offsetof(rkm_hparams, attn_scale)},
        };
        for (size_t i = 0; i < RKM_ARRAY_LEN(sc); i++) {
            snprintf(k, sizeof k, "%s.%s", ga, sc[i].key);
            opt_float(g, k, (float *)((char *)hp + sc[i].off));
        }
        int ft = 1;
        snprintf(k, sizeof k, "%s.rope.scaling.finetuned", ga);
        rkm_gguf_get_bool(g, k, &ft);
        if (!ft) hp->rope_dim = hp->rope_dim_swa = 0;
        return 0;
    }
    snprintf(k, sizeof k, "%s.attention.recurrent_layers", ga);
    int ri = rkm_gguf_find(g, k);
    if (ri >= 0) {
        if (rkm_gguf_vtype(g, ri) != RKM_GGUF_ARRAY || rkm_gguf_arr_n(g, ri) < (uint64_t)hp->n_layer)
            return rkm_err(RKM_EFORMAT, "%s must have one bool per layer", k);
        for (int i = 0; i < hp->n_layer; i++) hp->recr_layer[i] = rkm_gguf_arr_int(g, ri, (uint64_t)i) != 0;
    } else {
        int interval = 4;
        snprintf(k, sizeof k, "%s.full_attention_interval", ga);
        opt_int(g, k, &interval);
        if (interval < 1 || interval > hp->n_layer)
            return rkm_err(RKM_EFORMAT, "%s %d out of range (1..%d layers)", k, interval, hp->n_layer);
        for (int i = 0; i < hp->n_layer; i++) hp->recr_layer[i] = (i + 1) % interval != 0;
    }
    /* older Qwen3-Next files: q, k, v and z in one projection */
    for (int i = 0; i < hp->n_layer; i++)
        if (hp->recr_layer[i]) {
            hp->ssm_fused_in = role_tensor(g, hp->arch, RKM_TENSOR_SSM_IN_QKVZ, i) != NULL;
            break;
        }
    return 0;
}

/* Multi-section RoPE (rope.dimension_sections: Qwen3.5, Qwen3-VL): the
 * rotated pairs split among the positions' axes (time, height, width,
 * extra). */
static int rope_sections_from_gguf(const rkm_gguf *g, const char *ga, rkm_hparams *hp)
{
    char k[160];
    snprintf(k, sizeof k, "%s.rope.dimension_sections", ga);
    int si = rkm_gguf_find(g, k);
    if (si < 0) return 0;
    int64_t sec[4] = {0};
    if (rkm_gguf_vtype(g, si) != RKM_GGUF_ARRAY || rkm_gguf_arr_n(g, si) < 3 || rkm_gguf_arr_type(g, si) == RKM_GGUF_STRING)
        return rkm_err(RKM_EFORMAT, "%s must hold the RoPE sections", k);
    for (uint64_t i = 0; i < 4 && i < rkm_gguf_arr_n(g, si); i++) sec[i] = rkm_gguf_arr_int(g, si, i);
    return rkm_hparams_set_rope_sections(hp, sec, k);
}

int rkm_hparams_set_rope_sections(rkm_hparams *hp, const int64_t sec[4], const char *what)
{
    int64_t sum = 0;
    for (int i = 0; i < 4; i++) {
        if (sec[i] < 0 || sec[i] > 4096) return rkm_err(RKM_EFORMAT, "%s: section %d = %lld out of range", what, i, (long long)sec[i]);
        sum += sec[i];
    }
    if (sum == 0) return rkm_err(RKM_EFORMAT, "%s: every RoPE section is empty", what);
    hp->rope_sec_t = (int)sec[0];
    hp->rope_sec_h = (int)sec[1];
    hp->rope_sec_w = (int)sec[2];
    hp->rope_sec_e = (int)sec[3];
    return 0;
}

int rkm_hparams_from_gguf(const rkm_gguf *g, rkm_hparams *hp)
{
    const char *ga = rkm_gguf_get_str(g, "general.architecture");
    if (!ga) return rkm_err(RKM_EFORMAT, "GGUF has no general.architecture");
    char k[160];
    int64_t n_exp = 0;
    snprintf(k, sizeof k, "%s.expert_count", ga);
    rkm_gguf_get_int(g, k, &n_exp);
    int arch = rkm_arch_from_gguf_name(ga, n_exp > 0);
    if (arch == RKM_ARCH_UNKNOWN)
        return rkm_err(RKM_EUNSUPPORTED, "architecture '%s' is not supported (supported: %s)", ga, rkm_arch_supported(0));
    rkm_hparams_init(hp, arch);
#define K(field) gkey(ga, arch, field, k, sizeof k)
    int rc;
    if ((rc = need_int(g, K("n_layer"), &hp->n_layer)) || (rc = need_int(g, K("n_embd"), &hp->n_embd)) ||
        (rc = need_int(g, K("n_head"), &hp->n_head)))
        return rc;
    if (hp->n_layer < 1 || hp->n_layer > RKM_MAX_LAYERS)
        return rkm_err(RKM_EFORMAT, "block_count %d out of range (1..%d)", hp->n_layer, RKM_MAX_LAYERS);
    hp->n_ctx_train = 4096;
    /* the plain optional scalars, by their common keys */
    static const char *const ints[] = {"n_ctx_train", "n_ff", "n_expert", "n_expert_used", "n_ff_exp", "n_ff_shexp",
                                       "n_layer_dense_lead", "n_deepstack"};
    for (size_t i = 0; i < RKM_ARRAY_LEN(ints); i++) opt_int(g, K(ints[i]), int_field(hp, ints[i]));
    /* architectures whose experts' width is feed_forward_length (mixtral,
     * olmoe) have no expert_feed_forward_length */
    if (hp->n_expert > 0 && hp->n_ff_exp == 0) hp->n_ff_exp = hp->n_ff;
    /* shared experts counted in experts' widths (GLM-4.5, DeepSeek) */
    int n_shared = 0;
    opt_int(g, K("n_shared_experts"), &n_shared);
    if (hp->n_ff_shexp == 0 && n_shared > 0) {
        if (n_shared > 64) return rkm_err(RKM_EFORMAT, "%s %d out of range", k, n_shared);
        hp->n_ff_shexp = n_shared * hp->n_ff_exp;
    }
    /* the next-token-prediction blocks that follow the model's own
     * (GLM-4.5, DeepSeek-V3) are not part of it */
    int nextn = 0;
    opt_int(g, K("nextn_predict_layers"), &nextn);
    if (nextn < 0 || nextn >= hp->n_layer)
        return rkm_err(RKM_EFORMAT, "%s %d out of range for %d blocks", k, nextn, hp->n_layer);
    hp->n_layer -= nextn;
    int b;
    if (rkm_gguf_get_bool(g, K("expert_norm_topk"), &b) == 0) hp->expert_norm_topk = b;
    opt_float(g, K("expert_weights_scale"), &hp->expert_weights_scale);
    opt_int(g, K("n_expert_group"), &hp->n_expert_group);
    opt_int(g, K("n_group_used"), &hp->n_group_used);
    /* llama.cpp's expert_gating_func: 1 softmax, 2 sigmoid, 3 softmax of the top-k */
    int gf = 0;
    opt_int(g, K("expert_gating_func"), &gf);
    if (gf == 1) hp->expert_gating = RKM_GATING_SOFTMAX;
    else if (gf == 2) hp->expert_gating = RKM_GATING_SIGMOID;
    else if (gf == 3) hp->expert_gating = RKM_GATING_SOFTMAX_WEIGHT;
    else if (gf != 0) return rkm_err(RKM_EUNSUPPORTED, "%s %d is not supported", K("expert_gating_func"), gf);
    opt_float(g, K("rms_eps"), &hp->rms_eps);
    opt_float(g, K("rope_theta"), &hp->rope_theta);
    hp->rope_theta_swa = hp->rope_theta;
    opt_float(g, K("rope_theta_swa"), &hp->rope_theta_swa);
    if ((rc = rope_scaling_from_gguf(g, ga, hp))) return rc;
    opt_float(g, K("final_softcap"), &hp->final_softcap);
    opt_float(g, K("attn_softcap"), &hp->attn_softcap);
    opt_int(g, K("sliding_window"), &hp->sliding_window);

    /* kv heads: scalar or per-layer array */
    int ki = rkm_gguf_find(g, K("n_head_kv"));
    if (ki >= 0 && rkm_gguf_vtype(g, ki) == RKM_GGUF_ARRAY) {
        if (rkm_gguf_arr_n(g, ki) != (uint64_t)hp->n_layer || rkm_gguf_arr_type(g, ki) == RKM_GGUF_STRING)
            return rkm_err(RKM_EFORMAT, "%s must have one integer per layer", k);
        for (int i = 0; i < hp->n_layer; i++) hp->n_head_kv[i] = (int)rkm_gguf_arr_int(g, ki, (uint64_t)i);
    } else {
        int kv = hp->n_head;
        opt_int(g, k, &kv);
        for (int i = 0; i < hp->n_layer; i++) hp->n_head_kv[i] = kv;
    }
    if (hp->n_head < 1) return rkm_err(RKM_EFORMAT, "attention.head_count is 0");
    hp->head_dim = hp->n_embd / hp->n_head;
    opt_int(g, K("head_dim"), &hp->head_dim);
    hp->head_dim_v = hp->head_dim;
    opt_int(g, K("head_dim_v"), &hp->head_dim_v);
    hp->head_dim_swa = hp->head_dim;
    opt_int(g, K("head_dim_swa"), &hp->head_dim_swa);
    hp->rope_dim = hp->head_dim;
    opt_int(g, K("rope_dim"), &hp->rope_dim);
    hp->rope_dim_swa = hp->head_dim_swa;
    opt_int(g, K("rope_dim_swa"), &hp->rope_dim_swa);
    static const char *const mla[] = {"q_lora_rank", "kv_lora_rank", "head_dim_k_mla", "head_dim_v_mla"};
    for (size_t i = 0; i < RKM_ARRAY_LEN(mla); i++) opt_int(g, K(mla[i]), int_field(hp, mla[i]));
    if (hp->kv_lora_rank > 0) hp->rope_dim_swa = hp->rope_dim; /* no sliding layers */
    if (hp->kv_lora_rank > 0 && (hp->head_dim_k_mla == 0 || hp->head_dim_v_mla == 0))
        return rkm_err(RKM_EUNSUPPORTED, "%s: latent attention without attention.key_length_mla: the GGUF predates "
                       "llama.cpp's split attn_k_b / attn_v_b (convert it again from the checkpoint)", ga);
    if ((rc = recurrent_from_gguf(g, ga, hp)) || (rc = rope_sections_from_gguf(g, ga, hp))) return rc;
    /* DeepSeek's converted files store 0.1 * mscale_all_dim (llama.cpp
     * divides it back when loading deepseek2) */
    if (arch == RKM_ARCH_DEEPSEEK2) hp->yarn_log_mul /= 0.1f;

    int pi = rkm_gguf_find(g, K("swa_layer"));
    const rkm_arch_info *ai = rkm_arch_info_of(arch);
    int period = pi < 0 ? ai->swa_period : 0;
    if (pi >= 0 && rkm_gguf_vtype(g, pi) != RKM_GGUF_ARRAY) { /* a period, as llama.cpp also reads it */
        int64_t v;
        if (rkm_gguf_get_int(g, k, &v) || v < 1 || v > hp->n_layer)
            return rkm_err(RKM_EFORMAT, "%s must be a period of 1..%d layers or one bool per layer", k, hp->n_layer);
        period = (int)v;
        pi = -1;
    }
    if (period > 0) {
        if (hp->sliding_window < 1) return rkm_err(RKM_EFORMAT, "%s: sliding layers without a sliding window", ga);
        for (int i = 0; i < hp->n_layer; i++) hp->swa_layer[i] = i % period < period - 1;
    } else if (pi >= 0) {
        if (rkm_gguf_vtype(g, pi) != RKM_GGUF_ARRAY || rkm_gguf_arr_n(g, pi) != (uint64_t)hp->n_layer)
            return rkm_err(RKM_EFORMAT, "%s must have one bool per layer", k);
        for (int i = 0; i < hp->n_layer; i++) hp->swa_layer[i] = rkm_gguf_arr_int(g, pi, (uint64_t)i) != 0;
    } else if (arch == RKM_ARCH_GEMMA4 && hp->sliding_window > 0) {
        for (int i = 0; i < hp->n_layer; i++) hp->swa_layer[i] = (i % 6) != 5 && i != hp->n_layer - 1;
    }
#undef K

    /* vocabulary: the tokenizer's, else the embedding's rows */
    int ti = rkm_gguf_find(g, "tokenizer.ggml.tokens");
    const rkm_gguf_tensor *emb = role_tensor(g, arch, RKM_TENSOR_TOKEN_EMBD, -1);
    if (!emb) return rkm_err(RKM_EFORMAT, "GGUF has no %s", rkm_arch_tensor(arch, RKM_TENSOR_TOKEN_EMBD)->gguf);
    hp->n_vocab = (int)emb->ne[1];
    if (emb->ne[0] != hp->n_embd)
        return rkm_err(RKM_EFORMAT, "%s has %lld columns, embedding_length is %d", emb->name,
                       (long long)emb->ne[0], hp->n_embd);
    if (ti >= 0 && rkm_gguf_arr_n(g, ti) > (uint64_t)hp->n_vocab)
        return rkm_err(RKM_EFORMAT, "tokenizer has %llu tokens but %s only %d rows",
                       (unsigned long long)rkm_gguf_arr_n(g, ti), emb->name, hp->n_vocab);
    hp->tied_output = role_tensor(g, arch, RKM_TENSOR_OUTPUT, -1) == NULL;
    hp->has_rope_freqs = role_tensor(g, arch, RKM_TENSOR_ROPE_FREQS, -1) != NULL;
    if (role_tensor(g, arch, RKM_TENSOR_ATTN_Q_BIAS, 0)) hp->has_qkv_bias = 1;
    if (hp->qk_norm == RKM_QK_NORM_NONE && role_tensor(g, arch, RKM_TENSOR_ATTN_Q_NORM, 0))
        hp->qk_norm = RKM_QK_NORM_HEAD; /* GLM-4.5 has them, GLM-4.5-Air not */
    if (arch == RKM_ARCH_GEMMA4) hp->embed_scale = sqrtf((float)hp->n_embd);
    if (hp->n_expert > 0 && hp->n_layer_dense_lead == 0) {
        /* layers without a router are dense */
        while (hp->n_layer_dense_lead < hp->n_layer && !role_tensor(g, arch, RKM_TENSOR_FFN_GATE_INP, hp->n_layer_dense_lead))
            hp->n_layer_dense_lead++;
    }
    return rkm_hparams_validate(hp);
}
