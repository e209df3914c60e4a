/*
 * http_client.h - the CLI's HTTP client (libcurl), for the commands that
 * talk to a running `rkmojo serve`: `chat --url` and `ps`. Requests carry
 * the API key as a Bearer token when one is given; a response body is
 * either returned whole or handed to a callback as it arrives (streams).
 *
 * Threads: the calling thread only; curl_global_init runs once, on first
 * use. Ownership: a returned body is the caller's (free()).
 */
#ifndef RKM_CLI_HTTP_CLIENT_H
#define RKM_CLI_HTTP_CLIENT_H

#include <stddef.h>

/* The server address: url when given, else $RKMOJO_HOST (host:port or a
 * URL), else http://127.0.0.1:8080; no trailing slash. Static storage. */
const char *rkm_http_base(const char *url);

/* GET base+path: *body (malloc'd, NUL-terminated) and *status. 0, or -1
 * with a message in err (connection refused, timeout, ...). */
int rkm_http_get(const char *base, const char *path, const char *api_key, char **body, long *status, char *err,
                 size_t errcap);

/* POST json to base+path; the response body goes to on_data as it comes
 * (on_data returns nonzero to stop the transfer). *status: the HTTP status.
 * cancel: polled while waiting; nonzero aborts. 0 (also when stopped by
 * on_data or cancel), or -1 with a message in err. */
int rkm_http_post(const char *base, const char *path, const char *api_key, const char *json,
                  int (*on_data)(const char *p, size_t n, void *user), void *user, volatile int *cancel,
                  long *status, char *err, size_t errcap);

#endif
