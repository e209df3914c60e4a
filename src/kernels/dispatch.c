/*
 * dispatch.c - picks the kernel set for this CPU once (cpuid and xgetbv
 * on x86, getauxval(AT_HWCAP) on ARM; RKM_KERNELS
 * forces one), and implements the public entry points of kernels.h on top
 * of it: the matmul driver (activation quantization, splitting weight rows
 * across the pool) and the element ops.
 *
 * Threads: the active set is written once under pthread_once (or by
 * rkm_kernels_select, which tests call while no kernel runs) and read by
 * everyone. The quantized-activation scratch is per calling thread (a
 * pthread key frees it when the thread exits); pool workers only read it
 * while the owner waits in rkm_pool_run.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "kernels/kernels_impl.h"
#include "util/common.h"
#include "util/fp16.h"
#include "util/knobs.h"

/* ------------------------------------------------------ variant table */
typedef struct {
    const char *name;
    const rkm_kernel_set *set;
    int (*supported)(void);
    const char *parent; /* entries the set leaves NULL come from here (else ref) */
} variant;

static int sup_always(void) { return 1; }

#if defined(__x86_64__)
/* cpuid + xgetbv directly (not __builtin_cpu_supports: clang's lacks
 * "f16c"): the CPU must have the instructions and the OS must save the
 * ymm/zmm state. */
#include <cpuid.h>

enum { X86_AVX2 = 1, X86_AVX512 = 2, X86_VNNI = 4, X86_AVXVNNI = 8 };

static int x86_features(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return 0;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & 6) != 6) return 0; /* xmm and ymm state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int f = 0;
    if (((b >> 5) & 1) && fma && f16c) f |= X86_AVX2;
    unsigned a1, b1, c1, d1;
    if ((f & X86_AVX2) && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && ((a1 >> 4) & 1)) f |= X86_AVXVNNI;
    int zmm_state = (xlo & 0xe0) == 0xe0; /* opmask, upper zmm0-15, zmm16-31 */
    int avx512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1); /* F DQ BW VL */
    if ((f & X86_AVX2) && avx512 && zmm_state) {
        f |= X86_AVX512;
        if ((c >> 11) & 1) f |= X86_VNNI;
    }
    return f;
}

static int sup_avx2(void) { return (x86_features() & X86_AVX2) != 0; }
static int sup_avx512(void) { return (x86_features() & X86_AVX512) != 0; }
static int sup_avx512vnni(void) { return (x86_features() & (X86_AVX512 | X86_VNNI)) == (X86_AVX512 | X86_VNNI); }
static int sup_avxvnni(void) { return (x86_features() & X86_AVXVNNI) != 0; }
#endif

#if defined(__aarch64__)
static int sup_dotprod(void)
{
    unsigned long hw = getauxval(AT_HWCAP);
    return (hw & HWCAP_ASIMDDP) && (hw & HWCAP_ASIMDHP) && (hw & HWCAP_FPHP);
}
#endif

/* Best first. */
static const variant variants[] = {
#if defined(__x86_64__)
    {"avx512vnni", &rkm_kernels_avx512vnni, sup_avx512vnni, "avx512"},
    {"avx512", &rkm_kernels_avx512, sup_avx512, "avx2"},
    {"avxvnni", &rkm_kernels_avxvnni, sup_avxvnni, "avx2"},
    {"avx2", &rkm_kernels_avx2, sup_avx2, NULL},
#endif
#if defined(__aarch64__)
    {"dotprod", &rkm_kernels_dotprod, sup_dotprod, "neon"},
    {"neon", &rkm_kernels_neon, sup_always, NULL},
#endif
    {"ref", &rkm_kernels_ref, sup_always, NULL},
};

static rkm_kernel_set active;
static _Atomic int active_ready;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static const variant *find_variant(const char *name);

