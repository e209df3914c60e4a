/*
 * request.c - what the OpenAI and Ollama front ends share: dispatching a
 * body to its parser, typed field readers with range checks, stop strings,
 * durations, model-name validation, and srv_textout (the UTF-8 and
 * stop-string aware text buffer of a streaming generation).
 *
 * Pure functions; a srv_textout belongs to the one generation (worker
 * thread) that owns it.
 */
#include <ctype.h>
#include <math.h>

#include "server/api.h"
#include "util/common.h"

int srv_is_openai(int kind)
{
    return kind == SRV_OPENAI_CHAT || kind == SRV_OPENAI_COMPLETION || kind == SRV_OPENAI_EMBED;
}

void srv_request_free(srv_request *r)
{
    if (!r) return;
    free(r->model);
    for (int i = 0; i < r->n_msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
    }
    free(r->msgs);
    free(r->prompt);
    free(r->system);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    for (int i = 0; i < r->n_inputs; i++) free(r->inputs[i]);
    free(r->inputs);
    memset(r, 0, sizeof *r);
}

int srv_parse_request(int kind, const char *body, size_t len, srv_request *out, char *err,
                      size_t errcap)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->max_tokens = -1;
    out->cache_prompt = 1;
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

/* ------------------------------------------------------ field readers */

/* Key lookups are case-sensitive: "Model" is not "model". */
static const cJSON *field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

int srv_get_string(const cJSON *o, const char *key, char **out, char *err, size_t errcap)
{
    const cJSON *v = field(o, key);
    if (!v) return 0;
    if (!cJSON_IsString(v) || !v->valuestring) {
        snprintf(err, errcap, "'%s' must be a string", key);
        return -1;
    }
    char *s = strdup(v->valuestring);
    if (!s) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    free(*out);
    *out = s;
    return 0;
}

int srv_get_number(const cJSON *o, const char *key, double lo, double hi, double *out, char *err,
                   size_t errcap)
{
    const cJSON *v = field(o, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        snprintf(err, errcap, "'%s' must be a number", key);
        return -1;
    }
    if (v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(err, errcap, "'%s' must be between %g and %g", key, lo, hi);
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

int srv_get_bool(const cJSON *o, const char *key, int *out, char *err, size_t errcap)
{
    const cJSON *v = field(o, key);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) {
        snprintf(err, errcap, "'%s' must be true or false", key);
        return -1;
    }
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return 0;
}

static int add_stop(srv_request *r, const char *s, char *err, size_t errcap)
{
    size_t n = strlen(s);
    if (n == 0) return 0; /* an empty stop string would stop at once: ignore */
    if (n > SRV_MAX_STOP_BYTES) {
        snprintf(err, errcap, "stop strings are limited to %d bytes", SRV_MAX_STOP_BYTES);
        return -1;
    }
    if (r->n_stop >= SRV_MAX_STOP) {
        snprintf(err, errcap, "at most %d stop strings", SRV_MAX_STOP);
        return -1;
    }
    if (!(r->stop[r->n_stop] = strdup(s))) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    r->n_stop++;
    return 0;
}

int srv_get_stop(const cJSON *o, const char *key, srv_request *r, char *err, size_t errcap)
{
    const cJSON *v = field(o, key);
    if (!v) return 0;
    if (cJSON_IsString(v)) return add_stop(r, v->valuestring, err, errcap);
    if (!cJSON_IsArray(v)) {
        snprintf(err, errcap, "'%s' must be a string or an array of strings", key);
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsString(e)) {
            snprintf(err, errcap, "'%s' must be a string or an array of strings", key);
            return -1;
        }
        if (add_stop(r, e->valuestring, err, errcap)) return -1;
    }
    return 0;
}

int srv_get_seed(const cJSON *o, const char *key, srv_request *r, char *err, size_t errcap)
{
    const cJSON *seed = field(o, key);
    if (!seed) return 0;
    if (!cJSON_IsNumber(seed) || !isfinite(seed->valuedouble) ||
        seed->valuedouble != floor(seed->valuedouble) || fabs(seed->valuedouble) > 9.0e15) {
        snprintf(err, errcap, "'%s' must be an integer", key);
        return -1;
    }
    r->sp.seed = (uint64_t)(int64_t)seed->valuedouble;
    r->has_seed = 1;
    return 0;
}

