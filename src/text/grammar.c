/*
 * grammar.c - GBNF grammars, their matcher and vocabulary masks (see
 * grammar.h).
 *
 * Compiled form: one array of elements; each alternative of each rule is a
 * run of elements ending with G_END. An element is a code point set
 * (G_SET: ranges, maybe negated) or a reference to a rule (G_REF). A
 * position is an index into that array; a parse stack is an array of
 * positions whose top is always a G_SET (expand() descends through
 * references and pops finished alternatives until it is), or empty when
 * the grammar is complete. A reference that ends its alternative is
 * replaced rather than pushed (a tail call), so right-recursive repetition
 * does not deepen the stack.
 *
 * Sets of stacks are packed into int32 buffers: count, then per stack its
 * length and positions. The trie walk keeps one set per depth on a single
 * growing buffer and pops it on the way back.
 */
#include "text/grammar.h"

#include <stdlib.h>
#include <string.h>

#include "text/unicode.h"
#include "util/common.h"

enum { G_END = 0, G_REF, G_SET };

typedef struct {
    uint8_t kind;
    uint8_t neg;   /* G_SET: the complement of the ranges */
    int32_t arg;   /* G_REF: rule; G_SET: first range */
    int32_t n;     /* G_SET: ranges */
} gelem;

typedef struct {
    uint32_t lo, hi;
} crange;

struct rkm_grammar {
    gelem *el;
    int n_el;
    crange *rg;
    int n_rg;
    int n_rules;
    int *alt_first;   /* rule r's alternatives: alts[alt_first[r] .. alt_first[r + 1]) */
    int *alts;        /* start position of each alternative */
    int root;
};

#define MAX_STACKS 4096
#define MAX_ELEMS (1 << 22)

/* ------------------------------------------------------------ parsing */

typedef struct {
    gelem *e;
    int n, cap;
} seq;

typedef struct {
    char *name;   /* NULL: generated */
    seq *alts;
    int n_alts, cap_alts;
    int defined;
} prule;

typedef struct {
    const char *src, *p;
    prule *rules;
    int n_rules, cap_rules;
    crange *rg;
    int n_rg, cap_rg;
    int total;    /* elements so far (a bound on repetition blow-up) */
    int err;
} parser;

static int perr(parser *ps, const char *what)
{
    if (ps->err) return ps->err;
    int line = 1, col = 1;
    for (const char *q = ps->src; q < ps->p && *q; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    ps->err = rkm_err(RKM_EINVAL, "grammar: %s at line %d, column %d", what, line, col);
    return ps->err;
}

static int grow(void **p, int *cap, int need, size_t esz)
{
    if (need <= *cap) return 0;
    int nc = *cap ? *cap : 8;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, (size_t)nc * esz);
    if (!np) return rkm_err(RKM_ENOMEM, "grammar: out of memory");
    *p = np;
    *cap = nc;
    return 0;
}

static int seq_add(parser *ps, seq *s, gelem e)
{
    if (++ps->total > MAX_ELEMS) return perr(ps, "grammar too large (repetition counts?)");
    if (grow((void **)&s->e, &s->cap, s->n + 1, sizeof *s->e)) return ps->err = RKM_ENOMEM;
    s->e[s->n++] = e;
    return 0;
}

static int new_rule(parser *ps, const char *name, size_t len)
{
    if (grow((void **)&ps->rules, &ps->cap_rules, ps->n_rules + 1, sizeof *ps->rules)) return ps->err = RKM_ENOMEM;
    prule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    if (name && !(r->name = strndup(name, len))) return ps->err = rkm_err(RKM_ENOMEM, "grammar: out of memory");
    return ps->n_rules++;
}

static int rule_by_name(parser *ps, const char *name, size_t len)
{
    for (int i = 0; i < ps->n_rules; i++)
        if (ps->rules[i].name && strlen(ps->rules[i].name) == len && !memcmp(ps->rules[i].name, name, len)) return i;
    return new_rule(ps, name, len);
}

static seq *add_alt(parser *ps, int r)
{
    prule *ru = &ps->rules[r];
    if (grow((void **)&ru->alts, &ru->cap_alts, ru->n_alts + 1, sizeof *ru->alts)) {
        ps->err = RKM_ENOMEM;
        return NULL;
    }
    seq *s = &ru->alts[ru->n_alts++];
    memset(s, 0, sizeof *s);
    return s;
}

static int is_name(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; }

