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
 * mtmd_context_params is declared as the pinned version lays it; the
 * layout is checked (the default media marker at its place) before use.
 * Single-threaded apart from llama.cpp's own threads; exits on any error.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

typedef struct {
    const char *text;
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

int main(int argc, char **argv)
{
    if (argc < 7) die("usage: mtmd-ref ADDON TEXT.gguf MMPROJ.gguf embd IMAGE OUT.npy [THREADS] | dump IMAGE NAME OUT.npy [THREADS]", NULL);
    const int dump = !strcmp(argv[4], "dump");
    if (!dump && strcmp(argv[4], "embd")) die("unknown mode", argv[4]);
    if (dump && argc < 8) die("dump wants IMAGE NAME OUT.npy", NULL);
    const char *image = argv[5];
    const int targ = dump ? 8 : 7;
    const int threads = argc > targ ? atoi(argv[targ]) : 2;
    load_lib(argv[1]);
    L.log_set(quiet_log, NULL);
    L.mtmd_log(quiet_log, NULL);
    L.backend_init();
    void *model = L.model_load_from_file(argv[2], L.model_default_params());
    if (!model) die("cannot load the text model", argv[2]);
    mtmd_params p = L.ctx_params_default();
    if (!p.media_marker || strcmp(p.media_marker, L.default_marker()))
        die("unexpected mtmd_context_params layout (not the pinned llama.cpp?)", NULL);
    p.use_gpu = 0;
    p.print_timings = 0;
    p.n_threads = threads;
    p.warmup = 0;
    dump_ctx dc = {dump ? argv[6] : NULL, dump ? argv[7] : NULL, 0};
    if (dump) {
        p.cb_eval = dump_cb;
        p.cb_eval_user_data = &dc;
    }
    void *ctx = L.init_from_file(argv[3], model, p);
    if (!ctx) die("mtmd cannot load the projector", argv[3]);
    const void *bm = L.bitmap_from_file(ctx, image, 0).bitmap;
    if (!bm) die("mtmd cannot decode the image", image);
    void *chunks = L.chunks_init();
    mtmd_text text = {L.default_marker(), 0, 1};
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
