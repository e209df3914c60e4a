/*
 * jinja_builtin.c - what a template can call on a value: string and dict
 * methods (bound as F_METHOD values), tests (`is defined`, `is string`,
 * ...) and filters (`|tojson`, `|join`, `|map`, ...). The dispatch mirrors
 * @huggingface/jinja's applyFilter and its error messages.
 *
 * Threads: runs inside one render. Ownership: results are allocated from
 * the render context's arena.
 */
#include "text/jinja_impl.h"

/* ---- string helpers */

static int str_starts(const jstr *s, const jstr *p) { return p->len <= s->len && !memcmp(s->s, p->s, p->len); }
static int str_ends(const jstr *s, const jstr *p) { return p->len <= s->len && !memcmp(s->s + s->len - p->len, p->s, p->len); }

const char *rkm_jinja__mem_find(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (!nn) return h;
    if (nn > hn) return NULL;
    return memmem(h, hn, nd, nn);
}

static jstr *title_case(jctx *c, const jstr *s)
{
    jstr *r = rkm_jinja__str_new(c, s->s, s->len);
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
    rkm_buf *b = rkm_jinja__buf_new(c);
    if (!old->len) { /* between every code point, and at both ends */
        size_t i = 0;
        for (;;) {
            if (remaining > 0) { rkm_jinja__buf_add(c, b, nw->s, nw->len); remaining--; }
            if (i >= s->len) break;
            uint32_t cp;
            int l = rkm_jinja__u8_dec(s->s + i, s->len - i, &cp);
            rkm_jinja__buf_add(c, b, s->s + i, (size_t)l);
            i += (size_t)l;
        }
    } else {
        size_t i = 0;
        while (i <= s->len) {
            const char *f = remaining > 0 ? rkm_jinja__mem_find(s->s + i, s->len - i, old->s, old->len) : NULL;
            if (!f) { rkm_jinja__buf_add(c, b, s->s + i, s->len - i); break; }
            size_t at = (size_t)(f - s->s);
            rkm_jinja__buf_add(c, b, s->s + i, at - i);
            rkm_jinja__buf_add(c, b, nw->s, nw->len);
            remaining--;
            i = at + old->len;
        }
    }
    return v_str(rkm_jinja__buf_str(c, b));
}

static jv str_split(jctx *c, const jstr *s, jv sep, jv maxsplit, uint32_t pos)
{
    if (sep.t != V_STR && sep.t != V_NONE) rkm_jinja__fail(c, pos, "sep argument must be a string or null");
    if (maxsplit.t != V_INT) rkm_jinja__fail(c, pos, "maxsplit argument must be a number");
    double ms = maxsplit.u.n;
    jv out = rkm_jinja__v_list(c, 0);
    if (sep.t == V_NONE) {
        size_t i = rkm_jinja__js_trim_start(s->s, s->len);
        while (i < s->len) {
            size_t st = i;
            while (i < s->len) {
                uint32_t cp;
                int l = rkm_jinja__u8_dec(s->s + i, s->len - i, &cp);
                if (rkm_jinja__js_space(cp)) break;
                i += (size_t)l;
            }
            if (ms != -1 && (double)out.u.l->n >= ms) {
                rkm_jinja__list_push(c, out.u.l, s_new(c, s->s + st, s->len - st));
                break;
            }
            rkm_jinja__list_push(c, out.u.l, s_new(c, s->s + st, i - st));
            i += rkm_jinja__js_trim_start(s->s + i, s->len - i);
        }
        return out;
    }
    const jstr *sp = sep.u.s;
    if (!sp->len) rkm_jinja__fail(c, pos, "empty separator");
    size_t i = 0;
    for (;;) {
        const char *f = rkm_jinja__mem_find(s->s + i, s->len - i, sp->s, sp->len);
        if (!f || (ms != -1 && (double)out.u.l->n >= ms)) {
            rkm_jinja__list_push(c, out.u.l, s_new(c, s->s + i, s->len - i));
            break;
        }
        rkm_jinja__list_push(c, out.u.l, s_new(c, s->s + i, (size_t)(f - (s->s + i))));
        i = (size_t)(f - s->s) + sp->len;
        if (out.u.l->n > MAX_LIST) rkm_jinja__fail(c, pos, "split: too many parts");
    }
    return out;
}

static jv str_strip(jctx *c, const jstr *s, int left, int right)
{
    size_t a = left ? rkm_jinja__js_trim_start(s->s, s->len) : 0;
    size_t b = right ? rkm_jinja__js_trim_end(s->s, s->len) : s->len;
    if (b < a) b = a;
    return s_new(c, s->s + a, b - a);
}

