/*
 * io_engine.c - the read engine of the expert streamer: a pread thread pool,
 * or one io_uring thread when built with RKM_HAVE_URING and the kernel
 * allows it (containers with seccomp often refuse io_uring_setup; then the
 * pool is used).
 *
 * Threads: submitters (any thread) append ops to one of two FIFO queues
 * under io->mu; the pool threads (or the uring thread) take demand ops
 * before prefetch ops, read, and call op->done on their own thread.
 * The uring thread sleeps in io_uring_wait_cqe; submitters wake it through
 * an eventfd that is kept polled inside the ring.
 * Ownership: the engine owns only its threads, ring and eventfd; ops and
 * their buffers belong to the submitter.
 *
 * Lock: io->mu guards q_head/q_tail, n_queued, stop. Callbacks run without
 * it held, so they may submit more ops.
 */
#include "runtime/io_engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef RKM_HAVE_URING
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#endif

#define IO_MAX_THREADS 64

struct rkm_io {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rkm_io_op *q_head[2], *q_tail[2]; /* [RKM_IO_DEMAND], [RKM_IO_PREFETCH] */
    int n_queued;
    int stop;
    int backend;                      /* RKM_IO_PREAD or RKM_IO_URING */
    int n_threads;
    pthread_t threads[IO_MAX_THREADS];
#ifdef RKM_HAVE_URING
    struct io_uring ring;
    int efd;
    int queue_depth;
#endif
};

static rkm_io_op *pop_locked(rkm_io *io)
{
    for (int q = 0; q < 2; q++) {
        rkm_io_op *op = io->q_head[q];
        if (op) {
            io->q_head[q] = op->next;
            if (!op->next) io->q_tail[q] = NULL;
            op->next = NULL;
            io->n_queued--;
            return op;
        }
    }
    return NULL;
}

static void push_locked(rkm_io *io, rkm_io_op *op, int q)
{
    op->next = NULL;
    if (io->q_tail[q])
        io->q_tail[q]->next = op;
    else
        io->q_head[q] = op;
    io->q_tail[q] = op;
    io->n_queued++;
}

/* Reads op completely: retries short reads and EINTR, stops at EOF. */
static void do_pread(rkm_io_op *op)
{
    op->got = 0;
    op->err = 0;
    while (op->got < op->len) {
        ssize_t r = pread(op->fd, (char *)op->buf + op->got, op->len - op->got, (off_t)(op->off + op->got));
        if (r < 0) {
            if (errno == EINTR) continue;
            op->err = errno;
            break;
        }
        if (r == 0) break;
        op->got += (uint64_t)r;
    }
}

static void *pool_main(void *arg)
{
    rkm_io *io = arg;
    for (;;) {
        pthread_mutex_lock(&io->mu);
        while (!io->stop && io->n_queued == 0) pthread_cond_wait(&io->cv, &io->mu);
        rkm_io_op *op = pop_locked(io);
        pthread_mutex_unlock(&io->mu);
        if (!op) break; /* stop requested and nothing left */
        do_pread(op);
        op->done(op);
    }
    return NULL;
}

#ifdef RKM_HAVE_URING
#define URING_WAKE_TAG ((void *)1)

static void uring_prep(rkm_io *io, rkm_io_op *op)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    /* Cannot fail: at most queue_depth reads + 1 poll are in flight and the
     * ring has 2 * queue_depth entries. */
    io_uring_prep_read(sqe, op->fd, (char *)op->buf + op->got, (unsigned)(op->len - op->got), op->off + op->got);
    io_uring_sqe_set_data(sqe, op);
}

static void uring_arm_wake(rkm_io *io)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    io_uring_prep_poll_add(sqe, io->efd, POLLIN);
    io_uring_sqe_set_data(sqe, URING_WAKE_TAG);
}

static void *uring_main(void *arg)
{
    rkm_io *io = arg;
    int inflight = 0;
    uring_arm_wake(io);
    io_uring_submit(&io->ring);
    for (;;) {
        pthread_mutex_lock(&io->mu);
        int stop = io->stop;
        int added = 0;
        while (inflight < io->queue_depth) {
            rkm_io_op *op = pop_locked(io);
            if (!op) break;
            op->got = 0;
            op->err = 0;
            uring_prep(io, op);
            inflight++;
            added++;
        }
        int queued = io->n_queued;
        pthread_mutex_unlock(&io->mu);
        if (stop && inflight == 0 && queued == 0) break;
        if (added) io_uring_submit(&io->ring);
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe(&io->ring, &cqe);
        if (rc == -EINTR) continue;
        if (rc < 0) break; /* ring broken: cannot happen in practice */
        unsigned head, n = 0;
        int resubmit = 0;
        io_uring_for_each_cqe(&io->ring, head, cqe)
        {
            n++;
            void *data = io_uring_cqe_get_data(cqe);
            if (data == URING_WAKE_TAG) {
                uint64_t v;
                if (read(io->efd, &v, sizeof v) < 0) { /* nothing pending: harmless */
                }
                uring_arm_wake(io);
                resubmit = 1;
                continue;
            }
            rkm_io_op *op = data;
            int res = cqe->res;
            if (res == -EINTR || res == -EAGAIN) {
                uring_prep(io, op);
                resubmit = 1;
                continue;
            }
            if (res < 0) {
                op->err = -res;
            } else if (res > 0) {
                op->got += (uint64_t)res;
                if (op->got < op->len) { /* short read before EOF: continue */
                    uring_prep(io, op);
                    resubmit = 1;
                    continue;
                }
            }
            inflight--;
            op->done(op);
        }
        io_uring_cq_advance(&io->ring, n);
        if (resubmit) io_uring_submit(&io->ring);
    }
    return NULL;
}

