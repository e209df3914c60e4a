/*
 * mtmd_ref.c - runs llama.cpp's multimodal library (mtmd) on an image, as
 * the reference for rkmojo's vision encoders: the prebuilt llama.cpp
 * binding of the npm package @fugood/node-llama-linux-x64 (tests/js pins
 * it), whose index.node exports llama.cpp's and mtmd's C functions; it is
 * loaded with dlopen (RTLD_LAZY: its Node-API imports are never called)
 * and links nothing of rkmojo.
 *
 *   mtmd-ref ADDON TEXT.gguf MMPROJ.gguf embd IMAGE OUT.npy [THREADS]
 *       tokenizes "<__media__>" with the image as mtmd does (its own
 *       decoder and preprocessing), encodes the image chunk and writes its
 *       projected embeddings (mtmd_get_output_embd: one float32 row of the
 *       text model's input width per image token) to OUT.npy; prints
 *       "tokens N nx X ny Y n_embd E"
 *   mtmd-ref ADDON TEXT.gguf MMPROJ.gguf dump IMAGE NAME OUT.npy [THREADS]
 *       the same encode, writing instead the graph tensor NAME (read
 *       through the evaluation callback, cb_eval: "inp_raw" is the
 *       preprocessed image, "layer_out-0" the first block's output, ...)
 *       as float32 in ggml's order (ne[0] innermost, shape reversed in the
 *       header as numpy expects); prints its shape
 *
 *   mtmd-ref ADDON TEXT.gguf MMPROJ.gguf gen PROMPT N IMAGE... [-- THREADS]
 *       the prompt (with one "<__media__>" per image) tokenized by
 *       mtmd_tokenize (special tokens parsed, BOS as the vocabulary asks),
 *       evaluated by mtmd_helper_eval_chunks (images encoded and decoded
 *       as mtmd does: Gemma 4's attended both ways) in a context of 4096
 *       positions with batches of 2048 (an image in one), flash attention
 *       off; prints the text chunks' ids ("text ID ...") and the images'
 *       token counts ("image N") in order, the time the evaluation of the
 *       prompt took, images encoded ("prompt_ms T": the time to the
 *       first token's logits), "positions P", then N greedy
 *       ids (ties to the lower id), one per line, each with the gap
 *       between the two largest logits ("ID GAP"); stops early at an
 *       end-of-generation id
 *
 * $MTMD_IMAGE_MIN_TOKENS / $MTMD_IMAGE_MAX_TOKENS set mtmd's
 * image_min_tokens / image_max_tokens (every mode).
 *
 * mtmd_context_params is declared as the pinned version lays it; the
 * layout is checked (the default media marker at its place) before use.
 * Single-threaded apart from llama.cpp's own threads; exits on any error.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REF_PROG "mtmd-ref"
#include "ref_common.h"

typedef struct {
    _Alignas(8) unsigned char b[4096];
} params_buf;

typedef _Bool (*cb_eval_fn)(void *tensor, _Bool ask, void *user);

/* mtmd.h's struct mtmd_context_params of the pinned version */
typedef struct {
    _Bool use_gpu;
    _Bool print_timings;
    int n_threads;
    const char *image_marker;
    const char *media_marker;
    int flash_attn_type;
    _Bool warmup;
    int image_min_tokens;
    int image_max_tokens;
    cb_eval_fn cb_eval;
    void *cb_eval_user_data;
    int32_t batch_max_tokens;
    void *progress_callback;
    void *progress_callback_user_data;
    unsigned char spare[256]; /* room for fields a later version appends */
} mtmd_params;

/* mtmd-helper.h's struct mtmd_helper_bitmap_wrapper */
typedef struct {
    void *bitmap;
    void *video;
} bitmap_wrapper;

/* mtmd.h's struct mtmd_input_text of the pinned version: the text's
 * length follows its pointer (read as the text's length otherwise, the
 * two flags make 257 bytes) */
typedef struct {
    const char *text;
    size_t len;
    _Bool add_special;
    _Bool parse_special;
} mtmd_text;

