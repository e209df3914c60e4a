/*
 * tok_special.c - the special tokens of a tokenizer, computed the way
 * llama.cpp computes them when it loads a vocabulary (llama_vocab's load
 * in src/llama-vocab.cpp), so that generation stops where llama.cpp's
 * does and a prompt starts and ends as it would there:
 *  - the default ids and add-BOS/EOS/SEP flags of each tokenizer model
 *    (model_rules) and the flags some pre-tokenizers imply (pre_rules);
 *  - the GGUF keys over them (roles, old_fim_keys), checked as llama.cpp
 *    checks them;
 *  - the roles llama.cpp recognises by token text when the file names no
 *    id: EOT, EOM and the six FIM roles, and the texts that end generation
 *    (text_rules: one table from a text to what it is);
 *  - the end-of-generation (EOG) set: those texts, eos, eot, eom and the
 *    FIM pad/repo/separator tokens, less what its workarounds drop
 *    (eog_drops: gpt-oss's <|end|>, which closes a message but not the
 *    reply, and Gemma 4's </s>);
 *  - the token types it forces on the tokens it recognises (control for
 *    the roles and the EOG texts, user-defined for gpt-oss's channel
 *    markers, which it always renders), for GGUF vocabularies.
 * When several tokens match one role (<|im_end|> and <|endoftext|> are
 * both end-of-turn texts), llama.cpp takes the first it meets walking its
 * std::unordered_map of token texts. That order is libstdc++'s (the build
 * of llama.cpp the tests compare with is linked with it); stdmap_order
 * reproduces it.
 * For tokenizer.json the loader (tok_json.c) reads the ids and flags as
 * llama.cpp's converter would write them into a GGUF; the flags it leaves
 * open get llama.cpp's defaults here, so both paths agree with llama.cpp
 * on the converted file.
 *
 * Threads: runs on the loading thread, before the tokenizer is shared.
 * Ownership: writes the tokenizer's own fields; scratch is freed here.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/tokenizer_impl.h"

/* ------------------------------------------------------------ tables */

/* Each role: its name, the GGUF key of its id, its field. */
static const struct {
    const char *name, *key;
    size_t field;
} roles[RKM_TOK_N_ROLES] = {
    [RKM_TOK_BOS] = {"bos", "tokenizer.ggml.bos_token_id", offsetof(rkm_tokenizer, bos)},
    [RKM_TOK_EOS] = {"eos", "tokenizer.ggml.eos_token_id", offsetof(rkm_tokenizer, eos)},
    [RKM_TOK_UNK] = {"unk", "tokenizer.ggml.unknown_token_id", offsetof(rkm_tokenizer, unk)},
    /* sic: llama.cpp's spelling of the key */
    [RKM_TOK_SEP] = {"sep", "tokenizer.ggml.seperator_token_id", offsetof(rkm_tokenizer, sep)},
    [RKM_TOK_PAD] = {"pad", "tokenizer.ggml.padding_token_id", offsetof(rkm_tokenizer, pad)},
    [RKM_TOK_MASK] = {"mask", "tokenizer.ggml.mask_token_id", offsetof(rkm_tokenizer, mask)},
    [RKM_TOK_EOT] = {"eot", "tokenizer.ggml.eot_token_id", offsetof(rkm_tokenizer, eot)},
    [RKM_TOK_EOM] = {"eom", "tokenizer.ggml.eom_token_id", offsetof(rkm_tokenizer, eom)},
    [RKM_TOK_FIM_PRE] = {"fim_pre", "tokenizer.ggml.fim_pre_token_id", offsetof(rkm_tokenizer, fim[0])},
    [RKM_TOK_FIM_SUF] = {"fim_suf", "tokenizer.ggml.fim_suf_token_id", offsetof(rkm_tokenizer, fim[1])},
    [RKM_TOK_FIM_MID] = {"fim_mid", "tokenizer.ggml.fim_mid_token_id", offsetof(rkm_tokenizer, fim[2])},
    [RKM_TOK_FIM_PAD] = {"fim_pad", "tokenizer.ggml.fim_pad_token_id", offsetof(rkm_tokenizer, fim[3])},
    [RKM_TOK_FIM_REP] = {"fim_rep", "tokenizer.ggml.fim_rep_token_id", offsetof(rkm_tokenizer, fim[4])},
    [RKM_TOK_FIM_SEP] = {"fim_sep", "tokenizer.ggml.fim_sep_token_id", offsetof(rkm_tokenizer, fim[5])},
};

