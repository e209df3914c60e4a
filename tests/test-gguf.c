/*
 * test-gguf.c - the GGUF reader and writer on files this test writes: every
 * key type and array type round trips, tensor infos and data land at
 * aligned offsets and read back (also in pieces and at the bounds),
 * general.alignment is honoured, the file and the memory reader agree,
 * and broken headers (bad magic, unsupported version, duplicate keys,
 * every truncation, lengths past the end) are refused with a message,
 * never a crash. Every tensor type rkmojo reads opens; unknown types and
 * rows that are not a multiple of the type's block are refused with a
 * message naming the tensor and the type. Tensors sharing bytes are
 * refused, and 100k-entry files open at once (linear name checks); the
 * same for the safetensors reader, with its duplicate names.
 */
#include <stdint.h>

#include "common/test.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "kernels/quant.h"
#include "util/common.h"

static char path_buf[1024];

static const char *tmp_path(const char *name)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", test_tmpdir(), name);
    return path_buf;
}

/* Writes a file with one key of each type and three tensors; returns the
 * path. f32 tensor a (3 x 2), q8_0 tensor b (64 x 1), f32 tensor c (5). */
static const char *write_sample(uint32_t alignment)
{
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    CHECK(w != NULL);
    if (alignment) rkm_gguf_writer_set_u32(w, "general.alignment", alignment);
    rkm_gguf_writer_set_str(w, "general.architecture", "llama");
    rkm_gguf_writer_set_u32(w, "llama.block_count", 7);
    rkm_gguf_writer_set_i32(w, "test.negative", -12345);
    rkm_gguf_writer_set_f32(w, "test.eps", 1e-6f);
    rkm_gguf_writer_set_bool(w, "test.flag", 1);
    int32_t ints[5] = {1, -2, 3, -4, 5};
    rkm_gguf_writer_set_arr(w, "test.ints", RKM_GGUF_INT32, ints, 5);
    float fl[3] = {0.5f, -1.25f, 3e8f};
    rkm_gguf_writer_set_arr(w, "test.floats", RKM_GGUF_FLOAT32, fl, 3);
    const char *strs[3] = {"hello", "", "w\xc3\xb6rld"};
    rkm_gguf_writer_set_arr_str(w, "test.strs", strs, NULL, 3);
    const char *bin[1] = {"a\0b"};
    size_t bin_len[1] = {3};
    rkm_gguf_writer_set_arr_str(w, "test.nul", bin, bin_len, 1);
    int64_t ne_a[2] = {3, 2}, ne_b[2] = {64, 1}, ne_c[1] = {5};
    CHECK_EQ_INT(rkm_gguf_writer_add_tensor(w, "a", RKM_TYPE_F32, 2, ne_a), 0);
    CHECK_EQ_INT(rkm_gguf_writer_add_tensor(w, "b", RKM_TYPE_Q8_0, 2, ne_b), 0);
    CHECK_EQ_INT(rkm_gguf_writer_add_tensor(w, "c", RKM_TYPE_F32, 1, ne_c), 0);
    const char *p = tmp_path(alignment ? "aligned.gguf" : "sample.gguf");
    CHECK_EQ_INT(rkm_gguf_writer_begin(w, p), 0);
    float a[6] = {1, 2, 3, 4, 5, 6};
    CHECK_EQ_INT(rkm_gguf_writer_write_data(w, a, sizeof a), 0);
    uint8_t b[68];
    for (int i = 0; i < 68; i++) b[i] = (uint8_t)(i * 7 + 1);
    CHECK_EQ_INT(rkm_gguf_writer_write_data(w, b, 30), 0); /* in pieces */
    CHECK_EQ_INT(rkm_gguf_writer_write_data(w, b + 30, 38), 0);
    float c[5] = {-1, -2, -3, -4, -5};
    CHECK_EQ_INT(rkm_gguf_writer_write_data(w, c, sizeof c), 0);
    CHECK_EQ_INT(rkm_gguf_writer_finish(w), 0);
    rkm_gguf_writer_free(w);
    return p;
}

