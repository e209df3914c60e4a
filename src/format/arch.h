/*
 * arch.h - every supported architecture described once, as data: its
 * names (rkmojo's, GGUF's general.architecture, Hugging Face's model_type
 * and architectures), its defaults, the hyper-parameter keys that differ
 * from the common ones, and its tensors, one row per tensor role with the
 * GGUF name template, the Hugging Face name templates, the shape in terms
 * of hyper-parameters and the rule saying in which layers it exists.
 *
 * synth, both converters (GGUF and Hugging Face), the loader and the
 * hyper-parameter readers read these tables; adding an architecture is one
 * entry in arch.c plus whatever forward-pass math is new
 * (docs/ADDING_AN_ARCHITECTURE.md). The rows are pure data: evaluating a
 * row's shape and presence against a model's hyper-parameters is
 * rkm_hparams_tensor_* in hparams.h.
 *
 * Name templates: "%d" is the layer ("blk.%d.attn_q.weight"); per-expert
 * names carry a second "%d", the expert ("blk.%d.ffn_gate.%d.weight").
 */
#ifndef RKM_ARCH_H
#define RKM_ARCH_H

#include <stddef.h>
#include <stdint.h>

enum rkm_arch {
    RKM_ARCH_UNKNOWN = 0,
    RKM_ARCH_LLAMA,    /* dense llama */
    RKM_ARCH_MIXTRAL,  /* llama with routed experts (GGUF arch "llama") */
    RKM_ARCH_QWEN2,
    RKM_ARCH_QWEN3,
    RKM_ARCH_QWEN2MOE,
    RKM_ARCH_QWEN3MOE,
    RKM_ARCH_OLMOE,
    RKM_ARCH_GEMMA4,
    RKM_ARCH_GPT_OSS,  /* gpt-oss: sinks, alternating sliding layers, biased experts */
    RKM_ARCH_GLM4MOE,  /* GLM-4.5 / 4.5-Air / 4.6: sigmoid routing, shared expert, dense lead */
    RKM_ARCH_DEEPSEEK2, /* DeepSeek-V2/V3, Kimi-K2, Moonlight: multi-head latent attention */
    RKM_ARCH_QWEN35MOE, /* Qwen3.5 / 3.6 MoE: Gated DeltaNet layers, gated full attention every 4th */
    RKM_ARCH_QWEN35,    /* the dense Qwen3.5 / 3.6 */
    RKM_ARCH_QWEN3NEXT, /* Qwen3-Next: qwen35moe's layers, value heads grouped by key head */
    RKM_ARCH_LFM2,      /* LFM2: gated short convolutions and attention layers */
    RKM_ARCH_LFM2MOE,   /* LFM2-8B-A1B: the same with routed experts after dense lead layers */
    RKM_ARCH_GRANITEHYBRID, /* Granite 4.0-H: Mamba-2 layers and attention, routed + shared experts */
    RKM_ARCH_QWEN3VL,   /* Qwen3-VL's text model: qwen3's layers, multi-axis RoPE, deep-stack image features */
    RKM_ARCH_QWEN3VLMOE, /* Qwen3-VL-30B-A3B / 235B-A22B: the same with qwen3moe's experts */
    RKM_ARCH_COUNT
};

enum rkm_qk_norm {
    RKM_QK_NORM_NONE = 0,
    RKM_QK_NORM_HEAD,  /* RMSNorm per head, weight of size head_dim (qwen3, gemma4) */
    RKM_QK_NORM_FULL   /* RMSNorm over the whole projection (olmoe) */
};

enum rkm_act {
    RKM_ACT_SILU = 0,      /* SwiGLU: silu(gate) * up */
    RKM_ACT_GELU_TANH,     /* GeGLU with the tanh approximation */
    RKM_ACT_SWIGLU_OAI     /* gpt-oss: min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, -7, 7) + 1) */
};

/* How router logits become the top-k weights. */
enum rkm_gating {
    RKM_GATING_SOFTMAX = 0,    /* softmax over all experts, top-k of the probabilities */
    RKM_GATING_SOFTMAX_WEIGHT, /* top-k of the logits, softmax over those k (gpt-oss) */
    RKM_GATING_SIGMOID         /* sigmoid scores; chosen by score + the per-expert selection
                                  bias (ffn exp_probs_b), weighed by the unbiased score
                                  (DeepSeek-V3, GLM-4.5) */
};

