/*
 * test-kernels-types.c - the matmuls of the weight types beyond q8_0 and
 * q4_0 (BF16, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4, and the
 * grid types IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) in
 * every kernel set this CPU can run, at odd sizes, single-threaded and with pools of 2 and 3:
 *  - the integer form of a block (rkm_qblock_unpack) against the
 *    ggml-identical decoder (rkm_dequantize_row, test-ggml-types.c): the
 *    same values up to the decoder's float rounding;
 *  - q8_K activations (rkm_quantize_act_k) as ggml's Q8_K: the value m of
 *    largest magnitude maps to -127, q = rint(x * -127/m), d = 1/(-127/m),
 *    sums of 16 right;
 *  - the reference kernel against a float64 sum of the decoder's weights
 *    times the activations the kernel was given: within (2 nb + 12) u A,
 *    where A is the sum of the magnitudes of every product and per-block
 *    term (each value of the decoder is within 3u of d sc q - dmin mn;
 *    each block adds two roundings to the running sum);
 *  - every other kernel set bit-identical to the reference (the types'
 *    contract in kernels_impl.h), at every m, row split and thread count;
 *  - BF16 (float accumulation, as F16): the F16 bound of test-kernels.c.
 * Weights are random bytes with their float scales set to finite values
 * of a few magnitudes (the integer fields take any bytes), and blocks with
 * every quant at its extreme.
 */
#include <math.h>
#include <stdint.h>

#include "common/test.h"
#include "kernels/kernels_impl.h"
#include "util/common.h"

static const double U = 1.0 / 16777216.0;

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint32_t rng_u32(void) { return test_rand(&rng_state); }
static float rng_f(void) { return (float)((double)rng_u32() / 2147483648.0 - 1.0); }

static const int types[] = {RKM_TYPE_Q4_1,   RKM_TYPE_Q5_0,   RKM_TYPE_Q5_1,  RKM_TYPE_Q2_K,   RKM_TYPE_Q3_K,   RKM_TYPE_Q4_K,  RKM_TYPE_Q5_K, RKM_TYPE_Q6_K,
                            RKM_TYPE_IQ4_NL, RKM_TYPE_IQ4_XS, RKM_TYPE_MXFP4, RKM_TYPE_IQ1_S,   RKM_TYPE_IQ1_M,  RKM_TYPE_IQ2_XXS,
                            RKM_TYPE_IQ2_XS, RKM_TYPE_IQ2_S,  RKM_TYPE_IQ3_XXS, RKM_TYPE_IQ3_S, RKM_TYPE_BF16};

/* Offsets of a block's f16 scales (d, and dmin or -1); -2: MXFP4's e8m0,
 * -3: IQ1_M's f16 in four nibbles. */
static void scale_fields(int type, int *d, int *dmin)
{
    *dmin = -1;
    switch (type) {
    case RKM_TYPE_Q2_K: *d = 80, *dmin = 82; break;
    case RKM_TYPE_Q3_K: *d = 108; break;
    case RKM_TYPE_Q4_K:
    case RKM_TYPE_Q5_K: *d = 0, *dmin = 2; break;
    case RKM_TYPE_Q6_K: *d = 208; break;
    case RKM_TYPE_MXFP4: *d = -2; break;
    case RKM_TYPE_IQ1_M: *d = -3; break;
    case RKM_TYPE_Q4_1:
    case RKM_TYPE_Q5_1: *d = 0, *dmin = 2; break;
    default: *d = 0; break;
    }
}