/* Skips blanks and comments; newlines too when nl. */
static void skip(parser *ps, int nl)
{
    for (;;) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || (nl && (c == '\n' || c == '\r'))) ps->p++;
        else if (c == '#') {
            while (*ps->p && *ps->p != '\n') ps->p++;
        } else break;
    }
}


/* One code point of a literal or class, escapes decoded. */
static int read_char(parser *ps, uint32_t *cp)
{
    const char *p = ps->p;
    if (!*p) return perr(ps, "unexpected end");
    if (*p == '\\') {
        p++;
        int nd = 0;
        switch (*p) {
        case 'n': *cp = '\n'; break;
        case 't': *cp = '\t'; break;
        case 'r': *cp = '\r'; break;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': *cp = (unsigned char)*p; break;
        case 'x': nd = 2; break;
        case 'u': nd = 4; break;
        case 'U': nd = 8; break;
        default: return perr(ps, "unknown escape");
        }
        p++;
        if (nd) {
            uint32_t v = 0;
            for (int i = 0; i < nd; i++, p++) {
                int h = rkm_hexval(*p);
                if (h < 0) return perr(ps, "bad hex escape");
                v = v * 16 + (uint32_t)h;
            }
            if (v > 0x10FFFF) return perr(ps, "code point out of range");
            *cp = v;
        }
        ps->p = p;
        return 0;
    }
    int l = rkm_utf8_decode(p, strnlen(p, 4), cp);
    if (l <= 0) return perr(ps, "invalid UTF-8");
    ps->p = p + l;
    return 0;
}

static int add_range(parser *ps, uint32_t lo, uint32_t hi)
{
    if (grow((void **)&ps->rg, &ps->cap_rg, ps->n_rg + 1, sizeof *ps->rg)) return ps->err = RKM_ENOMEM;
    ps->rg[ps->n_rg++] = (crange){lo, hi};
    return 0;
}

static int add_char(parser *ps, seq *s, uint32_t c)
{
    if (add_range(ps, c, c)) return ps->err;
    return seq_add(ps, s, (gelem){G_SET, 0, ps->n_rg - 1, 1});
}

static int parse_alts(parser *ps, int r, int nested);

/* Replaces elements [from, s->n) (one item) by its repetition m..n (n < 0: unbounded). */
static int repeat(parser *ps, seq *s, int from, int m, int n)
{
    int k = s->n - from;
    gelem *item = malloc(sizeof(gelem) * (size_t)(k ? k : 1));
    if (!item) return ps->err = rkm_err(RKM_ENOMEM, "grammar: out of memory");
    if (k) memcpy(item, s->e + from, sizeof(gelem) * (size_t)k); /* an empty item ("" *) has no elements */
    s->n = from;
    int rc = 0;
    for (int i = 0; i < m && !rc; i++)
        for (int j = 0; j < k && !rc; j++) rc = seq_add(ps, s, item[j]);
    if (!rc && (n < 0 || n > m)) {
        /* unbounded: R ::= item R | (empty); bounded: nested optional rules */
        int opt = n < 0 ? 1 : n - m, prev = -1;
        for (int i = 0; i < opt && !rc; i++) {
            int rr = new_rule(ps, NULL, 0);
            if (rr < 0) {
                rc = rr;
                break;
            }
            seq *a = add_alt(ps, rr);
            for (int j = 0; a && j < k && !rc; j++) rc = seq_add(ps, a, item[j]);
            if (!a) rc = ps->err;
            if (!rc && (n < 0 || prev >= 0)) rc = seq_add(ps, &ps->rules[rr].alts[0], (gelem){G_REF, 0, n < 0 ? rr : prev, 0});
            if (!rc && !add_alt(ps, rr)) rc = ps->err;
            ps->rules[rr].defined = 1;
            prev = rr;
        }
        if (!rc) rc = seq_add(ps, s, (gelem){G_REF, 0, prev, 0});
    }
    free(item);
    return rc;
}

static int parse_int(parser *ps, int *v)
{
    if (*ps->p < '0' || *ps->p > '9') return perr(ps, "expected a number");
    long x = 0;
    while (*ps->p >= '0' && *ps->p <= '9') {
        x = x * 10 + (*ps->p++ - '0');
        if (x > 100000) return perr(ps, "repetition count too large");
    }
    *v = (int)x;
    return 0;
}

