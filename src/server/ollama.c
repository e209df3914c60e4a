/*
 * ollama.c - the Ollama-compatible API (ollama.h): parsing /api/chat,
 * /api/generate and /api/embed bodies (with their "options" and
 * "keep_alive"), and writing the NDJSON lines and final objects with
 * Ollama's nanosecond timings, embedding lists and {"error": "..."}
 * bodies. Built on the field helpers of fields.h only.
 *
 * Pure functions called from HTTP threads (parse) and the worker (format).
 */
#include "server/ollama.h"

#include <math.h>
#include <time.h>

#include "server/fields.h"
#include "server/tools.h"
#include "util/common.h"

#define OLL_MAX_MSGS 4096
#define OLL_MAX_INPUTS (1 << 20) /* the server's --max-inputs decides */

/* Ollama's option names and ranges for the sampler; unset ones keep
 * rkm_sampler_params_default's values. */
static const srv_sp_key sampling[] = {
    {"temperature", SRV_SP_TEMPERATURE, 0, 100},
    {"top_p", SRV_SP_TOP_P, 0, 1},
    {"top_k", SRV_SP_TOP_K, 0, 1 << 20},
    {"min_p", SRV_SP_MIN_P, 0, 1},
    {"repeat_penalty", SRV_SP_REPEAT_PENALTY, 0, 10},
    {"repeat_last_n", SRV_SP_REPEAT_LAST_N, -1, 1 << 20},
    {"presence_penalty", SRV_SP_PRESENCE_PENALTY, -2, 2},
    {"frequency_penalty", SRV_SP_FREQUENCY_PENALTY, -2, 2},
};

/* Seconds as Ollama's integer nanoseconds. */
static double ns(double s) { return floor(s * 1e9); }

/* Ollama's "images" of a message (msg >= 0) or of /api/generate (-1):
 * base64 strings, each added to r->images, their markers put before the
 * text in *text. */
static int add_images(srv_request *r, const cJSON *img, char **text, int msg, char *err, size_t errcap)
{
    if (!img || cJSON_IsNull(img)) return 0;
    if (!cJSON_IsArray(img)) {
        snprintf(err, errcap, "'images' must be an array of base64 strings");
        return -1;
    }
    int n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, img) {
        char where[48];
        if (msg >= 0) snprintf(where, sizeof where, "messages[%d].images[%d]", msg, n);
        else snprintf(where, sizeof where, "images[%d]", n);
        if (!cJSON_IsString(it)) {
            snprintf(err, errcap, "%s must be a base64 string", where);
            return -1;
        }
        if (srv_add_image(r, it->valuestring, 0, where, err, errcap)) return -1;
        n++;
    }
    if (n == 0) return 0;
    char *t = srv_media_prefix(n, *text ? *text : "");
    if (!t) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    free(*text);
    *text = t;
    return 0;
}

static int parse_options(srv_request *r, const cJSON *o, char *err, size_t errcap)
{
    if (!o || cJSON_IsNull(o)) return 0;
    if (!cJSON_IsObject(o)) {
        snprintf(err, errcap, "'options' must be an object");
        return -1;
    }
    if (srv_get_sampling(o, sampling, (int)RKM_ARRAY_LEN(sampling), r, err, errcap)) return -1;
    double v = -1;
    if (srv_get_number(o, "num_predict", -2, 1 << 30, &v, err, errcap)) return -1;
    r->max_tokens = v < 0 ? -1 : (int)v; /* -1 infinite, -2 fill the context: same for us */
    if (srv_get_seed(o, "seed", r, err, errcap)) return -1;
    if (srv_get_stop(o, "stop", r, err, errcap)) return -1;
    /* Other Ollama options (num_ctx, num_thread, mirostat, ...) are accepted
     * and ignored: the server's own settings decide them. */
    return 0;
}