static int uring_init(rkm_io *io, const rkm_io_params *p)
{
    io->queue_depth = p->queue_depth > 0 ? p->queue_depth : 32;
    if (io->queue_depth > 4096) io->queue_depth = 4096;
    io->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (io->efd < 0) return -1;
    if (io_uring_queue_init((unsigned)(2 * io->queue_depth + 2), &io->ring, 0) < 0) {
        close(io->efd);
        io->efd = -1;
        return -1;
    }
    return 0;
}
#endif

rkm_io *rkm_io_new(const rkm_io_params *p)
{
    rkm_io_params dp = {0};
    if (!p) p = &dp;
    rkm_io *io = calloc(1, sizeof *io);
    if (!io) return NULL;
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->cv, NULL);
    io->backend = RKM_IO_PREAD;
#ifdef RKM_HAVE_URING
    io->efd = -1;
    int want = p->backend;
    if (want != RKM_IO_PREAD && uring_init(io, p) == 0) {
        io->backend = RKM_IO_URING;
        if (pthread_create(&io->threads[0], NULL, uring_main, io) == 0) {
            io->n_threads = 1;
            return io;
        }
        io_uring_queue_exit(&io->ring);
        close(io->efd);
        io->efd = -1;
        io->backend = RKM_IO_PREAD;
    }
#endif
    int n = p->n_threads > 0 ? p->n_threads : RKM_IO_DEFAULT_THREADS;
    if (n > IO_MAX_THREADS) n = IO_MAX_THREADS;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&io->threads[i], NULL, pool_main, io) != 0) break;
        io->n_threads++;
    }
    if (io->n_threads == 0) {
        pthread_mutex_destroy(&io->mu);
        pthread_cond_destroy(&io->cv);
        free(io);
        return NULL;
    }
    return io;
}

static void wake(rkm_io *io)
{
#ifdef RKM_HAVE_URING
    if (io->backend == RKM_IO_URING) {
        uint64_t one = 1;
        if (write(io->efd, &one, sizeof one) < 0) { /* counter full: already awake */
        }
        return;
    }
#endif
    pthread_cond_signal(&io->cv);
}

void rkm_io_free(rkm_io *io)
{
    if (!io) return;
    pthread_mutex_lock(&io->mu);
    io->stop = 1;
    pthread_cond_broadcast(&io->cv);
    pthread_mutex_unlock(&io->mu);
    wake(io);
    for (int i = 0; i < io->n_threads; i++) pthread_join(io->threads[i], NULL);
#ifdef RKM_HAVE_URING
    if (io->backend == RKM_IO_URING) {
        io_uring_queue_exit(&io->ring);
        close(io->efd);
    }
#endif
    pthread_mutex_destroy(&io->mu);
    pthread_cond_destroy(&io->cv);
    free(io);
}

void rkm_io_submit(rkm_io *io, rkm_io_op *op)
{
    pthread_mutex_lock(&io->mu);
    push_locked(io, op, op->prio == RKM_IO_PREFETCH ? 1 : 0);
    pthread_mutex_unlock(&io->mu);
    wake(io);
}

void rkm_io_promote(rkm_io *io, int (*match)(const rkm_io_op *op, void *user), void *user)
{
    pthread_mutex_lock(&io->mu);
    rkm_io_op *prev = NULL, *op = io->q_head[1];
    while (op) {
        rkm_io_op *next = op->next;
        if (match(op, user)) {
            if (prev)
                prev->next = next;
            else
                io->q_head[1] = next;
            if (io->q_tail[1] == op) io->q_tail[1] = prev;
            io->n_queued--;
            op->prio = RKM_IO_DEMAND;
            push_locked(io, op, 0);
        } else {
            prev = op;
        }
        op = next;
    }
    pthread_mutex_unlock(&io->mu);
}

const char *rkm_io_backend_name(const rkm_io *io) { return io && io->backend == RKM_IO_URING ? "io_uring" : "pread"; }
int rkm_io_n_threads(const rkm_io *io) { return io ? io->n_threads : 0; }
