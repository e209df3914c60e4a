/*
 * jinja_eval.c - the tree-walking renderer: environments, member access
 * and calls (macros, caller, the globals range/namespace/strftime_now/
 * raise_exception), operators, expressions, statements (for/if/set/macro/
 * call/filter blocks), and the API's rkm_jinja_render with the conversion
 * of the JSON variables.
 *
 * Threads: each render owns one context (malloc'd: its jmp_buf is large)
 * and reads the parsed template only, so renders of one template may run
 * at once. Ownership: values live in the render's arena, freed when the
 * render returns; the result string is malloc'd for the caller. Work,
 * memory and depth are bounded by rkm_jinja_limits.
 */
#include "text/jinja_impl.h"

#include <time.h>

/* ------------------------------------------------------------ renderer */

static jv eval(jctx *c, const node *n, jenv *e);
static int exec_block(jctx *c, node *const *v, int n, jenv *e, rkm_buf *out);

static jenv *env_new(jctx *c, jenv *parent)
{
    jenv *e = rkm_jinja__alloc(c, sizeof(jenv));
    memset(e, 0, sizeof *e);
    e->parent = parent;
    return e;
}

static void env_set(jctx *c, jenv *e, const char *name, size_t len, jv v)
{
    long i = rkm_jinja__dict_find(&e->vars, name, len);
    if (i >= 0) { e->vars.v[i] = v; return; }
    rkm_jinja__dict_set(c, &e->vars, rkm_jinja__str_new(c, name, len), v);
}

static jv env_get(jenv *e, const char *name, size_t len)
{
    for (; e; e = e->parent) {
        jv v;
        if (rkm_jinja__dict_get(&e->vars, name, len, &v)) return v;
    }
    return UNDEF;
}

void rkm_jinja__step(jctx *c, const node *n)
{
    if (++c->steps > c->max_steps) rkm_jinja__fail(c, n ? n->pos : NOPOS, "template takes too many steps (limit %zu)", c->max_steps);
}

/* Arguments of a call: positional values and keyword values. */

void rkm_jinja__eval_args(jctx *c, node *const *v, int n, jenv *e, jargs *a)
{
    memset(a, 0, sizeof *a);
    a->v = rkm_jinja__alloc(c, (size_t)(n + 1) * sizeof(jv));
    for (int i = 0; i < n; i++)
        if (v[i]->k != N_KWARG) a->v[a->n++] = eval(c, v[i], e);
    for (int i = 0; i < n; i++)
        if (v[i]->k == N_KWARG) {
            if (rkm_jinja__dict_find(&a->kw, v[i]->s, v[i]->len) >= 0)
                rkm_jinja__fail(c, v[i]->pos, "got multiple values for keyword argument '%.*s'", (int)RKM_MIN(v[i]->len, 64), v[i]->s);
            rkm_jinja__dict_set(c, &a->kw, rkm_jinja__str_new(c, v[i]->s, v[i]->len), eval(c, v[i]->a, e));
        }
}

jv rkm_jinja__arg_get(const jargs *a, int i, const char *kw, jv def)
{
    jv v;
    if (i >= 0 && i < a->n) return a->v[i];
    if (kw && rkm_jinja__dict_get(&a->kw, kw, strlen(kw), &v)) return v;
    return def;
}

/* ---- member access */

