/*
 * test-ggml-types.c - every ggml type rkmojo reads decodes bit for bit as
 * ggml itself (the prebuilt libggml-base.so, dlopened: common/ggml_ref.h).
 * For each type the same bytes go through ggml's to_float
 * and rkm_dequantize_row and the floats must have equal bit patterns
 * (memcmp; NaN payloads included, except that ggml's f16 conversion sets
 * the quiet bit of a signalling NaN and rkmojo's keeps it clear: those
 * 1022 f16 patterns are compared as NaN):
 *   - random blocks (every byte random);
 *   - adversarial blocks: each f16 scale field set to 0, +-denormal, the
 *     largest finite, +-inf, quiet and signalling NaNs, with the other
 *     bytes all 0x00, all 0xFF, 0x55, 0xAA or random (MXFP4: all 256
 *     exponents);
 *   - real-looking data (gaussian rows with outliers and an all-zero row)
 *     quantized by ggml_quantize_chunk (IQ types with an importance
 *     matrix, which some of them require).
 * F16 and BF16 are compared on all 65536 patterns; F32 (no to_float in
 * ggml: a copy) on random bits. Prints per type how many blocks it
 * compared. Then a GGUF with a tensor of every readable type, quantized by
 * ggml, converts (--quant keep) to the converter's rule applied to ggml's
 * dequantization. Without the library the conversion runs on random
 * blocks and the test then skips (77) with a message.
 */
#include <stdbool.h>
#include <stdint.h>
#include <strings.h>
#include <unistd.h>

#include "common/ggml_ref.h"
#include "common/test.h"
#include "format/gguf.h"
#include "rkmojo.h"
#include "format/model_dir.h"
#include "kernels/quant.h"
#include "util/common.h"

/* ggml's type traits and quantizer (common/ggml_ref.h checks the traits'
 * layout on Q4_0); NULL without the library. */
static const struct ggml_traits *(*g_traits)(int);
static size_t (*g_quantize_chunk)(int, const float *, void *, int64_t, int64_t, int64_t, const float *);

static long n_f16_snan; /* f16 patterns compared as NaN only */

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
    return test_rand(&rng);
}

static float gauss(void)
{
    float u = ((float)(rnd() & 0xFFFFFF) + 1.0f) / 16777217.0f, v = (float)(rnd() & 0xFFFFFF) / 16777216.0f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* The f16 fields of each block type (byte offsets); IQ1_M's d is spread
 * over the top nibbles of its scales and is handled on its own. */
typedef struct {
    int type;
    int n_f16;
    int f16_off[2];
} type_case;

static const type_case cases[] = {
    {RKM_TYPE_Q4_0, 1, {0}},     {RKM_TYPE_Q4_1, 2, {0, 2}},   {RKM_TYPE_Q5_0, 1, {0}},     {RKM_TYPE_Q5_1, 2, {0, 2}},
    {RKM_TYPE_Q8_0, 1, {0}},     {RKM_TYPE_Q2_K, 2, {80, 82}}, {RKM_TYPE_Q3_K, 1, {108}},   {RKM_TYPE_Q4_K, 2, {0, 2}},
    {RKM_TYPE_Q5_K, 2, {0, 2}},  {RKM_TYPE_Q6_K, 1, {208}},    {RKM_TYPE_IQ2_XXS, 1, {0}},  {RKM_TYPE_IQ2_XS, 1, {0}},
    {RKM_TYPE_IQ2_S, 1, {0}},    {RKM_TYPE_IQ3_XXS, 1, {0}},   {RKM_TYPE_IQ3_S, 1, {0}},    {RKM_TYPE_IQ1_S, 1, {0}},
    {RKM_TYPE_IQ1_M, 0, {0}},    {RKM_TYPE_IQ4_NL, 1, {0}},    {RKM_TYPE_IQ4_XS, 1, {0}},   {RKM_TYPE_TQ1_0, 1, {52}},
    {RKM_TYPE_TQ2_0, 1, {64}},   {RKM_TYPE_MXFP4, 0, {0}},
};

static const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0xFBFF,
                                    0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7D55, 0xFFFF};

