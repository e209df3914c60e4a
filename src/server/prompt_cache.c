/*
 * prompt_cache.c - session KV states on disk, so a conversation's prefix is
 * not recomputed after it was displaced by another one or after a restart.
 *
 * Layout of a cache directory (one per model):
 *   <id>.kv    the session state, as rkm_session_save writes it (tokens,
 *              K/V rows; written to a temp file, fsynced, renamed; XXH3
 *              checksum verified by rkm_session_load, which also checks the
 *              model identity)
 *   <id>.tok   the index record, written atomically after the .kv:
 *                offset 0  "RKMPCT01"       magic + version
 *                       8  u32 n_tokens
 *                      12  u32 reserved (0)
 *                      16  u64 kv_bytes     size of <id>.kv when written
 *                      24  i64 created      unix seconds
 *                      32  i32 tokens[n_tokens]
 *                      ..  u64 XXH3-64 of all bytes before it
 *   <id> is 16 lowercase hex digits.
 * A .tok lets the server pick the best entry without reading the big .kv
 * files. After a load the restored tokens must equal the record's, so a .kv
 * replaced without its .tok (crash between the two renames) is detected.
 * Files are the owner's only (0600, the directory 0700): they hold
 * conversations. A state that extends an entry is written under a new id
 * and replaces the entry only once both files are in place, so a failed
 * save (a full disk, the size cap) leaves the entry as it was.
 * At open: records that are expired (default 7 days), broken, or without
 * their .kv, and .kv files without a record, are deleted. At open and after
 * each store the least recently used entries go until the total is under
 * the size cap.
 *
 * Threads: the worker thread only. Ownership: the index (tokens of every
 * entry) lives in memory, freed by srv_pcache_close.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"
#include "util/common.h"

#define PCT_MAGIC "RKMPCT01"
#define PCT_HEADER 32
#define PCT_MAX_TOKENS (1 << 24)

typedef struct pc_entry {
    char id[17];
    int n_tokens;
    int32_t *tokens;
    uint64_t kv_bytes;
    int64_t created;   /* unix seconds: expiry */
    int64_t used;      /* unix ns of the last store/load: eviction order */
} pc_entry;

