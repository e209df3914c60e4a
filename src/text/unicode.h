/*
 * unicode.h - the Unicode facts the tokenizers need, without a regex or ICU
 * library: UTF-8 decoding/encoding with strict validation, general-category
 * classes (letter, number, punctuation, symbol, mark, separator, other) and
 * White_Space for the pre-tokenizer matchers, the four normalization forms
 * (NFC, NFD, NFKC, NFKD), lowercase and uppercase mapping (with the
 * Cased / Case_Ignorable properties for the Final_Sigma rule) and
 * nonspacing marks.
 *
 * The tables live in unicode_data.c (tools/gen-unicode.py) and
 * unicode_norm_data.c (tools/gen-unicode-norm.py), generated from the
 * Unicode Character Database; they are read-only and thread-safe.
 */
#ifndef RKM_UNICODE_H
#define RKM_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Category classes (first letter of the general category) + White_Space. */
enum {
    RKM_UC_L = 0x01,  /* letter */
    RKM_UC_N = 0x02,  /* number */
    RKM_UC_P = 0x04,  /* punctuation */
    RKM_UC_S = 0x08,  /* symbol */
    RKM_UC_M = 0x10,  /* mark */
    RKM_UC_Z = 0x20,  /* separator */
    RKM_UC_C = 0x40,  /* other: control, format, unassigned, private use */
    RKM_UC_WS = 0x80, /* White_Space property (regex \s) */
};

typedef struct rkm_ucd_range {
    uint32_t first, last;
    uint32_t value;
} rkm_ucd_range;

typedef struct rkm_ucd_decomp_entry {
    uint32_t cp, a, b;
} rkm_ucd_decomp_entry;

typedef struct rkm_ucd_kdecomp_entry {
    uint32_t cp;
    uint16_t offset, len; /* into rkm_ucd_kdecomp_pool */
} rkm_ucd_kdecomp_entry;

typedef struct rkm_ucd_case_entry {
    uint32_t cp;
    uint32_t to[3]; /* the mapping; unused slots 0 */
} rkm_ucd_case_entry;

/* Generated tables (unicode_data.c, unicode_norm_data.c). */
extern const rkm_ucd_range rkm_ucd_flags[];
extern const int rkm_ucd_n_flags;
extern const uint8_t rkm_ucd_latin1[256];
extern const rkm_ucd_range rkm_ucd_ccc[];
extern const int rkm_ucd_n_ccc;
extern const rkm_ucd_range rkm_ucd_nfc_qc[];
extern const int rkm_ucd_n_nfc_qc;
extern const rkm_ucd_decomp_entry rkm_ucd_decomp[];
extern const int rkm_ucd_n_decomp;
extern const rkm_ucd_decomp_entry rkm_ucd_comp[];
extern const int rkm_ucd_n_comp;
extern const rkm_ucd_kdecomp_entry rkm_ucd_kdecomp[];
extern const int rkm_ucd_n_kdecomp;
extern const uint32_t rkm_ucd_kdecomp_pool[];
extern const int rkm_ucd_n_kdecomp_pool;
extern const rkm_ucd_range rkm_ucd_qc_nfkc[];
extern const int rkm_ucd_n_qc_nfkc;
extern const rkm_ucd_decomp_entry rkm_ucd_lower[];
extern const int rkm_ucd_n_lower;
extern const rkm_ucd_range rkm_ucd_mn[], rkm_ucd_assigned[];
extern const int rkm_ucd_n_mn, rkm_ucd_n_assigned;
extern const int rkm_ucd_nfkd_max_per_byte;
extern const rkm_ucd_case_entry rkm_ucd_upper[];
extern const int rkm_ucd_n_upper;
extern const rkm_ucd_range rkm_ucd_cased[], rkm_ucd_case_ignorable[];
extern const int rkm_ucd_n_cased, rkm_ucd_n_case_ignorable;

/* Decodes one UTF-8 sequence at s (n bytes available). Returns its length
 * (1..4) and sets *cp, or 0 if the bytes are not valid UTF-8 (overlong
 * forms, surrogates, > U+10FFFF and truncated sequences are invalid). */
int rkm_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Encodes cp (<= U+10FFFF) into out (4 bytes of room); returns length. */
int rkm_utf8_encode(uint32_t cp, char *out);
/* Byte offset of the first invalid sequence, or n if all of s is valid. */
size_t rkm_utf8_valid_prefix(const char *s, size_t n);
/* Appends s[0..n) to b with one U+FFFD for each byte that starts no valid
 * sequence (struct rkm_buf: util/buf.h). */
struct rkm_buf;
void rkm_utf8_sanitize(struct rkm_buf *b, const char *s, size_t n);
/* Length of the sequence a lead byte announces (1..4), 0 for a byte that
 * cannot start a sequence. */
int rkm_utf8_seq_len(unsigned char lead);
/* Length of the longest prefix of s[0..n) that does not end inside a
 * sequence: a lead byte at the end whose continuation bytes have not all
 * arrived is cut off with them (streamed text holds it back); a byte that
 * cannot start a sequence is not waited for. Validity is not checked. */
size_t rkm_utf8_complete_prefix(const char *s, size_t n);

/* RKM_UC_* flags of a code point. */
unsigned rkm_unicode_flags(uint32_t cp);
/* Canonical combining class. */
int rkm_unicode_ccc(uint32_t cp);

/* Lowercase mapping of cp (full, context-free: U+0130 gives two code
 * points; no Final_Sigma rule). Writes 1 or 2 code points, returns count. */
int rkm_unicode_lower(uint32_t cp, uint32_t out[2]);
/* Uppercase mapping of cp (full, context-free, language-neutral, as
 * JavaScript's toUpperCase: U+00DF gives "SS", U+0390 three code points).
 * Writes 1 to 3 code points, returns count. */
int rkm_unicode_upper(uint32_t cp, uint32_t out[3]);
/* The Cased and Case_Ignorable properties (Unicode's Final_Sigma context:
 * U+03A3 lowercases to U+03C2 after a cased letter, not before one). */
int rkm_unicode_is_cased(uint32_t cp);
int rkm_unicode_is_case_ignorable(uint32_t cp);
/* General category Mn (nonspacing mark). */
int rkm_unicode_is_mn(uint32_t cp);
/* Assigned in the Unicode version of the tables (any category but Cn). */
int rkm_unicode_assigned(uint32_t cp);

enum rkm_nf { RKM_NF_NFC, RKM_NF_NFD, RKM_NF_NFKC, RKM_NF_NFKD };
/* Normalization form `form` (enum rkm_nf) of a UTF-8 string (must be
 * valid UTF-8; an invalid byte becomes U+FFFD) into a malloc'd buffer with
 * a NUL after the data; *out_len gets its length. NULL on allocation
 * failure or a bad form. */
char *rkm_unicode_normalize(const char *s, size_t n, int form, size_t *out_len);
/* rkm_unicode_normalize(s, n, RKM_NF_NFC, out_len). */
char *rkm_unicode_nfc(const char *s, size_t n, size_t *out_len);

#endif
