/*
 * json_schema.c - JSON Schema to GBNF (see json_schema.h).
 *
 * Each schema node becomes a rule "sN"; the fixed rules (ws, string,
 * number, value, ...) follow them. An object's properties keep the
 * schema's order: rule o_i_j ("from property j, none written yet") and
 * r_i_j ("from property j, after one") place the commas so that optional
 * properties may be left out in any combination. Digits, whitespace and
 * fractions are bounded, so a sentence of the grammar ends within a fixed
 * number of code points outside strings and repetitions the schema leaves
 * open.
 */
#include "text/json_schema.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "util/buf.h"
#include "util/common.h"

#define MAX_REFS 256

typedef struct {
    const cJSON *root;
    rkm_buf rules;
    int n;                 /* rules made */
    int depth;
    struct {
        char *ref;
        int rule;
    } refs[MAX_REFS];
    int n_refs;
    int err;
} ctx;

static const char *const fixed_rules =
    "ws ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n"
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
    "number ::= integer (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ( ws \",\" ws string ws \":\" ws value )* )? ws \"}\"\n"
    "array ::= \"[\" ws ( value ( ws \",\" ws value )* )? ws \"]\"\n"
    "date ::= \"\\\"\" date-body \"\\\"\"\n"
    "date-body ::= [0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])\n"
    "time ::= \"\\\"\" time-body \"\\\"\"\n"
    "time-body ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
    "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
    "date-time ::= \"\\\"\" date-body \"T\" time-body \"\\\"\"\n"
    "uuid ::= \"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
    "[0-9a-fA-F]{12} \"\\\"\"\n";

const char *rkm_json_object_gbnf(void)
{
    static char text[4096];
    if (!text[0]) snprintf(text, sizeof text, "root ::= object\n%s", fixed_rules);
    return text;
}

static int fail(ctx *c, const char *where, const char *fmt, const char *what)
{
    if (!c->err) {
        char msg[256];
        snprintf(msg, sizeof msg, fmt, what);
        c->err = rkm_err(RKM_EUNSUPPORTED, "json_schema: %s (at %s)", msg, where);
    }
    return -1;
}

/* A GBNF literal of the bytes of s (quotes, backslashes and controls escaped). */
static void literal(rkm_buf *b, const char *s)
{
    rkm_buf_addc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            rkm_buf_addc(b, '\\');
            rkm_buf_addc(b, (char)*p);
        } else if (*p < 0x20 || *p == 0x7F) {
            rkm_buf_addf(b, "\\x%02X", *p);
        } else {
            rkm_buf_addc(b, (char)*p);
        }
    }
    rkm_buf_addc(b, '"');
}

/* The literal of a JSON value as written compactly. */
static int json_literal(ctx *c, rkm_buf *b, const cJSON *v, const char *where)
{
    char *js = cJSON_PrintUnformatted(v);
    if (!js) return fail(c, where, "%s", "out of memory");
    literal(b, js);
    cJSON_free(js);
    return 0;
}

static int new_rule(ctx *c) { return c->n++; }

static void emit(ctx *c, int r, rkm_buf *body)
{
    rkm_buf_addf(&c->rules, "s%d ::= %s\n", r, body->data ? body->data : "");
    rkm_buf_free(body);
}

static int visit(ctx *c, const cJSON *s, const char *where);

static const char *const annotations[] = {"title", "description", "examples", "default", "$schema", "$id", "$comment",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};

static int is_annotation(const char *k)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(annotations); i++)
        if (!strcmp(k, annotations[i])) return 1;
    return 0;
}

/* Every keyword of s is an annotation or in allowed (NULL-terminated). */
static int check_keywords(ctx *c, const cJSON *s, const char *where, const char *const *allowed)
{
    for (const cJSON *k = s->child; k; k = k->next) {
        if (is_annotation(k->string)) continue;
        int ok = 0;
        for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(k->string, allowed[i]);
        if (!ok) return fail(c, where, "keyword '%s' is not supported", k->string);
    }
    return 0;
}

static int get_count(ctx *c, const cJSON *s, const char *key, const char *where, int def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return def;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 100000 || v->valuedouble != (int)v->valuedouble)
        return fail(c, where, "'%s' must be a whole number from 0 to 100000", key), -2;
    return (int)v->valuedouble;
}

