/*
 * regex.c - PCRE2 behind rkm_regex (see regex.h): the \s rewrite, compile
 * with JIT, and one leftmost match under the limits.
 *
 * Threads: compiled patterns are shared read-only; a scratch belongs to one
 * thread. Ownership: see regex.h.
 */
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/regex.h"
#include "util/buf.h"
#include "util/common.h"

struct rkm_regex {
    pcre2_code *code;
    char *pattern;
};

/* White_Space (the code points \s means in Oniguruma, Python's regex and
 * llama.cpp), and its complement, as class bodies. */
static const char WS_BODY[] = "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}"
                              "\\x{202f}\\x{205f}\\x{3000}";
static const char NOT_WS_BODY[] = "\\x{0}-\\x{8}\\x{e}-\\x{1f}\\x{21}-\\x{84}\\x{86}-\\x{9f}\\x{a1}-\\x{167f}"
                                  "\\x{1681}-\\x{1fff}\\x{200b}-\\x{2027}\\x{202a}-\\x{202e}\\x{2030}-\\x{205e}"
                                  "\\x{2060}-\\x{2fff}\\x{3001}-\\x{10ffff}";

/* The limits of one match. The match limit bounds the work of one call
 * (backtracking included) far above what a linear pattern needs on the
 * longest text an encode accepts per piece; the heap limit bounds the
 * interpreter's backtracking memory. */
#define RE_MATCH_LIMIT 200000000u
#define RE_DEPTH_LIMIT 10000000u
#define RE_HEAP_LIMIT_KIB (256u * 1024u)
#define RE_JIT_STACK_MAX (8u << 20)

/* Scripts whose \p{Name} means the Script property in the references
 * (Oniguruma, JavaScript's \p{Script=...}); PCRE2's \p{Name} would be
 * Script_Extensions, which puts shared punctuation such as U+3001 in Han. */
static const char *const scripts[] = {
    "Han",      "Hiragana", "Katakana", "Hangul",  "Latin",   "Greek",    "Cyrillic", "Arabic",  "Hebrew",
    "Thai",     "Devanagari", "Bengali", "Tamil",  "Armenian", "Georgian", "Ethiopic", "Khmer",  "Lao",
    "Myanmar",  "Tibetan",  "Mongolian", "Bopomofo", "Yi",     "Common",  "Inherited",
};

/* Copies pattern p[0..n) into out, rewritten to mean what the references
 * mean:
 *  - \s and \S: White_Space classes, outside and inside character classes;
 *  - \p{Script}: the Script property (\p{sc:Script});
 *  - (?i:...): ASCII letters outside classes as [xX] pairs (the case
 *    folding llama.cpp's patterns and Hugging Face's JavaScript tokenizers
 *    apply; a class inside the group keeps PCRE2's folding);
 * escapes (whole \x{..} / \p{..} forms), \Q..\E and POSIX brackets are
 * copied as they are. */
static void rewrite(const char *p, size_t n, rkm_buf *out)
{
    int in_class = 0, depth = 0, caseless_depth = 0; /* caseless: inside the group opened at that depth */
    size_t class_start = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            if (d == 'Q') { /* literal text up to \E */
                size_t j = i + 2;
                while (j + 1 < n && !(p[j] == '\\' && p[j + 1] == 'E')) j++;
                j = j + 1 < n ? j + 2 : n;
                rkm_buf_add(out, p + i, j - i);
                i = j - 1;
                continue;
            }
            if (d == 's' || d == 'S') {
                const char *body = d == 's' ? WS_BODY : NOT_WS_BODY;
                if (!in_class) rkm_buf_addc(out, '[');
                rkm_buf_adds(out, body);
                if (!in_class) rkm_buf_addc(out, ']');
                i++;
                continue;
            }
            if (i + 2 < n && p[i + 2] == '{' && strchr("pPxNgko", d)) { /* \p{..}, \x{..}, ... whole */
                const char *e = memchr(p + i + 3, '}', n - i - 3);
                size_t j = e ? (size_t)(e - p) + 1 : n;
                size_t nl = j - i - 4; /* the name inside the braces */
                int script = 0;
                for (size_t k = 0; e && (d == 'p' || d == 'P') && k < RKM_ARRAY_LEN(scripts); k++)
                    if (strlen(scripts[k]) == nl && !memcmp(p + i + 3, scripts[k], nl)) script = 1;
                if (script) {
                    rkm_buf_add(out, p + i, 3);
                    rkm_buf_adds(out, "sc:");
                    rkm_buf_add(out, p + i + 3, j - i - 3);
                } else {
                    rkm_buf_add(out, p + i, j - i);
                }
                i = j - 1;
                continue;
            }
            size_t l = (d == 'p' || d == 'P') && i + 2 < n ? 3 : 2; /* \pL */
            rkm_buf_add(out, p + i, l);
            i += l - 1;
            continue;
        }
        if (in_class) {
            if (c == '[' && i + 1 < n && p[i + 1] == ':') { /* [:alpha:] */
                const char *e = NULL;
                for (size_t j = i + 2; j + 1 < n; j++)
                    if (p[j] == ':' && p[j + 1] == ']') {
                        e = p + j + 2;
                        break;
                    }
                if (e) {
                    rkm_buf_add(out, p + i, (size_t)(e - (p + i)));
                    i = (size_t)(e - p) - 1;
                    continue;
                }
            } else if (c == ']') {
                /* a ']' right after '[' or '[^' is a literal member */
                size_t first = class_start + 1 + (class_start + 1 < n && p[class_start + 1] == '^');
                if (i != first) {
                    in_class = 0;
                    rkm_buf_addc(out, c);
                    if (caseless_depth) rkm_buf_addc(out, ')');
                    continue;
                }
            }
            rkm_buf_addc(out, c);
            continue;
        }
        if (c == '[') {
            in_class = 1;
            class_start = i;
            if (caseless_depth) rkm_buf_adds(out, "(?i:");
            rkm_buf_addc(out, c);
            continue;
        }
        if (c == '(') {
            depth++;
            if (n - i >= 4 && !memcmp(p + i, "(?i:", 4)) {
                if (!caseless_depth) caseless_depth = depth;
                rkm_buf_adds(out, "(?:");
                i += 3;
                continue;
            }
        } else if (c == ')' && depth > 0) {
            if (caseless_depth == depth) caseless_depth = 0;
            depth--;
        } else if (caseless_depth && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            char lo = (char)(c | 0x20), up = (char)(c & ~0x20);
            char pair[4] = {'[', lo, up, ']'};
            rkm_buf_add(out, pair, 4);
            continue;
        }
        rkm_buf_addc(out, c);
    }
}

