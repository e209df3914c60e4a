/*
 * jinja_value.c - the template engine's foundations: the context (arena
 * allocation under a byte limit, rkm_jinja__fail), strings, the UTF-8 and
 * JavaScript string/number rules @huggingface/jinja inherits (white space,
 * parseInt/parseFloat, Number#toString), values (lists, ordered dicts),
 * JSON output (tojson) and how values print, compare and sort.
 *
 * Threads: pure functions over one context; a context belongs to one
 * parse or render. Ownership: everything is allocated from the context's
 * arena and freed with it (rkm_jinja__ctx_free), except
 * rkm_jinja__u8_sanitize_alloc's malloc'd copy, which the caller frees.
 */
#include "text/jinja_impl.h"

#include "text/unicode.h"

/* ------------------------------------------------------------ context */


static void pos_linecol(const jctx *c, uint32_t pos, int *line, int *col)
{
    size_t lo = 0, hi = c->n_lines;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (c->lines[mid] <= pos) lo = mid; else hi = mid;
    }
    *line = (int)lo + 1;
    *col = (int)(pos - (c->n_lines ? c->lines[lo] : 0)) + 1;
}

_Noreturn RKM_PRINTF(3, 4) void rkm_jinja__fail(jctx *c, uint32_t pos, const char *fmt, ...)
{
    char m[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (pos != NOPOS && c->lines) {
        int l, col;
        pos_linecol(c, pos, &l, &col);
        snprintf(c->msg, sizeof c->msg, "template line %d:%d: %s", l, col, m);
    } else {
        snprintf(c->msg, sizeof c->msg, "template: %s", m);
    }
    if (!c->code) c->code = RKM_EFORMAT;
    longjmp(c->jb, 1);
}

void *rkm_jinja__alloc(jctx *c, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > c->limit || c->total + n > c->limit) {
        c->code = RKM_ENOMEM;
        rkm_jinja__fail(c, NOPOS, "template needs more than %zu bytes of memory", c->limit);
    }
    void *p = rkm_arena_alloc(&c->arena, n);
    if (!p) {
        c->code = RKM_ENOMEM;
        rkm_jinja__fail(c, NOPOS, "out of memory");
    }
    c->total += n;
    return p;
}

/* ------------------------------------------------------------ strings */

jstr *rkm_jinja__str_new(jctx *c, const char *p, size_t n)
{
    jstr *s = rkm_jinja__alloc(c, sizeof(jstr) + n + 1);
    s->len = n;
    if (n) memcpy(s->s, p, n);
    s->s[n] = 0;
    return s;
}

struct jbuf {
    rkm_buf b;
    jbuf *next;
};

void rkm_jinja__ctx_free(jctx *c)
{
    for (jbuf *j = c->bufs; j; j = j->next) rkm_buf_free(&j->b);
    c->bufs = NULL;
    rkm_arena_free(&c->arena);
}

rkm_buf *rkm_jinja__buf_new(jctx *c)
{
    jbuf *j = rkm_jinja__alloc(c, sizeof *j);
    j->b = (rkm_buf)RKM_BUF_INIT;
    j->next = c->bufs;
    c->bufs = j;
    return &j->b;
}

static void buf_reserve(jctx *c, rkm_buf *b, size_t extra)
{
    size_t cap = b->cap;
    if (extra > c->limit || rkm_buf_reserve(b, extra)) {
        c->code = RKM_ENOMEM;
        rkm_jinja__fail(c, NOPOS, "out of memory");
    }
    c->total += b->cap - cap;
    if (c->total > c->limit) {
        c->code = RKM_ENOMEM;
        rkm_jinja__fail(c, NOPOS, "template needs more than %zu bytes of memory", c->limit);
    }
}

void rkm_jinja__buf_add(jctx *c, rkm_buf *b, const char *p, size_t n)
{
    if (!n) return;
    buf_reserve(c, b, n);
    rkm_buf_add(b, p, n);
}

