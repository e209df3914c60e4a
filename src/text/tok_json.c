/*
 * tok_json.c - loading a tokenizer from Hugging Face tokenizer.json (and
 * tokenizer_config.json): the BPE, Unigram and WordPiece models, the
 * normalizer and pre-tokenizer configurations (turned into the steps
 * tok_normalize.c and tok_pretok.c run), added tokens, the decoder and
 * post-processor settings that matter for ids, and the file-level loader
 * that picks GGUF or JSON by the path.
 *
 * Threads: runs on the loading thread. Ownership: the parsed cJSON trees
 * are freed before returning; the tokenizer returned belongs to the caller
 * (rkm_tokenizer_free) and copies every string it keeps.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/tokenizer_impl.h"
#include "util/base64.h"

static const char *json_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) { /* {"content": "<s>", ...} in older configs */
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static int json_bool(const cJSON *o, const char *key, int def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return def;
}

static int json_type_is(const cJSON *o, const char *type)
{
    const char *s = json_str(o, "type");
    return s && !strcmp(s, type);
}

/* The base64 of a Precompiled charsmap into a malloc'd buffer, with
 * RKM_EFORMAT naming what is wrong (length or the first bad character). */
static int charsmap_base64(const char *s, unsigned char **out, size_t *out_len)
{
    size_t n = strlen(s);
    if (rkm_base64_decode(s, n, out, out_len) == 0) return 0;
    while (n > 0 && s[n - 1] == '=') n--;
    if (n % 4 == 1) return rkm_err(RKM_EFORMAT, "tokenizer.json: bad base64 length");
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/'))
            return rkm_err(RKM_EFORMAT, "tokenizer.json: bad base64 character at %zu", i);
    }
    return RKM_ENOMEM;
}

static int add_normalizer(rkm_tokenizer *t, const cJSON *n, int depth)
{
    if (!n || cJSON_IsNull(n)) return 0;
    if (!cJSON_IsObject(n) || depth > 4) return rkm_err(RKM_EFORMAT, "tokenizer.json: bad normalizer");
    const char *type = json_str(n, "type");
    if (!type) return rkm_err(RKM_EFORMAT, "tokenizer.json: normalizer without type");
    t->has_normalizer = 1;
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        const cJSON *c;
        cJSON_ArrayForEach(c, list)
        {
            int rc = add_normalizer(t, c, depth + 1);
            if (rc) return rc;
        }
        return 0;
    }
    if (t->n_norm == MAX_NORMS) return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: too many normalizers");
    norm_step *s = &t->norm[t->n_norm];
    if (!strcmp(type, "NFC")) {
        s->op = NORM_NFC;
    } else if (!strcmp(type, "NFD")) {
        s->op = NORM_NFD;
    } else if (!strcmp(type, "NFKC")) {
        s->op = NORM_NFKC;
    } else if (!strcmp(type, "NFKD")) {
        s->op = NORM_NFKD;
    } else if (!strcmp(type, "Lowercase")) {
        s->op = NORM_LOWERCASE;
    } else if (!strcmp(type, "Strip")) {
        s->op = NORM_STRIP;
        s->flags = json_bool(n, "strip_left", 1) | json_bool(n, "strip_right", 1) << 1;
    } else if (!strcmp(type, "BertNormalizer")) {
        s->op = NORM_BERT;
        int lower = json_bool(n, "lowercase", 1);
        const cJSON *sa = cJSON_GetObjectItemCaseSensitive(n, "strip_accents");
        int strip = cJSON_IsBool(sa) ? cJSON_IsTrue(sa) : lower; /* null: follows lowercase */
        s->flags = (json_bool(n, "clean_text", 1) ? BERT_CLEAN : 0) |
                   (json_bool(n, "handle_chinese_chars", 1) ? BERT_CHINESE : 0) | (strip ? BERT_STRIP_ACCENTS : 0) |
                   (lower ? BERT_LOWER : 0);
    } else if (!strcmp(type, "Precompiled")) {
        const cJSON *cm = cJSON_GetObjectItemCaseSensitive(n, "precompiled_charsmap");
        unsigned char *blob = NULL;
        size_t blob_len = 0;
        if (cJSON_IsString(cm)) {
            int rc = charsmap_base64(cm->valuestring, &blob, &blob_len);
            if (rc) return rc;
        } else if (cm && !cJSON_IsNull(cm)) {
            return rkm_err(RKM_EFORMAT, "tokenizer.json: Precompiled normalizer: precompiled_charsmap is not a string");
        }
        s->op = NORM_PRECOMPILED;
        s->cmap = rkm_charsmap_parse(blob, blob_len);
        free(blob);
        if (!s->cmap) return RKM_EFORMAT; /* the parser's message stands */
    } else if (!strcmp(type, "Prepend")) {
        const char *p = json_str(n, "prepend");
        if (!p) return rkm_err(RKM_EFORMAT, "tokenizer.json: Prepend without prepend");
        s->op = NORM_PREPEND;
        s->a = strdup(p);
        s->a_len = strlen(p);
        if (!s->a) return RKM_ENOMEM;
    } else if (!strcmp(type, "Replace")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const char *from = json_str(pat, "String");
        const char *re = json_str(pat, "Regex");
        const char *to = json_str(n, "content");
        if (re && to && !strcmp(re, " {2,}")) { /* SentencePiece converters: merge space runs */
            s->op = NORM_REPLACE_SPACES;
            s->b = strdup(to);
            s->b_len = strlen(to);
            if (!s->b) return RKM_ENOMEM;
            t->n_norm++;
            return 0;
        }
        if (!from || !to || !*from)
            return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: Replace normalizer needs a String pattern "
                                             "(or the Regex \" {2,}\")");
        s->op = NORM_REPLACE;
        s->a = strdup(from);
        s->b = strdup(to);
        s->a_len = strlen(from);
        s->b_len = strlen(to);
        if (!s->a || !s->b) return RKM_ENOMEM;
    } else {
        return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: unsupported normalizer '%s'", type);
    }
    t->n_norm++;
    return 0;
}

