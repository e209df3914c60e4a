/*
 * quant_mix.c - the --quant choices and the type of every tensor under
 * each (see quant_mix.h). Four tables: the choices, the tensor class of
 * each role, the per-tensor rules of llama.cpp's mixes, and the fallbacks.
 *
 * Every choice first applies rkmojo's own rules, the same for all:
 *   - 1-D tensors (norms, biases, scales), norms and biases of any shape
 *     (Mamba-2's per-group norm, gpt-oss's per-expert biases) and rows whose length is not a
 *     multiple of 32: f32 (the matmuls take 32-value blocks);
 *   - routers (ffn_gate_inp, the shared expert's gate): f32, since top-k
 *     choices flip on small errors and they are tiny;
 *   - keep: every type the matmuls run stays as it is; others become q8_0.
 * Then the choice's base type goes to every other matrix, and for the
 * llama.cpp mixes its per-tensor rules change some, as llama.cpp's
 * llama_tensor_get_type does without an importance matrix (these are
 * rkmojo's statement of those rules, checked against llama.cpp's own
 * quantizer by tests/test-quant-mix.sh):
 *   - the tensors are classed as llama.cpp classes them (output,
 *     token_embd, attn_q/k/v/output, ffn_gate/up/down with their expert
 *     and shared-expert forms); without output.weight (tied), token_embd
 *     takes the output's rules;
 *   - rules are applied in table order, a later match overriding an
 *     earlier one; their conditions read the layer il of n_layer (ffn_down)
 *     or, for attn_v, the rank of the tensor among the file's attn_v
 *     tensors (llama.cpp counts them: Gemma 4's global layers have none),
 *     n_expert (== 8: Mixtral's bumps), n_head / n_head_kv (>= 4), and
 *     llama.cpp's "70B" model type (llama with 80 layers and grouped kv
 *     heads, not 8 experts; qwen2 with 80 layers);
 *   - "more bits" is llama.cpp's use_more_bits: the first and last eighth
 *     of the layers and every third layer between them;
 *   - a row that is not a multiple of the chosen type's 256-value block
 *     falls back to a 32-value type (q2_k, q3_k -> q4_0; q4_k -> q5_0;
 *     q5_k -> q5_1; q6_k -> q8_0; iq4_xs -> iq4_nl).
 * Where rkmojo departs from llama.cpp on purpose:
 *   - q4_0 is rkmojo's uniform type: output.weight q8_0 and a tied
 *     token_embd q4_0 (llama.cpp's Q4_0 mix: Q6_K for both), attn_k and
 *     attn_v of 8-expert models q4_0 (llama.cpp's: Q8_0); q8_0 is
 *     llama.cpp's Q8_0 mix;
 *   - rows not a multiple of 32 are f32 (llama.cpp: F16); 1-D tensors and
 *     routers are f32 (llama.cpp keeps their source type: the same for
 *     F32 sources, and GGUF files store norms as F32);
 *   - mxfp4_moe gives MXFP4 to the routed experts by role, so also to
 *     older files with one tensor per expert (llama.cpp tests for a 3-D
 *     tensor, giving those Q8_0).
 * Architecture-specific rules of llama.cpp for architectures rkmojo does
 * not run (Falcon, BailingMoE, ...) and the importance-matrix and IQ1-IQ3
 * mixes are not here.
 */
#include "convert/quant_mix.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "format/source.h"
#include "kernels/quant.h"
#include "util/common.h"

/* ------------------------------------------------------------ choices */

enum {
    MIX_KEEP,
    MIX_Q8_0,
    MIX_Q4_0,
    MIX_F16,
    MIX_BF16,
    MIX_Q2_K,
    MIX_Q3_K_S,
    MIX_Q3_K_M,
    MIX_Q3_K_L,
    MIX_Q4_K_S,
    MIX_Q4_K_M,
    MIX_Q5_K_S,
    MIX_Q5_K_M,
    MIX_Q6_K,
    MIX_IQ4_NL,
    MIX_IQ4_XS,
    MIX_MXFP4_MOE,
    MIX_COUNT
};

struct rkm_quant_mix {
    int id;
    const char *name;
    const char *alias; /* another accepted name, or NULL */
    int base;          /* the type of every matrix no rule names (-1: keep) */
    int file_type;     /* llama.cpp's llama_ftype (-1: keep) */
};

