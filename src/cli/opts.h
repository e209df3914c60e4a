/*
 * opts.h - the command-line options of every subcommand, as tables: one
 * entry per option (names, the kind and range of its value, where it goes,
 * one line of help). rkm_opts_parse runs getopt_long over a command's
 * tables, converts and range-checks the values with the same messages in
 * every command, and answers -h/--help; rkm_opts_usage prints the tables as
 * the option list of --help.
 */
#ifndef RKM_CLI_OPTS_H
#define RKM_CLI_OPTS_H

#include <stdio.h>

#include "util/common.h"

typedef enum rkm_opt_kind {
    RKM_OPT_END = 0, /* ends a table */
    RKM_OPT_FLAG,    /* no value: *(int *)dst = 1 */
    RKM_OPT_INT,     /* int in [lo, hi] */
    RKM_OPT_U64,     /* uint64_t in [lo, hi] */
    RKM_OPT_FLOAT,   /* float in [lo, hi] */
    RKM_OPT_DOUBLE,  /* double in [lo, hi] */
    RKM_OPT_SIZE,    /* bytes as "4G", "512M", "1.5GiB" or a number: uint64_t in [lo, hi] */
    RKM_OPT_ENUM,    /* one of the words of `values` ("lfu|lru"): *(int *)dst = lo + its index */
    RKM_OPT_STR,     /* const char * (points into argv) */
    RKM_OPT_LIST,    /* repeatable string: appended to an rkm_opt_list */
    RKM_OPT_CALL,    /* fn(value, dst) converts; `values` says what it expects */
} rkm_opt_kind;

/* Storage of an RKM_OPT_LIST option: at most cap strings. */
typedef struct rkm_opt_list {
    const char **v;
    int n, cap;
} rkm_opt_list;

typedef struct rkm_opt {
    const char *name;     /* long name without "--", or NULL (short only) */
    int letter;           /* short option letter, or 0 */
    rkm_opt_kind kind;
    void *dst;            /* where the value goes (type by kind) */
    double lo, hi;        /* range of numbers; ENUM: the value of the first word */
    const char *arg;      /* the value's name in the help ("N", "FILE"); ENUM: the words */
    const char *help;     /* one line (continuations after '\n'); NULL: not listed */
    const char *alias;    /* a second long name, or NULL */
    const char *values;   /* ENUM: "w1|w2|..."; CALL: what the value must be */
    int (*fn)(const char *v, void *dst); /* CALL: 0 or -1 */
    int *given;           /* if set, 1 once the option appeared */
    const char *implied;  /* the value is optional (only as --name=V); this when absent */
} rkm_opt;

#define RKM_OPTS_MAX_TABLES 4

typedef struct rkm_opts_cmd {
    const char *name;     /* "run": messages read "rkmojo run: ..." */
    const char *synopsis; /* usage lines before the option list */
    const char *footer;   /* text after the option list, or NULL */
    const rkm_opt *tables[RKM_OPTS_MAX_TABLES]; /* listed in this order; NULL ends */
    int max_args;         /* positional arguments allowed; -1: any number */
} rkm_opts_cmd;

#define RKM_OPTS_CONTINUE (-1)

/* Parses argv[1..argc) over the command's tables, GNU getopt_long style:
 * --name=V, --name V, -xV, -x V, bundled flags (-qv), unambiguous prefixes
 * of long names, and -- ending the options; positional arguments may sit
 * anywhere (permuted to the end; POSIXLY_CORRECT turns that off). On
 * success returns RKM_OPTS_CONTINUE with *first (unless NULL) the index of
 * the first positional argument in the permuted argv. Otherwise returns the exit
 * status: 0 after -h/--help printed the usage on stdout, 2 after a message
 * on stderr (unknown option, missing or bad value, too many arguments). */
int rkm_opts_parse(const rkm_opts_cmd *c, int argc, char **argv, int *first);

/* The synopsis, the option list and the footer. */
void rkm_opts_usage(const rkm_opts_cmd *c, FILE *f);

/* "rkmojo NAME: " + the message + " (see rkmojo NAME --help)" on stderr;
 * returns 2, the exit status of a usage error. */
int rkm_opts_error(const rkm_opts_cmd *c, const char *fmt, ...) RKM_PRINTF(2, 3);

#endif
