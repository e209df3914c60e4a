/*
 * ollama.c - the Ollama-compatible shapes: parsing /api/chat, /api/generate
 * and /api/embed bodies (with their "options" and "keep_alive"), and writing
 * the NDJSON lines and final objects with Ollama's nanosecond timings, and
 * {"error": "..."} bodies.
 *
 * Pure functions called from HTTP threads (parse) and the worker (format).
 */
#include <math.h>
#include <time.h>

#include "server/api.h"
#include "util/common.h"

#define OLL_MAX_MSGS 4096
#define OLL_MAX_INPUTS 2048

void srv_fmt_time(double unix_s, char *buf, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    long ns = (long)((unix_s - (double)t) * 1e9);
    if (ns < 0) ns = 0;
    if (ns > 999999999) ns = 999999999;
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%09ldZ", base, ns);
}

static int parse_options(srv_request *r, const cJSON *o, char *err, size_t errcap)
{
    if (!o || cJSON_IsNull(o)) return 0;
    if (!cJSON_IsObject(o)) {
        snprintf(err, errcap, "'options' must be an object");
        return -1;
    }
    double v;
    v = r->sp.temperature;
    if (srv_get_number(o, "temperature", 0, 100, &v, err, errcap)) return -1;
    r->sp.temperature = (float)v;
    v = r->sp.top_p;
    if (srv_get_number(o, "top_p", 0, 1, &v, err, errcap)) return -1;
    r->sp.top_p = (float)v;
    v = r->sp.top_k;
    if (srv_get_number(o, "top_k", 0, 1 << 20, &v, err, errcap)) return -1;
    r->sp.top_k = (int)v;
    v = r->sp.min_p;
    if (srv_get_number(o, "min_p", 0, 1, &v, err, errcap)) return -1;
    r->sp.min_p = (float)v;
    v = r->sp.repeat_penalty;
    if (srv_get_number(o, "repeat_penalty", 0, 10, &v, err, errcap)) return -1;
    r->sp.repeat_penalty = (float)v;
    v = r->sp.repeat_last_n;
    if (srv_get_number(o, "repeat_last_n", -1, 1 << 20, &v, err, errcap)) return -1;
    r->sp.repeat_last_n = (int)v;
    v = r->sp.presence_penalty;
    if (srv_get_number(o, "presence_penalty", -2, 2, &v, err, errcap)) return -1;
    r->sp.presence_penalty = (float)v;
    v = r->sp.frequency_penalty;
    if (srv_get_number(o, "frequency_penalty", -2, 2, &v, err, errcap)) return -1;
    r->sp.frequency_penalty = (float)v;
    v = -1;
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
        const cJSON *img = cJSON_GetObjectItemCaseSensitive(m, "images");
        if (cJSON_IsArray(img) && cJSON_GetArraySize(img) > 0) {
            snprintf(err, errcap, "images are not supported");
            return -1;
        }
    }
    return 0;
oom:
    snprintf(err, errcap, "out of memory");
    return -1;
}

int srv_ollama_parse(srv_request *r, const cJSON *root, char *err, size_t errcap)
{
    /* Ollama's defaults (its Modelfile defaults). */
    r->sp.temperature = 0.8f;
    r->sp.top_k = 40;
    r->sp.top_p = 0.9f;
    r->sp.min_p = 0.0f;
    r->sp.repeat_penalty = 1.1f;
    r->sp.repeat_last_n = 64;
    r->sp.presence_penalty = 0.0f;
    r->sp.frequency_penalty = 0.0f;
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
        return srv_get_inputs(r, in, OLL_MAX_INPUTS, err, errcap);
    }
    if (srv_get_bool(root, "stream", &r->stream, err, errcap)) return -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (fmt && !cJSON_IsNull(fmt) && !(cJSON_IsString(fmt) && !fmt->valuestring[0])) {
        snprintf(err, errcap, "'format' (structured outputs) is not supported");
        return -1;
    }
    if (r->kind == SRV_OLLAMA_CHAT) {
        if (parse_messages(r, cJSON_GetObjectItemCaseSensitive(root, "messages"), err, errcap))
            return -1;
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
        if (cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0) {
            snprintf(err, errcap, "tools are not supported");
            return -1;
        }
    } else {
        if (srv_get_string(root, "prompt", &r->prompt, err, errcap)) return -1;
        if (srv_get_string(root, "system", &r->system, err, errcap)) return -1;
        if (srv_get_bool(root, "raw", &r->raw, err, errcap)) return -1;
        const cJSON *img = cJSON_GetObjectItemCaseSensitive(root, "images");
        if (cJSON_IsArray(img) && cJSON_GetArraySize(img) > 0) {
            snprintf(err, errcap, "images are not supported");
            return -1;
        }
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

static void add_text(cJSON *o, const srv_request *rq, const char *text)
{
    if (rq->kind == SRV_OLLAMA_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(o, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", text);
    } else {
        cJSON_AddStringToObject(o, "response", text);
    }
}

static void add_final(cJSON *o, const srv_result *r)
{
    cJSON_AddBoolToObject(o, "done", 1);
    cJSON_AddStringToObject(o, "done_reason", r->finish ? r->finish : "stop");
    cJSON_AddNumberToObject(o, "total_duration", floor(r->t_total_s * 1e9));
    cJSON_AddNumberToObject(o, "load_duration", floor(r->t_load_s * 1e9));
    cJSON_AddNumberToObject(o, "prompt_eval_count", r->n_prompt);
    cJSON_AddNumberToObject(o, "prompt_eval_duration", floor(r->t_prompt_s * 1e9));
    cJSON_AddNumberToObject(o, "eval_count", r->n_gen);
    cJSON_AddNumberToObject(o, "eval_duration", floor(r->t_gen_s * 1e9));
    /* Not in Ollama: how many prompt tokens came from the prompt cache. */
    cJSON_AddNumberToObject(o, "prompt_cached_count", r->n_cached);
}

char *srv_ollama_result(const srv_request *rq, const srv_result *r)
{
    cJSON *o = head(r);
    add_text(o, rq, r->text);
    add_final(o, r);
    return srv_json_print(o);
}

char *srv_ollama_chunk(const srv_request *rq, const srv_result *r, const char *delta)
{
    cJSON *o = head(r);
    add_text(o, rq, delta);
    cJSON_AddBoolToObject(o, "done", 0);
    return srv_json_line(o, "", "\n");
}

char *srv_ollama_stream_end(const srv_request *rq, const srv_result *r)
{
    cJSON *o = head(r);
    add_text(o, rq, "");
    add_final(o, r);
    return srv_json_line(o, "", "\n");
}
