/*
 * model.h - internals of the runtime shared by model.c, forward.c,
 * attention.c, linear.c, ffn.c, moe.c and session.c: the weight views of a loaded model
 * (config / weights), and the per-session state (KV cache, scratch).
 *
 * A model is immutable after rkm_model_open except for three things that
 * every forward pass uses and that are guarded by model->lock: the thread
 * pool, the expert cache and the expert-cache statistics. A forward call
 * (one chunk) holds the lock from start to end, so sessions on different
 * threads serialise at chunk granularity.
 */
#ifndef RKM_RUNTIME_MODEL_H
#define RKM_RUNTIME_MODEL_H

#include <pthread.h>
#include <stdatomic.h>

#include "format/model_dir.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "runtime/budget.h"
#include "runtime/expert_cache.h"
#include "runtime/sampler.h"
#include "util/common.h"

struct rkm_tokenizer;

/* Largest head dim (stack buffers in attention.c); Gemma 4's global 512. */
#define RKM_MAX_HEAD_DIM 1024
/* Most routed experts per layer (stack arrays in moe.c). */
#define RKM_MAX_EXPERTS 1024

/* A matrix view: n_out rows of n_in values of type `type` (ggml ne = [n_in, n_out]). */
typedef struct rkm_mat {
    int type;
    int64_t n_in, n_out;
    const void *data; /* NULL: absent */
    const void *npu;  /* the same matrix as rknn_i8 for the NPU's prefill
                         matmuls (model.c, docs/NPU.md), or NULL */
    int heads;        /* > 1: a stack of this many per-head matrices of
                         n_out / heads rows each (rkm_mat_head) */
} rkm_mat;

/* Head h of a stack of per-head matrices, as a matrix of its own. */
static inline rkm_mat rkm_mat_head(const rkm_mat *w, int h)
{
    rkm_mat r = *w;
    r.n_out = w->n_out / w->heads;
    r.heads = 1;
    r.npu = NULL;
    r.data = (const char *)w->data + rkm_type_row_bytes(w->type, w->n_in) * (size_t)r.n_out * (size_t)h;
    return r;
}

/* RoPE of one layer, as ggml's rope_ext computes it (attention.c):
 * theta_i = pos * theta^(-2i/dim) / freqs[i], scaled and mixed by YaRN. */
#define RKM_ROPE_MAX_PAIRS 512
#define RKM_MPOS 5 /* a row's multi-axis position (4) and the next text position */

typedef struct rkm_rope {
    int dim;                       /* rotated dims (<= head dim), 0: none */
    int neox;                      /* pairs (i, i + dim/2), else (2i, 2i+1) */
    float theta;                   /* frequency base */
    const float *freqs;            /* per pair divisor or NULL */
    float freq_scale;              /* 1 / the scaling factor (1: none) */
    float ext_factor;              /* YaRN's extrapolation mix (0: none) */
    float attn_factor;             /* YaRN's attention factor as llama.cpp's context sets it */
    float mscale;                  /* cos and sin are multiplied by this */
    float corr[2];                 /* YaRN's ramp: the pairs between extrapolate partly */
    int multi;                     /* multi-axis (hparams rope_sec_*): pair i turns by axis[i] */
    uint8_t axis[RKM_ROPE_MAX_PAIRS]; /* 0 time, 1 height, 2 width, 3 extra */
} rkm_rope;

