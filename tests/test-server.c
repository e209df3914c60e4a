/*
 * test-server.c - unit tests of the server's HTTP-independent parts
 * (src/server/api.h, fields.h): request validation for both APIs (every
 * malformed field is a 400 message naming it), the sampling defaults both
 * APIs share, durations, model-name rules, and the streaming text output
 * the server and the CLI share (rkm_textout: never half a UTF-8 character,
 * stop strings across token boundaries, invalid bytes as U+FFFD). The
 * end-to-end HTTP tests are tests/test-server.sh.
 */
#include "server/api.h"
#include "server/reasoning.h"
#include "server/fields.h"
#include "server/websafe.h"
#include "server/gate.h"

#include <arpa/inet.h>
#include "common/test.h"

/* The request left every sampler field at rkm_sampler_params_default's. */
static void check_default_sampling(const srv_request *r)
{
    rkm_sampler_params d;
    rkm_sampler_params_default(&d);
    CHECK_NEAR(r->sp.temperature, d.temperature, 1e-9);
    CHECK_NEAR(r->sp.temperature, 0.8, 1e-6);
    CHECK_EQ_INT(r->sp.top_k, 40);
    CHECK_NEAR(r->sp.top_p, 0.95, 1e-6);
    CHECK_NEAR(r->sp.min_p, 0.05, 1e-6);
    CHECK_NEAR(r->sp.repeat_penalty, 1, 1e-9);
    CHECK_EQ_INT(r->sp.repeat_last_n, 64);
    CHECK_NEAR(r->sp.presence_penalty, 0, 1e-9);
    CHECK_NEAR(r->sp.frequency_penalty, 0, 1e-9);
    CHECK_EQ_INT((int)r->sp_set, 0);
}

static int parse(int kind, const char *json, srv_request *r, char *err)
{
    return srv_parse_request(kind, json, strlen(json), r, err, 256);
}

static void expect_400(int kind, const char *json, const char *word)
{
    srv_request r;
    char err[256] = "";
    int rc = parse(kind, json, &r, err);
    CHECK_MSG(rc == -1, "accepted: %s", json);
    CHECK_MSG(strstr(err, word) != NULL, "message '%s' lacks '%s' for %s", err, word, json);
}

