/*
 * vision.c - the projector tables of vision.h and the mmproj reader that
 * checks a file against them.
 */
#include "format/vision.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "util/common.h"

#define L RKM_VT_LAYER
#define O RKM_VT_OPTIONAL
#define D RKM_VT_DEEPSTACK
#define F RKM_VT_F32
#define T1(a) 1, {a, 0, 0, 0}
#define T2(a, b) 2, {a, b, 0, 0}
#define T3(a, b, c) 3, {a, b, c, 0}
#define T4(a, b, c, d) 4, {a, b, c, d}

/* Gemma 4 (llama.cpp's gemma4v graph). Its linears are HF's
 * Gemma4ClippableLinear: a matrix NAME.weight may have the scalars
 * NAME.input_min, .input_max, .output_min, .output_max beside it (not
 * rows of this table: optional, one value each, read by the encoder). */
static const rkm_vtensor_info gemma4v_tensors[] = {
    {RKM_V_PATCH_EMBD, "v.patch_embd.weight", T4(RKM_VD_PATCH, RKM_VD_PATCH, RKM_VD_RGB, RKM_VD_EMBD), 0, RKM_VI_MAT, 0},
    {RKM_V_POS_EMBD, "v.position_embd.weight", T3(RKM_VD_EMBD, RKM_VD_POS, RKM_VD_TWO), F, RKM_VI_EMBED, 0},
    {RKM_V_STD_BIAS, "v.std_bias", T1(RKM_VD_EMBD), O | F, RKM_VI_BIAS, 0},
    {RKM_V_STD_SCALE, "v.std_scale", T1(RKM_VD_EMBD), O | F, RKM_VI_SCALE, 0},
    {RKM_V_MM_INPUT_PROJ, "mm.input_projection.weight", T2(RKM_VD_EMBD, RKM_VD_PROJ), 0, RKM_VI_MAT, 0},
    {RKM_V_LN1_W, "v.blk.%d.ln1.weight", T1(RKM_VD_EMBD), L | F, RKM_VI_NORM, 0},
    {RKM_V_ATTN_Q, "v.blk.%d.attn_q.weight", T2(RKM_VD_EMBD, RKM_VD_Q), L, RKM_VI_MAT, 0},
    {RKM_V_ATTN_K, "v.blk.%d.attn_k.weight", T2(RKM_VD_EMBD, RKM_VD_KV), L, RKM_VI_MAT, 0},
    {RKM_V_ATTN_V, "v.blk.%d.attn_v.weight", T2(RKM_VD_EMBD, RKM_VD_KV), L, RKM_VI_MAT, 0},
    /* the attention is unscaled (q.k, not q.k / sqrt(hd)): trained q/k
     * norms are small, and synth's are too (0.35^2 sqrt(72): logits of
     * order 1), else the softmax is an argmax and the tower chaotic */
    {RKM_V_ATTN_Q_NORM, "v.blk.%d.attn_q_norm.weight", T1(RKM_VD_HEAD_DIM), L | F, RKM_VI_NORM, 0.35f},
    {RKM_V_ATTN_K_NORM, "v.blk.%d.attn_k_norm.weight", T1(RKM_VD_HEAD_DIM), L | F, RKM_VI_NORM, 0.35f},
    {RKM_V_ATTN_OUT, "v.blk.%d.attn_out.weight", T2(RKM_VD_Q, RKM_VD_EMBD), L, RKM_VI_MAT, 0},
    {RKM_V_ATTN_POST_NORM, "v.blk.%d.attn_post_norm.weight", T1(RKM_VD_EMBD), L | F, RKM_VI_NORM, 0},
    {RKM_V_LN2_W, "v.blk.%d.ln2.weight", T1(RKM_VD_EMBD), L | F, RKM_VI_NORM, 0},
    {RKM_V_FFN_GATE, "v.blk.%d.ffn_gate.weight", T2(RKM_VD_EMBD, RKM_VD_FF), L, RKM_VI_MAT, 0},
    {RKM_V_FFN_UP, "v.blk.%d.ffn_up.weight", T2(RKM_VD_EMBD, RKM_VD_FF), L, RKM_VI_MAT, 0},
    {RKM_V_FFN_DOWN, "v.blk.%d.ffn_down.weight", T2(RKM_VD_FF, RKM_VD_EMBD), L, RKM_VI_MAT, 0},
    {RKM_V_FFN_POST_NORM, "v.blk.%d.ffn_post_norm.weight", T1(RKM_VD_EMBD), L | F, RKM_VI_NORM, 0},
    {RKM_V_OUT_SCALE, "v.blk.%d.out_scale.weight", T1(RKM_VD_ONE), L | O | F, RKM_VI_SCALE, 0},
};

