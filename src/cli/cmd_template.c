/*
 * cmd_template.c - `rkmojo template`: renders a chat template for a
 * conversation and prints the result verbatim (no trailing newline added).
 * A debugging aid, and what tests/test-chat-ref.sh drives to compare our
 * Jinja interpreter with @huggingface/jinja.
 *
 *   rkmojo template (--template FILE | --builtin NAME)
 *                   [--messages FILE.json] [--vars FILE.json]
 *                   [--add-generation-prompt] [--bos S] [--eos S] [--set NAME=VALUE]...
 *                   [--show]   (print the template source instead)
 *   rkmojo template --batch DIR   (for each DIR/NAME.tmpl with NAME.vars.json:
 *                   writes NAME.got, or NAME.goterr with the error message)
 *
 * --messages holds a JSON array of {role, content, ...}; --vars a JSON object
 * of all variables (messages included); the flags then override it.
 * Single-threaded; everything is freed before returning.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "text/chat.h"
#include "util/common.h"

static cJSON *read_json(const char *path)
{
    size_t n;
    char *s = rkm_read_file(path, &n);
    if (!s) return NULL;
    cJSON *j = cJSON_ParseWithLength(s, n);
    free(s);
    if (!j) rkm_err(RKM_EFORMAT, "%s: invalid JSON", path);
    return j;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int write_text(const char *dir, const char *base, const char *ext, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s", dir, base, ext);
    FILE *f = fopen(path, "wb");
    if (!f) return rkm_err(RKM_EIO, "%s: cannot write", path);
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? 0 : rkm_err(RKM_EIO, "%s: write failed", path);
}

/* --batch: one process for many cases (tests/test-chat-ref.sh). */
static int run_batch(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "rkmojo template: cannot open %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".tmpl")) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof(char *));
            if (!nn) break;
            names = nn;
        }
        names[n] = strndup(de->d_name, l - 5);
        if (names[n]) n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof(char *), cmp_names);
    int rc = 0, n_ok = 0, n_err = 0;
    for (size_t i = 0; i < n; i++) {
        char tp[4096], vp[4096];
        snprintf(tp, sizeof tp, "%s/%s.tmpl", dir, names[i]);
        snprintf(vp, sizeof vp, "%s/%s.vars.json", dir, names[i]);
        size_t len;
        char *src = rkm_read_file(tp, &len), *out = NULL;
        cJSON *vars = NULL;
        if (src && strlen(src) != len) rkm_err(RKM_EFORMAT, "template contains a NUL byte");
        else if (src && (vars = read_json(vp))) out = rkm_chat_render_vars(src, vars);
        if (out) {
            if (write_text(dir, names[i], ".got", out)) rc = 1;
            n_ok++;
        } else {
            if (write_text(dir, names[i], ".goterr", rkm_last_error())) rc = 1;
            n_err++;
        }
        free(out);
        free(src);
        cJSON_Delete(vars);
        free(names[i]);
    }
    free(names);
    printf("%d rendered, %d failed\n", n_ok, n_err);
    return rc;
}

