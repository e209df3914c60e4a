/*
 * tok_encode.c - text -> ids: the added-token pass (tries over the raw and
 * the normalized text, lstrip/rstrip), normalizing the text between added
 * tokens, the Metaspace and prefix-space rewrites, the split steps, and
 * handing each word to its model (tok_bpe.c, tok_unigram.c,
 * tok_wordpiece.c). Owns the per-call scratch.
 *
 * Threads: one call's state is its enc_ctx on the caller's stack; the
 * tokenizer is only read, so calls may run at once on one tokenizer.
 * Ownership: every scratch buffer is freed before rkm_tokenizer_encode
 * returns; the ids are copied into the caller's array.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"

/* Longest allowed added token starting at s[0..n); returns its length (0:
 * none) and its id in *id. */
static size_t trie_match(const rkm_tokenizer *t, const trie *tr, const char *s, size_t n,
                         int parse_special, int32_t *id)
{
    if (tr->count == 0 || tr->root[(uint8_t)s[0]] < 0) return 0;
    int32_t node = 0;
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t c = tr->n[node].child;
        while (c >= 0 && tr->n[c].byte != b) c = tr->n[c].next;
        if (c < 0) break;
        node = c;
        int32_t tk = tr->n[node].token;
        if (tk >= 0 && (parse_special || !t->tok[tk].special)) {
            best = i + 1;
            *id = tk;
        }
    }
    return best;
}

int rkm_tok__ws_reserve(merge_ws *w, size_t n)
{
    if (n <= w->cap) return 0;
    size_t cap = n + n / 2 + 16;
    uint32_t *s = realloc(w->start, cap * sizeof *s);
    if (s) w->start = s;
    uint32_t *l = realloc(w->len, cap * sizeof *l);
    if (l) w->len = l;
    int32_t *p = realloc(w->prev, cap * sizeof *p);
    if (p) w->prev = p;
    int32_t *x = realloc(w->next, cap * sizeof *x);
    if (x) w->next = x;
    int32_t *d = realloc(w->id, cap * sizeof *d);
    if (d) w->id = d;
    if (!s || !l || !p || !x || !d) return RKM_ENOMEM;
    w->cap = cap;
    return 0;
}

static void merge_ws_free(merge_ws *w)
{
    free(w->start);
    free(w->len);
    free(w->prev);
    free(w->next);
    free(w->id);
    free(w->h.v);
    free(w->vscore);
    free(w->vfrom);
    free(w->vid);
}

/* Appends the ids of one word s[0..n) by the tokenizer's model. */
static int merge_word(const rkm_tokenizer *t, merge_ws *w, const char *s, size_t n, id_vec *out)
{
    if (n == 0) return 0;
    if (t->model == MODEL_UNIGRAM) return rkm_tok__unigram_words(t, w, s, n, out);
    if (t->model == MODEL_WORDPIECE) return rkm_tok__wordpiece_word(t, s, n, out);
    return rkm_tok__bpe_word(t, w, s, n, out);
}

typedef struct {
    const rkm_tokenizer *t;
    merge_ws mw;
    tok_pieces pc;
    id_vec out;
    int parse_special;
    int section_index;
    int prev_special; /* llama.cpp SPM: the previous fragment was a token */
} enc_ctx;

/* Pre-tokenizes and merges one text fragment (no added tokens in it). */
static int encode_plain_inner(enc_ctx *x, const char *s, size_t n);

static int encode_plain(enc_ctx *x, const char *s, size_t n)
{
    size_t first = x->out.n;
    int rc = encode_plain_inner(x, s, n);
    if (!rc && x->t->fuse_unk && x->t->unk >= 0) { /* fuse runs of <unk> */
        size_t w = first;
        for (size_t i = first; i < x->out.n; i++)
            if (!(x->out.v[i] == x->t->unk && w > first && x->out.v[w - 1] == x->t->unk)) x->out.v[w++] = x->out.v[i];
        x->out.n = w;
    }
    return rc;
}

/* Metaspace: ' ' -> the replacement, which is prepended when asked and the
 * text does not start with it already. */
