/*
 * test.h - the tiny harness every tests/test-*.c uses. Each test binary is
 * one process (tests/run.sh runs them with a timeout); a failed CHECK prints
 * file:line and the expression and counts a failure; main returns
 * test_done(), which is 0 if nothing failed. Exit 77 means skipped.
 */
#ifndef RKM_TEST_H
#define RKM_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int test_failures;
extern int test_checks;

#define CHECK(x)                                                              \
    do {                                                                      \
        test_checks++;                                                        \
        if (!(x)) {                                                           \
            test_failures++;                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,  \
                    #x);                                                      \
        }                                                                     \
    } while (0)

#define CHECK_MSG(x, ...)                                                     \
    do {                                                                      \
        test_checks++;                                                        \
        if (!(x)) {                                                           \
            test_failures++;                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__,  \
                    #x);                                                      \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                    \
    do {                                                                      \
        long long va_ = (long long)(a), vb_ = (long long)(b);                 \
        CHECK_MSG(va_ == vb_, "%lld != %lld", va_, vb_);                      \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                    \
    do {                                                                      \
        const char *sa_ = (a), *sb_ = (b);                                    \
        CHECK_MSG(sa_ && sb_ && !strcmp(sa_, sb_), "\"%s\" != \"%s\"",        \
                  sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                 \
    do {                                                                      \
        double va_ = (double)(a), vb_ = (double)(b);                          \
        CHECK_MSG(fabs(va_ - vb_) <= (tol), "%.9g vs %.9g (tol %g)", va_,    \
                  vb_, (double)(tol));                                        \
    } while (0)

/* xorshift64 (13, 7, 17): advances *state (nonzero) and returns its top
 * 32 bits; the same sequence on every platform. */
uint32_t test_rand(uint64_t *state);
/* Prints the summary and returns the exit code for main. */
int test_done(void);
/* ../shared (or $RKM_SHARED), or NULL if absent. */
const char *test_shared_dir(void);
/* Exits 77 with a message if ../shared is absent; returns its path. */
const char *test_require_shared(void);
/* A fresh temporary directory (removed by test_cleanup at exit). */
const char *test_tmpdir(void);
/* Path of the rkmojo binary of this build ($RKM_BUILD/rkmojo). */
const char *test_rkmojo_bin(void);
/* Runs a shell command (with the runner prefix for rkmojo, see run.sh);
 * returns its exit status. */
int test_sh(const char *fmt, ...);
/* Runs the rkmojo CLI with args (printf-style), output to out_path if
 * non-NULL; returns its exit status. */
int test_rkmojo(const char *out_path, const char *fmt, ...);
/* A small model of another family, q8_0, with the qwen3moe fixture's
 * 512-token vocabulary from shared, synthesized and converted into
 * TMPDIR/WHICH.rkmojo, whose path goes to dir: "ds" (DeepSeek-V3: latent
 * attention, q LoRA, sigmoid routing with groups, a dense first layer),
 * "q35" (Qwen3.5 MoE: three Gated DeltaNet layers, then gated attention;
 * a gated shared expert), "lfm2" (LFM2-8B-A1B: short convolutions, one
 * attention layer, two dense lead layers), "granite" (Granite 4.0-H:
 * Mamba-2 layers and one attention layer, no RoPE, Granite's scales).
 * The CLI's exit status; -1 for an unknown name. */
int test_small(const char *shared, const char *which, char *dir, size_t cap);

#endif