static int add_pretok(rkm_tokenizer *t, const cJSON *p, int depth)
{
    if (!p || cJSON_IsNull(p)) return 0;
    if (!cJSON_IsObject(p) || depth > 4) return rkm_err(RKM_EFORMAT, "tokenizer.json: bad pre_tokenizer");
    const char *type = json_str(p, "type");
    if (!type) return rkm_err(RKM_EFORMAT, "tokenizer.json: pre_tokenizer without type");
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
        const cJSON *c;
        cJSON_ArrayForEach(c, list)
        {
            int rc = add_pretok(t, c, depth + 1);
            if (rc) return rc;
        }
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        t->model = MODEL_BPE_BYTES;
        t->add_prefix_space = json_bool(p, "add_prefix_space", 0);
        if (json_bool(p, "use_regex", 1)) {
            const char *re = rkm_tok__fast_pattern(PRE_GPT2);
            return rkm_tok__add_regex_split(t, re, strlen(re), SPLIT_ISOLATED, 0);
        }
        return 0;
    }
    if (!strcmp(type, "Metaspace")) {
        const char *rep = json_str(p, "replacement");
        const char *scheme = json_str(p, "prepend_scheme");
        snprintf(t->metaspace_rep, sizeof t->metaspace_rep, "%s", rep ? rep : "\xe2\x96\x81");
        t->metaspace = 1;
        t->metaspace_at = t->n_split;
        t->metaspace_prepend = !scheme || !strcmp(scheme, "always") ? 1 : !strcmp(scheme, "first") ? 2 : 0;
        if (!scheme && !json_bool(p, "add_prefix_space", 1)) t->metaspace_prepend = 0;
        t->strip_leading_space = t->metaspace_prepend != 0;
        t->metaspace_split = json_bool(p, "split", 1);
        return 0;
    }
    if (!strcmp(type, "WhitespaceSplit") || !strcmp(type, "BertPreTokenizer")) {
        if (t->model == MODEL_BPE_BYTES)
            return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: %s after ByteLevel is not supported", type);
        if (t->n_split == MAX_SPLITS) return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: too many splits");
        t->split[t->n_split++].kind = type[0] == 'W' ? PRE_WS_SPLIT : PRE_BERT;
        return 0;
    }
    if (!strcmp(type, "Split")) {
        if (t->model == MODEL_BPE_BYTES)
            return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: Split after ByteLevel is not supported");
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const char *lit = json_str(pat, "String");
        const char *beh = json_str(p, "behavior");
        static const char *const behaviors[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                                "Contiguous"};
        int b = -1;
        for (int k = 0; beh && k < (int)RKM_ARRAY_LEN(behaviors); k++)
            if (!strcmp(beh, behaviors[k])) b = k;
        if (b < 0) return rkm_err(RKM_EFORMAT, "tokenizer.json: Split behavior '%s' unknown", beh ? beh : "(none)");
        int invert = json_bool(p, "invert", 0);
        if (cJSON_IsString(re)) return rkm_tok__add_regex_split(t, re->valuestring, strlen(re->valuestring), b, invert);
        if (!lit || !*lit) return rkm_err(RKM_EFORMAT, "tokenizer.json: Split without pattern");
        if (t->n_split == MAX_SPLITS) return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: too many splits");
        split_step *s = &t->split[t->n_split];
        memset(s, 0, sizeof *s);
        s->kind = PRE_LITERAL;
        s->behavior = b;
        s->invert = invert;
        s->lit = strdup(lit);
        s->lit_len = strlen(lit);
        if (!s->lit) return RKM_ENOMEM;
        t->n_split++;
        return 0;
    }
    return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: unsupported pre_tokenizer '%s'", type);
}

