/*
 * ffn.c - the dense gated feed-forward block (dense architectures,
 * Gemma 4's MLP beside its experts, shared experts) and the gated
 * activations every FFN uses, dense or routed.
 *
 * Threads: the session's thread with model->lock held; the matmuls use the
 * model's pool. Scratch (tg, tu) belongs to the caller's session.
 */
#include <math.h>
#include <pthread.h>

#include "runtime/model.h"

/* ggml's CPU GELU: y = f16(gelu_tanh(f16(x))) through a 65536-entry table
 * for -10 < x < 10, 0 below, x above. Emulated because the goldens come
 * from it (an exact GELU moves gemma4's probabilities by ~1e-3). */
static rkm_f16 gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
    for (uint32_t i = 0; i < (1u << 16); i++) gelu_table[i] = rkm_f32_to_f16(rkm_gelu_tanh(rkm_f16_to_f32((rkm_f16)i)));
}

void rkm_glu(const rkm_model *m, float *out, const float *g, const float *u, int64_t n)
{
    if (m->hp.act == RKM_ACT_SWIGLU_OAI) {
        /* ggml's swiglu_oai: alpha 1.702, limit 7 */
        for (int64_t i = 0; i < n; i++) {
            float x = RKM_MIN(g[i], 7.0f), y = RKM_MAX(-7.0f, RKM_MIN(u[i], 7.0f));
            out[i] = x / (1.0f + expf(1.702f * -x)) * (y + 1.0f);
        }
        return;
    }
    if (m->hp.act != RKM_ACT_GELU_TANH) {
        rkm_swiglu(out, g, u, n);
        return;
    }
    pthread_once(&gelu_once, gelu_table_init);
    for (int64_t i = 0; i < n; i++) {
        float x = g[i], y;
        if (x <= -10.0f) y = 0.0f;
        else if (x >= 10.0f) y = x;
        else y = rkm_f16_to_f32(gelu_table[rkm_f32_to_f16(x)]);
        out[i] = y * u[i];
    }
}

int rkm_ffn_dense(rkm_session *s, const rkm_mat *gate, const rkm_mat *up, const rkm_mat *down,
                  const float *x, int n, float *out, float *tg, float *tu)
{
    const rkm_model *m = s->m;
    int64_t ff = gate->n_out;
    int rc;
    if (n <= RKM_MM_MULTI_MAX_ROWS) {
        rkm_mm_task t[2] = {rkm_mm_task_of(gate, x, n, tg), rkm_mm_task_of(up, x, n, tu)};
        rkm_mm_multi(m->pool, t, 2);
    } else if ((rc = rkm_model_mm(m, gate, x, n, tg)) || (rc = rkm_model_mm(m, up, x, n, tu))) {
        return rc;
    }
    rkm_glu(s->m, tg, tg, tu, (int64_t)n * ff);
    return rkm_model_mm(m, down, tg, n, out);
}
