/*
 * rknn.c - the RKNN NPU engine (rknn.h): dlopen of librknnrt, chip
 * detection, shape validation, per-(M bucket, K, N) context sets split
 * over the NPU cores and over K segments, and the int8 matmul itself.
 *
 * Design (docs/NPU.md):
 *   - Static shapes, one context set per power-of-two M bucket (1..256)
 *     rather than dynamic shapes: static contexts are what the third-party
 *     measurements used, a set is created lazily only for the buckets a
 *     run meets, and the fd count stays small (per (K, N) at most 9 buckets
 *     x cores x segments contexts). Rows beyond m in a bucket are zero.
 *   - A set = K segments (<= k_seg, 8192 on RK3588) x core slices of N
 *     (32-column tiles shared out over the cores). Each context has its
 *     own B and C buffers; the segment's A buffer is shared by its core
 *     contexts. A and C are NATIVE (AC_layout 1): the engine tiles A and
 *     untiles C itself (NOTES pitfall 1), with the sub-sizes read from the
 *     attrs the runtime returns.
 *   - B is NATIVE: the rknn_i8 bytes are already in that layout, so a
 *     context's slice is a run of memcpy's (one per 32-column tile), then
 *     synced and rebound; nothing is repacked.
 *   - Cache coherence: mem_sync TO_DEVICE after every CPU write to A or B,
 *     FROM_DEVICE before reading C; the CPU never writes C buffers.
 *   - Partial sums of K segments are added in int64 on the CPU; the scales
 *     are applied on the CPU (the NPU's own scale support is unreliable).
 *   - Expert slots may live in NPU memory (rkm_rknn_slot_alloc, the expert
 *     cache's hooks): synced once per read, bound in place through views
 *     (rknn_create_mem_from_fd) instead of being copied.
 *
 * Threads: one caller at a time (model->lock). Core i > 0 has a worker
 * thread that runs its contexts when the caller bumps r->gen; the caller
 * runs core 0's and waits for the rest (r->mu guards gen, n_done, stop,
 * job_rc). r->slot_mu guards the slot registry and its views (IO threads
 * sync slots, the model's thread allocates/frees them, the caller binds
 * them). Everything else is touched only by the caller.
 * Ownership: the engine owns the dlopen handle, every context and buffer
 * (destroyed in rkm_rknn_close: buffers first, then contexts, the home
 * context last). Slot buffers belong to the expert cache, which frees
 * them (rkm_rknn_slot_free) before the engine closes.
 */
#include "backend/rknn.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/resource.h>

#include "backend/rknn_abi.h"
#include "kernels/rknn_i8.h"
#include "util/common.h"
#include "util/knobs.h"

#define MAX_CORES 3
#define MAX_SEGS 16
#define MAX_BUCKET 256

/* ------------------------------------------------------------- chips */

const char *rkm_rknn_chip_name(int chip)
{
    switch (chip) {
    case RKM_CHIP_RK3588: return "rk3588";
    case RKM_CHIP_RK3576: return "rk3576";
    case RKM_CHIP_RK3562: return "rk3562";
    default: return "unknown";
    }
}

int rkm_rknn_chip_cores(int chip)
{
    return chip == RKM_CHIP_RK3588 ? 3 : chip == RKM_CHIP_RK3576 ? 2 : 1;
}

int rkm_rknn_chip_kseg(int chip)
{
    /* RK3588's runtime splits K > 8192 into native segments itself; we
     * split into separate contexts instead (NOTES). RK3576: 4096. */
    return chip == RKM_CHIP_RK3588 ? 8192 : 4096;
}

static int chip_from_name(const char *s)
{
    if (!strncmp(s, "rk3588", 6)) return RKM_CHIP_RK3588;
    if (!strncmp(s, "rk3576", 6)) return RKM_CHIP_RK3576;
    if (!strncmp(s, "rk3562", 6)) return RKM_CHIP_RK3562;
    return RKM_CHIP_UNKNOWN;
}

static int sys_read(const char *path, char *buf, size_t cap, size_t *len)
{
    const char *root = rkm_knob(RKM_KNOB_SYSROOT);
    char full[1024];
    snprintf(full, sizeof full, "%s%s", root && *root ? root : "", path);
    FILE *f = fopen(full, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    *len = n;
    return 0;
}

int rkm_rknn_sysfile(const char *path, char *buf, size_t cap)
{
    size_t n;
    if (cap == 0 || sys_read(path, buf, cap, &n)) return -1;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == 0)) buf[--n] = 0;
    for (size_t i = 0; i < n; i++)
        if (!isprint((unsigned char)buf[i]) && buf[i] != '\n' && buf[i] != '\t') buf[i] = ' ';
    return 0;
}