static int decoder_strips(const cJSON *d)
{
    if (!cJSON_IsObject(d)) return 0;
    if (json_type_is(d, "Strip")) {
        const char *c = json_str(d, "content");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(d, "start");
        return c && !strcmp(c, " ") && cJSON_IsNumber(st) && st->valueint >= 1;
    }
    if (json_type_is(d, "Sequence")) {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(d, "decoders")) if (decoder_strips(c)) return 1;
    }
    return 0;
}

static int json_token_id(const rkm_tokenizer *t, const char *s)
{
    return s ? rkm_tokenizer_find(t, s) : -1;
}

/* The special tokens and add-BOS/EOS/SEP flags of a tokenizer.json, the
 * way llama.cpp's converter (gguf-py's SpecialVocab) reads them into a
 * GGUF: a TemplateProcessing post-processor (or one in a Sequence) whose
 * single template has two parts or more adds BOS when it starts with the
 * BOS (or CLS) token and EOS when it ends with a special token, which
 * becomes the EOS (a different EOS of tokenizer_config.json becomes the
 * EOT); a RobertaProcessing adds all three; then tokenizer_config.json's
 * bos/eos/sep/pad/mask_token (CLS standing in for BOS, SEP for EOS) and
 * add_*_token flags win. A BertProcessing, which the converter does not
 * read, gives CLS and SEP as BOS and EOS, both added, as Hugging Face adds
 * them. Without a config the template's tokens are BOS and EOS. The ids
 * found here are the file's (written back to GGUF); a flag left -1 gets
 * llama.cpp's default in rkm_tok__special_finish. */
