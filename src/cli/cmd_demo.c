/*
 * cmd_demo.c - `rkmojo demo`: what a new user sees first, and the point of
 * the project: a synthetic MoE model (random weights, real structure)
 * several times larger than the memory budget it runs under, its routed
 * experts streamed from disk as the router picks them. Synthesizes it,
 * converts it, generates under the budget and prints what happened (model
 * size, budget, peak RSS, hit rate, bytes read per token, tok/s), saying
 * plainly that random weights output noise. A converted model from an
 * earlier run is reused. Runs the synth and convert subcommands
 * in-process. Single-threaded driver.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/chat_format.h"
#include "cli/cli.h"
#include "cli/gen_common.h"
#include "text/tokenizer.h"
#include "util/common.h"
#include "util/knobs.h"

static int on_token(int32_t id, void *user) { return rkm_text_out_push(user, id); }

/* The built-in vocabulary's size without reserved tokens: its trained
 * tokens and its 4 special ones (a random model over 50k mostly reserved
 * ids would print little but their names). */
static int builtin_vocab_size(void)
{
    rkm_tokenizer *t = rkm_tokenizer_builtin(1 << 16);
    int n = 0;
    while (t && n < (1 << 16) - 4 && rkm_tokenizer_token_type(t, n) == RKM_TOKEN_NORMAL) n++;
    rkm_tokenizer_free(t);
    return n > 256 ? n + 4 : 512;
}

static uint64_t du_total, du_experts;
static int du_add(const char *path, const struct stat *st, int type, struct FTW *f)
{
    (void)f;
    if (type == FTW_F) {
        du_total += (uint64_t)st->st_size;
        if (strstr(path, "/experts/")) du_experts += (uint64_t)st->st_size;
    }
    return 0;
}

/* The bytes of the files under dir (0 if none); *experts those of its expert files. */
static uint64_t dir_bytes(const char *dir, uint64_t *experts)
{
    du_total = du_experts = 0;
    nftw(dir, du_add, 16, FTW_PHYS);
    *experts = du_experts;
    return du_total;
}

