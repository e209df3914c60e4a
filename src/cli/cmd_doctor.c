/*
 * cmd_doctor.c - `rkmojo doctor`: what this machine offers rkmojo. The
 * CPU and the kernels it selects, the Rockchip NPU's kernel driver version,
 * the chip, librknnrt (path, runtime and driver versions) and whether
 * `--backend auto` would use the NPU, and if not, why.
 *
 * Files are read under $RKM_SYSROOT (default /) so a test can fake a
 * board. Single-threaded; everything it opens is closed before it returns.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/rknn.h"
#include "cli/opts.h"
#include "kernels/rknn_i8.h"
#include "kernels/kernels.h"
#include "util/common.h"
#include "util/knobs.h"

int rkm_cmd_doctor(int argc, char **argv);

/* -------------------------------------------------------------- --env */

/* Every knob of the registry (util/knobs.h): name, scope, value in force
 * here, default, and what it does. */
static int print_env(void)
{
    static const char *const scope[] = {"process", "model", "test"};
    printf("%-20s %-8s %-22s %s\n", "knob", "scope", "value", "default; what it does");
    for (int i = 0; i < RKM_KNOB_COUNT; i++) {
        const rkm_knob_info *k = rkm_knob_info_of(i);
        const char *v = rkm_knob(i);
        if (v && (i == RKM_KNOB_API_KEY || i == RKM_KNOB_HF_TOKEN)) v = "(set, not shown)"; /* a secret */
        printf("%-20s %-8s %-22s %s; %s\n", k->name, scope[k->scope], v ? v : "(unset)", k->def, k->doc);
        printf("%-20s %-8s %-22s   values: %s\n", "", "", "", k->type);
    }
    printf("\nmodel knobs reach a model through rkm_model_params_from_knobs (the CLI and the server call it);\n"
           "test knobs are hooks for the test suite.\n");
    return 0;
}

/* ------------------------------------------------------------ --bench */

typedef struct {
    int M, K, N;
} mm_shape;

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffff) / 32768.0f - 1.0f;
}

/* Seconds per call of one matmul: 0 CPU q8_0 (rkm_matmul), 1 CPU rknn_i8,
 * 2 NPU rknn_i8; repeated until min_s has passed. < 0 on failure. */
static double time_mm(int how, rkm_pool *pool, rkm_rknn *r, const void *wq8, const void *wi8, int M, int K, int N,
                      const float *x, float *y, double min_s)
{
    int iters = 0;
    double t0 = rkm_now(), t;
    do {
        if (how == 0) rkm_matmul(pool, RKM_TYPE_Q8_0, wq8, K, N, x, M, y, N);
        else if (how == 1) rkm_rknn_i8_matmul_cpu(pool, wi8, K, N, x, M, y, N);
        else if (rkm_rknn_matmul_i8(r, wi8, K, N, x, M, y, N)) return -1;
        iters++;
        t = rkm_now() - t0;
    } while (t < min_s || iters < 2);
    return t / iters;
}

typedef struct {
    void *q8, *i8;
} weights;

static int make_weights(int K, int N, uint64_t seed, weights *w)
{
    float *f = malloc(sizeof(float) * (size_t)K * N);
    w->q8 = malloc(rkm_type_row_bytes(RKM_TYPE_Q8_0, K) * (size_t)N);
    w->i8 = malloc(rkm_rknn_i8_bytes(K, N));
    if (!f || !w->q8 || !w->i8) {
        free(f);
        return -1;
    }
    for (size_t i = 0; i < (size_t)K * N; i++) f[i] = frand(&seed);
    for (int n = 0; n < N; n++)
        rkm_quantize_row(RKM_TYPE_Q8_0, f + (size_t)n * K, (uint8_t *)w->q8 + rkm_type_row_bytes(RKM_TYPE_Q8_0, K) * n, K);
    rkm_rknn_i8_pack(f, K, N, w->i8);
    free(f);
    return 0;
}

/* Per-matmul GOPS at decode and prefill shapes, and the latency of one
 * expert FFN (gate + up + down), on the CPU and, if usable, the NPU. */