static struct {
    void (*backend_init)(void);
    void (*log_set)(void (*)(int, const char *, void *), void *);
    void (*mtmd_log)(void (*)(int, const char *, void *), void *);
    params_buf (*model_default_params)(void);
    void *(*model_load_from_file)(const char *, params_buf);
    int32_t (*model_n_embd_inp)(const void *);
    const char *(*default_marker)(void);
    mtmd_params (*ctx_params_default)(void);
    void *(*init_from_file)(const char *, const void *, mtmd_params);
    bitmap_wrapper (*bitmap_from_file)(void *, const char *, _Bool);
    void *(*chunks_init)(void);
    size_t (*chunks_size)(const void *);
    const void *(*chunks_get)(const void *, size_t);
    int32_t (*tokenize)(void *, void *, const mtmd_text *, const void **, size_t);
    int (*chunk_type)(const void *);
    size_t (*chunk_n_tokens)(const void *);
    const void *(*chunk_image)(const void *);
    size_t (*image_nx)(const void *);
    size_t (*image_ny)(const void *);
    int32_t (*encode_chunk)(void *, const void *);
    float *(*output_embd)(void *);
    params_buf (*context_default_params)(void);
    void *(*init_from_model)(void *, params_buf);
    int32_t (*eval_chunks)(void *, void *, const void *, int32_t, int32_t, int32_t, _Bool, int32_t *);
    const int32_t *(*chunk_text)(const void *, size_t *);
    int32_t (*decode)(void *, llama_batch);
    float *(*get_logits_ith)(void *, int32_t);
    const void *(*model_get_vocab)(const void *);
    int32_t (*vocab_n_tokens)(const void *);
    _Bool (*vocab_is_eog)(const void *, int32_t);
} L;

static void load_lib(const char *path)
{
    void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    if (!h) die("dlopen", dlerror());
#define S(field, name) *(void **)&L.field = sym(h, name)
    S(backend_init, "llama_backend_init");
    S(log_set, "llama_log_set");
    S(mtmd_log, "mtmd_helper_log_set");
    S(model_default_params, "llama_model_default_params");
    S(model_load_from_file, "llama_model_load_from_file");
    S(model_n_embd_inp, "llama_model_n_embd_inp");
    S(default_marker, "mtmd_default_marker");
    S(ctx_params_default, "mtmd_context_params_default");
    S(init_from_file, "mtmd_init_from_file");
    S(bitmap_from_file, "mtmd_helper_bitmap_init_from_file");
    S(chunks_init, "mtmd_input_chunks_init");
    S(chunks_size, "mtmd_input_chunks_size");
    S(chunks_get, "mtmd_input_chunks_get");
    S(tokenize, "mtmd_tokenize");
    S(chunk_type, "mtmd_input_chunk_get_type");
    S(chunk_n_tokens, "mtmd_input_chunk_get_n_tokens");
    S(chunk_image, "mtmd_input_chunk_get_tokens_image");
    S(image_nx, "mtmd_image_tokens_get_nx");
    S(image_ny, "mtmd_image_tokens_get_ny");
    S(encode_chunk, "mtmd_encode_chunk");
    S(output_embd, "mtmd_get_output_embd");
    S(context_default_params, "llama_context_default_params");
    S(init_from_model, "llama_init_from_model");
    S(eval_chunks, "mtmd_helper_eval_chunks");
    S(chunk_text, "mtmd_input_chunk_get_tokens_text");
    S(decode, "llama_decode");
    S(get_logits_ith, "llama_get_logits_ith");
    S(model_get_vocab, "llama_model_get_vocab");
    S(vocab_n_tokens, "llama_vocab_n_tokens");
    S(vocab_is_eog, "llama_vocab_is_eog");
#undef S
}

