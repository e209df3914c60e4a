/*
 * rknn_abi.h - our own declarations of the parts of Rockchip's librknnrt
 * (RKNN runtime >= 2.1, matmul API) that the RKNN backend calls through
 * dlopen/dlsym. Written from the facts in ../shared/rknn/NOTES.md (struct
 * sizes and offsets as measured on LP64 against the v2.3.2 header); the
 * SDK's headers are proprietary and are neither copied nor needed: the
 * build never links librknnrt, and every layout below is pinned by a
 * _Static_assert so a wrong field fails the build, not the board.
 *
 * Only LP64 (aarch64 boards, x86-64 tests against the emulator) is
 * supported: on 32-bit ARM the context handle is 32 bits wide.
 */
#ifndef RKM_BACKEND_RKNN_ABI_H
#define RKM_BACKEND_RKNN_ABI_H

#include <stddef.h>
#include <stdint.h>

#if UINTPTR_MAX != 0xffffffffffffffffu
#error "the RKNN backend declares the LP64 ABI only"
#endif

typedef uint64_t rkn_ctx; /* rknn_context / rknn_matmul_ctx */

#define RKN_NAME_LEN 256
#define RKN_MAX_DIMS 16

/* rknn_matmul_type */
enum {
    RKN_MM_F16_F16_F32 = 1,
    RKN_MM_I8_I8_I32 = 2,
    RKN_MM_I8_I8_I8 = 3,
    RKN_MM_F16_F16_F16 = 4,
    RKN_MM_I4_I4_I16 = 10,
};
/* rknn_matmul_layout */
enum { RKN_LAYOUT_NORM = 0, RKN_LAYOUT_NATIVE = 1, RKN_LAYOUT_TP_NORM = 2 };
/* rknn_tensor_type (attr.type) */
enum { RKN_T_F32 = 0, RKN_T_F16 = 1, RKN_T_I8 = 2, RKN_T_I16 = 4, RKN_T_I32 = 6, RKN_T_I4 = 10 };
/* rknn_core_mask */
enum { RKN_CORE_AUTO = 0, RKN_CORE_0 = 1, RKN_CORE_1 = 2, RKN_CORE_2 = 4 };
/* rknn_mem_sync modes */
enum { RKN_SYNC_TO_DEVICE = 1, RKN_SYNC_FROM_DEVICE = 2 };
/* rknn_query command */
enum { RKN_QUERY_SDK_VERSION = 5 };
/* error codes (RKNN_ERR_*) */
enum { RKN_ERR_FAIL = -1, RKN_ERR_PARAM_INVALID = -5 };

typedef struct rkn_matmul_info {
    int32_t M, K, N;
    int32_t type;           /* rknn_matmul_type */
    int16_t B_layout;       /* rknn_matmul_layout */
    int16_t B_quant_type;
    int16_t AC_layout;
    int16_t AC_quant_type;
    int32_t iommu_domain_id;
    int16_t group_size;
    int8_t reserved[34];
} rkn_matmul_info;

typedef struct rkn_tensor_attr {
    char name[RKN_NAME_LEN]; /* "A", "B" or "C" */
    uint32_t n_dims;
    uint32_t dims[RKN_MAX_DIMS];
    uint32_t size;           /* bytes to allocate */
    int32_t type;            /* rknn_tensor_type */
} rkn_tensor_attr;

typedef struct rkn_io_attr {
    rkn_tensor_attr A, B, C;
} rkn_io_attr;

typedef struct rkn_tensor_mem {
    void *virt_addr;
    uint64_t phys_addr;
    int32_t fd;
    int32_t offset;
    uint32_t size;
    uint32_t flags;
    void *priv_data;
} rkn_tensor_mem;

typedef struct rkn_sdk_version {
    char api_version[256];
    char drv_version[256];
} rkn_sdk_version;

