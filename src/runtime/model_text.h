/*
 * model_text.h - loading the tokenizer and chat template of a model
 * directory (both optional). Used by the model loader; the token API over
 * them is tokens.h / rkmojo.h.
 */
#ifndef RKM_RUNTIME_MODEL_TEXT_H
#define RKM_RUNTIME_MODEL_TEXT_H

#include "format/model_dir.h"

struct rkm_tokenizer;

/* Loads md's tokenizer (checked against the model's n_vocab) and chat
 * template from dir; each is NULL when the directory has none. On error
 * both are NULL and the message says which part failed. */
int rkm_model_text_load(const rkm_model_dir *md, const char *dir, int n_vocab, struct rkm_tokenizer **tok,
                        char **chat_template);
void rkm_model_text_free(struct rkm_tokenizer *tok, char *chat_template);

#endif
