/*
 * tok_vocab.c - the token table of a tokenizer: the string storage (one
 * rkm_arena), the lookup maps (internal bytes -> id, id pair -> merge),
 * the added-token tries, GPT-2's byte-level alphabet, the construction
 * steps both loaders share (new, set, finish, merges), the free, and the
 * getters.
 *
 * Threads: construction runs on the loading thread; afterwards the table
 * is read-only and shared (the byte-level alphabet is built once through
 * pthread_once). Ownership: the tokenizer owns every string, map and
 * trie; rkm_tokenizer_free releases them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"

/* ------------------------------------------------------------ maps */

static int str_map_init(str_map *m, size_t n)
{
    size_t cap = 16;
    while (cap < n * 2 + 16) cap <<= 1;
    m->slot = malloc(cap * sizeof *m->slot);
    if (!m->slot) return RKM_ENOMEM;
    for (size_t i = 0; i < cap; i++) m->slot[i] = (str_slot){-1, 0};
    m->mask = cap - 1;
    return 0;
}


/* Inserts id under its internal bytes; an existing entry is replaced when
 * replace is set (added tokens override the base vocabulary, as in the
 * reference), else kept (the first id of duplicate texts wins). */
static void str_map_put(rkm_tokenizer *t, int32_t id, int replace)
{
    const tok_entry *e = &t->tok[id];
    uint64_t h = rkm_tok__hash_bytes(e->ibytes, e->ibytes_len);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = h & t->map.mask;
    for (;;) {
        str_slot *sl = &t->map.slot[i];
        if (sl->id < 0) {
            *sl = (str_slot){id, tag};
            return;
        }
        const tok_entry *c = &t->tok[sl->id];
        if (sl->tag == tag && c->ibytes_len == e->ibytes_len && memcmp(c->ibytes, e->ibytes, e->ibytes_len) == 0) {
            if (replace) sl->id = id;
            return;
        }
        i = (i + 1) & t->map.mask;
    }
}

int rkm_tok__pair_map_init(pair_map *m, size_t n)
{
    size_t cap = 16;
    while (cap < n * 2 + 16) cap <<= 1;
    m->slot = calloc(cap, sizeof *m->slot);
    if (!m->slot) return RKM_ENOMEM;
    m->mask = cap - 1;
    m->n = 0;
    return 0;
}

static void pair_map_free(pair_map *m) { free(m->slot); }

/* Later merges of the same pair overwrite earlier ones (as the reference
 * builds its rank map). */
static void pair_map_put(pair_map *m, int32_t l, int32_t r, int32_t rank, int32_t result)
{
    uint64_t k = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
    size_t i = rkm_tok__hash_u64(k) & m->mask;
    while (m->slot[i].key && m->slot[i].key != k) i = (i + 1) & m->mask;
    if (!m->slot[i].key) m->n++;
    m->slot[i] = (pair_slot){k, rank, result};
}
/* ------------------------------------------------------------ trie */

static int trie_add(trie *tr, const char *s, size_t n, int32_t token)
{
    if (tr->count == 0) {
        for (int b = 0; b < 256; b++) tr->root[b] = -1;
        tr->cap = 64;
        tr->n = malloc(tr->cap * sizeof *tr->n);
        if (!tr->n) return RKM_ENOMEM;
        tr->n[0] = (trie_node){-1, -1, -1, 0};
        tr->count = 1;
    }
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t c = tr->n[node].child;
        while (c >= 0 && tr->n[c].byte != b) c = tr->n[c].next;
        if (c < 0) {
            if (tr->count == tr->cap) {
                trie_node *nn = realloc(tr->n, (size_t)tr->cap * 2 * sizeof *nn);
                if (!nn) return RKM_ENOMEM;
                tr->n = nn;
                tr->cap *= 2;
            }
            c = tr->count++;
            tr->n[c] = (trie_node){-1, tr->n[node].child, -1, b};
            tr->n[node].child = c;
            if (node == 0) tr->root[b] = c;
        }
        node = c;
    }
    if (tr->n[node].token < 0) tr->n[node].token = token;
    return 0;
}
/* ------------------------------------------------------ byte-level map */

/* GPT-2's reversible byte <-> printable code point mapping: printable
 * Latin-1 bytes map to themselves, the other 68 bytes to U+0100.. in
 * order. */
static uint32_t byte_to_cp[256];
static int16_t cp_to_byte[324]; /* code points < 0x144 */

static void byte_level_init(void)
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        byte_to_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
    for (int i = 0; i < 324; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) cp_to_byte[byte_to_cp[b]] = (int16_t)b;
}

