/*
 * cmd_tokenize.c - `rkmojo tokenize` and `rkmojo detokenize`: text to ids
 * (with their pieces) and back, from a model (.rkmojo directory, GGUF file
 * or Hugging Face directory) or a bare vocabulary (tokenizer.json or GGUF).
 * `--corpus FILE` encodes every string of a test corpus (strings separated
 * by "\n__ggml_vocab_test__\n") one line each, for the reference tests;
 * `--bench` measures encode throughput.
 * Single-threaded; everything allocated here is freed before returning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "format/model_dir.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "util/buf.h"
#include "util/common.h"

static const char *const corpus_sep = "\n__ggml_vocab_test__\n";

static char *read_stdin(size_t *len)
{
    rkm_buf b = RKM_BUF_INIT;
    char chunk[1 << 16];
    size_t r;
    while ((r = fread(chunk, 1, sizeof chunk, stdin)) > 0) rkm_buf_add(&b, chunk, r);
    *len = b.len;
    return rkm_buf_take(&b); /* NULL when out of memory */
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* -m: a .rkmojo directory (manifest names the tokenizer), a Hugging Face
 * directory (tokenizer.json) or a GGUF file; --vocab: a file. */
static rkm_tokenizer *open_tokenizer(const char *model, const char *vocab)
{
    if (vocab) return rkm_tokenizer_load(vocab, NULL);
    if (!is_dir(model)) return rkm_tokenizer_load(model, NULL);
    rkm_tokenizer *t = NULL;
    char *manifest = rkm_path_join(model, "manifest.json");
    if (manifest && exists(manifest)) {
        rkm_model_dir *md = rkm_model_dir_load_manifest(model);
        if (md && md->tokenizer_file) {
            char *tf = rkm_path_join(model, md->tokenizer_file);
            char *cf = md->tokenizer_config_file ? rkm_path_join(model, md->tokenizer_config_file) : NULL;
            if (tf) t = rkm_tokenizer_load(tf, cf);
            free(tf);
            free(cf);
        } else if (md) {
            rkm_err(RKM_ENOENT, "%s: the model has no tokenizer", model);
        }
        rkm_model_dir_close(md);
        free(manifest);
        return t;
    }
    free(manifest);
    const char *names[] = {"tokenizer.json", "tokenizer.gguf"};
    for (size_t i = 0; i < 2; i++) {
        char *p = rkm_path_join(model, names[i]);
        if (p && exists(p)) {
            t = rkm_tokenizer_load(p, NULL);
            free(p);
            return t;
        }
        free(p);
    }
    rkm_err(RKM_ENOENT, "%s: no manifest.json, tokenizer.json or tokenizer.gguf", model);
    return NULL;
}

/* The special tokens as llama.cpp's reference harness prints them
 * (tests/ref/llama_cpp_ref.c, vocab mode): every role's id, the add_*
 * flags, the end-of-generation ids, and the type of every token that is
 * not a normal one. */
static void print_specials(const rkm_tokenizer *t)
{
    static const char type_char[] = {[RKM_TOKEN_UNKNOWN] = 'k', [RKM_TOKEN_CONTROL] = 'c',
                                     [RKM_TOKEN_USER_DEFINED] = 'u', [RKM_TOKEN_UNUSED] = 'x',
                                     [RKM_TOKEN_BYTE] = 'b'};
    int n = rkm_tokenizer_n_vocab(t);
    printf("n_vocab %d\n", n);
    for (int r = 0; r < RKM_TOK_N_ROLES; r++) printf("%s %d\n", rkm_tokenizer_role_name(r), rkm_tokenizer_special(t, r));
    printf("add_bos %d\nadd_eos %d\nadd_sep %d\neog", rkm_tokenizer_add_bos(t), rkm_tokenizer_add_eos(t),
           rkm_tokenizer_add_sep(t));
    for (int id = 0; id < n; id++)
        if (rkm_tokenizer_is_eog(t, id)) printf(" %d", id);
    putchar('\n');
    for (int id = 0; id < n; id++) {
        int ty = rkm_tokenizer_token_type(t, id);
        if (ty > 0 && ty < (int)sizeof type_char && type_char[ty]) printf("type %d %c\n", id, type_char[ty]);
    }
}

