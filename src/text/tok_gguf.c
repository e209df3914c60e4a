/*
 * tok_gguf.c - loading a tokenizer from GGUF metadata (tokenizer.ggml.*,
 * as llama.cpp writes it): the gpt2 (byte-level BPE), llama
 * (SentencePiece BPE by scores), t5 (Unigram, llama.cpp's UGM) and gemma4
 * (BPE merges over raw UTF-8 with U+2581 for spaces, Gemma 4) models.
 *
 * Threads: runs on the loading thread; reads the GGUF, which it does not
 * keep. Ownership: the tokenizer returned belongs to the caller
 * (rkm_tokenizer_free); nothing in it points into the GGUF.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

/* The Unigram parts of a GGUF "t5" vocabulary (llama.cpp's UGM): piece
 * scores, the unknown penalty, byte fallback when all 256 <0xXX> byte
 * tokens exist (SentencePiece's byte_fallback), and the normalizer:
 * tokenizer.ggml.precompiled_charsmap (u8 array) if present, then the
 * whitespace rules of add_space_prefix (default on) and
 * remove_extra_whitespaces (default off). Control and unknown tokens
 * are matched as added tokens, never inside the lattice (llama.cpp). */
static int ugm_from_gguf(rkm_tokenizer *t, const rkm_gguf *g, int isc)
{
    int n = t->n_vocab;
    if (isc < 0) return rkm_err(RKM_EFORMAT, "tokenizer: GGUF t5 tokenizer without tokenizer.ggml.scores");
    if (!(t->uscore = calloc((size_t)n, sizeof *t->uscore))) return RKM_ENOMEM;
    t->n_pieces = n;
    t->ugm_gguf = 1;
    double min_score = INFINITY;
    for (int i = 0; i < n; i++) {
        double sc = rkm_gguf_arr_float(g, isc, (uint64_t)i);
        if (!isfinite(sc)) return rkm_err(RKM_EFORMAT, "tokenizer: token %d has a non-finite score", i);
        t->uscore[i] = sc;
        int ty = t->tok[i].type;
        if (ty != RKM_TOKEN_CONTROL && ty != RKM_TOKEN_UNKNOWN && sc < min_score) min_score = sc;
        size_t pl = t->tok[i].text_len;
        if (pl > (size_t)t->max_piece_bytes) t->max_piece_bytes = pl > 4096 ? 4096 : (int)pl;
    }
    t->unk_score = (isfinite(min_score) ? min_score : 0) - 10.0;
    if (t->unk < 0)
        for (int i = 0; i < n && t->unk < 0; i++)
            if (t->tok[i].type == RKM_TOKEN_UNKNOWN) t->unk = i;
    t->byte_fallback = 1;
    for (int b = 0; b < 256; b++) t->byte_fallback &= t->byte_tok[b] >= 0;
    int v, prefix = 1, merge = 0;
    if (rkm_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &v) == 0) prefix = v;
    if (rkm_gguf_get_bool(g, "tokenizer.ggml.remove_extra_whitespaces", &v) == 0) merge = v;
    t->add_space_prefix = 0; /* the normalizer step does it */
    t->strip_leading_space = prefix;
    t->has_normalizer = 1;
    int ic = rkm_gguf_find(g, "tokenizer.ggml.precompiled_charsmap");
    if (ic >= 0) {
        int ty = rkm_gguf_arr_type(g, ic);
        const void *data = rkm_gguf_arr_data(g, ic);
        if ((ty != RKM_GGUF_UINT8 && ty != RKM_GGUF_INT8) || (!data && rkm_gguf_arr_n(g, ic)))
            return rkm_err(RKM_EFORMAT, "tokenizer: tokenizer.ggml.precompiled_charsmap is not a byte array");
        norm_step *st = &t->norm[t->n_norm];
        st->op = NORM_PRECOMPILED;
        if (!(st->cmap = rkm_charsmap_parse(data, (size_t)rkm_gguf_arr_n(g, ic)))) return RKM_EFORMAT;
        t->n_norm++;
    }
    t->norm[t->n_norm].op = NORM_SPM_WS;
    t->norm[t->n_norm].flags = prefix | merge << 1;
    t->n_norm++;
    snprintf(t->pre_name, sizeof t->pre_name, "default");
    return 0;
}

/* llama.cpp's gemma4 vocabulary (its BPE tokenizer with the gemma4
 * pre-tokenizer, whatever tokenizer.ggml.pre says): ' ' escaped to U+2581
 * before anything else, the text cut into newline runs and the rest, BPE
 * merges by rank over UTF-8 characters, unknown symbols as their <0xXX>
 * byte tokens (found by that text, whatever their type), BOS always added
 * (so a BOS id is required). Called after the tokens are set. */
