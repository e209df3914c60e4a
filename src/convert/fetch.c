/*
 * fetch.c - see fetch.h.
 */
#include "convert/fetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util/common.h"

#define FETCH_POOL 16

struct rkm_fetch {
    char *url;      /* as given */
    char *shown;    /* for messages: the URL without its query */
    char *final_url;
    char *auth;     /* "Authorization: Bearer ..." or NULL */
    /* Where the redirects of the last resolution ended (Hugging Face's
     * signed storage URL): ranges go there directly, without the round
     * trip, while it answers; a 401/403/404/410 from it (expired) sends
     * the next try to url again, which resolves anew. Guarded by mu. */
    char *direct;
    int direct_same_host; /* it is url's scheme, host and port: the token may go there too */
    rkm_fetch_opts o;
    uint64_t size;
    char etag[256];
    char sha256[65]; /* Hugging Face's X-Linked-Etag when it is a SHA-256 */
    pthread_mutex_t mu; /* guards idle, n_idle, direct */
    CURL *idle[FETCH_POOL];
    int n_idle;
};

/* One transfer's state, seen by curl's callbacks. */
typedef struct {
    rkm_fetch *f;
    int fd;
    uint8_t *mem;     /* or the bytes go here (fd -1) */
    uint64_t fd_off;  /* where this transfer's first byte goes (in fd or mem) */
    uint64_t want;    /* bytes asked */
    uint64_t got;     /* bytes written */
    int checked;      /* the response's status and headers were checked */
    /* the current response's headers (reset at each status line) */
    int has_range;
    uint64_t range_start, range_total;
    char etag[256];
    char linked[80];  /* X-Linked-Etag of any response on the way (kept across redirects) */
    double retry_after;
    /* why the transfer was stopped by a callback: 0 none, else an RKM_E* */
    int stop;
    int retry_stop;   /* the stop may be retried */
    char msg[1200];
} xfer;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *user)
{
    xfer *x = user;
    size_t len = size * n;
    char line[512];
    size_t k = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, p, k);
    line[k] = 0;
    trim(line);
    if (!strncmp(line, "HTTP/", 5)) { /* a new response (after a redirect or a 100) */
        x->has_range = 0;
        x->etag[0] = 0;
        x->retry_after = -1;
        return len;
    }
    char *colon = strchr(line, ':');
    if (!colon) return len;
    *colon = 0;
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    if (!strcasecmp(line, "content-range")) {
        unsigned long long a, b, t;
        if (sscanf(v, "bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
            x->has_range = 1;
            x->range_start = a;
            x->range_total = t;
        }
    } else if (!strcasecmp(line, "etag")) {
        snprintf(x->etag, sizeof x->etag, "%s", v);
    } else if (!strcasecmp(line, "x-linked-etag")) {
        snprintf(x->linked, sizeof x->linked, "%s", v);
    } else if (!strcasecmp(line, "retry-after")) {
        char *end;
        double s = strtod(v, &end);
        if (end != v && s >= 0) x->retry_after = s;
    }
    return len;
}

/* The first body byte of a response: its status and headers must be a
 * range of the file seen at open. */
static int check_response(xfer *x, CURL *h, uint64_t off)
{
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    x->checked = 1;
    if (code != 206) {
        if (code == 200) {
            x->stop = RKM_EUNSUPPORTED;
            snprintf(x->msg, sizeof x->msg, "%s: the server does not serve byte ranges (200 to a Range request)",
                     x->f->shown);
            return -1;
        }
        return 0; /* an error status: its body is not ours; judged after the transfer */
    }
    if (!x->has_range || x->range_start != off) {
        x->stop = RKM_EIO;
        x->retry_stop = 1;
        snprintf(x->msg, sizeof x->msg, "%s: answered bytes from %llu to a request from %llu", x->f->shown,
                 (unsigned long long)x->range_start, (unsigned long long)off);
        return -1;
    }
    rkm_fetch *f = x->f;
    if (f->size && x->range_total != f->size) {
        x->stop = RKM_ECHECKSUM;
        snprintf(x->msg, sizeof x->msg, "%s: the file changed on the server (%llu bytes, now %llu)", f->shown,
                 (unsigned long long)f->size, (unsigned long long)x->range_total);
        return -1;
    }
    if (f->etag[0] && x->etag[0] && strcmp(f->etag, x->etag)) {
        x->stop = RKM_ECHECKSUM;
        snprintf(x->msg, sizeof x->msg, "%s: the file changed on the server (ETag %s, now %s)", f->shown, f->etag,
                 x->etag);
        return -1;
    }
    return 0;
}