int rkm_rknn_detect_chip(char *src, size_t cap)
{
    const char *env = rkm_knob(RKM_KNOB_RKNN_CHIP);
    if (env && *env) {
        if (src) snprintf(src, cap, "RKM_RKNN_CHIP=%s", env);
        return chip_from_name(env);
    }
    char buf[4096];
    size_t n;
    if (sys_read("/proc/device-tree/compatible", buf, sizeof buf, &n)) {
        if (src) snprintf(src, cap, "no /proc/device-tree/compatible");
        return RKM_CHIP_UNKNOWN;
    }
    /* NUL-separated strings such as "rockchip,rk3588s-orangepi-5\0rockchip,rk3588\0" */
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        const char *s = buf + i;
        if (!strncmp(s, "rockchip,", 9)) {
            int c = chip_from_name(s + 9);
            if (c) {
                if (src) snprintf(src, cap, "device tree: %s", s);
                return c;
            }
        }
    }
    if (src) snprintf(src, cap, "device tree: %.200s (not an RK3588/RK3576/RK3562)", buf);
    return RKM_CHIP_UNKNOWN;
}

int rkm_rknn_check_shape(int chip, int mm_type, int64_t M, int64_t K, int64_t N)
{
    int n_align;
    int fp16 = mm_type == RKN_MM_F16_F16_F32 || mm_type == RKN_MM_F16_F16_F16;
    int i8 = mm_type == RKN_MM_I8_I8_I32 || mm_type == RKN_MM_I8_I8_I8;
    int i4 = mm_type == RKN_MM_I4_I4_I16;
    if (chip == RKM_CHIP_UNKNOWN) return rkm_err(RKM_EUNSUPPORTED, "rknn: unknown chip");
    if (!fp16 && !i8 && !i4)
        return rkm_err(RKM_EUNSUPPORTED, "rknn: matmul type %d is not used by rkmojo", mm_type);
    if (chip == RKM_CHIP_RK3562) {
        if (i4) return rkm_err(RKM_EUNSUPPORTED, "rknn: rk3562 has no int4 matmul");
        n_align = i8 ? 16 : 8;
    } else {
        n_align = fp16 ? 16 : i8 ? 32 : 64;
    }
    if (M < 1 || M > 65536) return rkm_err(RKM_EINVAL, "rknn: M = %lld out of range", (long long)M);
    if (K <= 0 || K % 32)
        return rkm_err(RKM_EINVAL, "rknn: K = %lld is not a positive multiple of 32", (long long)K);
    if (N <= 0 || N % n_align)
        return rkm_err(RKM_EINVAL, "rknn: N = %lld is not a positive multiple of %d (type %d on %s)", (long long)N,
                       n_align, mm_type, rkm_rknn_chip_name(chip));
    if (K > rkm_rknn_chip_kseg(chip))
        return rkm_err(RKM_EINVAL, "rknn: K = %lld exceeds one context's %d on %s (split K)", (long long)K,
                       rkm_rknn_chip_kseg(chip), rkm_rknn_chip_name(chip));
    if ((uint64_t)K * (uint64_t)N > 0x7fffffffu || (uint64_t)M * (uint64_t)N * 4 > 0x7fffffffu)
        return rkm_err(RKM_EINVAL, "rknn: %lldx%lldx%lld is too large for one context", (long long)M, (long long)K,
                       (long long)N);
    return 0;
}

/* ------------------------------------------------------------ engine */

typedef struct {
    rkn_ctx ctx;
    rkn_io_attr io;
    rkn_tensor_mem *b, *c;
    int n0, n1;      /* columns of this context */
    int sub_c;       /* native C sub-size (columns per tile) */
} core_ctx;

typedef struct {
    int k0, k1;
    int sub_a;       /* native A sub-size */
    rkn_tensor_mem *a;
    core_ctx core[MAX_CORES];
} seg_ctx;

typedef struct mm_set {
    int M, K, N;
    int n_seg, n_core;
    seg_ctx seg[MAX_SEGS];
    struct mm_set *next;
} mm_set;

typedef struct {
    rkm_rknn *r;
    int core;
    pthread_t th;
    int started;
} core_worker;

#define MAX_VIEWS 16

/* An expert-cache slot allocated in NPU memory, and the views of it that
 * have been bound as B (created lazily, freed with the slot). */
typedef struct {
    uint8_t *base;       /* the slot: 4096-aligned inside mem */
    size_t size;
    rkn_tensor_mem *mem;
    uint32_t off0;       /* base - mem->virt_addr */
    int n_views;
    struct {
        uint32_t off, size;
        rkn_tensor_mem *m;
    } view[MAX_VIEWS];
} slot_mem;

