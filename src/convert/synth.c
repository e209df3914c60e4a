/*
 * synth.c - synthetic checkpoints (see synth.h). Weight scales follow the
 * fixtures' recipe (../shared/fixtures/README.md): matrices
 * N(0, (0.7/sqrt(fan_in))^2), routers with logits of std ~2, embeddings
 * N(0,1), output N(0,(3/sqrt(hidden))^2), norms 1 + N(0, 0.1^2); so that a
 * synthetic model's softmax is neither flat nor degenerate. Single-threaded.
 */
#include "convert/synth.h"

#include <cjson/cJSON.h>
#include <math.h>

#include "format/gguf.h"
#include "format/safetensors.h"
#include "format/source.h"
#include "kernels/quant.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "util/common.h"
#include "util/progress.h"

/* ------------------------------------------------------------ presets */

typedef struct {
    const char *name;
    int arch, n_layer, n_embd, n_head, n_kv, head_dim, n_expert, top_k, n_ff_exp, n_ff, n_ff_shexp, n_vocab, n_ctx;
    float theta;
} preset;

static const preset presets[] = {
    {"tiny", RKM_ARCH_QWEN3MOE, 4, 128, 4, 2, 32, 8, 2, 64, 128, 0, 512, 2048, 1e6f},
    {"tiny-gemma4", RKM_ARCH_GEMMA4, 6, 128, 4, 2, 32, 8, 2, 64, 128, 0, 512, 2048, 1e6f},
    {"olmoe-1b-7b", RKM_ARCH_OLMOE, 16, 2048, 16, 16, 128, 64, 8, 1024, 0, 0, 50304, 4096, 1e4f},
    {"qwen3-30b-a3b", RKM_ARCH_QWEN3MOE, 48, 2048, 32, 4, 128, 128, 8, 768, 0, 0, 151936, 40960, 1e6f},
    {"gemma4-26b-a4b", RKM_ARCH_GEMMA4, 30, 2816, 16, 8, 256, 128, 8, 704, 2112, 0, 262144, 131072, 1e6f},
    {"mixtral-8x7b", RKM_ARCH_MIXTRAL, 32, 4096, 32, 8, 128, 8, 2, 14336, 0, 0, 32000, 32768, 1e6f},
    {"qwen2moe-a2.7b", RKM_ARCH_QWEN2MOE, 24, 2048, 16, 16, 128, 60, 4, 1408, 0, 5632, 151936, 8192, 1e6f},
    {"llama-dense", RKM_ARCH_LLAMA, 4, 128, 4, 2, 32, 0, 0, 0, 256, 0, 512, 2048, 5e5f},
    {"qwen3-dense", RKM_ARCH_QWEN3, 4, 128, 4, 2, 32, 0, 0, 0, 256, 0, 512, 2048, 1e6f},
};

const char *const *rkm_synth_preset_names(void)
{
    static const char *names[RKM_ARRAY_LEN(presets) + 1];
    for (size_t i = 0; i < RKM_ARRAY_LEN(presets); i++) names[i] = presets[i].name;
    return names;
}

int rkm_synth_preset(const char *name, rkm_hparams *hp)
{
    const preset *p = NULL;
    for (size_t i = 0; i < RKM_ARRAY_LEN(presets); i++)
        if (!strcmp(presets[i].name, name)) p = &presets[i];
    if (!p) return rkm_err(RKM_ENOENT, "unknown preset '%s'", name);
    rkm_hparams_init(hp, p->arch);
    hp->n_layer = p->n_layer;
    hp->n_embd = p->n_embd;
    hp->n_head = p->n_head;
    for (int i = 0; i < RKM_MAX_LAYERS; i++) hp->n_head_kv[i] = p->n_kv;
    hp->head_dim = hp->head_dim_v = hp->head_dim_swa = hp->rope_dim = hp->rope_dim_swa = p->head_dim;
    hp->n_expert = p->n_expert;
    hp->n_expert_used = p->top_k;
    hp->n_ff_exp = p->n_ff_exp;
    hp->n_ff = p->n_ff;
    hp->n_ff_shexp = p->n_ff_shexp;
    hp->n_vocab = p->n_vocab;
    hp->n_ctx_train = p->n_ctx;
    hp->rope_theta = hp->rope_theta_swa = p->theta;
    hp->rms_eps = (p->arch == RKM_ARCH_LLAMA || p->arch == RKM_ARCH_MIXTRAL || p->arch == RKM_ARCH_OLMOE) ? 1e-5f : 1e-6f;
    if (p->arch == RKM_ARCH_GEMMA4) {
        /* sliding layers: head dim as given, window; every 6th and the last
         * layer global with twice the head dim, fewer kv heads, partial rope */
        int big = !strcmp(name, "gemma4-26b-a4b");
        hp->sliding_window = big ? 1024 : 32;
        hp->head_dim_swa = hp->rope_dim_swa = p->head_dim;
        hp->head_dim = hp->head_dim_v = hp->rope_dim = 2 * p->head_dim;
        hp->rope_theta_swa = 1e4f;
        hp->final_softcap = 30.0f;
        hp->has_rope_freqs = 1;
        hp->embed_scale = sqrtf((float)hp->n_embd);
        for (int i = 0; i < hp->n_layer; i++) {
            hp->swa_layer[i] = (i % 6) != 5 && i != hp->n_layer - 1;
            hp->n_head_kv[i] = hp->swa_layer[i] ? p->n_kv : (big ? 2 : 1);
        }
    }
    if (p->arch == RKM_ARCH_QWEN2MOE) hp->n_ff = p->n_ff_shexp;
    return 0;
}

