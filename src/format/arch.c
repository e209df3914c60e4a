/*
 * arch.c - the architecture tables (see arch.h) and the lookups over them:
 * names, hyper-parameter keys, tensor rows by role, by GGUF name and by
 * Hugging Face name. Constant data; any thread.
 *
 * Tensor rows are listed in the order synth writes them (globals, then per
 * layer: attention, norms, dense FFN, experts), since that order is the
 * order of the tensors in synth's GGUF. Architectures that share names
 * share rows through the ROWS_* lists.
 */
#include "format/arch.h"

#include <stdio.h>
#include <string.h>

#include "util/common.h"

/* ------------------------------------------------------ tensor rows */

#define SHAPE1(a) .n_dims = 1, .ne = {RKM_DIM_##a, 0, 0}
#define SHAPE2(a, b) .n_dims = 2, .ne = {RKM_DIM_##a, RKM_DIM_##b, 0}
#define SHAPE3(a, b, c) .n_dims = 3, .ne = {RKM_DIM_##a, RKM_DIM_##b, RKM_DIM_##c}
#define LAYER(l) .layers = RKM_LAYERS_##l
#define WHEN(w) .when = RKM_WHEN_##w
#define NEED(w) .need = RKM_WHEN_##w
#define INIT(i) .init = RKM_INIT_##i
#define L_ "model.layers.%d."
#define G4_ "model.language_model."
#define G4L_ G4_ "layers.%d."

/* llama's names, which qwen, olmoe and mixtral share */
#define ROWS_LLAMA_GLOBAL                                                                                             \
    {RKM_TENSOR_TOKEN_EMBD, "token_embd.weight", NULL, {"model.embed_tokens.weight"}, SHAPE2(EMBD, VOCAB),            \
     LAYER(GLOBAL), INIT(EMBED)},                                                                                     \
    {RKM_TENSOR_OUTPUT_NORM, "output_norm.weight", NULL, {"model.norm.weight"}, SHAPE1(EMBD), LAYER(GLOBAL),         \
     INIT(NORM)},                                                                                                     \
    {RKM_TENSOR_OUTPUT, "output.weight", NULL, {"lm_head.weight"}, SHAPE2(EMBD, VOCAB), LAYER(GLOBAL), WHEN(UNTIED), \
     INIT(OUTPUT)},                                                                                                   \
    {RKM_TENSOR_ROPE_FREQS, "rope_freqs.weight", NULL, {NULL}, SHAPE1(ROPE_PAIRS), LAYER(GLOBAL), WHEN(ROPE_FREQS),  \
     INIT(ROPE_FREQS), .flags = RKM_TF_HF_DERIVED}

/* optional q/k/v biases and q/k norms, by the hyper-parameters (qwen2,
 * qwen3, olmoe, glm4moe) */
#define ROWS_ATTN_BIAS_NORM                                                                                           \
    {RKM_TENSOR_ATTN_Q_BIAS, "blk.%d.attn_q.bias", NULL, {L_ "self_attn.q_proj.bias"}, SHAPE1(Q), LAYER(ALL),         \
     WHEN(QKV_BIAS), INIT(BIAS)},                                                                                     \
    {RKM_TENSOR_ATTN_K_BIAS, "blk.%d.attn_k.bias", NULL, {L_ "self_attn.k_proj.bias"}, SHAPE1(K), LAYER(ALL),         \
     WHEN(QKV_BIAS), INIT(BIAS)},                                                                                     \
    {RKM_TENSOR_ATTN_V_BIAS, "blk.%d.attn_v.bias", NULL, {L_ "self_attn.v_proj.bias"}, SHAPE1(V), LAYER(ALL),         \
     WHEN(QKV_BIAS), INIT(BIAS)},                                                                                     \
    {RKM_TENSOR_ATTN_Q_NORM, "blk.%d.attn_q_norm.weight", NULL, {L_ "self_attn.q_norm.weight"}, SHAPE1(QK_NORM_Q),   \
     LAYER(ALL), WHEN(QK_NORM), INIT(NORM)},                                                                          \
    {RKM_TENSOR_ATTN_K_NORM, "blk.%d.attn_k_norm.weight", NULL, {L_ "self_attn.k_norm.weight"}, SHAPE1(QK_NORM_K),   \
     LAYER(ALL), WHEN(QK_NORM), INIT(NORM)}

/* the dense SwiGLU of dense models and dense-lead layers */
#define ROWS_DENSE_FFN                                                                                                \
    {RKM_TENSOR_FFN_GATE, "blk.%d.ffn_gate.weight", NULL, {L_ "mlp.gate_proj.weight"}, SHAPE2(EMBD, FF),              \
     LAYER(DENSE)},                                                                                                   \
    {RKM_TENSOR_FFN_UP, "blk.%d.ffn_up.weight", NULL, {L_ "mlp.up_proj.weight"}, SHAPE2(EMBD, FF), LAYER(DENSE)},     \
    {RKM_TENSOR_FFN_DOWN, "blk.%d.ffn_down.weight", NULL, {L_ "mlp.down_proj.weight"}, SHAPE2(FF, EMBD),              \
     LAYER(DENSE)}

#define ROWS_LLAMA_ATTN                                                                                               \
    {RKM_TENSOR_ATTN_NORM, "blk.%d.attn_norm.weight", NULL, {L_ "input_layernorm.weight"}, SHAPE1(EMBD), LAYER(ALL),  \
     INIT(NORM)},                                                                                                     \
    {RKM_TENSOR_ATTN_Q, "blk.%d.attn_q.weight", NULL, {L_ "self_attn.q_proj.weight"}, SHAPE2(EMBD, Q), LAYER(ALL)},   \
    {RKM_TENSOR_ATTN_K, "blk.%d.attn_k.weight", NULL, {L_ "self_attn.k_proj.weight"}, SHAPE2(EMBD, K), LAYER(ALL)},   \
    {RKM_TENSOR_ATTN_V, "blk.%d.attn_v.weight", NULL, {L_ "self_attn.v_proj.weight"}, SHAPE2(EMBD, V), LAYER(ALL),    \
     WHEN(V_PROJ)},                                                                                                   \
    {RKM_TENSOR_ATTN_OUT, "blk.%d.attn_output.weight", NULL, {L_ "self_attn.o_proj.weight"}, SHAPE2(O, EMBD),        \
     LAYER(ALL)},                                                                                                     \
    ROWS_ATTN_BIAS_NORM,                                                                                              \
    {RKM_TENSOR_FFN_NORM, "blk.%d.ffn_norm.weight", NULL, {L_ "post_attention_layernorm.weight"}, SHAPE1(EMBD),       \
     LAYER(ALL), INIT(NORM)},                                                                                         \
    ROWS_DENSE_FFN

/* llama's attention norm and projections, V always present (gpt-oss, glm4moe) */
#define ROWS_ATTN_QKVO                                                                                                \
    {RKM_TENSOR_ATTN_NORM, "blk.%d.attn_norm.weight", NULL, {L_ "input_layernorm.weight"}, SHAPE1(EMBD), LAYER(ALL),  \
     INIT(NORM)},                                                                                                     \
    {RKM_TENSOR_ATTN_Q, "blk.%d.attn_q.weight", NULL, {L_ "self_attn.q_proj.weight"}, SHAPE2(EMBD, Q), LAYER(ALL)},   \
    {RKM_TENSOR_ATTN_K, "blk.%d.attn_k.weight", NULL, {L_ "self_attn.k_proj.weight"}, SHAPE2(EMBD, K), LAYER(ALL)},   \
    {RKM_TENSOR_ATTN_V, "blk.%d.attn_v.weight", NULL, {L_ "self_attn.v_proj.weight"}, SHAPE2(EMBD, V), LAYER(ALL)},   \
    {RKM_TENSOR_ATTN_OUT, "blk.%d.attn_output.weight", NULL, {L_ "self_attn.o_proj.weight"}, SHAPE2(O, EMBD),        \
     LAYER(ALL)}

/* experts under mlp. (qwen2moe, qwen3moe, olmoe); MOE_GATE and MOE_EXPERT
 * name the HF router and per-expert projections */
