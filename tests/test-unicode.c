/*
 * test-unicode.c - the Unicode module (text/unicode.h): UTF-8 encode and
 * decode against an independent bit-level encoding for every scalar value,
 * rejection of overlong forms, surrogates, values past U+10FFFF, stray
 * continuation bytes and truncated sequences, rkm_utf8_valid_prefix and
 * rkm_utf8_seq_len; category flags, combining classes, lowercase, Mn and
 * assigned lookups at known code points; the four normalization forms on
 * strings whose results the Unicode standard fixes (composition,
 * decomposition, Hangul, canonical reordering, compatibility mappings).
 */
#include <stdint.h>

#include "common/test.h"
#include "text/unicode.h"

/* The UTF-8 bytes of cp by the definition in RFC 3629 (the reference the
 * encoder is compared with). */
static int ref_encode(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const unsigned char lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (int i = n - 1; i > 0; i--) {
        out[i] = (unsigned char)(0x80 | (cp & 0x3F));
        cp >>= 6;
    }
    out[0] = (unsigned char)(lead[n] | cp);
    return n;
}

static void test_round_trip(void)
{
    long bad_encode = 0, bad_decode = 0, bad_prefix = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        unsigned char want[4];
        int wn = ref_encode(cp, want);
        char got[4];
        int n = rkm_utf8_encode(cp, got);
        if (n != wn || memcmp(got, want, (size_t)n)) bad_encode++;
        uint32_t back = 0xFFFFFFFFu;
        if (rkm_utf8_decode(got, (size_t)n, &back) != n || back != cp) bad_decode++;
        if (rkm_utf8_valid_prefix(got, (size_t)n) != (size_t)n || rkm_utf8_seq_len((unsigned char)got[0]) != n)
            bad_prefix++;
        /* one byte short is never a whole sequence */
        if (n > 1 && rkm_utf8_decode(got, (size_t)n - 1, &back) != 0) bad_decode++;
    }
    CHECK_EQ_INT(bad_encode, 0);
    CHECK_EQ_INT(bad_decode, 0);
    CHECK_EQ_INT(bad_prefix, 0);

    /* the boundaries by hand */
    char u[4];
    CHECK_EQ_INT(rkm_utf8_encode(0x7F, u), 1);
    CHECK_EQ_INT(rkm_utf8_encode(0x80, u), 2);
    CHECK(!memcmp(u, "\xC2\x80", 2));
    CHECK_EQ_INT(rkm_utf8_encode(0x7FF, u), 2);
    CHECK(!memcmp(u, "\xDF\xBF", 2));
    CHECK_EQ_INT(rkm_utf8_encode(0x800, u), 3);
    CHECK(!memcmp(u, "\xE0\xA0\x80", 3));
    CHECK_EQ_INT(rkm_utf8_encode(0x20AC, u), 3);
    CHECK(!memcmp(u, "\xE2\x82\xAC", 3));
    CHECK_EQ_INT(rkm_utf8_encode(0xFFFF, u), 3);
    CHECK(!memcmp(u, "\xEF\xBF\xBF", 3));
    CHECK_EQ_INT(rkm_utf8_encode(0x10000, u), 4);
    CHECK(!memcmp(u, "\xF0\x90\x80\x80", 4));
    CHECK_EQ_INT(rkm_utf8_encode(0x1F600, u), 4);
    CHECK(!memcmp(u, "\xF0\x9F\x98\x80", 4));
    CHECK_EQ_INT(rkm_utf8_encode(0x10FFFF, u), 4);
    CHECK(!memcmp(u, "\xF4\x8F\xBF\xBF", 4));
}

