/*
 * gate.h - which connections the server keeps: a cap on open connections
 * per client address, and a deadline for each request head (from the
 * connection's start, or from the end of its previous reply), so slow or
 * idle clients cannot hold every connection. A watchdog thread cuts a
 * connection whose head is late (shutdown of its socket: the HTTP thread
 * then sees the end of the stream and closes it). A connection over its
 * address's cap gets a short deadline; if its head arrives in time the
 * server answers it 503 (srv_gate_head says so).
 *
 * Threads: libmicrohttpd's connection threads call open/head/idle/close;
 * the watchdog runs in its own thread; one mutex guards the table.
 * Ownership: srv_gate_free stops the watchdog and frees what is left.
 */
#ifndef RKM_SERVER_GATE_H
#define RKM_SERVER_GATE_H

#include <stdint.h>
#include <sys/socket.h>

typedef struct srv_gate srv_gate;
typedef struct srv_gate_conn srv_gate_conn;

/* per_addr: connections one address may hold (0: no cap); head_s: seconds
 * a request head may take (0: no deadline). NULL when out of memory. */
srv_gate *srv_gate_new(int per_addr, double head_s);
void srv_gate_free(srv_gate *g);

/* A connection opened on socket fd from addr; NULL when out of memory
 * (the connection is then not watched). */
srv_gate_conn *srv_gate_open(srv_gate *g, int fd, const struct sockaddr *addr);
/* Its request head arrived: no deadline until the reply ends. Returns 1
 * when the connection is over its address's cap (answer 503 and close). */
int srv_gate_head(srv_gate *g, srv_gate_conn *c);
/* Its reply ended: the next head's deadline starts now. */
void srv_gate_idle(srv_gate *g, srv_gate_conn *c);
/* It closed (before its socket is closed). */
void srv_gate_close(srv_gate *g, srv_gate_conn *c);

/* A key for the client address (IPv4 and its IPv6-mapped form alike):
 * the engine's fair admission counts running generations per key. When
 * the peer is one of the trusted proxies (comma list of addresses, or
 * NULL) and xff (its X-Forwarded-For header, or NULL) ends with an
 * address, that address is the client: the last entry, the one the proxy
 * itself added (earlier ones come from the client and prove nothing). */
uint64_t srv_gate_client(const struct sockaddr *addr, const char *trusted, const char *xff);

/* Connections cut for a late head, and refused over the cap (metrics). */
uint64_t srv_gate_cut(const srv_gate *g);
uint64_t srv_gate_refused(const srv_gate *g);

#endif
