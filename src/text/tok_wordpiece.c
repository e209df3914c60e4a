/*
 * tok_wordpiece.c - the BERT WordPiece model (tokenizer.json
 * "WordPiece"): greedy longest-match-first over a word, continuation
 * pieces looked up with their prefix ("##"), one unk for a word that
 * cannot be covered or is longer than max_input_chars_per_word.
 *
 * Threads: reads the shared tokenizer only. Ownership: a prefixed lookup
 * key longer than the stack buffer is malloc'd and freed per word.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"

/* WordPiece: greedy longest-match-first over the word s[0..n) (valid
 * UTF-8); every piece after the first is looked up with the continuation
 * prefix. A word of more than wp_max_chars characters, or one with a
 * position where no piece matches, is one unk. Only substrings no longer
 * than the longest token are tried, which gives the references' result
 * (they try every end) in O(n * longest) lookups. */
int rkm_tok__wordpiece_word(const rkm_tokenizer *t, const char *s, size_t n, id_vec *out)
{
    size_t nch = 0;
    for (size_t i = 0; i < n; i++) nch += ((uint8_t)s[i] & 0xC0) != 0x80;
    size_t first = out->n;
    size_t pl = strlen(t->wp_prefix);
    char stack[512];
    size_t need = pl + (size_t)t->wp_max_bytes + 1;
    char *buf = need <= sizeof stack ? stack : malloc(need);
    if (!buf) return RKM_ENOMEM;
    int rc = 0, unknown = nch > (size_t)t->wp_max_chars;
    memcpy(buf, t->wp_prefix, pl);
    for (size_t start = 0; start < n && !unknown && !rc;) {
        size_t end = n - start > (size_t)t->wp_max_bytes ? start + (size_t)t->wp_max_bytes : n;
        int id = -1;
        for (; end > start; end--) {
            if (end < n && ((uint8_t)s[end] & 0xC0) == 0x80) continue; /* not a character boundary */
            size_t l = end - start;
            if (start == 0) id = rkm_tok__lookup(t, s, l);
            else if (pl + l <= (size_t)t->wp_max_bytes) {
                memcpy(buf + pl, s + start, l);
                id = rkm_tok__lookup(t, buf, pl + l);
            }
            if (id >= 0) break;
        }
        if (id < 0) unknown = 1;
        else rc = rkm_tok__id_push(out, id);
        start = end;
    }
    if (buf != stack) free(buf);
    if (rc) return rc;
    if (!unknown) return 0;
    out->n = first;
    if (t->unk < 0) return rkm_err(RKM_EINVAL, "tokenizer: WordPiece model has no unk token for an unknown word");
    return rkm_tok__id_push(out, t->unk);
}
