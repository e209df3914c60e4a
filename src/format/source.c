/*
 * source.c - the converter's input (see source.h): GGUF files and Hugging
 * Face directories behind one view with GGUF tensor names.
 */
#include "format/source.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

#include "format/safetensors.h"
#include "kernels/quant.h"
#include "util/common.h"

/* ------------------------------------------------------ name mapping */

char *rkm_hf_name_to_gguf(int arch, const char *hf, const rkm_hparams *hp, int *permute)
{
    int il, e;
    char buf[256];
    *permute = 0;
    const rkm_tensor_info *t = rkm_arch_tensor_by_hf(arch, hf, &il, &e);
    const char *tmpl = !t ? NULL : e >= 0 ? t->gguf_split : t->gguf;
    if (!tmpl || rkm_arch_format(tmpl, il, e, buf, sizeof buf)) return NULL;
    if (rkm_arch_info_of(arch)->hf_rope_permute && e < 0) {
        if (t->role == RKM_TENSOR_ATTN_Q) *permute = hp->n_head;
        else if (t->role == RKM_TENSOR_ATTN_K) *permute = hp->n_head_kv[il < hp->n_layer ? il : 0];
    }
    return strdup(buf);
}

char *rkm_gguf_name_to_hf(int arch, const char *gguf_name, int expert)
{
    int il, e;
    char buf[256];
    const rkm_tensor_info *t = rkm_arch_tensor_by_gguf(arch, gguf_name, &il, &e);
    /* a fused expert tensor names expert `expert` of its per-expert HF names */
    if (!t || !t->hf[0] || rkm_arch_format(t->hf[0], il, e >= 0 ? e : expert, buf, sizeof buf)) return NULL;
    return strdup(buf);
}

static const char *src_name(const void *ctx, int i) { return ((const rkm_source *)ctx)->tensors[i].name; }

/* Makes the tensor just added findable by name (rkm_source_find); the
 * callers have refused duplicates already. */
static void index_last(rkm_source *s)
{
    rkm_name_index_add(&s->ix, s->tensors[s->n_tensors - 1].name, s->n_tensors - 1, src_name, s);
}

/* A tensor of a block past the model's own, the name's block number read
 * with fmt ("blk.%d.", "model.layers.%d."): the next-token-prediction
 * blocks of GLM-4.5 and DeepSeek-V3, which the source leaves out. */
static int beyond_layers(const rkm_source *s, const char *fmt, const char *name)
{
    int il;
    return sscanf(name, fmt, &il) == 1 && il >= s->hp.n_layer;
}

/* ------------------------------------------------------------- GGUF */

static int gguf_sampling(const rkm_gguf *g, rkm_sampling_hint *h);
static int hf_sampling(const char *dir, rkm_sampling_hint *h);

static int open_gguf(rkm_source *s, const char *path, rkm_gguf_fill fill, void *user)
{
    s->kind = 0;
    s->gguf = fill ? rkm_gguf_open_fill(path, fill, user) : rkm_gguf_open(path);
    if (!s->gguf) return RKM_EFORMAT;
    int rc = rkm_hparams_from_gguf(s->gguf, &s->hp);
    if (rc) return rkm_err_prefix(rc, "%s", path);
    int n = rkm_gguf_n_tensors(s->gguf);
    s->tensors = calloc((size_t)n + 1, sizeof *s->tensors);
    if (!s->tensors || rkm_name_index_init(&s->ix, (size_t)n + 1)) return rkm_err(RKM_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const rkm_gguf_tensor *gt = rkm_gguf_tensor_at(s->gguf, i);
        if (beyond_layers(s, "blk.%d.", gt->name)) continue;
        rkm_src_tensor *t = &s->tensors[s->n_tensors++];
        t->name = strdup(gt->name);
        t->type = gt->type;
        t->n_dims = gt->n_dims;
        memcpy(t->ne, gt->ne, sizeof t->ne);
        t->nbytes = gt->nbytes;
        t->handle = gt;
        s->total_bytes += gt->nbytes;
        if (!t->name) return rkm_err(RKM_ENOMEM, "out of memory");
        index_last(s); /* the GGUF reader refused duplicate names */
    }
    const char *ct = rkm_gguf_get_str(s->gguf, "tokenizer.chat_template");
    if (ct) s->chat_template = strdup(ct);
    rc = gguf_sampling(s->gguf, &s->sampling);
    if (rc) return rkm_err_prefix(rc, "%s", path);
    const char *slash = strrchr(path, '/');
    size_t dn = strlen(path) + 16;
    s->desc = malloc(dn);
    if (s->desc) snprintf(s->desc, dn, "gguf:%s", slash ? slash + 1 : path);
    return 0;
}

/* --------------------------------------------------------------- HF */

static int jint(const cJSON *o, const char *k, int def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e9 ? (int)v->valuedouble : def;
}

static double jnum(const cJSON *o, const char *k, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* config.json key of field for arch ("" if none: jint/jnum then give the default). */
static const char *hk(int arch, const char *field)
{
    const rkm_hparam_key *k = rkm_arch_key(arch, field);
    return k && k->hf ? k->hf : "";
}

/* The fields every architecture's config.json names alike (through the
 * table's keys); n_ctx_def: the context when the config has none. */
static int hf_common(const cJSON *c, int arch, int n_ctx_def, rkm_hparams *hp)
{
    rkm_hparams_init(hp, arch);
    hp->n_layer = jint(c, hk(arch, "n_layer"), 0);
    hp->n_embd = jint(c, hk(arch, "n_embd"), 0);
    hp->n_head = jint(c, hk(arch, "n_head"), 0);
    if (hp->n_layer < 1 || hp->n_layer > RKM_MAX_LAYERS || hp->n_head < 1 || hp->n_embd < 1)
        return rkm_err(RKM_EFORMAT, "config.json: bad num_hidden_layers/hidden_size/num_attention_heads");
    hp->n_vocab = jint(c, hk(arch, "n_vocab"), 0);
    hp->n_ctx_train = jint(c, hk(arch, "n_ctx_train"), n_ctx_def);
    hp->n_ff = jint(c, hk(arch, "n_ff"), 0);
    hp->n_expert_used = jint(c, hk(arch, "n_expert_used"), jint(c, hk(RKM_ARCH_UNKNOWN, "n_expert_used"), 0));
    hp->rms_eps = (float)jnum(c, hk(arch, "rms_eps"), 1e-6);
    return 0;
}

/* Gemma 4's config: the text model's fields (nested in text_config for the
 * multimodal checkpoint). Head dims and kv heads differ between sliding and
 * full layers; they are read from the tensors afterwards (gemma4_dims). */
static int gemma4_hparams(const cJSON *c, rkm_hparams *hp)
{
    int rc = hf_common(c, RKM_ARCH_GEMMA4, 8192, hp);
    if (rc) return rc;
    hp->n_expert = jint(c, hk(RKM_ARCH_GEMMA4, "n_expert"), 0);
    hp->n_ff_exp = jint(c, hk(RKM_ARCH_GEMMA4, "n_ff_exp"), jint(c, "expert_intermediate_size", 0));
    hp->sliding_window = jint(c, hk(RKM_ARCH_GEMMA4, "sliding_window"), 0);
    hp->final_softcap = (float)jnum(c, hk(RKM_ARCH_GEMMA4, "final_softcap"), 0);
    hp->embed_scale = sqrtf((float)hp->n_embd);
    hp->rope_theta = (float)jnum(c, "rope_theta", 1e6);
    hp->rope_theta_swa = (float)jnum(c, "rope_local_base_freq", 1e4);
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(c, "rope_parameters");
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
    const cJSON *slid = cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention");
    if (cJSON_IsObject(full)) hp->rope_theta = (float)jnum(full, "rope_theta", hp->rope_theta);
    if (cJSON_IsObject(slid)) hp->rope_theta_swa = (float)jnum(slid, "rope_theta", hp->rope_theta_swa);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(c, "layer_types");
    if (cJSON_IsArray(lt)) {
        if (cJSON_GetArraySize(lt) != hp->n_layer) return rkm_err(RKM_EFORMAT, "config.json: layer_types needs one entry per layer");
        for (int i = 0; i < hp->n_layer; i++) {
            const cJSON *x = cJSON_GetArrayItem(lt, i);
            hp->swa_layer[i] = cJSON_IsString(x) && !strcmp(x->valuestring, "sliding_attention");
        }
    } else {
        hp->swa_layer[0] = 2; /* unknown: derived from the tensors (no v_proj on full layers) */
    }
    return 0;
}

static double gemma4_partial_rotary(const cJSON *root)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    const cJSON *c = cJSON_IsObject(tc) ? tc : root;
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "rope_parameters"), "full_attention");
    double f = jnum(c, "partial_rotary_factor", 0.25);
    if (cJSON_IsObject(full)) f = jnum(full, "partial_rotary_factor", f);
    return f;
}

/* config.json's layer_types into flag[] (one per layer): 1 where the
 * entry is `yes`, 0 where it is `no`; anything else is refused. */
static int hf_layer_flags(const cJSON *lt, const rkm_hparams *hp, const char *yes, const char *no, uint8_t *flag)
{
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != hp->n_layer)
        return rkm_err(RKM_EFORMAT, "config.json: layer_types needs one entry per layer (%d)", hp->n_layer);
    for (int i = 0; i < hp->n_layer; i++) {
        const cJSON *x = cJSON_GetArrayItem(lt, i);
        if (!cJSON_IsString(x) || (strcmp(x->valuestring, yes) && strcmp(x->valuestring, no)))
            return rkm_err(RKM_EFORMAT, "config.json: layer_types[%d] is not %s or %s", i, yes, no);
        flag[i] = !strcmp(x->valuestring, yes);
    }
    return 0;
}

/* config.json layer_types ("sliding_attention" / "full_attention", one
 * per layer) into hp->swa_layer; without it, llama.cpp's pattern of
 * period (the last layer of each period full). */
