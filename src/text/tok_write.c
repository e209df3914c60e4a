/*
 * tok_write.c - writing a tokenizer back out: GGUF tokenizer.ggml.*
 * metadata the way llama.cpp's files store it (gpt2, llama, t5; gemma4 for
 * a Gemma tokenizer.json of a Gemma 4 model, as llama.cpp's converter
 * writes it), and a Hugging Face tokenizer.json / tokenizer_config.json
 * for byte-level BPE.
 *
 * Threads: reads a loaded tokenizer; the caller owns the writer or path.
 * Ownership: the GGUF writer copies what it is given; the temporary
 * arrays and cJSON trees are freed before returning.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

/* A tokenizer.json of Gemma's kind: BPE over characters with
 * byte_fallback, the one normalizer Replace ' ' -> U+2581, no
 * pre-tokenizer but a Split on ' ' (which finds nothing after it). */
static int gemma_kind(const rkm_tokenizer *t)
{
    if (!t->from_json || t->model != MODEL_BPE_CHARS || !t->byte_fallback || t->metaspace || t->ignore_merges)
        return 0;
    if (t->n_norm != 1 || t->norm[0].op != NORM_REPLACE || strcmp(t->norm[0].a, " ") || strcmp(t->norm[0].b, "\xe2\x96\x81"))
        return 0;
    for (int k = 0; k < t->n_split; k++)
        if (t->split[k].kind != PRE_LITERAL || strcmp(t->split[k].lit, " ")) return 0;
    return 1;
}

const char *rkm_tokenizer_gguf_model(const rkm_tokenizer *t, const char *arch)
{
    if (!t || t->model == MODEL_WORDPIECE) return NULL;
    if (t->llama_gemma4 || (arch && !strcmp(arch, "gemma4") && gemma_kind(t))) return "gemma4";
    return t->model == MODEL_UNIGRAM ? "t5" : t->model == MODEL_BPE_BYTES ? "gpt2" : "llama";
}

/* The token type llama.cpp's converter gives token id of a Gemma
 * tokenizer.json for Gemma 4: <0xXX> byte tokens BYTE; the tokens Gemma 4's
 * chat parser reads USER_DEFINED (always split out, always rendered); the
 * special tokens CONTROL; the other tokens of model.vocab NORMAL (added or
 * not); added tokens past it USER_DEFINED. */
static int gemma4_type(const rkm_tokenizer *t, int id)
{
    static const char *const visible[] = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
                                          "<|tool_response>", "<tool_response|>", "<|\"|>"};
    const tok_entry *e = &t->tok[id];
    if (rkm_tok__byte_text(e->text, e->text_len) >= 0) return RKM_TOKEN_BYTE;
    for (size_t k = 0; k < RKM_ARRAY_LEN(visible); k++)
        if (!strcmp(e->text, visible[k])) return RKM_TOKEN_USER_DEFINED;
    if (e->special || id == t->bos || id == t->eos || id == t->unk || id == t->pad) return RKM_TOKEN_CONTROL;
    if (e->text_len == 0 && e->type == RKM_TOKEN_UNUSED) return RKM_TOKEN_UNUSED; /* an id hole */
    return id < t->n_pieces ? RKM_TOKEN_NORMAL : RKM_TOKEN_USER_DEFINED;
}

/* Merge rank r as "left right", a space inside a part written as U+0120
 * (as llama.cpp's gguf-py does); malloc'd, NULL when out of memory. */
static char *merge_text(const rkm_tokenizer *t, int r)
{
    const tok_entry *p[2] = {&t->tok[t->merge_list[2 * r]], &t->tok[t->merge_list[2 * r + 1]]};
    char *m = malloc(2 * ((size_t)p[0]->text_len + p[1]->text_len) + 2);
    if (!m) return NULL;
    size_t o = 0;
    for (int k = 0; k < 2; k++) {
        if (k) m[o++] = ' ';
        for (uint32_t i = 0; i < p[k]->text_len; i++) {
            if (p[k]->text[i] == ' ') o += (size_t)rkm_utf8_encode(0x120, m + o);
            else m[o++] = p[k]->text[i];
        }
    }
    m[o] = 0;
    return m;
}

int rkm_tokenizer_write_gguf(const rkm_tokenizer *t, struct rkm_gguf_writer *w)
{
    return rkm_tokenizer_write_gguf_arch(t, w, NULL);
}

