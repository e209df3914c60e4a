/*
 * jinja_impl.h - private to the template engine (src/text/jinja_*.c): the
 * context, strings, tokens, syntax nodes and values they share, and the
 * functions one file provides to the others (rkm_jinja__ names; the double
 * underscore marks them internal). Nothing outside src/text/jinja_*.c
 * includes this; the public API is jinja.h.
 *
 * Files: jinja_value.c (context and arena, strings, UTF-8 and JavaScript
 * string/number helpers, values, JSON and printing), jinja_lex.c (lexer
 * with the Hugging Face preprocessing), jinja_parse.c (parser and
 * rkm_jinja_parse), jinja_builtin.c (string and dict methods, tests,
 * filters), jinja_eval.c (the evaluator and rkm_jinja_render).
 *
 * Errors: rkm_jinja__fail longjmps back to rkm_jinja_parse or
 * rkm_jinja_render, which free the context's arena; so everything a parse
 * or render allocates comes from rkm_jinja__alloc and no other resource is
 * held across a call that can fail.
 */
#ifndef RKM_TEXT_JINJA_IMPL_H
#define RKM_TEXT_JINJA_IMPL_H

#include <math.h>
#include <setjmp.h>

#include "text/jinja.h"
#include "util/arena.h"
#include "util/buf.h"
#include "util/common.h"

typedef struct jbuf jbuf;

/* One parse or one render: the arena that holds every token, node, string
 * and container, the limits, and where a failure longjmps to. */
