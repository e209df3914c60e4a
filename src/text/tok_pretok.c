/*
 * tok_pretok.c - the pre-tokenizers: which tokenizer.json Split regexes
 * and llama.cpp tokenizer.ggml.pre names we implement and the split
 * program each one means, the hand-written matchers that stand in for
 * those regexes, and the driver that cuts a text into pieces by a
 * tokenizer's split steps (regex matchers, literal splits,
 * WhitespaceSplit, BertPreTokenizer).
 *
 * Threads: the tables are constant; rkm_tok__split works on the caller's
 * tok_pieces, so calls on one shared tokenizer may run at once.
 * Ownership: a tok_pieces' arrays belong to its caller
 * (rkm_tok__pieces_free).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"

/* The pre-tokenizer regexes we implement, exactly as tokenizer.json
 * spells them. */
static const char RE_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_GPT2_NOTAIL[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
static const char RE_DS3_NUM[] = "\\p{N}{1,3}";
static const char RE_DS3_CJK[] = "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+";
static const char RE_DS3_MAIN[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

static const struct {
    const char *re;
    int kind;
} known_regex[] = {
    {RE_LLAMA3, PRE_LLAMA3},     {RE_QWEN2, PRE_QWEN2},     {RE_GPT2, PRE_GPT2},
    {RE_GPT2_NOTAIL, PRE_GPT2},  {RE_DS3_NUM, PRE_DS3_NUM}, {RE_DS3_CJK, PRE_DS3_CJK},
    {RE_DS3_MAIN, PRE_DS3_MAIN},
};

/* llama.cpp's tokenizer.ggml.pre names and the splits each one means. */
static const struct {
    const char *name;
    int splits[6];
    int ignore_merges;
} known_pre[] = {
    {"gpt-2", {PRE_GPT2}, 0},
    {"gpt2", {PRE_GPT2}, 0},
    {"phi-2", {PRE_GPT2}, 0},
    {"olmo", {PRE_GPT2}, 0},
    {"mpt", {PRE_GPT2}, 0},
    {"jais", {PRE_GPT2}, 0},
    {"roberta-bpe", {PRE_GPT2}, 0},
    {"gpt-neox", {PRE_GPT2}, 0},
    {"llama-bpe", {PRE_LLAMA3}, 1},
    {"llama3", {PRE_LLAMA3}, 1},
    {"dbrx", {PRE_LLAMA3}, 0},
    {"smaug-bpe", {PRE_LLAMA3}, 0},
    {"qwen2", {PRE_QWEN2}, 0},
    {"deepseek-r1-qwen", {PRE_QWEN2}, 0},
    {"deepseek-v3", {PRE_DS3_NUM, PRE_DS3_CJK, PRE_DS3_MAIN}, 0},
    {"falcon", {PRE_FALCON_P, PRE_GPT2, PRE_DIGITS3}, 0},
    {"deepseek-llm",
     {PRE_DSL_NL, PRE_DSL_CASED, PRE_DSL_PUNCT, PRE_DSL_WSEND, PRE_DSL_CJK, PRE_NUMS},
     0},
};

int rkm_tok__regex_kind(const char *re)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(known_regex); i++)
        if (!strcmp(re, known_regex[i].re)) return known_regex[i].kind;
    return 0;
}

const char *rkm_tok__regex_text(int kind)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(known_regex); i++)
        if (known_regex[i].kind == kind) return known_regex[i].re;
    return NULL;
}

int rkm_tok__set_pre_by_name(rkm_tokenizer *t, const char *name)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(known_pre); i++) {
        if (strcmp(known_pre[i].name, name) != 0) continue;
        t->n_split = 0;
        for (int k = 0; k < 6 && known_pre[i].splits[k]; k++) t->split[t->n_split++].kind = known_pre[i].splits[k];
        t->ignore_merges = known_pre[i].ignore_merges;
        snprintf(t->pre_name, sizeof t->pre_name, "%s", name);
        return 0;
    }
    return rkm_err(RKM_EUNSUPPORTED, "tokenizer: unsupported pre-tokenizer '%s'", name);
}