#define ROWS_EXPERTS(router, gate, up, down)                                                                          \
    {RKM_TENSOR_FFN_GATE_INP, "blk.%d.ffn_gate_inp.weight", NULL, {L_ router}, SHAPE2(EMBD, EXPERT), LAYER(MOE),      \
     INIT(ROUTER), .gain = 2.0f, .flags = RKM_TF_GAIN_OVER_SQRT_EMBD},                                                \
    {RKM_TENSOR_FFN_GATE_EXPS, "blk.%d.ffn_gate_exps.weight", "blk.%d.ffn_gate.%d.weight", {L_ gate},                 \
     SHAPE3(EMBD, FF_EXP, EXPERT), LAYER(MOE)},                                                                       \
    {RKM_TENSOR_FFN_UP_EXPS, "blk.%d.ffn_up_exps.weight", "blk.%d.ffn_up.%d.weight", {L_ up},                         \
     SHAPE3(EMBD, FF_EXP, EXPERT), LAYER(MOE)},                                                                       \
    {RKM_TENSOR_FFN_DOWN_EXPS, "blk.%d.ffn_down_exps.weight", "blk.%d.ffn_down.%d.weight", {L_ down},                 \
     SHAPE3(FF_EXP, EMBD, EXPERT), LAYER(MOE)}

/* a shared expert's projections; HF names under prefix */
#define ROWS_SHEXP_FFN(prefix)                                                                                        \
    {RKM_TENSOR_FFN_GATE_SHEXP, "blk.%d.ffn_gate_shexp.weight", NULL, {L_ prefix "gate_proj.weight"},               \
     SHAPE2(EMBD, FF_SHEXP), LAYER(MOE), WHEN(SHEXP)},                                                                \
    {RKM_TENSOR_FFN_UP_SHEXP, "blk.%d.ffn_up_shexp.weight", NULL, {L_ prefix "up_proj.weight"},                     \
     SHAPE2(EMBD, FF_SHEXP), LAYER(MOE), WHEN(SHEXP)},                                                                \
    {RKM_TENSOR_FFN_DOWN_SHEXP, "blk.%d.ffn_down_shexp.weight", NULL, {L_ prefix "down_proj.weight"},               \
     SHAPE2(FF_SHEXP, EMBD), LAYER(MOE), WHEN(SHEXP)}

/* qwen2moe's gated shared expert */
#define ROWS_SHEXP                                                                                                    \
    {RKM_TENSOR_FFN_GATE_INP_SHEXP, "blk.%d.ffn_gate_inp_shexp.weight", NULL, {L_ "mlp.shared_expert_gate.weight"},  \
     SHAPE1(EMBD), LAYER(MOE), WHEN(SHEXP), NEED(SHEXP_GATE), INIT(ROUTER), .gain = 2.0f,                         \
     .flags = RKM_TF_HF_ROW | RKM_TF_GAIN_OVER_SQRT_EMBD},                                                            \
    ROWS_SHEXP_FFN("mlp.shared_expert.")

static const rkm_tensor_info llama_tensors[] = {ROWS_LLAMA_GLOBAL, ROWS_LLAMA_ATTN};

static const rkm_tensor_info mixtral_tensors[] = {
    ROWS_LLAMA_GLOBAL, ROWS_LLAMA_ATTN,
    ROWS_EXPERTS("block_sparse_moe.gate.weight", "block_sparse_moe.experts.%d.w1.weight",
                 "block_sparse_moe.experts.%d.w3.weight", "block_sparse_moe.experts.%d.w2.weight"),
};

/* qwen2, qwen3, their MoE variants and olmoe: one naming scheme; which
 * parts exist follows the hyper-parameters (biases, q/k norms, shared
 * expert) */
static const rkm_tensor_info qwen_tensors[] = {
    ROWS_LLAMA_GLOBAL, ROWS_LLAMA_ATTN,
    ROWS_EXPERTS("mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
                 "mlp.experts.%d.down_proj.weight"),
    ROWS_SHEXP,
};

/* Gemma 4 (transformers' Gemma4 text model). Experts stay fused in HF:
 * experts.gate_up_proj is [E, 2F, H] with each expert's gate rows before
 * its up rows, exactly ffn_gate_up_exps. Where two HF names are listed,
 * checkpoints differ (router under mlp. or not). */
static const rkm_tensor_info gemma4_tensors[] = {
    {RKM_TENSOR_TOKEN_EMBD, "token_embd.weight", NULL, {G4_ "embed_tokens.weight"}, SHAPE2(EMBD, VOCAB),
     LAYER(GLOBAL), INIT(EMBED), .gain = 0.5f, .flags = RKM_TF_GAIN_OVER_SQRT_EMBD},
    {RKM_TENSOR_OUTPUT_NORM, "output_norm.weight", NULL, {G4_ "norm.weight"}, SHAPE1(EMBD), LAYER(GLOBAL),
     INIT(NORM), .gain = 6.0f},
    {RKM_TENSOR_OUTPUT, "output.weight", NULL, {NULL}, SHAPE2(EMBD, VOCAB), LAYER(GLOBAL), WHEN(UNTIED),
     INIT(OUTPUT)},
    {RKM_TENSOR_ROPE_FREQS, "rope_freqs.weight", NULL, {NULL}, SHAPE1(ROPE_PAIRS), LAYER(GLOBAL), WHEN(ROPE_FREQS),
     INIT(ROPE_FREQS), .flags = RKM_TF_HF_DERIVED},
    {RKM_TENSOR_ATTN_NORM, "blk.%d.attn_norm.weight", NULL, {G4L_ "input_layernorm.weight"}, SHAPE1(EMBD),
     LAYER(ALL), INIT(NORM)},
    {RKM_TENSOR_ATTN_Q, "blk.%d.attn_q.weight", NULL, {G4L_ "self_attn.q_proj.weight"}, SHAPE2(EMBD, Q), LAYER(ALL)},
    {RKM_TENSOR_ATTN_K, "blk.%d.attn_k.weight", NULL, {G4L_ "self_attn.k_proj.weight"}, SHAPE2(EMBD, K), LAYER(ALL)},
    {RKM_TENSOR_ATTN_V, "blk.%d.attn_v.weight", NULL, {G4L_ "self_attn.v_proj.weight"}, SHAPE2(EMBD, V), LAYER(ALL),
     WHEN(V_PROJ)},
    {RKM_TENSOR_ATTN_OUT, "blk.%d.attn_output.weight", NULL, {G4L_ "self_attn.o_proj.weight"}, SHAPE2(O, EMBD),
     LAYER(ALL)},
    {RKM_TENSOR_ATTN_Q_NORM, "blk.%d.attn_q_norm.weight", NULL, {G4L_ "self_attn.q_norm.weight"}, SHAPE1(QK_NORM_Q),
     LAYER(ALL), WHEN(QK_NORM), INIT(NORM), .gain = 0.5f},
    {RKM_TENSOR_ATTN_K_NORM, "blk.%d.attn_k_norm.weight", NULL, {G4L_ "self_attn.k_norm.weight"}, SHAPE1(QK_NORM_K),
     LAYER(ALL), WHEN(QK_NORM), INIT(NORM), .gain = 0.5f},
    {RKM_TENSOR_ATTN_POST_NORM, "blk.%d.post_attention_norm.weight", NULL, {G4L_ "post_attention_layernorm.weight"},
     SHAPE1(EMBD), LAYER(ALL), INIT(NORM)},
    {RKM_TENSOR_FFN_NORM, "blk.%d.ffn_norm.weight", NULL, {G4L_ "pre_feedforward_layernorm.weight"}, SHAPE1(EMBD),
     LAYER(ALL), INIT(NORM)},
    {RKM_TENSOR_FFN_GATE, "blk.%d.ffn_gate.weight", NULL, {G4L_ "mlp.gate_proj.weight"}, SHAPE2(EMBD, FF), LAYER(ALL)},
    {RKM_TENSOR_FFN_UP, "blk.%d.ffn_up.weight", NULL, {G4L_ "mlp.up_proj.weight"}, SHAPE2(EMBD, FF), LAYER(ALL)},
    {RKM_TENSOR_FFN_DOWN, "blk.%d.ffn_down.weight", NULL, {G4L_ "mlp.down_proj.weight"}, SHAPE2(FF, EMBD), LAYER(ALL)},
    {RKM_TENSOR_FFN_POST_NORM_1, "blk.%d.post_ffw_norm_1.weight", NULL, {G4L_ "post_feedforward_layernorm_1.weight"},
     SHAPE1(EMBD), LAYER(MOE), INIT(NORM)},
    {RKM_TENSOR_FFN_PRE_NORM_2, "blk.%d.pre_ffw_norm_2.weight", NULL,
     {G4L_ "pre_feedforward_layernorm_2.weight", G4L_ "mlp.pre_feedforward_layernorm_2.weight"}, SHAPE1(EMBD),
     LAYER(MOE), INIT(NORM)},
    {RKM_TENSOR_FFN_GATE_INP, "blk.%d.ffn_gate_inp.weight", NULL,
     {G4L_ "router.proj.weight", G4L_ "mlp.router.proj.weight"}, SHAPE2(EMBD, EXPERT), LAYER(MOE), INIT(ROUTER),
     .gain = 2.0f},
    {RKM_TENSOR_FFN_GATE_INP_SCALE, "blk.%d.ffn_gate_inp.scale", NULL, {G4L_ "router.scale", G4L_ "mlp.router.scale"},
     SHAPE1(EMBD), LAYER(MOE), INIT(SCALE)},
    {RKM_TENSOR_FFN_GATE_UP_EXPS, "blk.%d.ffn_gate_up_exps.weight", NULL,
     {G4L_ "experts.gate_up_proj", G4L_ "mlp.experts.gate_up_proj"}, SHAPE3(EMBD, FF_EXP_X2, EXPERT), LAYER(MOE)},
    {RKM_TENSOR_FFN_DOWN_EXPS, "blk.%d.ffn_down_exps.weight", NULL,
     {G4L_ "experts.down_proj", G4L_ "mlp.experts.down_proj"}, SHAPE3(FF_EXP, EMBD, EXPERT), LAYER(MOE)},
    {RKM_TENSOR_FFN_DOWN_EXPS_SCALE, "blk.%d.ffn_down_exps.scale", NULL,
     {G4L_ "router.per_expert_scale", G4L_ "mlp.router.per_expert_scale"}, SHAPE1(EXPERT), LAYER(MOE),
     NEED(NEVER), INIT(SCALE)},
    {RKM_TENSOR_FFN_POST_NORM_2, "blk.%d.post_ffw_norm_2.weight", NULL, {G4L_ "post_feedforward_layernorm_2.weight"},
     SHAPE1(EMBD), LAYER(MOE), INIT(NORM)},
    {RKM_TENSOR_FFN_POST_NORM, "blk.%d.post_ffw_norm.weight", NULL, {G4L_ "post_feedforward_layernorm.weight"},
     SHAPE1(EMBD), LAYER(ALL), INIT(NORM)},
    {RKM_TENSOR_LAYER_OUT_SCALE, "blk.%d.layer_output_scale.weight", NULL, {G4L_ "layer_scalar"}, SHAPE1(ONE),
     LAYER(ALL), NEED(NEVER), INIT(SCALE)},
};

