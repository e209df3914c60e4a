/*
 * base64.h - RFC 4648 base64 (the standard alphabet, '=' padding), for
 * tiktoken vocabularies (decode) and OpenAI's base64 embeddings (encode).
 * Stateless; any thread.
 */
#ifndef RKM_UTIL_BASE64_H
#define RKM_UTIL_BASE64_H

#include <stddef.h>

/* The encoding of p[0..n) as a malloc'd NUL-terminated string, or NULL. */
char *rkm_base64_encode(const void *p, size_t n);
/* Decodes s[0..n) (padding optional, no whitespace) into a malloc'd
 * buffer; 0, or -1 on a character outside the alphabet, a bad length or
 * an allocation failure. *out is NULL on failure. */
int rkm_base64_decode(const char *s, size_t n, unsigned char **out, size_t *out_len);

#endif
