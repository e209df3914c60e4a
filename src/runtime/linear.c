/*
 * linear.c - the model's matrix products on its weight views (rkm_mat):
 * one resident matrix on the pool, a view as a batch task, and the
 * per-matrix choice between the CPU and the NPU's int8 copy (prefill).
 * Attention's projections, the routers, the dense FFNs and the LM head
 * all multiply through here.
 *
 * Threads: the session's thread with model->lock held (the pool and the
 * backend belong to the model). Ownership: views point into the model.
 */
#include "backend/backend.h"
#include "runtime/model.h"

void rkm_matmul_mat(rkm_pool *pool, const rkm_mat *w, const float *x, int64_t m, float *y)
{
    rkm_matmul(rkm_pool_for(pool, (double)w->n_in * (double)w->n_out * (double)m), w->type, w->data, w->n_in,
               w->n_out, x, m, y, w->n_out);
}

rkm_mm_task rkm_mm_task_of(const rkm_mat *w, const float *x, int64_t m, float *y)
{
    rkm_mm_task t = {w->type, w->data, w->n_in, w->n_out, x, m, y, w->n_out};
    return t;
}

int rkm_model_mm(const rkm_model *m, const rkm_mat *w, const float *x, int64_t n, float *y)
{
    if (w->npu && n >= RKM_NPU_DENSE_MIN_ROWS) {
        rkm_mm_task t = {RKM_TYPE_RKNN_I8, w->npu, w->n_in, w->n_out, x, n, y, w->n_out};
        return rkm_backend_mm(m->backend, m->pool, &t, 1, 0);
    }
    rkm_matmul_mat(m->pool, w, x, n, y);
    return 0;
}