static int hf_layer_types(const cJSON *c, rkm_hparams *hp, int period)
{
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(c, "layer_types");
    if (!lt) {
        for (int i = 0; i < hp->n_layer; i++) hp->swa_layer[i] = i % period < period - 1;
    } else {
        int rc = hf_layer_flags(lt, hp, "sliding_attention", "full_attention", hp->swa_layer);
        if (rc) return rc;
    }
    for (int i = 0; i < hp->n_layer; i++)
        if (hp->swa_layer[i] && hp->sliding_window < 1)
            return rkm_err(RKM_EFORMAT, "config.json: sliding layers but no sliding_window");
    return 0;
}

/* Llama 3's frequency factors as llama.cpp's converter derives them into
 * rope_freqs: 1 for wavelengths under orig/high, factor over orig/low,
 * a smooth ramp between. f[0..4]: factor, low, high, original context. */
static float *llama3_rope_freqs(const rkm_hparams *hp, const double f[4])
{
    int n = hp->rope_dim / 2;
    float *out = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!out) return NULL;
    double factor = f[0], lo = f[1], hi = f[2], orig = f[3];
    double lo_wave = orig / lo, hi_wave = orig / hi;
    for (int i = 0; i < n; i++) {
        /* float32 as the converter's torch computes the base frequencies */
        float freq = 1.0f / powf(hp->rope_theta, (float)(2 * i) / (float)hp->rope_dim);
        double wave = 2 * M_PI / freq;
        if (wave < hi_wave) out[i] = 1.0f;
        else if (wave > lo_wave) out[i] = (float)factor;
        else {
            double smooth = (orig / wave - lo) / (hi - lo);
            out[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
    return out;
}

/* config.json's rope_scaling (or transformers 5's rope_parameters) as
 * llama.cpp's converter reads it: linear and yarn become the manifest's
 * scaling fields; llama3 fills llama3[] (factor, low_freq_factor,
 * high_freq_factor, original context) for the derived rope_freqs; default
 * is none. Other types are refused by name. Where transformers differs
 * from llama.cpp (YaRN's "truncate": false, "attention_factor" beside the
 * ramp), llama.cpp's reading is followed (docs/FORMAT.md). */
static int hf_rope_scaling(const cJSON *c, rkm_hparams *hp, double llama3[4])
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) rs = cJSON_GetObjectItemCaseSensitive(c, "rope_parameters");
    if (!rs || cJSON_IsNull(rs)) return 0;
    if (!cJSON_IsObject(rs)) return rkm_err(RKM_EFORMAT, "config.json: rope_scaling is not an object");
    hp->rope_theta = hp->rope_theta_swa = (float)jnum(rs, "rope_theta", hp->rope_theta);
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!cJSON_IsString(ty)) ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
    const char *t = cJSON_IsString(ty) ? ty->valuestring : "default";
    double factor = jnum(rs, "factor", 0);
    int orig = jint(rs, "original_max_position_embeddings", hp->n_ctx_train);
    if (!strcmp(t, "default")) return 0;
    if (!(factor > 0 && factor < 1e6)) return rkm_err(RKM_EFORMAT, "config.json: rope_scaling '%s' needs a positive factor", t);
    if (!strcmp(t, "linear") || !strcmp(t, "yarn")) {
        hp->rope_scaling = !strcmp(t, "yarn") ? RKM_ROPE_SCALING_YARN : RKM_ROPE_SCALING_LINEAR;
        hp->rope_freq_scale = (float)(1.0 / factor);
        if (hp->rope_scaling == RKM_ROPE_SCALING_YARN) {
            hp->rope_orig_ctx = orig;
            hp->yarn_beta_fast = (float)jnum(rs, "beta_fast", hp->yarn_beta_fast);
            hp->yarn_beta_slow = (float)jnum(rs, "beta_slow", hp->yarn_beta_slow);
            hp->yarn_ext_factor = (float)jnum(rs, "extrapolation_factor", hp->yarn_ext_factor);
            hp->yarn_attn_factor = (float)jnum(rs, "attention_factor", jnum(rs, "attn_factor", hp->yarn_attn_factor));
        }
        return 0;
    }
    if (!strcmp(t, "llama3")) {
        llama3[0] = factor;
        llama3[1] = jnum(rs, "low_freq_factor", 1.0);
        llama3[2] = jnum(rs, "high_freq_factor", 4.0);
        llama3[3] = jint(rs, "original_max_position_embeddings", 8192);
        if (!(llama3[1] > 0 && llama3[2] > llama3[1] && llama3[3] > 0))
            return rkm_err(RKM_EFORMAT, "config.json: llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor");
        return 0;
    }
    return rkm_err(RKM_EUNSUPPORTED, "config.json: rope_scaling '%s' is not supported (linear, yarn, llama3)", t);
}

/* DeepSeek's latent attention in config.json: the ranks (q_lora_rank
 * null: no q LoRA), the query/key head (qk_nope_head_dim +
 * qk_rope_head_dim, the latter rotated) and the value head; the cache
 * row is the latent and the rotated key, one "kv head"; YaRN's
 * mscale_all_dim. */
static int hf_mla(const cJSON *c, rkm_hparams *hp)
{
    hp->q_lora_rank = jint(c, hk(hp->arch, "q_lora_rank"), 0);
    hp->kv_lora_rank = jint(c, hk(hp->arch, "kv_lora_rank"), 0);
    int nope = jint(c, "qk_nope_head_dim", 0), rope = jint(c, "qk_rope_head_dim", 0);
    hp->head_dim_k_mla = nope + rope;
    hp->head_dim_v_mla = jint(c, hk(hp->arch, "head_dim_v_mla"), 0);
    if (hp->kv_lora_rank < 1 || nope < 1 || rope < 2 || hp->head_dim_v_mla < 1)
        return rkm_err(RKM_EFORMAT, "config.json: kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim "
                                    "must be positive");
    hp->rope_dim = hp->rope_dim_swa = rope;
    hp->head_dim = hp->head_dim_swa = hp->kv_lora_rank + rope;
    hp->head_dim_v = hp->kv_lora_rank;
    for (int i = 0; i < RKM_MAX_LAYERS; i++) hp->n_head_kv[i] = 1;
    if (jint(c, "moe_layer_freq", 1) != 1) return rkm_err(RKM_EUNSUPPORTED, "config.json: moe_layer_freq != 1 is not supported");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
    if (hp->rope_scaling == RKM_ROPE_SCALING_YARN && cJSON_IsObject(rs)) {
        hp->yarn_log_mul = (float)jnum(rs, "mscale_all_dim", 0);
        double ms = jnum(rs, "mscale", hp->yarn_log_mul);
        if (hp->yarn_log_mul != 0 && ms != hp->yarn_log_mul && ms != 1.0)
            return rkm_err(RKM_EUNSUPPORTED, "config.json: YaRN mscale %g differs from mscale_all_dim %g (llama.cpp "
                                             "takes them equal)", ms, (double)hp->yarn_log_mul);
    }
    return 0;
}

/* layer_types of a hybrid: entries equal to `recurrent` mark the
 * recurrent layers (no_kv: with no kv heads, as llama.cpp's LFM2 and
 * Granite GGUFs have them), entries equal to `attention` the attending
 * ones; anything else is refused. */
static int hf_hybrid_layers(const cJSON *lt, rkm_hparams *hp, const char *recurrent, const char *attention, int no_kv)
{
    int rc = hf_layer_flags(lt, hp, recurrent, attention, hp->recr_layer);
    for (int i = 0; i < hp->n_layer && !rc && no_kv; i++)
        if (hp->recr_layer[i]) hp->n_head_kv[i] = 0;
    return rc;
}

/* Gated DeltaNet in config.json (Qwen3.5, Qwen3-Next): the linear_*
 * geometry, which layers attend (layer_types, else every
 * full_attention_interval-th), the gated attention output, and Qwen3.5's
 * RoPE sections; Qwen3-Next's q, k, v and z stay in one projection as
 * published (in_proj_qkvz). */
static int hf_deltanet(const cJSON *c, rkm_hparams *hp)
{
    hp->ssm_d_conv = jint(c, "linear_conv_kernel_dim", 0);
    hp->ssm_d_state = jint(c, "linear_key_head_dim", 0);
    hp->ssm_n_group = jint(c, "linear_num_key_heads", 0);
    hp->ssm_dt_rank = jint(c, "linear_num_value_heads", 0);
    int hv = jint(c, "linear_value_head_dim", 0);
    if (hp->ssm_d_conv < 2 || hp->ssm_d_state < 1 || hp->ssm_n_group < 1 || hp->ssm_dt_rank < 1 || hv < 1)
        return rkm_err(RKM_EFORMAT, "config.json: linear_conv_kernel_dim (2 or more), linear_key_head_dim, "
                                    "linear_num_key_heads, linear_num_value_heads and linear_value_head_dim must be set");
    if (hv != hp->ssm_d_state)
        return rkm_err(RKM_EUNSUPPORTED, "config.json: linear_value_head_dim %d differs from linear_key_head_dim %d",
                       hv, hp->ssm_d_state);
    hp->ssm_d_inner = hv * hp->ssm_dt_rank;
    const cJSON *gate = cJSON_GetObjectItemCaseSensitive(c, "attn_output_gate");
    if (cJSON_IsFalse(gate)) return rkm_err(RKM_EUNSUPPORTED, "config.json: attn_output_gate false is not supported");
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(c, "layer_types");
    int rc;
    if (lt) {
        if ((rc = hf_hybrid_layers(lt, hp, "linear_attention", "full_attention", 0))) return rc;
    } else {
        int interval = jint(c, "full_attention_interval", 4);
        if (interval < 1 || interval > hp->n_layer)
            return rkm_err(RKM_EFORMAT, "config.json: full_attention_interval %d out of range (1..%d layers)", interval,
                           hp->n_layer);
        for (int i = 0; i < hp->n_layer; i++) hp->recr_layer[i] = (i + 1) % interval != 0;
    }
    hp->ssm_fused_in = hp->arch == RKM_ARCH_QWEN3NEXT;
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "rope_parameters"), "mrope_section");
    if (!ms) ms = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "rope_scaling"), "mrope_section");
    if (ms) {
        int64_t sec[4] = {0};
        if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) < 3 || cJSON_GetArraySize(ms) > 4)
            return rkm_err(RKM_EFORMAT, "config.json: mrope_section must hold 3 or 4 numbers");
        for (int i = 0; i < cJSON_GetArraySize(ms); i++) {
            const cJSON *x = cJSON_GetArrayItem(ms, i);
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 1024)
                return rkm_err(RKM_EFORMAT, "config.json: mrope_section[%d] is not a count", i);
            sec[i] = (int64_t)x->valuedouble;
        }
        return rkm_hparams_set_rope_sections(hp, sec, "config.json mrope_section");
    }
    return 0;
}