static int parse_keep_alive(srv_request *r, const cJSON *root, char *err, size_t errcap)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(root, "keep_alive");
    if (!k || cJSON_IsNull(k)) return 0;
    double s;
    if (cJSON_IsNumber(k) && isfinite(k->valuedouble)) {
        s = k->valuedouble;
    } else if (!cJSON_IsString(k) || srv_parse_duration(k->valuestring, &s)) {
        snprintf(err, errcap, "'keep_alive' must be a number of seconds or a duration like \"5m\"");
        return -1;
    }
    r->has_keep_alive = 1;
    r->keep_alive_s = s < 0 ? -1 : s;
    return 0;
}

static int parse_messages(srv_request *r, const cJSON *msgs, char *err, size_t errcap)
{
    if (!msgs || cJSON_IsNull(msgs)) return 0; /* empty chat: load the model */
    if (!cJSON_IsArray(msgs)) {
        snprintf(err, errcap, "'messages' must be an array");
        return -1;
    }
    int n = cJSON_GetArraySize(msgs);
    if (n > OLL_MAX_MSGS) {
        snprintf(err, errcap, "at most %d messages", OLL_MAX_MSGS);
        return -1;
    }
    if (!(r->msgs = calloc((size_t)RKM_MAX(n, 1), sizeof *r->msgs))) goto oom;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        if (!cJSON_IsObject(m)) {
            snprintf(err, errcap, "messages[%d] must be an object", r->n_msgs);
            return -1;
        }
        srv_msg *d = &r->msgs[r->n_msgs];
        if (srv_get_string(m, "role", &d->role, err, errcap) ||
            srv_get_string(m, "content", &d->content, err, errcap)) {
            r->n_msgs++;
            return -1;
        }
        r->n_msgs++;
        if (!d->role || (strcmp(d->role, "system") && strcmp(d->role, "user") &&
                         strcmp(d->role, "assistant") && strcmp(d->role, "tool"))) {
            snprintf(err, errcap, "messages[%d].role must be system, user, assistant or tool",
                     r->n_msgs - 1);
            return -1;
        }
        if (!d->content && !(d->content = strdup(""))) goto oom;
        if (srv_get_msg_tools(r, d, m, err, errcap)) return -1;
        if (add_images(r, cJSON_GetObjectItemCaseSensitive(m, "images"), &d->content, r->n_msgs - 1, err, errcap))
            return -1;
    }
    return 0;
oom:
    snprintf(err, errcap, "out of memory");
    return -1;
}