jstr *rkm_jinja__buf_str(jctx *c, rkm_buf *b)
{
    jstr *s = rkm_jinja__str_new(c, b->data ? b->data : "", b->len);
    rkm_buf_free(b);
    return s;
}

/* --------------------------------------------------------------- UTF-8 */

/* Decodes one code point (sources are sanitized on entry); returns its
 * length. A stray byte decodes as itself, length 1. */
int rkm_jinja__u8_dec(const char *p, size_t n, uint32_t *cp)
{
    if (!n) { *cp = 0; return 0; }
    int l = rkm_utf8_decode(p, n, cp);
    if (l) return l;
    *cp = (unsigned char)p[0];
    return 1;
}

/* Surrogates and values past U+10FFFF encode as U+FFFD. */
int rkm_jinja__u8_enc(uint32_t cp, char *o)
{
    if ((cp >= 0xD800 && cp < 0xE000) || cp > 0x10FFFF) cp = 0xFFFD;
    return rkm_utf8_encode(cp, o);
}

size_t rkm_jinja__u8_prev(const char *s, size_t i)
{
    if (!i) return 0;
    i--;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return i;
}

/* Replaces invalid UTF-8 with U+FFFD the way a WHATWG decoder (Node's)
 * does: one replacement per maximal invalid subpart. Returns NULL when the
 * input is already valid (the common case, no copy). */
char *rkm_jinja__u8_sanitize_alloc(const char *p, size_t n, size_t *out_n)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    int bad = 0;
    char *o = NULL;
    size_t on = 0;
    for (int pass = 0; pass < 2; pass++) {
        i = 0;
        on = 0;
        while (i < n) {
            unsigned b = s[i];
            int need = 0;
            unsigned lo = 0x80, hi = 0xBF;
            if (b < 0x80) { if (o) o[on] = (char)b; on++; i++; continue; }
            if (b >= 0xC2 && b <= 0xDF) need = 1;
            else if (b >= 0xE0 && b <= 0xEF) { need = 2; if (b == 0xE0) lo = 0xA0; if (b == 0xED) hi = 0x9F; }
            else if (b >= 0xF0 && b <= 0xF4) { need = 3; if (b == 0xF0) lo = 0x90; if (b == 0xF4) hi = 0x8F; }
            size_t j = i + 1;
            int ok = need > 0;
            for (int k = 0; ok && k < need; k++) {
                if (j >= n || s[j] < lo || s[j] > hi) { ok = 0; break; }
                lo = 0x80; hi = 0xBF;
                j++;
            }
            if (ok) {
                if (o) memcpy(o + on, s + i, j - i);
                on += j - i;
                i = j;
            } else {
                bad = 1;
                if (o) memcpy(o + on, "\xEF\xBF\xBD", 3);
                on += 3;
                i = need > 0 ? j : i + 1;
            }
        }
        if (!bad) return NULL;
        if (pass == 0) {
            o = malloc(on + 1);
            if (!o) return NULL;
        }
    }
    o[on] = 0;
    *out_n = on;
    return o;
}

/* JavaScript's \s / String.prototype.trim white space. */
int rkm_jinja__js_space(uint32_t c)
{
    return c == 9 || c == 10 || c == 11 || c == 12 || c == 13 || c == 32 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000 || c == 0xFEFF;
}

size_t rkm_jinja__js_trim_start(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = rkm_jinja__u8_dec(s + i, n - i, &cp);
        if (!rkm_jinja__js_space(cp)) break;
        i += l;
    }
    return i;
}

size_t rkm_jinja__js_trim_end(const char *s, size_t n) /* new length */
{
    while (n > 0) {
        size_t p = rkm_jinja__u8_prev(s, n);
        uint32_t cp;
        rkm_jinja__u8_dec(s + p, n - p, &cp);
        if (!rkm_jinja__js_space(cp)) break;
        n = p;
    }
    return n;
}

