/*
 * test-kernels.c - every kernel implementation this CPU can run (ref, and
 * avx2/avx512/avx512vnni on x86 or neon/dotprod on ARM) against an exact
 * float64 computation and against the scalar reference, at odd sizes.
 *
 * Tolerances come from the arithmetic, not from observation:
 *  - Quantized matmuls multiply int8 values exactly in integers; only the
 *    per-block float terms t_b = sumi_b * (dw_b * dx_b) are rounded and
 *    summed in some order. A SIMD kernel may keep a block's integer sum in
 *    up to 16 lanes and convert each lane to float, then reduce the lanes
 *    at the end: a summation tree of depth <= nb + 16 over terms whose
 *    absolute values add up to at most A = sum_b |dw_b dx_b| sum_j |qw qx|.
 *    Any such sum is within (depth + 2) * u * A of the exact value (u =
 *    2^-24; +2 for rounding the scale product and each term), so every
 *    variant is checked against the float64 sum with (nb + 18) u A.
 *  - F32/F16 matmuls: the same bound with the n_in products w_k * x_k.
 *  - Activation quantization must be bit-identical to the portable ggml-style
 *    reference quantizer (rkm_quantize_row_q8_0, quant.c), in every variant.
 *  - f16 conversions are exact (round to nearest even) and must match the
 *    portable converter bit for bit (NaN only as NaN).
 *  - Element ops with transcendental functions allow the documented error
 *    of the vector exp/tanh approximations (a few ulp) on top of the
 *    reduction bound.
 *  - Packed weights (kernels.h): pack.c against the layout as documented
 *    (an independent byte map); every variant's packed kernels within the
 *    same bound and bit-identical to the reference's packed kernel (they
 *    all compute the reference's way), also on a matrix split at a group
 *    boundary; tail rows identical to the same variant's plain kernel.
 * Runs single-threaded and with pools of 2 and 3 threads.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "common/test.h"
#include "kernels/kernels_impl.h"
#include "kernels/membw.h"
#include "util/common.h"

static const double U = 1.0 / 16777216.0; /* float unit roundoff 2^-24 */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
/* uniform in [-1, 1) */
static float rng_f(void) { return (float)((double)rng_u32() / 2147483648.0 - 1.0); }

static void fill(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++) x[i] = rng_f() * scale;
    /* some exact zeros and a zero block, which gives d = 0 */
    if (n >= 64) {
        for (int j = 0; j < 32; j++) x[32 + j] = 0.0f;
    }
    if (n > 5) x[5] = 0.0f;
}

/* ------------------------------------------------------ quantization */
static void test_quantize(const char *variant)
{
    const rkm_kernel_set *k = rkm_kernels_active();
    const int64_t sizes[] = {32, 64, 96, 160, 4096};
    for (size_t si = 0; si < RKM_ARRAY_LEN(sizes); si++) {
        int64_t n = sizes[si], nb = n / 32;
        float *x = malloc(sizeof(float) * (size_t)n);
        fill(x, n, si == 4 ? 100.0f : 1.0f);
        /* exact ties: x * (1/d) lands on .5 for these */
        if (n >= 96) {
            for (int j = 0; j < 32; j++) x[64 + j] = (float)(j - 16) * 0.5f;
            x[64] = 127.0f;
        }
        rkm_block_q8_0 *ref = malloc(sizeof *ref * (size_t)nb);
        rkm_quantize_row_q8_0(x, ref, n);
        int8_t *qs = malloc((size_t)n);
        float *d = malloc(sizeof(float) * (size_t)nb);
        int32_t *s = malloc(sizeof(int32_t) * (size_t)nb);
        k->quantize_act(x, n, qs, d, s);
        int bad = 0;
        for (int64_t b = 0; b < nb; b++) {
            int32_t sum = 0;
            for (int j = 0; j < 32; j++) {
                if (qs[b * 32 + j] != ref[b].qs[j]) bad++;
                sum += ref[b].qs[j];
            }
            if (d[b] != rkm_f16_to_f32(ref[b].d)) bad++;
            if (s[b] != sum) bad++;
        }
        CHECK_MSG(bad == 0, "%s: quantize n=%lld: %d mismatches", variant, (long long)n, bad);
        free(x);
        free(ref);
        free(qs);
        free(d);
        free(s);
    }
}

/* ------------------------------------------------------------- matmul */
typedef struct {
    int wtype;
    int64_t n_in, n_out, m;
    void *w;
    float *x;
    double *exact; /* [m][n_out] */
    double *bound; /* [m][n_out] allowed |y - exact| */
} mm_case;

static void mm_case_free(mm_case *c)
{
    free(c->w);
    free(c->x);
    free(c->exact);
    free(c->bound);
}

static void mm_case_make(mm_case *c, int wtype, int64_t n_in, int64_t n_out, int64_t m)
{
    c->wtype = wtype;
    c->n_in = n_in;
    c->n_out = n_out;
    c->m = m;
    size_t row = rkm_type_row_bytes(wtype, n_in);
    c->w = malloc(row * (size_t)n_out);
    c->x = malloc(sizeof(float) * (size_t)(n_in * m));
    c->exact = malloc(sizeof(double) * (size_t)(n_out * m));
    c->bound = malloc(sizeof(double) * (size_t)(n_out * m));
    float *wf = malloc(sizeof(float) * (size_t)n_in);
    float *wd = malloc(sizeof(float) * (size_t)(n_in * n_out)); /* dequantized */
    for (int64_t r = 0; r < n_out; r++) {
        fill(wf, n_in, 0.5f);
        if (r == 2) memset(wf, 0, sizeof(float) * (size_t)n_in); /* all-zero row */
        rkm_quantize_row(wtype, wf, (char *)c->w + row * (size_t)r, n_in);
        if (wtype == RKM_TYPE_MXFP4 && r % 4 == 3) { /* scales at the ends of the range: subnormal 2^-128, 2^-127 */
            static const uint8_t ex[] = {0, 1, 2, 3, 60, 200};
            for (int64_t b = 0; b < n_in / 32; b++) ((uint8_t *)c->w)[row * (size_t)r + 17 * (size_t)b] = ex[(r / 4 + b) % 6];
        }
        rkm_dequantize_row(wtype, (char *)c->w + row * (size_t)r, wd + r * n_in, n_in);
    }
    fill(c->x, n_in * m, 3.0f);
    int64_t nb = n_in / 32;
    rkm_block_q8_0 *xq = malloc(sizeof *xq * (size_t)nb);
    for (int64_t i = 0; i < m; i++) {
        const float *x = c->x + i * n_in;
        const int q8x = wtype == RKM_TYPE_Q8_0 || wtype == RKM_TYPE_Q4_0 || wtype == RKM_TYPE_MXFP4 ||
                        wtype == RKM_TYPE_IQ4_NL; /* q8_0 activations */
        if (q8x) rkm_quantize_row_q8_0(x, xq, n_in);
        for (int64_t r = 0; r < n_out; r++) {
            const float *w = wd + r * n_in;
            double sum = 0.0, abs_sum = 0.0;
            int64_t n_terms;
            if (q8x) {
                /* the weight's dequantized values are d_w * q exactly
                 * (an f16 or a power of two times a small integer fits a
                 * float) */
                for (int64_t b = 0; b < nb; b++) {
                    double t = 0.0, ta = 0.0;
                    for (int j = 0; j < 32; j++) {
                        t += (double)w[b * 32 + j] * (double)xq[b].qs[j];
                        ta += fabs((double)w[b * 32 + j] * (double)xq[b].qs[j]);
                    }
                    sum += t * rkm_f16_to_f32(xq[b].d);
                    abs_sum += ta * rkm_f16_to_f32(xq[b].d);
                }
                n_terms = nb + 18;
            } else {
                for (int64_t j = 0; j < n_in; j++) {
                    double t = (double)w[j] * (double)x[j];
                    sum += t;
                    abs_sum += fabs(t);
                }
                n_terms = n_in;
            }
            c->exact[i * n_out + r] = sum;
            c->bound[i * n_out + r] = (double)(n_terms + 2) * U * abs_sum + 1e-30;
        }
    }
    free(xq);
    free(wf);
    free(wd);
}

