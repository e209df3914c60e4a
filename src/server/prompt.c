/*
 * prompt.c - turns a request into prompt tokens: chat messages through
 * rkm_chat_prompt (the model's chat template, or the built-in one of its
 * architecture: the same rule as the CLI's), Ollama's generate prompt with
 * its optional system message, or the raw completion prompt; then the
 * tokenizer.
 *
 * Called by the worker thread only; nothing outlives a call.
 */
#include "server/prompt.h"
#include "server/reasoning.h"

#include "util/common.h"

/* Renders messages (sys_override replaces any system message, as Ollama's
 * generate "system" does). NULL + rkm_err on failure. */
static char *render(const rkm_model *m, const srv_msg *msgs, int n, const char *sys_override,
                    int *add_bos, const char *vars)
{
    rkm_chat_message *cm = calloc((size_t)n + 1, sizeof *cm);
    if (!cm) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    int k = 0;
    if (sys_override) cm[k++] = (rkm_chat_message){"system", sys_override};
    for (int i = 0; i < n; i++) {
        if (sys_override && !strcmp(msgs[i].role, "system")) continue;
        cm[k++] = (rkm_chat_message){msgs[i].role, msgs[i].content};
    }
    char *out = rkm_chat_prompt_vars(m, cm, k, 1, add_bos, vars);
    free(cm);
    return out;
}

/* A raw prompt that spells out the BOS token gets no second one (its text
 * is tokenized with special-token parsing). */
static int starts_with_bos(const rkm_model *m, const char *text)
{
    char bos[256];
    int id = rkm_token_bos(m);
    int n = id >= 0 ? rkm_token_to_piece(m, id, bos, (int)sizeof bos - 1) : 0;
    if (n <= 0) return 0;
    return !strncmp(text, bos, (size_t)n);
}

/* Tokenizes text into a malloc'd array. 0 or a negative code + err. */
static int tokenize(const rkm_model *m, const char *text, int add_bos, int parse_special,
                    int32_t **ids, int *n_ids, char *err, size_t errcap)
{
    int n = rkm_tokenize_alloc(m, text, strlen(text), add_bos, parse_special, ids);
    if (n < 0) {
        snprintf(err, errcap, "tokenizer: %s", n == RKM_ENOMEM ? "out of memory" : rkm_last_error());
        return n;
    }
    *n_ids = n;
    return 0;
}

int srv_prompt_tokens(const rkm_model *m, const srv_request *rq, int32_t **ids, int *n_ids, int *think_inside,
                      char *err, size_t errcap)
{
    *think_inside = 0;
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    int add_bos = 1;
    /* the template's switches: enable_thinking, reasoning_effort */
    cJSON *v = cJSON_CreateObject();
    if (v && rq->think >= 0) cJSON_AddBoolToObject(v, "enable_thinking", rq->think);
    if (v && rq->reasoning_effort) cJSON_AddStringToObject(v, "reasoning_effort", rq->reasoning_effort);
    char *vars = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    if (!vars) {
        snprintf(err, errcap, "out of memory");
        return RKM_ENOMEM;
    }
    if (rq->kind == SRV_OPENAI_CHAT || rq->kind == SRV_OLLAMA_CHAT) {
        text = render(m, rq->msgs, rq->n_msgs, NULL, &add_bos, vars);
    } else if (rq->kind == SRV_OLLAMA_GENERATE && !rq->raw) {
        srv_msg user = {(char *)"user", rq->prompt ? rq->prompt : (char *)""};
        text = render(m, &user, 1, rq->system, &add_bos, vars);
    } else {
        text = strdup(rq->prompt ? rq->prompt : "");
        add_bos = !text || !starts_with_bos(m, text);
    }
    cJSON_free(vars);
    if (!text) {
        snprintf(err, errcap, "chat template: %s", rkm_last_error());
        return RKM_EINVAL;
    }
    if (!(rq->kind == SRV_OPENAI_COMPLETION || (rq->kind == SRV_OLLAMA_GENERATE && rq->raw)))
        *think_inside = srv_think_prompt_inside(text);
    int rc = tokenize(m, text, add_bos, 1, ids, n_ids, err, errcap);
    free(text);
    return rc;
}

int srv_text_tokens(const rkm_model *m, const char *text, int32_t **ids, int *n_ids, char *err,
                    size_t errcap)
{
    return tokenize(m, text, 1, 0, ids, n_ids, err, errcap);
}
