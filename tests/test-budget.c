/*
 * test-budget.c - the memory plan behind --mem-budget (runtime/budget.c)
 * on a hand-made manifest, every figure against a value worked out by
 * hand here: KV rows of full and sliding layers, the scratch estimate,
 * slots from a budget at and around the boundaries, the minimum refused
 * with a message giving the numbers, no budget = every expert, the
 * options, dense models and bad arguments.
 */
#include "common/test.h"
#include "runtime/budget.h"
#include "util/common.h"

#define MIB (1024ull * 1024ull)
#define SLOT 32768ull /* two MoE layers of 16 KiB strides */

static rkm_expert_layer layers[2];

static rkm_model_dir make_md(void)
{
    rkm_model_dir md;
    memset(&md, 0, sizeof md);
    md.resident_bytes = 100 * MIB;
    rkm_hparams *hp = &md.hp;
    hp->n_layer = 4, hp->n_embd = 256, hp->n_head = 4, hp->head_dim = 64, hp->head_dim_v = 64;
    hp->head_dim_swa = 32, hp->n_vocab = 1000, hp->n_ff_exp = 128, hp->n_expert = 12, hp->n_expert_used = 3;
    for (int il = 0; il < 4; il++) hp->n_head_kv[il] = 2;
    hp->sliding_window = 100;
    hp->swa_layer[0] = hp->swa_layer[2] = 1;
    for (int l = 0; l < 2; l++)
        layers[l] = (rkm_expert_layer){.layer = 1 + 2 * l, .n_expert = 12, .blob_bytes = 12345 + 4000 * (uint64_t)l,
                                       .blob_stride = 16384, .fd = -1};
    md.n_expert_layers = 2;
    md.experts = layers;
    return md;
}

/* KV at 1000 tokens: full layers 1, 3: 1000 rows * 2 heads * (64 + 64) * 2 B;
 * sliding layers 0, 2: min(1000, 100 + 128) rows * 2 heads * (32 + 32) * 2 B */
#define KV_1000 (2ull * 1000 * 2 * 128 * 2 + 2ull * 228 * 2 * 64 * 2)
/* Scratch of a 128-row chunk at 1000 tokens, in floats: 128 rows of
 * 6 * 256 (residual) + 2 * 4 * 64 (q, attention out) + 2 * 2 * 64 (k, v)
 * + 12 (router) + 3 + 1 (its margin) + 3 * 256 (top-k inputs and outputs) = 3088, plus
 * 2 * 128 * 3 * 128 (expert gate and up), 1000 logits and one 256 row;
 * then 3 * 128 * 3 ints and 8 threads' 1000 scores * 6 bytes. */
#define SCRATCH_1000 ((128ull * 3088 + 2ull * 128 * 3 * 128 + 1000 + 256) * 4 + 3ull * 128 * 3 * 4 + 8ull * 1000 * 6)
#define FIXED_1000 (100 * MIB + KV_1000 + SCRATCH_1000 + 48 * MIB)

static void test_unbudgeted(void)
{
    rkm_model_dir md = make_md();
    CHECK_EQ_INT(KV_1000, 1140736);
    CHECK_EQ_INT(SCRATCH_1000, 2031904);
    CHECK_EQ_INT(rkm_budget_kv_bytes(&md.hp, 1000, 128), KV_1000);
    /* a shorter chunk keeps fewer sliding rows: min(1000, 100 + 50) */
    CHECK_EQ_INT(rkm_budget_kv_bytes(&md.hp, 1000, 50), 2ull * 1000 * 2 * 128 * 2 + 2ull * 150 * 2 * 64 * 2);
    CHECK_EQ_INT(rkm_budget_kv_bytes(&md.hp, 1000, 0), KV_1000); /* 0: 128 */
    /* fewer tokens than the window: every layer keeps them all */
    CHECK_EQ_INT(rkm_budget_kv_bytes(&md.hp, 64, 128), 2ull * 64 * 2 * 128 * 2 + 2ull * 64 * 2 * 64 * 2);
    rkm_budget b;
    CHECK_EQ_INT(rkm_budget_plan(&md, 0, 1000, NULL, &b), 0);
    CHECK_EQ_INT(b.budget_bytes, 0);
    CHECK_EQ_INT(b.resident_bytes, 100 * MIB);
    CHECK_EQ_INT(b.embd_file_bytes, 0);
    CHECK_EQ_INT(b.kv_bytes, KV_1000);
    CHECK_EQ_INT(b.scratch_bytes, SCRATCH_1000);
    CHECK_EQ_INT(b.overhead_bytes, 48 * MIB);
    CHECK_EQ_INT(b.slot_bytes, SLOT);
    CHECK_EQ_INT(b.min_slots, 3);
    CHECK_EQ_INT(b.max_slots, 12);
    CHECK_EQ_INT(b.slots_per_layer, 12); /* no budget: every expert */
    CHECK_EQ_INT(b.cache_bytes, 12 * SLOT);
    CHECK_EQ_INT(b.all_experts_bytes, 12 * SLOT);
    CHECK_EQ_INT(b.total_bytes, FIXED_1000 + 12 * SLOT);
    CHECK_EQ_INT(b.total_bytes, 158755104);
    char desc[512];
    rkm_budget_describe(&b, desc, sizeof desc);
    CHECK_MSG(strstr(desc, "budget none") && strstr(desc, "12 slots/layer x 32.00 KiB = 384.00 KiB"), "%s", desc);
}