/* code point list of a string (slices and join iterate code points) */
size_t rkm_jinja__str_cps(jctx *c, const jstr *s, size_t **offs)
{
    size_t n = 0;
    size_t *o = rkm_jinja__alloc(c, (s->len + 1) * sizeof(size_t));
    for (size_t i = 0; i < s->len;) {
        uint32_t cp;
        o[n++] = i;
        i += (size_t)rkm_jinja__u8_dec(s->s + i, s->len - i, &cp);
    }
    o[n] = s->len;
    *offs = o;
    return n;
}

/* ---- methods of strings and dicts (bound as F_METHOD values) */

const char *const rkm_jinja__str_methods[] = {"upper", "lower", "strip", "title", "capitalize", "rstrip", "lstrip",
                                          "startswith", "endswith", "split", "replace", "find", NULL};
const char *const rkm_jinja__dict_methods[] = {"get", "items", "keys", "values", "dictsort", NULL};

jv rkm_jinja__mk_method(jctx *c, jv self, const char *const *names, const char *s, size_t n)
{
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n)) {
            jv v = {V_FUNC, {0}};
            v.u.f = rkm_jinja__alloc(c, sizeof(jfunc));
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
    jv out = rkm_jinja__v_list(c, d->n);
    for (size_t i = 0; i < d->n; i++) {
        jv pair = rkm_jinja__v_list(c, 2);
        rkm_jinja__list_push(c, pair.u.l, v_str(d->k[i]));
        rkm_jinja__list_push(c, pair.u.l, d->v[i]);
        rkm_jinja__list_push(c, out.u.l, pair);
    }
    return out;
}

typedef struct sort_spec {
    int reverse, case_sensitive, index; /* index: dictsort key (0) / value (1) */
    const jstr *attr;
} sort_spec;

static int cmp_sort(jctx *c, const void *pa, const void *pb, void *arg)
{
    const sort_spec *sp = arg;
    jv a = *(const jv *)pa, b = *(const jv *)pb;
    if (sp->index >= 0) {
        a = a.u.l->v[sp->index];
        b = b.u.l->v[sp->index];
    } else if (sp->attr) {
        a = rkm_jinja__get_attr_path(c, a, sp->attr);
        b = rkm_jinja__get_attr_path(c, b, sp->attr);
    }
    int r = rkm_jinja__compare_values(c, a, b, sp->case_sensitive);
    return sp->reverse ? -r : r;
}

static int bool_arg(jctx *c, jv v, const char *what, uint32_t pos)
{
    if (v.t != V_BOOL) rkm_jinja__fail(c, pos, "%s must be a boolean", what);
    return v.u.b;
}

jv rkm_jinja__call_dict_method(jctx *c, const char *m, jdict *d, const jargs *a, uint32_t pos)
{
    if (!strcmp(m, "get")) {
        jv key = rkm_jinja__arg_get(a, 0, NULL, UNDEF), v;
        if (key.t != V_STR) rkm_jinja__fail(c, pos, "object key must be a string: got %s", rkm_jinja__type_name(key));
        if (rkm_jinja__dict_get(d, key.u.s->s, key.u.s->len, &v)) return v;
        return a->n > 1 ? a->v[1] : NONE;
    }
    if (!strcmp(m, "items")) return dict_items(c, d);
    if (!strcmp(m, "keys")) {
        jv out = rkm_jinja__v_list(c, d->n);
        for (size_t i = 0; i < d->n; i++) rkm_jinja__list_push(c, out.u.l, v_str(d->k[i]));
        return out;
    }
    if (!strcmp(m, "values")) {
        jv out = rkm_jinja__v_list(c, d->n);
        for (size_t i = 0; i < d->n; i++) rkm_jinja__list_push(c, out.u.l, d->v[i]);
        return out;
    }
    /* dictsort(case_sensitive=false, by='key', reverse=false) */
    sort_spec sp = {0};
    sp.case_sensitive = bool_arg(c, rkm_jinja__arg_get(a, 0, "case_sensitive", v_bool(0)), "case_sensitive", pos);
    jv by = rkm_jinja__arg_get(a, 1, "by", UNDEF);
    sp.index = 0;
    if (by.t != V_UNDEF) {
        if (by.t != V_STR) rkm_jinja__fail(c, pos, "by must be a string");
        if (!strcmp(by.u.s->s, "value")) sp.index = 1;
        else if (strcmp(by.u.s->s, "key")) rkm_jinja__fail(c, pos, "by must be either 'key' or 'value'");
    }
    sp.reverse = bool_arg(c, rkm_jinja__arg_get(a, 2, "reverse", v_bool(0)), "reverse", pos);
    jv items = dict_items(c, d);
    rkm_jinja__merge_sort(c, items.u.l->v, items.u.l->n, sizeof(jv), cmp_sort, &sp);
    return items;
}

