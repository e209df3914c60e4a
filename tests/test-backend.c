/*
 * test-backend.c - the matmul backends: the rknn_i8 weight type (layout,
 * quantization, CPU kernel), the NPU engine against the emulated
 * librknnrt.so ($RKM_BUILD/tests/librknnrt.so, whose ABI declarations are
 * written apart from the backend's, tests/rknn/README.md), backend selection and
 * its reasons, an end-to-end generation on the NPU vs the CPU, and the
 * quality of rknn_i8 experts on the llama.cpp fixtures.
 *
 * Sections needing the emulator skip (with a message) when it is absent.
 * Environment set here: RKM_RKNN_LIB, RKM_RKNN_CHIP, RKNN_EMU_CHIP.
 */
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/rknn.h"
#include "kernels/rknn_i8.h"
#include "common/test.h"
#include "rkmojo.h"
#include "runtime/model.h"
#include "util/knobs.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float frnd(void) { return (float)(rnd() % 20001) / 10000.0f - 1.0f; }

/* ------------------------------------------------------------ layout */

/* The native B layout written as the four nested dims (N/32, K/32, 32,
 * 32): a running pointer, not an index formula. */
static void test_layout(void)
{
    const int K = 96, N = 64;
    float *w = malloc(sizeof(float) * K * N);
    int8_t *want = malloc((size_t)K * N);
    /* integer values with every row reaching 127: scale 1, q = w exactly */
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) w[n * K + k] = k == n % K ? 127.0f : (float)((int)(rnd() % 255) - 127);
    int8_t *p = want;
    for (int nt = 0; nt < N / 32; nt++)
        for (int kt = 0; kt < K / 32; kt++)
            for (int ni = 0; ni < 32; ni++)
                for (int ki = 0; ki < 32; ki++) *p++ = (int8_t)w[(nt * 32 + ni) * K + kt * 32 + ki];
    uint8_t *packed = malloc(rkm_rknn_i8_bytes(K, N));
    rkm_rknn_i8_pack(w, K, N, packed);
    CHECK(memcmp(packed, want, (size_t)K * N) == 0);
    const float *sc = rkm_rknn_i8_scales(packed, K, N);
    int ok = 1;
    for (int n = 0; n < N; n++) ok &= sc[n] == 1.0f;
    CHECK(ok);
    CHECK_EQ_INT(rkm_type_row_bytes(RKM_TYPE_RKNN_I8, K) * N, rkm_rknn_i8_bytes(K, N));
    CHECK(rkm_type_from_name("rknn_i8") == RKM_TYPE_RKNN_I8);
    CHECK(!rkm_type_readable(RKM_TYPE_RKNN_I8));
    /* packing 32 rows at a time (the converter) gives the same bytes */
    uint8_t *p2 = calloc(1, rkm_rknn_i8_bytes(K, N));
    for (int n0 = 0; n0 < N; n0 += 32) rkm_rknn_i8_pack_rows(w + n0 * K, K, N, n0, 32, p2);
    CHECK(memcmp(packed, p2, rkm_rknn_i8_bytes(K, N)) == 0);
    /* random data: round trip within half a step per element */
    for (int i = 0; i < K * N; i++) w[i] = frnd() * (1 + i % 7);
    for (int k = 0; k < K; k++) w[3 * K + k] = 0; /* a zero row */
    rkm_rknn_i8_pack(w, K, N, packed);
    float *back = malloc(sizeof(float) * K * N);
    rkm_rknn_i8_unpack(packed, K, N, back);
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) worst = fmax(worst, fabs(back[n * K + k] - w[n * K + k]) / (sc[n] > 0 ? sc[n] : 1));
    CHECK_MSG(worst <= 0.5001, "round trip error %.4f steps", worst);
    CHECK(sc[3] == 0.0f && back[3 * K] == 0.0f);
    free(w);
    free(want);
    free(packed);
    free(p2);
    free(back);
}

/* Integer reference: acc[r][n] = sum_k q(x)[r][k] * q(w)[n][k]. */
static void ref_int(const int8_t *xq, const int8_t *wq /* N x K */, int m, int K, int N, int64_t *acc)
{
    for (int r = 0; r < m; r++)
        for (int n = 0; n < N; n++) {
            int64_t s = 0;
            for (int k = 0; k < K; k++) s += (int64_t)xq[(size_t)r * K + k] * wq[(size_t)n * K + k];
            acc[(size_t)r * N + n] = s;
        }
}

/* W's int8 values, row-major N x K, from a packed matrix. */
static int8_t *unpack_q(const uint8_t *packed, int K, int N)
{
    float *f = malloc(sizeof(float) * (size_t)K * N);
    int8_t *q = malloc((size_t)K * N);
    rkm_rknn_i8_unpack(packed, K, N, f);
    const float *sc = rkm_rknn_i8_scales(packed, K, N);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) q[(size_t)n * K + k] = sc[n] > 0 ? (int8_t)lrintf(f[(size_t)n * K + k] / sc[n]) : 0;
    free(f);
    return q;
}