/* Compares ggml's and rkmojo's decoding of nb blocks; returns nb, or 0
 * after a failed check naming the first differing value. */
static long compare(int type, const uint8_t *data, long nb, const char *what)
{
    const int bs = rkm_type_block_size(type);
    const int64_t n = (int64_t)nb * bs;
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    CHECK(a && b);
    if (!a || !b) return 0;
    g_traits(type)->to_float(data, a, n);
    memset(b, 0x5A, (size_t)n * sizeof *b);
    rkm_dequantize_row(type, data, b, n);
    long ok = nb;
    if (type == RKM_TYPE_F16) n_f16_snan = 0;
    if (memcmp(a, b, (size_t)n * sizeof *a)) {
        for (int64_t i = 0; i < n; i++) {
            uint32_t ua, ub;
            memcpy(&ua, &a[i], 4);
            memcpy(&ub, &b[i], 4);
            /* f16 signalling NaNs: ggml's conversion quiets them (sets the
             * quiet bit), rkmojo's keeps the payload as it is; both NaN. */
            if (type == RKM_TYPE_F16 && ua != ub && a[i] != a[i] && b[i] != b[i] && (ua | 0x00400000u) == (ub | 0x00400000u)) {
                n_f16_snan++;
                continue;
            }
            if (ua != ub) {
                CHECK_MSG(0, "%s (%s): block %lld value %lld: ggml %08x (%g), rkmojo %08x (%g)", rkm_type_name(type),
                          what, (long long)(i / bs), (long long)(i % bs), ua, (double)a[i], ub, (double)b[i]);
                ok = 0;
                break;
            }
        }
    }
    free(a);
    free(b);
    return ok;
}

static void fill(uint8_t *p, size_t n, int pattern)
{
    static const int bytes[4] = {0x00, 0xFF, 0x55, 0xAA};
    for (size_t i = 0; i < n; i++) p[i] = pattern < 4 ? (uint8_t)bytes[pattern] : (uint8_t)rnd();
}

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Adversarial blocks of c's type, written to buf; returns their count. */
static long adversarial(const type_case *c, uint8_t *buf, long cap)
{
    const size_t bb = rkm_type_block_bytes(c->type);
    long nb = 0;
    for (int pat = 0; pat < 5; pat++) {
        if (c->type == RKM_TYPE_MXFP4) {
            for (int e = 0; e < 256 && nb < cap; e++, nb++) {
                fill(buf + (size_t)nb * bb, bb, pat);
                buf[(size_t)nb * bb] = (uint8_t)e;
            }
            continue;
        }
        for (size_t s = 0; s < sizeof specials / sizeof *specials; s++) {
            int nf = c->type == RKM_TYPE_IQ1_M ? 1 : c->n_f16;
            for (int f = 0; f <= nf && nb < cap; f++, nb++) { /* f == nf: every field at once */
                uint8_t *p = buf + (size_t)nb * bb;
                fill(p, bb, pat);
                if (c->type == RKM_TYPE_IQ1_M) {
                    for (int k = 0; k < 4; k++) p[49 + 2 * k] = (uint8_t)((p[49 + 2 * k] & 0x0F) | ((specials[s] >> (4 * k)) & 0xF) << 4);
                    continue;
                }
                for (int k = 0; k < nf; k++)
                    if (f == nf || f == k) put16(p + c->f16_off[k], specials[s]);
            }
        }
    }
    return nb;
}

static int is_iq(int type)
{
    return (type >= RKM_TYPE_IQ2_XXS && type <= RKM_TYPE_IQ4_XS) || type == RKM_TYPE_IQ1_M;
}