/* Decodes a byte-level token text into raw bytes (out: room for n bytes);
 * returns the length, or -1 if a character is outside the 256-symbol
 * alphabet (then the text is not byte-level encoded). */
static long byte_level_decode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = rkm_utf8_decode(s + i, n - i, &cp);
        if (l == 0 || cp >= 324 || cp_to_byte[cp] < 0) return -1;
        out[o++] = (char)cp_to_byte[cp];
        i += (size_t)l;
    }
    return (long)o;
}

size_t rkm_tok__byte_level_encode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)rkm_utf8_encode(byte_to_cp[(uint8_t)s[i]], out + o);
    return o;
}

/* ------------------------------------------------------ construction */

rkm_tokenizer *rkm_tok__new(int n_vocab)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, byte_level_init);
    rkm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n_vocab = n_vocab;
    t->tok = calloc((size_t)(n_vocab > 0 ? n_vocab : 1), sizeof *t->tok);
    t->eog = calloc((size_t)(n_vocab > 0 ? n_vocab : 1), 1);
    if (!t->tok || !t->eog) {
        free(t->tok);
        free(t->eog);
        free(t);
        return NULL;
    }
    for (int r = 0; r < RKM_TOK_N_ROLES; r++) *rkm_tok__role_id(t, r) = -1;
    t->add_bos = t->add_eos = t->add_sep = -1; /* the loader decides, or tok_special.c's defaults */
    for (int i = 0; i < 256; i++) t->byte_tok[i] = -1;
    return t;
}

void rkm_tokenizer_free(rkm_tokenizer *t)
{
    if (!t) return;
    rkm_arena_free(&t->strings);
    free(t->tok);
    free(t->eog);
    free(t->map.slot);
    pair_map_free(&t->merges);
    free(t->merge_list);
    free(t->trie_raw.n);
    free(t->trie_norm.n);
    rkm_tok__split_free(t);
    for (int i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
        rkm_charsmap_free(t->norm[i].cmap);
    }
    free(t->chat_template);
    free(t->uscore);
    free(t);
}

/* Sets token id from its file text. Byte-level vocabularies store normal
 * tokens in the GPT-2 byte alphabet; added/control tokens are plain text. */
int rkm_tok__set(rkm_tokenizer *t, int id, const char *s, size_t n, float score, int type, int added)
{
    tok_entry *e = &t->tok[id];
    if (rkm_utf8_valid_prefix(s, n) != n)
        return rkm_err(RKM_EFORMAT, "tokenizer: the text of token %d is not valid UTF-8 (byte %zu)", id,
                       rkm_utf8_valid_prefix(s, n));
    char *text = rkm_arena_strndup(&t->strings, s, n);
    if (!text) return RKM_ENOMEM;
    e->text = text;
    e->text_len = (uint32_t)n;
    e->ibytes = text;
    e->ibytes_len = (uint32_t)n;
    e->score = score;
    e->type = (uint8_t)type;
    e->added = (uint8_t)added;
    if (t->model == MODEL_BPE_BYTES && !added) {
        char *raw = rkm_arena_alloc(&t->strings, n + 1);
        if (!raw) return RKM_ENOMEM;
        long m = byte_level_decode(s, n, raw);
        if (m >= 0) {
            raw[m] = 0;
            e->ibytes = raw;
            e->ibytes_len = (uint32_t)m;
            if (m == 1 && t->byte_tok[(uint8_t)raw[0]] < 0) t->byte_tok[(uint8_t)raw[0]] = id;
        }
    }
    if (t->model != MODEL_BPE_BYTES && n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>') {
        /* two hex digits exactly ("%2x" would take a sign: <0x-4>) */
        int hi = rkm_hexval(s[3]), lo = rkm_hexval(s[4]);
        unsigned v = (unsigned)(hi * 16 + lo);
        if (hi >= 0 && lo >= 0 && (type == RKM_TOKEN_BYTE || t->from_json) && t->byte_tok[v] < 0) {
            t->byte_tok[v] = id;
            if (t->from_json && type == RKM_TOKEN_NORMAL) e->type = RKM_TOKEN_BYTE;
        }
    }
    return 0;
}

/* After all tokens are set: lookup map, added-token tries. */
int rkm_tok__finish(rkm_tokenizer *t)
{
    int rc = str_map_init(&t->map, (size_t)t->n_vocab);
    if (rc) return rc;
    for (int i = 0; i < t->n_vocab; i++) {
        if (!t->tok[i].text) { /* a hole in the id space */
            t->tok[i].text = t->tok[i].ibytes = "";
            t->tok[i].type = RKM_TOKEN_UNUSED;
            continue;
        }
        if (!t->tok[i].added) str_map_put(t, i, 0);
    }
    for (int i = 0; i < t->n_vocab; i++) {
        tok_entry *e = &t->tok[i];
        if (!e->added || e->text_len == 0) continue;
        str_map_put(t, i, 1);
        trie *tr = e->normalized && t->has_normalizer ? &t->trie_norm : &t->trie_raw;
        if ((rc = trie_add(tr, e->text, e->text_len, i))) return rc;
    }
    return 0;
}