size_t rkm_jinja__u16_len(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += rkm_jinja__u8_dec(s + i, n - i, &cp);
        k += cp >= 0x10000 ? 2 : 1;
    }
    return k;
}

/* Unicode's Final_Sigma context for the capital sigma at s[at..after):
 * a cased letter before it and none after it, skipping case-ignorable
 * code points on both sides (what JavaScript's toLowerCase applies). */
static int final_sigma(const char *s, size_t n, size_t at, size_t after)
{
    int cased_before = 0;
    for (size_t p = at; p > 0;) {
        size_t q = rkm_jinja__u8_prev(s, p);
        uint32_t cp;
        rkm_jinja__u8_dec(s + q, p - q, &cp);
        if (!rkm_unicode_is_case_ignorable(cp)) {
            cased_before = rkm_unicode_is_cased(cp);
            break;
        }
        p = q;
    }
    if (!cased_before) return 0;
    for (size_t i = after; i < n;) {
        uint32_t cp;
        i += (size_t)rkm_jinja__u8_dec(s + i, n - i, &cp);
        if (!rkm_unicode_is_case_ignorable(cp)) return !rkm_unicode_is_cased(cp);
    }
    return 1;
}

/* JavaScript's toUpperCase / toLowerCase: full, language-neutral case
 * mapping from the project's Unicode tables (never the C library's
 * locale, so the output does not depend on the host). */
jstr *rkm_jinja__str_case(jctx *c, const char *s, size_t n, int upper)
{
    rkm_buf *b = rkm_jinja__buf_new(c);
    buf_reserve(c, b, n + 8);
    for (size_t i = 0; i < n;) {
        uint32_t cp, m[3];
        size_t at = i;
        i += (size_t)rkm_jinja__u8_dec(s + i, n - i, &cp);
        int k;
        if (upper) k = rkm_unicode_upper(cp, m);
        else if (cp == 0x3A3) m[0] = final_sigma(s, n, at, i) ? 0x3C2 : 0x3C3, k = 1;
        else k = rkm_unicode_lower(cp, m);
        for (int j = 0; j < k; j++) {
            char e[4];
            rkm_jinja__buf_add(c, b, e, (size_t)rkm_jinja__u8_enc(m[j], e));
        }
    }
    return rkm_jinja__buf_str(c, b);
}

/* ------------------------------------------------------------ numbers */

