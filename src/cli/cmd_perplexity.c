/*
 * cmd_perplexity.c - `rkmojo perplexity`: teacher-forced evaluation of a
 * token sequence, chunked like prefill. Prints the perplexity, and with
 * --print-top1 the argmax prediction after every position (one per line),
 * which tests use to compare quantized models with a reference.
 * --router-margins adds to each line the logit gap between the top two,
 * the smallest router margin over the MoE layers at that position and its
 * layer; --router-ties T then forces, one at a time, the runner-up expert
 * at every decision with a margin under T and evaluates again from there:
 * a position whose top-1 changes, or whose top two come within
 * --tie-gap, is a router tie (a fifth column "router", else "-"): the
 * library's rkm_router_ties_run. --margins-out F writes every layer's
 * margin, a line per position.
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

/* Every layer's router margin, a line per position ("nan": no routed
 * experts), as `llama-cpp-ref margins` prints llama.cpp's. */
static int write_margins(const char *path, const float *all, int n, int nl)
{
    FILE *f = fopen(path, "w");
    for (int p = 0; f && p < n; p++)
        for (int il = 0; il < nl; il++) {
            float v = all[(size_t)p * nl + il];
            if (v != v) fprintf(f, "%snan%s", il ? " " : "", il == nl - 1 ? "\n" : "");
            else fprintf(f, "%s%.9g%s", il ? " " : "", v, il == nl - 1 ? "\n" : "");
        }
    if (!f || ferror(f) | fclose(f)) {
        fprintf(stderr, "rkmojo perplexity: could not write %s\n", path);
        return 1;
    }
    return 0;
}

int rkm_cmd_perplexity(int argc, char **argv)
{
    rkm_gen_opts o;
    rkm_gen_opts_init(&o, 0);
    const char *file = NULL, *ids_arg = NULL, *margins_out = NULL;
    int print_top1 = 0, margins = 0;
    float ties = 0, tie_gap = 0.05f;
    const rkm_opt opts[] = {
        {"file", 'f', RKM_OPT_STR, &file, .arg = "FILE",
         .help = "text to score (tokenized with BOS if the model wants it)"},
        {"ids", 0, RKM_OPT_STR, &ids_arg, .arg = "IDS", .help = "token ids to score (as given)"},
        {"print-top1", 0, RKM_OPT_FLAG, &print_top1, .help = "print the argmax prediction after each position"},
        {"router-margins", 0, RKM_OPT_FLAG, &margins,
         .help = "with each top-1: its logit gap to the runner-up, the smallest router margin\n"
                 "(k-th selected minus best left-out probability) over the MoE layers, its layer"},
        {"router-ties", 0, RKM_OPT_FLOAT, &ties, 0, 1, "T",
         .help = "force the runner-up at each router decision with a margin under T, one at a\n"
                 "time; mark the positions it changes as router ties (implies --router-margins)"},
        {"margins-out", 0, RKM_OPT_STR, &margins_out, .arg = "FILE",
         .help = "write every layer's router margin, a line per position (implies --router-margins)"},
        {"tie-gap", 0, RKM_OPT_FLOAT, &tie_gap, 0, 1e9, "G",
         .help = "--router-ties: a flip that brings the top two logits within G also marks a tie\n"
                 "(default 0.05)"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "perplexity", "usage: rkmojo perplexity -m MODEL (-f TEXT_FILE | --ids 1,2,3,...) [--print-top1]\n"
        "                         [--router-margins | --router-ties T [--tie-gap G]] [options]\n\n",
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
    int n_ctx = rkm_session_n_ctx(s);
    if (ties > 0 || margins_out) margins = 1;
    if (margins) {
        /* the router analysis: one window, every line with its columns */
        if (n > n_ctx) {
            fprintf(stderr, "rkmojo perplexity: --router-margins takes at most n_ctx (%d) tokens, not %d\n", n_ctx, n);
            rc = 2;
            goto done;
        }
        rkm_router_ties t;
        if (rkm_router_ties_run(s, ids, n, ties, tie_gap, &t)) {
            fprintf(stderr, "rkmojo perplexity: %s\n", rkm_last_error());
            rc = 1;
            goto done;
        }
        rc = margins_out ? write_margins(margins_out, t.margins, n, rkm_model_n_layer(m)) : 0;
        int n_tie = 0;
        for (int p = 0; !rc && p < n; p++) {
            if (t.min_margin[p] == INFINITY) printf("%d %.6g inf -1", t.top1[p], t.gap[p]);
            else printf("%d %.6g %.6g %d", t.top1[p], t.gap[p], t.min_margin[p], t.min_layer[p]);
            if (ties > 0) printf(" %s", t.tie[p] ? "router" : "-");
            printf("\n");
            n_tie += t.tie[p];
        }
        if (!rc && ties > 0)
            fprintf(stderr, "router ties: %d decisions with a margin under %g; %d of %d positions changed by a flip\n",
                    t.n_flipped, ties, n_tie, n);
        rkm_router_ties_free(&t);
        goto done;
    }
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