jv rkm_jinja__call_str_method(jctx *c, const char *m, const jstr *s, const jargs *a, uint32_t pos)
{
    if (!strcmp(m, "upper")) return v_str(rkm_jinja__str_case(c, s->s, s->len, 1));
    if (!strcmp(m, "lower")) return v_str(rkm_jinja__str_case(c, s->s, s->len, 0));
    if (!strcmp(m, "strip")) return str_strip(c, s, 1, 1); /* like @huggingface/jinja: argument ignored */
    if (!strcmp(m, "lstrip")) return str_strip(c, s, 1, 0);
    if (!strcmp(m, "rstrip")) return str_strip(c, s, 0, 1);
    if (!strcmp(m, "title")) return v_str(title_case(c, s));
    if (!strcmp(m, "capitalize")) {
        if (!s->len) return v_str((jstr *)s);
        uint32_t cp;
        int l = rkm_jinja__u8_dec(s->s, s->len, &cp);
        jstr *first = rkm_jinja__str_case(c, s->s, (size_t)l, 1);
        rkm_buf *b = rkm_jinja__buf_new(c);
        rkm_jinja__buf_add(c, b, first->s, first->len);
        rkm_jinja__buf_add(c, b, s->s + l, s->len - (size_t)l);
        return v_str(rkm_jinja__buf_str(c, b));
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        int ends = m[0] == 'e';
        if (a->n == 0) rkm_jinja__fail(c, pos, "%s() requires at least one argument", m);
        jv p = a->v[0];
        if (p.t == V_STR) return v_bool(ends ? str_ends(s, p.u.s) : str_starts(s, p.u.s));
        if (p.t == V_LIST) {
            for (size_t i = 0; i < p.u.l->n; i++) {
                jv x = p.u.l->v[i];
                if (x.t != V_STR) rkm_jinja__fail(c, pos, "%s() tuple elements must be strings", m);
                if (ends ? str_ends(s, x.u.s) : str_starts(s, x.u.s)) return v_bool(1);
            }
            return v_bool(0);
        }
        rkm_jinja__fail(c, pos, "%s() argument must be a string or tuple of strings", m);
    }
    if (!strcmp(m, "split")) return str_split(c, s, rkm_jinja__arg_get(a, 0, NULL, NONE), rkm_jinja__arg_get(a, 1, NULL, v_int(-1)), pos);
    if (!strcmp(m, "replace")) {
        if (a->n < 2) rkm_jinja__fail(c, pos, "replace() requires at least two arguments");
        if (a->v[0].t != V_STR || a->v[1].t != V_STR) rkm_jinja__fail(c, pos, "replace() arguments must be strings");
        jv count = rkm_jinja__arg_get(a, 2, "count", NONE);
        if (count.t != V_INT && count.t != V_NONE) rkm_jinja__fail(c, pos, "replace() count argument must be a number or null");
        return str_replace(c, s, a->v[0].u.s, a->v[1].u.s, count.t == V_NONE ? -1 : count.u.n);
    }
    /* find (extension, Python semantics: code point index or -1) */
    jv sub = rkm_jinja__arg_get(a, 0, NULL, UNDEF);
    if (sub.t != V_STR) rkm_jinja__fail(c, pos, "find() argument must be a string");
    const char *f = rkm_jinja__mem_find(s->s, s->len, sub.u.s->s, sub.u.s->len);
    if (!f) return v_int(-1);
    size_t k = 0;
    for (size_t i = 0; i < (size_t)(f - s->s);) {
        uint32_t cp;
        i += (size_t)rkm_jinja__u8_dec(s->s + i, s->len - i, &cp);
        k++;
    }
    return v_int((double)k);
}

/* ---- tests */