/* Merges v over its parents over the reference into `active`. */
static void merge(rkm_kernel_set *k, const variant *v)
{
    if (v->parent) merge(k, find_variant(v->parent));
    const rkm_kernel_set *s = v->set;
    if (s->init) s->init();
#define TAKE(f) \
    if (s->f) k->f = s->f
    k->name = s->name;
    TAKE(quantize_act);
    TAKE(quantize_act_k);
    TAKE(mm_f32);
    TAKE(mm_f16);
    TAKE(mm_q8_0);
    TAKE(mm_q4_0);
    TAKE(mm_bf16);
    TAKE(mm_q4_1);
    TAKE(mm_q5_0);
    TAKE(mm_q5_1);
    TAKE(mm_q2_k);
    TAKE(mm_q3_k);
    TAKE(mm_q4_k);
    TAKE(mm_q5_k);
    TAKE(mm_q6_k);
    TAKE(mm_iq4_nl);
    TAKE(mm_iq4_xs);
    TAKE(mm_mxfp4);
    TAKE(mm_grid);
    TAKE(mm_q8_0_p);
    TAKE(mm_q4_0_p);
    TAKE(mm_mxfp4_p);
    TAKE(mm_iq4_nl_p);
    TAKE(mm_q2_k_p);
    TAKE(mm_q3_k_p);
    TAKE(mm_q4_k_p);
    TAKE(mm_q5_k_p);
    TAKE(mm_q6_k_p);
    TAKE(mm_iq4_xs_p);
    TAKE(rmsnorm);
    TAKE(softmax);
    TAKE(swiglu);
    TAKE(geglu);
    TAKE(gelu);
    TAKE(f32_to_f16);
    TAKE(f16_to_f32);
    TAKE(dot_f32_f16);
    TAKE(axpy_f16);
    TAKE(delta_step);
    TAKE(scan_step);
    TAKE(conv_step);
    TAKE(read_sum);
    /* a set's row-batched entries go with its single-row ones */
    if (s->dot_f32_f16) k->dot_f32_f16_rows = s->dot_f32_f16_rows;
    if (s->axpy_f16) k->axpy_f16_rows = s->axpy_f16_rows;
#undef TAKE
}

static void activate(const variant *v)
{
    rkm_kernel_set k = rkm_kernels_ref;
    merge(&k, v);
    k.init = NULL;
    active = k;
    atomic_store_explicit(&active_ready, 1, memory_order_release);
}

static const variant *find_variant(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < RKM_ARRAY_LEN(variants); i++)
        if (strcmp(variants[i].name, name) == 0) return &variants[i];
    return NULL;
}

static void init_default(void)
{
    const char *force = rkm_knob(RKM_KNOB_KERNELS);
    if (force && *force) {
        const variant *v = find_variant(force);
        if (v && v->supported()) {
            activate(v);
            return;
        }
        /* An env knob for debugging; say why it was ignored. */
        fprintf(stderr, "rkmojo: RKM_KERNELS=%s is %s here; using the best available\n", force,
                v ? "not supported by this CPU" : "unknown");
    }
    for (size_t i = 0; i < RKM_ARRAY_LEN(variants); i++)
        if (variants[i].supported()) {
            activate(&variants[i]);
            return;
        }
}

void rkm_kernels_init(void) { pthread_once(&init_once, init_default); }

const rkm_kernel_set *rkm_kernels_active(void)
{
    if (!atomic_load_explicit(&active_ready, memory_order_acquire)) rkm_kernels_init();
    return &active;
}

const char *rkm_kernels_name(void) { return rkm_kernels_active()->name; }

int rkm_kernels_list(const char **names, int cap)
{
    int n = 0;
    for (size_t i = 0; i < RKM_ARRAY_LEN(variants); i++)
        if (variants[i].supported()) {
            if (n < cap) names[n] = variants[i].name;
            n++;
        }
    return n;
}

int rkm_kernels_select(const char *name)
{
    rkm_kernels_init();
    const variant *v = find_variant(name);
    if (!v) return rkm_err(RKM_EINVAL, "unknown kernel set '%s'", name);
    if (!v->supported()) return rkm_err(RKM_EUNSUPPORTED, "kernel set '%s' needs CPU features this machine lacks", name);
    activate(v);
    return 0;
}