/* The recurrent layers' kind (runtime/recurrent.c). */
enum rkm_recr_kind {
    RKM_RECR_DELTANET = 0, /* Gated DeltaNet (qwen35, qwen35moe, qwen3next) */
    RKM_RECR_SHORTCONV,    /* LFM2's gated short convolution over ssm_d_conv positions */
    RKM_RECR_MAMBA2        /* Mamba-2's selective scan (granitehybrid) */
};

/* What a tensor is for, whatever its name in a given file format. */
enum rkm_tensor_role {
    RKM_TENSOR_TOKEN_EMBD = 0,
    RKM_TENSOR_OUTPUT_NORM,
    RKM_TENSOR_OUTPUT,
    RKM_TENSOR_ROPE_FREQS,
    RKM_TENSOR_ATTN_NORM,
    RKM_TENSOR_ATTN_Q,
    RKM_TENSOR_ATTN_K,
    RKM_TENSOR_ATTN_V,
    RKM_TENSOR_ATTN_OUT,
    RKM_TENSOR_ATTN_Q_BIAS,
    RKM_TENSOR_ATTN_K_BIAS,
    RKM_TENSOR_ATTN_V_BIAS,
    RKM_TENSOR_ATTN_Q_NORM,
    RKM_TENSOR_ATTN_K_NORM,
    RKM_TENSOR_ATTN_POST_NORM,
    RKM_TENSOR_FFN_NORM,
    RKM_TENSOR_FFN_GATE,
    RKM_TENSOR_FFN_UP,
    RKM_TENSOR_FFN_DOWN,
    RKM_TENSOR_FFN_POST_NORM_1,
    RKM_TENSOR_FFN_PRE_NORM_2,
    RKM_TENSOR_FFN_GATE_INP,       /* router */
    RKM_TENSOR_FFN_GATE_INP_SCALE,
    RKM_TENSOR_FFN_GATE_EXPS,      /* routed experts: [n_embd, n_ff_exp, n_expert] */
    RKM_TENSOR_FFN_UP_EXPS,
    RKM_TENSOR_FFN_DOWN_EXPS,
    RKM_TENSOR_FFN_GATE_UP_EXPS,   /* gate rows then up rows per expert */
    RKM_TENSOR_FFN_DOWN_EXPS_SCALE,
    RKM_TENSOR_FFN_GATE_INP_SHEXP,
    RKM_TENSOR_FFN_GATE_SHEXP,
    RKM_TENSOR_FFN_UP_SHEXP,
    RKM_TENSOR_FFN_DOWN_SHEXP,
    RKM_TENSOR_FFN_POST_NORM_2,
    RKM_TENSOR_FFN_POST_NORM,
    RKM_TENSOR_LAYER_OUT_SCALE,
    RKM_TENSOR_ATTN_OUT_BIAS,
    RKM_TENSOR_ATTN_SINKS,         /* per head: a logit in each softmax's denominator */
    RKM_TENSOR_FFN_GATE_INP_BIAS,  /* router bias */
    RKM_TENSOR_FFN_GATE_EXPS_BIAS, /* per-expert biases [n_ff_exp or n_embd, n_expert], resident */
    RKM_TENSOR_FFN_UP_EXPS_BIAS,
    RKM_TENSOR_FFN_DOWN_EXPS_BIAS,
    RKM_TENSOR_FFN_EXP_PROBS_B,    /* per-expert bias added to the scores for selection only */
    /* multi-head latent attention (deepseek2) */
    RKM_TENSOR_ATTN_Q_A,           /* q LoRA down: n_embd -> q_lora_rank */
    RKM_TENSOR_ATTN_Q_A_NORM,      /* (q_lora_rank) */
    RKM_TENSOR_ATTN_Q_B,           /* q LoRA up: q_lora_rank -> n_head * head_dim_k_mla */
    RKM_TENSOR_ATTN_KV_A_MQA,      /* n_embd -> the latent (kv_lora_rank) and the shared RoPE key */
    RKM_TENSOR_ATTN_KV_A_NORM,     /* (kv_lora_rank) */
    RKM_TENSOR_ATTN_K_B,           /* per head: the no-RoPE query part -> latent (absorbed K) */
    RKM_TENSOR_ATTN_V_B,           /* per head: latent -> value head */
    /* Gated DeltaNet (qwen35, qwen35moe, qwen3next): recurrent layers */
    RKM_TENSOR_SSM_IN,             /* n_embd -> the convolved channels: q, k (key dims) and v (inner) */
    RKM_TENSOR_SSM_GATE_Z,         /* n_embd -> inner: the output gate z */
    RKM_TENSOR_SSM_CONV1D,         /* (conv kernel, channels): the causal short convolution */
    RKM_TENSOR_SSM_DT,             /* (value heads): bias of the decay's softplus */
    RKM_TENSOR_SSM_A,              /* (value heads): -exp(A_log) */
    RKM_TENSOR_SSM_BETA,           /* n_embd -> value heads: the write strength (sigmoid) */
    RKM_TENSOR_SSM_ALPHA,          /* n_embd -> value heads: the decay's input */
    RKM_TENSOR_SSM_NORM,           /* (value head dim): the gated RMSNorm */
    RKM_TENSOR_SSM_OUT,            /* inner -> n_embd */
    RKM_TENSOR_SSM_IN_QKVZ,        /* every input projection in one: Qwen3-Next's older files (q, k, v,
                                      z per key head), Mamba-2 (z, then x B C, then dt) */
    RKM_TENSOR_SSM_CONV1D_BIAS,    /* Mamba-2: (channels) */
    RKM_TENSOR_SSM_D,              /* Mamba-2: (heads) the skip connection's scale */
    RKM_TENSOR_SSM_BETA_ALPHA,     /* Qwen3-Next: beta and alpha in one, per key head */
    /* LFM2's gated short convolution */
    RKM_TENSOR_SHORTCONV_IN,       /* n_embd -> 3 n_embd: the gates b and c, the input x */
    RKM_TENSOR_SHORTCONV_CONV,     /* (kernel, n_embd) */
    RKM_TENSOR_SHORTCONV_OUT,      /* n_embd -> n_embd */
    RKM_TENSOR_ROLE_COUNT
};

