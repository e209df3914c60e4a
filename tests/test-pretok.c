/*
 * test-pretok.c - the pre-tokenizer's regex splitting (src/text/tok_pretok.c,
 * src/text/regex.c):
 *  - every hand-written fast path gives the same pieces as PCRE2 running
 *    its pattern, on the whole corpus and on random strings (code points
 *    drawn from every class the patterns care about; code points on which
 *    PCRE2's Unicode tables and ours disagree are counted and left out);
 *  - every llama.cpp pre-tokenizer type compiles, on both paths;
 *  - Hugging Face's Split behaviours and invert, on the examples of its
 *    documentation ("the-final--countdown");
 *  - \s is White_Space (U+0085 included), `$` is the end only;
 *  - a hostile pattern ends with a clear error (match limit), not a hang;
 *  - 4 MB runs of one character (spaces, a letter, a CJK character, a
 *    combining mark) split as the pattern says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "text/regex.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"
#include "util/knobs.h"

/* A tokenizer with one regex step (fast path attached unless regex_only). */
static rkm_tokenizer *one_step(const char *re, int behavior, int invert, int regex_only)
{
    rkm_knob_set(RKM_KNOB_TOK_REGEX_ONLY, regex_only ? "1" : "0");
    rkm_tokenizer *t = rkm_tok__new(1);
    if (t && rkm_tok__add_regex_split(t, re, strlen(re), behavior, invert)) {
        rkm_tokenizer_free(t);
        t = NULL;
    }
    rkm_knob_set(RKM_KNOB_TOK_REGEX_ONLY, NULL);
    return t;
}

/* The pieces of s as "piece|piece|..." into out (malloc'd). */
static char *pieces(const rkm_tokenizer *t, tok_pieces *p, const char *s, size_t n, int *rc)
{
    *rc = rkm_tok__split(t, p, s, n, 0, t->n_split);
    if (*rc) return NULL;
    size_t cap = n + p->a.n + 1;
    char *out = malloc(cap), *w = out;
    for (size_t k = 0; k < p->a.n; k++) {
        size_t bs = p->off[p->a.v[k].s], be = p->off[p->a.v[k].e];
        memcpy(w, s + bs, be - bs);
        w += be - bs;
        if (k + 1 < p->a.n) *w++ = '|';
    }
    *w = 0;
    return out;
}

static int same_pieces(const rkm_tokenizer *a, const rkm_tokenizer *b, tok_pieces *pa, tok_pieces *pb, const char *s,
                       size_t n, const char *what)
{
    int ra, rb;
    char *x = pieces(a, pa, s, n, &ra), *y = pieces(b, pb, s, n, &rb);
    int same = ra == 0 && rb == 0 && !strcmp(x, y);
    if (!same) {
        static int shown;
        if (shown++ < 8) printf("  %s: fast [%s]\n  %*s  pcre [%s]\n", what, x ? x : "(error)", (int)strlen(what), "",
                                y ? y : "(error)");
    }
    free(x);
    free(y);
    return same;
}

/* Code points the random strings draw from: every class the patterns
 * branch on, and the edges of the hand-written ranges. */
static const uint32_t alphabet[] = {
    'a', 'b', 'z', 'A', 'Q', 'Z', 's', 't', 'l', 'L', 'S', 'D', '0', '5', '9', ' ', ' ', ' ', '\t', '\n', '\r',
    '\v', '\f', '\'', '"', '!', '#', '$', '%', '&', '(', ')', '*', '+', ',', '-', '.', '/', ':', ';', '<', '=',
    '>', '?', '@', '[', '\\', ']', '^', '_', '`', '{', '|', '}', '~', 0x85, 0xA0, 0xB5, 0xC0, 0xD6, 0xD7, 0xE9,
    0xF7, 0xFF, 0x17F, 0x1BB, 0x1C5, 0x2B0, 0x301, 0x308, 0x345, 0x370, 0x3A3, 0x3C9, 0x416, 0x436, 0x5D0, 0x627,
    0x660, 0x669, 0x900, 0x915, 0x93F, 0x966, 0x1680, 0x2000, 0x2009, 0x200B, 0x2018, 0x201F, 0x2026, 0x2028,
    0x2029, 0x202F, 0x205F, 0x20AC, 0x2126, 0x212A, 0x2160, 0x2460, 0x3000, 0x3001, 0x3002, 0x3005, 0x3007,
    0x3041, 0x309F, 0x30A0, 0x30A2, 0x30FF, 0x3131, 0x4E00, 0x4E2D, 0x9FA5, 0x9FA6, 0xAC00, 0xD7A3, 0xD7FF,
    0xFEFF, 0xFF01, 0xFF0F, 0xFF10, 0xFF1A, 0xFF21, 0xFF41, 0xFF5E, 0xFFFD, 0x10400, 0x1D400, 0x1F600, 0x1F44D,
    0x20000,
};