jv rkm_jinja__get_attr_path(jctx *c, jv item, const jstr *path)
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
            if (!rkm_jinja__dict_get(v.u.d, part, pl, &v)) v = UNDEF;
        } else if (v.t == V_LIST) {
            double idx = rkm_jinja__js_parse_int(part, pl);
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
        if (prop.t != V_STR) rkm_jinja__fail(c, pos, "cannot access property with non-string: got %s", rkm_jinja__type_name(prop));
        jv v;
        if (rkm_jinja__dict_get(obj.u.d, prop.u.s->s, prop.u.s->len, &v)) return v;
        if (obj.t == V_DICT) return rkm_jinja__mk_method(c, obj, rkm_jinja__dict_methods, prop.u.s->s, prop.u.s->len);
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
            size_t n = rkm_jinja__str_cps(c, obj.u.s, &o);
            double u = (double)rkm_jinja__u16_len(obj.u.s->s, obj.u.s->len);
            if (i < 0) i += u;
            if (i < 0 || i >= u || isnan(i)) return UNDEF;
            size_t k = 0, unit = 0;
            for (; k < n; k++) {
                uint32_t cp;
                rkm_jinja__u8_dec(obj.u.s->s + o[k], o[k + 1] - o[k], &cp);
                size_t w = cp >= 0x10000 ? 2 : 1;
                if ((double)(unit + w) > i) break;
                unit += w;
            }
            return s_new(c, obj.u.s->s + o[k], o[k + 1] - o[k]);
        }
        if (prop.t == V_STR) {
            if (prop.u.s->len == 6 && !memcmp(prop.u.s->s, "length", 6))
                return v_int(obj.t == V_LIST ? (double)obj.u.l->n : (double)rkm_jinja__u16_len(obj.u.s->s, obj.u.s->len));
            if (obj.t == V_STR) return rkm_jinja__mk_method(c, obj, rkm_jinja__str_methods, prop.u.s->s, prop.u.s->len);
            return UNDEF;
        }
        rkm_jinja__fail(c, pos, "cannot access property with non-string/non-number: got %s", rkm_jinja__type_name(prop));
    }
    if (prop.t != V_STR) rkm_jinja__fail(c, pos, "cannot access property with non-string: got %s", rkm_jinja__type_name(prop));
    return UNDEF;
}

static jv eval_slice(jctx *c, jv obj, const node *sl, jenv *e)
{
    if (obj.t != V_LIST && obj.t != V_STR) rkm_jinja__fail(c, sl->pos, "slice object must be an array or string");
    jv st = sl->a ? eval(c, sl->a, e) : UNDEF, sp = sl->b ? eval(c, sl->b, e) : UNDEF, stp = sl->c ? eval(c, sl->c, e) : UNDEF;
    if ((st.t != V_INT && st.t != V_UNDEF) || (sp.t != V_INT && sp.t != V_UNDEF) || (stp.t != V_INT && stp.t != V_UNDEF))
        rkm_jinja__fail(c, sl->pos, "slice indices must be integers or undefined");
    size_t *offs = NULL;
    double len = obj.t == V_LIST ? (double)obj.u.l->n : (double)rkm_jinja__str_cps(c, obj.u.s, &offs);
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
    jv out = obj.t == V_LIST ? rkm_jinja__v_list(c, 0) : UNDEF;
    rkm_buf *b = rkm_jinja__buf_new(c);
    for (double i = start; dir * i < dir * stop; i += step_v) {
        rkm_jinja__step(c, sl);
        size_t k = (size_t)i;
        if (obj.t == V_LIST) rkm_jinja__list_push(c, out.u.l, obj.u.l->v[k]);
        else rkm_jinja__buf_add(c, b, obj.u.s->s + offs[k], offs[k + 1] - offs[k]);
    }
    if (obj.t == V_STR) return v_str(rkm_jinja__buf_str(c, b));
    return out;
}

/* ---- calls */

static void bind_params(jctx *c, const char *name, node *const *params, int np, int special, const jargs *a, jenv *scope)
{
    jdict kw = a->kw; /* shallow copy: entries are removed as they bind */
    jdict rest = {0};
    int *used = rkm_jinja__alloc(c, (kw.n + 1) * sizeof(int));
    memset(used, 0, (kw.n + 1) * sizeof(int));
    for (int i = 0; i < np; i++) {
        const node *p = params[i];
        jv v = UNDEF;
        int have = 0;
        if (i < a->n) { v = a->v[i]; have = 1; }
        if (!have) {
            long k = rkm_jinja__dict_find(&kw, p->s, p->len);
            if (k >= 0) { v = kw.v[k]; used[k] = 1; have = 1; }
        }
        env_set(c, scope, p->s, p->len, v);
    }
    for (size_t k = 0; k < kw.n; k++)
        if (!used[k]) rkm_jinja__dict_set(c, &rest, kw.k[k], kw.v[k]);
    if (special & 1) {
        jv d = rkm_jinja__v_dict(c, V_DICT);
        *d.u.d = rest;
        env_set(c, scope, "kwargs", 6, d);
    } else if (rest.n) {
        rkm_jinja__fail(c, NOPOS, "macro %s takes no keyword argument '%s'", name, rest.k[0]->s);
    }
    if (special & 2) {
        jv l = rkm_jinja__v_list(c, 0);
        for (int i = np; i < a->n; i++) rkm_jinja__list_push(c, l.u.l, a->v[i]);
        env_set(c, scope, "varargs", 7, l);
    } else if (a->n > np) {
        rkm_jinja__fail(c, NOPOS, "macro %s takes not more than %d argument(s)", name, np);
    }
    for (int i = 0; i < np; i++) { /* defaults, in the macro's scope */
        const node *p = params[i];
        if (p->k != N_KWARG) continue;
        int given = i < a->n || rkm_jinja__dict_find(&kw, p->s, p->len) >= 0;
        if (!given) env_set(c, scope, p->s, p->len, eval(c, p->a, scope));
    }
}