/* Routed-expert weights: stored in the expert files, not resident. */
static inline int rkm_tensor_role_is_expert(int role)
{
    return role >= RKM_TENSOR_FFN_GATE_EXPS && role <= RKM_TENSOR_FFN_GATE_UP_EXPS;
}

/* One dimension of a tensor, in hyper-parameters of the model and (for
 * the attention) of the layer: hd = head dim of the layer (head_dim_swa on
 * sliding layers), hdv = its value head dim, kv = its kv heads. */
enum rkm_dim {
    RKM_DIM_ONE = 0,
    RKM_DIM_EMBD,       /* n_embd */
    RKM_DIM_VOCAB,      /* n_vocab */
    RKM_DIM_Q,          /* n_head * hd (MLA: n_head * head_dim_k_mla; x2 with attn_q_gate: each
                           head's query, then its output gate) */
    RKM_DIM_K,          /* kv * hd */
    RKM_DIM_V,          /* kv * hdv */
    RKM_DIM_O,          /* n_head * hdv (MLA: n_head * head_dim_v_mla) */
    RKM_DIM_QK_NORM_Q,  /* hd (per-head norm) or n_head * hd (full) */
    RKM_DIM_QK_NORM_K,  /* hd or kv * hd */
    RKM_DIM_FF,         /* n_ff */
    RKM_DIM_FF_EXP,     /* n_ff_exp */
    RKM_DIM_FF_EXP_X2,  /* 2 * n_ff_exp (fused gate and up) */
    RKM_DIM_FF_SHEXP,   /* n_ff_shexp */
    RKM_DIM_EXPERT,     /* n_expert */
    RKM_DIM_ROPE_PAIRS, /* rope_dim / 2 */
    RKM_DIM_HEAD,       /* n_head */
    RKM_DIM_Q_LORA,     /* q_lora_rank */
    RKM_DIM_KV_LORA,    /* kv_lora_rank */
    RKM_DIM_KV_A,       /* kv_lora_rank + rope_dim */
    RKM_DIM_QK_NOPE,    /* head_dim_k_mla - rope_dim */
    RKM_DIM_V_MLA,      /* head_dim_v_mla */
    RKM_DIM_SSM_CONV,   /* ssm_d_conv: the convolution's kernel */
    RKM_DIM_SSM_CH,     /* the convolved channels: 2 * ssm_n_group * ssm_d_state + ssm_d_inner */
    RKM_DIM_SSM_INNER,  /* ssm_d_inner: value heads x value head dim */
    RKM_DIM_SSM_HEADS,  /* ssm_dt_rank: value heads */
    RKM_DIM_SSM_HEAD_V, /* ssm_d_inner / ssm_dt_rank */
    RKM_DIM_SSM_QKVZ,   /* the convolved channels and the gate z */
    RKM_DIM_SSM_HEADS2, /* 2 * ssm_dt_rank */
    RKM_DIM_EMBD_X3,    /* 3 * n_embd */
    RKM_DIM_SSM_MAMBA_IN, /* Mamba-2's in_proj: 2 * ssm_d_inner + 2 * ssm_n_group * ssm_d_state + ssm_dt_rank */
    RKM_DIM_SSM_GROUP_W,  /* ssm_d_inner / ssm_n_group */
    RKM_DIM_SSM_GROUPS,   /* ssm_n_group */
    RKM_DIM_COUNT
};