/* ------------------------------------------------------------ scratch */
/* Per-thread buffers, one per slot: SLOT_ACT holds the owner's quantized
 * activations (read by the workers during the run), SLOT_KERNEL is for a
 * kernel's own use on whichever thread runs it (rkm_kernel_scratch). */
enum { SLOT_ACT, SLOT_KERNEL, N_SLOTS };

typedef struct {
    void *p[N_SLOTS];
    size_t cap[N_SLOTS];
    /* what SLOT_ACT holds, for rkm_matmul_reuse (x NULL: nothing reusable) */
    const float *act_x;
    int64_t act_n_in, act_m;
    int act_k;  /* q8_K (1) or q8_0 (0) activations */
    int act_xm; /* q8_0 ones: their Q4_1/Q5_1 min sums are filled */
} scratch_buf;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v)
{
    scratch_buf *s = v;
    if (s)
        for (int i = 0; i < N_SLOTS; i++) rkm_free_aligned(s->p[i]);
    free(s);
}

static void scratch_init(void) { pthread_key_create(&scratch_key, scratch_free); }

/* This thread's scratch of at least bytes (64-byte aligned). Aborts on
 * out-of-memory: the sizes are bounded by the model's shapes, which the
 * loader has validated, so failure here is an exhausted machine. */
static scratch_buf *scratch_this(void)
{
    pthread_once(&scratch_once, scratch_init);
    scratch_buf *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        RKM_ASSERT(s);
        pthread_setspecific(scratch_key, s);
    }
    return s;
}

static void *scratch_get(int slot, size_t bytes)
{
    scratch_buf *s = scratch_this();
    if (s->cap[slot] < bytes) {
        rkm_free_aligned(s->p[slot]);
        s->cap[slot] = RKM_ALIGN_UP(bytes + bytes / 4, 4096);
        s->p[slot] = rkm_alloc_aligned(s->cap[slot], 64);
        RKM_ASSERT(s->p[slot]);
    }
    return s->p[slot];
}

void *rkm_kernel_scratch(size_t bytes) { return scratch_get(SLOT_KERNEL, bytes); }

/* ------------------------------------------------------------- matmul */
/* Weight rows are handed out in runs from an atomic counter (rkm_pool_take),
 * so a thread slowed down by something else (IO threads, a LITTLE core)
 * takes fewer, and the runs shrink near the end so both finish together. */
typedef struct {
    rkm_mm_args a;
    rkm_mm_fn fn;
    rkm_mm_fn fn_tail; /* packed weights: whole groups by fn, rows from n_pk by fn_tail */
    int64_t n_pk;
    const float *x; /* quantize job: source rows */
    int act_k;      /* q8_K activations (else q8_0) */
    int64_t chunk;  /* most rows per claim (rkm_pool_take) */
    int64_t grain;  /* claims start at multiples of it: ROW_GRAIN, or 16 */
    _Atomic int64_t next;
} mm_job;

/* The SIMD decode kernels work on tiles of up to 4 weight rows. */
#define ROW_GRAIN 4

/* Rows [r0, r1): packed groups, then the plain tail rows. r0 is a group
 * boundary for packed weights (chunks are whole groups). */
static void mm_range(const mm_job *j, int64_t r0, int64_t r1)
{
    if (!j->fn_tail) {
        j->fn(&j->a, r0, r1);
        return;
    }
    if (r0 < j->n_pk) j->fn(&j->a, r0, RKM_MIN(r1, j->n_pk));
    if (r1 > j->n_pk) j->fn_tail(&j->a, RKM_MAX(r0, j->n_pk), r1);
}

static void mm_worker(void *ctx, int ith, int nth)
{
    mm_job *j = ctx;
    (void)ith;
    int64_t r0, n;
    while ((n = rkm_pool_take(&j->next, j->a.n_out, j->chunk, j->grain, nth, &r0)) > 0) mm_range(j, r0, r0 + n);
}

