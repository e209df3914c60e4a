/*
 * test-tokenizer-models.c - the tokenizer's model types and normalizers on
 * tiny hand-made vocabularies, with expected ids worked out by hand:
 *  - Unigram: Viterbi segmentations, unknown runs, byte fallback and the
 *    Metaspace split;
 *  - NFC against the Unicode NormalizationTest.txt facts embedded here;
 *  - the Precompiled charsmap (a blob built by tests/js/charsmap.mjs,
 *    corrupt and malformed blobs), NFKC/NFD/NFKD, Strip, Replace " {2,}",
 *    Lowercase, BertNormalizer, WhitespaceSplit + Metaspace;
 *  - WordPiece: segmentation, unknown words, decoding;
 *  - GGUF t5 (Unigram): written, read back, llama.cpp's whitespace flags.
 * The real vocabularies and the comparison with Hugging Face tokenizers
 * are test-tokenizer.c and tests/test-tokenizer-ref.sh.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "common/tok_test.h"
#include "format/gguf.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "util/common.h"

/* Unigram on hand-made vocabularies; expected ids worked out by hand
 * (the comparison with @huggingface/tokenizers on the corpus is in
 * tests/test-tokenizer-ref.sh). "\u2581" is U+2581. */
static void check_unigram(void)
{
    /* 10 pieces; "abc" -> "▁abc", candidate paths:
     *   ▁a + bc = -1 - 2 = -3 (best)   ▁a + b + c = -4.5   ▁ + abc = -6.5
     *   ▁ab + c = -7   ▁ + a + bc = -5   ▁ + ab + c = -7   ▁ + a + b + c = -6.5
     * "ab" -> "▁ab": ▁a + b = -2.5 (best), ▁ + a + b = -4.5, ▁ + ab = -5, ▁ab = -5
     * "bc" -> "▁bc": ▁ + bc = -4 beats ▁ + b + c = -5.5
     * "xyz" -> "▁xyz": ▁ then one fused <unk> (unknown characters score
     * min(score) - 10 = -15 each; fused as the references do)
     * "cab" -> "▁cab": ▁ + c + ab = -7 vs ▁ + c + a + b = -6.5 (best) */
    const char *doc =
        "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"" U2581 "\", -2.0], "
        "[\"a\", -1.0], [\"b\", -1.5], [\"ab\", -3.0], [\"" U2581 "a\", -1.0], [\"" U2581 "ab\", -5.0], "
        "[\"c\", -2.0], [\"bc\", -2.0], [\"abc\", -4.5]]}, \"pre_tokenizer\": {\"type\": \"Metaspace\", "
        "\"replacement\": \"" U2581 "\", \"prepend_scheme\": \"always\", \"split\": true}, \"decoder\": "
        "{\"type\": \"Metaspace\", \"replacement\": \"" U2581 "\", \"prepend_scheme\": \"always\"}}";
    rkm_tokenizer *t = tok_from_json(doc);
    CHECK_MSG(t != NULL, "unigram: %s", rkm_last_error());
    if (t) {
        CHECK(!strcmp(rkm_tokenizer_model_name(t), "t5"));
        CHECK_EQ_INT(rkm_tokenizer_n_vocab(t), 10);
        CHECK(tok_encode_is(t, "abc", (const int32_t[]){5, 8}, 2));
        CHECK(tok_encode_is(t, "ab", (const int32_t[]){5, 3}, 2));
        CHECK(tok_encode_is(t, "bc", (const int32_t[]){1, 8}, 2));
        CHECK(tok_encode_is(t, "xyz", (const int32_t[]){1, 0}, 2));
        CHECK(tok_encode_is(t, "cab", (const int32_t[]){1, 7, 2, 3}, 4));
        CHECK(tok_encode_is(t, "abc xab", (const int32_t[]){5, 8, 1, 0, 2, 3}, 6));
        CHECK(tok_encode_is(t, "", NULL, 0));
        char out[64];
        int n = rkm_tokenizer_decode(t, (const int32_t[]){5, 8, 1, 7, 2, 3}, 6, out, sizeof out);
        CHECK(n == 7 && !memcmp(out, "abc cab", 7));
        n = rkm_tokenizer_piece(t, 5, out, sizeof out);
        CHECK(n == 2 && !memcmp(out, " a", 2));
        rkm_gguf_writer *w = rkm_gguf_writer_new();
        if (w) {
            CHECK(rkm_tokenizer_write_gguf(t, w) == 0); /* as GGUF t5; read back in check_ugm_gguf */
            rkm_gguf_writer_free(w);
        }
        rkm_tokenizer_free(t);
    }
    /* Metaspace split: "a a" -> "▁a▁a"; one piece when not split, but a
     * split word never crosses a ▁ */
    for (int split = 0; split < 2; split++) {
        char d[512];
        snprintf(d, sizeof d,
                 "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"" U2581
                 "\", -1], [\"a\", -1], [\"" U2581 "a" U2581 "a\", -1]]}, \"pre_tokenizer\": {\"type\": "
                 "\"Metaspace\", \"replacement\": \"" U2581 "\", \"prepend_scheme\": \"always\", \"split\": %s}}",
                 split ? "true" : "false");
        t = tok_from_json(d);
        CHECK(t != NULL);
        if (!t) continue;
        if (split) CHECK(tok_encode_is(t, "a a", (const int32_t[]){1, 2, 1, 2}, 4));
        else CHECK(tok_encode_is(t, "a a", (const int32_t[]){3}, 1));
        rkm_tokenizer_free(t);
    }
    /* byte_fallback: a fused unknown run becomes its bytes' <0xXX> tokens
     * when all exist ("xy"), else one <unk> ("xz": no <0x7A>); Prepend +
     * Replace normalizers instead of Metaspace */
    for (int bf = 0; bf < 2; bf++) {
        char d[768];
        snprintf(d, sizeof d,
                 "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"byte_fallback\": %s, \"vocab\": "
                 "[[\"<unk>\", 0], [\"" U2581 "\", -1], [\"a\", -1], [\"<0x78>\", -5], [\"<0x79>\", -5]]}, "
                 "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", "
                 "\"prepend\": \"" U2581 "\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
                 "\"content\": \"" U2581 "\"}]}}",
                 bf ? "true" : "false");
        t = tok_from_json(d);
        CHECK(t != NULL);
        if (!t) continue;
        if (bf) {
            CHECK(tok_encode_is(t, "xya", (const int32_t[]){1, 3, 4, 2}, 4));
            CHECK(tok_encode_is(t, "xza", (const int32_t[]){1, 0, 2}, 3));
            char out[16];
            int n = rkm_tokenizer_decode(t, (const int32_t[]){1, 3, 4, 2}, 4, out, sizeof out);
            CHECK(n == 4 && !memcmp(out, " xya", 4)); /* no Strip decoder: the space stays */
        } else {
            CHECK(tok_encode_is(t, "xya", (const int32_t[]){1, 0, 2}, 3));
        }
        rkm_tokenizer_free(t);
    }
    /* no unk_id: an unknown character is an error, not a crash */
    t = tok_from_json("{\"model\": {\"type\": \"Unigram\", \"unk_id\": null, \"vocab\": [[\"a\", -1]]}}");
    CHECK(t != NULL);
    if (t) {
        CHECK(tok_encode_is(t, "aa", (const int32_t[]){0, 0}, 2));
        int32_t ids[4];
        CHECK(rkm_tokenizer_encode(t, "ab", 2, ids, 4, 0, 0) == RKM_EINVAL);
        rkm_tokenizer_free(t);
    }
}

