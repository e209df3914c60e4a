/*
 * ggml_ref.h - ggml itself as the reference of the type tests
 * (test-ggml-types, test-quantize): the prebuilt libggml-base.so of the
 * npm package @node-llama-cpp/linux-x64 (tests/js, or $RKM_GGML_LIB),
 * dlopened at run time, not linked, so that sanitizer builds still link
 * (the library itself is not sanitized). x86-64 only. The handle stays
 * open until exit; one per process, opened from main's thread.
 */
#ifndef RKM_TEST_GGML_REF_H
#define RKM_TEST_GGML_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ref/ggml_abi.h"

typedef struct {
    const char *path; /* the library loaded */
    const struct ggml_traits *(*traits)(int type);
    size_t (*quantize_chunk)(int type, const float *src, void *dst, int64_t start, int64_t nrows, int64_t n_per_row,
                             const float *imatrix);
    bool (*requires_imatrix)(int type);
} test_ggml;

/* The library, or NULL when it is missing or not loadable (the caller
 * skips; *tried gets the path). A library that loads but lacks these
 * symbols, or whose ggml_type_traits is not laid out as ggml_abi.h says
 * (checked on Q4_0), is a failure: exits 1 with a message. */
const test_ggml *test_ggml_open(const char **tried);

#endif
