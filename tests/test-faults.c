/*
 * test-faults.c - fault injection in the spirit of sqlite's: every
 * allocation of the parsers and of model open fails in turn, and every
 * read, write, fsync and rename of the files the project writes fails in
 * turn; each failure must end in a clean error (a message, no crash), free
 * what it allocated, close what it opened, and lose nothing on disk.
 *
 * How: this binary is linked with -Wl,--wrap for malloc, calloc, realloc,
 * free, strdup, strndup, posix_memalign, mmap, munmap, open, pread, pwrite,
 * fsync and rename (Makefile), so every call the library makes goes
 * through the __wrap_ functions below; cJSON's allocations are routed
 * there too (cJSON_InitHooks). A call's allocations are counted in a clean
 * run first (K); then the Nth fails for N = 1..K (every N up to 2000, an
 * even sample of 1000 more above; 600 and 100 under ASan), and after each run the set of live
 * allocations and mappings and the count of open descriptors must be what
 * they were before it. libc's own allocations (inside fopen, strdup's
 * callers in libc) are neither failed nor counted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/test.h"
#include "format/gguf.h"
#include "format/model_dir.h"
#include "format/safetensors.h"
#include "format/source.h"
#include "rkmojo.h"
#include "server/server.h"
#include "text/grammar.h"
#include "text/jinja.h"
#include "text/json_schema.h"
#include "text/tokenizer.h"

/* ---------------------------------------------------------- the layer */

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);
int __real_open(const char *path, int flags, ...);
ssize_t __real_pread(int fd, void *buf, size_t n, off_t off);
ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
int __real_fsync(int fd);
int __real_rename(const char *a, const char *b);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_munmap(void *addr, size_t len);
int __wrap_open(const char *path, int flags, ...);
ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t off);
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off);
int __wrap_fsync(int fd);
int __wrap_rename(const char *a, const char *b);

static pthread_mutex_t fmu = PTHREAD_MUTEX_INITIALIZER;
enum { ALLOC = 0, IO = 1 };
static struct {
    int on;        /* counting */
    long count;    /* calls since armed */
    long fail_at;  /* the call that fails (1-based), 0: none */
    int hit;       /* it came */
} fl[2];
static int io_errno = EIO;

/* live allocations and mappings made through the layer: open addressing */
#define LIVE_SLOTS (1u << 21)
static uintptr_t *live;
static long n_live, n_tomb;

static size_t live_slot(uintptr_t p)
{
    return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> 43) & (LIVE_SLOTS - 1);
}
/* tombstones lengthen every probe: past a quarter of the table it is
 * built again from the live entries */
static void live_rebuild(void)
{
    uintptr_t *old = live;
    live = __real_calloc(LIVE_SLOTS, sizeof *live);
    if (!live) abort();
    for (size_t j = 0; j < LIVE_SLOTS; j++)
        if (old[j] > 1) {
            size_t i = live_slot(old[j]);
            while (live[i]) i = (i + 1) & (LIVE_SLOTS - 1);
            live[i] = old[j];
        }
    __real_free(old);
    n_tomb = 0;
}
static void live_add(void *vp)
{
    uintptr_t p = (uintptr_t)vp;
    if (!p || !live) return;
    if (n_tomb > (long)(LIVE_SLOTS / 4)) live_rebuild();
    size_t i = live_slot(p);
    while (live[i] > 1) i = (i + 1) & (LIVE_SLOTS - 1);
    if (live[i] == 1) n_tomb--;
    live[i] = p;
    n_live++;
}
static void live_del(void *vp)
{
    uintptr_t p = (uintptr_t)vp;
    if (!p || !live) return;
    for (size_t i = live_slot(p); live[i]; i = (i + 1) & (LIVE_SLOTS - 1))
        if (live[i] == p) {
            live[i] = 1; /* tombstone */
            n_live--;
            n_tomb++;
            return;
        }
}

