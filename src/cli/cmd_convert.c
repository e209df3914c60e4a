/* cmd_convert.c - `rkmojo convert INPUT OUT.rkmojo [--quant TYPE|MIX]`; the
 * choices and their rules are convert/quant_mix.c's. */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "convert/convert.h"
#include "util/common.h"

void rkm_cli_convert_opts(rkm_convert_opts *o, const char *default_quant, rkm_opt table[4])
{
    static char quant_help[640];
    snprintf(quant_help, sizeof quant_help,
             "the matrices' types (default %s):\n"
             "q8_0, q4_0, f16, bf16: every matrix that type (q4_0: output.weight q8_0);\n"
             "q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, iq4_nl,\n"
             "iq4_xs, mxfp4_moe (or mxfp4): llama.cpp's mixes, its types per tensor;\n"
             "keep: every type the kernels run stays as it is (the others become q8_0).\n"
             "Norms, routers and rows not a multiple of 32 are f32 (docs/FORMAT.md)",
             default_quant);
    o->quant = default_quant;
    table[0] = (rkm_opt){"quant", 0, RKM_OPT_STR, &o->quant, .arg = "TYPE|MIX", .help = quant_help};
    table[1] = (rkm_opt){"target", 0, RKM_OPT_STR, &o->target, .arg = "cpu|rk3588",
                         .help = "rk3588: routed experts as int8 per channel in the NPU's native layout (docs/NPU.md)"};
    table[2] = (rkm_opt){"expert-layout", 0, RKM_OPT_ENUM, &o->plain_experts, 0, 0, .values = "packed|plain",
                         .help = "routed experts in the matmuls' interleaved 16-row layout\n"
                                 "(packed, the default: read experts need no repacking) or as in GGUF (plain)"};
    table[3] = (rkm_opt){0};
}

int rkm_cmd_convert(int argc, char **argv)
{
    rkm_convert_opts o = {.progress = stderr};
    int quiet = 0, first;
    rkm_opt conv_opts[4];
    rkm_cli_convert_opts(&o, "q8_0", conv_opts);
    const rkm_opt opts[] = {
        {"quiet", 0, RKM_OPT_FLAG, &quiet, .help = "no progress"},
        {"mmproj", 0, RKM_OPT_STR, &o.mmproj, .arg = "FILE",
         .help = "carry this vision tower (an mmproj GGUF) into the model as mmproj.gguf"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "convert",
        "usage: rkmojo convert INPUT OUT.rkmojo [--quant TYPE|MIX] [--target cpu|rk3588]\n"
        "                      [--expert-layout packed|plain] [--mmproj MMPROJ.gguf] [--quiet]\n"
        "  INPUT: a GGUF file, or a Hugging Face directory (config.json, *.safetensors,\n"
        "         tokenizer.json, tokenizer_config.json)\n\n",
        NULL, {conv_opts, opts}, 2,
    };
    int rc = rkm_opts_parse(&cmd, argc, argv, &first);
    if (rc != RKM_OPTS_CONTINUE) return rc;
    if (argc - first != 2) return rkm_opts_error(&cmd, "needs INPUT and OUT.rkmojo");
    const char *in = argv[first], *out = argv[first + 1];
    if (quiet) o.progress = NULL;
    double t0 = rkm_now();
    rc = rkm_convert(in, out, &o);
    if (rc) {
        fprintf(stderr, "rkmojo convert: %s\n", rkm_last_error());
        return 1;
    }
    if (o.progress) fprintf(stderr, "wrote %s in %.1fs (peak RSS %.1f MiB)\n", out, rkm_now() - t0, (double)rkm_peak_rss_bytes() / 1048576.0);
    return 0;
}