struct rkm_rknn {
    void *dl;
    rkm_rknn_info info;
    rkn_matmul_create_fn create;
    rkn_matmul_set_io_mem_fn set_io_mem;
    rkn_matmul_set_core_mask_fn set_core_mask;
    rkn_matmul_run_fn run;
    rkn_matmul_destroy_fn destroy;
    rkn_create_mem_fn create_mem;
    rkn_destroy_mem_fn destroy_mem;
    rkn_mem_sync_fn mem_sync;
    rkn_query_fn query;
    rkn_create_mem_from_fd_fn create_mem_from_fd; /* optional: in-place slots need it */
    rkn_ctx home;         /* the probe context: slot buffers are created through it */
    mm_set *sets;
    int n_ctx;
    uint64_t runs;
    /* scratch of the caller */
    int8_t *aq;
    float *as;
    int64_t *acc;
    size_t aq_cap, as_cap, acc_cap;
    /* workers */
    core_worker w[MAX_CORES];
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int n_done, stop;
    mm_set *job;
    int job_rc;
    char job_msg[256];
    /* NPU-allocated expert slots, sorted by base; slot_mu guards them
     * (allocated and freed by the model's thread, synced by IO threads,
     * looked up by the compute thread) */
    pthread_mutex_t slot_mu;
    slot_mem **slots;
    int n_slots, cap_slots;
    uint64_t slot_bytes, slot_cap;
    uint64_t bind_in_place, bind_copied;
};

static const char *const required[] = {
    "rknn_matmul_create",      "rknn_matmul_set_io_mem", "rknn_matmul_set_core_mask", "rknn_matmul_run",
    "rknn_matmul_destroy",     "rknn_create_mem",        "rknn_destroy_mem",          "rknn_mem_sync",
    "rknn_query",
    /* not called, but absent before runtime 2.x: their presence is the
     * check that the structs have the layout declared in rknn_abi.h */
    "rknn_matmul_create_dynamic_shape", "rknn_matmul_set_quant_params",
};

static void worker_run(rkm_rknn *r, mm_set *s, int core);

static void *worker_main(void *arg)
{
    core_worker *w = arg;
    rkm_rknn *r = w->r;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (r->gen == seen && !r->stop) pthread_cond_wait(&r->go, &r->mu);
        if (r->stop) {
            pthread_mutex_unlock(&r->mu);
            return NULL;
        }
        seen = r->gen;
        mm_set *s = r->job;
        pthread_mutex_unlock(&r->mu);
        worker_run(r, s, w->core);
        pthread_mutex_lock(&r->mu);
        r->n_done++;
        pthread_cond_signal(&r->done);
        pthread_mutex_unlock(&r->mu);
    }
}

static void set_free(rkm_rknn *r, mm_set *s)
{
    for (int g = 0; g < s->n_seg; g++) {
        seg_ctx *sg = &s->seg[g];
        for (int c = 0; c < s->n_core; c++) {
            core_ctx *cc = &sg->core[c];
            if (cc->b) r->destroy_mem(cc->ctx, cc->b);
            if (cc->c) r->destroy_mem(cc->ctx, cc->c);
        }
        if (sg->a) r->destroy_mem(sg->core[0].ctx, sg->a);
        for (int c = 0; c < s->n_core; c++)
            if (sg->core[c].ctx) {
                r->destroy(sg->core[c].ctx);
                r->n_ctx--;
            }
    }
    free(s);
}

void rkm_rknn_close(rkm_rknn *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->go);
    pthread_mutex_unlock(&r->mu);
    for (int i = 1; i < MAX_CORES; i++)
        if (r->w[i].started) pthread_join(r->w[i].th, NULL);
    while (r->sets) {
        mm_set *n = r->sets->next;
        set_free(r, r->sets);
        r->sets = n;
    }
    /* slots the cache did not free (it frees them first when it exists) */
    for (int i = 0; i < r->n_slots; i++) {
        slot_mem *sm = r->slots[i];
        for (int v = 0; v < sm->n_views; v++) r->destroy_mem(r->home, sm->view[v].m);
        r->destroy_mem(r->home, sm->mem);
        free(sm);
    }
    free(r->slots);
    if (r->home) r->destroy(r->home);
    pthread_mutex_destroy(&r->slot_mu);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->go);
    pthread_cond_destroy(&r->done);
    free(r->aq);
    free(r->as);
    free(r->acc);
    if (r->dl) dlclose(r->dl);
    free(r);
}

const rkm_rknn_info *rkm_rknn_get_info(const rkm_rknn *r) { return &r->info; }

void rkm_rknn_counters(const rkm_rknn *r, uint64_t *runs, int *contexts)
{
    if (runs) *runs = r->runs;
    if (contexts) *contexts = r->n_ctx;
}

void rkm_rknn_bind_counts(const rkm_rknn *r, uint64_t *in_place, uint64_t *copied)
{
    if (in_place) *in_place = r->bind_in_place;
    if (copied) *copied = r->bind_copied;
}

/* ----------------------------------------------------- expert slots */

/* Index of the last slot with base <= p, or -1; slot_mu held. */
static int slot_index(const rkm_rknn *r, const void *p)
{
    int lo = 0, hi = r->n_slots - 1, best = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if ((const uint8_t *)p >= r->slots[mid]->base) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return best;
}

/* The slot holding [p, p + n), or NULL; slot_mu held. */
static slot_mem *slot_find(const rkm_rknn *r, const void *p, size_t n)
{
    int i = slot_index(r, p);
    if (i < 0) return NULL;
    slot_mem *sm = r->slots[i];
    return (const uint8_t *)p + n <= sm->base + sm->size ? sm : NULL;
}