typedef struct {
    xfer *x;
    CURL *h;
    uint64_t off;
} write_ctx;

static size_t on_write(char *p, size_t size, size_t n, void *user)
{
    write_ctx *w = user;
    xfer *x = w->x;
    size_t len = size * n;
    if (!x->checked && check_response(x, w->h, w->off)) return 0;
    long code = 0;
    curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &code);
    if (code != 206) return len; /* an error page: dropped */
    if (x->got + len > x->want) {
        x->stop = RKM_EIO;
        x->retry_stop = 1;
        snprintf(x->msg, sizeof x->msg, "%s: more bytes than the %llu asked from offset %llu", x->f->shown,
                 (unsigned long long)x->want, (unsigned long long)w->off);
        return 0;
    }
    if (x->mem) {
        memcpy(x->mem + x->fd_off + x->got, p, len);
    } else if (x->fd >= 0) {
        int rc = rkm_pwrite_all(x->fd, p, len, x->fd_off + x->got, "pull");
        if (rc) {
            x->stop = rc;
            snprintf(x->msg, sizeof x->msg, "%s", rkm_last_error());
            return 0;
        }
    }
    x->got += len;
    return len;
}

static int on_progress(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    xfer *x = user;
    (void)dt, (void)dn, (void)ut, (void)un;
    if (x->f->o.cancel && *x->f->o.cancel) {
        x->stop = RKM_ECANCELED;
        snprintf(x->msg, sizeof x->msg, "canceled");
        return 1;
    }
    return 0;
}

static CURL *take(rkm_fetch *f)
{
    CURL *h = NULL;
    pthread_mutex_lock(&f->mu);
    if (f->n_idle > 0) h = f->idle[--f->n_idle];
    pthread_mutex_unlock(&f->mu);
    return h ? h : curl_easy_init();
}

static void give(rkm_fetch *f, CURL *h)
{
    pthread_mutex_lock(&f->mu);
    if (f->n_idle < FETCH_POOL) {
        f->idle[f->n_idle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&f->mu);
    if (h) curl_easy_cleanup(h);
}

/* Sleeps s seconds in short steps, polling cancel. */
static int wait_s(rkm_fetch *f, double s)
{
    for (double t = 0; t < s; t += 0.05) {
        if (f->o.cancel && *f->o.cancel) return RKM_ECANCELED;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* One request for [off, off+n); x collects what happened. */
static CURLcode request(rkm_fetch *f, CURL *h, xfer *x, const char *url, int auth, uint64_t off, uint64_t n,
                        long *code)
{
    char range[64];
    snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)off, (unsigned long long)(off + n - 1));
    curl_easy_reset(h);
    struct curl_slist *hd = NULL;
    if (f->auth && auth) hd = curl_slist_append(hd, f->auth);
    write_ctx w = {x, h, off};
    x->retry_after = -1;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_RANGE, range);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https"); /* never file://, ftp://, ... */
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(f->o.stall_s + 0.5));
    curl_easy_setopt(h, CURLOPT_USERAGENT, "rkmojo/" RKM_VERSION_STRING);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    CURLcode res = curl_easy_perform(h);
    *code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
    curl_slist_free_all(hd);
    return res;
}