/* 1 when this call is the one to fail */
static int fail_now(int kind)
{
    if (!fl[kind].on) return 0;
    fl[kind].count++;
    if (fl[kind].fail_at && fl[kind].count == fl[kind].fail_at) {
        fl[kind].hit = 1;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t n)
{
    pthread_mutex_lock(&fmu);
    void *p = fail_now(ALLOC) ? NULL : __real_malloc(n);
    live_add(p);
    pthread_mutex_unlock(&fmu);
    if (!p) errno = ENOMEM;
    return p;
}

void *__wrap_calloc(size_t a, size_t b)
{
    pthread_mutex_lock(&fmu);
    void *p = fail_now(ALLOC) ? NULL : __real_calloc(a, b);
    live_add(p);
    pthread_mutex_unlock(&fmu);
    if (!p) errno = ENOMEM;
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    pthread_mutex_lock(&fmu);
    void *q = NULL;
    if (!fail_now(ALLOC)) {
        q = __real_realloc(p, n);
        if (q || !n) live_del(p);
        live_add(q);
    }
    pthread_mutex_unlock(&fmu);
    if (!q && n) errno = ENOMEM;
    return q;
}

void __wrap_free(void *p)
{
    if (!p) return;
    pthread_mutex_lock(&fmu);
    live_del(p);
    pthread_mutex_unlock(&fmu);
    __real_free(p);
}

char *__wrap_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = __wrap_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

char *__wrap_strndup(const char *s, size_t n)
{
    size_t l = strnlen(s, n);
    char *p = __wrap_malloc(l + 1);
    if (p) {
        memcpy(p, s, l);
        p[l] = 0;
    }
    return p;
}

int __wrap_posix_memalign(void **out, size_t align, size_t n)
{
    pthread_mutex_lock(&fmu);
    int rc = fail_now(ALLOC) ? ENOMEM : __real_posix_memalign(out, align, n);
    if (!rc) live_add(*out);
    pthread_mutex_unlock(&fmu);
    return rc;
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    pthread_mutex_lock(&fmu);
    void *p = fail_now(ALLOC) ? MAP_FAILED : __real_mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED) live_add(p);
    pthread_mutex_unlock(&fmu);
    if (p == MAP_FAILED) errno = ENOMEM;
    return p;
}

int __wrap_munmap(void *addr, size_t len)
{
    pthread_mutex_lock(&fmu);
    live_del(addr);
    pthread_mutex_unlock(&fmu);
    return __real_munmap(addr, len);
}

/* I/O: an open, read or write that fails with io_errno */
static int io_fails(void)
{
    pthread_mutex_lock(&fmu);
    int f = fail_now(IO);
    pthread_mutex_unlock(&fmu);
    if (f) errno = io_errno;
    return f;
}

int __wrap_open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = (flags & O_CREAT) ? va_arg(ap, int) : 0;
    va_end(ap);
    if (io_fails()) return -1;
    return __real_open(path, flags, mode);
}

ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t off)
{
    return io_fails() ? -1 : __real_pread(fd, buf, n, off);
}

ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (io_fails()) return -1;
    return __real_pwrite(fd, buf, n, off);
}

int __wrap_fsync(int fd) { return io_fails() ? -1 : __real_fsync(fd); }
int __wrap_rename(const char *a, const char *b) { return io_fails() ? -1 : __real_rename(a, b); }

static void arm(int kind, long fail_at)
{
    pthread_mutex_lock(&fmu);
    fl[kind].on = 1;
    fl[kind].count = 0;
    fl[kind].fail_at = fail_at;
    fl[kind].hit = 0;
    pthread_mutex_unlock(&fmu);
}

static long disarm(int kind)
{
    pthread_mutex_lock(&fmu);
    fl[kind].on = 0;
    long n = fl[kind].count;
    pthread_mutex_unlock(&fmu);
    return n;
}

static long live_now(void)
{
    pthread_mutex_lock(&fmu);
    long n = n_live;
    pthread_mutex_unlock(&fmu);
    return n;
}

static int n_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* ------------------------------------------------------------ runners */

/* every allocation fails in turn up to EVERY, then an even sample of
 * SAMPLE more (fewer under the sanitizers, 10-30x slower) */