static void write_npy(const char *path, const float *x, const int64_t *shape, int nd)
{
    char dims[160] = "";
    for (int i = 0; i < nd; i++)
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%lld%s", (long long)shape[i], nd == 1 ? "," : i + 1 < nd ? ", " : "");
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write", path);
    uint16_t hl = (uint16_t)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fwrite(&hl, 2, 1, f);
    fwrite(hdr, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    int64_t count = 1;
    for (int i = 0; i < nd; i++) count *= shape[i];
    if (fwrite(x, sizeof(float), (size_t)count, f) != (size_t)count || fclose(f)) die("write failed", path);
}

typedef struct {
    const char *name, *out;
    int seen;
} dump_ctx;

static _Bool dump_cb(void *t, _Bool ask, void *user)
{
    dump_ctx *d = user;
    if (strcmp(T_NAME(t), d->name)) return ask ? 0 : 1;
    if (ask) return 1;
    if (T_TYPE(t) != 0 || !T_DATA(t)) die("tensor is not host f32", d->name);
    int64_t ne[4], n = 1;
    for (int i = 0; i < 4; i++) n *= ne[i] = T_NE(t, i);
    float *x = malloc(sizeof(float) * (size_t)n);
    if (!x) die("out of memory", NULL);
    int64_t k = 0; /* gathered through the strides: views are not contiguous */
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
        for (int64_t i2 = 0; i2 < ne[2]; i2++)
            for (int64_t i1 = 0; i1 < ne[1]; i1++)
                for (int64_t i0 = 0; i0 < ne[0]; i0++)
                    x[k++] = *(const float *)((const char *)T_DATA(t) + i0 * T_NB(t, 0) + i1 * T_NB(t, 1) +
                                              i2 * T_NB(t, 2) + i3 * T_NB(t, 3));
    int nd = 4;
    while (nd > 1 && ne[nd - 1] == 1) nd--;
    int64_t shape[4];
    for (int i = 0; i < nd; i++) shape[i] = ne[nd - 1 - i];
    write_npy(d->out, x, shape, nd);
    printf("%s", d->name);
    for (int i = 0; i < 4; i++) printf(" %lld", (long long)ne[i]);
    printf("\n");
    free(x);
    d->seen++;
    return 1;
}

/* The text model's context: n_ctx 4096, n_batch = n_ubatch 2048 (an
 * image's rows in one batch), flash attention off. The pinned version
 * lays out n_ctx, n_batch, n_ubatch, n_seq_max, n_rs_seq, n_outputs_max,
 * n_threads, n_threads_batch, ctx_type, then the enums rope_scaling,
 * pooling, attention and flash_attn_type; its defaults are checked first
 * (512, 2048, 512, 1, 0, 0, -, -, 0, -1, -1, -1, -1). */
static params_buf ctx_params(int threads)
{
    params_buf p = L.context_default_params();
    int32_t v[13];
    memcpy(v, p.b, sizeof v);
    if (v[0] != 512 || v[1] != 2048 || v[2] != 512 || v[3] != 1 || v[4] != 0 || v[5] != 0 || v[8] != 0 ||
        v[9] != -1 || v[10] != -1 || v[11] != -1 || v[12] != -1)
        die("unexpected llama_context_params defaults (not the pinned llama.cpp?)", NULL);
    v[0] = 4096;
    v[2] = 2048;
    v[6] = v[7] = threads; /* n_threads, n_threads_batch */
    v[12] = 0;             /* LLAMA_FLASH_ATTN_TYPE_DISABLED */
    memcpy(p.b, v, sizeof v);
    return p;
}

/* The library loaded, the text model argv[2] and mtmd over it with the
 * projector argv[3] (CPU, no warmup, threads; cb: the evaluation
 * callback or NULL); exits on failure. */
static void *open_mtmd(char **argv, int threads, cb_eval_fn cb, void *cb_user, void **model)
{
    load_lib(argv[1]);
    L.log_set(quiet_log, NULL);
    L.mtmd_log(quiet_log, NULL);
    L.backend_init();
    *model = L.model_load_from_file(argv[2], L.model_default_params());
    if (!*model) die("cannot load the text model", argv[2]);
    mtmd_params p = L.ctx_params_default();
    if (!p.media_marker || strcmp(p.media_marker, L.default_marker()))
        die("unexpected mtmd_context_params layout (not the pinned llama.cpp?)", NULL);
    p.use_gpu = 0;
    p.print_timings = 0;
    p.n_threads = threads;
    p.warmup = 0;
    p.cb_eval = cb;
    p.cb_eval_user_data = cb_user;
    if (getenv("MTMD_IMAGE_MIN_TOKENS")) p.image_min_tokens = atoi(getenv("MTMD_IMAGE_MIN_TOKENS"));
    if (getenv("MTMD_IMAGE_MAX_TOKENS")) p.image_max_tokens = atoi(getenv("MTMD_IMAGE_MAX_TOKENS"));
    void *ctx = L.init_from_file(argv[3], *model, p);
    if (!ctx) die("mtmd cannot load the projector", argv[3]);
    return ctx;
}

/* The gen mode (see the header). */
static int gen(void *model, void *ctx, void *chunks, int n_predict, int threads)
{
    void *lctx = L.init_from_model(model, ctx_params(threads));
    if (!lctx) die("cannot create the llama context", NULL);
    for (size_t i = 0; i < L.chunks_size(chunks); i++) {
        const void *c = L.chunks_get(chunks, i);
        if (L.chunk_type(c) == 0 /* MTMD_INPUT_CHUNK_TYPE_TEXT */) {
            size_t n = 0;
            const int32_t *t = L.chunk_text(c, &n);
            printf("text");
            for (size_t k = 0; k < n; k++) printf(" %d", t[k]);
            printf("\n");
        } else {
            printf("image %zu\n", L.chunk_n_tokens(c));
        }
    }
    int32_t n_past = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (L.eval_chunks(ctx, lctx, chunks, 0, 0, 2048, 1, &n_past)) die("mtmd_helper_eval_chunks failed", NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("prompt_ms %.1f\n", 1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec));
    printf("positions %d\n", n_past);
    const void *vocab = L.model_get_vocab(model);
    const int32_t nv = L.vocab_n_tokens(vocab);
    for (int step = 0; step < n_predict; step++) {
        const float *l = L.get_logits_ith(lctx, -1);
        if (!l) die("no logits", NULL);
        int32_t best = 0, second = -1;
        for (int32_t v = 1; v < nv; v++) {
            if (l[v] > l[best]) {
                second = best;
                best = v;
            } else if (second < 0 || l[v] > l[second]) {
                second = v;
            }
        }
        printf("%d %.6f\n", best, second < 0 ? 1e9 : (double)(l[best] - l[second]));
        if (L.vocab_is_eog(vocab, best)) break;
        int32_t pos = n_past++, nseq = 1, seq0 = 0, *seq = &seq0;
        int8_t want = 1;
        llama_batch b = {1, &best, NULL, &pos, &nseq, &seq, &want};
        if (L.decode(lctx, b)) die("llama_decode failed", NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 8 && !strcmp(argv[4], "gen")) {
        int n_img = 0, threads = 2;
        const char *imgs[64];
        for (int i = 7; i < argc && n_img < 64; i++) {
            if (!strcmp(argv[i], "--") && i + 1 < argc) {
                threads = atoi(argv[i + 1]);
                break;
            }
            imgs[n_img++] = argv[i];
        }
        void *model, *ctx = open_mtmd(argv, threads, NULL, NULL, &model);
        const void *bms[64];
        for (int i = 0; i < n_img; i++)
            if (!(bms[i] = L.bitmap_from_file(ctx, imgs[i], 0).bitmap)) die("mtmd cannot decode the image", imgs[i]);
        void *chunks = L.chunks_init();
        mtmd_text text = {argv[5], strlen(argv[5]), 1, 1};
        if (L.tokenize(ctx, chunks, &text, bms, (size_t)n_img)) die("mtmd_tokenize failed", NULL);
        return gen(model, ctx, chunks, atoi(argv[6]), threads);
    }
    if (argc < 7) die("usage: mtmd-ref ADDON TEXT.gguf MMPROJ.gguf embd IMAGE OUT.npy [THREADS] | dump IMAGE NAME OUT.npy [THREADS]", NULL);
    const int dump = !strcmp(argv[4], "dump");
    if (!dump && strcmp(argv[4], "embd")) die("unknown mode", argv[4]);
    if (dump && argc < 8) die("dump wants IMAGE NAME OUT.npy", NULL);
    const char *image = argv[5];
    const int targ = dump ? 8 : 7;
    const int threads = argc > targ ? atoi(argv[targ]) : 2;
    dump_ctx dc = {dump ? argv[6] : NULL, dump ? argv[7] : NULL, 0};
    void *model, *ctx = open_mtmd(argv, threads, dump ? dump_cb : NULL, &dc, &model);
    const void *bm = L.bitmap_from_file(ctx, image, 0).bitmap;
    if (!bm) die("mtmd cannot decode the image", image);
    void *chunks = L.chunks_init();
    mtmd_text text = {L.default_marker(), strlen(L.default_marker()), 0, 1};
    int32_t rc = L.tokenize(ctx, chunks, &text, &bm, 1);
    if (rc) die("mtmd_tokenize failed", NULL);
    for (size_t i = 0; i < L.chunks_size(chunks); i++) {
        const void *c = L.chunks_get(chunks, i);
        if (L.chunk_type(c) != 1 /* MTMD_INPUT_CHUNK_TYPE_IMAGE */) continue;
        const void *it = L.chunk_image(c);
        const size_t n = L.chunk_n_tokens(c);
        if (L.encode_chunk(ctx, c)) die("mtmd_encode_chunk failed", NULL);
        const int32_t e = L.model_n_embd_inp(model);
        if (dump) {
            if (!dc.seen) die("no such tensor in the graph", dc.name);
            return 0;
        }
        printf("tokens %zu nx %zu ny %zu n_embd %d\n", n, L.image_nx(it), L.image_ny(it), e);
        const int64_t shape[2] = {(int64_t)n, e};
        write_npy(argv[6], L.output_embd(ctx), shape, 2);
        return 0;
    }
    die("no image chunk", NULL);
    return 1;
}
