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

/* A_ALL: every architecture but gemma4 (whose names differ throughout). */
enum { A_ALL = 0, A_MIXTRAL = 1, A_NOT_MIXTRAL = 2, A_GEMMA4 = 3 };
typedef struct {
    const char *gguf; /* %d = layer, second %d = expert */
    const char *hf;
    int only;
} name_map;

static const name_map names[] = {
    {"token_embd.weight", "model.embed_tokens.weight", A_ALL},
    {"output_norm.weight", "model.norm.weight", A_ALL},
    {"output.weight", "lm_head.weight", A_ALL},
    {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight", A_ALL},
    {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight", A_ALL},
    {"blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight", A_ALL},
    {"blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight", A_ALL},
    {"blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight", A_ALL},
    {"blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight", A_ALL},
    {"blk.%d.attn_q.bias", "model.layers.%d.self_attn.q_proj.bias", A_ALL},
    {"blk.%d.attn_k.bias", "model.layers.%d.self_attn.k_proj.bias", A_ALL},
    {"blk.%d.attn_v.bias", "model.layers.%d.self_attn.v_proj.bias", A_ALL},
    {"blk.%d.attn_q_norm.weight", "model.layers.%d.self_attn.q_norm.weight", A_ALL},
    {"blk.%d.attn_k_norm.weight", "model.layers.%d.self_attn.k_norm.weight", A_ALL},
    {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight", A_ALL},
    {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight", A_ALL},
    {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight", A_ALL},
    {"blk.%d.ffn_gate_inp.weight", "model.layers.%d.mlp.gate.weight", A_NOT_MIXTRAL},
    {"blk.%d.ffn_gate.%d.weight", "model.layers.%d.mlp.experts.%d.gate_proj.weight", A_NOT_MIXTRAL},
    {"blk.%d.ffn_up.%d.weight", "model.layers.%d.mlp.experts.%d.up_proj.weight", A_NOT_MIXTRAL},
    {"blk.%d.ffn_down.%d.weight", "model.layers.%d.mlp.experts.%d.down_proj.weight", A_NOT_MIXTRAL},
    {"blk.%d.ffn_gate_inp_shexp.weight", "model.layers.%d.mlp.shared_expert_gate.weight", A_NOT_MIXTRAL},
    {"blk.%d.ffn_gate_shexp.weight", "model.layers.%d.mlp.shared_expert.gate_proj.weight", A_NOT_MIXTRAL},
    {"blk.%d.ffn_up_shexp.weight", "model.layers.%d.mlp.shared_expert.up_proj.weight", A_NOT_MIXTRAL},
    {"blk.%d.ffn_down_shexp.weight", "model.layers.%d.mlp.shared_expert.down_proj.weight", A_NOT_MIXTRAL},
    {"blk.%d.ffn_gate_inp.weight", "model.layers.%d.block_sparse_moe.gate.weight", A_MIXTRAL},
    {"blk.%d.ffn_gate.%d.weight", "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", A_MIXTRAL},
    {"blk.%d.ffn_up.%d.weight", "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", A_MIXTRAL},
    {"blk.%d.ffn_down.%d.weight", "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", A_MIXTRAL},
    /* Gemma 4 (transformers' Gemma4 text model; "model.layers." is read as
     * "model.language_model.layers."). Experts stay fused: experts.gate_up_proj
     * is [E, 2F, H] with each expert's gate rows before its up rows, exactly
     * ffn_gate_up_exps. Where two names are listed the first is written. */
    {"token_embd.weight", "model.language_model.embed_tokens.weight", A_GEMMA4},
    {"output_norm.weight", "model.language_model.norm.weight", A_GEMMA4},
    {"blk.%d.attn_norm.weight", "model.language_model.layers.%d.input_layernorm.weight", A_GEMMA4},
    {"blk.%d.post_attention_norm.weight", "model.language_model.layers.%d.post_attention_layernorm.weight", A_GEMMA4},
    {"blk.%d.ffn_norm.weight", "model.language_model.layers.%d.pre_feedforward_layernorm.weight", A_GEMMA4},
    {"blk.%d.post_ffw_norm_1.weight", "model.language_model.layers.%d.post_feedforward_layernorm_1.weight", A_GEMMA4},
    {"blk.%d.pre_ffw_norm_2.weight", "model.language_model.layers.%d.pre_feedforward_layernorm_2.weight", A_GEMMA4},
    {"blk.%d.pre_ffw_norm_2.weight", "model.language_model.layers.%d.mlp.pre_feedforward_layernorm_2.weight", A_GEMMA4},
    {"blk.%d.post_ffw_norm_2.weight", "model.language_model.layers.%d.post_feedforward_layernorm_2.weight", A_GEMMA4},
    {"blk.%d.post_ffw_norm.weight", "model.language_model.layers.%d.post_feedforward_layernorm.weight", A_GEMMA4},
    {"blk.%d.attn_q.weight", "model.language_model.layers.%d.self_attn.q_proj.weight", A_GEMMA4},
    {"blk.%d.attn_k.weight", "model.language_model.layers.%d.self_attn.k_proj.weight", A_GEMMA4},
    {"blk.%d.attn_v.weight", "model.language_model.layers.%d.self_attn.v_proj.weight", A_GEMMA4},
    {"blk.%d.attn_output.weight", "model.language_model.layers.%d.self_attn.o_proj.weight", A_GEMMA4},
    {"blk.%d.attn_q_norm.weight", "model.language_model.layers.%d.self_attn.q_norm.weight", A_GEMMA4},
    {"blk.%d.attn_k_norm.weight", "model.language_model.layers.%d.self_attn.k_norm.weight", A_GEMMA4},
    {"blk.%d.ffn_gate.weight", "model.language_model.layers.%d.mlp.gate_proj.weight", A_GEMMA4},
    {"blk.%d.ffn_up.weight", "model.language_model.layers.%d.mlp.up_proj.weight", A_GEMMA4},
    {"blk.%d.ffn_down.weight", "model.language_model.layers.%d.mlp.down_proj.weight", A_GEMMA4},
    {"blk.%d.ffn_gate_inp.weight", "model.language_model.layers.%d.router.proj.weight", A_GEMMA4},
    {"blk.%d.ffn_gate_inp.weight", "model.language_model.layers.%d.mlp.router.proj.weight", A_GEMMA4},
    {"blk.%d.ffn_gate_inp.scale", "model.language_model.layers.%d.router.scale", A_GEMMA4},
    {"blk.%d.ffn_gate_inp.scale", "model.language_model.layers.%d.mlp.router.scale", A_GEMMA4},
    {"blk.%d.ffn_down_exps.scale", "model.language_model.layers.%d.router.per_expert_scale", A_GEMMA4},
    {"blk.%d.ffn_down_exps.scale", "model.language_model.layers.%d.mlp.router.per_expert_scale", A_GEMMA4},
    {"blk.%d.ffn_gate_up_exps.weight", "model.language_model.layers.%d.experts.gate_up_proj", A_GEMMA4},
    {"blk.%d.ffn_gate_up_exps.weight", "model.language_model.layers.%d.mlp.experts.gate_up_proj", A_GEMMA4},
    {"blk.%d.ffn_down_exps.weight", "model.language_model.layers.%d.experts.down_proj", A_GEMMA4},
    {"blk.%d.ffn_down_exps.weight", "model.language_model.layers.%d.mlp.experts.down_proj", A_GEMMA4},
    {"blk.%d.layer_output_scale.weight", "model.language_model.layers.%d.layer_scalar", A_GEMMA4},
};

/* Matches s against pat (literal text and %d), collecting up to 2 ints. */
static int match(const char *pat, const char *s, int *v, int *nv)
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

static int arch_ok(int only, int arch)
{
    if ((only == A_GEMMA4) != (arch == RKM_ARCH_GEMMA4)) return 0;
    return only == A_ALL || only == A_GEMMA4 || (only == A_MIXTRAL) == (arch == RKM_ARCH_MIXTRAL);
}

static char *fill(const char *pat, const int *v, int nv)
{
    char buf[256];
    if (nv == 0) snprintf(buf, sizeof buf, "%s", pat);
    else if (nv == 1) snprintf(buf, sizeof buf, pat, v[0]);
    else snprintf(buf, sizeof buf, pat, v[0], v[1]);
    return strdup(buf);
}

char *rkm_hf_name_to_gguf(int arch, const char *hf, const rkm_hparams *hp, int *permute)
{
    int v[2], nv;
    char norm[256];
    *permute = 0;
    if (arch == RKM_ARCH_GEMMA4 && !strncmp(hf, "model.", 6) && strncmp(hf, "model.language_model.", 21)) {
        snprintf(norm, sizeof norm, "model.language_model.%s", hf + 6);
        hf = norm;
    }
    for (size_t i = 0; i < RKM_ARRAY_LEN(names); i++) {
        if (!arch_ok(names[i].only, arch) || !match(names[i].hf, hf, v, &nv)) continue;
        char *g = fill(names[i].gguf, v, nv);
        if (g && (arch == RKM_ARCH_LLAMA || arch == RKM_ARCH_MIXTRAL) && nv == 1) {
            if (strstr(g, ".attn_q.weight")) *permute = hp->n_head;
            else if (strstr(g, ".attn_k.weight")) *permute = hp->n_head_kv[v[0] < hp->n_layer ? v[0] : 0];
        }
        return g;
    }
    return NULL;
}

char *rkm_gguf_name_to_hf(int arch, const char *gguf_name, int expert)
{
    int v[2], nv;
    char split[160];
    /* fused expert tensors map to the per-expert names */
    static const char *fused[] = {"gate", "up", "down"};
    for (int p = 0; p < 3 && arch != RKM_ARCH_GEMMA4; p++) {
        char pat[64];
        snprintf(pat, sizeof pat, "blk.%%d.ffn_%s_exps.weight", fused[p]);
        if (match(pat, gguf_name, v, &nv)) {
            snprintf(split, sizeof split, "blk.%d.ffn_%s.%d.weight", v[0], fused[p], expert);
            gguf_name = split;
            break;
        }
    }
    for (size_t i = 0; i < RKM_ARRAY_LEN(names); i++) {
        if (!arch_ok(names[i].only, arch) || !match(names[i].gguf, gguf_name, v, &nv)) continue;
        return fill(names[i].hf, v, nv);
    }
    return NULL;
}

/* ------------------------------------------------------------- GGUF */

static int open_gguf(rkm_source *s, const char *path)
{
    s->kind = 0;
    s->gguf = rkm_gguf_open(path);
    if (!s->gguf) return RKM_EFORMAT;
    int rc = rkm_hparams_from_gguf(s->gguf, &s->hp);
    if (rc) return rkm_err_prefix(rc, "%s", path);
    int n = rkm_gguf_n_tensors(s->gguf);
    s->tensors = calloc((size_t)n + 1, sizeof *s->tensors);
    if (!s->tensors) return rkm_err(RKM_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const rkm_gguf_tensor *gt = rkm_gguf_tensor_at(s->gguf, i);
        rkm_src_tensor *t = &s->tensors[s->n_tensors++];
        t->name = strdup(gt->name);
        t->type = gt->type;
        t->n_dims = gt->n_dims;
        memcpy(t->ne, gt->ne, sizeof t->ne);
        t->nbytes = gt->nbytes;
        t->handle = gt;
        s->total_bytes += gt->nbytes;
        if (!t->name) return rkm_err(RKM_ENOMEM, "out of memory");
    }
    const char *ct = rkm_gguf_get_str(s->gguf, "tokenizer.chat_template");
    if (ct) s->chat_template = strdup(ct);
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

/* Gemma 4's config: the text model's fields (nested in text_config for the
 * multimodal checkpoint). Head dims and kv heads differ between sliding and
 * full layers; they are read from the tensors afterwards (gemma4_dims). */
static int gemma4_hparams(const cJSON *root, rkm_hparams *hp)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    const cJSON *c = cJSON_IsObject(tc) ? tc : root;
    rkm_hparams_init(hp, RKM_ARCH_GEMMA4);
    hp->n_layer = jint(c, "num_hidden_layers", 0);
    hp->n_embd = jint(c, "hidden_size", 0);
    hp->n_head = jint(c, "num_attention_heads", 0);
    if (hp->n_layer < 1 || hp->n_layer > RKM_MAX_LAYERS || hp->n_head < 1 || hp->n_embd < 1)
        return rkm_err(RKM_EFORMAT, "config.json: bad num_hidden_layers/hidden_size/num_attention_heads");
    hp->n_vocab = jint(c, "vocab_size", 0);
    hp->n_ctx_train = jint(c, "max_position_embeddings", 8192);
    hp->n_ff = jint(c, "intermediate_size", 0);
    hp->n_expert = jint(c, "num_experts", 0);
    hp->n_expert_used = jint(c, "top_k_experts", jint(c, "num_experts_per_tok", 0));
    hp->n_ff_exp = jint(c, "moe_intermediate_size", jint(c, "expert_intermediate_size", 0));
    hp->rms_eps = (float)jnum(c, "rms_norm_eps", 1e-6);
    hp->sliding_window = jint(c, "sliding_window", 0);
    hp->final_softcap = (float)jnum(c, "final_logit_softcapping", 0);
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

static int hf_hparams(const cJSON *c, rkm_hparams *hp, const char *dir)
{
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c, "model_type");
    if (!cJSON_IsString(mt)) return rkm_err(RKM_EFORMAT, "%s/config.json has no model_type", dir);
    const char *m = mt->valuestring;
    int n_exp = jint(c, "num_local_experts", jint(c, "num_experts", 0));
    int arch = !strcmp(m, "llama") ? (n_exp ? RKM_ARCH_MIXTRAL : RKM_ARCH_LLAMA)
             : !strcmp(m, "mixtral") ? RKM_ARCH_MIXTRAL
             : !strcmp(m, "qwen2") ? RKM_ARCH_QWEN2
             : !strcmp(m, "qwen3") ? RKM_ARCH_QWEN3
             : !strcmp(m, "qwen2_moe") ? RKM_ARCH_QWEN2MOE
             : !strcmp(m, "qwen3_moe") ? RKM_ARCH_QWEN3MOE
             : !strcmp(m, "olmoe") ? RKM_ARCH_OLMOE
             : (!strcmp(m, "gemma4") || !strcmp(m, "gemma4_text")) ? RKM_ARCH_GEMMA4
             : RKM_ARCH_UNKNOWN;
    if (!arch)
        return rkm_err(RKM_EUNSUPPORTED,
                       "model_type '%s' is not supported from safetensors (supported: llama, mixtral, qwen2, qwen3, "
                       "qwen2_moe, qwen3_moe, olmoe, gemma4)", m);
    if (arch == RKM_ARCH_GEMMA4) return gemma4_hparams(c, hp);
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) return rkm_err(RKM_EUNSUPPORTED, "config.json: rope_scaling is not supported yet");
    const cJSON *mlp_only = cJSON_GetObjectItemCaseSensitive(c, "mlp_only_layers");
    if (cJSON_IsArray(mlp_only) && cJSON_GetArraySize(mlp_only) > 0)
        return rkm_err(RKM_EUNSUPPORTED, "config.json: mlp_only_layers is not supported");
    if (jint(c, "decoder_sparse_step", 1) != 1) return rkm_err(RKM_EUNSUPPORTED, "config.json: decoder_sparse_step != 1 is not supported");
    rkm_hparams_init(hp, arch);
    hp->n_layer = jint(c, "num_hidden_layers", 0);
    hp->n_embd = jint(c, "hidden_size", 0);
    hp->n_head = jint(c, "num_attention_heads", 0);
    if (hp->n_layer < 1 || hp->n_layer > RKM_MAX_LAYERS || hp->n_head < 1 || hp->n_embd < 1)
        return rkm_err(RKM_EFORMAT, "config.json: bad num_hidden_layers/hidden_size/num_attention_heads");
    int kv = jint(c, "num_key_value_heads", hp->n_head);
    for (int i = 0; i < hp->n_layer; i++) hp->n_head_kv[i] = kv;
    hp->head_dim = jint(c, "head_dim", hp->n_embd / hp->n_head);
    hp->head_dim_v = hp->head_dim_swa = hp->rope_dim = hp->rope_dim_swa = hp->head_dim;
    hp->n_vocab = jint(c, "vocab_size", 0);
    hp->n_ctx_train = jint(c, "max_position_embeddings", 4096);
    hp->n_ff = jint(c, "intermediate_size", 0);
    hp->n_expert = n_exp;
    hp->n_expert_used = jint(c, "num_experts_per_tok", 0);
    hp->n_ff_exp = !n_exp ? 0 : arch == RKM_ARCH_MIXTRAL ? hp->n_ff : jint(c, "moe_intermediate_size", hp->n_ff);
    hp->n_ff_shexp = jint(c, "shared_expert_intermediate_size", 0);
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(c, "norm_topk_prob");
    if (cJSON_IsBool(nt)) hp->expert_norm_topk = cJSON_IsTrue(nt);
    hp->rms_eps = (float)jnum(c, "rms_norm_eps", 1e-6);
    hp->rope_theta = hp->rope_theta_swa = (float)jnum(c, "rope_theta", 10000.0);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(c, "tie_word_embeddings");
    hp->tied_output = cJSON_IsTrue(tie);
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(c, "attention_bias");
    if (cJSON_IsBool(bias)) hp->has_qkv_bias = cJSON_IsTrue(bias) || arch == RKM_ARCH_QWEN2 || arch == RKM_ARCH_QWEN2MOE;
    return 0;
}

static int add_shard(rkm_source *s, const char *path)
{
    struct rkm_safetensors **ns = realloc(s->st, (size_t)(s->n_files + 1) * sizeof *ns);
    if (!ns) return rkm_err(RKM_ENOMEM, "out of memory");
    s->st = ns;
    s->st[s->n_files] = rkm_safetensors_open(path);
    if (!s->st[s->n_files]) return RKM_EFORMAT;
    s->n_files++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int list_shards(rkm_source *s, const char *dir)
{
    /* With an index, its weight_map names the shards; else every *.safetensors. */
    char *ip = rkm_path_join(dir, "model.safetensors.index.json");
    size_t n;
    char *js = ip ? rkm_read_file(ip, &n) : NULL;
    char **files = NULL;
    int nf = 0, rc = 0;
    if (js) {
        cJSON *idx = cJSON_ParseWithLength(js, n);
        free(js);
        const cJSON *wm = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
        if (!cJSON_IsObject(wm)) {
            cJSON_Delete(idx);
            rc = rkm_err(RKM_EFORMAT, "%s: no weight_map", ip);
            free(ip);
            return rc;
        }
        for (const cJSON *it = wm->child; it; it = it->next) {
            if (!cJSON_IsString(it) || strchr(it->valuestring, '/')) {
                rc = rkm_err(RKM_EFORMAT, "model.safetensors.index.json: bad shard name");
                break;
            }
            int dup = 0;
            for (int i = 0; i < nf && !dup; i++) dup = !strcmp(files[i], it->valuestring);
            if (dup) continue;
            char **nfiles = realloc(files, (size_t)(nf + 1) * sizeof *files);
            if (!nfiles) { rc = rkm_err(RKM_ENOMEM, "out of memory"); break; }
            files = nfiles;
            files[nf++] = strdup(it->valuestring);
        }
        cJSON_Delete(idx);
    } else {
        DIR *d = opendir(dir);
        if (!d) {
            free(ip);
            return rkm_err(RKM_EIO, "cannot list %s", dir);
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            size_t l = strlen(de->d_name);
            if (l > 12 && !strcmp(de->d_name + l - 12, ".safetensors")) {
                char **nfiles = realloc(files, (size_t)(nf + 1) * sizeof *files);
                if (!nfiles) { rc = rkm_err(RKM_ENOMEM, "out of memory"); break; }
                files = nfiles;
                files[nf++] = strdup(de->d_name);
            }
        }
        closedir(d);
    }
    free(ip);
    if (!rc && nf == 0) rc = rkm_err(RKM_ENOENT, "%s has no .safetensors files", dir);
    if (!rc) qsort(files, (size_t)nf, sizeof *files, cmp_str);
    for (int i = 0; i < nf; i++) {
        if (!rc) {
            char *p = rkm_path_join(dir, files[i]);
            rc = p ? add_shard(s, p) : rkm_err(RKM_ENOMEM, "out of memory");
            free(p);
        }
        free(files[i]);
    }
    free(files);
    return rc;
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
        char nm[96];
        snprintf(nm, sizeof nm, "blk.%d.attn_q_norm.weight", il);
        const rkm_src_tensor *qn = rkm_source_find(s, nm);
        snprintf(nm, sizeof nm, "blk.%d.attn_k.weight", il);
        const rkm_src_tensor *k = rkm_source_find(s, nm);
        snprintf(nm, sizeof nm, "blk.%d.attn_v.weight", il);
        int has_v = rkm_source_find(s, nm) != NULL;
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
    rkm_src_tensor *t = &s->tensors[s->n_tensors++];
    t->name = strdup("rope_freqs.weight");
    t->type = RKM_TYPE_F32;
    t->n_dims = 1;
    t->ne[0] = n;
    t->ne[1] = t->ne[2] = t->ne[3] = 1;
    t->nbytes = sizeof(float) * (uint64_t)n;
    t->inline_data = f;
    return t->name ? 0 : rkm_err(RKM_ENOMEM, "out of memory");
}

static int open_hf(rkm_source *s, const char *dir)
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
    int rc = hf_hparams(cfg, &s->hp, dir);
    double partial_rotary = gemma4_partial_rotary(cfg);
    cJSON_Delete(cfg);
    if (rc) return rc;
    if ((rc = list_shards(s, dir))) return rc;
    int total = 0;
    for (int f = 0; f < s->n_files; f++) total += rkm_safetensors_n_tensors(s->st[f]);
    s->tensors = calloc((size_t)total + 2, sizeof *s->tensors); /* + a derived rope_freqs */
    if (!s->tensors) return rkm_err(RKM_ENOMEM, "out of memory");
    for (int f = 0; f < s->n_files; f++) {
        for (int i = 0; i < rkm_safetensors_n_tensors(s->st[f]); i++) {
            const rkm_st_tensor *st = rkm_safetensors_tensor_at(s->st[f], i);
            if (strstr(st->name, "rotary_emb.inv_freq")) continue;
            int perm;
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
            t->type = st->type;
            t->n_dims = st->n_dims;
            memcpy(t->ne, st->ne, sizeof t->ne);
            if (strstr(g, "ffn_gate_inp_shexp")) t->n_dims = 1; /* HF [1, n_embd] -> GGUF [n_embd] */
            t->nbytes = st->nbytes;
            t->file = f;
            t->handle = st;
            t->permute_heads = perm;
            s->total_bytes += st->nbytes;
        }
    }
    if (s->hp.arch == RKM_ARCH_GEMMA4 && (rc = gemma4_dims(s, partial_rotary))) return rc;
    const rkm_src_tensor *emb = rkm_source_find(s, "token_embd.weight");
    if (!emb) return rkm_err(RKM_EFORMAT, "%s: no embedding tensor (model.embed_tokens.weight)", dir);
    if (emb->ne[0] != s->hp.n_embd || emb->ne[1] != s->hp.n_vocab)
        return rkm_err(RKM_EFORMAT, "model.embed_tokens.weight is [%lld, %lld], config.json says vocab %d x hidden %d",
                       (long long)emb->ne[1], (long long)emb->ne[0], s->hp.n_vocab, s->hp.n_embd);
    if (!rkm_source_find(s, "output.weight")) s->hp.tied_output = 1;
    if (rkm_source_find(s, "blk.0.attn_q.bias")) s->hp.has_qkv_bias = 1;
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
    size_t dn = strlen(dir) + 16;
    s->desc = malloc(dn);
    if (s->desc) snprintf(s->desc, dn, "hf:%s", dir);
    return rkm_hparams_validate(&s->hp);
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
    else if (S_ISDIR(st.st_mode)) rc = open_hf(s, path);
    else rc = open_gguf(s, path);
    if (rc) {
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
    for (int i = 0; i < s->n_tensors; i++)
        if (!strcmp(s->tensors[i].name, name)) return &s->tensors[i];
    return NULL;
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

int rkm_source_read_rows(const rkm_source *s, const rkm_src_tensor *t, int64_t r0, int64_t nr, void *buf)
{
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