int rkm_cmd_demo(int argc, char **argv)
{
    rkm_gen_opts o;
    rkm_gen_opts_init(&o, 1);
    const char *preset = "olmoe-1b-7b", *layers = "8", *dir = NULL, *prompt = "Once upon a time, in a small town by the sea,";
    int n_predict = 48, fresh = 0;
    const rkm_opt opts[] = {
        {"preset", 0, RKM_OPT_STR, &preset, .arg = "NAME",
         .help = "the synthetic model's shape (default olmoe-1b-7b; rkmojo synth --help)"},
        {"layers", 0, RKM_OPT_STR, &layers, .arg = "N",
         .help = "its layers (default 8 of olmoe-1b-7b's 16: about 2 GB in q4_0;\n\"all\": the preset's)"},
        {"dir", 0, RKM_OPT_STR, &dir, .arg = "DIR", .help = "where the files go (default $TMPDIR/rkmojo-demo)"},
        {"fresh", 0, RKM_OPT_FLAG, &fresh, .help = "synthesize and convert again even if DIR holds the model"},
        {"prompt", 'p', RKM_OPT_STR, &prompt, .arg = "TEXT", .help = "the prompt"},
        {"n-predict", 'n', RKM_OPT_INT, &n_predict, -1, 1 << 30, "N", .help = "tokens to generate (default 48)"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "demo",
        "usage: rkmojo demo [--preset NAME] [--layers N|all] [--mem-budget SIZE] [--dir DIR] [--fresh]\n"
        "                   [-p PROMPT] [-n N]\n\n"
        "Synthesizes a random-weight MoE model (default: OLMoE-1B-7B's shape, 8 of its\n"
        "16 layers, q4_0, about 2 GB), converts it to .rkmojo, and generates N tokens\n"
        "(default 48) under a memory budget (default 512M, with a 512-token context)\n"
        "a quarter of the model's size: the experts the router picks are read from\n"
        "disk as they are needed.\n"
        "Prints the model size, the budget, the peak RSS, the expert-cache hit rate,\n"
        "the bytes read per token and the speed. The text is noise: the weights are\n"
        "random. Files go to DIR (default $TMPDIR/rkmojo-demo); a converted model\n"
        "from an earlier run is reused.\n\n",
        NULL, {opts, o.model_opts, o.session_opts, o.sampling_opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    if (!o.mp.mem_budget_bytes) o.mp.mem_budget_bytes = (uint64_t)512 << 20;
    if (!o.sp.n_ctx) o.sp.n_ctx = 512; /* a short story: its KV cache leaves the budget to the experts */
    char dbuf[1024], gguf[1100], model[1100], mani[1200], set[64];
    if (!dir) {
        const char *t = rkm_knob(RKM_KNOB_TMPDIR);
        snprintf(dbuf, sizeof dbuf, "%s/rkmojo-demo", t && *t ? t : "/tmp");
        dir = dbuf;
    }
    if (rkm_mkdir_p(dir)) {
        fprintf(stderr, "rkmojo demo: %s\n", rkm_last_error());
        return 1;
    }
    int all = !strcmp(layers, "all");
    snprintf(gguf, sizeof gguf, "%s/%s-%s.gguf", dir, preset, all ? "all" : layers);
    snprintf(model, sizeof model, "%s/%s-%sl-q4_0.rkmojo", dir, preset, all ? "all" : layers);
    snprintf(mani, sizeof mani, "%s/manifest.json", model);
    char vset[64];
    snprintf(set, sizeof set, "n_layer=%s", layers);
    snprintf(vset, sizeof vset, "n_vocab=%d", builtin_vocab_size());
    struct stat sb;
    if (fresh || stat(mani, &sb) != 0) { /* convert writes the manifest last */
        printf("== 1. synthesize a '%s'-shaped MoE checkpoint%s%s (random weights, real\n"
               "      structure; the built-in vocabulary), q4_0, on every core\n",
               preset, all ? "" : ", layers: ", all ? "" : layers);
        printf("   rkmojo synth --preset %s%s%s --set %s --dtype q4_0 -o %s\n", preset, all ? "" : " --set ", all ? "" : set,
               vset, gguf);
        fflush(stdout);
        char *sargv[] = {"synth", "--preset", (char *)preset, "--dtype", "q4_0", "-o", gguf, "--set", vset, "--set", set, NULL};
        if (rkm_cmd_synth(all ? 9 : 11, sargv)) return 1;

        printf("== 2. convert it to .rkmojo: resident weights + one file of experts per layer\n");
        printf("   rkmojo convert %s %s --quant keep   (then the GGUF is removed)\n", gguf, model);
        fflush(stdout);
        char *cargv[] = {"convert", gguf, model, "--quant", "keep", NULL};
        if (rkm_cmd_convert(5, cargv)) return 1;
        unlink(gguf);
    } else {
        printf("== 1-2. %s holds the converted model from an earlier run (--fresh to redo it)\n", model);
    }
    uint64_t experts, total = dir_bytes(model, &experts);
    char b1[32], b2[32], b3[32];
    printf("== 3. generate %d tokens under a %s memory budget: the model is %s on disk\n"
           "      (%s of it routed experts), so most experts stay on disk and are read\n"
           "      when the router picks them\n",
           n_predict, rkm_fmt_bytes(o.mp.mem_budget_bytes, b1, sizeof b1), rkm_fmt_bytes(total, b2, sizeof b2),
           rkm_fmt_bytes(experts, b3, sizeof b3));
    printf("   rkmojo run -m %s --mem-budget %s -p \"%s\" -n %d\n\n", model, b1, prompt, n_predict);
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
    rkm_stats st0, st;
    rkm_session_stats(s, &st0);
    rkm_text_out out;
    rkm_text_out_init(&out, m, stdout, NULL, 0);
    rc = rkm_session_generate(s, n_predict, on_token, &out);
    rkm_text_out_finish(&out);
    rkm_text_out_free(&out);
    printf("\n");
    rkm_session_stats(s, &st);
    rkm_print_footer(stdout, &st);
    {
        char plan[512];
        uint64_t hits = st.expert_hits - st0.expert_hits, miss = st.expert_misses - st0.expert_misses;
        int ng = st.n_gen > 0 ? st.n_gen : 1;
        printf("\n== what happened\n");
        printf("   model on disk      %s (%s of routed experts)\n", rkm_fmt_bytes(total, b1, sizeof b1),
               rkm_fmt_bytes(experts, b2, sizeof b2));
        printf("   memory budget      %s, %.1fx smaller than the model\n", rkm_fmt_bytes(o.mp.mem_budget_bytes, b1, sizeof b1),
               (double)total / (double)o.mp.mem_budget_bytes);
        printf("   peak RSS           %s\n", rkm_fmt_bytes(rkm_peak_rss_bytes(), b1, sizeof b1));
        printf("   memory plan        %s\n", rkm_model_plan(m, NULL, NULL, plan, sizeof plan));
        printf("   decode             %d tokens, %.2f tok/s; expert-cache hit rate %.1f%%\n", st.n_gen,
               st.t_gen_s > 0 ? st.n_gen / st.t_gen_s : 0.0, hits + miss ? 100.0 * (double)hits / (double)(hits + miss) : 0.0);
        printf("   read from disk     %s per generated token (%s in all, IO wait %.2f s)\n",
               rkm_fmt_bytes((st.bytes_read - st0.bytes_read) / (uint64_t)ng, b1, sizeof b1),
               rkm_fmt_bytes(st.bytes_read, b2, sizeof b2), st.io_wait_s);
    }
    printf("\nThe text above is noise: this model has random weights, so it cannot say\n"
           "anything meaningful. It shows the engine working end to end (routing, experts\n"
           "streamed from disk under the budget, KV cache, sampling) and its speed. For real\n"
           "text, convert a real checkpoint (a GGUF as published with --quant keep; a Hugging\n"
           "Face directory with, say, q4_k_m) and run it under the budget your board has:\n"
           "  rkmojo convert MODEL.gguf OUT.rkmojo --quant keep\n"
           "  rkmojo run -m OUT.rkmojo --mem-budget 4G -p \"...\"\n");
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
