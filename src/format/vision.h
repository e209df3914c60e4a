/*
 * vision.h - the vision encoders of mmproj files (the GGUF files published
 * beside a text model, as llama.cpp's converter writes them and its mtmd
 * library reads them), described once, as data: one table per projector
 * type, each row a tensor with its GGUF name, its shape in terms of the
 * vision hyper-parameters, the layers it exists in and whether it may be
 * absent. synth writes these tables, the mmproj reader checks a file
 * against them, and the encoder (runtime) reads its weights through them.
 *
 * An mmproj file: general.architecture "clip", clip.has_vision_encoder,
 * clip.projector_type (or clip.vision.projector_type for files that also
 * hold an audio encoder), the clip.vision.* hyper-parameters (embedding
 * length, feed-forward length, block count, head count, projection dim =
 * the text model's input width, image and patch size, layer-norm epsilon,
 * image mean and std), tensors under "v." (the ViT) and "mm." (the
 * projector). Tensors of other encoders in the same file (audio: "a.",
 * "mm.a.") are not the vision encoder's and are left alone.
 *
 * Projector types:
 *   gemma4v         Gemma 4: patches 2x-1 scaled, a 2-D learned position
 *                   table (x and y rows), RMS-normed ViT blocks with q/k
 *                   norms, RoPE over each head's halves (x then y,
 *                   NEOX order, theta 100), rms-normed values, post-norms,
 *                   a per-layer output scale; an n_merge x n_merge average
 *                   pool times sqrt(n_embd), optional standardisation,
 *                   an RMS norm and the input projection.
 *   qwen3vl_merger  Qwen3-VL: two temporal patch kernels and a bias, a
 *                   learned position table resized to the grid, LayerNorm
 *                   ViT blocks with a fused qkv, multi-axis RoPE, 2x2
 *                   patch merging into a two-layer GELU MLP, and
 *                   deep-stack mergers at the flagged layers whose outputs
 *                   follow the main ones in each token's row.
 *
 * Pure data and functions of it: no state, any thread.
 */
#ifndef RKM_VISION_H
#define RKM_VISION_H

#include <stddef.h>
#include <stdint.h>

struct rkm_gguf;

enum rkm_proj {
    RKM_PROJ_UNKNOWN = 0,
    RKM_PROJ_GEMMA4V,
    RKM_PROJ_QWEN3VL,
    RKM_PROJ_COUNT
};

/* The ViT blocks' feed-forward activation, as mtmd picks it from
 * clip.use_gelu / clip.use_silu (neither: the quick GELU). */
enum rkm_vffn {
    RKM_VFFN_GELU_QUICK = 0, /* x * sigmoid(1.702 x) */
    RKM_VFFN_GELU,           /* the tanh approximation */
    RKM_VFFN_SILU
};

enum rkm_vrole {
    /* global */
    RKM_V_PATCH_EMBD = 0, /* conv kernel [p, p, 3, n_embd] */
    RKM_V_PATCH_EMBD_1,   /* qwen3vl: the second temporal frame's kernel */
    RKM_V_PATCH_BIAS,
    RKM_V_POS_EMBD,       /* gemma4v [n_embd, n_pos, 2]; qwen3vl [n_embd, n_pos] */
    RKM_V_STD_BIAS,       /* gemma4v standardisation (optional) */
    RKM_V_STD_SCALE,
    RKM_V_POST_LN_W,
    RKM_V_POST_LN_B,
    RKM_V_MM_INPUT_PROJ,  /* gemma4v [n_embd, proj_dim] */
    RKM_V_MM0_W,          /* qwen3vl merger fc1 [4 n_embd, 4 n_embd] */
    RKM_V_MM0_B,
    RKM_V_MM2_W,          /* qwen3vl merger fc2 [4 n_embd, proj_dim] */
    RKM_V_MM2_B,
    /* per layer */
    RKM_V_LN1_W,
    RKM_V_LN1_B,
    RKM_V_ATTN_Q,
    RKM_V_ATTN_K,
    RKM_V_ATTN_V,
    RKM_V_ATTN_QKV,
    RKM_V_ATTN_QKV_B,
    RKM_V_ATTN_OUT,
    RKM_V_ATTN_OUT_B,
    RKM_V_ATTN_Q_NORM,
    RKM_V_ATTN_K_NORM,
    RKM_V_ATTN_POST_NORM,
    RKM_V_LN2_W,
    RKM_V_LN2_B,
    RKM_V_FFN_GATE,
    RKM_V_FFN_UP,
    RKM_V_FFN_UP_B,
    RKM_V_FFN_DOWN,
    RKM_V_FFN_DOWN_B,
    RKM_V_FFN_POST_NORM,
    RKM_V_OUT_SCALE,      /* gemma4v layer scalar [1] */
    RKM_V_DS_NORM_W,      /* qwen3vl deep-stack merger of the layer */
    RKM_V_DS_NORM_B,
    RKM_V_DS_FC1_W,
    RKM_V_DS_FC1_B,
    RKM_V_DS_FC2_W,
    RKM_V_DS_FC2_B,
    RKM_V_ROLE_COUNT
};

/* A tensor dimension in terms of the hyper-parameters. */
enum rkm_vdim {
    RKM_VD_ONE = 0,
    RKM_VD_EMBD,      /* n_embd */
    RKM_VD_EMBD_X3,   /* 3 n_embd (fused qkv) */
    RKM_VD_MERGED,    /* n_embd * n_merge^2 (merged patches) */
    RKM_VD_FF,        /* n_ff */
    RKM_VD_Q,         /* n_head * head_dim */
    RKM_VD_KV,        /* n_head_kv * head_dim */
    RKM_VD_HEAD_DIM,
    RKM_VD_PROJ,      /* proj_dim: the text model's input width */
    RKM_VD_PATCH,     /* patch_size */
    RKM_VD_RGB,       /* 3 */
    RKM_VD_POS,       /* n_pos: rows of the position table */
    RKM_VD_TWO,
    RKM_VD_COUNT
};

