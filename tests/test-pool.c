/*
 * test-pool.c - the persistent thread pool: every share runs exactly once
 * per job, on distinct threads, with correct results under thousands of
 * back-to-back jobs, with short and long jobs (workers asleep on the futex
 * and workers spinning), several thread counts, the default count, a NULL
 * pool, and the pinned mode.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "common/test.h"
#include "kernels/kernels.h"
#include "util/knobs.h"

#define MAX_T 8

typedef struct {
    _Atomic int calls[MAX_T];
    _Atomic int bad_nth;
    int nth_expected;
    pthread_t tid[MAX_T];
    int64_t partial[MAX_T];
    const int64_t *data;
    int64_t n;
    int sleep_us;
} job;

static void job_fn(void *ctx, int ith, int nth)
{
    job *j = ctx;
    if (nth != j->nth_expected || ith < 0 || ith >= nth) {
        atomic_fetch_add(&j->bad_nth, 1);
        return;
    }
    atomic_fetch_add(&j->calls[ith], 1);
    j->tid[ith] = pthread_self();
    int64_t lo = j->n * ith / nth, hi = j->n * (ith + 1) / nth, s = 0;
    for (int64_t i = lo; i < hi; i++) s += j->data[i];
    j->partial[ith] = s;
    if (j->sleep_us) usleep((useconds_t)j->sleep_us);
}

/* Returns the number of errors (no CHECK: two threads may call it).
 * gap_us < 0: park the pool after each job (rkm_pool_park), then wait
 * -gap_us: the next job must wake the sleeping workers. */
static int run_jobs_quiet(rkm_pool *p, int n_jobs, int sleep_us, int gap_us)
{
    int nth = rkm_pool_n_threads(p);
    if (nth < 1 || nth > MAX_T) return 1;
    int64_t n = 1000 + 7;
    int64_t *data = malloc(sizeof(int64_t) * (size_t)n);
    int errors = 0;
    for (int it = 0; it < n_jobs; it++) {
        int64_t total = 0;
        for (int64_t i = 0; i < n; i++) total += data[i] = (int64_t)(i * 31 + it);
        job j;
        memset(&j, 0, sizeof j);
        j.nth_expected = nth;
        j.data = data;
        j.n = n;
        j.sleep_us = sleep_us;
        rkm_pool_run(p, job_fn, &j);
        int64_t s = 0;
        for (int t = 0; t < nth; t++) {
            if (atomic_load(&j.calls[t]) != 1) errors++;
            s += j.partial[t];
            for (int u = 0; u < t; u++)
                if (pthread_equal(j.tid[t], j.tid[u])) errors++;
        }
        if (!pthread_equal(j.tid[0], pthread_self())) errors++; /* share 0 is the caller's */
        if (s != total || atomic_load(&j.bad_nth)) errors++;
        if (gap_us < 0) {
            rkm_pool_park(p);
            if (it % 3) usleep((useconds_t)-gap_us); /* and sometimes none: park, then a job at once */
        } else if (gap_us) {
            usleep((useconds_t)gap_us);
        }
    }
    free(data);
    return errors;
}

static void run_jobs(rkm_pool *p, int n_jobs, int sleep_us, int gap_us)
{
    int errors = run_jobs_quiet(p, n_jobs, sleep_us, gap_us);
    CHECK_MSG(errors == 0, "nth=%d jobs=%d sleep=%d gap=%d: %d errors", rkm_pool_n_threads(p), n_jobs,
              sleep_us, gap_us, errors);
}

static void test_null_pool(void)
{
    CHECK_EQ_INT(rkm_pool_n_threads(NULL), 1);
    run_jobs(NULL, 10, 0, 0);
}

/* Two pools driven by two different threads at the same time. */
static void *driver(void *arg)
{
    rkm_pool *p = arg;
    return (void *)(intptr_t)run_jobs_quiet(p, 500, 0, 0);
}

int main(void)
{
#if defined(__aarch64__)
    int n_jobs = 300; /* usually under qemu */
#else
    int n_jobs = 5000;
#endif
    test_null_pool();
    for (int nth = 1; nth <= 4; nth++) {
        rkm_pool *p = rkm_pool_new(nth);
        CHECK(p != NULL);
        if (!p) continue;
        CHECK_EQ_INT(rkm_pool_n_threads(p), nth);
        run_jobs(p, n_jobs, 0, 0); /* back to back: workers spinning */
        run_jobs(p, 20, 0, 2000);  /* gaps: workers go to sleep between jobs */
        run_jobs(p, 20, 300, 0);   /* long jobs: the owner waits */
        run_jobs(p, 200, 0, -50);  /* parked between jobs (the owner waiting on IO) */
        rkm_pool_free(p);
    }
    /* default: the performance cores, at least one */
    rkm_pool *p = rkm_pool_new(0);
    CHECK(p != NULL);
    if (p) {
        int n = rkm_pool_n_threads(p);
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        CHECK(n >= 1 && n <= online);
        if (n <= MAX_T) run_jobs(p, n_jobs / 10, 0, 0);
        rkm_pool_free(p);
    }
    /* freeing a pool whose workers are asleep */
    p = rkm_pool_new(3);
    usleep(5000);
    rkm_pool_free(p);
    rkm_pool_free(NULL);

    /* pinned */
    rkm_knob_set(RKM_KNOB_PIN, "1");
    p = rkm_pool_new(2);
    CHECK(p != NULL);
    if (p) {
        run_jobs(p, n_jobs / 10, 0, 0);
        rkm_pool_free(p);
    }
    rkm_knob_set(RKM_KNOB_PIN, NULL);

    rkm_pool *a = rkm_pool_new(2), *b = rkm_pool_new(2);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, driver, a);
    pthread_create(&tb, NULL, driver, b);
    void *ea, *eb;
    pthread_join(ta, &ea);
    pthread_join(tb, &eb);
    CHECK_EQ_INT((intptr_t)ea, 0);
    CHECK_EQ_INT((intptr_t)eb, 0);
    rkm_pool_free(a);
    rkm_pool_free(b);
    return test_done();
}