void *rkm_rknn_slot_alloc(rkm_rknn *r, size_t bytes)
{
    pthread_mutex_lock(&r->slot_mu);
    rkn_tensor_mem *mem = NULL;
    slot_mem *sm = NULL;
    if (r->n_slots == r->cap_slots) {
        int cap = r->cap_slots * 2 + 64;
        slot_mem **n = realloc(r->slots, sizeof *n * (size_t)cap);
        if (n) {
            r->slots = n;
            r->cap_slots = cap;
        }
    }
    /* O_DIRECT needs a 4096-aligned buffer: dmabuf mappings are
     * page-aligned, but nothing promises it, so one spare page */
    size_t want = bytes + 4096;
    if (r->create_mem_from_fd && want <= 0xffffffffu && r->slot_bytes + want <= r->slot_cap &&
        r->n_slots < r->cap_slots) {
        mem = r->create_mem(r->home, (uint32_t)want);
        if (mem && (!mem->virt_addr || mem->size < want)) {
            r->destroy_mem(r->home, mem);
            mem = NULL;
        }
        if (mem && !(sm = calloc(1, sizeof *sm))) {
            r->destroy_mem(r->home, mem);
            mem = NULL;
        }
    }
    if (!sm) {
        pthread_mutex_unlock(&r->slot_mu);
        return rkm_alloc_aligned(bytes, 4096); /* past the cap: the copy path */
    }
    sm->base = (uint8_t *)RKM_ALIGN_UP((uintptr_t)mem->virt_addr, (uintptr_t)4096);
    sm->off0 = (uint32_t)(sm->base - (uint8_t *)mem->virt_addr);
    sm->size = bytes;
    sm->mem = mem;
    int at = slot_index(r, sm->base) + 1;
    memmove(r->slots + at + 1, r->slots + at, sizeof *r->slots * (size_t)(r->n_slots - at));
    r->slots[at] = sm;
    r->n_slots++;
    r->slot_bytes += want;
    pthread_mutex_unlock(&r->slot_mu);
    return sm->base;
}

void rkm_rknn_slot_free(rkm_rknn *r, void *buf)
{
    if (!buf) return;
    pthread_mutex_lock(&r->slot_mu);
    int i = slot_index(r, buf);
    if (i < 0 || r->slots[i]->base != buf) {
        pthread_mutex_unlock(&r->slot_mu);
        rkm_free_aligned(buf);
        return;
    }
    slot_mem *sm = r->slots[i];
    for (int v = 0; v < sm->n_views; v++) r->destroy_mem(r->home, sm->view[v].m);
    r->destroy_mem(r->home, sm->mem);
    r->slot_bytes -= sm->size + 4096;
    memmove(r->slots + i, r->slots + i + 1, sizeof *r->slots * (size_t)(r->n_slots - i - 1));
    r->n_slots--;
    free(sm);
    pthread_mutex_unlock(&r->slot_mu);
}

void rkm_rknn_slot_filled(rkm_rknn *r, void *buf, size_t bytes)
{
    pthread_mutex_lock(&r->slot_mu);
    slot_mem *sm = slot_find(r, buf, bytes);
    /* the blob was written by the disk's DMA and the CPU (padding, checksum
     * reads): one flush per read, not one per matmul */
    if (sm) r->mem_sync(r->home, sm->mem, RKN_SYNC_TO_DEVICE);
    pthread_mutex_unlock(&r->slot_mu);
}

/* A view of [p, p + n) inside an NPU slot to bind as B, or NULL (not in a
 * slot, or no view could be made: the caller copies). */
static rkn_tensor_mem *slot_view(rkm_rknn *r, const uint8_t *p, size_t n)
{
    pthread_mutex_lock(&r->slot_mu);
    slot_mem *sm = slot_find(r, p, n);
    rkn_tensor_mem *m = NULL;
    if (sm) {
        uint32_t off = sm->off0 + (uint32_t)(p - sm->base);
        for (int v = 0; v < sm->n_views && !m; v++)
            if (sm->view[v].off == off && sm->view[v].size == n) m = sm->view[v].m;
        if (!m && sm->n_views < MAX_VIEWS &&
            (m = r->create_mem_from_fd(r->home, sm->mem->fd, sm->mem->virt_addr, (uint32_t)n, (int32_t)off))) {
            sm->view[sm->n_views].off = off;
            sm->view[sm->n_views].size = (uint32_t)n;
            sm->view[sm->n_views++].m = m;
        }
    }
    pthread_mutex_unlock(&r->slot_mu);
    return m;
}

/* Every context and buffer holds dmabuf fds (NOTES pitfall 6): raise the
 * soft limit to the hard one (at most 65536). */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return;
    rlim_t want = rl.rlim_max == RLIM_INFINITY ? 65536 : RKM_MIN(rl.rlim_max, (rlim_t)65536);
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* "2.3.2 (...)" -> 2003; -1 if unparsable. */
static int version_num(const char *s)
{
    int a, b;
    if (sscanf(s, "%d.%d", &a, &b) != 2) return -1;
    return a * 1000 + b;
}