int srv_get_inputs(srv_request *r, const cJSON *in, int max, char *err, size_t errcap)
{
    int n = cJSON_IsString(in) ? 1 : cJSON_IsArray(in) ? cJSON_GetArraySize(in) : -1;
    if (n < 1 || n > max) {
        snprintf(err, errcap, "'input' must be a string or a non-empty array of at most %d strings", max);
        return -1;
    }
    if (!(r->inputs = calloc((size_t)n, sizeof *r->inputs))) goto oom;
    if (cJSON_IsString(in)) {
        if (!(r->inputs[r->n_inputs++] = strdup(in->valuestring))) goto oom;
        return 0;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, in) {
        if (!cJSON_IsString(e)) {
            snprintf(err, errcap, "'input' items must be strings (token ids are not supported)");
            return -1;
        }
        if (!(r->inputs[r->n_inputs++] = strdup(e->valuestring))) goto oom;
    }
    return 0;
oom:
    snprintf(err, errcap, "out of memory");
    return -1;
}

char *srv_json_print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *srv_json_line(cJSON *o, const char *prefix, const char *suffix)
{
    char *j = srv_json_print(o);
    if (!j) return NULL;
    size_t np = strlen(prefix), n = strlen(j), ns = strlen(suffix);
    char *s = malloc(np + n + ns + 1);
    if (s) {
        memcpy(s, prefix, np);
        memcpy(s + np, j, n);
        memcpy(s + np + n, suffix, ns + 1);
    }
    free(j);
    return s;
}

/* ------------------------------------------------------ durations */

int srv_parse_duration(const char *s, double *out_s)
{
    if (!s || !*s) return -1;
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v)) return -1;
    if (!*end) {
        *out_s = v;
        return 0;
    }
    /* Go-style sequences: 1h30m, 250ms, 7d (d is ours: Go has no days). */
    double total = 0;
    const char *p = s;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    while (*p) {
        v = strtod(p, &end);
        if (end == p || !isfinite(v) || v < 0) return -1;
        p = end;
        double unit;
        if (!strncmp(p, "ms", 2)) {
            unit = 1e-3;
            p += 2;
        } else if (*p == 's') {
            unit = 1;
            p++;
        } else if (*p == 'm') {
            unit = 60;
            p++;
        } else if (*p == 'h') {
            unit = 3600;
            p++;
        } else if (*p == 'd') {
            unit = 86400;
            p++;
        } else {
            return -1;
        }
        total += v * unit;
    }
    *out_s = neg ? -total : total;
    return 0;
}

/* ------------------------------------------------------ model names */

int srv_model_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-') return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(isalnum(c) || c == '.' || c == '_' || c == ':' || c == '-')) return 0;
    }
    return strstr(s, "..") == NULL;
}

void srv_model_name_base(const char *s, char *out, size_t cap)
{
    snprintf(out, cap, "%s", s);
    size_t n = strlen(out);
    if (n > 7 && !strcmp(out + n - 7, ":latest")) out[n - 7] = 0;
}

/* ------------------------------------------------------ textout */

void srv_textout_init(srv_textout *t, char *const *stop, int n_stop)
{
    memset(t, 0, sizeof *t);
    t->stop = (const char *const *)stop;
    t->n_stop = n_stop;
}

void srv_textout_free(srv_textout *t)
{
    free(t->pending);
    memset(t, 0, sizeof *t);
}

/* Length of the longest prefix of buf[0..n) that ends on a UTF-8 character
 * boundary (an incomplete trailing sequence is held back). */
static size_t utf8_complete(const char *buf, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 4) {
        unsigned char c = (unsigned char)buf[i - 1];
        if ((c & 0xC0) != 0x80) { /* lead byte or ASCII */
            size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
            return back + 1 >= need ? n : i - 1;
        }
        i--;
        back++;
    }
    return n; /* stray continuation bytes: nothing to wait for */
}

/* Length of the valid UTF-8 sequence at p (n bytes available), 0 if the
 * bytes there are not one (stray continuation, overlong, surrogate, > U+10FFFF). */
