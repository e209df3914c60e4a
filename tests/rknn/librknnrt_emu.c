/*
 * librknnrt_emu.c - an emulated librknnrt.so for the tests: the RKNN matmul
 * API (SDK v2.1..v2.3.2 symbols, our own declarations in emu_abi.h) on the
 * CPU, so the NPU backend's plumbing, layouts and numerics run in CI with no
 * board. README.md says which NOTES fact each behaviour comes from and what
 * only a board can verify.
 *
 * Objects: contexts (emu_ctx, handle = a never-reused counter), tensor
 * descriptors (emu_mem; the rknn_tensor_mem handed out is its first member)
 * and storages (emu_buf: the CPU view plus a hidden device copy; views
 * from rknn_create_mem_from_fd share their parent's storage). The device
 * copy only changes through rknn_mem_sync and rknn_matmul_run, which is how
 * a backend that skips a cache sync gets stale data here too.
 *
 * Threads: any thread may call anything. g_lock guards every registry, the
 * reference counts and the statistics; each context's run_lock serialises
 * run / bind / quant / shape changes on that context; one mutex per
 * emulated NPU core serialises runs pinned to the same core (AUTO takes the
 * first free one). Lock order: ctx->run_lock, then a core lock, then g_lock.
 *
 * Ownership: descriptors are freed by rknn_destroy_mem, but a descriptor
 * bound to a context (or used by a run in flight) lives on, marked dead,
 * until unbound, so a run on a destroyed buffer is an error, not a crash.
 * A storage is freed when its last descriptor goes.
 */
#include "emu_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMU_N_DOMAINS 16
#define EMU_DOMAIN_BYTES (4ull << 30) /* header: each IOMMU domain is 4 GB */
#define EMU_FD_BASE 100000            /* fake dmabuf fds, never real ones */
#define EMU_MAX_SHAPES 1024

typedef struct emu_buf {
    uint8_t *cpu, *dev; /* CPU view and the emulated device copy */
    size_t size;
    int fd;
    int refs;          /* descriptors pointing here */
    int owner_alive;   /* the allocating descriptor not destroyed yet */
    int domain;
    struct emu_buf *next;
} emu_buf;

typedef struct emu_mem {
    emu_tensor_mem pub; /* first: the pointer the caller gets */
    emu_buf *st;
    size_t off, size;   /* our own copy of the range: pub may be scribbled */
    int alive;          /* not yet passed to rknn_destroy_mem */
    int refs;           /* 1 while alive, +1 per binding / run in flight */
    int is_view;
    struct emu_mem *next; /* hash chain */
} emu_mem;

enum { ROLE_A, ROLE_B, ROLE_C };

typedef struct emu_ctx {
    emu_ctx_t id;
    const emu_chip *chip;
    emu_matmul_info info;
    int dynamic, n_shapes, cur;
    emu_shape *shapes;  /* n_shapes */
    emu_io_attr *io;    /* n_shapes */
    int core_mask;
    emu_qparam q[3];    /* A, B, C */
    emu_mem *bound[3];  /* holds a ref each */
    float *b_snap;      /* NORM/TP_NORM B converted at bind: N x K */
    int b_snap_k, b_snap_n;
    pthread_mutex_t run_lock;
    int refs, alive;    /* g_lock */
    struct emu_ctx *next;
} emu_ctx;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_core_lock[3] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                         PTHREAD_MUTEX_INITIALIZER};
#define MEM_BUCKETS 4096
static emu_mem *g_mems[MEM_BUCKETS];
static emu_buf *g_stores;
static emu_ctx *g_ctxs;
static uint64_t g_next_ctx = 1;
static int g_next_fd = EMU_FD_BASE;
static uint64_t g_next_phys = 0x100000000ull;
static uint64_t g_domain_used[EMU_N_DOMAINS];
static uint64_t g_runs[3], g_sync_to, g_sync_from, g_live_mems, g_live_ctxs;

/* ---------------------------------------------------------------- ctx */

static emu_ctx *ctx_get(emu_ctx_t id)
{
    pthread_mutex_lock(&g_lock);
    emu_ctx *c = g_ctxs;
    while (c && c->id != id) c = c->next;
    if (c && c->alive) c->refs++;
    else c = NULL;
    pthread_mutex_unlock(&g_lock);
    return c;
}

static void mem_put_locked(emu_mem *m);

static void ctx_free(emu_ctx *c)
{
    for (int r = 0; r < 3; r++) {
        free(c->q[r].scale);
        free(c->q[r].zp);
    }
    free(c->b_snap);
    free(c->shapes);
    free(c->io);
    pthread_mutex_destroy(&c->run_lock);
    free(c);
}

static void ctx_put(emu_ctx *c)
{
    pthread_mutex_lock(&g_lock);
    int last = --c->refs == 0;
    if (last) {
        for (emu_ctx **p = &g_ctxs; *p; p = &(*p)->next)
            if (*p == c) {
                *p = c->next;
                break;
            }
        for (int r = 0; r < 3; r++)
            if (c->bound[r]) mem_put_locked(c->bound[r]);
    }
    pthread_mutex_unlock(&g_lock);
    if (last) ctx_free(c);
}

