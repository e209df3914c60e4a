/*
 * test-util.c - util's containers and codecs: the growable buffer (appends,
 * printf, consume, take, the NUL after the data, growth across many
 * doublings), the arena (alignment, large one-off blocks, reuse after free)
 * and base64 (RFC 4648 test vectors both ways, every length 0..64 round
 * trip, bad characters and lengths refused), and the knob registry (every
 * knob documented, names unique; values read from the environment once,
 * overridden and unset through the registry, integers and words).
 */
#include <stdint.h>

#include "common/test.h"
#include "util/arena.h"
#include "util/base64.h"
#include "util/common.h"
#include "util/sha256.h"
#include "util/buf.h"
#include "util/knobs.h"

static void test_buf(void)
{
    rkm_buf b = RKM_BUF_INIT;
    rkm_buf_adds(&b, "abc");
    rkm_buf_addc(&b, '-');
    rkm_buf_addf(&b, "%d/%s", 42, "x");
    CHECK(rkm_buf_ok(&b));
    CHECK_EQ_INT(b.len, 8);
    CHECK(!strcmp(b.data, "abc-42/x"));
    rkm_buf_consume(&b, 4);
    CHECK(!strcmp(b.data, "42/x"));
    rkm_buf_consume(&b, 100);
    CHECK_EQ_INT(b.len, 0);
    CHECK(b.data && b.data[0] == 0);
    for (int i = 0; i < 100000; i++) rkm_buf_addc(&b, (char)('a' + i % 26));
    CHECK_EQ_INT(b.len, 100000);
    CHECK(b.data[99999] == (char)('a' + 99999 % 26) && b.data[100000] == 0);
    rkm_buf_clear(&b);
    CHECK_EQ_INT(b.len, 0);
    rkm_buf_add(&b, "\0z", 2); /* binary data keeps its NULs */
    CHECK_EQ_INT(b.len, 2);
    CHECK(b.data[1] == 'z');
    char *s = rkm_buf_take(&b);
    CHECK(s && s[1] == 'z' && s[2] == 0);
    CHECK(b.data == NULL && b.len == 0);
    free(s);
    s = rkm_buf_take(&b); /* empty: "" not NULL */
    CHECK(s && !*s);
    free(s);
    /* a huge request fails cleanly and sticks */
    rkm_buf_adds(&b, "x");
    CHECK_EQ_INT(rkm_buf_reserve(&b, SIZE_MAX - 4), -1);
    CHECK(!rkm_buf_ok(&b));
    rkm_buf_adds(&b, "y");
    CHECK(rkm_buf_take(&b) == NULL);
    rkm_buf_free(&b);
}

static void test_arena(void)
{
    rkm_arena a = {0};
    a.block_bytes = 256;
    char *small[64];
    for (int i = 0; i < 64; i++) {
        small[i] = rkm_arena_alloc(&a, (size_t)i + 1);
        CHECK(small[i] && ((uintptr_t)small[i] & 15) == 0);
        memset(small[i], i, (size_t)i + 1);
    }
    char *big = rkm_arena_calloc(&a, 10000);
    CHECK(big && big[0] == 0 && big[9999] == 0);
    char *after = rkm_arena_alloc(&a, 8); /* the small block is still used */
    CHECK(after != NULL);
    int intact = 1;
    for (int i = 0; i < 64; i++)
        for (int k = 0; k <= i; k++) intact &= small[i][k] == (char)i;
    CHECK(intact);
    char *d = rkm_arena_strndup(&a, "hello world", 5);
    CHECK(d && !strcmp(d, "hello"));
    CHECK(a.total_bytes >= 10000);
    rkm_arena_free(&a);
    CHECK(a.head == NULL && a.total_bytes == 0);
    CHECK(rkm_arena_alloc(&a, 1) != NULL); /* usable again */
    rkm_arena_free(&a);
}

