/*
 * synth.c - synthetic checkpoints (see synth.h). Weight scales follow the
 * fixtures' recipe (../shared/fixtures/README.md): matrices
 * N(0, (0.7/sqrt(fan_in))^2), routers with logits of std ~2, embeddings
 * N(0,1), output N(0,(3/sqrt(hidden))^2), norms 1 + N(0, 0.1^2); so that a
 * synthetic model's softmax is neither flat nor degenerate. Single-threaded.
 */
#include "convert/synth.h"
#include "convert/quant_mix.h"

#include <cjson/cJSON.h>
#include <math.h>

#include "format/gguf.h"
#include "format/safetensors.h"
#include "format/source.h"
#include "format/vision.h"
#include "kernels/kernels.h"
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
    /* Qwen3-VL's text model, shrunk (with a tower: synth --mmproj-out) */
    {"tiny-qwen3vl", RKM_ARCH_QWEN3VL, 4, 128, 4, 2, 32, 0, 0, 0, 256, 0, 512, 2048, 5e6f},
    {"qwen3-vl-30b-a3b", RKM_ARCH_QWEN3VLMOE, 48, 2048, 32, 4, 128, 128, 8, 768, 0, 0, 151936, 262144, 5e6f},
    {"gpt-oss-20b", RKM_ARCH_GPT_OSS, 24, 2880, 64, 8, 64, 32, 4, 2880, 2880, 0, 201088, 131072, 150000.0f},
    {"gpt-oss-120b", RKM_ARCH_GPT_OSS, 36, 2880, 64, 8, 64, 128, 4, 2880, 2880, 0, 201088, 131072, 150000.0f},
    {"glm-4.5-air", RKM_ARCH_GLM4MOE, 46, 4096, 96, 8, 128, 128, 8, 1408, 10944, 1408, 151552, 131072, 1e6f},
    /* latent attention: head_dim is the value head (v_head_dim); the
     * ranks and the rest in rkm_synth_preset */
    {"deepseek-v2-lite", RKM_ARCH_DEEPSEEK2, 27, 2048, 16, 1, 128, 64, 6, 1408, 10944, 2816, 102400, 163840, 1e4f},
    {"deepseek-v3", RKM_ARCH_DEEPSEEK2, 61, 7168, 128, 1, 128, 256, 8, 2048, 18432, 2048, 129280, 163840, 1e4f},
    /* Gated DeltaNet hybrids: the recurrent geometry in rkm_synth_preset */
    {"qwen3.5-35b-a3b", RKM_ARCH_QWEN35MOE, 40, 2048, 16, 2, 256, 256, 8, 512, 0, 512, 248320, 262144, 1e7f},
    {"qwen3.5-27b", RKM_ARCH_QWEN35, 64, 5120, 24, 4, 256, 0, 0, 0, 17408, 0, 248320, 262144, 1e7f},
    {"qwen3-next-80b-a3b", RKM_ARCH_QWEN3NEXT, 48, 2048, 16, 2, 256, 512, 10, 512, 0, 512, 151936, 262144, 1e7f},
    /* short convolutions and attention: the layer pattern in rkm_synth_preset */
    {"lfm2-1.2b", RKM_ARCH_LFM2, 16, 2048, 32, 8, 64, 0, 0, 0, 8192, 0, 65536, 128000, 1e6f},
    {"lfm2-8b-a1b", RKM_ARCH_LFM2MOE, 24, 2048, 32, 8, 64, 32, 4, 1792, 7168, 0, 65536, 128000, 1e6f},
    /* Mamba-2 and attention: the layer pattern and scales in rkm_synth_preset */
    {"granite-4.0-h-tiny", RKM_ARCH_GRANITEHYBRID, 40, 1536, 12, 4, 128, 64, 6, 512, 0, 1024, 100352, 131072, 1e4f},
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
    if (p->arch == RKM_ARCH_QWEN3VL || p->arch == RKM_ARCH_QWEN3VLMOE) hp->n_deepstack = p->n_layer > 4 ? 3 : 2;
    if (p->arch == RKM_ARCH_GLM4MOE) {
        /* zai-org/GLM-4.5-Air: one leading dense layer, half the head
         * rotated (partial_rotary_factor 0.5), one shared expert */
        hp->n_layer_dense_lead = 1;
        hp->rope_dim = hp->rope_dim_swa = p->head_dim / 2;
        hp->rms_eps = 1e-5f;
    }
    if (p->arch == RKM_ARCH_DEEPSEEK2) {
        /* deepseek-ai/DeepSeek-V2-Lite and DeepSeek-V3's config.json: a
         * 512 latent, 128 + 64 query/key dims per head (64 rotated), YaRN
         * x40 over 4096 positions; V2-Lite: no q LoRA, softmax gating, two
         * shared experts; V3: q LoRA 1536, sigmoid gating with 8 groups
         * (4 used) and a routed scale of 2.5, one shared expert, three
         * dense layers */
        int v3 = !strcmp(name, "deepseek-v3");
        hp->kv_lora_rank = 512;
        hp->q_lora_rank = v3 ? 1536 : 0;
        hp->rope_dim = hp->rope_dim_swa = 64;
        hp->head_dim_k_mla = 128 + 64;
        hp->head_dim_v_mla = p->head_dim;
        hp->n_layer_dense_lead = v3 ? 3 : 1;
        hp->rms_eps = 1e-6f;
        hp->rope_scaling = RKM_ROPE_SCALING_YARN;
        hp->rope_freq_scale = 1.0f / 40;
        hp->rope_orig_ctx = 4096;
        hp->yarn_log_mul = v3 ? 1.0f : 0.707f;
        if (v3) {
            hp->expert_gating = RKM_GATING_SIGMOID;
            hp->expert_norm_topk = 1;
            hp->expert_weights_scale = 2.5f;
            hp->n_expert_group = 8;
            hp->n_group_used = 4;
        }
    }
    if (p->arch == RKM_ARCH_QWEN35MOE || p->arch == RKM_ARCH_QWEN35 || p->arch == RKM_ARCH_QWEN3NEXT) {
        /* Qwen/Qwen3.5-35B-A3B's, Qwen3.5-27B's and Qwen3-Next-80B-A3B's
         * config.json: a quarter of each 256-wide head rotated; Gated
         * DeltaNet with 16 key heads and 32 (27B: 48) value heads of 128,
         * a 4-wide convolution; every 4th layer attends */
        int vh = p->arch == RKM_ARCH_QWEN35 ? 48 : 32;
        hp->rope_dim = hp->rope_dim_swa = 64;
        hp->ssm_d_conv = 4;
        hp->ssm_d_state = 128;
        hp->ssm_n_group = 16;
        hp->ssm_dt_rank = vh;
        hp->ssm_d_inner = vh * 128;
        for (int i = 0; i < RKM_MAX_LAYERS; i++) hp->recr_layer[i] = (i + 1) % 4 != 0;
    }
    if (p->arch == RKM_ARCH_LFM2 || p->arch == RKM_ARCH_LFM2MOE) {
        /* LiquidAI/LFM2-1.2B's and LFM2-8B-A1B's config.json: a 3-wide
         * short convolution in every layer but the attending ones (no kv
         * heads elsewhere); the MoE: two dense lead layers, sigmoid routing
         * with a selection bias */
        static const int att12[] = {2, 5, 8, 10, 12, 14}, att8[] = {2, 6, 10, 14, 18, 21};
        int moe = p->arch == RKM_ARCH_LFM2MOE;
        const int *att = moe ? att8 : att12;
        hp->ssm_d_conv = 3;
        hp->rms_eps = 1e-5f;
        for (int i = 0; i < RKM_MAX_LAYERS; i++) {
            int attends = 0;
            for (int k = 0; k < 6; k++) attends |= att[k] == i;
            hp->recr_layer[i] = !attends;
            hp->n_head_kv[i] = attends ? p->n_kv : 0;
        }
        if (moe) hp->n_layer_dense_lead = 2;
    }
    if (p->arch == RKM_ARCH_GRANITEHYBRID) {
        /* ibm-granite/granite-4.0-h-tiny's config.json: Mamba-2 (48 heads
         * of 64, one group, state 128, a 4-wide convolution) in every
         * layer but four attending ones, no RoPE; Granite's embedding,
         * residual, logit and attention scales */
        hp->rope_dim = hp->rope_dim_swa = 0;
        hp->ssm_d_conv = 4;
        hp->ssm_d_state = 128;
        hp->ssm_n_group = 1;
        hp->ssm_dt_rank = 48;
        hp->ssm_d_inner = 2 * p->n_embd;
        hp->rms_eps = 1e-5f;
        hp->embed_scale = 12.0f;
        hp->residual_scale = 0.22f;
        hp->logit_scale = 6.0f;
        hp->attn_scale = 0.0078125f;
        for (int i = 0; i < RKM_MAX_LAYERS; i++) {
            hp->recr_layer[i] = i % 10 != 5;
            hp->n_head_kv[i] = hp->recr_layer[i] ? 0 : p->n_kv;
        }
    }
    if (p->arch == RKM_ARCH_GPT_OSS) {
        /* a 128-token window on every other layer (the first slides), YaRN
         * x32 over a 4096-token original context, as published */
        hp->sliding_window = 128;
        for (int i = 0; i < RKM_MAX_LAYERS; i++) hp->swa_layer[i] = i % 2 == 0;
        hp->rope_scaling = RKM_ROPE_SCALING_YARN;
        hp->rope_freq_scale = 1.0f / 32;
        hp->rope_orig_ctx = 4096;
        hp->rms_eps = 1e-5f;
    }
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

/* The generator of row r of the tensor called name: every row has its own */
static rng row_rng(uint64_t seed, const char *name, int64_t r)
{
    rng g = {0};
    g.s = seed ^ rkm_hash(name, strlen(name)) ^ ((uint64_t)r * 0x9E3779B97F4A7C15ull);
    splitmix(&g.s);
    return g;
}

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

typedef struct {
    char name[96];
    const rkm_tensor_info *info; /* the architecture table's row */
    int il;                      /* its layer, -1: global */
    int type;                    /* the type written (enum rkm_type) */
    int n_dims;
    int64_t ne[3];
    int init;   /* enum rkm_init */
    float gain; /* std multiplier for routers and embeddings, or the norm gain */
} synth_tensor;

typedef struct {
    synth_tensor *t;
    int n, cap;
} tlist;