static const rkm_quant_mix mixes[MIX_COUNT] = {
    {MIX_KEEP, "keep", NULL, -1, -1},
    {MIX_Q8_0, "q8_0", NULL, RKM_TYPE_Q8_0, 7},
    {MIX_Q4_0, "q4_0", NULL, RKM_TYPE_Q4_0, 2},
    {MIX_F16, "f16", NULL, RKM_TYPE_F16, 1},
    {MIX_BF16, "bf16", NULL, RKM_TYPE_BF16, 32},
    {MIX_Q2_K, "q2_k", NULL, RKM_TYPE_Q2_K, 10},
    {MIX_Q3_K_S, "q3_k_s", NULL, RKM_TYPE_Q3_K, 11},
    {MIX_Q3_K_M, "q3_k_m", NULL, RKM_TYPE_Q3_K, 12},
    {MIX_Q3_K_L, "q3_k_l", NULL, RKM_TYPE_Q3_K, 13},
    {MIX_Q4_K_S, "q4_k_s", NULL, RKM_TYPE_Q4_K, 14},
    {MIX_Q4_K_M, "q4_k_m", NULL, RKM_TYPE_Q4_K, 15},
    {MIX_Q5_K_S, "q5_k_s", NULL, RKM_TYPE_Q5_K, 16},
    {MIX_Q5_K_M, "q5_k_m", NULL, RKM_TYPE_Q5_K, 17},
    {MIX_Q6_K, "q6_k", NULL, RKM_TYPE_Q6_K, 18},
    {MIX_IQ4_NL, "iq4_nl", NULL, RKM_TYPE_IQ4_NL, 25},
    {MIX_IQ4_XS, "iq4_xs", NULL, RKM_TYPE_IQ4_XS, 30},
    {MIX_MXFP4_MOE, "mxfp4_moe", "mxfp4", RKM_TYPE_MXFP4, 38},
};

const rkm_quant_mix *rkm_quant_mix_find(const char *name)
{
    for (int i = 0; name && i < MIX_COUNT; i++)
        if (!strcasecmp(name, mixes[i].name) || (mixes[i].alias && !strcasecmp(name, mixes[i].alias)))
            return &mixes[i];
    char list[512];
    size_t n = 0;
    for (int i = 0; i < MIX_COUNT && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s%s%s%s", i ? ", " : "", mixes[i].name,
                              mixes[i].alias ? " (or " : "", mixes[i].alias ? mixes[i].alias : "",
                              mixes[i].alias ? ")" : "");
    rkm_err(RKM_EINVAL, "--quant: unknown type or mix '%s'; accepted: %s", name ? name : "", list);
    return NULL;
}

const char *rkm_quant_mix_name(const rkm_quant_mix *m)
{
    return m->name;
}

int rkm_quant_mix_keeps(const rkm_quant_mix *m)
{
    return m->id == MIX_KEEP;
}

int rkm_quant_mix_file_type(const rkm_quant_mix *m)
{
    return m->file_type;
}

/* ------------------------------------------------------ tensor classes */

/* llama.cpp's classes of tensors (its tensor_category). */
enum { C_OTHER = 0, C_TOKEN_EMBD, C_OUTPUT, C_ATTN_Q, C_ATTN_K, C_ATTN_V, C_ATTN_OUT, C_FFN_GATE, C_FFN_UP, C_FFN_DOWN, C_ANY };

static const uint8_t role_class[RKM_TENSOR_ROLE_COUNT] = {
    [RKM_TENSOR_TOKEN_EMBD] = C_TOKEN_EMBD,
    [RKM_TENSOR_OUTPUT] = C_OUTPUT,
    [RKM_TENSOR_ATTN_Q] = C_ATTN_Q,
    [RKM_TENSOR_ATTN_K] = C_ATTN_K,
    [RKM_TENSOR_ATTN_V] = C_ATTN_V,
    [RKM_TENSOR_ATTN_OUT] = C_ATTN_OUT,
    [RKM_TENSOR_FFN_GATE] = C_FFN_GATE,
    [RKM_TENSOR_FFN_GATE_EXPS] = C_FFN_GATE,
    [RKM_TENSOR_FFN_GATE_UP_EXPS] = C_FFN_GATE,
    [RKM_TENSOR_FFN_GATE_SHEXP] = C_FFN_GATE,
    [RKM_TENSOR_FFN_UP] = C_FFN_UP,
    [RKM_TENSOR_FFN_UP_EXPS] = C_FFN_UP,
    [RKM_TENSOR_FFN_UP_SHEXP] = C_FFN_UP,
    [RKM_TENSOR_FFN_DOWN] = C_FFN_DOWN,
    [RKM_TENSOR_FFN_DOWN_EXPS] = C_FFN_DOWN,
    [RKM_TENSOR_FFN_DOWN_SHEXP] = C_FFN_DOWN,
};

/* ---------------------------------------------------------------- rules */

