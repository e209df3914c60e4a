/*
 * trace.c - routing-trace files (layout in trace.h) and the offline cache
 * simulator behind `rkmojo trace-sim`. The simulator keeps slots as the
 * expert cache does and lets cache_policy.c choose LRU and LFU victims,
 * so a replay can only differ from the cache where the cache's timing
 * does (prefetch, reads still in flight); Belady, which needs the future,
 * is the simulator's own.
 *
 * Threads: a writer may be shared (the expert cache writes from the
 * compute thread; w->mu makes concurrent writers safe). Loading and
 * simulating touch only their own memory.
 * Ownership: rkm_trace_free frees a loaded trace; the simulator allocates
 * its state per call and frees it before returning.
 */
#include "runtime/trace.h"

#include <errno.h>
#include <pthread.h>

#include "util/common.h"

#define TRACE_MAX_LAYERS 256
#define TRACE_MAX_EXPERTS 1024
#define HEADER_BYTES 32

struct rkm_trace_writer {
    pthread_mutex_t mu;
    FILE *f;
    char *path;
    int n_layer, n_expert;
    int err;
};

static void put_u16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put_u32(uint8_t *p, uint32_t v) { put_u16(p, v & 0xffff), put_u16(p + 2, v >> 16); }
static uint32_t get_u16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get_u32(const uint8_t *p) { return get_u16(p) | get_u16(p + 2) << 16; }

rkm_trace_writer *rkm_trace_writer_open(const char *path, int n_layer, int n_expert, int top_k)
{
    if (!path || n_layer <= 0 || n_layer > TRACE_MAX_LAYERS || n_expert <= 0 || n_expert > TRACE_MAX_EXPERTS ||
        top_k <= 0 || top_k > n_expert) {
        rkm_err(RKM_EINVAL, "trace: bad parameters (%d layers, %d experts, top-%d)", n_layer, n_expert, top_k);
        return NULL;
    }
    rkm_trace_writer *w = calloc(1, sizeof *w);
    if (!w) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        rkm_err(RKM_EIO, "trace: cannot create %s: %s", path, strerror(errno));
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    w->path = strdup(path);
    w->n_layer = n_layer;
    w->n_expert = n_expert;
    uint8_t h[HEADER_BYTES] = {0};
    memcpy(h, RKM_TRACE_MAGIC, 8);
    put_u32(h + 8, RKM_TRACE_VERSION);
    put_u32(h + 12, (uint32_t)n_layer);
    put_u32(h + 16, (uint32_t)n_expert);
    put_u32(h + 20, (uint32_t)top_k);
    if (fwrite(h, 1, sizeof h, w->f) != sizeof h) w->err = rkm_err(RKM_EIO, "trace: write to %s failed", path);
    return w;
}

static int write_rec(rkm_trace_writer *w, uint32_t token, int layer, uint32_t flag, const int *ids, int n)
{
    if (!w) return 0;
    if (layer < 0 || layer >= w->n_layer || n <= 0 || n > w->n_expert)
        return rkm_err(RKM_EINVAL, "trace: bad record (layer %d, %d experts)", layer, n);
    uint8_t buf[8 + 2 * TRACE_MAX_EXPERTS];
    put_u32(buf, token);
    put_u16(buf + 4, (uint32_t)layer | flag);
    put_u16(buf + 6, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= w->n_expert) return rkm_err(RKM_EINVAL, "trace: expert %d out of range", ids[i]);
        put_u16(buf + 8 + 2 * i, (uint32_t)ids[i]);
    }
    pthread_mutex_lock(&w->mu);
    size_t len = 8 + 2 * (size_t)n;
    if (!w->err && fwrite(buf, 1, len, w->f) != len) w->err = RKM_EIO;
    int rc = w->err;
    pthread_mutex_unlock(&w->mu);
    return rc ? rkm_err(rc, "trace: write to %s failed", w->path) : 0;
}

int rkm_trace_write(rkm_trace_writer *w, uint32_t token, int layer, const int *ids, int n)
{
    return write_rec(w, token, layer, 0, ids, n);
}