static int encode_alloc(const rkm_tokenizer *t, const char *s, size_t n, int bos, int special, int32_t **ids)
{
    int need = rkm_tokenizer_encode(t, s, n, NULL, 0, bos, special);
    if (need < 0) return need;
    *ids = malloc(((size_t)need + 1) * sizeof **ids);
    if (!*ids) return rkm_err(RKM_ENOMEM, "out of memory");
    return rkm_tokenizer_encode(t, s, n, *ids, need, bos, special);
}

static void print_piece_escaped(const rkm_tokenizer *t, int32_t id)
{
    char buf[1024];
    int n = rkm_tokenizer_piece(t, id, buf, sizeof buf);
    if (n < 0) n = 0;
    putchar('\'');
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\'' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\'');
}

static int run_corpus(const rkm_tokenizer *t, const char *path, int special)
{
    size_t len;
    char *text = rkm_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "rkmojo tokenize: %s\n", rkm_last_error());
        return 1;
    }
    size_t sl = strlen(corpus_sep);
    char *s = text;
    int rc = 0;
    while (s < text + len) {
        char *e = strstr(s, corpus_sep);
        if (!e) break;
        int32_t *ids = NULL;
        int n = encode_alloc(t, s, (size_t)(e - s), 0, special, &ids);
        if (n < 0) {
            printf(" error: %s\n", rkm_last_error());
            rc = 1;
        } else {
            for (int i = 0; i < n; i++) printf(" %d", ids[i]);
            putchar('\n');
        }
        free(ids);
        s = e + sl;
    }
    free(text);
    return rc;
}

/* Encode throughput on the first `bytes` of a repeated text. */
static void bench_one(const rkm_tokenizer *t, const char *src, size_t src_len, size_t bytes)
{
    char *buf = calloc(1, bytes + 1);
    if (!buf || !src_len) {
        free(buf);
        return;
    }
    size_t n = 0;
    while (n < bytes) {
        size_t k = RKM_MIN(src_len, bytes - n);
        memcpy(buf + n, src, k);
        n += k;
    }
    /* do not cut a UTF-8 sequence */
    n = rkm_utf8_complete_prefix(buf, n);
    int reps = bytes < 100000 ? 50 : 2;
    double t0 = rkm_now();
    int ntok = 0;
    for (int r = 0; r < reps; r++) ntok = rkm_tokenizer_encode(t, buf, n, NULL, 0, 0, 0);
    double dt = (rkm_now() - t0) / reps;
    if (ntok < 0) {
        printf("encode %8zu bytes: %s\n", n, rkm_last_error());
        free(buf);
        return;
    }
    printf("encode %8zu bytes: %8d tokens, %8.3f ms, %7.2f MB/s\n", n, ntok, dt * 1e3, (double)n / dt / 1e6);
    free(buf);
}

/* One JSON object per line: {"names": [...], "regex": [...], "ignore_merges": b, "raw": b}. */
static int print_pre_types(void)
{
    const char *names;
    const char *const *re;
    int ignore, raw;
    for (int i = 0; (names = rkm_tokenizer_pre_type(i, &re, &ignore, &raw)); i++) {
        cJSON *o = cJSON_CreateObject(), *n = cJSON_AddArrayToObject(o, "names"), *r = cJSON_AddArrayToObject(o, "regex");
        char buf[512];
        for (const char *p = names; *p;) {
            const char *e = strchr(p, ' ');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            snprintf(buf, sizeof buf, "%.*s", (int)l, p);
            cJSON_AddItemToArray(n, cJSON_CreateString(buf));
            p += l + (e != NULL);
        }
        for (int k = 0; re[k]; k++) cJSON_AddItemToArray(r, cJSON_CreateString(re[k]));
        cJSON_AddBoolToObject(o, "ignore_merges", ignore);
        cJSON_AddBoolToObject(o, "raw", raw);
        char *js = cJSON_PrintUnformatted(o);
        if (js) puts(js);
        free(js);
        cJSON_Delete(o);
    }
    return 0;
}