/* Conditions; i of n is the layer of n_layer, for attn_v its rank of n_attn_v. */
enum {
    W_ALWAYS = 0,
    W_MORE_BITS,   /* i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2 */
    W_FIRST_8TH,   /* i < n/8 */
    W_FIRST_16TH,  /* i < n/16 */
    W_FIRST_2,     /* i < 2 */
    W_FIRST_4,     /* i < 4 */
    W_GQA4,        /* n_head / n_head_kv >= 4 */
    W_EXPERTS_8,   /* n_expert == 8 */
    W_NOT_8,       /* n_expert != 8 */
    W_70B_LOW,     /* the 70B model type, and the type so far is q3_k or q4_k */
    W_NOT_ROUTED,  /* not a routed expert */
    W_UNTIED,      /* output.weight itself, not a tied token_embd */
};

#define M(x) (1u << MIX_##x)
/* the mixes whose base is a K-quant or IQ4 type */
#define M_K (M(Q2_K) | M(Q3_K_S) | M(Q3_K_M) | M(Q3_K_L) | M(Q4_K_S) | M(Q4_K_M) | M(Q5_K_S) | M(Q5_K_M) | M(Q6_K) | M(IQ4_NL) | M(IQ4_XS))

typedef struct {
    uint8_t cls;    /* C_*, C_ANY: every class */
    uint32_t mixes; /* M(...) */
    uint8_t when;   /* W_* */
    uint8_t type;   /* the type it sets */
} mix_rule;

static const mix_rule rules[] = {
    /* output (and a tied token_embd): q6_k unless the base is q8_0; a row
     * not a multiple of the base's block gets q8_0 (the fallback below
     * gives the same) */
    {C_OUTPUT, M_K, W_ALWAYS, RKM_TYPE_Q6_K},
    {C_OUTPUT, M(MXFP4_MOE), W_ALWAYS, RKM_TYPE_Q8_0},
    {C_OUTPUT, M(Q4_0), W_UNTIED, RKM_TYPE_Q8_0}, /* rkmojo's q4_0 (llama.cpp: Q6_K, tied too) */
    /* mxfp4_moe: routed experts MXFP4, everything else q8_0 */
    {C_ANY, M(MXFP4_MOE), W_NOT_ROUTED, RKM_TYPE_Q8_0},
    /* attn_v */
    {C_ATTN_V, M(Q2_K), W_ALWAYS, RKM_TYPE_Q3_K},
    {C_ATTN_V, M(Q2_K), W_GQA4, RKM_TYPE_Q4_K},
    {C_ATTN_V, M(Q3_K_M), W_ALWAYS, RKM_TYPE_Q4_K},
    {C_ATTN_V, M(Q3_K_M), W_FIRST_2, RKM_TYPE_Q5_K},
    {C_ATTN_V, M(Q3_K_L), W_ALWAYS, RKM_TYPE_Q5_K},
    {C_ATTN_V, M(IQ4_NL) | M(IQ4_XS), W_GQA4, RKM_TYPE_Q5_K},
    {C_ATTN_V, M(Q4_K_M) | M(Q5_K_M), W_MORE_BITS, RKM_TYPE_Q6_K},
    {C_ATTN_V, M(Q4_K_S), W_FIRST_4, RKM_TYPE_Q5_K},
    {C_ATTN_V, M_K, W_70B_LOW, RKM_TYPE_Q5_K},
    {C_ATTN_V, M_K, W_EXPERTS_8, RKM_TYPE_Q8_0},
    /* attn_k */
    {C_ATTN_K, M_K, W_EXPERTS_8, RKM_TYPE_Q8_0},
    /* attn_output */
    {C_ATTN_OUT, M(Q2_K) | M(Q3_K_S) | M(Q3_K_M) | M(IQ4_NL) | M(Q4_K_S) | M(Q4_K_M) | M(IQ4_XS), W_EXPERTS_8,
     RKM_TYPE_Q5_K},
    {C_ATTN_OUT, M(Q2_K), W_NOT_8, RKM_TYPE_Q3_K},
    {C_ATTN_OUT, M(Q3_K_M), W_NOT_8, RKM_TYPE_Q4_K},
    {C_ATTN_OUT, M(Q3_K_L), W_NOT_8, RKM_TYPE_Q5_K},
    /* ffn_down, experts and shared expert included */
    {C_FFN_DOWN, M(Q2_K), W_ALWAYS, RKM_TYPE_Q3_K},
    {C_FFN_DOWN, M(Q3_K_M), W_ALWAYS, RKM_TYPE_Q4_K},
    {C_FFN_DOWN, M(Q3_K_M), W_FIRST_16TH, RKM_TYPE_Q5_K},
    {C_FFN_DOWN, M(Q3_K_L), W_ALWAYS, RKM_TYPE_Q5_K},
    {C_FFN_DOWN, M(Q4_K_M) | M(Q5_K_M), W_MORE_BITS, RKM_TYPE_Q6_K},
    {C_FFN_DOWN, M(IQ4_NL) | M(IQ4_XS) | M(Q4_K_S), W_FIRST_8TH, RKM_TYPE_Q5_K},
};