/* LFM2's config.json: the convolution's cache (conv_L_cache = its
 * kernel), which layers convolve (layer_types "conv" / "full_attention",
 * else full_attn_idxs), norm_eps, tie_embedding, and the dense FFN's
 * width as llama.cpp's converter derives it (block_auto_adjust_ff_dim:
 * 2/3 of block_ff_dim, times block_ffn_dim_multiplier, rounded up to
 * block_multiple_of). */
static int hf_lfm2(const cJSON *c, rkm_hparams *hp)
{
    hp->ssm_d_conv = jint(c, "conv_L_cache", 0);
    if (hp->ssm_d_conv < 2)
        return rkm_err(RKM_EFORMAT, "config.json: conv_L_cache %d: a convolution needs a kernel of 2 or more", hp->ssm_d_conv);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(c, "tie_embedding");
    if (cJSON_IsBool(tie)) hp->tied_output = cJSON_IsTrue(tie);
    if (hp->arch == RKM_ARCH_LFM2) {
        int ff = jint(c, "block_ff_dim", hp->n_ff);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "block_auto_adjust_ff_dim"))) {
            int mo = jint(c, "block_multiple_of", 256);
            double mul = jnum(c, "block_ffn_dim_multiplier", 1.0);
            if (mo < 1 || !(mul > 0 && mul < 100))
                return rkm_err(RKM_EFORMAT, "config.json: block_multiple_of %d / block_ffn_dim_multiplier %g out of range",
                               mo, mul);
            ff = (int)(mul * (2 * ff / 3));
            ff = mo * ((ff + mo - 1) / mo);
        }
        hp->n_ff = ff;
    }
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(c, "layer_types");
    if (lt) return hf_hybrid_layers(lt, hp, "conv", "full_attention", 1);
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(c, "full_attn_idxs");
    if (!cJSON_IsArray(idx)) return rkm_err(RKM_EFORMAT, "config.json: neither layer_types nor full_attn_idxs");
    int kv = hp->n_head_kv[0];
    for (int i = 0; i < hp->n_layer; i++) {
        hp->recr_layer[i] = 1;
        hp->n_head_kv[i] = 0;
    }
    for (const cJSON *x = idx->child; x; x = x->next) {
        if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble >= hp->n_layer)
            return rkm_err(RKM_EFORMAT, "config.json: full_attn_idxs holds a layer out of range (0..%d)", hp->n_layer - 1);
        hp->recr_layer[(int)x->valuedouble] = 0;
        hp->n_head_kv[(int)x->valuedouble] = kv;
    }
    return 0;
}

/* Granite 4.0-H's config.json (GraniteMoeHybrid): Mamba-2's geometry
 * (mamba_n_heads, mamba_d_head, mamba_d_state, mamba_n_groups,
 * mamba_d_conv, mamba_expand), layer_types "mamba" / "attention", the
 * embedding, residual, logit and attention multipliers; attention without
 * RoPE when Mamba layers are present (as llama.cpp's converter decides);
 * without routed experts the shared MLP is the dense FFN. */
static int hf_granite(const cJSON *c, rkm_hparams *hp)
{
    hp->ssm_d_conv = jint(c, "mamba_d_conv", 0);
    hp->ssm_d_state = jint(c, "mamba_d_state", 0);
    hp->ssm_n_group = jint(c, "mamba_n_groups", 1);
    hp->ssm_dt_rank = jint(c, "mamba_n_heads", 0);
    hp->ssm_d_inner = jint(c, "mamba_expand", 2) * hp->n_embd;
    int dh = jint(c, "mamba_d_head", 0);
    if (hp->ssm_d_conv < 2 || hp->ssm_d_state < 1 || hp->ssm_dt_rank < 1)
        return rkm_err(RKM_EFORMAT, "config.json: mamba_d_conv (2 or more), mamba_d_state and mamba_n_heads must be set");
    if (dh > 0 && (int64_t)dh * hp->ssm_dt_rank != hp->ssm_d_inner)
        return rkm_err(RKM_EFORMAT, "config.json: mamba_n_heads %d x mamba_d_head %d is not mamba_expand x hidden_size %d",
                       hp->ssm_dt_rank, dh, hp->ssm_d_inner);
    if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "mamba_conv_bias")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "mamba_proj_bias")))
        return rkm_err(RKM_EUNSUPPORTED, "config.json: Mamba layers need mamba_conv_bias true and mamba_proj_bias false");
    int rc = hf_hybrid_layers(cJSON_GetObjectItemCaseSensitive(c, "layer_types"), hp, "mamba", "attention", 1);
    if (rc) return rc;
    hp->embed_scale = (float)jnum(c, "embedding_multiplier", 0);
    hp->residual_scale = (float)jnum(c, "residual_multiplier", 0);
    hp->logit_scale = (float)jnum(c, "logits_scaling", 0);
    hp->attn_scale = (float)jnum(c, "attention_multiplier", 0);
    int any = 0;
    for (int i = 0; i < hp->n_layer; i++) any |= hp->recr_layer[i];
    if (any) hp->rope_dim = hp->rope_dim_swa = 0;
    if (hp->n_expert == 0) { /* the shared MLP is the dense FFN */
        hp->n_ff = hp->n_ff_shexp;
        hp->n_ff_shexp = hp->n_ff_exp = 0;
    }
    return 0;
}

static int hf_hparams(const cJSON *root, rkm_hparams *hp, const char *dir, double llama3[4])
{
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const cJSON *ar = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "architectures"), 0);
    if (!cJSON_IsString(mt) && !cJSON_IsString(ar)) return rkm_err(RKM_EFORMAT, "%s/config.json has no model_type", dir);
    const char *m = cJSON_IsString(mt) ? mt->valuestring : NULL;
    int arch = rkm_arch_from_hf(m, cJSON_IsString(ar) ? ar->valuestring : NULL, 0);
    const rkm_arch_info *a = rkm_arch_info_of(arch);
    if (!a)
        return rkm_err(RKM_EUNSUPPORTED, "model_type '%s' is not supported from safetensors (supported: %s)",
                       m ? m : ar->valuestring, rkm_arch_supported(1));
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    const cJSON *c = a->hf_text_config && cJSON_IsObject(tc) ? tc : root;
    /* the expert count decides between an arch and its MoE variant */
    int n_exp = jint(c, hk(a->experts_arch ? a->experts_arch : arch, "n_expert"), jint(c, hk(RKM_ARCH_UNKNOWN, "n_expert"), 0));
    arch = rkm_arch_from_hf(m, cJSON_IsString(ar) ? ar->valuestring : NULL, n_exp > 0);
    if (arch == RKM_ARCH_GEMMA4) return gemma4_hparams(c, hp);
    const cJSON *mlp_only = cJSON_GetObjectItemCaseSensitive(c, "mlp_only_layers");
    if (cJSON_IsArray(mlp_only) && cJSON_GetArraySize(mlp_only) > 0)
        return rkm_err(RKM_EUNSUPPORTED, "config.json: mlp_only_layers is not supported");
    if (jint(c, "decoder_sparse_step", 1) != 1) return rkm_err(RKM_EUNSUPPORTED, "config.json: decoder_sparse_step != 1 is not supported");
    int rc = hf_common(c, arch, 4096, hp);
    if (rc) return rc;
    int kv = jint(c, hk(arch, "n_head_kv"), hp->n_head);
    for (int i = 0; i < hp->n_layer; i++) hp->n_head_kv[i] = kv;
    hp->head_dim = jint(c, hk(arch, "head_dim"), hp->n_embd / hp->n_head);
    hp->head_dim_v = hp->head_dim_swa = hp->rope_dim = hp->rope_dim_swa = hp->head_dim;
    hp->n_expert = n_exp;
    hp->n_ff_exp = !n_exp ? 0 : rkm_arch_info_of(arch)->expert_width_in_ff ? hp->n_ff : jint(c, hk(arch, "n_ff_exp"), hp->n_ff);
    hp->n_ff_shexp = jint(c, hk(arch, "n_ff_shexp"), 0);
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(c, hk(arch, "expert_norm_topk"));
    if (cJSON_IsBool(nt)) hp->expert_norm_topk = cJSON_IsTrue(nt);
    hp->rope_theta = hp->rope_theta_swa = (float)jnum(c, hk(arch, "rope_theta"), 10000.0);
    if ((rc = hf_rope_scaling(c, hp, llama3))) return rc;
    if (rkm_arch_info_of(arch)->swa_period) { /* gpt-oss: layer_types, else the architecture's period */
        hp->sliding_window = jint(c, hk(arch, "sliding_window"), 0);
        if ((rc = hf_layer_types(c, hp, rkm_arch_info_of(arch)->swa_period))) return rc;
    }
    const cJSON *lim = cJSON_GetObjectItemCaseSensitive(c, "swiglu_limit");
    if (hp->act == RKM_ACT_SWIGLU_OAI && lim && !(cJSON_IsNumber(lim) && lim->valuedouble == 7.0))
        return rkm_err(RKM_EUNSUPPORTED, "config.json: swiglu_limit other than 7 is not supported");
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(c, hk(arch, "tied_output"));
    hp->tied_output = cJSON_IsTrue(tie);
    /* attention_bias: false does not remove the biases an arch always has (qwen2) */
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(c, hk(arch, "has_qkv_bias"));
    if (cJSON_IsBool(bias)) hp->has_qkv_bias = cJSON_IsTrue(bias) || hp->has_qkv_bias;
    /* GLM-4.5 and DeepSeek's fields: partial rotary, shared experts
     * counted in experts' widths, dense leading layers, sigmoid scoring with
     * groups and a routed scale, optional q/k norms */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(c, "rope_parameters");
    double prf = jnum(c, "partial_rotary_factor", cJSON_IsObject(rp) ? jnum(rp, "partial_rotary_factor", 1.0) : 1.0);
    if (!(prf > 0 && prf <= 1)) return rkm_err(RKM_EFORMAT, "config.json: partial_rotary_factor %g out of (0, 1]", prf);
    hp->rope_dim = 2 * (int)(hp->head_dim * prf / 2 + 0.5);
    int n_shared = jint(c, hk(arch, "n_shared_experts"), 0);
    if (hp->n_ff_shexp == 0 && n_shared > 0) hp->n_ff_shexp = n_shared * hp->n_ff_exp;
    hp->n_layer_dense_lead = jint(c, hk(arch, "n_layer_dense_lead"), 0);
    hp->expert_weights_scale = (float)jnum(c, hk(arch, "expert_weights_scale"), 1.0);
    hp->n_expert_group = jint(c, hk(arch, "n_expert_group"), 0);
    hp->n_group_used = jint(c, hk(arch, "n_group_used"), 0);
    if (hp->n_expert_group <= 1) hp->n_expert_group = hp->n_group_used = 0; /* one group: none */
    const cJSON *sf = cJSON_GetObjectItemCaseSensitive(c, "scoring_func");
    if (cJSON_IsString(sf)) {
        if (!strcmp(sf->valuestring, "sigmoid")) hp->expert_gating = RKM_GATING_SIGMOID;
        else if (!strcmp(sf->valuestring, "softmax")) hp->expert_gating = RKM_GATING_SOFTMAX;
        else return rkm_err(RKM_EUNSUPPORTED, "config.json: scoring_func '%s' is not supported", sf->valuestring);
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "use_qk_norm")) && hp->qk_norm == RKM_QK_NORM_NONE)
        hp->qk_norm = RKM_QK_NORM_HEAD;
    if (arch == RKM_ARCH_DEEPSEEK2) return hf_mla(c, hp);
    if (arch == RKM_ARCH_QWEN35MOE || arch == RKM_ARCH_QWEN35 || arch == RKM_ARCH_QWEN3NEXT) return hf_deltanet(c, hp);
    if (arch == RKM_ARCH_LFM2 || arch == RKM_ARCH_LFM2MOE) return hf_lfm2(c, hp);
    if (arch == RKM_ARCH_GRANITEHYBRID) return hf_granite(c, hp);
    return 0;
}

