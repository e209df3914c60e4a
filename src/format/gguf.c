/*
 * gguf.c - GGUF reader and writer (format described in gguf.h).
 *
 * Reader: one pass over the metadata through a small buffered cursor that
 * checks every length against the bytes that remain, so a corrupt count or
 * offset is an error, not a huge allocation or a read past the end. Tensor
 * data is never loaded: rkm_gguf_read preads what the caller asks for.
 * Writer: key/values are serialized as they are set; tensor data is
 * streamed in order, with alignment padding inserted between tensors; the
 * file is written under a temporary name and renamed by finish, so a
 * failed or interrupted write never leaves a complete-looking file.
 *
 * Threads: readers are immutable after open (pread is thread-safe; a
 * fill callback must be too).
 * Ownership: the reader owns all strings/arrays it returns; close frees.
 */
#include "format/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/quant.h"
#include "util/buf.h"
#include "util/common.h"
#include "util/name_index.h"
#include "util/ranges.h"

#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MAX_KEY 65536

typedef struct {
    char *key;
    int type;
    union {
        uint64_t u;
        int64_t i;
        double f;
    } v;
    char *str; /* string value (NUL-terminated copy) */
    uint64_t str_len;
    int arr_type;
    uint64_t arr_n;
    void *arr;          /* numeric elements, raw */
    char **arr_strs;    /* string elements */
    uint64_t *arr_lens;
} kv_t;

struct rkm_gguf {
    int fd;
    rkm_gguf_fill fill; /* rkm_gguf_open_fill: makes bytes present before a read */
    void *fill_user;
    int dfd; /* O_DIRECT descriptor for large tensor reads, or -1 */
    const uint8_t *mem;
    uint64_t size;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_off;
    int n_kv;
    kv_t *kv;
    int n_tensors;
    rkm_gguf_tensor *tensors;
    char *path;
    /* name -> index: lookups and the duplicate checks stay linear in the
     * file, whatever its counts */
    rkm_name_index kv_ix, t_ix;
};

static const char *kv_name(const void *ctx, int i) { return ((const rkm_gguf *)ctx)->kv[i].key; }
static const char *t_name(const void *ctx, int i) { return ((const rkm_gguf *)ctx)->tensors[i].name; }

/* ------------------------------------------------------------ cursor */

typedef struct {
    rkm_gguf *g;
    uint64_t pos;
    uint8_t buf[1 << 16];
    uint64_t buf_off;
    size_t buf_len;
    const char *what; /* path for messages */
} cursor;

static int cur_read(cursor *c, void *dst, uint64_t n)
{
    if (n > c->g->size || c->pos > c->g->size - n)
        return rkm_err(RKM_EFORMAT, "%s: truncated GGUF (need %llu bytes at offset %llu, file has %llu)",
                       c->what, (unsigned long long)n, (unsigned long long)c->pos,
                       (unsigned long long)c->g->size);
    if (c->g->mem) {
        memcpy(dst, c->g->mem + c->pos, n);
        c->pos += n;
        return 0;
    }
    uint8_t *d = dst;
    while (n > 0) {
        if (c->pos >= c->buf_off && c->pos < c->buf_off + c->buf_len) {
            size_t k = (size_t)RKM_MIN(n, c->buf_off + c->buf_len - c->pos);
            memcpy(d, c->buf + (c->pos - c->buf_off), k);
            d += k;
            n -= k;
            c->pos += k;
            continue;
        }
        uint64_t want = RKM_MIN((uint64_t)sizeof c->buf, c->g->size - c->pos);
        int rc = c->g->fill ? c->g->fill(c->g->fill_user, c->pos, want) : 0;
        if (!rc) rc = rkm_pread_all(c->g->fd, c->buf, (size_t)want, c->pos, c->what);
        if (rc) return rc;
        c->buf_off = c->pos;
        c->buf_len = (size_t)want;
    }
    return 0;
}

static int cur_u32(cursor *c, uint32_t *v)
{
    uint8_t b[4];
    int rc = cur_read(c, b, 4);
    if (!rc) *v = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
    return rc;
}

static int cur_u64(cursor *c, uint64_t *v)
{
    uint8_t b[8];
    int rc = cur_read(c, b, 8);
    if (rc) return rc;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = (x << 8) | b[i];
    *v = x;
    return 0;
}

static uint64_t cur_left(const cursor *c) { return c->g->size - c->pos; }

