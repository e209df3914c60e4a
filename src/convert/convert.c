/*
 * convert.c - the converter (see convert.h).
 *
 * Type rules: the --quant choice's, in quant_mix.c (keep, rkmojo's
 * uniform q8_0 / q4_0 / f16 / bf16, llama.cpp's mixes q4_k_m and the
 * others with llama.cpp's per-tensor rules). With keep, every type the
 * matmuls run (rkm_type_matmul: every type published GGUFs use but the
 * ternary ones) stays as it is, byte for byte, and tq1_0 and tq2_0 (an
 * f16 scale times small integers) become q8_0 exactly; the converter prints, per source type, what it kept and what it changed
 * and why. With any other choice it prints the types it wrote, and warns
 * when it quantizes tensors that were already quantized (each round adds
 * error). A tensor whose type is its target is copied byte for byte.
 * Every ggml type rkm_type_readable accepts is read (dequantized by
 * kernels/quant.c bit for bit as ggml, then quantized by these rules).
 * Each expert blob is gate | up | down, each part 64-byte aligned inside
 * the blob, the blob padded to 4096 bytes.
 *
 * Memory: one expert blob plus a few MiB of row buffers per worker.
 * Threads: the calling thread writes resident.bin; the experts of each
 * layer are converted by CONVERT_WORKERS threads taking experts from a
 * shared counter (each with its own blob and scratch, writing its blobs
 * with pwrite at their own offsets), so reads, quantization and writes of
 * different experts overlap. Only the progress counter and the first
 * error are shared, under conv.mu.
 */
#include "convert/convert.h"
#include "convert/quant_mix.h"

#include "kernels/rknn_i8.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/vision.h"
#include "format/model_dir.h"
#include "format/source.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "text/tokenizer.h"
#include "util/common.h"
#include "util/progress.h"

#define CHUNK_BYTES (4u << 20)
#define CONVERT_WORKERS 4

typedef struct {
    const rkm_source *src;
    rkm_quant_plan plan; /* the --quant choice's rules for this model */
    int keep;
    int npu;            /* --target rk3588: experts as rknn_i8 */
    int plain_experts;  /* experts in the plain row layout (else packed) */
    pthread_mutex_t mu; /* guards prog and the counts below */
    rkm_progress prog;
    /* matrices per source type that kept their type / became another
     * (keep's report), and one example name of each */
    int n_kept[RKM_TYPE_COUNT], n_changed[RKM_TYPE_COUNT];
    int changed_to[RKM_TYPE_COUNT];
    int lost_exact[RKM_TYPE_COUNT]; /* a row of a lossless type was not */
    int n_written[RKM_TYPE_COUNT];  /* tensors / expert parts written per type (other choices' report) */
    void (*consumed)(void *user, const rkm_src_tensor *t, uint64_t off, uint64_t len); /* the options' */
    void *user;
} conv;

/* Row buffers of one thread. */
typedef struct {
    uint8_t *in;
    float *f32;
    size_t in_cap, f32_cap;
} scratch;

static void progress(conv *c, uint64_t bytes)
{
    pthread_mutex_lock(&c->mu);
    rkm_progress_add(&c->prog, bytes);
    pthread_mutex_unlock(&c->mu);
}

static const char *const part_names[RKM_PART_COUNT] = {"gate", "up", "down"};
/* The table's expert roles of the expert file's parts. */
static const int part_roles[RKM_PART_COUNT] = {RKM_TENSOR_FFN_GATE_EXPS, RKM_TENSOR_FFN_UP_EXPS, RKM_TENSOR_FFN_DOWN_EXPS};

/* The arch table's row of a tensor, and its layer into *il (may be NULL). */
static const rkm_tensor_info *row_of(const rkm_source *s, const char *name, int *il)
{
    int l = -1, e;
    const rkm_tensor_info *t = rkm_arch_tensor_by_gguf(s->hp.arch, name, &l, &e);
    if (il) *il = l;
    return t;
}

/* Routed-expert tensors (fused or one per expert) go to the expert files,
 * not resident.bin. */
static int is_expert_tensor(const rkm_source *s, const char *name)
{
    const rkm_tensor_info *t = row_of(s, name, NULL);
    return t && rkm_tensor_role_is_expert(t->role);
}

/* The stored type of a tensor: the --quant choice's rules (quant_mix.c). */
static int pick_type(const conv *c, const char *name, int src_type, int n_dims, int64_t ne0)
{
    int il;
    const rkm_tensor_info *t = row_of(c->src, name, &il);
    return rkm_quant_plan_type(&c->plan, t, il, n_dims, ne0, src_type);
}

/* The reports: a tensor (or a layer's expert part: n matrices) of
 * src_type is stored as dst_type (stored: the type on disk, which the NPU
 * target or the packed layout may make another). */
static void count_type(conv *c, int src_type, int dst_type, int stored, int n)
{
    stored = rkm_unpack_type(stored);
    if (stored >= 0 && stored < RKM_TYPE_COUNT) c->n_written[stored]++;
    if (!c->keep || src_type < 0 || src_type >= RKM_TYPE_COUNT || src_type == RKM_TYPE_F32) return;
    if (dst_type == src_type) c->n_kept[src_type] += n;
    else {
        c->n_changed[src_type] += n;
        c->changed_to[src_type] = dst_type;
    }
}

/* The report: with keep one line per source type (exactness is known once
 * the rows are converted), else the types written. */
