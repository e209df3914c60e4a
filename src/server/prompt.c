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

#include "runtime/tokens.h"
#include "text/tokenizer.h"
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

/* Fill in the middle, as llama.cpp's infill: [BOS] FIM_PRE prefix FIM_SUF
 * suffix FIM_MID, for a vocabulary that has the three tokens. */
static int fim_tokens(const rkm_model *m, const srv_request *rq, int32_t **ids, int *n_ids, char *err, size_t errcap)
{
    const rkm_tokenizer *t = rkm_model_tokenizer(m);
    int pre = t ? rkm_tokenizer_special(t, RKM_TOK_FIM_PRE) : -1, suf = t ? rkm_tokenizer_special(t, RKM_TOK_FIM_SUF) : -1,
        mid = t ? rkm_tokenizer_special(t, RKM_TOK_FIM_MID) : -1;
    if (pre < 0 || suf < 0 || mid < 0) {
        snprintf(err, errcap, "'suffix': the model's vocabulary has no fill-in-the-middle tokens");
        return RKM_EINVAL;
    }
    int32_t *a = NULL, *b = NULL;
    int na = 0, nb = 0, rc = tokenize(m, rq->prompt ? rq->prompt : "", 0, 0, &a, &na, err, errcap);
    if (!rc) rc = tokenize(m, rq->suffix, 0, 0, &b, &nb, err, errcap);
    int bos = rkm_tokenizer_add_bos(t) ? rkm_token_bos(m) : -1;
    int32_t *out = rc ? NULL : malloc(sizeof(int32_t) * (size_t)(na + nb + 4));
    if (!rc && !out) rc = RKM_ENOMEM, snprintf(err, errcap, "out of memory");
    if (!rc) {
        int k = 0;
        if (bos >= 0) out[k++] = bos;
        out[k++] = pre;
        memcpy(out + k, a, sizeof(int32_t) * (size_t)na), k += na;
        out[k++] = suf;
        memcpy(out + k, b, sizeof(int32_t) * (size_t)nb), k += nb;
        out[k++] = mid;
        *ids = out;
        *n_ids = k;
    }
    free(a);
    free(b);
    return rc;
}

int srv_prompt_tokens(const rkm_model *m, const srv_request *rq, int32_t **ids, int *n_ids, int *think_inside,
                      char *err, size_t errcap)
{
    *think_inside = 0;
    if (rq->kind == SRV_OPENAI_COMPLETION && rq->suffix) {
        *ids = NULL;
        *n_ids = 0;
        return fim_tokens(m, rq, ids, n_ids, err, errcap);
    }
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
