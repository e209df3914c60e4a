/*
 * expert_cache_fill.c - the expert cache's two background threads, apart from
 * its slot state machine (expert_cache_slots.c):
 *
 *  - the prefault thread (budgeted caches: fewer slots than experts
 *    somewhere) populates the slot buffers' pages at the lowest priority
 *    (prefault_main), so first reads into them do not pay for faulting
 *    the pages in;
 *  - the fill thread (fully resident caches with params.fill, when every
 *    slot fits in MemAvailable) reads every expert ahead, one blob at a
 *    time at prefetch priority (fill_main), so a model that fits in
 *    memory stops stalling on first uses within seconds of opening.
 *
 * Threads: rkm_expert_cache__fill_start and _stop run on the thread creating or
 * freeing the cache (no other thread uses it then). The prefault thread
 * reads only what creation wrote once (layers, slot buffers' addresses,
 * blob strides) and bg_stop (atomic); it takes no lock and writes no cache
 * field, only the pages' contents through madvise. The fill thread holds
 * c->mu for everything it does (slot_of, slots, start of reads; it sets
 * fill_done and broadcasts c->cv under it) and drops it only inside
 * pthread_cond_wait; it reads bg_stop (atomic). Lock order as in
 * expert_cache_impl.h: c->mu, then io->mu (taken by the read submission).
 * Ownership: the threads own nothing; the cache joins them in
 * rkm_expert_cache__fill_stop before it frees anything they touch.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "runtime/expert_cache_impl.h"
#include "util/common.h"

typedef struct rkm_expert_cache cache;

/* A budgeted cache will fill every slot sooner or later, and the first
 * O_DIRECT read into a never-touched page pays for the kernel faulting it
 * in and zeroing it inside the read (measured on the dev VM: 830 MB/s into
 * fresh pages against 1.2-1.7 GB/s into touched ones). This thread, at the
 * lowest priority, populates the slot buffers ahead of the reads, so that
 * cost leaves the critical path. MADV_POPULATE_WRITE never changes the
 * bytes of a present page, so it may race with reads into the same slots. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static void *prefault_main(void *arg)
{
    cache *c = arg;
    setpriority(PRIO_PROCESS, 0, 19); /* this thread only (Linux) */
    for (int i = 0; i < c->n_layers; i++) {
        layer_cache *lc = &c->layers[i];
        for (int s = 0; !lc->shares && s < lc->n_slots; s++) {
            if (atomic_load_explicit(&c->bg_stop, memory_order_relaxed)) return NULL;
            uint8_t *b = lc->slots[s].buf;
            size_t n = lc->el->blob_stride;
            /* Kernels before 5.14 lack it: then stop. Touching the pages by
             * hand instead would race with reads landing in them. */
            if (madvise(b, n, MADV_POPULATE_WRITE) != 0) return NULL;
        }
    }
    return NULL;
}

/* The background fill of a fully resident cache: every expert not yet in a
 * slot, layer by layer, one blob in flight at a time so that demand reads
 * (ahead in the IO queue) wait behind at most one blob's chunks. It only
 * takes empty slots, never evicts, and leaves a failed read to the
 * request that needs the expert (finish_read forgets an unpinned slot). */
static void *fill_main(void *arg)
{
    cache *c = arg;
    setpriority(PRIO_PROCESS, 0, 19); /* this thread only (Linux) */
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_layers; i++) {
        layer_cache *lc = &c->layers[i];
        for (int e = 0; e < lc->el->n_expert; e++) {
            if (atomic_load_explicit(&c->bg_stop, memory_order_relaxed)) goto out;
            if (lc->slot_of[e] >= 0) continue;
            int s = rkm_expert_cache__victim(c, lc);
            if (s < 0 || lc->slots[s].expert >= 0) continue;
            rkm_expert_cache__assign(lc, s, e);
            slot *sl = &lc->slots[s];
            sl->filling = 1;
            rkm_expert_cache__start_read(c, lc, sl, e, RKM_IO_PREFETCH);
            while (sl->state == SLOT_LOADING && !atomic_load_explicit(&c->bg_stop, memory_order_relaxed))
                pthread_cond_wait(&c->cv, &c->mu);
        }
    }
out:
    c->fill_done = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void rkm_expert_cache__fill_start(cache *c)
{
    const rkm_expert_cache_params *p = &c->p;
    /* Only a budgeted cache (fewer slots than experts somewhere) is
     * populated ahead: a fully resident one grows as experts are used. */
    int budgeted = 0;
    for (int i = 0; i < c->n_layers; i++) budgeted |= c->layers[i].cap < c->layers[i].el->n_expert;
    if (p->prefault) budgeted = p->prefault == 2;
    if (p->slot_alloc) budgeted = 0; /* the caller's memory (NPU buffers) comes populated */
    if (budgeted && pthread_create(&c->prefault_thr, NULL, prefault_main, c) == 0) c->prefault_started = 1;
    /* The fill needs every slot (no eviction) and room for them all; it
     * would eat injected faults meant for requests. */
    uint64_t avail = rkm_mem_available_bytes();
    int fill = p->fill && !budgeted && !c->n_faults && c->n_layers > 0 && (!avail || c->bytes <= avail);
    if (fill && pthread_create(&c->fill_thr, NULL, fill_main, c) == 0) c->fill_started = 1;
    else c->fill_done = 1;
}

void rkm_expert_cache__fill_stop(cache *c)
{
    atomic_store(&c->bg_stop, 1);
    if (c->fill_started) {
        pthread_mutex_lock(&c->mu); /* wakes the fill from its wait */
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->fill_thr, NULL);
    }
    if (c->prefault_started) pthread_join(c->prefault_thr, NULL);
    c->fill_started = c->prefault_started = 0;
}

int rkm_expert_cache_wait_fill(rkm_expert_cache *c)
{
    if (!c) return 0;
    int n = 0;
    pthread_mutex_lock(&c->mu);
    while (!c->fill_done) pthread_cond_wait(&c->cv, &c->mu);
    for (int i = 0; i < c->n_layers; i++)
        for (int s = 0; !c->layers[i].shares && s < c->layers[i].n_slots; s++)
            n += c->layers[i].slots[s].state == SLOT_READY;
    pthread_mutex_unlock(&c->mu);
    return n;
}
