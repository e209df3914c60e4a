/*
 * jinja.c - a small Jinja2 interpreter for chat templates: lexer (with the
 * Hugging Face whitespace preprocessing), recursive-descent parser to an AST,
 * and a tree-walking renderer. Semantics mirror @huggingface/jinja, the
 * reference tests/test-chat-ref.sh compares against (see jinja.h).
 *
 * Threads: a parsed rkm_jinja is immutable; any number of threads may render
 * it at once. Each parse and each render owns one jctx: an arena that holds
 * every token, node, string and container, freed in one go at the end.
 *
 * Errors: deep inside the evaluator a type error can surface in any of ~100
 * places. Every allocation lives in the context's arena and no other
 * resource (file, lock) is held while parsing or rendering, so a failure
 * longjmps straight back to rkm_jinja_parse / rkm_jinja_render, which frees
 * the arena and returns NULL + rkm_err. That keeps the evaluator readable
 * without leaking. Work, memory and recursion are bounded (rkm_jinja_limits)
 * because templates are untrusted: `{% for i in range(999999999) %}` or a
 * self-recursive macro must end in an error, not a hang or a stack overflow.
 */
#include "text/jinja.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <time.h>
#include <wctype.h>

#include "util/common.h"

/* ------------------------------------------------------------ context */

typedef struct chunk {
    struct chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} chunk;

typedef struct jctx {
    chunk *chunks;
    size_t total, limit;     /* bytes allocated / allowed */
    size_t steps, max_steps; /* render work counter */
    int depth, max_depth;    /* recursion (parse and render) */
    jmp_buf jb;
    int code;
    char msg[768];
    const uint32_t *lines; /* line start offsets of the original source */
    size_t n_lines;
    struct jstr *loop_keys[9]; /* render: the keys of `loop`, made once */
} jctx;

static void ctx_free(jctx *c)
{
    chunk *k = c->chunks;
    while (k) {
        chunk *n = k->next;
        free(k);
        k = n;
    }
    c->chunks = NULL;
}

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

#define NOPOS UINT32_MAX

static _Noreturn RKM_PRINTF(3, 4) void jfail(jctx *c, uint32_t pos, const char *fmt, ...)
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

static void *ar_alloc(jctx *c, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > c->limit || c->total + n > c->limit) {
        c->code = RKM_ENOMEM;
        jfail(c, NOPOS, "template needs more than %zu bytes of memory", c->limit);
    }
    chunk *k = c->chunks;
    if (!k || k->cap - k->used < n) {
        size_t cap = n > 48 * 1024 ? n : 64 * 1024 - sizeof(chunk);
        chunk *nk = malloc(sizeof(chunk) + cap);
        if (!nk) {
            c->code = RKM_ENOMEM;
            jfail(c, NOPOS, "out of memory");
        }
        nk->cap = cap;
        nk->used = 0;
        if (k && cap == n) { /* big block: keep filling the current chunk */
            nk->next = k->next;
            k->next = nk;
            k = nk;
        } else {
            nk->next = k;
            c->chunks = k = nk;
        }
    }
    void *p = k->data + k->used;
    k->used += n;
    c->total += n;
    return p;
}

/* ------------------------------------------------------------ strings */

typedef struct jstr {
    size_t len;
    char s[]; /* NUL-terminated UTF-8 */
} jstr;

static jstr *str_new(jctx *c, const char *p, size_t n)
{
    jstr *s = ar_alloc(c, sizeof(jstr) + n + 1);
    s->len = n;
    if (n) memcpy(s->s, p, n);
    s->s[n] = 0;
    return s;
}

static jstr *str_cstr(jctx *c, const char *p) { return str_new(c, p, strlen(p)); }

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_reserve(jctx *c, sbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    char *np = ar_alloc(c, cap);
    if (b->len) memcpy(np, b->p, b->len);
    b->p = np;
    b->cap = cap;
}

static void sb_add(jctx *c, sbuf *b, const char *p, size_t n)
{
    if (!n) return;
    sb_reserve(c, b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sb_adds(jctx *c, sbuf *b, const char *s) { sb_add(c, b, s, strlen(s)); }
static void sb_addc(jctx *c, sbuf *b, char ch) { sb_add(c, b, &ch, 1); }
static jstr *sb_str(jctx *c, const sbuf *b) { return str_new(c, b->p, b->len); }

/* --------------------------------------------------------------- UTF-8 */

/* Decodes one code point of valid UTF-8 (sources are sanitized on entry);
 * returns its length. A stray byte decodes as itself, length 1. */
static int u8_dec(const char *p, size_t n, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)p;
    if (!n) { *cp = 0; return 0; }
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    if ((s[0] & 0xE0) == 0xC0 && n >= 2) { *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F); return 2; }
    if ((s[0] & 0xF0) == 0xE0 && n >= 3) {
        *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    if ((s[0] & 0xF8) == 0xF0 && n >= 4) {
        *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
              ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return 4;
    }
    *cp = s[0];
    return 1;
}

static int u8_enc(uint32_t cp, char *o)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) cp = 0xFFFD;
    if (cp >= 0x10000) {
        o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return u8_enc(cp, o);
}

static size_t u8_prev(const char *s, size_t i)
{
    if (!i) return 0;
    i--;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return i;
}

/* Replaces invalid UTF-8 with U+FFFD the way a WHATWG decoder (Node's)
 * does: one replacement per maximal invalid subpart. Returns NULL when the
 * input is already valid (the common case, no copy). */
static char *u8_sanitize_alloc(const char *p, size_t n, size_t *out_n)
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
static int js_space(uint32_t c)
{
    return c == 9 || c == 10 || c == 11 || c == 12 || c == 13 || c == 32 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000 || c == 0xFEFF;
}

static size_t js_trim_start(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = u8_dec(s + i, n - i, &cp);
        if (!js_space(cp)) break;
        i += l;
    }
    return i;
}

static size_t js_trim_end(const char *s, size_t n) /* new length */
{
    while (n > 0) {
        size_t p = u8_prev(s, n);
        uint32_t cp;
        u8_dec(s + p, n - p, &cp);
        if (!js_space(cp)) break;
        n = p;
    }
    return n;
}

static size_t u16_len(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += u8_dec(s + i, n - i, &cp);
        k += cp >= 0x10000 ? 2 : 1;
    }
    return k;
}

static pthread_once_t case_once = PTHREAD_ONCE_INIT;
static locale_t case_loc;
static void case_init(void)
{
    case_loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (!case_loc) case_loc = newlocale(LC_CTYPE_MASK, "en_US.UTF-8", (locale_t)0);
}

static uint32_t cp_case(uint32_t cp, int upper)
{
    if (cp < 0x80) {
        if (upper && cp >= 'a' && cp <= 'z') return cp - 32;
        if (!upper && cp >= 'A' && cp <= 'Z') return cp + 32;
        return cp;
    }
    pthread_once(&case_once, case_init);
    if (!case_loc) return cp;
    return (uint32_t)(upper ? towupper_l((wint_t)cp, case_loc) : towlower_l((wint_t)cp, case_loc));
}

static jstr *str_case(jctx *c, const char *s, size_t n, int upper)
{
    sbuf b = {0};
    sb_reserve(c, &b, n + 8);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += u8_dec(s + i, n - i, &cp);
        if (upper && cp == 0xDF) { sb_add(c, &b, "SS", 2); continue; }
        char e[4];
        sb_add(c, &b, e, u8_enc(cp_case(cp, upper), e));
    }
    return b.p ? sb_str(c, &b) : str_new(c, "", 0);
}

static int is_word(int ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'; }
static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }

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
static double js_parse_int(const char *s, size_t n)
{
    size_t i = js_trim_start(s, n);
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i >= n || !is_digit(s[i])) return NAN;
    double v = 0;
    while (i < n && is_digit(s[i])) v = v * 10 + (s[i++] - '0');
    return neg ? -v : v;
}

static double js_parse_float(const char *s, size_t n)
{
    size_t i = js_trim_start(s, n), st = i;
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
    size_t a = js_trim_start(s, n), b = js_trim_end(s, n);
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
    return js_parse_float(p, l);
}

/* ------------------------------------------------------------- lexer */

enum {
    T_TEXT, T_NUM, T_STR, T_IDENT, T_EQUALS, T_LPAREN, T_RPAREN, T_OSTMT, T_CSTMT, T_OEXPR, T_CEXPR,
    T_LBRACK, T_RBRACK, T_LBRACE, T_RBRACE, T_COMMA, T_DOT, T_COLON, T_PIPE, T_ADD, T_MUL, T_POW,
    T_CMP, T_UNARY, T_COMMENT
};

typedef struct tok {
    int type;
    const char *s; /* value (arena) */
    size_t len;
    uint32_t pos; /* offset in the original source */
} tok;

static const struct { const char *seq; int type; } tok_table[] = {
    {"{%", T_OSTMT}, {"%}", T_CSTMT}, {"{{", T_OEXPR}, {"}}", T_CEXPR}, {"(", T_LPAREN}, {")", T_RPAREN},
    {"{", T_LBRACE}, {"}", T_RBRACE}, {"[", T_LBRACK}, {"]", T_RBRACK}, {",", T_COMMA}, {".", T_DOT},
    {":", T_COLON}, {"|", T_PIPE}, {"<=", T_CMP}, {">=", T_CMP}, {"==", T_CMP}, {"!=", T_CMP},
    {"<", T_CMP}, {">", T_CMP}, {"+", T_ADD}, {"-", T_ADD}, {"~", T_ADD}, {"**", T_POW}, {"*", T_MUL},
    {"//", T_MUL}, {"/", T_MUL}, {"%", T_MUL}, {"=", T_EQUALS},
};

/* Text with a map from each byte to its offset in the original source. */
typedef struct mtext {
    char *p;
    uint32_t *m;
    size_t n;
} mtext;

static void mt_init(jctx *c, mtext *t, size_t cap)
{
    t->p = ar_alloc(c, cap + 1);
    t->m = ar_alloc(c, (cap + 1) * sizeof(uint32_t));
    t->n = 0;
}

static void mt_put(mtext *t, const mtext *src, size_t i)
{
    t->p[t->n] = src->p[i];
    t->m[t->n++] = src->m[i];
}

static int at_line_start(const mtext *t, size_t i)
{
    if (i == 0) return 1;
    unsigned char ch = (unsigned char)t->p[i - 1];
    if (ch == '\n' || ch == '\r') return 1;
    /* U+2028 / U+2029 end lines for JS's multiline ^ too */
    return i >= 3 && (unsigned char)t->p[i - 3] == 0xE2 && (unsigned char)t->p[i - 2] == 0x80 &&
           (ch == 0xA8 || ch == 0xA9);
}

static size_t ws_run_at(const mtext *t, size_t i) /* length of JS white space at i */
{
    size_t j = i;
    while (j < t->n) {
        uint32_t cp;
        int l = u8_dec(t->p + j, t->n - j, &cp);
        if (!js_space(cp)) break;
        j += l;
    }
    return j - i;
}

/* Matches "{%-? \s* (end)?generation \s* -?%}" at i; returns its length. */
static size_t gen_tag_at(const mtext *t, size_t i, int *lstrip, int *rstrip)
{
    if (i + 1 >= t->n || t->p[i] != '{' || t->p[i + 1] != '%') return 0;
    size_t j = i + 2;
    *lstrip = j < t->n && t->p[j] == '-';
    if (*lstrip) j++;
    j += ws_run_at(t, j);
    if (t->n - j >= 3 && !memcmp(t->p + j, "end", 3) && t->n - j >= 13 && !memcmp(t->p + j + 3, "generation", 10)) j += 13;
    else if (t->n - j >= 10 && !memcmp(t->p + j, "generation", 10)) j += 10;
    else return 0;
    j += ws_run_at(t, j);
    *rstrip = j < t->n && t->p[j] == '-';
    if (*rstrip) j++;
    if (j + 1 >= t->n || t->p[j] != '%' || t->p[j + 1] != '}') return 0;
    return j + 2 - i;
}

/* Hugging Face's preprocessing: drop one trailing newline, lstrip_blocks,
 * trim_blocks, then remove {% generation %} tags. */
static mtext preprocess(jctx *c, const char *src, size_t n)
{
    mtext a, b;
    mt_init(c, &a, n);
    for (size_t i = 0; i < n; i++) { a.p[i] = src[i]; a.m[i] = (uint32_t)i; }
    a.n = n;
    if (a.n && a.p[a.n - 1] == '\n') a.n--;
    /* lstrip_blocks: /^[ \t]*({[#%-])/gm */
    mt_init(c, &b, a.n);
    for (size_t i = 0; i < a.n;) {
        if (at_line_start(&a, i)) {
            size_t j = i;
            while (j < a.n && (a.p[j] == ' ' || a.p[j] == '\t')) j++;
            if (j + 1 < a.n && a.p[j] == '{' && (a.p[j + 1] == '#' || a.p[j + 1] == '%' || a.p[j + 1] == '-')) {
                mt_put(&b, &a, j);
                mt_put(&b, &a, j + 1);
                i = j + 2;
                continue;
            }
        }
        mt_put(&b, &a, i++);
    }
    /* trim_blocks: /([#%-]})\n/g */
    mt_init(c, &a, b.n);
    for (size_t i = 0; i < b.n;) {
        if (i + 2 < b.n && (b.p[i] == '#' || b.p[i] == '%' || b.p[i] == '-') && b.p[i + 1] == '}' && b.p[i + 2] == '\n') {
            mt_put(&a, &b, i);
            mt_put(&a, &b, i + 1);
            i += 3;
            continue;
        }
        mt_put(&a, &b, i++);
    }
    /* generation tags */
    mt_init(c, &b, a.n);
    size_t floor_out = 0; /* output before this belongs to an earlier match */
    for (size_t i = 0; i < a.n;) {
        int ls, rs;
        size_t l = gen_tag_at(&a, i, &ls, &rs);
        if (!l) { mt_put(&b, &a, i++); continue; }
        if (ls) {
            while (b.n > floor_out) {
                size_t p = u8_prev(b.p, b.n);
                if (p < floor_out) break;
                uint32_t cp;
                u8_dec(b.p + p, b.n - p, &cp);
                if (!js_space(cp)) break;
                b.n = p;
            }
        }
        i += l;
        size_t w = ws_run_at(&a, i);
        if (!rs)
            for (size_t k = 0; k < w; k++) mt_put(&b, &a, i + k);
        i += w;
        floor_out = b.n;
    }
    b.p[b.n] = 0;
    b.m[b.n] = (uint32_t)n;
    return b;
}

typedef struct lexer {
    jctx *c;
    mtext t;
    size_t i;
    tok *toks;
    size_t n, cap;
} lexer;

static void lx_push(lexer *L, int type, const char *s, size_t len, uint32_t pos)
{
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        tok *nt = ar_alloc(L->c, cap * sizeof(tok));
        if (L->n) memcpy(nt, L->toks, L->n * sizeof(tok));
        L->toks = nt;
        L->cap = cap;
    }
    L->toks[L->n++] = (tok){type, s, len, pos};
}

static uint32_t lx_pos(const lexer *L, size_t i) { return L->t.m[i < L->t.n ? i : L->t.n]; }
static int lx_last(const lexer *L) { return L->n ? L->toks[L->n - 1].type : -1; }
static int lx_at(const lexer *L, const char *s)
{
    size_t l = strlen(s);
    return L->t.n - L->i >= l && !memcmp(L->t.p + L->i, s, l);
}

static void lx_strip_trailing(lexer *L)
{
    if (!L->n || L->toks[L->n - 1].type != T_TEXT) return;
    tok *t = &L->toks[L->n - 1];
    t->len = js_trim_end(t->s, t->len);
    if (!t->len) L->n--;
}

static void lx_skip_ws(lexer *L) { L->i += ws_run_at(&L->t, L->i); }

enum { CW_WS, CW_DIGIT, CW_WORD, CW_STR };

