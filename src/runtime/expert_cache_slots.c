/*
 * expert_cache_slots.c - the expert cache (expert_cache.h): per-layer
 * caches of routed-expert blobs, filled by the IO engine (io_engine.c)
 * from the per-layer expert files. Its state is in expert_cache_impl.h,
 * its background threads in expert_cache_fill.c, its victim choice in
 * cache_policy.c.
 *
 * Each MoE layer has n_slots slot buffers of blob_stride bytes (4096-
 * aligned), or, with params.shared_slots, every layer looks up its experts
 * in one pool of slots_per_layer x layers slots (layer 0 owns it): a miss
 * then evicts the policy's choice among all layers' unpinned experts, so
 * layers whose routing is spread get more slots than layers whose routing
 * is concentrated (trace-sim --global replays it).
 *
 * This file is the slot state machine: request() pins the routed
 * experts; a miss takes the slot cache_policy.c chooses (unpinned, not
 * being read: empty first, then LFU with recency tie-break or LRU; LFU
 * counts every request of an expert since the cache was created, also
 * while it was not cached, as trace.c's simulator does) and submits the
 * blob as parallel chunk reads; the last chunk to complete runs the fault
 * hook and the checksum on its IO thread and marks the slot READY or
 * ERROR. get() waits only for its own expert. A failed slot keeps its
 * error for this request's gets and becomes EMPTY at release, so the next
 * request reads again. prefetch() starts reads at prefetch priority into
 * unpinned slots; a demand request that finds its expert still queued
 * promotes those chunk reads. A request that finds its expert still being
 * read by the background fill (expert_cache_fill.c) promotes the read and counts
 * a miss.
 *
 * Threads: one compute thread calls request/get/try_get/unpin/release/
 * prefetch and the stats; the IO threads run chunk_done and finish_read;
 * expert_cache_fill.c's fill thread calls rkm_expert_cache__victim, __assign and
 * __start_read under c->mu. Every field is guarded as
 * expert_cache_impl.h says (c->mu for the slots, maps, counts and stats).
 * Lock order: c->mu, then io->mu.
 * Ownership: the cache owns the slot buffers (one huge-page mapping per
 * layer or per pool, or from slot_alloc when the caller gives one, e.g.
 * NPU memory, and returned through slot_free), the chunk ops, its own file
 * descriptors (O_DIRECT when the file system allows) and its IO engine.
 */
#include "runtime/expert_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "runtime/expert_cache_impl.h"
#include "util/common.h"
#include "util/knobs.h"

#define DEFAULT_CHUNK (512u * 1024u)

typedef struct rkm_expert_cache cache;

static layer_cache *layer_of(const cache *c, int il)
{
    if (il < 0 || il >= RKM_MAX_LAYERS || c->layer_idx[il] < 0) return NULL;
    return &c->layers[c->layer_idx[il]];
}

/* ------------------------------------------------------------ faults */

static void parse_faults(cache *c, const char *spec)
{
    while (spec && *spec && c->n_faults < RKM_CACHE_MAX_FAULTS) {
        char kind[16];
        int il, e, count, used = 0;
        if (sscanf(spec, "%15[a-z]:%d:%d:%d%n", kind, &il, &e, &count, &used) != 4) {
            fprintf(stderr, "rkmojo: ignoring malformed RKM_FAULT entry '%s'\n", spec);
            return;
        }
        rkm_cache_fault *f = &c->faults[c->n_faults];
        f->kind = !strcmp(kind, "eio") ? 0 : !strcmp(kind, "short") ? 1 : !strcmp(kind, "corrupt") ? 2 : -1;
        f->il = il, f->e = e, f->count = count;
        if (f->kind >= 0) c->n_faults++;
        spec += used;
        if (*spec == ',') spec++;
    }
}