static void put_f16(uint8_t *p, float v)
{
    rkm_f16 h = rkm_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* n_out random rows of n_in values. Row 1 (if any) has every byte 0xff
 * (quants and scales at their maximum) but finite scales. */
static void *make_weights(int type, int64_t n_in, int64_t n_out)
{
    const size_t row = rkm_type_row_bytes(type, n_in);
    uint8_t *w = malloc(row * (size_t)n_out);
    if (type == RKM_TYPE_BF16) {
        for (int64_t i = 0; i < n_in * n_out; i++) {
            rkm_bf16 h = rkm_f32_to_bf16(rng_f() * 0.5f);
            w[2 * i] = (uint8_t)h, w[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return w;
    }
    for (size_t i = 0; i < row * (size_t)n_out; i++) w[i] = (uint8_t)rng_u32();
    if (n_out > 1) memset(w + row, 0xff, row);
    const size_t bb = rkm_type_block_bytes(type);
    int od, om;
    scale_fields(type, &od, &om);
    for (uint8_t *b = w; b < w + row * (size_t)n_out; b += bb) {
        /* magnitudes 2^-12 .. 2^-4, either sign */
        float mag = ldexpf(1.0f + rng_f() * 0.5f, -4 - (int)(rng_u32() % 9));
        if (od == -2) b[0] = (uint8_t)(120 + rng_u32() % 12);
        else if (od == -3) {
            /* the top nibbles of the u16 scales at 48, 50, 52, 54 */
            const rkm_f16 h = rkm_f32_to_f16(rng_u32() & 1 ? -mag : mag);
            for (int k = 0; k < 4; k++) b[49 + 2 * k] = (uint8_t)((b[49 + 2 * k] & 0x0f) | ((h >> 4 * k) & 0xf) << 4);
        } else
            put_f16(b + od, rng_u32() & 1 ? -mag : mag);
        if (om >= 0) put_f16(b + om, mag * 0.5f * rng_f());
    }
    return w;
}

static void test_unpack(void)
{
    for (size_t t = 0; t + 1 < RKM_ARRAY_LEN(types); t++) {
        const int type = types[t], bs = rkm_qblock_values(type);
        CHECK(bs == rkm_type_block_size(type));
        int64_t n = bs * 64;
        uint8_t *w = make_weights(type, n, 1);
        float y[256];
        int bad = 0;
        for (int64_t b = 0; b < 64; b++) {
            const uint8_t *blk = w + (size_t)b * rkm_type_block_bytes(type);
            rkm_qblock o;
            CHECK(rkm_qblock_unpack(type, blk, &o) == 0);
            rkm_dequantize_row(type, blk, y, bs);
            for (int k = 0; k < bs; k++) {
                double v = (double)o.d * o.sc[k / o.sub] * o.q[k] - (double)o.dmin * o.mn[k / o.sub];
                double mag = fabs((double)o.d * o.sc[k / o.sub] * o.q[k]) + fabs((double)o.dmin * o.mn[k / o.sub]);
                if (!(fabs(y[k] - v) <= 3 * U * mag)) bad++;
                if (!o.has_min && o.mn[k / o.sub]) bad++;
            }
        }
        CHECK_MSG(bad == 0, "%s: %d values differ from the decoder", rkm_type_name(type), bad);
        free(w);
    }
    rkm_qblock o;
    uint8_t junk[64] = {0};
    CHECK(rkm_qblock_unpack(RKM_TYPE_F16, junk, &o) == -1);
    CHECK(rkm_qblock_values(RKM_TYPE_TQ1_0) == 0);
}

static void test_act_k(void)
{
    const int64_t n = 1024;
    float *x = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++) x[i] = rng_f() * 7.0f;
    for (int j = 256; j < 512; j++) x[j] = 0.0f; /* a zero block: d = 0 */
    x[600] = -7.5f;                             /* the max is negative */
    int8_t qs[1024];
    float d[4];
    int32_t s[64];
    rkm_quantize_act_k(x, n, qs, d, s);
    CHECK(d[1] == 0.0f);
    for (int b = 0; b < 4; b++) {
        /* ggml's Q8_K: the largest magnitude m maps to -127, q = rint(x * -127/m) */
        float amax = 0.0f, mx = 0.0f;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[256 * b + j]) > amax) amax = fabsf(x[256 * b + j]), mx = x[256 * b + j];
        const float is = amax ? -127.0f / mx : 0.0f;
        CHECK(d[b] == (amax ? 1.0f / is : 0.0f));
        for (int j = 0; j < 256; j++) {
            int q = qs[256 * b + j];
            CHECK(q >= -127 && q <= 127);
            CHECK(q == (int)rintf(is * x[256 * b + j]));
            if (d[b] != 0.0f) CHECK(fabsf(x[256 * b + j] - q * d[b]) <= 0.5f * fabsf(d[b]) * (1.0f + 1e-5f));
        }
    }
    CHECK(qs[600] == -127 && d[2] > 0.0f); /* a negative max: positive d */
    /* every set's quantize_act_k bit-identical to the reference, on
     * random rows, exact .5 ties, equal magnitudes of both signs, zero
     * blocks and NaN */
    const char *names[16];
    int n_var = rkm_kernels_list(names, 16);
    for (int trial = 0; trial < 40; trial++) {
        for (int64_t i = 0; i < n; i++) x[i] = rng_f() * (trial % 3 ? 5.0f : 1e-3f);
        if (trial % 4 == 1) { /* ties: half-integers, and +-127 in each block so that -127/m = -+1 */
            for (int64_t i = 0; i < n; i++) x[i] = (float)((int)(rng_u32() % 254) - 127) + 0.5f;
            for (int64_t b = 0; b < n / 256; b++) x[256 * b + rng_u32() % 256] = rng_u32() & 1 ? 127.0f : -127.0f;
        }
        if (trial % 5 == 2) x[700] = -fabsf(x[701]) - 10.0f, x[701] = -x[700]; /* +-m, the first wins */
        if (trial % 7 == 3) for (int j = 512; j < 768; j++) x[j] = 0.0f;
        if (trial % 9 == 4) x[300] = NAN;
        int8_t q1[1024], q2[1024];
        float d1[4], d2[4];
        int32_t s1[64], s2[64];
        rkm_quantize_act_k(x, n, q1, d1, s1);
        for (int v = 0; v < n_var; v++) {
            rkm_kernels_select(names[v]);
            rkm_kernels_active()->quantize_act_k(x, n, q2, d2, s2);
            CHECK_MSG(!memcmp(q1, q2, sizeof q1) && !memcmp(d1, d2, sizeof d1) && !memcmp(s1, s2, sizeof s1),
                      "%s quantize_act_k differs from the reference (trial %d)", names[v], trial);
        }
    }
    rkm_kernels_select(names[0]);
    for (int g = 0; g < 64; g++) {
        int sum = 0;
        for (int j = 0; j < 16; j++) sum += qs[16 * g + j];
        CHECK(s[g] == sum);
    }
    free(x);
}