/* ---------------------------------------------------------- generator */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct {
    uint64_t s;
    int have;
    double spare;
} rng;

static double rng_uniform(rng *r) { return ((double)(splitmix(&r->s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static double rng_normal(rng *r)
{
    if (r->have) {
        r->have = 0;
        return r->spare;
    }
    double u = rng_uniform(r), v = rng_uniform(r);
    double m = sqrt(-2.0 * log(u));
    r->spare = m * sin(2.0 * M_PI * v);
    r->have = 1;
    return m * cos(2.0 * M_PI * v);
}

enum { I_MAT, I_ROUTER, I_EMBED, I_OUTPUT, I_NORM, I_BIAS, I_SCALE, I_ROPE_FREQS };

typedef struct {
    char name[96];
    int n_dims;
    int64_t ne[3];
    int init;
    float gain; /* std multiplier for matrices, or the norm gain */
} synth_tensor;

typedef struct {
    synth_tensor *t;
    int n, cap;
} tlist;

static void add(tlist *l, int init, float gain, int n_dims, int64_t a, int64_t b, int64_t c, const char *fmt, ...)
    RKM_PRINTF(8, 9);
static void add(tlist *l, int init, float gain, int n_dims, int64_t a, int64_t b, int64_t c, const char *fmt, ...)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        synth_tensor *nt = realloc(l->t, (size_t)l->cap * sizeof *nt);
        if (!nt) abort(); /* a few KiB; allocation failure here is not recoverable input */
        l->t = nt;
    }
    synth_tensor *t = &l->t[l->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->n_dims = n_dims;
    t->ne[0] = a;
    t->ne[1] = b;
    t->ne[2] = c;
    t->init = init;
    t->gain = gain;
}

static void tensor_list(const rkm_hparams *hp, tlist *l)
{
    const int E = hp->n_embd, V = hp->n_vocab, g4 = hp->gemma4_norms;
    add(l, I_EMBED, g4 ? 0.5f / sqrtf((float)E) : 1.0f, 2, E, V, 1, "token_embd.weight");
    add(l, I_NORM, g4 ? 6.0f : 1.0f, 1, E, 1, 1, "output_norm.weight");
    if (!hp->tied_output) add(l, I_OUTPUT, 1, 2, E, V, 1, "output.weight");
    if (hp->has_rope_freqs) add(l, I_ROPE_FREQS, 1, 1, hp->rope_dim / 2, 1, 1, "rope_freqs.weight");
    for (int il = 0; il < hp->n_layer; il++) {
        int swa = hp->swa_layer[il], kv = hp->n_head_kv[il];
        int hd = swa ? hp->head_dim_swa : hp->head_dim, hdv = swa ? hp->head_dim_swa : hp->head_dim_v;
        add(l, I_NORM, 1, 1, E, 1, 1, "blk.%d.attn_norm.weight", il);
        add(l, I_MAT, 1, 2, E, (int64_t)hp->n_head * hd, 1, "blk.%d.attn_q.weight", il);
        add(l, I_MAT, 1, 2, E, (int64_t)kv * hd, 1, "blk.%d.attn_k.weight", il);
        if (!(hp->v_from_k_full && !swa)) add(l, I_MAT, 1, 2, E, (int64_t)kv * hdv, 1, "blk.%d.attn_v.weight", il);
        add(l, I_MAT, 1, 2, (int64_t)hp->n_head * hdv, E, 1, "blk.%d.attn_output.weight", il);
        if (hp->has_qkv_bias) {
            add(l, I_BIAS, 1, 1, (int64_t)hp->n_head * hd, 1, 1, "blk.%d.attn_q.bias", il);
            add(l, I_BIAS, 1, 1, (int64_t)kv * hd, 1, 1, "blk.%d.attn_k.bias", il);
            add(l, I_BIAS, 1, 1, (int64_t)kv * hdv, 1, 1, "blk.%d.attn_v.bias", il);
        }
        if (hp->qk_norm == RKM_QK_NORM_HEAD) {
            add(l, I_NORM, g4 ? 0.5f : 1.0f, 1, hd, 1, 1, "blk.%d.attn_q_norm.weight", il);
            add(l, I_NORM, g4 ? 0.5f : 1.0f, 1, hd, 1, 1, "blk.%d.attn_k_norm.weight", il);
        } else if (hp->qk_norm == RKM_QK_NORM_FULL) {
            add(l, I_NORM, 1, 1, (int64_t)hp->n_head * hd, 1, 1, "blk.%d.attn_q_norm.weight", il);
            add(l, I_NORM, 1, 1, (int64_t)kv * hd, 1, 1, "blk.%d.attn_k_norm.weight", il);
        }
        if (g4) add(l, I_NORM, 1, 1, E, 1, 1, "blk.%d.post_attention_norm.weight", il);
        add(l, I_NORM, 1, 1, E, 1, 1, "blk.%d.ffn_norm.weight", il);
        int moe = rkm_hparams_is_moe_layer(hp, il);
        if (!moe || g4) {
            add(l, I_MAT, 1, 2, E, hp->n_ff, 1, "blk.%d.ffn_gate.weight", il);
            add(l, I_MAT, 1, 2, E, hp->n_ff, 1, "blk.%d.ffn_up.weight", il);
            add(l, I_MAT, 1, 2, hp->n_ff, E, 1, "blk.%d.ffn_down.weight", il);
        }
        if (!moe) continue;
        const int F = hp->n_ff_exp, X = hp->n_expert;
        if (g4) {
            add(l, I_NORM, 1, 1, E, 1, 1, "blk.%d.post_ffw_norm_1.weight", il);
            add(l, I_NORM, 1, 1, E, 1, 1, "blk.%d.pre_ffw_norm_2.weight", il);
            add(l, I_ROUTER, 2.0f, 2, E, X, 1, "blk.%d.ffn_gate_inp.weight", il);
            add(l, I_SCALE, 1, 1, E, 1, 1, "blk.%d.ffn_gate_inp.scale", il);
            add(l, I_MAT, 1, 3, E, 2 * F, X, "blk.%d.ffn_gate_up_exps.weight", il);
            add(l, I_MAT, 1, 3, F, E, X, "blk.%d.ffn_down_exps.weight", il);
            add(l, I_SCALE, 1, 1, X, 1, 1, "blk.%d.ffn_down_exps.scale", il);
            add(l, I_NORM, 1, 1, E, 1, 1, "blk.%d.post_ffw_norm_2.weight", il);
            add(l, I_NORM, 1, 1, E, 1, 1, "blk.%d.post_ffw_norm.weight", il);
            add(l, I_SCALE, 1, 1, 1, 1, 1, "blk.%d.layer_output_scale.weight", il);
            continue;
        }
        add(l, I_ROUTER, 2.0f / sqrtf((float)E), 2, E, X, 1, "blk.%d.ffn_gate_inp.weight", il);
        add(l, I_MAT, 1, 3, E, F, X, "blk.%d.ffn_gate_exps.weight", il);
        add(l, I_MAT, 1, 3, E, F, X, "blk.%d.ffn_up_exps.weight", il);
        add(l, I_MAT, 1, 3, F, E, X, "blk.%d.ffn_down_exps.weight", il);
        if (hp->n_ff_shexp) {
            add(l, I_ROUTER, 2.0f / sqrtf((float)E), 1, E, 1, 1, "blk.%d.ffn_gate_inp_shexp.weight", il);
            add(l, I_MAT, 1, 2, E, hp->n_ff_shexp, 1, "blk.%d.ffn_gate_shexp.weight", il);
            add(l, I_MAT, 1, 2, E, hp->n_ff_shexp, 1, "blk.%d.ffn_up_shexp.weight", il);
            add(l, I_MAT, 1, 2, hp->n_ff_shexp, E, 1, "blk.%d.ffn_down_shexp.weight", il);
        }
    }
}

/* Row r (of the tensor flattened to ne[0]-wide rows) into out. */
static void gen_row(const synth_tensor *t, const rkm_hparams *hp, uint64_t seed, int64_t r, float *out)
{
    rng g = {0};
    g.s = seed ^ rkm_hash(t->name, strlen(t->name)) ^ ((uint64_t)r * 0x9E3779B97F4A7C15ull);
    splitmix(&g.s);
    const int64_t n = t->ne[0];
    double std = 0;
    switch (t->init) {
    case I_MAT: std = 0.7 / sqrt((double)n); break;
    case I_ROUTER: std = t->gain; break;
    case I_EMBED: std = t->gain; break;
    case I_OUTPUT: std = 3.0 / sqrt((double)hp->n_embd); break;
    case I_BIAS: std = 0.02; break;
    default: break;
    }
    for (int64_t i = 0; i < n; i++) {
        double z = rng_normal(&g);
        switch (t->init) {
        case I_NORM: out[i] = (float)(t->gain * (1.0 + 0.1 * z)); break;
        case I_SCALE: out[i] = (float)(1.0 + 0.1 * z); break;
        case I_ROPE_FREQS: out[i] = i < (int64_t)(n / 4) ? 1.0f : 1e30f; break; /* partial rotary 0.25 */
        default: out[i] = (float)(std * z); break;
        }
    }
    /* special tokens (the last 4 ids of the built-in vocabulary) are rarely predicted */
    if ((t->init == I_OUTPUT || (t->init == I_EMBED && hp->tied_output)) && r >= hp->n_vocab - 4)
        for (int64_t i = 0; i < n; i++) out[i] *= 0.25f;
}

static int tensor_type(const synth_tensor *t, int dtype)
{
    if (t->n_dims == 1 || t->init == I_ROUTER || t->ne[0] % 32) return RKM_TYPE_F32;
    return dtype;
}

static int64_t n_rows(const synth_tensor *t) { return t->ne[1] * t->ne[2]; }

/* ------------------------------------------------------------ GGUF */

static const char *gguf_arch(const rkm_hparams *hp) { return hp->arch == RKM_ARCH_MIXTRAL ? "llama" : hp->arch_name; }

/* Mixtral (GGUF arch "llama") and OLMoE have no dense FFN: llama.cpp
 * reads their experts' width from feed_forward_length, as their
 * converted checkpoints store it, and there is no expert_ key. */
static int ff_is_expert_width(const rkm_hparams *hp) { return hp->arch == RKM_ARCH_MIXTRAL || hp->arch == RKM_ARCH_OLMOE; }

static void put_hparams(rkm_gguf_writer *w, const rkm_hparams *hp, const char *name)
{
    const char *a = gguf_arch(hp);
    char k[128];
#define KEY(s) (snprintf(k, sizeof k, "%s." s, a), k)
    rkm_gguf_writer_set_str(w, "general.architecture", a);
    rkm_gguf_writer_set_str(w, "general.name", name);
    rkm_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)hp->n_ctx_train);
    rkm_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)hp->n_embd);
    rkm_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)hp->n_layer);
    rkm_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)(ff_is_expert_width(hp) ? hp->n_ff_exp : hp->n_ff));
    rkm_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)hp->n_head);
    if (hp->gemma4_norms) {
        int32_t kv[RKM_MAX_LAYERS];
        uint8_t pat[RKM_MAX_LAYERS];
        for (int i = 0; i < hp->n_layer; i++) {
            kv[i] = hp->n_head_kv[i];
            pat[i] = hp->swa_layer[i];
        }
        rkm_gguf_writer_set_arr(w, KEY("attention.head_count_kv"), RKM_GGUF_INT32, kv, (uint64_t)hp->n_layer);
        rkm_gguf_writer_set_u32(w, KEY("attention.key_length_swa"), (uint32_t)hp->head_dim_swa);
        rkm_gguf_writer_set_u32(w, KEY("attention.value_length_swa"), (uint32_t)hp->head_dim_swa);
        rkm_gguf_writer_set_u32(w, KEY("rope.dimension_count_swa"), (uint32_t)hp->rope_dim_swa);
        rkm_gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), hp->rope_theta_swa);
        rkm_gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)hp->sliding_window);
        rkm_gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"), RKM_GGUF_BOOL, pat, (uint64_t)hp->n_layer);
        rkm_gguf_writer_set_u32(w, KEY("attention.shared_kv_layers"), 0);
        rkm_gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"), 0);
        rkm_gguf_writer_set_f32(w, KEY("final_logit_softcapping"), hp->final_softcap);
    } else {
        rkm_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)hp->n_head_kv[0]);
    }
    rkm_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)hp->head_dim);
    rkm_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)hp->head_dim_v);
    rkm_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), hp->rms_eps);
    rkm_gguf_writer_set_f32(w, KEY("rope.freq_base"), hp->rope_theta);
    rkm_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)hp->rope_dim);
    if (hp->n_expert) {
        rkm_gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)hp->n_expert);
        rkm_gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)hp->n_expert_used);
        if (!ff_is_expert_width(hp)) rkm_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)hp->n_ff_exp);
        if (hp->n_ff_shexp) rkm_gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)hp->n_ff_shexp);
    }
