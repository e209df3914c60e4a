/*
 * hparams.c - architecture names, per-architecture defaults, validation,
 * and reading hyper-parameters from GGUF metadata (llama.cpp's keys,
 * "<arch>.block_count" etc.). Stateless; any thread.
 */
#include "format/hparams.h"

#include <math.h>
#include <stddef.h>

#include "format/gguf.h"
#include "util/common.h"

static const char *arch_names[RKM_ARCH_COUNT] = {
    [RKM_ARCH_UNKNOWN] = "unknown", [RKM_ARCH_LLAMA] = "llama",       [RKM_ARCH_MIXTRAL] = "mixtral",
    [RKM_ARCH_QWEN2] = "qwen2",     [RKM_ARCH_QWEN3] = "qwen3",       [RKM_ARCH_QWEN2MOE] = "qwen2moe",
    [RKM_ARCH_QWEN3MOE] = "qwen3moe", [RKM_ARCH_OLMOE] = "olmoe",     [RKM_ARCH_GEMMA4] = "gemma4",
};

int rkm_arch_from_name(const char *name)
{
    for (int i = 1; i < RKM_ARCH_COUNT; i++)
        if (!strcmp(arch_names[i], name)) return i;
    return RKM_ARCH_UNKNOWN;
}

const char *rkm_arch_name(int arch)
{
    return arch > 0 && arch < RKM_ARCH_COUNT ? arch_names[arch] : "unknown";
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
    switch (arch) {
    case RKM_ARCH_LLAMA:
    case RKM_ARCH_MIXTRAL:
        hp->rope_neox = 0;
        hp->expert_norm_topk = 1; /* softmax over the top-k logits == renormalised softmax */
        break;
    case RKM_ARCH_QWEN2:
        hp->rope_neox = 1;
        hp->has_qkv_bias = 1;
        break;
    case RKM_ARCH_QWEN3:
        hp->rope_neox = 1;
        hp->qk_norm = RKM_QK_NORM_HEAD;
        break;
    case RKM_ARCH_QWEN2MOE:
        hp->rope_neox = 1;
        hp->has_qkv_bias = 1;
        hp->shexp_gate = 1;
        break;
    case RKM_ARCH_QWEN3MOE:
        hp->rope_neox = 1;
        hp->qk_norm = RKM_QK_NORM_HEAD;
        hp->expert_norm_topk = 1;
        break;
    case RKM_ARCH_OLMOE:
        hp->rope_neox = 1;
        hp->qk_norm = RKM_QK_NORM_FULL;
        break;
    case RKM_ARCH_GEMMA4:
        hp->rope_neox = 1;
        hp->qk_norm = RKM_QK_NORM_HEAD;
        hp->expert_norm_topk = 1;
        hp->act = RKM_ACT_GELU_TANH;
        hp->attn_scale = 1.0f;
        hp->v_from_k_full = 1;
        hp->v_norm = 1;
        hp->gemma4_norms = 1;
        hp->tied_output = 1;
        hp->rms_eps = 1e-6f;
        break;
    default: break;
    }
}


#define HI(f) {#f, offsetof(rkm_hparams, f), RKM_HP_INT}
#define HF(f) {#f, offsetof(rkm_hparams, f), RKM_HP_FLOAT}
#define HB(f) {#f, offsetof(rkm_hparams, f), RKM_HP_BOOL}
static const rkm_hparams_field hp_fields[] = {
    HI(n_layer), HI(n_embd), HI(n_head), HI(head_dim), HI(head_dim_v), HI(head_dim_swa), HI(n_vocab),
    HI(n_ctx_train), HI(n_ff), HI(n_expert), HI(n_expert_used), HI(n_ff_exp), HI(n_ff_shexp),
    HI(n_layer_dense_lead), HB(expert_norm_topk), HI(expert_gating), HB(shexp_gate), HI(act), HF(rms_eps),
    HI(qk_norm), HB(has_qkv_bias), HB(rope_neox), HF(rope_theta), HF(rope_theta_swa), HI(rope_dim),
    HI(rope_dim_swa), HB(has_rope_freqs), HI(sliding_window), HF(attn_scale), HF(attn_softcap),
    HF(final_softcap), HF(embed_scale), HB(tied_output), HB(v_from_k_full), HB(v_norm), HB(gemma4_norms),
};


int rkm_hparams_n_fields(void) { return (int)RKM_ARRAY_LEN(hp_fields); }
const rkm_hparams_field *rkm_hparams_field_at(int i) { return &hp_fields[i]; }

int rkm_hparams_set(rkm_hparams *hp, const char *key, const char *value)
{
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end) return rkm_err(RKM_EINVAL, "'%s' is not a number (for %s)", value, key);
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

#define BAD(...) rkm_err(RKM_EFORMAT, __VA_ARGS__)