/* Which layers hold the tensor. */
enum rkm_layers {
    RKM_LAYERS_GLOBAL = 0, /* not per layer */
    RKM_LAYERS_ALL,
    RKM_LAYERS_MOE,        /* layers with routed experts */
    RKM_LAYERS_DENSE,      /* the others (dense models, dense-lead layers) */
};

/* Conditions on the hyper-parameters (and the layer). */
enum rkm_when {
    RKM_WHEN_ALWAYS = 0,
    RKM_WHEN_NEVER,
    RKM_WHEN_UNTIED,       /* !tied_output */
    RKM_WHEN_ROPE_FREQS,   /* has_rope_freqs */
    RKM_WHEN_QKV_BIAS,     /* has_qkv_bias */
    RKM_WHEN_QK_NORM,      /* qk_norm != none */
    RKM_WHEN_V_PROJ,       /* sliding layer, or !v_from_k_full */
    RKM_WHEN_SHEXP,        /* n_ff_shexp > 0 */
    RKM_WHEN_SHEXP_GATE,   /* n_ff_shexp > 0 and shexp_gate */
    RKM_WHEN_Q_LORA,       /* q_lora_rank > 0 */
    RKM_WHEN_NO_Q_LORA,    /* q_lora_rank == 0 */
    RKM_WHEN_SIGMOID,      /* sigmoid gating */
    RKM_WHEN_ATTN_LAYER,   /* the layer attends (not recurrent) */
    RKM_WHEN_RECR_LAYER,   /* the layer is recurrent (hp->recr_layer) */
    RKM_WHEN_RECR_SPLIT,   /* ... with q/k/v and z projections apart (!ssm_fused_in) */
    RKM_WHEN_RECR_FUSED,   /* ... with them in one per key head (ssm_fused_in) */
    RKM_WHEN_COUNT
};

/* How synth draws the tensor (synth.c has the recipe). */
enum rkm_init {
    RKM_INIT_MAT = 0,      /* N(0, (0.7/sqrt(fan_in))^2) */
    RKM_INIT_ROUTER,       /* N(0, gain^2); kept f32 by synth and the converter */
    RKM_INIT_EMBED,        /* N(0, gain^2) */
    RKM_INIT_OUTPUT,       /* N(0, (3/sqrt(n_embd))^2) */
    RKM_INIT_NORM,         /* gain * (1 + N(0, 0.1^2)) */
    RKM_INIT_BIAS,         /* N(0, (0.02 gain)^2) */
    RKM_INIT_SCALE,        /* 1 + N(0, 0.1^2) */
    RKM_INIT_ROPE_FREQS,   /* partial rotary: 1 for the first quarter, 1e30 after */
    RKM_INIT_SINK,         /* N(0, 1): a logit the size of attention scores */
    RKM_INIT_SSM_A,        /* -U(1, 16): -exp(A_log) of a recurrent layer's decay */
    RKM_INIT_SSM_DT,       /* softplus^-1 of exp(U(ln 0.001, ln 0.1)): the decay's bias */
};

enum {
    RKM_TF_HF_ROW = 1,            /* HF stores the vector as a [1, n] matrix */
    RKM_TF_HF_DERIVED = 2,        /* no HF tensor: the converter derives it from config.json */
    RKM_TF_GAIN_OVER_SQRT_EMBD = 4, /* synth's gain is divided by sqrt(n_embd) */
    RKM_TF_HF_PLUS_ONE = 8,         /* HF stores w - 1 (the model scales by 1 + w): GGUF's is w + 1 */
    RKM_TF_HF_NEG_EXP = 16,         /* HF stores A_log: GGUF's is -exp(A_log) */
    RKM_TF_HF_VHEADS = 32           /* HF groups the value heads by key head, GGUF tiles them (Qwen3.5):
                                     * rows, or elements of 1-D and out_proj rows, permuted (source.c) */
};

#define RKM_ARCH_MAX_HF 2