/* Runs the active variant on c with the pool and checks every output;
 * returns the number of bad outputs. ldy > n_out checks the stride. */
static int mm_case_check(const mm_case *c, rkm_pool *pool, const char *variant)
{
    int64_t ldy = c->n_out + 3;
    float *y = malloc(sizeof(float) * (size_t)(ldy * c->m));
    for (int64_t i = 0; i < ldy * c->m; i++) y[i] = 12345.0f;
    rkm_matmul(pool, c->wtype, c->w, c->n_in, c->n_out, c->x, c->m, y, ldy);
    int bad = 0;
    for (int64_t i = 0; i < c->m; i++) {
        for (int64_t r = 0; r < c->n_out; r++) {
            double e = c->exact[i * c->n_out + r], b = c->bound[i * c->n_out + r];
            double v = y[i * ldy + r];
            if (!(fabs(v - e) <= b)) {
                if (bad < 5)
                    fprintf(stderr,
                            "%s %s n_in=%lld n_out=%lld m=%lld nth=%d: y[%lld][%lld] = %.9g, exact %.9g, "
                            "bound %.3g\n",
                            variant, rkm_type_name(c->wtype), (long long)c->n_in,
                            (long long)c->n_out, (long long)c->m, rkm_pool_n_threads(pool),
                            (long long)i, (long long)r, v, e, b);
                bad++;
            }
        }
        for (int64_t r = c->n_out; r < ldy; r++)
            if (y[i * ldy + r] != 12345.0f) bad++; /* wrote past n_out */
    }
    free(y);
    return bad;
}

static int quick_mode(void)
{
    const char *q = getenv("RKM_TEST_QUICK");
    if (q) return strcmp(q, "0") != 0;
#if defined(__aarch64__)
    return 1; /* usually under qemu: keep the ARM CI short */
#else
    return 0;
#endif
}

static void test_matmul(const char **variants, int n_var, rkm_pool **pools, int n_pools)
{
    const int types[] = {RKM_TYPE_Q8_0, RKM_TYPE_Q4_0, RKM_TYPE_F32, RKM_TYPE_F16};
    const int64_t n_ins[] = {32, 64, 96, 160, 4096};
    const int64_t n_outs[] = {1, 3, 7, 15, 17, 31, 33, 63, 65};
    const int64_t ms[] = {1, 2, 3, 5, 8, 17, 33, 128};
    int quick = quick_mode();
    for (size_t ti = 0; ti < RKM_ARRAY_LEN(types); ti++) {
        int n_cases = 0, bad_total = 0;
        for (size_t a = 0; a < RKM_ARRAY_LEN(n_ins); a++)
            for (size_t b = 0; b < RKM_ARRAY_LEN(n_outs); b++)
                for (size_t cidx = 0; cidx < RKM_ARRAY_LEN(ms); cidx++) {
                    int64_t n_in = n_ins[a], n_out = n_outs[b], m = ms[cidx];
                    /* The big sizes cost the most and add the least: sample them. */
                    if (n_in == 4096 && (m > 33 || n_out > 33) && (b + cidx) % 3 != 0) continue;
                    /* qemu: every n_out and m at the small widths, a few at 4096 */
                    if (quick && (n_in * n_out * m > 4096 * 17 * 2 || (n_in > 32 && (b + cidx + a) % 2)))
                        continue;
                    mm_case c;
                    mm_case_make(&c, types[ti], n_in, n_out, m);
                    for (int v = 0; v < n_var; v++) {
                        rkm_kernels_select(variants[v]);
                        for (int p = 0; p < n_pools; p++) {
                            /* the pooled runs only on some shapes, to keep time */
                            if (p > 0 && (b + cidx) % (quick ? 4 : 2)) continue;
                            int bad = mm_case_check(&c, pools[p], variants[v]);
                            CHECK_MSG(bad == 0, "%s %s n_in=%lld n_out=%lld m=%lld nth=%d: %d bad",
                                      variants[v], rkm_type_name(types[ti]), (long long)n_in,
                                      (long long)n_out, (long long)m, rkm_pool_n_threads(pools[p]),
                                      bad);
                            bad_total += bad;
                        }
                    }
                    n_cases++;
                    mm_case_free(&c);
                }
        printf("matmul %s: %d shapes x %d variants, %d bad outputs\n", rkm_type_name(types[ti]),
               n_cases, n_var, bad_total);
        fflush(stdout);
    }
}

/* Variants must agree with each other on one large prefill shape too
 * (threads, tiling remainders): same bound, against the exact values. */
static void test_matmul_big(const char **variants, int n_var, rkm_pool *pool)
{
    const int types[] = {RKM_TYPE_Q8_0, RKM_TYPE_Q4_0};
    int64_t n_out = quick_mode() ? 13 : 259;
    for (size_t ti = 0; ti < RKM_ARRAY_LEN(types); ti++) {
        mm_case c;
        mm_case_make(&c, types[ti], quick_mode() ? 256 : 1024, n_out, quick_mode() ? 37 : 128);
        for (int v = 0; v < n_var; v++) {
            rkm_kernels_select(variants[v]);
            int bad = mm_case_check(&c, pool, variants[v]);
            CHECK_MSG(bad == 0, "%s %s big: %d bad", variants[v], rkm_type_name(types[ti]), bad);
        }
        mm_case_free(&c);
    }
}

