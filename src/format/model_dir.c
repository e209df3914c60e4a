/*
 * model_dir.c - reading and writing a .rkmojo model directory's manifest,
 * mapping resident.bin, reading and verifying expert blobs (layout in
 * model_dir.h and docs/FORMAT.md).
 *
 * The manifest is untrusted input: every field is type- and range-checked,
 * every offset checked against the file sizes, file names must stay inside
 * the directory. Threads: immutable after open; reads use pread.
 * Ownership: rkm_model_dir_close frees the manifest, the mapping and fds.
 */
#include "format/model_dir.h"

#include <float.h>
#include <math.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/quant.h"
#include "util/common.h"
#include "util/mapguard.h"
#include "util/name_index.h"

static const char *tv_name(const void *ctx, int i) { return ((const rkm_model_dir *)ctx)->tensors[i].name; }

/* ------------------------------------------------ hparams <-> JSON table */

static cJSON *hparams_to_json(const rkm_hparams *hp)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "arch", hp->arch_name);
    for (int i = 0; i < rkm_hparams_n_fields(); i++) {
        const rkm_hparams_field *f = rkm_hparams_field_at(i);
        const char *p = (const char *)hp + f->off;
        if (f->kind == RKM_HP_FLOAT) cJSON_AddNumberToObject(o, f->name, (double)*(const float *)p);
        else if (f->kind == RKM_HP_BOOL) cJSON_AddBoolToObject(o, f->name, *(const int *)p);
        else cJSON_AddNumberToObject(o, f->name, *(const int *)p);
    }
    cJSON *kv = cJSON_AddArrayToObject(o, "n_head_kv");
    cJSON *swa = cJSON_AddArrayToObject(o, "swa_layer");
    for (int i = 0; i < hp->n_layer; i++) {
        cJSON_AddItemToArray(kv, cJSON_CreateNumber(hp->n_head_kv[i]));
        cJSON_AddItemToArray(swa, cJSON_CreateBool(hp->swa_layer[i]));
    }
    int recr = 0;
    for (int i = 0; i < hp->n_layer; i++) recr |= hp->recr_layer[i];
    if (recr) { /* only models with recurrent layers carry the array */
        cJSON *ra = cJSON_AddArrayToObject(o, "recurrent_layer");
        for (int i = 0; i < hp->n_layer; i++) cJSON_AddItemToArray(ra, cJSON_CreateBool(hp->recr_layer[i]));
    }
    return o;
}

static int hparams_from_json(const cJSON *o, rkm_hparams *hp)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "arch");
    if (!cJSON_IsString(a)) return rkm_err(RKM_EFORMAT, "manifest: hparams.arch missing");
    int arch = rkm_arch_from_name(a->valuestring);
    if (!arch) return rkm_err(RKM_EUNSUPPORTED, "manifest: unsupported architecture '%s'", a->valuestring);
    rkm_hparams_init(hp, arch);
    for (int i = 0; i < rkm_hparams_n_fields(); i++) {
        const rkm_hparams_field *f = rkm_hparams_field_at(i);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f->name);
        char *p = (char *)hp + f->off;
        if (!v && f->optional) continue;
        if (f->kind == RKM_HP_BOOL) {
            if (!cJSON_IsBool(v)) return rkm_err(RKM_EFORMAT, "manifest: hparams.%s must be a boolean", f->name);
            *(int *)p = cJSON_IsTrue(v);
        } else {
            if (!cJSON_IsNumber(v)) return rkm_err(RKM_EFORMAT, "manifest: hparams.%s must be a number", f->name);
            if (f->kind == RKM_HP_FLOAT) {
                if (!(fabs(v->valuedouble) <= FLT_MAX)) return rkm_err(RKM_EFORMAT, "manifest: %s is not a float", f->name);
                *(float *)p = (float)v->valuedouble;
            }
            else {
                if (v->valuedouble < -1e9 || v->valuedouble > 1e9 || v->valuedouble != (double)(int)v->valuedouble)
                    return rkm_err(RKM_EFORMAT, "manifest: hparams.%s is not a valid integer", f->name);
                *(int *)p = (int)v->valuedouble;
            }
        }
    }
    if (hp->n_layer < 1 || hp->n_layer > RKM_MAX_LAYERS) return rkm_err(RKM_EFORMAT, "manifest: bad n_layer");
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(o, "n_head_kv");
    const cJSON *swa = cJSON_GetObjectItemCaseSensitive(o, "swa_layer");
    if (!cJSON_IsArray(kv) || cJSON_GetArraySize(kv) != hp->n_layer || !cJSON_IsArray(swa) ||
        cJSON_GetArraySize(swa) != hp->n_layer)
        return rkm_err(RKM_EFORMAT, "manifest: n_head_kv and swa_layer need one entry per layer");
    for (int i = 0; i < hp->n_layer; i++) {
        const cJSON *k = cJSON_GetArrayItem(kv, i), *s = cJSON_GetArrayItem(swa, i);
        if (!cJSON_IsNumber(k) || !cJSON_IsBool(s) || !(k->valuedouble >= 0 && k->valuedouble <= 65536))
            return rkm_err(RKM_EFORMAT, "manifest: bad per-layer entry");
        hp->n_head_kv[i] = (int)k->valuedouble;
        hp->swa_layer[i] = (uint8_t)cJSON_IsTrue(s);
    }
    const cJSON *ra = cJSON_GetObjectItemCaseSensitive(o, "recurrent_layer");
    if (ra && (!cJSON_IsArray(ra) || cJSON_GetArraySize(ra) != hp->n_layer))
        return rkm_err(RKM_EFORMAT, "manifest: recurrent_layer needs one entry per layer");
    for (int i = 0; ra && i < hp->n_layer; i++) {
        const cJSON *r = cJSON_GetArrayItem(ra, i);
        if (!cJSON_IsBool(r)) return rkm_err(RKM_EFORMAT, "manifest: bad recurrent_layer entry");
        hp->recr_layer[i] = (uint8_t)cJSON_IsTrue(r);
    }
    return rkm_hparams_validate(hp);
}

