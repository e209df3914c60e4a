/*
 * chat_format.c - conversation -> prompt tokens for the CLI, through
 * rkm_chat_prompt (the model's chat template, or its architecture's
 * built-in one with a warning), and the CLI's tokenizing helper. CLI
 * thread.
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
    int rc = rkm_tokenize_alloc(m, text, add_bos && allow_bos, 1, ids);
    free(text);
    return rc;
}

int rkm_tokenize_alloc(const rkm_model *m, const char *text, int add_bos, int parse_special, int32_t **ids)
{
    size_t len = strlen(text);
    int cap = (int)RKM_MIN(len + 16, (size_t)1 << 28);
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    if (!v) return rkm_err(RKM_ENOMEM, "out of memory");
    int n = rkm_tokenize(m, text, len, v, cap, add_bos, parse_special);
    if (n > cap) {
        int32_t *nv = realloc(v, sizeof(int32_t) * (size_t)n);
        if (!nv) {
            free(v);
            return rkm_err(RKM_ENOMEM, "out of memory");
        }
        v = nv;
        n = rkm_tokenize(m, text, len, v, n, add_bos, parse_special);
    }
    if (n < 0) {
        free(v);
        return n;
    }
    *ids = v;
    return n;
}