typedef struct rkm_layer {
    /* attention */
    const float *attn_norm;        /* (n_embd) */
    rkm_mat wq;                    /* (n_embd -> n_head*hd_k) */
    rkm_mat wk;                    /* (n_embd -> n_kv*hd_k) */
    rkm_mat wv;                    /* (n_embd -> n_kv*hd_v), absent when V = K */
    rkm_mat wo;                    /* (n_head*hd_v -> n_embd); MLA: (n_head*head_dim_v_mla -> n_embd) */
    /* multi-head latent attention (deepseek2): wq or the q LoRA pair gives
     * n_head heads of head_dim_k_mla (no-RoPE part, then rope_dim) */
    rkm_mat wq_a, wq_b;            /* (n_embd -> q_lora), (q_lora -> n_head*head_dim_k_mla) */
    const float *q_a_norm;         /* (q_lora) */
    rkm_mat wkv_a;                 /* (n_embd -> kv_lora + rope_dim): latent, shared RoPE key */
    const float *kv_a_norm;        /* (kv_lora) */
    rkm_mat wk_b, wv_b;            /* per head (heads n_head): (nope -> kv_lora), (kv_lora -> v_mla) */
    int mla;
    const float *bq, *bk, *bv, *bo; /* biases or NULL */
    const float *sinks;            /* gpt-oss (n_head): a logit beside each softmax's scores */
    const float *q_norm, *k_norm;  /* (hd_k) per head or (n_head*hd_k) full */
    const float *post_attn_norm;   /* gemma4 (n_embd) */
    /* feed-forward */
    const float *ffn_norm;         /* (n_embd) */
    rkm_mat ffn_gate, ffn_up, ffn_down; /* dense FFN (dense archs, gemma4 MLP) */
    const float *post_ffw_norm_1, *pre_ffw_norm_2, *post_ffw_norm_2, *post_ffw_norm; /* gemma4 */
    rkm_mat router;                /* (n_embd -> n_expert), f32 usually */
    const float *router_b;         /* gpt-oss (n_expert) */
    const float *exp_probs_b;      /* selection bias of sigmoid gating (n_expert), or NULL */
    const float *exp_gate_b, *exp_up_b; /* gpt-oss per-expert biases (n_ff_exp x n_expert) */
    const float *exp_down_b;       /* (n_embd x n_expert) */
    const float *router_scale;     /* gemma4 (n_embd) */
    const float *expert_scale;     /* gemma4 (n_expert) */
    float out_scale;               /* gemma4 layer_output_scale, else 1 */
    rkm_mat sh_gate, sh_up, sh_down; /* shared expert (qwen2moe) */
    rkm_mat sh_gate_inp;           /* (n_embd -> 1) */
    const rkm_expert_layer *el;    /* routed experts or NULL */
    /* Gated DeltaNet (recurrent layers, recurrent.c) */
    rkm_mat ssm_in;                /* (n_embd -> conv channels: q, k, v) */
    rkm_mat ssm_z;                 /* (n_embd -> inner): the output gate */
    rkm_mat ssm_beta, ssm_alpha;   /* (n_embd -> value heads) */
    rkm_mat ssm_out;               /* (inner -> n_embd) */
    rkm_mat ssm_in_qkvz, ssm_ba;   /* qwen3next: the same per key head, in one (recurrent.c) */
    rkm_mat sc_in, sc_out;         /* LFM2's short convolution: (n_embd -> b, c, x), (n_embd -> n_embd);
                                    * its kernel (n_embd x kernel) is ssm_conv */
    const float *ssm_conv;         /* (kernel x channels): transposed at load for rkm_conv_step */
    const float *ssm_dt, *ssm_a;   /* (value heads) */
    const float *ssm_norm;         /* (value head dim); Mamba-2: (inner), per group */
    const float *ssm_conv_b, *ssm_d; /* Mamba-2: the convolution's bias (channels), the skip (heads) */
    int recurrent;                 /* 1: this layer is recurrent (no attention, no KV rows) */
    size_t rs_off;                 /* its state's offset in a session's s->rs (floats) */
    /* geometry */
    int n_kv, hd_k, hd_v;          /* KV heads and head dims of this layer */
    int is_swa;                    /* sliding-window layer */
    rkm_rope rope;
    int v_from_k;                  /* V is the (unrotated, unnormed) K projection */
    float kq_scale;                /* the scores' scale (rkm_attn_scale) */
} rkm_layer;

