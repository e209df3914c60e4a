/*
 * emu_internal.h - what the emulator's two files share: the emulated chips
 * (per-SoC type support, native sub-sizes, K segments, cores), the tensor
 * layouts and the CPU matmul, all in emu_compute.c. Nothing here is
 * exported from librknnrt.so (built with -fvisibility=hidden).
 */
#ifndef RKNN_EMU_INTERNAL_H
#define RKNN_EMU_INTERNAL_H

#include "emu_abi.h"

#define EMU_API __attribute__((visibility("default")))

/* One emulated SoC, chosen by RKNN_EMU_CHIP when a context is created. */
typedef struct {
    const char *name;   /* "rk3588", "rk3576", "rk3562" */
    int n_cores;        /* NPU cores a core mask can name */
    int has_core_mask;  /* rknn_matmul_set_core_mask supported */
    int k_seg;          /* native B is split into K segments of this many */
    uint32_t types;     /* bit t set: matmul type t creates */
    int i4_native_b;    /* INT4 x INT4 requires B_layout = NATIVE */
    int rk3562_subs;    /* RK3562 native B sub-sizes (N/16 int8, N/8 fp16) */
} emu_chip;

/* The chip named by $RKNN_EMU_CHIP (default rk3588), or NULL if unknown. */
const emu_chip *emu_chip_current(void);

/* The three tensor types of a matmul type; 0 if the type is unknown. */
int emu_mm_types(int mm_type, int *ta, int *tb, int *tc);
/* Bits per element of a tensor type (4 for INT4). */
int emu_type_bits(int t);
/* Native sub-sizes: A's subK, B's subN and subK, C's subN. */
int emu_a_subk(const emu_chip *c, int ta);
int emu_b_subn(const emu_chip *c, int tb);
int emu_b_subk(const emu_chip *c, int tb);
int emu_c_subn(const emu_chip *c, int tc);

/* Element access in a packed buffer: i is the linear element index; INT4
 * packs two per byte, even index in the low nibble. Values are exact as
 * double for every type; store rounds/saturates to the type. */
double emu_load(const uint8_t *p, int t, size_t i);
void emu_store(uint8_t *p, int t, size_t i, double v);

/* Linear element index of A[m][k], B[k][n], C[m][n] in each layout. */
size_t emu_a_index(const emu_chip *c, int ta, int layout, int M, int K, int m, int k);
size_t emu_b_index(const emu_chip *c, int tb, int layout, int K, int N, int k, int n);
size_t emu_c_index(const emu_chip *c, int tc, int layout, int M, int N, int m, int n);

/* Fills one io_attr (A, B, C) for a shape. Returns 0 or -5 if a size does
 * not fit the 32-bit size field. */
int emu_fill_io_attr(const emu_chip *c, const emu_matmul_info *info, int M, int K, int N,
                     emu_io_attr *io);

/* Dequantisation parameters of one matrix: value = (q - zp) * scale. */
enum { EMU_Q_NONE, EMU_Q_LAYER, EMU_Q_CHANNEL, EMU_Q_GROUP };
typedef struct {
    int kind;      /* EMU_Q_*: scale count 1, N or N*K/group */
    int group;     /* group size along K (EMU_Q_GROUP) */
    int n_scale;
    float *scale;
    int n_zp;      /* 0 (zero), 1, or n_scale */
    int32_t *zp;
} emu_qparam;

/* The whole computation of one run: decodes A (from its device bytes) and
 * B (decoded N x K floats, see emu_decode_b), computes, encodes C. */
typedef struct {
    const emu_chip *chip;
    int mm_type, ac_layout;
    int M, K, N;
    const emu_qparam *qa, *qb, *qc;
} emu_run_desc;

/* B as N x K floats (raw quantised values, no scale) from a buffer in the
 * given layout; out has N*K floats. */
void emu_decode_b(const emu_chip *c, int tb, int layout, int K, int N, const uint8_t *src,
                  float *out);
/* Returns 0, or a negative error (-4 out of memory). */
int emu_compute(const emu_run_desc *d, const uint8_t *a, const float *bt, uint8_t *cbuf);

/* Prints "E RKNN-EMU: ..." to stderr. */
void emu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
