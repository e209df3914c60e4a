/*
 * models.c - the model registry of rkmojo serve. With -m it holds one model
 * directory and accepts any model name (clients always send one). With
 * --models-dir it lists the subdirectories that hold a manifest.json, named
 * by their directory name without ".rkmojo"; clients may add ":latest".
 *
 * Security: a client's model name is only ever compared with the names of
 * this list; no path is built from it, so nothing a client sends reaches
 * the file system outside the configured directories.
 *
 * Threads: any thread; the list is guarded by ms->mu. Lookups copy entries
 * out, so a rescan never invalidates what a caller holds.
 */
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

#include "format/model_dir.h"
#include "server/server.h"
#include "util/common.h"

struct srv_models {
    char *single;         /* -m path, or NULL */
    char *dir;            /* --models-dir, or NULL */
    pthread_mutex_t mu;   /* guards list, n */
    srv_model_info *list;
    int n;
    double scanned;       /* monotonic time of the last scan */
};

/* Bytes of a model directory (regular files, two levels: experts/). */
static uint64_t dir_bytes(const char *path, int depth)
{
    DIR *d = opendir(path);
    if (!d) return 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char *p = rkm_path_join(path, de->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0) {
            if (S_ISREG(st.st_mode)) total += (uint64_t)st.st_size;
            else if (S_ISDIR(st.st_mode) && depth > 0) total += dir_bytes(p, depth - 1);
        }
        free(p);
    }
    closedir(d);
    return total;
}

static int describe(const char *path, const char *name, srv_model_info *mi)
{
    memset(mi, 0, sizeof *mi);
    char *man = rkm_path_join(path, "manifest.json");
    struct stat st;
    int ok = man && stat(man, &st) == 0 && S_ISREG(st.st_mode);
    if (!ok) {
        free(man);
        return -1;
    }
    snprintf(mi->name, sizeof mi->name, "%s", name);
    mi->path = strdup(path);
    mi->mtime = (double)st.st_mtime;
    mi->bytes = dir_bytes(path, 1);
    size_t len = 0;
    char *json = rkm_read_file(man, &len);
    if (json) {
        mi->digest = rkm_hash(json, len);
        rkm_model_dir *md = rkm_model_dir_parse_manifest(json, len, path);
        if (md) {
            snprintf(mi->arch, sizeof mi->arch, "%s", md->hp.arch_name);
            snprintf(mi->quant, sizeof mi->quant, "%s", md->quant ? md->quant : "");
            mi->n_ctx_train = md->hp.n_ctx_train;
            uint64_t np = 0;
            for (int i = 0; i < md->n_tensors; i++) {
                uint64_t k = 1;
                for (int d = 0; d < md->tensors[i].n_dims; d++) k *= (uint64_t)md->tensors[i].ne[d];
                np += k;
            }
            for (int i = 0; i < md->n_expert_layers; i++) {
                const rkm_expert_layer *el = &md->experts[i];
                for (int p = 0; p < RKM_PART_COUNT; p++)
                    np += (uint64_t)el->n_expert * (uint64_t)el->part[p].ne[0] *
                          (uint64_t)el->part[p].ne[1];
            }
            mi->n_params = np;
            rkm_model_dir_close(md);
        }
        free(json);
    }
    free(man);
    return mi->path ? 0 : -1;
}

static void name_of_dir(const char *path, char *out, size_t cap)
{
    const char *b = strrchr(path, '/');
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", b && b[1] ? b + 1 : path);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
    if (n > 7 && !strcmp(tmp + n - 7, ".rkmojo")) tmp[n - 7] = 0;
    snprintf(out, cap, "%s", tmp);
}

static int cmp_info(const void *a, const void *b)
{
    return strcmp(((const srv_model_info *)a)->name, ((const srv_model_info *)b)->name);
}

void srv_models_list_free(srv_model_info *l, int n)
{
    for (int i = 0; i < n; i++) free(l[i].path);
    free(l);
}