struct rkm_model {
    rkm_model_dir *md;
    rkm_hparams hp;
    rkm_layer *layers;             /* hp.n_layer */
    const void *tok_embd;          /* (n_embd x n_vocab) of type tok_embd_type */
    int tok_embd_type;
    /* untied embeddings are only looked up: their rows are read from
     * resident.bin at this offset (pread, page cache) and the table never
     * enters the process's memory; tied ones are the LM head, resident */
    int embd_pread;
    uint64_t embd_off;
    const float *output_norm;
    rkm_mat output;                /* LM head (maybe token_embd) */
    float **owned;                 /* vectors dequantized at load, NPU copies */
    int pack;                      /* resident q8_0/q4_0 matrices in the packed layout
                                    * (kernels.h), packed at load */
    int pack_experts;              /* the same for expert blobs, in the cache */
    int n_owned;
    uint8_t *arena;                /* the packed resident matrices (rkm_map_weights) */
    size_t arena_bytes, arena_used;
    uint64_t model_id;             /* identity of the weights (session files) */
    struct rkm_tokenizer *tok;     /* NULL if the directory has none */
    char *chat_template;           /* NULL if none */
    int n_threads;
    rkm_budget plan;               /* the memory plan at open (budget.h) */
    int plan_n_seq, plan_n_ctx;    /* the sessions and context it counts */
    int prefetch;                  /* hint the next layer's experts while decoding */
    int n_ff_exp;                  /* routed expert width (from the blob parts) */
    int max_hd;                    /* largest head dim over layers */
    int max_qdim, max_kvdim;       /* largest n_head*hd, n_kv*hd over layers (the query
                                    * projection's width with its output gates) */
    size_t rs_floats;              /* a session's recurrent state: every recurrent layer's
                                    * convolution and delta-rule states (recurrent.c) */
    pthread_mutex_t lock;          /* guards pool, cache (one forward at a time) */
    pthread_mutex_t trie_lock;     /* guards the building of trie */
    struct rkm_gtrie *trie;        /* the vocabulary's text tokens for grammars (constrain.c), or NULL */
    rkm_pool *pool;
    rkm_expert_cache *cache;
    struct rkm_backend *backend;   /* where the expert matmuls run (backend/backend.h) */
    /* the background check of the resident weights' checksums
     * (verify_resident 1): its thread writes bad_msg, then sets bad
     * (release); readers load bad (acquire) before bad_msg */
    pthread_t verifier;
    int verifier_started;
    atomic_int verify_stop, verify_done, bad;
    char bad_msg[512];
};

/* KV rows of one layer: f16, head-major [n_kv][cap][hd], so one head's
 * keys (or values) are one contiguous run the attention streams; ring
 * (pos % cap) for sliding layers, linear (pos) for full layers. */
typedef struct rkm_kv_layer {
    rkm_f16 *k, *v;
    int cap;          /* rows */
    int ring;         /* 1: slot = pos % cap */
    int n_kv, hd_k, hd_v;
    int k_dim, v_dim; /* n_kv*hd_k, n_kv*hd_v; v_dim 0: no V rows, the values
                         are the first hd_v of each K row (latent attention) */
    int valid_from;   /* oldest position a loaded session file supplied */
} rkm_kv_layer;

static inline rkm_f16 *rkm_kv_k(const rkm_kv_layer *kv, int kh, int row)
{
    return kv->k + ((size_t)kh * (size_t)kv->cap + (size_t)row) * (size_t)kv->hd_k;
}

static inline rkm_f16 *rkm_kv_v(const rkm_kv_layer *kv, int kh, int row)
{
    if (!kv->v_dim) return rkm_kv_k(kv, kh, row);
    return kv->v + ((size_t)kh * (size_t)kv->cap + (size_t)row) * (size_t)kv->hd_v;
}

/* Elements from one position's values to the next's. */
static inline int rkm_kv_v_stride(const rkm_kv_layer *kv) { return kv->v_dim ? kv->hd_v : kv->hd_k; }