#undef KEY
}

static int write_tensor_rows(const synth_tensor *t, const rkm_hparams *hp, uint64_t seed, int type, float *row,
                             uint8_t *qrow, rkm_gguf_writer *w, rkm_progress *prog)
{
    size_t rb = rkm_type_row_bytes(type, t->ne[0]);
    for (int64_t r = 0; r < n_rows(t); r++) {
        gen_row(t, hp, seed, r, row);
        rkm_quantize_row(type, row, qrow, t->ne[0]);
        int rc = rkm_gguf_writer_write_data(w, qrow, rb);
        if (rc) return rc;
        rkm_progress_add(prog, rb);
    }
    return 0;
}

/* ------------------------------------------------------------ HF out */

static const char *hf_model_type(int arch)
{
    switch (arch) {
    case RKM_ARCH_LLAMA: return "llama";
    case RKM_ARCH_MIXTRAL: return "mixtral";
    case RKM_ARCH_QWEN2: return "qwen2";
    case RKM_ARCH_QWEN3: return "qwen3";
    case RKM_ARCH_QWEN2MOE: return "qwen2_moe";
    case RKM_ARCH_QWEN3MOE: return "qwen3_moe";
    case RKM_ARCH_OLMOE: return "olmoe";
    case RKM_ARCH_GEMMA4: return "gemma4";
    default: return NULL;
    }
}