/* Appends shard st (NULL: its open failed, the message set) to s's files. */
static int add_shard(rkm_source *s, struct rkm_safetensors *st)
{
    if (!st) return RKM_EFORMAT;
    struct rkm_safetensors **ns = realloc(s->st, (size_t)(s->n_files + 1) * sizeof *ns);
    if (!ns) {
        rkm_safetensors_close(st);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    s->st = ns;
    s->st[s->n_files++] = st;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* names[n] += name (a copy); 0 or RKM_ENOMEM. */
static int add_name(char ***names, int *n, const char *name)
{
    char **v = realloc(*names, (size_t)(*n + 1) * sizeof *v);
    if (v) *names = v;
    if (!v || !(v[*n] = strdup(name))) return rkm_err(RKM_ENOMEM, "out of memory");
    (*n)++;
    return 0;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

int rkm_hf_index_shards(const char *dir, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    char *ip = rkm_path_join(dir, "model.safetensors.index.json");
    size_t len;
    char *js = ip ? rkm_read_file(ip, &len) : NULL;
    if (!js) {
        int rc = ip ? rkm_err(RKM_ENOENT, "%s: no such file", ip) : rkm_err(RKM_ENOMEM, "out of memory");
        free(ip);
        return rc;
    }
    cJSON *idx = cJSON_ParseWithLength(js, len);
    free(js);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
    int rc = cJSON_IsObject(wm) ? 0 : rkm_err(RKM_EFORMAT, "%s: no weight_map", ip);
    for (const cJSON *it = rc ? NULL : wm->child; it && !rc; it = it->next) {
        if (!cJSON_IsString(it) || !it->valuestring[0] || strchr(it->valuestring, '/')) {
            rc = rkm_err(RKM_EFORMAT, "%s: bad shard name", ip);
            break;
        }
        int dup = 0;
        for (int i = 0; i < *n && !dup; i++) dup = !strcmp((*names)[i], it->valuestring);
        if (!dup) rc = add_name(names, n, it->valuestring);
    }
    cJSON_Delete(idx);
    if (!rc && *n == 0) rc = rkm_err(RKM_EFORMAT, "%s names no shards", ip);
    free(ip);
    if (rc) {
        free_names(*names, *n);
        *names = NULL;
        *n = 0;
        return rc;
    }
    qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return 0;
}

static int list_shards(rkm_source *s, const char *dir)
{
    /* With an index, its weight_map names the shards; else every *.safetensors. */
    char **files = NULL;
    int nf = 0, rc = rkm_hf_index_shards(dir, &files, &nf);
    if (rc == RKM_ENOENT) {
        rc = 0;
        DIR *d = opendir(dir);
        if (!d) return rkm_err(RKM_EIO, "cannot list %s", dir);
        struct dirent *de;
        while ((de = readdir(d)) && !rc) {
            size_t l = strlen(de->d_name);
            if (l > 12 && !strcmp(de->d_name + l - 12, ".safetensors")) rc = add_name(&files, &nf, de->d_name);
        }
        closedir(d);
        if (!rc && nf == 0) rc = rkm_err(RKM_ENOENT, "%s has no .safetensors files", dir);
        if (!rc) qsort(files, (size_t)nf, sizeof *files, cmp_str);
    }
    for (int i = 0; i < nf && !rc; i++) {
        char *p = rkm_path_join(dir, files[i]);
        rc = p ? add_shard(s, rkm_safetensors_open(p)) : rkm_err(RKM_ENOMEM, "out of memory");
        free(p);
    }
    free_names(files, nf);
    return rc;
}

/* A global f32 vector the converter derives from config.json (a row of
 * the table with RKM_TF_HF_DERIVED): takes f. s->tensors has room for
 * one (open_hf). */
static int add_derived(rkm_source *s, int role, float *f, int n)
{
    const rkm_tensor_info *ti = rkm_arch_tensor(s->hp.arch, role);
    if (rkm_source_find(s, ti->gguf)) {
        free(f);
        return rkm_err(RKM_EFORMAT, "%s is both in the checkpoint and derived from config.json", ti->gguf);
    }
    rkm_src_tensor *t = &s->tensors[s->n_tensors];
    if (!(t->name = strdup(ti->gguf))) {
        free(f);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    s->n_tensors++;
    index_last(s);
    t->type = RKM_TYPE_F32;
    t->n_dims = 1;
    t->ne[0] = n;
    t->ne[1] = t->ne[2] = t->ne[3] = 1;
    t->nbytes = sizeof(float) * (uint64_t)n;
    t->inline_data = f;
    return t->name ? 0 : rkm_err(RKM_ENOMEM, "out of memory");
}

/* Gemma 4's per-layer attention shapes, from the tensors: head dim = size of
 * q_norm, kv heads = rows of k_proj / head dim; a layer without v_proj is
 * a full-attention layer (V is derived from K). Also the rope_freqs vector
 * GGUF carries for the partially rotated full layers: 1 for the rotated
 * pairs, 1e30 (not rotated) for the rest. */
static int gemma4_dims(rkm_source *s, double partial_rotary)
{
    rkm_hparams *hp = &s->hp;
    int derive_swa = hp->swa_layer[0] == 2;
    hp->head_dim = hp->head_dim_swa = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const rkm_src_tensor *qn = rkm_source_role(s, RKM_TENSOR_ATTN_Q_NORM, il);
        const rkm_src_tensor *k = rkm_source_role(s, RKM_TENSOR_ATTN_K, il);
        int has_v = rkm_source_role(s, RKM_TENSOR_ATTN_V, il) != NULL;
        if (!qn || !k) return rkm_err(RKM_EFORMAT, "layer %d lacks self_attn.q_norm or k_proj", il);
        int hd = (int)qn->ne[0];
        if (hd < 1 || k->ne[1] % hd) return rkm_err(RKM_EFORMAT, "layer %d: k_proj rows not a multiple of the head dim %d", il, hd);
        if (derive_swa) hp->swa_layer[il] = (uint8_t)has_v;
        hp->n_head_kv[il] = (int)(k->ne[1] / hd);
        int *dst = hp->swa_layer[il] ? &hp->head_dim_swa : &hp->head_dim;
        if (*dst && *dst != hd) return rkm_err(RKM_EFORMAT, "layer %d: head dim %d differs from other layers of its kind", il, hd);
        *dst = hd;
    }
    if (!hp->head_dim) hp->head_dim = hp->head_dim_swa;
    if (!hp->head_dim_swa) hp->head_dim_swa = hp->head_dim;
    hp->head_dim_v = hp->head_dim;
    hp->rope_dim = hp->head_dim;
    hp->rope_dim_swa = hp->head_dim_swa;
    hp->has_rope_freqs = 1;
    int n = hp->rope_dim / 2, rot = (int)(partial_rotary * n + 0.5);
    float *f = malloc(sizeof(float) * (size_t)n);
    if (!f) return rkm_err(RKM_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) f[i] = i < rot ? 1.0f : 1e30f;
    return add_derived(s, RKM_TENSOR_ROPE_FREQS, f, n);
}

/* The safetensors tensor name in any shard, or NULL; *file gets the shard. */
static const rkm_st_tensor *find_hf(const rkm_source *s, const char *name, int *file)
{
    for (int f = 0; f < s->n_files; f++) {
        const rkm_st_tensor *t = rkm_safetensors_find(s->st[f], name);
        if (t) {
            *file = f;
            return t;
        }
    }
    return NULL;
}

/* A tensor of role in layer il whose rows are assembled from HF tensor st
 * of file f (gather, from part off of it), counted in the source's bytes;
 * NULL (error set) if the name is taken or memory runs out. */
static rkm_src_tensor *gathered(rkm_source *s, int role, int il, int type, int n_dims, int64_t ne0, int64_t ne1,
                                int64_t ne2, int f, const rkm_st_tensor *st, int gather, int off)
{
    char nm[128];
    rkm_src_tensor *t = &s->tensors[s->n_tensors];
    if (!rkm_arch_tensor_name(s->hp.arch, role, il, nm, sizeof nm)) return NULL;
    if (rkm_source_find(s, nm)) {
        rkm_err(RKM_EFORMAT, "%s appears twice", nm);
        return NULL;
    }
    if (!(t->name = strdup(nm))) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    s->n_tensors++;
    index_last(s);
    t->type = type;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = 1;
    t->nbytes = rkm_type_row_bytes(type, ne0) * (uint64_t)(ne1 * ne2);
    t->file = f;
    t->handle = st;
    t->gather = gather;
    t->src_off = off;
    s->total_bytes += t->nbytes;
    return t;
}

/* gpt-oss's experts as published (transformers' GptOss with MXFP4
 * weights): per layer mlp.experts.gate_up_proj_blocks [E, 2F, H/32, 16]
 * and _scales [E, 2F, H/32] (u8: FP4 pairs, e8m0), gate rows even and up
 * rows odd; down_proj_blocks / _scales [E, H, F/32, ...]; gate_up_proj_bias
 * [E, 2F], interleaved alike. Split into GGUF's ffn_{gate,up,down}_exps
 * (MXFP4) and their biases, as llama.cpp's converter does. Returns 1 if st
 * is not one of these (the table maps it), 0 when taken, or an error. */
static int gpt_oss_expert_tensor(rkm_source *s, int f, const rkm_st_tensor *st)
{
    static const char *const sfx[] = {".mlp.experts.gate_up_proj_blocks", ".mlp.experts.down_proj_blocks",
                                      ".mlp.experts.gate_up_proj_scales", ".mlp.experts.down_proj_scales",
                                      ".mlp.experts.gate_up_proj_bias", ".mlp.experts.gate_up_proj",
                                      ".mlp.experts.down_proj"};
    int il = -1, k = -1;
    size_t n = strlen(st->name);
    for (int i = 0; i < (int)RKM_ARRAY_LEN(sfx) && k < 0; i++) {
        size_t l = strlen(sfx[i]);
        if (n > l && !strcmp(st->name + n - l, sfx[i]) && sscanf(st->name, "model.layers.%d.", &il) == 1) k = i;
    }
    if (k < 0) return 1;
    if (il < 0 || il >= s->hp.n_layer) return rkm_err(RKM_EFORMAT, "%s: layer out of range", st->name);
    if (k == 2 || k == 3) return 0; /* read with their blocks */
    if (k >= 5)
        return rkm_err(RKM_EUNSUPPORTED, "%s: gpt-oss experts are read as published (MXFP4 _blocks and _scales)", st->name);
    int E = s->hp.n_expert;
    if (k == 4) { /* [E, 2F] -> gate [F, E], up [F, E] */
        if (st->type < 0 || st->n_dims != 2 || st->ne[1] != E || st->ne[0] % 2)
            return rkm_err(RKM_EFORMAT, "%s: expected [%d, 2 x expert width] floats", st->name, E);
        for (int half = 0; half < 2; half++)
            if (!gathered(s, half ? RKM_TENSOR_FFN_UP_EXPS_BIAS : RKM_TENSOR_FFN_GATE_EXPS_BIAS, il, st->type, 2,
                          st->ne[0] / 2, E, 1, f, st, RKM_GATHER_HALF, half))
                return RKM_EFORMAT;
        return 0;
    }
    /* blocks: ggml ne [16, nb, rows, E]; scales [nb, rows, E] */
    char sn[256];
    snprintf(sn, sizeof sn, "%.*s_scales", (int)(n - strlen("_blocks")), st->name);
    int f2;
    const rkm_st_tensor *sc = find_hf(s, sn, &f2);
    if (!sc) return rkm_err(RKM_EFORMAT, "%s has no %s", st->name, sn);
    int64_t nb = st->ne[1], rows = st->ne[2];
    if (strcmp(st->dtype, "U8") || strcmp(sc->dtype, "U8") || st->n_dims != 4 || st->ne[0] != 16 || st->ne[3] != E ||
        sc->n_dims != 3 || sc->ne[0] != nb || sc->ne[1] != rows || sc->ne[2] != E)
        return rkm_err(RKM_EFORMAT, "%s / _scales: expected u8 [%d, rows, blocks, 16] and [%d, rows, blocks]", st->name, E, E);
    int gate_up = k == 0;
    if (gate_up && rows % 2) return rkm_err(RKM_EFORMAT, "%s: an odd number of gate/up rows", st->name);
    for (int part = 0; part < (gate_up ? 2 : 1); part++) {
        int role = !gate_up ? RKM_TENSOR_FFN_DOWN_EXPS : part ? RKM_TENSOR_FFN_UP_EXPS : RKM_TENSOR_FFN_GATE_EXPS;
        rkm_src_tensor *t =
            gathered(s, role, il, RKM_TYPE_MXFP4, 3, nb * 32, gate_up ? rows / 2 : rows, E, f, st, RKM_GATHER_MXFP4, part);
        if (!t) return RKM_EFORMAT;
        t->file2 = f2;
        t->handle2 = sc;
        t->src_stride = gate_up ? 2 : 1;
    }
    return 0;
}

/* DeepSeek's kv_b_proj [n_head * (nope + v), latent] split per head into
 * GGUF's attn_k_b (each head's no-RoPE key rows transposed: [latent
 * rows of nope]) and attn_v_b (each head's value rows), as llama.cpp's
 * converter does. Returns 1 if st is not a kv_b_proj, 0 when taken, or an
 * error. */
static int deepseek_kv_b(rkm_source *s, int f, const rkm_st_tensor *st)
{
    static const char sfx[] = ".self_attn.kv_b_proj.weight";
    size_t n = strlen(st->name), l = strlen(sfx);
    int il = -1;
    if (n <= l || strcmp(st->name + n - l, sfx) || sscanf(st->name, "model.layers.%d.", &il) != 1) return 1;
    const rkm_hparams *hp = &s->hp;
    const int nh = hp->n_head, nope = hp->head_dim_k_mla - hp->rope_dim, vm = hp->head_dim_v_mla, lat = hp->kv_lora_rank;
    if (il < 0 || il >= hp->n_layer) return rkm_err(RKM_EFORMAT, "%s: layer out of range", st->name);
    if (st->type < 0 || st->n_dims != 2 || st->ne[0] != lat || st->ne[1] != (int64_t)nh * (nope + vm))
        return rkm_err(RKM_EFORMAT, "%s: expected [%d heads x (%d + %d), latent %d] floats", st->name, nh, nope, vm, lat);
    if (!gathered(s, RKM_TENSOR_ATTN_K_B, il, st->type, 3, nope, lat, nh, f, st, RKM_GATHER_KV_B, 0) ||
        !gathered(s, RKM_TENSOR_ATTN_V_B, il, st->type, 3, lat, vm, nh, f, st, RKM_GATHER_KV_B, 1))
        return RKM_EFORMAT;
    return 0;
}

/* FFN tensors that hold several of GGUF's: experts kept fused as
 * transformers 5 saves them (Qwen3.5, and Qwen2/3 MoE re-saved:
 * mlp.experts.gate_up_proj [E, 2F, H], each expert's gate rows then its
 * up rows, and mlp.experts.down_proj [E, H, F]) and Granite's
 * (block_sparse_moe.input_linear / output_linear alike, shared_mlp's
 * [2F, H] / [H, F], the dense FFN when there are no routed experts),
 * split as llama.cpp's converter does. Returns 1 if st is not one of
 * these, 0 when taken, or an error. */
static int fused_ffn(rkm_source *s, int f, const rkm_st_tensor *st)
{
    static const struct {
        const char *sfx;
        int down, shared;
    } names[] = {
        {".mlp.experts.gate_up_proj", 0, 0},      {".mlp.experts.down_proj", 1, 0},
        {".block_sparse_moe.input_linear", 0, 0}, {".block_sparse_moe.output_linear", 1, 0},
        {".shared_mlp.input_linear", 0, 1},       {".shared_mlp.output_linear", 1, 1},
    };
    char base[256];
    snprintf(base, sizeof base, "%s", st->name);
    size_t n = strlen(base);
    if (n > 7 && !strcmp(base + n - 7, ".weight")) base[n -= 7] = 0;
    int k = -1, il = -1;
    for (int i = 0; i < (int)RKM_ARRAY_LEN(names) && k < 0; i++) {
        size_t l = strlen(names[i].sfx);
        if (n > l && !strcmp(base + n - l, names[i].sfx)) k = i;
    }
    if (k < 0 || (sscanf(base, "model.layers.%d.", &il) != 1 && sscanf(base, "model.language_model.layers.%d.", &il) != 1))
        return 1;
    const rkm_hparams *hp = &s->hp;
    int shared = names[k].shared, dense = shared && hp->n_expert == 0;
    int gate = dense ? RKM_TENSOR_FFN_GATE : shared ? RKM_TENSOR_FFN_GATE_SHEXP : RKM_TENSOR_FFN_GATE_EXPS;
    int up = dense ? RKM_TENSOR_FFN_UP : shared ? RKM_TENSOR_FFN_UP_SHEXP : RKM_TENSOR_FFN_UP_EXPS;
    int down = dense ? RKM_TENSOR_FFN_DOWN : shared ? RKM_TENSOR_FFN_DOWN_SHEXP : RKM_TENSOR_FFN_DOWN_EXPS;
    if (!rkm_arch_tensor(hp->arch, gate) || !rkm_arch_tensor(hp->arch, up)) return 1;
    if (il < 0 || il >= hp->n_layer) return rkm_err(RKM_EFORMAT, "%s: layer out of range", st->name);
    const int64_t E = shared ? 1 : hp->n_expert, F = dense ? hp->n_ff : shared ? hp->n_ff_shexp : hp->n_ff_exp,
                  H = hp->n_embd, nd = shared ? 2 : 3;
    const int down_k = names[k].down;
    if (st->type < 0 || st->n_dims != nd || (nd == 3 && st->ne[2] != E) || st->ne[down_k ? 1 : 0] != H ||
        st->ne[down_k ? 0 : 1] != (down_k ? F : 2 * F))
        return rkm_err(RKM_EFORMAT, "%s: expected %s%s floats", st->name, shared ? "[" : "[experts, ",
                       down_k ? "hidden, width]" : "2 x width, hidden]");
    if (down_k) return gathered(s, down, il, st->type, (int)nd, F, H, E, f, st, RKM_GATHER_NONE, 0) ? 0 : RKM_EFORMAT;
    for (int part = 0; part < 2; part++) {
        rkm_src_tensor *t = gathered(s, part ? up : gate, il, st->type, (int)nd, H, F, E, f, st, RKM_GATHER_SPLIT, part);
        if (!t) return RKM_EFORMAT;
        t->src_stride = 2;
    }
    return 0;
}

/* Tensors of a checkpoint's other parts, which the text model does not
 * use: vision and audio towers, multi-token-prediction blocks. */
static int hf_skipped(const char *name)
{
    static const char *const pre[] = {"model.visual.", "visual.", "model.vision_tower.", "model.audio_tower.",
                                      "model.embed_vision.", "model.embed_audio.", "mtp.", "model.mtp."};
    for (size_t i = 0; i < RKM_ARRAY_LEN(pre); i++)
        if (!strncmp(name, pre[i], strlen(pre[i]))) return 1;
    return 0;
}

int rkm_hf_vheads(const rkm_hparams *hp, int role, int64_t *off, int64_t *hd)
{
    int64_t hv = hp->ssm_dt_rank > 0 ? hp->ssm_d_inner / hp->ssm_dt_rank : 1;
    *off = 0;
    *hd = 1;
    switch (role) {
    case RKM_TENSOR_SSM_IN:
    case RKM_TENSOR_SSM_CONV1D: /* q and k channels, then the value heads' */
        *off = 2 * (int64_t)hp->ssm_n_group * hp->ssm_d_state;
        *hd = hv;
        return 1;
    case RKM_TENSOR_SSM_GATE_Z: *hd = hv; return 1;
    case RKM_TENSOR_SSM_BETA:
    case RKM_TENSOR_SSM_ALPHA: return 1;
    case RKM_TENSOR_SSM_DT:
    case RKM_TENSOR_SSM_A: return 2;
    case RKM_TENSOR_SSM_OUT: *hd = hv; return 2;
    default: return 0;
    }
}

int64_t rkm_hf_vhead_index(const rkm_hparams *hp, int64_t i, int64_t off, int64_t hd, int to_hf)
{
    int64_t nk = hp->ssm_n_group, per = nk > 0 ? hp->ssm_dt_rank / nk : 0;
    if (i < off || nk < 1 || per < 1 || hd < 1) return i;
    int64_t h = (i - off) / hd, w = (i - off) % hd;
    /* GGUF's head j * nk + g is HF's g * per + j (value head j of key head g) */
    int64_t m = to_hf ? (h % nk) * per + h / nk : (h % per) * nk + h / per;
    return off + m * hd + w;
}

/* The shards a pull names, opened by its opener (rkm_source_open_hf_shards). */
typedef struct {
    int n;
    const char *const *names;
    rkm_st_opener open;
    void *user;
} shard_set;

static int open_shards(rkm_source *s, const shard_set *ss)
{
    if (ss->n < 1) return rkm_err(RKM_EINVAL, "no safetensors shards");
    int rc = 0;
    for (int i = 0; i < ss->n && !rc; i++) rc = add_shard(s, ss->open(ss->user, i, ss->names[i]));
    return rc;
}

static int open_hf(rkm_source *s, const char *dir, const shard_set *ss)
{
    s->kind = 1;
    s->hf_dir = strdup(dir);
    char *cp = rkm_path_join(dir, "config.json");
    size_t n;
    char *js = cp ? rkm_read_file(cp, &n) : NULL;
    free(cp);
    if (!js) return rkm_err_prefix(RKM_ENOENT, "not a Hugging Face model directory");
    cJSON *cfg = cJSON_ParseWithLength(js, n);
    free(js);
    if (!cfg) return rkm_err(RKM_EFORMAT, "%s/config.json is not valid JSON", dir);
    double llama3[4] = {0};
    int rc = hf_hparams(cfg, &s->hp, dir, llama3);
    double partial_rotary = gemma4_partial_rotary(cfg);
    cJSON_Delete(cfg);
    if (rc) return rc;
    if ((rc = ss ? open_shards(s, ss) : list_shards(s, dir))) return rc;
    int total = 0;
    for (int f = 0; f < s->n_files; f++) total += rkm_safetensors_n_tensors(s->st[f]);
    /* + a derived rope_freqs; fused gate/up tensors split in two */
    s->tensors = calloc(2 * (size_t)total + 2, sizeof *s->tensors);
    if (!s->tensors || rkm_name_index_init(&s->ix, 2 * (size_t)total + 2)) return rkm_err(RKM_ENOMEM, "out of memory");
    for (int f = 0; f < s->n_files; f++) {
        for (int i = 0; i < rkm_safetensors_n_tensors(s->st[f]); i++) {
            const rkm_st_tensor *st = rkm_safetensors_tensor_at(s->st[f], i);
            if (strstr(st->name, "rotary_emb.inv_freq") || hf_skipped(st->name)) continue;
            if (beyond_layers(s, "model.layers.%d.", st->name)) continue;
            if (s->hp.arch == RKM_ARCH_GPT_OSS && (rc = gpt_oss_expert_tensor(s, f, st)) != 1) {
                if (rc) return rc;
                continue;
            }
            if (s->hp.arch == RKM_ARCH_DEEPSEEK2 && (rc = deepseek_kv_b(s, f, st)) != 1) {
                if (rc) return rc;
                continue;
            }
            int il, e, perm;
            const rkm_tensor_info *ti = rkm_arch_tensor_by_hf(s->hp.arch, st->name, &il, &e);
            if (!ti && (rc = fused_ffn(s, f, st)) != 1) {
                if (rc) return rc;
                continue;
            }
            char *g = rkm_hf_name_to_gguf(s->hp.arch, st->name, &s->hp, &perm);
            if (!g) return rkm_err(RKM_EUNSUPPORTED, "%s: tensor '%s' is not known for %s", rkm_safetensors_path(s->st[f]),
                                   st->name, s->hp.arch_name);
            if (st->type < 0) {
                free(g);
                return rkm_err(RKM_EUNSUPPORTED, "tensor '%s' has dtype %s (BF16, F16 or F32 expected)", st->name, st->dtype);
            }
            if (rkm_source_find(s, g)) {
                free(g);
                return rkm_err(RKM_EFORMAT, "tensor '%s' appears twice", st->name);
            }
            rkm_src_tensor *t = &s->tensors[s->n_tensors++];
            t->name = g;
            index_last(s);
            t->type = st->type;
            t->n_dims = st->n_dims;
            memcpy(t->ne, st->ne, sizeof t->ne);
            if (ti->flags & RKM_TF_HF_ROW) t->n_dims = 1; /* HF [1, n] -> GGUF [n] */
            if (t->n_dims != ti->n_dims && il < s->hp.n_layer) {
                /* the same values in GGUF's shape: conv1d [C, 1, K] -> [K, C],
                 * Mamba-2's A_log [H] -> [1, H], its norm [inner] -> [inner / groups, groups] */
                int64_t want[3] = {1, 1, 1}, have = 1, got = 1;
                int nd = rkm_hparams_tensor_ne(&s->hp, ti, il, want);
                for (int d = 0; d < t->n_dims; d++) have *= t->ne[d];
                for (int d = 0; d < nd; d++) got *= want[d];
                if (have == got) {
                    t->n_dims = nd;
                    for (int d = 0; d < 4; d++) t->ne[d] = d < nd ? want[d] : 1;
                }
            }
            t->nbytes = st->nbytes;
            t->file = f;
            t->handle = st;
            t->permute_heads = perm;
            t->role = ti->role;
            t->hf_flags = ti->flags & (RKM_TF_HF_PLUS_ONE | RKM_TF_HF_NEG_EXP | RKM_TF_HF_VHEADS);
            if (t->hf_flags & (RKM_TF_HF_PLUS_ONE | RKM_TF_HF_NEG_EXP)) { /* the values change: read as f32 */
                t->src_type = t->type;
                t->type = RKM_TYPE_F32;
                t->nbytes = st->nbytes / rkm_type_row_bytes(t->src_type, 1) * sizeof(float);
            }
            s->total_bytes += t->nbytes;
        }
    }
    if (s->hp.arch == RKM_ARCH_GEMMA4 && (rc = gemma4_dims(s, partial_rotary))) return rc;
    if (llama3[0] > 0) {
        if (!rkm_arch_tensor(s->hp.arch, RKM_TENSOR_ROPE_FREQS))
            return rkm_err(RKM_EUNSUPPORTED, "config.json: llama3 rope_scaling on %s", s->hp.arch_name);
        s->hp.has_rope_freqs = 1;
        float *f = llama3_rope_freqs(&s->hp, llama3);
        if (!f || (rc = add_derived(s, RKM_TENSOR_ROPE_FREQS, f, s->hp.rope_dim / 2))) return rc ? rc : rkm_err(RKM_ENOMEM, "out of memory");
    }
    const rkm_src_tensor *emb = rkm_source_role(s, RKM_TENSOR_TOKEN_EMBD, -1);
    if (!emb) return rkm_err(RKM_EFORMAT, "%s: no embedding tensor (model.embed_tokens.weight)", dir);
    if (emb->ne[0] != s->hp.n_embd || emb->ne[1] != s->hp.n_vocab)
        return rkm_err(RKM_EFORMAT, "model.embed_tokens.weight is [%lld, %lld], config.json says vocab %d x hidden %d",
                       (long long)emb->ne[1], (long long)emb->ne[0], s->hp.n_vocab, s->hp.n_embd);
    if (!rkm_source_role(s, RKM_TENSOR_OUTPUT, -1)) s->hp.tied_output = 1;
    if (rkm_source_role(s, RKM_TENSOR_ATTN_Q_BIAS, 0)) s->hp.has_qkv_bias = 1;
    /* chat template: tokenizer_config.json's, or chat_template.jinja */
    char *tp = rkm_path_join(dir, "tokenizer_config.json");
    char *tj = tp ? rkm_read_file(tp, &n) : NULL;
    free(tp);
    if (tj) {
        cJSON *tc = cJSON_ParseWithLength(tj, n);
        free(tj);
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(tc, "chat_template");
        if (cJSON_IsString(ct)) s->chat_template = strdup(ct->valuestring);
        else if (cJSON_IsArray(ct)) {
            for (const cJSON *it = ct->child; it; it = it->next) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
                const cJSON *tm = cJSON_GetObjectItemCaseSensitive(it, "template");
                if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default") && cJSON_IsString(tm))
                    s->chat_template = strdup(tm->valuestring);
            }
        }
        cJSON_Delete(tc);
    }
    if (!s->chat_template) {
        char *jp = rkm_path_join(dir, "chat_template.jinja");
        s->chat_template = jp ? rkm_read_file(jp, NULL) : NULL;
        free(jp);
    }
    rc = hf_sampling(dir, &s->sampling);
    if (rc) return rc;
    size_t dn = strlen(dir) + 16;
    s->desc = malloc(dn);
    if (s->desc) snprintf(s->desc, dn, "hf:%s", dir);
    return rkm_hparams_validate(&s->hp);
}

/* ------------------------------------------------ recommended sampling */

/* llama.cpp's general.sampling.* keys (as its converter writes them from
 * generation_config.json). Absent keys stay unset. */
static int gguf_sampling(const rkm_gguf *g, rkm_sampling_hint *h)
{
    static const struct {
        const char *key;
        unsigned bit;
    } keys[] = {
        {"general.sampling.temp", RKM_SAMPLING_TEMPERATURE},
        {"general.sampling.top_k", RKM_SAMPLING_TOP_K},
        {"general.sampling.top_p", RKM_SAMPLING_TOP_P},
        {"general.sampling.min_p", RKM_SAMPLING_MIN_P},
        {"general.sampling.penalty_repeat", RKM_SAMPLING_REPEAT_PENALTY},
        {"general.sampling.penalty_last_n", RKM_SAMPLING_REPEAT_LAST_N},
    };
    memset(h, 0, sizeof *h);
    for (size_t i = 0; i < RKM_ARRAY_LEN(keys); i++) {
        double d;
        int64_t v;
        int is_int = rkm_sampling_hint_is_int(keys[i].bit);
        int rc = is_int ? rkm_gguf_get_int(g, keys[i].key, &v) : rkm_gguf_get_float(g, keys[i].key, &d);
        if (rc == RKM_ENOENT) continue;
        if (rc) return rkm_err(RKM_EFORMAT, "%s is not a number", keys[i].key);
        if ((rc = rkm_sampling_hint_set(h, keys[i].bit, is_int ? (double)v : d, keys[i].key))) return rc;
    }
    return 0;
}

/* Hugging Face generation_config.json: temperature, top_k, top_p, min_p,
 * repetition_penalty; do_sample false means greedy (temperature 0).
 * Missing file: nothing set. A field of the wrong type is an error. */
static int hf_sampling(const char *dir, rkm_sampling_hint *h)
{
    static const struct {
        const char *key;
        unsigned bit;
    } keys[] = {
        {"temperature", RKM_SAMPLING_TEMPERATURE},
        {"top_k", RKM_SAMPLING_TOP_K},
        {"top_p", RKM_SAMPLING_TOP_P},
        {"min_p", RKM_SAMPLING_MIN_P},
        {"repetition_penalty", RKM_SAMPLING_REPEAT_PENALTY},
    };
    memset(h, 0, sizeof *h);
    char *p = rkm_path_join(dir, "generation_config.json");
    size_t n = 0;
    char *js = p ? rkm_read_file(p, &n) : NULL;
    free(p);
    if (!js) return 0;
    cJSON *root = cJSON_ParseWithLength(js, n);
    free(js);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return rkm_err(RKM_EFORMAT, "%s/generation_config.json is not a JSON object", dir);
    }
    int rc = 0;
    for (size_t i = 0; i < RKM_ARRAY_LEN(keys) && !rc; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, keys[i].key);
        if (!v || cJSON_IsNull(v)) continue;
        if (!cJSON_IsNumber(v)) {
            rc = rkm_err(RKM_EFORMAT, "generation_config.json: '%s' is not a number", keys[i].key);
            break;
        }
        rc = rkm_sampling_hint_set(h, keys[i].bit, v->valuedouble, "generation_config.json");
    }
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(root, "do_sample");
    if (!rc && cJSON_IsFalse(ds)) /* the authors decode greedily */
        rc = rkm_sampling_hint_set(h, RKM_SAMPLING_TEMPERATURE, 0, "generation_config.json");
    cJSON_Delete(root);
    return rc;
}

