/*
 * toolcall.c - tool calls in a reply, per family (toolcall.h).
 *
 * Pure and single-threaded: a parser per generation; no globals.
 */
#include "server/toolcall.h"
#include "server/tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/json_schema.h"
#include "util/common.h"

/* ------------------------------------------------------------- formats */

typedef struct fmt_desc {
    const char *name;
    const char *open[2];  /* markers that begin a call (or the calls) */
    const char *close[3]; /* markers that end it; none: the end of the reply */
} fmt_desc;

#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

static const fmt_desc formats[SRV_TF_COUNT] = {
    [SRV_TF_TAGS] = {"tags", {"<tool_call>"}, {"</tool_call>"}},
    [SRV_TF_LLAMA3] = {"llama3", {"<|python_tag|>"}, {NULL}},
    [SRV_TF_MISTRAL] = {"mistral", {"[TOOL_CALLS]"}, {NULL}},
    [SRV_TF_DEEPSEEK] = {"deepseek", {DS_CALLS_BEGIN, DS_CALL_BEGIN}, {DS_CALLS_END}},
    [SRV_TF_GEMMA4] = {"gemma4", {"<|tool_call>"}, {"<tool_call|>"}},
    [SRV_TF_HARMONY] = {"harmony", {"to=functions."}, {"<|call|>", "<|end|>", "<|start|>"}},
};

int srv_tool_format(const char *t)
{
    if (!t) return SRV_TF_TAGS;
    if (strstr(t, "<|channel|>")) return SRV_TF_HARMONY;
    if (strstr(t, "<|tool_call>")) return SRV_TF_GEMMA4;
    if (strstr(t, "tool\xe2\x96\x81" "calls\xe2\x96\x81" "begin")) return SRV_TF_DEEPSEEK;
    if (strstr(t, "[TOOL_CALLS]")) return SRV_TF_MISTRAL;
    if (strstr(t, "<tool_call>")) return SRV_TF_TAGS;
    if (strstr(t, "<|python_tag|>") || strstr(t, "ipython")) return SRV_TF_LLAMA3;
    return SRV_TF_TAGS;
}

const char *srv_tool_format_name(int fmt)
{
    return fmt >= 0 && fmt < SRV_TF_COUNT ? formats[fmt].name : "?";
}

/* ------------------------------------------------------------- helpers */

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* [*s, *e) without surrounding whitespace */
static void trim(const char **s, const char **e)
{
    while (*s < *e && is_ws(**s)) (*s)++;
    while (*e > *s && is_ws((*e)[-1])) (*e)--;
}

static const char *find(const char *s, const char *e, const char *needle)
{
    return memmem(s, (size_t)(e - s), needle, strlen(needle));
}

/* A JSON object from [s, e) (a JSON string holding an object counts too);
 * NULL when it is not one. *end: where the value ended. */
static cJSON *json_object(const char *s, const char *e, const char **end)
{
    const char *pe = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, (size_t)(e - s), &pe, 0);
    if (end) *end = v ? pe : NULL;
    if (cJSON_IsString(v)) {
        cJSON *w = cJSON_Parse(v->valuestring);
        cJSON_Delete(v);
        v = w;
    }
    if (!cJSON_IsObject(v)) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

/* Appends {id, type, function: {name, arguments}}; takes args. */
static int add_call(cJSON *calls, const char *name, size_t n, cJSON *args, const char *id_base, int *n_calls)
{
    char nm[65], id[48];
    if (!srv_tool_name_ok(name, n) || !cJSON_IsObject(args)) {
        cJSON_Delete(args);
        return 0;
    }
    memcpy(nm, name, n);
    nm[n] = 0;
    snprintf(id, sizeof id, "%s%d", id_base ? id_base : "call_", *n_calls);
    cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
    if (!o || !f) {
        cJSON_Delete(o);
        cJSON_Delete(f);
        cJSON_Delete(args);
        return 0;
    }
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "type", "function");
    cJSON_AddItemToObject(o, "function", f);
    cJSON_AddStringToObject(f, "name", nm);
    cJSON_AddItemToObject(f, "arguments", args);
    cJSON_AddItemToArray(calls, o);
    (*n_calls)++;
    return 1;
}