static int cur_str(cursor *c, char **out, uint64_t *len_out, uint64_t max)
{
    uint64_t n;
    int rc = cur_u64(c, &n);
    if (rc) return rc;
    if (n > cur_left(c) || n > max)
        return rkm_err(RKM_EFORMAT, "%s: string of absurd length %llu at offset %llu", c->what,
                       (unsigned long long)n, (unsigned long long)c->pos);
    char *s = malloc(n + 1);
    if (!s) return rkm_err(RKM_ENOMEM, "out of memory");
    rc = cur_read(c, s, n);
    if (rc) {
        free(s);
        return rc;
    }
    s[n] = 0;
    *out = s;
    if (len_out) *len_out = n;
    return 0;
}

static size_t vtype_size(int t)
{
    switch (t) {
    case RKM_GGUF_UINT8: case RKM_GGUF_INT8: case RKM_GGUF_BOOL: return 1;
    case RKM_GGUF_UINT16: case RKM_GGUF_INT16: return 2;
    case RKM_GGUF_UINT32: case RKM_GGUF_INT32: case RKM_GGUF_FLOAT32: return 4;
    case RKM_GGUF_UINT64: case RKM_GGUF_INT64: case RKM_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* Decodes a little-endian scalar of numeric type t from p into kv. */
static void scalar_from(kv_t *kv, int t, const uint8_t *p)
{
    uint64_t raw = 0;
    size_t n = vtype_size(t);
    for (size_t i = n; i-- > 0;) raw = (raw << 8) | p[i];
    switch (t) {
    case RKM_GGUF_INT8: kv->v.i = (int8_t)raw; break;
    case RKM_GGUF_INT16: kv->v.i = (int16_t)raw; break;
    case RKM_GGUF_INT32: kv->v.i = (int32_t)raw; break;
    case RKM_GGUF_INT64: kv->v.i = (int64_t)raw; break;
    case RKM_GGUF_FLOAT32: {
        uint32_t u = (uint32_t)raw;
        float f;
        memcpy(&f, &u, 4);
        kv->v.f = f;
        break;
    }
    case RKM_GGUF_FLOAT64: memcpy(&kv->v.f, &raw, 8); break;
    default: kv->v.u = raw; break;
    }
}

static int read_value(cursor *c, kv_t *kv)
{
    int rc;
    if (kv->type == RKM_GGUF_STRING) return cur_str(c, &kv->str, &kv->str_len, UINT64_MAX);
    if (kv->type == RKM_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if ((rc = cur_u32(c, &et)) || (rc = cur_u64(c, &n))) return rc;
        kv->arr_type = (int)et;
        if (et == RKM_GGUF_ARRAY)
            return rkm_err(RKM_EFORMAT, "%s: key '%s': nested arrays are not supported", c->what, kv->key);
        if (et == RKM_GGUF_STRING) {
            if (n > cur_left(c) / 8)
                return rkm_err(RKM_EFORMAT, "%s: key '%s': array count %llu exceeds the file", c->what,
                               kv->key, (unsigned long long)n);
            kv->arr_strs = calloc(n ? n : 1, sizeof(char *));
            kv->arr_lens = calloc(n ? n : 1, sizeof(uint64_t));
            if (!kv->arr_strs || !kv->arr_lens) return rkm_err(RKM_ENOMEM, "out of memory");
            kv->arr_n = n;
            for (uint64_t j = 0; j < n; j++)
                if ((rc = cur_str(c, &kv->arr_strs[j], &kv->arr_lens[j], UINT64_MAX))) return rc;
            return 0;
        }
        size_t es = vtype_size((int)et);
        if (!es) return rkm_err(RKM_EFORMAT, "%s: key '%s': unknown array element type %u", c->what, kv->key, et);
        if (n > cur_left(c) / es)
            return rkm_err(RKM_EFORMAT, "%s: key '%s': array count %llu exceeds the file", c->what, kv->key,
                           (unsigned long long)n);
        kv->arr = malloc(n > 0 ? n * es : 1);
        if (!kv->arr) return rkm_err(RKM_ENOMEM, "out of memory");
        kv->arr_n = n;
        return cur_read(c, kv->arr, n * es);
    }
    size_t es = vtype_size(kv->type);
    if (!es) return rkm_err(RKM_EFORMAT, "%s: key '%s': unknown value type %d", c->what, kv->key, kv->type);
    uint8_t b[8];
    if ((rc = cur_read(c, b, es))) return rc;
    scalar_from(kv, kv->type, b);
    return 0;
}

static void t_range(const void *ctx, int i, uint64_t *off, uint64_t *len)
{
    const rkm_gguf_tensor *t = &((const rkm_gguf *)ctx)->tensors[i];
    *off = t->offset;
    *len = t->nbytes;
}

static int parse(rkm_gguf *g, const char *what)
{
    cursor *c = calloc(1, sizeof *c);
    if (!c) return rkm_err(RKM_ENOMEM, "out of memory");
    c->g = g;
    c->what = what;
    int rc;
    uint8_t magic[4];
    uint32_t version;
    uint64_t n_tensors, n_kv;
    if ((rc = cur_read(c, magic, 4))) goto out;
    if (memcmp(magic, "GGUF", 4) != 0) {
        rc = rkm_err(RKM_EFORMAT, "%s: not a GGUF file (bad magic)", what);
        goto out;
    }
    if ((rc = cur_u32(c, &version))) goto out;
    if (version != 2 && version != 3) {
        rc = rkm_err(RKM_EUNSUPPORTED, "%s: GGUF version %u is not supported (2 or 3)", what, version);
        goto out;
    }
    g->version = version;
    if ((rc = cur_u64(c, &n_tensors)) || (rc = cur_u64(c, &n_kv))) goto out;
    /* every tensor info is at least 8+4+8+4+8 bytes, every kv at least 8+4+1 */
    if (n_tensors > cur_left(c) / 32 || n_kv > cur_left(c) / 13 || n_tensors > 1000000 || n_kv > 1000000) {
        rc = rkm_err(RKM_EFORMAT, "%s: absurd counts (%llu tensors, %llu keys)", what,
                     (unsigned long long)n_tensors, (unsigned long long)n_kv);
        goto out;
    }
    g->kv = calloc(n_kv ? n_kv : 1, sizeof(kv_t));
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof(rkm_gguf_tensor));
    if (!g->kv || !g->tensors || rkm_name_index_init(&g->kv_ix, n_kv) || rkm_name_index_init(&g->t_ix, n_tensors)) {
        rc = rkm_err(RKM_ENOMEM, "out of memory");
        goto out;
    }
    g->alignment = GGUF_DEFAULT_ALIGN;
    for (uint64_t i = 0; i < n_kv; i++) {
        kv_t *kv = &g->kv[i];
        uint32_t t;
        if ((rc = cur_str(c, &kv->key, NULL, GGUF_MAX_KEY))) goto out;
        g->n_kv = (int)i + 1;
        if ((rc = cur_u32(c, &t))) goto out;
        kv->type = (int)t;
        if ((rc = read_value(c, kv))) goto out;
        if (rkm_name_index_add(&g->kv_ix, kv->key, (int)i, kv_name, g) >= 0) {
            rc = rkm_err(RKM_EFORMAT, "%s: duplicate key '%s'", what, kv->key);
            goto out;
        }
        if (!strcmp(kv->key, "general.alignment")) {
            if (kv->type != RKM_GGUF_UINT32 || kv->v.u == 0 || (kv->v.u & (kv->v.u - 1)) || kv->v.u > 65536) {
                rc = rkm_err(RKM_EFORMAT, "%s: bad general.alignment", what);
                goto out;
            }
            g->alignment = kv->v.u;
        }
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        rkm_gguf_tensor *t = &g->tensors[i];
        uint32_t nd, type;
        if ((rc = cur_str(c, &t->name, NULL, 4096))) goto out;
        g->n_tensors = (int)i + 1;
        if ((rc = cur_u32(c, &nd))) goto out;
        if (nd < 1 || nd > RKM_GGUF_MAX_DIMS) {
            rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s' has %u dimensions", what, t->name, nd);
            goto out;
        }
        t->n_dims = (int)nd;
        uint64_t nel = 1;
        for (int d = 0; d < RKM_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t ne;
            if ((rc = cur_u64(c, &ne))) goto out;
            if (ne == 0 || ne > (1ull << 40) || nel > (1ull << 50) / ne) {
                rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s' has an absurd shape", what, t->name);
                goto out;
            }
            t->ne[d] = (int64_t)ne;
            nel *= ne;
        }
        if ((rc = cur_u32(c, &type)) || (rc = cur_u64(c, &t->offset))) goto out;
        t->type = (int)type;
        if (!rkm_type_block_bytes(t->type)) {
            rc = rkm_err(RKM_EUNSUPPORTED, "%s: tensor '%s' has type %u, a ggml type this build of rkmojo does not know",
                         what, t->name, type);
            goto out;
        }
        size_t row = rkm_type_row_bytes(t->type, t->ne[0]);
        if (!row) {
            rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s': row of %lld values is not a multiple of the %s block (%d)",
                         what, t->name, (long long)t->ne[0], rkm_type_name(t->type), rkm_type_block_size(t->type));
            goto out;
        }
        t->nbytes = row * (nel / (uint64_t)t->ne[0]);
        if (rkm_name_index_add(&g->t_ix, t->name, (int)i, t_name, g) >= 0) {
            rc = rkm_err(RKM_EFORMAT, "%s: duplicate tensor '%s'", what, t->name);
            goto out;
        }
    }
    g->data_off = RKM_ALIGN_UP(c->pos, g->alignment);
    for (int i = 0; i < g->n_tensors; i++) {
        rkm_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment || t->offset > g->size || g->data_off > g->size - t->offset ||
            t->nbytes > g->size - g->data_off - t->offset) {
            rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s' data (offset %llu, %llu bytes) lies outside the file "
                         "(truncated or corrupt)", what, t->name, (unsigned long long)t->offset,
                         (unsigned long long)t->nbytes);
            goto out;
        }
        t->offset += g->data_off;
    }
    /* no two tensors share bytes */
    int ta, tb, ov = rkm_ranges_overlap(g->n_tensors, t_range, g, &ta, &tb);
    if (ov) {
        rc = ov < 0 ? rkm_err(RKM_ENOMEM, "out of memory")
                    : rkm_err(RKM_EFORMAT, "%s: tensors '%s' and '%s' overlap in the file", what, g->tensors[ta].name,
                              g->tensors[tb].name);
        goto out;
    }
    rc = 0;
