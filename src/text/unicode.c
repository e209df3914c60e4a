/*
 * unicode.c - UTF-8 coding, category lookups and NFC over the generated
 * tables of unicode_data.c. Pure functions on read-only tables: any thread.
 * rkm_unicode_normalize returns a malloc'd buffer the caller frees.
 *
 * Lookups are binary searches over sorted ranges, with an ASCII table in
 * front because tokenizer input is mostly ASCII.
 */
#include "text/unicode.h"
#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

int rkm_utf8_seq_len(unsigned char c)
{
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0; /* continuation byte or overlong 2-byte lead */
    if (c < 0xE0) return 2;
    if (c < 0xF0) return 3;
    if (c < 0xF5) return 4;
    return 0;
}

int rkm_utf8_decode(const char *str, size_t n, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) return 0;
    int len = rkm_utf8_seq_len(s[0]);
    if (len == 0 || (size_t)len > n) return 0;
    if (len == 1) {
        *cp = s[0];
        return 1;
    }
    uint32_t c = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)) ||
        (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return len;
}

int rkm_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t rkm_utf8_complete_prefix(const char *s, size_t n)
{
    for (size_t back = 0; back < 4 && back < n; back++) {
        unsigned char c = (unsigned char)s[n - 1 - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation: look further back */
        size_t need = (size_t)rkm_utf8_seq_len(c);
        return back + 1 >= need ? n : n - 1 - back;
    }
    return n; /* stray continuation bytes: nothing to wait for */
}

size_t rkm_utf8_valid_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int l = rkm_utf8_decode(s + i, n - i, &cp);
        if (l == 0) return i;
        i += (size_t)l;
    }
    return n;
}

static const rkm_ucd_range *range_find(const rkm_ucd_range *r, int n, uint32_t cp)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].first) hi = mid - 1;
        else if (cp > r[mid].last) lo = mid + 1;
        else return &r[mid];
    }
    return NULL;
}

unsigned rkm_unicode_flags(uint32_t cp)
{
    if (cp < 256) return rkm_ucd_latin1[cp];
    const rkm_ucd_range *r = range_find(rkm_ucd_flags, rkm_ucd_n_flags, cp);
    return r ? r->value : RKM_UC_C;
}

int rkm_unicode_ccc(uint32_t cp)
{
    if (cp < 0x300) return 0;
    const rkm_ucd_range *r = range_find(rkm_ucd_ccc, rkm_ucd_n_ccc, cp);
    return r ? (int)r->value : 0;
}

/* ------------------------------------------------------------------ NFC */

enum { HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7,
       HANGUL_LC = 19, HANGUL_VC = 21, HANGUL_TC = 28, HANGUL_NC = 21 * 28, HANGUL_SC = 19 * 21 * 28 };

static const rkm_ucd_decomp_entry *decomp_find(uint32_t cp)
{
    int lo = 0, hi = rkm_ucd_n_decomp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < rkm_ucd_decomp[mid].cp) hi = mid - 1;
        else if (cp > rkm_ucd_decomp[mid].cp) lo = mid + 1;
        else return &rkm_ucd_decomp[mid];
    }
    return NULL;
}

static uint32_t compose_pair(uint32_t a, uint32_t b)
{
    if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LC && b >= HANGUL_V && b < HANGUL_V + HANGUL_VC)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VC + (b - HANGUL_V)) * HANGUL_TC;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SC && (a - HANGUL_S) % HANGUL_TC == 0 && b > HANGUL_T &&
        b < HANGUL_T + HANGUL_TC)
        return a + (b - HANGUL_T);
    int lo = 0, hi = rkm_ucd_n_comp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const rkm_ucd_decomp_entry *e = &rkm_ucd_comp[mid];
        if (a < e->cp || (a == e->cp && b < e->a)) hi = mid - 1;
        else if (a > e->cp || b > e->a) lo = mid + 1;
        else return e->b;
    }
    return 0;
}

static const rkm_ucd_kdecomp_entry *kdecomp_find(uint32_t cp)
{
    int lo = 0, hi = rkm_ucd_n_kdecomp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < rkm_ucd_kdecomp[mid].cp) hi = mid - 1;
        else if (cp > rkm_ucd_kdecomp[mid].cp) lo = mid + 1;
        else return &rkm_ucd_kdecomp[mid];
    }
    return NULL;
}

/* Appends the full canonical decomposition of cp (or, with compat, the
 * full compatibility decomposition: the generated table holds it already
 * expanded for every code point where it differs from the canonical one).
 * Canonical decompositions nest at most a few levels deep (the UCD
 * guarantees it); the depth bound only protects against a corrupt table. */