typedef struct {
    int m, K, N;
} shape;

/* The CPU kernel vs the integer reference: bit-identical outputs. */
static void test_cpu_kernel(rkm_pool *pool)
{
    static const shape sh[] = {{1, 32, 32}, {3, 96, 64}, {7, 64, 160}, {17, 8256, 96}, {33, 128, 32}};
    for (size_t i = 0; i < RKM_ARRAY_LEN(sh); i++) {
        int m = sh[i].m, K = sh[i].K, N = sh[i].N;
        float *w = malloc(sizeof(float) * (size_t)K * N), *x = malloc(sizeof(float) * (size_t)m * K);
        for (size_t j = 0; j < (size_t)K * N; j++) w[j] = frnd();
        for (size_t j = 0; j < (size_t)m * K; j++) x[j] = frnd() * 3;
        uint8_t *pk = malloc(rkm_rknn_i8_bytes(K, N));
        rkm_rknn_i8_pack(w, K, N, pk);
        int8_t *wq = unpack_q(pk, K, N), *xq = malloc((size_t)m * K);
        float *as = malloc(sizeof(float) * m), *y = malloc(sizeof(float) * (size_t)m * (N + 5));
        for (int r = 0; r < m; r++) as[r] = rkm_rknn_quantize_act(x + (size_t)r * K, K, xq + (size_t)r * K);
        int64_t *acc = malloc(sizeof(int64_t) * (size_t)m * N);
        ref_int(xq, wq, m, K, N, acc);
        rkm_rknn_i8_matmul_cpu(pool, pk, K, N, x, m, y, N + 5);
        const float *bs = rkm_rknn_i8_scales(pk, K, N);
        int bad = 0;
        double err = 0;
        for (int r = 0; r < m; r++)
            for (int n = 0; n < N; n++) {
                float want = rkm_rknn_dequant(acc[(size_t)r * N + n], as[r], bs[n]);
                bad += y[(size_t)r * (N + 5) + n] != want;
                double exact = 0;
                for (int k = 0; k < K; k++) exact += (double)x[(size_t)r * K + k] * w[(size_t)n * K + k];
                err = fmax(err, fabs(exact - want) / sqrt((double)K));
            }
        CHECK_MSG(bad == 0, "cpu kernel %dx%dx%d: %d outputs differ from the integer reference", m, K, N, bad);
        CHECK_MSG(err < 0.05, "cpu kernel %dx%dx%d: error vs f64 %.4f per sqrt(K)", m, K, N, err);
        free(w), free(x), free(pk), free(wq), free(xq), free(as), free(y), free(acc);
    }
}

static void test_shape_rules(void)
{
    /* RK3588/RK3576: K % 32; N % 16 fp16, % 32 int8, % 64 int4; K <= 8192 / 4096 */
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 2, 1, 32, 32) == 0);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 2, 1, 48, 32) == RKM_EINVAL);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 2, 1, 32, 16) == RKM_EINVAL);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 1, 1, 32, 16) == 0);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 10, 1, 32, 32) == RKM_EINVAL);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 10, 1, 32, 64) == 0);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 2, 1, 8192, 32) == 0);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 2, 1, 8224, 32) == RKM_EINVAL);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3576, 2, 1, 8192, 32) == RKM_EINVAL);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3576, 2, 1, 4096, 32) == 0);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3562, 2, 1, 32, 16) == 0);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3562, 1, 1, 32, 8) == 0);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3562, 10, 1, 32, 64) == RKM_EUNSUPPORTED);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 5, 1, 32, 32) == RKM_EUNSUPPORTED);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_RK3588, 2, 0, 32, 32) == RKM_EINVAL);
    CHECK(rkm_rknn_check_shape(RKM_CHIP_UNKNOWN, 2, 1, 32, 32) == RKM_EUNSUPPORTED);
}

/* Why int4 (INT4 x INT4 -> INT16, the only int4 type RK3588 runs) is not
 * implemented: both operands would be int4, activations included. The
 * relative RMS error of one 8 x 2048 x 256 product of bell-shaped data,
 * symmetric per-row / per-channel quantization, int8 vs int4. */
