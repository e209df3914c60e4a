/* cmd_models.c - `rkmojo list`, `rkmojo show NAME`, `rkmojo rm NAME`, `rkmojo ps`: the
 * models of a models directory (one NAME.rkmojo directory each, as
 * `rkmojo serve --models-dir` serves them), the way `ollama list / show /
 * rm` present theirs. The directory is --models-dir, else $RKMOJO_MODELS,
 * else ~/.rkmojo/models. The listing is the server's (server/models.c).
 * `rkmojo ps` asks a running server which models it holds. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/http_client.h"
#include "cli/opts.h"
#include "format/model_dir.h"
#include "server/fields.h"
#include "server/server.h"
#include "util/common.h"

const char *rkm_cli_models_dir(const char *opt, char *buf, size_t cap)
{
    if (opt) return opt;
    const char *env = getenv("RKMOJO_MODELS");
    if (env && *env) return env;
    const char *home = getenv("HOME");
    snprintf(buf, cap, "%s/.rkmojo/models", home && *home ? home : ".");
    return buf;
}

static void fmt_size(uint64_t b, char *buf, size_t cap)
{
    if (b >= 1000000000ull) snprintf(buf, cap, "%.1f GB", (double)b / 1e9);
    else if (b >= 1000000ull) snprintf(buf, cap, "%.1f MB", (double)b / 1e6);
    else snprintf(buf, cap, "%.1f KB", (double)b / 1e3);
}

static void fmt_ago(double mtime, char *buf, size_t cap)
{
    double d = (double)time(NULL) - mtime;
    if (d < 120) snprintf(buf, cap, "%s", "just now");
    else if (d < 7200) snprintf(buf, cap, "%.0f minutes ago", d / 60);
    else if (d < 172800) snprintf(buf, cap, "%.0f hours ago", d / 3600);
    else snprintf(buf, cap, "%.0f days ago", d / 86400);
}

/* Parses [--models-dir DIR] and n_pos positional arguments into pos;
 * *dir becomes the models directory (models_dir, buf for the default). */
static int parse(const char *name, const char *usage, int argc, char **argv, const char **dir, char *buf, size_t cap,
                 const char **pos, int n_pos)
{
    const rkm_opt opts[] = {
        {"models-dir", 0, RKM_OPT_STR, dir, .arg = "DIR",
         .help = "the models directory (default: $RKMOJO_MODELS, else ~/.rkmojo/models)"},
        {0},
    };
    const rkm_opts_cmd cmd = {name, usage, NULL, {opts}, n_pos};
    int first = argc;
    int parsed = rkm_opts_parse(&cmd, argc, argv, &first);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    if (argc - first != n_pos) return rkm_opts_error(&cmd, n_pos ? "give the model's name" : "no arguments expected");
    for (int i = 0; i < n_pos; i++) pos[i] = argv[first + i];
    *dir = rkm_cli_models_dir(*dir, buf, cap);
    return RKM_OPTS_CONTINUE;
}

/* The model NAME of the models directory (mi->path: the caller frees);
 * 0, or 1 after a message. */
static int find_model(const char *cmd, const char *dir, const char *name, srv_model_info *mi)
{
    srv_models *ms = srv_models_new(NULL, dir);
    int rc = !ms || srv_models_find(ms, name, mi);
    if (rc) fprintf(stderr, "rkmojo %s: %s (in %s)\n", cmd, ms ? rkm_last_error() : "out of memory", dir);
    srv_models_free(ms);
    return rc;
}