static void scan(srv_models *ms)
{
    srv_model_info *list = NULL;
    int n = 0, cap = 0;
    if (ms->single) {
        char name[136];
        list = calloc(1, sizeof *list);
        name_of_dir(ms->single, name, sizeof name);
        if (!srv_model_name_ok(name)) snprintf(name, sizeof name, "model");
        if (list && describe(ms->single, name, &list[0]) == 0) n = 1;
    } else {
        DIR *d = opendir(ms->dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            char name[136];
            if (de->d_name[0] == '.') continue;
            name_of_dir(de->d_name, name, sizeof name);
            if (!srv_model_name_ok(name)) continue; /* unreachable by clients anyway */
            char *p = rkm_path_join(ms->dir, de->d_name);
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                srv_model_info *l2 = realloc(list, sizeof *list * (size_t)cap);
                if (!l2) {
                    free(p);
                    break;
                }
                list = l2;
            }
            if (p && describe(p, name, &list[n]) == 0) n++;
            free(p);
        }
        if (d) closedir(d);
        qsort(list, (size_t)n, sizeof *list, cmp_info);
    }
    pthread_mutex_lock(&ms->mu);
    srv_models_list_free(ms->list, ms->n);
    ms->list = list;
    ms->n = n;
    ms->scanned = rkm_now();
    pthread_mutex_unlock(&ms->mu);
}

srv_models *srv_models_new(const char *model_path, const char *models_dir)
{
    srv_models *ms = calloc(1, sizeof *ms);
    if (!ms) return NULL;
    pthread_mutex_init(&ms->mu, NULL);
    ms->single = model_path ? strdup(model_path) : NULL;
    ms->dir = models_dir ? strdup(models_dir) : NULL;
    if ((model_path && !ms->single) || (models_dir && !ms->dir)) {
        srv_models_free(ms);
        return NULL;
    }
    scan(ms);
    return ms;
}

void srv_models_free(srv_models *ms)
{
    if (!ms) return;
    srv_models_list_free(ms->list, ms->n);
    free(ms->single);
    free(ms->dir);
    pthread_mutex_destroy(&ms->mu);
    free(ms);
}

void srv_models_refresh(srv_models *ms)
{
    /* Listings rescan at most every two seconds: a directory walk per
     * request would let a client make the server stat files in a loop. */
    pthread_mutex_lock(&ms->mu);
    int stale = rkm_now() - ms->scanned > 2.0;
    pthread_mutex_unlock(&ms->mu);
    if (stale) scan(ms);
}

void srv_models_rescan(srv_models *ms) { scan(ms); }

int srv_models_find(srv_models *ms, const char *name, srv_model_info *out)
{
    char base[136];
    srv_model_name_base(name ? name : "", base, sizeof base);
    for (int pass = 0; pass < 2; pass++) {
        pthread_mutex_lock(&ms->mu);
        int found = -1;
        for (int i = 0; i < ms->n && found < 0; i++)
            if (ms->single || !base[0] || !strcmp(ms->list[i].name, base)) found = i;
        if (found >= 0) {
            *out = ms->list[found];
            out->path = strdup(ms->list[found].path);
        }
        pthread_mutex_unlock(&ms->mu);
        if (found >= 0) return out->path ? 0 : RKM_ENOMEM;
        if (pass == 0) srv_models_refresh(ms); /* a model added since the last scan */
    }
    return rkm_err(RKM_ENOENT, "model '%s' not found", base);
}

int srv_models_list(srv_models *ms, srv_model_info **out)
{
    srv_models_refresh(ms);
    pthread_mutex_lock(&ms->mu);
    int n = ms->n;
    *out = calloc((size_t)RKM_MAX(n, 1), sizeof **out);
    for (int i = 0; *out && i < n; i++) {
        (*out)[i] = ms->list[i];
        (*out)[i].path = strdup(ms->list[i].path);
    }
    pthread_mutex_unlock(&ms->mu);
    return *out ? n : RKM_ENOMEM;
}

void srv_fmt_params(uint64_t n, char *buf, size_t cap)
{
    if (n >= 1000000000ull) snprintf(buf, cap, "%.1fB", (double)n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, cap, "%.1fM", (double)n / 1e6);
    else snprintf(buf, cap, "%.1fK", (double)n / 1e3);
}