#if defined(__SANITIZE_ADDRESS__)
#define EVERY 600
#define SAMPLE 100
#else
#define EVERY 2000
#define SAMPLE 1000
#endif

typedef int (*target_fn)(void *ctx); /* 0 or an error code; frees all it made */

/* Fails each allocation of f in turn (EVERY, SAMPLE). */
static void alloc_faults(const char *name, target_fn f, void *ctx)
{
    CHECK_MSG(f(ctx) == 0, "%s: clean run: %s", name, rkm_last_error()); /* warms lazy tables */
    long base = live_now();
    int fds = n_fds();
    arm(ALLOC, 0);
    int rc = f(ctx);
    long k = disarm(ALLOC);
    CHECK_MSG(rc == 0 && live_now() == base, "%s: the counted run: rc %d, %ld allocations left", name, rc,
              live_now() - base);
    long step = k <= EVERY ? 1 : (k - EVERY) / SAMPLE + 1, tested = 0, errors = 0, tolerated = 0, bad = 0;
    for (long n = 1; n <= k; n += n < EVERY ? 1 : step) {
        rkm_err(0, "%s", "");
        arm(ALLOC, n);
        rc = f(ctx);
        disarm(ALLOC);
        tested++;
        long leaked = live_now() - base;
        int fd_diff = n_fds() - fds;
        if (rc) {
            errors++;
            if (!rkm_last_error()[0] || leaked || fd_diff) {
                if (bad++ < 5)
                    CHECK_MSG(0, "%s: allocation %ld failed: rc %d, message '%s', %ld allocations and %d descriptors left",
                              name, n, rc, rkm_last_error(), leaked, fd_diff);
            }
        } else {
            tolerated++;
            if ((leaked || fd_diff) && bad++ < 5)
                CHECK_MSG(0, "%s: allocation %ld failed, call succeeded, %ld allocations and %d descriptors left",
                          name, n, leaked, fd_diff);
        }
    }
    CHECK_MSG(bad == 0, "%s: %ld bad outcomes", name, bad);
    CHECK_MSG(errors > 0, "%s: no failed allocation gave an error", name);
    printf("%-22s %7ld allocations, %5ld failed in turn: %ld errors, %ld survived\n", name, k, tested, errors,
           tolerated);
}

/* Fails each I/O call of f in turn with err; after each failure check(ctx)
 * must find nothing lost (0). */
static void io_faults(const char *name, target_fn f, target_fn check, void *ctx, int err)
{
    CHECK_MSG(f(ctx) == 0, "%s: clean run: %s", name, rkm_last_error());
    long base = live_now();
    int fds = n_fds();
    arm(IO, 0);
    int rc = f(ctx);
    long k = disarm(IO);
    CHECK_MSG(rc == 0 && k > 0, "%s: counted run: rc %d, %ld I/O calls", name, rc, k);
    io_errno = err;
    long errors = 0, bad = 0;
    for (long n = 1; n <= k; n++) {
        rkm_err(0, "%s", "");
        base = live_now(); /* a call that succeeds may keep what it made (a cache entry) */
        arm(IO, n);
        rc = f(ctx);
        disarm(IO);
        long leaked = rc ? live_now() - base : 0;
        int fd_diff = n_fds() - fds;
        if (rc) errors++;
        int lost = check(ctx);
        if ((rc && !rkm_last_error()[0]) || leaked || fd_diff || lost) {
            if (bad++ < 5)
                CHECK_MSG(0, "%s: I/O call %ld failed (%s): rc %d '%s', %ld allocations, %d descriptors left, check %d",
                          name, n, strerror(err), rc, rkm_last_error(), leaked, fd_diff, lost);
        }
    }
    io_errno = EIO;
    CHECK_MSG(bad == 0, "%s: %ld bad outcomes", name, bad);
    CHECK_MSG(errors > 0, "%s: no failed I/O call gave an error", name);
    printf("%-22s %7ld I/O calls failed in turn (%s): %ld errors\n", name, k, strerror(err), errors);
}

/* ------------------------------------------------------------ targets */

static char tmp[600], gguf_path[700], model_dir[700], vocab_path[1200];

