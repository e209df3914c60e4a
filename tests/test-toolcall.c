/*
 * test-toolcall.c - the tool-call parser of each family (src/server/
 * toolcall.h) on recorded replies: the calls (names, arguments as JSON)
 * and the content left over, the same whether the reply comes whole, a
 * byte at a time or cut at every place into two pieces (markers split
 * across tokens); malformed calls come back as content, never a crash;
 * the family picked from a chat template.
 */
#include "server/toolcall.h"
#include "common/test.h"

#include <cjson/cJSON.h>

#include "rkmojo.h"
#include "text/grammar.h"

static const char *tools_json =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},\"zip\":{\"type\":\"string\"}},"
    "\"additionalProperties\":false}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\"}}}]";

/* The reply fed in pieces of the given sizes (0: whole; -1: every byte;
 * k > 0: two pieces cut at k). Returns "content|name(args);name(args)". */
static char *run(int fmt, const char *reply, int cut, const cJSON *tools)
{
    srv_toolp p;
    srv_toolp_init(&p, fmt, tools, "call_");
    rkm_buf content = RKM_BUF_INIT;
    cJSON *calls = cJSON_CreateArray();
    size_t n = strlen(reply);
    if (cut == 0) {
        srv_toolp_push(&p, reply, n, &content, calls);
    } else if (cut < 0) {
        for (size_t i = 0; i < n; i++) srv_toolp_push(&p, reply + i, 1, &content, calls);
    } else {
        srv_toolp_push(&p, reply, (size_t)cut, &content, calls);
        srv_toolp_push(&p, reply + cut, n - (size_t)cut, &content, calls);
    }
    srv_toolp_finish(&p, &content, calls);
    srv_toolp_free(&p);
    rkm_buf out = RKM_BUF_INIT;
    rkm_buf_addf(&out, "%s|", content.data ? content.data : "");
    const cJSON *c;
    int i = 0;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        char *a = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(f, "arguments"));
        char id[32];
        snprintf(id, sizeof id, "call_%d", i++);
        CHECK_STR_EQ(cJSON_GetObjectItemCaseSensitive(c, "id")->valuestring, id);
        rkm_buf_addf(&out, "%s%s(%s)", i > 1 ? ";" : "", cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring, a);
        free(a);
    }
    cJSON_Delete(calls);
    rkm_buf_free(&content);
    return rkm_buf_take(&out);
}

static void check_case(int fmt, const char *reply, const char *want)
{
    cJSON *tools = cJSON_Parse(tools_json);
    int n = (int)strlen(reply);
    for (int cut = -1; cut < n; cut++) {
        char *got = run(fmt, reply, cut, tools);
        CHECK_MSG(!strcmp(got, want), "%s, cut %d:\n  reply %s\n  got   %s\n  want  %s", srv_tool_format_name(fmt), cut,
                  reply, got, want);
        int bad = strcmp(got, want) != 0;
        free(got);
        if (bad) break; /* one report per case */
    }
    cJSON_Delete(tools);
}

