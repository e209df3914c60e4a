/*
 * charsmap.c - SentencePiece precompiled_charsmap: parsing (bounds-checked,
 * the blob is untrusted model data) and longest-match rewriting over its
 * double-array trie. The layout is documented in charsmap.h.
 *
 * Threads: a parsed charsmap is immutable; any thread may use it.
 * Ownership: rkm_charsmap_parse copies the blob; rkm_charsmap_free frees it.
 */
#include "text/charsmap.h"

#include <stdlib.h>
#include <string.h>

#include "text/unicode.h"
#include "util/common.h"

struct rkm_charsmap {
    unsigned char *blob; /* the whole blob, as given */
    size_t blob_bytes;
    const unsigned char *trie; /* units, little-endian u32 */
    size_t n_units;
    const char *strings; /* NUL-terminated replacements */
    size_t strings_bytes;
};

/* Longest rule key we follow: real tables have keys of a few characters;
 * a corrupt trie could chain labels along the whole input and make
 * normalizing quadratic without this bound. */
#define RKM_CHARSMAP_MAX_KEY 256

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t unit_at(const rkm_charsmap *m, size_t i) { return rd32(m->trie + 4 * i); }
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static int unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

rkm_charsmap *rkm_charsmap_parse(const void *blob, size_t n)
{
    rkm_charsmap *m = calloc(1, sizeof *m);
    if (!m || !(m->blob = malloc(n ? n : 1))) {
        free(m);
        rkm_err(RKM_ENOMEM, "precompiled_charsmap: out of memory");
        return NULL;
    }
    if (n) memcpy(m->blob, blob, n);
    m->blob_bytes = n;
    if (n == 0) return m; /* no rules: the identity */
    if (n < 4) {
        rkm_err(RKM_EFORMAT, "precompiled_charsmap: %zu bytes, too short for its header", n);
        goto fail;
    }
    uint32_t trie_bytes = rd32(m->blob);
    if (trie_bytes % 4 || trie_bytes > n - 4) {
        rkm_err(RKM_EFORMAT, "precompiled_charsmap: trie size %u does not fit the %zu-byte blob", (unsigned)trie_bytes,
                n);
        goto fail;
    }
    m->trie = m->blob + 4;
    m->n_units = trie_bytes / 4;
    m->strings = (const char *)m->blob + 4 + trie_bytes;
    m->strings_bytes = n - 4 - trie_bytes;
    if (m->strings_bytes && m->strings[m->strings_bytes - 1] != 0) {
        rkm_err(RKM_EFORMAT, "precompiled_charsmap: the replacement table is not NUL-terminated");
        goto fail;
    }
    /* NULs separate the strings; everything between must be UTF-8 */
    for (size_t i = 0; i < m->strings_bytes;) {
        size_t e = i;
        while (m->strings[e]) e++;
        if (rkm_utf8_valid_prefix(m->strings + i, e - i) != e - i) {
            rkm_err(RKM_EFORMAT, "precompiled_charsmap: replacement at offset %zu is not UTF-8", i);
            goto fail;
        }
        i = e + 1;
    }
    return m;
fail:
    rkm_charsmap_free(m);
    return NULL;
}

void rkm_charsmap_free(rkm_charsmap *m)
{
    if (!m) return;
    free(m->blob);
    free(m);
}

const void *rkm_charsmap_blob(const rkm_charsmap *m, size_t *n)
{
    *n = m->blob_bytes;
    return m->blob;
}

size_t rkm_charsmap_match(const rkm_charsmap *m, const char *s, size_t n, const char **rep, size_t *rep_len)
{
    if (m->n_units == 0) return 0;
    size_t best = 0;
    size_t pos = unit_offset(unit_at(m, 0)); /* the root's children */
    if (n > RKM_CHARSMAP_MAX_KEY) n = RKM_CHARSMAP_MAX_KEY;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0) break;
        pos ^= c;
        if (pos >= m->n_units) break;
        uint32_t u = unit_at(m, pos);
        if (unit_label(u) != c) break;
        pos ^= unit_offset(u); /* the node's base: may lie past the end, its children need not */
        if (!unit_has_leaf(u) || pos >= m->n_units) continue;
        uint32_t v = unit_value(unit_at(m, pos));
        if (v >= m->strings_bytes) continue; /* corrupt value: not a rule */
        const char *r = m->strings + v;
        size_t rl = strlen(r); /* terminated: checked at parse */
        if (rkm_utf8_valid_prefix(r, rl) != rl) continue; /* offset inside a character */
        best = i + 1;
        *rep = r;
        *rep_len = rl;
    }
    return best;
}

int rkm_charsmap_normalize(const rkm_charsmap *m, const char *s, size_t n, char **out, size_t *out_len)
{
    size_t cap = n + 16, o = 0;
    char *b = malloc(cap);
    if (!b) return RKM_ENOMEM;
    for (size_t i = 0; i < n;) {
        const char *r = NULL;
        size_t rl = 0;
        size_t used = rkm_charsmap_match(m, s + i, n - i, &r, &rl);
        if (used == 0) { /* copy one character */
            int l = rkm_utf8_seq_len((unsigned char)s[i]);
            used = l == 0 || (size_t)l > n - i ? 1 : (size_t)l;
            r = s + i;
            rl = used;
        }
        if (o + rl + 1 > cap) {
            while (o + rl + 1 > cap) cap *= 2;
            char *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                return RKM_ENOMEM;
            }
            b = nb;
        }
        memcpy(b + o, r, rl);
        o += rl;
        i += used;
    }
    b[o] = 0;
    *out = b;
    *out_len = o;
    return 0;
}
