/*
 * cmd_chat.c - `rkmojo chat`: an interactive conversation, with a model
 * opened here (-m DIR) or with a running `rkmojo serve` (--url: its
 * OpenAI API, streamed).
 *
 * The prompt: line editing and history (libedit, ~/.rkmojo/history) on a
 * terminal, plain lines otherwise; a block between lines of """ (or lines
 * ending in \) is one multi-line message. Lines starting with / are
 * commands, never sent to the model: /help, /set (sampling, the system
 * message), /show, /clear, /save FILE and /load FILE (the conversation as
 * JSON, {"messages": [...]}), /bye.
 *
 * Local: each turn the whole conversation is rendered and tokenized; the
 * longest prefix shared with the KV cache is kept, so only new tokens are
 * prefilled; when the conversation no longer fits, the oldest turns
 * (after the system message) are dropped.
 *
 * Ctrl-C while the model answers stops that answer (the SIGINT handler
 * sets a flag and calls rkm_session_cancel, an atomic store; the remote
 * transfer polls the flag); at the prompt Ctrl-D quits.
 * Threads: the main thread plus the signal handler.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <editline/readline.h>

#include "cli/chat_format.h"
#include "cli/cli.h"
#include "cli/gen_common.h"
#include "cli/http_client.h"
#include "cli/images.h"
#include "format/model_dir.h"
#include "runtime/media.h"
#include "util/base64.h"
#include "runtime/tokens.h"
#include "util/common.h"
#include "util/knobs.h"

static rkm_session *volatile g_session;
static volatile int g_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
    if (g_session) rkm_session_cancel(g_session);
}

/* ------------------------------------------------------- conversation */

typedef struct {
    rkm_chat_message *v;
    char **owned; /* the strings (parallel to v) */
    int n, cap;
    /* the images' files, in the order of the <__media__> markers in the
     * messages; those of /image not sent yet come after them (pending) */
    char **img;
    int n_img, cap_img, pending;
} conv;

/* The images of messages before message i. */
static int images_before(const conv *c, int i)
{
    int k = 0;
    for (int j = 0; j < i; j++) k += rkm_media_count_markers(c->v[j].content);
    return k;
}

static int conv_add_image(conv *c, const char *path)
{
    if (c->n_img == c->cap_img) {
        int nc = c->cap_img ? 2 * c->cap_img : 8;
        char **t = realloc(c->img, sizeof *t * (size_t)nc);
        if (!t) return -1;
        c->img = t;
        c->cap_img = nc;
    }
    if (!(c->img[c->n_img] = strdup(path))) return -1;
    c->n_img++;
    return 0;
}

/* Drops images [at, at + k). */
static void conv_drop_images(conv *c, int at, int k)
{
    k = RKM_MIN(k, c->n_img - at);
    if (k <= 0) return;
    for (int i = at; i < at + k; i++) free(c->img[i]);
    memmove(c->img + at, c->img + at + k, sizeof *c->img * (size_t)(c->n_img - at - k));
    c->n_img -= k;
}

static const char *role_name(const char *r)
{
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    for (size_t i = 0; i < RKM_ARRAY_LEN(roles); i++)
        if (!strcmp(r, roles[i])) return roles[i];
    return NULL;
}

static int conv_insert(conv *c, int at, const char *role, const char *text)
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
    memmove(c->v + at + 1, c->v + at, sizeof *c->v * (size_t)(c->n - at));
    memmove(c->owned + at + 1, c->owned + at, sizeof *c->owned * (size_t)(c->n - at));
    c->owned[at] = dup;
    c->v[at].role = role_name(role);
    c->v[at].content = dup;
    c->n++;
    return 0;
}

static int conv_add(conv *c, const char *role, const char *text) { return conv_insert(c, c->n, role, text); }

static void conv_drop(conv *c, int i)
{
    conv_drop_images(c, images_before(c, i), rkm_media_count_markers(c->v[i].content));
    free(c->owned[i]);
    memmove(c->v + i, c->v + i + 1, sizeof *c->v * (size_t)(c->n - i - 1));
    memmove(c->owned + i, c->owned + i + 1, sizeof *c->owned * (size_t)(c->n - i - 1));
    c->n--;
}

static void conv_clear(conv *c, int keep_system)
{
    for (int i = c->n - 1; i >= 0; i--)
        if (!keep_system || strcmp(c->v[i].role, "system")) conv_drop(c, i);
    conv_drop_images(c, images_before(c, c->n), c->pending); /* and those not sent */
    c->pending = 0;
}

