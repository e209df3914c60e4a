/*
 * test-quantize.c - the quantizers of the searched types (Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4; kernels/quantize_k.c) and of
 * the 32-value reference types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; quant.c)
 * against ggml's own (ggml_quantize_chunk without an importance matrix,
 * from the prebuilt libggml-base.so: common/ggml_ref.h).
 *
 * With the library (x86-64), on seven weight distributions (gaussian,
 * uniform, heavy-tailed with outliers, rows with zero blocks, 192 x 4096
 * rows with per-row and per-channel scales and outlier channels as in LLM
 * matrices, tiny and large magnitudes; 1.4M values per type):
 *   - error: ||dequant(q(x)) - x|| / ||x|| of ours <= 1.02 x ggml's, both
 *     decoded by rkm_dequantize_row (bit-identical to ggml's to_float:
 *     test-ggml-types); the ratios are printed;
 *   - bytes: ours equal ggml's block for block, for every type:
 *     quantize_k.c runs ggml's searches and quant.c its reference
 *     roundings in ggml's order of float operations. Should a ggml update change a search,
 *     this names the type and distribution; the error bound then still
 *     says whether ours is as good;
 *   - magnitudes over the whole float range: ours equal ggml's bytes
 *     except where ggml's decode to inf or NaN or the values are below
 *     1e-30 (quantize_k.c's header says why); the searched types' always
 *     decode to finite values (the reference types keep ggml's inf scale
 *     on overflow, as their bytes must).
 * Without the library (and first in any case), rkmojo alone:
 *   - golden: FNV-1a hashes of the blocks of a fixed input, equal to
 *     ggml's (checked here when the library is loaded), so that a build
 *     for another architecture or compiler must give ggml's bytes too;
 *   - round trip: q(dequant(b)) decodes to exactly dequant(b) for the
 *     blocks b (random ones and our own) of MXFP4, IQ4_NL, IQ4_XS, Q6_K
 *     and Q3_K for which ggml's search must find b's own grid again
 *     (round_trip_holds says when). Not required of Q2_K, Q4_K, Q5_K,
 *     whose search (a min and trial scales around the range) has no such
 *     case; the rate that still round trips is printed;
 *   - edge cases: all zero, -0, one value, constants, denormals, 1e-30,
 *     1e30, +-FLT_MAX, NaN and infinities: no crash (the sanitizer build
 *     checks for undefined behaviour), deterministic, zeros for zeros,
 *     and for the searched types finite output for finite input;
 *   - threads: two threads quantizing at once give the single-threaded
 *     bytes.
 * The inputs come from integer arithmetic and sqrtf only (no libm
 * transcendental), so they are the same on every platform. Exits 77 with
 * a message when the library is absent and the rest passed.
 */
#include <float.h>
#include <pthread.h>
#include <stdint.h>

#include "common/ggml_ref.h"
#include "common/test.h"
#include "kernels/quant.h"

static const int searched[] = {RKM_TYPE_Q2_K, RKM_TYPE_Q3_K,   RKM_TYPE_Q4_K,   RKM_TYPE_Q5_K,
                               RKM_TYPE_Q6_K, RKM_TYPE_IQ4_NL, RKM_TYPE_IQ4_XS, RKM_TYPE_MXFP4};
#define N_SEARCHED ((int)(sizeof searched / sizeof *searched))
/* quant.c's 32-value types: ggml's reference roundings */
static const int reference[] = {RKM_TYPE_Q8_0, RKM_TYPE_Q4_0, RKM_TYPE_Q4_1, RKM_TYPE_Q5_0, RKM_TYPE_Q5_1};
#define N_REFERENCE ((int)(sizeof reference / sizeof *reference))
#define N_TYPES (N_SEARCHED + N_REFERENCE)

enum { N_PER_ROW = 4096 };

/* ------------------------------------------------------------- inputs */

static uint64_t rng;

static uint32_t rnd(void)
{
    return test_rand(&rng);
}