/* Number.prototype.toString (shortest round-trip digits, JS layout). */
static void js_num(double x, char *out)
{
    if (isnan(x)) { strcpy(out, "NaN"); return; }
    if (isinf(x)) { strcpy(out, x < 0 ? "-Infinity" : "Infinity"); return; }
    if (x == 0) { strcpy(out, "0"); return; }
    char tmp[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    char *o = out;
    const char *t = tmp;
    if (*t == '-') { *o++ = '-'; t++; }
    char digits[24];
    int k = 0;
    for (; *t && *t != 'e'; t++)
        if (is_digit(*t)) digits[k++] = *t;
    while (k > 1 && digits[k - 1] == '0') k--;
    digits[k] = 0;
    int e = atoi(t + 1);
    int n = e + 1;
    if (k <= n && n <= 21) {
        memcpy(o, digits, (size_t)k); o += k;
        for (int i = 0; i < n - k; i++) *o++ = '0';
    } else if (0 < n && n <= 21) {
        memcpy(o, digits, (size_t)n); o += n;
        *o++ = '.';
        memcpy(o, digits + n, (size_t)(k - n)); o += k - n;
    } else if (-6 < n && n <= 0) {
        *o++ = '0'; *o++ = '.';
        for (int i = 0; i < -n; i++) *o++ = '0';
        memcpy(o, digits, (size_t)k); o += k;
    } else {
        *o++ = digits[0];
        if (k > 1) { *o++ = '.'; memcpy(o, digits + 1, (size_t)(k - 1)); o += k - 1; }
        o += sprintf(o, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
    }
    *o = 0;
}

/* FloatValue.toString: integral values keep one decimal ("2.0"). */
static void js_float_str(double x, char *out)
{
    if (x == 0 && signbit(x)) { strcpy(out, "-0.0"); return; }
    if (isfinite(x) && fmod(x, 1.0) == 0 && fabs(x) < 1e21) { snprintf(out, 40, "%.1f", x); return; }
    js_num(x, out);
}

/* parseInt(s, 10) / parseFloat(s): leading JS white space, longest prefix. */
double rkm_jinja__js_parse_int(const char *s, size_t n)
{
    size_t i = rkm_jinja__js_trim_start(s, n);
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i >= n || !is_digit(s[i])) return NAN;
    double v = 0;
    while (i < n && is_digit(s[i])) v = v * 10 + (s[i++] - '0');
    return neg ? -v : v;
}

double rkm_jinja__js_parse_float(const char *s, size_t n)
{
    size_t i = rkm_jinja__js_trim_start(s, n), st = i;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (n - i >= 8 && !memcmp(s + i, "Infinity", 8)) return s[st] == '-' ? -INFINITY : INFINITY;
    size_t d0 = i;
    while (i < n && is_digit(s[i])) i++;
    int nd = (int)(i - d0);
    if (i < n && s[i] == '.') {
        i++;
        size_t f0 = i;
        while (i < n && is_digit(s[i])) i++;
        nd += (int)(i - f0);
    }
    if (!nd) return NAN;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < n && (s[j] == '+' || s[j] == '-')) j++;
        if (j < n && is_digit(s[j])) {
            while (j < n && is_digit(s[j])) j++;
            i = j;
        }
    }
    char buf[128];
    size_t l = i - st;
    if (l >= sizeof buf) l = sizeof buf - 1; /* absurdly long: precision is moot */
    memcpy(buf, s + st, l);
    buf[l] = 0;
    return strtod(buf, NULL);
}

/* Number(s) for loose equality: the whole trimmed string must be numeric. */
static double js_to_number(const char *s, size_t n)
{
    size_t a = rkm_jinja__js_trim_start(s, n), b = rkm_jinja__js_trim_end(s, n);
    if (b <= a) return 0;
    const char *p = s + a;
    size_t l = b - a;
    if (l > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        double v = 0;
        for (size_t i = 2; i < l; i++) {
            int ch = p[i], d = is_digit(ch) ? ch - '0' : (ch | 32) >= 'a' && (ch | 32) <= 'f' ? (ch | 32) - 'a' + 10 : -1;
            if (d < 0) return NAN;
            v = v * 16 + d;
        }
        return v;
    }
    size_t i = 0;
    if (p[i] == '+' || p[i] == '-') i++;
    if (l - i == 8 && !memcmp(p + i, "Infinity", 8)) return p[0] == '-' ? -INFINITY : INFINITY;
    int nd = 0;
    while (i < l && is_digit(p[i])) i++, nd++;
    if (i < l && p[i] == '.') { i++; while (i < l && is_digit(p[i])) i++, nd++; }
    if (!nd) return NAN;
    if (i < l && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < l && (p[i] == '+' || p[i] == '-')) i++;
        if (i >= l || !is_digit(p[i])) return NAN;
        while (i < l && is_digit(p[i])) i++;
    }
    if (i != l) return NAN;
    return rkm_jinja__js_parse_float(p, l);
}

/* ------------------------------------------------------------- values */

jv rkm_jinja__v_list(jctx *c, size_t cap)
{
    jv v = {V_LIST, {0}};
    v.u.l = rkm_jinja__alloc(c, sizeof(jlist));
    v.u.l->n = 0;
    v.u.l->tuple = 0;
    v.u.l->cap = cap;
    v.u.l->v = cap ? rkm_jinja__alloc(c, cap * sizeof(jv)) : NULL;
    return v;
}

