/*
 * tokens.h - the model's text side: tokenizer and chat template, loaded
 * with the model (tokens.c implements the rkm_tokenize family of
 * rkmojo.h on top of src/text/tokenizer.h).
 */
#ifndef RKM_RUNTIME_TOKENS_H
#define RKM_RUNTIME_TOKENS_H

#include "rkmojo.h"

struct rkm_tokenizer;

/* Loads md's tokenizer and chat template (both optional). */
int rkm_model_load_text(rkm_model *m, const char *dir);
void rkm_model_free_text(rkm_model *m);
/* The tokenizer or NULL. */
const struct rkm_tokenizer *rkm_model_tokenizer(const rkm_model *m);

#endif