static double quant_err(int levels, int M, int K, int N, const float *x, const float *w)
{
    double num = 0, den = 0;
    for (int r = 0; r < M; r++)
        for (int n = 0; n < N; n++) {
            const float *a = x + (size_t)r * K, *b = w + (size_t)n * K;
            float ma = 0, mb = 0;
            for (int k = 0; k < K; k++) ma = fmaxf(ma, fabsf(a[k])), mb = fmaxf(mb, fabsf(b[k]));
            double sa = ma / levels, sb = mb / levels, q = 0, e = 0;
            for (int k = 0; k < K; k++) {
                q += (double)lrint(a[k] / sa) * (double)lrint(b[k] / sb);
                e += (double)a[k] * b[k];
            }
            num += (q * sa * sb - e) * (q * sa * sb - e);
            den += e * e;
        }
    return sqrt(num / den);
}

static void test_int4_error(void)
{
    const int M = 8, K = 2048, N = 256;
    float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K);
    for (int i = 0; i < M * K; i++) x[i] = frnd() + frnd() + frnd();
    for (int i = 0; i < N * K; i++) w[i] = frnd() + frnd() + frnd();
    double e8 = quant_err(127, M, K, N, x, w), e4 = quant_err(7, M, K, N, x, w);
    printf("quantization error of a %dx%dx%d product (relative RMS): int8 x int8 %.4f, int4 x int4 %.4f\n", M, K, N,
           e8, e4);
    CHECK(e8 < e4);
    free(x);
    free(w);
}

/* ------------------------------------------------------ the emulator */

typedef int (*emu_stats_fn)(uint64_t *, uint64_t *, uint64_t *, uint64_t *, uint64_t *);

static emu_stats_fn emu_stats(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    emu_stats_fn f = NULL;
    /* the handle is kept: the library must outlive the engine's dlclose */
    if (h) *(void **)&f = dlsym(h, "rknn_emu_stats");
    return f;
}

static void test_engine(const char *lib, rkm_pool *pool)
{
    rkm_rknn *r = rkm_rknn_open();
    CHECK_MSG(r != NULL, "open: %s", rkm_last_error());
    if (!r) return;
    const rkm_rknn_info *in = rkm_rknn_get_info(r);
    CHECK(in->chip == RKM_CHIP_RK3588 && in->n_cores == 3 && in->k_seg == 8192);
    CHECK_MSG(strstr(in->api_version, "2.3.2") != NULL, "api version '%s'", in->api_version);
    CHECK(strstr(in->drv_version, "0.9.8") != NULL);
    emu_stats_fn st = emu_stats(lib);
    CHECK(st != NULL);
    uint64_t runs0[3] = {0}, to0 = 0, from0 = 0, mems, ctxs;
    if (st) st(runs0, &to0, &from0, &mems, &ctxs);
    /* M = 1, odd M, M = 128, M > 256 (two chunks), K > 8192 (split), N over 3 cores */
    static const shape sh[] = {{1, 32, 32},   {1, 128, 96},  {3, 64, 96},    {7, 128, 160}, {128, 256, 96},
                               {300, 64, 32}, {2, 8256, 96}, {1, 16416, 64}, {5, 4096, 3200}};
    for (size_t i = 0; i < RKM_ARRAY_LEN(sh); i++) {
        int m = sh[i].m, K = sh[i].K, N = sh[i].N;
        float *w = malloc(sizeof(float) * (size_t)K * N), *x = malloc(sizeof(float) * (size_t)m * K);
        for (size_t j = 0; j < (size_t)K * N; j++) w[j] = frnd();
        for (size_t j = 0; j < (size_t)m * K; j++) x[j] = frnd();
        uint8_t *pk = malloc(rkm_rknn_i8_bytes(K, N));
        rkm_rknn_i8_pack(w, K, N, pk);
        int8_t *wq = unpack_q(pk, K, N), *xq = malloc((size_t)m * K);
        for (int rr = 0; rr < m; rr++) rkm_rknn_quantize_act(x + (size_t)rr * K, K, xq + (size_t)rr * K);
        int64_t *want = malloc(sizeof(int64_t) * (size_t)m * N), *got = malloc(sizeof(int64_t) * (size_t)m * N);
        ref_int(xq, wq, m, K, N, want);
        int rc = rkm_rknn_matmul_i8_raw(r, xq, m, K, N, pk, got);
        CHECK_MSG(rc == 0, "raw %dx%dx%d: %s", m, K, N, rkm_last_error());
        size_t bad = 0;
        for (size_t j = 0; j < (size_t)m * N; j++) bad += got[j] != want[j];
        CHECK_MSG(bad == 0, "raw %dx%dx%d: %zu of %zu int sums differ", m, K, N, bad, (size_t)m * N);
        /* float path: bit-identical to the CPU kernel */
        float *y1 = malloc(sizeof(float) * (size_t)m * N), *y2 = malloc(sizeof(float) * (size_t)m * N);
        rc = rkm_rknn_matmul_i8(r, pk, K, N, x, m, y1, N);
        CHECK(rc == 0);
        rkm_rknn_i8_matmul_cpu(pool, pk, K, N, x, m, y2, N);
        CHECK_MSG(memcmp(y1, y2, sizeof(float) * (size_t)m * N) == 0, "npu vs cpu %dx%dx%d differ", m, K, N);
        free(w), free(x), free(pk), free(wq), free(xq), free(want), free(got), free(y1), free(y2);
    }
    uint64_t runs[3] = {0}, to = 0, from = 0;
    if (st) {
        st(runs, &to, &from, &mems, &ctxs);
        for (int c = 0; c < 3; c++) CHECK_MSG(runs[c] > runs0[c], "core %d never ran", c);
        CHECK(to > to0 && from > from0);
        CHECK(ctxs > 0 && mems > 0);
    }
    /* unaligned shapes are refused before any create (the emulator would abort) */
    int8_t a[64] = {0};
    uint8_t b[48 * 64 + 256] = {0};
    int64_t c[64];
    CHECK(rkm_rknn_matmul_i8_raw(r, a, 1, 48, 32, b, c) == RKM_EINVAL);
    CHECK(rkm_rknn_matmul_i8_raw(r, a, 1, 32, 48, b, c) == RKM_EINVAL);
    CHECK(rkm_rknn_matmul_i8_raw(r, a, 1, 0, 32, b, c) == RKM_EINVAL);
    uint64_t nruns;
    int nctx;
    rkm_rknn_counters(r, &nruns, &nctx);
    CHECK(nruns > 0 && nctx > 0);
    rkm_rknn_close(r);
    if (st) {
        st(runs, &to, &from, &mems, &ctxs);
        CHECK_MSG(mems == 0 && ctxs == 0, "after close: %llu buffers, %llu contexts alive", (unsigned long long)mems,
                  (unsigned long long)ctxs);
    }
}

