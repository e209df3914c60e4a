/*
 * buf.h - the one growable byte buffer of rkmojo: text being built
 * (replies, templates, metrics pages, rendered prompts) and byte runs of
 * unknown length. The data is always NUL-terminated (a '\0' after len
 * bytes, not counted), so it can be used as a C string when it holds text.
 *
 * Errors: an allocation failure sets b->oom, after which every append is a
 * no-op; callers check once at the end (rkm_buf_ok) instead of after
 * every append. Threads: a buffer belongs to its creator. Ownership: the
 * buffer owns data until rkm_buf_take hands it to the caller (free()).
 */
#ifndef RKM_UTIL_BUF_H
#define RKM_UTIL_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct rkm_buf {
    char *data;   /* NULL until the first append */
    size_t len;   /* bytes used, excluding the trailing NUL */
    size_t cap;   /* bytes allocated */
    int oom;      /* an allocation failed: contents are incomplete */
} rkm_buf;

#define RKM_BUF_INIT {NULL, 0, 0, 0}

/* Room for extra more bytes (plus the NUL); 0, or -1 (and oom set). */
int rkm_buf_reserve(rkm_buf *b, size_t extra);
void rkm_buf_add(rkm_buf *b, const void *p, size_t n);
void rkm_buf_adds(rkm_buf *b, const char *s);
void rkm_buf_addc(rkm_buf *b, char c);
void rkm_buf_addf(rkm_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void rkm_buf_vaddf(rkm_buf *b, const char *fmt, va_list ap);
/* Drops the first n bytes (n <= len), keeping the rest. */
void rkm_buf_consume(rkm_buf *b, size_t n);
/* Empties the buffer, keeping its memory. */
void rkm_buf_clear(rkm_buf *b);
/* 1 when no allocation failed. */
static inline int rkm_buf_ok(const rkm_buf *b) { return !b->oom; }
/* The data as a malloc'd NUL-terminated string (never NULL unless oom:
 * an empty buffer gives ""); the buffer is left empty. */
char *rkm_buf_take(rkm_buf *b);
void rkm_buf_free(rkm_buf *b);

#endif