/* The RKM_FAULT hook; faults[] is guarded by c->mu. */
static int env_fault(cache *c, int il, int e, uint8_t *buf, uint64_t *got)
{
    int kind = -1;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_faults; i++) {
        rkm_cache_fault *f = &c->faults[i];
        if (f->count > 0 && f->il == il && (f->e < 0 || f->e == e)) {
            f->count--;
            kind = f->kind;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (kind == 0) return RKM_EIO;
    if (kind == 1) *got /= 2;
    if (kind == 2 && *got) buf[*got / 3] ^= 0x5a;
    return 0;
}

/* ------------------------------------------------------------ reads */

/* Runs on the IO thread that completed the last chunk of sl's blob: fault
 * hook, size check, checksum, then publishes the result under c->mu. */
static void finish_read(cache *c, slot *sl)
{
    layer_cache *lc = sl->lc;
    const rkm_expert_layer *el = lc->el;
    int e = sl->expert, il = lc->il;
    int rc = 0;
    char msg[256] = "";
    uint64_t got = sl->valid;
    pthread_mutex_lock(&c->mu);
    rkm_expert_fault_fn fault_fn = c->fault_fn;
    void *fault_user = c->fault_user;
    pthread_mutex_unlock(&c->mu);
    if (sl->io_err) {
        rc = RKM_EIO;
        snprintf(msg, sizeof msg, "expert %d of layer %d (%s): read failed at offset %llu: %s", e, il, el->file,
                 (unsigned long long)sl->io_err_off, strerror(sl->io_err));
    }
    if (!rc && fault_fn) rc = fault_fn(fault_user, il, e, sl->buf, &got);
    if (!rc && c->n_faults) rc = env_fault(c, il, e, sl->buf, &got);
    if (rc && !msg[0])
        snprintf(msg, sizeof msg, "expert %d of layer %d (%s): read failed: %s (injected)", e, il, el->file,
                 rkm_strerror(rc));
    if (!rc && got < el->blob_bytes) {
        rc = RKM_EIO;
        snprintf(msg, sizeof msg, "expert %d of layer %d (%s): short read (%llu of %llu bytes at offset %llu)", e,
                 il, el->file, (unsigned long long)got, (unsigned long long)el->blob_bytes,
                 (unsigned long long)((uint64_t)e * el->blob_stride));
    }
    if (!rc) {
        if (got < el->blob_stride) memset(sl->buf + got, 0, el->blob_stride - got);
        int check = el->checksums && c->p.verify != RKM_VERIFY_NEVER &&
                    (c->p.verify != RKM_VERIFY_FIRST || !lc->verified[e]);
        if (check) {
            uint64_t h = rkm_hash(sl->buf, el->blob_bytes);
            if (h != el->checksums[e]) {
                rc = RKM_ECHECKSUM;
                snprintf(msg, sizeof msg,
                         "expert %d of layer %d (%s): checksum mismatch (read %016llx, manifest %016llx)", e, il,
                         el->file, (unsigned long long)h, (unsigned long long)el->checksums[e]);
            }
        }
    }
    /* the matmuls' packed layout (kernels.h), after the checksum of the
     * bytes on disk; on this IO thread, off the compute threads' path */
    for (int k = 0; !rc && c->p.pack && k < RKM_PART_COUNT; k++) {
        const rkm_expert_part *pt = &el->part[k];
        if (rkm_pack_type(pt->type, pt->ne[1]) == pt->type) continue;
        if ((rc = rkm_pack_rows(pt->type, sl->buf + pt->offset, pt->ne[0], pt->ne[1])))
            snprintf(msg, sizeof msg, "expert %d of layer %d: %s", e, il, rkm_last_error());
    }
    if (!rc && c->p.slot_filled) c->p.slot_filled(c->p.slot_user, sl->buf, el->blob_stride);
    pthread_mutex_lock(&c->mu);
    if (sl->filling) c->st.fill_reads++;
    else c->st.read_s += rkm_now() - sl->t_submit;
    sl->filling = 0;
    if (rc) {
        c->st.errors++;
        if (sl->pinned) {
            /* The request that pinned it sees the error; release frees it. */
            sl->state = SLOT_ERROR;
            sl->err = rc;
            snprintf(sl->msg, sizeof sl->msg, "%s", msg);
        } else { /* a failed prefetch: forget it, a request will retry */
            lc->slot_of[e] = -1;
            sl->expert = -1;
            sl->state = SLOT_EMPTY;
            sl->prefetched = 0;
        }
    } else {
        lc->verified[e] = 1;
        sl->state = SLOT_READY;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void chunk_done(rkm_io_op *op)
{
    slot *sl = op->user;
    cache *c = sl->lc->c;
    uint64_t start = (uint64_t)op->tag * c->chunk_bytes;
    pthread_mutex_lock(&c->mu);
    if (sl->filling) c->st.fill_bytes += op->got;
    else c->st.bytes_read += op->got;
    if (op->err && !sl->io_err) {
        sl->io_err = op->err;
        sl->io_err_off = op->off;
    }
    if (op->got < op->len && start + op->got < sl->valid) sl->valid = start + op->got; /* EOF or error */
    int last = --sl->chunks_left == 0;
    pthread_mutex_unlock(&c->mu);
    if (last) finish_read(c, sl);
}

/* Starts reading expert e into sl (c->mu held). */
void rkm_expert_cache__start_read(cache *c, layer_cache *lc, slot *sl, int e, int prio)
{
    const rkm_expert_layer *el = lc->el;
    uint64_t len = RKM_ALIGN_UP(el->blob_bytes, RKM_EXPERT_ALIGN);
    if (len == 0) len = RKM_EXPERT_ALIGN;
    uint64_t off = (uint64_t)e * el->blob_stride;
    int n = (int)((len + c->chunk_bytes - 1) / c->chunk_bytes);
    sl->state = SLOT_LOADING;
    sl->chunks_left = n;
    sl->n_chunks = n;
    sl->io_err = 0;
    sl->valid = len;
    sl->t_submit = rkm_now();
    for (int k = 0; k < n; k++) {
        rkm_io_op *op = &sl->ops[k];
        uint64_t a = (uint64_t)k * c->chunk_bytes;
        memset(op, 0, sizeof *op);
        op->fd = lc->fd;
        op->buf = sl->buf + a;
        op->off = off + a;
        op->len = RKM_MIN(c->chunk_bytes, len - a);
        op->prio = prio;
        op->done = chunk_done;
        op->user = sl;
        op->tag = k;
    }
    /* Submitted after all are filled: a chunk may complete at once. */
    for (int k = 0; k < n; k++) rkm_io_submit(c->io, &sl->ops[k]);
}

static int match_slot(const rkm_io_op *op, void *user) { return op->user == user; }

/* ------------------------------------------------------------ life */

static int open_expert_file(const rkm_model_dir *md, const rkm_expert_layer *el, int want_direct, int *direct)
{
    char *path = rkm_path_join(md->path ? md->path : ".", el->file ? el->file : "");
    if (!path) return rkm_err(RKM_ENOMEM, "out of memory");
    int fd = -1;
    *direct = 0;
    if (want_direct) {
        /* tmpfs and some FUSE file systems refuse O_DIRECT (EINVAL). */
        fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd >= 0) *direct = 1;
    }
    if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int er = errno;
        int code = er == ENOENT ? RKM_ENOENT : RKM_EIO;
        rkm_err(code, "expert file %s: %s", path, strerror(er));
        free(path);
        return code;
    }
    free(path);
    return fd;
}

rkm_expert_cache *rkm_expert_cache_new(const rkm_model_dir *md, const rkm_expert_cache_params *p)
{
    if (!md || !p) {
        rkm_err(RKM_EINVAL, "expert cache: no model directory");
        return NULL;
    }
    if (p->slots_per_layer < 0) {
        rkm_err(RKM_EINVAL, "expert cache: %d slots per layer", p->slots_per_layer);
        return NULL;
    }
    cache *c = calloc(1, sizeof *c);
    if (!c) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    c->md = md;
    c->p = *p;
    c->chunk_bytes = p->chunk_bytes ? (uint32_t)RKM_ALIGN_UP(p->chunk_bytes, RKM_EXPERT_ALIGN) : DEFAULT_CHUNK;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    for (int i = 0; i < RKM_MAX_LAYERS; i++) c->layer_idx[i] = -1;
    parse_faults(c, rkm_knob(RKM_KNOB_FAULT)); /* a test hook (util/knobs.h) */
    c->n_layers = md->n_expert_layers;
    c->layers = calloc(c->n_layers > 0 ? c->n_layers : 1, sizeof *c->layers);
    if (!c->layers) goto oom;
    for (int i = 0; i < c->n_layers; i++) c->layers[i].fd = -1;
    uint64_t max_len = 0;
    for (int i = 0; i < c->n_layers; i++) {
        const rkm_expert_layer *el = &md->experts[i];
        if (el->layer < 0 || el->layer >= RKM_MAX_LAYERS || c->layer_idx[el->layer] >= 0 || el->n_expert <= 0 ||
            el->blob_stride == 0 || el->blob_stride % RKM_EXPERT_ALIGN || el->blob_bytes > el->blob_stride) {
            rkm_err(RKM_EFORMAT, "expert cache: malformed expert layer %d", el->layer);
            goto fail;
        }
        c->layer_idx[el->layer] = i;
        max_len = RKM_MAX(max_len, RKM_ALIGN_UP(RKM_MAX(el->blob_bytes, 1), RKM_EXPERT_ALIGN));
    }
    c->max_chunks = (int)((max_len + c->chunk_bytes - 1) / c->chunk_bytes);
    /* One pool only where it changes something (fewer slots than experts)
     * and every layer's blobs have the same size and count. */
    int shared = p->shared_slots && p->slots_per_layer > 0 && c->n_layers > 1;
    for (int i = 0; shared && i < c->n_layers; i++)
        shared = md->experts[i].blob_stride == md->experts[0].blob_stride &&
                 md->experts[i].n_expert == md->experts[0].n_expert && p->slots_per_layer < md->experts[0].n_expert;
    c->shared = shared;
    for (int i = 0; i < c->n_layers; i++) {
        const rkm_expert_layer *el = &md->experts[i];
        layer_cache *lc = &c->layers[i];
        lc->c = c;
        lc->el = el;
        lc->il = el->layer;
        int n = p->slots_per_layer > 0 ? RKM_MIN(p->slots_per_layer, el->n_expert) : el->n_expert;
        lc->cap = n;
        lc->slot_of = malloc(el->n_expert * sizeof *lc->slot_of);
        lc->freq = calloc(el->n_expert, sizeof *lc->freq);
        lc->verified = calloc(el->n_expert, 1);
        lc->predicted = calloc(el->n_expert, 1);
        if (!lc->slot_of || !lc->freq || !lc->verified || !lc->predicted) goto oom;
        for (int e = 0; e < el->n_expert; e++) lc->slot_of[e] = -1;
        if (shared && i > 0) { /* layer 0's pool */
            lc->shares = 1;
            lc->n_slots = c->layers[0].n_slots;
            lc->slots = c->layers[0].slots;
            lc->cand = c->layers[0].cand;
        } else {
            if (shared) n *= c->n_layers;
            lc->n_slots = n;
            lc->slots = calloc(n > 0 ? (size_t)n : 1, sizeof *lc->slots);
            lc->cand = calloc(n > 0 ? (size_t)n : 1, sizeof *lc->cand);
            if (!lc->slots || !lc->cand) goto oom;
        }
        int fd = open_expert_file(md, el, p->direct_io, &lc->direct);
        if (fd < 0) goto fail;
        lc->fd = fd;
        if (lc->shares) continue;
        if (!p->slot_alloc && n > 0) {
            /* one mapping per layer: huge pages for the matmuls that
             * stream the slots (blob_stride is a multiple of 4096) */
            lc->arena_bytes = (size_t)n * el->blob_stride;
            lc->arena = rkm_map_weights(lc->arena_bytes);
            if (!lc->arena) goto oom;
        }
        for (int s = 0; s < n; s++) {
            slot *sl = &lc->slots[s];
            sl->lc = lc;
            sl->expert = -1;
            sl->buf = p->slot_alloc ? p->slot_alloc(p->slot_user, el->blob_stride)
                                    : lc->arena + (size_t)s * el->blob_stride;
            sl->ops = calloc(c->max_chunks, sizeof *sl->ops);
            if (!sl->buf || !sl->ops) goto oom;
            c->bytes += el->blob_stride;
        }
    }
    const char *trace_path = p->trace_out;
    if (trace_path && *trace_path) {
        c->trace = rkm_trace_writer_open(trace_path, md->hp.n_layer, md->hp.n_expert, md->hp.n_expert_used);
        if (!c->trace) goto fail;
        c->trace_last_il = RKM_MAX_LAYERS;
    }
    rkm_io_params iop = {.backend = p->io_backend, .n_threads = p->io_threads};
    c->io = rkm_io_new(&iop);
    if (!c->io) {
        rkm_err(RKM_ENOMEM, "expert cache: cannot start the IO threads");
        goto fail;
    }
    rkm_expert_cache__fill_start(c);
    return c;
oom:
    rkm_err(RKM_ENOMEM, "expert cache: out of memory");
fail:
    rkm_expert_cache_free(c);
    return NULL;
}

void rkm_expert_cache_free(rkm_expert_cache *c)
{
    if (!c) return;
    rkm_expert_cache__fill_stop(c);
    rkm_io_free(c->io); /* waits for reads in flight: they write into slots */
    if (c->trace && rkm_trace_writer_close(c->trace))
        fprintf(stderr, "rkmojo: %s\n", rkm_last_error()); /* free cannot return it */
    for (int i = 0; c->layers && i < c->n_layers; i++) {
        layer_cache *lc = &c->layers[i];
        if (lc->fd >= 0) close(lc->fd);
        if (lc->shares) lc->slots = NULL, lc->cand = NULL; /* layer 0's */
        for (int s = 0; lc->slots && s < lc->n_slots; s++) {
            if (c->p.slot_free && lc->slots[s].buf) c->p.slot_free(c->p.slot_user, lc->slots[s].buf);
            free(lc->slots[s].ops);
        }
        rkm_unmap_weights(lc->arena, lc->arena_bytes);
        free(lc->slots);
        free(lc->cand);
        free(lc->slot_of);
        free(lc->freq);
        free(lc->verified);
        free(lc->predicted);
    }
    free(c->layers);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

int rkm_expert_cache_slots(const rkm_expert_cache *c)
{
    if (!c || c->n_layers == 0) return 0;
    int m = c->layers[0].cap;
    for (int i = 1; i < c->n_layers; i++) m = RKM_MIN(m, c->layers[i].cap);
    return m;
}

uint64_t rkm_expert_cache_bytes(const rkm_expert_cache *c) { return c ? c->bytes : 0; }

/* ------------------------------------------------------------ policy */

int rkm_expert_cache__victim(cache *c, layer_cache *lc)
{
    for (int s = 0; s < lc->n_slots; s++) {
        const slot *sl = &lc->slots[s];
        /* a slot's layer and counts are those of the expert it holds */
        lc->cand[s] = (rkm_policy_slot){.layer = sl->lc->il, .expert = sl->expert,
                                        .busy = sl->pinned || sl->state == SLOT_LOADING,
                                        .freq = sl->expert >= 0 ? sl->lc->freq[sl->expert] : 0,
                                        .last_use = sl->last_use};
    }
    return rkm_cache_policy_victim(c->p.policy, lc->cand, lc->n_slots);
}

void rkm_expert_cache__assign(layer_cache *lc, int s, int e)
{
    slot *v = &lc->slots[s];
    if (v->expert >= 0) v->lc->slot_of[v->expert] = -1; /* its layer's map */
    v->lc = lc;
    v->expert = e;
    v->prefetched = 0;
    v->state = SLOT_EMPTY;
    lc->slot_of[e] = s;
}

int rkm_expert_cache_request(rkm_expert_cache *c, int il, const int *ids, int n)
{
    if (!c || (n > 0 && !ids)) return rkm_err(RKM_EINVAL, "expert cache: NULL argument");
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    layer_cache *lc = layer_of(c, il);
    if (!lc) {
        rc = rkm_err(RKM_EINVAL, "expert cache: layer %d has no routed experts", il);
        goto out;
    }
    int n_new = 0, n_pinned = 0;
    for (int s = 0; s < lc->n_slots; s++) n_pinned += lc->slots[s].pinned && lc->slots[s].lc == lc;
    for (int i = 0; i < n; i++) {
        int e = ids[i];
        if (e < 0 || e >= lc->el->n_expert) {
            rc = rkm_err(RKM_EINVAL, "expert cache: expert %d out of range (layer %d has %d)", e, il,
                         lc->el->n_expert);
            goto out;
        }
        int s = lc->slot_of[e], dup = 0;
        for (int j = 0; j < i; j++) dup |= ids[j] == e;
        if (!dup && (s < 0 || !lc->slots[s].pinned)) n_new++;
    }
    if (n < 0 || n_pinned + n_new > lc->cap) {
        rc = rkm_err(RKM_EINVAL, "expert cache: layer %d: %d experts requested with %d pinned, %d slots", il, n,
                     n_pinned, lc->cap);
        goto out;
    }
    c->tick++;
    if (n > 0) rkm_cache_policy_age(lc->freq, lc->el->n_expert, &lc->n_req); /* as trace-sim replays it */
    if (lc->pred_pending && n > 0) { /* the first request after a hint scores it */
        for (int i = 0; i < n; i++) {
            int dup = 0;
            for (int j = 0; j < i; j++) dup |= ids[j] == ids[i];
            if (dup) continue;
            lc->pred_requested++;
            lc->pred_named += lc->predicted[ids[i]];
        }
        memset(lc->predicted, 0, (size_t)lc->el->n_expert);
        lc->pred_pending = 0;
    }
    if (c->trace && n > 0) {
        /* A lower layer starts a new forward pass; the same layer again is
         * the next tile of this pass, unless the model has one MoE layer. */
        if (il < c->trace_last_il || (il == c->trace_last_il && c->n_layers == 1)) c->trace_token++;
        c->trace_last_il = il;
        rkm_trace_write(c->trace, c->trace_token - 1, il, ids, n); /* best effort; close reports errors */
    }
    /* Hits first: pinning them before any victim is chosen keeps a miss
     * of this request from evicting an expert this request also needs. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            int e = ids[i];
            int dup = 0;
            for (int j = 0; j < i; j++) dup |= ids[j] == e;
            if (dup) continue;
            int s = lc->slot_of[e];
            int present = s >= 0 && (lc->slots[s].state == SLOT_READY || lc->slots[s].state == SLOT_LOADING);
            if (pass == 0 && present) {
                slot *sl = &lc->slots[s];
                lc->freq[e]++;
                if (sl->filling) { /* still being read by the fill: this request waits for it */
                    sl->filling = 0;
                    c->st.misses++;
                    lc->misses++;
                    rkm_io_promote(c->io, match_slot, sl);
                } else {
                    c->st.hits++;
                    lc->hits++;
                }
                if (sl->prefetched) {
                    c->st.prefetch_hits++;
                    sl->prefetched = 0;
                    if (sl->state == SLOT_LOADING) rkm_io_promote(c->io, match_slot, sl);
                }
                sl->pinned = 1;
                sl->last_use = c->tick;
            } else if (pass == 1 && !present) {
                lc->freq[e]++;
                if (s < 0) {
                    /* Wait while every candidate is being read by a
                     * prefetch; the count check above guarantees one. */
                    double t0 = rkm_now();
                    while ((s = rkm_expert_cache__victim(c, lc)) < 0) pthread_cond_wait(&c->cv, &c->mu);
                    c->st.io_wait_s += rkm_now() - t0;
                    rkm_expert_cache__assign(lc, s, e);
                }
                c->st.misses++;
                lc->misses++;
                lc->slots[s].pinned = 1;
                lc->slots[s].last_use = c->tick;
                rkm_expert_cache__start_read(c, lc, &lc->slots[s], e, RKM_IO_DEMAND);
            }
        }
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Looks up a pinned expert (c->mu held). */
static slot *pinned_slot(cache *c, int il, int e)
{
    layer_cache *lc = layer_of(c, il);
    if (!lc || e < 0 || e >= lc->el->n_expert) return NULL;
    int s = lc->slot_of[e];
    if (s < 0 || !lc->slots[s].pinned) return NULL;
    return &lc->slots[s];
}

