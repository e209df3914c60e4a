/*
 * pool.c - the persistent thread pool the kernels run on.
 *
 * Threads: rkm_pool_new starts n-1 workers that live until rkm_pool_free;
 * the owner (one thread at a time drives a pool) runs share 0 of every job
 * itself. A job is published by bumping `gen`; workers spin on it for a
 * short while (decode issues a job every few microseconds, and a futex
 * wake costs about as much as a small matvec) and then sleep on it with
 * futex(2). The owner waits for `n_done` the same way. There is no lock:
 * `fn`/`ctx` are written before the release-increment of `gen` and read
 * after the acquire-load that sees it.
 *
 * Sleeping handshake (both sides sequentially consistent, Dekker style):
 * a worker increments n_sleeping and then futex-waits on gen's old value;
 * the owner stores the new gen and then reads n_sleeping. Either the worker
 * sees the new gen (futex returns at once) or the owner sees the sleeper
 * and wakes it. Same for the owner waiting on n_done (owner_sleeping).
 *
 * rkm_pool_park makes idle workers stop spinning and sleep until the next
 * job: the owner says so before it blocks for long (an expert being read
 * from disk), so the spinners leave the cores to the IO threads.
 *
 * More threads than online CPUs (tests, oversubscribed hosts) disables
 * spinning: a spinner would only steal the core of the thread it waits for.
 *
 * Thread count: n_threads <= 0 means the performance cores this process
 * may run on: CPUs with the highest /sys cpu_capacity (big.LITTLE, e.g. the
 * four Cortex-A76 of an RK3588), else the highest cpuinfo_max_freq (within
 * 15%, so per-core boost differences do not split identical cores), else
 * all of them. RKM_PIN=1 pins worker i (and the creating thread, as share
 * 0) to the i-th of those CPUs.
 *
 * Ownership: the pool owns its threads and arrays; rkm_pool_free joins.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "util/common.h"
#include "util/knobs.h"

#define POOL_MAX_THREADS 256
/* How long a waiting thread spins before sleeping, in microseconds. */
#define POOL_SPIN_US_DEFAULT 200

struct rkm_pool;
typedef struct {
    struct rkm_pool *pool;
    int ith;
    pthread_t th;
} pool_worker;

struct rkm_pool {
    int n;                       /* threads including the owner */
    pool_worker *workers;        /* n - 1 */
    int *cpus;                   /* CPU of each share when pinning, else NULL */
    _Atomic uint32_t gen;        /* job generation; futex word of the workers */
    _Atomic uint32_t n_done;     /* workers done with the current job; owner's futex word */
    _Atomic int n_sleeping;      /* workers in (or entering) futex wait on gen */
    _Atomic int owner_sleeping;  /* owner in (or entering) futex wait on n_done */
    _Atomic int stop;
    _Atomic int park;            /* 1: idle workers sleep at once (rkm_pool_park) */
    rkm_pool_fn fn;              /* current job, published by gen */
    void *ctx;
    int spin_us;
};

static long futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Spins until *addr != old (returns the new value) or the spin budget is
 * spent or *park is set (returns old). After the first 50 us it also
 * yields, so a thread the spinner is waiting for gets the core on a loaded
 * machine. */
static uint32_t spin_while_equal(_Atomic uint32_t *addr, uint32_t old, int spin_us, _Atomic int *park)
{
    uint64_t t0 = 0;
    if (spin_us <= 0) return atomic_load_explicit(addr, memory_order_acquire);
    for (uint32_t i = 0;; i++) {
        uint32_t v = atomic_load_explicit(addr, memory_order_acquire);
        if (v != old) return v;
        if (park && atomic_load_explicit(park, memory_order_relaxed)) return old;
        cpu_relax();
        if ((i & 255) == 255) {
            uint64_t t = now_us();
            if (!t0) t0 = t;
            else if (t - t0 >= (uint64_t)spin_us) return old;
            else if (t - t0 >= 50) sched_yield();
        }
    }
}

static void pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set); /* best effort */
}

static void *worker_main(void *arg)
{
    pool_worker *wk = arg;
    struct rkm_pool *p = wk->pool;
    if (p->cpus) pin_self(p->cpus[wk->ith]);
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = spin_while_equal(&p->gen, seen, p->spin_us, &p->park);
        while (g == seen) {
            atomic_fetch_add(&p->n_sleeping, 1);
            futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->n_sleeping, 1);
            g = atomic_load(&p->gen);
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        p->fn(p->ctx, wk->ith, p->n);
        uint32_t done = atomic_fetch_add(&p->n_done, 1) + 1;
        if (done == (uint32_t)(p->n - 1) && atomic_load(&p->owner_sleeping))
            futex_wake_all(&p->n_done);
    }
    return NULL;
}