/* 1 when PCRE2 and our tables put code point c in the same classes. */
static int tables_agree(uint32_t c, rkm_regex *const *cls, rkm_regex_scratch *sc)
{
    static const int flag[] = {RKM_UC_L, RKM_UC_N, RKM_UC_P, RKM_UC_S, RKM_UC_M, RKM_UC_WS};
    char u[4];
    size_t n = (size_t)rkm_utf8_encode(c, u);
    unsigned f = rkm_unicode_flags(c);
    for (int k = 0; k < 6; k++) {
        size_t ms, me;
        int m = rkm_regex_find(cls[k], sc, u, n, 0, 0, &ms, &me) == 1;
        if (m != !!(f & flag[k])) return 0;
    }
    return 1;
}

static size_t random_string(uint64_t *rng, char *buf, size_t len, rkm_regex *const *cls, rkm_regex_scratch *sc,
                            int *skipped)
{
    size_t w = 0;
    while (w < len) {
        uint32_t c, r = test_rand(rng) % 16;
        if (r < 12) c = alphabet[test_rand(rng) % RKM_ARRAY_LEN(alphabet)];
        else if (r < 15) c = test_rand(rng) % 0x3000; /* the alphabets and marks of the BMP's start */
        else c = test_rand(rng) % 0x30000;
        if ((c >= 0xD800 && c <= 0xDFFF) || c == 0) continue;
        if (!tables_agree(c, cls, sc)) {
            (*skipped)++;
            continue;
        }
        w += (size_t)rkm_utf8_encode(c, buf + w);
    }
    return w;
}

static void test_fast_paths(void)
{
    static const char *const cls_re[] = {"\\p{L}", "\\p{N}", "\\p{P}", "\\p{S}", "\\p{M}", "\\s"};
    rkm_regex *cls[6];
    for (int k = 0; k < 6; k++) cls[k] = rkm_regex_compile(cls_re[k], strlen(cls_re[k]));
    rkm_regex_scratch sc = {0};
    size_t clen;
    char *corpus = rkm_read_file("tests/data/tokenizer-corpus.txt", &clen);
    CHECK(corpus != NULL);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int n_kinds = 0, skipped = 0;
    for (int kind = PRE_GPT2; kind <= PRE_NL_RUNS; kind++) {
        const char *re = rkm_tok__fast_pattern(kind);
        if (!re) continue;
        rkm_tokenizer *fast = one_step(re, SPLIT_ISOLATED, 0, 0), *slow = one_step(re, SPLIT_ISOLATED, 0, 1);
        CHECK(fast && slow);
        if (!fast || !slow) continue;
        CHECK_MSG(fast->split[0].fast == kind && slow->split[0].fast == 0, "kind %d: fast path not attached", kind);
        n_kinds++;
        tok_pieces pa = {0}, pb = {0};
        int n_str = 0, n_diff = 0;
        for (char *p = corpus; p && *p;) {
            char *e = strstr(p, sep);
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (rkm_utf8_valid_prefix(p, n) == n) {
                n_str++;
                n_diff += !same_pieces(fast, slow, &pa, &pb, p, n, "corpus");
            }
            p = e ? e + strlen(sep) : NULL;
        }
        uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(kind + 1);
        char buf[256];
        for (int r = 0; r < 4000; r++) {
            size_t n = random_string(&rng, buf, 8 + test_rand(&rng) % 48, cls, &sc, &skipped);
            n_str++;
            n_diff += !same_pieces(fast, slow, &pa, &pb, buf, n, "random");
        }
        printf("fast path %d (%.40s%s): %d strings, %d differ\n", kind, re, strlen(re) > 40 ? "..." : "", n_str,
               n_diff);
        CHECK_EQ_INT(n_diff, 0);
        rkm_tok__pieces_free(&pa);
        rkm_tok__pieces_free(&pb);
        rkm_tokenizer_free(fast);
        rkm_tokenizer_free(slow);
    }
    printf("fast paths: %d checked; %d random code points left out (PCRE2's Unicode tables and ours disagree)\n",
           n_kinds, skipped);
    CHECK(n_kinds >= 15);
    free(corpus);
    for (int k = 0; k < 6; k++) rkm_regex_free(cls[k]);
    rkm_regex_scratch_free(&sc);
}