static int get_impl(cache *c, int il, int e, const uint8_t **blob, int wait)
{
    if (!c || !blob) return rkm_err(RKM_EINVAL, "expert cache: NULL argument");
    *blob = NULL;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    slot *sl = pinned_slot(c, il, e);
    if (!sl) {
        rc = rkm_err(RKM_EINVAL, "expert cache: expert %d of layer %d was not requested", e, il);
        goto out;
    }
    if (sl->state == SLOT_LOADING) {
        if (!wait) goto out; /* rc 0: not yet */
        double t0 = rkm_now();
        while (sl->state == SLOT_LOADING) pthread_cond_wait(&c->cv, &c->mu);
        c->st.io_wait_s += rkm_now() - t0;
    }
    if (sl->state == SLOT_ERROR) {
        rc = rkm_err(sl->err, "%s", sl->msg);
        goto out;
    }
    *blob = sl->buf;
    rc = wait ? 0 : 1;
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int rkm_expert_cache_get(rkm_expert_cache *c, int il, int e, const uint8_t **blob)
{
    return get_impl(c, il, e, blob, 1);
}

int rkm_expert_cache_try_get(rkm_expert_cache *c, int il, int e, const uint8_t **blob)
{
    return get_impl(c, il, e, blob, 0);
}

/* Unpins slot s of lc; a failed slot becomes empty (c->mu held). */
static void unpin_slot(layer_cache *lc, int s)
{
    slot *sl = &lc->slots[s];
    sl->pinned = 0;
    if (sl->state == SLOT_ERROR) { /* never leave a failed blob mapped */
        sl->lc->slot_of[sl->expert] = -1;
        sl->expert = -1;
        sl->state = SLOT_EMPTY;
    }
}

void rkm_expert_cache_release(rkm_expert_cache *c, int il)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    layer_cache *lc = layer_of(c, il);
    /* a pinned slot stays in its layer's map until unpinned, so the map
     * finds them all without scanning a pool shared by every layer */
    for (int e = 0; lc && e < lc->el->n_expert; e++) {
        int s = lc->slot_of[e];
        if (s >= 0 && lc->slots[s].lc == lc) unpin_slot(lc, s);
    }
    pthread_mutex_unlock(&c->mu);
}