static int hexval(int ch)
{
    if (is_digit(ch)) return ch - '0';
    ch |= 32;
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* @huggingface/jinja's consumeWhile: backslash escapes, and an error when
 * the run reaches the end of the input. */
static sbuf lx_consume(lexer *L, int kind, char quote)
{
    sbuf b = {0};
    const mtext *t = &L->t;
    uint32_t pending_hi = 0;
    for (;;) {
        if (L->i >= t->n) {
            if (kind == CW_STR) jfail(L->c, lx_pos(L, L->i), "unexpected end of input in a string");
            break;
        }
        char ch = t->p[L->i];
        int ok;
        if (kind == CW_WS) {
            uint32_t cp;
            u8_dec(t->p + L->i, t->n - L->i, &cp);
            ok = js_space(cp);
        } else if (kind == CW_DIGIT) ok = is_digit(ch);
        else if (kind == CW_WORD) ok = is_word(ch);
        else ok = ch != quote;
        if (!ok) break;
        if (ch == '\\') {
            if (++L->i >= t->n) jfail(L->c, lx_pos(L, L->i), "unexpected end of input");
            char e = t->p[L->i++];
            if (e == 'x' || e == 'u') {
                int len = e == 'x' ? 2 : 4;
                uint32_t v = 0;
                for (int k = 0; k < len; k++) {
                    int h = L->i + k < t->n ? hexval(t->p[L->i + k]) : -1;
                    if (h < 0) jfail(L->c, lx_pos(L, L->i), "invalid hexadecimal escape sequence");
                    v = v * 16 + (uint32_t)h;
                }
                L->i += len;
                char enc[4];
                if (v >= 0xD800 && v < 0xDC00) {
                    if (pending_hi) sb_add(L->c, &b, "\xEF\xBF\xBD", 3);
                    pending_hi = v;
                    continue;
                }
                if (v >= 0xDC00 && v < 0xE000 && pending_hi) {
                    v = 0x10000 + ((pending_hi - 0xD800) << 10) + (v - 0xDC00);
                    pending_hi = 0;
                }
                if (pending_hi) { sb_add(L->c, &b, "\xEF\xBF\xBD", 3); pending_hi = 0; }
                sb_add(L->c, &b, enc, u8_enc(v, enc));
                continue;
            }
            const char *rep = NULL;
            switch (e) {
            case 'n': rep = "\n"; break;
            case 't': rep = "\t"; break;
            case 'r': rep = "\r"; break;
            case 'b': rep = "\b"; break;
            case 'f': rep = "\f"; break;
            case 'v': rep = "\v"; break;
            case '\'': rep = "'"; break;
            case '"': rep = "\""; break;
            case '\\': rep = "\\"; break;
            default: jfail(L->c, lx_pos(L, L->i - 1), "unexpected escaped character '%c'", e);
            }
            if (pending_hi) { sb_add(L->c, &b, "\xEF\xBF\xBD", 3); pending_hi = 0; }
            sb_add(L->c, &b, rep, 1);
            continue;
        }
        if (pending_hi) { sb_add(L->c, &b, "\xEF\xBF\xBD", 3); pending_hi = 0; }
        uint32_t cp;
        int l = u8_dec(t->p + L->i, t->n - L->i, &cp);
        sb_add(L->c, &b, t->p + L->i, (size_t)l);
        L->i += (size_t)l;
        if (L->i >= t->n) jfail(L->c, lx_pos(L, L->i), "unexpected end of input");
    }
    if (pending_hi) sb_add(L->c, &b, "\xEF\xBF\xBD", 3);
    if (!b.p) { b.p = ""; }
    return b;
}

static tok *lex(jctx *c, const char *src, size_t n, size_t *n_tok)
{
    lexer L = {.c = c};
    L.t = preprocess(c, src, n);
    const mtext *t = &L.t;
    int curly = 0;
    while (L.i < t->n) {
        int last = lx_last(&L);
        if (last < 0 || last == T_CSTMT || last == T_CEXPR || last == T_COMMENT) {
            size_t j = L.i;
            while (j < t->n && !(t->p[j] == '{' && j + 1 < t->n && (t->p[j + 1] == '%' || t->p[j + 1] == '{' || t->p[j + 1] == '#'))) j++;
            if (j > L.i) {
                lx_push(&L, T_TEXT, t->p + L.i, j - L.i, lx_pos(&L, L.i));
                L.i = j;
                continue;
            }
        }
        if (lx_at(&L, "{#")) {
            size_t start_tag = L.i;
            L.i += 2;
            int strip_before = L.i < t->n && t->p[L.i] == '-';
            if (strip_before) L.i++;
            size_t st = L.i;
            while (!(L.i + 1 < t->n && t->p[L.i] == '#' && t->p[L.i + 1] == '}')) {
                if (L.i + 2 >= t->n) jfail(c, lx_pos(&L, start_tag), "missing end of comment tag");
                L.i++;
            }
            size_t clen = L.i - st;
            int strip_after = clen > 0 && t->p[L.i - 1] == '-';
            if (strip_before) lx_strip_trailing(&L);
            lx_push(&L, T_COMMENT, t->p + st, clen - (size_t)strip_after, lx_pos(&L, start_tag));
            L.i += 2;
            if (strip_after) lx_skip_ws(&L);
            continue;
        }
        if (lx_at(&L, "{%-")) {
            lx_strip_trailing(&L);
            lx_push(&L, T_OSTMT, "{%", 2, lx_pos(&L, L.i));
            L.i += 3;
            continue;
        }
        if (lx_at(&L, "{{-")) {
            lx_strip_trailing(&L);
            lx_push(&L, T_OEXPR, "{{", 2, lx_pos(&L, L.i));
            curly = 0;
            L.i += 3;
            continue;
        }
        lx_consume(&L, CW_WS, 0);
        if (L.i >= t->n) break;
        if (lx_at(&L, "-%}")) {
            lx_push(&L, T_CSTMT, "%}", 2, lx_pos(&L, L.i));
            L.i += 3;
            lx_skip_ws(&L);
            continue;
        }
        if (lx_at(&L, "-}}")) {
            lx_push(&L, T_CEXPR, "}}", 2, lx_pos(&L, L.i));
            L.i += 3;
            lx_skip_ws(&L);
            continue;
        }
        char ch = t->p[L.i];
        uint32_t pos = lx_pos(&L, L.i);
        if (ch == '-' || ch == '+') {
            int lt = lx_last(&L);
            if (lt == T_TEXT || lt < 0) jfail(c, pos, "unexpected character '%c'", ch);
            if (!(lt == T_IDENT || lt == T_NUM || lt == T_STR || lt == T_RPAREN || lt == T_RBRACK)) {
                L.i++;
                sbuf num = lx_consume(&L, CW_DIGIT, 0);
                sbuf v = {0};
                sb_addc(c, &v, ch);
                sb_add(c, &v, num.p, num.len);
                if (num.len && L.i + 1 < t->n && t->p[L.i] == '.' && is_digit(t->p[L.i + 1])) {
                    L.i++;
                    sbuf fr = lx_consume(&L, CW_DIGIT, 0);
                    sb_addc(c, &v, '.');
                    sb_add(c, &v, fr.p, fr.len);
                }
                lx_push(&L, num.len ? T_NUM : T_UNARY, v.p, v.len, pos);
                continue;
            }
        }
        int matched = 0;
        for (size_t k = 0; k < RKM_ARRAY_LEN(tok_table); k++) {
            if (tok_table[k].type == T_CEXPR && curly > 0) continue;
            if (lx_at(&L, tok_table[k].seq)) {
                int ty = tok_table[k].type;
                lx_push(&L, ty, tok_table[k].seq, strlen(tok_table[k].seq), pos);
                if (ty == T_OEXPR) curly = 0;
                else if (ty == T_LBRACE) curly++;
                else if (ty == T_RBRACE) curly--;
                L.i += strlen(tok_table[k].seq);
                matched = 1;
                break;
            }
        }
        if (matched) continue;
        if (ch == '\'' || ch == '"') {
            L.i++;
            sbuf s = lx_consume(&L, CW_STR, ch);
            lx_push(&L, T_STR, s.p, s.len, pos);
            L.i++;
            continue;
        }
        if (is_digit(ch)) {
            sbuf num = lx_consume(&L, CW_DIGIT, 0);
            sbuf v = {0};
            sb_add(c, &v, num.p, num.len);
            if (lx_last(&L) != T_DOT && L.i + 1 < t->n && t->p[L.i] == '.' && is_digit(t->p[L.i + 1])) {
                L.i++;
                sbuf fr = lx_consume(&L, CW_DIGIT, 0);
                sb_addc(c, &v, '.');
                sb_add(c, &v, fr.p, fr.len);
            }
            lx_push(&L, T_NUM, v.p, v.len, pos);
            continue;
        }
        if (is_word(ch)) {
            sbuf w = lx_consume(&L, CW_WORD, 0);
            lx_push(&L, T_IDENT, w.p, w.len, pos);
            continue;
        }
        uint32_t cp;
        u8_dec(t->p + L.i, t->n - L.i, &cp);
        jfail(c, pos, "unexpected character U+%04X", cp);
    }
    *n_tok = L.n;
    return L.toks;
}

/* ------------------------------------------------------------ parser */

enum {
    N_TEXT, N_COMMENT, N_STR, N_INT, N_FLOAT, N_IDENT, N_ARRAY, N_TUPLE, N_OBJECT, N_MEMBER, N_SLICE,
    N_CALL, N_KWARG, N_UNARY, N_BINARY, N_FILTER, N_TEST, N_SELECT, N_TERNARY,
    N_SET, N_IF, N_FOR, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK, N_BREAK, N_CONTINUE
};

enum {
    OP_AND = 1, OP_OR, OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE, OP_IN, OP_NOTIN, OP_ADD, OP_SUB,
    OP_CONCAT, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_NOT, OP_NEG, OP_POS
};

typedef struct node node;
struct node {
    uint8_t k;
    uint8_t op;   /* OP_* (unary, binary); 1 = computed (member), negated (test) */
    uint8_t flag; /* macro/caller: uses kwargs (1) / varargs (2) */
    uint32_t pos; /* offset in the original source */
    const char *s; /* identifier, string, filter/test/macro name */
    size_t len;
    double num;
    node *a, *b, *c;
    node **v;  /* body, items, arguments, parameters, object keys */
    int n;
    node **v2; /* else/alternate body, object values, caller parameters */
    int n2;
};

typedef struct nvec {
    node **v;
    int n, cap;
} nvec;

typedef struct parser {
    jctx *c;
    tok *t;
    size_t n, i;
} parser;

#define MAX_PARSE_DEPTH 256

static void nv_push(jctx *c, nvec *v, node *x)
{
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        node **nv = ar_alloc(c, (size_t)cap * sizeof(node *));
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof(node *));
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
}

static node *mk(parser *P, int k, uint32_t pos)
{
    node *n = ar_alloc(P->c, sizeof(node));
    memset(n, 0, sizeof *n);
    n->k = (uint8_t)k;
    n->pos = pos;
    return n;
}

static uint32_t p_pos(parser *P)
{
    if (P->i < P->n) return P->t[P->i].pos;
    return P->n ? P->t[P->n - 1].pos : 0;
}

static _Noreturn void p_eof(parser *P) { jfail(P->c, p_pos(P), "unexpected end of template"); }

static tok *p_peek(parser *P) { return P->i < P->n ? &P->t[P->i] : NULL; }
static int p_is(parser *P, int type) { return P->i < P->n && P->t[P->i].type == type; }
static int tok_eq(const tok *t, const char *s) { return t->len == strlen(s) && !memcmp(t->s, s, t->len); }
static int p_is_ident(parser *P, const char *name)
{
    return P->i < P->n && P->t[P->i].type == T_IDENT && tok_eq(&P->t[P->i], name);
}
static int p_is_stmt(parser *P, const char *name)
{
    return P->i + 1 < P->n && P->t[P->i].type == T_OSTMT && P->t[P->i + 1].type == T_IDENT &&
           tok_eq(&P->t[P->i + 1], name);
}

static const char *tok_name(int type)
{
    static const char *names[] = {"text", "number", "string", "identifier", "'='", "'('", "')'", "'{%'", "'%}'",
                                  "'{{'", "'}}'", "'['", "']'", "'{'", "'}'", "','", "'.'", "':'", "'|'",
                                  "operator", "operator", "'**'", "comparison", "unary operator", "comment"};
    return type >= 0 && type < (int)RKM_ARRAY_LEN(names) ? names[type] : "?";
}

static tok *p_expect(parser *P, int type, const char *what)
{
    if (P->i >= P->n) jfail(P->c, p_pos(P), "expected %s, got end of template", what);
    tok *t = &P->t[P->i];
    if (t->type != type) jfail(P->c, t->pos, "expected %s, got %s", what, tok_name(t->type));
    P->i++;
    return t;
}

static void p_expect_ident(parser *P, const char *name)
{
    if (!p_is_ident(P, name)) jfail(P->c, p_pos(P), "expected '%s'", name);
    P->i++;
}

static void p_enter(parser *P)
{
    if (++P->c->depth > MAX_PARSE_DEPTH) jfail(P->c, p_pos(P), "template nested too deeply");
}
static void p_leave(parser *P) { P->c->depth--; }

static node *parse_any(parser *P);
static node *parse_expr(parser *P);
static node *parse_primary(parser *P);
static node *parse_member(parser *P, node *obj);
static node *parse_call(parser *P, node *callee);
static void parse_args(parser *P, nvec *out, int params);

static void parse_body_until(parser *P, nvec *body, const char *e1, const char *e2, const char *e3)
{
    for (;;) {
        if (P->i >= P->n) p_eof(P);
        if (p_is_stmt(P, e1) || (e2 && p_is_stmt(P, e2)) || (e3 && p_is_stmt(P, e3))) return;
        nv_push(P->c, body, parse_any(P));
    }
}

static node *parse_expr_seq(parser *P, int primary)
{
    uint32_t pos = p_pos(P);
    node *first = primary ? parse_primary(P) : parse_expr(P);
    if (!p_is(P, T_COMMA)) return first;
    nvec v = {0};
    nv_push(P->c, &v, first);
    while (p_is(P, T_COMMA)) {
        P->i++;
        nv_push(P->c, &v, primary ? parse_primary(P) : parse_expr(P));
    }
    node *t = mk(P, N_TUPLE, pos);
    t->v = v.v;
    t->n = v.n;
    return t;
}

/* Marks macro/call bodies that read kwargs or varargs. */
static int uses_special(const node *n, int depth)
{
    if (!n || depth > 500) return 0;
    int f = 0;
    if (n->k == N_IDENT) {
        if (n->len == 6 && !memcmp(n->s, "kwargs", 6)) f |= 1;
        if (n->len == 7 && !memcmp(n->s, "varargs", 7)) f |= 2;
    }
    if (n->k == N_MACRO) return 0; /* a nested macro has its own */
    f |= uses_special(n->a, depth + 1) | uses_special(n->b, depth + 1) | uses_special(n->c, depth + 1);
    for (int i = 0; i < n->n; i++) f |= uses_special(n->v[i], depth + 1);
    for (int i = 0; i < n->n2; i++) f |= uses_special(n->v2[i], depth + 1);
    return f;
}

static node *parse_if_stmt(parser *P, uint32_t pos)
{
    node *n = mk(P, N_IF, pos);
    n->a = parse_expr(P);
    p_expect(P, T_CSTMT, "'%}'");
    nvec body = {0}, alt = {0};
    parse_body_until(P, &body, "elif", "else", "endif");
    if (p_is_stmt(P, "elif")) {
        uint32_t ep = p_pos(P);
        P->i += 2;
        p_enter(P);
        nv_push(P->c, &alt, parse_if_stmt(P, ep));
        p_leave(P);
    } else if (p_is_stmt(P, "else")) {
        P->i += 2;
        p_expect(P, T_CSTMT, "'%}'");
        parse_body_until(P, &alt, "endif", NULL, NULL);
    }
    n->v = body.v; n->n = body.n;
    n->v2 = alt.v; n->n2 = alt.n;
    return n;
}

static void p_end(parser *P, const char *name)
{
    p_expect(P, T_OSTMT, "'{%'");
    p_expect_ident(P, name);
    p_expect(P, T_CSTMT, "'%}'");
}

static node *parse_stmt(parser *P)
{
    tok *open = p_expect(P, T_OSTMT, "'{%'");
    tok *t = p_peek(P);
    if (!t) p_eof(P);
    if (t->type != T_IDENT) jfail(P->c, t->pos, "unknown statement, got %s", tok_name(t->type));
    uint32_t pos = open->pos;
    node *n;
    if (tok_eq(t, "set")) {
        P->i++;
        n = mk(P, N_SET, pos);
        n->a = parse_expr_seq(P, 0);
        if (p_is(P, T_EQUALS)) {
            P->i++;
            n->b = parse_expr_seq(P, 0);
        } else {
            p_expect(P, T_CSTMT, "'%}'");
            nvec body = {0};
            parse_body_until(P, &body, "endset", NULL, NULL);
            n->v = body.v; n->n = body.n;
            P->i++;
            p_expect_ident(P, "endset");
        }
        p_expect(P, T_CSTMT, "'%}'");
    } else if (tok_eq(t, "if")) {
        P->i++;
        n = parse_if_stmt(P, pos);
        p_end(P, "endif");
    } else if (tok_eq(t, "macro")) {
        P->i++;
        n = mk(P, N_MACRO, pos);
        node *name = parse_primary(P);
        if (name->k != N_IDENT) jfail(P->c, name->pos, "expected an identifier after 'macro'");
        n->s = name->s; n->len = name->len;
        nvec params = {0};
        parse_args(P, &params, 1);
        n->v = params.v; n->n = params.n;
        p_expect(P, T_CSTMT, "'%}'");
        nvec body = {0};
        parse_body_until(P, &body, "endmacro", NULL, NULL);
        n->v2 = body.v; n->n2 = body.n;
        for (int i = 0; i < body.n; i++) n->flag |= (uint8_t)uses_special(body.v[i], 0);
        p_end(P, "endmacro");
    } else if (tok_eq(t, "for")) {
        P->i++;
        n = mk(P, N_FOR, pos);
        n->a = parse_expr_seq(P, 1);
        if (n->a->k != N_IDENT && n->a->k != N_TUPLE) jfail(P->c, n->a->pos, "expected identifier/tuple for the loop variable");
        if (!p_is_ident(P, "in")) jfail(P->c, p_pos(P), "expected 'in' after the loop variable");
        P->i++;
        n->b = parse_expr(P);
        p_expect(P, T_CSTMT, "'%}'");
        nvec body = {0}, alt = {0};
        parse_body_until(P, &body, "endfor", "else", NULL);
        if (p_is_stmt(P, "else")) {
            P->i += 2;
            p_expect(P, T_CSTMT, "'%}'");
            parse_body_until(P, &alt, "endfor", NULL, NULL);
        }
        n->v = body.v; n->n = body.n;
        n->v2 = alt.v; n->n2 = alt.n;
        p_end(P, "endfor");
    } else if (tok_eq(t, "call")) {
        P->i++;
        n = mk(P, N_CALLBLOCK, pos);
        nvec cparams = {0};
        if (p_is(P, T_LPAREN)) parse_args(P, &cparams, 1);
        node *callee = parse_primary(P);
        if (callee->k != N_IDENT) jfail(P->c, callee->pos, "expected an identifier after 'call'");
        node *call = mk(P, N_CALL, callee->pos);
        call->a = callee;
        nvec args = {0};
        parse_args(P, &args, 0);
        call->v = args.v; call->n = args.n;
        n->a = call;
        n->v2 = cparams.v; n->n2 = cparams.n;
        p_expect(P, T_CSTMT, "'%}'");
        nvec body = {0};
        parse_body_until(P, &body, "endcall", NULL, NULL);
        n->v = body.v; n->n = body.n;
        for (int i = 0; i < body.n; i++) n->flag |= (uint8_t)uses_special(body.v[i], 0);
        p_end(P, "endcall");
    } else if (tok_eq(t, "break") || tok_eq(t, "continue")) {
        P->i++;
        n = mk(P, tok_eq(t, "break") ? N_BREAK : N_CONTINUE, pos);
        p_expect(P, T_CSTMT, "'%}'");
    } else if (tok_eq(t, "filter")) {
        P->i++;
        n = mk(P, N_FILTERBLOCK, pos);
        node *f = parse_primary(P);
        if (f->k == N_IDENT && p_is(P, T_LPAREN)) f = parse_call(P, f);
        n->b = f;
        p_expect(P, T_CSTMT, "'%}'");
        nvec body = {0};
        parse_body_until(P, &body, "endfilter", NULL, NULL);
        n->v = body.v; n->n = body.n;
        p_end(P, "endfilter");
    } else {
        jfail(P->c, t->pos, "unknown statement '%.*s'", (int)RKM_MIN(t->len, 64), t->s);
    }
    return n;
}

