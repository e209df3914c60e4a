/* cmd_convert.c - `rkmojo convert INPUT OUT.rkmojo [--quant q8_0|q4_0|keep]`. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "convert/convert.h"
#include "util/common.h"

int rkm_cmd_convert(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    rkm_convert_opts o = {.quant = "q8_0", .progress = stderr};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quant") && i + 1 < argc) o.quant = argv[++i];
        else if (!strcmp(argv[i], "--target") && i + 1 < argc) o.target = argv[++i];
        else if (!strcmp(argv[i], "--quiet")) o.progress = NULL;
        else if (!strcmp(argv[i], "--expert-layout") && i + 1 < argc) {
            const char *l = argv[++i];
            if (strcmp(l, "packed") && strcmp(l, "plain")) {
                fprintf(stderr, "rkmojo convert: --expert-layout takes packed or plain, not '%s'\n", l);
                return 2;
            }
            o.plain_experts = !strcmp(l, "plain");
        }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: rkmojo convert INPUT OUT.rkmojo [--quant q8_0|q4_0|keep] [--target cpu|rk3588]\n"
                   "                      [--expert-layout packed|plain] [--quiet]\n"
                   "  INPUT: a GGUF file, or a Hugging Face directory (config.json, *.safetensors,\n"
                   "         tokenizer.json, tokenizer_config.json)\n"
                   "  --quant: target for the matrices (default q8_0); keep leaves F32/F16/Q8_0/Q4_0 as they are\n"
                   "  --target rk3588: routed experts as int8 per channel in the NPU's native layout (docs/NPU.md)\n"
                   "  --expert-layout: q8_0/q4_0 routed experts in the matmuls' interleaved 16-row layout\n"
                   "         (packed, the default: read experts need no repacking) or as in GGUF (plain)\n");
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "rkmojo convert: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        } else if (!in) in = argv[i];
        else if (!out) out = argv[i];
        else {
            fprintf(stderr, "rkmojo convert: too many arguments\n");
            return 2;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "usage: rkmojo convert INPUT OUT.rkmojo [--quant q8_0|q4_0|keep]\n");
        return 2;
    }
    double t0 = rkm_now();
    int rc = rkm_convert(in, out, &o);
    if (rc) {
        fprintf(stderr, "rkmojo convert: %s\n", rkm_last_error());
        return 1;
    }
    if (o.progress) fprintf(stderr, "wrote %s in %.1fs (peak RSS %.1f MiB)\n", out, rkm_now() - t0, (double)rkm_peak_rss_bytes() / 1048576.0);
    return 0;
}