static void add(tlist *l, const rkm_hparams *hp, const rkm_tensor_info *ti, int il)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        synth_tensor *nt = realloc(l->t, (size_t)l->cap * sizeof *nt);
        if (!nt) abort(); /* a few KiB; allocation failure here is not recoverable input */
        l->t = nt;
    }
    synth_tensor *t = &l->t[l->n++];
    RKM_ASSERT(rkm_arch_format(ti->gguf, il, 0, t->name, sizeof t->name) == 0);
    t->info = ti;
    t->il = il;
    t->n_dims = rkm_hparams_tensor_ne(hp, ti, il, t->ne);
    t->init = ti->init;
    t->gain = ti->gain ? ti->gain : 1.0f;
    if (ti->flags & RKM_TF_GAIN_OVER_SQRT_EMBD) t->gain = t->gain / sqrtf((float)hp->n_embd);
}

/* The architecture's tensors that these hyper-parameters imply: the
 * global ones, then layer by layer, each in the table's order. */
static void tensor_list(const rkm_hparams *hp, tlist *l)
{
    const rkm_arch_info *a = rkm_arch_info_of(hp->arch);
    for (int il = -1; a && il < hp->n_layer; il++)
        for (int i = 0; i < a->n_tensors; i++)
            if (rkm_hparams_tensor_expected(hp, &a->tensors[i], il)) add(l, hp, &a->tensors[i], il);
}

/* Row r (of the tensor flattened to ne[0]-wide rows) into out; hf: the
 * values as Hugging Face stores them (RKM_TF_HF_PLUS_ONE: w - 1;
 * RKM_INIT_SSM_A: A_log, of which GGUF's -exp(A_log) is computed as the
 * converter does). */
static void gen_row_as(const synth_tensor *t, const rkm_hparams *hp, uint64_t seed, int64_t r, float *out, int hf)
{
    rng g = row_rng(seed, t->name, r);
    const int64_t n = t->ne[0];
    double std = 0;
    switch (t->init) {
    case RKM_INIT_MAT: std = 0.7 / sqrt((double)n); break;
    case RKM_INIT_ROUTER: std = t->gain; break;
    case RKM_INIT_EMBED: std = t->gain; break;
    case RKM_INIT_OUTPUT: std = 3.0 / sqrt((double)hp->n_embd); break;
    case RKM_INIT_BIAS: std = 0.02 * t->gain; break;
    case RKM_INIT_SINK: std = 1.0; break;
    default: break;
    }
    for (int64_t i = 0; i < n; i++) {
        double z = rng_normal(&g);
        switch (t->init) {
        case RKM_INIT_NORM: out[i] = (float)(t->gain * (1.0 + 0.1 * z)); break;
        case RKM_INIT_SCALE: out[i] = (float)(1.0 + 0.1 * z); break;
        case RKM_INIT_ROPE_FREQS: out[i] = i < (int64_t)(n / 4) ? 1.0f : 1e30f; break; /* partial rotary 0.25 */
        case RKM_INIT_SSM_A: {
            float a_log = logf((float)(1.0 + 15.0 * rng_uniform(&g)));
            out[i] = hf ? a_log : -expf(a_log);
            break;
        }
        case RKM_INIT_SSM_DT: { /* as the published models initialise dt_bias */
            double dt = exp(log(0.001) + rng_uniform(&g) * (log(0.1) - log(0.001)));
            out[i] = (float)(dt + log(-expm1(-dt)));
            break;
        }
        default: out[i] = (float)(std * z); break;
        }
    }
    /* special tokens (the last 4 ids of the built-in vocabulary) are rarely predicted */
    if ((t->init == RKM_INIT_OUTPUT || (t->init == RKM_INIT_EMBED && hp->tied_output)) && r >= hp->n_vocab - 4)
        for (int64_t i = 0; i < n; i++) out[i] *= 0.25f;
    if (hf && (t->info->flags & RKM_TF_HF_PLUS_ONE)) /* exact: the weights are within [0.5, 2] of 1 */
        for (int64_t i = 0; i < n; i++) out[i] -= 1.0f;
}

static void gen_row(const synth_tensor *t, const rkm_hparams *hp, uint64_t seed, int64_t r, float *out)
{
    gen_row_as(t, hp, seed, r, out, 0);
}

static int tensor_type(const synth_tensor *t, int dtype)
{
    /* norms stay f32 whatever their shape (Mamba-2's is per group), as llama.cpp's quantizer keeps them */
    if (t->n_dims == 1 || t->init == RKM_INIT_ROUTER || t->init == RKM_INIT_BIAS || t->init == RKM_INIT_NORM || t->ne[0] % 32)
        return RKM_TYPE_F32;
    return dtype;
}

/* quant_mix's test of which tensors a model has, over the list */
static int tlist_has(const void *ctx, int role, int il)
{
    const tlist *l = ctx;
    for (int i = 0; i < l->n; i++)
        if (l->t[i].info->role == role && l->t[i].il == il) return 1;
    return 0;
}

/* Every tensor's type: dtype's, or the type the mix's rules give the
 * tensor quantized from its F32 rows (what `convert --quant MIX` of the
 * f32 synth stores). */
static void assign_types(tlist *l, const rkm_hparams *hp, const rkm_synth_opts *o)
{
    rkm_quant_plan plan;
    if (o->mix) rkm_quant_plan_init_with(&plan, o->mix, hp, tlist_has, l);
    for (int i = 0; i < l->n; i++) {
        synth_tensor *t = &l->t[i];
        t->type = o->mix ? rkm_quant_plan_type(&plan, t->info, t->il, t->n_dims, t->ne[0], RKM_TYPE_F32)
                         : tensor_type(t, o->dtype);
        /* gpt-oss is published with MXFP4 experts: beside --hf-out, the
         * GGUF holds the same */
        if (o->hf_out && hp->arch == RKM_ARCH_GPT_OSS && rkm_tensor_role_is_expert(t->info->role)) t->type = RKM_TYPE_MXFP4;
    }
}

static int64_t n_rows(const synth_tensor *t) { return t->ne[1] * t->ne[2]; }

/* ------------------------------------------------------------ GGUF */

static const char *gguf_arch(const rkm_hparams *hp) { return rkm_arch_info_of(hp->arch)->gguf_name; }

/* Mixtral (GGUF arch "llama") and OLMoE have no dense FFN: llama.cpp
 * reads their experts' width from feed_forward_length, as their
 * converted checkpoints store it, and there is no expert_ key. */
/* the expert width is stored as the FFN width (mixtral, olmoe, granite), when there are experts */
static int ff_is_expert_width(const rkm_hparams *hp) { return rkm_arch_info_of(hp->arch)->expert_width_in_ff && hp->n_expert > 0; }

