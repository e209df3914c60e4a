/*
 * websafe.h - what keeps web pages from driving the server: which Host
 * headers it answers (DNS rebinding: a page whose name resolves to
 * 127.0.0.1 reaches a loopback server with its own name in Host), which
 * browser origins may call it (CORS), and the body type a browser must
 * send.
 *
 *   Host     A server bound to a loopback address answers only loopback
 *            names (localhost, *.localhost, 127.x.x.x, [::1]) and the
 *            names of --allow-host; bound elsewhere, any name, unless
 *            --allow-host lists them (then those and the loopback names).
 *            "*" allows every name.
 *   Origin   No Origin header: not a browser, allowed. Otherwise allowed
 *            when it is the page's own origin (scheme://Host), a loopback
 *            origin (a local program), or listed in --allow-origin
 *            (exact "scheme://host[:port]", or "*").
 *   Body     A request with an Origin must send Content-Type
 *            application/json (a type a page cannot send without a CORS
 *            preflight); clients without Origin (curl -d, SDKs) may send
 *            any.
 *
 * Lists are comma-separated, case-insensitive. Pure functions, any thread.
 */
#ifndef RKM_SERVER_WEBSAFE_H
#define RKM_SERVER_WEBSAFE_H

/* bind_host: the address the server listens on; allow: --allow-host or
 * NULL. host: the request's Host header (may be NULL: HTTP/1.0). */
int srv_host_allowed(const char *bind_host, const char *allow, const char *host);
/* allow: --allow-origin or NULL. */
int srv_origin_allowed(const char *allow, const char *origin, const char *host);
/* Is ct application/json (parameters such as charset allowed)? */
int srv_content_type_json(const char *ct);

#endif
