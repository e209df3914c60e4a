/*
 * test-rknn-emu.c - the emulated librknnrt.so (tests/rknn/) checked against
 * a straightforward computation written here: every supported matmul type
 * at several aligned shapes (M = 1, 3, 17, 128; K past the RK3588 and RK3576
 * segment sizes) in every layout combination, with the native layouts
 * packed here by plain loops in the documented order (not the emulator's index
 * formulas), fp16 from the engine's own converter, exact integer sums.
 * Every finite fp16 bit pattern goes through fp16 -> f32 -> fp16/bf16
 * bit-exact.
 * Also: io_attr dims/sizes and raw byte offsets, per-chip type support and
 * core masks, dynamic shapes, quant params, the B packer, from_fd views,
 * emulated cache coherence (a skipped sync gives stale data), the bind-time
 * snapshot of a NORM/TP_NORM B, the abort on an unaligned shape (in a
 * forked child), per-core runs from three threads, and leak counters.
 *
 * The library is dlopened from $RKM_RKNN_LIB or argv[0]'s directory; the
 * test skips (77) if it is absent. Single process; the chip is switched
 * with setenv("RKNN_EMU_CHIP") between creates.
 */
#include <dlfcn.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/test.h"
#include "rknn/emu_abi.h"
#include "util/fp16.h"

/* ------------------------------------------------------------ the API */
static struct {
    int (*create)(emu_ctx_t *, emu_matmul_info *, emu_io_attr *);
    int (*create_dyn)(emu_ctx_t *, emu_matmul_info *, int, emu_shape *, emu_io_attr *);
    int (*set_dyn)(emu_ctx_t, emu_shape *);
    int (*set_io_mem)(emu_ctx_t, emu_tensor_mem *, emu_tensor_attr *);
    int (*set_core_mask)(emu_ctx_t, int);
    int (*set_quant)(emu_ctx_t, emu_quant_params *);
    int (*get_quant)(emu_ctx_t, emu_quant_params *, float *);
    int (*run)(emu_ctx_t);
    int (*destroy)(emu_ctx_t);
    int (*b_to_native)(void *, void *, int, int, emu_matmul_info *);
    emu_tensor_mem *(*create_mem)(emu_ctx_t, uint32_t);
    emu_tensor_mem *(*create_mem2)(emu_ctx_t, uint64_t, uint64_t);
    emu_tensor_mem *(*create_mem_from_fd)(emu_ctx_t, int32_t, void *, uint32_t, int32_t);
    int (*destroy_mem)(emu_ctx_t, emu_tensor_mem *);
    int (*mem_sync)(emu_ctx_t, emu_tensor_mem *, int);
    int (*query)(emu_ctx_t, int, void *, uint32_t);
    int (*stats)(uint64_t *, uint64_t *, uint64_t *, uint64_t *, uint64_t *);
} R;

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    CHECK_MSG(p != NULL, "missing symbol %s", name);
    return p;
}

static void load_lib(const char *argv0)
{
    char path[4096], tmp[4096];
    const char *e = getenv("RKM_RKNN_LIB");
    if (e) snprintf(path, sizeof path, "%s", e);
    else {
        snprintf(tmp, sizeof tmp, "%s", argv0);
        snprintf(path, sizeof path, "%s/librknnrt.so", dirname(tmp));
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("emulated librknnrt.so not loadable (%s): skipped\n", dlerror());
        exit(77);
    }
    *(void **)&R.create = sym(h, "rknn_matmul_create");
    *(void **)&R.create_dyn = sym(h, "rknn_matmul_create_dynamic_shape");
    *(void **)&R.set_dyn = sym(h, "rknn_matmul_set_dynamic_shape");
    *(void **)&R.set_io_mem = sym(h, "rknn_matmul_set_io_mem");
    *(void **)&R.set_core_mask = sym(h, "rknn_matmul_set_core_mask");
    *(void **)&R.set_quant = sym(h, "rknn_matmul_set_quant_params");
    *(void **)&R.get_quant = sym(h, "rknn_matmul_get_quant_params");
    *(void **)&R.run = sym(h, "rknn_matmul_run");
    *(void **)&R.destroy = sym(h, "rknn_matmul_destroy");
    *(void **)&R.b_to_native = sym(h, "rknn_B_normal_layout_to_native_layout");
    *(void **)&R.create_mem = sym(h, "rknn_create_mem");
    *(void **)&R.create_mem2 = sym(h, "rknn_create_mem2");
    *(void **)&R.create_mem_from_fd = sym(h, "rknn_create_mem_from_fd");
    *(void **)&R.destroy_mem = sym(h, "rknn_destroy_mem");
    *(void **)&R.mem_sync = sym(h, "rknn_mem_sync");
    *(void **)&R.query = sym(h, "rknn_query");
    *(void **)&R.stats = sym(h, "rknn_emu_stats");
    if (test_failures) {
        printf("%s lacks symbols\n", path);
        exit(1);
    }
}

static void chip(const char *name) { setenv("RKNN_EMU_CHIP", name, 1); }

/* ------------------------------------------------- reference helpers */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Element types of each matmul type, from the runtime's enum of matmul types. */
static const struct {
    int a, b, c;
} TYPES[16] = {
    [1] = {EMU_T_F16, EMU_T_F16, EMU_T_F32}, [2] = {EMU_T_I8, EMU_T_I8, EMU_T_I32},
    [3] = {EMU_T_I8, EMU_T_I8, EMU_T_I8},    [4] = {EMU_T_F16, EMU_T_F16, EMU_T_F16},
    [5] = {EMU_T_F16, EMU_T_I8, EMU_T_F32},  [6] = {EMU_T_F16, EMU_T_I8, EMU_T_F16},
    [7] = {EMU_T_F16, EMU_T_I4, EMU_T_F32},  [8] = {EMU_T_F16, EMU_T_I4, EMU_T_F16},
    [9] = {EMU_T_I8, EMU_T_I8, EMU_T_F32},   [10] = {EMU_T_I4, EMU_T_I4, EMU_T_I16},
    [11] = {EMU_T_I8, EMU_T_I4, EMU_T_I32},  [12] = {EMU_T_F16, EMU_T_I4, EMU_T_BF16},
    [15] = {EMU_T_I8, EMU_T_I4, EMU_T_F16},
};

static size_t nbytes(int t, size_t n)
{
    switch (t) {
    case EMU_T_I4: return (n + 1) / 2;
    case EMU_T_I8: return n;
    case EMU_T_F16: case EMU_T_BF16: case EMU_T_I16: return 2 * n;
    default: return 4 * n;
    }
}

static void put(uint8_t *p, int t, size_t i, double v)
{
    switch (t) {
    case EMU_T_I4: {
        int q = (int)v & 15;
        if (i % 2 == 0) p[i / 2] = (uint8_t)((p[i / 2] & 0xf0) | q);
        else p[i / 2] = (uint8_t)((p[i / 2] & 0x0f) | (q << 4));
        break;
    }
    case EMU_T_I8: p[i] = (uint8_t)(int8_t)v; break;
    case EMU_T_F16: { uint16_t h = rkm_f32_to_f16((float)v); memcpy(p + 2 * i, &h, 2); break; }
    default: break;
    }
}

static double get(const uint8_t *p, int t, size_t i)
{
    switch (t) {
    case EMU_T_I8: return (int8_t)p[i];
    case EMU_T_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case EMU_T_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case EMU_T_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case EMU_T_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return rkm_f16_to_f32(v); }
    case EMU_T_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return rkm_bf16_to_f32(v); }
    default: return 0;
    }
}

/* A random value representable in type t. */
static double rand_val(int t)
{
    if (t == EMU_T_I4) return (int)(rnd() % 16) - 8;
    if (t == EMU_T_I8) return (int)(rnd() % 256) - 128;
    return rkm_f16_to_f32(rkm_f32_to_f16(((float)(rnd() % 20001) - 10000.0f) / 10000.0f));
}

/* Packers as the layouts are documented. A native: for each k-tile, for each row m, the
 * subK values. B native: per K segment, for each n-tile, for each k-tile,
 * for each of the subN columns, its run of subK values. C native: for each
 * n-tile, for each row, subN values. */
