/*
 * sha256.h - SHA-256 (FIPS 180-4), streaming, with a state that can be
 * saved as text and restored (rkmojo pull resumes its whole-file hash).
 * The blocks go through the CPU's SHA-256 instructions where it has them
 * (x86 SHA-NI, ARMv8 SHA2), else portable C. Single-threaded per
 * context; no allocation.
 */
#ifndef RKM_UTIL_SHA256_H
#define RKM_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct rkm_sha256 {
    uint32_t h[8];
    uint64_t n;       /* bytes hashed */
    uint8_t buf[64];  /* the partial block: n % 64 bytes */
} rkm_sha256;

void rkm_sha256_init(rkm_sha256 *s);
void rkm_sha256_update(rkm_sha256 *s, const void *p, size_t n);
/* The digest as 64 lowercase hex digits + NUL into hex[65]; s is spent. */
void rkm_sha256_final(rkm_sha256 *s, char hex[65]);
/* The state as text (at most RKM_SHA256_STATE_CHARS with the NUL), and
 * back: 0, or -1 for text that is not a state. */
#define RKM_SHA256_STATE_CHARS 224
/* The block function in use: "sha-ni", "armv8" or "portable"; and a
 * switch to one of them (tests, benchmarks): 0, or -1 when this CPU has
 * no such one. Not while another thread hashes. */
const char *rkm_sha256_name(void);
int rkm_sha256_select(const char *name);
void rkm_sha256_save(const rkm_sha256 *s, char *out);
int rkm_sha256_load(rkm_sha256 *s, const char *text);

#endif