static node *parse_any(parser *P)
{
    tok *t = p_peek(P);
    if (!t) p_eof(P);
    node *n;
    p_enter(P);
    switch (t->type) {
    case T_COMMENT:
        n = mk(P, N_COMMENT, t->pos);
        P->i++;
        break;
    case T_TEXT:
        n = mk(P, N_TEXT, t->pos);
        n->s = t->s; n->len = t->len;
        P->i++;
        break;
    case T_OSTMT:
        n = parse_stmt(P);
        break;
    case T_OEXPR:
        P->i++;
        n = parse_expr(P);
        p_expect(P, T_CEXPR, "'}}'");
        break;
    default:
        jfail(P->c, t->pos, "unexpected %s", tok_name(t->type));
    }
    p_leave(P);
    return n;
}

static node *mk_bin(parser *P, int op, node *l, node *r, uint32_t pos)
{
    node *n = mk(P, N_BINARY, pos);
    n->op = (uint8_t)op;
    n->a = l;
    n->b = r;
    return n;
}

static node *parse_or(parser *P);

static node *parse_expr(parser *P)
{
    p_enter(P);
    uint32_t pos = p_pos(P);
    node *a = parse_or(P);
    if (p_is_ident(P, "if")) {
        P->i++;
        node *test = parse_or(P);
        if (p_is_ident(P, "else")) {
            P->i++;
            node *n = mk(P, N_TERNARY, pos);
            n->a = test;
            n->b = a;
            n->c = parse_expr(P);
            a = n;
        } else {
            node *n = mk(P, N_SELECT, pos);
            n->a = a;
            n->b = test;
            a = n;
        }
    }
    p_leave(P);
    return a;
}

static node *parse_not(parser *P);

/* `or` (level 0) binds looser than `and` (level 1), which binds looser than `not`. */
static node *parse_logic(parser *P, int level)
{
    static const char *const kw[] = {"or", "and"};
    static const int op[] = {OP_OR, OP_AND};
    node *l = level ? parse_not(P) : parse_logic(P, 1);
    while (p_is_ident(P, kw[level])) {
        uint32_t pos = p_pos(P);
        P->i++;
        l = mk_bin(P, op[level], l, level ? parse_not(P) : parse_logic(P, 1), pos);
    }
    return l;
}

static node *parse_or(parser *P) { return parse_logic(P, 0); }

static node *parse_cmp(parser *P);
static node *parse_not(parser *P)
{
    if (p_is_ident(P, "not")) {
        uint32_t pos = p_pos(P);
        P->i++;
        p_enter(P);
        node *n = mk(P, N_UNARY, pos);
        n->op = OP_NOT;
        n->a = parse_not(P);
        p_leave(P);
        return n;
    }
    return parse_cmp(P);
}

static node *parse_add(parser *P);
static node *parse_cmp(parser *P)
{
    node *l = parse_add(P);
    for (;;) {
        uint32_t pos = p_pos(P);
        int op;
        if (p_is_ident(P, "not") && P->i + 1 < P->n && P->t[P->i + 1].type == T_IDENT && tok_eq(&P->t[P->i + 1], "in")) {
            op = OP_NOTIN;
            P->i += 2;
        } else if (p_is_ident(P, "in")) {
            op = OP_IN;
            P->i++;
        } else if (p_is(P, T_CMP)) {
            tok *t = &P->t[P->i++];
            op = tok_eq(t, "==") ? OP_EQ : tok_eq(t, "!=") ? OP_NE : tok_eq(t, "<") ? OP_LT : tok_eq(t, ">") ? OP_GT
               : tok_eq(t, "<=") ? OP_LE : OP_GE;
        } else {
            break;
        }
        l = mk_bin(P, op, l, parse_add(P), pos);
    }
    return l;
}

static node *parse_test(parser *P);

static int bin_op(const tok *t)
{
    static const struct { const char *s; int op; } ops[] = {
        {"+", OP_ADD}, {"-", OP_SUB}, {"~", OP_CONCAT}, {"*", OP_MUL}, {"/", OP_DIV},
        {"//", OP_FLOORDIV}, {"%", OP_MOD}, {"**", OP_POW},
    };
    for (size_t i = 0; i < RKM_ARRAY_LEN(ops); i++)
        if (tok_eq(t, ops[i].s)) return ops[i].op;
    return OP_ADD; /* unreachable: the lexer makes only these */
}

/* The left-associative arithmetic levels, loosest first: + - ~, then
 * * / // %, then ** (left-associative in Jinja, unlike Python). */
static node *parse_arith(parser *P, int level)
{
    static const int level_tok[] = {T_ADD, T_MUL, T_POW};
    if (level == (int)RKM_ARRAY_LEN(level_tok)) return parse_test(P);
    node *l = parse_arith(P, level + 1);
    while (p_is(P, level_tok[level])) {
        tok *t = &P->t[P->i++];
        l = mk_bin(P, bin_op(t), l, parse_arith(P, level + 1), t->pos);
    }
    return l;
}

static node *parse_add(parser *P) { return parse_arith(P, 0); }

static node *parse_filter(parser *P);
static node *parse_unary(parser *P);

/* Can the token at i start a test argument (`x is divisibleby 3`)? */
static int starts_test_arg(parser *P)
{
    tok *t = p_peek(P);
    if (!t) return 0;
    if (t->type == T_NUM || t->type == T_STR || t->type == T_LBRACK || t->type == T_LBRACE) return 1;
    if (t->type != T_IDENT) return 0;
    static const char *kw[] = {"else", "or", "and", "is", "in", "not", "if", "for", "recursive"};
    for (size_t i = 0; i < RKM_ARRAY_LEN(kw); i++)
        if (tok_eq(t, kw[i])) return 0;
    return 1;
}

static node *parse_test(parser *P)
{
    node *operand = parse_filter(P);
    while (p_is_ident(P, "is")) {
        uint32_t pos = p_pos(P);
        P->i++;
        int neg = p_is_ident(P, "not");
        if (neg) P->i++;
        node *name = parse_primary(P);
        if (name->k != N_IDENT) jfail(P->c, name->pos, "expected an identifier for the test");
        node *n = mk(P, N_TEST, pos);
        n->a = operand;
        n->op = (uint8_t)neg;
        n->s = name->s; n->len = name->len;
        /* Extension (Jinja2 has it, @huggingface/jinja does not): test
         * arguments, `is divisibleby(3)` or `is divisibleby 3`. */
        if (p_is(P, T_LPAREN)) {
            nvec args = {0};
            parse_args(P, &args, 0);
            n->v = args.v; n->n = args.n;
        } else if (starts_test_arg(P)) {
            nvec args = {0};
            nv_push(P->c, &args, parse_unary(P));
            n->v = args.v; n->n = args.n;
        }
        operand = n;
    }
    return operand;
}

static node *parse_filter(parser *P)
{
    node *operand = parse_unary(P);
    while (p_is(P, T_PIPE)) {
        uint32_t pos = p_pos(P);
        P->i++;
        node *f = parse_primary(P);
        if (f->k != N_IDENT) jfail(P->c, f->pos, "expected an identifier for the filter");
        if (p_is(P, T_LPAREN)) f = parse_call(P, f);
        node *n = mk(P, N_FILTER, pos);
        n->a = operand;
        n->b = f;
        operand = n;
    }
    return operand;
}

static node *parse_unary(parser *P)
{
    tok *t = p_peek(P);
    if (t && (t->type == T_UNARY || t->type == T_ADD) && t->len == 1 && (t->s[0] == '-' || t->s[0] == '+')) {
        P->i++;
        p_enter(P);
        node *n = mk(P, N_UNARY, t->pos);
        n->op = t->s[0] == '-' ? OP_NEG : OP_POS;
        n->a = parse_unary(P);
        p_leave(P);
        return n;
    }
    node *m = parse_member(P, parse_primary(P));
    if (p_is(P, T_LPAREN)) return parse_call(P, m);
    return m;
}

static node *parse_call(parser *P, node *callee)
{
    p_enter(P);
    node *n = mk(P, N_CALL, p_pos(P));
    n->a = callee;
    nvec args = {0};
    parse_args(P, &args, 0);
    n->v = args.v; n->n = args.n;
    n = parse_member(P, n);
    if (p_is(P, T_LPAREN)) n = parse_call(P, n);
    p_leave(P);
    return n;
}

static void parse_args(parser *P, nvec *out, int params)
{
    p_expect(P, T_LPAREN, "'('");
    int saw_kw = 0;
    while (!p_is(P, T_RPAREN)) {
        if (P->i >= P->n) p_eof(P);
        if (p_is(P, T_POW) || (p_is(P, T_MUL) && tok_eq(&P->t[P->i], "*")))
            jfail(P->c, p_pos(P), "argument unpacking (* and **) is not supported");
        node *arg = parse_expr(P);
        if (p_is(P, T_EQUALS)) {
            P->i++;
            if (arg->k != N_IDENT)
                jfail(P->c, arg->pos, params ? "expected identifier for parameter declaration" : "expected identifier for keyword argument");
            node *kw = mk(P, N_KWARG, arg->pos);
            kw->s = arg->s; kw->len = arg->len;
            kw->a = parse_expr(P);
            arg = kw;
        }
        if (params) {
            if (arg->k != N_IDENT && arg->k != N_KWARG) jfail(P->c, arg->pos, "expected identifier for parameter declaration");
            for (int i = 0; i < out->n; i++)
                if (out->v[i]->len == arg->len && !memcmp(out->v[i]->s, arg->s, arg->len))
                    jfail(P->c, arg->pos, "duplicate parameter name '%.*s'", (int)RKM_MIN(arg->len, 64), arg->s);
        }
        if (arg->k == N_KWARG) saw_kw = 1;
        else if (saw_kw)
            jfail(P->c, arg->pos, params ? "non-default argument follows default argument" : "positional argument follows keyword argument");
        nv_push(P->c, out, arg);
        if (p_is(P, T_COMMA)) P->i++;
    }
    P->i++;
}

static node *parse_subscript(parser *P)
{
    node *sl[3] = {0};
    int n = 0, is_slice = 0;
    uint32_t pos = p_pos(P);
    while (!p_is(P, T_RBRACK)) {
        if (P->i >= P->n) p_eof(P);
        if (n >= 3) jfail(P->c, p_pos(P), "expected 0-3 arguments for slice expression");
        if (p_is(P, T_COLON)) {
            sl[n++] = NULL;
            P->i++;
            is_slice = 1;
        } else {
            sl[n++] = parse_expr(P);
            if (p_is(P, T_COLON)) {
                P->i++;
                is_slice = 1;
            }
        }
    }
    if (n == 0) jfail(P->c, pos, "expected at least one argument for member/slice expression");
    if (!is_slice) return sl[0];
    node *s = mk(P, N_SLICE, pos);
    s->a = sl[0];
    s->b = n > 1 ? sl[1] : NULL;
    s->c = n > 2 ? sl[2] : NULL;
    return s;
}

static node *parse_member(parser *P, node *obj)
{
    while (p_is(P, T_DOT) || p_is(P, T_LBRACK)) {
        tok *op = &P->t[P->i++];
        node *m = mk(P, N_MEMBER, op->pos);
        m->a = obj;
        if (op->type == T_LBRACK) {
            m->op = 1;
            m->b = parse_subscript(P);
            p_expect(P, T_RBRACK, "']'");
        } else {
            m->b = parse_primary(P);
            if (m->b->k != N_IDENT && m->b->k != N_INT) jfail(P->c, m->b->pos, "expected identifier or integer after '.'");
        }
        obj = m;
    }
    return obj;
}

static node *parse_primary(parser *P)
{
    tok *t = p_peek(P);
    if (!t) p_eof(P);
    P->i++;
    node *n;
    switch (t->type) {
    case T_NUM: {
        char buf[64];
        size_t l = RKM_MIN(t->len, sizeof buf - 1);
        memcpy(buf, t->s, l);
        buf[l] = 0;
        int is_float = memchr(t->s, '.', t->len) != NULL;
        n = mk(P, is_float ? N_FLOAT : N_INT, t->pos);
        n->num = t->len < sizeof buf ? strtod(buf, NULL) : (t->s[0] == '-' ? -INFINITY : INFINITY);
        return n;
    }
    case T_STR: {
        n = mk(P, N_STR, t->pos);
        if (p_is(P, T_STR)) {
            sbuf b = {0};
            sb_add(P->c, &b, t->s, t->len);
            while (p_is(P, T_STR)) {
                sb_add(P->c, &b, P->t[P->i].s, P->t[P->i].len);
                P->i++;
            }
            n->s = b.p ? b.p : "";
            n->len = b.len;
        } else {
            n->s = t->s;
            n->len = t->len;
        }
        return n;
    }
    case T_IDENT:
        n = mk(P, N_IDENT, t->pos);
        n->s = t->s;
        n->len = t->len;
        return n;
    case T_LPAREN:
        p_enter(P);
        n = parse_expr_seq(P, 0);
        p_expect(P, T_RPAREN, "')'");
        p_leave(P);
        return n;
    case T_LBRACK: {
        p_enter(P);
        nvec v = {0};
        while (!p_is(P, T_RBRACK)) {
            if (P->i >= P->n) p_eof(P);
            nv_push(P->c, &v, parse_expr(P));
            if (p_is(P, T_COMMA)) P->i++;
        }
        P->i++;
        n = mk(P, N_ARRAY, t->pos);
        n->v = v.v; n->n = v.n;
        p_leave(P);
        return n;
    }
    case T_LBRACE: {
        p_enter(P);
        nvec k = {0}, v = {0};
        while (!p_is(P, T_RBRACE)) {
            if (P->i >= P->n) p_eof(P);
            nv_push(P->c, &k, parse_expr(P));
            p_expect(P, T_COLON, "':' between key and value in object literal");
            nv_push(P->c, &v, parse_expr(P));
            if (p_is(P, T_COMMA)) P->i++;
        }
        P->i++;
        n = mk(P, N_OBJECT, t->pos);
        n->v = k.v; n->n = k.n;
        n->v2 = v.v; n->n2 = v.n;
        p_leave(P);
        return n;
    }
    default:
        jfail(P->c, t->pos, "unexpected %s", tok_name(t->type));
    }
}

/* ------------------------------------------------------------- values */

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_FUNC };

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;
typedef struct jenv jenv;

typedef struct jv {
    int t;
    union {
        int b;
        double n;
        jstr *s;
        jlist *l;
        jdict *d; /* V_DICT and V_NS */
        jfunc *f;
    } u;
} jv;

struct jlist {
    size_t n, cap;
    jv *v;
    int tuple; /* (a, b): like a list, but not JSON-printable, not "iterable" */
};

struct jdict {
    size_t n, cap;
    jstr **k;
    jv *v;
};

enum { F_RAISE, F_RANGE, F_STRFTIME, F_NAMESPACE, F_METHOD, F_MACRO, F_CALLER };

struct jfunc {
    int kind;
    const char *method; /* F_METHOD: name */
    jv self;            /* F_METHOD: receiver */
    const node *def;    /* F_MACRO: N_MACRO; F_CALLER: N_CALLBLOCK */
    jenv *env;          /* F_CALLER: where the call block stands */
};

