/*
 * metrics.c - counters of rkmojo serve and their Prometheus text
 * exposition (GET /metrics): requests by endpoint and status, tokens,
 * prefill and decode throughput, time to first token (histogram), expert
 * cache hits, bytes read from disk, typed events (enum srv_event), and the
 * gauges the engine hands in (queue depth, loaded model, resident memory).
 * It reads nothing itself: every number arrives through a call.
 *
 * Threads: HTTP threads count requests, the worker counts generations;
 * one process-wide mutex guards every counter (updates are a few per
 * request, so contention is nil).
 */
#include "server/server.h"
#include "util/buf.h"
#include "util/common.h"

#define MAX_SERIES 64
static const double ttft_bounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define N_TTFT (sizeof ttft_bounds / sizeof ttft_bounds[0])

static struct {
    pthread_mutex_t mu;
    struct {
        char endpoint[32];
        int status;
        uint64_t n;
    } req[MAX_SERIES];
    int n_req;
    uint64_t n_gen_requests;
    uint64_t prompt_tokens, cached_tokens, gen_tokens;
    double prefill_s, decode_s;
    double last_prefill_tps, last_decode_tps;
    uint64_t ttft_bucket[N_TTFT + 1];
    double ttft_sum;
    uint64_t ttft_count;
    uint64_t wait_bucket[N_TTFT + 1]; /* queue waits, in the same buckets */
    double wait_sum;
    uint64_t wait_count;
    uint64_t expert_hits, expert_misses, bytes_read;
    uint64_t events[SRV_EV_COUNT];
} M = {.mu = PTHREAD_MUTEX_INITIALIZER};

