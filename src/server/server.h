/*
 * server.h - internals of rkmojo serve shared by http.c (libmicrohttpd
 * glue), engine.c (the FIFO queue and the worker running the slots),
 * models.c (the model registry), prompt_cache.c (KV states on disk),
 * prompt.c (request -> prompt tokens) and metrics.c (Prometheus
 * formatting of counters, typed events and the engine's gauges). The API
 * layer below them is api.h (dispatch.c over openai.c and ollama.c, both
 * over fields.h); text output and chat prompts come from the public API
 * (rkm_textout, rkm_chat_prompt).
 *
 * Threads: libmicrohttpd runs one thread per connection (they parse, wait
 * and stream); one worker thread owns the loaded model, its sequence slots
 * (one session each) and the prompt cache, admits jobs in FIFO order and
 * advances the running generations together. They meet in srv_job
 * (guarded by job->mu) and in the engine's queue (engine->mu).
 */
#ifndef RKM_SERVER_H
#define RKM_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rkmojo.h"
#include "util/buf.h"
#include "server/api.h"
#include "server/fields.h"

typedef struct srv_config {
    const char *model_path;      /* -m: one model directory */
    const char *models_dir;      /* --models-dir: one model per subdirectory */
    const char *host;            /* bind address (127.0.0.1) */
    int port;                    /* 0: any free port (printed) */
    uint64_t mem_budget_bytes;   /* passed to rkm_model_open */
    int n_threads;               /* 0: library default */
    int n_ctx;                   /* 0: library default */
    /* expert streaming (rkm_model_params): slots per layer (0: from the
     * budget), LFU 0 / LRU 1, prefetch -1 default / 0 / 1, IO threads (0:
     * default), backend 0 auto / 1 cpu / 2 rknn, cache scope (0 default,
     * 1 per layer, 2 one pool), lazy experts (1: no background fill) */
    int expert_cache_slots, cache_policy, prefetch, io_threads, backend;
    int cache_scope, lazy_experts;
    const char *api_key;         /* NULL: no authentication */
    const char *allow_hosts;     /* Host names answered besides the default (websafe.h), comma list, or NULL */
    const char *allow_origins;   /* browser origins allowed besides the default (websafe.h), or NULL */
    const char *trusted_proxies; /* peers whose X-Forwarded-For names the client (fair admission), comma list, or NULL */
    double idle_unload_s;        /* unload a model idle this long; <= 0 never */
    int parallel;                /* sequence slots: generations that run at once; 0: up to 4 as the memory plan allows */
    int queue_max;               /* waiting requests before 503 */
    size_t body_max_bytes;       /* request body cap */
    const char *prompt_cache_dir;/* NULL: prompt cache in memory only */
    uint64_t prompt_cache_max_bytes;
    double prompt_cache_ttl_s;
    int slow_ms;                 /* test knob: sleep per generated token */
    int http_timeout_s;          /* idle connection timeout (keep-alive, slow clients) */
    int max_conn_per_addr;       /* open connections one client address may hold (0: no cap) */
    int max_request_tokens;      /* tokens one request may process: prompt + generated, or all inputs (0: no cap) */
    int max_inputs;              /* embedding inputs per request */
    double max_request_s;        /* wall time of one request's work (0: no limit) */
    double header_timeout_s;     /* a request head must arrive within this (0: no deadline) */
    const char *port_file;       /* write the bound port here (tests) */
    int pull;                    /* /api/pull: 1 allowed, 0 refused, -1 (default) allowed when api_key is set */
    int image_urls;              /* fetch images that requests name by http(s) URL (off by default) */
    double vision_idle_s;        /* free the vision tower unused this long (the model stays); <= 0 never */
    int image_min_tokens, image_max_tokens; /* bounds on one image's tokens (0: the projector's) */
} srv_config;

void srv_config_default(srv_config *c);
/* Runs until *stop becomes non-zero (checked every 100 ms). 0 or error. */
int srv_run(const srv_config *c, volatile int *stop);

