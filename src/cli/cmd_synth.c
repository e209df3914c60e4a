/* cmd_synth.c - `rkmojo synth --preset NAME -o model.gguf [...]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "convert/synth.h"
#include "kernels/quant.h"
#include "util/common.h"

static int parse_dtype(const char *v, void *dst)
{
    int t = rkm_type_from_name(v);
    if (t < 0) return -1;
    *(int *)dst = t;
    return 0;
}

int rkm_cmd_synth(int argc, char **argv)
{
    rkm_synth_opts o = {.preset = "tiny", .seed = 1, .dtype = RKM_TYPE_F32, .progress = stderr};
    const char *out = NULL;
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    if (!sets) return 1;
    rkm_opt_list set_list = {sets, 0, argc};
    int quiet = 0;
    char presets[512] = "  presets:";
    for (const char *const *p = rkm_synth_preset_names(); *p; p++) {
        size_t used = strlen(presets);
        snprintf(presets + used, sizeof presets - used, " %s", *p);
    }
    strncat(presets, "\n", sizeof presets - strlen(presets) - 1);
    const rkm_opt opts[] = {
        {"preset", 0, RKM_OPT_STR, &o.preset, .arg = "NAME", .help = "the architecture and size (default tiny; list below)"},
        {NULL, 'o', RKM_OPT_STR, &out, .arg = "FILE", .help = "the GGUF file to write (required)"},
        {"seed", 0, RKM_OPT_U64, &o.seed, 0, 18446744073709551615.0, "N", .help = "random seed (default 1)"},
        {"dtype", 0, RKM_OPT_CALL, &o.dtype, .arg = "f32|f16|q8_0|q4_0", .values = "a weight type (f32, f16, q8_0, q4_0)",
         .fn = parse_dtype, .help = "type of the matrices (default f32)"},
        {"vocab-from", 0, RKM_OPT_STR, &o.vocab_from, .arg = "FILE", .help = "take the vocabulary from a tokenizer file"},
        {"set", 0, RKM_OPT_LIST, &set_list, .arg = "KEY=VALUE",
         .help = "override a shape field, e.g. --set n_layer=2 --set n_expert=16\n(repeatable; see docs/FORMAT.md)"},
        {"hf-out", 0, RKM_OPT_STR, &o.hf_out, .arg = "DIR",
         .help = "also write the same weights as a Hugging Face directory (f32/f16 only)"},
        {"quiet", 0, RKM_OPT_FLAG, &quiet, .help = "no progress"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "synth",
        "usage: rkmojo synth --preset NAME -o model.gguf [--seed N] [--dtype f32|f16|q8_0|q4_0]\n"
        "                    [--vocab-from FILE] [--set key=value ...] [--hf-out DIR] [--quiet]\n"
        "  Writes a synthetic checkpoint: random weights with the real shapes (GGUF that llama.cpp loads).\n\n",
        presets, {opts}, 0,
    };
    int rc = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (rc != RKM_OPTS_CONTINUE) goto out;
    rc = 2;
    if (!out) {
        rkm_opts_error(&cmd, "-o FILE is required");
        goto out;
    }
    if (quiet) o.progress = NULL;
    o.sets = sets;
    o.n_sets = set_list.n;
    if (rkm_synth(&o, out) != 0) {
        fprintf(stderr, "rkmojo synth: %s\n", rkm_last_error());
        rc = 1;
        goto out;
    }
    rc = 0;
out:
    free(sets);
    return rc;
}