int rkm_tok__add_merge(rkm_tokenizer *t, const char *a, size_t an, const char *b, size_t bn, int rank)
{
    /* Merge texts are in the vocabulary's own spelling; look them up by
     * internal bytes. */
    char stack[512];
    char *buf = an + bn + 2 <= sizeof stack ? stack : malloc(an + bn + 2);
    if (!buf) return RKM_ENOMEM;
    long la, lb;
    if (t->model == MODEL_BPE_BYTES) {
        la = byte_level_decode(a, an, buf);
        lb = la < 0 ? -1 : byte_level_decode(b, bn, buf + la);
    } else {
        memcpy(buf, a, an);
        memcpy(buf + an, b, bn);
        la = (long)an;
        lb = (long)bn;
    }
    int rc = 0;
    if (la >= 0 && lb >= 0) {
        int l = rkm_tok__lookup(t, buf, (size_t)la);
        int r = rkm_tok__lookup(t, buf + la, (size_t)lb);
        int res = rkm_tok__lookup(t, buf, (size_t)(la + lb));
        /* A merge whose parts or result are not tokens can never apply
         * (symbols are always tokens). Hugging Face refuses such a
         * tokenizer.json; in a GGUF llama.cpp never produces the merge,
         * so it is skipped. */
        if (t->from_json && (l < 0 || r < 0 || res < 0))
            rc = rkm_err(RKM_EFORMAT, "tokenizer.json: merge %d \"%.*s %.*s\" names a token not in the vocabulary",
                         rank, (int)RKM_MIN(an, 60), a, (int)RKM_MIN(bn, 60), b);
        else if (l >= 0 && r >= 0 && res >= 0) {
            pair_map_put(&t->merges, l, r, rank, res);
            t->merge_list[2 * t->n_merges] = l;
            t->merge_list[2 * t->n_merges + 1] = r;
            t->n_merges++;
        }
    } else if (t->from_json) {
        rc = rkm_err(RKM_EFORMAT, "tokenizer.json: merge %d is not in the byte-level alphabet", rank);
    }
    if (buf != stack) free(buf);
    return rc;
}

/* ------------------------------------------------------------ getters */

int rkm_tokenizer_n_vocab(const rkm_tokenizer *t) { return t ? t->n_vocab : 0; }
int rkm_tokenizer_bos(const rkm_tokenizer *t) { return t ? t->bos : -1; }
int rkm_tokenizer_eos(const rkm_tokenizer *t) { return t ? t->eos : -1; }
int rkm_tokenizer_add_bos(const rkm_tokenizer *t) { return t && t->add_bos > 0 && t->bos >= 0; }
int rkm_tokenizer_add_eos(const rkm_tokenizer *t) { return t && t->add_eos > 0 && t->eos >= 0; }
int rkm_tokenizer_add_sep(const rkm_tokenizer *t) { return t && t->add_sep > 0 && t->sep >= 0; }
const char *rkm_tokenizer_chat_template(const rkm_tokenizer *t) { return t ? t->chat_template : NULL; }
const char *rkm_tokenizer_model_name(const rkm_tokenizer *t) { return t ? t->model_name : ""; }
const char *rkm_tokenizer_pre_name(const rkm_tokenizer *t) { return t ? t->pre_name : ""; }

int rkm_tokenizer_is_eog(const rkm_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab && t->eog[id];
}

const char *rkm_tokenizer_token_text(const rkm_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab ? t->tok[id].text : NULL;
}

int rkm_tokenizer_token_type(const rkm_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab ? t->tok[id].type : 0;
}

int rkm_tokenizer_find(const rkm_tokenizer *t, const char *text)
{
    if (!t || !text) return -1;
    size_t n = strlen(text);
    /* added/control tokens are stored under their text */
    int id = rkm_tok__lookup(t, text, n);
    if (id >= 0 && t->tok[id].text_len == n && !memcmp(t->tok[id].text, text, n)) return id;
    for (int i = 0; i < t->n_vocab; i++) /* rare: a byte-level spelling */
        if (t->tok[i].text_len == n && !memcmp(t->tok[i].text, text, n)) return i;
    return -1;
}

