/*
 * hparams.h - the architecture and hyper-parameters of a model: everything
 * the forward pass needs besides the weights. Filled from GGUF metadata or
 * a Hugging Face config.json by the converter, stored in manifest.json,
 * read back at load. Immutable after load.
 *
 * Tensor names inside a .rkmojo follow llama.cpp's GGUF names
 * (token_embd.weight, blk.N.attn_q.weight, ...), listed per architecture
 * in arch.c; see docs/FORMAT.md.
 */
#ifndef RKM_HPARAMS_H
#define RKM_HPARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "format/arch.h"

#define RKM_MAX_LAYERS 256
/* Largest Gated DeltaNet head (ssm_d_state). */
#define RKM_MAX_SSM_STATE 1024
/* Largest per-head query/key or value width of latent attention. */
#define RKM_MAX_MLA_HEAD 1024

enum rkm_rope_scaling {
    RKM_ROPE_SCALING_NONE = 0,
    RKM_ROPE_SCALING_LINEAR,  /* positions divided by the factor */
    RKM_ROPE_SCALING_YARN     /* YaRN: interpolation ramp and attention factor */
};
/* "none", "linear", "yarn" <-> enum; -1 / NULL if unknown. */
int rkm_rope_scaling_from_name(const char *s);
const char *rkm_rope_scaling_name(int t);

typedef struct rkm_hparams {
    int arch;                 /* enum rkm_arch */
    char arch_name[32];       /* "qwen3moe", "mixtral", ... */
    int n_layer;
    int n_embd;
    int n_head;               /* query heads (all layers) */
    int n_head_kv[RKM_MAX_LAYERS]; /* per layer */
    int head_dim;             /* q/k head dim of full-attention layers */
    int head_dim_v;           /* v head dim of full-attention layers */
    int head_dim_swa;         /* q/k/v head dim of sliding layers (= head_dim if none) */
    int n_vocab;
    int n_ctx_train;
    int n_ff;                 /* dense FFN width (dense archs, gemma4 dense MLP) */
    int n_expert;             /* routed experts per MoE layer (0: dense model) */
    int n_expert_used;        /* top-k */
    int n_ff_exp;             /* routed expert FFN width */
    int n_ff_shexp;           /* shared expert width (qwen2moe), 0 if none */
    int n_layer_dense_lead;   /* leading layers with a dense FFN instead of experts */
    int expert_norm_topk;     /* renormalise top-k weights to sum 1 */
    int expert_gating;        /* enum rkm_gating */
    float expert_weights_scale; /* the top-k weights are multiplied by this (routed scaling; 1) */
    int n_expert_group;       /* experts in this many equal groups; top-k only from the
                                 n_group_used groups whose two best scores sum highest (0: none) */
    int n_group_used;
    int shexp_gate;           /* shared expert scaled by sigmoid(gate . x) (qwen2moe) */
    int act;                  /* enum rkm_act */
    float rms_eps;
    int qk_norm;              /* enum rkm_qk_norm */
    int has_qkv_bias;
    int rope_neox;            /* 1: NeoX (halves) ordering, 0: interleaved pairs */
    float rope_theta;         /* full-attention layers */
    float rope_theta_swa;     /* sliding layers */
    int rope_dim;             /* rotated dims of full layers (<= head_dim) */
    int rope_dim_swa;         /* rotated dims of sliding layers */
    int has_rope_freqs;       /* rope_freqs.weight divides the frequencies (full layers) */
    /* RoPE scaling, as llama.cpp applies it (attention.c: rkm_rope_setup) */
    int rope_scaling;         /* enum rkm_rope_scaling */
    float rope_freq_scale;    /* 1 / factor (linear, yarn); 1: none */
    int rope_orig_ctx;        /* yarn: the original context (0: n_ctx_train) */
    float rope_attn_factor;   /* rope.scaling.attn_factor: multiplies cos and sin */
    float yarn_ext_factor;    /* <0: 1 for yarn, 0 otherwise */
    float yarn_attn_factor;   /* the magnitude without extrapolation mixing */
    float yarn_beta_fast, yarn_beta_slow; /* the ramp's corrections */
    float yarn_log_mul;       /* mscale_all_dim, 0: none (GGUF rope.scaling.yarn_log_multiplier;
                                 deepseek2's files hold a tenth of it, as llama.cpp reads them) */
    int sliding_window;       /* 0: none */
    uint8_t swa_layer[RKM_MAX_LAYERS]; /* 1: sliding-window layer */
    float attn_scale;         /* 0: 1/sqrt(head_dim) */
    float attn_softcap;       /* 0: none */
    float final_softcap;      /* 0: none; logits = c * tanh(logits / c) */
    float embed_scale;        /* input embeddings multiplied by this (1 or sqrt(n_embd)) */
    int tied_output;          /* output projection is token_embd.weight */
    int v_from_k_full;        /* gemma4: full layers have no attn_v; V = normed raw K */
    int v_norm;               /* RMSNorm (no weight) on V (gemma4) */
    int gemma4_norms;         /* gemma4's sandwich norms, dense MLP + experts, layer scalar */
    /* multi-head latent attention (deepseek2; kv_lora_rank 0: none). The KV
     * cache holds one row per token of head_dim = kv_lora_rank + rope_dim
     * values (the normed latent, then the rotated key shared by all
     * heads); the values are its first head_dim_v = kv_lora_rank. */
    int q_lora_rank;          /* queries through a rank-q_lora_rank bottleneck (0: one matrix) */
    int kv_lora_rank;
    int head_dim_k_mla;       /* per head: query/key dims (no-RoPE part + rope_dim) */
    int head_dim_v_mla;       /* per head: value dims */
    /* Gated DeltaNet (qwen35, qwen35moe): recurrent layers in place of
     * attention (recr_layer). Per token, a short causal convolution over
     * ssm_d_conv positions mixes the channels q, k (ssm_n_group heads of
     * ssm_d_state) and v (ssm_dt_rank heads of ssm_d_inner / ssm_dt_rank);
     * each value head keeps a ssm_d_state x head-dim state updated by the
     * delta rule (runtime/recurrent.c). */
    int ssm_d_conv, ssm_d_inner, ssm_d_state, ssm_dt_rank, ssm_n_group;
    uint8_t recr_layer[RKM_MAX_LAYERS]; /* 1: recurrent layer */
    int ssm_grouped;          /* value head h reads key head h / (value heads per key head), and
                                 beta / alpha come per key head (qwen3next); else h mod key heads */
    int ssm_fused_in;         /* q, k, v and z in one projection, per key head (older qwen3next files) */
    int recr_kind;            /* enum rkm_recr_kind: what the recurrent layers are */
    float residual_scale;     /* each block's output scaled before the residual add (Granite; 0: 1) */
    float logit_scale;        /* logits divided by this (Granite; 0: 1) */
    int attn_q_gate;          /* the query projection carries a per-head output gate:
                                 attention output *= sigmoid(gate) (qwen35) */
    /* multi-axis RoPE (Qwen3.5, Qwen3-VL; all 0: none): the rotated pairs,
     * interleaved as llama.cpp's IMROPE interleaves them, turn by a
     * position's time, height, width or extra axis (rkm_rope_setup) */
    int rope_sec_t, rope_sec_h, rope_sec_w, rope_sec_e;
    int n_deepstack;          /* Qwen3-VL: an image row holds the embedding then this many rows
                                 added to the hidden state after layers 0.. (0: none) */
} rkm_hparams;