void rkm_jinja__list_push(jctx *c, jlist *l, jv x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *nv = rkm_jinja__alloc(c, cap * sizeof(jv));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

jv rkm_jinja__v_dict(jctx *c, int type)
{
    jv v = {type, {0}};
    v.u.d = rkm_jinja__alloc(c, sizeof(jdict));
    memset(v.u.d, 0, sizeof(jdict));
    return v;
}

long rkm_jinja__dict_find(const jdict *d, const char *k, size_t kl)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i]->len == kl && !memcmp(d->k[i]->s, k, kl)) return (long)i;
    return -1;
}

void rkm_jinja__dict_set(jctx *c, jdict *d, jstr *k, jv x)
{
    long i = rkm_jinja__dict_find(d, k->s, k->len);
    if (i >= 0) { d->v[i] = x; return; }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jstr **nk = rkm_jinja__alloc(c, cap * sizeof(jstr *));
        jv *nv = rkm_jinja__alloc(c, cap * sizeof(jv));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jstr *));
            memcpy(nv, d->v, d->n * sizeof(jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = x;
}

int rkm_jinja__dict_get(const jdict *d, const char *k, size_t kl, jv *out)
{
    long i = rkm_jinja__dict_find(d, k, kl);
    if (i < 0) return 0;
    *out = d->v[i];
    return 1;
}

const char *rkm_jinja__type_name(jv v)
{
    static const char *n[] = {"UndefinedValue", "NullValue", "BooleanValue", "IntegerValue", "FloatValue",
                              "StringValue", "ArrayValue", "ObjectValue", "NamespaceValue", "FunctionValue"};
    return n[v.t];
}

int rkm_jinja__truthy(jv v)
{
    switch (v.t) {
    case V_BOOL: return v.u.b;
    case V_INT: case V_FLOAT: return v.u.n != 0 && !isnan(v.u.n);
    case V_STR: return v.u.s->len > 0;
    case V_LIST: return v.u.l->n > 0;
    case V_DICT: return v.u.d->n > 0;
    case V_NS: case V_FUNC: return 1;
    default: return 0;
    }
}

/* ------------------------------------------------------ JSON / printing */

static void json_str(jctx *c, rkm_buf *b, const char *s, size_t n, int ascii)
{
    buf_addc(c, b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x80) {
            i++;
            switch (ch) {
            case '"': rkm_jinja__buf_add(c, b, "\\\"", 2); break;
            case '\\': rkm_jinja__buf_add(c, b, "\\\\", 2); break;
            case '\b': rkm_jinja__buf_add(c, b, "\\b", 2); break;
            case '\f': rkm_jinja__buf_add(c, b, "\\f", 2); break;
            case '\n': rkm_jinja__buf_add(c, b, "\\n", 2); break;
            case '\r': rkm_jinja__buf_add(c, b, "\\r", 2); break;
            case '\t': rkm_jinja__buf_add(c, b, "\\t", 2); break;
            default:
                if (ch < 0x20 || (ascii && ch == 0x7F)) {
                    char e[8];
                    snprintf(e, sizeof e, "\\u%04x", ch);
                    rkm_jinja__buf_add(c, b, e, 6);
                } else {
                    buf_addc(c, b, (char)ch);
                }
            }
            continue;
        }
        uint32_t cp;
        int l = rkm_jinja__u8_dec(s + i, n - i, &cp);
        if (ascii) {
            char e[16];
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                rkm_jinja__buf_add(c, b, e, 12);
            } else {
                snprintf(e, sizeof e, "\\u%04x", cp);
                rkm_jinja__buf_add(c, b, e, 6);
            }
        } else {
            rkm_jinja__buf_add(c, b, s + i, (size_t)l);
        }
        i += (size_t)l;
    }
    buf_addc(c, b, '"');
}

/* An approximation of String.prototype.localeCompare (ICU root collation)
 * for sort_keys: case-insensitive first, lower case before upper on ties. */