static int t_gguf(void *ctx)
{
    rkm_gguf *g = rkm_gguf_open(ctx);
    if (!g) return RKM_EFORMAT;
    rkm_gguf_close(g);
    return 0;
}

static int t_source(void *ctx)
{
    rkm_source *s = rkm_source_open(ctx);
    if (!s) return RKM_EFORMAT;
    rkm_source_close(s);
    return 0;
}

static const char st_json[] = "{\"__metadata__\":{\"format\":\"pt\"},"
                              "\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                              "\"b.bias\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,24]}}";

static int t_safetensors(void *ctx)
{
    (void)ctx;
    static uint8_t buf[512];
    uint64_t n = sizeof st_json - 1;
    memcpy(buf, &n, 8);
    memcpy(buf + 8, st_json, n);
    rkm_safetensors *s = rkm_safetensors_open_mem(buf, 8 + n + 24);
    if (!s) return RKM_EFORMAT;
    rkm_safetensors_close(s);
    return 0;
}

static int t_manifest(void *ctx)
{
    rkm_model_dir *md = rkm_model_dir_load_manifest(ctx);
    if (!md) return RKM_EFORMAT;
    rkm_model_dir_close(md);
    return 0;
}

static int t_tokenizer(void *ctx)
{
    rkm_gguf *g = rkm_gguf_open(ctx);
    if (!g) return RKM_EFORMAT;
    rkm_tokenizer *t = rkm_tokenizer_from_gguf(g);
    rkm_gguf_close(g);
    if (!t) return RKM_EFORMAT;
    int32_t ids[64];
    const char *text = "Hello, world! 123 \xc3\xa9t\xc3\xa9 <|im_start|>";
    int n = rkm_tokenizer_encode(t, text, strlen(text), ids, 64, 1, 1);
    rkm_tokenizer_free(t);
    return n < 0 ? n : 0;
}

static const char tmpl[] = "{% for m in messages %}{{ '<|' + m.role + '|>' }}{{ m.content | trim }}"
                           "{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}\n{% endfor %}"
                           "{% set ns = namespace(x=0) %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% endfor %}"
                           "{{ ns.x }}{% if add_generation_prompt %}<|assistant|>{% endif %}";

static int t_jinja(void *ctx)
{
    (void)ctx;
    rkm_jinja *t = rkm_jinja_parse(tmpl, sizeof tmpl - 1);
    if (!t) return RKM_EFORMAT;
    cJSON *vars = cJSON_Parse("{\"messages\":[{\"role\":\"user\",\"content\":\" hi \"},{\"role\":\"assistant\","
                              "\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":[1,2]}}}]}],"
                              "\"add_generation_prompt\":true}");
    if (!vars) {
        rkm_jinja_free(t);
        return rkm_err(RKM_ENOMEM, "cJSON: out of memory");
    }
    char *out = rkm_jinja_render(t, vars, NULL, NULL);
    cJSON_Delete(vars);
    rkm_jinja_free(t);
    if (!out) return RKM_EFORMAT;
    free(out);
    return 0;
}

static int t_grammar(void *ctx)
{
    (void)ctx;
    cJSON *schema = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},"
                                "\"n\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]}}},"
                                "\"required\":[\"name\"]}");
    if (!schema) return rkm_err(RKM_ENOMEM, "cJSON: out of memory");
    char *gbnf = rkm_json_schema_to_gbnf(schema);
    cJSON_Delete(schema);
    if (!gbnf) return RKM_EFORMAT;
    rkm_grammar *g = rkm_grammar_parse(gbnf, NULL);
    free(gbnf);
    if (!g) return RKM_EFORMAT;
    rkm_gstate *st = rkm_gstate_new(g);
    const char *text = "{\"name\": \"x\", \"tags\": [\"a\"]}";
    int rc = st ? rkm_gstate_accept(st, text, strlen(text)) : rkm_err(RKM_ENOMEM, "grammar: out of memory");
    if (rc == RKM_EINVAL) rkm_err(rc, "grammar: refused");
    if (!rc && !rkm_gstate_done(st)) rc = rkm_err(RKM_EINVAL, "grammar: not done");
    rkm_gstate_free(st);
    rkm_grammar_free(g);
    return rc;
}