static void test_tags(void)
{
    /* Hermes / Qwen2.5 / Qwen3: JSON in <tool_call> */
    check_case(SRV_TF_TAGS, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
               "|get_weather({\"city\":\"Paris\"})");
    check_case(SRV_TF_TAGS,
               "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
               "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}\n</tool_call>",
               "Let me check.\n|get_weather({\"city\":\"Paris\"});get_weather({\"city\":\"Rome\"})");
    /* no call: everything is content, including text that looks like a tag */
    check_case(SRV_TF_TAGS, "a < b and <tool_ is not a tag", "a < b and <tool_ is not a tag|");
    /* malformed JSON: the call's text comes back as content */
    check_case(SRV_TF_TAGS, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": </tool_call>",
               "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": </tool_call>|");
    /* cut off before the closing tag (max_tokens): parsed to the end */
    check_case(SRV_TF_TAGS, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}", "|get_weather({})");
    check_case(SRV_TF_TAGS, "<tool_call>\n{\"name\": \"get_weath", "<tool_call>\n{\"name\": \"get_weath|");
    /* Qwen3-Coder / Qwen3.5 XML, typed by the schema: zip stays a string */
    check_case(SRV_TF_TAGS,
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n"
               "</parameter>\n<parameter=zip>\n10001\n</parameter>\n</function>\n</tool_call>",
               "|get_weather({\"city\":\"New York\",\"days\":3,\"zip\":\"10001\"})");
    /* GLM-4.5 */
    check_case(SRV_TF_TAGS,
               "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>days</arg_key>\n"
               "<arg_value>2</arg_value>\n</tool_call>",
               "|get_weather({\"city\":\"Beijing\",\"days\":2})");
    check_case(SRV_TF_TAGS, "<tool_call>get weather</tool_call>", "<tool_call>get weather</tool_call>|");
}

static void test_others(void)
{
    check_case(SRV_TF_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
               "|get_weather({\"city\":\"Paris\"})");
    check_case(SRV_TF_LLAMA3,
               "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"A\"}}; {\"name\": \"get_weather\", "
               "\"parameters\": {\"city\": \"B\"}}",
               "|get_weather({\"city\":\"A\"});get_weather({\"city\":\"B\"})");
    check_case(SRV_TF_LLAMA3, "The answer is {not json}", "The answer is {not json}|");
    check_case(SRV_TF_LLAMA3, "  {\"city\": 1}", "  {\"city\": 1}|");
    check_case(SRV_TF_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123def\"}]",
               "|get_weather({\"city\":\"Paris\"})");
    check_case(SRV_TF_MISTRAL, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}",
               "|get_weather({\"city\":\"Paris\"});get_weather({\"city\":\"Oslo\"})");
    check_case(SRV_TF_MISTRAL, "Sure.[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{}", "Sure.|get_weather({})");
    check_case(SRV_TF_MISTRAL, "[TOOL_CALLS]oops", "[TOOL_CALLS]oops|");
    check_case(SRV_TF_DEEPSEEK,
               "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81"
               "begin\xef\xbd\x9c>function<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>get_weather\n```json\n{\"city\": \"Paris\"}\n"
               "```<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81"
               "end\xef\xbd\x9c>",
               "|get_weather({\"city\":\"Paris\"})");
    check_case(SRV_TF_DEEPSEEK,
               "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81"
               "begin\xef\xbd\x9c>get_weather<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>{\"city\": \"A\"}<\xef\xbd\x9ctool\xe2\x96\x81"
               "call\xe2\x96\x81" "end\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>get_weather"
               "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>{\"city\": \"B\"}<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81"
               "end\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
               "|get_weather({\"city\":\"A\"});get_weather({\"city\":\"B\"})");
    check_case(SRV_TF_GEMMA4, "<|tool_call>call:get_weather{city:<|\"|>Paris, \"FR\"<|\"|>,days:3,opts:{metric:true,tags:[<|\"|>a<|\"|>,2]}}<tool_call|>",
               "|get_weather({\"city\":\"Paris, \\\"FR\\\"\",\"days\":3,\"opts\":{\"metric\":true,\"tags\":[\"a\",2]}})");
    check_case(SRV_TF_GEMMA4, "Checking.<|tool_call>call:get_weather{}<tool_call|>", "Checking.|get_weather({})");
    check_case(SRV_TF_GEMMA4, "<|tool_call>nonsense<tool_call|>", "<|tool_call>nonsense<tool_call|>|");
    /* harmony: the raw reply; the content output is not used by the server */
    check_case(SRV_TF_HARMONY,
               "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
               "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary |get_weather({\"city\":\"Paris\"})");
    check_case(SRV_TF_HARMONY, "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Oslo\"}",
               "<|start|>assistant |get_weather({\"city\":\"Oslo\"})");
}

static void test_detect(void)
{
    CHECK_EQ_INT(srv_tool_format("{{ '<|channel|>' }}"), SRV_TF_HARMONY);
    CHECK_EQ_INT(srv_tool_format("<tool_call>\\n{\"name\": ..."), SRV_TF_TAGS);
    CHECK_EQ_INT(srv_tool_format("[TOOL_CALLS]"), SRV_TF_MISTRAL);
    CHECK_EQ_INT(srv_tool_format("<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"), SRV_TF_DEEPSEEK);
    CHECK_EQ_INT(srv_tool_format("'<|tool_call>call:'"), SRV_TF_GEMMA4);
    CHECK_EQ_INT(srv_tool_format("<|start_header_id|>ipython<|end_header_id|>"), SRV_TF_LLAMA3);
    CHECK_EQ_INT(srv_tool_format("{{ messages }}"), SRV_TF_TAGS);
    CHECK_EQ_INT(srv_tool_format(NULL), SRV_TF_TAGS);
    /* the published templates in tests/js/chat-templates */
    static const struct {
        const char *file;
        int fmt;
    } files[] = {{"qwen2.5.jinja", SRV_TF_TAGS}, {"llama3.1.jinja", SRV_TF_LLAMA3}, {"mistral-tools.jinja", SRV_TF_MISTRAL},
                 {"gpt-oss.jinja", SRV_TF_HARMONY}, {"glm-4.6.jinja", SRV_TF_TAGS}, {"deepseek-v3.1.jinja", SRV_TF_DEEPSEEK}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/js/chat-templates/%s", files[i].file);
        FILE *f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, "skip: %s missing\n", path);
            continue;
        }
        static char buf[1 << 17];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        CHECK_MSG(srv_tool_format(buf) == files[i].fmt, "%s: %s", files[i].file, srv_tool_format_name(srv_tool_format(buf)));
    }
}

