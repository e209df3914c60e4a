/*
 * emu_compute.c - the emulated chips, tensor layouts and the CPU matmul of
 * the emulated librknnrt.so (see README.md for which NOTES facts each rule
 * comes from). Pure functions on caller-owned buffers: no global state
 * besides the const chip table, safe from any thread. The API file
 * (librknnrt_emu.c) owns every buffer passed in here.
 */
#include "emu_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T(x) (1u << (x))

/* Type support: RK3588 from NOTES' independent probes (only the symmetric
 * types create; 9 is said to create but abort/give zeros, the contract
 * makes it -5). RK3576: every type (RKLLM offers w4a16 there; unverified).
 * RK3562: int8 and fp16 only (header mention; unverified). */
static const emu_chip chips[] = {
    {"rk3588", 3, 1, 8192, T(1) | T(2) | T(3) | T(4) | T(10), 1, 0},
    {"rk3576", 2, 1, 4096,
     T(1) | T(2) | T(3) | T(4) | T(5) | T(6) | T(7) | T(8) | T(9) | T(10) | T(11) | T(12) | T(15),
     0, 0},
    {"rk3562", 1, 0, 4096, T(1) | T(2) | T(3) | T(4), 0, 1},
};

const emu_chip *emu_chip_current(void)
{
    const char *e = getenv("RKNN_EMU_CHIP");
    if (!e || !*e) return &chips[0];
    for (size_t i = 0; i < sizeof chips / sizeof chips[0]; i++)
        if (!strcmp(e, chips[i].name)) return &chips[i];
    return NULL;
}