static void pack_a(uint8_t *dst, int t, int native, int subk, int M, int K, const double *a)
{
    size_t o = 0;
    if (!native) {
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++) put(dst, t, o++, a[(size_t)m * K + k]);
        return;
    }
    for (int kt = 0; kt < K / subk; kt++)
        for (int m = 0; m < M; m++)
            for (int ki = 0; ki < subk; ki++) put(dst, t, o++, a[(size_t)m * K + kt * subk + ki]);
}

static void pack_b(uint8_t *dst, int t, int layout, int subn, int subk, int seg, int K, int N,
                   const double *b /* K x N */)
{
    size_t o = 0;
    if (layout == EMU_LAYOUT_NORM) {
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) put(dst, t, o++, b[(size_t)k * N + n]);
    } else if (layout == EMU_LAYOUT_TP_NORM) {
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++) put(dst, t, o++, b[(size_t)k * N + n]);
    } else {
        for (int k0 = 0; k0 < K; k0 += seg) {
            int ks = K - k0 < seg ? K - k0 : seg;
            for (int nt = 0; nt < N / subn; nt++)
                for (int kt = 0; kt < ks / subk; kt++)
                    for (int ni = 0; ni < subn; ni++)
                        for (int ki = 0; ki < subk; ki++)
                            put(dst, t, o++, b[(size_t)(k0 + kt * subk + ki) * N + nt * subn + ni]);
        }
    }
}

static void unpack_c(const uint8_t *src, int t, int native, int subn, int M, int N, double *c)
{
    size_t o = 0;
    if (!native) {
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) c[(size_t)m * N + n] = get(src, t, o++);
        return;
    }
    for (int nt = 0; nt < N / subn; nt++)
        for (int m = 0; m < M; m++)
            for (int ni = 0; ni < subn; ni++) c[(size_t)m * N + nt * subn + ni] = get(src, t, o++);
}

static double sat(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Quantisation used by a case: per-layer A, per-channel or per-group B,
 * per-layer C; NULL arrays mean the defaults (scale 1, zp 0). */
typedef struct {
    float sa, sc;
    const float *sb; /* N (per channel) or N*K/g */
    int g;           /* group size, 0 for per channel */
} qcase;

/* C reference from the logical matrices (a: M x K, b: K x N). Returns the
 * tolerance in *tol for each element's comparison. */
static double ref_elem(int type, int M, int K, int N, const double *a, const double *b, int m, int n,
                       const qcase *q, double *tol)
{
    double acc = 0, mag = 0;
    for (int k = 0; k < K; k++) {
        double bs = 1.0;
        if (q && q->sb) bs = q->g ? q->sb[(size_t)n * (K / q->g) + k / q->g] : q->sb[n];
        int hybrid = TYPES[type].a == EMU_T_F16 && TYPES[type].b != EMU_T_F16;
        int scaled = hybrid || (type == 15 || type == 9 || (q && q->g));
        double p = a[(size_t)m * K + k] * b[(size_t)k * N + n] * (scaled ? bs : 1.0);
        acc += p;
        mag += fabs(p);
    }
    double sa = q ? q->sa : 1.0;
    *tol = 0;
    switch (TYPES[type].c) {
    case EMU_T_I32: return acc;
    case EMU_T_I16: return sat(acc, -32768, 32767);
    case EMU_T_I8: {
        double s = sa * (q && q->sb ? q->sb[n] : 1.0) / (q ? q->sc : 1.0);
        return sat(nearbyint(acc * s), -128, 127);
    }
    case EMU_T_F32:
        if (type == 9) acc *= sa;
        *tol = K * 1.2e-7 * mag + 1e-6; /* f32 recursive summation bound */
        return acc;
    case EMU_T_F16:
        if (type == 15) acc *= sa;
        *tol = K * 1.2e-7 * mag + fabs(acc) / 1024 + 1e-6;
        return acc;
    case EMU_T_BF16:
        *tol = K * 1.2e-7 * mag + fabs(acc) / 128 + 1e-6;
        return acc;
    }
    return 0;
}

static emu_tensor_mem *mem_with(emu_ctx_t ctx, const void *data, size_t n, uint32_t size)
{
    emu_tensor_mem *m = R.create_mem(ctx, size);
    CHECK(m != NULL);
    if (!m) return NULL;
    CHECK(m->size >= size);
    if (data) memcpy(m->virt_addr, data, n);
    CHECK_EQ_INT(R.mem_sync(ctx, m, EMU_SYNC_TO_DEVICE), 0);
    return m;
}

/* Expected native sub-sizes on RK3588/RK3576 (docs/NPU.md, ABI table). */
static int exp_a_subk(int t) { return t == EMU_T_I4 ? 32 : t == EMU_T_I8 ? 16 : 8; }
static int exp_b_subn(int t) { return t == EMU_T_I4 ? 64 : t == EMU_T_I8 ? 32 : 16; }
static int exp_c_subn(int t) { return t == EMU_T_I16 ? 8 : (t == EMU_T_I32 || t == EMU_T_F32) ? 4 : 0; }

/* One full static-shape case: create, pack, sync, bind, run, sync, check
 * every element. seg = the chip's K segment size. Returns max error. */
static int n_cases;
static void mm_case(int type, int M, int K, int N, int ac_native, int b_layout, int seg,
                    const qcase *q)
{
    emu_matmul_info info;
    memset(&info, 0, sizeof info);
    info.M = M, info.K = K, info.N = N, info.type = type;
    info.B_layout = (int16_t)b_layout;
    info.AC_layout = (int16_t)(ac_native ? EMU_LAYOUT_NATIVE : EMU_LAYOUT_NORM);
    if (q && q->g) info.group_size = (int16_t)q->g;
    emu_io_attr io;
    emu_ctx_t ctx = 0;
    int failures0 = test_failures;
    int rc = R.create(&ctx, &info, &io);
    CHECK_MSG(rc == 0, "create type %d M%d K%d N%d ac%d b%d: %d", type, M, K, N, ac_native, b_layout,
              rc);
    if (rc) return;
    int ta = TYPES[type].a, tb = TYPES[type].b, tc = TYPES[type].c;
    /* io_attr: names, types, sizes, dims as the runtime documents them */
    CHECK(!strcmp(io.A.name, "A") && !strcmp(io.B.name, "B") && !strcmp(io.C.name, "C"));
    CHECK_EQ_INT(io.A.type, ta);
    CHECK_EQ_INT(io.B.type, tb);
    CHECK_EQ_INT(io.C.type, tc);
    CHECK_EQ_INT(io.A.size, nbytes(ta, (size_t)M * K));
    CHECK_EQ_INT(io.B.size, nbytes(tb, (size_t)K * N));
    CHECK_EQ_INT(io.C.size, nbytes(tc, (size_t)M * N));
    int subk_a = 0, subn_b = 0, subk_b = 0, subn_c = 0;
    if (ac_native) {
        CHECK_EQ_INT(io.A.n_dims, 3);
        subk_a = (int)io.A.dims[2];
        CHECK_EQ_INT(subk_a, exp_a_subk(ta));
        CHECK(io.A.dims[0] == (uint32_t)(K / subk_a) && io.A.dims[1] == (uint32_t)M);
        CHECK_EQ_INT(io.C.n_dims, 3);
        subn_c = (int)io.C.dims[2];
        if (exp_c_subn(tc)) CHECK_EQ_INT(subn_c, exp_c_subn(tc));
        CHECK(subn_c > 0 && N % subn_c == 0);
        CHECK(io.C.dims[0] == (uint32_t)(N / (subn_c ? subn_c : 1)) && io.C.dims[1] == (uint32_t)M);
    } else {
        CHECK(io.A.n_dims == 2 && io.A.dims[0] == (uint32_t)M && io.A.dims[1] == (uint32_t)K);
        CHECK(io.C.n_dims == 2 && io.C.dims[0] == (uint32_t)M && io.C.dims[1] == (uint32_t)N);
    }
    if (b_layout == EMU_LAYOUT_NATIVE) {
        CHECK_EQ_INT(io.B.n_dims, 4);
        subn_b = (int)io.B.dims[2], subk_b = (int)io.B.dims[3];
        CHECK_EQ_INT(subn_b, exp_b_subn(tb));
        CHECK_EQ_INT(subk_b, 32);
        CHECK(io.B.dims[0] == (uint32_t)(N / subn_b) && io.B.dims[1] == (uint32_t)(K / subk_b));
    } else if (b_layout == EMU_LAYOUT_TP_NORM)
        CHECK(io.B.n_dims == 2 && io.B.dims[0] == (uint32_t)N && io.B.dims[1] == (uint32_t)K);
    else
        CHECK(io.B.n_dims == 2 && io.B.dims[0] == (uint32_t)K && io.B.dims[1] == (uint32_t)N);
    if (test_failures != failures0) goto out_ctx; /* cannot pack without the dims */

    double *a = malloc((size_t)M * K * sizeof *a), *b = malloc((size_t)K * N * sizeof *b);
    double *c = malloc((size_t)M * N * sizeof *c);
    uint8_t *pa = calloc(1, io.A.size), *pb = calloc(1, io.B.size);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = rand_val(ta);
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = rand_val(tb);
    pack_a(pa, ta, ac_native, subk_a, M, K, a);
    pack_b(pb, tb, b_layout, subn_b, subk_b, seg, K, N, b);
    emu_tensor_mem *ma = mem_with(ctx, pa, io.A.size, io.A.size);
    emu_tensor_mem *mb = mem_with(ctx, pb, io.B.size, io.B.size);
    emu_tensor_mem *mc = R.create_mem(ctx, io.C.size);
    CHECK(ma && mb && mc);
    if (q) {
        emu_quant_params qp;
        memset(&qp, 0, sizeof qp);
        float sa = q->sa, sc = q->sc;
        strcpy(qp.name, "A"), qp.scale = &sa, qp.scale_len = 1;
        CHECK_EQ_INT(R.set_quant(ctx, &qp), 0);
        strcpy(qp.name, "C"), qp.scale = &sc;
        CHECK_EQ_INT(R.set_quant(ctx, &qp), 0);
        if (q->sb) {
            strcpy(qp.name, "B"), qp.scale = (float *)q->sb;
            qp.scale_len = q->g ? N * (K / q->g) : N;
            CHECK_EQ_INT(R.set_quant(ctx, &qp), 0);
        }
    }
    CHECK_EQ_INT(R.set_io_mem(ctx, ma, &io.A), 0);
    CHECK_EQ_INT(R.set_io_mem(ctx, mb, &io.B), 0);
    CHECK_EQ_INT(R.set_io_mem(ctx, mc, &io.C), 0);
    CHECK_EQ_INT(R.run(ctx), 0);
    CHECK_EQ_INT(R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE), 0);
    unpack_c(mc->virt_addr, tc, ac_native, subn_c, M, N, c);
    int bad = 0;
    double worst = 0;
    for (int m = 0; m < M && bad < 5; m++)
        for (int n = 0; n < N && bad < 5; n++) {
            double tol, want = ref_elem(type, M, K, N, a, b, m, n, q, &tol);
            double got = c[(size_t)m * N + n];
            if (fabs(got - want) > tol) {
                bad++;
                fprintf(stderr, "type %d M%d K%d N%d ac%d b%d: C[%d][%d] = %.9g, want %.9g\n",
                        type, M, K, N, ac_native, b_layout, m, n, got, want);
            }
            if (fabs(got - want) > worst) worst = fabs(got - want);
        }
    CHECK_MSG(bad == 0, "type %d M%d K%d N%d: %d wrong elements", type, M, K, N, bad);
    n_cases++;
    CHECK_EQ_INT(R.destroy_mem(ctx, ma), 0);
    CHECK_EQ_INT(R.destroy_mem(ctx, mb), 0);
    CHECK_EQ_INT(R.destroy_mem(ctx, mc), 0);
    free(a), free(b), free(c), free(pa), free(pb);
out_ctx:
    CHECK_EQ_INT(R.destroy(ctx), 0);
}