static jv call_global(jctx *c, int kind, const jargs *a, uint32_t pos)
{
    if (kind == F_RAISE) {
        rkm_buf *b = rkm_jinja__buf_new(c);
        if (a->n) rkm_jinja__raw_str(c, b, a->v[0]);
        snprintf(c->msg, sizeof c->msg, "%s", b->data ? b->data : "");
        c->code = RKM_EINVAL;
        longjmp(c->jb, 1);
    }
    if (kind == F_RANGE) {
        for (int i = 0; i < a->n; i++)
            if (!is_num(a->v[i]) && a->v[i].t != V_BOOL) rkm_jinja__fail(c, pos, "range() arguments must be numbers");
        if (a->n < 1) rkm_jinja__fail(c, pos, "range() expects at least one argument");
#define NUMOF(v) ((v).t == V_BOOL ? (double)(v).u.b : (v).u.n)
        double start = NUMOF(a->v[0]), stop, stp = a->n > 2 ? NUMOF(a->v[2]) : 1;
        if (a->n > 1) stop = NUMOF(a->v[1]);
        else { stop = start; start = 0; }
#undef NUMOF
        if (stp == 0) rkm_jinja__fail(c, pos, "range() step must not be zero");
        double cnt = stp > 0 ? ceil((stop - start) / stp) : ceil((start - stop) / -stp);
        if (cnt > MAX_LIST) rkm_jinja__fail(c, pos, "range() of more than %d items", MAX_LIST);
        jv out = rkm_jinja__v_list(c, cnt > 0 ? (size_t)cnt : 0);
        /* the count bound also ends loops where i += stp no longer moves i */
        size_t max_n = cnt > 0 ? (size_t)cnt : 0;
        if (stp > 0) for (double i = start; i < stop && out.u.l->n < max_n; i += stp) rkm_jinja__list_push(c, out.u.l, v_int(i));
        else for (double i = start; i > stop && out.u.l->n < max_n; i += stp) rkm_jinja__list_push(c, out.u.l, v_int(i));
        for (size_t i = 0; i < out.u.l->n; i++)
            if (fmod(out.u.l->v[i].u.n, 1.0) != 0) out.u.l->v[i].t = V_FLOAT;
        return out;
    }
    if (kind == F_STRFTIME) {
        jv f = rkm_jinja__arg_get(a, 0, NULL, UNDEF);
        if (f.t != V_STR) rkm_jinja__fail(c, pos, "strftime_now() expects a format string");
        static const char *mon[] = {"January", "February", "March", "April", "May", "June", "July",
                                    "August", "September", "October", "November", "December"};
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        rkm_buf *b = rkm_jinja__buf_new(c);
        char t[32];
        for (size_t i = 0; i < f.u.s->len; i++) {
            char ch = f.u.s->s[i];
            if (ch != '%' || i + 1 >= f.u.s->len) { buf_addc(c, b, ch); continue; }
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
            buf_adds(c, b, t);
        }
        return v_str(rkm_jinja__buf_str(c, b));
    }
    /* namespace(mapping or pairs?, **kwargs) */
    if (a->n > 1) rkm_jinja__fail(c, pos, "namespace expected at most 1 argument, got %d", a->n);
    jv ns = rkm_jinja__v_dict(c, V_NS);
    if (a->n == 1) {
        jv src = a->v[0];
        if (src.t == V_DICT) {
            for (size_t i = 0; i < src.u.d->n; i++) rkm_jinja__dict_set(c, ns.u.d, src.u.d->k[i], src.u.d->v[i]);
        } else if (src.t == V_LIST) {
            for (size_t i = 0; i < src.u.l->n; i++) {
                jv p = src.u.l->v[i];
                if (p.t != V_LIST || p.u.l->n != 2) rkm_jinja__fail(c, pos, "namespace expected an object or an iterable of [key, value] pairs");
                if (p.u.l->v[0].t != V_STR) rkm_jinja__fail(c, pos, "namespace keys must be strings");
                rkm_jinja__dict_set(c, ns.u.d, p.u.l->v[0].u.s, p.u.l->v[1]);
            }
        } else {
            rkm_jinja__fail(c, pos, "'%s' object is not iterable", rkm_jinja__type_name(src));
        }
    }
    for (size_t i = 0; i < a->kw.n; i++) rkm_jinja__dict_set(c, ns.u.d, a->kw.k[i], a->kw.v[i]);
    return ns;
}

