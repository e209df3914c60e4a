/*
 * safetensors.c - safetensors reader and writer (layout in safetensors.h).
 * The header JSON is untrusted: sizes, dtypes, shapes and offsets are all
 * checked against each other and against the file size; overlapping or
 * out-of-file data is an error. Threads: immutable after open.
 */
#include "format/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/quant.h"
#include "util/common.h"
#include "util/name_index.h"
#include "util/ranges.h"

#define ST_MAX_HEADER (100u << 20)

struct rkm_safetensors {
    int fd;
    int dfd; /* O_DIRECT descriptor for large reads, or -1 */
    const uint8_t *mem;
    uint64_t base, size; /* the file's bytes [base, base + size) of path (rkm_safetensors_open_fill) */
    rkm_st_fill fill;    /* makes bytes present before a read, or NULL */
    void *fill_user;
    char *path;
    int n;
    rkm_st_tensor *t;
    rkm_name_index ix; /* name -> index: lookups and the duplicate check stay linear */
};

static const char *st_name(const void *ctx, int i) { return ((const rkm_safetensors *)ctx)->t[i].name; }

static void st_range(const void *ctx, int i, uint64_t *off, uint64_t *len)
{
    const rkm_st_tensor *t = &((const rkm_safetensors *)ctx)->t[i];
    *off = t->offset;
    *len = t->nbytes;
}

static int dtype_info(const char *d, int *type, int *esize)
{
    static const struct {
        const char *name;
        int type, size;
    } tab[] = {{"F32", RKM_TYPE_F32, 4}, {"F16", RKM_TYPE_F16, 2}, {"BF16", RKM_TYPE_BF16, 2}, {"F64", -1, 8},
               {"I64", -1, 8},           {"I32", -1, 4},           {"I16", -1, 2},            {"I8", -1, 1},
               {"U8", -1, 1},            {"BOOL", -1, 1},          {"F8_E4M3", -1, 1},        {"F8_E5M2", -1, 1},
               {"U16", -1, 2},           {"U32", -1, 4},           {"U64", -1, 8}};
    for (size_t i = 0; i < RKM_ARRAY_LEN(tab); i++)
        if (!strcmp(tab[i].name, d)) {
            *type = tab[i].type;
            *esize = tab[i].size;
            return 0;
        }
    return -1;
}

/* n bytes at off of the file (its own offsets: base not added). */
static int st_pread(const rkm_safetensors *s, void *buf, size_t n, uint64_t off, const char *what)
{
    if (s->fill) {
        int rc = s->fill(s->fill_user, s->base + off, n);
        if (rc) return rc;
    }
    return rkm_pread_all(s->fd, buf, n, s->base + off, what);
}