/* In a child process (the emulator may read its chip once): RK3576, two
 * cores (the third never runs) and K segments of 4096. */
static void test_rk3576(const char *lib)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        rkm_knob_set(RKM_KNOB_RKNN_CHIP, "rk3576");
        setenv("RKNN_EMU_CHIP", "rk3576", 1);
        rkm_rknn *r = rkm_rknn_open();
        CHECK_MSG(r != NULL, "rk3576 open: %s", rkm_last_error());
        if (r) {
            const rkm_rknn_info *in = rkm_rknn_get_info(r);
            CHECK(in->chip == RKM_CHIP_RK3576 && in->n_cores == 2 && in->k_seg == 4096);
            static const shape sh[] = {{1, 4128, 96}, {5, 8256, 64}, {3, 64, 96}};
            for (size_t i = 0; i < RKM_ARRAY_LEN(sh); i++) {
                int m = sh[i].m, K = sh[i].K, N = sh[i].N;
                float *w = malloc(sizeof(float) * (size_t)K * N);
                int8_t *xq = malloc((size_t)m * K);
                for (size_t j = 0; j < (size_t)K * N; j++) w[j] = frnd();
                for (size_t j = 0; j < (size_t)m * K; j++) xq[j] = (int8_t)((int)(rnd() % 255) - 127);
                uint8_t *pk = malloc(rkm_rknn_i8_bytes(K, N));
                rkm_rknn_i8_pack(w, K, N, pk);
                int8_t *wq = unpack_q(pk, K, N);
                int64_t *want = malloc(sizeof(int64_t) * (size_t)m * N), *got = malloc(sizeof(int64_t) * (size_t)m * N);
                ref_int(xq, wq, m, K, N, want);
                CHECK(rkm_rknn_matmul_i8_raw(r, xq, m, K, N, pk, got) == 0);
                CHECK_MSG(memcmp(want, got, sizeof(int64_t) * (size_t)m * N) == 0, "rk3576 %dx%dx%d differs", m, K, N);
                free(w), free(xq), free(pk), free(wq), free(want), free(got);
            }
            emu_stats_fn st = emu_stats(lib);
            uint64_t runs[3] = {0}, to, from, mems, ctxs;
            if (st) {
                st(runs, &to, &from, &mems, &ctxs);
                CHECK_MSG(runs[0] > 0 && runs[1] > 0 && runs[2] == 0, "rk3576 runs per core %llu %llu %llu",
                          (unsigned long long)runs[0], (unsigned long long)runs[1], (unsigned long long)runs[2]);
            }
            rkm_rknn_close(r);
        }
        printf("rk3576 (child): ");
        int rc = test_done();
        fflush(stdout);
        _exit(rc ? 1 : 0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rk3576 child failed (status %d)", status);
}

