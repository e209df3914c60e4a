/*
 * openai.c - the OpenAI-compatible API (openai.h): parsing
 * /v1/chat/completions, /v1/completions and /v1/embeddings bodies, and
 * writing chat.completion / text_completion objects, their SSE chunks
 * (ending in "data: [DONE]"), embedding lists (float arrays or base64) and
 * {"error":{...}} bodies. Built on the field helpers of fields.h only.
 *
 * Pure functions called from HTTP threads (parse) and the worker (format).
 */
#include "server/openai.h"

#include "server/fields.h"
#include "server/tools.h"
#include "util/base64.h"
#include "util/common.h"

#define OAI_MAX_MSGS 4096
#define OAI_MAX_INPUTS (1 << 20) /* the server's --max-inputs decides */

/* The image_url of a part: {"url": "data:..."} or the string itself. */
static const char *image_url_of(const cJSON *p)
{
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(p, "image_url");
    if (cJSON_IsObject(u)) u = cJSON_GetObjectItemCaseSensitive(u, "url");
    return cJSON_IsString(u) ? u->valuestring : NULL;
}

/* A message's content as text: a string, or an array of parts whose text
 * parts are joined and whose image_url parts become SRV_MEDIA_MARKER at
 * their place, the image added to r->images. */
static int text_of_content(srv_request *r, int msg, const cJSON *c, char **out, char *err, size_t errcap)
{
    if (cJSON_IsString(c)) {
        *out = strdup(c->valuestring);
        goto done;
    }
    if (cJSON_IsNull(c) || !c) {
        *out = strdup("");
        goto done;
    }
    if (!cJSON_IsArray(c)) {
        snprintf(err, errcap, "message 'content' must be a string or an array of parts");
        return -1;
    }
    size_t n = 0;
    const cJSON *p;
    int k = 0;
    cJSON_ArrayForEach(p, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        const int is_image = cJSON_IsString(type) && !strcmp(type->valuestring, "image_url");
        if (is_image) {
            char where[64];
            snprintf(where, sizeof where, "messages[%d].content[%d].image_url", msg, k);
            const char *url = image_url_of(p);
            if (!url) {
                snprintf(err, errcap, "%s must be an object with a 'url' string", where);
                return -1;
            }
            if (srv_add_image(r, url, 1, where, err, errcap)) return -1;
            n += strlen(SRV_MEDIA_MARKER);
        } else if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            snprintf(err, errcap, "messages[%d].content[%d]: only text and image_url content parts are supported", msg, k);
            return -1;
        } else {
            n += strlen(text->valuestring);
        }
        k++;
    }
    *out = malloc(n + 1);
    if (!*out) goto done;
    (*out)[0] = 0;
    n = 0;
    cJSON_ArrayForEach(p, c) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        const char *t = cJSON_IsString(text) && !image_url_of(p) ? text->valuestring : SRV_MEDIA_MARKER;
        size_t l = strlen(t);
        memcpy(*out + n, t, l + 1);
        n += l;
    }
done:
    if (!*out) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    return 0;
}

static int parse_messages(srv_request *r, const cJSON *msgs, char *err, size_t errcap)
{
    if (!cJSON_IsArray(msgs)) {
        snprintf(err, errcap, "'messages' must be an array");
        return -1;
    }
    int n = cJSON_GetArraySize(msgs);
    if (n > OAI_MAX_MSGS) {
        snprintf(err, errcap, "at most %d messages", OAI_MAX_MSGS);
        return -1;
    }
    r->msgs = calloc((size_t)RKM_MAX(n, 1), sizeof *r->msgs);
    if (!r->msgs) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        if (!cJSON_IsObject(m)) {
            snprintf(err, errcap, "messages[%d] must be an object", r->n_msgs);
            return -1;
        }
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role)) {
            snprintf(err, errcap, "messages[%d].role must be a string", r->n_msgs);
            return -1;
        }
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) rs = "system"; /* OpenAI's newer name */
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") &&
            strcmp(rs, "tool")) {
            snprintf(err, errcap, "messages[%d].role '%.32s' is not one of system, user, assistant, tool",
                     r->n_msgs, rs);
            return -1;
        }
        srv_msg *dst = &r->msgs[r->n_msgs];
        if (!(dst->role = strdup(rs))) {
            snprintf(err, errcap, "out of memory");
            return -1;
        }
        r->n_msgs++;
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (text_of_content(r, r->n_msgs - 1, content, &dst->content, err, errcap)) return -1;
        if (srv_get_msg_tools(r, dst, m, err, errcap)) return -1;
    }
    return 0;
}