static int t_model(void *ctx)
{
    rkm_model_params p;
    rkm_model_params_default(&p);
    p.n_threads = 2;
    p.lazy_experts = 1; /* no background reads outliving the call */
    rkm_model *m = rkm_model_open(ctx, &p);
    if (!m) return RKM_EFORMAT;
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = 32;
    rkm_session *s = rkm_session_new(m, &sp);
    /* no eval: the kernels' per-thread scratch aborts when it cannot be
     * had (kernels/dispatch.c: its size is bounded by the shapes checked
     * here, at open) */
    int rc = s ? 0 : RKM_ENOMEM;
    rkm_session_free(s);
    rkm_model_close(m);
    return rc;
}

/* I/O: session save and load, manifest writing, the prompt cache */
static rkm_model *g_model;
static rkm_session *g_sess, *g_sess2;
static char sess_path[800], pc_dir[800];
static srv_pcache *g_pc;
static char pc_id[17];
static uint8_t *good_file;
static size_t good_len;

static int same_file(const char *path)
{
    size_t n;
    char *d = rkm_read_file(path, &n);
    int same = d && n == good_len && !memcmp(d, good_file, n);
    free(d);
    return same;
}

/* no temporary left in the directory of path */
static int no_temp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int ok = 1;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".tmp")) ok = 0;
    closedir(d);
    return ok;
}

static int t_save(void *ctx) { return rkm_session_save(g_sess, sess_path); }
static int c_save(void *ctx) { return !(same_file(sess_path) && no_temp(tmp)); }

static int t_load(void *ctx)
{
    int rc = rkm_session_load(g_sess2, sess_path);
    if (!rc && rkm_session_n_past(g_sess2) != rkm_session_n_past(g_sess)) rc = rkm_err(RKM_EFORMAT, "load: wrong n_past");
    return rc;
}

/* after a failed load the session still works: it evaluates from wherever
 * it was left (its tokens are consistent) */
static int c_load(void *ctx)
{
    int n = rkm_session_n_past(g_sess2);
    if (n > 16) rkm_session_truncate(g_sess2, 16), n = 16;
    int32_t id = 5;
    return rkm_session_eval(g_sess2, &id, 1, NULL) != 0 || rkm_session_n_past(g_sess2) != n + 1;
}

static rkm_model_dir *g_md;
static char man_dir[800];
static int t_manifest_write(void *ctx) { return rkm_model_dir_write_manifest(g_md, man_dir); }
static int c_manifest_write(void *ctx)
{
    rkm_model_dir *md = rkm_model_dir_load_manifest(man_dir);
    int ok = md && md->n_tensors == g_md->n_tensors && no_temp(man_dir);
    rkm_model_dir_close(md);
    return !ok;
}

static int t_pc_store(void *ctx)
{
    char id[17];
    return srv_pcache_store(g_pc, "", g_sess, id);
}
/* the entry stored before the faults still loads, and the store that
 * failed left no files behind beyond the entries the index lists */