struct jenv {
    jenv *parent;
    jdict vars;
};

static const jv UNDEF = {V_UNDEF, {0}};
static const jv NONE = {V_NONE, {0}};

static jv v_bool(int b) { jv v = {V_BOOL, {0}}; v.u.b = !!b; return v; }
static jv v_int(double n) { jv v = {V_INT, {0}}; v.u.n = n; return v; }
static jv v_float(double n) { jv v = {V_FLOAT, {0}}; v.u.n = n; return v; }
static jv v_str(jstr *s) { jv v = {V_STR, {0}}; v.u.s = s; return v; }
static int is_num(jv v) { return v.t == V_INT || v.t == V_FLOAT; }

static jv v_list(jctx *c, size_t cap)
{
    jv v = {V_LIST, {0}};
    v.u.l = ar_alloc(c, sizeof(jlist));
    v.u.l->n = 0;
    v.u.l->tuple = 0;
    v.u.l->cap = cap;
    v.u.l->v = cap ? ar_alloc(c, cap * sizeof(jv)) : NULL;
    return v;
}

static void list_push(jctx *c, jlist *l, jv x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *nv = ar_alloc(c, cap * sizeof(jv));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static jv v_dict(jctx *c, int type)
{
    jv v = {type, {0}};
    v.u.d = ar_alloc(c, sizeof(jdict));
    memset(v.u.d, 0, sizeof(jdict));
    return v;
}

static long dict_find(const jdict *d, const char *k, size_t kl)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i]->len == kl && !memcmp(d->k[i]->s, k, kl)) return (long)i;
    return -1;
}

static void dict_set(jctx *c, jdict *d, jstr *k, jv x)
{
    long i = dict_find(d, k->s, k->len);
    if (i >= 0) { d->v[i] = x; return; }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jstr **nk = ar_alloc(c, cap * sizeof(jstr *));
        jv *nv = ar_alloc(c, cap * sizeof(jv));
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

static int dict_get(const jdict *d, const char *k, size_t kl, jv *out)
{
    long i = dict_find(d, k, kl);
    if (i < 0) return 0;
    *out = d->v[i];
    return 1;
}

static const char *type_name(jv v)
{
    static const char *n[] = {"UndefinedValue", "NullValue", "BooleanValue", "IntegerValue", "FloatValue",
                              "StringValue", "ArrayValue", "ObjectValue", "NamespaceValue", "FunctionValue"};
    return n[v.t];
}

static int truthy(jv v)
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

typedef struct json_opts {
    int indent;             /* 0: none */
    int ensure_ascii;
    int sort_keys;
    const char *item_sep, *key_sep; /* NULL: defaults */
} json_opts;

static void json_str(jctx *c, sbuf *b, const char *s, size_t n, int ascii)
{
    sb_addc(c, b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x80) {
            i++;
            switch (ch) {
            case '"': sb_add(c, b, "\\\"", 2); break;
            case '\\': sb_add(c, b, "\\\\", 2); break;
            case '\b': sb_add(c, b, "\\b", 2); break;
            case '\f': sb_add(c, b, "\\f", 2); break;
            case '\n': sb_add(c, b, "\\n", 2); break;
            case '\r': sb_add(c, b, "\\r", 2); break;
            case '\t': sb_add(c, b, "\\t", 2); break;
            default:
                if (ch < 0x20 || (ascii && ch == 0x7F)) {
                    char e[8];
                    snprintf(e, sizeof e, "\\u%04x", ch);
                    sb_add(c, b, e, 6);
                } else {
                    sb_addc(c, b, (char)ch);
                }
            }
            continue;
        }
        uint32_t cp;
        int l = u8_dec(s + i, n - i, &cp);
        if (ascii) {
            char e[16];
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                sb_add(c, b, e, 12);
            } else {
                snprintf(e, sizeof e, "\\u%04x", cp);
                sb_add(c, b, e, 6);
            }
        } else {
            sb_add(c, b, s + i, (size_t)l);
        }
        i += (size_t)l;
    }
    sb_addc(c, b, '"');
}

/* An approximation of String.prototype.localeCompare (ICU root collation)
 * for sort_keys: case-insensitive first, lower case before upper on ties. */
static int locale_cmp(const jstr *a, const jstr *b)
{
    size_t i = 0, j = 0;
    while (i < a->len && j < b->len) {
        uint32_t x, y;
        i += u8_dec(a->s + i, a->len - i, &x);
        j += u8_dec(b->s + j, b->len - j, &y);
        uint32_t lx = cp_case(x, 0), ly = cp_case(y, 0);
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

static void merge_sort(jctx *c, void *base, size_t n, size_t sz, int (*cmp)(jctx *, const void *, const void *, void *), void *arg);

static int cmp_keys(jctx *c, const void *a, const void *b, void *arg)
{
    (void)c; (void)arg;
    return locale_cmp(*(jstr *const *)a, *(jstr *const *)b);
}

static void to_json(jctx *c, sbuf *b, jv v, const json_opts *o, int depth, int undef_null);

static void json_pad(jctx *c, sbuf *b, const json_opts *o, int depth)
{
    sb_addc(c, b, '\n');
    for (int i = 0; i < depth * o->indent; i++) sb_addc(c, b, ' ');
}

static void to_json(jctx *c, sbuf *b, jv v, const json_opts *o, int depth, int undef_null)
{
    if (depth > 256) jfail(c, NOPOS, "tojson: value nested too deeply (or cyclic)");
    const char *isep = o->item_sep ? o->item_sep : o->indent ? "," : ", ";
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    char nb[40];
    switch (v.t) {
    case V_NONE: sb_adds(c, b, "null"); return;
    case V_UNDEF: sb_adds(c, b, undef_null ? "null" : "undefined"); return;
    case V_BOOL: sb_adds(c, b, v.u.b ? "true" : "false"); return;
    case V_INT: case V_FLOAT:
        if (!isfinite(v.u.n)) { sb_adds(c, b, "null"); return; }
        js_num(v.u.n, nb);
        sb_adds(c, b, nb);
        return;
    case V_STR: json_str(c, b, v.u.s->s, v.u.s->len, o->ensure_ascii); return;
    case V_LIST: {
        jlist *l = v.u.l;
        if (l->tuple) jfail(c, NOPOS, "cannot convert to JSON: TupleValue");
        sb_addc(c, b, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) sb_adds(c, b, isep);
            if (o->indent) json_pad(c, b, o, depth + 1);
            to_json(c, b, l->v[i], o, depth + 1, undef_null);
        }
        if (o->indent && l->n) json_pad(c, b, o, depth);
        sb_addc(c, b, ']');
        return;
    }
    case V_DICT: case V_NS: {
        jdict *d = v.u.d;
        size_t *idx = ar_alloc(c, (d->n + 1) * sizeof(size_t));
        for (size_t i = 0; i < d->n; i++) idx[i] = i;
        if (o->sort_keys && d->n > 1) {
            jstr **keys = ar_alloc(c, d->n * sizeof(jstr *));
            memcpy(keys, d->k, d->n * sizeof(jstr *));
            merge_sort(c, keys, d->n, sizeof(jstr *), cmp_keys, NULL);
            for (size_t i = 0; i < d->n; i++) idx[i] = (size_t)dict_find(d, keys[i]->s, keys[i]->len);
        }
        sb_addc(c, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) sb_adds(c, b, isep);
            if (o->indent) json_pad(c, b, o, depth + 1);
            json_str(c, b, d->k[idx[i]]->s, d->k[idx[i]]->len, o->ensure_ascii);
            sb_adds(c, b, ksep);
            to_json(c, b, d->v[idx[i]], o, depth + 1, undef_null);
        }
        if (o->indent && d->n) json_pad(c, b, o, depth);
        sb_addc(c, b, '}');
        return;
    }
    default:
        jfail(c, NOPOS, "cannot convert to JSON: %s", type_name(v));
    }
}

/* RuntimeValue.toString: how {{ value }} prints. */
static void display(jctx *c, sbuf *b, jv v)
{
    char nb[40];
    static const json_opts plain = {0};
    switch (v.t) {
    case V_UNDEF: sb_adds(c, b, "undefined"); return;
    case V_NONE: sb_adds(c, b, "null"); return;
    case V_BOOL: sb_adds(c, b, v.u.b ? "true" : "false"); return;
    case V_INT: js_num(v.u.n, nb); sb_adds(c, b, nb); return;
    case V_FLOAT: js_float_str(v.u.n, nb); sb_adds(c, b, nb); return;
    case V_STR: sb_add(c, b, v.u.s->s, v.u.s->len); return;
    case V_LIST: case V_DICT: case V_NS: to_json(c, b, v, &plain, 0, 0); return;
    default: sb_adds(c, b, "[function]"); return;
    }
}

/* The JavaScript string of the raw value (what `~`, `+` and join use):
 * numbers without the ".0", arrays joined by ",", maps "[object Map]". */
static void raw_str(jctx *c, sbuf *b, jv v)
{
    char nb[40];
    switch (v.t) {
    case V_UNDEF: case V_NONE: return;
    case V_INT: case V_FLOAT: js_num(v.u.n, nb); sb_adds(c, b, nb); return;
    case V_LIST:
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) sb_addc(c, b, ',');
            display(c, b, v.u.l->v[i]);
        }
        return;
    case V_DICT: case V_NS: sb_adds(c, b, "[object Map]"); return;
    default: display(c, b, v); return;
    }
}

static jstr *display_str(jctx *c, jv v)
{
    if (v.t == V_STR) return v.u.s;
    sbuf b = {0};
    display(c, &b, v);
    return b.p ? sb_str(c, &b) : str_new(c, "", 0);
}

/* JavaScript's `a.value == b.value`. */
static int loose_eq(jctx *c, jv a, jv b, int depth)
{
    int an = a.t == V_NONE || a.t == V_UNDEF, bn = b.t == V_NONE || b.t == V_UNDEF;
    if (an || bn) return an && bn;
    int ao = a.t >= V_LIST, bo = b.t >= V_LIST;
    if (ao && bo) return a.t == b.t && a.u.l == b.u.l; /* identity */
    if (depth > 4) return 0;
    if (ao || bo) { /* object vs primitive: compare its string form */
        sbuf s = {0};
        raw_str(c, &s, ao ? a : b);
        jv sv = v_str(s.p ? sb_str(c, &s) : str_new(c, "", 0));
        return ao ? loose_eq(c, sv, b, depth + 1) : loose_eq(c, a, sv, depth + 1);
    }
    if (a.t == V_STR && b.t == V_STR) return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    if (a.t == V_BOOL && b.t == V_BOOL) return a.u.b == b.u.b;
    double x = a.t == V_BOOL ? a.u.b : a.t == V_STR ? js_to_number(a.u.s->s, a.u.s->len) : a.u.n;
    double y = b.t == V_BOOL ? b.u.b : b.t == V_STR ? js_to_number(b.u.s->s, b.u.s->len) : b.u.n;
    return x == y;
}

/* `===` on raw values (tests eq/equalto, `in`, unique). */
static int strict_eq(jv a, jv b)
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
static void merge_sort(jctx *c, void *base, size_t n, size_t sz, int (*cmp)(jctx *, const void *, const void *, void *), void *arg)
{
    if (n < 2) return;
    unsigned char *a = base, *tmp = ar_alloc(c, n * sz);
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
static int compare_values(jctx *c, jv a, jv b, int case_sensitive)
{
    if (a.t == V_NONE && b.t == V_NONE) return 0;
    if (a.t == V_NONE || b.t == V_NONE || a.t == V_UNDEF || b.t == V_UNDEF) {
        if (a.t == V_UNDEF && b.t == V_UNDEF) return 0;
        jfail(c, NOPOS, "cannot compare %s with %s", type_name(a), type_name(b));
    }
    int an = is_num(a) || a.t == V_BOOL, bn = is_num(b) || b.t == V_BOOL;
    if (an && bn) {
        double x = a.t == V_BOOL ? a.u.b : a.u.n, y = b.t == V_BOOL ? b.u.b : b.u.n;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.t != b.t) jfail(c, NOPOS, "cannot compare different types: %s and %s", type_name(a), type_name(b));
    if (a.t != V_STR) jfail(c, NOPOS, "cannot compare type: %s", type_name(a));
    jstr *x = a.u.s, *y = b.u.s;
    if (!case_sensitive) {
        x = str_case(c, x->s, x->len, 0);
        y = str_case(c, y->s, y->len, 0);
    }
    int r = memcmp(x->s, y->s, RKM_MIN(x->len, y->len));
    if (r) return r < 0 ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
}

/* ------------------------------------------------------------ renderer */

#define MAX_LIST 1000000 /* range() and friends: beyond this, the template is hostile */

static jv eval(jctx *c, const node *n, jenv *e);
static int exec_block(jctx *c, node *const *v, int n, jenv *e, sbuf *out);

static jenv *env_new(jctx *c, jenv *parent)
{
    jenv *e = ar_alloc(c, sizeof(jenv));
    memset(e, 0, sizeof *e);
    e->parent = parent;
    return e;
}

static void env_set(jctx *c, jenv *e, const char *name, size_t len, jv v)
{
    long i = dict_find(&e->vars, name, len);
    if (i >= 0) { e->vars.v[i] = v; return; }
    dict_set(c, &e->vars, str_new(c, name, len), v);
}

static jv env_get(jenv *e, const char *name, size_t len)
{
    for (; e; e = e->parent) {
        jv v;
        if (dict_get(&e->vars, name, len, &v)) return v;
    }
    return UNDEF;
}

static void step(jctx *c, const node *n)
{
    if (++c->steps > c->max_steps) jfail(c, n ? n->pos : NOPOS, "template takes too many steps (limit %zu)", c->max_steps);
}

/* Arguments of a call: positional values and keyword values. */
typedef struct args {
    jv *v;
    int n;
    jdict kw;
} args;

static void eval_args(jctx *c, node *const *v, int n, jenv *e, args *a)
{
    memset(a, 0, sizeof *a);
    a->v = ar_alloc(c, (size_t)(n + 1) * sizeof(jv));
    for (int i = 0; i < n; i++)
        if (v[i]->k != N_KWARG) a->v[a->n++] = eval(c, v[i], e);
    for (int i = 0; i < n; i++)
        if (v[i]->k == N_KWARG) {
            if (dict_find(&a->kw, v[i]->s, v[i]->len) >= 0)
                jfail(c, v[i]->pos, "got multiple values for keyword argument '%.*s'", (int)RKM_MIN(v[i]->len, 64), v[i]->s);
            dict_set(c, &a->kw, str_new(c, v[i]->s, v[i]->len), eval(c, v[i]->a, e));
        }
}

static jv arg_get(const args *a, int i, const char *kw, jv def)
{
    jv v;
    if (i >= 0 && i < a->n) return a->v[i];
    if (kw && dict_get(&a->kw, kw, strlen(kw), &v)) return v;
    return def;
}

/* ---- string helpers */

static jv s_new(jctx *c, const char *p, size_t n) { return v_str(str_new(c, p, n)); }

static int str_starts(const jstr *s, const jstr *p) { return p->len <= s->len && !memcmp(s->s, p->s, p->len); }
static int str_ends(const jstr *s, const jstr *p) { return p->len <= s->len && !memcmp(s->s + s->len - p->len, p->s, p->len); }

static const char *mem_find(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (!nn) return h;
    if (nn > hn) return NULL;
    return memmem(h, hn, nd, nn);
}

static jstr *title_case(jctx *c, const jstr *s)
{
    jstr *r = str_new(c, s->s, s->len);
    for (size_t i = 0; i < r->len; i++) {
        int prev_word = i > 0 && is_word((unsigned char)r->s[i - 1]);
        if (!prev_word && r->s[i] >= 'a' && r->s[i] <= 'z') r->s[i] = (char)(r->s[i] - 32);
    }
    return r;
}

static jv str_replace(jctx *c, const jstr *s, const jstr *old, const jstr *nw, double count)
{
    if (count == 0) return v_str((jstr *)s);
    double remaining = count < 0 || isnan(count) ? INFINITY : count;
    sbuf b = {0};
    if (!old->len) { /* between every code point, and at both ends */
        size_t i = 0;
        for (;;) {
            if (remaining > 0) { sb_add(c, &b, nw->s, nw->len); remaining--; }
            if (i >= s->len) break;
            uint32_t cp;
            int l = u8_dec(s->s + i, s->len - i, &cp);
            sb_add(c, &b, s->s + i, (size_t)l);
            i += (size_t)l;
        }
    } else {
        size_t i = 0;
        while (i <= s->len) {
            const char *f = remaining > 0 ? mem_find(s->s + i, s->len - i, old->s, old->len) : NULL;
            if (!f) { sb_add(c, &b, s->s + i, s->len - i); break; }
            size_t at = (size_t)(f - s->s);
            sb_add(c, &b, s->s + i, at - i);
            sb_add(c, &b, nw->s, nw->len);
            remaining--;
            i = at + old->len;
        }
    }
    return v_str(b.p ? sb_str(c, &b) : str_new(c, "", 0));
}

static jv str_split(jctx *c, const jstr *s, jv sep, jv maxsplit, uint32_t pos)
{
    if (sep.t != V_STR && sep.t != V_NONE) jfail(c, pos, "sep argument must be a string or null");
    if (maxsplit.t != V_INT) jfail(c, pos, "maxsplit argument must be a number");
    double ms = maxsplit.u.n;
    jv out = v_list(c, 0);
    if (sep.t == V_NONE) {
        size_t i = js_trim_start(s->s, s->len);
        while (i < s->len) {
            size_t st = i;
            while (i < s->len) {
                uint32_t cp;
                int l = u8_dec(s->s + i, s->len - i, &cp);
                if (js_space(cp)) break;
                i += (size_t)l;
            }
            if (ms != -1 && (double)out.u.l->n >= ms) {
                list_push(c, out.u.l, s_new(c, s->s + st, s->len - st));
                break;
            }
            list_push(c, out.u.l, s_new(c, s->s + st, i - st));
            i += js_trim_start(s->s + i, s->len - i);
        }
        return out;
    }
    const jstr *sp = sep.u.s;
    if (!sp->len) jfail(c, pos, "empty separator");
    size_t i = 0;
    for (;;) {
        const char *f = mem_find(s->s + i, s->len - i, sp->s, sp->len);
        if (!f || (ms != -1 && (double)out.u.l->n >= ms)) {
            list_push(c, out.u.l, s_new(c, s->s + i, s->len - i));
            break;
        }
        list_push(c, out.u.l, s_new(c, s->s + i, (size_t)(f - (s->s + i))));
        i = (size_t)(f - s->s) + sp->len;
        if (out.u.l->n > MAX_LIST) jfail(c, pos, "split: too many parts");
    }
    return out;
}

static jv str_strip(jctx *c, const jstr *s, int left, int right)
{
    size_t a = left ? js_trim_start(s->s, s->len) : 0;
    size_t b = right ? js_trim_end(s->s, s->len) : s->len;
    if (b < a) b = a;
    return s_new(c, s->s + a, b - a);
}

/* code point list of a string (slices and join iterate code points) */
static size_t str_cps(jctx *c, const jstr *s, size_t **offs)
{
    size_t n = 0;
    size_t *o = ar_alloc(c, (s->len + 1) * sizeof(size_t));
    for (size_t i = 0; i < s->len;) {
        uint32_t cp;
        o[n++] = i;
        i += (size_t)u8_dec(s->s + i, s->len - i, &cp);
    }
    o[n] = s->len;
    *offs = o;
    return n;
}

/* ---- methods of strings and dicts (bound as F_METHOD values) */

static const char *const str_methods[] = {"upper", "lower", "strip", "title", "capitalize", "rstrip", "lstrip",
                                          "startswith", "endswith", "split", "replace", "find", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", "dictsort", NULL};

static jv mk_method(jctx *c, jv self, const char *const *names, const char *s, size_t n)
{
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n)) {
            jv v = {V_FUNC, {0}};
            v.u.f = ar_alloc(c, sizeof(jfunc));
            memset(v.u.f, 0, sizeof(jfunc));
            v.u.f->kind = F_METHOD;
            v.u.f->method = names[i];
            v.u.f->self = self;
            return v;
        }
    return UNDEF;
}

