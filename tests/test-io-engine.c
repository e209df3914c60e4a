/*
 * test-io-engine.c - the expert streamer's read engine (runtime/io_engine.c)
 * on its own, for each back end it has: the pread pool, and io_uring where
 * the kernel allows it (asked for as the cache asks: RKM_IO_AUTO and
 * RKM_IO_URING fall back to the pool when io_uring_setup is refused).
 *
 *  - many aligned reads in flight, both priorities, against a temp file
 *    whose bytes are known: every op completes once with the right bytes;
 *  - a short file: a read across its end stops there (got exact, no
 *    error), a read past it gets nothing; a bad descriptor and a
 *    directory report their errno;
 *  - demand ops start before prefetch ops, and rkm_io_promote moves a
 *    queued prefetch op ahead (one thread, queue depth 1: a fixed order);
 *  - the back end and thread count reported.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "common/test.h"
#include "runtime/io_engine.h"
#include "util/common.h"
#include "util/knobs.h"

#define BLOCK 4096
#define FILE_BLOCKS 24
#define TAIL 1808 /* the file ends this far into its last block */

static uint8_t ref[FILE_BLOCKS * BLOCK];
static char path[600];

typedef struct tally {
    pthread_mutex_t mu;
    int done;
    int order[16];
} tally;

static void count_done(rkm_io_op *op)
{
    tally *t = op->user;
    pthread_mutex_lock(&t->mu);
    if (t->done < 16) t->order[t->done] = op->tag;
    t->done++;
    pthread_mutex_unlock(&t->mu);
}

static void make_file(void)
{
    snprintf(path, sizeof path, "%s/blobs.bin", test_tmpdir());
    uint64_t s = 0x2545f4914f6cdd1dull;
    for (size_t i = 0; i < sizeof ref; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        ref[i] = (uint8_t)(s >> 24);
    }
    FILE *f = fopen(path, "wb");
    size_t n = (FILE_BLOCKS - 1) * BLOCK + TAIL;
    CHECK(f && fwrite(ref, 1, n, f) == n);
    if (f) fclose(f);
}

static rkm_io *open_engine(int backend, int threads, int depth)
{
    rkm_io_params p = {.backend = backend, .n_threads = threads, .queue_depth = depth};
    rkm_io *io = rkm_io_new(&p);
    CHECK_MSG(io != NULL, "backend %d: no engine", backend);
    return io;
}

/* 200 reads of whole blocks (the file's last, short one excluded), at
 * both priorities, in flight together. */
static void test_many(int backend, int threads, int depth)
{
    enum { N = 200 };
    rkm_io *io = open_engine(backend, threads, depth);
    if (!io) return;
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    uint8_t *buf = rkm_alloc_aligned((size_t)N * BLOCK, BLOCK);
    static rkm_io_op ops[N];
    tally t = {.mu = PTHREAD_MUTEX_INITIALIZER};
    memset(buf, 0xee, (size_t)N * BLOCK);
    for (int i = 0; i < N; i++) {
        int b = (i * 7) % (FILE_BLOCKS - 1);
        ops[i] = (rkm_io_op){.fd = fd, .buf = buf + (size_t)i * BLOCK, .off = (uint64_t)b * BLOCK, .len = BLOCK,
                             .prio = i % 3 == 0 ? RKM_IO_PREFETCH : RKM_IO_DEMAND, .done = count_done, .user = &t,
                             .tag = i};
        rkm_io_submit(io, &ops[i]);
    }
    rkm_io_free(io); /* waits for every op */
    CHECK_EQ_INT(t.done, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        int b = (i * 7) % (FILE_BLOCKS - 1);
        bad += ops[i].err != 0 || ops[i].got != BLOCK || memcmp(buf + (size_t)i * BLOCK, ref + (size_t)b * BLOCK, BLOCK);
    }
    CHECK_MSG(bad == 0, "backend %d, %d threads, depth %d: %d of %d reads wrong", backend, threads, depth, bad, N);
    rkm_free_aligned(buf);
    close(fd);
}

