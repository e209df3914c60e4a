/*
 * tok_test.h - helpers the tokenizer tests share (test-tokenizer.c,
 * test-tokenizer-models.c): encoding into a fresh array,
 * comparing id lists, a tokenizer from a JSON string, one encode checked
 * against expected ids, and a GGUF write/read round trip.
 */
#ifndef RKM_TEST_TOK_TEST_H
#define RKM_TEST_TOK_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

#define U2581 "\u2581" /* SentencePiece's space */

/* Encodes s into a malloc'd *ids; the count or a negative error. */
int tok_encode_vec(const rkm_tokenizer *t, const char *s, size_t n, int32_t **ids, int parse_special);
int tok_ids_equal(const int32_t *a, int na, const int32_t *b, int nb);
rkm_tokenizer *tok_from_json(const char *json);
/* 1 when text encodes to exactly want (else prints what it gave). */
int tok_encode_is(const rkm_tokenizer *t, const char *text, const int32_t *want, int n_want);
/* t written as GGUF at path and loaded back (CHECKs on the way), or NULL. */
rkm_tokenizer *tok_gguf_round_trip(const rkm_tokenizer *t, const char *path);
/* The same, written for a model of GGUF architecture arch. */
rkm_tokenizer *tok_gguf_round_trip_arch(const rkm_tokenizer *t, const char *path, const char *arch);

#endif