/* --------------------------------------------------------- element ops */
static const int64_t op_sizes[] = {1, 3, 7, 15, 17, 31, 33, 63, 65, 128, 1029};

static void test_ops(const char *variant)
{
    const rkm_kernel_set *ref = &rkm_kernels_ref;
    for (size_t si = 0; si < RKM_ARRAY_LEN(op_sizes); si++) {
        int64_t n = op_sizes[si];
        size_t fb = sizeof(float) * (size_t)n;
        float *x = malloc(fb), *w = malloc(fb), *u = malloc(fb), *a = malloc(fb), *b = malloc(fb);
        fill(x, n, 4.0f);
        fill(w, n, 2.0f);
        fill(u, n, 3.0f);
        int bad;

        /* rmsnorm (with and without weight, in place): the sum of squares
         * may be summed in float lanes, relative error <= n u, halved by
         * the square root, plus a few roundings of the products. */
        for (int with_w = 0; with_w < 2; with_w++) {
            ref->rmsnorm(a, x, with_w ? w : NULL, n, 1e-6f);
            memcpy(b, x, fb);
            rkm_rmsnorm(b, b, with_w ? w : NULL, n, 1e-6f);
            bad = 0;
            for (int64_t i = 0; i < n; i++)
                if (!(fabs(a[i] - b[i]) <= ((double)n / 2 + 6) * U * fabs(a[i]) + 1e-30)) bad++;
            CHECK_MSG(bad == 0, "%s rmsnorm n=%lld w=%d: %d bad", variant, (long long)n, with_w, bad);
        }

        /* softmax: the vector exp is within 2 ulp; the sum of n terms
         * within n u relative. Also: outputs sum to 1. */
        memcpy(a, x, fb);
        memcpy(b, x, fb);
        if (n > 3) b[3] = a[3] = -1000.0f; /* underflows to 0 */
        ref->softmax(a, n);
        rkm_softmax(b, n);
        bad = 0;
        double tot = 0.0;
        for (int64_t i = 0; i < n; i++) {
            tot += b[i];
            if (!(fabs(a[i] - b[i]) <= ((double)n + 8) * U * fabs(a[i]) + 1e-37)) bad++;
        }
        CHECK_MSG(bad == 0, "%s softmax n=%lld: %d bad", variant, (long long)n, bad);
        CHECK_NEAR(tot, 1.0, ((double)n + 8) * U);

        /* swiglu: silu(g) * u = g * u / (1 + exp(-g)): a few ulp. Include
         * large |g| where exp overflows or underflows. */
        float *g = malloc(fb);
        fill(g, n, 12.0f);
        if (n > 2) {
            g[0] = 100.0f;
            g[1] = -100.0f;
            g[2] = -88.5f;
        }
        ref->swiglu(a, g, u, n);
        rkm_swiglu(b, g, u, n);
        bad = 0;
        for (int64_t i = 0; i < n; i++)
            if (!(fabs(a[i] - b[i]) <= 8 * U * fabs(a[i]) + 1e-37)) bad++;
        CHECK_MSG(bad == 0, "%s swiglu n=%lld: %d bad", variant, (long long)n, bad);

        /* geglu: 0.5 g (1 + tanh(z)) u. tanh within a few ulp in absolute
         * terms (|tanh| <= 1), so the error scales with |g u|, not with the
         * result, which cancels for negative g. */
        ref->geglu(a, g, u, n);
        rkm_geglu(b, g, u, n);
        bad = 0;
        for (int64_t i = 0; i < n; i++)
            if (!(fabs(a[i] - b[i]) <= 8 * U * fabs((double)g[i] * u[i]) + 1e-37)) bad++;
        CHECK_MSG(bad == 0, "%s geglu n=%lld: %d bad", variant, (long long)n, bad);
        /* gelu: the same with u = 1, in place */
        ref->gelu(a, g, n);
        memcpy(b, g, sizeof(float) * (size_t)n);
        rkm_gelu(b, b, n);
        bad = 0;
        for (int64_t i = 0; i < n; i++)
            if (!(fabs(a[i] - b[i]) <= 8 * U * fabs((double)g[i]) + 1e-37)) bad++;
        CHECK_MSG(bad == 0, "%s gelu n=%lld: %d bad", variant, (long long)n, bad);
        free(g);

        /* f16 round trips: exact. Include specials. */
        rkm_f16 *h1 = malloc(sizeof(rkm_f16) * (size_t)n), *h2 = malloc(sizeof(rkm_f16) * (size_t)n);
        memcpy(a, x, fb);
        const float specials[] = {65504.0f, 65520.0f, 1e-8f, -6.0e-8f, 3e-5f, INFINITY, -INFINITY,
                                  NAN, 1.0f + 1.0f / 2048.0f, -0.0f, 100000.0f, 2.9802322e-08f};
        for (size_t i = 0; i < RKM_ARRAY_LEN(specials) && (int64_t)i < n; i++)
            a[(int64_t)(i * 5) % n] = specials[i];
        ref->f32_to_f16(a, h1, n);
        rkm_f32_to_f16_row(a, h2, n);
        bad = 0;
        for (int64_t i = 0; i < n; i++) {
            int nan1 = (h1[i] & 0x7c00) == 0x7c00 && (h1[i] & 0x3ff);
            int nan2 = (h2[i] & 0x7c00) == 0x7c00 && (h2[i] & 0x3ff);
            if (nan1 != nan2 || (!nan1 && h1[i] != h2[i])) bad++;
        }
        CHECK_MSG(bad == 0, "%s f32_to_f16 n=%lld: %d bad", variant, (long long)n, bad);
        for (int64_t i = 0; i < n; i++) h1[i] = (rkm_f16)rng_u32();
        ref->f16_to_f32(h1, a, n);
        rkm_f16_to_f32_row(h1, b, n);
        bad = 0;
        for (int64_t i = 0; i < n; i++)
            if (!(a[i] == b[i] || (isnan(a[i]) && isnan(b[i])))) bad++;
        CHECK_MSG(bad == 0, "%s f16_to_f32 n=%lld: %d bad", variant, (long long)n, bad);

        /* dot f32 . f16 and axpy: against float64. */
        ref->f32_to_f16(u, h1, n);
        double exact = 0.0, abs_sum = 0.0;
        for (int64_t i = 0; i < n; i++) {
            double t = (double)x[i] * rkm_f16_to_f32(h1[i]);
            exact += t;
            abs_sum += fabs(t);
        }
        float dot = rkm_dot_f32_f16(x, h1, n);
        CHECK_MSG(fabs(dot - exact) <= ((double)n + 2) * U * abs_sum + 1e-30,
                  "%s dot_f32_f16 n=%lld: %.9g vs %.9g", variant, (long long)n, dot, exact);
        memcpy(a, w, fb);
        rkm_axpy_f16(a, 0.37f, h1, n);
        bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = (double)w[i] + 0.37 * (double)rkm_f16_to_f32(h1[i]);
            double t = fabs(0.37 * (double)rkm_f16_to_f32(h1[i])) + fabs((double)w[i]);
            if (!(fabs(a[i] - e) <= 3 * U * t + 1e-30)) bad++;
        }
        CHECK_MSG(bad == 0, "%s axpy_f16 n=%lld: %d bad", variant, (long long)n, bad);
        free(h1);
        free(h2);
        free(x);
        free(w);
        free(u);
        free(a);
        free(b);
    }
}