int rkm_tokenizer_write_gguf_arch(const rkm_tokenizer *t, struct rkm_gguf_writer *w, const char *arch)
{
    if (!t || !w) return rkm_err(RKM_EINVAL, "write_gguf: bad arguments");
    const char *model = rkm_tokenizer_gguf_model(t, arch);
    if (!model) return rkm_err(RKM_EUNSUPPORTED, "write_gguf: WordPiece tokenizers have no supported GGUF form");
    int gemma4 = !strcmp(model, "gemma4");
    if (!gemma4 && !t->pre_name[0])
        return rkm_err(RKM_EUNSUPPORTED,
                       "write_gguf: the tokenizer's pre-tokenizer regexes are not those of any pre-tokenizer type "
                       "llama.cpp knows, so a GGUF cannot name them");
    int unigram = t->model == MODEL_UNIGRAM;
    int ugm_prefix = 0, ugm_merge = 0;
    const rkm_charsmap *cmap = NULL;
    if (unigram) {
        /* what llama.cpp's UGM can express: a charsmap, then SentencePiece's
         * space prefix and space merging */
        static const char sp[] = "\xe2\x96\x81";
        for (int k = 0; k < t->n_norm; k++) {
            const norm_step *st = &t->norm[k];
            if (st->op == NORM_PRECOMPILED && k == 0) cmap = st->cmap;
            else if (st->op == NORM_PREPEND && !strcmp(st->a, sp)) ugm_prefix = 1;
            else if (st->op == NORM_REPLACE && !strcmp(st->a, " ") && !strcmp(st->b, sp)) continue;
            else if (st->op == NORM_REPLACE_SPACES) ugm_merge = 1;
            else if (st->op == NORM_STRIP && st->flags == 2) continue; /* trailing spaces: merged away */
            else if (st->op == NORM_SPM_WS) ugm_prefix |= st->flags & 1, ugm_merge |= (st->flags >> 1) & 1;
            else return rkm_err(RKM_EUNSUPPORTED, "write_gguf: this Unigram tokenizer's normalizers have no GGUF form");
        }
        for (int k = 0; k < t->n_split; k++) {
            if (t->split[k].kind != PRE_WS_SPLIT)
                return rkm_err(RKM_EUNSUPPORTED, "write_gguf: this Unigram tokenizer's pre-tokenizer has no GGUF form");
            ugm_merge = 1;
        }
        if (t->metaspace) {
            if (strcmp(t->metaspace_rep, sp))
                return rkm_err(RKM_EUNSUPPORTED, "write_gguf: Metaspace replacement other than U+2581");
            ugm_prefix |= t->metaspace_prepend != 0;
        }
    }
    int n = t->n_vocab;
    const char **strs = malloc((size_t)n * sizeof *strs);
    size_t *lens = malloc((size_t)n * sizeof *lens);
    int32_t *types = malloc((size_t)n * sizeof *types);
    float *scores = malloc((size_t)n * sizeof *scores);
    char **merges = NULL;
    char *hole_names = malloc((size_t)n * 24);
    int rc = 0;
    if (!strs || !lens || !types || !scores || !hole_names) goto oom;
    for (int i = 0; i < n; i++) {
        const tok_entry *e = &t->tok[i];
        strs[i] = e->text;
        lens[i] = e->text_len;
        types[i] = gemma4 && t->from_json ? gemma4_type(t, i) : e->type;
        scores[i] = unigram ? (float)t->uscore[i] : gemma4 && t->from_json ? -1000.0f : e->score;
        if (e->text_len == 0 && e->type == RKM_TOKEN_UNUSED) { /* id hole: llama.cpp wants unique texts */
            snprintf(hole_names + 24 * (size_t)i, 24, "[PAD%d]", i);
            strs[i] = hole_names + 24 * (size_t)i;
            lens[i] = strlen(strs[i]);
        }
    }
    int spm = !strcmp(model, "llama") || unigram;
    rkm_gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    /* llama.cpp's converter writes no pre-tokenizer for gemma4 (it implies its own) */
    if (!gemma4) rkm_gguf_writer_set_str(w, "tokenizer.ggml.pre", t->pre_name);
    if (spm && t->model == MODEL_BPE_CHARS && t->from_json) {
        /* BPE over characters as SentencePiece scores: a merge's result
         * scores higher the earlier the merge, so merging by score
         * reproduces the merge order. */
        for (int i = 0; i < n; i++)
            if (!t->tok[i].added && t->tok[i].type == RKM_TOKEN_NORMAL) scores[i] = -1e9f;
        for (int r = t->n_merges - 1; r >= 0; r--) {
            int32_t res = -1;
            rkm_tok__pair_get(&t->merges, t->merge_list[2 * r], t->merge_list[2 * r + 1], &res);
            if (res >= 0) scores[res] = -(float)r;
        }
        for (int i = 0; i < n; i++) /* single characters: neutral */
            if (scores[i] == -1e9f && rkm_utf8_seq_len((uint8_t)t->tok[i].text[0]) == (int)t->tok[i].text_len)
                scores[i] = 0;
    }
    rkm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, lens, (uint64_t)n);
    rkm_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RKM_GGUF_INT32, types, (uint64_t)n);
    if (spm || gemma4) rkm_gguf_writer_set_arr(w, "tokenizer.ggml.scores", RKM_GGUF_FLOAT32, scores, (uint64_t)n);
    if (!spm) {
        merges = calloc((size_t)t->n_merges + 1, sizeof *merges);
        if (!merges) goto oom;
        for (int r = 0; r < t->n_merges; r++)
            if (!(merges[r] = merge_text(t, r))) goto oom;
        rkm_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, NULL,
                                    (uint64_t)t->n_merges);
    }
    rkm_tok__special_write_gguf(t, w, gemma4); /* llama.cpp: add_bos always for gemma4 */
    if (gemma4) {
        rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", !t->from_json && t->add_space_prefix);
    } else if (unigram) {
        rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", ugm_prefix);
        rkm_gguf_writer_set_bool(w, "tokenizer.ggml.remove_extra_whitespaces", ugm_merge);
        if (cmap) {
            size_t cn;
            const void *blob = rkm_charsmap_blob(cmap, &cn);
            rkm_gguf_writer_set_arr(w, "tokenizer.ggml.precompiled_charsmap", RKM_GGUF_UINT8, blob, (uint64_t)cn);
        }
    } else if (spm) {
        int prefix = t->add_space_prefix;
        if (t->from_json) /* a Prepend(U+2581) normalizer is SentencePiece's space prefix */
            for (int k = 0; k < t->n_norm; k++)
                if (t->norm[k].op == NORM_PREPEND) prefix = 1;
        rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", prefix);
    }
    if (t->chat_template) rkm_gguf_writer_set_str(w, "tokenizer.chat_template", t->chat_template);
    goto done;
