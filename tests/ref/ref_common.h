/*
 * ref_common.h - what the llama.cpp harnesses (llama_cpp_ref.c,
 * mtmd_ref.c) share: exiting with a message, symbols looked up or exit,
 * llama.cpp's log reduced to its errors, llama_batch, and ggml's tensor
 * fields read through the evaluation callback. Each includer defines REF_PROG, its
 * name in messages, before including this header.
 */
#ifndef RKM_REF_COMMON_H
#define RKM_REF_COMMON_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void die(const char *what, const char *detail)
{
    fprintf(stderr, REF_PROG ": %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) die("missing symbol", name);
    return p;
}

static void quiet_log(int level, const char *text, void *user)
{
    (void)user;
    if (level == 4 /* GGML_LOG_LEVEL_ERROR */) fputs(text, stderr);
}

/* llama.h's llama_batch (its layout has been stable since 2023). */
typedef struct {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
} llama_batch;

/* struct ggml_tensor as ggml.h lays it (GGML_MAX_DIMS 4, 64 bytes of op
 * parameters, GGML_MAX_SRC 10): type at 0, ne at 16, nb at 48, data at
 * 248, name (64 bytes) at 256. */
#define T_TYPE(t) (*(const int32_t *)((const char *)(t) + 0))
#define T_NE(t, i) (((const int64_t *)((const char *)(t) + 16))[i])
#define T_NB(t, i) (((const size_t *)((const char *)(t) + 48))[i])
#define T_DATA(t) (*(void *const *)((const char *)(t) + 248))
#define T_NAME(t) ((const char *)(t) + 256)

#endif
