/*
 * fetch.h - byte ranges of one remote file over HTTP(S) (libcurl), for
 * `rkmojo pull`: the file's size and ETag from a first request, then any
 * range written straight into a local file at a given offset.
 *
 * Only http and https are spoken, redirects included. Requests follow
 * redirects (Hugging Face answers with one to its storage) and send
 * "Authorization: Bearer TOKEN" when a token is given (libcurl drops it
 * when a redirect leaves the host). Where the redirects ended is
 * remembered: later ranges go there directly (the token only if it is the
 * same host) until it answers 401/403/404/410 (a signed URL that expired),
 * and then the file's URL is resolved again. A range is retried
 * after a dropped connection, a stall (no byte for the stall time), a
 * short or overlong answer, or a 408/429/5xx status (Retry-After honoured,
 * capped), continuing from the bytes that arrived; a server that ignores
 * Range, a 4xx, or a file whose size or ETag changed since the first
 * request is an error at once. Errors name the URL (never the token) and
 * the range.
 *
 * rkm_fetch_get reads a whole small file in one request (no ranges).
 *
 * Threads: rkm_fetch_range may be called from several threads at once;
 * each call takes an idle connection from the fetch's pool (kept alive
 * between calls) or opens one. Ownership: rkm_fetch_close frees all.
 */
#ifndef RKM_CONVERT_FETCH_H
#define RKM_CONVERT_FETCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct rkm_fetch rkm_fetch;

typedef struct rkm_fetch_opts {
    const char *token;   /* bearer token, or NULL */
    int attempts;        /* tries per range (0: 6) */
    double stall_s;      /* a transfer with no byte for this long is retried (0: 60) */
    double max_wait_s;   /* longest wait between tries, Retry-After included (0: 30) */
    volatile int *cancel; /* polled during transfers; nonzero: RKM_ECANCELED */
} rkm_fetch_opts;

/* Asks for the first byte of url: its size (Content-Range) and ETag.
 * NULL + rkm_last_error() when the server cannot be reached, answers an
 * error, or does not serve ranges; *rc then gets the RKM_E* code
 * (RKM_ENOENT for a 404). */
rkm_fetch *rkm_fetch_open(const char *url, const rkm_fetch_opts *o, int *rc);
void rkm_fetch_close(rkm_fetch *f);
uint64_t rkm_fetch_size(const rkm_fetch *f);
/* The ETag the server gave ("" if none), quotes and W/ kept. */
const char *rkm_fetch_etag(const rkm_fetch *f);
/* The file's SHA-256 (64 lowercase hex digits) when the server names it
 * (Hugging Face: X-Linked-Etag on the redirect to its storage), else "". */
const char *rkm_fetch_sha256(const rkm_fetch *f);
/* The URL the first request ended at, after redirects. */
const char *rkm_fetch_final_url(const rkm_fetch *f);

/* Writes bytes [off, off+n) of the remote file to fd at fd_off (pwrite).
 * 0, or an RKM_E* code with a message. */
int rkm_fetch_range(rkm_fetch *f, uint64_t off, uint64_t n, int fd, uint64_t fd_off);
/* The same into buf (n bytes). */
int rkm_fetch_range_mem(rkm_fetch *f, uint64_t off, uint64_t n, void *buf);

/* One whole file by GET (an image a client names by URL): http and https
 * only, redirects followed, at most max_bytes (a larger file, or one
 * announced larger, is refused as it arrives), within timeout_s seconds
 * in all. *data (malloc'd, the caller frees) and *len on success; 0, or an
 * RKM_E* code with a message naming the URL without its query. */
int rkm_fetch_get(const char *url, uint64_t max_bytes, double timeout_s, unsigned char **data, size_t *len);

#endif