static void report_types(const conv *c, FILE *f)
{
    if (!f) return;
    if (!c->keep) {
        fprintf(f, "convert: %s:", rkm_quant_mix_name(c->plan.mix));
        for (int t = 0, first = 1; t < RKM_TYPE_COUNT; t++)
            if (c->n_written[t]) {
                fprintf(f, "%s %d %s", first ? "" : ",", c->n_written[t], rkm_type_name(t));
                first = 0;
            }
        fprintf(f, " (tensors; each layer's expert gate, up and down count once)\n");
        return;
    }
    for (int t = 0; t < RKM_TYPE_COUNT; t++) {
        if (c->n_kept[t])
            fprintf(f, "convert: %d %s matrices kept as they are (native kernels)\n", c->n_kept[t], rkm_type_name(t));
        if (!c->n_changed[t]) continue;
        const char *to = rkm_type_name(c->changed_to[t]);
        if (c->changed_to[t] == RKM_TYPE_F32)
            fprintf(f, "convert: %d %s tensors -> f32 (1-D, routers, or rows not a multiple of 32)\n", c->n_changed[t],
                    rkm_type_name(t));
        else if (rkm_type_q8_0_exact(t) && !c->lost_exact[t])
            fprintf(f, "convert: %d %s matrices -> %s without loss (no %s kernel; same values)\n", c->n_changed[t],
                    rkm_type_name(t), to, rkm_type_name(t));
        else
            fprintf(f, "convert: %d %s matrices -> %s, re-quantized (no %s kernel and no lossless native form)\n",
                    c->n_changed[t], rkm_type_name(t), to, rkm_type_name(t));
    }
}

static int grow(scratch *c, size_t in_bytes, size_t n_f32)
{
    if (in_bytes > c->in_cap) {
        free(c->in);
        c->in = malloc(in_bytes);
        c->in_cap = c->in ? in_bytes : 0;
    }
    if (n_f32 > c->f32_cap) {
        free(c->f32);
        c->f32 = malloc(n_f32 * sizeof(float));
        c->f32_cap = c->f32 ? n_f32 : 0;
    }
    return c->in && c->f32 ? 0 : rkm_err(RKM_ENOMEM, "out of memory");
}

/* A row of a type with a lossless q8_0 form was not exact after all (its
 * scale is not finite, say): the report says re-quantized. */
static void exact_lost(conv *c, int type)
{
    pthread_mutex_lock(&c->mu);
    c->lost_exact[type] = 1;
    pthread_mutex_unlock(&c->mu);
}

/* Converts rows [r0, r0+nr) of t into dst (dtype dt), in chunks. */
static int convert_rows(conv *c, scratch *sc, const rkm_src_tensor *t, int64_t r0, int64_t nr, int dt, uint8_t *dst)
{
    if (!rkm_type_readable(t->type))
        return rkm_err(RKM_EUNSUPPORTED, "tensor '%s' has type %d (%s), which rkmojo cannot read", t->name, t->type,
                       rkm_type_name(t->type) ? rkm_type_name(t->type) : "unknown");
    const int64_t n = t->ne[0];
    size_t in_row = rkm_type_row_bytes(t->type, n), out_row = rkm_type_row_bytes(dt, n);
    if (!out_row) return rkm_err(RKM_EFORMAT, "tensor '%s': %lld is not a multiple of the %s block", t->name, (long long)n, rkm_type_name(dt));
    int64_t per = RKM_MAX(1, (int64_t)(CHUNK_BYTES / RKM_MAX(in_row, 1)));
    for (int64_t r = r0; r < r0 + nr; r += per) {
        int64_t k = RKM_MIN(per, r0 + nr - r);
        uint8_t *out = dst + (size_t)(r - r0) * out_row;
        int rc;
        if (t->type == dt) {
            if ((rc = rkm_source_read_rows(c->src, t, r, k, out))) return rc;
            /* kept as they are: their scales must be finite too */
            for (int64_t i = 0; i < k; i++) {
                int64_t at = rkm_row_find_nonfinite(dt, out + (size_t)i * out_row, n);
                if (at >= 0)
                    return rkm_err(RKM_EFORMAT, "tensor '%s' (%s) row %lld: the %s at value %lld is NaN or infinite", t->name,
                                   rkm_type_name(dt), (long long)(r + i), rkm_type_block_size(dt) > 1 ? "block scale" : "value",
                                   (long long)at);
            }
        } else {
            if ((rc = grow(sc, (size_t)k * in_row, (size_t)n)) || (rc = rkm_source_read_rows(c->src, t, r, k, sc->in))) return rc;
            for (int64_t i = 0; i < k; i++) {
                rkm_dequantize_row(t->type, sc->in + (size_t)i * in_row, sc->f32, n);
                for (int64_t j = 0; j < n; j++)
                    if (sc->f32[j] != sc->f32[j] || sc->f32[j] > 3.0e38f || sc->f32[j] < -3.0e38f)
                        return rkm_err(RKM_EFORMAT, "tensor '%s' row %lld holds NaN or infinity", t->name, (long long)(r + i));
                uint8_t *o = out + (size_t)i * out_row;
                if (dt == RKM_TYPE_Q8_0 &&
                    rkm_quantize_row_q8_0_exact(t->type, sc->in + (size_t)i * in_row, sc->f32, (rkm_block_q8_0 *)o, n))
                    continue;
                if (dt == RKM_TYPE_Q8_0 && rkm_type_q8_0_exact(t->type))
                    exact_lost(c, t->type);
                rkm_quantize_row(dt, sc->f32, o, n);
            }
        }
        progress(c, (uint64_t)k * in_row);
    }
    return 0;
}

/* ------------------------------------------------------ shape checks */