/* Uniform in [-1, 1). */
static float unif(void)
{
    return (float)(int32_t)rnd() * (1.0f / 2147483648.0f);
}

/* About N(0, 1): the sum of 12 uniforms in [-0.5, 0.5) (Irwin-Hall). */
static float gauss(void)
{
    float s = 0;
    for (int i = 0; i < 12; i++) s += 0.5f * unif();
    return s;
}

/* Student's t with 3 degrees of freedom: heavy tails. */
static float student3(void)
{
    float c = 0;
    for (int i = 0; i < 3; i++) {
        const float g = gauss();
        c += g * g;
    }
    return gauss() / sqrtf(c / 3 + 1e-6f);
}

typedef struct {
    const char *name;
    int rows;
    void (*fill)(float *x, int rows);
} dist;

static void fill_gauss(float *x, int rows)
{
    for (int64_t i = 0; i < (int64_t)rows * N_PER_ROW; i++) x[i] = 0.02f * gauss();
}

static void fill_uniform(float *x, int rows)
{
    for (int64_t i = 0; i < (int64_t)rows * N_PER_ROW; i++) x[i] = 0.05f * unif();
}

static void fill_heavy(float *x, int rows)
{
    for (int64_t i = 0; i < (int64_t)rows * N_PER_ROW; i++) {
        x[i] = 0.02f * student3();
        if (rnd() % 1000 == 0) x[i] *= 50.0f; /* rare outliers */
    }
}

/* Gaussian rows with zeroed runs of 16, 32 and 256 values, blocks with
 * one nonzero value, and an all-zero row. */
static void fill_zero_blocks(float *x, int rows)
{
    fill_gauss(x, rows);
    for (int r = 0; r < rows; r++) {
        float *row = x + (int64_t)r * N_PER_ROW;
        if (r == 0) {
            memset(row, 0, N_PER_ROW * sizeof *row);
            continue;
        }
        for (int b = 0; b < N_PER_ROW; b += 256) {
            const uint32_t u = rnd() % 16;
            if (u == 0) memset(row + b, 0, 256 * sizeof *row);
            else if (u < 4) memset(row + b + 32 * (rnd() % 8), 0, 32 * sizeof *row);
            else if (u < 6) memset(row + b + 16 * (rnd() % 16), 0, 16 * sizeof *row);
            else if (u == 6) {
                memset(row + b, 0, 256 * sizeof *row);
                row[b + rnd() % 256] = 0.05f;
            }
        }
    }
}

/* LLM-like matrices: a scale per row and per input channel (column), a
 * few outlier channels, and a small per-row offset. */
static void fill_llm(float *x, int rows)
{
    static float col[N_PER_ROW];
    for (int c = 0; c < N_PER_ROW; c++) {
        const float u = unif();
        col[c] = 0.5f + u * u * 2.0f;
        if (rnd() % 512 == 0) col[c] *= 20.0f;
    }
    for (int r = 0; r < rows; r++) {
        const float u = unif(), row_scale = 0.01f * (0.6f + u * u * 1.5f), off = 0.002f * unif();
        for (int c = 0; c < N_PER_ROW; c++) x[(int64_t)r * N_PER_ROW + c] = row_scale * col[c] * gauss() + off;
    }
}

static void fill_tiny(float *x, int rows)
{
    for (int64_t i = 0; i < (int64_t)rows * N_PER_ROW; i++) x[i] = 1e-6f * gauss();
}

static void fill_large(float *x, int rows)
{
    for (int64_t i = 0; i < (int64_t)rows * N_PER_ROW; i++) {
        x[i] = 300.0f * gauss();
        if (rnd() % 97 == 0) x[i] *= 20.0f;
    }
}

static const dist dists[] = {
    {"gaussian", 32, fill_gauss}, {"uniform", 32, fill_uniform}, {"heavy", 32, fill_heavy},
    {"zero-blocks", 32, fill_zero_blocks}, {"llm", 192, fill_llm}, {"tiny", 16, fill_tiny},
    {"large", 16, fill_large},
};
#define N_DISTS ((int)(sizeof dists / sizeof *dists))

