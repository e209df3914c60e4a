/*
 * chat_format.c - conversation -> prompt tokens for the CLI, through
 * rkm_chat_prompt (the model's chat template, or its architecture's
 * built-in one with a warning). CLI thread.
 */
#include "cli/chat_format.h"

#include <stdlib.h>
#include <string.h>

#include "util/common.h"

int rkm_chat_tokens(const rkm_model *m, const rkm_chat_message *msgs, int n, int allow_bos,
                    int32_t **ids)
{
    int add_bos = 1;
    char *text = rkm_chat_prompt(m, msgs, n, 1, &add_bos);
    if (!text) return RKM_EINVAL;
    /* the template's own markers are special tokens */
    int rc = rkm_tokenize_alloc(m, text, strlen(text), add_bos && allow_bos, 1, ids);
    free(text);
    return rc;
}
