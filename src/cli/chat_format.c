/*
 * chat_format.c - conversation -> prompt text with the model's chat
 * template through src/text/chat.h (the architecture's built-in fallback
 * when the model has none). CLI thread.
 */
#include "cli/chat_format.h"

#include "runtime/tokens.h"
#include "text/tokenizer.h"
#include "util/common.h"

char *rkm_chat_format(const rkm_model *m, const rkm_chat_msg *msgs, int n, int add_generation_prompt)
{
    const char *tmpl = rkm_model_chat_template(m);
    if (!tmpl) tmpl = rkm_chat_builtin_template(rkm_chat_builtin_for_arch(rkm_model_arch(m)));
    if (!tmpl) {
        rkm_err(RKM_EUNSUPPORTED, "the model has no chat template");
        return NULL;
    }
    const rkm_tokenizer *tok = rkm_model_tokenizer(m);
    int bos = rkm_token_bos(m), eos = rkm_token_eos(m);
    const char *bt = tok && bos >= 0 ? rkm_tokenizer_token_text(tok, bos) : NULL;
    const char *et = tok && eos >= 0 ? rkm_tokenizer_token_text(tok, eos) : NULL;
    return rkm_chat_render(tmpl, msgs, n, add_generation_prompt, bt, et);
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
