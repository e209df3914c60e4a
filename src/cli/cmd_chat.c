/*
 * cmd_chat.c - `rkmojo chat`: interactive multi-turn chat with the model's
 * template. Each turn the whole conversation is rendered and tokenized;
 * the longest prefix shared with the tokens already in the KV cache is
 * kept, so only the new tokens are prefilled. When the conversation no
 * longer fits the context, the oldest turns (after the system message)
 * are dropped.
 *
 * Ctrl-C while the model answers cancels that answer (the SIGINT handler
 * calls rkm_session_cancel, an atomic store); at the prompt it only prints
 * a hint. Ctrl-D or /exit quits, /reset forgets the conversation.
 * Threads: the main thread plus the signal handler.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/chat_format.h"
#include "cli/cli.h"
#include "cli/gen_common.h"
#include "runtime/tokens.h"
#include "util/common.h"
#include "util/knobs.h"

static rkm_session *volatile g_session;
static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
    if (g_session) rkm_session_cancel(g_session);
}

typedef struct {
    rkm_chat_message *v;
    char **owned; /* strings we allocated (parallel to v) */
    int n, cap;
} conv;

static int conv_add(conv *c, const char *role, const char *text)
{
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 8;
        rkm_chat_message *v = realloc(c->v, sizeof *v * (size_t)nc);
        if (!v) return -1;
        c->v = v;
        char **o = realloc(c->owned, sizeof *o * (size_t)nc);
        if (!o) return -1;
        c->owned = o;
        c->cap = nc;
    }
    char *dup = strdup(text);
    if (!dup) return -1;
    c->owned[c->n] = dup;
    c->v[c->n].role = role;
    c->v[c->n].content = dup;
    c->n++;
    return 0;
}

static void conv_drop(conv *c, int i)
{
    free(c->owned[i]);
    memmove(c->v + i, c->v + i + 1, sizeof *c->v * (size_t)(c->n - i - 1));
    memmove(c->owned + i, c->owned + i + 1, sizeof *c->owned * (size_t)(c->n - i - 1));
    c->n--;
}

static void conv_free(conv *c)
{
    for (int i = 0; i < c->n; i++) free(c->owned[i]);
    free(c->v);
    free(c->owned);
}

/* Tokens of the rendered conversation (malloc'd), count or < 0. */
static int render_ids(const rkm_model *m, conv *c, int32_t **ids)
{
    return rkm_chat_tokens(m, c->v, c->n, 1, ids);
}

static int on_token(int32_t id, void *user) { return rkm_text_out_push(user, id); }

int rkm_cmd_chat(int argc, char **argv)
{
    rkm_gen_opts o;
    rkm_gen_opts_init(&o, 1);
    const char *system = NULL;
    int n_predict = 1024;
    const rkm_opt opts[] = {
        {"system", 0, RKM_OPT_STR, &system, .arg = "TEXT", .help = "system message"},
        {"n-predict", 'n', RKM_OPT_INT, &n_predict, -1, 1 << 30, "N", .help = "most tokens per answer (default 1024)"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "chat", "usage: rkmojo chat -m MODEL [--system TEXT] [-n MAX_TOKENS_PER_ANSWER] [options]\n\n",
        "In the chat: /reset forgets the conversation, /exit (or Ctrl-D) quits,\n"
        "Ctrl-C stops the current answer.\n",
        {opts, o.model_opts, o.session_opts, o.sampling_opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    rkm_model *m;
    rkm_session *s;
    int rc = rkm_gen_open(&o, &m, &s);
    if (rc) return rc;
    if (!rkm_model_tokenizer(m)) {
        fprintf(stderr, "rkmojo chat: the model has no tokenizer\n");
        rkm_session_free(s);
        rkm_model_close(m);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C interrupts the prompt's read */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    g_session = s;
    int tty = isatty(0);
    conv c = {0};
    if (system) conv_add(&c, "system", system);
    int n_sys = c.n;
    if (tty)
        fprintf(stderr, "rkmojo chat (%s). /reset forgets, /exit or Ctrl-D quits, Ctrl-C stops an answer.\n",
                rkm_model_arch(m));
    char line[16384];
    for (;;) {
        if (tty) {
            printf("\n> ");
            fflush(stdout);
        }
        g_interrupted = 0;
        if (!fgets(line, sizeof line, stdin)) {
            if (errno == EINTR && g_interrupted) {
                clearerr(stdin);
                fprintf(stderr, "\n(Ctrl-D or /exit quits)\n");
                continue;
            }
            break;
        }
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            while (c.n > n_sys) conv_drop(&c, c.n - 1);
            rkm_session_truncate(s, 0);
            fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        if (conv_add(&c, "user", line)) break;
        int32_t *ids = NULL;
        int n = render_ids(m, &c, &ids);
        /* drop the oldest turns while the prompt plus an answer would not fit */
        int cap = rkm_session_n_ctx(s);
        while (n > 0 && c.n - n_sys > 1) {
            if (n + RKM_MIN(n_predict, cap / 4) <= cap) break;
            conv_drop(&c, n_sys);
            free(ids);
            ids = NULL;
            n = render_ids(m, &c, &ids);
        }
        if (n <= 0) {
            fprintf(stderr, "rkmojo chat: %s\n", n < 0 ? rkm_last_error() : "empty prompt");
            free(ids);
            conv_drop(&c, c.n - 1);
            continue;
        }
        /* keep the KV rows of the longest common prefix */
        int held;
        const int32_t *have = rkm_session_tokens(s, &held);
        int common = 0;
        while (common < held && common < n && have[common] == ids[common]) common++;
        if (common == n) common--; /* re-evaluate the last token to get logits */
        if (rkm_knob_is(RKM_KNOB_CHAT_DEBUG, "1")) fprintf(stderr, "[kv: %d held, %d reused, %d new]\n", held, common, n - common);
        rkm_session_stats_reset(s);
        rc = rkm_session_truncate(s, common);
        if (!rc) rc = rkm_session_eval(s, ids + common, n - common, NULL);
        free(ids);
        if (rc) {
            fprintf(stderr, "\nrkmojo chat: %s\n", rkm_last_error());
            conv_drop(&c, c.n - 1);
            if (rc == RKM_ECANCELED) continue;
            rkm_session_truncate(s, 0);
            continue;
        }
        rkm_text_out out;
        rkm_text_out_init(&out, m, stdout, NULL, 0);
        out.keep_all = 1;
        rc = rkm_session_generate(s, n_predict, on_token, &out);
        rkm_text_out_finish(&out);
        printf("\n");
        if (rc == RKM_ECANCELED) fprintf(stderr, "(stopped)\n");
        else if (rc) fprintf(stderr, "rkmojo chat: %s\n", rkm_last_error());
        conv_add(&c, "assistant", out.all.data ? out.all.data : "");
        rkm_text_out_free(&out);
        if (!o.quiet) {
            rkm_stats st;
            rkm_session_stats(s, &st);
            rkm_print_footer(stderr, &st);
        }
    }
    g_session = NULL;
    conv_free(&c);
    rkm_session_free(s);
    rkm_model_close(m);
    return 0;
}