static void test_budgeted(void)
{
    rkm_model_dir md = make_md();
    rkm_budget b;
    /* exactly five slots' worth, one byte short of it, and far more */
    CHECK_EQ_INT(rkm_budget_plan(&md, FIXED_1000 + 5 * SLOT, 1000, NULL, &b), 0);
    CHECK_EQ_INT(b.slots_per_layer, 5);
    CHECK_EQ_INT(b.cache_bytes, 5 * SLOT);
    CHECK_EQ_INT(b.total_bytes, FIXED_1000 + 5 * SLOT);
    CHECK_EQ_INT(rkm_budget_plan(&md, FIXED_1000 + 5 * SLOT - 1, 1000, NULL, &b), 0);
    CHECK_EQ_INT(b.slots_per_layer, 4);
    CHECK_EQ_INT(rkm_budget_plan(&md, FIXED_1000 + 100 * SLOT, 1000, NULL, &b), 0);
    CHECK_EQ_INT(b.slots_per_layer, 12); /* capped at the experts */
    CHECK_EQ_INT(rkm_budget_plan(&md, FIXED_1000 + 3 * SLOT, 1000, NULL, &b), 0);
    CHECK_EQ_INT(b.slots_per_layer, 3); /* the minimum, top-k */
    /* below top-k: refused, with every figure, and *out still filled */
    CHECK_EQ_INT(rkm_budget_plan(&md, FIXED_1000 + 3 * SLOT - 1, 1000, NULL, &b), RKM_EBUDGET);
    CHECK_EQ_INT(b.slots_per_layer, 2);
    const char *e = rkm_last_error();
    CHECK_MSG(strstr(e, "too small") && strstr(e, "resident weights 100.00 MiB") &&
                  strstr(e, "(1000 tokens)") && strstr(e, "3 expert slots per layer x 32.00 KiB"),
              "%s", e);
    /* below the fixed part: refused, no slots */
    CHECK_EQ_INT(rkm_budget_plan(&md, 1 * MIB, 1000, NULL, &b), RKM_EBUDGET);
    CHECK_EQ_INT(b.slots_per_layer, 0);
    CHECK_EQ_INT(b.total_bytes, FIXED_1000);
    char desc[512];
    CHECK_EQ_INT(rkm_budget_plan(&md, FIXED_1000 + 7 * SLOT, 1000, NULL, &b), 0);
    CHECK_MSG(strstr(rkm_budget_describe(&b, desc, sizeof desc), "7 slots/layer") != NULL, "%s", desc);
}

static void test_options(void)
{
    rkm_model_dir md = make_md();
    rkm_budget b;
    rkm_budget_opts o = {.n_sessions = 3, .scratch_bytes = 12345, .overhead_bytes = 1};
    CHECK_EQ_INT(rkm_budget_plan(&md, 0, 1000, &o, &b), 0);
    CHECK_EQ_INT(b.kv_bytes, 3 * KV_1000);
    CHECK_EQ_INT(b.scratch_bytes, 12345);
    CHECK_EQ_INT(b.overhead_bytes, 1);
    CHECK_EQ_INT(b.total_bytes, 100 * MIB + 3 * KV_1000 + 12345 + 1 + 12 * SLOT);
    /* a higher minimum refuses what top-k would take; above the experts it is capped */
    rkm_budget_opts m = {.min_slots = 5};
    CHECK_EQ_INT(rkm_budget_plan(&md, FIXED_1000 + 4 * SLOT, 1000, &m, &b), RKM_EBUDGET);
    CHECK(strstr(rkm_last_error(), "5 expert slots per layer") != NULL);
    m.min_slots = 99;
    CHECK_EQ_INT(rkm_budget_plan(&md, 0, 1000, &m, &b), 0);
    CHECK_EQ_INT(b.min_slots, 12);
    /* n_ctx 0: the training context, at most 4096 */
    md.hp.n_ctx_train = 2048;
    CHECK_EQ_INT(rkm_budget_plan(&md, 0, 0, NULL, &b), 0);
    CHECK_EQ_INT(b.kv_bytes, 2ull * 2048 * 2 * 128 * 2 + 2ull * 228 * 2 * 64 * 2);
    md.hp.n_ctx_train = 100000;
    CHECK_EQ_INT(rkm_budget_plan(&md, 0, 0, NULL, &b), 0);
    CHECK_EQ_INT(b.kv_bytes, rkm_budget_kv_bytes(&md.hp, 4096, 128));
    md.hp.n_ctx_train = 0;
    CHECK_EQ_INT(rkm_budget_plan(&md, 0, 0, NULL, &b), 0);
    CHECK_EQ_INT(b.kv_bytes, 2ull * 4096 * 2 * 128 * 2 + 2ull * 228 * 2 * 64 * 2);
}

