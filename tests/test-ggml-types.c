/*
 * test-ggml-types.c - every ggml type rkmojo reads decodes bit for bit as
 * ggml itself: the prebuilt libggml-base.so of the npm package
 * @node-llama-cpp/linux-x64 (tests/js, or $RKM_GGML_LIB) is dlopened at run
 * time (not linked, so sanitizer builds still link; the library itself is
 * not sanitized). For each type the same bytes go through ggml's to_float
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
 * compared. Skips (77) when the library is absent.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <strings.h>
#include <unistd.h>

#include "common/test.h"
#include "kernels/quant.h"

#define GGML_LIB_DEFAULT "tests/js/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"

typedef void (*to_float_fn)(const void *x, float *y, int64_t k);

/* ggml's struct ggml_type_traits (ggml.h); checked against Q4_0 below. */
struct ggml_traits {
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    to_float_fn to_float;
    void *from_float_ref;
};

static const struct ggml_traits *(*g_traits)(int);
static size_t (*g_quantize_chunk)(int, const float *, void *, int64_t, int64_t, int64_t, const float *);

static long n_f16_snan; /* f16 patterns compared as NaN only */

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
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

int main(void)
{
    const char *lib = getenv("RKM_GGML_LIB") ? getenv("RKM_GGML_LIB") : GGML_LIB_DEFAULT;
    if (access(lib, R_OK)) {
        printf("%s missing (x86-64 only; npm install in tests/js, or set RKM_GGML_LIB): skipped\n", lib);
        return 77;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("cannot dlopen %s (%s): skipped\n", lib, dlerror());
        return 77;
    }
    *(void **)&g_traits = dlsym(h, "ggml_get_type_traits");
    *(void **)&g_quantize_chunk = dlsym(h, "ggml_quantize_chunk");
    if (!g_traits || !g_quantize_chunk) {
        fprintf(stderr, "FAIL: %s lacks ggml_get_type_traits or ggml_quantize_chunk\n", lib);
        return 1;
    }
    const struct ggml_traits *q40 = g_traits(RKM_TYPE_Q4_0);
    if (!q40 || q40->blck_size != 32 || q40->type_size != 18 || !q40->to_float) {
        fprintf(stderr, "FAIL: ggml_type_traits has an unexpected layout\n");
        return 1;
    }
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
    return test_done();
}