/* ------------------------------------------------------ packed weights */
/* The packed layout, written from its description in kernels.h (not from
 * pack.c): where byte j (-sb..-1: the row's scale, sb bytes) of row r,
 * block b lands. */
static size_t packed_sb(int wtype)
{
    return wtype == RKM_TYPE_MXFP4 ? 1
           : wtype == RKM_TYPE_Q4_K || wtype == RKM_TYPE_Q5_K ? 16
           : wtype == RKM_TYPE_Q6_K ? 18
           : wtype == RKM_TYPE_IQ4_XS ? 8
           : wtype == RKM_TYPE_Q3_K ? 14
           : wtype == RKM_TYPE_Q2_K ? 20
                                      : 2;
}

/* the 256-value types, whose activations are q8_K */
static int packed_k(int wtype)
{
    return rkm_type_block_size(wtype) == 256;
}

/* the types whose packed layout places bytes by their plain offset j >= 0
 * (a head that is not first in the plain block) */
static int packed_by_plain_byte(int wtype)
{
    return wtype == RKM_TYPE_Q6_K || wtype == RKM_TYPE_Q3_K || wtype == RKM_TYPE_Q2_K;
}

static size_t packed_offset(int wtype, int64_t n_in, int64_t r, int64_t b, int j)
{
    const size_t sb = packed_sb(wtype), blk = rkm_type_block_bytes(wtype);
    size_t rb = rkm_type_row_bytes(wtype, n_in), bb = 16 * blk;
    size_t g0 = (size_t)(r / 16) * 16 * rb + (size_t)b * bb;
    size_t rr = (size_t)(r % 16);
    if (j < 0 && (wtype == RKM_TYPE_Q4_K || wtype == RKM_TYPE_Q5_K || wtype == RKM_TYPE_IQ4_XS)) {
        /* d, dmin (IQ4_XS: scales_h), then scale byte k, each field for the 16 rows */
        int h = j + (int)sb;
        if (h < 4) return g0 + 32 * (size_t)(h / 2) + 2 * rr + (size_t)(h % 2);
        return g0 + 64 + 16 * (size_t)(h - 4) + rr;
    }
    if (wtype == RKM_TYPE_Q3_K) { /* j: the plain block's byte; hmask and qs (0..95) as words, then scale bytes, d */
        if (j < 96) return g0 + 224 + 64 * (size_t)(j / 4) + 4 * rr + (size_t)(j % 4);
        if (j < 108) return g0 + 32 + 16 * (size_t)(j - 96) + rr;
        return g0 + 2 * rr + (size_t)(j - 108);
    }
    if (wtype == RKM_TYPE_Q2_K) { /* j: the plain block's byte; scale bytes, qs (16..79) as words, d, dmin */
        if (j < 16) return g0 + 64 + 16 * (size_t)j + rr;
        if (j < 80) return g0 + 320 + 64 * (size_t)((j - 16) / 4) + 4 * rr + (size_t)((j - 16) % 4);
        if (j < 82) return g0 + 2 * rr + (size_t)(j - 80);
        return g0 + 32 + 2 * rr + (size_t)(j - 82);
    }
    if (wtype == RKM_TYPE_Q6_K) { /* j: the plain block's byte; ql and qh (0..191) as words, then scales, d */
        if (j < 192) return g0 + 288 + 64 * (size_t)(j / 4) + 4 * rr + (size_t)(j % 4);
        if (j < 208) return g0 + 32 + 16 * (size_t)(j - 192) + rr;
        return g0 + 2 * rr + (size_t)(j - 208);
    }
    if (j < 0) return g0 + sb * rr + (size_t)(j + (int)sb);
    return g0 + 16 * sb + 64 * (size_t)(j / 4) + 4 * rr + (size_t)(j % 4);
}

/* The packed copy of a plain matrix (rows past the last whole group plain). */
static void *packed_copy(int wtype, const void *w, int64_t n_in, int64_t n_out)
{
    size_t bytes = rkm_type_row_bytes(wtype, n_in) * (size_t)n_out;
    void *p = malloc(bytes);
    memcpy(p, w, bytes);
    CHECK_EQ_INT(rkm_pack_rows(wtype, p, n_in, n_out), 0);
    return p;
}

/* The row-batched attention entries against the same set's single-row
 * ones: bit-identical, for head sizes around the vector widths, row counts
 * 1..9 (the four-row blocks and their tails) and a stride wider than a
 * row (the kernels take any; the head-major KV cache passes the row). */
static void test_rows(const char *variant)
{
    static const int64_t dims[] = {1, 3, 7, 8, 15, 31, 32, 33, 63, 64, 65, 96, 127, 128, 129, 256};
    for (size_t di = 0; di < RKM_ARRAY_LEN(dims); di++) {
        int64_t n = dims[di], stride = n + 13;
        for (int64_t rows = 1; rows <= 9; rows += 2) {
            float *x = malloc(sizeof(float) * (size_t)n), *tmp = malloc(sizeof(float) * (size_t)(stride * rows));
            float *a = malloc(sizeof(float) * (size_t)rows), *o1 = malloc(sizeof(float) * (size_t)rows);
            float *o2 = malloc(sizeof(float) * (size_t)rows);
            float *y1 = malloc(sizeof(float) * (size_t)n), *y2 = malloc(sizeof(float) * (size_t)n);
            rkm_f16 *h = malloc(sizeof(rkm_f16) * (size_t)(stride * rows));
            fill(x, n, 2.0f);
            fill(tmp, stride * rows, 3.0f);
            fill(a, rows, 1.0f);
            fill(y1, n, 1.0f);
            memcpy(y2, y1, sizeof(float) * (size_t)n);
            rkm_f32_to_f16_row(tmp, h, stride * rows);
            for (int64_t r = 0; r < rows; r++) {
                o1[r] = rkm_dot_f32_f16(x, h + r * stride, n);
                rkm_axpy_f16(y1, a[r], h + r * stride, n);
            }
            rkm_dot_f32_f16_rows(x, h, stride, rows, n, o2);
            rkm_axpy_f16_rows(y2, a, h, stride, rows, n);
            CHECK_MSG(memcmp(o1, o2, sizeof(float) * (size_t)rows) == 0, "%s dot_f32_f16_rows n=%lld rows=%lld",
                      variant, (long long)n, (long long)rows);
            CHECK_MSG(memcmp(y1, y2, sizeof(float) * (size_t)n) == 0, "%s axpy_f16_rows n=%lld rows=%lld", variant,
                      (long long)n, (long long)rows);
            free(x), free(tmp), free(a), free(o1), free(o2), free(y1), free(y2), free(h);
        }
    }
}