typedef struct {
    int type;
    int64_t n_in, n_out, m;
    void *w;
    float *x;
    double *exact, *bound;
} tcase;

/* The exact values and bounds from the decoder's weights and the
 * activations as the dispatcher quantizes them. */
static void tcase_make(tcase *c, int type, int64_t n_in, int64_t n_out, int64_t m)
{
    c->type = type, c->n_in = n_in, c->n_out = n_out, c->m = m;
    c->w = make_weights(type, n_in, n_out);
    c->x = malloc(sizeof(float) * (size_t)(n_in * m));
    for (int64_t i = 0; i < n_in * m; i++) c->x[i] = rng_f() * 3.0f;
    c->exact = malloc(sizeof(double) * (size_t)(n_out * m));
    c->bound = malloc(sizeof(double) * (size_t)(n_out * m));
    const size_t row = rkm_type_row_bytes(type, n_in), bb = rkm_type_block_bytes(type);
    const int bs = type == RKM_TYPE_BF16 ? 1 : rkm_qblock_values(type);
    const int64_t nbx = n_in / (bs == 256 ? 256 : 32) + 1, ngx = n_in / 16 + 1;
    float *wd = malloc(sizeof(float) * (size_t)n_in);
    int8_t *qs = malloc((size_t)(n_in * m));
    float *xd = malloc(sizeof(float) * (size_t)(nbx * m));
    int32_t *xs = malloc(sizeof(int32_t) * (size_t)(ngx * m));
    double *sum = malloc(sizeof(double) * (size_t)m), *mag = malloc(sizeof(double) * (size_t)m);
    double wa[256], wm[256]; /* |d sc q| and |dmin mn| of one block's values */
    for (int64_t i = 0; i < m; i++) {
        const float *x = c->x + i * n_in;
        if (bs == 256) rkm_quantize_act_k(x, n_in, qs + i * n_in, xd + i * nbx, xs + i * ngx);
        else if (bs == 32) rkm_quantize_act_ref(x, n_in, qs + i * n_in, xd + i * nbx, xs + i * ngx);
    }
    /* each weight row decoded once, for every activation row */
    for (int64_t r = 0; r < n_out; r++) {
        const uint8_t *wr = (const uint8_t *)c->w + row * (size_t)r;
        rkm_dequantize_row(type, wr, wd, n_in);
        for (int64_t i = 0; i < m; i++) sum[i] = mag[i] = 0.0;
        if (bs == 1) {
            for (int64_t i = 0; i < m; i++) {
                const float *x = c->x + i * n_in;
                for (int64_t k = 0; k < n_in; k++) {
                    sum[i] += (double)wd[k] * x[k];
                    mag[i] += fabs((double)wd[k] * x[k]);
                }
                c->bound[i * n_out + r] = (double)(n_in + 2) * U * mag[i] + 1e-30;
            }
        } else {
            for (int64_t b = 0; b < n_in / bs; b++) {
                rkm_qblock o;
                rkm_qblock_unpack(type, wr + (size_t)b * bb, &o);
                for (int k = 0; k < bs; k++) {
                    wa[k] = fabs((double)o.d * o.sc[k / o.sub] * o.q[k]);
                    wm[k] = fabs((double)o.dmin * o.mn[k / o.sub]);
                }
                for (int64_t i = 0; i < m; i++) {
                    const int8_t *q = qs + i * n_in + b * bs;
                    const float *wb = wd + b * bs;
                    double t = 0.0, ta = 0.0, tmin = 0.0;
                    int32_t qsum = 0;
                    for (int k = 0; k < bs; k++) {
                        t += (double)wb[k] * q[k];
                        ta += wa[k] * abs(q[k]);
                        tmin += wm[k] * abs(q[k]);
                        qsum += q[k];
                    }
                    if (o.has_min && bs == 32) {
                        /* Q4_1 / Q5_1: the min m times ggml's q8_1 s, the
                         * block's unrounded scale times its sum in f16 */
                        const float *xb = c->x + i * n_in + b * bs;
                        float amax = 0.0f;
                        for (int k = 0; k < bs; k++)
                            if (fabsf(xb[k]) > amax) amax = fabsf(xb[k]);
                        const double s16 = rkm_f16_to_f32(rkm_f32_to_f16(amax / 127.0f * (float)qsum));
                        const double mn = -(double)o.dmin;
                        sum[i] += (t - mn * qsum) * xd[i * nbx + b] + mn * s16;
                        mag[i] += (ta + 2 * tmin) * fabs(xd[i * nbx + b]) + fabs(mn * s16);
                    } else {
                        sum[i] += t * xd[i * nbx + b];
                        mag[i] += (ta + 2 * tmin) * fabs(xd[i * nbx + b]);
                    }
                }
            }
            for (int64_t i = 0; i < m; i++)
                c->bound[i * n_out + r] = (double)(2 * (n_in / bs) + 12) * U * mag[i] + 1e-30;
        }
        for (int64_t i = 0; i < m; i++) c->exact[i * n_out + r] = sum[i];
    }
    free(wd);
    free(qs);
    free(xd);
    free(xs);
    free(sum);
    free(mag);
}

