/*
 * sha256.c - see sha256.h. The compression function as FIPS 180-4 states
 * it, one 64-byte block at a time (portable), or with the CPU's SHA-256
 * instructions (x86 SHA-NI, ARMv8 SHA2), chosen once from the CPU's
 * features; all three give the same digest.
 *
 * Threads: the choice is made by the first caller (an idempotent store
 * any thread may repeat); contexts are per thread.
 */
#include "util/sha256.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_SHA2
#define HWCAP_SHA2 (1 << 6)
#endif
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int k) { return (x >> k) | (x << (32 - k)); }

static void block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        const uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        const uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        const uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

static void blocks_portable(uint32_t h[8], const uint8_t *p, size_t nb)
{
    for (; nb; nb--, p += 64) block(h, p);
}

#if defined(__x86_64__)
/* SHA-NI: the state as the instructions take it, ABEF and CDGH (A in the
 * top lane); sha256rnds2 does two rounds from the low two words of
 * W + K, sha256msg1 / msg2 extend the message four words at a time. */
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_shani(uint32_t h[8], const uint8_t *p, size_t nb)
{
    const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)h), 0xB1);      /* B A D C */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(h + 4)), 0x1B); /* H G F E */
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                          /* F E B A */
    s1 = _mm_blend_epi16(s1, t, 0xF0);                                               /* H G D C */
    for (; nb; nb--, p += 64) {
        const __m128i a0 = s0, a1 = s1;
        __m128i m[4];
        for (int j = 0; j < 16; j++) {
            if (j < 4) m[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), bswap);
            __m128i wk = _mm_add_epi32(m[j & 3], _mm_loadu_si128((const __m128i *)(K + 4 * j)));
            s1 = _mm_sha256rnds2_epu32(s1, s0, wk);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(wk, 0x0E));
            if (j >= 3 && j < 15) { /* W[4j + 4 ..]: into the register of W[4j - 12 ..] */
                const int n = (j + 1) & 3;
                __m128i x = _mm_add_epi32(_mm_sha256msg1_epu32(m[n], m[(j + 2) & 3]), _mm_alignr_epi8(m[j & 3], m[(j + 3) & 3], 4));
                m[n] = _mm_sha256msg2_epu32(x, m[j & 3]);
            }
        }
        s0 = _mm_add_epi32(s0, a0);
        s1 = _mm_add_epi32(s1, a1);
    }
    t = _mm_shuffle_epi32(s0, 0x1B);  /* A B E F */
    s1 = _mm_shuffle_epi32(s1, 0xB1); /* G H C D */
    _mm_storeu_si128((__m128i *)h, _mm_blend_epi16(t, s1, 0xF0));
    _mm_storeu_si128((__m128i *)(h + 4), _mm_alignr_epi8(s1, t, 8));
}

static int have_hw(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}
#define HW_NAME "sha-ni"
#define HW_BLOCKS blocks_shani
#elif defined(__aarch64__)
/* ARMv8 SHA2: sha256h / sha256h2 do four rounds on ABCD and EFGH,
 * sha256su0 / su1 extend the message four words at a time. */
__attribute__((target("+crypto"))) static void blocks_armv8(uint32_t h[8], const uint8_t *p, size_t nb)
{
    uint32x4_t abcd = vld1q_u32(h), efgh = vld1q_u32(h + 4);
    for (; nb; nb--, p += 64) {
        const uint32x4_t a0 = abcd, e0 = efgh;
        uint32x4_t m[4];
        for (int j = 0; j < 4; j++) m[j] = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(p + 16 * j)));
        for (int j = 0; j < 16; j++) {
            const uint32x4_t wk = vaddq_u32(m[j & 3], vld1q_u32(K + 4 * j)), prev = abcd;
            abcd = vsha256hq_u32(abcd, efgh, wk);
            efgh = vsha256h2q_u32(efgh, prev, wk);
            if (j < 12) m[j & 3] = vsha256su1q_u32(vsha256su0q_u32(m[j & 3], m[(j + 1) & 3]), m[(j + 2) & 3], m[(j + 3) & 3]);
        }
        abcd = vaddq_u32(abcd, a0);
        efgh = vaddq_u32(efgh, e0);
    }
    vst1q_u32(h, abcd);
    vst1q_u32(h + 4, efgh);
}