static long read_sys_long(int cpu, const char *leaf)
{
    char path[128], buf[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/%s", cpu, leaf);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    if (fgets(buf, sizeof buf, f)) v = strtol(buf, NULL, 10);
    fclose(f);
    return v > 0 ? v : -1;
}

/* Fills cpus with the performance CPUs this process may use; returns the
 * count (>= 1). */
static int perf_cpus(int *cpus, int cap)
{
    cpu_set_t set;
    int all[POOL_MAX_THREADS], n_all = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE && n_all < POOL_MAX_THREADS; c++)
            if (CPU_ISSET(c, &set)) all[n_all++] = c;
    }
    if (n_all == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1) n = 1;
        for (int c = 0; c < n && n_all < POOL_MAX_THREADS; c++) all[n_all++] = c;
    }
    long score[POOL_MAX_THREADS], best = -1;
    int have = 1;
    const char *leaves[] = {"cpu_capacity", "cpufreq/cpuinfo_max_freq"};
    for (size_t l = 0; l < RKM_ARRAY_LEN(leaves); l++) {
        have = 1;
        best = -1;
        for (int i = 0; i < n_all && have; i++) {
            score[i] = read_sys_long(all[i], leaves[l]);
            if (score[i] < 0) have = 0;
            else if (score[i] > best) best = score[i];
        }
        if (have) break;
    }
    int n = 0;
    for (int i = 0; i < n_all && n < cap; i++)
        if (!have || score[i] * 100 >= best * 85) cpus[n++] = all[i];
    if (n == 0) cpus[n++] = all[0];
    return n;
}

rkm_pool *rkm_pool_new(int n_threads)
{
    int cpus[POOL_MAX_THREADS];
    int n_perf = perf_cpus(cpus, POOL_MAX_THREADS);
    int n = n_threads > 0 ? n_threads : n_perf;
    if (n > POOL_MAX_THREADS) n = POOL_MAX_THREADS;
    struct rkm_pool *p = calloc(1, sizeof *p);
    if (!p) {
        rkm_err(RKM_ENOMEM, "thread pool: out of memory");
        return NULL;
    }
    p->n = n;
    p->spin_us = POOL_SPIN_US_DEFAULT;
    p->spin_us = (int)rkm_knob_int(RKM_KNOB_SPIN_US, p->spin_us);
    if (p->spin_us < 0) p->spin_us = 0;
    /* More threads than CPUs: a spinning thread only delays the one it
     * waits for, so sleep at once. */
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_cpu > 0 && n > n_cpu) p->spin_us = 0;
    if (rkm_knob_is(RKM_KNOB_PIN, "1")) {
        p->cpus = malloc(sizeof(int) * (size_t)n);
        if (!p->cpus) goto err;
        for (int i = 0; i < n; i++) p->cpus[i] = cpus[i % n_perf];
        pin_self(p->cpus[0]);
    }
    if (n > 1) {
        p->workers = calloc((size_t)n - 1, sizeof *p->workers);
        if (!p->workers) goto err;
    }
    for (int i = 1; i < n; i++) {
        pool_worker *wk = &p->workers[i - 1];
        wk->pool = p;
        wk->ith = i;
        int rc = pthread_create(&wk->th, NULL, worker_main, wk);
        if (rc != 0) {
            p->n = i; /* join the ones already started */
            rkm_pool_free(p);
            rkm_err(RKM_ENOMEM, "thread pool: cannot start thread %d: %s", i, strerror(rc));
            return NULL;
        }
    }
    return p;
err:
    free(p->cpus);
    free(p->workers);
    free(p);
    rkm_err(RKM_ENOMEM, "thread pool: out of memory");
    return NULL;
}

void rkm_pool_free(rkm_pool *p)
{
    if (!p) return;
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    atomic_fetch_add(&p->gen, 1);
    futex_wake_all(&p->gen);
    for (int i = 1; i < p->n; i++) pthread_join(p->workers[i - 1].th, NULL);
    free(p->workers);
    free(p->cpus);
    free(p);
}

int rkm_pool_n_threads(const rkm_pool *p) { return p ? p->n : 1; }

void rkm_pool_run(rkm_pool *p, rkm_pool_fn fn, void *ctx)
{
    if (!p || p->n <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->park, 0, memory_order_relaxed);
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes fn/ctx/n_done */
    if (atomic_load(&p->n_sleeping) > 0) futex_wake_all(&p->gen);
    fn(ctx, 0, p->n);
    uint32_t want = (uint32_t)(p->n - 1);
    uint32_t done = atomic_load_explicit(&p->n_done, memory_order_acquire);
    while (done != want) {
        done = spin_while_equal(&p->n_done, done, p->spin_us * 5, NULL);
        if (done == want) break;
        atomic_store(&p->owner_sleeping, 1);
        done = atomic_load(&p->n_done);
        if (done != want) futex_wait(&p->n_done, done);
        atomic_store(&p->owner_sleeping, 0);
        done = atomic_load_explicit(&p->n_done, memory_order_acquire);
    }
}

void rkm_pool_park(rkm_pool *p)
{
    if (p) atomic_store_explicit(&p->park, 1, memory_order_relaxed);
}

int64_t rkm_pool_take(_Atomic int64_t *next, int64_t total, int64_t chunk, int64_t grain, int nth, int64_t *r0)
{
    int64_t cur = atomic_load_explicit(next, memory_order_relaxed);
    for (;;) {
        if (cur >= total) return 0;
        int64_t rem = total - cur, take = rem / (2 * (int64_t)(nth > 0 ? nth : 1));
        if (take > chunk) take = chunk;
        take = RKM_ALIGN_UP(RKM_MAX(take, 1), grain);
        if (take > rem) take = rem;
        if (atomic_compare_exchange_weak_explicit(next, &cur, cur + take, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *r0 = cur;
            return take;
        }
    }
}
