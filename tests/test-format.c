/*
 * test-format.c - the data side: GGUF reader/writer, hparams from GGUF,
 * the converter (keep / q8_0 / q4_0), expert blob layout, checksums and
 * --verify, and clean errors on truncated or corrupt input.
 */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/test.h"
#include "convert/convert.h"
#include "format/arch.h"
#include "format/gguf.h"
#include "format/model_dir.h"
#include "format/safetensors.h"
#include "format/source.h"
#include "format/vision.h"
#include "convert/synth.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "util/common.h"

static const char *fixtures[] = {"qwen3moe-f32", "qwen3moe-q8_0", "qwen2moe-f32", "olmoe-f32", "mixtral-f32",
                                 "gemma4-f32",   "gemma4-q8_0",   "llama-f32",    "qwen3-f32"};

static char *fixture_path(const char *shared, const char *name)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/fixtures/%s.gguf", shared, name);
    return buf;
}

/* Reads a whole tensor of a GGUF. */
static uint8_t *read_tensor(const rkm_gguf *g, const rkm_gguf_tensor *t)
{
    uint8_t *b = malloc(t->nbytes);
    if (b && rkm_gguf_read(g, t, 0, b, t->nbytes) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

#if defined(__x86_64__)
uint64_t rkm_hash_avx2(const void *p, size_t n);
uint64_t rkm_hash_avx512(const void *p, size_t n);
#endif

/* The blob checksum: every vector width the CPU runs gives the streaming
 * hasher's value (fed in uneven pieces) at odd sizes and offsets, and
 * XXH3-64 of nothing is its published value. */
static void test_hash(void)
{
    static const size_t sizes[] = {0,   1,   3,   7,   15,  16,   17,   31,   33,   63,   64,    65,    127,
                                   128, 129, 239, 240, 241, 255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097, 65537,
                                   (1u << 20) + 13};
    size_t cap = (1u << 20) + 64;
    uint8_t *buf = malloc(cap);
    CHECK(buf != NULL);
    if (!buf) return;
    for (size_t i = 0; i < cap; i++) buf[i] = (uint8_t)((i * 2654435761u) >> 13);
    CHECK(rkm_hash(buf, 0) == 0x2D06800538D394C2ull);
    printf("hash: %s\n", rkm_hash_impl());
#if defined(__x86_64__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2"), avx512 = __builtin_cpu_supports("avx512f");
#endif
    int bad = 0;
    for (size_t i = 0; i < RKM_ARRAY_LEN(sizes); i++)
        for (size_t off = 0; off < 3; off++) {
            const uint8_t *p = buf + off * 7;
            size_t n = sizes[i];
            rkm_hasher *h = rkm_hasher_new();
            for (size_t at = 0, step = 1; at < n; at += step, step = step * 3 + 1)
                rkm_hasher_update(h, p + at, RKM_MIN(step, n - at));
            uint64_t want = rkm_hasher_digest(h);
            rkm_hasher_free(h);
            bad += rkm_hash(p, n) != want;
#if defined(__x86_64__)
            if (avx2) bad += rkm_hash_avx2(p, n) != want;
            if (avx512) bad += rkm_hash_avx512(p, n) != want;
#endif
        }
    CHECK_MSG(bad == 0, "%d hashes differ from the streaming hasher", bad);
    free(buf);
}

/* Large reads go through O_DIRECT with a bounce buffer: any offset and
 * length must give the file's bytes. */
static void test_direct_reads(const char *shared)
{
    const char *path = fixture_path(shared, "gemma4-f32");
    size_t n;
    char *file = rkm_read_file(path, &n);
    rkm_gguf *g = rkm_gguf_open(path);
    CHECK(file && g);
    if (!file || !g) return;
    const rkm_gguf_tensor *t = rkm_gguf_tensor_find(g, "blk.0.ffn_gate_up_exps.weight");
    CHECK(t && t->nbytes >= (1u << 19));
    uint64_t offs[] = {0, 1, 31, 4095, 4096, 4097, 100003};
    size_t lens[] = {256u << 10, (256u << 10) + 1, 300007, 400000};
    uint8_t *buf = malloc(400001);
    for (size_t i = 0; t && i < RKM_ARRAY_LEN(offs); i++)
        for (size_t j = 0; j < RKM_ARRAY_LEN(lens); j++) {
            if (offs[i] + lens[j] > t->nbytes) continue;
            CHECK(rkm_gguf_read(g, t, offs[i], buf + 1, lens[j]) == 0);
            CHECK_MSG(!memcmp(buf + 1, file + t->offset + offs[i], lens[j]), "read at %llu+%zu differs",
                      (unsigned long long)offs[i], lens[j]);
        }
    free(buf);
    free(file);
    rkm_gguf_close(g);
}

static void test_hparams(const char *shared)
{
    rkm_gguf *g = rkm_gguf_open(fixture_path(shared, "gemma4-f32"));
    CHECK(g != NULL);
    if (!g) return;
    rkm_hparams hp;
    CHECK_EQ_INT(rkm_hparams_from_gguf(g, &hp), 0);
    CHECK_EQ_INT(hp.arch, RKM_ARCH_GEMMA4);
    CHECK_EQ_INT(hp.n_layer, 6);
    CHECK_EQ_INT(hp.n_head_kv[0], 2);
    CHECK_EQ_INT(hp.n_head_kv[5], 1);
    CHECK_EQ_INT(hp.swa_layer[4], 1);
    CHECK_EQ_INT(hp.swa_layer[5], 0);
    CHECK_EQ_INT(hp.head_dim, 64);
    CHECK_EQ_INT(hp.head_dim_swa, 32);
    CHECK_EQ_INT(hp.sliding_window, 32);
    CHECK_EQ_INT(hp.tied_output, 1);
    CHECK_EQ_INT(hp.has_rope_freqs, 1);
    CHECK_NEAR(hp.final_softcap, 30.0, 1e-6);
    CHECK_NEAR(hp.rope_theta_swa, 1e4, 1e-3);
    CHECK_NEAR(hp.embed_scale, sqrt(128.0), 1e-5);
    rkm_gguf_close(g);

    g = rkm_gguf_open(fixture_path(shared, "mixtral-f32"));
    CHECK(g && rkm_hparams_from_gguf(g, &hp) == 0);
    CHECK_EQ_INT(hp.arch, RKM_ARCH_MIXTRAL);
    CHECK_EQ_INT(hp.n_expert, 8);
    CHECK_EQ_INT(hp.n_ff_exp, 64);
    CHECK_EQ_INT(hp.rope_neox, 0);
    rkm_gguf_close(g);

    g = rkm_gguf_open(fixture_path(shared, "qwen2moe-f32"));
    CHECK(g && rkm_hparams_from_gguf(g, &hp) == 0);
    CHECK_EQ_INT(hp.n_ff_shexp, 128);
    CHECK_EQ_INT(hp.has_qkv_bias, 1);
    CHECK_EQ_INT(hp.expert_norm_topk, 0);
    rkm_gguf_close(g);
}

/* An expert part's bytes against the source's: the same bytes, or for a
 * packed part (q8_0_x16 / q4_0_x16) the source rows packed. */
static int part_matches(const rkm_expert_part *ep, const uint8_t *got, const uint8_t *src, size_t n)
{
    if (ep->nbytes != n) return 0;
    if (!(ep->type & RKM_TYPE_PACKED)) return !memcmp(got, src, n);
    uint8_t *tmp = malloc(n);
    int ok = tmp && rkm_pack_rows(rkm_unpack_type(ep->type), memcpy(tmp, src, n), ep->ne[0], ep->ne[1]) == 0 &&
             !memcmp(got, tmp, n);
    free(tmp);
    return ok;
}

/* Converted with keep: every resident tensor is the source's bytes
 * exactly, and every expert part too (plain layout) or the source rows
 * packed (the default layout; q8_0 / q4_0 parts must then be packed). */
static void check_keep(const char *shared, const char *name, int plain)
{
    char out[1024];
    snprintf(out, sizeof out, "%s/%s%s.rkmojo", test_tmpdir(), name, plain ? "-plain" : "");
    rkm_convert_opts o = {.quant = "keep", .plain_experts = plain};
    int rc = rkm_convert(fixture_path(shared, name), out, &o);
    CHECK_MSG(rc == 0, "%s: %s", name, rkm_last_error());
    if (rc) return;
    rkm_model_dir *md = rkm_model_dir_open(out);
    CHECK_MSG(md != NULL, "%s", rkm_last_error());
    rkm_gguf *g = rkm_gguf_open(fixture_path(shared, name));
    if (!md || !g) return;
    CHECK_EQ_INT(rkm_model_dir_verify(md), 0);
    int n_res = 0, n_exp_tensors = 0;
    for (int i = 0; i < rkm_gguf_n_tensors(g); i++) {
        const rkm_gguf_tensor *t = rkm_gguf_tensor_at(g, i);
        uint8_t *src = read_tensor(g, t);
        const rkm_tensor_view *tv = rkm_model_dir_tensor(md, t->name);
        if (tv) {
            n_res++;
            CHECK_MSG(tv->type == t->type && tv->nbytes == t->nbytes && !memcmp(tv->data, src, t->nbytes),
                      "%s: resident %s differs", name, t->name);
            CHECK_EQ_INT((uint64_t)tv->data % 64, 0);
        } else {
            /* an expert tensor: fused [cols, rows(, 2*rows), n_expert] */
            int il;
            char part[32];
            CHECK_MSG(sscanf(t->name, "blk.%d.ffn_%31[a-z_].weight", &il, part) == 2, "%s: %s not in the model", name, t->name);
            const rkm_expert_layer *el = rkm_model_dir_expert_layer(md, il);
            CHECK(el != NULL);
            if (!el) {
                free(src);
                continue;
            }
            n_exp_tensors++;
            CHECK_EQ_INT(el->blob_stride % 4096, 0);
            uint8_t *blob = rkm_alloc_aligned(el->blob_stride, 4096);
            size_t per = t->nbytes / (size_t)t->ne[2];
            for (int e = 0; e < el->n_expert; e++) {
                CHECK_EQ_INT(rkm_model_dir_read_expert(md, il, e, blob, 1), 0);
                const uint8_t *se = src + (size_t)e * per;
                for (int p = 0; p < RKM_PART_COUNT; p++) {
                    int q = el->part[p].type;
                    CHECK_MSG(!(q & RKM_TYPE_PACKED) || !plain, "%s: part %d stored as %s", name, p, rkm_type_name(q));
                    if (!plain && (q == RKM_TYPE_Q8_0 || q == RKM_TYPE_Q4_0) && el->part[p].ne[1] >= 16)
                        CHECK_MSG(0, "%s: part %d left plain", name, p);
                }
                if (!strcmp(part, "gate_up_exps")) {
                    const rkm_expert_part *g0 = &el->part[RKM_PART_GATE], *u0 = &el->part[RKM_PART_UP];
                    CHECK(g0->nbytes + u0->nbytes == per);
                    CHECK(part_matches(g0, blob + g0->offset, se, g0->nbytes));
                    CHECK(part_matches(u0, blob + u0->offset, se + g0->nbytes, u0->nbytes));
                } else {
                    int p = !strcmp(part, "gate_exps") ? RKM_PART_GATE : !strcmp(part, "up_exps") ? RKM_PART_UP : RKM_PART_DOWN;
                    CHECK_MSG(part_matches(&el->part[p], blob + el->part[p].offset, se, per),
                              "%s: expert %d of %s differs", name, e, t->name);
                }
            }
            rkm_free_aligned(blob);
        }
        free(src);
    }
    CHECK_EQ_INT(n_res, md->n_tensors);
    CHECK(md->tokenizer_file != NULL);
    rkm_gguf_close(g);
    rkm_model_dir_close(md);
}

/* Quantized conversion: every value within the block's error bound. */
static void check_quant(const char *shared, const char *name, const char *q)
{
    char out[1024];
    snprintf(out, sizeof out, "%s/%s-%s.rkmojo", test_tmpdir(), name, q);
    rkm_convert_opts o = {.quant = q};
    CHECK_MSG(rkm_convert(fixture_path(shared, name), out, &o) == 0, "%s", rkm_last_error());
    rkm_model_dir *md = rkm_model_dir_open(out);
    rkm_gguf *g = rkm_gguf_open(fixture_path(shared, name));
    if (!md || !g) {
        CHECK(0);
        return;
    }
    int qt = !strcmp(q, "q8_0") ? RKM_TYPE_Q8_0 : RKM_TYPE_Q4_0;
    double worst = 0;
    for (int i = 0; i < md->n_tensors; i++) {
        const rkm_tensor_view *tv = &md->tensors[i];
        const rkm_gguf_tensor *t = rkm_gguf_tensor_find(g, tv->name);
        CHECK(t != NULL);
        if (!t) continue;
        if (tv->n_dims == 1 || strstr(tv->name, "ffn_gate_inp")) {
            CHECK_MSG(tv->type == RKM_TYPE_F32, "%s should stay f32", tv->name);
            continue;
        }
        int want = !strcmp(tv->name, "output.weight") ? RKM_TYPE_Q8_0 : qt;
        CHECK_MSG(tv->type == want, "%s has type %s", tv->name, rkm_type_name(tv->type));
        float *src = malloc(t->nbytes), *deq = malloc(t->nbytes);
        rkm_gguf_read(g, t, 0, src, t->nbytes);
        int64_t n = (int64_t)(t->nbytes / 4);
        rkm_dequantize_row(tv->type, tv->data, deq, n);
        for (int64_t b = 0; b < n / 32; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(src[b * 32 + j]));
            double bound = tv->type == RKM_TYPE_Q8_0 ? amax * (0.5 / 127 + 1.0 / 1024) : amax / 8 * 1.01;
            for (int j = 0; j < 32; j++) {
                double err = fabs(src[b * 32 + j] - deq[b * 32 + j]);
                if (err > bound) {
                    CHECK_MSG(0, "%s[%lld]: error %g > bound %g", tv->name, (long long)(b * 32 + j), err, bound);
                    b = n;
                    break;
                }
                if (amax > 0) worst = fmax(worst, err / amax);
            }
        }
        free(src);
        free(deq);
    }
    printf("%s %s: worst relative error %.4f\n", name, q, worst);
    rkm_gguf_close(g);
    rkm_model_dir_close(md);
}

static void corrupt_byte(const char *path, uint64_t off)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    CHECK(pread(fd, &b, 1, (off_t)off) == 1);
    b ^= 0x40;
    CHECK(pwrite(fd, &b, 1, (off_t)off) == 1);
    close(fd);
}

