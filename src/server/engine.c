/*
 * engine.c - the scheduler of rkmojo serve: a bounded FIFO queue of jobs,
 * and one worker thread that owns the loaded model and its sequence slots
 * (--parallel N). Each slot holds a session; the generations running in
 * the slots advance together, one forward pass a step (rkm_batch_eval):
 * every decoding slot gives its next token, and prompt chunks of newly
 * admitted requests fill the rest of the step's rows, so running streams
 * keep flowing while a new prompt is read. Jobs are admitted fairly
 * between clients (fair_pick), else in FIFO order: generations into free slots (n choices into n), embeddings,
 * templates and loads between two steps; a job that cannot join the
 * running ones (another model, an unload, changed files) waits at the head
 * of the queue until the slots drain, then runs alone.
 *
 * Threads and locks:
 *   engine->mu guards the queue, `stopping`, `running`, `n_active`, the
 *   slots' and the batch's published pointers (so that shutdown can cancel
 *   them) and the /api/ps summary. Everything else in the "worker only" block is
 *   touched by the worker thread alone. job->mu guards a job's output (see
 *   server.h). Lock order: engine->mu before job->mu. The vision thread
 *   (srv_venc, started with a model's tower) runs the tower on one image
 *   the worker prepared and queued; venc.mu guards the hand-over, taken by
 *   the worker possibly under engine->mu, never the other way round (the
 *   thread drops venc.mu before it signals engine->cv).
 *
 * Prompt cache: each slot's session is an in-memory cache entry. A request
 * goes to the free slot whose tokens it continues for the longest prefix
 * (at least half of what the slot holds), else to an empty or the least
 * recently used free slot; there the worker keeps the longest common
 * prefix (rkm_session_truncate), so a multi-turn chat prefills only the
 * new turn, and a request interleaved between two turns (a chat UI's
 * title request) lands in another slot when there is one. With
 * --prompt-cache-dir, a conversation that is about to be overwritten by a
 * different one (when a request continued it, it came from disk, or it is
 * long: PCACHE_WORTH_TOKENS), and every slot at unload and shutdown, are
 * saved to disk (prompt_cache.c); a later request whose prompt shares a
 * longer prefix with a saved state than with its slot loads it first.
 * That is also how states survive a restart.
 *
 * Ownership: jobs are reference counted (HTTP side + queue/worker; a job
 * in a slot keeps the worker's reference until it ends); the engine frees
 * the model, sessions, batch and cache at unload and srv_engine_free.
 */
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/model_dir.h"
#include "server/prompt.h"
#include "server/reasoning.h"
#include "server/toolcall.h"
#include "server/tools.h"
#include "server/server.h"
#include "text/unicode.h"
#include "util/common.h"

/* A state is worth keeping on disk once it holds this many tokens. */
#define PCACHE_MIN_TOKENS 16
/* Load a saved state when it matches this many more tokens than the live
 * session: reading KV rows beats recomputing them, but not for a handful. */
#define PCACHE_LOAD_GAIN 8
/* A conversation displaced by another is saved when it is likely to come
 * back or dear to recompute: a request continued it, it came from the disk
 * cache, or it holds this many tokens. One-off short requests are not
 * saved (under many clients they were a file each). */
#define PCACHE_WORTH_TOKENS 512

/* One generation's output state: text, reasoning and tool-call splitting,
 * logprobs, limits. */
typedef struct gen_ctx {
    srv_engine *e;
    srv_job *j;
    rkm_session *s;   /* the slot's session */
    rkm_textout *to;
    srv_result res;
    char *text;       /* non-streaming: the whole reply */
    size_t n_text, cap_text;
    int n_gen, n_max;
    int stop_hit, oom;
    double t_gen0, t_first, t_gen;
    int split;        /* the reply's <think> block goes to res.reasoning */
    srv_think think;
    rkm_buf rsn, cnt; /* the splitter's output of one piece */
    rkm_buf reasoning; /* non-streaming: all of it */
    int tools;        /* the reply's tool calls are parsed out (tp) */
    srv_toolp tp;
    rkm_buf tcnt;     /* the tool parser's content of one piece */
    cJSON *calls;     /* the calls so far */
    int calls_sent;   /* calls already in a stream chunk */
    double deadline;  /* rkm_now() past which generation stops (--max-request-time), or 0 */
    int timed_out;
    cJSON *lp;        /* logprobs entries (rq->logprobs) */
    int lp_sent;      /* entries already in a stream chunk */
    int text_chars;   /* code points of the tokens so far (text_offset) */
} gen_ctx;

/* One sequence slot: a session (whose KV cache is an in-memory prompt-cache
 * entry) and the generation running on it, if any. Worker only, except j_pub
 * (engine->mu). */
typedef struct srv_slot {
    rkm_session *sess;
    char live_id[17];       /* prompt-cache entry the session extends */
    int live_dirty;         /* the session differs from its saved entry */
    int live_continued;     /* a request continued its conversation, or it came from disk */
    double last_used;       /* monotonic: the least recently used free slot is reused first */
    srv_job *j_pub;         /* = j, for cancel from HTTP threads */
    /* the running generation (j non-NULL) */
    srv_job *j;
    gen_ctx g;
    char model[136];        /* the model's name as the client asked */
    char id[48];            /* the response's id */
    int32_t *toks;          /* the prompt */
    rkm_media_prompt *media; /* a prompt with images: its images (the lead choice's), or NULL */
    int n, pos, cached;     /* its length, tokens evaluated, tokens reused */
    int replayed;           /* of the reused, those the session evaluated again to reach them (a
                             * recurrent model's state restored from an earlier snapshot) */
    int decoding;           /* the prompt is in: tokens are being generated */
    int wait_lead;          /* a choice after the first: waits for the lead's prompt, then copies its session */
    int ended, end_rc;      /* this choice is done (its status), its siblings may not be */
    int32_t next;           /* decoding: the token the next step evaluates */
    uint64_t venc_serial;   /* its image in the vision thread (srv_venc.serial), 0: none */
    double t0, tp0, t_prompt;
} srv_slot;

/* The vision thread: encodes one image at a time while the worker's
 * steps go on for the other slots (an image of thousands of patches takes
 * seconds). The worker prepares the image and queues it (its own copy),
 * the thread runs the tower and leaves the rows; the worker takes them
 * when its slot comes up again and evaluates them into the slot's
 * session (the model is the worker's). A result whose slot ended
 * meanwhile is dropped. Started with the tower, stopped before it is
 * freed. mu guards the fields below it; the worker may hold engine->mu
 * while taking mu, the thread never holds both. */
enum { VENC_IDLE = 0, VENC_QUEUED, VENC_RUNNING, VENC_DONE };
typedef struct {
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, state;        /* VENC_* */
    uint64_t serial;        /* of the job in it (srv_slot.venc_serial) */
    float *img;             /* queued: the prepared image (owned), w x h */
    int w, h;
    float *rows;            /* done: the rows (owned until taken), or NULL */
    int n_rows, rc;
    char err[512];          /* rc's message */
} srv_venc;

struct srv_engine {
    srv_config cfg;
    srv_models *models;
    pthread_t worker;
    int worker_started;

    pthread_mutex_t mu; /* guards the fields down to the worker-only block */
    pthread_cond_t cv;  /* queue not empty, or stopping */
    srv_job **q;        /* ring of queue_max */
    int q_head, q_len, q_cap;
    int stopping;
    srv_job *running;       /* a job being admitted or run alone */
    int n_active;           /* slots with a generation */
    rkm_batch *batch_pub;   /* = batch, to cancel its step at shutdown */
    double avg_job_s;       /* moving average, for Retry-After */
    srv_model_info loaded;  /* path NULL when none */
    double expires_at;      /* unix seconds, <0 never (for /api/ps) */

    /* worker only */
    rkm_model *model;
    srv_slot *slots;        /* cap_slots of them, n_slots in use (engine->mu to change) */
    int n_slots, cap_slots;
    rkm_batch *batch;       /* runs the steps (made on first use) */
    int max_rows;           /* rows of one step */
    int rr;                 /* the prefill slot served first in the next step */
    int n_ctx;
    srv_pcache *pc;
    char *mmproj;           /* the loaded model's vision tower (convert --mmproj), or NULL */
    int img_rows;           /* the most rows of one image it attends both ways (0: none): the sessions' chunk */
    rkm_vision_hparams vhp; /* its parameters from the header, the token bounds applied (vhp_ok) */
    int vhp_ok;
    char vhp_err[256];      /* why its header cannot serve (!vhp_ok) */
    rkm_vision *vision;     /* the tower, read when an image's rows are first to be encoded */
    rkm_pool *vpool;        /* its threads */
    srv_venc venc;          /* encodes images off the worker (ensure_vision starts it) */
    uint64_t venc_next;     /* the last serial given */
    double vision_used;     /* monotonic: its last image (freed after cfg.vision_idle_s) */
    double keep_alive_s;    /* of the loaded model, <0 forever */
    double last_used;       /* monotonic */
};

/* ------------------------------------------------------------- jobs */

srv_job *srv_job_new(int type)
{
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->type = type;
    j->refs = 1;
    j->status = 200;
    atomic_init(&j->canceled, 0);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->t_submit = rkm_now();
    return j;
}