static void conv_free(conv *c)
{
    for (int i = 0; i < c->n; i++) free(c->owned[i]);
    for (int i = 0; i < c->n_img; i++) free(c->img[i]);
    free(c->img);
    free(c->v);
    free(c->owned);
}

/* A user message: the pending images' markers, then the text. */
static int conv_add_user(conv *c, const char *text)
{
    rkm_buf b = RKM_BUF_INIT;
    for (int i = 0; i < c->pending; i++) rkm_buf_adds(&b, RKM_MEDIA_MARKER);
    rkm_buf_adds(&b, text);
    int rc = rkm_buf_ok(&b) ? conv_insert(c, c->n, "user", b.data ? b.data : "") : -1;
    rkm_buf_free(&b);
    if (!rc) c->pending = 0;
    return rc;
}

/* The system message becomes text ("" removes it). */
static int conv_set_system(conv *c, const char *text)
{
    if (c->n && !strcmp(c->v[0].role, "system")) conv_drop(c, 0);
    return *text ? conv_insert(c, 0, "system", text) : 0;
}

/* Adds the conversation to o as "messages": [{role, content}, ...] (the
 * saved file's shape and the OpenAI request's). */
/* A message with images as OpenAI content parts: its text split at the
 * markers, each image a data: URI of its file (image k of the
 * conversation first). NULL with a message on stderr when a file cannot
 * be read. */
static cJSON *content_parts(const conv *c, const char *text, int k)
{
    cJSON *a = cJSON_CreateArray();
    for (const char *t = text;; k++) {
        const char *e = strstr(t, RKM_MEDIA_MARKER);
        size_t len = e ? (size_t)(e - t) : strlen(t);
        if (len) {
            char *piece = strndup(t, len);
            cJSON *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "type", "text");
            cJSON_AddStringToObject(p, "text", piece ? piece : "");
            cJSON_AddItemToArray(a, p);
            free(piece);
        }
        if (!e) break;
        t = e + strlen(RKM_MEDIA_MARKER);
        size_t n = 0;
        char *bytes = k < c->n_img ? rkm_read_file(c->img[k], &n) : NULL;
        char *b64 = bytes ? rkm_base64_encode(bytes, n) : NULL;
        free(bytes);
        if (!b64) {
            fprintf(stderr, "rkmojo chat: image %s: %s\n", k < c->n_img ? c->img[k] : "(none)",
                    k < c->n_img ? rkm_last_error() : "more markers than images");
            cJSON_Delete(a);
            return NULL;
        }
        const char *ext = strrchr(c->img[k], '.');
        const char *mime = ext && (!strcasecmp(ext, ".jpg") || !strcasecmp(ext, ".jpeg")) ? "image/jpeg"
                           : ext && !strcasecmp(ext, ".webp")                               ? "image/webp"
                                                                                            : "image/png";
        rkm_buf uri = RKM_BUF_INIT;
        rkm_buf_addf(&uri, "data:%s;base64,%s", mime, b64);
        free(b64);
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "image_url");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "image_url"), "url", uri.data ? uri.data : "");
        cJSON_AddItemToArray(a, p);
        rkm_buf_free(&uri);
    }
    return a;
}

/* Adds the conversation to o as "messages": [{role, content}, ...] (the
 * saved file's shape and the OpenAI request's) and, when it has images,
 * "images": [their files] (saved) or each message with images as content
 * parts (parts: the request). -1 when an image cannot be read. */
static int conv_to_json(const conv *c, cJSON *o, int parts)
{
    cJSON *a = cJSON_AddArrayToObject(o, "messages");
    for (int i = 0, k = 0; i < c->n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddItemToArray(a, m);
        cJSON_AddStringToObject(m, "role", c->v[i].role);
        const int nm = rkm_media_count_markers(c->v[i].content);
        if (parts && nm && c->n_img) {
            cJSON *ps = content_parts(c, c->v[i].content, k);
            if (!ps) return -1;
            cJSON_AddItemToObject(m, "content", ps);
        } else {
            cJSON_AddStringToObject(m, "content", c->v[i].content);
        }
        k += nm;
    }
    if (!parts && c->n_img) {
        cJSON *im = cJSON_AddArrayToObject(o, "images");
        for (int i = 0; i < c->n_img - c->pending; i++) cJSON_AddItemToArray(im, cJSON_CreateString(c->img[i]));
    }
    return 0;
}

static int conv_save(const conv *c, const char *path)
{
    cJSON *o = cJSON_CreateObject();
    conv_to_json(c, o, 0);
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    FILE *f = s ? fopen(path, "w") : NULL;
    int ok = f && fputs(s, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f)) ok = 0;
    free(s);
    return ok ? 0 : -1;
}