static void check_sample(const rkm_gguf *g, uint64_t alignment)
{
    CHECK_EQ_INT(rkm_gguf_version(g), 3);
    CHECK_EQ_INT(rkm_gguf_alignment(g), alignment);
    CHECK(rkm_gguf_get_str(g, "general.architecture") && !strcmp(rkm_gguf_get_str(g, "general.architecture"), "llama"));
    int64_t v = 0;
    CHECK(rkm_gguf_get_int(g, "llama.block_count", &v) == 0 && v == 7);
    CHECK(rkm_gguf_get_int(g, "test.negative", &v) == 0 && v == -12345);
    double d = 0;
    CHECK(rkm_gguf_get_float(g, "test.eps", &d) == 0 && (float)d == 1e-6f);
    CHECK(rkm_gguf_get_float(g, "llama.block_count", &d) == 0 && d == 7.0); /* ints read as floats */
    int bl = 0;
    CHECK(rkm_gguf_get_bool(g, "test.flag", &bl) == 0 && bl == 1);
    CHECK_EQ_INT(rkm_gguf_get_int(g, "no.such.key", &v), RKM_ENOENT);
    CHECK_EQ_INT(rkm_gguf_get_int(g, "general.architecture", &v), RKM_EFORMAT);
    CHECK(rkm_gguf_find(g, "no.such.key") == -1);
    int i = rkm_gguf_find(g, "test.ints");
    CHECK(i >= 0 && rkm_gguf_vtype(g, i) == RKM_GGUF_ARRAY && rkm_gguf_arr_type(g, i) == RKM_GGUF_INT32 &&
          rkm_gguf_arr_n(g, i) == 5);
    CHECK(rkm_gguf_arr_int(g, i, 1) == -2 && rkm_gguf_arr_int(g, i, 4) == 5);
    i = rkm_gguf_find(g, "test.floats");
    CHECK(i >= 0 && rkm_gguf_arr_float(g, i, 1) == -1.25 && rkm_gguf_arr_float(g, i, 2) == 3e8);
    i = rkm_gguf_find(g, "test.strs");
    size_t len = 99;
    CHECK(i >= 0 && rkm_gguf_arr_type(g, i) == RKM_GGUF_STRING && rkm_gguf_arr_n(g, i) == 3);
    CHECK(!strcmp(rkm_gguf_arr_str(g, i, 0, &len), "hello") && len == 5);
    CHECK(!strcmp(rkm_gguf_arr_str(g, i, 1, &len), "") && len == 0);
    CHECK(!strcmp(rkm_gguf_arr_str(g, i, 2, &len), "w\xc3\xb6rld") && len == 6);
    CHECK(rkm_gguf_arr_data(g, i) == NULL);
    i = rkm_gguf_find(g, "test.nul");
    const char *s = rkm_gguf_arr_str(g, i, 0, &len);
    CHECK(s && len == 3 && !memcmp(s, "a\0b", 3));
    CHECK_EQ_INT(rkm_gguf_n_tensors(g), 3);
    const rkm_gguf_tensor *ta = rkm_gguf_tensor_find(g, "a"), *tb = rkm_gguf_tensor_find(g, "b"),
                          *tc = rkm_gguf_tensor_find(g, "c");
    CHECK(ta && tb && tc && !rkm_gguf_tensor_find(g, "d"));
    if (!ta || !tb || !tc) return;
    CHECK(ta->n_dims == 2 && ta->ne[0] == 3 && ta->ne[1] == 2 && ta->ne[2] == 1 && ta->nbytes == 24);
    CHECK(tb->type == RKM_TYPE_Q8_0 && tb->nbytes == rkm_type_row_bytes(RKM_TYPE_Q8_0, 64) && tb->nbytes == 68);
    CHECK(tc->n_dims == 1 && tc->nbytes == 20);
    uint64_t base = ta->offset;
    CHECK(base % alignment == 0 && (tb->offset - base) % alignment == 0 && (tc->offset - base) % alignment == 0);
    CHECK(ta->offset + ta->nbytes <= tb->offset && tb->offset + tb->nbytes <= tc->offset);
    CHECK(tc->offset + tc->nbytes <= rkm_gguf_file_size(g));
    float a[6] = {0};
    CHECK(rkm_gguf_read(g, ta, 0, a, sizeof a) == 0 && a[0] == 1 && a[5] == 6);
    uint8_t b[68];
    CHECK(rkm_gguf_read(g, tb, 0, b, 68) == 0);
    int ok = 1;
    for (int k = 0; k < 68; k++) ok &= b[k] == (uint8_t)(k * 7 + 1);
    CHECK(ok);
    uint8_t piece[3];
    CHECK(rkm_gguf_read(g, tb, 65, piece, 3) == 0 && piece[2] == (uint8_t)(67 * 7 + 1));
    CHECK(rkm_gguf_read(g, tb, 66, piece, 3) != 0); /* past the tensor's end */
    CHECK(rkm_gguf_read(g, tb, UINT64_MAX - 1, piece, 3) != 0);
    float c[5];
    CHECK(rkm_gguf_read(g, tc, 0, c, sizeof c) == 0 && c[4] == -5);
}