static int c_pc(void *ctx)
{
    int n, lcp;
    const int32_t *t = rkm_session_tokens(g_sess, &n);
    int idx = srv_pcache_best(g_pc, t, n, &lcp);
    if (idx < 0 || lcp != n) return 1;
    char id[17];
    int saved = fl[IO].on;
    fl[IO].on = 0;
    int rc = srv_pcache_load(g_pc, idx, g_sess2, id);
    fl[IO].on = saved;
    if (rc) return 2;
    int files = 0;
    DIR *d = opendir(pc_dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') files++;
    if (d) closedir(d);
    return files > 2 * srv_pcache_count(g_pc) + 1 ? 3 : 0; /* .kv + .json per entry, and the index */
}

static int t_pc_load(void *ctx)
{
    int n, lcp;
    const int32_t *t = rkm_session_tokens(g_sess, &n);
    int idx = srv_pcache_best(g_pc, t, n, &lcp);
    if (idx < 0) return rkm_err(RKM_ENOENT, "prompt cache: the entry is gone");
    char id[17];
    return srv_pcache_load(g_pc, idx, g_sess2, id);
}

static void io_tests(void)
{
    rkm_model_params p;
    rkm_model_params_default(&p);
    p.n_threads = 2;
    g_model = rkm_model_open(model_dir, &p);
    CHECK_MSG(g_model != NULL, "%s", rkm_last_error());
    if (!g_model) return;
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = 64;
    g_sess = rkm_session_new(g_model, &sp);
    g_sess2 = rkm_session_new(g_model, &sp);
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = (i * 7 + 3) % rkm_model_n_vocab(g_model);
    CHECK(g_sess && g_sess2 && rkm_session_eval(g_sess, ids, 24, NULL) == 0);

    snprintf(sess_path, sizeof sess_path, "%s/s.sess", tmp);
    CHECK(rkm_session_save(g_sess, sess_path) == 0);
    good_file = (uint8_t *)rkm_read_file(sess_path, &good_len);
    io_faults("session save (EIO)", t_save, c_save, NULL, EIO);
    io_faults("session save (ENOSPC)", t_save, c_save, NULL, ENOSPC);
    io_faults("session load (EIO)", t_load, c_load, NULL, EIO);

    g_md = rkm_model_dir_load_manifest(model_dir);
    snprintf(man_dir, sizeof man_dir, "%s/man", tmp);
    test_sh("mkdir -p '%s'", man_dir);
    CHECK(g_md && rkm_model_dir_write_manifest(g_md, man_dir) == 0);
    io_faults("manifest write", t_manifest_write, c_manifest_write, NULL, ENOSPC);

    snprintf(pc_dir, sizeof pc_dir, "%s/pc", tmp);
    g_pc = srv_pcache_open(pc_dir, 0, 0);
    CHECK(g_pc != NULL);
    char id[17];
    CHECK(g_pc && srv_pcache_store(g_pc, "", g_sess, pc_id) == 0);
    io_faults("prompt cache store", t_pc_store, c_pc, NULL, ENOSPC);
    io_faults("prompt cache load", t_pc_load, c_pc, NULL, EIO);
    (void)id;
    srv_pcache_close(g_pc);
    rkm_model_dir_close(g_md);
    free(good_file);
    rkm_session_free(g_sess);
    rkm_session_free(g_sess2);
    rkm_model_close(g_model);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    live = __real_calloc(LIVE_SLOTS, sizeof *live);
    cJSON_Hooks hooks = {__wrap_malloc, __wrap_free};
    cJSON_InitHooks(&hooks);
    snprintf(tmp, sizeof tmp, "%s", test_tmpdir());
    snprintf(gguf_path, sizeof gguf_path, "%s/tiny.gguf", tmp);
    snprintf(model_dir, sizeof model_dir, "%s/tiny.rkmojo", tmp);
    int rc = test_rkmojo(NULL, "synth --preset tiny -o %s --quiet", gguf_path);
    if (rc == 0) rc = test_rkmojo(NULL, "convert %s %s --quiet", gguf_path, model_dir);
    CHECK_MSG(rc == 0, "synth/convert: %d", rc);
    if (rc) return test_done();

    alloc_faults("gguf", t_gguf, gguf_path);
    alloc_faults("source (gguf)", t_source, gguf_path);
    alloc_faults("safetensors", t_safetensors, NULL);
    alloc_faults("manifest", t_manifest, model_dir);
    alloc_faults("jinja", t_jinja, NULL);
    alloc_faults("json schema + grammar", t_grammar, NULL);
    alloc_faults("model open + session", t_model, model_dir);
    const char *shared = test_shared_dir();
    if (shared) {
        snprintf(vocab_path, sizeof vocab_path, "%s/vocab/ggml-vocab-gpt-2.gguf", shared);
        alloc_faults("tokenizer (gpt-2)", t_tokenizer, vocab_path);
    } else {
        printf("tokenizer: ../shared absent: skipped\n");
    }
    io_tests();
    return test_done();
}
