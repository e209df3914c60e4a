/*
 * llama_cpp_ref.c - runs llama.cpp itself on a GGUF file, as the reference
 * for tests and benchmarks: the prebuilt libllama of the npm package
 * @node-llama-cpp/linux-x64 (tests/js/package.json pins it), loaded with
 * dlopen from the folder given on the command line. Not part of rkmojo;
 * links nothing of it.
 *
 *   llama-cpp-ref LIBDIR MODEL.gguf ids ID,ID,... N
 *       feeds the prompt ids (no BOS added), then prints the N greedy ids
 *       (argmax of the logits, ties to the lower id), one per line, each
 *       with the gaps between the two largest probabilities of that step
 *       (softmax in double) and between the two largest logits, which
 *       tell near-ties apart
 *   llama-cpp-ref LIBDIR MODEL.gguf bench N_PROMPT N_GEN REPS THREADS
 *       per rep: one N_PROMPT-token batch of random ids on a fresh context
 *       (prefill), then N_GEN greedy decode steps on another from
 *       position 0 (llama-bench's pp and tg); prints tok/s of each
 *   llama-cpp-ref LIBDIR IN.gguf quantize OUT.gguf FTYPE
 *       llama.cpp's own quantizer (llama_model_quantize, no importance
 *       matrix, llama.cpp's per-tensor rules of the mix): FTYPE is a mix
 *       name as llama-quantize takes it (q4_k_m, q6_k, mxfp4_moe, ...)
 *   llama-cpp-ref LIBDIR IN.gguf experts OUT.gguf TYPE
 *       the routed experts (tensors named *_exps.weight) of an F32 file
 *       quantized to the ggml type TYPE (iq2_xxs, iq1_s, ...) by ggml's
 *       own quantizer (ggml_quantize_chunk, with a uniform importance
 *       matrix: llama_model_quantize refuses the IQ1/IQ2 types without
 *       one, and its matrix argument is a C++ object), the other tensors
 *       and the metadata copied (as llama-quantize writes: gguf_set_kv,
 *       gguf_add_tensor, gguf_set_tensor_type, gguf_write_to_file);
 *       expert rows that are not a multiple of the type's block stay F32
 *   llama-cpp-ref LIBDIR MODEL.gguf meta
 *       loads the model and prints what llama.cpp makes of it: its
 *       description (llama_model_desc: architecture, size, file type),
 *       then every metadata key it keeps with its value as llama.cpp
 *       prints it, "key = value", one per line (newlines as \n)
 *   llama-cpp-ref LIBDIR VOCAB.gguf vocab
 *       loads only the vocabulary (vocab_only) and prints its special
 *       tokens as `rkmojo tokenize --specials` does: the ids of each role
 *       (bos, eos, unk, sep, pad, mask, eot, eom, fim_*; -1 for none),
 *       add_bos / add_eos / add_sep, the end-of-generation ids
 *       (llama_vocab_is_eog over every id) and "type ID C" for every token
 *       that is not a plain normal one (C: c control, u user-defined,
 *       k unknown, b byte, x unused, ? undefined)
 *   llama-cpp-ref LIBDIR MODEL.gguf tokenize CORPUS PARSE_SPECIAL
 *       llama_tokenize of every string of CORPUS (each followed by
 *       "\n__ggml_vocab_test__\n"), no BOS or EOS added, special-token
 *       text recognised when PARSE_SPECIAL is 1: one line " ID ID ..." per
 *       string, as `rkmojo tokenize --corpus` prints
 *   llama-cpp-ref LIBDIR MODEL.gguf margins ID,ID,... K
 *       feeds the ids (teacher-forced, one batch) and prints, per
 *       position, the router margin of each layer: the K-th largest
 *       router probability minus the (K+1)-th, from llama.cpp's own
 *       "ffn_moe_probs-IL" tensors (read through the evaluation callback,
 *       cb_eval), "nan" for a layer without them; one line a position,
 *       the layers in order, as `rkmojo perplexity --margins-out` writes
 *   llama-cpp-ref LIBDIR MODEL.gguf pieces SPECIAL
 *       llama_token_to_piece of every id (control tokens rendered when
 *       SPECIAL is 1, as llama.cpp's special flag), one line per id: the
 *       piece's bytes in hex (an empty line for an empty piece)
 *
 * The parameter structs are only ever passed back to the library as it
 * returned them, so their layout is not needed: they are held in buffers
 * larger than any version's struct (x86-64 SysV passes and returns such
 * structs in memory, so the library reads and writes only its own size).
 * llama_batch is declared (ref_common.h), as its layout has been stable since 2023.
 * The library's version is the package's; the test pins it.
 *
 * Single-threaded apart from llama.cpp's own threads; exits on any error.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_PROG "llama-cpp-ref"
#include "ref_common.h"
#include <time.h>

typedef struct {
    _Alignas(8) unsigned char b[4096];
} params_buf;

typedef struct {
    _Bool no_alloc;
    void **ctx;
} gguf_init_params;

static struct {
    void (*load_all_from_path)(const char *);
    void (*backend_init)(void);
    void (*log_set)(void (*)(int, const char *, void *), void *);
    params_buf (*model_default_params)(void);
    void *(*model_load_from_file)(const char *, params_buf);
    params_buf (*context_default_params)(void);
    void *(*init_from_model)(void *, params_buf);
    void (*set_n_threads)(void *, int32_t, int32_t);
    int32_t (*decode)(void *, llama_batch);
    float *(*get_logits_ith)(void *, int32_t);
    const void *(*model_get_vocab)(const void *);
    int32_t (*vocab_n_tokens)(const void *);
    uint32_t (*n_ctx)(const void *);
    void (*free_ctx)(void *);
    void (*model_free)(void *);
    params_buf (*quantize_default_params)(void);
    uint32_t (*model_quantize)(const char *, const char *, const void *);
    /* libggml-base (loaded with libggml) */
    void *(*gguf_init)(const char *, gguf_init_params);
    int64_t (*gguf_n_tensors)(const void *);
    const char *(*gguf_tensor_name)(const void *, int64_t);
    size_t (*gguf_data_offset)(const void *);
    size_t (*gguf_tensor_offset)(const void *, int64_t);
    size_t (*gguf_tensor_size)(const void *, int64_t);
    int (*gguf_tensor_type)(const void *, int64_t);
    const int64_t *(*gguf_tensor_ne)(const void *, int64_t);
    void *(*gguf_empty)(void);
    void (*gguf_set_kv)(void *, const void *);
    void (*gguf_add)(void *, const void *);
    void *(*get_tensor)(void *, const char *);
    void (*gguf_set_type)(void *, const char *, int);
    void (*gguf_set_data)(void *, const char *, const void *);
    _Bool (*gguf_write)(const void *, const char *, _Bool);
    const char *(*type_name)(int);
    int64_t (*blck_size)(int);
    size_t (*row_size)(int, int64_t);
    size_t (*quantize_chunk)(int, const float *, void *, int64_t, int64_t, int64_t, const float *);
    int32_t (*model_desc)(const void *, char *, size_t);
    int32_t (*meta_count)(const void *);
    int32_t (*meta_key_by_index)(const void *, int32_t, char *, size_t);
    int32_t (*meta_val_str_by_index)(const void *, int32_t, char *, size_t);
    int32_t (*vocab_special[14])(const void *); /* in the order of vocab_roles */
    _Bool (*vocab_add[3])(const void *);         /* add_bos, add_eos, add_sep */
    _Bool (*vocab_is_eog)(const void *, int32_t);
    uint32_t (*vocab_get_attr)(const void *, int32_t);
    int32_t (*tokenize)(const void *, const char *, int32_t, int32_t *, int32_t, _Bool, _Bool);
    int32_t (*token_to_piece)(const void *, int32_t, char *, int32_t, int32_t, _Bool);
} L;

