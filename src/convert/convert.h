/*
 * convert.h - GGUF / Hugging Face checkpoint -> .rkmojo model directory.
 * Streams tensors (bounded memory whatever the model size), writes the
 * manifest last (temp + fsync + rename), removes its partial outputs on
 * failure. See docs/FORMAT.md for the output and the type rules.
 */
#ifndef RKM_CONVERT_H
#define RKM_CONVERT_H

#include <stdint.h>
#include <stdio.h>

#include "format/source.h"

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
    /* Called once the converter has read all it will of bytes [off,
     * off+len) of source tensor t (rkmojo pull frees them): a resident
     * tensor's rows a chunk at a time, a routed expert's part each. From the converting thread
     * and the expert workers, so it must be thread-safe. NULL: none. */
    void (*consumed)(void *user, const rkm_src_tensor *t, uint64_t off, uint64_t len);
    void *user;
    /* Resumable (rkmojo pull): the source and options in one string. The
     * converter then records its progress in the output directory after
     * resident.bin and after each expert layer, keeps its output on
     * failure, and a later run with the same key keeps every output of
     * the earlier one whose checksums read back (a progress file of
     * another key is dropped). NULL: on failure the partial output is
     * removed. */
    /* Called once everything but the manifest is written; nonzero (an
     * RKM_E* code with its message) fails the conversion (rkmojo pull's
     * whole-file check). NULL: none. */
    int (*before_manifest)(void *user);
    const char *resume_key;
    int *resumed; /* if set: outputs kept (resident.bin 1, each expert layer 1); -1: another key's dropped */
    /* The caller's state to keep with each progress record (written into
     * buf, returned; NULL: none), read back with rkm_model_dir_load_progress. */
    const char *(*progress_note)(void *user, char *buf, size_t cap);
    /* A vision tower (an mmproj GGUF, format/vision.h) to carry into the
     * model directory as mmproj.gguf, checked first (readable, its
     * projection the text model's width); NULL: none. */
    const char *mmproj;
} rkm_convert_opts;

int rkm_convert(const char *input, const char *out_dir, const rkm_convert_opts *o);
/* The same from an opened source; input names it in messages and, when
 * the source has no description, in the manifest. s stays the caller's. */
int rkm_convert_source(const rkm_source *s, const char *input, const char *out_dir, const rkm_convert_opts *o);
/* 0 if o's --quant and --target choices are valid, else RKM_EINVAL with a message. */
int rkm_convert_check_opts(const rkm_convert_opts *o);

/* The byte ranges of the source's tensors in the order the converter
 * reads them: the resident tensors in the source's order, then each MoE
 * layer's routed experts, expert by expert (gate, up, down). *out is
 * malloc'd (the caller frees it). */
typedef struct rkm_convert_read {
    const rkm_src_tensor *t;
    uint64_t off, len; /* inside t's bytes */
    int layer;         /* the MoE layer whose experts these are; -1: a resident tensor */
} rkm_convert_read;
int rkm_convert_read_order(const rkm_source *s, rkm_convert_read **out, size_t *n);

#endif
