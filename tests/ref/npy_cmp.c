/*
 * npy_cmp.c - compares two float32 .npy arrays of the same shape (an
 * engine's output against a reference's): prints the shape, the cosine
 * similarity of the whole arrays, the smallest cosine of a row (the last
 * dimension), and the largest absolute difference relative to the
 * reference's largest magnitude. Exits 1 when the shapes differ or the
 * smallest row cosine is under MIN_COS (default 0.9999). Not part of
 * rkmojo.
 *
 *   npy-cmp OURS.npy REF.npy [MIN_COS]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *load(const char *path, int64_t shape[4], int *nd)
{
    FILE *f = fopen(path, "rb");
    unsigned char pre[10];
    if (!f || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) || pre[6] != 1) {
        fprintf(stderr, "npy-cmp: %s: not a version 1 .npy file\n", path);
        exit(1);
    }
    const int hl = pre[8] | pre[9] << 8;
    char *h = calloc(1, (size_t)hl + 1);
    if (!h || fread(h, 1, (size_t)hl, f) != (size_t)hl || !strstr(h, "'<f4'") || strstr(h, "True")) {
        fprintf(stderr, "npy-cmp: %s: float32 in C order wanted\n", path);
        exit(1);
    }
    char *s = strchr(strstr(h, "'shape'"), '(');
    int64_t n = 1;
    *nd = 0;
    for (s++; *s && *s != ')' && *nd < 4;) {
        char *e;
        long long v = strtoll(s, &e, 10);
        if (e == s) break;
        shape[(*nd)++] = v;
        n *= v;
        s = e;
        while (*s == ',' || *s == ' ') s++;
    }
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!x || fread(x, sizeof(float), (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "npy-cmp: %s: truncated\n", path);
        exit(1);
    }
    fclose(f);
    free(h);
    return x;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: npy-cmp OURS.npy REF.npy [MIN_COS]\n");
        return 2;
    }
    const double min_cos = argc > 3 ? atof(argv[3]) : 0.9999;
    int64_t sa[4], sb[4];
    int na, nb;
    float *a = load(argv[1], sa, &na), *b = load(argv[2], sb, &nb);
    if (na != nb || memcmp(sa, sb, sizeof(int64_t) * (size_t)na) || na < 1) {
        printf("shape mismatch\n");
        return 1;
    }
    int64_t n = 1;
    for (int i = 0; i < na; i++) n *= sa[i];
    const int64_t cols = sa[na - 1], rows = n / cols;
    double dab = 0, daa = 0, dbb = 0, worst = 1, maxd = 0, maxb = 0;
    for (int64_t r = 0; r < rows; r++) {
        double ab = 0, aa = 0, bb = 0;
        for (int64_t c = 0; c < cols; c++) {
            const double x = a[r * cols + c], y = b[r * cols + c];
            ab += x * y;
            aa += x * x;
            bb += y * y;
            maxd = fmax(maxd, fabs(x - y));
            maxb = fmax(maxb, fabs(y));
        }
        const double cs = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1 : 0);
        if (!(cs >= worst)) worst = cs;
        dab += ab;
        daa += aa;
        dbb += bb;
    }
    const double all = daa > 0 && dbb > 0 ? dab / sqrt(daa * dbb) : 0;
    printf("shape");
    for (int i = 0; i < na; i++) printf(" %lld", (long long)sa[i]);
    printf(" cos %.7f min_row_cos %.7f max_rel_diff %.3g\n", all, worst, maxb > 0 ? maxd / maxb : maxd);
    return worst >= min_cos ? 0 : 1;
}
