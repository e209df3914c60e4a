/* fuzz-grammar.c - libFuzzer target: the constrained-sampling grammar.
 * The input is a JSON schema (when it starts with '{', converted to GBNF
 * as response_format and tool calls do) or GBNF text, up to a NUL byte;
 * what follows the NUL is text fed to a matcher byte by byte, asking
 * can_accept / done / finished / hash and a token mask over a small
 * vocabulary on the way. Any result is fine; crashes, leaks, sanitizer
 * reports and runaway time are not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "text/grammar.h"
#include "text/json_schema.h"

static const char *const vocab[] = {"{", "}", "\"", "a", "ab", "abc", "1", "12", "-", ".", "e", " ", "\n",
                                    "true", "false", "null", "[", "]", ",", ":", "\xc3\xa9", "\xe2\x82", "\\"};
#define N_VOCAB ((int)(sizeof vocab / sizeof vocab[0]))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rkm_gtrie *trie;
    if (!trie) {
        size_t len[N_VOCAB];
        for (int i = 0; i < N_VOCAB; i++) len[i] = strlen(vocab[i]);
        trie = rkm_gtrie_new(vocab, len, N_VOCAB);
    }
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    char *text = malloc(glen + 1);
    if (!text) return 0;
    memcpy(text, data, glen);
    text[glen] = 0;
    char *gbnf = NULL;
    if (glen && text[0] == '{') {
        cJSON *schema = cJSON_ParseWithLength(text, glen);
        if (schema) gbnf = rkm_json_schema_to_gbnf(schema);
        cJSON_Delete(schema);
    }
    rkm_grammar *g = rkm_grammar_parse(gbnf ? gbnf : text, NULL);
    free(gbnf);
    free(text);
    if (!g) return 0;
    rkm_gstate *st = rkm_gstate_new(g);
    const char *in = nul ? (const char *)nul + 1 : "";
    size_t n = nul ? size - glen - 1 : 0;
    uint32_t bits[N_VOCAB / 32 + 1];
    for (size_t i = 0; st && i < n && i < 256; i++) {
        if (i % 8 == 0) rkm_gstate_mask(st, trie, bits, N_VOCAB);
        (void)rkm_gstate_can_accept(st, in + i, n - i < 4 ? n - i : 4);
        if (rkm_gstate_accept(st, in + i, 1)) break;
        (void)rkm_gstate_done(st);
        (void)rkm_gstate_finished(st);
        (void)rkm_gstate_hash(st);
        if (i % 16 == 15) {
            rkm_gstate *c = rkm_gstate_clone(st);
            rkm_gstate_free(st);
            st = c;
        }
    }
    rkm_gstate_free(st);
    rkm_grammar_free(g);
    return 0;
}