static void put_hparams(rkm_gguf_writer *w, const rkm_hparams *hp, const char *name)
{
    const char *a = gguf_arch(hp);
    char k[128];
#define KEY(s) (snprintf(k, sizeof k, "%s." s, a), k)
    /* the key of an rkm_hparams field, from the architecture table */
#define FKEY(field) (snprintf(k, sizeof k, "%s.%s", a, rkm_arch_key(hp->arch, field)->gguf), k)
    rkm_gguf_writer_set_str(w, "general.architecture", a);
    rkm_gguf_writer_set_str(w, "general.name", name);
    rkm_gguf_writer_set_u32(w, FKEY("n_ctx_train"), (uint32_t)hp->n_ctx_train);
    rkm_gguf_writer_set_u32(w, FKEY("n_embd"), (uint32_t)hp->n_embd);
    rkm_gguf_writer_set_u32(w, FKEY("n_layer"), (uint32_t)hp->n_layer);
    /* gpt-oss's files carry the expert width as feed_forward_length too */
    rkm_gguf_writer_set_u32(w, FKEY("n_ff"),
                            (uint32_t)(ff_is_expert_width(hp) || hp->arch == RKM_ARCH_GPT_OSS ? hp->n_ff_exp : hp->n_ff));
    rkm_gguf_writer_set_u32(w, FKEY("n_head"), (uint32_t)hp->n_head);
    if (hp->gemma4_norms) {
        int32_t kv[RKM_MAX_LAYERS];
        uint8_t pat[RKM_MAX_LAYERS];
        for (int i = 0; i < hp->n_layer; i++) {
            kv[i] = hp->n_head_kv[i];
            pat[i] = hp->swa_layer[i];
        }
        rkm_gguf_writer_set_arr(w, FKEY("n_head_kv"), RKM_GGUF_INT32, kv, (uint64_t)hp->n_layer);
        rkm_gguf_writer_set_u32(w, FKEY("head_dim_swa"), (uint32_t)hp->head_dim_swa);
        rkm_gguf_writer_set_u32(w, KEY("attention.value_length_swa"), (uint32_t)hp->head_dim_swa);
        rkm_gguf_writer_set_u32(w, FKEY("rope_dim_swa"), (uint32_t)hp->rope_dim_swa);
        rkm_gguf_writer_set_f32(w, FKEY("rope_theta_swa"), hp->rope_theta_swa);
        rkm_gguf_writer_set_u32(w, FKEY("sliding_window"), (uint32_t)hp->sliding_window);
        rkm_gguf_writer_set_arr(w, FKEY("swa_layer"), RKM_GGUF_BOOL, pat, (uint64_t)hp->n_layer);
        rkm_gguf_writer_set_u32(w, KEY("attention.shared_kv_layers"), 0);
        rkm_gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"), 0);
        rkm_gguf_writer_set_f32(w, FKEY("final_softcap"), hp->final_softcap);
    } else if (hp->recr_kind != RKM_RECR_DELTANET) { /* no kv heads marks LFM2's and Granite's recurrent layers */
        int32_t kv[RKM_MAX_LAYERS];
        for (int i = 0; i < hp->n_layer; i++) kv[i] = hp->recr_layer[i] ? 0 : hp->n_head_kv[i];
        rkm_gguf_writer_set_arr(w, FKEY("n_head_kv"), RKM_GGUF_INT32, kv, (uint64_t)hp->n_layer);
        if (hp->recr_kind == RKM_RECR_SHORTCONV) rkm_gguf_writer_set_u32(w, KEY("shortconv.l_cache"), (uint32_t)hp->ssm_d_conv);
        if (hp->sliding_window) rkm_gguf_writer_set_u32(w, FKEY("sliding_window"), (uint32_t)hp->sliding_window);
    } else {
        rkm_gguf_writer_set_u32(w, FKEY("n_head_kv"), (uint32_t)hp->n_head_kv[0]);
        /* the layers' pattern is the architecture's (arch.h swa_period) */
        if (hp->sliding_window) rkm_gguf_writer_set_u32(w, FKEY("sliding_window"), (uint32_t)hp->sliding_window);
    }
    rkm_gguf_writer_set_u32(w, FKEY("head_dim"), (uint32_t)hp->head_dim);
    rkm_gguf_writer_set_u32(w, FKEY("head_dim_v"), (uint32_t)hp->head_dim_v);
    rkm_gguf_writer_set_f32(w, FKEY("rms_eps"), hp->rms_eps);
    rkm_gguf_writer_set_f32(w, FKEY("rope_theta"), hp->rope_theta);
    rkm_gguf_writer_set_u32(w, FKEY("rope_dim"), (uint32_t)hp->rope_dim);
    if (hp->rope_scaling != RKM_ROPE_SCALING_NONE) { /* as llama.cpp's converter writes them */
        rkm_gguf_writer_set_str(w, KEY("rope.scaling.type"), rkm_rope_scaling_name(hp->rope_scaling));
        rkm_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 1.0f / hp->rope_freq_scale);
        if (hp->rope_scaling == RKM_ROPE_SCALING_YARN)
            rkm_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"),
                                    (uint32_t)(hp->rope_orig_ctx > 0 ? hp->rope_orig_ctx : hp->n_ctx_train));
        if (hp->rope_attn_factor != 1.0f) rkm_gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), hp->rope_attn_factor);
        if (hp->yarn_beta_fast != 32.0f) rkm_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), hp->yarn_beta_fast);
        if (hp->yarn_beta_slow != 1.0f) rkm_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), hp->yarn_beta_slow);
        /* deepseek2's files hold a tenth of mscale_all_dim, as llama.cpp's converter writes it */
        if (hp->yarn_log_mul != 0)
            rkm_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_log_multiplier"),
                                    hp->arch == RKM_ARCH_DEEPSEEK2 ? 0.1f * hp->yarn_log_mul : hp->yarn_log_mul);
    }
    if (hp->n_expert) {
        rkm_gguf_writer_set_u32(w, FKEY("n_expert"), (uint32_t)hp->n_expert);
        rkm_gguf_writer_set_u32(w, FKEY("n_expert_used"), (uint32_t)hp->n_expert_used);
        if (!ff_is_expert_width(hp)) rkm_gguf_writer_set_u32(w, FKEY("n_ff_exp"), (uint32_t)hp->n_ff_exp);
        if (hp->n_ff_shexp) rkm_gguf_writer_set_u32(w, FKEY("n_ff_shexp"), (uint32_t)hp->n_ff_shexp);
        if (hp->n_layer_dense_lead)
            rkm_gguf_writer_set_u32(w, FKEY("n_layer_dense_lead"), (uint32_t)hp->n_layer_dense_lead);
        if (hp->expert_gating == RKM_GATING_SIGMOID || hp->arch == RKM_ARCH_DEEPSEEK2) {
            /* as llama.cpp's converter writes GLM-4.5 and DeepSeek */
            rkm_gguf_writer_set_u32(w, FKEY("expert_gating_func"), hp->expert_gating == RKM_GATING_SIGMOID ? 2 : 1);
            rkm_gguf_writer_set_u32(w, FKEY("n_shared_experts"),
                                    (uint32_t)(hp->n_ff_exp ? hp->n_ff_shexp / hp->n_ff_exp : 0));
            rkm_gguf_writer_set_f32(w, FKEY("expert_weights_scale"), hp->expert_weights_scale);
            rkm_gguf_writer_set_bool(w, FKEY("expert_norm_topk"), hp->expert_norm_topk);
            rkm_gguf_writer_set_u32(w, FKEY("nextn_predict_layers"), 0);
        }
        if (hp->n_expert_group > 1) {
            rkm_gguf_writer_set_u32(w, FKEY("n_expert_group"), (uint32_t)hp->n_expert_group);
            rkm_gguf_writer_set_u32(w, FKEY("n_group_used"), (uint32_t)hp->n_group_used);
        }
    }
    if (hp->kv_lora_rank > 0) { /* latent attention, as llama.cpp's converter writes it */
        /* 0 without the q LoRA: llama.cpp wants the key unless the depth is V2-Lite's */
        rkm_gguf_writer_set_u32(w, FKEY("q_lora_rank"), (uint32_t)hp->q_lora_rank);
        rkm_gguf_writer_set_u32(w, FKEY("kv_lora_rank"), (uint32_t)hp->kv_lora_rank);
        rkm_gguf_writer_set_u32(w, FKEY("head_dim_k_mla"), (uint32_t)hp->head_dim_k_mla);
        rkm_gguf_writer_set_u32(w, FKEY("head_dim_v_mla"), (uint32_t)hp->head_dim_v_mla);
    }
    int interval = 0; /* recurrent layers: every layer but each interval-th */
    while (interval < hp->n_layer && hp->recr_layer[interval]) interval++;
    if (hp->recr_kind == RKM_RECR_MAMBA2) { /* as llama.cpp's converter writes Granite 4.0-H */
        rkm_gguf_writer_set_f32(w, KEY("embedding_scale"), hp->embed_scale);
        rkm_gguf_writer_set_f32(w, KEY("residual_scale"), hp->residual_scale);
        rkm_gguf_writer_set_f32(w, KEY("logit_scale"), hp->logit_scale);
        rkm_gguf_writer_set_f32(w, KEY("attention.scale"), hp->attn_scale);
        rkm_gguf_writer_set_bool(w, KEY("rope.scaling.finetuned"), hp->rope_dim > 0);
    }
    if ((interval > 0 && hp->recr_kind == RKM_RECR_DELTANET) || hp->recr_kind == RKM_RECR_MAMBA2) {
        rkm_gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)hp->ssm_d_conv);
        rkm_gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)hp->ssm_d_state);
        rkm_gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)hp->ssm_n_group);
        rkm_gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)hp->ssm_dt_rank);
        rkm_gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)hp->ssm_d_inner);
    }
    if (interval > 0 && hp->recr_kind == RKM_RECR_DELTANET) { /* Gated DeltaNet, as llama.cpp's converter writes Qwen3.5 */
        interval++;
        rkm_gguf_writer_set_u32(w, KEY("full_attention_interval"), (uint32_t)interval);
        /* Qwen3.5's rotated pairs in three sections (text positions: one) */
        int pairs = hp->rope_dim / 2;
        int32_t sec[4] = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0};
        if (hp->arch != RKM_ARCH_QWEN3NEXT)
            rkm_gguf_writer_set_arr(w, KEY("rope.dimension_sections"), RKM_GGUF_INT32, sec, 4);
    }
    if (hp->arch == RKM_ARCH_QWEN3VL || hp->arch == RKM_ARCH_QWEN3VLMOE) {
        /* Qwen3-VL's sections (24, 20, 20 of 64 pairs), scaled to the
         * rotated pairs, and the deep-stack rows of its image input */
        int pairs = hp->rope_dim / 2, hw = pairs * 20 / 64;
        int32_t sec[4] = {pairs - 2 * hw, hw, hw, 0};
        rkm_gguf_writer_set_arr(w, KEY("rope.dimension_sections"), RKM_GGUF_INT32, sec, 4);
        rkm_gguf_writer_set_u32(w, KEY("n_deepstack_layers"), (uint32_t)hp->n_deepstack);
    }
#undef FKEY
#undef KEY
}

/* A batch of a tensor's rows generated and quantized by the pool's
 * threads (each row depends only on the seed, the tensor and its index,
 * so the bytes do not depend on the thread count). */
typedef struct {
    const synth_tensor *t;
    const rkm_hparams *hp;
    uint64_t seed;
    int64_t r0, n;  /* the batch's rows */
    size_t rb;      /* bytes per row */
    uint8_t *out;   /* n * rb */
    float *scratch; /* per thread: a float row and a quantized row */
    int64_t ne0;
} gen_batch;

static void gen_rows(void *ctx, int ith, int nth)
{
    const gen_batch *j = ctx;
    float *row = j->scratch + (size_t)ith * 2 * (size_t)j->ne0;
    uint8_t *q = (uint8_t *)(row + j->ne0);
    for (int64_t r = j->n * ith / nth; r < j->n * (ith + 1) / nth; r++) {
        gen_row(j->t, j->hp, j->seed, j->r0 + r, row);
        rkm_quantize_row(j->t->type, row, q, j->ne0);
        memcpy(j->out + (size_t)r * j->rb, q, j->rb);
    }
}

static int write_tensor_rows(const synth_tensor *t, const rkm_hparams *hp, uint64_t seed, rkm_pool *pool, float *scratch,
                             uint8_t *batch, size_t batch_bytes, rkm_gguf_writer *w, rkm_progress *prog)
{
    const size_t rb = rkm_type_row_bytes(t->type, t->ne[0]);
    const int64_t per = RKM_MAX((int64_t)1, (int64_t)(batch_bytes / rb));
    for (int64_t r = 0; r < n_rows(t); r += per) {
        gen_batch j = {t, hp, seed, r, RKM_MIN(per, n_rows(t) - r), rb, batch, scratch, t->ne[0]};
        if (j.n * (int64_t)t->ne[0] < 4096) gen_rows(&j, 0, 1); /* too small to share */
        else rkm_pool_run(pool, gen_rows, &j);
        rkm_pool_park(pool); /* the write may block */
        int rc = rkm_gguf_writer_write_data(w, batch, (size_t)j.n * rb);
        if (rc) return rc;
        rkm_progress_add(prog, (uint64_t)j.n * rb);
    }
    return 0;
}

/* ------------------------------------------------------------ HF out */

