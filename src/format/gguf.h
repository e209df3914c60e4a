/*
 * gguf.h - reading and writing GGUF files (v2 and v3).
 *
 * Layout (little-endian): magic "GGUF", u32 version, u64 n_tensors,
 * u64 n_kv; n_kv key/value pairs (string key, u32 value type, value);
 * n_tensors tensor infos (string name, u32 n_dims, u64 ne[n_dims], u32 ggml
 * type, u64 offset relative to the data section); padding to
 * general.alignment (default 32); the data section. Strings are u64 length
 * + bytes (no NUL). Arrays are u32 element type + u64 count + elements.
 *
 * The reader parses the header, every key/value and every tensor info into
 * memory, validating every length and offset against the file size, and
 * never maps the data: tensor bytes are read on demand with pread, so a
 * 17 GB file costs only its metadata. Untrusted input: every failure is an
 * RKM_E* code with a message, never a crash.
 *
 * Threads: a rkm_gguf is immutable after open; rkm_gguf_read may be called
 * from several threads at once (pread). The writer is single-threaded.
 * Ownership: rkm_gguf_close frees everything the reader returned.
 */
#ifndef RKM_GGUF_H
#define RKM_GGUF_H

#include <stddef.h>
#include <stdint.h>

enum rkm_gguf_vtype {
    RKM_GGUF_UINT8 = 0,
    RKM_GGUF_INT8 = 1,
    RKM_GGUF_UINT16 = 2,
    RKM_GGUF_INT16 = 3,
    RKM_GGUF_UINT32 = 4,
    RKM_GGUF_INT32 = 5,
    RKM_GGUF_FLOAT32 = 6,
    RKM_GGUF_BOOL = 7,
    RKM_GGUF_STRING = 8,
    RKM_GGUF_ARRAY = 9,
    RKM_GGUF_UINT64 = 10,
    RKM_GGUF_INT64 = 11,
    RKM_GGUF_FLOAT64 = 12,
    RKM_GGUF_VTYPE_COUNT
};

#define RKM_GGUF_MAX_DIMS 4

typedef struct rkm_gguf_tensor {
    char *name;
    int n_dims;
    int64_t ne[RKM_GGUF_MAX_DIMS]; /* ne[0] is the contiguous dimension; unused = 1 */
    int type;                      /* enum rkm_type (ggml numbering) */
    uint64_t offset;               /* absolute file offset of the data */
    uint64_t nbytes;
} rkm_gguf_tensor;

typedef struct rkm_gguf rkm_gguf;

/* Opens and validates path. NULL + rkm_last_error() on failure. */
rkm_gguf *rkm_gguf_open(const char *path);
/* A GGUF whose bytes arrive while it is read (rkmojo pull): path is a
 * sparse file of the source's full size, and fill(user, off, n) is called
 * before every read of [off, off+n) to make those bytes present; its
 * nonzero return (an RKM_E* code, message set) fails the read. fill may be
 * called from several threads at once. */
typedef int (*rkm_gguf_fill)(void *user, uint64_t off, uint64_t n);
rkm_gguf *rkm_gguf_open_fill(const char *path, rkm_gguf_fill fill, void *user);
/* Same, from a memory buffer (fuzzing, tests); the buffer must outlive g. */
rkm_gguf *rkm_gguf_open_mem(const void *data, size_t n);
void rkm_gguf_close(rkm_gguf *g);

uint32_t rkm_gguf_version(const rkm_gguf *g);
uint64_t rkm_gguf_alignment(const rkm_gguf *g);
uint64_t rkm_gguf_file_size(const rkm_gguf *g);

/* key/values */
int rkm_gguf_n_kv(const rkm_gguf *g);
const char *rkm_gguf_key(const rkm_gguf *g, int i);
int rkm_gguf_find(const rkm_gguf *g, const char *key); /* index or -1 */
int rkm_gguf_vtype(const rkm_gguf *g, int i);
/* Scalars, converting between integer types / between float types;
 * return 0, or RKM_ENOENT (missing) / RKM_EFORMAT (wrong type). */