static size_t utf8_valid_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || len > n) return 0;
    uint32_t cp = c & (0x3F >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* Replaces every invalid sequence in pending[0..n) by U+FFFD, in place
 * (the buffer grows when needed). Returns the new length of that part, or
 * (size_t)-1 when out of memory. */
static size_t sanitize(srv_textout *t, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_valid_len((const unsigned char *)t->pending + i, n - i);
        if (!l) bad++;
        i += l ? l : 1;
    }
    if (!bad) return n;
    size_t rest = t->n_pending - n, nn = n + bad * 2;
    char *o = malloc(nn + rest + 1);
    if (!o) return (size_t)-1;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_valid_len((const unsigned char *)t->pending + i, n - i);
        if (l) {
            memcpy(o + w, t->pending + i, l);
            w += l;
            i += l;
        } else {
            memcpy(o + w, "\xEF\xBF\xBD", 3);
            w += 3;
            i++;
        }
    }
    memcpy(o + w, t->pending + n, rest);
    o[w + rest] = 0;
    free(t->pending);
    t->pending = o;
    t->n_pending = w + rest;
    t->cap = nn + rest + 1;
    return w;
}

static char *dup_n(const char *s, size_t n)
{
    char *o = malloc(n + 1);
    if (!o) return NULL;
    memcpy(o, s, n);
    o[n] = 0;
    return o;
}

int srv_textout_push(srv_textout *t, const char *piece, size_t n, char **out)
{
    *out = NULL;
    if (t->stopped) {
        *out = dup_n("", 0);
        return *out ? 1 : -1;
    }
    if (t->n_pending + n + 1 > t->cap) {
        size_t cap = RKM_MAX(t->cap * 2, t->n_pending + n + 64);
        char *p = realloc(t->pending, cap);
        if (!p) return -1;
        t->pending = p;
        t->cap = cap;
    }
    memcpy(t->pending + t->n_pending, piece, n);
    t->n_pending += n;
    t->pending[t->n_pending] = 0;
    /* Invalid bytes become U+FFFD before matching stop strings, so stops
     * match the text the client receives. */
    if (sanitize(t, utf8_complete(t->pending, t->n_pending)) == (size_t)-1) return -1;
    /* A full stop string match: emit what precedes the earliest one. */
    size_t cut = t->n_pending;
    int hit = 0;
    for (int i = 0; i < t->n_stop; i++) {
        const char *f = memmem(t->pending, t->n_pending, t->stop[i], strlen(t->stop[i]));
        if (f && (size_t)(f - t->pending) < cut) {
            cut = (size_t)(f - t->pending);
            hit = 1;
        }
    }
    if (hit) {
        *out = dup_n(t->pending, cut);
        t->n_pending = 0;
        t->stopped = 1;
        return *out ? 1 : -1;
    }
    /* Hold back the longest tail that is a prefix of a stop string. */
    size_t keep = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stop[i]);
        for (size_t k = RKM_MIN(sl - 1, t->n_pending); k > keep; k--)
            if (!memcmp(t->pending + t->n_pending - k, t->stop[i], k)) {
                keep = k;
                break;
            }
    }
    size_t emit = utf8_complete(t->pending, t->n_pending - keep);
    *out = dup_n(t->pending, emit);
    if (!*out) return -1;
    memmove(t->pending, t->pending + emit, t->n_pending - emit);
    t->n_pending -= emit;
    return 0;
}

char *srv_textout_flush(srv_textout *t)
{
    if (!t->stopped && sanitize(t, utf8_complete(t->pending, t->n_pending)) == (size_t)-1) return NULL;
    size_t ok = t->stopped ? 0 : utf8_complete(t->pending, t->n_pending);
    size_t n = t->stopped ? 0 : t->n_pending;
    char *o = malloc(ok + (n > ok ? 3 : 0) + 1);
    if (!o) return NULL;
    memcpy(o, t->pending, ok);
    size_t w = ok;
    if (n > ok) { /* an unfinished character at the very end */
        memcpy(o + w, "\xEF\xBF\xBD", 3);
        w += 3;
    }
    o[w] = 0;
    t->n_pending = 0;
    return o;
}