/* The older names of three FIM keys, read after the others (so that
 * they win, as in llama.cpp). */
static const struct {
    const char *key;
    int role;
} old_fim_keys[] = {
    {"tokenizer.ggml.prefix_token_id", RKM_TOK_FIM_PRE},
    {"tokenizer.ggml.suffix_token_id", RKM_TOK_FIM_SUF},
    {"tokenizer.ggml.middle_token_id", RKM_TOK_FIM_MID},
};

/* Per tokenizer model: the default ids of the first six roles (bos, eos,
 * unk, sep, pad, mask; -1 none), the default flags, whether it is a BPE
 * vocabulary (whose pre-tokenizer names may change the flags, pre_rules)
 * and the pre-tokenizer it implies whatever the file says. */
static const struct model_rule {
    const char *model;
    int16_t id[6];
    uint8_t add_bos, add_eos, add_sep, bpe;
    const char *pre;
} model_rules[] = {
    {"llama", {1, 2, 0, -1, -1, -1}, 1, 0, 0, 0, NULL},      /* SentencePiece BPE */
    {"gpt2", {11, 11, -1, -1, -1, -1}, 0, 0, 0, 1, NULL},    /* byte-level BPE */
    {"t5", {-1, 1, 2, -1, 0, -1}, 0, 1, 0, 0, NULL},         /* Unigram */
    {"bert", {101, -1, 100, 102, 0, 103}, 1, 0, 1, 0, NULL}, /* WordPiece */
    {"gemma4", {-1, -1, -1, -1, -1, -1}, 0, 0, 0, 1, "gemma4"},
};

/* Pre-tokenizers of BPE vocabularies that change the flags: add BOS or
 * SEP by default, have no BOS, or add BOS whatever the file says (Gemma 4:
 * llama.cpp overrides a false add_bos_token). */
static const struct pre_rule {
    const char *pre;
    uint8_t add_bos, add_sep, no_bos, force_bos;
} pre_rules[] = {
    {"llama3", 1, 0, 0, 0},     {"llama-v3", 1, 0, 0, 0},    {"llama-bpe", 1, 0, 0, 0},
    {"falcon3", 1, 0, 0, 0},    {"falcon-h1", 1, 0, 0, 0},   {"pixtral", 1, 0, 0, 0},
    {"midm-2.0", 1, 0, 0, 0},   {"lfm2", 1, 0, 0, 0},        {"jina-v5-nano", 1, 0, 0, 0},
    {"tekken", 1, 0, 0, 0},     {"chameleon", 1, 0, 0, 0},   {"jina-v1-en", 0, 1, 0, 0},
    {"jina-v2-code", 0, 1, 0, 0}, {"roberta-bpe", 0, 1, 0, 0}, {"glm4", 0, 0, 1, 0},
    {"chatglm-bpe", 0, 0, 1, 0}, {"gemma4", 0, 0, 0, 1},     {"granite-embed-multi-311m", 0, 0, 0, 1},
};

/* What a token text makes a token: the roles it takes when the file names
 * none (1 << role), whether it ends generation, whether it is rendered as
 * user-defined text. A text may be several things. */
