/*
 * model_dir.h - a .rkmojo model directory: its manifest, its resident
 * weights and its per-layer expert files (layout in docs/FORMAT.md).
 *
 *   manifest.json          format version, hparams, tensor index, experts
 *   resident.bin           resident tensors, each 64-byte aligned (mmap)
 *   experts/blk.N.bin      layer N's routed experts: blob e at e*blob_stride,
 *                          one blob = gate | up | down, padded to 4096
 *   tokenizer.gguf or tokenizer.json (+ tokenizer_config.json)
 *   chat_template.jinja    (optional)
 *
 * Owns: the parsed manifest, the read-only mapping of resident.bin (and its
 * descriptor, for rkm_model_dir_pread) and the file descriptors of the
 * expert files. Immutable after open, so any thread may read tensors and
 * call rkm_model_dir_read_expert / rkm_model_dir_pread concurrently.
 * rkm_model_dir_close frees everything, views included.
 */
#ifndef RKM_MODEL_DIR_H
#define RKM_MODEL_DIR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "format/hparams.h"
#include "util/common.h"
#include "util/name_index.h"

#define RKM_FORMAT_VERSION 1
#define RKM_RESIDENT_ALIGN 64
#define RKM_EXPERT_ALIGN 4096

typedef struct rkm_tensor_view {
    char *name;
    int type;          /* enum rkm_type */
    int n_dims;
    int64_t ne[4];     /* ne[0] contiguous; unused dims 1 */
    uint64_t offset;   /* in resident.bin */
    uint64_t nbytes;
    uint64_t checksum; /* XXH3-64 of the bytes */
    const void *data;  /* into the mapping (NULL if not mapped) */
} rkm_tensor_view;

/* One matrix inside an expert blob. */
typedef struct rkm_expert_part {
    int type;
    int64_t ne[2];     /* ne[0] = input dim, ne[1] = output rows */
    uint64_t offset;   /* inside the blob */
    uint64_t nbytes;
} rkm_expert_part;

enum { RKM_PART_GATE = 0, RKM_PART_UP = 1, RKM_PART_DOWN = 2, RKM_PART_COUNT = 3 };

typedef struct rkm_expert_layer {
    int layer;
    char *file;            /* relative to the model directory */
    int n_expert;
    uint64_t blob_stride;  /* multiple of 4096 */
    uint64_t blob_bytes;   /* meaningful bytes (<= stride), checksummed */
    rkm_expert_part part[RKM_PART_COUNT];
    uint64_t *checksums;   /* n_expert XXH3-64 of the blob_bytes */
    int fd;                /* -1 until opened */
    rkm_file_stamp stamp;  /* the file as opened */
} rkm_expert_layer;

/* The sampling settings the model's authors recommend (GGUF
 * general.sampling.*, Hugging Face generation_config.json), stored in the
 * manifest's "sampling" object; only the fields whose bit is in `set`. */
enum {
    RKM_SAMPLING_TEMPERATURE = 1 << 0,
    RKM_SAMPLING_TOP_K = 1 << 1,
    RKM_SAMPLING_TOP_P = 1 << 2,
    RKM_SAMPLING_MIN_P = 1 << 3,
    RKM_SAMPLING_REPEAT_PENALTY = 1 << 4,
    RKM_SAMPLING_REPEAT_LAST_N = 1 << 5,
};
typedef struct rkm_sampling_hint {
    unsigned set;
    float temperature; /* 0: greedy */
    int top_k;
    float top_p, min_p, repeat_penalty;
    int repeat_last_n;
} rkm_sampling_hint;

/* 1 for the integer fields (top_k, repeat_last_n). */
int rkm_sampling_hint_is_int(unsigned bit);
/* Sets the field of `bit` to v after checking its range (temperature
 * 0..100, top_k 0..1e9, top_p and min_p 0..1, repeat_penalty 0..100,
 * repeat_last_n -1..1e9); RKM_EFORMAT naming the field otherwise, the
 * message prefixed with `what`. Every reader (manifest, GGUF, Hugging
 * Face) sets hints through here. */
int rkm_sampling_hint_set(rkm_sampling_hint *h, unsigned bit, double v, const char *what);

typedef struct rkm_model_dir {
    char *path;
    int version;
    rkm_hparams hp;
    char *source;              /* what it was converted from */
    char *quant;               /* converter's --quant */
    int n_tensors;
    rkm_tensor_view *tensors;
    int n_expert_layers;
    rkm_expert_layer *experts; /* sorted by layer */
    char *tokenizer_file;      /* relative; NULL if none */
    char *tokenizer_config_file;
    char *chat_template_file;
    char *mmproj_file;         /* the vision tower (an mmproj GGUF, format/vision.h), relative; NULL if none */
    uint64_t mmproj_bytes, mmproj_checksum; /* its size and XXH3-64 */
    rkm_sampling_hint sampling; /* the authors' recommended sampling, if any */
    uint64_t resident_bytes;   /* size of resident.bin */
    void *map;                 /* resident.bin mapping */
    uint64_t map_bytes;
    int resident_fd;           /* resident.bin, open while mapped; -1 */
    int map_guard;             /* util/mapguard.h slot of the mapping, -1 */
    rkm_file_stamp manifest_stamp, resident_stamp; /* as opened */
    rkm_name_index ix;         /* tensor name -> index (a parsed manifest) */
} rkm_model_dir;