/* ---------------------------------------------------------------- mem */

static size_t mem_hash(const void *p) { return ((uintptr_t)p >> 4) % MEM_BUCKETS; }

/* The live record of a pointer the caller passed, or NULL. g_lock held. */
static emu_mem *mem_find_locked(const emu_tensor_mem *p)
{
    if (!p) return NULL;
    for (emu_mem *m = g_mems[mem_hash(p)]; m; m = m->next)
        if (&m->pub == p && m->alive) return m;
    return NULL;
}

static void store_put_locked(emu_buf *s)
{
    if (--s->refs) return;
    for (emu_buf **p = &g_stores; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    g_domain_used[s->domain] -= s->size;
    free(s->cpu);
    free(s->dev);
    free(s);
}

static void mem_put_locked(emu_mem *m)
{
    if (--m->refs) return;
    for (emu_mem **p = &g_mems[mem_hash(&m->pub)]; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            break;
        }
    store_put_locked(m->st);
    free(m);
}

static emu_mem *mem_new_locked(emu_buf *s, size_t off, size_t size, int is_view)
{
    emu_mem *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->st = s;
    s->refs++;
    m->off = off;
    m->size = size;
    m->alive = 1;
    m->refs = 1;
    m->is_view = is_view;
    m->pub.virt_addr = s->cpu + off;
    m->pub.phys_addr = 0; /* set by the caller */
    m->pub.fd = s->fd;
    m->pub.offset = (int32_t)off;
    m->pub.size = (uint32_t)size;
    m->pub.flags = is_view ? EMU_MEMF_FROM_FD : EMU_MEMF_ALLOC_INSIDE;
    size_t h = mem_hash(&m->pub);
    m->next = g_mems[h];
    g_mems[h] = m;
    g_live_mems++;
    return m;
}

EMU_API emu_tensor_mem *rknn_create_mem2(emu_ctx_t ctx, uint64_t size, uint64_t alloc_flags);
EMU_API emu_tensor_mem *rknn_create_mem2(emu_ctx_t ctx, uint64_t size, uint64_t alloc_flags)
{
    int domain = 0;
    if (!(alloc_flags & EMU_MEM2_NO_CONTEXT)) {
        emu_ctx *c = ctx_get(ctx);
        if (!c) {
            emu_log("rknn_create_mem: invalid context %llu", (unsigned long long)ctx);
            return NULL;
        }
        domain = c->info.iommu_domain_id;
        ctx_put(c);
    }
    if (size == 0 || size > UINT32_MAX) {
        emu_log("rknn_create_mem: invalid size %llu", (unsigned long long)size);
        return NULL;
    }
    emu_buf *s = calloc(1, sizeof *s);
    size_t alloc = (size_t)(size + 63) / 64 * 64;
    if (s) {
        s->cpu = aligned_alloc(64, alloc);
        s->dev = calloc(1, alloc);
    }
    if (!s || !s->cpu || !s->dev) goto oom;
    memset(s->cpu, 0, alloc); /* dmabuf pages come zeroed */
    s->size = (size_t)size;
    s->domain = domain;
    s->owner_alive = 1;
    pthread_mutex_lock(&g_lock);
    if (g_domain_used[domain] + size > EMU_DOMAIN_BYTES) {
        pthread_mutex_unlock(&g_lock);
        emu_log("rknn_create_mem: IOMMU domain %d full (%llu + %llu bytes > 4 GiB)", domain,
                (unsigned long long)g_domain_used[domain], (unsigned long long)size);
        goto fail;
    }
    s->fd = g_next_fd++;
    emu_mem *m = mem_new_locked(s, 0, (size_t)size, 0);
    if (!m) {
        pthread_mutex_unlock(&g_lock);
        goto oom;
    }
    g_domain_used[domain] += size;
    m->pub.phys_addr = g_next_phys;
    g_next_phys += (alloc + 4095) / 4096 * 4096;
    s->next = g_stores;
    g_stores = s;
    pthread_mutex_unlock(&g_lock);
    return &m->pub;
oom:
    emu_log("rknn_create_mem: out of memory (%llu bytes)", (unsigned long long)size);
fail:
    if (s) {
        free(s->cpu);
        free(s->dev);
    }
    free(s);
    return NULL;
}

EMU_API emu_tensor_mem *rknn_create_mem(emu_ctx_t ctx, uint32_t size);
EMU_API emu_tensor_mem *rknn_create_mem(emu_ctx_t ctx, uint32_t size)
{
    return rknn_create_mem2(ctx, size, EMU_MEM2_DEFAULT);
}

/* A view of an existing allocation: virt_addr must be the start of the fd's
 * mapping (NOTES: not including the offset); the view's own virt_addr points
 * at its first byte (virt + offset; unverified on a board, so a backend
 * had better write through the parent). */
EMU_API emu_tensor_mem *rknn_create_mem_from_fd(emu_ctx_t ctx, int32_t fd, void *virt_addr,
                                                uint32_t size, int32_t offset);
EMU_API emu_tensor_mem *rknn_create_mem_from_fd(emu_ctx_t ctx, int32_t fd, void *virt_addr,
                                                uint32_t size, int32_t offset)
{
    emu_ctx *c = ctx_get(ctx);
    if (!c) {
        emu_log("rknn_create_mem_from_fd: invalid context %llu", (unsigned long long)ctx);
        return NULL;
    }
    ctx_put(c);
    pthread_mutex_lock(&g_lock);
    emu_buf *s = g_stores;
    while (s && s->fd != fd) s = s->next;
    emu_mem *m = NULL;
    if (!s || !s->owner_alive)
        emu_log("rknn_create_mem_from_fd: fd %d is not a live NPU allocation", fd);
    else if (virt_addr != s->cpu)
        emu_log("rknn_create_mem_from_fd: virt_addr %p is not the start of fd %d's mapping (%p)",
                virt_addr, fd, (void *)s->cpu);
    else if (offset < 0 || size == 0 || (uint64_t)offset + size > s->size)
        emu_log("rknn_create_mem_from_fd: range %d+%u outside fd %d (%zu bytes)", offset, size, fd,
                s->size);
    else if (!(m = mem_new_locked(s, (size_t)offset, size, 1)))
        emu_log("rknn_create_mem_from_fd: out of memory");
    else
        m->pub.phys_addr = 0; /* no contiguous address is promised for a view */
    pthread_mutex_unlock(&g_lock);
    return m ? &m->pub : NULL;
}

EMU_API int rknn_destroy_mem(emu_ctx_t ctx, emu_tensor_mem *mem);
EMU_API int rknn_destroy_mem(emu_ctx_t ctx, emu_tensor_mem *mem)
{
    (void)ctx; /* NOTES: any context may be used */
    pthread_mutex_lock(&g_lock);
    emu_mem *m = mem_find_locked(mem);
    if (!m) {
        pthread_mutex_unlock(&g_lock);
        emu_log("rknn_destroy_mem: %p is not a live rknn_tensor_mem", (void *)mem);
        return EMU_ERR_PARAM_INVALID;
    }
    m->alive = 0;
    if (!m->is_view) m->st->owner_alive = 0;
    g_live_mems--;
    mem_put_locked(m);
    pthread_mutex_unlock(&g_lock);
    return EMU_SUCC;
}

/* Emulated coherence: TO_DEVICE copies the CPU view into the device copy,
 * FROM_DEVICE the other way. RKNN_EMU_VIEW_SYNC=noop makes a sync through
 * an rknn_create_mem_from_fd view do nothing (NOTES: it did not flush in
 * one test), for checking a backend syncs through the parent. */
EMU_API int rknn_mem_sync(emu_ctx_t ctx, emu_tensor_mem *mem, int mode);
EMU_API int rknn_mem_sync(emu_ctx_t ctx, emu_tensor_mem *mem, int mode)
{
    if (ctx != 0) {
        emu_ctx *c = ctx_get(ctx);
        if (!c) {
            emu_log("rknn_mem_sync: invalid context %llu", (unsigned long long)ctx);
            return EMU_ERR_CTX_INVALID;
        }
        ctx_put(c);
    }
    if (mode < EMU_SYNC_TO_DEVICE || mode > EMU_SYNC_BIDIRECTIONAL) {
        emu_log("rknn_mem_sync: invalid mode %d", mode);
        return EMU_ERR_PARAM_INVALID;
    }
    const char *vs = getenv("RKNN_EMU_VIEW_SYNC");
    int view_noop = vs && !strcmp(vs, "noop");
    pthread_mutex_lock(&g_lock);
    emu_mem *m = mem_find_locked(mem);
    int rc = EMU_SUCC;
    if (!m) {
        emu_log("rknn_mem_sync: %p is not a live rknn_tensor_mem", (void *)mem);
        rc = EMU_ERR_PARAM_INVALID;
    } else if (!m->st->owner_alive) {
        emu_log("rknn_mem_sync: the allocation behind view %p was destroyed", (void *)mem);
        rc = EMU_ERR_PARAM_INVALID;
    } else {
        if (mode & EMU_SYNC_TO_DEVICE) {
            if (!(m->is_view && view_noop)) memcpy(m->st->dev + m->off, m->st->cpu + m->off, m->size);
            g_sync_to++;
        }
        if (mode & EMU_SYNC_FROM_DEVICE) {
            if (!(m->is_view && view_noop)) memcpy(m->st->cpu + m->off, m->st->dev + m->off, m->size);
            g_sync_from++;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* ----------------------------------------------------------- contexts */

/* Alignment and limits (NOTES "Alignment and limits", pitfall 8). A shape
 * the runtime may die on kills the process here too, so a backend that
 * forgets its own checks crashes its test. */
static int check_shape(const emu_chip *chip, int type, int M, int K, int N)
{
    int ta, tb, tc;
    emu_mm_types(type, &ta, &tb, &tc);
    if (M <= 0 || K <= 0 || N <= 0) {
        emu_log("matmul shape M=%d K=%d N=%d: sizes must be positive", M, K, N);
        return EMU_ERR_PARAM_INVALID;
    }
    int sk = emu_b_subk(chip, tb), sn = emu_b_subn(chip, tb);
    if (K % sk || N % sn) {
        emu_log("%s: matmul type %d shape M=%d K=%d N=%d is not aligned (K %% %d, N %% %d must be 0): "
                "emulated abort, the runtime may kill the process here",
                chip->name, type, M, K, N, sk, sn);
        abort();
    }
    uint64_t bytes[3] = {(uint64_t)M * K * emu_type_bits(ta) / 8,
                         (uint64_t)K * N * emu_type_bits(tb) / 8,
                         (uint64_t)M * N * emu_type_bits(tc) / 8};
    for (int i = 0; i < 3; i++)
        if (bytes[i] > UINT32_MAX) {
            emu_log("matmul shape M=%d K=%d N=%d: %c needs %llu bytes (> 4 GiB): emulated abort", M,
                    K, N, "ABC"[i], (unsigned long long)bytes[i]);
            abort();
        }
    if (ta == EMU_T_F16 && tb == EMU_T_F16 && M >= 2048 && K >= 16384) {
        emu_log("Failed to config layer: 'matmul', Fatal Error (fp16 M=%d K=%d: emulated abort, "
                "NOTES pitfall 8)",
                M, K);
        abort();
    }
    return EMU_SUCC;
}

static int create_common(emu_ctx_t *ctx_out, const emu_matmul_info *info, int n_shapes,
                         const emu_shape *shapes, emu_io_attr *io_out, int dynamic)
{
    if (!ctx_out || !info || !shapes || !io_out || n_shapes < 1 || n_shapes > EMU_MAX_SHAPES) {
        emu_log("rknn_matmul_create: NULL argument or bad shape count");
        return EMU_ERR_PARAM_INVALID;
    }
    const emu_chip *chip = emu_chip_current();
    if (!chip) {
        emu_log("RKNN_EMU_CHIP=%s is not an emulated chip (rk3588, rk3576, rk3562)",
                getenv("RKNN_EMU_CHIP"));
        return EMU_ERR_DEVICE_UNAVAILABLE;
    }
    int ta, tb, tc;
    if (!emu_mm_types(info->type, &ta, &tb, &tc) || !(chip->types & (1u << info->type))) {
        emu_log("unsupported matmul dtype in this platform (%s, type %d)", chip->name, info->type);
        return EMU_ERR_PARAM_INVALID;
    }
    if (info->B_layout < 0 || info->B_layout > 2 || info->AC_layout < 0 || info->AC_layout > 1) {
        emu_log("rknn_matmul_create: invalid layout B=%d AC=%d", info->B_layout, info->AC_layout);
        return EMU_ERR_PARAM_INVALID;
    }
    if (chip->i4_native_b && tb == EMU_T_I4 && info->B_layout != EMU_LAYOUT_NATIVE) {
        emu_log("%s: int4 B must use the native layout (B_layout=%d)", chip->name, info->B_layout);
        return EMU_ERR_PARAM_INVALID;
    }
    if (info->B_quant_type < 0 || info->B_quant_type > 5 || info->AC_quant_type < 0 ||
        info->AC_quant_type > 5 || info->iommu_domain_id < 0 ||
        info->iommu_domain_id >= EMU_N_DOMAINS || info->group_size < 0) {
        emu_log("rknn_matmul_create: invalid quant type, group size or iommu domain");
        return EMU_ERR_PARAM_INVALID;
    }
    for (int i = 0; i < n_shapes; i++) {
        int rc = check_shape(chip, info->type, shapes[i].M, shapes[i].K, shapes[i].N);
        if (rc) return rc;
        if (dynamic && info->B_layout != EMU_LAYOUT_TP_NORM &&
            (shapes[i].K != shapes[0].K || shapes[i].N != shapes[0].N)) {
            emu_log("dynamic shapes must share K and N unless B is TP_NORM");
            return EMU_ERR_PARAM_INVALID;
        }
    }
    emu_ctx *c = calloc(1, sizeof *c);
    if (c) {
        c->shapes = malloc((size_t)n_shapes * sizeof *c->shapes);
        c->io = malloc((size_t)n_shapes * sizeof *c->io);
    }
    if (!c || !c->shapes || !c->io) {
        if (c) {
            free(c->shapes);
            free(c->io);
        }
        free(c);
        return EMU_ERR_MALLOC_FAIL;
    }
    c->chip = chip;
    c->info = *info;
    c->dynamic = dynamic;
    c->n_shapes = n_shapes;
    for (int i = 0; i < n_shapes; i++) {
        c->shapes[i] = shapes[i];
        emu_fill_io_attr(chip, info, shapes[i].M, shapes[i].K, shapes[i].N, &c->io[i]);
    }
    memcpy(io_out, c->io, (size_t)n_shapes * sizeof *c->io);
    pthread_mutex_init(&c->run_lock, NULL);
    c->refs = 1;
    c->alive = 1;
    pthread_mutex_lock(&g_lock);
    c->id = g_next_ctx++;
    c->next = g_ctxs;
    g_ctxs = c;
    g_live_ctxs++;
    pthread_mutex_unlock(&g_lock);
    *ctx_out = c->id;
    return EMU_SUCC;
}

EMU_API int rknn_matmul_create(emu_ctx_t *ctx, emu_matmul_info *info, emu_io_attr *io_attr);
EMU_API int rknn_matmul_create(emu_ctx_t *ctx, emu_matmul_info *info, emu_io_attr *io_attr)
{
    if (!info) return EMU_ERR_PARAM_INVALID;
    emu_shape s = {info->M, info->K, info->N};
    return create_common(ctx, info, 1, &s, io_attr, 0);
}

EMU_API int rknn_matmul_create_dynamic_shape(emu_ctx_t *ctx, emu_matmul_info *info, int shape_num,
                                             emu_shape dynamic_shapes[], emu_io_attr io_attrs[]);
EMU_API int rknn_matmul_create_dynamic_shape(emu_ctx_t *ctx, emu_matmul_info *info, int shape_num,
                                             emu_shape dynamic_shapes[], emu_io_attr io_attrs[])
{
    return create_common(ctx, info, shape_num, dynamic_shapes, io_attrs, 1);
}

static void unbind(emu_ctx *c, int role)
{
    pthread_mutex_lock(&g_lock);
    if (c->bound[role]) mem_put_locked(c->bound[role]);
    c->bound[role] = NULL;
    pthread_mutex_unlock(&g_lock);
    if (role == ROLE_B) {
        free(c->b_snap);
        c->b_snap = NULL;
    }
}

EMU_API int rknn_matmul_destroy(emu_ctx_t ctx);
EMU_API int rknn_matmul_destroy(emu_ctx_t ctx)
{
    emu_ctx *c = ctx_get(ctx);
    if (!c) {
        emu_log("rknn_matmul_destroy: invalid context %llu", (unsigned long long)ctx);
        return EMU_ERR_CTX_INVALID;
    }
    pthread_mutex_lock(&g_lock);
    if (c->alive) {
        c->alive = 0;
        c->refs--; /* the creation reference */
        g_live_ctxs--;
    }
    pthread_mutex_unlock(&g_lock);
    ctx_put(c);
    return EMU_SUCC;
}

/* Selects one of the shapes given at creation; A and C must be bound again
 * afterwards (NOTES "Dynamic shape"), so their bindings are dropped. */
EMU_API int rknn_matmul_set_dynamic_shape(emu_ctx_t ctx, emu_shape *shape);
EMU_API int rknn_matmul_set_dynamic_shape(emu_ctx_t ctx, emu_shape *shape)
{
    emu_ctx *c = ctx_get(ctx);
    if (!c) return EMU_ERR_CTX_INVALID;
    int rc = EMU_ERR_PARAM_INVALID, i = 0;
    pthread_mutex_lock(&c->run_lock);
    if (!c->dynamic) emu_log("rknn_matmul_set_dynamic_shape: not a dynamic-shape context");
    else if (!shape) emu_log("rknn_matmul_set_dynamic_shape: NULL shape");
    else {
        while (i < c->n_shapes && (c->shapes[i].M != shape->M || c->shapes[i].K != shape->K ||
                                   c->shapes[i].N != shape->N))
            i++;
        if (i == c->n_shapes)
            emu_log("rknn_matmul_set_dynamic_shape: M=%d K=%d N=%d was not given at creation",
                    shape->M, shape->K, shape->N);
        else {
            c->cur = i;
            unbind(c, ROLE_A);
            unbind(c, ROLE_C);
            if (c->b_snap && (c->b_snap_k != shape->K || c->b_snap_n != shape->N)) unbind(c, ROLE_B);
            rc = EMU_SUCC;
        }
    }
    pthread_mutex_unlock(&c->run_lock);
    ctx_put(c);
    return rc;
}

/* "A", "B" or "C" -> role; the name need not be NUL-terminated. */
static int name_role(const char *name)
{
    if (name[1] != 0) return -1;
    return name[0] == 'A' ? ROLE_A : name[0] == 'B' ? ROLE_B : name[0] == 'C' ? ROLE_C : -1;
}

static const emu_tensor_attr *io_role(const emu_io_attr *io, int role)
{
    return role == ROLE_A ? &io->A : role == ROLE_B ? &io->B : &io->C;
}

/* Binds mem to A, B or C; attr must be the one the runtime returned for
 * the current shape (a different M's attr is refused rather than computed
 * wrongly, NOTES pitfall 3). A NORM/TP_NORM B is converted now, from the
 * device copy (sync before binding, as the documented flow does); later
 * writes to it are ignored until it is bound again. */
EMU_API int rknn_matmul_set_io_mem(emu_ctx_t ctx, emu_tensor_mem *mem, emu_tensor_attr *attr);
EMU_API int rknn_matmul_set_io_mem(emu_ctx_t ctx, emu_tensor_mem *mem, emu_tensor_attr *attr)
{
    emu_ctx *c = ctx_get(ctx);
    if (!c) {
        emu_log("rknn_matmul_set_io_mem: invalid context %llu", (unsigned long long)ctx);
        return EMU_ERR_CTX_INVALID;
    }
    int rc = EMU_ERR_PARAM_INVALID;
    pthread_mutex_lock(&c->run_lock);
    int role = attr ? name_role(attr->name) : -1;
    const emu_shape *sh = &c->shapes[c->cur];
    if (role < 0) {
        emu_log("rknn_matmul_set_io_mem: attr is NULL or not named A, B or C");
        goto out;
    }
    const emu_tensor_attr *want = io_role(&c->io[c->cur], role);
    if (attr->n_dims != want->n_dims || attr->type != want->type || attr->size != want->size ||
        memcmp(attr->dims, want->dims, want->n_dims * sizeof want->dims[0])) {
        emu_log("rknn_matmul_set_io_mem: attr %s does not match the context's current shape "
                "(M=%d K=%d N=%d)",
                want->name, sh->M, sh->K, sh->N);
        goto out;
    }
    pthread_mutex_lock(&g_lock);
    emu_mem *m = mem_find_locked(mem);
    if (m && m->st->owner_alive && m->size >= want->size) m->refs++;
    else {
        if (!m) emu_log("rknn_matmul_set_io_mem: %p is not a live rknn_tensor_mem", (void *)mem);
        else if (!m->st->owner_alive)
            emu_log("rknn_matmul_set_io_mem: the allocation behind view %p was destroyed",
                    (void *)mem);
        else
            emu_log("rknn_matmul_set_io_mem: %s buffer has %zu bytes, needs %u", want->name,
                    m->size, want->size);
        m = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    if (!m) goto out;
    float *snap = NULL;
    if (role == ROLE_B && c->info.B_layout != EMU_LAYOUT_NATIVE) {
        snap = malloc((size_t)sh->K * sh->N * sizeof *snap);
        if (!snap) {
            pthread_mutex_lock(&g_lock);
            mem_put_locked(m);
            pthread_mutex_unlock(&g_lock);
            rc = EMU_ERR_MALLOC_FAIL;
            goto out;
        }
        emu_decode_b(c->chip, want->type, c->info.B_layout, sh->K, sh->N, m->st->dev + m->off, snap);
    }
    unbind(c, role);
    c->bound[role] = m;
    if (snap) {
        c->b_snap = snap;
        c->b_snap_k = sh->K;
        c->b_snap_n = sh->N;
    }
    rc = EMU_SUCC;
out:
    pthread_mutex_unlock(&c->run_lock);
    ctx_put(c);
    return rc;
}

/* RK3588: AUTO or a single core (CORE_0_1 and CORE_0_1_2 are rejected for
 * matmul); RK3576: AUTO, CORE_0, CORE_1; RK3562: not supported (-1). */
EMU_API int rknn_matmul_set_core_mask(emu_ctx_t ctx, int core_mask);
EMU_API int rknn_matmul_set_core_mask(emu_ctx_t ctx, int core_mask)
{
    emu_ctx *c = ctx_get(ctx);
    if (!c) return EMU_ERR_CTX_INVALID;
    int ok = c->chip->has_core_mask &&
             (core_mask == EMU_CORE_AUTO || (core_mask == EMU_CORE_0) ||
              (core_mask == EMU_CORE_1 && c->chip->n_cores >= 2) ||
              (core_mask == EMU_CORE_2 && c->chip->n_cores >= 3));
    if (ok) {
        pthread_mutex_lock(&c->run_lock);
        c->core_mask = core_mask;
        pthread_mutex_unlock(&c->run_lock);
    } else
        emu_log("%s: Not support core mask: %d", c->chip->name, core_mask);
    ctx_put(c);
    return ok ? EMU_SUCC : EMU_ERR_FAIL;
}

/* Stored per matrix. Per layer: 1 scale; per channel (B or C): N; per group
 * (B of the fp16/int8 x int4 and fp16 x int8 types): N*K/group_size.
 * INT8->FP32 (type 9) refuses per channel and per group (NOTES pitfall 4). */
EMU_API int rknn_matmul_set_quant_params(emu_ctx_t ctx, emu_quant_params *params);
EMU_API int rknn_matmul_set_quant_params(emu_ctx_t ctx, emu_quant_params *params)
{
    emu_ctx *c = ctx_get(ctx);
    if (!c) return EMU_ERR_CTX_INVALID;
    int rc = EMU_ERR_PARAM_INVALID;
    pthread_mutex_lock(&c->run_lock);
    int role = params ? name_role(params->name) : -1;
    int ta, tb, tc, t = c->info.type;
    emu_mm_types(t, &ta, &tb, &tc);
    const emu_shape *sh = &c->shapes[c->cur];
    int hybrid = tb != ta && tb != EMU_T_F16;
    int g = c->info.group_size, n = params ? params->scale_len : 0, kind;
    if (role < 0 || !params->scale || n < 1) {
        emu_log("rknn_matmul_set_quant_params: bad name, scale or scale_len");
        goto out;
    }
    if (n == 1) kind = EMU_Q_LAYER;
    else if (n == sh->N && role != ROLE_A) kind = EMU_Q_CHANNEL;
    else if (role == ROLE_B && g > 0 && sh->K % g == 0 && (int64_t)n == (int64_t)sh->N * (sh->K / g))
        kind = EMU_Q_GROUP;
    else {
        emu_log("rknn_matmul_set_quant_params: %s scale_len %d is none of 1, N=%d, N*K/group",
                params->name, n, sh->N);
        goto out;
    }
    if ((kind == EMU_Q_GROUP && !hybrid) ||
        (t == EMU_MM_I8_I8_F32 && kind != EMU_Q_LAYER)) {
        emu_log("rknn_matmul_set_quant_params: type %d does not support this quantisation of %s", t,
                params->name);
        goto out;
    }
    if (params->zp_len != 0 && params->zp_len != 1 && params->zp_len != n) {
        emu_log("rknn_matmul_set_quant_params: zp_len %d must be 0, 1 or scale_len", params->zp_len);
        goto out;
    }
    if (params->zp_len > 0 && !params->zp) {
        emu_log("rknn_matmul_set_quant_params: NULL zp");
        goto out;
    }
    float *sc = malloc((size_t)n * sizeof *sc);
    int32_t *zp = params->zp_len ? malloc((size_t)params->zp_len * sizeof *zp) : NULL;
    if (!sc || (params->zp_len && !zp)) {
        free(sc);
        free(zp);
        rc = EMU_ERR_MALLOC_FAIL;
        goto out;
    }
    memcpy(sc, params->scale, (size_t)n * sizeof *sc);
    if (zp) memcpy(zp, params->zp, (size_t)params->zp_len * sizeof *zp);
    emu_qparam *q = &c->q[role];
    free(q->scale);
    free(q->zp);
    q->kind = kind;
    q->group = kind == EMU_Q_GROUP ? g : 0;
    q->n_scale = n;
    q->scale = sc;
    q->n_zp = params->zp_len;
    q->zp = zp;
    rc = EMU_SUCC;
out:
    pthread_mutex_unlock(&c->run_lock);
    ctx_put(c);
    return rc;
}

/* Copies the stored scales/zero points back (as many as params' lengths
 * hold) and puts the first scale in *scale_out. What the runtime calls B's
 * "normalised scale" is not documented; this is a stand-in. */
EMU_API int rknn_matmul_get_quant_params(emu_ctx_t ctx, emu_quant_params *params, float *scale_out);
EMU_API int rknn_matmul_get_quant_params(emu_ctx_t ctx, emu_quant_params *params, float *scale_out)
{
    emu_ctx *c = ctx_get(ctx);
    if (!c) return EMU_ERR_CTX_INVALID;
    int role = params ? name_role(params->name) : -1;
    if (role < 0) {
        ctx_put(c);
        return EMU_ERR_PARAM_INVALID;
    }
    pthread_mutex_lock(&c->run_lock);
    const emu_qparam *q = &c->q[role];
    float s0 = q->kind == EMU_Q_NONE ? 1.0f : q->scale[0];
    if (params->scale && params->scale_len > 0) {
        for (int i = 0; i < params->scale_len; i++)
            params->scale[i] = q->kind == EMU_Q_NONE ? 1.0f : i < q->n_scale ? q->scale[i] : 0.0f;
    }
    if (params->zp && params->zp_len > 0)
        for (int i = 0; i < params->zp_len; i++)
            params->zp[i] = i < q->n_zp ? q->zp[i] : 0;
    if (scale_out) *scale_out = s0;
    pthread_mutex_unlock(&c->run_lock);
    ctx_put(c);
    return EMU_SUCC;
}

/* Runs C = A.B on the bound buffers' device copies, on the emulated core
 * the mask names (AUTO: the first idle one). */
EMU_API int rknn_matmul_run(emu_ctx_t ctx);
EMU_API int rknn_matmul_run(emu_ctx_t ctx)
{
    emu_ctx *c = ctx_get(ctx);
    if (!c) {
        emu_log("rknn_matmul_run: invalid context %llu", (unsigned long long)ctx);
        return EMU_ERR_CTX_INVALID;
    }
    pthread_mutex_lock(&c->run_lock);
    int rc = EMU_SUCC;
    pthread_mutex_lock(&g_lock);
    for (int r = 0; r < 3 && rc == EMU_SUCC; r++) {
        emu_mem *m = c->bound[r];
        if (!m) {
            emu_log("rknn_matmul_run: %c is not bound%s", "ABC"[r],
                    c->dynamic && r != ROLE_B ? " (bind A and C after set_dynamic_shape)" : "");
            rc = r == ROLE_C ? EMU_ERR_OUTPUT_INVALID : EMU_ERR_INPUT_INVALID;
        } else if (!m->alive || !m->st->owner_alive) {
            emu_log("rknn_matmul_run: the buffer bound to %c was destroyed", "ABC"[r]);
            rc = r == ROLE_C ? EMU_ERR_OUTPUT_INVALID : EMU_ERR_INPUT_INVALID;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (rc) goto out;

    int core = 0;
    if (c->core_mask == EMU_CORE_AUTO) {
        for (core = 0; core < c->chip->n_cores; core++)
            if (pthread_mutex_trylock(&g_core_lock[core]) == 0) break;
        if (core == c->chip->n_cores) pthread_mutex_lock(&g_core_lock[core = 0]);
    } else {
        core = c->core_mask == EMU_CORE_0 ? 0 : c->core_mask == EMU_CORE_1 ? 1 : 2;
        pthread_mutex_lock(&g_core_lock[core]);
    }
    const emu_shape *sh = &c->shapes[c->cur];
    emu_mem *ma = c->bound[ROLE_A], *mb = c->bound[ROLE_B], *mc = c->bound[ROLE_C];
    const float *bt = c->b_snap;
    float *tmp = NULL;
    if (c->info.B_layout == EMU_LAYOUT_NATIVE) {
        tmp = malloc((size_t)sh->K * sh->N * sizeof *tmp);
        if (!tmp) rc = EMU_ERR_MALLOC_FAIL;
        else
            emu_decode_b(c->chip, c->io[c->cur].B.type, EMU_LAYOUT_NATIVE, sh->K, sh->N,
                         mb->st->dev + mb->off, tmp);
        bt = tmp;
    }
    if (!rc) {
        emu_run_desc d = {c->chip, c->info.type, c->info.AC_layout, sh->M, sh->K, sh->N,
                          &c->q[ROLE_A], &c->q[ROLE_B], &c->q[ROLE_C]};
        rc = emu_compute(&d, ma->st->dev + ma->off, bt, mc->st->dev + mc->off);
    }
    free(tmp);
    pthread_mutex_lock(&g_lock);
    if (!rc) g_runs[core]++;
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_unlock(&g_core_lock[core]);
out:
    pthread_mutex_unlock(&c->run_lock);
    ctx_put(c);
    return rc;
}

/* Pure CPU packer, v2.1+ 5-argument form: src is K x N row-major; for int4
 * it holds one value per byte (NOTES pitfall 5), dst gets packed nibbles. */
EMU_API int rknn_B_normal_layout_to_native_layout(void *B_input, void *B_output, int K, int N,
                                                  emu_matmul_info *info);
EMU_API int rknn_B_normal_layout_to_native_layout(void *B_input, void *B_output, int K, int N,
                                                  emu_matmul_info *info)
{
    const emu_chip *chip = emu_chip_current();
    int ta, tb, tc;
    if (!chip) return EMU_ERR_DEVICE_UNAVAILABLE;
    if (!B_input || !B_output || !info || !emu_mm_types(info->type, &ta, &tb, &tc)) {
        emu_log("rknn_B_normal_layout_to_native_layout: NULL argument or unknown type");
        return EMU_ERR_PARAM_INVALID;
    }
    int sk = emu_b_subk(chip, tb), sn = emu_b_subn(chip, tb);
    if (K <= 0 || N <= 0 || K % sk || N % sn) {
        emu_log("rknn_B_normal_layout_to_native_layout: K=%d N=%d not aligned to %d/%d", K, N, sk,
                sn);
        return EMU_ERR_PARAM_INVALID;
    }
    const uint8_t *src = B_input;
    uint8_t *dst = B_output;
    int eb = emu_type_bits(tb) / 8;
    if (tb == EMU_T_I4) memset(dst, 0, (size_t)K * N / 2);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            size_t di = emu_b_index(chip, tb, EMU_LAYOUT_NATIVE, K, N, k, n), si = (size_t)k * N + n;
            if (tb == EMU_T_I4) {
                int v = src[si] & 15, sh = (int)(di & 1) * 4;
                dst[di / 2] = (uint8_t)(dst[di / 2] | (v << sh));
            } else
                memcpy(dst + di * eb, src + si * eb, (size_t)eb);
        }
    return EMU_SUCC;
}

/* RKNN_QUERY_SDK_VERSION on any (matmul) context; other queries -5. */
EMU_API int rknn_query(emu_ctx_t ctx, int cmd, void *info, uint32_t size);
EMU_API int rknn_query(emu_ctx_t ctx, int cmd, void *info, uint32_t size)
{
    emu_ctx *c = ctx_get(ctx);
    if (!c) return EMU_ERR_CTX_INVALID;
    ctx_put(c);
    if (cmd != EMU_QUERY_SDK_VERSION || !info || size < sizeof(emu_sdk_version)) {
        emu_log("rknn_query: command %d (size %u) not emulated", cmd, size);
        return EMU_ERR_PARAM_INVALID;
    }
    emu_sdk_version *v = info;
    memset(v, 0, sizeof *v);
    snprintf(v->api_version, sizeof v->api_version, "2.3.2 (emulated)");
    snprintf(v->drv_version, sizeof v->drv_version, "0.9.8 (emulated)");
    return EMU_SUCC;
}

/* Emulator only (tests may dlsym it; a backend must not need it). Any
 * pointer may be NULL. */
EMU_API int rknn_emu_stats(uint64_t *runs_per_core, uint64_t *syncs_to_dev, uint64_t *syncs_from_dev,
                           uint64_t *live_mems, uint64_t *live_ctxs);
EMU_API int rknn_emu_stats(uint64_t *runs_per_core, uint64_t *syncs_to_dev, uint64_t *syncs_from_dev,
                           uint64_t *live_mems, uint64_t *live_ctxs)
{
    pthread_mutex_lock(&g_lock);
    if (runs_per_core) memcpy(runs_per_core, g_runs, sizeof g_runs);
    if (syncs_to_dev) *syncs_to_dev = g_sync_to;
    if (syncs_from_dev) *syncs_from_dev = g_sync_from;
    if (live_mems) *live_mems = g_live_mems;
    if (live_ctxs) *live_ctxs = g_live_ctxs;
    pthread_mutex_unlock(&g_lock);
    return 0;
}