enum { TEXT_EOG = 1u << RKM_TOK_N_ROLES, TEXT_USER = TEXT_EOG << 1 };
#define ROLE(r) (1u << RKM_TOK_##r)
#define EOT_EOG (ROLE(EOT) | TEXT_EOG)
static const struct {
    const char *text;
    uint32_t what;
} text_rules[] = {
    {"<|eot_id|>", EOT_EOG},
    {"<|im_end|>", EOT_EOG},
    {"<|end|>", EOT_EOG},
    {"<end_of_turn>", EOT_EOG},
    {"<|endoftext|>", EOT_EOG},
    {"<|end_of_text|>", EOT_EOG}, /* Granite */
    {"<EOT>", EOT_EOG},
    {"_<EOT>", EOT_EOG},
    {"[EOT]", EOT_EOG},                                                  /* Kimi-K2 */
    {"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", EOT_EOG}, /* DeepSeek */
    {"<end_of_utterance>", EOT_EOG},                                     /* SmolDocling */
    {"<|eom_id|>", ROLE(EOM) | TEXT_EOG},
    {"<|return|>", TEXT_EOG}, /* gpt-oss (harmony) */
    {"<|call|>", TEXT_EOG},
    {"<|flush|>", TEXT_EOG}, /* solar-open */
    {"<|calls|>", TEXT_EOG},
    {"</s>", TEXT_EOG},
    {"[EOS]", TEXT_EOG},
    {"<eos>", TEXT_EOG}, /* Gemma 4 */
    {"<turn|>", TEXT_EOG},
    {"<|tool_response>", TEXT_EOG},
    {"[e~[", TEXT_EOG}, /* MiniMax-M2 */
    {"<|fim_prefix|>", ROLE(FIM_PRE)}, /* Qwen */
    {"<fim-prefix>", ROLE(FIM_PRE)},
    {"<fim_prefix>", ROLE(FIM_PRE)}, /* Granite */
    {"<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", ROLE(FIM_PRE)}, /* DeepSeek */
    {"<PRE>", ROLE(FIM_PRE)},
    {"\xe2\x96\x81<PRE>", ROLE(FIM_PRE)}, /* CodeLlama */
    {"<|code_prefix|>", ROLE(FIM_PRE)},  /* GLM-4.5 */
    {"<|prefix|>", ROLE(FIM_PRE)},
    {"<|fim_suffix|>", ROLE(FIM_SUF)},
    {"<fim-suffix>", ROLE(FIM_SUF)},
    {"<fim_suffix>", ROLE(FIM_SUF)},
    {"<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", ROLE(FIM_SUF)},
    {"<SUF>", ROLE(FIM_SUF)},
    {"\xe2\x96\x81<SUF>", ROLE(FIM_SUF)},
    {"<|code_suffix|>", ROLE(FIM_SUF)},
    {"<|suffix|>", ROLE(FIM_SUF)},
    {"<|fim_middle|>", ROLE(FIM_MID)},
    {"<fim-middle>", ROLE(FIM_MID)},
    {"<fim_middle>", ROLE(FIM_MID)},
    {"<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", ROLE(FIM_MID)},
    {"<MID>", ROLE(FIM_MID)},
    {"\xe2\x96\x81<MID>", ROLE(FIM_MID)},
    {"<|code_middle|>", ROLE(FIM_MID)},
    {"<|middle|>", ROLE(FIM_MID)},
    {"<|fim_pad|>", ROLE(FIM_PAD)},
    {"<fim-pad>", ROLE(FIM_PAD)},
    {"<fim_pad>", ROLE(FIM_PAD)},
    {"<PAD>", ROLE(FIM_PAD)},
    {"[PAD]", ROLE(FIM_PAD)},
    {"<|fim_repo|>", ROLE(FIM_REP)},
    {"<|repo_name|>", ROLE(FIM_REP)},
    {"<fim-repo>", ROLE(FIM_REP)},
    {"<REPO>", ROLE(FIM_REP)},
    {"<reponame>", ROLE(FIM_REP)},
    {"<|file_sep|>", ROLE(FIM_SEP)},
    {"<|channel|>", TEXT_USER}, /* gpt-oss: always rendered */
    {"<|message|>", TEXT_USER},
    {"<|start|>", TEXT_USER},
    {"<|constrain|>", TEXT_USER},
};
#undef EOT_EOG
#undef ROLE

/* llama.cpp's workarounds: an EOG token that is not one when some others
 * are in the set (one pair of `with`; a NULL second needs the first
 * alone), and the type it gets then. */