static void test_invalid(void)
{
    static const struct {
        const char *s;
        size_t n;
    } bad[] = {
        {"\xC0\x80", 2},             /* overlong NUL */
        {"\xC1\xBF", 2},             /* overlong 0x7F */
        {"\xE0\x80\x80", 3},         /* overlong 3-byte */
        {"\xE0\x9F\xBF", 3},         /* overlong U+07FF */
        {"\xF0\x80\x80\x80", 4},     /* overlong 4-byte */
        {"\xF0\x8F\xBF\xBF", 4},     /* overlong U+FFFF */
        {"\xED\xA0\x80", 3},         /* U+D800 */
        {"\xED\xBF\xBF", 3},         /* U+DFFF */
        {"\xED\xB2\x80", 3},         /* a low surrogate */
        {"\xF4\x90\x80\x80", 4},     /* U+110000 */
        {"\xF5\x80\x80\x80", 4},     /* lead past F4 */
        {"\xF8\x88\x80\x80\x80", 5}, /* 5-byte form */
        {"\xFE", 1},
        {"\xFF", 1},
        {"\x80", 1},                 /* stray continuation */
        {"\xBF\x80", 2},
        {"\xC3", 1},                 /* truncated 2-byte */
        {"\xE2\x82", 2},             /* truncated euro sign */
        {"\xF0\x9F\x98", 3},         /* truncated emoji */
        {"\xC3\x28", 2},             /* bad continuation */
        {"\xE2\x28\xA1", 3},
        {"\xE2\x82\x28", 3},
        {"\xF0\x9F\x28\x80", 4},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t cp = 0x12345;
        CHECK_MSG(rkm_utf8_decode(bad[i].s, bad[i].n, &cp) == 0, "case %zu", i);
        CHECK_MSG(cp == 0x12345, "case %zu wrote *cp", i);
        CHECK_MSG(rkm_utf8_valid_prefix(bad[i].s, bad[i].n) == 0 || bad[i].n == 0, "case %zu", i);
    }
    /* a valid sequence followed by junk decodes as itself */
    uint32_t cp;
    CHECK_EQ_INT(rkm_utf8_decode("\xC3\xA9\xFF", 3, &cp), 2);
    CHECK_EQ_INT(cp, 0xE9);

    CHECK_EQ_INT(rkm_utf8_seq_len('A'), 1);
    CHECK_EQ_INT(rkm_utf8_seq_len(0x00), 1);
    CHECK_EQ_INT(rkm_utf8_seq_len(0x80), 0);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xBF), 0);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xC0), 0);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xC1), 0);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xC2), 2);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xDF), 2);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xE0), 3);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xEF), 3);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xF0), 4);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xF4), 4);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xF5), 0);
    CHECK_EQ_INT(rkm_utf8_seq_len(0xFF), 0);
}

static void test_valid_prefix(void)
{
    CHECK_EQ_INT(rkm_utf8_valid_prefix("", 0), 0);
    CHECK_EQ_INT(rkm_utf8_valid_prefix("hello", 5), 5);
    CHECK_EQ_INT(rkm_utf8_valid_prefix("a\xE2\x82\xAC" "b", 5), 5);
    CHECK_EQ_INT(rkm_utf8_valid_prefix("ab\xC0\x80" "cd", 6), 2);
    CHECK_EQ_INT(rkm_utf8_valid_prefix("a\xE2\x82", 3), 1);           /* truncated at the end */
    CHECK_EQ_INT(rkm_utf8_valid_prefix("\xE2\x82\xAC\xE2\x82", 5), 3);
    CHECK_EQ_INT(rkm_utf8_valid_prefix("xyz\xED\xA0\x80", 6), 3);    /* surrogate */
    CHECK_EQ_INT(rkm_utf8_valid_prefix("\xF0\x9F\x98\x80!", 5), 5);
    CHECK_EQ_INT(rkm_utf8_valid_prefix("ok\x80", 3), 2);
    CHECK_EQ_INT(rkm_utf8_valid_prefix("nul\0inside", 10), 10);      /* NUL is a character */
    /* n limits the scan: the bytes past it are not looked at */
    CHECK_EQ_INT(rkm_utf8_valid_prefix("ab\xFF", 2), 2);
}