static void tcase_free(tcase *c)
{
    free(c->w);
    free(c->x);
    free(c->exact);
    free(c->bound);
}

static float *run(const tcase *c, rkm_pool *pool, int64_t ldy)
{
    float *y = malloc(sizeof(float) * (size_t)(ldy * c->m));
    for (int64_t i = 0; i < ldy * c->m; i++) y[i] = 12345.0f;
    rkm_matmul(pool, c->type, c->w, c->n_in, c->n_out, c->x, c->m, y, ldy);
    return y;
}

static int quick_mode(void)
{
    const char *q = getenv("RKM_TEST_QUICK");
    if (q) return strcmp(q, "0") != 0;
#if defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}

static void test_matmul(const char **names, int n_var, rkm_pool **pools, int n_pools)
{
    const int64_t n_ins_k[] = {256, 512, 1280, 4096}, n_ins_32[] = {32, 96, 256, 1056};
    const int64_t n_outs[] = {1, 3, 4, 7, 16, 17, 33};
    const int64_t ms[] = {1, 2, 3, 4, 5, 8, 17};
    const int quick = quick_mode();
    for (size_t t = 0; t < RKM_ARRAY_LEN(types); t++) {
        const int type = types[t];
        const int64_t *n_ins = rkm_qblock_values(type) == 256 ? n_ins_k : n_ins_32;
        int n_cases = 0, bad_exact = 0, bad_ident = 0;
        for (int a = 0; a < 4; a++)
            for (size_t b = 0; b < RKM_ARRAY_LEN(n_outs); b++)
                for (size_t ci = 0; ci < RKM_ARRAY_LEN(ms); ci++) {
                    /* quick (qemu): a third of the shapes, the largest n_in only
                     * with n_out * m <= 64 (it still meets m = 17 and n_out = 33) */
                    if ((a == 3 && (b + ci) % 3) ||
                        (quick && ((a + b + ci) % 3 || (a == 3 && n_outs[b] * ms[ci] > 64))))
                        continue;
                    tcase c;
                    tcase_make(&c, type, n_ins[a], n_outs[b], ms[ci]);
                    const int64_t ldy = c.n_out + 3;
                    float *yref = NULL;
                    for (int v = n_var - 1; v >= 0; v--) { /* ref first */
                        rkm_kernels_select(names[v]);
                        for (int p = 0; p < n_pools; p++) {
                            if (p > 0 && (b + ci) % 2) continue;
                            float *y = run(&c, pools[p], ldy);
                            int bad = 0, diff = 0;
                            for (int64_t i = 0; i < c.m; i++) {
                                for (int64_t r = 0; r < c.n_out; r++) {
                                    double e = c.exact[i * c.n_out + r], bnd = c.bound[i * c.n_out + r];
                                    float vv = y[i * ldy + r];
                                    if (!(fabs(vv - e) <= bnd)) {
                                        if (bad < 3)
                                            fprintf(stderr, "%s %s n_in=%lld n_out=%lld m=%lld: y[%lld][%lld] = %.9g, exact %.9g, bound %.3g\n",
                                                    names[v], rkm_type_name(type), (long long)c.n_in, (long long)c.n_out,
                                                    (long long)c.m, (long long)i, (long long)r, vv, e, bnd);
                                        bad++;
                                    }
                                    if (yref && type != RKM_TYPE_BF16 && memcmp(&vv, &yref[i * ldy + r], 4)) diff++;
                                }
                                for (int64_t r = c.n_out; r < ldy; r++)
                                    if (y[i * ldy + r] != 12345.0f) bad++;
                            }
                            CHECK_MSG(bad == 0 && diff == 0, "%s %s n_in=%lld n_out=%lld m=%lld nth=%d: %d outside the bound, %d not bit-identical to ref",
                                      names[v], rkm_type_name(type), (long long)c.n_in, (long long)c.n_out, (long long)c.m,
                                      rkm_pool_n_threads(pools[p]), bad, diff);
                            bad_exact += bad;
                            bad_ident += diff;
                            if (!yref) yref = y;
                            else free(y);
                        }
                    }
                    free(yref);
                    tcase_free(&c);
                    n_cases++;
                }
        printf("matmul %s: %d shapes x %d sets, %d outside the bound, %d not bit-identical\n", rkm_type_name(type),
               n_cases, n_var, bad_exact, bad_ident);
        fflush(stdout);
    }
}

/* rkm_matmul_reuse keeps q8_K activations apart from q8_0 ones, and
 * Q4_1/Q5_1's min sums with the q8_0 ones. */
static void test_reuse(void)
{
    tcase a, b;
    tcase_make(&a, RKM_TYPE_Q4_K, 512, 8, 2);
    tcase_make(&b, RKM_TYPE_IQ4_NL, 512, 8, 2);
    memcpy(b.x, a.x, sizeof(float) * 1024);
    float y1[16], y2[16], y3[16];
    rkm_matmul(NULL, a.type, a.w, 512, 8, a.x, 2, y1, 8);
    rkm_matmul(NULL, b.type, b.w, 512, 8, a.x, 2, y2, 8);
    rkm_matmul_reuse_begin();
    rkm_matmul_reuse(a.type, a.w, 512, 8, a.x, 2, y3, 8);
    CHECK(memcmp(y1, y3, sizeof y1) == 0);
    rkm_matmul_reuse(b.type, b.w, 512, 8, a.x, 2, y3, 8);
    CHECK(memcmp(y2, y3, sizeof y2) == 0);
    rkm_matmul_reuse(a.type, a.w, 512, 8, a.x, 2, y3, 8);
    CHECK(memcmp(y1, y3, sizeof y1) == 0);
    /* Q5_1 reusing q8_0 activations quantized for IQ4_NL: its min sums
     * are filled then, and kept for the next Q5_1 */
    tcase c;
    tcase_make(&c, RKM_TYPE_Q5_1, 512, 8, 2);
    float y4[16];
    rkm_matmul(NULL, c.type, c.w, 512, 8, a.x, 2, y4, 8);
    rkm_matmul(NULL, c.type, c.w, 512, 8, c.x, 2, y3, 8); /* other sums in the scratch */
    rkm_matmul_reuse_begin();
    rkm_matmul_reuse(b.type, b.w, 512, 8, a.x, 2, y3, 8);
    CHECK(memcmp(y2, y3, sizeof y2) == 0);
    for (int k = 0; k < 2; k++) {
        rkm_matmul_reuse(c.type, c.w, 512, 8, a.x, 2, y3, 8);
        CHECK(memcmp(y4, y3, sizeof y4) == 0);
    }
    tcase_free(&a);
    tcase_free(&b);
    tcase_free(&c);
}

int main(void)
{
    const char *names[16];
    int n_var = rkm_kernels_list(names, 16);
    printf("testing:");
    for (int v = 0; v < n_var; v++) printf(" %s", names[v]);
    printf("\n");
    for (size_t t = 0; t < RKM_ARRAY_LEN(types); t++) CHECK(rkm_type_matmul(types[t]));
    CHECK(!rkm_type_matmul(RKM_TYPE_TQ1_0) && !rkm_type_matmul(RKM_TYPE_TQ2_0) && !rkm_type_matmul(-1));
    test_unpack();
    test_act_k();
    rkm_pool *pools[3] = {NULL, rkm_pool_new(2), rkm_pool_new(3)};
    CHECK(pools[1] && pools[2]);
    test_matmul(names, n_var, pools, 3);
    test_reuse();
    rkm_pool_free(pools[1]);
    rkm_pool_free(pools[2]);
    return test_done();
}
