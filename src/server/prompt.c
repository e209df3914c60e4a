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
#include "server/tools.h"

#include "runtime/tokens.h"
#include "text/tokenizer.h"
#include "util/common.h"

/* Renders messages (sys_override replaces any system message, as Ollama's
 * generate "system" does) with the template variables v (its own
 * members, then "messages" as templates read them: role, content, and
 * tool_calls / tool_call_id / name where the request has them). NULL +
 * rkm_err on failure. */
static char *render(const rkm_model *m, const srv_msg *msgs, int n, const char *sys_override,
                    int *add_bos, cJSON *v)
{
    cJSON *list = cJSON_AddArrayToObject(v, "messages");
    int ok = list != NULL;
    if (ok && sys_override) {
        cJSON *o = cJSON_CreateObject();
        ok = cJSON_AddItemToArray(list, o) && cJSON_AddStringToObject(o, "role", "system") &&
             cJSON_AddStringToObject(o, "content", sys_override);
    }
    for (int i = 0; ok && i < n; i++) {
        if (sys_override && !strcmp(msgs[i].role, "system")) continue;
        cJSON *o = cJSON_CreateObject();
        ok = cJSON_AddItemToArray(list, o) && cJSON_AddStringToObject(o, "role", msgs[i].role) &&
             cJSON_AddStringToObject(o, "content", msgs[i].content);
        if (ok && msgs[i].tool_calls) ok = cJSON_AddItemToObject(o, "tool_calls", cJSON_Duplicate(msgs[i].tool_calls, 1));
        if (ok && msgs[i].tool_call_id) ok = cJSON_AddStringToObject(o, "tool_call_id", msgs[i].tool_call_id) != NULL;
        if (ok && msgs[i].name) ok = cJSON_AddStringToObject(o, "name", msgs[i].name) != NULL;
    }
    char *vars = ok ? cJSON_PrintUnformatted(v) : NULL;
    if (!vars) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    char *out = rkm_chat_prompt_vars(m, NULL, 0, 1, add_bos, vars);
    cJSON_free(vars);
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

char *srv_prompt_text(const rkm_model *m, const srv_request *rq, int *add_bos, char *err, size_t errcap)
{
    char *text = NULL;
    *add_bos = 1;
    /* the template's switches (enable_thinking, reasoning_effort) and the tools */
    cJSON *v = cJSON_CreateObject();
    if (!v) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    if (rq->think >= 0) cJSON_AddBoolToObject(v, "enable_thinking", rq->think);
    if (rq->reasoning_effort) cJSON_AddStringToObject(v, "reasoning_effort", rq->reasoning_effort);
    if (srv_tools_active(rq)) cJSON_AddItemToObject(v, "tools", cJSON_Duplicate(rq->tools, 1));
    if (rq->kind == SRV_OPENAI_CHAT || rq->kind == SRV_OLLAMA_CHAT) {
        text = render(m, rq->msgs, rq->n_msgs, NULL, add_bos, v);
    } else if (rq->kind == SRV_OLLAMA_GENERATE && !rq->raw) {
        srv_msg user = {.role = (char *)"user", .content = rq->prompt ? rq->prompt : (char *)""};
        text = render(m, &user, 1, rq->system, add_bos, v);
    } else {
        text = strdup(rq->prompt ? rq->prompt : "");
        *add_bos = !text || !starts_with_bos(m, text);
    }
    cJSON_Delete(v);
    if (!text) snprintf(err, errcap, "chat template: %s", rkm_last_error());
    return text;
}

/* The prompt's text with the prefill after it (malloc'd), *add_bos and
 * *think_inside set; NULL + err. */
static char *full_text(const rkm_model *m, const srv_request *rq, const char *prefill, int *add_bos, int *think_inside,
                       char *err, size_t errcap)
{
    *think_inside = 0;
    *add_bos = 1;
    char *text = srv_prompt_text(m, rq, add_bos, err, errcap);
    if (!text) return NULL;
    if (prefill && *prefill) { /* the start of the reply, written for the model */
        size_t a = strlen(text), b = strlen(prefill);
        char *t = realloc(text, a + b + 1);
        if (!t) {
            free(text);
            snprintf(err, errcap, "out of memory");
            return NULL;
        }
        memcpy(t + a, prefill, b + 1);
        text = t;
    }
    if (!(rq->kind == SRV_OPENAI_COMPLETION || (rq->kind == SRV_OLLAMA_GENERATE && rq->raw)))
        *think_inside = srv_think_prompt_inside(text);
    return text;
}

int srv_prompt_tokens(const rkm_model *m, const srv_request *rq, const char *prefill, int32_t **ids, int *n_ids,
                      int *think_inside, char *err, size_t errcap)
{
    *think_inside = 0;
    *ids = NULL;
    *n_ids = 0;
    if (rq->kind == SRV_OPENAI_COMPLETION && rq->suffix) return fim_tokens(m, rq, ids, n_ids, err, errcap);
    int add_bos = 1;
    char *text = full_text(m, rq, prefill, &add_bos, think_inside, err, errcap);
    if (!text) return RKM_EINVAL;
    int rc = tokenize(m, text, add_bos, 1, ids, n_ids, err, errcap);
    free(text);
    return rc;
}

int srv_prompt_media(const rkm_model *m, const srv_request *rq, const char *prefill, const rkm_vision_hparams *vp,
                     rkm_image *imgs, rkm_media_prompt *out, int *think_inside, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (rq->kind == SRV_OPENAI_COMPLETION && rq->suffix) {
        for (int i = 0; i < rq->n_images; i++) rkm_image_free(&imgs[i]);
        snprintf(err, errcap, "images cannot go with 'suffix' (fill in the middle)");
        return RKM_EINVAL;
    }
    int add_bos = 1;
    char *text = full_text(m, rq, prefill, &add_bos, think_inside, err, errcap);
    int rc = text ? rkm_media_prompt_build(m, vp, text, imgs, rq->n_images, add_bos, out) : RKM_EINVAL;
    if (text && rc) snprintf(err, errcap, "%s", rkm_last_error());
    if (!text)
        for (int i = 0; i < rq->n_images; i++) rkm_image_free(&imgs[i]);
    free(text);
    return rc;
}

int srv_text_tokens(const rkm_model *m, const char *text, int32_t **ids, int *n_ids, char *err,
                    size_t errcap)
{
    return tokenize(m, text, 1, 0, ids, n_ids, err, errcap);
}