static size_t decompose(uint32_t cp, uint32_t *out, int depth, int compat)
{
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SC) {
        uint32_t s = cp - HANGUL_S;
        out[0] = HANGUL_L + s / HANGUL_NC;
        out[1] = HANGUL_V + (s % HANGUL_NC) / HANGUL_TC;
        if (s % HANGUL_TC) {
            out[2] = HANGUL_T + s % HANGUL_TC;
            return 3;
        }
        return 2;
    }
    if (cp < 0xA0) {
        out[0] = cp;
        return 1;
    }
    if (compat) {
        const rkm_ucd_kdecomp_entry *k = kdecomp_find(cp);
        if (k) {
            memcpy(out, rkm_ucd_kdecomp_pool + k->offset, k->len * sizeof *out);
            return k->len;
        }
    }
    const rkm_ucd_decomp_entry *e = cp >= 0xC0 && depth < 8 ? decomp_find(cp) : NULL;
    if (!e) {
        out[0] = cp;
        return 1;
    }
    size_t n = decompose(e->a, out, depth + 1, 0);
    if (e->b) n += decompose(e->b, out + n, depth + 1, 0);
    return n;
}

/* Stable sort of a run of non-starters by combining class: insertion sort
 * for short runs, counting sort for long ones (a hostile run of a million
 * marks must not go quadratic). */
static void sort_run(uint32_t *c, uint8_t *k, size_t n, uint32_t *tmp_c, uint8_t *tmp_k)
{
    if (n < 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t vc = c[i];
            uint8_t vk = k[i];
            size_t j = i;
            while (j > 0 && k[j - 1] > vk) {
                c[j] = c[j - 1];
                k[j] = k[j - 1];
                j--;
            }
            c[j] = vc;
            k[j] = vk;
        }
        return;
    }
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++) count[k[i] + 1]++;
    for (int i = 0; i < 256; i++) count[i + 1] += count[i];
    for (size_t i = 0; i < n; i++) {
        size_t d = count[k[i]]++;
        tmp_c[d] = c[i];
        tmp_k[d] = k[i];
    }
    memcpy(c, tmp_c, n * sizeof *c);
    memcpy(k, tmp_k, n);
}

/* The quick check of a form: 1 when c's NFC_QC / NFD_QC / NFKC_QC /
 * NFKD_QC is No or Maybe. NFD_QC (NFKD_QC) is No exactly for the code
 * points with a canonical (any) decomposition, so those two need no table. */
static int qc_not_yes(int form, uint32_t c)
{
    switch (form) {
    case RKM_NF_NFC: return range_find(rkm_ucd_nfc_qc, rkm_ucd_n_nfc_qc, c) != NULL;
    case RKM_NF_NFKC: return range_find(rkm_ucd_qc_nfkc, rkm_ucd_n_qc_nfkc, c) != NULL;
    default: {
        int decomposes = (c >= HANGUL_S && c < HANGUL_S + HANGUL_SC) || (c >= 0xC0 && decomp_find(c));
        return decomposes || (form == RKM_NF_NFKD && kdecomp_find(c));
    }
    }
}

char *rkm_unicode_nfc(const char *s, size_t n, size_t *out_len) { return rkm_unicode_normalize(s, n, RKM_NF_NFC, out_len); }