static jv call_value(jctx *c, jv fn, const jargs *a, jenv *caller_env, uint32_t pos)
{
    if (fn.t != V_FUNC) rkm_jinja__fail(c, pos, "cannot call something that is not a function: got %s", rkm_jinja__type_name(fn));
    jfunc *f = fn.u.f;
    switch (f->kind) {
    case F_METHOD: {
        /* builtin methods take keyword arguments as a trailing object;
         * only replace(count=) and dictsort() read them */
        if (f->self.t == V_STR) {
            if (a->kw.n && strcmp(f->method, "replace")) rkm_jinja__fail(c, pos, "%s() got unexpected keyword arguments", f->method);
            return rkm_jinja__call_str_method(c, f->method, f->self.u.s, a, pos);
        }
        if (a->kw.n && strcmp(f->method, "dictsort")) rkm_jinja__fail(c, pos, "%s() got unexpected keyword arguments", f->method);
        return rkm_jinja__call_dict_method(c, f->method, f->self.u.d, a, pos);
    }
    case F_MACRO: case F_CALLER: {
        if (++c->depth > c->max_depth) rkm_jinja__fail(c, pos, "macro calls nested too deeply");
        const node *d = f->def;
        jenv *scope = env_new(c, f->kind == F_MACRO ? caller_env : f->env);
        char name[80];
        if (f->kind == F_MACRO) snprintf(name, sizeof name, "'%.*s'", (int)RKM_MIN(d->len, 64), d->s);
        else snprintf(name, sizeof name, "None");
        node *const *params = f->kind == F_MACRO ? d->v : d->v2;
        int np = f->kind == F_MACRO ? d->n : d->n2;
        bind_params(c, name, params, np, d->flag, a, scope);
        rkm_buf *out = rkm_jinja__buf_new(c);
        int ctl = f->kind == F_MACRO ? exec_block(c, d->v2, d->n2, scope, out) : exec_block(c, d->v, d->n, scope, out);
        if (ctl) rkm_jinja__fail(c, pos, "break/continue outside of a loop");
        c->depth--;
        return v_str(rkm_jinja__buf_str(c, out));
    }
    default:
        return call_global(c, f->kind, a, pos);
    }
}

/* ---- operators */

static jv concat_raw(jctx *c, jv l, jv r)
{
    rkm_buf *b = rkm_jinja__buf_new(c);
    rkm_jinja__raw_str(c, b, l);
    rkm_jinja__raw_str(c, b, r);
    return v_str(rkm_jinja__buf_str(c, b));
}