/* ------------------------------------------------------------ helpers */

static void quantize_rows(int type, const float *x, uint8_t *q, int rows)
{
    const size_t rb = rkm_type_row_bytes(type, N_PER_ROW);
    for (int r = 0; r < rows; r++) rkm_quantize_row(type, x + (int64_t)r * N_PER_ROW, q + (size_t)r * rb, N_PER_ROW);
}

/* ||dequant(q) - x|| / ||x|| over n values (0 for x = 0). */
static double rel_rms(int type, const uint8_t *q, const float *x, int64_t n, float *y)
{
    rkm_dequantize_row(type, q, y, n);
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        s += (double)x[i] * x[i];
    }
    return s > 0 ? sqrt(e / s) : sqrt(e);
}

/* Blocks of nb that differ between a and b; *first gets the first. */
static long blocks_differ(int type, const uint8_t *a, const uint8_t *b, long nb, long *first)
{
    const size_t bb = rkm_type_block_bytes(type);
    long n = 0;
    *first = -1;
    for (long i = 0; i < nb; i++)
        if (memcmp(a + i * bb, b + i * bb, bb)) {
            if (*first < 0) *first = i;
            n++;
        }
    return n;
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ------------------------------------------------------------- golden */

enum { GOLDEN_ROWS = 8 };

/* FNV-1a of our (= ggml's) blocks of golden_input(), per type of
 * searched[] and then reference[] (measured with ggml_quantize_chunk of
 * the npm package's libggml-base.so, node-llama-cpp 3.22.1). */
static const uint64_t golden[N_TYPES] = {
    0x37d3b5e11b54e10eull, /* q2_k */
    0xf322362ae1ed7fb0ull, /* q3_k */
    0x3cd12cae9275422aull, /* q4_k */
    0xe142e13865c5b087ull, /* q5_k */
    0xc47d873b0c9fefc9ull, /* q6_k */
    0x9bffbcd80b589495ull, /* iq4_nl */
    0x8da6143748a5430cull, /* iq4_xs */
    0x9ce377ae78fff3c2ull, /* mxfp4 */
    0x38aeb6ca977c6220ull, /* q8_0 */
    0xc23aa9d0cd751072ull, /* q4_0 */
    0xe2ad6b360c9c35f0ull, /* q4_1 */
    0xb9f8eb2026aa8053ull, /* q5_0 */
    0x7931fac64db264a2ull, /* q5_1 */
};

/* Type k of searched[] then reference[]. */
static int any_type(int k)
{
    return k < N_SEARCHED ? searched[k] : reference[k - N_SEARCHED];
}

static void golden_input(float *x)
{
    rng = 0x243F6A8885A308D3ull;
    fill_llm(x, GOLDEN_ROWS / 2);
    fill_zero_blocks(x + (GOLDEN_ROWS / 2) * N_PER_ROW, GOLDEN_ROWS / 2);
}

/* Our bytes of the golden input hash to the table; with the library,
 * ggml's do too. */
static void check_golden(const test_ggml *gg)
{
    float *x = malloc((size_t)GOLDEN_ROWS * N_PER_ROW * sizeof *x);
    uint8_t *q = malloc((size_t)GOLDEN_ROWS * N_PER_ROW * 4);
    CHECK(x && q);
    if (!x || !q) goto out;
    golden_input(x);
    for (int k = 0; k < N_TYPES; k++) {
        const int type = any_type(k);
        const size_t bytes = rkm_type_row_bytes(type, N_PER_ROW) * GOLDEN_ROWS;
        quantize_rows(type, x, q, GOLDEN_ROWS);
        const uint64_t h = fnv1a(q, bytes);
        CHECK_MSG(h == golden[k], "%s: golden hash 0x%016llx, got 0x%016llx", rkm_type_name(type),
                  (unsigned long long)golden[k], (unsigned long long)h);
        if (gg) {
            gg->quantize_chunk(type, x, q, 0, GOLDEN_ROWS, N_PER_ROW, NULL);
            const uint64_t hg = fnv1a(q, bytes);
            CHECK_MSG(hg == golden[k], "%s: ggml's golden hash 0x%016llx, table 0x%016llx", rkm_type_name(type),
                      (unsigned long long)hg, (unsigned long long)golden[k]);
        }
    }
    printf("golden: %d types hash as the table (%s)\n", N_TYPES, gg ? "ggml's bytes too" : "ggml not loaded");
out:
    free(x);
    free(q);
}

/* --------------------------------------------------------- round trip */

/* Bits of a block: (b[off] >> shift) & mask; want is the value sought. */
typedef struct {
    int off, shift, mask, want;
} field;

/* The fields that put value j of a block on its type's lowest level
 * (IQ4: -127; Q6_K: q = -32; Q3_K: q = -4); their count. */
static int lowest_code(int type, int j, field *f)
{
    const int r = j % 128, h = j / 128;
    switch (type) {
    case RKM_TYPE_IQ4_NL: f[0] = (field){2 + j % 16, 4 * (j / 16), 0xF, 0}; return 1;
    case RKM_TYPE_IQ4_XS: f[0] = (field){8 + 16 * (j / 32) + j % 16, 4 * (j % 32 / 16), 0xF, 0}; return 1;
    case RKM_TYPE_Q6_K:
        f[0] = (field){64 * h + r % 32 + 32 * (r / 32 % 2), 4 * (r / 64), 0xF, 0};
        f[1] = (field){128 + 32 * h + r % 32, 2 * (r / 32), 3, 0};
        return 2;
    case RKM_TYPE_Q3_K:
        f[0] = (field){32 + 32 * h + j % 32, 2 * (r / 32), 3, 0};
        f[1] = (field){j % 32, j / 32, 1, 0};
        return 2;
    default: return 0;
    }
}

/* The fields that give sub-block ib the sub-scale of largest magnitude
 * (-32, or Q6_K's -128); their count. */
static int extreme_scale(int type, int ib, field *f)
{
    switch (type) {
    case RKM_TYPE_IQ4_XS:
        f[0] = (field){4 + ib / 2, 4 * (ib % 2), 0xF, 0};
        f[1] = (field){2 + ib / 4, 2 * (ib % 4), 3, 0};
        return 2;
    case RKM_TYPE_Q6_K: f[0] = (field){192 + ib, 0, 0xFF, 0x80}; return 1;
    case RKM_TYPE_Q3_K:
        f[0] = (field){96 + ib % 8, 4 * (ib / 8), 0xF, 0};
        f[1] = (field){104 + ib % 4, 2 * (ib / 4), 3, 0};
        return 2;
    default: return 0;
    }
}

static int fields_hold(const uint8_t *b, const field *f, int n)
{
    for (int i = 0; i < n; i++)
        if ((b[f[i].off] >> f[i].shift & f[i].mask) != f[i].want) return 0;
    return 1;
}

static void fields_set(uint8_t *b, const field *f, int n)
{
    for (int i = 0; i < n; i++)
        b[f[i].off] = (uint8_t)((b[f[i].off] & ~(f[i].mask << f[i].shift)) | f[i].want << f[i].shift);
}

/* Values per sub-scale: 0 for the types without sub-scales. */
static int sub_block(int type)
{
    return type == RKM_TYPE_IQ4_XS ? 32 : type == RKM_TYPE_Q6_K || type == RKM_TYPE_Q3_K ? 16 : 0;
}

/* Whether q(dequant(b)) must give b's values again:
 *   - MXFP4 (for e >= 3): the largest value's level fixes the exponent up
 *     to a power of two that maps every smaller level onto another;
 *   - IQ4_NL, and Q3_K, Q6_K, IQ4_XS per sub-block, when a value is on the
 *     lowest level (of largest magnitude): the search's first grid (Q3_K,
 *     Q6_K) or one of its trial grids (IQ4) is then b's own, an exact
 *     fit; with sub-scales, moreover one of them must be the extreme one,
 *     the largest, which fixes the super-scale d.
 * Our quantizer mostly gives such blocks, but not always: its scale search
 * can move the largest value off the lowest level. Q2_K, Q4_K and Q5_K
 * fit a min as well, from trial scales around (max - min)/nmax, with no
 * such guarantee. */
static int round_trip_holds(int type, const uint8_t *b)
{
    field f[2];
    if (type == RKM_TYPE_MXFP4) return b[0] >= 3;
    if (!lowest_code(type, 0, f)) return 0;
    const int sb = sub_block(type) ? sub_block(type) : 32;
    int has_extreme = !sub_block(type);
    for (int ib = 0; ib < rkm_type_block_size(type) / sb; ib++) {
        int has_lowest = 0;
        for (int j = 0; j < sb && !has_lowest; j++) has_lowest = fields_hold(b, f, lowest_code(type, ib * sb + j, f));
        if (!has_lowest) return 0;
        if (sub_block(type)) has_extreme |= fields_hold(b, f, extreme_scale(type, ib, f));
    }
    return has_extreme;
}

/* A random block for which round_trip_holds: random bytes, MXFP4's
 * exponent in [8, 248], the f16 d with |d| in [2^-10, 2^2), a value of
 * each sub-block on the lowest level, one sub-scale the extreme. (Larger
 * values, past about 1e5, overflow the float sums of the x^2-weighted
 * searches, ggml's as ours, and their round trip fails.) */
static void random_block(int type, uint8_t *b)
{
    const size_t bb = rkm_type_block_bytes(type);
    for (size_t i = 0; i < bb; i++) b[i] = (uint8_t)rnd();
    if (type == RKM_TYPE_MXFP4) {
        b[0] = (uint8_t)(8 + rnd() % 241);
        return;
    }
    const unsigned h = (rnd() & 0x8000) | (unsigned)(5 + rnd() % 12) << 10 | (rnd() & 0x3ff);
    const size_t d_off = type == RKM_TYPE_Q6_K ? 208 : type == RKM_TYPE_Q3_K ? 108 : 0;
    b[d_off] = (uint8_t)h;
    b[d_off + 1] = (uint8_t)(h >> 8);
    field f[2];
    const int sb = sub_block(type) ? sub_block(type) : 32, n_sub = rkm_type_block_size(type) / sb;
    for (int ib = 0; ib < n_sub; ib++) fields_set(b, f, lowest_code(type, ib * sb + (int)(rnd() % (unsigned)sb), f));
    if (sub_block(type)) fields_set(b, f, extreme_scale(type, (int)(rnd() % (unsigned)n_sub), f));
}

static int round_trip_typed(int type)
{
    return type == RKM_TYPE_MXFP4 || sub_block(type) || type == RKM_TYPE_IQ4_NL;
}

/* Blocks b, our own (of gaussian values) and, for the types where it can
 * hold, random ones: q(dequant(b)) decodes to dequant(b) exactly where
 * round_trip_holds. The others are only counted. */
static void check_round_trip(void)
{
    enum { N_OWN = 1024, N_RAND = 2000 };
    float x[256], y[256], z[256];
    uint8_t b[256], b2[256];
    rng = 0x13198A2E03707344ull;
    for (int k = 0; k < N_SEARCHED; k++) {
        const int type = searched[k], bs = rkm_type_block_size(type);
        const int n_rand = round_trip_typed(type) ? N_RAND : 0;
        long n_req = 0, n_other = 0, exact_other = 0;
        for (int i = 0; i < N_OWN + n_rand; i++) {
            if (i < N_OWN) { /* our own block of gaussian values */
                for (int j = 0; j < bs; j++) x[j] = (float)(i % 3 + 1) * gauss();
                rkm_quantize_row(type, x, b, bs);
            } else {
                random_block(type, b);
                CHECK(round_trip_holds(type, b));
            }
            rkm_dequantize_row(type, b, y, bs);
            rkm_quantize_row(type, y, b2, bs);
            rkm_dequantize_row(type, b2, z, bs);
            int j = 0;
            while (j < bs && y[j] == z[j]) j++;
            if (!round_trip_holds(type, b)) {
                n_other++;
                exact_other += j == bs;
                continue;
            }
            n_req++;
            CHECK_MSG(j == bs, "%s round trip, block %d (%s): value %d was %g, became %g", rkm_type_name(type), i,
                      i < N_OWN ? "ours" : "random", j, (double)y[j], (double)z[j]);
        }
        if (n_req)
            printf("round trip %-7s %5ld blocks exact as required; %ld of the %ld others exact\n", rkm_type_name(type),
                   n_req, exact_other, n_other);
        else
            printf("round trip %-7s not required (see round_trip_holds): %ld of %ld exact\n", rkm_type_name(type),
                   exact_other, n_other);
    }
}

/* --------------------------------------------------------- edge cases */

enum { N_EDGE = 14 };

/* Edge case k: 256 values; returns 1 if they are all finite. */
static int edge_input(int k, float *x)
{
    for (int j = 0; j < 256; j++) {
        const float g = gauss();
        float v = 0;
        switch (k) {
        case 0: v = 0.0f; break;
        case 1: v = -0.0f; break;
        case 2: v = j == 77 ? 1.0f : 0.0f; break;
        case 3: v = 1.0f; break;
        case 4: v = -3.0f; break;
        case 5: v = j % 2 ? FLT_TRUE_MIN : -FLT_TRUE_MIN * (float)(j % 5); break;
        case 6: v = 1e-30f * g; break;
        case 7: v = 1e30f * g; break;
        case 8: v = j % 2 ? FLT_MAX : -FLT_MAX; break;
        case 9: v = j % 3 ? FLT_MAX * 0.999f * (j % 7 ? 1 : -1) : 1e-38f; break;
        case 10: v = j == 5 ? 1e20f : g; break;
        case 11: v = j % 32 ? g : 70000.0f * g; break;
        case 12: v = j == 9 ? NAN : g; break;
        case 13: v = j == 200 ? -INFINITY : j == 3 ? INFINITY : g; break;
        }
        x[j] = v;
    }
    return k < 12;
}

static void check_edges(void)
{
    float x[256], y[256];
    uint8_t q[288], q2[288]; /* 256 values of the widest type, q8_0 */
    rng = 0xA4093822299F31D0ull;
    long n = 0;
    for (int k = 0; k < N_TYPES; k++) {
        const int type = any_type(k);
        const size_t bytes = rkm_type_row_bytes(type, 256);
        for (int e = 0; e < N_EDGE; e++) {
            const int finite = edge_input(e, x) && k < N_SEARCHED;
            rkm_quantize_row(type, x, q, 256);
            rkm_quantize_row(type, x, q2, 256);
            CHECK_MSG(!memcmp(q, q2, bytes), "%s edge case %d: not deterministic", rkm_type_name(type), e);
            rkm_dequantize_row(type, q, y, 256);
            int ok = 1;
            for (int j = 0; j < 256 && finite; j++) ok &= isfinite(y[j]);
            CHECK_MSG(ok, "%s edge case %d: a finite input decodes to a non-finite value", rkm_type_name(type), e);
            if (e < 2)
                for (int j = 0; j < 256; j++) ok &= y[j] == 0.0f;
            CHECK_MSG(ok, "%s edge case %d: zeros do not decode to zeros", rkm_type_name(type), e);
            n++;
        }
    }
    printf("edge cases: %ld (type, case) pairs: deterministic, zeros kept, finite for the searched types\n", n);
}

/* ------------------------------------------------------------ threads */

typedef struct {
    const float *x;
    uint8_t *q[N_SEARCHED];
    int rows;
} thread_job;

static void *quantize_all(void *arg)
{
    thread_job *j = arg;
    for (int k = 0; k < N_SEARCHED; k++) quantize_rows(searched[k], j->x, j->q[k], j->rows);
    return NULL;
}

static void check_threads(void)
{
    enum { ROWS = 4 };
    float *x = malloc((size_t)ROWS * N_PER_ROW * sizeof *x);
    thread_job jobs[3] = {{0}};
    int ok = x != NULL;
    for (int t = 0; t < 3 && ok; t++)
        for (int k = 0; k < N_SEARCHED && ok; k++) ok = (jobs[t].q[k] = malloc(rkm_type_row_bytes(searched[k], N_PER_ROW) * ROWS)) != NULL;
    CHECK(ok);
    if (ok) {
        rng = 0x082EFA98EC4E6C89ull;
        fill_llm(x, ROWS);
        for (int t = 0; t < 3; t++) jobs[t].x = x, jobs[t].rows = ROWS;
        quantize_all(&jobs[0]);
        pthread_t th[2];
        for (int t = 0; t < 2; t++) CHECK_EQ_INT(pthread_create(&th[t], NULL, quantize_all, &jobs[1 + t]), 0);
        for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
        for (int t = 1; t < 3; t++)
            for (int k = 0; k < N_SEARCHED; k++)
                CHECK_MSG(!memcmp(jobs[0].q[k], jobs[t].q[k], rkm_type_row_bytes(searched[k], N_PER_ROW) * ROWS),
                          "%s: thread %d's bytes differ", rkm_type_name(searched[k]), t);
        printf("threads: 2 concurrent quantizations equal the single-threaded bytes\n");
    }
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < N_SEARCHED; k++) free(jobs[t].q[k]);
    free(x);
}