void srv_job_release(srv_job *j)
{
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    srv_request_free(&j->req);
    rkm_buf_free(&j->out);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

int srv_job_emit(srv_job *j, const char *s, size_t n)
{
    pthread_mutex_lock(&j->mu);
    int rc = 0;
    if (j->out.len + n + 1 > j->out.cap && j->out_sent) {
        /* Bytes already sent are dropped before growing: the buffer holds
         * only what the client has not read yet. */
        rkm_buf_consume(&j->out, j->out_sent);
        j->out_sent = 0;
    }
    rkm_buf_add(&j->out, s, n);
    if (!rkm_buf_ok(&j->out)) {
        rc = RKM_ENOMEM;
        goto out;
    }
    pthread_cond_broadcast(&j->cv);
out:
    pthread_mutex_unlock(&j->mu);
    return rc;
}

void srv_job_finish(srv_job *j, int status)
{
    pthread_mutex_lock(&j->mu);
    if (!j->streaming) j->status = status;
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Ends a job with an error in its API's shape (a stream error line when
 * the stream has started). */
static void job_fail(srv_job *j, int status, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    int streaming = j->streaming;
    pthread_mutex_unlock(&j->mu);
    char *body = streaming ? srv_fmt_stream_error(&j->req, msg)
                           : srv_fmt_error(j->req.kind, status, msg);
    if (!streaming) { /* nothing was sent: the error replaces any output */
        pthread_mutex_lock(&j->mu);
        rkm_buf_clear(&j->out);
        j->out_sent = 0;
        pthread_mutex_unlock(&j->mu);
    }
    if (body) srv_job_emit(j, body, strlen(body));
    free(body);
    srv_job_finish(j, status);
}

/* ------------------------------------------------------------- queue */

int srv_engine_submit(srv_engine *e, srv_job *j, int *retry_after_s)
{
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    if (e->stopping) {
        rc = RKM_ECANCELED;
    } else if (e->q_len >= e->q_cap) {
        int wait = (int)ceil(e->avg_job_s * (e->q_len + 1));
        *retry_after_s = RKM_MAX(1, RKM_MIN(wait, 600));
        rc = RKM_EBUDGET;
    } else {
        pthread_mutex_lock(&j->mu);
        j->refs++;
        pthread_mutex_unlock(&j->mu);
        e->q[(e->q_head + e->q_len++) % e->q_cap] = j;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int srv_engine_busy(srv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int b = e->running != NULL || e->n_active > 0;
    pthread_mutex_unlock(&e->mu);
    return b;
}

int srv_engine_slots_busy(srv_engine *e, int *n_slots)
{
    pthread_mutex_lock(&e->mu);
    int b = e->n_active;
    if (n_slots) *n_slots = e->n_slots;
    pthread_mutex_unlock(&e->mu);
    return b;
}

int srv_engine_queue_depth(srv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int n = e->q_len;
    pthread_mutex_unlock(&e->mu);
    return n;
}

const srv_config *srv_engine_config(srv_engine *e) { return &e->cfg; }
srv_models *srv_engine_models(srv_engine *e) { return e->models; }

void srv_engine_cancel(srv_engine *e, srv_job *j)
{
    atomic_store(&j->canceled, 1);
    /* a slot's generation ends before the next step (a step is one token,
     * or one prompt chunk of max_rows rows) */
    (void)e;
}

/* Resident set size now, from /proc (0 where it cannot be read). */
static uint64_t resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &res) != 2) res = 0;
        fclose(f);
    }
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

void srv_engine_gauges(srv_engine *e, srv_gauges *g)
{
    memset(g, 0, sizeof *g);
    g->queue_depth = srv_engine_queue_depth(e);
    g->slots_busy = srv_engine_slots_busy(e, &g->slots);
    srv_engine_loaded(e, g->model_loaded, sizeof g->model_loaded);
    g->resident_bytes = resident_bytes();
    g->peak_resident_bytes = rkm_peak_rss_bytes();
}

void srv_engine_loaded(srv_engine *e, char *buf, size_t cap)
{
    pthread_mutex_lock(&e->mu);
    snprintf(buf, cap, "%s", e->loaded.path ? e->loaded.name : "");
    pthread_mutex_unlock(&e->mu);
}

char *srv_engine_ps_json(srv_engine *e)
{
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "models");
    pthread_mutex_lock(&e->mu);
    if (e->loaded.path) {
        cJSON *m = cJSON_CreateObject();
        char name[160], t[48];
        snprintf(name, sizeof name, "%s:latest", e->loaded.name);
        cJSON_AddStringToObject(m, "name", name);
        cJSON_AddStringToObject(m, "model", name);
        cJSON_AddNumberToObject(m, "size", (double)e->loaded.bytes);
        char dg[17];
        snprintf(dg, sizeof dg, "%016llx", (unsigned long long)e->loaded.digest);
        cJSON_AddStringToObject(m, "digest", dg);
        srv_model_details(m, &e->loaded);
        srv_fmt_time(e->expires_at < 0 ? 4102444800.0 : e->expires_at, t, sizeof t);
        cJSON_AddStringToObject(m, "expires_at", t);
        cJSON_AddNumberToObject(m, "size_vram", 0);
        cJSON_AddItemToArray(arr, m);
    }
    pthread_mutex_unlock(&e->mu);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* ------------------------------------------------------ model state */

static double unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void publish_expiry(srv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->expires_at = e->keep_alive_s < 0 ? -1 : unix_now() + e->keep_alive_s;
    pthread_mutex_unlock(&e->mu);
}

/* Saves a slot's session to the disk cache when it holds unsaved work. */
static void save_live(srv_engine *e, srv_slot *sl)
{
    if (!e->pc || !sl->sess || !sl->live_dirty) return;
    if (rkm_session_n_past(sl->sess) < PCACHE_MIN_TOKENS) return;
    char id[17];
    if (srv_pcache_store(e->pc, sl->live_id, sl->sess, id) == 0) {
        memcpy(sl->live_id, id, sizeof id);
        sl->live_dirty = 0;
        srv_metrics_event(SRV_EV_PCACHE_STORE);
    } else {
        fprintf(stderr, "rkmojo serve: prompt cache: %s\n", rkm_last_error());
    }
}

/* Frees every slot's session (no generation runs) and the batch. */
static void free_sessions(srv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->batch_pub = NULL;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < e->cap_slots; i++) {
        srv_slot *sl = &e->slots[i];
        rkm_session_free(sl->sess);
        sl->sess = NULL;
        sl->live_id[0] = 0;
        sl->live_dirty = 0;
        sl->live_continued = 0;
    }
    rkm_batch_free(e->batch);
    e->batch = NULL;
}

/* The vision thread: one prepared image at a time through the tower. */
static void *venc_main(void *arg)
{
    srv_engine *e = arg;
    srv_venc *q = &e->venc;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stop && q->state != VENC_QUEUED) pthread_cond_wait(&q->cv, &q->mu);
        if (q->stop) break;
        q->state = VENC_RUNNING;
        float *img = q->img;
        const int w = q->w, h = q->h;
        q->img = NULL;
        pthread_mutex_unlock(&q->mu);
        float *rows = NULL;
        int nt = 0, rc = rkm_vision_encode(e->vision, e->vpool, img, w, h, &rows, &nt);
        free(img);
        pthread_mutex_lock(&q->mu);
        q->rows = rows;
        q->n_rows = nt;
        q->rc = rc;
        snprintf(q->err, sizeof q->err, "%s", rc ? rkm_last_error() : "");
        q->state = VENC_DONE;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        pthread_mutex_lock(&e->mu); /* the worker may be waiting for it */
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Stops the vision thread (after the image in it), drops what it holds. */
static void venc_stop(srv_engine *e)
{
    srv_venc *q = &e->venc;
    if (!q->started) return;
    pthread_mutex_lock(&q->mu);
    while (q->state == VENC_RUNNING) pthread_cond_wait(&q->cv, &q->mu);
    q->stop = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    free(q->img);
    free(q->rows);
    q->img = q->rows = NULL;
    q->state = VENC_IDLE;
    q->stop = 0;
    q->started = 0;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}

/* The vision tower out of memory (the next image reads it again). */
static void free_vision(srv_engine *e)
{
    venc_stop(e);
    rkm_vision_free(e->vision);
    e->vision = NULL;
    rkm_pool_free(e->vpool);
    e->vpool = NULL;
}

static void unload_model(srv_engine *e)
{
    if (!e->model) return;
    for (int i = 0; i < e->cap_slots; i++) save_live(e, &e->slots[i]);
    free_sessions(e);
    srv_pcache_close(e->pc);
    e->pc = NULL;
    rkm_model_close(e->model);
    e->model = NULL;
    free_vision(e);
    free(e->mmproj);
    e->mmproj = NULL;
    e->img_rows = 0;
    e->vhp_ok = 0;
    pthread_mutex_lock(&e->mu);
    free(e->loaded.path);
    memset(&e->loaded, 0, sizeof e->loaded);
    pthread_mutex_unlock(&e->mu);
    srv_metrics_event(SRV_EV_MODEL_UNLOAD);
}

/* The vision tower the model directory carries (convert --mmproj): its
 * path and, from its header, the parameters prompts are assembled with
 * (each image's size and token count under the configured bounds) and how
 * many rows one image attended both ways may have (the sessions' prefill
 * chunk holds them). The weights are read when an image's rows are first
 * to be encoded (ensure_vision): a request whose images all come from the
 * prompt cache never reads them. */
static void find_tower(srv_engine *e, const char *dir)
{
    rkm_model_dir *md = rkm_model_dir_load_manifest(dir);
    if (md && md->mmproj_file) e->mmproj = rkm_path_join(md->path, md->mmproj_file);
    rkm_model_dir_close(md);
    e->vhp_ok = 0;
    if (!e->mmproj) return;
    rkm_gguf *g = rkm_gguf_open(e->mmproj);
    if (g && rkm_vision_read(g, &e->vhp) == 0 &&
        rkm_vision_token_limits(&e->vhp, e->cfg.image_min_tokens, e->cfg.image_max_tokens) == 0) {
        const rkm_proj_info *pi = rkm_proj_info_of(e->vhp.proj);
        if (pi && pi->bidirectional) e->img_rows = rkm_vision_max_tokens(&e->vhp);
        e->vhp_ok = 1;
    } else {
        snprintf(e->vhp_err, sizeof e->vhp_err, "%s", rkm_last_error());
        fprintf(stderr, "rkmojo serve: the vision tower %s: %s\n", e->mmproj, e->vhp_err);
    }
    rkm_gguf_close(g);
}

/* Does the loaded model take images? 0, or 400 with a message in err. */
static int takes_images(const srv_engine *e, char *err, size_t errcap)
{
    if (!e->mmproj) {
        snprintf(err, errcap, "model '%s' takes no images: it has no vision tower (rkmojo convert --mmproj)", e->loaded.name);
        return 400;
    }
    if (!e->vhp_ok) {
        snprintf(err, errcap, "model '%s' takes no images here: %s", e->loaded.name, e->vhp_err);
        return 400;
    }
    return 0;
}

/* The tower of the loaded model in memory (first image to encode). 0,
 * or an RKM_E* code with the message set. */
