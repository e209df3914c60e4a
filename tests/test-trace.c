/*
 * test-trace.c - routing-trace files and the cache simulator (runtime/
 * trace.c) and the `rkmojo trace-sim` command:
 *  - write/load round trip; malformed and mutated files fail cleanly;
 *  - hand-worked examples where LRU, LFU and Belady differ;
 *  - Belady equals the optimum found by exhaustive search on small traces
 *    of single-expert requests, and never loses to LRU/LFU on random
 *    multi-expert traces;
 *  - the CLI's --json numbers equal the library's.
 * (test-expert-cache checks the simulator against the real cache.)
 */
#include <cjson/cJSON.h>

#include "common/test.h"
#include "runtime/trace.h"
#include "util/common.h"

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rng(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, 512, "%s/%s", test_tmpdir(), name);
    return b;
}

/* Writes a trace of single-layer records from a flat list. */
static rkm_trace *make_trace(int n_expert, int k, int n_rec, const int *ids, const int *counts)
{
    const char *p = tmp_path("t.bin");
    rkm_trace_writer *w = rkm_trace_writer_open(p, 2, n_expert, k);
    CHECK(w != NULL);
    int off = 0;
    for (int r = 0; r < n_rec; r++) {
        int c = counts ? counts[r] : 1;
        CHECK_EQ_INT(rkm_trace_write(w, (uint32_t)r, 1, ids + off, c), 0);
        off += c;
    }
    CHECK_EQ_INT(rkm_trace_writer_close(w), 0);
    rkm_trace *t = rkm_trace_load(p);
    CHECK_MSG(t != NULL, "%s", rkm_last_error());
    return t;
}

static rkm_sim_result sim(const rkm_trace *t, int policy, int slots)
{
    rkm_sim_result r = {0};
    CHECK_EQ_INT(rkm_trace_simulate(t, policy, slots, &r), 0);
    return r;
}

static uint64_t sim_hits(const rkm_trace *t, int policy, int slots) { return sim(t, policy, slots).hits; }

static void test_roundtrip(void)
{
    const char *p = tmp_path("rt.bin");
    rkm_trace_writer *w = rkm_trace_writer_open(p, 5, 64, 4);
    CHECK(w != NULL);
    int ids[4];
    for (int r = 0; r < 100; r++) {
        int n = 1 + r % 4;
        for (int i = 0; i < n; i++) ids[i] = (r * 7 + i * 13) % 64;
        CHECK_EQ_INT(rkm_trace_write(w, (uint32_t)(r / 3), r % 5, ids, n), 0);
    }
    int bad[1] = {64};
    CHECK_EQ_INT(rkm_trace_write(w, 0, 0, bad, 1), RKM_EINVAL);
    CHECK_EQ_INT(rkm_trace_write(w, 0, 5, ids, 1), RKM_EINVAL);
    CHECK_EQ_INT(rkm_trace_writer_close(w), 0);
    rkm_trace *t = rkm_trace_load(p);
    CHECK(t != NULL);
    if (!t) return;
    CHECK_EQ_INT(t->n_layer, 5);
    CHECK_EQ_INT(t->n_expert, 64);
    CHECK_EQ_INT(t->top_k, 4);
    CHECK_EQ_INT(t->n_rec, 100);
    int ok = 1;
    for (int r = 0; r < 100; r++) {
        const rkm_trace_rec *rec = &t->recs[r];
        ok &= rec->token == (uint32_t)(r / 3) && rec->layer == r % 5 && rec->n == 1 + r % 4;
        for (int i = 0; i < rec->n; i++) ok &= t->ids[rec->first + i] == (r * 7 + i * 13) % 64;
    }
    CHECK(ok);
    rkm_trace_free(t);
    CHECK(rkm_trace_writer_open(tmp_path("x.bin"), 0, 8, 2) == NULL);
    CHECK(rkm_trace_writer_open("/nonexistent-dir/x.bin", 2, 8, 2) == NULL);
    CHECK(rkm_trace_load(tmp_path("missing.bin")) == NULL);
}

