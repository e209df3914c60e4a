/* fuzz-jinja.c - libFuzzer target: parses arbitrary bytes as a chat
 * template and renders it with a fixed conversation (messages with tool
 * calls, tools, tokens), under small work/memory limits so that slow
 * inputs end in a clean error instead of a timeout. If the input holds a
 * NUL byte, what follows it is the variables as JSON instead. Any result is
 * fine; crashes, leaks and sanitizer reports are not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja.h"

static const char vars_json[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"You are helpful.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\\"there\\\" \\u00e9 \\ud83d\\ude00\\n\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", \"function\":"
    " {\"name\": \"f\", \"arguments\": {\"x\": 1, \"y\": [true, 2.5, null]}}}]},"
    " {\"role\": \"tool\", \"content\": \"42\"}, {\"role\": \"assistant\", \"content\": \"<think>a</think>b\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3, \"d\": {\"10\": 1, \"b\": 2}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cJSON *fixed;
    if (!fixed) fixed = cJSON_Parse(vars_json);
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    cJSON *own = nul ? cJSON_ParseWithLength((const char *)nul + 1, size - tlen - 1) : NULL;
    rkm_jinja *t = rkm_jinja_parse((const char *)data, tlen);
    if (t) {
        rkm_jinja_limits lim = {.max_bytes = 64u << 20, .max_steps = 200000, .max_depth = 200};
        free(rkm_jinja_render(t, own ? own : fixed, &lim, NULL));
        rkm_jinja_free(t);
    }
    cJSON_Delete(own);
    return 0;
}
