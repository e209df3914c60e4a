/*
 * pull.c - see pull.h.
 *
 * The staging file holds the remote files side by side (segments: one
 * GGUF, or a checkpoint's shards) and is cut into pieces: the file spans
 * of the converter's read ranges (rkm_convert_read_order,
 * rkm_source_file_spans) in file order, overlapping ones and neighbours
 * merged and long ones cut at PIECE_MAX (make_pieces), in file order in
 * pc[] and in read order in order[]. A piece is absent, in flight,
 * present, or used (the converter is done with all its ranges, its pages
 * punched). The readers' fill hook (rkm_gguf_open_fill,
 * rkm_safetensors_open_fill) makes the pieces a read touches present,
 * fetching them itself when no fetch thread has, and moves the cursor
 * (the furthest rank in order[] asked for); the fetch threads take absent
 * pieces in read order from the cursor on while the staged bytes
 * (present, not yet used) and those in flight stay within the window.
 * Before the pieces exist (while the headers are parsed) fill extends the
 * fetched prefix of the read's segment instead.
 *
 * Threads: the converter's threads call fill and consumed; the fetch
 * threads run fetcher(); the segments' prefixes and everything in puller
 * below cv are guarded by mu, with cv signalled whenever a piece changes
 * state or the cursor moves.
 */
#include "convert/pull.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/fetch.h"
#include "format/model_dir.h"
#include "format/safetensors.h"
#include "format/source.h"
#include "util/buf.h"
#include "util/common.h"
#include "util/knobs.h"
#include "util/progress.h"
#include "util/sha256.h"

#define PIECE_MAX (4u << 20)
#define HEADER_STEP (1u << 20)
#define PULL_MAX_CONN 16
#define PAGE 4096u

/* P_SKIP: a resumed pull's piece of an output kept from before: no one
 * fetches it into the staging file (the hasher reads it into memory) unless
 * the converter asks for it after all (an output that did not verify). */
enum { P_ABSENT, P_INFLIGHT, P_PRESENT, P_USED, P_SKIP };

typedef struct {
    uint64_t off, len; /* in the staging file */
    size_t pos;        /* its place in the read order: its first range's */
    size_t rank;       /* its index in order[] */
    uint64_t need;     /* bytes of its ranges the converter has not used yet */
    uint64_t held;     /* bytes of it counted in staged */
    int state;
    int layer;         /* its ranges' (rkm_convert_read's); -2: ranges of several */
    int shared;        /* its ranges overlap or are not exact (rkm_source_file_spans):
                          nothing of it goes before all of it is used */
} piece;

/* One remote file: bytes [base, base + size) of the staging file (a
 * GGUF is one; a safetensors checkpoint's shards lie side by side). */
typedef struct {
    rkm_fetch *f;
    uint64_t base, size;
    uint64_t prefix; /* [base, base + prefix) fetched by the header phase */
    char want[65];   /* its SHA-256 when the server names it */
} segment;

typedef struct {
    segment *seg;
    int n_seg;
    const char *stage;     /* the staging file's path */
    const rkm_source *src; /* once opened: for consumed's spans */
    int fd;
    uint64_t size, window; /* size: all segments' */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    piece *pc;       /* by file offset; NULL while the header is parsed */
    size_t n_pc;
    size_t *order;   /* pc index by read position */
    size_t cursor, next;
    uint64_t staged, inflight, peak, fetched;
    int punch;       /* 1 while fallocate punches holes here */
    int err, stop;
    char msg[600];
    rkm_progress prog;
    const rkm_pull_opts *o; /* its on_progress */
    /* The whole file's SHA-256 when the server names it (want): the hasher
     * thread reads the staging file in file order up to hc, fetching the
     * bytes no piece holds; a piece's pages are punched only once hashed. */
    int hashing, hash_stop;
    int hash_waits;       /* the hasher waits for the piece at hc to be fetched */
    uint64_t unhashed;    /* bytes fetched into the staging file the hasher has not read yet */
    uint64_t used_ahead;  /* of those, the bytes of pieces the converter is done with (kept for the hasher) */
    rkm_sha256 sha;       /* the hasher's own, of hc's segment (it updates it without mu) */
    rkm_sha256 sha_at_hc; /* its copy once hc moved: what a progress record keeps */
    uint64_t hc;
} puller;

/* The segment holding staging offset off (the last one past the end). */
static segment *seg_at(const puller *p, uint64_t off)
{
    int lo = 0, hi = p->n_seg - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (p->seg[mid].base <= off) lo = mid;
        else hi = mid - 1;
    }
    return &p->seg[lo];
}

/* Bytes [off, off + n) of the staging file, inside one segment, from its server. */
static int fetch_to_stage(const puller *p, uint64_t off, uint64_t n)
{
    segment *g = seg_at(p, off);
    return rkm_fetch_range(g->f, off - g->base, n, p->fd, off);
}

/* The bytes [start, end) are not needed any more: punched, but only below
 * the hash cursor while hashing. */
static void punch(puller *p, uint64_t start, uint64_t end);
static void release(puller *p, uint64_t start, uint64_t end)
{
    if (p->hashing) end = RKM_MIN(end, p->hc);
    if (end > start) punch(p, start, end);
}