void emu_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("E RKNN-EMU: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int emu_mm_types(int mm_type, int *ta, int *tb, int *tc)
{
    static const int tab[16][3] = {
        [1] = {EMU_T_F16, EMU_T_F16, EMU_T_F32}, [2] = {EMU_T_I8, EMU_T_I8, EMU_T_I32},
        [3] = {EMU_T_I8, EMU_T_I8, EMU_T_I8},    [4] = {EMU_T_F16, EMU_T_F16, EMU_T_F16},
        [5] = {EMU_T_F16, EMU_T_I8, EMU_T_F32},  [6] = {EMU_T_F16, EMU_T_I8, EMU_T_F16},
        [7] = {EMU_T_F16, EMU_T_I4, EMU_T_F32},  [8] = {EMU_T_F16, EMU_T_I4, EMU_T_F16},
        [9] = {EMU_T_I8, EMU_T_I8, EMU_T_F32},   [10] = {EMU_T_I4, EMU_T_I4, EMU_T_I16},
        [11] = {EMU_T_I8, EMU_T_I4, EMU_T_I32},  [12] = {EMU_T_F16, EMU_T_I4, EMU_T_BF16},
        [15] = {EMU_T_I8, EMU_T_I4, EMU_T_F16},
    };
    if (mm_type < 1 || mm_type > 15 || tab[mm_type][1] == 0) return 0;
    *ta = tab[mm_type][0];
    *tb = tab[mm_type][1];
    *tc = tab[mm_type][2];
    return 1;
}

int emu_type_bits(int t)
{
    switch (t) {
    case EMU_T_I4: return 4;
    case EMU_T_I8: case EMU_T_U8: case EMU_T_BOOL: return 8;
    case EMU_T_F16: case EMU_T_BF16: case EMU_T_I16: case EMU_T_U16: return 16;
    case EMU_T_I64: return 64;
    default: return 32;
    }
}

/* Sub-sizes (NOTES "Layouts"): A subK 32/16/8 for int4/int8/fp16; B subK 32,
 * subN 64/32/16 (RK3562: 16 int8, 8 fp16); C subN 4 for 32-bit outputs, 8
 * for int16. C subN for int8/fp16/bf16 outputs is not documented: the
 * emulator uses 16-byte cells (16 int8, 8 fp16/bf16), like the known ones. */
int emu_a_subk(const emu_chip *c, int ta)
{
    (void)c;
    return ta == EMU_T_I4 ? 32 : ta == EMU_T_I8 ? 16 : 8;
}

int emu_b_subn(const emu_chip *c, int tb)
{
    if (c->rk3562_subs) return tb == EMU_T_F16 ? 8 : 16;
    return tb == EMU_T_I4 ? 64 : tb == EMU_T_I8 ? 32 : 16;
}

int emu_b_subk(const emu_chip *c, int tb)
{
    (void)c;
    (void)tb;
    return 32;
}

int emu_c_subn(const emu_chip *c, int tc)
{
    (void)c;
    return 128 / emu_type_bits(tc);
}

/* ---- IEEE half and bfloat16, round to nearest even (own code: the
 * emulator must not share the engine's conversions). */
static float f16_to_f32(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t s = (uint16_t)((x >> 16) & 0x8000);
    float a = fabsf(f);
    if (isnan(f)) return s | 0x7e00;
    if (a >= 65520.0f) return s | 0x7c00; /* rounds to inf */
    if (a < ldexpf(1.0f, -14)) {          /* subnormal: units of 2^-24 */
        float q = nearbyintf(a * 16777216.0f); /* default mode: ties to even */
        return s | (uint16_t)q;
    }
    int e;
    float fr = frexpf(a, &e);             /* a = fr * 2^e, fr in [0.5,1) */
    float mant = nearbyintf(ldexpf(fr, 11)); /* 1024..2048 */
    if (mant >= 2048.0f) { mant /= 2; e++; }
    int he = e - 1 + 15;
    return s | (uint16_t)(he << 10) | (uint16_t)((int)mant - 1024);
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (isnan(f)) return (uint16_t)((x >> 16) | 0x40);
    uint32_t r = 0x7fff + ((x >> 16) & 1);
    return (uint16_t)((x + r) >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static double sat(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

double emu_load(const uint8_t *p, int t, size_t i)
{
    switch (t) {
    case EMU_T_I4: {
        int v = (p[i / 2] >> ((i & 1) * 4)) & 15;
        return v >= 8 ? v - 16 : v;
    }
    case EMU_T_I8: return (int8_t)p[i];
    case EMU_T_U8: return p[i];
    case EMU_T_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case EMU_T_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return f16_to_f32(v); }
    case EMU_T_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bf16_to_f32(v); }
    case EMU_T_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case EMU_T_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    default: return 0;
    }
}

void emu_store(uint8_t *p, int t, size_t i, double v)
{
    switch (t) {
    case EMU_T_I4: {
        int q = (int)sat(nearbyint(v), -8, 7) & 15, sh = (int)(i & 1) * 4;
        p[i / 2] = (uint8_t)((p[i / 2] & ~(15 << sh)) | (q << sh));
        break;
    }
    case EMU_T_I8: p[i] = (uint8_t)(int8_t)sat(nearbyint(v), -128, 127); break;
    case EMU_T_I16: { int16_t q = (int16_t)sat(nearbyint(v), -32768, 32767); memcpy(p + 2 * i, &q, 2); break; }
    case EMU_T_F16: { uint16_t q = f32_to_f16((float)v); memcpy(p + 2 * i, &q, 2); break; }
    case EMU_T_BF16: { uint16_t q = f32_to_bf16((float)v); memcpy(p + 2 * i, &q, 2); break; }
    case EMU_T_I32: {
        int32_t q = (int32_t)sat(nearbyint(v), -2147483648.0, 2147483647.0);
        memcpy(p + 4 * i, &q, 4);
        break;
    }
    case EMU_T_F32: { float q = (float)v; memcpy(p + 4 * i, &q, 4); break; }
    default: break;
    }
}

/* ---- layouts (NOTES "Layouts"). Normal: row-major. Native A: (K/subK, M,
 * subK). Native B: (N/subN, K/subK, subN, subK), and when K exceeds the
 * chip's segment size the runtime splits B into ceil(K/seg) segments: the
 * emulator lays them out one after the other, each native over its own K
 * range (the order inside is a reading of NOTES, unverified on a board).
 * Native C: (N/subN, M, subN). */
size_t emu_a_index(const emu_chip *c, int ta, int layout, int M, int K, int m, int k)
{
    if (layout != EMU_LAYOUT_NATIVE) return (size_t)m * K + k;
    size_t sk = (size_t)emu_a_subk(c, ta);
    return ((k / sk) * M + m) * sk + k % sk;
}

size_t emu_b_index(const emu_chip *c, int tb, int layout, int K, int N, int k, int n)
{
    if (layout == EMU_LAYOUT_NORM) return (size_t)k * N + n;
    if (layout == EMU_LAYOUT_TP_NORM) return (size_t)n * K + k;
    size_t sn = (size_t)emu_b_subn(c, tb), sk = (size_t)emu_b_subk(c, tb);
    size_t seg = (size_t)c->k_seg, k0 = (size_t)k / seg * seg;
    size_t ks = (size_t)K - k0 < seg ? (size_t)K - k0 : seg, kk = (size_t)k - k0;
    return k0 * (size_t)N + ((n / sn) * (ks / sk) + kk / sk) * sn * sk + (n % sn) * sk + kk % sk;
}

size_t emu_c_index(const emu_chip *c, int tc, int layout, int M, int N, int m, int n)
{
    if (layout != EMU_LAYOUT_NATIVE) return (size_t)m * N + n;
    size_t sn = (size_t)emu_c_subn(c, tc);
    return ((n / sn) * M + m) * sn + n % sn;
}

static void set_attr(emu_tensor_attr *a, const char *name, int type, uint32_t n, const uint32_t *d,
                     uint32_t size)
{
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->n_dims = n;
    memcpy(a->dims, d, n * sizeof *d);
    a->size = size;
    a->type = type;
}

int emu_fill_io_attr(const emu_chip *c, const emu_matmul_info *info, int M, int K, int N,
                     emu_io_attr *io)
{
    int ta, tb, tc;
    if (!emu_mm_types(info->type, &ta, &tb, &tc)) return EMU_ERR_PARAM_INVALID;
    uint64_t sa = (uint64_t)M * K * emu_type_bits(ta) / 8, sb = (uint64_t)K * N * emu_type_bits(tb) / 8,
             sc = (uint64_t)M * N * emu_type_bits(tc) / 8;
    if (sa > UINT32_MAX || sb > UINT32_MAX || sc > UINT32_MAX) return EMU_ERR_PARAM_INVALID;
    uint32_t d[4];
    memset(io, 0, sizeof *io);
    if (info->AC_layout == EMU_LAYOUT_NATIVE) {
        uint32_t sk = (uint32_t)emu_a_subk(c, ta);
        d[0] = (uint32_t)K / sk, d[1] = (uint32_t)M, d[2] = sk;
        set_attr(&io->A, "A", ta, 3, d, (uint32_t)sa);
        uint32_t sn = (uint32_t)emu_c_subn(c, tc);
        d[0] = (uint32_t)N / sn, d[1] = (uint32_t)M, d[2] = sn;
        set_attr(&io->C, "C", tc, 3, d, (uint32_t)sc);
    } else {
        d[0] = (uint32_t)M, d[1] = (uint32_t)K;
        set_attr(&io->A, "A", ta, 2, d, (uint32_t)sa);
        d[0] = (uint32_t)M, d[1] = (uint32_t)N;
        set_attr(&io->C, "C", tc, 2, d, (uint32_t)sc);
    }
    if (info->B_layout == EMU_LAYOUT_NATIVE) {
        uint32_t sn = (uint32_t)emu_b_subn(c, tb), sk = (uint32_t)emu_b_subk(c, tb);
        d[0] = (uint32_t)N / sn, d[1] = (uint32_t)K / sk, d[2] = sn, d[3] = sk;
        set_attr(&io->B, "B", tb, 4, d, (uint32_t)sb);
    } else if (info->B_layout == EMU_LAYOUT_TP_NORM) {
        d[0] = (uint32_t)N, d[1] = (uint32_t)K;
        set_attr(&io->B, "B", tb, 2, d, (uint32_t)sb);
    } else {
        d[0] = (uint32_t)K, d[1] = (uint32_t)N;
        set_attr(&io->B, "B", tb, 2, d, (uint32_t)sb);
    }
    return 0;
}

void emu_decode_b(const emu_chip *c, int tb, int layout, int K, int N, const uint8_t *src,
                  float *out)
{
    if (layout != EMU_LAYOUT_NATIVE) {
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++)
                out[(size_t)n * K + k] = (float)emu_load(src, tb, emu_b_index(c, tb, layout, K, N, k, n));
        return;
    }
    /* native: walk the buffer in storage order (same order as
     * emu_b_index, without its divisions: this runs on every NATIVE run) */
    const int sn = emu_b_subn(c, tb), sk = emu_b_subk(c, tb);
    size_t o = 0;
    for (int k0 = 0; k0 < K; k0 += c->k_seg) {
        int ks = K - k0 < c->k_seg ? K - k0 : c->k_seg;
        for (int nt = 0; nt < N / sn; nt++)
            for (int kt = 0; kt < ks / sk; kt++)
                for (int ni = 0; ni < sn; ni++) {
                    float *d = out + (size_t)(nt * sn + ni) * K + k0 + kt * sk;
                    if (tb == EMU_T_I8)
                        for (int ki = 0; ki < sk; ki++) d[ki] = (float)(int8_t)src[o + ki];
                    else if (tb == EMU_T_I4)
                        for (int ki = 0; ki < sk; ki++) {
                            int v = (src[(o + ki) / 2] >> (((o + ki) & 1) * 4)) & 15;
                            d[ki] = (float)(v >= 8 ? v - 16 : v);
                        }
                    else
                        for (int ki = 0; ki < sk; ki++) d[ki] = (float)emu_load(src, tb, o + ki);
                    o += (size_t)sk;
                }
    }
}

/* scale/zp of element (n, k) of a matrix; per channel indexes n, per group
 * n * (K / g) + k / g (groups along K inside one output channel: the
 * order is an unverified reading). */
static double q_scale(const emu_qparam *q, int n, int k, int K)
{
    if (!q || q->kind == EMU_Q_NONE) return 1.0;
    if (q->kind == EMU_Q_LAYER) return q->scale[0];
    if (q->kind == EMU_Q_CHANNEL) return q->scale[n];
    return q->scale[(size_t)n * (K / q->group) + k / q->group];
}

static double q_zp(const emu_qparam *q, int n, int k, int K)
{
    if (!q || q->kind == EMU_Q_NONE || q->n_zp == 0) return 0.0;
    if (q->n_zp == 1) return q->zp[0];
    if (q->kind == EMU_Q_CHANNEL) return q->zp[n];
    return q->zp[(size_t)n * (K / q->group) + k / q->group];
}

int emu_compute(const emu_run_desc *d, const uint8_t *a, const float *bt, uint8_t *cbuf)
{
    int ta, tb, tc;
    if (!emu_mm_types(d->mm_type, &ta, &tb, &tc)) return EMU_ERR_PARAM_INVALID;
    const int M = d->M, K = d->K, N = d->N, t = d->mm_type;
    /* int8/int4 activations: exact integer sums, unless B has per-group
     * scales (they vary along K, so the products are scaled in double) */
    const int int_acc = ta != EMU_T_F16;
    const int grouped = d->qb && d->qb->kind == EMU_Q_GROUP;
    const int exact = int_acc && !grouped;
    /* fp16 x int (w8a16/w4a16): B is dequantised, (q - zp) * scale */
    const int hybrid = ta == EMU_T_F16 && tb != EMU_T_F16;
    size_t na = (size_t)M * K, nb = (size_t)N * K;
    float *af = exact ? NULL : malloc(na * sizeof *af), *bf = exact ? NULL : malloc(nb * sizeof *bf);
    int32_t *ai = exact ? malloc(na * sizeof *ai) : NULL, *bi = exact ? malloc(nb * sizeof *bi) : NULL;
    if (exact ? (!ai || !bi) : (!af || !bf)) {
        free(af), free(bf), free(ai), free(bi);
        return EMU_ERR_MALLOC_FAIL;
    }
    /* A: (q - zp) for int A; A's scale only enters the requantisation */
    double za = int_acc ? q_zp(d->qa, 0, 0, K) : 0.0;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            double v = emu_load(a, ta, emu_a_index(d->chip, ta, d->ac_layout, M, K, m, k)) - za;
            if (exact) ai[(size_t)m * K + k] = (int32_t)v;
            else af[(size_t)m * K + k] = (float)v;
        }
    const int zb = tb != EMU_T_F16 && d->qb && d->qb->n_zp > 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)n * K + k;
            double v = bt[i];
            if (zb) v -= q_zp(d->qb, n, k, K);
            if (hybrid) v *= q_scale(d->qb, n, k, K);
            if (exact) bi[i] = (int32_t)v;
            else bf[i] = (float)v;
        }
    /* products of raw int8/int4 values (no zero points) are <= 2^14 */
    const int small = exact && za == 0 && !zb && K <= 65536;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double out;
            if (exact) {
                const int32_t *ar = ai + (size_t)m * K, *br = bi + (size_t)n * K;
                int64_t acc = 0;
                if (small) { /* |q| <= 128: int32 sums cannot overflow (vectorises) */
                    int32_t acc32 = 0;
                    for (int k = 0; k < K; k++) acc32 += ar[k] * br[k];
                    acc = acc32;
                } else
                    for (int k = 0; k < K; k++) acc += (int64_t)ar[k] * br[k];
                switch (t) {
                case EMU_MM_I8_I8_I8: {
                    double s = q_scale(d->qa, 0, 0, K) * q_scale(d->qb, n, 0, K) /
                               q_scale(d->qc, n, 0, K);
                    out = nearbyint((double)acc * s) + q_zp(d->qc, n, 0, K);
                    break;
                }
                case EMU_MM_I8_I8_F32:
                case EMU_MM_I8_I4_F16:
                    out = (double)acc * q_scale(d->qa, 0, 0, K) * q_scale(d->qb, n, 0, K);
                    break;
                default: out = (double)acc; /* raw int32/int16 (stored saturating) */
                }
            } else if (int_acc) {
                const float *ar = af + (size_t)m * K, *br = bf + (size_t)n * K;
                double acc = 0;
                for (int k = 0; k < K; k++) acc += (double)ar[k] * br[k] * q_scale(d->qb, n, k, K);
                out = acc * q_scale(d->qa, 0, 0, K);
            } else {
                /* fp16 x fp16 (or dequantised B), accumulated in f32 */
                const float *ar = af + (size_t)m * K, *br = bf + (size_t)n * K;
                float acc = 0;
                for (int k = 0; k < K; k++) acc += ar[k] * br[k];
                out = acc;
            }
            emu_store(cbuf, tc, emu_c_index(d->chip, tc, d->ac_layout, M, N, m, n), out);
        }
    free(af), free(bf), free(ai), free(bi);
    return 0;
}