/* -------------------------------------------------------------- tests */

static void test_raw_offsets(void)
{
    /* info and io_attr as raw bytes at the documented LP64 offsets, independent of the
     * struct declarations: type 2, B native, AC native, M=3 K=64 N=32. */
    _Alignas(8) uint8_t info[64] = {0}, io[996];
    int32_t v;
    v = 3, memcpy(info + 0, &v, 4);
    v = 64, memcpy(info + 4, &v, 4);
    v = 32, memcpy(info + 8, &v, 4);
    v = 2, memcpy(info + 12, &v, 4);
    int16_t s = 1;
    memcpy(info + 16, &s, 2); /* B_layout */
    memcpy(info + 20, &s, 2); /* AC_layout */
    memset(io, 0xee, sizeof io);
    emu_ctx_t ctx;
    CHECK_EQ_INT(R.create(&ctx, (emu_matmul_info *)(void *)info, (emu_io_attr *)(void *)io), 0);
    uint32_t u;
    const uint32_t want[3][6] = {
        /* n_dims, dims..., size, type */
        {3, 64 / 16, 3, 16, 3 * 64, EMU_T_I8},
        {4, 32 / 32, 64 / 32, 32, 64 * 32, EMU_T_I8},
        {3, 32 / 4, 3, 4, 3 * 32 * 4, EMU_T_I32},
    };
    for (int r = 0; r < 3; r++) {
        const uint8_t *at = io + 332 * r;
        CHECK(at[0] == "ABC"[r] && at[1] == 0);
        memcpy(&u, at + 256, 4);
        CHECK_EQ_INT(u, want[r][0]);
        for (uint32_t d = 0; d < want[r][0] && d < 3; d++) {
            memcpy(&u, at + 260 + 4 * d, 4);
            CHECK_EQ_INT(u, want[r][1 + d]);
        }
        memcpy(&u, at + 324, 4);
        CHECK_EQ_INT(u, want[r][4]);
        memcpy(&u, at + 328, 4);
        CHECK_EQ_INT(u, want[r][5]);
    }
    /* rknn_tensor_mem fields at 0/16/20/24/28 */
    emu_tensor_mem *m = R.create_mem(ctx, 100);
    CHECK(m != NULL);
    const uint8_t *mb = (const uint8_t *)m;
    void *va;
    memcpy(&va, mb, 8);
    CHECK(va != NULL);
    int32_t fd, off;
    memcpy(&fd, mb + 16, 4), memcpy(&off, mb + 20, 4), memcpy(&u, mb + 24, 4);
    CHECK(fd >= 0 && off == 0 && u == 100);
    memcpy(&u, mb + 28, 4);
    CHECK_EQ_INT(u, EMU_MEMF_ALLOC_INSIDE);
    CHECK_EQ_INT(R.destroy_mem(ctx, m), 0);
    /* SDK version: two char[256] */
    char ver[512];
    memset(ver, 'x', sizeof ver);
    CHECK_EQ_INT(R.query(ctx, EMU_QUERY_SDK_VERSION, ver, sizeof ver), 0);
    CHECK(!strcmp(ver, "2.3.2 (emulated)"));
    CHECK(!strcmp(ver + 256, "0.9.8 (emulated)"));
    CHECK(R.query(ctx, EMU_QUERY_SDK_VERSION, ver, 100) == EMU_ERR_PARAM_INVALID);
    CHECK(R.query(ctx, 1234, ver, sizeof ver) == EMU_ERR_PARAM_INVALID);
    CHECK_EQ_INT(R.destroy(ctx), 0);
    CHECK(R.query(ctx, EMU_QUERY_SDK_VERSION, ver, sizeof ver) == EMU_ERR_CTX_INVALID);
}