static int metaspace_apply(const rkm_tokenizer *t, const char *s, size_t n, int prepend, rkm_buf *out)
{
    size_t rl = strlen(t->metaspace_rep);
    if (prepend && !(n >= 1 && s[0] == ' ') && !(n >= rl && !memcmp(s, t->metaspace_rep, rl)))
        rkm_buf_add(out, t->metaspace_rep, rl);
    return rkm_tok__replace_all(s, n, " ", 1, t->metaspace_rep, rl, out);
}

/* Split steps [from, n_split) then the model, on s[0..n). */
static int split_and_merge(enc_ctx *x, const char *s, size_t n, int from)
{
    const rkm_tokenizer *t = x->t;
    if (from >= t->n_split) return merge_word(t, &x->mw, s, n, &x->out);
    int rc = rkm_tok__split(t, &x->pc, s, n, from, t->n_split);
    for (size_t p = 0; p < x->pc.a.n && !rc; p++) {
        size_t bs = x->pc.off[x->pc.a.v[p].s], be = x->pc.off[x->pc.a.v[p].e];
        rc = merge_word(t, &x->mw, s + bs, be - bs, &x->out);
    }
    return rc;
}

/* A Metaspace after split steps (T5: WhitespaceSplit, then Metaspace):
 * the first splits, then each piece gets the Metaspace rewrite of its own
 * (prepend "first": only the piece at the start of the first section, the
 * Rust reference's rule), then the remaining splits and the model. */
static int encode_split_then_metaspace(enc_ctx *x, const char *s, size_t n)
{
    const rkm_tokenizer *t = x->t;
    int rc = rkm_tok__split(t, &x->pc, s, n, 0, t->metaspace_at);
    if (rc) return rc;
    size_t np = x->pc.a.n;
    span *pieces = malloc((np ? np : 1) * sizeof *pieces); /* byte spans; x->pc is reused below */
    if (!pieces) return RKM_ENOMEM;
    for (size_t p = 0; p < np; p++) pieces[p] = (span){x->pc.off[x->pc.a.v[p].s], x->pc.off[x->pc.a.v[p].e]};
    for (size_t p = 0; p < np && !rc; p++) {
        int prepend = t->metaspace_prepend == 1 ||
                      (t->metaspace_prepend == 2 && x->section_index == 0 && pieces[p].s == 0);
        rkm_buf m = RKM_BUF_INIT;
        rc = metaspace_apply(t, s + pieces[p].s, pieces[p].e - pieces[p].s, prepend, &m);
        if (!rc) rc = split_and_merge(x, m.data, m.len, t->metaspace_at);
        rkm_buf_free(&m);
    }
    free(pieces);
    return rc;
}

static int encode_plain_inner(enc_ctx *x, const char *s, size_t n)
{
    const rkm_tokenizer *t = x->t;
    int rc = 0;
    if (n == 0) return 0;
    if (t->model == MODEL_SPM) { /* llama.cpp: ' ' -> U+2581, one word */
        rkm_buf e = RKM_BUF_INIT;
        if (t->add_space_prefix && x->prev_special) rkm_buf_add(&e, "\xe2\x96\x81", 3);
        rc = rkm_tok__replace_all(s, n, " ", 1, "\xe2\x96\x81", 3, &e);
        if (!rc) rc = merge_word(t, &x->mw, e.data, e.len, &x->out);
        rkm_buf_free(&e);
        return rc;
    }
    if (t->metaspace && t->metaspace_at > 0) return encode_split_then_metaspace(x, s, n);
    rkm_buf meta = RKM_BUF_INIT, pre = RKM_BUF_INIT;
    if (t->metaspace) { /* Metaspace: ' ' -> replacement, maybe prepended */
        int prepend = t->metaspace_prepend == 1 || (t->metaspace_prepend == 2 && x->section_index == 0);
        if ((rc = metaspace_apply(t, s, n, prepend, &meta))) goto out;
        s = meta.data;
        n = meta.len;
    }
    if (t->add_prefix_space && s[0] != ' ') {
        rkm_buf_add(&pre, " ", 1);
        rkm_buf_add(&pre, s, n);
        if (!rkm_buf_ok(&pre)) {
            rc = RKM_ENOMEM;
            goto out;
        }
        s = pre.data;
        n = pre.len;
    }
    rc = split_and_merge(x, s, n, 0);
out:
    rkm_buf_free(&meta);
    rkm_buf_free(&pre);
    return rc;
}