static mm_set *set_get(rkm_rknn *r, int M, int K, int N);

rkm_rknn *rkm_rknn_open(void)
{
    rkm_rknn *r = calloc(1, sizeof *r);
    if (!r) {
        rkm_err(RKM_ENOMEM, "rknn: out of memory");
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->slot_mu, NULL);
    pthread_cond_init(&r->go, NULL);
    pthread_cond_init(&r->done, NULL);
    const char *lib = rkm_knob(RKM_KNOB_RKNN_LIB);
    if (!lib || !*lib) lib = "librknnrt.so";
    snprintf(r->info.lib, sizeof r->info.lib, "%s", lib);
    r->info.chip = rkm_rknn_detect_chip(r->info.chip_src, sizeof r->info.chip_src);
    snprintf(r->info.api_version, sizeof r->info.api_version, "unknown");
    snprintf(r->info.drv_version, sizeof r->info.drv_version, "unknown");
    r->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!r->dl) {
        const char *e = dlerror();
        rkm_err(RKM_EUNSUPPORTED, "rknn: cannot load %s: %s", lib, e ? e : "?");
        goto fail;
    }
    for (size_t i = 0; i < RKM_ARRAY_LEN(required); i++)
        if (!dlsym(r->dl, required[i])) {
            rkm_err(RKM_EUNSUPPORTED, "rknn: %s lacks %s (runtime older than 2.1?)", lib, required[i]);
            goto fail;
        }
    /* dlsym returns void*; POSIX guarantees it converts to a function pointer */
#define SYM(field, name) *(void **)(&r->field) = dlsym(r->dl, name)
    SYM(create, "rknn_matmul_create");
    SYM(set_io_mem, "rknn_matmul_set_io_mem");
    SYM(set_core_mask, "rknn_matmul_set_core_mask");
    SYM(run, "rknn_matmul_run");
    SYM(destroy, "rknn_matmul_destroy");
    SYM(create_mem, "rknn_create_mem");
    SYM(destroy_mem, "rknn_destroy_mem");
    SYM(mem_sync, "rknn_mem_sync");
    SYM(query, "rknn_query");
    SYM(create_mem_from_fd, "rknn_create_mem_from_fd");
#undef SYM
    const char *cap = rkm_knob(RKM_KNOB_RKNN_SLOT_BYTES);
    r->slot_cap = cap && *cap ? (uint64_t)strtoull(cap, NULL, 0) : (2ull << 30) - (64u << 10);
    if (!r->info.chip) {
        rkm_err(RKM_EUNSUPPORTED, "rknn: not a known Rockchip NPU chip (%s)", r->info.chip_src);
        goto fail;
    }
    if (r->info.chip == RKM_CHIP_RK3562) {
        /* its int8 native B is 16 columns wide, not the rknn_i8 layout's 32 */
        rkm_err(RKM_EUNSUPPORTED, "rknn: rk3562's int8 native layout (16-wide) differs from rknn_i8's (32-wide)");
        goto fail;
    }
    r->info.n_cores = rkm_rknn_chip_cores(r->info.chip);
    r->info.k_seg = rkm_rknn_chip_kseg(r->info.chip);
    raise_fd_limit();
    /* probe: the smallest int8 context, its version strings */
    if (rkm_rknn_check_shape(r->info.chip, RKN_MM_I8_I8_I32, 1, 32, 32)) goto fail;
    rkn_matmul_info mi;
    memset(&mi, 0, sizeof mi);
    mi.M = 1;
    mi.K = 32;
    mi.N = 32;
    mi.type = RKN_MM_I8_I8_I32;
    mi.B_layout = RKN_LAYOUT_NATIVE;
    mi.AC_layout = RKN_LAYOUT_NATIVE;
    rkn_io_attr io;
    memset(&io, 0, sizeof io);
    rkn_ctx ctx = 0;
    int rc = r->create(&ctx, &mi, &io);
    if (rc < 0) {
        rkm_err(RKM_EUNSUPPORTED, "rknn: %s refuses an int8 matmul on %s (rknn_matmul_create: %d)", lib,
                rkm_rknn_chip_name(r->info.chip), rc);
        goto fail;
    }
    rkn_sdk_version v;
    memset(&v, 0, sizeof v);
    if (r->query(ctx, RKN_QUERY_SDK_VERSION, &v, sizeof v) >= 0) {
        v.api_version[255] = v.drv_version[255] = 0;
        snprintf(r->info.api_version, sizeof r->info.api_version, "%s", v.api_version);
        snprintf(r->info.drv_version, sizeof r->info.drv_version, "%s", v.drv_version);
    }
    r->home = ctx; /* kept: expert slots are allocated through it */
    /* every core the chip should have must accept its mask, or the first
     * matmul would fail mid-generation (a wrong RKM_RKNN_CHIP, a runtime
     * that differs): refuse now, while auto can still choose the CPU */
    for (int i = 0; r->info.n_cores > 1 && i < r->info.n_cores; i++)
        if ((rc = r->set_core_mask(ctx, RKN_CORE_0 << i)) < 0) {
            rkm_err(RKM_EUNSUPPORTED, "rknn: NPU core %d refused (rknn_matmul_set_core_mask: %d); is the chip really %s?",
                    i, rc, rkm_rknn_chip_name(r->info.chip));
            goto fail;
        }
    int ver = version_num(r->info.api_version);
    if (ver >= 0 && ver < 2001) {
        rkm_err(RKM_EUNSUPPORTED, "rknn: runtime %s is older than 2.1 (the matmul structs changed)",
                r->info.api_version);
        goto fail;
    }
    for (int i = 1; i < r->info.n_cores; i++) {
        r->w[i].r = r;
        r->w[i].core = i;
        if (pthread_create(&r->w[i].th, NULL, worker_main, &r->w[i])) {
            rkm_err(RKM_ENOMEM, "rknn: cannot start a core thread");
            goto fail;
        }
        r->w[i].started = 1;
    }
    return r;