/* Rows of real-looking weights quantized by ggml; returns the blocks. */
static long quantized(int type, uint8_t *buf, long cap)
{
    enum { N_PER_ROW = 1024, N_ROWS = 32 };
    static float x[N_PER_ROW * N_ROWS], imatrix[N_PER_ROW];
    for (int r = 0; r < N_ROWS; r++) {
        float scale = r % 3 == 0 ? 0.02f : r % 3 == 1 ? 1.0f : 300.0f;
        for (int i = 0; i < N_PER_ROW; i++) {
            float v = r == 5 ? 0.0f : gauss() * scale;
            if (rnd() % 97 == 0) v *= 20.0f; /* outliers */
            x[r * N_PER_ROW + i] = v;
        }
    }
    for (int i = 0; i < N_PER_ROW; i++) imatrix[i] = 0.1f + (float)(rnd() % 1000) / 100.0f;
    const long nb = (long)N_ROWS * N_PER_ROW / rkm_type_block_size(type);
    if (nb > cap) return 0;
    size_t bytes = g_quantize_chunk(type, x, buf, 0, N_ROWS, N_PER_ROW, is_iq(type) ? imatrix : NULL);
    CHECK_EQ_INT(bytes, (size_t)nb * rkm_type_block_bytes(type));
    return nb;
}

static void float_types(void)
{
    static uint8_t all16[65536 * 2];
    for (unsigned v = 0; v < 65536; v++) put16(all16 + 2 * v, v);
    long n16 = compare(RKM_TYPE_F16, all16, 65536, "all patterns");
    long nbf = compare(RKM_TYPE_BF16, all16, 65536, "all patterns");
    printf("%-8s %6ld values (every pattern; %ld signalling NaNs compared as NaN: ggml quiets them)\n", "f16", n16,
           n_f16_snan);
    printf("%-8s %6ld values (every pattern)\n", "bf16", nbf);
    /* ggml's f32 has no to_float (it is the storage type): a copy. */
    enum { N = 4096 };
    static uint32_t bits[N];
    static float out[N];
    for (int i = 0; i < N; i++) bits[i] = i < 16 ? 0x7F800000u + (uint32_t)i * 0x00100001u : rnd() << 16 ^ rnd();
    rkm_dequantize_row(RKM_TYPE_F32, bits, out, N);
    CHECK(!memcmp(bits, out, sizeof bits));
    printf("%-8s %6d values (a copy: ggml has no to_float for f32)\n", "f32", N);
}

/* ---------------------------------------------------------- conversion */

/* The types the conversion test stores, spread over the matrices whose
 * rows fit their block. */
static const int conv_types[] = {
    RKM_TYPE_Q2_K,    RKM_TYPE_Q3_K,   RKM_TYPE_MXFP4,  RKM_TYPE_IQ4_NL, RKM_TYPE_IQ4_XS, RKM_TYPE_TQ1_0,
    RKM_TYPE_TQ2_0,   RKM_TYPE_IQ2_XXS, RKM_TYPE_IQ2_XS, RKM_TYPE_IQ2_S, RKM_TYPE_IQ3_XXS, RKM_TYPE_IQ3_S,
    RKM_TYPE_IQ1_S,   RKM_TYPE_IQ1_M,  RKM_TYPE_Q4_1,   RKM_TYPE_Q5_0,   RKM_TYPE_Q5_1,   RKM_TYPE_Q4_K,
    RKM_TYPE_Q5_K,    RKM_TYPE_Q6_K,   RKM_TYPE_BF16,   RKM_TYPE_F16,    RKM_TYPE_Q8_0,   RKM_TYPE_Q4_0,
};

typedef struct {
    int type;      /* as stored in the mixed GGUF */
    int64_t rows;
    size_t row_bytes;
    uint8_t *data; /* rows * row_bytes */
} conv_tensor;

/* One row decoded as the reference does: ggml's to_float when loaded. */
static void ref_row(int type, const uint8_t *src, float *dst, int64_t n)
{
    const struct ggml_traits *t = g_traits ? g_traits(type) : NULL;
    if (t && t->to_float) t->to_float(src, dst, n);
    else rkm_dequantize_row(type, src, dst, n);
}

/* Random blocks of a type, each redrawn until it decodes to finite values
 * (the converter refuses NaN and infinity). */