/* OpenAI's sampler fields, then extensions in the style of llama.cpp's
 * server; unset ones keep rkm_sampler_params_default's values. */
static const srv_sp_key sampling[] = {
    {"temperature", SRV_SP_TEMPERATURE, 0, 2},
    {"top_p", SRV_SP_TOP_P, 0, 1},
    {"presence_penalty", SRV_SP_PRESENCE_PENALTY, -2, 2},
    {"frequency_penalty", SRV_SP_FREQUENCY_PENALTY, -2, 2},
    {"top_k", SRV_SP_TOP_K, 0, 1 << 20},
    {"min_p", SRV_SP_MIN_P, 0, 1},
    {"repeat_penalty", SRV_SP_REPEAT_PENALTY, 0, 10},
};

/* response_format: text (none), json_object (any object), json_schema
 * ({name, schema, strict}); and llama.cpp's "grammar" extension (GBNF). */
static int parse_response_format(srv_request *r, const cJSON *root, char *err, size_t errcap)
{
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    if (gr && !cJSON_IsNull(gr)) {
        if (!cJSON_IsString(gr)) {
            snprintf(err, errcap, "'grammar' must be a string (GBNF)");
            return -1;
        }
        if (rf && !cJSON_IsNull(rf)) {
            snprintf(err, errcap, "give 'grammar' or 'response_format', not both");
            return -1;
        }
        return srv_set_gbnf(r, gr->valuestring, err, errcap);
    }
    if (!rf || cJSON_IsNull(rf)) return 0;
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(ty)) {
        snprintf(err, errcap, "'response_format' must be an object with a 'type'");
        return -1;
    }
    if (!strcmp(ty->valuestring, "text")) return 0;
    if (!strcmp(ty->valuestring, "json_object")) return srv_set_grammar(r, NULL, 1, err, errcap);
    if (!strcmp(ty->valuestring, "json_schema")) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(js, "schema");
        if (!cJSON_IsObject(js) || (sc && !cJSON_IsObject(sc) && !cJSON_IsBool(sc))) {
            snprintf(err, errcap, "'response_format.json_schema' must be an object with a 'schema' object");
            return -1;
        }
        /* no schema: any JSON object, as OpenAI */
        return sc ? srv_set_grammar(r, sc, 0, err, errcap) : srv_set_grammar(r, NULL, 1, err, errcap);
    }
    snprintf(err, errcap, "'response_format.type' must be text, json_object or json_schema");
    return -1;
}

