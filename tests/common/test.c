/* test.c - implementation of the harness in test.h. */
#include "test.h"

#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int test_failures;
int test_checks;
static char tmpdir[256];

static void test_cleanup(void)
{
    if (tmpdir[0] && !getenv("RKM_KEEP_TMP")) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    }
}

uint32_t test_rand(uint64_t *state)
{
    uint64_t s = *state;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    *state = s;
    return (uint32_t)(s >> 32);
}

int test_done(void)
{
    printf("%d checks, %d failed\n", test_checks, test_failures);
    return test_failures ? 1 : 0;
}

const char *test_shared_dir(void)
{
    static char buf[4096];
    const char *e = getenv("RKM_SHARED");
    struct stat st;
    if (e && stat(e, &st) == 0) return e;
    const char *cands[] = {"../shared", "../../shared"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        if (stat(cands[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            if (!realpath(cands[i], buf)) continue;
            return buf;
        }
    }
    return NULL;
}

const char *test_require_shared(void)
{
    const char *s = test_shared_dir();
    if (!s) {
        printf("../shared not found (set RKM_SHARED): skipped\n");
        exit(77);
    }
    return s;
}

const char *test_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/rkm-test-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(test_cleanup);
    }
    return tmpdir;
}

const char *test_rkmojo_bin(void)
{
    static char buf[512];
    const char *b = getenv("RKM_BUILD");
    snprintf(buf, sizeof buf, "%s/rkmojo", b ? b : "build");
    return buf;
}

static int run_cmd(const char *cmd)
{
    int st = system(cmd);
    if (st == -1) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int test_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return run_cmd(cmd);
}

/* The small models of test_small: the synth preset and its shrinking. */
static const struct {
    const char *name, *preset, *sets;
} small_models[] = {
    {"ds", "deepseek-v3",
     "--set n_layer=2 --set n_embd=128 --set n_head=4 --set kv_lora_rank=64 --set q_lora_rank=64 --set n_ff_exp=64 "
     "--set n_ff_shexp=64 --set n_ff=128 --set n_expert=8 --set n_expert_used=2 --set n_expert_group=4 "
     "--set n_group_used=2 --set n_layer_dense_lead=1"},
    {"q35", "qwen3.5-35b-a3b",
     "--set n_layer=4 --set n_embd=128 --set n_head=4 --set n_head_kv=2 --set head_dim=32 --set head_dim_v=32 "
     "--set rope_dim=16 --set n_ff_exp=64 --set n_ff_shexp=64 --set n_expert=8 --set n_expert_used=2 "
     "--set ssm_d_state=32 --set ssm_n_group=2 --set ssm_dt_rank=4 --set ssm_d_inner=128"},
    {"lfm2", "lfm2-8b-a1b",
     "--set n_layer=4 --set n_embd=128 --set n_head=4 --set n_head_kv=2 --set head_dim=32 --set head_dim_v=32 "
     "--set rope_dim=32 --set n_ff=128 --set n_ff_exp=64 --set n_expert=8 --set n_expert_used=2"},
    {"granite", "granite-4.0-h-tiny",
     "--set n_layer=6 --set n_embd=128 --set n_head=4 --set n_head_kv=2 --set head_dim=32 --set head_dim_v=32 "
     "--set n_ff_exp=64 --set n_ff_shexp=64 --set n_expert=8 --set n_expert_used=2 --set ssm_d_state=32 "
     "--set ssm_n_group=2 --set ssm_dt_rank=8 --set ssm_d_inner=256"},
};

int test_small(const char *shared, const char *which, char *dir, size_t cap)
{
    for (size_t i = 0; i < sizeof small_models / sizeof small_models[0]; i++) {
        if (strcmp(small_models[i].name, which)) continue;
        char gguf[1024];
        snprintf(gguf, sizeof gguf, "%s/%s.gguf", test_tmpdir(), which);
        snprintf(dir, cap, "%s/%s.rkmojo", test_tmpdir(), which);
        return test_rkmojo("/dev/null",
                           "synth --preset %s --dtype q8_0 %s --vocab-from %s/fixtures/qwen3moe-f32.gguf -o %s --quiet && "
                           "%s convert %s %s --quant keep --quiet",
                           small_models[i].preset, small_models[i].sets, shared, gguf, test_rkmojo_bin(), gguf, dir);
    }
    return -1;
}

int test_rkmojo(const char *out_path, const char *fmt, ...)
{
    char args[6144], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    const char *runner = getenv("RKM_RUNNER");
    snprintf(cmd, sizeof cmd, "%s %s %s %s%s", runner ? runner : "", test_rkmojo_bin(), args,
             out_path ? "> " : "", out_path ? out_path : "");
    return run_cmd(cmd);
}