static void quant_worker(void *ctx, int ith, int nth)
{
    mm_job *j = ctx;
    const rkm_kernel_set *k = rkm_kernels_active();
    const int64_t n = j->a.n_in;
    if (j->act_k) {
        for (int64_t i = ith; i < j->a.m; i += nth)
            k->quantize_act_k(j->x + i * n, n, (int8_t *)j->a.xq + i * n, (float *)j->a.xd + i * (n / RKM_QK_K),
                               (int32_t *)j->a.xs + i * (n / 16));
        return;
    }
    int64_t nb = n / RKM_QK8_0;
    for (int64_t i = ith; i < j->a.m; i += nth)
        k->quantize_act(j->x + i * n, n, (int8_t *)j->a.xq + i * n, (float *)j->a.xd + i * nb,
                        (int32_t *)j->a.xs + i * nb);
}

static void matmul(rkm_pool *pool, int wtype, const void *w, int64_t n_in, int64_t n_out, const float *x, int64_t m,
                   float *y, int64_t ldy, int reuse);

/* The min term's activations of Q4_1 / Q5_1 (kernels_impl.h): per block
 * of 32, the block's unrounded q8 scale amax/127 times the sum of its
 * quantized values, rounded to f16, as ggml's q8_1 "s". */
static void act_min_sums(const float *x, int64_t n_in, int64_t m, const int32_t *xs, float *xm)
{
    const int64_t nb = n_in / RKM_QK8_0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t b = 0; b < nb; b++) {
            const float *xb = x + i * n_in + b * RKM_QK8_0;
            float amax = 0.0f;
            for (int k = 0; k < RKM_QK8_0; k++) amax = fmaxf(amax, fabsf(xb[k]));
            const float d = amax / 127.0f;
            xm[i * nb + b] = rkm_f16_to_f32(rkm_f32_to_f16(d * (float)xs[i * nb + b]));
        }
}

void rkm_matmul(rkm_pool *pool, int wtype, const void *w, int64_t n_in, int64_t n_out,
                const float *x, int64_t m, float *y, int64_t ldy)
{
    matmul(pool, wtype, w, n_in, n_out, x, m, y, ldy, 0);
}

void rkm_matmul_reuse_begin(void) { scratch_this()->act_x = NULL; }

void rkm_matmul_reuse(int wtype, const void *w, int64_t n_in, int64_t n_out, const float *x, int64_t m, float *y,
                      int64_t ldy)
{
    matmul(NULL, wtype, w, n_in, n_out, x, m, y, ldy, 1);
}