static int gemma4_setup(rkm_tokenizer *t)
{
    if (t->bos < 0) return rkm_err(RKM_EFORMAT, "tokenizer: gemma4 vocabulary without tokenizer.ggml.bos_token_id");
    t->add_bos = 1;
    t->llama_gemma4 = 1;
    t->byte_fallback = 1;
    int rc = rkm_tok__set_pre_by_name(t, "gemma4");
    if (rc) return rc;
    norm_step *st = &t->norm[0];
    st->op = NORM_REPLACE;
    st->a = strdup(" ");
    st->b = strdup("\xe2\x96\x81");
    if (!st->a || !st->b) return RKM_ENOMEM;
    st->a_len = 1;
    st->b_len = 3;
    t->n_norm = 1;
    t->has_normalizer = 1;
    return 0;
}

/* After rkm_tok__finish: every text names one token (llama.cpp refuses
 * duplicates), and the byte tokens are the ones spelled <0xXX>. */
static int gemma4_check_tokens(rkm_tokenizer *t)
{
    for (int i = 0; i < t->n_vocab; i++) {
        int id = rkm_tok__lookup(t, t->tok[i].text, t->tok[i].text_len);
        if (id != i)
            return rkm_err(RKM_EFORMAT, "tokenizer: duplicate token in vocabulary: '%.40s' has ids %d and %d",
                           t->tok[i].text, id < i ? id : i, id < i ? i : id);
    }
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->byte_tok[b] = rkm_tok__lookup(t, hex, 6);
    }
    return 0;
}

/* One gemma4 merge "a b" of rank i: both parts and their concatenation
 * must be tokens (a merge that names anything else is a broken file, as
 * Hugging Face's BPE holds too). Returns 1 for a pair already merged at
 * an earlier rank (llama.cpp keeps the first), 0 to add it. */
static int gemma4_merge_check(const rkm_tokenizer *t, const char *s, size_t len, size_t sep, uint64_t i)
{
    if (sep == 0 || sep >= len)
        return rkm_err(RKM_EFORMAT, "tokenizer: merge %llu ('%.40s') is not 'left right'", (unsigned long long)i, s);
    int l = rkm_tok__lookup(t, s, sep), r = rkm_tok__lookup(t, s + sep + 1, len - sep - 1);
    if (l < 0 || r < 0)
        return rkm_err(RKM_EFORMAT, "tokenizer: merge %llu ('%.40s') names %s that is not in the vocabulary",
                       (unsigned long long)i, s, l < 0 ? "a left part" : "a right part");
    char stack[256];
    char *cat = len <= sizeof stack ? stack : malloc(len);
    if (!cat) return RKM_ENOMEM;
    memcpy(cat, s, sep);
    memcpy(cat + sep, s + sep + 1, len - sep - 1);
    int res = rkm_tok__lookup(t, cat, len - 1);
    if (cat != stack) free(cat);
    if (res < 0)
        return rkm_err(RKM_EFORMAT, "tokenizer: merge %llu ('%.40s') makes a token that is not in the vocabulary",
                       (unsigned long long)i, s);
    int32_t prev;
    return rkm_tok__pair_get(&t->merges, l, r, &prev) >= 0;
}

