/*
 * bench-kernels.c - kernel throughput against the machine's memory
 * bandwidth (a benchmark, not a test: nothing here asserts timings).
 *
 *   build-x/bench/bench-kernels [-t THREADS] [-k VARIANT] [-n N_IN] [-o N_OUT]
 *                               [-m M] [-s SECONDS] [-g GIB] [-Q]
 * (-Q: only q4_0 / q8_0; "q4_0p" / "q8_0p" rows are the packed layout;
 *  -T q4_k,q6_k,mxfp4p,...: these weight types instead, by name, a
 *  trailing p for the packed layout)
 *   build-x/bench/bench-kernels -c [-k VARIANT] [-s SECONDS]
 *
 * 1. Read-bandwidth probe (kernels/membw.h, the one `rkmojo bench
 *    --limits` uses): THREADS threads (default 2) sum disjoint slices of a
 *    buffer of GIB GiB (default 1, far beyond the caches), with the widest
 *    loads the CPU has, alternating one sequential stream and four
 *    prefetched streams per thread (best of all passes).
 * 2. Decode matvec (M = 1) for q4_0, q8_0, f16, f32 weights of N_OUT x
 *    N_IN (default 14336 x 4096): enough distinct matrices to cover GIB
 *    GiB are cycled so every call streams its weights from DRAM; prints
 *    the effective GB/s of weight bytes and its ratio to the probe, with
 *    probe passes alternating with kernel passes (best of each over the
 *    window), so other load on the machine affects both alike.
 * 3. Prefill matmul (M = 128 by default) on one matrix per type: GOP/s
 *    (2 * n_in * n_out * m per call) and weight rows x tokens per second.
 * Each kernel variant the CPU supports (or just -k VARIANT) is measured.
 * -c instead measures compute speed with the weights in cache, one
 *    thread, in thread CPU time (robust when the machine is shared).
 *
 * Threads: the kernels' pool; the probe runs on the same pool.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kernels/membw.h"
#include "util/common.h"

/* "q4_0", or "q4_0p" for the packed layout */
static const char *type_label(int type)
{
    static char buf[4][16];
    static int k;
    if (!(type & RKM_TYPE_PACKED)) return rkm_type_name(type);
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%sp", rkm_type_name(rkm_unpack_type(type)));
    return b;
}

static void fill_weights(int type_in, void *w, int64_t n_in, int64_t n_out, unsigned seed)
{
    int type = rkm_unpack_type(type_in);
    float *row = malloc(sizeof(float) * (size_t)n_in);
    size_t rb = rkm_type_row_bytes(type, n_in);
    srand(seed);
    for (int64_t r = 0; r < n_out; r++) {
        /* one random row, then cheap variations: quantizing 1 GiB of
         * random floats would dominate the run */
        if (r < 8)
            for (int64_t k = 0; k < n_in; k++) row[k] = (float)((double)rand() / RAND_MAX) - 0.5f;
        if (r < 8) {
            unsigned char *q = (unsigned char *)w + rb * (size_t)r;
            rkm_quantize_row(type, row, q, n_in);
            /* a type without a quantizer (the IQ1-IQ3 grids) gives zeros:
             * random bytes instead, so that grid lookups spread as in a
             * real file */
            size_t nz = 0;
            for (size_t k = 0; k < rb; k++) nz += q[k] != 0;
            if (!nz)
                for (size_t k = 0; k < rb; k++) q[k] = (unsigned char)rand();
        }
        else memcpy((char *)w + rb * (size_t)r, (char *)w + rb * (size_t)(r % 8), rb);
    }
    free(row);
    if (type_in & RKM_TYPE_PACKED) rkm_pack_rows(type, w, n_in, n_out);
}

/* -Q: only the q4_0 / q8_0 types (packed and plain) */
static int quant_only;

/* The weight types measured: the default list, or -T's. */
static int types[32] = {RKM_TYPE_Q4_0 | RKM_TYPE_PACKED, RKM_TYPE_Q4_0, RKM_TYPE_Q8_0 | RKM_TYPE_PACKED,
                        RKM_TYPE_Q8_0, RKM_TYPE_F16, RKM_TYPE_F32};
static int n_types = 6;