static void test_openai(void)
{
    srv_request r;
    char err[256];
    const char *ok = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
                     "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
                     "\"temperature\":0.5,\"top_p\":0.9,\"max_completion_tokens\":7,\"stop\":[\"x\",\"yz\"],"
                     "\"seed\":12,\"presence_penalty\":1,\"frequency_penalty\":-1,\"stream\":true,"
                     "\"stream_options\":{\"include_usage\":true}}";
    CHECK_EQ_INT(parse(SRV_OPENAI_CHAT, ok, &r, err), 0);
    CHECK_EQ_INT(r.n_msgs, 2);
    CHECK(!strcmp(r.msgs[1].content, "ab"));
    CHECK_NEAR(r.sp.temperature, 0.5, 1e-6);
    CHECK_NEAR(r.sp.top_p, 0.9, 1e-6);
    CHECK_NEAR(r.sp.presence_penalty, 1, 1e-6);
    CHECK_NEAR(r.sp.frequency_penalty, -1, 1e-6);
    CHECK_EQ_INT(r.max_tokens, 7);
    CHECK_EQ_INT(r.n_stop, 2);
    CHECK(r.has_seed && r.sp.seed == 12);
    CHECK(r.stream && r.include_usage);

    /* the request's fields win over the model's defaults; the rest stay */
    rkm_sampler_params sp;
    rkm_sampler_params_default(&sp);
    sp.top_p = 0.5f;
    sp.temperature = 0.1f;
    srv_request_sampler(&r, &sp);
    CHECK_NEAR(sp.temperature, 0.5, 1e-6);
    CHECK_NEAR(sp.top_p, 0.9, 1e-6);
    CHECK_EQ_INT(sp.top_k, 40);
    srv_request_free(&r);

    /* defaults: the common sampling set, no limit */
    CHECK_EQ_INT(parse(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, err), 0);
    check_default_sampling(&r);
    CHECK_EQ_INT(r.max_tokens, -1);
    CHECK(!r.stream && !r.has_seed && r.cache_prompt);
    srv_request_free(&r);

    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[", "malformed JSON");
    expect_400(SRV_OPENAI_CHAT, "[1,2]", "object");
    expect_400(SRV_OPENAI_CHAT, "{}", "messages");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[]}", "empty");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":{}}", "array");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "role");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "role");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "content");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "'url'");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"audio\"}]}]}", "text and image_url");
    /* an http(s) URL is kept for the HTTP side to fetch (or refuse) */
    CHECK_EQ_INT(parse(SRV_OPENAI_CHAT,
                       "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://h/a.png\"}}]}]}",
                       &r, err),
                 0);
    CHECK(r.n_images == 1 && r.images[0].url && !strcmp(r.images[0].url, "http://h/a.png") && !r.images[0].data);
    srv_request_free(&r);
    expect_400(SRV_OPENAI_CHAT,
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png,abc\"}}]}]}",
               "data: URI with base64");
    expect_400(SRV_OPENAI_CHAT,
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,@@\"}}]}]}",
               "not valid base64");
    /* an image part: its bytes, a marker where it stands */
    CHECK_EQ_INT(parse(SRV_OPENAI_CHAT,
                       "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a \"},"
                       "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,aGVsbG8=\"}},"
                       "{\"type\":\"text\",\"text\":\" b\"}]}]}",
                       &r, err),
                 0);
    CHECK(r.n_images == 1 && r.images[0].len == 5 && !memcmp(r.images[0].data, "hello", 5));
    CHECK_STR_EQ(r.msgs[0].content, "a <__media__> b");
    srv_request_free(&r);
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", "temperature");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}", "temperature");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":-0.1}", "top_p");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-5}", "max_tokens");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", "stop");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1.5}", "seed");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":17}", "'n'");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", "'n'");
    {
        srv_request rn;
        char errn[256];
        CHECK(parse(SRV_OPENAI_COMPLETION, "{\"prompt\":\"x\",\"n\":3}", &rn, errn) == 0 && rn.n_choices == 3);
        srv_request_free(&rn);
        CHECK(parse(SRV_OPENAI_COMPLETION, "{\"prompt\":\"x\"}", &rn, errn) == 0 && rn.n_choices == 1);
        srv_request_free(&rn);
    }
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"yes\"}", "stream");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":\"../../etc/passwd\"}", "model");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", "tools");
    expect_400(SRV_OPENAI_COMPLETION, "{\"prompt\":5}", "prompt");
    expect_400(SRV_OPENAI_EMBED, "{\"input\":[1,2,3]}", "input");
    expect_400(SRV_OPENAI_EMBED, "{\"input\":\"x\",\"encoding_format\":\"hex\"}", "encoding_format");

    CHECK_EQ_INT(parse(SRV_OPENAI_EMBED, "{\"input\":[\"a\",\"b\"],\"encoding_format\":\"base64\"}", &r, err), 0);
    CHECK(r.n_inputs == 2 && r.embed_base64);
    srv_request_free(&r);
}

