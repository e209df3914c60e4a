/*
 * budget.c - the memory plan behind --mem-budget (see budget.h for what is
 * counted). Pure arithmetic on the manifest; no allocation, no threads.
 */
#include "runtime/budget.h"

#include <inttypes.h>

#include "util/common.h"

#define MIB (1024ull * 1024ull)

uint64_t rkm_budget_kv_bytes(const rkm_hparams *hp, int n_ctx, int n_chunk)
{
    uint64_t total = 0;
    if (n_chunk <= 0) n_chunk = 128;
    for (int il = 0; il < hp->n_layer && il < RKM_MAX_LAYERS; il++) {
        if (rkm_hparams_is_recurrent(hp, il)) { /* a fixed state and its snapshots instead of rows */
            total += 4 * (uint64_t)rkm_hparams_recurrent_state_floats(hp, il) * (1 + RKM_RS_SNAPSHOTS);
            continue;
        }
        uint64_t rows = (uint64_t)n_ctx, dk = (uint64_t)hp->head_dim, dv = (uint64_t)hp->head_dim_v;
        if (hp->sliding_window > 0 && hp->swa_layer[il]) {
            rows = RKM_MIN(rows, (uint64_t)hp->sliding_window + (uint64_t)n_chunk);
            dk = dv = (uint64_t)(hp->head_dim_swa > 0 ? hp->head_dim_swa : hp->head_dim);
        }
        if (dv == 0) dv = dk;
        if (hp->kv_lora_rank > 0) dv = 0; /* latent attention: the values are the K rows' latent */
        total += rows * (uint64_t)hp->n_head_kv[il] * (dk + dv) * 2; /* f16 */
    }
    return total;
}

/* Activations of one chunk of n rows, in floats, as session.c allocates
 * them: six residual-sized buffers, q and attention output, k and v, the
 * FFN intermediates (dense width or top-k expert widths, gate and up), the
 * router and its margins, per-slot expert inputs and outputs, per-thread scores over the
 * context (8 threads assumed), one row of logits; latent attention's
 * per-head gathers. */
static uint64_t scratch_estimate(const rkm_hparams *hp, int n_ctx, int n_chunk)
{
    uint64_t n = (uint64_t)n_chunk, E = (uint64_t)hp->n_embd;
    uint64_t hd = (uint64_t)RKM_MAX(hp->head_dim, RKM_MAX(hp->head_dim_v, hp->head_dim_swa));
    int kvh = 1;
    for (int il = 0; il < hp->n_layer && il < RKM_MAX_LAYERS; il++) kvh = RKM_MAX(kvh, hp->n_head_kv[il]);
    uint64_t qdim = (uint64_t)hp->n_head * hd, kvdim = (uint64_t)kvh * hd;
    uint64_t mla = 0;
    if (hp->kv_lora_rank > 0) {
        qdim = RKM_MAX(qdim, (uint64_t)hp->n_head * (uint64_t)RKM_MAX(hp->head_dim_k_mla, hp->head_dim_v_mla));
        mla = RKM_MAX((uint64_t)hp->n_head * (uint64_t)RKM_MAX(hp->kv_lora_rank, hp->head_dim_k_mla - hp->rope_dim),
                      (uint64_t)hp->q_lora_rank);
    }
    uint64_t k = (uint64_t)RKM_MAX(hp->n_expert_used, 1);
    uint64_t ff = (uint64_t)RKM_MAX(hp->n_ff, hp->n_ff_shexp);
    uint64_t ffn = RKM_MAX(n * ff, n * k * (uint64_t)hp->n_ff_exp);
    uint64_t floats = n * (6 * E + 2 * qdim + 2 * kvdim + mla + (uint64_t)hp->n_expert + k + 1 + k * E) + 2 * ffn +
                      (uint64_t)hp->n_vocab + E;
    uint64_t ints = 3 * n * k; /* selected experts, entries by expert and back */
    return floats * 4 + ints * 4 + 8 * (uint64_t)n_ctx * 6;
}