static void matmul(rkm_pool *pool, int wtype, const void *w, int64_t n_in, int64_t n_out, const float *x, int64_t m,
                   float *y, int64_t ldy, int reuse)
{
    const rkm_kernel_set *k = rkm_kernels_active();
    if (m <= 0 || n_out <= 0) return;
    RKM_ASSERT(n_in > 0 && ldy >= n_out);
    mm_job j;
    memset(&j, 0, sizeof j);
    j.a.w = w;
    j.a.n_in = n_in;
    j.a.n_out = n_out;
    j.a.m = m;
    j.a.y = y;
    j.a.ldy = ldy;
    int nth = rkm_pool_n_threads(pool);
    /* the kernel and the activations' form for this weight type */
    rkm_mm_fn fn = NULL;
    int acts = 0; /* 0 f32, 1 q8_0, 2 q8_K */
    const int base = rkm_unpack_type(wtype);
    switch (base) {
    case RKM_TYPE_F32: fn = k->mm_f32; break;
    case RKM_TYPE_F16: fn = k->mm_f16; break;
    case RKM_TYPE_BF16: fn = k->mm_bf16; break;
    case RKM_TYPE_Q8_0: fn = k->mm_q8_0, acts = 1; break;
    case RKM_TYPE_Q4_0: fn = k->mm_q4_0, acts = 1; break;
    case RKM_TYPE_Q4_1: fn = k->mm_q4_1, acts = 1; break;
    case RKM_TYPE_Q5_0: fn = k->mm_q5_0, acts = 1; break;
    case RKM_TYPE_Q5_1: fn = k->mm_q5_1, acts = 1; break;
    case RKM_TYPE_IQ4_NL: fn = k->mm_iq4_nl, acts = 1; break;
    case RKM_TYPE_MXFP4: fn = k->mm_mxfp4, acts = 1; break;
    case RKM_TYPE_Q2_K: fn = k->mm_q2_k, acts = 2; break;
    case RKM_TYPE_Q3_K: fn = k->mm_q3_k, acts = 2; break;
    case RKM_TYPE_Q4_K: fn = k->mm_q4_k, acts = 2; break;
    case RKM_TYPE_Q5_K: fn = k->mm_q5_k, acts = 2; break;
    case RKM_TYPE_Q6_K: fn = k->mm_q6_k, acts = 2; break;
    case RKM_TYPE_IQ4_XS: fn = k->mm_iq4_xs, acts = 2; break;
    default:
        if (rkm_type_grid(base)) fn = k->mm_grid, acts = 2;
        break;
    }
    j.a.type = base;
    RKM_ASSERT(fn && (wtype == base || rkm_type_packed(wtype)) && "rkm_matmul: unsupported weight type");
    j.fn = fn;
    j.a.w_row_bytes = rkm_type_row_bytes(base, n_in);
    RKM_ASSERT(j.a.w_row_bytes);
    if (wtype & RKM_TYPE_PACKED) {
        j.fn_tail = j.fn;
        j.fn = base == RKM_TYPE_Q8_0   ? k->mm_q8_0_p
               : base == RKM_TYPE_Q4_0 ? k->mm_q4_0_p
               : base == RKM_TYPE_Q2_K ? k->mm_q2_k_p
               : base == RKM_TYPE_Q3_K ? k->mm_q3_k_p
               : base == RKM_TYPE_Q4_K ? k->mm_q4_k_p
               : base == RKM_TYPE_Q5_K ? k->mm_q5_k_p
               : base == RKM_TYPE_Q6_K ? k->mm_q6_k_p
               : base == RKM_TYPE_IQ4_NL ? k->mm_iq4_nl_p
               : base == RKM_TYPE_IQ4_XS ? k->mm_iq4_xs_p
                                       : k->mm_mxfp4_p;
        j.n_pk = n_out / RKM_PACK_ROWS * RKM_PACK_ROWS;
    }
    if (!acts) j.a.x = x;
    else {
        /* qs, then the scales, then the sums (of 32 or of 16 values) */
        j.act_k = acts == 2;
        const int64_t n_d = j.act_k ? n_in / RKM_QK_K : n_in / RKM_QK8_0, n_s = j.act_k ? n_in / 16 : n_d;
        size_t qs_bytes = RKM_ALIGN_UP((size_t)(m * n_in), 64);
        size_t d_bytes = RKM_ALIGN_UP((size_t)(m * n_d) * sizeof(float), 64);
        size_t s_bytes = RKM_ALIGN_UP((size_t)(m * n_s) * sizeof(int32_t), 64);
        size_t m_bytes = j.act_k ? 0 : d_bytes; /* xm: one float a block of 32 */
        char *buf = scratch_get(SLOT_ACT, qs_bytes + d_bytes + s_bytes + m_bytes);
        j.a.xq = (const int8_t *)buf;
        j.a.xd = (const float *)(buf + qs_bytes);
        j.a.xs = (const int32_t *)(buf + qs_bytes + d_bytes);
        j.a.xm = j.act_k ? NULL : (const float *)(buf + qs_bytes + d_bytes + s_bytes);
        j.x = x;
        scratch_buf *sb = scratch_this();
        if (!(reuse && sb->act_x == x && sb->act_n_in == n_in && sb->act_m == m && sb->act_k == j.act_k)) {
            if (m > 1 && nth > 1) rkm_pool_run(pool, quant_worker, &j);
            else quant_worker(&j, 0, 1);
            sb->act_x = reuse ? x : NULL;
            sb->act_n_in = n_in;
            sb->act_m = m;
            sb->act_k = j.act_k;
            sb->act_xm = 0;
        }
        if ((base == RKM_TYPE_Q4_1 || base == RKM_TYPE_Q5_1) && !sb->act_xm) {
            act_min_sums(x, n_in, m, j.a.xs, (float *)j.a.xm);
            sb->act_xm = 1;
        }
    }
    /* About 8 chunks per thread; whole tiles. */
    int64_t chunk = (n_out + (int64_t)nth * 8 - 1) / ((int64_t)nth * 8);
    if (chunk < 16 && n_out >= 16 * nth) chunk = 16;
    /* prefill kernels may work on 16-row tiles */
    j.grain = m > 1 || j.fn_tail ? 16 : ROW_GRAIN;
    j.chunk = RKM_ALIGN_UP(RKM_MAX(chunk, 1), j.grain);
    atomic_store_explicit(&j.next, 0, memory_order_relaxed);
    if (nth > 1 && n_out > j.chunk) rkm_pool_run(pool, mm_worker, &j);
    else mm_range(&j, 0, n_out);
}