/* Gemma 4: the text model's fields nested in text_config, as the
 * multimodal checkpoints have them. */
static cJSON *gemma4_config(const rkm_hparams *hp)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model_type", "gemma4");
    cJSON *c = cJSON_AddObjectToObject(root, "text_config");
    cJSON_AddStringToObject(c, "model_type", "gemma4_text");
    cJSON_AddNumberToObject(c, "num_hidden_layers", hp->n_layer);
    cJSON_AddNumberToObject(c, "hidden_size", hp->n_embd);
    cJSON_AddNumberToObject(c, "num_attention_heads", hp->n_head);
    cJSON_AddNumberToObject(c, "vocab_size", hp->n_vocab);
    cJSON_AddNumberToObject(c, "max_position_embeddings", hp->n_ctx_train);
    cJSON_AddNumberToObject(c, "intermediate_size", hp->n_ff);
    cJSON_AddNumberToObject(c, "num_experts", hp->n_expert);
    cJSON_AddNumberToObject(c, "top_k_experts", hp->n_expert_used);
    cJSON_AddNumberToObject(c, "moe_intermediate_size", hp->n_ff_exp);
    cJSON_AddNumberToObject(c, "rms_norm_eps", hp->rms_eps);
    cJSON_AddNumberToObject(c, "sliding_window", hp->sliding_window);
    cJSON_AddNumberToObject(c, "final_logit_softcapping", hp->final_softcap);
    cJSON *lt = cJSON_AddArrayToObject(c, "layer_types");
    for (int i = 0; i < hp->n_layer; i++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(hp->swa_layer[i] ? "sliding_attention" : "full_attention"));
    cJSON *rp = cJSON_AddObjectToObject(c, "rope_parameters");
    cJSON *full = cJSON_AddObjectToObject(rp, "full_attention");
    cJSON_AddNumberToObject(full, "rope_theta", hp->rope_theta);
    cJSON_AddNumberToObject(full, "partial_rotary_factor", 0.25);
    cJSON *slid = cJSON_AddObjectToObject(rp, "sliding_attention");
    cJSON_AddNumberToObject(slid, "rope_theta", hp->rope_theta_swa);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", 1);
    return root;
}