static int locale_cmp(const jstr *a, const jstr *b)
{
    size_t i = 0, j = 0;
    while (i < a->len && j < b->len) {
        uint32_t x, y;
        i += rkm_jinja__u8_dec(a->s + i, a->len - i, &x);
        j += rkm_jinja__u8_dec(b->s + j, b->len - j, &y);
        uint32_t lxs[2], lys[2];
        rkm_unicode_lower(x, lxs);
        rkm_unicode_lower(y, lys);
        uint32_t lx = lxs[0], ly = lys[0];
        int cx = is_word((int)(lx < 128 ? lx : 'a')) && lx != '_', cy = is_word((int)(ly < 128 ? ly : 'a')) && ly != '_';
        if (cx != cy) return cx ? 1 : -1; /* punctuation sorts before alphanumerics */
        if (lx != ly) return lx < ly ? -1 : 1;
    }
    if (i < a->len || j < b->len) return i < a->len ? 1 : -1;
    for (i = 0; i < a->len && i < b->len; i++)
        if (a->s[i] != b->s[i]) {
            int la = a->s[i] >= 'a' && a->s[i] <= 'z', lb = b->s[i] >= 'a' && b->s[i] <= 'z';
            if (la != lb) return la ? -1 : 1;
            return (unsigned char)a->s[i] < (unsigned char)b->s[i] ? -1 : 1;
        }
    return 0;
}

static int cmp_keys(jctx *c, const void *a, const void *b, void *arg)
{
    (void)c; (void)arg;
    return locale_cmp(*(jstr *const *)a, *(jstr *const *)b);
}

static void json_pad(jctx *c, rkm_buf *b, const json_opts *o, int depth)
{
    buf_addc(c, b, '\n');
    for (int i = 0; i < depth * o->indent; i++) buf_addc(c, b, ' ');
}

void rkm_jinja__to_json(jctx *c, rkm_buf *b, jv v, const json_opts *o, int depth, int undef_null)
{
    if (depth > 256) rkm_jinja__fail(c, NOPOS, "tojson: value nested too deeply (or cyclic)");
    const char *isep = o->item_sep ? o->item_sep : o->indent ? "," : ", ";
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    char nb[40];
    switch (v.t) {
    case V_NONE: buf_adds(c, b, "null"); return;
    case V_UNDEF: buf_adds(c, b, undef_null ? "null" : "undefined"); return;
    case V_BOOL: buf_adds(c, b, v.u.b ? "true" : "false"); return;
    case V_INT: case V_FLOAT:
        if (!isfinite(v.u.n)) { buf_adds(c, b, "null"); return; }
        js_num(v.u.n, nb);
        buf_adds(c, b, nb);
        return;
    case V_STR: json_str(c, b, v.u.s->s, v.u.s->len, o->ensure_ascii); return;
    case V_LIST: {
        jlist *l = v.u.l;
        if (l->tuple) rkm_jinja__fail(c, NOPOS, "cannot convert to JSON: TupleValue");
        buf_addc(c, b, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) buf_adds(c, b, isep);
            if (o->indent) json_pad(c, b, o, depth + 1);
            rkm_jinja__to_json(c, b, l->v[i], o, depth + 1, undef_null);
        }
        if (o->indent && l->n) json_pad(c, b, o, depth);
        buf_addc(c, b, ']');
        return;
    }
    case V_DICT: case V_NS: {
        jdict *d = v.u.d;
        size_t *idx = rkm_jinja__alloc(c, (d->n + 1) * sizeof(size_t));
        for (size_t i = 0; i < d->n; i++) idx[i] = i;
        if (o->sort_keys && d->n > 1) {
            jstr **keys = rkm_jinja__alloc(c, d->n * sizeof(jstr *));
            memcpy(keys, d->k, d->n * sizeof(jstr *));
            rkm_jinja__merge_sort(c, keys, d->n, sizeof(jstr *), cmp_keys, NULL);
            for (size_t i = 0; i < d->n; i++) idx[i] = (size_t)rkm_jinja__dict_find(d, keys[i]->s, keys[i]->len);
        }
        buf_addc(c, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) buf_adds(c, b, isep);
            if (o->indent) json_pad(c, b, o, depth + 1);
            json_str(c, b, d->k[idx[i]]->s, d->k[idx[i]]->len, o->ensure_ascii);
            buf_adds(c, b, ksep);
            rkm_jinja__to_json(c, b, d->v[idx[i]], o, depth + 1, undef_null);
        }
        if (o->indent && d->n) json_pad(c, b, o, depth);
        buf_addc(c, b, '}');
        return;
    }
    default:
        rkm_jinja__fail(c, NOPOS, "cannot convert to JSON: %s", rkm_jinja__type_name(v));
    }
}