/* Replaces c with the file's messages; the file is checked whole first. */
static int conv_load(conv *c, const char *path, char *err, size_t errcap)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
        return -1;
    }
    text = malloc(1 << 24);
    if (text) n = fread(text, 1, (1 << 24) - 1, f);
    fclose(f);
    if (!text) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    text[n] = 0;
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "messages"), *m;
    int ok = cJSON_IsArray(a);
    cJSON_ArrayForEach(m, a) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role"), *t = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(r) || !role_name(r->valuestring) || !cJSON_IsString(t)) ok = 0;
    }
    if (!ok) {
        snprintf(err, errcap, "%s: not a conversation ({\"messages\": [{\"role\", \"content\"}, ...]})", path);
        cJSON_Delete(o);
        return -1;
    }
    const cJSON *im = cJSON_GetObjectItemCaseSensitive(o, "images"), *p;
    int n_mark = 0, n_im = 0;
    cJSON_ArrayForEach(m, a) n_mark += rkm_media_count_markers(cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring);
    cJSON_ArrayForEach(p, im) n_im += cJSON_IsString(p) ? 1 : 1000000;
    if ((im && !cJSON_IsArray(im)) || n_im != n_mark) {
        snprintf(err, errcap, "%s: %d image markers in the messages and %d image files listed", path, n_mark, n_im);
        cJSON_Delete(o);
        return -1;
    }
    conv_clear(c, 0);
    conv_drop_images(c, 0, c->n_img);
    cJSON_ArrayForEach(m, a) conv_add(c, cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring,
                                      cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring);
    cJSON_ArrayForEach(p, im) conv_add_image(c, p->valuestring);
    cJSON_Delete(o);
    return 0;
}

/* ---------------------------------------------------------------- input */

typedef struct {
    int tty;
    char history[1024]; /* the history file, "" when none */
} input;

static void input_init(input *in)
{
    in->tty = isatty(0) && isatty(1);
    in->history[0] = 0;
    if (!in->tty) return;
    const char *home = getenv("HOME");
    if (home && *home) {
        char dir[900];
        snprintf(dir, sizeof dir, "%s/.rkmojo", home);
        mkdir(dir, 0700);
        snprintf(in->history, sizeof in->history, "%s/history", dir);
        using_history();
        read_history(in->history);
    }
}

/* One line (malloc'd, without its newline), or NULL at the end. */
static char *read_one(input *in, const char *prompt)
{
    if (in->tty) {
        char *l = readline(prompt);
        return l;
    }
    char *l = NULL;
    size_t cap = 0;
    ssize_t n = getline(&l, &cap, stdin);
    if (n < 0) {
        free(l);
        return NULL;
    }
    l[strcspn(l, "\r\n")] = 0;
    return l;
}

/* One message: a line, a """ block, or lines continued with \. */
static char *read_message(input *in)
{
    char *l = read_one(in, ">>> ");
    if (!l) return NULL;
    rkm_buf b = RKM_BUF_INIT;
    if (!strncmp(l, "\"\"\"", 3)) { /* """ ... """ */
        const char *rest = l + 3;
        char *end = strstr(rest, "\"\"\"");
        if (end) { /* all on one line */
            rkm_buf_add(&b, rest, (size_t)(end - rest));
        } else {
            rkm_buf_adds(&b, rest);
            int first = !*rest;
            for (;;) {
                char *m = read_one(in, "... ");
                if (!m) break;
                char *e = strstr(m, "\"\"\"");
                size_t len = e ? (size_t)(e - m) : strlen(m);
                if (!e || len) { /* a closing line of """ alone adds nothing */
                    if (!first) rkm_buf_addc(&b, '\n');
                    rkm_buf_add(&b, m, len);
                    first = 0;
                }
                free(m);
                if (e) break;
            }
        }
    } else {
        rkm_buf_adds(&b, l);
        while (b.len && b.data[b.len - 1] == '\\') {
            b.data[--b.len] = '\n';
            b.len++;
            char *m = read_one(in, "... ");
            if (!m) break;
            rkm_buf_adds(&b, m);
            free(m);
        }
    }
    free(l);
    char *s = rkm_buf_take(&b);
    rkm_buf_free(&b);
    if (s && in->tty && *s) {
        add_history(s);
        if (in->history[0]) write_history(in->history);
    }
    return s;
}

/* ------------------------------------------------------------ settings */

typedef struct {
    rkm_sampler_params sp;
    int n_predict;
} chat_settings;