fail:
    rkm_rknn_close(r);
    return NULL;
}

/* Creates one context of a set: shape check first, then create, core
 * mask, attr checks, buffers, and the A/C bindings (B is bound per run). */
static int ctx_create(rkm_rknn *r, mm_set *s, seg_ctx *sg, int ci, int n_cores)
{
    core_ctx *cc = &sg->core[ci];
    int K = sg->k1 - sg->k0, N = cc->n1 - cc->n0;
    int rc = rkm_rknn_check_shape(r->info.chip, RKN_MM_I8_I8_I32, s->M, K, N);
    if (rc) return rc;
    rkn_matmul_info mi;
    memset(&mi, 0, sizeof mi);
    mi.M = s->M;
    mi.K = K;
    mi.N = N;
    mi.type = RKN_MM_I8_I8_I32;
    mi.B_layout = RKN_LAYOUT_NATIVE;
    mi.AC_layout = RKN_LAYOUT_NATIVE;
    if ((rc = r->create(&cc->ctx, &mi, &cc->io)) < 0) {
        cc->ctx = 0;
        return rkm_err(RKM_EIO, "rknn: rknn_matmul_create(%d, %d, %d) failed: %d", s->M, K, N, rc);
    }
    r->n_ctx++;
    if (n_cores > 1 && (rc = r->set_core_mask(cc->ctx, RKN_CORE_0 << ci)) < 0)
        return rkm_err(RKM_EIO, "rknn: rknn_matmul_set_core_mask(core %d) failed: %d", ci, rc);
    const rkn_tensor_attr *A = &cc->io.A, *B = &cc->io.B, *C = &cc->io.C;
    /* the stored layout is (N/32, K/32, 32, 32): the runtime must agree */
    if (B->n_dims != 4 || B->dims[2] != RKM_RKNN_I8_TILE || B->dims[3] != RKM_RKNN_I8_TILE)
        return rkm_err(RKM_EUNSUPPORTED, "rknn: native B of %dx%d is not (N/32, K/32, 32, 32) (dims %u: %u %u %u %u)",
                       K, N, B->n_dims, B->dims[0], B->dims[1], B->dims[2], B->dims[3]);
    int sub_a = A->n_dims >= 3 ? (int)A->dims[2] : K;
    int sub_c = C->n_dims >= 3 ? (int)C->dims[2] : N;
    if (sub_a <= 0 || K % sub_a || sub_c <= 0 || N % sub_c)
        return rkm_err(RKM_EUNSUPPORTED, "rknn: unexpected native A/C sub-sizes %d/%d", sub_a, sub_c);
    if (A->size < (uint64_t)s->M * K || B->size < (uint64_t)K * N || C->size < (uint64_t)s->M * N * 4)
        return rkm_err(RKM_EUNSUPPORTED, "rknn: buffer sizes from the runtime are too small");
    if (ci == 0) sg->sub_a = sub_a;
    else if (sg->sub_a != sub_a) return rkm_err(RKM_EUNSUPPORTED, "rknn: native A differs between cores");
    cc->sub_c = sub_c;
    if (ci == 0 && !(sg->a = r->create_mem(cc->ctx, A->size))) return rkm_err(RKM_ENOMEM, "rknn: rknn_create_mem(A) failed");
    if (sg->a->size < (uint64_t)s->M * K) return rkm_err(RKM_EIO, "rknn: A buffer too small");
    if (!(cc->b = r->create_mem(cc->ctx, B->size)) || !(cc->c = r->create_mem(cc->ctx, C->size)))
        return rkm_err(RKM_ENOMEM, "rknn: rknn_create_mem failed");
    if ((rc = r->set_io_mem(cc->ctx, sg->a, &cc->io.A)) < 0 || (rc = r->set_io_mem(cc->ctx, cc->c, &cc->io.C)) < 0)
        return rkm_err(RKM_EIO, "rknn: rknn_matmul_set_io_mem(A/C) failed: %d", rc);
    return 0;
}