int rkm_trace_write_prediction(rkm_trace_writer *w, uint32_t token, int layer, const int *ids, int n)
{
    return write_rec(w, token, layer, RKM_TRACE_PREDICTED, ids, n);
}

int rkm_trace_writer_close(rkm_trace_writer *w)
{
    if (!w) return 0;
    int rc = w->err;
    if (fclose(w->f) != 0 && !rc) rc = RKM_EIO;
    if (rc) rkm_err(rc, "trace: write to %s failed", w->path);
    pthread_mutex_destroy(&w->mu);
    free(w->path);
    free(w);
    return rc;
}

/* ------------------------------------------------------------ reading */

rkm_trace *rkm_trace_parse(const void *data, uint64_t n)
{
    const uint8_t *p = data;
    if (!p || n < HEADER_BYTES || memcmp(p, RKM_TRACE_MAGIC, 8)) {
        rkm_err(RKM_EFORMAT, "trace: not a routing trace (bad magic)");
        return NULL;
    }
    uint32_t ver = get_u32(p + 8), nl = get_u32(p + 12), ne = get_u32(p + 16), k = get_u32(p + 20);
    if (ver < 1 || ver > RKM_TRACE_VERSION) {
        rkm_err(RKM_EUNSUPPORTED, "trace: version %u, this rkmojo reads versions 1 to %d", ver, RKM_TRACE_VERSION);
        return NULL;
    }
    if (nl == 0 || nl > TRACE_MAX_LAYERS || ne == 0 || ne > TRACE_MAX_EXPERTS || k == 0 || k > ne) {
        rkm_err(RKM_EFORMAT, "trace: bad header (%u layers, %u experts, top-%u)", nl, ne, k);
        return NULL;
    }
    /* pass 1: validate and count */
    int64_t n_rec = 0, n_pred = 0, n_ids = 0;
    uint64_t off = HEADER_BYTES;
    while (off < n) {
        if (n - off < 8) goto truncated;
        uint32_t layer = get_u16(p + off + 4), cnt = get_u16(p + off + 6);
        int pred = ver >= 2 && (layer & RKM_TRACE_PREDICTED);
        if (pred) layer &= ~(uint32_t)RKM_TRACE_PREDICTED;
        if (layer >= nl || cnt == 0 || cnt > ne) {
            rkm_err(RKM_EFORMAT, "trace: bad record at offset %llu (layer %u, %u experts)", (unsigned long long)off,
                    layer, cnt);
            return NULL;
        }
        if (n - off - 8 < 2ull * cnt) goto truncated;
        for (uint32_t i = 0; i < cnt; i++)
            if (get_u16(p + off + 8 + 2 * i) >= ne) {
                rkm_err(RKM_EFORMAT, "trace: expert id out of range at offset %llu", (unsigned long long)off);
                return NULL;
            }
        off += 8 + 2ull * cnt;
        if (pred) n_pred++;
        else n_rec++;
        n_ids += cnt;
    }
    rkm_trace *t = calloc(1, sizeof *t);
    if (!t) goto oom;
    t->n_layer = (int)nl, t->n_expert = (int)ne, t->top_k = (int)k;
    t->n_rec = n_rec;
    t->n_pred = n_pred;
    t->n_ids = n_ids;
    t->recs = malloc(sizeof *t->recs * (size_t)(n_rec ? n_rec : 1));
    t->preds = malloc(sizeof *t->preds * (size_t)(n_pred ? n_pred : 1));
    t->ids = malloc(sizeof *t->ids * (size_t)(n_ids ? n_ids : 1));
    if (!t->recs || !t->preds || !t->ids) {
        rkm_trace_free(t);
        goto oom;
    }
    off = HEADER_BYTES;
    int64_t ii = 0, nr = 0, np = 0;
    while (nr + np < n_rec + n_pred) {
        uint32_t layer = get_u16(p + off + 4);
        int pred = ver >= 2 && (layer & RKM_TRACE_PREDICTED);
        rkm_trace_rec *rec = pred ? &t->preds[np++] : &t->recs[nr++];
        rec->token = get_u32(p + off);
        rec->layer = (uint16_t)(layer & ~(uint32_t)RKM_TRACE_PREDICTED);
        rec->n = (uint16_t)get_u16(p + off + 6);
        rec->first = (uint32_t)ii;
        rec->at = pred ? nr : 0;
        for (int i = 0; i < rec->n; i++) t->ids[ii++] = (uint16_t)get_u16(p + off + 8 + 2 * i);
        off += 8 + 2ull * rec->n;
    }
    return t;
truncated:
    rkm_err(RKM_EFORMAT, "trace: truncated record at offset %llu", (unsigned long long)off);
    return NULL;
oom:
    rkm_err(RKM_ENOMEM, "trace: out of memory");
    return NULL;
}

