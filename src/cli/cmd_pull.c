/* cmd_pull.c - `rkmojo pull SOURCE [OUT.rkmojo]`: convert/pull.c's install
 * from a URL or a Hugging Face repository, into OUT or the models
 * directory (as NAME.rkmojo, NAME the file's name without .gguf). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "convert/pull.h"
#include "util/common.h"

int rkm_cmd_pull(int argc, char **argv)
{
    rkm_pull_opts o = {.progress = stderr, .connections = 4, .window = 256ull << 20};
    int quiet = 0, first;
    const char *models = NULL;
    rkm_opt conv_opts[4];
    rkm_cli_convert_opts(&o.conv, "keep", conv_opts);
    const rkm_opt opts[] = {
        {"connections", 0, RKM_OPT_INT, &o.connections, 1, 16, "N", .help = "requests at once (default 4)"},
        {"window", 0, RKM_OPT_SIZE, &o.window, 4 << 20, 1e13, "SIZE",
         .help = "bytes fetched ahead of the converter at most (default 256M): the disk\n"
                 "holds the output plus about this much"},
        {"models-dir", 0, RKM_OPT_STR, &models, .arg = "DIR",
         .help = "where a pull without OUT goes (default $RKMOJO_MODELS, else ~/.rkmojo/models)"},
        {"quiet", 0, RKM_OPT_FLAG, &quiet, .help = "no progress"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "pull",
        "usage: rkmojo pull SOURCE [OUT.rkmojo] [--quant TYPE|MIX] [--connections N] [--window SIZE]\n"
        "  SOURCE: an http(s) URL of a GGUF file, hf://ORG/REPO[@REVISION]:FILE.gguf,\n"
        "          hf://ORG/REPO[@REVISION] (the repository's safetensors checkpoint)\n"
        "          ($HF_ENDPOINT, default https://huggingface.co; $HF_TOKEN is sent to it),\n"
        "          or a local GGUF file or Hugging Face directory (converted as it is)\n"
        "  The source is converted while it downloads: the disk never holds it whole.\n\n",
        NULL, {conv_opts, opts}, 2,
    };
    int rc = rkm_opts_parse(&cmd, argc, argv, &first);
    if (rc != RKM_OPTS_CONTINUE) return rc;
    if (argc - first < 1) return rkm_opts_error(&cmd, "needs SOURCE");
    const char *src = argv[first];
    char outbuf[4096], dirbuf[2048], name[1024];
    const char *out = argc - first == 2 ? argv[first + 1] : NULL;
    if (!out) {
        if (rkm_pull_model_name(src, name, sizeof name))
            return rkm_opts_error(&cmd, "cannot name the model from SOURCE: give OUT.rkmojo");
        snprintf(outbuf, sizeof outbuf, "%s/%s.rkmojo", rkm_cli_models_dir(models, dirbuf, sizeof dirbuf), name);
        out = outbuf;
    }
    if (quiet) o.progress = NULL;
    double t0 = rkm_now();
    rkm_pull_stats st;
    rc = rkm_pull(src, out, &o, &st);
    if (rc) {
        fprintf(stderr, "rkmojo pull: %s\n", rkm_last_error());
        return 1;
    }
    if (o.progress && st.resumed > 0)
        fprintf(stderr, "resumed: kept resident.bin and %d expert layers from the interrupted pull\n", st.resumed - 1);
    else if (o.progress && st.resumed < 0)
        fprintf(stderr, "the interrupted pull was of another file or options: started again\n");
    if (o.progress && st.verified > 0) fprintf(stderr, "SHA-256 of the file checked against the server's\n");
    else if (o.progress && st.verified < 0)
        fprintf(stderr, "SHA-256 not checked: a resumed pull no longer holds the bytes the earlier run used\n");
    if (o.progress && st.source_bytes)
        fprintf(stderr, "pulled %s into %s in %.1fs: %.1f MiB received of %.1f MiB, at most %.1f MiB staged%s (peak RSS %.1f MiB)\n",
                src, out, rkm_now() - t0, (double)st.fetched_bytes / 1048576.0, (double)st.source_bytes / 1048576.0,
                (double)st.peak_staged / 1048576.0, st.punched ? "" : " (this file system keeps them: no holes)",
                (double)rkm_peak_rss_bytes() / 1048576.0);
    else if (o.progress)
        fprintf(stderr, "wrote %s in %.1fs\n", out, rkm_now() - t0);
    return 0;
}