static void test_verify(const char *shared)
{
    char out[1024], cmd[3000];
    snprintf(out, sizeof out, "%s/verify.rkmojo", test_tmpdir());
    rkm_convert_opts o = {.quant = "q8_0"};
    CHECK(rkm_convert(fixture_path(shared, "qwen3moe-f32"), out, &o) == 0);
    rkm_model_dir *md = rkm_model_dir_open(out);
    CHECK(md && rkm_model_dir_verify(md) == 0);
    const rkm_tensor_view *tv = md ? rkm_model_dir_tensor(md, "blk.2.attn_k.weight") : NULL;
    uint64_t toff = tv ? tv->offset + 100 : 0;
    rkm_model_dir_close(md);
    /* a flipped byte in a resident tensor */
    snprintf(cmd, sizeof cmd, "%s/resident.bin", out);
    corrupt_byte(cmd, toff);
    md = rkm_model_dir_open(out);
    CHECK(md && rkm_model_dir_verify(md) == RKM_ECHECKSUM);
    CHECK_MSG(strstr(rkm_last_error(), "blk.2.attn_k.weight") != NULL, "message: %s", rkm_last_error());
    rkm_model_dir_close(md);
    corrupt_byte(cmd, toff);
    /* a flipped byte in expert 5 of layer 1 */
    md = rkm_model_dir_open(out);
    const rkm_expert_layer *el = md ? rkm_model_dir_expert_layer(md, 1) : NULL;
    uint64_t eoff = el ? 5 * el->blob_stride + el->part[RKM_PART_DOWN].offset + 7 : 0;
    rkm_model_dir_close(md);
    snprintf(cmd, sizeof cmd, "%s/experts/blk.1.bin", out);
    corrupt_byte(cmd, eoff);
    md = rkm_model_dir_open(out);
    CHECK(md && rkm_model_dir_verify(md) == RKM_ECHECKSUM);
    CHECK_MSG(strstr(rkm_last_error(), "expert 5 of layer 1") != NULL, "message: %s", rkm_last_error());
    rkm_model_dir_close(md);
    /* a truncated expert file is refused at open */
    CHECK(truncate(cmd, 4096) == 0);
    CHECK(rkm_model_dir_open(out) == NULL);
    CHECK_MSG(strstr(rkm_last_error(), "truncated") != NULL, "message: %s", rkm_last_error());
}

/* Every prefix of a GGUF file is rejected with a message, never a crash;
 * a converter run on it leaves no manifest. */
static void test_truncated(const char *shared)
{
    size_t n;
    char *data = rkm_read_file(fixture_path(shared, "qwen3moe-q8_0"), &n);
    CHECK(data != NULL);
    if (!data) return;
    size_t cuts[] = {0, 3, 4, 8, 23, 24, 100, 1000, 5000, 20000, n / 2, n - 1};
    for (size_t i = 0; i < RKM_ARRAY_LEN(cuts); i++) {
        rkm_gguf *g = rkm_gguf_open_mem(data, cuts[i]);
        CHECK_MSG(g == NULL, "prefix of %zu bytes accepted", cuts[i]);
        CHECK(strlen(rkm_last_error()) > 0);
        rkm_gguf_close(g);
    }
    char in[1024], out[1024], mp[1100];
    snprintf(in, sizeof in, "%s/trunc.gguf", test_tmpdir());
    snprintf(out, sizeof out, "%s/trunc.rkmojo", test_tmpdir());
    FILE *f = fopen(in, "wb");
    fwrite(data, 1, n - 1000, f);
    fclose(f);
    rkm_convert_opts o = {.quant = "keep"};
    CHECK(rkm_convert(in, out, &o) != 0);
    CHECK_MSG(strstr(rkm_last_error(), "truncated") || strstr(rkm_last_error(), "outside"), "message: %s", rkm_last_error());
    snprintf(mp, sizeof mp, "%s/manifest.json", out);
    CHECK(access(mp, F_OK) != 0);
    /* wrong magic */
    memcpy(data, "GGUX", 4);
    CHECK(rkm_gguf_open_mem(data, n) == NULL);
    CHECK(strstr(rkm_last_error(), "magic") != NULL);
    memcpy(data, "GGUF", 4);
    /* absurd tensor count */
    uint8_t saved[8];
    memcpy(saved, data + 8, 8);
    memset(data + 8, 0xff, 8);
    CHECK(rkm_gguf_open_mem(data, n) == NULL);
    memcpy(data + 8, saved, 8);
    /* a flipped byte in every position of the header never crashes */
    for (size_t i = 0; i < 4096 && i < n; i += 7) {
        data[i] ^= 0x5a;
        rkm_gguf *g = rkm_gguf_open_mem(data, n);
        rkm_gguf_close(g);
        data[i] ^= 0x5a;
    }
    free(data);
}

static void test_writer_roundtrip(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/w.gguf", test_tmpdir());
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    rkm_gguf_writer_set_str(w, "general.architecture", "llama");
    rkm_gguf_writer_set_u32(w, "a.u32", 7);
    rkm_gguf_writer_set_f32(w, "a.f32", 1.5f);
    rkm_gguf_writer_set_bool(w, "a.bool", 1);
    int32_t arr[3] = {1, -2, 3};
    rkm_gguf_writer_set_arr(w, "a.arr", RKM_GGUF_INT32, arr, 3);
    const char *strs[2] = {"x", "hello"};
    rkm_gguf_writer_set_arr_str(w, "a.strs", strs, NULL, 2);
    int64_t ne1[2] = {32, 3}, ne2[1] = {5};
    CHECK_EQ_INT(rkm_gguf_writer_add_tensor(w, "t.q8", RKM_TYPE_Q8_0, 2, ne1), 0);
    CHECK_EQ_INT(rkm_gguf_writer_add_tensor(w, "t.f32", RKM_TYPE_F32, 1, ne2), 0);
    CHECK_EQ_INT(rkm_gguf_writer_begin(w, path), 0);
    uint8_t q[3 * 34];
    for (int i = 0; i < (int)sizeof q; i++) q[i] = (uint8_t)i;
    float f[5] = {1, 2, 3, 4, 5};
    CHECK_EQ_INT(rkm_gguf_writer_write_data(w, q, sizeof q), 0);
    CHECK_EQ_INT(rkm_gguf_writer_write_data(w, f, sizeof f), 0);
    CHECK_EQ_INT(rkm_gguf_writer_finish(w), 0);
    rkm_gguf_writer_free(w);
    rkm_gguf *g = rkm_gguf_open(path);
    CHECK(g != NULL);
    if (!g) return;
    int64_t v;
    double d;
    int b;
    CHECK(rkm_gguf_get_int(g, "a.u32", &v) == 0 && v == 7);
    CHECK(rkm_gguf_get_float(g, "a.f32", &d) == 0 && d == 1.5);
    CHECK(rkm_gguf_get_bool(g, "a.bool", &b) == 0 && b == 1);
    int ai = rkm_gguf_find(g, "a.arr");
    CHECK(rkm_gguf_arr_n(g, ai) == 3 && rkm_gguf_arr_int(g, ai, 1) == -2);
    size_t len;
    CHECK(!strcmp(rkm_gguf_arr_str(g, rkm_gguf_find(g, "a.strs"), 1, &len), "hello") && len == 5);
    const rkm_gguf_tensor *t = rkm_gguf_tensor_find(g, "t.f32");
    CHECK(t && t->nbytes == 20 && t->offset % 32 == 0);
    float back[5];
    CHECK(t && rkm_gguf_read(g, t, 0, back, 20) == 0 && !memcmp(back, f, 20));
    rkm_gguf_close(g);
}

/* Names the fields in which two hparams differ; returns their count. */
static int hp_diff(const rkm_hparams *a, const rkm_hparams *b, const char *what)
{
    int n = 0;
    for (int i = 0; i < rkm_hparams_n_fields(); i++) {
        const rkm_hparams_field *f = rkm_hparams_field_at(i);
        if (memcmp((const char *)a + f->off, (const char *)b + f->off, 4)) {
            fprintf(stderr, "%s: hparams.%s differs\n", what, f->name);
            n++;
        }
    }
    if (memcmp(a->n_head_kv, b->n_head_kv, sizeof a->n_head_kv) || memcmp(a->swa_layer, b->swa_layer, sizeof a->swa_layer) ||
        strcmp(a->arch_name, b->arch_name) || a->arch != b->arch) {
        fprintf(stderr, "%s: per-layer heads, sliding pattern or arch differ\n", what);
        n++;
    }
    return n;
}

/* synth writes what llama.cpp loads: the fixtures (made for llama.cpp)
 * are the model. Same tensor names, types and shapes; every metadata key
 * of the fixture present with the same value type. */
static void check_synth_like_fixture(const char *shared, const char *preset, const char *fixture)
{
    char out[1024];
    snprintf(out, sizeof out, "%s/synth-%s.gguf", test_tmpdir(), preset);
    rkm_synth_opts o = {.preset = preset, .seed = 3, .dtype = RKM_TYPE_F32};
    CHECK_MSG(rkm_synth(&o, out) == 0, "synth %s: %s", preset, rkm_last_error());
    rkm_gguf *a = rkm_gguf_open(out), *b = rkm_gguf_open(fixture_path(shared, fixture));
    CHECK(a && b);
    if (!a || !b) return;
    CHECK_EQ_INT(rkm_gguf_n_tensors(a), rkm_gguf_n_tensors(b));
    for (int i = 0; i < rkm_gguf_n_tensors(b); i++) {
        const rkm_gguf_tensor *tb = rkm_gguf_tensor_at(b, i), *ta = rkm_gguf_tensor_find(a, tb->name);
        CHECK_MSG(ta != NULL, "%s: synth lacks %s", preset, tb->name);
        if (!ta) continue;
        CHECK_MSG(ta->type == tb->type && ta->n_dims == tb->n_dims && !memcmp(ta->ne, tb->ne, sizeof ta->ne),
                  "%s: %s differs in type or shape", preset, tb->name);
    }
    for (int i = 0; i < rkm_gguf_n_kv(b); i++) {
        const char *k = rkm_gguf_key(b, i);
        if (!strncmp(k, "synthetic.", 10)) continue;
        int j = rkm_gguf_find(a, k);
        CHECK_MSG(j >= 0, "%s: synth lacks key %s", preset, k);
        if (j < 0) continue;
        CHECK_MSG(rkm_gguf_vtype(a, j) == rkm_gguf_vtype(b, i) && rkm_gguf_arr_type(a, j) == rkm_gguf_arr_type(b, i),
                  "%s: key %s has another type", preset, k);
    }
    rkm_hparams ha, hb;
    CHECK(rkm_hparams_from_gguf(a, &ha) == 0 && rkm_hparams_from_gguf(b, &hb) == 0);
    ha.n_ctx_train = hb.n_ctx_train; /* the presets choose a longer context than the fixtures' 512 */
    CHECK_MSG(hp_diff(&ha, &hb, preset) == 0, "%s: hyper-parameters differ from %s", preset, fixture);
    rkm_gguf_close(a);
    rkm_gguf_close(b);
}