/* gpt-oss (transformers' GptOss): llama's attention names with biases on
 * q/k/v/o and a sink logit per head; the FFN norm is GGUF's
 * post_attention_norm; a biased router and biased experts. HF keeps the
 * experts fused (and published as MXFP4 blocks); the converter reads
 * them from safetensors by name (source.c). */
static const rkm_tensor_info gpt_oss_tensors[] = {
    ROWS_LLAMA_GLOBAL,
    ROWS_ATTN_QKVO,
    {RKM_TENSOR_ATTN_Q_BIAS, "blk.%d.attn_q.bias", NULL, {L_ "self_attn.q_proj.bias"}, SHAPE1(Q), LAYER(ALL),
     INIT(BIAS), .gain = 10.0f},
    {RKM_TENSOR_ATTN_K_BIAS, "blk.%d.attn_k.bias", NULL, {L_ "self_attn.k_proj.bias"}, SHAPE1(K), LAYER(ALL),
     INIT(BIAS), .gain = 10.0f},
    {RKM_TENSOR_ATTN_V_BIAS, "blk.%d.attn_v.bias", NULL, {L_ "self_attn.v_proj.bias"}, SHAPE1(V), LAYER(ALL),
     INIT(BIAS), .gain = 10.0f},
    {RKM_TENSOR_ATTN_OUT_BIAS, "blk.%d.attn_output.bias", NULL, {L_ "self_attn.o_proj.bias"}, SHAPE1(EMBD),
     LAYER(ALL), INIT(BIAS), .gain = 10.0f},
    {RKM_TENSOR_ATTN_SINKS, "blk.%d.attn_sinks.weight", NULL, {L_ "self_attn.sinks"}, SHAPE1(HEAD), LAYER(ALL),
     INIT(SINK)},
    {RKM_TENSOR_FFN_NORM, "blk.%d.post_attention_norm.weight", NULL, {L_ "post_attention_layernorm.weight"},
     SHAPE1(EMBD), LAYER(ALL), INIT(NORM)},
    {RKM_TENSOR_FFN_GATE_INP, "blk.%d.ffn_gate_inp.weight", NULL, {L_ "mlp.router.weight"}, SHAPE2(EMBD, EXPERT),
     LAYER(MOE), INIT(ROUTER), .gain = 4.0f, .flags = RKM_TF_GAIN_OVER_SQRT_EMBD},
    {RKM_TENSOR_FFN_GATE_INP_BIAS, "blk.%d.ffn_gate_inp.bias", NULL, {L_ "mlp.router.bias"}, SHAPE1(EXPERT),
     LAYER(MOE), INIT(BIAS), .gain = 10.0f},
    {RKM_TENSOR_FFN_GATE_EXPS, "blk.%d.ffn_gate_exps.weight", NULL, {NULL}, SHAPE3(EMBD, FF_EXP, EXPERT), LAYER(MOE)},
    {RKM_TENSOR_FFN_UP_EXPS, "blk.%d.ffn_up_exps.weight", NULL, {NULL}, SHAPE3(EMBD, FF_EXP, EXPERT), LAYER(MOE)},
    {RKM_TENSOR_FFN_DOWN_EXPS, "blk.%d.ffn_down_exps.weight", NULL, {NULL}, SHAPE3(FF_EXP, EMBD, EXPERT), LAYER(MOE)},
    {RKM_TENSOR_FFN_GATE_EXPS_BIAS, "blk.%d.ffn_gate_exps.bias", NULL, {NULL}, SHAPE2(FF_EXP, EXPERT), LAYER(MOE),
     INIT(BIAS), .gain = 10.0f},
    {RKM_TENSOR_FFN_UP_EXPS_BIAS, "blk.%d.ffn_up_exps.bias", NULL, {NULL}, SHAPE2(FF_EXP, EXPERT), LAYER(MOE),
     INIT(BIAS), .gain = 10.0f},
    {RKM_TENSOR_FFN_DOWN_EXPS_BIAS, "blk.%d.ffn_down_exps.bias", NULL, {L_ "mlp.experts.down_proj_bias"},
     SHAPE2(EMBD, EXPERT), LAYER(MOE), INIT(BIAS), .gain = 10.0f},
};

/* GLM-4.5 (transformers' Glm4Moe): llama's attention names with q/k/v
 * biases and optional per-head q/k norms (GLM-4.5, not Air), partial NeoX
 * rotary; the FFN norm is GGUF's post_attention_norm; leading dense
 * layers; a router with a selection bias (sigmoid gating); one shared
 * expert (HF shared_experts.), ungated. */
static const rkm_tensor_info glm4moe_tensors[] = {
    ROWS_LLAMA_GLOBAL,
    ROWS_ATTN_QKVO,
    ROWS_ATTN_BIAS_NORM,
    {RKM_TENSOR_FFN_NORM, "blk.%d.post_attention_norm.weight", NULL, {L_ "post_attention_layernorm.weight"},
     SHAPE1(EMBD), LAYER(ALL), INIT(NORM)},
    ROWS_DENSE_FFN,
    ROWS_EXPERTS("mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
                 "mlp.experts.%d.down_proj.weight"),
    {RKM_TENSOR_FFN_EXP_PROBS_B, "blk.%d.exp_probs_b.bias", NULL, {L_ "mlp.gate.e_score_correction_bias"},
     SHAPE1(EXPERT), LAYER(MOE), INIT(BIAS), .gain = 5.0f},
    ROWS_SHEXP_FFN("mlp.shared_experts."),
};

