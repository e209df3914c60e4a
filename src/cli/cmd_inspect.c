/* cmd_inspect.c - `rkmojo inspect MODEL.rkmojo [--verify]`: what a model
 * holds, and with --verify, whether every checksum still matches;
 * `rkmojo inspect MMPROJ.gguf [--image WxH ...]`: a vision tower, and the
 * size and image tokens an image of WxH pixels becomes (under
 * --image-min-tokens / --image-max-tokens, as run bounds them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "format/gguf.h"
#include "format/model_dir.h"
#include "format/vision.h"
#include "kernels/quant.h"
#include "util/common.h"

static void tokenizer_summary(const rkm_model_dir *md)
{
    if (!md->tokenizer_file) {
        printf("tokenizer:        none\n");
        return;
    }
    char *p = rkm_path_join(md->path, md->tokenizer_file);
    if (p && strstr(md->tokenizer_file, ".gguf")) {
        rkm_gguf *g = rkm_gguf_open(p);
        if (g) {
            const char *model = rkm_gguf_get_str(g, "tokenizer.ggml.model");
            const char *pre = rkm_gguf_get_str(g, "tokenizer.ggml.pre");
            int ti = rkm_gguf_find(g, "tokenizer.ggml.tokens");
            int64_t bos = -1, eos = -1;
            rkm_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos);
            rkm_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos);
            printf("tokenizer:        %s (%s, pre %s), %llu tokens, bos %lld, eos %lld\n", md->tokenizer_file,
                   model ? model : "?", pre ? pre : "default", (unsigned long long)rkm_gguf_arr_n(g, ti),
                   (long long)bos, (long long)eos);
            rkm_gguf_close(g);
        } else {
            printf("tokenizer:        %s (unreadable: %s)\n", md->tokenizer_file, rkm_last_error());
        }
    } else {
        printf("tokenizer:        %s%s%s\n", md->tokenizer_file, md->tokenizer_config_file ? " + " : "",
               md->tokenizer_config_file ? md->tokenizer_config_file : "");
    }
    free(p);
    printf("chat template:    %s\n", md->chat_template_file ? md->chat_template_file : "none (built-in fallback)");
}

/* An mmproj file: its vision tower as the encoder reads it, and each
 * --image size's resize and token count. */
static int inspect_mmproj(const char *path, const rkm_opt_list *sizes, int min_tokens, int max_tokens)
{
    rkm_gguf *g = rkm_gguf_open(path);
    rkm_vision_hparams vp;
    if (!g || rkm_vision_read(g, &vp) || rkm_vision_token_limits(&vp, min_tokens, max_tokens)) {
        fprintf(stderr, "rkmojo inspect: %s\n", rkm_last_error());
        rkm_gguf_close(g);
        return 1;
    }
    static const char *const ffn[] = {"quick GELU", "GELU", "SiLU"};
    printf("mmproj:           %s\n", path);
    printf("projector:        %s\n", rkm_proj_info_of(vp.proj)->name);
    printf("encoder:          %d blocks of %d, %d heads of %d (kv %d), FFN %d (%s), eps %g\n", vp.n_layer,
           vp.n_embd, vp.n_head, vp.head_dim, vp.n_head_kv, vp.n_ff, ffn[vp.ffn], (double)vp.eps);
    printf("patches:          %d px, merged %dx%d, position table %d, rope theta %g\n", vp.patch_size, vp.n_merge,
           vp.n_merge, vp.n_pos, (double)vp.rope_theta);
    printf("output:           %d wide%s", vp.proj_dim, vp.n_deepstack ? "" : "\n");
    if (vp.n_deepstack) printf(", + %d deep-stack features\n", vp.n_deepstack);
    const int area = vp.patch_size * vp.n_merge * vp.patch_size * vp.n_merge;
    printf("image tokens:     %d to %d (%d to %d pixels)\n", vp.min_pixels / area, vp.max_pixels / area,
           vp.min_pixels, vp.max_pixels);
    printf("normalisation:    mean %g %g %g, std %g %g %g\n", (double)vp.mean[0], (double)vp.mean[1],
           (double)vp.mean[2], (double)vp.std[0], (double)vp.std[1], (double)vp.std[2]);
    int rc = 0;
    for (int i = 0; i < sizes->n; i++) {
        int w, h, tw, th;
        char end;
        if (sscanf(sizes->v[i], "%dx%d%c", &w, &h, &end) != 2 || w < 1 || h < 1 || w > 65536 || h > 65536) {
            fprintf(stderr, "rkmojo inspect: --image wants WxH (1..65536 each), not '%s'\n", sizes->v[i]);
            rc = 2;
            continue;
        }
        int n = rkm_vision_fit(&vp, w, h, &tw, &th);
        char label[40];
        snprintf(label, sizeof label, "image %dx%d:", w, h);
        printf("%-18s%dx%d, %d tokens\n", label, tw, th, n);
    }
    rkm_gguf_close(g);
    return rc;
}