/* The bandwidth probe's read: every set's sum equals a plain wrapping sum,
 * for one stream and four, at sizes from one 512-byte run up; and the
 * probe built on it reports a positive figure on 1-3 threads, and its
 * read of a list of ranges (the weights pass) reads each range's aligned
 * part once. */
static void test_read_sum(const char *variant)
{
    static const size_t sizes[] = {64, 128, 192, 4096 + 64, 65536};
    for (size_t si = 0; si < RKM_ARRAY_LEN(sizes); si++) {
        size_t n = sizes[si];
        uint64_t *p = rkm_alloc_aligned(n * 8, 64), want = 0;
        for (size_t i = 0; i < n; i++) want += p[i] = (i + 1) * 0x9e3779b97f4a7c15ull ^ (i << 40);
        for (int streams = 1; streams <= 4; streams += 3)
            CHECK_MSG(rkm_kernels_active()->read_sum(p, n, streams) == want, "%s read_sum n=%zu streams=%d",
                      variant, n, streams);
        rkm_free_aligned(p);
    }
}

/* The gated delta rule's step: every set gives the reference's bits (at
 * sizes with and without a partial block), and the reference is the
 * rule computed in double from its definition: the new state
 * decay*t + k d^T with d = (v - k^T decay t) beta, and o = q^T of it. */
static void test_delta_step(const char *variant)
{
    static const int64_t sizes[] = {128, 64, 40, 7, 1};
    for (size_t si = 0; si < RKM_ARRAY_LEN(sizes); si++) {
        int64_t n = sizes[si];
        size_t nn = (size_t)(n * n);
        float *t0 = malloc(sizeof(float) * nn), *t1 = malloc(sizeof(float) * nn), *t2 = malloc(sizeof(float) * nn);
        float q[128], k[128], v[128], o1[128], o2[128], d1[128], d2[128];
        for (size_t i = 0; i < nn; i++) t0[i] = rng_f();
        for (int64_t i = 0; i < n; i++) {
            q[i] = rng_f();
            k[i] = rng_f() * 0.3f;
            v[i] = rng_f();
        }
        float decay = 0.9f, beta = 0.7f, qk = 0;
        for (int64_t i = 0; i < n; i++) qk += q[i] * k[i];
        memcpy(t1, t0, sizeof(float) * nn);
        memcpy(t2, t0, sizeof(float) * nn);
        rkm_kernels_ref.delta_step(t1, q, k, v, decay, beta, qk, n, o1, d1);
        rkm_kernels_active()->delta_step(t2, q, k, v, decay, beta, qk, n, o2, d2);
        CHECK_MSG(!memcmp(t1, t2, sizeof(float) * nn) && !memcmp(o1, o2, sizeof(float) * (size_t)n),
                  "%s delta_step n=%lld differs from the reference", variant, (long long)n);
        double worst = 0;
        for (int64_t j = 0; j < n; j++) {
            double sk = 0;
            for (int64_t i = 0; i < n; i++) sk += (double)k[i] * decay * t0[i * n + j];
            double dj = ((double)v[j] - sk) * beta, oj = 0;
            for (int64_t i = 0; i < n; i++) {
                double ti = (double)decay * t0[i * n + j] + (double)k[i] * dj;
                worst = fmax(worst, fabs(ti - t1[i * n + j]));
                oj += (double)q[i] * ti;
            }
            worst = fmax(worst, fabs(oj - o1[j]));
        }
        CHECK_MSG(worst < 1e-3, "delta_step n=%lld: %g from the definition", (long long)n, worst);
        free(t0);
        free(t1);
        free(t2);
    }
}

/* The Mamba-2 scan step: the state equal to the reference's bit for bit,
 * the sum within float rounding of the double sum. */
static void test_scan_step(const char *variant)
{
    static const int64_t sizes[] = {128, 64, 37, 8, 3};
    for (size_t si = 0; si < RKM_ARRAY_LEN(sizes); si++) {
        int64_t n = sizes[si];
        float st1[128], st2[128], b[128], c[128];
        for (int64_t i = 0; i < n; i++) {
            st1[i] = st2[i] = rng_f();
            b[i] = rng_f();
            c[i] = rng_f();
        }
        float da = 0.93f, xdt = -0.41f;
        rkm_kernels_ref.scan_step(st1, b, c, da, xdt, n);
        float sum = rkm_kernels_active()->scan_step(st2, b, c, da, xdt, n);
        CHECK_MSG(!memcmp(st1, st2, sizeof(float) * (size_t)n), "%s scan_step n=%lld: the state differs", variant,
                  (long long)n);
        double exact = 0, abs_sum = 0;
        for (int64_t i = 0; i < n; i++) {
            exact += (double)st1[i] * c[i];
            abs_sum += fabs((double)st1[i] * c[i]);
        }
        CHECK_MSG(fabs(sum - exact) <= ((double)n + 2) * U * abs_sum + 1e-30, "%s scan_step n=%lld: %.9g vs %.9g",
                  variant, (long long)n, sum, exact);
    }
}

/* The causal convolution's step: outputs and window equal to the
 * reference's bit for bit (in place too, out = x), the outputs within
 * float rounding of the double sum, the window moved on by x. Several
 * steps, so the window carries earlier inputs. */
