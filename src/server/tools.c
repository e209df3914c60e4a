/*
 * tools.c - the request side of tool calling (tools.h): validating and
 * normalising "tools", "tool_choice" and the tool fields of messages.
 *
 * Pure functions; any thread.
 */
#include "server/tools.h"

#include "server/fields.h"
#include "util/common.h"

#define SRV_MAX_TOOLS 256

int srv_tool_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.' || c == ':'))
            return 0;
    }
    return 1;
}

const cJSON *srv_tool_find(const srv_request *r, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, r->tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return f;
    }
    return NULL;
}

int srv_tools_active(const srv_request *r)
{
    return r->tools && cJSON_GetArraySize(r->tools) > 0 && r->tool_choice != SRV_TOOLS_NONE;
}

/* One tool, normalised to {type: "function", function: {name,
 * description?, parameters}}; NULL + err. */
static cJSON *tool_of(const cJSON *t, int i, char *err, size_t errcap)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
    if (!cJSON_IsObject(t) || (ty && !cJSON_IsNull(ty) && (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function")))) {
        snprintf(err, errcap, "tools[%d] must be an object of type \"function\"", i);
        return NULL;
    }
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
    if (!cJSON_IsObject(f) || !cJSON_IsString(n)) {
        snprintf(err, errcap, "tools[%d].function must be an object with a string 'name'", i);
        return NULL;
    }
    if (!srv_tool_name_ok(n->valuestring, strlen(n->valuestring))) {
        snprintf(err, errcap, "tools[%d].function.name '%.64s' must be 1 to 64 letters, digits, '_', '-', '.' or ':'", i,
                 n->valuestring);
        return NULL;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(f, "description");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    if ((d && !cJSON_IsNull(d) && !cJSON_IsString(d)) || (p && !cJSON_IsNull(p) && !cJSON_IsObject(p))) {
        snprintf(err, errcap, "tools[%d].function: 'description' must be a string, 'parameters' a JSON schema object", i);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject(), *fo = cJSON_CreateObject();
    if (!o || !fo || !cJSON_AddStringToObject(o, "type", "function")) goto oom;
    cJSON_AddItemToObject(o, "function", fo);
    if (!cJSON_AddStringToObject(fo, "name", n->valuestring)) goto oom;
    if (cJSON_IsString(d) && !cJSON_AddStringToObject(fo, "description", d->valuestring)) goto oom;
    cJSON *pc = cJSON_IsObject(p) ? cJSON_Duplicate(p, 1) : cJSON_Parse("{\"type\":\"object\",\"properties\":{}}");
    if (!pc) goto oom;
    cJSON_AddItemToObject(fo, "parameters", pc);
    return o;
oom:
    if (o && !cJSON_GetObjectItemCaseSensitive(o, "function")) cJSON_Delete(fo);
    cJSON_Delete(o);
    snprintf(err, errcap, "out of memory");
    return NULL;
}

int srv_get_tools(srv_request *r, const cJSON *root, char *err, size_t errcap)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) > SRV_MAX_TOOLS) {
            snprintf(err, errcap, "'tools' must be an array of at most %d tools", SRV_MAX_TOOLS);
            return -1;
        }
        if (!(r->tools = cJSON_CreateArray())) goto oom;
        const cJSON *t;
        int i = 0;
        cJSON_ArrayForEach(t, tools) {
            cJSON *o = tool_of(t, i++, err, errcap);
            if (!o) return -1;
            cJSON_AddItemToArray(r->tools, o);
            const char *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "function"), "name")->valuestring;
            for (const cJSON *u = r->tools->child; u != o; u = u->next)
                if (!strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(u, "function"), "name")->valuestring, nm)) {
                    snprintf(err, errcap, "tools: the function name '%s' is given twice", nm);
                    return -1;
                }
        }
    }
    if (srv_get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, err, errcap)) return -1;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (!tc || cJSON_IsNull(tc)) return 0;
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        if (!strcmp(s, "auto")) r->tool_choice = SRV_TOOLS_AUTO;
        else if (!strcmp(s, "none")) r->tool_choice = SRV_TOOLS_NONE;
        else if (!strcmp(s, "required")) r->tool_choice = SRV_TOOLS_REQUIRED;
        else {
            snprintf(err, errcap, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
            return -1;
        }
    } else {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(n)) {
            snprintf(err, errcap, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
            return -1;
        }
        if (!srv_tool_find(r, n->valuestring)) {
            snprintf(err, errcap, "'tool_choice' names the function '%.64s', which is not in 'tools'", n->valuestring);
            return -1;
        }
        r->tool_choice = SRV_TOOLS_NAMED;
        if (!(r->tool_name = strdup(n->valuestring))) goto oom;
    }
    if (r->tool_choice >= SRV_TOOLS_REQUIRED && !(r->tools && cJSON_GetArraySize(r->tools) > 0)) {
        snprintf(err, errcap, "'tool_choice' \"required\" needs 'tools'");
        return -1;
    }
    return 0;