/* The bar and the caller's callback, under mu. */
static void progressed(puller *p, uint64_t bytes)
{
    rkm_progress_add(&p->prog, bytes);
    if (p->o && p->o->on_progress)
        p->o->on_progress(p->o->user, p->prog.done, p->prog.total, rkm_fetch_etag(p->seg[0].f));
}

/* While hashing, the staging file holds every fetched byte until the
 * hasher has read it: when that backlog passes the window, fetching waits
 * for the hasher, unless the hasher itself waits for a piece to come (it
 * would never drain). The pieces the converter used ahead of the hasher
 * (the resident tensors of later layers, read first) do not count: the
 * hasher reaches them only in file order, and counting them kept the
 * backlog above a 256 MiB window for a whole 18 GB pull, one piece in
 * flight at a time (177 against 349 MB/s with them left out, VERIFY=1
 * bench/bench-pull.sh on an 18.56 GB GGUF). */
static int hash_backlog(const puller *p, uint64_t more)
{
    const uint64_t backlog = p->unhashed - RKM_MIN(p->unhashed, p->used_ahead);
    return p->hashing && p->hc < p->size && !p->hash_waits && backlog > 0 && backlog + more > p->window;
}

static void account(puller *p, piece *q)
{
    if (p->hashing && q->off + q->len > p->hc) p->unhashed += q->len; /* not a piece fetched again behind it */
    q->state = P_PRESENT;
    p->staged += q->len;
    q->held = q->len;
    if (p->staged > p->peak) p->peak = p->staged;
    p->fetched += q->len;
    progressed(p, q->len);
}

static void fail(puller *p, int rc)
{
    if (!p->err) {
        p->err = rc;
        snprintf(p->msg, sizeof p->msg, "%s", rkm_last_error());
    }
    pthread_cond_broadcast(&p->cv);
}

/* First piece whose end is past off. */
static size_t piece_at(const puller *p, uint64_t off)
{
    size_t lo = 0, hi = p->n_pc;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->pc[mid].off + p->pc[mid].len <= off) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Fetches piece q into the staging file (mu held, released during the
 * transfer): present after, or absent again and the pull failed. A fetch
 * thread's (ahead) counts in the window while in flight. */
static int fetch_piece(puller *p, piece *q, int ahead)
{
    q->state = P_INFLIGHT;
    if (ahead) p->inflight += q->len;
    pthread_mutex_unlock(&p->mu);
    int rc = fetch_to_stage(p, q->off, q->len);
    pthread_mutex_lock(&p->mu);
    if (ahead) p->inflight -= q->len;
    if (rc) {
        q->state = P_ABSENT;
        fail(p, rc);
    } else {
        account(p, q);
    }
    pthread_cond_broadcast(&p->cv);
    return rc;
}