/* RuntimeValue.toString: how {{ value }} prints. */
void rkm_jinja__display(jctx *c, rkm_buf *b, jv v)
{
    char nb[40];
    static const json_opts plain = {0};
    switch (v.t) {
    case V_UNDEF: buf_adds(c, b, "undefined"); return;
    case V_NONE: buf_adds(c, b, "null"); return;
    case V_BOOL: buf_adds(c, b, v.u.b ? "true" : "false"); return;
    case V_INT: js_num(v.u.n, nb); buf_adds(c, b, nb); return;
    case V_FLOAT: js_float_str(v.u.n, nb); buf_adds(c, b, nb); return;
    case V_STR: rkm_jinja__buf_add(c, b, v.u.s->s, v.u.s->len); return;
    case V_LIST: case V_DICT: case V_NS: rkm_jinja__to_json(c, b, v, &plain, 0, 0); return;
    default: buf_adds(c, b, "[function]"); return;
    }
}

/* The JavaScript string of the raw value (what `~`, `+` and join use):
 * numbers without the ".0", arrays joined by ",", maps "[object Map]". */
void rkm_jinja__raw_str(jctx *c, rkm_buf *b, jv v)
{
    char nb[40];
    switch (v.t) {
    case V_UNDEF: case V_NONE: return;
    case V_INT: case V_FLOAT: js_num(v.u.n, nb); buf_adds(c, b, nb); return;
    case V_LIST:
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) buf_addc(c, b, ',');
            rkm_jinja__display(c, b, v.u.l->v[i]);
        }
        return;
    case V_DICT: case V_NS: buf_adds(c, b, "[object Map]"); return;
    default: rkm_jinja__display(c, b, v); return;
    }
}

jstr *rkm_jinja__display_str(jctx *c, jv v)
{
    if (v.t == V_STR) return v.u.s;
    rkm_buf *b = rkm_jinja__buf_new(c);
    rkm_jinja__display(c, b, v);
    return rkm_jinja__buf_str(c, b);
}

/* JavaScript's `a.value == b.value`. */
int rkm_jinja__loose_eq(jctx *c, jv a, jv b, int depth)
{
    int an = a.t == V_NONE || a.t == V_UNDEF, bn = b.t == V_NONE || b.t == V_UNDEF;
    if (an || bn) return an && bn;
    int ao = a.t >= V_LIST, bo = b.t >= V_LIST;
    if (ao && bo) return a.t == b.t && a.u.l == b.u.l; /* identity */
    if (depth > 4) return 0;
    if (ao || bo) { /* object vs primitive: compare its string form */
        rkm_buf *s = rkm_jinja__buf_new(c);
        rkm_jinja__raw_str(c, s, ao ? a : b);
        jv sv = v_str(rkm_jinja__buf_str(c, s));
        return ao ? rkm_jinja__loose_eq(c, sv, b, depth + 1) : rkm_jinja__loose_eq(c, a, sv, depth + 1);
    }
    if (a.t == V_STR && b.t == V_STR) return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    if (a.t == V_BOOL && b.t == V_BOOL) return a.u.b == b.u.b;
    double x = a.t == V_BOOL ? a.u.b : a.t == V_STR ? js_to_number(a.u.s->s, a.u.s->len) : a.u.n;
    double y = b.t == V_BOOL ? b.u.b : b.t == V_STR ? js_to_number(b.u.s->s, b.u.s->len) : b.u.n;
    return x == y;
}