char *rkm_unicode_normalize(const char *s, size_t n, int form, size_t *out_len)
{
    if (form < RKM_NF_NFC || form > RKM_NF_NFKD) return NULL;
    int compat = form == RKM_NF_NFKC || form == RKM_NF_NFKD;
    int compose = form == RKM_NF_NFC || form == RKM_NF_NFKC;
    /* Fast paths: below U+00A0 every string is normal in every form, and
     * below U+0300 in NFC (no character there decomposes, has a non-zero
     * combining class or composes with a follower); otherwise the quick
     * check of UAX #15 (the form's QC property, canonical ordering) proves
     * most text normalized without rewriting it. */
    size_t i = 0;
    unsigned char fast = form == RKM_NF_NFC ? 0xCC : 0xC2;
    while (i < n && (unsigned char)s[i] < fast) i++;
    int quick_yes = 1;
    for (size_t k = i, last_cc = 0; k < n && quick_yes;) {
        uint32_t c;
        int l = rkm_utf8_decode(s + k, n - k, &c);
        if (l == 0) {
            quick_yes = 0;
            break;
        }
        k += (size_t)l;
        if (c < 0xA0) {
            last_cc = 0;
            continue;
        }
        size_t cc = (size_t)rkm_unicode_ccc(c);
        if (cc != 0 && last_cc > cc) quick_yes = 0;
        if (qc_not_yes(form, c)) quick_yes = 0; /* No or Maybe */
        last_cc = cc;
    }
    if (quick_yes) {
        char *r = malloc(n + 1);
        if (!r) return NULL;
        memcpy(r, s, n);
        r[n] = 0;
        *out_len = n;
        return r;
    }
    /* One input byte yields at most rkm_ucd_nfkd_max_per_byte code points
     * (a bound the generator computes over every character's canonical
     * and compatibility decompositions: U+FDFA gives 18 from 3 bytes). */
    size_t per = (size_t)(rkm_ucd_nfkd_max_per_byte > 4 ? rkm_ucd_nfkd_max_per_byte : 4);
    if (n > ((size_t)-1 / 4 - 8) / per / sizeof(uint32_t)) return NULL;
    size_t cap = n * per + 4;
    uint32_t *cp = malloc(cap * sizeof *cp);
    uint8_t *cc = malloc(cap);
    uint32_t *tmp_c = malloc(cap * sizeof *tmp_c);
    uint8_t *tmp_k = malloc(cap);
    char *out = NULL;
    if (!cp || !cc || !tmp_c || !tmp_k) goto fail;
    size_t m = 0;
    for (i = 0; i < n;) {
        uint32_t c;
        int l = rkm_utf8_decode(s + i, n - i, &c);
        if (l == 0) { /* caller promised valid input; keep U+FFFD */
            c = 0xFFFD;
            l = 1;
        }
        i += (size_t)l;
        m += decompose(c, cp + m, 0, compat);
    }
    if (!(out = malloc(m * 4 + 1))) goto fail;
    for (size_t j = 0; j < m; j++) cc[j] = (uint8_t)rkm_unicode_ccc(cp[j]);
    for (size_t j = 0; j < m;) {
        if (cc[j] == 0) {
            j++;
            continue;
        }
        size_t e = j;
        while (e < m && cc[e] != 0) e++;
        if (e - j > 1) sort_run(cp + j, cc + j, e - j, tmp_c, tmp_k);
        j = e;
    }
    /* Canonical composition, in place (NFC, NFKC). */
    size_t w = compose ? 0 : m;
    long starter = -1;
    int last_cc = 0;
    for (size_t j = 0; compose && j < m; j++) {
        uint32_t c = cp[j];
        int k = cc[j];
        if (starter >= 0 && (w == (size_t)starter + 1 || (last_cc != 0 && last_cc < k))) {
            uint32_t comp = compose_pair(cp[starter], c);
            if (comp) {
                cp[starter] = comp;
                continue;
            }
        }
        if (k == 0) starter = (long)w;
        last_cc = k;
        cp[w] = c;
        cc[w] = (uint8_t)k;
        w++;
    }
    size_t o = 0;
    for (size_t j = 0; j < w; j++) o += (size_t)rkm_utf8_encode(cp[j], out + o);
    out[o] = 0;
    *out_len = o;
    free(cp);
    free(cc);
    free(tmp_c);
    free(tmp_k);
    return out;
fail:
    free(cp);
    free(cc);
    free(tmp_c);
    free(tmp_k);
    free(out);
    return NULL;
}

/* ------------------------------------------------------------ case, marks */

int rkm_unicode_lower(uint32_t cp, uint32_t out[2])
{
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    int lo = 0, hi = rkm_ucd_n_lower - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const rkm_ucd_decomp_entry *e = &rkm_ucd_lower[mid];
        if (cp < e->cp) hi = mid - 1;
        else if (cp > e->cp) lo = mid + 1;
        else {
            out[0] = e->a;
            if (!e->b) return 1;
            out[1] = e->b;
            return 2;
        }
    }
    out[0] = cp;
    return 1;
}

int rkm_unicode_upper(uint32_t cp, uint32_t out[3])
{
    if (cp < 0x80) {
        out[0] = cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
        return 1;
    }
    int lo = 0, hi = rkm_ucd_n_upper - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const rkm_ucd_case_entry *e = &rkm_ucd_upper[mid];
        if (cp < e->cp) hi = mid - 1;
        else if (cp > e->cp) lo = mid + 1;
        else {
            int k = 0;
            do out[k] = e->to[k]; while (++k < 3 && e->to[k]);
            return k;
        }
    }
    out[0] = cp;
    return 1;
}

int rkm_unicode_is_cased(uint32_t cp) { return range_find(rkm_ucd_cased, rkm_ucd_n_cased, cp) != NULL; }

int rkm_unicode_is_case_ignorable(uint32_t cp)
{
    return range_find(rkm_ucd_case_ignorable, rkm_ucd_n_case_ignorable, cp) != NULL;
}

int rkm_unicode_is_mn(uint32_t cp) { return cp >= 0x300 && range_find(rkm_ucd_mn, rkm_ucd_n_mn, cp) != NULL; }

int rkm_unicode_assigned(uint32_t cp) { return range_find(rkm_ucd_assigned, rkm_ucd_n_assigned, cp) != NULL; }

void rkm_utf8_sanitize(rkm_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t ok = rkm_utf8_valid_prefix(s + i, n - i);
        rkm_buf_add(b, s + i, ok);
        i += ok;
        if (i < n) { /* one U+FFFD per byte that starts no valid sequence */
            rkm_buf_add(b, "\xEF\xBF\xBD", 3);
            i++;
        }
    }
}