static mm_set *set_get(rkm_rknn *r, int M, int K, int N)
{
    for (mm_set *s = r->sets; s; s = s->next)
        if (s->M == M && s->K == K && s->N == N) return s;
    mm_set *s = calloc(1, sizeof *s);
    if (!s) {
        rkm_err(RKM_ENOMEM, "rknn: out of memory");
        return NULL;
    }
    s->M = M;
    s->K = K;
    s->N = N;
    int kseg = r->info.k_seg;
    s->n_seg = (K + kseg - 1) / kseg;
    if (s->n_seg > MAX_SEGS) {
        free(s);
        rkm_err(RKM_EUNSUPPORTED, "rknn: K = %d needs more than %d segments", K, MAX_SEGS);
        return NULL;
    }
    int ks = RKM_ALIGN_UP((K + s->n_seg - 1) / s->n_seg, 32);
    int tiles = N / RKM_RKNN_I8_TILE;
    s->n_core = RKM_MIN(r->info.n_cores, tiles);
    for (int g = 0; g < s->n_seg; g++) {
        seg_ctx *sg = &s->seg[g];
        sg->k0 = g * ks;
        sg->k1 = RKM_MIN(K, sg->k0 + ks);
        for (int c = 0; c < s->n_core; c++) {
            sg->core[c].n0 = tiles * c / s->n_core * RKM_RKNN_I8_TILE;
            sg->core[c].n1 = tiles * (c + 1) / s->n_core * RKM_RKNN_I8_TILE;
        }
    }
    int rc = 0;
    for (int g = 0; g < s->n_seg && !rc; g++)
        for (int c = 0; c < s->n_core && !rc; c++) rc = ctx_create(r, s, &s->seg[g], c, r->info.n_cores);
    if (rc) {
        set_free(r, s);
        return NULL;
    }
    s->next = r->sets;
    r->sets = s;
    return s;
}

/* Runs core `core`'s contexts of every segment of s (B already bound). */
static void worker_run(rkm_rknn *r, mm_set *s, int core)
{
    if (core >= s->n_core) return;
    for (int g = 0; g < s->n_seg; g++) {
        int rc = r->run(s->seg[g].core[core].ctx);
        if (rc < 0) {
            pthread_mutex_lock(&r->mu);
            if (!r->job_rc) {
                r->job_rc = RKM_EIO;
                snprintf(r->job_msg, sizeof r->job_msg, "rknn: rknn_matmul_run (core %d) failed: %d", core, rc);
            }
            pthread_mutex_unlock(&r->mu);
        }
    }
}

static int grow(void **p, size_t *cap, size_t bytes)
{
    if (bytes <= *cap) return 0;
    void *n = realloc(*p, bytes);
    if (!n) return rkm_err(RKM_ENOMEM, "rknn: out of memory");
    *p = n;
    *cap = bytes;
    return 0;
}

