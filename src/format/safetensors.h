/*
 * safetensors.h - reading Hugging Face safetensors files.
 *
 * Layout: u64 little-endian N, then N bytes of JSON: {"name": {"dtype":
 * "BF16"|"F16"|"F32"|..., "shape": [..], "data_offsets": [begin, end]},
 * "__metadata__": {...}}, then the data; offsets are relative to the end
 * of the header. Shapes are row-major (last dimension contiguous), so
 * shape [out, in] is ggml ne = [in, out].
 *
 * Like the GGUF reader: the header is parsed and validated in memory, data
 * is read on demand with pread. Immutable after open; any thread may read.
 */
#ifndef RKM_SAFETENSORS_H
#define RKM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef struct rkm_st_tensor {
    char *name;
    int type;         /* enum rkm_type (F32, F16, BF16), -1 for others */
    char dtype[16];   /* as written */
    int n_dims;
    int64_t ne[4];    /* ggml order: ne[0] = last safetensors dim */
    uint64_t offset;  /* absolute file offset (in path, base included) */
    uint64_t nbytes;
} rkm_st_tensor;

typedef struct rkm_safetensors rkm_safetensors;

rkm_safetensors *rkm_safetensors_open(const char *path);
/* A safetensors file whose bytes arrive while it is read (rkmojo pull):
 * bytes [base, base + size) of path, a sparse file, hold it (messages
 * and rkm_safetensors_path say name); fill(user,
 * off, n) is called with offsets in path before every read of [off,
 * off + n) to make those bytes present; its nonzero return (an RKM_E*
 * code, message set) fails the read. fill may be called from several
 * threads at once. */
typedef int (*rkm_st_fill)(void *user, uint64_t off, uint64_t n);
rkm_safetensors *rkm_safetensors_open_fill(const char *path, const char *name, uint64_t base, uint64_t size,
                                           rkm_st_fill fill, void *user);
/* From memory (fuzzing); buffer must outlive the object. */
rkm_safetensors *rkm_safetensors_open_mem(const void *data, size_t n);
void rkm_safetensors_close(rkm_safetensors *s);
int rkm_safetensors_n_tensors(const rkm_safetensors *s);
const rkm_st_tensor *rkm_safetensors_tensor_at(const rkm_safetensors *s, int i);
const rkm_st_tensor *rkm_safetensors_find(const rkm_safetensors *s, const char *name);
int rkm_safetensors_read(const rkm_safetensors *s, const rkm_st_tensor *t, uint64_t off, void *buf, size_t n);
const char *rkm_safetensors_path(const rkm_safetensors *s);

/* Writer (used by `rkmojo synth --hf-out`): tensors are declared first,
 * then their data streamed in order. */
typedef struct rkm_st_writer rkm_st_writer;
rkm_st_writer *rkm_st_writer_new(void);
void rkm_st_writer_free(rkm_st_writer *w);
/* Raw bytes (dtype "U8": gpt-oss's MXFP4 blocks and scales), for the writer. */
#define RKM_ST_U8 (-2)
/* type: F32/F16/BF16 or RKM_ST_U8; ne in ggml order. */
int rkm_st_writer_add(rkm_st_writer *w, const char *name, int type, int n_dims, const int64_t *ne);
int rkm_st_writer_begin(rkm_st_writer *w, const char *path);
int rkm_st_writer_write(rkm_st_writer *w, const void *p, size_t n);
int rkm_st_writer_finish(rkm_st_writer *w);

#endif
