/*
 * tok_pretok.c - the pre-tokenizers: llama.cpp's pre-tokenizer types (the
 * tokenizer.ggml.pre names) and the regexes each one means, the regex
 * split steps of tokenizer.json (any pattern, every Split behaviour,
 * invert), run by PCRE2 (text/regex.h), the hand-written matchers that
 * stand in for the most common patterns as fast paths, and the driver
 * that cuts a text into pieces by a tokenizer's split steps (regexes,
 * literal splits, WhitespaceSplit, BertPreTokenizer).
 *
 * A fast path is attached to a regex step only when the step's pattern
 * is, byte for byte, the one the matcher implements; tests/test-tokenizer.c
 * (test_fast_paths) checks each matcher against PCRE2 on the corpus and on
 * random strings, and RKM_TOK_REGEX_ONLY=1 turns them all off.
 *
 * Threads: the tables are constant and a tokenizer's steps are read-only
 * after load; rkm_tok__split works on the caller's tok_pieces (regex
 * scratch included), so calls on one shared tokenizer may run at once.
 * Ownership: split steps belong to their tokenizer (rkm_tok__split_free);
 * a tok_pieces' arrays belong to its caller (rkm_tok__pieces_free).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/regex.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"
#include "util/knobs.h"

/* ------------------------------------------------- patterns and types */

/* Patterns as tokenizer.json files spell them (the models' own
 * tokenizers); where llama.cpp runs a rewritten form of one, the original
 * is used here (same splits on text, without the rewrite's loss). */