static void random_finite(int type, uint8_t *dst, int64_t n_blocks)
{
    const size_t bb = rkm_type_block_bytes(type);
    const int bs = rkm_type_block_size(type);
    float y[256];
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8_t *p = dst + (size_t)b * bb;
        for (int tries = 0;; tries++) {
            fill(p, bb, tries < 50 ? 4 : 0);
            rkm_dequantize_row(type, p, y, bs);
            int ok = 1;
            for (int j = 0; j < bs; j++) ok &= isfinite(y[j]) && fabsf(y[j]) < 1e30f;
            if (ok) break;
        }
    }
}

/* Compares a converted row with the converter's rule applied to the
 * reference floats of the source row; returns 1 if equal. */
static int row_matches(int src_type, const uint8_t *src, int dst_type, const uint8_t *got, int64_t n, float *f, uint8_t *want)
{
    ref_row(src_type, src, f, n);
    if (src_type == dst_type) return !memcmp(src, got, rkm_type_row_bytes(dst_type, n)); /* kept: the same bytes */
    if (src_type == RKM_TYPE_TQ1_0 || src_type == RKM_TYPE_TQ2_0) {
        /* to q8_0 without loss: the same values as ggml's, bit for bit */
        float *g = (float *)want;
        rkm_dequantize_row(dst_type, got, g, n);
        return !memcmp(f, g, sizeof(float) * (size_t)n);
    }
    rkm_quantize_row(dst_type, f, want, n);
    return !memcmp(want, got, rkm_type_row_bytes(dst_type, n));
}

/* A kept tensor with one NaN or infinite block scale (or value) is
 * refused with a message naming it, and nothing is left behind. */
static void convert_nonfinite(const char *mixed, const conv_tensor *ct)
{
    rkm_gguf *g = rkm_gguf_open(mixed); /* the tensors in ct's order, with their offsets */
    CHECK_MSG(g != NULL, "%s", rkm_last_error());
    if (!g) return;
    const int types[] = {RKM_TYPE_Q4_K,  RKM_TYPE_Q6_K,   RKM_TYPE_Q2_K, RKM_TYPE_Q8_0, RKM_TYPE_IQ4_XS, RKM_TYPE_F16,
                         RKM_TYPE_BF16,  RKM_TYPE_IQ2_XXS, RKM_TYPE_IQ3_S, RKM_TYPE_IQ1_S, RKM_TYPE_IQ1_M};
    size_t n;
    uint8_t *file = (uint8_t *)rkm_read_file(mixed, &n);
    CHECK(file != NULL);
    if (!file) {
        rkm_gguf_close(g);
        return;
    }
    char bad[512], out[512];
    snprintf(bad, sizeof bad, "%s/nonfinite.gguf", test_tmpdir());
    snprintf(out, sizeof out, "%s/nonfinite.rkmojo", test_tmpdir());
    int tried = 0;
    for (size_t k = 0; k < sizeof types / sizeof *types; k++)
        for (int i = 0; i < rkm_gguf_n_tensors(g); i++) {
            const rkm_gguf_tensor *t = rkm_gguf_tensor_at(g, i);
            if (ct[i].type != types[k] || t->n_dims < 2 || strstr(t->name, "ffn_gate_inp")) continue;
            /* the second block's (or value's) first f16 scale of row 1 */
            const size_t bb = rkm_type_block_size(types[k]) > 1 ? rkm_type_block_bytes(types[k]) : 2;
            int64_t at = rkm_row_find_nonfinite(types[k], ct[i].data, 0); /* -1 */
            CHECK(at == -1);
            size_t scale = types[k] == RKM_TYPE_Q6_K ? 208 : types[k] == RKM_TYPE_Q2_K ? 80 : 0;
            size_t off = ct[i].row_bytes + bb + scale;
            uint8_t *copy = malloc(n);
            memcpy(copy, file, n);
            unsigned v = (k % 2) ? 0x7e00 : 0x7c00; /* NaN, +inf */
            if (types[k] == RKM_TYPE_BF16) v = 0x7f80;
            if (types[k] == RKM_TYPE_IQ1_M) /* its f16: the top nibbles of the u16 at 48..54 */
                for (int q = 0; q < 4; q++) {
                    uint8_t *p = copy + t->offset + off + 49 + 2 * q;
                    *p = (uint8_t)((*p & 0x0f) | ((v >> 4 * q) & 0xf) << 4);
                }
            else {
                copy[t->offset + off] = (uint8_t)v;
                copy[t->offset + off + 1] = (uint8_t)(v >> 8);
            }
            FILE *fo = fopen(bad, "wb");
            CHECK(fo && fwrite(copy, 1, n, fo) == n);
            if (fo) fclose(fo);
            free(copy);
            char log[600];
            snprintf(log, sizeof log, "%s/nonfinite.log", test_tmpdir());
            int rc = test_rkmojo(NULL, "convert %s %s --quant keep --quiet 2>%s", bad, out, log);
            size_t ln;
            char *msg = rkm_read_file(log, &ln);
            CHECK_MSG(rc != 0 && msg && strstr(msg, t->name) && strstr(msg, "NaN or infinite"), "%s in %s: rc %d, %s",
                      rkm_type_name(types[k]), t->name, rc, msg ? msg : "?");
            char mf[600];
            snprintf(mf, sizeof mf, "%s/manifest.json", out);
            CHECK_MSG(access(mf, F_OK) != 0, "%s: a manifest was written", rkm_type_name(types[k]));
            free(msg);
            tried++;
            break;
        }
    CHECK(tried >= 10);
    printf("non-finite scales: %d kept types refused, naming the tensor\n", tried);
    free(file);
    rkm_gguf_close(g);
}

