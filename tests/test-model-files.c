/*
 * test-model-files.c - a model's files changing under a running model:
 * resident weights checked at open (a flipped byte refuses the model) and
 * by the background check (evals fail once it finds the byte), a
 * resident.bin truncated while mapped (an error, not SIGBUS, in both
 * matrix layouts), and files replaced, rewritten or removed noticed by
 * rkm_model_files_changed; a manifest naming a tensor twice refused.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/test.h"
#include "format/model_dir.h"
#include "rkmojo.h"

static char base[600];

/* A fresh copy of the converted model named name. */
static const char *copy_model(const char *name)
{
    static char path[700];
    snprintf(path, sizeof path, "%s/%s.rkmojo", test_tmpdir(), name);
    CHECK(test_sh("rm -rf '%s' && cp -r '%s' '%s'", path, base, path) == 0);
    return path;
}

static rkm_model *open_with(const char *dir, int verify_resident, int pack)
{
    rkm_model_params p;
    rkm_model_params_default(&p);
    p.n_threads = 2;
    p.verify_resident = verify_resident;
    p.pack = pack;
    return rkm_model_open(dir, &p);
}

static int eval_some(rkm_model *m, float *logits)
{
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_ctx = 64;
    rkm_session *s = rkm_session_new(m, &sp);
    if (!s) return RKM_ENOMEM;
    int32_t ids[5] = {1, 7, 3, 11, 5};
    int rc = rkm_session_eval(s, ids, 5, logits);
    rkm_session_free(s);
    return rc;
}

/* Flips one byte in the middle of the largest resident tensor. */
static void flip_resident_byte(const char *dir)
{
    rkm_model_dir *md = rkm_model_dir_load_manifest(dir);
    CHECK(md != NULL);
    if (!md) return;
    const rkm_tensor_view *big = &md->tensors[0];
    for (int i = 1; i < md->n_tensors; i++)
        if (md->tensors[i].nbytes > big->nbytes) big = &md->tensors[i];
    char p[800];
    snprintf(p, sizeof p, "%s/resident.bin", dir);
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    off_t at = (off_t)(big->offset + big->nbytes / 2);
    unsigned char b = 0;
    CHECK(pread(fd, &b, 1, at) == 1);
    b ^= 0x10;
    CHECK(pwrite(fd, &b, 1, at) == 1);
    close(fd);
    rkm_model_dir_close(md);
}

static void test_verify(void)
{
    float *ok = malloc(sizeof(float) * 100000), *got = malloc(sizeof(float) * 100000);
    rkm_model *m = open_with(base, 0, 0);
    CHECK_MSG(m != NULL, "%s", rkm_last_error());
    if (!m) goto out;
    CHECK(rkm_model_verified(m) == 1);
    CHECK(rkm_model_check(m) == 0);
    CHECK(rkm_model_files_changed(m) == 0);
    CHECK(rkm_model_n_vocab(m) <= 100000);
    CHECK_MSG(eval_some(m, ok) == 0, "%s", rkm_last_error());
    rkm_model_close(m);

    const char *dir = copy_model("flipped");
    flip_resident_byte(dir);
    /* at open: refused, naming the tensor */
    m = open_with(dir, 0, 0);
    CHECK(m == NULL);
    CHECK_MSG(strstr(rkm_last_error(), "does not match its checksum") && strstr(rkm_last_error(), "resident.bin"),
              "%s", rkm_last_error());
    rkm_model_close(m);
    /* in the background: the model opens, evals fail once the check has
     * found the byte */
    m = open_with(dir, 1, 0);
    CHECK_MSG(m != NULL, "%s", rkm_last_error());
    if (!m) goto out;
    int rc = 0;
    for (int i = 0; i < 1000 && !(rc = rkm_model_check(m)); i++) usleep(10000);
    CHECK_EQ_INT(rc, RKM_ECHECKSUM);
    CHECK(rkm_model_verified(m) == 0);
    CHECK_EQ_INT(eval_some(m, got), RKM_ECHECKSUM);
    CHECK_MSG(strstr(rkm_last_error(), "does not match its checksum"), "%s", rkm_last_error());
    rkm_model_close(m);
    /* the background check of a sound model ends verified, same logits */
    m = open_with(base, 1, 0);
    CHECK(m != NULL);
    if (!m) goto out;
    for (int i = 0; i < 1000 && !rkm_model_verified(m); i++) usleep(10000);
    CHECK(rkm_model_verified(m) == 1 && rkm_model_check(m) == 0);
    CHECK(eval_some(m, got) == 0);
    CHECK(memcmp(ok, got, sizeof(float) * (size_t)rkm_model_n_vocab(m)) == 0);
    rkm_model_close(m);
    /* closed while the check still runs: it stops (no hang, no leak) */
    m = open_with(base, 1, 0);
    rkm_model_close(m);
out:
    free(ok);
    free(got);
}