/* ------------------------------------------------------------ helpers */

static int get_u64(const cJSON *o, const char *k, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9.0e15 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return rkm_err(RKM_EFORMAT, "manifest: '%s' must be a non-negative integer", k);
    *out = (uint64_t)v->valuedouble;
    return 0;
}

static int get_hash(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 16) return rkm_err(RKM_EFORMAT, "manifest: bad checksum");
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v->valuestring, &end, 16);
    if (errno || *end) return rkm_err(RKM_EFORMAT, "manifest: bad checksum '%s'", v->valuestring);
    *out = x;
    return 0;
}

static void hash_str(uint64_t h, char out[17]) { snprintf(out, 17, "%016" PRIx64, h); }

/* A relative path that stays inside the directory. */
static int safe_rel_path(const char *p)
{
    if (!p || !*p || p[0] == '/' || strlen(p) > 512) return 0;
    const char *s = p;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 2 && s[0] == '.' && s[1] == '.') || (n == 1 && s[0] == '.')) return 0;
        s += n;
        if (*s == '/') s++;
    }
    return 1;
}

static int get_shape(const cJSON *o, int *n_dims, int64_t ne[4], int max_dims)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "shape");
    int n = cJSON_IsArray(s) ? cJSON_GetArraySize(s) : 0;
    if (n < 1 || n > max_dims) return rkm_err(RKM_EFORMAT, "manifest: bad shape");
    for (int d = 0; d < 4; d++) ne[d] = 1;
    for (int d = 0; d < n; d++) {
        const cJSON *v = cJSON_GetArrayItem(s, d);
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e12) return rkm_err(RKM_EFORMAT, "manifest: bad shape");
        ne[d] = (int64_t)v->valuedouble;
    }
    *n_dims = n;
    return 0;
}

/* expert: an expert part, which may also be rknn_i8 (the NPU's layout,
 * kernels/rknn_i8.h) or q8_0_x16 / q4_0_x16 / mxfp4_x16 / q4_k_x16 (the
 * matmuls' packed rows, kernels.h); their shapes are checked by the caller */
static int get_dtype(const cJSON *o, int *type, int expert)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    int t = cJSON_IsString(d) ? rkm_type_from_name(d->valuestring) : -1;
    int expert_only = t == RKM_TYPE_RKNN_I8 || rkm_type_packed(t);
    if (!cJSON_IsString(d)) return rkm_err(RKM_EFORMAT, "manifest: dtype missing");
    if (t < 0) return rkm_err(RKM_EFORMAT, "manifest: unknown dtype '%s'", d->valuestring);
    if (!(rkm_type_matmul(t) && !expert_only) && !(expert && expert_only))
        return rkm_err(RKM_EFORMAT, "manifest: unsupported dtype '%s' (type %d; the runtime runs f32, f16, bf16, q8_0, q4_0, "
                       "q2_k..q6_k, iq4_nl, iq4_xs, mxfp4%s)", d->valuestring, t, expert ? ", q8_0_x16, q4_0_x16, mxfp4_x16, q4_k_x16, rknn_i8" : "");
    *type = t;
    return 0;
}

static uint64_t shape_bytes(int type, int n_dims, const int64_t ne[4])
{
    uint64_t rows = 1;
    for (int d = 1; d < n_dims; d++) rows *= (uint64_t)ne[d];
    return rkm_type_row_bytes(type, ne[0]) * rows;
}

typedef struct {
    const char *name; /* in the manifest's "sampling" object */
    unsigned bit;
    size_t off;
    int is_int;
    double lo, hi;
} sampling_field;

static const sampling_field sampling_fields[] = {
    {"temperature", RKM_SAMPLING_TEMPERATURE, offsetof(rkm_sampling_hint, temperature), 0, 0, 100},
    {"top_k", RKM_SAMPLING_TOP_K, offsetof(rkm_sampling_hint, top_k), 1, 0, 1e9},
    {"top_p", RKM_SAMPLING_TOP_P, offsetof(rkm_sampling_hint, top_p), 0, 0, 1},
    {"min_p", RKM_SAMPLING_MIN_P, offsetof(rkm_sampling_hint, min_p), 0, 0, 1},
    {"repeat_penalty", RKM_SAMPLING_REPEAT_PENALTY, offsetof(rkm_sampling_hint, repeat_penalty), 0, 0, 100},
    {"repeat_last_n", RKM_SAMPLING_REPEAT_LAST_N, offsetof(rkm_sampling_hint, repeat_last_n), 1, -1, 1e9},
    {NULL, 0, 0, 0, 0, 0},
};

static const sampling_field *sampling_field_of(unsigned bit)
{
    for (const sampling_field *f = sampling_fields; f->name; f++)
        if (f->bit == bit) return f;
    return NULL;
}

int rkm_sampling_hint_is_int(unsigned bit)
{
    const sampling_field *f = sampling_field_of(bit);
    return f && f->is_int;
}