out:
    free(c);
    return rc;
}

static rkm_gguf *open_common(rkm_gguf *g, const char *what)
{
    if (parse(g, what) != 0) {
        rkm_gguf_close(g);
        return NULL;
    }
    return g;
}

rkm_gguf *rkm_gguf_open(const char *path)
{
    rkm_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    g->dfd = -1;
    g->fd = open(path, O_RDONLY | O_CLOEXEC);
    g->path = strdup(path);
    if (g->fd < 0) {
        rkm_err(errno == ENOENT ? RKM_ENOENT : RKM_EIO, "%s: %s", path, strerror(errno));
        free(g->path);
        free(g);
        return NULL;
    }
    struct stat st;
    if (fstat(g->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rkm_err(RKM_EIO, "%s: not a regular file", path);
        rkm_gguf_close(g);
        return NULL;
    }
    g->size = (uint64_t)st.st_size;
    /* Large tensor reads (the converter's) bypass the page cache: no kernel
     * copy, and a 17 GB conversion does not evict everything else. */
    g->dfd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    return open_common(g, g->path);
}

rkm_gguf *rkm_gguf_open_fill(const char *path, rkm_gguf_fill fill, void *user)
{
    rkm_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    g->dfd = -1;
    g->fill = fill;
    g->fill_user = user;
    g->path = strdup(path);
    g->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (g->fd < 0 || fstat(g->fd, &st) != 0) {
        rkm_err(RKM_EIO, "%s: %s", path, strerror(errno));
        rkm_gguf_close(g);
        return NULL;
    }
    g->size = (uint64_t)st.st_size;
    return open_common(g, g->path);
}

rkm_gguf *rkm_gguf_open_mem(const void *data, size_t n)
{
    rkm_gguf *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->fd = -1;
    g->dfd = -1;
    g->mem = data;
    g->size = n;
    return open_common(g, "<memory>");
}

void rkm_gguf_close(rkm_gguf *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) {
        kv_t *kv = &g->kv[i];
        free(kv->key);
        free(kv->str);
        free(kv->arr);
        if (kv->arr_strs)
            for (uint64_t j = 0; j < kv->arr_n; j++) free(kv->arr_strs[j]);
        free(kv->arr_strs);
        free(kv->arr_lens);
    }
    free(g->kv);
    for (int i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->tensors);
    rkm_name_index_free(&g->kv_ix);
    rkm_name_index_free(&g->t_ix);
    if (g->fd >= 0) close(g->fd);
    if (g->dfd >= 0) close(g->dfd);
    free(g->path);
    free(g);
}

