/*
 * io_engine.h - asynchronous positional reads for the expert streamer.
 *
 * A caller fills rkm_io_op structs (fd, aligned buffer, offset, length,
 * completion callback) and submits them; the engine performs each read
 * completely (retrying short reads until EOF) on one of its threads and
 * calls op->done(op) on that thread. Two priorities: demand reads (the
 * forward pass is waiting) are always started before prefetch reads.
 *
 * Back ends: a pool of threads doing pread (always available), or, when
 * built with RKM_HAVE_URING (Debian's liburing, -luring) and the kernel
 * allows io_uring, one thread that keeps up to queue_depth reads in flight.
 * The choice never changes the bytes read, only how fast they arrive.
 *
 * Threads: rkm_io_submit may be called from any thread; callbacks run on
 * the engine's threads and must not call rkm_io_free. The ops belong to the
 * caller and must stay alive until their callback has run.
 */
#ifndef RKM_IO_ENGINE_H
#define RKM_IO_ENGINE_H

#include <stdint.h>

enum { RKM_IO_DEMAND = 0, RKM_IO_PREFETCH = 1 };
enum { RKM_IO_AUTO = 0, RKM_IO_PREAD = 1, RKM_IO_URING = 2 };
/* pread threads when n_threads is 0 (docs/STREAMING.md: one round of
 * 512 KiB chunks per 2-4 MiB expert blob) */
#define RKM_IO_DEFAULT_THREADS 8

typedef struct rkm_io_op rkm_io_op;
struct rkm_io_op {
    /* in */
    int fd;
    void *buf;          /* aligned to 4096 for O_DIRECT files */
    uint64_t off;       /* aligned likewise */
    uint64_t len;
    int prio;           /* RKM_IO_DEMAND or RKM_IO_PREFETCH */
    void (*done)(rkm_io_op *op);
    void *user;
    int tag;            /* free for the caller */
    /* out (valid in done) */
    uint64_t got;       /* bytes read (< len only at EOF or on error) */
    int err;            /* 0 or errno */
    /* engine */
    rkm_io_op *next;
};

typedef struct rkm_io_params {
    int backend;        /* RKM_IO_AUTO / PREAD / URING */
    int n_threads;      /* pread threads; 0: RKM_IO_DEFAULT_THREADS */
    int queue_depth;    /* io_uring reads in flight; 0: 32 */
} rkm_io_params;

typedef struct rkm_io rkm_io;

rkm_io *rkm_io_new(const rkm_io_params *p);
/* Waits for every submitted op to complete, then stops the threads. */
void rkm_io_free(rkm_io *io);
void rkm_io_submit(rkm_io *io, rkm_io_op *op);
/* Moves queued (not yet started) ops for which match(op, user) is true to
 * the demand queue, e.g. when a prefetched expert becomes needed now. */
void rkm_io_promote(rkm_io *io, int (*match)(const rkm_io_op *op, void *user), void *user);
/* "pread" or "io_uring". */
const char *rkm_io_backend_name(const rkm_io *io);
int rkm_io_n_threads(const rkm_io *io);

#endif