/* Every pre-tokenizer type llama.cpp knows loads, on both paths. */
static void test_pre_types(void)
{
    static const char *const names[] = {
        "default", "llama-bpe", "llama3", "lfm2", "dbrx", "glm4", "chatglm-bpe", "jais-2", "deepseek-llm",
        "deepseek-v3", "hunyuan-dense", "spark2_5", "youtu", "deepseek-coder", "falcon", "starcoder", "command-r",
        "gpt-2", "roberta-bpe", "exaone4", "qwen2", "deepseek-r1-qwen", "hunyuan", "qwen35", "poro-chat", "viking",
        "tekken", "chameleon", "gpt-4o", "llama4", "minimax-m2", "granite-embed-multi-97m", "tiny_aya", "kimi-k2",
        "superbpe", "bailingmoe", "seed-coder", "ufakzeka", "grok-2", "afmoe", "laguna", "exaone-moe", "minicpm5",
    };
    static const char text[] = "Hello World's 12345 \xe4\xbd\xa0\xe5\xa5\xbd\xe3\x80\x82  \n\n getUserName iPhone";
    for (int regex_only = 0; regex_only < 2; regex_only++) {
        rkm_knob_set(RKM_KNOB_TOK_REGEX_ONLY, regex_only ? "1" : "0");
        for (size_t i = 0; i < RKM_ARRAY_LEN(names); i++) {
            rkm_tokenizer *t = rkm_tok__new(1);
            t->model = MODEL_BPE_BYTES;
            int rc = rkm_tok__set_pre_by_name(t, names[i]);
            CHECK_MSG(rc == 0, "pre-tokenizer %s: %s", names[i], rkm_last_error());
            tok_pieces p = {0};
            int prc;
            char *got = rc ? NULL : pieces(t, &p, text, strlen(text), &prc);
            CHECK_MSG(rc || (got && prc == 0), "pre-tokenizer %s does not split", names[i]);
            /* the pieces are the text, in order */
            if (got) {
                size_t w = 0;
                for (const char *q = got; *q; q++)
                    if (*q != '|') w++;
                CHECK_MSG(w == strlen(text) || !strcmp(names[i], "chameleon"), "%s loses text", names[i]);
                if (!regex_only && (!strcmp(names[i], "kimi-k2") || !strcmp(names[i], "gpt-4o")))
                    printf("%s: [%s]\n", names[i], got);
            }
            free(got);
            rkm_tok__pieces_free(&p);
            rkm_tokenizer_free(t);
        }
    }
    rkm_knob_set(RKM_KNOB_TOK_REGEX_ONLY, NULL);
    rkm_tokenizer *t = rkm_tok__new(1);
    t->model = MODEL_BPE_BYTES;
    CHECK(rkm_tok__set_pre_by_name(t, "no-such-type") == RKM_EUNSUPPORTED);
    CHECK(strstr(rkm_last_error(), "no-such-type") != NULL);
    CHECK(rkm_tok__set_pre_by_name(t, "gemma4") == RKM_EUNSUPPORTED); /* not a byte-level BPE split */
    rkm_tokenizer_free(t);
}