int rkm_cmd_template(int argc, char **argv)
{
    const char *tpath = NULL, *builtin = NULL, *mpath = NULL, *vpath = NULL, *bos = NULL, *eos = NULL, *batch = NULL;
    int agp = 0, rc = 1, show = 0;
    char *src = NULL, *out = NULL;
    cJSON *vars = NULL;
    const char **sets = calloc((size_t)argc + 1, sizeof(char *));
    if (!sets) return 1;
    rkm_opt_list set_list = {sets, 0, argc};
    const rkm_opt opts[] = {
        {"template", 0, RKM_OPT_STR, &tpath, .arg = "FILE", .help = "the Jinja template"},
        {"builtin", 0, RKM_OPT_STR, &builtin, .arg = "NAME", .help = "a built-in template: chatml, llama2, llama3, gemma, mistral"},
        {"messages", 0, RKM_OPT_STR, &mpath, .arg = "FILE.json", .help = "a JSON array of {role, content, ...}"},
        {"vars", 0, RKM_OPT_STR, &vpath, .arg = "FILE.json", .help = "a JSON object of all variables (messages included)"},
        {"add-generation-prompt", 0, RKM_OPT_FLAG, &agp, .help = "set add_generation_prompt"},
        {"bos", 0, RKM_OPT_STR, &bos, .arg = "S", .help = "bos_token"},
        {"eos", 0, RKM_OPT_STR, &eos, .arg = "S", .help = "eos_token"},
        {"set", 0, RKM_OPT_LIST, &set_list, .arg = "NAME=VALUE", .help = "set a string variable (repeatable)"},
        {"show", 0, RKM_OPT_FLAG, &show, .help = "print the template source instead"},
        {"batch", 0, RKM_OPT_STR, &batch, .arg = "DIR",
         .help = "for each DIR/NAME.tmpl with NAME.vars.json: write NAME.got,\nor NAME.goterr with the error message"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "template",
        "usage: rkmojo template (--template FILE | --builtin NAME) [--messages FILE.json]\n"
        "                       [--vars FILE.json] [--add-generation-prompt] [--bos S] [--eos S]\n"
        "                       [--set NAME=VALUE]... [--show]\n"
        "       rkmojo template --batch DIR\n"
        "Renders a Jinja chat template and prints the result; the flags override --vars.\n\n",
        NULL, {opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    int n_sets = set_list.n;
    if (parsed != RKM_OPTS_CONTINUE || batch) {
        free(sets);
        return parsed != RKM_OPTS_CONTINUE ? parsed : run_batch(batch);
    }
    if (!tpath == !builtin) {
        free(sets);
        return rkm_opts_error(&cmd, "needs one of --template FILE or --builtin NAME");
    }
    if (tpath) {
        size_t n;
        src = rkm_read_file(tpath, &n);
        if (!src) goto done;
        if (strlen(src) != n) {
            rkm_err(RKM_EFORMAT, "%s: template contains a NUL byte", tpath);
            goto done;
        }
    } else {
        const char *b = rkm_chat_builtin_template(builtin);
        if (!b) {
            rkm_err(RKM_ENOENT, "no built-in template '%s'", builtin);
            goto done;
        }
        src = strdup(b);
        if (!src) goto done;
    }
    if (show) { /* print the template source itself */
        fwrite(src, 1, strlen(src), stdout);
        rc = 0;
        goto done;
    }
    if (vpath) {
        if (!(vars = read_json(vpath))) goto done;
        if (!cJSON_IsObject(vars)) {
            rkm_err(RKM_EFORMAT, "%s: expected a JSON object", vpath);
            goto done;
        }
    } else {
        vars = cJSON_CreateObject();
    }
    if (mpath) {
        cJSON *m = read_json(mpath);
        if (!m) goto done;
        if (!cJSON_IsArray(m)) {
            cJSON_Delete(m);
            rkm_err(RKM_EFORMAT, "%s: expected a JSON array of messages", mpath);
            goto done;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(vars, "messages");
        cJSON_AddItemToObject(vars, "messages", m);
    }
    if (agp) {
        cJSON_DeleteItemFromObjectCaseSensitive(vars, "add_generation_prompt");
        cJSON_AddBoolToObject(vars, "add_generation_prompt", 1);
    }
    const char *kv[][2] = {{"bos_token", bos}, {"eos_token", eos}};
    for (int i = 0; i < 2; i++)
        if (kv[i][1]) {
            cJSON_DeleteItemFromObjectCaseSensitive(vars, kv[i][0]);
            cJSON_AddStringToObject(vars, kv[i][0], kv[i][1]);
        }
    for (int i = 0; i < n_sets; i++) {
        const char *eq = strchr(sets[i], '=');
        if (!eq) {
            rkm_err(RKM_EINVAL, "--set expects NAME=VALUE, got '%s'", sets[i]);
            goto done;
        }
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)RKM_MIN((size_t)(eq - sets[i]), sizeof name - 1), sets[i]);
        cJSON_DeleteItemFromObjectCaseSensitive(vars, name);
        cJSON_AddStringToObject(vars, name, eq + 1);
    }
    out = rkm_chat_render_vars(src, vars);
    if (!out) goto done;
    fwrite(out, 1, strlen(out), stdout);
    fflush(stdout);
    rc = 0;
done:
    if (rc) fprintf(stderr, "rkmojo template: %s\n", rkm_last_error());
    free(out);
    free(src);
    cJSON_Delete(vars);
    free(sets);
    return rc;
}