static jv dict_items(jctx *c, const jdict *d)
{
    jv out = v_list(c, d->n);
    for (size_t i = 0; i < d->n; i++) {
        jv pair = v_list(c, 2);
        list_push(c, pair.u.l, v_str(d->k[i]));
        list_push(c, pair.u.l, d->v[i]);
        list_push(c, out.u.l, pair);
    }
    return out;
}

typedef struct sort_spec {
    int reverse, case_sensitive, index; /* index: dictsort key (0) / value (1) */
    const jstr *attr;
} sort_spec;

static jv get_attr_path(jctx *c, jv item, const jstr *path);

static int cmp_sort(jctx *c, const void *pa, const void *pb, void *arg)
{
    const sort_spec *sp = arg;
    jv a = *(const jv *)pa, b = *(const jv *)pb;
    if (sp->index >= 0) {
        a = a.u.l->v[sp->index];
        b = b.u.l->v[sp->index];
    } else if (sp->attr) {
        a = get_attr_path(c, a, sp->attr);
        b = get_attr_path(c, b, sp->attr);
    }
    int r = compare_values(c, a, b, sp->case_sensitive);
    return sp->reverse ? -r : r;
}

static int bool_arg(jctx *c, jv v, const char *what, uint32_t pos)
{
    if (v.t != V_BOOL) jfail(c, pos, "%s must be a boolean", what);
    return v.u.b;
}

static jv call_dict_method(jctx *c, const char *m, jdict *d, const args *a, uint32_t pos)
{
    if (!strcmp(m, "get")) {
        jv key = arg_get(a, 0, NULL, UNDEF), v;
        if (key.t != V_STR) jfail(c, pos, "object key must be a string: got %s", type_name(key));
        if (dict_get(d, key.u.s->s, key.u.s->len, &v)) return v;
        return a->n > 1 ? a->v[1] : NONE;
    }
    if (!strcmp(m, "items")) return dict_items(c, d);
    if (!strcmp(m, "keys")) {
        jv out = v_list(c, d->n);
        for (size_t i = 0; i < d->n; i++) list_push(c, out.u.l, v_str(d->k[i]));
        return out;
    }
    if (!strcmp(m, "values")) {
        jv out = v_list(c, d->n);
        for (size_t i = 0; i < d->n; i++) list_push(c, out.u.l, d->v[i]);
        return out;
    }
    /* dictsort(case_sensitive=false, by='key', reverse=false) */
    sort_spec sp = {0};
    sp.case_sensitive = bool_arg(c, arg_get(a, 0, "case_sensitive", v_bool(0)), "case_sensitive", pos);
    jv by = arg_get(a, 1, "by", UNDEF);
    sp.index = 0;
    if (by.t != V_UNDEF) {
        if (by.t != V_STR) jfail(c, pos, "by must be a string");
        if (!strcmp(by.u.s->s, "value")) sp.index = 1;
        else if (strcmp(by.u.s->s, "key")) jfail(c, pos, "by must be either 'key' or 'value'");
    }
    sp.reverse = bool_arg(c, arg_get(a, 2, "reverse", v_bool(0)), "reverse", pos);
    jv items = dict_items(c, d);
    merge_sort(c, items.u.l->v, items.u.l->n, sizeof(jv), cmp_sort, &sp);
    return items;
}

static jv call_str_method(jctx *c, const char *m, const jstr *s, const args *a, uint32_t pos)
{
    if (!strcmp(m, "upper")) return v_str(str_case(c, s->s, s->len, 1));
    if (!strcmp(m, "lower")) return v_str(str_case(c, s->s, s->len, 0));
    if (!strcmp(m, "strip")) return str_strip(c, s, 1, 1); /* like @huggingface/jinja: argument ignored */
    if (!strcmp(m, "lstrip")) return str_strip(c, s, 1, 0);
    if (!strcmp(m, "rstrip")) return str_strip(c, s, 0, 1);
    if (!strcmp(m, "title")) return v_str(title_case(c, s));
    if (!strcmp(m, "capitalize")) {
        if (!s->len) return v_str((jstr *)s);
        uint32_t cp;
        int l = u8_dec(s->s, s->len, &cp);
        char e[4];
        sbuf b = {0};
        sb_add(c, &b, e, (size_t)u8_enc(cp_case(cp, 1), e));
        sb_add(c, &b, s->s + l, s->len - (size_t)l);
        return v_str(sb_str(c, &b));
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        int ends = m[0] == 'e';
        if (a->n == 0) jfail(c, pos, "%s() requires at least one argument", m);
        jv p = a->v[0];
        if (p.t == V_STR) return v_bool(ends ? str_ends(s, p.u.s) : str_starts(s, p.u.s));
        if (p.t == V_LIST) {
            for (size_t i = 0; i < p.u.l->n; i++) {
                jv x = p.u.l->v[i];
                if (x.t != V_STR) jfail(c, pos, "%s() tuple elements must be strings", m);
                if (ends ? str_ends(s, x.u.s) : str_starts(s, x.u.s)) return v_bool(1);
            }
            return v_bool(0);
        }
        jfail(c, pos, "%s() argument must be a string or tuple of strings", m);
    }
    if (!strcmp(m, "split")) return str_split(c, s, arg_get(a, 0, NULL, NONE), arg_get(a, 1, NULL, v_int(-1)), pos);
    if (!strcmp(m, "replace")) {
        if (a->n < 2) jfail(c, pos, "replace() requires at least two arguments");
        if (a->v[0].t != V_STR || a->v[1].t != V_STR) jfail(c, pos, "replace() arguments must be strings");
        jv count = arg_get(a, 2, "count", NONE);
        if (count.t != V_INT && count.t != V_NONE) jfail(c, pos, "replace() count argument must be a number or null");
        return str_replace(c, s, a->v[0].u.s, a->v[1].u.s, count.t == V_NONE ? -1 : count.u.n);
    }
    /* find (extension, Python semantics: code point index or -1) */
    jv sub = arg_get(a, 0, NULL, UNDEF);
    if (sub.t != V_STR) jfail(c, pos, "find() argument must be a string");
    const char *f = mem_find(s->s, s->len, sub.u.s->s, sub.u.s->len);
    if (!f) return v_int(-1);
    size_t k = 0;
    for (size_t i = 0; i < (size_t)(f - s->s);) {
        uint32_t cp;
        i += (size_t)u8_dec(s->s + i, s->len - i, &cp);
        k++;
    }
    return v_int((double)k);
}

/* ---- member access */

static jv get_attr_path(jctx *c, jv item, const jstr *path)
{
    (void)c;
    size_t i = 0;
    jv v = item;
    for (;;) {
        const char *dot = memchr(path->s + i, '.', path->len - i);
        size_t end = dot ? (size_t)(dot - path->s) : path->len;
        const char *part = path->s + i;
        size_t pl = end - i;
        if (v.t == V_DICT || v.t == V_NS) {
            if (!dict_get(v.u.d, part, pl, &v)) v = UNDEF;
        } else if (v.t == V_LIST) {
            double idx = js_parse_int(part, pl);
            if (!isnan(idx) && idx >= 0 && idx < (double)v.u.l->n) v = v.u.l->v[(size_t)idx];
            else return UNDEF;
        } else {
            return UNDEF;
        }
        if (!dot) return v;
        i = end + 1;
    }
}

static jv member_get(jctx *c, jv obj, jv prop, uint32_t pos)
{
    if (obj.t == V_DICT || obj.t == V_NS) {
        if (prop.t != V_STR) jfail(c, pos, "cannot access property with non-string: got %s", type_name(prop));
        jv v;
        if (dict_get(obj.u.d, prop.u.s->s, prop.u.s->len, &v)) return v;
        if (obj.t == V_DICT) return mk_method(c, obj, dict_methods, prop.u.s->s, prop.u.s->len);
        return UNDEF;
    }
    if (obj.t == V_LIST || obj.t == V_STR) {
        if (prop.t == V_INT) {
            double i = prop.u.n;
            if (obj.t == V_LIST) {
                double n = (double)obj.u.l->n;
                if (i < 0) i += n;
                if (i < 0 || i >= n || isnan(i)) return UNDEF;
                return obj.u.l->v[(size_t)i];
            }
            /* String.prototype.at: by UTF-16 unit; a whole code point here */
            size_t *o;
            size_t n = str_cps(c, obj.u.s, &o);
            double u = (double)u16_len(obj.u.s->s, obj.u.s->len);
            if (i < 0) i += u;
            if (i < 0 || i >= u || isnan(i)) return UNDEF;
            size_t k = 0, unit = 0;
            for (; k < n; k++) {
                uint32_t cp;
                u8_dec(obj.u.s->s + o[k], o[k + 1] - o[k], &cp);
                size_t w = cp >= 0x10000 ? 2 : 1;
                if ((double)(unit + w) > i) break;
                unit += w;
            }
            return s_new(c, obj.u.s->s + o[k], o[k + 1] - o[k]);
        }
        if (prop.t == V_STR) {
            if (prop.u.s->len == 6 && !memcmp(prop.u.s->s, "length", 6))
                return v_int(obj.t == V_LIST ? (double)obj.u.l->n : (double)u16_len(obj.u.s->s, obj.u.s->len));
            if (obj.t == V_STR) return mk_method(c, obj, str_methods, prop.u.s->s, prop.u.s->len);
            return UNDEF;
        }
        jfail(c, pos, "cannot access property with non-string/non-number: got %s", type_name(prop));
    }
    if (prop.t != V_STR) jfail(c, pos, "cannot access property with non-string: got %s", type_name(prop));
    return UNDEF;
}

static jv eval_slice(jctx *c, jv obj, const node *sl, jenv *e)
{
    if (obj.t != V_LIST && obj.t != V_STR) jfail(c, sl->pos, "slice object must be an array or string");
    jv st = sl->a ? eval(c, sl->a, e) : UNDEF, sp = sl->b ? eval(c, sl->b, e) : UNDEF, stp = sl->c ? eval(c, sl->c, e) : UNDEF;
    if ((st.t != V_INT && st.t != V_UNDEF) || (sp.t != V_INT && sp.t != V_UNDEF) || (stp.t != V_INT && stp.t != V_UNDEF))
        jfail(c, sl->pos, "slice indices must be integers or undefined");
    size_t *offs = NULL;
    double len = obj.t == V_LIST ? (double)obj.u.l->n : (double)str_cps(c, obj.u.s, &offs);
    double step_v = stp.t == V_UNDEF ? 1 : stp.u.n;
    int dir = step_v > 0 ? 1 : step_v < 0 ? -1 : 0;
    double start, stop;
    if (dir >= 0) {
        start = st.t == V_UNDEF ? 0 : st.u.n;
        start = start < 0 ? fmax(len + start, 0) : fmin(start, len);
        stop = sp.t == V_UNDEF ? len : sp.u.n;
        stop = stop < 0 ? fmax(len + stop, 0) : fmin(stop, len);
    } else {
        start = st.t == V_UNDEF ? len - 1 : st.u.n;
        start = start < 0 ? fmax(len + start, -1) : fmin(start, len - 1);
        stop = sp.t == V_UNDEF ? -1 : sp.u.n;
        stop = stop < -1 ? fmax(len + stop, -1) : fmin(stop, len - 1);
    }
    jv out = obj.t == V_LIST ? v_list(c, 0) : UNDEF;
    sbuf b = {0};
    for (double i = start; dir * i < dir * stop; i += step_v) {
        step(c, sl);
        size_t k = (size_t)i;
        if (obj.t == V_LIST) list_push(c, out.u.l, obj.u.l->v[k]);
        else sb_add(c, &b, obj.u.s->s + offs[k], offs[k + 1] - offs[k]);
    }
    if (obj.t == V_STR) return v_str(b.p ? sb_str(c, &b) : str_new(c, "", 0));
    return out;
}

/* ---- calls */

static void bind_params(jctx *c, const char *name, node *const *params, int np, int special, const args *a, jenv *scope)
{
    jdict kw = a->kw; /* shallow copy: entries are removed as they bind */
    jdict rest = {0};
    int *used = ar_alloc(c, (kw.n + 1) * sizeof(int));
    memset(used, 0, (kw.n + 1) * sizeof(int));
    for (int i = 0; i < np; i++) {
        const node *p = params[i];
        jv v = UNDEF;
        int have = 0;
        if (i < a->n) { v = a->v[i]; have = 1; }
        if (!have) {
            long k = dict_find(&kw, p->s, p->len);
            if (k >= 0) { v = kw.v[k]; used[k] = 1; have = 1; }
        }
        env_set(c, scope, p->s, p->len, v);
    }
    for (size_t k = 0; k < kw.n; k++)
        if (!used[k]) dict_set(c, &rest, kw.k[k], kw.v[k]);
    if (special & 1) {
        jv d = v_dict(c, V_DICT);
        *d.u.d = rest;
        env_set(c, scope, "kwargs", 6, d);
    } else if (rest.n) {
        jfail(c, NOPOS, "macro %s takes no keyword argument '%s'", name, rest.k[0]->s);
    }
    if (special & 2) {
        jv l = v_list(c, 0);
        for (int i = np; i < a->n; i++) list_push(c, l.u.l, a->v[i]);
        env_set(c, scope, "varargs", 7, l);
    } else if (a->n > np) {
        jfail(c, NOPOS, "macro %s takes not more than %d argument(s)", name, np);
    }
    for (int i = 0; i < np; i++) { /* defaults, in the macro's scope */
        const node *p = params[i];
        if (p->k != N_KWARG) continue;
        int given = i < a->n || dict_find(&kw, p->s, p->len) >= 0;
        if (!given) env_set(c, scope, p->s, p->len, eval(c, p->a, scope));
    }
}

