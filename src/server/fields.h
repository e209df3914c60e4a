/*
 * fields.h - the building blocks both API front ends (openai.c, ollama.c)
 * parse and format with: typed readers of request fields with range
 * checks, stop strings, seeds, embedding inputs, the sampler fields a
 * request may set, compact JSON printing, durations, model names and
 * Ollama-style timestamps. Pure functions (no globals, no I/O), any thread.
 */
#ifndef RKM_SERVER_FIELDS_H
#define RKM_SERVER_FIELDS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "rkmojo.h"

struct srv_request;

/* Field readers: 0 ok (an absent or null field leaves *out alone), or -1
 * with a message for the client in err naming the field. */
int srv_get_string(const cJSON *o, const char *key, char **out, char *err, size_t errcap);
int srv_get_number(const cJSON *o, const char *key, double lo, double hi, double *out, char *err,
                   size_t errcap);
int srv_get_bool(const cJSON *o, const char *key, int *out, char *err, size_t errcap);
/* A string or an array of strings, appended to r->stop. */
int srv_get_stop(const cJSON *o, const char *key, struct srv_request *r, char *err, size_t errcap);
/* An integer seed into r->sp.seed (sets r->has_seed). */
int srv_get_seed(const cJSON *o, const char *key, struct srv_request *r, char *err, size_t errcap);
/* Embedding inputs: a string or an array of at most max strings. */
int srv_get_inputs(struct srv_request *r, const cJSON *in, int max, char *err, size_t errcap);

/* The sampler fields a request may set (bits of srv_request.sp_set). */
enum srv_sp_field {
    SRV_SP_TEMPERATURE = 0,
    SRV_SP_TOP_K,
    SRV_SP_TOP_P,
    SRV_SP_MIN_P,
    SRV_SP_REPEAT_PENALTY,
    SRV_SP_REPEAT_LAST_N,
    SRV_SP_PRESENCE_PENALTY,
    SRV_SP_FREQUENCY_PENALTY,
    SRV_SP_COUNT
};

/* One sampler field of an API: its JSON key and accepted range. */
typedef struct srv_sp_key {
    const char *key;
    int field; /* enum srv_sp_field */
    double lo, hi;
} srv_sp_key;

/* Reads the n keys of o into r->sp, marking each one present in r->sp_set. */
int srv_get_sampling(const cJSON *o, const srv_sp_key *keys, int n, struct srv_request *r,
                     char *err, size_t errcap);
/* Overlays the sampler fields the request set onto sp (the model's
 * defaults, rkm_sampler_params_for_model). The seed is not touched. */
void srv_request_sampler(const struct srv_request *r, rkm_sampler_params *sp);

/* Prints o compactly and deletes it (NULL when out of memory). */
char *srv_json_print(cJSON *o);
/* Same, between prefix and suffix ("data: " .. "\n\n", "" .. "\n"). */
char *srv_json_line(cJSON *o, const char *prefix, const char *suffix);
/* Appends n floats to the array arr. */
void srv_json_add_floats(cJSON *arr, const float *v, int n);

/* Durations: "30m", "1h30m", "7d", "45s", "250ms", a number of seconds.
 * Returns 0 or -1. Negative values mean forever. */
int srv_parse_duration(const char *s, double *out_s);
/* RFC 3339 UTC time with nanoseconds as Ollama writes it, into buf. */
void srv_fmt_time(double unix_s, char *buf, size_t cap);

/* Model names a client may use: [A-Za-z0-9._:-], 1..128 bytes, not starting
 * with '.' or '-', no "..". Returns 1 when acceptable. */
int srv_model_name_ok(const char *s);
/* Strips a ":latest" tag into out (cap bytes). */
void srv_model_name_base(const char *s, char *out, size_t cap);

/* Structured outputs: the grammar of a JSON schema (object: any JSON
 * object), or GBNF text checked by parsing it, into r->grammar. 0, or -1
 * with the reason (an unsupported schema keyword, named) in err. */
/* Appends an image sent as base64 (bare, as Ollama's images, or a data:
 * URI, "data:image/png;base64,...", as OpenAI's image_url) to r->images;
 * an http(s) URL is kept as such (fetched, when the server allows it, by
 * the HTTP side: srv_fetch_images). where names it in messages. 0 or -1 +
 * err. */
int srv_add_image(struct srv_request *r, const char *b64, int uri, const char *where, char *err, size_t errcap);
/* "<__media__>" n times then text, malloc'd (NULL: out of memory). */
char *srv_media_prefix(int n, const char *text);

int srv_set_grammar(struct srv_request *r, const cJSON *schema, int object, char *err, size_t errcap);
int srv_set_gbnf(struct srv_request *r, const char *gbnf, char *err, size_t errcap);
/* r->reasoning_effort from "low" / "medium" / "high"; -1 + err otherwise. */
int srv_set_effort(struct srv_request *r, const char *effort, char *err, size_t errcap);

#endif
