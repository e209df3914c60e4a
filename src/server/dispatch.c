/*
 * dispatch.c - the entry points of api.h that choose the API by request
 * kind: srv_parse_request (JSON parsing, then openai.c or ollama.c, then
 * the model-name check both share), srv_parse_model_name for the model
 * management endpoints, and the srv_fmt_* formatters. The one file that
 * calls both APIs; they never call each other.
 *
 * Pure functions; any thread.
 */
#include "server/api.h"
#include "server/fields.h"
#include "server/ollama.h"
#include "server/openai.h"
#include "text/unicode.h"
#include "util/buf.h"
#include "util/common.h"

int srv_is_openai(int kind)
{
    return kind == SRV_OPENAI_CHAT || kind == SRV_OPENAI_COMPLETION || kind == SRV_OPENAI_EMBED;
}

int srv_parse_request(int kind, const char *body, size_t len, srv_request *out, char *err,
                      size_t errcap)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->max_tokens = -1;
    out->n_choices = 1;
    out->cache_prompt = 1;
    out->think = -1;
    out->parallel_tool_calls = 1;
    /* The one set of defaults for both APIs; the worker overlays the fields
     * a request set on the loaded model's defaults (srv_request_sampler). */
    rkm_sampler_params_default(&out->sp);
    if (kind < 0 || kind >= SRV_KIND_COUNT) {
        snprintf(err, errcap, "unknown request kind");
        return -1;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        snprintf(err, errcap, "malformed JSON body (near byte %zu)", at);
        return -1;
    }
    int rc;
    if (!cJSON_IsObject(root)) {
        snprintf(err, errcap, "the request body must be a JSON object");
        rc = -1;
    } else if (srv_is_openai(kind)) {
        rc = srv_openai_parse(out, root, err, errcap);
    } else {
        rc = srv_ollama_parse(out, root, err, errcap);
    }
    cJSON_Delete(root);
    if (rc == 0 && out->model && out->model[0] && !srv_model_name_ok(out->model)) {
        snprintf(err, errcap, "invalid model name (allowed: letters, digits, '.', '_', ':', '-')");
        rc = -1;
    }
    if (rc) srv_request_free(out);
    return rc;
}

int srv_parse_model_name(const char *body, size_t len, char **name, char *err, size_t errcap)
{
    *name = NULL;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        snprintf(err, errcap, "malformed JSON body");
        return -1;
    }
    int rc = srv_get_string(root, "model", name, err, errcap);
    if (rc == 0 && !*name) rc = srv_get_string(root, "name", name, err, errcap);
    cJSON_Delete(root);
    if (rc) return -1;
    if (!*name || !srv_model_name_ok(*name)) {
        free(*name);
        *name = NULL;
        snprintf(err, errcap, "missing or invalid model name");
        return -1;
    }
    return 0;
}

/* A message that may quote the request (a model name, a role) as valid
 * UTF-8: an invalid byte becomes U+FFFD, so the JSON stays valid.
 * Malloc'd, or NULL when out of memory. */
static char *clean_utf8(const char *msg)
{
    rkm_buf b = RKM_BUF_INIT;
    rkm_utf8_sanitize(&b, msg, strlen(msg));
    char *s = rkm_buf_ok(&b) ? rkm_buf_take(&b) : NULL;
    rkm_buf_free(&b);
    return s;
}

char *srv_fmt_error(int kind, int status, const char *msg)
{
    char *clean = clean_utf8(msg);
    char *out = !clean ? NULL : srv_is_openai(kind) ? srv_openai_error(status, clean) : srv_ollama_error(clean);
    free(clean);
    return out;
}

char *srv_fmt_result(const srv_request *rq, const srv_result *r)
{
    return srv_is_openai(rq->kind) ? srv_openai_result(rq, r, 1) : srv_ollama_result(rq, r);
}

char *srv_fmt_result_n(const srv_request *rq, const srv_result *rs, int n)
{
    if (n == 1) return srv_fmt_result(rq, rs);
    return srv_is_openai(rq->kind) ? srv_openai_result(rq, rs, n) : NULL; /* Ollama has no n */
}

char *srv_fmt_choice_end(const srv_request *rq, const srv_result *r)
{
    return srv_is_openai(rq->kind) ? srv_openai_choice_end(rq, r) : NULL;
}

char *srv_fmt_stream_tail(const srv_request *rq, const srv_result *r)
{
    return srv_is_openai(rq->kind) ? srv_openai_stream_tail(rq, r) : NULL;
}

char *srv_fmt_chunk(const srv_request *rq, const srv_result *r, const char *delta, int first)
{
    return srv_is_openai(rq->kind) ? srv_openai_chunk(rq, r, delta, first)
                                   : srv_ollama_chunk(rq, r, delta);
}

char *srv_fmt_stream_end(const srv_request *rq, const srv_result *r)
{
    return srv_is_openai(rq->kind) ? srv_openai_stream_end(rq, r) : srv_ollama_stream_end(rq, r);
}

char *srv_fmt_stream_error(const srv_request *rq, const char *msg)
{
    char *clean = clean_utf8(msg);
    char *out = !clean ? NULL : srv_is_openai(rq->kind) ? srv_openai_stream_error(clean) : srv_ollama_stream_error(clean);
    free(clean);
    return out;
}

char *srv_fmt_embeddings(const srv_request *rq, const char *model, const float *vecs, int n,
                         int dim, int n_tokens, double t_total_s, double t_load_s)
{
    return srv_is_openai(rq->kind)
               ? srv_openai_embeddings(rq, model, vecs, n, dim, n_tokens)
               : srv_ollama_embeddings(rq, model, vecs, n, dim, n_tokens, t_total_s, t_load_s);
}