/* Qwen3-VL (llama.cpp's Qwen3VLVisionModel). */
static const rkm_vtensor_info qwen3vl_tensors[] = {
    {RKM_V_PATCH_EMBD, "v.patch_embd.weight", T4(RKM_VD_PATCH, RKM_VD_PATCH, RKM_VD_RGB, RKM_VD_EMBD), 0, RKM_VI_MAT, 0},
    {RKM_V_PATCH_EMBD_1, "v.patch_embd.weight.1", T4(RKM_VD_PATCH, RKM_VD_PATCH, RKM_VD_RGB, RKM_VD_EMBD), 0, RKM_VI_MAT, 0},
    {RKM_V_PATCH_BIAS, "v.patch_embd.bias", T1(RKM_VD_EMBD), F, RKM_VI_BIAS, 0},
    {RKM_V_POS_EMBD, "v.position_embd.weight", T2(RKM_VD_EMBD, RKM_VD_POS), F, RKM_VI_EMBED, 0},
    {RKM_V_POST_LN_W, "v.post_ln.weight", T1(RKM_VD_EMBD), F, RKM_VI_NORM, 0},
    {RKM_V_POST_LN_B, "v.post_ln.bias", T1(RKM_VD_EMBD), F, RKM_VI_BIAS, 0},
    {RKM_V_MM0_W, "mm.0.weight", T2(RKM_VD_MERGED, RKM_VD_MERGED), 0, RKM_VI_MAT, 0},
    {RKM_V_MM0_B, "mm.0.bias", T1(RKM_VD_MERGED), F, RKM_VI_BIAS, 0},
    {RKM_V_MM2_W, "mm.2.weight", T2(RKM_VD_MERGED, RKM_VD_PROJ), 0, RKM_VI_MAT, 0},
    {RKM_V_MM2_B, "mm.2.bias", T1(RKM_VD_PROJ), F, RKM_VI_BIAS, 0},
    {RKM_V_LN1_W, "v.blk.%d.ln1.weight", T1(RKM_VD_EMBD), L | F, RKM_VI_NORM, 0},
    {RKM_V_LN1_B, "v.blk.%d.ln1.bias", T1(RKM_VD_EMBD), L | F, RKM_VI_BIAS, 0},
    {RKM_V_ATTN_QKV, "v.blk.%d.attn_qkv.weight", T2(RKM_VD_EMBD, RKM_VD_EMBD_X3), L, RKM_VI_MAT, 0},
    {RKM_V_ATTN_QKV_B, "v.blk.%d.attn_qkv.bias", T1(RKM_VD_EMBD_X3), L | F, RKM_VI_BIAS, 0},
    {RKM_V_ATTN_OUT, "v.blk.%d.attn_out.weight", T2(RKM_VD_EMBD, RKM_VD_EMBD), L, RKM_VI_MAT, 0},
    {RKM_V_ATTN_OUT_B, "v.blk.%d.attn_out.bias", T1(RKM_VD_EMBD), L | F, RKM_VI_BIAS, 0},
    {RKM_V_LN2_W, "v.blk.%d.ln2.weight", T1(RKM_VD_EMBD), L | F, RKM_VI_NORM, 0},
    {RKM_V_LN2_B, "v.blk.%d.ln2.bias", T1(RKM_VD_EMBD), L | F, RKM_VI_BIAS, 0},
    {RKM_V_FFN_UP, "v.blk.%d.ffn_up.weight", T2(RKM_VD_EMBD, RKM_VD_FF), L, RKM_VI_MAT, 0},
    {RKM_V_FFN_UP_B, "v.blk.%d.ffn_up.bias", T1(RKM_VD_FF), L | F, RKM_VI_BIAS, 0},
    {RKM_V_FFN_DOWN, "v.blk.%d.ffn_down.weight", T2(RKM_VD_FF, RKM_VD_EMBD), L, RKM_VI_MAT, 0},
    {RKM_V_FFN_DOWN_B, "v.blk.%d.ffn_down.bias", T1(RKM_VD_EMBD), L | F, RKM_VI_BIAS, 0},
    {RKM_V_DS_NORM_W, "v.deepstack.%d.norm.weight", T1(RKM_VD_MERGED), L | D | F, RKM_VI_NORM, 0},
    {RKM_V_DS_NORM_B, "v.deepstack.%d.norm.bias", T1(RKM_VD_MERGED), L | D | F, RKM_VI_BIAS, 0},
    {RKM_V_DS_FC1_W, "v.deepstack.%d.fc1.weight", T2(RKM_VD_MERGED, RKM_VD_MERGED), L | D, RKM_VI_MAT, 0},
    {RKM_V_DS_FC1_B, "v.deepstack.%d.fc1.bias", T1(RKM_VD_MERGED), L | D | F, RKM_VI_BIAS, 0},
    {RKM_V_DS_FC2_W, "v.deepstack.%d.fc2.weight", T2(RKM_VD_MERGED, RKM_VD_PROJ), L | D, RKM_VI_MAT, 0},
    {RKM_V_DS_FC2_B, "v.deepstack.%d.fc2.bias", T1(RKM_VD_PROJ), L | D | F, RKM_VI_BIAS, 0},
};