/* --------------------------------------------------------- element ops */
void rkm_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps)
{
    rkm_kernels_active()->rmsnorm(out, x, w, n, eps);
}

void rkm_softmax(float *x, int64_t n) { rkm_kernels_active()->softmax(x, n); }

void rkm_swiglu(float *out, const float *g, const float *u, int64_t n)
{
    rkm_kernels_active()->swiglu(out, g, u, n);
}

void rkm_geglu(float *out, const float *g, const float *u, int64_t n)
{
    rkm_kernels_active()->geglu(out, g, u, n);
}

void rkm_gelu(float *out, const float *x, int64_t n) { rkm_kernels_active()->gelu(out, x, n); }

void rkm_f32_to_f16_row(const float *x, rkm_f16 *y, int64_t n)
{
    rkm_kernels_active()->f32_to_f16(x, y, n);
}

void rkm_f16_to_f32_row(const rkm_f16 *x, float *y, int64_t n)
{
    rkm_kernels_active()->f16_to_f32(x, y, n);
}

float rkm_dot_f32_f16(const float *x, const rkm_f16 *y, int64_t n)
{
    return rkm_kernels_active()->dot_f32_f16(x, y, n);
}

void rkm_axpy_f16(float *y, float a, const rkm_f16 *x, int64_t n)
{
    rkm_kernels_active()->axpy_f16(y, a, x, n);
}

void rkm_delta_step(float *t, const float *q, const float *k, const float *v, float decay, float beta, float qk,
                    int64_t n, float *o, float *d)
{
    rkm_kernels_active()->delta_step(t, q, k, v, decay, beta, qk, n, o, d);
}

void rkm_conv_step(float *win, const float *w, const float *x, int64_t ch, int K, float *out)
{
    rkm_kernels_active()->conv_step(win, w, x, ch, K, out);
}

float rkm_scan_step(float *st, const float *b, const float *c, float da, float xdt, int64_t n)
{
    return rkm_kernels_active()->scan_step(st, b, c, da, xdt, n);
}

void rkm_dot_f32_f16_rows(const float *x, const rkm_f16 *y, int64_t stride, int64_t rows, int64_t n, float *out)
{
    const rkm_kernel_set *k = rkm_kernels_active();
    if (k->dot_f32_f16_rows) k->dot_f32_f16_rows(x, y, stride, rows, n, out);
    else
        for (int64_t r = 0; r < rows; r++) out[r] = k->dot_f32_f16(x, y + r * stride, n);
}

void rkm_axpy_f16_rows(float *y, const float *a, const rkm_f16 *x, int64_t stride, int64_t rows, int64_t n)
{
    const rkm_kernel_set *k = rkm_kernels_active();
    if (k->axpy_f16_rows) k->axpy_f16_rows(y, a, x, stride, rows, n);
    else
        for (int64_t r = 0; r < rows; r++) k->axpy_f16(y, a[r], x + r * stride, n);
}