/* rkm_source_file_spans against the reads themselves: the directory's
 * shards side by side in one staging file filled on demand (as rkmojo
 * pull opens a checkpoint), every range of the converter's read order read
 * alone; each byte range the reader asks fill for lies inside that
 * range's spans (a pull fetches and keeps exactly those), and the spans
 * of each tensor's ranges add up to the same bytes as consumed in pieces. */
typedef struct {
    int n, fds[16];
    uint64_t base[16], size[16];
    int stage_fd;
    uint64_t rec_off[4096], rec_n[4096];
    int n_rec, overflow;
} span_ctx;

static int span_fill(void *user, uint64_t off, uint64_t n)
{
    span_ctx *c = user;
    for (int i = 0; i < c->n; i++) {
        if (off < c->base[i] || off + n > c->base[i] + c->size[i]) continue;
        uint8_t *b = malloc(n ? n : 1);
        int rc = b && pread(c->fds[i], b, n, (off_t)(off - c->base[i])) == (ssize_t)n &&
                         pwrite(c->stage_fd, b, n, (off_t)off) == (ssize_t)n ? 0 : rkm_err(RKM_EIO, "staging copy failed");
        free(b);
        if (c->n_rec < 4096) c->rec_off[c->n_rec] = off, c->rec_n[c->n_rec++] = n;
        else c->overflow = 1;
        return rc;
    }
    return rkm_err(RKM_EINVAL, "fill of %llu+%llu outside every shard", (unsigned long long)off, (unsigned long long)n);
}

static char g_span_stage[1100];
static struct rkm_safetensors *span_open(void *user, int i, const char *name)
{
    span_ctx *c = user;
    return rkm_safetensors_open_fill(g_span_stage, name, c->base[i], c->size[i], span_fill, c);
}