static void json_specials(rkm_tokenizer *t, const cJSON *root, const cJSON *cfg)
{
    const char *bos = json_str(cfg, "bos_token"), *eos = json_str(cfg, "eos_token"), *eot = NULL;
    const char *sep = json_str(cfg, "sep_token"), *cls = json_str(cfg, "cls_token");
    if (!bos && cls && cfg) bos = cls;
    if (!eos && sep && cfg) eos = sep;
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(post, "processors"), *p;
    for (p = cJSON_IsArray(list) ? list->child : post; p; p = cJSON_IsArray(list) ? p->next : NULL) {
        if (json_type_is(p, "RobertaProcessing") || json_type_is(p, "BertProcessing")) {
            /* "cls": ["<s>", 0], "sep": ["</s>", 2] */
            const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "cls"), 0);
            const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "sep"), 0);
            if (!bos && cJSON_IsString(c)) bos = c->valuestring;
            if (!sep && cJSON_IsString(s)) sep = s->valuestring;
            if (!eos) eos = sep;
            t->add_bos = t->add_eos = 1;
            if (json_type_is(p, "RobertaProcessing")) t->add_sep = 1;
        } else if (json_type_is(p, "TemplateProcessing")) {
            const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single");
            int n = cJSON_GetArraySize(single);
            if (n < 2) continue;
            const char *first = json_str(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, 0), "SpecialToken"), "id");
            const char *last = json_str(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, n - 1), "SpecialToken"), "id");
            if (first) {
                if (!cfg) bos = first;
                t->add_bos = (bos && !strcmp(first, bos)) || (cls && !strcmp(first, cls));
            }
            if (last) {
                if (cfg && (!eos || strcmp(last, eos))) eot = eos;
                eos = last;
                t->add_eos = 1;
            }
        }
    }
    const struct {
        const char *text;
        int role;
    } ids[] = {{bos, RKM_TOK_BOS}, {eos, RKM_TOK_EOS}, {eot, RKM_TOK_EOT}, {sep, RKM_TOK_SEP},
               {json_str(cfg, "pad_token"), RKM_TOK_PAD}, {json_str(cfg, "mask_token"), RKM_TOK_MASK}};
    for (size_t k = 0; k < RKM_ARRAY_LEN(ids); k++)
        if (ids[k].text) *rkm_tok__role_id(t, ids[k].role) = json_token_id(t, ids[k].text);
    static const struct {
        const char *key;
        size_t flag;
    } flags[] = {{"add_bos_token", offsetof(rkm_tokenizer, add_bos)},
                 {"add_eos_token", offsetof(rkm_tokenizer, add_eos)},
                 {"add_sep_token", offsetof(rkm_tokenizer, add_sep)}};
    for (size_t k = 0; k < RKM_ARRAY_LEN(flags); k++) {
        int *f = (int *)((char *)t + flags[k].flag);
        *f = json_bool(cfg, flags[k].key, *f);
    }
    for (int r = 0; r < RKM_TOK_N_ROLES; r++)
        if (rkm_tokenizer_special(t, r) >= 0) t->roles_declared |= 1u << r;
}