static void test_categories(void)
{
    static const struct {
        uint32_t cp;
        unsigned flags;
    } known[] = {
        {'A', RKM_UC_L},
        {'z', RKM_UC_L},
        {0xE9, RKM_UC_L},        /* é */
        {0x3B1, RKM_UC_L},       /* α */
        {0x4E00, RKM_UC_L},      /* CJK ideograph */
        {0xAC00, RKM_UC_L},      /* Hangul syllable */
        {'5', RKM_UC_N},
        {0x663, RKM_UC_N},       /* ARABIC-INDIC DIGIT THREE */
        {0xBD, RKM_UC_N},        /* ½ (No) */
        {0x2167, RKM_UC_N},      /* Ⅷ (Nl) */
        {0x301, RKM_UC_M},       /* combining acute */
        {0x903, RKM_UC_M},       /* Devanagari visarga (Mc) */
        {'!', RKM_UC_P},
        {'-', RKM_UC_P},
        {0x3002, RKM_UC_P},      /* ideographic full stop */
        {'+', RKM_UC_S},
        {'$', RKM_UC_S},
        {0x20AC, RKM_UC_S},      /* € */
        {0x1F600, RKM_UC_S},     /* 😀 (So) */
        {' ', RKM_UC_Z | RKM_UC_WS},
        {0xA0, RKM_UC_Z | RKM_UC_WS},
        {0x3000, RKM_UC_Z | RKM_UC_WS},
        {0x2028, RKM_UC_Z | RKM_UC_WS},
        {'\n', RKM_UC_C | RKM_UC_WS},
        {'\t', RKM_UC_C | RKM_UC_WS},
        {0x85, RKM_UC_C | RKM_UC_WS},
        {0, RKM_UC_C},
        {0x200B, RKM_UC_C},      /* zero width space (Cf, not White_Space) */
        {0xE000, RKM_UC_C},      /* private use */
        {0x378, RKM_UC_C},       /* unassigned */
        {0x10FFFF, RKM_UC_C},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        unsigned f = rkm_unicode_flags(known[i].cp);
        CHECK_MSG(f == known[i].flags, "U+%04X: flags 0x%x, want 0x%x", (unsigned)known[i].cp, f, known[i].flags);
    }

    CHECK_EQ_INT(rkm_unicode_ccc('A'), 0);
    CHECK_EQ_INT(rkm_unicode_ccc(0x301), 230);
    CHECK_EQ_INT(rkm_unicode_ccc(0x316), 220);
    CHECK_EQ_INT(rkm_unicode_ccc(0x327), 202); /* cedilla */
    CHECK_EQ_INT(rkm_unicode_ccc(0x5B0), 10);  /* Hebrew sheva */
    CHECK_EQ_INT(rkm_unicode_ccc(0x93C), 7);   /* Devanagari nukta */
    CHECK_EQ_INT(rkm_unicode_ccc(0x4E00), 0);

    CHECK(rkm_unicode_is_mn(0x301));
    CHECK(rkm_unicode_is_mn(0x5B0));
    CHECK(!rkm_unicode_is_mn(0x903)); /* Mc */
    CHECK(!rkm_unicode_is_mn('a'));

    CHECK(rkm_unicode_assigned('A'));
    CHECK(rkm_unicode_assigned(0x4E00));
    CHECK(rkm_unicode_assigned(0xE000)); /* private use is assigned (Co) */
    CHECK(!rkm_unicode_assigned(0x378));
    CHECK(!rkm_unicode_assigned(0x10FFFF));
}

static void test_lower(void)
{
    static const struct {
        uint32_t cp;
        int n;
        uint32_t out[2];
    } known[] = {
        {'A', 1, {'a'}},
        {'Z', 1, {'z'}},
        {'a', 1, {'a'}},
        {'1', 1, {'1'}},
        {0xC9, 1, {0xE9}},           /* É -> é */
        {0x391, 1, {0x3B1}},         /* Α -> α */
        {0x3A3, 1, {0x3C3}},         /* Σ -> σ (no Final_Sigma) */
        {0x410, 1, {0x430}},         /* Cyrillic А */
        {0x130, 2, {'i', 0x307}},    /* İ -> i + combining dot */
        {0x1E9E, 1, {0xDF}},         /* ẞ -> ß */
        {0x2160, 1, {0x2170}},       /* Ⅰ -> ⅰ */
        {0x10400, 1, {0x10428}},     /* Deseret */
        {0x4E00, 1, {0x4E00}},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        uint32_t out[2] = {0, 0};
        int n = rkm_unicode_lower(known[i].cp, out);
        CHECK_MSG(n == known[i].n && out[0] == known[i].out[0] && (n < 2 || out[1] == known[i].out[1]),
                  "lower(U+%04X) = %d: U+%04X U+%04X", (unsigned)known[i].cp, n, (unsigned)out[0], (unsigned)out[1]);
    }
}

static void check_form(const char *in, int form, const char *want)
{
    size_t n = 12345;
    char *got = rkm_unicode_normalize(in, strlen(in), form, &n);
    CHECK_MSG(got && n == strlen(want) && !memcmp(got, want, n) && got[n] == 0, "form %d of \"%s\" is \"%s\"", form,
              in, got ? got : "(null)");
    free(got);
}