static void check_file_spans(const char *preset, const char *hf)
{
    char **names = NULL;
    int n_names = 0;
    span_ctx *c = calloc(1, sizeof *c);
    CHECK_MSG(c && rkm_hf_index_shards(hf, &names, &n_names) == 0 && n_names <= 16, "%s: %s", preset, rkm_last_error());
    if (!c || !names || n_names > 16) {
        free(c);
        for (int i = 0; i < n_names; i++) free(names[i]);
        free(names);
        return;
    }
    c->n = n_names;
    uint64_t total = 0;
    for (int i = 0; i < c->n; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", hf, names[i]);
        c->fds[i] = open(p, O_RDONLY);
        c->size[i] = c->fds[i] >= 0 ? (uint64_t)lseek(c->fds[i], 0, SEEK_END) : 0;
        c->base[i] = total;
        total += c->size[i];
    }
    snprintf(g_span_stage, sizeof g_span_stage, "%s/spans-%s.stage", test_tmpdir(), preset);
    c->stage_fd = open(g_span_stage, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(c->stage_fd >= 0 && ftruncate(c->stage_fd, (off_t)total) == 0);
    rkm_source *s = rkm_source_open_hf_shards(hf, c->n, (const char *const *)names, span_open, c);
    CHECK_MSG(s, "%s: %s", preset, rkm_last_error());
    rkm_convert_read *rd = NULL;
    size_t n_rd = 0;
    if (s) CHECK(rkm_convert_read_order(s, &rd, &n_rd) == 0 && n_rd > 0);
    int outside = 0, inexact = 0;
    for (size_t k = 0; k < n_rd; k++) {
        const rkm_src_tensor *t = rd[k].t;
        const uint64_t rb = rkm_type_row_bytes(t->type, t->ne[0]);
        rkm_file_span sp[2];
        int exact;
        const int ns = rkm_source_file_spans(s, t, rd[k].off, rd[k].len, sp, &exact);
        inexact += !exact;
        uint8_t *buf = malloc(rd[k].len ? rd[k].len : 1);
        c->n_rec = 0;
        CHECK_MSG(buf && rkm_source_read_rows(s, t, (int64_t)(rd[k].off / rb), (int64_t)(rd[k].len / rb), buf) == 0,
                  "%s: %s: %s", preset, t->name, rkm_last_error());
        free(buf);
        for (int r = 0; r < c->n_rec; r++) {
            int in = 0;
            for (int q = 0; q < ns && !in; q++)
                in = c->rec_off[r] >= sp[q].off && c->rec_off[r] + c->rec_n[r] <= sp[q].off + sp[q].len;
            if (!in && outside++ < 3)
                fprintf(stderr, "%s: %s [%llu, +%llu): read %llu+%llu outside its spans\n", preset, t->name,
                        (unsigned long long)rd[k].off, (unsigned long long)rd[k].len, (unsigned long long)c->rec_off[r],
                        (unsigned long long)c->rec_n[r]);
        }
        /* consumed in halves of its rows, the spans tile the whole's */
        const uint64_t rows = rd[k].len / rb, h = rows / 2 * rb;
        if (rows >= 2) {
            rkm_file_span a[2], b[2];
            int e1, e2;
            const int na = rkm_source_file_spans(s, t, rd[k].off, h, a, &e1), nb = rkm_source_file_spans(s, t, rd[k].off + h, rd[k].len - h, b, &e2);
            uint64_t whole = 0, parts = 0;
            for (int q = 0; q < ns; q++) whole += sp[q].len;
            for (int q = 0; q < na; q++) parts += a[q].len;
            for (int q = 0; q < nb; q++) parts += b[q].len;
            CHECK_MSG(exact ? parts == whole : parts >= whole, "%s: %s: halves' spans %llu bytes, the whole's %llu", preset,
                      t->name, (unsigned long long)parts, (unsigned long long)whole);
        }
    }
    CHECK_MSG(!outside && !c->overflow, "%s: %d reads outside their spans", preset, outside);
    if (getenv("RKM_TEST_VERBOSE")) fprintf(stderr, "%s: %zu ranges, %d not exact\n", preset, n_rd, inexact);
    free(rd);
    rkm_source_close(s);
    close(c->stage_fd);
    unlink(g_span_stage);
    for (int i = 0; i < c->n; i++)
        if (c->fds[i] >= 0) close(c->fds[i]);
    free(c);
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
}

/* The same weights through GGUF and through a sharded Hugging Face
 * directory convert to the same model, checksum for checksum. */
static void check_hf_equivalence(const char *preset, const char *const *sets, int n_sets)
{
    char gg[1024], hf[1024], m1[1024], m2[1024];
    snprintf(gg, sizeof gg, "%s/eq-%s.gguf", test_tmpdir(), preset);
    snprintf(hf, sizeof hf, "%s/eq-%s-hf", test_tmpdir(), preset);
    snprintf(m1, sizeof m1, "%s/eq-%s-1.rkmojo", test_tmpdir(), preset);
    snprintf(m2, sizeof m2, "%s/eq-%s-2.rkmojo", test_tmpdir(), preset);
    rkm_synth_opts o = {.preset = preset, .seed = 11, .dtype = RKM_TYPE_F16, .hf_out = hf, .sets = sets, .n_sets = n_sets};
    CHECK_MSG(rkm_synth(&o, gg) == 0, "synth %s: %s", preset, rkm_last_error());
    rkm_convert_opts c = {.quant = "keep"};
    CHECK_MSG(rkm_convert(gg, m1, &c) == 0, "%s", rkm_last_error());
    CHECK_MSG(rkm_convert(hf, m2, &c) == 0, "%s", rkm_last_error());
    rkm_model_dir *a = rkm_model_dir_open(m1), *b = rkm_model_dir_open(m2);
    CHECK(a && b);
    if (a && b) {
        CHECK_MSG(hp_diff(&a->hp, &b->hp, preset) == 0, "%s: hparams differ between GGUF and HF", preset);
        CHECK_EQ_INT(a->n_tensors, b->n_tensors);
        for (int i = 0; i < a->n_tensors; i++) {
            const rkm_tensor_view *tb = rkm_model_dir_tensor(b, a->tensors[i].name);
            CHECK_MSG(tb && tb->checksum == a->tensors[i].checksum && tb->type == a->tensors[i].type,
                      "%s: %s differs between GGUF and HF", preset, a->tensors[i].name);
        }
        CHECK_EQ_INT(a->n_expert_layers, b->n_expert_layers);
        for (int l = 0; l < a->n_expert_layers && l < b->n_expert_layers; l++)
            for (int e = 0; e < a->experts[l].n_expert; e++)
                CHECK_MSG(a->experts[l].checksums[e] == b->experts[l].checksums[e], "%s: expert %d of layer %d differs",
                          preset, e, a->experts[l].layer);
        CHECK(b->tokenizer_file && !strcmp(b->tokenizer_file, "tokenizer.json"));
    }
    check_file_spans(preset, hf);
    rkm_model_dir_close(a);
    rkm_model_dir_close(b);
}

static int write_str(const char *path, const char *s) { return rkm_write_file_atomic(path, s, strlen(s)); }

/* A Hugging Face checkpoint whose shards arrive while they are read
 * (rkm_source_open_hf_shards with rkm_safetensors_open_fill, as rkmojo
 * pull opens one): both shards side by side in one sparse staging file,
 * their bytes copied in only by the fill hook. Every tensor reads the same
 * as from the directory, every read asked its bytes of fill first, and a
 * failing fill fails the open with its message. */
typedef struct {
    int fd;                /* the staging file */
    char *paths[2];        /* the shards' own files */
    uint64_t base[2], size[2];
    uint64_t filled;       /* bytes copied in by fill */
    int fail;              /* fill fails */
} stage_ctx;

static int stage_fill(void *user, uint64_t off, uint64_t n)
{
    stage_ctx *c = user;
    if (c->fail) return rkm_err(RKM_EIO, "fill failed at %llu", (unsigned long long)off);
    for (int i = 0; i < 2; i++) {
        if (off < c->base[i] || off + n > c->base[i] + c->size[i]) continue;
        size_t len;
        char *b = rkm_read_file(c->paths[i], &len);
        int rc = b && len == c->size[i] && pwrite(c->fd, b + (off - c->base[i]), n, (off_t)off) == (ssize_t)n ? 0 : -1;
        free(b);
        if (rc) return rkm_err(RKM_EIO, "staging write failed");
        c->filled += n;
        return 0;
    }
    return rkm_err(RKM_EINVAL, "fill of %llu+%llu straddles the shards", (unsigned long long)off, (unsigned long long)n);
}

static char g_stage_path[1100];
static struct rkm_safetensors *stage_open(void *user, int i, const char *name)
{
    stage_ctx *c = user;
    return rkm_safetensors_open_fill(g_stage_path, name, c->base[i], c->size[i], stage_fill, c);
}

static void test_hf_shards_fill(void)
{
    char gg[1024], hf[1024];
    snprintf(gg, sizeof gg, "%s/fill.gguf", test_tmpdir());
    snprintf(hf, sizeof hf, "%s/fill-hf", test_tmpdir());
    snprintf(g_stage_path, sizeof g_stage_path, "%s/fill.stage", test_tmpdir());
    rkm_synth_opts o = {.preset = "tiny", .seed = 9, .dtype = RKM_TYPE_F16, .hf_out = hf};
    CHECK_MSG(rkm_synth(&o, gg) == 0, "%s", rkm_last_error());
    const char *names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    stage_ctx c = {.fd = -1};
    uint64_t total = 4096; /* a gap before the first shard: offsets are the staging file's */
    for (int i = 0; i < 2; i++) {
        c.paths[i] = rkm_path_join(hf, names[i]);
        struct stat st;
        CHECK(c.paths[i] && stat(c.paths[i], &st) == 0);
        c.base[i] = total;
        c.size[i] = (uint64_t)st.st_size;
        total += c.size[i] + 100;
    }
    c.fd = open(g_stage_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(c.fd >= 0 && ftruncate(c.fd, (off_t)total) == 0);
    rkm_source *a = rkm_source_open(hf);
    rkm_source *b = rkm_source_open_hf_shards(hf, 2, names, stage_open, &c);
    CHECK_MSG(a && b, "%s", rkm_last_error());
    const uint64_t after_open = c.filled;
    CHECK(after_open > 0 && after_open < c.size[0] + c.size[1]); /* the headers only */
    if (a && b) {
        CHECK_EQ_INT(a->n_tensors, b->n_tensors);
        for (int i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
            const rkm_src_tensor *ta = &a->tensors[i], *tb = rkm_source_find(b, ta->name);
            CHECK_MSG(tb && tb->nbytes == ta->nbytes && tb->file == ta->file, "%s", ta->name);
            if (!tb || tb->nbytes != ta->nbytes) continue;
            const int64_t rows = ta->nbytes / rkm_type_row_bytes(ta->type, ta->ne[0]);
            uint8_t *x = malloc(ta->nbytes), *y = malloc(ta->nbytes);
            CHECK(x && y && rkm_source_read_rows(a, ta, 0, rows, x) == 0 && rkm_source_read_rows(b, tb, 0, rows, y) == 0);
            CHECK_MSG(x && y && !memcmp(x, y, ta->nbytes), "%s differs when filled", ta->name);
            free(x);
            free(y);
        }
        CHECK(c.filled > after_open);
        /* a fill that fails: the read fails with its message */
        c.fail = 1;
        const rkm_src_tensor *t0 = &b->tensors[0];
        uint8_t *x = malloc(t0->nbytes);
        CHECK(x && rkm_source_read_rows(b, t0, 0, 1, x) != 0 && strstr(rkm_last_error(), "fill failed"));
        free(x);
    }
    rkm_source_close(a);
    rkm_source_close(b);
    /* the open reads the headers through fill too */
    c.fail = 1;
    rkm_source *f = rkm_source_open_hf_shards(hf, 2, names, stage_open, &c);
    CHECK(!f && strstr(rkm_last_error(), "fill failed"));
    rkm_source_close(f);
    close(c.fd);
    for (int i = 0; i < 2; i++) free(c.paths[i]);
}

/* config.json rope_scaling of type llama3: the converter derives
 * rope_freqs as llama.cpp's does (checked here against the published
 * rule in double precision); other unknown types are refused by name. */
static void test_hf_llama3_rope(void)
{
    char gg[1024], hf[1024], out[1024], cfgp[1100];
    snprintf(gg, sizeof gg, "%s/l3.gguf", test_tmpdir());
    snprintf(hf, sizeof hf, "%s/l3-hf", test_tmpdir());
    snprintf(cfgp, sizeof cfgp, "%s/config.json", hf);
    rkm_synth_opts o = {.preset = "llama-dense", .seed = 5, .dtype = RKM_TYPE_F32, .hf_out = hf};
    CHECK_MSG(rkm_synth(&o, gg) == 0, "%s", rkm_last_error());
    size_t n;
    char *js = rkm_read_file(cfgp, &n);
    cJSON *cfg = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(cfg != NULL);
    if (!cfg) return;
    cJSON *rs = cJSON_AddObjectToObject(cfg, "rope_scaling");
    cJSON_AddStringToObject(rs, "rope_type", "llama3");
    cJSON_AddNumberToObject(rs, "factor", 8);
    cJSON_AddNumberToObject(rs, "low_freq_factor", 1);
    cJSON_AddNumberToObject(rs, "high_freq_factor", 4);
    cJSON_AddNumberToObject(rs, "original_max_position_embeddings", 256);
    char *txt = cJSON_Print(cfg);
    CHECK(write_str(cfgp, txt) == 0);
    free(txt);
    snprintf(out, sizeof out, "%s/l3.rkmojo", test_tmpdir());
    rkm_convert_opts c = {.quant = "keep"};
    CHECK_MSG(rkm_convert(hf, out, &c) == 0, "%s", rkm_last_error());
    rkm_model_dir *md = rkm_model_dir_open(out);
    const rkm_tensor_view *rf = md ? rkm_model_dir_tensor(md, "rope_freqs.weight") : NULL;
    CHECK(md && md->hp.has_rope_freqs && rf && rf->type == RKM_TYPE_F32 && rf->ne[0] == md->hp.rope_dim / 2);
    if (rf) {
        const float *f = rf->data;
        int ones = 0, full = 0, ramp = 0;
        for (int i = 0; i < md->hp.rope_dim / 2; i++) {
            double wave = 2 * M_PI * pow(md->hp.rope_theta, 2.0 * i / md->hp.rope_dim);
            double want = wave < 256 / 4.0 ? 1 : wave > 256 ? 8 : 1 / ((1 - (256 / wave - 1) / 3) / 8 + (256 / wave - 1) / 3);
            CHECK_MSG(fabs(f[i] - want) <= 1e-5 * want, "rope_freqs[%d] = %g, want %g", i, (double)f[i], want);
            ones += want == 1;
            full += want == 8;
            ramp += want != 1 && want != 8;
        }
        CHECK_MSG(ones && full && ramp, "the case covers every branch (%d %d %d)", ones, full, ramp);
    }
    rkm_model_dir_close(md);
    cJSON_ReplaceItemInObject(rs, "rope_type", cJSON_CreateString("dynamic"));
    txt = cJSON_Print(cfg);
    CHECK(write_str(cfgp, txt) == 0);
    free(txt);
    snprintf(out, sizeof out, "%s/l3-dyn.rkmojo", test_tmpdir());
    CHECK_MSG(rkm_convert(hf, out, &c) != 0 && strstr(rkm_last_error(), "rope_scaling 'dynamic' is not supported"), "%s", rkm_last_error());
    cJSON_Delete(cfg);
}

/* A copy of GGUF in as out without key or tensor `drop` (NULL: none),
 * with tensor `shrink` (NULL: none) one value shorter; add(w) sets more
 * keys. */
static int gguf_edit(const char *in, const char *out, const char *drop, const char *shrink, void (*add)(rkm_gguf_writer *))
{
    rkm_gguf *g = rkm_gguf_open(in);
    if (!g) return -1;
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    for (int i = 0; i < rkm_gguf_n_kv(g); i++)
        if (!drop || strcmp(rkm_gguf_key(g, i), drop)) rkm_gguf_writer_copy_kv(w, g, i);
    if (add) add(w);
    for (int i = 0; i < rkm_gguf_n_tensors(g); i++) {
        const rkm_gguf_tensor *t = rkm_gguf_tensor_at(g, i);
        if (drop && !strcmp(t->name, drop)) continue;
        int64_t ne[4];
        memcpy(ne, t->ne, sizeof ne);
        if (shrink && !strcmp(t->name, shrink)) ne[0]--;
        rkm_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne);
    }
    int rc = rkm_gguf_writer_begin(w, out);
    for (int i = 0; !rc && i < rkm_gguf_n_tensors(g); i++) {
        const rkm_gguf_tensor *t = rkm_gguf_tensor_at(g, i);
        if (drop && !strcmp(t->name, drop)) continue;
        uint8_t *b = read_tensor(g, t);
        size_t n = t->nbytes - (shrink && !strcmp(t->name, shrink) ? sizeof(float) : 0);
        rc = b ? rkm_gguf_writer_write_data(w, b, n) : -1;
        free(b);
    }
    if (!rc) rc = rkm_gguf_writer_finish(w);
    rkm_gguf_writer_free(w);
    rkm_gguf_close(g);
    return rc;
}

static void add_short_pattern(rkm_gguf_writer *w)
{
    uint8_t pat[2] = {1, 0}; /* the model has 3 layers */
    rkm_gguf_writer_set_arr(w, "gpt-oss.attention.sliding_window_pattern", RKM_GGUF_BOOL, pat, 2);
}

static void add_bad_yarn(rkm_gguf_writer *w) { rkm_gguf_writer_set_f32(w, "gpt-oss.rope.scaling.yarn_beta_fast", 0.5f); }
static void add_nan_base(rkm_gguf_writer *w) { rkm_gguf_writer_set_f32(w, "gpt-oss.rope.freq_base", NAN); }
static void add_nan_eps(rkm_gguf_writer *w) { rkm_gguf_writer_set_f32(w, "gpt-oss.attention.layer_norm_rms_epsilon", NAN); }
static void add_inf_base(rkm_gguf_writer *w) { rkm_gguf_writer_set_f32(w, "gpt-oss.rope.freq_base", INFINITY); }

/* An edit of a good file and the message its conversion must fail with. */
typedef struct {
    const char *drop, *shrink;
    void (*add)(rkm_gguf_writer *);
    const char *msg;
} bad_edit;

/* preset (with sets) synthesized as F32 into NAME.gguf must convert; each
 * edit of it must be refused naming cases[i].msg, leaving nothing behind. */
static void check_bad_edits(const char *name, const char *preset, const char *const *sets, int n_sets,
                            const bad_edit *cases, int n_cases)
{
    char gg[1024], bad[1024], out[1024], ok[1100];
    snprintf(gg, sizeof gg, "%s/%s.gguf", test_tmpdir(), name);
    snprintf(bad, sizeof bad, "%s/%s-bad.gguf", test_tmpdir(), name);
    snprintf(out, sizeof out, "%s/%s-bad.rkmojo", test_tmpdir(), name);
    snprintf(ok, sizeof ok, "%s.ok", out);
    rkm_synth_opts o = {.preset = preset, .seed = 3, .dtype = RKM_TYPE_F32, .sets = sets, .n_sets = n_sets};
    CHECK_MSG(rkm_synth(&o, gg) == 0, "%s", rkm_last_error());
    rkm_convert_opts c = {.quant = "keep"};
    CHECK_MSG(rkm_convert(gg, ok, &c) == 0, "the unedited %s file converts: %s", name, rkm_last_error());
    for (int i = 0; i < n_cases; i++) {
        CHECK(gguf_edit(gg, bad, cases[i].drop, cases[i].shrink, cases[i].add) == 0);
        int rc = rkm_convert(bad, out, &c);
        CHECK_MSG(rc != 0 && strstr(rkm_last_error(), cases[i].msg), "%s case %d: %d %s", name, i, rc, rkm_last_error());
        CHECK_MSG(access(out, F_OK) != 0, "%s case %d: nothing is left behind", name, i);
    }
}

/* A gpt-oss file with a sink tensor of the wrong length, a sliding-window
 * pattern that does not match the layer count or inconsistent YaRN
 * parameters: a clear error at convert, nothing written. */
static void test_gpt_oss_bad_files(void)
{
    static const char *const sets[] = {"n_vocab=512", "n_layer=3", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                       "head_dim_swa=32", "rope_dim=32", "rope_dim_swa=32", "n_ff_exp=64", "n_expert=8"};
    static const bad_edit cases[] = {
        {NULL, "blk.1.attn_sinks.weight", NULL, "blk.1.attn_sinks.weight"},
        {NULL, NULL, add_short_pattern, "sliding_window_pattern must have one bool per layer"},
        {"gpt-oss.rope.scaling.yarn_beta_fast", NULL, add_bad_yarn, "beta_fast 0.5 must exceed beta_slow 1"},
        {"gpt-oss.rope.freq_base", NULL, add_nan_base, "RoPE base nan"},
        {"gpt-oss.rope.freq_base", NULL, add_inf_base, "RoPE base inf"},
        {"gpt-oss.attention.layer_norm_rms_epsilon", NULL, add_nan_eps, "norm epsilon nan"},
    };
    check_bad_edits("oss", "gpt-oss-20b", sets, (int)RKM_ARRAY_LEN(sets), cases, (int)RKM_ARRAY_LEN(cases));
}

static void add_big_latent(rkm_gguf_writer *w) { rkm_gguf_writer_set_u32(w, "deepseek2.attention.kv_lora_rank", 512); }
static void add_odd_groups(rkm_gguf_writer *w) { rkm_gguf_writer_set_u32(w, "deepseek2.expert_group_count", 3); }

/* DeepSeek files the converter must refuse with a clear message: a latent
 * rank above the hidden size, expert groups that do not divide the
 * experts, a sigmoid router without its selection bias, a GGUF from before
 * llama.cpp split attn_kv_b, a latent norm of the wrong length. */
static void test_deepseek_bad_files(void)
{
    static const char *const sets[] = {"n_vocab=512", "n_layer=2",     "n_embd=128",       "n_head=4",          "kv_lora_rank=64",
                                       "q_lora_rank=64", "n_ff_exp=64",     "n_ff_shexp=64",     "n_ff=96",
                                       "n_expert=8",    "n_expert_used=2", "n_expert_group=4", "n_group_used=2",
                                       "n_layer_dense_lead=1"};
    static const bad_edit cases[] = {
        {"deepseek2.attention.kv_lora_rank", NULL, add_big_latent, "latent rank 512 out of range (1..hidden size 128)"},
        {"deepseek2.expert_group_count", NULL, add_odd_groups, "3 expert groups do not divide 8 experts"},
        {"blk.1.exp_probs_b.bias", NULL, NULL, "blk.1.exp_probs_b.bias"},
        {"deepseek2.attention.key_length_mla", NULL, NULL, "predates llama.cpp's split attn_k_b / attn_v_b"},
        {NULL, "blk.0.attn_kv_a_norm.weight", NULL, "blk.0.attn_kv_a_norm.weight"},
    };
    check_bad_edits("ds", "deepseek-v3", sets, (int)RKM_ARRAY_LEN(sets), cases, (int)RKM_ARRAY_LEN(cases));
}

static void add_conv0(rkm_gguf_writer *w) { rkm_gguf_writer_set_u32(w, "qwen35moe.ssm.conv_kernel", 0); }
static void add_odd_inner(rkm_gguf_writer *w) { rkm_gguf_writer_set_u32(w, "qwen35moe.ssm.inner_size", 100); }
static void add_odd_heads(rkm_gguf_writer *w) { rkm_gguf_writer_set_u32(w, "qwen35moe.ssm.time_step_rank", 3); }
static void add_interval0(rkm_gguf_writer *w) { rkm_gguf_writer_set_u32(w, "qwen35moe.full_attention_interval", 0); }
static void add_short_sections(rkm_gguf_writer *w)
{
    int32_t sec[4] = {0, 0, 0, 0}; /* no pair turns */
    rkm_gguf_writer_set_arr(w, "qwen35moe.rope.dimension_sections", RKM_GGUF_INT32, sec, 4);
}

/* Qwen3.5 files the converter must refuse with a clear message: a
 * convolution kernel of 0, an inner size that is not the value heads'
 * states, value heads that are not whole groups of key heads, no full
 * attention interval, RoPE sections that are all empty, a state tensor (ssm_a, the gated norm) of the wrong length. */
static void test_qwen35_bad_files(void)
{
    static const char *const sets[] = {"n_vocab=512", "n_layer=4", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                       "rope_dim=16", "n_ff_exp=64", "n_ff_shexp=64", "n_expert=8", "n_expert_used=2",
                                       "ssm_d_state=32", "ssm_n_group=2", "ssm_dt_rank=4", "ssm_d_inner=128"};
    static const bad_edit cases[] = {
        {"qwen35moe.ssm.conv_kernel", NULL, add_conv0, "convolution kernel 0 out of range"},
        {"qwen35moe.ssm.inner_size", NULL, add_odd_inner, "inner size 100 is not 4 value heads of the state size 32"},
        {"qwen35moe.ssm.time_step_rank", NULL, add_odd_heads, "3 value heads are not whole groups of 2 key heads"},
        {"qwen35moe.full_attention_interval", NULL, add_interval0, "full_attention_interval 0 out of range"},
        {"qwen35moe.rope.dimension_sections", NULL, add_short_sections, "every RoPE section is empty"},
        {NULL, "blk.0.ssm_a", NULL, "blk.0.ssm_a"},
        {NULL, "blk.2.ssm_norm.weight", NULL, "blk.2.ssm_norm.weight"},
    };
    check_bad_edits("q35", "qwen3.5-35b-a3b", sets, (int)RKM_ARRAY_LEN(sets), cases, (int)RKM_ARRAY_LEN(cases));
}

/* Qwen3.5's value heads: HF holds them grouped by key head (key head g's
 * value heads j = 0..per-1 together), GGUF tiled (value head j of every
 * key head together); the index maps follow from listing both orders. */
static void test_vhead_order(void)
{
    rkm_hparams hp;
    rkm_hparams_init(&hp, RKM_ARCH_QWEN35MOE);
    const int nk = 2, per = 3, hd = 4, off = 10;
    hp.ssm_n_group = nk;
    hp.ssm_dt_rank = nk * per;
    hp.ssm_d_inner = nk * per * hd;
    int bad = 0;
    for (int t = 0; t < nk * per; t++) {
        int g = t % nk, j = t / nk, h = g * per + j; /* tiled position t holds (g, j); grouped holds it at h */
        for (int w = 0; w < hd; w++) {
            bad += rkm_hf_vhead_index(&hp, off + t * hd + w, off, hd, 1) != off + h * hd + w;
            bad += rkm_hf_vhead_index(&hp, off + h * hd + w, off, hd, 0) != off + t * hd + w;
        }
    }
    for (int i = 0; i < off; i++) bad += rkm_hf_vhead_index(&hp, i, off, hd, 1) != i; /* q and k stay */
    CHECK_MSG(bad == 0, "%d value-head indices misplaced", bad);
    int64_t o, d;
    hp.ssm_d_state = 5;
    CHECK(rkm_hf_vheads(&hp, RKM_TENSOR_SSM_IN, &o, &d) == 1 && o == 2 * nk * 5 && d == hd);
    CHECK(rkm_hf_vheads(&hp, RKM_TENSOR_SSM_OUT, &o, &d) == 2 && o == 0 && d == hd);
    CHECK(rkm_hf_vheads(&hp, RKM_TENSOR_SSM_A, &o, &d) == 2 && d == 1);
    CHECK(rkm_hf_vheads(&hp, RKM_TENSOR_ATTN_Q, &o, &d) == 0);
}

/* config.json of HF directory dir with key (in text_config when nested)
 * set to v (JSON), or removed (v NULL); the error converting it must
 * contain want. */
static void check_hf_config_error(const char *dir, const char *key, const char *v, const char *want)
{
    char cp[1100], out[1100];
    snprintf(cp, sizeof cp, "%s/config.json", dir);
    snprintf(out, sizeof out, "%s-bad.rkmojo", dir);
    size_t n;
    char *js = rkm_read_file(cp, &n), *orig = js ? strdup(js) : NULL;
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!c) c = root;
    CHECK(c != NULL && orig != NULL);
    if (!c || !orig) {
        cJSON_Delete(root);
        free(orig);
        return;
    }
    cJSON_DeleteItemFromObject(c, key);
    if (v) cJSON_AddItemToObject(c, key, cJSON_Parse(v));
    char *txt = cJSON_Print(root);
    CHECK(write_str(cp, txt) == 0);
    rkm_convert_opts co = {.quant = "keep"};
    CHECK_MSG(rkm_convert(dir, out, &co) != 0 && strstr(rkm_last_error(), want), "%s=%s: '%s', want '%s'", key,
              v ? v : "(none)", rkm_last_error(), want);
    CHECK(write_str(cp, orig) == 0);
    free(txt);
    free(orig);
    cJSON_Delete(root);
}