/* One alternative: items until '|', ')' or the end of the rule. */
static int parse_seq(parser *ps, seq *s, int nested)
{
    for (;;) {
        skip(ps, nested);
        char c = *ps->p;
        int from = s->n;
        if (c == '"') {
            ps->p++;
            while (*ps->p != '"') {
                uint32_t cp;
                if (!*ps->p || *ps->p == '\n') return perr(ps, "unterminated literal");
                if (read_char(ps, &cp) || add_char(ps, s, cp)) return ps->err;
            }
            ps->p++;
        } else if (c == '[') {
            ps->p++;
            int neg = 0, first = ps->n_rg;
            if (*ps->p == '^') neg = 1, ps->p++;
            while (*ps->p != ']') {
                uint32_t lo, hi;
                if (!*ps->p) return perr(ps, "unterminated character class");
                if (read_char(ps, &lo)) return ps->err;
                hi = lo;
                if (ps->p[0] == '-' && ps->p[1] && ps->p[1] != ']') {
                    ps->p++;
                    if (read_char(ps, &hi)) return ps->err;
                    if (hi < lo) return perr(ps, "character range out of order");
                }
                if (add_range(ps, lo, hi)) return ps->err;
            }
            ps->p++;
            if (seq_add(ps, s, (gelem){G_SET, (uint8_t)neg, first, ps->n_rg - first})) return ps->err;
        } else if (c == '.') {
            ps->p++;
            if (seq_add(ps, s, (gelem){G_SET, 1, ps->n_rg, 0})) return ps->err;
        } else if (c == '(') {
            ps->p++;
            int r = new_rule(ps, NULL, 0);
            if (r < 0 || parse_alts(ps, r, 1)) return ps->err;
            ps->rules[r].defined = 1;
            skip(ps, 1);
            if (*ps->p != ')') return perr(ps, "expected ')'");
            ps->p++;
            if (seq_add(ps, s, (gelem){G_REF, 0, r, 0})) return ps->err;
        } else if (is_name(c)) {
            const char *n0 = ps->p;
            while (is_name(*ps->p)) ps->p++;
            const char *after = ps->p;
            skip(ps, 0);
            if (ps->p[0] == ':' && ps->p[1] == ':' && ps->p[2] == '=') { /* the next rule starts */
                ps->p = n0;
                return 0;
            }
            ps->p = after;
            int r = rule_by_name(ps, n0, (size_t)(after - n0));
            if (r < 0 || seq_add(ps, s, (gelem){G_REF, 0, r, 0})) return ps->err;
        } else {
            return 0; /* '|', ')', newline, end: the caller decides */
        }
        /* postfix operators */
        skip(ps, 0);
        c = *ps->p;
        int rc = 0;
        if (c == '*') ps->p++, rc = repeat(ps, s, from, 0, -1);
        else if (c == '+') ps->p++, rc = repeat(ps, s, from, 1, -1);
        else if (c == '?') ps->p++, rc = repeat(ps, s, from, 0, 1);
        else if (c == '{') {
            int m, n;
            ps->p++;
            skip(ps, 0);
            if (parse_int(ps, &m)) return ps->err;
            skip(ps, 0);
            n = m;
            if (*ps->p == ',') {
                ps->p++;
                skip(ps, 0);
                n = -1;
                if (*ps->p != '}' && parse_int(ps, &n)) return ps->err;
                skip(ps, 0);
            }
            if (*ps->p != '}') return perr(ps, "expected '}'");
            ps->p++;
            if (n >= 0 && n < m) return perr(ps, "repetition {m,n} with n < m");
            rc = repeat(ps, s, from, m, n);
        }
        if (rc) return rc;
    }
}

static int parse_alts(parser *ps, int r, int nested)
{
    for (;;) {
        seq *s = add_alt(ps, r);
        if (!s || parse_seq(ps, s, nested)) return ps->err ? ps->err : RKM_ENOMEM;
        const char *save = ps->p;
        skip(ps, 1);
        if (*ps->p == '|') { /* also on the next line */
            ps->p++;
            continue;
        }
        if (!nested) ps->p = save;
        return 0;
    }
}

