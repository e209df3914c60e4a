/*
 * chat_prompt.c - rkm_chat_prompt (rkmojo.h): a conversation -> the prompt
 * text the model was trained on, for the CLI (run --chat, chat) and the
 * server alike, over the template engine of src/text/chat.h.
 *
 * The one rule for a model without a chat template: the built-in template
 * of its architecture (rkm_chat_builtin_for_arch; ChatML for architectures
 * without a known format), announced by one line on stderr the first time
 * each model is rendered that way, so a missing template never goes
 * unnoticed and never floods a server's log.
 *
 * Threads: any (the model is read-only); the warning's memory is one atomic.
 * Ownership: the returned text is the caller's.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rkmojo.h"
#include "runtime/tokens.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "util/common.h"

/* The template for m, warning when it is a fallback. */
static const char *template_of(const rkm_model *m)
{
    static _Atomic(const rkm_model *) warned;
    const char *tmpl = rkm_model_chat_template(m);
    if (tmpl && *tmpl) return tmpl;
    const char *name = rkm_chat_builtin_for_arch(rkm_model_arch(m));
    tmpl = rkm_chat_builtin_template(name);
    if (!tmpl) tmpl = rkm_chat_builtin_template(name = "chatml");
    if (atomic_exchange(&warned, m) != m)
        fprintf(stderr, "rkmojo: the model has no chat template; using the built-in %s template\n",
                name);
    return tmpl;
}

/* The vocabulary text of token id, "" when there is none (the template
 * then sees an empty bos_token / eos_token rather than an undefined one). */
static const char *token_text(const rkm_model *m, int id)
{
    const rkm_tokenizer *tok = rkm_model_tokenizer(m);
    const char *s = tok && id >= 0 ? rkm_tokenizer_token_text(tok, id) : NULL;
    return s ? s : "";
}

char *rkm_chat_prompt(const rkm_model *m, const rkm_chat_message *msgs, int n_msgs,
                      int add_generation_prompt, int *add_bos)
{
    return rkm_chat_prompt_vars(m, msgs, n_msgs, add_generation_prompt, add_bos, NULL);
}

char *rkm_chat_prompt_vars(const rkm_model *m, const rkm_chat_message *msgs, int n_msgs,
                           int add_generation_prompt, int *add_bos, const char *vars_json)
{
    if (!m || n_msgs < 0 || (n_msgs && !msgs)) {
        rkm_err(RKM_EINVAL, "chat prompt: bad arguments");
        return NULL;
    }
    const char *tmpl = template_of(m);
    if (!tmpl) {
        rkm_err(RKM_EUNSUPPORTED, "no chat template");
        return NULL;
    }
    /* The template's message shape is text/chat.h's; the public one mirrors it. */
    rkm_chat_msg *cm = calloc((size_t)n_msgs + 1, sizeof *cm);
    if (!cm) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n_msgs; i++) cm[i] = (rkm_chat_msg){msgs[i].role, msgs[i].content};
    const char *bos = token_text(m, rkm_token_bos(m)), *eos = token_text(m, rkm_token_eos(m));
    cJSON *extra = vars_json ? cJSON_Parse(vars_json) : NULL;
    if (vars_json && !cJSON_IsObject(extra)) {
        cJSON_Delete(extra);
        free(cm);
        rkm_err(RKM_EINVAL, "chat prompt: the variables are not a JSON object");
        return NULL;
    }
    char *text = rkm_chat_render_json(tmpl, cm, n_msgs, add_generation_prompt, bos, eos, extra);
    cJSON_Delete(extra);
    free(cm);
    /* A template that writes the BOS text itself gets no second BOS. */
    if (text && add_bos) *add_bos = !(*bos && !strncmp(text, bos, strlen(bos)));
    return text;
}