static void test_ollama(void)
{
    srv_request r;
    char err[256];
    const char *ok = "{\"model\":\"m:latest\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                     "\"options\":{\"temperature\":0,\"num_predict\":5,\"top_k\":3,\"seed\":9,\"stop\":[\"\\n\"]},"
                     "\"keep_alive\":\"5m\"}";
    CHECK_EQ_INT(parse(SRV_OLLAMA_CHAT, ok, &r, err), 0);
    CHECK(r.stream); /* Ollama's default */
    CHECK_NEAR(r.sp.temperature, 0, 1e-9);
    CHECK_EQ_INT(r.max_tokens, 5);
    CHECK_EQ_INT(r.sp.top_k, 3);
    CHECK(r.has_seed && r.sp.seed == 9);
    CHECK(r.has_keep_alive && fabs(r.keep_alive_s - 300) < 1e-9);
    CHECK_EQ_INT(r.n_stop, 1);
    srv_request_free(&r);

    CHECK_EQ_INT(parse(SRV_OLLAMA_GENERATE, "{\"model\":\"m\",\"keep_alive\":0}", &r, err), 0);
    CHECK(r.has_keep_alive && r.keep_alive_s == 0 && !r.prompt);
    srv_request_free(&r);
    CHECK_EQ_INT(parse(SRV_OLLAMA_GENERATE, "{\"model\":\"m\",\"keep_alive\":-1,\"prompt\":\"p\",\"raw\":true}", &r, err), 0);
    CHECK(r.keep_alive_s < 0 && r.raw && !strcmp(r.prompt, "p"));
    check_default_sampling(&r); /* the same defaults as OpenAI's */
    srv_request_free(&r);

    expect_400(SRV_OLLAMA_CHAT, "{\"messages\":[]}", "model");
    expect_400(SRV_OLLAMA_CHAT, "{\"model\":\"m\",\"options\":[]}", "options");
    expect_400(SRV_OLLAMA_CHAT, "{\"model\":\"m\",\"options\":{\"top_p\":2}}", "top_p");
    expect_400(SRV_OLLAMA_CHAT, "{\"model\":\"m\",\"keep_alive\":\"soon\"}", "keep_alive");
    expect_400(SRV_OLLAMA_CHAT, "{\"model\":\"m\",\"format\":\"yaml\"}", "format");
    expect_400(SRV_OLLAMA_CHAT, "{\"model\":\"m\",\"format\":{\"type\":\"string\",\"pattern\":\"a\"}}", "pattern");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"xml\"}}",
               "response_format");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"grammar\":\"root ::= nope\"}", "nope");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", "logprobs");
    expect_400(SRV_OPENAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":9}", "logprobs");
    expect_400(SRV_OPENAI_EMBED, "{\"input\":\"x\",\"dimensions\":0}", "dimensions");
    /* format json / a schema: a grammar to keep to */
    CHECK_EQ_INT(parse(SRV_OLLAMA_CHAT, "{\"model\":\"m\",\"format\":\"json\"}", &r, err), 0);
    CHECK(r.grammar && strstr(r.grammar, "root ::= object"));
    srv_request_free(&r);
    /* images: before their message's text, or the prompt */
    CHECK_EQ_INT(parse(SRV_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"images\":[\"AA==\",\"AQ==\"]}]}",
                       &r, err),
                 0);
    CHECK(r.n_images == 2 && r.images[1].len == 1 && r.images[1].data[0] == 1);
    CHECK_STR_EQ(r.msgs[0].content, "<__media__><__media__>x");
    srv_request_free(&r);
    CHECK_EQ_INT(parse(SRV_OLLAMA_GENERATE, "{\"model\":\"m\",\"images\":[\"AA==\"]}", &r, err), 0);
    CHECK(r.n_images == 1 && r.prompt && !strcmp(r.prompt, "<__media__>"));
    srv_request_free(&r);
    expect_400(SRV_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"images\":[1]}]}",
               "messages[0].images[0] must be a base64 string");
    expect_400(SRV_OLLAMA_GENERATE, "{\"model\":\"m\",\"images\":\"AA==\"}", "array");
    {
        char big[1024] = "{\"model\":\"m\",\"images\":[";
        for (int i = 0; i < SRV_MAX_IMAGES + 1; i++) strcat(big, i ? ",\"AA==\"" : "\"AA==\"");
        strcat(big, "]}");
        expect_400(SRV_OLLAMA_GENERATE, big, "at most 16 images");
    }
    expect_400(SRV_OLLAMA_GENERATE, "{\"model\":\"m\",\"context\":[1,2]}", "context");
    expect_400(SRV_OLLAMA_GENERATE, "{\"model\":\"a/b\"}", "model");
    expect_400(SRV_OLLAMA_EMBED, "{\"model\":\"m\"}", "input");
}

/* The <think> splitter over every way to cut its input in two and byte
 * by byte: the same reasoning and content. */
static void think_case(const char *in, int inside, const char *want_r, const char *want_c)
{
    size_t n = strlen(in);
    for (size_t cut = 0; cut <= n + 1; cut++) {
        srv_think t;
        if (inside == 2) srv_think_init_harmony(&t);
        else srv_think_init(&t, inside);
        rkm_buf r = RKM_BUF_INIT, c = RKM_BUF_INIT;
        if (cut <= n) {
            srv_think_push(&t, in, cut, &r, &c);
            srv_think_push(&t, in + cut, n - cut, &r, &c);
        } else {
            for (size_t i = 0; i < n; i++) srv_think_push(&t, in + i, 1, &r, &c);
        }
        srv_think_finish(&t, &r, &c);
        CHECK_MSG(!strcmp(r.data ? r.data : "", want_r) && !strcmp(c.data ? c.data : "", want_c),
                  "'%s' cut %zu: reasoning '%s' content '%s'", in, cut, r.data ? r.data : "", c.data ? c.data : "");
        rkm_buf_free(&r);
        rkm_buf_free(&c);
    }
}

