/*
 * cache_policy.c - the expert cache's victim choice and LFU aging
 * (cache_policy.h). Pure functions on the caller's arrays: no state, no
 * allocation, no locks (callers hold their own: expert_cache_slots.c's c->mu).
 */
#include "runtime/cache_policy.h"

#include <stddef.h>

/* 1 if a was used before b; equal ticks end on the layer, then the id. */
static int used_before(const rkm_policy_slot *a, const rkm_policy_slot *b)
{
    if (a->last_use != b->last_use) return a->last_use < b->last_use;
    if (a->layer != b->layer) return a->layer < b->layer;
    return a->expert < b->expert;
}

/* 1 if a is the better victim than b (both hold an expert). */
static int better_victim(int policy, const rkm_policy_slot *a, const rkm_policy_slot *b)
{
    if (policy == RKM_CACHE_LFU && a->freq != b->freq) return a->freq < b->freq;
    return used_before(a, b);
}

int rkm_cache_policy_victim(int policy, const rkm_policy_slot *slots, int n)
{
    int best = -1;
    for (int s = 0; slots && s < n; s++) {
        const rkm_policy_slot *sl = &slots[s];
        if (sl->busy) continue;
        if (sl->expert < 0) return s;
        if (best < 0 || better_victim(policy, sl, &slots[best])) best = s;
    }
    return best;
}

void rkm_cache_policy_age(uint64_t *freq, int n_expert, uint64_t *n_req)
{
    if (++*n_req % RKM_LFU_AGE) return;
    for (int e = 0; freq && e < n_expert; e++) freq[e] >>= 1;
}