/* DeepSeek-V2 / V3 (transformers' DeepseekV2 / DeepseekV3; Kimi-K2 and
 * Moonlight share it): multi-head latent attention as llama.cpp's GGUF
 * stores it since the absorbed form, with kv_b_proj split per head into
 * attn_k_b (transposed: no-RoPE query part -> latent) and attn_v_b
 * (latent -> value), which the converter derives from HF's kv_b_proj;
 * queries through a LoRA pair (V2-Lite: one matrix); leading dense
 * layers; shared experts; a selection bias with sigmoid gating (V3). */
static const rkm_tensor_info deepseek2_tensors[] = {
    ROWS_LLAMA_GLOBAL,
    {RKM_TENSOR_ATTN_NORM, "blk.%d.attn_norm.weight", NULL, {L_ "input_layernorm.weight"}, SHAPE1(EMBD), LAYER(ALL),
     INIT(NORM)},
    {RKM_TENSOR_ATTN_Q, "blk.%d.attn_q.weight", NULL, {L_ "self_attn.q_proj.weight"}, SHAPE2(EMBD, Q), LAYER(ALL),
     WHEN(NO_Q_LORA)},
    {RKM_TENSOR_ATTN_Q_A, "blk.%d.attn_q_a.weight", NULL, {L_ "self_attn.q_a_proj.weight"}, SHAPE2(EMBD, Q_LORA),
     LAYER(ALL), WHEN(Q_LORA)},
    {RKM_TENSOR_ATTN_Q_A_NORM, "blk.%d.attn_q_a_norm.weight", NULL, {L_ "self_attn.q_a_layernorm.weight"},
     SHAPE1(Q_LORA), LAYER(ALL), WHEN(Q_LORA), INIT(NORM)},
    {RKM_TENSOR_ATTN_Q_B, "blk.%d.attn_q_b.weight", NULL, {L_ "self_attn.q_b_proj.weight"}, SHAPE2(Q_LORA, Q),
     LAYER(ALL), WHEN(Q_LORA)},
    {RKM_TENSOR_ATTN_KV_A_MQA, "blk.%d.attn_kv_a_mqa.weight", NULL, {L_ "self_attn.kv_a_proj_with_mqa.weight"},
     SHAPE2(EMBD, KV_A), LAYER(ALL)},
    {RKM_TENSOR_ATTN_KV_A_NORM, "blk.%d.attn_kv_a_norm.weight", NULL, {L_ "self_attn.kv_a_layernorm.weight"},
     SHAPE1(KV_LORA), LAYER(ALL), INIT(NORM)},
    {RKM_TENSOR_ATTN_K_B, "blk.%d.attn_k_b.weight", NULL, {NULL}, SHAPE3(QK_NOPE, KV_LORA, HEAD), LAYER(ALL),
     .flags = RKM_TF_HF_DERIVED},
    {RKM_TENSOR_ATTN_V_B, "blk.%d.attn_v_b.weight", NULL, {NULL}, SHAPE3(KV_LORA, V_MLA, HEAD), LAYER(ALL),
     .flags = RKM_TF_HF_DERIVED},
    {RKM_TENSOR_ATTN_OUT, "blk.%d.attn_output.weight", NULL, {L_ "self_attn.o_proj.weight"}, SHAPE2(O, EMBD),
     LAYER(ALL)},
    {RKM_TENSOR_FFN_NORM, "blk.%d.ffn_norm.weight", NULL, {L_ "post_attention_layernorm.weight"}, SHAPE1(EMBD),
     LAYER(ALL), INIT(NORM)},
    ROWS_DENSE_FFN,
    ROWS_EXPERTS("mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
                 "mlp.experts.%d.down_proj.weight"),
    {RKM_TENSOR_FFN_EXP_PROBS_B, "blk.%d.exp_probs_b.bias", NULL, {L_ "mlp.gate.e_score_correction_bias"},
     SHAPE1(EXPERT), LAYER(MOE), WHEN(SIGMOID), INIT(BIAS), .gain = 5.0f},
    ROWS_SHEXP_FFN("mlp.shared_experts."),
};

/* Qwen3.5 / 3.6 (llama.cpp's qwen35 and qwen35moe): three of every four
 * layers are Gated DeltaNet (recurrent), the rest gated full attention
 * (the query projection carries each head's output gate after its
 * query); both norm into GGUF's post_attention_norm before the FFN; the
 * MoE variant adds a shared expert with a sigmoid gate. From safetensors
 * (transformers' Qwen3_5 / Qwen3_5Moe, names under model.language_model.
 * in the multimodal checkpoints) the converter makes llama.cpp's
 * converter's transforms: the norms scale by 1 + w (all but the
 * recurrent layers' gated norm), A_log becomes -exp(A_log), the
 * convolution loses its unit dimension, and the value heads go from
 * grouped by key head to tiled (RKM_TF_HF_VHEADS); fused experts
 * (mlp.experts.gate_up_proj / down_proj) are split (source.c). */
#define ATTN_ROW(role, gguf, hf, shape, ...) {role, gguf, NULL, {hf}, shape, LAYER(ALL), WHEN(ATTN_LAYER), __VA_ARGS__}
#define RECR_ROW(role, gguf, hf, shape, ...) {role, gguf, NULL, {hf}, shape, LAYER(ALL), WHEN(RECR_LAYER), __VA_ARGS__}
/* the attending layers' q, k, v and output projections (o_hf: the
 * output's HF name after "self_attn.") */
#define ATTN_ROWS_QKVO(o_hf)                                                                                          \
    ATTN_ROW(RKM_TENSOR_ATTN_Q, "blk.%d.attn_q.weight", L_ "self_attn.q_proj.weight", SHAPE2(EMBD, Q)),              \
    ATTN_ROW(RKM_TENSOR_ATTN_K, "blk.%d.attn_k.weight", L_ "self_attn.k_proj.weight", SHAPE2(EMBD, K)),              \
    ATTN_ROW(RKM_TENSOR_ATTN_V, "blk.%d.attn_v.weight", L_ "self_attn.v_proj.weight", SHAPE2(EMBD, V)),              \
    ATTN_ROW(RKM_TENSOR_ATTN_OUT, "blk.%d.attn_output.weight", L_ "self_attn." o_hf, SHAPE2(O, EMBD))
#define P1_ .flags = RKM_TF_HF_PLUS_ONE
#define VH_ .flags = RKM_TF_HF_VHEADS
#define ROWS_QWEN35_GLOBAL                                                                                            \
    {RKM_TENSOR_TOKEN_EMBD, "token_embd.weight", NULL, {"model.embed_tokens.weight"}, SHAPE2(EMBD, VOCAB),            \
     LAYER(GLOBAL), INIT(EMBED)},                                                                                     \
    {RKM_TENSOR_OUTPUT_NORM, "output_norm.weight", NULL, {"model.norm.weight"}, SHAPE1(EMBD), LAYER(GLOBAL),         \
     INIT(NORM), P1_},                                                                                                \
    {RKM_TENSOR_OUTPUT, "output.weight", NULL, {"lm_head.weight"}, SHAPE2(EMBD, VOCAB), LAYER(GLOBAL), WHEN(UNTIED), \
     INIT(OUTPUT)}
/* the attention layers' rows (the recurrent ones have none) */
#define ROWS_QWEN35_ATTN                                                                                              \
    {RKM_TENSOR_ATTN_NORM, "blk.%d.attn_norm.weight", NULL, {L_ "input_layernorm.weight"}, SHAPE1(EMBD), LAYER(ALL),  \
     INIT(NORM), P1_},                                                                                                \
    ATTN_ROWS_QKVO("o_proj.weight"),                                                                                 \
    ATTN_ROW(RKM_TENSOR_ATTN_Q_NORM, "blk.%d.attn_q_norm.weight", L_ "self_attn.q_norm.weight", SHAPE1(QK_NORM_Q),   \
             INIT(NORM), P1_),                                                                                        \
    ATTN_ROW(RKM_TENSOR_ATTN_K_NORM, "blk.%d.attn_k_norm.weight", L_ "self_attn.k_norm.weight", SHAPE1(QK_NORM_K),   \
             INIT(NORM), P1_)