static const char bench_text[] =
    "The quick brown fox jumps over the lazy dog. It's 2024 and we've got 3.14159 reasons to code!\n"
    "    for (int i = 0; i < n; i++) { sum += a[i] * b[i]; }  // dot product\n"
    "Mixture-of-experts models route each token to a few experts; the rest stay on disk.\n"
    "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81 "
    "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xf0\x9f\x98\x80\xf0\x9f\x9a\x80 caf\xc3\xa9 na\xc3\xafve\n"
    "                                                \n";

int rkm_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *vocab = NULL, *config = NULL, *text = NULL, *corpus = NULL;
    int ids_only = 0, special = 0, bos = 0, bench = 0, pre_types = 0, specials = 0, first;
    const rkm_opt opts[] = {
        {"model", 'm', RKM_OPT_STR, &model, .arg = "MODEL", .help = ".rkmojo directory, GGUF file or Hugging Face directory"},
        {"vocab", 0, RKM_OPT_STR, &vocab, .arg = "FILE", .help = "tokenizer.json or GGUF file"},
        {"config", 0, RKM_OPT_STR, &config, .arg = "FILE", .help = "tokenizer_config.json (default: next to tokenizer.json)"},
        {"ids", 0, RKM_OPT_FLAG, &ids_only, .help = "print only the ids, space separated"},
        {"special", 0, RKM_OPT_FLAG, &special, .help = "recognise special-token text (e.g. <|im_start|>)"},
        {"bos", 0, RKM_OPT_FLAG, &bos, .help = "add BOS if the tokenizer wants one"},
        {"corpus", 0, RKM_OPT_STR, &corpus, .arg = "FILE",
         .help = "encode each string of FILE (separated by\n\"\\n__ggml_vocab_test__\\n\"), one line of ids each"},
        {"bench", 0, RKM_OPT_FLAG, &bench,
         .help = "encode throughput on 10 KB and 1 MB of text and on 4 MB runs of one character"},
        {"pre-types", 0, RKM_OPT_FLAG, &pre_types,
         .help = "list llama.cpp's pre-tokenizer types (tokenizer.ggml.pre) with their regexes, as JSON"},
        {"specials", 0, RKM_OPT_FLAG, &specials,
         .help = "print the special tokens: each role's id (bos, eos, eot, eom, ...),\nadd_bos/add_eos/add_sep, the end-of-generation ids, the\ntype of every token that is not a normal one"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "tokenize", "usage: rkmojo tokenize (-m MODEL | --vocab FILE) [options] TEXT|-\n\n",
        "  TEXT                     the text, or - to read stdin\n", {opts}, 1,
    };
    int rc = rkm_opts_parse(&cmd, argc, argv, &first);
    if (rc != RKM_OPTS_CONTINUE) return rc;
    rc = 0;
    if (first < argc) text = argv[first];
    if (pre_types) return print_pre_types();
    if (!model && !vocab) return rkm_opts_error(&cmd, "needs -m MODEL or --vocab FILE");
    if (!text && !corpus && !bench && !specials)
        return rkm_opts_error(&cmd, "needs TEXT (or - for stdin), --corpus, --bench or --specials");
    rkm_tokenizer *t = config && vocab ? rkm_tokenizer_load(vocab, config) : open_tokenizer(model, vocab);
    if (!t) {
        fprintf(stderr, "rkmojo tokenize: %s\n", rkm_last_error());
        return 1;
    }
    if (bench) {
        bench_one(t, bench_text, sizeof bench_text - 1, 10 * 1000);
        bench_one(t, bench_text, sizeof bench_text - 1, 1000 * 1000);
        /* the worst cases for a regex pre-tokenizer: 4 MB of one character */
        static const struct {
            const char *name, *ch;
        } runs[] = {{"spaces", " "}, {"one letter", "a"}, {"one CJK character", "\xe4\xb8\xad"},
                    {"combining marks", "\xcc\x81"}, {"digits", "7"}};
        for (size_t k = 0; k < RKM_ARRAY_LEN(runs); k++) {
            printf("4 MB run of %-17s ", runs[k].name);
            bench_one(t, runs[k].ch, strlen(runs[k].ch), 4u << 20);
        }
    }
    if (specials) print_specials(t);
    if (corpus) rc = run_corpus(t, corpus, special);
    if (text) {
        size_t len;
        char *owned = NULL;
        if (!strcmp(text, "-")) {
            owned = read_stdin(&len);
            if (!owned) {
                fprintf(stderr, "rkmojo tokenize: cannot read stdin\n");
                rkm_tokenizer_free(t);
                return 1;
            }
            text = owned;
        } else {
            len = strlen(text);
        }
        int32_t *ids = NULL;
        int n = encode_alloc(t, text, len, bos, special, &ids);
        if (n < 0) {
            fprintf(stderr, "rkmojo tokenize: %s\n", rkm_last_error());
            rc = 1;
        } else if (ids_only) {
            for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
            putchar('\n');
        } else {
            for (int i = 0; i < n; i++) {
                printf("%6d -> ", ids[i]);
                print_piece_escaped(t, ids[i]);
                putchar('\n');
            }
        }
        free(ids);
        free(owned);
    }
    rkm_tokenizer_free(t);
    return rc;
}