static const char *hf_model_type(int arch)
{
    const rkm_arch_info *a = rkm_arch_info_of(arch);
    return a ? a->hf_model_type[0] : NULL;
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

/* config.json's layer_types: one string per layer, yes where flag[i], else no. */
static void add_layer_types(cJSON *c, const rkm_hparams *hp, const uint8_t *flag, const char *yes, const char *no)
{
    cJSON *lt = cJSON_AddArrayToObject(c, "layer_types");
    for (int i = 0; i < hp->n_layer; i++) cJSON_AddItemToArray(lt, cJSON_CreateString(flag[i] ? yes : no));
}

/* Gated DeltaNet's fields, as Qwen/Qwen3.5-35B-A3B's, Qwen3.5-27B's and
 * Qwen3-Next-80B-A3B's config.json name them; Qwen3.5's text model nests
 * in text_config with its RoPE in rope_parameters. Takes c; returns the
 * config to write. */
static cJSON *deltanet_config(const rkm_hparams *hp, cJSON *c)
{
    cJSON_AddNumberToObject(c, "linear_conv_kernel_dim", hp->ssm_d_conv);
    cJSON_AddNumberToObject(c, "linear_key_head_dim", hp->ssm_d_state);
    cJSON_AddNumberToObject(c, "linear_value_head_dim", hp->ssm_d_inner / hp->ssm_dt_rank);
    cJSON_AddNumberToObject(c, "linear_num_key_heads", hp->ssm_n_group);
    cJSON_AddNumberToObject(c, "linear_num_value_heads", hp->ssm_dt_rank);
    int interval = 0;
    while (interval < hp->n_layer && hp->recr_layer[interval]) interval++;
    cJSON_AddNumberToObject(c, "full_attention_interval", interval + 1);
    cJSON_AddBoolToObject(c, "attn_output_gate", 1);
    if (hp->arch == RKM_ARCH_QWEN3NEXT) {
        cJSON_AddNumberToObject(c, "partial_rotary_factor", (double)hp->rope_dim / hp->head_dim);
        cJSON_AddNumberToObject(c, "decoder_sparse_step", 1);
        cJSON_AddArrayToObject(c, "mlp_only_layers");
        return c;
    }
    add_layer_types(c, hp, hp->recr_layer, "linear_attention", "full_attention");
    cJSON *rp = cJSON_AddObjectToObject(c, "rope_parameters");
    cJSON_AddStringToObject(rp, "rope_type", "default");
    cJSON_AddNumberToObject(rp, "rope_theta", hp->rope_theta);
    cJSON_AddNumberToObject(rp, "partial_rotary_factor", (double)hp->rope_dim / hp->head_dim);
    int pairs = hp->rope_dim / 2, sec[3] = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3};
    cJSON_AddItemToObject(rp, "mrope_section", cJSON_CreateIntArray(sec, 3));
    cJSON_AddBoolToObject(rp, "mrope_interleaved", 1);
    cJSON_DeleteItemFromObject(c, "rope_theta");
    cJSON_AddNumberToObject(c, "mtp_num_hidden_layers", 1);
    char tt[64];
    snprintf(tt, sizeof tt, "%s_text", hf_model_type(hp->arch));
    cJSON_ReplaceItemInObject(c, "model_type", cJSON_CreateString(tt));
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model_type", hf_model_type(hp->arch));
    cJSON *ar = cJSON_AddArrayToObject(root, "architectures");
    cJSON_AddItemToArray(ar, cJSON_CreateString(rkm_arch_info_of(hp->arch)->hf_architectures[0]));
    cJSON_AddBoolToObject(root, "tie_word_embeddings", hp->tied_output);
    cJSON_AddItemToObject(root, "text_config", c);
    cJSON *vc = cJSON_AddObjectToObject(root, "vision_config"); /* the tower the converter leaves out */
    cJSON_AddNumberToObject(vc, "depth", 1);
    cJSON_AddNumberToObject(vc, "hidden_size", 16);
    return root;
}

/* the attending layers' kv heads (the recurrent ones have none) */
static int max_kv_heads(const rkm_hparams *hp)
{
    int kv = 0;
    for (int i = 0; i < hp->n_layer; i++) kv = RKM_MAX(kv, hp->n_head_kv[i]);
    return kv;
}

/* LFM2's fields as LiquidAI/LFM2-1.2B's and LFM2-8B-A1B's config.json
 * name them: the dense width as block_ff_dim before llama.cpp's
 * adjustment (2/3, rounded up to block_multiple_of). */
static void lfm2_config(const rkm_hparams *hp, cJSON *c)
{
    add_layer_types(c, hp, hp->recr_layer, "conv", "full_attention");
    cJSON_AddNumberToObject(c, "conv_L_cache", hp->ssm_d_conv);
    cJSON_AddBoolToObject(c, "conv_bias", 0);
    cJSON_ReplaceItemInObject(c, "num_key_value_heads", cJSON_CreateNumber(max_kv_heads(hp)));
    cJSON_AddNumberToObject(c, "norm_eps", hp->rms_eps);
    cJSON_DeleteItemFromObject(c, "rms_norm_eps");
    cJSON_DeleteItemFromObject(c, "head_dim");
    if (hp->arch == RKM_ARCH_LFM2) {
        int mo = 256;
        while (mo > 1 && hp->n_ff % mo) mo /= 2;
        cJSON_AddNumberToObject(c, "block_ff_dim", hp->n_ff * 3 / 2);
        cJSON_AddBoolToObject(c, "block_auto_adjust_ff_dim", 1);
        cJSON_AddNumberToObject(c, "block_ffn_dim_multiplier", 1.0);
        cJSON_AddNumberToObject(c, "block_multiple_of", mo);
        cJSON_AddBoolToObject(c, "tie_embedding", hp->tied_output);
        cJSON_DeleteItemFromObject(c, "intermediate_size");
    } else {
        cJSON_AddNumberToObject(c, "num_dense_layers", hp->n_layer_dense_lead);
        cJSON_AddBoolToObject(c, "use_expert_bias", 1);
    }
}

/* Granite 4.0-H's fields as ibm-granite/granite-4.0-h-tiny's config.json
 * names them. */
static void granite_config(const rkm_hparams *hp, cJSON *c)
{
    add_layer_types(c, hp, hp->recr_layer, "mamba", "attention");
    cJSON_ReplaceItemInObject(c, "num_key_value_heads", cJSON_CreateNumber(max_kv_heads(hp)));
    cJSON_DeleteItemFromObject(c, "head_dim");
    cJSON_AddNumberToObject(c, "mamba_n_heads", hp->ssm_dt_rank);
    cJSON_AddNumberToObject(c, "mamba_d_head", hp->ssm_d_inner / hp->ssm_dt_rank);
    cJSON_AddNumberToObject(c, "mamba_d_state", hp->ssm_d_state);
    cJSON_AddNumberToObject(c, "mamba_n_groups", hp->ssm_n_group);
    cJSON_AddNumberToObject(c, "mamba_d_conv", hp->ssm_d_conv);
    cJSON_AddNumberToObject(c, "mamba_expand", hp->ssm_d_inner / hp->n_embd);
    cJSON_AddBoolToObject(c, "mamba_conv_bias", 1);
    cJSON_AddBoolToObject(c, "mamba_proj_bias", 0);
    cJSON_AddNumberToObject(c, "embedding_multiplier", hp->embed_scale);
    cJSON_AddNumberToObject(c, "residual_multiplier", hp->residual_scale);
    cJSON_AddNumberToObject(c, "logits_scaling", hp->logit_scale);
    cJSON_AddNumberToObject(c, "attention_multiplier", hp->attn_scale);
    cJSON_AddStringToObject(c, "position_embedding_type", hp->rope_dim > 0 ? "rope" : "nope");
    if (hp->n_expert == 0) cJSON_AddNumberToObject(c, "shared_intermediate_size", hp->n_ff);
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
        cJSON_AddNumberToObject(c, rkm_arch_key(hp->arch, "n_expert")->hf, hp->n_expert);
        cJSON_AddNumberToObject(c, "num_experts_per_tok", hp->n_expert_used);
        if (!ff_is_expert_width(hp)) cJSON_AddNumberToObject(c, "moe_intermediate_size", hp->n_ff_exp);
        cJSON_AddBoolToObject(c, "norm_topk_prob", hp->expert_norm_topk);
    }
    if (hp->n_ff_shexp && hp->arch != RKM_ARCH_GLM4MOE && hp->arch != RKM_ARCH_DEEPSEEK2)
        cJSON_AddNumberToObject(c, rkm_arch_key(hp->arch, "n_ff_shexp")->hf, hp->n_ff_shexp);
    if (hp->arch == RKM_ARCH_DEEPSEEK2) { /* as deepseek-ai/DeepSeek-V3's config.json names them */
        cJSON_ReplaceItemInObject(c, "num_key_value_heads", cJSON_CreateNumber(hp->n_head));
        cJSON_DeleteItemFromObject(c, "head_dim");
        cJSON_AddNumberToObject(c, rkm_arch_key(hp->arch, "n_shared_experts")->hf, hp->n_ff_exp ? hp->n_ff_shexp / hp->n_ff_exp : 0);
        cJSON_AddNumberToObject(c, "first_k_dense_replace", hp->n_layer_dense_lead);
        cJSON_AddNumberToObject(c, "moe_layer_freq", 1);
        cJSON_AddNumberToObject(c, "routed_scaling_factor", hp->expert_weights_scale);
        cJSON_AddNumberToObject(c, "n_group", hp->n_expert_group > 0 ? hp->n_expert_group : 1);
        cJSON_AddNumberToObject(c, "topk_group", hp->n_group_used > 0 ? hp->n_group_used : 1);
        int sig = hp->expert_gating == RKM_GATING_SIGMOID;
        cJSON_AddStringToObject(c, "scoring_func", sig ? "sigmoid" : "softmax");
        cJSON_AddStringToObject(c, "topk_method", sig ? "noaux_tc" : "greedy");
        if (hp->q_lora_rank > 0) cJSON_AddNumberToObject(c, "q_lora_rank", hp->q_lora_rank);
        else cJSON_AddNullToObject(c, "q_lora_rank");
        cJSON_AddNumberToObject(c, "kv_lora_rank", hp->kv_lora_rank);
        cJSON_AddNumberToObject(c, "qk_nope_head_dim", hp->head_dim_k_mla - hp->rope_dim);
        cJSON_AddNumberToObject(c, "qk_rope_head_dim", hp->rope_dim);
        cJSON_AddNumberToObject(c, "v_head_dim", hp->head_dim_v_mla);
        cJSON_AddBoolToObject(c, "attention_bias", 0);
    }
    if (hp->arch == RKM_ARCH_GLM4MOE) { /* as zai-org/GLM-4.5-Air's config.json names them */
        cJSON_AddNumberToObject(c, rkm_arch_key(hp->arch, "n_shared_experts")->hf, hp->n_ff_exp ? hp->n_ff_shexp / hp->n_ff_exp : 0);
        cJSON_AddNumberToObject(c, "first_k_dense_replace", hp->n_layer_dense_lead);
        cJSON_AddNumberToObject(c, "partial_rotary_factor", (double)hp->rope_dim / hp->head_dim);
        cJSON_AddNumberToObject(c, "routed_scaling_factor", hp->expert_weights_scale);
        cJSON_AddNumberToObject(c, "n_group", hp->n_expert_group > 0 ? hp->n_expert_group : 1);
        cJSON_AddNumberToObject(c, "topk_group", hp->n_group_used > 0 ? hp->n_group_used : 1);
        cJSON_AddBoolToObject(c, "attention_bias", hp->has_qkv_bias);
        cJSON_AddBoolToObject(c, "use_qk_norm", hp->qk_norm != RKM_QK_NORM_NONE);
        cJSON_AddNumberToObject(c, rkm_arch_key(hp->arch, "nextn_predict_layers")->hf, 0);
    }
    if (hp->arch == RKM_ARCH_GPT_OSS) { /* as openai/gpt-oss-20b's config.json names them */
        cJSON_ReplaceItemInObject(c, "intermediate_size", cJSON_CreateNumber(hp->n_ff_exp));
        cJSON_AddNumberToObject(c, "experts_per_token", hp->n_expert_used);
        cJSON_AddBoolToObject(c, "attention_bias", 1);
        cJSON_AddNumberToObject(c, "sliding_window", hp->sliding_window);
        cJSON_AddNumberToObject(c, "swiglu_limit", 7.0);
        add_layer_types(c, hp, hp->swa_layer, "sliding_attention", "full_attention");
        cJSON *qc = cJSON_AddObjectToObject(c, "quantization_config");
        cJSON_AddStringToObject(qc, "quant_method", "mxfp4");
    }
    cJSON_AddNumberToObject(c, "rms_norm_eps", hp->rms_eps);
    cJSON_AddNumberToObject(c, "rope_theta", hp->rope_theta);
    if (hp->rope_scaling != RKM_ROPE_SCALING_NONE) {
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", rkm_rope_scaling_name(hp->rope_scaling));
        cJSON_AddNumberToObject(rs, "factor", 1.0 / hp->rope_freq_scale);
        if (hp->rope_scaling == RKM_ROPE_SCALING_YARN) {
            cJSON_AddNumberToObject(rs, "original_max_position_embeddings",
                                    hp->rope_orig_ctx > 0 ? hp->rope_orig_ctx : hp->n_ctx_train);
            cJSON_AddNumberToObject(rs, "beta_fast", hp->yarn_beta_fast);
            cJSON_AddNumberToObject(rs, "beta_slow", hp->yarn_beta_slow);
            cJSON_AddBoolToObject(rs, "truncate", 0); /* as gpt-oss publishes it; llama.cpp truncates anyway */
            if (hp->yarn_log_mul != 0) {
                cJSON_AddNumberToObject(rs, "mscale", hp->yarn_log_mul);
                cJSON_AddNumberToObject(rs, "mscale_all_dim", hp->yarn_log_mul);
            }
        }
    }
    cJSON_AddBoolToObject(c, "tie_word_embeddings", hp->tied_output);
    cJSON_AddNumberToObject(c, "bos_token_id", rkm_tokenizer_bos(tok));
    cJSON_AddNumberToObject(c, "eos_token_id", rkm_tokenizer_eos(tok));
    if (hp->recr_kind == RKM_RECR_DELTANET && hp->ssm_d_conv > 0) c = deltanet_config(hp, c);
    if (hp->recr_kind == RKM_RECR_SHORTCONV) lfm2_config(hp, c);
    if (hp->recr_kind == RKM_RECR_MAMBA2) granite_config(hp, c);
    char *js = cJSON_Print(c);
    cJSON_Delete(c);
    char *p = rkm_path_join(dir, "config.json");
    int rc = js && p ? rkm_write_file_atomic(p, js, strlen(js)) : rkm_err(RKM_ENOMEM, "out of memory");
    free(js);
    free(p);
    return rc;
}