/* Called by the forward pass after each stage (tests compare layer by
 * layer): what = "embd", "attn_out", "layer_out", "final_norm"; rows x cols;
 * and by each MoE layer's routing: "router_margin", rows x 1 (see
 * rkm_session_router_margins). */
typedef void (*rkm_trace_fn)(void *user, int il, const char *what, const float *x, int rows,
                             int cols);

/* The MoE layer in flight between rkm_moe_route and rkm_moe_experts: the
 * chunk's (row, slot) entries grouped by expert, and the tile plan. */
typedef struct rkm_moe_state {
    int il, n;
    int n_ids;                        /* distinct experts of the chunk */
    int tile, next, overlap;          /* tile size, ids[0..next) requested */
    int cnt[RKM_MAX_EXPERTS];         /* entries per expert */
    int start[RKM_MAX_EXPERTS + 1];   /* first entry of each expert in erows */
    int ids[RKM_MAX_EXPERTS];         /* the distinct experts, ascending */
} rkm_moe_state;

struct rkm_session {
    rkm_model *m;
    rkm_session_params p;
    int n_ctx, n_chunk;
    int n_past;
    int32_t *tokens;          /* n_ctx */
    int32_t *mpos;            /* multi-axis RoPE (rkm_rope.multi): n_ctx x RKM_MPOS, each row's
                               * position per axis (time, height, width, extra) and the
                               * position of the text that follows it; NULL without */
    rkm_kv_layer *kv;         /* n_layer */
    float *logits;            /* n_vocab: after the last evaluated token */
    float *embd;              /* n_embd: final-normed hidden of the last token */
    uint8_t *embd_row;        /* one token_embd row read from the file (embd_pread) */
    int have_logits;
    rkm_sampler *sampler;
    struct rkm_constraint *grammar; /* the grammar generation keeps to, or NULL (constrain.c) */
    atomic_int cancel;
    rkm_stats st;
    double t_first;           /* first eval start since reset (ttft), <0 none */
    int ttft_done;
    /* scratch, n_chunk rows each */
    float *x, *cur, *cur2, *q, *k, *v, *att, *tmp, *ffn, *ffn2;
    float *mla;               /* latent attention: n_chunk * n_head * max(nope, kv_lora), or NULL */
    float *gate;              /* attention output gates (attn_q_gate): n_chunk * n_head * hd, or NULL */
    float *rs;                /* recurrent state, m->rs_floats (recurrent.c), or NULL */
    /* the recurrent state cannot be cut back: copies of it at the ends of
     * the last prompt chunks (position, state; pos 0: free), which
     * rkm_session_truncate restores and evaluates forward from; and
     * whether rs no longer matches n_past (a chunk failed part-way:
     * the next evaluation restores it first) */
    struct {
        int pos;
        float *rs;
    } snap[RKM_RS_SNAPSHOTS];
    int rs_dirty;
    float *ssm_x, *ssm_z, *ssm_ba, *ssm_o; /* recurrent layers' rows: channels, gates, beta and
                                             alpha, outputs (n_chunk each), or NULL */
    rkm_mm_task *mla_tasks;   /* latent attention: n_head (one decode job over every head), or NULL */
    float *scores;            /* per thread: n_ctx floats */
    rkm_f16 *q16;             /* per thread: max_hd */
    rkm_f16 *p16;             /* per thread: n_ctx */
    float *router;            /* n_chunk * n_expert */
    int *sel;                 /* n_chunk * n_expert_used selected experts */
    float *selw;              /* their weights */
    float *margin;            /* n_chunk: router margins of the chunk's rows */
    float *route_margin;      /* n_ctx * n_layer router margins, NULL unless recorded */
    int flip_layer, flip_pos; /* rkm_session_router_flip's decision (-1: none) */
    float *xe, *ge, *ue;      /* gathered expert rows, n_chunk*k rows */
    int *erows;               /* (row, slot) entries grouped by expert: entry ids */
    int *epos;                /* entry id -> its row in xe (inverse of erows) */
    rkm_moe_state moe;        /* routing of the MoE layer in flight */
    int n_threads_scratch;
    int att_full;             /* the chunk in flight attends both ways (rkm_forward_embd) */
    rkm_trace_fn trace;
    void *trace_user;
};