static int expect(const rkm_source *s, const char *name, int optional, int n_dims, int64_t a, int64_t b, int64_t cc)
{
    const rkm_src_tensor *t = rkm_source_find(s, name);
    if (!t) return optional ? 0 : rkm_err(RKM_EFORMAT, "tensor '%s' is missing", name);
    int64_t want[3] = {a, b, cc};
    int nd = t->n_dims;
    while (nd > 1 && t->ne[nd - 1] == 1) nd--;
    int ok = nd == n_dims;
    for (int d = 0; d < n_dims && ok; d++) ok = t->ne[d] == want[d];
    if (!ok)
        return rkm_err(RKM_EFORMAT, "tensor '%s' has shape [%lld, %lld, %lld], the hyper-parameters imply [%lld, %lld, %lld]",
                       name, (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1),
                       (long long)(t->n_dims > 2 ? t->ne[2] : 1), (long long)a, (long long)(n_dims > 1 ? b : 1),
                       (long long)(n_dims > 2 ? cc : 1));
    return 0;
}

typedef struct {
    const rkm_src_tensor *t[RKM_PART_COUNT]; /* fused tensors, or NULL if split */
    int64_t row_off[RKM_PART_COUNT];         /* rows into an expert's slice */
    int64_t stride[RKM_PART_COUNT];          /* rows per expert in the fused tensor */
    int64_t rows[RKM_PART_COUNT], cols[RKM_PART_COUNT];
} layer_parts;

/* Name of expert e's part (role's per-expert template), or of the fused
 * tensor (e < 0), into nm; NULL if the arch has no such tensor. */
static const char *expert_name(const rkm_source *s, int role, int il, int e, char *nm, size_t cap)
{
    const rkm_tensor_info *t = rkm_arch_tensor(s->hp.arch, role);
    const char *tmpl = !t ? NULL : e >= 0 ? t->gguf_split : t->gguf;
    return tmpl && !rkm_arch_format(tmpl, il, e, nm, cap) ? nm : NULL;
}

static int layer_sources(const rkm_source *s, int il, layer_parts *lp)
{
    const rkm_hparams *hp = &s->hp;
    char nm[128];
    memset(lp, 0, sizeof *lp);
    for (int p = 0; p < RKM_PART_COUNT; p++) {
        lp->rows[p] = p == RKM_PART_DOWN ? hp->n_embd : hp->n_ff_exp;
        lp->cols[p] = p == RKM_PART_DOWN ? hp->n_ff_exp : hp->n_embd;
    }
    const rkm_src_tensor *gu = expert_name(s, RKM_TENSOR_FFN_GATE_UP_EXPS, il, -1, nm, sizeof nm) ? rkm_source_find(s, nm) : NULL;
    int rc;
    if (gu) {
        if ((rc = expect(s, nm, 0, 3, hp->n_embd, 2 * hp->n_ff_exp, hp->n_expert))) return rc;
        lp->t[RKM_PART_GATE] = lp->t[RKM_PART_UP] = gu;
        lp->stride[RKM_PART_GATE] = lp->stride[RKM_PART_UP] = 2 * hp->n_ff_exp;
        lp->row_off[RKM_PART_UP] = hp->n_ff_exp;
    }
    for (int p = 0; p < RKM_PART_COUNT; p++) {
        if (lp->t[p]) continue;
        lp->t[p] = expert_name(s, part_roles[p], il, -1, nm, sizeof nm) ? rkm_source_find(s, nm) : NULL;
        if (lp->t[p]) {
            if ((rc = expect(s, nm, 0, 3, lp->cols[p], lp->rows[p], hp->n_expert))) return rc;
            lp->stride[p] = lp->rows[p];
            continue;
        }
        for (int e = 0; e < hp->n_expert; e++) {
            if (!expert_name(s, part_roles[p], il, e, nm, sizeof nm))
                return rkm_err(RKM_EFORMAT, "layer %d: no %s experts", il, part_names[p]);
            if ((rc = expect(s, nm, 0, 2, lp->cols[p], lp->rows[p], 1)))
                return rkm_err_prefix(rc, "layer %d expert %s", il, part_names[p]);
        }
    }
    return 0;
}

/* Where part p of expert e comes from: a slice of the fused tensor, or the
 * per-expert tensor from row 0. */
static const rkm_src_tensor *part_source(const rkm_source *s, const layer_parts *lp, int il, int p, int e, int64_t *r0)
{
    if (lp->t[p]) {
        *r0 = (int64_t)e * lp->stride[p] + lp->row_off[p];
        return lp->t[p];
    }
    char nm[128];
    *r0 = 0;
    return expert_name(s, part_roles[p], il, e, nm, sizeof nm) ? rkm_source_find(s, nm) : NULL;
}

/* Every tensor the table and the hyper-parameters imply, with its shape;
 * the routed experts through layer_sources. */
static int check_shapes(const rkm_source *s)
{
    const rkm_hparams *hp = &s->hp;
    const rkm_arch_info *a = rkm_arch_info_of(hp->arch);
    char nm[128];
    int rc;
    for (int il = -1; il < hp->n_layer; il++) {
        for (int i = 0; i < a->n_tensors; i++) {
            const rkm_tensor_info *t = &a->tensors[i];
            int64_t ne[3];
            if (rkm_tensor_role_is_expert(t->role) || !rkm_hparams_tensor_expected(hp, t, il)) continue;
            int nd = rkm_hparams_tensor_ne(hp, t, il, ne);
            if ((rc = rkm_arch_format(t->gguf, il, 0, nm, sizeof nm)) ||
                (rc = expect(s, nm, !rkm_hparams_tensor_required(hp, t, il), nd, ne[0], ne[1], ne[2])))
                return rc;
        }
        layer_parts lp;
        if (il >= 0 && rkm_hparams_is_moe_layer(hp, il) && (rc = layer_sources(s, il, &lp))) return rc;
    }
    return 0;
}