void srv_model_details(cJSON *o, const srv_model_info *mi)
{
    cJSON *d = cJSON_AddObjectToObject(o, "details");
    char ps[32];
    srv_fmt_params(mi->n_params, ps, sizeof ps);
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", "rkmojo");
    cJSON_AddStringToObject(d, "family", mi->arch);
    cJSON *f = cJSON_AddArrayToObject(d, "families");
    cJSON_AddItemToArray(f, cJSON_CreateString(mi->arch));
    cJSON_AddStringToObject(d, "parameter_size", ps);
    cJSON_AddStringToObject(d, "quantization_level", mi->quant);
}

/* The OpenAI model object of one entry. */
static cJSON *openai_model(const srv_model_info *mi)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", mi->name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", floor(mi->mtime));
    cJSON_AddStringToObject(m, "owned_by", "rkmojo");
    return m;
}

char *srv_models_openai_one_json(srv_models *ms, const char *id)
{
    srv_model_info *l;
    int n = srv_models_list(ms, &l);
    if (n < 0) return NULL;
    cJSON *o = NULL;
    for (int i = 0; i < n && !o; i++)
        if (!strcmp(l[i].name, id)) o = openai_model(&l[i]);
    srv_models_list_free(l, n);
    return o ? srv_json_print(o) : NULL;
}

char *srv_models_openai_json(srv_models *ms)
{
    srv_model_info *l;
    int n = srv_models_list(ms, &l);
    if (n < 0) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(data, openai_model(&l[i]));
    srv_models_list_free(l, n);
    return srv_json_print(o);
}

char *srv_models_tags_json(srv_models *ms)
{
    srv_model_info *l;
    int n = srv_models_list(ms, &l);
    if (n < 0) return NULL;
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "models");
    for (int i = 0; i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        char name[160], t[48], dg[17];
        snprintf(name, sizeof name, "%s:latest", l[i].name);
        srv_fmt_time(l[i].mtime, t, sizeof t);
        snprintf(dg, sizeof dg, "%016llx", (unsigned long long)l[i].digest);
        cJSON_AddStringToObject(m, "name", name);
        cJSON_AddStringToObject(m, "model", name);
        cJSON_AddStringToObject(m, "modified_at", t);
        cJSON_AddNumberToObject(m, "size", (double)l[i].bytes);
        cJSON_AddStringToObject(m, "digest", dg);
        srv_model_details(m, &l[i]);
        cJSON_AddItemToArray(arr, m);
    }
    srv_models_list_free(l, n);
    return srv_json_print(o);
}

char *srv_models_show_json(srv_models *ms, const char *name, const char *chat_template)
{
    srv_model_info mi;
    if (srv_models_find(ms, name, &mi)) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "modelfile", "");
    cJSON_AddStringToObject(o, "parameters", "");
    char *tf = chat_template ? NULL : rkm_path_join(mi.path, "chat_template.jinja");
    char *tt = tf ? rkm_read_file(tf, NULL) : NULL;
    free(tf);
    cJSON_AddStringToObject(o, "template", chat_template ? chat_template : tt ? tt : "");
    free(tt);
    srv_model_details(o, &mi);
    cJSON *info = cJSON_AddObjectToObject(o, "model_info");
    cJSON_AddStringToObject(info, "general.architecture", mi.arch);
    cJSON_AddNumberToObject(info, "general.parameter_count", (double)mi.n_params);
    char key[64];
    snprintf(key, sizeof key, "%s.context_length", mi.arch);
    cJSON_AddNumberToObject(info, key, mi.n_ctx_train);
    cJSON *caps = cJSON_AddArrayToObject(o, "capabilities");
    cJSON_AddItemToArray(caps, cJSON_CreateString("completion"));
    cJSON_AddItemToArray(caps, cJSON_CreateString("embedding"));
    char t[48];
    srv_fmt_time(mi.mtime, t, sizeof t);
    cJSON_AddStringToObject(o, "modified_at", t);
    free(mi.path);
    return srv_json_print(o);
}
