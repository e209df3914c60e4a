/*
 * jinja_lex.c - the template lexer: Hugging Face's preprocessing
 * (trim_blocks, lstrip_blocks, one trailing newline dropped, {% generation
 * %} tags removed) keeping a map from every byte to its offset in the
 * source for line:col errors, then @huggingface/jinja's tokenizer (string
 * escapes, signed number literals, whitespace control with '-').
 *
 * Threads: runs inside one parse. Ownership: tokens and their text live in
 * the parse context's arena.
 */
#include "text/jinja_impl.h"

/* ------------------------------------------------------------- lexer */

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
    t->p = rkm_jinja__alloc(c, cap + 1);
    t->m = rkm_jinja__alloc(c, (cap + 1) * sizeof(uint32_t));
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
        int l = rkm_jinja__u8_dec(t->p + j, t->n - j, &cp);
        if (!rkm_jinja__js_space(cp)) break;
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
                size_t p = rkm_jinja__u8_prev(b.p, b.n);
                if (p < floor_out) break;
                uint32_t cp;
                rkm_jinja__u8_dec(b.p + p, b.n - p, &cp);
                if (!rkm_jinja__js_space(cp)) break;
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
        tok *nt = rkm_jinja__alloc(L->c, cap * sizeof(tok));
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
    t->len = rkm_jinja__js_trim_end(t->s, t->len);
    if (!t->len) L->n--;
}

static void lx_skip_ws(lexer *L) { L->i += ws_run_at(&L->t, L->i); }

enum { CW_WS, CW_DIGIT, CW_WORD, CW_STR };


/* @huggingface/jinja's consumeWhile: backslash escapes, and an error when
 * the run reaches the end of the input. */
static jstr *lx_consume(lexer *L, int kind, char quote)
{
    rkm_buf *b = rkm_jinja__buf_new(L->c);
    const mtext *t = &L->t;
    uint32_t pending_hi = 0;
    for (;;) {
        if (L->i >= t->n) {
            if (kind == CW_STR) rkm_jinja__fail(L->c, lx_pos(L, L->i), "unexpected end of input in a string");
            break;
        }
        char ch = t->p[L->i];
        int ok;
        if (kind == CW_WS) {
            uint32_t cp;
            rkm_jinja__u8_dec(t->p + L->i, t->n - L->i, &cp);
            ok = rkm_jinja__js_space(cp);
        } else if (kind == CW_DIGIT) ok = is_digit(ch);
        else if (kind == CW_WORD) ok = is_word(ch);
        else ok = ch != quote;
        if (!ok) break;
        if (ch == '\\') {
            if (++L->i >= t->n) rkm_jinja__fail(L->c, lx_pos(L, L->i), "unexpected end of input");
            char e = t->p[L->i++];
            if (e == 'x' || e == 'u') {
                int len = e == 'x' ? 2 : 4;
                uint32_t v = 0;
                for (int k = 0; k < len; k++) {
                    int h = L->i + k < t->n ? rkm_hexval(t->p[L->i + k]) : -1;
                    if (h < 0) rkm_jinja__fail(L->c, lx_pos(L, L->i), "invalid hexadecimal escape sequence");
                    v = v * 16 + (uint32_t)h;
                }
                L->i += len;
                char enc[4];
                if (v >= 0xD800 && v < 0xDC00) {
                    if (pending_hi) rkm_jinja__buf_add(L->c, b, "\xEF\xBF\xBD", 3);
                    pending_hi = v;
                    continue;
                }
                if (v >= 0xDC00 && v < 0xE000 && pending_hi) {
                    v = 0x10000 + ((pending_hi - 0xD800) << 10) + (v - 0xDC00);
                    pending_hi = 0;
                }
                if (pending_hi) { rkm_jinja__buf_add(L->c, b, "\xEF\xBF\xBD", 3); pending_hi = 0; }
                rkm_jinja__buf_add(L->c, b, enc, rkm_jinja__u8_enc(v, enc));
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
            default: rkm_jinja__fail(L->c, lx_pos(L, L->i - 1), "unexpected escaped character '%c'", e);
            }
            if (pending_hi) { rkm_jinja__buf_add(L->c, b, "\xEF\xBF\xBD", 3); pending_hi = 0; }
            rkm_jinja__buf_add(L->c, b, rep, 1);
            continue;
        }
        if (pending_hi) { rkm_jinja__buf_add(L->c, b, "\xEF\xBF\xBD", 3); pending_hi = 0; }
        uint32_t cp;
        int l = rkm_jinja__u8_dec(t->p + L->i, t->n - L->i, &cp);
        rkm_jinja__buf_add(L->c, b, t->p + L->i, (size_t)l);
        L->i += (size_t)l;
        if (L->i >= t->n) rkm_jinja__fail(L->c, lx_pos(L, L->i), "unexpected end of input");
    }
    if (pending_hi) rkm_jinja__buf_add(L->c, b, "\xEF\xBF\xBD", 3);
    return rkm_jinja__buf_str(L->c, b);
}

tok *rkm_jinja__lex(jctx *c, const char *src, size_t n, size_t *n_tok)
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
                if (L.i + 2 >= t->n) rkm_jinja__fail(c, lx_pos(&L, start_tag), "missing end of comment tag");
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
            if (lt == T_TEXT || lt < 0) rkm_jinja__fail(c, pos, "unexpected character '%c'", ch);
            if (!(lt == T_IDENT || lt == T_NUM || lt == T_STR || lt == T_RPAREN || lt == T_RBRACK)) {
                L.i++;
                jstr *num = lx_consume(&L, CW_DIGIT, 0);
                rkm_buf *v = rkm_jinja__buf_new(c);
                buf_addc(c, v, ch);
                rkm_jinja__buf_add(c, v, num->s, num->len);
                if (num->len && L.i + 1 < t->n && t->p[L.i] == '.' && is_digit(t->p[L.i + 1])) {
                    L.i++;
                    jstr *fr = lx_consume(&L, CW_DIGIT, 0);
                    buf_addc(c, v, '.');
                    rkm_jinja__buf_add(c, v, fr->s, fr->len);
                }
                jstr *vs = rkm_jinja__buf_str(c, v);
                lx_push(&L, num->len ? T_NUM : T_UNARY, vs->s, vs->len, pos);
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
            jstr *s = lx_consume(&L, CW_STR, ch);
            lx_push(&L, T_STR, s->s, s->len, pos);
            L.i++;
            continue;
        }
        if (is_digit(ch)) {
            jstr *num = lx_consume(&L, CW_DIGIT, 0);
            rkm_buf *v = rkm_jinja__buf_new(c);
            rkm_jinja__buf_add(c, v, num->s, num->len);
            if (lx_last(&L) != T_DOT && L.i + 1 < t->n && t->p[L.i] == '.' && is_digit(t->p[L.i + 1])) {
                L.i++;
                jstr *fr = lx_consume(&L, CW_DIGIT, 0);
                buf_addc(c, v, '.');
                rkm_jinja__buf_add(c, v, fr->s, fr->len);
            }
            jstr *vs = rkm_jinja__buf_str(c, v);
            lx_push(&L, T_NUM, vs->s, vs->len, pos);
            continue;
        }
        if (is_word(ch)) {
            jstr *w = lx_consume(&L, CW_WORD, 0);
            lx_push(&L, T_IDENT, w->s, w->len, pos);
            continue;
        }
        uint32_t cp;
        rkm_jinja__u8_dec(t->p + L.i, t->n - L.i, &cp);
        rkm_jinja__fail(c, pos, "unexpected character U+%04X", cp);
    }
    *n_tok = L.n;
    return L.toks;
}