static void expect_split(const char *re, int literal, int behavior, int invert, const char *text, const char *want)
{
    rkm_tokenizer *t = rkm_tok__new(1);
    if (literal) {
        split_step *st = &t->split[t->n_split++];
        memset(st, 0, sizeof *st);
        st->kind = PRE_LITERAL;
        st->lit = strdup(re);
        st->lit_len = strlen(re);
        st->behavior = behavior;
        st->invert = invert;
    } else {
        CHECK(rkm_tok__add_regex_split(t, re, strlen(re), behavior, invert) == 0);
    }
    tok_pieces p = {0};
    int rc;
    char *got = pieces(t, &p, text, strlen(text), &rc);
    CHECK_MSG(got && !strcmp(got, want), "split '%s' (%s, behavior %d, invert %d) of '%s': [%s], want [%s]", re,
              literal ? "literal" : "regex", behavior, invert, text, got ? got : "(error)", want);
    free(got);
    rkm_tok__pieces_free(&p);
    rkm_tokenizer_free(t);
}

/* The examples of tokenizers' SplitDelimiterBehavior documentation. */
static void test_behaviors(void)
{
    static const char text[] = "the-final--countdown";
    for (int literal = 0; literal < 2; literal++) {
        expect_split("-", literal, SPLIT_REMOVED, 0, text, "the|final|countdown");
        expect_split("-", literal, SPLIT_ISOLATED, 0, text, "the|-|final|-|-|countdown");
        expect_split("-", literal, SPLIT_MERGED_PREV, 0, text, "the-|final-|-|countdown");
        expect_split("-", literal, SPLIT_MERGED_NEXT, 0, text, "the|-final|-|-countdown");
        expect_split("-", literal, SPLIT_CONTIGUOUS, 0, text, "the|-|final|--|countdown");
        /* invert: the pattern's matches are what is kept apart */
        expect_split("-", literal, SPLIT_REMOVED, 1, text, "-|-|-");
        expect_split("-", literal, SPLIT_MERGED_PREV, 1, text, "the|-final|-|-countdown");
    }
    expect_split("\\w+", 0, SPLIT_REMOVED, 1, "Hey friend!", "Hey|friend");
    expect_split(" ", 0, SPLIT_MERGED_PREV, 0, "Hey friend!", "Hey |friend!");
    /* zero-width matches cut without making empty pieces */
    expect_split("(?=(\\d{3})+(?!\\d))", 0, SPLIT_ISOLATED, 0, "1234567", "1|234|567");
    /* \s is White_Space: U+0085 and U+3000 are spaces, U+200B is not */
    expect_split("\\s+", 0, SPLIT_ISOLATED, 0, "a\xc2\x85\xe3\x80\x80" "b\xe2\x80\x8b" "c", "a|\xc2\x85\xe3\x80\x80|b\xe2\x80\x8b" "c");
    expect_split("[^\\s\\p{L}]+", 0, SPLIT_ISOLATED, 0, "ab\xc2\x85!?", "ab\xc2\x85|!?");
    /* (?i:...) folds ASCII letters only, as llama.cpp and the JavaScript reference do */
    expect_split("(?i:'s|'ll)", 0, SPLIT_ISOLATED, 0, "a'S b'\xc5\xbf c'Ll", "a|'S| b'\xc5\xbf c|'Ll");
    expect_split("(?i:x)\\p{Lu}", 0, SPLIT_ISOLATED, 0, "XAxbxC", "XA|xb|xC");
    expect_split("\\S+", 0, SPLIT_REMOVED, 1, "x\xc2\x85y", "x|y");
    /* $ is the end of the piece, not before a final newline */
    expect_split("\\s+$", 0, SPLIT_ISOLATED, 0, "a \n", "a| \n");
    expect_split("b$", 0, SPLIT_ISOLATED, 0, "ab\n", "ab\n");
    /* \p{Han} is the Han script (U+3001 is not Han, though Han uses it) */
    expect_split("\\p{Han}+", 0, SPLIT_ISOLATED, 0, "\xe4\xbd\xa0\xe3\x80\x81\xe5\xa5\xbd",
                 "\xe4\xbd\xa0|\xe3\x80\x81|\xe5\xa5\xbd");
}