/* `===` on raw values (tests eq/equalto, `in`, unique). */
int rkm_jinja__strict_eq(jv a, jv b)
{
    if (is_num(a) && is_num(b)) return a.u.n == b.u.n;
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_BOOL: return a.u.b == b.u.b;
    case V_STR: return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    default: return a.u.l == b.u.l;
    }
}

/* Stable merge sort whose comparator may jfail (arena memory: no leak). */
void rkm_jinja__merge_sort(jctx *c, void *base, size_t n, size_t sz, int (*cmp)(jctx *, const void *, const void *, void *), void *arg)
{
    if (n < 2) return;
    unsigned char *a = base, *tmp = rkm_jinja__alloc(c, n * sz);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = RKM_MIN(lo + w, n), hi = RKM_MIN(lo + 2 * w, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                if (cmp(c, a + j * sz, a + i * sz, arg) < 0) memcpy(tmp + k++ * sz, a + j++ * sz, sz);
                else memcpy(tmp + k++ * sz, a + i++ * sz, sz);
            }
            while (i < mid) memcpy(tmp + k++ * sz, a + i++ * sz, sz);
            while (j < hi) memcpy(tmp + k++ * sz, a + j++ * sz, sz);
        }
        memcpy(a, tmp, n * sz);
    }
}

/* compareRuntimeValues: numbers (and booleans) with each other, strings
 * with strings (optionally case-folded), null with null. */
int rkm_jinja__compare_values(jctx *c, jv a, jv b, int case_sensitive)
{
    if (a.t == V_NONE && b.t == V_NONE) return 0;
    if (a.t == V_NONE || b.t == V_NONE || a.t == V_UNDEF || b.t == V_UNDEF) {
        if (a.t == V_UNDEF && b.t == V_UNDEF) return 0;
        rkm_jinja__fail(c, NOPOS, "cannot compare %s with %s", rkm_jinja__type_name(a), rkm_jinja__type_name(b));
    }
    int an = is_num(a) || a.t == V_BOOL, bn = is_num(b) || b.t == V_BOOL;
    if (an && bn) {
        double x = a.t == V_BOOL ? a.u.b : a.u.n, y = b.t == V_BOOL ? b.u.b : b.u.n;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.t != b.t) rkm_jinja__fail(c, NOPOS, "cannot compare different types: %s and %s", rkm_jinja__type_name(a), rkm_jinja__type_name(b));
    if (a.t != V_STR) rkm_jinja__fail(c, NOPOS, "cannot compare type: %s", rkm_jinja__type_name(a));
    jstr *x = a.u.s, *y = b.u.s;
    if (!case_sensitive) {
        x = rkm_jinja__str_case(c, x->s, x->len, 0);
        y = rkm_jinja__str_case(c, y->s, y->len, 0);
    }
    int r = memcmp(x->s, y->s, RKM_MIN(x->len, y->len));
    if (r) return r < 0 ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
}

void rkm_jinja__ctx_init(jctx *c, size_t limit)
{
    memset(c, 0, sizeof *c);
    c->arena.block_bytes = 64 * 1024 - 64;
    c->limit = limit;
}

uint32_t *rkm_jinja__line_table(jctx *c, const char *src, size_t n, size_t *n_lines)
{
    size_t k = 1;
    for (size_t i = 0; i < n; i++) k += src[i] == '\n';
    uint32_t *l = rkm_jinja__alloc(c, k * sizeof(uint32_t));
    l[0] = 0;
    k = 1;
    for (size_t i = 0; i < n; i++)
        if (src[i] == '\n') l[k++] = (uint32_t)(i + 1);
    *n_lines = k;
    return l;
}