/* Resolves a local $ref ("#", "#/$defs/X", "#/definitions/X", any JSON
 * pointer into the root). */
static const cJSON *resolve(ctx *c, const char *ref, const char *where)
{
    if (ref[0] != '#') return fail(c, where, "$ref '%s' is not local (#...)", ref), NULL;
    const cJSON *at = c->root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            if (p[0] == '~' && p[1] == '0') tok[n++] = '~', p += 2;
            else if (p[0] == '~' && p[1] == '1') tok[n++] = '/', p += 2;
            else tok[n++] = *p++;
        }
        tok[n] = 0;
        at = cJSON_IsArray(at) ? cJSON_GetArrayItem(at, atoi(tok)) : cJSON_GetObjectItemCaseSensitive(at, tok);
        if (!at) return fail(c, where, "$ref '%s' points nowhere", ref), NULL;
    }
    if (*p) return fail(c, where, "$ref '%s' is not a JSON pointer", ref), NULL;
    return at;
}

static int visit_ref(ctx *c, const char *ref, const char *where)
{
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) return c->refs[i].rule;
    if (c->n_refs == MAX_REFS) return fail(c, where, "more than %s $ref targets", "256");
    const cJSON *t = resolve(c, ref, where);
    if (!t) return -1;
    int r = new_rule(c);
    c->refs[c->n_refs].ref = strdup(ref);
    c->refs[c->n_refs++].rule = r;
    int inner = visit(c, t, ref);
    if (inner < 0) return -1;
    rkm_buf b = RKM_BUF_INIT;
    rkm_buf_addf(&b, "s%d", inner);
    emit(c, r, &b);
    return r;
}

static int visit_object(ctx *c, const cJSON *s, const char *where)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return fail(c, where, "%s must be an object", "properties");
    if (req && !cJSON_IsArray(req)) return fail(c, where, "%s must be an array", "required");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (!cJSON_IsString(r) || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return fail(c, where, "required property '%s' is not among the properties",
                        cJSON_IsString(r) ? r->valuestring : "?");
    int k = props ? cJSON_GetArraySize(props) : 0;
    /* the extra key/value rule, if extra properties are allowed */
    int extra = -1;
    if (!add || cJSON_IsTrue(add) || cJSON_IsObject(add)) {
        int vr = -1;
        if (cJSON_IsObject(add)) {
            char w[512];
            snprintf(w, sizeof w, "%s/additionalProperties", where);
            if ((vr = visit(c, add, w)) < 0) return -1;
        }
        extra = new_rule(c);
        rkm_buf b = RKM_BUF_INIT;
        if (vr >= 0) rkm_buf_addf(&b, "string ws \":\" ws s%d", vr);
        else rkm_buf_adds(&b, "string ws \":\" ws value");
        emit(c, extra, &b);
    } else if (!cJSON_IsFalse(add)) {
        return fail(c, where, "%s must be a boolean or a schema", "additionalProperties");
    }
    /* kv_j, then o_j / r_j from the last property back */
    int *kv = malloc(sizeof(int) * (size_t)(k + 1)), *opt = malloc(sizeof(int) * (size_t)(k + 1));
    if (!kv || !opt) {
        free(kv), free(opt);
        return fail(c, where, "%s", "out of memory");
    }
    int j = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, j++) {
        char w[512];
        snprintf(w, sizeof w, "%s/properties/%s", where, p->string);
        int vr = visit(c, p, w);
        if (vr < 0) {
            free(kv), free(opt);
            return -1;
        }
        kv[j] = new_rule(c);
        rkm_buf b = RKM_BUF_INIT;
        cJSON *key = cJSON_CreateString(p->string);
        json_literal(c, &b, key, w);
        cJSON_Delete(key);
        rkm_buf_addf(&b, " ws \":\" ws s%d", vr);
        emit(c, kv[j], &b);
        opt[j] = 1;
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (!strcmp(r->valuestring, p->string)) opt[j] = 0;
    }
    /* o[k] / r[k]: after the properties (extras, if allowed) */
    int o_next = new_rule(c), r_next = new_rule(c);
    rkm_buf b = RKM_BUF_INIT;
    if (extra >= 0) rkm_buf_addf(&b, "( s%d ( ws \",\" ws s%d )* )?", extra, extra);
    emit(c, o_next, &b);
    if (extra >= 0) rkm_buf_addf(&b, "( ws \",\" ws s%d )*", extra);
    emit(c, r_next, &b);
    for (j = k - 1; j >= 0; j--) {
        int o = new_rule(c), r = new_rule(c);
        rkm_buf_addf(&b, "s%d s%d", kv[j], r_next);
        if (opt[j]) rkm_buf_addf(&b, " | s%d", o_next);
        emit(c, o, &b);
        rkm_buf_addf(&b, "ws \",\" ws s%d s%d", kv[j], r_next);
        if (opt[j]) rkm_buf_addf(&b, " | s%d", r_next);
        emit(c, r, &b);
        o_next = o;
        r_next = r;
    }
    free(kv), free(opt);
    int me = new_rule(c);
    rkm_buf_addf(&b, "\"{\" ws s%d ws \"}\"", o_next);
    emit(c, me, &b);
    return me;
}

