/*
 * textout.c - rkm_textout (rkmojo.h): generated tokens -> text that is safe
 * to show or send, for the CLI's run/chat and the server alike. Ids go
 * through the tokenizer's streaming decoder (rkm_detok: SentencePiece's
 * leading space, WordPiece joins); the bytes then pass one pipeline:
 * invalid UTF-8 -> U+FFFD, earliest complete stop string cuts the text and
 * ends it, the longest tail that may still become a stop string and an
 * incomplete trailing character are held back.
 *
 * Threads: a textout belongs to the one generation that drives it.
 * Ownership: the textout owns copies of the stop strings, the held bytes
 * and the output buffer whose data the push/flush calls lend to the caller
 * until the next call.
 */
#include <stdlib.h>
#include <string.h>

#include "rkmojo.h"
#include "runtime/tokens.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "util/buf.h"
#include "util/common.h"

#define REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

struct rkm_textout {
    const rkm_tokenizer *tok; /* NULL: bytes only */
    rkm_detok detok;
    char **stop;
    int n_stop;
    int stopped;              /* a stop string matched: nothing more comes out */
    rkm_buf pend;             /* bytes held back (valid UTF-8 but a possible tail) */
    rkm_buf out;              /* what the current call emits */
};

rkm_textout *rkm_textout_new(const rkm_model *m, const char *const *stop, int n_stop)
{
    rkm_textout *t = calloc(1, sizeof *t);
    if (!t) goto oom;
    t->tok = m ? rkm_model_tokenizer(m) : NULL;
    rkm_detok_init(&t->detok);
    if (n_stop > 0 && !(t->stop = calloc((size_t)n_stop, sizeof *t->stop))) goto oom;
    for (int i = 0; i < n_stop; i++) {
        if (!stop[i] || !stop[i][0]) continue; /* an empty stop would stop at once */
        if (!(t->stop[t->n_stop] = strdup(stop[i]))) goto oom;
        t->n_stop++;
    }
    return t;
oom:
    rkm_textout_free(t);
    rkm_err(RKM_ENOMEM, "out of memory");
    return NULL;
}

void rkm_textout_free(rkm_textout *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_stop; i++) free(t->stop[i]);
    free(t->stop);
    rkm_buf_free(&t->pend);
    rkm_buf_free(&t->out);
    free(t);
}

/* Moves n fresh bytes into pend (sanitized up to the last complete
 * character), then emits into out what can no longer be part of a stop
 * string. Returns 1 on a stop, 0, or RKM_ENOMEM. */
static int feed(rkm_textout *t, const char *s, size_t n)
{
    if (t->stopped) return 1;
    /* pend holds valid UTF-8 plus at most an incomplete tail: re-sanitizing
     * from that tail on is enough. */
    size_t done = t->pend.len ? rkm_utf8_complete_prefix(t->pend.data, t->pend.len) : 0;
    rkm_buf raw = RKM_BUF_INIT;
    if (done < t->pend.len) rkm_buf_add(&raw, t->pend.data + done, t->pend.len - done);
    rkm_buf_add(&raw, s, n);
    t->pend.len = done;
    if (raw.len) {
        size_t whole = rkm_utf8_complete_prefix(raw.data, raw.len);
        rkm_utf8_sanitize(&t->pend, raw.data, whole);
        rkm_buf_add(&t->pend, raw.data + whole, raw.len - whole);
    }
    if (!rkm_buf_ok(&raw)) t->pend.oom = 1;
    rkm_buf_free(&raw);
    if (!rkm_buf_ok(&t->pend)) return rkm_err(RKM_ENOMEM, "out of memory");
    const char *p = t->pend.data ? t->pend.data : "";
    size_t np = t->pend.len;

    /* The earliest complete stop string ends the text. */
    size_t cut = np;
    int hit = 0;
    for (int i = 0; i < t->n_stop; i++) {
        const char *f = memmem(p, np, t->stop[i], strlen(t->stop[i]));
        if (f && (size_t)(f - p) < cut) {
            cut = (size_t)(f - p);
            hit = 1;
        }
    }
    if (hit) {
        rkm_buf_add(&t->out, p, cut);
        rkm_buf_clear(&t->pend);
        t->stopped = 1;
        return rkm_buf_ok(&t->out) ? 1 : rkm_err(RKM_ENOMEM, "out of memory");
    }
    /* Hold back the longest tail that is a prefix of a stop string. */
    size_t keep = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stop[i]);
        for (size_t k = RKM_MIN(sl - 1, np); k > keep; k--)
            if (!memcmp(p + np - k, t->stop[i], k)) {
                keep = k;
                break;
            }
    }
    size_t emit = rkm_utf8_complete_prefix(p, np - keep);
    rkm_buf_add(&t->out, p, emit);
    rkm_buf_consume(&t->pend, emit);
    return rkm_buf_ok(&t->out) ? 0 : rkm_err(RKM_ENOMEM, "out of memory");
}

/* Lends the output of this call; rc passes through. */
static int lend(rkm_textout *t, int rc, const char **text, size_t *len)
{
    *text = t->out.data ? t->out.data : "";
    *len = t->out.len;
    return rc;
}

int rkm_textout_push_bytes(rkm_textout *t, const char *bytes, size_t n, const char **text,
                           size_t *len)
{
    rkm_buf_clear(&t->out);
    return lend(t, feed(t, bytes, n), text, len);
}

int rkm_textout_push_token(rkm_textout *t, int32_t id, const char **text, size_t *len)
{
    rkm_buf_clear(&t->out);
    if (t->stopped || !t->tok) return lend(t, t->stopped, text, len);
    char stack[1024], *buf = stack;
    int n = rkm_detok_push(&t->detok, t->tok, id, buf, (int)sizeof stack);
    if (n == RKM_ENOSPC) { /* a very long token: room for 3x its bytes, as rkm_detok asks */
        int need = -rkm_tokenizer_piece(t->tok, id, NULL, 0);
        size_t cap = ((size_t)RKM_MAX(need, 0) + 16) * 3 + 16;
        if (!(buf = malloc(cap))) return lend(t, rkm_err(RKM_ENOMEM, "out of memory"), text, len);
        n = rkm_detok_push(&t->detok, t->tok, id, buf, (int)cap);
    }
    /* An id the vocabulary does not know has no text. */
    int rc = n == RKM_EINVAL ? 0 : n < 0 ? n : feed(t, buf, (size_t)n);
    if (buf != stack) free(buf);
    return lend(t, rc, text, len);
}

int rkm_textout_flush(rkm_textout *t, const char **text, size_t *len)
{
    rkm_buf_clear(&t->out);
    if (t->tok && !t->stopped) {
        char buf[64];
        int n = rkm_detok_flush(&t->detok, buf, (int)sizeof buf);
        int rc = n > 0 ? feed(t, buf, (size_t)n) : 0;
        if (rc) return lend(t, rc, text, len);
    }
    if (!t->stopped) {
        const char *p = t->pend.data ? t->pend.data : "";
        size_t ok = rkm_utf8_complete_prefix(p, t->pend.len);
        rkm_buf_add(&t->out, p, ok);
        if (ok < t->pend.len) rkm_buf_adds(&t->out, REPLACEMENT); /* unfinished at the very end */
    }
    rkm_buf_clear(&t->pend);
    return lend(t, rkm_buf_ok(&t->out) ? t->stopped : rkm_err(RKM_ENOMEM, "out of memory"), text, len);
}