static int parse_all(parser *ps)
{
    for (;;) {
        skip(ps, 1);
        if (!*ps->p) return 0;
        const char *n0 = ps->p;
        while (is_name(*ps->p)) ps->p++;
        if (ps->p == n0) return perr(ps, "expected a rule name");
        size_t nl = (size_t)(ps->p - n0);
        skip(ps, 0);
        if (strncmp(ps->p, "::=", 3)) return perr(ps, "expected '::='");
        ps->p += 3;
        int r = rule_by_name(ps, n0, nl);
        if (r < 0) return ps->err;
        if (ps->rules[r].defined) return perr(ps, "rule defined twice");
        ps->rules[r].defined = 1;
        if (parse_alts(ps, r, 0)) return ps->err;
        skip(ps, 0);
        if (*ps->p && *ps->p != '\n' && *ps->p != '\r') return perr(ps, "unexpected character");
    }
}

/* Left recursion: a rule that can reach itself before any code point. */
static int left_recursion(parser *ps)
{
    int n = ps->n_rules;
    uint8_t *nullable = calloc((size_t)n, 1), *mark = calloc((size_t)n, 1);
    int *order = malloc(sizeof(int) * (size_t)n * 2);
    if (!nullable || !mark || !order) {
        free(nullable), free(mark), free(order);
        return rkm_err(RKM_ENOMEM, "grammar: out of memory");
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < n; r++) {
            if (nullable[r]) continue;
            for (int a = 0; a < ps->rules[r].n_alts && !nullable[r]; a++) {
                const seq *s = &ps->rules[r].alts[a];
                int all = 1;
                for (int i = 0; i < s->n && all; i++) all = s->e[i].kind == G_REF && nullable[s->e[i].arg];
                if (all) nullable[r] = 1, changed = 1;
            }
        }
    }
    /* depth-first over "r starts with s" edges; mark 1 on the path, 2 done */
    int rc = 0;
    for (int start = 0; start < n && !rc; start++) {
        if (mark[start]) continue;
        int sp = 0;
        order[sp++] = start;
        order[sp++] = 0;
        mark[start] = 1;
        while (sp && !rc) {
            int r = order[sp - 2], k = order[sp - 1]++;
            /* the k-th edge of r */
            int found = -1, cnt = 0;
            for (int a = 0; a < ps->rules[r].n_alts && found < 0; a++) {
                const seq *s = &ps->rules[r].alts[a];
                for (int i = 0; i < s->n; i++) {
                    if (s->e[i].kind != G_REF) break;
                    if (cnt++ == k) {
                        found = s->e[i].arg;
                        break;
                    }
                    if (!nullable[s->e[i].arg]) break;
                }
            }
            if (found < 0) {
                mark[r] = 2;
                sp -= 2;
            } else if (mark[found] == 1) {
                int named = found;
                for (int i = 0; i < sp; i += 2)
                    if (ps->rules[order[i]].name && mark[order[i]] == 1) named = order[i];
                rc = rkm_err(RKM_EINVAL, "grammar: left recursion through rule '%s'",
                             ps->rules[named].name ? ps->rules[named].name : "(group)");
            } else if (!mark[found]) {
                mark[found] = 1;
                order[sp++] = found;
                order[sp++] = 0;
            }
        }
    }
    free(nullable), free(mark), free(order);
    return rc;
}

static void free_parser(parser *ps)
{
    for (int i = 0; i < ps->n_rules; i++) {
        for (int a = 0; a < ps->rules[i].n_alts; a++) free(ps->rules[i].alts[a].e);
        free(ps->rules[i].alts);
        free(ps->rules[i].name);
    }
    free(ps->rules);
    free(ps->rg);
}

