/*
 * cmd_serve.c - `rkmojo serve`: parses the options into a srv_config and
 * runs the HTTP server (src/server/) until SIGINT or SIGTERM, then shuts it
 * down cleanly (running generation canceled, prompt cache saved).
 *
 * Threads: the main thread waits in srv_run; the signal handler only sets
 * a flag.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/gen_common.h"
#include "cli/opts.h"
#include "server/server.h"
#include "util/common.h"
#include "util/knobs.h"

static volatile int g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static int duration_opt(const char *v, void *dst) { return srv_parse_duration(v, dst) ? -1 : 0; }

int rkm_cmd_serve(int argc, char **argv)
{
    srv_config c;
    srv_config_default(&c);
    c.api_key = rkm_knob(RKM_KNOB_API_KEY);
    c.allow_hosts = rkm_knob(RKM_KNOB_ALLOW_HOSTS);
    c.allow_origins = rkm_knob(RKM_KNOB_ALLOW_ORIGINS);
    /* the model options are those of run (gen_common.c), copied into c */
    rkm_gen_opts o;
    rkm_gen_opts_init(&o, 0);
    uint64_t body_max = c.body_max_bytes;
    const char *key_opt = NULL, *key_file = NULL;
    float header_s = (float)c.header_timeout_s;
    static char key_buf[512];
    const rkm_opt opts[] = {
        {"models-dir", 0, RKM_OPT_STR, &c.models_dir, .arg = "DIR", .help = "serve every model directory under DIR, by name"},
        {"host", 0, RKM_OPT_STR, &c.host, .arg = "ADDR", .help = "bind address (default 127.0.0.1: this machine only)"},
        {"port", 0, RKM_OPT_INT, &c.port, 0, 65535, "N", .help = "TCP port (default 8080; 0 picks a free one)"},
        {"api-key", 0, RKM_OPT_STR, &key_opt, .arg = "KEY",
         .help = "require 'Authorization: Bearer KEY' (other users may see it in ps: prefer $RKMOJO_API_KEY or --api-key-file)"},
        {"api-key-file", 0, RKM_OPT_STR, &key_file, .arg = "PATH", .help = "read the key from the first line of PATH"},
        {"allow-host", 0, RKM_OPT_STR, &c.allow_hosts, .arg = "NAMES",
         .help = "Host names to answer besides localhost (comma list; * any; default: loopback names only when bound to loopback)"},
        {"trusted-proxy", 0, RKM_OPT_STR, &c.trusted_proxies, .arg = "ADDRS",
         .help = "proxies (comma list of addresses) whose X-Forwarded-For names the client, for fair admission"},
        {"allow-origin", 0, RKM_OPT_STR, &c.allow_origins, .arg = "ORIGINS",
         .help = "browser origins that may call the API (comma list of scheme://host[:port]; * any; default: this server's and loopback pages)"},
        {"idle-unload", 0, RKM_OPT_CALL, &c.idle_unload_s, .arg = "DUR", .fn = duration_opt,
         .values = "a duration (90s, 30m, 2h, 7d or seconds)", .help = "unload a model idle this long (default 30m; 0 never)"},
        {"parallel", 0, RKM_OPT_INT, &c.parallel, 1, 64, "N",
         .help = "generations that run at once, in one forward pass a step (-np N too; default:\n"
                 "up to 4, fewer when their KV caches would take over a quarter of the expert cache)"},
        {"queue", 0, RKM_OPT_INT, &c.queue_max, 1, 100000, "N", .help = "requests that may wait (default 16); more get 503"},
        {"max-body", 0, RKM_OPT_SIZE, &body_max, 1, 1e15, "SIZE", .help = "request body cap (default 8M)"},
        {"http-timeout", 0, RKM_OPT_INT, &c.http_timeout_s, 1, 86400, "SECONDS",
         .help = "close connections idle this long (default 120)"},
        {"header-timeout", 0, RKM_OPT_FLOAT, &header_s, 0, 86400, "SECONDS",
         .help = "a request's head must arrive within this (default 30; 0: no deadline)"},
        {"max-request-tokens", 0, RKM_OPT_INT, &c.max_request_tokens, 0, 1 << 30, "N",
         .help = "tokens one request may process: prompt + reply, or all embedding inputs (default 131072; 0: no cap)"},
        {"max-inputs", 0, RKM_OPT_INT, &c.max_inputs, 1, 1 << 20, "N", .help = "embedding inputs per request (default 2048)"},
        {"max-request-time", 0, RKM_OPT_CALL, &c.max_request_s, .arg = "DUR", .fn = duration_opt,
         .values = "a duration (90s, 30m, 2h, 7d or seconds)",
         .help = "a reply stops there (finish_reason length), embeddings fail with 503 (default 30m; 0: no limit)"},
        {"max-conn-per-addr", 0, RKM_OPT_INT, &c.max_conn_per_addr, 0, 100000, "N",
         .help = "open connections one client address may hold (default 32; 0: no cap); more get 503"},
        {"prompt-cache-dir", 0, RKM_OPT_STR, &c.prompt_cache_dir, .arg = "DIR",
         .help = "keep session KV states on disk (restored after restart)"},
        {"prompt-cache-max", 0, RKM_OPT_SIZE, &c.prompt_cache_max_bytes, 0, 1e18, "SIZE",
         .help = "size cap of that directory per model (default 4G)"},
        {"prompt-cache-ttl", 0, RKM_OPT_CALL, &c.prompt_cache_ttl_s, .arg = "DUR", .fn = duration_opt,
         .values = "a duration (90s, 30m, 2h, 7d or seconds)", .help = "expiry of saved states (default 7d)"},
        {"pull", 0, RKM_OPT_ENUM, &c.pull, 0, 0, .values = "off|on",
         .help = "POST /api/pull installs models from URLs into --models-dir\n(default: on when an API key is set, else off)"},
        {"vision-idle", 0, RKM_OPT_CALL, &c.vision_idle_s, .arg = "DUR", .fn = duration_opt,
         .values = "a duration (90s, 30m, 2h, 7d or seconds)",
         .help = "free a model's vision tower unused this long; the next image\nreads it again (default 5m; 0: keep it)"},
        {"image-max-tokens", 0, RKM_OPT_INT, &c.image_max_tokens, 1, 1 << 20, "N",
         .help = "at most N tokens an image (default: the projector's, 280 for Gemma 4)"},
        {"image-min-tokens", 0, RKM_OPT_INT, &c.image_min_tokens, 1, 1 << 20, "N", .help = "at least N tokens an image"},
        {"image-urls", 0, RKM_OPT_FLAG, &c.image_urls,
         .help = "fetch the images requests name by http(s) URL (off: only data: URIs;\non, the server reaches whatever address a client names)"},
        {"port-file", 0, RKM_OPT_STR, &c.port_file, .arg = "PATH", .help = "write the bound port to PATH once listening"},
        {"slow-ms", 0, RKM_OPT_INT, &c.slow_ms, 0, 10000, "MS", .help = NULL}, /* a test knob: not listed */
        {0},
    };
    const rkm_opts_cmd cmd = {
        "serve",
        "usage: rkmojo serve (-m MODEL.rkmojo | --models-dir DIR) [options]\n"
        "\n"
        "OpenAI- and Ollama-compatible HTTP server (docs/SERVER.md).\n"
        "\n",
        "\nDurations: 90s, 30m, 2h, 7d or seconds. Sizes: 512M, 2G, 1.5GiB or bytes.\n",
        {o.model_opts, opts}, 0,
    };
    /* llama-server's spelling of --parallel */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-np")) argv[i] = "--parallel";
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    c.model_path = o.model;
    c.body_max_bytes = (size_t)body_max;
    c.header_timeout_s = header_s;
    c.n_threads = o.mp.n_threads;
    c.n_ctx = o.sp.n_ctx;
    c.mem_budget_bytes = o.mp.mem_budget_bytes;
    c.expert_cache_slots = o.mp.expert_cache_slots;
    c.cache_policy = o.mp.cache_policy;
    c.prefetch = o.mp.prefetch;
    c.io_threads = o.mp.io_threads;
    c.backend = o.mp.backend;
    c.cache_scope = o.mp.cache_scope;
    c.lazy_experts = o.mp.lazy_experts;
    if (!c.model_path == !c.models_dir)
        return rkm_opts_error(&cmd, "give exactly one of -m MODEL or --models-dir DIR");
    /* the key: --api-key, --api-key-file, else $RKMOJO_API_KEY (empty there: none) */
    if (key_opt && key_file) return rkm_opts_error(&cmd, "give --api-key or --api-key-file, not both");
    if (key_opt) {
        if (!*key_opt) return rkm_opts_error(&cmd, "--api-key is empty (leave it out to serve without a key)");
        snprintf(key_buf, sizeof key_buf, "%s", key_opt);
        /* hide it from ps as soon as we can (it was visible until now) */
        for (int i = 1; i < argc; i++) {
            size_t n = strlen(argv[i]);
            if (key_opt >= argv[i] && key_opt < argv[i] + n + 1) memset((char *)key_opt, 'x', strlen(key_opt));
        }
        fprintf(stderr, "rkmojo serve: note: a key on the command line can be read by other users (ps, /proc); "
                        "prefer $RKMOJO_API_KEY or --api-key-file\n");
        c.api_key = key_buf;
    } else if (key_file) {
        FILE *f = fopen(key_file, "r");
        if (!f) {
            fprintf(stderr, "rkmojo serve: --api-key-file %s: %s\n", key_file, strerror(errno));
            return 2;
        }
        if (!fgets(key_buf, sizeof key_buf, f)) key_buf[0] = 0;
        fclose(f);
        key_buf[strcspn(key_buf, "\r\n")] = 0;
        if (!key_buf[0]) {
            fprintf(stderr, "rkmojo serve: --api-key-file %s: the first line is empty\n", key_file);
            return 2;
        }
        c.api_key = key_buf;
    }
    if (c.api_key && !*c.api_key) c.api_key = NULL;
    if (strcmp(c.host, "127.0.0.1") && strcmp(c.host, "::1") && !c.api_key)
        fprintf(stderr, "rkmojo serve: warning: listening on %s without --api-key\n", c.host);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = srv_run(&c, &g_stop);
    if (rc) {
        fprintf(stderr, "rkmojo serve: %s\n", rkm_last_error());
        return 1;
    }
    return 0;
}
