/*
 * hash_avx512.c - XXH3-64 of one buffer with 512-bit AVX-512 accumulators (Debian's
 * libxxhash-dev header, inlined; the vector width comes from this file's
 * flags, see the Makefile's per-ISA rules). util/hash.c calls it when the
 * CPU has the instructions; the result is the same hash as every other
 * width's. Thread-safe (no state).
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/common.h"

uint64_t rkm_hash_avx512(const void *p, size_t n);
uint64_t rkm_hash_avx512(const void *p, size_t n) { return XXH3_64bits(p, n); }