static jv eval_binary(jctx *c, const node *n, jenv *e)
{
    jv l = eval(c, n->a, e);
    if (n->op == OP_AND) return rkm_jinja__truthy(l) ? eval(c, n->b, e) : l;
    if (n->op == OP_OR) return rkm_jinja__truthy(l) ? l : eval(c, n->b, e);
    jv r = eval(c, n->b, e);
    int op = n->op;
    if (op == OP_EQ) return v_bool(rkm_jinja__loose_eq(c, l, r, 0));
    if (op == OP_NE) return v_bool(!rkm_jinja__loose_eq(c, l, r, 0));
    if (l.t == V_UNDEF || r.t == V_UNDEF) {
        if (r.t == V_UNDEF && (op == OP_IN || op == OP_NOTIN)) return v_bool(op == OP_NOTIN);
        rkm_jinja__fail(c, n->pos, "cannot perform operation on undefined values");
    }
    if (l.t == V_NONE || r.t == V_NONE) rkm_jinja__fail(c, n->pos, "cannot perform operation on null values");
    if (op == OP_CONCAT) return concat_raw(c, l, r);
    if (op == OP_POW && (is_num(l) || l.t == V_BOOL) && (is_num(r) || r.t == V_BOOL)) {
        double a = l.t == V_BOOL ? l.u.b : l.u.n, b = r.t == V_BOOL ? r.u.b : r.u.n;
        if (a == 0 && b < 0) rkm_jinja__fail(c, n->pos, "0.0 cannot be raised to a negative power");
        double res = pow(a, b);
        if (!isfinite(res) || ((a == 1 || a == -1) && isinf(b))) rkm_jinja__fail(c, n->pos, "exponentiation result is not a finite real number");
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
            jv out = rkm_jinja__v_list(c, l.u.l->n + r.u.l->n);
            for (size_t i = 0; i < l.u.l->n; i++) rkm_jinja__list_push(c, out.u.l, l.u.l->v[i]);
            for (size_t i = 0; i < r.u.l->n; i++) rkm_jinja__list_push(c, out.u.l, r.u.l->v[i]);
            return out;
        }
    } else if (r.t == V_LIST) {
        if (op == OP_IN || op == OP_NOTIN) {
            int found = 0;
            for (size_t i = 0; i < r.u.l->n && !found; i++) found = rkm_jinja__strict_eq(r.u.l->v[i], l);
            return v_bool(op == OP_IN ? found : !found);
        }
    }
    if ((l.t == V_STR || r.t == V_STR) && op == OP_ADD) return concat_raw(c, l, r);
    if (l.t == V_STR && r.t == V_STR && (op == OP_IN || op == OP_NOTIN)) {
        int found = rkm_jinja__mem_find(r.u.s->s, r.u.s->len, l.u.s->s, l.u.s->len) != NULL;
        return v_bool(op == OP_IN ? found : !found);
    }
    if (l.t == V_STR && r.t == V_DICT && (op == OP_IN || op == OP_NOTIN)) {
        int found = rkm_jinja__dict_find(r.u.d, l.u.s->s, l.u.s->len) >= 0;
        return v_bool(op == OP_IN ? found : !found);
    }
    static const char *opn[] = {"", "and", "or", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "+", "-", "~", "*",
                                "/", "//", "%", "**"};
    rkm_jinja__fail(c, n->pos, "unknown operator \"%s\" between %s and %s", op < (int)RKM_ARRAY_LEN(opn) ? opn[op] : "?",
          rkm_jinja__type_name(l), rkm_jinja__type_name(r));
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
        jv out = rkm_jinja__v_list(c, (size_t)n->n);
        for (int i = 0; i < n->n; i++) rkm_jinja__list_push(c, out.u.l, eval(c, n->v[i], e));
        out.u.l->tuple = n->k == N_TUPLE;
        return out;
    }
    case N_OBJECT: {
        jv out = rkm_jinja__v_dict(c, V_DICT);
        for (int i = 0; i < n->n; i++) {
            jv k = eval(c, n->v[i], e);
            if (k.t != V_STR) rkm_jinja__fail(c, n->v[i]->pos, "object keys must be strings: got %s", rkm_jinja__type_name(k));
            rkm_jinja__dict_set(c, out.u.d, k.u.s, eval(c, n->v2[i], e));
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
        jargs a;
        rkm_jinja__eval_args(c, n->v, n->n, e, &a);
        jv fn = eval(c, n->a, e);
        return call_value(c, fn, &a, e, n->pos);
    }
    case N_UNARY: {
        jv x = eval(c, n->a, e);
        if (n->op == OP_NOT) return v_bool(!rkm_jinja__truthy(x));
        if (is_num(x) || x.t == V_BOOL) {
            double val = x.t == V_BOOL ? x.u.b : x.u.n;
            double r = n->op == OP_NEG ? -val : val;
            return x.t == V_FLOAT ? v_float(r) : v_int(r);
        }
        rkm_jinja__fail(c, n->pos, "unknown operator \"%s\" for %s", n->op == OP_NEG ? "-" : "+", rkm_jinja__type_name(x));
    }
    case N_BINARY: return eval_binary(c, n, e);
    case N_FILTER: return rkm_jinja__apply_filter(c, eval(c, n->a, e), n->b, e);
    case N_TEST: {
        jv x = eval(c, n->a, e);
        int r = rkm_jinja__run_test(c, n, x, e);
        return v_bool(n->op ? !r : r);
    }
    case N_SELECT: {
        jv t = eval(c, n->b, e);
        if (!rkm_jinja__truthy(t)) return UNDEF;
        return eval(c, n->a, e);
    }
    case N_TERNARY: return rkm_jinja__truthy(eval(c, n->a, e)) ? eval(c, n->b, e) : eval(c, n->c, e);
    case N_SLICE: rkm_jinja__fail(c, n->pos, "unexpected slice");
    case N_KWARG: rkm_jinja__fail(c, n->pos, "unexpected keyword argument");
    default: rkm_jinja__fail(c, n->pos, "unexpected statement in an expression");
    }
}

