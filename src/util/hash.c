/*
 * hash.c - checksums of the .rkmojo format: XXH3-64 from Debian's
 * libxxhash-dev, used header-only (XXH_INLINE_ALL) so the binaries need no
 * extra shared library (and cross builds need no arm64 libxxhash).
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/common.h"

struct rkm_hasher {
    XXH3_state_t st;
};

uint64_t rkm_hash(const void *p, size_t n) { return XXH3_64bits(p, n); }

rkm_hasher *rkm_hasher_new(void)
{
    rkm_hasher *h = rkm_alloc_aligned(sizeof *h, 64);
    if (h) XXH3_64bits_reset(&h->st);
    return h;
}

void rkm_hasher_update(rkm_hasher *h, const void *p, size_t n) { XXH3_64bits_update(&h->st, p, n); }
uint64_t rkm_hasher_digest(rkm_hasher *h) { return XXH3_64bits_digest(&h->st); }
void rkm_hasher_free(rkm_hasher *h) { rkm_free_aligned(h); }