rkm_regex *rkm_regex_compile(const char *pattern, size_t n)
{
    rkm_buf b = RKM_BUF_INIT;
    rewrite(pattern, n, &b);
    rkm_regex *re = calloc(1, sizeof *re);
    if (!re || !rkm_buf_ok(&b) || !(re->pattern = malloc(n + 1))) {
        rkm_buf_free(&b);
        rkm_regex_free(re);
        rkm_err(RKM_ENOMEM, "regex: out of memory");
        return NULL;
    }
    memcpy(re->pattern, pattern, n);
    re->pattern[n] = 0;
    int err;
    PCRE2_SIZE at;
    re->code = pcre2_compile((PCRE2_SPTR)(b.data ? b.data : ""), b.len, PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &at, NULL);
    rkm_buf_free(&b);
    if (!re->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        rkm_err(RKM_EUNSUPPORTED, "regex '%.120s': %s", re->pattern, (const char *)msg);
        rkm_regex_free(re);
        return NULL;
    }
    /* JIT where the CPU has it; the interpreter otherwise (same results). */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    return re;
}

void rkm_regex_free(rkm_regex *re)
{
    if (!re) return;
    pcre2_code_free(re->code);
    free(re->pattern);
    free(re);
}

const char *rkm_regex_pattern(const rkm_regex *re) { return re->pattern; }

static int scratch_init(rkm_regex_scratch *sc)
{
    if (sc->md) return 0;
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    pcre2_jit_stack *js = pcre2_jit_stack_create(32 * 1024, RE_JIT_STACK_MAX, NULL);
    if (!mc || !md) {
        pcre2_match_context_free(mc);
        pcre2_match_data_free(md);
        pcre2_jit_stack_free(js);
        return rkm_err(RKM_ENOMEM, "regex: out of memory");
    }
    pcre2_set_match_limit(mc, RE_MATCH_LIMIT);
    pcre2_set_depth_limit(mc, RE_DEPTH_LIMIT);
    pcre2_set_heap_limit(mc, RE_HEAP_LIMIT_KIB);
    if (js) pcre2_jit_stack_assign(mc, NULL, js);
    sc->mctx = mc;
    sc->md = md;
    sc->jit = js;
    return 0;
}

int rkm_regex_find(const rkm_regex *re, rkm_regex_scratch *sc, const char *s, size_t n, size_t from,
                   int notempty_at_from, size_t *ms, size_t *me)
{
    int rc = scratch_init(sc);
    if (rc) return rc;
    uint32_t opts = PCRE2_NO_UTF_CHECK | (notempty_at_from ? PCRE2_NOTEMPTY_ATSTART : 0);
    rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, from, opts, sc->md, sc->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* deep backtracking: the interpreter keeps it on the heap */
        rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, from, opts | PCRE2_NO_JIT, sc->md, sc->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return rkm_err(rc == PCRE2_ERROR_NOMEMORY ? RKM_ENOMEM : RKM_EUNSUPPORTED,
                       "pre-tokenizer regex '%.80s' on a text of %zu bytes: %s", re->pattern, n, (const char *)msg);
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

void rkm_regex_scratch_free(rkm_regex_scratch *sc)
{
    pcre2_match_data_free(sc->md);
    pcre2_match_context_free(sc->mctx);
    pcre2_jit_stack_free(sc->jit);
    memset(sc, 0, sizeof *sc);
}