static void test_types_per_chip(void)
{
    static const struct {
        const char *chip;
        uint32_t ok;
    } tab[] = {
        {"rk3588", 1u << 1 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 10},
        {"rk3576", 0x9ffeu}, /* 1..12 and 15 */
        {"rk3562", 1u << 1 | 1u << 2 | 1u << 3 | 1u << 4},
    };
    for (size_t c = 0; c < sizeof tab / sizeof tab[0]; c++) {
        chip(tab[c].chip);
        for (int t = 0; t <= 16; t++) {
            emu_matmul_info info;
            memset(&info, 0, sizeof info);
            info.M = 4, info.K = 64, info.N = 128, info.type = t;
            info.B_layout = EMU_LAYOUT_NATIVE;
            emu_io_attr io;
            emu_ctx_t ctx = 0;
            int rc = R.create(&ctx, &info, &io);
            int want = (tab[c].ok >> t) & 1 ? 0 : EMU_ERR_PARAM_INVALID;
            CHECK_MSG(rc == want, "%s type %d: create %d, want %d", tab[c].chip, t, rc, want);
            if (rc == 0) CHECK_EQ_INT(R.destroy(ctx), 0);
        }
    }
    /* RK3588: int4 B must be native (one probe); RK3576 takes NORM. */
    emu_matmul_info info;
    memset(&info, 0, sizeof info);
    info.M = 1, info.K = 64, info.N = 64, info.type = 10, info.B_layout = EMU_LAYOUT_NORM;
    emu_io_attr io;
    emu_ctx_t ctx;
    chip("rk3588");
    CHECK_EQ_INT(R.create(&ctx, &info, &io), EMU_ERR_PARAM_INVALID);
    chip("rk3576");
    CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
    R.destroy(ctx);
    chip("rk9999");
    CHECK_EQ_INT(R.create(&ctx, &info, &io), EMU_ERR_DEVICE_UNAVAILABLE);
    chip("rk3588");
    /* bad layouts and sizes are parameter errors, not aborts */
    info.type = 2, info.B_layout = 3;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), EMU_ERR_PARAM_INVALID);
    info.B_layout = 0, info.AC_layout = EMU_LAYOUT_TP_NORM;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), EMU_ERR_PARAM_INVALID);
    info.AC_layout = 0, info.M = 0;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), EMU_ERR_PARAM_INVALID);
}

static void test_core_masks(void)
{
    static const struct {
        const char *chip;
        int mask, want;
    } tab[] = {
        {"rk3588", EMU_CORE_AUTO, 0},  {"rk3588", EMU_CORE_0, 0},   {"rk3588", EMU_CORE_1, 0},
        {"rk3588", EMU_CORE_2, 0},     {"rk3588", EMU_CORE_0_1, -1}, {"rk3588", EMU_CORE_0_1_2, -1},
        {"rk3588", EMU_CORE_ALL, -1},  {"rk3588", 8, -1},           {"rk3576", EMU_CORE_AUTO, 0},
        {"rk3576", EMU_CORE_0, 0},     {"rk3576", EMU_CORE_1, 0},   {"rk3576", EMU_CORE_2, -1},
        {"rk3576", EMU_CORE_0_1, -1},  {"rk3562", EMU_CORE_AUTO, -1}, {"rk3562", EMU_CORE_0, -1},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        chip(tab[i].chip);
        emu_matmul_info info;
        memset(&info, 0, sizeof info);
        info.M = 1, info.K = 32, info.N = 32, info.type = 2;
        emu_io_attr io;
        emu_ctx_t ctx;
        CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
        int rc = R.set_core_mask(ctx, tab[i].mask);
        CHECK_MSG(rc == tab[i].want, "%s mask %d: %d", tab[i].chip, tab[i].mask, rc);
        R.destroy(ctx);
    }
    chip("rk3588");
    CHECK_EQ_INT(R.set_core_mask(987654321, 0), EMU_ERR_CTX_INVALID);
}

static void test_all_types_layouts(void)
{
    static const int Ms[] = {1, 3, 17, 128};
    chip("rk3588");
    const int t3588[] = {1, 2, 3, 4, 10};
    for (size_t ti = 0; ti < 5; ti++) {
        int t = t3588[ti];
        int N = TYPES[t].b == EMU_T_I4 ? 128 : 64;
        for (size_t mi = 0; mi < 4; mi++)
            for (int ac = 0; ac < 2; ac++)
                for (int bl = 0; bl < 3; bl++) {
                    if (t == 10 && bl != EMU_LAYOUT_NATIVE) continue; /* refused, tested above */
                    int K = Ms[mi] == 128 ? 64 : 96;
                    mm_case(t, Ms[mi], K, N, ac, bl, 8192, NULL);
                }
    }
    /* K past RK3588's 8192 segment: B native is two segments */
    mm_case(2, 3, 8192 + 256, 32, 1, EMU_LAYOUT_NATIVE, 8192, NULL);
    mm_case(10, 1, 8192 + 512, 64, 0, EMU_LAYOUT_NATIVE, 8192, NULL);
    mm_case(1, 2, 8192 + 64, 16, 1, EMU_LAYOUT_NATIVE, 8192, NULL);
    mm_case(2, 2, 8192 + 256, 32, 0, EMU_LAYOUT_TP_NORM, 8192, NULL);

    /* RK3576: every type, int4 in every B layout, segment 4096 */
    chip("rk3576");
    const int t3576[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15};
    for (size_t ti = 0; ti < sizeof t3576 / sizeof t3576[0]; ti++)
        for (int ac = 0; ac < 2; ac++)
            for (int bl = 0; bl < 3; bl++) mm_case(t3576[ti], 3, 64, 128, ac, bl, 4096, NULL);
    mm_case(10, 2, 4096 + 64, 64, 1, EMU_LAYOUT_NATIVE, 4096, NULL);
    mm_case(7, 2, 4096 + 32, 64, 0, EMU_LAYOUT_NATIVE, 4096, NULL);

    /* RK3562: N/16 int8 and N/8 fp16 native B */
    chip("rk3562");
    emu_matmul_info info;
    memset(&info, 0, sizeof info);
    info.M = 1, info.K = 64, info.N = 24, info.type = 1, info.B_layout = EMU_LAYOUT_NATIVE;
    emu_io_attr io;
    emu_ctx_t ctx;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
    CHECK(io.B.dims[0] == 3 && io.B.dims[1] == 2 && io.B.dims[2] == 8 && io.B.dims[3] == 32);
    R.destroy(ctx);
    info.type = 2, info.N = 48;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
    CHECK(io.B.dims[0] == 3 && io.B.dims[2] == 16 && io.B.dims[3] == 32);
    R.destroy(ctx);
    chip("rk3588");
}

/* fp16 -> f32 -> fp16/bf16 bit for bit against the engine's converters
 * (round to nearest even, subnormals, overflow to inf): A holds fp16 bit
 * patterns (finite: 0 * inf would poison every sum), B is a 0/1 selection.
 * "single": C[m][n] = A[m][n % 32], every finite pattern once (M = 2048).
 * "pairs": C[m][n] = A[m][n % 32] + w2 * A[m][n / 32 % 32], summed in f32 in k
 * order like the reference loop below, then rounded. Type 4 (fp16 x fp16
 * -> fp16) and type 12 (fp16 x int4 -> bf16, on RK3576). */