/* ---------------------------------------------------------- outputs */

static int write_resident(conv *c, scratch *sc, const char *out, rkm_model_dir *md)
{
    const rkm_source *s = c->src;
    char *path = rkm_path_join(out, "resident.bin");
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    if (fd < 0) {
        int rc = rkm_err(RKM_EIO, "%s: %s", path ? path : out, strerror(errno));
        free(path);
        return rc;
    }
    md->tensors = calloc((size_t)s->n_tensors + 1, sizeof *md->tensors);
    if (!md->tensors) {
        close(fd);
        free(path);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    uint64_t off = 0;
    int rc = 0;
    uint8_t *buf = NULL;
    size_t buf_cap = 0;
    rkm_hasher *h = rkm_hasher_new();
    if (!h) rc = rkm_err(RKM_ENOMEM, "out of memory");
    for (int i = 0; i < s->n_tensors && !rc; i++) {
        const rkm_src_tensor *t = &s->tensors[i];
        if (is_expert_tensor(s, t->name)) continue;
        rkm_tensor_view *tv = &md->tensors[md->n_tensors++];
        tv->name = strdup(t->name);
        tv->n_dims = t->n_dims;
        memcpy(tv->ne, t->ne, sizeof tv->ne);
        while (tv->n_dims > 1 && tv->ne[tv->n_dims - 1] == 1) tv->n_dims--;
        tv->type = pick_type(c, t->name, t->type, tv->n_dims, t->ne[0]);
        count_type(c, t->type, tv->type, tv->type, 1);
        int64_t rows = (int64_t)(t->nbytes / rkm_type_row_bytes(t->type, t->ne[0]));
        size_t out_row = rkm_type_row_bytes(tv->type, t->ne[0]);
        tv->nbytes = out_row * (uint64_t)rows;
        off = RKM_ALIGN_UP(off, RKM_RESIDENT_ALIGN);
        tv->offset = off;
        rkm_hasher_free(h);
        h = rkm_hasher_new();
        if (!h || !tv->name) {
            rc = rkm_err(RKM_ENOMEM, "out of memory");
            break;
        }
        int64_t per = RKM_MAX(1, (int64_t)(CHUNK_BYTES / out_row));
        if ((size_t)per * out_row > buf_cap) {
            free(buf);
            buf_cap = (size_t)per * out_row;
            buf = malloc(buf_cap);
            if (!buf) {
                rc = rkm_err(RKM_ENOMEM, "out of memory");
                break;
            }
        }
        const uint64_t in_row = rkm_type_row_bytes(t->type, t->ne[0]);
        for (int64_t r = 0; r < rows && !rc; r += per) {
            int64_t k = RKM_MIN(per, rows - r);
            rc = convert_rows(c, sc, t, r, k, tv->type, buf);
            if (!rc) {
                rkm_hasher_update(h, buf, (size_t)k * out_row);
                rc = rkm_pwrite_all(fd, buf, (size_t)k * out_row, off + (uint64_t)r * out_row, path);
            }
            /* a big tensor's source rows are released chunk by chunk */
            if (!rc && c->consumed) c->consumed(c->user, t, (uint64_t)r * in_row, (uint64_t)k * in_row);
        }
        tv->checksum = rkm_hasher_digest(h);
        off += tv->nbytes;
    }
    md->resident_bytes = off;
    if (!rc && ftruncate(fd, (off_t)off) != 0) rc = rkm_err(RKM_EIO, "%s: %s", path, strerror(errno));
    if (!rc && fsync(fd) != 0) rc = rkm_err(RKM_EIO, "%s: fsync: %s", path, strerror(errno));
    close(fd);
    rkm_hasher_free(h);
    free(buf);
    free(path);
    return rc;
}

/* The experts of one layer, shared by its workers. */
typedef struct {
    conv *c;
    const layer_parts *lp;
    rkm_expert_layer *el;
    int il, fd;
    const char *path;
    pthread_mutex_t mu; /* guards next, rc, msg */
    int next, rc;
    char msg[1024];
} layer_job;

static int convert_expert(layer_job *j, scratch *sc, uint8_t *blob, int e)
{
    const rkm_expert_layer *el = j->el;
    memset(blob, 0, (size_t)el->blob_stride);
    for (int p = 0; p < RKM_PART_COUNT; p++) {
        int64_t r0;
        const rkm_src_tensor *t = part_source(j->c->src, j->lp, j->il, p, e, &r0);
        int rc = 0;
        if (el->part[p].type == RKM_TYPE_RKNN_I8) {
            /* 32 rows at a time through f32, quantized per row into their
             * native tile (bounded memory whatever the part's size) */
            int64_t K = el->part[p].ne[0], N = el->part[p].ne[1];
            float *rows = malloc(sizeof(float) * (size_t)K * RKM_RKNN_I8_TILE);
            if (!rows) return rkm_err(RKM_ENOMEM, "out of memory");
            for (int64_t n0 = 0; n0 < N && !rc; n0 += RKM_RKNN_I8_TILE) {
                rc = convert_rows(j->c, sc, t, r0 + n0, RKM_RKNN_I8_TILE, RKM_TYPE_F32, (uint8_t *)rows);
                if (!rc) rkm_rknn_i8_pack_rows(rows, K, N, n0, RKM_RKNN_I8_TILE, blob + el->part[p].offset);
            }
            free(rows);
        } else {
            /* packed parts: converted as plain rows, then interleaved in place */
            int pt = el->part[p].type, base = rkm_unpack_type(pt);
            rc = convert_rows(j->c, sc, t, r0, j->lp->rows[p], base, blob + el->part[p].offset);
            if (!rc && pt != base) rc = rkm_pack_rows(base, blob + el->part[p].offset, el->part[p].ne[0], el->part[p].ne[1]);
        }
        if (rc) return rc;
    }
    for (int p = 0; p < RKM_PART_COUNT && j->c->consumed; p++) {
        int64_t r0;
        const rkm_src_tensor *t = part_source(j->c->src, j->lp, j->il, p, e, &r0);
        const uint64_t rb = rkm_type_row_bytes(t->type, t->ne[0]);
        j->c->consumed(j->c->user, t, (uint64_t)r0 * rb, (uint64_t)j->lp->rows[p] * rb);
    }
    j->el->checksums[e] = rkm_hash(blob, (size_t)el->blob_bytes);
    return rkm_pwrite_all(j->fd, blob, (size_t)el->blob_stride, (uint64_t)e * el->blob_stride, j->path);
}

static void *expert_worker(void *arg)
{
    layer_job *j = arg;
    scratch sc = {0};
    uint8_t *blob = rkm_alloc_aligned((size_t)j->el->blob_stride, RKM_EXPERT_ALIGN);
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int e = j->rc || !blob ? j->el->n_expert : j->next++;
        if (!blob && !j->rc) {
            j->rc = RKM_ENOMEM;
            snprintf(j->msg, sizeof j->msg, "out of memory for an expert blob");
        }
        pthread_mutex_unlock(&j->mu);
        if (e >= j->el->n_expert) break;
        int rc = convert_expert(j, &sc, blob, e);
        if (rc) {
            pthread_mutex_lock(&j->mu);
            if (!j->rc) {
                j->rc = rc;
                snprintf(j->msg, sizeof j->msg, "%s", rkm_last_error());
            }
            pthread_mutex_unlock(&j->mu);
        }
    }
    rkm_free_aligned(blob);
    free(sc.in);
    free(sc.f32);
    return NULL;
}

