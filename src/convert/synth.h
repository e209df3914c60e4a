/*
 * synth.h - deterministic synthetic checkpoints: random weights with the
 * real shapes of a model, written as GGUF that llama.cpp loads (and, with
 * hf_out, as a Hugging Face directory holding the same weights). Every row
 * of every tensor is drawn from its own generator seeded by (seed, tensor
 * name, row), so the same seed gives the same bytes, any row can be made
 * independently (experts split per expert for HF) and memory stays small.
 * Quantized files are made from the same F32 rows, quantized as they are
 * drawn (rkm_quantize_row), one row at a time.
 */
#ifndef RKM_SYNTH_H
#define RKM_SYNTH_H

#include <stdint.h>
#include <stdio.h>

#include "format/hparams.h"

struct rkm_quant_mix;

typedef struct rkm_synth_opts {
    const char *preset;      /* tiny, olmoe-1b-7b, qwen3-30b-a3b, gemma4-26b-a4b, mixtral-8x7b, qwen2moe-a2.7b, ... */
    uint64_t seed;
    int dtype;               /* RKM_TYPE_F32 / F16 / BF16 / Q8_0 / Q4_0 for every matrix */
    /* or, if set, a --quant mix of quant_mix.h (q4_k_m, ...; not keep): each
     * tensor gets the type its rules give the F32 tensor, quantized from the
     * same F32 rows, so the file holds the types and bytes of
     * `convert --quant MIX` of the f32 synth (dtype is then not read) */
    const struct rkm_quant_mix *mix;
    const char *vocab_from;  /* GGUF or tokenizer.json, NULL: built-in vocabulary */
    const char *hf_out;      /* also write a Hugging Face directory (f32, f16, bf16 only) */
    const char *mmproj_out;  /* also write the preset's vision tower as an mmproj GGUF (format/vision.h)
                              * whose projection fits the text model */
    const char *const *sets; /* "key=value" hparams overrides */
    int n_sets;
    FILE *progress;
    int threads;             /* rows generated on this many threads; 0: every performance core */
} rkm_synth_opts;

/* Fills hp with a preset's shapes; RKM_ENOENT if unknown. */
int rkm_synth_preset(const char *name, rkm_hparams *hp);
/* NULL-terminated list of preset names. */
const char *const *rkm_synth_preset_names(void);
int rkm_synth(const rkm_synth_opts *o, const char *out_gguf);

#endif
