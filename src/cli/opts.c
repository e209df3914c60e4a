/*
 * opts.c - table-driven option parsing for the subcommands (opts.h): builds
 * getopt_long's option array and short-option string from the tables,
 * converts each value by its kind with one set of messages, and prints the
 * tables as the option list of --help.
 *
 * Single-threaded. getopt_long keeps its state in globals; each parse
 * resets them (optind = 0), so a command may run another in-process (demo
 * runs synth and convert). getopt's own messages are off (opterr = 0): the
 * messages here name the command and the option the same way everywhere.
 */
#include "cli/opts.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long's value for entry k: its letter, or this plus k */
#define VAL_LONG_ONLY 256
#define HELP_COLUMN 27

int rkm_opts_error(const rkm_opts_cmd *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rkmojo %s: ", c->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see rkmojo %s --help)\n", c->name);
    va_end(ap);
    return 2;
}

/* A bad value: the message names the option, no pointer to --help. */
static int bad_value(const rkm_opts_cmd *c, const char *opt, const char *fmt, ...) RKM_PRINTF(3, 4);
static int bad_value(const rkm_opts_cmd *c, const char *opt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rkmojo %s: %s: ", c->name, opt);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

/* "--name", or "-x" for a short-only option. */
static const char *display_name(const rkm_opt *o, char *buf, size_t cap)
{
    if (o->name) snprintf(buf, cap, "--%s", o->name);
    else snprintf(buf, cap, "-%c", o->letter);
    return buf;
}

/* Integers print as such ("16777216", not "1.67772e+07"). */
static const char *fmt_num(double d, char *buf, size_t cap)
{
    if (d > -1e15 && d < 1e15 && (double)(long long)d == d) snprintf(buf, cap, "%lld", (long long)d);
    else snprintf(buf, cap, "%g", d);
    return buf;
}

static int in_range(const rkm_opts_cmd *c, const rkm_opt *o, const char *opt, const char *v, double d)
{
    char a[32], b[32];
    if (d >= o->lo && d <= o->hi) return 0;
    return bad_value(c, opt, "'%s' is out of range [%s, %s]", v, fmt_num(o->lo, a, sizeof a), fmt_num(o->hi, b, sizeof b));
}

/* The index of v among the '|'-separated words, or -1. */
static int word_index(const char *words, const char *v)
{
    size_t n = strlen(v);
    int i = 0;
    for (const char *w = words; w; i++) {
        const char *bar = strchr(w, '|');
        size_t len = bar ? (size_t)(bar - w) : strlen(w);
        if (len == n && !strncmp(w, v, n)) return i;
        w = bar ? bar + 1 : NULL;
    }
    return -1;
}

/* Converts v into o->dst; 0, or -1 after a message. */
static int set_value(const rkm_opts_cmd *c, const rkm_opt *o, const char *v)
{
    char opt[80];
    display_name(o, opt, sizeof opt);
    char *end = NULL;
    errno = 0;
    switch (o->kind) {
    case RKM_OPT_FLAG:
        *(int *)o->dst = 1;
        return 0;
    case RKM_OPT_INT: {
        long long x = strtoll(v, &end, 10);
        if (end == v || *end || errno) return bad_value(c, opt, "'%s' is not an integer", v);
        if (in_range(c, o, opt, v, (double)x)) return -1;
        *(int *)o->dst = (int)x;
        return 0;
    }
    case RKM_OPT_U64: {
        unsigned long long x = strtoull(v, &end, 10);
        if (end == v || *end || errno || strchr(v, '-')) return bad_value(c, opt, "'%s' is not an integer", v);
        if (in_range(c, o, opt, v, (double)x)) return -1;
        *(uint64_t *)o->dst = (uint64_t)x;
        return 0;
    }
    case RKM_OPT_FLOAT:
    case RKM_OPT_DOUBLE: {
        double d = strtod(v, &end);
        if (end == v || *end || errno) return bad_value(c, opt, "'%s' is not a number", v);
        if (in_range(c, o, opt, v, d)) return -1;
        if (o->kind == RKM_OPT_FLOAT) *(float *)o->dst = (float)d;
        else *(double *)o->dst = d;
        return 0;
    }
    case RKM_OPT_SIZE: {
        int64_t b = rkm_parse_bytes(v);
        if (b < 0) return bad_value(c, opt, "'%s' is not a size (e.g. 512M, 4G)", v);
        if (in_range(c, o, opt, v, (double)b)) return -1;
        *(uint64_t *)o->dst = (uint64_t)b;
        return 0;
    }
    case RKM_OPT_ENUM: {
        int i = word_index(o->values, v);
        if (i < 0) return bad_value(c, opt, "'%s' is not one of %s", v, o->values);
        *(int *)o->dst = (int)o->lo + i;
        return 0;
    }
    case RKM_OPT_STR:
        *(const char **)o->dst = v;
        return 0;
    case RKM_OPT_LIST: {
        rkm_opt_list *l = o->dst;
        if (l->n >= l->cap) return bad_value(c, opt, "given more than %d times", l->cap);
        l->v[l->n++] = v;
        return 0;
    }
    case RKM_OPT_CALL:
        if (o->fn(v, o->dst)) return bad_value(c, opt, "'%s' is not %s", v, o->values);
        return 0;
    case RKM_OPT_END:
        break;
    }
    return -1;
}

static const rkm_opt *by_val(const rkm_opt **e, int n, int val)
{
    if (val >= VAL_LONG_ONLY) return val - VAL_LONG_ONLY < n ? e[val - VAL_LONG_ONLY] : NULL;
    for (int k = 0; k < n; k++)
        if (e[k]->letter == val) return e[k];
    return NULL;
}

static int prefix_of(const char *name, const char *p, size_t n) { return name && !strncmp(name, p, n); }

/* getopt_long returned '?': an unknown option, an ambiguous prefix, or a
 * value given to an option that takes none. */
static int bad_option(const rkm_opts_cmd *c, const rkm_opt **e, int n, const char *arg)
{
    char nm[80];
    if (optopt == 'h') return rkm_opts_error(c, "--help takes no value");
    if (optopt) {
        const rkm_opt *o = by_val(e, n, optopt);
        if (o) return rkm_opts_error(c, "%s takes no value", display_name(o, nm, sizeof nm));
        return rkm_opts_error(c, "unknown option '-%c'", optopt);
    }
    if (strncmp(arg, "--", 2)) return rkm_opts_error(c, "unknown option '%s'", arg);
    const char *p = arg + 2;
    size_t len = strcspn(p, "=");
    char list[512] = "";
    int matches = 0;
    for (int k = 0; k < n; k++)
        if (prefix_of(e[k]->name, p, len) || prefix_of(e[k]->alias, p, len)) {
            const char *shown = prefix_of(e[k]->name, p, len) ? e[k]->name : e[k]->alias;
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s--%s", matches ? ", " : "", shown);
            matches++;
        }
    if (prefix_of("help", p, len)) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s--help", matches ? ", " : "");
        matches++;
    }
    if (matches > 1) return rkm_opts_error(c, "option '--%.*s' is ambiguous (%s)", (int)len, p, list);
    return rkm_opts_error(c, "unknown option '--%.*s'", (int)len, p);
}