/* A GGUF holding a tensor of every readable type (ggml-quantized when the
 * library is loaded, else random finite blocks) converts with --quant
 * keep, and every converted row equals the converter's rule (kept, or
 * q8_0 for the types without a kernel, f32 for routers) applied to
 * ggml's dequantization of the source: every type the matmuls run (the
 * IQ grids included) kept byte for byte, TQ1_0 / TQ2_0 to q8_0 without
 * loss. */
static void convert_every_type(void)
{
    const char *dir = test_tmpdir();
    char base[512], mixed[512], out[512];
    snprintf(base, sizeof base, "%s/base.gguf", dir);
    snprintf(mixed, sizeof mixed, "%s/mixed.gguf", dir);
    snprintf(out, sizeof out, "%s/mixed.rkmojo", dir);
    CHECK_EQ_INT(test_rkmojo(NULL, "synth --preset tiny -o %s --seed 3 --quiet --set n_embd=256 --set n_ff_exp=256 "
                                   "--set n_layer=4 --set n_expert=2 --set n_expert_used=1",
                             base),
                 0);
    rkm_gguf *g = rkm_gguf_open(base);
    CHECK_MSG(g != NULL, "%s", rkm_last_error());
    if (!g) return;
    const int nt = rkm_gguf_n_tensors(g);
    conv_tensor *ct = calloc((size_t)nt, sizeof *ct);
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    for (int i = 0; i < rkm_gguf_n_kv(g); i++) rkm_gguf_writer_copy_kv(w, g, i);
    int used[RKM_TYPE_COUNT] = {0};
    static float imatrix[4096];
    for (int i = 0; i < 4096; i++) imatrix[i] = 1.0f + (float)(i % 7);
    for (int i = 0; i < nt; i++) {
        const rkm_gguf_tensor *t = rkm_gguf_tensor_at(g, i);
        conv_tensor *c = &ct[i];
        c->type = RKM_TYPE_F32;
        if (t->n_dims >= 2 && !strstr(t->name, "ffn_gate_inp")) /* the least used type that fits */
            for (int k = 0, best = -1; k < (int)(sizeof conv_types / sizeof *conv_types); k++) {
                int ty = conv_types[k];
                if (t->ne[0] % rkm_type_block_size(ty) == 0 && (best < 0 || used[ty] < best)) {
                    c->type = ty;
                    best = used[ty];
                }
            }
        c->rows = (int64_t)(t->nbytes / rkm_type_row_bytes(t->type, t->ne[0]));
        c->row_bytes = rkm_type_row_bytes(c->type, t->ne[0]);
        c->data = malloc((size_t)c->rows * c->row_bytes);
        float *x = malloc(t->nbytes);
        CHECK(c->data && x && t->type == RKM_TYPE_F32);
        if (!c->data || !x) break;
        CHECK_EQ_INT(rkm_gguf_read(g, t, 0, x, t->nbytes), 0);
        if (c->type == RKM_TYPE_F32 || c->type == RKM_TYPE_F16 || c->type == RKM_TYPE_BF16 || c->type == RKM_TYPE_Q8_0 ||
            c->type == RKM_TYPE_Q4_0)
            for (int64_t r = 0; r < c->rows; r++)
                rkm_quantize_row(c->type, x + r * t->ne[0], c->data + (size_t)r * c->row_bytes, t->ne[0]);
        else if (g_quantize_chunk)
            g_quantize_chunk(c->type, x, c->data, 0, c->rows, t->ne[0], is_iq(c->type) ? imatrix : NULL);
        else
            random_finite(c->type, c->data, (int64_t)(c->rows * c->row_bytes / rkm_type_block_bytes(c->type)));
        free(x);
        used[c->type]++;
        CHECK_EQ_INT(rkm_gguf_writer_add_tensor(w, t->name, c->type, t->n_dims, t->ne), 0);
    }
    int rc = rkm_gguf_writer_begin(w, mixed);
    for (int i = 0; !rc && i < nt; i++) rc = rkm_gguf_writer_write_data(w, ct[i].data, (size_t)ct[i].rows * ct[i].row_bytes);
    if (!rc) rc = rkm_gguf_writer_finish(w);
    rkm_gguf_writer_free(w);
    CHECK_MSG(rc == 0, "%s", rkm_last_error());
    for (size_t k = 0; k < sizeof conv_types / sizeof *conv_types; k++)
        CHECK_MSG(used[conv_types[k]], "no tensor of %s", rkm_type_name(conv_types[k]));
    CHECK_EQ_INT(test_rkmojo(NULL, "convert %s %s --quant keep --expert-layout plain --quiet", mixed, out), 0);
    rkm_model_dir *md = rkm_model_dir_open(out);
    CHECK_MSG(md != NULL, "%s", rkm_last_error());
    long rows_ok = 0, rows_bad = 0;
    int n_checked[RKM_TYPE_COUNT] = {0};
    float *f = malloc(4096 * sizeof *f);
    uint8_t *want = malloc(4096 * 4);
    for (int i = 0; md && i < md->n_tensors; i++) {
        const rkm_tensor_view *tv = &md->tensors[i];
        const rkm_gguf_tensor *t = rkm_gguf_tensor_find(g, tv->name);
        if (!t) continue;
        const conv_tensor *c = &ct[t - rkm_gguf_tensor_at(g, 0)];
        int rule = t->n_dims == 1 || strstr(t->name, "ffn_gate_inp") ? RKM_TYPE_F32
                   : rkm_type_matmul(c->type)                           ? c->type
                                                                       : RKM_TYPE_Q8_0;
        CHECK_MSG(tv->type == rule, "%s: %s became %s", tv->name, rkm_type_name(c->type), rkm_type_name(tv->type));
        const size_t out_row = rkm_type_row_bytes(tv->type, t->ne[0]);
        for (int64_t r = 0; r < c->rows; r++) {
            int ok = row_matches(c->type, c->data + (size_t)r * c->row_bytes, tv->type,
                                 (const uint8_t *)tv->data + (size_t)r * out_row, t->ne[0], f, want);
            rows_ok += ok;
            rows_bad += !ok;
        }
        n_checked[c->type]++;
    }
    static const char *const parts[RKM_PART_COUNT] = {"gate", "up", "down"};
    for (int l = 0; md && l < md->n_expert_layers; l++) {
        const rkm_expert_layer *el = &md->experts[l];
        uint8_t *blob = malloc(el->blob_stride);
        for (int e = 0; blob && e < el->n_expert; e++) {
            CHECK_EQ_INT(rkm_model_dir_read_expert(md, el->layer, e, blob, 1), 0);
            for (int p = 0; p < RKM_PART_COUNT; p++) {
                char name[64];
                snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", el->layer, parts[p]);
                const rkm_gguf_tensor *t = rkm_gguf_tensor_find(g, name);
                CHECK(t != NULL);
                if (!t) continue;
                const conv_tensor *c = &ct[t - rkm_gguf_tensor_at(g, 0)];
                const rkm_expert_part *ep = &el->part[p];
                const size_t out_row = rkm_type_row_bytes(ep->type, ep->ne[0]);
                for (int64_t r = 0; r < ep->ne[1]; r++) {
                    int ok = row_matches(c->type, c->data + (size_t)(e * ep->ne[1] + r) * c->row_bytes, ep->type,
                                         blob + ep->offset + (size_t)r * out_row, ep->ne[0], f, want);
                    rows_ok += ok;
                    rows_bad += !ok;
                }
                if (e == 0) n_checked[c->type]++;
            }
        }
        free(blob);
    }
    CHECK_MSG(rows_bad == 0, "%ld of %ld converted rows differ from the rule applied to ggml's values", rows_bad,
              rows_ok + rows_bad);
    printf("convert --quant keep: %ld rows equal the rule applied to %s's dequantization; tensors per type:", rows_ok,
           g_traits ? "ggml" : "rkmojo (no ggml: random blocks)");
    for (int t = 0; t < RKM_TYPE_COUNT; t++)
        if (n_checked[t]) printf(" %s %d", rkm_type_name(t), n_checked[t]);
    printf("\n");
    for (size_t k = 0; k < sizeof conv_types / sizeof *conv_types; k++)
        CHECK_MSG(n_checked[conv_types[k]], "no converted tensor of %s checked", rkm_type_name(conv_types[k]));
    free(f);
    free(want);
    rkm_model_dir_close(md);
    convert_nonfinite(mixed, ct);
    for (int i = 0; i < nt; i++) free(ct[i].data);
    free(ct);
    rkm_gguf_close(g);
}