#define LA_ L_ "linear_attn."
static const rkm_tensor_info qwen35_tensors[] = {
    ROWS_QWEN35_GLOBAL,
    ROWS_QWEN35_ATTN,
    RECR_ROW(RKM_TENSOR_SSM_IN, "blk.%d.attn_qkv.weight", LA_ "in_proj_qkv.weight", SHAPE2(EMBD, SSM_CH), VH_),
    RECR_ROW(RKM_TENSOR_SSM_GATE_Z, "blk.%d.attn_gate.weight", LA_ "in_proj_z.weight", SHAPE2(EMBD, SSM_INNER), VH_),
    RECR_ROW(RKM_TENSOR_SSM_CONV1D, "blk.%d.ssm_conv1d.weight", LA_ "conv1d.weight", SHAPE2(SSM_CONV, SSM_CH), VH_),
    RECR_ROW(RKM_TENSOR_SSM_DT, "blk.%d.ssm_dt.bias", LA_ "dt_bias", SHAPE1(SSM_HEADS), INIT(SSM_DT), VH_),
    RECR_ROW(RKM_TENSOR_SSM_A, "blk.%d.ssm_a", LA_ "A_log", SHAPE1(SSM_HEADS), INIT(SSM_A),
             .flags = RKM_TF_HF_NEG_EXP | RKM_TF_HF_VHEADS),
    RECR_ROW(RKM_TENSOR_SSM_BETA, "blk.%d.ssm_beta.weight", LA_ "in_proj_b.weight", SHAPE2(EMBD, SSM_HEADS), VH_),
    RECR_ROW(RKM_TENSOR_SSM_ALPHA, "blk.%d.ssm_alpha.weight", LA_ "in_proj_a.weight", SHAPE2(EMBD, SSM_HEADS), VH_),
    RECR_ROW(RKM_TENSOR_SSM_NORM, "blk.%d.ssm_norm.weight", LA_ "norm.weight", SHAPE1(SSM_HEAD_V), INIT(NORM)),
    RECR_ROW(RKM_TENSOR_SSM_OUT, "blk.%d.ssm_out.weight", LA_ "out_proj.weight", SHAPE2(SSM_INNER, EMBD), VH_),
    {RKM_TENSOR_FFN_NORM, "blk.%d.post_attention_norm.weight", NULL, {L_ "post_attention_layernorm.weight"},
     SHAPE1(EMBD), LAYER(ALL), INIT(NORM), P1_},
    ROWS_DENSE_FFN,
    ROWS_EXPERTS("mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
                 "mlp.experts.%d.down_proj.weight"),
    ROWS_SHEXP,
};
/* Qwen3-Next (llama.cpp's qwen3next): qwen35moe's layers, the value
 * heads grouped by key head: beta and alpha in one projection, per key
 * head (its value heads' betas, then their alphas); in older files q, k,
 * v and z in one too (per key head: q, k, its value heads' v, then z),
 * which is how the safetensors hold them (in_proj_qkvz). Plain NeoX
 * RoPE. */
static const rkm_tensor_info qwen3next_tensors[] = {
    ROWS_QWEN35_GLOBAL,
    ROWS_QWEN35_ATTN,
    {RKM_TENSOR_SSM_IN_QKVZ, "blk.%d.ssm_in.weight", NULL, {LA_ "in_proj_qkvz.weight"}, SHAPE2(EMBD, SSM_QKVZ),
     LAYER(ALL), WHEN(RECR_FUSED)},
    {RKM_TENSOR_SSM_IN, "blk.%d.attn_qkv.weight", NULL, {NULL}, SHAPE2(EMBD, SSM_CH), LAYER(ALL), WHEN(RECR_SPLIT)},
    {RKM_TENSOR_SSM_GATE_Z, "blk.%d.attn_gate.weight", NULL, {NULL}, SHAPE2(EMBD, SSM_INNER), LAYER(ALL),
     WHEN(RECR_SPLIT)},
    RECR_ROW(RKM_TENSOR_SSM_CONV1D, "blk.%d.ssm_conv1d.weight", LA_ "conv1d.weight", SHAPE2(SSM_CONV, SSM_CH)),
    RECR_ROW(RKM_TENSOR_SSM_DT, "blk.%d.ssm_dt.bias", LA_ "dt_bias", SHAPE1(SSM_HEADS), INIT(SSM_DT)),
    RECR_ROW(RKM_TENSOR_SSM_A, "blk.%d.ssm_a", LA_ "A_log", SHAPE1(SSM_HEADS), INIT(SSM_A), .flags = RKM_TF_HF_NEG_EXP),
    RECR_ROW(RKM_TENSOR_SSM_BETA_ALPHA, "blk.%d.ssm_ba.weight", LA_ "in_proj_ba.weight", SHAPE2(EMBD, SSM_HEADS2)),
    RECR_ROW(RKM_TENSOR_SSM_NORM, "blk.%d.ssm_norm.weight", LA_ "norm.weight", SHAPE1(SSM_HEAD_V), INIT(NORM)),
    RECR_ROW(RKM_TENSOR_SSM_OUT, "blk.%d.ssm_out.weight", LA_ "out_proj.weight", SHAPE2(SSM_INNER, EMBD)),
    {RKM_TENSOR_FFN_NORM, "blk.%d.post_attention_norm.weight", NULL, {L_ "post_attention_layernorm.weight"},
     SHAPE1(EMBD), LAYER(ALL), INIT(NORM), P1_},
    ROWS_EXPERTS("mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
                 "mlp.experts.%d.down_proj.weight"),
    ROWS_SHEXP,
};
#undef P1_
#undef VH_
#undef LA_
#undef ROWS_QWEN35_GLOBAL
/* LFM2 (llama.cpp's lfm2, lfm2moe; transformers' Lfm2 / Lfm2Moe): the
 * layers without kv heads are gated short convolutions (in_proj gives b,
 * c and x; the convolution runs over b*x; c gates its output); the others
 * attend with per-head q/k norms; the output norm is GGUF's
 * token_embd_norm (HF's embedding_norm, applied last); LFM2-8B-A1B routes
 * after its dense lead layers, by sigmoid scores with a selection bias.
 * HF's conv.conv is [C, 1, L]. */
#define FF_ L_ "feed_forward."
static const rkm_tensor_info lfm2_tensors[] = {
    {RKM_TENSOR_TOKEN_EMBD, "token_embd.weight", NULL, {"model.embed_tokens.weight"}, SHAPE2(EMBD, VOCAB),
     LAYER(GLOBAL), INIT(EMBED)},
    {RKM_TENSOR_OUTPUT_NORM, "token_embd_norm.weight", NULL, {"model.embedding_norm.weight"}, SHAPE1(EMBD),
     LAYER(GLOBAL), INIT(NORM)},
    {RKM_TENSOR_OUTPUT, "output.weight", NULL, {"lm_head.weight"}, SHAPE2(EMBD, VOCAB), LAYER(GLOBAL), WHEN(UNTIED),
     INIT(OUTPUT)},
    {RKM_TENSOR_ATTN_NORM, "blk.%d.attn_norm.weight", NULL, {L_ "operator_norm.weight"}, SHAPE1(EMBD), LAYER(ALL),
     INIT(NORM)},
    ATTN_ROWS_QKVO("out_proj.weight"),
    ATTN_ROW(RKM_TENSOR_ATTN_Q_NORM, "blk.%d.attn_q_norm.weight", L_ "self_attn.q_layernorm.weight", SHAPE1(QK_NORM_Q),
             INIT(NORM)),
    ATTN_ROW(RKM_TENSOR_ATTN_K_NORM, "blk.%d.attn_k_norm.weight", L_ "self_attn.k_layernorm.weight", SHAPE1(QK_NORM_K),
             INIT(NORM)),
    RECR_ROW(RKM_TENSOR_SHORTCONV_IN, "blk.%d.shortconv.in_proj.weight", L_ "conv.in_proj.weight", SHAPE2(EMBD, EMBD_X3)),
    RECR_ROW(RKM_TENSOR_SHORTCONV_CONV, "blk.%d.shortconv.conv.weight", L_ "conv.conv.weight", SHAPE2(SSM_CONV, EMBD)),
    RECR_ROW(RKM_TENSOR_SHORTCONV_OUT, "blk.%d.shortconv.out_proj.weight", L_ "conv.out_proj.weight", SHAPE2(EMBD, EMBD)),
    {RKM_TENSOR_FFN_NORM, "blk.%d.ffn_norm.weight", NULL, {L_ "ffn_norm.weight"}, SHAPE1(EMBD), LAYER(ALL), INIT(NORM)},
    {RKM_TENSOR_FFN_GATE, "blk.%d.ffn_gate.weight", NULL, {FF_ "w1.weight"}, SHAPE2(EMBD, FF), LAYER(DENSE)},
    {RKM_TENSOR_FFN_UP, "blk.%d.ffn_up.weight", NULL, {FF_ "w3.weight"}, SHAPE2(EMBD, FF), LAYER(DENSE)},
    {RKM_TENSOR_FFN_DOWN, "blk.%d.ffn_down.weight", NULL, {FF_ "w2.weight"}, SHAPE2(FF, EMBD), LAYER(DENSE)},
    ROWS_EXPERTS("feed_forward.gate.weight", "feed_forward.experts.%d.w1.weight", "feed_forward.experts.%d.w3.weight",
                 "feed_forward.experts.%d.w2.weight"),
    {RKM_TENSOR_FFN_EXP_PROBS_B, "blk.%d.exp_probs_b.bias", NULL, {FF_ "expert_bias"}, SHAPE1(EXPERT), LAYER(MOE),
     INIT(BIAS), .gain = 5.0f},
};
#undef FF_
/* Granite 4.0-H (llama.cpp's granitehybrid; transformers'
 * GraniteMoeHybrid): the layers without kv heads are Mamba-2 (in_proj:
 * z, then x B C, then dt; a causal convolution with a bias over x B C;
 * the selective scan with a scalar decay per head, the D skip, a SiLU(z)
 * gate and an RMSNorm per group); the others attend (no RoPE in 4.0-H);
 * routed experts and an ungated shared expert, or a dense FFN. HF keeps
 * A_log, D and the norm as vectors (reshaped), and each FFN's gate and up
 * rows in one input_linear (source.c splits them). */