int rkm_sampling_hint_set(rkm_sampling_hint *h, unsigned bit, double v, const char *what)
{
    const sampling_field *f = sampling_field_of(bit);
    if (!f) return rkm_err(RKM_EINVAL, "%s: no sampling field %#x", what, bit);
    if (!(v >= f->lo && v <= f->hi)) /* also refuses NaN, and keeps (int)v defined */
        return rkm_err(RKM_EFORMAT, "%s: sampling %s = %g is outside [%g, %g]", what, f->name, v, f->lo, f->hi);
    if (f->is_int) *(int *)((char *)h + f->off) = (int)v;
    else *(float *)((char *)h + f->off) = (float)v;
    h->set |= bit;
    return 0;
}

static char *dup_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

/* ------------------------------------------------------------- parse */

static const char *part_names[RKM_PART_COUNT] = {"gate", "up", "down"};

static int parse_layer(const cJSON *l, rkm_expert_layer *el, const rkm_hparams *hp)
{
    int rc;
    uint64_t v;
    if ((rc = get_u64(l, "layer", &v))) return rc;
    if (v >= (uint64_t)hp->n_layer) return rkm_err(RKM_EFORMAT, "manifest: expert layer %llu out of range", (unsigned long long)v);
    el->layer = (int)v;
    el->file = dup_str(l, "file");
    if (!safe_rel_path(el->file)) return rkm_err(RKM_EFORMAT, "manifest: bad expert file name in layer %d", el->layer);
    if ((rc = get_u64(l, "count", &v))) return rc;
    if (v != (uint64_t)hp->n_expert) return rkm_err(RKM_EFORMAT, "manifest: layer %d has %llu experts, hparams say %d",
                                                   el->layer, (unsigned long long)v, hp->n_expert);
    el->n_expert = (int)v;
    if ((rc = get_u64(l, "blob_stride", &el->blob_stride)) || (rc = get_u64(l, "blob_bytes", &el->blob_bytes))) return rc;
    if (el->blob_stride == 0 || el->blob_stride % RKM_EXPERT_ALIGN || el->blob_bytes > el->blob_stride)
        return rkm_err(RKM_EFORMAT, "manifest: layer %d: bad blob stride/size", el->layer);
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(l, "parts");
    for (int p = 0; p < RKM_PART_COUNT; p++) {
        const cJSON *po = cJSON_GetObjectItemCaseSensitive(parts, part_names[p]);
        rkm_expert_part *ep = &el->part[p];
        int nd;
        int64_t ne[4];
        if (!cJSON_IsObject(po)) return rkm_err(RKM_EFORMAT, "manifest: layer %d lacks part '%s'", el->layer, part_names[p]);
        if ((rc = get_dtype(po, &ep->type, 1)) || (rc = get_shape(po, &nd, ne, 2)) || (rc = get_u64(po, "offset", &ep->offset)) ||
            (rc = get_u64(po, "bytes", &ep->nbytes)))
            return rkm_err_prefix(rc, "layer %d part %s", el->layer, part_names[p]);
        ep->ne[0] = ne[0];
        ep->ne[1] = ne[1];
        if (ep->type == RKM_TYPE_RKNN_I8 && (ne[0] <= 0 || ne[1] <= 0 || ne[0] % 32 || ne[1] % 32))
            return rkm_err(RKM_EFORMAT, "manifest: layer %d part %s: rknn_i8 needs multiples of 32", el->layer, part_names[p]);
        if ((ep->type & RKM_TYPE_PACKED) && ne[1] < 16)
            return rkm_err(RKM_EFORMAT, "manifest: layer %d part %s: %s needs at least 16 rows", el->layer,
                           part_names[p], rkm_type_name(ep->type));
        if (!rkm_type_row_bytes(ep->type, ne[0]))
            return rkm_err(RKM_EFORMAT, "manifest: layer %d part %s: row of %lld values is not a multiple of the %s block",
                           el->layer, part_names[p], (long long)ne[0], rkm_type_name(ep->type));
        if (ep->nbytes != shape_bytes(ep->type, 2, ne) || ep->nbytes == 0 || ep->offset > el->blob_bytes ||
            ep->nbytes > el->blob_bytes - ep->offset)
            return rkm_err(RKM_EFORMAT, "manifest: layer %d part %s: size/offset inconsistent", el->layer, part_names[p]);
    }
    const cJSON *hs = cJSON_GetObjectItemCaseSensitive(l, "xxh3");
    if (!cJSON_IsArray(hs) || cJSON_GetArraySize(hs) != el->n_expert)
        return rkm_err(RKM_EFORMAT, "manifest: layer %d needs %d checksums", el->layer, el->n_expert);
    el->checksums = calloc((size_t)el->n_expert, sizeof(uint64_t));
    if (!el->checksums) return rkm_err(RKM_ENOMEM, "out of memory");
    for (int e = 0; e < el->n_expert; e++)
        if ((rc = get_hash(cJSON_GetArrayItem(hs, e), &el->checksums[e]))) return rc;
    return 0;
}