#undef L
#undef O
#undef D
#undef F

static const rkm_proj_info projs[] = {
    /* mtmd: rope theta 100, pooling 3 unless projector.scale_factor, 40..280
     * tokens, between <|image> and <image|>, attended both ways */
    {RKM_PROJ_GEMMA4V, "gemma4v", 3, "clip.vision.projector.scale_factor", 100.0f, 40, 280, "<|image>", "<image|>", 1,
     gemma4v_tensors, (int)RKM_ARRAY_LEN(gemma4v_tensors)},
    /* mtmd: merge 2 unless spatial_merge_size, 8..4096 tokens, between
     * <|vision_start|> and <|vision_end|>, causal */
    {RKM_PROJ_QWEN3VL, "qwen3vl_merger", 2, "clip.vision.spatial_merge_size", 10000.0f, 8, 4096, "<|vision_start|>",
     "<|vision_end|>", 0, qwen3vl_tensors, (int)RKM_ARRAY_LEN(qwen3vl_tensors)},
};

const rkm_proj_info *rkm_proj_info_of(int proj)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(projs); i++)
        if (projs[i].proj == proj) return &projs[i];
    return NULL;
}

int rkm_proj_from_name(const char *name)
{
    for (size_t i = 0; name && i < RKM_ARRAY_LEN(projs); i++)
        if (!strcmp(projs[i].name, name)) return projs[i].proj;
    return RKM_PROJ_UNKNOWN;
}

const char *rkm_proj_supported(void) { return "gemma4v, qwen3vl_merger"; }

const rkm_vtensor_info *rkm_proj_tensor(int proj, int role)
{
    const rkm_proj_info *p = rkm_proj_info_of(proj);
    for (int i = 0; p && i < p->n_tensors; i++)
        if (p->tensors[i].role == role) return &p->tensors[i];
    return NULL;
}