static void test_normalize(void)
{
    /* composition and decomposition */
    check_form("e\xCC\x81", RKM_NF_NFC, "\xC3\xA9");
    check_form("\xC3\xA9", RKM_NF_NFD, "e\xCC\x81");
    check_form("\xC3\xA9", RKM_NF_NFC, "\xC3\xA9");
    check_form("plain ascii", RKM_NF_NFD, "plain ascii");
    /* canonical reordering: ccc 220 before 230 */
    check_form("a\xCC\x81\xCC\x96", RKM_NF_NFD, "a\xCC\x96\xCC\x81");
    check_form("a\xCC\x81\xCC\x96", RKM_NF_NFC, "\xC3\xA1\xCC\x96");
    /* singletons: Å (U+212B ANGSTROM SIGN) -> U+00C5 in every form */
    check_form("\xE2\x84\xAB", RKM_NF_NFC, "\xC3\x85");
    check_form("\xE2\x84\xAB", RKM_NF_NFD, "A\xCC\x8A");
    /* Hangul: L V -> LV syllable, LV T -> LVT, and back */
    check_form("\xE1\x84\x80\xE1\x85\xA1", RKM_NF_NFC, "\xEA\xB0\x80");
    check_form("\xEA\xB0\x80", RKM_NF_NFD, "\xE1\x84\x80\xE1\x85\xA1");
    check_form("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", RKM_NF_NFC, "\xEA\xB0\x81");
    check_form("\xEA\xB0\x81", RKM_NF_NFD, "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8");
    /* compatibility: ﬁ -> fi, ① -> 1, ² -> 2, full-width Ａ -> A; the
     * canonical forms leave them alone */
    check_form("\xEF\xAC\x81", RKM_NF_NFKC, "fi");
    check_form("\xEF\xAC\x81", RKM_NF_NFC, "\xEF\xAC\x81");
    check_form("\xE2\x91\xA0", RKM_NF_NFKD, "1");
    check_form("x\xC2\xB2", RKM_NF_NFKC, "x2");
    check_form("\xEF\xBC\xA1", RKM_NF_NFKC, "A");
    check_form("\xEF\xBC\xA1", RKM_NF_NFD, "\xEF\xBC\xA1");
    /* NFKD decomposes fully, NFKC recomposes: ẛ̣ (U+1E9B U+0323), the
     * standard's own example */
    check_form("\xE1\xBA\x9B\xCC\xA3", RKM_NF_NFC, "\xE1\xBA\x9B\xCC\xA3");
    check_form("\xE1\xBA\x9B\xCC\xA3", RKM_NF_NFD, "\xC5\xBF\xCC\xA3\xCC\x87");
    check_form("\xE1\xBA\x9B\xCC\xA3", RKM_NF_NFKC, "\xE1\xB9\xA9");
    check_form("\xE1\xBA\x9B\xCC\xA3", RKM_NF_NFKD, "s\xCC\xA3\xCC\x87");
    check_form("", RKM_NF_NFKC, "");

    size_t n;
    char *p = rkm_unicode_nfc("A\xCC\x8A", 3, &n);
    CHECK(p && n == 2 && !memcmp(p, "\xC3\x85", 2));
    free(p);
    /* an invalid byte becomes U+FFFD */
    p = rkm_unicode_normalize("a\xFF" "b", 3, RKM_NF_NFC, &n);
    CHECK(p && n == 5 && !memcmp(p, "a\xEF\xBF\xBD" "b", 5));
    free(p);
    CHECK(rkm_unicode_normalize("a", 1, 7, &n) == NULL);
}

/* rkm_utf8_complete_prefix: an unfinished sequence at the end is cut off,
 * complete ones and bytes that start nothing are kept. */
static void test_complete_prefix(void)
{
    static const struct {
        const char *s;
        size_t want;
    } cases[] = {
        {"", 0},
        {"abc", 3},
        {"a\xc3", 1},                 /* é's lead byte alone */
        {"a\xc3\xa9", 3},             /* é complete */
        {"\xe2\x82", 0},              /* € missing its last byte */
        {"x\xe2\x82\xac", 4},        /* € complete */
        {"\xf0\x9f\x98", 0},          /* an emoji missing one byte */
        {"\xf0\x9f\x98\x80", 4},      /* the emoji complete */
        {"ab\x80", 3},                /* a stray continuation byte: nothing to wait for */
        {"a\xff", 2},                 /* a byte that starts no sequence */
        {"\x80\x80\x80\x80\x80", 5},   /* only continuation bytes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].s);
        CHECK_MSG(rkm_utf8_complete_prefix(cases[i].s, n) == cases[i].want, "case %zu: %zu, want %zu", i,
                  rkm_utf8_complete_prefix(cases[i].s, n), cases[i].want);
    }
    /* every cut of a valid string is cut back to a character boundary */
    const char *t = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z";
    size_t bounds[] = {0, 1, 3, 6, 10, 11};
    for (size_t cut = 0; cut <= strlen(t); cut++) {
        size_t got = rkm_utf8_complete_prefix(t, cut), want = 0;
        for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++)
            if (bounds[b] <= cut) want = bounds[b];
        CHECK_MSG(got == want, "cut %zu: %zu, want %zu", cut, got, want);
    }
}

int main(void)
{
    test_round_trip();
    test_invalid();
    test_valid_prefix();
    test_complete_prefix();
    test_categories();
    test_lower();
    test_normalize();
    return test_done();
}