/* NFC facts from the Unicode standard (UAX #15 examples); the full
 * NormalizationTest.txt passes too, see docs/TOKENIZER.md. */
static void check_nfc(void)
{
    const char *cases[][2] = {
        {"e\xcc\x81", "\xc3\xa9"},                                 /* e + acute */
        {"\xe2\x84\xab", "\xc3\x85"},                              /* angstrom sign */
        {"\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"},  /* jamo -> 각 */
        {"\xe1\xb8\x8b\xcc\xa3", "\xe1\xb8\x8d\xcc\x87"},          /* d-dot-above + dot-below */
        {"q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87"},                /* reordering, no composite */
        {"\xef\xac\x81", "\xef\xac\x81"},                          /* fi ligature: compatibility only */
        {"\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc"},              /* excluded composite */
        {"abc", "abc"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        char *r = rkm_unicode_nfc(cases[i][0], strlen(cases[i][0]), &n);
        CHECK_MSG(r && n == strlen(cases[i][1]) && !memcmp(r, cases[i][1], n), "NFC case %zu", i);
        free(r);
    }
    /* a long run of combining marks stays linear and is sorted */
    size_t m = 200000;
    char *s = malloc(2 * m + 1);
    s[0] = 'a';
    for (size_t i = 0; i < (m - 1) / 2; i++) memcpy(s + 1 + 4 * i, "\xcc\x81\xcc\xa3", 4); /* 230, 220 */
    size_t len = 1 + 4 * ((m - 1) / 2), n;
    char *r = rkm_unicode_nfc(s, len, &n);
    CHECK(r && n == len);
    if (r) CHECK(!memcmp(r + n - 2, "\xcc\x81", 2)); /* class 230 after all the 220s */
    free(r);
    free(s);
    /* category facts the matchers rely on */
    CHECK(rkm_unicode_flags('a') & RKM_UC_L);
    CHECK(rkm_unicode_flags(0x4E2D) & RKM_UC_L);
    CHECK(rkm_unicode_flags(0x0663) & RKM_UC_N);
    CHECK(rkm_unicode_flags(0x00BD) & RKM_UC_N);
    CHECK(rkm_unicode_flags(0x3000) & RKM_UC_WS);
    CHECK(rkm_unicode_flags(0x0085) & RKM_UC_WS);
    CHECK(!(rkm_unicode_flags(0xFEFF) & RKM_UC_WS));
    CHECK(rkm_unicode_flags(0x0301) & RKM_UC_M);
    CHECK(rkm_unicode_flags(0x1F600) & RKM_UC_S);
    CHECK(rkm_unicode_flags(0x10FFFF) & RKM_UC_C);
}

/* A precompiled_charsmap built by tests/js/charsmap.mjs from the rules
 * a->A, ab->X, abc->"", U+FB01->fi, U+2460->1, U+FF76 U+FF9E->U+30AC,
 * U+2581->' ', U+00E9->e U+0301 (the expected outputs below are that
 * script's naive longest-match application of the same rules). */
static const char small_charsmap_b64[] =
    "kAIAAACAAQBhDQAAAAAAgKkVAACsPAIAAgAAgBAAAICgKQAAkbwCAIEdAACBaQAAttQDAAQAAIAIAACADgAAgJYcAgAFAACA7/QC"
    "AL58AgCeHQAACgAAgL2gAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAGKVAQAAAAAAAAAAAAAAAAAAAAAAAAAAAGOpAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAADi"
    "bAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA75wAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAADDJAAAQQBYAABmaQAxAOOCrAAg"
    "AGXMgQA=";

static int normalize_is(const rkm_tokenizer *t, const char *in, const char *want)
{
    char *out = NULL;
    size_t n = 0;
    int rc = rkm_tokenizer_normalize(t, in, strlen(in), &out, &n);
    int ok = rc == 0 && n == strlen(want) && !memcmp(out, want, n);
    if (!ok) fprintf(stderr, "  normalize('%s') = '%.*s', want '%s'\n", in, (int)n, out ? out : "", want);
    free(out);
    return ok;
}

static rkm_tokenizer *unigram_with(const char *normalizer, const char *pre_tokenizer)
{
    char *d = malloc(4096);
    snprintf(d, 4096,
             "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"" U2581 "\", -1], "
             "[\"a\", -1], [\"b\", -1], [\"" U2581 "a\", -1.5], [\"" U2581 "b\", -1.5]]}, \"normalizer\": %s, "
             "\"pre_tokenizer\": %s}",
             normalizer, pre_tokenizer);
    rkm_tokenizer *t = tok_from_json(d);
    CHECK_MSG(t != NULL, "%s", rkm_last_error());
    free(d);
    return t;
}

/* Precompiled, NFKC/NFD/NFKD, Strip, Replace " {2,}", Lowercase,
 * BertNormalizer; WhitespaceSplit before Metaspace. */
static void check_normalizers(void)
{
    char norm[2048];
    snprintf(norm, sizeof norm, "{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"%s\"}", small_charsmap_b64);
    rkm_tokenizer *t = unigram_with(norm, "null");
    if (t) {
        CHECK(normalize_is(t, "abcab", "X"));
        CHECK(normalize_is(t, "xaby", "xXy"));
        CHECK(normalize_is(t, "\xef\xac\x81\xe2\x91\xa0", "fi1"));
        CHECK(normalize_is(t, "\xef\xbd\xb6\xef\xbe\x9e\xef\xbd\xb6", "\xe3\x82\xac\xef\xbd\xb6"));
        CHECK(normalize_is(t, U2581 "\xc3\xa9" "a", " e\xcc\x81" "A"));
        CHECK(normalize_is(t, "aab\xc3\xa9", "AXe\xcc\x81"));
        CHECK(normalize_is(t, "", ""));
        rkm_tokenizer_free(t);
    }
    /* a corrupt trie (every unit 0xFFFFFFFF: labels never match, offsets
     * far outside) is walked safely: nothing matches */
    t = unigram_with("{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"EAAAAP////////////////////8A\"}", "null");
    if (t) {
        char *o = NULL;
        size_t on;
        CHECK(rkm_tokenizer_normalize(t, "ab\xff" "c", 4, &o, &on) == RKM_EINVAL); /* invalid UTF-8 */
        CHECK(normalize_is(t, "abc \xe2\x91\xa0", "abc \xe2\x91\xa0"));
        rkm_tokenizer_free(t);
    }
    /* the Unicode forms (JS normalize() agrees on every code point: see
     * test-tokenizer-ref.sh), Strip, Replace " {2,}", Lowercase */
    t = unigram_with("{\"type\": \"NFKC\"}", "null");
    if (t) {
        CHECK(normalize_is(t, "\xef\xac\x81 \xe2\x91\xa0 \xef\xbd\xb6\xef\xbe\x9e e\xcc\x81", "fi 1 \xe3\x82\xac \xc3\xa9"));
        rkm_tokenizer_free(t);
    }
    t = unigram_with("{\"type\": \"NFKD\"}", "null");
    if (t) {
        CHECK(normalize_is(t, "\xef\xac\x81\xc3\xa9", "fie\xcc\x81"));
        rkm_tokenizer_free(t);
    }
    t = unigram_with("{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFD\"}, {\"type\": \"Strip\", "
                     "\"strip_left\": false, \"strip_right\": true}, {\"type\": \"Replace\", \"pattern\": {\"Regex\": "
                     "\" {2,}\"}, \"content\": \"" U2581 "\"}, {\"type\": \"Lowercase\"}]}",
                     "null");
    if (t) {
        CHECK(normalize_is(t, "  \xc3\x89T\xc3\x89  \xc4\xb0 x \t\xe3\x80\x80", U2581 "e\xcc\x81te\xcc\x81" U2581 "i\xcc\x87 x"));
        rkm_tokenizer_free(t);
    }
    /* BertNormalizer: controls dropped (VT and FF too: they are Cc),
     * whitespace -> ' ', CJK padded, accents stripped, lowercase */
    t = unigram_with("{\"type\": \"BertNormalizer\", \"clean_text\": true, \"handle_chinese_chars\": true, "
                     "\"strip_accents\": null, \"lowercase\": true}",
                     "null");
    if (t) {
        CHECK(normalize_is(t, "H\xc3\xa9llo\tW\x01O\x0bR\x0cLD\xe4\xb8\xad\xf0\xa0\x80\x80!", "hello world \xe4\xb8\xad  \xf0\xa0\x80\x80 !"));
        rkm_tokenizer_free(t);
    }
    /* WhitespaceSplit then Metaspace (T5): every word gets its own U+2581,
     * whitespace of every kind separates words */
    t = unigram_with("null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"WhitespaceSplit\"}, {\"type\": "
                             "\"Metaspace\", \"replacement\": \"" U2581 "\", \"prepend_scheme\": \"always\"}]}");
    if (t) {
        CHECK(tok_encode_is(t, "  ab\t\xe3\x80\x80 b ", (const int32_t[]){4, 3, 5}, 3));
        CHECK(tok_encode_is(t, "   ", NULL, 0));
        rkm_tokenizer_free(t);
    }
    /* the Unicode helpers the normalizers use */
    uint32_t lo[2];
    CHECK(rkm_unicode_lower(0x130, lo) == 2 && lo[0] == 'i' && lo[1] == 0x307);
    CHECK(rkm_unicode_lower(0x3A3, lo) == 1 && lo[0] == 0x3C3); /* no Final_Sigma */
    CHECK(rkm_unicode_lower(0x1E9E, lo) == 1 && lo[0] == 0xDF);
    CHECK(rkm_unicode_is_mn(0x301) && !rkm_unicode_is_mn(0x903) && !rkm_unicode_is_mn('a'));
    size_t n;
    char *r = rkm_unicode_normalize("\xef\xb7\xba", 3, RKM_NF_NFKD, &n); /* U+FDFA: 18 code points */
    CHECK(r && n == 33);
    free(r);
    CHECK(rkm_unicode_normalize("a", 1, 7, &n) == NULL);
}

/* WordPiece: greedy longest match with "##" continuations, unknown words,
 * max_input_chars_per_word, BertPreTokenizer, the WordPiece decoder. */
static void check_wordpiece(void)
{
    rkm_tokenizer *t = tok_from_json(
        "{\"added_tokens\": [{\"id\": 0, \"content\": \"[UNK]\", \"special\": true}, {\"id\": 1, \"content\": "
        "\"[CLS]\", \"special\": true}, {\"id\": 2, \"content\": \"[SEP]\", \"special\": true}], "
        "\"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": true}, \"pre_tokenizer\": {\"type\": "
        "\"BertPreTokenizer\"}, \"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 2], "
        "\"cls\": [\"[CLS]\", 1]}, \"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true}, "
        "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\", "
        "\"max_input_chars_per_word\": 10, \"vocab\": {\"[UNK]\": 0, \"[CLS]\": 1, \"[SEP]\": 2, \"un\": 3, "
        "\"##aff\": 4, \"##able\": 5, \"u\": 6, \"##n\": 7, \".\": 8, \"do\": 9, \"##n\": 7, \"'\": 10, \"t\": 11, "
        "\"##a\": 12, \"##ff\": 13}}}");
    CHECK_MSG(t != NULL, "%s", rkm_last_error());
    if (!t) return;
    CHECK(!strcmp(rkm_tokenizer_model_name(t), "bert"));
    /* "unaffable": un + ##aff + ##able (longest first: ##aff beats ##a) */
    CHECK(tok_encode_is(t, "UnAffable.", (const int32_t[]){3, 4, 5, 8}, 4));
    /* "unaffables" has no piece for the final "s": the whole word is [UNK] */
    CHECK(tok_encode_is(t, "unaffables don't", (const int32_t[]){0, 9, 7, 10, 11}, 5));
    /* 11 characters > max_input_chars_per_word 10 */
    CHECK(tok_encode_is(t, "unaffaffaff", (const int32_t[]){0}, 1));
    CHECK(tok_encode_is(t, "unaffaffa", (const int32_t[]){3, 4, 4, 12}, 4));
    int32_t ids[8];
    CHECK_EQ_INT(rkm_tokenizer_encode(t, "un", 2, ids, 8, 1, 0), 3); /* [CLS] un [SEP] */
    CHECK(ids[0] == 1 && ids[1] == 3 && ids[2] == 2);
    char out[64];
    /* the decoder: ## joins, others get a space; cleanup (per token, as
     * the references do) removes the space before '.' */
    int n = rkm_tokenizer_decode(t, (const int32_t[]){3, 4, 5, 9, 7, 10, 11, 8}, 8, out, sizeof out);
    CHECK_EQ_INT(n, 18);
    out[n > 0 && n < 64 ? n : 0] = 0;
    CHECK_MSG(!strcmp(out, "unaffable don ' t."), "decoded '%s'", out);
    rkm_detok d;
    rkm_detok_init(&d);
    char all[64] = "";
    size_t k = 0;
    for (int i = 0; i < 8; i++) {
        char piece[64];
        int m = rkm_detok_push(&d, t, (const int32_t[]){3, 4, 5, 9, 7, 10, 11, 8}[i], piece, sizeof piece);
        CHECK(m >= 0);
        if (m > 0 && k + (size_t)m < sizeof all) memcpy(all + k, piece, (size_t)m), k += (size_t)m;
    }
    CHECK(k == (size_t)n && !memcmp(all, out, k));
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    if (w) {
        CHECK(rkm_tokenizer_write_gguf(t, w) == RKM_EUNSUPPORTED);
        rkm_gguf_writer_free(w);
    }
    rkm_tokenizer_free(t);
    /* no unk token: an unknown word is an error */
    t = tok_from_json("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}");
    CHECK(t != NULL);
    if (t) {
        CHECK(tok_encode_is(t, "a", (const int32_t[]){0}, 1));
        CHECK(rkm_tokenizer_encode(t, "b", 1, ids, 8, 0, 0) == RKM_EINVAL);
        rkm_tokenizer_free(t);
    }
}

/* Writes a GGUF "t5" vocabulary of n tokens; flags: bit 0
 * add_space_prefix, bit 1 remove_extra_whitespaces (-1: neither key);
 * a charsmap array of cmap_n elements of cmap_type if cmap. */
static int write_t5_gguf(const char *path, const char *const *toks, const float *scores, const int32_t *types, int n,
                         int flags, int cmap_type, const void *cmap, int cmap_n)
{
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    if (!w) return RKM_ENOMEM;
    rkm_gguf_writer_set_str(w, "tokenizer.ggml.model", "t5");
    rkm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, (uint64_t)n);
    rkm_gguf_writer_set_arr(w, "tokenizer.ggml.scores", RKM_GGUF_FLOAT32, scores, (uint64_t)n);
    if (types) rkm_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RKM_GGUF_INT32, types, (uint64_t)n);
    if (flags >= 0) {
        rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", flags & 1);
        rkm_gguf_writer_set_bool(w, "tokenizer.ggml.remove_extra_whitespaces", flags >> 1);
    }
    if (cmap) rkm_gguf_writer_set_arr(w, "tokenizer.ggml.precompiled_charsmap", cmap_type, cmap, (uint64_t)cmap_n);
    int rc = rkm_gguf_writer_begin(w, path);
    if (!rc) rc = rkm_gguf_writer_finish(w);
    rkm_gguf_writer_free(w);
    return rc;
}

