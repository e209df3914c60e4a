/*
 * chat.h - formatting a conversation with a model's chat template (Jinja,
 * run by text/jinja.h), plus built-in fallback templates for models that
 * ship none.
 *
 * Threads: every function is reentrant (no global state).
 * Ownership: returned strings are malloc'd; the caller frees them.
 */
#ifndef RKM_TEXT_CHAT_H
#define RKM_TEXT_CHAT_H

#include <cjson/cJSON.h>

typedef struct rkm_chat_msg {
    const char *role;
    const char *content;
} rkm_chat_msg;

/* Renders msgs with template_src. Variables: messages (list of {role,
 * content}), add_generation_prompt (bool), bos_token and eos_token (left
 * undefined when NULL). Returns a malloc'd string or NULL + rkm_err (syntax
 * error with line:col, the raise_exception text, type errors, limits). */
char *rkm_chat_render(const char *template_src, const rkm_chat_msg *msgs, int n_msgs, int add_generation_prompt,
                      const char *bos_token, const char *eos_token);

/* Same, with extra string variables as name/value pairs
 * (extra_kv[2*i] = name, extra_kv[2*i+1] = value), e.g. "enable_thinking". */
char *rkm_chat_render_ex(const char *template_src, const rkm_chat_msg *msgs, int n_msgs, int add_generation_prompt,
                         const char *bos_token, const char *eos_token, const char *const *extra_kv, int n_extra);

/* Same, with the members of extra (a JSON object: booleans such as
 * enable_thinking, strings such as reasoning_effort) as variables. */
char *rkm_chat_render_json(const char *template_src, const rkm_chat_msg *msgs, int n_msgs, int add_generation_prompt,
                           const char *bos_token, const char *eos_token, const cJSON *extra);

/* Renders with an arbitrary JSON object of variables (messages with
 * tool_calls, tools, documents, booleans such as enable_thinking, ...). */
char *rkm_chat_render_vars(const char *template_src, const cJSON *vars);

/* Built-in fallback by name ("chatml", "llama2", "llama3", "gemma",
 * "mistral"): the Jinja source, or NULL. */
const char *rkm_chat_builtin_template(const char *name);

/* The fallback name for a model architecture (GGUF general.architecture,
 * e.g. "qwen3moe" -> "chatml", "mixtral" -> "mistral"); "chatml" when unknown. */
const char *rkm_chat_builtin_for_arch(const char *arch);

#endif