rkm_source *rkm_source_open(const char *path)
{
    rkm_source *s = calloc(1, sizeof *s);
    if (!s) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    struct stat st;
    int rc;
    if (stat(path, &st) != 0) rc = rkm_err(RKM_ENOENT, "%s: no such file or directory", path);
    else if (S_ISDIR(st.st_mode)) rc = open_hf(s, path, NULL);
    else rc = open_gguf(s, path, NULL, NULL);
    if (rc) {
        rkm_source_close(s);
        return NULL;
    }
    return s;
}

rkm_source *rkm_source_open_gguf_fill(const char *path, rkm_gguf_fill fill, void *user)
{
    rkm_source *s = calloc(1, sizeof *s);
    if (!s) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    if (open_gguf(s, path, fill, user)) {
        rkm_source_close(s);
        return NULL;
    }
    return s;
}

rkm_source *rkm_source_open_hf_shards(const char *dir, int n, const char *const *names, rkm_st_opener open, void *user)
{
    rkm_source *s = calloc(1, sizeof *s);
    if (!s) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    const shard_set ss = {n, names, open, user};
    if (open_hf(s, dir, &ss)) {
        rkm_source_close(s);
        return NULL;
    }
    return s;
}

void rkm_source_close(rkm_source *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_tensors; i++) {
        free(s->tensors[i].name);
        free(s->tensors[i].inline_data);
    }
    free(s->tensors);
    rkm_name_index_free(&s->ix);
    rkm_gguf_close(s->gguf);
    for (int i = 0; i < s->n_files; i++) rkm_safetensors_close(s->st[i]);
    free(s->st);
    free(s->hf_dir);
    free(s->desc);
    free(s->chat_template);
    free(s);
}