/* Rows that are not a multiple of the type's block: the 32-value type. */
static const struct {
    uint8_t from, to;
} fallbacks[] = {
    {RKM_TYPE_Q2_K, RKM_TYPE_Q4_0}, {RKM_TYPE_Q3_K, RKM_TYPE_Q4_0}, {RKM_TYPE_Q4_K, RKM_TYPE_Q5_0},
    {RKM_TYPE_Q5_K, RKM_TYPE_Q5_1}, {RKM_TYPE_Q6_K, RKM_TYPE_Q8_0}, {RKM_TYPE_IQ4_XS, RKM_TYPE_IQ4_NL},
};

static int more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* Does condition when hold for a tensor at i of n, routed (a routed
 * expert) or tied (a tied token_embd), given the type chosen so far? */
static int holds(const rkm_quant_plan *p, int when, int i, int n, int routed, int tied, int type)
{
    switch (when) {
    case W_ALWAYS: return 1;
    case W_MORE_BITS: return more_bits(i, n);
    case W_FIRST_8TH: return i < n / 8;
    case W_FIRST_16TH: return i < n / 16;
    case W_FIRST_2: return i < 2;
    case W_FIRST_4: return i < 4;
    case W_GQA4: return p->n_gqa >= 4;
    case W_EXPERTS_8: return p->n_expert == 8;
    case W_NOT_8: return p->n_expert != 8;
    case W_70B_LOW: return p->is_70b && (type == RKM_TYPE_Q3_K || type == RKM_TYPE_Q4_K);
    case W_NOT_ROUTED: return !routed;
    case W_UNTIED: return !tied;
    default: return 0;
    }
}

/* ----------------------------------------------------------------- plan */

void rkm_quant_plan_init_with(rkm_quant_plan *p, const rkm_quant_mix *m, const rkm_hparams *hp,
                              rkm_quant_has_tensor has, const void *ctx)
{
    memset(p, 0, sizeof *p);
    p->mix = m;
    p->n_layer = hp->n_layer;
    p->n_expert = hp->n_expert;
    p->n_gqa = hp->n_head_kv[0] > 0 ? hp->n_head / hp->n_head_kv[0] : 0;
    /* llama.cpp's model types that its rules read: llama (also with
     * experts, unless 8) and qwen2 at 80 layers */
    const int llama = hp->arch == RKM_ARCH_LLAMA || hp->arch == RKM_ARCH_MIXTRAL;
    p->is_70b = hp->n_layer == 80 && ((llama && hp->n_expert != 8 && hp->n_head != hp->n_head_kv[0]) ||
                                      hp->arch == RKM_ARCH_QWEN2);
    p->tied = !has(ctx, RKM_TENSOR_OUTPUT, -1);
    for (int il = 0; il < RKM_MAX_LAYERS; il++)
        p->attn_v_rank[il] = il < hp->n_layer && has(ctx, RKM_TENSOR_ATTN_V, il) ? p->n_attn_v++ : -1;
}

static int source_has(const void *ctx, int role, int il)
{
    return rkm_source_role(ctx, role, il) != NULL;
}

void rkm_quant_plan_init(rkm_quant_plan *p, const rkm_quant_mix *m, const rkm_source *s)
{
    rkm_quant_plan_init_with(p, m, &s->hp, source_has, s);
}

int rkm_quant_plan_type(const rkm_quant_plan *p, const rkm_tensor_info *t, int il, int n_dims, int64_t ne0,
                        int src_type)
{
    const rkm_quant_mix *m = p->mix;
    if (n_dims == 1 || ne0 % 32 ||
        (t && (t->init == RKM_INIT_ROUTER || t->init == RKM_INIT_BIAS || t->init == RKM_INIT_NORM)))
        return RKM_TYPE_F32;
    if (m->id == MIX_KEEP) return rkm_type_matmul(src_type) ? src_type : RKM_TYPE_Q8_0;
    int cls = t ? role_class[t->role] : C_OTHER;
    const int tied = cls == C_TOKEN_EMBD && p->tied;
    if (tied) cls = C_OUTPUT;
    const int routed = t && rkm_tensor_role_is_expert(t->role);
    int i = il, n = p->n_layer;
    if (cls == C_ATTN_V && il >= 0 && il < RKM_MAX_LAYERS) i = p->attn_v_rank[il], n = p->n_attn_v;
    int type = m->base;
    for (size_t r = 0; r < RKM_ARRAY_LEN(rules); r++)
        if ((rules[r].cls == cls || rules[r].cls == C_ANY) && (rules[r].mixes & (1u << m->id)) &&
            holds(p, rules[r].when, i, n, routed, tied, type))
            type = rules[r].type;
    for (size_t f = 0; f < RKM_ARRAY_LEN(fallbacks); f++)
        if (type == fallbacks[f].from && ne0 % rkm_type_block_size(type)) type = fallbacks[f].to;
    return type;
}