static int visit_array(ctx *c, const cJSON *s, const char *where)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    int mn = get_count(c, s, "minItems", where, 0), mx = get_count(c, s, "maxItems", where, -1);
    if (mn < -1 || mx < -1) return -1;
    if (mx >= 0 && mx < mn) return fail(c, where, "%s", "maxItems is under minItems");
    char w[512];
    int ir = -1;
    if (items && !cJSON_IsFalse(items)) {
        snprintf(w, sizeof w, "%s/items", where);
        if ((ir = visit(c, items, w)) < 0) return -1;
    }
    rkm_buf b = RKM_BUF_INIT;
    char item[32];
    snprintf(item, sizeof item, ir >= 0 ? "s%d" : "value", ir);
    if (prefix) {
        if (!cJSON_IsArray(prefix) || cJSON_GetArraySize(prefix) == 0) return fail(c, where, "%s must be a non-empty array", "prefixItems");
        int np = cJSON_GetArraySize(prefix);
        if (mn != 0 && mn != np) return fail(c, where, "%s", "minItems other than the prefixItems count");
        if (mx >= 0) return fail(c, where, "%s", "maxItems beside prefixItems");
        rkm_buf_adds(&b, "\"[\" ws");
        int i = 0;
        for (const cJSON *p = prefix->child; p; p = p->next, i++) {
            snprintf(w, sizeof w, "%s/prefixItems/%d", where, i);
            int pr = visit(c, p, w);
            if (pr < 0) {
                rkm_buf_free(&b);
                return -1;
            }
            rkm_buf_addf(&b, "%s s%d", i ? " ws \",\" ws" : "", pr);
        }
        if (!cJSON_IsFalse(items)) rkm_buf_addf(&b, " ( ws \",\" ws %s )*", item);
        rkm_buf_adds(&b, " ws \"]\"");
    } else if (mx == 0) {
        rkm_buf_adds(&b, "\"[\" ws \"]\"");
    } else {
        char rest[64];
        if (mx < 0) snprintf(rest, sizeof rest, "{%d,}", mn > 0 ? mn - 1 : 0);
        else snprintf(rest, sizeof rest, "{%d,%d}", mn > 0 ? mn - 1 : 0, mx - 1);
        if (mn > 0) rkm_buf_addf(&b, "\"[\" ws %s ( ws \",\" ws %s )%s ws \"]\"", item, item, rest);
        else rkm_buf_addf(&b, "\"[\" ws ( %s ( ws \",\" ws %s )%s )? ws \"]\"", item, item, rest);
    }
    int me = new_rule(c);
    emit(c, me, &b);
    return me;
}

static int visit_string(ctx *c, const cJSON *s, const char *where)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    int mn = get_count(c, s, "minLength", where, 0), mx = get_count(c, s, "maxLength", where, -1);
    if (mn < -1 || mx < -1) return -1;
    if (mx >= 0 && mx < mn) return fail(c, where, "%s", "maxLength is under minLength");
    rkm_buf b = RKM_BUF_INIT;
    if (fmt) {
        static const char *const known[] = {"date", "time", "date-time", "uuid"};
        int ok = 0;
        for (size_t i = 0; i < RKM_ARRAY_LEN(known) && !ok; i++) ok = cJSON_IsString(fmt) && !strcmp(fmt->valuestring, known[i]);
        if (!ok) return fail(c, where, "string format '%s' is not supported", cJSON_IsString(fmt) ? fmt->valuestring : "?");
        if (mn || mx >= 0) return fail(c, where, "%s", "minLength / maxLength beside a format");
        rkm_buf_adds(&b, fmt->valuestring);
    } else if (mn == 0 && mx < 0) {
        rkm_buf_adds(&b, "string");
    } else if (mx < 0) {
        rkm_buf_addf(&b, "\"\\\"\" char{%d,} \"\\\"\"", mn);
    } else {
        rkm_buf_addf(&b, "\"\\\"\" char{%d,%d} \"\\\"\"", mn, mx);
    }
    int me = new_rule(c);
    emit(c, me, &b);
    return me;
}

