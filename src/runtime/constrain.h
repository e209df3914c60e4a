/*
 * constrain.h - constrained sampling: what a session may generate is held
 * to a grammar (text/grammar.h). Owns, per session, the grammar, its
 * matcher state and a small cache of vocabulary masks keyed by that state;
 * per model, the trie of the vocabulary's text tokens (built on first use
 * under its own lock; rkm_model_close frees it).
 *
 * A pick is the sampler's own when the grammar allows it, else a draw from
 * the logits with every token the grammar refuses removed (the same
 * distribution as masking first, at a fraction of the cost: the mask is
 * only computed when the first pick is refused). An end-of-generation
 * token is allowed where the grammar is complete, and is the only choice
 * once nothing can follow; control tokens are never allowed.
 *
 * Threads: the session's thread (the model's trie is built once under
 * model->trie_lock and read-only after). Ownership: the session frees its
 * constraint (rkm_constraint_free).
 */
#ifndef RKM_RUNTIME_CONSTRAIN_H
#define RKM_RUNTIME_CONSTRAIN_H

#include <stdint.h>

#include "runtime/model.h"

typedef struct rkm_constraint rkm_constraint;

/* A constraint for GBNF text (root rule "root") on model m; RKM_EINVAL
 * with the grammar's message. */
int rkm_constraint_new(rkm_model *m, const char *gbnf, rkm_constraint **out);
void rkm_constraint_free(rkm_constraint *c);
/* The next id under the constraint: sampled with smp from logits
 * (n_vocab), history hist; the grammar advances over it; st's grammar
 * counters count the pick. RKM_EINVAL when no token can continue the
 * grammar. */
int rkm_constraint_sample(rkm_constraint *c, rkm_sampler *smp, const float *logits, const int32_t *hist, int n_hist,
                          int32_t *out, rkm_stats *st);

#endif