#define MB_ L_ "mamba."
static const rkm_tensor_info granitehybrid_tensors[] = {
    ROWS_LLAMA_GLOBAL,
    {RKM_TENSOR_ATTN_NORM, "blk.%d.attn_norm.weight", NULL, {L_ "input_layernorm.weight"}, SHAPE1(EMBD), LAYER(ALL),
     INIT(NORM)},
    ATTN_ROWS_QKVO("o_proj.weight"),
    RECR_ROW(RKM_TENSOR_SSM_IN_QKVZ, "blk.%d.ssm_in.weight", MB_ "in_proj.weight", SHAPE2(EMBD, SSM_MAMBA_IN)),
    RECR_ROW(RKM_TENSOR_SSM_CONV1D, "blk.%d.ssm_conv1d.weight", MB_ "conv1d.weight", SHAPE2(SSM_CONV, SSM_CH)),
    RECR_ROW(RKM_TENSOR_SSM_CONV1D_BIAS, "blk.%d.ssm_conv1d.bias", MB_ "conv1d.bias", SHAPE1(SSM_CH), INIT(BIAS),
             .gain = 10.0f),
    RECR_ROW(RKM_TENSOR_SSM_DT, "blk.%d.ssm_dt.bias", MB_ "dt_bias", SHAPE1(SSM_HEADS), INIT(SSM_DT)),
    RECR_ROW(RKM_TENSOR_SSM_A, "blk.%d.ssm_a", MB_ "A_log", SHAPE2(ONE, SSM_HEADS), INIT(SSM_A),
             .flags = RKM_TF_HF_NEG_EXP),
    RECR_ROW(RKM_TENSOR_SSM_D, "blk.%d.ssm_d", MB_ "D", SHAPE2(ONE, SSM_HEADS), INIT(NORM)),
    RECR_ROW(RKM_TENSOR_SSM_NORM, "blk.%d.ssm_norm.weight", MB_ "norm.weight", SHAPE2(SSM_GROUP_W, SSM_GROUPS),
             INIT(NORM)),
    RECR_ROW(RKM_TENSOR_SSM_OUT, "blk.%d.ssm_out.weight", MB_ "out_proj.weight", SHAPE2(SSM_INNER, EMBD)),
    {RKM_TENSOR_FFN_NORM, "blk.%d.ffn_norm.weight", NULL, {L_ "post_attention_layernorm.weight"}, SHAPE1(EMBD),
     LAYER(ALL), INIT(NORM)},
    {RKM_TENSOR_FFN_GATE, "blk.%d.ffn_gate.weight", NULL, {NULL}, SHAPE2(EMBD, FF), LAYER(DENSE)},
    {RKM_TENSOR_FFN_UP, "blk.%d.ffn_up.weight", NULL, {NULL}, SHAPE2(EMBD, FF), LAYER(DENSE)},
    {RKM_TENSOR_FFN_DOWN, "blk.%d.ffn_down.weight", NULL, {NULL}, SHAPE2(FF, EMBD), LAYER(DENSE)},
    {RKM_TENSOR_FFN_GATE_INP, "blk.%d.ffn_gate_inp.weight", NULL, {L_ "block_sparse_moe.router.layer.weight"},
     SHAPE2(EMBD, EXPERT), LAYER(MOE), INIT(ROUTER), .gain = 2.0f, .flags = RKM_TF_GAIN_OVER_SQRT_EMBD},
    {RKM_TENSOR_FFN_GATE_EXPS, "blk.%d.ffn_gate_exps.weight", NULL, {NULL}, SHAPE3(EMBD, FF_EXP, EXPERT), LAYER(MOE)},
    {RKM_TENSOR_FFN_UP_EXPS, "blk.%d.ffn_up_exps.weight", NULL, {NULL}, SHAPE3(EMBD, FF_EXP, EXPERT), LAYER(MOE)},
    {RKM_TENSOR_FFN_DOWN_EXPS, "blk.%d.ffn_down_exps.weight", NULL, {NULL}, SHAPE3(FF_EXP, EMBD, EXPERT), LAYER(MOE)},
    {RKM_TENSOR_FFN_GATE_SHEXP, "blk.%d.ffn_gate_shexp.weight", NULL, {NULL}, SHAPE2(EMBD, FF_SHEXP), LAYER(MOE),
     WHEN(SHEXP)},
    {RKM_TENSOR_FFN_UP_SHEXP, "blk.%d.ffn_up_shexp.weight", NULL, {NULL}, SHAPE2(EMBD, FF_SHEXP), LAYER(MOE),
     WHEN(SHEXP)},
    {RKM_TENSOR_FFN_DOWN_SHEXP, "blk.%d.ffn_down_shexp.weight", NULL, {NULL}, SHAPE2(FF_SHEXP, EMBD), LAYER(MOE),
     WHEN(SHEXP)},
};
#undef MB_
#undef ROWS_QWEN35_ATTN
#undef ATTN_ROWS_QKVO
#undef ATTN_ROW
#undef RECR_ROW

/* ---------------------------------------------------- architectures */

#define TENSORS(t) .tensors = t, .n_tensors = (int)RKM_ARRAY_LEN(t)

