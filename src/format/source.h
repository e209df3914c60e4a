/*
 * source.h - what the converter reads: a checkpoint seen as hparams plus
 * tensors with GGUF names, whether it came from a GGUF file or from a
 * Hugging Face directory (config.json + sharded safetensors). HF names are
 * mapped to GGUF names through the architecture's table (arch.h); per-expert HF tensors become
 * "blk.L.ffn_{gate,up,down}.E.weight"; HF llama/mixtral q/k rows are
 * permuted to GGUF's interleaved rope order on read (permute_heads);
 * gpt-oss's fused MXFP4 experts and interleaved gate/up biases, fused
 * gate_up_proj experts, and DeepSeek's kv_b_proj, are split and re-laid
 * as llama.cpp's converter does (gather); the values HF stores otherwise
 * (norms as w - 1, A_log, Qwen3.5's value heads grouped by key head) are
 * transformed on read (hf_flags, the table's RKM_TF_HF_*).
 *
 * Threads: immutable after open; reads use pread. Ownership:
 * rkm_source_close frees everything.
 */
#ifndef RKM_SOURCE_H
#define RKM_SOURCE_H

#include <stdint.h>

#include "format/gguf.h"
#include "format/hparams.h"
#include "format/model_dir.h"

typedef struct rkm_src_tensor {
    char *name;         /* GGUF name */
    int type;           /* enum rkm_type */
    int n_dims;
    int64_t ne[4];
    uint64_t nbytes;
    int file;           /* index into the source's files */
    const void *handle; /* reader's tensor */
    int permute_heads;  /* >0: HF rotate-half rows of this many heads -> interleaved */
    void *inline_data;  /* derived tensors (Gemma 4's rope_freqs): owned bytes */
    /* rows assembled from HF tensors (gpt-oss's fused experts, source.c) */
    int gather;         /* enum rkm_gather */
    const void *handle2; /* RKM_GATHER_MXFP4: the scales tensor, in file2 */
    int file2;
    int src_stride, src_off; /* MXFP4: source row r*stride + off; HALF: elements 2i + off;
                              * SPLIT: expert e's row i is source row (e*stride + off)*ne[1] + i */
    int role;           /* enum rkm_tensor_role of HF tensors (arch.h) */
    int hf_flags;       /* RKM_TF_HF_PLUS_ONE / _NEG_EXP / _VHEADS to apply on read */
    int src_type;       /* the stored type when hf_flags change values (type is then f32) */
} rkm_src_tensor;

enum rkm_gather {
    RKM_GATHER_NONE = 0,
    RKM_GATHER_MXFP4,   /* HF MXFP4 blocks [rows, nb, 16] + e8m0 scales [rows, nb] -> ggml MXFP4 rows */
    RKM_GATHER_HALF,    /* every other element of each source row (interleaved gate/up biases) */
    RKM_GATHER_KV_B,    /* DeepSeek's kv_b_proj split per head: attn_k_b (src_off 0), attn_v_b (1) */
    RKM_GATHER_SPLIT    /* fused experts' gate_up_proj [E, 2F, H]: gate rows (src_off 0) or up rows (1) */
};

typedef struct rkm_source {
    int kind;           /* 0 GGUF, 1 HF */
    char *desc;         /* for the manifest's "source" */
    rkm_hparams hp;
    int n_tensors;
    rkm_src_tensor *tensors;
    uint64_t total_bytes;
    rkm_gguf *gguf;     /* kind 0 */
    int n_files;        /* kind 1 */
    struct rkm_safetensors **st;
    char *hf_dir;
    char *chat_template; /* from GGUF tokenizer.chat_template or tokenizer_config.json; NULL if none */
    rkm_sampling_hint sampling; /* GGUF general.sampling.* or generation_config.json; set 0 if none */
    rkm_name_index ix;  /* tensor name -> index, for rkm_source_find */
} rkm_source;

rkm_source *rkm_source_open(const char *path);
/* A GGUF whose bytes arrive while it is read (rkm_gguf_open_fill). */
rkm_source *rkm_source_open_gguf_fill(const char *path, rkm_gguf_fill fill, void *user);
/* The shards model.safetensors.index.json in dir names (its weight_map's
 * values, each once), sorted by name: *names a malloc'd array of n
 * malloc'd names. 0; RKM_ENOENT when dir has no index (nothing
 * allocated); RKM_EFORMAT for a bad index (no weight_map, a name with
 * '/', none). */
int rkm_hf_index_shards(const char *dir, char ***names, int *n);
/* A Hugging Face directory (config.json, tokenizer files) whose n
 * safetensors shards are not files in it: open(user, i, names[i]) opens
 * each (rkm_safetensors_open_fill, for rkmojo pull); tensor file i is
 * names[i]. */
typedef struct rkm_safetensors *(*rkm_st_opener)(void *user, int i, const char *name);
rkm_source *rkm_source_open_hf_shards(const char *dir, int n, const char *const *names, rkm_st_opener open, void *user);
void rkm_source_close(rkm_source *s);
const rkm_src_tensor *rkm_source_find(const rkm_source *s, const char *name);
/* The tensor of role (arch.h) in layer il (-1: global), by its GGUF name; NULL if absent. */
const rkm_src_tensor *rkm_source_role(const rkm_source *s, int role, int il);
/* Reads rows [r0, r0+nr) of a tensor viewed as a matrix of ne[0]-wide rows
 * (all higher dims flattened), applying the q/k permutation if any. */
int rkm_source_read_rows(const rkm_source *s, const rkm_src_tensor *t, int64_t r0, int64_t nr, void *buf);

/* The bytes of the source's files that reading [off, off + len) of t
 * touches, as at most 2 spans (file index, offset in that file, length;
 * a GGUF is file 0): exact for a tensor stored as it is read (*exact 1);
 * for one the reader re-lays (permuted or re-valued rows, gathers) the
 * span covers what the read may touch, mapped in proportion where rows
 * are not one to one, so that consecutive ranges give consecutive spans
 * (*exact 0: bytes of one range's span may be read for another's).
 * Returns the number of spans (0: t is derived, in memory). */
typedef struct rkm_file_span {
    int file;
    uint64_t off, len;
} rkm_file_span;
int rkm_source_file_spans(const rkm_source *s, const rkm_src_tensor *t, uint64_t off, uint64_t len, rkm_file_span out[2],
                          int *exact);

/* Maps a Hugging Face tensor name of arch to a GGUF name (NULL if unknown);
 * *permute gets the head count for q/k rows that need the rope permutation. */
char *rkm_hf_name_to_gguf(int arch, const char *hf, const rkm_hparams *hp, int *permute);
/* The reverse, for writing HF checkpoints (synth --hf-out); expert e is
 * used for per-expert names. NULL if the tensor has no HF name. */
char *rkm_gguf_name_to_hf(int arch, const char *gguf_name, int expert);
/* Qwen3.5's value heads (RKM_TF_HF_VHEADS): HF groups them by key head
 * (key head g's value heads together), GGUF tiles them (value head j of
 * every key head together). For role's tensor: 0 if it has no value-head
 * axis, 1 if its rows carry them, 2 if the elements of each row do; *off
 * gets the first index of the value part, *hd the indices per head. */
int rkm_hf_vheads(const rkm_hparams *hp, int role, int64_t *off, int64_t *hd);
/* Index i of the GGUF layout in the HF one (to_hf), or the reverse. */
int64_t rkm_hf_vhead_index(const rkm_hparams *hp, int64_t i, int64_t off, int64_t hd, int to_hf);

#endif