oom:
    snprintf(err, errcap, "out of memory");
    return -1;
}

/* One earlier call, normalised; NULL + err. */
static cJSON *call_of(const cJSON *c, int mi, int i, char *err, size_t errcap)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "arguments");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
    if (!cJSON_IsObject(c) || !cJSON_IsString(n) || (id && !cJSON_IsNull(id) && !cJSON_IsString(id))) {
        snprintf(err, errcap, "messages[%d].tool_calls[%d] must be {\"id\", \"function\": {\"name\", \"arguments\"}}", mi, i);
        return NULL;
    }
    cJSON *args;
    if (cJSON_IsString(a)) { /* OpenAI: a JSON text; the template gets the object */
        args = cJSON_Parse(a->valuestring);
        if (!cJSON_IsObject(args)) {
            cJSON_Delete(args);
            args = cJSON_CreateString(a->valuestring);
        }
    } else if (cJSON_IsObject(a)) {
        args = cJSON_Duplicate(a, 1);
    } else if (!a || cJSON_IsNull(a)) {
        args = cJSON_CreateObject();
    } else {
        snprintf(err, errcap, "messages[%d].tool_calls[%d].function.arguments must be an object or a JSON string", mi, i);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject(), *fo = cJSON_CreateObject();
    char idbuf[32];
    snprintf(idbuf, sizeof idbuf, "call_%d_%d", mi, i);
    if (!o || !fo || !args) goto oom;
    cJSON_AddStringToObject(o, "id", cJSON_IsString(id) ? id->valuestring : idbuf);
    cJSON_AddStringToObject(o, "type", "function");
    cJSON_AddItemToObject(o, "function", fo);
    cJSON_AddStringToObject(fo, "name", n->valuestring);
    cJSON_AddItemToObject(fo, "arguments", args);
    return o;
oom:
    cJSON_Delete(args);
    cJSON_Delete(fo);
    cJSON_Delete(o);
    snprintf(err, errcap, "out of memory");
    return NULL;
}

int srv_get_msg_tools(srv_request *r, srv_msg *d, const cJSON *m, char *err, size_t errcap)
{
    int mi = (int)(d - r->msgs);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (tc && !cJSON_IsNull(tc)) {
        if (!cJSON_IsArray(tc) || strcmp(d->role, "assistant")) {
            snprintf(err, errcap, "messages[%d].tool_calls must be an array, on an assistant message", mi);
            return -1;
        }
        if (!(d->tool_calls = cJSON_CreateArray())) goto oom;
        const cJSON *c;
        int i = 0;
        cJSON_ArrayForEach(c, tc) {
            cJSON *o = call_of(c, mi, i++, err, errcap);
            if (!o) return -1;
            cJSON_AddItemToArray(d->tool_calls, o);
        }
    }
    if (strcmp(d->role, "tool")) return 0;
    if (srv_get_string(m, "tool_call_id", &d->tool_call_id, err, errcap)) return -1;
    if (srv_get_string(m, "name", &d->name, err, errcap)) return -1;
    if (!d->name && srv_get_string(m, "tool_name", &d->name, err, errcap)) return -1; /* Ollama */
    /* a result without its function's name: the earlier call it answers */
    for (int k = mi - 1; !d->name && d->tool_call_id && k >= 0; k--) {
        const cJSON *c;
        cJSON_ArrayForEach(c, r->msgs[k].tool_calls) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
            if (cJSON_IsString(id) && !strcmp(id->valuestring, d->tool_call_id)) {
                const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "function"), "name");
                if (!(d->name = strdup(n->valuestring))) goto oom;
                break;
            }
        }
    }
    return 0;
oom:
    snprintf(err, errcap, "out of memory");
    return -1;
}