static uint8_t *slurp(const char *p, size_t *n)
{
    char *d = rkm_read_file(p, n);
    CHECK(d != NULL);
    return (uint8_t *)d;
}

static void test_round_trip(void)
{
    const char *p = write_sample(0);
    rkm_gguf *g = rkm_gguf_open(p);
    CHECK_MSG(g != NULL, "%s", rkm_last_error());
    if (g) check_sample(g, 32);
    rkm_gguf_close(g);
    size_t n;
    uint8_t *data = slurp(p, &n);
    g = rkm_gguf_open_mem(data, n);
    CHECK(g != NULL);
    if (g) check_sample(g, 32);
    /* copying every key to a new file reproduces them */
    if (g) {
        rkm_gguf_writer *w = rkm_gguf_writer_new();
        for (int i = 0; i < rkm_gguf_n_kv(g); i++) rkm_gguf_writer_copy_kv(w, g, i);
        const char *q = tmp_path("copy.gguf");
        CHECK(rkm_gguf_writer_begin(w, q) == 0 && rkm_gguf_writer_finish(w) == 0);
        rkm_gguf_writer_free(w);
        rkm_gguf *h = rkm_gguf_open(q);
        CHECK(h && rkm_gguf_n_kv(h) == rkm_gguf_n_kv(g) && rkm_gguf_n_tensors(h) == 0);
        for (int i = 0; h && i < rkm_gguf_n_kv(g); i++) {
            int j = rkm_gguf_find(h, rkm_gguf_key(g, i));
            CHECK(j >= 0 && rkm_gguf_vtype(h, j) == rkm_gguf_vtype(g, i));
        }
        rkm_gguf_close(h);
    }
    rkm_gguf_close(g);
    free(data);
    /* the writer is deterministic */
    size_t n2;
    p = write_sample(0);
    uint8_t *again = slurp(p, &n2);
    data = slurp(tmp_path("sample.gguf"), &n);
    CHECK(n == n2 && !memcmp(data, again, n));
    free(again);
    free(data);
}