static const struct {
    const char *text;
    uint8_t type;
    const char *with[4][2];
} eog_drops[] = {
    /* gpt-oss and solar-open end a message with <|end|> and the reply with
     * <|return|> or a tool call: stopping at <|end|> would never reach the
     * final channel */
    {"<|end|>",
     RKM_TOKEN_USER_DEFINED,
     {{"<|return|>", "<|call|>"}, {"<|return|>", "<|calls|>"}, {"<|call|>", "<|flush|>"}, {"<|calls|>", "<|flush|>"}}},
    /* Gemma 4, PaddleOCR: </s> is text */
    {"</s>", RKM_TOKEN_NORMAL, {{"<|tool_response>", NULL}}},
};

static const struct model_rule *model_rule(const char *model)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(model_rules); i++)
        if (!strcmp(model_rules[i].model, model)) return &model_rules[i];
    return NULL;
}

static const struct pre_rule *pre_rule(const struct model_rule *m, const char *pre)
{
    if (!m || !m->bpe || !pre) return NULL;
    for (size_t i = 0; i < RKM_ARRAY_LEN(pre_rules); i++)
        if (!strcmp(pre_rules[i].pre, pre)) return &pre_rules[i];
    return NULL;
}

/* ------------------------------------------------------------ getters */

int *rkm_tok__role_id(rkm_tokenizer *t, int role) { return (int *)((char *)t + roles[role].field); }

int rkm_tokenizer_special(const rkm_tokenizer *t, int role)
{
    if (!t || role < 0 || role >= RKM_TOK_N_ROLES) return -1;
    return *(const int *)((const char *)t + roles[role].field);
}

const char *rkm_tokenizer_role_name(int role) { return role >= 0 && role < RKM_TOK_N_ROLES ? roles[role].name : NULL; }

/* ------------------------------------------- llama.cpp's token map order */

/* libstdc++'s std::hash<std::string>: _Hash_bytes, MurmurHash2's 64-bit
 * form over little-endian 8-byte words, with the seed 0xc70f6907. */
static uint64_t std_hash(const unsigned char *s, size_t n)
{
    const uint64_t mul = 0xc6a4a7935bd1e995ull;
    uint64_t h = 0xc70f6907ull ^ (n * mul);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = 0;
        for (int b = 7; b >= 0; b--) w = w << 8 | s[i + b];
        w *= mul;
        w ^= w >> 47;
        h ^= w * mul;
        h *= mul;
    }
    if (i < n) {
        uint64_t w = 0;
        for (size_t b = n; b > i; b--) w = w << 8 | s[b - 1];
        h ^= w;
        h *= mul;
    }
    h ^= h >> 47;
    h *= mul;
    return h ^ (h >> 47);
}

/* The bucket counts a std::unordered_map grows through as elements are
 * inserted one by one (libstdc++'s prime rehash policy at load factor 1:
 * 13 at the first insertion, then, when the count of elements would pass
 * the count of buckets, the first prime of its table at or above twice
 * that). The last covers more than the 2^24 tokens a vocabulary may have. */
static const uint32_t std_buckets[] = {13,     29,     59,      127,     257,     541,     1109,
                                       2357,   5087,   10273,   20753,   42043,   85229,   172933,
                                       351061, 712697, 1447153, 2938679, 5967347, 12117689, 24607243};

/* Relinks the node list s..next into nb buckets as libstdc++'s rehash
 * does: in list order, a node whose bucket is still empty goes to the
 * front of the list, any other right after its bucket's first node.
 * bkt[b] is the node before bucket b's first (s for the front). */
static void std_rehash(const uint64_t *h, int32_t *next, int32_t s, int32_t *bkt, uint32_t nb)
{
    for (uint32_t b = 0; b < nb; b++) bkt[b] = -1;
    int32_t p = next[s];
    uint32_t front_bkt = 0;
    next[s] = -1;
    while (p >= 0) {
        int32_t nx = next[p];
        uint32_t b = (uint32_t)(h[p] % nb);
        if (bkt[b] < 0) {
            next[p] = next[s];
            next[s] = p;
            bkt[b] = s;
            if (next[p] >= 0) bkt[front_bkt] = p;
            front_bkt = b;
        } else {
            next[p] = next[bkt[b]];
            next[bkt[b]] = p;
        }
        p = nx;
    }
}