_Static_assert(sizeof(rkn_matmul_info) == 64, "rknn_matmul_info is 64 bytes");
_Static_assert(offsetof(rkn_matmul_info, type) == 12, "info.type at 12");
_Static_assert(offsetof(rkn_matmul_info, B_layout) == 16, "info.B_layout at 16");
_Static_assert(offsetof(rkn_matmul_info, B_quant_type) == 18, "info.B_quant_type at 18");
_Static_assert(offsetof(rkn_matmul_info, AC_layout) == 20, "info.AC_layout at 20");
_Static_assert(offsetof(rkn_matmul_info, AC_quant_type) == 22, "info.AC_quant_type at 22");
_Static_assert(offsetof(rkn_matmul_info, iommu_domain_id) == 24, "info.iommu_domain_id at 24");
_Static_assert(offsetof(rkn_matmul_info, group_size) == 28, "info.group_size at 28");
_Static_assert(offsetof(rkn_matmul_info, reserved) == 30, "info.reserved at 30");
_Static_assert(sizeof(rkn_tensor_attr) == 332, "rknn_matmul_tensor_attr is 332 bytes");
_Static_assert(offsetof(rkn_tensor_attr, n_dims) == 256, "attr.n_dims at 256");
_Static_assert(offsetof(rkn_tensor_attr, dims) == 260, "attr.dims at 260");
_Static_assert(offsetof(rkn_tensor_attr, size) == 324, "attr.size at 324");
_Static_assert(offsetof(rkn_tensor_attr, type) == 328, "attr.type at 328");
_Static_assert(sizeof(rkn_io_attr) == 996, "rknn_matmul_io_attr is 996 bytes");
_Static_assert(offsetof(rkn_io_attr, B) == 332 && offsetof(rkn_io_attr, C) == 664, "io_attr A/B/C");
_Static_assert(sizeof(rkn_tensor_mem) == 40, "rknn_tensor_mem is 40 bytes");
_Static_assert(offsetof(rkn_tensor_mem, phys_addr) == 8, "mem.phys_addr at 8");
_Static_assert(offsetof(rkn_tensor_mem, fd) == 16, "mem.fd at 16");
_Static_assert(offsetof(rkn_tensor_mem, offset) == 20, "mem.offset at 20");
_Static_assert(offsetof(rkn_tensor_mem, size) == 24, "mem.size at 24");
_Static_assert(offsetof(rkn_tensor_mem, flags) == 28, "mem.flags at 28");
_Static_assert(offsetof(rkn_tensor_mem, priv_data) == 32, "mem.priv_data at 32");
_Static_assert(sizeof(rkn_sdk_version) == 512, "rknn_sdk_version is two char[256]");

/* The entry points, as function-pointer types for dlsym. */
typedef int (*rkn_matmul_create_fn)(rkn_ctx *ctx, rkn_matmul_info *info, rkn_io_attr *io);
typedef int (*rkn_matmul_set_io_mem_fn)(rkn_ctx ctx, rkn_tensor_mem *mem, rkn_tensor_attr *attr);
typedef int (*rkn_matmul_set_core_mask_fn)(rkn_ctx ctx, int32_t mask);
typedef int (*rkn_matmul_run_fn)(rkn_ctx ctx);
typedef int (*rkn_matmul_destroy_fn)(rkn_ctx ctx);
typedef rkn_tensor_mem *(*rkn_create_mem_fn)(rkn_ctx ctx, uint32_t size);
typedef int (*rkn_destroy_mem_fn)(rkn_ctx ctx, rkn_tensor_mem *mem);
typedef int (*rkn_mem_sync_fn)(rkn_ctx ctx, rkn_tensor_mem *mem, int32_t mode);
typedef int (*rkn_query_fn)(rkn_ctx ctx, int32_t cmd, void *info, uint32_t size);
typedef rkn_tensor_mem *(*rkn_create_mem_from_fd_fn)(rkn_ctx ctx, int32_t fd, void *virt, uint32_t size,
                                                     int32_t offset);

#endif
