/*
 * tok_unigram.c - the SentencePiece Unigram model (tokenizer.json
 * "Unigram", GGUF "t5"): Viterbi segmentation of a word over byte
 * positions by the sum of piece scores, runs of unknown characters fused
 * into one unk (or their <0xXX> byte tokens with byte_fallback), and the
 * word boundaries a splitting Metaspace implies.
 *
 * Threads: reads the shared tokenizer; the lattice lives in the caller's
 * merge_ws. Ownership: the lattice arrays belong to that merge_ws, freed
 * once per encode call.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"

/* Unigram: emits a run of unknown characters s[0..n) (one or more
 * lattice nodes of the unk id, fused as both references do): the run's
 * own piece if it is one, else its bytes' <0xXX> tokens when byte_fallback
 * is set and all exist, else one unk. */
static int unigram_emit_unknown(const rkm_tokenizer *t, const char *s, size_t n, id_vec *out)
{
    int id = rkm_tok__lookup(t, s, n);
    if (id >= 0 && id < t->n_pieces) return rkm_tok__id_push(out, id);
    if (t->byte_fallback) {
        int all = 1;
        for (size_t i = 0; i < n; i++) all &= t->byte_tok[(uint8_t)s[i]] >= 0;
        if (all) {
            int rc;
            for (size_t i = 0; i < n; i++)
                if ((rc = rkm_tok__id_push(out, t->byte_tok[(uint8_t)s[i]]))) return rc;
            return 0;
        }
    }
    return rkm_tok__id_push(out, t->unk);
}

/* Unigram segmentation of one word s[0..n) (valid UTF-8): the path of
 * pieces with the highest sum of scores (Viterbi over byte positions).
 * Nodes are considered by start position, then by length, and a later
 * node replaces the best one ending at the same position only when its
 * score is strictly higher: the references' tie rule. A character that
 * starts no one-character piece gets an unk node scored unk_score; the
 * unk piece itself also scores unk_score when matched from the text (as
 * @huggingface/tokenizers does). */
static int unigram_word(const rkm_tokenizer *t, merge_ws *w, const char *s, size_t n, id_vec *out)
{
    int rc;
    if (n + 1 > w->vcap) {
        size_t cap = n + 1 + n / 2 + 16;
        double *sc = realloc(w->vscore, cap * sizeof *sc);
        if (sc) w->vscore = sc;
        int32_t *fr = realloc(w->vfrom, cap * sizeof *fr);
        if (fr) w->vfrom = fr;
        int32_t *vi = realloc(w->vid, cap * sizeof *vi);
        if (vi) w->vid = vi;
        if (!sc || !fr || !vi) return RKM_ENOMEM;
        w->vcap = cap;
    }
    if (n > INT32_MAX - 1) return rkm_err(RKM_EINVAL, "tokenizer: word too long");
    for (size_t i = 0; i <= n; i++) w->vfrom[i] = -1;
    w->vscore[0] = 0;
    w->vfrom[0] = 0;
    for (size_t b = 0; b < n;) {
        size_t mblen = (size_t)rkm_utf8_seq_len((uint8_t)s[b]);
        if (mblen == 0 || b + mblen > n) mblen = 1;
        double base = w->vscore[b];
        int single = 0;
        size_t lim = n - b < (size_t)t->max_piece_bytes ? n - b : (size_t)t->max_piece_bytes;
        for (size_t l = 1; l <= lim; l++) {
            if (b + l < n && ((uint8_t)s[b + l] & 0xC0) == 0x80) continue; /* not a character end */
            int id = rkm_tok__lookup(t, s + b, l);
            if (id < 0 || id >= t->n_pieces) continue;
            if (t->ugm_gguf && (t->tok[id].type == RKM_TOKEN_CONTROL || t->tok[id].type == RKM_TOKEN_UNKNOWN)) continue;
            double sc = base + (id == t->unk ? t->unk_score : t->uscore[id]);
            if (w->vfrom[b + l] < 0 || sc > w->vscore[b + l]) {
                w->vscore[b + l] = sc;
                w->vfrom[b + l] = (int32_t)b;
                w->vid[b + l] = id;
            }
            if (l == mblen) single = 1;
        }
        if (!single) {
            if (t->unk < 0)
                return rkm_err(RKM_EINVAL, "tokenizer: Unigram model has no unk_id for an unknown character");
            double sc = base + t->unk_score;
            if (w->vfrom[b + mblen] < 0 || sc > w->vscore[b + mblen]) {
                w->vscore[b + mblen] = sc;
                w->vfrom[b + mblen] = (int32_t)b;
                w->vid[b + mblen] = t->unk;
            }
        }
        b += mblen;
    }
    /* Backtrack: the path's nodes, last first. Reuse start/len/id of the
     * merge scratch for them (n nodes at most). */
    if ((rc = rkm_tok__ws_reserve(w, n))) return rc;
    size_t m = 0;
    for (size_t e = n; e > 0;) {
        size_t b = (size_t)w->vfrom[e];
        w->start[m] = (uint32_t)b;
        w->len[m] = (uint32_t)(e - b);
        w->id[m] = w->vid[e];
        m++;
        e = b;
    }
    for (size_t k = m; k-- > 0;) {
        if (w->id[k] != t->unk) {
            if ((rc = rkm_tok__id_push(out, w->id[k]))) return rc;
            continue;
        }
        size_t j = k; /* a run of unk nodes k, k-1, ..., j */
        while (j > 0 && w->id[j - 1] == t->unk) j--;
        size_t rs = w->start[k], re = w->start[j] + w->len[j];
        if ((rc = unigram_emit_unknown(t, s + rs, re - rs, out))) return rc;
        k = j;
    }
    return 0;
}

/* Unigram word: with a splitting Metaspace, each replacement character
 * starts a new word ("a▁▁b" -> "a", "▁", "▁b"), as the Rust reference
 * does; segmentation never crosses those boundaries. */
int rkm_tok__unigram_words(const rkm_tokenizer *t, merge_ws *w, const char *s, size_t n, id_vec *out)
{
    if (!t->metaspace || !t->metaspace_split) return unigram_word(t, w, s, n, out);
    size_t rl = strlen(t->metaspace_rep), start = 0;
    for (size_t i = 1; rl && i + rl <= n; i++) {
        if (memcmp(s + i, t->metaspace_rep, rl) != 0) continue;
        int rc = unigram_word(t, w, s + start, i - start, out);
        if (rc) return rc;
        start = i;
        i += rl - 1;
    }
    return unigram_word(t, w, s + start, n - start, out);
}
