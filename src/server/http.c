/*
 * http.c - the HTTP side of rkmojo serve on libmicrohttpd: the server's
 * default configuration (srv_config_default) and srv_run, which binds
 * (IPv4 or IPv6, port 0 picks one and --port-file records it), starts the
 * engine and runs until asked to stop, then shuts down in order (no new
 * connections, jobs ended, connection threads joined, engine freed).
 * Per request: the route table (404 unknown path, 405 wrong method),
 * Authorization: Bearer checked in constant time before any body is read
 * (/health and / stay open), the body cap (Content-Length up front, chunked
 * bodies while reading, 413), then either a simple endpoint (/health,
 * /metrics from the engine's gauges, model listings, /api/show), a pull
 * (/api/pull: server/pull.h's thread, its progress streamed), or a job:
 * the body parsed into a srv_request (api.h), queued on the engine (503 +
 * Retry-After when full) and answered whole or streamed (SSE for OpenAI,
 * NDJSON for Ollama) as the worker produces it. Errors take the API's
 * shape by path; every response is counted in metrics.c.
 *
 * Threads: libmicrohttpd runs one thread per connection
 * (MHD_USE_THREAD_PER_CONNECTION), so a handler may block: it waits for its
 * queued job, and a streaming response callback waits for the next chunk.
 * While waiting, both poll the client's socket; a client that has gone
 * (EOF/RST) cancels its job, so the worker stops within a token.
 * /health and /metrics never touch the queue and answer while a
 * generation runs.
 *
 * Ownership: each connection's conn_state (body buffer) is freed in the
 * request-completed callback; a streaming response holds a job reference
 * released by its free callback.
 *
 * The Makefile builds every target with RKM_HAVE_MHD=1 and links
 * libmicrohttpd; a build with RKM_HAVE_MHD=0 keeps srv_config_default and
 * gets a srv_run that reports RKM_EUNSUPPORTED, while parsing and
 * formatting (api.h) build regardless.
 */
#include "server/gate.h"
#include "server/pull.h"
#include "convert/fetch.h"
#include "server/server.h"
#include "server/websafe.h"
#include "util/buf.h"
#include "util/common.h"

#if !defined(RKM_HAVE_MHD) && defined(__x86_64__)
#define RKM_HAVE_MHD 1
#endif

void srv_config_default(srv_config *c)
{
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->idle_unload_s = 30 * 60;
    c->queue_max = 16;
    c->body_max_bytes = 8u << 20;
    c->prompt_cache_max_bytes = 4ull << 30;
    c->prompt_cache_ttl_s = 7 * 86400;
    c->http_timeout_s = 120;
    c->max_conn_per_addr = 32;
    c->max_request_tokens = 131072;
    c->max_inputs = 2048;
    c->max_request_s = 1800;
    c->header_timeout_s = 30;
    c->prefetch = -1;
    c->pull = -1;
    c->vision_idle_s = 5 * 60;
}

#if RKM_HAVE_MHD

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

typedef struct conn_state {
    int seen;          /* the header-only first call happened */
    int responded;     /* a response was queued early (413, 401) */
    rkm_buf body;          /* the request body read so far (NUL-terminated) */
    int too_large;
} conn_state;

typedef struct stream_ctx {
    srv_engine *e;
    srv_job *j;
    struct MHD_Connection *c;
} stream_ctx;

static int is_openai_path(const char *url) { return !strncmp(url, "/v1/", 4); }

static int client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* The running server's configuration, for the response helpers (one
 * server per process; set before the daemon starts, read-only after). */
static const srv_config *g_cfg;
/* Its connection gate (gate.h): per-address caps and head deadlines. */
static srv_gate *g_gate;

static srv_gate_conn *gate_conn(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code)
{
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        *socket_context = fd && ad ? srv_gate_open(g_gate, fd->connect_fd, ad->client_addr) : NULL;
    } else {
        srv_gate_close(g_gate, *socket_context);
        *socket_context = NULL;
    }
}

/* CORS: a response to a browser page the origin policy allows names that
 * origin (websafe.h); a refused origin never gets this far. */
static void add_cors(struct MHD_Response *r, struct MHD_Connection *c)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin || !g_cfg) return;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (!srv_origin_allowed(g_cfg->allow_origins, origin, host)) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Vary", "Origin");
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "Retry-After");
}