static int parse_header(rkm_safetensors *s)
{
    const char *what = s->path ? s->path : "<memory>";
    uint8_t lb[8];
    int rc0;
    if (s->size < 8) return rkm_err(RKM_EFORMAT, "%s: truncated safetensors file (%llu bytes)", what, (unsigned long long)s->size);
    if (s->mem) memcpy(lb, s->mem, 8);
    else if ((rc0 = st_pread(s, lb, 8, 0, what))) return rc0;
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = (hn << 8) | lb[i];
    if (hn < 2 || hn > ST_MAX_HEADER || hn > s->size - 8)
        return rkm_err(RKM_EFORMAT, "%s: bad safetensors header length %llu (truncated or not safetensors)", what,
                       (unsigned long long)hn);
    char *json = malloc(hn + 1);
    if (!json) return rkm_err(RKM_ENOMEM, "out of memory");
    if (s->mem) memcpy(json, s->mem + 8, hn);
    else if ((rc0 = st_pread(s, json, hn, 8, what))) {
        free(json);
        return rc0;
    }
    json[hn] = 0;
    cJSON *root = cJSON_ParseWithLength(json, hn);
    free(json);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return rkm_err(RKM_EFORMAT, "%s: safetensors header is not a JSON object", what);
    }
    int rc = 0;
    uint64_t data_start = 8 + hn, data_size = s->size - data_start;
    int cap = cJSON_GetArraySize(root);
    s->t = calloc((size_t)cap + 1, sizeof *s->t);
    if (!s->t || rkm_name_index_init(&s->ix, (size_t)cap)) {
        cJSON_Delete(root);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    for (cJSON *it = root->child; it; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) continue;
        rkm_st_tensor *t = &s->t[s->n];
        t->name = strdup(it->string);
        if (!t->name) { rc = rkm_err(RKM_ENOMEM, "out of memory"); break; }
        s->n++;
        if (rkm_name_index_add(&s->ix, t->name, s->n - 1, st_name, s) >= 0) {
            rc = rkm_err(RKM_EFORMAT, "%s: duplicate tensor '%s'", what, t->name);
            break;
        }
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        int esize;
        if (!cJSON_IsString(dt) || dtype_info(dt->valuestring, &t->type, &esize)) {
            rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s' has an unknown dtype", what, t->name);
            break;
        }
        snprintf(t->dtype, sizeof t->dtype, "%s", dt->valuestring);
        int nd = cJSON_IsArray(sh) ? cJSON_GetArraySize(sh) : -1;
        if (nd < 0 || nd > 4 || !cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2) {
            rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s' has a bad shape or offsets", what, t->name);
            break;
        }
        t->n_dims = nd ? nd : 1;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        uint64_t nel = 1;
        for (int d = 0; d < nd; d++) {
            const cJSON *v = cJSON_GetArrayItem(sh, d);
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e12 ||
                v->valuedouble != (double)(uint64_t)v->valuedouble) {
                rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s' has a bad shape", what, t->name);
                goto done;
            }
            uint64_t x = (uint64_t)v->valuedouble;
            t->ne[nd - 1 - d] = (int64_t)x;
            if (x && nel > (1ull << 50) / x) {
                rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s' is absurdly large", what, t->name);
                goto done;
            }
            nel *= x;
        }
        const cJSON *b = cJSON_GetArrayItem(of, 0), *e = cJSON_GetArrayItem(of, 1);
        if (!cJSON_IsNumber(b) || !cJSON_IsNumber(e) || b->valuedouble < 0 || e->valuedouble < b->valuedouble ||
            e->valuedouble > (double)data_size) {
            rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s' data lies outside the file (truncated?)", what, t->name);
            break;
        }
        uint64_t bo = (uint64_t)b->valuedouble, eo = (uint64_t)e->valuedouble;
        if (eo - bo != nel * (uint64_t)esize) {
            rc = rkm_err(RKM_EFORMAT, "%s: tensor '%s': %llu data bytes for shape needing %llu", what, t->name,
                         (unsigned long long)(eo - bo), (unsigned long long)(nel * (uint64_t)esize));
            break;
        }
        t->offset = s->base + data_start + bo;
        t->nbytes = eo - bo;
    }
    /* no two tensors share bytes */
    int ta, tb, ov = rc ? 0 : rkm_ranges_overlap(s->n, st_range, s, &ta, &tb);
    if (ov < 0) rc = rkm_err(RKM_ENOMEM, "out of memory");
    else if (ov) rc = rkm_err(RKM_EFORMAT, "%s: tensors '%s' and '%s' overlap in the file", what, s->t[ta].name, s->t[tb].name);
done:
    cJSON_Delete(root);
    return rc;
}

static rkm_safetensors *finish_open(rkm_safetensors *s)
{
    if (parse_header(s)) {
        rkm_safetensors_close(s);
        return NULL;
    }
    return s;
}

