/*
 * cmd_run.c - `rkmojo run`: evaluate a prompt (text, chat-formatted text,
 * or token ids) and stream the generated text to stdout, statistics on
 * stderr. Single-threaded driver; the library's pool does the compute.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/gen_common.h"
#include "cli/chat_format.h"
#include "cli/images.h"
#include "runtime/media.h"
#include "format/model_dir.h"
#include "util/common.h"

typedef struct {
    rkm_text_out *out;
    int print_ids;
    int n;
} run_ctx;

static int on_token(int32_t id, void *user)
{
    run_ctx *c = user;
    c->n++;
    if (c->print_ids) {
        printf("%d\n", id);
        fflush(stdout);
        return 0;
    }
    return rkm_text_out_push(c->out, id);
}

/* --image-embd-out with a model: each image's rows as they go in. */
static int write_rows(void *user, int image, const float *rows, int n, int cols)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s.%d.npy", (const char *)user, image) >= (int)sizeof path)
        return rkm_err(RKM_EINVAL, "--image-embd-out prefix too long");
    return rkm_cli_write_npy(path, rows, n, cols);
}

/* Positions of p that are text. */
static int count_text(const rkm_media_prompt *p)
{
    int n = p->n_ids;
    for (int i = 0; i < p->n_img; i++) n -= p->img[i].n_tokens;
    return n;
}