/* tools, tool_choice and the tool fields of messages, both APIs */
static void test_tools(void)
{
    srv_request r;
    char err[256];
    const char *tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}},"
                        "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";
    char body[2048];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"now\"}},"
             "\"parallel_tool_calls\":false,\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},"
             "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
             "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
             "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"}]}",
             tools);
    CHECK_EQ_INT(parse(SRV_OPENAI_CHAT, body, &r, err), 0);
    CHECK_EQ_INT(cJSON_GetArraySize(r.tools), 2);
    CHECK_EQ_INT(r.tool_choice, SRV_TOOLS_NAMED);
    CHECK_STR_EQ(r.tool_name, "now");
    CHECK_EQ_INT(r.parallel_tool_calls, 0);
    /* a tool without parameters gets an empty object schema */
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(r.tools, 1), "function"), "parameters");
    CHECK(cJSON_IsObject(p));
    /* the earlier call's arguments reach the template as an object; the
     * result's function name is found from its tool_call_id */
    const cJSON *c = cJSON_GetArrayItem(r.msgs[1].tool_calls, 0);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
    CHECK_STR_EQ(cJSON_GetObjectItemCaseSensitive(c, "id")->valuestring, "c1");
    CHECK_STR_EQ(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f, "arguments"), "city")->valuestring, "Paris");
    CHECK_STR_EQ(r.msgs[1].content, "");
    CHECK_STR_EQ(r.msgs[2].tool_call_id, "c1");
    CHECK_STR_EQ(r.msgs[2].name, "get_weather");
    srv_request_free(&r);
    /* Ollama: arguments as an object, tool_name on the result */
    CHECK_EQ_INT(parse(SRV_OLLAMA_CHAT,
                       "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"messages\":["
                       "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},"
                       "{\"role\":\"tool\",\"content\":\"2\",\"tool_name\":\"f\"}]}",
                       &r, err),
                 0);
    CHECK_EQ_INT(r.tool_choice, SRV_TOOLS_AUTO);
    CHECK_EQ_INT(r.parallel_tool_calls, 1);
    CHECK_STR_EQ(r.msgs[1].name, "f");
    CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(r.msgs[0].tool_calls, 0), "id") != NULL);
    srv_request_free(&r);
    CHECK_EQ_INT(parse(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[],\"tool_choice\":\"none\"}", &r, err), 0);
    CHECK_EQ_INT(r.tool_choice, SRV_TOOLS_NONE);
    srv_request_free(&r);
    /* bad input: a 400 naming what is wrong */
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}", "tools");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"retrieval\"}]}", "tools[0]");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"function\":{\"name\":\"a b\"}}]}", "name");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"function\":{\"name\":\"a\"}},{\"function\":{\"name\":\"a\"}}]}", "twice");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"function\":{\"name\":\"a\",\"parameters\":3}}]}", "parameters");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", "needs 'tools'");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"always\"}", "tool_choice");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"function\":{\"name\":\"a\"}}],"
               "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"b\"}}}", "not in 'tools'");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}", "assistant");
    expect_400(SRV_OPENAI_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":[{\"function\":{}}]}]}", "tool_calls[0]");
    expect_400(SRV_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":7}}]}]}", "arguments");
}