/* Every entry of the command's tables, in order; NULL when out of memory. */
static const rkm_opt **entries(const rkm_opts_cmd *c, int *n)
{
    int count = 0;
    for (int t = 0; t < RKM_OPTS_MAX_TABLES && c->tables[t]; t++)
        for (const rkm_opt *o = c->tables[t]; o->kind != RKM_OPT_END; o++) count++;
    const rkm_opt **e = malloc(sizeof *e * (size_t)(count + 1));
    if (!e) return NULL;
    *n = 0;
    for (int t = 0; t < RKM_OPTS_MAX_TABLES && c->tables[t]; t++)
        for (const rkm_opt *o = c->tables[t]; o->kind != RKM_OPT_END; o++) e[(*n)++] = o;
    return e;
}

int rkm_opts_parse(const rkm_opts_cmd *c, int argc, char **argv, int *first)
{
    int n = 0;
    const rkm_opt **e = entries(c, &n);
    struct option *lo = calloc((size_t)(2 * n + 2), sizeof *lo);
    char *sh = malloc((size_t)(3 * n + 3));
    int rc = RKM_OPTS_CONTINUE;
    if (!e || !lo || !sh) {
        fprintf(stderr, "rkmojo %s: out of memory\n", c->name);
        rc = 1;
        goto done;
    }
    /* ':' first: a missing value returns ':' rather than '?' */
    size_t ns = 0;
    int nl = 0;
    sh[ns++] = ':';
    sh[ns++] = 'h';
    for (int k = 0; k < n; k++) {
        const rkm_opt *o = e[k];
        int has = o->kind == RKM_OPT_FLAG ? no_argument : o->implied ? optional_argument : required_argument;
        int val = o->letter ? o->letter : VAL_LONG_ONLY + k;
        if (o->name) lo[nl++] = (struct option){o->name, has, NULL, val};
        if (o->alias) lo[nl++] = (struct option){o->alias, has, NULL, val};
        if (o->letter) {
            sh[ns++] = (char)o->letter;
            if (has != no_argument) sh[ns++] = ':';
            if (has == optional_argument) sh[ns++] = ':';
        }
    }
    sh[ns] = 0;
    lo[nl] = (struct option){"help", no_argument, NULL, 'h'};
    optind = 0; /* glibc: a full re-initialisation, also of a previous parse's permutation state */
    opterr = 0;
    int ch;
    while (rc == RKM_OPTS_CONTINUE && (ch = getopt_long(argc, argv, sh, lo, NULL)) != -1) {
        char nm[80];
        const rkm_opt *o;
        if (ch == 'h') {
            rkm_opts_usage(c, stdout);
            rc = 0;
        } else if (ch == ':') {
            o = by_val(e, n, optopt);
            rc = rkm_opts_error(c, "%s needs a value", o ? display_name(o, nm, sizeof nm) : argv[optind - 1]);
        } else if (ch == '?' || !(o = by_val(e, n, ch))) {
            rc = bad_option(c, e, n, argv[optind - 1]);
        } else {
            if (o->given) *o->given = 1;
            if (set_value(c, o, optarg ? optarg : o->implied)) rc = 2;
        }
    }
    if (rc == RKM_OPTS_CONTINUE) {
        if (first) *first = optind;
        if (c->max_args >= 0 && argc - optind > c->max_args)
            rc = rkm_opts_error(c, "unexpected argument '%s'", argv[optind + c->max_args]);
    }
done:
    free(e);
    free(lo);
    free(sh);
    return rc;
}