static void test_selection(const char *lib)
{
    /* no NPU weights: auto stays on the CPU without loading anything */
    rkm_backend *b = rkm_backend_open(RKM_BACKEND_AUTO, 0);
    CHECK(b && !strcmp(rkm_backend_name(b), "cpu") && strstr(rkm_backend_reason(b), "no NPU weights"));
    rkm_backend_free(b);
    b = rkm_backend_open(RKM_BACKEND_CPU, 1);
    CHECK(b && !strcmp(rkm_backend_name(b), "cpu") && strstr(rkm_backend_reason(b), "requested"));
    rkm_backend_free(b);
    if (lib) {
        b = rkm_backend_open(RKM_BACKEND_AUTO, 1);
        CHECK_MSG(b && !strcmp(rkm_backend_name(b), "rknn"), "%s", b ? rkm_backend_reason(b) : rkm_last_error());
        rkm_backend_free(b);
        /* $RKM_BACKEND reaches the params through the knob registry only */
        rkm_model_params mp;
        rkm_model_params_default(&mp);
        rkm_knob_set(RKM_KNOB_BACKEND, "cpu");
        CHECK(rkm_model_params_from_knobs(&mp) == 0 && mp.backend == RKM_BACKEND_CPU);
        b = rkm_backend_open(mp.backend, 1);
        CHECK(b && !strcmp(rkm_backend_name(b), "cpu"));
        rkm_backend_free(b);
        rkm_model_params_default(&mp);
        mp.backend = RKM_BACKEND_RKNN; /* an explicit choice wins over the knob */
        CHECK(rkm_model_params_from_knobs(&mp) == 0 && mp.backend == RKM_BACKEND_RKNN);
        rkm_model_params_default(&mp);
        rkm_knob_set(RKM_KNOB_BACKEND, "gpu");
        CHECK(rkm_model_params_from_knobs(&mp) == RKM_EINVAL && strstr(rkm_last_error(), "RKM_BACKEND") &&
              strstr(rkm_last_error(), "'gpu'"));
        rkm_knob_set(RKM_KNOB_BACKEND, NULL);
        /* chips the rknn_i8 layout does not fit, or unknown */
        rkm_knob_set(RKM_KNOB_RKNN_CHIP, "rk3562");
        b = rkm_backend_open(RKM_BACKEND_AUTO, 1);
        CHECK_MSG(b && !strcmp(rkm_backend_name(b), "cpu") && strstr(rkm_backend_reason(b), "rk3562"), "%s",
                  b ? rkm_backend_reason(b) : "");
        rkm_backend_free(b);
        rkm_knob_set(RKM_KNOB_RKNN_CHIP, "rk9999");
        CHECK(rkm_backend_open(RKM_BACKEND_RKNN, 1) == NULL && strstr(rkm_last_error(), "not a known"));
        rkm_knob_set(RKM_KNOB_RKNN_CHIP, "rk3588");
    }
    /* a missing library: a clear reason, auto falls back, rknn fails */
    char keep[1024] = "";
    if (rkm_knob(RKM_KNOB_RKNN_LIB)) snprintf(keep, sizeof keep, "%s", rkm_knob(RKM_KNOB_RKNN_LIB));
    rkm_knob_set(RKM_KNOB_RKNN_LIB, "/nonexistent/librknnrt.so");
    b = rkm_backend_open(RKM_BACKEND_AUTO, 1);
    CHECK(b && !strcmp(rkm_backend_name(b), "cpu") && strstr(rkm_backend_reason(b), "cannot load /nonexistent"));
    rkm_backend_free(b);
    CHECK(rkm_backend_open(RKM_BACKEND_RKNN, 1) == NULL && strstr(rkm_last_error(), "--backend rknn unavailable") &&
          strstr(rkm_last_error(), "cannot load"));
    /* a library that loads but is not librknnrt: the first missing symbol is named */
    rkm_knob_set(RKM_KNOB_RKNN_LIB, "libm.so.6");
    CHECK_MSG(rkm_backend_open(RKM_BACKEND_RKNN, 1) == NULL && strstr(rkm_last_error(), "lacks rknn_matmul_create"),
              "%s", rkm_last_error());
    rkm_knob_set(RKM_KNOB_RKNN_LIB, *keep ? keep : NULL);
}

/* ------------------------------------------------- end to end, tiny */

static rkm_model *open_backend_npu_dense(const char *dir, int backend, int npu_dense)
{
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.n_threads = 2;
    mp.backend = backend;
    mp.npu_dense = npu_dense;
    rkm_model *m = rkm_model_open(dir, &mp);
    CHECK_MSG(m != NULL, "open %s: %s", dir, rkm_last_error());
    return m;
}

static rkm_model *open_backend_slots(const char *dir, int backend, int slots)
{
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.n_threads = 2;
    mp.backend = backend;
    mp.expert_cache_slots = slots;
    rkm_model *m = rkm_model_open(dir, &mp);
    CHECK_MSG(m != NULL, "open %s: %s", dir, rkm_last_error());
    return m;
}

static rkm_model *open_backend(const char *dir, int backend)
{
    return open_backend_slots(dir, backend, 0);
}