typedef struct rkm_tensor_info {
    int role;                          /* enum rkm_tensor_role */
    const char *gguf;                  /* GGUF name template */
    const char *gguf_split;            /* experts: one tensor per expert in older GGUFs, or NULL */
    const char *hf[RKM_ARCH_MAX_HF];   /* HF templates (first is written); NULL: none */
    uint8_t n_dims;
    uint8_t ne[3];                     /* enum rkm_dim, ne[0] innermost (GGUF order) */
    uint8_t layers;                    /* enum rkm_layers */
    uint8_t when;                      /* enum rkm_when: the tensor exists */
    uint8_t need;                      /* enum rkm_when: ... and must be there (else may be absent) */
    uint8_t flags;                     /* RKM_TF_* */
    uint8_t init;                      /* enum rkm_init */
    float gain;                        /* synth's gain (0: 1) */
} rkm_tensor_info;

/* A default: hyper-parameter field (rkm_hparams_field's name) = value. */
typedef struct rkm_arch_default {
    const char *field;
    double value;
} rkm_arch_default;

/* Where a hyper-parameter is found: GGUF key suffix ("<arch>." + suffix)
 * and config.json key. */
typedef struct rkm_hparam_key {
    const char *field;
    const char *gguf;
    const char *hf;
} rkm_hparam_key;

#define RKM_ARCH_MAX_DEFAULTS 12
#define RKM_ARCH_MAX_KEYS 4

typedef struct rkm_arch_info {
    int arch;                          /* enum rkm_arch */
    const char *name;                  /* rkmojo's name (manifest "arch") */
    const char *gguf_name;             /* general.architecture */
    int experts_arch;                  /* a checkpoint of this arch with routed experts is that arch, or 0 */
    const char *hf_model_type[2];      /* config.json model_type; first is written */
    const char *hf_architectures[2];   /* config.json architectures[0] */
    const char *hf_prefix;             /* HF names below this prefix are also accepted as "model." */
    int hf_text_config;                /* the text model's config nests in "text_config" */
    int hf_rope_permute;               /* HF q/k rows are rotate-half: permute to interleaved */
    int expert_width_in_ff;            /* n_ff_exp is stored as feed_forward_length / intermediate_size */
    int swa_period;                    /* no per-layer pattern in a GGUF: layer il slides when
                                        * il % period < period - 1 (llama.cpp's set_swa_pattern); 0: none */
    rkm_arch_default defaults[RKM_ARCH_MAX_DEFAULTS]; /* over the common ones (rkm_hparams_init) */
    rkm_hparam_key keys[RKM_ARCH_MAX_KEYS];           /* over the common keys (arch.c) */
    const rkm_tensor_info *tensors;    /* in the order synth writes them */
    int n_tensors;
} rkm_arch_info;

/* The entry of arch, NULL if unknown. */
const rkm_arch_info *rkm_arch_info_of(int arch);
int rkm_arch_from_name(const char *name);
const char *rkm_arch_name(int arch);
/* general.architecture (+ whether the file has routed experts) -> arch, 0 if unknown. */
int rkm_arch_from_gguf_name(const char *name, int has_experts);
/* config.json model_type, else architectures[0] -> arch, 0 if unknown. */
int rkm_arch_from_hf(const char *model_type, const char *architecture, int has_experts);
/* "llama, mixtral, ..." (hf: the model types) for error messages. */
const char *rkm_arch_supported(int hf);

/* The key of field for arch (its override, else the common one); NULL if none. */
const rkm_hparam_key *rkm_arch_key(int arch, const char *field);

/* Tensor rows. */
const rkm_tensor_info *rkm_arch_tensor(int arch, int role);
/* The row whose GGUF name (or per-expert name) s is; *il gets the layer
 * (-1 for global tensors), *expert the expert (-1 unless per-expert). */
const rkm_tensor_info *rkm_arch_tensor_by_gguf(int arch, const char *s, int *il, int *expert);
/* The row whose HF name s is (after the arch's prefix alias). */
const rkm_tensor_info *rkm_arch_tensor_by_hf(int arch, const char *s, int *il, int *expert);
/* Formats template tmpl with il (and expert for per-expert templates) into
 * buf; 0, or RKM_EINVAL if it does not fit. */
int rkm_arch_format(const char *tmpl, int il, int expert, char *buf, size_t cap);
/* The GGUF name of role in layer il, into buf; NULL if arch has no such role. */
const char *rkm_arch_tensor_name(int arch, int role, int il, char *buf, size_t cap);
/* Does s match template tmpl? Collects up to two integers into v. */
int rkm_arch_match(const char *tmpl, const char *s, int v[2], int *nv);

#endif