/* ------------------------------------------------------------- jobs */

enum srv_job_type { SRV_JOB_GENERATE = 0, SRV_JOB_EMBED, SRV_JOB_TEMPLATE, SRV_JOB_LOAD, SRV_JOB_UNLOAD };

typedef struct srv_job {
    int type;                   /* enum srv_job_type */
    srv_request req;            /* owned; read-only after submit */
    double t_submit;
    uint64_t client;            /* the client's address key (srv_gate_client), for fair admission */
    int wait_drain;             /* worker only: refused to join running generations, waits for them to end */
    atomic_int canceled;        /* set by the HTTP side when the client left */
    pthread_mutex_t mu;         /* guards everything below */
    pthread_cond_t cv;          /* signalled on new output and when done */
    int started;                /* worker began the job */
    int done;                   /* no more output will come */
    int status;                 /* HTTP status of the response */
    int streaming;              /* out holds stream chunks (after a 200) */
    rkm_buf out;                /* response bytes produced; [0, out_sent) already sent */
    size_t out_sent;
    int refs;                   /* HTTP side + worker; freed at 0 */
} srv_job;

srv_job *srv_job_new(int type);
void srv_job_release(srv_job *j);
/* Worker side: append response bytes / finish. */
int srv_job_emit(srv_job *j, const char *s, size_t n);
void srv_job_finish(srv_job *j, int status);

/* ------------------------------------------------------------- engine */

typedef struct srv_engine srv_engine;

srv_engine *srv_engine_new(const srv_config *c);
/* Stops the worker: the running job is canceled, queued ones get 503, the
 * live session is saved to the prompt cache and the model closed. Later
 * submits fail. */
void srv_engine_stop(srv_engine *e);
/* Stops (if needed) and frees. */
void srv_engine_free(srv_engine *e);
/* The client of j has gone: the worker drops it (queued) or stops it within
 * a token (running). Any thread. */
void srv_engine_cancel(srv_engine *e, srv_job *j);
/* Queues a job (takes a reference). RKM_EBUDGET when the queue is full
 * (*retry_after_s says when to come back), RKM_ECANCELED when stopping. */
int srv_engine_submit(srv_engine *e, srv_job *j, int *retry_after_s);
int srv_engine_queue_depth(srv_engine *e);
/* 1 while a job runs. */
int srv_engine_busy(srv_engine *e);
/* Slots generating now (*n_slots: all of them). */
int srv_engine_slots_busy(srv_engine *e, int *n_slots);
const srv_config *srv_engine_config(srv_engine *e);
/* The chat page served at / (webui.c): HTML, NUL-terminated. */
extern const char srv_webui_html[];
struct srv_models *srv_engine_models(srv_engine *e);
/* JSON for /api/ps (malloc'd). */
char *srv_engine_ps_json(srv_engine *e);
/* Name of the loaded model into buf ("" if none). */
void srv_engine_loaded(srv_engine *e, char *buf, size_t cap);

/* ------------------------------------------------------------- models */

typedef struct srv_model_info {
    char name[136];       /* as clients name it (directory name less .rkmojo) */
    char *path;           /* the model directory */
    uint64_t bytes;       /* size on disk */
    double mtime;         /* unix seconds */
    char arch[32];
    char quant[32];
    uint64_t n_params;    /* from the manifest's tensor shapes (0 if unknown) */
    int n_ctx_train;
    uint64_t digest;      /* hash of the manifest */
} srv_model_info;

typedef struct srv_models srv_models;

srv_models *srv_models_new(const char *model_path, const char *models_dir);
void srv_models_free(srv_models *ms);
/* Rescans the directory (models added or removed while running). */
void srv_models_refresh(srv_models *ms);
/* Rescans now (a model was just added). */
void srv_models_rescan(srv_models *ms);
/* Copies the entry a client name refers to into *out (path strdup'd: free
 * out->path). Single-model mode accepts any name; an empty name is the
 * first model. 0 or RKM_ENOENT. */