static int transient_status(long code) { return code == 408 || code == 429 || (code >= 500 && code <= 599); }

/* scheme://host:port of a URL into out ("" if it does not parse). */
static void origin_of(const char *url, char *out, size_t cap)
{
    out[0] = 0;
    CURLU *u = curl_url();
    char *sc = NULL, *host = NULL, *port = NULL;
    if (u && !curl_url_set(u, CURLUPART_URL, url, 0) && !curl_url_get(u, CURLUPART_SCHEME, &sc, 0) &&
        !curl_url_get(u, CURLUPART_HOST, &host, 0) && !curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT))
        snprintf(out, cap, "%s://%s:%s", sc, host, port);
    curl_free(sc);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
}

/* After an answer from url itself: where its redirects ended becomes the
 * direct URL (none if there were none). */
static void set_direct(rkm_fetch *f, CURL *h)
{
    char *eff = NULL;
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eff);
    char *d = eff && strcmp(eff, f->url) ? strdup(eff) : NULL;
    char a[600], b[600];
    origin_of(f->url, a, sizeof a);
    if (d) origin_of(d, b, sizeof b);
    pthread_mutex_lock(&f->mu);
    free(f->direct);
    f->direct = d;
    f->direct_same_host = d && a[0] && !strcmp(a, b);
    pthread_mutex_unlock(&f->mu);
}

/* [off, off+n) to fd at fd_off, with the retries fetch.h describes. */
static int get_range(rkm_fetch *f, uint64_t off, uint64_t n, int fd, uint8_t *mem, uint64_t fd_off, xfer *first)
{
    CURL *h = take(f);
    if (!h) return rkm_err(RKM_ENOMEM, "out of memory");
    uint64_t got = 0;
    char last[1300] = "";
    int rc = RKM_EIO, expired = 0;
    for (int attempt = 1; attempt <= f->o.attempts; attempt++) {
        xfer x = {.f = f, .fd = fd, .mem = mem, .fd_off = fd_off + got, .want = n - got, .retry_after = -1};
        long code = 0;
        char direct[2048] = "";
        int same_host = 0;
        pthread_mutex_lock(&f->mu);
        if (f->direct && strlen(f->direct) < sizeof direct) {
            snprintf(direct, sizeof direct, "%s", f->direct);
            same_host = f->direct_same_host;
        }
        pthread_mutex_unlock(&f->mu);
        CURLcode res = request(f, h, &x, direct[0] ? direct : f->url, direct[0] ? same_host : 1, off + got, n - got, &code);
        got += x.got;
        if (first) *first = x;
        char *eff = NULL;
        curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eff);
        const int via_redirect = direct[0] || (eff && strcmp(eff, f->url));
        if (via_redirect && res == CURLE_OK && (code == 401 || code == 403 || code == 404 || code == 410)) {
            /* the storage URL expired: resolve the file's URL again */
            pthread_mutex_lock(&f->mu);
            if (f->direct && !strcmp(f->direct, direct)) {
                free(f->direct);
                f->direct = NULL;
            }
            pthread_mutex_unlock(&f->mu);
            attempt--;
            if (++expired > 8) {
                rc = rkm_err(RKM_EIO, "%s: its storage URL keeps answering HTTP %ld", f->shown, code);
                give(f, h);
                return rc;
            }
            continue;
        }
        if (!direct[0] && code >= 200 && code < 300) set_direct(f, h);
        if (got == n && res == CURLE_OK && code == 206) {
            rc = 0;
            break;
        }
        if (x.stop && !x.retry_stop) {
            rc = rkm_err(x.stop, "%s", x.msg);
            give(f, h);
            return rc;
        }
        double wait = 0.25 * (double)(1u << (attempt < 8 ? attempt - 1 : 7));
        if (x.stop) {
            snprintf(last, sizeof last, "%s", x.msg);
        } else if (res != CURLE_OK) {
            snprintf(last, sizeof last, "%s: %s", f->shown, curl_easy_strerror(res));
        } else if (code == 206) {
            snprintf(last, sizeof last, "%s: the answer ended after %llu of %llu bytes from offset %llu", f->shown,
                     (unsigned long long)got, (unsigned long long)n, (unsigned long long)off);
        } else if (transient_status(code)) {
            snprintf(last, sizeof last, "%s: HTTP %ld", f->shown, code);
            if (x.retry_after >= 0) wait = x.retry_after;
        } else {
            if (code == 416)
                rc = rkm_err(RKM_ECHECKSUM, "%s: HTTP 416 for bytes %llu-%llu: the file is smaller than before",
                             f->shown, (unsigned long long)off, (unsigned long long)(off + n - 1));
            else if (code == 401 || code == 403)
                rc = rkm_err(RKM_EIO, "%s: HTTP %ld (access denied%s)", f->shown, code,
                             f->auth ? ": the token was refused" : "; a gated repository needs HF_TOKEN");
            else if (code == 404)
                rc = rkm_err(RKM_ENOENT, "%s: HTTP 404 (not found)", f->shown);
            else rc = rkm_err(RKM_EIO, "%s: HTTP %ld", f->shown, code);
            give(f, h);
            return rc;
        }
        if (attempt == f->o.attempts) break;
        if (wait > f->o.max_wait_s) wait = f->o.max_wait_s;
        if (wait_s(f, wait)) {
            give(f, h);
            return rkm_err(RKM_ECANCELED, "canceled");
        }
    }
    give(f, h);
    if (rc) rc = rkm_err(RKM_EIO, "%s (gave up after %d tries)", last, f->o.attempts);
    return rc;
}