static void fp16_case(int type, int pairs, double w2)
{
    const int K = 32, M = pairs ? 64 : 2048, N = pairs ? 1024 : 64;
    const int tb = TYPES[type].b;
    emu_matmul_info info;
    memset(&info, 0, sizeof info);
    info.M = M, info.K = K, info.N = N, info.type = type, info.B_layout = EMU_LAYOUT_NATIVE;
    emu_io_attr io;
    emu_ctx_t ctx;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
    uint16_t *a = malloc((size_t)M * K * 2);
    double *bl = calloc((size_t)K * N, sizeof *bl);
    uint8_t *pb = calloc(1, io.B.size);
    for (uint32_t i = 0; i < (uint32_t)M * K; i++) {
        uint16_t h = (uint16_t)(i * (pairs ? 40503u : 1u));
        if ((h & 0x7c00) == 0x7c00) h &= 0xbfff; /* inf/nan -> finite */
        a[i] = h;
    }
    if (pairs) { /* the overflow boundary: 65504 + 16 ties to inf, + 8 not */
        a[0] = 0x7bff, a[1] = 0x4c00, a[K] = 0x7bff, a[K + 1] = 0x4800;
        a[2 * K] = 0xfbff, a[2 * K + 1] = 0xcc00;
    }
    for (int n = 0; n < N; n++) {
        bl[(n % 32) * N + n] = 1;
        if (pairs && n / 32 % 32 != n % 32) bl[(n / 32 % 32) * N + n] = w2;
    }
    pack_b(pb, tb, EMU_LAYOUT_NATIVE, (int)io.B.dims[2], (int)io.B.dims[3], 8192, K, N, bl);
    emu_tensor_mem *ma = mem_with(ctx, a, io.A.size, io.A.size);
    emu_tensor_mem *mb = mem_with(ctx, pb, io.B.size, io.B.size);
    emu_tensor_mem *mc = R.create_mem(ctx, io.C.size);
    R.set_io_mem(ctx, ma, &io.A), R.set_io_mem(ctx, mb, &io.B), R.set_io_mem(ctx, mc, &io.C);
    CHECK_EQ_INT(R.run(ctx), 0);
    R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
    const uint16_t *c = mc->virt_addr;
    int bad = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float v = 0;
            for (int k = 0; k < K; k++) v += rkm_f16_to_f32(a[m * K + k]) * (float)bl[k * N + n];
            uint16_t want = type == 12 ? rkm_f32_to_bf16(v) : rkm_f32_to_f16(v), got = c[m * N + n];
            if (got != want && bad++ < 5)
                fprintf(stderr, "type %d %s: %.9g -> %04x, want %04x\n", type,
                        pairs ? "pairs" : "single", v, got, want);
        }
    CHECK_MSG(bad == 0, "type %d pairs %d: %d wrong", type, pairs, bad);
    R.destroy_mem(ctx, ma), R.destroy_mem(ctx, mb), R.destroy_mem(ctx, mc);
    R.destroy(ctx);
    free(a), free(bl), free(pb);
}

static void test_fp16_exhaustive(void)
{
    chip("rk3588");
    fp16_case(4, 0, 0);
    fp16_case(4, 1, 1);
    fp16_case(4, 1, 0.5); /* halves of subnormals: ties to even */
    chip("rk3576");
    fp16_case(12, 0, 0);
    fp16_case(12, 1, 1);
    chip("rk3588");
}

/* int4 x int4 -> int16 saturates (emulator choice; unverified on a board). */
static void test_int16_saturation(void)
{
    chip("rk3588");
    const int M = 2, K = 1024, N = 64;
    emu_matmul_info info;
    memset(&info, 0, sizeof info);
    info.M = M, info.K = K, info.N = N, info.type = 10, info.B_layout = EMU_LAYOUT_NATIVE;
    emu_io_attr io;
    emu_ctx_t ctx;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
    /* A row 0 all -8, row 1 all 7; B all -8: sums 65536 and -57344 */
    uint8_t *pa = malloc(io.A.size), *pb = malloc(io.B.size);
    memset(pa, 0x88, (size_t)K / 2);
    memset(pa + K / 2, 0x77, (size_t)K / 2);
    memset(pb, 0x88, io.B.size);
    emu_tensor_mem *ma = mem_with(ctx, pa, io.A.size, io.A.size);
    emu_tensor_mem *mb = mem_with(ctx, pb, io.B.size, io.B.size);
    emu_tensor_mem *mc = R.create_mem(ctx, io.C.size);
    R.set_io_mem(ctx, ma, &io.A), R.set_io_mem(ctx, mb, &io.B), R.set_io_mem(ctx, mc, &io.C);
    CHECK_EQ_INT(R.run(ctx), 0);
    R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
    const int16_t *c = mc->virt_addr;
    CHECK_EQ_INT(c[0], 32767);
    CHECK_EQ_INT(c[N - 1], 32767);
    CHECK_EQ_INT(c[N], -32768);
    R.destroy_mem(ctx, ma), R.destroy_mem(ctx, mb), R.destroy_mem(ctx, mc);
    R.destroy(ctx);
    free(pa), free(pb);
}

static void test_quant(void)
{
    const int K = 64, N = 64;
    float sb[64 * 2];
    for (int i = 0; i < 64 * 2; i++) sb[i] = 0.001f * (float)(1 + rnd() % 50);
    chip("rk3588");
    /* INT8 -> INT8: per layer and per channel, saturating */
    qcase q1 = {0.05f, 0.5f, NULL, 0};
    mm_case(3, 3, K, N, 0, EMU_LAYOUT_NATIVE, 8192, &q1);
    qcase q2 = {0.5f, 0.02f, sb, 0};
    mm_case(3, 17, K, N, 1, EMU_LAYOUT_NATIVE, 8192, &q2);
    chip("rk3576");
    /* hybrid: fp16 x int8/int4 with per-channel and per-group B scales */
    qcase qc = {1.0f, 1.0f, sb, 0}, qg = {1.0f, 1.0f, sb, 32};
    mm_case(5, 3, K, N, 0, EMU_LAYOUT_NATIVE, 4096, &qc);
    mm_case(6, 3, K, N, 1, EMU_LAYOUT_NORM, 4096, &qc);
    mm_case(7, 1, K, N, 0, EMU_LAYOUT_NATIVE, 4096, &qg);
    mm_case(8, 3, K, N, 1, EMU_LAYOUT_TP_NORM, 4096, &qg);
    mm_case(12, 3, K, N, 0, EMU_LAYOUT_NATIVE, 4096, &qc);
    qcase q15 = {0.25f, 1.0f, sb, 0};
    mm_case(15, 3, K, N, 0, EMU_LAYOUT_NATIVE, 4096, &q15);
    qcase q9 = {0.25f, 1.0f, NULL, 0};
    mm_case(9, 3, K, N, 0, EMU_LAYOUT_NATIVE, 4096, &q9);

    /* refusals: INT8->FP32 per channel (RK3588 returns -5), per group for a
     * non-hybrid type, bad lengths; get_quant_params round trip */
    emu_matmul_info info;
    memset(&info, 0, sizeof info);
    info.M = 1, info.K = K, info.N = N, info.type = 9, info.group_size = 32;
    emu_io_attr io;
    emu_ctx_t ctx;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
    emu_quant_params qp;
    memset(&qp, 0, sizeof qp);
    strcpy(qp.name, "B"), qp.scale = sb, qp.scale_len = N;
    CHECK_EQ_INT(R.set_quant(ctx, &qp), EMU_ERR_PARAM_INVALID);
    qp.scale_len = 1;
    CHECK_EQ_INT(R.set_quant(ctx, &qp), 0);
    R.destroy(ctx);
    info.type = 2;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
    qp.scale_len = N * K / 32;
    CHECK_EQ_INT(R.set_quant(ctx, &qp), EMU_ERR_PARAM_INVALID);
    qp.scale_len = 7;
    CHECK_EQ_INT(R.set_quant(ctx, &qp), EMU_ERR_PARAM_INVALID);
    strcpy(qp.name, "X"), qp.scale_len = 1;
    CHECK_EQ_INT(R.set_quant(ctx, &qp), EMU_ERR_PARAM_INVALID);
    strcpy(qp.name, "A"), qp.scale_len = N;
    CHECK_EQ_INT(R.set_quant(ctx, &qp), EMU_ERR_PARAM_INVALID);
    strcpy(qp.name, "B"), qp.scale_len = N;
    int32_t zp[64] = {0};
    qp.zp = zp, qp.zp_len = 3;
    CHECK_EQ_INT(R.set_quant(ctx, &qp), EMU_ERR_PARAM_INVALID);
    qp.zp_len = N;
    CHECK_EQ_INT(R.set_quant(ctx, &qp), 0);
    float back[64] = {0}, first = 0;
    emu_quant_params g;
    memset(&g, 0, sizeof g);
    strcpy(g.name, "B"), g.scale = back, g.scale_len = N;
    CHECK_EQ_INT(R.get_quant(ctx, &g, &first), 0);
    CHECK(!memcmp(back, sb, N * sizeof(float)));
    CHECK(first == sb[0]);
    R.destroy(ctx);
    chip("rk3588");
}

