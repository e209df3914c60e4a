/*
 * pull.c - see pull.h.
 */
#include "server/pull.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "convert/pull.h"
#include "util/common.h"

struct srv_pull {
    pthread_mutex_t mu; /* guards st, refs */
    pthread_cond_t cv;
    srv_pull_state st;
    int refs;
    volatile int cancel;
    char *source, *out;
    void (*on_done)(void *user, const char *name);
    void *user;
};

/* the names being pulled */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_names[SRV_PULL_MAX][128];

static int claim(const char *name)
{
    int rc = 503, free_slot = -1;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < SRV_PULL_MAX; i++) {
        if (!strcmp(g_names[i], name)) free_slot = -2;
        else if (!g_names[i][0] && free_slot == -1) free_slot = i;
    }
    if (free_slot == -2) rc = 409;
    else if (free_slot >= 0) {
        snprintf(g_names[free_slot], sizeof g_names[free_slot], "%s", name);
        rc = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static void unclaim(const char *name)
{
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < SRV_PULL_MAX; i++)
        if (!strcmp(g_names[i], name)) g_names[i][0] = 0;
    pthread_mutex_unlock(&g_mu);
}

/* The model's name (rkm_pull_model_name), if it is a plain file name:
 * [A-Za-z0-9._-], no leading dot. */
static int model_name(const char *source, char *name, size_t cap)
{
    if (rkm_pull_model_name(source, name, cap) || name[0] == '.') return -1;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
              *c == '_' || *c == '-'))
            return -1;
    return 0;
}

static void changed(srv_pull *p)
{
    p->st.version++;
    pthread_cond_broadcast(&p->cv);
}

static void on_progress(void *user, uint64_t received, uint64_t total, const char *etag)
{
    srv_pull *p = user;
    pthread_mutex_lock(&p->mu);
    p->st.received = received;
    p->st.total = total;
    if (!p->st.etag[0] && etag && *etag) {
        const char *e = etag;
        if (!strncmp(e, "W/", 2)) e += 2;
        snprintf(p->st.etag, sizeof p->st.etag, "%s", e + (*e == '"'));
        size_t n = strlen(p->st.etag);
        if (n && p->st.etag[n - 1] == '"') p->st.etag[n - 1] = 0;
    }
    changed(p);
    pthread_mutex_unlock(&p->mu);
}

static void *run(void *arg)
{
    srv_pull *p = arg;
    rkm_pull_opts o = {.conv = {.quant = "keep"}, .cancel = &p->cancel, .on_progress = on_progress, .user = p};
    int rc = rkm_pull(p->source, p->out, &o, NULL);
    char msg[sizeof p->st.msg];
    snprintf(msg, sizeof msg, "%s", rc ? rkm_last_error() : "");
    if (!rc && p->on_done) p->on_done(p->user, p->st.name);
    unclaim(p->st.name);
    pthread_mutex_lock(&p->mu);
    p->st.done = 1;
    p->st.rc = rc;
    snprintf(p->st.msg, sizeof p->st.msg, "%s", msg);
    changed(p);
    pthread_mutex_unlock(&p->mu);
    srv_pull_release(p);
    return NULL;
}

srv_pull *srv_pull_start(const char *models_dir, const char *source, void (*on_done)(void *user, const char *name),
                         void *user, int *http, char *err, size_t cap)
{
    *http = 400;
    if (strncmp(source, "http://", 7) && strncmp(source, "https://", 8) && strncmp(source, "hf://", 5)) {
        snprintf(err, cap, "pull takes an http(s) URL of a GGUF file, hf://ORG/REPO:FILE.gguf or hf://ORG/REPO");
        return NULL;
    }
    char *url = rkm_pull_url(source); /* the hf:// name's form, checked */
    if (!url) {
        snprintf(err, cap, "%s", rkm_last_error());
        return NULL;
    }
    free(url);
    srv_pull *p = calloc(1, sizeof *p);
    if (!p) {
        *http = 500;
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    if (model_name(source, p->st.name, sizeof p->st.name)) {
        snprintf(err, cap, "cannot name a model after '%.300s': the file name must be letters, digits, '.', '_' or '-'",
                 source);
        free(p);
        return NULL;
    }
    char dirname[160];
    snprintf(dirname, sizeof dirname, "%s.rkmojo", p->st.name);
    p->out = rkm_path_join(models_dir, dirname);
    p->source = strdup(source);
    char *man = p->out ? rkm_path_join(p->out, "manifest.json") : NULL;
    if (!p->out || !p->source || !man) {
        free(man);
        free(p->out);
        free(p->source);
        free(p);
        *http = 500;
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->refs = 1;
    p->on_done = on_done;
    p->user = user;
    struct stat sb;
    if (stat(man, &sb) == 0) { /* there already: nothing to fetch */
        free(man);
        p->st.done = p->st.existed = 1;
        return p;
    }
    free(man);
    int c = claim(p->st.name);
    if (c) {
        *http = c;
        if (c == 409) snprintf(err, cap, "'%s' is being pulled already", p->st.name);
        else snprintf(err, cap, "%d pulls are running: try again later", SRV_PULL_MAX);
        srv_pull_release(p);
        return NULL;
    }
    pthread_t th;
    p->refs = 2; /* the starter's and the thread's */
    if (pthread_create(&th, NULL, run, p) != 0) {
        unclaim(p->st.name);
        p->refs = 1;
        srv_pull_release(p);
        *http = 500;
        snprintf(err, cap, "cannot start a thread");
        return NULL;
    }
    pthread_detach(th);
    return p;
}

void srv_pull_wait(srv_pull *p, unsigned *seen, double timeout_s, srv_pull_state *out)
{
    pthread_mutex_lock(&p->mu);
    if (p->st.version == *seen && !p->st.done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(timeout_s * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    *out = p->st;
    *seen = p->st.version;
    pthread_mutex_unlock(&p->mu);
}

void srv_pull_cancel(srv_pull *p) { p->cancel = 1; }

void srv_pull_release(srv_pull *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    int last = --p->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (!last) return;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->source);
    free(p->out);
    free(p);
}