rkm_grammar *rkm_grammar_parse(const char *text, const char *root)
{
    parser ps = {.src = text, .p = text};
    rkm_grammar *g = NULL;
    if (!root) root = "root";
    int rc = parse_all(&ps);
    int ri = -1;
    for (int i = 0; !rc && i < ps.n_rules; i++) {
        if (!ps.rules[i].defined) rc = rkm_err(RKM_EINVAL, "grammar: rule '%s' is used but not defined", ps.rules[i].name);
        if (ps.rules[i].name && !strcmp(ps.rules[i].name, root)) ri = i;
    }
    if (!rc && ri < 0) rc = rkm_err(RKM_EINVAL, "grammar: no rule '%s'", root);
    if (!rc) rc = left_recursion(&ps);
    if (!rc && !(g = calloc(1, sizeof *g))) rc = rkm_err(RKM_ENOMEM, "grammar: out of memory");
    if (!rc) {
        int n_alts = 0, n_el = 0;
        for (int i = 0; i < ps.n_rules; i++) {
            n_alts += ps.rules[i].n_alts;
            for (int a = 0; a < ps.rules[i].n_alts; a++) n_el += ps.rules[i].alts[a].n + 1;
        }
        g->el = malloc(sizeof *g->el * (size_t)(n_el + 1));
        g->alts = malloc(sizeof(int) * (size_t)(n_alts + 1));
        g->alt_first = malloc(sizeof(int) * (size_t)(ps.n_rules + 1));
        g->rg = malloc(sizeof *g->rg * (size_t)(ps.n_rg + 1));
        if (!g->el || !g->alts || !g->alt_first || !g->rg) rc = rkm_err(RKM_ENOMEM, "grammar: out of memory");
    }
    if (!rc) {
        int na = 0;
        for (int i = 0; i < ps.n_rules; i++) {
            g->alt_first[i] = na;
            for (int a = 0; a < ps.rules[i].n_alts; a++) {
                const seq *s = &ps.rules[i].alts[a];
                g->alts[na++] = g->n_el;
                if (s->n) memcpy(g->el + g->n_el, s->e, sizeof *s->e * (size_t)s->n);
                g->n_el += s->n;
                g->el[g->n_el++] = (gelem){G_END, 0, 0, 0};
            }
        }
        g->alt_first[ps.n_rules] = na;
        g->n_rules = ps.n_rules;
        if (ps.n_rg) memcpy(g->rg, ps.rg, sizeof *g->rg * (size_t)ps.n_rg);
        g->n_rg = ps.n_rg;
        g->root = ri;
    }
    free_parser(&ps);
    if (rc) {
        rkm_grammar_free(g);
        return NULL;
    }
    return g;
}

void rkm_grammar_free(rkm_grammar *g)
{
    if (!g) return;
    free(g->el);
    free(g->rg);
    free(g->alts);
    free(g->alt_first);
    free(g);
}

/* ------------------------------------------------------- stack sets */

typedef struct {
    int32_t *v;
    int n, cap;
} ibuf;

static int ib_push(ibuf *b, int32_t x)
{
    if (b->n == b->cap && grow((void **)&b->v, &b->cap, b->n + 1, sizeof *b->v)) return RKM_ENOMEM;
    b->v[b->n++] = x;
    return 0;
}

/* Builds a set at the end of out: begin() reserves its count. */
typedef struct {
    ibuf *out;
    int at;      /* index of the count */
    int n;       /* stacks so far */
    int err;
} builder;

static void b_begin(builder *b, ibuf *out)
{
    b->out = out;
    b->at = out->n;
    b->n = 0;
    b->err = ib_push(out, 0);
}

static void b_emit(builder *b, const int32_t *stk, int len)
{
    if (b->err) return;
    /* duplicates add nothing */
    const int32_t *q = b->out->v + b->at + 1;
    for (int i = 0; i < b->n; i++) {
        if (q[0] == len && !memcmp(q + 1, stk, sizeof(int32_t) * (size_t)len)) return;
        q += 1 + q[0];
    }
    if (b->n >= MAX_STACKS) {
        b->err = rkm_err(RKM_EINVAL, "grammar: more than %d parse stacks (the grammar is too ambiguous)", MAX_STACKS);
        return;
    }
    if (ib_push(b->out, len)) {
        b->err = RKM_ENOMEM;
        return;
    }
    for (int i = 0; i < len; i++)
        if (ib_push(b->out, stk[i])) {
            b->err = RKM_ENOMEM;
            return;
        }
    b->n++;
}

static int b_end(builder *b)
{
    if (!b->err) b->out->v[b->at] = b->n;
    return b->err;
}

#define MAX_DEPTH 1024

/* Expands stk (len positions, top last; the caller's copy, which this
 * modifies) until its top is a set, emitting every stack that results. */
static void expand(const rkm_grammar *g, builder *b, int32_t *stk, int len)
{
    for (;;) {
        if (b->err) return;
        if (len == 0) {
            b_emit(b, stk, 0);
            return;
        }
        int p = stk[len - 1];
        const gelem *e = &g->el[p];
        if (e->kind == G_SET) {
            b_emit(b, stk, len);
            return;
        }
        if (e->kind == G_END) { /* the alternative is done: back to the caller, past its reference */
            len--;
            if (len) stk[len - 1]++;
            continue;
        }
        int r = e->arg, tail = g->el[p + 1].kind == G_END;
        if (len >= MAX_DEPTH) {
            b->err = rkm_err(RKM_EINVAL, "grammar: parse stack deeper than %d", MAX_DEPTH);
            return;
        }
        int32_t tmp[len + 1];
        for (int a = g->alt_first[r]; a < g->alt_first[r + 1]; a++) {
            memcpy(tmp, stk, sizeof(int32_t) * (size_t)len);
            int l = len;
            if (tail) tmp[l - 1] = g->alts[a];
            else tmp[l++] = g->alts[a];
            expand(g, b, tmp, l);
        }
        return;
    }
}