/* Every response goes out here: its CORS headers, queued, counted. */
static enum MHD_Result queue(struct MHD_Connection *c, const char *endpoint, int status, struct MHD_Response *r)
{
    add_cors(r, c);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    srv_metrics_request(endpoint, status);
    return ok;
}

static enum MHD_Result send_buf(struct MHD_Connection *c, const char *endpoint, int status,
                                const char *ctype, const char *body, int retry_after)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", ra);
    }
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    return queue(c, endpoint, status, r);
}

static enum MHD_Result send_json(struct MHD_Connection *c, const char *endpoint, int status,
                                 char *body)
{
    if (!body) return send_buf(c, endpoint, 500, "application/json", "{\"error\":\"out of memory\"}", 0);
    enum MHD_Result ok = send_buf(c, endpoint, status, "application/json", body, 0);
    free(body);
    return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *c, const char *url, int status,
                                  const char *msg, int retry_after)
{
    /* The error shape follows the path: any kind of the same API will do. */
    char *body = srv_fmt_error(is_openai_path(url) ? SRV_OPENAI_CHAT : SRV_OLLAMA_CHAT, status, msg);
    if (!body) return MHD_NO;
    enum MHD_Result ok = send_buf(c, url, status, "application/json", body, retry_after);
    free(body);
    return ok;
}

/* Constant-time comparison of the presented key with ours. */
static int key_ok(const char *have, const char *want)
{
    size_t nh = strlen(have), nw = strlen(want);
    unsigned char d = (unsigned char)(nh != nw);
    for (size_t i = 0; i < nw; i++) d |= (unsigned char)(want[i] ^ (i < nh ? have[i] : 0));
    return d == 0;
}