/* The hybrids from their safetensors: Qwen3.5-MoE as published (text
 * model under model.language_model., experts fused, a vision tower and an
 * MTP block beside it), Qwen3.5 dense, Qwen3-Next (q, k, v and z in one
 * projection), LFM2 dense and MoE, Granite 4.0-H with experts and dense:
 * each converts to the model its GGUF gives; bad configs are refused by
 * name. */
static void test_hybrid_hf(void)
{
    static const char *const q35[] = {"n_vocab=512", "n_layer=4", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                      "rope_dim=16", "n_ff_exp=64", "n_ff_shexp=64", "n_expert=8", "n_expert_used=2",
                                      "ssm_d_state=32", "ssm_n_group=2", "ssm_dt_rank=4", "ssm_d_inner=128"};
    static const char *const q35d[] = {"n_vocab=512", "n_layer=4", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                       "rope_dim=16", "n_ff=128", "ssm_d_state=32", "ssm_n_group=2", "ssm_dt_rank=4",
                                       "ssm_d_inner=128"};
    static const char *const next[] = {"n_vocab=512", "n_layer=4", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                       "rope_dim=16", "n_ff_exp=64", "n_ff_shexp=64", "n_expert=8", "n_expert_used=2",
                                       "ssm_d_state=32", "ssm_n_group=2", "ssm_dt_rank=8", "ssm_d_inner=256",
                                       "ssm_fused_in=1"};
    check_hf_equivalence("qwen3.5-35b-a3b", q35, (int)RKM_ARRAY_LEN(q35));
    check_hf_equivalence("qwen3.5-27b", q35d, (int)RKM_ARRAY_LEN(q35d));
    check_hf_equivalence("qwen3-next-80b-a3b", next, (int)RKM_ARRAY_LEN(next));
    char hf[1024];
    snprintf(hf, sizeof hf, "%s/eq-%s-hf", test_tmpdir(), "qwen3.5-35b-a3b");
    check_hf_config_error(hf, "linear_value_head_dim", "16", "linear_value_head_dim 16 differs from linear_key_head_dim 32");
    check_hf_config_error(hf, "linear_conv_kernel_dim", NULL, "linear_conv_kernel_dim (2 or more)");
    check_hf_config_error(hf, "layer_types", "[\"linear_attention\", \"mamba\", \"linear_attention\", \"full_attention\"]",
                          "layer_types[1] is not linear_attention or full_attention");
    check_hf_config_error(hf, "linear_num_value_heads", "3", "3 value heads are not whole groups of 2 key heads");
    check_hf_config_error(hf, "attn_output_gate", "false", "attn_output_gate false is not supported");
    check_hf_config_error(hf, "moe_intermediate_size", "32", "mlp.experts.gate_up_proj: expected [experts, 2 x width, hidden]");

    /* LFM2 (its dense width from block_ff_dim through llama.cpp's
     * adjustment) and LFM2-8B-A1B; Granite 4.0-H with routed experts and
     * dense (the shared MLP as its FFN) */
    static const char *const lfm2[] = {"n_vocab=512", "n_layer=4", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                       "rope_dim=32", "n_ff=128"};
    static const char *const lfm2moe[] = {"n_vocab=512", "n_layer=4", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32",
                                          "head_dim_v=32", "rope_dim=32", "n_ff=128", "n_ff_exp=64", "n_expert=8",
                                          "n_expert_used=2"};
    static const char *const gr[] = {"n_vocab=512", "n_layer=6", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                     "n_ff_exp=64", "n_ff_shexp=64", "n_expert=8", "n_expert_used=2", "ssm_d_state=32",
                                     "ssm_n_group=2", "ssm_dt_rank=8", "ssm_d_inner=256"};
    static const char *const grd[] = {"n_vocab=512", "n_layer=6", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                      "n_ff=96", "n_ff_exp=0", "n_ff_shexp=0", "n_expert=0", "n_expert_used=0",
                                      "ssm_d_state=32", "ssm_n_group=2", "ssm_dt_rank=8", "ssm_d_inner=256"};
    check_hf_equivalence("lfm2-1.2b", lfm2, (int)RKM_ARRAY_LEN(lfm2));
    check_hf_equivalence("lfm2-8b-a1b", lfm2moe, (int)RKM_ARRAY_LEN(lfm2moe));
    check_hf_equivalence("granite-4.0-h-tiny", gr, (int)RKM_ARRAY_LEN(gr));
    snprintf(hf, sizeof hf, "%s/eq-%s-hf", test_tmpdir(), "lfm2-1.2b");
    check_hf_config_error(hf, "conv_L_cache", "1", "conv_L_cache 1: a convolution needs a kernel of 2 or more");
    check_hf_config_error(hf, "layer_types", "[\"conv\", \"mamba\", \"conv\", \"full_attention\"]",
                          "layer_types[1] is not conv or full_attention");
    check_hf_config_error(hf, "block_ff_dim", "300", "blk.0.ffn_gate.weight' has shape [128, 128, 1], the hyper-parameters imply [128, 256, 1]");
    snprintf(hf, sizeof hf, "%s/eq-%s-hf", test_tmpdir(), "granite-4.0-h-tiny");
    check_hf_config_error(hf, "mamba_d_head", "16", "mamba_n_heads 8 x mamba_d_head 16 is not mamba_expand x hidden_size 256");
    check_hf_config_error(hf, "mamba_conv_bias", "false", "mamba_conv_bias true and mamba_proj_bias false");
    check_hf_config_error(hf, "layer_types", "[\"mamba\"]", "layer_types needs one entry per layer (6)");
    check_hf_config_error(hf, "shared_intermediate_size", "32", "shared_mlp.input_linear.weight: expected [2 x width, hidden]");
    check_hf_equivalence("granite-4.0-h-tiny", grd, (int)RKM_ARRAY_LEN(grd));
}