rkm_fetch *rkm_fetch_open(const char *url, const rkm_fetch_opts *o, int *rc)
{
    pthread_once(&g_once, global_init);
    rkm_fetch *f = calloc(1, sizeof *f);
    *rc = RKM_ENOMEM;
    if (!f) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    if (o) f->o = *o;
    if (f->o.attempts <= 0) f->o.attempts = 6;
    if (f->o.stall_s <= 0) f->o.stall_s = 60;
    if (f->o.max_wait_s <= 0) f->o.max_wait_s = 30;
    f->url = strdup(url);
    f->shown = strdup(url);
    if (f->shown) f->shown[strcspn(f->shown, "?#")] = 0;
    if (o && o->token && *o->token) {
        size_t n = strlen(o->token) + 32;
        f->auth = malloc(n);
        if (f->auth) snprintf(f->auth, n, "Authorization: Bearer %s", o->token);
    }
    if (!f->url || !f->shown || (o && o->token && *o->token && !f->auth)) {
        rkm_err(RKM_ENOMEM, "out of memory");
        rkm_fetch_close(f);
        return NULL;
    }
    xfer x;
    if ((*rc = get_range(f, 0, 1, -1, NULL, 0, &x))) {
        rkm_fetch_close(f);
        return NULL;
    }
    if (!x.has_range || !x.range_total) {
        *rc = rkm_err(RKM_EUNSUPPORTED, "%s: no Content-Range in the answer (the server does not serve byte ranges)",
                f->shown);
        rkm_fetch_close(f);
        return NULL;
    }
    f->size = x.range_total;
    snprintf(f->etag, sizeof f->etag, "%s", x.etag);
    /* Hugging Face names an LFS file's SHA-256 in X-Linked-Etag ("<64 hex>") */
    const char *l = x.linked + (x.linked[0] == '"');
    size_t nh = strspn(l, "0123456789abcdefABCDEF");
    if (nh == 64 && (!l[64] || l[64] == '"')) {
        for (int i = 0; i < 64; i++) f->sha256[i] = (char)(l[i] | 0x20);
        f->sha256[64] = 0;
    }
    CURL *h = take(f);
    char *eff = NULL;
    if (h) curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eff);
    f->final_url = strdup(eff ? eff : url);
    if (h) give(f, h);
    return f;
}