rkm_tokenizer *rkm_tokenizer_from_gguf(const struct rkm_gguf *g)
{
    rkm_tokenizer *t = NULL;
    const char *model = rkm_gguf_get_str(g, "tokenizer.ggml.model");
    if (!model) {
        rkm_err(RKM_EFORMAT, "tokenizer: GGUF has no tokenizer.ggml.model");
        return NULL;
    }
    int kind;
    if (!strcmp(model, "gpt2")) kind = MODEL_BPE_BYTES;
    else if (!strcmp(model, "llama")) kind = MODEL_SPM;
    else if (!strcmp(model, "t5")) kind = MODEL_UNIGRAM; /* llama.cpp's UGM */
    else if (!strcmp(model, "gemma4")) kind = MODEL_BPE_CHARS;
    else {
        rkm_err(RKM_EUNSUPPORTED, "tokenizer: unsupported tokenizer.ggml.model '%s'", model);
        return NULL;
    }
    int it = rkm_gguf_find(g, "tokenizer.ggml.tokens");
    if (it < 0 || rkm_gguf_arr_type(g, it) != RKM_GGUF_STRING) {
        rkm_err(RKM_EFORMAT, "tokenizer: GGUF has no tokenizer.ggml.tokens string array");
        return NULL;
    }
    uint64_t n = rkm_gguf_arr_n(g, it);
    if (n == 0 || n > (1u << 24)) {
        rkm_err(RKM_EFORMAT, "tokenizer: bad vocabulary size %llu", (unsigned long long)n);
        return NULL;
    }
    int ity = rkm_gguf_find(g, "tokenizer.ggml.token_type");
    int isc = rkm_gguf_find(g, "tokenizer.ggml.scores");
    int ime = rkm_gguf_find(g, "tokenizer.ggml.merges");
    if (ity >= 0 && rkm_gguf_arr_n(g, ity) != n) ity = -1;
    if (isc >= 0 && rkm_gguf_arr_n(g, isc) != n) isc = -1;
    if (ity >= 0 && rkm_gguf_arr_type(g, ity) == RKM_GGUF_STRING) ity = -1;
    if (isc >= 0 && rkm_gguf_arr_type(g, isc) == RKM_GGUF_STRING) isc = -1;
    if (ime >= 0 && rkm_gguf_arr_type(g, ime) != RKM_GGUF_STRING) ime = -1;
    int gemma4 = !strcmp(model, "gemma4");
    if ((kind == MODEL_BPE_BYTES || gemma4) && ime < 0) {
        rkm_err(RKM_EFORMAT, "tokenizer: %s tokenizer without tokenizer.ggml.merges (an array of strings)", model);
        return NULL;
    }
    t = rkm_tok__new((int)n);
    if (!t) goto oom;
    t->model = kind;
    snprintf(t->model_name, sizeof t->model_name, "%s", model);
    int rc;
    for (uint64_t i = 0; i < n; i++) {
        size_t len;
        const char *s = rkm_gguf_arr_str(g, it, i, &len);
        if (!s) {
            rkm_err(RKM_EFORMAT, "tokenizer: token %llu unreadable", (unsigned long long)i);
            goto fail;
        }
        char empty[32];
        if (gemma4 && rkm_utf8_valid_prefix(s, len) < len) {
            rkm_err(RKM_EFORMAT, "tokenizer: token %llu is not valid UTF-8", (unsigned long long)i);
            goto fail;
        }
        if (gemma4 && len == 0) { /* llama.cpp's name for an empty token */
            len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%llu]", (unsigned long long)i);
            s = empty;
        }
        int type = ity >= 0 ? (int)rkm_gguf_arr_int(g, ity, i) : RKM_TOKEN_NORMAL;
        if (type < RKM_TOKEN_NORMAL || type > RKM_TOKEN_BYTE) type = RKM_TOKEN_NORMAL;
        float score = isc >= 0 ? (float)rkm_gguf_arr_float(g, isc, i) : 0.0f;
        int added = type == RKM_TOKEN_CONTROL || type == RKM_TOKEN_USER_DEFINED || type == RKM_TOKEN_UNKNOWN;
        if ((rc = rkm_tok__set(t, (int)i, s, len, score, type, added))) goto fail_rc;
        t->tok[i].special = (uint8_t)(added && type != RKM_TOKEN_USER_DEFINED);
    }
    if ((rc = rkm_tok__special_from_gguf(t, g))) goto fail_rc; /* may retype tokens: before the tries */
    if (kind == MODEL_SPM) {
        t->add_space_prefix = 1;
        t->strip_leading_space = 1;
        snprintf(t->pre_name, sizeof t->pre_name, "default");
    }
    int v;
    if (rkm_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &v) == 0) {
        t->add_space_prefix = v;
        t->strip_leading_space = v;
    }
    if (kind == MODEL_BPE_BYTES) {
        /* no (or an empty) pre: llama.cpp's "default" split */
        const char *pre = rkm_gguf_get_str(g, "tokenizer.ggml.pre");
        if ((rc = rkm_tok__set_pre_by_name(t, pre && *pre ? pre : "default"))) goto fail_rc;
    }
    if (kind == MODEL_UNIGRAM && (rc = ugm_from_gguf(t, g, isc))) goto fail_rc;
    if (gemma4 && (rc = gemma4_setup(t))) goto fail_rc;
    const char *tmpl = rkm_gguf_get_str(g, "tokenizer.chat_template");
    if (tmpl && !(t->chat_template = strdup(tmpl))) goto oom;
    if ((rc = rkm_tok__finish(t))) goto fail_rc;
    if (gemma4 && (rc = gemma4_check_tokens(t))) goto fail_rc;
    if (ime >= 0) {
        uint64_t nm = rkm_gguf_arr_n(g, ime);
        if (nm > (1u << 24)) {
            rkm_err(RKM_EFORMAT, "tokenizer: too many merges");
            goto fail;
        }
        if (rkm_tok__pair_map_init(&t->merges, nm) || !(t->merge_list = malloc((nm + 1) * 2 * sizeof(int32_t))))
            goto oom;
        for (uint64_t i = 0; i < nm; i++) {
            size_t len;
            const char *s = rkm_gguf_arr_str(g, ime, i, &len);
            if (!s && gemma4) {
                rkm_err(RKM_EFORMAT, "tokenizer: merge %llu unreadable", (unsigned long long)i);
                goto fail;
            }
            if (!s) continue;
            /* "left right"; the separator is the first space after the
             * first byte (a left part is never empty). */
            const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
            if (gemma4 && (rc = gemma4_merge_check(t, s, len, sp ? (size_t)(sp - s) : 0, i))) {
                if (rc > 0) continue;
                goto fail_rc;
            }
            if (!sp) continue;
            if ((rc = rkm_tok__add_merge(t, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp - s) - 1, (int)i)))
                goto fail_rc;
        }
    }
    return t;
oom:
    rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
fail:
    rkm_tokenizer_free(t);
    return NULL;
fail_rc:
    if (rc == RKM_ENOMEM) rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
    rkm_tokenizer_free(t);
    return NULL;
}

