/*
 * ggml_abi.h - the parts of ggml's C ABI that the references dlopen from
 * npm's prebuilt libggml-base.so: struct ggml_type_traits as ggml.h lays it
 * out (its first fields; each user checks the layout against a known type
 * at run time). Shared by tests/test-ggml-types.c and
 * tools/gen-quant-tables.c; declared here from the header's facts, not
 * included from ggml.
 */
#ifndef RKM_TEST_GGML_ABI_H
#define RKM_TEST_GGML_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void (*ggml_to_float_fn)(const void *x, float *y, int64_t k);

struct ggml_traits {
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    ggml_to_float_fn to_float;
    void *from_float_ref;
};

#endif
