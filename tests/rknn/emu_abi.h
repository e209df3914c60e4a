/*
 * emu_abi.h - the emulator's own declarations of the librknnrt matmul ABI
 * (SDK v2.1 .. v2.3.2, LP64), written from ../shared/rknn/NOTES.md only.
 * The backend (src/backend/rknn_abi.h) declares the same ABI separately on
 * purpose: the two readings are checked against each other by the tests.
 * Every layout below is pinned with _Static_assert to the offsets NOTES
 * gives, so a mistake here fails the build instead of a test.
 */
#ifndef RKNN_EMU_ABI_H
#define RKNN_EMU_ABI_H

#include <stddef.h>
#include <stdint.h>

/* Handles: a matmul context is an rknn_context, uint64_t on LP64. */
typedef uint64_t emu_ctx_t;

/* Error codes (NOTES section 3). */
enum {
    EMU_SUCC = 0,
    EMU_ERR_FAIL = -1,
    EMU_ERR_TIMEOUT = -2,
    EMU_ERR_DEVICE_UNAVAILABLE = -3,
    EMU_ERR_MALLOC_FAIL = -4,
    EMU_ERR_PARAM_INVALID = -5,
    EMU_ERR_MODEL_INVALID = -6,
    EMU_ERR_CTX_INVALID = -7,
    EMU_ERR_INPUT_INVALID = -8,
    EMU_ERR_OUTPUT_INVALID = -9,
};

/* rknn_matmul_type values. */
enum {
    EMU_MM_F16_F16_F32 = 1,
    EMU_MM_I8_I8_I32 = 2,
    EMU_MM_I8_I8_I8 = 3,
    EMU_MM_F16_F16_F16 = 4,
    EMU_MM_F16_I8_F32 = 5,
    EMU_MM_F16_I8_F16 = 6,
    EMU_MM_F16_I4_F32 = 7,
    EMU_MM_F16_I4_F16 = 8,
    EMU_MM_I8_I8_F32 = 9,
    EMU_MM_I4_I4_I16 = 10,
    EMU_MM_I8_I4_I32 = 11,
    EMU_MM_F16_I4_BF16 = 12,
    EMU_MM_I8_I4_F16 = 15,
};

/* rknn_tensor_type values (the io_attr type field). */
enum {
    EMU_T_F32 = 0,
    EMU_T_F16 = 1,
    EMU_T_I8 = 2,
    EMU_T_U8 = 3,
    EMU_T_I16 = 4,
    EMU_T_U16 = 5,
    EMU_T_I32 = 6,
    EMU_T_U32 = 7,
    EMU_T_I64 = 8,
    EMU_T_BOOL = 9,
    EMU_T_I4 = 10,
    EMU_T_BF16 = 11,
};

/* rknn_matmul_layout. TP_NORM (B given as N x K) is valid for B only. */
enum { EMU_LAYOUT_NORM = 0, EMU_LAYOUT_NATIVE = 1, EMU_LAYOUT_TP_NORM = 2 };

/* rknn_matmul_quant_type. */
enum {
    EMU_QUANT_PER_LAYER_SYM = 0,
    EMU_QUANT_PER_LAYER_ASYM = 1,
    EMU_QUANT_PER_CHANNEL_SYM = 2,
    EMU_QUANT_PER_CHANNEL_ASYM = 3,
    EMU_QUANT_PER_GROUP_SYM = 4,
    EMU_QUANT_PER_GROUP_ASYM = 5,
};

/* rknn_core_mask. */
enum {
    EMU_CORE_AUTO = 0,
    EMU_CORE_0 = 1,
    EMU_CORE_1 = 2,
    EMU_CORE_2 = 4,
    EMU_CORE_0_1 = 3,
    EMU_CORE_0_1_2 = 7,
    EMU_CORE_ALL = 0xffff,
    EMU_CORE_UNDEFINED = 0x10000,
};

/* rknn_mem_sync modes, rknn_create_mem2 flags, rknn_tensor_mem flags. */
enum { EMU_SYNC_TO_DEVICE = 1, EMU_SYNC_FROM_DEVICE = 2, EMU_SYNC_BIDIRECTIONAL = 3 };
#define EMU_MEM2_DEFAULT 0ull
#define EMU_MEM2_CACHEABLE 1ull
#define EMU_MEM2_NON_CACHEABLE 2ull
#define EMU_MEM2_TRY_SRAM 4ull
#define EMU_MEM2_NO_CONTEXT 0x20000ull
enum { EMU_MEMF_ALLOC_INSIDE = 1, EMU_MEMF_FROM_FD = 2, EMU_MEMF_FROM_PHYS = 3 };

/* rknn_query commands the emulator answers. */
enum { EMU_QUERY_SDK_VERSION = 5 };

#define EMU_MAX_NAME 256
#define EMU_MAX_DIMS 16