static int ensure_vision(srv_engine *e)
{
    e->vision_used = rkm_now();
    if (e->vision) return 0;
    double t0 = rkm_now();
    e->vision = rkm_vision_load(e->mmproj);
    if (!e->vision) return rkm_err_prefix(RKM_EIO, "the vision tower of '%s'", e->loaded.name);
    int rc = rkm_vision_supported(e->vision);
    if (!rc) rc = rkm_vision_limit_tokens(e->vision, e->cfg.image_min_tokens, e->cfg.image_max_tokens);
    if (!rc && !(e->vpool = rkm_pool_new(e->cfg.n_threads))) rc = rkm_err(RKM_ENOMEM, "out of memory");
    srv_venc *q = &e->venc;
    if (!rc) {
        memset(q, 0, sizeof *q);
        pthread_mutex_init(&q->mu, NULL);
        pthread_cond_init(&q->cv, NULL);
        if (pthread_create(&q->th, NULL, venc_main, e)) {
            pthread_mutex_destroy(&q->mu);
            pthread_cond_destroy(&q->cv);
            rc = rkm_err(RKM_ENOMEM, "cannot start the vision thread");
        } else {
            q->started = 1;
        }
    }
    if (rc) {
        rkm_pool_free(e->vpool);
        e->vpool = NULL;
        rkm_vision_free(e->vision);
        e->vision = NULL;
        return rc;
    }
    char b[32];
    fprintf(stderr, "rkmojo serve: vision tower of %s loaded (%s, %.2f s)\n", e->loaded.name,
            rkm_fmt_bytes(rkm_vision_bytes(e->vision), b, sizeof b), rkm_now() - t0);
    return 0;
}

/* Makes mi the loaded model. 0 or a code with a message in err. */
static int ensure_model(srv_engine *e, const srv_model_info *mi, double *t_load, char *err,
                        size_t errcap)
{
    *t_load = 0;
    if (e->model && !strcmp(e->loaded.path, mi->path)) {
        /* files replaced or rewritten since the load (a new conversion),
         * resident.bin truncated under the mapping, or the background
         * check found a damaged tensor: load what is there now; the live
         * state belongs to the old weights and is not saved */
        if (!rkm_model_files_changed(e->model) && !rkm_model_check(e->model)) return 0;
        if (e->n_active > 0) { /* generations still run on the old files: not now */
            snprintf(err, errcap, "model '%s' changed on disk while generating; retry", mi->name);
            return RKM_EIO;
        }
        fprintf(stderr, "rkmojo serve: %s: %s; loading it again\n", mi->name, rkm_last_error());
        free_sessions(e);
    }
    double t0 = rkm_now();
    unload_model(e); /* one model at a time */
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.mem_budget_bytes = e->cfg.mem_budget_bytes;
    mp.n_threads = e->cfg.n_threads;
    mp.plan_n_ctx = e->cfg.n_ctx; /* the budget plans for the sessions' context */
    mp.plan_n_seq = e->cfg.parallel > 0 ? e->cfg.parallel : -1; /* and for the slots' KV */
    mp.expert_cache_slots = e->cfg.expert_cache_slots;
    mp.cache_policy = e->cfg.cache_policy;
    if (e->cfg.prefetch >= 0) mp.prefetch = e->cfg.prefetch;
    mp.io_threads = e->cfg.io_threads;
    mp.backend = e->cfg.backend;
    mp.cache_scope = e->cfg.cache_scope;
    mp.lazy_experts = e->cfg.lazy_experts;
    if (rkm_model_params_from_knobs(&mp)) {
        snprintf(err, errcap, "cannot load model '%s': %s", mi->name, rkm_last_error());
        return RKM_EINVAL;
    }
    e->model = rkm_model_open(mi->path, &mp);
    if (!e->model) {
        snprintf(err, errcap, "cannot load model '%s': %s", mi->name, rkm_last_error());
        return RKM_EIO;
    }
    find_tower(e, mi->path);
    int train = rkm_model_n_ctx_train(e->model);
    e->n_ctx = e->cfg.n_ctx > 0 ? e->cfg.n_ctx : RKM_MIN(4096, train > 0 ? train : 4096);
    e->max_rows = RKM_MIN(128, e->n_ctx); /* a step: the prefill chunk of one session */
    /* the slots the plan made room for (no generation runs at a load) */
    char plan[512];
    int n_seq = 1;
    rkm_model_plan(e->model, &n_seq, NULL, plan, sizeof plan);
    pthread_mutex_lock(&e->mu);
    e->n_slots = RKM_MAX(1, RKM_MIN(n_seq, e->cap_slots));
    pthread_mutex_unlock(&e->mu);
    if (e->cfg.prompt_cache_dir) {
        /* One subdirectory per model: states of different weights never mix
         * (rkm_session_load checks the model identity as well). */
        char *dir = rkm_path_join(e->cfg.prompt_cache_dir, mi->name);
        e->pc = dir ? srv_pcache_open(dir, e->cfg.prompt_cache_max_bytes, e->cfg.prompt_cache_ttl_s)
                    : NULL;
        if (!e->pc)
            fprintf(stderr, "rkmojo serve: prompt cache disabled: %s\n", rkm_last_error());
        free(dir);
    }
    pthread_mutex_lock(&e->mu);
    e->loaded = *mi;
    e->loaded.path = strdup(mi->path);
    pthread_mutex_unlock(&e->mu);
    e->keep_alive_s = e->cfg.idle_unload_s > 0 ? e->cfg.idle_unload_s : -1;
    *t_load = rkm_now() - t0;
    srv_metrics_event(SRV_EV_MODEL_LOAD);
    fprintf(stderr, "rkmojo serve: loaded %s (%.2f s); %d slot%s; memory plan: %s\n", mi->name, *t_load, e->n_slots,
            e->n_slots == 1 ? "" : "s", plan);
    return 0;
}

/* Per-request sampling on the long-lived session: the model's defaults
 * with the fields the request set. Without a seed the random sequence
 * starts from a fresh one (OpenAI: unseeded is random). */
static int session_set_sampler(const rkm_model *m, rkm_session *s, const srv_request *rq, int choice,
                               char *err, size_t errcap)
{
    rkm_sampler_params sp;
    rkm_sampler_params_for_model(m, &sp);
    srv_request_sampler(rq, &sp);
    sp.seed = rq->sp.seed + (uint64_t)choice; /* each choice its own sequence */
    if (sp.repeat_last_n < 0) sp.repeat_last_n = rkm_session_n_ctx(s); /* Ollama: -1 = context */
    if (!rq->has_seed) {
        static atomic_uint_fast64_t counter;
        uint64_t x[2] = {(uint64_t)atomic_fetch_add(&counter, 1), (uint64_t)(unix_now() * 1e9)};
        sp.seed = rkm_hash(x, sizeof x);
    }
    if (rkm_session_set_sampler(s, &sp)) {
        snprintf(err, errcap, "sampling parameters: %s", rkm_last_error());
        return RKM_EINVAL;
    }
    return 0;
}

