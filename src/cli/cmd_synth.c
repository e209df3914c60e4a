/* cmd_synth.c - `rkmojo synth --preset NAME -o model.gguf [...]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "convert/synth.h"
#include "kernels/quant.h"
#include "util/common.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: rkmojo synth --preset NAME -o model.gguf [--seed N] [--dtype f32|f16|q8_0|q4_0]\n"
               "                    [--vocab-from FILE] [--set key=value ...] [--hf-out DIR] [--quiet]\n"
               "  Writes a synthetic checkpoint: random weights with the real shapes (GGUF that llama.cpp loads).\n"
               "  --hf-out DIR also writes the same weights as a Hugging Face directory (f32/f16 only).\n"
               "  --set overrides a shape field, e.g. --set n_layer=2 --set n_expert=16 (see docs/FORMAT.md).\n"
               "  presets:");
    for (const char *const *p = rkm_synth_preset_names(); *p; p++) fprintf(f, " %s", *p);
    fprintf(f, "\n");
}

int rkm_cmd_synth(int argc, char **argv)
{
    rkm_synth_opts o = {.preset = "tiny", .seed = 1, .dtype = RKM_TYPE_F32, .progress = stderr};
    const char *out = NULL;
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    if (!sets) return 1;
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--preset") && more) o.preset = argv[++i];
        else if (!strcmp(a, "-o") && more) out = argv[++i];
        else if (!strcmp(a, "--seed") && more) o.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--dtype") && more) {
            o.dtype = rkm_type_from_name(argv[++i]);
            if (o.dtype < 0) {
                fprintf(stderr, "rkmojo synth: unknown dtype '%s'\n", argv[i]);
                goto out;
            }
        } else if (!strcmp(a, "--vocab-from") && more) o.vocab_from = argv[++i];
        else if (!strcmp(a, "--hf-out") && more) o.hf_out = argv[++i];
        else if (!strcmp(a, "--set") && more) sets[o.n_sets++] = argv[++i];
        else if (!strcmp(a, "--quiet")) o.progress = NULL;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else {
            fprintf(stderr, "rkmojo synth: unexpected argument '%s'\n", a);
            usage(stderr);
            goto out;
        }
    }
    if (!out) {
        usage(stderr);
        goto out;
    }
    o.sets = sets;
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