static int authorized(struct MHD_Connection *c, const char *key)
{
    if (!key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ') h++;
    return key_ok(h, key);
}

/* --------------------------------------------------------- streaming */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_ctx *sc = cls;
    srv_job *j = sc->j;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->out_sent < j->out.len) {
            size_t n = RKM_MIN(max, j->out.len - j->out_sent);
            memcpy(buf, j->out.data + j->out_sent, n);
            j->out_sent += n;
            pthread_mutex_unlock(&j->mu);
            return (ssize_t)n;
        }
        if (j->done) {
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->out_sent == j->out.len && !j->done && client_gone(sc->c)) {
            pthread_mutex_unlock(&j->mu);
            srv_engine_cancel(sc->e, j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls)
{
    stream_ctx *sc = cls;
    pthread_mutex_lock(&sc->j->mu);
    int done = sc->j->done;
    pthread_mutex_unlock(&sc->j->mu);
    if (!done) srv_engine_cancel(sc->e, sc->j); /* the connection ended early */
    srv_job_release(sc->j);
    free(sc);
}

/* ------------------------------------------------------- generation */

/* An image a request names by URL (serve --image-urls): at most this
 * large, fetched within this long. */
#define IMAGE_URL_MAX_BYTES (32u << 20)
#define IMAGE_URL_TIMEOUT_S 20.0

/* A queued streaming request gets its headers after this long. */
#define QUEUED_HEADERS_S 0.1

static enum MHD_Result handle_job(srv_engine *e, struct MHD_Connection *c, const char *url, int kind,
                                  int type, const conn_state *cs)
{
    char err[512];
    srv_job *j = srv_job_new(type);
    if (!j) return send_error(c, url, 500, "out of memory", 0);
    if (srv_parse_request(kind, cs->body.data ? cs->body.data : "", cs->body.len, &j->req, err, sizeof err)) {
        srv_job_release(j);
        return send_error(c, url, 400, err, 0);
    }
    for (int i = 0; i < j->req.n_images; i++) { /* images named by URL: fetched here, when allowed */
        srv_image *im = &j->req.images[i];
        if (!im->url) continue;
        int frc = g_cfg->image_urls ? rkm_fetch_get(im->url, IMAGE_URL_MAX_BYTES, IMAGE_URL_TIMEOUT_S, &im->data, &im->len) : 0;
        if (!g_cfg->image_urls) snprintf(err, sizeof err, "image %d: image URLs are not fetched by this server (serve --image-urls); send the image as a data: URI (data:image/png;base64,...)", i);
        else if (frc) snprintf(err, sizeof err, "image %d: %s", i, rkm_last_error());
        if (!g_cfg->image_urls || frc) {
            srv_job_release(j);
            return send_error(c, url, 400, err, 0);
        }
    }
    if (!strcmp(url, "/api/embeddings")) { /* the legacy route: one prompt, {"embedding": [...]} */
        if (j->req.n_inputs != 1) {
            srv_job_release(j);
            return send_error(c, url, 400, "/api/embeddings takes one 'prompt' (use /api/embed for several)", 0);
        }
        j->req.legacy_embedding = 1;
    }
    const union MHD_ConnectionInfo *ad = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const char *xff = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Forwarded-For");
    j->client = ad ? srv_gate_client(ad->client_addr, g_cfg->trusted_proxies, xff) : 0;
    int retry = 0, rc = srv_engine_submit(e, j, &retry);
    if (rc) {
        srv_job_release(j);
        if (rc == RKM_EBUDGET) {
            srv_metrics_event(SRV_EV_REJECTED);
            return send_error(c, url, 503, "the server is busy: the request queue is full", retry);
        }
        return send_error(c, url, 503, "the server is shutting down", 1);
    }
    /* Wait for the outcome (non-streaming) or the first bytes (streaming).
     * A streaming request still queued after QUEUED_HEADERS_S gets its
     * headers at once, and an SSE client a comment saying it waits: it is
     * not left without a response while others run. An error found when
     * it runs then comes as a stream error. */
    double t_wait0 = rkm_now();
    int early = 0;
    pthread_mutex_lock(&j->mu);
    while (!j->done && !(j->streaming && (j->out.len > j->out_sent || early))) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->done && client_gone(c)) {
            pthread_mutex_unlock(&j->mu);
            srv_engine_cancel(e, j);
            srv_job_release(j);
            srv_metrics_request(url, 499);
            return MHD_NO; /* closes the connection */
        }
        if (!j->done && j->req.stream && !j->started && !j->streaming && rkm_now() - t_wait0 >= QUEUED_HEADERS_S) {
            j->streaming = early = 1;
            if (srv_is_openai(kind)) rkm_buf_add(&j->out, ": queued\n\n", 11);
        }
    }
    int streaming = j->streaming;
    if (!streaming) {
        int status = j->status;
        char *body = j->out.data ? strndup(j->out.data + j->out_sent, j->out.len - j->out_sent) : strdup("");
        pthread_mutex_unlock(&j->mu);
        srv_job_release(j);
        if (!body) return send_error(c, url, 500, "out of memory", 0);
        enum MHD_Result ok = send_buf(c, url, status, "application/json", body, 0);
        free(body);
        return ok;
    }
    pthread_mutex_unlock(&j->mu);
    stream_ctx *sc = calloc(1, sizeof *sc);
    struct MHD_Response *r =
        sc ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, sc, stream_free)
           : NULL;
    if (!r) {
        free(sc);
        srv_engine_cancel(e, j);
        srv_job_release(j);
        return MHD_NO;
    }
    sc->e = e;
    sc->j = j; /* the response's reference; released by stream_free */
    sc->c = c;
    if (srv_is_openai(kind)) {
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
    } else {
        MHD_add_response_header(r, "Content-Type", "application/x-ndjson");
    }
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    return queue(c, url, 200, r);
}

/* ----------------------------------------------------------- routes */

#define SRV_KIND_PULL (-2)

typedef struct route {
    const char *method, *path;
    int kind;  /* enum srv_kind, or -1 for the simple endpoints, SRV_KIND_PULL for /api/pull */
    int type;  /* enum srv_job_type */
} route;

static const route routes[] = {
    {"POST", "/v1/chat/completions", SRV_OPENAI_CHAT, SRV_JOB_GENERATE},
    {"POST", "/v1/completions", SRV_OPENAI_COMPLETION, SRV_JOB_GENERATE},
    {"POST", "/v1/embeddings", SRV_OPENAI_EMBED, SRV_JOB_EMBED},
    {"POST", "/api/chat", SRV_OLLAMA_CHAT, SRV_JOB_GENERATE},
    {"POST", "/api/generate", SRV_OLLAMA_GENERATE, SRV_JOB_GENERATE},
    {"POST", "/api/embed", SRV_OLLAMA_EMBED, SRV_JOB_EMBED},
    {"POST", "/api/embeddings", SRV_OLLAMA_EMBED, SRV_JOB_EMBED},
    {"POST", "/apply-template", SRV_OPENAI_CHAT, SRV_JOB_TEMPLATE},
    {"GET", "/v1/models", -1, 0},
    {"GET", "/api/tags", -1, 0},
    {"GET", "/api/ps", -1, 0},
    {"GET", "/api/version", -1, 0},
    {"POST", "/api/show", -1, 0},
    {"POST", "/api/pull", SRV_KIND_PULL, 0},
    {"GET", "/health", -1, 0},
    {"GET", "/metrics", -1, 0},
    {"GET", "/", -1, 0},
};