rkm_tokenizer *rkm_tokenizer_from_json(const char *json, size_t len, const char *config_json, size_t config_len)
{
    rkm_tokenizer *t = NULL;
    cJSON *root = cJSON_ParseWithLength(json, len);
    cJSON *cfg = config_json ? cJSON_ParseWithLength(config_json, config_len) : NULL;
    int rc = 0;
    if (!cJSON_IsObject(root)) {
        rkm_err(RKM_EFORMAT, "tokenizer.json: not a JSON object");
        goto fail;
    }
    if (config_json && !cJSON_IsObject(cfg)) {
        rkm_err(RKM_EFORMAT, "tokenizer_config.json: not a JSON object");
        goto fail;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    const char *mtype = json_str(model, "type");
    if (!cJSON_IsObject(model)) {
        rkm_err(RKM_EFORMAT, "tokenizer.json: no model");
        goto fail;
    }
    int unigram = mtype && !strcmp(mtype, "Unigram");
    int wordpiece = mtype && !strcmp(mtype, "WordPiece");
    if (mtype && strcmp(mtype, "BPE") && !unigram && !wordpiece) {
        rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: unsupported model type '%s'", mtype);
        goto fail;
    }
    int n = 0;
    const cJSON *v;
    if (unigram) {
        /* "vocab": [[piece, score], ...], the index is the id */
        if (!cJSON_IsArray(vocab) || cJSON_GetArraySize(vocab) >= (1 << 24)) {
            rkm_err(RKM_EFORMAT, "tokenizer.json: Unigram model needs a vocab array");
            goto fail;
        }
        cJSON_ArrayForEach(v, vocab)
        {
            if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsString(cJSON_GetArrayItem(v, 0)) ||
                !cJSON_IsNumber(cJSON_GetArrayItem(v, 1)) || !isfinite(cJSON_GetArrayItem(v, 1)->valuedouble)) {
                rkm_err(RKM_EFORMAT, "tokenizer.json: bad Unigram vocab entry #%d", n);
                goto fail;
            }
            n++;
        }
    } else {
        if (!cJSON_IsObject(vocab) || (!wordpiece && !cJSON_IsArray(merges))) {
            rkm_err(RKM_EFORMAT, wordpiece ? "tokenizer.json: WordPiece model needs a vocab object"
                                           : "tokenizer.json: BPE model needs a vocab object and a merges array");
            goto fail;
        }
        cJSON_ArrayForEach(v, vocab)
        {
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= (1 << 24)) {
                rkm_err(RKM_EFORMAT, "tokenizer.json: bad id for token '%.40s'", v->string ? v->string : "");
                goto fail;
            }
            if (v->valueint + 1 > n) n = v->valueint + 1;
        }
    }
    int n_pieces = n;
    cJSON_ArrayForEach(v, added)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(v, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= (1 << 24) || !json_str(v, "content")) {
            rkm_err(RKM_EFORMAT, "tokenizer.json: bad added token");
            goto fail;
        }
        if (id->valueint + 1 > n) n = id->valueint + 1;
    }
    if (n == 0) {
        rkm_err(RKM_EFORMAT, "tokenizer.json: empty vocabulary");
        goto fail;
    }
    if (!(t = rkm_tok__new(n))) goto oom;
    t->from_json = 1;
    t->n_pieces = n_pieces;
    t->model = MODEL_BPE_CHARS;
    if ((rc = add_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), 0))) goto fail_rc;
    if ((rc = add_pretok(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), 0))) goto fail_rc;
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (json_type_is(dec, "ByteLevel")) t->model = MODEL_BPE_BYTES;
    for (int k = 0; t->model == MODEL_BPE_BYTES && k < t->n_norm; k++)
        if (t->norm[k].op > NORM_NFKD) {
            rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: byte-level BPE with a normalizer other than NFC/NFD/NFKC/NFKD");
            goto fail;
        }
    if (t->metaspace && t->model == MODEL_BPE_BYTES) {
        rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: Metaspace with ByteLevel");
        goto fail;
    }
    if (unigram) {
        if (t->model == MODEL_BPE_BYTES) {
            rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: Unigram with a ByteLevel pre-tokenizer or decoder");
            goto fail;
        }
        t->model = MODEL_UNIGRAM;
    }
    if (wordpiece) {
        if (t->model == MODEL_BPE_BYTES) {
            rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: WordPiece with a ByteLevel pre-tokenizer or decoder");
            goto fail;
        }
        t->model = MODEL_WORDPIECE;
        const char *pfx = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix") ? json_str(model, "continuing_subword_prefix") : "##";
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word");
        if (!pfx || strlen(pfx) >= sizeof t->wp_prefix || (mx && !cJSON_IsNumber(mx))) {
            rkm_err(RKM_EFORMAT, "tokenizer.json: bad WordPiece continuing_subword_prefix or max_input_chars_per_word");
            goto fail;
        }
        snprintf(t->wp_prefix, sizeof t->wp_prefix, "%s", pfx);
        t->wp_max_chars = !mx ? 100 : mx->valuedouble < 0 ? 0 : mx->valuedouble > 1e9 ? 1000000000 : mx->valueint;
        const char *dp = json_type_is(dec, "WordPiece") ? json_str(dec, "prefix") : NULL;
        snprintf(t->wp_dec_prefix, sizeof t->wp_dec_prefix, "%s", dp ? dp : t->wp_prefix);
        t->wp_cleanup = json_type_is(dec, "WordPiece") ? json_bool(dec, "cleanup", 1) : 1;
    }
    if (decoder_strips(dec)) t->strip_leading_space = 1;
    t->ignore_merges = json_bool(model, "ignore_merges", 0);
    t->byte_fallback = json_bool(model, "byte_fallback", 0);
    /* Unigram fuses unknown runs itself, inside the segmentation */
    t->fuse_unk = unigram ? 0 : json_bool(model, "fuse_unk", 0);
    snprintf(t->model_name, sizeof t->model_name, "%s",
             t->model == MODEL_BPE_BYTES ? "gpt2" : unigram ? "t5" : wordpiece ? "bert" : "llama");
    if (unigram) {
        if (!(t->uscore = calloc((size_t)n, sizeof *t->uscore))) goto oom;
        double min_score = INFINITY;
        int id = 0;
        cJSON_ArrayForEach(v, vocab)
        {
            const char *piece = cJSON_GetArrayItem(v, 0)->valuestring;
            double score = cJSON_GetArrayItem(v, 1)->valuedouble;
            size_t pl = strlen(piece);
            if ((rc = rkm_tok__set(t, id, piece, pl, (float)score, RKM_TOKEN_NORMAL, 0))) goto fail_rc;
            t->uscore[id] = score;
            if (score < min_score) min_score = score;
            if (pl > (size_t)t->max_piece_bytes) t->max_piece_bytes = pl > 4096 ? 4096 : (int)pl;
            id++;
        }
        t->unk_score = min_score - 10.0; /* the references' unknown penalty */
    } else {
        cJSON_ArrayForEach(v, vocab)
        {
            if (t->tok[v->valueint].text) continue; /* two texts, one id: keep the first */
            size_t vl = strlen(v->string);
            if ((rc = rkm_tok__set(t, v->valueint, v->string, vl, 0.0f, RKM_TOKEN_NORMAL, 0))) goto fail_rc;
            if (vl > (size_t)t->wp_max_bytes) t->wp_max_bytes = vl > (1 << 20) ? 1 << 20 : (int)vl;
        }
    }
    cJSON_ArrayForEach(v, added)
    {
        int id = cJSON_GetObjectItemCaseSensitive(v, "id")->valueint;
        const char *content = json_str(v, "content");
        int special = json_bool(v, "special", 0);
        if ((rc = rkm_tok__set(t, id, content, strlen(content), 0.0f,
                          special ? RKM_TOKEN_CONTROL : RKM_TOKEN_USER_DEFINED, 1)))
            goto fail_rc;
        tok_entry *e = &t->tok[id];
        e->special = (uint8_t)special;
        e->lstrip = (uint8_t)json_bool(v, "lstrip", 0);
        e->rstrip = (uint8_t)json_bool(v, "rstrip", 0);
        e->normalized = (uint8_t)json_bool(v, "normalized", !special);
    }
    const char *unk = json_str(model, "unk_token");
    if ((rc = rkm_tok__finish(t))) goto fail_rc;
    t->unk = json_token_id(t, unk);
    if (unigram) {
        const cJSON *uid = cJSON_GetObjectItemCaseSensitive(model, "unk_id");
        t->unk = -1;
        if (cJSON_IsNumber(uid)) {
            if (uid->valuedouble < 0 || uid->valuedouble >= n_pieces) {
                rkm_err(RKM_EFORMAT, "tokenizer.json: Unigram unk_id %g out of range", uid->valuedouble);
                goto fail;
            }
            t->unk = uid->valueint;
        } else if (uid && !cJSON_IsNull(uid)) {
            rkm_err(RKM_EFORMAT, "tokenizer.json: bad Unigram unk_id");
            goto fail;
        }
    }
    if (t->unk >= 0 && !t->tok[t->unk].added) t->tok[t->unk].type = RKM_TOKEN_UNKNOWN;
    int nm = unigram || wordpiece ? 0 : cJSON_GetArraySize(merges);
    if (rkm_tok__pair_map_init(&t->merges, (size_t)nm) || !(t->merge_list = malloc(((size_t)nm + 1) * 2 * sizeof(int32_t))))
        goto oom;
    int rank = 0;
    if (!unigram && !wordpiece) cJSON_ArrayForEach(v, merges)
    {
        if (cJSON_IsString(v)) {
            const char *s = v->valuestring;
            const char *sp = *s ? strchr(s + 1, ' ') : NULL;
            if (!sp) {
                rkm_err(RKM_EFORMAT, "tokenizer.json: bad merge '%.40s'", s);
                goto fail;
            }
            /* "a b": the reference splits on spaces and keeps two parts */
            const char *end = strchr(sp + 1, ' ');
            size_t bn = end ? (size_t)(end - sp - 1) : strlen(sp + 1);
            if ((rc = rkm_tok__add_merge(t, s, (size_t)(sp - s), sp + 1, bn, rank))) goto fail_rc;
        } else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2 && cJSON_IsString(cJSON_GetArrayItem(v, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(v, 1))) {
            const char *a = cJSON_GetArrayItem(v, 0)->valuestring, *b = cJSON_GetArrayItem(v, 1)->valuestring;
            if ((rc = rkm_tok__add_merge(t, a, strlen(a), b, strlen(b), rank))) goto fail_rc;
        } else {
            rkm_err(RKM_EFORMAT, "tokenizer.json: bad merge #%d", rank);
            goto fail;
        }
        rank++;
    }
    if (t->model == MODEL_BPE_BYTES)
        for (int b = 0; b < 256; b++)
            if (t->byte_tok[b] < 0) {
                rkm_err(RKM_EFORMAT, "tokenizer.json: byte-level vocabulary lacks byte 0x%02x", b);
                goto fail;
            }
    rkm_tok__guess_pre_name(t);
    json_specials(t, root, cfg);
    if (cfg) {
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        const char *tmpl = NULL;
        if (cJSON_IsString(ct)) tmpl = ct->valuestring;
        else if (cJSON_IsArray(ct)) { /* [{"name": "default", "template": ...}, ...] */
            const cJSON *c;
            cJSON_ArrayForEach(c, ct)
            {
                const char *name = json_str(c, "name");
                if (!tmpl || (name && !strcmp(name, "default"))) tmpl = json_str(c, "template");
            }
        }
        if (tmpl && !(t->chat_template = strdup(tmpl))) goto oom;
    }
    if ((rc = rkm_tok__special_finish(t, 0))) goto fail_rc;
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    return t;
oom:
    rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
    goto fail;