int rkm_vision_tensor_expected(const rkm_vision_hparams *vp, const rkm_vtensor_info *ti, int il)
{
    if (!(ti->flags & RKM_VT_LAYER)) return il < 0;
    if (il < 0 || il >= vp->n_layer) return 0;
    if (ti->flags & RKM_VT_DEEPSTACK) return il < RKM_VISION_MAX_LAYERS && vp->deepstack[il];
    return 1;
}

static int64_t dim(const rkm_vision_hparams *vp, int d)
{
    switch (d) {
    case RKM_VD_EMBD: return vp->n_embd;
    case RKM_VD_EMBD_X3: return 3 * (int64_t)vp->n_embd;
    case RKM_VD_MERGED: return (int64_t)vp->n_embd * vp->n_merge * vp->n_merge;
    case RKM_VD_FF: return vp->n_ff;
    case RKM_VD_Q: return (int64_t)vp->n_head * vp->head_dim;
    case RKM_VD_KV: return (int64_t)vp->n_head_kv * vp->head_dim;
    case RKM_VD_HEAD_DIM: return vp->head_dim;
    case RKM_VD_PROJ: return vp->proj_dim;
    case RKM_VD_PATCH: return vp->patch_size;
    case RKM_VD_RGB: return 3;
    case RKM_VD_POS: return vp->n_pos;
    case RKM_VD_TWO: return 2;
    default: return 1;
    }
}

int rkm_vision_tensor_ne(const rkm_vision_hparams *vp, const rkm_vtensor_info *ti, int64_t ne[4])
{
    for (int i = 0; i < 4; i++) ne[i] = i < ti->n_dims ? dim(vp, ti->ne[i]) : 1;
    return ti->n_dims;
}

int rkm_vision_tensor_name(const rkm_vtensor_info *ti, int il, char *buf, size_t cap)
{
    int n = (ti->flags & RKM_VT_LAYER) ? snprintf(buf, cap, ti->gguf, il) : snprintf(buf, cap, "%s", ti->gguf);
    return n < 0 || (size_t)n >= cap ? rkm_err(RKM_EINVAL, "tensor name '%s' too long", ti->gguf) : 0;
}

/* ------------------------------------------------------------ reader */

static int get_u32(const rkm_gguf *g, const char *key, int required, int lo, int hi, int *out)
{
    int64_t v;
    int rc = rkm_gguf_get_int(g, key, &v);
    if (rc == RKM_ENOENT && !required) return 0;
    if (rc == RKM_ENOENT) return rkm_err(RKM_EFORMAT, "mmproj: key %s missing", key);
    if (rc) return rkm_err(RKM_EFORMAT, "mmproj: key %s is not an integer", key);
    if (v < lo || v > hi) return rkm_err(RKM_EFORMAT, "mmproj: %s = %lld, outside %d..%d", key, (long long)v, lo, hi);
    *out = (int)v;
    return 0;
}

static int get_f32_arr3(const rkm_gguf *g, const char *key, float out[3])
{
    int i = rkm_gguf_find(g, key);
    if (i < 0) return rkm_err(RKM_EFORMAT, "mmproj: key %s missing", key);
    int at = rkm_gguf_arr_type(g, i);
    if (rkm_gguf_vtype(g, i) != RKM_GGUF_ARRAY || (at != RKM_GGUF_FLOAT32 && at != RKM_GGUF_FLOAT64) ||
        rkm_gguf_arr_n(g, i) < 3)
        return rkm_err(RKM_EFORMAT, "mmproj: %s must be an array of at least 3 floats", key);
    for (int c = 0; c < 3; c++) {
        out[c] = (float)rkm_gguf_arr_float(g, i, (uint64_t)c);
        if (!isfinite(out[c])) return rkm_err(RKM_EFORMAT, "mmproj: %s[%d] is not finite", key, c);
    }
    return 0;
}