void rkm_fetch_close(rkm_fetch *f)
{
    if (!f) return;
    for (int i = 0; i < f->n_idle; i++) curl_easy_cleanup(f->idle[i]);
    pthread_mutex_destroy(&f->mu);
    free(f->url);
    free(f->shown);
    free(f->final_url);
    free(f->direct);
    free(f->auth);
    free(f);
}

uint64_t rkm_fetch_size(const rkm_fetch *f) { return f->size; }
const char *rkm_fetch_etag(const rkm_fetch *f) { return f->etag; }
const char *rkm_fetch_sha256(const rkm_fetch *f) { return f->sha256; }
const char *rkm_fetch_final_url(const rkm_fetch *f) { return f->final_url ? f->final_url : f->url; }

/* A range of the file, to fd at fd_off or into mem. */
static int checked_range(rkm_fetch *f, uint64_t off, uint64_t n, int fd, uint8_t *mem, uint64_t fd_off)
{
    if (!n) return 0;
    if (off > f->size || n > f->size - off)
        return rkm_err(RKM_EINVAL, "%s: range %llu+%llu beyond the file's %llu bytes", f->shown,
                       (unsigned long long)off, (unsigned long long)n, (unsigned long long)f->size);
    return get_range(f, off, n, fd, mem, fd_off, NULL);
}

int rkm_fetch_range(rkm_fetch *f, uint64_t off, uint64_t n, int fd, uint64_t fd_off)
{
    return checked_range(f, off, n, fd, NULL, fd_off);
}

int rkm_fetch_range_mem(rkm_fetch *f, uint64_t off, uint64_t n, void *buf)
{
    return checked_range(f, off, n, -1, buf, 0);
}

typedef struct {
    unsigned char *data;
    size_t len, cap;
    uint64_t max;
    int over;
} get_buf;

static size_t on_get(char *p, size_t size, size_t n, void *user)
{
    get_buf *b = user;
    size_t len = size * n;
    if (b->len + len > b->max) {
        b->over = 1;
        return 0;
    }
    if (b->len + len > b->cap) {
        size_t nc = RKM_MAX(b->cap * 2, b->len + len + 4096);
        unsigned char *t = realloc(b->data, nc);
        if (!t) return 0;
        b->data = t;
        b->cap = nc;
    }
    memcpy(b->data + b->len, p, len);
    b->len += len;
    return len;
}

int rkm_fetch_get(const char *url, uint64_t max_bytes, double timeout_s, unsigned char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    char shown[256];
    snprintf(shown, sizeof shown, "%.*s", (int)strcspn(url, "?#"), url);
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        return rkm_err(RKM_EINVAL, "%s: only http and https URLs are fetched", shown);
    pthread_once(&g_once, global_init);
    CURL *h = curl_easy_init();
    if (!h) return rkm_err(RKM_ENOMEM, "%s: out of memory", shown);
    get_buf b = {.max = max_bytes};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_USERAGENT, "rkmojo/" RKM_VERSION_STRING);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max_bytes);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_get);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    CURLcode res = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    int rc = 0;
    if (b.over || res == CURLE_FILESIZE_EXCEEDED)
        rc = rkm_err(RKM_EINVAL, "%s: larger than %llu bytes", shown, (unsigned long long)max_bytes);
    else if (res != CURLE_OK)
        rc = rkm_err(RKM_EIO, "%s: %s", shown, curl_easy_strerror(res));
    else if (code != 200)
        rc = rkm_err(code == 404 ? RKM_ENOENT : RKM_EIO, "%s: HTTP %ld", shown, code);
    if (rc) {
        free(b.data);
        return rc;
    }
    *data = b.data;
    *len = b.len;
    return 0;
}