uint32_t rkm_gguf_version(const rkm_gguf *g) { return g->version; }
uint64_t rkm_gguf_alignment(const rkm_gguf *g) { return g->alignment; }
uint64_t rkm_gguf_file_size(const rkm_gguf *g) { return g->size; }
int rkm_gguf_n_kv(const rkm_gguf *g) { return g->n_kv; }
const char *rkm_gguf_key(const rkm_gguf *g, int i) { return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL; }

int rkm_gguf_find(const rkm_gguf *g, const char *key)
{
    return rkm_name_index_find(&g->kv_ix, key, kv_name, g);
}

int rkm_gguf_vtype(const rkm_gguf *g, int i) { return i >= 0 && i < g->n_kv ? g->kv[i].type : -1; }

static int is_int_type(int t)
{
    return t == RKM_GGUF_UINT8 || t == RKM_GGUF_INT8 || t == RKM_GGUF_UINT16 || t == RKM_GGUF_INT16 ||
           t == RKM_GGUF_UINT32 || t == RKM_GGUF_INT32 || t == RKM_GGUF_UINT64 || t == RKM_GGUF_INT64 ||
           t == RKM_GGUF_BOOL;
}

static int is_signed(int t)
{
    return t == RKM_GGUF_INT8 || t == RKM_GGUF_INT16 || t == RKM_GGUF_INT32 || t == RKM_GGUF_INT64;
}

