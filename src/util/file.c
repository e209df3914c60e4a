/*
 * file.c - file and memory helpers: whole reads, exact pread/pwrite with
 * retries, atomic replacement (temp + fsync + rename), mkdir -p, aligned
 * allocation, huge-page weight mappings, time, byte-size parsing and printing. Stateless; any thread.
 */
#include "util/common.h"
#include "util/knobs.h"

#include <ctype.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *rkm_alloc_aligned(size_t bytes, size_t align)
{
    void *p = NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    if (posix_memalign(&p, align, bytes ? bytes : align) != 0) return NULL;
    return p;
}

void rkm_free_aligned(void *p) { free(p); }

#define HUGE_ALIGN ((size_t)2 << 20)

/* The length a weight mapping of `bytes` spans: whole pages. */
static size_t map_len(size_t bytes)
{
    long pg = sysconf(_SC_PAGESIZE);
    return RKM_ALIGN_UP(bytes ? bytes : 1, (size_t)(pg > 0 ? pg : 4096));
}

void *rkm_map_weights(size_t bytes)
{
    size_t len = map_len(bytes);
    uint8_t *raw = mmap(NULL, len + HUGE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)RKM_ALIGN_UP((uintptr_t)raw, HUGE_ALIGN);
    /* trim to exactly [p, p + len) */
    if (p > raw) munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + len + HUGE_ALIGN - (p + len));
    if (tail) munmap(p + len, tail);
    const char *e = rkm_knob(RKM_KNOB_HUGEPAGES);
#ifdef MADV_HUGEPAGE
    if (!(e && strcmp(e, "0") == 0)) madvise(p, len, MADV_HUGEPAGE); /* best effort */
#else
    (void)e;
#endif
    return p;
}

void rkm_unmap_weights(void *p, size_t bytes)
{
    if (p) munmap(p, map_len(bytes));
}

double rkm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

char *rkm_read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rkm_err(errno == ENOENT ? RKM_ENOENT : RKM_EIO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rkm_err(RKM_EIO, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        rkm_err(RKM_ENOMEM, "%s: cannot allocate %zu bytes", path, n);
        close(fd);
        return NULL;
    }
    if (rkm_pread_all(fd, buf, n, 0, path) != 0) {
        free(buf);
        close(fd);
        return NULL;
    }
    close(fd);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int rkm_pread_all(int fd, void *buf, size_t n, uint64_t off, const char *what)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return rkm_err(RKM_EIO, "%s: read failed at offset %llu: %s", what,
                           (unsigned long long)off, strerror(errno));
        }
        if (r == 0)
            return rkm_err(RKM_EFORMAT, "%s: truncated (end of file at offset %llu, %zu bytes short)",
                           what, (unsigned long long)off, n);
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

int rkm_pread_direct(int dfd, void *buf, size_t n, uint64_t off, const char *what)
{
    enum { ALIGN = 4096, CHUNK = 8 << 20 };
    uint8_t *dst = buf;
    size_t bounce_len = (size_t)RKM_MIN((uint64_t)CHUNK, RKM_ALIGN_UP(n + ALIGN, ALIGN) + ALIGN);
    uint8_t *bounce = rkm_alloc_aligned(bounce_len, ALIGN);
    if (!bounce) return rkm_err(RKM_ENOMEM, "out of memory");
    int rc = 0;
    while (n > 0 && !rc) {
        uint64_t a0 = off & ~(uint64_t)(ALIGN - 1);
        size_t skip = (size_t)(off - a0);
        size_t want = (size_t)RKM_MIN((uint64_t)bounce_len, RKM_ALIGN_UP(skip + n, ALIGN));
        ssize_t r = pread(dfd, bounce, want, (off_t)a0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = errno == EINVAL ? RKM_EUNSUPPORTED
                                 : rkm_err(RKM_EIO, "%s: read failed at offset %llu: %s", what, (unsigned long long)off, strerror(errno));
            break;
        }
        if ((size_t)r <= skip) {
            rc = rkm_err(RKM_EFORMAT, "%s: truncated (end of file at offset %llu, %zu bytes short)", what,
                         (unsigned long long)off, n);
            break;
        }
        size_t k = RKM_MIN((size_t)r - skip, n);
        memcpy(dst, bounce + skip, k);
        dst += k;
        n -= k;
        off += k;
    }
    rkm_free_aligned(bounce);
    return rc;
}