static jv eval(jctx *c, const node *n, jenv *e)
{
    rkm_jinja__step(c, n);
    if (++c->depth > c->max_depth) rkm_jinja__fail(c, n->pos, "template nested too deeply");
    jv r = eval_node(c, n, e);
    c->depth--;
    return r;
}

/* ---- statements */

static void assign_tuple(jctx *c, const node *target, jv v, jenv *e, const char *what)
{
    if (v.t != V_LIST) rkm_jinja__fail(c, target->pos, "cannot unpack non-iterable type%s: %s", what, rkm_jinja__type_name(v));
    if (v.u.l->n != (size_t)target->n)
        rkm_jinja__fail(c, target->pos, "too %s items to unpack%s", (size_t)target->n > v.u.l->n ? "few" : "many", what);
    for (int i = 0; i < target->n; i++) {
        if (target->v[i]->k != N_IDENT) rkm_jinja__fail(c, target->v[i]->pos, "cannot unpack to non-identifier");
        env_set(c, e, target->v[i]->s, target->v[i]->len, v.u.l->v[i]);
    }
}

static int exec_for(jctx *c, const node *n, jenv *e, rkm_buf *out)
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
        jv keys = rkm_jinja__v_list(c, it.u.d->n);
        for (size_t i = 0; i < it.u.d->n; i++) rkm_jinja__list_push(c, keys.u.l, v_str(it.u.d->k[i]));
        it = keys;
    }
    if (it.t != V_LIST) rkm_jinja__fail(c, n->b->pos, "expected iterable or object type in for loop: got %s", rkm_jinja__type_name(it));
    jlist *src = it.u.l;
    jv items = rkm_jinja__v_list(c, src->n);
    for (size_t i = 0; i < src->n; i++) {
        jv cur = src->v[i];
        if (n->a->k == N_TUPLE && (cur.t != V_LIST || cur.u.l->n != (size_t)n->a->n))
            assign_tuple(c, n->a, cur, scope, ""); /* fails with the right message */
        if (test) {
            jenv *ls = env_new(c, scope);
            if (n->a->k == N_IDENT) env_set(c, ls, n->a->s, n->a->len, cur);
            else assign_tuple(c, n->a, cur, ls, "");
            if (!rkm_jinja__truthy(eval(c, test, ls))) continue;
        }
        rkm_jinja__list_push(c, items.u.l, cur);
    }
    jlist *l = items.u.l;
    int none = 1;
    for (size_t i = 0; i < l->n; i++) {
        rkm_jinja__step(c, n);
        static const char *const lk[9] = {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                                          "previtem", "nextitem"};
        if (!c->loop_keys[0])
            for (int k = 0; k < 9; k++) c->loop_keys[k] = str_cstr(c, lk[k]);
        double len = (double)l->n, k = (double)i;
        jv vals[9] = {v_int(k + 1), v_int(k), v_int(len - k), v_int(len - k - 1), v_bool(i == 0), v_bool(i == l->n - 1),
                      v_int(len), i > 0 ? l->v[i - 1] : UNDEF, i + 1 < l->n ? l->v[i + 1] : UNDEF};
        jv loop = rkm_jinja__v_dict(c, V_DICT); /* a new object per iteration, as in the reference */
        jdict *d = loop.u.d;
        d->cap = d->n = 9;
        d->k = c->loop_keys;
        d->v = rkm_jinja__alloc(c, sizeof vals);
        memcpy(d->v, vals, sizeof vals);
        env_set(c, scope, "loop", 4, loop);
        if (n->a->k == N_IDENT) env_set(c, scope, n->a->s, n->a->len, l->v[i]);
        else assign_tuple(c, n->a, l->v[i], scope, "");
        size_t mark = out->len;
        int ctl = exec_block(c, n->v, n->n, scope, out);
        if (ctl != CTL_NONE) { /* the interrupted iteration's output is dropped */
            out->len = mark;
            if (out->data) out->data[mark] = 0;
            if (ctl == CTL_BREAK) break;
            continue;
        }
        none = 0;
    }
    if (none) return exec_block(c, n->v2, n->n2, scope, out);
    return CTL_NONE;
}