/* One HF tensor: name, the synth tensor it comes from, the expert (or -1);
 * gpt-oss's published experts (kind): MXFP4 blocks or scales of gate/up
 * rows interleaved (t gate, t2 up) or of down, and the interleaved
 * gate/up biases. */
enum { HF_PLAIN = 0, HF_MXFP4_BLOCKS, HF_MXFP4_SCALES, HF_BIAS_PAIRS, HF_KV_B, HF_GATE_UP, HF_OTHER_PART };
typedef struct {
    char *hf;
    const synth_tensor *t, *t2;
    int expert;
    int kind;
} hf_item;

static const synth_tensor *find_synth(const tlist *l, int role, int il)
{
    for (int i = 0; i < l->n; i++)
        if (l->t[i].info->role == role && l->t[i].il == il) return &l->t[i];
    return NULL;
}

/* gpt-oss's fused expert tensors of layer il, as published, into items. */
static int gpt_oss_hf_items(const tlist *l, int il, hf_item *items, int *n)
{
    const synth_tensor *g = find_synth(l, RKM_TENSOR_FFN_GATE_EXPS, il), *u = find_synth(l, RKM_TENSOR_FFN_UP_EXPS, il),
                       *d = find_synth(l, RKM_TENSOR_FFN_DOWN_EXPS, il),
                       *gb = find_synth(l, RKM_TENSOR_FFN_GATE_EXPS_BIAS, il),
                       *ub = find_synth(l, RKM_TENSOR_FFN_UP_EXPS_BIAS, il);
    if (!g || !u || !d || !gb || !ub) return 0;
    static const struct {
        const char *sfx;
        int kind, down;
    } parts[] = {{"gate_up_proj_blocks", HF_MXFP4_BLOCKS, 0}, {"gate_up_proj_scales", HF_MXFP4_SCALES, 0},
                 {"down_proj_blocks", HF_MXFP4_BLOCKS, 1},    {"down_proj_scales", HF_MXFP4_SCALES, 1},
                 {"gate_up_proj_bias", HF_BIAS_PAIRS, 0}};
    for (size_t i = 0; i < RKM_ARRAY_LEN(parts); i++) {
        char nm[160];
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.%s", il, parts[i].sfx);
        hf_item *it = &items[(*n)++];
        it->hf = strdup(nm);
        it->kind = parts[i].kind;
        it->expert = -1;
        it->t = parts[i].kind == HF_BIAS_PAIRS ? gb : parts[i].down ? d : g;
        it->t2 = parts[i].kind == HF_BIAS_PAIRS ? ub : parts[i].down ? NULL : u;
        if (!it->hf) return rkm_err(RKM_ENOMEM, "out of memory");
    }
    return 0;
}

/* Row r of a gpt-oss published tensor: rows of t interleaved with t2's
 * (t2 NULL: t's own rows). */
static void pair_row(const hf_item *it, int64_t r, const synth_tensor **t, int64_t *src)
{
    if (!it->t2) {
        *t = it->t;
        *src = r;
        return;
    }
    *t = r % 2 ? it->t2 : it->t;
    *src = r / 2;
}

/* The data of a gpt-oss published tensor: MXFP4 blocks (HF order: value
 * k of a block in byte k/2, low nibble first) or their e8m0 scales, of the
 * same quantization the GGUF's MXFP4 experts hold; or the biases
 * interleaved, in the GGUF's type. */
static int write_gpt_oss_item(const hf_item *it, const rkm_hparams *hp, const rkm_synth_opts *o, float *row,
                              uint8_t *qrow, rkm_st_writer *w)
{
    const synth_tensor *t;
    int64_t src, n0 = it->t->ne[0], nb = n0 / 32;
    int rc = 0;
    if (it->kind == HF_BIAS_PAIRS) {
        const int type = it->t->type; /* the GGUF's (f32), as the plain tensors */
        size_t es = rkm_type_row_bytes(type, 1);
        uint8_t *one = malloc(es), *pair = malloc(2 * (size_t)n0 * es);
        float *r2 = malloc(sizeof(float) * (size_t)n0);
        if (!one || !pair || !r2) rc = rkm_err(RKM_ENOMEM, "out of memory");
        for (int64_t e = 0; e < it->t->ne[1] && !rc; e++) {
            gen_row(it->t, hp, o->seed, e, row);
            gen_row(it->t2, hp, o->seed, e, r2);
            for (int64_t i = 0; i < n0; i++) {
                rkm_quantize_row(type, &row[i], one, 1);
                memcpy(pair + (size_t)(2 * i) * es, one, es);
                rkm_quantize_row(type, &r2[i], one, 1);
                memcpy(pair + (size_t)(2 * i + 1) * es, one, es);
            }
            rc = rkm_st_writer_write(w, pair, 2 * (size_t)n0 * es);
        }
        free(one);
        free(pair);
        free(r2);
        return rc;
    }
    int64_t rows = it->t->ne[1] * it->t->ne[2] * (it->t2 ? 2 : 1);
    uint8_t hfq[16];
    for (int64_t r = 0; r < rows && !rc; r++) {
        pair_row(it, r, &t, &src);
        gen_row(t, hp, o->seed, src, row);
        rkm_quantize_row(RKM_TYPE_MXFP4, row, qrow, n0);
        for (int64_t b = 0; b < nb && !rc; b++) {
            const uint8_t *blk = qrow + b * 17;
            if (it->kind == HF_MXFP4_SCALES) {
                rc = rkm_st_writer_write(w, blk, 1);
                continue;
            }
            memset(hfq, 0, sizeof hfq);
            for (int j = 0; j < 16; j++) { /* ggml: qs[j] = v[j] | v[j+16] << 4 */
                int lo = blk[1 + j] & 15, hi = blk[1 + j] >> 4;
                hfq[j / 2] |= (uint8_t)(lo << (j % 2 ? 4 : 0));
                hfq[(j + 16) / 2] |= (uint8_t)(hi << (j % 2 ? 4 : 0));
            }
            rc = rkm_st_writer_write(w, hfq, 16);
        }
    }
    return rc;
}

/* DeepSeek's kv_b_proj from attn_k_b (t) and attn_v_b (t2): per head
 * the key rows (attn_k_b's rows of the head transposed), then its value
 * rows, each of the latent's width. */
static int write_kv_b_item(const hf_item *it, const rkm_hparams *hp, const rkm_synth_opts *o, float *row,
                           uint8_t *qrow, rkm_st_writer *w)
{
    const synth_tensor *kb = it->t, *vb = it->t2;
    const int64_t nope = kb->ne[0], lat = kb->ne[1], nh = kb->ne[2], vm = vb->ne[1];
    const int type = kb->type;
    float *kh = malloc(sizeof(float) * (size_t)(lat * nope));
    int rc = kh ? 0 : rkm_err(RKM_ENOMEM, "out of memory");
    for (int64_t h = 0; h < nh && !rc; h++) {
        for (int64_t c = 0; c < lat; c++) gen_row(kb, hp, o->seed, h * lat + c, kh + c * nope);
        for (int64_t j = 0; j < nope + vm && !rc; j++) {
            if (j < nope)
                for (int64_t c = 0; c < lat; c++) row[c] = kh[c * nope + j];
            else gen_row(vb, hp, o->seed, h * vm + j - nope, row);
            rkm_quantize_row(type, row, qrow, lat);
            rc = rkm_st_writer_write(w, qrow, rkm_type_row_bytes(type, lat));
        }
    }
    free(kh);
    return rc;
}

/* The HF name as the checkpoint of hp's arch spells it: the multimodal
 * ones (Qwen3.5) keep the text model under their prefix. Takes name. */
static char *hf_spelling(const rkm_hparams *hp, char *name)
{
    const rkm_arch_info *a = rkm_arch_info_of(hp->arch);
    size_t pl = a->hf_prefix ? strlen(a->hf_prefix) : 0;
    if (!name || !pl || !a->hf_text_config || strncmp(name, "model.", 6) || !strncmp(name, a->hf_prefix, pl)) return name;
    size_t n = pl + strlen(name) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s", a->hf_prefix, name + 6);
    free(name);
    return p;
}