static int doctor_bench(int n_threads, double min_s, int quick)
{
    static const mm_shape full[] = {{1, 2048, 768},   {1, 768, 2048},   {1, 4096, 14336},
                                    {128, 2048, 768}, {128, 768, 2048}, {128, 4096, 14336}};
    static const mm_shape small[] = {{1, 256, 128}, {16, 256, 128}}; /* --quick: plumbing only */
    const mm_shape *shapes = quick ? small : full;
    size_t n_shapes = quick ? 2 : sizeof full / sizeof full[0];
    rkm_pool *pool = rkm_pool_new(n_threads);
    rkm_rknn *r = rkm_rknn_open();
    if (!r) printf("npu: not usable (%s): CPU figures only\n", rkm_last_error());
    else if (strstr(rkm_rknn_get_info(r)->api_version, "emulated") || rkm_knob(RKM_KNOB_EMU_CHIP))
        printf("WARNING: RKNN_EMU: the library is the emulator; its 'npu' figures time a CPU emulation and mean "
               "nothing about an NPU\n");
    printf("%-22s %14s %14s %14s\n", "matmul M x K x N", "cpu q8_0", "cpu rknn_i8", "npu rknn_i8");
    int rc = 0;
    for (size_t i = 0; i < n_shapes && !rc; i++) {
        const mm_shape *sh = &shapes[i];
        weights w = {0};
        float *x = malloc(sizeof(float) * (size_t)sh->M * sh->K), *y = malloc(sizeof(float) * (size_t)sh->M * sh->N);
        uint64_t seed = 1 + i;
        if (!x || !y || make_weights(sh->K, sh->N, seed, &w)) rc = RKM_ENOMEM;
        for (size_t j = 0; !rc && j < (size_t)sh->M * sh->K; j++) x[j] = frand(&seed);
        char lbl[64];
        snprintf(lbl, sizeof lbl, "%d x %d x %d", sh->M, sh->K, sh->N);
        printf("%-22s", lbl);
        double ops = 2.0 * sh->M * sh->K * sh->N;
        for (int how = 0; how < 3 && !rc; how++) {
            if (how == 2 && !r) {
                printf(" %14s", "-");
                continue;
            }
            double t = time_mm(how, pool, r, w.q8, w.i8, sh->M, sh->K, sh->N, x, y, min_s);
            if (t < 0) printf(" %14s", "failed");
            else printf(" %7.1f GOPS  ", ops / t / 1e9);
            fflush(stdout);
        }
        printf("\n");
        free(x), free(y), free(w.q8), free(w.i8);
    }
    /* one expert FFN at the shapes of Qwen3-30B-A3B (2048 -> 768 -> 2048) */
    const int E = quick ? 256 : 2048, F = quick ? 128 : 768;
    weights g = {0}, u = {0}, d = {0};
    float *x = malloc(sizeof(float) * 16 * E), *h = malloc(sizeof(float) * 16 * F * 2), *y = malloc(sizeof(float) * 16 * E);
    if (!rc && (!x || !h || !y || make_weights(E, F, 11, &g) || make_weights(E, F, 12, &u) || make_weights(F, E, 13, &d)))
        rc = RKM_ENOMEM;
    uint64_t seed = 99;
    for (int j = 0; !rc && j < 16 * E; j++) x[j] = frand(&seed);
    printf("expert FFN %dx%d (gate+up+down), latency per expert:\n", E, F);
    static const int rows[] = {1, 16};
    for (int ri = 0; ri < 2 && !rc; ri++) {
        int M = rows[ri];
        printf("  %2d row%s:", M, M > 1 ? "s" : " ");
        for (int how = 0; how < 3; how++) {
            if (how == 2 && !r) {
                printf("  npu -");
                continue;
            }
            double t = 0;
            t += time_mm(how, pool, r, g.q8, g.i8, M, E, F, x, h, min_s / 3);
            t += time_mm(how, pool, r, u.q8, u.i8, M, E, F, x, h + (size_t)M * F, min_s / 3);
            t += time_mm(how, pool, r, d.q8, d.i8, M, F, E, h, y, min_s / 3);
            printf("  %s %.3f ms", how == 0 ? "cpu q8_0" : how == 1 ? "cpu rknn_i8" : "npu rknn_i8", t * 1e3);
        }
        printf("\n");
    }
    free(x), free(h), free(y);
    free(g.q8), free(g.i8), free(u.q8), free(u.i8), free(d.q8), free(d.i8);
    rkm_rknn_close(r);
    rkm_pool_free(pool);
    if (rc) fprintf(stderr, "rkmojo doctor: out of memory\n");
    return rc ? 1 : 0;
}

/* The value of the first "key : value" line of /proc/cpuinfo among keys. */
static int cpuinfo(const char *const *keys, char *out, size_t cap)
{
    char buf[65536];
    if (rkm_rknn_sysfile("/proc/cpuinfo", buf, sizeof buf)) return -1;
    for (const char *const *k = keys; *k; k++) {
        size_t n = strlen(*k);
        for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            if (strncmp(line, *k, n) || (line[n] != ' ' && line[n] != '\t' && line[n] != ':')) continue;
            char *c = strchr(line, ':');
            char *e = strchr(line, '\n');
            if (!c || (e && c > e)) continue;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            size_t len = e ? (size_t)(e - c) : strlen(c);
            snprintf(out, cap, "%.*s", (int)RKM_MIN(len, cap - 1), c);
            return 0;
        }
    }
    return -1;
}