static jv call_global(jctx *c, int kind, const args *a, uint32_t pos)
{
    if (kind == F_RAISE) {
        sbuf b = {0};
        if (a->n) raw_str(c, &b, a->v[0]);
        snprintf(c->msg, sizeof c->msg, "%s", b.p ? b.p : "");
        c->code = RKM_EINVAL;
        longjmp(c->jb, 1);
    }
    if (kind == F_RANGE) {
        for (int i = 0; i < a->n; i++)
            if (!is_num(a->v[i]) && a->v[i].t != V_BOOL) jfail(c, pos, "range() arguments must be numbers");
        if (a->n < 1) jfail(c, pos, "range() expects at least one argument");
#define NUMOF(v) ((v).t == V_BOOL ? (double)(v).u.b : (v).u.n)
        double start = NUMOF(a->v[0]), stop, stp = a->n > 2 ? NUMOF(a->v[2]) : 1;
        if (a->n > 1) stop = NUMOF(a->v[1]);
        else { stop = start; start = 0; }
#undef NUMOF
        if (stp == 0) jfail(c, pos, "range() step must not be zero");
        double cnt = stp > 0 ? ceil((stop - start) / stp) : ceil((start - stop) / -stp);
        if (cnt > MAX_LIST) jfail(c, pos, "range() of more than %d items", MAX_LIST);
        jv out = v_list(c, cnt > 0 ? (size_t)cnt : 0);
        /* the count bound also ends loops where i += stp no longer moves i */
        size_t max_n = cnt > 0 ? (size_t)cnt : 0;
        if (stp > 0) for (double i = start; i < stop && out.u.l->n < max_n; i += stp) list_push(c, out.u.l, v_int(i));
        else for (double i = start; i > stop && out.u.l->n < max_n; i += stp) list_push(c, out.u.l, v_int(i));
        for (size_t i = 0; i < out.u.l->n; i++)
            if (fmod(out.u.l->v[i].u.n, 1.0) != 0) out.u.l->v[i].t = V_FLOAT;
        return out;
    }
    if (kind == F_STRFTIME) {
        jv f = arg_get(a, 0, NULL, UNDEF);
        if (f.t != V_STR) jfail(c, pos, "strftime_now() expects a format string");
        static const char *mon[] = {"January", "February", "March", "April", "May", "June", "July",
                                    "August", "September", "October", "November", "December"};
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        sbuf b = {0};
        char t[32];
        for (size_t i = 0; i < f.u.s->len; i++) {
            char ch = f.u.s->s[i];
            if (ch != '%' || i + 1 >= f.u.s->len) { sb_addc(c, &b, ch); continue; }
            char d = f.u.s->s[++i];
            switch (d) {
            case 'Y': snprintf(t, sizeof t, "%d", tm.tm_year + 1900); break;
            case 'm': snprintf(t, sizeof t, "%02d", tm.tm_mon + 1); break;
            case 'd': snprintf(t, sizeof t, "%02d", tm.tm_mday); break;
            case 'H': snprintf(t, sizeof t, "%02d", tm.tm_hour); break;
            case 'M': snprintf(t, sizeof t, "%02d", tm.tm_min); break;
            case 'B': snprintf(t, sizeof t, "%s", mon[tm.tm_mon]); break;
            case 'b': snprintf(t, sizeof t, "%.3s", mon[tm.tm_mon]); break;
            case '%': snprintf(t, sizeof t, "%%"); break;
            default: snprintf(t, sizeof t, "%%%c", d); break;
            }
            sb_adds(c, &b, t);
        }
        return v_str(b.p ? sb_str(c, &b) : str_new(c, "", 0));
    }
    /* namespace(mapping or pairs?, **kwargs) */
    if (a->n > 1) jfail(c, pos, "namespace expected at most 1 argument, got %d", a->n);
    jv ns = v_dict(c, V_NS);
    if (a->n == 1) {
        jv src = a->v[0];
        if (src.t == V_DICT) {
            for (size_t i = 0; i < src.u.d->n; i++) dict_set(c, ns.u.d, src.u.d->k[i], src.u.d->v[i]);
        } else if (src.t == V_LIST) {
            for (size_t i = 0; i < src.u.l->n; i++) {
                jv p = src.u.l->v[i];
                if (p.t != V_LIST || p.u.l->n != 2) jfail(c, pos, "namespace expected an object or an iterable of [key, value] pairs");
                if (p.u.l->v[0].t != V_STR) jfail(c, pos, "namespace keys must be strings");
                dict_set(c, ns.u.d, p.u.l->v[0].u.s, p.u.l->v[1]);
            }
        } else {
            jfail(c, pos, "'%s' object is not iterable", type_name(src));
        }
    }
    for (size_t i = 0; i < a->kw.n; i++) dict_set(c, ns.u.d, a->kw.k[i], a->kw.v[i]);
    return ns;
}

static jv call_value(jctx *c, jv fn, const args *a, jenv *caller_env, uint32_t pos)
{
    if (fn.t != V_FUNC) jfail(c, pos, "cannot call something that is not a function: got %s", type_name(fn));
    jfunc *f = fn.u.f;
    switch (f->kind) {
    case F_METHOD: {
        /* builtin methods take keyword arguments as a trailing object;
         * only replace(count=) and dictsort() read them */
        if (f->self.t == V_STR) {
            if (a->kw.n && strcmp(f->method, "replace")) jfail(c, pos, "%s() got unexpected keyword arguments", f->method);
            return call_str_method(c, f->method, f->self.u.s, a, pos);
        }
        if (a->kw.n && strcmp(f->method, "dictsort")) jfail(c, pos, "%s() got unexpected keyword arguments", f->method);
        return call_dict_method(c, f->method, f->self.u.d, a, pos);
    }
    case F_MACRO: case F_CALLER: {
        if (++c->depth > c->max_depth) jfail(c, pos, "macro calls nested too deeply");
        const node *d = f->def;
        jenv *scope = env_new(c, f->kind == F_MACRO ? caller_env : f->env);
        char name[80];
        if (f->kind == F_MACRO) snprintf(name, sizeof name, "'%.*s'", (int)RKM_MIN(d->len, 64), d->s);
        else snprintf(name, sizeof name, "None");
        node *const *params = f->kind == F_MACRO ? d->v : d->v2;
        int np = f->kind == F_MACRO ? d->n : d->n2;
        bind_params(c, name, params, np, d->flag, a, scope);
        sbuf out = {0};
        int ctl = f->kind == F_MACRO ? exec_block(c, d->v2, d->n2, scope, &out) : exec_block(c, d->v, d->n, scope, &out);
        if (ctl) jfail(c, pos, "break/continue outside of a loop");
        c->depth--;
        return v_str(out.p ? sb_str(c, &out) : str_new(c, "", 0));
    }
    default:
        return call_global(c, f->kind, a, pos);
    }
}

/* ---- tests */

static int run_test(jctx *c, const node *t, jv v, jenv *e)
{
    const char *n = t->s;
    size_t l = t->len;
#define IS(s) (l == strlen(s) && !memcmp(n, s, l))
    args a = {0};
    if (t->n) eval_args(c, t->v, t->n, e, &a);
    if (IS("boolean")) return v.t == V_BOOL;
    if (IS("callable")) return v.t == V_FUNC;
    if (IS("odd") || IS("even")) {
        if (v.t != V_INT) jfail(c, t->pos, "cannot %.*s on %s", (int)l, n, type_name(v));
        int odd = fmod(v.u.n, 2) != 0;
        return IS("odd") ? odd : !odd;
    }
    if (IS("false")) return v.t == V_BOOL && !v.u.b;
    if (IS("true")) return v.t == V_BOOL && v.u.b;
    if (IS("none")) return v.t == V_NONE;
    if (IS("string")) return v.t == V_STR;
    if (IS("number")) return is_num(v);
    if (IS("integer")) return v.t == V_INT;
    if (IS("iterable")) return (v.t == V_LIST && !v.u.l->tuple) || v.t == V_STR;
    if (IS("mapping")) return v.t == V_DICT;
    if (IS("sequence")) return v.t == V_LIST || v.t == V_DICT || v.t == V_STR;
    if (IS("lower") || IS("upper")) {
        if (v.t != V_STR) return 0;
        jstr *x = str_case(c, v.u.s->s, v.u.s->len, IS("upper"));
        return x->len == v.u.s->len && !memcmp(x->s, v.u.s->s, x->len);
    }
    if (IS("defined")) return v.t != V_UNDEF;
    if (IS("undefined")) return v.t == V_UNDEF;
    /* with an argument (absent from @huggingface/jinja, where `is eq`
     * without one compares with undefined) */
    jv arg = a.n ? a.v[0] : UNDEF;
    if (IS("equalto") || IS("eq") || IS("sameas")) return strict_eq(v, arg);
    if (IS("ne")) return !strict_eq(v, arg);
    if (IS("divisibleby")) {
        if (!is_num(v) || !is_num(arg)) jfail(c, t->pos, "divisibleby needs numbers");
        return arg.u.n != 0 && fmod(v.u.n, arg.u.n) == 0;
    }
    if (IS("gt") || IS("lt") || IS("ge") || IS("le")) {
        if (!is_num(v) || !is_num(arg)) jfail(c, t->pos, "%.*s needs numbers", (int)l, n);
        return IS("gt") ? v.u.n > arg.u.n : IS("lt") ? v.u.n < arg.u.n : IS("ge") ? v.u.n >= arg.u.n : v.u.n <= arg.u.n;
    }
    if (IS("in")) {
        if (arg.t == V_LIST) {
            for (size_t i = 0; i < arg.u.l->n; i++)
                if (strict_eq(arg.u.l->v[i], v)) return 1;
            return 0;
        }
        if (arg.t == V_STR && v.t == V_STR) return mem_find(arg.u.s->s, arg.u.s->len, v.u.s->s, v.u.s->len) != NULL;
        if (arg.t == V_DICT && v.t == V_STR) return dict_find(arg.u.d, v.u.s->s, v.u.s->len) >= 0;
        jfail(c, t->pos, "'in' test needs a container");
    }
#undef IS
    jfail(c, t->pos, "unknown test '%.*s'", (int)RKM_MIN(l, 64), n);
}

/* test used by selectattr/rejectattr, by name */
static int named_test(jctx *c, const jstr *name, jv v, jv arg, uint32_t pos, jenv *e)
{
    node t = {0};
    t.k = N_TEST;
    t.s = name->s;
    t.len = name->len;
    t.pos = pos;
    /* the argument is already a value: wrap it in a literal-less call by
     * checking the argument-taking tests here */
    const char *n = name->s;
    if (!strcmp(n, "equalto") || !strcmp(n, "eq") || !strcmp(n, "sameas")) return strict_eq(v, arg);
    if (!strcmp(n, "ne")) return !strict_eq(v, arg);
    return run_test(c, &t, v, e);
}

/* ---- filters (the dispatch mirrors @huggingface/jinja's applyFilter) */

static int name_is(const node *n, const char *s) { return n->len == strlen(s) && !memcmp(n->s, s, n->len); }

static jv tojson_filter(jctx *c, jv v, const args *a, uint32_t pos)
{
    json_opts o = {0};
    jv ind = arg_get(a, -1, "indent", NONE);
    if (ind.t != V_INT && ind.t != V_NONE) jfail(c, pos, "if set, indent must be a number");
    if (ind.t == V_INT) {
        if (ind.u.n < 0 || ind.u.n > 64) jfail(c, pos, "tojson: invalid indent");
        o.indent = (int)ind.u.n;
    }
    o.ensure_ascii = bool_arg(c, arg_get(a, -1, "ensure_ascii", v_bool(0)), "ensure_ascii", pos);
    o.sort_keys = bool_arg(c, arg_get(a, -1, "sort_keys", v_bool(0)), "sort_keys", pos);
    jv sep = arg_get(a, -1, "separators", NONE);
    if (sep.t == V_LIST) {
        if (sep.u.l->n != 2 || sep.u.l->v[0].t != V_STR || sep.u.l->v[1].t != V_STR)
            jfail(c, pos, "separators must be a tuple of two strings");
        o.item_sep = sep.u.l->v[0].u.s->s;
        o.key_sep = sep.u.l->v[1].u.s->s;
    } else if (sep.t != V_NONE) {
        jfail(c, pos, "if set, separators must be a tuple of two strings");
    }
    sbuf b = {0};
    to_json(c, &b, v, &o, 0, 1);
    return v_str(sb_str(c, &b));
}

static jv indent_str(jctx *c, const jstr *s, int width, int first, int blank)
{
    sbuf b = {0};
    size_t i = 0;
    int line = 0;
    for (;;) {
        const char *nl = memchr(s->s + i, '\n', s->len - i);
        size_t end = nl ? (size_t)(nl - s->s) : s->len;
        int skip = (!first && line == 0) || (!blank && end == i);
        if (!skip)
            for (int k = 0; k < width; k++) sb_addc(c, &b, ' ');
        sb_add(c, &b, s->s + i, end - i);
        if (!nl) break;
        sb_addc(c, &b, '\n');
        i = end + 1;
        line++;
    }
    return v_str(b.p ? sb_str(c, &b) : str_new(c, "", 0));
}

static jv join_list(jctx *c, const jlist *l, const jstr *sep)
{
    sbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i && sep) sb_add(c, &b, sep->s, sep->len);
        raw_str(c, &b, l->v[i]);
    }
    return v_str(b.p ? sb_str(c, &b) : str_new(c, "", 0));
}

/* Filters Python Jinja2 has and @huggingface/jinja lacks (where it would
 * fail, so adding them changes no reference output). Returns 0 when name is
 * not one of them. */
static int extension_filter(jctx *c, jv v, const node *f, jenv *e, jv *out)
{
    const node *n = f->k == N_CALL ? f->a : f;
    if (n->k != N_IDENT) return 0;
    args a = {0};
    if (name_is(n, "round")) {
        if (f->k == N_CALL) eval_args(c, f->v, f->n, e, &a);
        if (!is_num(v) && v.t != V_BOOL) jfail(c, f->pos, "round needs a number, got %s", type_name(v));
        double x = v.t == V_BOOL ? v.u.b : v.u.n;
        jv prec = arg_get(&a, 0, "precision", v_int(0)), meth = arg_get(&a, 1, "method", UNDEF);
        if (prec.t != V_INT || prec.u.n < 0 || prec.u.n > 15) jfail(c, f->pos, "round: precision must be an integer 0..15");
        double m = pow(10, prec.u.n), y = x * m;
        const char *how = meth.t == V_STR ? meth.u.s->s : "common";
        if (!strcmp(how, "common")) y = nearbyint(y); /* Python round(): ties to even */
        else if (!strcmp(how, "floor")) y = floor(y);
        else if (!strcmp(how, "ceil")) y = ceil(y);
        else jfail(c, f->pos, "round: method must be common, floor or ceil");
        *out = v_float(y / m);
        return 1;
    }
    if (name_is(n, "e") || name_is(n, "escape")) {
        jstr *s = display_str(c, v);
        sbuf b = {0};
        for (size_t i = 0; i < s->len; i++) {
            switch (s->s[i]) {
            case '&': sb_adds(c, &b, "&amp;"); break;
            case '<': sb_adds(c, &b, "&lt;"); break;
            case '>': sb_adds(c, &b, "&gt;"); break;
            case '"': sb_adds(c, &b, "&#34;"); break;
            case '\'': sb_adds(c, &b, "&#39;"); break;
            default: sb_addc(c, &b, s->s[i]);
            }
        }
        *out = v_str(b.p ? sb_str(c, &b) : str_new(c, "", 0));
        return 1;
    }
    if (name_is(n, "count")) {
        if (v.t == V_LIST) *out = v_int((double)v.u.l->n);
        else if (v.t == V_DICT) *out = v_int((double)v.u.d->n);
        else if (v.t == V_STR) *out = v_int((double)u16_len(v.u.s->s, v.u.s->len));
        else jfail(c, f->pos, "count needs a sequence, got %s", type_name(v));
        return 1;
    }
    if (name_is(n, "batch")) {
        if (f->k == N_CALL) eval_args(c, f->v, f->n, e, &a);
        jv cnt = arg_get(&a, 0, "linecount", UNDEF), fill = arg_get(&a, 1, "fill_with", UNDEF);
        if (v.t != V_LIST) jfail(c, f->pos, "batch needs a list, got %s", type_name(v));
        if (cnt.t != V_INT || cnt.u.n < 1) jfail(c, f->pos, "batch: linecount must be a positive integer");
        size_t k = cnt.u.n > (double)MAX_LIST ? MAX_LIST : (size_t)cnt.u.n;
        jv res = v_list(c, 0), cur = UNDEF;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (cur.t == V_UNDEF || cur.u.l->n == k) {
                cur = v_list(c, 0);
                list_push(c, res.u.l, cur);
            }
            list_push(c, cur.u.l, v.u.l->v[i]);
        }
        if (fill.t != V_UNDEF && cur.t == V_LIST)
            while (cur.u.l->n < k) list_push(c, cur.u.l, fill);
        *out = res;
        return 1;
    }
    return 0;
}