/* --------------------------------------------------------------- ggml */

/* Every distribution through ours and ggml's: the error ratio and the
 * bytes. Returns the number of values quantized per type. */
static long compare_ggml(const test_ggml *gg)
{
    int max_rows = 0;
    for (int d = 0; d < N_DISTS; d++) max_rows = dists[d].rows > max_rows ? dists[d].rows : max_rows;
    const int64_t cap = (int64_t)max_rows * N_PER_ROW;
    float *x[N_DISTS] = {0}, *y = malloc((size_t)cap * sizeof *y);
    uint8_t *qa = malloc((size_t)cap * 4), *qb = malloc((size_t)cap * 4);
    int ok = y && qa && qb;
    rng = 0xBE5466CF34E90C6Cull;
    for (int d = 0; d < N_DISTS && ok; d++) {
        ok = (x[d] = malloc((size_t)dists[d].rows * N_PER_ROW * sizeof *x[d])) != NULL;
        if (ok) dists[d].fill(x[d], dists[d].rows);
    }
    CHECK(ok);
    long values = 0;
    for (int d = 0; d < N_DISTS && ok; d++) values += (long)dists[d].rows * N_PER_ROW;
    printf("\n%-7s %-12s %10s %10s %7s  %s\n", "type", "distribution", "rkmojo", "ggml", "ratio", "blocks equal to ggml's");
    for (int k = 0; k < N_TYPES && ok; k++) {
        const int type = any_type(k);
        const struct ggml_traits *t = gg->traits(type);
        CHECK_MSG(t && t->blck_size == rkm_type_block_size(type) && t->type_size == rkm_type_block_bytes(type),
                  "%s: ggml's block differs", rkm_type_name(type));
        CHECK_MSG(!gg->requires_imatrix(type), "%s: ggml requires an importance matrix", rkm_type_name(type));
        for (int d = 0; d < N_DISTS; d++) {
            const int rows = dists[d].rows;
            const int64_t n = (int64_t)rows * N_PER_ROW;
            const long nb = (long)(n / rkm_type_block_size(type));
            quantize_rows(type, x[d], qa, rows);
            const size_t bytes = gg->quantize_chunk(type, x[d], qb, 0, rows, N_PER_ROW, NULL);
            CHECK_EQ_INT(bytes, rkm_type_row_bytes(type, N_PER_ROW) * rows);
            const double ea = rel_rms(type, qa, x[d], n, y), eb = rel_rms(type, qb, x[d], n, y);
            const double ratio = eb > 0 ? ea / eb : ea > 0 ? INFINITY : 1.0;
            long first;
            const long differ = blocks_differ(type, qa, qb, nb, &first);
            printf("%-7s %-12s %10.6f %10.6f %7.4f  %ld/%ld\n", rkm_type_name(type), dists[d].name, ea, eb, ratio,
                   nb - differ, nb);
            CHECK_MSG(ratio <= 1.02, "%s on %s: error %g is %.4f x ggml's %g", rkm_type_name(type), dists[d].name, ea,
                      ratio, eb);
            CHECK_MSG(!differ, "%s on %s: %ld of %ld blocks differ from ggml's, the first block %ld", rkm_type_name(type),
                      dists[d].name, differ, nb, first);
        }
    }
    for (int d = 0; d < N_DISTS; d++) free(x[d]);
    free(y);
    free(qa);
    free(qb);
    return values;
}