/* ------------------------------------------------ recommended sampling */

static void add_sampling_keys(rkm_gguf_writer *w)
{
    rkm_gguf_writer_set_f32(w, "general.sampling.temp", 0.7f);
    rkm_gguf_writer_set_i32(w, "general.sampling.top_k", 20);
    rkm_gguf_writer_set_f32(w, "general.sampling.top_p", 0.8f);
    rkm_gguf_writer_set_f32(w, "general.sampling.penalty_repeat", 1.1f);
    rkm_gguf_writer_set_i32(w, "general.sampling.penalty_last_n", 32);
}

/* A copy of GGUF `in` with extra general.sampling.* keys. */
static int gguf_with_sampling(const char *in, const char *out) { return gguf_edit(in, out, NULL, NULL, add_sampling_keys); }

/* What the converted model recommends, as the runtime lays it over the defaults. */
static int model_sampling(const char *dir, rkm_sampler_params *sp)
{
    rkm_model *m = rkm_model_open(dir, NULL);
    if (!m) return -1;
    rkm_sampler_params_for_model(m, sp);
    rkm_model_close(m);
    return 0;
}

/* The authors' sampling settings travel from generation_config.json and
 * from GGUF general.sampling.* through the manifest to
 * rkm_sampler_params_for_model; a model without them gets the defaults;
 * out-of-range or mistyped values are refused. */
static void test_sampling_hints(void)
{
    char gg[1024], hf[1024], gen[1100], m[1024], gg2[1024];
    snprintf(gg, sizeof gg, "%s/sm.gguf", test_tmpdir());
    snprintf(hf, sizeof hf, "%s/sm-hf", test_tmpdir());
    snprintf(gen, sizeof gen, "%s/generation_config.json", hf);
    snprintf(m, sizeof m, "%s/sm.rkmojo", test_tmpdir());
    snprintf(gg2, sizeof gg2, "%s/sm2.gguf", test_tmpdir());
    rkm_synth_opts o = {.preset = "tiny", .seed = 5, .dtype = RKM_TYPE_F32, .hf_out = hf};
    CHECK_MSG(rkm_synth(&o, gg) == 0, "synth: %s", rkm_last_error());
    rkm_convert_opts c = {.quant = "keep"};
    rkm_sampler_params def, sp;
    rkm_sampler_params_default(&def);

    /* none: the defaults, and no "sampling" in the manifest */
    CHECK_MSG(rkm_convert(gg, m, &c) == 0, "%s", rkm_last_error());
    rkm_model_dir *md = rkm_model_dir_load_manifest(m);
    CHECK(md && md->sampling.set == 0);
    rkm_model_dir_close(md);
    CHECK(model_sampling(m, &sp) == 0 && !memcmp(&sp, &def, sizeof sp));

    /* generation_config.json */
    CHECK(write_str(gen, "{\"temperature\": 0.6, \"top_k\": 20, \"top_p\": 0.95, \"min_p\": 0.0,"
                         " \"repetition_penalty\": 1.05, \"do_sample\": true, \"bos_token_id\": 1}") == 0);
    CHECK_MSG(rkm_convert(hf, m, &c) == 0, "%s", rkm_last_error());
    md = rkm_model_dir_load_manifest(m);
    CHECK(md && md->sampling.set == (RKM_SAMPLING_TEMPERATURE | RKM_SAMPLING_TOP_K | RKM_SAMPLING_TOP_P |
                                     RKM_SAMPLING_MIN_P | RKM_SAMPLING_REPEAT_PENALTY));
    rkm_model_dir_close(md);
    CHECK(model_sampling(m, &sp) == 0);
    CHECK(sp.temperature == 0.6f && sp.top_k == 20 && sp.top_p == 0.95f && sp.min_p == 0.0f &&
          sp.repeat_penalty == 1.05f && sp.repeat_last_n == def.repeat_last_n && sp.seed == def.seed);
    size_t n;
    char path[1100];
    snprintf(path, sizeof path, "%s/manifest.json", m);
    char *js = rkm_read_file(path, &n);
    CHECK(js && strstr(js, "\"temperature\":\t0.6") && strstr(js, "\"top_p\":\t0.95"));
    free(js);
    /* do_sample false: the authors decode greedily */
    CHECK(write_str(gen, "{\"do_sample\": false, \"top_k\": 50}") == 0);
    CHECK_MSG(rkm_convert(hf, m, &c) == 0, "%s", rkm_last_error());
    CHECK(model_sampling(m, &sp) == 0 && sp.temperature == 0.0f && sp.top_k == 50 && sp.top_p == def.top_p);
    /* refused: out of range, not a number, not an object */
    CHECK(write_str(gen, "{\"top_p\": 2}") == 0);
    CHECK(rkm_convert(hf, m, &c) != 0 && strstr(rkm_last_error(), "top_p"));
    CHECK(write_str(gen, "{\"temperature\": \"hot\"}") == 0);
    CHECK(rkm_convert(hf, m, &c) != 0 && strstr(rkm_last_error(), "temperature"));
    CHECK(write_str(gen, "[1, 2]") == 0);
    CHECK(rkm_convert(hf, m, &c) != 0 && strstr(rkm_last_error(), "generation_config.json"));
    unlink(gen);

    /* GGUF general.sampling.* */
    CHECK_MSG(gguf_with_sampling(gg, gg2) == 0, "%s", rkm_last_error());
    CHECK_MSG(rkm_convert(gg2, m, &c) == 0, "%s", rkm_last_error());
    CHECK(model_sampling(m, &sp) == 0);
    CHECK(sp.temperature == 0.7f && sp.top_k == 20 && sp.top_p == 0.8f && sp.min_p == def.min_p &&
          sp.repeat_penalty == 1.1f && sp.repeat_last_n == 32);
    /* a manifest edited out of range is refused at open */
    js = rkm_read_file(path, &n);
    char *at = js ? strstr(js, "\"top_k\":\t20") : NULL;
    CHECK(at != NULL);
    if (at) {
        memcpy(at, "\"top_k\":\t-2", 11);
        CHECK(write_str(path, js) == 0);
        CHECK(rkm_model_dir_load_manifest(m) == NULL && strstr(rkm_last_error(), "top_k"));
    }
    free(js);
}

/* Counts "%d" in a template. */
static int n_slots(const char *t)
{
    int n = 0;
    for (const char *p = t; (p = strstr(p, "%d")); p += 2) n++;
    return n;
}

/* The architecture tables: every arch's roles, GGUF and HF names are
 * unique, templates have the right slots and format, defaults name real
 * fields; for every tensor of every preset, GGUF -> HF -> GGUF round-trips
 * (every HF spelling), and the GGUF name finds its row again. */
static void test_arch_tables(void)
{
    for (int arch = 1; arch < RKM_ARCH_COUNT; arch++) {
        const rkm_arch_info *a = rkm_arch_info_of(arch);
        CHECK(a != NULL);
        if (!a) continue;
        CHECK_EQ_INT(rkm_arch_from_name(a->name), arch);
        /* (a GGUF-only architecture has no HF model type) */
        CHECK(!a->hf_model_type[0] || rkm_arch_from_hf(a->hf_model_type[0], NULL, arch == RKM_ARCH_MIXTRAL) == arch);
        rkm_hparams hp;
        for (int i = 0; i < RKM_ARCH_MAX_DEFAULTS && a->defaults[i].field; i++)
            CHECK_MSG(rkm_hparams_set(&hp, a->defaults[i].field, "0") == 0, "%s: default %s", a->name, a->defaults[i].field);
        for (int i = 0; i < RKM_ARCH_MAX_KEYS && a->keys[i].field; i++)
            CHECK_MSG(rkm_hparams_set(&hp, a->keys[i].field, "0") == 0, "%s: key %s", a->name, a->keys[i].field);
        for (int i = 0; i < a->n_tensors; i++) {
            const rkm_tensor_info *t = &a->tensors[i];
            int want = t->layers == RKM_LAYERS_GLOBAL ? 0 : 1;
            CHECK_MSG(n_slots(t->gguf) == want, "%s: %s", a->name, t->gguf);
            CHECK_MSG(!t->gguf_split || n_slots(t->gguf_split) == 2, "%s: %s", a->name, t->gguf_split);
            CHECK_MSG(!t->gguf_split || rkm_tensor_role_is_expert(t->role), "%s: %s", a->name, t->gguf);
            CHECK_MSG(t->n_dims >= 1 && t->n_dims <= 3, "%s: %s", a->name, t->gguf);
            for (int k = 0; k < RKM_ARCH_MAX_HF && t->hf[k]; k++)
                CHECK_MSG(n_slots(t->hf[k]) == want + (t->gguf_split ? 1 : 0), "%s: %s", a->name, t->hf[k]);
            char b1[128], b2[128];
            CHECK(rkm_arch_format(t->gguf, 17, 3, b1, sizeof b1) == 0);
            CHECK(rkm_arch_format(t->gguf, 17, 3, b2, 8) != 0 || strlen(b1) < 8);
            int il, e;
            CHECK_MSG(rkm_arch_tensor_by_gguf(arch, b1, &il, &e) == t && il == (want ? 17 : -1), "%s: %s", a->name, b1);
            CHECK(rkm_arch_tensor(arch, t->role) == t);
            for (int j = 0; j < i; j++) {
                const rkm_tensor_info *u = &a->tensors[j];
                CHECK_MSG(u->role != t->role, "%s: role of %s twice", a->name, t->gguf);
                CHECK_MSG(strcmp(u->gguf, t->gguf), "%s: %s twice", a->name, t->gguf);
                for (int k = 0; k < RKM_ARCH_MAX_HF && t->hf[k]; k++)
                    for (int q = 0; q < RKM_ARCH_MAX_HF && u->hf[q]; q++)
                        CHECK_MSG(strcmp(u->hf[q], t->hf[k]), "%s: %s twice", a->name, t->hf[k]);
            }
        }
    }
    CHECK_EQ_INT(rkm_arch_from_gguf_name("llama", 0), RKM_ARCH_LLAMA);
    CHECK_EQ_INT(rkm_arch_from_gguf_name("llama", 1), RKM_ARCH_MIXTRAL);
    CHECK_EQ_INT(rkm_arch_from_gguf_name("mixtral", 1), RKM_ARCH_MIXTRAL);
    CHECK_EQ_INT(rkm_arch_from_gguf_name("gpt2", 0), RKM_ARCH_UNKNOWN);
    CHECK_EQ_INT(rkm_arch_from_hf(NULL, "Qwen3MoeForCausalLM", 1), RKM_ARCH_QWEN3MOE);
    CHECK_EQ_INT(rkm_arch_from_hf("gemma4_text", NULL, 1), RKM_ARCH_GEMMA4);

    int n_round = 0;
    for (const char *const *pn = rkm_synth_preset_names(); *pn; pn++) {
        rkm_hparams hp;
        CHECK(rkm_synth_preset(*pn, &hp) == 0);
        const rkm_arch_info *a = rkm_arch_info_of(hp.arch);
        for (int il = -1; il < hp.n_layer; il++)
            for (int i = 0; i < a->n_tensors; i++) {
                const rkm_tensor_info *t = &a->tensors[i];
                if (!rkm_hparams_tensor_expected(&hp, t, il)) continue;
                int64_t ne[3];
                CHECK(rkm_hparams_tensor_ne(&hp, t, il, ne) == t->n_dims && ne[0] > 0 && ne[1] > 0 && ne[2] > 0);
                char g[128], want[128];
                CHECK(rkm_arch_format(t->gguf, il, 0, g, sizeof g) == 0);
                CHECK(rkm_arch_format(t->gguf_split ? t->gguf_split : t->gguf, il, 2, want, sizeof want) == 0);
                char *hf = rkm_gguf_name_to_hf(hp.arch, g, 2);
                CHECK_MSG((hf != NULL) == (t->hf[0] != NULL), "%s: %s", *pn, g);
                for (int k = 0; hf && k < RKM_ARCH_MAX_HF && t->hf[k]; k++) {
                    char alt[256];
                    CHECK(rkm_arch_format(t->hf[k], il, 2, alt, sizeof alt) == 0);
                    int perm;
                    char *back = rkm_hf_name_to_gguf(hp.arch, k ? alt : hf, &hp, &perm);
                    CHECK_MSG(back && !strcmp(back, want), "%s: %s -> %s -> %s", *pn, g, k ? alt : hf, back ? back : "NULL");
                    CHECK_MSG(!perm == !(a->hf_rope_permute && (t->role == RKM_TENSOR_ATTN_Q || t->role == RKM_TENSOR_ATTN_K)),
                              "%s: permutation of %s", *pn, g);
                    free(back);
                    n_round++;
                }
                free(hf);
            }
    }
    CHECK(n_round > 500);
    rkm_hparams hq, hg;
    CHECK(rkm_synth_preset("qwen2moe-a2.7b", &hq) == 0 && rkm_synth_preset("tiny-gemma4", &hg) == 0);
    CHECK(rkm_hparams_tensor_required(&hq, rkm_arch_tensor(hq.arch, RKM_TENSOR_ATTN_Q), 0));
    CHECK(rkm_hparams_tensor_required(&hq, rkm_arch_tensor(hq.arch, RKM_TENSOR_FFN_GATE_INP_SHEXP), 0));
    hq.shexp_gate = 0;
    CHECK(!rkm_hparams_tensor_required(&hq, rkm_arch_tensor(hq.arch, RKM_TENSOR_FFN_GATE_INP_SHEXP), 0));
    CHECK(rkm_hparams_tensor_expected(&hg, rkm_arch_tensor(hg.arch, RKM_TENSOR_LAYER_OUT_SCALE), 0));
    CHECK(!rkm_hparams_tensor_required(&hg, rkm_arch_tensor(hg.arch, RKM_TENSOR_LAYER_OUT_SCALE), 0));
    CHECK(!rkm_hparams_tensor_expected(&hg, rkm_arch_tensor(hg.arch, RKM_TENSOR_ATTN_V), 5)); /* full layer: V = K */
    CHECK(rkm_hparams_tensor_expected(&hg, rkm_arch_tensor(hg.arch, RKM_TENSOR_ATTN_V), 0));
}