static int have_hw(void) { return (getauxval(AT_HWCAP) & HWCAP_SHA2) != 0; }
#define HW_NAME "armv8"
#define HW_BLOCKS blocks_armv8
#endif

typedef void (*blocks_fn)(uint32_t h[8], const uint8_t *p, size_t nb);
static blocks_fn blocks_impl; /* NULL: not chosen yet */
static const char *impl_name;

static blocks_fn impl(void)
{
    blocks_fn f = __atomic_load_n(&blocks_impl, __ATOMIC_ACQUIRE);
    if (f) return f;
#ifdef HW_NAME
    if (rkm_sha256_select(HW_NAME) == 0) return HW_BLOCKS; /* it checks the CPU */
#endif
    rkm_sha256_select("portable");
    return blocks_portable;
}

int rkm_sha256_select(const char *name)
{
    blocks_fn f = NULL;
    if (!strcmp(name, "portable")) f = blocks_portable, name = "portable";
#ifdef HW_NAME
    else if (!strcmp(name, HW_NAME) && have_hw()) f = HW_BLOCKS, name = HW_NAME;
#endif
    if (!f) return -1;
    __atomic_store_n(&impl_name, name, __ATOMIC_RELAXED);
    __atomic_store_n(&blocks_impl, f, __ATOMIC_RELEASE);
    return 0;
}

const char *rkm_sha256_name(void)
{
    impl();
    return __atomic_load_n(&impl_name, __ATOMIC_RELAXED);
}

void rkm_sha256_init(rkm_sha256 *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->n = 0;
}

void rkm_sha256_update(rkm_sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    size_t have = (size_t)(s->n % 64);
    s->n += n;
    if (have) {
        size_t k = 64 - have < n ? 64 - have : n;
        memcpy(s->buf + have, p, k);
        p += k;
        n -= k;
        if (have + k < 64) return;
        impl()(s->h, s->buf, 1);
    }
    if (n >= 64) impl()(s->h, p, n / 64);
    p += n / 64 * 64;
    memcpy(s->buf, p, n % 64);
}

void rkm_sha256_final(rkm_sha256 *s, char hex[65])
{
    const uint64_t bits = s->n * 8;
    static const uint8_t pad[64] = {0x80};
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    rkm_sha256_update(s, pad, (size_t)(s->n % 64 < 56 ? 56 - s->n % 64 : 120 - s->n % 64));
    rkm_sha256_update(s, len, 8);
    for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", s->h[i]);
}

void rkm_sha256_save(const rkm_sha256 *s, char *out)
{
    int k = 0;
    for (int i = 0; i < 8; i++) k += sprintf(out + k, "%08x", s->h[i]);
    k += sprintf(out + k, ":%llu:", (unsigned long long)s->n);
    for (size_t i = 0; i < s->n % 64; i++) k += sprintf(out + k, "%02x", s->buf[i]);
}

int rkm_sha256_load(rkm_sha256 *s, const char *t)
{
    rkm_sha256 v;
    unsigned long long n;
    int used = 0;
    for (int i = 0; i < 8; i++) {
        unsigned x;
        if (sscanf(t + 8 * i, "%8x", &x) != 1) return -1;
        v.h[i] = x;
    }
    if (sscanf(t + 64, ":%llu:%n", &n, &used) != 1 || !used) return -1;
    v.n = n;
    const char *b = t + 64 + used;
    if (strlen(b) != 2 * (size_t)(n % 64)) return -1;
    for (size_t i = 0; i < n % 64; i++) {
        unsigned x;
        if (sscanf(b + 2 * i, "%2x", &x) != 1) return -1;
        v.buf[i] = (uint8_t)x;
    }
    *s = v;
    return 0;
}