/* s restricted to one type name. */
static int visit_type(ctx *c, const cJSON *s, const char *t, const char *where)
{
    if (!strcmp(t, "object")) return visit_object(c, s, where);
    if (!strcmp(t, "array")) return visit_array(c, s, where);
    if (!strcmp(t, "string")) return visit_string(c, s, where);
    rkm_buf b = RKM_BUF_INIT;
    if (!strcmp(t, "integer") || !strcmp(t, "number") || !strcmp(t, "boolean") || !strcmp(t, "null")) rkm_buf_adds(&b, t);
    else return fail(c, where, "type '%s' is not a JSON Schema type", t);
    int me = new_rule(c);
    emit(c, me, &b);
    return me;
}

static int visit(ctx *c, const cJSON *s, const char *where)
{
    if (c->err) return -1;
    if (++c->depth > 64) return fail(c, where, "%s", "schema nested deeper than 64");
    int r = -1;
    rkm_buf b = RKM_BUF_INIT;
    if (cJSON_IsTrue(s) || (cJSON_IsObject(s) && !s->child)) {
        rkm_buf_adds(&b, "value");
        emit(c, r = new_rule(c), &b);
        c->depth--;
        return r;
    }
    if (!cJSON_IsObject(s)) {
        c->depth--;
        return fail(c, where, "%s", cJSON_IsFalse(s) ? "schema false admits nothing" : "a schema must be an object");
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (!any) any = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(s, "type");
    static const char *const only_ref[] = {"$ref", NULL}, *const only_enum[] = {"enum", "type", NULL},
                             *const only_const[] = {"const", "type", NULL}, *const only_any[] = {"anyOf", "oneOf", NULL},
                             *const only_all[] = {"allOf", NULL},
                             *const typed[] = {"type", "properties", "required", "additionalProperties", "items",
                                               "prefixItems", "minItems", "maxItems", "minLength", "maxLength",
                                               "format", NULL};
    if (ref) {
        if (!check_keywords(c, s, where, only_ref)) {
            if (!cJSON_IsString(ref)) fail(c, where, "%s must be a string", "$ref");
            else r = visit_ref(c, ref->valuestring, where);
        }
    } else if (en) {
        if (!check_keywords(c, s, where, only_enum)) {
            if (!cJSON_IsArray(en) || !en->child) fail(c, where, "%s must be a non-empty array", "enum");
            for (const cJSON *v = cJSON_IsArray(en) ? en->child : NULL; v && !c->err; v = v->next) {
                if (v != en->child) rkm_buf_adds(&b, " | ");
                json_literal(c, &b, v, where);
            }
            if (!c->err) emit(c, r = new_rule(c), &b);
        }
    } else if (cn) {
        if (!check_keywords(c, s, where, only_const) && !json_literal(c, &b, cn, where)) emit(c, r = new_rule(c), &b);
    } else if (any) {
        if (!check_keywords(c, s, where, only_any)) {
            if (!cJSON_IsArray(any) || !any->child) fail(c, where, "%s must be a non-empty array", "anyOf / oneOf");
            int i = 0;
            for (const cJSON *v = cJSON_IsArray(any) ? any->child : NULL; v && !c->err; v = v->next, i++) {
                char w[512];
                snprintf(w, sizeof w, "%s/anyOf/%d", where, i);
                int sr = visit(c, v, w);
                if (sr >= 0) rkm_buf_addf(&b, "%ss%d", i ? " | " : "", sr);
            }
            if (!c->err) emit(c, r = new_rule(c), &b);
        }
    } else if (all) {
        if (!check_keywords(c, s, where, only_all)) {
            if (!cJSON_IsArray(all) || cJSON_GetArraySize(all) != 1) fail(c, where, "%s", "allOf with other than one schema");
            else r = visit(c, all->child, where);
        }
    } else if (!check_keywords(c, s, where, typed)) {
        if (cJSON_IsString(ty)) {
            r = visit_type(c, s, ty->valuestring, where);
        } else if (cJSON_IsArray(ty) && ty->child) {
            int i = 0;
            for (const cJSON *t = ty->child; t && !c->err; t = t->next, i++) {
                int tr = cJSON_IsString(t) ? visit_type(c, s, t->valuestring, where) : fail(c, where, "%s", "type list entries must be strings");
                if (tr >= 0) rkm_buf_addf(&b, "%ss%d", i ? " | " : "", tr);
            }
            if (!c->err) emit(c, r = new_rule(c), &b);
        } else if (ty) {
            fail(c, where, "%s", "type must be a string or a list of them");
        } else if (cJSON_GetObjectItemCaseSensitive(s, "properties") ||
                   cJSON_GetObjectItemCaseSensitive(s, "additionalProperties") ||
                   cJSON_GetObjectItemCaseSensitive(s, "required")) {
            r = visit_object(c, s, where);
        } else if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems")) {
            r = visit_array(c, s, where);
        } else if (s->child && (cJSON_GetObjectItemCaseSensitive(s, "minLength") ||
                                cJSON_GetObjectItemCaseSensitive(s, "maxLength") ||
                                cJSON_GetObjectItemCaseSensitive(s, "format"))) {
            r = visit_string(c, s, where);
        } else {
            rkm_buf_adds(&b, "value"); /* annotations only */
            emit(c, r = new_rule(c), &b);
        }
    }
    rkm_buf_free(&b);
    c->depth--;
    return c->err ? -1 : r;
}