#define RE_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
static const char RE_LLAMA3[] =
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_GPT2_NOTAIL[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
static const char RE_DS3_NUM[] = "\\p{N}{1,3}";
static const char RE_DS3_CJK[] = "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+";
static const char RE_DS3_MAIN[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
static const char RE_FALCON_P[] = "[\\p{P}\\$\\+<=>\\^~\\|`]+";
static const char RE_DIGITS3[] = "[0-9][0-9][0-9]";
static const char RE_NUMS[] = "\\p{N}+";
static const char RE_DIGIT[] = "\\p{N}";
static const char RE_DSL_NL[] = "[\r\n]";
static const char RE_DSL_CASED[] =
    "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93"
    "\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a"
    "\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96"
    "\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba"
    "\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a"
    "\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d"
    "\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1\xbe\xb4"
    "\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93"
    "\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc"
    "\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6"
    "\xe2\x84\xa8\xe2\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf"
    "\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4"
    "\xe2\xb3\xab-\xe2\xb3\xae\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b"
    "\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf"
    "\xef\xac\x80-\xef\xac\x86\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a"
    "\xf0\x90\x90\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb"
    "\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f"
    "\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+";
static const char RE_DSL_PUNCT[] =
    "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+";
static const char RE_DSL_WSEND[] = "\\s+$";
static const char RE_DSL_CJK[] = "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+";

static const char RE_NEWLINES_TEXT[] = "[^\\n]+|[\\n]+";

/* The fast paths: a hand-written matcher per exact pattern. */
static const struct {
    const char *re;
    int kind;
} fast_paths[] = {
    {RE_LLAMA3, PRE_LLAMA3},       {RE_QWEN2, PRE_QWEN2},         {RE_GPT2, PRE_GPT2},
    {RE_GPT2_NOTAIL, PRE_GPT2},    {RE_DS3_NUM, PRE_DS3_NUM},     {RE_DS3_CJK, PRE_DS3_CJK},
    {RE_DS3_MAIN, PRE_DS3_MAIN},   {RE_FALCON_P, PRE_FALCON_P},   {RE_DIGITS3, PRE_DIGITS3},
    {RE_DSL_NL, PRE_DSL_NL},       {RE_DSL_CASED, PRE_DSL_CASED}, {RE_DSL_PUNCT, PRE_DSL_PUNCT},
    {RE_DSL_WSEND, PRE_DSL_WSEND}, {RE_DSL_CJK, PRE_DSL_CJK},     {RE_NUMS, PRE_NUMS},
    {RE_NEWLINES_TEXT, PRE_NL_RUNS},
};

/* The cased-letter classes of GPT-4o-style patterns (o200k, Tekken, Kimi). */
#define LU "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LL "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define TAIL_O200K "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O                                                                                             \
    "[^\\r\\n\\p{L}\\p{N}]?" LU "*" LL "+" RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?" LU "+" LL "*" RE_CONTRACTIONS \
    "?" TAIL_O200K
/* Kimi-K2 (Moonshot's tiktoken pattern): the same classes without Han, as
 * complements of the other categories (PCRE2 has no class intersection). */
#define K2_LU "[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{Han}]"
#define K2_LL "[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{Han}]"
#define RE_KIMI_K2                                                                                              \
    "\\p{Han}+|[^\\r\\n\\p{L}\\p{N}]?" K2_LU "*" K2_LL "+" RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?" K2_LU "+" K2_LL \
    "*" RE_CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN                                                                                       \
    "[^\\r\\n\\p{L}\\p{N}]?" LU "*" LL "+|[^\\r\\n\\p{L}\\p{N}]?" LU "+" LL "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GRANITE_EMB                                                                                            \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|" \
    "'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|" \
    "'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?" TAIL_O200K
#define RE_CJK_KANA "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+"
#define RE_POROS " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"
#define RE_DS3_LIKE_MAIN                                                                                  \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "   \
    "?[\\p{P}\\p{S}]+"

static const char *const RX_DEFAULT[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2_NOTAIL, RE_NUMS, RE_DIGITS3, NULL};
static const char *const RX_LLAMA3[] = {RE_LLAMA3, NULL};
static const char *const RX_JAIS2[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                    "\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|"
                    "\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    NULL};
static const char *const RX_DEEPSEEK_LLM[] = {RE_DSL_NL, RE_DSL_CASED, RE_DSL_PUNCT, RE_DSL_WSEND,
                                              RE_DSL_CJK, RE_NUMS,     NULL};
static const char *const RX_DEEPSEEK3[] = {RE_DS3_NUM, RE_DS3_CJK, RE_DS3_MAIN, NULL};
static const char *const RX_SPARK2_5[] = {RE_DS3_NUM, RE_CJK_KANA,
                                          RE_DS3_LIKE_MAIN "|[\r\n]|\\s+(?!\\S)|\\s+", RE_DIGIT, NULL};
static const char *const RX_YOUTU[] = {
    "[\xea\xb0\x80-\xed\x9e\xa3\xe3\x84\xb1-\xe3\x86\x8e]+|[\xef\xbc\x81\xe2\x80\xa6\xe2\x80\x9c\xe2\x80\x9d"
    "\xe2\x80\x98\xe2\x80\x99\xe2\x80\x94\xef\xbc\x9a\xef\xbc\x9b\xef\xbc\x8c\xe3\x80\x81-\xe3\x80\xbf"
    "\xef\xb8\xb0-\xef\xb9\x8f]+|[\xe3\x84\x85-\xe3\x84\xaf]+|" RE_CJK_KANA,
    "[^\\r\\n\\p{L}\\p{N}]?" LU "*" LL "+" RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?" LU "+" LL "*" RE_CONTRACTIONS
    "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RX_DEEPSEEK_CODER[] = {RE_DSL_NL, "\\s?\\p{L}+", "\\s?\\p{P}+", RE_DSL_CJK, RE_DIGIT, NULL};
static const char *const RX_FALCON[] = {RE_FALCON_P, RE_GPT2_NOTAIL, RE_DIGITS3, NULL};
static const char *const RX_STARCODER[] = {RE_DIGIT, RE_GPT2_NOTAIL, NULL};
static const char *const RX_GPT2[] = {RE_GPT2_NOTAIL, NULL};
static const char *const RX_QWEN2[] = {RE_QWEN2, NULL};
static const char *const RX_QWEN35[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RX_PORO[] = {RE_POROS, NULL};
static const char *const RX_VIKING[] = {RE_POROS, RE_DIGIT, NULL};
static const char *const RX_TEKKEN[] = {RE_TEKKEN, NULL};
static const char *const RX_CHAMELEON[] = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                                           "([\\t\\n]|    |  )", RE_DIGIT, "[\\p{P}!-/:-@\\[-`{-~]",
                                           RE_GPT2_NOTAIL, NULL};
static const char *const RX_GPT4O[] = {RE_GPT4O, NULL};
static const char *const RX_GRANITE_EMB[] = {RE_GRANITE_EMB, NULL};
static const char *const RX_TINY_AYA[] = {"\\d{1,3}(?=(?:\\d{3})*\\b)", RE_GPT4O, NULL};
static const char *const RX_KIMI_K2[] = {RE_KIMI_K2, NULL};
static const char *const RX_SUPERBPE[] = {RE_NUMS, "(?=(\\d{3})+(?!\\d))", NULL};
static const char *const RX_BAILINGMOE[] = {
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|"
    "\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RX_SEED_CODER[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RX_UFAKZEKA[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
/* AFMoE: digit runs in groups of three from the right (the first group
 * the remainder), then CJK and the DeepSeek-V3 main pattern. */
static const char *const RX_AFMOE[] = {
    "\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))",
    "[\xe4\xb8\x80-\xe9\xbf\xbf\xe3\x90\x80-\xe4\xb6\xbf\xef\xa4\x80-\xef\xab\xbf\xe3\x81\x80-\xe3\x82\x9f"
    "\xe3\x82\xa0-\xe3\x83\xbf\xef\xbd\xa5-\xef\xbe\x9f\xe2\xbc\x80-\xe2\xbf\x9f\xe0\xb9\x80-\xe0\xb9\xbf"
    "\xe0\xba\x80-\xe0\xbb\xbf\xe1\x9e\x80-\xe1\x9f\xbf\xe1\x80\x80-\xe1\x82\x9f\xea\xa9\xa0-\xea\xa9\xbf"
    "\xea\xa7\xa0-\xea\xa7\xbf\xea\xb0\x80-\xed\x9e\xaf\xe1\x84\x80-\xe1\x87\xbf]+",
    RE_DS3_LIKE_MAIN "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const RX_LAGUNA[] = {RE_NEWLINES_TEXT, RE_QWEN2, NULL};
static const char *const RX_EXAONE_MOE[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|"
                    "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RX_NEWLINES[] = {RE_NEWLINES_TEXT, NULL};
static const char *const RX_MINICPM5[] = {
    RE_DS3_NUM,
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const RX_WHITESPACE[] = {"\\S+", NULL};

enum {
    PT_IGNORE_MERGES = 1, /* a piece that is a token is that token, unmerged */
    PT_RAW = 2,           /* BPE over UTF-8 with U+2581 spaces, not the GPT-2 byte alphabet */
};

/* llama.cpp's pre-tokenizer types: the tokenizer.ggml.pre names of each
 * (the first is the one rkmojo writes), its regexes in order, its flags.
 * The BPE merge rules, not the split, differ between names of one row. */
static const struct pre_type {
    const char *names;
    const char *const *re;
    int flags;
} pre_types[] = {
    {"default", RX_DEFAULT, 0},
    {"llama-bpe llama3 llama-v3 falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano", RX_LLAMA3, PT_IGNORE_MERGES},
    {"dbrx smaug-bpe glm4 chatglm-bpe", RX_LLAMA3, 0},
    {"jais-2", RX_JAIS2, 0},
    {"deepseek-llm", RX_DEEPSEEK_LLM, 0},
    {"deepseek-v3 hunyuan-dense joyai-llm hy_v4", RX_DEEPSEEK3, 0},
    {"spark2_5", RX_SPARK2_5, 0},
    {"youtu", RX_YOUTU, PT_IGNORE_MERGES},
    {"deepseek-coder", RX_DEEPSEEK_CODER, 0},
    {"falcon", RX_FALCON, 0},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b mellum2", RX_STARCODER, 0},
    {"gpt-2 gpt2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert jina-v1-en "
     "jina-v2-code roberta-bpe mpt olmo jais trillion granite-docling exaone4 gpt-neox",
     RX_GPT2, 0},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open", RX_QWEN2, 0},
    {"qwen35", RX_QWEN35, 0},
    {"poro-chat bloom gpt3-finnish", RX_PORO, 0},
    {"viking", RX_VIKING, 0},
    {"tekken", RX_TEKKEN, PT_IGNORE_MERGES},
    {"chameleon", RX_CHAMELEON, 0},
    {"gpt-4o llama4 kanana2 talkie minimax-m2", RX_GPT4O, 0},
    {"granite-embed-multi-97m", RX_GRANITE_EMB, PT_IGNORE_MERGES},
    {"tiny_aya cohere2moe", RX_TINY_AYA, 0},
    {"kimi-k2", RX_KIMI_K2, 0},
    {"superbpe", RX_SUPERBPE, 0},
    {"bailingmoe bailingmoe2 llada-moe", RX_BAILINGMOE, 0},
    {"seed-coder", RX_SEED_CODER, 0},
    {"ufakzeka", RX_UFAKZEKA, 0},
    {"grok-2", RX_QWEN2, 0},
    {"afmoe", RX_AFMOE, 0},
    {"laguna", RX_LAGUNA, 0},
    {"exaone-moe", RX_EXAONE_MOE, 0},
    {"minicpm5", RX_MINICPM5, PT_IGNORE_MERGES},
    {"gemma4 granite-embed-multi-311m sarvam-moe", RX_NEWLINES, PT_RAW},
    {"whitespace", RX_WHITESPACE, PT_RAW},
};

/* 1 when word `name` is one of the space-separated `names`. */
static int name_in(const char *names, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *e = strchr(p, ' ');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !memcmp(p, name, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static const struct pre_type *pre_type_of(const char *name)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(pre_types); i++)
        if (name_in(pre_types[i].names, name)) return &pre_types[i];
    return NULL;
}

const char *rkm_tokenizer_pre_type(int i, const char *const **regexes, int *ignore_merges, int *raw)
{
    if (i < 0 || (size_t)i >= RKM_ARRAY_LEN(pre_types)) return NULL;
    if (regexes) *regexes = pre_types[i].re;
    if (ignore_merges) *ignore_merges = (pre_types[i].flags & PT_IGNORE_MERGES) != 0;
    if (raw) *raw = (pre_types[i].flags & PT_RAW) != 0;
    return pre_types[i].names;
}

const char *rkm_tok__fast_pattern(int kind)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(fast_paths); i++)
        if (fast_paths[i].kind == kind) return fast_paths[i].re;
    return NULL;
}

int rkm_tok__add_regex_split(rkm_tokenizer *t, const char *re, size_t n, int behavior, int invert)
{
    if (t->n_split == MAX_SPLITS) return rkm_err(RKM_EUNSUPPORTED, "tokenizer: more than %d split steps", MAX_SPLITS);
    split_step *st = &t->split[t->n_split];
    memset(st, 0, sizeof *st);
    if (!(st->re = rkm_regex_compile(re, n))) return rkm_err_prefix(RKM_EUNSUPPORTED, "tokenizer: pre-tokenizer: ");
    st->kind = PRE_REGEX;
    st->behavior = behavior;
    st->invert = invert;
    if (!rkm_knob_is(RKM_KNOB_TOK_REGEX_ONLY, "1"))
        for (size_t i = 0; i < RKM_ARRAY_LEN(fast_paths); i++)
            if (strlen(fast_paths[i].re) == n && !memcmp(fast_paths[i].re, re, n)) st->fast = fast_paths[i].kind;
    t->n_split++;
    return 0;
}

void rkm_tok__split_free(rkm_tokenizer *t)
{
    for (int i = 0; i < t->n_split; i++) {
        free(t->split[i].lit);
        rkm_regex_free(t->split[i].re);
    }
    t->n_split = 0;
}

int rkm_tok__set_pre_by_name(rkm_tokenizer *t, const char *name)
{
    const struct pre_type *pt = pre_type_of(name);
    if (!pt) return rkm_err(RKM_EUNSUPPORTED, "tokenizer: unknown pre-tokenizer type '%s' (not one llama.cpp knows)", name);
    if ((pt->flags & PT_RAW) && t->model == MODEL_BPE_BYTES)
        return rkm_err(RKM_EUNSUPPORTED,
                       "tokenizer: pre-tokenizer '%s' is for a BPE over UTF-8 (tokenizer model gemma4), not gpt2", name);
    rkm_tok__split_free(t);
    for (int k = 0; pt->re[k]; k++) {
        int rc = rkm_tok__add_regex_split(t, pt->re[k], strlen(pt->re[k]), SPLIT_ISOLATED, 0);
        if (rc) return rc;
    }
    t->ignore_merges = (pt->flags & PT_IGNORE_MERGES) != 0;
    snprintf(t->pre_name, sizeof t->pre_name, "%s", name);
    return 0;
}

/* A step that keeps every match and every gap as a piece, as llama.cpp's
 * splits do (Isolated; Removed + invert is the same for a pattern that
 * leaves no gaps, which every type's patterns are). */
static int step_is_isolated(const split_step *st)
{
    return st->kind == PRE_REGEX && ((st->behavior == SPLIT_ISOLATED && !st->invert) ||
                                     (st->behavior == SPLIT_REMOVED && st->invert));
}

/* 1 when patterns a and b split every text alike: the same text, or GPT-2's
 * pattern with and without its final "|\\s+" (whitespace the other
 * alternatives leave is a gap, and a gap is a piece as well). */
static int same_split(const char *a, const char *b)
{
    if (!strcmp(a, b)) return 1;
    return (!strcmp(a, RE_GPT2) || !strcmp(a, RE_GPT2_NOTAIL)) && (!strcmp(b, RE_GPT2) || !strcmp(b, RE_GPT2_NOTAIL));
}

void rkm_tok__guess_pre_name(rkm_tokenizer *t)
{
    t->pre_name[0] = 0;
    if (t->model != MODEL_BPE_BYTES) {
        snprintf(t->pre_name, sizeof t->pre_name, "default");
        return;
    }
    /* the first type whose regexes are the steps' (the ignore_merges one
     * when the tokenizer ignores merges) */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < RKM_ARRAY_LEN(pre_types); i++) {
            const struct pre_type *pt = &pre_types[i];
            if (pt->flags & PT_RAW) continue;
            if (pass == 0 && !!(pt->flags & PT_IGNORE_MERGES) != !!t->ignore_merges) continue;
            int k = 0;
            while (pt->re[k] && k < t->n_split && step_is_isolated(&t->split[k]) &&
                   same_split(pt->re[k], rkm_regex_pattern(t->split[k].re)))
                k++;
            if (pt->re[k] || k != t->n_split) continue;
            const char *e = strchr(pt->names, ' ');
            size_t l = e ? (size_t)(e - pt->names) : strlen(pt->names);
            snprintf(t->pre_name, sizeof t->pre_name, "%.*s", (int)l, pt->names);
            return;
        }
}

/* ------------------------------------------------- pre-tokenizer matchers
 *
 * Each matcher returns the length (in code points) of the match at i in a
 * piece of n code points, or 0. c: code points, f: their RKM_UC_* flags.
 * They implement the leftmost-first alternation and greedy quantifiers of
 * the regex they are named after; comments give the alternative.
 */

#define IS_L(k) (f[k] & RKM_UC_L)
#define IS_N(k) (f[k] & RKM_UC_N)
#define IS_WS(k) (f[k] & RKM_UC_WS)
#define IS_NL(k) (c[k] == '\r' || c[k] == '\n')
/* [^\s\p{L}\p{N}] */
#define IS_OTHER(k) (!(f[k] & (RKM_UC_WS | RKM_UC_L | RKM_UC_N)))

static size_t ws_run_end(const uint8_t *f, size_t i, size_t n)
{
    while (i < n && (f[i] & RKM_UC_WS)) i++;
    return i;
}

/* \s+(?!\S)|\s+ at i (i is whitespace). */
static size_t match_ws_tail(const uint8_t *f, size_t i, size_t n, int plain_alt)
{
    size_t e = ws_run_end(f, i, n);
    if (e == n) return e - i;          /* (?!\S) holds at the end */
    if (e - i >= 2) return e - i - 1;  /* back off one so the next is whitespace */
    return plain_alt ? e - i : 0;      /* \s+ */
}

static size_t contraction(const uint32_t *c, size_t i, size_t n, int fold)
{
    /* 's|'t|'re|'ve|'m|'ll|'d, ASCII case-insensitive when fold */
    if (c[i] != '\'' || i + 1 >= n) return 0;
    uint32_t a = c[i + 1], b = i + 2 < n ? c[i + 2] : 0;
    if (fold) {
        if (a >= 'A' && a <= 'Z') a += 32;
        if (b >= 'A' && b <= 'Z') b += 32;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

static size_t m_gpt2(const uint32_t *c, const uint8_t *f, size_t i, size_t n)
{
    size_t k = contraction(c, i, n, 0);
    if (k) return k;
    size_t j = i + (c[i] == ' ' && i + 1 < n);
    size_t e = j;
    if (IS_L(j)) { /*  ?\p{L}+ */
        while (e < n && IS_L(e)) e++;
        return e - i;
    }
    if (IS_N(j)) { /*  ?\p{N}+ */
        while (e < n && IS_N(e)) e++;
        return e - i;
    }
    if (IS_OTHER(j)) { /*  ?[^\s\p{L}\p{N}]+ */
        while (e < n && IS_OTHER(e)) e++;
        return e - i;
    }
    if (IS_WS(i)) return match_ws_tail(f, i, n, 1);
    return 0;
}

/* \s*[\r\n]+ at i (i is whitespace): up to the last newline of the run. */
static size_t match_ws_newline(const uint32_t *c, const uint8_t *f, size_t i, size_t n)
{
    size_t e = ws_run_end(f, i, n);
    for (size_t k = e; k > i; k--)
        if (IS_NL(k - 1)) return k - i;
    return 0;
}

static size_t m_llama3(const uint32_t *c, const uint8_t *f, size_t i, size_t n, int max_digits)
{
    size_t k = contraction(c, i, n, 1);
    if (k) return k;
    size_t e;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (IS_L(i)) {
        for (e = i; e < n && IS_L(e); e++) {}
        return e - i;
    }
    if (!IS_NL(i) && !IS_N(i) && i + 1 < n && IS_L(i + 1)) {
        for (e = i + 1; e < n && IS_L(e); e++) {}
        return e - i;
    }
    /* \p{N}{1,max} */
    if (IS_N(i)) {
        for (e = i; e < n && e - i < (size_t)max_digits && IS_N(e); e++) {}
        return e - i;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t j = i + (c[i] == ' ' && i + 1 < n);
    if (IS_OTHER(j)) {
        for (e = j; e < n && IS_OTHER(e); e++) {}
        while (e < n && IS_NL(e)) e++;
        return e - i;
    }
    if (IS_WS(i)) {
        size_t m = match_ws_newline(c, f, i, n); /* \s*[\r\n]+ */
        return m ? m : match_ws_tail(f, i, n, 1);
    }
    return 0;
}

#define IS_PS(k) (f[k] & (RKM_UC_P | RKM_UC_S))
static int ascii_punct(uint32_t x)
{
    return (x >= 0x21 && x <= 0x2F) || (x >= 0x3A && x <= 0x40) || (x >= 0x5B && x <= 0x60) ||
           (x >= 0x7B && x <= 0x7E);
}
static int ascii_alpha(uint32_t x) { return (x >= 'A' && x <= 'Z') || (x >= 'a' && x <= 'z'); }

static size_t m_ds3_main(const uint32_t *c, const uint8_t *f, size_t i, size_t n)
{
    size_t e;
    /* [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ */
    if (ascii_punct(c[i]) && i + 1 < n && ascii_alpha(c[i + 1])) {
        for (e = i + 1; e < n && ascii_alpha(c[e]); e++) {}
        return e - i;
    }
    /* [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ */
#define IS_LM(k) (f[k] & (RKM_UC_L | RKM_UC_M))
    if (!IS_NL(i) && !(f[i] & (RKM_UC_L | RKM_UC_P | RKM_UC_S)) && i + 1 < n && IS_LM(i + 1)) {
        for (e = i + 1; e < n && IS_LM(e); e++) {}
        return e - i;
    }
    if (IS_LM(i)) {
        for (e = i; e < n && IS_LM(e); e++) {}
        return e - i;
    }
    /*  ?[\p{P}\p{S}]+[\r\n]* */
    size_t j = i + (c[i] == ' ' && i + 1 < n);
    if (IS_PS(j)) {
        for (e = j; e < n && IS_PS(e); e++) {}
        while (e < n && IS_NL(e)) e++;
        return e - i;
    }
    if (IS_WS(i)) {
        size_t m = match_ws_newline(c, f, i, n);
        return m ? m : match_ws_tail(f, i, n, 1);
    }
    return 0;
}

/* Cased letters of llama.cpp's deepseek-llm pattern (ranges as written
 * there: Lu/Ll/Lt of the BMP and a few supplementary blocks). */
static const uint32_t dsl_cased[][2] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t x)
{
    for (size_t i = 0; i < n; i++)
        if (x >= r[i][0] && x <= r[i][1]) return 1;
    return 0;
}

static int dsl_is_cased(uint32_t x) { return in_ranges(dsl_cased, RKM_ARRAY_LEN(dsl_cased), x); }

static int dsl_is_punct(uint32_t x)
{
    static const uint32_t r[][2] = {{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
                                    {0x2018, 0x201F}, {0x3000, 0x3002}};
    return in_ranges(r, RKM_ARRAY_LEN(r), x);
}

static int dsl_is_cjk(uint32_t x)
{
    return (x >= 0x4E00 && x <= 0x9FA5) || (x >= 0x0800 && x <= 0x4E00) || (x >= 0xAC00 && x <= 0xD7FF);
}

static int ds3_is_cjk(uint32_t x)
{
    return (x >= 0x4E00 && x <= 0x9FA5) || (x >= 0x3040 && x <= 0x309F) || (x >= 0x30A0 && x <= 0x30FF);
}

static int falcon_is_p(uint32_t x, unsigned fl)
{
    return (fl & RKM_UC_P) || x == '$' || x == '+' || x == '<' || x == '=' || x == '>' || x == '^' || x == '~' ||
           x == '|' || x == '`';
}

static size_t m_run(const uint32_t *c, const uint8_t *f, size_t i, size_t n, int kind)
{
    size_t e = i;
    switch (kind) {
    case PRE_DS3_NUM:
        while (e < n && e - i < 3 && IS_N(e)) e++;
        return e - i;
    case PRE_DS3_CJK:
        while (e < n && ds3_is_cjk(c[e])) e++;
        return e - i;
    case PRE_FALCON_P:
        while (e < n && falcon_is_p(c[e], f[e])) e++;
        return e - i;
    case PRE_DIGITS3:
        return i + 3 <= n && c[i] >= '0' && c[i] <= '9' && c[i + 1] >= '0' && c[i + 1] <= '9' && c[i + 2] >= '0' &&
                       c[i + 2] <= '9'
                   ? 3
                   : 0;
    case PRE_DSL_NL:
        return IS_NL(i) ? 1 : 0;
    case PRE_DSL_CASED:
    case PRE_DSL_PUNCT: {
        int (*cls)(uint32_t) = kind == PRE_DSL_CASED ? dsl_is_cased : dsl_is_punct;
        size_t j = i + (IS_WS(i) && i + 1 < n && cls(c[i + 1])); /* \s? */
        for (e = j; e < n && cls(c[e]); e++) {}
        return e > j ? e - i : 0;
    }
    case PRE_DSL_CJK:
        while (e < n && dsl_is_cjk(c[e])) e++;
        return e - i;
    case PRE_NUMS:
        while (e < n && IS_N(e)) e++;
        return e - i;
    case PRE_NL_RUNS: /* [\n]+; the gaps between are the [^\n]+ */
        while (e < n && c[e] == '\n') e++;
        return e - i;
    }
    return 0;
}

/* ------------------------------------------------------------ splitting */

static int vec_grow(span_vec *sv)
{
    size_t cap = sv->cap ? sv->cap * 2 : 64;
    span *nv = realloc(sv->v, cap * sizeof *nv);
    if (!nv) return RKM_ENOMEM;
    sv->v = nv;
    sv->cap = cap;
    return 0;
}

/* Appends [s, e) unless it is empty. */
static int span_push(span_vec *sv, size_t s, size_t e)
{
    if (s >= e) return 0;
    if (sv->n == sv->cap && vec_grow(sv)) return RKM_ENOMEM;
    sv->v[sv->n++] = (span){s, e};
    return 0;
}

/* Appends a mark: [s, e) and whether it is a match (m), empty ones too. */
static int mark_push(tok_pieces *x, size_t s, size_t e, int m)
{
    if (x->mk.n == x->mk.cap && vec_grow(&x->mk)) return RKM_ENOMEM;
    x->mk.v[x->mk.n++] = (span){s, e};
    if (x->mk.n > x->mk_cap) {
        size_t cap = x->mk.cap;
        uint8_t *nm = realloc(x->mk_m, cap);
        if (!nm) return RKM_ENOMEM;
        x->mk_m = nm;
        x->mk_cap = cap;
    }
    x->mk_m[x->mk.n - 1] = (uint8_t)m;
    return 0;
}

static int bert_is_punct(uint32_t c, unsigned fl)
{
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E) || (fl & RKM_UC_P);
}

/* WhitespaceSplit / BertPreTokenizer on piece [ps, pe): whitespace
 * removed; BERT: each punctuation character (Unicode P* or ASCII
 * punctuation/symbol) a piece of its own. */
static int split_words(const split_step *st, const tok_pieces *x, size_t ps, size_t pe, span_vec *out)
{
    const uint32_t *c = x->cp;
    const uint8_t *f = x->fl;
    for (size_t i = ps; i < pe;) {
        if (f[i] & RKM_UC_WS) {
            i++;
            continue;
        }
        size_t j = i;
        if (st->kind == PRE_BERT && bert_is_punct(c[i], f[i])) j++;
        else
            while (j < pe && !(f[j] & RKM_UC_WS) && !(st->kind == PRE_BERT && bert_is_punct(c[j], f[j]))) j++;
        int rc = span_push(out, i, j);
        if (rc) return rc;
        i = j;
    }
    return 0;
}

/* The hand-written matcher of kind at code point i of [0, n), or 0. */
static size_t fast_match(int kind, const uint32_t *c, const uint8_t *f, size_t i, size_t n)
{
    switch (kind) {
    case PRE_GPT2: return m_gpt2(c, f, i, n);
    case PRE_LLAMA3: return m_llama3(c, f, i, n, 3);
    case PRE_QWEN2: return m_llama3(c, f, i, n, 1);
    case PRE_DS3_MAIN: return m_ds3_main(c, f, i, n);
    default: return m_run(c, f, i, n, kind);
    }
}

/* The matches of step st in piece [ps, pe) and the gaps between them, in
 * order, as marks (code point indices). */
static int find_marks(const split_step *st, tok_pieces *x, const char *s, size_t ps, size_t pe)
{
    int rc = 0;
    x->mk.n = 0;
    if (st->kind == PRE_LITERAL) { /* a literal delimiter, on code point boundaries */
        size_t gap = ps, i = ps;
        const uint32_t *off = x->off;
        while (i < pe && !rc) {
            size_t bl = off[pe] - off[i];
            if (bl >= st->lit_len && !memcmp(s + off[i], st->lit, st->lit_len)) {
                size_t j = i;
                while (j < pe && off[j] < off[i] + st->lit_len) j++;
                if (i > gap) rc = mark_push(x, gap, i, 0);
                if (!rc) rc = mark_push(x, i, j, 1);
                i = gap = j;
            } else {
                i++;
            }
        }
        if (!rc && pe > gap) rc = mark_push(x, gap, pe, 0);
        return rc;
    }
    if (st->fast == PRE_DSL_WSEND) { /* \s+$: the trailing whitespace run */
        size_t k = pe;
        while (k > ps && (x->fl[k - 1] & RKM_UC_WS)) k--;
        if (k > ps) rc = mark_push(x, ps, k, 0);
        if (!rc && pe > k) rc = mark_push(x, k, pe, 1);
        return rc;
    }
    if (st->fast) {
        const uint32_t *c = x->cp + ps;
        const uint8_t *f = x->fl + ps;
        size_t n = pe - ps, gap = 0, i = 0;
        while (i < n && !rc) {
            size_t m = fast_match(st->fast, c, f, i, n);
            if (m == 0) {
                i++;
                continue;
            }
            if (i > gap) rc = mark_push(x, ps + gap, ps + i, 0);
            if (!rc) rc = mark_push(x, ps + i, ps + i + m, 1);
            i += m;
            gap = i;
        }
        if (!rc && n > gap) rc = mark_push(x, ps + gap, pe, 0);
        return rc;
    }
    /* PCRE2 over the piece's bytes: the piece is the whole subject, so
     * lookaround and anchors see its edges as the references do */
    const char *sub = s + x->off[ps];
    size_t len = x->off[pe] - x->off[ps], from = 0, k = ps, kprev = ps;
    int notempty = 0;
    for (;;) {
        size_t ms, me;
        rc = rkm_regex_find(st->re, &x->rx, sub, len, from, notempty, &ms, &me);
        if (rc <= 0) break;
        while (x->off[k] - x->off[ps] < ms) k++;
        size_t ks = k;
        while (x->off[k] - x->off[ps] < me) k++;
        if (ks > kprev && (rc = mark_push(x, kprev, ks, 0))) return rc;
        if ((rc = mark_push(x, ks, k, 1))) return rc;
        kprev = k;
        from = me;
        notempty = me == ms;
        if (from >= len && notempty) break;
    }
    if (rc < 0) return rc;
    return pe > kprev ? mark_push(x, kprev, pe, 0) : 0;
}

/* The pieces of one split step from its marks, by the step's behaviour
 * (Hugging Face's SplitDelimiterBehavior): Isolated keeps every mark,
 * Removed drops the matches, MergedWithPrevious / MergedWithNext join a
 * match to the piece before / after it, Contiguous joins runs of matches
 * and runs of gaps. invert swaps what is a match. Empty pieces are dropped
 * at the end, as the reference does. */
static int apply_behavior(const split_step *st, tok_pieces *x, span_vec *out)
{
    span *v = x->mk.v;
    const uint8_t *mm = x->mk_m;
    size_t n = x->mk.n;
    int prev = 0;
    if (st->behavior == SPLIT_MERGED_NEXT) {
        /* from the end: a match joins the piece after it */
        size_t w = n; /* pieces built in v[w..n) from the back, in place */
        for (size_t k = n; k-- > 0;) {
            int m = mm[k] ^ st->invert;
            span sp = v[k];
            if (m && !prev && w < n) v[w].s = sp.s;
            else v[--w] = sp;
            prev = m;
        }
        for (size_t k = w; k < n; k++)
            if (span_push(out, v[k].s, v[k].e)) return RKM_ENOMEM;
        return 0;
    }
    int has_last = 0;
    span last = {0, 0};
    for (size_t k = 0; k < n; k++) {
        int m = mm[k] ^ st->invert;
        span sp = v[k];
        int join = 0;
        switch (st->behavior) {
        case SPLIT_REMOVED:
            if (m) continue;
            break;
        case SPLIT_MERGED_PREV: join = m && !prev && has_last; break;
        case SPLIT_CONTIGUOUS: join = m == prev && has_last; break;
        default: break;
        }
        prev = m;
        if (join) {
            last.e = sp.e;
            continue;
        }
        if (has_last && span_push(out, last.s, last.e)) return RKM_ENOMEM;
        last = sp;
        has_last = 1;
    }
    if (has_last && span_push(out, last.s, last.e)) return RKM_ENOMEM;
    return 0;
}

/* Splits piece [ps, pe) by step st into out. */
static int split_piece(const split_step *st, tok_pieces *x, const char *s, size_t ps, size_t pe, span_vec *out)
{
    if (st->kind == PRE_WS_SPLIT || st->kind == PRE_BERT) return split_words(st, x, ps, pe, out);
    int rc = find_marks(st, x, s, ps, pe);
    if (rc) return rc;
    if (st->behavior == SPLIT_ISOLATED && !st->invert) { /* the common case */
        for (size_t k = 0; k < x->mk.n; k++)
            if (span_push(out, x->mk.v[k].s, x->mk.v[k].e)) return RKM_ENOMEM;
        return 0;
    }
    return apply_behavior(st, x, out);
}

/* Decodes s[0..n) (valid UTF-8) into code points, flags and byte offsets. */
static int cp_decode(tok_pieces *b, const char *s, size_t n, size_t *count)
{
    if (n + 1 > b->cap) {
        size_t cap = n + 1;
        uint32_t *cp = realloc(b->cp, cap * sizeof *cp);
        if (cp) b->cp = cp;
        uint8_t *fl = realloc(b->fl, cap);
        if (fl) b->fl = fl;
        uint32_t *off = realloc(b->off, cap * sizeof *off);
        if (off) b->off = off;
        if (!cp || !fl || !off) return RKM_ENOMEM;
        b->cap = cap;
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int l = rkm_utf8_decode(s + i, n - i, &c);
        if (l == 0) {
            c = 0xFFFD;
            l = 1;
        }
        b->cp[k] = c;
        b->fl[k] = (uint8_t)rkm_unicode_flags(c);
        b->off[k] = (uint32_t)i;
        k++;
        i += (size_t)l;
    }
    b->off[k] = (uint32_t)n;
    *count = k;
    return 0;
}

int rkm_tok__split(const rkm_tokenizer *t, tok_pieces *x, const char *s, size_t n, int from, int to)
{
    int rc;
    size_t ncp;
    if ((rc = cp_decode(x, s, n, &ncp))) return rc;
    x->a.n = 0;
    if ((rc = span_push(&x->a, 0, ncp))) return rc;
    for (int k = from; k < to; k++) {
        const split_step *st = &t->split[k];
        x->b.n = 0;
        for (size_t p = 0; p < x->a.n; p++)
            if ((rc = split_piece(st, x, s, x->a.v[p].s, x->a.v[p].e, &x->b))) return rc;
        span_vec tmp = x->a;
        x->a = x->b;
        x->b = tmp;
    }
    return 0;
}

void rkm_tok__pieces_free(tok_pieces *p)
{
    free(p->cp);
    free(p->fl);
    free(p->off);
    free(p->a.v);
    free(p->b.v);
    free(p->mk.v);
    free(p->mk_m);
    rkm_regex_scratch_free(&p->rx);
}
