/*
 * api.h - the request and response shapes of rkmojo serve, independent of
 * HTTP, and the entry points that pick the API by kind (dispatch.c):
 * parsing and validating an OpenAI or Ollama JSON body into one
 * srv_request, and formatting results, stream chunks, embeddings and
 * errors in that API's own shape. The APIs themselves live in openai.c and
 * ollama.c (server/openai.h, server/ollama.h), each over the shared field
 * helpers of server/fields.h; only dispatch.c calls both. Pure functions
 * (no globals, no I/O), so the fuzz target (fuzz/fuzz-http-json.c) and any
 * thread may call them.
 *
 * Ownership: srv_request_free (fields.c) frees everything a parse
 * allocated. Format functions return malloc'd NUL-terminated strings
 * (caller frees) or NULL when out of memory.
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
#define SRV_MAX_CHOICES 16
#define SRV_MAX_STOP_BYTES 256

#define SRV_MAX_IMAGES 16
/* llama.cpp's media marker: where an image stands in a message's text
 * (= RKM_MEDIA_MARKER, runtime/media.h) */
#define SRV_MEDIA_MARKER "<__media__>"

/* An image as the request sent it: its file's bytes (PNG, JPEG, WebP),
 * decoded from base64, not yet decoded as an image. */
typedef struct srv_image {
    unsigned char *data;
    size_t len;
    char *url;          /* an http(s) URL to fetch instead (serve --image-urls), or NULL */
} srv_image;

typedef struct srv_msg {
    char *role;         /* "system", "user", "assistant", "tool" */
    char *content;      /* UTF-8 text (text parts of an array content joined) */
    cJSON *tool_calls;  /* assistant: [{id, type, function: {name, arguments (an object)}}] as templates read them, or NULL */
    char *tool_call_id; /* tool: the call this result answers, or NULL */
    char *name;         /* tool: the function's name (given, or found from tool_call_id), or NULL */
} srv_msg;

/* tool_choice */
enum srv_tool_choice { SRV_TOOLS_AUTO = 0, SRV_TOOLS_NONE, SRV_TOOLS_REQUIRED, SRV_TOOLS_NAMED };

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
    rkm_sampler_params sp;    /* rkm_sampler_params_default, then the request's values */
    unsigned sp_set;          /* bits (1 << enum srv_sp_field, fields.h) the request set */
    int has_seed;
    int cache_prompt;         /* 1 (default): reuse the KV of a matching prefix */
    int ignore_eos;           /* extension: do not stop at end-of-generation */
    int has_keep_alive;
    double keep_alive_s;      /* <0 forever, 0 unload after this request */
    int n_inputs;
    char **inputs;            /* embeddings: texts */
    int embed_base64;         /* openai encoding_format "base64" */
    int echo;                 /* openai completion echo */
    char *suffix;             /* openai completion: fill in the middle between prompt and this, or NULL */
    char *grammar;            /* GBNF generation keeps to (structured outputs), or NULL */
    int dimensions;           /* embeddings: the first N values, renormalised (0: all) */
    int legacy_embedding;     /* Ollama /api/embeddings: {"embedding": [...]} of one prompt */
    int think;                /* -1 unset, 0 off, 1 on: enable_thinking for the template; reasoning split off unless 0 */
    char *reasoning_effort;   /* "low" / "medium" / "high" for templates that take it (gpt-oss), or NULL */
    cJSON *tools;             /* chat: the tools, [{type: "function", function: {name, description, parameters}}], or NULL */
    int tool_choice;          /* enum srv_tool_choice */
    char *tool_name;          /* SRV_TOOLS_NAMED: the function */
    int parallel_tool_calls;  /* more than one call in a reply (default 1) */
    int n_choices;            /* openai n: continuations of the one prompt (1..SRV_MAX_CHOICES) */
    int logprobs;             /* report each generated token's log-probability */
    int top_logprobs;         /* ... and the n most likely alternatives (0..20) */
    int n_images;             /* images in prompt order, each standing at a SRV_MEDIA_MARKER in
                               * its message's content (or the prompt): OpenAI image_url parts,
                               * Ollama images (put before their message's text) */
    srv_image images[SRV_MAX_IMAGES];
} srv_request;

void srv_request_free(srv_request *r);

/* Parses body (len bytes, not NUL-terminated) of the given kind. Returns 0,
 * or -1 with a message for the client in err (the HTTP status is 400). */
int srv_parse_request(int kind, const char *body, size_t len, srv_request *out, char *err,
                      size_t errcap);

/* Ollama "model" / "name" lookups of /api/show, /api/delete...: the name or
 * -1 + err. Returns a malloc'd string in *name. */
int srv_parse_model_name(const char *body, size_t len, char **name, char *err, size_t errcap);

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
    /* logprobs: entries [lp_from, lp_to) of lp go with this response or
     * chunk; each {"token", "logprob", "bytes", "top_logprobs": [...]} */
    const cJSON *lp;
    int lp_from, lp_to;
    const char *reasoning;    /* the reasoning (a <think> block) split from text, or NULL; in a chunk, its delta */
    /* tool calls: entries [tc_from, tc_to) of tool_calls go with this
     * response or chunk; each {id, type, function: {name, arguments (an object)}} */
    const cJSON *tool_calls;
    int tc_from, tc_to;
    int index;                /* the choice (OpenAI n > 1), 0 otherwise */
} srv_result;

/* Error bodies in each API's shape; status picks the OpenAI "type". */
char *srv_fmt_error(int kind, int status, const char *msg);
/* Full non-streaming response. */
char *srv_fmt_result(const srv_request *rq, const srv_result *r);
/* ... with n choices (OpenAI n > 1): rs[i] is choice i; the usage counts
 * the prompt once and every choice's tokens. */
char *srv_fmt_result_n(const srv_request *rq, const srv_result *rs, int n);
/* A streaming chunk with delta text (may be ""), as it goes on the wire:
 * "data: {...}\n\n" for OpenAI, "{...}\n" for Ollama. first: OpenAI's role
 * chunk. */
char *srv_fmt_chunk(const srv_request *rq, const srv_result *r, const char *delta, int first);
/* The end of a stream: the final chunk(s) (finish reason, usage when asked,
 * "data: [DONE]" for OpenAI; Ollama's done:true line with timings). */
char *srv_fmt_stream_end(const srv_request *rq, const srv_result *r);
/* With n > 1 (OpenAI), the stream's end comes in parts: each choice's
 * finish chunk as it ends, then the usage chunk when asked (r's counts,
 * every choice's tokens summed by the caller) and "data: [DONE]". */
char *srv_fmt_choice_end(const srv_request *rq, const srv_result *r);
char *srv_fmt_stream_tail(const srv_request *rq, const srv_result *r);
/* An error inside an already started stream. */
char *srv_fmt_stream_error(const srv_request *rq, const char *msg);
/* Embedding responses: vecs is n x dim floats. */
char *srv_fmt_embeddings(const srv_request *rq, const char *model, const float *vecs, int n,
                         int dim, int n_tokens, double t_total_s, double t_load_s);

/* 1 for the OpenAI kinds. */
int srv_is_openai(int kind);

#endif