static void test_malformed(void)
{
    size_t n = 0;
    char *good = rkm_read_file(tmp_path("rt.bin"), &n);
    CHECK(good && n > 40);
    if (!good) return;
    /* every truncation: fails cleanly or (at a record boundary) loads */
    int loaded = 0;
    for (size_t len = 0; len < n; len++) {
        rkm_trace *t = rkm_trace_parse(good, len);
        if (t) loaded++;
        else CHECK(rkm_last_error()[0] != 0);
        rkm_trace_free(t);
    }
    CHECK_EQ_INT(loaded, 100); /* the header alone and 99 record boundaries */
    /* specific corruptions */
    char *b = malloc(n);
    memcpy(b, good, n), b[0] = 'X';
    CHECK(rkm_trace_parse(b, n) == NULL && strstr(rkm_last_error(), "magic"));
    memcpy(b, good, n), b[8] = 3;
    CHECK(rkm_trace_parse(b, n) == NULL && strstr(rkm_last_error(), "version"));
    memcpy(b, good, n), b[8] = 0;
    CHECK(rkm_trace_parse(b, n) == NULL && strstr(rkm_last_error(), "version"));
    /* a prediction record is version 2's: in a version 1 file its flag is a bad layer */
    memcpy(b, good, n), b[32 + 5] = (char)0x80;
    rkm_trace *tp = rkm_trace_parse(b, n);
    CHECK(tp && tp->n_pred == 1 && tp->n_rec == 99 && tp->preds[0].at == 0);
    rkm_trace_free(tp);
    memcpy(b, good, n), b[8] = 1, b[32 + 5] = (char)0x80;
    CHECK(rkm_trace_parse(b, n) == NULL && strstr(rkm_last_error(), "bad record"));
    memcpy(b, good, n), b[8] = 1; /* version 1 without predictions still loads */
    tp = rkm_trace_parse(b, n);
    CHECK(tp && tp->n_rec == 100 && tp->n_pred == 0);
    rkm_trace_free(tp);
    memcpy(b, good, n), b[32 + 4] = 9; /* layer 9 of 5 */
    CHECK(rkm_trace_parse(b, n) == NULL && strstr(rkm_last_error(), "bad record"));
    memcpy(b, good, n), b[32 + 8] = 70; /* expert 70 of 64 */
    CHECK(rkm_trace_parse(b, n) == NULL && strstr(rkm_last_error(), "out of range"));
    memcpy(b, good, n), b[16] = 0, b[17] = 0; /* 0 experts */
    CHECK(rkm_trace_parse(b, n) == NULL);
    /* random byte mutations never crash */
    for (int it = 0; it < 2000; it++) {
        memcpy(b, good, n);
        for (int j = 0; j < 4; j++) b[rng((uint32_t)n)] = (char)rng(256);
        rkm_trace *t = rkm_trace_parse(b, n - rng(8));
        if (t) {
            rkm_sim_result r = {0};
            CHECK_EQ_INT(rkm_trace_simulate(t, RKM_SIM_BELADY, 3, &r), 0);
        }
        rkm_trace_free(t);
    }
    free(b);
    free(good);
}

/* Worked by hand, 2 slots, one expert per request:
 *   0 0 1 2 0  LRU: m h m m(evicts 0, used at t2 < t3) m -> 1 hit
 *              LFU: 2 evicts 1 (1 request vs 2) -> 0 hits -> 2 hits
 *              Belady: 2 evicts 1 (never used again) -> 2 hits
 * (Belady's optimality in general is checked by exhaustive search below.) */
static void test_hand_examples(void)
{
    int a[5] = {0, 0, 1, 2, 0};
    rkm_trace *t = make_trace(4, 1, 5, a, NULL);
    if (!t) return;
    CHECK_EQ_INT(sim_hits(t, RKM_SIM_LRU, 2), 1);
    CHECK_EQ_INT(sim_hits(t, RKM_SIM_LFU, 2), 2);
    CHECK_EQ_INT(sim_hits(t, RKM_SIM_BELADY, 2), 2);
    CHECK_EQ_INT(sim_hits(t, RKM_SIM_LRU, 3), 2); /* everything fits: only cold misses */
    rkm_sim_result r = {0};
    CHECK_EQ_INT(rkm_trace_simulate(t, RKM_SIM_LRU, 0, &r), RKM_EINVAL);
    rkm_trace_free(t);

    /* multi-expert request larger than the slots: processed in tiles */
    int b[6] = {0, 1, 2, 0, 1, 2};
    int cnt[2] = {3, 3};
    t = make_trace(4, 3, 2, b, cnt);
    if (!t) return;
    CHECK_EQ_INT(sim_hits(t, RKM_SIM_LRU, 3), 3);
    /* tiles {0,1},{2}: 2 evicts 0 (same age, lower id); then {0,1}: 1 hits
     * and is pinned, 0 evicts 2; {2}: evicts 0 -> one hit */
    CHECK_EQ_INT(sim_hits(t, RKM_SIM_LRU, 2), 1);
    rkm_trace_free(t);

    /* duplicates within a request count once */
    int d[4] = {3, 3, 3, 3};
    int dc[2] = {2, 2};
    t = make_trace(4, 2, 2, d, dc);
    if (!t) return;
    rkm_sim_result rr = sim(t, RKM_SIM_LFU, 1);
    CHECK_EQ_INT(rr.hits, 1);
    CHECK_EQ_INT(rr.misses, 1);
    rkm_trace_free(t);

    /* a prefill chunk's union (3 > top-2) then three decoded tokens, LRU
     * with 3 slots: {0,1,2} 3 misses; {0,1} 2 hits; {2,3} a hit, 3 evicts
     * 0 (ties to the lower id); {0,1} a hit, 0 evicts 2. The decode rate
     * counts the one-token requests only: 4 hits, 2 misses */
    int p[9] = {0, 1, 2, 0, 1, 2, 3, 0, 1};
    int pc[4] = {3, 2, 2, 2};
    t = make_trace(4, 2, 4, p, pc);
    if (!t) return;
    rkm_sim_result rp = sim(t, RKM_SIM_LRU, 3);
    CHECK_EQ_INT(rp.hits, 4);
    CHECK_EQ_INT(rp.misses, 5);
    CHECK_EQ_INT(rp.decode_hits, 4);
    CHECK_EQ_INT(rp.decode_misses, 2);
    rkm_trace_free(t);
}