int srv_openai_parse(srv_request *r, const cJSON *root, char *err, size_t errcap)
{
    if (srv_get_string(root, "model", &r->model, err, errcap)) return -1;
    if (!r->model && !(r->model = strdup(""))) goto oom;

    if (r->kind == SRV_OPENAI_EMBED) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input");
        if (srv_get_inputs(r, in, OAI_MAX_INPUTS, err, errcap)) return -1;
        char *fmt = NULL;
        if (srv_get_string(root, "encoding_format", &fmt, err, errcap)) return -1;
        if (fmt && strcmp(fmt, "float") && strcmp(fmt, "base64")) {
            free(fmt);
            snprintf(err, errcap, "'encoding_format' must be \"float\" or \"base64\"");
            return -1;
        }
        r->embed_base64 = fmt && !strcmp(fmt, "base64");
        free(fmt);
        double d = 0;
        if (srv_get_number(root, "dimensions", 1, 1 << 20, &d, err, errcap)) return -1;
        r->dimensions = (int)d;
        return 0;
    }

    if (r->kind == SRV_OPENAI_CHAT) {
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
        if (!msgs) {
            snprintf(err, errcap, "'messages' is required");
            return -1;
        }
        if (parse_messages(r, msgs, err, errcap)) return -1;
        if (r->n_msgs == 0) {
            snprintf(err, errcap, "'messages' must not be empty");
            return -1;
        }
        if (srv_get_tools(r, root, err, errcap)) return -1;
    } else {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
        if (!cJSON_IsString(p)) {
            snprintf(err, errcap, "'prompt' is required and must be a string");
            return -1;
        }
        if (!(r->prompt = strdup(p->valuestring))) goto oom;
        if (srv_get_bool(root, "echo", &r->echo, err, errcap)) return -1;
        if (srv_get_string(root, "suffix", &r->suffix, err, errcap)) return -1;
    }

    double v;
    v = 1;
    if (srv_get_number(root, "n", 1, SRV_MAX_CHOICES, &v, err, errcap)) return -1;
    r->n_choices = (int)v;
    if (srv_get_bool(root, "stream", &r->stream, err, errcap)) return -1;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) {
            snprintf(err, errcap, "'stream_options' must be an object");
            return -1;
        }
        if (srv_get_bool(so, "include_usage", &r->include_usage, err, errcap)) return -1;
    }
    v = -1;
    if (srv_get_number(root, "max_tokens", 0, 1 << 30, &v, err, errcap)) return -1;
    if (srv_get_number(root, "max_completion_tokens", 0, 1 << 30, &v, err, errcap)) return -1;
    if (v >= 0) r->max_tokens = (int)v;
    if (srv_get_sampling(root, sampling, (int)RKM_ARRAY_LEN(sampling), r, err, errcap)) return -1;
    if (srv_get_bool(root, "cache_prompt", &r->cache_prompt, err, errcap)) return -1;
    if (srv_get_bool(root, "ignore_eos", &r->ignore_eos, err, errcap)) return -1;
    if (srv_get_seed(root, "seed", r, err, errcap)) return -1;
    if (srv_get_stop(root, "stop", r, err, errcap)) return -1;
    if (parse_response_format(r, root, err, errcap)) return -1;
    /* reasoning: reasoning_effort, and chat_template_kwargs.enable_thinking
     * (vLLM's and llama.cpp's way to switch thinking off) */
    if (r->kind == SRV_OPENAI_CHAT) {
        const cJSON *eff = cJSON_GetObjectItemCaseSensitive(root, "reasoning_effort");
        if (eff && !cJSON_IsNull(eff) && (!cJSON_IsString(eff) || srv_set_effort(r, eff->valuestring, err, errcap))) {
            if (!cJSON_IsString(eff)) snprintf(err, errcap, "'reasoning_effort' must be a string");
            return -1;
        }
        const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
        if (kw && !cJSON_IsNull(kw)) {
            const cJSON *et = cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking");
            if (!cJSON_IsObject(kw) || (et && !cJSON_IsBool(et))) {
                snprintf(err, errcap, "'chat_template_kwargs' must be an object; its enable_thinking a boolean");
                return -1;
            }
            if (et) r->think = cJSON_IsTrue(et);
        }
    }
    /* chat: logprobs true + top_logprobs 0..20; completions: logprobs 0..5 */
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(root, "logprobs");
    if (r->kind == SRV_OPENAI_CHAT) {
        if (srv_get_bool(root, "logprobs", &r->logprobs, err, errcap)) return -1;
        v = 0;
        if (srv_get_number(root, "top_logprobs", 0, 20, &v, err, errcap)) return -1;
        if (v > 0 && !r->logprobs) {
            snprintf(err, errcap, "'top_logprobs' needs 'logprobs': true");
            return -1;
        }
        r->top_logprobs = (int)v;
    } else if (lp && !cJSON_IsNull(lp)) {
        v = 0;
        if (srv_get_number(root, "logprobs", 0, 5, &v, err, errcap)) return -1;
        r->logprobs = 1;
        r->top_logprobs = (int)v;
    }
    return 0;
oom:
    snprintf(err, errcap, "out of memory");
    return -1;
}

/* ------------------------------------------------------------ output */

char *srv_openai_error(int status, const char *msg)
{
    const char *type = status == 401   ? "authentication_error"
                       : status == 403 ? "permission_error"
                       : status == 404 ? "not_found_error"
                       : status == 429 || status == 503 ? "server_overloaded"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    if (status == 401)
        cJSON_AddStringToObject(e, "code", "invalid_api_key");
    else if (status == 404) /* a model the server does not have, or no such endpoint */
        cJSON_AddStringToObject(e, "code", !strncmp(msg, "model ", 6) ? "model_not_found" : "not_found");
    else
        cJSON_AddNullToObject(e, "code");
    return srv_json_print(o);
}

static void add_usage(cJSON *o, const srv_result *r)
{
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", r->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", r->n_prompt + r->n_gen);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", r->n_cached);
}