struct srv_pcache {
    char *dir;
    uint64_t max_bytes;
    double ttl_s;
    pc_entry *e;
    int n, cap;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static char *entry_path(const srv_pcache *pc, const char *id, const char *ext)
{
    char name[32];
    snprintf(name, sizeof name, "%s.%s", id, ext);
    return rkm_path_join(pc->dir, name);
}

static void remove_files(const srv_pcache *pc, const char *id)
{
    char *a = entry_path(pc, id, "tok"), *b = entry_path(pc, id, "kv");
    if (a) unlink(a);
    if (b) unlink(b);
    free(a);
    free(b);
}

static void drop(srv_pcache *pc, int i)
{
    remove_files(pc, pc->e[i].id);
    free(pc->e[i].tokens);
    pc->e[i] = pc->e[--pc->n];
}

static int id_ok(const char *s, size_t n)
{
    if (n != 16) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* Reads and checks one record. 0 or -1. */
static int read_record(const srv_pcache *pc, const char *id, pc_entry *out)
{
    char *p = entry_path(pc, id, "tok");
    size_t len = 0;
    unsigned char *d = p ? (unsigned char *)rkm_read_file(p, &len) : NULL;
    free(p);
    if (!d) return -1;
    int rc = -1;
    uint32_t n;
    if (len < PCT_HEADER + 8 || memcmp(d, PCT_MAGIC, 8)) goto out;
    memcpy(&n, d + 8, 4);
    if (n == 0 || n > PCT_MAX_TOKENS || len != PCT_HEADER + (size_t)n * 4 + 8) goto out;
    uint64_t h;
    memcpy(&h, d + len - 8, 8);
    if (rkm_hash(d, len - 8) != h) goto out;
    memset(out, 0, sizeof *out);
    memcpy(out->id, id, 16);
    out->n_tokens = (int)n;
    memcpy(&out->kv_bytes, d + 16, 8);
    memcpy(&out->created, d + 24, 8);
    out->tokens = malloc((size_t)n * 4);
    if (!out->tokens) goto out;
    memcpy(out->tokens, d + PCT_HEADER, (size_t)n * 4);
    rc = 0;
out:
    free(d);
    return rc;
}

static int write_record(const srv_pcache *pc, const pc_entry *en)
{
    size_t len = PCT_HEADER + (size_t)en->n_tokens * 4 + 8;
    unsigned char *d = calloc(1, len);
    if (!d) return rkm_err(RKM_ENOMEM, "prompt cache: out of memory");
    uint32_t n = (uint32_t)en->n_tokens;
    memcpy(d, PCT_MAGIC, 8);
    memcpy(d + 8, &n, 4);
    memcpy(d + 16, &en->kv_bytes, 8);
    memcpy(d + 24, &en->created, 8);
    memcpy(d + PCT_HEADER, en->tokens, (size_t)n * 4);
    uint64_t h = rkm_hash(d, len - 8);
    memcpy(d + len - 8, &h, 8);
    char *p = entry_path(pc, en->id, "tok");
    int rc = p ? rkm_write_file_atomic_mode(p, d, len, 0600) : rkm_err(RKM_ENOMEM, "out of memory");
    free(p);
    free(d);
    return rc;
}

static int push(srv_pcache *pc, const pc_entry *en)
{
    if (pc->n == pc->cap) {
        int cap = pc->cap ? pc->cap * 2 : 16;
        pc_entry *e2 = realloc(pc->e, sizeof *e2 * (size_t)cap);
        if (!e2) return -1;
        pc->e = e2;
        pc->cap = cap;
    }
    pc->e[pc->n++] = *en;
    return 0;
}

static void enforce(srv_pcache *pc, const char *keep_id);

srv_pcache *srv_pcache_open(const char *dir, uint64_t max_bytes, double ttl_s)
{
    if (rkm_mkdir_p(dir)) return NULL;
    chmod(dir, 0700); /* the states hold conversations */
    srv_pcache *pc = calloc(1, sizeof *pc);
    if (!pc || !(pc->dir = strdup(dir))) {
        free(pc);
        rkm_err(RKM_ENOMEM, "prompt cache: out of memory");
        return NULL;
    }
    pc->max_bytes = max_bytes;
    pc->ttl_s = ttl_s;
    DIR *d = opendir(dir);
    if (!d) {
        rkm_err(RKM_EIO, "prompt cache: cannot open %s", dir);
        srv_pcache_close(pc);
        return NULL;
    }
    int64_t now = (int64_t)time(NULL);
    struct dirent *de;
    char (*orphans)[17] = NULL;
    int n_orphans = 0;
    while ((de = readdir(d))) {
        const char *dot = strrchr(de->d_name, '.');
        if (!dot || !id_ok(de->d_name, (size_t)(dot - de->d_name))) {
            /* Leftover temp files of interrupted atomic writes. */
            if (strstr(de->d_name, ".tmp")) {
                char *p = rkm_path_join(dir, de->d_name);
                if (p) unlink(p);
                free(p);
            }
            continue;
        }
        char id[17];
        memcpy(id, de->d_name, 16);
        id[16] = 0;
        if (!strcmp(dot, ".kv")) { /* checked against the records below */
            char (*o2)[17] = realloc(orphans, sizeof *orphans * (size_t)(n_orphans + 1));
            if (o2) {
                orphans = o2;
                memcpy(orphans[n_orphans++], id, 17);
            }
            continue;
        }
        if (strcmp(dot, ".tok")) continue;
        pc_entry en;
        char *kv = entry_path(pc, id, "kv");
        struct stat st;
        int ok = read_record(pc, id, &en) == 0;
        if (ok && (!kv || stat(kv, &st) || (uint64_t)st.st_size != en.kv_bytes ||
                   (ttl_s > 0 && (double)(now - en.created) > ttl_s))) {
            free(en.tokens);
            ok = 0;
        }
        free(kv);
        if (!ok) {
            remove_files(pc, id);
            continue;
        }
        en.used = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        if (push(pc, &en)) free(en.tokens);
    }
    closedir(d);
    for (int i = 0; i < n_orphans; i++) {
        int found = 0;
        for (int k = 0; k < pc->n && !found; k++) found = !strcmp(pc->e[k].id, orphans[i]);
        if (!found) remove_files(pc, orphans[i]);
    }
    free(orphans);
    enforce(pc, ""); /* the cap may have been lowered since */
    return pc;
}

void srv_pcache_close(srv_pcache *pc)
{
    if (!pc) return;
    for (int i = 0; i < pc->n; i++) free(pc->e[i].tokens);
    free(pc->e);
    free(pc->dir);
    free(pc);
}

int srv_pcache_count(const srv_pcache *pc) { return pc ? pc->n : 0; }

uint64_t srv_pcache_bytes(const srv_pcache *pc)
{
    uint64_t t = 0;
    for (int i = 0; pc && i < pc->n; i++) t += pc->e[i].kv_bytes;
    return t;
}

int srv_pcache_best(srv_pcache *pc, const int32_t *toks, int n, int *lcp)
{
    int best = -1, bl = 0;
    for (int i = 0; pc && i < pc->n; i++) {
        const pc_entry *en = &pc->e[i];
        int m = RKM_MIN(n, en->n_tokens), k = 0;
        while (k < m && en->tokens[k] == toks[k]) k++;
        if (k > bl) {
            bl = k;
            best = i;
        }
    }
    *lcp = bl;
    return best;
}

int srv_pcache_load(srv_pcache *pc, int idx, rkm_session *s, char id_out[17])
{
    if (!pc || idx < 0 || idx >= pc->n) return rkm_err(RKM_EINVAL, "prompt cache: bad entry");
    pc_entry *en = &pc->e[idx];
    char *p = entry_path(pc, en->id, "kv");
    int rc = p ? rkm_session_load(s, p) : rkm_err(RKM_ENOMEM, "out of memory");
    if (rc == 0) utimensat(AT_FDCWD, p, NULL, 0); /* recency survives a restart */
    /* a read error or no memory says nothing about the file: it stays */
    struct stat st;
    int transient = (rc == RKM_EIO || rc == RKM_ENOMEM) && p && stat(p, &st) == 0;
    free(p);
    if (transient) {
        rkm_session_truncate(s, 0);
        return rkm_err_prefix(rc, "prompt cache entry %s not loaded", en->id);
    }
    if (rc == 0) {
        int n;
        const int32_t *t = rkm_session_tokens(s, &n);
        if (n != en->n_tokens || memcmp(t, en->tokens, sizeof(int32_t) * (size_t)n))
            rc = rkm_err(RKM_EFORMAT, "prompt cache: %s.kv does not match its record", en->id);
    }
    if (rc) {
        rkm_session_truncate(s, 0);
        rkm_err_prefix(rc, "prompt cache entry %s dropped", en->id);
        drop(pc, idx);
        return rc;
    }
    en->used = now_ns();
    memcpy(id_out, en->id, 17);
    return 0;
}

static void new_id(const srv_pcache *pc, char id[17])
{
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed[3] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid()};
        snprintf(id, 17, "%016llx", (unsigned long long)rkm_hash(seed, sizeof seed));
        int clash = 0;
        for (int i = 0; i < pc->n && !clash; i++) clash = !strcmp(pc->e[i].id, id);
        if (!clash) return;
    }
}

