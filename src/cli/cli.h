/*
 * cli.h - the rkmojo command-line tool: one function per subcommand, each
 * in its own file (cmd_<name>.c), dispatched by main.c. Each returns the
 * process exit status; only main() calls exit().
 */
#ifndef RKM_CLI_H
#define RKM_CLI_H

int rkm_cmd_synth(int argc, char **argv);
int rkm_cmd_convert(int argc, char **argv);
int rkm_cmd_inspect(int argc, char **argv);
int rkm_cmd_list(int argc, char **argv);
int rkm_cmd_show(int argc, char **argv);
int rkm_cmd_rm(int argc, char **argv);
int rkm_cmd_ps(int argc, char **argv);
int rkm_cmd_tokenize(int argc, char **argv);
int rkm_cmd_detokenize(int argc, char **argv);
int rkm_cmd_run(int argc, char **argv);
int rkm_cmd_chat(int argc, char **argv);
int rkm_cmd_perplexity(int argc, char **argv);
int rkm_cmd_demo(int argc, char **argv);
int rkm_cmd_serve(int argc, char **argv);
int rkm_cmd_bench(int argc, char **argv);
int rkm_cmd_doctor(int argc, char **argv);
int rkm_cmd_trace_sim(int argc, char **argv);
int rkm_cmd_plan(int argc, char **argv);
int rkm_cmd_template(int argc, char **argv);
int rkm_cmd_pull(int argc, char **argv);

#include <stddef.h>

#include "cli/opts.h"
#include "convert/convert.h"
/* The converter's choices (--quant, default default_quant; --target;
 * --expert-layout) as an option table for o, shared by convert and pull
 * (cmd_convert.c); table ends with its terminator. */
void rkm_cli_convert_opts(rkm_convert_opts *o, const char *default_quant, rkm_opt table[4]);
/* The models directory: opt, else $RKMOJO_MODELS, else ~/.rkmojo/models
 * (cmd_models.c); buf holds the last one. */
const char *rkm_cli_models_dir(const char *opt, char *buf, size_t cap);

#endif