int rkm_hparams_validate(const rkm_hparams *hp)
{
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
    if (hp->n_layer_dense_lead < 0 || hp->n_layer_dense_lead > hp->n_layer) return BAD("bad n_layer_dense_lead");
    if (!(hp->rms_eps > 0 && hp->rms_eps < 1)) return BAD("rms_eps out of range");
    if (!(hp->rope_theta > 0) || (hp->sliding_window > 0 && !(hp->rope_theta_swa > 0)))
        return BAD("rope theta out of range");
    if (hp->rope_dim < 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return BAD("rope_dim %d invalid for head_dim %d", hp->rope_dim, hp->head_dim);
    if (hp->rope_dim_swa < 0 || (hp->head_dim_swa && hp->rope_dim_swa > hp->head_dim_swa) || hp->rope_dim_swa % 2)
        return BAD("rope_dim_swa %d invalid", hp->rope_dim_swa);
    if (!(hp->embed_scale > 0) || !isfinite(hp->final_softcap) || hp->final_softcap < 0) return BAD("bad scalars");
    return 0;
}

/* ---------------------------------------------------------- from GGUF */

static int need_int(const rkm_gguf *g, const char *arch, const char *key, int *out)
{
    char k[160];
    int64_t v;
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int rc = rkm_gguf_get_int(g, k, &v);
    if (rc == RKM_ENOENT) return rkm_err(RKM_EFORMAT, "GGUF metadata lacks '%s'", k);
    if (rc) return rc;
    if (v < 0 || v > INT32_MAX) return rkm_err(RKM_EFORMAT, "GGUF '%s' = %lld is out of range", k, (long long)v);
    *out = (int)v;
    return 0;
}

static void opt_int(const rkm_gguf *g, const char *arch, const char *key, int *out)
{
    char k[160];
    int64_t v;
    snprintf(k, sizeof k, "%s.%s", arch, key);
    if (rkm_gguf_get_int(g, k, &v) == 0 && v >= 0 && v <= INT32_MAX) *out = (int)v;
}

static void opt_float(const rkm_gguf *g, const char *arch, const char *key, float *out)
{
    char k[160];
    double v;
    snprintf(k, sizeof k, "%s.%s", arch, key);
    if (rkm_gguf_get_float(g, k, &v) == 0 && isfinite(v)) *out = (float)v;
}

int rkm_hparams_from_gguf(const rkm_gguf *g, rkm_hparams *hp)
{
    const char *ga = rkm_gguf_get_str(g, "general.architecture");
    if (!ga) return rkm_err(RKM_EFORMAT, "GGUF has no general.architecture");
    int arch = rkm_arch_from_name(ga);
    char ek[160];
    int64_t n_exp = 0;
    snprintf(ek, sizeof ek, "%s.expert_count", ga);
    rkm_gguf_get_int(g, ek, &n_exp);
    if (arch == RKM_ARCH_LLAMA && n_exp > 0) arch = RKM_ARCH_MIXTRAL;
    if (arch == RKM_ARCH_MIXTRAL && strcmp(ga, "llama") && strcmp(ga, "mixtral")) arch = RKM_ARCH_UNKNOWN;
    if (arch == RKM_ARCH_UNKNOWN)
        return rkm_err(RKM_EUNSUPPORTED,
                       "architecture '%s' is not supported (supported: llama, mixtral, qwen2, qwen3, qwen2moe, "
                       "qwen3moe, olmoe, gemma4)", ga);
    rkm_hparams_init(hp, arch);
    int rc;
    if ((rc = need_int(g, ga, "block_count", &hp->n_layer)) || (rc = need_int(g, ga, "embedding_length", &hp->n_embd)) ||
        (rc = need_int(g, ga, "attention.head_count", &hp->n_head)))
        return rc;
    if (hp->n_layer < 1 || hp->n_layer > RKM_MAX_LAYERS)
        return rkm_err(RKM_EFORMAT, "block_count %d out of range (1..%d)", hp->n_layer, RKM_MAX_LAYERS);
    hp->n_ctx_train = 4096;
    opt_int(g, ga, "context_length", &hp->n_ctx_train);
    opt_int(g, ga, "feed_forward_length", &hp->n_ff);
    opt_int(g, ga, "expert_count", &hp->n_expert);
    opt_int(g, ga, "expert_used_count", &hp->n_expert_used);
    opt_int(g, ga, "expert_feed_forward_length", &hp->n_ff_exp);
    opt_int(g, ga, "expert_shared_feed_forward_length", &hp->n_ff_shexp);
    opt_int(g, ga, "leading_dense_block_count", &hp->n_layer_dense_lead);
    if (hp->n_expert > 0 && hp->n_ff_exp == 0) hp->n_ff_exp = hp->n_ff; /* mixtral stores it as feed_forward_length */
    int b;
    snprintf(ek, sizeof ek, "%s.expert_weights_norm", ga);
    if (rkm_gguf_get_bool(g, ek, &b) == 0) hp->expert_norm_topk = b;
    opt_float(g, ga, "attention.layer_norm_rms_epsilon", &hp->rms_eps);
    opt_float(g, ga, "rope.freq_base", &hp->rope_theta);
    hp->rope_theta_swa = hp->rope_theta;
    opt_float(g, ga, "rope.freq_base_swa", &hp->rope_theta_swa);
    opt_float(g, ga, "final_logit_softcapping", &hp->final_softcap);
    opt_float(g, ga, "attn_logit_softcapping", &hp->attn_softcap);
    opt_int(g, ga, "attention.sliding_window", &hp->sliding_window);

    /* kv heads: scalar or per-layer array */
    snprintf(ek, sizeof ek, "%s.attention.head_count_kv", ga);
    int ki = rkm_gguf_find(g, ek);
    if (ki >= 0 && rkm_gguf_vtype(g, ki) == RKM_GGUF_ARRAY) {
        if (rkm_gguf_arr_n(g, ki) != (uint64_t)hp->n_layer || rkm_gguf_arr_type(g, ki) == RKM_GGUF_STRING)
            return rkm_err(RKM_EFORMAT, "%s must have one integer per layer", ek);
        for (int i = 0; i < hp->n_layer; i++) hp->n_head_kv[i] = (int)rkm_gguf_arr_int(g, ki, (uint64_t)i);
    } else {
        int kv = hp->n_head;
        opt_int(g, ga, "attention.head_count_kv", &kv);
        for (int i = 0; i < hp->n_layer; i++) hp->n_head_kv[i] = kv;
    }
    if (hp->n_head < 1) return rkm_err(RKM_EFORMAT, "attention.head_count is 0");
    hp->head_dim = hp->n_embd / hp->n_head;
    opt_int(g, ga, "attention.key_length", &hp->head_dim);
    hp->head_dim_v = hp->head_dim;
    opt_int(g, ga, "attention.value_length", &hp->head_dim_v);
    hp->head_dim_swa = hp->head_dim;
    opt_int(g, ga, "attention.key_length_swa", &hp->head_dim_swa);
    hp->rope_dim = hp->head_dim;
    opt_int(g, ga, "rope.dimension_count", &hp->rope_dim);
    hp->rope_dim_swa = hp->head_dim_swa;
    opt_int(g, ga, "rope.dimension_count_swa", &hp->rope_dim_swa);

    snprintf(ek, sizeof ek, "%s.attention.sliding_window_pattern", ga);
    int pi = rkm_gguf_find(g, ek);
    if (pi >= 0) {
        if (rkm_gguf_vtype(g, pi) != RKM_GGUF_ARRAY || rkm_gguf_arr_n(g, pi) != (uint64_t)hp->n_layer)
            return rkm_err(RKM_EFORMAT, "%s must have one bool per layer", ek);
        for (int i = 0; i < hp->n_layer; i++) hp->swa_layer[i] = rkm_gguf_arr_int(g, pi, (uint64_t)i) != 0;
    } else if (arch == RKM_ARCH_GEMMA4 && hp->sliding_window > 0) {
        for (int i = 0; i < hp->n_layer; i++) hp->swa_layer[i] = (i % 6) != 5 && i != hp->n_layer - 1;
    }

    /* vocabulary: the tokenizer's, else the embedding's rows */
    int ti = rkm_gguf_find(g, "tokenizer.ggml.tokens");
    const rkm_gguf_tensor *emb = rkm_gguf_tensor_find(g, "token_embd.weight");
    if (!emb) return rkm_err(RKM_EFORMAT, "GGUF has no token_embd.weight");
    hp->n_vocab = (int)emb->ne[1];
    if (emb->ne[0] != hp->n_embd)
        return rkm_err(RKM_EFORMAT, "token_embd.weight has %lld columns, embedding_length is %d",
                       (long long)emb->ne[0], hp->n_embd);
    if (ti >= 0 && rkm_gguf_arr_n(g, ti) > (uint64_t)hp->n_vocab)
        return rkm_err(RKM_EFORMAT, "tokenizer has %llu tokens but token_embd.weight only %d rows",
                       (unsigned long long)rkm_gguf_arr_n(g, ti), hp->n_vocab);
    hp->tied_output = rkm_gguf_tensor_find(g, "output.weight") == NULL;
    hp->has_rope_freqs = rkm_gguf_tensor_find(g, "rope_freqs.weight") != NULL;
    if (rkm_gguf_tensor_find(g, "blk.0.attn_q.bias")) hp->has_qkv_bias = 1;
    if (arch == RKM_ARCH_GEMMA4) hp->embed_scale = sqrtf((float)hp->n_embd);
    if (hp->n_expert > 0 && hp->n_layer_dense_lead == 0) {
        /* layers without a router are dense */
        char tn[96];
        while (hp->n_layer_dense_lead < hp->n_layer) {
            snprintf(tn, sizeof tn, "blk.%d.ffn_gate_inp.weight", hp->n_layer_dense_lead);
            if (rkm_gguf_tensor_find(g, tn)) break;
            hp->n_layer_dense_lead++;
        }
    }
    return rkm_hparams_validate(hp);
}