static int parse_manifest(rkm_model_dir *md, const cJSON *root, int partial)
{
    int rc;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "rkmojo"))
        return rkm_err(RKM_EFORMAT, "manifest: not an rkmojo manifest");
    uint64_t ver;
    if ((rc = get_u64(root, "version", &ver))) return rc;
    if (ver != RKM_FORMAT_VERSION)
        return rkm_err(RKM_EUNSUPPORTED, "manifest: format version %llu, this rkmojo reads version %d",
                       (unsigned long long)ver, RKM_FORMAT_VERSION);
    md->version = (int)ver;
    md->source = dup_str(root, "source");
    md->quant = dup_str(root, "quant");
    if ((rc = hparams_from_json(cJSON_GetObjectItemCaseSensitive(root, "hparams"), &md->hp)))
        return rkm_err_prefix(rc, "manifest");
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(root, "resident");
    const cJSON *tens = cJSON_GetObjectItemCaseSensitive(res, "tensors");
    if (!cJSON_IsArray(tens)) return rkm_err(RKM_EFORMAT, "manifest: resident.tensors missing");
    if ((rc = get_u64(res, "bytes", &md->resident_bytes))) return rc;
    md->n_tensors = cJSON_GetArraySize(tens);
    md->tensors = calloc((size_t)md->n_tensors + 1, sizeof *md->tensors);
    if (!md->tensors || rkm_name_index_init(&md->ix, (size_t)md->n_tensors)) {
        md->n_tensors = 0;
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    for (int i = 0; i < md->n_tensors; i++) {
        const cJSON *t = cJSON_GetArrayItem(tens, i);
        rkm_tensor_view *tv = &md->tensors[i];
        tv->name = dup_str(t, "name");
        if (!tv->name || !*tv->name) return rkm_err(RKM_EFORMAT, "manifest: tensor %d has no name", i);
        if (rkm_name_index_add(&md->ix, tv->name, i, tv_name, md) >= 0)
            return rkm_err(RKM_EFORMAT, "manifest: tensor %s listed twice", tv->name);
        if ((rc = get_dtype(t, &tv->type, 0)) || (rc = get_shape(t, &tv->n_dims, tv->ne, 4)) ||
            (rc = get_u64(t, "offset", &tv->offset)) || (rc = get_u64(t, "bytes", &tv->nbytes)) ||
            (rc = get_hash(cJSON_GetObjectItemCaseSensitive(t, "xxh3"), &tv->checksum)))
            return rkm_err_prefix(rc, "tensor %s", tv->name);
        if (!rkm_type_row_bytes(tv->type, tv->ne[0]))
            return rkm_err(RKM_EFORMAT, "manifest: tensor %s: row of %lld values is not a multiple of the %s block", tv->name,
                           (long long)tv->ne[0], rkm_type_name(tv->type));
        if (tv->nbytes != shape_bytes(tv->type, tv->n_dims, tv->ne) || tv->offset % RKM_RESIDENT_ALIGN ||
            tv->offset > md->resident_bytes || tv->nbytes > md->resident_bytes - tv->offset)
            return rkm_err(RKM_EFORMAT, "manifest: tensor %s: size/offset inconsistent", tv->name);
    }
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(root, "experts");
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(ex, "layers");
    md->n_expert_layers = cJSON_IsArray(layers) ? cJSON_GetArraySize(layers) : 0;
    md->experts = calloc((size_t)md->n_expert_layers + 1, sizeof *md->experts);
    if (!md->experts) {
        md->n_expert_layers = 0;
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    for (int i = 0; i < md->n_expert_layers; i++) md->experts[i].fd = -1;
    for (int i = 0; i < md->n_expert_layers; i++) {
        if ((rc = parse_layer(cJSON_GetArrayItem(layers, i), &md->experts[i], &md->hp))) return rc;
        if (i > 0 && md->experts[i].layer <= md->experts[i - 1].layer)
            return rkm_err(RKM_EFORMAT, "manifest: expert layers not sorted");
    }
    int n_moe = 0;
    for (int il = 0; il < md->hp.n_layer; il++) n_moe += rkm_hparams_is_moe_layer(&md->hp, il);
    if (partial ? md->n_expert_layers > n_moe : n_moe != md->n_expert_layers)
        return rkm_err(RKM_EFORMAT, "manifest: %d expert layers listed, the hparams imply %d", md->n_expert_layers, n_moe);
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    if (cJSON_IsObject(tok)) {
        md->tokenizer_file = dup_str(tok, "file");
        md->tokenizer_config_file = dup_str(tok, "config");
        if ((md->tokenizer_file && !safe_rel_path(md->tokenizer_file)) ||
            (md->tokenizer_config_file && !safe_rel_path(md->tokenizer_config_file)))
            return rkm_err(RKM_EFORMAT, "manifest: bad tokenizer file name");
    }
    md->chat_template_file = dup_str(root, "chat_template");
    if (md->chat_template_file && !safe_rel_path(md->chat_template_file))
        return rkm_err(RKM_EFORMAT, "manifest: bad chat template file name");
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(root, "mmproj");
    if (mp) {
        if (!cJSON_IsObject(mp) || !(md->mmproj_file = dup_str(mp, "file")) || !safe_rel_path(md->mmproj_file))
            return rkm_err(RKM_EFORMAT, "manifest: bad mmproj entry (file, bytes, xxh3)");
        if ((rc = get_u64(mp, "bytes", &md->mmproj_bytes)) ||
            (rc = get_hash(cJSON_GetObjectItemCaseSensitive(mp, "xxh3"), &md->mmproj_checksum)))
            return rc;
    }
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(root, "sampling");
    if (sm && !cJSON_IsObject(sm)) return rkm_err(RKM_EFORMAT, "manifest: 'sampling' is not an object");
    for (const sampling_field *f = sampling_fields; sm && f->name; f++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(sm, f->name);
        if (!v) continue;
        if (!cJSON_IsNumber(v)) return rkm_err(RKM_EFORMAT, "manifest: sampling.%s is not a number", f->name);
        double d = v->valuedouble;
        if ((rc = rkm_sampling_hint_set(&md->sampling, f->bit, d, "manifest"))) return rc;
        if (f->is_int && d != (double)*(const int *)((const char *)&md->sampling + f->off))
            return rkm_err(RKM_EFORMAT, "manifest: sampling.%s is not an integer", f->name);
    }
    return 0;
}

rkm_model_dir *rkm_model_dir_parse_manifest(const char *json, size_t n, const char *dir)
{
    rkm_model_dir *md = calloc(1, sizeof *md);
    if (!md) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    md->resident_fd = -1;
    md->map_guard = -1;
    if (!(md->path = strdup(dir ? dir : "."))) {
        rkm_err(RKM_ENOMEM, "out of memory");
        rkm_model_dir_close(md);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(json, n);
    if (!root) {
        rkm_err(RKM_EFORMAT, "manifest.json is not valid JSON");
        rkm_model_dir_close(md);
        return NULL;
    }
    int rc = parse_manifest(md, root, 0);
    cJSON_Delete(root);
    if (rc) {
        rkm_model_dir_close(md);
        return NULL;
    }
    return md;
}

rkm_model_dir *rkm_model_dir_load_manifest(const char *dir)
{
    char *mp = rkm_path_join(dir, "manifest.json");
    if (!mp) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    size_t n;
    char *json = rkm_read_file(mp, &n);
    if (!json) {
        if (rkm_last_error()[0] && strstr(rkm_last_error(), "No such file"))
            rkm_err(RKM_ENOENT, "%s is not a complete .rkmojo model (no manifest.json; an interrupted conversion?)", dir);
        free(mp);
        return NULL;
    }
    rkm_model_dir *md = rkm_model_dir_parse_manifest(json, n, dir);
    if (!md) rkm_err_prefix(RKM_EFORMAT, "%s", mp);
    free(json);
    free(mp);
    return md;
}

/* rel opened read-only; stamp receives the file as opened (its size too). */
static int open_rel(const rkm_model_dir *md, const char *rel, rkm_file_stamp *stamp)
{
    char *p = rkm_path_join(md->path, rel);
    if (!p) return rkm_err(RKM_ENOMEM, "out of memory");
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rkm_err(RKM_EIO, "%s: %s", p, strerror(errno));
        free(p);
        return -1;
    }
    if (rkm_stamp_fd(fd, stamp) != 0) {
        rkm_err(RKM_EIO, "%s: %s", p, strerror(errno));
        close(fd);
        free(p);
        return -1;
    }
    free(p);
    return fd;
}

rkm_model_dir *rkm_model_dir_open(const char *dir)
{
    rkm_file_stamp man;
    char *mp = rkm_path_join(dir, "manifest.json");
    int stamped = mp && rkm_stamp_path(mp, &man) == 0; /* before reading: a later change shows */
    free(mp);
    rkm_model_dir *md = rkm_model_dir_load_manifest(dir);
    if (!md) return NULL;
    if (stamped) md->manifest_stamp = man;
    int fd = open_rel(md, "resident.bin", &md->resident_stamp);
    uint64_t size = md->resident_stamp.size;
    if (fd < 0) goto fail;
    if (size != md->resident_bytes) {
        rkm_err(RKM_EFORMAT, "%s/resident.bin is %llu bytes, the manifest says %llu (truncated?)", dir,
                (unsigned long long)size, (unsigned long long)md->resident_bytes);
        close(fd);
        goto fail;
    }
    if (size > 0) {
        md->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (md->map == MAP_FAILED) {
            md->map = NULL;
            rkm_err(RKM_EIO, "mmap resident.bin: %s", strerror(errno));
            close(fd);
            goto fail;
        }
        md->map_bytes = size;
        md->map_guard = rkm_mapguard_add(md->map, size); /* a truncated file: an error, not SIGBUS */
    }
    md->resident_fd = fd; /* rows of lookup-only tables are read with pread */
    for (int i = 0; i < md->n_tensors; i++) md->tensors[i].data = (const uint8_t *)md->map + md->tensors[i].offset;
    for (int i = 0; i < md->n_expert_layers; i++) {
        rkm_expert_layer *el = &md->experts[i];
        el->fd = open_rel(md, el->file, &el->stamp);
        if (el->fd < 0) goto fail;
        uint64_t need = (uint64_t)el->n_expert * el->blob_stride;
        if (el->stamp.size < need) {
            rkm_err(RKM_EFORMAT, "%s/%s is %llu bytes, %llu expected (truncated?)", dir, el->file,
                    (unsigned long long)el->stamp.size, (unsigned long long)need);
            goto fail;
        }
    }
    return md;
fail:
    rkm_model_dir_close(md);
    return NULL;
}

void rkm_model_dir_close(rkm_model_dir *md)
{
    if (!md) return;
    rkm_mapguard_remove(md->map_guard);
    if (md->map) munmap(md->map, md->map_bytes);
    if (md->resident_fd >= 0) close(md->resident_fd);
    for (int i = 0; i < md->n_tensors; i++) free(md->tensors[i].name);
    free(md->tensors);
    rkm_name_index_free(&md->ix);
    for (int i = 0; i < md->n_expert_layers; i++) {
        free(md->experts[i].file);
        free(md->experts[i].checksums);
        if (md->experts[i].fd >= 0) close(md->experts[i].fd);
    }
    free(md->experts);
    free(md->path);
    free(md->source);
    free(md->quant);
    free(md->tokenizer_file);
    free(md->tokenizer_config_file);
    free(md->chat_template_file);
    free(md->mmproj_file);
    free(md);
}

static int stamp_differs(const rkm_model_dir *md, const char *rel, const rkm_file_stamp *was)
{
    char *p = rkm_path_join(md->path, rel);
    rkm_file_stamp now;
    int gone = !p || rkm_stamp_path(p, &now) != 0;
    int differs = gone || now.dev != was->dev || now.ino != was->ino || now.size != was->size ||
                  now.mtime_ns != was->mtime_ns;
    if (differs)
        rkm_err(RKM_EIO, "%s %s since the model was loaded", p ? p : rel,
                gone ? "is gone" : now.ino != was->ino || now.dev != was->dev ? "was replaced" : "was rewritten");
    free(p);
    return differs;
}

int rkm_model_dir_changed(const rkm_model_dir *md)
{
    if (stamp_differs(md, "manifest.json", &md->manifest_stamp)) return 1;
    if (stamp_differs(md, "resident.bin", &md->resident_stamp)) return 1;
    for (int i = 0; i < md->n_expert_layers; i++)
        if (md->experts[i].fd >= 0 && stamp_differs(md, md->experts[i].file, &md->experts[i].stamp)) return 1;
    return 0;
}

int rkm_model_dir_mapping_ok(const rkm_model_dir *md)
{
    if (!rkm_mapguard_faults(md->map_guard)) return 0;
    return rkm_err(RKM_EIO, "%s/resident.bin shrank while the model was in use (reads past its end gave zeros): "
                   "the results are wrong; load the model again", md->path);
}

const rkm_tensor_view *rkm_model_dir_tensor(const rkm_model_dir *md, const char *name)
{
    int i = rkm_name_index_find(&md->ix, name, tv_name, md);
    return i >= 0 ? &md->tensors[i] : NULL;
}

const rkm_tensor_view *rkm_model_dir_role(const rkm_model_dir *md, int role, int il)
{
    char nm[128];
    return rkm_arch_tensor_name(md->hp.arch, role, il, nm, sizeof nm) ? rkm_model_dir_tensor(md, nm) : NULL;
}

uint64_t rkm_model_dir_lookup_embd_bytes(const rkm_model_dir *md)
{
    const rkm_tensor_view *te = rkm_model_dir_role(md, RKM_TENSOR_TOKEN_EMBD, -1);
    if (!te || md->hp.tied_output || !rkm_model_dir_role(md, RKM_TENSOR_OUTPUT, -1)) return 0;
    return te->nbytes;
}

int rkm_model_dir_pread(const rkm_model_dir *md, uint64_t off, void *dst, size_t n)
{
    if (md->resident_fd < 0) return rkm_err(RKM_EINVAL, "%s/resident.bin is not open", md->path);
    if (off > md->resident_bytes || n > md->resident_bytes - off)
        return rkm_err(RKM_EIO, "%s/resident.bin: %zu bytes at %llu run past its %llu bytes", md->path, n,
                       (unsigned long long)off, (unsigned long long)md->resident_bytes);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(md->resident_fd, (uint8_t *)dst + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return rkm_err(RKM_EIO, "%s/resident.bin: read of %zu bytes at %llu: %s", md->path, n,
                           (unsigned long long)off, strerror(errno));
        if (r == 0)
            return rkm_err(RKM_EIO, "%s/resident.bin: short read at %llu (the file ends early: truncated?)",
                           md->path, (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return 0;
}

const rkm_expert_layer *rkm_model_dir_expert_layer(const rkm_model_dir *md, int il)
{
    for (int i = 0; i < md->n_expert_layers; i++)
        if (md->experts[i].layer == il) return &md->experts[i];
    return NULL;
}

int rkm_model_dir_read_expert(const rkm_model_dir *md, int il, int e, void *buf, int verify)
{
    const rkm_expert_layer *el = rkm_model_dir_expert_layer(md, il);
    if (!el) return rkm_err(RKM_EINVAL, "layer %d has no experts", il);
    if (e < 0 || e >= el->n_expert) return rkm_err(RKM_EINVAL, "expert %d out of range", e);
    if (el->fd < 0) return rkm_err(RKM_EINVAL, "expert files are not open");
    int rc = rkm_pread_all(el->fd, buf, (size_t)el->blob_bytes, (uint64_t)e * el->blob_stride, el->file);
    if (rc) return rkm_err_prefix(rc, "expert %d of layer %d", e, il);
    if (verify && rkm_hash(buf, (size_t)el->blob_bytes) != el->checksums[e])
        return rkm_err(RKM_ECHECKSUM, "checksum mismatch in expert %d of layer %d (%s)", e, il, el->file);
    return 0;
}

int rkm_model_dir_verify_resident(const rkm_model_dir *md, atomic_int *stop)
{
    size_t piece = (size_t)8 << 20;
    uint8_t *buf = malloc(piece);
    if (!buf) return rkm_err(RKM_ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; !rc && i < md->n_tensors; i++) {
        const rkm_tensor_view *t = &md->tensors[i];
        rkm_hasher *h = rkm_hasher_new();
        if (!h) {
            rc = rkm_err(RKM_ENOMEM, "out of memory");
            break;
        }
        for (uint64_t o = 0; !rc && o < t->nbytes; o += piece) {
            size_t n = (size_t)RKM_MIN((uint64_t)piece, t->nbytes - o);
            if (stop && atomic_load(stop)) rc = 1;
            else if (!(rc = rkm_model_dir_pread(md, t->offset + o, buf, n))) rkm_hasher_update(h, buf, n);
        }
        if (!rc && rkm_hasher_digest(h) != t->checksum)
            rc = rkm_err(RKM_ECHECKSUM, "%s/resident.bin: tensor '%s' does not match its checksum (the file is "
                         "damaged: convert the model again)", md->path, t->name);
        rkm_hasher_free(h);
    }
    free(buf);
    return rc;
}

int rkm_model_dir_verify(const rkm_model_dir *md)
{
    int rc = rkm_model_dir_verify_resident(md, NULL);
    if (rc) return rc;
    uint64_t maxb = 0;
    for (int i = 0; i < md->n_expert_layers; i++) maxb = RKM_MAX(maxb, md->experts[i].blob_stride);
    void *buf = rkm_alloc_aligned((size_t)RKM_MAX(maxb, 1), RKM_EXPERT_ALIGN);
    if (!buf) return rkm_err(RKM_ENOMEM, "out of memory");
    for (int i = 0; i < md->n_expert_layers && !rc; i++)
        for (int e = 0; e < md->experts[i].n_expert && !rc; e++)
            rc = rkm_model_dir_read_expert(md, md->experts[i].layer, e, buf, 1);
    rkm_free_aligned(buf);
    if (!rc && md->mmproj_file) {
        char *p = rkm_path_join(md->path, md->mmproj_file);
        uint64_t n = 0, h = 0;
        rc = p ? rkm_hash_file(p, &n, &h) : rkm_err(RKM_ENOMEM, "out of memory");
        if (!rc && (n != md->mmproj_bytes || h != md->mmproj_checksum))
            rc = rkm_err(RKM_ECHECKSUM, "%s: %llu bytes with checksum %016llx, the manifest says %llu and %016llx",
                         md->mmproj_file, (unsigned long long)n, (unsigned long long)h,
                         (unsigned long long)md->mmproj_bytes, (unsigned long long)md->mmproj_checksum);
        free(p);
    }
    return rc;
}

/* ------------------------------------------------------------- write */

static cJSON *shape_json(int n_dims, const int64_t *ne)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < n_dims; d++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ne[d]));
    return a;
}

static cJSON *manifest_json(const rkm_model_dir *md)
{
    char h[17];
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "rkmojo");
    cJSON_AddNumberToObject(root, "version", RKM_FORMAT_VERSION);
    cJSON_AddStringToObject(root, "created_by", "rkmojo " RKM_VERSION_STRING);
    if (md->source) cJSON_AddStringToObject(root, "source", md->source);
    if (md->quant) cJSON_AddStringToObject(root, "quant", md->quant);
    cJSON_AddItemToObject(root, "hparams", hparams_to_json(&md->hp));
    cJSON *res = cJSON_AddObjectToObject(root, "resident");
    cJSON_AddStringToObject(res, "file", "resident.bin");
    cJSON_AddNumberToObject(res, "bytes", (double)md->resident_bytes);
    cJSON_AddNumberToObject(res, "alignment", RKM_RESIDENT_ALIGN);
    cJSON *tens = cJSON_AddArrayToObject(res, "tensors");
    for (int i = 0; i < md->n_tensors; i++) {
        const rkm_tensor_view *t = &md->tensors[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", rkm_type_name(t->type));
        cJSON_AddItemToObject(o, "shape", shape_json(t->n_dims, t->ne));
        cJSON_AddNumberToObject(o, "offset", (double)t->offset);
        cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
        hash_str(t->checksum, h);
        cJSON_AddStringToObject(o, "xxh3", h);
        cJSON_AddItemToArray(tens, o);
    }
    cJSON *ex = cJSON_AddObjectToObject(root, "experts");
    cJSON_AddNumberToObject(ex, "alignment", RKM_EXPERT_ALIGN);
    cJSON *layers = cJSON_AddArrayToObject(ex, "layers");
    for (int i = 0; i < md->n_expert_layers; i++) {
        const rkm_expert_layer *el = &md->experts[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layer", el->layer);
        cJSON_AddStringToObject(o, "file", el->file);
        cJSON_AddNumberToObject(o, "count", el->n_expert);
        cJSON_AddNumberToObject(o, "blob_stride", (double)el->blob_stride);
        cJSON_AddNumberToObject(o, "blob_bytes", (double)el->blob_bytes);
        cJSON *parts = cJSON_AddObjectToObject(o, "parts");
        for (int p = 0; p < RKM_PART_COUNT; p++) {
            const rkm_expert_part *ep = &el->part[p];
            cJSON *po = cJSON_AddObjectToObject(parts, part_names[p]);
            cJSON_AddStringToObject(po, "dtype", rkm_type_name(ep->type));
            cJSON_AddItemToObject(po, "shape", shape_json(2, ep->ne));
            cJSON_AddNumberToObject(po, "offset", (double)ep->offset);
            cJSON_AddNumberToObject(po, "bytes", (double)ep->nbytes);
        }
        cJSON *hs = cJSON_AddArrayToObject(o, "xxh3");
        for (int e = 0; e < el->n_expert; e++) {
            hash_str(el->checksums[e], h);
            cJSON_AddItemToArray(hs, cJSON_CreateString(h));
        }
        cJSON_AddItemToArray(layers, o);
    }
    if (md->tokenizer_file) {
        cJSON *tok = cJSON_AddObjectToObject(root, "tokenizer");
        cJSON_AddStringToObject(tok, "file", md->tokenizer_file);
        if (md->tokenizer_config_file) cJSON_AddStringToObject(tok, "config", md->tokenizer_config_file);
    }
    if (md->chat_template_file) cJSON_AddStringToObject(root, "chat_template", md->chat_template_file);
    if (md->mmproj_file) {
        cJSON *mp = cJSON_AddObjectToObject(root, "mmproj");
        cJSON_AddStringToObject(mp, "file", md->mmproj_file);
        cJSON_AddNumberToObject(mp, "bytes", (double)md->mmproj_bytes);
        hash_str(md->mmproj_checksum, h);
        cJSON_AddStringToObject(mp, "xxh3", h);
    }
    if (md->sampling.set) {
        cJSON *sm = cJSON_AddObjectToObject(root, "sampling");
        for (const sampling_field *f = sampling_fields; f->name; f++) {
            if (!(md->sampling.set & f->bit)) continue;
            double v = f->is_int ? (double)*(const int *)((const char *)&md->sampling + f->off)
                                 : (double)*(const float *)((const char *)&md->sampling + f->off);
            char b[32]; /* a float's shortest text, so 0.95 is written 0.95 and reads back the same float */
            snprintf(b, sizeof b, "%.9g", v);
            for (int prec = 1; prec <= 9; prec++) {
                snprintf(b, sizeof b, "%.*g", prec, v);
                if ((float)strtod(b, NULL) == (float)v) break;
            }
            cJSON_AddNumberToObject(sm, f->name, f->is_int ? v : strtod(b, NULL));
        }
    }
    return root;
}

static int write_json(cJSON *root, const char *dir, const char *name)
{
    char *json = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!json) return rkm_err(RKM_ENOMEM, "out of memory");
    char *path = rkm_path_join(dir, name);
    int rc = path ? rkm_write_file_atomic(path, json, strlen(json)) : rkm_err(RKM_ENOMEM, "out of memory");
    free(path);
    free(json);
    return rc;
}

int rkm_model_dir_write_manifest(const rkm_model_dir *md, const char *dir)
{
    return write_json(manifest_json(md), dir, "manifest.json");
}

/* ----------------------------------------------- conversion progress */

#define PROGRESS_FILE ".convert-progress.json"

int rkm_model_dir_write_progress(const rkm_model_dir *md, const char *dir, const char *key, const char *note)
{
    cJSON *root = manifest_json(md);
    if (root) cJSON_AddStringToObject(root, "resume_key", key);
    if (root && note) cJSON_AddStringToObject(root, "resume_note", note);
    return write_json(root, dir, PROGRESS_FILE);
}

rkm_model_dir *rkm_model_dir_load_progress(const char *dir, const char *key, int *other, char **note)
{
    *other = 0;
    if (note) *note = NULL;
    char *p = rkm_path_join(dir, PROGRESS_FILE);
    size_t n;
    char *json = p ? rkm_read_file(p, &n) : NULL;
    free(p);
    if (!json) return NULL;
    cJSON *root = cJSON_ParseWithLength(json, n);
    free(json);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(root, "resume_key");
    rkm_model_dir *md = NULL;
    if (!cJSON_IsString(k) || strcmp(k->valuestring, key)) {
        *other = 1;
    } else if ((md = calloc(1, sizeof *md))) {
        md->resident_fd = md->map_guard = -1;
        if (!(md->path = strdup(dir)) || parse_manifest(md, root, 1)) {
            rkm_model_dir_close(md);
            md = NULL;
            *other = 1; /* unreadable: started again */
        } else if (note) {
            const cJSON *nt = cJSON_GetObjectItemCaseSensitive(root, "resume_note");
            if (cJSON_IsString(nt)) *note = strdup(nt->valuestring);
        }
    }
    cJSON_Delete(root);
    return md;
}

int rkm_model_dir_verified_prefix(rkm_model_dir *md)
{
    int fd = open_rel(md, "resident.bin", &md->resident_stamp);
    if (fd < 0) return 0;
    md->resident_fd = fd;
    if (md->n_tensors == 0 || md->resident_stamp.size != md->resident_bytes || rkm_model_dir_verify_resident(md, NULL))
        return 0;
    uint64_t maxb = 0;
    for (int i = 0; i < md->n_expert_layers; i++) maxb = RKM_MAX(maxb, md->experts[i].blob_stride);
    void *buf = rkm_alloc_aligned((size_t)RKM_MAX(maxb, 1), RKM_EXPERT_ALIGN);
    int n = 1;
    for (int i = 0; buf && i < md->n_expert_layers; i++, n++) {
        rkm_expert_layer *el = &md->experts[i];
        if ((el->fd = open_rel(md, el->file, &el->stamp)) < 0 || el->stamp.size < (uint64_t)el->n_expert * el->blob_stride)
            break;
        int rc = 0;
        for (int e = 0; e < el->n_expert && !rc; e++) rc = rkm_model_dir_read_expert(md, el->layer, e, buf, 1);
        if (rc) break;
    }
    rkm_free_aligned(buf);
    return buf ? n : 1;
}

/* NAME.tmpPID.N: what rkm_write_file_atomic leaves when it is killed
 * between creating its temporary and the rename. */
static int atomic_leftover(const char *name)
{
    const char *t = strstr(name, ".tmp");
    if (!t || t == name) return 0;
    const char *p = t + 4;
    size_t pid = strspn(p, "0123456789");
    if (!pid || p[pid] != '.') return 0;
    p += pid + 1;
    size_t cnt = strspn(p, "0123456789");
    return cnt && !p[cnt];
}

void rkm_model_dir_remove_progress(const char *dir)
{
    char *p = rkm_path_join(dir, PROGRESS_FILE);
    if (p) unlink(p);
    free(p);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!atomic_leftover(e->d_name)) continue;
        char *q = rkm_path_join(dir, e->d_name);
        if (q) unlink(q);
        free(q);
    }
    closedir(d);
}