static int fill(void *user, uint64_t off, uint64_t n)
{
    puller *p = user;
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    segment *g = seg_at(p, off);
    if (!p->pc) { /* the header phase: one thread, a growing prefix of each segment */
        while (!rc && off + n > g->base + g->prefix) {
            uint64_t end = RKM_MIN(g->size, RKM_MAX(off + n - g->base, g->prefix + HEADER_STEP));
            rc = rkm_fetch_range(g->f, g->prefix, end - g->prefix, p->fd, g->base + g->prefix);
            if (!rc) {
                progressed(p, end - g->prefix);
                p->fetched += end - g->prefix;
                g->prefix = end;
            }
        }
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    uint64_t pos = off, end = off + n;
    size_t i = piece_at(p, off);
    while (pos < end && !rc) {
        if (p->err) {
            rc = rkm_err(p->err, "%s", p->msg);
            break;
        }
        if (i < p->n_pc && p->pc[i].off <= pos) {
            piece *q = &p->pc[i];
            if (q->rank > p->cursor || p->cursor == (size_t)-1) {
                p->cursor = q->rank;
                if (p->next < p->cursor) p->next = p->cursor;
                pthread_cond_broadcast(&p->cv);
            }
            if (q->state == P_INFLIGHT) {
                pthread_cond_wait(&p->cv, &p->mu);
                continue;
            }
            if (q->state != P_PRESENT && hash_backlog(p, q->len)) {
                pthread_cond_wait(&p->cv, &p->mu);
                continue;
            }
            /* not fetched yet, or used (or kept) and asked again */
            if (q->state != P_PRESENT && (rc = fetch_piece(p, q, 0))) break;
            pos = q->off + q->len;
            i++;
        } else { /* bytes outside every piece: read once, straight through */
            uint64_t gend = i < p->n_pc ? RKM_MIN(end, p->pc[i].off) : end;
            uint64_t from = RKM_MAX(pos, g->base + g->prefix);
            if (from < gend) {
                pthread_mutex_unlock(&p->mu);
                rc = fetch_to_stage(p, from, gend - from);
                pthread_mutex_lock(&p->mu);
                if (!rc) p->fetched += gend - from;
            }
            pos = gend;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

static void *fetcher(void *arg)
{
    puller *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop && !p->err) {
        if (p->cursor == (size_t)-1) { /* the converter's first read says where it starts (a resumed run skips) */
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        size_t k = RKM_MAX(p->next, p->cursor);
        while (k < p->n_pc && p->pc[p->order[k]].state != P_ABSENT) k++;
        p->next = k;
        if (k >= p->n_pc) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        piece *q = &p->pc[p->order[k]];
        if ((p->staged + p->inflight > 0 && p->staged + p->inflight + q->len > p->window) ||
            hash_backlog(p, p->inflight + q->len)) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        p->next = k + 1;
        if (fetch_piece(p, q, 1)) break;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void punch(puller *p, uint64_t start, uint64_t end)
{
    const uint64_t a = RKM_ALIGN_UP(start, PAGE), b = end / PAGE * PAGE;
    if (p->punch && b > a &&
        fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a, (off_t)(b - a)) != 0)
        p->punch = 0; /* a file system without holes: the staging file keeps its bytes */
}

/* The converter is done with [off, off + len) of t: its pieces' needs
 * go down by the same spans make_pieces added them for. */
static void consumed(void *user, const rkm_src_tensor *t, uint64_t off, uint64_t len)
{
    puller *p = user;
    rkm_file_span sp[2];
    int exact;
    const int ns = rkm_source_file_spans(p->src, t, off, len, sp, &exact);
    pthread_mutex_lock(&p->mu);
    for (int k = 0; k < ns; k++) {
        const uint64_t start = sp[k].off, end = start + sp[k].len;
        for (size_t i = piece_at(p, start); i < p->n_pc && p->pc[i].off < end; i++) {
            piece *q = &p->pc[i];
            const uint64_t ov = RKM_MIN(end, q->off + q->len) - RKM_MAX(start, q->off);
            q->need -= RKM_MIN(q->need, ov);
            const uint64_t drop = q->need ? RKM_MIN(q->held, ov) : q->held;
            q->held -= drop;
            p->staged -= drop;
            if (!q->need && q->state != P_INFLIGHT) {
                if (p->hashing && q->state == P_PRESENT && q->off + q->len > p->hc)
                    p->used_ahead += q->off + q->len - RKM_MAX(q->off, p->hc);
                q->state = P_USED;
                release(p, q->off, q->off + q->len); /* its padding too */
            } else if (!q->shared) {
                /* the whole pages of the range go now; a page shared with
                 * bytes still needed stays until its piece is used up */
                release(p, RKM_MAX(start, q->off), RKM_MIN(end, q->off + q->len));
            }
        }
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

#define HASH_STEP (4u << 20)

/* The hasher: the file in order, from hc to its end. A piece at hc waits
 * until it is fetched; bytes outside every piece (padding, tensors the
 * converter skips, the header past the prefix) and a resumed pull's kept
 * pieces are fetched here, into memory. */
static void *hasher(void *arg)
{
    puller *p = arg;
    uint8_t *buf = malloc(HASH_STEP);
    pthread_mutex_lock(&p->mu);
    while (buf && !p->hash_stop && !p->err && p->hc < p->size) {
        const uint64_t at = p->hc;
        segment *g = seg_at(p, at);
        size_t i = piece_at(p, at);
        uint64_t end;
        int gap = 0, in_piece = 0;
        if (i < p->n_pc && p->pc[i].off <= at) {
            const piece *q = &p->pc[i];
            if (q->state == P_SKIP) gap = 1;
            else if (q->state != P_PRESENT && q->state != P_USED) {
                if (!p->hash_waits) {
                    p->hash_waits = 1; /* fetching must go on: this piece comes from it */
                    pthread_cond_broadcast(&p->cv);
                }
                pthread_cond_wait(&p->cv, &p->mu);
                continue;
            }
            p->hash_waits = 0;
            in_piece = !gap;
            end = q->off + q->len;
        } else {
            end = i < p->n_pc ? p->pc[i].off : p->size;
            if (at < g->base + g->prefix) end = RKM_MIN(end, g->base + g->prefix);
            else gap = 1;
        }
        end = RKM_MIN(RKM_MIN(end, at + HASH_STEP), g->base + g->size);
        pthread_mutex_unlock(&p->mu);
        /* bytes not in the staging file come into memory, never to disk */
        int rc = gap ? rkm_fetch_range_mem(g->f, at - g->base, end - at, buf)
                     : rkm_pread_all(p->fd, buf, (size_t)(end - at), at, "pull staging file");
        if (!rc) rkm_sha256_update(&p->sha, buf, (size_t)(end - at));
        /* a segment hashed whole: its SHA-256 the one its server named */
        if (!rc && end == g->base + g->size) {
            char got[65];
            rkm_sha256_final(&p->sha, got);
            if (strcmp(got, g->want))
                rc = rkm_err(RKM_ECHECKSUM, "%s: the downloaded file's SHA-256 is %s, the server names %s: the download is corrupt",
                             rkm_fetch_final_url(g->f), got, g->want);
            rkm_sha256_init(&p->sha);
        }
        pthread_mutex_lock(&p->mu);
        if (rc) {
            fail(p, rc);
            break;
        }
        if (gap) p->fetched += end - at;
        if (in_piece) {
            p->unhashed -= RKM_MIN(p->unhashed, end - at);
            if (p->pc[i].state == P_USED) p->used_ahead -= RKM_MIN(p->used_ahead, end - at);
        }
        p->hc = end;
        p->sha_at_hc = p->sha;
        /* what the converter used up behind the cursor goes now */
        const uint64_t from = at / PAGE * PAGE;
        for (size_t k = piece_at(p, from); k < p->n_pc && p->pc[k].off < end; k++)
            if (p->pc[k].state == P_USED) punch(p, p->pc[k].off, RKM_MIN(end, p->pc[k].off + p->pc[k].len));
        pthread_cond_broadcast(&p->cv);
    }
    if (!buf) fail(p, rkm_err(RKM_ENOMEM, "out of memory"));
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    free(buf);
    return NULL;
}

typedef struct {
    uint64_t off, len; /* in the staging file */
    size_t pos;
    int layer; /* rkm_convert_read's */
    int exact; /* rkm_source_file_spans' */
} range;

static int range_by_off(const void *x, const void *y)
{
    const range *a = x, *b = y;
    return a->off < b->off ? -1 : a->off > b->off;
}

static int piece_by_pos(const void *x, const void *y, void *arg)
{
    const piece *pc = arg, *a = &pc[*(const size_t *)x], *b = &pc[*(const size_t *)y];
    if (a->pos != b->pos) return a->pos < b->pos ? -1 : 1;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* The pieces: the read order's ranges (their spans in the staging file)
 * in file order. Ranges that overlap (several tensors read from one
 * stored one, rkm_source_file_spans) form one run, whose pieces are
 * shared; neighbours (at most MERGE_GAP apart, in one segment, both
 * resident or both one layer's experts: used up in the same pass) join a
 * run up to PIECE_MAX, so the experts' parts of a fused tensor travel
 * several to a request. A run is cut into pieces of at most PIECE_MAX,
 * each needing its ranges' bytes inside it; a piece's place in the read
 * order is its earliest range's. */
#define MERGE_GAP (64u << 10)
static int make_pieces(puller *p, const rkm_source *s)
{
    rkm_convert_read *rd;
    size_t n_rd;
    int rc = rkm_convert_read_order(s, &rd, &n_rd);
    if (rc) return rc;
    range *r = calloc(2 * n_rd + 1, sizeof *r);
    if (!r) {
        free(rd);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    size_t nr = 0;
    for (size_t i = 0; i < n_rd; i++) {
        rkm_file_span sp[2];
        int exact;
        const int ns = rkm_source_file_spans(s, rd[i].t, rd[i].off, rd[i].len, sp, &exact);
        for (int k = 0; k < ns; k++)
            if (sp[k].len) r[nr++] = (range){sp[k].off, sp[k].len, i, rd[i].layer, exact};
    }
    free(rd);
    qsort(r, nr, sizeof *r, range_by_off);
    /* runs [i, j) of r: their extent, then cut */
    size_t n_max = 1;
    for (size_t i = 0; i < nr; i++) n_max += 1 + (size_t)(r[i].len / PIECE_MAX);
    piece *pc = calloc(n_max, sizeof *pc);
    size_t *order = calloc(n_max, sizeof *order);
    if (!pc || !order) {
        free(r);
        free(pc);
        free(order);
        return rkm_err(RKM_ENOMEM, "out of memory");
    }
    size_t n = 0;
    for (size_t i = 0, j; i < nr; i = j) {
        uint64_t lo = r[i].off, hi = r[i].off + r[i].len;
        int shared = !r[i].exact, layer = r[i].layer;
        const segment *g = seg_at(p, lo);
        for (j = i + 1; j < nr; j++) {
            const uint64_t e = r[j].off + r[j].len;
            if (r[j].off < hi) shared = 1; /* overlaps: always one run */
            else if (!(r[j].layer == r[j - 1].layer && r[j].off - hi <= MERGE_GAP && RKM_MAX(e, hi) - lo <= PIECE_MAX &&
                       r[j].off < g->base + g->size))
                break;
            shared |= !r[j].exact;
            if (r[j].layer != layer) layer = -2;
            hi = RKM_MAX(hi, e);
        }
        const size_t first = n;
        for (uint64_t o = lo; o < hi; o += PIECE_MAX)
            pc[n++] = (piece){.off = o, .len = RKM_MIN((uint64_t)PIECE_MAX, hi - o), .pos = (size_t)-1,
                              .state = P_ABSENT, .layer = layer, .shared = shared};
        for (size_t k = i; k < j; k++)
            for (size_t q = first + (size_t)((r[k].off - lo) / PIECE_MAX); q < n && pc[q].off < r[k].off + r[k].len; q++) {
                pc[q].need += RKM_MIN(r[k].off + r[k].len, pc[q].off + pc[q].len) - RKM_MAX(r[k].off, pc[q].off);
                pc[q].pos = RKM_MIN(pc[q].pos, r[k].pos);
            }
    }
    free(r);
    uint64_t todo = 0;
    for (int k = 0; k < p->n_seg; k++) todo += p->seg[k].prefix;
    for (size_t i = 0; i < n; i++) {
        order[i] = i;
        /* pieces wholly inside the header phase's prefix are there already */
        const segment *g = seg_at(p, pc[i].off);
        if (pc[i].off + pc[i].len <= g->base + g->prefix) {
            pc[i].state = P_PRESENT;
            pc[i].held = pc[i].len;
            p->staged += pc[i].len;
            if (p->hashing) p->unhashed += pc[i].len;
        } else {
            todo += pc[i].len;
        }
    }
    qsort_r(order, n, sizeof *order, piece_by_pos, pc);
    for (size_t k = 0; k < n; k++) pc[order[k]].rank = k;
    pthread_mutex_lock(&p->mu);
    p->prog.total = todo; /* the bar counts what this pull has to receive */
    p->pc = pc;
    p->n_pc = n;
    p->order = order;
    pthread_mutex_unlock(&p->mu);
    return 0;
}

/* The hash's state, kept with convert's progress: "HC STATE". */
static const char *hash_note(void *user, char *buf, size_t cap)
{
    puller *p = user;
    if (!p->hashing) return NULL;
    char st[RKM_SHA256_STATE_CHARS];
    pthread_mutex_lock(&p->mu);
    rkm_sha256_save(&p->sha_at_hc, st);
    snprintf(buf, cap, "sha256 %llu %s", (unsigned long long)p->hc, st);
    pthread_mutex_unlock(&p->mu);
    return buf;
}

/* A resumed pull: the hash where the interrupted one left it (0), or -1
 * when its progress holds none. */
static int hash_resume(puller *p, const char *note)
{
    unsigned long long hc;
    int used = 0;
    if (!note || sscanf(note, "sha256 %llu %n", &hc, &used) != 1 || !used || hc > p->size ||
        rkm_sha256_load(&p->sha, note + used) || p->sha.n != (hc == p->size ? 0 : hc - seg_at(p, hc)->base))
        return -1;
    p->hc = hc;
    p->sha_at_hc = p->sha;
    return 0;
}

/* A resumed pull's pieces of the outputs prev kept (resident.bin, the
 * expert layers it lists) are not fetched again. */
static void skip_kept(puller *p, const rkm_model_dir *prev)
{
    for (size_t i = 0; i < p->n_pc; i++) {
        piece *q = &p->pc[i];
        int kept = q->layer == -1 ? prev->n_tensors > 0 : 0;
        for (int l = 0; l < prev->n_expert_layers && !kept; l++) kept = prev->experts[l].layer == q->layer;
        if (kept && q->state == P_ABSENT) {
            q->state = P_SKIP;
            p->prog.total -= q->len;
        }
    }
}

/* convert's last step before the manifest: every file hashed, each
 * SHA-256 the one its server named (the hasher compares each as it ends). */
static int check_sha(void *user)
{
    puller *p = user;
    if (!p->hashing) return 0;
    pthread_mutex_lock(&p->mu);
    while (p->hc < p->size && !p->err) pthread_cond_wait(&p->cv, &p->mu);
    int rc = p->err ? rkm_err(p->err, "%s", p->msg) : 0;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

static int has_prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

static const char *hf_endpoint(void)
{
    const char *e = rkm_knob(RKM_KNOB_HF_ENDPOINT);
    return e ? e : "https://huggingface.co";
}

/* hf://ORG/REPO[@REV][:FILE]: "ORG/REPO" into name, the revision into rev
 * (main), *file at FILE or NULL. */
static int parse_hf(const char *source, char *name, size_t name_cap, char *rev, size_t rev_cap, const char **file)
{
    const char *repo = source + 5, *colon = strchr(repo, ':');
    *file = colon && colon[1] ? colon + 1 : NULL;
    size_t rl = colon ? (size_t)(colon - repo) : strlen(repo);
    if (rl >= name_cap) return rkm_err(RKM_EINVAL, "%s: repository name too long", source);
    memcpy(name, repo, rl);
    name[rl] = 0;
    snprintf(rev, rev_cap, "main");
    char *at = strchr(name, '@');
    if (at) {
        snprintf(rev, rev_cap, "%s", at + 1);
        *at = 0;
    }
    const char *slash = strchr(name, '/');
    if ((colon && !colon[1]) || !slash || slash == name || !slash[1] || strchr(slash + 1, '/') || !rev[0] ||
        strstr(name, "..") || strchr(rev, '/'))
        return rkm_err(RKM_EINVAL, "%s: expected hf://ORG/REPO[@REVISION][:FILE]", source);
    return 0;
}

/* $HF_ENDPOINT/ORG/REPO/resolve/REV/FILE (FILE may be ""); malloc'd. */
static char *hf_resolve(const char *name, const char *rev, const char *file)
{
    const char *ep = hf_endpoint();
    size_t el = strlen(ep);
    while (el > 0 && ep[el - 1] == '/') el--;
    size_t n = el + strlen(name) + strlen(rev) + strlen(file) + 32;
    char *u = malloc(n);
    if (!u) rkm_err(RKM_ENOMEM, "out of memory");
    else snprintf(u, n, "%.*s/%s/resolve/%s/%s", (int)el, ep, name, rev, file);
    return u;
}

char *rkm_pull_url(const char *source)
{
    if (has_prefix(source, "http://") || has_prefix(source, "https://")) {
        char *u = strdup(source);
        if (!u) rkm_err(RKM_ENOMEM, "out of memory");
        return u;
    }
    if (!has_prefix(source, "hf://")) {
        rkm_err(RKM_EINVAL, "%s: not a URL (http://, https:// or hf://ORG/REPO[:FILE])", source);
        return NULL;
    }
    char name[512], rev[128];
    const char *file;
    if (parse_hf(source, name, sizeof name, rev, sizeof rev, &file)) return NULL;
    return hf_resolve(name, rev, file ? file : "");
}

int rkm_pull_model_name(const char *source, char *name, size_t cap)
{
    const char *q = source + strcspn(source, "?#"), *b = q;
    while (b > source && b[-1] != '/' && b[-1] != ':') b--;
    size_t n = (size_t)(q - b);
    if (n > 5 && !strncmp(q - 5, ".gguf", 5)) n -= 5;
    if (!n || n >= cap) return -1;
    memcpy(name, b, n);
    name[n] = 0;
    return 0;
}

/* The staging file's name: the URL path's last part (the converter
 * records it in the manifest, as it does the file name it converts). */
static void file_name(const char *url, char *out, size_t cap)
{
    const char *q = url + strcspn(url, "?#");
    const char *b = q;
    while (b > url && b[-1] != '/') b--;
    size_t n = (size_t)(q - b);
    if (!n || n >= cap || (n == 1 && *b == '.') || (n == 2 && !strncmp(b, "..", 2)) || strstr(url, "://") + 3 > b)
        snprintf(out, cap, "model.gguf");
    else {
        memcpy(out, b, n);
        out[n] = 0;
    }
}

/* ------------------------------------------- a safetensors checkpoint */
/* What a pull of hf://ORG/REPO fetches whole before the shards: config.json
 * (required), the shard index and the tokenizer's and generation's files
 * (each where the repository has it). */
static const char *const hf_small[] = {"config.json", "model.safetensors.index.json", "tokenizer.json",
                                       "tokenizer_config.json", "chat_template.jinja", "generation_config.json"};
#define HF_SMALL_MAX (64u << 20)

/* One small file of the repository into path: 0, 1 when it is absent
 * (a 404), or an error. */
static int fetch_small(const char *url, const rkm_fetch_opts *fo, const char *path)
{
    int rc;
    rkm_fetch *f = rkm_fetch_open(url, fo, &rc);
    if (!f) return rc == RKM_ENOENT ? 1 : rc;
    const uint64_t n = rkm_fetch_size(f);
    char *buf = n <= HF_SMALL_MAX ? malloc(n ? n : 1) : NULL;
    if (n > HF_SMALL_MAX) rc = rkm_err(RKM_EFORMAT, "%s: %llu bytes is too large for a model's %s", url,
                                       (unsigned long long)n, strrchr(path, '/') + 1);
    else if (!buf) rc = rkm_err(RKM_ENOMEM, "out of memory");
    else rc = rkm_fetch_range_mem(f, 0, n, buf);
    if (!rc) rc = rkm_write_file_atomic(path, buf, n);
    free(buf);
    rkm_fetch_close(f);
    return rc;
}

/* The shards the checkpoint's index names (rkm_hf_index_shards), or the
 * one model.safetensors without an index; each a plain name, safe in a
 * URL's path. */
static int hf_shards(const char *dir, char ***names, int *n)
{
    int rc = rkm_hf_index_shards(dir, names, n);
    if (rc == RKM_ENOENT) {
        char **v = malloc(sizeof *v);
        if (!v || !(v[0] = strdup("model.safetensors"))) {
            free(v);
            return rkm_err(RKM_ENOMEM, "out of memory");
        }
        *names = v;
        *n = 1;
        return 0;
    }
    for (int i = 0; i < *n && !rc; i++) {
        const char *sn = (*names)[i];
        if (strchr(sn, '\\') || !strcmp(sn, "..") || strpbrk(sn, "?#"))
            rc = rkm_err(RKM_EFORMAT, "model.safetensors.index.json: shard name '%s' is not a plain file name", sn);
    }
    if (rc) {
        for (int i = 0; i < *n; i++) free((*names)[i]);
        free(*names);
        *names = NULL;
        *n = 0;
    }
    return rc;
}

static struct rkm_safetensors *open_shard(void *user, int i, const char *name)
{
    puller *p = user;
    return rkm_safetensors_open_fill(p->stage, name, p->seg[i].base, p->seg[i].size, fill, p);
}

/* ------------------------------------------------------------- the pull */
/* source names either one GGUF (url) or a repository's safetensors
 * checkpoint (hf_name / hf_rev: its small files into OUT/.pull/hf, then
 * its shards as the segments). */
static int pull_remote(const char *source, const char *url, const char *hf_name, const char *hf_rev, const char *out,
                       const rkm_pull_opts *o, rkm_pull_stats *st)
{
    const char *token = o ? o->token : NULL;
    const char *ep = hf_endpoint();
    if (!token && (has_prefix(source, "hf://") || (url && has_prefix(url, ep)))) token = rkm_knob(RKM_KNOB_HF_TOKEN);
    rkm_fetch_opts fo = {.token = token, .cancel = o ? o->cancel : NULL,
                         .stall_s = (double)rkm_knob_int(RKM_KNOB_PULL_STALL, 0)};
    puller p = {.fd = -1, .cursor = (size_t)-1, .punch = 1, .o = o};
    p.window = o && o->window ? o->window : (256ull << 20);
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    char name[256], *dir = rkm_path_join(out, ".pull"), *hfdir = NULL, **shards = NULL;
    int n_shards = 0, small_got[RKM_ARRAY_LEN(hf_small)] = {0};
    int rc = dir ? rkm_mkdir_p(dir) : rkm_err(RKM_ENOMEM, "out of memory");
    /* a checkpoint: its small files, then the shards' names */
    if (!rc && hf_name) {
        hfdir = rkm_path_join(dir, "hf");
        rc = hfdir ? rkm_mkdir_p(hfdir) : rkm_err(RKM_ENOMEM, "out of memory");
        for (size_t i = 0; i < RKM_ARRAY_LEN(hf_small) && !rc; i++) {
            char *u = hf_resolve(hf_name, hf_rev, hf_small[i]), *fp = rkm_path_join(hfdir, hf_small[i]);
            rc = u && fp ? fetch_small(u, &fo, fp) : rkm_err(RKM_ENOMEM, "out of memory");
            if (rc == 1) rc = 0;
            else if (!rc) small_got[i] = 1;
            if (rc == 0 && i == 0 && !small_got[0])
                rc = rkm_err(RKM_ENOENT,
                             "%s: the repository has no config.json, so no safetensors checkpoint; for a GGUF file of it, "
                             "name the file: hf://%s:FILE.gguf",
                             u, hf_name);
            free(u);
            free(fp);
        }
        if (!rc) rc = hf_shards(hfdir, &shards, &n_shards);
    }
    /* the segments: one remote file each */
    const int n_seg = hf_name ? n_shards : 1;
    if (!rc) {
        p.seg = calloc((size_t)RKM_MAX(n_seg, 1), sizeof *p.seg);
        if (!p.seg) rc = rkm_err(RKM_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n_seg && !rc; i++) {
        char *u = hf_name ? hf_resolve(hf_name, hf_rev, shards[i]) : strdup(url);
        if (!u) rc = rkm_err(RKM_ENOMEM, "out of memory");
        else if ((p.seg[i].f = rkm_fetch_open(u, &fo, &rc))) {
            p.seg[i].base = p.size;
            p.seg[i].size = rkm_fetch_size(p.seg[i].f);
            p.size += p.seg[i].size;
            snprintf(p.seg[i].want, sizeof p.seg[i].want, "%s", rkm_fetch_sha256(p.seg[i].f));
            p.n_seg++;
        }
        free(u);
    }
    rkm_progress_init(&p.prog, o ? o->progress : NULL, "pull", p.size);
    char *stage = NULL;
    if (hf_name) snprintf(name, sizeof name, "shards");
    else file_name(url, name, sizeof name);
    if (!rc) stage = rkm_path_join(dir, name);
    if (!rc && !stage) rc = rkm_err(RKM_ENOMEM, "out of memory");
    if (!rc) {
        p.stage = stage;
        p.fd = open(stage, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (p.fd < 0) rc = rkm_err(RKM_EIO, "%s: %s", stage, strerror(errno));
        else if (ftruncate(p.fd, (off_t)p.size) != 0) rc = rkm_err(RKM_EIO, "%s: %s", stage, strerror(errno));
    }
    rkm_convert_opts co = o ? o->conv : (rkm_convert_opts){0};
    /* the resume key: the source, each file's size and ETag, the options */
    rkm_buf key = RKM_BUF_INIT;
    if (hf_name) rkm_buf_addf(&key, "pull 2 | hf://%s@%s", hf_name, hf_rev);
    else rkm_buf_addf(&key, "pull 1 | %s", url);
    for (int i = 0; i < p.n_seg; i++) {
        if (hf_name) rkm_buf_addf(&key, " | %s", shards[i]);
        rkm_buf_addf(&key, " | %llu bytes | ETag %s", (unsigned long long)p.seg[i].size, rkm_fetch_etag(p.seg[i].f));
    }
    for (size_t i = 0; hf_name && i < RKM_ARRAY_LEN(hf_small); i++) /* the small files as they were fetched */
        if (small_got[i]) {
            char *fp = rkm_path_join(hfdir, hf_small[i]);
            size_t len = 0;
            char *b = fp ? rkm_read_file(fp, &len) : NULL;
            char h[65] = "";
            if (b) {
                rkm_sha256 hs;
                rkm_sha256_init(&hs);
                rkm_sha256_update(&hs, b, len);
                rkm_sha256_final(&hs, h);
            }
            rkm_buf_addf(&key, " | %s %s", hf_small[i], h);
            free(b);
            free(fp);
        }
    rkm_buf_addf(&key, " | --quant %s --target %s --expert-layout %s", co.quant ? co.quant : "q8_0",
                 co.target ? co.target : "cpu", co.plain_experts ? "plain" : "packed");
    char *keys = rkm_buf_take(&key);
    if (!rc && !keys) rc = rkm_err(RKM_ENOMEM, "out of memory");
    /* each file's SHA-256 is checked when its server names it (all of
     * them must), on a whole pull (a resumed one has punched what it
     * hashed before) */
    int other = 0, verify = 0, named = p.n_seg > 0;
    for (int i = 0; i < p.n_seg; i++) named &= p.seg[i].want[0] != 0;
    char *note = NULL;
    rkm_model_dir *prev = rc ? NULL : rkm_model_dir_load_progress(out, keys, &other, &note);
    if (!rc && named) {
        rkm_sha256_init(&p.sha);
        p.sha_at_hc = p.sha;
        verify = prev ? hash_resume(&p, note) : 1;
        if (verify == 0) verify = 1;
    }
    free(note);
    if (verify > 0) p.hashing = 1;
    rkm_source *s = NULL;
    if (!rc) {
        s = hf_name ? rkm_source_open_hf_shards(hfdir, n_shards, (const char *const *)shards, open_shard, &p)
                    : rkm_source_open_gguf_fill(stage, fill, &p);
        if (!s) rc = rkm_err_prefix(RKM_EFORMAT, "%s", hf_name ? source : url);
    }
    if (!rc && hf_name) { /* the manifest names the repository, not the staging directory */
        char *d = malloc(strlen(hf_name) + strlen(hf_rev) + 8);
        if (!d) rc = rkm_err(RKM_ENOMEM, "out of memory");
        else {
            sprintf(d, "hf:%s@%s", hf_name, hf_rev);
            free(s->desc);
            s->desc = d;
        }
    }
    p.src = s;
    if (!rc) rc = make_pieces(&p, s);
    if (!rc && prev) skip_kept(&p, prev);
    rkm_model_dir_close(prev);
    int nth = o && o->connections > 0 ? RKM_MIN(o->connections, PULL_MAX_CONN) : 4;
    pthread_t th[PULL_MAX_CONN + 1];
    int started = 0, hash_started = 0;
    for (int i = 0; i < nth && !rc; i++)
        if (pthread_create(&th[started], NULL, fetcher, &p) == 0) started++;
    if (!rc && p.hashing) {
        if (pthread_create(&th[started], NULL, hasher, &p) == 0) hash_started = 1;
        else rc = rkm_err(RKM_ENOMEM, "cannot start a thread");
    }
    if (!rc) {
        co.progress = NULL;
        co.consumed = consumed;
        co.before_manifest = check_sha;
        co.progress_note = hash_note;
        co.user = &p;
        co.resume_key = keys;
        co.resumed = st ? &st->resumed : NULL;
        rc = rkm_convert_source(s, hf_name ? source : stage, out, &co);
        /* a corrupt download: nothing of it is kept for a resume */
        if (rc == RKM_ECHECKSUM && p.hashing) rkm_model_dir_remove_progress(out);
    }
    pthread_mutex_lock(&p.mu);
    p.stop = p.hash_stop = 1;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    for (int i = 0; i < started + hash_started; i++) pthread_join(th[i], NULL);
    if (!rc && p.err) rc = rkm_err(p.err, "%s", p.msg);
    if (!rc) rkm_progress_done(&p.prog);
    else if (p.prog.out && p.prog.tty) fputc('\n', p.prog.out);
    if (st) {
        st->source_bytes = p.size;
        st->fetched_bytes = p.fetched;
        st->peak_staged = p.peak;
        st->punched = p.punch;
        st->verified = verify;
    }
    rkm_source_close(s);
    if (p.fd >= 0) close(p.fd);
    if (stage) unlink(stage);
    for (size_t i = 0; hfdir && i < RKM_ARRAY_LEN(hf_small); i++) {
        char *fp = rkm_path_join(hfdir, hf_small[i]);
        if (fp) unlink(fp);
        free(fp);
    }
    if (hfdir) rmdir(hfdir);
    if (dir) rmdir(dir);
    if (rc) rmdir(out); /* only if the failed pull left it empty */
    free(stage);
    free(dir);
    free(hfdir);
    free(keys);
    for (int i = 0; i < n_shards; i++) free(shards[i]);
    free(shards);
    for (int i = 0; i < p.n_seg; i++) rkm_fetch_close(p.seg[i].f);
    free(p.seg);
    free(p.pc);
    free(p.order);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    return rc;
}

int rkm_pull(const char *source, const char *out, const rkm_pull_opts *o, rkm_pull_stats *st)
{
    if (st) memset(st, 0, sizeof *st);
    int rc = rkm_convert_check_opts(o ? &o->conv : NULL);
    if (rc) return rc;
    if (!strstr(source, "://")) { /* a local file or directory: converted as it is */
        rkm_convert_opts co = o ? o->conv : (rkm_convert_opts){0};
        co.progress = o ? o->progress : NULL;
        return rkm_convert(source, out, &co);
    }
    if (has_prefix(source, "hf://")) {
        char name[512], rev[128];
        const char *file;
        if ((rc = parse_hf(source, name, sizeof name, rev, sizeof rev, &file))) return rc;
        if (!file) return pull_remote(source, NULL, name, rev, out, o, st);
    }
    char *url = rkm_pull_url(source);
    if (!url) return RKM_EINVAL;
    rc = pull_remote(source, url, NULL, NULL, out, o, st);
    free(url);
    return rc;
}