void rkm_expert_cache_unpin(rkm_expert_cache *c, int il, const int *ids, int n)
{
    if (!c || !ids) return;
    pthread_mutex_lock(&c->mu);
    layer_cache *lc = layer_of(c, il);
    for (int i = 0; lc && i < n; i++)
        if (ids[i] >= 0 && ids[i] < lc->el->n_expert && lc->slot_of[ids[i]] >= 0)
            unpin_slot(lc, lc->slot_of[ids[i]]);
    pthread_mutex_unlock(&c->mu);
}

void rkm_expert_cache_prefetch(rkm_expert_cache *c, int il, const int *ids, int n)
{
    if (!c || !ids || !c->p.prefetch) return;
    pthread_mutex_lock(&c->mu);
    layer_cache *lc = layer_of(c, il);
    if (lc) { /* the hint, scored by the layer's next request */
        memset(lc->predicted, 0, (size_t)lc->el->n_expert);
        for (int i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] < lc->el->n_expert) lc->predicted[ids[i]] = 1;
        lc->pred_pending = 1;
        if (c->trace && n > 0) rkm_trace_write_prediction(c->trace, c->trace_token ? c->trace_token - 1 : 0, il, ids, n);
    }
    for (int i = 0; lc && i < n; i++) {
        int e = ids[i];
        if (e < 0 || e >= lc->el->n_expert || lc->slot_of[e] >= 0) continue;
        int s = rkm_expert_cache__victim(c, lc);
        /* A prefetch never evicts an unused prefetch (it would churn). */
        if (s < 0 || lc->slots[s].prefetched) break;
        rkm_expert_cache__assign(lc, s, e);
        slot *sl = &lc->slots[s];
        sl->prefetched = 1;
        sl->last_use = c->tick + 1; /* newer than anything requested so far */
        c->st.prefetch_issued++;
        rkm_expert_cache__start_read(c, lc, sl, e, RKM_IO_PREFETCH);
    }
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------ stats */

