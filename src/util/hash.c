/*
 * hash.c - checksums of the .rkmojo format: XXH3-64 from Debian's
 * libxxhash-dev, used header-only (XXH_INLINE_ALL) so the binaries need no
 * extra shared library (and cross builds need no arm64 libxxhash).
 *
 * rkm_hash (one buffer: every expert blob read is verified with it, on the
 * IO threads) picks the widest vector code the CPU runs, once: on x86-64
 * util/x86/hash_avx512.c or hash_avx2.c when the CPU has them (this file is
 * built for baseline SSE2), on aarch64 NEON (baseline). XXH3 gives the same
 * value at every width; RKM_HASH=sse2|avx2|avx512 forces one (tests, A/B).
 * The streaming hasher (convert, synth) stays at the baseline width.
 * Threads: any; the choice is made under pthread_once.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <pthread.h>
#include <string.h>

#include "util/common.h"
#include "util/knobs.h"

struct rkm_hasher {
    XXH3_state_t st;
};

static uint64_t hash_base(const void *p, size_t n) { return XXH3_64bits(p, n); }

#if defined(__x86_64__)
uint64_t rkm_hash_avx2(const void *p, size_t n);
uint64_t rkm_hash_avx512(const void *p, size_t n);
#endif

static uint64_t (*hash_fn)(const void *, size_t) = hash_base;
static const char *hash_name = "base";
static pthread_once_t hash_once = PTHREAD_ONCE_INIT;

static void hash_pick(void)
{
#if defined(__x86_64__)
    const char *e = rkm_knob(RKM_KNOB_HASH);
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2"), avx512 = __builtin_cpu_supports("avx512f");
    if (e && !strcmp(e, "sse2")) return;
    if (avx512 && !(e && !strcmp(e, "avx2"))) {
        hash_fn = rkm_hash_avx512;
        hash_name = "avx512";
    } else if (avx2) {
        hash_fn = rkm_hash_avx2;
        hash_name = "avx2";
    }
#endif
}

uint64_t rkm_hash(const void *p, size_t n)
{
    pthread_once(&hash_once, hash_pick);
    return hash_fn(p, n);
}

const char *rkm_hash_impl(void)
{
    pthread_once(&hash_once, hash_pick);
    return hash_name;
}

rkm_hasher *rkm_hasher_new(void)
{
    rkm_hasher *h = rkm_alloc_aligned(sizeof *h, 64);
    if (h) XXH3_64bits_reset(&h->st);
    return h;
}

void rkm_hasher_update(rkm_hasher *h, const void *p, size_t n) { XXH3_64bits_update(&h->st, p, n); }
uint64_t rkm_hasher_digest(rkm_hasher *h) { return XXH3_64bits_digest(&h->st); }
void rkm_hasher_free(rkm_hasher *h) { rkm_free_aligned(h); }
