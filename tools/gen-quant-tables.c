/*
 * gen-quant-tables.c - writes src/kernels/quant_tables.c, the lookup tables
 * that are part of the definition of ggml's IQ and MXFP4 formats (the
 * non-linear 4-bit levels of IQ4_NL/IQ4_XS and MXFP4, the IQ2/IQ3 grids,
 * the IQ1 grid and its offset). It recovers each table from ggml itself:
 * it dlopens libggml-base.so and dequantizes crafted blocks through ggml's
 * to_float, a block whose scale is a power of two and whose indices select
 * grid entries k, k+1, ... giving those entries' values. Every recovered
 * value is checked to be an exact integer of the expected range.
 *
 * Built and run by hand, not in CI (single-threaded, frees at exit):
 *   cc -std=c11 -O2 -Wall -Wextra -o build/gen-quant-tables tools/gen-quant-tables.c -ldl
 *   build/gen-quant-tables tests/js/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so \
 *     > src/kernels/quant_tables.c
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/ref/ggml_abi.h" /* struct ggml_traits; its layout is checked below */

typedef ggml_to_float_fn to_float_fn;

enum { T_IQ2_XXS = 16, T_IQ2_XS = 17, T_IQ3_XXS = 18, T_IQ1_S = 19, T_IQ4_NL = 20, T_IQ3_S = 21, T_IQ2_S = 22, T_MXFP4 = 39 };

static const struct ggml_traits *(*get_traits)(int);

static void die(const char *msg)
{
    fprintf(stderr, "gen-quant-tables: %s\n", msg);
    exit(1);
}

/* Dequantizes one block of type t. */
static void deq(int t, const uint8_t *block, float *y)
{
    const struct ggml_traits *tr = get_traits(t);
    if (!tr || !tr->to_float) die("a type has no to_float");
    tr->to_float(block, y, tr->blck_size);
}

/* v / scale as an integer in [lo, hi], or exit. */
static int exact(float v, float scale, int lo, int hi)
{
    float q = v / scale;
    if (q != floorf(q) || q < lo || q > hi || (float)q * scale != v) die("a recovered value is not an exact grid integer");
    return (int)q;
}

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

#define F16_ONE 0x3C00u

static void print_i8(const char *decl, const int *v, int n)
{
    printf("%s = {", decl);
    for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", v[i]);
    printf("};\n\n");
}

/* Prints a grid of n entries of w values each, 4 entries a line. */
static void print_grid(const char *decl, const int *v, int n, int w)
{
    printf("%s = {\n", decl);
    for (int i = 0; i < n; i++) {
        if (i % 4 == 0) printf("    ");
        printf("{");
        for (int j = 0; j < w; j++) printf("%s%d", j ? ", " : "", v[i * w + j]);
        printf("}%s", i + 1 == n ? "\n" : i % 4 == 3 ? ",\n" : ", ");
    }
    printf("};\n\n");
}

