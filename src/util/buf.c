/*
 * buf.c - the growable byte buffer (buf.h). Doubling growth; any thread,
 * one buffer per thread at a time.
 */
#include "util/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rkm_buf_reserve(rkm_buf *b, size_t extra)
{
    if (b->oom) return -1;
    if (extra > (size_t)-1 / 2 - b->len - 1) {
        b->oom = 1;
        return -1;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    b->data[b->len] = 0; /* a fresh buffer is "" from its first reservation */
    return 0;
}

void rkm_buf_add(rkm_buf *b, const void *p, size_t n)
{
    if (rkm_buf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void rkm_buf_adds(rkm_buf *b, const char *s) { rkm_buf_add(b, s, strlen(s)); }

void rkm_buf_addc(rkm_buf *b, char c) { rkm_buf_add(b, &c, 1); }

void rkm_buf_vaddf(rkm_buf *b, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if (rkm_buf_reserve(b, (size_t)n)) return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void rkm_buf_addf(rkm_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rkm_buf_vaddf(b, fmt, ap);
    va_end(ap);
}

void rkm_buf_consume(rkm_buf *b, size_t n)
{
    if (n > b->len) n = b->len;
    if (!n) return;
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = 0;
}

void rkm_buf_clear(rkm_buf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

char *rkm_buf_take(rkm_buf *b)
{
    if (b->oom) {
        rkm_buf_free(b);
        return NULL;
    }
    if (!b->data && rkm_buf_reserve(b, 0)) return NULL;
    char *p = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void rkm_buf_free(rkm_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}
