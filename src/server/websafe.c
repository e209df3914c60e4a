/*
 * websafe.c - Host, Origin and body-type rules (websafe.h).
 *
 * Pure functions; any thread.
 */
#include "server/websafe.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* The host name of a Host header or origin authority, without the port
 * (an IPv6 literal keeps its brackets off). */
static void host_part(const char *s, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    if (n && s[0] == '[') { /* [v6]:port */
        const char *e = memchr(s, ']', n);
        size_t l = e ? (size_t)(e - s - 1) : n - 1;
        for (size_t i = 0; i < l && k + 1 < cap; i++) out[k++] = (char)tolower((unsigned char)s[1 + i]);
    } else {
        for (size_t i = 0; i < n && s[i] != ':' && k + 1 < cap; i++) out[k++] = (char)tolower((unsigned char)s[i]);
    }
    while (k && out[k - 1] == '.') k--; /* "localhost." */
    out[k] = 0;
}

static int loopback_name(const char *h)
{
    size_t n = strlen(h);
    if (!strcmp(h, "localhost") || !strcmp(h, "::1")) return 1;
    if (n > 10 && !strcmp(h + n - 10, ".localhost")) return 1;
    if (!strncmp(h, "127.", 4)) { /* 127.0.0.0/8, digits and dots only */
        for (const char *p = h + 4; *p; p++)
            if (!isdigit((unsigned char)*p) && *p != '.') return 0;
        return 1;
    }
    return 0;
}

/* Is name (already lower-case, no port) in the comma list? "*" matches all. */
static int listed(const char *list, const char *name)
{
    if (!list) return 0;
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ') p++;
        const char *e = p;
        while (*e && *e != ',') e++;
        size_t n = (size_t)(e - p);
        while (n && p[n - 1] == ' ') n--;
        if (n == 1 && *p == '*') return 1;
        if (n && strlen(name) == n && !strncasecmp(p, name, n)) return 1;
        p = e;
    }
    return 0;
}

int srv_host_allowed(const char *bind_host, const char *allow, const char *host)
{
    if (listed(allow, "*")) return 1;
    char b[256], h[256];
    host_part(bind_host ? bind_host : "", bind_host ? strlen(bind_host) : 0, b, sizeof b);
    int loop_bind = loopback_name(b);
    if (!host || !*host) return !loop_bind && !allow; /* HTTP/1.0 without Host */
    host_part(host, strlen(host), h, sizeof h);
    if (loopback_name(h) || listed(allow, h)) return 1;
    if (loop_bind) return 0;
    return !allow;
}

int srv_origin_allowed(const char *allow, const char *origin, const char *host)
{
    if (!origin) return 1;
    if (listed(allow, "*")) return 1;
    /* the exact origin listed ("http://ui.example:3000") */
    char o[512];
    size_t n = strlen(origin);
    if (n >= sizeof o) return 0;
    for (size_t i = 0; i <= n; i++) o[i] = (char)tolower((unsigned char)origin[i]);
    if (listed(allow, o)) return 1;
    const char *auth = strstr(o, "://");
    if (!auth || (strncmp(o, "http://", 7) && strncmp(o, "https://", 8))) return 0; /* "null", file:, ... */
    auth += 3;
    /* the page's own origin: its authority is the Host it sent */
    if (host && !strcasecmp(auth, host)) return 1;
    char h[256];
    host_part(auth, strlen(auth), h, sizeof h);
    return loopback_name(h);
}

int srv_content_type_json(const char *ct)
{
    if (!ct) return 0;
    while (*ct == ' ') ct++;
    size_t n = strlen("application/json");
    return !strncasecmp(ct, "application/json", n) && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}