static int set_match(const rkm_grammar *g, const gelem *e, uint32_t c)
{
    int in = 0;
    for (int i = 0; i < e->n && !in; i++) in = c >= g->rg[e->arg + i].lo && c <= g->rg[e->arg + i].hi;
    return in != e->neg;
}

/* Could the set match some code point in [lo, hi]? */
static int set_overlaps(const rkm_grammar *g, const gelem *e, uint32_t lo, uint32_t hi)
{
    if (!e->neg) {
        for (int i = 0; i < e->n; i++)
            if (g->rg[e->arg + i].lo <= hi && g->rg[e->arg + i].hi >= lo) return 1;
        return 0;
    }
    for (int i = 0; i < e->n; i++) /* a complement misses [lo, hi] only if one range covers it */
        if (g->rg[e->arg + i].lo <= lo && g->rg[e->arg + i].hi >= hi) return 0;
    return 1;
}

/* The set after code point c, appended to out, from the set at offset at
 * of src (which may be out itself: read by offset, as out grows). */
static int advance(const rkm_grammar *g, const ibuf *src, int at, uint32_t c, ibuf *out)
{
    builder b;
    b_begin(&b, out);
    int32_t stk[MAX_DEPTH];
    int q = at + 1, count = src->v[at];
    for (int i = 0; i < count && !b.err; i++) {
        int len = src->v[q];
        int top = len ? src->v[q + len] : 0;
        if (len && set_match(g, &g->el[top], c)) {
            memcpy(stk, src->v + q + 1, sizeof(int32_t) * (size_t)len);
            stk[len - 1]++;
            expand(g, &b, stk, len);
        }
        q += 1 + len;
    }
    return b_end(&b);
}

/* The code points a partial UTF-8 sequence can still become. */
static int partial_range(const uint8_t *p, int k, uint32_t *lo, uint32_t *hi)
{
    int need = rkm_utf8_seq_len(p[0]);
    if (need < 2 || k >= need) return 0;
    uint32_t a = p[0] & (need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07), b = a;
    for (int i = 1; i < need; i++) {
        a = a << 6 | (i < k ? (p[i] & 0x3Fu) : 0);
        b = b << 6 | (i < k ? (p[i] & 0x3Fu) : 0x3Fu);
    }
    /* the shortest form of each length: no overlong encodings */
    uint32_t least = need == 2 ? 0x80 : need == 3 ? 0x800 : 0x10000;
    *lo = a < least ? least : a;
    *hi = b > 0x10FFFF ? 0x10FFFF : b;
    return *lo <= *hi;
}

/* Can the partial sequence still become a code point the set takes next?
 * Not a surrogate (U+D800..U+DFFF, which no UTF-8 decodes to): a sequence
 * that can only become one is a dead end, every continuation refused. */
static int partial_viable(const rkm_grammar *g, const int32_t *set, const uint8_t *p, int k)
{
    uint32_t lo, hi;
    if (!partial_range(p, k, &lo, &hi)) return 0;
    const uint32_t part[2][2] = {{lo, hi < 0xD800 ? hi : 0xD7FF}, {lo > 0xDFFF ? lo : 0xE000, hi}};
    const int32_t *q = set + 1;
    for (int i = 0; i < set[0]; i++) {
        int len = q[0];
        for (int r = 0; len && r < 2; r++)
            if (part[r][0] <= part[r][1] && set_overlaps(g, &g->el[q[len]], part[r][0], part[r][1])) return 1;
        q += 1 + len;
    }
    return 0;
}

/* ------------------------------------------------------------ matcher */

struct rkm_gstate {
    const rkm_grammar *g;
    ibuf set;          /* the current set (one) */
    uint8_t part[4];   /* an incomplete UTF-8 sequence */
    int n_part;
};

