/*
 * cmd_demo.c - `rkmojo demo`: what a new user sees first. Synthesizes a
 * small MoE model (random weights, real structure), converts it, generates
 * from a prompt and prints the statistics, saying plainly that a model with
 * random weights outputs noise. Runs the synth and convert subcommands
 * in-process. Single-threaded driver.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/chat_format.h"
#include "cli/cli.h"
#include "cli/gen_common.h"
#include "util/common.h"
#include "util/knobs.h"

static int on_token(int32_t id, void *user) { return rkm_text_out_push(user, id); }

int rkm_cmd_demo(int argc, char **argv)
{
    rkm_gen_opts o;
    rkm_gen_opts_init(&o, 1);
    const char *preset = "tiny", *quant = "q8_0", *dir = NULL, *prompt = "Once upon a time, in a small town by the sea,";
    int n_predict = 48;
    const rkm_opt opts[] = {
        {"preset", 0, RKM_OPT_STR, &preset, .arg = "NAME", .help = "the synthetic model (default tiny; rkmojo synth --help)"},
        {"quant", 0, RKM_OPT_STR, &quant, .arg = "TYPE", .help = "q8_0 (default), q4_0 or keep (rkmojo convert --help)"},
        {"dir", 0, RKM_OPT_STR, &dir, .arg = "DIR", .help = "where the files go (default $TMPDIR/rkmojo-demo)"},
        {"prompt", 'p', RKM_OPT_STR, &prompt, .arg = "TEXT", .help = "the prompt"},
        {"n-predict", 'n', RKM_OPT_INT, &n_predict, -1, 1 << 30, "N", .help = "tokens to generate (default 48)"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "demo",
        "usage: rkmojo demo [--preset tiny] [--quant q8_0|q4_0|keep] [--dir DIR] [-p PROMPT] [-n N]\n\n"
        "Synthesizes a small random-weight MoE model, converts it to .rkmojo, generates\n"
        "N tokens (default 48) and prints the statistics. The output is noise: the\n"
        "weights are random. Files go to DIR (default $TMPDIR/rkmojo-demo).\n\n",
        NULL, {opts, o.model_opts, o.session_opts, o.sampling_opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    char dbuf[1024], gguf[1100], model[1100];
    if (!dir) {
        const char *t = rkm_knob(RKM_KNOB_TMPDIR);
        snprintf(dbuf, sizeof dbuf, "%s/rkmojo-demo", t && *t ? t : "/tmp");
        dir = dbuf;
    }
    if (rkm_mkdir_p(dir)) {
        fprintf(stderr, "rkmojo demo: %s\n", rkm_last_error());
        return 1;
    }
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", dir, preset);
    snprintf(model, sizeof model, "%s/%s-%s.rkmojo", dir, preset, quant);

    printf("== 1. synthesize a '%s' MoE checkpoint (random weights, real structure)\n", preset);
    printf("   rkmojo synth --preset %s -o %s\n", preset, gguf);
    fflush(stdout);
    char *sargv[] = {"synth", "--preset", (char *)preset, "-o", gguf, "--quiet", NULL};
    if (rkm_cmd_synth(6, sargv)) return 1;

    printf("== 2. convert it to .rkmojo (%s): resident weights + one file of experts per layer\n", quant);
    printf("   rkmojo convert %s %s --quant %s\n", gguf, model, quant);
    fflush(stdout);
    char *cargv[] = {"convert", gguf, model, "--quant", (char *)quant, NULL};
    if (rkm_cmd_convert(5, cargv)) return 1;

    printf("== 3. generate %d tokens\n   rkmojo run -m %s -p \"%s\" -n %d\n\n", n_predict, model, prompt, n_predict);
    fflush(stdout);
    o.model = model;
    rkm_model *m;
    rkm_session *s;
    int rc = rkm_gen_open(&o, &m, &s);
    if (rc) return rc;
    int32_t *ids = NULL;
    int n = rkm_tokenize_alloc(m, prompt, strlen(prompt), 1, 0, &ids);
    if (n <= 0) {
        fprintf(stderr, "rkmojo demo: tokenize: %s\n", rkm_last_error());
        rc = 1;
        goto done;
    }
    printf("%s", prompt);
    fflush(stdout);
    if ((rc = rkm_session_eval(s, ids, n, NULL))) {
        fprintf(stderr, "\nrkmojo demo: %s\n", rkm_last_error());
        rc = 1;
        goto done;
    }
    rkm_text_out out;
    rkm_text_out_init(&out, m, stdout, NULL, 0);
    rc = rkm_session_generate(s, n_predict, on_token, &out);
    rkm_text_out_finish(&out);
    rkm_text_out_free(&out);
    printf("\n");
    rkm_stats st;
    rkm_session_stats(s, &st);
    rkm_print_footer(stdout, &st);
    printf("\nThe text above is noise: this model has random weights, so it cannot say\n"
           "anything meaningful. It shows the engine working end to end (routing, experts,\n"
           "KV cache, sampling) and its speed. For real text, convert a real checkpoint (a\n"
           "GGUF as published with --quant keep; a Hugging Face directory with, say, q4_k_m):\n"
           "  rkmojo convert MODEL.gguf OUT.rkmojo --quant keep && rkmojo run -m OUT.rkmojo -p \"...\"\n");
    if (rc) {
        fprintf(stderr, "rkmojo demo: %s\n", rkm_last_error());
        rc = 1;
    }
done:
    free(ids);
    rkm_session_free(s);
    rkm_model_close(m);
    return rc;
}