/* Appends the ids of "1 2 3" / "1,2,3" / "[1, 2, 3]" to *ids. */
static int parse_ids(const char *p, int32_t **ids, int *n, int *cap)
{
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '[' || *p == ']' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) return rkm_err(RKM_EINVAL, "bad id at '%.20s'", p);
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 64;
            int32_t *nv = realloc(*ids, (size_t)*cap * sizeof *nv);
            if (!nv) return rkm_err(RKM_ENOMEM, "out of memory");
            *ids = nv;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    return 0;
}

int rkm_cmd_detokenize(int argc, char **argv)
{
    const char *model = NULL, *vocab = NULL;
    int n_ids = 0, cap = 0, first;
    int32_t *ids = NULL;
    const rkm_opt opts[] = {
        {"model", 'm', RKM_OPT_STR, &model, .arg = "MODEL", .help = ".rkmojo directory, GGUF file or Hugging Face directory"},
        {"vocab", 0, RKM_OPT_STR, &vocab, .arg = "FILE", .help = "tokenizer.json or GGUF file"},
        {0},
    };
    const rkm_opts_cmd cmd = {
        "detokenize",
        "usage: rkmojo detokenize (-m MODEL | --vocab FILE) ID... | -\n"
        "  prints the text of the ids (arguments, or stdin with -)\n\n",
        NULL, {opts}, -1,
    };
    int rc = rkm_opts_parse(&cmd, argc, argv, &first);
    if (rc != RKM_OPTS_CONTINUE) return rc;
    rc = 0;
    for (int i = first; i < argc && !rc; i++) {
        if (!strcmp(argv[i], "-")) {
            size_t len;
            char *in = read_stdin(&len);
            rc = in ? parse_ids(in, &ids, &n_ids, &cap) : rkm_err(RKM_EIO, "cannot read stdin");
            free(in);
        } else {
            rc = parse_ids(argv[i], &ids, &n_ids, &cap);
        }
    }
    if (rc) {
        fprintf(stderr, "rkmojo detokenize: %s\n", rkm_last_error());
        free(ids);
        return 2;
    }
    if (!model && !vocab) {
        free(ids);
        return rkm_opts_error(&cmd, "needs -m MODEL or --vocab FILE");
    }
    rkm_tokenizer *t = open_tokenizer(model, vocab);
    if (!t) {
        fprintf(stderr, "rkmojo detokenize: %s\n", rkm_last_error());
        free(ids);
        return 1;
    }
    int need = rkm_tokenizer_decode(t, ids, n_ids, NULL, 0);
    char *buf = need >= 0 ? malloc((size_t)need + 1) : NULL;
    if (need >= 0 && buf) need = rkm_tokenizer_decode(t, ids, n_ids, buf, need);
    if (need >= 0 && buf) {
        fwrite(buf, 1, (size_t)need, stdout);
        putchar('\n');
    } else {
        fprintf(stderr, "rkmojo detokenize: %s\n", need < 0 ? rkm_last_error() : "out of memory");
        rc = 1;
    }
    free(buf);
    rkm_tokenizer_free(t);
    free(ids);
    return rc;
}