static int is_mmproj(const char *path)
{
    size_t n = strlen(path);
    if (n < 5 || strcmp(path + n - 5, ".gguf")) return 0;
    rkm_gguf *g = rkm_gguf_open(path);
    const char *arch = g ? rkm_gguf_get_str(g, "general.architecture") : NULL;
    int yes = arch && !strcmp(arch, "clip");
    rkm_gguf_close(g);
    return yes;
}

int rkm_cmd_inspect(int argc, char **argv)
{
    int verify = 0, arg0, img_min = 0, img_max = 0;
    const char **sizes = calloc((size_t)argc + 1, sizeof *sizes);
    if (!sizes) return 1;
    rkm_opt_list size_list = {sizes, 0, argc};
    const rkm_opt opts[] = {
        {"verify", 0, RKM_OPT_FLAG, &verify, .help = "check every checksum (reads the whole model)"},
        {"image", 0, RKM_OPT_LIST, &size_list, .arg = "WxH",
         .help = "an mmproj file: the size and tokens of a WxH image (repeatable)"},
        {"image-min-tokens", 0, RKM_OPT_INT, &img_min, 1, 1 << 20, "N", .help = "at least N tokens an image, as run takes it"},
        {"image-max-tokens", 0, RKM_OPT_INT, &img_max, 1, 1 << 20, "N", .help = "at most N tokens an image, as run takes it"},
        {0},
    };
    const rkm_opts_cmd cmd = {"inspect", "usage: rkmojo inspect MODEL.rkmojo [--verify]\n"
                                         "       rkmojo inspect MMPROJ.gguf [--image WxH ...] [--image-max-tokens N]\n\n", NULL, {opts}, 1};
    int rc = rkm_opts_parse(&cmd, argc, argv, &arg0);
    if (rc == RKM_OPTS_CONTINUE && arg0 == argc) rc = rkm_opts_error(&cmd, "needs MODEL.rkmojo or MMPROJ.gguf");
    if (rc == RKM_OPTS_CONTINUE && is_mmproj(argv[arg0])) rc = inspect_mmproj(argv[arg0], &size_list, img_min, img_max);
    else if (rc == RKM_OPTS_CONTINUE && size_list.n) rc = rkm_opts_error(&cmd, "--image is for mmproj files");
    free(sizes);
    if (rc != RKM_OPTS_CONTINUE) return rc;
    const char *dir = argv[arg0];
    rkm_model_dir *md = verify ? rkm_model_dir_open(dir) : rkm_model_dir_load_manifest(dir);
    if (!md) {
        fprintf(stderr, "rkmojo inspect: %s\n", rkm_last_error());
        return 1;
    }
    const rkm_hparams *hp = &md->hp;
    char b1[32], b2[32], b3[32];
    printf("model:            %s (format version %d)\n", dir, md->version);
    printf("source:           %s, quant %s\n", md->source ? md->source : "?", md->quant ? md->quant : "?");
    printf("architecture:     %s\n", hp->arch_name);
    printf("layers:           %d (%d with routed experts)\n", hp->n_layer, md->n_expert_layers);
    printf("hidden:           %d, vocab %d, trained context %d\n", hp->n_embd, hp->n_vocab, hp->n_ctx_train);
    printf("attention:        %d heads, head dim %d (v %d", hp->n_head, hp->head_dim, hp->head_dim_v);
    if (hp->sliding_window) printf(", sliding layers %d", hp->head_dim_swa);
    printf("), kv heads");
    for (int i = 0; i < hp->n_layer && i < 8; i++) printf(" %d", hp->n_head_kv[i]);
    printf("%s\n", hp->n_layer > 8 ? " ..." : "");
    printf("rope:             %s, theta %g", hp->rope_neox ? "neox" : "normal", hp->rope_theta);
    if (hp->sliding_window) printf(" (sliding %g)", hp->rope_theta_swa);
    printf(", dims %d%s", hp->rope_dim, hp->has_rope_freqs ? ", rope_freqs" : "");
    if (hp->rope_scaling != RKM_ROPE_SCALING_NONE) {
        printf(", %s scaling x%g", rkm_rope_scaling_name(hp->rope_scaling), 1.0 / hp->rope_freq_scale);
        if (hp->rope_scaling == RKM_ROPE_SCALING_YARN)
            printf(" (original context %d, beta %g/%g)", hp->rope_orig_ctx > 0 ? hp->rope_orig_ctx : hp->n_ctx_train,
                   (double)hp->yarn_beta_fast, (double)hp->yarn_beta_slow);
    }
    printf("\n");
    if (hp->sliding_window) {
        int n = 0;
        for (int i = 0; i < hp->n_layer; i++) n += hp->swa_layer[i];
        printf("sliding window:   %d tokens on %d of %d layers\n", hp->sliding_window, n, hp->n_layer);
    }
    int n_recr = 0;
    size_t rs = 0;
    for (int i = 0; i < hp->n_layer; i++) {
        n_recr += hp->recr_layer[i];
        rs += rkm_hparams_recurrent_state_floats(hp, i);
    }
    if (n_recr) {
        static const char *const kinds[] = {"Gated DeltaNet", "short convolution", "Mamba-2"};
        const char *kind = hp->recr_kind >= 0 && hp->recr_kind < 3 ? kinds[hp->recr_kind] : "?";
        printf("recurrent:        %d of %d layers %s (kernel %d", n_recr, hp->n_layer, kind, hp->ssm_d_conv);
        if (hp->recr_kind != RKM_RECR_SHORTCONV)
            printf(", %d heads, state %d, %d groups", hp->ssm_dt_rank, hp->ssm_d_state, hp->ssm_n_group);
        printf("), %s of state per session\n", rkm_fmt_bytes(4 * (uint64_t)rs, b1, sizeof b1));
    }
    printf("norms:            rms eps %g, qk-norm %s%s\n", hp->rms_eps,
           hp->qk_norm == RKM_QK_NORM_HEAD ? "per head" : hp->qk_norm == RKM_QK_NORM_FULL ? "full" : "none",
           hp->gemma4_norms ? ", gemma4 sandwich norms" : "");
    if (hp->n_expert)
        printf("experts:          %d routed, top-%d%s, FFN %d%s", hp->n_expert, hp->n_expert_used,
               hp->expert_norm_topk ? " renormalised" : "", hp->n_ff_exp, hp->act == RKM_ACT_GELU_TANH ? " (GeGLU)" : hp->act == RKM_ACT_SWIGLU_OAI ? " (SwiGLU clamped at 7)" : " (SwiGLU)");
    if (hp->n_ff_shexp) printf(", shared expert %d%s", hp->n_ff_shexp, hp->shexp_gate ? " (sigmoid gate)" : "");
    if (hp->n_expert) printf("\n");
    if (hp->n_ff) printf("dense FFN:        %d\n", hp->n_ff);
    if (hp->final_softcap) printf("logit soft-cap:   %g\n", hp->final_softcap);
    int counts[RKM_TYPE_COUNT] = {0};
    for (int i = 0; i < md->n_tensors; i++) counts[md->tensors[i].type]++;
    printf("resident:         %s in %d tensors (", rkm_fmt_bytes(md->resident_bytes, b1, sizeof b1), md->n_tensors);
    for (int t = 0, first = 1; t < RKM_TYPE_COUNT; t++)
        if (counts[t]) {
            printf("%s%d %s", first ? "" : ", ", counts[t], rkm_type_name(t));
            first = 0;
        }
    printf(")\n");
    uint64_t total_exp = 0;
    for (int i = 0; i < md->n_expert_layers; i++) total_exp += md->experts[i].blob_stride * (uint64_t)md->experts[i].n_expert;
    if (md->n_expert_layers) {
        const rkm_expert_layer *el = &md->experts[0];
        printf("routed experts:   %s on disk: %d layers x %d experts, %s per expert (blob %s; gate %s, up %s, down %s)\n",
               rkm_fmt_bytes(total_exp, b1, sizeof b1), md->n_expert_layers, el->n_expert,
               rkm_fmt_bytes(el->blob_bytes, b2, sizeof b2), rkm_fmt_bytes(el->blob_stride, b3, sizeof b3),
               rkm_type_name(el->part[0].type), rkm_type_name(el->part[1].type), rkm_type_name(el->part[2].type));
        printf("per layer:        %s of experts, %s active per token (top-%d)\n",
               rkm_fmt_bytes(el->blob_stride * (uint64_t)el->n_expert, b1, sizeof b1),
               rkm_fmt_bytes(el->blob_stride * (uint64_t)hp->n_expert_used, b2, sizeof b2), hp->n_expert_used);
    }
    tokenizer_summary(md);
    if (md->mmproj_file)
        printf("vision tower:     %s, %s\n", md->mmproj_file, rkm_fmt_bytes(md->mmproj_bytes, b1, sizeof b1));
    const rkm_sampling_hint *sh = &md->sampling;
    if (sh->set) {
        printf("sampling:         the model recommends");
        if (sh->set & RKM_SAMPLING_TEMPERATURE) printf(" temperature %g", sh->temperature);
        if (sh->set & RKM_SAMPLING_TOP_K) printf(" top-k %d", sh->top_k);
        if (sh->set & RKM_SAMPLING_TOP_P) printf(" top-p %g", sh->top_p);
        if (sh->set & RKM_SAMPLING_MIN_P) printf(" min-p %g", sh->min_p);
        if (sh->set & RKM_SAMPLING_REPEAT_PENALTY) printf(" repeat-penalty %g", sh->repeat_penalty);
        if (sh->set & RKM_SAMPLING_REPEAT_LAST_N) printf(" repeat-last-n %d", sh->repeat_last_n);
        printf("\n");
    } else {
        printf("sampling:         the defaults (the model recommends none)\n");
    }
    rc = 0;
    if (verify) {
        printf("verify:           ");
        fflush(stdout);
        if (rkm_model_dir_verify(md) != 0) {
            printf("FAILED\n");
            fprintf(stderr, "rkmojo inspect: %s\n", rkm_last_error());
            rc = 1;
        } else {
            printf("ok (%d resident tensors, %d expert blobs)\n", md->n_tensors,
                   md->n_expert_layers ? md->n_expert_layers * md->experts[0].n_expert : 0);
        }
    }
    rkm_model_dir_close(md);
    return rc;
}