/* Manifest only (no mapping), for inspect and tests. */
rkm_model_dir *rkm_model_dir_load_manifest(const char *dir);
/* Parses a manifest from memory (fuzzing). */
rkm_model_dir *rkm_model_dir_parse_manifest(const char *json, size_t n, const char *dir);
/* Manifest + mmap of resident.bin + expert files opened (buffered). */
rkm_model_dir *rkm_model_dir_open(const char *dir);
void rkm_model_dir_close(rkm_model_dir *md);

/* The resident tensor named name, or NULL (a parsed manifest: O(1)). */
const rkm_tensor_view *rkm_model_dir_tensor(const rkm_model_dir *md, const char *name);
/* The tensor of role (arch.h) in layer il (-1: global), NULL if absent. */
const rkm_tensor_view *rkm_model_dir_role(const rkm_model_dir *md, int role, int il);
/* Bytes of token_embd.weight when it is only looked up, a row per token
 * (the LM head is output.weight); 0 when it is also the LM head (tied). */
uint64_t rkm_model_dir_lookup_embd_bytes(const rkm_model_dir *md);
/* n bytes of resident.bin at off into dst (buffered pread: the page cache,
 * not the process, holds them). RKM_EIO with the reason on a failed or
 * short read. Thread-safe. */
int rkm_model_dir_pread(const rkm_model_dir *md, uint64_t off, void *dst, size_t n);
/* Expert layer of layer il or NULL. */
const rkm_expert_layer *rkm_model_dir_expert_layer(const rkm_model_dir *md, int il);
/* Reads blob e of layer il into buf (blob_stride bytes); verify: check the
 * checksum. Used by the converter's tests and the non-streaming path; the
 * streaming engine reads with O_DIRECT itself using the same offsets. */
int rkm_model_dir_read_expert(const rkm_model_dir *md, int il, int e, void *buf, int verify);
/* Checks every checksum (the vision tower's too); on failure the message
 * names the first bad tensor, expert (layer, index) or file. */
int rkm_model_dir_verify(const rkm_model_dir *md);
/* The resident tensors' checksums only, read with pread in pieces (the
 * page cache: neither the mapping nor the lookup-only embeddings enter the
 * process). 0, 1 when *stop was set (stop may be NULL), or an error whose
 * message names the tensor. Safe on any thread. */
int rkm_model_dir_verify_resident(const rkm_model_dir *md, atomic_int *stop);

/* Are the files on disk still the ones open? 0 when they are; 1 when
 * manifest.json, resident.bin or an expert file was replaced, rewritten
 * in place or removed (rkm_last_error() names it). A few stat calls. */
int rkm_model_dir_changed(const rkm_model_dir *md);
/* 0 while the mapping of resident.bin is whole; RKM_EIO (with the message)
 * once the file shrank under it: reads past its new end gave zeros
 * (util/mapguard.h), so whatever used them is wrong. */
int rkm_model_dir_mapping_ok(const rkm_model_dir *md);

/* Writes manifest.json for md atomically (temp, fsync, rename). */
int rkm_model_dir_write_manifest(const rkm_model_dir *md, const char *dir);

/* A conversion's progress (a resumable one: rkmojo pull): md as far as it
 * got (resident.bin and the first expert layers, with their checksums) in
 * the manifest's form plus key (the source and options it converts), in
 * dir/.convert-progress.json, written atomically, with the caller's note
 * (NULL: none). load_progress returns it if its key is key, and its note
 * in *note (malloc'd, NULL if none; note may be NULL); NULL otherwise,
 * with *other = 1 when a progress of another key (or an unreadable one)
 * is there. remove_progress deletes it and the temporaries (NAME.tmpPID.N)
 * that atomic writes killed before their rename left in dir. A progress
 * file is never taken for a manifest. */
int rkm_model_dir_write_progress(const rkm_model_dir *md, const char *dir, const char *key, const char *note);
rkm_model_dir *rkm_model_dir_load_progress(const char *dir, const char *key, int *other, char **note);
void rkm_model_dir_remove_progress(const char *dir);
/* Of a loaded progress: 0 if resident.bin does not hold what it lists
 * (every tensor's checksum read back), else 1 + how many of its expert
 * layers, in order, do (every blob's checksum). Opens the files it reads
 * (closed with md). */
int rkm_model_dir_verified_prefix(rkm_model_dir *md);

#endif