/* GGUF "t5": written from tokenizer.json Unigram vocabularies and read
 * back; the charsmap travels as a u8 array; llama.cpp's whitespace flags. */
static void check_ugm_gguf(void)
{
    char norm[2048];
    snprintf(norm, sizeof norm, "{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"%s\"}", small_charsmap_b64);
    rkm_tokenizer *t = unigram_with(norm, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                                          "\"WhitespaceSplit\"}, {\"type\": \"Metaspace\", \"replacement\": \"" U2581
                                          "\", \"prepend_scheme\": \"always\"}]}");
    if (!t) return;
    char path[512];
    snprintf(path, sizeof path, "%s/t5.gguf", test_tmpdir());
    rkm_tokenizer *g = tok_gguf_round_trip(t, path);
    if (g) {
        CHECK(!strcmp(rkm_tokenizer_model_name(g), "t5"));
        /* charsmap, then spaces merged and one U+2581 before each word */
        CHECK(normalize_is(g, "  xaby  ab ", U2581 "xXy" U2581 "X"));
        /* (only spaces: WhitespaceSplit also splits at tabs and other
         * White_Space that this charsmap keeps, llama.cpp's rules do not) */
        const char *texts[] = {"  a b  ab ba ", "aab", "abc abcb", "x", "", "b    a", "\xef\xac\x81 a"};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            int32_t *x = NULL, *y = NULL;
            int nx = tok_encode_vec(t, texts[i], strlen(texts[i]), &x, 1), ny = tok_encode_vec(g, texts[i], strlen(texts[i]), &y, 1);
            CHECK_MSG(tok_ids_equal(x, nx, y, ny), "GGUF t5 differs on '%s'", texts[i]);
            free(x);
            free(y);
        }
        rkm_tokenizer_free(g);
    }
    rkm_tokenizer_free(t);
    /* llama.cpp's flags without a charsmap: prefix only, merge only */
    for (int flags = 0; flags < 4; flags++) {
        const char *toks[] = {"<pad>", "</s>", "<unk>", U2581, "a", U2581 "a"};
        const float scores[] = {0, 0, 0, -1, -1, -1.5f};
        const int32_t types[] = {3, 3, 2, 1, 1, 1};
        snprintf(path, sizeof path, "%s/t5-%d.gguf", test_tmpdir(), flags);
        CHECK_EQ_INT(write_t5_gguf(path, toks, scores, types, 6, flags, 0, NULL, 0), 0);
        t = rkm_tokenizer_load(path, NULL);
        CHECK_MSG(t != NULL, "%s", rkm_last_error());
        if (!t) continue;
        static const char *const want[4][2] = {
            {U2581 U2581 "a" U2581 U2581 "a" U2581, U2581 U2581},
            {U2581 U2581 U2581 "a" U2581 U2581 "a" U2581, U2581 U2581},
            {U2581 "a" U2581 "a", ""},
            {U2581 "a" U2581 "a", ""},
        };
        CHECK_MSG(normalize_is(t, "  a  a ", want[flags][0]), "flags %d", flags);
        CHECK_MSG(normalize_is(t, "  ", want[flags][1]), "flags %d", flags);
        CHECK(tok_encode_is(t, "a", flags & 1 || flags & 2 ? (const int32_t[]){5} : (const int32_t[]){4}, 1));
        CHECK(tok_encode_is(t, "b", flags & 1 || flags & 2 ? (const int32_t[]){3, 2} : (const int32_t[]){2}, flags ? 2 : 1));
        rkm_tokenizer_free(t);
    }
    /* a charsmap of the wrong element type, or a malformed one, is
     * refused with a message */
    const char *toks[] = {"<unk>", "a"};
    const float scores[] = {0, -1};
    const int32_t wide[] = {1, 2};
    const uint8_t short_blob[] = {8, 0, 0, 0, 0};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/t5-bad%d.gguf", test_tmpdir(), k);
        int rc = k == 0   ? write_t5_gguf(path, toks, scores, NULL, 2, -1, RKM_GGUF_INT32, wide, 2)
                 : k == 1 ? write_t5_gguf(path, toks, scores, NULL, 2, -1, RKM_GGUF_UINT8, short_blob, 5)
                          : write_t5_gguf(path, toks, scores, NULL, 2, -1, RKM_GGUF_UINT8, short_blob, 4);
        CHECK_EQ_INT(rc, 0);
        t = rkm_tokenizer_load(path, NULL);
        CHECK_MSG(t == NULL && strstr(rkm_last_error(), "charsmap"), "bad charsmap %d: %s", k, rkm_last_error());
        rkm_tokenizer_free(t);
    }
}

int main(void)
{
    check_nfc();
    check_unigram();
    check_normalizers();
    check_wordpiece();
    check_ugm_gguf();
    return test_done();
}
