/*
 * grammar.h - context-free grammars over Unicode code points, for
 * constrained sampling (structured outputs, tool calls).
 *
 * The text form is GBNF, the one llama.cpp reads: `name ::= alternatives`,
 * literals "..." with \n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH escapes, classes
 * [a-z0-9_] and [^"\\], `.` (any code point), groups ( ), postfix * + ? and
 * {m} {m,} {m,n}, # comments. Rules are compiled into one flat element
 * array (groups and repetitions become rules of their own; repetition is
 * right-recursive, so parse stacks stay as deep as the nesting, not the
 * length); left recursion is refused at parse time.
 *
 * The matcher (rkm_gstate) is the set of parse stacks that the text so far
 * leaves (an empty stack: the grammar may end here) plus an incomplete
 * UTF-8 sequence if the last bytes ended inside one. rkm_gstate_mask marks
 * every vocabulary entry (a token's bytes, in an rkm_gtrie built once per
 * vocabulary) that the grammar accepts next, walking the trie depth first
 * so that tokens sharing a prefix share the work.
 *
 * Threads: a grammar and a trie are immutable after creation and may be
 * shared; a state belongs to one thread. Ownership: each *_free frees what
 * its *_new / parse returned; a state does not own its grammar.
 */
#ifndef RKM_TEXT_GRAMMAR_H
#define RKM_TEXT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

typedef struct rkm_grammar rkm_grammar;
typedef struct rkm_gstate rkm_gstate;
typedef struct rkm_gtrie rkm_gtrie;

/* Parses GBNF text; root names the start rule ("root" when NULL). NULL
 * with the message (line and column) in rkm_last_error() on error. */
rkm_grammar *rkm_grammar_parse(const char *text, const char *root);
void rkm_grammar_free(rkm_grammar *g);

/* A matcher at the start of the grammar; NULL on allocation failure. */
rkm_gstate *rkm_gstate_new(const rkm_grammar *g);
rkm_gstate *rkm_gstate_clone(const rkm_gstate *st);
void rkm_gstate_free(rkm_gstate *st);
/* Advances over bytes (UTF-8, possibly ending inside a code point): 0, or
 * RKM_EINVAL (the grammar refuses them; the state is unchanged). */
int rkm_gstate_accept(rkm_gstate *st, const char *bytes, size_t n);
/* Would rkm_gstate_accept take these bytes? 1 or 0, state unchanged. */
int rkm_gstate_can_accept(const rkm_gstate *st, const char *bytes, size_t n);
/* 1 when the text so far is a complete sentence of the grammar. */
int rkm_gstate_done(const rkm_gstate *st);
/* 1 when nothing more can follow (done, and no stack continues). */
int rkm_gstate_finished(const rkm_gstate *st);
/* A 64-bit hash of the state (its stacks and incomplete bytes): equal
 * states hash alike, for caching masks. */
uint64_t rkm_gstate_hash(const rkm_gstate *st);

/* A trie of n byte strings (a vocabulary's token pieces, id = index);
 * empty strings are left out. NULL on allocation failure. */
rkm_gtrie *rkm_gtrie_new(const char *const *s, const size_t *len, int n);
void rkm_gtrie_free(rkm_gtrie *t);
/* Sets bit id of bits (n / 32 + 1 words, cleared first) for every string
 * of the trie the state accepts next. Returns how many, or a negative
 * error. */
int rkm_gstate_mask(const rkm_gstate *st, const rkm_gtrie *t, uint32_t *bits, int n);

#endif
