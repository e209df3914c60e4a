/*
 * fields.c - the field helpers both API front ends share (fields.h):
 * typed readers with range checks, stop strings, seeds, embedding inputs,
 * the sampler fields a request sets, JSON printing, durations, model names
 * and timestamps; and srv_request_free, which releases what the readers
 * stored.
 *
 * Pure functions; any thread.
 */
#include <ctype.h>
#include <math.h>
#include <time.h>

#include "server/api.h"
#include "server/fields.h"
#include "util/base64.h"

#include "text/grammar.h"
#include "text/json_schema.h"
#include "util/common.h"

void srv_request_free(srv_request *r)
{
    if (!r) return;
    free(r->model);
    for (int i = 0; i < r->n_msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
        cJSON_Delete(r->msgs[i].tool_calls);
        free(r->msgs[i].tool_call_id);
        free(r->msgs[i].name);
    }
    cJSON_Delete(r->tools);
    free(r->tool_name);
    free(r->msgs);
    free(r->prompt);
    free(r->system);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    for (int i = 0; i < r->n_inputs; i++) free(r->inputs[i]);
    free(r->inputs);
    free(r->grammar);
    free(r->reasoning_effort);
    free(r->suffix);
    for (int i = 0; i < r->n_images; i++) free(r->images[i].data), free(r->images[i].url);
    memset(r, 0, sizeof *r);
}

int srv_add_image(srv_request *r, const char *b64, int uri, const char *where, char *err, size_t errcap)
{
    if (r->n_images >= SRV_MAX_IMAGES) {
        snprintf(err, errcap, "%s: at most %d images a request", where, SRV_MAX_IMAGES);
        return -1;
    }
    const char *p = b64;
    if (uri) {
        if (!strncmp(p, "http://", 7) || !strncmp(p, "https://", 8)) { /* fetched by the HTTP side, if allowed */
            if (!(r->images[r->n_images].url = strdup(p))) {
                snprintf(err, errcap, "out of memory");
                return -1;
            }
            r->n_images++;
            return 0;
        }
        const char *comma = strchr(p, ',');
        if (strncmp(p, "data:", 5) || !comma || comma - p < 12 || strncmp(comma - 7, ";base64", 7)) {
            snprintf(err, errcap, "%s: an image URL must be a data: URI with base64 content (data:image/png;base64,...)",
                     where);
            return -1;
        }
        p = comma + 1;
    }
    srv_image *im = &r->images[r->n_images];
    if (rkm_base64_decode(p, strlen(p), &im->data, &im->len) || im->len == 0) {
        free(im->data);
        im->data = NULL;
        snprintf(err, errcap, "%s: the image is not valid base64", where);
        return -1;
    }
    r->n_images++;
    return 0;
}

char *srv_media_prefix(int n, const char *text)
{
    size_t lm = strlen(SRV_MEDIA_MARKER), lt = strlen(text);
    char *o = malloc((size_t)n * lm + lt + 1);
    if (!o) return NULL;
    for (int i = 0; i < n; i++) memcpy(o + (size_t)i * lm, SRV_MEDIA_MARKER, lm);
    memcpy(o + (size_t)n * lm, text, lt + 1);
    return o;
}

/* ------------------------------------------------------ field readers */

int srv_set_grammar(srv_request *r, const cJSON *schema, int object, char *err, size_t errcap)
{
    /* the request's own cJSON goes to the compiler as it is */
    char *gb = object ? strdup(rkm_json_object_gbnf()) : rkm_json_schema_to_gbnf(schema);
    if (!gb) {
        snprintf(err, errcap, "%s", object ? "out of memory" : rkm_last_error());
        return -1;
    }
    free(r->grammar);
    r->grammar = gb;
    return 0;
}

int srv_set_effort(srv_request *r, const char *effort, char *err, size_t errcap)
{
    if (strcmp(effort, "low") && strcmp(effort, "medium") && strcmp(effort, "high")) {
        snprintf(err, errcap, "reasoning effort must be low, medium or high");
        return -1;
    }
    free(r->reasoning_effort);
    if (!(r->reasoning_effort = strdup(effort))) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    return 0;
}

int srv_set_gbnf(srv_request *r, const char *gbnf, char *err, size_t errcap)
{
    rkm_grammar *g = rkm_grammar_parse(gbnf, NULL);
    if (!g) {
        snprintf(err, errcap, "%s", rkm_last_error());
        return -1;
    }
    rkm_grammar_free(g);
    free(r->grammar);
    if (!(r->grammar = strdup(gbnf))) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    return 0;
}

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

/* ------------------------------------------------------ sampler fields */

static double sp_get(const rkm_sampler_params *sp, int f)
{
    switch (f) {
    case SRV_SP_TEMPERATURE: return sp->temperature;
    case SRV_SP_TOP_K: return sp->top_k;
    case SRV_SP_TOP_P: return sp->top_p;
    case SRV_SP_MIN_P: return sp->min_p;
    case SRV_SP_REPEAT_PENALTY: return sp->repeat_penalty;
    case SRV_SP_REPEAT_LAST_N: return sp->repeat_last_n;
    case SRV_SP_PRESENCE_PENALTY: return sp->presence_penalty;
    case SRV_SP_FREQUENCY_PENALTY: return sp->frequency_penalty;
    }
    return 0;
}

static void sp_set(rkm_sampler_params *sp, int f, double v)
{
    switch (f) {
    case SRV_SP_TEMPERATURE: sp->temperature = (float)v; break;
    case SRV_SP_TOP_K: sp->top_k = (int)v; break;
    case SRV_SP_TOP_P: sp->top_p = (float)v; break;
    case SRV_SP_MIN_P: sp->min_p = (float)v; break;
    case SRV_SP_REPEAT_PENALTY: sp->repeat_penalty = (float)v; break;
    case SRV_SP_REPEAT_LAST_N: sp->repeat_last_n = (int)v; break;
    case SRV_SP_PRESENCE_PENALTY: sp->presence_penalty = (float)v; break;
    case SRV_SP_FREQUENCY_PENALTY: sp->frequency_penalty = (float)v; break;
    }
}

int srv_get_sampling(const cJSON *o, const srv_sp_key *keys, int n, srv_request *r, char *err,
                     size_t errcap)
{
    for (int i = 0; i < n; i++) {
        if (!field(o, keys[i].key)) continue;
        double v = sp_get(&r->sp, keys[i].field);
        if (srv_get_number(o, keys[i].key, keys[i].lo, keys[i].hi, &v, err, errcap)) return -1;
        sp_set(&r->sp, keys[i].field, v);
        r->sp_set |= 1u << keys[i].field;
    }
    return 0;
}

void srv_request_sampler(const srv_request *r, rkm_sampler_params *sp)
{
    for (int f = 0; f < SRV_SP_COUNT; f++)
        if (r->sp_set & (1u << f)) sp_set(sp, f, sp_get(&r->sp, f));
}

/* ------------------------------------------------------ JSON */

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

void srv_json_add_floats(cJSON *arr, const float *v, int n)
{
    /* 9 significant digits: every float32 reads back exactly (17 would
     * print the double's noise) */
    for (int j = 0; j < n; j++) {
        char num[32];
        if (isfinite(v[j])) snprintf(num, sizeof num, "%.9g", (double)v[j]);
        else snprintf(num, sizeof num, "null");
        cJSON_AddItemToArray(arr, cJSON_CreateRaw(num));
    }
}

/* ------------------------------------------------------ durations, times */

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
