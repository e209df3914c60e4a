/*
 * charsmap.h - SentencePiece's precompiled_charsmap normalizer: the rules
 * of a SentencePiece model's normalizer (nmt_nfkc and friends) compiled
 * into a blob, as Hugging Face tokenizer.json carries it (base64, in a
 * `Precompiled` normalizer) and llama.cpp GGUF files carry it (raw bytes,
 * `tokenizer.ggml.precompiled_charsmap`).
 *
 * Blob layout (all little-endian):
 *   u32   trie_bytes                 size of the trie that follows, a
 *                                    multiple of 4
 *   u32   unit[trie_bytes / 4]       a darts-clone double-array trie over
 *                                    the UTF-8 bytes of the rewritten
 *                                    sequences
 *   char  strings[]                  the replacements, each NUL-terminated;
 *                                    a trie leaf's value is an offset here
 * A unit: bits 0-7 label (bit 31 too, so a value unit never matches a
 * label), bit 8 "has a leaf", bit 9 "offset scaled by 256", bits 10-30
 * offset; a value unit holds its value in bits 0-30. From node p, the child
 * for byte c is at p ^ offset(unit[p]) ^ c and must carry label c; a
 * node's leaf value is in unit[p ^ offset(unit[p])].
 *
 * Applying it (sentencepiece's and llama.cpp's rule): at each position,
 * the longest byte sequence found in the trie is replaced by its string;
 * without a match one UTF-8 character is copied as it is. A NUL byte ends
 * the trie walk (keys never contain one), and so does the 256th byte
 * (real keys are a few characters long; the bound keeps a corrupt trie
 * from making the walk quadratic).
 *
 * Threads: a parsed charsmap is read-only. Ownership: rkm_charsmap_free.
 */
#ifndef RKM_CHARSMAP_H
#define RKM_CHARSMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct rkm_charsmap rkm_charsmap;

/* Copies and checks the blob: sizes, a terminated and valid-UTF-8 string
 * table. NULL + rkm_err (RKM_EFORMAT) when malformed. */
rkm_charsmap *rkm_charsmap_parse(const void *blob, size_t n);
void rkm_charsmap_free(rkm_charsmap *m);
/* The blob as given to rkm_charsmap_parse (for writing it back out). */
const void *rkm_charsmap_blob(const rkm_charsmap *m, size_t *n);

/* The longest rule matching a prefix of s[0..n): returns the bytes it
 * consumes (0: none) and points *rep at its replacement (*rep_len bytes,
 * valid UTF-8). A walk that leaves the array or reaches a value outside
 * the string table ends without a match there (a corrupt trie cannot
 * crash or loop: every step consumes an input byte). */
size_t rkm_charsmap_match(const rkm_charsmap *m, const char *s, size_t n, const char **rep, size_t *rep_len);

/* Normalizes valid UTF-8 s[0..n) into a malloc'd, NUL-terminated buffer
 * (*out, *out_len). 0 or RKM_ENOMEM. */
int rkm_charsmap_normalize(const rkm_charsmap *m, const char *s, size_t n, char **out, size_t *out_len);

#endif
