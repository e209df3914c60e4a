/*
 * quant_mix.h - the converter's --quant choices and the type each one
 * gives every tensor: keep, rkmojo's uniform q8_0 / q4_0 / f16 / bf16, and
 * llama.cpp's named mixes (q2_k, q3_k_s/m/l, q4_k_s/m, q5_k_s/m, q6_k,
 * iq4_nl, iq4_xs, mxfp4_moe) with llama.cpp's per-tensor rules, so that a
 * conversion with --quant q4_k_m stores the types (and, the quantizers
 * being ggml's, the bytes) llama-quantize's Q4_K_M would. synth writes
 * the same types when given a mix (--dtype q4_k_m).
 *
 * Owns: the table of choices, the table of per-tensor rules, the role ->
 * tensor-class table and the table of fallback types for rows that are
 * not a multiple of a type's block (all in quant_mix.c, whose header
 * states the rules and where rkmojo departs from llama.cpp). Stateless;
 * a plan is immutable once initialised and may be read from any thread.
 */
#ifndef RKM_QUANT_MIX_H
#define RKM_QUANT_MIX_H

#include <stdint.h>

#include "format/arch.h"
#include "format/hparams.h"

struct rkm_source;

/* One --quant choice (a row of quant_mix.c's table). */
typedef struct rkm_quant_mix rkm_quant_mix;

/* The choice named name (case-insensitive; "mxfp4" is mxfp4_moe). NULL,
 * with RKM_EINVAL and a message listing the accepted names, if unknown. */
const rkm_quant_mix *rkm_quant_mix_find(const char *name);
/* Its canonical name ("q4_k_m"), as the manifest records it. */
const char *rkm_quant_mix_name(const rkm_quant_mix *m);
/* 1 for keep (every native type stays as it is). */
int rkm_quant_mix_keeps(const rkm_quant_mix *m);
/* llama.cpp's file type of the choice (llama_ftype, GGUF's
 * general.file_type: 15 for q4_k_m); -1 for keep. */
int rkm_quant_mix_file_type(const rkm_quant_mix *m);

/* What the rules read of one model: its hyper-parameters, and which
 * tensors its file holds. */
typedef struct rkm_quant_plan {
    const rkm_quant_mix *mix;
    int n_layer;
    int n_expert;
    int n_gqa;                       /* n_head / n_head_kv of layer 0 */
    int is_70b;                      /* llama.cpp's 70B model type (rules bump attn_v) */
    int tied;                        /* no output.weight: token_embd is the output */
    int n_attn_v;                    /* attn_v tensors in the file */
    int attn_v_rank[RKM_MAX_LAYERS]; /* rank of layer il's attn_v among them, -1 if none */
} rkm_quant_plan;

/* Does the model hold the tensor of role (arch.h) in layer il (-1: global)? */
typedef int (*rkm_quant_has_tensor)(const void *ctx, int role, int il);

/* The plan of a checkpoint the converter reads. */
void rkm_quant_plan_init(rkm_quant_plan *p, const rkm_quant_mix *m, const struct rkm_source *s);
/* The same from hyper-parameters and a test of which tensors there are,
 * for a writer that makes the tensors itself (synth). */
void rkm_quant_plan_init_with(rkm_quant_plan *p, const rkm_quant_mix *m, const rkm_hparams *hp,
                              rkm_quant_has_tensor has, const void *ctx);

/* The stored type of a tensor: t its row of the arch table (NULL if it has
 * none), il its layer (-1: global), n_dims its dimensions (trailing 1s
 * dropped), ne0 its row length, src_type its type in the source. */
int rkm_quant_plan_type(const rkm_quant_plan *p, const rkm_tensor_info *t, int il, int n_dims, int64_t ne0,
                        int src_type);

#endif