/* {"name": ..., "arguments" | "parameters": {...}} */
static int json_call(const cJSON *o, const char *id_base, int *n_calls, cJSON *calls)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!a) a = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (!cJSON_IsString(n)) return 0;
    cJSON *args = !a || cJSON_IsNull(a) ? cJSON_CreateObject()
                  : cJSON_IsString(a)   ? cJSON_Parse(a->valuestring)
                                        : cJSON_Duplicate(a, 1);
    return add_call(calls, n->valuestring, strlen(n->valuestring), args, id_base, n_calls);
}

/* The declared type of parameter key of function name ("" when unknown). */
static const char *param_type(const cJSON *tools, const char *name, const char *key)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, name)) continue;
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f, "parameters"), "properties");
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, key), "type");
        return cJSON_IsString(ty) ? ty->valuestring : "";
    }
    return "";
}

/* A value written as text (XML-like forms): a string parameter stays
 * text; anything else is JSON when it parses as JSON. */
static cJSON *typed_value(const char *s, const char *e, const char *type)
{
    if (e > s && e[-1] == '\n') e--; /* one newline on each side is layout */
    if (e > s && *s == '\n') s++;
    if (strcmp(type, "string")) {
        cJSON *v = cJSON_ParseWithLength(s, (size_t)(e - s));
        if (v) return v;
    }
    char *t = malloc((size_t)(e - s) + 1);
    if (!t) return NULL;
    memcpy(t, s, (size_t)(e - s));
    t[e - s] = 0;
    cJSON *v = cJSON_CreateString(t);
    free(t);
    return v;
}

/* Qwen3-Coder: <function=NAME><parameter=K>V</parameter>...</function> */
static int xml_call(const char *s, const char *e, const cJSON *tools, const char *id_base, int *n_calls, cJSON *calls)
{
    s += strlen("<function=");
    const char *gt = find(s, e, ">");
    if (!gt) return 0;
    char name[65];
    size_t nn = (size_t)(gt - s);
    if (!srv_tool_name_ok(s, nn)) return 0;
    memcpy(name, s, nn);
    name[nn] = 0;
    const char *fend = find(gt, e, "</function>");
    if (fend) e = fend;
    cJSON *args = cJSON_CreateObject();
    for (const char *p = gt + 1; args;) {
        const char *ps = find(p, e, "<parameter=");
        if (!ps) break;
        ps += strlen("<parameter=");
        const char *pg = find(ps, e, ">");
        const char *pe = pg ? find(pg, e, "</parameter>") : NULL;
        if (!pg || !pe || pg - ps > 64) {
            cJSON_Delete(args);
            return 0;
        }
        char key[65];
        memcpy(key, ps, (size_t)(pg - ps));
        key[pg - ps] = 0;
        cJSON *v = typed_value(pg + 1, pe, param_type(tools, name, key));
        if (!v) break;
        cJSON_AddItemToObject(args, key, v);
        p = pe + strlen("</parameter>");
    }
    return add_call(calls, name, nn, args, id_base, n_calls);
}

/* GLM-4.5: NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>... */
static int glm_call(const char *s, const char *e, const cJSON *tools, const char *id_base, int *n_calls, cJSON *calls)
{
    const char *ne = s;
    while (ne < e && !is_ws(*ne) && *ne != '<') ne++;
    char name[65];
    size_t nn = (size_t)(ne - s);
    if (!srv_tool_name_ok(s, nn)) return 0;
    memcpy(name, s, nn);
    name[nn] = 0;
    cJSON *args = cJSON_CreateObject();
    const char *p = ne;
    while (args) {
        while (p < e && is_ws(*p)) p++;
        if (p == e) break;
        const char *ks = find(p, e, "<arg_key>");
        const char *ke = ks ? find(ks, e, "</arg_key>") : NULL;
        const char *vs = ke ? find(ke, e, "<arg_value>") : NULL;
        const char *ve = vs ? find(vs, e, "</arg_value>") : NULL;
        if (ks != p || !ve) {
            cJSON_Delete(args);
            return 0;
        }
        ks += strlen("<arg_key>");
        vs += strlen("<arg_value>");
        const char *a = ks, *b = ke;
        trim(&a, &b);
        if (b - a > 64 || b == a) {
            cJSON_Delete(args);
            return 0;
        }
        char key[65];
        memcpy(key, a, (size_t)(b - a));
        key[b - a] = 0;
        cJSON *v = typed_value(vs, ve, param_type(tools, name, key));
        if (!v) break;
        cJSON_AddItemToObject(args, key, v);
        p = ve + strlen("</arg_value>");
    }
    return add_call(calls, name, nn, args, id_base, n_calls);
}