/* Sets the common defaults, then the arch's (arch.c's table); call before
 * filling. */
void rkm_hparams_init(rkm_hparams *hp, int arch);
/* Checks ranges and consistency; RKM_EFORMAT with a message if wrong. */
int rkm_hparams_validate(const rkm_hparams *hp);
struct rkm_gguf;
/* Reads the hyper-parameters from GGUF metadata (and tensor shapes);
 * RKM_EUNSUPPORTED names an unsupported architecture. */
int rkm_hparams_from_gguf(const struct rkm_gguf *g, rkm_hparams *hp);
/* Multi-section RoPE (sections sec[0..3] of the rotated pairs: time,
 * height, width, extra; named what in errors) into hp; RKM_EFORMAT for
 * counts out of range. */
int rkm_hparams_set_rope_sections(rkm_hparams *hp, const int64_t sec[4], const char *what);
/* The scalar fields, by name, for the manifest and `synth --set`. */
enum { RKM_HP_INT = 0, RKM_HP_FLOAT, RKM_HP_BOOL };
typedef struct rkm_hparams_field {
    const char *name;
    size_t off;
    int kind;
    int optional; /* a manifest may lack it: the default stands */
} rkm_hparams_field;
int rkm_hparams_n_fields(void);
const rkm_hparams_field *rkm_hparams_field_at(int i);
/* Sets field key from text ("n_layer", "4"); also "n_head_kv" (all
 * layers). RKM_EINVAL with a message if unknown or not a number. */
int rkm_hparams_set(rkm_hparams *hp, const char *key, const char *value);

/* A tensor row of arch.h evaluated for these hyper-parameters, in layer
 * il (-1 for global tensors): does the model hold it, must it be there
 * (else it may be absent), and its shape (returns n_dims; ne[] in GGUF
 * order, unused dims 1). */
int rkm_hparams_tensor_expected(const rkm_hparams *hp, const rkm_tensor_info *t, int il);
int rkm_hparams_tensor_required(const rkm_hparams *hp, const rkm_tensor_info *t, int il);
int rkm_hparams_tensor_ne(const rkm_hparams *hp, const rkm_tensor_info *t, int il, int64_t ne[3]);

/* Is layer il recurrent (no attention, no KV rows)? */
/* The context a session gets when none is asked for: min(4096, the
 * trained context), 4096 when the model does not say. */
static inline int rkm_hparams_default_ctx(const rkm_hparams *hp)
{
    return hp->n_ctx_train > 0 && hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
}
static inline int rkm_hparams_is_recurrent(const rkm_hparams *hp, int il)
{
    return il >= 0 && il < RKM_MAX_LAYERS && hp->recr_layer[il];
}

/* Floats of layer il's recurrent state (0 unless recurrent): the
 * convolution's last ssm_d_conv - 1 inputs, then each value head's
 * ssm_d_state x ssm_d_state matrix. */
size_t rkm_hparams_recurrent_state_floats(const rkm_hparams *hp, int il);

/* Is layer il an MoE layer (has routed experts)? */
static inline int rkm_hparams_is_moe_layer(const rkm_hparams *hp, int il)
{
    return hp->n_expert > 0 && il >= hp->n_layer_dense_lead;
}

#endif