static int ensure_session(srv_engine *e, srv_slot *sl, char *err, size_t errcap)
{
    if (sl->sess) return 0;
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = e->n_ctx;
    sp.n_chunk = RKM_MAX(e->max_rows, e->img_rows); /* an image attended both ways is one chunk */
    rkm_session *s = rkm_session_new(e->model, &sp);
    if (!s) {
        snprintf(err, errcap, "cannot create a session: %s", rkm_last_error());
        return RKM_ENOMEM;
    }
    sl->sess = s;
    sl->live_id[0] = 0;
    sl->live_dirty = 0;
    sl->live_continued = 0;
    return 0;
}

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb)
{
    int n = RKM_MIN(na, nb), i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* The free slot for a prompt: the one whose tokens it continues for the
 * longest prefix, if that is at least half of what the slot holds (else
 * taking it would destroy more than it reuses); otherwise an empty slot,
 * otherwise the least recently used. -1 when every slot is busy. */
static int pick_slot(srv_engine *e, const int32_t *toks, int n, int allow)
{
    int best = -1, best_lcp = 0, empty = -1, lru = -1;
    for (int i = 0; i < e->n_slots; i++) {
        srv_slot *sl = &e->slots[i];
        if (sl->j) continue;
        int n_live = 0;
        const int32_t *live = sl->sess ? rkm_session_tokens(sl->sess, &n_live) : NULL;
        if (n_live == 0) {
            if (empty < 0) empty = i;
            continue;
        }
        int lcp = allow ? common_prefix(live, n_live, toks, n) : 0;
        if (lcp > best_lcp && 2 * lcp >= n_live) best = i, best_lcp = lcp;
        if (lru < 0 || sl->last_used < e->slots[lru].last_used) lru = i;
    }
    return best >= 0 ? best : empty >= 0 ? empty : lru;
}

/* Positions a slot's session on the longest reusable prefix of toks and
 * returns how many tokens it kept (the cached tokens). */
static int reuse_prefix(srv_engine *e, srv_slot *sl, const int32_t *toks, int n, int allow)
{
    int n_live;
    const int32_t *live = rkm_session_tokens(sl->sess, &n_live);
    int lcp = allow ? common_prefix(live, n_live, toks, n) : 0;
    if (allow && e->pc) {
        int blcp = 0, best = srv_pcache_best(e->pc, toks, n, &blcp);
        if (best >= 0 && blcp >= lcp + PCACHE_LOAD_GAIN) {
            save_live(e, sl);
            char id[17];
            if (srv_pcache_load(e->pc, best, sl->sess, id) == 0) {
                memcpy(sl->live_id, id, sizeof id);
                sl->live_dirty = 0;
                sl->live_continued = 1;
                srv_metrics_event(SRV_EV_PCACHE_LOAD);
            } else {
                fprintf(stderr, "rkmojo serve: prompt cache: %s\n", rkm_last_error());
                sl->live_id[0] = 0;
            }
            live = rkm_session_tokens(sl->sess, &n_live);
            lcp = common_prefix(live, n_live, toks, n);
        }
    }
    /* A conversation about to be cut well short is saved first (when worth
     * it, PCACHE_WORTH_TOKENS), so that returning to it later finds its KV
     * on disk. */
    if (e->pc && n_live - lcp >= PCACHE_MIN_TOKENS && (sl->live_continued || n_live >= PCACHE_WORTH_TOKENS))
        save_live(e, sl);
    sl->live_continued = lcp >= PCACHE_MIN_TOKENS; /* this request continues the conversation, or starts one */
    /* Keep at least one token to evaluate: its logits start generation. */
    int keep = RKM_MIN(lcp, n - 1);
    if (keep < 0) keep = 0;
    rkm_stats st0, st1;
    rkm_session_stats(sl->sess, &st0);
    if (keep < n_live && rkm_session_truncate(sl->sess, keep)) {
        rkm_session_truncate(sl->sess, 0);
        keep = 0;
    }
    rkm_session_stats(sl->sess, &st1);
    sl->replayed = RKM_MIN(keep, RKM_MAX(0, st1.n_prompt - st0.n_prompt));
    return keep;
}

/* ---------------------------------------------------------- generate */


/* The token's bytes as JSON text: valid UTF-8, an invalid byte as U+FFFD. */
static cJSON *token_json(const char *p, int n, int *chars)
{
    char buf[1024];
    size_t o = 0;
    for (int i = 0; i < n && o + 4 < sizeof buf;) {
        size_t v = rkm_utf8_valid_prefix(p + i, (size_t)(n - i));
        if (v == 0) {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            (*chars)++;
            continue;
        }
        if (v > sizeof buf - 4 - o) v = sizeof buf - 4 - o;
        memcpy(buf + o, p + i, v);
        for (size_t k = 0; k < v; k++) *chars += ((unsigned char)p[i + k] & 0xC0) != 0x80;
        o += v;
        i += (int)v;
    }
    buf[o] = 0;
    return cJSON_CreateString(buf);
}

static cJSON *lp_entry(const rkm_model *m, int32_t id, float lp, int *chars)
{
    char piece[512];
    int n = rkm_token_to_piece(m, id, piece, sizeof piece);
    if (n < 0 || n > (int)sizeof piece) n = 0;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddItemToObject(e, "token", token_json(piece, n, chars));
    cJSON_AddNumberToObject(e, "logprob", lp);
    cJSON *b = cJSON_AddArrayToObject(e, "bytes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)piece[i]));
    return e;
}

/* Appends the logprobs entry of token id (the session still holds the
 * logits it was sampled from). */
static int add_logprob(gen_ctx *g, int32_t id)
{
    const srv_request *rq = &g->j->req;
    rkm_session *s = g->s;
    int32_t top[20];
    float tlp[20], lp;
    int k = rq->top_logprobs;
    if (rkm_session_logprobs(s, id, k, &lp, top, tlp)) return RKM_EINVAL;
    if (!g->lp && !(g->lp = cJSON_CreateArray())) return RKM_ENOMEM;
    int off = g->text_chars, dummy = 0;
    cJSON *e = lp_entry(g->e->model, id, lp, &g->text_chars);
    cJSON *ta = cJSON_AddArrayToObject(e, "top_logprobs");
    for (int i = 0; i < k; i++) cJSON_AddItemToArray(ta, lp_entry(g->e->model, top[i], tlp[i], &dummy));
    cJSON_AddNumberToObject(e, "text_offset", off);
    cJSON_AddItemToArray(g->lp, e);
    g->res.lp = g->lp;
    return 0;
}

/* Reasoning text r and answer text s (either may be empty) out: a stream
 * chunk, or appended to the reply. */
static int emit_text(gen_ctx *g, const char *r, const char *s)
{
    size_t n = strlen(s), nr = r ? strlen(r) : 0;
    int nc = g->calls ? cJSON_GetArraySize(g->calls) : 0;
    if (!n && !nr && nc == g->calls_sent) return 0;
    if (g->j->req.stream) {
        g->res.lp_from = g->lp_sent; /* the tokens whose text this is (at least) */
        g->res.lp_to = g->lp ? cJSON_GetArraySize(g->lp) : 0;
        g->res.reasoning = nr ? r : NULL;
        g->res.tool_calls = g->calls;
        g->res.tc_from = g->calls_sent;
        g->res.tc_to = nc;
        char *c = srv_fmt_chunk(&g->j->req, &g->res, s, 0);
        g->res.reasoning = NULL;
        g->res.tc_from = g->res.tc_to = nc;
        int rc = c ? srv_job_emit(g->j, c, strlen(c)) : RKM_ENOMEM;
        free(c);
        g->lp_sent = g->res.lp_to;
        g->calls_sent = nc;
        return rc;
    }
    if (nr) {
        rkm_buf_add(&g->reasoning, r, nr);
        if (!rkm_buf_ok(&g->reasoning)) return RKM_ENOMEM;
    }
    if (g->n_text + n + 1 > g->cap_text) {
        size_t cap = RKM_MAX(g->cap_text * 2, g->n_text + n + 256);
        char *p = realloc(g->text, cap);
        if (!p) return RKM_ENOMEM;
        g->text = p;
        g->cap_text = cap;
    }
    memcpy(g->text + g->n_text, s, n + 1);
    g->n_text += n;
    return 0;
}

/* Generated text (after stop strings): through the <think> splitter when
 * the reply has reasoning to split off, then through the tool-call parser
 * when the request has tools (harmony's parser reads the raw text: its
 * calls are messages the splitter drops); last: the end of the reply. */
static int add_text(gen_ctx *g, const char *s, int last)
{
    if (!g->split && !g->tools) return emit_text(g, NULL, s);
    rkm_buf_clear(&g->rsn);
    rkm_buf_clear(&g->cnt);
    if (g->split) {
        srv_think_push(&g->think, s, strlen(s), &g->rsn, &g->cnt);
        if (last) srv_think_finish(&g->think, &g->rsn, &g->cnt);
    } else {
        rkm_buf_adds(&g->cnt, s);
    }
    if (!rkm_buf_ok(&g->rsn) || !rkm_buf_ok(&g->cnt)) return RKM_ENOMEM;
    const char *content = g->cnt.data ? g->cnt.data : "";
    if (g->tools) {
        int harmony = g->tp.fmt == SRV_TF_HARMONY;
        rkm_buf_clear(&g->tcnt);
        if (srv_toolp_push(&g->tp, harmony ? s : content, strlen(harmony ? s : content), &g->tcnt, g->calls) ||
            (last && srv_toolp_finish(&g->tp, &g->tcnt, g->calls)))
            return RKM_ENOMEM;
        if (!harmony || !g->split) content = g->tcnt.data ? g->tcnt.data : "";
    }
    return emit_text(g, g->rsn.data ? g->rsn.data : "", content);
}

static int on_token(int32_t id, void *user)
{
    gen_ctx *g = user;
    if (atomic_load(&g->j->canceled)) return 1;
    if (g->n_gen == 0) g->t_first = rkm_now();
    g->n_gen++;
    if (g->j->req.logprobs && add_logprob(g, id)) {
        g->oom = 1;
        return 1;
    }
    const char *out;
    size_t n;
    int rc = rkm_textout_push_token(g->to, id, &out, &n);
    if (rc < 0 || add_text(g, out, 0)) {
        g->oom = 1;
        return 1;
    }
    if (rc == 1) {
        g->stop_hit = 1;
        return 1;
    }
    if (g->e->cfg.slow_ms > 0) usleep((useconds_t)g->e->cfg.slow_ms * 1000);
    if (g->deadline > 0 && rkm_now() > g->deadline) { /* --max-request-time: the reply ends here */
        g->timed_out = 1;
        return 1;
    }
    return g->n_gen >= g->n_max;
}

static void make_id(char *buf, size_t cap, const char *prefix)
{
    static atomic_uint_fast64_t counter;
    uint64_t x = (uint64_t)atomic_fetch_add(&counter, 1) ^ (uint64_t)(unix_now() * 1e6);
    uint64_t h = rkm_hash(&x, sizeof x);
    snprintf(buf, cap, "%s%016llx", prefix, (unsigned long long)h);
}

/* Frees what a generation holds besides its job and prompt. */
static void free_media(srv_slot *sl)
{
    sl->venc_serial = 0; /* an image of it in the vision thread is nobody's now */
    if (!sl->media) return;
    rkm_media_prompt_free(sl->media);
    free(sl->media);
    sl->media = NULL;
}

static void gen_free(gen_ctx *g)
{
    rkm_textout_free(g->to);
    rkm_buf_free(&g->rsn), rkm_buf_free(&g->cnt), rkm_buf_free(&g->reasoning), rkm_buf_free(&g->tcnt);
    srv_toolp_free(&g->tp);
    cJSON_Delete(g->calls);
    cJSON_Delete(g->lp);
    free(g->text);
    memset(g, 0, sizeof *g);
}

/* What the choices of one generation share, for setting each up. */
typedef struct gen_setup {
    const char *tmpl;
    int chat, forced, inside;
    const char *prefill;
    const char *gbnf;   /* the tools' grammar, else the request's, or NULL */
} gen_setup;

/* Sets up choice `choice` of job j in slot sl: the slot's session, its
 * sampler (seed + choice) and grammar, the reply's parsers. 0, or a
 * status with a message in err. */
static int setup_choice(srv_engine *e, srv_slot *sl, srv_job *j, const srv_model_info *mi, int choice,
                        const gen_setup *gs, char *err, size_t errcap)
{
    const srv_request *rq = &j->req;
    if (ensure_session(e, sl, err, errcap)) return 500;
    if (session_set_sampler(e->model, sl->sess, rq, choice, err, errcap)) return 400;
    /* structured outputs: the request's grammar, or none */
    if (rkm_session_set_grammar(sl->sess, gs->gbnf)) {
        snprintf(err, errcap, "%s", rkm_last_error());
        return 400;
    }
    gen_ctx *g = &sl->g;
    memset(g, 0, sizeof *g);
    g->e = e;
    g->j = j;
    g->s = sl->sess;
    if (choice == 0) make_id(sl->id, sizeof sl->id, rq->kind == SRV_OPENAI_CHAT ? "chatcmpl-" : "cmpl-");
    snprintf(sl->model, sizeof sl->model, "%s", mi->name);
    g->res.model = sl->model;
    g->res.id = sl->id; /* choice 0's, copied into the others by the caller */
    g->res.created = (int64_t)unix_now();
    g->res.index = choice;
    /* a thinking model's reply: its <think> block becomes the reasoning
     * (unless thinking was switched off, or the reply is held to calls) */
    int harmony = gs->tmpl && strstr(gs->tmpl, "<|channel|>"); /* gpt-oss */
    g->split = !gs->forced && rq->think != 0 && gs->chat && (harmony || gs->inside || (gs->tmpl && strstr(gs->tmpl, "<think>")));
    if (harmony) srv_think_init_harmony(&g->think);
    else srv_think_init(&g->think, gs->inside);
    if (!(g->to = rkm_textout_new(e->model, (const char *const *)rq->stop, rq->n_stop))) {
        snprintf(err, errcap, "out of memory");
        return 500;
    }
    /* tools: the calls in the reply, in the format of the model's family */
    g->tools = gs->chat && srv_tools_active(rq);
    if (g->tools) {
        char base[32];
        make_id(base, sizeof base - 1, "call_");
        strcat(base, "_"); /* call_<16 hex>_<n> */
        srv_toolp_init(&g->tp, srv_tool_format(gs->tmpl), rq->tools, base);
        if (!(g->calls = cJSON_CreateArray())) {
            snprintf(err, errcap, "out of memory");
            return 500;
        }
        /* the prefill is the reply's start: the parser reads it first */
        if (gs->prefill && *gs->prefill) {
            rkm_buf_clear(&g->tcnt);
            srv_toolp_push(&g->tp, gs->prefill, strlen(gs->prefill), &g->tcnt, g->calls);
        }
    }
    rkm_session_stats_reset(sl->sess);
    return 0;
}

/* Sets up a generation in free slots (one per choice, n > 1): the prompt's
 * tokens, each slot's sampler and grammar, the reply's parsers, the
 * reused prefix. Choice 0's slot (the lead) reads the prompt; the others
 * wait for it and copy its session. 1 when the job holds its slots (the
 * steps run it), 0 when it ended here (an error answered). */
/* A request's images decoded and its prompt assembled with their rows
 * at the markers (*out, malloc'd). 0, or a status with a message in err
 * (400: an image that does not decode, within the size limits, or
 * markers and images that do not pair up). */
static int decode_images(srv_engine *e, const srv_request *rq, rkm_media_prompt **out, const char *prefill, int *inside,
                         char *err, size_t errcap)
{
    rkm_image im[SRV_MAX_IMAGES];
    memset(im, 0, sizeof im);
    for (int i = 0; i < rq->n_images; i++) {
        if (rkm_image_decode(rq->images[i].data, rq->images[i].len, NULL, &im[i])) {
            snprintf(err, errcap, "image %d: %s", i, rkm_last_error());
            for (int k = 0; k < i; k++) rkm_image_free(&im[k]);
            return 400;
        }
    }
    *out = calloc(1, sizeof **out);
    if (!*out) {
        for (int k = 0; k < rq->n_images; k++) rkm_image_free(&im[k]);
        snprintf(err, errcap, "out of memory");
        return 500;
    }
    if (srv_prompt_media(e->model, rq, prefill, &e->vhp, im, *out, inside, err, errcap)) {
        free(*out);
        *out = NULL;
        return 400;
    }
    return 0;
}

static int start_generate(srv_engine *e, srv_job *j, const srv_model_info *mi, double t0, double t_load)
{
    srv_request *rq = &j->req;
    char err[512];
    int32_t *toks = NULL;
    int n = 0, nc = RKM_MAX(1, rq->n_choices);
    gen_setup gs = {0};
    gs.tmpl = rkm_model_chat_template(e->model);
    gs.chat = rq->kind == SRV_OPENAI_CHAT || rq->kind == SRV_OLLAMA_CHAT || (rq->kind == SRV_OLLAMA_GENERATE && !rq->raw);
    /* tool_choice required or named: a grammar holds the reply to calls,
     * started by the format's prefill */
    char *tool_gbnf = NULL;
    gs.forced = gs.chat && srv_tools_active(rq) && rq->tool_choice >= SRV_TOOLS_REQUIRED;
    if (gs.forced) {
        if (rq->grammar) {
            job_fail(j, 400, "'tool_choice' required or named cannot be combined with a grammar or a response format");
            return 0;
        }
        tool_gbnf = srv_tool_grammar(srv_tool_format(gs.tmpl), rq->tools, rq->tool_choice == SRV_TOOLS_NAMED ? rq->tool_name : NULL,
                                     rq->parallel_tool_calls, &gs.prefill);
        if (!tool_gbnf) {
            snprintf(err, sizeof err, "tools: %s", rkm_last_error());
            job_fail(j, 400, err);
            return 0;
        }
    }
    gs.gbnf = tool_gbnf ? tool_gbnf : rq->grammar;
    srv_slot *sl[SRV_MAX_CHOICES];
    int got = 0, status = 400;
    rkm_media_prompt *media = NULL;
    int rc;
    if (rq->n_images > 0) {
        if ((status = takes_images(e, err, sizeof err)) || (status = decode_images(e, rq, &media, gs.prefill, &gs.inside, err, sizeof err)))
            goto fail;
        status = 400;
        n = media->n_ids;
        toks = malloc(sizeof(int32_t) * (size_t)n);
        if (!toks) {
            snprintf(err, sizeof err, "out of memory");
            status = 500;
            goto fail;
        }
        memcpy(toks, media->ids, sizeof(int32_t) * (size_t)n);
    } else if ((rc = srv_prompt_tokens(e->model, rq, gs.prefill, &toks, &n, &gs.inside, err, sizeof err))) {
        goto fail;
    }
    if (e->cfg.max_request_tokens > 0 && n >= e->cfg.max_request_tokens) {
        snprintf(err, sizeof err, "the prompt is %d tokens; this server takes at most %d a request (--max-request-tokens)", n,
                 e->cfg.max_request_tokens);
        goto fail;
    }
    if (n == 0 || n >= e->n_ctx) {
        snprintf(err, sizeof err, "the prompt is %d tokens; the context holds %d", n, e->n_ctx);
        goto fail;
    }
    if (nc > e->n_slots) {
        snprintf(err, sizeof err, "'n' is %d; this server runs at most %d generations at once (--parallel)", nc, e->n_slots);
        goto fail;
    }
    /* the lead where the prompt's prefix is; the others where least is lost */
    for (got = 0; got < nc; got++) {
        int si = pick_slot(e, toks, n, got == 0 && rq->cache_prompt);
        if (si < 0) { /* the worker admits only into free slots */
            snprintf(err, sizeof err, "no free sequence slot");
            status = 503;
            goto fail;
        }
        sl[got] = &e->slots[si];
        sl[got]->j = j; /* taken (pick_slot passes it over) */
        if ((status = setup_choice(e, sl[got], j, mi, got, &gs, err, sizeof err))) {
            got++;
            goto fail;
        }
        sl[got]->g.res.id = sl[0]->id;
    }
    free(tool_gbnf);
    tool_gbnf = NULL;

    /* The stream starts here: later errors are stream error lines. */
    if (rq->stream) {
        pthread_mutex_lock(&j->mu);
        j->streaming = 1;
        j->status = 200;
        pthread_mutex_unlock(&j->mu);
        for (int i = 0; i < nc && srv_is_openai(rq->kind); i++) {
            char *c = srv_fmt_chunk(rq, &sl[i]->g.res, "", 1);
            if (c) srv_job_emit(j, c, strlen(c));
            free(c);
        }
    }
    for (int i = 0; i < nc; i++) {
        srv_slot *s = sl[i];
        if (rq->echo && rq->prompt) emit_text(&s->g, NULL, rq->prompt);
        s->tp0 = rkm_now();
        /* the others' sessions are overwritten by the lead's: what they
         * held is saved first when worth it (reuse_prefix, nothing kept) */
        s->cached = reuse_prefix(e, s, toks, n, i == 0 && rq->cache_prompt);
        /* never from the middle of an image: from its first row */
        for (int k = 0; media && i == 0 && k < media->n_img; k++) {
            const rkm_media_image *mi_ = &media->img[k];
            if (s->cached > mi_->pos && s->cached < mi_->pos + mi_->n_tokens) {
                if (rkm_session_truncate(s->sess, mi_->pos)) rkm_session_truncate(s->sess, 0);
                s->cached = rkm_session_n_past(s->sess);
            }
        }
        s->live_dirty = 1;
        s->n = n;
        s->pos = s->cached;
        s->decoding = 0;
        s->wait_lead = i > 0;
        s->ended = 0;
        s->end_rc = 0;
        s->t0 = t0;
        s->t_prompt = 0;
        s->g.res.t_load_s = t_load;
    }
    sl[0]->toks = toks;
    sl[0]->media = media;
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < nc; i++) sl[i]->j_pub = j;
    e->n_active += nc;
    pthread_mutex_unlock(&e->mu);
    return 1;
fail:
    for (int i = 0; i < got; i++) {
        gen_free(&sl[i]->g);
        sl[i]->j = NULL;
    }
    free(toks);
    free(tool_gbnf);
    if (media) rkm_media_prompt_free(media);
    free(media);
    job_fail(j, status, err);
    return 0;
}

/* The slots of job j's choices, choice by choice; their count. */
static int choices_of(srv_engine *e, const srv_job *j, srv_slot **out)
{
    int n = 0;
    for (int i = 0; i < e->n_slots; i++)
        if (e->slots[i].j == j) out[n++] = &e->slots[i];
    for (int a = 1; a < n; a++) /* by choice index (few: insertion sort) */
        for (int b = a; b > 0 && out[b]->g.res.index < out[b - 1]->g.res.index; b--) {
            srv_slot *t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    return n;
}

/* Ends one choice: its counts to the metrics, its text flushed and its
 * result filled in (rc 0), or its failure noted. A choice of several
 * streams its finish chunk now. */
static void finish_choice(srv_engine *e, srv_slot *sl, int rc)
{
    gen_ctx *g = &sl->g;
    srv_job *j = sl->j;
    srv_request *rq = &j->req;
    double now = rkm_now();
    g->t_gen = sl->decoding ? now - g->t_gen0 : 0;
    if (!sl->decoding) sl->t_prompt = now - sl->tp0;
    if (atomic_load(&j->canceled)) rc = RKM_ECANCELED;
    int lead = g->res.index == 0;
    rkm_stats st;
    rkm_session_stats(sl->sess, &st);
    srv_gen_stats gs = {
        .n_prompt = lead ? sl->n - sl->cached + sl->replayed : 0, .n_cached = lead ? sl->cached - sl->replayed : 0,
        .n_gen = g->n_gen,
        .t_prompt_s = lead ? sl->t_prompt : 0, .t_gen_s = g->t_gen,
        .ttft_s = g->n_gen ? g->t_first - j->t_submit : -1,
        .expert_hits = st.expert_hits, .expert_misses = st.expert_misses,
        .bytes_read = st.bytes_read,
    };
    srv_metrics_generation(&gs);
    sl->ended = 1;
    sl->end_rc = rc;
    if (rc < 0) {
        /* A failed eval may leave rows half written: drop the whole state. */
        if (rc != RKM_ECANCELED) rkm_session_truncate(sl->sess, 0);
        return;
    }
    const char *tail;
    size_t n_tail;
    if (rkm_textout_flush(g->to, &tail, &n_tail) < 0 || add_text(g, tail, 1)) g->oom = 1;
    g->res.finish = !g->timed_out && (g->stop_hit || g->n_gen < g->n_max) ? "stop" : "length";
    if (g->timed_out)
        fprintf(stderr, "rkmojo serve: a reply stopped at its time limit (%g s, --max-request-time) after %d tokens\n",
                e->cfg.max_request_s, g->n_gen);
    int n_calls = g->calls ? cJSON_GetArraySize(g->calls) : 0;
    if (n_calls && !strcmp(g->res.finish, "stop")) g->res.finish = "tool_calls";
    g->res.tool_calls = g->calls;
    g->res.tc_from = rq->stream ? g->calls_sent : 0; /* the calls not yet sent */
    g->res.tc_to = n_calls;
    g->res.n_prompt = sl->n;
    g->res.n_cached = sl->cached - sl->replayed;
    g->res.n_gen = g->n_gen;
    g->res.t_prompt_s = sl->t_prompt;
    g->res.t_gen_s = g->t_gen;
    g->res.t_total_s = rkm_now() - j->t_submit; /* the wait in the queue included */
    g->res.text = g->text ? g->text : "";
    g->res.reasoning = !rq->stream && g->reasoning.len ? g->reasoning.data : NULL;
    g->res.lp_from = rq->stream ? g->lp_sent : 0; /* the tokens not yet sent */
    g->res.lp_to = g->lp ? cJSON_GetArraySize(g->lp) : 0;
    if (rq->stream && rq->n_choices > 1) {
        char *c = srv_fmt_choice_end(rq, &g->res);
        if (c) srv_job_emit(j, c, strlen(c));
        else g->oom = 1;
        free(c);
    }
}

/* Ends the generation of a slot's job: rc 0 (this choice's reply is
 * complete) or an error code (the whole job fails). Once every choice has
 * ended, the reply is finished and the slots are free for the next
 * requests. */
static void slot_end(srv_engine *e, srv_slot *sl, int rc)
{
    srv_job *j = sl->j;
    srv_request *rq = &j->req;
    srv_slot *cs[SRV_MAX_CHOICES];
    finish_choice(e, sl, rc);
    int nc = choices_of(e, j, cs), open = 0, fail = 0, oom = 0;
    for (int i = 0; i < nc; i++) {
        open += !cs[i]->ended;
        if (cs[i]->ended && cs[i]->end_rc < 0 && !fail) fail = cs[i]->end_rc;
        oom |= cs[i]->g.oom;
    }
    if (open && !fail) return; /* the other choices go on */
    for (int i = 0; i < nc; i++)
        if (!cs[i]->ended) finish_choice(e, cs[i], fail);
    if (fail) {
        pthread_mutex_lock(&e->mu);
        int stopping = e->stopping;
        pthread_mutex_unlock(&e->mu);
        if (fail == RKM_ECANCELED && stopping) {
            job_fail(j, 503, "the server is shutting down");
        } else if (fail == RKM_ECANCELED) {
            srv_metrics_event(SRV_EV_CANCELED);
            job_fail(j, 499, "canceled: the client disconnected");
        } else {
            char err[512];
            snprintf(err, sizeof err, "generation failed: %s", rkm_last_error());
            job_fail(j, 500, err);
        }
    } else {
        srv_result rs[SRV_MAX_CHOICES], usage = cs[0]->g.res;
        for (int i = 0; i < nc; i++) rs[i] = cs[i]->g.res;
        for (int i = 1; i < nc; i++) usage.n_gen += rs[i].n_gen;
        char *body = !rq->stream ? srv_fmt_result_n(rq, rs, nc)
                     : nc > 1    ? srv_fmt_stream_tail(rq, &usage)
                                 : srv_fmt_stream_end(rq, &rs[0]);
        if (body && !oom) {
            srv_job_emit(j, body, strlen(body));
            srv_job_finish(j, 200);
        } else {
            job_fail(j, 500, "out of memory");
        }
        free(body);
    }
    double now = rkm_now();
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < nc; i++) cs[i]->j_pub = NULL;
    e->n_active -= nc;
    double dt = now - cs[0]->t0;
    e->avg_job_s = e->avg_job_s > 0 ? 0.8 * e->avg_job_s + 0.2 * dt : dt;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < nc; i++) {
        gen_free(&cs[i]->g);
        free(cs[i]->toks);
        cs[i]->toks = NULL;
        free_media(cs[i]);
        cs[i]->j = NULL;
        cs[i]->ended = 0;
        cs[i]->wait_lead = 0;
        cs[i]->last_used = now;
    }
    e->last_used = now;
    srv_job_release(j);
    publish_expiry(e);
    if (e->model && e->keep_alive_s == 0 && e->n_active == 0) unload_model(e);
}