static cJSON *envelope(const srv_result *r, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", r->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)r->created);
    cJSON_AddStringToObject(o, "model", r->model);
    cJSON_AddStringToObject(o, "system_fingerprint", "rkmojo-" RKM_VERSION_STRING);
    return o;
}

/* The choice's logprobs: chat's {"content": [...]}, or the legacy
 * completions shape (tokens, token_logprobs, top_logprobs as token ->
 * logprob maps, text_offset). */
static void add_logprobs(cJSON *c, const srv_request *rq, const srv_result *r)
{
    if (rq->kind == SRV_OPENAI_CHAT) {
        cJSON *arr = cJSON_AddArrayToObject(cJSON_AddObjectToObject(c, "logprobs"), "content");
        for (int i = r->lp_from; i < r->lp_to; i++) cJSON_AddItemToArray(arr, cJSON_Duplicate(cJSON_GetArrayItem(r->lp, i), 1));
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(c, "logprobs");
    cJSON *tok = cJSON_AddArrayToObject(o, "tokens"), *tlp = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs"), *off = cJSON_AddArrayToObject(o, "text_offset");
    for (int i = r->lp_from; i < r->lp_to; i++) {
        const cJSON *e = cJSON_GetArrayItem(r->lp, i);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "token");
        cJSON_AddItemToArray(tok, cJSON_CreateString(t->valuestring));
        cJSON_AddItemToArray(tlp, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(e, "logprob"), 1));
        cJSON *m = cJSON_CreateObject();
        for (const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "top_logprobs")->child; a; a = a->next)
            if (!cJSON_GetObjectItemCaseSensitive(m, cJSON_GetObjectItemCaseSensitive(a, "token")->valuestring))
                cJSON_AddItemToObject(m, cJSON_GetObjectItemCaseSensitive(a, "token")->valuestring,
                                      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(a, "logprob"), 1));
        cJSON_AddItemToArray(top, m);
        cJSON_AddItemToArray(off, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(e, "text_offset"), 1));
    }
}

/* OpenAI's tool_calls: arguments as a JSON string; in a stream each
 * delta names its call's index. */
static void add_tool_calls(cJSON *m, const srv_result *r, int stream)
{
    cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
    for (int i = r->tc_from; i < r->tc_to; i++) {
        const cJSON *c = cJSON_GetArrayItem(r->tool_calls, i);
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        cJSON *o = cJSON_CreateObject(), *f2;
        cJSON_AddItemToArray(arr, o);
        if (stream) cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddItemToObject(o, "id", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "id"), 0));
        cJSON_AddStringToObject(o, "type", "function");
        f2 = cJSON_AddObjectToObject(o, "function");
        cJSON_AddItemToObject(f2, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(f, "name"), 0));
        char *a = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(f, "arguments"));
        cJSON_AddStringToObject(f2, "arguments", a ? a : "{}");
        cJSON_free(a);
    }
}

/* A response or chunk with one choice: the message (chat) or delta (chat
 * stream) or text, and the finish reason (NULL: not finished yet). */
static cJSON *with_choice(const srv_request *rq, const srv_result *r, int stream, const char *text,
                          int role, const char *finish)
{
    int chat = rq->kind == SRV_OPENAI_CHAT;
    cJSON *o = envelope(r, !chat ? "text_completion" : stream ? "chat.completion.chunk" : "chat.completion");
    cJSON *c = cJSON_CreateObject();
    if (!cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c)) {
        cJSON_Delete(c);
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddNumberToObject(c, "index", r->index);
    if (chat) {
        cJSON *m = cJSON_AddObjectToObject(c, stream ? "delta" : "message");
        if (role) cJSON_AddStringToObject(m, "role", "assistant");
        int calls = r->tool_calls && r->tc_to > r->tc_from;
        /* a reasoning or tool-call delta goes alone unless answer text came
         * with it; a reply of calls alone has content null */
        if (!stream && calls && (!text || !text[0])) cJSON_AddNullToObject(m, "content");
        else if (text && !(stream && (r->reasoning || calls) && !text[0])) cJSON_AddStringToObject(m, "content", text);
        if (r->reasoning) cJSON_AddStringToObject(m, "reasoning_content", r->reasoning);
        if (calls) add_tool_calls(m, r, stream);
    } else {
        cJSON_AddStringToObject(c, "text", text ? text : "");
    }
    if (rq->logprobs && r->lp) add_logprobs(c, rq, r);
    else cJSON_AddNullToObject(c, "logprobs");
    if (finish)
        cJSON_AddStringToObject(c, "finish_reason", finish);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    return o;
}

