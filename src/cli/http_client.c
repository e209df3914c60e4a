/*
 * http_client.c - see http_client.h.
 */
#include "cli/http_client.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "util/buf.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

const char *rkm_http_base(const char *url)
{
    static char buf[512];
    const char *u = url && *url ? url : getenv("RKMOJO_HOST");
    if (!u || !*u) u = "127.0.0.1:8080";
    snprintf(buf, sizeof buf, "%s%s", strstr(u, "://") ? "" : "http://", u);
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '/') buf[--n] = 0;
    return buf;
}

typedef struct {
    int (*on_data)(const char *p, size_t n, void *user);
    void *user;
    rkm_buf *body;
    volatile int *cancel;
    int stopped;
} xfer;

static size_t on_write(char *p, size_t size, size_t n, void *user)
{
    xfer *x = user;
    size_t len = size * n;
    if (x->body) {
        rkm_buf_add(x->body, p, len);
        return rkm_buf_ok(x->body) ? len : 0;
    }
    if (x->on_data && x->on_data(p, len, x->user)) {
        x->stopped = 1;
        return 0; /* curl stops: CURLE_WRITE_ERROR, not an error for us */
    }
    return len;
}

static int on_progress(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    xfer *x = user;
    (void)dt, (void)dn, (void)ut, (void)un;
    if (x->cancel && *x->cancel) {
        x->stopped = 1;
        return 1;
    }
    return 0;
}

static int run(const char *base, const char *path, const char *api_key, const char *json, xfer *x, long *status,
               char *err, size_t errcap)
{
    pthread_once(&g_once, global_init);
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    char url[1024], auth[600];
    snprintf(url, sizeof url, "%s%s", base, path);
    struct curl_slist *hd = NULL;
    if (json) hd = curl_slist_append(hd, "Content-Type: application/json");
    if (api_key && *api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", api_key);
        hd = curl_slist_append(hd, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (json) curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    CURLcode rc = curl_easy_perform(h);
    *status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK && !x->stopped) {
        snprintf(err, errcap, "%s: %s", url, curl_easy_strerror(rc));
        return -1;
    }
    return 0;
}

int rkm_http_get(const char *base, const char *path, const char *api_key, char **body, long *status, char *err,
                 size_t errcap)
{
    rkm_buf b = RKM_BUF_INIT;
    xfer x = {.body = &b};
    int rc = run(base, path, api_key, NULL, &x, status, err, errcap);
    if (!rc && !rkm_buf_ok(&b)) {
        snprintf(err, errcap, "out of memory");
        rc = -1;
    }
    *body = rc ? NULL : rkm_buf_take(&b);
    rkm_buf_free(&b);
    return rc;
}

int rkm_http_post(const char *base, const char *path, const char *api_key, const char *json,
                  int (*on_data)(const char *p, size_t n, void *user), void *user, volatile int *cancel,
                  long *status, char *err, size_t errcap)
{
    xfer x = {.on_data = on_data, .user = user, .cancel = cancel};
    return run(base, path, api_key, json, &x, status, err, errcap);
}
