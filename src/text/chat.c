/*
 * chat.c - renders conversations with a model's Jinja chat template and
 * holds the built-in fallback templates (used only when a model ships no
 * template). The variables are built as a cJSON object and handed to
 * text/jinja.c, which does the work.
 *
 * Threads: reentrant, no global state. Ownership: results are malloc'd
 * (caller frees); the temporary template and variables are freed here.
 */
#include "text/chat.h"

#include "text/jinja.h"
#include "util/common.h"

/* ChatML (Qwen, OLMoE-Instruct, many fine-tunes). */
static const char tmpl_chatml[] =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/* Llama 2 chat: [INST] turns, the system prompt folded into the first. */
static const char tmpl_llama2[] =
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set loop_messages = messages[1:] %}{%- set system_message = messages[0]['content'] %}"
    "{%- else %}{%- set loop_messages = messages %}{%- set system_message = '' %}{%- endif %}"
    "{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif %}"
    "{%- if loop.index0 == 0 and system_message %}"
    "{%- set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{%- else %}{%- set content = message['content'] %}{%- endif %}"
    "{%- if message['role'] == 'user' %}{{- (bos_token or '') + '[INST] ' + content | trim + ' [/INST]' }}"
    "{%- elif message['role'] == 'assistant' %}{{- ' ' + content | trim + ' ' + (eos_token or '') }}"
    "{%- endif %}"
    "{%- endfor %}";

/* Llama 3 / 3.1 without tools. */
static const char tmpl_llama3[] =
    "{{- bos_token or '' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

/* Gemma 2/3: user/model turns, the system prompt prefixed to the first. */
static const char tmpl_gemma[] =
    "{{- bos_token or '' }}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set first_user_prefix = '' %}{%- set loop_messages = messages %}{%- endif %}"
    "{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif %}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{- '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}";

/* Mistral / Mixtral instruct (Mixtral-8x7B-Instruct's template), with a
 * system prompt prepended to the first user message. */
static const char tmpl_mistral[] =
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set system_message = '' %}{%- set loop_messages = messages %}{%- endif %}"
    "{{- bos_token or '' }}"
    "{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif %}"
    "{%- if message['role'] == 'user' %}"
    "{%- if loop.first and system_message %}{{- '[INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}"
    "{%- else %}{{- '[INST] ' + message['content'] + ' [/INST]' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}{{- message['content'] + (eos_token or '') }}"
    "{%- endif %}"
    "{%- endfor %}";

static const struct {
    const char *name;
    const char *src;
} builtins[] = {
    {"chatml", tmpl_chatml}, {"llama2", tmpl_llama2}, {"llama3", tmpl_llama3},
    {"gemma", tmpl_gemma},   {"mistral", tmpl_mistral},
};

const char *rkm_chat_builtin_template(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < RKM_ARRAY_LEN(builtins); i++)
        if (!strcmp(name, builtins[i].name)) return builtins[i].src;
    return NULL;
}

const char *rkm_chat_builtin_for_arch(const char *arch)
{
    static const struct {
        const char *prefix, *tmpl;
    } map[] = {
        {"qwen", "chatml"},   {"olmoe", "chatml"},  {"deepseek", "chatml"}, {"gemma", "gemma"},
        {"mixtral", "mistral"}, {"mistral", "mistral"}, {"llama4", "llama3"}, {"llama", "llama2"},
    };
    if (arch)
        for (size_t i = 0; i < RKM_ARRAY_LEN(map); i++)
            if (!strncmp(arch, map[i].prefix, strlen(map[i].prefix))) return map[i].tmpl;
    return "chatml";
}

char *rkm_chat_render_vars(const char *template_src, const cJSON *vars)
{
    if (!template_src) {
        rkm_err(RKM_EINVAL, "chat template: none given");
        return NULL;
    }
    rkm_jinja *t = rkm_jinja_parse(template_src, strlen(template_src));
    if (!t) return NULL;
    char *out = rkm_jinja_render(t, vars, NULL, NULL);
    rkm_jinja_free(t);
    return out;
}

static char *render_with(const char *template_src, const rkm_chat_msg *msgs, int n_msgs, int add_generation_prompt,
                         const char *bos_token, const char *eos_token, const char *const *extra_kv, int n_extra,
                         const cJSON *extra_json)
{
    if (n_msgs < 0 || (n_msgs > 0 && !msgs) || n_extra < 0 || (n_extra > 0 && !extra_kv)) {
        rkm_err(RKM_EINVAL, "chat template: invalid arguments");
        return NULL;
    }
    char *out = NULL;
    cJSON *vars = cJSON_CreateObject(), *list = cJSON_CreateArray();
    if (!vars || !list) goto oom;
    cJSON_AddItemToObject(vars, "messages", list);
    for (int i = 0; i < n_msgs; i++) {
        cJSON *m = cJSON_CreateObject();
        if (!m) goto oom;
        cJSON_AddItemToArray(list, m);
        if (!cJSON_AddStringToObject(m, "role", msgs[i].role ? msgs[i].role : "") ||
            !cJSON_AddStringToObject(m, "content", msgs[i].content ? msgs[i].content : ""))
            goto oom;
    }
    if (!cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt != 0)) goto oom;
    if (bos_token && !cJSON_AddStringToObject(vars, "bos_token", bos_token)) goto oom;
    if (eos_token && !cJSON_AddStringToObject(vars, "eos_token", eos_token)) goto oom;
    for (int i = 0; i < n_extra; i++) {
        const char *k = extra_kv[2 * i], *v = extra_kv[2 * i + 1];
        if (!k || !v) continue;
        cJSON_DeleteItemFromObjectCaseSensitive(vars, k);
        if (!cJSON_AddStringToObject(vars, k, v)) goto oom;
    }
    for (const cJSON *x = extra_json ? extra_json->child : NULL; x; x = x->next) {
        cJSON_DeleteItemFromObjectCaseSensitive(vars, x->string);
        cJSON *d = cJSON_Duplicate(x, 1);
        if (!d) goto oom;
        cJSON_AddItemToObject(vars, x->string, d);
    }
    out = rkm_chat_render_vars(template_src, vars);
    cJSON_Delete(vars);
    return out;
oom:
    if (!list || (vars && !cJSON_GetObjectItemCaseSensitive(vars, "messages"))) cJSON_Delete(list);
    cJSON_Delete(vars);
    rkm_err(RKM_ENOMEM, "chat template: out of memory");
    return NULL;
}

char *rkm_chat_render_ex(const char *template_src, const rkm_chat_msg *msgs, int n_msgs, int add_generation_prompt,
                         const char *bos_token, const char *eos_token, const char *const *extra_kv, int n_extra)
{
    return render_with(template_src, msgs, n_msgs, add_generation_prompt, bos_token, eos_token, extra_kv, n_extra, NULL);
}

char *rkm_chat_render_json(const char *template_src, const rkm_chat_msg *msgs, int n_msgs, int add_generation_prompt,
                           const char *bos_token, const char *eos_token, const cJSON *extra)
{
    return render_with(template_src, msgs, n_msgs, add_generation_prompt, bos_token, eos_token, NULL, 0, extra);
}

char *rkm_chat_render(const char *template_src, const rkm_chat_msg *msgs, int n_msgs, int add_generation_prompt,
                      const char *bos_token, const char *eos_token)
{
    return rkm_chat_render_ex(template_src, msgs, n_msgs, add_generation_prompt, bos_token, eos_token, NULL, 0);
}
