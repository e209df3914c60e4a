/*
 * bench_limits.c - the machine limits `rkmojo bench --limits` compares a
 * decode run with: a memory read-bandwidth probe, an O_DIRECT disk read
 * probe on the model's own expert files, and the bytes a decode token must
 * move (weights the CPU reads from memory, expert bytes read from disk).
 *
 * A weights pass reads the bytes of one decode token and nothing else:
 * the same memory, the same threads, no arithmetic, no barrier between
 * matrices; a decode speed against it is the share of the achievable read
 * rate the forward pass reaches, measured minutes apart at most (the
 * separate probe is a best pass over a fresh buffer).
 *
 * Threads: the memory probe and the weights pass run on the model's pool
 * (kernels/membw.h, the probe bench-kernels reports too); the disk probe
 * starts its own threads and joins them before it returns; callers are
 * single-threaded. Buffers are the probes' own and are freed before they
 * return; a weights pass owns its range list, not the weights.
 */
#include "cli/bench_limits.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kernels/membw.h"
#include "kernels/quant.h"
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

/* ------------------------------------------------------ kernel probe */

#define PROBE_PASSES 64

/* Weights for a timing: 8 rows quantized from a sine, the rest copies of
 * them (quantizing every row would take longer than the probe), packed
 * where the type is. */
static void probe_weights(int type, void *w, int64_t n_in, int64_t n_out, float *row)
{
    const int plain = rkm_unpack_type(type);
    const size_t rb = rkm_type_row_bytes(plain, n_in);
    for (int64_t r = 0; r < n_out; r++) {
        if (r < 8) {
            for (int64_t k = 0; k < n_in; k++) row[k] = 0.5f * sinf(0.37f * (float)(k + 131 * r));
            rkm_quantize_row(plain, row, (char *)w + rb * (size_t)r, n_in);
        } else
            memcpy((char *)w + rb * (size_t)r, (char *)w + rb * (size_t)(r % 8), rb);
    }
    if (type != plain) rkm_pack_rows(plain, w, n_in, n_out);
}

double rkm_bench_matmul_gbs(rkm_pool *pool, int type, int64_t n_in, int64_t n_out, size_t bytes, double seconds)
{
    const int plain = rkm_unpack_type(type);
    if (n_in <= 0 || n_out <= 0 || n_in % rkm_type_block_size(plain)) return 0;
    const size_t mb = rkm_type_row_bytes(plain, n_in) * (size_t)n_out;
    int n = (int)((bytes + mb - 1) / mb);
    if (n < 2) n = 2;
    void **w = calloc((size_t)n, sizeof *w);
    float *x = malloc(sizeof(float) * (size_t)n_in), *y = malloc(sizeof(float) * (size_t)n_out);
    double best = 0;
    int ok = w && x && y;
    for (int i = 0; ok && i < n; i++) {
        w[i] = rkm_alloc_aligned(mb, 64);
        if (!w[i]) ok = 0;
        else if (i == 0) probe_weights(type, w[0], n_in, n_out, x);
        else memcpy(w[i], w[0], mb);
    }
    if (ok) {
        for (int64_t k = 0; k < n_in; k++) x[k] = cosf(0.11f * (float)k);
        /* one pass untimed (the pool's threads wake, the clock ramps),
         * then the median pass: the rate decoding sustains */
        for (int i = 0; i < n; i++) rkm_matmul(pool, type, w[i], n_in, n_out, x, 1, y, n_out);
        double r[PROBE_PASSES], t_end = rkm_now() + seconds;
        int np = 0;
        do {
            double t0 = rkm_now();
            for (int i = 0; i < n; i++) rkm_matmul(pool, type, w[i], n_in, n_out, x, 1, y, n_out);
            double dt = rkm_now() - t0;
            if (dt > 0) r[np++] = (double)mb * n / dt / 1e9;
        } while (np < PROBE_PASSES && (np < 3 || rkm_now() < t_end));
        if (np) best = rkm_bench_sort_median(r, np);
    }
    for (int i = 0; w && i < n; i++) rkm_free_aligned(w[i]);
    free(w);
    free(x);
    free(y);
    return best;
}

/* ---------------------------------------------------- checksum probe */

