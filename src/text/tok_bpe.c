/*
 * tok_bpe.c - the merging models: byte-level BPE and BPE over characters
 * (ranks from the merges list; GGUF gemma4 with llama.cpp's rules for
 * newline runs and unknown symbols) and llama.cpp's SentencePiece BPE
 * (merges by the score of the merged token). A word's symbols are a
 * linked list; candidate pairs wait in a binary heap ordered by (rank or
 * -score, position), so a word of n symbols costs O(n log n).
 *
 * Threads: reads the shared tokenizer; all state is in the caller's
 * merge_ws. Ownership: the scratch (symbols, heap) belongs to the
 * caller's merge_ws, freed once per encode call.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"

/* Order-preserving map of a float to uint32, reversed (higher scores
 * first in a min-heap). */
static uint32_t score_key(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~u;
}

static int heap_push(heap *h, cand c)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        cand *nv = realloc(h->v, cap * sizeof *nv);
        if (!nv) return RKM_ENOMEM;
        h->v = nv;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (c.key >= h->v[p].key) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = c;
    return 0;
}

static cand heap_pop(heap *h)
{
    cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= n) break;
        if (l + 1 < n && h->v[l + 1].key < h->v[l].key) m = l + 1;
        if (h->v[m].key >= last.key) break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (n) h->v[i] = last;
    return top;
}

static int try_pair(const rkm_tokenizer *t, merge_ws *w, const char *s, int32_t l)
{
    if (l < 0) return 0;
    int32_t r = w->next[l];
    if (r < 0) return 0;
    uint32_t pri;
    int32_t result = -1;
    if (t->model == MODEL_SPM) {
        result = rkm_tok__lookup(t, s + w->start[l], w->len[l] + w->len[r]);
        if (result < 0) return 0;
        pri = score_key(t->tok[result].score);
    } else {
        if (w->id[l] < 0 || w->id[r] < 0) return 0;
        int rank = rkm_tok__pair_get(&t->merges, w->id[l], w->id[r], &result);
        if (rank < 0) return 0;
        pri = (uint32_t)rank;
    }
    cand c = {((uint64_t)pri << 32) | (uint32_t)l, (uint32_t)r, result};
    return heap_push(&w->h, c);
}

/* Emits the ids of symbol text s[0..n) that is not itself a token. */
static int emit_unknown(const rkm_tokenizer *t, const char *s, size_t n, id_vec *out)
{
    int rc;
    if (t->llama_gemma4) {
        for (size_t i = 0; i < n; i++)
            if (t->byte_tok[(uint8_t)s[i]] >= 0 && (rc = rkm_tok__id_push(out, t->byte_tok[(uint8_t)s[i]]))) return rc;
        return 0;
    }
    int fallback = t->model == MODEL_SPM || t->byte_fallback || t->model == MODEL_BPE_BYTES;
    if (fallback) {
        int all = 1;
        for (size_t i = 0; i < n; i++) all &= t->byte_tok[(uint8_t)s[i]] >= 0;
        if (all) {
            for (size_t i = 0; i < n; i++)
                if ((rc = rkm_tok__id_push(out, t->byte_tok[(uint8_t)s[i]]))) return rc;
            return 0;
        }
    }
    return t->unk >= 0 ? rkm_tok__id_push(out, t->unk) : 0;
}

/* Merges one word s[0..n) (BPE or SentencePiece BPE) and appends its ids. */
int rkm_tok__bpe_word(const rkm_tokenizer *t, merge_ws *w, const char *s, size_t n, id_vec *out)
{
    int rc;
    if (n == 0) return 0;
    if (t->llama_gemma4) { /* a run of newlines that is a token: that token, unmerged */
        size_t k = 0;
        while (k < n && s[k] == '\n') k++;
        int id = k == n ? rkm_tok__lookup(t, s, n) : -1;
        if (id >= 0) return rkm_tok__id_push(out, id);
    }
    if (t->ignore_merges || n == 1) {
        int id = rkm_tok__lookup(t, s, n);
        if (id >= 0 && (t->ignore_merges || t->model == MODEL_BPE_BYTES)) return rkm_tok__id_push(out, id);
    }
    if ((rc = rkm_tok__ws_reserve(w, n))) return rc;
    /* initial symbols: bytes (byte-level) or UTF-8 characters */
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t l = 1;
        if (t->model != MODEL_BPE_BYTES) {
            l = (size_t)rkm_utf8_seq_len((uint8_t)s[i]);
            if (l == 0 || i + l > n) l = 1;
        }
        w->start[m] = (uint32_t)i;
        w->len[m] = (uint32_t)l;
        w->prev[m] = (int32_t)m - 1;
        w->next[m] = i + l < n ? (int32_t)m + 1 : -1;
        w->id[m] = t->model == MODEL_BPE_BYTES ? t->byte_tok[(uint8_t)s[i]] : rkm_tok__lookup(t, s + i, l);
        m++;
        i += l;
    }
    w->h.n = 0;
    for (size_t k = 0; k + 1 < m; k++)
        if ((rc = try_pair(t, w, s, (int32_t)k))) return rc;
    while (w->h.n) {
        cand c = heap_pop(&w->h);
        uint32_t l = (uint32_t)c.key, r = c.right;
        /* Stale? The left symbol only changes by absorbing its right
         * neighbour (then next[l] != r) or by being absorbed (len 0); the
         * right one may have grown, which the length of the result (the
         * two symbols' text) shows, since symbols never shrink. */
        int32_t result = c.result;
        if (w->len[l] == 0 || w->next[l] != (int32_t)r || w->len[l] + w->len[r] != t->tok[result].ibytes_len)
            continue;
        /* merge right into left */
        w->len[l] += w->len[r];
        w->len[r] = 0;
        w->id[l] = result;
        w->next[l] = w->next[r];
        if (w->next[l] >= 0) w->prev[w->next[l]] = (int32_t)l;
        if ((rc = try_pair(t, w, s, w->prev[l]))) return rc;
        if ((rc = try_pair(t, w, s, (int32_t)l))) return rc;
    }
    for (int32_t k = 0; k >= 0; k = w->next[k]) {
        int32_t id = w->id[k];
        if (t->model == MODEL_SPM && id < 0) id = rkm_tok__lookup(t, s + w->start[k], w->len[k]);
        if (id >= 0) rc = rkm_tok__id_push(out, id);
        else rc = emit_unknown(t, s + w->start[k], w->len[k], out);
        if (rc) return rc;
    }
    return 0;
}
