/*
 * constrain.c - constrained sampling (see constrain.h).
 */
#include "runtime/constrain.h"

#include <math.h>

#include <cjson/cJSON.h>

#include "text/grammar.h"
#include "text/json_schema.h"
#include "text/tokenizer.h"

#define N_CACHE 32

typedef struct {
    uint64_t key;     /* rkm_gstate_hash of the state the mask is for (0: empty slot) */
    uint64_t used;    /* last use, for eviction */
    uint32_t *bits;
    int count;
} mask_slot;

struct rkm_constraint {
    rkm_model *m;
    rkm_grammar *g;
    rkm_gstate *st;
    int n_vocab;
    float *masked;       /* n_vocab logits with refused tokens at -inf */
    mask_slot cache[N_CACHE];
    uint64_t clock;
    uint64_t built;      /* masks computed */
};

/* Is id a token of text (not control or unused)? */
static int text_token(const rkm_tokenizer *t, int32_t id)
{
    int ty = rkm_tokenizer_token_type(t, id);
    return ty == RKM_TOKEN_NORMAL || ty == RKM_TOKEN_USER_DEFINED || ty == RKM_TOKEN_BYTE;
}

/* The model's trie of text tokens' bytes, built on first use. */
static const rkm_gtrie *model_trie(rkm_model *m)
{
    pthread_mutex_lock(&m->trie_lock);
    if (!m->trie && m->tok) {
        int n = m->hp.n_vocab;
        char **s = calloc((size_t)n, sizeof *s);
        size_t *len = calloc((size_t)n, sizeof *len);
        int ok = s && len;
        for (int i = 0; ok && i < n; i++) {
            char buf[512];
            int k = i < rkm_tokenizer_n_vocab(m->tok) && text_token(m->tok, i) ? rkm_tokenizer_piece(m->tok, i, buf, sizeof buf) : 0;
            if (k <= 0 || k > (int)sizeof buf) continue; /* none, or longer than any text token */
            if (!(s[i] = malloc((size_t)k))) ok = 0;
            else memcpy(s[i], buf, (size_t)k), len[i] = (size_t)k;
        }
        if (ok) m->trie = rkm_gtrie_new((const char *const *)s, len, n);
        for (int i = 0; s && i < n; i++) free(s[i]);
        free(s);
        free(len);
    }
    const rkm_gtrie *t = m->trie;
    pthread_mutex_unlock(&m->trie_lock);
    return t;
}

int rkm_constraint_new(rkm_model *m, const char *gbnf, rkm_constraint **out)
{
    *out = NULL;
    if (!m->tok) return rkm_err(RKM_EINVAL, "grammar: the model has no tokenizer");
    rkm_constraint *c = calloc(1, sizeof *c);
    if (!c) return rkm_err(RKM_ENOMEM, "out of memory");
    c->m = m;
    c->n_vocab = m->hp.n_vocab;
    c->g = rkm_grammar_parse(gbnf, NULL);
    if (!c->g) {
        free(c);
        return RKM_EINVAL;
    }
    c->st = rkm_gstate_new(c->g);
    c->masked = malloc(sizeof(float) * (size_t)c->n_vocab);
    if (!c->st || !c->masked || !model_trie(m)) {
        rkm_constraint_free(c);
        return rkm_err(RKM_ENOMEM, "grammar: out of memory");
    }
    *out = c;
    return 0;
}

void rkm_constraint_free(rkm_constraint *c)
{
    if (!c) return;
    for (int i = 0; i < N_CACHE; i++) free(c->cache[i].bits);
    rkm_gstate_free(c->st);
    rkm_grammar_free(c->g);
    free(c->masked);
    free(c);
}

/* The mask of the current state: from the cache, else computed (fresh
 * forces the computation, after a hash collision). */
static const mask_slot *state_mask(rkm_constraint *c, int fresh, int *rc)
{
    uint64_t key = rkm_gstate_hash(c->st) | 1;
    mask_slot *victim = &c->cache[0];
    for (int i = 0; i < N_CACHE; i++) {
        mask_slot *s = &c->cache[i];
        if (s->key == key && !fresh) {
            s->used = ++c->clock;
            return s;
        }
        if (s->used < victim->used) victim = s;
    }
    if (!victim->bits && !(victim->bits = malloc(sizeof(uint32_t) * (size_t)(c->n_vocab / 32 + 1)))) {
        *rc = rkm_err(RKM_ENOMEM, "grammar: out of memory");
        return NULL;
    }
    int n = rkm_gstate_mask(c->st, c->m->trie, victim->bits, c->n_vocab);
    c->built++;
    if (n < 0) {
        victim->key = 0;
        *rc = n;
        return NULL;
    }
    victim->key = key;
    victim->count = n;
    victim->used = ++c->clock;
    return victim;
}

/* May id come next? */
static int allowed(rkm_constraint *c, int32_t id)
{
    const rkm_tokenizer *t = c->m->tok;
    if (rkm_tokenizer_is_eog(t, id)) return rkm_gstate_done(c->st);
    if (id >= rkm_tokenizer_n_vocab(t) || !text_token(t, id) || rkm_gstate_finished(c->st)) return 0;
    char buf[512];
    int k = rkm_tokenizer_piece(t, id, buf, sizeof buf);
    return k > 0 && k <= (int)sizeof buf && rkm_gstate_can_accept(c->st, buf, (size_t)k);
}

static int take(rkm_constraint *c, int32_t id)
{
    if (rkm_tokenizer_is_eog(c->m->tok, id)) return 0;
    char buf[512];
    int k = rkm_tokenizer_piece(c->m->tok, id, buf, sizeof buf);
    return k > 0 && k <= (int)sizeof buf ? rkm_gstate_accept(c->st, buf, (size_t)k) : RKM_EINVAL;
}

int rkm_constraint_sample(rkm_constraint *c, rkm_sampler *smp, const float *logits, const int32_t *hist, int n_hist,
                          int32_t *out, rkm_stats *st)
{
    int32_t id = rkm_sampler_sample(smp, logits, hist, n_hist);
    st->grammar_picks++;
    if (allowed(c, id)) {
        *out = id;
        return take(c, id);
    }
    st->grammar_masked++;
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = 0;
        uint64_t before = c->built;
        const mask_slot *ms = state_mask(c, attempt, &rc);
        st->grammar_masks_built += c->built != before;
        if (!ms) return rc;
        int done = rkm_gstate_done(c->st), finished = rkm_gstate_finished(c->st), any = 0;
        for (int i = 0; i < c->n_vocab; i++) {
            int ok = rkm_tokenizer_is_eog(c->m->tok, i) ? done : !finished && (ms->bits[i >> 5] >> (i & 31) & 1);
            c->masked[i] = ok ? logits[i] : -INFINITY;
            any |= ok;
        }
        if (!any) return rkm_err(RKM_EINVAL, "grammar: no token of the vocabulary can continue the output");
        id = rkm_sampler_sample(smp, c->masked, hist, n_hist);
        if (!take(c, id)) {
            *out = id;
            return 0;
        }
        /* the cached mask belonged to another state (a hash collision): once more, computed */
    }
    return rkm_err(RKM_EINVAL, "grammar: the mask and the matcher disagree");
}

char *rkm_json_schema_grammar(const char *schema, size_t len)
{
    if (!schema) return strdup(rkm_json_object_gbnf());
    cJSON *j = cJSON_ParseWithLength(schema, len);
    if (!j) {
        rkm_err(RKM_EINVAL, "json_schema: not valid JSON");
        return NULL;
    }
    char *g = rkm_json_schema_to_gbnf(j);
    cJSON_Delete(j);
    return g;
}