/* A one-layer llama GGUF with these rope.scaling keys (NULL-terminated
 * key, kind 's'tring / 'f'loat / 'u'int, value triples), its hparams read
 * into hp: the reader's result. */
static int rope_gguf(rkm_hparams *hp, const char *const *kv)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/rope.gguf", test_tmpdir());
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    rkm_gguf_writer_set_str(w, "general.architecture", "llama");
    rkm_gguf_writer_set_u32(w, "llama.block_count", 1);
    rkm_gguf_writer_set_u32(w, "llama.embedding_length", 32);
    rkm_gguf_writer_set_u32(w, "llama.attention.head_count", 2);
    rkm_gguf_writer_set_u32(w, "llama.feed_forward_length", 64);
    rkm_gguf_writer_set_u32(w, "llama.context_length", 8192);
    for (int i = 0; kv[i]; i += 3) {
        if (kv[i + 1][0] == 's') rkm_gguf_writer_set_str(w, kv[i], kv[i + 2]);
        else if (kv[i + 1][0] == 'f') rkm_gguf_writer_set_f32(w, kv[i], strtof(kv[i + 2], NULL));
        else rkm_gguf_writer_set_u32(w, kv[i], (uint32_t)atoi(kv[i + 2]));
    }
    int64_t ne[2] = {32, 8};
    float zero[32 * 8] = {0};
    int rc = rkm_gguf_writer_add_tensor(w, "token_embd.weight", RKM_TYPE_F32, 2, ne);
    if (!rc) rc = rkm_gguf_writer_begin(w, path);
    if (!rc) rc = rkm_gguf_writer_write_data(w, zero, sizeof zero);
    if (!rc) rc = rkm_gguf_writer_finish(w);
    rkm_gguf_writer_free(w);
    if (rc) return rc;
    rkm_gguf *g = rkm_gguf_open(path);
    if (!g) return RKM_EFORMAT;
    rc = rkm_hparams_from_gguf(g, hp);
    rkm_gguf_close(g);
    return rc;
}

/* RoPE scaling from GGUF: the keys llama.cpp reads, and clear errors for
 * a type it has that rkmojo lacks or YaRN parameters that contradict. */
static void test_rope_scaling(void)
{
    rkm_hparams hp;
    const char *none[] = {NULL};
    CHECK(rope_gguf(&hp, none) == 0 && hp.rope_scaling == RKM_ROPE_SCALING_NONE && hp.rope_freq_scale == 1.0f);
    const char *lin[] = {"llama.rope.scaling.type", "s", "linear", "llama.rope.scaling.factor", "f", "4", NULL};
    CHECK(rope_gguf(&hp, lin) == 0 && hp.rope_scaling == RKM_ROPE_SCALING_LINEAR && hp.rope_freq_scale == 0.25f);
    const char *old[] = {"llama.rope.scale_linear", "f", "2", NULL}; /* the older key: linear */
    CHECK(rope_gguf(&hp, old) == 0 && hp.rope_scaling == RKM_ROPE_SCALING_LINEAR && hp.rope_freq_scale == 0.5f);
    const char *off[] = {"llama.rope.scaling.type", "s", "none", "llama.rope.scaling.factor", "f", "4", NULL};
    CHECK(rope_gguf(&hp, off) == 0 && hp.rope_scaling == RKM_ROPE_SCALING_NONE && hp.rope_freq_scale == 1.0f);
    const char *yarn[] = {"llama.rope.scaling.type", "s", "yarn", "llama.rope.scaling.factor", "f", "32",
                          "llama.rope.scaling.original_context_length", "u", "256",
                          "llama.rope.scaling.yarn_beta_fast", "f", "16", "llama.rope.scaling.yarn_log_multiplier", "f",
                          "0.1", "llama.rope.scaling.attn_factor", "f", "1.5", NULL};
    CHECK(rope_gguf(&hp, yarn) == 0 && hp.rope_scaling == RKM_ROPE_SCALING_YARN && hp.rope_freq_scale == 1.0f / 32 &&
          hp.rope_orig_ctx == 256 && hp.yarn_beta_fast == 16 && hp.yarn_beta_slow == 1 && hp.yarn_log_mul == 0.1f &&
          hp.rope_attn_factor == 1.5f);
    const char *lr[] = {"llama.rope.scaling.type", "s", "longrope", NULL};
    CHECK(rope_gguf(&hp, lr) == RKM_EUNSUPPORTED && strstr(rkm_last_error(), "RoPE scaling 'longrope' is not supported"));
    const char *shrink[] = {"llama.rope.scaling.type", "s", "yarn", "llama.rope.scaling.factor", "f", "0.5", NULL};
    CHECK(rope_gguf(&hp, shrink) == RKM_EFORMAT && strstr(rkm_last_error(), "YaRN: factor 0.5 is under 1"));
    const char *beta[] = {"llama.rope.scaling.type", "s", "yarn", "llama.rope.scaling.factor", "f", "4",
                          "llama.rope.scaling.yarn_beta_fast", "f", "0.5", NULL};
    CHECK(rope_gguf(&hp, beta) == RKM_EFORMAT && strstr(rkm_last_error(), "beta_fast 0.5 must exceed beta_slow 1"));
    const char *ctx[] = {"llama.rope.scaling.type", "s", "yarn", "llama.rope.scaling.factor", "f", "4",
                         "llama.rope.scaling.original_context_length", "u", "16384", NULL};
    CHECK(rope_gguf(&hp, ctx) == RKM_EFORMAT && strstr(rkm_last_error(), "original context 16384"));
    const char *neg[] = {"llama.rope.scaling.type", "s", "linear", "llama.rope.scaling.factor", "f", "-2", NULL};
    CHECK(rope_gguf(&hp, neg) == RKM_EFORMAT && strstr(rkm_last_error(), "is not a factor"));
}

/* GLM-4.5's next-token-prediction block (nextn_predict_layers): the same
 * GGUF with one more block (a copy of the last with the nextn.* tensors
 * llama.cpp's converter writes) converts to the same files: the block is
 * neither in n_layer nor stored. */
static void test_nextn_skipped(void)
{
    const char *tmp = test_tmpdir();
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/glm.gguf", tmp);
    snprintf(b, sizeof b, "%s/glm-nextn.gguf", tmp);
    int rc = test_rkmojo(NULL, "synth --preset glm-4.5-air -o %s --set n_vocab=512 --set n_layer=2 --set n_embd=128 --set n_head=4 "
                               "--set n_head_kv=2 --set n_ff_exp=64 --set n_ff_shexp=64 --set n_ff=128 --set n_expert=8 "
                               "--dtype q8_0 --quiet", a);
    CHECK_MSG(rc == 0, "synth glm-4.5-air: %d", rc);
    rkm_gguf *g = rc ? NULL : rkm_gguf_open(a);
    if (!g) return;
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    for (int i = 0; i < rkm_gguf_n_kv(g); i++)
        if (strcmp(rkm_gguf_key(g, i), "glm4moe.block_count") && strcmp(rkm_gguf_key(g, i), "glm4moe.nextn_predict_layers"))
            rkm_gguf_writer_copy_kv(w, g, i);
    rkm_gguf_writer_set_u32(w, "glm4moe.block_count", 3);
    rkm_gguf_writer_set_u32(w, "glm4moe.nextn_predict_layers", 1);
    int n = rkm_gguf_n_tensors(g), n_extra = 0;
    const rkm_gguf_tensor *src[256];
    for (int i = 0; i < n; i++) {
        const rkm_gguf_tensor *t = rkm_gguf_tensor_at(g, i);
        CHECK(rkm_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne) == 0);
        src[i] = t;
    }
    for (int i = 0; i < n; i++) { /* block 2 = block 1's tensors */
        const rkm_gguf_tensor *t = rkm_gguf_tensor_at(g, i);
        if (strncmp(t->name, "blk.1.", 6) || n + n_extra >= 250) continue;
        char nm[128];
        snprintf(nm, sizeof nm, "blk.2.%s", t->name + 6);
        CHECK(rkm_gguf_writer_add_tensor(w, nm, t->type, t->n_dims, t->ne) == 0);
        src[n + n_extra++] = t;
    }
    int64_t eh[2] = {256, 128}, v[1] = {128};
    CHECK(rkm_gguf_writer_add_tensor(w, "blk.2.nextn.eh_proj.weight", RKM_TYPE_F32, 2, eh) == 0);
    CHECK(rkm_gguf_writer_add_tensor(w, "blk.2.nextn.enorm.weight", RKM_TYPE_F32, 1, v) == 0);
    CHECK(rkm_gguf_writer_add_tensor(w, "blk.2.nextn.hnorm.weight", RKM_TYPE_F32, 1, v) == 0);
    CHECK(rkm_gguf_writer_begin(w, b) == 0);
    for (int i = 0; i < n + n_extra; i++) {
        void *d = malloc(src[i]->nbytes);
        CHECK(d && rkm_gguf_read(g, src[i], 0, d, src[i]->nbytes) == 0);
        CHECK(rkm_gguf_writer_write_data(w, d, src[i]->nbytes) == 0);
        free(d);
    }
    float *z = calloc(256 * 128, sizeof(float));
    CHECK(rkm_gguf_writer_write_data(w, z, sizeof(float) * 256 * 128) == 0);
    CHECK(rkm_gguf_writer_write_data(w, z, sizeof(float) * 128) == 0);
    CHECK(rkm_gguf_writer_write_data(w, z, sizeof(float) * 128) == 0);
    free(z);
    CHECK(rkm_gguf_writer_finish(w) == 0);
    rkm_gguf_writer_free(w);
    rkm_gguf_close(g);
    rc = test_rkmojo(NULL, "convert %s %s/glm.rkmojo --quant keep --quiet", a, tmp);
    if (!rc) rc = test_rkmojo(NULL, "convert %s %s/glm-nextn.rkmojo --quant keep --quiet", b, tmp);
    CHECK_MSG(rc == 0, "convert: %d", rc);
    char d1[700], d2[700];
    snprintf(d1, sizeof d1, "%s/glm.rkmojo", tmp);
    snprintf(d2, sizeof d2, "%s/glm-nextn.rkmojo", tmp);
    rkm_model_dir *m1 = rkm_model_dir_load_manifest(d1), *m2 = rkm_model_dir_load_manifest(d2);
    CHECK(m1 && m2);
    if (m1 && m2) {
        CHECK_EQ_INT(m2->hp.n_layer, 2);
        CHECK_EQ_INT(m2->n_tensors, m1->n_tensors);
        CHECK_EQ_INT(m2->n_expert_layers, m1->n_expert_layers);
        for (int i = 0; i < m2->n_tensors; i++) CHECK_MSG(strncmp(m2->tensors[i].name, "blk.2.", 6), "%s stored", m2->tensors[i].name);
    }
    rkm_model_dir_close(m1);
    rkm_model_dir_close(m2);
    CHECK(test_sh("cmp -s '%s/resident.bin' '%s/resident.bin' && diff -r '%s/experts' '%s/experts' >/dev/null", d1, d2, d1, d2) == 0);
}

