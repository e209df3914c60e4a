/*
 * backend.c - backend selection and the matmul dispatch (backend.h).
 *
 * Owns the NPU engine when the rknn backend is selected. Threads: the
 * caller of rkm_backend_mm holds model->lock; nothing here is shared.
 */
#include "backend/backend.h"

#include "backend/rknn.h"
#include "kernels/rknn_i8.h"
#include "util/common.h"

struct rkm_backend {
    int kind;          /* RKM_BACKEND_CPU or RKM_BACKEND_RKNN after selection */
    rkm_rknn *npu;     /* rknn only */
    char reason[2048];
};

int rkm_backend_kind_from_name(const char *name)
{
    if (!name) return -1;
    if (!strcmp(name, "auto")) return RKM_BACKEND_AUTO;
    if (!strcmp(name, "cpu")) return RKM_BACKEND_CPU;
    if (!strcmp(name, "rknn") || !strcmp(name, "npu")) return RKM_BACKEND_RKNN;
    return -1;
}

rkm_backend *rkm_backend_open(int kind, int has_npu_weights)
{
    if (kind != RKM_BACKEND_AUTO && kind != RKM_BACKEND_CPU && kind != RKM_BACKEND_RKNN) {
        rkm_err(RKM_EINVAL, "backend: unknown kind %d", kind);
        return NULL;
    }
    rkm_backend *b = calloc(1, sizeof *b);
    if (!b) {
        rkm_err(RKM_ENOMEM, "backend: out of memory");
        return NULL;
    }
    b->kind = RKM_BACKEND_CPU;
    if (kind == RKM_BACKEND_CPU) {
        snprintf(b->reason, sizeof b->reason, "cpu: requested%s",
                 has_npu_weights ? " (rknn_i8 weights run on the CPU kernel)" : "");
        return b;
    }
    if (kind == RKM_BACKEND_AUTO && !has_npu_weights) {
        snprintf(b->reason, sizeof b->reason,
                 "cpu: the model has no NPU weights (convert with --target rk3588 to use the NPU)");
        return b;
    }
    b->npu = rkm_rknn_open();
    if (!b->npu) {
        if (kind == RKM_BACKEND_RKNN) {
            free(b);
            rkm_err_prefix(RKM_EUNSUPPORTED, "--backend rknn unavailable");
            return NULL;
        }
        snprintf(b->reason, sizeof b->reason, "cpu: NPU unavailable: %.1500s", rkm_last_error());
        return b;
    }
    const rkm_rknn_info *in = rkm_rknn_get_info(b->npu);
    b->kind = RKM_BACKEND_RKNN;
    snprintf(b->reason, sizeof b->reason, "rknn: %s (%.255s), %d core%s, %.511s, runtime %.100s, driver %.100s%s",
             rkm_rknn_chip_name(in->chip), in->chip_src, in->n_cores, in->n_cores > 1 ? "s" : "", in->lib,
             in->api_version, in->drv_version,
             has_npu_weights ? "" : "; the model has no rknn_i8 weights, so everything runs on the CPU");
    return b;
}

void rkm_backend_free(rkm_backend *b)
{
    if (!b) return;
    rkm_rknn_close(b->npu);
    free(b);
}

const char *rkm_backend_name(const rkm_backend *b)
{
    return b && b->kind == RKM_BACKEND_RKNN ? "rknn" : "cpu";
}

const char *rkm_backend_reason(const rkm_backend *b)
{
    return b ? b->reason : "cpu: no backend";
}

struct rkm_rknn *rkm_backend_rknn(rkm_backend *b)
{
    return b ? b->npu : NULL;
}

void *rkm_backend_slot_alloc(void *backend, size_t bytes)
{
    rkm_backend *b = backend;
    return b && b->npu ? rkm_rknn_slot_alloc(b->npu, bytes) : rkm_alloc_aligned(bytes, 4096);
}

void rkm_backend_slot_free(void *backend, void *buf)
{
    rkm_backend *b = backend;
    if (b && b->npu) rkm_rknn_slot_free(b->npu, buf);
    else rkm_free_aligned(buf);
}

void rkm_backend_slot_filled(void *backend, void *buf, size_t bytes)
{
    rkm_backend *b = backend;
    if (b && b->npu) rkm_rknn_slot_filled(b->npu, buf, bytes);
}

int rkm_backend_mm(rkm_backend *b, rkm_pool *pool, const rkm_mm_task *t, int n, int batch)
{
    /* the CPU tasks first, in one batched job when asked: the rknn_i8 ones
     * are left out of it (their layout is not row-split) */
    rkm_mm_task cpu[64];
    int nc = 0, all_cpu = 1;
    for (int i = 0; i < n; i++) all_cpu &= t[i].type != RKM_TYPE_RKNN_I8;
    if (batch && all_cpu) {
        rkm_mm_multi(pool, t, n);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        const rkm_mm_task *k = &t[i];
        if (k->type != RKM_TYPE_RKNN_I8) {
            if (batch && nc < (int)RKM_ARRAY_LEN(cpu)) {
                cpu[nc++] = *k;
                continue;
            }
            rkm_matmul(rkm_pool_for(pool, (double)k->n_in * (double)k->n_out * (double)k->m), k->type, k->w, k->n_in,
                       k->n_out, k->x, k->m, k->y, k->ldy);
            continue;
        }
        if (b && b->npu) {
            int rc = rkm_rknn_matmul_i8(b->npu, k->w, k->n_in, k->n_out, k->x, k->m, k->y, k->ldy);
            if (rc) return rc;
        } else {
            rkm_rknn_i8_matmul_cpu(pool, k->w, k->n_in, k->n_out, k->x, k->m, k->y, k->ldy);
        }
    }
    if (nc) rkm_mm_multi(pool, cpu, nc);
    return 0;
}