static void test_base64(void)
{
    static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *e = rkm_base64_encode(plain[i], strlen(plain[i]));
        CHECK_MSG(e && !strcmp(e, enc[i]), "encode %s", plain[i]);
        free(e);
        unsigned char *o;
        size_t n;
        CHECK_EQ_INT(rkm_base64_decode(enc[i], strlen(enc[i]), &o, &n), 0);
        CHECK(n == strlen(plain[i]) && !memcmp(o, plain[i], n));
        free(o);
    }
    unsigned char bytes[64];
    for (int i = 0; i < 64; i++) bytes[i] = (unsigned char)(i * 37 + 200);
    for (size_t n = 0; n <= 64; n++) {
        char *e = rkm_base64_encode(bytes, n);
        unsigned char *o = NULL;
        size_t m = 0;
        CHECK(e && strlen(e) == (n + 2) / 3 * 4);
        CHECK(e && rkm_base64_decode(e, strlen(e), &o, &m) == 0 && m == n && !memcmp(o, bytes, n));
        free(e);
        free(o);
    }
    unsigned char *o = (unsigned char *)"x";
    size_t n = 1;
    CHECK_EQ_INT(rkm_base64_decode("Zm9v!A==", 8, &o, &n), -1);
    CHECK(o == NULL && n == 0);
    CHECK_EQ_INT(rkm_base64_decode("Zm9vY", 5, &o, &n), -1); /* 4k+1 symbols */
    CHECK_EQ_INT(rkm_base64_decode("Zm9vYg", 6, &o, &n), 0);  /* padding optional */
    CHECK(n == 4 && !memcmp(o, "foob", 4));
    free(o);
}

static void test_knobs(void)
{
    for (int i = 0; i < RKM_KNOB_COUNT; i++) {
        const rkm_knob_info *k = rkm_knob_info_of(i);
        CHECK_MSG(k && k->name && k->type && k->def && k->doc && k->doc[0], "knob %d undocumented", i);
        for (int j = 0; k && j < i; j++) CHECK(strcmp(k->name, rkm_knob_info_of(j)->name));
    }
    CHECK(rkm_knob_info_of(RKM_KNOB_COUNT) == NULL && rkm_knob_info_of(-1) == NULL);
    setenv("RKM_SPIN_US", "250", 1);
    setenv("RKM_PIN", "1", 1);
    unsetenv("RKM_VERIFY");
    rkm_knobs_reload();
    CHECK_EQ_INT(rkm_knob_int(RKM_KNOB_SPIN_US, 7), 250);
    CHECK(rkm_knob_is(RKM_KNOB_PIN, "1") && !rkm_knob_is(RKM_KNOB_PIN, "0"));
    CHECK(rkm_knob(RKM_KNOB_VERIFY) == NULL && rkm_knob_int(RKM_KNOB_VERIFY, 7) == 7);
    /* read once: a later change of the environment is not seen until a reload */
    setenv("RKM_SPIN_US", "999", 1);
    CHECK_EQ_INT(rkm_knob_int(RKM_KNOB_SPIN_US, 7), 250);
    CHECK_EQ_INT(rkm_knob_set(RKM_KNOB_SPIN_US, "0x10"), 0);
    CHECK_EQ_INT(rkm_knob_int(RKM_KNOB_SPIN_US, 7), 16);
    CHECK_EQ_INT(rkm_knob_set(RKM_KNOB_SPIN_US, "fast"), 0);
    CHECK_EQ_INT(rkm_knob_int(RKM_KNOB_SPIN_US, 7), 7); /* not a number: the default */
    CHECK_EQ_INT(rkm_knob_set(RKM_KNOB_SPIN_US, NULL), 0);
    CHECK(rkm_knob(RKM_KNOB_SPIN_US) == NULL);
    CHECK_EQ_INT(rkm_knob_set(RKM_KNOB_PIN, ""), 0); /* empty is unset */
    CHECK(rkm_knob(RKM_KNOB_PIN) == NULL);
    CHECK(rkm_knob_set(RKM_KNOB_COUNT, "x") == RKM_EINVAL);
    rkm_knobs_reload();
    CHECK_EQ_INT(rkm_knob_int(RKM_KNOB_SPIN_US, 7), 999);
    unsetenv("RKM_SPIN_US");
    unsetenv("RKM_PIN");
    rkm_knobs_reload();
}