/* The cross-layer pool (rkm_trace_simulate_pool, global): layer 0 cycles
 * over three experts, layer 1 asks for one. Two slots per layer thrash
 * layer 0; the same four slots shared hold all four experts, so only the
 * four first uses miss. Per-layer mode through the pool entry is the
 * plain simulation. */
static void test_global_pool(void)
{
    const char *p = tmp_path("g.bin");
    rkm_trace_writer *w = rkm_trace_writer_open(p, 2, 4, 1);
    CHECK(w != NULL);
    if (!w) return;
    for (int tok = 0; tok < 30; tok++) {
        int e0 = tok % 3, e1 = 3;
        CHECK_EQ_INT(rkm_trace_write(w, (uint32_t)tok, 0, &e0, 1), 0);
        CHECK_EQ_INT(rkm_trace_write(w, (uint32_t)tok, 1, &e1, 1), 0);
    }
    CHECK_EQ_INT(rkm_trace_writer_close(w), 0);
    rkm_trace *t = rkm_trace_load(p);
    CHECK(t != NULL);
    if (!t) return;
    for (int pol = RKM_SIM_LRU; pol <= RKM_SIM_BELADY; pol++) {
        rkm_sim_result a = {0}, b = {0}, g = {0};
        CHECK_EQ_INT(rkm_trace_simulate(t, pol, 2, &a), 0);
        CHECK_EQ_INT(rkm_trace_simulate_pool(t, pol, 2, 0, &b), 0);
        CHECK_EQ_INT(rkm_trace_simulate_pool(t, pol, 2, 1, &g), 0);
        CHECK_EQ_INT(a.hits, b.hits);
        CHECK_EQ_INT(a.misses, b.misses);
        CHECK_MSG(a.misses > 10, "%s per layer: %llu misses", rkm_sim_policy_name(pol),
                  (unsigned long long)a.misses);
        CHECK_EQ_INT(g.misses, 4);
        CHECK_EQ_INT(g.hits, 56);
    }
    rkm_trace_free(t);
}

/* Fewest misses over every eviction choice (single-expert requests). */
static int best_misses(const int *seq, int n, int pos, int slots, unsigned cached)
{
    if (pos == n) return 0;
    int e = seq[pos];
    if (cached & (1u << e)) return best_misses(seq, n, pos + 1, slots, cached);
    if (__builtin_popcount(cached) < slots) return 1 + best_misses(seq, n, pos + 1, slots, cached | (1u << e));
    int best = 1 << 30;
    for (int v = 0; v < 32; v++)
        if (cached & (1u << v)) {
            int m = best_misses(seq, n, pos + 1, slots, (cached & ~(1u << v)) | (1u << e));
            if (m < best) best = m;
        }
    return 1 + best;
}

