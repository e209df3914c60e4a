/*
 * gate.c - connection caps per address and request-head deadlines
 * (gate.h).
 */
#include "server/gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/common.h"

/* an over-cap connection's head must come this fast to get its 503 */
#define OVER_CAP_HEAD_S 1.0

struct srv_gate_conn {
    srv_gate_conn *prev, *next;
    int fd;
    uint8_t addr[16]; /* IPv4 as v4-mapped IPv6 */
    double deadline;  /* head due by (monotonic seconds); 0 none */
    int over;         /* over its address's cap when it opened */
    int cut;          /* the watchdog shut it down */
};

struct srv_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running, stop;
    int per_addr;
    double head_s;
    srv_gate_conn *head;
    atomic_uint_fast64_t n_cut, n_refused;
};

static void *watchdog(void *arg)
{
    srv_gate *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double now = rkm_now();
        for (srv_gate_conn *c = g->head; c; c = c->next)
            if (c->deadline > 0 && now > c->deadline && !c->cut) {
                /* the socket stays open (its thread closes it): no reuse race */
                shutdown(c->fd, SHUT_RDWR);
                c->cut = 1;
                atomic_fetch_add(&g->n_cut, 1);
            }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

srv_gate *srv_gate_new(int per_addr, double head_s)
{
    srv_gate *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->per_addr = per_addr;
    g->head_s = head_s;
    if ((per_addr > 0 || head_s > 0) && pthread_create(&g->thread, NULL, watchdog, g) == 0) g->running = 1;
    return g;
}

void srv_gate_free(srv_gate *g)
{
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (g->running) pthread_join(g->thread, NULL);
    while (g->head) {
        srv_gate_conn *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static void addr_key(const struct sockaddr *a, uint8_t out[16]);

/* Whether the address text a (length n, spaces around allowed) parses,
 * into a sockaddr *out. */
static int parse_addr(const char *a, size_t n, struct sockaddr_storage *out)
{
    while (n && (*a == ' ' || *a == '\t')) a++, n--;
    while (n && (a[n - 1] == ' ' || a[n - 1] == '\t')) n--;
    char buf[INET6_ADDRSTRLEN + 1];
    if (!n || n >= sizeof buf) return 0;
    memcpy(buf, a, n);
    buf[n] = 0;
    memset(out, 0, sizeof *out);
    struct sockaddr_in *v4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, buf, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        return 1;
    }
    if (inet_pton(AF_INET6, buf, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        return 1;
    }
    return 0;
}

static int trusted_peer(const struct sockaddr *addr, const char *trusted)
{
    uint8_t k[16], t[16];
    addr_key(addr, k);
    for (const char *p = trusted; p && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        struct sockaddr_storage ss;
        if (parse_addr(p, n, &ss)) {
            addr_key((const struct sockaddr *)&ss, t);
            if (!memcmp(k, t, 16)) return 1;
        }
        p = e ? e + 1 : p + n;
    }
    return 0;
}

uint64_t srv_gate_client(const struct sockaddr *addr, const char *trusted, const char *xff)
{
    uint8_t k[16];
    addr_key(addr, k);
    if (xff && trusted && trusted_peer(addr, trusted)) {
        const char *last = strrchr(xff, ',');
        last = last ? last + 1 : xff;
        struct sockaddr_storage ss;
        if (parse_addr(last, strlen(last), &ss)) addr_key((const struct sockaddr *)&ss, k);
    }
    return rkm_hash(k, sizeof k);
}

static void addr_key(const struct sockaddr *a, uint8_t out[16])
{
    memset(out, 0, 16);
    if (a && a->sa_family == AF_INET) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
    } else if (a && a->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
    }
}

srv_gate_conn *srv_gate_open(srv_gate *g, int fd, const struct sockaddr *addr)
{
    srv_gate_conn *c = calloc(1, sizeof *c);
    if (!g || !c) {
        free(c);
        return NULL;
    }
    c->fd = fd;
    addr_key(addr, c->addr);
    pthread_mutex_lock(&g->mu);
    int same = 0;
    for (srv_gate_conn *o = g->head; o; o = o->next) same += !memcmp(o->addr, c->addr, 16) && !o->cut;
    c->over = g->per_addr > 0 && same >= g->per_addr;
    double limit = c->over ? OVER_CAP_HEAD_S : g->head_s;
    if (c->over && g->head_s > 0 && g->head_s < limit) limit = g->head_s;
    c->deadline = limit > 0 ? rkm_now() + limit : 0;
    c->next = g->head;
    if (g->head) g->head->prev = c;
    g->head = c;
    pthread_mutex_unlock(&g->mu);
    return c;
}

int srv_gate_head(srv_gate *g, srv_gate_conn *c)
{
    if (!g || !c) return 0;
    pthread_mutex_lock(&g->mu);
    c->deadline = 0;
    int over = c->over;
    pthread_mutex_unlock(&g->mu);
    if (over) atomic_fetch_add(&g->n_refused, 1);
    return over;
}

void srv_gate_idle(srv_gate *g, srv_gate_conn *c)
{
    if (!g || !c) return;
    pthread_mutex_lock(&g->mu);
    c->deadline = g->head_s > 0 ? rkm_now() + g->head_s : 0;
    pthread_mutex_unlock(&g->mu);
}

void srv_gate_close(srv_gate *g, srv_gate_conn *c)
{
    if (!g || !c) return;
    pthread_mutex_lock(&g->mu);
    if (c->prev) c->prev->next = c->next;
    else g->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

uint64_t srv_gate_cut(const srv_gate *g) { return g ? atomic_load(&g->n_cut) : 0; }
uint64_t srv_gate_refused(const srv_gate *g) { return g ? atomic_load(&g->n_refused) : 0; }
