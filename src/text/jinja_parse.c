/*
 * jinja_parse.c - the recursive-descent parser from tokens to the syntax
 * tree (statements, expressions with @huggingface/jinja's precedence), and
 * the API's rkm_jinja_parse / rkm_jinja_free.
 *
 * Threads: a parse owns its context; the finished rkm_jinja is read-only
 * and may be rendered from any number of threads. Ownership: the tree lives
 * in the arena of the rkm_jinja's own context, freed by rkm_jinja_free.
 * Nesting is bounded (MAX_PARSE_DEPTH) so hostile input cannot overflow
 * the stack.
 */
#include "text/jinja_impl.h"

/* ------------------------------------------------------------ parser */

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
        node **nv = rkm_jinja__alloc(c, (size_t)cap * sizeof(node *));
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof(node *));
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
}

static node *mk(parser *P, int k, uint32_t pos)
{
    node *n = rkm_jinja__alloc(P->c, sizeof(node));
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

static _Noreturn void p_eof(parser *P) { rkm_jinja__fail(P->c, p_pos(P), "unexpected end of template"); }

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
    if (P->i >= P->n) rkm_jinja__fail(P->c, p_pos(P), "expected %s, got end of template", what);
    tok *t = &P->t[P->i];
    if (t->type != type) rkm_jinja__fail(P->c, t->pos, "expected %s, got %s", what, tok_name(t->type));
    P->i++;
    return t;
}

static void p_expect_ident(parser *P, const char *name)
{
    if (!p_is_ident(P, name)) rkm_jinja__fail(P->c, p_pos(P), "expected '%s'", name);
    P->i++;
}

static void p_enter(parser *P)
{
    if (++P->c->depth > MAX_PARSE_DEPTH) rkm_jinja__fail(P->c, p_pos(P), "template nested too deeply");
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
    if (t->type != T_IDENT) rkm_jinja__fail(P->c, t->pos, "unknown statement, got %s", tok_name(t->type));
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
        if (name->k != N_IDENT) rkm_jinja__fail(P->c, name->pos, "expected an identifier after 'macro'");
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
        if (n->a->k != N_IDENT && n->a->k != N_TUPLE) rkm_jinja__fail(P->c, n->a->pos, "expected identifier/tuple for the loop variable");
        if (!p_is_ident(P, "in")) rkm_jinja__fail(P->c, p_pos(P), "expected 'in' after the loop variable");
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
        if (callee->k != N_IDENT) rkm_jinja__fail(P->c, callee->pos, "expected an identifier after 'call'");
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
        rkm_jinja__fail(P->c, t->pos, "unknown statement '%.*s'", (int)RKM_MIN(t->len, 64), t->s);
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
        rkm_jinja__fail(P->c, t->pos, "unexpected %s", tok_name(t->type));
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
        if (name->k != N_IDENT) rkm_jinja__fail(P->c, name->pos, "expected an identifier for the test");
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
        if (f->k != N_IDENT) rkm_jinja__fail(P->c, f->pos, "expected an identifier for the filter");
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
            rkm_jinja__fail(P->c, p_pos(P), "argument unpacking (* and **) is not supported");
        node *arg = parse_expr(P);
        if (p_is(P, T_EQUALS)) {
            P->i++;
            if (arg->k != N_IDENT)
                rkm_jinja__fail(P->c, arg->pos, params ? "expected identifier for parameter declaration" : "expected identifier for keyword argument");
            node *kw = mk(P, N_KWARG, arg->pos);
            kw->s = arg->s; kw->len = arg->len;
            kw->a = parse_expr(P);
            arg = kw;
        }
        if (params) {
            if (arg->k != N_IDENT && arg->k != N_KWARG) rkm_jinja__fail(P->c, arg->pos, "expected identifier for parameter declaration");
            for (int i = 0; i < out->n; i++)
                if (out->v[i]->len == arg->len && !memcmp(out->v[i]->s, arg->s, arg->len))
                    rkm_jinja__fail(P->c, arg->pos, "duplicate parameter name '%.*s'", (int)RKM_MIN(arg->len, 64), arg->s);
        }
        if (arg->k == N_KWARG) saw_kw = 1;
        else if (saw_kw)
            rkm_jinja__fail(P->c, arg->pos, params ? "non-default argument follows default argument" : "positional argument follows keyword argument");
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
        if (n >= 3) rkm_jinja__fail(P->c, p_pos(P), "expected 0-3 arguments for slice expression");
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
    if (n == 0) rkm_jinja__fail(P->c, pos, "expected at least one argument for member/slice expression");
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
            if (m->b->k != N_IDENT && m->b->k != N_INT) rkm_jinja__fail(P->c, m->b->pos, "expected identifier or integer after '.'");
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
            rkm_buf *b = rkm_jinja__buf_new(P->c);
            rkm_jinja__buf_add(P->c, b, t->s, t->len);
            while (p_is(P, T_STR)) {
                rkm_jinja__buf_add(P->c, b, P->t[P->i].s, P->t[P->i].len);
                P->i++;
            }
            jstr *joined = rkm_jinja__buf_str(P->c, b);
            n->s = joined->s;
            n->len = joined->len;
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
        rkm_jinja__fail(P->c, t->pos, "unexpected %s", tok_name(t->type));
    }
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
    char *volatile clean = rkm_jinja__u8_sanitize_alloc(src, len, &clean_n);
    if (clean) { src = clean; len = clean_n; }
    jctx *c = &t->c;
    rkm_jinja__ctx_init(c, (size_t)512 * len + ((size_t)64 << 20)); /* tokens + nodes: ~300 B per source byte at worst */
    if (setjmp(c->jb)) {
        rkm_err(c->code ? c->code : RKM_EFORMAT, "%s", c->msg);
        free(clean);
        rkm_jinja__ctx_free(c);
        free(t);
        return NULL;
    }
    c->lines = rkm_jinja__line_table(c, src, len, &c->n_lines);
    size_t n_tok;
    tok *toks = rkm_jinja__lex(c, src, len, &n_tok);
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
    rkm_jinja__ctx_free(&t->c);
    free(t);
}