static jv apply_filter(jctx *c, jv v, const node *f, jenv *e)
{
    step(c, f);
    jv ext;
    if (extension_filter(c, v, f, e, &ext)) return ext;
    if (f->k == N_IDENT) {
        const node *n = f;
        if (name_is(n, "safe")) return v;
        if (name_is(n, "tojson")) {
            args none = {0};
            return tojson_filter(c, v, &none, f->pos);
        }
        if (v.t == V_LIST) {
            jlist *l = v.u.l;
            if (name_is(n, "list")) return v;
            if (name_is(n, "first")) return l->n ? l->v[0] : UNDEF;
            if (name_is(n, "last")) return l->n ? l->v[l->n - 1] : UNDEF;
            if (name_is(n, "length")) return v_int((double)l->n);
            if (name_is(n, "reverse")) {
                jv out = v_list(c, l->n);
                for (size_t i = l->n; i-- > 0;) list_push(c, out.u.l, l->v[i]);
                return out;
            }
            if (name_is(n, "sort")) {
                jv out = v_list(c, l->n);
                for (size_t i = 0; i < l->n; i++) list_push(c, out.u.l, l->v[i]);
                sort_spec sp = {0, 0, -1, NULL};
                merge_sort(c, out.u.l->v, out.u.l->n, sizeof(jv), cmp_sort, &sp);
                return out;
            }
            if (name_is(n, "join")) return join_list(c, l, NULL);
            if (name_is(n, "string")) return v_str(display_str(c, v));
            if (name_is(n, "unique")) {
                jv out = v_list(c, 0);
                for (size_t i = 0; i < l->n; i++) {
                    int seen = 0;
                    for (size_t j = 0; j < out.u.l->n && !seen; j++) seen = strict_eq(out.u.l->v[j], l->v[i]) || (is_num(l->v[i]) && isnan(l->v[i].u.n) && is_num(out.u.l->v[j]) && isnan(out.u.l->v[j].u.n));
                    if (!seen) list_push(c, out.u.l, l->v[i]);
                    step(c, f);
                }
                return out;
            }
            jfail(c, f->pos, "unknown ArrayValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        if (v.t == V_STR) {
            jstr *s = v.u.s;
            if (name_is(n, "length")) return v_int((double)u16_len(s->s, s->len));
            if (name_is(n, "upper")) return v_str(str_case(c, s->s, s->len, 1));
            if (name_is(n, "lower")) return v_str(str_case(c, s->s, s->len, 0));
            if (name_is(n, "title") || name_is(n, "capitalize")) {
                args none = {0};
                return call_str_method(c, name_is(n, "title") ? "title" : "capitalize", s, &none, f->pos);
            }
            if (name_is(n, "trim")) return str_strip(c, s, 1, 1);
            if (name_is(n, "indent")) return indent_str(c, s, 4, 0, 0);
            if (name_is(n, "join") || name_is(n, "string")) return v;
            if (name_is(n, "int")) {
                double x = js_parse_int(s->s, s->len);
                return v_int(isnan(x) ? 0 : x);
            }
            if (name_is(n, "float")) {
                double x = js_parse_float(s->s, s->len);
                return v_float(isnan(x) ? 0 : x);
            }
            jfail(c, f->pos, "unknown StringValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        if (is_num(v)) {
            if (name_is(n, "abs")) { jv r = v; r.u.n = fabs(v.u.n); return r; }
            if (name_is(n, "int")) return v_int(floor(v.u.n));
            if (name_is(n, "float")) return v_float(v.u.n);
            if (name_is(n, "string")) return v_str(display_str(c, v));
            jfail(c, f->pos, "unknown NumericValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        if (v.t == V_DICT) {
            if (name_is(n, "items")) return dict_items(c, v.u.d);
            if (name_is(n, "length")) return v_int((double)v.u.d->n);
            jv m = mk_method(c, v, dict_methods, n->s, n->len);
            if (m.t == V_FUNC) {
                args none = {0};
                return call_dict_method(c, m.u.f->method, v.u.d, &none, f->pos);
            }
            jfail(c, f->pos, "unknown ObjectValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        if (v.t == V_BOOL) {
            if (name_is(n, "bool")) return v;
            if (name_is(n, "int")) return v_int(v.u.b);
            if (name_is(n, "float")) return v_float(v.u.b);
            if (name_is(n, "string")) return v_str(str_cstr(c, v.u.b ? "true" : "false"));
            jfail(c, f->pos, "unknown BooleanValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        jfail(c, f->pos, "cannot apply filter \"%.*s\" to type: %s", (int)RKM_MIN(n->len, 64), n->s, type_name(v));
    }
    if (f->k != N_CALL || f->a->k != N_IDENT) jfail(c, f->pos, "unknown filter");
    const node *n = f->a;
    args a;
    if (name_is(n, "tojson")) {
        eval_args(c, f->v, f->n, e, &a);
        return tojson_filter(c, v, &a, f->pos);
    }
    if (name_is(n, "join")) {
        if (v.t != V_STR && v.t != V_LIST) jfail(c, f->pos, "cannot apply filter \"join\" to type: %s", type_name(v));
        eval_args(c, f->v, f->n, e, &a);
        jv sep = arg_get(&a, 0, "separator", UNDEF);
        if (sep.t == V_UNDEF) sep = v_str(str_new(c, "", 0));
        if (sep.t != V_STR) jfail(c, f->pos, "separator must be a string");
        if (v.t == V_LIST) return join_list(c, v.u.l, sep.u.s);
        size_t *o;
        size_t k = str_cps(c, v.u.s, &o);
        sbuf b = {0};
        for (size_t i = 0; i < k; i++) {
            if (i) sb_add(c, &b, sep.u.s->s, sep.u.s->len);
            sb_add(c, &b, v.u.s->s + o[i], o[i + 1] - o[i]);
        }
        return v_str(b.p ? sb_str(c, &b) : str_new(c, "", 0));
    }
    if (name_is(n, "int") || name_is(n, "float")) {
        int is_int = name_is(n, "int");
        eval_args(c, f->v, f->n, e, &a);
        jv def = arg_get(&a, 0, "default", is_int ? v_int(0) : v_float(0));
        if (v.t == V_STR) {
            double x = is_int ? js_parse_int(v.u.s->s, v.u.s->len) : js_parse_float(v.u.s->s, v.u.s->len);
            return isnan(x) ? def : is_int ? v_int(x) : v_float(x);
        }
        if (is_num(v)) return v;
        if (v.t == V_BOOL) return is_int ? v_int(v.u.b) : v_float(v.u.b);
        jfail(c, f->pos, "cannot apply filter \"%s\" to type: %s", is_int ? "int" : "float", type_name(v));
    }
    if (name_is(n, "default") || name_is(n, "d")) {
        eval_args(c, f->v, f->n, e, &a);
        jv def = a.n > 0 ? a.v[0] : v_str(str_new(c, "", 0));
        int boolean = bool_arg(c, arg_get(&a, 1, "boolean", v_bool(0)), "`default` filter flag", f->pos);
        if (v.t == V_UNDEF || (boolean && !truthy(v))) return def;
        return v;
    }
    if (v.t == V_LIST) {
        jlist *l = v.u.l;
        if (name_is(n, "sort")) {
            eval_args(c, f->v, f->n, e, &a);
            sort_spec sp = {0};
            sp.index = -1;
            sp.reverse = bool_arg(c, arg_get(&a, 0, "reverse", v_bool(0)), "reverse", f->pos);
            sp.case_sensitive = bool_arg(c, arg_get(&a, 1, "case_sensitive", v_bool(0)), "case_sensitive", f->pos);
            jv attr = arg_get(&a, 2, "attribute", NONE);
            if (attr.t == V_STR) sp.attr = attr.u.s;
            else if (attr.t == V_INT) sp.attr = display_str(c, attr);
            else if (attr.t != V_NONE) jfail(c, f->pos, "attribute must be a string, integer, or null");
            jv out = v_list(c, l->n);
            for (size_t i = 0; i < l->n; i++) list_push(c, out.u.l, l->v[i]);
            merge_sort(c, out.u.l->v, out.u.l->n, sizeof(jv), cmp_sort, &sp);
            return out;
        }
        if (name_is(n, "selectattr") || name_is(n, "rejectattr")) {
            int sel = name_is(n, "selectattr");
            for (size_t i = 0; i < l->n; i++)
                if (l->v[i].t != V_DICT && l->v[i].t != V_NS)
                    jfail(c, f->pos, "`%s` can only be applied to array of objects", sel ? "selectattr" : "rejectattr");
            for (int i = 0; i < f->n; i++)
                if (f->v[i]->k != N_STR) jfail(c, f->pos, "arguments of `%s` must be strings", sel ? "selectattr" : "rejectattr");
            if (f->n < 1) jfail(c, f->pos, "`%s` needs an attribute name", sel ? "selectattr" : "rejectattr");
            jstr *attr = str_new(c, f->v[0]->s, f->v[0]->len);
            jstr *test = f->n > 1 ? str_new(c, f->v[1]->s, f->v[1]->len) : NULL;
            jv arg = f->n > 2 ? s_new(c, f->v[2]->s, f->v[2]->len) : UNDEF;
            jv out = v_list(c, 0);
            for (size_t i = 0; i < l->n; i++) {
                step(c, f);
                jv x;
                int r = 0;
                if (dict_get(l->v[i].u.d, attr->s, attr->len, &x)) r = test ? named_test(c, test, x, arg, f->pos, e) : truthy(x);
                if (r == sel) list_push(c, out.u.l, l->v[i]);
            }
            return out;
        }
        if (name_is(n, "map")) {
            eval_args(c, f->v, f->n, e, &a);
            jv attr;
            if (!dict_get(&a.kw, "attribute", 9, &attr))
                jfail(c, f->pos, "`map` expressions without `attribute` set are not currently supported");
            if (attr.t != V_STR) jfail(c, f->pos, "attribute must be a string");
            jv def;
            int has_def = dict_get(&a.kw, "default", 7, &def);
            jv out = v_list(c, l->n);
            for (size_t i = 0; i < l->n; i++) {
                if (l->v[i].t != V_DICT && l->v[i].t != V_NS) jfail(c, f->pos, "items in map must be an object");
                jv x = get_attr_path(c, l->v[i], attr.u.s);
                list_push(c, out.u.l, x.t == V_UNDEF && has_def ? def : x);
            }
            return out;
        }
        jfail(c, f->pos, "unknown ArrayValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
    }
    if (v.t == V_STR) {
        if (name_is(n, "indent")) {
            eval_args(c, f->v, f->n, e, &a);
            jv w = arg_get(&a, 0, "width", v_int(4));
            if (w.t != V_INT) jfail(c, f->pos, "width must be a number");
            if (w.u.n < 0 || w.u.n > 1024) jfail(c, f->pos, "indent: width out of range");
            return indent_str(c, v.u.s, (int)w.u.n, truthy(arg_get(&a, 1, "first", v_bool(0))),
                              truthy(arg_get(&a, 2, "blank", v_bool(0))));
        }
        if (name_is(n, "replace")) {
            eval_args(c, f->v, f->n, e, &a);
            return call_str_method(c, "replace", v.u.s, &a, f->pos);
        }
        jfail(c, f->pos, "unknown StringValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
    }
    if (v.t == V_DICT) {
        jv m = mk_method(c, v, dict_methods, n->s, n->len);
        if (m.t == V_FUNC) {
            eval_args(c, f->v, f->n, e, &a);
            return call_dict_method(c, m.u.f->method, v.u.d, &a, f->pos);
        }
        jfail(c, f->pos, "unknown ObjectValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
    }
    jfail(c, f->pos, "cannot apply filter \"%.*s\" to type: %s", (int)RKM_MIN(n->len, 64), n->s, type_name(v));
}

/* ---- operators */

static jv concat_raw(jctx *c, jv l, jv r)
{
    sbuf b = {0};
    raw_str(c, &b, l);
    raw_str(c, &b, r);
    return v_str(b.p ? sb_str(c, &b) : str_new(c, "", 0));
}

static jv eval_binary(jctx *c, const node *n, jenv *e)
{
    jv l = eval(c, n->a, e);
    if (n->op == OP_AND) return truthy(l) ? eval(c, n->b, e) : l;
    if (n->op == OP_OR) return truthy(l) ? l : eval(c, n->b, e);
    jv r = eval(c, n->b, e);
    int op = n->op;
    if (op == OP_EQ) return v_bool(loose_eq(c, l, r, 0));
    if (op == OP_NE) return v_bool(!loose_eq(c, l, r, 0));
    if (l.t == V_UNDEF || r.t == V_UNDEF) {
        if (r.t == V_UNDEF && (op == OP_IN || op == OP_NOTIN)) return v_bool(op == OP_NOTIN);
        jfail(c, n->pos, "cannot perform operation on undefined values");
    }
    if (l.t == V_NONE || r.t == V_NONE) jfail(c, n->pos, "cannot perform operation on null values");
    if (op == OP_CONCAT) return concat_raw(c, l, r);
    if (op == OP_POW && (is_num(l) || l.t == V_BOOL) && (is_num(r) || r.t == V_BOOL)) {
        double a = l.t == V_BOOL ? l.u.b : l.u.n, b = r.t == V_BOOL ? r.u.b : r.u.n;
        if (a == 0 && b < 0) jfail(c, n->pos, "0.0 cannot be raised to a negative power");
        double res = pow(a, b);
        if (!isfinite(res) || ((a == 1 || a == -1) && isinf(b))) jfail(c, n->pos, "exponentiation result is not a finite real number");
        return l.t == V_FLOAT || r.t == V_FLOAT || b < 0 ? v_float(res) : v_int(res);
    }
    if (is_num(l) && is_num(r)) {
        double a = l.u.n, b = r.u.n;
        int fl = l.t == V_FLOAT || r.t == V_FLOAT;
        switch (op) {
        case OP_ADD: return fl ? v_float(a + b) : v_int(a + b);
        case OP_SUB: return fl ? v_float(a - b) : v_int(a - b);
        case OP_MUL: return fl ? v_float(a * b) : v_int(a * b);
        case OP_DIV: return v_float(a / b);
        case OP_FLOORDIV: return fl ? v_float(floor(a / b)) : v_int(floor(a / b));
        case OP_MOD: return fl ? v_float(fmod(a, b)) : v_int(fmod(a, b));
        case OP_LT: return v_bool(a < b);
        case OP_GT: return v_bool(a > b);
        case OP_GE: return v_bool(a >= b);
        case OP_LE: return v_bool(a <= b);
        default: break;
        }
    } else if (l.t == V_LIST && r.t == V_LIST) {
        if (op == OP_ADD) {
            jv out = v_list(c, l.u.l->n + r.u.l->n);
            for (size_t i = 0; i < l.u.l->n; i++) list_push(c, out.u.l, l.u.l->v[i]);
            for (size_t i = 0; i < r.u.l->n; i++) list_push(c, out.u.l, r.u.l->v[i]);
            return out;
        }
    } else if (r.t == V_LIST) {
        if (op == OP_IN || op == OP_NOTIN) {
            int found = 0;
            for (size_t i = 0; i < r.u.l->n && !found; i++) found = strict_eq(r.u.l->v[i], l);
            return v_bool(op == OP_IN ? found : !found);
        }
    }
    if ((l.t == V_STR || r.t == V_STR) && op == OP_ADD) return concat_raw(c, l, r);
    if (l.t == V_STR && r.t == V_STR && (op == OP_IN || op == OP_NOTIN)) {
        int found = mem_find(r.u.s->s, r.u.s->len, l.u.s->s, l.u.s->len) != NULL;
        return v_bool(op == OP_IN ? found : !found);
    }
    if (l.t == V_STR && r.t == V_DICT && (op == OP_IN || op == OP_NOTIN)) {
        int found = dict_find(r.u.d, l.u.s->s, l.u.s->len) >= 0;
        return v_bool(op == OP_IN ? found : !found);
    }
    static const char *opn[] = {"", "and", "or", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "+", "-", "~", "*",
                                "/", "//", "%", "**"};
    jfail(c, n->pos, "unknown operator \"%s\" between %s and %s", op < (int)RKM_ARRAY_LEN(opn) ? opn[op] : "?",
          type_name(l), type_name(r));
}

/* ---- expressions */

static jv eval_node(jctx *c, const node *n, jenv *e)
{
    switch (n->k) {
    case N_TEXT: case N_STR: return s_new(c, n->s, n->len);
    case N_INT: return v_int(n->num);
    case N_FLOAT: return v_float(n->num);
    case N_COMMENT: return NONE;
    case N_IDENT: return env_get(e, n->s, n->len);
    case N_ARRAY: case N_TUPLE: {
        jv out = v_list(c, (size_t)n->n);
        for (int i = 0; i < n->n; i++) list_push(c, out.u.l, eval(c, n->v[i], e));
        out.u.l->tuple = n->k == N_TUPLE;
        return out;
    }
    case N_OBJECT: {
        jv out = v_dict(c, V_DICT);
        for (int i = 0; i < n->n; i++) {
            jv k = eval(c, n->v[i], e);
            if (k.t != V_STR) jfail(c, n->v[i]->pos, "object keys must be strings: got %s", type_name(k));
            dict_set(c, out.u.d, k.u.s, eval(c, n->v2[i], e));
        }
        return out;
    }
    case N_MEMBER: {
        jv obj = eval(c, n->a, e), prop;
        if (n->op) {
            if (n->b->k == N_SLICE) return eval_slice(c, obj, n->b, e);
            prop = eval(c, n->b, e);
        } else if (n->b->k == N_INT) {
            prop = v_int(n->b->num);
        } else {
            prop = s_new(c, n->b->s, n->b->len);
        }
        return member_get(c, obj, prop, n->pos);
    }
    case N_CALL: {
        args a;
        eval_args(c, n->v, n->n, e, &a);
        jv fn = eval(c, n->a, e);
        return call_value(c, fn, &a, e, n->pos);
    }
    case N_UNARY: {
        jv x = eval(c, n->a, e);
        if (n->op == OP_NOT) return v_bool(!truthy(x));
        if (is_num(x) || x.t == V_BOOL) {
            double val = x.t == V_BOOL ? x.u.b : x.u.n;
            double r = n->op == OP_NEG ? -val : val;
            return x.t == V_FLOAT ? v_float(r) : v_int(r);
        }
        jfail(c, n->pos, "unknown operator \"%s\" for %s", n->op == OP_NEG ? "-" : "+", type_name(x));
    }
    case N_BINARY: return eval_binary(c, n, e);
    case N_FILTER: return apply_filter(c, eval(c, n->a, e), n->b, e);
    case N_TEST: {
        jv x = eval(c, n->a, e);
        int r = run_test(c, n, x, e);
        return v_bool(n->op ? !r : r);
    }
    case N_SELECT: {
        jv t = eval(c, n->b, e);
        if (!truthy(t)) return UNDEF;
        return eval(c, n->a, e);
    }
    case N_TERNARY: return truthy(eval(c, n->a, e)) ? eval(c, n->b, e) : eval(c, n->c, e);
    case N_SLICE: jfail(c, n->pos, "unexpected slice");
    case N_KWARG: jfail(c, n->pos, "unexpected keyword argument");
    default: jfail(c, n->pos, "unexpected statement in an expression");
    }
}

static jv eval(jctx *c, const node *n, jenv *e)
{
    step(c, n);
    if (++c->depth > c->max_depth) jfail(c, n->pos, "template nested too deeply");
    jv r = eval_node(c, n, e);
    c->depth--;
    return r;
}

/* ---- statements */

enum { CTL_NONE, CTL_BREAK, CTL_CONTINUE };

static void assign_tuple(jctx *c, const node *target, jv v, jenv *e, const char *what)
{
    if (v.t != V_LIST) jfail(c, target->pos, "cannot unpack non-iterable type%s: %s", what, type_name(v));
    if (v.u.l->n != (size_t)target->n)
        jfail(c, target->pos, "too %s items to unpack%s", (size_t)target->n > v.u.l->n ? "few" : "many", what);
    for (int i = 0; i < target->n; i++) {
        if (target->v[i]->k != N_IDENT) jfail(c, target->v[i]->pos, "cannot unpack to non-identifier");
        env_set(c, e, target->v[i]->s, target->v[i]->len, v.u.l->v[i]);
    }
}

static int exec_for(jctx *c, const node *n, jenv *e, sbuf *out)
{
    jenv *scope = env_new(c, e);
    const node *test = NULL;
    jv it;
    if (n->b->k == N_SELECT) {
        it = eval(c, n->b->a, scope);
        test = n->b->b;
    } else {
        it = eval(c, n->b, scope);
    }
    if (it.t == V_DICT) {
        jv keys = v_list(c, it.u.d->n);
        for (size_t i = 0; i < it.u.d->n; i++) list_push(c, keys.u.l, v_str(it.u.d->k[i]));
        it = keys;
    }
    if (it.t != V_LIST) jfail(c, n->b->pos, "expected iterable or object type in for loop: got %s", type_name(it));
    jlist *src = it.u.l;
    jv items = v_list(c, src->n);
    for (size_t i = 0; i < src->n; i++) {
        jv cur = src->v[i];
        if (n->a->k == N_TUPLE && (cur.t != V_LIST || cur.u.l->n != (size_t)n->a->n))
            assign_tuple(c, n->a, cur, scope, ""); /* fails with the right message */
        if (test) {
            jenv *ls = env_new(c, scope);
            if (n->a->k == N_IDENT) env_set(c, ls, n->a->s, n->a->len, cur);
            else assign_tuple(c, n->a, cur, ls, "");
            if (!truthy(eval(c, test, ls))) continue;
        }
        list_push(c, items.u.l, cur);
    }
    jlist *l = items.u.l;
    int none = 1;
    for (size_t i = 0; i < l->n; i++) {
        step(c, n);
        static const char *const lk[9] = {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                                          "previtem", "nextitem"};
        if (!c->loop_keys[0])
            for (int k = 0; k < 9; k++) c->loop_keys[k] = str_cstr(c, lk[k]);
        double len = (double)l->n, k = (double)i;
        jv vals[9] = {v_int(k + 1), v_int(k), v_int(len - k), v_int(len - k - 1), v_bool(i == 0), v_bool(i == l->n - 1),
                      v_int(len), i > 0 ? l->v[i - 1] : UNDEF, i + 1 < l->n ? l->v[i + 1] : UNDEF};
        jv loop = v_dict(c, V_DICT); /* a new object per iteration, as in the reference */
        jdict *d = loop.u.d;
        d->cap = d->n = 9;
        d->k = c->loop_keys;
        d->v = ar_alloc(c, sizeof vals);
        memcpy(d->v, vals, sizeof vals);
        env_set(c, scope, "loop", 4, loop);
        if (n->a->k == N_IDENT) env_set(c, scope, n->a->s, n->a->len, l->v[i]);
        else assign_tuple(c, n->a, l->v[i], scope, "");
        size_t mark = out->len;
        int ctl = exec_block(c, n->v, n->n, scope, out);
        if (ctl != CTL_NONE) { /* the interrupted iteration's output is dropped */
            out->len = mark;
            if (out->p) out->p[mark] = 0;
            if (ctl == CTL_BREAK) break;
            continue;
        }
        none = 0;
    }
    if (none) return exec_block(c, n->v2, n->n2, scope, out);
    return CTL_NONE;
}

static int exec_block(jctx *c, node *const *v, int n, jenv *e, sbuf *out)
{
    if (++c->depth > c->max_depth) jfail(c, n ? v[0]->pos : NOPOS, "template nested too deeply");
    for (int i = 0; i < n; i++) {
        const node *s = v[i];
        int ctl = CTL_NONE;
        step(c, s);
        switch (s->k) {
        case N_TEXT: sb_add(c, out, s->s, s->len); break;
        case N_COMMENT: break;
        case N_BREAK: ctl = CTL_BREAK; break;
        case N_CONTINUE: ctl = CTL_CONTINUE; break;
        case N_SET: {
            jv rhs;
            if (s->b) {
                rhs = eval(c, s->b, e);
            } else {
                sbuf body = {0};
                ctl = exec_block(c, s->v, s->n, e, &body);
                if (ctl) break;
                rhs = v_str(body.p ? sb_str(c, &body) : str_new(c, "", 0));
            }
            const node *t = s->a;
            if (t->k == N_IDENT) {
                env_set(c, e, t->s, t->len, rhs);
            } else if (t->k == N_TUPLE) {
                assign_tuple(c, t, rhs, e, " in set");
            } else if (t->k == N_MEMBER) {
                jv obj = eval(c, t->a, e);
                if (obj.t != V_NS) jfail(c, t->pos, "cannot assign attribute on non-namespace object");
                if (t->op || t->b->k != N_IDENT) jfail(c, t->pos, "cannot assign to member with non-identifier property");
                dict_set(c, obj.u.d, str_new(c, t->b->s, t->b->len), rhs);
            } else {
                jfail(c, t->pos, "invalid left-hand side of an assignment");
            }
            break;
        }
        case N_IF: {
            jv t = eval(c, s->a, e);
            ctl = truthy(t) ? exec_block(c, s->v, s->n, e, out) : exec_block(c, s->v2, s->n2, e, out);
            break;
        }
        case N_FOR: ctl = exec_for(c, s, e, out); break;
        case N_MACRO: {
            jv f = {V_FUNC, {0}};
            f.u.f = ar_alloc(c, sizeof(jfunc));
            memset(f.u.f, 0, sizeof(jfunc));
            f.u.f->kind = F_MACRO;
            f.u.f->def = s;
            env_set(c, e, s->s, s->len, f);
            break;
        }
        case N_CALLBLOCK: {
            jv caller = {V_FUNC, {0}};
            caller.u.f = ar_alloc(c, sizeof(jfunc));
            memset(caller.u.f, 0, sizeof(jfunc));
            caller.u.f->kind = F_CALLER;
            caller.u.f->def = s;
            caller.u.f->env = e;
            args a;
            eval_args(c, s->a->v, s->a->n, e, &a);
            jv fn = eval(c, s->a->a, e);
            jenv *ne = env_new(c, e);
            env_set(c, ne, "caller", 6, caller);
            jv r = call_value(c, fn, &a, ne, s->pos);
            if (r.t != V_NONE && r.t != V_UNDEF) display(c, out, r);
            break;
        }
        case N_FILTERBLOCK: {
            sbuf body = {0};
            ctl = exec_block(c, s->v, s->n, e, &body);
            if (ctl) break;
            jv r = apply_filter(c, v_str(body.p ? sb_str(c, &body) : str_new(c, "", 0)), s->b, e);
            if (r.t != V_NONE && r.t != V_UNDEF) display(c, out, r);
            break;
        }
        default: {
            jv r = eval(c, s, e);
            if (r.t != V_NONE && r.t != V_UNDEF) display(c, out, r);
        }
        }
        if (ctl != CTL_NONE) {
            c->depth--;
            return ctl;
        }
    }
    c->depth--;
    return CTL_NONE;
}

/* ----------------------------------------------------------------- API */

struct rkm_jinja {
    jctx c;     /* owns the arena with tokens and nodes */
    node **body;
    int n;
};

static void ctx_init(jctx *c, size_t limit)
{
    memset(c, 0, sizeof *c);
    c->limit = limit;
}

static uint32_t *line_table(jctx *c, const char *src, size_t n, size_t *n_lines)
{
    size_t k = 1;
    for (size_t i = 0; i < n; i++) k += src[i] == '\n';
    uint32_t *l = ar_alloc(c, k * sizeof(uint32_t));
    l[0] = 0;
    k = 1;
    for (size_t i = 0; i < n; i++)
        if (src[i] == '\n') l[k++] = (uint32_t)(i + 1);
    *n_lines = k;
    return l;
}

rkm_jinja *rkm_jinja_parse(const char *src_in, size_t len_in)
{
    /* volatile: live across setjmp */
    const char *volatile src = src_in;
    volatile size_t len = len_in;
    if (!src) { rkm_err(RKM_EINVAL, "template: no source"); return NULL; }
    if (len > (size_t)1 << 30) { rkm_err(RKM_EINVAL, "template: source too large (%zu bytes)", len); return NULL; }
    rkm_jinja *t = calloc(1, sizeof *t);
    if (!t) { rkm_err(RKM_ENOMEM, "template: out of memory"); return NULL; }
    size_t clean_n = 0;
    char *volatile clean = u8_sanitize_alloc(src, len, &clean_n);
    if (clean) { src = clean; len = clean_n; }
    jctx *c = &t->c;
    ctx_init(c, (size_t)512 * len + ((size_t)64 << 20)); /* tokens + nodes: ~300 B per source byte at worst */
    if (setjmp(c->jb)) {
        rkm_err(c->code ? c->code : RKM_EFORMAT, "%s", c->msg);
        free(clean);
        ctx_free(c);
        free(t);
        return NULL;
    }
    c->lines = line_table(c, src, len, &c->n_lines);
    size_t n_tok;
    tok *toks = lex(c, src, len, &n_tok);
    parser P = {c, toks, n_tok, 0};
    nvec body = {0};
    while (P.i < P.n) nv_push(c, &body, parse_any(&P));
    t->body = body.v;
    t->n = body.n;
    free(clean);
    return t;
}

void rkm_jinja_free(rkm_jinja *t)
{
    if (!t) return;
    ctx_free(&t->c);
    free(t);
}

static jv from_json(jctx *c, const cJSON *j, int depth);

/* JavaScript orders an object's integer-like keys ("0", "7") first,
 * ascending, then the others in insertion order. */
static int array_index_key(const char *k, double *out)
{
    if (!k[0] || (k[0] == '0' && k[1])) return !strcmp(k, "0") ? (*out = 0, 1) : 0;
    double v = 0;
    for (const char *p = k; *p; p++) {
        if (!is_digit(*p)) return 0;
        v = v * 10 + (*p - '0');
        if (v >= 4294967295.0) return 0;
    }
    *out = v;
    return 1;
}

static jstr *json_key(jctx *c, const char *k)
{
    size_t n = strlen(k), cn;
    char *clean = u8_sanitize_alloc(k, n, &cn);
    if (!clean) return str_new(c, k, n);
    jstr *s = str_new(c, clean, cn);
    free(clean);
    return s;
}

static jv from_json(jctx *c, const cJSON *j, int depth)
{
    if (depth > 200) jfail(c, NOPOS, "variables nested too deeply");
    if (cJSON_IsNull(j) || !j) return NONE;
    if (cJSON_IsBool(j)) return v_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double x = j->valuedouble;
        return isfinite(x) && floor(x) == x ? v_int(x) : v_float(x);
    }
    if (cJSON_IsString(j)) {
        const char *s = j->valuestring ? j->valuestring : "";
        return v_str(json_key(c, s));
    }
    if (cJSON_IsArray(j)) {
        jv l = v_list(c, 0);
        for (const cJSON *x = j->child; x; x = x->next) list_push(c, l.u.l, from_json(c, x, depth + 1));
        return l;
    }
    if (cJSON_IsObject(j)) {
        jv d = v_dict(c, V_DICT);
        size_t n = 0;
        for (const cJSON *x = j->child; x; x = x->next) n++;
        const cJSON **idx = ar_alloc(c, (n + 1) * sizeof(cJSON *));
        double *num = ar_alloc(c, (n + 1) * sizeof(double));
        size_t k = 0;
        for (const cJSON *x = j->child; x; x = x->next) /* integer keys, ascending (insertion sort) */
            if (x->string && array_index_key(x->string, &num[k])) {
                size_t p = k;
                double v = num[k];
                while (p > 0 && num[p - 1] > v) { num[p] = num[p - 1]; idx[p] = idx[p - 1]; p--; }
                num[p] = v;
                idx[p] = x;
                k++;
            }
        for (const cJSON *x = j->child; x; x = x->next)
            if (!x->string || !array_index_key(x->string, &num[n])) idx[k++] = x;
        for (size_t i = 0; i < k; i++)
            dict_set(c, d.u.d, json_key(c, idx[i]->string ? idx[i]->string : ""), from_json(c, idx[i], depth + 1));
        return d;
    }
    return UNDEF;
}

char *rkm_jinja_render(const rkm_jinja *t, const cJSON *vars, const rkm_jinja_limits *limits, size_t *out_len)
{
    if (!t) { rkm_err(RKM_EINVAL, "template: NULL"); return NULL; }
    jctx *c = malloc(sizeof(jctx)); /* jmp_buf is large; keep it off small stacks */
    if (!c) { rkm_err(RKM_ENOMEM, "template: out of memory"); return NULL; }
    ctx_init(c, limits && limits->max_bytes ? limits->max_bytes : (size_t)512 << 20);
    c->max_steps = limits && limits->max_steps ? limits->max_steps : 50000000;
    c->max_depth = limits && limits->max_depth ? limits->max_depth : 500;
    c->lines = t->c.lines;
    c->n_lines = t->c.n_lines;
    if (setjmp(c->jb)) {
        rkm_err(c->code ? c->code : RKM_EFORMAT, "%s", c->msg);
        ctx_free(c);
        free(c);
        return NULL;
    }
    jenv *g = env_new(c, NULL);
    static const struct { const char *name; int kind; } fns[] = {
        {"raise_exception", F_RAISE}, {"range", F_RANGE}, {"strftime_now", F_STRFTIME}, {"namespace", F_NAMESPACE}};
    env_set(c, g, "false", 5, v_bool(0));
    env_set(c, g, "true", 4, v_bool(1));
    env_set(c, g, "none", 4, NONE);
    env_set(c, g, "False", 5, v_bool(0));
    env_set(c, g, "True", 4, v_bool(1));
    env_set(c, g, "None", 4, NONE);
    for (size_t i = 0; i < RKM_ARRAY_LEN(fns); i++) {
        jv f = {V_FUNC, {0}};
        f.u.f = ar_alloc(c, sizeof(jfunc));
        memset(f.u.f, 0, sizeof(jfunc));
        f.u.f->kind = fns[i].kind;
        env_set(c, g, fns[i].name, strlen(fns[i].name), f);
    }
    if (vars && cJSON_IsObject(vars)) {
        jv d = from_json(c, vars, 0);
        for (size_t i = 0; i < d.u.d->n; i++) {
            if (dict_find(&g->vars, d.u.d->k[i]->s, d.u.d->k[i]->len) >= 0)
                jfail(c, NOPOS, "variable already declared: %s", d.u.d->k[i]->s);
            dict_set(c, &g->vars, d.u.d->k[i], d.u.d->v[i]);
        }
    } else if (vars && !cJSON_IsNull(vars)) {
        c->code = RKM_EINVAL;
        jfail(c, NOPOS, "variables must be a JSON object");
    }
    sbuf out = {0};
    /* the top level is evaluated like one block */
    if (exec_block(c, t->body, t->n, g, &out) != CTL_NONE) jfail(c, NOPOS, "break/continue outside of a loop");
    char *res = malloc(out.len + 1);
    if (!res) {
        c->code = RKM_ENOMEM;
        jfail(c, NOPOS, "out of memory");
    }
    if (out.len) memcpy(res, out.p, out.len);
    res[out.len] = 0;
    if (out_len) *out_len = out.len;
    ctx_free(c);
    free(c);
    return res;
}