/* Drops expired entries and then the least recently used ones until the
 * total fits the cap (keep: index of an entry never dropped, or -1). */
static void enforce(srv_pcache *pc, const char *keep_id)
{
    int64_t now = (int64_t)time(NULL);
    for (int i = pc->n - 1; i >= 0; i--)
        if (pc->ttl_s > 0 && (double)(now - pc->e[i].created) > pc->ttl_s &&
            strcmp(pc->e[i].id, keep_id))
            drop(pc, i);
    while (pc->max_bytes && srv_pcache_bytes(pc) > pc->max_bytes) {
        int old = -1;
        for (int i = 0; i < pc->n; i++)
            if (strcmp(pc->e[i].id, keep_id) && (old < 0 || pc->e[i].used < pc->e[old].used)) old = i;
        if (old < 0) break;
        drop(pc, old);
    }
}

int srv_pcache_store(srv_pcache *pc, const char *id, rkm_session *s, char id_out[17])
{
    if (!pc) return rkm_err(RKM_EINVAL, "prompt cache: disabled");
    int n;
    const int32_t *t = rkm_session_tokens(s, &n);
    if (n <= 0) return rkm_err(RKM_EINVAL, "prompt cache: empty session");
    /* Replace the entry this session was loaded from when it still extends
     * it; otherwise it is a new branch and the old entry stays valid. */
    int idx = -1;
    for (int i = 0; id && id[0] && i < pc->n; i++)
        if (!strcmp(pc->e[i].id, id)) idx = i;
    if (idx >= 0 && (pc->e[idx].n_tokens > n ||
                     memcmp(pc->e[idx].tokens, t, sizeof(int32_t) * (size_t)pc->e[idx].n_tokens)))
        idx = -1;
    /* New files under a new id: the entry it extends stays whole until
     * they are written, and stays if writing them fails. */
    pc_entry en;
    memset(&en, 0, sizeof en);
    new_id(pc, en.id);
    en.n_tokens = n;
    en.created = (int64_t)time(NULL);
    en.used = now_ns();
    en.tokens = malloc(sizeof(int32_t) * (size_t)n);
    if (!en.tokens) return rkm_err(RKM_ENOMEM, "prompt cache: out of memory");
    memcpy(en.tokens, t, sizeof(int32_t) * (size_t)n);
    char *kv = entry_path(pc, en.id, "kv");
    int rc = kv ? rkm_session_save(s, kv) : rkm_err(RKM_ENOMEM, "out of memory");
    struct stat st;
    if (!rc && stat(kv, &st)) rc = rkm_err(RKM_EIO, "prompt cache: %s vanished", kv);
    free(kv);
    if (!rc) {
        en.kv_bytes = (uint64_t)st.st_size;
        if (pc->max_bytes && en.kv_bytes > pc->max_bytes)
            rc = rkm_err(RKM_ENOSPC, "prompt cache: a state of %llu bytes exceeds the cap",
                         (unsigned long long)en.kv_bytes);
    }
    if (!rc) rc = write_record(pc, &en);
    if (rc) {
        free(en.tokens);
        remove_files(pc, en.id);
        return rc;
    }
    if (idx >= 0) {
        remove_files(pc, pc->e[idx].id);
        free(pc->e[idx].tokens);
        pc->e[idx] = en;
    } else if (push(pc, &en)) {
        free(en.tokens);
        remove_files(pc, en.id);
        return rkm_err(RKM_ENOMEM, "prompt cache: out of memory");
    }
    memcpy(id_out, en.id, 17);
    enforce(pc, en.id);
    return 0;
}