char *srv_openai_result(const srv_request *rq, const srv_result *rs, int n)
{
    cJSON *o = with_choice(rq, &rs[0], 0, rs[0].text, 1, rs[0].finish ? rs[0].finish : "stop");
    srv_result usage = rs[0];
    cJSON *arr = o ? cJSON_GetObjectItemCaseSensitive(o, "choices") : NULL;
    for (int i = 1; o && i < n; i++) {
        cJSON *oi = with_choice(rq, &rs[i], 0, rs[i].text, 1, rs[i].finish ? rs[i].finish : "stop");
        cJSON *c = oi ? cJSON_DetachItemFromArray(cJSON_GetObjectItemCaseSensitive(oi, "choices"), 0) : NULL;
        cJSON_Delete(oi);
        if (!c || !cJSON_AddItemToArray(arr, c)) {
            cJSON_Delete(c);
            cJSON_Delete(o);
            return NULL;
        }
        usage.n_gen += rs[i].n_gen;
    }
    if (o) add_usage(o, &usage);
    return srv_json_print(o);
}

char *srv_openai_chunk(const srv_request *rq, const srv_result *r, const char *delta, int first)
{
    return srv_json_line(with_choice(rq, r, 1, delta, first, NULL), "data: ", "\n\n");
}

char *srv_openai_choice_end(const srv_request *rq, const srv_result *r)
{
    return srv_json_line(with_choice(rq, r, 1, NULL, 0, r->finish ? r->finish : "stop"), "data: ", "\n\n");
}

char *srv_openai_stream_end(const srv_request *rq, const srv_result *r)
{
    char *a = srv_openai_choice_end(rq, r), *b = srv_openai_stream_tail(rq, r);
    char *s = a && b ? malloc(strlen(a) + strlen(b) + 1) : NULL;
    if (s) strcat(strcpy(s, a), b);
    free(a);
    free(b);
    return s;
}

char *srv_openai_stream_tail(const srv_request *rq, const srv_result *r)
{
    char *b = NULL;
    if (rq->include_usage) {
        /* As OpenAI does: one more chunk with empty choices and the usage. */
        cJSON *u = envelope(r, rq->kind == SRV_OPENAI_CHAT ? "chat.completion.chunk" : "text_completion");
        cJSON_AddArrayToObject(u, "choices");
        add_usage(u, r);
        b = srv_json_line(u, "data: ", "\n\n");
    }
    const char *done = "data: [DONE]\n\n";
    size_t nb = b ? strlen(b) : 0, nd = strlen(done);
    char *s = (b || !rq->include_usage) ? malloc(nb + nd + 1) : NULL;
    if (s) {
        if (b) memcpy(s, b, nb);
        memcpy(s + nb, done, nd + 1);
    }
    free(b);
    return s;
}

char *srv_openai_stream_error(const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", "server_error");
    return srv_json_line(o, "data: ", "\n\n");
}

/* ------------------------------------------------------ embeddings */

/* A vector as base64 of its little-endian float32 bytes, as the SDKs decode. */
static char *base64_floats(const float *v, int n)
{
    unsigned char *b = malloc((size_t)n * 4 + 1);
    if (!b) return NULL;
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) b[(size_t)i * 4 + (size_t)k] = (unsigned char)(u >> (8 * k));
    }
    char *o = rkm_base64_encode(b, (size_t)n * 4);
    free(b);
    return o;
}

char *srv_openai_embeddings(const srv_request *rq, const char *model, const float *vecs, int n,
                            int dim, int n_tokens)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToArray(data, e);
        cJSON_AddStringToObject(e, "object", "embedding");
        cJSON_AddNumberToObject(e, "index", i);
        const float *v = vecs + (size_t)i * (size_t)dim;
        if (rq->embed_base64) {
            char *b = base64_floats(v, dim);
            if (!b) {
                cJSON_Delete(o);
                return NULL;
            }
            cJSON_AddStringToObject(e, "embedding", b);
            free(b);
        } else {
            srv_json_add_floats(cJSON_AddArrayToObject(e, "embedding"), v, dim);
        }
    }
    cJSON_AddStringToObject(o, "model", model);
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", n_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", n_tokens);
    return srv_json_print(o);
}
