/*
 * tok_decode.c - ids -> text: a token's raw bytes (byte tokens decoded,
 * SentencePiece's U+2581 -> ' '), the WordPiece decoder (prefix removal,
 * the references' clean-up rewrites), whole-sequence decoding with U+FFFD
 * for invalid UTF-8 (WHATWG's maximal-subpart rule), and the streaming
 * decoder that holds back an unfinished UTF-8 sequence.
 *
 * Threads: the tokenizer is only read; a rkm_detok belongs to one stream.
 * Ownership: the output goes into the caller's buffer; a piece too long
 * for the stack buffers is malloc'd and freed within the call.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"

/* Appends the raw bytes of token id to out (always allocating, so
 * out->data is set even for an empty piece); 0 or RKM_ENOMEM. */
static int piece_append(const rkm_tokenizer *t, int32_t id, rkm_buf *out)
{
    const tok_entry *e = &t->tok[id];
    rkm_buf_add(out, "", 0);
    if (t->model == MODEL_BPE_BYTES || t->model == MODEL_WORDPIECE || e->added) {
        rkm_buf_add(out, e->ibytes, e->ibytes_len);
        return rkm_buf_ok(out) ? 0 : RKM_ENOMEM;
    }
    if (t->llama_gemma4 && e->type == RKM_TOKEN_UNUSED) return 0; /* llama.cpp renders nothing for them */
    if (e->type == RKM_TOKEN_BYTE) {
        int v = rkm_tok__byte_text(e->text, e->text_len); /* the byte its text names, as llama.cpp reads it */
        if (v >= 0) {
            rkm_buf_addc(out, (char)v);
            return rkm_buf_ok(out) ? 0 : RKM_ENOMEM;
        }
        for (int b = 0; b < 256; b++)
            if (t->byte_tok[b] == id) {
                rkm_buf_addc(out, (char)b);
                return rkm_buf_ok(out) ? 0 : RKM_ENOMEM;
            }
    }
    /* SentencePiece: U+2581 stands for a space */
    for (size_t i = 0, run = 0; i <= e->text_len; i++) {
        if (i == e->text_len || (i + 3 <= e->text_len && !memcmp(e->text + i, "\xe2\x96\x81", 3))) {
            rkm_buf_add(out, e->text + run, i - run);
            if (i == e->text_len) break;
            rkm_buf_addc(out, ' ');
            i += 2;
            run = i + 1;
        }
    }
    return rkm_buf_ok(out) ? 0 : RKM_ENOMEM;
}

int rkm_tokenizer_piece(const rkm_tokenizer *t, int32_t id, char *buf, int cap)
{
    if (!t || id < 0 || id >= t->n_vocab) return 0;
    rkm_buf b = RKM_BUF_INIT;
    if (piece_append(t, id, &b)) {
        rkm_buf_free(&b);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    size_t n = b.len;
    int r;
    if (n > (size_t)cap) r = -(int)n;
    else {
        memcpy(buf, b.data, n);
        r = (int)n;
    }
    rkm_buf_free(&b);
    return r;
}

/* One step of WHATWG UTF-8 decoding with replacement: at s[0..n), returns
 * the bytes consumed and writes the output (the sequence or U+FFFD) to
 * out. *incomplete is set when s holds a valid but unfinished prefix
 * reaching the end of the buffer (a streaming decoder waits for more).
 * rkm_utf8_decode only says valid or not; replacement needs the length of
 * the maximal invalid subpart and whether it is an unfinished prefix, so
 * the lead byte's ranges are spelled out here. */
static size_t utf8_step(const unsigned char *s, size_t n, char *out, size_t *out_n, int *incomplete)
{
    *incomplete = 0;
    unsigned char c = s[0];
    if (c < 0x80) {
        out[0] = (char)c;
        *out_n = 1;
        return 1;
    }
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        memcpy(out, "\xef\xbf\xbd", 3);
        *out_n = 3;
        return 1;
    }
    size_t k = 1;
    while (k <= need && k < n) {
        unsigned char b = s[k];
        if (b < lo || b > hi) break;
        lo = 0x80;
        hi = 0xBF;
        k++;
    }
    if (k == need + 1) {
        memcpy(out, s, k);
        *out_n = k;
        return k;
    }
    if (k == n) *incomplete = 1;
    memcpy(out, "\xef\xbf\xbd", 3);
    *out_n = 3;
    return k;
}

/* The WordPiece decoder's text for the index-th token of a sequence: the
 * continuation prefix removed, else a space before it (not the first
 * token); then, with cleanup, the references' clean_up_tokenization
 * rewrites applied to that text. */