int rkm_gguf_get_int(const rkm_gguf *g, const char *key, int64_t *out);
int rkm_gguf_get_float(const rkm_gguf *g, const char *key, double *out); /* ints accepted too */
int rkm_gguf_get_bool(const rkm_gguf *g, const char *key, int *out);
const char *rkm_gguf_get_str(const rkm_gguf *g, const char *key); /* NUL-terminated or NULL */
/* Arrays: element type and count (0/-1 if key is not an array). */
int rkm_gguf_arr_type(const rkm_gguf *g, int i);
uint64_t rkm_gguf_arr_n(const rkm_gguf *g, int i);
/* Raw little-endian elements of a numeric array (NULL for string arrays). */
const void *rkm_gguf_arr_data(const rkm_gguf *g, int i);
/* Element j of a string array, NUL-terminated; *len gets its length (the
 * string may contain NUL bytes). */
const char *rkm_gguf_arr_str(const rkm_gguf *g, int i, uint64_t j, size_t *len);
/* Numeric array element j as int64 / double (any numeric type). */
int64_t rkm_gguf_arr_int(const rkm_gguf *g, int i, uint64_t j);
double rkm_gguf_arr_float(const rkm_gguf *g, int i, uint64_t j);

/* tensors */
int rkm_gguf_n_tensors(const rkm_gguf *g);
const rkm_gguf_tensor *rkm_gguf_tensor_at(const rkm_gguf *g, int i);
const rkm_gguf_tensor *rkm_gguf_tensor_find(const rkm_gguf *g, const char *name);
/* Reads n bytes at off inside tensor t's data (bounds-checked). */
int rkm_gguf_read(const rkm_gguf *g, const rkm_gguf_tensor *t, uint64_t off,
                  void *buf, size_t n);

/* ------------------------------------------------------------- writer
 * Usage: w = rkm_gguf_writer_new(); set keys; add tensor infos (name, type,
 * shape); rkm_gguf_writer_begin(w, path) writes header + infos; then
 * rkm_gguf_writer_write_tensor for each tensor in the order added, with
 * exactly its bytes (may be called in pieces with write_data); finally
 * rkm_gguf_writer_finish. Output is deterministic. */
typedef struct rkm_gguf_writer rkm_gguf_writer;
rkm_gguf_writer *rkm_gguf_writer_new(void);
void rkm_gguf_writer_free(rkm_gguf_writer *w);
void rkm_gguf_writer_set_u32(rkm_gguf_writer *w, const char *key, uint32_t v);
void rkm_gguf_writer_set_i32(rkm_gguf_writer *w, const char *key, int32_t v);
void rkm_gguf_writer_set_f32(rkm_gguf_writer *w, const char *key, float v);
void rkm_gguf_writer_set_bool(rkm_gguf_writer *w, const char *key, int v);
void rkm_gguf_writer_set_str(rkm_gguf_writer *w, const char *key, const char *v);
/* Numeric array of n elements of vtype (copied). */
void rkm_gguf_writer_set_arr(rkm_gguf_writer *w, const char *key, int vtype,
                             const void *data, uint64_t n);
/* String array (copied); lens may be NULL for NUL-terminated strings. */
void rkm_gguf_writer_set_arr_str(rkm_gguf_writer *w, const char *key,
                                 const char *const *strs, const size_t *lens,
                                 uint64_t n);
/* Copies key i of reader g (any type, arrays included). */
void rkm_gguf_writer_copy_kv(rkm_gguf_writer *w, const rkm_gguf *g, int i);
int rkm_gguf_writer_add_tensor(rkm_gguf_writer *w, const char *name, int type,
                               int n_dims, const int64_t *ne);
int rkm_gguf_writer_begin(rkm_gguf_writer *w, const char *path);
int rkm_gguf_writer_write_data(rkm_gguf_writer *w, const void *p, size_t n);
int rkm_gguf_writer_finish(rkm_gguf_writer *w);

#endif