void rkm_tok__guess_pre_name(rkm_tokenizer *t)
{
    const char *name = "gpt-2";
    if (t->n_split == 1 && t->split[0].kind == PRE_LLAMA3) name = "llama-bpe";
    else if (t->n_split == 1 && t->split[0].kind == PRE_QWEN2) name = "qwen2";
    else if (t->n_split == 3 && t->split[0].kind == PRE_DS3_NUM && t->split[2].kind == PRE_DS3_MAIN)
        name = "deepseek-v3";
    else if (t->model != MODEL_BPE_BYTES) name = "default";
    snprintf(t->pre_name, sizeof t->pre_name, "%s", name);
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

static int span_push(span_vec *sv, size_t s, size_t e)
{
    if (s >= e) return 0;
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 64;
        span *nv = realloc(sv->v, cap * sizeof *nv);
        if (!nv) return RKM_ENOMEM;
        sv->v = nv;
        sv->cap = cap;
    }
    sv->v[sv->n++] = (span){s, e};
    return 0;
}

static int bert_is_punct(uint32_t c, unsigned fl)
{
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E) || (fl & RKM_UC_P);
}

/* Splits one piece [0, n) of code points by one split step, appending the
 * sub-pieces (offset by base) to out: matches and the gaps between them
 * are both kept ("Isolated"). */
static int split_piece(const split_step *st, const uint32_t *c, const uint8_t *f, size_t base, size_t n,
                       span_vec *out)
{
    int rc;
    if (st->kind == PRE_WS_SPLIT || st->kind == PRE_BERT) {
        /* whitespace removed; BERT: each punctuation character (Unicode P*
         * or ASCII punctuation/symbol) a piece of its own */
        for (size_t i = 0; i < n;) {
            if (f[i] & RKM_UC_WS) {
                i++;
                continue;
            }
            size_t j = i;
            if (st->kind == PRE_BERT && bert_is_punct(c[i], f[i])) j++;
            else
                while (j < n && !(f[j] & RKM_UC_WS) && !(st->kind == PRE_BERT && bert_is_punct(c[j], f[j]))) j++;
            if ((rc = span_push(out, base + i, base + j))) return rc;
            i = j;
        }
        return 0;
    }
    if (st->kind == PRE_DSL_WSEND) { /* \s+$: the trailing whitespace run */
        size_t k = n;
        while (k > 0 && (f[k - 1] & RKM_UC_WS)) k--;
        if ((rc = span_push(out, base, base + k))) return rc;
        return span_push(out, base + k, base + n);
    }
    size_t gap = 0, i = 0;
    while (i < n) {
        size_t m;
        switch (st->kind) {
        case PRE_GPT2: m = m_gpt2(c, f, i, n); break;
        case PRE_LLAMA3: m = m_llama3(c, f, i, n, 3); break;
        case PRE_QWEN2: m = m_llama3(c, f, i, n, 1); break;
        case PRE_DS3_MAIN: m = m_ds3_main(c, f, i, n); break;
        default: m = m_run(c, f, i, n, st->kind); break;
        }
        if (m == 0) {
            i++;
            continue;
        }
        if ((rc = span_push(out, base + gap, base + i))) return rc;
        if ((rc = span_push(out, base + i, base + i + m))) return rc;
        i += m;
        gap = i;
    }
    return span_push(out, base + gap, base + n);
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
        for (size_t p = 0; p < x->a.n; p++) {
            span sp = x->a.v[p];
            if (st->kind == PRE_LITERAL) {
                /* literal delimiter, matched on code point boundaries */
                size_t gap = sp.s, i = sp.s;
                const uint32_t *off = x->off;
                while (i < sp.e) {
                    size_t bl = off[sp.e] - off[i];
                    if (bl >= st->lit_len && !memcmp(s + off[i], st->lit, st->lit_len)) {
                        size_t j = i;
                        while (j < sp.e && off[j] < off[i] + st->lit_len) j++;
                        if ((rc = span_push(&x->b, gap, i))) return rc;
                        if (!st->removed && (rc = span_push(&x->b, i, j))) return rc;
                        i = gap = j;
                    } else {
                        i++;
                    }
                }
                if ((rc = span_push(&x->b, gap, sp.e))) return rc;
            } else if ((rc = split_piece(st, x->cp + sp.s, x->fl + sp.s, sp.s, sp.e - sp.s, &x->b))) {
                return rc;
            }
        }
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
}