/* Latent attention (deepseek2): one row per position of latent + rotated
 * key, no V rows; against the heads' keys and values it replaces
 * (DeepSeek-V3: 576 against 128 x (192 + 128) values per layer). */
static void test_mla_kv(void)
{
    rkm_model_dir md = make_md();
    rkm_hparams *hp = &md.hp;
    hp->arch = RKM_ARCH_DEEPSEEK2;
    hp->sliding_window = 0;
    memset(hp->swa_layer, 0, sizeof hp->swa_layer);
    hp->n_head = 128;
    hp->kv_lora_rank = 512;
    hp->rope_dim = 64;
    hp->head_dim = hp->head_dim_swa = 576;
    hp->head_dim_v = 512;
    hp->head_dim_k_mla = 192;
    hp->head_dim_v_mla = 128;
    for (int i = 0; i < RKM_MAX_LAYERS; i++) hp->n_head_kv[i] = 1;
    uint64_t mla = rkm_budget_kv_bytes(hp, 1000, 128);
    CHECK_EQ_INT(mla, (uint64_t)hp->n_layer * 1000 * 576 * 2);
    /* the same model as multi-head attention would cache */
    uint64_t mha = (uint64_t)hp->n_layer * 1000 * 128 * (192 + 128) * 2;
    CHECK_MSG(mha / mla == 71, "MHA / MLA bytes %llu / %llu", (unsigned long long)mha, (unsigned long long)mla);
    rkm_budget b;
    CHECK_EQ_INT(rkm_budget_plan(&md, 0, 1000, NULL, &b), 0);
    CHECK_EQ_INT(b.kv_bytes, mla);
}

/* Recurrent layers (Qwen3.5-35B-A3B's geometry): a fixed state and its
 * truncation snapshots per session, whatever the context; the attention
 * layers' rows as before. */
static void test_recurrent_state(void)
{
    rkm_model_dir md = make_md();
    rkm_hparams *hp = &md.hp;
    hp->sliding_window = 0;
    memset(hp->swa_layer, 0, sizeof hp->swa_layer);
    uint64_t full = rkm_budget_kv_bytes(hp, 1000, 128) / (uint64_t)hp->n_layer; /* one attention layer */
    hp->ssm_d_conv = 4;
    hp->ssm_d_state = 128;
    hp->ssm_n_group = 16;
    hp->ssm_dt_rank = 32;
    hp->ssm_d_inner = 4096;
    for (int i = 0; i < hp->n_layer; i++) hp->recr_layer[i] = (i + 1) % 4 != 0;
    int n_recr = 0;
    for (int i = 0; i < hp->n_layer; i++) n_recr += hp->recr_layer[i];
    uint64_t state = 4ull * (3 * 8192 + 32 * 128 * 128); /* the convolution's window, the heads' matrices */
    CHECK_EQ_INT(rkm_hparams_recurrent_state_floats(hp, 0) * 4, state);
    CHECK_EQ_INT(rkm_hparams_recurrent_state_floats(hp, 3), 0);
    uint64_t want = (uint64_t)n_recr * state * (1 + RKM_RS_SNAPSHOTS) + (uint64_t)(hp->n_layer - n_recr) * full;
    CHECK_EQ_INT(rkm_budget_kv_bytes(hp, 1000, 128), want);
    CHECK_EQ_INT(rkm_budget_kv_bytes(hp, 2000, 128) - rkm_budget_kv_bytes(hp, 1000, 128),
                 (uint64_t)(hp->n_layer - n_recr) * full); /* only the attention layers grow */
}

static void test_dense_and_args(void)
{
    rkm_model_dir md = make_md();
    md.n_expert_layers = 0;
    md.experts = NULL;
    rkm_budget b;
    CHECK_EQ_INT(rkm_budget_plan(&md, 0, 1000, NULL, &b), 0);
    CHECK_EQ_INT(b.slot_bytes, 0);
    CHECK_EQ_INT(b.slots_per_layer, 0);
    CHECK_EQ_INT(b.min_slots, 0);
    CHECK_EQ_INT(b.max_slots, 0);
    CHECK_EQ_INT(b.cache_bytes, 0);
    CHECK_EQ_INT(rkm_budget_plan(&md, 1ull << 40, 1000, NULL, &b), 0);
    CHECK_EQ_INT(b.slots_per_layer, 0);
    CHECK_EQ_INT(rkm_budget_plan(&md, 1 * MIB, 1000, NULL, &b), RKM_EBUDGET);
    CHECK_EQ_INT(rkm_budget_plan(NULL, 0, 0, NULL, &b), RKM_EINVAL);
    CHECK_EQ_INT(rkm_budget_plan(&md, 0, 0, NULL, NULL), RKM_EINVAL);
}

int main(void)
{
    test_unbudgeted();
    test_budgeted();
    test_options();
    test_dense_and_args();
    test_mla_kv();
    test_recurrent_state();
    return test_done();
}