static void test_alignment(void)
{
    rkm_gguf *g = rkm_gguf_open(write_sample(64));
    CHECK_MSG(g != NULL, "%s", rkm_last_error());
    if (g) check_sample(g, 64);
    rkm_gguf_close(g);
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static void test_broken(void)
{
    size_t n;
    uint8_t *data = slurp(write_sample(0), &n);
    /* every truncation inside the header and the data is refused */
    const rkm_gguf_tensor *tc;
    rkm_gguf *g = rkm_gguf_open_mem(data, n);
    uint64_t data_end = g && (tc = rkm_gguf_tensor_find(g, "c")) ? tc->offset + tc->nbytes : n;
    rkm_gguf_close(g);
    int refused = 0, cuts = 0;
    for (size_t cut = 0; cut < data_end; cut++) {
        g = rkm_gguf_open_mem(data, cut);
        cuts++;
        if (!g) {
            refused++;
            CHECK(rkm_last_error()[0] != 0);
        }
        rkm_gguf_close(g);
    }
    CHECK_EQ_INT(refused, cuts);
    uint8_t *b = malloc(n);
    memcpy(b, data, n);
    b[0] = 'X';
    CHECK(rkm_gguf_open_mem(b, n) == NULL && strstr(rkm_last_error(), "magic"));
    memcpy(b, data, n);
    put_u32(b + 4, 4);
    CHECK(rkm_gguf_open_mem(b, n) == NULL && strstr(rkm_last_error(), "version 4"));
    memcpy(b, data, n);
    uint64_t huge = UINT64_MAX / 2;
    memcpy(b + 16, &huge, 8); /* n_kv */
    CHECK(rkm_gguf_open_mem(b, n) == NULL);
    memcpy(b, data, n);
    memcpy(b + 8, &huge, 8); /* n_tensors */
    CHECK(rkm_gguf_open_mem(b, n) == NULL);
    /* the first key's string length past the end */
    memcpy(b, data, n);
    memcpy(b + 24, &huge, 8);
    CHECK(rkm_gguf_open_mem(b, n) == NULL);
    free(b);
    free(data);
    /* duplicate keys and tensors */
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    rkm_gguf_writer_set_u32(w, "k", 1);
    rkm_gguf_writer_set_u32(w, "k", 2);
    const char *p = tmp_path("dup.gguf");
    int wrote = rkm_gguf_writer_begin(w, p) == 0 && rkm_gguf_writer_finish(w) == 0;
    rkm_gguf_writer_free(w);
    if (wrote) {
        g = rkm_gguf_open(p);
        if (g) CHECK(rkm_gguf_n_kv(g) == 1); /* the writer replaced the key */
        else CHECK(strstr(rkm_last_error(), "duplicate"));
        rkm_gguf_close(g);
    }
    /* an alignment that is not a power of two is refused by the writer */
    w = rkm_gguf_writer_new();
    rkm_gguf_writer_set_u32(w, "general.alignment", 48);
    CHECK(rkm_gguf_writer_begin(w, tmp_path("bad-align.gguf")) == RKM_EINVAL && strstr(rkm_last_error(), "48"));
    rkm_gguf_writer_free(w);
    CHECK(rkm_gguf_open(tmp_path("missing.gguf")) == NULL && rkm_last_error()[0]);
}

/* A file with one f32 tensor "blk.0.t" of 256 x 2 (more data than any
 * block type needs for as many values), whose type and ne[0] the caller
 * patches; returns its bytes and sets *info to the tensor's n_dims field. */
static uint8_t *typed_sample(size_t *n, size_t *info)
{
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    rkm_gguf_writer_set_str(w, "general.architecture", "llama");
    int64_t ne[2] = {256, 2};
    CHECK_EQ_INT(rkm_gguf_writer_add_tensor(w, "blk.0.t", RKM_TYPE_F32, 2, ne), 0);
    const char *p = tmp_path("typed.gguf");
    CHECK_EQ_INT(rkm_gguf_writer_begin(w, p), 0);
    static float x[512];
    CHECK_EQ_INT(rkm_gguf_writer_write_data(w, x, sizeof x), 0);
    CHECK_EQ_INT(rkm_gguf_writer_finish(w), 0);
    rkm_gguf_writer_free(w);
    uint8_t *data = slurp(p, n);
    *info = 0;
    for (size_t i = 0; data && i + 8 < *n; i++)
        if (!memcmp(data + i, "blk.0.t", 7)) {
            *info = i + 7;
            break;
        }
    CHECK(*info != 0);
    return data;
}

/* Every type rkmojo reads opens in the reader; an unknown type and a row
 * that is not a multiple of its type's block are refused with a message
 * naming the tensor and the type. */
static void test_types(void)
{
    size_t n, info;
    uint8_t *data = typed_sample(&n, &info);
    if (!data || !info) return;
    uint8_t *b = malloc(n);
    int n_read = 0;
    for (int t = 0; t < RKM_TYPE_COUNT; t++) {
        if (!rkm_type_readable(t)) continue;
        memcpy(b, data, n);
        put_u32(b + info + 4 + 16, (uint32_t)t);
        rkm_gguf *g = rkm_gguf_open_mem(b, n);
        CHECK_MSG(g != NULL, "%s: %s", rkm_type_name(t), rkm_last_error());
        const rkm_gguf_tensor *gt = g ? rkm_gguf_tensor_find(g, "blk.0.t") : NULL;
        CHECK(gt && gt->type == t && gt->nbytes == 2 * rkm_type_row_bytes(t, 256));
        n_read += gt != NULL;
        rkm_gguf_close(g);
    }
    CHECK(n_read >= 25);
    static const uint32_t unknown[] = {4, 5, 31, 36, 40, 77, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        memcpy(b, data, n);
        put_u32(b + info + 4 + 16, unknown[i]);
        char want[32];
        snprintf(want, sizeof want, "type %u", unknown[i]);
        CHECK(rkm_gguf_open_mem(b, n) == NULL);
        CHECK_MSG(strstr(rkm_last_error(), "blk.0.t") && strstr(rkm_last_error(), want), "%s", rkm_last_error());
    }
    /* rows of 100 values in 256-value and 32-value blocks */
    const int blocked[] = {RKM_TYPE_Q4_K, RKM_TYPE_IQ2_XXS, RKM_TYPE_MXFP4, RKM_TYPE_Q8_0};
    for (size_t i = 0; i < sizeof blocked / sizeof *blocked; i++) {
        memcpy(b, data, n);
        uint64_t ne0 = 100;
        memcpy(b + info + 4, &ne0, 8);
        put_u32(b + info + 4 + 16, (uint32_t)blocked[i]);
        CHECK(rkm_gguf_open_mem(b, n) == NULL);
        CHECK_MSG(strstr(rkm_last_error(), "blk.0.t") && strstr(rkm_last_error(), "multiple") &&
                      strstr(rkm_last_error(), rkm_type_name(blocked[i])),
                  "%s", rkm_last_error());
    }
    free(b);
    free(data);
}

/* A GGUF by hand: n f32 tensors of 16 values (64 bytes) named t<i>,
 * tensor i at offsets[i] (multiples of the alignment, 32). */
static uint8_t *hand_gguf(int n, const uint64_t *offsets, size_t *len)
{
    size_t cap = 64 + (size_t)n * 64, k = 0;
    uint64_t end = 0;
    for (int i = 0; i < n; i++) end = offsets[i] + 64 > end ? offsets[i] + 64 : end;
    uint8_t *b = calloc(1, cap + end + 32);
    memcpy(b, "GGUF", 4), k = 4;
    put_u32(b + k, 3), k += 4;
    uint64_t nt = (uint64_t)n, nkv = 0;
    memcpy(b + k, &nt, 8), k += 8;
    memcpy(b + k, &nkv, 8), k += 8;
    for (int i = 0; i < n; i++) {
        char name[32];
        uint64_t l = (uint64_t)snprintf(name, sizeof name, "t%d", i), ne = 16;
        memcpy(b + k, &l, 8), k += 8;
        memcpy(b + k, name, l), k += l;
        put_u32(b + k, 1), k += 4;
        memcpy(b + k, &ne, 8), k += 8;
        put_u32(b + k, 0), k += 4; /* f32 */
        memcpy(b + k, &offsets[i], 8), k += 8;
    }
    k = (k + 31) / 32 * 32;
    *len = k + end;
    return b;
}

/* Tensors that share bytes are refused; a file with 100k entries opens
 * (the name checks and lookups are linear: a quadratic check would take
 * minutes here) and its last tensor is found by name. */
static void test_layout(void)
{
    size_t n;
    uint64_t ok[2] = {0, 64}, overlap[2] = {0, 32}, same[3] = {128, 0, 128};
    uint8_t *b = hand_gguf(2, ok, &n);
    rkm_gguf *g = rkm_gguf_open_mem(b, n);
    CHECK_MSG(g != NULL, "%s", rkm_last_error());
    rkm_gguf_close(g);
    free(b);
    b = hand_gguf(2, overlap, &n);
    CHECK(rkm_gguf_open_mem(b, n) == NULL && strstr(rkm_last_error(), "overlap"));
    free(b);
    b = hand_gguf(3, same, &n);
    CHECK(rkm_gguf_open_mem(b, n) == NULL && strstr(rkm_last_error(), "'t0' and 't2' overlap"));
    free(b);
    const int big = 100000;
    uint64_t *offs = malloc(sizeof *offs * (size_t)big);
    for (int i = 0; i < big; i++) offs[i] = (uint64_t)(big - 1 - i) * 64; /* written in reverse */
    b = hand_gguf(big, offs, &n);
    g = rkm_gguf_open_mem(b, n);
    CHECK_MSG(g != NULL, "%s", rkm_last_error());
    const rkm_gguf_tensor *t = g ? rkm_gguf_tensor_find(g, "t99999") : NULL;
    CHECK(t != NULL && t->ne[0] == 16);
    CHECK(g && rkm_gguf_tensor_find(g, "t100000") == NULL);
    rkm_gguf_close(g);
    free(b);
    free(offs);
}

/* A safetensors file by hand: header JSON (its tensors written by the
 * caller), then 8 * n_data zero bytes. */
static uint8_t *hand_st(const char *json, size_t n_data, size_t *len)
{
    size_t hn = strlen(json);
    uint8_t *b = calloc(1, 8 + hn + n_data);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hn >> (8 * i));
    memcpy(b + 8, json, hn);
    *len = 8 + hn + n_data;
    return b;
}