/* Sorts ids[0..n) into the order llama.cpp's walk over its token_to_id
 * map (std::unordered_map<std::string, llama_token>, every token's text
 * inserted in id order, an empty one as "[EMPTY_<id>]") meets them.
 * libstdc++ keeps all nodes in one list: a new node goes right after its
 * bucket's first node, or to the front of the list when its bucket is
 * empty; a rehash relinks the list (std_rehash). Texts are the file's:
 * the holes of a tokenizer.json as tok_write.c names them. */
static int stdmap_order(const rkm_tokenizer *t, int32_t *ids, int n)
{
    const int32_t nv = t->n_vocab, s = nv;
    uint32_t nb_max = 0;
    for (size_t k = 0; k < RKM_ARRAY_LEN(std_buckets) && !nb_max; k++)
        if (std_buckets[k] >= (uint32_t)nv) nb_max = std_buckets[k];
    uint64_t *h = malloc(sizeof *h * (size_t)nv);
    int32_t *next = malloc(sizeof *next * ((size_t)nv + 1));
    int32_t *bkt = malloc(sizeof *bkt * nb_max);
    if (!h || !next || !bkt || !nb_max) {
        free(h);
        free(next);
        free(bkt);
        return rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
    }
    next[s] = -1;
    uint32_t nb = 0;
    size_t level = 0;
    for (int32_t i = 0; i < nv; i++) {
        const tok_entry *e = &t->tok[i];
        char name[32];
        const char *txt = e->text;
        size_t len = e->text_len;
        if (len == 0) {
            len = (size_t)snprintf(name, sizeof name, t->from_json ? "[PAD%d]" : "[EMPTY_%d]", i);
            txt = name;
        }
        h[i] = std_hash((const unsigned char *)txt, len);
        if ((uint32_t)i == nb) std_rehash(h, next, s, bkt, nb = std_buckets[level++]);
        uint32_t b = (uint32_t)(h[i] % nb);
        if (bkt[b] >= 0) {
            next[i] = next[bkt[b]];
            next[bkt[b]] = i;
        } else {
            next[i] = next[s];
            next[s] = i;
            if (next[i] >= 0) bkt[h[next[i]] % nb] = i;
            bkt[b] = s;
        }
    }
    int k = 0;
    for (int32_t p = next[s]; p >= 0 && k < n; p = next[p])
        for (int j = k; j < n; j++)
            if (ids[j] == p) {
                ids[j] = ids[k];
                ids[k++] = p;
                break;
            }
    free(h);
    free(next);
    free(bkt);
    return 0;
}

/* ------------------------------------------------------------ rules */

/* The text rule of token id, or -1. */
static int text_rule(const rkm_tokenizer *t, int id)
{
    const tok_entry *e = &t->tok[id];
    if (e->text_len < 3 || !memchr("<[_\xe2", e->text[0], 4)) return -1; /* every rule starts so */
    for (size_t k = 0; k < RKM_ARRAY_LEN(text_rules); k++)
        if (strlen(text_rules[k].text) == e->text_len && !memcmp(text_rules[k].text, e->text, e->text_len))
            return (int)k;
    return -1;
}

/* Gives token id a type llama.cpp forces, with what the type means here:
 * control and user-defined tokens are added tokens (matched before the
 * model runs; user-defined ones without parse_special too), normal ones
 * the model's. Every forced text is ASCII or outside GPT-2's byte
 * alphabet, so its internal bytes are its text either way. */
static void force_type(rkm_tokenizer *t, int id, int type)
{
    tok_entry *e = &t->tok[id];
    e->type = (uint8_t)type;
    e->added = type == RKM_TOKEN_CONTROL || type == RKM_TOKEN_USER_DEFINED || type == RKM_TOKEN_UNKNOWN;
    e->special = e->added && type != RKM_TOKEN_USER_DEFINED;
    e->ibytes = e->text;
    e->ibytes_len = e->text_len;
}

