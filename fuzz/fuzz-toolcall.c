/* fuzz-toolcall.c - libFuzzer target: the tool-call parsers
 * (server/toolcall.c) over a model's reply. The first byte picks the
 * format, the second the size of the pieces the reply arrives in (a marker
 * cut across pieces is the hard case); the rest is the reply. The parsed
 * calls and content are printed to JSON as the server would. Any result is
 * fine; crashes, leaks and sanitizer reports are not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "server/toolcall.h"

static const char tools_json[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"},"
    " \"units\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}, \"tags\": {\"type\": \"array\"}}}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cJSON *tools;
    if (!tools) tools = cJSON_Parse(tools_json);
    if (size < 2) return 0;
    int fmt = data[0] % SRV_TF_COUNT;
    size_t piece = (size_t)data[1] % 17 + 1;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    srv_toolp p;
    srv_toolp_init(&p, fmt, data[0] & 0x80 ? NULL : tools, "call_f");
    rkm_buf content = {0};
    cJSON *calls = cJSON_CreateArray();
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i += piece) rc = srv_toolp_push(&p, s + i, n - i < piece ? n - i : piece, &content, calls);
    if (!rc) rc = srv_toolp_finish(&p, &content, calls);
    char *out = cJSON_PrintUnformatted(calls);
    free(out);
    cJSON_Delete(calls);
    rkm_buf_free(&content);
    srv_toolp_free(&p);
    return 0;
}