int rkm_jinja__run_test(jctx *c, const node *t, jv v, jenv *e)
{
    const char *n = t->s;
    size_t l = t->len;
#define IS(s) (l == strlen(s) && !memcmp(n, s, l))
    jargs a = {0};
    if (t->n) rkm_jinja__eval_args(c, t->v, t->n, e, &a);
    if (IS("boolean")) return v.t == V_BOOL;
    if (IS("callable")) return v.t == V_FUNC;
    if (IS("odd") || IS("even")) {
        if (v.t != V_INT) rkm_jinja__fail(c, t->pos, "cannot %.*s on %s", (int)l, n, rkm_jinja__type_name(v));
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
        jstr *x = rkm_jinja__str_case(c, v.u.s->s, v.u.s->len, IS("upper"));
        return x->len == v.u.s->len && !memcmp(x->s, v.u.s->s, x->len);
    }
    if (IS("defined")) return v.t != V_UNDEF;
    if (IS("undefined")) return v.t == V_UNDEF;
    /* with an argument (absent from @huggingface/jinja, where `is eq`
     * without one compares with undefined) */
    jv arg = a.n ? a.v[0] : UNDEF;
    if (IS("equalto") || IS("eq") || IS("sameas")) return rkm_jinja__strict_eq(v, arg);
    if (IS("ne")) return !rkm_jinja__strict_eq(v, arg);
    if (IS("divisibleby")) {
        if (!is_num(v) || !is_num(arg)) rkm_jinja__fail(c, t->pos, "divisibleby needs numbers");
        return arg.u.n != 0 && fmod(v.u.n, arg.u.n) == 0;
    }
    if (IS("gt") || IS("lt") || IS("ge") || IS("le")) {
        if (!is_num(v) || !is_num(arg)) rkm_jinja__fail(c, t->pos, "%.*s needs numbers", (int)l, n);
        return IS("gt") ? v.u.n > arg.u.n : IS("lt") ? v.u.n < arg.u.n : IS("ge") ? v.u.n >= arg.u.n : v.u.n <= arg.u.n;
    }
    if (IS("in")) {
        if (arg.t == V_LIST) {
            for (size_t i = 0; i < arg.u.l->n; i++)
                if (rkm_jinja__strict_eq(arg.u.l->v[i], v)) return 1;
            return 0;
        }
        if (arg.t == V_STR && v.t == V_STR) return rkm_jinja__mem_find(arg.u.s->s, arg.u.s->len, v.u.s->s, v.u.s->len) != NULL;
        if (arg.t == V_DICT && v.t == V_STR) return rkm_jinja__dict_find(arg.u.d, v.u.s->s, v.u.s->len) >= 0;
        rkm_jinja__fail(c, t->pos, "'in' test needs a container");
    }
#undef IS
    rkm_jinja__fail(c, t->pos, "unknown test '%.*s'", (int)RKM_MIN(l, 64), n);
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
    if (!strcmp(n, "equalto") || !strcmp(n, "eq") || !strcmp(n, "sameas")) return rkm_jinja__strict_eq(v, arg);
    if (!strcmp(n, "ne")) return !rkm_jinja__strict_eq(v, arg);
    return rkm_jinja__run_test(c, &t, v, e);
}

/* ---- filters (the dispatch mirrors @huggingface/jinja's applyFilter) */

static int name_is(const node *n, const char *s) { return n->len == strlen(s) && !memcmp(n->s, s, n->len); }

static jv tojson_filter(jctx *c, jv v, const jargs *a, uint32_t pos)
{
    json_opts o = {0};
    jv ind = rkm_jinja__arg_get(a, -1, "indent", NONE);
    if (ind.t != V_INT && ind.t != V_NONE) rkm_jinja__fail(c, pos, "if set, indent must be a number");
    if (ind.t == V_INT) {
        if (ind.u.n < 0 || ind.u.n > 64) rkm_jinja__fail(c, pos, "tojson: invalid indent");
        o.indent = (int)ind.u.n;
    }
    o.ensure_ascii = bool_arg(c, rkm_jinja__arg_get(a, -1, "ensure_ascii", v_bool(0)), "ensure_ascii", pos);
    o.sort_keys = bool_arg(c, rkm_jinja__arg_get(a, -1, "sort_keys", v_bool(0)), "sort_keys", pos);
    jv sep = rkm_jinja__arg_get(a, -1, "separators", NONE);
    if (sep.t == V_LIST) {
        if (sep.u.l->n != 2 || sep.u.l->v[0].t != V_STR || sep.u.l->v[1].t != V_STR)
            rkm_jinja__fail(c, pos, "separators must be a tuple of two strings");
        o.item_sep = sep.u.l->v[0].u.s->s;
        o.key_sep = sep.u.l->v[1].u.s->s;
    } else if (sep.t != V_NONE) {
        rkm_jinja__fail(c, pos, "if set, separators must be a tuple of two strings");
    }
    rkm_buf *b = rkm_jinja__buf_new(c);
    rkm_jinja__to_json(c, b, v, &o, 0, 1);
    return v_str(rkm_jinja__buf_str(c, b));
}

static jv indent_str(jctx *c, const jstr *s, int width, int first, int blank)
{
    rkm_buf *b = rkm_jinja__buf_new(c);
    size_t i = 0;
    int line = 0;
    for (;;) {
        const char *nl = memchr(s->s + i, '\n', s->len - i);
        size_t end = nl ? (size_t)(nl - s->s) : s->len;
        int skip = (!first && line == 0) || (!blank && end == i);
        if (!skip)
            for (int k = 0; k < width; k++) buf_addc(c, b, ' ');
        rkm_jinja__buf_add(c, b, s->s + i, end - i);
        if (!nl) break;
        buf_addc(c, b, '\n');
        i = end + 1;
        line++;
    }
    return v_str(rkm_jinja__buf_str(c, b));
}