/* forward.c: evaluates n (<= n_chunk) tokens at positions n_past.. and
 * appends them to the KV cache. logits: NULL (none), or n_out_rows x n_vocab
 * where out rows are the last one (all_rows 0) or every row (all_rows 1). */
int rkm_forward_chunk(rkm_session *s, const int32_t *ids, int n, float *logits, int all_rows);
/* The same for n rows given as input embeddings (n x n_embd floats, taken
 * as they are: no embedding scale), recorded in the session's tokens as
 * ids (media ids, rkm_media_token); logits: NULL or the last row's. full:
 * each row attends to every row of the chunk, before and after it (Gemma
 * 4's image tokens), else causally. */
int rkm_forward_embd(rkm_session *s, const float *rows, const int32_t *ids, int n, float *logits, int full);
/* A run of a chunk's rows that belong to one sequence: rows row0.. are
 * positions pos0.. (= s->n_past) of session s. */
typedef struct rkm_seg {
    rkm_session *s;
    int row0, n, pos0;
} rkm_seg;
/* The same for n rows of several sequences at once (a batch, session.c):
 * scratch is s's (n <= s->n_chunk, every position < s->n_ctx), each
 * segment's keys and values go to its own session's cache, whose tokens
 * and n_past advance, and whose embd gets its last row's final hidden.
 * logits: NULL, or nseg x n_vocab (each segment's last row), or with
 * all_rows (one segment only) n x n_vocab. */
int rkm_forward_rows(rkm_session *s, const rkm_seg *seg, int nseg, const int32_t *ids, int n, float *logits,
                     int all_rows);

/* attention.c */
int rkm_kv_init(rkm_session *s);
void rkm_kv_free(rkm_session *s);
/* The RoPE of a layer of hp rotating dim dims with base theta (freqs:
 * the per-pair divisors or NULL): the scaling's factors as llama.cpp
 * derives them from the hyper-parameters. */
void rkm_rope_setup(rkm_rope *r, const rkm_hparams *hp, int dim, float theta, const float *freqs);
/* The scale of layer L's attention scores: the architecture's, else
 * 1/sqrt(head dim); latent attention's as llama.cpp computes it for
 * deepseek2 (YaRN's magnitude squared over sqrt(head_dim_k_mla)). */
float rkm_attn_scale(const rkm_hparams *hp, const rkm_layer *L);
/* Rotates n_heads heads of hd values (x: head after head) at position pos
 * (a text position: with multi-axis RoPE, pos on the first three axes, 0
 * on the extra one, as llama.cpp places text). */
void rkm_rope_apply(const rkm_rope *r, float *x, int n_heads, int hd, int pos);
/* The same at a position given per axis (time, height, width, extra). */
void rkm_rope_apply4(const rkm_rope *r, float *x, int n_heads, int hd, const int32_t pos[4]);
/* Attention of n query rows q (positions pos0..) of layer il over the
 * sequence's cache kv (already holding these rows), into att; the
 * scores and f16 rows in s's scratch (pos0 + n <= s->n_ctx). Rows of q,
 * k, v, att are contiguous with the layer's widths (n_head*hd_k,
 * n_kv*hd_k, n_kv*hd_v, n_head*hd_v). */
void rkm_attention(rkm_session *s, const rkm_kv_layer *kv, int il, int pos0, int n, const float *q, float *att);
/* Stores n rows of k / v at positions pos0..pos0+n-1 of one layer's cache. */
void rkm_kv_store(rkm_kv_layer *kv, const float *k, const float *v, int pos0, int n);

/* moe.c: out[n][n_embd] = routed experts (+ shared expert) of x (normed
 * input) for layer il; rin is the router input (x for most archs). */