static enum MHD_Result handle_simple(srv_engine *e, struct MHD_Connection *c, const char *url,
                                     const conn_state *cs)
{
    if (!strcmp(url, "/health")) {
        char loaded[160], body[360];
        srv_engine_loaded(e, loaded, sizeof loaded);
        int n_slots, busy = srv_engine_slots_busy(e, &n_slots);
        snprintf(body, sizeof body,
                 "{\"status\":\"ok\",\"model_loaded\":\"%s\",\"busy\":%s,\"queue_depth\":%d,"
                 "\"slots\":%d,\"slots_busy\":%d}",
                 loaded, srv_engine_busy(e) ? "true" : "false", srv_engine_queue_depth(e), n_slots, busy);
        return send_buf(c, url, 200, "application/json", body, 0);
    }
    if (!strcmp(url, "/metrics")) {
        srv_gauges g;
        srv_engine_gauges(e, &g);
        char *m = srv_metrics_text(&g);
        if (!m) return send_error(c, url, 500, "out of memory", 0);
        enum MHD_Result ok = send_buf(c, url, 200, "text/plain; version=0.0.4; charset=utf-8", m, 0);
        free(m);
        return ok;
    }
    if (!strcmp(url, "/")) {
        /* a browser gets the chat page; scripts probing the server the line */
        const char *acc = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
        if (!acc || !strstr(acc, "text/html")) return send_buf(c, url, 200, "text/plain", "rkmojo is running\n", 0);
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(srv_webui_html), (void *)srv_webui_html,
                                                                 MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
        /* the page loads nothing from elsewhere and talks only to this server */
        MHD_add_response_header(r, "Content-Security-Policy",
                                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
                                "frame-ancestors 'none'");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        return queue(c, url, 200, r);
    }
    if (!strcmp(url, "/v1/models")) return send_json(c, url, 200, srv_models_openai_json(srv_engine_models(e)));
    if (!strncmp(url, "/v1/models/", 11)) {
        char *body = srv_models_openai_one_json(srv_engine_models(e), url + 11);
        if (body) return send_json(c, url, 200, body);
        char err[300];
        snprintf(err, sizeof err, "model '%.200s' not found", url + 11);
        return send_error(c, url, 404, err, 0);
    }
    if (!strcmp(url, "/api/tags")) return send_json(c, url, 200, srv_models_tags_json(srv_engine_models(e)));
    if (!strcmp(url, "/api/ps")) return send_json(c, url, 200, srv_engine_ps_json(e));
    if (!strcmp(url, "/api/version"))
        return send_buf(c, url, 200, "application/json", "{\"version\":\"" RKM_VERSION_STRING "\"}", 0);
    if (!strcmp(url, "/api/show")) {
        char err[256], *name = NULL;
        if (srv_parse_model_name(cs->body.data ? cs->body.data : "", cs->body.len, &name, err, sizeof err))
            return send_error(c, url, 400, err, 0);
        char *body = srv_models_show_json(srv_engine_models(e), name, NULL);
        if (!body) {
            snprintf(err, sizeof err, "model '%s' not found", name);
            free(name);
            return send_error(c, url, 404, err, 0);
        }
        free(name);
        return send_json(c, url, 200, body);
    }
    return send_error(c, url, 404, "not found", 0);
}

/* ------------------------------------------------------------ pulls */

