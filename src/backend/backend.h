/*
 * backend.h - where the runtime's weight matmuls run: the interface the
 * forward pass calls (today the routed experts' gate/up/down), with two
 * implementations, the CPU (the kernels of src/kernels) and the RKNN NPU
 * (rknn.h) for weights of type rknn_i8, and the selection between them.
 *
 * Selection (rkm_model_params.backend: `--backend`, or $RKM_BACKEND
 * through rkm_model_params_from_knobs):
 *   auto  the NPU when the model holds rknn_i8 weights, librknnrt loads
 *         and the chip runs int8 matmuls; otherwise the CPU, and the
 *         reason says why in one line;
 *   cpu   the CPU (rknn_i8 weights run on the CPU kernel of rknn_i8.h);
 *   rknn  the NPU, or an error with the reason it is unavailable.
 *
 * Threads: a backend belongs to one model and is driven by the thread
 * that holds model->lock. Ownership: the model opens and frees it.
 */
#ifndef RKM_BACKEND_BACKEND_H
#define RKM_BACKEND_BACKEND_H

#include "kernels/matmul.h"

enum { RKM_BACKEND_AUTO = 0, RKM_BACKEND_CPU = 1, RKM_BACKEND_RKNN = 2 };

typedef struct rkm_backend rkm_backend;
struct rkm_rknn;

/* "auto", "cpu", "rknn" -> kind; -1 if unknown. */
int rkm_backend_kind_from_name(const char *name);
/* has_npu_weights:
 * the model holds rknn_i8 matrices (auto tries the NPU only then). NULL
 * with the reason in rkm_last_error() (kind rknn unavailable, bad env). */
rkm_backend *rkm_backend_open(int kind, int has_npu_weights);
void rkm_backend_free(rkm_backend *b);
/* "cpu" or "rknn". */
const char *rkm_backend_name(const rkm_backend *b);
/* One line: what runs where and why ("cpu: librknnrt.so: cannot open..."). */
const char *rkm_backend_reason(const rkm_backend *b);
/* The NPU engine, or NULL on the CPU backend. */
struct rkm_rknn *rkm_backend_rknn(rkm_backend *b);

/* Expert-cache slot hooks (expert_cache.h), user = the backend: on the
 * rknn backend, slots in NPU memory (rknn.h); otherwise aligned memory. */
void *rkm_backend_slot_alloc(void *backend, size_t bytes);
void rkm_backend_slot_free(void *backend, void *buf);
void rkm_backend_slot_filled(void *backend, void *buf, size_t bytes);

/* Runs n independent matmuls. batch: small m (decoding), run every CPU
 * task in one pool job (rkm_mm_multi); otherwise each matmul splits its
 * own rows over the pool. rknn_i8 tasks go to the NPU on the rknn backend
 * and to the CPU kernel otherwise. 0 or a negative RKM_E* (NPU failure). */
int rkm_backend_mm(rkm_backend *b, rkm_pool *pool, const rkm_mm_task *t, int n, int batch);

#endif