int rkm_cmd_list(int argc, char **argv)
{
    const char *dir = NULL;
    char buf[4096];
    int rc = parse("list", "usage: rkmojo list [--models-dir DIR]\n\n", argc, argv, &dir, buf, sizeof buf, NULL, 0);
    if (rc != RKM_OPTS_CONTINUE) return rc;
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "rkmojo list: %s is not a directory (set --models-dir or $RKMOJO_MODELS)\n", dir);
        return 1;
    }
    srv_models *ms = srv_models_new(NULL, dir);
    srv_model_info *l = NULL;
    int n = ms ? srv_models_list(ms, &l) : RKM_ENOMEM;
    if (n < 0) {
        fprintf(stderr, "rkmojo list: %s\n", rkm_last_error());
        srv_models_free(ms);
        return 1;
    }
    printf("%-32s %-16s %-10s %-12s %-10s %s\n", "NAME", "ID", "SIZE", "ARCH", "QUANT", "MODIFIED");
    for (int i = 0; i < n; i++) {
        char id[17], size[32], ago[48];
        snprintf(id, sizeof id, "%016llx", (unsigned long long)l[i].digest);
        id[12] = 0;
        fmt_size(l[i].bytes, size, sizeof size);
        fmt_ago(l[i].mtime, ago, sizeof ago);
        printf("%-32s %-16s %-10s %-12s %-10s %s\n", l[i].name, id, size, l[i].arch, l[i].quant, ago);
    }
    srv_models_list_free(l, n);
    srv_models_free(ms);
    return 0;
}

int rkm_cmd_show(int argc, char **argv)
{
    const char *dir = NULL, *name = NULL;
    char buf[4096];
    int rc = parse("show", "usage: rkmojo show NAME [--models-dir DIR]\n\n", argc, argv, &dir, buf, sizeof buf, &name, 1);
    if (rc != RKM_OPTS_CONTINUE) return rc;
    srv_model_info mi;
    if (find_model("show", dir, name, &mi)) return 1;
    rkm_model_dir *md = rkm_model_dir_open(mi.path);
    if (!md) {
        fprintf(stderr, "rkmojo show: %s\n", rkm_last_error());
        free(mi.path);
        return 1;
    }
    const rkm_hparams *hp = &md->hp;
    char ps[32], size[32];
    srv_fmt_params(mi.n_params, ps, sizeof ps);
    fmt_size(mi.bytes, size, sizeof size);
    printf("  Model\n");
    printf("    %-20s %s\n", "architecture", hp->arch_name);
    printf("    %-20s %s\n", "parameters", ps);
    printf("    %-20s %d\n", "context length", hp->n_ctx_train);
    printf("    %-20s %d\n", "embedding length", hp->n_embd);
    printf("    %-20s %s\n", "quantization", mi.quant);
    if (hp->n_expert) printf("    %-20s %d, %d per token\n", "experts", hp->n_expert, hp->n_expert_used);
    printf("    %-20s %s\n", "size on disk", size);
    printf("    %-20s %s\n", "path", mi.path);
    const rkm_sampling_hint *sh = &md->sampling;
    if (sh->set) {
        printf("\n  Parameters (the model's recommended sampling)\n");
        if (sh->set & RKM_SAMPLING_TEMPERATURE) printf("    %-20s %g\n", "temperature", sh->temperature);
        if (sh->set & RKM_SAMPLING_TOP_K) printf("    %-20s %d\n", "top_k", sh->top_k);
        if (sh->set & RKM_SAMPLING_TOP_P) printf("    %-20s %g\n", "top_p", sh->top_p);
        if (sh->set & RKM_SAMPLING_MIN_P) printf("    %-20s %g\n", "min_p", sh->min_p);
        if (sh->set & RKM_SAMPLING_REPEAT_PENALTY) printf("    %-20s %g\n", "repeat_penalty", sh->repeat_penalty);
    }
    printf("\n  Chat template\n    %s\n", md->chat_template_file ? md->chat_template_file : "none (a built-in one by architecture)");
    rkm_model_dir_close(md);
    free(mi.path);
    return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    if (rc) fprintf(stderr, "rkmojo rm: cannot remove %s: %s\n", path, strerror(errno));
    return rc;
}

