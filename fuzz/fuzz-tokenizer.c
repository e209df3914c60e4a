/*
 * fuzz-tokenizer.c - libFuzzer target for the tokenizer loaders: the input
 * is a tokenizer.json document (first byte even) or a GGUF file (first
 * byte odd, read from memory). Whatever loads is then used: the input
 * itself and a few fixed strings are normalized (the normalizer chain:
 * Precompiled charsmaps, NFKC, BertNormalizer, ...), encoded (with and
 * without special tokens), decoded and streamed. Seeds in
 * fuzz/corpus/tokenizer cover every model kind (byte-level BPE, Metaspace
 * BPE, Unigram with a Precompiled charsmap from JSON and from GGUF t5,
 * GGUF gemma4, WordPiece, NFKC). Build: `make fuzz`; run:
 * build-fuzz/fuzz/fuzz-tokenizer -max_len=65536 corpus_dir
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const rkm_tokenizer *t, const char *s, size_t n)
{
    char *norm = NULL;
    size_t norm_n;
    if (rkm_tokenizer_normalize(t, s, n, &norm, &norm_n) == 0) free(norm);
    int32_t ids[512];
    for (int special = 0; special < 2; special++) {
        int k = rkm_tokenizer_encode(t, s, n, ids, 512, 1, special);
        if (k < 0) continue;
        if (k > 512) k = 512;
        char out[4096];
        rkm_tokenizer_decode(t, ids, k, out, sizeof out);
        rkm_detok d;
        rkm_detok_init(&d);
        for (int i = 0; i < k; i++) rkm_detok_push(&d, t, ids[i], out, sizeof out);
        rkm_detok_flush(&d, out, sizeof out);
        for (int i = 0; i < k; i++) {
            rkm_tokenizer_piece(t, ids[i], out, 16);
            rkm_tokenizer_is_eog(t, ids[i]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    rkm_tokenizer *t = NULL;
    rkm_gguf *g = NULL;
    if (data[0] & 1) {
        g = rkm_gguf_open_mem(data + 1, size - 1);
        if (g) t = rkm_tokenizer_from_gguf(g);
    } else {
        t = rkm_tokenizer_from_json((const char *)data + 1, size - 1, NULL, 0);
    }
    if (t) {
        static const char *const texts[] = {
            "Hello world! It's 2024.", "  \n\n\t x", "<|im_start|>user\n<s></s>", "\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x9a\x80",
            "e\xcc\x81\xcc\xa3", "", "  ab\tc  \xef\xac\x81 \xef\xbd\xb6\xef\xbe\x9e [CLS] unaffable",
        };
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) exercise(t, texts[i], strlen(texts[i]));
        exercise(t, (const char *)data + 1, size - 1 < 2048 ? size - 1 : 2048);
        rkm_tokenizer_free(t);
    }
    rkm_gguf_close(g);
    return 0;
}