static int is_trim_space(const char *s, size_t n, size_t *len)
{
    uint32_t cp;
    int l = rkm_utf8_decode(s, n, &cp);
    if (l == 0) return 0;
    *len = (size_t)l;
    return (rkm_unicode_flags(cp) & RKM_UC_WS) || cp == 0xFEFF;
}

/* Splits text by the added tokens of trie tr; plain parts go to fn. A
 * token with lstrip/rstrip eats the whitespace next to it. */
static int encode_added(enc_ctx *x, const trie *tr, const char *s, size_t n, int normalized_pass)
{
    const rkm_tokenizer *t = x->t;
    int rc;
    size_t start = 0, i = 0;
    int pending_rstrip = 0;
    while (i <= n) {
        int32_t id = -1;
        size_t m = i < n ? trie_match(t, tr, s + i, n - i, x->parse_special, &id) : 0;
        if (m == 0 && i < n) {
            i++;
            continue;
        }
        /* plain text s[start..i) */
        size_t a = start, b = i;
        size_t l;
        if (pending_rstrip)
            while (a < b && is_trim_space(s + a, b - a, &l)) a += l;
        if (m && t->tok[id].lstrip)
            while (b > a) { /* trim trailing whitespace (scan back to a lead byte) */
                size_t k = b - 1;
                while (k > a && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
                if (!is_trim_space(s + k, b - k, &l)) break;
                b = k;
            }
        if (b > a) {
            if (!normalized_pass && t->has_normalizer) {
                rkm_buf nb = RKM_BUF_INIT;
                if ((rc = rkm_tok__normalize(t, s + a, b - a, &nb))) return rc;
                rc = encode_added(x, &t->trie_norm, nb.data, nb.len, 1);
                rkm_buf_free(&nb);
                if (rc) return rc;
            } else {
                if ((rc = encode_plain(x, s + a, b - a))) return rc;
                x->prev_special = 0;
            }
            if (!normalized_pass) x->section_index++;
        }
        if (m == 0) break;
        if ((rc = rkm_tok__id_push(&x->out, id))) return rc;
        x->prev_special = 1;
        if (!normalized_pass) x->section_index++;
        pending_rstrip = t->tok[id].rstrip;
        i += m;
        start = i;
    }
    return 0;
}

int rkm_tokenizer_encode(const rkm_tokenizer *t, const char *text, size_t len, int32_t *ids, int cap, int add_bos,
                         int parse_special)
{
    if (!t || (!text && len) || cap < 0 || (cap && !ids)) return rkm_err(RKM_EINVAL, "tokenizer: bad arguments to encode");
    if (len > TOK_MAX_TEXT) return rkm_err(RKM_EINVAL, "tokenizer: text of %zu bytes is too large", len);
    size_t bad = rkm_utf8_valid_prefix(text, len);
    if (bad < len) return rkm_err(RKM_EINVAL, "tokenizer: invalid UTF-8 at byte %zu", bad);
    enc_ctx x = {0};
    x.t = t;
    x.parse_special = parse_special;
    x.prev_special = 1;
    int rc = 0;
    if (add_bos && t->add_bos && t->bos >= 0) rc = rkm_tok__id_push(&x.out, t->bos);
    if (!rc) rc = encode_added(&x, &t->trie_raw, text, len, 0);
    if (!rc && add_bos && t->add_eos && t->eos >= 0) rc = rkm_tok__id_push(&x.out, t->eos);
    if (!rc && x.out.n > INT_MAX) rc = rkm_err(RKM_EINVAL, "tokenizer: too many tokens");
    if (!rc) {
        size_t k = x.out.n < (size_t)cap ? x.out.n : (size_t)cap;
        if (k) memcpy(ids, x.out.v, k * sizeof *ids);
        rc = (int)x.out.n;
    } else if (rc == RKM_ENOMEM) {
        rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
    }
    merge_ws_free(&x.mw);
    rkm_tok__pieces_free(&x.pc);
    free(x.out.v);
    return rc;
}
