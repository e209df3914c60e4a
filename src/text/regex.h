/*
 * regex.h - the regular expressions of pre-tokenizers, run by PCRE2 (UTF-8,
 * Unicode properties, JIT-compiled where the CPU allows).
 *
 * Patterns are the ones tokenizer.json files and llama.cpp's pre-tokenizer
 * types spell (Oniguruma / Python style): \p{L}, \p{Lu}, \p{N}, \p{M},
 * \p{Han}, (?i:...), lookahead, possessive quantifiers. One rewrite makes
 * them mean what the references mean: \s and \S are the Unicode
 * White_Space property (U+0085 included), where PCRE2's \s would leave out
 * U+0085. `$` matches at the very end only (no final-newline exception).
 *
 * Every match runs under limits (a match limit, a depth limit, a heap limit
 * and a bounded JIT stack), so a hostile pattern on a hostile text gives
 * RKM_EUNSUPPORTED with a message, never a hang; a JIT stack overflow
 * retries the same match in the interpreter, which keeps its backtracking
 * on the heap.
 *
 * Threads: a compiled rkm_regex is immutable and may be matched from many
 * threads at once; each thread (or call) brings its own rkm_regex_scratch.
 * Ownership: rkm_regex_free frees a pattern; rkm_regex_scratch_free frees
 * what a scratch allocated (a zeroed scratch is valid and empty).
 */
#ifndef RKM_REGEX_H
#define RKM_REGEX_H

#include <stddef.h>

typedef struct rkm_regex rkm_regex;

/* Per-thread match state: zero-initialise; allocated on first use. */
typedef struct rkm_regex_scratch {
    void *md;    /* pcre2_match_data */
    void *mctx;  /* pcre2_match_context with the limits and the JIT stack */
    void *jit;   /* pcre2_jit_stack */
} rkm_regex_scratch;

/* Compiles pattern[0..n) (UTF-8). NULL with rkm_err naming the pattern and
 * the offset and reason of a syntax error. */
rkm_regex *rkm_regex_compile(const char *pattern, size_t n);
void rkm_regex_free(rkm_regex *re);
/* The pattern as given to rkm_regex_compile (NUL-terminated). */
const char *rkm_regex_pattern(const rkm_regex *re);

/* Finds the leftmost match in s[0..n) starting at or after byte `from`
 * (lookbehind sees s[0..from)). notempty_at_from: an empty match at `from`
 * does not count (the caller has just had one there). Returns 1 with the
 * match in [*ms, *me), 0 when there is none, or a negative RKM_E* (a limit
 * was reached, out of memory). s must be valid UTF-8 and `from` on a code
 * point boundary. */
int rkm_regex_find(const rkm_regex *re, rkm_regex_scratch *sc, const char *s, size_t n, size_t from,
                   int notempty_at_from, size_t *ms, size_t *me);

void rkm_regex_scratch_free(rkm_regex_scratch *sc);

#endif