int rkm_cmd_rm(int argc, char **argv)
{
    const char *dir = NULL, *name = NULL;
    char buf[4096];
    int rc = parse("rm", "usage: rkmojo rm NAME [--models-dir DIR]\n\n", argc, argv, &dir, buf, sizeof buf, &name, 1);
    if (rc != RKM_OPTS_CONTINUE) return rc;
    if (!srv_model_name_ok(name)) {
        fprintf(stderr, "rkmojo rm: '%s' is not a model name\n", name);
        return 2;
    }
    srv_model_info mi;
    if (find_model("rm", dir, name, &mi)) return 1;
    /* the manifest goes first: an interrupted removal leaves no model that
     * looks whole */
    char *man = rkm_path_join(mi.path, "manifest.json");
    struct stat st;
    int ok = man && lstat(mi.path, &st) == 0 && S_ISDIR(st.st_mode) && unlink(man) == 0;
    free(man);
    if (!ok || nftw(mi.path, rm_one, 16, FTW_DEPTH | FTW_PHYS)) {
        fprintf(stderr, "rkmojo rm: cannot remove %s\n", mi.path);
        free(mi.path);
        return 1;
    }
    printf("deleted '%s'\n", mi.name);
    free(mi.path);
    return 0;
}

/* `rkmojo ps`: the models a running server holds (its /api/ps), as
 * `ollama ps` prints them. */
int rkm_cmd_ps(int argc, char **argv)
{
    const char *url = NULL, *key = getenv("RKMOJO_API_KEY");
    const rkm_opt opts[] = {
        {"url", 0, RKM_OPT_STR, &url, .arg = "URL", .help = "the server (default: $RKMOJO_HOST, else http://127.0.0.1:8080)"},
        {"api-key", 0, RKM_OPT_STR, &key, .arg = "KEY", .help = "its API key (default $RKMOJO_API_KEY)"},
        {0},
    };
    const rkm_opts_cmd cmd = {"ps", "usage: rkmojo ps [--url URL] [--api-key KEY]\n\n", NULL, {opts}, 0};
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    const char *base = rkm_http_base(url);
    char *body = NULL, err[600];
    long status = 0;
    if (rkm_http_get(base, "/api/ps", key, &body, &status, err, sizeof err)) {
        fprintf(stderr, "rkmojo ps: no server at %s (%s)\n", base, err);
        return 1;
    }
    cJSON *o = cJSON_Parse(body ? body : "");
    free(body);
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "models"), *m;
    if (status != 200 || !cJSON_IsArray(ms)) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
        if (cJSON_IsObject(e)) e = cJSON_GetObjectItemCaseSensitive(e, "message");
        fprintf(stderr, "rkmojo ps: %s answered %ld%s%s\n", base, status, cJSON_IsString(e) ? ": " : "",
                cJSON_IsString(e) ? e->valuestring : "");
        cJSON_Delete(o);
        return 1;
    }
    printf("%-32s %-18s %-10s %s\n", "NAME", "ID", "SIZE", "UNTIL");
    cJSON_ArrayForEach(m, ms) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(m, "name"), *d = cJSON_GetObjectItemCaseSensitive(m, "digest");
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(m, "size"), *ex = cJSON_GetObjectItemCaseSensitive(m, "expires_at");
        char size[32] = "?", until[64] = "forever";
        if (cJSON_IsNumber(sz)) fmt_size((uint64_t)sz->valuedouble, size, sizeof size);
        /* Ollama writes a far-future time for "forever" */
        if (cJSON_IsString(ex) && strncmp(ex->valuestring, "2318", 4)) {
            struct tm tm;
            memset(&tm, 0, sizeof tm);
            if (strptime(ex->valuestring, "%Y-%m-%dT%H:%M:%S", &tm)) {
                double left = difftime(timegm(&tm), time(NULL));
                if (left < 90) snprintf(until, sizeof until, "%s", left < 0 ? "now" : "under a minute");
                else if (left < 5400) snprintf(until, sizeof until, "%.0f minutes from now", left / 60);
                else snprintf(until, sizeof until, "%.0f hours from now", left / 3600);
            }
        }
        printf("%-32s %-18s %-10s %s\n", cJSON_IsString(n) ? n->valuestring : "?", cJSON_IsString(d) ? d->valuestring : "",
               size, until);
    }
    cJSON_Delete(o);
    return 0;
}