static int wp_decode_piece(const rkm_tokenizer *t, int32_t id, int index, rkm_buf *out)
{
    static const char *const cleanup[][2] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    const tok_entry *e = &t->tok[id];
    size_t pl = strlen(t->wp_dec_prefix);
    rkm_buf a = RKM_BUF_INIT;
    if (index > 0 && pl && e->text_len >= pl && !memcmp(e->text, t->wp_dec_prefix, pl)) {
        rkm_buf_add(&a, e->text + pl, e->text_len - pl);
    } else {
        rkm_buf_add(&a, " ", index > 0 ? 1 : 0);
        rkm_buf_add(&a, e->text, e->text_len);
    }
    int rc = rkm_buf_ok(&a) ? 0 : RKM_ENOMEM;
    for (size_t k = 0; t->wp_cleanup && !rc && k < RKM_ARRAY_LEN(cleanup); k++) {
        rkm_buf b = RKM_BUF_INIT;
        rc = rkm_tok__replace_all(a.data, a.len, cleanup[k][0], strlen(cleanup[k][0]), cleanup[k][1],
                                  strlen(cleanup[k][1]), &b);
        rkm_buf_free(&a);
        a = b;
    }
    if (!rc) {
        rkm_buf_add(out, a.data, a.len);
        rc = rkm_buf_ok(out) ? 0 : RKM_ENOMEM;
    }
    rkm_buf_free(&a);
    return rc;
}

int rkm_tokenizer_decode(const rkm_tokenizer *t, const int32_t *ids, int n, char *buf, int cap)
{
    if (!t || n < 0 || (n && !ids) || cap < 0) return rkm_err(RKM_EINVAL, "tokenizer: decode: bad arguments");
    rkm_buf raw = RKM_BUF_INIT;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            rc = rkm_err(RKM_EINVAL, "tokenizer: decode: id %d out of range", (int)ids[i]);
            break;
        }
        if (t->model == MODEL_WORDPIECE) {
            rc = wp_decode_piece(t, ids[i], i, &raw);
            continue;
        }
        if ((rc = piece_append(t, ids[i], &raw))) break;
        /* raw is empty before the first piece, so its first byte is the piece's */
        if (i == 0 && t->strip_leading_space && raw.len && raw.data[0] == ' ' && !t->tok[ids[i]].added)
            rkm_buf_consume(&raw, 1);
    }
    size_t o = 0;
    for (size_t i = 0; i < raw.len && !rc;) {
        char u[4];
        size_t un;
        int inc;
        i += utf8_step((const unsigned char *)raw.data + i, raw.len - i, u, &un, &inc);
        if (buf && o + un <= (size_t)cap) memcpy(buf + o, u, un);
        o += un;
    }
    rkm_buf_free(&raw);
    if (rc) return rc == RKM_ENOMEM ? rkm_err(RKM_ENOMEM, "out of memory") : rc;
    if (o > INT_MAX) return rkm_err(RKM_EINVAL, "tokenizer: decode: output too large");
    return (int)o;
}

void rkm_detok_init(rkm_detok *d) { memset(d, 0, sizeof *d); }

static int detok_drain(rkm_detok *d, const unsigned char *s, size_t n, char *out, int final)
{
    size_t i = 0, o = 0;
    while (i < n) {
        size_t un;
        int inc;
        char u[4];
        size_t k = utf8_step(s + i, n - i, u, &un, &inc);
        if (inc && !final) { /* wait for the rest of the sequence */
            memcpy(d->pend, s + i, n - i);
            d->n_pend = (int)(n - i);
            return (int)o;
        }
        memcpy(out + o, u, un);
        o += un;
        i += k;
    }
    d->n_pend = 0;
    return (int)o;
}

int rkm_detok_push(rkm_detok *d, const rkm_tokenizer *t, int32_t id, char *out, int cap)
{
    if (!d || !t || id < 0 || id >= t->n_vocab) return rkm_err(RKM_EINVAL, "tokenizer: decode: bad id %d", (int)id);
    const tok_entry *e = &t->tok[id];
    rkm_buf pc = RKM_BUF_INIT;
    int rc = t->model == MODEL_WORDPIECE ? wp_decode_piece(t, id, d->n_pushed, &pc) : piece_append(t, id, &pc);
    if (rc) {
        rkm_buf_free(&pc);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    const char *p = pc.data;
    size_t n = pc.len;
    if (d->n_pushed == 0 && t->strip_leading_space && n && p[0] == ' ' && !e->added) {
        p++;
        n--;
    }
    size_t total = (size_t)d->n_pend + n;
    if (total * 3 > (size_t)cap) {
        rc = rkm_err(RKM_ENOSPC, "tokenizer: decode: output buffer too small");
    } else {
        unsigned char *all = malloc(total + 1);
        if (!all) rc = rkm_err(RKM_ENOMEM, "out of memory");
        else {
            memcpy(all, d->pend, (size_t)d->n_pend);
            memcpy(all + d->n_pend, p, n);
            rc = detok_drain(d, all, total, out, 0);
            d->n_pushed++;
            free(all);
        }
    }
    rkm_buf_free(&pc);
    return rc;
}

int rkm_detok_flush(rkm_detok *d, char *out, int cap)
{
    if ((size_t)d->n_pend * 3 > (size_t)cap) return rkm_err(RKM_ENOSPC, "tokenizer: decode: output buffer too small");
    unsigned char tmp[8];
    size_t n = (size_t)d->n_pend;
    memcpy(tmp, d->pend, n);
    return detok_drain(d, tmp, n, out, 1);
}