fail_rc:
    if (rc == RKM_ENOMEM) rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
fail:
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    rkm_tokenizer_free(t);
    return NULL;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

rkm_tokenizer *rkm_tokenizer_load(const char *path, const char *config_path)
{
    if (ends_with(path, ".gguf")) {
        rkm_gguf *g = rkm_gguf_open(path);
        if (!g) return NULL; /* the reader's message names the file */
        rkm_tokenizer *t = rkm_tokenizer_from_gguf(g);
        rkm_gguf_close(g);
        if (!t) rkm_err_prefix(RKM_EFORMAT, "%s", path);
        return t;
    }
    size_t len, clen = 0;
    char *json = rkm_read_file(path, &len);
    if (!json) return NULL;
    char *cfg = NULL;
    char *guess = NULL;
    if (!config_path) { /* tokenizer_config.json next to tokenizer.json */
        const char *slash = strrchr(path, '/');
        size_t dir = slash ? (size_t)(slash - path + 1) : 0;
        guess = malloc(dir + 32);
        if (guess) {
            memcpy(guess, path, dir);
            strcpy(guess + dir, "tokenizer_config.json");
            FILE *f = fopen(guess, "rb");
            if (f) {
                fclose(f);
                config_path = guess;
            }
        }
    }
    if (config_path && !(cfg = rkm_read_file(config_path, &clen))) {
        free(json);
        free(guess);
        return NULL;
    }
    rkm_tokenizer *t = rkm_tokenizer_from_json(json, len, cfg, clen);
    if (!t) rkm_err_prefix(RKM_EFORMAT, "%s", path);
    free(json);
    free(cfg);
    free(guess);
    return t;
}
