/*
 * plan.c - see plan.h.
 */
#include "runtime/plan.h"

#include <string.h>

#include "kernels/kernels.h"
#include "util/common.h"

#define GIB (1024ull * 1024 * 1024)

/* Nominal figures (docs/STREAMING.md, "Planning"): memory bandwidth as
 * sequential reads measured on the SoC's boards (RK3588 17-22 GB/s; the
 * RK3576's 32-bit bus taken as half of that), storage as the interface
 * allows in practice; no kernel or checksum rates (unmeasured on the
 * boards: no prediction). A board's own figures come from `--device
 * this` run on it. */
const rkm_device rkm_devices[] = {
    {"rk3588-nvme", "RK3588, 4x Cortex-A76 + 4x A55, 16 GiB LPDDR4x, NVMe SSD on PCIe 3.0 x4", 16 * GIB, RKM_PLAN_RESERVE_BYTES, 18.0,
     2000.0, 4, 0},
    {"rk3588-emmc", "RK3588, 4x Cortex-A76 + 4x A55, 16 GiB LPDDR4x, eMMC 5.1 (HS400)", 16 * GIB, RKM_PLAN_RESERVE_BYTES, 18.0, 280.0,
     4, 0},
    {"rk3588-sd", "RK3588, 4x Cortex-A76 + 4x A55, 16 GiB LPDDR4x, microSD (UHS-I SDR104)", 16 * GIB, RKM_PLAN_RESERVE_BYTES, 18.0, 80.0,
     4, 0},
    {"rk3576-nvme", "RK3576, 4x Cortex-A72 + 4x A53, 8 GiB LPDDR4x, NVMe SSD on PCIe 2.1 x1", 8 * GIB, RKM_PLAN_RESERVE_BYTES, 9.0, 400.0,
     4, 0},
    {"rk3576-ufs", "RK3576, 4x Cortex-A72 + 4x A53, 8 GiB LPDDR4x, UFS 2.0", 8 * GIB, RKM_PLAN_RESERVE_BYTES, 9.0, 700.0, 4, 0},
    {"rk3576-emmc", "RK3576, 4x Cortex-A72 + 4x A53, 8 GiB LPDDR4x, eMMC 5.1 (HS400)", 8 * GIB, RKM_PLAN_RESERVE_BYTES, 9.0, 280.0, 4, 0},
    {"rk3576-sd", "RK3576, 4x Cortex-A72 + 4x A53, 8 GiB LPDDR4x, microSD (UHS-I SDR104)", 8 * GIB, RKM_PLAN_RESERVE_BYTES, 9.0, 80.0, 4, 0},
};
const int rkm_n_devices = (int)RKM_ARRAY_LEN(rkm_devices);

const rkm_device *rkm_device_find(const char *name)
{
    for (int i = 0; name && i < rkm_n_devices; i++)
        if (!strcmp(rkm_devices[i].name, name)) return &rkm_devices[i];
    return NULL;
}

/* The resident tensors a decode token reads whole: the matrices (norms
 * and biases are noise) but an untied token embedding, of which it reads
 * one row (a tied one is the LM head too). NULL past the last. */
static const rkm_tensor_view *next_read_whole(const rkm_model_dir *md, int *i)
{
    const rkm_tensor_view *embd = rkm_model_dir_tensor(md, "token_embd.weight");
    const int tied = embd && !rkm_model_dir_tensor(md, "output.weight");
    while (*i < md->n_tensors) {
        const rkm_tensor_view *t = &md->tensors[(*i)++];
        if (t->n_dims >= 2 && (t != embd || tied)) return t;
    }
    return NULL;
}

double rkm_plan_weight_bytes(const rkm_model_dir *md)
{
    double b = 0;
    int i = 0;
    for (const rkm_tensor_view *t; (t = next_read_whole(md, &i));) b += (double)t->nbytes;
    for (int l = 0; l < md->n_expert_layers; l++) b += (double)md->hp.n_expert_used * (double)md->experts[l].blob_bytes;
    return b;
}