/* A/B/C device copies: stale A without TO_DEVICE, stale C without
 * FROM_DEVICE; NORM/TP_NORM B snapshot at bind; native B read at run. */
static void test_coherence_and_snapshot(void)
{
    chip("rk3588");
    for (int bl = 0; bl < 3; bl++) {
        const int M = 1, K = 32, N = 32;
        emu_matmul_info info;
        memset(&info, 0, sizeof info);
        info.M = M, info.K = K, info.N = N, info.type = 2, info.B_layout = (int16_t)bl;
        emu_io_attr io;
        emu_ctx_t ctx;
        CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
        int8_t a[32], b[32 * 32];
        for (int i = 0; i < K; i++) a[i] = 1;
        memset(b, 0, sizeof b);
        /* B = all 1 (layout does not matter for a constant matrix) */
        memset(b, 1, sizeof b);
        emu_tensor_mem *ma = mem_with(ctx, a, sizeof a, io.A.size);
        emu_tensor_mem *mb = mem_with(ctx, b, sizeof b, io.B.size);
        emu_tensor_mem *mc = R.create_mem(ctx, io.C.size);
        R.set_io_mem(ctx, ma, &io.A), R.set_io_mem(ctx, mb, &io.B), R.set_io_mem(ctx, mc, &io.C);
        CHECK_EQ_INT(R.run(ctx), 0);
        int32_t *c = mc->virt_addr;
        CHECK_EQ_INT(c[0], 0); /* not synced back yet: the CPU view is stale */
        R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
        CHECK_EQ_INT(c[0], 32);
        /* A changed on the CPU without TO_DEVICE: the run sees the old A */
        memset(ma->virt_addr, 2, (size_t)K);
        c[0] = -1;
        R.run(ctx);
        R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
        CHECK_EQ_INT(c[0], 32);
        R.mem_sync(ctx, ma, EMU_SYNC_TO_DEVICE);
        R.run(ctx);
        R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
        CHECK_EQ_INT(c[0], 64);
        /* B changed and synced: native B is read at run, NORM/TP_NORM B was
         * converted at bind and needs a new set_io_mem */
        memset(mb->virt_addr, 3, io.B.size);
        R.mem_sync(ctx, mb, EMU_SYNC_TO_DEVICE);
        R.run(ctx);
        R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
        CHECK_MSG(c[0] == (bl == EMU_LAYOUT_NATIVE ? 192 : 64), "B layout %d: %d", bl, c[0]);
        CHECK_EQ_INT(R.set_io_mem(ctx, mb, &io.B), 0);
        R.run(ctx);
        R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
        CHECK_EQ_INT(c[N - 1], 192);
        /* B bound without a TO_DEVICE first: converted from stale data */
        if (bl != EMU_LAYOUT_NATIVE) {
            memset(mb->virt_addr, 1, io.B.size);
            R.set_io_mem(ctx, mb, &io.B);
            R.run(ctx);
            R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
            CHECK_EQ_INT(c[0], 192);
        }
        uint64_t to, from;
        R.stats(NULL, &to, &from, NULL, NULL);
        CHECK(to > 0 && from > 0);
        CHECK_EQ_INT(R.mem_sync(ctx, ma, 0), EMU_ERR_PARAM_INVALID);
        CHECK_EQ_INT(R.mem_sync(ctx, ma, 4), EMU_ERR_PARAM_INVALID);
        CHECK_EQ_INT(R.mem_sync(987654321, ma, 1), EMU_ERR_CTX_INVALID);
        R.destroy_mem(ctx, ma), R.destroy_mem(ctx, mb), R.destroy_mem(ctx, mc);
        R.destroy(ctx);
    }
}

static void test_dynamic(void)
{
    chip("rk3588");
    const int K = 64, N = 64;
    emu_shape shapes[3] = {{1, K, N}, {3, K, N}, {17, K, N}};
    emu_matmul_info info;
    memset(&info, 0, sizeof info);
    info.type = 2, info.B_layout = EMU_LAYOUT_NATIVE, info.AC_layout = EMU_LAYOUT_NATIVE;
    emu_io_attr io[3];
    emu_ctx_t ctx;
    CHECK_EQ_INT(R.create_dyn(&ctx, &info, 3, shapes, io), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(io[i].A.dims[1], shapes[i].M);
        CHECK_EQ_INT(io[i].A.size, shapes[i].M * K);
        CHECK_EQ_INT(io[i].C.size, shapes[i].M * N * 4);
        CHECK_EQ_INT(io[i].B.size, K * N);
    }
    double *a = malloc(17 * K * sizeof *a), *b = malloc(K * N * sizeof *b);
    for (int i = 0; i < 17 * K; i++) a[i] = rand_val(EMU_T_I8);
    for (int i = 0; i < K * N; i++) b[i] = rand_val(EMU_T_I8);
    uint8_t pb[64 * 64], pa[17 * 64];
    pack_b(pb, EMU_T_I8, EMU_LAYOUT_NATIVE, 32, 32, 8192, K, N, b);
    emu_tensor_mem *mb = mem_with(ctx, pb, sizeof pb, io[0].B.size);
    emu_tensor_mem *ma = R.create_mem(ctx, io[2].A.size); /* largest shape */
    emu_tensor_mem *mc = R.create_mem(ctx, io[2].C.size);
    CHECK_EQ_INT(R.set_io_mem(ctx, mb, &io[0].B), 0); /* B bound once */
    for (int r = 2; r >= 0; r--) {
        int M = shapes[r].M;
        CHECK_EQ_INT(R.set_dyn(ctx, &shapes[r]), 0);
        CHECK(R.run(ctx) < 0); /* A and C must be bound again */
        if (r < 2) {
            CHECK_EQ_INT(R.set_io_mem(ctx, mc, &io[r].C), 0);
            CHECK(R.run(ctx) < 0); /* C alone is not enough */
        }
        CHECK_EQ_INT(R.set_io_mem(ctx, ma, &io[(r + 1) % 3].A), EMU_ERR_PARAM_INVALID);
        pack_a(pa, EMU_T_I8, 1, 16, M, K, a);
        memcpy(ma->virt_addr, pa, (size_t)M * K);
        R.mem_sync(ctx, ma, EMU_SYNC_TO_DEVICE);
        CHECK_EQ_INT(R.set_io_mem(ctx, ma, &io[r].A), 0);
        CHECK_EQ_INT(R.set_io_mem(ctx, mc, &io[r].C), 0);
        CHECK_EQ_INT(R.run(ctx), 0);
        R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
        double c[17 * 64];
        unpack_c(mc->virt_addr, EMU_T_I32, 1, 4, M, N, c);
        int bad = 0;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double tol;
                bad += c[m * N + n] != ref_elem(2, M, K, N, a, b, m, n, NULL, &tol);
            }
        CHECK_MSG(bad == 0, "dynamic M=%d: %d wrong", M, bad);
    }
    emu_shape other = {5, K, N};
    CHECK_EQ_INT(R.set_dyn(ctx, &other), EMU_ERR_PARAM_INVALID);
    R.destroy_mem(ctx, ma), R.destroy_mem(ctx, mb), R.destroy_mem(ctx, mc);
    R.destroy(ctx);
    free(a), free(b);
    /* K or N differing across shapes: refused unless B is TP_NORM */
    emu_shape mixed[2] = {{1, 64, 64}, {1, 128, 64}};
    CHECK_EQ_INT(R.create_dyn(&ctx, &info, 2, mixed, io), EMU_ERR_PARAM_INVALID);
    info.B_layout = EMU_LAYOUT_TP_NORM;
    CHECK_EQ_INT(R.create_dyn(&ctx, &info, 2, mixed, io), 0);
    CHECK(io[1].B.dims[0] == 64 && io[1].B.dims[1] == 128);
    R.destroy(ctx);
    /* a static context has no dynamic shapes */
    info.M = 1, info.K = 64, info.N = 64;
    CHECK_EQ_INT(R.create(&ctx, &info, io), 0);
    CHECK_EQ_INT(R.set_dyn(ctx, &shapes[0]), EMU_ERR_PARAM_INVALID);
    R.destroy(ctx);
}