static int write_hf_config(const rkm_hparams *hp, const char *dir, const rkm_tokenizer *tok)
{
    if (hp->arch == RKM_ARCH_GEMMA4) {
        cJSON *g = gemma4_config(hp);
        char *js = cJSON_Print(g), *p = rkm_path_join(dir, "config.json");
        cJSON_Delete(g);
        int rc = js && p ? rkm_write_file_atomic(p, js, strlen(js)) : rkm_err(RKM_ENOMEM, "out of memory");
        free(js);
        free(p);
        return rc;
    }
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "model_type", hf_model_type(hp->arch));
    cJSON_AddNumberToObject(c, "num_hidden_layers", hp->n_layer);
    cJSON_AddNumberToObject(c, "hidden_size", hp->n_embd);
    cJSON_AddNumberToObject(c, "num_attention_heads", hp->n_head);
    cJSON_AddNumberToObject(c, "num_key_value_heads", hp->n_head_kv[0]);
    cJSON_AddNumberToObject(c, "head_dim", hp->head_dim);
    cJSON_AddNumberToObject(c, "vocab_size", hp->n_vocab);
    cJSON_AddNumberToObject(c, "max_position_embeddings", hp->n_ctx_train);
    cJSON_AddNumberToObject(c, "intermediate_size", ff_is_expert_width(hp) ? hp->n_ff_exp : hp->n_ff);
    if (hp->n_expert) {
        cJSON_AddNumberToObject(c, hp->arch == RKM_ARCH_MIXTRAL ? "num_local_experts" : "num_experts", hp->n_expert);
        cJSON_AddNumberToObject(c, "num_experts_per_tok", hp->n_expert_used);
        if (!ff_is_expert_width(hp)) cJSON_AddNumberToObject(c, "moe_intermediate_size", hp->n_ff_exp);
        cJSON_AddBoolToObject(c, "norm_topk_prob", hp->expert_norm_topk);
    }
    if (hp->n_ff_shexp) cJSON_AddNumberToObject(c, "shared_expert_intermediate_size", hp->n_ff_shexp);
    cJSON_AddNumberToObject(c, "rms_norm_eps", hp->rms_eps);
    cJSON_AddNumberToObject(c, "rope_theta", hp->rope_theta);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", hp->tied_output);
    cJSON_AddNumberToObject(c, "bos_token_id", rkm_tokenizer_bos(tok));
    cJSON_AddNumberToObject(c, "eos_token_id", rkm_tokenizer_eos(tok));
    char *js = cJSON_Print(c);
    cJSON_Delete(c);
    char *p = rkm_path_join(dir, "config.json");
    int rc = js && p ? rkm_write_file_atomic(p, js, strlen(js)) : rkm_err(RKM_ENOMEM, "out of memory");
    free(js);
    free(p);
    return rc;
}