/* The images' side: the tower of the local model (read at the first
 * /image) or none with --url (the server encodes). */
typedef struct {
    const char *mmproj; /* --mmproj, or the tower the model carries, or NULL */
    int min_tokens, max_tokens; /* --image-min-tokens, --image-max-tokens (0: the projector's) */
    rkm_vision *v;
    rkm_pool *pool;
    int remote;
} chat_vision;

/* /image FILE: checked (decoded; locally, the tower read), kept for the
 * next message. */
static void add_image(const char *path, conv *c, chat_vision *cv)
{
    rkm_image im = {0};
    if (rkm_image_load(path, NULL, &im)) {
        fprintf(stderr, "/image %s: %s\n", path, rkm_last_error());
        return;
    }
    if (!cv->remote && !cv->v) {
        if (!cv->mmproj) {
            fprintf(stderr, "/image: the model has no vision tower (chat --mmproj FILE, or a model converted with --mmproj)\n");
            rkm_image_free(&im);
            return;
        }
        if (!(cv->v = rkm_vision_load(cv->mmproj)) || rkm_vision_supported(cv->v) ||
            rkm_vision_limit_tokens(cv->v, cv->min_tokens, cv->max_tokens) || !(cv->pool = rkm_pool_new(0))) {
            fprintf(stderr, "/image: the vision tower %s: %s\n", cv->mmproj, rkm_last_error());
            rkm_vision_free(cv->v);
            cv->v = NULL;
            rkm_image_free(&im);
            return;
        }
    }
    char *abs = realpath(path, NULL); /* a saved conversation finds it from anywhere */
    int added = conv_add_image(c, abs ? abs : path);
    free(abs);
    if (added) {
        fprintf(stderr, "out of memory\n");
    } else {
        c->pending++;
        printf("(image %s, %dx%d: it goes with your next message)\n", path, im.w, im.h);
    }
    rkm_image_free(&im);
}

static void print_settings(const chat_settings *st, const conv *c)
{
    printf("temperature %g, top_k %d, top_p %g, min_p %g, repeat_penalty %g, seed %llu, num_predict %d\n",
           st->sp.temperature, st->sp.top_k, st->sp.top_p, st->sp.min_p, st->sp.repeat_penalty,
           (unsigned long long)st->sp.seed, st->n_predict);
    printf("system: %s\n", c->n && !strcmp(c->v[0].role, "system") ? c->v[0].content : "(none)");
    int turns = 0;
    for (int i = 0; i < c->n; i++) turns += !strcmp(c->v[i].role, "user");
    printf("conversation: %d turns\n", turns);
}

static const char help_text[] =
    "  /set temperature|top_k|top_p|min_p|repeat_penalty|seed|num_predict VALUE\n"
    "  /set system TEXT   the system message (/set system with no text removes it)\n"
    "  /show              the settings and the conversation's length\n"
    "  /clear             forget the conversation (the system message stays)\n"
    "  /save FILE         write the conversation as JSON; /load FILE reads one back\n"
    "  /image FILE        an image (PNG, JPEG, WebP) for your next message\n"
    "  /bye               quit (also /exit, Ctrl-D)\n"
    "  \"\"\" starts and ends a multi-line message; a line ending in \\ continues it.\n"
    "  Ctrl-C stops an answer.\n";