/* The id of an EOG token whose text is s, or -1. */
static int eog_find(const rkm_tokenizer *t, const char *s)
{
    size_t n = strlen(s);
    for (int i = 0; i < t->n_vocab; i++)
        if (t->eog[i] && t->tok[i].text_len == n && !memcmp(t->tok[i].text, s, n)) return i;
    return -1;
}

/* Flags still open get the model's and pre-tokenizer's defaults; a
 * pre-tokenizer that forces BOS forces it. */
static void default_flags(rkm_tokenizer *t, const struct model_rule *m, const struct pre_rule *p)
{
    if (t->add_bos < 0) t->add_bos = (m && m->add_bos) || (p && p->add_bos);
    if (t->add_eos < 0) t->add_eos = m && m->add_eos;
    if (t->add_sep < 0) t->add_sep = (m && m->add_sep) || (p && p->add_sep);
    if (p && p->force_bos) t->add_bos = 1;
}

int rkm_tok__special_finish(rkm_tokenizer *t, int force_types)
{
    const struct model_rule *m = model_rule(t->model_name);
    default_flags(t, m, pre_rule(m, t->pre_name));
    /* the tokens some rule names, in id order, and their rules */
    struct hit {
        int32_t id, rule;
    } *hit = NULL;
    int n_hit = 0, cap = 0, rc = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        int k = text_rule(t, i);
        if (k < 0) continue;
        if (n_hit == cap) {
            struct hit *nh = realloc(hit, sizeof *nh * (size_t)(cap = cap ? cap * 2 : 32));
            if (!nh) {
                free(hit);
                return rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
            }
            hit = nh;
        }
        hit[n_hit++] = (struct hit){i, k};
    }
    /* roles the file left unnamed: the first candidate of llama.cpp's walk
     * over its map, so the hits in that order when a role has several */
    int several = 0;
    for (int r = 0; r < RKM_TOK_N_ROLES && !several; r++) {
        int n = 0;
        for (int k = 0; k < n_hit; k++) n += text_rules[hit[k].rule].what >> r & 1;
        several = n > 1 && rkm_tokenizer_special(t, r) < 0;
    }
    if (several) {
        int32_t *ids = malloc(sizeof *ids * (size_t)n_hit);
        for (int k = 0; ids && k < n_hit; k++) ids[k] = hit[k].id;
        rc = ids ? stdmap_order(t, ids, n_hit) : rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
        for (int k = 0; !rc && k < n_hit; k++) hit[k] = (struct hit){ids[k], text_rule(t, ids[k])};
        free(ids);
    }
    for (int r = 0; r < RKM_TOK_N_ROLES && !rc; r++) {
        int *id = rkm_tok__role_id(t, r), k = 0;
        while (*id < 0 && k < n_hit && !(text_rules[hit[k].rule].what >> r & 1)) k++;
        if (*id >= 0 || k == n_hit) continue;
        *id = hit[k].id;
        if (force_types && t->tok[*id].type != RKM_TOKEN_CONTROL) force_type(t, *id, RKM_TOKEN_CONTROL);
    }
    memset(t->eog, 0, (size_t)t->n_vocab);
    for (int k = 3; k < 6; k++) /* FIM pad, repo, separator */
        if (t->fim[k] >= 0) t->eog[t->fim[k]] = 1;
    for (int k = 0; k < n_hit && !rc; k++) {
        uint32_t what = text_rules[hit[k].rule].what;
        int id = hit[k].id;
        if (what & TEXT_EOG) t->eog[id] = 1;
        if (!force_types) continue;
        if ((what & TEXT_EOG) && t->tok[id].type != RKM_TOKEN_CONTROL) force_type(t, id, RKM_TOKEN_CONTROL);
        if (what & TEXT_USER) force_type(t, id, RKM_TOKEN_USER_DEFINED);
    }
    free(hit);
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    if (t->eom >= 0) t->eog[t->eom] = 1;
    for (size_t d = 0; d < RKM_ARRAY_LEN(eog_drops) && !rc; d++) {
        int id = eog_find(t, eog_drops[d].text), with = 0;
        for (int k = 0; id >= 0 && k < 4 && eog_drops[d].with[k][0] && !with; k++)
            with = eog_find(t, eog_drops[d].with[k][0]) >= 0 &&
                   (!eog_drops[d].with[k][1] || eog_find(t, eog_drops[d].with[k][1]) >= 0);
        if (!with) continue;
        t->eog[id] = 0;
        if (force_types) force_type(t, id, eog_drops[d].type);
    }
    return rc;
}