int rkm_pwrite_all(int fd, const void *buf, size_t n, uint64_t off, const char *what)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t r = pwrite(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return rkm_err(errno == ENOSPC || errno == EDQUOT ? RKM_ENOSPC : RKM_EIO,
                           "%s: write failed at offset %llu: %s", what,
                           (unsigned long long)off, strerror(errno));
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Writes path through a fresh temporary: fill(user, fd, tmp) writes the
 * bytes, then fsync, rename, fsync of the directory. */
static int write_atomic(const char *path, int mode, int (*fill)(void *user, int fd, const char *tmp), void *user)
{
    static _Atomic unsigned counter;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 48);
    if (!tmp) return rkm_err(RKM_ENOMEM, "out of memory");
    /* a fresh name, created here (O_EXCL) and never through a link: a
     * planted file or symlink in a shared directory is not written through */
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        snprintf(tmp, plen + 48, "%s.tmp%d.%u", path, (int)getpid(), counter++);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int rc = rkm_err(RKM_EIO, "%s: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    int rc = fill(user, fd, tmp);
    if (rc == 0 && fsync(fd) != 0) rc = rkm_err(RKM_EIO, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == 0) rc = rkm_err(RKM_EIO, "%s: close: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0) rc = rkm_err(RKM_EIO, "rename %s: %s", path, strerror(errno));
    if (rc != 0) unlink(tmp);
    free(tmp);
    if (rc == 0) { /* the rename itself survives a crash once the directory is synced */
        char *dir = strdup(path);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        if (dir) {
            if (slash) *(slash == dir ? slash + 1 : slash) = 0;
            int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0) {
                fsync(dfd);
                close(dfd);
            }
            free(dir);
        }
    }
    return rc;
}

typedef struct {
    const void *data;
    size_t n;
} mem_src;

static int fill_mem(void *user, int fd, const char *tmp)
{
    const mem_src *m = user;
    return rkm_pwrite_all(fd, m->data, m->n, 0, tmp);
}

int rkm_write_file_atomic_mode(const char *path, const void *data, size_t n, int mode)
{
    mem_src m = {data, n};
    return write_atomic(path, mode, fill_mem, &m);
}

/* Reads fd to its end in 8 MiB pieces, each handed to each(user, buf, n)
 * at its offset; 0, or the first error (a read's, named by what, or
 * each's). */
static int read_pieces(int fd, const char *what, int (*each)(void *user, const void *buf, size_t n, uint64_t off),
                       void *user)
{
    enum { CHUNK = 8 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf) return rkm_err(RKM_ENOMEM, "out of memory");
    int rc = 0;
    for (uint64_t off = 0;;) {
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) rc = rkm_err(RKM_EIO, "%s: %s", what, strerror(errno));
        if (r <= 0 || (rc = each(user, buf, (size_t)r, off))) break;
        off += (uint64_t)r;
    }
    free(buf);
    return rc;
}

typedef struct {
    rkm_hasher *h;  /* NULL: no hash */
    uint64_t bytes;
    int out;        /* the copy's fd, -1: none */
    const char *out_name;
} piece_sink;

static int sink_piece(void *user, const void *buf, size_t n, uint64_t off)
{
    piece_sink *k = user;
    if (k->h) rkm_hasher_update(k->h, buf, n);
    k->bytes += n;
    return k->out >= 0 ? rkm_pwrite_all(k->out, buf, n, off, k->out_name) : 0;
}

typedef struct {
    int in;
    const char *src;
    piece_sink sink;
} copy_src;

static int fill_copy(void *user, int fd, const char *tmp)
{
    copy_src *c = user;
    c->sink.out = fd;
    c->sink.out_name = tmp;
    return read_pieces(c->in, c->src, sink_piece, &c->sink);
}

int rkm_copy_file_atomic(const char *src, const char *dst, uint64_t *bytes, uint64_t *hash)
{
    copy_src c = {open(src, O_RDONLY | O_CLOEXEC), src, {hash ? rkm_hasher_new() : NULL, 0, -1, NULL}};
    if (c.in < 0) {
        rkm_hasher_free(c.sink.h);
        return rkm_err(RKM_EIO, "%s: %s", src, strerror(errno));
    }
    int rc = hash && !c.sink.h ? rkm_err(RKM_ENOMEM, "out of memory") : write_atomic(dst, 0644, fill_copy, &c);
    close(c.in);
    if (!rc && bytes) *bytes = c.sink.bytes;
    if (!rc && hash) *hash = rkm_hasher_digest(c.sink.h);
    rkm_hasher_free(c.sink.h);
    return rc;
}

int rkm_hash_file(const char *path, uint64_t *bytes, uint64_t *hash)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return rkm_err(RKM_EIO, "%s: %s", path, strerror(errno));
    piece_sink k = {rkm_hasher_new(), 0, -1, NULL};
    int rc = k.h ? read_pieces(fd, path, sink_piece, &k) : rkm_err(RKM_ENOMEM, "out of memory");
    if (!rc) {
        *bytes = k.bytes;
        *hash = rkm_hasher_digest(k.h);
    }
    rkm_hasher_free(k.h);
    close(fd);
    return rc;
}

int rkm_write_file_atomic(const char *path, const void *data, size_t n)
{
    return rkm_write_file_atomic_mode(path, data, n, 0644);
}

int rkm_mkdir_p(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return rkm_err(RKM_EINVAL, "bad directory path");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return rkm_err(RKM_EIO, "mkdir %s: %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    return 0;
}

char *rkm_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

const char *rkm_fmt_bytes(uint64_t n, char *buf, size_t cap)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else snprintf(buf, cap, "%.2f %s", v, units[u]);
    return buf;
}

int64_t rkm_parse_bytes(const char *s)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return -1;
    while (*end == ' ') end++;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    case 'B': break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    double r = v * mul;
    if (r > 9.0e18) return -1;
    return (int64_t)r;
}

static void stamp_of(const struct stat *s, rkm_file_stamp *st)
{
    st->dev = (uint64_t)s->st_dev;
    st->ino = (uint64_t)s->st_ino;
    st->size = (uint64_t)s->st_size;
    st->mtime_ns = (int64_t)s->st_mtim.tv_sec * 1000000000 + s->st_mtim.tv_nsec;
}

int rkm_stamp_fd(int fd, rkm_file_stamp *st)
{
    struct stat s;
    if (fstat(fd, &s) != 0) return -1;
    stamp_of(&s, st);
    return 0;
}

int rkm_stamp_path(const char *path, rkm_file_stamp *st)
{
    struct stat s;
    if (stat(path, &s) != 0) return -1;
    stamp_of(&s, st);
    return 0;
}