/* The prompt of a slot is in: its generation limits, then decoding. */
static void prefill_done(srv_engine *e, srv_slot *sl)
{
    gen_ctx *g = &sl->g;
    const srv_request *rq = &sl->j->req;
    sl->t_prompt = rkm_now() - sl->tp0;
    free(sl->toks);
    sl->toks = NULL;
    free_media(sl);
    int room = e->n_ctx - rkm_session_n_past(sl->sess);
    if (e->cfg.max_request_tokens > 0) room = RKM_MIN(room, e->cfg.max_request_tokens - sl->n);
    g->n_max = rq->max_tokens < 0 ? room : RKM_MIN(rq->max_tokens, room);
    g->deadline = e->cfg.max_request_s > 0 ? sl->t0 + e->cfg.max_request_s : 0;
    g->t_gen0 = rkm_now();
    sl->decoding = 1;
}

/* A slot with fresh logits: samples its next token, sends it out, and
 * either keeps it for the next step or ends the generation (an
 * end-of-generation token unless ignore_eos, a stop string, max_tokens,
 * the time limit, the client gone). */
static void next_token(srv_engine *e, srv_slot *sl)
{
    gen_ctx *g = &sl->g;
    if (g->n_max <= 0 || atomic_load(&sl->j->canceled)) {
        slot_end(e, sl, 0);
        return;
    }
    int32_t id;
    int rc = rkm_session_sample(sl->sess, &id);
    if (rc) {
        slot_end(e, sl, rc);
        return;
    }
    if ((!sl->j->req.ignore_eos && rkm_token_is_eog(e->model, id)) || on_token(id, g)) {
        slot_end(e, sl, 0);
        return;
    }
    sl->next = id;
}