static jv join_list(jctx *c, const jlist *l, const jstr *sep)
{
    rkm_buf *b = rkm_jinja__buf_new(c);
    for (size_t i = 0; i < l->n; i++) {
        if (i && sep) rkm_jinja__buf_add(c, b, sep->s, sep->len);
        rkm_jinja__raw_str(c, b, l->v[i]);
    }
    return v_str(rkm_jinja__buf_str(c, b));
}

/* Filters Python Jinja2 has and @huggingface/jinja lacks (where it would
 * fail, so adding them changes no reference output). Returns 0 when name is
 * not one of them. */
static int extension_filter(jctx *c, jv v, const node *f, jenv *e, jv *out)
{
    const node *n = f->k == N_CALL ? f->a : f;
    if (n->k != N_IDENT) return 0;
    jargs a = {0};
    if (name_is(n, "round")) {
        if (f->k == N_CALL) rkm_jinja__eval_args(c, f->v, f->n, e, &a);
        if (!is_num(v) && v.t != V_BOOL) rkm_jinja__fail(c, f->pos, "round needs a number, got %s", rkm_jinja__type_name(v));
        double x = v.t == V_BOOL ? v.u.b : v.u.n;
        jv prec = rkm_jinja__arg_get(&a, 0, "precision", v_int(0)), meth = rkm_jinja__arg_get(&a, 1, "method", UNDEF);
        if (prec.t != V_INT || prec.u.n < 0 || prec.u.n > 15) rkm_jinja__fail(c, f->pos, "round: precision must be an integer 0..15");
        double m = pow(10, prec.u.n), y = x * m;
        const char *how = meth.t == V_STR ? meth.u.s->s : "common";
        if (!strcmp(how, "common")) y = nearbyint(y); /* Python round(): ties to even */
        else if (!strcmp(how, "floor")) y = floor(y);
        else if (!strcmp(how, "ceil")) y = ceil(y);
        else rkm_jinja__fail(c, f->pos, "round: method must be common, floor or ceil");
        *out = v_float(y / m);
        return 1;
    }
    if (name_is(n, "e") || name_is(n, "escape")) {
        jstr *s = rkm_jinja__display_str(c, v);
        rkm_buf *b = rkm_jinja__buf_new(c);
        for (size_t i = 0; i < s->len; i++) {
            switch (s->s[i]) {
            case '&': buf_adds(c, b, "&amp;"); break;
            case '<': buf_adds(c, b, "&lt;"); break;
            case '>': buf_adds(c, b, "&gt;"); break;
            case '"': buf_adds(c, b, "&#34;"); break;
            case '\'': buf_adds(c, b, "&#39;"); break;
            default: buf_addc(c, b, s->s[i]);
            }
        }
        *out = v_str(rkm_jinja__buf_str(c, b));
        return 1;
    }
    if (name_is(n, "count")) {
        if (v.t == V_LIST) *out = v_int((double)v.u.l->n);
        else if (v.t == V_DICT) *out = v_int((double)v.u.d->n);
        else if (v.t == V_STR) *out = v_int((double)rkm_jinja__u16_len(v.u.s->s, v.u.s->len));
        else rkm_jinja__fail(c, f->pos, "count needs a sequence, got %s", rkm_jinja__type_name(v));
        return 1;
    }
    if (name_is(n, "batch")) {
        if (f->k == N_CALL) rkm_jinja__eval_args(c, f->v, f->n, e, &a);
        jv cnt = rkm_jinja__arg_get(&a, 0, "linecount", UNDEF), fill = rkm_jinja__arg_get(&a, 1, "fill_with", UNDEF);
        if (v.t != V_LIST) rkm_jinja__fail(c, f->pos, "batch needs a list, got %s", rkm_jinja__type_name(v));
        if (cnt.t != V_INT || cnt.u.n < 1) rkm_jinja__fail(c, f->pos, "batch: linecount must be a positive integer");
        size_t k = cnt.u.n > (double)MAX_LIST ? MAX_LIST : (size_t)cnt.u.n;
        jv res = rkm_jinja__v_list(c, 0), cur = UNDEF;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (cur.t == V_UNDEF || cur.u.l->n == k) {
                cur = rkm_jinja__v_list(c, 0);
                rkm_jinja__list_push(c, res.u.l, cur);
            }
            rkm_jinja__list_push(c, cur.u.l, v.u.l->v[i]);
        }
        if (fill.t != V_UNDEF && cur.t == V_LIST)
            while (cur.u.l->n < k) rkm_jinja__list_push(c, cur.u.l, fill);
        *out = res;
        return 1;
    }
    return 0;
}