int srv_ollama_parse(srv_request *r, const cJSON *root, char *err, size_t errcap)
{
    r->stream = 1; /* Ollama streams unless told not to */
    if (srv_get_string(root, "model", &r->model, err, errcap)) return -1;
    if (!r->model && srv_get_string(root, "name", &r->model, err, errcap)) return -1;
    if (!r->model || !r->model[0]) {
        snprintf(err, errcap, "model is required");
        return -1;
    }
    if (parse_keep_alive(r, root, err, errcap)) return -1;
    if (parse_options(r, cJSON_GetObjectItemCaseSensitive(root, "options"), err, errcap)) return -1;
    if (r->kind == SRV_OLLAMA_EMBED) {
        r->stream = 0;
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input");
        if (!in) in = cJSON_GetObjectItemCaseSensitive(root, "prompt"); /* legacy /api/embeddings */
        double d = 0;
        if (srv_get_number(root, "dimensions", 1, 1 << 20, &d, err, errcap)) return -1;
        r->dimensions = (int)d;
        return srv_get_inputs(r, in, OLL_MAX_INPUTS, err, errcap);
    }
    if (srv_get_bool(root, "stream", &r->stream, err, errcap)) return -1;
    if (srv_get_bool(root, "logprobs", &r->logprobs, err, errcap)) return -1;
    /* think: true / false, or gpt-oss's "low" / "medium" / "high" */
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "think");
    if (cJSON_IsBool(th)) {
        r->think = cJSON_IsTrue(th);
    } else if (cJSON_IsString(th)) {
        if (srv_set_effort(r, th->valuestring, err, errcap)) return -1;
        r->think = 1;
    } else if (th && !cJSON_IsNull(th)) {
        snprintf(err, errcap, "'think' must be true, false, \"low\", \"medium\" or \"high\"");
        return -1;
    }
    double tl = 0;
    if (srv_get_number(root, "top_logprobs", 0, 20, &tl, err, errcap)) return -1;
    r->top_logprobs = (int)tl;
    /* rkmojo's extension, as in its OpenAI API: a GBNF grammar */
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    if (gr && !cJSON_IsNull(gr)) {
        if (!cJSON_IsString(gr)) {
            snprintf(err, errcap, "'grammar' must be a string (GBNF)");
            return -1;
        }
        if (srv_set_gbnf(r, gr->valuestring, err, errcap)) return -1;
    }
        /* format: "json" (any object) or a JSON schema; "" and null: none */
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (cJSON_IsObject(fmt)) {
        if (srv_set_grammar(r, fmt, 0, err, errcap)) return -1;
    } else if (cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "json")) {
        if (srv_set_grammar(r, NULL, 1, err, errcap)) return -1;
    } else if (fmt && !cJSON_IsNull(fmt) && !(cJSON_IsString(fmt) && !fmt->valuestring[0])) {
        snprintf(err, errcap, "'format' must be \"json\" or a JSON schema object");
        return -1;
    }
    if (r->kind == SRV_OLLAMA_CHAT) {
        if (parse_messages(r, cJSON_GetObjectItemCaseSensitive(root, "messages"), err, errcap))
            return -1;
        if (srv_get_tools(r, root, err, errcap)) return -1;
    } else {
        if (srv_get_string(root, "prompt", &r->prompt, err, errcap)) return -1;
        if (srv_get_string(root, "system", &r->system, err, errcap)) return -1;
        if (srv_get_bool(root, "raw", &r->raw, err, errcap)) return -1;
        if (add_images(r, cJSON_GetObjectItemCaseSensitive(root, "images"), &r->prompt, -1, err, errcap)) return -1;
        const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(root, "context");
        if (cJSON_IsArray(ctx) && cJSON_GetArraySize(ctx) > 0) {
            snprintf(err, errcap, "'context' token arrays are not supported (the prompt cache "
                                  "reuses matching prefixes automatically)");
            return -1;
        }
    }
    if (srv_get_bool(root, "cache_prompt", &r->cache_prompt, err, errcap)) return -1;
    return 0;
}

/* ------------------------------------------------------------ output */

char *srv_ollama_error(const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", msg);
    return srv_json_print(o);
}

static cJSON *head(const srv_result *r)
{
    char t[48];
    srv_fmt_time((double)time(NULL), t, sizeof t);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", r->model);
    cJSON_AddStringToObject(o, "created_at", t);
    return o;
}

static void add_text(cJSON *o, const srv_request *rq, const srv_result *r, const char *text)
{
    if (rq->kind == SRV_OLLAMA_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(o, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", text);
        if (r->reasoning) cJSON_AddStringToObject(m, "thinking", r->reasoning);
        if (r->tool_calls && r->tc_to > r->tc_from) { /* [{function: {index, name, arguments}}] */
            cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
            for (int i = r->tc_from; i < r->tc_to; i++) {
                const cJSON *c = cJSON_GetArrayItem(r->tool_calls, i);
                const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
                cJSON *o2 = cJSON_CreateObject(), *f2 = cJSON_AddObjectToObject(o2, "function");
                cJSON_AddItemToArray(arr, o2);
                cJSON_AddItemToObject(o2, "id", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "id"), 0));
                cJSON_AddNumberToObject(f2, "index", i);
                cJSON_AddItemToObject(f2, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(f, "name"), 0));
                cJSON_AddItemToObject(f2, "arguments", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(f, "arguments"), 1));
            }
        }
    } else {
        cJSON_AddStringToObject(o, "response", text);
        if (r->reasoning) cJSON_AddStringToObject(o, "thinking", r->reasoning);
    }
}