int rkm_moe_forward(rkm_session *s, int il, const float *x, const float *rin, int n, float *out);
/* The two halves of rkm_moe_forward, so that other work (Gemma 4's dense
 * MLP) runs while the experts are read: route = router, top-k, grouping and
 * the first expert-cache request; experts = the routed experts on x, summed
 * into out. A route must be followed by experts on the same session. */
int rkm_moe_route(rkm_session *s, int il, const float *rin, int n);
/* One row's top-k (sel, w: k each) from its router logits, as hp gates
 * them (moe.c); returns the router margin. */
float rkm_moe_route_row(const rkm_hparams *hp, const rkm_layer *L, float *logits, int *sel, float *w, int flip);
int rkm_moe_experts(rkm_session *s, int il, const float *x, int n, float *out);
/* The resident matrices of a layer (absent ones have data NULL), in a
 * fixed order: wq wk wv wo, ffn_gate ffn_up ffn_down, router, sh_gate
 * sh_up sh_down, sh_gate_inp, wq_a wq_b wkv_a wk_b wv_b, ssm_in ssm_z ssm_beta
 * ssm_alpha ssm_out ssm_in_qkvz ssm_ba sc_in sc_out. Fills out,
 * returns the count. */
#define RKM_LAYER_MATS 26
int rkm_layer_mats(rkm_layer *L, rkm_mat *out[RKM_LAYER_MATS]);

/* session.c: after a segment of several rows (a prompt chunk) ended at
 * s->n_past, keeps a copy of its recurrent state there. */
void rkm_session_rs_snapshot(rkm_session *s);
/* forward.c: a sequence starts at position 0: a zero state, no snapshots. */
void rkm_session_rs_reset(rkm_session *s);

/* recurrent.c: Gated DeltaNet layers. */
/* Layer il's state inside a session's s->rs. */
float *rkm_recurrent_state(const rkm_session *s, int il);
/* Floats per chunk row of the recurrent layers' scratch (session.c
 * allocates n_chunk rows of each): s->ssm_x (the input projections),
 * s->ssm_z, s->ssm_ba, s->ssm_o (the outputs; also where fused
 * projections are staged). */
void rkm_recurrent_row_floats(const rkm_hparams *hp, size_t *x, size_t *z, size_t *ba, size_t *o);
/* The recurrent layer il for the chunk's rows (each segment's rows in
 * order over its own session's state): reads s->cur, writes s->tmp. */
int rkm_recurrent_block(rkm_session *s, int il, const rkm_seg *seg, int nseg, int n);

/* linear.c: products with the model's weight views. */
/* Y = X . W^T on the pool (or the calling thread for small work). */
void rkm_matmul_mat(rkm_pool *pool, const rkm_mat *w, const float *x, int64_t m, float *y);
/* A view as one task of an rkm_mm_multi batch. */
rkm_mm_task rkm_mm_task_of(const rkm_mat *w, const float *x, int64_t m, float *y);
/* Y = X . W^T for a resident matrix: on the NPU when W has an rknn_i8 copy
 * and there are at least RKM_NPU_DENSE_MIN_ROWS rows (prefill), else on
 * the CPU. 0 or an NPU error. */
#define RKM_NPU_DENSE_MIN_ROWS 32
int rkm_model_mm(const rkm_model *m, const rkm_mat *w, const float *x, int64_t n, float *y);

/* ffn.c */
/* Dense gated FFN: out = down(act(gate x) * up x); tg, tu: n x n_ff scratch. */
int rkm_ffn_dense(rkm_session *s, const rkm_mat *gate, const rkm_mat *up, const rkm_mat *down,
                   const float *x, int n, float *out, float *tg, float *tu);
/* Activation of the arch: silu or ggml-like gelu (fp16 table). */
void rkm_glu(const rkm_model *m, float *out, const float *g, const float *u, int64_t n);

#endif