/* Host, Origin and body-type rules (websafe.h) */
static void test_websafe(void)
{
    /* loopback bind: loopback names only, unless allowed */
    CHECK(srv_host_allowed("127.0.0.1", NULL, "127.0.0.1:8080"));
    CHECK(srv_host_allowed("127.0.0.1", NULL, "localhost:8080"));
    CHECK(srv_host_allowed("127.0.0.1", NULL, "LOCALHOST."));
    CHECK(srv_host_allowed("127.0.0.1", NULL, "app.localhost:3000"));
    CHECK(srv_host_allowed("::1", NULL, "[::1]:8080"));
    CHECK(srv_host_allowed("127.0.0.1", NULL, "127.0.0.2"));
    CHECK(!srv_host_allowed("127.0.0.1", NULL, "evil.example:8080")); /* DNS rebinding */
    CHECK(!srv_host_allowed("127.0.0.1", NULL, "127.0.0.1.evil.example"));
    CHECK(!srv_host_allowed("127.0.0.1", NULL, "localhost.evil.example"));
    CHECK(!srv_host_allowed("127.0.0.1", NULL, NULL));
    CHECK(srv_host_allowed("127.0.0.1", "box.lan, other", "BOX.lan:8080"));
    CHECK(!srv_host_allowed("127.0.0.1", "box.lan", "box.lan.evil"));
    CHECK(srv_host_allowed("127.0.0.1", "*", "anything"));
    /* bound elsewhere: any name, unless a list is given */
    CHECK(srv_host_allowed("0.0.0.0", NULL, "192.168.1.9:8080"));
    CHECK(srv_host_allowed("0.0.0.0", NULL, NULL));
    CHECK(!srv_host_allowed("0.0.0.0", "box.lan", "192.168.1.9:8080"));
    CHECK(srv_host_allowed("0.0.0.0", "box.lan", "localhost"));
    /* origins: none (not a browser), the page's own, loopback pages, listed */
    CHECK(srv_origin_allowed(NULL, NULL, "127.0.0.1:8080"));
    CHECK(srv_origin_allowed(NULL, "http://127.0.0.1:8080", "127.0.0.1:8080"));
    CHECK(srv_origin_allowed(NULL, "http://localhost:3000", "127.0.0.1:8080"));
    CHECK(srv_origin_allowed(NULL, "https://box.lan:8443", "box.lan:8443"));
    CHECK(!srv_origin_allowed(NULL, "https://evil.example", "127.0.0.1:8080"));
    CHECK(!srv_origin_allowed(NULL, "null", "127.0.0.1:8080"));
    CHECK(!srv_origin_allowed(NULL, "file://", "127.0.0.1:8080"));
    CHECK(!srv_origin_allowed(NULL, "http://localhost.evil.example", "127.0.0.1:8080"));
    CHECK(srv_origin_allowed("https://ui.example:3000", "https://UI.example:3000", "127.0.0.1:8080"));
    CHECK(!srv_origin_allowed("https://ui.example:3000", "https://ui.example:3001", "127.0.0.1:8080"));
    CHECK(srv_origin_allowed("*", "https://evil.example", "127.0.0.1:8080"));
    CHECK(srv_content_type_json("application/json"));
    CHECK(srv_content_type_json("Application/JSON; charset=utf-8"));
    CHECK(!srv_content_type_json("text/plain"));
    CHECK(!srv_content_type_json("application/jsonp"));
    CHECK(!srv_content_type_json(NULL));
}

/* an error quoting invalid UTF-8 is still valid JSON */
static void test_error_utf8(void)
{
    for (int k = 0; k < SRV_KIND_COUNT; k++) {
        char *e = srv_fmt_error(k, 404, "model 'a\xff\xc3(b' not found");
        cJSON *o = e ? cJSON_Parse(e) : NULL;
        CHECK_MSG(o != NULL && strstr(e, "a\xEF\xBF\xBD\xEF\xBF\xBD(b"), "%s", e ? e : "(null)");
        cJSON_Delete(o);
        free(e);
    }
}