int rkm_gguf_get_int(const rkm_gguf *g, const char *key, int64_t *out)
{
    int i = rkm_gguf_find(g, key);
    if (i < 0) return RKM_ENOENT;
    const kv_t *kv = &g->kv[i];
    if (!is_int_type(kv->type)) return rkm_err(RKM_EFORMAT, "GGUF key '%s' is not an integer", key);
    if (!is_signed(kv->type) && kv->v.u > INT64_MAX) return rkm_err(RKM_EFORMAT, "GGUF key '%s' out of range", key);
    *out = is_signed(kv->type) ? kv->v.i : (int64_t)kv->v.u;
    return 0;
}

int rkm_gguf_get_float(const rkm_gguf *g, const char *key, double *out)
{
    int i = rkm_gguf_find(g, key);
    if (i < 0) return RKM_ENOENT;
    const kv_t *kv = &g->kv[i];
    if (kv->type == RKM_GGUF_FLOAT32 || kv->type == RKM_GGUF_FLOAT64) *out = kv->v.f;
    else if (is_int_type(kv->type)) *out = is_signed(kv->type) ? (double)kv->v.i : (double)kv->v.u;
    else return rkm_err(RKM_EFORMAT, "GGUF key '%s' is not a number", key);
    return 0;
}

int rkm_gguf_get_bool(const rkm_gguf *g, const char *key, int *out)
{
    int64_t v;
    int rc = rkm_gguf_get_int(g, key, &v);
    if (rc == 0) *out = v != 0;
    return rc;
}

const char *rkm_gguf_get_str(const rkm_gguf *g, const char *key)
{
    int i = rkm_gguf_find(g, key);
    return i >= 0 && g->kv[i].type == RKM_GGUF_STRING ? g->kv[i].str : NULL;
}

int rkm_gguf_arr_type(const rkm_gguf *g, int i)
{
    return i >= 0 && i < g->n_kv && g->kv[i].type == RKM_GGUF_ARRAY ? g->kv[i].arr_type : -1;
}

uint64_t rkm_gguf_arr_n(const rkm_gguf *g, int i)
{
    return i >= 0 && i < g->n_kv && g->kv[i].type == RKM_GGUF_ARRAY ? g->kv[i].arr_n : 0;
}

const void *rkm_gguf_arr_data(const rkm_gguf *g, int i)
{
    return i >= 0 && i < g->n_kv && g->kv[i].type == RKM_GGUF_ARRAY ? g->kv[i].arr : NULL;
}

const char *rkm_gguf_arr_str(const rkm_gguf *g, int i, uint64_t j, size_t *len)
{
    if (i < 0 || i >= g->n_kv || !g->kv[i].arr_strs || j >= g->kv[i].arr_n) return NULL;
    if (len) *len = (size_t)g->kv[i].arr_lens[j];
    return g->kv[i].arr_strs[j];
}

static int arr_elem(const rkm_gguf *g, int i, uint64_t j, kv_t *tmp)
{
    if (i < 0 || i >= g->n_kv || !g->kv[i].arr || j >= g->kv[i].arr_n) return -1;
    int t = g->kv[i].arr_type;
    scalar_from(tmp, t, (const uint8_t *)g->kv[i].arr + j * vtype_size(t));
    return t;
}

int64_t rkm_gguf_arr_int(const rkm_gguf *g, int i, uint64_t j)
{
    kv_t tmp;
    int t = arr_elem(g, i, j, &tmp);
    if (t < 0) return 0;
    /* a float that is no int64 (NaN, inf, out of range) reads as 0, which
     * every integer field refuses */
    if (t == RKM_GGUF_FLOAT32 || t == RKM_GGUF_FLOAT64) return tmp.v.f > -9.2e18 && tmp.v.f < 9.2e18 ? (int64_t)tmp.v.f : 0;
    return is_signed(t) ? tmp.v.i : (int64_t)tmp.v.u;
}

double rkm_gguf_arr_float(const rkm_gguf *g, int i, uint64_t j)
{
    kv_t tmp;
    int t = arr_elem(g, i, j, &tmp);
    if (t < 0) return 0;
    if (t == RKM_GGUF_FLOAT32 || t == RKM_GGUF_FLOAT64) return tmp.v.f;
    return is_signed(t) ? (double)tmp.v.i : (double)tmp.v.u;
}

int rkm_gguf_n_tensors(const rkm_gguf *g) { return g->n_tensors; }

