/*
 * bench-sha256.c - SHA-256 throughput of each block function this CPU
 * has (util/sha256.h: portable C, x86 SHA-NI, ARMv8 SHA2), the hash
 * `rkmojo pull` computes over every byte it fetches. A benchmark, not a
 * test: nothing here asserts timings.
 *
 *   build-x/bench/bench-sha256 [-m MIB] [-r ROUNDS]
 *
 * Hashes a MIB-MiB buffer (default 256) in 1 MiB updates with each
 * function in turn, ROUNDS times (default 3, alternating, so drift on a
 * shared machine hits all alike), and prints MB/s per round and the
 * best; the digests must agree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/sha256.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    size_t mib = 256;
    int rounds = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) mib = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench-sha256 [-m MIB] [-r ROUNDS]\n");
            return 2;
        }
    }
    if (!mib || rounds < 1) return 2;
    size_t n = mib << 20;
    unsigned char *buf = malloc(n);
    if (!buf) return 1;
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 2654435761u >> 13);
    const char *names[] = {"portable", "sha-ni", "armv8"};
    double best[3] = {0};
    char first[65] = "";
    printf("sha256 of %zu MiB in 1 MiB updates, default %s\n", mib, rkm_sha256_name());
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 3; k++) {
            if (rkm_sha256_select(names[k]) != 0) continue;
            rkm_sha256 s;
            char hex[65];
            double t0 = now();
            rkm_sha256_init(&s);
            for (size_t o = 0; o < n; o += 1 << 20) rkm_sha256_update(&s, buf + o, 1 << 20);
            rkm_sha256_final(&s, hex);
            double mbs = (double)n / 1e6 / (now() - t0);
            if (mbs > best[k]) best[k] = mbs;
            if (!first[0]) memcpy(first, hex, sizeof hex);
            printf("round %d  %-8s %8.1f MB/s  %s\n", r + 1, names[k], mbs, strcmp(hex, first) ? "DIGEST DIFFERS" : "");
        }
    for (int k = 0; k < 3; k++)
        if (best[k] > 0) printf("best     %-8s %8.1f MB/s\n", names[k], best[k]);
    free(buf);
    return 0;
}