/* The lead's prompt is in: the other choices take a copy of its session
 * (the prompt evaluated once) and start sampling from the same logits. */
static void start_choices(srv_engine *e, srv_slot *lead)
{
    srv_slot *cs[SRV_MAX_CHOICES];
    srv_job *j = lead->j;
    int nc = choices_of(e, j, cs);
    for (int i = 0; i < nc; i++) {
        srv_slot *sl = cs[i];
        if (!sl->wait_lead || sl->ended) continue;
        int rc = rkm_session_copy(sl->sess, lead->sess);
        if (rc) {
            slot_end(e, sl, rc);
            return; /* the whole job ended */
        }
        sl->wait_lead = 0;
        sl->tp0 = lead->tp0;
        prefill_done(e, sl);
        next_token(e, sl);
        if (!lead->j) return; /* the job ended (canceled) */
    }
}

/* The image whose rows start at sl->pos: queued to the vision thread,
 * and once encoded its rows evaluated into the slot's session (not in the
 * batch: Gemma 4's attend each other both ways), the prompt moved past
 * them; ends the slot on a failure, finishes its prompt when the image was
 * the end of it. 1 when the slot moved (or ended), 0 while its image
 * waits for the tower or is in it. */
static int image_rows(srv_engine *e, srv_slot *sl)
{
    int k = -1;
    for (int i = 0; sl->media && i < sl->media->n_img; i++)
        if (sl->media->img[i].pos == sl->pos) k = i;
    if (k < 0) {
        rkm_err(RKM_EINVAL, "image rows at position %d without their image", sl->pos);
        slot_end(e, sl, RKM_EINVAL);
        return 1;
    }
    srv_venc *q = &e->venc;
    int rc = 0;
    if (sl->venc_serial) { /* queued: done yet? */
        pthread_mutex_lock(&q->mu);
        const int done = q->state == VENC_DONE && q->serial == sl->venc_serial;
        float *rows = done ? q->rows : NULL;
        const int nt = q->n_rows;
        if (done) {
            rc = q->rc;
            if (rc) rkm_err(rc, "%s", q->err);
            q->rows = NULL;
            q->state = VENC_IDLE;
        }
        pthread_mutex_unlock(&q->mu);
        if (!done) return 0;
        sl->venc_serial = 0;
        e->vision_used = rkm_now();
        if (!rc) rc = rkm_media_image_put(sl->sess, sl->media, k, rows, nt, rkm_vision_n_out(e->vision));
        free(rows);
        if (rc) {
            slot_end(e, sl, rc);
            return 1;
        }
        sl->pos += sl->media->img[k].n_tokens;
        if (sl->pos == sl->n) {
            prefill_done(e, sl);
            next_token(e, sl);
            if (sl->j) start_choices(e, sl);
        }
        return 1;
    }
    /* a result nobody will take (its slot ended) frees the thread */
    pthread_mutex_lock(&q->mu);
    if (q->started && q->state == VENC_DONE) {
        int owner = 0;
        for (int i = 0; i < e->n_slots; i++) owner |= e->slots[i].venc_serial == q->serial;
        if (!owner) {
            free(q->rows);
            q->rows = NULL;
            q->state = VENC_IDLE;
        }
    }
    const int busy = q->started && q->state != VENC_IDLE;
    pthread_mutex_unlock(&q->mu);
    if (busy) return 0; /* another slot's image is in the tower */
    float *img = NULL;
    int w = 0, h = 0;
    if (!(rc = ensure_vision(e)) && (rc = rkm_vision_bind(e->vision, e->model)) > 0) rc = 0; /* its NPU's where the model runs there */
    if (!rc) rc = rkm_media_image_prep(sl->media, k, e->vision, &img, &w, &h);
    if (rc) {
        free(img);
        slot_end(e, sl, rc);
        return 1;
    }
    pthread_mutex_lock(&q->mu);
    q->img = img;
    q->w = w;
    q->h = h;
    q->serial = sl->venc_serial = ++e->venc_next;
    q->state = VENC_QUEUED;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

#define MAX_SLOTS 64
/* --parallel 0: rkm_model_params.plan_n_seq -1 plans for at most this many */
#define AUTO_SLOTS 4

/* One step: every decoding slot's next token and prompt chunks of the
 * slots still reading theirs (taken in turn, up to max_rows rows in all)
 * in one forward pass, then each slot's next token. */
static void step(srv_engine *e)
{
    srv_slot *in[MAX_SLOTS];
    rkm_session *ss[MAX_SLOTS];
    const int32_t *ids[MAX_SLOTS];
    int nn[MAX_SLOTS];
    int ns = 0, rows = 0, waiting = 0;
    for (int i = 0; i < e->n_slots; i++) {
        srv_slot *sl = &e->slots[i];
        if (sl->j && !sl->ended && atomic_load(&sl->j->canceled)) slot_end(e, sl, RKM_ECANCELED);
    }
    for (int i = 0; i < e->n_slots; i++) {
        srv_slot *sl = &e->slots[i];
        if (!sl->j || !sl->decoding || sl->ended) continue;
        in[ns] = sl, ss[ns] = sl->sess, ids[ns] = &sl->next, nn[ns] = 1;
        ns++, rows++;
    }
    for (int k = 0; k < e->n_slots && rows < e->max_rows; k++) {
        srv_slot *sl = &e->slots[(e->rr + k) % e->n_slots];
        if (!sl->j || sl->decoding || sl->wait_lead || sl->ended) continue;
        if (sl->toks[sl->pos] < -1) { /* an image's rows: encoded off the worker, evaluated on their own */
            if (!image_rows(e, sl)) {
                waiting++;
                continue;
            }
            if (!sl->j || sl->ended || sl->decoding || sl->pos >= sl->n) continue;
        }
        int c = RKM_MIN(sl->n - sl->pos, e->max_rows - rows);
        for (int t = 1; t < c; t++) /* the text up to the next image */
            if (sl->toks[sl->pos + t] < -1) {
                c = t;
                break;
            }
        in[ns] = sl, ss[ns] = sl->sess, ids[ns] = sl->toks + sl->pos, nn[ns] = c;
        ns++, rows += c;
    }
    e->rr = (e->rr + 1) % e->n_slots;
    if (ns == 0 && waiting) {
        /* every slot with work waits for the tower: sleep until it is done
         * or a request comes (the thread signals cv after its result) */
        pthread_mutex_lock(&e->mu);
        int busy = 0;
        if (e->venc.started) {
            pthread_mutex_lock(&e->venc.mu);
            busy = e->venc.state == VENC_QUEUED || e->venc.state == VENC_RUNNING;
            pthread_mutex_unlock(&e->venc.mu);
        }
        if (busy && e->q_len == 0 && !e->stopping) pthread_cond_wait(&e->cv, &e->mu);
        pthread_mutex_unlock(&e->mu);
    }
    if (ns == 0) return;
    /* every step through the batch, one slot or many: its scratch is the
     * only one the steps touch (the sessions' own stays unwritten) */
    if (!e->batch) {
        rkm_batch *b = rkm_batch_new(e->model, e->max_rows, e->n_ctx);
        pthread_mutex_lock(&e->mu);
        e->batch = e->batch_pub = b;
        pthread_mutex_unlock(&e->mu);
    }
    int rc = e->batch ? rkm_batch_eval(e->batch, ss, ids, nn, ns) : RKM_ENOMEM;
    for (int i = 0; i < ns; i++) {
        srv_slot *sl = in[i];
        if (!sl->j || sl->ended) continue; /* its job ended with another choice's failure */
        if (rc) {
            slot_end(e, sl, rc);
        } else if (sl->decoding) {
            next_token(e, sl);
        } else if ((sl->pos += nn[i]) == sl->n) {
            prefill_done(e, sl);
            next_token(e, sl);
            if (sl->j) start_choices(e, sl);
        }
    }
}

/* ---------------------------------------------------------- template */

/* POST /apply-template (llama.cpp's): the prompt a chat request renders to,
 * {"prompt": "..."}, without generating. */
static void run_template(srv_engine *e, srv_job *j)
{
    char err[512];
    int add_bos;
    char *text = srv_prompt_text(e->model, &j->req, &add_bos, err, sizeof err);
    if (!text) {
        job_fail(j, 400, err);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", text);
    free(text);
    char *body = srv_json_print(o);
    if (body) srv_job_emit(j, body, strlen(body));
    srv_job_finish(j, body ? 200 : 500);
    free(body);
}

/* ---------------------------------------------------------- embed */

/* Embedding of a text: the final-normed hidden state of its last token
 * (last-token pooling), L2-normalised. Each input gets a fresh session so
 * inputs do not see each other, and the chat session's KV is untouched. */
static void run_embed(srv_engine *e, srv_job *j, const srv_model_info *mi, double t0,
                      double t_load)
{
    srv_request *rq = &j->req;
    char err[512];
    int dim = rkm_model_n_embd(e->model), n_tok_total = 0;
    if (rq->dimensions > dim) {
        snprintf(err, sizeof err, "'dimensions' is %d; the model's embeddings have %d", rq->dimensions, dim);
        job_fail(j, 400, err);
        return;
    }
    /* dimensions: the first N values, L2-normalised again (OpenAI's
     * shortening; meaningful for models trained for it) */
    int keep = rq->dimensions > 0 ? rq->dimensions : dim;
    float *vecs = calloc((size_t)rq->n_inputs * (size_t)dim, sizeof(float));
    if (!vecs) {
        job_fail(j, 500, "out of memory");
        return;
    }
    /* the request's size first (tokenizing is cheap): over a limit, nothing is computed */
    if (rq->n_inputs > e->cfg.max_inputs) {
        snprintf(err, sizeof err, "%d inputs; this server takes at most %d a request (--max-inputs)", rq->n_inputs,
                 e->cfg.max_inputs);
        free(vecs);
        job_fail(j, 400, err);
        return;
    }
    int64_t total = 0;
    for (int i = 0; i < rq->n_inputs; i++) {
        int32_t *toks = NULL;
        int n = 0;
        if (srv_text_tokens(e->model, rq->inputs[i], &toks, &n, err, sizeof err)) {
            free(vecs);
            job_fail(j, 400, err);
            return;
        }
        free(toks);
        if (n == 0 || n > e->n_ctx) {
            snprintf(err, sizeof err, "input %d is %d tokens; the context holds %d", i, n, e->n_ctx);
            free(vecs);
            job_fail(j, 400, err);
            return;
        }
        total += n;
    }
    if (e->cfg.max_request_tokens > 0 && total > e->cfg.max_request_tokens) {
        snprintf(err, sizeof err, "the inputs are %lld tokens; this server takes at most %d a request (--max-request-tokens)",
                 (long long)total, e->cfg.max_request_tokens);
        free(vecs);
        job_fail(j, 400, err);
        return;
    }
    for (int i = 0; i < rq->n_inputs; i++) {
        if (e->cfg.max_request_s > 0 && rkm_now() - t0 > e->cfg.max_request_s) {
            snprintf(err, sizeof err, "the request ran past its time limit of %g s (--max-request-time) after %d of %d inputs",
                     e->cfg.max_request_s, i, rq->n_inputs);
            free(vecs);
            job_fail(j, 503, err);
            return;
        }
        int32_t *toks = NULL;
        int n = 0;
        if (srv_text_tokens(e->model, rq->inputs[i], &toks, &n, err, sizeof err)) {
            free(vecs);
            job_fail(j, 400, err);
            return;
        }
        rkm_session_params sp;
        rkm_session_params_default(&sp);
        sp.n_ctx = n;
        rkm_session *s = rkm_session_new(e->model, &sp);
        int rc = s ? rkm_session_eval(s, toks, n, NULL) : RKM_ENOMEM;
        float *v = vecs + (size_t)i * (size_t)dim;
        if (!rc) rc = rkm_session_embedding(s, v);
        rkm_session_free(s);
        free(toks);
        if (rc || atomic_load(&j->canceled)) {
            snprintf(err, sizeof err, "embedding failed: %s",
                     rc ? rkm_last_error() : "canceled");
            free(vecs);
            job_fail(j, rc ? 500 : 499, err);
            return;
        }
        double ss = 0;
        for (int k = 0; k < keep; k++) ss += (double)v[k] * v[k];
        float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
        float *o = vecs + (size_t)i * (size_t)keep; /* packed at the shorter width */
        for (int k = 0; k < keep; k++) o[k] = v[k] * inv;
        n_tok_total += n;
    }
    char *body = srv_fmt_embeddings(rq, mi->name, vecs, rq->n_inputs, keep, n_tok_total,
                                    rkm_now() - j->t_submit, t_load);
    free(vecs);
    if (!body) {
        job_fail(j, 500, "out of memory");
        return;
    }
    srv_job_emit(j, body, strlen(body));
    srv_job_finish(j, 200);
    free(body);
}

/* ---------------------------------------------------------- worker */

static int is_load_only(const srv_request *rq)
{
    if (rq->kind == SRV_OLLAMA_CHAT) return rq->n_msgs == 0;
    if (rq->kind == SRV_OLLAMA_GENERATE) return !rq->prompt || !rq->prompt[0];
    return 0;
}

/* Runs a job taken from the queue: answers it, or hands a generation to a
 * slot. 1 when a slot holds it (and the worker's reference with it). */
static int run_job(srv_engine *e, srv_job *j)
{
    double t0 = rkm_now();
    srv_metrics_queue_wait(t0 - j->t_submit);
    srv_request *rq = &j->req;
    char err[600];
    srv_model_info mi;
    memset(&mi, 0, sizeof mi);
    pthread_mutex_lock(&j->mu);
    j->started = 1;
    pthread_mutex_unlock(&j->mu);
    if (atomic_load(&j->canceled)) {
        job_fail(j, 499, "canceled");
        return 0;
    }
    /* No model named: the loaded one, else the first listed. */
    const char *want = rq->model && rq->model[0] ? rq->model : e->model ? e->loaded.name : "";
    if (srv_models_find(e->models, want, &mi)) {
        snprintf(err, sizeof err, "model '%s' not found", rq->model);
        job_fail(j, 404, err);
        return 0;
    }
    int unload_only = is_load_only(rq) && rq->has_keep_alive && rq->keep_alive_s == 0;
    double t_load = 0;
    if (unload_only) {
        if (e->model && !strcmp(e->loaded.path, mi.path)) unload_model(e);
    } else if (ensure_model(e, &mi, &t_load, err, sizeof err)) {
        free(mi.path);
        job_fail(j, 500, err);
        return 0;
    }
    /* Ollama semantics: each request sets how long the model stays. */
    e->keep_alive_s = rq->has_keep_alive ? rq->keep_alive_s
                      : e->cfg.idle_unload_s > 0 ? e->cfg.idle_unload_s : -1;
    int kept = 0;
    if (is_load_only(rq)) {
        srv_result r = {.model = mi.name, .id = "", .created = (int64_t)unix_now(), .text = "",
                        .finish = unload_only ? "unload" : "load", .t_load_s = t_load,
                        .t_total_s = rkm_now() - j->t_submit};
        srv_request nostream = *rq;
        nostream.stream = 0;
        char *body = srv_fmt_result(&nostream, &r);
        if (body) srv_job_emit(j, body, strlen(body));
        free(body);
        srv_job_finish(j, body ? 200 : 500);
    } else if (j->type == SRV_JOB_EMBED) {
        run_embed(e, j, &mi, t0, t_load);
    } else if (j->type == SRV_JOB_TEMPLATE) {
        run_template(e, j);
    } else {
        kept = start_generate(e, j, &mi, t0, t_load);
    }
    free(mi.path);
    e->last_used = rkm_now();
    publish_expiry(e);
    if (e->model && e->keep_alive_s == 0 && e->n_active == 0) unload_model(e);
    return kept;
}

/* Fair admission: the queued job to take next is the first (in arrival
 * order) whose client holds the fewest slots now, so a client with many
 * requests running or queued does not keep the others waiting; among
 * clients with nothing running, FIFO. Its place in the queue. engine->mu
 * held. */
static int fair_pick(const srv_engine *e)
{
    if (e->n_active == 0) return 0;
    int best = 0, best_n = INT32_MAX;
    for (int k = 0; k < e->q_len && best_n > 0; k++) {
        const srv_job *j = e->q[(e->q_head + k) % e->q_cap];
        int n = 0;
        for (int i = 0; i < e->n_slots; i++)
            n += e->slots[i].j && e->slots[i].j->client == j->client;
        if (n < best_n) best = k, best_n = n;
    }
    return best;
}

/* Slots job j takes: a generation's n choices (more than there are:
 * refused at once, none); none for the jobs that run between steps. */
static int slots_needed(const srv_engine *e, const srv_job *j)
{
    if (j->type != SRV_JOB_GENERATE || is_load_only(&j->req)) return 0;
    int n = RKM_MAX(1, j->req.n_choices);
    return n > e->n_slots ? 0 : n;
}

/* Whether job j may start while generations run: a job for the loaded
 * model, whose files have not changed, that does not unload it (else it
 * waits for the slots to drain). A generation takes slots; embeddings,
 * templates and loads run between two steps. Jobs that will only be
 * answered with an error join at once. */
static int can_join(srv_engine *e, srv_job *j)
{
    if (atomic_load(&j->canceled)) return 1;
    /* once refused, a job waits for the drain: the lookup and the files'
     * check are not repeated at every step */
    if (j->wait_drain) return 0;
    int join = 0;
    if (e->model && !(is_load_only(&j->req) && j->req.has_keep_alive && j->req.keep_alive_s == 0)) {
        srv_model_info mi;
        const char *want = j->req.model && j->req.model[0] ? j->req.model : e->loaded.name;
        if (srv_models_find(e->models, want, &mi)) return 1; /* a 404 */
        join = !strcmp(mi.path, e->loaded.path) && !rkm_model_files_changed(e->model) && !rkm_model_check(e->model);
        free(mi.path);
    }
    j->wait_drain = !join;
    return join;
}

/* Applies expiry and the size cap to every model's saved states at start,
 * not only when a model is first loaded. */
static void sweep_prompt_caches(srv_engine *e)
{
    if (!e->cfg.prompt_cache_dir) return;
    srv_model_info *l;
    int n = srv_models_list(e->models, &l);
    for (int i = 0; i < n; i++) {
        char *dir = rkm_path_join(e->cfg.prompt_cache_dir, l[i].name);
        struct stat st;
        if (dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
            srv_pcache_close(srv_pcache_open(dir, e->cfg.prompt_cache_max_bytes, e->cfg.prompt_cache_ttl_s));
        free(dir);
    }
    if (n >= 0) srv_models_list_free(l, n);
}

static void *worker_main(void *arg)
{
    srv_engine *e = arg;
    sweep_prompt_caches(e);
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->stopping && e->q_len == 0 && e->n_active == 0) {
            /* the vision tower first: it goes long before the model does */
            double vleft = e->vision && e->cfg.vision_idle_s > 0 ? e->vision_used + e->cfg.vision_idle_s - rkm_now() : 1e18;
            if (vleft <= 0) {
                pthread_mutex_unlock(&e->mu);
                fprintf(stderr, "rkmojo serve: vision tower of %s freed (idle)\n", e->loaded.name);
                free_vision(e);
                pthread_mutex_lock(&e->mu);
                continue;
            }
            if ((e->model && e->keep_alive_s > 0) || vleft < 1e18) {
                double left = e->model && e->keep_alive_s > 0 ? e->last_used + e->keep_alive_s - rkm_now() : 1e18;
                if (left <= 0) {
                    pthread_mutex_unlock(&e->mu);
                    fprintf(stderr, "rkmojo serve: unloading %s (idle)\n", e->loaded.name);
                    unload_model(e);
                    pthread_mutex_lock(&e->mu);
                    continue;
                }
                left = RKM_MIN(left, vleft);
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                double w = RKM_MIN(left, 3600.0);
                ts.tv_sec += (time_t)w;
                ts.tv_nsec += (long)((w - floor(w)) * 1e9);
                if (ts.tv_nsec >= 1000000000L) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&e->cv, &e->mu, &ts);
            } else {
                pthread_cond_wait(&e->cv, &e->mu);
            }
        }
        if (e->stopping) break;
        /* Admission, in FIFO order, into free slots; the head job that
         * cannot join the running generations waits for them to end. */
        while (e->q_len > 0 && !e->stopping) {
            int k = fair_pick(e); /* only this thread takes from the queue: k stays valid unlocked */
            srv_job *j = e->q[(e->q_head + k) % e->q_cap];
            if (e->n_active + slots_needed(e, j) > e->n_slots) break;
            if (e->n_active > 0) {
                pthread_mutex_unlock(&e->mu);
                int join = can_join(e, j);
                pthread_mutex_lock(&e->mu);
                if (!join) break;
            }
            for (int i = k; i > 0; i--) /* the ones before it move up a place */
                e->q[(e->q_head + i) % e->q_cap] = e->q[(e->q_head + i - 1) % e->q_cap];
            e->q_head = (e->q_head + 1) % e->q_cap;
            e->q_len--;
            e->running = j;
            pthread_mutex_unlock(&e->mu);

            double t0 = rkm_now();
            int kept = run_job(e, j);
            double dt = rkm_now() - t0;

            pthread_mutex_lock(&e->mu);
            e->running = NULL;
            if (!kept) {
                e->avg_job_s = e->avg_job_s > 0 ? 0.8 * e->avg_job_s + 0.2 * dt : dt;
                pthread_mutex_unlock(&e->mu);
                srv_job_release(j);
                pthread_mutex_lock(&e->mu);
            }
        }
        if (e->n_active == 0 || e->stopping) continue;
        pthread_mutex_unlock(&e->mu);
        step(e);
        pthread_mutex_lock(&e->mu);
    }
    /* Stopping: the running generations end, what is still queued gets an
     * answer. */
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < e->n_slots; i++)
        if (e->slots[i].j && !e->slots[i].ended) slot_end(e, &e->slots[i], RKM_ECANCELED);
    pthread_mutex_lock(&e->mu);
    while (e->q_len > 0) {
        srv_job *j = e->q[e->q_head];
        e->q_head = (e->q_head + 1) % e->q_cap;
        e->q_len--;
        pthread_mutex_unlock(&e->mu);
        job_fail(j, 503, "the server is shutting down");
        srv_job_release(j);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    unload_model(e);
    return NULL;
}

