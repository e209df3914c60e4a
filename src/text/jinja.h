/*
 * jinja.h - a small Jinja2 interpreter for chat templates.
 *
 * A template is parsed once (rkm_jinja_parse) into a read-only syntax tree
 * and rendered any number of times, from any number of threads at once
 * (rkm_jinja_render): every render allocates its values from its own arena,
 * freed as a whole when the render returns.
 *
 * Semantics follow @huggingface/jinja (the reference the tests compare
 * against), which is what transformers.js and most JS/C ports use; it
 * differs from Python Jinja2 in a few places (booleans print as "true",
 * tojson keeps non-ASCII, str.strip ignores its argument, ...). Templates are
 * lexed as Hugging Face configures Jinja2: trim_blocks and lstrip_blocks on,
 * one trailing newline dropped. docs/CHAT_TEMPLATES.md lists what is
 * supported and where we knowingly differ.
 *
 * Untrusted templates and variables never crash the process: every failure
 * (syntax error with line:col, raise_exception text, type errors, limits on
 * work, memory and recursion) is a NULL return plus an rkm_err message.
 */
#ifndef RKM_TEXT_JINJA_H
#define RKM_TEXT_JINJA_H

#include <stddef.h>

#include <cjson/cJSON.h>

typedef struct rkm_jinja rkm_jinja;

/* Limits of one render; zero fields take the defaults below. */
typedef struct rkm_jinja_limits {
    size_t max_bytes;  /* all values allocated by one render (default 512 MiB) */
    size_t max_steps;  /* evaluated nodes + loop iterations (default 50 M) */
    int max_depth;     /* nesting of blocks, expressions and macro calls (default 500) */
} rkm_jinja_limits;

/* Parses src (len bytes, need not be NUL-terminated; invalid UTF-8 becomes
 * U+FFFD). NULL + rkm_err(RKM_EFORMAT, "line L:C: ...") on a syntax error. */
rkm_jinja *rkm_jinja_parse(const char *src, size_t len);
void rkm_jinja_free(rkm_jinja *t);

/* Renders with the variables of the JSON object vars (may be NULL): JSON
 * numbers that are integral become integers, objects keep the key order a
 * JavaScript engine gives them. Returns a malloc'd NUL-terminated string
 * (its length in *out_len if non-NULL) or NULL + rkm_err. limits may be NULL. */
char *rkm_jinja_render(const rkm_jinja *t, const cJSON *vars, const rkm_jinja_limits *limits,
                       size_t *out_len);

#endif