/* path opened (messages name it as name), its size in *size; NULL + a message. */
static rkm_safetensors *open_file(const char *path, const char *name, uint64_t *size)
{
    rkm_safetensors *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(name))) {
        free(s);
        rkm_err(RKM_ENOMEM, "safetensors: out of memory");
        return NULL;
    }
    s->dfd = -1;
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (s->fd < 0 || fstat(s->fd, &st) != 0) {
        rkm_err(errno == ENOENT ? RKM_ENOENT : RKM_EIO, "%s: %s", path, strerror(errno));
        rkm_safetensors_close(s);
        return NULL;
    }
    *size = (uint64_t)st.st_size;
    return s;
}

rkm_safetensors *rkm_safetensors_open(const char *path)
{
    uint64_t size = 0;
    rkm_safetensors *s = open_file(path, path, &size);
    if (!s) return NULL;
    s->size = size;
    s->dfd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    return finish_open(s);
}

rkm_safetensors *rkm_safetensors_open_fill(const char *path, const char *name, uint64_t base, uint64_t size,
                                           rkm_st_fill fill, void *user)
{
    uint64_t fsize = 0;
    rkm_safetensors *s = open_file(path, name, &fsize);
    if (!s) return NULL;
    if (base > fsize || size > fsize - base) {
        rkm_err(RKM_EINVAL, "%s: bytes %llu..%llu lie outside the file", path, (unsigned long long)base,
                (unsigned long long)(base + size));
        rkm_safetensors_close(s);
        return NULL;
    }
    s->base = base;
    s->size = size;
    s->fill = fill;
    s->fill_user = user;
    return finish_open(s);
}

rkm_safetensors *rkm_safetensors_open_mem(const void *data, size_t n)
{
    rkm_safetensors *s = calloc(1, sizeof *s);
    if (!s) {
        rkm_err(RKM_ENOMEM, "safetensors: out of memory");
        return NULL;
    }
    s->fd = -1;
    s->dfd = -1;
    s->mem = data;
    s->size = n;
    return finish_open(s);
}

void rkm_safetensors_close(rkm_safetensors *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->t[i].name);
    free(s->t);
    rkm_name_index_free(&s->ix);
    if (s->fd >= 0) close(s->fd);
    if (s->dfd >= 0) close(s->dfd);
    free(s->path);
    free(s);
}

int rkm_safetensors_n_tensors(const rkm_safetensors *s) { return s->n; }
const rkm_st_tensor *rkm_safetensors_tensor_at(const rkm_safetensors *s, int i) { return i >= 0 && i < s->n ? &s->t[i] : NULL; }
const char *rkm_safetensors_path(const rkm_safetensors *s) { return s->path; }

const rkm_st_tensor *rkm_safetensors_find(const rkm_safetensors *s, const char *name)
{
    int i = rkm_name_index_find(&s->ix, name, st_name, s);
    return i >= 0 ? &s->t[i] : NULL;
}

int rkm_safetensors_read(const rkm_safetensors *s, const rkm_st_tensor *t, uint64_t off, void *buf, size_t n)
{
    if (off > t->nbytes || n > t->nbytes - off) return rkm_err(RKM_EINVAL, "read outside tensor '%s'", t->name);
    if (s->mem) {
        memcpy(buf, s->mem + t->offset + off, n);
        return 0;
    }
    if (s->fill) {
        int rc = s->fill(s->fill_user, t->offset + off, n);
        if (rc) return rc;
    }
    if (s->dfd >= 0 && n >= (256u << 10)) {
        int rc = rkm_pread_direct(s->dfd, buf, n, t->offset + off, s->path);
        if (rc != RKM_EUNSUPPORTED) return rc;
    }
    return rkm_pread_all(s->fd, buf, n, t->offset + off, s->path);
}

/* ------------------------------------------------------------- writer */

typedef struct {
    char *name;
    int type, n_dims;
    int64_t ne[4];
    uint64_t nbytes;
} wt;

struct rkm_st_writer {
    wt *t;
    int n, cap;
    FILE *f;
    char *path, *tmp;
    uint64_t written, total;
};

rkm_st_writer *rkm_st_writer_new(void) { return calloc(1, sizeof(rkm_st_writer)); }

