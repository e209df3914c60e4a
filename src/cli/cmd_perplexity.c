/*
 * cmd_perplexity.c - `rkmojo perplexity`: teacher-forced evaluation of a
 * token sequence, chunked like prefill. Prints the perplexity, and with
 * --print-top1 the argmax prediction after every position (one per line),
 * which tests use to compare quantized models with a reference.
 *
 * Sequences longer than the context are cut into windows of n_ctx tokens,
 * each evaluated from an empty cache. Single-threaded driver.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/chat_format.h"
#include "cli/cli.h"
#include "cli/gen_common.h"
#include "util/common.h"

int rkm_cmd_perplexity(int argc, char **argv)
{
    rkm_gen_opts o;
    rkm_gen_opts_init(&o, 0);
    const char *file = NULL, *ids_arg = NULL;
    int print_top1 = 0;
    const rkm_opt opts[] = {
        {"file", 'f', RKM_OPT_STR, &file, .arg = "FILE",
         .help = "text to score (tokenized with BOS if the model wants it)"},
        {"ids", 0, RKM_OPT_STR, &ids_arg, .arg = "IDS", .help = "token ids to score (as given)"},
        {"print-top1", 0, RKM_OPT_FLAG, &print_top1, .help = "print the argmax prediction after each position"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "perplexity", "usage: rkmojo perplexity -m MODEL (-f TEXT_FILE | --ids 1,2,3,...) [--print-top1] [options]\n\n",
        NULL, {opts, o.model_opts, o.session_opts, o.sampling_opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    if (!!file + !!ids_arg != 1) return rkm_opts_error(&cmd, "give one of -f or --ids");
    rkm_model *m;
    rkm_session *s;
    int rc = rkm_gen_open(&o, &m, &s);
    if (rc) return rc;
    int32_t *ids = NULL;
    float *lg = NULL;
    int n = 0;
    if (ids_arg) {
        n = rkm_parse_ids(ids_arg, &ids);
    } else {
        size_t len;
        char *text = rkm_read_file(file, &len);
        n = text ? rkm_tokenize_alloc(m, text, strlen(text), 1, 0, &ids) : -1;
        if (n < 0) fprintf(stderr, "rkmojo perplexity: %s\n", rkm_last_error());
        free(text);
    }
    if (n < 1) {
        if (n == 0) fprintf(stderr, "rkmojo perplexity: nothing to score\n");
        rc = n < 0 ? 1 : 2;
        goto done;
    }
    int nv = rkm_model_n_vocab(m);
    int n_ctx = o.sp.n_ctx > 0 ? o.sp.n_ctx : RKM_MIN(4096, rkm_model_n_ctx_train(m) > 0 ? rkm_model_n_ctx_train(m) : 4096);
    int seg = 128; /* rows of logits held at once */
    lg = malloc(sizeof(float) * (size_t)seg * (size_t)nv);
    if (!lg) {
        fprintf(stderr, "rkmojo perplexity: out of memory\n");
        rc = 1;
        goto done;
    }
    double nll = 0;
    long scored = 0;
    for (int w0 = 0; w0 < n; w0 += n_ctx) {
        int wn = RKM_MIN(n_ctx, n - w0);
        rkm_session_truncate(s, 0);
        for (int i = 0; i < wn; i += seg) {
            int c = RKM_MIN(seg, wn - i);
            if ((rc = rkm_session_eval_all(s, ids + w0 + i, c, lg))) {
                fprintf(stderr, "rkmojo perplexity: %s\n", rkm_last_error());
                rc = 1;
                goto done;
            }
            for (int r = 0; r < c; r++) {
                const float *l = lg + (size_t)r * nv;
                int best = 0;
                float mx = l[0];
                for (int j = 1; j < nv; j++)
                    if (l[j] > mx) mx = l[j], best = j;
                if (print_top1) printf("%d\n", best);
                int pos = i + r; /* predicts ids[w0 + pos + 1] */
                if (pos + 1 < wn) {
                    double sum = 0;
                    for (int j = 0; j < nv; j++) sum += exp((double)l[j] - mx);
                    nll += -((double)l[ids[w0 + pos + 1]] - mx - log(sum));
                    scored++;
                }
            }
        }
    }
    FILE *f = print_top1 ? stderr : stdout;
    if (scored) fprintf(f, "perplexity: %.4f over %ld predictions (mean NLL %.5f)\n", exp(nll / scored), scored, nll / scored);
    else fprintf(f, "perplexity: no predictions (one token)\n");
    if (!o.quiet) {
        rkm_stats st;
        rkm_session_stats(s, &st);
        rkm_print_footer(stderr, &st);
    }
done:
    free(lg);
    free(ids);
    rkm_session_free(s);
    rkm_model_close(m);
    return rc;
}