/* A /command. Returns 1 to quit, 0 otherwise (messages on stdout/stderr). */
static int command(const char *line, chat_settings *st, conv *c, chat_vision *cv, int *reset)
{
    char cmd[32] = "", arg[64] = "";
    int used = 0;
    sscanf(line, "/%31s%n", cmd, &used);
    const char *rest = line + used;
    while (*rest == ' ') rest++;
    if (!strcmp(cmd, "bye") || !strcmp(cmd, "exit") || !strcmp(cmd, "quit")) return 1;
    if (!strcmp(cmd, "help") || !strcmp(cmd, "?")) {
        fputs(help_text, stdout);
    } else if (!strcmp(cmd, "show")) {
        print_settings(st, c);
    } else if (!strcmp(cmd, "clear") || !strcmp(cmd, "reset")) {
        conv_clear(c, 1);
        *reset = 1;
        printf("(conversation cleared)\n");
    } else if (!strcmp(cmd, "image")) {
        if (!*rest) fprintf(stderr, "usage: /image FILE\n");
        else add_image(rest, c, cv);
    } else if (!strcmp(cmd, "save") || !strcmp(cmd, "load")) {
        char err[600];
        if (!*rest) fprintf(stderr, "usage: /%s FILE\n", cmd);
        else if (cmd[0] == 's' && conv_save(c, rest)) fprintf(stderr, "cannot write %s: %s\n", rest, strerror(errno));
        else if (cmd[0] == 'l' && conv_load(c, rest, err, sizeof err)) fprintf(stderr, "%s\n", err);
        else {
            if (cmd[0] == 'l') *reset = 1;
            printf("(%s %s: %d messages)\n", cmd[0] == 's' ? "saved to" : "loaded from", rest, c->n);
        }
    } else if (!strcmp(cmd, "set")) {
        int k = 0;
        sscanf(rest, "%63s%n", arg, &k);
        const char *val = rest + k;
        while (*val == ' ') val++;
        char *end = NULL;
        double v = strtod(val, &end);
        int num_ok = *val && end && !*end;
        if (!strcmp(arg, "system")) {
            if (conv_set_system(c, val)) fprintf(stderr, "out of memory\n");
            *reset = 1;
        } else if (!num_ok) {
            fprintf(stderr, "usage: /set temperature|top_k|top_p|min_p|repeat_penalty|seed|num_predict VALUE, or /set system TEXT\n");
            return 0;
        } else if (!strcmp(arg, "temperature") && v >= 0 && v <= 100) {
            st->sp.temperature = (float)v;
        } else if (!strcmp(arg, "top_k") && v >= 0) {
            st->sp.top_k = (int)v;
        } else if (!strcmp(arg, "top_p") && v >= 0 && v <= 1) {
            st->sp.top_p = (float)v;
        } else if (!strcmp(arg, "min_p") && v >= 0 && v <= 1) {
            st->sp.min_p = (float)v;
        } else if (!strcmp(arg, "repeat_penalty") && v > 0) {
            st->sp.repeat_penalty = (float)v;
        } else if (!strcmp(arg, "seed") && v >= 0) {
            st->sp.seed = (uint64_t)v;
        } else if (!strcmp(arg, "num_predict") && v >= -1 && v <= (1 << 30)) {
            st->n_predict = (int)v;
        } else {
            fprintf(stderr, "/set %s: unknown setting or value out of range\n", arg);
            return 0;
        }
        printf("(set %s)\n", arg);
    } else {
        fprintf(stderr, "unknown command /%s (/help lists them)\n", cmd);
    }
    return 0;
}

/* ---------------------------------------------------------------- local */

static int on_token(int32_t id, void *user) { return rkm_text_out_push(user, id); }

static void generate_answer(rkm_model *m, rkm_session *s, conv *c, const chat_settings *st, int quiet, int cap);

/* The model's answer to the conversation, streamed to stdout; appended
 * to c. */
/* The conversation with its images as a prompt (runtime/media.h): the
 * template's text, the images' rows at their markers. Its length, or a
 * negative code. */
static int media_prompt(rkm_model *m, const conv *c, const chat_vision *cv, rkm_media_prompt *mp)
{
    int add_bos = 1;
    char *text = rkm_chat_prompt(m, c->v, c->n, 1, &add_bos);
    if (!text) return RKM_EINVAL;
    int n = images_before(c, c->n), rc = 0;
    rkm_image *ims = calloc((size_t)RKM_MAX(n, 1), sizeof *ims);
    if (!ims) rc = rkm_err(RKM_ENOMEM, "out of memory");
    for (int i = 0; i < n && !rc; i++)
        if (i >= c->n_img) rc = rkm_err(RKM_EINVAL, "more image markers than images");
        else if ((rc = rkm_image_load(c->img[i], NULL, &ims[i]))) rkm_err_prefix(rc, "image %s", c->img[i]);
    if (!rc) rc = rkm_media_prompt_build(m, rkm_vision_hparams_of(cv->v), text, ims, n, add_bos, mp);
    else
        for (int i = 0; i < n; i++) rkm_image_free(&ims[i]);
    free(ims);
    free(text);
    return rc ? rc : mp->n_ids;
}

/* The conversation's prompt: ids (*ids) or, with images, *mp. */
static int prompt_of(rkm_model *m, const conv *c, const chat_vision *cv, int32_t **ids, rkm_media_prompt *mp)
{
    if (cv->v && c->n_img > c->pending) return media_prompt(m, c, cv, mp);
    return rkm_chat_tokens(m, c->v, c->n, 1, ids);
}

