/* cmd_synth.c - `rkmojo synth --preset NAME -o model.gguf [...]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "convert/quant_mix.h"
#include "convert/synth.h"
#include "kernels/quant.h"
#include "util/common.h"

/* A type every matrix takes (f32, f16, bf16, q8_0, q4_0), else one of
 * the converter's mixes, each tensor the type the mix's rules give it;
 * keep has no meaning here. */
static int parse_dtype(const char *v, void *dst)
{
    rkm_synth_opts *o = dst;
    int t = rkm_type_from_name(v);
    if (t == RKM_TYPE_F32 || t == RKM_TYPE_F16 || t == RKM_TYPE_BF16 || t == RKM_TYPE_Q8_0 || t == RKM_TYPE_Q4_0) {
        o->dtype = t;
        o->mix = NULL;
        return 0;
    }
    const rkm_quant_mix *m = rkm_quant_mix_find(v);
    if (!m || rkm_quant_mix_keeps(m)) return -1;
    o->mix = m;
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
        {"dtype", 0, RKM_OPT_CALL, &o, .arg = "TYPE|MIX",
         .values = "a weight type (f32, f16, bf16, q8_0, q4_0) or a mix (q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_s, "
                   "q4_k_m, q5_k_s, q5_k_m, q6_k, iq4_nl, iq4_xs, mxfp4_moe)",
         .fn = parse_dtype,
         .help = "type of every matrix: f32 (default), f16, bf16, q8_0, q4_0;\n"
                 "or a mix of convert --quant (q2_k, q3_k_s/m/l, q4_k_s/m,\n"
                 "q5_k_s/m, q6_k, iq4_nl, iq4_xs, mxfp4_moe): each tensor the\n"
                 "type and bytes `convert --quant MIX` gives the f32 synth"},
        {"vocab-from", 0, RKM_OPT_STR, &o.vocab_from, .arg = "FILE", .help = "take the vocabulary from a tokenizer file"},
        {"set", 0, RKM_OPT_LIST, &set_list, .arg = "KEY=VALUE",
         .help = "override a shape field, e.g. --set n_layer=2 --set n_expert=16\n(repeatable; see docs/FORMAT.md)"},
        {"hf-out", 0, RKM_OPT_STR, &o.hf_out, .arg = "DIR",
         .help = "also write the same weights as a Hugging Face directory\n(f32, f16, bf16 only)"},
        {"mmproj-out", 0, RKM_OPT_STR, &o.mmproj_out, .arg = "FILE",
         .help = "also write the preset's vision tower as an mmproj GGUF\n(llama.cpp's format; tiny-gemma4, gemma4-26b-a4b)"},
        {"threads", 't', RKM_OPT_INT, &o.threads, 0, 1024, "N", .help = "threads generating rows (default: every core)"},
        {"quiet", 0, RKM_OPT_FLAG, &quiet, .help = "no progress"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "synth",
        "usage: rkmojo synth --preset NAME -o model.gguf [--seed N] [--dtype TYPE|MIX]\n"
        "                    [--vocab-from FILE] [--set key=value ...] [--hf-out DIR]\n"
        "                    [--mmproj-out FILE] [-t N] [--quiet]\n"
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