int rkm_budget_plan(const rkm_model_dir *md, uint64_t budget_bytes, int n_ctx, const rkm_budget_opts *opts,
                    rkm_budget *out)
{
    rkm_budget_opts o = {0};
    if (opts) o = *opts;
    if (!md || !out) return rkm_err(RKM_EINVAL, "budget: NULL argument");
    memset(out, 0, sizeof *out);
    const rkm_hparams *hp = &md->hp;
    if (n_ctx <= 0) n_ctx = RKM_MIN(4096, hp->n_ctx_train > 0 ? hp->n_ctx_train : 4096);
    if (o.n_chunk <= 0) o.n_chunk = 128;
    if (o.n_sessions <= 0) o.n_sessions = 1;
    out->budget_bytes = budget_bytes;
    out->embd_file_bytes = rkm_model_dir_lookup_embd_bytes(md);
    out->resident_bytes = md->resident_bytes - RKM_MIN(out->embd_file_bytes, md->resident_bytes);
    out->kv_bytes = rkm_budget_kv_bytes(hp, n_ctx, o.n_chunk) * (uint64_t)o.n_sessions;
    out->n_sessions = o.n_sessions;
    out->n_ctx = n_ctx;
    out->scratch_bytes = o.scratch_bytes ? o.scratch_bytes : scratch_estimate(hp, n_ctx, o.n_chunk);
    out->overhead_bytes = o.overhead_bytes ? o.overhead_bytes : 48 * MIB;
    for (int i = 0; i < md->n_expert_layers; i++) out->slot_bytes += md->experts[i].blob_stride;
    out->max_slots = md->n_expert_layers ? hp->n_expert : 0;
    out->min_slots = md->n_expert_layers ? (o.min_slots > 0 ? o.min_slots : hp->n_expert_used) : 0;
    if (out->min_slots > out->max_slots) out->min_slots = out->max_slots;
    out->all_experts_bytes = out->slot_bytes * (uint64_t)out->max_slots;
    uint64_t fixed = out->resident_bytes + out->kv_bytes + out->scratch_bytes + out->overhead_bytes;
    int slots = out->max_slots;
    if (budget_bytes && out->slot_bytes) {
        uint64_t left = budget_bytes > fixed ? budget_bytes - fixed : 0;
        uint64_t n = left / out->slot_bytes;
        slots = n >= (uint64_t)out->max_slots ? out->max_slots : (int)n;
    }
    out->slots_per_layer = slots;
    out->cache_bytes = out->slot_bytes * (uint64_t)slots;
    out->total_bytes = fixed + out->cache_bytes;
    if (budget_bytes && (slots < out->min_slots || fixed > budget_bytes)) {
        char b[6][32];
        uint64_t need = fixed + out->slot_bytes * (uint64_t)out->min_slots;
        return rkm_err(RKM_EBUDGET,
                       "memory budget %s too small: needs at least %s = resident weights %s + KV cache %s "
                       "(%d tokens) + scratch %s + %d expert slots per layer x %s",
                       rkm_fmt_bytes(budget_bytes, b[0], 32), rkm_fmt_bytes(need, b[1], 32),
                       rkm_fmt_bytes(out->resident_bytes, b[2], 32), rkm_fmt_bytes(out->kv_bytes, b[3], 32), n_ctx,
                       rkm_fmt_bytes(out->scratch_bytes + out->overhead_bytes, b[4], 32), out->min_slots,
                       rkm_fmt_bytes(out->slot_bytes, b[5], 32));
    }
    return 0;
}

const char *rkm_budget_describe(const rkm_budget *b, char *buf, size_t cap)
{
    char s[10][32], embd[96] = "";
    if (b->embd_file_bytes)
        snprintf(embd, sizeof embd, " (token embeddings %s not held: a row read per token)",
                 rkm_fmt_bytes(b->embd_file_bytes, s[9], 32));
    snprintf(buf, cap,
             "budget %s: resident %s%s, kv %s (%d session%s x %d tokens), scratch %s, overhead %s, "
             "expert cache %d slots/layer x %s = %s (all experts: %s), total %s",
             b->budget_bytes ? rkm_fmt_bytes(b->budget_bytes, s[0], 32) : "none",
             rkm_fmt_bytes(b->resident_bytes, s[1], 32), embd, rkm_fmt_bytes(b->kv_bytes, s[2], 32),
             b->n_sessions, b->n_sessions == 1 ? "" : "s", b->n_ctx,
             rkm_fmt_bytes(b->scratch_bytes, s[3], 32), rkm_fmt_bytes(b->overhead_bytes, s[4], 32),
             b->slots_per_layer, rkm_fmt_bytes(b->slot_bytes, s[5], 32), rkm_fmt_bytes(b->cache_bytes, s[6], 32),
             rkm_fmt_bytes(b->all_experts_bytes, s[7], 32), rkm_fmt_bytes(b->total_bytes, s[8], 32));
    return buf;
}