static void add_unknown_proj(rkm_gguf_writer *w) { rkm_gguf_writer_set_str(w, "clip.projector_type", "llava9000"); }
static void add_gelu_silu(rkm_gguf_writer *w)
{
    rkm_gguf_writer_set_bool(w, "clip.use_gelu", 1);
    rkm_gguf_writer_set_bool(w, "clip.use_silu", 1);
}
static void add_three_heads(rkm_gguf_writer *w) { rkm_gguf_writer_set_u32(w, "clip.vision.attention.head_count", 3); }
static void add_short_mean(rkm_gguf_writer *w)
{
    const float m[2] = {0.5f, 0.5f};
    rkm_gguf_writer_set_arr(w, "clip.vision.image_mean", RKM_GGUF_FLOAT32, m, 2);
}
static void add_zero_std(rkm_gguf_writer *w)
{
    const float m[3] = {0.5f, 0.0f, 0.5f};
    rkm_gguf_writer_set_arr(w, "clip.vision.image_std", RKM_GGUF_FLOAT32, m, 3);
}
static void add_merge_20(rkm_gguf_writer *w) { rkm_gguf_writer_set_u32(w, "clip.vision.projector.scale_factor", 20); }

/* The mmproj reader (format/vision.c) on synth's Gemma 4 vision tower:
 * the parameters as mtmd derives them (its defaults included), every
 * tensor of the table at its shape; edits refused naming the key or the
 * tensor; the optional standardisation tensors may be absent; the resize
 * rule on hand-worked sizes. llama.cpp loading the same files is
 * tests/test-vision-ref.sh. */
static void test_mmproj(void)
{
    char gg[1024], mm[1024], bad[1024];
    snprintf(gg, sizeof gg, "%s/vis.gguf", test_tmpdir());
    snprintf(mm, sizeof mm, "%s/vis-mmproj.gguf", test_tmpdir());
    snprintf(bad, sizeof bad, "%s/vis-bad.gguf", test_tmpdir());
    rkm_synth_opts o = {.preset = "tiny-gemma4", .seed = 5, .dtype = RKM_TYPE_F16, .mmproj_out = mm};
    CHECK_MSG(rkm_synth(&o, gg) == 0, "%s", rkm_last_error());
    rkm_gguf *g = rkm_gguf_open(mm);
    CHECK(g != NULL);
    if (!g) return;
    CHECK_STR_EQ(rkm_gguf_get_str(g, "general.architecture"), "clip");
    rkm_vision_hparams vp;
    CHECK_MSG(rkm_vision_read(g, &vp) == 0, "%s", rkm_last_error());
    CHECK_EQ_INT(vp.proj, RKM_PROJ_GEMMA4V);
    CHECK_EQ_INT(vp.n_embd, 64);
    CHECK_EQ_INT(vp.n_layer, 2);
    CHECK_EQ_INT(vp.n_head, 2);
    CHECK_EQ_INT(vp.head_dim, 32);
    CHECK_EQ_INT(vp.n_ff, 128);
    CHECK_EQ_INT(vp.proj_dim, 128); /* the text model's width */
    CHECK_EQ_INT(vp.n_merge, 3);
    CHECK_EQ_INT(vp.n_pos, 512);
    CHECK_EQ_INT(vp.ffn, RKM_VFFN_GELU_QUICK); /* no clip.use_gelu: mtmd's default */
    CHECK_EQ_INT(vp.min_pixels, 40 * 48 * 48);
    CHECK_EQ_INT(vp.max_pixels, 280 * 48 * 48);
    CHECK_NEAR(vp.rope_theta, 100.0, 0);
    CHECK_NEAR(vp.eps, 1e-6, 1e-12);
    const rkm_gguf_tensor *t = rkm_gguf_tensor_find(g, "v.blk.1.ffn_gate.weight");
    CHECK(t && t->type == RKM_TYPE_F16 && t->ne[0] == 64 && t->ne[1] == 128);
    t = rkm_gguf_tensor_find(g, "v.position_embd.weight");
    CHECK(t && t->type == RKM_TYPE_F32 && t->ne[0] == 64 && t->ne[1] == 512 && t->ne[2] == 2);
    t = rkm_gguf_tensor_find(g, "mm.input_projection.weight");
    CHECK(t && t->ne[0] == 64 && t->ne[1] == 128);
    rkm_gguf_close(g);
    /* smart resize: 320x240 is under 40 tokens of 48x48: scaled up to 384x288 (8 x 6) */
    int tw, th;
    CHECK_EQ_INT(rkm_vision_fit(&vp, 320, 240, &tw, &th), 48);
    CHECK(tw == 384 && th == 288);
    CHECK_EQ_INT(rkm_vision_fit(&vp, 1000, 1000, &tw, &th), 256); /* 21 x 21 = 441 > 280: floored to 16 x 16 */
    CHECK(tw == 768 && th == 768);
    CHECK_EQ_INT(rkm_vision_fit(&vp, 480, 480, &tw, &th), 100);
    static const struct {
        const char *drop, *shrink;
        void (*add)(rkm_gguf_writer *);
        const char *msg;
    } cases[] = {
        {"v.blk.1.ffn_down.weight", NULL, NULL, "tensor v.blk.1.ffn_down.weight missing"},
        {NULL, "v.blk.0.attn_q_norm.weight", NULL, "v.blk.0.attn_q_norm.weight has shape [31"},
        {"clip.vision.block_count", NULL, NULL, "clip.vision.block_count missing"},
        {"clip.projector_type", NULL, add_unknown_proj, "projector type 'llava9000' is not supported"},
        {"clip.has_vision_encoder", NULL, NULL, "no vision encoder"},
        {NULL, NULL, add_gelu_silu, "both clip.use_gelu and clip.use_silu"},
        {"clip.vision.attention.head_count", NULL, add_three_heads, "head size 21"},
        {"clip.vision.image_mean", NULL, add_short_mean, "image_mean must be an array of at least 3 floats"},
        {"clip.vision.image_std", NULL, add_zero_std, "image_std[1] is 0"},
        {NULL, NULL, add_merge_20, "scale_factor = 20, outside 1..16"},
        {"v.position_embd.weight", NULL, NULL, "v.position_embd.weight missing"},
        {"v.std_bias", NULL, NULL, NULL}, /* optional */
    };
    for (size_t i = 0; i < RKM_ARRAY_LEN(cases); i++) {
        CHECK(gguf_edit(mm, bad, cases[i].drop, cases[i].shrink, cases[i].add) == 0);
        g = rkm_gguf_open(bad);
        CHECK(g != NULL);
        if (!g) continue;
        int rc = rkm_vision_read(g, &vp);
        if (cases[i].msg)
            CHECK_MSG(rc != 0 && strstr(rkm_last_error(), cases[i].msg), "case %zu: %d %s", i, rc, rkm_last_error());
        else
            CHECK_MSG(rc == 0, "case %zu: %s", i, rkm_last_error());
        rkm_gguf_close(g);
    }
    /* a preset without a vision tower is refused before anything is written */
    char t2[1024];
    snprintf(t2, sizeof t2, "%s/novis.gguf", test_tmpdir());
    rkm_synth_opts o2 = {.preset = "tiny", .seed = 5, .dtype = RKM_TYPE_F32, .mmproj_out = mm};
    CHECK(rkm_synth(&o2, t2) != 0 && strstr(rkm_last_error(), "preset 'tiny' has no vision tower"));
    CHECK(access(t2, F_OK) != 0);
}

int main(void)
{
    test_arch_tables();
    test_nextn_skipped();
    test_rope_scaling();
    test_hash();
    test_writer_roundtrip();
    test_sampling_hints();
    test_mmproj();
    const char *shared = test_require_shared();
    test_hparams(shared);
    test_direct_reads(shared);
    for (size_t i = 0; i < RKM_ARRAY_LEN(fixtures); i++) check_keep(shared, fixtures[i], 0);
    check_keep(shared, "qwen3moe-q8_0", 1); /* --expert-layout plain */
    check_quant(shared, "qwen3moe-f32", "q8_0");
    check_quant(shared, "gemma4-f32", "q4_0");
    check_quant(shared, "qwen2moe-f32", "q4_0");
    test_verify(shared);
    test_truncated(shared);
    check_synth_like_fixture(shared, "tiny", "qwen3moe-f32");
    check_synth_like_fixture(shared, "tiny-gemma4", "gemma4-f32");
    check_hf_equivalence("tiny", NULL, 0);
    static const char *const small[] = {"n_vocab=512", "n_layer=2", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                        "head_dim_swa=32", "rope_dim=32", "rope_dim_swa=32", "n_ff_exp=64", "n_ff=64"};
    static const char *const small_sh[] = {"n_vocab=512", "n_layer=2", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                           "head_dim_swa=32", "rope_dim=32", "rope_dim_swa=32", "n_ff_exp=64", "n_ff=96", "n_ff_shexp=96"};
    check_hf_equivalence("llama-dense", NULL, 0);
    check_hf_equivalence("mixtral-8x7b", small, (int)RKM_ARRAY_LEN(small));
    check_hf_equivalence("qwen2moe-a2.7b", small_sh, (int)RKM_ARRAY_LEN(small_sh));
    check_hf_equivalence("olmoe-1b-7b", small, (int)RKM_ARRAY_LEN(small));
    check_hf_equivalence("tiny-gemma4", NULL, 0);
    static const char *const yarn[] = {"rope_scaling=yarn", "rope_freq_scale=0.25", "rope_orig_ctx=64", "yarn_beta_fast=16"};
    static const char *const linear[] = {"rope_scaling=linear", "rope_freq_scale=0.5"};
    check_hf_equivalence("qwen3-dense", yarn, (int)RKM_ARRAY_LEN(yarn));
    check_hf_equivalence("llama-dense", linear, (int)RKM_ARRAY_LEN(linear));
    static const char *const oss[] = {"n_vocab=512", "n_layer=3", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                      "head_dim_swa=32", "rope_dim=32", "rope_dim_swa=32", "n_ff_exp=64", "n_expert=8",
                                      "sliding_window=16", "n_ctx_train=4096", "rope_orig_ctx=512"};
    check_hf_equivalence("gpt-oss-20b", oss, (int)RKM_ARRAY_LEN(oss));
    static const char *const glm[] = {"n_vocab=512", "n_layer=3", "n_embd=128", "n_head=4", "n_head_kv=2", "head_dim=32", "head_dim_v=32",
                                      "head_dim_swa=32", "rope_dim=16", "rope_dim_swa=16", "n_ff_exp=64", "n_ff_shexp=64",
                                      "n_ff=96", "n_expert=8", "expert_weights_scale=2.5"};
    check_hf_equivalence("glm-4.5-air", glm, (int)RKM_ARRAY_LEN(glm));
    static const char *const dsv2[] = {"n_vocab=512", "n_layer=2", "n_embd=128", "n_head=4", "kv_lora_rank=64", "n_ff_exp=64",
                                       "n_ff_shexp=128", "n_ff=96", "n_expert=8", "n_expert_used=2"};
    static const char *const dsv3[] = {"n_vocab=512", "n_layer=3", "n_embd=128", "n_head=4", "kv_lora_rank=64", "q_lora_rank=64",
                                       "n_ff_exp=64", "n_ff_shexp=64", "n_ff=96", "n_expert=8", "n_expert_used=2",
                                       "n_expert_group=4", "n_group_used=2", "n_layer_dense_lead=1"};
    check_hf_equivalence("deepseek-v2-lite", dsv2, (int)RKM_ARRAY_LEN(dsv2));
    check_hf_equivalence("deepseek-v3", dsv3, (int)RKM_ARRAY_LEN(dsv3));
    test_deepseek_bad_files();
    test_qwen35_bad_files();
    test_vhead_order();
    test_hybrid_hf();
    test_hf_llama3_rope();
    test_hf_shards_fill();
    test_gpt_oss_bad_files();
    return test_done();
}