jv rkm_jinja__apply_filter(jctx *c, jv v, const node *f, jenv *e)
{
    rkm_jinja__step(c, f);
    jv ext;
    if (extension_filter(c, v, f, e, &ext)) return ext;
    if (f->k == N_IDENT) {
        const node *n = f;
        if (name_is(n, "safe")) return v;
        if (name_is(n, "tojson")) {
            jargs none = {0};
            return tojson_filter(c, v, &none, f->pos);
        }
        if (v.t == V_LIST) {
            jlist *l = v.u.l;
            if (name_is(n, "list")) return v;
            if (name_is(n, "first")) return l->n ? l->v[0] : UNDEF;
            if (name_is(n, "last")) return l->n ? l->v[l->n - 1] : UNDEF;
            if (name_is(n, "length")) return v_int((double)l->n);
            if (name_is(n, "reverse")) {
                jv out = rkm_jinja__v_list(c, l->n);
                for (size_t i = l->n; i-- > 0;) rkm_jinja__list_push(c, out.u.l, l->v[i]);
                return out;
            }
            if (name_is(n, "sort")) {
                jv out = rkm_jinja__v_list(c, l->n);
                for (size_t i = 0; i < l->n; i++) rkm_jinja__list_push(c, out.u.l, l->v[i]);
                sort_spec sp = {0, 0, -1, NULL};
                rkm_jinja__merge_sort(c, out.u.l->v, out.u.l->n, sizeof(jv), cmp_sort, &sp);
                return out;
            }
            if (name_is(n, "join")) return join_list(c, l, NULL);
            if (name_is(n, "string")) return v_str(rkm_jinja__display_str(c, v));
            if (name_is(n, "unique")) {
                jv out = rkm_jinja__v_list(c, 0);
                for (size_t i = 0; i < l->n; i++) {
                    int seen = 0;
                    for (size_t j = 0; j < out.u.l->n && !seen; j++) seen = rkm_jinja__strict_eq(out.u.l->v[j], l->v[i]) || (is_num(l->v[i]) && isnan(l->v[i].u.n) && is_num(out.u.l->v[j]) && isnan(out.u.l->v[j].u.n));
                    if (!seen) rkm_jinja__list_push(c, out.u.l, l->v[i]);
                    rkm_jinja__step(c, f);
                }
                return out;
            }
            rkm_jinja__fail(c, f->pos, "unknown ArrayValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        if (v.t == V_STR) {
            jstr *s = v.u.s;
            if (name_is(n, "length")) return v_int((double)rkm_jinja__u16_len(s->s, s->len));
            if (name_is(n, "upper")) return v_str(rkm_jinja__str_case(c, s->s, s->len, 1));
            if (name_is(n, "lower")) return v_str(rkm_jinja__str_case(c, s->s, s->len, 0));
            if (name_is(n, "title") || name_is(n, "capitalize")) {
                jargs none = {0};
                return rkm_jinja__call_str_method(c, name_is(n, "title") ? "title" : "capitalize", s, &none, f->pos);
            }
            if (name_is(n, "trim")) return str_strip(c, s, 1, 1);
            if (name_is(n, "indent")) return indent_str(c, s, 4, 0, 0);
            if (name_is(n, "join") || name_is(n, "string")) return v;
            if (name_is(n, "int")) {
                double x = rkm_jinja__js_parse_int(s->s, s->len);
                return v_int(isnan(x) ? 0 : x);
            }
            if (name_is(n, "float")) {
                double x = rkm_jinja__js_parse_float(s->s, s->len);
                return v_float(isnan(x) ? 0 : x);
            }
            rkm_jinja__fail(c, f->pos, "unknown StringValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        if (is_num(v)) {
            if (name_is(n, "abs")) { jv r = v; r.u.n = fabs(v.u.n); return r; }
            if (name_is(n, "int")) return v_int(floor(v.u.n));
            if (name_is(n, "float")) return v_float(v.u.n);
            if (name_is(n, "string")) return v_str(rkm_jinja__display_str(c, v));
            rkm_jinja__fail(c, f->pos, "unknown NumericValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        if (v.t == V_DICT) {
            if (name_is(n, "items")) return dict_items(c, v.u.d);
            if (name_is(n, "length")) return v_int((double)v.u.d->n);
            jv m = rkm_jinja__mk_method(c, v, rkm_jinja__dict_methods, n->s, n->len);
            if (m.t == V_FUNC) {
                jargs none = {0};
                return rkm_jinja__call_dict_method(c, m.u.f->method, v.u.d, &none, f->pos);
            }
            rkm_jinja__fail(c, f->pos, "unknown ObjectValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        if (v.t == V_BOOL) {
            if (name_is(n, "bool")) return v;
            if (name_is(n, "int")) return v_int(v.u.b);
            if (name_is(n, "float")) return v_float(v.u.b);
            if (name_is(n, "string")) return v_str(str_cstr(c, v.u.b ? "true" : "false"));
            rkm_jinja__fail(c, f->pos, "unknown BooleanValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
        }
        rkm_jinja__fail(c, f->pos, "cannot apply filter \"%.*s\" to type: %s", (int)RKM_MIN(n->len, 64), n->s, rkm_jinja__type_name(v));
    }
    if (f->k != N_CALL || f->a->k != N_IDENT) rkm_jinja__fail(c, f->pos, "unknown filter");
    const node *n = f->a;
    jargs a;
    if (name_is(n, "tojson")) {
        rkm_jinja__eval_args(c, f->v, f->n, e, &a);
        return tojson_filter(c, v, &a, f->pos);
    }
    if (name_is(n, "join")) {
        if (v.t != V_STR && v.t != V_LIST) rkm_jinja__fail(c, f->pos, "cannot apply filter \"join\" to type: %s", rkm_jinja__type_name(v));
        rkm_jinja__eval_args(c, f->v, f->n, e, &a);
        jv sep = rkm_jinja__arg_get(&a, 0, "separator", UNDEF);
        if (sep.t == V_UNDEF) sep = v_str(rkm_jinja__str_new(c, "", 0));
        if (sep.t != V_STR) rkm_jinja__fail(c, f->pos, "separator must be a string");
        if (v.t == V_LIST) return join_list(c, v.u.l, sep.u.s);
        size_t *o;
        size_t k = rkm_jinja__str_cps(c, v.u.s, &o);
        rkm_buf *b = rkm_jinja__buf_new(c);
        for (size_t i = 0; i < k; i++) {
            if (i) rkm_jinja__buf_add(c, b, sep.u.s->s, sep.u.s->len);
            rkm_jinja__buf_add(c, b, v.u.s->s + o[i], o[i + 1] - o[i]);
        }
        return v_str(rkm_jinja__buf_str(c, b));
    }
    if (name_is(n, "int") || name_is(n, "float")) {
        int is_int = name_is(n, "int");
        rkm_jinja__eval_args(c, f->v, f->n, e, &a);
        jv def = rkm_jinja__arg_get(&a, 0, "default", is_int ? v_int(0) : v_float(0));
        if (v.t == V_STR) {
            double x = is_int ? rkm_jinja__js_parse_int(v.u.s->s, v.u.s->len) : rkm_jinja__js_parse_float(v.u.s->s, v.u.s->len);
            return isnan(x) ? def : is_int ? v_int(x) : v_float(x);
        }
        if (is_num(v)) return v;
        if (v.t == V_BOOL) return is_int ? v_int(v.u.b) : v_float(v.u.b);
        rkm_jinja__fail(c, f->pos, "cannot apply filter \"%s\" to type: %s", is_int ? "int" : "float", rkm_jinja__type_name(v));
    }
    if (name_is(n, "default") || name_is(n, "d")) {
        rkm_jinja__eval_args(c, f->v, f->n, e, &a);
        jv def = a.n > 0 ? a.v[0] : v_str(rkm_jinja__str_new(c, "", 0));
        int boolean = bool_arg(c, rkm_jinja__arg_get(&a, 1, "boolean", v_bool(0)), "`default` filter flag", f->pos);
        if (v.t == V_UNDEF || (boolean && !rkm_jinja__truthy(v))) return def;
        return v;
    }
    if (v.t == V_LIST) {
        jlist *l = v.u.l;
        if (name_is(n, "sort")) {
            rkm_jinja__eval_args(c, f->v, f->n, e, &a);
            sort_spec sp = {0};
            sp.index = -1;
            sp.reverse = bool_arg(c, rkm_jinja__arg_get(&a, 0, "reverse", v_bool(0)), "reverse", f->pos);
            sp.case_sensitive = bool_arg(c, rkm_jinja__arg_get(&a, 1, "case_sensitive", v_bool(0)), "case_sensitive", f->pos);
            jv attr = rkm_jinja__arg_get(&a, 2, "attribute", NONE);
            if (attr.t == V_STR) sp.attr = attr.u.s;
            else if (attr.t == V_INT) sp.attr = rkm_jinja__display_str(c, attr);
            else if (attr.t != V_NONE) rkm_jinja__fail(c, f->pos, "attribute must be a string, integer, or null");
            jv out = rkm_jinja__v_list(c, l->n);
            for (size_t i = 0; i < l->n; i++) rkm_jinja__list_push(c, out.u.l, l->v[i]);
            rkm_jinja__merge_sort(c, out.u.l->v, out.u.l->n, sizeof(jv), cmp_sort, &sp);
            return out;
        }
        if (name_is(n, "selectattr") || name_is(n, "rejectattr")) {
            int sel = name_is(n, "selectattr");
            for (size_t i = 0; i < l->n; i++)
                if (l->v[i].t != V_DICT && l->v[i].t != V_NS)
                    rkm_jinja__fail(c, f->pos, "`%s` can only be applied to array of objects", sel ? "selectattr" : "rejectattr");
            for (int i = 0; i < f->n; i++)
                if (f->v[i]->k != N_STR) rkm_jinja__fail(c, f->pos, "arguments of `%s` must be strings", sel ? "selectattr" : "rejectattr");
            if (f->n < 1) rkm_jinja__fail(c, f->pos, "`%s` needs an attribute name", sel ? "selectattr" : "rejectattr");
            jstr *attr = rkm_jinja__str_new(c, f->v[0]->s, f->v[0]->len);
            jstr *test = f->n > 1 ? rkm_jinja__str_new(c, f->v[1]->s, f->v[1]->len) : NULL;
            jv arg = f->n > 2 ? s_new(c, f->v[2]->s, f->v[2]->len) : UNDEF;
            jv out = rkm_jinja__v_list(c, 0);
            for (size_t i = 0; i < l->n; i++) {
                rkm_jinja__step(c, f);
                jv x;
                int r = 0;
                if (rkm_jinja__dict_get(l->v[i].u.d, attr->s, attr->len, &x)) r = test ? named_test(c, test, x, arg, f->pos, e) : rkm_jinja__truthy(x);
                if (r == sel) rkm_jinja__list_push(c, out.u.l, l->v[i]);
            }
            return out;
        }
        if (name_is(n, "map")) {
            rkm_jinja__eval_args(c, f->v, f->n, e, &a);
            jv attr;
            if (!rkm_jinja__dict_get(&a.kw, "attribute", 9, &attr))
                rkm_jinja__fail(c, f->pos, "`map` expressions without `attribute` set are not currently supported");
            if (attr.t != V_STR) rkm_jinja__fail(c, f->pos, "attribute must be a string");
            jv def;
            int has_def = rkm_jinja__dict_get(&a.kw, "default", 7, &def);
            jv out = rkm_jinja__v_list(c, l->n);
            for (size_t i = 0; i < l->n; i++) {
                if (l->v[i].t != V_DICT && l->v[i].t != V_NS) rkm_jinja__fail(c, f->pos, "items in map must be an object");
                jv x = rkm_jinja__get_attr_path(c, l->v[i], attr.u.s);
                rkm_jinja__list_push(c, out.u.l, x.t == V_UNDEF && has_def ? def : x);
            }
            return out;
        }
        rkm_jinja__fail(c, f->pos, "unknown ArrayValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
    }
    if (v.t == V_STR) {
        if (name_is(n, "indent")) {
            rkm_jinja__eval_args(c, f->v, f->n, e, &a);
            jv w = rkm_jinja__arg_get(&a, 0, "width", v_int(4));
            if (w.t != V_INT) rkm_jinja__fail(c, f->pos, "width must be a number");
            if (w.u.n < 0 || w.u.n > 1024) rkm_jinja__fail(c, f->pos, "indent: width out of range");
            return indent_str(c, v.u.s, (int)w.u.n, rkm_jinja__truthy(rkm_jinja__arg_get(&a, 1, "first", v_bool(0))),
                              rkm_jinja__truthy(rkm_jinja__arg_get(&a, 2, "blank", v_bool(0))));
        }
        if (name_is(n, "replace")) {
            rkm_jinja__eval_args(c, f->v, f->n, e, &a);
            return rkm_jinja__call_str_method(c, "replace", v.u.s, &a, f->pos);
        }
        rkm_jinja__fail(c, f->pos, "unknown StringValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
    }
    if (v.t == V_DICT) {
        jv m = rkm_jinja__mk_method(c, v, rkm_jinja__dict_methods, n->s, n->len);
        if (m.t == V_FUNC) {
            rkm_jinja__eval_args(c, f->v, f->n, e, &a);
            return rkm_jinja__call_dict_method(c, m.u.f->method, v.u.d, &a, f->pos);
        }
        rkm_jinja__fail(c, f->pos, "unknown ObjectValue filter: %.*s", (int)RKM_MIN(n->len, 64), n->s);
    }
    rkm_jinja__fail(c, f->pos, "cannot apply filter \"%.*s\" to type: %s", (int)RKM_MIN(n->len, 64), n->s, rkm_jinja__type_name(v));
}