static int exec_block(jctx *c, node *const *v, int n, jenv *e, rkm_buf *out)
{
    if (++c->depth > c->max_depth) rkm_jinja__fail(c, n ? v[0]->pos : NOPOS, "template nested too deeply");
    for (int i = 0; i < n; i++) {
        const node *s = v[i];
        int ctl = CTL_NONE;
        rkm_jinja__step(c, s);
        switch (s->k) {
        case N_TEXT: rkm_jinja__buf_add(c, out, s->s, s->len); break;
        case N_COMMENT: break;
        case N_BREAK: ctl = CTL_BREAK; break;
        case N_CONTINUE: ctl = CTL_CONTINUE; break;
        case N_SET: {
            jv rhs;
            if (s->b) {
                rhs = eval(c, s->b, e);
            } else {
                rkm_buf *body = rkm_jinja__buf_new(c);
                ctl = exec_block(c, s->v, s->n, e, body);
                if (ctl) break;
                rhs = v_str(rkm_jinja__buf_str(c, body));
            }
            const node *t = s->a;
            if (t->k == N_IDENT) {
                env_set(c, e, t->s, t->len, rhs);
            } else if (t->k == N_TUPLE) {
                assign_tuple(c, t, rhs, e, " in set");
            } else if (t->k == N_MEMBER) {
                jv obj = eval(c, t->a, e);
                if (obj.t != V_NS) rkm_jinja__fail(c, t->pos, "cannot assign attribute on non-namespace object");
                if (t->op || t->b->k != N_IDENT) rkm_jinja__fail(c, t->pos, "cannot assign to member with non-identifier property");
                rkm_jinja__dict_set(c, obj.u.d, rkm_jinja__str_new(c, t->b->s, t->b->len), rhs);
            } else {
                rkm_jinja__fail(c, t->pos, "invalid left-hand side of an assignment");
            }
            break;
        }
        case N_IF: {
            jv t = eval(c, s->a, e);
            ctl = rkm_jinja__truthy(t) ? exec_block(c, s->v, s->n, e, out) : exec_block(c, s->v2, s->n2, e, out);
            break;
        }
        case N_FOR: ctl = exec_for(c, s, e, out); break;
        case N_MACRO: {
            jv f = {V_FUNC, {0}};
            f.u.f = rkm_jinja__alloc(c, sizeof(jfunc));
            memset(f.u.f, 0, sizeof(jfunc));
            f.u.f->kind = F_MACRO;
            f.u.f->def = s;
            env_set(c, e, s->s, s->len, f);
            break;
        }
        case N_CALLBLOCK: {
            jv caller = {V_FUNC, {0}};
            caller.u.f = rkm_jinja__alloc(c, sizeof(jfunc));
            memset(caller.u.f, 0, sizeof(jfunc));
            caller.u.f->kind = F_CALLER;
            caller.u.f->def = s;
            caller.u.f->env = e;
            jargs a;
            rkm_jinja__eval_args(c, s->a->v, s->a->n, e, &a);
            jv fn = eval(c, s->a->a, e);
            jenv *ne = env_new(c, e);
            env_set(c, ne, "caller", 6, caller);
            jv r = call_value(c, fn, &a, ne, s->pos);
            if (r.t != V_NONE && r.t != V_UNDEF) rkm_jinja__display(c, out, r);
            break;
        }
        case N_FILTERBLOCK: {
            rkm_buf *body = rkm_jinja__buf_new(c);
            ctl = exec_block(c, s->v, s->n, e, body);
            if (ctl) break;
            jv r = rkm_jinja__apply_filter(c, v_str(rkm_jinja__buf_str(c, body)), s->b, e);
            if (r.t != V_NONE && r.t != V_UNDEF) rkm_jinja__display(c, out, r);
            break;
        }
        default: {
            jv r = eval(c, s, e);
            if (r.t != V_NONE && r.t != V_UNDEF) rkm_jinja__display(c, out, r);
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
    char *clean = rkm_jinja__u8_sanitize_alloc(k, n, &cn);
    if (!clean) return rkm_jinja__str_new(c, k, n);
    jstr *s = rkm_jinja__str_new(c, clean, cn);
    free(clean);
    return s;
}

static jv from_json(jctx *c, const cJSON *j, int depth)
{
    if (depth > 200) rkm_jinja__fail(c, NOPOS, "variables nested too deeply");
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
        jv l = rkm_jinja__v_list(c, 0);
        for (const cJSON *x = j->child; x; x = x->next) rkm_jinja__list_push(c, l.u.l, from_json(c, x, depth + 1));
        return l;
    }
    if (cJSON_IsObject(j)) {
        jv d = rkm_jinja__v_dict(c, V_DICT);
        size_t n = 0;
        for (const cJSON *x = j->child; x; x = x->next) n++;
        const cJSON **idx = rkm_jinja__alloc(c, (n + 1) * sizeof(cJSON *));
        double *num = rkm_jinja__alloc(c, (n + 1) * sizeof(double));
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
            rkm_jinja__dict_set(c, d.u.d, json_key(c, idx[i]->string ? idx[i]->string : ""), from_json(c, idx[i], depth + 1));
        return d;
    }
    return UNDEF;
}

char *rkm_jinja_render(const rkm_jinja *t, const cJSON *vars, const rkm_jinja_limits *limits, size_t *out_len)
{
    if (!t) { rkm_err(RKM_EINVAL, "template: NULL"); return NULL; }
    jctx *c = malloc(sizeof(jctx)); /* jmp_buf is large; keep it off small stacks */
    if (!c) { rkm_err(RKM_ENOMEM, "template: out of memory"); return NULL; }
    rkm_jinja__ctx_init(c, limits && limits->max_bytes ? limits->max_bytes : (size_t)512 << 20);
    c->max_steps = limits && limits->max_steps ? limits->max_steps : 50000000;
    c->max_depth = limits && limits->max_depth ? limits->max_depth : 500;
    c->lines = t->c.lines;
    c->n_lines = t->c.n_lines;
    if (setjmp(c->jb)) {
        rkm_err(c->code ? c->code : RKM_EFORMAT, "%s", c->msg);
        rkm_jinja__ctx_free(c);
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
        f.u.f = rkm_jinja__alloc(c, sizeof(jfunc));
        memset(f.u.f, 0, sizeof(jfunc));
        f.u.f->kind = fns[i].kind;
        env_set(c, g, fns[i].name, strlen(fns[i].name), f);
    }
    if (vars && cJSON_IsObject(vars)) {
        jv d = from_json(c, vars, 0);
        for (size_t i = 0; i < d.u.d->n; i++) {
            if (rkm_jinja__dict_find(&g->vars, d.u.d->k[i]->s, d.u.d->k[i]->len) >= 0)
                rkm_jinja__fail(c, NOPOS, "variable already declared: %s", d.u.d->k[i]->s);
            rkm_jinja__dict_set(c, &g->vars, d.u.d->k[i], d.u.d->v[i]);
        }
    } else if (vars && !cJSON_IsNull(vars)) {
        c->code = RKM_EINVAL;
        rkm_jinja__fail(c, NOPOS, "variables must be a JSON object");
    }
    rkm_buf *out = rkm_jinja__buf_new(c);
    /* the top level is evaluated like one block */
    if (exec_block(c, t->body, t->n, g, out) != CTL_NONE) rkm_jinja__fail(c, NOPOS, "break/continue outside of a loop");
    char *res = malloc(out->len + 1);
    if (!res) {
        c->code = RKM_ENOMEM;
        rkm_jinja__fail(c, NOPOS, "out of memory");
    }
    if (out->len) memcpy(res, out->data, out->len);
    res[out->len] = 0;
    if (out_len) *out_len = out->len;
    rkm_jinja__ctx_free(c);
    free(c);
    return res;
}