static const rkm_arch_info archs[] = {
    {RKM_ARCH_LLAMA, "llama", "llama", RKM_ARCH_MIXTRAL, {"llama"}, {"LlamaForCausalLM"}, .hf_rope_permute = 1,
     .defaults = {{"rope_neox", 0}, {"expert_norm_topk", 1}}, TENSORS(llama_tensors)},
    /* softmax over the top-k logits == renormalised softmax */
    {RKM_ARCH_MIXTRAL, "mixtral", "llama", 0, {"mixtral"}, {"MixtralForCausalLM"}, .hf_rope_permute = 1,
     .expert_width_in_ff = 1, .defaults = {{"rope_neox", 0}, {"expert_norm_topk", 1}},
     .keys = {{"n_expert", "expert_count", "num_local_experts"}}, TENSORS(mixtral_tensors)},
    {RKM_ARCH_QWEN2, "qwen2", "qwen2", 0, {"qwen2"}, {"Qwen2ForCausalLM"},
     .defaults = {{"rope_neox", 1}, {"has_qkv_bias", 1}}, TENSORS(qwen_tensors)},
    {RKM_ARCH_QWEN3, "qwen3", "qwen3", 0, {"qwen3"}, {"Qwen3ForCausalLM"},
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}}, TENSORS(qwen_tensors)},
    {RKM_ARCH_QWEN2MOE, "qwen2moe", "qwen2moe", 0, {"qwen2_moe"}, {"Qwen2MoeForCausalLM"},
     .defaults = {{"rope_neox", 1}, {"has_qkv_bias", 1}, {"shexp_gate", 1}}, TENSORS(qwen_tensors)},
    {RKM_ARCH_QWEN3MOE, "qwen3moe", "qwen3moe", 0, {"qwen3_moe"}, {"Qwen3MoeForCausalLM"},
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}, {"expert_norm_topk", 1}},
     TENSORS(qwen_tensors)},
    {RKM_ARCH_OLMOE, "olmoe", "olmoe", 0, {"olmoe"}, {"OlmoeForCausalLM"}, .expert_width_in_ff = 1,
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_FULL}}, TENSORS(qwen_tensors)},
    {RKM_ARCH_GEMMA4, "gemma4", "gemma4", 0, {"gemma4", "gemma4_text"},
     {"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"}, .hf_prefix = G4_, .hf_text_config = 1,
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}, {"expert_norm_topk", 1}, {"act", RKM_ACT_GELU_TANH},
                  {"attn_scale", 1}, {"v_from_k_full", 1}, {"v_norm", 1}, {"gemma4_norms", 1}, {"tied_output", 1},
                  {"rms_eps", 1e-6}},
     .keys = {{"n_expert_used", "expert_used_count", "top_k_experts"}}, TENSORS(gemma4_tensors)},
    /* llama.cpp: LLM_ARCH_OPENAI_MOE; sliding layers alternate, the first
     * slides; scale 1/sqrt(head_dim) */
    {RKM_ARCH_GPT_OSS, "gpt-oss", "gpt-oss", 0, {"gpt_oss"}, {"GptOssForCausalLM"}, .swa_period = 2,
     .defaults = {{"rope_neox", 1}, {"has_qkv_bias", 1}, {"act", RKM_ACT_SWIGLU_OAI},
                  {"expert_gating", RKM_GATING_SOFTMAX_WEIGHT}},
     .keys = {{"n_expert", "expert_count", "num_local_experts"}}, TENSORS(gpt_oss_tensors)},
    /* llama.cpp: LLM_ARCH_GLM4_MOE; NeoX rotary over partial_rotary_factor
     * of the head */
    {RKM_ARCH_GLM4MOE, "glm4moe", "glm4moe", 0, {"glm4_moe"}, {"Glm4MoeForCausalLM"},
     .defaults = {{"rope_neox", 1}, {"has_qkv_bias", 1}, {"expert_gating", RKM_GATING_SIGMOID}, {"expert_norm_topk", 1}},
     .keys = {{"n_expert", "expert_count", "n_routed_experts"}, {"n_layer_dense_lead", "leading_dense_block_count",
                                                                  "first_k_dense_replace"}},
     TENSORS(glm4moe_tensors)},
    /* llama.cpp: LLM_ARCH_DEEPSEEK2; interleaved RoPE on the rotated part
     * of the queries and the shared key; softmax gating unless the file
     * says sigmoid (V2's files carry no gating key) */
    {RKM_ARCH_DEEPSEEK2, "deepseek2", "deepseek2", 0, {"deepseek_v3", "deepseek_v2"},
     {"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"},
     .defaults = {{"rope_neox", 0}},
     .keys = {{"n_expert", "expert_count", "n_routed_experts"}, {"n_layer_dense_lead", "leading_dense_block_count",
                                                                  "first_k_dense_replace"}},
     TENSORS(deepseek2_tensors)},
    /* llama.cpp: LLM_ARCH_QWEN35MOE / QWEN35; NeoX-paired multi-section
     * rotary over rope_dim of the head (text positions: the plain one) */
    {RKM_ARCH_QWEN35MOE, "qwen35moe", "qwen35moe", 0, {"qwen3_5_moe", "qwen3_5_moe_text"},
     {"Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM"}, .hf_prefix = G4_, .hf_text_config = 1,
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}, {"expert_norm_topk", 1}, {"shexp_gate", 1},
                  {"attn_q_gate", 1}},
     TENSORS(qwen35_tensors)},
    {RKM_ARCH_QWEN35, "qwen35", "qwen35", 0, {"qwen3_5", "qwen3_5_text"},
     {"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"}, .hf_prefix = G4_, .hf_text_config = 1,
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}, {"attn_q_gate", 1}}, TENSORS(qwen35_tensors)},
    {RKM_ARCH_QWEN3NEXT, "qwen3next", "qwen3next", 0, {"qwen3_next"}, {"Qwen3NextForCausalLM"},
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}, {"expert_norm_topk", 1}, {"shexp_gate", 1},
                  {"attn_q_gate", 1}, {"ssm_grouped", 1}},
     TENSORS(qwen3next_tensors)},
    /* llama.cpp: LLM_ARCH_LFM2 / LFM2MOE; NeoX RoPE */
    {RKM_ARCH_LFM2, "lfm2", "lfm2", 0, {"lfm2"}, {"Lfm2ForCausalLM"},
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}, {"tied_output", 1}, {"recr_kind", RKM_RECR_SHORTCONV}},
     .keys = {{"rms_eps", "attention.layer_norm_rms_epsilon", "norm_eps"}}, TENSORS(lfm2_tensors)},
    /* llama.cpp: LLM_ARCH_GRANITE_HYBRID; HF q/k rows permuted like llama's
     * (llama.cpp's converter does; without RoPE it changes nothing) */
    {RKM_ARCH_GRANITEHYBRID, "granitehybrid", "granitehybrid", 0, {"granitemoehybrid"}, {"GraniteMoeHybridForCausalLM"},
     .expert_width_in_ff = 1, .hf_rope_permute = 1,
     .defaults = {{"rope_neox", 0}, {"expert_norm_topk", 1}, {"recr_kind", RKM_RECR_MAMBA2}},
     .keys = {{"n_expert", "expert_count", "num_local_experts"},
              {"n_ff_shexp", "expert_shared_feed_forward_length", "shared_intermediate_size"}},
     TENSORS(granitehybrid_tensors)},
    {RKM_ARCH_LFM2MOE, "lfm2moe", "lfm2moe", 0, {"lfm2_moe"}, {"Lfm2MoeForCausalLM"},
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}, {"tied_output", 1}, {"recr_kind", RKM_RECR_SHORTCONV},
                  {"expert_gating", RKM_GATING_SIGMOID}, {"expert_norm_topk", 1}},
     .keys = {{"rms_eps", "attention.layer_norm_rms_epsilon", "norm_eps"},
              {"n_layer_dense_lead", "leading_dense_block_count", "num_dense_layers"}},
     TENSORS(lfm2_tensors)},
    /* llama.cpp: LLM_ARCH_QWEN3VL / QWEN3VLMOE; qwen3's and qwen3moe's
     * layers with interleaved multi-section RoPE (text positions: the
     * plain one) and an input as wide as the image rows of its vision
     * tower: the embedding, then n_deepstack rows added after the first
     * layers (text rows: zeros). The MoE's HF checkpoints fuse their
     * experts in another layout: GGUF only. */
    {RKM_ARCH_QWEN3VL, "qwen3vl", "qwen3vl", RKM_ARCH_QWEN3VLMOE, {"qwen3_vl"}, {"Qwen3VLForConditionalGeneration"},
     .hf_prefix = G4_, .hf_text_config = 1, .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}},
     TENSORS(qwen_tensors)},
    {RKM_ARCH_QWEN3VLMOE, "qwen3vlmoe", "qwen3vlmoe", 0, {NULL}, {NULL},
     .defaults = {{"rope_neox", 1}, {"qk_norm", RKM_QK_NORM_HEAD}, {"expert_norm_topk", 1}}, TENSORS(qwen_tensors)},
};

/* The keys llama.cpp's GGUF and transformers' config.json use for most
 * architectures. */