/* ------------------------------------------------------------ GGUF */

/* An id key over a role's default: a value outside the vocabulary keeps
 * the default, as llama.cpp does. */
static void read_id(rkm_tokenizer *t, const rkm_gguf *g, const char *key, int role)
{
    int64_t v;
    if (rkm_gguf_find(g, key) < 0 || rkm_gguf_get_int(g, key, &v) != 0 || v < 0 || v >= t->n_vocab) return;
    *rkm_tok__role_id(t, role) = (int)v;
    t->roles_declared |= 1u << role;
}

int rkm_tok__special_from_gguf(rkm_tokenizer *t, const rkm_gguf *g)
{
    const struct model_rule *m = model_rule(t->model_name);
    if (!m) return rkm_err(RKM_EUNSUPPORTED, "tokenizer: no special-token rules for model '%s'", t->model_name);
    for (int r = 0; r < RKM_TOK_N_ROLES; r++) *rkm_tok__role_id(t, r) = r < 6 && m->id[r] < t->n_vocab ? m->id[r] : -1;
    const struct pre_rule *p = pre_rule(m, m->pre ? m->pre : rkm_gguf_get_str(g, "tokenizer.ggml.pre"));
    t->add_bos = m->add_bos || (p && p->add_bos);
    t->add_eos = m->add_eos;
    t->add_sep = m->add_sep || (p && p->add_sep);
    if (p && p->no_bos) t->bos = -1;
    for (int r = 0; r < RKM_TOK_N_ROLES; r++) read_id(t, g, roles[r].key, r);
    for (size_t k = 0; k < RKM_ARRAY_LEN(old_fim_keys); k++) read_id(t, g, old_fim_keys[k].key, old_fim_keys[k].role);
    static const struct {
        const char *key;
        size_t flag;
        int role;
    } flags[] = {
        {"tokenizer.ggml.add_bos_token", offsetof(rkm_tokenizer, add_bos), RKM_TOK_BOS},
        {"tokenizer.ggml.add_eos_token", offsetof(rkm_tokenizer, add_eos), RKM_TOK_EOS},
        {"tokenizer.ggml.add_sep_token", offsetof(rkm_tokenizer, add_sep), RKM_TOK_SEP},
    };
    for (size_t k = 0; k < RKM_ARRAY_LEN(flags); k++) {
        int *f = (int *)((char *)t + flags[k].flag), v;
        if (rkm_gguf_find(g, flags[k].key) >= 0 && rkm_gguf_get_bool(g, flags[k].key, &v) == 0) *f = v;
        if (p && p->force_bos && flags[k].role == RKM_TOK_BOS) *f = 1;
        if (*f && rkm_tokenizer_special(t, flags[k].role) < 0)
            return rkm_err(RKM_EFORMAT, "tokenizer: %s is true, but %s is not set", flags[k].key,
                           roles[flags[k].role].key);
    }
    return rkm_tok__special_finish(t, 1);
}

void rkm_tok__special_write_gguf(const rkm_tokenizer *t, rkm_gguf_writer *w, int add_bos_always)
{
    for (int r = 0; r < RKM_TOK_N_ROLES; r++) {
        int id = rkm_tokenizer_special(t, r);
        if (id >= 0 && (t->roles_declared >> r & 1)) rkm_gguf_writer_set_u32(w, roles[r].key, (uint32_t)id);
    }
    rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos_always || rkm_tokenizer_add_bos(t));
    rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", rkm_tokenizer_add_eos(t));
    if (rkm_tokenizer_add_sep(t)) rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_sep_token", 1);
}