static int add_wtype(rkm_plan_wtype *out, int n, int cap, int type, int64_t n_in, int64_t n_out, double bytes)
{
    type = rkm_pack_type(type, n_out);
    int i = 0;
    while (i < n && out[i].type != type) i++;
    if (i == n) {
        if (n == cap) i = n - 1; /* folded into the last */
        else out[n++] = (rkm_plan_wtype){.type = type};
    }
    if (bytes > 0 && (double)n_in * (double)n_out > (double)out[i].n_in * (double)out[i].n_out) {
        out[i].n_in = n_in;
        out[i].n_out = n_out;
    }
    out[i].bytes += bytes;
    return n;
}

int rkm_plan_weight_types(const rkm_model_dir *md, rkm_plan_wtype *out, int cap)
{
    if (cap <= 0) return 0;
    int n = 0, i = 0;
    for (const rkm_tensor_view *t; (t = next_read_whole(md, &i));)
        n = add_wtype(out, n, cap, t->type, t->ne[0], t->ne[1], (double)t->nbytes);
    for (int l = 0; l < md->n_expert_layers; l++)
        for (int k = 0; k < RKM_PART_COUNT; k++) {
            const rkm_expert_part *pt = &md->experts[l].part[k];
            /* the top-k experts' same part run as one pool job (rkm_mm_multi) */
            if (pt->nbytes)
                n = add_wtype(out, n, cap, pt->type, pt->ne[0], pt->ne[1] * md->hp.n_expert_used,
                              (double)md->hp.n_expert_used * (double)pt->nbytes);
        }
    return n;
}

uint64_t rkm_plan_device_budget(const rkm_device *dev)
{
    return dev->mem_bytes > dev->reserve_bytes ? dev->mem_bytes - dev->reserve_bytes : 0;
}

int rkm_plan_memory(const rkm_model_dir *md, const rkm_device *dev, uint64_t budget_bytes, int n_ctx, rkm_plan *out)
{
    memset(out, 0, sizeof *out);
    if (!budget_bytes) budget_bytes = rkm_plan_device_budget(dev);
    if (!budget_bytes) return rkm_err(RKM_EINVAL, "plan: device %s leaves no memory", dev->name);
    int rc = rkm_budget_plan(md, budget_bytes, n_ctx, NULL, &out->budget);
    out->shared_pool = rkm_budget_default_shared(out->budget.slots_per_layer, md->hp.n_expert_used);
    return rc;
}

double rkm_plan_uniform_hit_rate(const rkm_model_dir *md, int slots)
{
    if (md->hp.n_expert <= 0) return 1.0;
    return slots >= md->hp.n_expert ? 1.0 : (double)slots / md->hp.n_expert;
}

void rkm_plan_speed(const rkm_model_dir *md, const rkm_device *dev, double hit_rate, double t_compute_s, rkm_plan *out)
{
    double experts_tok = 0; /* expert bytes a token routes to */
    for (int i = 0; i < md->n_expert_layers; i++)
        experts_tok += (double)md->hp.n_expert_used * (double)md->experts[i].blob_stride;
    if (out->budget.slots_per_layer >= md->hp.n_expert) hit_rate = 1.0; /* every expert held */
    out->hit_rate = hit_rate;
    out->mem_bytes_tok = rkm_plan_weight_bytes(md);
    out->disk_bytes_tok = (1.0 - hit_rate) * experts_tok;
    out->t_mem_s = dev->mem_gbs > 0 ? out->mem_bytes_tok / (dev->mem_gbs * 1e9) : 0;
    out->t_disk_s = dev->disk_mbs > 0 ? out->disk_bytes_tok / (dev->disk_mbs * 1e6) : 0;
    double tmax = RKM_MAX(out->t_mem_s, out->t_disk_s), tsum = out->t_mem_s + out->t_disk_s;
    out->tok_s_overlapped = tmax > 0 ? 1.0 / tmax : 0;
    out->tok_s_serial = tsum > 0 ? 1.0 / tsum : 0;
    out->t_compute_s = t_compute_s > 0 ? t_compute_s : 0;
    out->t_check_s = dev->check_gbs > 0 ? out->disk_bytes_tok / (dev->check_gbs * 1e9) : 0;
    out->tok_s_predicted = t_compute_s > 0 ? 1.0 / (t_compute_s + out->t_disk_s + out->t_check_s) : 0;
}