/* Ollama's "logprobs": [{token, logprob, bytes, top_logprobs}] of the
 * tokens in this response or line. */
static void add_logprobs(cJSON *o, const srv_request *rq, const srv_result *r)
{
    if (!rq->logprobs || !r->lp) return;
    cJSON *arr = cJSON_AddArrayToObject(o, "logprobs");
    for (int i = r->lp_from; i < r->lp_to; i++) {
        cJSON *e = cJSON_Duplicate(cJSON_GetArrayItem(r->lp, i), 1);
        cJSON_DeleteItemFromObjectCaseSensitive(e, "text_offset");
        cJSON_AddItemToArray(arr, e);
    }
}

static void add_final(cJSON *o, const srv_result *r)
{
    cJSON_AddBoolToObject(o, "done", 1);
    /* Ollama says "stop" after tool calls too */
    cJSON_AddStringToObject(o, "done_reason", r->finish && strcmp(r->finish, "tool_calls") ? r->finish : "stop");
    cJSON_AddNumberToObject(o, "total_duration", ns(r->t_total_s));
    cJSON_AddNumberToObject(o, "load_duration", ns(r->t_load_s));
    cJSON_AddNumberToObject(o, "prompt_eval_count", r->n_prompt);
    cJSON_AddNumberToObject(o, "prompt_eval_duration", ns(r->t_prompt_s));
    cJSON_AddNumberToObject(o, "eval_count", r->n_gen);
    cJSON_AddNumberToObject(o, "eval_duration", ns(r->t_gen_s));
    /* Not in Ollama: how many prompt tokens came from the prompt cache. */
    cJSON_AddNumberToObject(o, "prompt_cached_count", r->n_cached);
}

char *srv_ollama_result(const srv_request *rq, const srv_result *r)
{
    cJSON *o = head(r);
    add_text(o, rq, r, r->text);
    add_logprobs(o, rq, r);
    add_final(o, r);
    return srv_json_print(o);
}

char *srv_ollama_chunk(const srv_request *rq, const srv_result *r, const char *delta)
{
    cJSON *o = head(r);
    add_text(o, rq, r, delta);
    add_logprobs(o, rq, r);
    cJSON_AddBoolToObject(o, "done", 0);
    return srv_json_line(o, "", "\n");
}

char *srv_ollama_stream_end(const srv_request *rq, const srv_result *r)
{
    cJSON *o = head(r);
    add_text(o, rq, r, "");
    add_logprobs(o, rq, r);
    add_final(o, r);
    return srv_json_line(o, "", "\n");
}

char *srv_ollama_stream_error(const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", msg);
    return srv_json_line(o, "", "\n");
}

char *srv_ollama_embeddings(const srv_request *rq, const char *model, const float *vecs, int n, int dim,
                            int n_tokens, double t_total_s, double t_load_s)
{
    cJSON *o = cJSON_CreateObject();
    if (rq->legacy_embedding) { /* /api/embeddings: one prompt, one vector */
        srv_json_add_floats(cJSON_AddArrayToObject(o, "embedding"), vecs, n > 0 ? dim : 0);
        return srv_json_print(o);
    }
    cJSON_AddStringToObject(o, "model", model);
    cJSON *arr = cJSON_AddArrayToObject(o, "embeddings");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, e);
        srv_json_add_floats(e, vecs + (size_t)i * (size_t)dim, dim);
    }
    cJSON_AddNumberToObject(o, "total_duration", ns(t_total_s));
    cJSON_AddNumberToObject(o, "load_duration", ns(t_load_s));
    cJSON_AddNumberToObject(o, "prompt_eval_count", n_tokens);
    return srv_json_print(o);
}