typedef struct {
    int n;
    int32_t ids[64];
} gen_ids;

static int on_tok(int32_t id, void *u)
{
    gen_ids *g = u;
    if (g->n < 64) g->ids[g->n++] = id;
    return 0;
}

static void run_model_chunk(rkm_model *m, const int32_t *prompt, int np, float *logits_all, gen_ids *g, int chunk)
{
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = 256;
    sp.n_chunk = chunk;
    sp.sampler.temperature = 0;
    rkm_session *s = rkm_session_new(m, &sp);
    CHECK(s != NULL);
    if (!s) return;
    CHECK(rkm_session_eval_all(s, prompt, np, logits_all) == 0);
    g->n = 0;
    CHECK(rkm_session_generate(s, 24, on_tok, g) == 0);
    rkm_session_free(s);
}

static void run_model(rkm_model *m, const int32_t *prompt, int np, float *logits_all, gen_ids *g)
{
    run_model_chunk(m, prompt, np, logits_all, g, 16);
}

/* Dense projections at prefill (chunks of >= RKM_NPU_DENSE_MIN_ROWS rows)
 * on the NPU: the rknn backend gives every attention matrix an rknn_i8
 * copy; with RKM_NPU_DENSE=force the CPU backend computes the same int8
 * products with its kernel, so the two must agree bit for bit, and both
 * must differ from the file's q8_0 path (the copies are really used). */
static void test_dense(const char *lib, const char *dir)
{
    rkm_model *m0 = open_backend(dir, RKM_BACKEND_CPU);
    if (!m0) return;
    CHECK(m0->layers[0].wq.npu == NULL);
    int V = rkm_model_n_vocab(m0), np = 40;
    int32_t prompt[40];
    for (int i = 0; i < np; i++) prompt[i] = (int32_t)(rnd() % (uint32_t)V);
    size_t lb = sizeof(float) * (size_t)np * V;
    float *l0 = malloc(lb), *l1 = malloc(lb), *l2 = malloc(lb);
    gen_ids g0, g1, g2;
    run_model_chunk(m0, prompt, np, l0, &g0, 64);
    rkm_model_close(m0);
    rkm_model *m1 = open_backend_npu_dense(dir, RKM_BACKEND_CPU, 2);
    if (m1) {
        CHECK(m1->layers[0].wq.npu != NULL && m1->layers[0].wo.npu != NULL);
        run_model_chunk(m1, prompt, np, l1, &g1, 64);
        CHECK_MSG(memcmp(l0, l1, lb) != 0, "the rknn_i8 copies of the dense matrices were not used");
        rkm_model_close(m1);
    }
    rkm_model *m2 = lib ? open_backend(dir, RKM_BACKEND_RKNN) : NULL;
    if (m2 && m1) {
        CHECK(m2->layers[0].wq.npu != NULL);
        uint64_t in_place = 0, copied = 0;
        run_model_chunk(m2, prompt, np, l2, &g2, 64);
        rkm_rknn_bind_counts(rkm_backend_rknn(m2->backend), &in_place, &copied);
        CHECK_MSG(copied > 0, "no dense matrix went to the NPU (%llu copied B bindings)", (unsigned long long)copied);
        CHECK_MSG(memcmp(l1, l2, lb) == 0, "dense at prefill: logits differ between the CPU kernel and the NPU");
        CHECK(g1.n == 24 && g2.n == 24 && memcmp(g1.ids, g2.ids, sizeof(int32_t) * 24) == 0);
        printf("dense projections at prefill: CPU rknn_i8 kernel and emulated NPU agree (%llu B copies)\n",
               (unsigned long long)copied);
    }
    rkm_model_close(m2);
    /* under a memory budget the copies are not made */
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.backend = lib ? RKM_BACKEND_RKNN : RKM_BACKEND_CPU;
    mp.mem_budget_bytes = 1ull << 30;
    rkm_model *m3 = rkm_model_open(dir, &mp);
    CHECK(m3 != NULL);
    if (m3) CHECK(m3->layers[0].wq.npu == NULL);
    rkm_model_close(m3);
    free(l0), free(l1), free(l2);
}