static int write_expert_layer(conv *c, const char *out, int il, rkm_expert_layer *el)
{
    const rkm_source *s = c->src;
    const rkm_hparams *hp = &s->hp;
    layer_parts lp;
    int rc = layer_sources(s, il, &lp);
    if (rc) return rc;
    char nm[128];
    uint64_t off = 0;
    for (int p = 0; p < RKM_PART_COUNT; p++) {
        int64_t r0;
        const rkm_src_tensor *t = part_source(s, &lp, il, p, 0, &r0);
        rkm_expert_part *ep = &el->part[p];
        const int picked = pick_type(c, t->name, t->type, 2, lp.cols[p]);
        ep->type = picked;
        if (c->npu && rkm_rknn_i8_shape_ok(lp.cols[p], lp.rows[p])) ep->type = RKM_TYPE_RKNN_I8;
        else if (!c->plain_experts) ep->type = rkm_pack_type(ep->type, lp.rows[p]);
        count_type(c, t->type, picked, ep->type, hp->n_expert);
        ep->ne[0] = lp.cols[p];
        ep->ne[1] = lp.rows[p];
        ep->nbytes = rkm_type_row_bytes(ep->type, ep->ne[0]) * (uint64_t)ep->ne[1];
        off = RKM_ALIGN_UP(off, RKM_RESIDENT_ALIGN);
        ep->offset = off;
        off += ep->nbytes;
    }
    el->layer = il;
    el->n_expert = hp->n_expert;
    el->blob_bytes = off;
    el->blob_stride = RKM_ALIGN_UP(off, RKM_EXPERT_ALIGN);
    snprintf(nm, sizeof nm, "experts/blk.%d.bin", il);
    el->file = strdup(nm);
    el->checksums = calloc((size_t)hp->n_expert, sizeof(uint64_t));
    char *path = el->file ? rkm_path_join(out, el->file) : NULL;
    /* Blobs are 4096-aligned in offset, size and memory: written with
     * O_DIRECT they skip the page cache (no kernel copy, no dirty-page
     * build-up), where the file system allows it. */
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644) : -1;
    if (fd < 0 && path && errno == EINVAL) fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!el->checksums || fd < 0) {
        rc = fd < 0 && path ? rkm_err(RKM_EIO, "%s: %s", path, strerror(errno)) : rkm_err(RKM_ENOMEM, "out of memory");
        goto out;
    }
    layer_job job = {.c = c, .lp = &lp, .el = el, .il = il, .fd = fd, .path = path};
    pthread_mutex_init(&job.mu, NULL);
    int nw = RKM_MIN(CONVERT_WORKERS, el->n_expert);
    pthread_t th[CONVERT_WORKERS];
    int started = 0;
    for (int w = 1; w < nw; w++)
        if (pthread_create(&th[w], NULL, expert_worker, &job) == 0) started = w;
        else break;
    expert_worker(&job);
    for (int w = 1; w <= started; w++) pthread_join(th[w], NULL);
    pthread_mutex_destroy(&job.mu);
    rc = job.rc;
    if (rc) rkm_err(rc, "%s", job.msg);
    if (!rc && fsync(fd) != 0) rc = rkm_err(RKM_EIO, "%s: fsync: %s", path, strerror(errno));
out:
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

static int write_text(const char *out, const char *name, const char *data, size_t n)
{
    char *p = rkm_path_join(out, name);
    int rc = p ? rkm_write_file_atomic(p, data, n) : rkm_err(RKM_ENOMEM, "out of memory");
    free(p);
    return rc;
}