static int parse_types(char *list)
{
    n_types = 0;
    for (char *t = strtok(list, ","); t && n_types < 32; t = strtok(NULL, ",")) {
        /* a trailing 'p': the packed layout of a type that has one */
        size_t len = strlen(t);
        int packed = len > 1 && t[len - 1] == 'p' && rkm_type_from_name(t) < 0;
        if (packed) t[len - 1] = '\0';
        int ty = rkm_type_from_name(t);
        if (packed && ty >= 0) {
            if (!(rkm_pack_type(ty, RKM_PACK_ROWS) & RKM_TYPE_PACKED)) {
                fprintf(stderr, "-T: '%s' has no packed layout\n", t);
                return -1;
            }
            ty |= RKM_TYPE_PACKED;
        }
        if (ty < 0 || !rkm_type_matmul(rkm_unpack_type(ty))) {
            fprintf(stderr, "-T: '%s' is not a weight type the matmuls run\n", t);
            return -1;
        }
        types[n_types++] = ty;
    }
    return n_types ? 0 : -1;
}

static double thread_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* -c: compute speed with the weights in cache (4096 x 256), one thread,
 * thread CPU time (robust to other load on the machine). */
static int compute_mode(const char *only, double seconds)
{
    const int64_t n_in = 4096, n_out = 256;
    const int ms[] = {1, 4, 16, 128};
    const char *names[16];
    int n_var = rkm_kernels_list(names, 16);
    float *x = malloc(sizeof(float) * (size_t)(n_in * 128)), *y = malloc(sizeof(float) * (size_t)(n_out * 128));
    for (int64_t i = 0; i < n_in * 128; i++) x[i] = sinf((float)i * 0.37f);
    printf("in-cache compute, 1 thread, %lld x %lld weights: GOP/s (2 n_in n_out m per call); m=1 also as GB/s of weights\n",
           (long long)n_out, (long long)n_in);
    printf("%-11s %-5s %9s %9s %9s %9s %9s\n", "kernels", "type", "m=1 GB/s", "m=1", "m=4", "m=16", "m=128");
    for (int ti = 0; ti < n_types; ti++) {
        if (quant_only && (types[ti] == RKM_TYPE_F16 || types[ti] == RKM_TYPE_F32)) continue;
        size_t rb = rkm_type_row_bytes(types[ti], n_in);
        void *w = rkm_alloc_aligned(rb * (size_t)n_out, 64);
        fill_weights(types[ti], w, n_in, n_out, 1);
        for (int v = 0; v < n_var; v++) {
            if (only ? strcmp(only, names[v]) != 0 : strcmp(names[v], "ref") == 0) continue;
            rkm_kernels_select(names[v]);
            double gops[4], gbs = 0;
            for (size_t mi = 0; mi < RKM_ARRAY_LEN(ms); mi++) {
                double best = 1e30, t_end = rkm_now() + seconds / 4;
                do {
                    double t0 = thread_cpu_now();
                    rkm_matmul(NULL, types[ti], w, n_in, n_out, x, ms[mi], y, n_out);
                    best = fmin(best, thread_cpu_now() - t0);
                } while (rkm_now() < t_end);
                gops[mi] = 2.0 * n_in * n_out * ms[mi] / best / 1e9;
                if (mi == 0) gbs = (double)rb * n_out / best / 1e9;
            }
            printf("%-11s %-5s %9.1f %9.1f %9.1f %9.1f %9.1f\n", names[v], type_label(types[ti]), gbs, gops[0],
                   gops[1], gops[2], gops[3]);
            fflush(stdout);
        }
        rkm_free_aligned(w);
    }
    free(x);
    free(y);
    return 0;
}