int main(void)
{
    const char *lib;
    const test_ggml *gg = test_ggml_open(&lib);
    if (!gg) {
        /* the conversion still runs, on random blocks decoded by rkmojo */
        convert_every_type();
        if (test_failures) return test_done();
        printf("%s missing or not loadable (x86-64 only; npm install in tests/js, or set RKM_GGML_LIB): "
               "ggml comparison skipped\n", lib);
        return 77;
    }
    g_traits = gg->traits;
    g_quantize_chunk = gg->quantize_chunk;
    float_types();

    enum { CAP = 8192 };
    uint8_t *buf = malloc((size_t)CAP * 292);
    CHECK(buf != NULL);
    if (!buf) return test_done();
    long total = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const type_case *c = &cases[i];
        const struct ggml_traits *t = g_traits(c->type);
        const size_t bb = rkm_type_block_bytes(c->type);
        CHECK_MSG(rkm_type_readable(c->type), "%s not readable", rkm_type_name(c->type));
        CHECK_MSG(t && t->to_float && t->blck_size == rkm_type_block_size(c->type) && t->type_size == bb &&
                      !strcasecmp(t->type_name, rkm_type_name(c->type)),
                  "type %d: ggml's %s (%lld, %zu) vs rkmojo's %s", c->type, t && t->type_name ? t->type_name : "?",
                  t ? (long long)t->blck_size : 0LL, t ? t->type_size : (size_t)0, rkm_type_name(c->type));
        if (!t || !t->to_float || t->type_size != bb) continue;
        long n_rand = 2000, n_adv, n_q;
        fill(buf, (size_t)n_rand * bb, 4);
        n_rand = compare(c->type, buf, n_rand, "random");
        n_adv = adversarial(c, buf, CAP);
        n_adv = compare(c->type, buf, n_adv, "adversarial");
        n_q = quantized(c->type, buf, CAP);
        n_q = n_q ? compare(c->type, buf, n_q, "ggml-quantized") : 0;
        printf("%-8s %6ld blocks bit-identical (%ld random, %ld adversarial, %ld ggml-quantized)\n", rkm_type_name(c->type),
               n_rand + n_adv + n_q, n_rand, n_adv, n_q);
        total += n_rand + n_adv + n_q;
    }
    printf("%ld blocks compared\n", total);
    free(buf);
    convert_every_type();
    return test_done();
}
