/*
 * test-grammar.c - GBNF grammars and their matcher (text/grammar.c):
 * parse errors named with line and column, left recursion refused,
 * literals, classes, escapes, repetition bounds, a JSON grammar over valid
 * and invalid documents, bytes fed in every split (UTF-8 sequences cut in
 * two), deep nesting with bounded stacks, and vocabulary masks from the
 * trie equal to testing every string one by one; JSON Schema compiled to
 * grammars that take the instances the schema describes and refuse the
 * others, random walks through those grammars ending in valid JSON, and
 * unsupported keywords refused by name and place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/test.h"
#include "text/grammar.h"
#include "text/json_schema.h"
#include "util/common.h"

static const char *json_gbnf =
    "root   ::= value\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "# a comment line\n"
    "ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

/* Does g accept s as a whole sentence? Fed in one piece. */
static int full(const rkm_grammar *g, const char *s)
{
    rkm_gstate *st = rkm_gstate_new(g);
    int ok = st && rkm_gstate_accept(st, s, strlen(s)) == 0 && rkm_gstate_done(st);
    rkm_gstate_free(st);
    return ok;
}

/* The same, fed byte by byte and in two pieces at every cut: all agree. */
static int full_split(const rkm_grammar *g, const char *s)
{
    int want = full(g, s);
    size_t n = strlen(s);
    rkm_gstate *st = rkm_gstate_new(g);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) ok = rkm_gstate_accept(st, s + i, 1) == 0;
    ok = ok && rkm_gstate_done(st);
    rkm_gstate_free(st);
    CHECK_MSG(ok == want, "byte by byte '%s': %d, whole: %d", s, ok, want);
    for (size_t cut = 1; cut < n; cut++) {
        st = rkm_gstate_new(g);
        ok = rkm_gstate_accept(st, s, cut) == 0 && rkm_gstate_accept(st, s + cut, n - cut) == 0 && rkm_gstate_done(st);
        rkm_gstate_free(st);
        CHECK_MSG(ok == want, "cut at %zu of '%s': %d, whole: %d", cut, s, ok, want);
    }
    return want;
}

