/*
 * bench_limits.c - the machine limits `rkmojo bench --limits` compares a
 * decode run with: a memory read-bandwidth probe, an O_DIRECT disk read
 * probe on the model's own expert files, and the bytes a decode token must
 * move (weights the CPU reads from memory, expert bytes read from disk).
 *
 * Threads: the memory probe runs on the model's pool (kernels/membw.h,
 * the probe bench-kernels reports too); the disk probe starts its own
 * threads and joins them before it returns; callers are single-threaded. Buffers are the probes' own and
 * are freed before they return.
 */
#include "cli/bench_limits.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/membw.h"
#include "util/common.h"

/* ------------------------------------------------------ memory probe */

double rkm_bench_mem_read_gbs(rkm_pool *pool, size_t bytes)
{
    rkm_membw *b = rkm_membw_new(bytes);
    if (!b) return 0;
    double g = rkm_membw_probe(b, pool, 1.0);
    rkm_membw_free(b);
    return g;
}

/* -------------------------------------------------------- disk probe */

/* The files are read as one concatenation, each byte at most once (unless
 * they hold less than `bytes`): re-reading the same range would measure a
 * cache below the guest (a VM host's page cache served 2.2 GB/s here where
 * the disk gives ~1). */
typedef struct {
    const int *fd;
    const uint64_t *size; /* whole chunks of each file */
    int n;
    uint64_t total, chunk, stop;
    _Atomic uint64_t *next;
    int err;
} disk_job;

static void *disk_reader(void *arg)
{
    disk_job *j = arg;
    uint8_t *b = rkm_alloc_aligned(j->chunk, 4096);
    if (!b) {
        j->err = ENOMEM;
        return NULL;
    }
    for (;;) {
        uint64_t off = atomic_fetch_add(j->next, j->chunk);
        if (off >= j->stop) break;
        off %= j->total;
        int f = 0;
        while (off >= j->size[f]) off -= j->size[f++];
        if (pread(j->fd[f], b, j->chunk, (off_t)off) < 0) {
            j->err = errno;
            break;
        }
    }
    rkm_free_aligned(b);
    return NULL;
}

int rkm_bench_disk_read_mbs(const char *const *paths, int n_paths, uint64_t bytes, int n_threads, double *mbs)
{
    *mbs = 0;
    if (n_paths < 1) return rkm_err(RKM_EINVAL, "disk probe: no file");
    int *fd = malloc(sizeof(int) * (size_t)n_paths);
    uint64_t *size = malloc(sizeof(uint64_t) * (size_t)n_paths);
    if (!fd || !size) {
        free(fd);
        free(size);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    int rc = 0, n = 0;
    uint64_t smallest = UINT64_MAX;
    for (; n < n_paths; n++) {
        fd[n] = open(paths[n], O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd[n] < 0) {
            rc = rkm_err(RKM_EIO, "%s: %s (O_DIRECT)", paths[n], strerror(errno));
            break;
        }
        off_t sz = lseek(fd[n], 0, SEEK_END);
        size[n] = sz > 0 ? (uint64_t)sz : 0;
        smallest = RKM_MIN(smallest, size[n]);
    }
    /* 1 MiB reads, smaller ones for small files (a tiny test model) */
    uint64_t chunk = RKM_MIN((uint64_t)1 << 20, smallest & ~(uint64_t)4095);
    if (!rc && chunk < 4096) rc = rkm_err(RKM_EINVAL, "%s: too small to probe", paths[0]);
    uint64_t total = 0;
    for (int i = 0; !rc && i < n; i++) total += (size[i] /= chunk, size[i] *= chunk);
    if (!rc) {
        if (n_threads < 1) n_threads = 1;
        if (n_threads > 16) n_threads = 16;
        _Atomic uint64_t next = 0;
        disk_job jobs[16];
        pthread_t th[16];
        double t0 = rkm_now();
        int started = 0, err = 0;
        for (int i = 0; i < n_threads; i++) {
            jobs[i] = (disk_job){fd, size, n, total, chunk, bytes, &next, 0};
            if (pthread_create(&th[i], NULL, disk_reader, &jobs[i]) != 0) break;
            started++;
        }
        for (int i = 0; i < started; i++) {
            pthread_join(th[i], NULL);
            if (jobs[i].err) err = jobs[i].err;
        }
        double t = rkm_now() - t0;
        if (!started) rc = rkm_err(RKM_ENOMEM, "cannot start the disk probe threads");
        else if (err) rc = rkm_err(RKM_EIO, "disk probe: read failed: %s", strerror(err));
        else *mbs = t > 0 ? (double)RKM_ALIGN_UP(bytes, chunk) / t / 1e6 : 0;
    }
    for (int i = 0; i < n; i++) close(fd[i]);
    free(fd);
    free(size);
    return rc;
}

/* ------------------------------------------------- bytes per token */

static double mat_bytes(const rkm_mat *w)
{
    return w->data ? (double)rkm_type_row_bytes(w->type, w->n_in) * (double)w->n_out : 0;
}

double rkm_bench_weight_bytes_per_token(const rkm_model *m)
{
    double b = mat_bytes(&m->output);
    for (int il = 0; il < m->hp.n_layer; il++) {
        rkm_layer *L = &m->layers[il];
        rkm_mat *mats[RKM_LAYER_MATS];
        int nm = rkm_layer_mats(L, mats);
        for (int i = 0; i < nm; i++) b += mat_bytes(mats[i]);
        if (L->el) b += (double)m->hp.n_expert_used * (double)L->el->blob_bytes;
    }
    return b;
}