int srv_models_find(srv_models *ms, const char *name, srv_model_info *out);
/* Snapshot of all entries (free with srv_models_list_free). */
int srv_models_list(srv_models *ms, srv_model_info **out);
void srv_models_list_free(srv_model_info *l, int n);
/* JSON documents for /v1/models, /api/tags, /api/show (malloc'd). */
char *srv_models_openai_json(srv_models *ms);
/* GET /v1/models/{id}: the one model object, NULL if there is no such model. */
char *srv_models_openai_one_json(srv_models *ms, const char *id);
char *srv_models_tags_json(srv_models *ms);
char *srv_models_show_json(srv_models *ms, const char *name, const char *chat_template);
void srv_model_details(cJSON *o, const srv_model_info *mi);
/* A parameter count as Ollama shows it: "20.9B", "1.1M", "512.0K". */
void srv_fmt_params(uint64_t n, char *buf, size_t cap);

/* ------------------------------------------------------- prompt cache */

typedef struct srv_pcache srv_pcache;

/* dir is created if needed; expired, orphaned and broken files removed. */
srv_pcache *srv_pcache_open(const char *dir, uint64_t max_bytes, double ttl_s);
void srv_pcache_close(srv_pcache *pc);
/* Entry whose tokens share the longest prefix with toks (-1 if none);
 * *lcp receives the shared length. */
int srv_pcache_best(srv_pcache *pc, const int32_t *toks, int n, int *lcp);
/* Loads entry idx into s; verifies the restored tokens. On failure the
 * entry is removed and s is left empty (n_past 0). */
int srv_pcache_load(srv_pcache *pc, int idx, rkm_session *s, char id_out[17]);
/* Saves s; replaces entry `id` when s still extends its tokens, otherwise
 * creates a new entry; then enforces the size cap and expiry. */
int srv_pcache_store(srv_pcache *pc, const char *id, rkm_session *s, char id_out[17]);
int srv_pcache_count(const srv_pcache *pc);
uint64_t srv_pcache_bytes(const srv_pcache *pc);

/* ------------------------------------------------------------ metrics */

typedef struct srv_gen_stats {
    int n_prompt, n_cached, n_gen;
    double t_prompt_s, t_gen_s, ttft_s;
    uint64_t expert_hits, expert_misses, bytes_read;
} srv_gen_stats;

/* What the worker and the HTTP side count, one counter each. */
enum srv_event {
    SRV_EV_CANCELED = 0, /* a generation stopped because its client left */
    SRV_EV_REJECTED,     /* 503: the queue was full */
    SRV_EV_PCACHE_LOAD,  /* a session state loaded from the disk prompt cache */
    SRV_EV_PCACHE_STORE, /* a session state saved to it */
    SRV_EV_MODEL_LOAD,
    SRV_EV_MODEL_UNLOAD,
    SRV_EV_COUNT
};

/* The gauges of one /metrics page, collected by the engine
 * (srv_engine_gauges) so that metrics.c only formats numbers. */
typedef struct srv_gauges {
    int queue_depth;              /* requests waiting */
    int slots, slots_busy;        /* sequence slots, and those generating */
    char model_loaded[160];       /* name of the loaded model, "" if none */
    uint64_t resident_bytes;      /* RSS of the process now */
    uint64_t peak_resident_bytes; /* its peak */
} srv_gauges;

void srv_engine_gauges(srv_engine *e, srv_gauges *g);

void srv_metrics_init(void);
void srv_metrics_request(const char *endpoint, int status);
void srv_metrics_generation(const srv_gen_stats *st);
void srv_metrics_event(enum srv_event ev);
/* A job's wait in the queue, from submission to the worker taking it. */
void srv_metrics_queue_wait(double s);
/* Prometheus text exposition of the counters and g (malloc'd). */
char *srv_metrics_text(const srv_gauges *g);

#endif
