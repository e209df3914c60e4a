/* ggml_ref.c - loads the reference ggml of ggml_ref.h (main thread, once;
 * the handle is never closed). */
#include "ggml_ref.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define GGML_LIB_DEFAULT "tests/js/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"

const test_ggml *test_ggml_open(const char **tried)
{
    static test_ggml g;
    const char *lib = getenv("RKM_GGML_LIB") ? getenv("RKM_GGML_LIB") : GGML_LIB_DEFAULT;
    if (tried) *tried = lib;
    if (g.traits) return &g;
    void *h = access(lib, R_OK) ? NULL : dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) return NULL;
    *(void **)&g.traits = dlsym(h, "ggml_get_type_traits");
    *(void **)&g.quantize_chunk = dlsym(h, "ggml_quantize_chunk");
    *(void **)&g.requires_imatrix = dlsym(h, "ggml_quantize_requires_imatrix");
    if (!g.traits || !g.quantize_chunk || !g.requires_imatrix) {
        fprintf(stderr, "FAIL: %s lacks ggml_get_type_traits, ggml_quantize_chunk or ggml_quantize_requires_imatrix\n",
                lib);
        exit(1);
    }
    const struct ggml_traits *q40 = g.traits(2); /* GGML_TYPE_Q4_0 */
    if (!q40 || q40->blck_size != 32 || q40->type_size != 18 || !q40->to_float) {
        fprintf(stderr, "FAIL: %s: ggml_type_traits has an unexpected layout\n", lib);
        exit(1);
    }
    g.path = lib;
    return &g;
}
