/*
 * common.h - what every module of rkmojo includes: the error helpers, small
 * math, aligned allocation, timing and the file helpers of util/.
 *
 * Errors: functions return 0 or a negative RKM_E* code (include/rkmojo.h)
 * and set a per-thread message with rkm_err(); constructors return NULL and
 * set the message the same way. RKM_ASSERT is for broken invariants only,
 * never for untrusted input.
 */
#ifndef RKM_COMMON_H
#define RKM_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rkmojo.h"

#define RKM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RKM_MAX(a, b) ((a) > (b) ? (a) : (b))
#define RKM_ALIGN_UP(x, a) ((((x) + (a) - 1) / (a)) * (a))
#define RKM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define RKM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RKM_PRINTF(f, a)
#endif

/* Sets this thread's error message and returns code (for `return rkm_err(...)`). */
int rkm_err(int code, const char *fmt, ...) RKM_PRINTF(2, 3);
/* Prefixes the current message with more context, returns code. */
int rkm_err_prefix(int code, const char *fmt, ...) RKM_PRINTF(2, 3);

#define RKM_ASSERT(x)                                                        \
    do {                                                                     \
        if (!(x)) {                                                          \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__,       \
                    __LINE__, #x);                                           \
            abort();                                                         \
        }                                                                    \
    } while (0)

/* Aligned allocation (free with rkm_free_aligned). align: power of two. */
void *rkm_alloc_aligned(size_t bytes, size_t align);
void rkm_free_aligned(void *p);
/* A large weight buffer: an anonymous mapping aligned to 2 MiB and advised
 * for transparent huge pages (fewer TLB misses when the matmuls stream it;
 * RKM_HUGEPAGES=0 turns the advice off). Only whole 2 MiB ranges inside
 * the mapping can become huge pages, so RSS never exceeds the bytes used.
 * Free with rkm_unmap_weights(p, the same bytes). */
void *rkm_map_weights(size_t bytes);
void rkm_unmap_weights(void *p, size_t bytes);

/* MemAvailable of /proc/meminfo in bytes, 0 if unknown (rss.c). */
uint64_t rkm_mem_available_bytes(void);

/* Monotonic time in seconds. */
double rkm_now(void);

/* Whole-file read (adds a NUL after the data; *len excludes it). NULL + error. */
char *rkm_read_file(const char *path, size_t *len);
/* Writes all bytes at offset, retrying short writes. 0 or negative code. */
int rkm_pwrite_all(int fd, const void *buf, size_t n, uint64_t off, const char *what);
/* Reads exactly n bytes at offset; short reads are RKM_EFORMAT (truncated). */
int rkm_pread_all(int fd, void *buf, size_t n, uint64_t off, const char *what);
/* Reads exactly n bytes at off through a descriptor opened with O_DIRECT,
 * whatever the alignment of off, n and buf (an aligned bounce buffer covers
 * the range). RKM_EUNSUPPORTED if the file system refuses (then read
 * buffered); short reads are RKM_EFORMAT as in rkm_pread_all. */
int rkm_pread_direct(int dfd, void *buf, size_t n, uint64_t off, const char *what);
/* Writes data to path atomically: a new temp file in the same directory
 * (O_EXCL | O_NOFOLLOW), fsync, rename, fsync of the directory. Mode 0644;
 * the _mode form takes the file's mode (0600 for private state). */
int rkm_write_file_atomic(const char *path, const void *data, size_t n);
int rkm_write_file_atomic_mode(const char *path, const void *data, size_t n, int mode);
/* src copied to dst as rkm_write_file_atomic writes; *bytes and *hash
 * (XXH3-64 of the bytes; either may be NULL) of what was copied. */
int rkm_copy_file_atomic(const char *src, const char *dst, uint64_t *bytes, uint64_t *hash);
/* A file's size and XXH3-64, read in pieces. */
int rkm_hash_file(const char *path, uint64_t *bytes, uint64_t *hash);
/* mkdir -p. */
int rkm_mkdir_p(const char *path);
/* The value of a hexadecimal digit, -1 for any other character. */
static inline int rkm_hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Which file a path or descriptor is, and which version of it: a file
 * replaced (another inode) or rewritten in place (size, mtime) stamps
 * differently. */
typedef struct rkm_file_stamp {
    uint64_t dev, ino, size;
    int64_t mtime_ns;
} rkm_file_stamp;
/* 0, or -1 with errno set. */
int rkm_stamp_fd(int fd, rkm_file_stamp *st);
int rkm_stamp_path(const char *path, rkm_file_stamp *st);
/* path joining into a malloc'd string. */
char *rkm_path_join(const char *dir, const char *name);
/* Human-readable bytes ("1.23 GiB") into buf. */
const char *rkm_fmt_bytes(uint64_t n, char *buf, size_t cap);
/* Parses "2G", "512M", "1.5GiB", "123" into bytes; -1 on error. */
int64_t rkm_parse_bytes(const char *s);

/* xxHash64 (XXH3) of a buffer, and streaming. */
uint64_t rkm_hash(const void *p, size_t n);
const char *rkm_hash_impl(void); /* "avx512", "avx2" or "base" (SSE2 / NEON) */
typedef struct rkm_hasher rkm_hasher;
rkm_hasher *rkm_hasher_new(void);
void rkm_hasher_update(rkm_hasher *h, const void *p, size_t n);
uint64_t rkm_hasher_digest(rkm_hasher *h);
void rkm_hasher_free(rkm_hasher *h);

#endif