/* safetensors: duplicate names and shared bytes refused; 100k entries
 * open at once and are found by name */
static void test_safetensors(void)
{
    size_t n;
    uint8_t *b = hand_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, &n);
    rkm_safetensors *st = rkm_safetensors_open_mem(b, n);
    CHECK_MSG(st && rkm_safetensors_find(st, "b") && rkm_safetensors_find(st, "b")->nbytes == 8, "%s", rkm_last_error());
    rkm_safetensors_close(st);
    free(b);
    b = hand_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, &n);
    CHECK(rkm_safetensors_open_mem(b, n) == NULL && strstr(rkm_last_error(), "duplicate tensor 'a'"));
    free(b);
    b = hand_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 16, &n);
    CHECK(rkm_safetensors_open_mem(b, n) == NULL && strstr(rkm_last_error(), "overlap"));
    free(b);
    const int big = 100000;
    char *json = malloc((size_t)big * 80 + 16), *p = json;
    *p++ = '{';
    for (int i = 0; i < big; i++)
        p += sprintf(p, "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%d,%d]}", i ? "," : "", i, 8 * i,
                     8 * i + 8);
    *p++ = '}';
    *p = 0;
    b = hand_st(json, (size_t)big * 8, &n);
    st = rkm_safetensors_open_mem(b, n);
    CHECK_MSG(st && rkm_safetensors_n_tensors(st) == big && rkm_safetensors_find(st, "t99999"), "%s", rkm_last_error());
    rkm_safetensors_close(st);
    free(b);
    free(json);
}

int main(void)
{
    test_round_trip();
    test_safetensors();
    test_layout();
    test_alignment();
    test_broken();
    test_types();
    return test_done();
}
