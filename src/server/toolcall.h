/*
 * toolcall.h - finds the tool calls in a model's reply as it streams, in
 * the format of the model's family (picked from its chat template), and
 * turns them into OpenAI-shaped calls; the rest of the reply is content.
 *
 *   tags      <tool_call>BODY</tool_call>, BODY one of
 *               {"name": ..., "arguments": {...}}        Hermes, Qwen2.5/3
 *               <function=NAME><parameter=K>V</parameter></function>
 *                                                        Qwen3-Coder, Qwen3.5
 *               NAME<arg_key>K</arg_key><arg_value>V</arg_value>
 *                                                        GLM-4.5
 *   llama3    a reply that is {"name": ..., "parameters": {...}} (or that
 *             follows <|python_tag|>), several separated by ';'
 *   mistral   [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] or
 *             [TOOL_CALLS]NAME[ARGS]{...} (repeated per call)
 *   deepseek  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>
 *             NAME\n```json\n{...}\n```<｜tool▁call▁end｜>... (V3 / R1) or
 *             <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
 *             (V3.1) ... <｜tool▁calls▁end｜>
 *   gemma4    <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>
 *   harmony   gpt-oss: a message to "to=functions.NAME", its text the
 *             arguments: <|channel|>commentary to=functions.NAME
 *             <|constrain|>json<|message|>{...} (ended by <|call|>); fed
 *             the raw reply, its content output is not used (the harmony
 *             reasoning splitter drops these messages from the content)
 *
 * Values of the XML-like forms are typed by the tool's parameter schema (a
 * "string" property stays text; anything else is read as JSON when it
 * parses). A call that does not parse goes out as content, unchanged;
 * text after a call is content, whitespace around calls is dropped. A
 * marker cut across pieces is held back until it is decided.
 *
 * Single-threaded: one parser per generation, owned by its caller.
 * Calls are appended to a caller's cJSON array as {id, type: "function",
 * function: {name, arguments}} with arguments an object.
 */
#ifndef RKM_SERVER_TOOLCALL_H
#define RKM_SERVER_TOOLCALL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "util/buf.h"

enum srv_tool_fmt {
    SRV_TF_TAGS = 0,
    SRV_TF_LLAMA3,
    SRV_TF_MISTRAL,
    SRV_TF_DEEPSEEK,
    SRV_TF_GEMMA4,
    SRV_TF_HARMONY,
    SRV_TF_COUNT
};

/* The format a chat template's model writes (tags when it says nothing). */
int srv_tool_format(const char *chat_template);
/* Its name ("tags", "llama3", ...). */
const char *srv_tool_format_name(int fmt);

typedef struct srv_toolp {
    int fmt;
    const cJSON *tools;   /* the request's tools (argument types), or NULL */
    int state;            /* 0 text, 1 inside a call, 2 right after a call */
    int seen_text;        /* content other than whitespace went out */
    int marker;           /* state 1: which opening marker began it */
    rkm_buf hold;         /* a possible marker (0), the call's text (1), whitespace (2) */
    int n_calls;
    char id_base[24];     /* ids are id_base + the call's number */
} srv_toolp;

/* id_base: a unique prefix of the calls' ids ("call_<hex>"). */
void srv_toolp_init(srv_toolp *p, int fmt, const cJSON *tools, const char *id_base);
/* Feeds n bytes; appends plain text to content and finished calls to
 * calls. 0, or RKM_ENOMEM. */
int srv_toolp_push(srv_toolp *p, const char *s, size_t n, rkm_buf *content, cJSON *calls);
/* End of the reply: a call still open is parsed to the end of the text
 * (or goes out as content). */
int srv_toolp_finish(srv_toolp *p, rkm_buf *content, cJSON *calls);
void srv_toolp_free(srv_toolp *p);

/* The GBNF that holds a reply to tool calls of format fmt (tool_choice
 * required, or named: only, else NULL), one call or, with parallel,
 * several; the arguments follow each tool's parameter schema.
 * *prefill: text the reply starts with, written into the prompt (markers
 * that are control tokens, which a grammar cannot produce). Malloc'd, or
 * NULL with the reason (an unsupported schema keyword, named) in
 * rkm_last_error(). */
char *srv_tool_grammar(int fmt, const cJSON *tools, const char *only, int parallel, const char **prefill);

/* One call's body in format fmt (the text between its markers) -> calls;
 * 1 parsed, 0 not a call. For tests and the parser itself. */
int srv_tool_parse_body(int fmt, int marker, const char *body, size_t n, const cJSON *tools, const char *id_base,
                        int *n_calls, cJSON *calls);

#endif
