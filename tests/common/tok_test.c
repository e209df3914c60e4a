/*
 * tok_test.c - helpers the tokenizer tests share (tok_test.h).
 */
#include "tok_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "format/gguf.h"
#include "util/common.h"

int tok_encode_vec(const rkm_tokenizer *t, const char *s, size_t n, int32_t **ids, int parse_special)
{
    int need = rkm_tokenizer_encode(t, s, n, NULL, 0, 0, parse_special);
    if (need < 0) return need;
    *ids = malloc(((size_t)need + 1) * sizeof **ids);
    int got = rkm_tokenizer_encode(t, s, n, *ids, need, 0, parse_special);
    return got;
}

int tok_ids_equal(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, (size_t)na * sizeof *a));
}

rkm_tokenizer *tok_from_json(const char *json)
{
    return rkm_tokenizer_from_json(json, strlen(json), NULL, 0);
}

int tok_encode_is(const rkm_tokenizer *t, const char *text, const int32_t *want, int n_want)
{
    int32_t ids[64];
    int n = rkm_tokenizer_encode(t, text, strlen(text), ids, 64, 0, 0);
    if (n != n_want || !tok_ids_equal(ids, n, want, n_want)) {
        printf("  encode(\"%s\") gave %d ids:", text, n);
        for (int i = 0; i < n && i < 64; i++) printf(" %d", (int)ids[i]);
        printf("\n");
        return 0;
    }
    return 1;
}

rkm_tokenizer *tok_gguf_round_trip(const rkm_tokenizer *t, const char *path)
{
    return tok_gguf_round_trip_arch(t, path, NULL);
}

rkm_tokenizer *tok_gguf_round_trip_arch(const rkm_tokenizer *t, const char *path, const char *arch)
{
    rkm_gguf_writer *w = rkm_gguf_writer_new();
    CHECK(w != NULL);
    if (!w) return NULL;
    int rc = rkm_tokenizer_write_gguf_arch(t, w, arch);
    CHECK_EQ_INT(rc, 0);
    if (!rc) rc = rkm_gguf_writer_begin(w, path);
    if (!rc) rc = rkm_gguf_writer_finish(w);
    CHECK_MSG(rc == 0, "writing %s: %s", path, rkm_last_error());
    rkm_gguf_writer_free(w);
    rkm_tokenizer *r = rc ? NULL : rkm_tokenizer_load(path, NULL);
    CHECK_MSG(r != NULL, "reading back %s: %s", path, rkm_last_error());
    return r;
}