void rkm_expert_cache_get_stats(const rkm_expert_cache *c, rkm_expert_cache_stats *s)
{
    if (!s) return;
    memset(s, 0, sizeof *s);
    if (!c) return;
    pthread_mutex_lock((pthread_mutex_t *)&c->mu);
    *s = c->st;
    pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
}

void rkm_expert_cache_reset_stats(rkm_expert_cache *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    memset(&c->st, 0, sizeof c->st);
    for (int i = 0; i < c->n_layers; i++) {
        layer_cache *lc = &c->layers[i];
        lc->hits = lc->misses = lc->pred_named = lc->pred_requested = 0;
    }
    pthread_mutex_unlock(&c->mu);
}

void rkm_expert_cache_layer_prediction(const rkm_expert_cache *c, int il, uint64_t *named, uint64_t *requested)
{
    uint64_t a = 0, b = 0;
    if (c) {
        pthread_mutex_lock((pthread_mutex_t *)&c->mu);
        for (int i = 0; i < c->n_layers; i++) {
            const layer_cache *lc = &c->layers[i];
            if (il >= 0 && lc->il != il) continue;
            a += lc->pred_named;
            b += lc->pred_requested;
        }
        pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
    }
    if (named) *named = a;
    if (requested) *requested = b;
}

void rkm_expert_cache_layer_stats(const rkm_expert_cache *c, int il, uint64_t *hits, uint64_t *misses)
{
    uint64_t h = 0, m = 0;
    if (c) {
        pthread_mutex_lock((pthread_mutex_t *)&c->mu);
        const layer_cache *lc = layer_of(c, il);
        if (lc) h = lc->hits, m = lc->misses;
        pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
    }
    if (hits) *hits = h;
    if (misses) *misses = m;
}

const char *rkm_expert_cache_io_backend(const rkm_expert_cache *c) { return c ? rkm_io_backend_name(c->io) : ""; }

int rkm_expert_cache_shared(const rkm_expert_cache *c) { return c && c->shared; }

int rkm_expert_cache_direct(const rkm_expert_cache *c)
{
    int d = c && c->n_layers > 0;
    for (int i = 0; c && i < c->n_layers; i++) d &= c->layers[i].direct;
    return d;
}

void rkm_expert_cache_set_fault_hook(rkm_expert_cache *c, rkm_expert_fault_fn fn, void *user)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->fault_fn = fn;
    c->fault_user = user;
    pthread_mutex_unlock(&c->mu);
}