void srv_metrics_init(void)
{
    pthread_mutex_lock(&M.mu);
    M.n_req = 0;
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_request(const char *endpoint, int status)
{
    pthread_mutex_lock(&M.mu);
    int i;
    for (i = 0; i < M.n_req; i++)
        if (M.req[i].status == status && !strcmp(M.req[i].endpoint, endpoint)) break;
    if (i == M.n_req && M.n_req < MAX_SERIES) {
        snprintf(M.req[i].endpoint, sizeof M.req[i].endpoint, "%s", endpoint);
        M.req[i].status = status;
        M.req[i].n = 0;
        M.n_req++;
    }
    if (i < M.n_req) M.req[i].n++;
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_generation(const srv_gen_stats *st)
{
    pthread_mutex_lock(&M.mu);
    M.n_gen_requests++;
    M.prompt_tokens += (uint64_t)st->n_prompt;
    M.cached_tokens += (uint64_t)st->n_cached;
    M.gen_tokens += (uint64_t)st->n_gen;
    M.prefill_s += st->t_prompt_s;
    M.decode_s += st->t_gen_s;
    if (st->n_prompt > 0 && st->t_prompt_s > 0) M.last_prefill_tps = st->n_prompt / st->t_prompt_s;
    if (st->n_gen > 1 && st->t_gen_s > 0) M.last_decode_tps = st->n_gen / st->t_gen_s;
    if (st->ttft_s >= 0) {
        size_t b = 0;
        while (b < N_TTFT && st->ttft_s > ttft_bounds[b]) b++;
        M.ttft_bucket[b]++;
        M.ttft_sum += st->ttft_s;
        M.ttft_count++;
    }
    M.expert_hits += st->expert_hits;
    M.expert_misses += st->expert_misses;
    M.bytes_read += st->bytes_read;
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_queue_wait(double s)
{
    if (!(s >= 0)) s = 0;
    pthread_mutex_lock(&M.mu);
    size_t b = 0;
    while (b < N_TTFT && s > ttft_bounds[b]) b++;
    M.wait_bucket[b]++;
    M.wait_sum += s;
    M.wait_count++;
    pthread_mutex_unlock(&M.mu);
}

/* Counter name and help of each event, in enum srv_event order. */
static const struct {
    const char *name, *help;
} event_info[SRV_EV_COUNT] = {
    [SRV_EV_CANCELED] = {"rkmojo_canceled_total", "Generations canceled (client gone)."},
    [SRV_EV_REJECTED] = {"rkmojo_rejected_total", "Requests refused with 503 (queue full)."},
    [SRV_EV_PCACHE_LOAD] = {"rkmojo_prompt_cache_loads_total", "Session states loaded from disk."},
    [SRV_EV_PCACHE_STORE] = {"rkmojo_prompt_cache_stores_total", "Session states saved to disk."},
    [SRV_EV_MODEL_LOAD] = {"rkmojo_model_loads_total", "Model loads."},
    [SRV_EV_MODEL_UNLOAD] = {"rkmojo_model_unloads_total", "Model unloads."},
};

void srv_metrics_event(enum srv_event ev)
{
    if ((unsigned)ev >= SRV_EV_COUNT) return;
    pthread_mutex_lock(&M.mu);
    M.events[ev]++;
    pthread_mutex_unlock(&M.mu);
}

static void metric(rkm_buf *b, const char *name, const char *type, const char *help)
{
    rkm_buf_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A histogram of the ttft_bounds buckets. */
static void histogram(rkm_buf *b, const char *name, const char *help, const uint64_t *bucket, double sum, uint64_t count)
{
    metric(b, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < N_TTFT; i++) {
        cum += bucket[i];
        rkm_buf_addf(b, "%s_bucket{le=\"%g\"} %llu\n", name, ttft_bounds[i], (unsigned long long)cum);
    }
    cum += bucket[N_TTFT];
    rkm_buf_addf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    rkm_buf_addf(b, "%s_sum %.6f\n%s_count %llu\n", name, sum, name, (unsigned long long)count);
}

char *srv_metrics_text(const srv_gauges *g)
{
    rkm_buf b = RKM_BUF_INIT;
    pthread_mutex_lock(&M.mu);
    metric(&b, "rkmojo_requests_total", "counter", "HTTP requests by endpoint and status.");
    for (int i = 0; i < M.n_req; i++)
        rkm_buf_addf(&b, "rkmojo_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
                     M.req[i].endpoint, M.req[i].status, (unsigned long long)M.req[i].n);
    metric(&b, "rkmojo_generations_total", "counter", "Completed generation requests.");
    rkm_buf_addf(&b, "rkmojo_generations_total %llu\n", (unsigned long long)M.n_gen_requests);
    metric(&b, "rkmojo_prompt_tokens_total", "counter", "Prompt tokens evaluated (prefill).");
    rkm_buf_addf(&b, "rkmojo_prompt_tokens_total %llu\n", (unsigned long long)M.prompt_tokens);
    metric(&b, "rkmojo_prompt_tokens_cached_total", "counter",
           "Prompt tokens reused from the prompt cache instead of evaluated.");
    rkm_buf_addf(&b, "rkmojo_prompt_tokens_cached_total %llu\n", (unsigned long long)M.cached_tokens);
    metric(&b, "rkmojo_generated_tokens_total", "counter", "Tokens generated.");
    rkm_buf_addf(&b, "rkmojo_generated_tokens_total %llu\n", (unsigned long long)M.gen_tokens);
    metric(&b, "rkmojo_prefill_seconds_total", "counter", "Wall time of prompt evaluation.");
    rkm_buf_addf(&b, "rkmojo_prefill_seconds_total %.6f\n", M.prefill_s);
    metric(&b, "rkmojo_decode_seconds_total", "counter", "Wall time of generation.");
    rkm_buf_addf(&b, "rkmojo_decode_seconds_total %.6f\n", M.decode_s);
    metric(&b, "rkmojo_prefill_tokens_per_second", "gauge", "Prefill speed of the last request.");
    rkm_buf_addf(&b, "rkmojo_prefill_tokens_per_second %.3f\n", M.last_prefill_tps);
    metric(&b, "rkmojo_decode_tokens_per_second", "gauge", "Decode speed of the last request.");
    rkm_buf_addf(&b, "rkmojo_decode_tokens_per_second %.3f\n", M.last_decode_tps);
    histogram(&b, "rkmojo_ttft_seconds", "Time from a request entering the queue to its first generated token.",
              M.ttft_bucket, M.ttft_sum, M.ttft_count);
    histogram(&b, "rkmojo_queue_wait_seconds", "Time from a request entering the queue to the worker taking it.",
              M.wait_bucket, M.wait_sum, M.wait_count);
    metric(&b, "rkmojo_expert_cache_hits_total", "counter", "Routed-expert lookups served from memory.");
    rkm_buf_addf(&b, "rkmojo_expert_cache_hits_total %llu\n", (unsigned long long)M.expert_hits);
    metric(&b, "rkmojo_expert_cache_misses_total", "counter", "Routed-expert lookups read from disk.");
    rkm_buf_addf(&b, "rkmojo_expert_cache_misses_total %llu\n", (unsigned long long)M.expert_misses);
    uint64_t lookups = M.expert_hits + M.expert_misses;
    metric(&b, "rkmojo_expert_cache_hit_ratio", "gauge", "Hits over lookups since start (1 if none).");
    rkm_buf_addf(&b, "rkmojo_expert_cache_hit_ratio %.6f\n", lookups ? (double)M.expert_hits / (double)lookups : 1.0);
    metric(&b, "rkmojo_disk_read_bytes_total", "counter", "Expert bytes read from disk.");
    rkm_buf_addf(&b, "rkmojo_disk_read_bytes_total %llu\n", (unsigned long long)M.bytes_read);
    for (int i = 0; i < SRV_EV_COUNT; i++) {
        metric(&b, event_info[i].name, "counter", event_info[i].help);
        rkm_buf_addf(&b, "%s %llu\n", event_info[i].name, (unsigned long long)M.events[i]);
    }
    pthread_mutex_unlock(&M.mu);
    metric(&b, "rkmojo_queue_depth", "gauge", "Requests waiting for the worker.");
    rkm_buf_addf(&b, "rkmojo_queue_depth %d\n", g->queue_depth);
    metric(&b, "rkmojo_slots", "gauge", "Sequence slots (--parallel): generations that can run at once.");
    rkm_buf_addf(&b, "rkmojo_slots %d\n", g->slots);
    metric(&b, "rkmojo_slots_busy", "gauge", "Slots running a generation now.");
    rkm_buf_addf(&b, "rkmojo_slots_busy %d\n", g->slots_busy);
    metric(&b, "rkmojo_model_loaded", "gauge", "1 for the loaded model.");
    if (g->model_loaded[0]) rkm_buf_addf(&b, "rkmojo_model_loaded{model=\"%s\"} 1\n", g->model_loaded);
    metric(&b, "rkmojo_resident_bytes", "gauge", "Resident set size of the process.");
    rkm_buf_addf(&b, "rkmojo_resident_bytes %llu\n", (unsigned long long)g->resident_bytes);
    metric(&b, "rkmojo_peak_resident_bytes", "gauge", "Peak resident set size of the process.");
    rkm_buf_addf(&b, "rkmojo_peak_resident_bytes %llu\n", (unsigned long long)g->peak_resident_bytes);
    return rkm_buf_take(&b);
}