const rkm_src_tensor *rkm_source_find(const rkm_source *s, const char *name)
{
    int i = rkm_name_index_find(&s->ix, name, src_name, s);
    return i >= 0 ? &s->tensors[i] : NULL;
}

const rkm_src_tensor *rkm_source_role(const rkm_source *s, int role, int il)
{
    char nm[128];
    return rkm_arch_tensor_name(s->hp.arch, role, il, nm, sizeof nm) ? rkm_source_find(s, nm) : NULL;
}

/* [off, off + len) of a whole tensor of `whole` bytes, in proportion on
 * the file tensor ft. */
static rkm_file_span prop_span(int file, const rkm_st_tensor *ft, uint64_t whole, uint64_t off, uint64_t len)
{
    const unsigned __int128 a = (unsigned __int128)off * ft->nbytes / whole,
                            b = (unsigned __int128)(off + len) * ft->nbytes / whole;
    return (rkm_file_span){file, ft->offset + (uint64_t)a, (uint64_t)(b - a)};
}

int rkm_source_file_spans(const rkm_source *s, const rkm_src_tensor *t, uint64_t off, uint64_t len, rkm_file_span out[2],
                          int *exact)
{
    *exact = 1;
    if (t->inline_data || !len) return 0;
    if (s->kind == 0) {
        out[0] = (rkm_file_span){0, ((const rkm_gguf_tensor *)t->handle)->offset + off, len};
        return 1;
    }
    const rkm_st_tensor *ft = t->handle;
    if (t->gather == RKM_GATHER_NONE && !t->permute_heads && !t->hf_flags && ft->nbytes == t->nbytes) {
        out[0] = (rkm_file_span){t->file, ft->offset + off, len};
        return 1;
    }
    *exact = 0;
    const uint64_t row = rkm_type_row_bytes(t->type, t->ne[0]);
    const int64_t r0 = (int64_t)(off / row), r1 = (int64_t)((off + len + row - 1) / row);
    if (t->gather == RKM_GATHER_SPLIT && r1 > r0) { /* source rows (e * stride + off) * F + i */
        const int64_t F = t->ne[1];
        const int64_t a = ((r0 / F) * t->src_stride + t->src_off) * F + r0 % F,
                      b = (((r1 - 1) / F) * t->src_stride + t->src_off) * F + (r1 - 1) % F + 1;
        out[0] = (rkm_file_span){t->file, ft->offset + (uint64_t)a * row, (uint64_t)(b - a) * row};
        *exact = r1 - r0 <= F && r0 / F == (r1 - 1) / F && off % row == 0 && len % row == 0;
        return 1;
    }
    if (t->gather == RKM_GATHER_MXFP4 && r1 > r0) {
        /* source rows r * stride + off: blocks, then scales; the spans take
         * the stride's every row, so that consecutive ranges tile */
        const uint64_t nb = (uint64_t)(t->ne[0] / 32), a = (uint64_t)(r0 * t->src_stride),
                       b = (uint64_t)(r1 * t->src_stride);
        const rkm_st_tensor *sc = t->handle2;
        out[0] = (rkm_file_span){t->file, ft->offset + a * nb * 16, (b - a) * nb * 16};
        out[1] = (rkm_file_span){t->file2, sc->offset + a * nb, (b - a) * nb};
        return 2;
    }
    out[0] = prop_span(t->file, ft, t->nbytes, off, len);
    return out[0].len ? 1 : 0;
}