/* Gemma 4's argument syntax -> JSON: bare keys, <|"|>-quoted strings. */
static cJSON *gemma_args(const char *s, const char *e)
{
    static const char q[] = "<|\"|>";
    const size_t nq = sizeof q - 1;
    rkm_buf b = RKM_BUF_INIT;
    char stack[64];
    int depth = 0, want_key = 0;
    for (const char *p = s; p < e;) {
        if ((size_t)(e - p) >= nq && !memcmp(p, q, nq)) { /* a string */
            const char *z = find(p + nq, e, q);
            if (!z) break;
            cJSON *str = cJSON_CreateString("");
            char *t = malloc((size_t)(z - p - (long)nq) + 1);
            if (t && str) {
                memcpy(t, p + nq, (size_t)(z - p - (long)nq));
                t[z - p - (long)nq] = 0;
                cJSON_SetValuestring(str, t);
                char *j = cJSON_PrintUnformatted(str);
                if (j) rkm_buf_adds(&b, j);
                free(j);
            }
            free(t);
            cJSON_Delete(str);
            p = z + nq;
            want_key = 0;
            continue;
        }
        char c = *p;
        if (want_key && !is_ws(c) && c != '}') { /* a bare key up to ':' */
            const char *k = p;
            if (c == '"') { /* already quoted */
                const char *z = k + 1;
                while (z < e && *z != '"') z += *z == '\\' ? 2 : 1;
                if (z >= e) break;
                rkm_buf_add(&b, k, (size_t)(z + 1 - k));
                p = z + 1;
            } else {
                while (p < e && *p != ':') p++;
                const char *ke = p;
                while (ke > k && is_ws(ke[-1])) ke--;
                rkm_buf_addc(&b, '"');
                rkm_buf_add(&b, k, (size_t)(ke - k));
                rkm_buf_addc(&b, '"');
            }
            want_key = 0;
            continue;
        }
        if (c == '{' || c == '[') {
            if (depth == (int)sizeof stack) break;
            stack[depth++] = c;
            want_key = c == '{';
        } else if (c == '}' || c == ']') {
            if (depth) depth--;
            want_key = 0;
        } else if (c == ',') {
            want_key = depth && stack[depth - 1] == '{';
        }
        rkm_buf_addc(&b, c);
        p++;
    }
    cJSON *v = rkm_buf_ok(&b) && b.data ? cJSON_Parse(b.data) : NULL;
    rkm_buf_free(&b);
    if (!cJSON_IsObject(v)) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

/* DeepSeek: one call between <｜tool▁call▁begin｜> and <｜tool▁call▁end｜>. */
static int deepseek_call(const char *s, const char *e, const char *id_base, int *n_calls, cJSON *calls)
{
    const char *sep = find(s, e, DS_SEP);
    if (!sep) { /* NAME{...}: a call written under a grammar (srv_tool_grammar) */
        const char *br = find(s, e, "{");
        return br && add_call(calls, s, (size_t)(br - s), json_object(br, e, NULL), id_base, n_calls);
    }
    const char *a = s, *ae = sep, *b = sep + strlen(DS_SEP), *be = e;
    trim(&a, &ae);
    if (ae - a == 8 && !memcmp(a, "function", 8)) { /* V3 / R1: function<sep>NAME\n```json\n{...}\n``` */
        a = b;
        while (b < be && *b != '\n') b++;
        ae = b;
        trim(&a, &ae);
        const char *f = find(b, be, "```");
        if (f) {
            b = f + 3;
            while (b < be && *b != '\n') b++; /* the fence's language */
            const char *fe = find(b, be, "```");
            if (fe) be = fe;
        }
    }
    trim(&b, &be);
    return add_call(calls, a, (size_t)(ae - a), json_object(b, be, NULL), id_base, n_calls);
}

int srv_tool_parse_body(int fmt, int marker, const char *body, size_t n, const cJSON *tools, const char *id_base,
                        int *n_calls, cJSON *calls)
{
    const char *s = body, *e = body + n;
    int before = *n_calls, ok = 1;
    switch (fmt) {
    case SRV_TF_TAGS:
        trim(&s, &e);
        if (s < e && *s == '{') {
            cJSON *o = json_object(s, e, NULL);
            ok = o && json_call(o, id_base, n_calls, calls);
            cJSON_Delete(o);
        } else if (e - s > 10 && !memcmp(s, "<function=", 10)) {
            ok = xml_call(s, e, tools, id_base, n_calls, calls);
        } else {
            ok = glm_call(s, e, tools, id_base, n_calls, calls);
        }
        break;
    case SRV_TF_LLAMA3: /* one or more objects, separated by ';' or whitespace */
        for (trim(&s, &e); ok && s < e;) {
            const char *end = NULL;
            cJSON *o = json_object(s, e, &end);
            ok = o && json_call(o, id_base, n_calls, calls);
            cJSON_Delete(o);
            if (!ok) break;
            s = end;
            while (s < e && (is_ws(*s) || *s == ';')) s++;
        }
        break;
    case SRV_TF_MISTRAL:
        trim(&s, &e);
        if (s < e && *s == '[') { /* [{"name", "arguments", "id"}, ...] */
            cJSON *arr = cJSON_ParseWithLength(s, (size_t)(e - s));
            const cJSON *o;
            ok = cJSON_IsArray(arr) && cJSON_GetArraySize(arr) > 0;
            cJSON_ArrayForEach(o, arr) if (ok) ok = json_call(o, id_base, n_calls, calls);
            cJSON_Delete(arr);
        } else { /* NAME[ARGS]{...}, each later one after its own [TOOL_CALLS] */
            while (ok && s < e) {
                const char *next = find(s, e, "[TOOL_CALLS]"), *ce = next ? next : e;
                const char *ar = find(s, ce, "[ARGS]");
                const char *ne = ar, *id = find(s, ce, "[CALL_ID]");
                if (id && id < ne) ne = id;
                ok = ar && add_call(calls, s, (size_t)(ne - s),
                                    json_object(ar + 6, ce, NULL), id_base, n_calls);
                s = next ? next + strlen("[TOOL_CALLS]") : e;
                trim(&s, &e);
            }
        }
        break;
    case SRV_TF_DEEPSEEK:
        if (marker == 1) { /* opened by a call's own marker: the body starts inside it */
            const char *ce = find(s, e, DS_CALL_END);
            ok = deepseek_call(s, ce ? ce : e, id_base, n_calls, calls);
            s = ce ? ce + strlen(DS_CALL_END) : e;
        }
        while (ok) {
            const char *cb = find(s, e, DS_CALL_BEGIN);
            if (!cb) break;
            cb += strlen(DS_CALL_BEGIN);
            const char *ce = find(cb, e, DS_CALL_END);
            ok = deepseek_call(cb, ce ? ce : e, id_base, n_calls, calls);
            s = ce ? ce + strlen(DS_CALL_END) : e;
        }
        break;
    case SRV_TF_GEMMA4: {
        trim(&s, &e);
        if (e - s < 5 || memcmp(s, "call:", 5)) return 0;
        s += 5;
        const char *br = find(s, e, "{");
        ok = br && add_call(calls, s, (size_t)(br - s), gemma_args(br, e), id_base, n_calls);
        break;
    }
    case SRV_TF_HARMONY: { /* NAME[ <|constrain|>json]<|message|>ARGS */
        const char *ne = s;
        while (ne < e && !is_ws(*ne) && *ne != '<' && *ne != '{') ne++;
        const char *m = find(ne, e, "<|message|>");
        /* NAME{...} without the header's end: a call written under a grammar */
        const char *a = m ? m + strlen("<|message|>") : ne, *ae = e;
        if (!m && (ne == e || *ne != '{')) return 0;
        trim(&a, &ae);
        ok = add_call(calls, s, (size_t)(ne - s), a == ae ? cJSON_CreateObject() : json_object(a, ae, NULL), id_base,
                      n_calls);
        break;
    }
    default:
        return 0;
    }
    if (!ok || *n_calls == before) { /* all or nothing: drop what this body added */
        while (*n_calls > before) {
            cJSON_DeleteItemFromArray(calls, cJSON_GetArraySize(calls) - 1);
            (*n_calls)--;
        }
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------- grammar */

char *srv_tool_grammar(int fmt, const cJSON *tools, const char *only, int parallel, const char **prefill)
{
    /* per format: the reply written for the model, how a call is
     * spelled around its arguments, and how calls follow each other */
    static const struct {
        const char *prefill;
        const char *before, *key, *after; /* before NAME key ARGS after; key NULL: no JSON wrapper */
        const char *root;                  /* in terms of alt; "%s" single, "%s" several */
        const char *root_many;
    } g[SRV_TF_COUNT] = {
        [SRV_TF_TAGS] = {"", "<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>", "root ::= alt\n",
                         "root ::= alt (\"\\n\" alt)*\n"},
        [SRV_TF_LLAMA3] = {"", "{\"name\": \"", "\", \"parameters\": ", "}", "root ::= alt\n", "root ::= alt (\"; \" alt)*\n"},
        [SRV_TF_MISTRAL] = {"[TOOL_CALLS]", "{\"name\": \"", "\", \"arguments\": ", "}", "root ::= \"[\" alt \"]\"\n",
                            "root ::= \"[\" alt (\", \" alt)* \"]\"\n"},
        [SRV_TF_DEEPSEEK] = {DS_CALLS_BEGIN DS_CALL_BEGIN, "", NULL, "", "root ::= alt\n", "root ::= alt\n"},
        [SRV_TF_GEMMA4] = {"<|tool_call>call:", "", NULL, "", "root ::= alt\n", "root ::= alt\n"},
        [SRV_TF_HARMONY] = {"<|channel|>commentary to=functions.", "", NULL, "", "root ::= alt\n", "root ::= alt\n"},
    };
    if (fmt < 0 || fmt >= SRV_TF_COUNT) fmt = SRV_TF_TAGS;
    int n = cJSON_GetArraySize(tools), k = 0;
    const char **before = calloc((size_t)n + 1, sizeof *before), **after = calloc((size_t)n + 1, sizeof *after);
    const cJSON **schemas = calloc((size_t)n + 1, sizeof *schemas);
    char **owned = calloc((size_t)n + 1, sizeof *owned);
    char *out = NULL;
    if (!before || !after || !schemas || !owned) goto done;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *name = cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring;
        if (only && strcmp(only, name)) continue;
        size_t len = strlen(g[fmt].before) + strlen(name) + (g[fmt].key ? strlen(g[fmt].key) : 0) + 1;
        if (!(owned[k] = malloc(len))) goto done;
        snprintf(owned[k], len, "%s%s%s", g[fmt].before, name, g[fmt].key ? g[fmt].key : "");
        before[k] = owned[k];
        after[k] = g[fmt].after;
        schemas[k] = cJSON_GetObjectItemCaseSensitive(f, "parameters");
        k++;
    }
    if (!k) {
        rkm_err(RKM_EINVAL, "no such tool");
        goto done;
    }
    char *alts = rkm_json_schema_alts_gbnf(k, before, schemas, after);
    if (alts) {
        const char *root = parallel && g[fmt].key ? g[fmt].root_many : g[fmt].root;
        size_t a = strlen(root), b = strlen(alts);
        if ((out = malloc(a + b + 1))) {
            memcpy(out, root, a);
            memcpy(out + a, alts, b + 1);
        }
        free(alts);
    }
    *prefill = g[fmt].prefill;
done:
    for (int i = 0; owned && i < k; i++) free(owned[i]);
    free(owned);
    free(before);
    free(after);
    free(schemas);
    return out;
}

/* -------------------------------------------------------------- parser */

void srv_toolp_init(srv_toolp *p, int fmt, const cJSON *tools, const char *id_base)
{
    memset(p, 0, sizeof *p);
    p->fmt = fmt >= 0 && fmt < SRV_TF_COUNT ? fmt : SRV_TF_TAGS;
    p->tools = tools;
    snprintf(p->id_base, sizeof p->id_base, "%s", id_base ? id_base : "call_");
}

void srv_toolp_free(srv_toolp *p) { rkm_buf_free(&p->hold); }

/* The earliest of the markers in [s, e): its index and place, or -1. */
static int first_marker(const char *const *mk, int n, const char *s, const char *e, const char **at)
{
    int best = -1;
    *at = NULL;
    for (int i = 0; i < n && mk[i]; i++) {
        const char *f = find(s, e, mk[i]);
        if (f && (!*at || f < *at)) *at = f, best = i;
    }
    return best;
}

/* How many bytes at the end of [s, e) may begin a marker (held back). */
static size_t partial_tail(const char *const *mk, int n, const char *s, const char *e)
{
    size_t keep = 0;
    for (int i = 0; i < n && mk[i]; i++) {
        size_t l = strlen(mk[i]);
        for (size_t k = RKM_MIN(l - 1, (size_t)(e - s)); k > keep; k--)
            if (!memcmp(e - k, mk[i], k)) {
                keep = k;
                break;
            }
    }
    return keep;
}

static void emit(srv_toolp *p, rkm_buf *content, const char *s, size_t n)
{
    for (size_t i = 0; i < n && !p->seen_text; i++) p->seen_text = !is_ws(s[i]);
    rkm_buf_add(content, s, n);
}

/* Runs the machine over what is held; at_end: the reply is over. */
static void run(srv_toolp *p, rkm_buf *content, cJSON *calls, int at_end)
{
    const fmt_desc *f = &formats[p->fmt];
    for (;;) {
        const char *s = p->hold.data ? p->hold.data : "", *e = s + p->hold.len;
        if (p->state == 2) { /* whitespace after a call is dropped */
            const char *q = s;
            while (q < e && is_ws(*q)) q++;
            rkm_buf_consume(&p->hold, (size_t)(q - s));
            if (q == e) return;
            p->state = 0;
            continue;
        }
        if (p->state == 0) {
            /* llama3: a reply that starts as a JSON object is a call */
            if (p->fmt == SRV_TF_LLAMA3 && !p->seen_text) {
                const char *q = s;
                while (q < e && is_ws(*q)) q++;
                if (q == e && !at_end) return;
                if (q < e && *q == '{') {
                    p->state = 1;
                    p->marker = -1;
                    continue;
                }
            }
            const char *at;
            int m = first_marker(f->open, 2, s, e, &at);
            if (m >= 0) {
                emit(p, content, s, (size_t)(at - s));
                rkm_buf_consume(&p->hold, (size_t)(at - s) + strlen(f->open[m]));
                p->state = 1;
                p->marker = m;
                continue;
            }
            size_t keep = at_end ? 0 : partial_tail(f->open, 2, s, e);
            emit(p, content, s, (size_t)(e - s) - keep);
            rkm_buf_consume(&p->hold, (size_t)(e - s) - keep);
            return;
        }
        /* state 1: a call's text, up to its closing marker */
        const char *at = NULL;
        int m = f->close[0] ? first_marker(f->close, 3, s, e, &at) : -1;
        if (m < 0 && !at_end) return;
        const char *be = m >= 0 ? at : e;
        if (!srv_tool_parse_body(p->fmt, p->marker, s, (size_t)(be - s), p->tools, p->id_base, &p->n_calls, calls)) {
            /* not a call after all: its text goes out as it came */
            if (p->marker >= 0) emit(p, content, f->open[p->marker], strlen(f->open[p->marker]));
            emit(p, content, s, (size_t)(be - s));
            if (m >= 0) emit(p, content, f->close[m], strlen(f->close[m]));
        }
        rkm_buf_consume(&p->hold, (size_t)(be - s) + (m >= 0 ? strlen(f->close[m]) : 0));
        p->state = 2;
        if (m < 0) return;
    }
}

int srv_toolp_push(srv_toolp *p, const char *s, size_t n, rkm_buf *content, cJSON *calls)
{
    rkm_buf_add(&p->hold, s, n);
    run(p, content, calls, 0);
    return rkm_buf_ok(&p->hold) && rkm_buf_ok(content) ? 0 : RKM_ENOMEM;
}

int srv_toolp_finish(srv_toolp *p, rkm_buf *content, cJSON *calls)
{
    run(p, content, calls, 1);
    rkm_buf_clear(&p->hold);
    return rkm_buf_ok(content) ? 0 : RKM_ENOMEM;
}