/* SHA-256: FIPS 180-4's examples, a million 'a', every split of a
 * message into two updates, and a saved state resumed; with each block
 * function this CPU has (test_sha256_impls). */
static void test_sha256_vectors(void)
{
    static const struct {
        const char *msg, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const size_t n = strlen(v[i].msg);
        for (size_t cut = 0; cut <= n; cut++) {
            rkm_sha256 s;
            rkm_sha256_init(&s);
            rkm_sha256_update(&s, v[i].msg, cut);
            char st[RKM_SHA256_STATE_CHARS];
            rkm_sha256_save(&s, st);
            rkm_sha256 r;
            CHECK(rkm_sha256_load(&r, st) == 0);
            rkm_sha256_update(&r, v[i].msg + cut, n - cut);
            rkm_sha256_final(&r, hex);
            CHECK(!strcmp(hex, v[i].hex));
        }
    }
    rkm_sha256 s;
    rkm_sha256_init(&s);
    char a[1000];
    memset(a, 'a', sizeof a);
    for (int i = 0; i < 1000; i++) rkm_sha256_update(&s, a, sizeof a);
    rkm_sha256_final(&s, hex);
    CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    rkm_sha256 r;
    CHECK(rkm_sha256_load(&r, "nothex") == -1);
    CHECK(rkm_sha256_load(&r, "6a09e667bb67ae853c6ef372a54ff53a510e527f9b05688c1f83d9ab5be0cd19:3:61") == -1);
}

static void digest_of(const uint8_t *p, size_t n, size_t step, char hex[65])
{
    rkm_sha256 s;
    rkm_sha256_init(&s);
    for (size_t i = 0; i < n; i += step) rkm_sha256_update(&s, p + i, n - i < step ? n - i : step);
    rkm_sha256_final(&s, hex);
}

/* The vectors with each block function the CPU has (the instructions are
 * the default where present: x86 SHA-NI, ARMv8 SHA2), and every function
 * giving the portable one's digests of pseudo-random messages of 0..700
 * bytes, hashed whole and in pieces of 1, 63 and 200 bytes. */
static void test_sha256(void)
{
    const char *dflt = rkm_sha256_name(), *names[] = {"portable", "sha-ni", "armv8"};
    printf("sha256: %s by default\n", dflt);
    CHECK(rkm_sha256_select("none") == -1);
    static uint8_t msg[700];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof msg; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        msg[i] = (uint8_t)x;
    }
    int n_impl = 0, bad = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        if (rkm_sha256_select(names[k]) != 0) continue;
        n_impl++;
        CHECK(!strcmp(rkm_sha256_name(), names[k]));
        test_sha256_vectors();
        for (size_t n = 0; n <= sizeof msg; n += n < 140 ? 1 : 37) {
            static const size_t steps[] = {700, 1, 63, 200};
            char want[65], got[65];
            rkm_sha256_select("portable");
            digest_of(msg, n, 700, want);
            rkm_sha256_select(names[k]);
            for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++) {
                digest_of(msg, n, steps[si], got);
                bad += strcmp(want, got) != 0;
            }
        }
    }
    CHECK_MSG(bad == 0, "sha256: %d digests differ from the portable function's", bad);
#if defined(__x86_64__) || defined(__aarch64__)
    /* where the instructions exist (this CI's hosts, qemu -cpu max), they are the default */
    if (n_impl > 1) CHECK(strcmp(dflt, "portable") != 0);
#endif
    CHECK(n_impl >= 1 && rkm_sha256_select(dflt) == 0);
}

int main(void)
{
    test_sha256();
    test_buf();
    test_arena();
    test_base64();
    test_knobs();
    return test_done();
}