static int read_raw(const rkm_source *s, const rkm_src_tensor *t, uint64_t off, void *buf, size_t n)
{
    if (t->inline_data) {
        memcpy(buf, (const uint8_t *)t->inline_data + off, n);
        return 0;
    }
    if (s->kind == 0) return rkm_gguf_read(s->gguf, t->handle, off, buf, n);
    return rkm_safetensors_read(s->st[t->file], t->handle, off, buf, n);
}

/* Rows of a gathered tensor (rkm_gather). */
/* Rows of attn_k_b (src_off 0) or attn_v_b (1) from kv_b_proj, whose
 * head h has nope key rows then vm value rows of `lat` values: attn_k_b's
 * row h*lat + c is column c of head h's key rows, attn_v_b's row h*vm + e
 * is head h's value row e. */
static int read_kv_b(const rkm_source *s, const rkm_src_tensor *t, int64_t r0, int64_t nr, uint8_t *out)
{
    const rkm_safetensors *f = s->st[t->file];
    const rkm_hparams *hp = &s->hp;
    const int64_t nope = hp->head_dim_k_mla - hp->rope_dim, vm = hp->head_dim_v_mla, lat = hp->kv_lora_rank;
    const size_t es = rkm_type_row_bytes(t->type, 1), srow = (size_t)lat * es;
    if (t->src_off) { /* whole source rows */
        for (int64_t r = r0; r < r0 + nr; r++) {
            int64_t sr = r / vm * (nope + vm) + nope + r % vm;
            int rc = rkm_safetensors_read(f, t->handle, (uint64_t)sr * srow, out + (size_t)(r - r0) * srow, srow);
            if (rc) return rc;
        }
        return 0;
    }
    /* a head's key rows once per head, then its columns */
    uint8_t *kb = malloc((size_t)nope * srow);
    if (!kb) return rkm_err(RKM_ENOMEM, "out of memory");
    int rc = 0;
    int64_t h_read = -1;
    for (int64_t r = r0; r < r0 + nr && !rc; r++) {
        int64_t h = r / lat, c = r % lat;
        if (h != h_read) {
            rc = rkm_safetensors_read(f, t->handle, (uint64_t)(h * (nope + vm)) * srow, kb, (size_t)nope * srow);
            h_read = h;
        }
        for (int64_t j = 0; j < nope && !rc; j++)
            memcpy(out + ((size_t)(r - r0) * (size_t)nope + (size_t)j) * es, kb + (size_t)j * srow + (size_t)c * es, es);
    }
    free(kb);
    return rc;
}