static void test_limits(void)
{
    /* catastrophic backtracking: a match limit, an error naming the regex */
    rkm_tokenizer *t = one_step("(a+)+$", SPLIT_ISOLATED, 0, 1);
    CHECK(t != NULL);
    char text[64];
    memset(text, 'a', 48);
    text[48] = 'b';
    tok_pieces p = {0};
    int rc = rkm_tok__split(t, &p, text, 49, 0, 1);
    CHECK_MSG(rc == RKM_EUNSUPPORTED, "hostile pattern: rc %d", rc);
    CHECK(strstr(rkm_last_error(), "(a+)+$") != NULL);
    printf("hostile pattern: %s\n", rkm_last_error());
    rkm_tok__pieces_free(&p);
    rkm_tokenizer_free(t);
    /* patterns that do not compile: the reason and the pattern */
    rkm_tokenizer *u = rkm_tok__new(1);
    CHECK(rkm_tok__add_regex_split(u, "(a|b", 4, SPLIT_ISOLATED, 0) == RKM_EUNSUPPORTED);
    CHECK(strstr(rkm_last_error(), "(a|b") != NULL && strstr(rkm_last_error(), "missing") != NULL);
    CHECK(rkm_tok__add_regex_split(u, "[\\p{Nope}]", 10, SPLIT_ISOLATED, 0) == RKM_EUNSUPPORTED);
    CHECK(rkm_tok__add_regex_split(u, "\xff", 1, SPLIT_ISOLATED, 0) == RKM_EUNSUPPORTED);
    CHECK_EQ_INT(u->n_split, 0);
    rkm_tokenizer_free(u);
}

/* 4 MB of one character through the o200k pattern (PCRE2 path) and the
 * Llama 3 fast path: one piece each (combining marks and CJK join the
 * letter classes), a correct cut for the mixed case. */
static void test_long_runs(void)
{
    rkm_tokenizer *t = rkm_tok__new(1);
    t->model = MODEL_BPE_BYTES;
    CHECK(rkm_tok__set_pre_by_name(t, "gpt-4o") == 0);
    rkm_tokenizer *l3 = rkm_tok__new(1);
    l3->model = MODEL_BPE_BYTES;
    CHECK(rkm_tok__set_pre_by_name(l3, "llama3") == 0 && l3->split[0].fast == PRE_LLAMA3);
    static const uint32_t chars[] = {' ', 'a', 'A', 0x4E2D, 0x301};
    size_t n = (size_t)4 << 20;
    char *buf = malloc(n + 8);
    tok_pieces p = {0};
    for (size_t k = 0; k < RKM_ARRAY_LEN(chars); k++) {
        char u[4];
        size_t l = (size_t)rkm_utf8_encode(chars[k], u), w = 0;
        while (w + l <= n) {
            memcpy(buf + w, u, l);
            w += l;
        }
        for (int which = 0; which < 2; which++) {
            int rc = rkm_tok__split(which ? l3 : t, &p, buf, w, 0, 1);
            CHECK_MSG(rc == 0, "4 MB of U+%04X: %s", chars[k], rkm_last_error());
            /* Llama 3: combining marks are not letters, so [^\s\p{L}\p{N}]+ takes them; one piece either way */
            CHECK_MSG(rc == 0 && p.a.n == 1, "4 MB of U+%04X (%s): %zu pieces", chars[k], which ? "llama3" : "gpt-4o",
                      p.a.n);
        }
    }
    /* "aA" repeated: o200k starts a piece at each capital that follows a lowercase letter */
    size_t w = 0;
    while (w + 2 <= n) {
        buf[w++] = 'a';
        buf[w++] = 'A';
    }
    CHECK(rkm_tok__split(t, &p, buf, w, 0, 1) == 0);
    CHECK_MSG(p.a.n == w / 2 + 1, "aA x %zu: %zu pieces", w / 2, p.a.n); /* a|Aa|Aa|...|A */
    free(buf);
    rkm_tok__pieces_free(&p);
    rkm_tokenizer_free(t);
    rkm_tokenizer_free(l3);
}

int main(void)
{
    test_behaviors();
    test_limits();
    test_pre_types();
    test_fast_paths();
    test_long_runs();
    return test_done();
}