static void test_think(void)
{
    think_case("<think>abc</think>\n\nAnswer", 0, "abc", "Answer");
    think_case("  \n<think>x < y</think>y", 0, "x < y", "y");
    think_case("Hello <think>no</think>", 0, "", "Hello <think>no</think>");
    think_case("reason</think>  ans", 1, "reason", "ans");
    think_case("a </thin>k</think>b", 1, "a </thin>k", "b");
    think_case("<thi", 0, "", "<thi");
    think_case("<think>never closed", 0, "never closed", "");
    think_case("   ", 0, "", "   ");
    think_case("", 1, "", "");
    /* harmony (inside 2): analysis is reasoning, final content */
    think_case("<|channel|>analysis<|message|>I think<|end|><|start|>assistant<|channel|>final<|message|>Hi!", 2, "I think",
               "Hi!");
    think_case("<|channel|>final<|message|>Just this", 2, "", "Just this");
    think_case("plain answer <|end|>", 2, "", "plain answer <|end|>");
    think_case("<|channel|>analysis<|message|>a <|en b<|end|><|start|>assistant<|channel|>commentary<|message|>c", 2,
               "a <|en b", "c");
    think_case("<|channel|>analysis<|message|>cut", 2, "cut", "");
    CHECK(srv_think_prompt_inside("<|im_start|>assistant\n<think>\n"));
    CHECK(!srv_think_prompt_inside("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    CHECK(!srv_think_prompt_inside("plain"));
}

static void test_names_durations(void)
{
    CHECK(srv_model_name_ok("qwen3-30b-a3b:q4_0"));
    CHECK(srv_model_name_ok("tiny"));
    CHECK(!srv_model_name_ok(""));
    CHECK(!srv_model_name_ok("../x"));
    CHECK(!srv_model_name_ok("a/b"));
    CHECK(!srv_model_name_ok(".hidden"));
    CHECK(!srv_model_name_ok("a..b"));
    CHECK(!srv_model_name_ok("-rf"));
    CHECK(!srv_model_name_ok("a b"));
    char base[64];
    srv_model_name_base("tiny:latest", base, sizeof base);
    CHECK(!strcmp(base, "tiny"));
    srv_model_name_base("tiny:q8", base, sizeof base);
    CHECK(!strcmp(base, "tiny:q8"));

    double d;
    CHECK(srv_parse_duration("30m", &d) == 0 && d == 1800);
    CHECK(srv_parse_duration("1h30m", &d) == 0 && d == 5400);
    CHECK(srv_parse_duration("7d", &d) == 0 && d == 7 * 86400);
    CHECK(srv_parse_duration("250ms", &d) == 0 && fabs(d - 0.25) < 1e-12);
    CHECK(srv_parse_duration("42", &d) == 0 && d == 42);
    CHECK(srv_parse_duration("-1", &d) == 0 && d == -1);
    CHECK(srv_parse_duration("-5m", &d) == 0 && d == -300);
    CHECK(srv_parse_duration("5x", &d) == -1);
    CHECK(srv_parse_duration("", &d) == -1);
    CHECK(srv_parse_duration("m", &d) == -1);
}

/* Feeds pieces one by one as raw bytes; returns the concatenated output. */
static char *feed(char *const *stop, int n_stop, const char *const *pieces, int n, int *stopped,
                  int *max_emit_invalid)
{
    rkm_textout *t = rkm_textout_new(NULL, (const char *const *)stop, n_stop);
    CHECK(t != NULL);
    static char all[1024];
    all[0] = 0;
    *stopped = 0;
    const char *o;
    size_t len;
    for (int i = 0; t && i < n && !*stopped; i++) {
        int rc = rkm_textout_push_bytes(t, pieces[i], strlen(pieces[i]), &o, &len);
        CHECK(rc >= 0 && strlen(o) == len);
        /* every emitted chunk must be valid UTF-8 on its own */
        for (size_t k = 0; o[k];) {
            unsigned char c = (unsigned char)o[k];
            size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
            if (!l || strlen(o + k) < l) {
                (*max_emit_invalid)++;
                break;
            }
            k += l;
        }
        strcat(all, o);
        if (rc == 1) *stopped = 1;
    }
    if (t && rkm_textout_flush(t, &o, &len) >= 0) strcat(all, o);
    rkm_textout_free(t);
    return all;
}

static void test_textout(void)
{
    int stopped, invalid = 0;
    /* "é" (C3 A9) and "€" (E2 82 AC) split across pieces */
    const char *p1[] = {"a\xC3", "\xA9 \xE2", "\x82", "\xAC!"};
    char *o = feed(NULL, 0, p1, 4, &stopped, &invalid);
    CHECK(!strcmp(o, "a\xC3\xA9 \xE2\x82\xAC!"));
    CHECK_EQ_INT(invalid, 0);

    /* a stop string spread over three tokens; nothing of it is emitted */
    char *stop[] = {"</end>", "STOP"};
    const char *p2[] = {"hello </", "en", "d> more"};
    o = feed(stop, 2, p2, 3, &stopped, &invalid);
    CHECK(!strcmp(o, "hello "));
    CHECK(stopped);

    /* a partial match that does not complete is released */
    const char *p3[] = {"x </e", "xit"};
    o = feed(stop, 2, p3, 2, &stopped, &invalid);
    CHECK(!strcmp(o, "x </exit"));
    CHECK(!stopped);

    /* the earliest of two stops wins */
    const char *p4[] = {"aSTOPb</end>"};
    o = feed(stop, 2, p4, 1, &stopped, &invalid);
    CHECK(!strcmp(o, "a"));

    /* invalid bytes become U+FFFD, and a stop can match after them */
    char *stop2[] = {"\xEF\xBF\xBDz"};
    const char *p5[] = {"q\xFF", "z tail"};
    o = feed(stop2, 1, p5, 2, &stopped, &invalid);
    CHECK(!strcmp(o, "q"));
    CHECK(stopped);
    const char *p6[] = {"ok\xFF\xC0\xAF", "\xED\xA0\x80"}; /* 0xFF, overlong '/', a surrogate */
    o = feed(NULL, 0, p6, 2, &stopped, &invalid);
    CHECK(!strncmp(o, "ok\xEF\xBF\xBD", 5));
    CHECK_EQ_INT(invalid, 0);

    /* an unfinished character at the very end becomes U+FFFD */
    const char *p7[] = {"end\xE2\x82"};
    o = feed(NULL, 0, p7, 1, &stopped, &invalid);
    CHECK(!strcmp(o, "end\xEF\xBF\xBD"));
}

static void test_format(void)
{
    srv_request r;
    char err[256];
    CHECK_EQ_INT(parse(SRV_OPENAI_CHAT,
                       "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true}}",
                       &r, err), 0);
    srv_result res = {.model = "m", .id = "chatcmpl-1", .created = 1, .text = "t\"q",
                      .finish = "length", .n_prompt = 5, .n_cached = 3, .n_gen = 2};
    char *end = srv_fmt_stream_end(&r, &res);
    CHECK(end && strstr(end, "\"finish_reason\":\"length\""));
    CHECK(end && strstr(end, "\"cached_tokens\":3"));
    CHECK(end && strlen(end) > 14 && !strcmp(end + strlen(end) - 14, "data: [DONE]\n\n"));
    free(end);
    r.stream = 0;
    char *full = srv_fmt_result(&r, &res);
    CHECK(full && strstr(full, "\"content\":\"t\\\"q\""));
    CHECK(full && strstr(full, "\"total_tokens\":7"));
    free(full);
    srv_request_free(&r);
    char *e = srv_fmt_error(SRV_OPENAI_CHAT, 401, "nope");
    CHECK(e && strstr(e, "\"type\":\"authentication_error\""));
    free(e);
    e = srv_fmt_error(SRV_OLLAMA_CHAT, 404, "gone");
    CHECK(e && !strcmp(e, "{\"error\":\"gone\"}"));
    free(e);
}

static struct sockaddr_storage addr_of(const char *s)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, s, &v4->sin_addr) == 1) v4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, s, &v6->sin6_addr) == 1) v6->sin6_family = AF_INET6;
    return ss;
}

