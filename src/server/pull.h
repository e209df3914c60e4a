/*
 * pull.h - the server's pulls (Ollama's /api/pull): a model fetched from
 * an http(s) URL or an hf://ORG/REPO:FILE name and converted into the
 * models directory by convert/pull.c, on a thread of its own, while the
 * request that started it reads its progress.
 *
 * The model's name is the file's (without .gguf), checked against
 * [A-Za-z0-9._-] (no leading dot): the only path the server builds from a
 * client's words, always inside the models directory. Only network
 * sources are accepted (never a path on the server). One pull per name at
 * a time, SRV_PULL_MAX at once. A complete model of that name is not
 * fetched again. An interrupted pull (the client left: it is canceled;
 * the server stopped) is resumed by the next pull of the same source.
 *
 * Threads: srv_pull_start runs the pull on a new thread; any thread may
 * read its state (srv_pull_wait) or cancel it. Ownership: the starter
 * holds one reference and the thread one; srv_pull_release drops one.
 */
#ifndef RKM_SERVER_PULL_H
#define RKM_SERVER_PULL_H

#include <stddef.h>
#include <stdint.h>

#define SRV_PULL_MAX 2

typedef struct srv_pull srv_pull;

typedef struct srv_pull_state {
    int done;            /* the pull ended */
    int rc;              /* then: 0, or an RKM_E* code with msg */
    int existed;         /* the model was already there: nothing fetched */
    char name[128];      /* the model's name */
    char msg[640];
    char etag[160];      /* the file's ETag once known, quotes removed */
    uint64_t received, total;
    unsigned version;    /* grows with every change */
} srv_pull_state;

/* Starts pulling source into models_dir. NULL when it cannot start: *http
 * gets the status to answer (400 a bad source or name, 409 that name is
 * being pulled, 503 too many pulls) and err the reason. on_done(user,
 * name) runs on the pull's thread after a success (the model list's
 * rescan). */
srv_pull *srv_pull_start(const char *models_dir, const char *source, void (*on_done)(void *user, const char *name),
                         void *user, int *http, char *err, size_t cap);
/* Copies the state once its version differs from *seen or timeout_s
 * passed; *seen gets the copy's version. */
void srv_pull_wait(srv_pull *p, unsigned *seen, double timeout_s, srv_pull_state *out);
void srv_pull_cancel(srv_pull *p);
void srv_pull_release(srv_pull *p);

#endif
