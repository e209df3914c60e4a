/*
 * tokens.h - the model's tokenizer for the layers above the public API
 * (the CLI's chat formatting and text output); tokens.c implements the
 * rkm_tokenize family of rkmojo.h on top of src/text/tokenizer.h.
 */
#ifndef RKM_RUNTIME_TOKENS_H
#define RKM_RUNTIME_TOKENS_H

#include "rkmojo.h"

struct rkm_tokenizer;

/* The tokenizer or NULL. */
const struct rkm_tokenizer *rkm_model_tokenizer(const rkm_model *m);

#endif