static void test_truncated(int pack)
{
    char name[32];
    snprintf(name, sizeof name, "truncated-%d", pack);
    const char *dir = copy_model(name);
    float *logits = malloc(sizeof(float) * 100000);
    rkm_model *m = open_with(dir, 0, pack);
    CHECK_MSG(m != NULL, "%s", rkm_last_error());
    if (!m) goto out;
    CHECK(eval_some(m, logits) == 0);
    CHECK(test_sh("truncate -s 4096 '%s/resident.bin'", dir) == 0);
    CHECK_EQ_INT(rkm_model_files_changed(m), 1);
    CHECK_MSG(strstr(rkm_last_error(), "resident.bin was rewritten"), "%s", rkm_last_error());
    int rc = eval_some(m, logits);
    CHECK_MSG(rc == RKM_EIO && strstr(rkm_last_error(), "shrank"), "pack %d: %d %s", pack, rc, rkm_last_error());
    CHECK_EQ_INT(rkm_model_check(m), RKM_EIO);
    rkm_model_close(m);
out:
    free(logits);
}

static void test_changed(void)
{
    const char *dir = copy_model("changed");
    rkm_model *m = open_with(dir, 2, 0);
    CHECK_MSG(m != NULL, "%s", rkm_last_error());
    if (!m) return;
    CHECK(rkm_model_verified(m) == 0); /* never checked */
    CHECK(rkm_model_files_changed(m) == 0);
    /* replaced by a copy of itself (a new inode), as a converter writing
     * a new file and renaming it would */
    CHECK(test_sh("cp '%s/resident.bin' '%s/r.tmp' && mv '%s/r.tmp' '%s/resident.bin'", dir, dir, dir, dir) == 0);
    CHECK_EQ_INT(rkm_model_files_changed(m), 1);
    CHECK_MSG(strstr(rkm_last_error(), "resident.bin was replaced"), "%s", rkm_last_error());
    rkm_model_close(m);
    /* an expert file touched in place, then the manifest removed */
    m = open_with(dir, 2, 0);
    CHECK(m && rkm_model_files_changed(m) == 0);
    CHECK(test_sh("f=$(ls '%s'/experts/* | head -1) && touch -d '2001-01-01' \"$f\"", dir) == 0);
    CHECK_EQ_INT(rkm_model_files_changed(m), 1);
    CHECK_MSG(strstr(rkm_last_error(), "experts/") && strstr(rkm_last_error(), "was rewritten"), "%s", rkm_last_error());
    CHECK(test_sh("rm '%s/manifest.json'", dir) == 0);
    CHECK_EQ_INT(rkm_model_files_changed(m), 1);
    CHECK_MSG(strstr(rkm_last_error(), "manifest.json is gone"), "%s", rkm_last_error());
    rkm_model_close(m);
}

/* A manifest naming a tensor twice is refused (names are looked up
 * through an index built while parsing). */
static void test_duplicate_tensor(void)
{
    char p[700];
    snprintf(p, sizeof p, "%s/manifest.json", base);
    size_t n;
    char *js = rkm_read_file(p, &n);
    cJSON *root = js ? cJSON_ParseWithLength(js, n) : NULL;
    free(js);
    cJSON *tens = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "resident"), "tensors");
    CHECK(cJSON_GetArraySize(tens) > 1);
    if (cJSON_GetArraySize(tens) < 2) goto out;
    js = cJSON_PrintUnformatted(root);
    rkm_model_dir *md = rkm_model_dir_parse_manifest(js, strlen(js), base);
    CHECK_MSG(md && rkm_model_dir_tensor(md, cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tens, 1), "name")->valuestring),
              "%s", rkm_last_error());
    rkm_model_dir_close(md);
    free(js);
    cJSON_AddItemToArray(tens, cJSON_Duplicate(cJSON_GetArrayItem(tens, 1), 1));
    js = cJSON_PrintUnformatted(root);
    md = rkm_model_dir_parse_manifest(js, strlen(js), base);
    CHECK(md == NULL);
    CHECK_MSG(strstr(rkm_last_error(), "listed twice"), "%s", rkm_last_error());
    rkm_model_dir_close(md);
    free(js);
out:
    cJSON_Delete(root);
}

int main(void)
{
    const char *tmp = test_tmpdir();
    snprintf(base, sizeof base, "%s/tiny.rkmojo", tmp);
    int rc = test_rkmojo(NULL, "synth --preset tiny -o %s/tiny.gguf --quiet", tmp);
    if (rc == 0) rc = test_rkmojo(NULL, "convert %s/tiny.gguf %s --quiet", tmp, base);
    CHECK_MSG(rc == 0, "synth/convert: %d", rc);
    if (rc) return test_done();
    test_verify();
    test_truncated(0);
    test_truncated(1); /* the file's layout: every matrix read from the mapping */
    test_changed();
    test_duplicate_tensor();
    return test_done();
}