int main(int argc, char **argv)
{
    int n_threads = 2, m_prefill = 128;
    int64_t n_in = 4096, n_out = 14336;
    double seconds = 2.0, gib = 1.0;
    const char *only = NULL;
    int opt, compute = 0;
    while ((opt = getopt(argc, argv, "cQT:t:k:n:o:m:s:g:")) != -1) {
        switch (opt) {
        case 'c': compute = 1; break;
        case 'T':
            if (parse_types(optarg)) return 2;
            break;
        case 'Q': quant_only = 1; break;
        case 't': n_threads = atoi(optarg); break;
        case 'k': only = optarg; break;
        case 'n': n_in = atoll(optarg); break;
        case 'o': n_out = atoll(optarg); break;
        case 'm': m_prefill = atoi(optarg); break;
        case 's': seconds = atof(optarg); break;
        case 'g': gib = atof(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-c] [-Q] [-T types] [-t threads] [-k variant] [-n n_in] [-o n_out] [-m m] [-s sec] [-g GiB]\n",
                    argv[0]);
            return 2;
        }
    }
    if (n_in % 256 || n_in <= 0 || n_out <= 0 || m_prefill <= 0) {
        fprintf(stderr, "n_in must be a positive multiple of 256\n");
        return 2;
    }
    if (compute) return compute_mode(only, seconds);
    rkm_pool *pool = rkm_pool_new(n_threads);
    if (!pool) return 1;
    size_t total = (size_t)(gib * 1073741824.0);
    rkm_membw *probe = rkm_membw_new(total);
    if (!probe) return 1;
    double bw = rkm_membw_probe(probe, pool, seconds);
    printf("read bandwidth (%d threads, %.1f GiB buffer): %.2f GB/s\n", rkm_pool_n_threads(pool), gib, bw);
    printf("(each decode figure alternates kernel and probe passes; 'of bw' is best kernel / best probe\n"
           " of that window, so a busy machine slows both alike)\n");

    const char *names[16];
    int n_var = rkm_kernels_list(names, 16);
    float *x = malloc(sizeof(float) * (size_t)(n_in * m_prefill));
    float *y = malloc(sizeof(float) * (size_t)(n_out * m_prefill));
    for (int64_t i = 0; i < n_in * m_prefill; i++) x[i] = sinf((float)i * 0.37f);
    printf("%-11s %-5s %10s %7s %8s %12s %10s\n", "kernels", "type", "decode GB/s", "of bw", "bw GB/s", "prefill GOP/s",
           "rows*tok/s");
    for (int ti = 0; ti < n_types; ti++) {
        int type = types[ti];
        if (quant_only && (type == RKM_TYPE_F16 || type == RKM_TYPE_F32)) continue;
        size_t mat_bytes = rkm_type_row_bytes(type, n_in) * (size_t)n_out;
        int n_mats = (int)((total + mat_bytes - 1) / mat_bytes);
        if (n_mats < 2) n_mats = 2;
        void **w = calloc((size_t)n_mats, sizeof *w);
        for (int i = 0; i < n_mats; i++) {
            w[i] = rkm_alloc_aligned(mat_bytes, 64);
            if (!w[i]) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
            fill_weights(type, w[i], n_in, n_out, (unsigned)i);
        }
        for (int v = 0; v < n_var; v++) {
            if (only ? strcmp(only, names[v]) != 0 : strcmp(names[v], "ref") == 0) continue;
            rkm_kernels_select(names[v]);
            /* decode: cycle through all matrices */
            double best = 0, best_bw = 0, t_end = rkm_now() + seconds;
            do {
                best_bw = fmax(best_bw, rkm_membw_pass(probe, pool));
                double t0 = rkm_now();
                for (int i = 0; i < n_mats; i++) rkm_matmul(pool, type, w[i], n_in, n_out, x, 1, y, n_out);
                double dt = rkm_now() - t0;
                best = fmax(best, (double)mat_bytes * n_mats / dt / 1e9);
            } while (rkm_now() < t_end);
            /* prefill: one matrix (it is compute-bound) */
            double calls = 0, t0 = rkm_now(), dt;
            do {
                rkm_matmul(pool, type, w[(int)calls % n_mats], n_in, n_out, x, m_prefill, y, n_out);
                calls++;
                dt = rkm_now() - t0;
            } while (dt < seconds);
            double gops = 2.0 * n_in * n_out * m_prefill * calls / dt / 1e9;
            printf("%-11s %-5s %10.2f %6.1f%% %8.2f %12.1f %10.3g\n", names[v], type_label(type), best,
                   100.0 * best / best_bw, best_bw, gops, (double)n_out * m_prefill * calls / dt);
            fflush(stdout);
        }
        for (int i = 0; i < n_mats; i++) rkm_free_aligned(w[i]);
        free(w);
    }
    free(x);
    free(y);
    rkm_membw_free(probe);
    rkm_pool_free(pool);
    return 0;
}
