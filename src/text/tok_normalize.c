/*
 * tok_normalize.c - the normalizer steps a tokenizer runs before
 * pre-tokenizing: the Unicode forms (unicode.c), SentencePiece charsmaps
 * (charsmap.c), Prepend, Replace (a string, or runs of spaces), Strip,
 * Lowercase, BertNormalizer and llama.cpp's UGM whitespace rules; plus the
 * string replacement the encoder and decoder share.
 *
 * Threads: pure functions of a read-only tokenizer and their input; any
 * thread. Ownership: each step writes into an rkm_buf the caller frees;
 * rkm_tokenizer_normalize hands its result to the caller (free()).
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"

static int buf_status(const rkm_buf *b) { return rkm_buf_ok(b) ? 0 : RKM_ENOMEM; }

int rkm_tok__replace_all(const char *s, size_t n, const char *a, size_t an, const char *b, size_t bn, rkm_buf *out)
{
    size_t i = 0, last = 0;
    while (i + an <= n) {
        if (memcmp(s + i, a, an) == 0) {
            rkm_buf_add(out, s + last, i - last);
            rkm_buf_add(out, b, bn);
            i += an;
            last = i;
        } else {
            i++;
        }
    }
    rkm_buf_add(out, s + last, n - last);
    return buf_status(out);
}

/* Appends code point c as UTF-8. */
static void buf_add_cp(rkm_buf *b, uint32_t c)
{
    char u[4];
    rkm_buf_add(b, u, (size_t)rkm_utf8_encode(c, u));
}

/* Runs of two or more spaces -> b (Replace with the Regex " {2,}"). */
static int replace_space_runs(const char *s, size_t n, const char *b, size_t bn, rkm_buf *out)
{
    for (size_t i = 0; i < n && rkm_buf_ok(out);) {
        size_t j = i;
        while (j < n && s[j] == ' ') j++;
        if (j - i >= 2) rkm_buf_add(out, b, bn);
        else if (j > i) rkm_buf_add(out, " ", 1);
        else {
            while (j < n && s[j] != ' ') j++;
            rkm_buf_add(out, s + i, j - i);
        }
        i = j;
    }
    rkm_buf_add(out, "", 0);
    return buf_status(out);
}