static int check_tensor(const rkm_gguf *g, const rkm_vision_hparams *vp, const rkm_vtensor_info *ti, int il)
{
    char name[96];
    int rc = rkm_vision_tensor_name(ti, il, name, sizeof name);
    if (rc) return rc;
    const rkm_gguf_tensor *t = rkm_gguf_tensor_find(g, name);
    if (!t) return (ti->flags & RKM_VT_OPTIONAL) ? 0 : rkm_err(RKM_EFORMAT, "mmproj: tensor %s missing", name);
    int64_t ne[4];
    rkm_vision_tensor_ne(vp, ti, ne);
    for (int d = 0; d < 4; d++)
        if (t->ne[d] != ne[d])
            return rkm_err(RKM_EFORMAT, "mmproj: tensor %s has shape [%lld, %lld, %lld, %lld], the parameters give "
                           "[%lld, %lld, %lld, %lld]", name, (long long)t->ne[0], (long long)t->ne[1],
                           (long long)t->ne[2], (long long)t->ne[3], (long long)ne[0], (long long)ne[1],
                           (long long)ne[2], (long long)ne[3]);
    if (!rkm_type_readable(t->type))
        return rkm_err(RKM_EUNSUPPORTED, "mmproj: tensor %s has an unsupported type %d", name, t->type);
    if ((ti->flags & RKM_VT_F32) && t->type != RKM_TYPE_F32 && t->type != RKM_TYPE_F16)
        return rkm_err(RKM_EFORMAT, "mmproj: tensor %s is %s; F32 or F16 expected", name, rkm_type_name(t->type));
    return 0;
}