/* One HF tensor: name, the synth tensor it comes from, the expert (or -1). */
typedef struct {
    char *hf;
    const synth_tensor *t;
    int expert;
} hf_item;

static int write_hf(const rkm_synth_opts *o, const rkm_hparams *hp, const tlist *l, const rkm_tokenizer *tok)
{
    if (!hf_model_type(hp->arch))
        return rkm_err(RKM_EUNSUPPORTED, "--hf-out: no Hugging Face layout for %s", hp->arch_name);
    if (o->dtype != RKM_TYPE_F32 && o->dtype != RKM_TYPE_F16 && o->dtype != RKM_TYPE_BF16)
        return rkm_err(RKM_EINVAL, "--hf-out needs --dtype f32, f16 or bf16");
    int rc = rkm_mkdir_p(o->hf_out);
    if (rc) return rc;
    int cap = 0, n = 0;
    for (int i = 0; i < l->n; i++) cap += l->t[i].n_dims == 3 ? (int)l->t[i].ne[2] : 1;
    hf_item *items = calloc((size_t)cap + 1, sizeof *items);
    if (!items) return rkm_err(RKM_ENOMEM, "out of memory");
    for (int i = 0; i < l->n; i++) {
        const synth_tensor *t = &l->t[i];
        int fused = hp->arch == RKM_ARCH_GEMMA4; /* Gemma 4 keeps experts stacked in one tensor */
        if (fused && !strcmp(t->name, "rope_freqs.weight")) continue; /* derived by the converter */
        int ne = t->n_dims == 3 && !fused ? (int)t->ne[2] : 1;
        for (int e = 0; e < ne; e++) {
            items[n].hf = rkm_gguf_name_to_hf(hp->arch, t->name, e);
            items[n].t = t;
            items[n].expert = t->n_dims == 3 && !fused ? e : -1;
            if (!items[n].hf) {
                rc = rkm_err(RKM_EUNSUPPORTED, "no Hugging Face name for %s", t->name);
                goto out;
            }
            n++;
        }
    }
    /* two shards + index, to exercise sharded loading */
    int split = (n + 1) / 2;
    int64_t max_ne0 = 1;
    for (int i = 0; i < l->n; i++) max_ne0 = RKM_MAX(max_ne0, l->t[i].ne[0]);
    float *row = malloc(sizeof(float) * (size_t)max_ne0);
    uint8_t *qrow = malloc(sizeof(float) * (size_t)max_ne0);
    cJSON *idx = cJSON_CreateObject(), *wm = cJSON_AddObjectToObject(idx, "weight_map");
    if (!row || !qrow) rc = rkm_err(RKM_ENOMEM, "out of memory");
    for (int sh = 0; sh < 2 && !rc; sh++) {
        char fname[64];
        snprintf(fname, sizeof fname, "model-%05d-of-00002.safetensors", sh + 1);
        rkm_st_writer *w = rkm_st_writer_new();
        int a = sh ? split : 0, b = sh ? n : split;
        for (int i = a; i < b && !rc; i++) {
            const synth_tensor *t = items[i].t;
            int nd = t->n_dims == 3 && items[i].expert >= 0 ? 2 : t->n_dims;
            int64_t ne[3] = {t->ne[0], t->ne[1], t->ne[2]};
            if (strstr(t->name, "ffn_gate_inp_shexp")) {
                nd = 2;
                ne[1] = 1;
            }
            rc = rkm_st_writer_add(w, items[i].hf, tensor_type(t, o->dtype) == RKM_TYPE_F32 ? RKM_TYPE_F32 : o->dtype, nd, ne);
            cJSON_AddStringToObject(wm, items[i].hf, fname);
        }
        char *p = rkm_path_join(o->hf_out, fname);
        if (!rc) rc = rkm_st_writer_begin(w, p);
        for (int i = a; i < b && !rc; i++) {
            const synth_tensor *t = items[i].t;
            int type = tensor_type(t, o->dtype) == RKM_TYPE_F32 ? RKM_TYPE_F32 : o->dtype;
            int64_t rows = items[i].expert >= 0 ? t->ne[1] : n_rows(t), r0 = items[i].expert >= 0 ? items[i].expert * t->ne[1] : 0;
            int perm = 0, dummy;
            char *g = rkm_hf_name_to_gguf(hp->arch, items[i].hf, hp, &perm);
            free(g);
            (void)dummy;
            int64_t hd = perm ? rows / perm : 0;
            for (int64_t r = 0; r < rows && !rc; r++) {
                int64_t src = r0 + r;
                if (perm) { /* HF row h*hd + j*hd/2 + i holds GGUF row h*hd + 2i + j */
                    int64_t h = r / hd, k = r % hd, j = k / (hd / 2), ii = k % (hd / 2);
                    src = h * hd + 2 * ii + j;
                }
                gen_row(t, hp, o->seed, src, row);
                rkm_quantize_row(type, row, qrow, t->ne[0]);
                rc = rkm_st_writer_write(w, qrow, rkm_type_row_bytes(type, t->ne[0]));
            }
        }
        if (!rc) rc = rkm_st_writer_finish(w);
        rkm_st_writer_free(w);
        free(p);
    }
    if (!rc) {
        char *js = cJSON_Print(idx), *p = rkm_path_join(o->hf_out, "model.safetensors.index.json");
        rc = js && p ? rkm_write_file_atomic(p, js, strlen(js)) : rkm_err(RKM_ENOMEM, "out of memory");
        free(js);
        free(p);
    }
    cJSON_Delete(idx);
    free(row);
    free(qrow);
    if (!rc) rc = write_hf_config(hp, o->hf_out, tok);
    if (!rc) {
        char *p = rkm_path_join(o->hf_out, "tokenizer.json");
        rc = p ? rkm_tokenizer_write_hf_json(tok, p) : rkm_err(RKM_ENOMEM, "out of memory");
        free(p);
    }
out:
    for (int i = 0; i < n; i++) free(items[i].hf);
    free(items);
    return rc;
}