static void answer_local(rkm_model *m, rkm_session *s, conv *c, const chat_settings *st, chat_vision *cv, int quiet)
{
    int32_t *ids = NULL;
    rkm_media_prompt mp = {0};
    int n_sys = c->n && !strcmp(c->v[0].role, "system");
    int n = prompt_of(m, c, cv, &ids, &mp);
    /* drop the oldest turns while the prompt plus an answer would not fit */
    int cap = rkm_session_n_ctx(s), want = st->n_predict < 0 ? cap / 4 : RKM_MIN(st->n_predict, cap / 4);
    while (n > 0 && c->n - n_sys > 1 && n + want > cap) {
        conv_drop(c, n_sys);
        free(ids);
        ids = NULL;
        rkm_media_prompt_free(&mp);
        n = prompt_of(m, c, cv, &ids, &mp);
    }
    if (n <= 0) {
        fprintf(stderr, "rkmojo chat: %s\n", n < 0 ? rkm_last_error() : "empty prompt");
        free(ids);
        rkm_media_prompt_free(&mp);
        conv_drop(c, c->n - 1);
        return;
    }
    int rc;
    rkm_session_stats_reset(s);
    rkm_session_set_sampler(s, &st->sp);
    if (mp.n_ids) { /* with images: what the session holds of it is kept (media.c) */
        int enc = 0;
        rc = rkm_media_prompt_eval(s, &mp, cv->v, cv->pool, &enc);
        if (rkm_knob_is(RKM_KNOB_CHAT_DEBUG, "1")) fprintf(stderr, "[prompt: %d positions, %d images encoded]\n", n, enc);
        rkm_media_prompt_free(&mp);
    } else { /* keep the KV rows of the longest common prefix */
        int held;
        const int32_t *have = rkm_session_tokens(s, &held);
        int common = 0;
        while (common < held && common < n && have[common] == ids[common]) common++;
        if (common == n) common--; /* re-evaluate the last token to get logits */
        if (rkm_knob_is(RKM_KNOB_CHAT_DEBUG, "1"))
            fprintf(stderr, "[kv: %d held, %d reused, %d new]\n", held, common, n - common);
        rc = rkm_session_truncate(s, common);
        if (!rc) rc = rkm_session_eval(s, ids + common, n - common, NULL);
        free(ids);
    }
    if (rc) {
        fprintf(stderr, "\nrkmojo chat: %s\n", rc == RKM_ECANCELED ? "stopped" : rkm_last_error());
        conv_drop(c, c->n - 1);
        if (rc != RKM_ECANCELED) rkm_session_truncate(s, 0);
        return;
    }
    generate_answer(m, s, c, st, quiet, cap);
}

/* The answer after the prompt: streamed, appended to c, the footer. */
static void generate_answer(rkm_model *m, rkm_session *s, conv *c, const chat_settings *st, int quiet, int cap)
{
    rkm_text_out out;
    rkm_text_out_init(&out, m, stdout, NULL, 0);
    out.keep_all = 1;
    int rc = rkm_session_generate(s, st->n_predict < 0 ? cap : st->n_predict, on_token, &out);
    rkm_text_out_finish(&out);
    printf("\n");
    if (rc == RKM_ECANCELED) fprintf(stderr, "(stopped)\n");
    else if (rc) fprintf(stderr, "rkmojo chat: %s\n", rkm_last_error());
    conv_add(c, "assistant", out.all.data ? out.all.data : "");
    rkm_text_out_free(&out);
    if (!quiet) {
        rkm_stats stt;
        rkm_session_stats(s, &stt);
        rkm_print_footer(stderr, &stt);
    }
}

/* --------------------------------------------------------------- remote */

typedef struct {
    rkm_buf line;    /* a partial SSE line */
    rkm_buf reply;   /* the answer's text */
    rkm_buf errbody; /* a non-stream body (an error) */
    int in_reasoning, tty;
    char error[512];
    int n_tokens;
} sse;

static void sse_line(sse *x, const char *l)
{
    if (strncmp(l, "data: ", 6)) {
        rkm_buf_adds(&x->errbody, l);
        return;
    }
    if (!strcmp(l + 6, "[DONE]")) return;
    cJSON *o = cJSON_Parse(l + 6);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (e) {
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
        snprintf(x->error, sizeof x->error, "%s", cJSON_IsString(msg) ? msg->valuestring : "error");
    }
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "usage");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
    if (cJSON_IsNumber(ct)) x->n_tokens = ct->valueint;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0), "delta");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "reasoning_content");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(d, "content");
    if (cJSON_IsString(r) && r->valuestring[0]) { /* reasoning, dimmed on a terminal */
        if (!x->in_reasoning && x->tty) fputs("\x1b[2m", stdout);
        x->in_reasoning = 1;
        fputs(r->valuestring, stdout);
    }
    if (cJSON_IsString(t) && t->valuestring[0]) {
        if (x->in_reasoning) fputs(x->tty ? "\x1b[0m\n" : "\n", stdout);
        x->in_reasoning = 0;
        fputs(t->valuestring, stdout);
        rkm_buf_adds(&x->reply, t->valuestring);
    }
    fflush(stdout);
    cJSON_Delete(o);
}