enum rkm_vtensor_flags {
    RKM_VT_LAYER = 1,     /* one per ViT block ("%d" in the name) */
    RKM_VT_OPTIONAL = 2,  /* may be absent */
    RKM_VT_DEEPSTACK = 4, /* only in the deep-stack layers */
    RKM_VT_F32 = 8        /* always F32 (norms, biases, position tables, scalars) */
};

/* How synth draws a tensor. */
enum rkm_vinit {
    RKM_VI_MAT = 0, /* N(0, 0.7 / sqrt(ne[0])) */
    RKM_VI_NORM,    /* 1 + N(0, 0.1) */
    RKM_VI_BIAS,    /* N(0, 0.02) */
    RKM_VI_EMBED,   /* N(0, 0.5) */
    RKM_VI_SCALE    /* 1 + N(0, 0.1) (layer scalars, standardisation scales) */
};

typedef struct rkm_vtensor_info {
    int role;           /* enum rkm_vrole */
    const char *gguf;   /* name template ("v.blk.%d.attn_q.weight") */
    uint8_t n_dims;
    uint8_t ne[4];      /* enum rkm_vdim, ne[0] innermost */
    uint8_t flags;      /* RKM_VT_* */
    uint8_t init;       /* enum rkm_vinit */
    float gain;         /* synth's scale of the drawn values (0: 1) */
} rkm_vtensor_info;

typedef struct rkm_proj_info {
    int proj;              /* enum rkm_proj */
    const char *name;      /* clip.projector_type */
    int n_merge;           /* default merge / pooling factor per side */
    const char *merge_key; /* the key that overrides it */
    float rope_theta;
    int min_tokens, max_tokens; /* mtmd's default bounds on the image tokens */
    const char *img_beg, *img_end; /* the text around an image's rows in a prompt
                                    * (special tokens, parsed as such) */
    int bidirectional;     /* the text model attends an image's rows both ways */
    const rkm_vtensor_info *tensors; /* global rows first, then per layer */
    int n_tensors;
} rkm_proj_info;

#define RKM_VISION_MAX_LAYERS 128

/* What an mmproj file's keys and tensors say. */
typedef struct rkm_vision_hparams {
    int proj;          /* enum rkm_proj */
    int n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim;
    int proj_dim;      /* output width: the text model's input width */
    int image_size, patch_size;
    int n_merge;       /* pooling (gemma4v) or spatial merge (qwen3vl) per side */
    int n_pos;         /* rows of the position table */
    float eps;
    float mean[3], std[3];
    int ffn;           /* enum rkm_vffn */
    float rope_theta;
    int min_pixels, max_pixels; /* the image area bounds (tokens x patch area) */
    int n_deepstack;
    uint8_t deepstack[RKM_VISION_MAX_LAYERS]; /* qwen3vl: layer il feeds a merger */
} rkm_vision_hparams;

const rkm_proj_info *rkm_proj_info_of(int proj);
int rkm_proj_from_name(const char *name);   /* 0 if unknown */
const char *rkm_proj_supported(void);       /* "gemma4v, qwen3vl_merger" */

/* The row of role in proj's table, NULL if it has none. */
const rkm_vtensor_info *rkm_proj_tensor(int proj, int role);
/* Does the tensor exist in layer il (-1: global) of these parameters? */
int rkm_vision_tensor_expected(const rkm_vision_hparams *vp, const rkm_vtensor_info *ti, int il);
/* Its shape (ne[0] innermost, unused 1); returns n_dims. */
int rkm_vision_tensor_ne(const rkm_vision_hparams *vp, const rkm_vtensor_info *ti, int64_t ne[4]);
/* Its GGUF name in layer il, into buf; 0 or RKM_EINVAL. */
int rkm_vision_tensor_name(const rkm_vtensor_info *ti, int il, char *buf, size_t cap);

/* Reads an mmproj file's vision hyper-parameters (as mtmd does, its
 * defaults included) and checks every tensor of the projector's table:
 * present unless optional, the shape the parameters give, a type the
 * encoder reads (F32, F16, BF16, Q8_0, Q4_0 and the other ggml types for
 * matrices; F32 where the table says so). 0, or an RKM_E* code naming the
 * key or tensor. */
int rkm_vision_read(const struct rkm_gguf *g, rkm_vision_hparams *vp);

/* Bounds the image tokens of one image as mtmd's image_min_tokens /
 * image_max_tokens do (<= 0: the projector's default): min_pixels and
 * max_pixels become the counts times (patch x merge)^2. 0, or RKM_EINVAL
 * for a minimum above the maximum or a maximum too large. */
int rkm_vision_token_limits(rkm_vision_hparams *vp, int min_tokens, int max_tokens);
/* The most image tokens one image has under the current bounds. */
int rkm_vision_max_tokens(const rkm_vision_hparams *vp);

/* The size a w x h image is resized to for the projector (*tw x *th, a
 * multiple of patch x merge on each side, between min_pixels and
 * max_pixels, the aspect ratio kept as mtmd keeps it); returns its
 * number of image tokens. */
int rkm_vision_fit(const rkm_vision_hparams *vp, int w, int h, int *tw, int *th);

#endif
