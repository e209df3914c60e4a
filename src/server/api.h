/*
 * api.h - the request and response shapes of rkmojo serve, independent of
 * HTTP: parsing and validating OpenAI / Ollama JSON bodies into one
 * srv_request, and formatting results, stream chunks and errors in each
 * API's own shape. Pure functions (no globals, no I/O), so the fuzz target
 * (fuzz/fuzz-http-json.c) and any thread may call them.
 *
 * Ownership: srv_request_free frees everything a parse allocated. Format
 * functions return malloc'd NUL-terminated strings (caller frees) or NULL
 * when out of memory.
 */
#ifndef RKM_SERVER_API_H
#define RKM_SERVER_API_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "rkmojo.h"

enum srv_kind {
    SRV_OPENAI_CHAT = 0,   /* POST /v1/chat/completions */
    SRV_OPENAI_COMPLETION, /* POST /v1/completions */
    SRV_OPENAI_EMBED,      /* POST /v1/embeddings */
    SRV_OLLAMA_CHAT,       /* POST /api/chat */
    SRV_OLLAMA_GENERATE,   /* POST /api/generate */
    SRV_OLLAMA_EMBED,      /* POST /api/embed (and legacy /api/embeddings) */
    SRV_KIND_COUNT
};

#define SRV_MAX_STOP 8
#define SRV_MAX_STOP_BYTES 256

typedef struct srv_msg {
    char *role;    /* "system", "user", "assistant", "tool" */
    char *content; /* UTF-8 text (text parts of an array content joined) */
} srv_msg;

typedef struct srv_request {
    int kind;                 /* enum srv_kind */
    char *model;              /* as sent ("" when absent) */
    int n_msgs;
    srv_msg *msgs;            /* chat kinds */
    char *prompt;             /* completion / generate */
    char *system;             /* ollama generate: overrides the system prompt */
    int raw;                  /* ollama generate: no template */
    int stream;
    int include_usage;        /* openai stream_options.include_usage */
    int max_tokens;           /* -1: until end of generation or context full */
    int n_stop;
    char *stop[SRV_MAX_STOP];
    rkm_sampler_params sp;    /* defaults of the API, then the request's values */
    int has_seed;
    int cache_prompt;         /* 1 (default): reuse the KV of a matching prefix */
    int ignore_eos;           /* extension: do not stop at end-of-generation */
    int has_keep_alive;
    double keep_alive_s;      /* <0 forever, 0 unload after this request */
    int n_inputs;
    char **inputs;            /* embeddings: texts */
    int embed_base64;         /* openai encoding_format "base64" */
    int echo;                 /* openai completion echo */
} srv_request;

void srv_request_free(srv_request *r);

/* Parses body (len bytes, not NUL-terminated) of the given kind. Returns 0,
 * or -1 with a message for the client in err (the HTTP status is 400). */
int srv_parse_request(int kind, const char *body, size_t len, srv_request *out, char *err,
                      size_t errcap);

/* Ollama "model" / "name" lookups of /api/show, /api/delete...: the name or
 * -1 + err. Returns a malloc'd string in *name. */
int srv_parse_model_name(const char *body, size_t len, char **name, char *err, size_t errcap);

/* Durations: "30m", "1h30m", "7d", "45s", "250ms", a number of seconds.
 * Returns 0 or -1. Negative values mean forever. */
int srv_parse_duration(const char *s, double *out_s);

/* Model names a client may use: [A-Za-z0-9._:-], 1..128 bytes, not starting
 * with '.' or '-', no "..". Returns 1 when acceptable. */
int srv_model_name_ok(const char *s);
/* Strips a ":latest" tag into out (cap bytes). */
void srv_model_name_base(const char *s, char *out, size_t cap);

/* --------------------------------------------------------- responses */

/* What a finished (or streaming) generation reports. */
typedef struct srv_result {
    const char *model;
    const char *id;           /* "chatcmpl-..." style id */
    int64_t created;          /* unix seconds */
    const char *text;         /* full text (non-streaming) */
    const char *finish;       /* "stop", "length", or NULL while streaming */
    int n_prompt, n_cached, n_gen;
    double t_load_s, t_prompt_s, t_gen_s, t_total_s;
} srv_result;