rkm_gstate *rkm_gstate_new(const rkm_grammar *g)
{
    rkm_gstate *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->g = g;
    builder b;
    b_begin(&b, &st->set);
    for (int a = g->alt_first[g->root]; a < g->alt_first[g->root + 1]; a++) {
        int32_t stk[1] = {g->alts[a]};
        expand(g, &b, stk, 1);
    }
    if (b_end(&b)) {
        rkm_gstate_free(st);
        return NULL;
    }
    return st;
}

rkm_gstate *rkm_gstate_clone(const rkm_gstate *st)
{
    rkm_gstate *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = *st;
    c->set.v = malloc(sizeof(int32_t) * (size_t)(st->set.n ? st->set.n : 1));
    if (!c->set.v) {
        free(c);
        return NULL;
    }
    if (st->set.n) memcpy(c->set.v, st->set.v, sizeof(int32_t) * (size_t)st->set.n);
    c->set.cap = st->set.n ? st->set.n : 1;
    return c;
}

void rkm_gstate_free(rkm_gstate *st)
{
    if (!st) return;
    free(st->set.v);
    free(st);
}

/* Steps a (set, partial) pair over bytes; the result replaces *set. */
static int step_bytes(const rkm_grammar *g, ibuf *set, uint8_t part[4], int *n_part, const char *bytes, size_t n)
{
    ibuf nb = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint8_t c = (uint8_t)bytes[i];
        if (*n_part == 0 && c < 0x80) {
            nb.n = 0;
            if ((rc = advance(g, set, 0, c, &nb))) break;
        } else {
            if ((*n_part == 0 && rkm_utf8_seq_len(c) < 2) || (*n_part > 0 && (c & 0xC0) != 0x80)) {
                rc = RKM_EINVAL; /* not UTF-8 */
                break;
            }
            part[(*n_part)++] = c;
            if (*n_part < rkm_utf8_seq_len(part[0])) {
                if (!partial_viable(g, set->v, part, *n_part)) rc = RKM_EINVAL;
                continue;
            }
            uint32_t cp;
            if (rkm_utf8_decode((const char *)part, (size_t)*n_part, &cp) != *n_part) rc = RKM_EINVAL;
            *n_part = 0;
            nb.n = 0;
            if (!rc) rc = advance(g, set, 0, cp, &nb);
        }
        if (!rc && nb.v[0] == 0) rc = RKM_EINVAL;
        if (!rc) {
            ibuf t = *set;
            *set = nb;
            nb = t;
        }
    }
    free(nb.v);
    return rc;
}

int rkm_gstate_can_accept(const rkm_gstate *st, const char *bytes, size_t n)
{
    rkm_gstate *c = rkm_gstate_clone(st);
    if (!c) return 0;
    int ok = rkm_gstate_accept(c, bytes, n) == 0;
    rkm_gstate_free(c);
    return ok;
}

int rkm_gstate_accept(rkm_gstate *st, const char *bytes, size_t n)
{
    ibuf set = {0};
    if (grow((void **)&set.v, &set.cap, st->set.n ? st->set.n : 1, sizeof *set.v)) return RKM_ENOMEM;
    memcpy(set.v, st->set.v, sizeof(int32_t) * (size_t)st->set.n);
    set.n = st->set.n;
    uint8_t part[4];
    int np = st->n_part;
    memcpy(part, st->part, 4);
    int rc = step_bytes(st->g, &set, part, &np, bytes, n);
    if (rc) {
        free(set.v);
        return rc == RKM_ENOMEM ? rc : RKM_EINVAL;
    }
    free(st->set.v);
    st->set = set;
    memcpy(st->part, part, 4);
    st->n_part = np;
    return 0;
}

int rkm_gstate_done(const rkm_gstate *st)
{
    if (st->n_part) return 0;
    const int32_t *q = st->set.v + 1;
    for (int i = 0; i < st->set.v[0]; i++) {
        if (q[0] == 0) return 1;
        q += 1 + q[0];
    }
    return 0;
}

int rkm_gstate_finished(const rkm_gstate *st)
{
    return rkm_gstate_done(st) && st->set.v[0] == 1;
}

uint64_t rkm_gstate_hash(const rkm_gstate *st)
{
    uint64_t h = rkm_hash(st->set.v, sizeof(int32_t) * (size_t)st->set.n);
    return h ^ (rkm_hash(st->part, (size_t)st->n_part) * 0x9E3779B97F4A7C15ull) ^ (uint64_t)st->n_part;
}

/* --------------------------------------------------------------- trie */

typedef struct {
    int32_t child, next; /* first child, next sibling (-1: none) */
    int32_t tok;         /* first string ending here (-1: none) */
    uint8_t byte;
} tnode;