/* One op on a fresh engine; returns it completed. */
static rkm_io_op read_one(int backend, int fd, uint8_t *buf, uint64_t off, uint64_t len)
{
    tally t = {.mu = PTHREAD_MUTEX_INITIALIZER};
    rkm_io_op op = {.fd = fd, .buf = buf, .off = off, .len = len, .done = count_done, .user = &t, .got = 77,
                    .err = 77};
    rkm_io *io = open_engine(backend, 2, 4);
    if (!io) return op;
    rkm_io_submit(io, &op);
    rkm_io_free(io);
    CHECK_EQ_INT(t.done, 1);
    return op;
}

static void test_ends_and_errors(int backend)
{
    int fd = open(path, O_RDONLY);
    uint8_t *buf = rkm_alloc_aligned(2 * BLOCK, BLOCK);
    /* across the end: exactly the bytes that are there */
    rkm_io_op op = read_one(backend, fd, buf, (FILE_BLOCKS - 1) * BLOCK, 2 * BLOCK);
    CHECK_EQ_INT(op.err, 0);
    CHECK_EQ_INT(op.got, TAIL);
    CHECK(memcmp(buf, ref + (FILE_BLOCKS - 1) * BLOCK, TAIL) == 0);
    /* past the end: nothing, no error */
    op = read_one(backend, fd, buf, (uint64_t)FILE_BLOCKS * BLOCK, BLOCK);
    CHECK_EQ_INT(op.err, 0);
    CHECK_EQ_INT(op.got, 0);
    op = read_one(backend, fd, buf, 1ull << 40, BLOCK);
    CHECK_EQ_INT(op.err, 0);
    CHECK_EQ_INT(op.got, 0);
    /* a whole short file in one op */
    uint8_t *all = rkm_alloc_aligned((FILE_BLOCKS + 1) * BLOCK, BLOCK);
    op = read_one(backend, fd, all, 0, (FILE_BLOCKS + 1) * BLOCK);
    CHECK_EQ_INT(op.err, 0);
    CHECK_EQ_INT(op.got, (FILE_BLOCKS - 1) * BLOCK + TAIL);
    CHECK(memcmp(all, ref, (FILE_BLOCKS - 1) * BLOCK + TAIL) == 0);
    rkm_free_aligned(all);
    close(fd);
    /* no descriptor (a closed number could be reused by the engine's own
     * ring or eventfd), one opened write-only, and a directory */
    op = read_one(backend, -1, buf, 0, BLOCK);
    CHECK_EQ_INT(op.err, EBADF);
    CHECK_EQ_INT(op.got, 0);
    op = read_one(backend, 1 << 20, buf, 0, BLOCK);
    CHECK_EQ_INT(op.err, EBADF);
    int wfd = open(path, O_WRONLY);
    op = read_one(backend, wfd, buf, 0, BLOCK);
    CHECK_EQ_INT(op.err, EBADF);
    close(wfd);
    int dfd = open(test_tmpdir(), O_RDONLY | O_DIRECTORY);
    op = read_one(backend, dfd, buf, 0, BLOCK);
    CHECK_EQ_INT(op.err, EISDIR);
    close(dfd);
    rkm_free_aligned(buf);
}

/* A gate op whose callback holds the engine's only thread while the test
 * queues more; then the order is fixed: demand before prefetch, FIFO
 * within a priority, a promoted prefetch op among the demand ones. */
typedef struct gate {
    tally t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open;
} gate;