int rkm_vision_read(const rkm_gguf *g, rkm_vision_hparams *vp)
{
    memset(vp, 0, sizeof *vp);
    int has = 0, rc;
    if (rkm_gguf_get_bool(g, "clip.has_vision_encoder", &has) || !has)
        return rkm_err(RKM_EFORMAT, "mmproj: no vision encoder (clip.has_vision_encoder)");
    const char *pt = rkm_gguf_get_str(g, "clip.projector_type");
    if (!pt) pt = rkm_gguf_get_str(g, "clip.vision.projector_type");
    if (!pt) return rkm_err(RKM_EFORMAT, "mmproj: no clip.projector_type");
    vp->proj = rkm_proj_from_name(pt);
    const rkm_proj_info *p = rkm_proj_info_of(vp->proj);
    if (!p) return rkm_err(RKM_EUNSUPPORTED, "mmproj: projector type '%s' is not supported (supported: %s)", pt,
                           rkm_proj_supported());
    if ((rc = get_u32(g, "clip.vision.embedding_length", 1, 1, 1 << 16, &vp->n_embd)) ||
        (rc = get_u32(g, "clip.vision.feed_forward_length", 1, 1, 1 << 18, &vp->n_ff)) ||
        (rc = get_u32(g, "clip.vision.block_count", 1, 1, RKM_VISION_MAX_LAYERS, &vp->n_layer)) ||
        (rc = get_u32(g, "clip.vision.attention.head_count", 1, 1, 1024, &vp->n_head)) ||
        (rc = get_u32(g, "clip.vision.projection_dim", 1, 1, 1 << 18, &vp->proj_dim)) ||
        (rc = get_u32(g, "clip.vision.image_size", 1, 0, 65536, &vp->image_size)) ||
        (rc = get_u32(g, "clip.vision.patch_size", 1, 1, 65535, &vp->patch_size)))
        return rc;
    vp->n_head_kv = vp->n_head;
    vp->head_dim = vp->n_embd / vp->n_head;
    if ((rc = get_u32(g, "clip.vision.attention.head_count_kv", 0, 1, 1024, &vp->n_head_kv)) ||
        (rc = get_u32(g, "clip.vision.attention.head_dim", 0, 1, 4096, &vp->head_dim)))
        return rc;
    if (vp->head_dim % 4 || vp->n_head % vp->n_head_kv)
        return rkm_err(RKM_EFORMAT, "mmproj: head size %d (a multiple of 4 wanted) or %d heads over %d kv heads",
                       vp->head_dim, vp->n_head, vp->n_head_kv);
    if (vp->proj == RKM_PROJ_QWEN3VL && vp->n_head * vp->head_dim != vp->n_embd)
        return rkm_err(RKM_EFORMAT, "mmproj: qwen3vl heads (%d x %d) must make the width %d", vp->n_head,
                       vp->head_dim, vp->n_embd);
    double eps;
    if (rkm_gguf_get_float(g, "clip.vision.attention.layer_norm_epsilon", &eps))
        return rkm_err(RKM_EFORMAT, "mmproj: key clip.vision.attention.layer_norm_epsilon missing");
    if (!(eps > 0 && eps < 1)) return rkm_err(RKM_EFORMAT, "mmproj: layer_norm_epsilon %g outside (0, 1)", eps);
    vp->eps = (float)eps;
    if ((rc = get_f32_arr3(g, "clip.vision.image_mean", vp->mean)) ||
        (rc = get_f32_arr3(g, "clip.vision.image_std", vp->std)))
        return rc;
    for (int c = 0; c < 3; c++)
        if (vp->std[c] == 0) return rkm_err(RKM_EFORMAT, "mmproj: image_std[%d] is 0", c);
    int gelu = 0, silu = 0;
    rkm_gguf_get_bool(g, "clip.use_gelu", &gelu);
    rkm_gguf_get_bool(g, "clip.use_silu", &silu);
    if (gelu && silu) return rkm_err(RKM_EFORMAT, "mmproj: both clip.use_gelu and clip.use_silu are set");
    vp->ffn = gelu ? RKM_VFFN_GELU : silu ? RKM_VFFN_SILU : RKM_VFFN_GELU_QUICK;
    vp->n_merge = p->n_merge;
    if ((rc = get_u32(g, p->merge_key, 0, 1, 16, &vp->n_merge))) return rc;
    vp->rope_theta = p->rope_theta;
    const int64_t area = (int64_t)vp->patch_size * vp->patch_size * vp->n_merge * vp->n_merge;
    if (area * p->max_tokens > INT32_MAX) return rkm_err(RKM_EFORMAT, "mmproj: patch size %d too large", vp->patch_size);
    vp->min_pixels = (int)(area * p->min_tokens);
    vp->max_pixels = (int)(area * p->max_tokens);
    /* the position table's rows come from the tensor itself */
    const rkm_vtensor_info *pos = rkm_proj_tensor(vp->proj, RKM_V_POS_EMBD);
    const rkm_gguf_tensor *tp = rkm_gguf_tensor_find(g, pos->gguf);
    if (!tp) return rkm_err(RKM_EFORMAT, "mmproj: tensor %s missing", pos->gguf);
    vp->n_pos = (int)RKM_MIN(tp->ne[1], (int64_t)1 << 30);
    if (vp->n_pos < 1) return rkm_err(RKM_EFORMAT, "mmproj: empty position table");
    if (vp->proj == RKM_PROJ_QWEN3VL) {
        int side = (int)sqrt((double)vp->n_pos);
        if (side * side != vp->n_pos || side < 2)
            return rkm_err(RKM_EFORMAT, "mmproj: qwen3vl position table of %d rows is not a square grid", vp->n_pos);
        if (vp->n_merge != 2)
            return rkm_err(RKM_EUNSUPPORTED, "mmproj: qwen3vl spatial merge %d (2 is supported)", vp->n_merge);
    }
    /* deep-stack layers: as clip.vision.is_deepstack_layers flags them
     * (mtmd then wants their mergers), else those whose merger tensors
     * are there */
    const rkm_vtensor_info *ds = rkm_proj_tensor(vp->proj, RKM_V_DS_FC1_W);
    const int di = rkm_gguf_find(g, "clip.vision.is_deepstack_layers");
    if (ds && di >= 0 && (rkm_gguf_vtype(g, di) != RKM_GGUF_ARRAY || rkm_gguf_arr_type(g, di) != RKM_GGUF_BOOL ||
                          rkm_gguf_arr_n(g, di) != (uint64_t)vp->n_layer))
        return rkm_err(RKM_EFORMAT, "mmproj: clip.vision.is_deepstack_layers must hold one bool per block (%d)",
                       vp->n_layer);
    for (int il = 0; ds && il < vp->n_layer; il++) {
        char name[96];
        if ((rc = rkm_vision_tensor_name(ds, il, name, sizeof name))) return rc;
        vp->deepstack[il] = di >= 0 ? rkm_gguf_arr_int(g, di, (uint64_t)il) != 0 : rkm_gguf_tensor_find(g, name) != NULL;
        vp->n_deepstack += vp->deepstack[il];
    }
    for (int il = -1; il < vp->n_layer; il++)
        for (int i = 0; i < p->n_tensors; i++)
            if (rkm_vision_tensor_expected(vp, &p->tensors[i], il) && (rc = check_tensor(g, vp, &p->tensors[i], il)))
                return rc;
    return 0;
}