static void test_end_to_end(const char *lib)
{
    const char *tmp = test_tmpdir();
    CHECK(test_rkmojo(NULL, "synth --preset tiny -o %s/tiny.gguf --seed 7 --set n_ff_exp=96", tmp) == 0);
    CHECK(test_rkmojo(NULL, "convert %s/tiny.gguf %s/npu.rkmojo --target rk3588 --quiet", tmp, tmp) == 0);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/npu.rkmojo", tmp);
    rkm_model *mc = open_backend(dir, RKM_BACKEND_CPU);
    if (!mc) return;
    const rkm_expert_layer *el = mc->layers[0].el;
    CHECK(el && el->part[RKM_PART_GATE].type == RKM_TYPE_RKNN_I8 && el->part[RKM_PART_DOWN].type == RKM_TYPE_RKNN_I8);
    int V = rkm_model_n_vocab(mc), np = 40;
    int32_t prompt[40];
    for (int i = 0; i < np; i++) prompt[i] = (int32_t)(rnd() % (uint32_t)V);
    float *l1 = malloc(sizeof(float) * (size_t)np * V), *l2 = malloc(sizeof(float) * (size_t)np * V);
    gen_ids g1, g2;
    run_model(mc, prompt, np, l1, &g1);
    rkm_model_close(mc);
    if (!lib) {
        printf("end to end: rknn_i8 model runs on the CPU (%d tokens); emulator absent, NPU half skipped\n", g1.n);
        free(l1), free(l2);
        return;
    }
    rkm_model *mn = open_backend(dir, RKM_BACKEND_RKNN);
    if (!mn) {
        free(l1), free(l2);
        return;
    }
    CHECK(!strncmp(rkm_model_backend(mn), "rknn: rk3588", 12));
    run_model(mn, prompt, np, l2, &g2);
    uint64_t runs = 0;
    rkm_rknn_counters(rkm_backend_rknn(mn->backend), &runs, NULL);
    CHECK_MSG(runs > 0, "the NPU never ran");
    uint64_t in_place = 0, copied = 0;
    rkm_rknn_bind_counts(rkm_backend_rknn(mn->backend), &in_place, &copied);
    CHECK_MSG(in_place > 0 && copied == 0, "B bindings: %llu in place, %llu copied (expected all in place)",
              (unsigned long long)in_place, (unsigned long long)copied);
    CHECK_MSG(memcmp(l1, l2, sizeof(float) * (size_t)np * V) == 0, "logits differ between --backend cpu and rknn");
    CHECK(g1.n == 24 && g2.n == 24 && memcmp(g1.ids, g2.ids, sizeof(int32_t) * 24) == 0);
    printf("end to end: 40-token prefill + 24 greedy tokens on cpu and emulated rknn (%llu NPU runs, "
           "%llu in-place B bindings)\n",
           (unsigned long long)runs, (unsigned long long)in_place);
    rkm_model_close(mn);
    /* the copy path (slots in ordinary memory) gives the same numbers */
    rkm_knob_set(RKM_KNOB_RKNN_SLOT_BYTES, "0");
    mn = open_backend(dir, RKM_BACKEND_RKNN);
    rkm_knob_set(RKM_KNOB_RKNN_SLOT_BYTES, NULL);
    if (mn) {
        run_model(mn, prompt, np, l2, &g2);
        rkm_rknn_bind_counts(rkm_backend_rknn(mn->backend), &in_place, &copied);
        CHECK(in_place == 0 && copied > 0);
        CHECK_MSG(memcmp(l1, l2, sizeof(float) * (size_t)np * V) == 0, "copy path: logits differ");
        CHECK(g2.n == 24 && memcmp(g1.ids, g2.ids, sizeof(int32_t) * 24) == 0);
        rkm_model_close(mn);
    }
    /* two slots per layer: experts are evicted and re-read into the same
     * NPU buffers, each read synced to the device again */
    mn = open_backend_slots(dir, RKM_BACKEND_RKNN, 2);
    if (mn) {
        run_model(mn, prompt, np, l2, &g2);
        rkm_rknn_bind_counts(rkm_backend_rknn(mn->backend), &in_place, &copied);
        CHECK(in_place > 0 && copied == 0);
        CHECK_MSG(memcmp(l1, l2, sizeof(float) * (size_t)np * V) == 0, "2 slots: logits differ");
        CHECK(g2.n == 24 && memcmp(g1.ids, g2.ids, sizeof(int32_t) * 24) == 0);
        rkm_model_close(mn);
    }
    free(l1), free(l2);
    test_dense(lib, dir);
}

/* ------------------------------------------------ quality, fixtures */

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Teacher-forced over the golden cases: top-1 agreement with llama.cpp's
 * greedy ids, and max |logit - logit of the f32 conversion|. */