/* One chunk of m <= MAX_BUCKET rows: A int8 rows (stride K) -> acc (m x N). */
static int run_chunk(rkm_rknn *r, const int8_t *a, int m, int K, int N, const uint8_t *b, int64_t *acc)
{
    int M = 1;
    while (M < m) M <<= 1;
    mm_set *s = set_get(r, M, K, N);
    if (!s) return RKM_EIO;
    int kt = K / RKM_RKNN_I8_TILE, rc;
    for (int g = 0; g < s->n_seg; g++) {
        seg_ctx *sg = &s->seg[g];
        int ks = sg->k1 - sg->k0, sa = sg->sub_a;
        /* native A: (ks/sa, M, sa); rows >= m are zero */
        int8_t *da = sg->a->virt_addr;
        for (int t = 0; t < ks / sa; t++)
            for (int row = 0; row < M; row++) {
                int8_t *d = da + ((size_t)t * M + row) * sa;
                if (row < m) memcpy(d, a + (size_t)row * K + sg->k0 + (size_t)t * sa, (size_t)sa);
                else memset(d, 0, (size_t)sa);
            }
        if ((rc = r->mem_sync(sg->core[0].ctx, sg->a, RKN_SYNC_TO_DEVICE)) < 0)
            return rkm_err(RKM_EIO, "rknn: rknn_mem_sync(A) failed: %d", rc);
        for (int c = 0; c < s->n_core; c++) {
            core_ctx *cc = &sg->core[c];
            /* whole K: the core's slice is one run of the slot's bytes,
             * already on the device (slot_filled): bind a view of it */
            rkn_tensor_mem *view = NULL;
            if (s->n_seg == 1 && cc->io.B.size == (uint32_t)K * (uint32_t)(cc->n1 - cc->n0))
                view = slot_view(r, b + (size_t)cc->n0 * K, cc->io.B.size);
            if (view) {
                if ((rc = r->set_io_mem(cc->ctx, view, &cc->io.B)) < 0)
                    return rkm_err(RKM_EIO, "rknn: rknn_matmul_set_io_mem(B view) failed: %d", rc);
                r->bind_in_place++;
                continue;
            }
            r->bind_copied++;
            /* the slice's tiles are contiguous runs of the stored layout */
            uint8_t *db = cc->b->virt_addr;
            size_t run = (size_t)ks * RKM_RKNN_I8_TILE;
            for (int nt = cc->n0 / RKM_RKNN_I8_TILE, i = 0; nt < cc->n1 / RKM_RKNN_I8_TILE; nt++, i++)
                memcpy(db + (size_t)i * run, b + ((size_t)nt * kt + sg->k0 / RKM_RKNN_I8_TILE) * 1024, run);
            if ((rc = r->mem_sync(cc->ctx, cc->b, RKN_SYNC_TO_DEVICE)) < 0)
                return rkm_err(RKM_EIO, "rknn: rknn_mem_sync(B) failed: %d", rc);
            if ((rc = r->set_io_mem(cc->ctx, cc->b, &cc->io.B)) < 0)
                return rkm_err(RKM_EIO, "rknn: rknn_matmul_set_io_mem(B) failed: %d", rc);
        }
    }
    /* run every core's contexts concurrently: core 0 here, the rest on their threads */
    pthread_mutex_lock(&r->mu);
    r->job = s;
    r->job_rc = 0;
    r->n_done = 0;
    r->gen++;
    pthread_cond_broadcast(&r->go);
    pthread_mutex_unlock(&r->mu);
    worker_run(r, s, 0);
    pthread_mutex_lock(&r->mu);
    while (r->n_done < r->info.n_cores - 1) pthread_cond_wait(&r->done, &r->mu);
    rc = r->job_rc;
    pthread_mutex_unlock(&r->mu);
    r->runs += (uint64_t)s->n_seg * (uint64_t)s->n_core;
    if (rc) return rkm_err(rc, "%s", r->job_msg);
    for (int g = 0; g < s->n_seg; g++) {
        seg_ctx *sg = &s->seg[g];
        for (int c = 0; c < s->n_core; c++) {
            core_ctx *cc = &sg->core[c];
            if ((rc = r->mem_sync(cc->ctx, cc->c, RKN_SYNC_FROM_DEVICE)) < 0)
                return rkm_err(RKM_EIO, "rknn: rknn_mem_sync(C) failed: %d", rc);
            /* native C: (Nc/sc, M, sc) int32 */
            const int32_t *dc = cc->c->virt_addr;
            int nc = cc->n1 - cc->n0, sc = cc->sub_c;
            for (int row = 0; row < m; row++) {
                int64_t *o = acc + (size_t)row * N + cc->n0;
                for (int n = 0; n < nc; n++) {
                    int32_t v = dc[((size_t)(n / sc) * M + row) * sc + n % sc];
                    o[n] = g ? o[n] + v : v;
                }
            }
        }
    }
    return 0;
}

int rkm_rknn_matmul_i8_raw(rkm_rknn *r, const int8_t *a, int64_t M, int64_t K, int64_t N, const void *b_native,
                           int64_t *c)
{
    if (!rkm_rknn_i8_shape_ok(K, N) || M < 1 || K > (int64_t)MAX_SEGS * r->info.k_seg || N > 65536)
        return rkm_err(RKM_EINVAL, "rknn: unsupported int8 matmul shape %lldx%lldx%lld", (long long)M, (long long)K,
                       (long long)N);
    for (int64_t r0 = 0; r0 < M; r0 += MAX_BUCKET) {
        int m = (int)RKM_MIN(MAX_BUCKET, M - r0);
        int rc = run_chunk(r, a + (size_t)r0 * K, m, (int)K, (int)N, b_native, c + (size_t)r0 * N);
        if (rc) return rc;
    }
    return 0;
}

int rkm_rknn_matmul_i8(rkm_rknn *r, const void *w, int64_t K, int64_t N, const float *x, int64_t m, float *y,
                       int64_t ldy)
{
    int rc;
    if ((rc = grow((void **)&r->aq, &r->aq_cap, (size_t)m * K)) ||
        (rc = grow((void **)&r->as, &r->as_cap, sizeof(float) * (size_t)m)) ||
        (rc = grow((void **)&r->acc, &r->acc_cap, sizeof(int64_t) * (size_t)RKM_MIN(m, MAX_BUCKET) * N)))
        return rc;
    for (int64_t i = 0; i < m; i++) r->as[i] = rkm_rknn_quantize_act(x + (size_t)i * K, K, r->aq + (size_t)i * K);
    const float *bs = rkm_rknn_i8_scales(w, K, N);
    for (int64_t r0 = 0; r0 < m; r0 += MAX_BUCKET) {
        int mc = (int)RKM_MIN(MAX_BUCKET, m - r0);
        if ((rc = rkm_rknn_matmul_i8_raw(r, r->aq + (size_t)r0 * K, mc, K, N, w, r->acc))) return rc;
        for (int i = 0; i < mc; i++) {
            float *yr = y + (size_t)(r0 + i) * ldy;
            const int64_t *ar = r->acc + (size_t)i * N;
            for (int64_t n = 0; n < N; n++) yr[n] = rkm_rknn_dequant(ar[n], r->as[r0 + i], bs[n]);
        }
    }
    return 0;
}