/* A Hugging Face Gemma 4 checkpoint whose tokenizer.json is of Gemma's
 * kind: its vocabulary as llama.cpp's converter writes it into the GGUF
 * (tokenizer.ggml.model gemma4), so that the model tokenizes as the
 * converted GGUF does in llama.cpp. 1 when written, 0 when the tokenizer
 * is of another kind (then copied as it is), or a negative RKM_E*. */
static int write_gemma4_vocab(const rkm_source *s, const char *out, rkm_model_dir *md)
{
    if (s->hp.arch != RKM_ARCH_GEMMA4) return 0;
    char *tj = rkm_path_join(s->hf_dir, "tokenizer.json"), *tc = rkm_path_join(s->hf_dir, "tokenizer_config.json");
    if (!tj || !tc) {
        free(tj);
        free(tc);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    struct stat st;
    rkm_tokenizer *t = stat(tj, &st) == 0 ? rkm_tokenizer_load(tj, stat(tc, &st) == 0 ? tc : NULL) : NULL;
    free(tj);
    free(tc);
    const char *model = rkm_tokenizer_gguf_model(t, "gemma4");
    int rc = 0;
    if (t && model && !strcmp(model, "gemma4")) {
        rkm_gguf_writer *w = rkm_gguf_writer_new();
        char *p = rkm_path_join(out, "tokenizer.gguf");
        if (!w || !p) rc = rkm_err(RKM_ENOMEM, "out of memory");
        if (!rc) {
            rkm_gguf_writer_set_str(w, "general.architecture", "gemma4");
            rc = rkm_tokenizer_write_gguf_arch(t, w, "gemma4");
            /* the converter takes chat_template.jinja when tokenizer_config.json has none */
            if (!rc && !rkm_tokenizer_chat_template(t) && s->chat_template)
                rkm_gguf_writer_set_str(w, "tokenizer.chat_template", s->chat_template);
        }
        if (!rc) rc = rkm_gguf_writer_begin(w, p);
        if (!rc) rc = rkm_gguf_writer_finish(w);
        if (!rc && !(md->tokenizer_file = strdup("tokenizer.gguf"))) rc = rkm_err(RKM_ENOMEM, "out of memory");
        if (!rc) rc = 1;
        free(p);
        rkm_gguf_writer_free(w);
    }
    rkm_tokenizer_free(t);
    return rc;
}

static int write_tokenizer(const conv *c, const char *out, rkm_model_dir *md)
{
    const rkm_source *s = c->src;
    int rc = 0;
    if (s->kind != 0 && (rc = write_gemma4_vocab(s, out, md)) != 0) {
        if (rc < 0) return rc;
        rc = 0;
    } else if (s->kind == 0) {
        if (rkm_gguf_find(s->gguf, "tokenizer.ggml.model") < 0) return 0;
        rkm_gguf_writer *w = rkm_gguf_writer_new();
        if (!w) return rkm_err(RKM_ENOMEM, "out of memory");
        for (int i = 0; i < rkm_gguf_n_kv(s->gguf); i++)
            if (!strncmp(rkm_gguf_key(s->gguf, i), "tokenizer.", 10) || !strcmp(rkm_gguf_key(s->gguf, i), "general.architecture"))
                rkm_gguf_writer_copy_kv(w, s->gguf, i);
        char *p = rkm_path_join(out, "tokenizer.gguf");
        rc = p ? rkm_gguf_writer_begin(w, p) : rkm_err(RKM_ENOMEM, "out of memory");
        if (!rc) rc = rkm_gguf_writer_finish(w);
        free(p);
        rkm_gguf_writer_free(w);
        if (!rc) md->tokenizer_file = strdup("tokenizer.gguf");
    } else {
        static const char *files[2] = {"tokenizer.json", "tokenizer_config.json"};
        for (int i = 0; i < 2 && !rc; i++) {
            char *p = rkm_path_join(s->hf_dir, files[i]);
            size_t n;
            char *data = p ? rkm_read_file(p, &n) : NULL;
            free(p);
            if (!data) {
                if (i == 0) fprintf(stderr, "warning: %s has no tokenizer.json; the model will have no tokenizer\n", s->hf_dir);
                break;
            }
            rc = write_text(out, files[i], data, n);
            free(data);
            if (!rc) *(i == 0 ? &md->tokenizer_file : &md->tokenizer_config_file) = strdup(files[i]);
        }
    }
    if (!rc && s->chat_template) {
        rc = write_text(out, "chat_template.jinja", s->chat_template, strlen(s->chat_template));
        if (!rc) md->chat_template_file = strdup("chat_template.jinja");
    }
    md->sampling = s->sampling; /* the authors' recommended sampling, kept in the manifest */
    return rc;
}

static void remove_outputs(const char *out, const rkm_model_dir *md)
{
    static const char *files[] = {"manifest.json", "resident.bin", "tokenizer.gguf", "tokenizer.json",
                                  "tokenizer_config.json", "chat_template.jinja"};
    for (size_t i = 0; i < RKM_ARRAY_LEN(files); i++) {
        char *p = rkm_path_join(out, files[i]);
        if (p) unlink(p);
        free(p);
    }
    for (int il = 0; il < md->hp.n_layer; il++) {
        char nm[64];
        snprintf(nm, sizeof nm, "experts/blk.%d.bin", il);
        char *p = rkm_path_join(out, nm);
        if (p) unlink(p);
        free(p);
    }
    char *p = rkm_path_join(out, "experts");
    if (p) rmdir(p);
    free(p);
}

int rkm_convert_read_order(const rkm_source *s, rkm_convert_read **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    size_t n = 0, cap = (size_t)s->n_tensors + 16;
    rkm_convert_read *r = malloc(cap * sizeof *r);
    if (!r) return rkm_err(RKM_ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; i < s->n_tensors; i++) {
        const rkm_src_tensor *t = &s->tensors[i];
        if (!is_expert_tensor(s, t->name)) r[n++] = (rkm_convert_read){t, 0, t->nbytes, -1};
    }
    /* each MoE layer's experts as convert_expert reads them: expert by
     * expert, gate | up | down */
    for (int il = 0; il < s->hp.n_layer && !rc; il++) {
        if (!rkm_hparams_is_moe_layer(&s->hp, il)) continue;
        layer_parts lp;
        if ((rc = layer_sources(s, il, &lp))) break;
        for (int e = 0; e < s->hp.n_expert && !rc; e++)
            for (int p = 0; p < RKM_PART_COUNT; p++) {
                int64_t r0;
                const rkm_src_tensor *t = part_source(s, &lp, il, p, e, &r0);
                if (!t) continue;
                if (n == cap) {
                    rkm_convert_read *g = realloc(r, 2 * cap * sizeof *r);
                    if (!g) {
                        rc = rkm_err(RKM_ENOMEM, "out of memory");
                        break;
                    }
                    r = g;
                    cap *= 2;
                }
                const uint64_t rb = rkm_type_row_bytes(t->type, t->ne[0]);
                r[n++] = (rkm_convert_read){t, (uint64_t)r0 * rb, (uint64_t)lp.rows[p] * rb, il};
            }
    }
    if (rc) {
        free(r);
        return rc;
    }
    *out = r;
    *n_out = n;
    return 0;
}

/* Tensors already quantized that the choice quantizes again: a warning
 * naming their types (each round of quantization adds its error). */
static void warn_requantize(const conv *c)
{
    const rkm_source *s = c->src;
    int n = 0, seen[RKM_TYPE_COUNT] = {0};
    for (int i = 0; i < s->n_tensors && !c->keep; i++) {
        const rkm_src_tensor *t = &s->tensors[i];
        int nd = t->n_dims;
        while (nd > 1 && t->ne[nd - 1] == 1) nd--;
        if (t->type == RKM_TYPE_F32 || t->type == RKM_TYPE_F16 || t->type == RKM_TYPE_BF16 || t->type < 0 ||
            t->type >= RKM_TYPE_COUNT)
            continue;
        const int dt = pick_type(c, t->name, t->type, nd, t->ne[0]);
        if (dt == t->type || dt == RKM_TYPE_F32) continue;
        n++;
        seen[t->type] = 1;
    }
    if (!n) return;
    char types[256] = "";
    size_t len = 0;
    for (int t = 0; t < RKM_TYPE_COUNT && len < sizeof types; t++)
        if (seen[t]) len += (size_t)snprintf(types + len, sizeof types - len, "%s%s", len ? ", " : "", rkm_type_name(t));
    fprintf(stderr,
            "warning: %d tensors are already quantized (%s) and %s quantizes them again: each round of "
            "quantization adds error; convert from the F32, F16 or BF16 original if there is one, or keep the "
            "types with --quant keep\n",
            n, types, rkm_quant_mix_name(c->plan.mix));
}

/* ----------------------------------------------------------- resume */

/* Takes the verified outputs of prev into md: the resident tensors, and
 * the first n_layers expert layers. */
static void take_outputs(rkm_model_dir *md, rkm_model_dir *prev, int n_layers)
{
    md->tensors = prev->tensors;
    md->n_tensors = prev->n_tensors;
    md->resident_bytes = prev->resident_bytes;
    prev->tensors = NULL;
    prev->n_tensors = 0;
    for (int i = 0; i < n_layers; i++) {
        md->experts[i] = prev->experts[i];
        md->experts[i].fd = -1; /* prev's, closed with it */
        prev->experts[i].file = NULL;
        prev->experts[i].checksums = NULL;
    }
}

/* The progress so far, with the caller's note. */
static int write_progress(const rkm_model_dir *md, const char *out, const char *key, const rkm_convert_opts *o)
{
    char note[512];
    const char *n = o->progress_note ? o->progress_note(o->user, note, sizeof note) : NULL;
    return rkm_model_dir_write_progress(md, out, key, n);
}

int rkm_convert_check_opts(const rkm_convert_opts *o)
{
    if (!rkm_quant_mix_find(o && o->quant ? o->quant : "q8_0")) return RKM_EINVAL;
    const char *tg = o && o->target ? o->target : "cpu";
    if (strcmp(tg, "rk3588") && strcmp(tg, "rk3576") && strcmp(tg, "cpu"))
        return rkm_err(RKM_EINVAL, "--target must be cpu, rk3588 or rk3576 (got '%s')", tg);
    return 0;
}

int rkm_convert(const char *input, const char *out, const rkm_convert_opts *o)
{
    int rc = rkm_convert_check_opts(o);
    if (rc) return rc;
    rkm_source *s = rkm_source_open(input);
    if (!s) {
        if (strncmp(rkm_last_error(), input, strlen(input)) != 0) rkm_err_prefix(RKM_EFORMAT, "%s", input);
        return RKM_EFORMAT;
    }
    rc = rkm_convert_source(s, input, out, o);
    rkm_source_close(s);
    return rc;
}

/* --mmproj: a vision tower whose projection is the text model's width */
static int check_mmproj(const char *path, const rkm_hparams *hp)
{
    rkm_gguf *g = rkm_gguf_open(path);
    rkm_vision_hparams vp;
    int rc = g ? rkm_vision_read(g, &vp) : RKM_EFORMAT;
    rkm_gguf_close(g);
    if (rc) return rkm_err_prefix(rc, "%s", path);
    if (vp.proj_dim != hp->n_embd)
        return rkm_err(RKM_EINVAL, "%s: the vision tower projects to %d, the text model is %d wide", path, vp.proj_dim,
                       hp->n_embd);
    return 0;
}

/* The vision tower copied beside the model as mmproj.gguf, with its size
 * and checksum in the manifest. */
static int copy_mmproj(const char *path, const char *out, rkm_model_dir *md)
{
    char *dst = rkm_path_join(out, "mmproj.gguf");
    int rc = dst ? rkm_copy_file_atomic(path, dst, &md->mmproj_bytes, &md->mmproj_checksum)
                 : rkm_err(RKM_ENOMEM, "out of memory");
    free(dst);
    if (!rc && !(md->mmproj_file = strdup("mmproj.gguf"))) rc = rkm_err(RKM_ENOMEM, "out of memory");
    return rc;
}

int rkm_convert_source(const rkm_source *s, const char *input, const char *out, const rkm_convert_opts *o)
{
    conv c;
    memset(&c, 0, sizeof c);
    scratch sc = {0};
    int rc = rkm_convert_check_opts(o);
    if (rc) return rc;
    const rkm_quant_mix *mix = rkm_quant_mix_find(o && o->quant ? o->quant : "q8_0");
    const char *q = rkm_quant_mix_name(mix);
    c.keep = rkm_quant_mix_keeps(mix);
    const char *tg = o && o->target ? o->target : "cpu";
    c.npu = !strcmp(tg, "rk3588") || !strcmp(tg, "rk3576");
    c.plain_experts = o && o->plain_experts;
    c.consumed = o ? o->consumed : NULL;
    c.user = o ? o->user : NULL;
    pthread_mutex_init(&c.mu, NULL);
    c.src = s;
    rkm_quant_plan_init(&c.plan, mix, s);
    rkm_model_dir *md = calloc(1, sizeof *md);
    if (!md) return rkm_err(RKM_ENOMEM, "out of memory");
    md->resident_fd = md->map_guard = -1;
    md->hp = s->hp;
    md->source = strdup(s->desc ? s->desc : input);
    md->quant = strdup(q);
    rc = check_shapes(s);
    if (!rc && o && o->mmproj) rc = check_mmproj(o->mmproj, &s->hp);
    if (!rc) warn_requantize(&c);
    int created = 0;
    if (!rc) {
        char *ed = rkm_path_join(out, "experts");
        rc = ed ? rkm_mkdir_p(ed) : rkm_err(RKM_ENOMEM, "out of memory");
        free(ed);
        created = 1;
    }
    /* what an interrupted run of the same key left and still verifies */
    const char *key = o ? o->resume_key : NULL;
    rkm_model_dir *prev = NULL;
    int kept = 0, other = 0;
    if (!rc && key) {
        prev = rkm_model_dir_load_progress(out, key, &other, NULL);
        if (prev) kept = rkm_model_dir_verified_prefix(prev);
        if (other) rkm_model_dir_remove_progress(out);
    }
    if (o && o->resumed) *o->resumed = other ? -1 : kept;
    int n_moe = 0;
    for (int il = 0; il < s->hp.n_layer; il++) n_moe += rkm_hparams_is_moe_layer(&s->hp, il);
    if (!rc && !(md->experts = calloc((size_t)n_moe + 1, sizeof *md->experts))) rc = rkm_err(RKM_ENOMEM, "out of memory");
    if (!rc) {
        /* a stale manifest would make a half-rewritten model look complete */
        char *mp = rkm_path_join(out, "manifest.json");
        if (mp) unlink(mp);
        free(mp);
        rkm_progress_init(&c.prog, o ? o->progress : NULL, "convert", s->total_bytes);
        if (kept > 0) take_outputs(md, prev, kept - 1);
        else rc = write_resident(&c, &sc, out, md);
        if (!rc && key && kept == 0) rc = write_progress(md, out, key, o);
    }
    if (!rc) {
        for (int il = 0; il < s->hp.n_layer && !rc; il++) {
            if (!rkm_hparams_is_moe_layer(&s->hp, il)) continue;
            if (md->n_expert_layers < kept - 1 && md->experts[md->n_expert_layers].layer == il) {
                md->n_expert_layers++; /* verified from the interrupted run */
                continue;
            }
            md->experts[md->n_expert_layers].fd = -1;
            rc = write_expert_layer(&c, out, il, &md->experts[md->n_expert_layers++]);
            if (!rc && key) rc = write_progress(md, out, key, o);
        }
    }
    rkm_model_dir_close(prev);
    if (!rc) rc = write_tokenizer(&c, out, md);
    if (!rc && o && o->mmproj) rc = copy_mmproj(o->mmproj, out, md);
    if (!rc && o && o->before_manifest) rc = o->before_manifest(o->user);
    if (!rc) rc = rkm_model_dir_write_manifest(md, out);
    if (!rc && key) rkm_model_dir_remove_progress(out);
    if (!rc) rkm_progress_done(&c.prog);
    if (!rc) report_types(&c, o ? o->progress : NULL);
    else if (c.prog.out && c.prog.tty) fputc('\n', c.prog.out);
    if (rc && created && key) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rkm_last_error());
        rc = rkm_err(rc, "%s (the output so far is kept in %s: the same command resumes it)", msg, out);
    } else if (rc && created) {
        int saved = rc;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rkm_last_error());
        remove_outputs(out, md);
        rc = rkm_err(saved, "%s (partial output removed; no manifest written)", msg);
    }
    rkm_model_dir_close(md);
    free(sc.in);
    free(sc.f32);
    pthread_mutex_destroy(&c.mu);
    return rc;
}