char *rkm_json_schema_alts_gbnf(int n, const char *const *before, const cJSON *const *schemas, const char *const *after)
{
    ctx c = {.rules = RKM_BUF_INIT};
    rkm_buf alt = RKM_BUF_INIT;
    rkm_buf_adds(&alt, "alt ::=");
    for (int i = 0; i < n && !c.err; i++) {
        /* each schema's $refs resolve in that schema */
        for (int k = 0; k < c.n_refs; k++) free(c.refs[k].ref);
        c.n_refs = 0;
        c.root = schemas[i];
        int r = visit(&c, schemas[i], "#");
        if (r < 0 || c.err) break;
        rkm_buf_adds(&alt, i ? " | " : " ");
        if (before && before[i] && *before[i]) literal(&alt, before[i]), rkm_buf_addc(&alt, ' ');
        rkm_buf_addf(&alt, "s%d", r);
        if (after && after[i] && *after[i]) rkm_buf_addc(&alt, ' '), literal(&alt, after[i]);
    }
    char *out = NULL;
    if (!c.err) {
        rkm_buf_addc(&alt, '\n');
        rkm_buf_add(&alt, c.rules.data, c.rules.len);
        rkm_buf_adds(&alt, fixed_rules);
        out = rkm_buf_ok(&alt) && rkm_buf_ok(&c.rules) ? rkm_buf_take(&alt) : NULL;
        if (!out) rkm_err(RKM_ENOMEM, "json_schema: out of memory");
    }
    for (int i = 0; i < c.n_refs; i++) free(c.refs[i].ref);
    rkm_buf_free(&c.rules);
    rkm_buf_free(&alt);
    return out;
}

char *rkm_json_schema_to_gbnf(const cJSON *schema)
{
    ctx c = {.root = schema, .rules = RKM_BUF_INIT};
    int r = visit(&c, schema, "#");
    char *out = NULL;
    if (r >= 0 && !c.err) {
        rkm_buf t = RKM_BUF_INIT;
        rkm_buf_addf(&t, "root ::= s%d\n", r);
        rkm_buf_add(&t, c.rules.data, c.rules.len);
        rkm_buf_adds(&t, fixed_rules);
        out = rkm_buf_ok(&t) && rkm_buf_ok(&c.rules) ? rkm_buf_take(&t) : NULL;
        if (!out) rkm_err(RKM_ENOMEM, "json_schema: out of memory");
        rkm_buf_free(&t);
    }
    for (int i = 0; i < c.n_refs; i++) free(c.refs[i].ref);
    rkm_buf_free(&c.rules);
    return out;
}