static int read_gathered(const rkm_source *s, const rkm_src_tensor *t, int64_t r0, int64_t nr, void *buf)
{
    const rkm_safetensors *f = s->st[t->file];
    uint8_t *out = buf;
    if (t->gather == RKM_GATHER_HALF) {
        size_t es = rkm_type_row_bytes(t->type, 1), n = (size_t)t->ne[0];
        uint8_t *src = malloc(2 * n * es);
        if (!src) return rkm_err(RKM_ENOMEM, "out of memory");
        int rc = 0;
        for (int64_t r = r0; r < r0 + nr && !rc; r++) {
            rc = rkm_safetensors_read(f, t->handle, (uint64_t)r * 2 * n * es, src, 2 * n * es);
            for (size_t i = 0; i < n && !rc; i++) memcpy(out + ((size_t)(r - r0) * n + i) * es, src + (2 * i + (size_t)t->src_off) * es, es);
        }
        free(src);
        return rc;
    }
    if (t->gather == RKM_GATHER_KV_B) return read_kv_b(s, t, r0, nr, out);
    if (t->gather == RKM_GATHER_SPLIT) { /* expert e's row i: source row (e * stride + off) * F + i */
        size_t row = rkm_type_row_bytes(t->type, t->ne[0]);
        for (int64_t r = r0; r < r0 + nr; r++) {
            int64_t e = r / t->ne[1], i = r % t->ne[1], sr = (e * t->src_stride + t->src_off) * t->ne[1] + i;
            int rc = rkm_safetensors_read(f, t->handle, (uint64_t)sr * row, out + (size_t)(r - r0) * row, row);
            if (rc) return rc;
        }
        return 0;
    }
    /* MXFP4: HF packs value k of a 32-value block in byte k/2 (low nibble
     * first); ggml's block is the e8m0 scale, then qs[j] = value j | value
     * j+16 << 4 */
    size_t nb = (size_t)(t->ne[0] / 32);
    uint8_t *qs = malloc(nb * 17);
    if (!qs) return rkm_err(RKM_ENOMEM, "out of memory");
    uint8_t *sc = qs + nb * 16;
    int rc = 0;
    for (int64_t r = r0; r < r0 + nr && !rc; r++) {
        uint64_t sr = (uint64_t)(r * t->src_stride + t->src_off);
        rc = rkm_safetensors_read(f, t->handle, sr * nb * 16, qs, nb * 16);
        if (!rc) rc = rkm_safetensors_read(s->st[t->file2], t->handle2, sr * nb, sc, nb);
        for (size_t b = 0; b < nb && !rc; b++) {
            uint8_t *o = out + ((size_t)(r - r0) * nb + b) * 17;
            const uint8_t *q = qs + b * 16;
            o[0] = sc[b];
            for (int j = 0; j < 16; j++) {
                int lo = (q[j / 2] >> (j % 2 ? 4 : 0)) & 15, hi = (q[(j + 16) / 2] >> (j % 2 ? 4 : 0)) & 15;
                o[1 + j] = (uint8_t)(lo | hi << 4);
            }
        }
    }
    free(qs);
    return rc;
}

/* Rows of a tensor whose HF values differ from GGUF's (hf_flags): the
 * value heads reordered (rows, or the elements of each row), then w + 1
 * or -exp(A_log) computed in f32. */
static int read_transformed(const rkm_source *s, const rkm_src_tensor *t, int64_t r0, int64_t nr, uint8_t *out)
{
    int64_t off = 0, hd = 1, n0 = t->ne[0];
    int kind = t->hf_flags & RKM_TF_HF_VHEADS ? rkm_hf_vheads(&s->hp, t->role, &off, &hd) : 0;
    int values = t->hf_flags & (RKM_TF_HF_PLUS_ONE | RKM_TF_HF_NEG_EXP);
    int stype = values ? t->src_type : t->type;
    size_t es = rkm_type_row_bytes(stype, 1), oes = rkm_type_row_bytes(t->type, 1);
    uint8_t *raw = malloc((size_t)n0 * es);
    float *f = values ? malloc(sizeof(float) * (size_t)n0) : NULL;
    int rc = raw && (f || !values) ? 0 : rkm_err(RKM_ENOMEM, "out of memory");
    for (int64_t r = r0; r < r0 + nr && !rc; r++) {
        int64_t sr = kind == 1 ? rkm_hf_vhead_index(&s->hp, r, off, hd, 1) : r;
        rc = read_raw(s, t, (uint64_t)sr * (uint64_t)n0 * es, raw, (size_t)n0 * es);
        if (rc) break;
        uint8_t *o = out + (size_t)(r - r0) * (size_t)n0 * oes;
        if (values) rkm_dequantize_row(stype, raw, f, n0);
        for (int64_t i = 0; i < n0; i++) {
            int64_t si = kind == 2 ? rkm_hf_vhead_index(&s->hp, i, off, hd, 1) : i;
            if (!values) {
                memcpy(o + (size_t)i * oes, raw + (size_t)si * es, es);
                continue;
            }
            float v = t->hf_flags & RKM_TF_HF_NEG_EXP ? -expf(f[si]) : f[si] + 1.0f;
            memcpy(o + (size_t)i * oes, &v, sizeof v);
        }
    }
    free(raw);
    free(f);
    return rc;
}

int rkm_source_read_rows(const rkm_source *s, const rkm_src_tensor *t, int64_t r0, int64_t nr, void *buf)
{
    if (t->gather) return read_gathered(s, t, r0, nr, buf);
    if (t->hf_flags) return read_transformed(s, t, r0, nr, buf);
    size_t row = rkm_type_row_bytes(t->type, t->ne[0]);
    if (!t->permute_heads) return read_raw(s, t, (uint64_t)r0 * row, buf, (size_t)nr * row);
    /* GGUF row h*hd + 2i + j holds HF row h*hd + j*hd/2 + i */
    int64_t rows = (int64_t)(t->nbytes / row), hd = rows / t->permute_heads;
    if (hd % 2 || hd * t->permute_heads != rows) return rkm_err(RKM_EFORMAT, "%s: rows not divisible by heads", t->name);
    for (int64_t r = r0; r < r0 + nr; r++) {
        int64_t h = r / hd, k = r % hd, i = k / 2, j = k % 2;
        int64_t src = h * hd + j * (hd / 2) + i;
        int rc = read_raw(s, t, (uint64_t)src * row, (uint8_t *)buf + (size_t)(r - r0) * row, row);
        if (rc) return rc;
    }
    return 0;
}
