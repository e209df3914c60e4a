/*
 * rknn.h - the RKNN NPU engine: loads Rockchip's librknnrt.so at run time
 * (dlopen; $RKM_RKNN_LIB or the system's librknnrt.so), detects the chip,
 * and runs int8 matmuls on the NPU's matmul API with weights in the
 * rknn_i8 layout (rknn_i8.h). docs/NPU.md describes the design.
 *
 * Threads: an engine is driven by one thread at a time (the model's lock
 * serialises forward passes); it owns one worker thread per extra NPU core,
 * which runs that core's contexts while the caller runs core 0's.
 */
#ifndef RKM_BACKEND_RKNN_H
#define RKM_BACKEND_RKNN_H

#include <stddef.h>
#include <stdint.h>

enum { RKM_CHIP_UNKNOWN = 0, RKM_CHIP_RK3588 = 1, RKM_CHIP_RK3576 = 2, RKM_CHIP_RK3562 = 3 };

/* "rk3588", ... or "unknown". */
const char *rkm_rknn_chip_name(int chip);
/* The chip: $RKM_RKNN_CHIP (rk3588|rk3576|rk3562) or the device tree's
 * compatible strings under $RKM_SYSROOT (default /). src (may be NULL)
 * receives where the answer came from. */
int rkm_rknn_detect_chip(char *src, size_t cap);
/* Reads a small text file under $RKM_SYSROOT into buf (NUL-terminated,
 * trailing newlines removed); 0, or -1 when absent/unreadable. */
int rkm_rknn_sysfile(const char *path, char *buf, size_t cap);

/* NPU cores and the largest K of one context, per chip. */
int rkm_rknn_chip_cores(int chip);
int rkm_rknn_chip_kseg(int chip);

/* Shape rules of rknn_matmul_create (NOTES: alignment and limits) for
 * matmul type mm_type (1, 2, 4 fp16/int8; 10 int4) on chip: 0, or
 * RKM_EINVAL with a message naming the rule. The engine calls it before
 * every create: an unaligned shape can kill the process in the runtime. */
int rkm_rknn_check_shape(int chip, int mm_type, int64_t M, int64_t K, int64_t N);

typedef struct rkm_rknn rkm_rknn;

typedef struct rkm_rknn_info {
    char lib[512];          /* what was loaded */
    char api_version[256];  /* rknn_query(SDK_VERSION), or "unknown" */
    char drv_version[256];
    int chip;
    char chip_src[256];
    int n_cores;            /* contexts a matmul's N is split over */
    int k_seg;              /* K per context; longer K is split, partial sums added */
} rkm_rknn_info;

/* Loads the library and probes it with a small int8 context. NULL with
 * the reason in rkm_last_error() (missing library or symbol, old runtime,
 * unknown chip, the chip refusing int8). */
rkm_rknn *rkm_rknn_open(void);
void rkm_rknn_close(rkm_rknn *r);
const rkm_rknn_info *rkm_rknn_get_info(const rkm_rknn *r);

/* C[M][N] = A[M][K] . B, integers: A int8 row-major, B the K*N native
 * bytes of an rknn_i8 matrix (its int8 part). c is M*N int64 (sums of the
 * K segments' int32 results). K, N multiples of 32. */
int rkm_rknn_matmul_i8_raw(rkm_rknn *r, const int8_t *a, int64_t M, int64_t K, int64_t N, const void *b_native,
                           int64_t *c);
/* Y[m][N] (stride ldy) = X . W^T with W an rknn_i8 matrix: activations
 * quantized per row on the CPU, int32 products on the NPU, scales applied
 * on the CPU (bit-identical to rkm_rknn_i8_matmul_cpu). */
int rkm_rknn_matmul_i8(rkm_rknn *r, const void *w, int64_t K, int64_t N, const float *x, int64_t m, float *y,
                       int64_t ldy);

/* Counters since open: matmul_run calls, contexts alive. */
void rkm_rknn_counters(const rkm_rknn *r, uint64_t *runs, int *contexts);
/* B bindings since open: in place (a view of an NPU-allocated expert
 * slot, no copy) and copied (memcpy of the slice into a B buffer). */
void rkm_rknn_bind_counts(const rkm_rknn *r, uint64_t *in_place, uint64_t *copied);

/* Expert-cache slots in NPU memory (the cache's slot hooks): the O_DIRECT
 * read lands in an rknn_create_mem buffer, slot_filled syncs it to the
 * device once per read (any thread), and a matmul whose weights lie in a
 * slot binds a view of it (rknn_create_mem_from_fd) as B instead of
 * copying. Up to $RKM_RKNN_SLOT_BYTES (default 2 GiB, one IOMMU domain's
 * safe share, NOTES pitfall 7) of slots; beyond, or when the runtime
 * lacks views, ordinary aligned memory (the copy path). alloc returns
 * NULL only when out of memory. */
void *rkm_rknn_slot_alloc(rkm_rknn *r, size_t bytes);
void rkm_rknn_slot_free(rkm_rknn *r, void *buf);
void rkm_rknn_slot_filled(rkm_rknn *r, void *buf, size_t bytes);

#endif