int rkm_cmd_doctor(int argc, char **argv)
{
    int bench = 0, n_threads = 0, quick = 0, env = 0;
    double min_s = 0.3;
    const rkm_opt opts[] = {
        {"bench", 0, RKM_OPT_FLAG, &bench,
         .help = "per-matmul GOPS at decode (M = 1) and prefill (M = 128) shapes and one\n"
                 "expert FFN's latency, CPU (q8_0, rknn_i8) vs NPU (bench/rknn-check.sh runs it)"},
        {"threads", 't', RKM_OPT_INT, &n_threads, 0, 1024, "N", .help = "--bench: compute threads (default: the performance cores)"},
        {"min-time", 0, RKM_OPT_DOUBLE, &min_s, 0, 3600, "S", .help = "--bench: seconds per figure (default 0.3)"},
        {"quick", 0, RKM_OPT_FLAG, &quick, .help = "--bench: small shapes only (the plumbing, not the speed)"},
        {"env", 0, RKM_OPT_FLAG, &env, .help = "list every environment knob: its value here, default and meaning"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "doctor",
        "usage: rkmojo doctor [--env] [--bench [-t THREADS] [--min-time S] [--quick]]\n"
        "  Reports the CPU and its kernels, the Rockchip NPU driver, librknnrt and whether\n"
        "  --backend auto would use the NPU. --env lists the environment knobs\n"
        "  (RKM_RKNN_LIB, RKM_KERNELS, ...) with their values.\n\n",
        NULL, {opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    if (env) return print_env();
    char buf[1024];
    static const char *const model_keys[] = {"model name", "Hardware", "Model", NULL};
    rkm_kernels_init();
    printf("rkmojo %s doctor\n", RKM_VERSION_STRING);
    if (cpuinfo(model_keys, buf, sizeof buf)) snprintf(buf, sizeof buf, "unknown");
    printf("cpu:              %s, %ld online\n", buf, sysconf(_SC_NPROCESSORS_ONLN));
    /* the CPU features the kernels care about, as the kernel reports them */
    static const char *const feat_keys[] = {"flags", "Features", NULL};
    static const char *const wanted[] = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni",
                                         "asimd", "asimddp", "asimdhp", "fphp", "i8mm", "sve", NULL};
    char feats[8192];
    if (!cpuinfo(feat_keys, feats, sizeof feats)) {
        printf("cpu features:    ");
        int any = 0;
        for (const char *const *w = wanted; *w; w++) {
            size_t n = strlen(*w);
            for (const char *p = feats; (p = strstr(p, *w)); p += n)
                if ((p == feats || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) {
                    printf(" %s", *w);
                    any = 1;
                    break;
                }
        }
        printf("%s\n", any ? "" : " (none of interest)");
    }
    const char *names[16];
    int n = rkm_kernels_list(names, 16);
    printf("kernels:          %s (this CPU can run:", rkm_kernels_name());
    for (int i = 0; i < n && i < 16; i++) printf(" %s", names[i]);
    printf(")\n");

    static const char *const drv_files[] = {"/sys/kernel/debug/rknpu/version", "/sys/module/rknpu/version", NULL};
    const char *drv_src = NULL;
    for (const char *const *f = drv_files; *f && !drv_src; f++)
        if (!rkm_rknn_sysfile(*f, buf, sizeof buf) && *buf) drv_src = *f;
    if (drv_src) printf("npu driver:       %s (%s)\n", buf, drv_src);
    else printf("npu driver:       not found (no /sys/kernel/debug/rknpu/version or /sys/module/rknpu/version)\n");

    char src[256];
    int chip = rkm_rknn_detect_chip(src, sizeof src);
    printf("chip:             %s (%s)\n", rkm_rknn_chip_name(chip), src);
    if (chip) printf("npu cores:        %d, K per context %d\n", rkm_rknn_chip_cores(chip), rkm_rknn_chip_kseg(chip));

    rkm_rknn *r = rkm_rknn_open();
    if (r) {
        const rkm_rknn_info *in = rkm_rknn_get_info(r);
        printf("librknnrt:        %s\n", in->lib);
        printf("runtime:          %s (driver as the runtime reports it: %s)\n", in->api_version, in->drv_version);
        printf("backend auto:     rknn for models converted with --target rk3588 (int8 matmuls on %d core%s);\n"
               "                  the CPU for others\n",
               in->n_cores, in->n_cores > 1 ? "s" : "");
        rkm_rknn_close(r);
    } else {
        const char *lib = rkm_knob(RKM_KNOB_RKNN_LIB);
        printf("librknnrt:        not usable (%s)\n", lib && *lib ? lib : "librknnrt.so");
        printf("backend auto:     cpu: %s\n", rkm_last_error());
    }
    if (bench) {
        printf("\n");
        fflush(stdout);
        return doctor_bench(n_threads, min_s, quick);
    }
    return 0;
}