void rkm_st_writer_free(rkm_st_writer *w)
{
    if (!w) return;
    if (w->f) {
        fclose(w->f);
        unlink(w->tmp);
    }
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    free(w->path);
    free(w->tmp);
    free(w);
}

int rkm_st_writer_add(rkm_st_writer *w, const char *name, int type, int n_dims, const int64_t *ne)
{
    if (type != RKM_TYPE_F32 && type != RKM_TYPE_F16 && type != RKM_TYPE_BF16 && type != RKM_ST_U8)
        return rkm_err(RKM_EINVAL, "safetensors writer: unsupported type");
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 64;
        wt *nt = realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return rkm_err(RKM_ENOMEM, "out of memory");
        w->t = nt;
        w->cap = cap;
    }
    wt *t = &w->t[w->n++];
    t->name = strdup(name);
    t->type = type;
    t->n_dims = n_dims;
    uint64_t nel = 1;
    for (int d = 0; d < 4; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        nel *= (uint64_t)t->ne[d];
    }
    t->nbytes = nel * (type == RKM_ST_U8 ? 1 : rkm_type_block_bytes(type));
    return t->name ? 0 : rkm_err(RKM_ENOMEM, "out of memory");
}

int rkm_st_writer_begin(rkm_st_writer *w, const char *path)
{
    cJSON *root = cJSON_CreateObject();
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        wt *t = &w->t[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "dtype", t->type == RKM_TYPE_F32 ? "F32" : t->type == RKM_TYPE_F16 ? "F16"
                                            : t->type == RKM_ST_U8   ? "U8" : "BF16");
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = t->n_dims - 1; d >= 0; d--) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne[d]));
        cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + t->nbytes)));
        off += t->nbytes;
        cJSON_AddItemToObject(root, t->name, o);
    }
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return rkm_err(RKM_ENOMEM, "out of memory");
    size_t jn = strlen(json), padded = RKM_ALIGN_UP(jn, 8);
    w->path = strdup(path);
    w->tmp = malloc(strlen(path) + 8);
    if (!w->path || !w->tmp) {
        free(json);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    sprintf(w->tmp, "%s.part", path);
    w->f = fopen(w->tmp, "wb");
    if (!w->f) {
        free(json);
        return rkm_err(RKM_EIO, "%s: %s", w->tmp, strerror(errno));
    }
    uint8_t lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(lb, 1, 8, w->f) == 8 && fwrite(json, 1, jn, w->f) == jn;
    for (size_t i = jn; i < padded && ok; i++) ok = fputc(' ', w->f) != EOF;
    free(json);
    w->total = off;
    return ok ? 0 : rkm_err(RKM_EIO, "%s: write failed", w->tmp);
}

int rkm_st_writer_write(rkm_st_writer *w, const void *p, size_t n)
{
    if (!w->f || w->written + n > w->total) return rkm_err(RKM_EINVAL, "safetensors writer: too much data");
    if (fwrite(p, 1, n, w->f) != n) return rkm_err(RKM_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
    w->written += n;
    return 0;
}

int rkm_st_writer_finish(rkm_st_writer *w)
{
    if (!w->f) return rkm_err(RKM_EINVAL, "safetensors writer not started");
    if (w->written != w->total) return rkm_err(RKM_EINVAL, "safetensors writer: missing data");
    int rc = fflush(w->f) == 0 && fsync(fileno(w->f)) == 0 ? 0 : rkm_err(RKM_EIO, "%s: %s", w->tmp, strerror(errno));
    if (fclose(w->f) != 0 && !rc) rc = rkm_err(RKM_EIO, "%s: close failed", w->tmp);
    w->f = NULL;
    if (!rc && rename(w->tmp, w->path) != 0) rc = rkm_err(RKM_EIO, "rename %s: %s", w->path, strerror(errno));
    if (rc) unlink(w->tmp);
    return rc;
}