/* The FFN tensors arch's checkpoints hold fused (source.c's fused_ffn
 * reads them): the HF name (after "model.layers.N.") of role, "" for the
 * up part written with its gate, NULL if role is not fused. Qwen3.5-MoE
 * keeps each layer's experts in two tensors (transformers 5's layout),
 * Granite the gate and up rows of its experts and shared MLP. */
static const char *hf_fused_name(const rkm_hparams *hp, int role)
{
    if (hp->arch == RKM_ARCH_QWEN35MOE) {
        if (role == RKM_TENSOR_FFN_GATE_EXPS) return "mlp.experts.gate_up_proj";
        if (role == RKM_TENSOR_FFN_DOWN_EXPS) return "mlp.experts.down_proj";
        return role == RKM_TENSOR_FFN_UP_EXPS ? "" : NULL;
    }
    if (hp->arch != RKM_ARCH_GRANITEHYBRID) return NULL;
    switch (role) {
    case RKM_TENSOR_FFN_GATE_EXPS: return "block_sparse_moe.input_linear.weight";
    case RKM_TENSOR_FFN_DOWN_EXPS: return "block_sparse_moe.output_linear.weight";
    case RKM_TENSOR_FFN_GATE_SHEXP:
    case RKM_TENSOR_FFN_GATE: return "shared_mlp.input_linear.weight";
    case RKM_TENSOR_FFN_DOWN_SHEXP:
    case RKM_TENSOR_FFN_DOWN: return "shared_mlp.output_linear.weight";
    case RKM_TENSOR_FFN_UP_EXPS:
    case RKM_TENSOR_FFN_UP_SHEXP:
    case RKM_TENSOR_FFN_UP: return "";
    default: return NULL;
    }
}

static int hf_up_role(int gate_role)
{
    return gate_role == RKM_TENSOR_FFN_GATE_EXPS ? RKM_TENSOR_FFN_UP_EXPS
         : gate_role == RKM_TENSOR_FFN_GATE_SHEXP ? RKM_TENSOR_FFN_UP_SHEXP
                                                  : RKM_TENSOR_FFN_UP;
}

