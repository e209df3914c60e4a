/*
 * cmd_serve.c - `rkmojo serve`: parses the options into a srv_config and
 * runs the HTTP server (src/server/) until SIGINT or SIGTERM, then shuts it
 * down cleanly (running generation canceled, prompt cache saved).
 *
 * Threads: the main thread waits in srv_run; the signal handler only sets
 * a flag.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "server/server.h"
#include "util/common.h"

static volatile int g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rkmojo serve (-m MODEL.rkmojo | --models-dir DIR) [options]\n"
            "\n"
            "OpenAI- and Ollama-compatible HTTP server (docs/SERVER.md).\n"
            "\n"
            "  -m, --model DIR          serve one converted model\n"
            "  --models-dir DIR         serve every model directory under DIR, by name\n"
            "  --host ADDR              bind address (default 127.0.0.1: this machine only)\n"
            "  --port N                 TCP port (default 8080; 0 picks a free one)\n"
            "  --mem-budget SIZE        memory budget of the model, e.g. 6G (default: none)\n"
            "  --threads N              compute threads (default: the performance cores)\n"
            "  --ctx N                  context length of a session (default min(4096, trained))\n"
            "  --expert-cache-slots N   expert slots per MoE layer (instead of a budget)\n"
            "  --cache-policy lfu|lru   expert cache eviction (default lfu)\n"
            "  --prefetch on|off        next-layer expert prefetch (default off)\n"
            "  --cache-scope shared|layer  one slot pool for all MoE layers (default from 4x top-k\n"
            "                           slots per layer) or per layer\n"
            "  --lazy-experts           no budget: read each expert on first use, not all in the background\n"
            "  --io-threads N           expert read threads\n"
            "  --backend auto|cpu|rknn  where the expert matmuls run (docs/NPU.md)\n"
            "  --api-key KEY            require 'Authorization: Bearer KEY' (or $RKMOJO_API_KEY)\n"
            "  --idle-unload DUR        unload a model idle this long (default 30m; 0 never)\n"
            "  --queue N                requests that may wait (default 16); more get 503\n"
            "  --max-body SIZE          request body cap (default 8M)\n"
            "  --http-timeout SECONDS   close connections idle this long (default 120)\n"
            "  --prompt-cache-dir DIR   keep session KV states on disk (restored after restart)\n"
            "  --prompt-cache-max SIZE  size cap of that directory per model (default 4G)\n"
            "  --prompt-cache-ttl DUR   expiry of saved states (default 7d)\n"
            "  --port-file PATH         write the bound port to PATH once listening\n"
            "\n"
            "Durations: 90s, 30m, 2h, 7d or seconds. Sizes: 512M, 2G, 1.5GiB or bytes.\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int rkm_cmd_serve(int argc, char **argv)
{
    srv_config c;
    srv_config_default(&c);
    c.api_key = getenv("RKMOJO_API_KEY");
    if (c.api_key && !*c.api_key) c.api_key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--lazy-experts")) { /* the one flag without a value */
            c.lazy_experts = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "rkmojo serve: %s needs a value (or is unknown)\n", a);
            usage(stderr);
            return 2;
        }
        i++;
        int bad = 0;
        double d;
        int64_t b;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) c.model_path = v;
        else if (!strcmp(a, "--models-dir")) c.models_dir = v;
        else if (!strcmp(a, "--host")) c.host = v;
        else if (!strcmp(a, "--port")) bad = parse_int(v, 0, 65535, &c.port);
        else if (!strcmp(a, "--threads")) bad = parse_int(v, 0, 1024, &c.n_threads);
        else if (!strcmp(a, "--ctx")) bad = parse_int(v, 0, 1 << 24, &c.n_ctx);
        else if (!strcmp(a, "--expert-cache-slots")) bad = parse_int(v, 0, 1 << 20, &c.expert_cache_slots);
        else if (!strcmp(a, "--io-threads")) bad = parse_int(v, 0, 64, &c.io_threads);
        else if (!strcmp(a, "--cache-policy")) {
            bad = !v || (strcmp(v, "lfu") && strcmp(v, "lru"));
            c.cache_policy = v && !strcmp(v, "lru");
        } else if (!strcmp(a, "--prefetch")) {
            bad = !v || (strcmp(v, "on") && strcmp(v, "off"));
            c.prefetch = v && !strcmp(v, "on");
        } else if (!strcmp(a, "--cache-scope")) {
            bad = !v || (strcmp(v, "shared") && strcmp(v, "layer"));
            c.cache_scope = v && !strcmp(v, "layer") ? 1 : 2;
        } else if (!strcmp(a, "--backend")) {
            bad = !v || (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "rknn"));
            c.backend = !v || !strcmp(v, "auto") ? 0 : !strcmp(v, "cpu") ? 1 : 2;
        }
        else if (!strcmp(a, "--queue")) bad = parse_int(v, 1, 100000, &c.queue_max);
        else if (!strcmp(a, "--slow-ms")) bad = parse_int(v, 0, 10000, &c.slow_ms);
        else if (!strcmp(a, "--http-timeout")) bad = parse_int(v, 1, 86400, &c.http_timeout_s);
        else if (!strcmp(a, "--api-key")) c.api_key = v;
        else if (!strcmp(a, "--prompt-cache-dir")) c.prompt_cache_dir = v;
        else if (!strcmp(a, "--port-file")) c.port_file = v;
        else if (!strcmp(a, "--idle-unload")) {
            bad = srv_parse_duration(v, &d);
            c.idle_unload_s = d;
        } else if (!strcmp(a, "--prompt-cache-ttl")) {
            bad = srv_parse_duration(v, &d);
            c.prompt_cache_ttl_s = d;
        } else if (!strcmp(a, "--mem-budget")) {
            bad = (b = rkm_parse_bytes(v)) < 0;
            c.mem_budget_bytes = (uint64_t)b;
        } else if (!strcmp(a, "--prompt-cache-max")) {
            bad = (b = rkm_parse_bytes(v)) < 0;
            c.prompt_cache_max_bytes = (uint64_t)b;
        } else if (!strcmp(a, "--max-body")) {
            bad = (b = rkm_parse_bytes(v)) <= 0;
            c.body_max_bytes = (size_t)b;
        } else {
            fprintf(stderr, "rkmojo serve: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "rkmojo serve: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!c.model_path == !c.models_dir) {
        fprintf(stderr, "rkmojo serve: give exactly one of -m MODEL or --models-dir DIR\n");
        usage(stderr);
        return 2;
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