static int on_sse(const char *p, size_t n, void *user)
{
    sse *x = user;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\n') {
            rkm_buf_addc(&x->line, p[i]);
            continue;
        }
        if (x->line.len) sse_line(x, x->line.data);
        rkm_buf_clear(&x->line);
    }
    return g_interrupted;
}

static void answer_remote(const char *base, const char *key, const char *model, conv *c, const chat_settings *st)
{
    cJSON *o = cJSON_CreateObject();
    if (model) cJSON_AddStringToObject(o, "model", model);
    if (conv_to_json(c, o, 1)) {
        cJSON_Delete(o);
        conv_drop(c, c->n - 1);
        return;
    }
    cJSON_AddBoolToObject(o, "stream", 1);
    cJSON_AddItemToObject(cJSON_AddObjectToObject(o, "stream_options"), "include_usage", cJSON_CreateTrue());
    cJSON_AddNumberToObject(o, "temperature", st->sp.temperature);
    cJSON_AddNumberToObject(o, "top_k", st->sp.top_k);
    cJSON_AddNumberToObject(o, "top_p", st->sp.top_p);
    cJSON_AddNumberToObject(o, "min_p", st->sp.min_p);
    cJSON_AddNumberToObject(o, "repeat_penalty", st->sp.repeat_penalty);
    cJSON_AddNumberToObject(o, "seed", (double)(st->sp.seed & ((1ull << 53) - 1)));
    if (st->n_predict >= 0) cJSON_AddNumberToObject(o, "max_tokens", st->n_predict);
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    sse x = {.line = RKM_BUF_INIT, .reply = RKM_BUF_INIT, .errbody = RKM_BUF_INIT, .tty = isatty(1)};
    char err[600];
    long status = 0;
    double t0 = rkm_now();
    int rc = body ? rkm_http_post(base, "/v1/chat/completions", key, body, on_sse, &x, &g_interrupted, &status, err, sizeof err) : -1;
    free(body);
    if (x.line.len) sse_line(&x, x.line.data);
    if (x.in_reasoning && x.tty) fputs("\x1b[0m", stdout);
    printf("\n");
    fflush(stdout);
    if (rc) {
        fprintf(stderr, "rkmojo chat: %s\n", body ? err : "out of memory");
    } else if (status != 200) {
        cJSON *e = cJSON_Parse(x.errbody.data ? x.errbody.data : "");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "error"), "message");
        fprintf(stderr, "rkmojo chat: the server says %ld: %s\n", status, cJSON_IsString(msg) ? msg->valuestring : "(no message)");
        cJSON_Delete(e);
    } else if (x.error[0]) {
        fprintf(stderr, "rkmojo chat: %s\n", x.error);
    }
    if (g_interrupted) fprintf(stderr, "(stopped)\n");
    if (rc || status != 200) {
        conv_drop(c, c->n - 1); /* the question goes with the failed answer */
    } else {
        conv_add(c, "assistant", x.reply.data ? x.reply.data : "");
        double dt = rkm_now() - t0;
        if (x.n_tokens > 0) fprintf(stderr, "%d tokens, %.1f tok/s\n", x.n_tokens, x.n_tokens / RKM_MAX(dt, 1e-9));
    }
    rkm_buf_free(&x.line);
    rkm_buf_free(&x.reply);
    rkm_buf_free(&x.errbody);
}

/* ------------------------------------------------------------- command */