/* Blocks of uniform values times 2^e, e over the whole float range: ours
 * equal ggml's bytes except where ggml's decode to a non-finite value (its
 * f16 scales overflow; the searched types' saturate) or the values are
 * below 1e-30 (its inverse scales overflow to inf, which its rounding maps
 * to the lowest level, or its casts of inf and NaN are undefined; MXFP4's
 * exponent cast is undefined below 2^-125; ours clamp). The searched
 * types' always decode to finite values; the reference types keep ggml's
 * bytes, overflowing scale included. */
static void check_ggml_extremes(const test_ggml *gg)
{
    enum { N_BLOCKS = 1500 };
    float x[256], y[256];
    uint8_t qa[256], qb[256];
    rng = 0x3F84D5B5B5470917ull;
    printf("\n");
    for (int k = 0; k < N_TYPES; k++) {
        const int type = any_type(k), bs = rkm_type_block_size(type);
        const size_t bb = rkm_type_block_bytes(type);
        long same = 0, ggml_inf = 0, tiny = 0;
        for (int i = 0; i < N_BLOCKS; i++) {
            const float scale = ldexpf(1.0f, (int)(rnd() % 277) - 149);
            float amax = 0;
            for (int j = 0; j < bs; j++) {
                x[j] = unif() * scale;
                amax = fmaxf(amax, fabsf(x[j]));
            }
            rkm_quantize_row(type, x, qa, bs);
            gg->quantize_chunk(type, x, qb, 0, 1, bs, NULL);
            rkm_dequantize_row(type, qa, y, bs);
            int finite = 1;
            for (int j = 0; j < bs; j++) finite &= isfinite(y[j]);
            CHECK_MSG(finite || k >= N_SEARCHED, "%s: values of magnitude %g decode to a non-finite value",
                      rkm_type_name(type), (double)amax);
            if (!memcmp(qa, qb, bb)) {
                same++;
                continue;
            }
            finite = 1;
            rkm_dequantize_row(type, qb, y, bs);
            for (int j = 0; j < bs; j++) finite &= isfinite(y[j]);
            ggml_inf += !finite;
            tiny += finite && amax < 1e-30f;
            CHECK_MSG(!finite || amax < 1e-30f, "%s: block of magnitude %g differs from ggml's", rkm_type_name(type),
                      (double)amax);
        }
        printf("magnitudes 2^-149..2^127 %-7s %4ld blocks equal to ggml's, %ld differ where ggml's decode to inf/NaN, "
               "%ld below 1e-30\n",
               rkm_type_name(type), same, ggml_inf, tiny);
    }
}

int main(void)
{
    const char *lib;
    const test_ggml *gg = test_ggml_open(&lib);
    check_golden(gg);
    check_round_trip();
    check_edges();
    check_threads();
    if (!gg) {
        if (test_failures) return test_done();
        printf("%s missing or not loadable (x86-64 only; npm install in tests/js, or set RKM_GGML_LIB): "
               "ggml comparison skipped\n", lib);
        return 77;
    }
    const long values = compare_ggml(gg);
    check_ggml_extremes(gg);
    printf("%ld values per type compared with %s\n", values, gg->path);
    return test_done();
}