/* One NDJSON line of a pull's progress, Ollama's shape; malloc'd. */
static char *pull_line(const srv_pull_state *st, int first)
{
    cJSON *o = cJSON_CreateObject();
    if (st->done && st->rc) {
        cJSON_AddStringToObject(o, "error", st->msg);
    } else if (st->done) {
        cJSON_AddStringToObject(o, "status", "success");
    } else if (first || !st->total) {
        cJSON_AddStringToObject(o, "status", "pulling manifest");
    } else {
        char status[200], digest[200];
        snprintf(status, sizeof status, "pulling %s", st->name);
        snprintf(digest, sizeof digest, "%s%s", st->etag[0] ? "etag:" : "", st->etag[0] ? st->etag : st->name);
        cJSON_AddStringToObject(o, "status", status);
        cJSON_AddStringToObject(o, "digest", digest);
        cJSON_AddNumberToObject(o, "total", (double)st->total);
        cJSON_AddNumberToObject(o, "completed", (double)RKM_MIN(st->received, st->total));
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = 0;
    return line;
}

typedef struct {
    srv_pull *p;
    struct MHD_Connection *c;
    unsigned seen;
    int first, ended;
    double t_last;
    char *line; /* being sent */
    size_t off;
} pull_stream;

static ssize_t pull_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    pull_stream *ps = cls;
    (void)pos;
    while (!ps->line) {
        if (ps->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        srv_pull_state st;
        /* progress at most five times a second; the end at once */
        const double wait = ps->first ? 0 : RKM_MAX(0.05, 0.2 - (rkm_now() - ps->t_last));
        srv_pull_wait(ps->p, &ps->seen, wait, &st);
        if (!ps->first && !st.done && rkm_now() - ps->t_last < 0.2) {
            if (client_gone(ps->c)) {
                srv_pull_cancel(ps->p);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            continue;
        }
        ps->line = pull_line(&st, ps->first);
        ps->off = 0;
        ps->first = 0;
        ps->t_last = rkm_now();
        ps->ended = st.done;
        if (!ps->line) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = RKM_MIN(max, strlen(ps->line + ps->off));
    memcpy(buf, ps->line + ps->off, n);
    ps->off += n;
    if (!ps->line[ps->off]) {
        free(ps->line);
        ps->line = NULL;
    }
    return (ssize_t)n;
}

static void pull_free(void *cls)
{
    pull_stream *ps = cls;
    if (!ps->ended) srv_pull_cancel(ps->p); /* the client left before the end */
    srv_pull_release(ps->p);
    free(ps->line);
    free(ps);
}

static void pull_rescan(void *user, const char *name)
{
    (void)name;
    srv_models_rescan(user);
}

static int pull_status(int rc)
{
    switch (rc) {
    case RKM_ENOENT: return 404;
    case RKM_EFORMAT:
    case RKM_EUNSUPPORTED:
    case RKM_EINVAL: return 400;
    case RKM_EIO:
    case RKM_ECHECKSUM: return 502; /* the source failed us */
    default: return 500;
    }
}

/* Ollama's /api/pull: {"model": URL or hf:// name, "stream": true}. */
static enum MHD_Result handle_pull(srv_engine *e, struct MHD_Connection *c, const char *url, const conn_state *cs)
{
    const srv_config *cfg = srv_engine_config(e);
    if (cfg->pull == 0 || (cfg->pull < 0 && !cfg->api_key))
        return send_error(c, url, 403,
                          "pulls are off: start the server with --pull on (they are on by default with an API key)", 0);
    if (!cfg->models_dir) return send_error(c, url, 400, "the server has no --models-dir to pull into", 0);
    cJSON *root = cJSON_ParseWithLength(cs->body.data ? cs->body.data : "", cs->body.len);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsString(m)) m = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(root, "stream");
    if (!cJSON_IsObject(root) || !cJSON_IsString(m) || (stream && !cJSON_IsBool(stream))) {
        cJSON_Delete(root);
        return send_error(c, url, 400, "expected {\"model\": an http(s) URL or hf://ORG/REPO:FILE.gguf, \"stream\": bool}", 0);
    }
    const int streamed = !stream || cJSON_IsTrue(stream);
    char err[700];
    int http = 0;
    srv_pull *p = srv_pull_start(cfg->models_dir, m->valuestring, pull_rescan, srv_engine_models(e), &http, err,
                                 sizeof err);
    cJSON_Delete(root);
    if (!p) return send_error(c, url, http, err, 0);
    if (!streamed) {
        unsigned seen = 0;
        srv_pull_state st;
        for (;;) {
            srv_pull_wait(p, &seen, 0.2, &st);
            if (st.done) break;
            if (client_gone(c)) {
                srv_pull_cancel(p);
                srv_pull_release(p);
                srv_metrics_request(url, 499);
                return MHD_NO;
            }
        }
        srv_pull_release(p);
        if (st.rc) return send_error(c, url, pull_status(st.rc), st.msg, 0);
        return send_buf(c, url, 200, "application/json", "{\"status\":\"success\"}", 0);
    }
    pull_stream *ps = calloc(1, sizeof *ps);
    struct MHD_Response *r = ps ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, pull_read, ps, pull_free) : NULL;
    if (!r) {
        free(ps);
        srv_pull_cancel(p);
        srv_pull_release(p);
        return MHD_NO;
    }
    ps->p = p;
    ps->c = c;
    ps->first = 1;
    MHD_add_response_header(r, "Content-Type", "application/x-ndjson");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    return queue(c, url, 200, r);
}

/* Counts the Content-Length and Transfer-Encoding headers (request
 * smuggling: two lengths, or a length with chunked, are refused). */
static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    int *n = cls;
    (void)kind, (void)value;
    if (!strcasecmp(key, "Content-Length")) n[0]++;
    if (!strcasecmp(key, "Transfer-Encoding")) n[1]++;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    srv_engine *e = cls;
    const srv_config *cfg = srv_engine_config(e);
    conn_state *cs = *con_cls;
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
    }
    static const route model_route = {"GET", "/v1/models/", -1, 0};
    const route *rt = NULL;
    int path_known = 0;
    if (!strncmp(url, "/v1/models/", 11) && url[11]) { /* /v1/models/{id} */
        path_known = 1;
        if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) rt = &model_route;
    }
    for (size_t i = 0; i < RKM_ARRAY_LEN(routes); i++)
        if (!strcmp(url, routes[i].path)) {
            path_known = 1;
            if (!strcmp(method, routes[i].method) ||
                (!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET")))
                rt = &routes[i];
        }
    if (!cs->seen) {
        cs->seen = 1;
        /* Decided before reading any body: a refused request costs nothing.
         * First what keeps web pages out (websafe.h), then CORS preflight
         * (before authentication: browsers send it without credentials). */
        if (srv_gate_head(g_gate, gate_conn(c))) { /* over its address's connection cap */
            cs->responded = 1;
            static const char busy[] = "{\"error\":\"too many connections from your address\"}";
            struct MHD_Response *r = MHD_create_response_from_buffer(sizeof busy - 1, (void *)busy, MHD_RESPMEM_PERSISTENT);
            if (!r) return MHD_NO;
            MHD_add_response_header(r, "Content-Type", "application/json");
            MHD_add_response_header(r, "Retry-After", "1");
            MHD_add_response_header(r, "Connection", "close");
            return queue(c, url, 503, r);
        }
        const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
        const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
        char msg[400];
        int framing[2] = {0, 0};
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, framing);
        if (framing[0] > 1 || (framing[0] && framing[1]) || framing[1] > 1) {
            cs->responded = 1;
            return send_error(c, url, 400, "ambiguous body length (two Content-Length headers, or one with Transfer-Encoding)", 0);
        }
        if (!srv_host_allowed(cfg->host, cfg->allow_hosts, host)) {
            cs->responded = 1;
            snprintf(msg, sizeof msg, "host '%.200s' is not allowed (rkmojo serve --allow-host)", host ? host : "");
            return send_error(c, url, 403, msg, 0);
        }
        if (!srv_origin_allowed(cfg->allow_origins, origin, host)) {
            cs->responded = 1;
            snprintf(msg, sizeof msg, "origin '%.200s' is not allowed (rkmojo serve --allow-origin)", origin);
            return send_error(c, url, 403, msg, 0);
        }
        if (!strcmp(method, "OPTIONS")) {
            cs->responded = 1;
            if (!path_known) return send_error(c, url, 404, "no such endpoint", 0);
            struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
            if (!r) return MHD_NO;
            MHD_add_response_header(r, "Allow", "GET, HEAD, POST, DELETE, OPTIONS");
            if (origin) {
                MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS");
                MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type, Accept");
                MHD_add_response_header(r, "Access-Control-Max-Age", "600");
            }
            return queue(c, url, 204, r);
        }
        /* a page may only send what needs a preflight: JSON */
        if (origin && !strcmp(method, "POST") &&
            !srv_content_type_json(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"))) {
            cs->responded = 1;
            return send_error(c, url, 415, "Content-Type must be application/json", 0);
        }
        if (strcmp(url, "/health") && strcmp(url, "/") && !authorized(c, cfg->api_key)) {
            cs->responded = 1;
            return send_error(c, url, 401, "missing or invalid API key (Authorization: Bearer)", 0);
        }
        if (!path_known) {
            cs->responded = 1;
            return send_error(c, url, 404, "no such endpoint", 0);
        }
        if (!rt) {
            cs->responded = 1;
            return send_error(c, url, 405, "method not allowed", 0);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > cfg->body_max_bytes) {
            cs->responded = 1;
            return send_error(c, url, 413, "request body too large", 0);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cs->responded || cs->too_large) return MHD_YES; /* discard */
        if (cs->body.len + n > cfg->body_max_bytes) {
            cs->too_large = 1;
            rkm_buf_free(&cs->body);
            return MHD_YES;
        }
        rkm_buf_add(&cs->body, upload_data, n);
        if (!rkm_buf_ok(&cs->body)) return MHD_NO;
        return MHD_YES;
    }
    if (cs->responded) return MHD_YES;
    cs->responded = 1;
    if (cs->too_large) return send_error(c, url, 413, "request body too large", 0);
    if (rt->kind == SRV_KIND_PULL) return handle_pull(e, c, url, cs);
    if (rt->kind < 0) return handle_simple(e, c, url, cs);
    return handle_job(e, c, url, rt->kind, rt->type, cs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    conn_state *cs = *con_cls;
    srv_gate_idle(g_gate, gate_conn(c)); /* the next request's head is due from now */
    if (!cs) return;
    rkm_buf_free(&cs->body);
    free(cs);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    fputs("rkmojo serve: http: ", stderr);
    vfprintf(stderr, fmt, ap);
}

int srv_run(const srv_config *cfg, volatile int *stop)
{
    g_cfg = cfg;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (strchr(cfg->host, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)cfg->port);
        if (inet_pton(AF_INET6, cfg->host, &a->sin6_addr) != 1)
            return rkm_err(RKM_EINVAL, "--host %s is not an IP address", cfg->host);
        flags |= MHD_USE_IPv6;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)cfg->port);
        if (inet_pton(AF_INET, cfg->host, &a->sin_addr) != 1)
            return rkm_err(RKM_EINVAL, "--host %s is not an IP address", cfg->host);
    }
    srv_metrics_init();
    srv_engine *e = srv_engine_new(cfg);
    if (!e) return rkm_err_prefix(RKM_ENOMEM, "server");
    g_gate = srv_gate_new(cfg->max_conn_per_addr, cfg->header_timeout_s);
    if (!g_gate) {
        srv_engine_free(e);
        return rkm_err(RKM_ENOMEM, "server: out of memory");
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, e, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->http_timeout_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024), MHD_OPTION_END);
    if (!d) {
        srv_engine_free(e);
        srv_gate_free(g_gate);
        g_gate = NULL;
        return rkm_err(RKM_EIO, "cannot listen on %s:%d (in use? not a local address?)", cfg->host,
                       cfg->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = di ? di->port : cfg->port;
    fprintf(stderr, "rkmojo serve: listening on http://%s%s%s:%d\n", strchr(cfg->host, ':') ? "[" : "",
            cfg->host, strchr(cfg->host, ':') ? "]" : "", port);
    if (cfg->port_file) {
        char buf[16];
        int n = snprintf(buf, sizeof buf, "%d\n", port);
        if (rkm_write_file_atomic(cfg->port_file, buf, (size_t)n))
            fprintf(stderr, "rkmojo serve: %s\n", rkm_last_error());
    }
    while (!*stop) usleep(100 * 1000);
    fprintf(stderr, "rkmojo serve: shutting down\n");
    MHD_quiesce_daemon(d);   /* no new connections */
    srv_engine_stop(e);      /* running and queued jobs end; waiting handlers return */
    MHD_stop_daemon(d);      /* joins the connection threads */
    srv_engine_free(e);      /* prompt cache saved, model closed (by the worker) */
    srv_gate_free(g_gate);   /* its watchdog, after the last connection */
    g_gate = NULL;
    return 0;
}

#else /* no libmicrohttpd */

int srv_run(const srv_config *cfg, volatile int *stop)
{
    (void)cfg;
    (void)stop;
    return rkm_err(RKM_EUNSUPPORTED, "this build has no HTTP server (libmicrohttpd not linked)");
}

#endif