int rkm_cmd_chat(int argc, char **argv)
{
    rkm_gen_opts o;
    rkm_gen_opts_init(&o, 1);
    const char *system = NULL, *url = NULL, *api_key = NULL, *mmproj = NULL;
    int img_min = 0, img_max = 0;
    int n_predict = 1024;
    const rkm_opt opts[] = {
        {"system", 0, RKM_OPT_STR, &system, .arg = "TEXT", .help = "system message"},
        {"n-predict", 'n', RKM_OPT_INT, &n_predict, -1, 1 << 30, "N", .help = "most tokens per answer (default 1024; -1: no limit)"},
        {"url", 0, RKM_OPT_STR, &url, .arg = "URL",
         .help = "chat with a running `rkmojo serve` (e.g. http://127.0.0.1:8080; -m then names its model)"},
        {"api-key", 0, RKM_OPT_STR, &api_key, .arg = "KEY", .help = "the server's API key (--url; default $RKMOJO_API_KEY)"},
        {"image-max-tokens", 0, RKM_OPT_INT, &img_max, 1, 1 << 20, "N", .help = "at most N tokens an image (default: the projector's)"},
        {"image-min-tokens", 0, RKM_OPT_INT, &img_min, 1, 1 << 20, "N", .help = "at least N tokens an image"},
        {"mmproj", 0, RKM_OPT_STR, &mmproj, .arg = "FILE", .help = "the vision tower (an mmproj GGUF) for /image (default: the\nmodel's own, convert --mmproj)"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "chat", "usage: rkmojo chat -m MODEL [--system TEXT] [-n MAX_TOKENS_PER_ANSWER] [options]\n"
                "       rkmojo chat --url URL [-m NAME] [--api-key KEY] [options]\n\n",
        "In the chat: /help lists the commands (/set, /show, /clear, /save, /load,\n"
        "/bye); \"\"\" starts and ends a multi-line message; Ctrl-C stops an answer,\n"
        "Ctrl-D quits.\n",
        {opts, o.model_opts, o.session_opts, o.sampling_opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    rkm_model *m = NULL;
    rkm_session *s = NULL;
    char *carried = NULL;
    chat_settings st = {.sp = o.sp.sampler, .n_predict = n_predict};
    const char *base = NULL;
    if (!api_key) api_key = getenv("RKMOJO_API_KEY");
    if (url) {
        base = rkm_http_base(url);
        char *body = NULL, err[600];
        long status = 0;
        if (rkm_http_get(base, "/health", NULL, &body, &status, err, sizeof err) || status != 200) {
            fprintf(stderr, "rkmojo chat: no server at %s (%s)\n", base, body ? "bad /health" : err);
            free(body);
            return 1;
        }
        free(body);
        if (!o.seed_given) st.sp.seed = (uint64_t)rkm_now() * 1000003u;
    } else {
        /* the tower: --mmproj, else the model's own; a session chunk that
         * holds an image attended both ways */
        if (!mmproj && o.model) {
            rkm_model_dir *md = rkm_model_dir_load_manifest(o.model);
            if (md && md->mmproj_file) mmproj = carried = rkm_path_join(md->path, md->mmproj_file);
            rkm_model_dir_close(md);
        }
        int rows = mmproj ? rkm_cli_tower_rows(mmproj, img_max) : 0;
        if (rows > (o.sp.n_chunk > 0 ? o.sp.n_chunk : 128)) o.sp.n_chunk = rows;
        int rc = rkm_gen_open(&o, &m, &s);
        if (rc) {
            free(carried);
            return rc;
        }
        if (!rkm_model_tokenizer(m)) {
            fprintf(stderr, "rkmojo chat: the model has no tokenizer\n");
            rkm_session_free(s);
            rkm_model_close(m);
            return 1;
        }
        st.sp = o.sp.sampler; /* with the model's defaults (rkm_gen_open) */
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    input in;
    input_init(&in);
    conv c = {0};
    chat_vision cv = {mmproj, img_min, img_max, NULL, NULL, url != NULL};
    if (system) conv_add(&c, "system", system);
    if (in.tty)
        fprintf(stderr, "rkmojo chat (%s). /help for commands, Ctrl-C stops an answer, Ctrl-D quits.\n",
                url ? base : rkm_model_arch(m));
    for (;;) {
        signal(SIGINT, in.tty ? SIG_DFL : SIG_IGN); /* at the prompt: Ctrl-C ends the program */
        char *line = read_message(&in);
        if (!line) break;
        if (!line[0]) {
            free(line);
            continue;
        }
        if (line[0] == '/') {
            int reset = 0, quit = command(line, &st, &c, &cv, &reset);
            fflush(stdout);
            free(line);
            if (quit) break;
            if (reset && s) rkm_session_truncate(s, 0);
            continue;
        }
        int added = conv_add_user(&c, line);
        free(line);
        if (added) break;
        g_interrupted = 0;
        sigaction(SIGINT, &sa, NULL);
        g_session = s;
        if (url) answer_remote(base, api_key, o.model, &c, &st);
        else answer_local(m, s, &c, &st, &cv, o.quiet);
        fflush(stdout);
        g_session = NULL;
    }
    conv_free(&c);
    rkm_pool_free(cv.pool);
    rkm_vision_free(cv.v);
    free(carried);
    rkm_session_free(s);
    rkm_model_close(m);
    return 0;
}