oom:
    rc = rkm_err(RKM_ENOMEM, "write_gguf: out of memory");
done:
    if (merges)
        for (int r = 0; r < t->n_merges; r++) free(merges[r]);
    free(merges);
    free(strs);
    free(lens);
    free(types);
    free(scores);
    free(hole_names);
    return rc;
}

static cJSON *json_split(const split_step *st)
{
    static const char *const behaviors[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                            "Contiguous"};
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "Split");
    cJSON *p = cJSON_AddObjectToObject(s, "pattern");
    if (st->kind == PRE_REGEX) cJSON_AddStringToObject(p, "Regex", rkm_regex_pattern(st->re));
    else cJSON_AddStringToObject(p, "String", st->lit);
    cJSON_AddStringToObject(s, "behavior", behaviors[st->behavior]);
    cJSON_AddBoolToObject(s, "invert", st->invert);
    return s;
}

static cJSON *json_bytelevel(int use_regex)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "ByteLevel");
    cJSON_AddBoolToObject(b, "add_prefix_space", 0);
    cJSON_AddBoolToObject(b, "trim_offsets", 1);
    cJSON_AddBoolToObject(b, "use_regex", use_regex);
    return b;
}

int rkm_tokenizer_write_hf_json(const rkm_tokenizer *t, const char *path)
{
    if (!t || !path) return rkm_err(RKM_EINVAL, "write_hf_json: bad arguments");
    if (t->model != MODEL_BPE_BYTES)
        return rkm_err(RKM_EUNSUPPORTED, "write_hf_json: only byte-level BPE tokenizers can be written");
    cJSON *pre = NULL;
    if (t->n_split == 1 && t->split[0].fast == PRE_GPT2 && t->split[0].behavior == SPLIT_ISOLATED &&
        !t->split[0].invert) {
        pre = json_bytelevel(1); /* GPT-2's split is the ByteLevel regex */
    } else {
        for (int k = 0; k < t->n_split; k++)
            if (t->split[k].kind != PRE_REGEX && t->split[k].kind != PRE_LITERAL)
                return rkm_err(RKM_EUNSUPPORTED, "write_hf_json: a split step with no tokenizer.json form");
        pre = cJSON_CreateObject();
        cJSON_AddStringToObject(pre, "type", "Sequence");
        cJSON *list = cJSON_AddArrayToObject(pre, "pretokenizers");
        for (int k = 0; k < t->n_split; k++) cJSON_AddItemToArray(list, json_split(&t->split[k]));
        cJSON_AddItemToArray(list, json_bytelevel(0));
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int i = 0; i < t->n_vocab; i++) {
        const tok_entry *e = &t->tok[i];
        if (!e->added) continue;
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", i);
        cJSON_AddStringToObject(a, "content", e->text);
        cJSON_AddBoolToObject(a, "single_word", 0);
        cJSON_AddBoolToObject(a, "lstrip", e->lstrip);
        cJSON_AddBoolToObject(a, "rstrip", e->rstrip);
        cJSON_AddBoolToObject(a, "normalized", 0);
        cJSON_AddBoolToObject(a, "special", e->special);
        cJSON_AddItemToArray(added, a);
    }
    int nfc = 0;
    for (int k = 0; k < t->n_norm; k++) nfc |= t->norm[k].op == NORM_NFC;
    if (nfc) {
        cJSON *nn = cJSON_AddObjectToObject(root, "normalizer");
        cJSON_AddStringToObject(nn, "type", "NFC");
    } else {
        cJSON_AddNullToObject(root, "normalizer");
    }
    cJSON_AddItemToObject(root, "pre_tokenizer", pre);
    cJSON_AddNullToObject(root, "post_processor");
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON_AddBoolToObject(dec, "add_prefix_space", 0);
    cJSON_AddBoolToObject(dec, "trim_offsets", 1);
    cJSON_AddBoolToObject(dec, "use_regex", 1);
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddNullToObject(model, "continuing_subword_prefix");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddBoolToObject(model, "fuse_unk", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
    cJSON_AddBoolToObject(model, "ignore_merges", t->ignore_merges);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int i = 0; i < t->n_vocab; i++) {
        const tok_entry *e = &t->tok[i];
        if (e->added || (e->text_len == 0 && e->type == RKM_TOKEN_UNUSED)) continue;
        /* byte-level spelling of the token */
        char *sp = malloc((size_t)e->ibytes_len * 2 + 1);
        if (!sp) break;
        size_t l = rkm_tok__byte_level_encode(e->ibytes, e->ibytes_len, sp);
        sp[l] = 0;
        cJSON_AddNumberToObject(vocab, sp, i);
        free(sp);
    }
    cJSON *ml = cJSON_AddArrayToObject(model, "merges");
    for (int r = 0; r < t->n_merges; r++) {
        cJSON *pair = cJSON_CreateArray();
        for (int k = 0; k < 2; k++) {
            const tok_entry *e = &t->tok[t->merge_list[2 * r + k]];
            char *sp = malloc((size_t)e->ibytes_len * 2 + 1);
            if (!sp) break;
            size_t l = rkm_tok__byte_level_encode(e->ibytes, e->ibytes_len, sp);
            sp[l] = 0;
            cJSON_AddItemToArray(pair, cJSON_CreateString(sp));
            free(sp);
        }
        cJSON_AddItemToArray(ml, pair);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return rkm_err(RKM_ENOMEM, "write_hf_json: out of memory");
    int rc = rkm_write_file_atomic(path, text, strlen(text));
    cJSON_free(text);
    return rc;
}

int rkm_tokenizer_write_hf_config(const rkm_tokenizer *t, const char *path)
{
    if (!t || !path) return rkm_err(RKM_EINVAL, "write_hf_config: bad arguments");
    cJSON *c = cJSON_CreateObject();
    if (!c) return rkm_err(RKM_ENOMEM, "write_hf_config: out of memory");
    if (t->bos >= 0) cJSON_AddStringToObject(c, "bos_token", t->tok[t->bos].text);
    else cJSON_AddNullToObject(c, "bos_token");
    if (t->eos >= 0) cJSON_AddStringToObject(c, "eos_token", t->tok[t->eos].text);
    if (t->pad >= 0) cJSON_AddStringToObject(c, "pad_token", t->tok[t->pad].text);
    if (t->unk >= 0) cJSON_AddStringToObject(c, "unk_token", t->tok[t->unk].text);
    cJSON_AddBoolToObject(c, "add_bos_token", t->add_bos);
    cJSON_AddBoolToObject(c, "add_eos_token", t->add_eos);
    cJSON_AddBoolToObject(c, "clean_up_tokenization_spaces", 0);
    if (t->chat_template) cJSON_AddStringToObject(c, "chat_template", t->chat_template);
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    if (!text) return rkm_err(RKM_ENOMEM, "write_hf_config: out of memory");
    int rc = rkm_write_file_atomic(path, text, strlen(text));
    cJSON_free(text);
    return rc;
}