double rkm_bench_hash_gbs(void)
{
    const size_t n = (size_t)64 << 20;
    unsigned char *b = rkm_alloc_aligned(n, 4096);
    if (!b) return 0;
    memset(b, 0x5a, n);
    double r[5];
    volatile uint64_t sink = rkm_hash(b, n); /* untimed: the pages fault in */
    for (int i = 0; i < 5; i++) {
        double t0 = rkm_now();
        sink ^= rkm_hash(b, n);
        double dt = rkm_now() - t0;
        r[i] = dt > 0 ? (double)n / dt / 1e9 : 0;
    }
    (void)sink;
    rkm_free_aligned(b);
    return rkm_bench_sort_median(r, 5);
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

int rkm_bench_model_disk_mbs(const rkm_model_dir *md, int n_threads, double *mbs)
{
    int ne = md->n_expert_layers, rc = 0;
    *mbs = 0;
    if (ne < 1) return 0; /* nothing streams from disk */
    char **paths = calloc((size_t)ne, sizeof *paths);
    if (!paths) return rkm_err(RKM_ENOMEM, "out of memory");
    for (int i = 0; i < ne && !rc; i++)
        if (asprintf(&paths[i], "%s/%s", md->path, md->experts[ne - 1 - i].file) < 0)
            paths[i] = NULL, rc = rkm_err(RKM_ENOMEM, "out of memory");
    if (!rc) rc = rkm_bench_disk_read_mbs((const char *const *)paths, ne, (uint64_t)512 << 20, n_threads, mbs);
    for (int i = 0; i < ne; i++) free(paths[i]);
    free(paths);
    return rc;
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

/* ------------------------------------------------- weights pass */

struct rkm_bench_wpass {
    rkm_membw_range *r;
    int n;
    double bytes;
};

static int add_range(rkm_bench_wpass *w, int cap, const void *p, size_t bytes)
{
    if (!p || !bytes) return 0;
    if (w->n >= cap) return rkm_err(RKM_EINVAL, "weights pass: more than %d ranges", cap);
    w->r[w->n] = (rkm_membw_range){p, bytes};
    uintptr_t start;
    w->bytes += (double)rkm_membw_range_extent(&w->r[w->n++], &start);
    return 0;
}

static size_t mat_size(const rkm_mat *w) { return (size_t)mat_bytes(w); }

rkm_bench_wpass *rkm_bench_wpass_new(rkm_model *m, const char **why)
{
    const rkm_hparams *hp = &m->hp;
    *why = NULL;
    int k = hp->n_expert_used, moe_layers = 0;
    for (int il = 0; il < hp->n_layer; il++) moe_layers += m->layers[il].el != NULL;
    if (moe_layers && m->cache) {
        if (rkm_expert_cache_shared(m->cache) || rkm_expert_cache_slots(m->cache) < hp->n_expert) {
            *why = "the expert cache holds only part of the experts";
            return NULL;
        }
        if (rkm_expert_cache_wait_fill(m->cache) < moe_layers * hp->n_expert) {
            *why = "the experts are not all in memory (--lazy-experts, or a read failed)";
            return NULL;
        }
    } else if (moe_layers) {
        *why = "the model has no expert cache";
        return NULL;
    }
    rkm_bench_wpass *w = calloc(1, sizeof *w);
    int cap = 1 + hp->n_layer * (RKM_LAYER_MATS + RKM_MAX(k, 0));
    if (!w || !(w->r = calloc((size_t)cap, sizeof *w->r))) {
        free(w);
        *why = "out of memory";
        return NULL;
    }
    int rc = 0;
    for (int il = 0; !rc && il < hp->n_layer; il++) {
        rkm_layer *L = &m->layers[il];
        rkm_mat *mats[RKM_LAYER_MATS];
        int nm = rkm_layer_mats(L, mats);
        for (int i = 0; !rc && i < nm; i++) rc = add_range(w, cap, mats[i]->data, mat_size(mats[i]));
        if (rc || !L->el) continue;
        int ids[RKM_MAX_EXPERTS], ne = L->el->n_expert, kk = RKM_MIN(k, ne);
        for (int j = 0; j < kk; j++) ids[j] = (int)((int64_t)j * ne / kk);
        /* every expert is held, so the request only pins; the blobs stay
         * where they are after the release (a full cache never evicts) */
        if ((rc = rkm_expert_cache_request(m->cache, il, ids, kk))) break;
        for (int j = 0; !rc && j < kk; j++) {
            const uint8_t *blob;
            if (!(rc = rkm_expert_cache_get(m->cache, il, ids[j], &blob)))
                rc = add_range(w, cap, blob, (size_t)L->el->blob_bytes);
        }
        rkm_expert_cache_release(m->cache, il);
    }
    if (!rc) rc = add_range(w, cap, m->output.data, mat_size(&m->output));
    if (rc) {
        *why = rkm_last_error();
        rkm_bench_wpass_free(w);
        return NULL;
    }
    return w;
}

void rkm_bench_wpass_free(rkm_bench_wpass *w)
{
    if (!w) return;
    free(w->r);
    free(w);
}

double rkm_bench_wpass_bytes(const rkm_bench_wpass *w) { return w ? w->bytes : 0; }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double rkm_bench_sort_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double rkm_bench_wpass_run(rkm_bench_wpass *w, rkm_pool *pool, int n)
{
    double t[64];
    n = RKM_MAX(1, RKM_MIN(n, 64));
    for (int i = 0; i < n; i++) t[i] = rkm_membw_read_ranges(pool, w->r, w->n, NULL);
    return rkm_bench_sort_median(t, n);
}