/* rknn_matmul_info: 64 bytes, align 4. */
typedef struct {
    int32_t M, K, N;
    int32_t type;            /* rknn_matmul_type */
    int16_t B_layout;        /* rknn_matmul_layout */
    int16_t B_quant_type;    /* rknn_matmul_quant_type */
    int16_t AC_layout;       /* NORM or NATIVE */
    int16_t AC_quant_type;
    int32_t iommu_domain_id;
    int16_t group_size;      /* per-group quant (v2.1+) */
    int8_t reserved[34];
} emu_matmul_info;

/* rknn_matmul_tensor_attr: 332 bytes. */
typedef struct {
    char name[EMU_MAX_NAME]; /* "A", "B" or "C" */
    uint32_t n_dims;
    uint32_t dims[EMU_MAX_DIMS];
    uint32_t size;           /* bytes to allocate */
    int32_t type;            /* rknn_tensor_type */
} emu_tensor_attr;

/* rknn_matmul_io_attr: 996 bytes. */
typedef struct {
    emu_tensor_attr A, B, C;
} emu_io_attr;

/* rknn_matmul_shape: 12 bytes. */
typedef struct {
    int32_t M, K, N;
} emu_shape;

/* rknn_quant_params: 288 bytes, align 8. */
typedef struct {
    char name[EMU_MAX_NAME];
    float *scale;
    int32_t scale_len;
    int32_t *zp;
    int32_t zp_len;
} emu_quant_params;

/* rknn_tensor_mem: 40 bytes. */
typedef struct {
    void *virt_addr;
    uint64_t phys_addr;
    int32_t fd;
    int32_t offset;
    uint32_t size;
    uint32_t flags;
    void *priv_data;
} emu_tensor_mem;

/* rknn_sdk_version: two strings. */
typedef struct {
    char api_version[256];
    char drv_version[256];
} emu_sdk_version;

_Static_assert(sizeof(emu_ctx_t) == 8, "rknn_context is 64-bit on LP64");
_Static_assert(sizeof(emu_matmul_info) == 64, "rknn_matmul_info size");
_Static_assert(_Alignof(emu_matmul_info) == 4, "rknn_matmul_info align");
_Static_assert(offsetof(emu_matmul_info, type) == 12, "info.type");
_Static_assert(offsetof(emu_matmul_info, B_layout) == 16, "info.B_layout");
_Static_assert(offsetof(emu_matmul_info, B_quant_type) == 18, "info.B_quant_type");
_Static_assert(offsetof(emu_matmul_info, AC_layout) == 20, "info.AC_layout");
_Static_assert(offsetof(emu_matmul_info, AC_quant_type) == 22, "info.AC_quant_type");
_Static_assert(offsetof(emu_matmul_info, iommu_domain_id) == 24, "info.iommu_domain_id");
_Static_assert(offsetof(emu_matmul_info, group_size) == 28, "info.group_size");
_Static_assert(offsetof(emu_matmul_info, reserved) == 30, "info.reserved");
_Static_assert(sizeof(emu_tensor_attr) == 332, "rknn_matmul_tensor_attr size");
_Static_assert(offsetof(emu_tensor_attr, n_dims) == 256, "attr.n_dims");
_Static_assert(offsetof(emu_tensor_attr, dims) == 260, "attr.dims");
_Static_assert(offsetof(emu_tensor_attr, size) == 324, "attr.size");
_Static_assert(offsetof(emu_tensor_attr, type) == 328, "attr.type");
_Static_assert(sizeof(emu_io_attr) == 996, "rknn_matmul_io_attr size");
_Static_assert(offsetof(emu_io_attr, B) == 332, "io_attr.B");
_Static_assert(offsetof(emu_io_attr, C) == 664, "io_attr.C");
_Static_assert(sizeof(emu_shape) == 12, "rknn_matmul_shape size");
_Static_assert(sizeof(emu_quant_params) == 288, "rknn_quant_params size");
_Static_assert(_Alignof(emu_quant_params) == 8, "rknn_quant_params align");
_Static_assert(offsetof(emu_quant_params, scale) == 256, "qp.scale");
_Static_assert(offsetof(emu_quant_params, scale_len) == 264, "qp.scale_len");
_Static_assert(offsetof(emu_quant_params, zp) == 272, "qp.zp");
_Static_assert(offsetof(emu_quant_params, zp_len) == 280, "qp.zp_len");
_Static_assert(sizeof(emu_tensor_mem) == 40, "rknn_tensor_mem size");
_Static_assert(offsetof(emu_tensor_mem, phys_addr) == 8, "mem.phys_addr");
_Static_assert(offsetof(emu_tensor_mem, fd) == 16, "mem.fd");
_Static_assert(offsetof(emu_tensor_mem, offset) == 20, "mem.offset");
_Static_assert(offsetof(emu_tensor_mem, size) == 24, "mem.size");
_Static_assert(offsetof(emu_tensor_mem, flags) == 28, "mem.flags");
_Static_assert(offsetof(emu_tensor_mem, priv_data) == 32, "mem.priv_data");
_Static_assert(sizeof(emu_sdk_version) == 512, "rknn_sdk_version size");

#endif