/* Error bodies in each API's shape; status picks the OpenAI "type". */
char *srv_fmt_error(int kind, int status, const char *msg);
/* Full non-streaming response. */
char *srv_fmt_result(const srv_request *rq, const srv_result *r);
/* A streaming chunk with delta text (may be ""), as it goes on the wire:
 * "data: {...}\n\n" for OpenAI, "{...}\n" for Ollama. first: OpenAI's role
 * chunk. */
char *srv_fmt_chunk(const srv_request *rq, const srv_result *r, const char *delta, int first);
/* The end of a stream: the final chunk(s) (finish reason, usage when asked,
 * "data: [DONE]" for OpenAI; Ollama's done:true line with timings). */
char *srv_fmt_stream_end(const srv_request *rq, const srv_result *r);
/* An error inside an already started stream. */
char *srv_fmt_stream_error(const srv_request *rq, const char *msg);
/* Embedding responses: vecs is n x dim floats. */
char *srv_fmt_embeddings(const srv_request *rq, const char *model, const float *vecs, int n,
                         int dim, int n_tokens, double t_total_s, double t_load_s);

/* RFC 3339 UTC time with nanoseconds as Ollama writes it, into buf. */
void srv_fmt_time(double unix_s, char *buf, size_t cap);

/* -------------------------------------------------------- text output */

/* Turns generated token pieces into text that is safe to send: never half a
 * UTF-8 character, never a prefix of a stop string that may still complete,
 * and nothing from a matched stop string on. */
typedef struct srv_textout {
    char *pending;     /* bytes held back */
    size_t n_pending, cap;
    const char *const *stop;
    int n_stop;
    int stopped;       /* a stop string matched */
} srv_textout;

void srv_textout_init(srv_textout *t, char *const *stop, int n_stop);
void srv_textout_free(srv_textout *t);
/* Adds bytes; appends the text now safe to emit to *out (malloc'd, may be
 * ""), returns 1 when a stop string matched (generation should stop), 0, or
 * -1 when out of memory. */
int srv_textout_push(srv_textout *t, const char *piece, size_t n, char **out);
/* End of generation: everything held back, an unfinished UTF-8 sequence
 * replaced by U+FFFD. Malloc'd. */
char *srv_textout_flush(srv_textout *t);

/* ------------------------------------------ internal (openai.c, ollama.c) */

int srv_openai_parse(srv_request *r, const cJSON *root, char *err, size_t errcap);
int srv_ollama_parse(srv_request *r, const cJSON *root, char *err, size_t errcap);
char *srv_openai_error(int status, const char *msg);
char *srv_ollama_error(const char *msg);
char *srv_openai_result(const srv_request *rq, const srv_result *r);
char *srv_ollama_result(const srv_request *rq, const srv_result *r);
char *srv_openai_chunk(const srv_request *rq, const srv_result *r, const char *delta, int first);
char *srv_ollama_chunk(const srv_request *rq, const srv_result *r, const char *delta);
char *srv_openai_stream_end(const srv_request *rq, const srv_result *r);
char *srv_ollama_stream_end(const srv_request *rq, const srv_result *r);
/* Shared field readers: 0 ok (absent leaves *out alone), -1 + err. */
int srv_get_string(const cJSON *o, const char *key, char **out, char *err, size_t errcap);
int srv_get_number(const cJSON *o, const char *key, double lo, double hi, double *out, char *err,
                   size_t errcap);
int srv_get_bool(const cJSON *o, const char *key, int *out, char *err, size_t errcap);
int srv_get_stop(const cJSON *o, const char *key, srv_request *r, char *err, size_t errcap);
int srv_get_seed(const cJSON *o, const char *key, srv_request *r, char *err, size_t errcap);
/* Embedding inputs: a string or an array of at most max strings. */
int srv_get_inputs(srv_request *r, const cJSON *in, int max, char *err, size_t errcap);
/* Prints o compactly and deletes it (NULL when out of memory). */
char *srv_json_print(cJSON *o);
/* Same, between prefix and suffix ("data: " .. "\n\n", "" .. "\n"). */
char *srv_json_line(cJSON *o, const char *prefix, const char *suffix);
int srv_is_openai(int kind);

#endif