static void test_errors(void)
{
    static const struct {
        const char *src, *msg;
    } bad[] = {
        {"root ::= foo", "rule 'foo' is used but not defined"},
        {"start ::= \"a\"", "no rule 'root'"},
        {"root ::= root \"a\" | \"b\"", "left recursion through rule 'root'"},
        {"root ::= a\na ::= b? root \"x\"\nb ::= \"y\"", "left recursion"},
        {"root ::= \"abc", "unterminated literal at line 1"},
        {"root ::= \"a\"\nx ::= \"\\q\"", "unknown escape at line 2"},
        {"root ::= \"a\"{3,1}", "n < m"},
        {"root ::= [a-", "unterminated character class"},
        {"root ::= [z-a]", "out of order"},
        {"root ::= (\"a\"", "expected ')'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
        {"root = \"a\"", "expected '::='"},
        {"root ::= \"a\"{999999}", "too large"},
    };
    for (size_t i = 0; i < RKM_ARRAY_LEN(bad); i++) {
        rkm_grammar *g = rkm_grammar_parse(bad[i].src, NULL);
        CHECK_MSG(!g && strstr(rkm_last_error(), bad[i].msg), "'%s': %s", bad[i].src, g ? "accepted" : rkm_last_error());
        rkm_grammar_free(g);
    }
}

static void test_basics(void)
{
    rkm_grammar *g = rkm_grammar_parse("root ::= \"a\"{2,4} tail\ntail ::= [x-z0-9] | \"\"", NULL);
    CHECK(g != NULL);
    if (!g) return;
    CHECK(!full(g, "a") && full(g, "aa") && full(g, "aaa") && full(g, "aaaa") && !full(g, "aaaaa"));
    CHECK(full(g, "aax") && full(g, "aaa9") && !full(g, "aaw") && !full(g, "aaxx"));
    rkm_gstate *st = rkm_gstate_new(g);
    CHECK(rkm_gstate_accept(st, "aa", 2) == 0 && rkm_gstate_done(st) && !rkm_gstate_finished(st));
    CHECK(rkm_gstate_accept(st, "q", 1) == RKM_EINVAL && rkm_gstate_done(st)); /* refused, unchanged */
    CHECK(rkm_gstate_accept(st, "aaz", 3) == 0 && rkm_gstate_finished(st));
    rkm_gstate_free(st);
    rkm_grammar_free(g);
    /* a partial UTF-8 sequence that can only become a surrogate (ED A0..BF:
     * U+D800..U+DFFF, which no UTF-8 decodes to) is refused before it
     * leaves the grammar with no continuation; ED 9F (U+D7C0..) is not */
    g = rkm_grammar_parse("root ::= [^\"]*", NULL);
    CHECK(g != NULL);
    if (!g) return;
    st = rkm_gstate_new(g);
    CHECK(rkm_gstate_accept(st, "\xED", 1) == 0);
    CHECK(rkm_gstate_accept(st, "\xA0", 1) == RKM_EINVAL);
    CHECK(rkm_gstate_accept(st, "\x9F\xBF", 2) == 0 && rkm_gstate_done(st));
    rkm_gstate_free(st);
    rkm_grammar_free(g);

    /* classes, negation, any, escapes, unicode, alternatives on the next line */
    g = rkm_grammar_parse("root ::= [^a-c\\n] . \"\\u00e9\\x41\" [\\U0001F600-\\U0001F64F]+ end\n"
                          "end ::= \"!\"\n"
                          "      | \"\\t\"\n",
                          NULL);
    CHECK(g != NULL);
    if (g) {
        CHECK(full_split(g, "d\xe4\xb8\xad\xc3\xa9" "A\xf0\x9f\x98\x80\xf0\x9f\x99\x8f!"));
        CHECK(full_split(g, "zz\xc3\xa9" "A\xf0\x9f\x98\x81\t"));
        CHECK(!full_split(g, "b\xe4\xb8\xad\xc3\xa9" "A\xf0\x9f\x98\x80!"));  /* b excluded */
        CHECK(!full_split(g, "d\xe4\xb8\xad\xc3\xa9" "A\xf0\x9f\x9a\x80!"));  /* outside the emoji range */
        CHECK(!full_split(g, "\nx\xc3\xa9" "A\xf0\x9f\x98\x80!"));
        CHECK(!full(g, "d\xff\xc3\xa9" "A\xf0\x9f\x98\x80!")); /* not UTF-8 */
        rkm_grammar_free(g);
    }
    /* a start rule other than root */
    g = rkm_grammar_parse("a ::= \"x\" b\nb ::= \"y\"", "a");
    CHECK(g && full(g, "xy") && !full(g, "x"));
    rkm_grammar_free(g);
}

static void test_json(void)
{
    rkm_grammar *g = rkm_grammar_parse(json_gbnf, NULL);
    CHECK_MSG(g != NULL, "%s", rkm_last_error());
    if (!g) return;
    static const char *good[] = {
        "{}", "[]", "0", "-12.5e+3", "\"\"", "true", "null",
        "{\"a\": [1, 2, {\"b\": \"c\\n\\u00e9\"}], \"d\": false}",
        "[\"\xe4\xb8\xad\xe6\x96\x87\", \"\xf0\x9f\x98\x80\"]",
        "{\n  \"k\": \"v\"\n}",
    };
    static const char *badj[] = {"{", "[1,]", "{\"a\" 1}", "01x", "\"\\x\"", "tru", "[1 2]", "{\"a\":1,}", "\"a\x01\""};
    for (size_t i = 0; i < RKM_ARRAY_LEN(good); i++) CHECK_MSG(full_split(g, good[i]), "valid JSON refused: %s", good[i]);
    for (size_t i = 0; i < RKM_ARRAY_LEN(badj); i++) CHECK_MSG(!full_split(g, badj[i]), "invalid JSON accepted: %s", badj[i]);
    /* nesting 300 deep: stacks as deep as the nesting, fine */
    char deep[700];
    int n = 0;
    for (int i = 0; i < 300; i++) deep[n++] = '[';
    for (int i = 0; i < 300; i++) deep[n++] = ']';
    deep[n] = 0;
    CHECK(full(g, deep));
    /* a long string: repetition does not deepen the stack */
    size_t big = 200000;
    char *s = malloc(big + 3);
    s[0] = '"';
    memset(s + 1, 'x', big);
    s[big + 1] = '"';
    s[big + 2] = 0;
    CHECK(full(g, s));
    free(s);
    /* a lead byte alone: refused where no character beyond ASCII fits */
    rkm_gstate *st = rkm_gstate_new(g);
    CHECK(!rkm_gstate_can_accept(st, "\xf0", 1) && !rkm_gstate_can_accept(st, "\xc3", 1) && !rkm_gstate_can_accept(st, "\xe0", 1));
    CHECK(rkm_gstate_accept(st, "[\"", 2) == 0 && rkm_gstate_can_accept(st, "\xf0", 1) && rkm_gstate_can_accept(st, "\xc3", 1));
    CHECK(!rkm_gstate_can_accept(st, "\xc0", 1) && !rkm_gstate_can_accept(st, "\x80", 1)); /* never UTF-8 */
    rkm_gstate_free(st);
    rkm_grammar_free(g);
}

/* Masks: the trie walk marks exactly the strings can_accept takes, from
 * several states, over a vocabulary of ASCII, multi-byte characters,
 * pieces of characters (byte-level BPE splits them) and JSON fragments. */
static void test_masks(void)
{
    rkm_grammar *g = rkm_grammar_parse(json_gbnf, NULL);
    if (!g) return;
    static const char *base[] = {"{", "}", "[", "]", "\"", ",", ":", " ", "\n", "  ", "{\"", "\":", "\",", "\"}", "true",
                                 "tr", "ue", "null", "false", "0", "1", "12", "-", ".", "e+", "abc", "a", "\\", "\\n",
                                 "\\u", "00", "e9", "\xc3", "\xa9", "\xc3\xa9", "\xe4\xb8", "\xad", "\xe4\xb8\xad",
                                 "\xf0\x9f", "\x98\x80", "\xf0\x9f\x98\x80\"", "\x01", "\x7f", "x\"}", "[]", "{}", "1,",
                                 "\"a\":", "\"\"", "\xff", ""};
    enum { NB = (int)(sizeof base / sizeof base[0]) };
    const char *v[NB];
    size_t len[NB];
    for (int i = 0; i < NB; i++) v[i] = base[i], len[i] = strlen(base[i]);
    rkm_gtrie *t = rkm_gtrie_new(v, len, NB);
    CHECK(t != NULL);
    static const char *prefixes[] = {"", "{", "{\"a", "{\"a\":", "[1", "[\"\xc3", "[\"\xf0\x9f", "{\"k\": tr", "[1e", "[\"\\"};
    uint32_t bits[NB / 32 + 1];
    for (size_t p = 0; p < RKM_ARRAY_LEN(prefixes); p++) {
        rkm_gstate *st = rkm_gstate_new(g);
        CHECK_MSG(rkm_gstate_accept(st, prefixes[p], strlen(prefixes[p])) == 0, "prefix %s", prefixes[p]);
        int cnt = rkm_gstate_mask(st, t, bits, NB), want = 0, agree = 1;
        for (int i = 0; i < NB; i++) {
            int a = len[i] > 0 && rkm_gstate_can_accept(st, v[i], len[i]);
            int m = (bits[i >> 5] >> (i & 31)) & 1;
            want += a;
            if (a != m) {
                agree = 0;
                fprintf(stderr, "prefix '%s', string %d '%s': mask %d, one by one %d\n", prefixes[p], i, v[i], m, a);
            }
        }
        CHECK_MSG(agree && cnt == want && want > 0, "prefix '%s': %d marked, %d accepted", prefixes[p], cnt, want);
        rkm_gstate_free(st);
    }
    rkm_gtrie_free(t);
    rkm_grammar_free(g);
}

static rkm_grammar *schema_grammar(const char *schema)
{
    cJSON *j = cJSON_Parse(schema);
    CHECK_MSG(j != NULL, "bad test schema %s", schema);
    char *gb = j ? rkm_json_schema_to_gbnf(j) : NULL;
    cJSON_Delete(j);
    CHECK_MSG(gb != NULL, "%s: %s", schema, rkm_last_error());
    rkm_grammar *g = gb ? rkm_grammar_parse(gb, NULL) : NULL;
    CHECK_MSG(!gb || g, "%s: the grammar does not parse: %s\n%s", schema, rkm_last_error(), gb);
    free(gb);
    return g;
}

/* A random sentence of g over printable ASCII (the mask picks among the
 * bytes allowed next; once complete, it stops with probability 1/3). */
static char *random_sentence(const rkm_grammar *g, const rkm_gtrie *t, unsigned *seed)
{
    static char out[8192];
    size_t n = 0;
    rkm_gstate *st = rkm_gstate_new(g);
    uint32_t bits[4];
    while (n + 1 < sizeof out) {
        if (rkm_gstate_done(st) && (rkm_gstate_finished(st) || rand_r(seed) % 3 == 0)) break;
        int cnt = rkm_gstate_mask(st, t, bits, 96);
        if (cnt <= 0) break;
        int pick = rand_r(seed) % cnt, id = -1;
        for (int i = 0; i < 96 && pick >= 0; i++)
            if (bits[i >> 5] >> (i & 31) & 1 && pick-- == 0) id = i;
        char c = id == 95 ? '\n' : (char)(' ' + id);
        if (rkm_gstate_accept(st, &c, 1)) break;
        out[n++] = c;
    }
    int done = rkm_gstate_done(st);
    rkm_gstate_free(st);
    out[n] = 0;
    return done ? out : NULL;
}

static void test_schemas(void)
{
    static const struct {
        const char *schema;
        const char *good[6], *bad[6];
    } cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":5},\"age\":{\"type\":\"integer\"},"
         "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\"],\"additionalProperties\":false}",
         {"{\"name\":\"Al\"}", "{\"name\": \"Al\", \"age\": -3}", "{ \"name\":\"\", \"ok\":true }", "{\"name\":\"abcde\",\"age\":0,\"ok\":false}"},
         {"{}", "{\"age\":3}", "{\"name\":\"abcdef\"}", "{\"name\":\"a\",\"x\":1}", "{\"name\":1}", "{\"age\":1,\"name\":\"a\"}"}},
        {"{\"enum\":[\"red\",1.5,null,{\"a\":[1]}]}", {"\"red\"", "1.5", "null", "{\"a\":[1]}"}, {"\"blue\"", "1", "\"red\" ", "{\"a\": [1]}"}},
        {"{\"anyOf\":[{\"type\":\"string\",\"format\":\"date\"},{\"type\":[\"integer\",\"null\"]}]}",
         {"\"2024-02-29\"", "42", "null", "-7"}, {"\"2024-13-01\"", "4.5", "\"x\"", "true"}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":3}",
         {"[1]", "[1, 2.5, -3e2]", "[ 0 ]"}, {"[]", "[1,2,3,4]", "[\"a\"]", "[1,]"}},
        {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\","
         "\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
         {"{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]},{\"v\":3}]}"}, {"{\"v\":1,\"kids\":[{}]}", "{\"kids\":[]}"}},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"format\":\"uuid\"}}",
         {"{}", "{\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}"}, {"{\"id\":\"123\"}", "{\"id\":1}"}},
        {"{\"type\":\"array\",\"prefixItems\":[{\"const\":\"x\"},{\"type\":\"boolean\"}],\"items\":false}",
         {"[\"x\",true]"}, {"[\"x\"]", "[\"x\",true,1]", "[\"y\",false]"}},
        {"{\"title\":\"anything\",\"description\":\"no constraint\"}", {"1", "{\"a\":[true,null]}", "\"s\""}, {"tru", "{"}},
    };
    const char *v[96];
    char ch[96][2];
    size_t len[96];
    for (int i = 0; i < 96; i++) {
        ch[i][0] = i == 95 ? '\n' : (char)(' ' + i);
        ch[i][1] = 0;
        v[i] = ch[i];
        len[i] = 1;
    }
    rkm_gtrie *t = rkm_gtrie_new(v, len, 96);
    unsigned seed = 7;
    for (size_t i = 0; i < RKM_ARRAY_LEN(cases); i++) {
        rkm_grammar *g = schema_grammar(cases[i].schema);
        if (!g) continue;
        for (int k = 0; k < 6 && cases[i].good[k]; k++)
            CHECK_MSG(full_split(g, cases[i].good[k]), "schema %zu refuses %s", i, cases[i].good[k]);
        for (int k = 0; k < 6 && cases[i].bad[k]; k++)
            CHECK_MSG(!full(g, cases[i].bad[k]), "schema %zu takes %s", i, cases[i].bad[k]);
        /* random walks end in JSON text (the schema's details are the
         * cases above; here: every sentence parses) */
        for (int w = 0; w < 40; w++) {
            char *snt = random_sentence(g, t, &seed);
            CHECK_MSG(snt != NULL, "schema %zu: a random walk did not finish", i);
            cJSON *j = snt ? cJSON_Parse(snt) : NULL;
            CHECK_MSG(!snt || j, "schema %zu: random sentence is not JSON: %s", i, snt);
            cJSON_Delete(j);
        }
        rkm_grammar_free(g);
    }
    rkm_gtrie_free(t);
    /* json_object: any object */
    rkm_grammar *g = rkm_grammar_parse(rkm_json_object_gbnf(), NULL);
    CHECK(g && full(g, "{\"a\": [1, {\"b\": null}]}") && !full(g, "[1]") && !full(g, "\"s\""));
    rkm_grammar_free(g);

    static const struct {
        const char *schema, *msg;
    } bad[] = {
        {"{\"type\":\"string\",\"pattern\":\"^a+$\"}", "keyword 'pattern' is not supported (at #)"},
        {"{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0}}}", "'minimum' is not supported (at #/properties/n)"},
        {"{\"type\":\"string\",\"format\":\"email\"}", "string format 'email' is not supported"},
        {"{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}", "allOf with other than one schema"},
        {"{\"$ref\":\"http://x/y.json\"}", "is not local"},
        {"{\"$ref\":\"#/$defs/missing\"}", "points nowhere"},
        {"{\"type\":\"object\",\"properties\":{},\"required\":[\"x\"]}", "required property 'x' is not among the properties"},
        {"{\"type\":\"strng\"}", "type 'strng' is not a JSON Schema type"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":1}", "maxItems is under minItems"},
        {"false", "schema false admits nothing"},
    };
    for (size_t i = 0; i < RKM_ARRAY_LEN(bad); i++) {
        cJSON *j = cJSON_Parse(bad[i].schema);
        char *gb = j ? rkm_json_schema_to_gbnf(j) : NULL;
        CHECK_MSG(j && !gb && strstr(rkm_last_error(), bad[i].msg), "%s: %s", bad[i].schema, gb ? "accepted" : rkm_last_error());
        free(gb);
        cJSON_Delete(j);
    }
}

int main(void)
{
    test_errors();
    test_basics();
    test_json();
    test_masks();
    test_schemas();
    return test_done();
}