const rkm_gguf_tensor *rkm_gguf_tensor_at(const rkm_gguf *g, int i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const rkm_gguf_tensor *rkm_gguf_tensor_find(const rkm_gguf *g, const char *name)
{
    int i = rkm_name_index_find(&g->t_ix, name, t_name, g);
    return i >= 0 ? &g->tensors[i] : NULL;
}

int rkm_gguf_read(const rkm_gguf *g, const rkm_gguf_tensor *t, uint64_t off, void *buf, size_t n)
{
    if (off > t->nbytes || n > t->nbytes - off)
        return rkm_err(RKM_EINVAL, "read of %zu bytes at %llu outside tensor '%s'", n, (unsigned long long)off,
                       t->name);
    if (g->mem) {
        memcpy(buf, g->mem + t->offset + off, n);
        return 0;
    }
    if (g->fill) {
        int rc = g->fill(g->fill_user, t->offset + off, n);
        if (rc) return rc;
    }
    if (g->dfd >= 0 && n >= (256u << 10)) {
        int rc = rkm_pread_direct(g->dfd, buf, n, t->offset + off, g->path);
        if (rc != RKM_EUNSUPPORTED) return rc;
    }
    return rkm_pread_all(g->fd, buf, n, t->offset + off, g->path);
}

/* ============================================================ writer */

typedef struct {
    char *name;
    int type;
    int n_dims;
    int64_t ne[RKM_GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
} wtensor;

struct rkm_gguf_writer {
    rkm_buf kv;        /* serialized key/values */
    uint64_t n_kv;
    wtensor *t;
    int n_t, cap_t;
    int err;           /* first error (sticky) */
    uint64_t alignment; /* of the data section and every tensor: general.alignment if set, else 32 */
    /* streaming state */
    int fd;
    char *path, *tmp_path;
    uint64_t pos;      /* file position of the next byte */
    int cur;           /* tensor being written */
    uint64_t cur_done; /* bytes of it written */
    uint8_t *buf;
    size_t buf_len;
};

#define WBUF (1u << 20)

rkm_gguf_writer *rkm_gguf_writer_new(void)
{
    rkm_gguf_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->fd = -1;
        w->alignment = GGUF_DEFAULT_ALIGN;
    }
    return w;
}

void rkm_gguf_writer_free(rkm_gguf_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        if (w->tmp_path) unlink(w->tmp_path);
    }
    for (int i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    rkm_buf_free(&w->kv);
    free(w->buf);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

static void kv_put(rkm_gguf_writer *w, const void *p, size_t n)
{
    if (w->err) return;
    rkm_buf_add(&w->kv, p, n);
    if (!rkm_buf_ok(&w->kv)) w->err = rkm_err(RKM_ENOMEM, "out of memory");
}

static void kv_u32(rkm_gguf_writer *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    kv_put(w, b, 4);
}

static void kv_u64(rkm_gguf_writer *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    kv_put(w, b, 8);
}

static void kv_strn(rkm_gguf_writer *w, const char *s, size_t n)
{
    kv_u64(w, n);
    kv_put(w, s, n);
}

static void kv_key(rkm_gguf_writer *w, const char *key, int type)
{
    kv_strn(w, key, strlen(key));
    kv_u32(w, (uint32_t)type);
    w->n_kv++;
}

/* general.alignment sets the layout the writer produces, as readers
 * expect; a value that is not a power of two is refused. */
static void note_alignment(rkm_gguf_writer *w, const char *key, uint64_t v)
{
    if (strcmp(key, "general.alignment")) return;
    if (!v || (v & (v - 1)) || v > 65536) {
        if (!w->err) w->err = rkm_err(RKM_EINVAL, "general.alignment %llu is not a power of two", (unsigned long long)v);
        return;
    }
    w->alignment = v;
}

void rkm_gguf_writer_set_u32(rkm_gguf_writer *w, const char *key, uint32_t v)
{
    note_alignment(w, key, v);
    kv_key(w, key, RKM_GGUF_UINT32);
    kv_u32(w, v);
}

void rkm_gguf_writer_set_i32(rkm_gguf_writer *w, const char *key, int32_t v)
{
    kv_key(w, key, RKM_GGUF_INT32);
    kv_u32(w, (uint32_t)v);
}

void rkm_gguf_writer_set_f32(rkm_gguf_writer *w, const char *key, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    kv_key(w, key, RKM_GGUF_FLOAT32);
    kv_u32(w, u);
}

void rkm_gguf_writer_set_bool(rkm_gguf_writer *w, const char *key, int v)
{
    uint8_t b = v ? 1 : 0;
    kv_key(w, key, RKM_GGUF_BOOL);
    kv_put(w, &b, 1);
}

void rkm_gguf_writer_set_str(rkm_gguf_writer *w, const char *key, const char *v)
{
    kv_key(w, key, RKM_GGUF_STRING);
    kv_strn(w, v, strlen(v));
}

void rkm_gguf_writer_set_arr(rkm_gguf_writer *w, const char *key, int vtype, const void *data, uint64_t n)
{
    kv_key(w, key, RKM_GGUF_ARRAY);
    kv_u32(w, (uint32_t)vtype);
    kv_u64(w, n);
    kv_put(w, data, vtype_size(vtype) * n); /* host is little-endian (checked in begin) */
}

void rkm_gguf_writer_set_arr_str(rkm_gguf_writer *w, const char *key, const char *const *strs,
                                 const size_t *lens, uint64_t n)
{
    kv_key(w, key, RKM_GGUF_ARRAY);
    kv_u32(w, RKM_GGUF_STRING);
    kv_u64(w, n);
    for (uint64_t i = 0; i < n; i++) kv_strn(w, strs[i], lens ? lens[i] : strlen(strs[i]));
}

void rkm_gguf_writer_copy_kv(rkm_gguf_writer *w, const rkm_gguf *g, int i)
{
    const kv_t *kv = &g->kv[i];
    switch (kv->type) {
    case RKM_GGUF_STRING:
        kv_key(w, kv->key, RKM_GGUF_STRING);
        kv_strn(w, kv->str, kv->str_len);
        break;
    case RKM_GGUF_ARRAY:
        if (kv->arr_type == RKM_GGUF_STRING) {
            kv_key(w, kv->key, RKM_GGUF_ARRAY);
            kv_u32(w, RKM_GGUF_STRING);
            kv_u64(w, kv->arr_n);
            for (uint64_t j = 0; j < kv->arr_n; j++) kv_strn(w, kv->arr_strs[j], kv->arr_lens[j]);
        } else {
            rkm_gguf_writer_set_arr(w, kv->key, kv->arr_type, kv->arr, kv->arr_n);
        }
        break;
    default: {
        uint8_t b[8];
        size_t n = vtype_size(kv->type);
        uint64_t raw = kv->v.u;
        if (kv->type != RKM_GGUF_FLOAT32 && kv->type != RKM_GGUF_FLOAT64 && kv->type != RKM_GGUF_BOOL)
            note_alignment(w, kv->key, raw);
        if (kv->type == RKM_GGUF_FLOAT32) {
            float f = (float)kv->v.f;
            uint32_t u;
            memcpy(&u, &f, 4);
            raw = u;
        } else if (kv->type == RKM_GGUF_FLOAT64) {
            memcpy(&raw, &kv->v.f, 8);
        }
        for (size_t k = 0; k < n; k++) b[k] = (uint8_t)(raw >> (8 * k));
        kv_key(w, kv->key, kv->type);
        kv_put(w, b, n);
    }
    }
}

int rkm_gguf_writer_add_tensor(rkm_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne)
{
    if (w->err) return w->err;
    if (n_dims < 1 || n_dims > RKM_GGUF_MAX_DIMS) return w->err = rkm_err(RKM_EINVAL, "bad n_dims for %s", name);
    if (w->n_t == w->cap_t) {
        int cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *nt = realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return w->err = rkm_err(RKM_ENOMEM, "out of memory");
        w->t = nt;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->type = type;
    t->n_dims = n_dims;
    uint64_t nel = 1;
    for (int d = 0; d < RKM_GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        if (d > 0) nel *= (uint64_t)t->ne[d];
    }
    size_t row = rkm_type_row_bytes(type, t->ne[0]);
    if (!row || !t->name) return w->err = rkm_err(RKM_EINVAL, "tensor %s: bad type or row size", name);
    t->nbytes = row * nel;
    w->n_t++; /* offsets are laid out by begin, once the alignment is known */
    return 0;
}

static int flush_buf(rkm_gguf_writer *w)
{
    if (!w->buf_len) return 0;
    int rc = rkm_pwrite_all(w->fd, w->buf, w->buf_len, w->pos, w->tmp_path);
    w->pos += w->buf_len;
    w->buf_len = 0;
    return rc;
}

static int put_bytes(rkm_gguf_writer *w, const void *p, size_t n)
{
    const uint8_t *s = p;
    while (n > 0) {
        size_t k = RKM_MIN(n, WBUF - w->buf_len);
        memcpy(w->buf + w->buf_len, s, k);
        w->buf_len += k;
        s += k;
        n -= k;
        if (w->buf_len == WBUF) {
            int rc = flush_buf(w);
            if (rc) return rc;
        }
    }
    return 0;
}

static int put_pad(rkm_gguf_writer *w, uint64_t upto)
{
    static const uint8_t zeros[64];
    uint64_t cur = w->pos + w->buf_len;
    while (cur < upto) {
        size_t k = (size_t)RKM_MIN(upto - cur, (uint64_t)sizeof zeros);
        int rc = put_bytes(w, zeros, k);
        if (rc) return rc;
        cur += k;
    }
    return 0;
}

int rkm_gguf_writer_begin(rkm_gguf_writer *w, const char *path)
{
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1) return rkm_err(RKM_EUNSUPPORTED, "big-endian hosts are not supported");
    if (w->err) return w->err;
    w->path = strdup(path);
    size_t n = strlen(path) + 16;
    w->tmp_path = malloc(n);
    w->buf = malloc(WBUF);
    if (!w->path || !w->tmp_path || !w->buf) return w->err = rkm_err(RKM_ENOMEM, "out of memory");
    snprintf(w->tmp_path, n, "%s.part", path);
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) return w->err = rkm_err(RKM_EIO, "%s: %s", w->tmp_path, strerror(errno));
    int rc = 0;
    for (int i = 0; i < w->n_t; i++)
        w->t[i].offset = i ? RKM_ALIGN_UP(w->t[i - 1].offset + w->t[i - 1].nbytes, w->alignment) : 0;
    uint8_t hdr[24] = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
    for (int i = 0; i < 8; i++) hdr[8 + i] = (uint8_t)((uint64_t)w->n_t >> (8 * i));
    for (int i = 0; i < 8; i++) hdr[16 + i] = (uint8_t)(w->n_kv >> (8 * i));
    if ((rc = put_bytes(w, hdr, 24)) || (rc = put_bytes(w, w->kv.data, w->kv.len))) return w->err = rc;
    for (int i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        uint8_t b[8];
        uint64_t ln = strlen(t->name);
        for (int k = 0; k < 8; k++) b[k] = (uint8_t)(ln >> (8 * k));
        if ((rc = put_bytes(w, b, 8)) || (rc = put_bytes(w, t->name, ln))) return w->err = rc;
        uint32_t nd = (uint32_t)t->n_dims;
        if ((rc = put_bytes(w, &nd, 4))) return w->err = rc;
        for (int d = 0; d < t->n_dims; d++) {
            uint64_t ne = (uint64_t)t->ne[d];
            if ((rc = put_bytes(w, &ne, 8))) return w->err = rc;
        }
        uint32_t ty = (uint32_t)t->type;
        if ((rc = put_bytes(w, &ty, 4)) || (rc = put_bytes(w, &t->offset, 8))) return w->err = rc;
    }
    uint64_t data_start = RKM_ALIGN_UP(w->pos + w->buf_len, w->alignment);
    if ((rc = put_pad(w, data_start))) return w->err = rc;
    w->cur = 0;
    w->cur_done = 0;
    /* remember the data start in the offsets: tensors are written relative */
    for (int i = 0; i < w->n_t; i++) w->t[i].offset += data_start;
    return 0;
}

int rkm_gguf_writer_write_data(rkm_gguf_writer *w, const void *p, size_t n)
{
    if (w->err) return w->err;
    if (w->fd < 0) return w->err = rkm_err(RKM_EINVAL, "gguf writer: write before begin");
    const uint8_t *s = p;
    while (n > 0) {
        if (w->cur >= w->n_t) return w->err = rkm_err(RKM_EINVAL, "gguf writer: more data than tensors");
        wtensor *t = &w->t[w->cur];
        if (w->cur_done == 0) {
            int rc = put_pad(w, t->offset);
            if (rc) return w->err = rc;
        }
        size_t k = (size_t)RKM_MIN((uint64_t)n, t->nbytes - w->cur_done);
        int rc = put_bytes(w, s, k);
        if (rc) return w->err = rc;
        s += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == t->nbytes) {
            w->cur++;
            w->cur_done = 0;
        }
    }
    return 0;
}

int rkm_gguf_writer_finish(rkm_gguf_writer *w)
{
    if (w->err) return w->err;
    if (w->fd < 0) return w->err = rkm_err(RKM_EINVAL, "gguf writer: finish before begin");
    if (w->cur != w->n_t)
        return w->err = rkm_err(RKM_EINVAL, "gguf writer: tensor '%s' incomplete", w->t[w->cur].name);
    int rc = flush_buf(w);
    if (!rc && fsync(w->fd) != 0) rc = rkm_err(RKM_EIO, "%s: fsync: %s", w->tmp_path, strerror(errno));
    if (close(w->fd) != 0 && !rc) rc = rkm_err(RKM_EIO, "%s: close: %s", w->tmp_path, strerror(errno));
    w->fd = -1;
    if (!rc && rename(w->tmp_path, w->path) != 0) rc = rkm_err(RKM_EIO, "rename %s: %s", w->path, strerror(errno));
    if (rc) {
        unlink(w->tmp_path);
        w->err = rc;
    }
    return rc;
}