rkm_trace *rkm_trace_load(const char *path)
{
    size_t n = 0;
    char *data = rkm_read_file(path, &n);
    if (!data) return NULL;
    rkm_trace *t = rkm_trace_parse(data, n);
    if (!t) rkm_err_prefix(RKM_EFORMAT, "%s", path);
    free(data);
    return t;
}

void rkm_trace_free(rkm_trace *t)
{
    if (!t) return;
    free(t->recs);
    free(t->preds);
    free(t->ids);
    free(t);
}

void rkm_trace_prediction(const rkm_trace *t, uint64_t *named, uint64_t *requested)
{
    memset(named, 0, sizeof *named * (size_t)t->n_layer);
    memset(requested, 0, sizeof *requested * (size_t)t->n_layer);
    int64_t pending[TRACE_MAX_LAYERS]; /* the layer's latest unscored hint, or -1 */
    uint8_t mark[TRACE_MAX_EXPERTS];
    for (int l = 0; l < t->n_layer; l++) pending[l] = -1;
    int64_t p = 0;
    for (int64_t r = 0; r < t->n_rec; r++) {
        for (; p < t->n_pred && t->preds[p].at <= r; p++) pending[t->preds[p].layer] = p;
        const rkm_trace_rec *rec = &t->recs[r];
        if (pending[rec->layer] < 0) continue;
        const rkm_trace_rec *h = &t->preds[pending[rec->layer]];
        memset(mark, 0, (size_t)t->n_expert);
        for (int i = 0; i < h->n; i++) mark[t->ids[h->first + i]] = 1;
        for (int i = 0; i < rec->n; i++) {
            int e = t->ids[rec->first + i], dup = 0;
            for (int j = 0; j < i; j++) dup |= t->ids[rec->first + j] == e;
            if (dup) continue;
            requested[rec->layer]++;
            named[rec->layer] += mark[e];
        }
        pending[rec->layer] = -1;
    }
}

/* ------------------------------------------------------------ simulation */

const char *rkm_sim_policy_name(int policy)
{
    return policy == RKM_SIM_LRU ? "lru" : policy == RKM_SIM_LFU ? "lfu" : policy == RKM_SIM_BELADY ? "belady" : "?";
}

typedef struct sim {
    int ne;
    int cap;                 /* slots of one pool */
    rkm_policy_slot *slots;  /* the pools: one per layer (cap each), or one shared */
    int32_t *slot_of;        /* [layer * ne + e]: index into slots, or -1 */
    uint64_t *freq;          /* [layer * ne + e]: LFU counts */
    uint64_t *n_req;         /* [layer]: records seen (LFU aging) */
    /* Belady: occurrences of (layer, e) in record order, CSR */
    int64_t *occ_start, *occ_cur, *occ;
} sim;

static uint64_t next_use(sim *s, int key, int64_t r)
{
    int64_t end = s->occ_start[key + 1];
    while (s->occ_cur[key] < end && s->occ[s->occ_cur[key]] <= r) s->occ_cur[key]++;
    return s->occ_cur[key] < end ? (uint64_t)s->occ[s->occ_cur[key]] : UINT64_MAX;
}