static void test_packer(void)
{
    chip("rk3588");
    const int types[] = {1, 2, 10};
    for (int ti = 0; ti < 3; ti++)
        for (int big = 0; big < 2; big++) {
            int t = types[ti], tb = TYPES[t].b;
            int K = big ? 8192 + 64 : 96, N = tb == EMU_T_I4 ? 128 : 64;
            double *b = malloc((size_t)K * N * sizeof *b);
            for (size_t i = 0; i < (size_t)K * N; i++) b[i] = rand_val(tb);
            size_t eb = tb == EMU_T_F16 ? 2 : 1;
            uint8_t *src = calloc((size_t)K * N, eb), *want = calloc((size_t)K * N, eb),
                    *got = calloc((size_t)K * N, eb);
            /* int4 input: one value per byte (packed input overreads in the real runtime) */
            for (size_t i = 0; i < (size_t)K * N; i++) {
                if (tb == EMU_T_I4) src[i] = (uint8_t)(int8_t)b[i];
                else put(src, tb, i, b[i]);
            }
            pack_b(want, tb, EMU_LAYOUT_NATIVE, exp_b_subn(tb), 32, 8192, K, N, b);
            emu_matmul_info info;
            memset(&info, 0, sizeof info);
            info.type = t, info.B_layout = EMU_LAYOUT_NATIVE;
            CHECK_EQ_INT(R.b_to_native(src, got, K, N, &info), 0);
            CHECK_MSG(!memcmp(got, want, nbytes(tb, (size_t)K * N)), "packer type %d K %d", t, K);
            CHECK_EQ_INT(R.b_to_native(src, got, K + 16, N, &info), EMU_ERR_PARAM_INVALID);
            CHECK_EQ_INT(R.b_to_native(src, got, K, N + 8, &info), EMU_ERR_PARAM_INVALID);
            CHECK_EQ_INT(R.b_to_native(NULL, got, K, N, &info), EMU_ERR_PARAM_INVALID);
            free(b), free(src), free(want), free(got);
        }
}

/* create_mem_from_fd views share the parent's storage; misuse is refused. */
static void test_views(void)
{
    chip("rk3588");
    const int M = 3, K = 64, N = 64;
    emu_matmul_info info;
    memset(&info, 0, sizeof info);
    info.M = M, info.K = K, info.N = N, info.type = 2, info.B_layout = EMU_LAYOUT_NATIVE;
    emu_io_attr io;
    emu_ctx_t ctx, alloc_ctx;
    CHECK_EQ_INT(R.create(&ctx, &info, &io), 0);
    CHECK_EQ_INT(R.create(&alloc_ctx, &info, &io), 0);
    /* one big buffer holding two B matrices after a 4 KiB gap */
    uint32_t off0 = 4096, off1 = 4096 + io.B.size;
    emu_tensor_mem *big = R.create_mem2(alloc_ctx, off1 + io.B.size, 0);
    CHECK(big != NULL);
    double *a = malloc(M * K * sizeof *a), *b0 = malloc(K * N * sizeof *b0),
           *b1 = malloc(K * N * sizeof *b1);
    for (int i = 0; i < M * K; i++) a[i] = rand_val(EMU_T_I8);
    for (int i = 0; i < K * N; i++) b0[i] = rand_val(EMU_T_I8), b1[i] = rand_val(EMU_T_I8);
    pack_b((uint8_t *)big->virt_addr + off0, EMU_T_I8, 1, 32, 32, 8192, K, N, b0);
    pack_b((uint8_t *)big->virt_addr + off1, EMU_T_I8, 1, 32, 32, 8192, K, N, b1);
    CHECK_EQ_INT(R.mem_sync(alloc_ctx, big, EMU_SYNC_TO_DEVICE), 0);
    emu_tensor_mem *v0 = R.create_mem_from_fd(ctx, big->fd, big->virt_addr, io.B.size, (int32_t)off0);
    emu_tensor_mem *v1 = R.create_mem_from_fd(ctx, big->fd, big->virt_addr, io.B.size, (int32_t)off1);
    CHECK(v0 && v1);
    CHECK(v0 && v0->virt_addr == (uint8_t *)big->virt_addr + off0 && v0->offset == (int32_t)off0 &&
          v0->fd == big->fd && v0->flags == EMU_MEMF_FROM_FD);
    /* wrong base, range past the end, unknown fd */
    CHECK(R.create_mem_from_fd(ctx, big->fd, (uint8_t *)big->virt_addr + off0, io.B.size, 0) == NULL);
    CHECK(R.create_mem_from_fd(ctx, big->fd, big->virt_addr, io.B.size, (int32_t)off1 + 1) == NULL);
    CHECK(R.create_mem_from_fd(ctx, -5, big->virt_addr, 16, 0) == NULL);
    CHECK(R.create_mem_from_fd(987654321, big->fd, big->virt_addr, 16, 0) == NULL);
    uint8_t pa[3 * 64];
    pack_a(pa, EMU_T_I8, 0, 0, M, K, a);
    emu_tensor_mem *ma = mem_with(ctx, pa, sizeof pa, io.A.size);
    emu_tensor_mem *mc = R.create_mem(ctx, io.C.size);
    R.set_io_mem(ctx, ma, &io.A), R.set_io_mem(ctx, mc, &io.C);
    for (int w = 0; w < 2; w++) {
        CHECK_EQ_INT(R.set_io_mem(ctx, w ? v1 : v0, &io.B), 0); /* swap weights */
        CHECK_EQ_INT(R.run(ctx), 0);
        R.mem_sync(ctx, mc, EMU_SYNC_FROM_DEVICE);
        const int32_t *c = mc->virt_addr;
        int bad = 0;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double tol;
                bad += c[m * N + n] != ref_elem(2, M, K, N, a, w ? b1 : b0, m, n, NULL, &tol);
            }
        CHECK_MSG(bad == 0, "view %d: %d wrong", w, bad);
    }
    /* a view's sync covers its own range only */
    memset(big->virt_addr, 0x55, (size_t)off1 + io.B.size);
    CHECK_EQ_INT(R.mem_sync(ctx, v1, EMU_SYNC_FROM_DEVICE), 0);
    CHECK(((uint8_t *)big->virt_addr)[0] == 0x55 && ((uint8_t *)big->virt_addr)[off0] == 0x55);
    CHECK(((uint8_t *)big->virt_addr)[off1] != 0x55 || ((uint8_t *)big->virt_addr)[off1 + 1] != 0x55);
    /* RKNN_EMU_VIEW_SYNC=noop: syncing through a view does nothing */
    setenv("RKNN_EMU_VIEW_SYNC", "noop", 1);
    memset(big->virt_addr, 0x55, (size_t)off1 + io.B.size);
    R.mem_sync(ctx, v1, EMU_SYNC_FROM_DEVICE);
    CHECK(((uint8_t *)big->virt_addr)[off1] == 0x55 && ((uint8_t *)big->virt_addr)[off1 + 1] == 0x55);
    unsetenv("RKNN_EMU_VIEW_SYNC");
    /* destroying the parent leaves the views dead, not dangling */
    CHECK_EQ_INT(R.destroy_mem(alloc_ctx, big), 0);
    CHECK_EQ_INT(R.destroy_mem(alloc_ctx, big), EMU_ERR_PARAM_INVALID);
    CHECK(R.run(ctx) < 0); /* v1 is still bound, its storage was freed */
    CHECK_EQ_INT(R.mem_sync(ctx, v0, EMU_SYNC_TO_DEVICE), EMU_ERR_PARAM_INVALID);
    CHECK_EQ_INT(R.set_io_mem(ctx, v0, &io.B), EMU_ERR_PARAM_INVALID);
    R.destroy_mem(ctx, v0), R.destroy_mem(ctx, v1);
    /* binding errors: too small, wrong attr, unknown pointer, no context */
    emu_tensor_mem *small = R.create_mem(ctx, io.A.size - 1);
    CHECK_EQ_INT(R.set_io_mem(ctx, small, &io.A), EMU_ERR_PARAM_INVALID);
    emu_tensor_attr bad = io.A;
    bad.dims[0]++;
    CHECK_EQ_INT(R.set_io_mem(ctx, ma, &bad), EMU_ERR_PARAM_INVALID);
    strcpy(bad.name, "D");
    CHECK_EQ_INT(R.set_io_mem(ctx, ma, &bad), EMU_ERR_PARAM_INVALID);
    emu_tensor_mem fake = *ma;
    CHECK_EQ_INT(R.set_io_mem(ctx, &fake, &io.A), EMU_ERR_PARAM_INVALID);
    CHECK_EQ_INT(R.set_io_mem(987654321, ma, &io.A), EMU_ERR_CTX_INVALID);
    /* memory without a context only with RKNN_MEM_FLAG_ALLOC_NO_CONTEXT */
    CHECK(R.create_mem(0, 64) == NULL);
    emu_tensor_mem *nc = R.create_mem2(0, 64, EMU_MEM2_NO_CONTEXT);
    CHECK(nc != NULL);
    CHECK_EQ_INT(R.mem_sync(0, nc, EMU_SYNC_BIDIRECTIONAL), 0);
    CHECK_EQ_INT(R.destroy_mem(ctx, nc), 0);
    CHECK(R.create_mem(ctx, 0) == NULL);
    CHECK(R.create_mem2(ctx, 1ull << 33, 0) == NULL);
    R.destroy_mem(ctx, small), R.destroy_mem(ctx, ma), R.destroy_mem(ctx, mc);
    /* a run after its A was destroyed is an error, not a crash */
    CHECK(R.run(ctx) < 0);
    CHECK_EQ_INT(R.destroy(ctx), 0);
    CHECK_EQ_INT(R.destroy(ctx), EMU_ERR_CTX_INVALID);
    R.destroy(alloc_ctx);
    free(a), free(b0), free(b1);
}