static void test_belady_optimal(void)
{
    int checked = 0;
    for (int it = 0; it < 60; it++) {
        int ne = 4 + (int)rng(3), n = 10 + (int)rng(4), seq[16];
        for (int i = 0; i < n; i++) seq[i] = rng(4) == 0 ? (int)rng((uint32_t)ne) : (int)rng(3);
        rkm_trace *t = make_trace(ne, 1, n, seq, NULL);
        if (!t) return;
        for (int slots = 1; slots <= 3; slots++) {
            rkm_sim_result r = {0};
            CHECK_EQ_INT(rkm_trace_simulate(t, RKM_SIM_BELADY, slots, &r), 0);
            int opt = best_misses(seq, n, 0, slots, 0);
            CHECK_MSG((int)r.misses == opt, "belady %llu misses, optimum %d (slots %d)", (unsigned long long)r.misses,
                      opt, slots);
            checked++;
        }
        rkm_trace_free(t);
    }
    printf("belady optimal on %d small traces\n", checked);

    /* random multi-expert traces over two layers: Belady never worse */
    for (int it = 0; it < 20; it++) {
        const char *p = tmp_path("m.bin");
        int ne = 16, k = 4;
        rkm_trace_writer *w = rkm_trace_writer_open(p, 2, ne, k);
        for (int r = 0; r < 400; r++) {
            int ids[4], c = 0;
            while (c < k) {
                int e = rng(2) ? (int)rng(5) : (int)rng((uint32_t)ne), dup = 0;
                for (int j = 0; j < c; j++) dup |= ids[j] == e;
                if (!dup) ids[c++] = e;
            }
            rkm_trace_write(w, (uint32_t)(r / 2), r % 2, ids, k);
        }
        CHECK_EQ_INT(rkm_trace_writer_close(w), 0);
        rkm_trace *t = rkm_trace_load(p);
        if (!t) return;
        for (int slots = 4; slots <= 12; slots += 4) {
            uint64_t b = sim_hits(t, RKM_SIM_BELADY, slots);
            CHECK(b >= sim_hits(t, RKM_SIM_LRU, slots));
            CHECK(b >= sim_hits(t, RKM_SIM_LFU, slots));
        }
        /* with every expert cached only first uses miss, whatever the policy */
        int seen[2][16] = {{0}}, distinct = 0;
        for (int64_t r = 0; r < t->n_rec; r++)
            for (int i = 0; i < t->recs[r].n; i++) {
                int *sp = &seen[t->recs[r].layer][t->ids[t->recs[r].first + i]];
                distinct += !*sp;
                *sp = 1;
            }
        for (int pol = 0; pol < 3; pol++) CHECK_EQ_INT(sim_hits(t, pol, 16), 400 * 4 - distinct);
        rkm_trace_free(t);
    }
}

static void test_cli(void)
{
    int seq[5] = {0, 0, 1, 2, 0};
    rkm_trace *t = make_trace(4, 1, 5, seq, NULL);
    rkm_trace_free(t);
    const char *out = tmp_path("cli.json");
    int rc = test_rkmojo(out, "trace-sim %s --slots 2,3 --json", tmp_path("t.bin"));
    if (rc == 127 || rc == 126) {
        printf("rkmojo binary not built: CLI check skipped\n");
        return;
    }
    CHECK_EQ_INT(rc, 0);
    size_t n;
    char *s = rkm_read_file(out, &n);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    CHECK(j != NULL);
    cJSON *res = cJSON_GetObjectItem(j, "results");
    CHECK(cJSON_GetArraySize(res) == 2);
    cJSON *r0 = cJSON_GetArrayItem(res, 0);
    CHECK_EQ_INT(cJSON_GetObjectItem(r0, "slots")->valueint, 2);
    CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "lru"), "hits")->valueint, 1);
    CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "lfu"), "hits")->valueint, 2);
    CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "belady"), "hits")->valueint, 2);
    cJSON_Delete(j);
    free(s);
    CHECK(test_rkmojo(NULL, "trace-sim %s --slots 0", tmp_path("t.bin")) == 2);
    CHECK(test_rkmojo(NULL, "trace-sim %s", tmp_path("missing.bin")) == 1);
    rc = test_rkmojo(out, "trace-sim %s --slots 2 --per-layer", tmp_path("t.bin"));
    CHECK_EQ_INT(rc, 0);
    s = rkm_read_file(out, &n);
    CHECK(s && strstr(s, "belady") && strstr(s, "20.0%") && strstr(s, "40.0%") && strstr(s, "layer 1"));
    free(s);
    /* --global through the CLI: the pool trace, four cold misses of 60 */
    rc = test_rkmojo(out, "trace-sim %s --slots 2 --global --json", tmp_path("g.bin"));
    CHECK_EQ_INT(rc, 0);
    s = rkm_read_file(out, &n);
    j = s ? cJSON_Parse(s) : NULL;
    CHECK(j && cJSON_IsTrue(cJSON_GetObjectItem(j, "global")));
    r0 = j ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "results"), 0) : NULL;
    CHECK(r0 && cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "lfu"), "misses")->valueint == 4);
    cJSON_Delete(j);
    free(s);
}

int main(void)
{
    test_roundtrip();
    test_malformed();
    test_hand_examples();
    test_global_pool();
    test_belady_optimal();
    test_cli();
    return test_done();
}