static void test_conv_step(const char *variant)
{
    static const int64_t chs[] = {8192 + 5, 64, 37, 8, 3};
    static const int ks[] = {4, 3, 2};
    for (size_t ci = 0; ci < RKM_ARRAY_LEN(chs); ci++)
        for (size_t ki = 0; ki < RKM_ARRAY_LEN(ks); ki++) {
            const int64_t ch = chs[ci];
            const int K = ks[ki];
            float *w = malloc(sizeof(float) * (size_t)(ch * K)), *w1 = malloc(sizeof(float) * (size_t)(ch * (K - 1))),
                  *w2 = malloc(sizeof(float) * (size_t)(ch * (K - 1))), *x = malloc(sizeof(float) * (size_t)ch),
                  *o1 = malloc(sizeof(float) * (size_t)ch), *o2 = malloc(sizeof(float) * (size_t)ch);
            for (int64_t i = 0; i < ch * K; i++) w[i] = rng_f();
            for (int64_t i = 0; i < ch * (K - 1); i++) w1[i] = w2[i] = rng_f();
            int bad = 0, worst = 0;
            for (int step = 0; step < 3; step++) {
                for (int64_t c = 0; c < ch; c++) x[c] = rng_f();
                double *exact = malloc(sizeof(double) * 2 * (size_t)ch), *mag = exact + ch;
                for (int64_t c = 0; c < ch; c++) {
                    exact[c] = (double)w[(K - 1) * ch + c] * x[c];
                    mag[c] = fabs(exact[c]);
                    for (int k = 0; k < K - 1; k++) {
                        exact[c] += (double)w[k * ch + c] * w1[k * ch + c];
                        mag[c] += fabs((double)w[k * ch + c] * w1[k * ch + c]);
                    }
                }
                rkm_kernels_ref.conv_step(w1, w, x, ch, K, o1);
                memcpy(o2, x, sizeof(float) * (size_t)ch);
                rkm_kernels_active()->conv_step(w2, w, o2, ch, K, o2); /* in place */
                bad += memcmp(o1, o2, sizeof(float) * (size_t)ch) != 0 || memcmp(w1, w2, sizeof(float) * (size_t)(ch * (K - 1))) != 0;
                for (int64_t c = 0; c < ch; c++) {
                    worst += fabs(o1[c] - exact[c]) > (K + 2) * U * mag[c] + 1e-30;
                    worst += w1[(K - 2) * ch + c] != x[c]; /* the newest input ends the window */
                }
                free(exact);
            }
            CHECK_MSG(bad == 0, "%s conv_step ch=%lld K=%d differs from the reference", variant, (long long)ch, K);
            CHECK_MSG(worst == 0, "%s conv_step ch=%lld K=%d: %d values off the definition", variant, (long long)ch, K, worst);
            free(w);
            free(w1);
            free(w2);
            free(x);
            free(o1);
            free(o2);
        }
}

static void test_membw(rkm_pool **pools, int n_pools)
{
    rkm_membw *b = rkm_membw_new((size_t)8 << 20);
    CHECK(b != NULL);
    for (int i = 0; b && i < n_pools; i++) {
        double g = rkm_membw_probe(b, pools[i], 0.01);
        CHECK_MSG(g > 0 && isfinite(g), "membw probe on pool %d: %g", i, g);
    }
    rkm_membw_free(b);

    /* ranges: each one's words from its first 64-byte boundary up to its
     * last whole 512 bytes are read once, whatever the thread count;
     * shorter ranges and a NULL-free empty list read nothing */
    size_t words = 1 << 16;
    uint64_t *w = rkm_alloc_aligned(words * 8, 64);
    for (size_t i = 0; i < words; i++) w[i] = (i + 7) * 0x9e3779b97f4a7c15ull ^ (i << 33);
    const uint8_t *base = (const uint8_t *)w;
    rkm_membw_range r[] = {
        {base, 512},                /* one run */
        {base + 8, 4096},           /* unaligned start: from byte 64, 4032 bytes -> 3584 */
        {base + 8192 + 64, 100000}, /* several runs, a tail left out */
        {base + 200000, 511},       /* too short: nothing */
        {base + 300000 + 3, 4609},  /* odd start and length */
    };
    uint64_t want = 0;
    for (size_t k = 0; k < RKM_ARRAY_LEN(r); k++) {
        uintptr_t a = RKM_ALIGN_UP((uintptr_t)r[k].p, 64), e = (uintptr_t)r[k].p + r[k].bytes;
        if (e < a + 512) continue;
        size_t nb = (e - a) & ~(uintptr_t)511;
        for (size_t i = 0; i < nb / 8; i++) want += ((const uint64_t *)a)[i];
    }
    for (int i = 0; i < n_pools; i++) {
        uint64_t got = 0;
        double t = rkm_membw_read_ranges(pools[i], r, (int)RKM_ARRAY_LEN(r), &got);
        CHECK_MSG(got == want && t >= 0, "read_ranges on pool %d: sum %llx, want %llx", i, (unsigned long long)got,
                  (unsigned long long)want);
        got = 1;
        rkm_membw_read_ranges(pools[i], r, 0, &got);
        CHECK_MSG(got == 0, "read_ranges of no range on pool %d", i);
    }
    rkm_free_aligned(w);
}