/* Three contexts pinned to the three cores, each a third of N, run from
 * three threads over one shared A (the multi-core masks are refused for matmul). */
typedef struct {
    emu_ctx_t ctx;
    int rc;
} core_job;

static void *core_thread(void *p)
{
    core_job *j = p;
    j->rc = R.run(j->ctx);
    return NULL;
}

static void test_cores_threads(void)
{
    chip("rk3588");
    const int M = 3, K = 64, Ns = 32, N = 3 * Ns;
    double *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b);
    for (int i = 0; i < M * K; i++) a[i] = rand_val(EMU_T_I8);
    for (int i = 0; i < K * N; i++) b[i] = rand_val(EMU_T_I8);
    uint64_t before[3], after[3];
    R.stats(before, NULL, NULL, NULL, NULL);
    core_job jobs[3];
    emu_tensor_mem *ma = NULL, *mb[3], *mc[3];
    emu_io_attr io;
    for (int i = 0; i < 3; i++) {
        emu_matmul_info info;
        memset(&info, 0, sizeof info);
        info.M = M, info.K = K, info.N = Ns, info.type = 2, info.B_layout = EMU_LAYOUT_NATIVE;
        CHECK_EQ_INT(R.create(&jobs[i].ctx, &info, &io), 0);
        CHECK_EQ_INT(R.set_core_mask(jobs[i].ctx, 1 << i), 0);
        if (!ma) {
            uint8_t pa[3 * 64];
            pack_a(pa, EMU_T_I8, 0, 0, M, K, a);
            ma = mem_with(jobs[i].ctx, pa, sizeof pa, io.A.size);
        }
        double bs[64 * 32];
        for (int k = 0; k < K; k++)
            for (int n = 0; n < Ns; n++) bs[k * Ns + n] = b[k * N + i * Ns + n];
        uint8_t pb[64 * 32];
        pack_b(pb, EMU_T_I8, 1, 32, 32, 8192, K, Ns, bs);
        mb[i] = mem_with(jobs[i].ctx, pb, sizeof pb, io.B.size);
        mc[i] = R.create_mem(jobs[i].ctx, io.C.size);
        CHECK_EQ_INT(R.set_io_mem(jobs[i].ctx, ma, &io.A), 0);
        CHECK_EQ_INT(R.set_io_mem(jobs[i].ctx, mb[i], &io.B), 0);
        CHECK_EQ_INT(R.set_io_mem(jobs[i].ctx, mc[i], &io.C), 0);
    }
    pthread_t th[3];
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, core_thread, &jobs[i]);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    R.stats(after, NULL, NULL, NULL, NULL);
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(jobs[i].rc, 0);
        CHECK_EQ_INT(after[i] - before[i], 1);
        R.mem_sync(jobs[i].ctx, mc[i], EMU_SYNC_FROM_DEVICE);
        const int32_t *c = mc[i]->virt_addr;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < Ns; n++) {
                double tol;
                bad += c[m * Ns + n] != ref_elem(2, M, K, N, a, b, m, i * Ns + n, NULL, &tol);
            }
    }
    CHECK_EQ_INT(bad, 0);
    R.destroy_mem(jobs[0].ctx, ma);
    for (int i = 0; i < 3; i++) {
        R.destroy_mem(jobs[i].ctx, mb[i]), R.destroy_mem(jobs[i].ctx, mc[i]);
        R.destroy(jobs[i].ctx);
    }
    free(a), free(b);
}

/* An unaligned or over-limit shape kills the process (in a child here). */
static int dies_with_abort(int type, int M, int K, int N, int dynamic)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(2);
        emu_matmul_info info;
        memset(&info, 0, sizeof info);
        info.M = M, info.K = K, info.N = N, info.type = type, info.B_layout = EMU_LAYOUT_NATIVE;
        emu_io_attr io[2];
        emu_ctx_t ctx;
        emu_shape sh[2] = {{1, 64, 64}, {M, K, N}};
        if (dynamic) R.create_dyn(&ctx, &info, 2, sh, io);
        else R.create(&ctx, &info, io);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void test_aborts(void)
{
    chip("rk3588");
    CHECK(dies_with_abort(2, 1, 48, 32, 0));       /* K % 32 */
    CHECK(dies_with_abort(2, 1, 64, 16, 0));       /* int8 N % 32 */
    CHECK(dies_with_abort(10, 1, 64, 32, 0));      /* int4 N % 64 */
    CHECK(dies_with_abort(1, 1, 64, 8, 0));        /* fp16 N % 16 */
    CHECK(dies_with_abort(2, 3, 40, 64, 1));       /* one dynamic shape */
    CHECK(dies_with_abort(1, 2048, 16384, 16, 0)); /* fp16, M 2048, K 16384: a fatal config error */
    CHECK(!dies_with_abort(2, 1, 64, 32, 0));      /* control: aligned */
    CHECK(!dies_with_abort(10, 1, 64, 64, 0));
    chip("rk3562");
    CHECK(!dies_with_abort(1, 1, 64, 8, 0)); /* RK3562 fp16: N % 8 */
    CHECK(dies_with_abort(2, 1, 64, 8, 0));  /* RK3562 int8: N % 16 */
    chip("rk3588");
}

int main(int argc, char **argv)
{
    (void)argc;
    load_lib(argv[0]);
    uint64_t mems0, ctxs0;
    R.stats(NULL, NULL, NULL, &mems0, &ctxs0);
    test_raw_offsets();
    test_types_per_chip();
    test_core_masks();
    test_all_types_layouts();
    test_fp16_exhaustive();
    test_int16_saturation();
    test_quant();
    test_coherence_and_snapshot();
    test_dynamic();
    test_packer();
    test_views();
    test_cores_threads();
    test_aborts();
    uint64_t mems1, ctxs1;
    R.stats(NULL, NULL, NULL, &mems1, &ctxs1);
    CHECK_EQ_INT(mems1, mems0); /* every buffer and context was freed */
    CHECK_EQ_INT(ctxs1, ctxs0);
    printf("%d matmul cases against the reference\n", n_cases);
    return test_done();
}