static int write_hf(const rkm_synth_opts *o, const rkm_hparams *hp, const tlist *l, const rkm_tokenizer *tok)
{
    if (!hf_model_type(hp->arch))
        return rkm_err(RKM_EUNSUPPORTED, "--hf-out: no Hugging Face layout for %s", hp->arch_name);
    int rc = rkm_mkdir_p(o->hf_out);
    if (rc) return rc;
    int cap = 2, n = 0;
    for (int i = 0; i < l->n; i++) cap += l->t[i].n_dims == 3 ? (int)l->t[i].ne[2] : 2;
    hf_item *items = calloc((size_t)cap + 1, sizeof *items);
    if (!items) return rkm_err(RKM_ENOMEM, "out of memory");
    if (hp->recr_kind == RKM_RECR_DELTANET && hp->ssm_d_conv > 0) {
        /* parts the published checkpoints carry beside the text model: a
         * vision tower (Qwen3.5), multi-token prediction */
        static const char *const other[] = {"model.visual.patch_embed.proj.weight", "mtp.fc.weight"};
        for (int k = hp->arch == RKM_ARCH_QWEN3NEXT; k < 2; k++) {
            items[n] = (hf_item){strdup(other[k]), &l->t[0], NULL, -1, HF_OTHER_PART};
            if (!items[n++].hf) {
                rc = rkm_err(RKM_ENOMEM, "out of memory");
                goto out;
            }
        }
    }
    for (int i = 0; i < l->n; i++) {
        const synth_tensor *t = &l->t[i];
        int fused = !t->info->gguf_split; /* HF keeps these experts stacked in one tensor (Gemma 4) */
        int role = t->info->role;
        const char *fn = hf_fused_name(hp, role);
        if (fn) {
            if (!*fn) continue; /* with its gate rows */
            char nm[128];
            snprintf(nm, sizeof nm, "model.layers.%d.%s", t->il, fn);
            int gu = strstr(fn, "gate_up") || strstr(fn, "input_linear");
            items[n] = (hf_item){hf_spelling(hp, strdup(nm)), t, gu ? find_synth(l, hf_up_role(role), t->il) : NULL, -1,
                                 gu ? HF_GATE_UP : HF_PLAIN};
            if (!items[n++].hf || (gu && !items[n - 1].t2)) {
                rc = rkm_err(RKM_ENOMEM, "out of memory");
                goto out;
            }
            continue;
        }
        if (t->info->role == RKM_TENSOR_ATTN_K_B) { /* DeepSeek: one kv_b_proj for attn_k_b and attn_v_b */
            char nm[96];
            snprintf(nm, sizeof nm, "model.layers.%d.self_attn.kv_b_proj.weight", t->il);
            items[n] = (hf_item){strdup(nm), t, find_synth(l, RKM_TENSOR_ATTN_V_B, t->il), -1, HF_KV_B};
            if (!items[n++].hf || !items[n - 1].t2) {
                rc = rkm_err(RKM_ENOMEM, "out of memory");
                goto out;
            }
            continue;
        }
        if (t->info->flags & RKM_TF_HF_DERIVED) continue; /* the converter derives it */
        if (hp->arch == RKM_ARCH_GPT_OSS && (rkm_tensor_role_is_expert(t->info->role) ||
                                             t->info->role == RKM_TENSOR_FFN_GATE_EXPS_BIAS ||
                                             t->info->role == RKM_TENSOR_FFN_UP_EXPS_BIAS)) {
            if (t->info->role == RKM_TENSOR_FFN_GATE_EXPS && (rc = gpt_oss_hf_items(l, t->il, items, &n))) goto out;
            continue;
        }
        int ne = t->n_dims == 3 && !fused ? (int)t->ne[2] : 1;
        for (int e = 0; e < ne; e++) {
            items[n].hf = hf_spelling(hp, rkm_gguf_name_to_hf(hp->arch, t->name, e));
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
    int64_t max_ne0 = 16 * 16; /* HF_OTHER_PART */
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
            if (items[i].kind == HF_OTHER_PART || items[i].kind == HF_GATE_UP) { /* [16, 16] f32; [E, 2F, H] */
                int64_t ot[2] = {16, 16}, gu[3] = {t->ne[0], 2 * t->ne[1], t->ne[2]};
                rc = items[i].kind == HF_OTHER_PART ? rkm_st_writer_add(w, items[i].hf, RKM_TYPE_F32, 2, ot)
                                                    : rkm_st_writer_add(w, items[i].hf, t->type, t->n_dims, gu);
                cJSON_AddStringToObject(wm, items[i].hf, fname);
                continue;
            }
            if (items[i].kind == HF_KV_B) { /* [heads x (nope + v), latent] */
                int64_t kv[2] = {t->ne[1], t->ne[2] * (t->ne[0] + items[i].t2->ne[1])};
                rc = rkm_st_writer_add(w, items[i].hf, t->type, 2, kv);
                cJSON_AddStringToObject(wm, items[i].hf, fname);
                continue;
            }
            if (items[i].kind != HF_PLAIN) { /* gpt-oss: [E, rows, nb, 16] / [E, rows, nb] u8, [E, 2F] */
                int64_t rows = t->ne[1] * (items[i].t2 ? 2 : 1), nb = t->ne[0] / 32;
                int64_t nbk[4] = {16, nb, rows, t->ne[2]}, nsc[3] = {nb, rows, t->ne[2]}, nbi[2] = {2 * t->ne[0], t->ne[1]};
                rc = items[i].kind == HF_MXFP4_BLOCKS ? rkm_st_writer_add(w, items[i].hf, RKM_ST_U8, 4, nbk)
                   : items[i].kind == HF_MXFP4_SCALES ? rkm_st_writer_add(w, items[i].hf, RKM_ST_U8, 3, nsc)
                                                      : rkm_st_writer_add(w, items[i].hf, t->type, 2, nbi);
                cJSON_AddStringToObject(wm, items[i].hf, fname);
                continue;
            }
            int nd = t->n_dims == 3 && items[i].expert >= 0 ? 2 : t->n_dims;
            int64_t ne[3] = {t->ne[0], t->ne[1], t->ne[2]};
            if (t->info->flags & RKM_TF_HF_ROW) {
                nd = 2;
                ne[1] = 1;
            }
            if (t->info->role == RKM_TENSOR_SSM_CONV1D || t->info->role == RKM_TENSOR_SHORTCONV_CONV) {
                nd = 3; /* torch's Conv1d: [channels, 1, kernel] */
                ne[2] = ne[1];
                ne[1] = 1;
            }
            if (hp->arch == RKM_ARCH_GRANITEHYBRID && (t->info->role == RKM_TENSOR_SSM_A || t->info->role == RKM_TENSOR_SSM_D ||
                                                       t->info->role == RKM_TENSOR_SSM_NORM)) {
                nd = 1; /* Mamba-2's per-head vectors and its norm, flat */
                ne[0] *= ne[1];
            }
            rc = rkm_st_writer_add(w, items[i].hf, t->type, nd, ne);
            cJSON_AddStringToObject(wm, items[i].hf, fname);
        }
        char *p = rkm_path_join(o->hf_out, fname);
        if (!rc) rc = rkm_st_writer_begin(w, p);
        for (int i = a; i < b && !rc; i++) {
            const synth_tensor *t = items[i].t;
            if (items[i].kind == HF_OTHER_PART) {
                memset(row, 0, 16 * 16 * sizeof(float));
                rc = rkm_st_writer_write(w, row, 16 * 16 * sizeof(float));
                continue;
            }
            if (items[i].kind == HF_GATE_UP) { /* each expert's gate rows, then its up rows */
                size_t rb = rkm_type_row_bytes(t->type, t->ne[0]);
                for (int64_t r = 0; r < 2 * n_rows(t) && !rc; r++) {
                    int64_t e = r / (2 * t->ne[1]), k = r % (2 * t->ne[1]);
                    const synth_tensor *src = k < t->ne[1] ? t : items[i].t2;
                    gen_row(src, hp, o->seed, e * t->ne[1] + k % t->ne[1], row);
                    rkm_quantize_row(t->type, row, qrow, t->ne[0]);
                    rc = rkm_st_writer_write(w, qrow, rb);
                }
                continue;
            }
            if (items[i].kind != HF_PLAIN) {
                rc = items[i].kind == HF_KV_B ? write_kv_b_item(&items[i], hp, o, row, qrow, w)
                                              : write_gpt_oss_item(&items[i], hp, o, row, qrow, w);
                continue;
            }
            const int type = t->type;
            int64_t rows = items[i].expert >= 0 ? t->ne[1] : n_rows(t), r0 = items[i].expert >= 0 ? items[i].expert * t->ne[1] : 0;
            int perm = 0, dummy;
            char *g = rkm_hf_name_to_gguf(hp->arch, items[i].hf, hp, &perm);
            free(g);
            (void)dummy;
            int64_t hd = perm ? rows / perm : 0, v_off = 0, v_hd = 1;
            int vk = t->info->flags & RKM_TF_HF_VHEADS ? rkm_hf_vheads(hp, t->info->role, &v_off, &v_hd) : 0;
            for (int64_t r = 0; r < rows && !rc; r++) {
                int64_t src = r0 + r;
                if (perm) { /* HF row h*hd + j*hd/2 + i holds GGUF row h*hd + 2i + j */
                    int64_t h = r / hd, k = r % hd, j = k / (hd / 2), ii = k % (hd / 2);
                    src = h * hd + 2 * ii + j;
                }
                if (vk == 1) src = rkm_hf_vhead_index(hp, src, v_off, v_hd, 0);
                gen_row_as(t, hp, o->seed, src, row, 1);
                if (vk == 2) { /* the elements of the row (qrow as scratch) */
                    float *gg = (float *)qrow;
                    memcpy(gg, row, sizeof(float) * (size_t)t->ne[0]);
                    for (int64_t q = 0; q < t->ne[0]; q++) row[q] = gg[rkm_hf_vhead_index(hp, q, v_off, v_hd, 0)];
                }
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

/* ------------------------------------------------------------ mmproj */

/* The vision towers beside the text presets (the published configs; the
 * tiny one shrunk, with the real tower's structure). */
typedef struct {
    const char *text_preset;
    int proj, n_layer, n_embd, n_head, n_ff, patch, n_pos, standardize;
    float mean, std;
    int clamp; /* Gemma 4's clippable linears: clamp bounds beside the matrices */
    uint64_t deepstack; /* Qwen3-VL: bit il set for the layers with a deep-stack merger
                         * (as many as the text model's n_deepstack) */
} vision_preset;

static const vision_preset vision_presets[] = {
    {"tiny-gemma4", RKM_PROJ_GEMMA4V, 2, 64, 2, 128, 16, 512, 1, 0.0f, 1.0f, 1, 0},
    {"gemma4-26b-a4b", RKM_PROJ_GEMMA4V, 27, 1152, 16, 4304, 16, 10240, 1, 0.0f, 1.0f, 1, 0},
    /* Qwen3-VL's tower (patch 16, a 48 x 48 position table, mergers
     * after three of its blocks), shrunk */
    {"tiny-qwen3vl", RKM_PROJ_QWEN3VL, 4, 64, 2, 128, 16, 256, 0, 0.5f, 0.5f, 0, 0x6},
    /* Qwen/Qwen3-VL-30B-A3B-Instruct's: 27 blocks of 1152, mergers after 8, 16 and 24 */
    {"qwen3-vl-30b-a3b", RKM_PROJ_QWEN3VL, 27, 1152, 16, 4304, 16, 2304, 0, 0.5f, 0.5f, 0, (1u << 8) | (1u << 16) | (1u << 24)},
};

/* Does a matrix of this role get clamp bounds (the tower's linears that
 * are Gemma4ClippableLinear: attention, feed-forward, the projection)? */
static int clamped_role(int role)
{
    return role == RKM_V_ATTN_Q || role == RKM_V_ATTN_K || role == RKM_V_ATTN_V || role == RKM_V_ATTN_OUT ||
           role == RKM_V_FFN_GATE || role == RKM_V_FFN_UP || role == RKM_V_FFN_DOWN || role == RKM_V_MM_INPUT_PROJ;
}

/* Bound k (0 input_min, 1 input_max, 2 output_min, 3 output_max) of a
 * matrix: tight enough that a few percent of the random activations hit
 * them, each matrix its own. The input bounds of q, k and the gate stay
 * wide: llama.cpp's mtmd clamps in place, so their bounds would also
 * reach the input of the projections that read it after them (k and v,
 * the up projection), which the model (each linear clamping its own
 * input) does not do; wide, they never bite and both agree. */
static float clamp_bound(uint64_t seed, const char *name, int role, int k)
{
    rng g = row_rng(seed, name, 1000 + k);
    const int shared_in = k < 2 && (role == RKM_V_ATTN_Q || role == RKM_V_ATTN_K || role == RKM_V_FFN_GATE);
    const float span = shared_in ? 1e4f : (k < 2 ? 2.5f : 2.0f) + 0.5f * (float)fabs(rng_normal(&g));
    return k % 2 ? span : -span;
}

/* The type synth writes a vision tensor in: F32 where the table says so
 * and for rows no block divides; the conv kernels F16 (ggml's im2col
 * reads F32 or F16 kernels); matrices in --dtype (q4_0 and the mixes
 * give F16, as mmproj files are published in F16, BF16 or Q8_0). */
static int vision_type(const rkm_vtensor_info *ti, const int64_t *ne, int dtype)
{
    if ((ti->flags & RKM_VT_F32) || ti->n_dims == 1 || dtype == RKM_TYPE_F32) return RKM_TYPE_F32;
    if (ti->role == RKM_V_PATCH_EMBD || ti->role == RKM_V_PATCH_EMBD_1) return RKM_TYPE_F16;
    int t = dtype == RKM_TYPE_BF16 || dtype == RKM_TYPE_Q8_0 ? dtype : RKM_TYPE_F16;
    return ne[0] % rkm_type_block_size(t) ? RKM_TYPE_F16 : t;
}

static void gen_vision_row(const char *name, const rkm_vtensor_info *ti, uint64_t seed, int64_t r, int64_t n, float *out)
{
    rng g = row_rng(seed, name, r);
    double std = ti->init == RKM_VI_MAT ? 0.7 / sqrt((double)n) : ti->init == RKM_VI_BIAS ? 0.02 : 0.5;
    for (int64_t i = 0; i < n; i++) {
        double z = rng_normal(&g);
        out[i] = (float)((ti->gain ? ti->gain : 1.0f) * (ti->init == RKM_VI_NORM || ti->init == RKM_VI_SCALE ? 1.0 + 0.1 * z : std * z));
    }
}

static int find_vision_preset(const char *name, const vision_preset **out)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(vision_presets); i++)
        if (!strcmp(vision_presets[i].text_preset, name)) return *out = &vision_presets[i], 0;
    char list[256] = "";
    for (size_t i = 0; i < RKM_ARRAY_LEN(vision_presets); i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", vision_presets[i].text_preset);
    return rkm_err(RKM_EINVAL, "--mmproj-out: preset '%s' has no vision tower (presets with one: %s)", name, list);
}

static int synth_mmproj(const rkm_synth_opts *o, const rkm_hparams *text, const char *out)
{
    const char *name = o->preset ? o->preset : "tiny";
    const vision_preset *vpr;
    int rc = find_vision_preset(name, &vpr);
    if (rc) return rc;
    const rkm_proj_info *p = rkm_proj_info_of(vpr->proj);
    rkm_vision_hparams vp = {.proj = vpr->proj, .n_embd = vpr->n_embd, .n_ff = vpr->n_ff, .n_layer = vpr->n_layer,
                             .n_head = vpr->n_head, .n_head_kv = vpr->n_head, .head_dim = vpr->n_embd / vpr->n_head,
                             .proj_dim = text->n_embd, .patch_size = vpr->patch,
                             .n_merge = p->n_merge, .n_pos = vpr->n_pos, .eps = 1e-6f};
    /* qwen3vl: the side of the position table in pixels (llama.cpp's converter) */
    vp.image_size = vpr->proj == RKM_PROJ_QWEN3VL ? (int)lround(sqrt((double)vpr->n_pos)) * vpr->patch : 224;
    uint8_t ds[RKM_VISION_MAX_LAYERS] = {0};
    for (int il = 0; il < vp.n_layer && il < 64; il++)
        if (vpr->deepstack >> il & 1) {
            vp.deepstack[il] = ds[il] = 1;
            vp.n_deepstack++;
        }
    if (vp.n_deepstack != text->n_deepstack) {
        return rkm_err(RKM_EINVAL, "--mmproj-out: the tower has %d deep-stack mergers, the text model n_deepstack = %d",
                       vp.n_deepstack, text->n_deepstack);
    }
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    char gname[96];
    snprintf(gname, sizeof gname, "synthetic-%s-mmproj-seed%llu", name, (unsigned long long)o->seed);
    /* the keys llama.cpp's converter writes for the projector */
    rkm_gguf_writer_set_str(w, "general.architecture", "clip");
    rkm_gguf_writer_set_str(w, "general.type", "mmproj");
    rkm_gguf_writer_set_str(w, "general.name", gname);
    rkm_gguf_writer_set_str(w, "synthetic.generator", "rkmojo synth " RKM_VERSION_STRING);
    rkm_gguf_writer_set_u32(w, "general.file_type", o->dtype == RKM_TYPE_F32 ? 0 : o->dtype == RKM_TYPE_BF16 ? 32
                                                   : o->dtype == RKM_TYPE_Q8_0 ? 7 : 1);
    rkm_gguf_writer_set_bool(w, "clip.has_vision_encoder", 1);
    rkm_gguf_writer_set_u32(w, "clip.vision.projection_dim", (uint32_t)vp.proj_dim);
    rkm_gguf_writer_set_u32(w, "clip.vision.image_size", (uint32_t)vp.image_size);
    rkm_gguf_writer_set_u32(w, "clip.vision.patch_size", (uint32_t)vp.patch_size);
    rkm_gguf_writer_set_u32(w, "clip.vision.embedding_length", (uint32_t)vp.n_embd);
    rkm_gguf_writer_set_u32(w, "clip.vision.feed_forward_length", (uint32_t)vp.n_ff);
    rkm_gguf_writer_set_u32(w, "clip.vision.block_count", (uint32_t)vp.n_layer);
    rkm_gguf_writer_set_u32(w, "clip.vision.attention.head_count", (uint32_t)vp.n_head);
    const float mean[3] = {vpr->mean, vpr->mean, vpr->mean}, stdv[3] = {vpr->std, vpr->std, vpr->std};
    rkm_gguf_writer_set_arr(w, "clip.vision.image_mean", RKM_GGUF_FLOAT32, mean, 3);
    rkm_gguf_writer_set_arr(w, "clip.vision.image_std", RKM_GGUF_FLOAT32, stdv, 3);
    rkm_gguf_writer_set_str(w, "clip.projector_type", p->name);
    rkm_gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", vp.eps);
    if (vpr->proj == RKM_PROJ_QWEN3VL) { /* as llama.cpp's converter writes Qwen3-VL's */
        rkm_gguf_writer_set_bool(w, "clip.use_gelu", 1);
        rkm_gguf_writer_set_u32(w, "clip.vision.spatial_merge_size", (uint32_t)vp.n_merge);
        rkm_gguf_writer_set_arr(w, "clip.vision.is_deepstack_layers", RKM_GGUF_BOOL, ds, (uint64_t)vp.n_layer);
    }
    /* the tensors this tower has, in the table's order, layer by layer */
    struct {
        const rkm_vtensor_info *ti; /* NULL: a clamp bound, value */
        char name[96];
        int64_t ne[4];
        int type;
        float value;
    } *ts = calloc((size_t)(vp.n_layer + 1) * (size_t)p->n_tensors * 5, sizeof *ts);
    int n = 0;
    uint64_t total = 0;
    int64_t max_ne0 = 0;
    if (!ts) rc = rkm_err(RKM_ENOMEM, "out of memory");
    for (int il = -1; il < vp.n_layer && !rc; il++)
        for (int i = 0; i < p->n_tensors && !rc; i++) {
            const rkm_vtensor_info *ti = &p->tensors[i];
            if (!rkm_vision_tensor_expected(&vp, ti, il)) continue;
            if ((ti->role == RKM_V_STD_BIAS || ti->role == RKM_V_STD_SCALE) && !vpr->standardize) continue;
            ts[n].ti = ti;
            rc = rkm_vision_tensor_name(ti, il, ts[n].name, sizeof ts[n].name);
            int nd = rkm_vision_tensor_ne(&vp, ti, ts[n].ne);
            ts[n].type = vision_type(ti, ts[n].ne, o->dtype);
            if (!rc) rc = rkm_gguf_writer_add_tensor(w, ts[n].name, ts[n].type, nd, ts[n].ne);
            total += rkm_type_row_bytes(ts[n].type, ts[n].ne[0]) * (uint64_t)(ts[n].ne[1] * ts[n].ne[2] * ts[n].ne[3]);
            max_ne0 = RKM_MAX(max_ne0, ts[n].ne[0]);
            n++;
            if (!vpr->clamp || !clamped_role(ti->role) || rc) continue;
            static const char *const sfx[4] = {".input_min", ".input_max", ".output_min", ".output_max"};
            char mat[96];
            memcpy(mat, ts[n - 1].name, sizeof mat);
            const size_t base = strlen(mat) - strlen(".weight");
            for (int k = 0; k < 4 && !rc; k++, n++) {
                snprintf(ts[n].name, sizeof ts[n].name, "%.*s%s", (int)base, mat, sfx[k]);
                ts[n].ne[0] = ts[n].ne[1] = ts[n].ne[2] = ts[n].ne[3] = 1;
                ts[n].type = RKM_TYPE_F32;
                ts[n].value = clamp_bound(o->seed, ts[n].name, ti->role, k);
                rc = rkm_gguf_writer_add_tensor(w, ts[n].name, RKM_TYPE_F32, 1, ts[n].ne);
                total += sizeof(float);
            }
        }
    float *row = malloc(sizeof(float) * (size_t)RKM_MAX(max_ne0, 1));
    uint8_t *q = malloc(sizeof(float) * (size_t)RKM_MAX(max_ne0, 1));
    if (!rc && (!row || !q)) rc = rkm_err(RKM_ENOMEM, "out of memory");
    if (!rc) rc = rkm_gguf_writer_begin(w, out);
    rkm_progress prog;
    rkm_progress_init(&prog, o->progress, "synth mmproj", total);
    for (int k = 0; k < n && !rc; k++) {
        const size_t rb = rkm_type_row_bytes(ts[k].type, ts[k].ne[0]);
        for (int64_t r = 0; r < ts[k].ne[1] * ts[k].ne[2] * ts[k].ne[3] && !rc; r++) {
            if (!ts[k].ti) row[0] = ts[k].value;
            else gen_vision_row(ts[k].name, ts[k].ti, o->seed, r, ts[k].ne[0], row);
            rkm_quantize_row(ts[k].type, row, q, ts[k].ne[0]);
            rc = rkm_gguf_writer_write_data(w, q, rb);
            rkm_progress_add(&prog, rb);
        }
    }
    if (!rc) rc = rkm_gguf_writer_finish(w);
    if (!rc) rkm_progress_done(&prog);
    rkm_gguf_writer_free(w);
    free(ts);
    free(row);
    free(q);
    return rc;
}

int rkm_synth(const rkm_synth_opts *o, const char *out)
{
    rkm_hparams hp;
    int rc = rkm_synth_preset(o->preset ? o->preset : "tiny", &hp);
    if (rc) return rc;
    if (o->mix && rkm_quant_mix_keeps(o->mix))
        return rkm_err(RKM_EINVAL, "--dtype keep: a synthetic model has no source types to keep");
    const vision_preset *vpr;
    if (o->mmproj_out && (rc = find_vision_preset(o->preset ? o->preset : "tiny", &vpr))) return rc;
    if (!o->mix && o->dtype != RKM_TYPE_F32 && o->dtype != RKM_TYPE_F16 && o->dtype != RKM_TYPE_Q8_0 &&
        o->dtype != RKM_TYPE_Q4_0 && o->dtype != RKM_TYPE_BF16)
        return rkm_err(RKM_EINVAL, "--dtype must be f32, f16, bf16, q8_0, q4_0 or a mix of convert --quant");
    if (o->hf_out && (o->mix || (o->dtype != RKM_TYPE_F32 && o->dtype != RKM_TYPE_F16 && o->dtype != RKM_TYPE_BF16)))
        return rkm_err(RKM_EINVAL, "--hf-out needs --dtype f32, f16 or bf16");
    /* the built-in vocabulary takes --set n_vocab; a loaded one sets it */
    for (int i = 0; i < o->n_sets; i++)
        if (!strncmp(o->sets[i], "n_vocab=", 8)) {
            if (o->vocab_from) return rkm_err(RKM_EINVAL, "n_vocab follows the tokenizer of --vocab-from");
            char *end;
            long v = strtol(o->sets[i] + 8, &end, 10);
            if (*end || v < 260 || v > (1 << 22))
                return rkm_err(RKM_EINVAL, "n_vocab '%s': the built-in vocabulary takes 260 to 4194304", o->sets[i] + 8);
            hp.n_vocab = (int)v;
        }
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
        if (!strcmp(key, "n_vocab")) continue; /* above */
        if ((rc = rkm_hparams_set(&hp, key, eq + 1))) {
            rkm_tokenizer_free(tok);
            return rc;
        }
    }
    if (hp.kv_lora_rank > 0) { /* the cache row follows the latent rank */
        hp.head_dim = hp.head_dim_swa = hp.kv_lora_rank + hp.rope_dim;
        hp.head_dim_v = hp.kv_lora_rank;
        for (int i = 0; i < RKM_MAX_LAYERS; i++) hp.n_head_kv[i] = 1;
    }
    if (hp.n_head > 0 && hp.n_embd % 32 == 0 && hp.rope_dim > hp.head_dim) hp.rope_dim = hp.head_dim;
    if ((rc = rkm_hparams_validate(&hp))) {
        rkm_tokenizer_free(tok);
        return rkm_err_prefix(rc, "invalid shape");
    }
    tlist l = {0};
    tensor_list(&hp, &l);
    assign_types(&l, &hp, o);
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    char name[96];
    snprintf(name, sizeof name, "synthetic-%s-seed%llu", o->preset ? o->preset : "tiny", (unsigned long long)o->seed);
    put_hparams(w, &hp, name);
    rkm_gguf_writer_set_str(w, "synthetic.generator", "rkmojo synth " RKM_VERSION_STRING);
    /* llama.cpp's file type: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_BF16 32; a mix's own */
    rkm_gguf_writer_set_u32(w, "general.file_type",
                            o->mix ? (uint32_t)rkm_quant_mix_file_type(o->mix)
                            : o->dtype == RKM_TYPE_F16 ? 1 : o->dtype == RKM_TYPE_Q4_0 ? 2
                            : o->dtype == RKM_TYPE_Q8_0 ? 7 : o->dtype == RKM_TYPE_BF16 ? 32 : 0);
    /* as llama.cpp's quantizer marks its files: ggml's block formats, version 2 */
    if (o->mix || o->dtype == RKM_TYPE_Q8_0 || o->dtype == RKM_TYPE_Q4_0)
        rkm_gguf_writer_set_u32(w, "general.quantization_version", 2);
    rc = rkm_tokenizer_write_gguf_arch(tok, w, gguf_arch(&hp)); /* as llama.cpp's converter would for it */
    if (!rc && !rkm_tokenizer_chat_template(tok) && !o->vocab_from)
        rkm_gguf_writer_set_str(w, "tokenizer.chat_template", rkm_chat_builtin_template("chatml"));
    uint64_t total = 0;
    int64_t max_ne0 = 0;
    for (int i = 0; i < l.n && !rc; i++) {
        int type = l.t[i].type;
        rc = rkm_gguf_writer_add_tensor(w, l.t[i].name, type, l.t[i].n_dims, l.t[i].ne);
        total += rkm_type_row_bytes(type, l.t[i].ne[0]) * (uint64_t)n_rows(&l.t[i]);
        max_ne0 = RKM_MAX(max_ne0, l.t[i].ne[0]);
    }
    /* rows in batches of about 8 MiB, generated on every core */
    rkm_pool *pool = rkm_pool_new(o->threads);
    const int nth = pool ? rkm_pool_n_threads(pool) : 1;
    const size_t batch_bytes = (size_t)8 << 20;
    float *scratch = malloc(sizeof(float) * 2 * (size_t)max_ne0 * (size_t)nth);
    uint8_t *batch = malloc(batch_bytes + sizeof(float) * (size_t)max_ne0);
    if (!rc && (!scratch || !batch)) rc = rkm_err(RKM_ENOMEM, "out of memory");
    if (!rc) rc = rkm_gguf_writer_begin(w, out);
    rkm_progress prog;
    rkm_progress_init(&prog, o->progress, "synth", total);
    for (int i = 0; i < l.n && !rc; i++)
        rc = write_tensor_rows(&l.t[i], &hp, o->seed, pool, scratch, batch, batch_bytes, w, &prog);
    if (!rc) rc = rkm_gguf_writer_finish(w);
    if (!rc) rkm_progress_done(&prog);
    rkm_gguf_writer_free(w);
    rkm_pool_free(pool);
    free(scratch);
    free(batch);
    if (!rc && o->hf_out) rc = write_hf(o, &hp, &l, tok);
    if (!rc && o->mmproj_out) rc = synth_mmproj(o, &hp, o->mmproj_out);
    free(l.t);
    rkm_tokenizer_free(tok);
    return rc;
}