struct rkm_gtrie {
    tnode *nodes;
    int n_nodes, cap;
    int32_t *tok_next;   /* the next string equal to this one (-1: none) */
    int n_tok;
};

rkm_gtrie *rkm_gtrie_new(const char *const *s, const size_t *len, int n)
{
    rkm_gtrie *t = calloc(1, sizeof *t);
    if (!t || !(t->tok_next = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1)))) {
        free(t);
        return NULL;
    }
    t->n_tok = n;
    if (grow((void **)&t->nodes, &t->cap, 1, sizeof *t->nodes)) goto fail;
    t->nodes[t->n_nodes++] = (tnode){-1, -1, -1, 0};
    for (int i = 0; i < n; i++) {
        t->tok_next[i] = -1;
        int at = 0;
        for (size_t k = 0; k < len[i]; k++) {
            uint8_t c = (uint8_t)s[i][k];
            int ch = t->nodes[at].child;
            while (ch >= 0 && t->nodes[ch].byte != c) ch = t->nodes[ch].next;
            if (ch < 0) {
                if (grow((void **)&t->nodes, &t->cap, t->n_nodes + 1, sizeof *t->nodes)) goto fail;
                ch = t->n_nodes++;
                t->nodes[ch] = (tnode){-1, t->nodes[at].child, -1, c};
                t->nodes[at].child = ch;
            }
            at = ch;
        }
        if (at == 0) continue; /* empty */
        t->tok_next[i] = t->nodes[at].tok;
        t->nodes[at].tok = i;
    }
    return t;
fail:
    rkm_gtrie_free(t);
    return NULL;
}

void rkm_gtrie_free(rkm_gtrie *t)
{
    if (!t) return;
    free(t->nodes);
    free(t->tok_next);
    free(t);
}

typedef struct {
    const rkm_grammar *g;
    const rkm_gtrie *t;
    uint32_t *bits;
    int count, err;
    ibuf frames; /* the sets along the current path */
} walk;

/* Visits node's children with the set at frames.v[at] and partial bytes. */
static void visit(walk *w, int node, int at, uint8_t part[4], int n_part)
{
    for (int ch = w->t->nodes[node].child; ch >= 0 && !w->err; ch = w->t->nodes[ch].next) {
        uint8_t c = w->t->nodes[ch].byte;
        uint8_t p2[4];
        int np = n_part, next = at, mark = w->frames.n;
        memcpy(p2, part, 4);
        if (np == 0 && c < 0x80) {
            if ((w->err = advance(w->g, &w->frames, at, c, &w->frames))) return;
            next = mark;
        } else {
            if ((np == 0 && rkm_utf8_seq_len(c) < 2) || (np > 0 && (c & 0xC0) != 0x80)) continue;
            p2[np++] = c;
            if (np < rkm_utf8_seq_len(p2[0])) {
                if (!partial_viable(w->g, w->frames.v + at, p2, np)) continue;
            } else {
                uint32_t cp;
                int ok = rkm_utf8_decode((const char *)p2, (size_t)np, &cp) == np;
                np = 0;
                if (!ok) continue;
                if ((w->err = advance(w->g, &w->frames, at, cp, &w->frames))) return;
                next = mark;
            }
        }
        if (w->frames.v[next] > 0) {
            for (int id = w->t->nodes[ch].tok; id >= 0; id = w->t->tok_next[id]) {
                w->bits[id >> 5] |= 1u << (id & 31);
                w->count++;
            }
            visit(w, ch, next, p2, np);
        }
        w->frames.n = mark;
    }
}

int rkm_gstate_mask(const rkm_gstate *st, const rkm_gtrie *t, uint32_t *bits, int n)
{
    memset(bits, 0, sizeof(uint32_t) * (size_t)(n / 32 + 1));
    walk w = {st->g, t, bits, 0, 0, {0}};
    if (grow((void **)&w.frames.v, &w.frames.cap, st->set.n + 1024, sizeof(int32_t))) return RKM_ENOMEM;
    memcpy(w.frames.v, st->set.v, sizeof(int32_t) * (size_t)st->set.n);
    w.frames.n = st->set.n;
    uint8_t part[4];
    memcpy(part, st->part, 4);
    visit(&w, 0, 0, part, st->n_part);
    free(w.frames.v);
    (void)n;
    return w.err ? w.err : w.count;
}
