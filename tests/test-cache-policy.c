/*
 * test-cache-policy.c - the expert cache's victim choice and LFU aging
 * (runtime/cache_policy.c), which the live cache and trace-sim share:
 * free slots first, busy slots never, LRU and LFU orders with their
 * tie-breaks independent of slot positions, and the aging period.
 */
#include "common/test.h"
#include "runtime/cache_policy.h"
#include "util/common.h"

#define S(l, e, b, f, t) ((rkm_policy_slot){.layer = (l), .expert = (e), .busy = (b), .freq = (f), .last_use = (t)})

static void test_free_and_busy(void)
{
    for (int pol = 0; pol < 2; pol++) {
        CHECK_EQ_INT(rkm_cache_policy_victim(pol, NULL, 4), -1);
        rkm_policy_slot none[1] = {S(1, 0, 0, 0, 0)};
        CHECK_EQ_INT(rkm_cache_policy_victim(pol, none, 0), -1);
        /* a free slot wins over any held one, the first free one */
        rkm_policy_slot a[4] = {S(1, 2, 0, 0, 1), S(-1, -1, 1, 0, 0), S(-1, -1, 0, 0, 0), S(-1, -1, 0, 0, 0)};
        CHECK_EQ_INT(rkm_cache_policy_victim(pol, a, 4), 2);
        /* everything pinned or being read: none */
        rkm_policy_slot b[3] = {S(1, 0, 1, 0, 1), S(1, 1, 1, 0, 2), S(-1, -1, 1, 0, 0)};
        CHECK_EQ_INT(rkm_cache_policy_victim(pol, b, 3), -1);
        /* the best candidate is busy: the next best */
        rkm_policy_slot c[3] = {S(1, 0, 0, 5, 9), S(1, 1, 1, 0, 1), S(1, 2, 0, 4, 8)};
        CHECK_EQ_INT(rkm_cache_policy_victim(pol, c, 3), 2);
    }
}

static void test_lru(void)
{
    /* least recently used, whatever the counts */
    rkm_policy_slot a[4] = {S(1, 0, 0, 1, 7), S(1, 1, 0, 9, 3), S(1, 2, 0, 0, 5), S(1, 3, 0, 2, 4)};
    CHECK_EQ_INT(rkm_cache_policy_victim(RKM_CACHE_LRU, a, 4), 1);
    /* equal ticks: the lower layer, then the lower id, wherever they sit */
    rkm_policy_slot b[4] = {S(3, 1, 0, 0, 2), S(1, 7, 0, 0, 2), S(1, 4, 0, 0, 2), S(3, 0, 0, 0, 2)};
    CHECK_EQ_INT(rkm_cache_policy_victim(RKM_CACHE_LRU, b, 4), 2);
    rkm_policy_slot c[4] = {S(1, 4, 0, 0, 2), S(3, 0, 0, 0, 2), S(1, 7, 0, 0, 2), S(3, 1, 0, 0, 2)};
    CHECK_EQ_INT(rkm_cache_policy_victim(RKM_CACHE_LRU, c, 4), 0);
    rkm_policy_slot d[3] = {S(3, 9, 0, 0, 2), S(3, 8, 0, 0, 2), S(3, 5, 0, 0, 2)};
    CHECK_EQ_INT(rkm_cache_policy_victim(RKM_CACHE_LRU, d, 3), 2);
}

static void test_lfu(void)
{
    /* fewest requests, whatever the recency */
    rkm_policy_slot a[4] = {S(1, 0, 0, 4, 1), S(1, 1, 0, 2, 9), S(1, 2, 0, 3, 2), S(1, 3, 0, 2, 10)};
    CHECK_EQ_INT(rkm_cache_policy_victim(RKM_CACHE_LFU, a, 4), 1);
    /* equal counts: the least recent, then the lower layer, then the id */
    rkm_policy_slot b[4] = {S(1, 0, 0, 2, 6), S(3, 5, 0, 2, 4), S(1, 9, 0, 2, 4), S(1, 1, 0, 7, 0)};
    CHECK_EQ_INT(rkm_cache_policy_victim(RKM_CACHE_LFU, b, 4), 2);
    rkm_policy_slot c[3] = {S(3, 5, 0, 2, 4), S(3, 2, 0, 2, 4), S(3, 3, 0, 2, 4)};
    CHECK_EQ_INT(rkm_cache_policy_victim(RKM_CACHE_LFU, c, 3), 1);
    /* counts compare across layers in a shared pool */
    rkm_policy_slot d[3] = {S(0, 1, 0, 3, 1), S(5, 1, 0, 1, 8), S(2, 0, 0, 2, 2)};
    CHECK_EQ_INT(rkm_cache_policy_victim(RKM_CACHE_LFU, d, 3), 1);
    CHECK_EQ_INT(rkm_cache_policy_victim(RKM_CACHE_LRU, d, 3), 0);
}

/* Every order of the same slots gives the same expert. */
static void test_position_independent(void)
{
    rkm_policy_slot base[5] = {S(1, 3, 0, 2, 5), S(2, 3, 0, 2, 5), S(1, 2, 0, 2, 5), S(1, 8, 0, 1, 6),
                               S(2, 0, 0, 3, 5)};
    static const int perms[][5] = {{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}, {3, 4, 0, 2, 1}};
    for (size_t p = 0; p < RKM_ARRAY_LEN(perms); p++) {
        rkm_policy_slot s[5];
        for (int i = 0; i < 5; i++) s[i] = base[perms[p][i]];
        int v = rkm_cache_policy_victim(RKM_CACHE_LRU, s, 5);
        CHECK(v >= 0 && s[v].layer == 1 && s[v].expert == 2);
        v = rkm_cache_policy_victim(RKM_CACHE_LFU, s, 5);
        CHECK(v >= 0 && s[v].layer == 1 && s[v].expert == 8);
    }
}

static void test_aging(void)
{
    uint64_t freq[4] = {5, 1, 64, 0}, n_req = 0;
    for (int r = 1; r < RKM_LFU_AGE; r++) rkm_cache_policy_age(freq, 4, &n_req);
    CHECK_EQ_INT(n_req, RKM_LFU_AGE - 1);
    CHECK(freq[0] == 5 && freq[1] == 1 && freq[2] == 64 && freq[3] == 0);
    rkm_cache_policy_age(freq, 4, &n_req); /* the 64th request halves */
    CHECK_EQ_INT(n_req, RKM_LFU_AGE);
    CHECK(freq[0] == 2 && freq[1] == 0 && freq[2] == 32 && freq[3] == 0);
    for (int r = 0; r < RKM_LFU_AGE - 1; r++) rkm_cache_policy_age(freq, 4, &n_req);
    CHECK_EQ_INT(freq[2], 32);
    rkm_cache_policy_age(freq, 4, &n_req);
    CHECK_EQ_INT(freq[2], 16);
    CHECK_EQ_INT(freq[0], 1);
    CHECK_EQ_INT(RKM_LFU_AGE, 64);
    /* only the given counts */
    uint64_t two[3] = {8, 8, 8}, n2 = RKM_LFU_AGE - 1;
    rkm_cache_policy_age(two, 2, &n2);
    CHECK(two[0] == 4 && two[1] == 4 && two[2] == 8);
}

int main(void)
{
    test_free_and_busy();
    test_lru();
    test_lfu();
    test_position_independent();
    test_aging();
    return test_done();
}
