/*
 * gen_common.h - what the generating subcommands (run, chat, perplexity,
 * demo, bench) share: the tables of the model/session/sampling options,
 * opening a model, parsing id lists, streaming text with stop strings, and
 * the statistics footer.
 */
#ifndef RKM_CLI_GEN_COMMON_H
#define RKM_CLI_GEN_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "cli/opts.h"
#include "rkmojo.h"
#include "util/buf.h"

/* The model, session and sampling options; the tables point into the
 * struct, so it is not copied after rkm_gen_opts_init. */
typedef struct rkm_gen_opts {
    const char *model;          /* -m DIR */
    rkm_model_params mp;
    rkm_session_params sp;
    int seed_given;
    /* which sampling options were given (the rest come from the model's
     * defaults, rkm_sampler_params_for_model): temp, top-k, top-p, min-p,
     * repeat-penalty, repeat-last-n, presence-, frequency-penalty */
    int sampling_given[8];
    int quiet;
    rkm_opt model_opts[16];     /* -m, -t, -c, the budget, the expert cache (also serve's) */
    rkm_opt session_opts[4];    /* --chunk, --trace-out, -q */
    rkm_opt sampling_opts[12];  /* --temp, --top-k, ..., --seed */
} rkm_gen_opts;

/* Defaults and the option tables. sampling 0: the sampling options are not
 * listed in --help (a command that does not sample still accepts them, as
 * it always did). */
void rkm_gen_opts_init(rkm_gen_opts *o, int sampling);
/* Opens the model and a session (messages on stderr); 0 or exit status. */
int rkm_gen_open(rkm_gen_opts *o, rkm_model **m, rkm_session **s);

/* Parses "1,2,3" into a malloc'd array; -1 on error (message printed). */
int rkm_parse_ids(const char *s, int32_t **ids);

/* Streams generated text to a FILE through rkm_textout (stop strings,
 * UTF-8 hold-back); push returns 1 once a stop string appears. */
typedef struct rkm_text_out {
    rkm_textout *t;  /* NULL when out of memory: nothing is written */
    FILE *f;         /* NULL: nothing is written */
    int keep_all;
    rkm_buf all;     /* everything emitted (for chat history), if keep_all */
} rkm_text_out;

void rkm_text_out_init(rkm_text_out *t, const rkm_model *m, FILE *f, const char **stop, int n_stop);
int rkm_text_out_push(rkm_text_out *t, int32_t id);
void rkm_text_out_finish(rkm_text_out *t);
void rkm_text_out_free(rkm_text_out *t);

/* "prompt N tok, TTFT ..., prefill ... tok/s, decode ... tok/s, peak RSS". */
void rkm_print_footer(FILE *f, const rkm_stats *st);

#endif