/* Help text, continuation lines indented to the help column. */
static void print_help(FILE *f, const char *help)
{
    for (const char *p = help; *p; p++) {
        fputc(*p, f);
        if (*p == '\n') fprintf(f, "%*s", HELP_COLUMN, "");
    }
}

void rkm_opts_usage(const rkm_opts_cmd *c, FILE *f)
{
    fputs(c->synopsis, f);
    for (int t = 0; t < RKM_OPTS_MAX_TABLES && c->tables[t]; t++)
        for (const rkm_opt *o = c->tables[t]; o->kind != RKM_OPT_END; o++) {
            if (!o->help) continue;
            char left[128];
            int len = snprintf(left, sizeof left, "  ");
            if (o->letter) len += snprintf(left + len, sizeof left - (size_t)len, "-%c%s", o->letter, o->name ? ", " : "");
            if (o->name) len += snprintf(left + len, sizeof left - (size_t)len, "--%s", o->name);
            const char *arg = o->arg ? o->arg : o->kind == RKM_OPT_ENUM ? o->values : "V";
            if (o->kind != RKM_OPT_FLAG && len < (int)sizeof left)
                snprintf(left + len, sizeof left - (size_t)len, o->implied ? "[=%s]" : " %s", arg);
            fprintf(f, "%-*s ", HELP_COLUMN - 1, left);
            if (strlen(left) >= HELP_COLUMN - 1) fputc(' ', f);
            print_help(f, o->help);
            if (o->alias) fprintf(f, " (also --%s)", o->alias);
            fputc('\n', f);
        }
    fprintf(f, "%-*s this help\n", HELP_COLUMN - 1, "  -h, --help");
    if (c->footer) fputs(c->footer, f);
}