static const rkm_hparam_key common_keys[] = {
    {"n_layer", "block_count", "num_hidden_layers"},
    {"n_embd", "embedding_length", "hidden_size"},
    {"n_head", "attention.head_count", "num_attention_heads"},
    {"n_vocab", NULL, "vocab_size"},
    {"n_ctx_train", "context_length", "max_position_embeddings"},
    {"n_ff", "feed_forward_length", "intermediate_size"},
    {"n_expert", "expert_count", "num_experts"},
    {"n_expert_used", "expert_used_count", "num_experts_per_tok"},
    {"n_ff_exp", "expert_feed_forward_length", "moe_intermediate_size"},
    {"n_ff_shexp", "expert_shared_feed_forward_length", "shared_expert_intermediate_size"},
    {"n_layer_dense_lead", "leading_dense_block_count", NULL},
    {"expert_norm_topk", "expert_weights_norm", "norm_topk_prob"},
    {"expert_weights_scale", "expert_weights_scale", "routed_scaling_factor"},
    {"n_expert_group", "expert_group_count", "n_group"},
    {"n_group_used", "expert_group_used_count", "topk_group"},
    {"expert_gating_func", "expert_gating_func", NULL},
    /* counts that set fields (n_ff_shexp, n_layer) rather than being fields */
    {"n_shared_experts", "expert_shared_count", "n_shared_experts"},
    {"nextn_predict_layers", "nextn_predict_layers", "num_nextn_predict_layers"},
    {"rms_eps", "attention.layer_norm_rms_epsilon", "rms_norm_eps"},
    {"rope_theta", "rope.freq_base", "rope_theta"},
    {"rope_theta_swa", "rope.freq_base_swa", NULL},
    {"final_softcap", "final_logit_softcapping", "final_logit_softcapping"},
    {"attn_softcap", "attn_logit_softcapping", NULL},
    {"sliding_window", "attention.sliding_window", "sliding_window"},
    {"n_head_kv", "attention.head_count_kv", "num_key_value_heads"},
    {"head_dim", "attention.key_length", "head_dim"},
    {"head_dim_v", "attention.value_length", NULL},
    {"head_dim_swa", "attention.key_length_swa", NULL},
    {"rope_dim", "rope.dimension_count", NULL},
    {"rope_dim_swa", "rope.dimension_count_swa", NULL},
    {"swa_layer", "attention.sliding_window_pattern", "layer_types"},
    {"tied_output", NULL, "tie_word_embeddings"},
    {"has_qkv_bias", NULL, "attention_bias"},
    {"q_lora_rank", "attention.q_lora_rank", "q_lora_rank"},
    {"kv_lora_rank", "attention.kv_lora_rank", "kv_lora_rank"},
    {"head_dim_k_mla", "attention.key_length_mla", NULL},
    {"head_dim_v_mla", "attention.value_length_mla", "v_head_dim"},
    {"n_deepstack", "n_deepstack_layers", NULL},
};

const rkm_arch_info *rkm_arch_info_of(int arch)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(archs); i++)
        if (archs[i].arch == arch) return &archs[i];
    return NULL;
}

int rkm_arch_from_name(const char *name)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(archs); i++)
        if (!strcmp(archs[i].name, name)) return archs[i].arch;
    return RKM_ARCH_UNKNOWN;
}

const char *rkm_arch_name(int arch)
{
    const rkm_arch_info *a = rkm_arch_info_of(arch);
    return a ? a->name : "unknown";
}

/* A checkpoint whose name picked arch a: with routed experts it may be
 * another architecture (llama -> mixtral). */
static int with_experts(const rkm_arch_info *a, int has_experts)
{
    return has_experts && a->experts_arch ? a->experts_arch : a->arch;
}

int rkm_arch_from_gguf_name(const char *name, int has_experts)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(archs); i++)
        if (!strcmp(archs[i].gguf_name, name)) return with_experts(&archs[i], has_experts);
    /* some converters write the rkmojo-style name ("mixtral") */
    return rkm_arch_from_name(name);
}

int rkm_arch_from_hf(const char *model_type, const char *architecture, int has_experts)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(archs); i++)
        for (int k = 0; k < 2; k++) {
            const char *mt = archs[i].hf_model_type[k], *ar = archs[i].hf_architectures[k];
            if (model_type ? mt && !strcmp(mt, model_type) : architecture && ar && !strcmp(ar, architecture))
                return with_experts(&archs[i], has_experts);
        }
    return RKM_ARCH_UNKNOWN;
}

const char *rkm_arch_supported(int hf)
{
    static char list[2][512];
    char *b = list[hf ? 1 : 0];
    size_t n = 0;
    b[0] = 0;
    for (size_t i = 0; i < RKM_ARRAY_LEN(archs) && n < sizeof list[0]; i++)
        if (!hf || archs[i].hf_model_type[0]) /* GGUF-only architectures have no HF name */
            n += (size_t)snprintf(b + n, sizeof list[0] - n, "%s%s", n ? ", " : "",
                                  hf ? archs[i].hf_model_type[0] : archs[i].name);
    return b;
}

/* ------------------------------------------------------------- keys */

const rkm_hparam_key *rkm_arch_key(int arch, const char *field)
{
    const rkm_arch_info *a = rkm_arch_info_of(arch);
    for (int i = 0; a && i < RKM_ARCH_MAX_KEYS && a->keys[i].field; i++)
        if (!strcmp(a->keys[i].field, field)) return &a->keys[i];
    for (size_t i = 0; i < RKM_ARRAY_LEN(common_keys); i++)
        if (!strcmp(common_keys[i].field, field)) return &common_keys[i];
    return NULL;
}

/* ---------------------------------------------------------- tensors */

int rkm_arch_match(const char *pat, const char *s, int v[2], int *nv)
{
    *nv = 0;
    while (*pat) {
        if (pat[0] == '%' && pat[1] == 'd') {
            if (*s < '0' || *s > '9' || *nv >= 2) return 0;
            long x = 0;
            while (*s >= '0' && *s <= '9') {
                x = x * 10 + (*s++ - '0');
                if (x > 1000000) return 0;
            }
            v[(*nv)++] = (int)x;
            pat += 2;
        } else if (*pat++ != *s++) {
            return 0;
        }
    }
    return *s == 0;
}

int rkm_arch_format(const char *tmpl, int il, int expert, char *buf, size_t cap)
{
    const char *d = strstr(tmpl, "%d");
    int n = !d ? snprintf(buf, cap, "%s", tmpl)
          : strstr(d + 2, "%d") ? snprintf(buf, cap, tmpl, il, expert)
                                : snprintf(buf, cap, tmpl, il);
    return n < 0 || (size_t)n >= cap ? rkm_err(RKM_EINVAL, "tensor name '%s' too long", tmpl) : 0;
}

const rkm_tensor_info *rkm_arch_tensor(int arch, int role)
{
    const rkm_arch_info *a = rkm_arch_info_of(arch);
    for (int i = 0; a && i < a->n_tensors; i++)
        if (a->tensors[i].role == role) return &a->tensors[i];
    return NULL;
}

const char *rkm_arch_tensor_name(int arch, int role, int il, char *buf, size_t cap)
{
    const rkm_tensor_info *t = rkm_arch_tensor(arch, role);
    return t && !rkm_arch_format(t->gguf, il, 0, buf, cap) ? buf : NULL;
}

/* Fills *il / *expert from the matched integers of a template. */
static const rkm_tensor_info *matched(const rkm_tensor_info *t, const int *v, int nv, int *il, int *expert)
{
    *il = nv > 0 ? v[0] : -1;
    *expert = nv > 1 ? v[1] : -1;
    return t;
}

const rkm_tensor_info *rkm_arch_tensor_by_gguf(int arch, const char *s, int *il, int *expert)
{
    const rkm_arch_info *a = rkm_arch_info_of(arch);
    int v[2], nv;
    for (int i = 0; a && i < a->n_tensors; i++) {
        const rkm_tensor_info *t = &a->tensors[i];
        if (rkm_arch_match(t->gguf, s, v, &nv) || (t->gguf_split && rkm_arch_match(t->gguf_split, s, v, &nv)))
            return matched(t, v, nv, il, expert);
    }
    return NULL;
}

const rkm_tensor_info *rkm_arch_tensor_by_hf(int arch, const char *s, int *il, int *expert)
{
    const rkm_arch_info *a = rkm_arch_info_of(arch);
    char norm[256];
    int v[2], nv;
    if (!a) return NULL;
    /* the name as given, then with the prefix swapped for "model." or
     * "model." for the prefix (tables name either form) */
    size_t pl = a->hf_prefix ? strlen(a->hf_prefix) : 0;
    const char *alt = NULL;
    if (pl && !strncmp(s, a->hf_prefix, pl)) {
        snprintf(norm, sizeof norm, "model.%s", s + pl);
        alt = norm;
    } else if (pl && !strncmp(s, "model.", 6)) {
        snprintf(norm, sizeof norm, "%s%s", a->hf_prefix, s + 6);
        alt = norm;
    }
    for (int pass = 0; pass < (alt ? 2 : 1); pass++, s = alt)
        for (int i = 0; i < a->n_tensors; i++)
            for (int k = 0; k < RKM_ARCH_MAX_HF && a->tensors[i].hf[k]; k++)
                if (rkm_arch_match(a->tensors[i].hf[k], s, v, &nv)) return matched(&a->tensors[i], v, nv, il, expert);
    return NULL;
}