static void test_pack_layout(void)
{
    const int types[] = {RKM_TYPE_Q8_0, RKM_TYPE_Q4_0, RKM_TYPE_MXFP4, RKM_TYPE_IQ4_NL, RKM_TYPE_Q2_K,
                         RKM_TYPE_Q3_K, RKM_TYPE_Q4_K, RKM_TYPE_Q5_K, RKM_TYPE_Q6_K, RKM_TYPE_IQ4_XS};
    const char *names[] = {"q8_0_x16", "Q4_0_X16", "mxfp4_X16", "iq4_nl_x16", "Q2_k_x16",
                           "q3_K_x16", "q4_k_x16", "Q5_K_x16", "q6_k_x16", "IQ4_XS_x16"};
    int bad = 0;
    for (size_t ti = 0; ti < RKM_ARRAY_LEN(types); ti++) {
        int t = types[ti];
        CHECK(rkm_pack_type(t, 15) == t);
        CHECK(rkm_pack_type(t, 16) == (t | RKM_TYPE_PACKED));
        CHECK(rkm_pack_type(RKM_TYPE_F16, 64) == RKM_TYPE_F16);
        CHECK(rkm_pack_type(RKM_TYPE_Q5_0, 64) == RKM_TYPE_Q5_0);
        CHECK(rkm_unpack_type(t | RKM_TYPE_PACKED) == t);
        CHECK(rkm_type_row_bytes(t | RKM_TYPE_PACKED, 512) == rkm_type_row_bytes(t, 512));
        CHECK(rkm_type_packed(t | RKM_TYPE_PACKED) && !rkm_type_packed(t) && !rkm_type_packed(RKM_TYPE_F16 | RKM_TYPE_PACKED));
        int64_t n_in = rkm_type_block_size(t) == 256 ? 512 : 96, n_out = 37;
        mm_case c;
        mm_case_make(&c, t, n_in, n_out, 1);
        uint8_t *p = packed_copy(t, c.w, n_in, n_out);
        const uint8_t *w = c.w;
        const int sb = (int)packed_sb(t);
        size_t rb = rkm_type_row_bytes(t, n_in), blk = rkm_type_block_bytes(t);
        const int j0 = packed_by_plain_byte(t) ? 0 : -sb; /* j is the plain byte */
        for (int64_t r = 0; r < n_out; r++)
            for (int64_t b = 0; b < n_in / rkm_type_block_size(t); b++)
                for (int j = j0; j < (int)blk + j0; j++) {
                    size_t plain = (size_t)r * rb + (size_t)b * blk + (size_t)(j - j0);
                    size_t off = r < 32 ? packed_offset(t, n_in, r, b, j) : plain; /* 37 rows: 2 groups + tail */
                    bad += p[off] != w[plain];
                }
        /* and back: unpacking restores the plain rows exactly */
        CHECK(rkm_unpack_rows(t, p, n_in, n_out) == 0);
        CHECK_MSG(!memcmp(p, w, rb * (size_t)n_out), "%s: unpack(pack(w)) != w", rkm_type_name(t));
        CHECK(!strcasecmp(rkm_type_name(t | RKM_TYPE_PACKED), names[ti]));
        CHECK(rkm_type_from_name(names[ti]) == (t | RKM_TYPE_PACKED));
        CHECK(rkm_type_row_bytes(t | RKM_TYPE_PACKED, n_in) == rb);
        free(p);
        mm_case_free(&c);
    }
    CHECK_MSG(bad == 0, "packed layout: %d bytes misplaced", bad);
    CHECK(rkm_pack_rows(RKM_TYPE_F32, NULL, 32, 16) == RKM_EINVAL);
    CHECK(rkm_unpack_rows(RKM_TYPE_F32, NULL, 32, 16) == RKM_EINVAL);
    CHECK(rkm_pack_rows(RKM_TYPE_Q5_0, NULL, 32, 16) == RKM_EINVAL);
}

/* Packed weights in every variant: within the float64 bound, and bit for
 * bit the reference's result (the packed kernels all compute the
 * reference's way), with any pool and when the matrix is split at a group
 * boundary (rkm_mm_multi's chunks); the tail rows equal the same variant's
 * plain kernel. */
static int packed_check(const mm_case *c, const float *y, const float *yref, const float *yp, int64_t ldy,
                        int64_t r_from, const char *what)
{
    int bad = 0;
    int64_t n_pk = c->n_out / 16 * 16;
    for (int64_t i = 0; i < c->m; i++) {
        for (int64_t r = r_from; r < c->n_out; r++) {
            float v = y[i * ldy + r];
            double e = c->exact[i * c->n_out + r], bd = c->bound[i * c->n_out + r];
            /* K-quants: bit-identity alone (the bound here assumes q8_0 or f32
             * activations; test-kernels-types bounds the plain reference) */
            int ok = packed_k(c->wtype) || fabs((double)v - e) <= bd;
            ok &= memcmp(&v, r < n_pk ? &yref[i * ldy + r] : &yp[i * ldy + r], sizeof v) == 0;
            if (!ok && bad < 3)
                fprintf(stderr, "%s %s n_in=%lld n_out=%lld m=%lld: y[%lld][%lld] = %.9g, ref %.9g, exact %.9g\n", what,
                        rkm_type_name(c->wtype), (long long)c->n_in, (long long)c->n_out, (long long)c->m, (long long)i,
                        (long long)r, v, r < n_pk ? yref[i * ldy + r] : yp[i * ldy + r], e);
            bad += !ok;
        }
        for (int64_t r = c->n_out; r < ldy; r++) bad += y[i * ldy + r] != 12345.0f;
    }
    return bad;
}

static void test_matmul_packed(const char **variants, int n_var, rkm_pool **pools, int n_pools)
{
    const int types[] = {RKM_TYPE_Q8_0, RKM_TYPE_Q4_0, RKM_TYPE_MXFP4, RKM_TYPE_IQ4_NL, RKM_TYPE_Q2_K,
                         RKM_TYPE_Q3_K, RKM_TYPE_Q4_K, RKM_TYPE_Q5_K, RKM_TYPE_Q6_K, RKM_TYPE_IQ4_XS};
    const int64_t n_ins[] = {32, 96, 160, 2048}, n_ins_k[] = {256, 512, 768, 2048};
    const int64_t n_outs[] = {16, 17, 31, 32, 47, 64, 97};
    const int64_t ms[] = {1, 2, 3, 5, 6, 8, 17, 33};
    int quick = quick_mode();
    for (size_t ti = 0; ti < RKM_ARRAY_LEN(types); ti++) {
        int t = types[ti], n_cases = 0, bad_total = 0;
        for (size_t a = 0; a < RKM_ARRAY_LEN(n_ins); a++)
            for (size_t b = 0; b < RKM_ARRAY_LEN(n_outs); b++)
                for (size_t ci = 0; ci < RKM_ARRAY_LEN(ms); ci++) {
                    const int kq = packed_k(t);
                    int64_t n_in = kq ? n_ins_k[a] : n_ins[a], n_out = n_outs[b], m = ms[ci];
                    const int pt = t | RKM_TYPE_PACKED; /* every set has its own kernel */
                    if (n_in == 2048 && (b + ci) % 3) continue;
                    if (quick && (b + ci + a) % 3) continue;
                    mm_case c;
                    mm_case_make(&c, t, n_in, n_out, m);
                    void *pw = packed_copy(t, c.w, n_in, n_out);
                    size_t rb = rkm_type_row_bytes(t, n_in);
                    int64_t ldy = n_out + 3;
                    size_t ysz = sizeof(float) * (size_t)(ldy * m);
                    float *yref = malloc(ysz), *y = malloc(ysz), *yp = malloc(ysz);
                    rkm_kernels_select("ref");
                    rkm_matmul(NULL, pt, pw, n_in, n_out, c.x, m, yref, ldy);
                    /* MXFP4, IQ4 and the K-quants (whose plain kernels all compute
                     * the reference's way): packing changes no result */
                    rkm_matmul(NULL, t, c.w, n_in, n_out, c.x, m, yp, ldy);
                    int same = 1;
                    if (t == RKM_TYPE_MXFP4 || t == RKM_TYPE_IQ4_NL || kq)
                        for (int64_t i = 0; i < m; i++)
                            same &= !memcmp(yref + i * ldy, yp + i * ldy, sizeof(float) * (size_t)(n_out / 16 * 16));
                    CHECK_MSG(same, "packed %s n_in=%lld n_out=%lld m=%lld: the packed reference differs from the plain one",
                              rkm_type_name(t), (long long)n_in, (long long)n_out, (long long)m);
                    for (int v = 0; v < n_var; v++) {
                        rkm_kernels_select(variants[v]);
                        rkm_matmul(NULL, t, c.w, n_in, n_out, c.x, m, yp, ldy); /* plain: the tail rows */
                        for (int pi = 0; pi < n_pools; pi++) {
                            for (int64_t k = 0; k < ldy * m; k++) y[k] = 12345.0f;
                            rkm_matmul(pools[pi], pt, pw, n_in, n_out, c.x, m, y, ldy);
                            int bad = packed_check(&c, y, yref, yp, ldy, 0, variants[v]);
                            if (n_out > 16) { /* rows 16.. on their own */
                                for (int64_t k = 0; k < ldy * m; k++) y[k] = 12345.0f;
                                rkm_matmul(pools[pi], n_out - 16 >= 16 ? pt : t, (const char *)pw + 16 * rb, n_in,
                                           n_out - 16, c.x, m, y + 16, ldy);
                                bad += packed_check(&c, y, yref, yp, ldy, 16, variants[v]);
                            }
                            CHECK_MSG(bad == 0, "%s packed %s n_in=%lld n_out=%lld m=%lld nth=%d: %d bad", variants[v],
                                      rkm_type_name(t), (long long)n_in, (long long)n_out, (long long)m,
                                      rkm_pool_n_threads(pools[pi]), bad);
                            bad_total += bad;
                        }
                    }
                    free(yref);
                    free(y);
                    free(yp);
                    free(pw);
                    mm_case_free(&c);
                    n_cases++;
                }
        printf("matmul packed %s: %d shapes x %d variants, %d bad outputs\n", rkm_type_name(t), n_cases, n_var,
               bad_total);
        fflush(stdout);
    }
}