int main(int argc, char **argv)
{
    if (argc != 2) die("usage: gen-quant-tables path/to/libggml-base.so > src/kernels/quant_tables.c");
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) die(dlerror());
    get_traits = (const struct ggml_traits *(*)(int))dlsym(h, "ggml_get_type_traits");
    const char *(*version)(void) = (const char *(*)(void))dlsym(h, "ggml_version");
    const char *(*commit)(void) = (const char *(*)(void))dlsym(h, "ggml_commit");
    if (!get_traits) die("ggml_get_type_traits not exported");
    const struct ggml_traits *q40 = get_traits(2);
    if (!q40 || q40->blck_size != 32 || q40->type_size != 18 || !q40->to_float)
        die("ggml_type_traits has an unexpected layout");

    uint8_t b[256];
    float y[256];
    static int kv_nl[16], kv_mx[16], g2xxs[256 * 8], g2xs[512 * 8], g2s[1024 * 8], g3xxs[256 * 4], g3s[512 * 4],
        g1s[2048 * 8];

    /* IQ4_NL: d = 1, qs[j] selects level j for values j and j+16. */
    memset(b, 0, sizeof b);
    put16(b, F16_ONE);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | j << 4);
    deq(T_IQ4_NL, b, y);
    for (int j = 0; j < 16; j++) kv_nl[j] = exact(y[j], 1.0f, -128, 127);

    /* MXFP4: exponent byte 128 is ggml's unit scale (it halves 2^(e-127)
     * and stores the e2m1 levels doubled, as integers). */
    memset(b, 0, sizeof b);
    b[0] = 128;
    for (int j = 0; j < 16; j++) b[1 + j] = (uint8_t)(j | j << 4);
    deq(T_MXFP4, b, y);
    for (int j = 0; j < 16; j++) kv_mx[j] = exact(y[j], 1.0f, -128, 127);

    /* IQ2_XXS: per 32 values 4 index bytes then a u32 of signs (0) and a
     * 4-bit scale (0: d/8). */
    for (int k0 = 0; k0 < 256; k0 += 32) {
        memset(b, 0, sizeof b);
        put16(b, F16_ONE);
        for (int i = 0; i < 32; i++) b[2 + 8 * (i / 4) + i % 4] = (uint8_t)(k0 + i);
        deq(T_IQ2_XXS, b, y);
        for (int i = 0; i < 32 * 8; i++) g2xxs[k0 * 8 + i] = exact(y[i], 0.125f, 0, 255);
    }
    /* IQ2_XS: u16 index (9 bits) + sign pattern (7 bits, 0); scales 0. */
    for (int k0 = 0; k0 < 512; k0 += 32) {
        memset(b, 0, sizeof b);
        put16(b, F16_ONE);
        for (int i = 0; i < 32; i++) put16(b + 2 + 2 * i, (unsigned)(k0 + i));
        deq(T_IQ2_XS, b, y);
        for (int i = 0; i < 32 * 8; i++) g2xs[k0 * 8 + i] = exact(y[i], 0.125f, 0, 255);
    }
    /* IQ2_S: 8 low index bits in qs, 2 high bits per index in qh. */
    for (int k0 = 0; k0 < 1024; k0 += 32) {
        memset(b, 0, sizeof b);
        put16(b, F16_ONE);
        for (int i = 0; i < 32; i++) {
            int k = k0 + i;
            b[2 + i] = (uint8_t)k;
            b[66 + i / 4] |= (uint8_t)(((k >> 8) & 3) << (2 * (i % 4)));
        }
        deq(T_IQ2_S, b, y);
        for (int i = 0; i < 32 * 8; i++) g2s[k0 * 8 + i] = exact(y[i], 0.125f, 0, 255);
    }
    /* IQ3_XXS: 64 index bytes, then per 32 values a u32 of signs and a
     * scale (0: d/4). */
    for (int k0 = 0; k0 < 256; k0 += 64) {
        memset(b, 0, sizeof b);
        put16(b, F16_ONE);
        for (int i = 0; i < 64; i++) b[2 + i] = (uint8_t)(k0 + i);
        deq(T_IQ3_XXS, b, y);
        for (int i = 0; i < 64 * 4; i++) g3xxs[k0 * 4 + i] = exact(y[i], 0.25f, 0, 255);
    }
    /* IQ3_S: per 32 values 8 index bytes and one qh byte of 9th bits;
     * scales 0 (d); the 8 values of index pair l are grid 2l then 2l+1. */
    for (int k0 = 0; k0 < 512; k0 += 64) {
        memset(b, 0, sizeof b);
        put16(b, F16_ONE);
        for (int i = 0; i < 64; i++) {
            int k = k0 + i;
            b[2 + i] = (uint8_t)k;
            b[66 + i / 8] |= (uint8_t)(((k >> 8) & 1) << (i % 8));
        }
        deq(T_IQ3_S, b, y);
        for (int i = 0; i < 64; i++) {
            int half = i / 8, l = (i % 8) / 2, which = i % 2;
            for (int j = 0; j < 4; j++) g3s[(k0 + i) * 4 + j] = exact(y[32 * half + 8 * l + 4 * which + j], 1.0f, 0, 255);
        }
    }
    /* IQ1_S: values dl * (grid + delta); the sign bit of qh flips delta,
     * so the pair of blocks gives both delta and the grid. */
    float delta = 0.0f;
    for (int k0 = 0; k0 < 2048; k0 += 32) {
        float yn[256];
        for (int neg = 0; neg < 2; neg++) {
            memset(b, 0, sizeof b);
            put16(b, F16_ONE);
            for (int i = 0; i < 32; i++) {
                int k = k0 + i, ib = i / 4, l = i % 4;
                b[2 + i] = (uint8_t)k;
                unsigned qh = (unsigned)(b[34 + 2 * ib] | b[35 + 2 * ib] << 8);
                qh |= (unsigned)((k >> 8) & 7) << (3 * l);
                if (neg) qh |= 0x8000;
                put16(b + 34 + 2 * ib, qh);
            }
            deq(T_IQ1_S, b, neg ? yn : y);
        }
        for (int i = 0; i < 32 * 8; i++) {
            float dl = (y[i] - yn[i]) / 2;
            if (delta == 0.0f) delta = dl;
            if (dl != delta || delta <= 0.0f) die("IQ1_S's offset is not one constant");
            g1s[k0 * 8 + i] = exact(y[i] - delta, 1.0f, -1, 1);
        }
    }

    printf("/*\n"
           " * quant_tables.c - GENERATED by tools/gen-quant-tables.c from ggml's own\n"
           " * dequantization (libggml-base.so, ggml %s, commit %s, of the npm package\n"
           " * @node-llama-cpp/linux-x64 pinned in tests/js/package.json). Do not edit:\n"
           " * rebuild and rerun the tool as its header says. Read-only tables of the\n"
           " * IQ and MXFP4 formats, shared by all threads (quant_tables.h).\n"
           " */\n"
           "#include \"kernels/quant_tables.h\"\n\n",
           version ? version() : "?", commit ? commit() : "?");
    print_i8("const int8_t rkm_kvalues_iq4nl[16]", kv_nl, 16);
    print_i8("const int8_t rkm_kvalues_mxfp4[16]", kv_mx, 16);
    printf("const float rkm_iq1s_delta = %.9gf;\n\n", (double)delta);
    print_grid("const uint8_t rkm_iq2xxs_grid[256][8]", g2xxs, 256, 8);
    print_grid("const uint8_t rkm_iq2xs_grid[512][8]", g2xs, 512, 8);
    print_grid("const uint8_t rkm_iq2s_grid[1024][8]", g2s, 1024, 8);
    print_grid("const uint8_t rkm_iq3xxs_grid[256][4]", g3xxs, 256, 4);
    print_grid("const uint8_t rkm_iq3s_grid[512][4]", g3s, 512, 4);
    print_grid("const int8_t rkm_iq1s_grid[2048][8]", g1s, 2048, 8);
    return 0;
}