srv_engine *srv_engine_new(const srv_config *c)
{
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->cfg = *c;
    e->q_cap = RKM_MAX(1, c->queue_max);
    e->q = calloc((size_t)e->q_cap, sizeof *e->q);
    /* --parallel N, or up to AUTO_SLOTS as the memory plan allows */
    e->cap_slots = c->parallel > 0 ? RKM_MIN(c->parallel, MAX_SLOTS) : AUTO_SLOTS;
    e->n_slots = e->cap_slots;
    e->slots = calloc((size_t)e->cap_slots, sizeof *e->slots);
    e->models = srv_models_new(c->model_path, c->models_dir);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->keep_alive_s = c->idle_unload_s > 0 ? c->idle_unload_s : -1;
    e->expires_at = -1;
    if (!e->q || !e->slots || !e->models) goto fail;
    if (pthread_create(&e->worker, NULL, worker_main, e)) {
        rkm_err(RKM_ENOMEM, "cannot start the worker thread");
        goto fail;
    }
    e->worker_started = 1;
    return e;
fail:
    if (!rkm_last_error()[0]) rkm_err(RKM_ENOMEM, "out of memory");
    srv_engine_free(e);
    return NULL;
}

void srv_engine_stop(srv_engine *e)
{
    if (e && e->worker_started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = 1;
        if (e->running) atomic_store(&e->running->canceled, 1);
        for (int i = 0; i < e->cap_slots; i++)
            if (e->slots[i].j_pub) atomic_store(&e->slots[i].j_pub->canceled, 1);
        if (e->batch_pub) rkm_batch_cancel(e->batch_pub);
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->worker, NULL);
        e->worker_started = 0;
    }
}

void srv_engine_free(srv_engine *e)
{
    if (!e) return;
    srv_engine_stop(e);
    srv_models_free(e->models);
    free(e->q);
    free(e->slots);
    free(e->loaded.path);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