int rkm_cmd_run(int argc, char **argv)
{
    rkm_gen_opts o;
    rkm_gen_opts_init(&o, 1);
    const char *prompt = NULL, *file = NULL, *ids_arg = NULL, *system = NULL, *grammar = NULL, *schema = NULL;
    const char *stop[32];
    rkm_opt_list stops = {stop, 0, (int)RKM_ARRAY_LEN(stop)};
    int n_predict = 256, print_ids = 0, chat = 0, no_bos = 0;
    const char *mmproj = NULL, *embd_out = NULL;
    int img_min = 0, img_max = 0;
    const char *image[16];
    rkm_opt_list images = {image, 0, (int)RKM_ARRAY_LEN(image)};
    const rkm_opt opts[] = {
        {"prompt", 'p', RKM_OPT_STR, &prompt, .arg = "TEXT", .help = "the prompt"},
        {"file", 'f', RKM_OPT_STR, &file, .arg = "FILE", .help = "read the prompt from a file"},
        {"prompt-ids", 0, RKM_OPT_STR, &ids_arg, .arg = "IDS", .help = "the prompt as token ids (no tokenizer, no BOS)"},
        {"print-ids", 0, RKM_OPT_FLAG, &print_ids, .help = "print generated ids (one per line) instead of text"},
        {"n-predict", 'n', RKM_OPT_INT, &n_predict, -1, 1 << 30, "N", .help = "tokens to generate (default 256)"},
        {"stop", 0, RKM_OPT_LIST, &stops, .arg = "STR", .help = "stop when STR is generated (repeatable)"},
        {"chat", 0, RKM_OPT_FLAG, &chat, .help = "format the prompt with the model's chat template"},
        {"system", 0, RKM_OPT_STR, &system, .arg = "TEXT", .help = "system message (with --chat)"},
        {"no-bos", 0, RKM_OPT_FLAG, &no_bos, .help = "do not add BOS even if the tokenizer asks for it"},
        {"grammar", 0, RKM_OPT_STR, &grammar, .arg = "FILE", .help = "generate only sentences of this GBNF grammar"},
        {"json-schema", 0, RKM_OPT_STR, &schema, .arg = "FILE|JSON",
         .help = "generate JSON that this schema describes ({} or 'object': any object)"},
        {"image", 0, RKM_OPT_LIST, &images, .arg = "FILE", .help = "an image (PNG, JPEG, WebP; repeatable, at most 16)"},
        {"mmproj", 0, RKM_OPT_STR, &mmproj, .arg = "FILE", .help = "the vision tower (an mmproj GGUF) that encodes --image"},
        {"image-max-tokens", 0, RKM_OPT_INT, &img_max, 1, 1 << 20, "N",
         .help = "at most N tokens an image (smaller: faster, coarser; default the\nprojector's, 280 for Gemma 4)"},
        {"image-min-tokens", 0, RKM_OPT_INT, &img_min, 1, 1 << 20, "N", .help = "at least N tokens an image (small images upscaled)"},
        {"image-embd-out", 0, RKM_OPT_STR, &embd_out, .arg = "PREFIX",
         .help = "write each image's embeddings as PREFIX.N.npy (float32,\none row per image token)"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "run", "usage: rkmojo run -m MODEL (-p PROMPT | -f FILE | --prompt-ids 1,2,3) [options]\n\n", NULL,
        {opts, o.model_opts, o.session_opts, o.sampling_opts}, 0,
    };
    int parsed = rkm_opts_parse(&cmd, argc, argv, NULL);
    if (parsed != RKM_OPTS_CONTINUE) return parsed;
    if (!!prompt + !!file + !!ids_arg != 1) return rkm_opts_error(&cmd, "give exactly one of -p, -f, --prompt-ids");
    if (grammar && schema) return rkm_opts_error(&cmd, "give at most one of --grammar, --json-schema");
    int n_stop = stops.n;
    if (n_predict < 0) n_predict = 0;
    rkm_vision *vis = NULL;
    rkm_image img[16];
    memset(img, 0, sizeof img);
    if (images.n || embd_out || mmproj) {
        /* the tower: --mmproj, else the one the model carries (convert --mmproj) */
        char *carried = NULL;
        if (!mmproj && o.model) {
            rkm_model_dir *md = rkm_model_dir_load_manifest(o.model);
            if (md && md->mmproj_file) mmproj = carried = rkm_path_join(md->path, md->mmproj_file);
            rkm_model_dir_close(md);
        }
        if (!images.n || !mmproj) {
            free(carried);
            return rkm_opts_error(&cmd, "--image needs a vision tower: --mmproj FILE, or a model converted with --mmproj");
        }
        if (!o.model) {
            int irc = rkm_cli_images_encode(mmproj, image, images.n, o.mp.n_threads, embd_out, img_min, img_max);
            if (irc || !o.model) {
                free(carried);
                if (!irc && n_predict > 0) {
                    fprintf(stderr, "rkmojo run: generating from images needs the text model (-m MODEL); without it, "
                                    "run -n 0 --image-embd-out PREFIX writes the image embeddings\n");
                    return 2;
                }
                return irc;
            }
        }
        if (ids_arg) {
            free(carried);
            return rkm_opts_error(&cmd, "--image needs a text prompt (-p or -f) with one " RKM_MEDIA_MARKER " per image");
        }
        int irc = rkm_cli_images_open(mmproj, image, images.n, img_min, img_max, &vis, img);
        free(carried);
        if (irc) return irc;
        /* an image attended both ways is one prefill chunk */
        const rkm_vision_hparams *vp = rkm_vision_hparams_of(vis);
        for (int i = 0; i < images.n && rkm_proj_info_of(vp->proj)->bidirectional; i++) {
            int tw, th, nt = rkm_vision_fit(vp, img[i].w, img[i].h, &tw, &th);
            if (nt > (o.sp.n_chunk > 0 ? o.sp.n_chunk : 128)) o.sp.n_chunk = nt;
        }
    }
    rkm_media_prompt mprompt = {0};
    rkm_pool *vpool = NULL;
    rkm_model *m;
    rkm_session *s;
    int rc = rkm_gen_open(&o, &m, &s);
    if (rc) {
        for (int i = 0; i < images.n; i++) rkm_image_free(&img[i]);
        rkm_vision_free(vis);
        return rc;
    }
    int32_t *ids = NULL;
    int n_ids = 0;
    char *ftext = NULL;
    rkm_text_out out;
    rkm_text_out_init(&out, m, stdout, stop, n_stop);
    if (ids_arg) {
        n_ids = rkm_parse_ids(ids_arg, &ids);
        if (n_ids <= 0) {
            fprintf(stderr, "rkmojo run: --prompt-ids needs at least one id\n");
            rc = 2;
            goto done;
        }
    } else {
        if (file) {
            size_t len;
            ftext = rkm_read_file(file, &len);
            if (!ftext) {
                fprintf(stderr, "rkmojo run: %s\n", rkm_last_error());
                rc = 1;
                goto done;
            }
            prompt = ftext;
        }
        if (vis) {
            /* the text around the markers with the images' rows between */
            char *chat_text = NULL;
            int add_bos = 1;
            if (chat) {
                rkm_chat_message msgs[2];
                int nm = 0;
                if (system) msgs[nm++] = (rkm_chat_message){"system", system};
                msgs[nm++] = (rkm_chat_message){"user", prompt};
                chat_text = rkm_chat_prompt(m, msgs, nm, 1, &add_bos);
            }
            n_ids = chat && !chat_text ? RKM_EINVAL
                                       : rkm_media_prompt_build(m, rkm_vision_hparams_of(vis), chat ? chat_text : prompt,
                                                                img, images.n, add_bos && !no_bos, &mprompt);
            free(chat_text);
            if (n_ids < 0) {
                fprintf(stderr, "rkmojo run: %s\n", rkm_last_error());
                rc = 2;
                goto done;
            }
            n_ids = mprompt.n_ids;
        } else if (chat) {
            rkm_chat_message msgs[2];
            int nm = 0;
            if (system) msgs[nm++] = (rkm_chat_message){"system", system};
            msgs[nm++] = (rkm_chat_message){"user", prompt};
            n_ids = rkm_chat_tokens(m, msgs, nm, !no_bos, &ids);
        } else {
            n_ids = rkm_tokenize_alloc(m, prompt, strlen(prompt), !no_bos, 0, &ids);
        }
        if (n_ids < 0) {
            fprintf(stderr, "rkmojo run: tokenize: %s\n", rkm_last_error());
            rc = 1;
            goto done;
        }
        if (n_ids == 0) {
            fprintf(stderr, "rkmojo run: the prompt is empty\n");
            rc = 2;
            goto done;
        }
    }
    if (grammar || schema) {
        char *gb = NULL;
        if (grammar) {
            gb = rkm_read_file(grammar, NULL);
        } else if (!strcmp(schema, "object")) {
            gb = rkm_json_schema_grammar(NULL, 0);
        } else {
            char *st = schema[0] == '{' ? strdup(schema) : rkm_read_file(schema, NULL);
            gb = st ? rkm_json_schema_grammar(st, strlen(st)) : NULL;
            free(st);
        }
        if (!gb || rkm_session_set_grammar(s, gb)) {
            fprintf(stderr, "rkmojo run: %s\n", rkm_last_error());
            free(gb);
            rc = 2;
            goto done;
        }
        free(gb);
    }
    if (vis) {
        int n_enc = 0;
        mprompt.on_rows = embd_out ? write_rows : NULL;
        mprompt.user = (void *)embd_out;
        if (rkm_vision_bind(vis, m) > 0 && !o.quiet) fprintf(stderr, "vision tower: matmuls on the NPU\n");
        const double t0 = rkm_now();
        vpool = rkm_pool_new(o.mp.n_threads);
        rc = vpool ? rkm_media_prompt_eval(s, &mprompt, vis, vpool, &n_enc) : rkm_err(RKM_ENOMEM, "no thread pool");
        if (!rc && !o.quiet)
            fprintf(stderr, "prompt: %d positions, %d image%s (%d rows) encoded and evaluated in %.0f ms\n",
                    rkm_session_n_pos(s), n_enc, n_enc == 1 ? "" : "s", n_ids - count_text(&mprompt),
                    1e3 * (rkm_now() - t0));
    } else {
        rc = rkm_session_eval(s, ids, n_ids, NULL);
    }
    if (rc) {
        fprintf(stderr, "rkmojo run: %s\n", rkm_last_error());
        rc = 1;
        goto done;
    }
    run_ctx c = {&out, print_ids, 0};
    rc = rkm_session_generate(s, n_predict, on_token, &c);
    rkm_text_out_finish(&out);
    if (rc) {
        fprintf(stderr, "\nrkmojo run: %s\n", rkm_last_error());
        rc = 1;
    } else if (!print_ids) {
        printf("\n");
    }
    if (!o.quiet) {
        rkm_stats st;
        rkm_session_stats(s, &st);
        rkm_print_footer(stderr, &st);
    }
done:
    rkm_media_prompt_free(&mprompt);
    for (int i = 0; i < images.n; i++) rkm_image_free(&img[i]);
    rkm_pool_free(vpool);
    rkm_vision_free(vis);
    rkm_text_out_free(&out);
    free(ids);
    free(ftext);
    rkm_session_free(s);
    rkm_model_close(m);
    return rc;
}