/* Strip: drops White_Space at the start (flags & 1) and/or end (flags & 2). */
static int strip_ws(const char *s, size_t n, int flags, rkm_buf *out)
{
    size_t a = 0, b = n;
    while ((flags & 1) && a < b) {
        uint32_t c;
        int l = rkm_utf8_decode(s + a, b - a, &c);
        if (!l || !(rkm_unicode_flags(c) & RKM_UC_WS)) break;
        a += (size_t)l;
    }
    if (flags & 2)
        while (b > a) {
            size_t k = b - 1;
            while (k > a && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
            uint32_t c;
            if (!rkm_utf8_decode(s + k, b - k, &c) || !(rkm_unicode_flags(c) & RKM_UC_WS)) break;
            b = k;
        }
    rkm_buf_add(out, s + a, b - a);
    return buf_status(out);
}

static int lowercase(const char *s, size_t n, rkm_buf *out)
{
    rkm_buf_add(out, "", 0);
    for (size_t i = 0; i < n && rkm_buf_ok(out);) {
        size_t j = i;
        while (j < n && (uint8_t)s[j] < 0x80 && !(s[j] >= 'A' && s[j] <= 'Z')) j++;
        if (j > i) { /* ASCII without capitals: as is */
            rkm_buf_add(out, s + i, j - i);
            i = j;
            continue;
        }
        uint32_t c, lo[2];
        int l = rkm_utf8_decode(s + i, n - i, &c);
        if (l == 0) {
            c = 0xFFFD;
            l = 1;
        }
        int k = rkm_unicode_lower(c, lo);
        for (int q = 0; q < k; q++) buf_add_cp(out, lo[q]);
        i += (size_t)l;
    }
    return buf_status(out);
}

/* The CJK ideograph blocks BERT pads with spaces (its own list, kept by
 * every implementation). */
static int bert_is_chinese(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* BertNormalizer, in the Rust reference's order: clean_text (drop NUL,
 * U+FFFD and control/format/unassigned/private-use characters except
 * \t\n\r; whitespace -> ' '), CJK ideographs padded with spaces, accents
 * stripped (NFD, then nonspacing marks dropped), lowercase. */
static int bert_normalize(const char *s, size_t n, int flags, rkm_buf *out)
{
    rkm_buf a = RKM_BUF_INIT;
    rkm_buf_add(&a, "", 0);
    for (size_t i = 0; i < n && rkm_buf_ok(&a);) {
        uint32_t c;
        int l = rkm_utf8_decode(s + i, n - i, &c);
        if (l == 0) {
            c = 0xFFFD;
            l = 1;
        }
        i += (size_t)l;
        unsigned fl = rkm_unicode_flags(c);
        int ws = (fl & RKM_UC_WS) || c == '\t' || c == '\n' || c == '\r';
        if (flags & BERT_CLEAN) {
            if (c == 0 || c == 0xFFFD || ((fl & RKM_UC_C) && c != '\t' && c != '\n' && c != '\r')) continue;
            if (ws) c = ' ';
        }
        if ((flags & BERT_CHINESE) && bert_is_chinese(c)) {
            rkm_buf_add(&a, " ", 1);
            buf_add_cp(&a, c);
            rkm_buf_add(&a, " ", 1);
        } else {
            buf_add_cp(&a, c);
        }
    }
    int rc = buf_status(&a);
    if (!rc && (flags & BERT_STRIP_ACCENTS)) {
        size_t dn;
        char *d = rkm_unicode_normalize(a.data, a.len, RKM_NF_NFD, &dn);
        if (!d) rc = RKM_ENOMEM;
        size_t w = 0;
        for (size_t i = 0; !rc && i < dn;) {
            uint32_t c;
            int l = rkm_utf8_decode(d + i, dn - i, &c);
            if (l == 0) l = 1;
            if (!rkm_unicode_is_mn(c)) memmove(d + w, d + i, (size_t)l), w += (size_t)l;
            i += (size_t)l;
        }
        if (!rc) {
            rkm_buf_free(&a);
            a.data = d;
            a.len = w;
            a.cap = dn + 1;
            a.data[w] = 0;
        }
    }
    if (!rc && (flags & BERT_LOWER)) rc = lowercase(a.data, a.len, out);
    else if (!rc) {
        rkm_buf_add(out, a.data, a.len);
        rc = buf_status(out);
    }
    rkm_buf_free(&a);
    return rc;
}


/* llama.cpp's UGM whitespace handling after the charsmap (its version of
 * SentencePiece's normalizer): spaces become U+2581; with the prefix flag
 * one U+2581 goes before the first non-space character (none if there is
 * none); with the merge flag spaces are dropped and every word (a run of
 * non-spaces) gets one U+2581 before it. */
static int spm_whitespace(const char *s, size_t n, int flags, rkm_buf *out)
{
    static const char sp[] = "\xe2\x96\x81";
    int prefix = flags & 1, merge = flags & 2;
    int in_word = 0, prefixed = 0;
    rkm_buf_add(out, "", 0);
    for (size_t i = 0; i < n && rkm_buf_ok(out); i++) {
        if (s[i] != ' ') {
            if (!in_word) {
                in_word = 1;
                if ((prefix && !prefixed) || merge) {
                    rkm_buf_add(out, sp, 3);
                    prefixed = 1;
                }
            }
            rkm_buf_add(out, s + i, 1);
        } else {
            in_word = 0;
            if (!merge) rkm_buf_add(out, sp, 3);
        }
    }
    return buf_status(out);
}

int rkm_tok__normalize(const rkm_tokenizer *t, const char *s, size_t n, rkm_buf *res)
{
    rkm_buf cur = RKM_BUF_INIT;
    rkm_buf_add(&cur, s, n);
    int rc = buf_status(&cur);
    for (int k = 0; k < t->n_norm && !rc; k++) {
        const norm_step *st = &t->norm[k];
        rkm_buf nx = RKM_BUF_INIT;
        switch (st->op) {
        case NORM_NFC:
        case NORM_NFD:
        case NORM_NFKC:
        case NORM_NFKD: {
            size_t len;
            char *p = rkm_unicode_normalize(cur.data, cur.len, st->op - NORM_NFC, &len);
            if (!p) rc = RKM_ENOMEM;
            else {
                nx.data = p;
                nx.len = len;
                nx.cap = len + 1;
            }
            break;
        }
        case NORM_PREPEND:
            rkm_buf_add(&nx, st->a, st->a_len);
            rkm_buf_add(&nx, cur.data, cur.len);
            rc = buf_status(&nx);
            break;
        case NORM_REPLACE: rc = rkm_tok__replace_all(cur.data, cur.len, st->a, st->a_len, st->b, st->b_len, &nx); break;
        case NORM_REPLACE_SPACES: rc = replace_space_runs(cur.data, cur.len, st->b, st->b_len, &nx); break;
        case NORM_STRIP: rc = strip_ws(cur.data, cur.len, st->flags, &nx); break;
        case NORM_LOWERCASE: rc = lowercase(cur.data, cur.len, &nx); break;
        case NORM_BERT: rc = bert_normalize(cur.data, cur.len, st->flags, &nx); break;
        case NORM_PRECOMPILED: {
            char *p;
            size_t len;
            if (!(rc = rkm_charsmap_normalize(st->cmap, cur.data, cur.len, &p, &len))) {
                nx.data = p;
                nx.len = len;
                nx.cap = len + 1;
            }
            break;
        }
        case NORM_SPM_WS: rc = spm_whitespace(cur.data, cur.len, st->flags, &nx); break;
        default: rc = RKM_EINVAL; break;
        }
        rkm_buf_free(&cur);
        cur = nx;
    }
    if (rc) {
        rkm_buf_free(&cur);
        return rc;
    }
    *res = cur;
    return 0;
}

int rkm_tokenizer_normalize(const rkm_tokenizer *t, const char *s, size_t n, char **out, size_t *out_len)
{
    if (!t || (!s && n) || !out || !out_len) return rkm_err(RKM_EINVAL, "tokenizer: bad arguments to normalize");
    if (rkm_utf8_valid_prefix(s, n) < n) return rkm_err(RKM_EINVAL, "tokenizer: normalize: invalid UTF-8");
    rkm_buf r = RKM_BUF_INIT;
    int rc = rkm_tok__normalize(t, s ? s : "", n, &r);
    if (rc) return rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
    size_t len = r.len;
    char *p = rkm_buf_take(&r); /* "" when the normalizers left nothing */
    if (!p) return rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
    *out = p;
    *out_len = len;
    return 0;
}
