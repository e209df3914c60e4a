/*
 * convert.h - GGUF / Hugging Face checkpoint -> .rkmojo model directory.
 * Streams tensors (bounded memory whatever the model size), writes the
 * manifest last (temp + fsync + rename), removes its partial outputs on
 * failure. See docs/FORMAT.md for the output and the type rules.
 */
#ifndef RKM_CONVERT_H
#define RKM_CONVERT_H

#include <stdio.h>

typedef struct rkm_convert_opts {
    const char *quant;  /* a --quant choice (quant_mix.h): "q8_0" (default), "q4_k_m", "keep", ... */
    FILE *progress;     /* NULL: silent */
    const char *target; /* NULL/"cpu", or "rk3588" (also "rk3576"): routed
                           experts whose shapes allow it become rknn_i8,
                           the NPU's native layout (docs/NPU.md) */
    int plain_experts;  /* 1: q8_0 / q4_0 experts in the plain GGUF row
                           layout; 0 (default): in the matmuls' packed
                           16-row layout (q8_0_x16 / q4_0_x16), so reading
                           an expert needs no repacking */
} rkm_convert_opts;

int rkm_convert(const char *input, const char *out_dir, const rkm_convert_opts *o);

#endif