/* mtmd's calc_size_preserved_ratio with bounds (transformers' smart
 * resize), in its float arithmetic: each side rounded to the alignment,
 * then scaled down to fit max_pixels (floored) or up to reach min_pixels
 * (ceiled), the aspect ratio kept. */
int rkm_vision_token_limits(rkm_vision_hparams *vp, int min_tokens, int max_tokens)
{
    const rkm_proj_info *p = rkm_proj_info_of(vp->proj);
    if (!p) return rkm_err(RKM_EINVAL, "unknown projector type");
    const int lo = min_tokens > 0 ? min_tokens : p->min_tokens, hi = max_tokens > 0 ? max_tokens : p->max_tokens;
    if (lo > hi)
        return rkm_err(RKM_EINVAL, "image tokens: a minimum of %d is above the maximum of %d", lo, hi);
    const int64_t area = (int64_t)vp->patch_size * vp->patch_size * vp->n_merge * vp->n_merge;
    if (area * hi > INT32_MAX) return rkm_err(RKM_EINVAL, "image tokens: a maximum of %d is too large", hi);
    vp->min_pixels = (int)(area * lo);
    vp->max_pixels = (int)(area * hi);
    return 0;
}

int rkm_vision_max_tokens(const rkm_vision_hparams *vp)
{
    const int64_t area = (int64_t)vp->patch_size * vp->patch_size * vp->n_merge * vp->n_merge;
    return (int)(vp->max_pixels / area);
}

int rkm_vision_fit(const rkm_vision_hparams *vp, int w, int h, int *tw, int *th)
{
    const int f = vp->patch_size * vp->n_merge;
    const float ff = (float)f;
    int hb = RKM_MAX(f, (int)roundf((float)h / ff) * f);
    int wb = RKM_MAX(f, (int)roundf((float)w / ff) * f);
    if ((int64_t)hb * wb > vp->max_pixels) {
        const float beta = sqrtf((float)((int64_t)h * w) / (float)vp->max_pixels);
        hb = RKM_MAX(f, (int)floorf((float)h / beta / ff) * f);
        wb = RKM_MAX(f, (int)floorf((float)w / beta / ff) * f);
    } else if ((int64_t)hb * wb < vp->min_pixels) {
        const float beta = sqrtf((float)vp->min_pixels / (float)((int64_t)h * w));
        hb = (int)ceilf((float)h * beta / ff) * f;
        wb = (int)ceilf((float)w * beta / ff) * f;
    }
    *tw = wb;
    *th = hb;
    return (wb / f) * (hb / f);
}