typedef struct jctx {
    rkm_arena arena;
    jbuf *bufs;              /* every rkm_buf handed out, freed with the arena */
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

#define NOPOS UINT32_MAX

typedef struct jstr {
    size_t len;
    char s[]; /* NUL-terminated UTF-8 */
} jstr;

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

#define UNDEF ((jv){V_UNDEF, {0}})
#define NONE ((jv){V_NONE, {0}})

typedef struct json_opts {
    int indent;             /* 0: none */
    int ensure_ascii;
    int sort_keys;
    const char *item_sep, *key_sep; /* NULL: defaults */
} json_opts;

#define MAX_LIST 1000000 /* range() and friends: beyond this, the template is hostile */

/* Arguments of a call: positional values and keyword values. */
typedef struct jargs {
    jv *v;
    int n;
    jdict kw;
} jargs;

enum { CTL_NONE, CTL_BREAK, CTL_CONTINUE };

/* A parsed template: immutable after rkm_jinja_parse. */
struct rkm_jinja {
    jctx c;     /* owns the arena with tokens and nodes */
    node **body;
    int n;
};

/* jinja_value.c */
void rkm_jinja__ctx_free(jctx *c);
_Noreturn RKM_PRINTF(3, 4) void rkm_jinja__fail(jctx *c, uint32_t pos, const char *fmt, ...);
void *rkm_jinja__alloc(jctx *c, size_t n);
jstr *rkm_jinja__str_new(jctx *c, const char *p, size_t n);
/* A growable string for this context: util/buf.h's rkm_buf, freed with
 * the context (a failure's longjmp cannot leak it); its growth counts
 * against the context's memory limit. */
rkm_buf *rkm_jinja__buf_new(jctx *c);
void rkm_jinja__buf_add(jctx *c, rkm_buf *b, const char *p, size_t n);
/* The contents as an arena string ("" when empty); b is left empty. */
jstr *rkm_jinja__buf_str(jctx *c, rkm_buf *b);
int rkm_jinja__u8_dec(const char *p, size_t n, uint32_t *cp);
int rkm_jinja__u8_enc(uint32_t cp, char *o);
size_t rkm_jinja__u8_prev(const char *s, size_t i);
char *rkm_jinja__u8_sanitize_alloc(const char *p, size_t n, size_t *out_n);
int rkm_jinja__js_space(uint32_t c);
size_t rkm_jinja__js_trim_start(const char *s, size_t n);
size_t rkm_jinja__js_trim_end(const char *s, size_t n);
size_t rkm_jinja__u16_len(const char *s, size_t n);
jstr *rkm_jinja__str_case(jctx *c, const char *s, size_t n, int upper);
double rkm_jinja__js_parse_int(const char *s, size_t n);
double rkm_jinja__js_parse_float(const char *s, size_t n);
jv rkm_jinja__v_list(jctx *c, size_t cap);
void rkm_jinja__list_push(jctx *c, jlist *l, jv x);
jv rkm_jinja__v_dict(jctx *c, int type);
long rkm_jinja__dict_find(const jdict *d, const char *k, size_t kl);
void rkm_jinja__dict_set(jctx *c, jdict *d, jstr *k, jv x);
int rkm_jinja__dict_get(const jdict *d, const char *k, size_t kl, jv *out);
const char *rkm_jinja__type_name(jv v);
int rkm_jinja__truthy(jv v);
void rkm_jinja__to_json(jctx *c, rkm_buf *b, jv v, const json_opts *o, int depth, int undef_null);
void rkm_jinja__display(jctx *c, rkm_buf *b, jv v);
void rkm_jinja__raw_str(jctx *c, rkm_buf *b, jv v);
jstr *rkm_jinja__display_str(jctx *c, jv v);
int rkm_jinja__loose_eq(jctx *c, jv a, jv b, int depth);
int rkm_jinja__strict_eq(jv a, jv b);
void rkm_jinja__merge_sort(jctx *c, void *base, size_t n, size_t sz, int (*cmp)(jctx *, const void *, const void *, void *), void *arg);
int rkm_jinja__compare_values(jctx *c, jv a, jv b, int case_sensitive);
void rkm_jinja__ctx_init(jctx *c, size_t limit);
uint32_t *rkm_jinja__line_table(jctx *c, const char *src, size_t n, size_t *n_lines);

/* jinja_lex.c */
tok *rkm_jinja__lex(jctx *c, const char *src, size_t n, size_t *n_tok);

/* jinja_builtin.c */
const char *rkm_jinja__mem_find(const char *h, size_t hn, const char *nd, size_t nn);
size_t rkm_jinja__str_cps(jctx *c, const jstr *s, size_t **offs);
jv rkm_jinja__mk_method(jctx *c, jv self, const char *const *names, const char *s, size_t n);
jv rkm_jinja__call_dict_method(jctx *c, const char *m, jdict *d, const jargs *a, uint32_t pos);
jv rkm_jinja__call_str_method(jctx *c, const char *m, const jstr *s, const jargs *a, uint32_t pos);
int rkm_jinja__run_test(jctx *c, const node *t, jv v, jenv *e);
jv rkm_jinja__apply_filter(jctx *c, jv v, const node *f, jenv *e);
extern const char *const rkm_jinja__str_methods[];
extern const char *const rkm_jinja__dict_methods[];

/* jinja_eval.c */
void rkm_jinja__step(jctx *c, const node *n);
void rkm_jinja__eval_args(jctx *c, node *const *v, int n, jenv *e, jargs *a);
jv rkm_jinja__arg_get(const jargs *a, int i, const char *kw, jv def);
jv rkm_jinja__get_attr_path(jctx *c, jv item, const jstr *path);

/* One-liners every file uses. */
static inline jstr *str_cstr(jctx *c, const char *p) { return rkm_jinja__str_new(c, p, strlen(p)); }
static inline void buf_adds(jctx *c, rkm_buf *b, const char *s) { rkm_jinja__buf_add(c, b, s, strlen(s)); }
static inline void buf_addc(jctx *c, rkm_buf *b, char ch) { rkm_jinja__buf_add(c, b, &ch, 1); }
static inline int is_word(int ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'; }
static inline int is_digit(int ch) { return ch >= '0' && ch <= '9'; }
static inline jv v_bool(int b) { jv v = {V_BOOL, {0}}; v.u.b = !!b; return v; }
static inline jv v_int(double n) { jv v = {V_INT, {0}}; v.u.n = n; return v; }
static inline jv v_float(double n) { jv v = {V_FLOAT, {0}}; v.u.n = n; return v; }
static inline jv v_str(jstr *s) { jv v = {V_STR, {0}}; v.u.s = s; return v; }
static inline int is_num(jv v) { return v.t == V_INT || v.t == V_FLOAT; }
static inline jv s_new(jctx *c, const char *p, size_t n) { return v_str(rkm_jinja__str_new(c, p, n)); }

#endif