/* Belady's choice in pool[0..n) before record r: a free slot first, then
 * the expert requested farthest ahead (never: first), ties to the lower
 * layer, then the lower id. Only the simulator knows the future. */
static int belady_victim(sim *s, const rkm_policy_slot *pool, int n, int64_t r)
{
    int best = -1;
    uint64_t best_next = 0;
    for (int i = 0; i < n; i++) {
        const rkm_policy_slot *sl = &pool[i];
        if (sl->busy) continue;
        if (sl->expert < 0) return i;
        uint64_t nx = next_use(s, sl->layer * s->ne + sl->expert, r);
        const rkm_policy_slot *b = best >= 0 ? &pool[best] : NULL;
        if (!b || nx > best_next ||
            (nx == best_next && (sl->layer < b->layer || (sl->layer == b->layer && sl->expert < b->expert))))
            best = i, best_next = nx;
    }
    return best;
}

int rkm_trace_simulate(const rkm_trace *t, int policy, int slots, rkm_sim_result *res)
{
    return rkm_trace_simulate_pool(t, policy, slots, 0, res);
}

int rkm_trace_simulate_pool(const rkm_trace *t, int policy, int slots, int global, rkm_sim_result *res)
{
    if (!t || !res || slots <= 0 || policy < RKM_SIM_LRU || policy > RKM_SIM_BELADY)
        return rkm_err(RKM_EINVAL, "trace-sim: bad arguments (policy %d, %d slots)", policy, slots);
    res->hits = res->misses = res->decode_hits = res->decode_misses = 0;
    if (res->layer_hits) memset(res->layer_hits, 0, sizeof(uint64_t) * (size_t)t->n_layer);
    if (res->layer_misses) memset(res->layer_misses, 0, sizeof(uint64_t) * (size_t)t->n_layer);
    int ne = t->n_expert;
    size_t nk = (size_t)t->n_layer * (size_t)ne;
    /* more slots than experts hold every expert of a layer, as the cache's */
    sim s = {.ne = ne, .cap = RKM_MIN(slots, ne)};
    s.slot_of = malloc(sizeof(int32_t) * nk);
    s.freq = calloc(nk, sizeof(uint64_t));
    s.n_req = calloc((size_t)t->n_layer, sizeof(uint64_t));
    int rc = 0;
    if (!s.slot_of || !s.freq || !s.n_req) goto oom;
    for (size_t k = 0; k < nk; k++) s.slot_of[k] = -1;
    /* global: one pool of cap x (layers the trace requests from) */
    int n_active = 0;
    for (int64_t r = 0; r < t->n_rec; r++)
        if (!s.n_req[t->recs[r].layer]) s.n_req[t->recs[r].layer] = 1, n_active++;
    memset(s.n_req, 0, sizeof(uint64_t) * (size_t)t->n_layer);
    int pool_n = global ? s.cap * n_active : s.cap;
    size_t n_slots = global ? (size_t)pool_n : (size_t)s.cap * (size_t)t->n_layer;
    s.slots = malloc(sizeof *s.slots * (n_slots ? n_slots : 1));
    if (!s.slots) goto oom;
    for (size_t i = 0; i < n_slots; i++) s.slots[i] = (rkm_policy_slot){.layer = -1, .expert = -1};
    if (policy == RKM_SIM_BELADY) {
        s.occ_start = calloc(nk + 1, sizeof(int64_t));
        s.occ_cur = calloc(nk + 1, sizeof(int64_t));
        s.occ = malloc(sizeof(int64_t) * (size_t)(t->n_ids ? t->n_ids : 1));
        if (!s.occ_start || !s.occ_cur || !s.occ) goto oom;
        for (int64_t r = 0; r < t->n_rec; r++)
            for (int i = 0; i < t->recs[r].n; i++)
                s.occ_start[(size_t)t->recs[r].layer * ne + t->ids[t->recs[r].first + i] + 1]++;
        for (size_t k = 0; k < nk; k++) s.occ_start[k + 1] += s.occ_start[k];
        memcpy(s.occ_cur, s.occ_start, sizeof(int64_t) * nk);
        for (int64_t r = 0; r < t->n_rec; r++)
            for (int i = 0; i < t->recs[r].n; i++) {
                size_t key = (size_t)t->recs[r].layer * ne + t->ids[t->recs[r].first + i];
                s.occ[s.occ_cur[key]++] = r;
            }
        memcpy(s.occ_cur, s.occ_start, sizeof(int64_t) * nk);
    }
    int cache_policy = policy == RKM_SIM_LFU ? RKM_CACHE_LFU : RKM_CACHE_LRU;
    uint64_t tick = 0;
    for (int64_t r = 0; r < t->n_rec; r++) {
        const rkm_trace_rec *rec = &t->recs[r];
        const uint16_t *ids = t->ids + rec->first;
        int L = rec->layer;
        uint64_t *freq = s.freq + (size_t)L * ne;
        int32_t *slot_of = s.slot_of + (size_t)L * ne;
        /* slot_of indexes s.slots; this record's candidates are pool[0..pool_n) */
        rkm_policy_slot *pool = global ? s.slots : s.slots + (size_t)L * s.cap;
        int base = (int)(pool - s.slots);
        rkm_cache_policy_age(freq, ne, &s.n_req[L]);
        const int one_token = rec->n == t->top_k;
        /* unique ids, in order; tiles of `slots` like moe.c */
        int uniq[TRACE_MAX_EXPERTS], nu = 0;
        for (int i = 0; i < rec->n; i++) {
            int dup = 0;
            for (int j = 0; j < nu && !dup; j++) dup = uniq[j] == ids[i];
            if (!dup) uniq[nu++] = ids[i];
        }
        for (int t0 = 0; t0 < nu; t0 += slots) {
            int nt = RKM_MIN(slots, nu - t0);
            const int *tile = uniq + t0;
            tick++;
            for (int i = 0; i < nt; i++) /* hits first: pin them */
                if (slot_of[tile[i]] >= 0) {
                    rkm_policy_slot *sl = &s.slots[slot_of[tile[i]]];
                    freq[tile[i]]++;
                    sl->last_use = tick, sl->busy = 1;
                    res->hits++;
                    res->decode_hits += one_token;
                    if (res->layer_hits) res->layer_hits[L]++;
                }
            for (int i = 0; i < nt; i++) {
                int e = tile[i];
                if (slot_of[e] >= 0 && s.slots[slot_of[e]].busy) continue;
                freq[e]++;
                res->misses++;
                res->decode_misses += one_token;
                if (res->layer_misses) res->layer_misses[L]++;
                int v;
                if (policy == RKM_SIM_BELADY) {
                    v = belady_victim(&s, pool, pool_n, r);
                } else {
                    for (int j = 0; cache_policy == RKM_CACHE_LFU && j < pool_n; j++)
                        if (pool[j].expert >= 0) pool[j].freq = s.freq[(size_t)pool[j].layer * ne + pool[j].expert];
                    v = rkm_cache_policy_victim(cache_policy, pool, pool_n);
                }
                if (v < 0) { /* cannot happen: nt <= slots */
                    rc = rkm_err(RKM_EINVAL, "trace-sim: no victim");
                    goto out;
                }
                rkm_policy_slot *sl = &pool[v];
                if (sl->expert >= 0) s.slot_of[(size_t)sl->layer * ne + sl->expert] = -1;
                *sl = (rkm_policy_slot){.layer = L, .expert = e, .busy = 1, .last_use = tick};
                slot_of[e] = base + v;
            }
            for (int i = 0; i < nt; i++) s.slots[slot_of[tile[i]]].busy = 0; /* the tile is done */
        }
    }
    goto out;
oom:
    rc = rkm_err(RKM_ENOMEM, "trace-sim: out of memory");
out:
    free(s.slots);
    free(s.slot_of);
    free(s.freq);
    free(s.n_req);
    free(s.occ_start);
    free(s.occ_cur);
    free(s.occ);
    return rc;
}