/* tool_choice required: each family's grammar takes a call in its own
 * spelling (after the prefill), the parser reads it back from prefill +
 * reply, and the grammar refuses arguments the schema does not allow */
static void test_grammar(void)
{
    static const struct {
        int fmt;
        const char *reply; /* what a model may write under the grammar */
        const char *bad;   /* what it may not */
    } cases[] = {
        {SRV_TF_TAGS, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 3"},
        {SRV_TF_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}", "{\"name\": \"other"},
        {SRV_TF_MISTRAL, "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}]", "[{\"name\": \"get_weather\", \"arguments\": {\"days\": \"2\""},
        {SRV_TF_DEEPSEEK, "get_weather{\"city\": \"Paris\", \"days\": 2}", "get_weather{\"town"},
        {SRV_TF_GEMMA4, "get_weather{\"city\": \"Paris\", \"days\": 2}", "get_weather{city"},
        {SRV_TF_HARMONY, "get_weather{\"city\": \"Paris\", \"days\": 2}", "get_weather {"},
    };
    cJSON *tools = cJSON_Parse(tools_json);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *prefill = NULL;
        char *gb = srv_tool_grammar(cases[i].fmt, tools, NULL, 1, &prefill);
        CHECK_MSG(gb != NULL, "%s: %s", srv_tool_format_name(cases[i].fmt), rkm_last_error());
        rkm_grammar *g = gb ? rkm_grammar_parse(gb, NULL) : NULL;
        CHECK_MSG(g != NULL, "%s: the grammar does not parse: %s", srv_tool_format_name(cases[i].fmt), rkm_last_error());
        if (!g) {
            free(gb);
            continue;
        }
        rkm_gstate *st = rkm_gstate_new(g);
        CHECK_MSG(rkm_gstate_accept(st, cases[i].reply, strlen(cases[i].reply)) == 0 && rkm_gstate_done(st),
                  "%s: the grammar refuses %s", srv_tool_format_name(cases[i].fmt), cases[i].reply);
        rkm_gstate_free(st);
        st = rkm_gstate_new(g);
        CHECK_MSG(rkm_gstate_accept(st, cases[i].bad, strlen(cases[i].bad)) != 0, "%s: the grammar takes %s",
                  srv_tool_format_name(cases[i].fmt), cases[i].bad);
        rkm_gstate_free(st);
        rkm_grammar_free(g);
        free(gb);
        char full[512];
        snprintf(full, sizeof full, "%s%s", prefill, cases[i].reply);
        char *got = run(cases[i].fmt, full, 0, tools);
        /* (harmony's content output, the prefill's header, is not used) */
        const char *want = "|get_weather({\"city\":\"Paris\",\"days\":2})", *bar = strrchr(got, '|');
        CHECK_MSG(bar && !strcmp(cases[i].fmt == SRV_TF_HARMONY ? bar : got, want), "%s: %s parsed as %s", srv_tool_format_name(cases[i].fmt), full, got);
        free(got);
    }
    /* named: only that tool; a keyword the compiler lacks is named */
    const char *prefill;
    char *gb = srv_tool_grammar(SRV_TF_TAGS, tools, "get_weather", 0, &prefill);
    CHECK(gb && !strstr(gb, "get_time"));
    free(gb);
    cJSON *bad = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                             "\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":3}}}}}]");
    CHECK(srv_tool_grammar(SRV_TF_TAGS, bad, NULL, 1, &prefill) == NULL && strstr(rkm_last_error(), "minimum"));
    cJSON_Delete(bad);
    cJSON_Delete(tools);
}

int main(void)
{
    test_tags();
    test_others();
    test_detect();
    test_grammar();
    return test_done();
}