/* rkm_matmul_reuse: the same floats as rkm_matmul, reusing the quantized
 * activations only while x, n_in and m stay and no begin/plain matmul
 * came in between. */
static void test_matmul_reuse(void)
{
    const int64_t n_in = 96, n_out = 33, m = 2;
    mm_case a, b;
    mm_case_make(&a, RKM_TYPE_Q4_0, n_in, n_out, m);
    mm_case_make(&b, RKM_TYPE_Q4_0, n_in, n_out, m);
    float *ya = malloc(sizeof(float) * (size_t)(n_out * m)), *yb = malloc(sizeof(float) * (size_t)(n_out * m));
    float *y = malloc(sizeof(float) * (size_t)(n_out * m)), *x = malloc(sizeof(float) * (size_t)(n_in * m));
    rkm_matmul(NULL, RKM_TYPE_Q4_0, a.w, n_in, n_out, a.x, m, ya, n_out);
    rkm_matmul(NULL, RKM_TYPE_Q4_0, a.w, n_in, n_out, b.x, m, yb, n_out);
    memcpy(x, a.x, sizeof(float) * (size_t)(n_in * m));
    rkm_matmul_reuse_begin();
    rkm_matmul_reuse(RKM_TYPE_Q4_0, a.w, n_in, n_out, x, m, y, n_out);
    CHECK(memcmp(y, ya, sizeof(float) * (size_t)(n_out * m)) == 0);
    /* same pointer, new contents: reused until begin says otherwise */
    memcpy(x, b.x, sizeof(float) * (size_t)(n_in * m));
    rkm_matmul_reuse(RKM_TYPE_Q4_0, a.w, n_in, n_out, x, m, y, n_out);
    CHECK(memcmp(y, ya, sizeof(float) * (size_t)(n_out * m)) == 0);
    rkm_matmul_reuse_begin();
    rkm_matmul_reuse(RKM_TYPE_Q4_0, a.w, n_in, n_out, x, m, y, n_out);
    CHECK(memcmp(y, yb, sizeof(float) * (size_t)(n_out * m)) == 0);
    /* a plain matmul in between uses the buffer: no reuse after it */
    rkm_matmul(NULL, RKM_TYPE_Q4_0, a.w, n_in, n_out, a.x, m, y, n_out);
    rkm_matmul_reuse(RKM_TYPE_Q4_0, a.w, n_in, n_out, x, m, y, n_out);
    CHECK(memcmp(y, yb, sizeof(float) * (size_t)(n_out * m)) == 0);
    /* another m: quantized again */
    rkm_matmul_reuse(RKM_TYPE_Q4_0, a.w, n_in, n_out, x, 1, y, n_out);
    CHECK(memcmp(y, yb, sizeof(float) * (size_t)n_out) == 0);
    free(ya);
    free(yb);
    free(y);
    free(x);
    mm_case_free(&a);
    mm_case_free(&b);
}

static void test_gelu_scalar(void)
{
    /* rkm_gelu_tanh against the formula in float64 */
    for (int i = -40; i <= 40; i++) {
        double x = i * 0.25;
        double e = 0.5 * x * (1.0 + tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
        CHECK_NEAR(rkm_gelu_tanh((float)x), e, 1e-6 * (1.0 + fabs(x)));
    }
    CHECK(rkm_gelu_tanh(0.0f) == 0.0f);
}

int main(void)
{
    const char *names[16];
    int n_var = rkm_kernels_list(names, 16);
    CHECK(n_var >= 1 && strcmp(names[n_var - 1], "ref") == 0);
    printf("default kernels: %s; testing:", rkm_kernels_name());
    for (int v = 0; v < n_var; v++) printf(" %s", names[v]);
    printf("\n");
    CHECK(rkm_kernels_select("no-such-isa") == RKM_EINVAL);

    test_gelu_scalar();
    for (int v = 0; v < n_var; v++) {
        CHECK_EQ_INT(rkm_kernels_select(names[v]), 0);
        CHECK(strcmp(rkm_kernels_name(), names[v]) == 0);
        test_quantize(names[v]);
        test_ops(names[v]);
        test_rows(names[v]);
        test_read_sum(names[v]);
        test_delta_step(names[v]);
        test_scan_step(names[v]);
        test_conv_step(names[v]);
        printf("ops %s: done\n", names[v]);
        fflush(stdout);
    }

    rkm_pool *pools[3] = {NULL, rkm_pool_new(2), rkm_pool_new(3)};
    CHECK(pools[1] && pools[2]);
    test_matmul(names, n_var, pools, 3);
    test_matmul_big(names, n_var, pools[1]);
    test_matmul_reuse();
    test_membw(pools, 3);
    test_pack_layout();
    test_matmul_packed(names, n_var, pools, 3);
    rkm_pool_free(pools[1]);
    rkm_pool_free(pools[2]);
    return test_done();
}