/* -------------------------------------------------------------- main */

int rkm_synth(const rkm_synth_opts *o, const char *out)
{
    rkm_hparams hp;
    int rc = rkm_synth_preset(o->preset ? o->preset : "tiny", &hp);
    if (rc) return rc;
    if (o->dtype != RKM_TYPE_F32 && o->dtype != RKM_TYPE_F16 && o->dtype != RKM_TYPE_Q8_0 && o->dtype != RKM_TYPE_Q4_0 &&
        o->dtype != RKM_TYPE_BF16)
        return rkm_err(RKM_EINVAL, "--dtype must be f32, f16, q8_0 or q4_0");
    rkm_tokenizer *tok = o->vocab_from ? rkm_tokenizer_load(o->vocab_from, NULL) : rkm_tokenizer_builtin(hp.n_vocab);
    if (!tok) return rkm_err_prefix(RKM_EFORMAT, "tokenizer");
    hp.n_vocab = rkm_tokenizer_n_vocab(tok);
    for (int i = 0; i < o->n_sets; i++) {
        char key[64];
        const char *eq = strchr(o->sets[i], '=');
        if (!eq || eq - o->sets[i] >= (long)sizeof key) {
            rkm_tokenizer_free(tok);
            return rkm_err(RKM_EINVAL, "--set wants key=value (got '%s')", o->sets[i]);
        }
        memcpy(key, o->sets[i], (size_t)(eq - o->sets[i]));
        key[eq - o->sets[i]] = 0;
        if (!strcmp(key, "n_vocab")) {
            rkm_tokenizer_free(tok);
            return rkm_err(RKM_EINVAL, "n_vocab follows the tokenizer; use --vocab-from");
        }
        if ((rc = rkm_hparams_set(&hp, key, eq + 1))) {
            rkm_tokenizer_free(tok);
            return rc;
        }
    }
    if (hp.n_head > 0 && hp.n_embd % 32 == 0 && hp.rope_dim > hp.head_dim) hp.rope_dim = hp.head_dim;
    if ((rc = rkm_hparams_validate(&hp))) {
        rkm_tokenizer_free(tok);
        return rkm_err_prefix(rc, "invalid shape");
    }
    tlist l = {0};
    tensor_list(&hp, &l);
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    char name[96];
    snprintf(name, sizeof name, "synthetic-%s-seed%llu", o->preset ? o->preset : "tiny", (unsigned long long)o->seed);
    put_hparams(w, &hp, name);
    rkm_gguf_writer_set_str(w, "synthetic.generator", "rkmojo synth " RKM_VERSION_STRING);
    /* llama.cpp's file type: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_BF16 32 */
    rkm_gguf_writer_set_u32(w, "general.file_type", o->dtype == RKM_TYPE_F16 ? 1 : o->dtype == RKM_TYPE_Q4_0 ? 2
                                                    : o->dtype == RKM_TYPE_Q8_0 ? 7 : o->dtype == RKM_TYPE_BF16 ? 32 : 0);
    rc = rkm_tokenizer_write_gguf(tok, w);
    if (!rc && !rkm_tokenizer_chat_template(tok) && !o->vocab_from)
        rkm_gguf_writer_set_str(w, "tokenizer.chat_template", rkm_chat_builtin_template("chatml"));
    uint64_t total = 0;
    int64_t max_ne0 = 0;
    for (int i = 0; i < l.n && !rc; i++) {
        int type = tensor_type(&l.t[i], o->dtype);
        rc = rkm_gguf_writer_add_tensor(w, l.t[i].name, type, l.t[i].n_dims, l.t[i].ne);
        total += rkm_type_row_bytes(type, l.t[i].ne[0]) * (uint64_t)n_rows(&l.t[i]);
        max_ne0 = RKM_MAX(max_ne0, l.t[i].ne[0]);
    }
    float *row = malloc(sizeof(float) * (size_t)max_ne0);
    uint8_t *qrow = malloc(sizeof(float) * (size_t)max_ne0);
    if (!rc && (!row || !qrow)) rc = rkm_err(RKM_ENOMEM, "out of memory");
    if (!rc) rc = rkm_gguf_writer_begin(w, out);
    rkm_progress prog;
    rkm_progress_init(&prog, o->progress, "synth", total);
    for (int i = 0; i < l.n && !rc; i++)
        rc = write_tensor_rows(&l.t[i], &hp, o->seed, tensor_type(&l.t[i], o->dtype), row, qrow, w, &prog);
    if (!rc) rc = rkm_gguf_writer_finish(w);
    if (!rc) rkm_progress_done(&prog);
    rkm_gguf_writer_free(w);
    free(row);
    free(qrow);
    if (!rc && o->hf_out) rc = write_hf(o, &hp, &l, tok);
    free(l.t);
    rkm_tokenizer_free(tok);
    return rc;
}