static void quality(const char *shared, const char *fx)
{
    const char *tmp = test_tmpdir();
    static const char *const variant[4][2] = {
        {"keep", "cpu"}, {"keep", "rk3588"}, {"q8_0", "cpu"}, {"q8_0", "rk3588"}};
    char gpath[1024];
    snprintf(gpath, sizeof gpath, "%s/fixtures/%s.golden.json", shared, fx);
    size_t len;
    char *js = rkm_read_file(gpath, &len);
    cJSON *gj = js ? cJSON_ParseWithLength(js, len) : NULL;
    free(js);
    if (!gj) {
        CHECK_MSG(0, "%s unreadable", gpath);
        return;
    }
    int agree[4] = {0}, total = 0;
    double maxd[4] = {0};
    rkm_model *mv[4] = {0};
    for (int v = 0; v < 4; v++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s-%s-%s.rkmojo", tmp, fx, variant[v][0], variant[v][1]);
        CHECK(test_rkmojo(NULL, "convert %s/fixtures/%s.gguf %s --quant %s --target %s --quiet", shared, fx, dir,
                          variant[v][0], variant[v][1]) == 0);
        mv[v] = open_backend(dir, RKM_BACKEND_CPU);
    }
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cJSON_GetObjectItemCaseSensitive(gj, "cases"))
    {
        int32_t ids[512];
        int n = 0, np;
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(cs, "prompt_ids")) if (n < 400) ids[n++] = it->valueint;
        np = n;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(cs, "steps"))
        {
            if (n < 480) ids[n++] = cJSON_GetObjectItemCaseSensitive(it, "id")->valueint;
        }
        if (!mv[0]) break;
        int V = rkm_model_n_vocab(mv[0]);
        float *lg[4];
        for (int v = 0; v < 4; v++) {
            lg[v] = malloc(sizeof(float) * (size_t)n * V);
            rkm_session_params sp;
            rkm_session_params_default(&sp);
            sp.n_ctx = 512;
            rkm_session *s = mv[v] ? rkm_session_new(mv[v], &sp) : NULL;
            CHECK(s && rkm_session_eval_all(s, ids, n, lg[v]) == 0);
            rkm_session_free(s);
        }
        for (int p = np - 1; p < n - 1; p++) {
            total++;
            for (int v = 0; v < 4; v++) {
                const float *row = lg[v] + (size_t)p * V, *base = lg[0] + (size_t)p * V;
                agree[v] += argmax(row, V) == ids[p + 1];
                for (int t = 0; t < V; t++) maxd[v] = fmax(maxd[v], fabs(row[t] - base[t]));
            }
        }
        for (int v = 0; v < 4; v++) free(lg[v]);
    }
    printf("quality %-14s steps %3d | top-1 agree: f32 %d, f32+rknn_i8 experts %d, q8_0 %d, q8_0+rknn_i8 %d | "
           "max|dlogit| vs f32: %.4f, %.4f, %.4f\n",
           fx, total, agree[0], agree[1], agree[2], agree[3], maxd[1], maxd[2], maxd[3]);
    /* int8 per channel with per-row activations: no worse than llama.cpp's own q8_0 check by more than 3 steps */
    CHECK_MSG(agree[1] + 3 >= agree[2], "%s: rknn_i8 experts agree %d vs q8_0 %d", fx, agree[1], agree[2]);
    CHECK_MSG(maxd[1] < 4 * maxd[2] + 0.05, "%s: rknn_i8 dlogit %.4f vs q8_0 %.4f", fx, maxd[1], maxd[2]);
    for (int v = 0; v < 4; v++) rkm_model_close(mv[v]);
    cJSON_Delete(gj);
}

int main(void)
{
    char lib[1024];
    const char *env = getenv("RKM_RKNN_LIB");
    const char *build = getenv("RKM_BUILD");
    snprintf(lib, sizeof lib, "%s", env && *env ? env : "");
    if (!*lib) snprintf(lib, sizeof lib, "%s/tests/librknnrt.so", build && *build ? build : "build");
    char *abs = realpath(lib, NULL);
    int have = abs != NULL;
    if (have) {
        rkm_knob_set(RKM_KNOB_RKNN_LIB, abs);
        rkm_knob_set(RKM_KNOB_RKNN_CHIP, "rk3588");
        setenv("RKNN_EMU_CHIP", "rk3588", 1);
        test_rk3576(abs); /* first: fork before any thread exists (qemu-user) */
    }
    rkm_kernels_init();
    rkm_pool *pool = rkm_pool_new(2);
    test_layout();
    test_shape_rules();
    test_cpu_kernel(pool);
    test_int4_error();
    if (have) test_engine(abs, pool);
    else printf("SKIP the NPU engine: no emulated librknnrt.so at %s (make builds $BUILD/tests/librknnrt.so)\n", lib);
    test_selection(have ? abs : NULL);
    test_end_to_end(have ? abs : NULL);
    const char *shared = test_shared_dir();
    if (shared) {
        static const char *const fx[] = {"qwen3moe-f32", "olmoe-f32", "mixtral-f32", "qwen2moe-f32", "gemma4-f32"};
        for (size_t i = 0; i < RKM_ARRAY_LEN(fx); i++) quality(shared, fx[i]);
    } else {
        printf("SKIP quality: no ../shared fixtures\n");
    }
    free(abs);
    rkm_pool_free(pool);
    return test_done();
}