static void gate_done(rkm_io_op *op)
{
    gate *g = op->user;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static int match_tag(const rkm_io_op *op, void *user) { return op->tag == *(const int *)user; }

static void test_order(int backend)
{
    rkm_io *io = open_engine(backend, 1, 1);
    if (!io) return;
    int fd = open(path, O_RDONLY);
    uint8_t *buf = rkm_alloc_aligned(8 * BLOCK, BLOCK);
    gate g = {.t = {.mu = PTHREAD_MUTEX_INITIALIZER}, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    rkm_io_op gop = {.fd = fd, .buf = buf, .off = 0, .len = BLOCK, .done = gate_done, .user = &g};
    rkm_io_submit(io, &gop);
    pthread_mutex_lock(&g.mu);
    while (!g.entered) pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    /* tags 1-3 prefetch, 4-5 demand, in that submission order */
    rkm_io_op ops[5];
    for (int i = 0; i < 5; i++) {
        ops[i] = (rkm_io_op){.fd = fd, .buf = buf + (size_t)(i + 1) * BLOCK, .off = (uint64_t)(i + 1) * BLOCK,
                             .len = BLOCK, .prio = i < 3 ? RKM_IO_PREFETCH : RKM_IO_DEMAND, .done = count_done,
                             .user = &g.t, .tag = i + 1};
        rkm_io_submit(io, &ops[i]);
    }
    int promote = 3;
    rkm_io_promote(io, match_tag, &promote);
    CHECK_EQ_INT(ops[2].prio, RKM_IO_DEMAND);
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    rkm_io_free(io);
    static const int want[5] = {4, 5, 3, 1, 2};
    CHECK_EQ_INT(g.t.done, 5);
    int same = 1;
    for (int i = 0; i < 5; i++) same &= g.t.order[i] == want[i];
    CHECK_MSG(same, "backend %s: completion order %d %d %d %d %d, want 4 5 3 1 2",
              backend == RKM_IO_URING ? "io_uring" : "pread", g.t.order[0], g.t.order[1], g.t.order[2],
              g.t.order[3], g.t.order[4]);
    for (int i = 0; i < 5; i++) CHECK(ops[i].got == BLOCK && !memcmp(ops[i].buf, ref + (i + 1) * BLOCK, BLOCK));
    rkm_free_aligned(buf);
    close(fd);
}

int main(void)
{
    make_file();
    /* what the engine picks: uring if the kernel allows, for AUTO and URING */
    rkm_io *io = open_engine(RKM_IO_URING, 3, 0);
    int uring = io && !strcmp(rkm_io_backend_name(io), "io_uring");
    if (io) CHECK_EQ_INT(rkm_io_n_threads(io), uring ? 1 : 3);
    rkm_io_free(io);
    io = open_engine(RKM_IO_AUTO, 0, 0);
    if (io) CHECK_EQ_INT(!strcmp(rkm_io_backend_name(io), "io_uring"), uring);
    rkm_io_free(io);
    io = open_engine(RKM_IO_PREAD, 0, 0);
    if (io) {
        CHECK(!strcmp(rkm_io_backend_name(io), "pread"));
        CHECK_EQ_INT(rkm_io_n_threads(io), RKM_IO_DEFAULT_THREADS);
    }
    rkm_io_free(io);
    rkm_io_free(NULL);
    CHECK(!strcmp(rkm_io_backend_name(NULL), "pread"));
    CHECK_EQ_INT(rkm_io_n_threads(NULL), 0);
    /* RKM_IO_BACKEND reaches the engine only through the model params */
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    rkm_knob_set(RKM_KNOB_IO_BACKEND, "pread");
    CHECK(rkm_model_params_from_knobs(&mp) == 0 && mp.io_backend == RKM_IO_PREAD);
    rkm_model_params_default(&mp);
    rkm_knob_set(RKM_KNOB_IO_BACKEND, "uring");
    CHECK(rkm_model_params_from_knobs(&mp) == 0 && mp.io_backend == RKM_IO_URING);
    rkm_knob_set(RKM_KNOB_IO_BACKEND, "mmap");
    CHECK(rkm_model_params_from_knobs(&mp) == RKM_EINVAL && strstr(rkm_last_error(), "RKM_IO_BACKEND"));
    rkm_knob_set(RKM_KNOB_IO_BACKEND, NULL);
    io = open_engine(RKM_IO_PREAD, 2, 0); /* what the expert cache passes for io_backend 1 */
    if (io) CHECK(!strcmp(rkm_io_backend_name(io), "pread"));
    rkm_io_free(io);
    printf("io_uring %s\n", uring ? "available" : "refused by the kernel: the pool only");

    static const int backends[2] = {RKM_IO_PREAD, RKM_IO_URING};
    for (int b = 0; b < 2; b++) {
        if (backends[b] == RKM_IO_URING && !uring) continue;
        test_many(backends[b], 1, 1);
        test_many(backends[b], 4, 32);
        test_many(backends[b], 16, 3);
        test_ends_and_errors(backends[b]);
        test_order(backends[b]);
    }
    return test_done();
}