/* The special-token roles printed by the vocab mode (in the order of
 * rkmojo's enum rkm_tok_role), with the library function of each. llama.h has no getter of the end-of-message id: the
 * C++ method llama_vocab::token_eom() const takes the vocabulary as its
 * only argument (`this`) and returns the id, which the SysV x86-64 ABI
 * passes like a C function of one pointer. */
static const struct {
    const char *role, *fn;
} vocab_roles[14] = {
    {"bos", "llama_vocab_bos"},
    {"eos", "llama_vocab_eos"},
    {"unk", "_ZNK11llama_vocab9token_unkEv"},
    {"sep", "llama_vocab_sep"},
    {"pad", "llama_vocab_pad"},
    {"mask", "llama_vocab_mask"},
    {"eot", "llama_vocab_eot"},
    {"eom", "_ZNK11llama_vocab9token_eomEv"},
    {"fim_pre", "llama_vocab_fim_pre"},
    {"fim_suf", "llama_vocab_fim_suf"},
    {"fim_mid", "llama_vocab_fim_mid"},
    {"fim_pad", "llama_vocab_fim_pad"},
    {"fim_rep", "llama_vocab_fim_rep"},
    {"fim_sep", "llama_vocab_fim_sep"},
};

static void load_lib(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/libggml.v0.5.0.so", dir);
    void *hg = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    if (!hg) die("dlopen", dlerror());
    snprintf(p, sizeof p, "%s/libllama.v0.5.0.so", dir);
    void *hl = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    if (!hl) die("dlopen", dlerror());
    /* POSIX allows object <-> function pointer conversion for dlsym */
#define S(field, h, name) *(void **)&L.field = sym(h, name)
    S(load_all_from_path, hg, "ggml_backend_load_all_from_path");
    S(backend_init, hl, "llama_backend_init");
    S(log_set, hl, "llama_log_set");
    S(model_default_params, hl, "llama_model_default_params");
    S(model_load_from_file, hl, "llama_model_load_from_file");
    S(context_default_params, hl, "llama_context_default_params");
    S(init_from_model, hl, "llama_init_from_model");
    S(set_n_threads, hl, "llama_set_n_threads");
    S(decode, hl, "llama_decode");
    S(get_logits_ith, hl, "llama_get_logits_ith");
    S(model_get_vocab, hl, "llama_model_get_vocab");
    S(vocab_n_tokens, hl, "llama_vocab_n_tokens");
    S(n_ctx, hl, "llama_n_ctx");
    S(free_ctx, hl, "llama_free");
    S(model_free, hl, "llama_model_free");
    S(quantize_default_params, hl, "llama_model_quantize_default_params");
    S(model_quantize, hl, "llama_model_quantize");
    S(gguf_init, RTLD_DEFAULT, "gguf_init_from_file");
    S(gguf_n_tensors, RTLD_DEFAULT, "gguf_get_n_tensors");
    S(gguf_tensor_name, RTLD_DEFAULT, "gguf_get_tensor_name");
    S(gguf_data_offset, RTLD_DEFAULT, "gguf_get_data_offset");
    S(gguf_tensor_offset, RTLD_DEFAULT, "gguf_get_tensor_offset");
    S(gguf_tensor_size, RTLD_DEFAULT, "gguf_get_tensor_size");
    S(gguf_tensor_type, RTLD_DEFAULT, "gguf_get_tensor_type");
    S(gguf_tensor_ne, RTLD_DEFAULT, "gguf_get_tensor_ne");
    S(gguf_empty, RTLD_DEFAULT, "gguf_init_empty");
    S(gguf_set_kv, RTLD_DEFAULT, "gguf_set_kv");
    S(gguf_add, RTLD_DEFAULT, "gguf_add_tensor");
    S(get_tensor, RTLD_DEFAULT, "ggml_get_tensor");
    S(gguf_set_type, RTLD_DEFAULT, "gguf_set_tensor_type");
    S(gguf_set_data, RTLD_DEFAULT, "gguf_set_tensor_data");
    S(gguf_write, RTLD_DEFAULT, "gguf_write_to_file");
    S(type_name, RTLD_DEFAULT, "ggml_type_name");
    S(blck_size, RTLD_DEFAULT, "ggml_blck_size");
    S(row_size, RTLD_DEFAULT, "ggml_row_size");
    S(quantize_chunk, RTLD_DEFAULT, "ggml_quantize_chunk");
    S(model_desc, hl, "llama_model_desc");
    S(meta_count, hl, "llama_model_meta_count");
    S(meta_key_by_index, hl, "llama_model_meta_key_by_index");
    S(meta_val_str_by_index, hl, "llama_model_meta_val_str_by_index");
    for (int i = 0; i < 14; i++) S(vocab_special[i], hl, vocab_roles[i].fn);
    S(vocab_add[0], hl, "llama_vocab_get_add_bos");
    S(vocab_add[1], hl, "llama_vocab_get_add_eos");
    S(vocab_add[2], hl, "llama_vocab_get_add_sep");
    S(vocab_is_eog, hl, "llama_vocab_is_eog");
    S(vocab_get_attr, hl, "llama_vocab_get_attr");
    S(tokenize, hl, "llama_tokenize");
    S(token_to_piece, hl, "llama_token_to_piece");
#undef S
    if (!getenv("LLAMA_CPP_REF_VERBOSE")) L.log_set(quiet_log, NULL);
    L.load_all_from_path(dir); /* the CPU backend variant for this CPU */
    L.backend_init();
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Decodes ids[0..n) at positions pos0.. with logits for the last one. */
static int decode_all_rows; /* logits of every row (the margins mode: the
                              * last layer then keeps every row) */

static void decode(void *ctx, int32_t *ids, int n, int pos0)
{
    static int32_t pos[8192], n_seq[8192], seq0 = 0, *seq[8192];
    static int8_t want[8192];
    if (n > 8192) die("batch too large", NULL);
    for (int i = 0; i < n; i++) {
        pos[i] = pos0 + i;
        n_seq[i] = 1;
        seq[i] = &seq0;
        want[i] = decode_all_rows || i == n - 1;
    }
    llama_batch b = {n, ids, NULL, pos, n_seq, seq, want};
    int32_t rc = L.decode(ctx, b);
    if (rc) {
        char m[32];
        snprintf(m, sizeof m, "%d", rc);
        die("llama_decode failed", m);
    }
}

/* The greedy id; when gap is not NULL, gap[0] = p(top-1) - p(top-2) and
 * gap[1] = logit(top-1) - logit(top-2). */
static int32_t argmax(void *ctx, int n_vocab, double *gap)
{
    const float *l = L.get_logits_ith(ctx, -1);
    if (!l) die("no logits", NULL);
    int32_t best = 0, second = -1;
    for (int32_t v = 1; v < n_vocab; v++) {
        if (l[v] > l[best]) {
            second = best;
            best = v;
        } else if (second < 0 || l[v] > l[second]) {
            second = v;
        }
    }
    if (gap) {
        double z = 0;
        for (int32_t v = 0; v < n_vocab; v++) z += exp((double)l[v] - l[best]);
        gap[0] = second < 0 ? 1.0 : (1.0 - exp((double)l[second] - l[best])) / z;
        gap[1] = second < 0 ? INFINITY : (double)l[best] - l[second];
    }
    return best;
}

/* Flash attention off, as the fixtures' goldens were made: it rounds Q
 * and the softmax to f16, which moves logits by ~1e-2 on Gemma 4's wide
 * heads. The pinned version's defaults are checked before the one field
 * is written: n_ctx, n_batch, n_ubatch, n_seq_max = 512, 2048, 512, 1
 * at the start, and the four enums rope_scaling, pooling, attention and
 * flash_attn_type = -1 (unspecified / auto) at bytes 40..55. */
static params_buf ctx_params(void)
{
    params_buf p = L.context_default_params();
    int32_t v[14];
    memcpy(v, p.b, sizeof v);
    if (v[0] != 512 || v[1] != 2048 || v[2] != 512 || v[3] != 1 || v[10] != -1 || v[11] != -1 || v[12] != -1 ||
        v[13] != -1)
        die("unexpected llama_context_params defaults (not the pinned llama.cpp?)", NULL);
    v[13] = 0; /* LLAMA_FLASH_ATTN_TYPE_DISABLED */
    memcpy(p.b, v, sizeof v);
    return p;
}

/* The evaluation callback of llama_context_params (cb_eval, its user data)
 * at bytes 88 and 96 of the pinned version, after the four enums, six
 * floats and a uint32 of rope/yarn/defrag; checked: both NULL, then
 * type_k and type_v GGML_TYPE_F16 (1) at bytes 104 and 108. */
typedef _Bool (*cb_eval_fn)(void *tensor, _Bool ask, void *user);

static params_buf ctx_params_cb(cb_eval_fn cb, void *user)
{
    params_buf p = ctx_params();
    void *ptrs[2];
    int32_t kv[2];
    memcpy(ptrs, p.b + 88, sizeof ptrs);
    memcpy(kv, p.b + 104, sizeof kv);
    if (ptrs[0] || ptrs[1] || kv[0] != 1 || kv[1] != 1)
        die("unexpected llama_context_params layout at cb_eval (not the pinned llama.cpp?)", NULL);
    ptrs[0] = *(void **)&cb;
    ptrs[1] = user;
    memcpy(p.b + 88, ptrs, sizeof ptrs);
    return p;
}

typedef struct {
    int n_layer, n_tok, k;
    double *margin; /* n_tok x n_layer, NaN where none */
    int seen;
} margins_ctx;

static _Bool margins_cb(void *t, _Bool ask, void *user)
{
    margins_ctx *mc = user;
    const char *name = T_NAME(t);
    char *end;
    long il = strncmp(name, "ffn_moe_probs-", 14) ? -1 : strtol(name + 14, &end, 10);
    if (il < 0 || end == name + 14 || *end) return ask ? 0 : 1; /* not it (views are "... (reshaped)") */
    if (ask) return 1;
    int64_t ne = T_NE(t, 0), nt = T_NE(t, 1);
    if (T_TYPE(t) != 0 || T_NB(t, 0) != 4 || il < 0 || il >= mc->n_layer || nt != mc->n_tok || ne <= mc->k ||
        !T_DATA(t))
        die("unexpected ffn_moe_probs tensor (type, stride, rows or experts)", name);
    for (int64_t r = 0; r < nt; r++) {
        const float *pr = (const float *)((const char *)T_DATA(t) + r * T_NB(t, 1));
        /* the K-th and (K+1)-th largest: K passes of a selection */
        double top[2] = {0, 0};
        char *taken = calloc((size_t)ne, 1);
        for (int j = 0; j <= mc->k; j++) {
            int64_t b = -1;
            for (int64_t e = 0; e < ne; e++)
                if (!taken[e] && (b < 0 || pr[e] > pr[b])) b = e;
            taken[b] = 1;
            if (j >= mc->k - 1) top[j - (mc->k - 1)] = pr[b];
        }
        free(taken);
        mc->margin[r * mc->n_layer + il] = top[0] - top[1];
    }
    mc->seen++;
    return 1;
}

static void print_margins(void *model, const char *list, int k)
{
    static int32_t ids[8192];
    int n = 0;
    for (const char *s = list; *s && n < 8192;) {
        char *e;
        ids[n++] = (int32_t)strtol(s, &e, 10);
        if (e == s || (*e && *e != ',')) die("bad id list", list);
        s = *e ? e + 1 : e;
    }
    char buf[64];
    int n_layer = 0;
    for (int i = 0; i < L.meta_count(model); i++) {
        char key[256];
        L.meta_key_by_index(model, i, key, sizeof key);
        size_t kl = strlen(key);
        if (kl > 12 && !strcmp(key + kl - 12, ".block_count")) {
            L.meta_val_str_by_index(model, i, buf, sizeof buf);
            n_layer = atoi(buf);
        }
    }
    if (n_layer <= 0 || k <= 0) die("no block_count, or a bad K", NULL);
    margins_ctx mc = {n_layer, n, k, malloc(sizeof(double) * (size_t)n * (size_t)n_layer), 0};
    for (int i = 0; i < n * n_layer; i++) mc.margin[i] = NAN;
    void *ctx = L.init_from_model(model, ctx_params_cb(margins_cb, &mc));
    if (!ctx) die("llama_init_from_model failed", NULL);
    L.set_n_threads(ctx, 1, 1);
    if ((uint32_t)n > L.n_ctx(ctx)) die("the ids exceed the context", NULL);
    decode_all_rows = 1;
    decode(ctx, ids, n, 0);
    if (!mc.seen) die("no ffn_moe_probs tensor was evaluated", NULL);
    for (int r = 0; r < n; r++) {
        for (int il = 0; il < n_layer; il++) {
            double v = mc.margin[r * n_layer + il];
            if (v != v) printf("%snan", il ? " " : "");
            else printf("%s%.9g", il ? " " : "", v);
        }
        printf("\n");
    }
    L.free_ctx(ctx);
    free(mc.margin);
}

static void *new_ctx(void *model, int threads)
{
    void *ctx = L.init_from_model(model, ctx_params());
    if (!ctx) die("llama_init_from_model failed", NULL);
    if (threads > 0) L.set_n_threads(ctx, threads, threads);
    return ctx;
}

/* llama.h's llama_ftype values of the mixes (stable since 2023-24). */
static const struct {
    const char *name;
    int32_t ftype;
} mixes[] = {{"f16", 1},       {"q4_0", 2},     {"q8_0", 7},     {"q5_0", 8},     {"q5_1", 9},
             {"q2_k", 10},     {"q3_k_s", 11},  {"q3_k_m", 12},  {"q3_k_l", 13},  {"q4_k_s", 14},
             {"q4_k_m", 15},   {"q5_k_s", 16},  {"q5_k_m", 17},  {"q6_k", 18},    {"iq4_nl", 25},
             {"iq3_xxs", 23},  {"iq3_s", 26},   {"iq3_m", 27},   {"iq4_xs", 30},   {"bf16", 32},
             {"mxfp4_moe", 38}};

static int quantize(const char *in, const char *out, const char *mix)
{
    int32_t ftype = -1;
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
        if (!strcmp(mixes[i].name, mix)) ftype = mixes[i].ftype;
    if (ftype < 0) die("unknown mix", mix);
    /* nthread and ftype lead the struct; the defaults are 0 and Q8_0 */
    params_buf p = L.quantize_default_params();
    int32_t v[2];
    memcpy(v, p.b, sizeof v);
    if (v[0] != 0 || v[1] != 7) die("unexpected llama_model_quantize_params defaults (not the pinned llama.cpp?)", NULL);
    v[0] = 2;
    v[1] = ftype;
    memcpy(p.b, v, sizeof v);
    if (L.model_quantize(in, out, p.b) != 0) die("llama_model_quantize failed", in);
    return 0;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

static int quantize_experts(const char *in, const char *out, const char *tname)
{
    int type = -1;
    for (int t = 1; t < 64 && type < 0; t++) {
        const char *nm = L.type_name(t);
        if (nm && !strcmp(nm, tname) && L.blck_size(t) > 1) type = t;
    }
    if (type < 0) die("unknown or unquantized ggml type", tname);
    void *gctx = NULL; /* the tensors' metadata, no data */
    void *g = L.gguf_init(in, (gguf_init_params){1, &gctx});
    if (!g || !gctx) die("could not read", in);
    void *o = L.gguf_empty();
    L.gguf_set_kv(o, g);
    FILE *f = fopen(in, "rb");
    if (!f) die("could not open", in);
    const int64_t nt = L.gguf_n_tensors(g);
    void **data = calloc((size_t)nt, sizeof *data);
    /* every tensor's bytes, read before any type change moves the offsets */
    for (int64_t i = 0; i < nt; i++) {
        const size_t bytes = L.gguf_tensor_size(g, i);
        data[i] = malloc(bytes ? bytes : 1);
        if (!data[i] || fseek(f, (long)(L.gguf_data_offset(g) + L.gguf_tensor_offset(g, i)), SEEK_SET) ||
            fread(data[i], 1, bytes, f) != bytes)
            die("could not read a tensor of", in);
    }
    fclose(f);
    int n_done = 0;
    for (int64_t i = 0; i < nt; i++) {
        const char *name = L.gguf_tensor_name(g, i);
        const int64_t *ne = L.gguf_tensor_ne(g, i);
        if (has_suffix(name, "_exps.weight") && L.gguf_tensor_type(g, i) == 0 /* F32 */ && ne[0] % L.blck_size(type) == 0) {
            const int64_t rows = ne[1] * ne[2] * ne[3];
            float *ones = malloc(sizeof(float) * (size_t)ne[0]);
            for (int64_t k = 0; k < ne[0]; k++) ones[k] = 1.0f;
            void *q = malloc(L.row_size(type, ne[0]) * (size_t)rows);
            if (!ones || !q) die("out of memory", NULL);
            L.quantize_chunk(type, data[i], q, 0, rows, ne[0], ones);
            free(ones);
            free(data[i]);
            data[i] = q;
            L.gguf_add(o, L.get_tensor(gctx, name));
            L.gguf_set_type(o, name, type);
            n_done++;
        } else
            L.gguf_add(o, L.get_tensor(gctx, name));
        L.gguf_set_data(o, name, data[i]);
    }
    if (!n_done) die("no F32 expert tensor to quantize in", in);
    if (!L.gguf_write(o, out, 0)) die("could not write", out);
    return 0;
}

/* One line per metadata key; values longer than the buffer are cut. */
static void print_meta(const void *model)
{
    static char k[512], v[1 << 16];
    L.model_desc(model, v, sizeof v);
    printf("desc = %s\n", v);
    for (int32_t i = 0; i < L.meta_count(model); i++) {
        if (L.meta_key_by_index(model, i, k, sizeof k) < 0 || L.meta_val_str_by_index(model, i, v, sizeof v) < 0)
            die("llama_model_meta_*_by_index failed", NULL);
        printf("%s = ", k);
        for (const char *c = v; *c; c++) fputs(*c == '\n' ? "\\n" : (char[]){*c, 0}, stdout);
        putchar('\n');
    }
}

/* The model parameters with vocab_only set. The pinned version keeps
 * its booleans at bytes 72..77 (vocab_only, then the others; its
 * llama_model_load tests byte 72 before skipping the tensors), whose
 * defaults are checked first: false, false, true, false, false, false. */
static params_buf vocab_params(void)
{
    params_buf p = L.model_default_params();
    static const unsigned char defaults[6] = {0, 0, 1, 0, 0, 0};
    if (memcmp(p.b + 72, defaults, sizeof defaults))
        die("unexpected llama_model_params defaults (not the pinned llama.cpp?)", NULL);
    p.b[72] = 1;
    return p;
}

/* llama_token_attr bits, as llama.h numbers them */
enum { ATTR_UNKNOWN = 1, ATTR_UNUSED = 2, ATTR_NORMAL = 4, ATTR_CONTROL = 8, ATTR_USER_DEFINED = 16, ATTR_BYTE = 32 };

static void print_vocab(const void *vocab, int n_vocab)
{
    printf("n_vocab %d\n", n_vocab);
    for (int i = 0; i < 14; i++) printf("%s %d\n", vocab_roles[i].role, L.vocab_special[i](vocab));
    printf("add_bos %d\nadd_eos %d\nadd_sep %d\neog", L.vocab_add[0](vocab), L.vocab_add[1](vocab),
           L.vocab_add[2](vocab));
    for (int32_t id = 0; id < n_vocab; id++)
        if (L.vocab_is_eog(vocab, id)) printf(" %d", id);
    putchar('\n');
    for (int32_t id = 0; id < n_vocab; id++) {
        uint32_t a = L.vocab_get_attr(vocab, id);
        char c = a & ATTR_CONTROL ? 'c' : a & ATTR_USER_DEFINED ? 'u' : a & ATTR_UNKNOWN ? 'k' : a & ATTR_BYTE ? 'b'
               : a & ATTR_NORMAL ? 0 : a & ATTR_UNUSED ? 'x' : '?';
        if (c) printf("type %d %c\n", id, c);
    }
}

/* The tokenize mode: every string of the corpus at path. */
static void tokenize_corpus(const void *vocab, const char *path, int parse_special)
{
    FILE *f = fopen(path, "rb");
    if (!f) die("could not open", path);
    if (fseek(f, 0, SEEK_END) || ftell(f) < 0) die("could not read", path);
    size_t n = (size_t)ftell(f);
    char *text = malloc(n + 1);
    if (!text) die("out of memory", NULL);
    rewind(f);
    if (fread(text, 1, n, f) != n) die("could not read", path);
    fclose(f);
    text[n] = 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    static int32_t ids[1 << 20];
    for (char *s = text, *e; (e = strstr(s, sep)); s = e + strlen(sep)) {
        int32_t k = L.tokenize(vocab, s, (int32_t)(e - s), ids, 1 << 20, 0, parse_special != 0);
        if (k < 0) die("llama_tokenize failed on a string of", path);
        for (int32_t i = 0; i < k; i++) printf(" %d", ids[i]);
        putchar('\n');
    }
    free(text);
}

/* The pieces mode. */
static void print_pieces(const void *vocab, int n_vocab, int special)
{
    static char buf[1 << 16];
    for (int32_t id = 0; id < n_vocab; id++) {
        int32_t k = L.token_to_piece(vocab, id, buf, sizeof buf, 0, special != 0);
        if (k < 0) die("llama_token_to_piece: piece too long", NULL);
        for (int32_t i = 0; i < k; i++) printf("%02x", (unsigned char)buf[i]);
        putchar('\n');
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: llama-cpp-ref LIBDIR MODEL.gguf ids ID,ID,... N\n"
                        "       llama-cpp-ref LIBDIR MODEL.gguf bench N_PROMPT N_GEN REPS THREADS\n"
                        "       llama-cpp-ref LIBDIR IN.gguf quantize OUT.gguf FTYPE\n"
                        "       llama-cpp-ref LIBDIR IN.gguf experts OUT.gguf TYPE\n"
                        "       llama-cpp-ref LIBDIR MODEL.gguf meta\n"
                        "       llama-cpp-ref LIBDIR VOCAB.gguf vocab\n"
                        "       llama-cpp-ref LIBDIR MODEL.gguf tokenize CORPUS PARSE_SPECIAL\n"
                        "       llama-cpp-ref LIBDIR MODEL.gguf pieces SPECIAL\n"
                        "       llama-cpp-ref LIBDIR MODEL.gguf margins ID,ID,... K\n");
        return 2;
    }
    load_lib(argv[1]);
    if (!strcmp(argv[3], "quantize") && argc == 6) return quantize(argv[2], argv[4], argv[5]);
    if (!strcmp(argv[3], "experts") && argc == 6) return quantize_experts(argv[2], argv[4], argv[5]);
    if (!strcmp(argv[3], "vocab") && argc == 4) {
        void *vm = L.model_load_from_file(argv[2], vocab_params());
        if (!vm) die("could not load the vocabulary of", argv[2]);
        const void *vocab = L.model_get_vocab(vm);
        print_vocab(vocab, L.vocab_n_tokens(vocab));
        L.model_free(vm);
        return 0;
    }
    void *model = L.model_load_from_file(argv[2], L.model_default_params());
    if (!model) die("could not load", argv[2]);
    int n_vocab = L.vocab_n_tokens(L.model_get_vocab(model));
    if (!strcmp(argv[3], "meta") && argc == 4) {
        print_meta(model);
    } else if (!strcmp(argv[3], "tokenize") && argc == 6) {
        tokenize_corpus(L.model_get_vocab(model), argv[4], atoi(argv[5]));
    } else if (!strcmp(argv[3], "margins") && argc == 6) {
        print_margins(model, argv[4], atoi(argv[5]));
    } else if (!strcmp(argv[3], "pieces") && argc == 5) {
        print_pieces(L.model_get_vocab(model), n_vocab, atoi(argv[4]));
    } else if (!strcmp(argv[3], "ids") && argc == 6) {
        static int32_t ids[8192];
        int n = 0;
        for (char *s = argv[4], *e; *s && n < 8192; s = *e ? e + 1 : e) {
            ids[n++] = (int32_t)strtol(s, &e, 10);
            if (e == s || (*e && *e != ',')) die("bad id list", argv[4]);
        }
        int n_gen = atoi(argv[5]);
        void *ctx = new_ctx(model, 1); /* as the goldens; 4 threads (the default) spin on 2 cores */
        if ((uint32_t)(n + n_gen) > L.n_ctx(ctx)) die("prompt + N exceeds the context", NULL);
        decode(ctx, ids, n, 0);
        for (int g = 0; g < n_gen; g++) {
            double gap[2];
            int32_t t = argmax(ctx, n_vocab, gap);
            printf("%d %.6f %.6f\n", t, gap[0], gap[1]);
            decode(ctx, &t, 1, n + g);
        }
        L.free_ctx(ctx);
    } else if (!strcmp(argv[3], "bench") && argc == 8) {
        int np = atoi(argv[4]), ng = atoi(argv[5]), reps = atoi(argv[6]), threads = atoi(argv[7]);
        static int32_t ids[8192];
        if (np < 1 || np > 8192 || ng < 1) die("bad sizes", NULL);
        srand(1);
        for (int i = 0; i < np; i++) ids[i] = n_vocab > 4000 ? 1000 + rand() % (n_vocab - 2000) : rand() % n_vocab;
        for (int r = 0; r < reps; r++) {
            void *ctx = new_ctx(model, threads);
            double t0 = now();
            decode(ctx, ids, np, 0);
            double t1 = now();
            L.free_ctx(ctx);
            /* tg from an empty context, as llama-bench's tg */
            ctx = new_ctx(model, threads);
            int32_t t = ids[0];
            double t2 = now();
            for (int g = 0; g < ng; g++) {
                decode(ctx, &t, 1, g);
                t = argmax(ctx, n_vocab, NULL);
            }
            double t3 = now();
            printf("llama.cpp rep %d: pp%d %.2f tok/s, tg%d %.2f tok/s (%d threads)\n", r, np, np / (t1 - t0), ng,
                   ng / (t3 - t2), threads);
            fflush(stdout);
            L.free_ctx(ctx);
        }
    } else {
        die("unknown mode", argv[3]);
    }
    L.model_free(model);
    return 0;
}