/* The client key of fair admission: the peer, or the last X-Forwarded-For
 * entry when the peer is a trusted proxy. */
static void test_client_key(void)
{
    struct sockaddr_storage p = addr_of("127.0.0.1"), m = addr_of("::ffff:127.0.0.1"), q = addr_of("10.0.0.2");
    const struct sockaddr *pa = (const struct sockaddr *)&p;
    uint64_t self = srv_gate_client(pa, NULL, NULL);
    CHECK(self == srv_gate_client((const struct sockaddr *)&m, NULL, NULL)); /* v4 and v4-mapped v6 alike */
    CHECK(self != srv_gate_client((const struct sockaddr *)&q, NULL, NULL));
    uint64_t c2 = srv_gate_client((const struct sockaddr *)&q, NULL, NULL);
    CHECK(srv_gate_client(pa, NULL, "10.0.0.2") == self);               /* no trusted proxy: ignored */
    CHECK(srv_gate_client(pa, "192.168.1.1", "10.0.0.2") == self);      /* another peer trusted */
    CHECK(srv_gate_client(pa, "192.168.1.1, 127.0.0.1", "10.0.0.2") == c2);
    CHECK(srv_gate_client(pa, "127.0.0.1", "6.6.6.6, 10.0.0.2 ") == c2); /* the entry the proxy added */
    CHECK(srv_gate_client(pa, "127.0.0.1", "10.0.0.2, junk") == self);   /* unparsable: the peer */
    CHECK(srv_gate_client(pa, "127.0.0.1", "") == self);
}

int main(void)
{
    test_openai();
    test_ollama();
    test_names_durations();
    test_textout();
    test_format();
    test_tools();
    test_websafe();
    test_client_key();
    test_error_utf8();
    test_think();
    return test_done();
}
