/*
 * tokenizer.c - the tokenizers: loading (GGUF tokenizer.ggml.* metadata,
 * Hugging Face tokenizer.json + tokenizer_config.json), encoding (added
 * tokens, normalizers (Unicode forms, SentencePiece charsmaps via
 * charsmap.c, BERT's), pre-tokenizer splits, BPE / SentencePiece merges,
 * Unigram Viterbi segmentation, WordPiece),
 * decoding (pieces, whole sequences, streaming) and writing back out (GGUF
 * metadata, tokenizer.json).
 *
 * Design:
 *  - Every token has its text as stored in the file and its "internal"
 *    bytes: what it stands for in the text being encoded. For byte-level
 *    BPE the GPT-2 byte-to-unicode mapping is undone at load, so merges and
 *    lookups work on raw bytes and a piece is the internal bytes; for the
 *    SentencePiece styles the internal bytes are the text with its U+2581.
 *  - Pre-tokenizer regexes are not interpreted: each one we know is a
 *    hand-written matcher over code points and category flags, recognised
 *    by its exact pattern text (or by llama.cpp's pre-tokenizer name). An
 *    unknown pattern is RKM_EUNSUPPORTED at load. Matchers are linear: no
 *    alternative rescans more than the run it consumes.
 *  - Merging uses a binary heap of candidate pairs ordered by (rank or
 *    -score, position), so a word of n symbols costs O(n log n); stale heap
 *    entries are detected by the symbol lengths they recorded.
 *
 * Threads: a loaded tokenizer is read-only; encode/decode allocate their
 * scratch per call, so any number of threads may share one tokenizer.
 * Ownership: rkm_tokenizer_free releases the tokenizer and all its strings.
 */
#include "text/tokenizer.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/charsmap.h"
#include "text/unicode.h"
#include "util/common.h"

/* Longest text one encode call accepts: ids are returned as an int count
 * and every byte may become one id. */
#define TOK_MAX_TEXT ((size_t)1 << 30)

/* ------------------------------------------------------------ storage */

/* Bump allocator for the token strings: one tokenizer holds up to a few
 * hundred thousand small strings; one malloc each would cost more than
 * the strings. */
typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    char data[];
} arena_block;

typedef struct {
    arena_block *head;
} arena;

static char *arena_alloc(arena *a, size_t n)
{
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > (1u << 20) ? n : (1u << 20);
        arena_block *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    char *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

static char *arena_dup(arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static void arena_free(arena *a)
{
    while (a->head) {
        arena_block *n = a->head->next;
        free(a->head);
        a->head = n;
    }
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    /* FNV-1a with a final mix: short keys, no dependency on init order. */
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

typedef struct tok_entry {
    const char *text; /* as stored in the file (NUL-terminated) */
    const char *ibytes; /* internal bytes (see the header comment) */
    uint32_t text_len, ibytes_len;
    float score;
    uint8_t type;       /* enum rkm_token_type */
    uint8_t added;      /* an added token (matched before pre-tokenizing) */
    uint8_t special;    /* added + special: only matched with parse_special */
    uint8_t lstrip, rstrip, normalized;
} tok_entry;

/* Open-addressing map from internal bytes to token id. Each slot keeps 32
 * bits of the hash, so a probe that does not match costs no visit to the
 * token table (most SentencePiece pair lookups miss). */
typedef struct {
    int32_t id;   /* -1: empty */
    uint32_t tag; /* high bits of the hash */
} str_slot;

typedef struct {
    str_slot *slot;
    size_t mask;
} str_map;

/* Open-addressing map from a pair of token ids to (rank, result); one
 * 16-byte slot per entry so a lookup touches one cache line. */
typedef struct {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank;
    int32_t result;
} pair_slot;

typedef struct {
    pair_slot *slot;
    size_t mask, n;
} pair_map;

enum pre_kind {
    PRE_NONE,
    PRE_GPT2,     /* 's|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PRE_LLAMA3,   /* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|... */
    PRE_QWEN2,    /* the same with \p{N} single digits */
    PRE_DS3_NUM,  /* \p{N}{1,3} */
    PRE_DS3_CJK,  /* [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+ */
    PRE_DS3_MAIN, /* [!"#...][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|... */
    PRE_FALCON_P, /* [\p{P}\$\+<=>\^~\|`]+ */
    PRE_DIGITS3,  /* [0-9][0-9][0-9] */
    PRE_DSL_NL,   /* [\r\n] */
    PRE_DSL_CASED, /* \s?[A-Za-zµÀ-Ö...]+ (cased letters) */
    PRE_DSL_PUNCT, /* \s?[!-/:-~！-／：-～‘-‟　-。]+ */
    PRE_DSL_WSEND, /* \s+$ */
    PRE_DSL_CJK,   /* [一-龥ࠀ-一가-퟿]+ */
    PRE_NUMS,      /* \p{N}+ */
    PRE_LITERAL,   /* a literal string (Split with a String pattern) */
    PRE_WS_SPLIT,  /* WhitespaceSplit: runs of non-White_Space, whitespace dropped */
    PRE_BERT,      /* BertPreTokenizer: WhitespaceSplit, then each punctuation character alone */
};

enum model_kind {
    MODEL_BPE_BYTES, /* byte-level BPE: symbols are bytes, ranks from merges */
    MODEL_BPE_CHARS, /* BPE over characters (tokenizer.json, byte_fallback) */
    MODEL_SPM,       /* llama.cpp SentencePiece BPE: merges by token score */
    MODEL_UNIGRAM,   /* SentencePiece Unigram (tokenizer.json, GGUF t5): Viterbi over piece scores */
    MODEL_WORDPIECE, /* BERT WordPiece: greedy longest match, "##" continuations */
};

/* Normalizer steps. The Unicode forms are in the order of enum rkm_nf. */
enum norm_op {
    NORM_NFC,
    NORM_NFD,
    NORM_NFKC,
    NORM_NFKD,
    NORM_PREPEND,
    NORM_REPLACE,        /* literal a -> b */
    NORM_REPLACE_SPACES, /* Replace with Regex " {2,}": runs of 2+ spaces -> b */
    NORM_STRIP,          /* flags: 1 left, 2 right (White_Space) */
    NORM_LOWERCASE,      /* per code point, full mapping, no Final_Sigma */
    NORM_BERT,           /* BertNormalizer, flags BERT_* */
    NORM_PRECOMPILED,    /* SentencePiece precompiled_charsmap (cmap) */
    NORM_SPM_WS,         /* llama.cpp UGM whitespace: flags 1 add prefix, 2 merge runs; ' ' -> U+2581 */
};

enum { BERT_CLEAN = 1, BERT_CHINESE = 2, BERT_STRIP_ACCENTS = 4, BERT_LOWER = 8 };

typedef struct norm_step {
    int op;
    char *a, *b; /* PREPEND: a; REPLACE: a -> b; REPLACE_SPACES: b */
    size_t a_len, b_len;
    int flags;
    rkm_charsmap *cmap; /* PRECOMPILED */
} norm_step;

#define MAX_SPLITS 8
#define MAX_NORMS 8

typedef struct split_step {
    int kind;        /* enum pre_kind */
    int removed;     /* literal split: drop the delimiters */
    char *lit;       /* PRE_LITERAL */
    size_t lit_len;
} split_step;

/* Byte trie over added-token texts (leftmost-longest matching). */
typedef struct trie_node {
    int32_t child;  /* first child or -1 */
    int32_t next;   /* next sibling or -1 */
    int32_t token;  /* token ending here or -1 */
    uint8_t byte;
} trie_node;

typedef struct trie {
    trie_node *n;
    int count, cap;
    int32_t root[256]; /* the root's child per byte (-1: none), the hot path */
} trie;

struct rkm_tokenizer {
    int model;            /* enum model_kind */
    int n_vocab;
    tok_entry *tok;
    arena strings;
    str_map map;
    pair_map merges;
    int32_t *merge_list;  /* n_merges pairs (left, right) in rank order, for writing */
    int n_merges;
    int32_t byte_tok[256]; /* token of each single byte (byte symbol or <0xXX>), -1 */

    split_step split[MAX_SPLITS];
    int n_split;
    int byte_level_regex; /* ByteLevel pre-tokenizer with use_regex (GPT-2 split) */
    int add_prefix_space; /* ByteLevel add_prefix_space */
    int metaspace;        /* Metaspace pre-tokenizer present */
    char metaspace_rep[8];
    int metaspace_prepend; /* 0 never, 1 always, 2 first */
    int metaspace_split;  /* Metaspace "split": each replacement starts a word */
    int metaspace_at;     /* split steps that run before the Metaspace (WhitespaceSplit first, as T5) */
    norm_step norm[MAX_NORMS];
    int n_norm;
    int has_normalizer;
    int ignore_merges;
    int byte_fallback;
    int fuse_unk;         /* consecutive <unk> of one section become one */
    int add_space_prefix; /* llama.cpp SPM: ' ' before the first fragment */
    int strip_leading_space; /* decoder drops one leading space */
    /* Unigram: piece scores as the file gives them (double, as the
     * references sum them), the penalty score of an unknown character
     * (lowest score - 10), how many ids are model pieces (the lattice's
     * vocabulary) and the longest piece in bytes. */
    double *uscore;
    double unk_score;
    int n_pieces;
    int max_piece_bytes;
    int ugm_gguf; /* from GGUF: control/unknown tokens stay out of the lattice */
    /* WordPiece: continuation prefix ("##"), words longer than
     * wp_max_chars characters are unk, longest token (bytes); decoder
     * prefix and clean-up flag. */
    char wp_prefix[32];
    int wp_max_chars;
    int wp_max_bytes;
    char wp_dec_prefix[32];
    int wp_cleanup;

    int unk, bos, eos, eot, eom, pad;
    int add_bos, add_eos;
    uint8_t *eog;         /* per id */
    trie trie_raw, trie_norm; /* added tokens matched before / after normalizing */
    char *chat_template;
    char model_name[16];
    char pre_name[32];
    int from_json;
};

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

static int str_map_get(const rkm_tokenizer *t, const char *s, size_t n)
{
    uint64_t h = hash_bytes(s, n);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = h & t->map.mask;
    for (;;) {
        str_slot sl = t->map.slot[i];
        if (sl.id < 0) return -1;
        if (sl.tag == tag) {
            const tok_entry *e = &t->tok[sl.id];
            if (e->ibytes_len == n && memcmp(e->ibytes, s, n) == 0) return sl.id;
        }
        i = (i + 1) & t->map.mask;
    }
}

/* Inserts id under its internal bytes; an existing entry is replaced when
 * replace is set (added tokens override the base vocabulary, as in the
 * reference), else kept (the first id of duplicate texts wins). */
static void str_map_put(rkm_tokenizer *t, int32_t id, int replace)
{
    const tok_entry *e = &t->tok[id];
    uint64_t h = hash_bytes(e->ibytes, e->ibytes_len);
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

static int pair_map_init(pair_map *m, size_t n)
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
    size_t i = hash_u64(k) & m->mask;
    while (m->slot[i].key && m->slot[i].key != k) i = (i + 1) & m->mask;
    if (!m->slot[i].key) m->n++;
    m->slot[i] = (pair_slot){k, rank, result};
}

static int pair_map_get(const pair_map *m, int32_t l, int32_t r, int32_t *result)
{
    if (!m->slot) return -1;
    uint64_t k = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
    size_t i = hash_u64(k) & m->mask;
    while (m->slot[i].key) {
        if (m->slot[i].key == k) {
            *result = m->slot[i].result;
            return m->slot[i].rank;
        }
        i = (i + 1) & m->mask;
    }
    return -1;
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

/* Longest allowed added token starting at s[0..n); returns its length (0:
 * none) and its id in *id. */
static size_t trie_match(const rkm_tokenizer *t, const trie *tr, const char *s, size_t n,
                         int parse_special, int32_t *id)
{
    if (tr->count == 0 || tr->root[(uint8_t)s[0]] < 0) return 0;
    int32_t node = 0;
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t c = tr->n[node].child;
        while (c >= 0 && tr->n[c].byte != b) c = tr->n[c].next;
        if (c < 0) break;
        node = c;
        int32_t tk = tr->n[node].token;
        if (tk >= 0 && (parse_special || !t->tok[tk].special)) {
            best = i + 1;
            *id = tk;
        }
    }
    return best;
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

static size_t byte_level_encode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)rkm_utf8_encode(byte_to_cp[(uint8_t)s[i]], out + o);
    return o;
}

/* ------------------------------------------------------ construction */

/* The pre-tokenizer regexes we implement, exactly as tokenizer.json
 * spells them. */
static const char RE_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_GPT2_NOTAIL[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
static const char RE_DS3_NUM[] = "\\p{N}{1,3}";
static const char RE_DS3_CJK[] = "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+";
static const char RE_DS3_MAIN[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

static const struct {
    const char *re;
    int kind;
} known_regex[] = {
    {RE_LLAMA3, PRE_LLAMA3},     {RE_QWEN2, PRE_QWEN2},     {RE_GPT2, PRE_GPT2},
    {RE_GPT2_NOTAIL, PRE_GPT2},  {RE_DS3_NUM, PRE_DS3_NUM}, {RE_DS3_CJK, PRE_DS3_CJK},
    {RE_DS3_MAIN, PRE_DS3_MAIN},
};

/* llama.cpp's tokenizer.ggml.pre names and the splits each one means. */
static const struct {
    const char *name;
    int splits[6];
    int ignore_merges;
} known_pre[] = {
    {"gpt-2", {PRE_GPT2}, 0},
    {"gpt2", {PRE_GPT2}, 0},
    {"phi-2", {PRE_GPT2}, 0},
    {"olmo", {PRE_GPT2}, 0},
    {"mpt", {PRE_GPT2}, 0},
    {"jais", {PRE_GPT2}, 0},
    {"roberta-bpe", {PRE_GPT2}, 0},
    {"gpt-neox", {PRE_GPT2}, 0},
    {"llama-bpe", {PRE_LLAMA3}, 1},
    {"llama3", {PRE_LLAMA3}, 1},
    {"dbrx", {PRE_LLAMA3}, 0},
    {"smaug-bpe", {PRE_LLAMA3}, 0},
    {"qwen2", {PRE_QWEN2}, 0},
    {"deepseek-r1-qwen", {PRE_QWEN2}, 0},
    {"deepseek-v3", {PRE_DS3_NUM, PRE_DS3_CJK, PRE_DS3_MAIN}, 0},
    {"falcon", {PRE_FALCON_P, PRE_GPT2, PRE_DIGITS3}, 0},
    {"deepseek-llm",
     {PRE_DSL_NL, PRE_DSL_CASED, PRE_DSL_PUNCT, PRE_DSL_WSEND, PRE_DSL_CJK, PRE_NUMS},
     0},
};

static rkm_tokenizer *tok_new(int n_vocab)
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
    t->unk = t->bos = t->eos = t->eot = t->eom = t->pad = -1;
    for (int i = 0; i < 256; i++) t->byte_tok[i] = -1;
    return t;
}

void rkm_tokenizer_free(rkm_tokenizer *t)
{
    if (!t) return;
    arena_free(&t->strings);
    free(t->tok);
    free(t->eog);
    free(t->map.slot);
    pair_map_free(&t->merges);
    free(t->merge_list);
    free(t->trie_raw.n);
    free(t->trie_norm.n);
    for (int i = 0; i < t->n_split; i++) free(t->split[i].lit);
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
static int tok_set(rkm_tokenizer *t, int id, const char *s, size_t n, float score, int type, int added)
{
    tok_entry *e = &t->tok[id];
    char *text = arena_dup(&t->strings, s, n);
    if (!text) return RKM_ENOMEM;
    e->text = text;
    e->text_len = (uint32_t)n;
    e->ibytes = text;
    e->ibytes_len = (uint32_t)n;
    e->score = score;
    e->type = (uint8_t)type;
    e->added = (uint8_t)added;
    if (t->model == MODEL_BPE_BYTES && !added) {
        char *raw = arena_alloc(&t->strings, n + 1);
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
        unsigned v;
        if (sscanf(s + 3, "%2x", &v) == 1 && (type == RKM_TOKEN_BYTE || t->from_json) && t->byte_tok[v] < 0) {
            t->byte_tok[v] = id;
            if (t->from_json && type == RKM_TOKEN_NORMAL) e->type = RKM_TOKEN_BYTE;
        }
    }
    return 0;
}

static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "<|end_of_text|>", "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>",
    "<|return|>", "<|call|>", "</s>", "<eos>",
};

/* After all tokens are set: lookup map, added-token tries, EOG set. */
static int tok_finish(rkm_tokenizer *t)
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
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    if (t->eom >= 0) t->eog[t->eom] = 1;
    for (size_t k = 0; k < RKM_ARRAY_LEN(eog_texts); k++) {
        int id = rkm_tokenizer_find(t, eog_texts[k]);
        if (id >= 0 && (t->tok[id].added || t->tok[id].type == RKM_TOKEN_CONTROL)) t->eog[id] = 1;
    }
    return 0;
}

static int add_merge(rkm_tokenizer *t, const char *a, size_t an, const char *b, size_t bn, int rank)
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
        int l = str_map_get(t, buf, (size_t)la);
        int r = str_map_get(t, buf + la, (size_t)lb);
        int res = str_map_get(t, buf, (size_t)(la + lb));
        /* A merge whose parts or result are not tokens can never apply
         * (symbols are always tokens): skip it, as the reference would
         * never produce it. */
        if (l >= 0 && r >= 0 && res >= 0) {
            pair_map_put(&t->merges, l, r, rank, res);
            t->merge_list[2 * t->n_merges] = l;
            t->merge_list[2 * t->n_merges + 1] = r;
            t->n_merges++;
        }
    }
    if (buf != stack) free(buf);
    return rc;
}

static int set_pre_by_name(rkm_tokenizer *t, const char *name)
{
    for (size_t i = 0; i < RKM_ARRAY_LEN(known_pre); i++) {
        if (strcmp(known_pre[i].name, name) != 0) continue;
        t->n_split = 0;
        for (int k = 0; k < 6 && known_pre[i].splits[k]; k++) t->split[t->n_split++].kind = known_pre[i].splits[k];
        t->ignore_merges = known_pre[i].ignore_merges;
        snprintf(t->pre_name, sizeof t->pre_name, "%s", name);
        return 0;
    }
    return rkm_err(RKM_EUNSUPPORTED, "tokenizer: unsupported pre-tokenizer '%s'", name);
}

/* ------------------------------------------------------------ GGUF */

static int gguf_id(const rkm_gguf *g, const char *key, int n_vocab)
{
    int64_t v;
    if (rkm_gguf_get_int(g, key, &v) != 0) return -1;
    return v >= 0 && v < n_vocab ? (int)v : -1;
}

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
    if (kind == MODEL_BPE_BYTES && ime < 0) {
        rkm_err(RKM_EFORMAT, "tokenizer: gpt2 tokenizer without tokenizer.ggml.merges");
        return NULL;
    }
    t = tok_new((int)n);
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
        int type = ity >= 0 ? (int)rkm_gguf_arr_int(g, ity, i) : RKM_TOKEN_NORMAL;
        if (type < RKM_TOKEN_NORMAL || type > RKM_TOKEN_BYTE) type = RKM_TOKEN_NORMAL;
        float score = isc >= 0 ? (float)rkm_gguf_arr_float(g, isc, i) : 0.0f;
        int added = type == RKM_TOKEN_CONTROL || type == RKM_TOKEN_USER_DEFINED || type == RKM_TOKEN_UNKNOWN;
        if ((rc = tok_set(t, (int)i, s, len, score, type, added))) goto fail_rc;
        t->tok[i].special = (uint8_t)(added && type != RKM_TOKEN_USER_DEFINED);
    }
    t->unk = gguf_id(g, "tokenizer.ggml.unknown_token_id", (int)n);
    t->bos = gguf_id(g, "tokenizer.ggml.bos_token_id", (int)n);
    t->eos = gguf_id(g, "tokenizer.ggml.eos_token_id", (int)n);
    t->eot = gguf_id(g, "tokenizer.ggml.eot_token_id", (int)n);
    t->eom = gguf_id(g, "tokenizer.ggml.eom_token_id", (int)n);
    t->pad = gguf_id(g, "tokenizer.ggml.padding_token_id", (int)n);
    if (kind == MODEL_SPM) {
        t->add_bos = 1;
        t->add_space_prefix = 1;
        t->strip_leading_space = 1;
        snprintf(t->pre_name, sizeof t->pre_name, "default");
    }
    int v;
    if (rkm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &v) == 0) t->add_bos = v;
    if (rkm_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &v) == 0) t->add_eos = v;
    if (rkm_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &v) == 0) {
        t->add_space_prefix = v;
        t->strip_leading_space = v;
    }
    if (kind == MODEL_BPE_BYTES) {
        const char *pre = rkm_gguf_get_str(g, "tokenizer.ggml.pre");
        if ((rc = set_pre_by_name(t, pre ? pre : "gpt-2"))) goto fail_rc;
    }
    if (kind == MODEL_UNIGRAM && (rc = ugm_from_gguf(t, g, isc))) goto fail_rc;
    const char *tmpl = rkm_gguf_get_str(g, "tokenizer.chat_template");
    if (tmpl && !(t->chat_template = strdup(tmpl))) goto oom;
    if ((rc = tok_finish(t))) goto fail_rc;
    if (ime >= 0) {
        uint64_t nm = rkm_gguf_arr_n(g, ime);
        if (nm > (1u << 24)) {
            rkm_err(RKM_EFORMAT, "tokenizer: too many merges");
            goto fail;
        }
        if (pair_map_init(&t->merges, nm) || !(t->merge_list = malloc((nm + 1) * 2 * sizeof(int32_t))))
            goto oom;
        for (uint64_t i = 0; i < nm; i++) {
            size_t len;
            const char *s = rkm_gguf_arr_str(g, ime, i, &len);
            if (!s) continue;
            /* "left right"; the separator is the first space after the
             * first byte (a left part is never empty). */
            const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
            if (!sp) continue;
            if ((rc = add_merge(t, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp - s) - 1, (int)i)))
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

/* ------------------------------------------------------------ JSON */

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

/* Standard base64 (RFC 4648, '=' padding optional, no whitespace) into a
 * malloc'd buffer. RKM_EFORMAT on a bad character or length. */
static int base64_decode(const char *s, unsigned char **out, size_t *out_len)
{
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '=') n--;
    if (n % 4 == 1) return rkm_err(RKM_EFORMAT, "tokenizer.json: bad base64 length");
    unsigned char *o = malloc(n / 4 * 3 + 3);
    if (!o) return RKM_ENOMEM;
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '+'             ? 62
                : c == '/'             ? 63
                                       : -1;
        if (v < 0) {
            free(o);
            return rkm_err(RKM_EFORMAT, "tokenizer.json: bad base64 character at %zu", i);
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (unsigned char)(acc >> bits);
        }
    }
    *out = o;
    *out_len = k;
    return 0;
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
            int rc = base64_decode(cm->valuestring, &blob, &blob_len);
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
            if (t->n_split == MAX_SPLITS) return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: too many splits");
            t->split[t->n_split++].kind = PRE_GPT2;
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
        if (json_bool(p, "invert", 0)) return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: inverted Split");
        if (t->n_split == MAX_SPLITS) return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: too many splits");
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const char *re = json_str(pat, "Regex");
        const char *lit = json_str(pat, "String");
        const char *beh = json_str(p, "behavior");
        split_step *s = &t->split[t->n_split];
        /* The reference treats MergedWith* / Contiguous like Isolated. */
        s->removed = beh && !strcmp(beh, "Removed");
        if (re) {
            for (size_t i = 0; i < RKM_ARRAY_LEN(known_regex); i++)
                if (!strcmp(re, known_regex[i].re)) s->kind = known_regex[i].kind;
            if (!s->kind) return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: unsupported Split regex '%.80s'", re);
            if (s->removed) return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: Removed regex Split");
        } else if (lit && *lit) {
            s->kind = PRE_LITERAL;
            s->lit = strdup(lit);
            s->lit_len = strlen(lit);
            if (!s->lit) return RKM_ENOMEM;
        } else {
            return rkm_err(RKM_EFORMAT, "tokenizer.json: Split without pattern");
        }
        t->n_split++;
        return 0;
    }
    return rkm_err(RKM_EUNSUPPORTED, "tokenizer.json: unsupported pre_tokenizer '%s'", type);
}

/* The pre-tokenizer name llama.cpp would give this split program. */
static void guess_pre_name(rkm_tokenizer *t)
{
    const char *name = "gpt-2";
    if (t->n_split == 1 && t->split[0].kind == PRE_LLAMA3) name = "llama-bpe";
    else if (t->n_split == 1 && t->split[0].kind == PRE_QWEN2) name = "qwen2";
    else if (t->n_split == 3 && t->split[0].kind == PRE_DS3_NUM && t->split[2].kind == PRE_DS3_MAIN)
        name = "deepseek-v3";
    else if (t->model != MODEL_BPE_BYTES) name = "default";
    snprintf(t->pre_name, sizeof t->pre_name, "%s", name);
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
    if (!(t = tok_new(n))) goto oom;
    t->from_json = 1;
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
        t->n_pieces = n_pieces;
        double min_score = INFINITY;
        int id = 0;
        cJSON_ArrayForEach(v, vocab)
        {
            const char *piece = cJSON_GetArrayItem(v, 0)->valuestring;
            double score = cJSON_GetArrayItem(v, 1)->valuedouble;
            size_t pl = strlen(piece);
            if ((rc = tok_set(t, id, piece, pl, (float)score, RKM_TOKEN_NORMAL, 0))) goto fail_rc;
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
            if ((rc = tok_set(t, v->valueint, v->string, vl, 0.0f, RKM_TOKEN_NORMAL, 0))) goto fail_rc;
            if (vl > (size_t)t->wp_max_bytes) t->wp_max_bytes = vl > (1 << 20) ? 1 << 20 : (int)vl;
        }
    }
    cJSON_ArrayForEach(v, added)
    {
        int id = cJSON_GetObjectItemCaseSensitive(v, "id")->valueint;
        const char *content = json_str(v, "content");
        int special = json_bool(v, "special", 0);
        if ((rc = tok_set(t, id, content, strlen(content), 0.0f,
                          special ? RKM_TOKEN_CONTROL : RKM_TOKEN_USER_DEFINED, 1)))
            goto fail_rc;
        tok_entry *e = &t->tok[id];
        e->special = (uint8_t)special;
        e->lstrip = (uint8_t)json_bool(v, "lstrip", 0);
        e->rstrip = (uint8_t)json_bool(v, "rstrip", 0);
        e->normalized = (uint8_t)json_bool(v, "normalized", !special);
    }
    const char *unk = json_str(model, "unk_token");
    if ((rc = tok_finish(t))) goto fail_rc;
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
    if (pair_map_init(&t->merges, (size_t)nm) || !(t->merge_list = malloc(((size_t)nm + 1) * 2 * sizeof(int32_t))))
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
            if ((rc = add_merge(t, s, (size_t)(sp - s), sp + 1, bn, rank))) goto fail_rc;
        } else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2 && cJSON_IsString(cJSON_GetArrayItem(v, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(v, 1))) {
            const char *a = cJSON_GetArrayItem(v, 0)->valuestring, *b = cJSON_GetArrayItem(v, 1)->valuestring;
            if ((rc = add_merge(t, a, strlen(a), b, strlen(b), rank))) goto fail_rc;
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
    guess_pre_name(t);
    /* Special tokens and flags from tokenizer_config.json, else from the
     * post-processor (a TemplateProcessing that starts with a token). */
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if (json_type_is(post, "TemplateProcessing")) {
        const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(post, "single"), 0);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(first, "SpecialToken");
        const char *id = json_str(st, "id");
        if (id) {
            t->bos = json_token_id(t, id);
            t->add_bos = t->bos >= 0;
        }
    } else if (json_type_is(post, "BertProcessing") || json_type_is(post, "RobertaProcessing")) {
        /* "cls": ["[CLS]", 101], "sep": ["[SEP]", 102] */
        const cJSON *cls = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(post, "cls"), 0);
        const cJSON *sep = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(post, "sep"), 0);
        if (cJSON_IsString(cls)) t->bos = json_token_id(t, cls->valuestring);
        if (cJSON_IsString(sep)) t->eos = json_token_id(t, sep->valuestring);
        t->add_bos = t->bos >= 0;
        t->add_eos = t->eos >= 0;
    }
    if (cfg) {
        const char *s;
        if ((s = json_str(cfg, "bos_token"))) t->bos = json_token_id(t, s);
        if ((s = json_str(cfg, "eos_token"))) t->eos = json_token_id(t, s);
        if ((s = json_str(cfg, "pad_token"))) t->pad = json_token_id(t, s);
        t->add_bos = json_bool(cfg, "add_bos_token", t->add_bos) && t->bos >= 0;
        t->add_eos = json_bool(cfg, "add_eos_token", t->add_eos);
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
    if (t->eos >= 0) t->eog[t->eos] = 1;
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

/* ------------------------------------------------- pre-tokenizer matchers
 *
 * Each matcher returns the length (in code points) of the match at i in a
 * piece of n code points, or 0. c: code points, f: their RKM_UC_* flags.
 * They implement the leftmost-first alternation and greedy quantifiers of
 * the regex they are named after; comments give the alternative.
 */

#define IS_L(k) (f[k] & RKM_UC_L)
#define IS_N(k) (f[k] & RKM_UC_N)
#define IS_WS(k) (f[k] & RKM_UC_WS)
#define IS_NL(k) (c[k] == '\r' || c[k] == '\n')
/* [^\s\p{L}\p{N}] */
#define IS_OTHER(k) (!(f[k] & (RKM_UC_WS | RKM_UC_L | RKM_UC_N)))

static size_t ws_run_end(const uint8_t *f, size_t i, size_t n)
{
    while (i < n && (f[i] & RKM_UC_WS)) i++;
    return i;
}

/* \s+(?!\S)|\s+ at i (i is whitespace). */
static size_t match_ws_tail(const uint8_t *f, size_t i, size_t n, int plain_alt)
{
    size_t e = ws_run_end(f, i, n);
    if (e == n) return e - i;          /* (?!\S) holds at the end */
    if (e - i >= 2) return e - i - 1;  /* back off one so the next is whitespace */
    return plain_alt ? e - i : 0;      /* \s+ */
}

static size_t contraction(const uint32_t *c, size_t i, size_t n, int fold)
{
    /* 's|'t|'re|'ve|'m|'ll|'d, ASCII case-insensitive when fold */
    if (c[i] != '\'' || i + 1 >= n) return 0;
    uint32_t a = c[i + 1], b = i + 2 < n ? c[i + 2] : 0;
    if (fold) {
        if (a >= 'A' && a <= 'Z') a += 32;
        if (b >= 'A' && b <= 'Z') b += 32;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

static size_t m_gpt2(const uint32_t *c, const uint8_t *f, size_t i, size_t n)
{
    size_t k = contraction(c, i, n, 0);
    if (k) return k;
    size_t j = i + (c[i] == ' ' && i + 1 < n);
    size_t e = j;
    if (IS_L(j)) { /*  ?\p{L}+ */
        while (e < n && IS_L(e)) e++;
        return e - i;
    }
    if (IS_N(j)) { /*  ?\p{N}+ */
        while (e < n && IS_N(e)) e++;
        return e - i;
    }
    if (IS_OTHER(j)) { /*  ?[^\s\p{L}\p{N}]+ */
        while (e < n && IS_OTHER(e)) e++;
        return e - i;
    }
    if (IS_WS(i)) return match_ws_tail(f, i, n, 1);
    return 0;
}

/* \s*[\r\n]+ at i (i is whitespace): up to the last newline of the run. */
static size_t match_ws_newline(const uint32_t *c, const uint8_t *f, size_t i, size_t n)
{
    size_t e = ws_run_end(f, i, n);
    for (size_t k = e; k > i; k--)
        if (IS_NL(k - 1)) return k - i;
    return 0;
}

static size_t m_llama3(const uint32_t *c, const uint8_t *f, size_t i, size_t n, int max_digits)
{
    size_t k = contraction(c, i, n, 1);
    if (k) return k;
    size_t e;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (IS_L(i)) {
        for (e = i; e < n && IS_L(e); e++) {}
        return e - i;
    }
    if (!IS_NL(i) && !IS_N(i) && i + 1 < n && IS_L(i + 1)) {
        for (e = i + 1; e < n && IS_L(e); e++) {}
        return e - i;
    }
    /* \p{N}{1,max} */
    if (IS_N(i)) {
        for (e = i; e < n && e - i < (size_t)max_digits && IS_N(e); e++) {}
        return e - i;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t j = i + (c[i] == ' ' && i + 1 < n);
    if (IS_OTHER(j)) {
        for (e = j; e < n && IS_OTHER(e); e++) {}
        while (e < n && IS_NL(e)) e++;
        return e - i;
    }
    if (IS_WS(i)) {
        size_t m = match_ws_newline(c, f, i, n); /* \s*[\r\n]+ */
        return m ? m : match_ws_tail(f, i, n, 1);
    }
    return 0;
}

#define IS_PS(k) (f[k] & (RKM_UC_P | RKM_UC_S))
static int ascii_punct(uint32_t x)
{
    return (x >= 0x21 && x <= 0x2F) || (x >= 0x3A && x <= 0x40) || (x >= 0x5B && x <= 0x60) ||
           (x >= 0x7B && x <= 0x7E);
}
static int ascii_alpha(uint32_t x) { return (x >= 'A' && x <= 'Z') || (x >= 'a' && x <= 'z'); }

static size_t m_ds3_main(const uint32_t *c, const uint8_t *f, size_t i, size_t n)
{
    size_t e;
    /* [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ */
    if (ascii_punct(c[i]) && i + 1 < n && ascii_alpha(c[i + 1])) {
        for (e = i + 1; e < n && ascii_alpha(c[e]); e++) {}
        return e - i;
    }
    /* [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ */
#define IS_LM(k) (f[k] & (RKM_UC_L | RKM_UC_M))
    if (!IS_NL(i) && !(f[i] & (RKM_UC_L | RKM_UC_P | RKM_UC_S)) && i + 1 < n && IS_LM(i + 1)) {
        for (e = i + 1; e < n && IS_LM(e); e++) {}
        return e - i;
    }
    if (IS_LM(i)) {
        for (e = i; e < n && IS_LM(e); e++) {}
        return e - i;
    }
    /*  ?[\p{P}\p{S}]+[\r\n]* */
    size_t j = i + (c[i] == ' ' && i + 1 < n);
    if (IS_PS(j)) {
        for (e = j; e < n && IS_PS(e); e++) {}
        while (e < n && IS_NL(e)) e++;
        return e - i;
    }
    if (IS_WS(i)) {
        size_t m = match_ws_newline(c, f, i, n);
        return m ? m : match_ws_tail(f, i, n, 1);
    }
    return 0;
}

/* Cased letters of llama.cpp's deepseek-llm pattern (ranges as written
 * there: Lu/Ll/Lt of the BMP and a few supplementary blocks). */
static const uint32_t dsl_cased[][2] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t x)
{
    for (size_t i = 0; i < n; i++)
        if (x >= r[i][0] && x <= r[i][1]) return 1;
    return 0;
}

static int dsl_is_cased(uint32_t x) { return in_ranges(dsl_cased, RKM_ARRAY_LEN(dsl_cased), x); }

static int dsl_is_punct(uint32_t x)
{
    static const uint32_t r[][2] = {{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
                                    {0x2018, 0x201F}, {0x3000, 0x3002}};
    return in_ranges(r, RKM_ARRAY_LEN(r), x);
}

static int dsl_is_cjk(uint32_t x)
{
    return (x >= 0x4E00 && x <= 0x9FA5) || (x >= 0x0800 && x <= 0x4E00) || (x >= 0xAC00 && x <= 0xD7FF);
}

static int ds3_is_cjk(uint32_t x)
{
    return (x >= 0x4E00 && x <= 0x9FA5) || (x >= 0x3040 && x <= 0x309F) || (x >= 0x30A0 && x <= 0x30FF);
}

static int falcon_is_p(uint32_t x, unsigned fl)
{
    return (fl & RKM_UC_P) || x == '$' || x == '+' || x == '<' || x == '=' || x == '>' || x == '^' || x == '~' ||
           x == '|' || x == '`';
}

static size_t m_run(const uint32_t *c, const uint8_t *f, size_t i, size_t n, int kind)
{
    size_t e = i;
    switch (kind) {
    case PRE_DS3_NUM:
        while (e < n && e - i < 3 && IS_N(e)) e++;
        return e - i;
    case PRE_DS3_CJK:
        while (e < n && ds3_is_cjk(c[e])) e++;
        return e - i;
    case PRE_FALCON_P:
        while (e < n && falcon_is_p(c[e], f[e])) e++;
        return e - i;
    case PRE_DIGITS3:
        return i + 3 <= n && c[i] >= '0' && c[i] <= '9' && c[i + 1] >= '0' && c[i + 1] <= '9' && c[i + 2] >= '0' &&
                       c[i + 2] <= '9'
                   ? 3
                   : 0;
    case PRE_DSL_NL:
        return IS_NL(i) ? 1 : 0;
    case PRE_DSL_CASED:
    case PRE_DSL_PUNCT: {
        int (*cls)(uint32_t) = kind == PRE_DSL_CASED ? dsl_is_cased : dsl_is_punct;
        size_t j = i + (IS_WS(i) && i + 1 < n && cls(c[i + 1])); /* \s? */
        for (e = j; e < n && cls(c[e]); e++) {}
        return e > j ? e - i : 0;
    }
    case PRE_DSL_CJK:
        while (e < n && dsl_is_cjk(c[e])) e++;
        return e - i;
    case PRE_NUMS:
        while (e < n && IS_N(e)) e++;
        return e - i;
    }
    return 0;
}

/* ------------------------------------------------------------ encoding */

typedef struct { size_t s, e; } span;

typedef struct {
    span *v;
    size_t n, cap;
} span_vec;

static int span_push(span_vec *sv, size_t s, size_t e)
{
    if (s >= e) return 0;
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 64;
        span *nv = realloc(sv->v, cap * sizeof *nv);
        if (!nv) return RKM_ENOMEM;
        sv->v = nv;
        sv->cap = cap;
    }
    sv->v[sv->n++] = (span){s, e};
    return 0;
}

typedef struct {
    int32_t *v;
    size_t n, cap;
} id_vec;

static int id_push(id_vec *iv, int32_t id)
{
    if (iv->n == iv->cap) {
        size_t cap = iv->cap ? iv->cap * 2 : 256;
        int32_t *nv = realloc(iv->v, cap * sizeof *nv);
        if (!nv) return RKM_ENOMEM;
        iv->v = nv;
        iv->cap = cap;
    }
    iv->v[iv->n++] = id;
    return 0;
}

static int bert_is_punct(uint32_t c, unsigned fl)
{
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E) || (fl & RKM_UC_P);
}

/* Splits one piece [0, n) of code points by one split step, appending the
 * sub-pieces (offset by base) to out: matches and the gaps between them
 * are both kept ("Isolated"). */
static int split_piece(const split_step *st, const uint32_t *c, const uint8_t *f, size_t base, size_t n,
                       span_vec *out)
{
    int rc;
    if (st->kind == PRE_WS_SPLIT || st->kind == PRE_BERT) {
        /* whitespace removed; BERT: each punctuation character (Unicode P*
         * or ASCII punctuation/symbol) a piece of its own */
        for (size_t i = 0; i < n;) {
            if (f[i] & RKM_UC_WS) {
                i++;
                continue;
            }
            size_t j = i;
            if (st->kind == PRE_BERT && bert_is_punct(c[i], f[i])) j++;
            else
                while (j < n && !(f[j] & RKM_UC_WS) && !(st->kind == PRE_BERT && bert_is_punct(c[j], f[j]))) j++;
            if ((rc = span_push(out, base + i, base + j))) return rc;
            i = j;
        }
        return 0;
    }
    if (st->kind == PRE_DSL_WSEND) { /* \s+$: the trailing whitespace run */
        size_t k = n;
        while (k > 0 && (f[k - 1] & RKM_UC_WS)) k--;
        if ((rc = span_push(out, base, base + k))) return rc;
        return span_push(out, base + k, base + n);
    }
    size_t gap = 0, i = 0;
    while (i < n) {
        size_t m;
        switch (st->kind) {
        case PRE_GPT2: m = m_gpt2(c, f, i, n); break;
        case PRE_LLAMA3: m = m_llama3(c, f, i, n, 3); break;
        case PRE_QWEN2: m = m_llama3(c, f, i, n, 1); break;
        case PRE_DS3_MAIN: m = m_ds3_main(c, f, i, n); break;
        default: m = m_run(c, f, i, n, st->kind); break;
        }
        if (m == 0) {
            i++;
            continue;
        }
        if ((rc = span_push(out, base + gap, base + i))) return rc;
        if ((rc = span_push(out, base + i, base + i + m))) return rc;
        i += m;
        gap = i;
    }
    return span_push(out, base + gap, base + n);
}

/* A growable byte buffer. */
typedef struct {
    char *p;
    size_t n, cap;
} buf_t;

static int buf_put(buf_t *b, const char *s, size_t n)
{
    if (n > TOK_MAX_TEXT * 8) return RKM_ENOMEM; /* cannot happen; bounds the copy */
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) return RKM_ENOMEM;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

static int replace_all(const char *s, size_t n, const char *a, size_t an, const char *b, size_t bn, buf_t *out)
{
    int rc;
    size_t i = 0, last = 0;
    while (i + an <= n) {
        if (memcmp(s + i, a, an) == 0) {
            if ((rc = buf_put(out, s + last, i - last)) || (rc = buf_put(out, b, bn))) return rc;
            i += an;
            last = i;
        } else {
            i++;
        }
    }
    return buf_put(out, s + last, n - last);
}

/* Appends code point c as UTF-8. */
static int buf_cp(buf_t *b, uint32_t c)
{
    char u[4];
    return buf_put(b, u, (size_t)rkm_utf8_encode(c, u));
}

/* Runs of two or more spaces -> b (Replace with the Regex " {2,}"). */
static int replace_space_runs(const char *s, size_t n, const char *b, size_t bn, buf_t *out)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        size_t j = i;
        while (j < n && s[j] == ' ') j++;
        if (j - i >= 2) rc = buf_put(out, b, bn);
        else if (j > i) rc = buf_put(out, " ", 1);
        else {
            while (j < n && s[j] != ' ') j++;
            rc = buf_put(out, s + i, j - i);
        }
        i = j;
    }
    return rc ? rc : buf_put(out, "", 0);
}

/* Strip: drops White_Space at the start (flags & 1) and/or end (flags & 2). */
static int strip_ws(const char *s, size_t n, int flags, buf_t *out)
{
    size_t a = 0, b = n;
    while ((flags & 1) && a < b) {
        uint32_t c;
        int l = rkm_utf8_decode(s + a, b - a, &c);
        if (!l || !(rkm_unicode_flags(c) & RKM_UC_WS)) break;
        a += (size_t)l;
    }
    if (flags & 2)
        while (b > a) {
            size_t k = b - 1;
            while (k > a && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
            uint32_t c;
            if (!rkm_utf8_decode(s + k, b - k, &c) || !(rkm_unicode_flags(c) & RKM_UC_WS)) break;
            b = k;
        }
    return buf_put(out, s + a, b - a);
}

static int lowercase(const char *s, size_t n, buf_t *out)
{
    int rc = buf_put(out, "", 0);
    for (size_t i = 0; i < n && !rc;) {
        size_t j = i;
        while (j < n && (uint8_t)s[j] < 0x80 && !(s[j] >= 'A' && s[j] <= 'Z')) j++;
        if (j > i) { /* ASCII without capitals: as is */
            rc = buf_put(out, s + i, j - i);
            i = j;
            continue;
        }
        uint32_t c, lo[2];
        int l = rkm_utf8_decode(s + i, n - i, &c);
        if (l == 0) {
            c = 0xFFFD;
            l = 1;
        }
        int k = rkm_unicode_lower(c, lo);
        for (int q = 0; q < k && !rc; q++) rc = buf_cp(out, lo[q]);
        i += (size_t)l;
    }
    return rc;
}

/* The CJK ideograph blocks BERT pads with spaces (its own list, kept by
 * every implementation). */
static int bert_is_chinese(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* BertNormalizer, in the Rust reference's order: clean_text (drop NUL,
 * U+FFFD and control/format/unassigned/private-use characters except
 * \t\n\r; whitespace -> ' '), CJK ideographs padded with spaces, accents
 * stripped (NFD, then nonspacing marks dropped), lowercase. */
static int bert_normalize(const char *s, size_t n, int flags, buf_t *out)
{
    buf_t a = {0};
    int rc = buf_put(&a, "", 0);
    for (size_t i = 0; i < n && !rc;) {
        uint32_t c;
        int l = rkm_utf8_decode(s + i, n - i, &c);
        if (l == 0) {
            c = 0xFFFD;
            l = 1;
        }
        i += (size_t)l;
        unsigned fl = rkm_unicode_flags(c);
        int ws = (fl & RKM_UC_WS) || c == '\t' || c == '\n' || c == '\r';
        if (flags & BERT_CLEAN) {
            if (c == 0 || c == 0xFFFD || ((fl & RKM_UC_C) && c != '\t' && c != '\n' && c != '\r')) continue;
            if (ws) c = ' ';
        }
        if ((flags & BERT_CHINESE) && bert_is_chinese(c)) {
            if (!(rc = buf_put(&a, " ", 1)) && !(rc = buf_cp(&a, c))) rc = buf_put(&a, " ", 1);
        } else {
            rc = buf_cp(&a, c);
        }
    }
    if (!rc && (flags & BERT_STRIP_ACCENTS)) {
        size_t dn;
        char *d = rkm_unicode_normalize(a.p, a.n, RKM_NF_NFD, &dn);
        if (!d) rc = RKM_ENOMEM;
        size_t w = 0;
        for (size_t i = 0; !rc && i < dn;) {
            uint32_t c;
            int l = rkm_utf8_decode(d + i, dn - i, &c);
            if (l == 0) l = 1;
            if (!rkm_unicode_is_mn(c)) memmove(d + w, d + i, (size_t)l), w += (size_t)l;
            i += (size_t)l;
        }
        if (!rc) {
            free(a.p);
            a.p = d;
            a.n = w;
            a.cap = dn + 1;
            a.p[w] = 0;
        }
    }
    if (!rc && (flags & BERT_LOWER)) rc = lowercase(a.p, a.n, out);
    else if (!rc) rc = buf_put(out, a.p, a.n);
    free(a.p);
    return rc;
}

/* llama.cpp's UGM whitespace handling after the charsmap (its version of
 * SentencePiece's normalizer): spaces become U+2581; with the prefix flag
 * one U+2581 goes before the first non-space character (none if there is
 * none); with the merge flag spaces are dropped and every word (a run of
 * non-spaces) gets one U+2581 before it. */
static int spm_whitespace(const char *s, size_t n, int flags, buf_t *out)
{
    static const char sp[] = "\xe2\x96\x81";
    int prefix = flags & 1, merge = flags & 2;
    int rc = buf_put(out, "", 0), in_word = 0, prefixed = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (s[i] != ' ') {
            if (!in_word) {
                in_word = 1;
                if ((prefix && !prefixed) || merge) {
                    rc = buf_put(out, sp, 3);
                    prefixed = 1;
                }
            }
            if (!rc) rc = buf_put(out, s + i, 1);
        } else {
            in_word = 0;
            if (!merge) rc = buf_put(out, sp, 3);
        }
    }
    return rc;
}

/* Applies the normalizers to s; *res is malloc'd. */
static int normalize(const rkm_tokenizer *t, const char *s, size_t n, buf_t *res)
{
    buf_t cur = {0};
    int rc = buf_put(&cur, s, n);
    for (int k = 0; k < t->n_norm && !rc; k++) {
        const norm_step *st = &t->norm[k];
        buf_t nx = {0};
        switch (st->op) {
        case NORM_NFC:
        case NORM_NFD:
        case NORM_NFKC:
        case NORM_NFKD: {
            size_t len;
            char *p = rkm_unicode_normalize(cur.p, cur.n, st->op - NORM_NFC, &len);
            if (!p) rc = RKM_ENOMEM;
            else {
                nx.p = p;
                nx.n = len;
                nx.cap = len + 1;
            }
            break;
        }
        case NORM_PREPEND:
            if (!(rc = buf_put(&nx, st->a, st->a_len))) rc = buf_put(&nx, cur.p, cur.n);
            break;
        case NORM_REPLACE: rc = replace_all(cur.p, cur.n, st->a, st->a_len, st->b, st->b_len, &nx); break;
        case NORM_REPLACE_SPACES: rc = replace_space_runs(cur.p, cur.n, st->b, st->b_len, &nx); break;
        case NORM_STRIP: rc = strip_ws(cur.p, cur.n, st->flags, &nx); break;
        case NORM_LOWERCASE: rc = lowercase(cur.p, cur.n, &nx); break;
        case NORM_BERT: rc = bert_normalize(cur.p, cur.n, st->flags, &nx); break;
        case NORM_PRECOMPILED: {
            char *p;
            size_t len;
            if (!(rc = rkm_charsmap_normalize(st->cmap, cur.p, cur.n, &p, &len))) {
                nx.p = p;
                nx.n = len;
                nx.cap = len + 1;
            }
            break;
        }
        case NORM_SPM_WS: rc = spm_whitespace(cur.p, cur.n, st->flags, &nx); break;
        default: rc = RKM_EINVAL; break;
        }
        free(cur.p);
        cur = nx;
    }
    if (rc) {
        free(cur.p);
        return rc;
    }
    *res = cur;
    return 0;
}

/* ------------------------------------------------------------ merging */

/* A merge candidate. key = priority << 32 | left symbol index: symbol
 * indices grow with position, so one integer compare orders by (rank or
 * score, then leftmost). 16 bytes, so a million-symbol word's heap stays
 * cache-friendly. */
typedef struct {
    uint64_t key;
    uint32_t right;
    int32_t result; /* the merged token */
} cand;

typedef struct {
    cand *v;
    size_t n, cap;
} heap;

/* Order-preserving map of a float to uint32, reversed (higher scores
 * first in a min-heap). */
static uint32_t score_key(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~u;
}

static int heap_push(heap *h, cand c)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        cand *nv = realloc(h->v, cap * sizeof *nv);
        if (!nv) return RKM_ENOMEM;
        h->v = nv;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (c.key >= h->v[p].key) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = c;
    return 0;
}

static cand heap_pop(heap *h)
{
    cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= n) break;
        if (l + 1 < n && h->v[l + 1].key < h->v[l].key) m = l + 1;
        if (h->v[m].key >= last.key) break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (n) h->v[i] = last;
    return top;
}

/* Per-call scratch for merging, reused across the words of one call. */
typedef struct {
    uint32_t *start, *len;
    int32_t *prev, *next, *id;
    size_t cap;
    heap h;
    /* Unigram lattice, per byte position: best score of a path ending
     * there, where its last piece starts (-1: no path yet) and its id */
    double *vscore;
    int32_t *vfrom, *vid;
    size_t vcap;
} merge_ws;

static int merge_ws_reserve(merge_ws *w, size_t n)
{
    if (n <= w->cap) return 0;
    size_t cap = n + n / 2 + 16;
    uint32_t *s = realloc(w->start, cap * sizeof *s);
    if (s) w->start = s;
    uint32_t *l = realloc(w->len, cap * sizeof *l);
    if (l) w->len = l;
    int32_t *p = realloc(w->prev, cap * sizeof *p);
    if (p) w->prev = p;
    int32_t *x = realloc(w->next, cap * sizeof *x);
    if (x) w->next = x;
    int32_t *d = realloc(w->id, cap * sizeof *d);
    if (d) w->id = d;
    if (!s || !l || !p || !x || !d) return RKM_ENOMEM;
    w->cap = cap;
    return 0;
}

static void merge_ws_free(merge_ws *w)
{
    free(w->start);
    free(w->len);
    free(w->prev);
    free(w->next);
    free(w->id);
    free(w->h.v);
    free(w->vscore);
    free(w->vfrom);
    free(w->vid);
}

static int try_pair(const rkm_tokenizer *t, merge_ws *w, const char *s, int32_t l)
{
    if (l < 0) return 0;
    int32_t r = w->next[l];
    if (r < 0) return 0;
    uint32_t pri;
    int32_t result = -1;
    if (t->model == MODEL_SPM) {
        result = str_map_get(t, s + w->start[l], w->len[l] + w->len[r]);
        if (result < 0) return 0;
        pri = score_key(t->tok[result].score);
    } else {
        if (w->id[l] < 0 || w->id[r] < 0) return 0;
        int rank = pair_map_get(&t->merges, w->id[l], w->id[r], &result);
        if (rank < 0) return 0;
        pri = (uint32_t)rank;
    }
    cand c = {((uint64_t)pri << 32) | (uint32_t)l, (uint32_t)r, result};
    return heap_push(&w->h, c);
}

/* Emits the ids of symbol text s[0..n) that is not itself a token. */
static int emit_unknown(const rkm_tokenizer *t, const char *s, size_t n, id_vec *out)
{
    int rc;
    int fallback = t->model == MODEL_SPM || t->byte_fallback || t->model == MODEL_BPE_BYTES;
    if (fallback) {
        int all = 1;
        for (size_t i = 0; i < n; i++) all &= t->byte_tok[(uint8_t)s[i]] >= 0;
        if (all) {
            for (size_t i = 0; i < n; i++)
                if ((rc = id_push(out, t->byte_tok[(uint8_t)s[i]]))) return rc;
            return 0;
        }
    }
    return t->unk >= 0 ? id_push(out, t->unk) : 0;
}

/* Unigram: emits a run of unknown characters s[0..n) (one or more
 * lattice nodes of the unk id, fused as both references do): the run's
 * own piece if it is one, else its bytes' <0xXX> tokens when byte_fallback
 * is set and all exist, else one unk. */
static int unigram_emit_unknown(const rkm_tokenizer *t, const char *s, size_t n, id_vec *out)
{
    int id = str_map_get(t, s, n);
    if (id >= 0 && id < t->n_pieces) return id_push(out, id);
    if (t->byte_fallback) {
        int all = 1;
        for (size_t i = 0; i < n; i++) all &= t->byte_tok[(uint8_t)s[i]] >= 0;
        if (all) {
            int rc;
            for (size_t i = 0; i < n; i++)
                if ((rc = id_push(out, t->byte_tok[(uint8_t)s[i]]))) return rc;
            return 0;
        }
    }
    return id_push(out, t->unk);
}

/* Unigram segmentation of one word s[0..n) (valid UTF-8): the path of
 * pieces with the highest sum of scores (Viterbi over byte positions).
 * Nodes are considered by start position, then by length, and a later
 * node replaces the best one ending at the same position only when its
 * score is strictly higher: the references' tie rule. A character that
 * starts no one-character piece gets an unk node scored unk_score; the
 * unk piece itself also scores unk_score when matched from the text (as
 * @huggingface/tokenizers does). */
static int unigram_word(const rkm_tokenizer *t, merge_ws *w, const char *s, size_t n, id_vec *out)
{
    int rc;
    if (n + 1 > w->vcap) {
        size_t cap = n + 1 + n / 2 + 16;
        double *sc = realloc(w->vscore, cap * sizeof *sc);
        if (sc) w->vscore = sc;
        int32_t *fr = realloc(w->vfrom, cap * sizeof *fr);
        if (fr) w->vfrom = fr;
        int32_t *vi = realloc(w->vid, cap * sizeof *vi);
        if (vi) w->vid = vi;
        if (!sc || !fr || !vi) return RKM_ENOMEM;
        w->vcap = cap;
    }
    if (n > INT32_MAX - 1) return rkm_err(RKM_EINVAL, "tokenizer: word too long");
    for (size_t i = 0; i <= n; i++) w->vfrom[i] = -1;
    w->vscore[0] = 0;
    w->vfrom[0] = 0;
    for (size_t b = 0; b < n;) {
        size_t mblen = (size_t)rkm_utf8_seq_len((uint8_t)s[b]);
        if (mblen == 0 || b + mblen > n) mblen = 1;
        double base = w->vscore[b];
        int single = 0;
        size_t lim = n - b < (size_t)t->max_piece_bytes ? n - b : (size_t)t->max_piece_bytes;
        for (size_t l = 1; l <= lim; l++) {
            if (b + l < n && ((uint8_t)s[b + l] & 0xC0) == 0x80) continue; /* not a character end */
            int id = str_map_get(t, s + b, l);
            if (id < 0 || id >= t->n_pieces) continue;
            if (t->ugm_gguf && (t->tok[id].type == RKM_TOKEN_CONTROL || t->tok[id].type == RKM_TOKEN_UNKNOWN)) continue;
            double sc = base + (id == t->unk ? t->unk_score : t->uscore[id]);
            if (w->vfrom[b + l] < 0 || sc > w->vscore[b + l]) {
                w->vscore[b + l] = sc;
                w->vfrom[b + l] = (int32_t)b;
                w->vid[b + l] = id;
            }
            if (l == mblen) single = 1;
        }
        if (!single) {
            if (t->unk < 0)
                return rkm_err(RKM_EINVAL, "tokenizer: Unigram model has no unk_id for an unknown character");
            double sc = base + t->unk_score;
            if (w->vfrom[b + mblen] < 0 || sc > w->vscore[b + mblen]) {
                w->vscore[b + mblen] = sc;
                w->vfrom[b + mblen] = (int32_t)b;
                w->vid[b + mblen] = t->unk;
            }
        }
        b += mblen;
    }
    /* Backtrack: the path's nodes, last first. Reuse start/len/id of the
     * merge scratch for them (n nodes at most). */
    if ((rc = merge_ws_reserve(w, n))) return rc;
    size_t m = 0;
    for (size_t e = n; e > 0;) {
        size_t b = (size_t)w->vfrom[e];
        w->start[m] = (uint32_t)b;
        w->len[m] = (uint32_t)(e - b);
        w->id[m] = w->vid[e];
        m++;
        e = b;
    }
    for (size_t k = m; k-- > 0;) {
        if (w->id[k] != t->unk) {
            if ((rc = id_push(out, w->id[k]))) return rc;
            continue;
        }
        size_t j = k; /* a run of unk nodes k, k-1, ..., j */
        while (j > 0 && w->id[j - 1] == t->unk) j--;
        size_t rs = w->start[k], re = w->start[j] + w->len[j];
        if ((rc = unigram_emit_unknown(t, s + rs, re - rs, out))) return rc;
        k = j;
    }
    return 0;
}

/* Unigram word: with a splitting Metaspace, each replacement character
 * starts a new word ("a▁▁b" -> "a", "▁", "▁b"), as the Rust reference
 * does; segmentation never crosses those boundaries. */
static int unigram_words(const rkm_tokenizer *t, merge_ws *w, const char *s, size_t n, id_vec *out)
{
    if (!t->metaspace || !t->metaspace_split) return unigram_word(t, w, s, n, out);
    size_t rl = strlen(t->metaspace_rep), start = 0;
    for (size_t i = 1; rl && i + rl <= n; i++) {
        if (memcmp(s + i, t->metaspace_rep, rl) != 0) continue;
        int rc = unigram_word(t, w, s + start, i - start, out);
        if (rc) return rc;
        start = i;
        i += rl - 1;
    }
    return unigram_word(t, w, s + start, n - start, out);
}

/* WordPiece: greedy longest-match-first over the word s[0..n) (valid
 * UTF-8); every piece after the first is looked up with the continuation
 * prefix. A word of more than wp_max_chars characters, or one with a
 * position where no piece matches, is one unk. Only substrings no longer
 * than the longest token are tried, which gives the references' result
 * (they try every end) in O(n * longest) lookups. */
static int wordpiece_word(const rkm_tokenizer *t, const char *s, size_t n, id_vec *out)
{
    size_t nch = 0;
    for (size_t i = 0; i < n; i++) nch += ((uint8_t)s[i] & 0xC0) != 0x80;
    size_t first = out->n;
    size_t pl = strlen(t->wp_prefix);
    char stack[512];
    size_t need = pl + (size_t)t->wp_max_bytes + 1;
    char *buf = need <= sizeof stack ? stack : malloc(need);
    if (!buf) return RKM_ENOMEM;
    int rc = 0, unknown = nch > (size_t)t->wp_max_chars;
    memcpy(buf, t->wp_prefix, pl);
    for (size_t start = 0; start < n && !unknown && !rc;) {
        size_t end = n - start > (size_t)t->wp_max_bytes ? start + (size_t)t->wp_max_bytes : n;
        int id = -1;
        for (; end > start; end--) {
            if (end < n && ((uint8_t)s[end] & 0xC0) == 0x80) continue; /* not a character boundary */
            size_t l = end - start;
            if (start == 0) id = str_map_get(t, s, l);
            else if (pl + l <= (size_t)t->wp_max_bytes) {
                memcpy(buf + pl, s + start, l);
                id = str_map_get(t, buf, pl + l);
            }
            if (id >= 0) break;
        }
        if (id < 0) unknown = 1;
        else rc = id_push(out, id);
        start = end;
    }
    if (buf != stack) free(buf);
    if (rc) return rc;
    if (!unknown) return 0;
    out->n = first;
    if (t->unk < 0) return rkm_err(RKM_EINVAL, "tokenizer: WordPiece model has no unk token for an unknown word");
    return id_push(out, t->unk);
}

/* Merges one word s[0..n) and appends its ids. */
static int merge_word(const rkm_tokenizer *t, merge_ws *w, const char *s, size_t n, id_vec *out)
{
    int rc;
    if (n == 0) return 0;
    if (t->model == MODEL_UNIGRAM) return unigram_words(t, w, s, n, out);
    if (t->model == MODEL_WORDPIECE) return wordpiece_word(t, s, n, out);
    if (t->ignore_merges || n == 1) {
        int id = str_map_get(t, s, n);
        if (id >= 0 && (t->ignore_merges || t->model == MODEL_BPE_BYTES)) return id_push(out, id);
    }
    if ((rc = merge_ws_reserve(w, n))) return rc;
    /* initial symbols: bytes (byte-level) or UTF-8 characters */
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t l = 1;
        if (t->model != MODEL_BPE_BYTES) {
            l = (size_t)rkm_utf8_seq_len((uint8_t)s[i]);
            if (l == 0 || i + l > n) l = 1;
        }
        w->start[m] = (uint32_t)i;
        w->len[m] = (uint32_t)l;
        w->prev[m] = (int32_t)m - 1;
        w->next[m] = i + l < n ? (int32_t)m + 1 : -1;
        w->id[m] = t->model == MODEL_BPE_BYTES ? t->byte_tok[(uint8_t)s[i]] : str_map_get(t, s + i, l);
        m++;
        i += l;
    }
    w->h.n = 0;
    for (size_t k = 0; k + 1 < m; k++)
        if ((rc = try_pair(t, w, s, (int32_t)k))) return rc;
    while (w->h.n) {
        cand c = heap_pop(&w->h);
        uint32_t l = (uint32_t)c.key, r = c.right;
        /* Stale? The left symbol only changes by absorbing its right
         * neighbour (then next[l] != r) or by being absorbed (len 0); the
         * right one may have grown, which the length of the result (the
         * two symbols' text) shows, since symbols never shrink. */
        int32_t result = c.result;
        if (w->len[l] == 0 || w->next[l] != (int32_t)r || w->len[l] + w->len[r] != t->tok[result].ibytes_len)
            continue;
        /* merge right into left */
        w->len[l] += w->len[r];
        w->len[r] = 0;
        w->id[l] = result;
        w->next[l] = w->next[r];
        if (w->next[l] >= 0) w->prev[w->next[l]] = (int32_t)l;
        if ((rc = try_pair(t, w, s, w->prev[l]))) return rc;
        if ((rc = try_pair(t, w, s, (int32_t)l))) return rc;
    }
    for (int32_t k = 0; k >= 0; k = w->next[k]) {
        int32_t id = w->id[k];
        if (t->model == MODEL_SPM && id < 0) id = str_map_get(t, s + w->start[k], w->len[k]);
        if (id >= 0) rc = id_push(out, id);
        else rc = emit_unknown(t, s + w->start[k], w->len[k], out);
        if (rc) return rc;
    }
    return 0;
}

/* Decodes s[0..n) (valid UTF-8) into code points, flags and byte offsets. */
typedef struct {
    uint32_t *cp;
    uint8_t *fl;
    uint32_t *off; /* byte offset of each code point; off[n] = byte length */
    size_t cap;
} cp_buf;

static int cp_decode(cp_buf *b, const char *s, size_t n, size_t *count)
{
    if (n + 1 > b->cap) {
        size_t cap = n + 1;
        uint32_t *cp = realloc(b->cp, cap * sizeof *cp);
        if (cp) b->cp = cp;
        uint8_t *fl = realloc(b->fl, cap);
        if (fl) b->fl = fl;
        uint32_t *off = realloc(b->off, cap * sizeof *off);
        if (off) b->off = off;
        if (!cp || !fl || !off) return RKM_ENOMEM;
        b->cap = cap;
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int l = rkm_utf8_decode(s + i, n - i, &c);
        if (l == 0) {
            c = 0xFFFD;
            l = 1;
        }
        b->cp[k] = c;
        b->fl[k] = (uint8_t)rkm_unicode_flags(c);
        b->off[k] = (uint32_t)i;
        k++;
        i += (size_t)l;
    }
    b->off[k] = (uint32_t)n;
    *count = k;
    return 0;
}

typedef struct {
    const rkm_tokenizer *t;
    merge_ws mw;
    cp_buf cb;
    span_vec a, b;
    id_vec out;
    int parse_special;
    int section_index;
    int prev_special; /* llama.cpp SPM: the previous fragment was a token */
} enc_ctx;

/* Pre-tokenizes and merges one text fragment (no added tokens in it). */
static int encode_plain_inner(enc_ctx *x, const char *s, size_t n);

static int encode_plain(enc_ctx *x, const char *s, size_t n)
{
    size_t first = x->out.n;
    int rc = encode_plain_inner(x, s, n);
    if (!rc && x->t->fuse_unk && x->t->unk >= 0) { /* fuse runs of <unk> */
        size_t w = first;
        for (size_t i = first; i < x->out.n; i++)
            if (!(x->out.v[i] == x->t->unk && w > first && x->out.v[w - 1] == x->t->unk)) x->out.v[w++] = x->out.v[i];
        x->out.n = w;
    }
    return rc;
}

/* Metaspace: ' ' -> the replacement, which is prepended when asked and the
 * text does not start with it already. */
static int metaspace_apply(const rkm_tokenizer *t, const char *s, size_t n, int prepend, buf_t *out)
{
    size_t rl = strlen(t->metaspace_rep);
    int rc = 0;
    if (prepend && !(n >= 1 && s[0] == ' ') && !(n >= rl && !memcmp(s, t->metaspace_rep, rl)))
        rc = buf_put(out, t->metaspace_rep, rl);
    buf_t r = {0};
    if (!rc) rc = replace_all(s, n, " ", 1, t->metaspace_rep, rl, &r);
    if (!rc) rc = buf_put(out, r.p, r.n);
    free(r.p);
    return rc;
}

/* Runs split steps [from, to) over s[0..n): the pieces are left in x->a
 * (code point indices) with the byte offsets in x->cb.off. */
static int run_splits(enc_ctx *x, const char *s, size_t n, int from, int to)
{
    const rkm_tokenizer *t = x->t;
    int rc;
    size_t ncp;
    if ((rc = cp_decode(&x->cb, s, n, &ncp))) return rc;
    x->a.n = 0;
    if ((rc = span_push(&x->a, 0, ncp))) return rc;
    for (int k = from; k < to; k++) {
        const split_step *st = &t->split[k];
        x->b.n = 0;
        for (size_t p = 0; p < x->a.n; p++) {
            span sp = x->a.v[p];
            if (st->kind == PRE_LITERAL) {
                /* literal delimiter, matched on code point boundaries */
                size_t gap = sp.s, i = sp.s;
                const uint32_t *off = x->cb.off;
                while (i < sp.e) {
                    size_t bl = off[sp.e] - off[i];
                    if (bl >= st->lit_len && !memcmp(s + off[i], st->lit, st->lit_len)) {
                        size_t j = i;
                        while (j < sp.e && off[j] < off[i] + st->lit_len) j++;
                        if ((rc = span_push(&x->b, gap, i))) return rc;
                        if (!st->removed && (rc = span_push(&x->b, i, j))) return rc;
                        i = gap = j;
                    } else {
                        i++;
                    }
                }
                if ((rc = span_push(&x->b, gap, sp.e))) return rc;
            } else if ((rc = split_piece(st, x->cb.cp + sp.s, x->cb.fl + sp.s, sp.s, sp.e - sp.s, &x->b))) {
                return rc;
            }
        }
        span_vec tmp = x->a;
        x->a = x->b;
        x->b = tmp;
    }
    return 0;
}

/* Split steps [from, n_split) then the model, on s[0..n). */
static int split_and_merge(enc_ctx *x, const char *s, size_t n, int from)
{
    const rkm_tokenizer *t = x->t;
    if (from >= t->n_split) return merge_word(t, &x->mw, s, n, &x->out);
    int rc = run_splits(x, s, n, from, t->n_split);
    for (size_t p = 0; p < x->a.n && !rc; p++) {
        size_t bs = x->cb.off[x->a.v[p].s], be = x->cb.off[x->a.v[p].e];
        rc = merge_word(t, &x->mw, s + bs, be - bs, &x->out);
    }
    return rc;
}

/* A Metaspace after split steps (T5: WhitespaceSplit, then Metaspace):
 * the first splits, then each piece gets the Metaspace rewrite of its own
 * (prepend "first": only the piece at the start of the first section, the
 * Rust reference's rule), then the remaining splits and the model. */
static int encode_split_then_metaspace(enc_ctx *x, const char *s, size_t n)
{
    const rkm_tokenizer *t = x->t;
    int rc = run_splits(x, s, n, 0, t->metaspace_at);
    if (rc) return rc;
    size_t np = x->a.n;
    span *pieces = malloc((np ? np : 1) * sizeof *pieces); /* byte spans; x->a is reused below */
    if (!pieces) return RKM_ENOMEM;
    for (size_t p = 0; p < np; p++) pieces[p] = (span){x->cb.off[x->a.v[p].s], x->cb.off[x->a.v[p].e]};
    for (size_t p = 0; p < np && !rc; p++) {
        int prepend = t->metaspace_prepend == 1 ||
                      (t->metaspace_prepend == 2 && x->section_index == 0 && pieces[p].s == 0);
        buf_t m = {0};
        rc = metaspace_apply(t, s + pieces[p].s, pieces[p].e - pieces[p].s, prepend, &m);
        if (!rc) rc = split_and_merge(x, m.p, m.n, t->metaspace_at);
        free(m.p);
    }
    free(pieces);
    return rc;
}

static int encode_plain_inner(enc_ctx *x, const char *s, size_t n)
{
    const rkm_tokenizer *t = x->t;
    int rc = 0;
    if (n == 0) return 0;
    if (t->model == MODEL_SPM) { /* llama.cpp: ' ' -> U+2581, one word */
        buf_t b = {0};
        if (t->add_space_prefix && x->prev_special) rc = buf_put(&b, " ", 1);
        if (!rc) rc = buf_put(&b, s, n);
        buf_t e = {0};
        if (!rc) rc = replace_all(b.p, b.n, " ", 1, "\xe2\x96\x81", 3, &e);
        if (!rc) rc = merge_word(t, &x->mw, e.p, e.n, &x->out);
        free(b.p);
        free(e.p);
        return rc;
    }
    if (t->metaspace && t->metaspace_at > 0) return encode_split_then_metaspace(x, s, n);
    buf_t meta = {0}, pre = {0};
    if (t->metaspace) { /* Metaspace: ' ' -> replacement, maybe prepended */
        int prepend = t->metaspace_prepend == 1 || (t->metaspace_prepend == 2 && x->section_index == 0);
        if ((rc = metaspace_apply(t, s, n, prepend, &meta))) goto out;
        s = meta.p;
        n = meta.n;
    }
    if (t->add_prefix_space && s[0] != ' ') {
        if ((rc = buf_put(&pre, " ", 1)) || (rc = buf_put(&pre, s, n))) goto out;
        s = pre.p;
        n = pre.n;
    }
    rc = split_and_merge(x, s, n, 0);
out:
    free(meta.p);
    free(pre.p);
    return rc;
}

static int is_trim_space(const char *s, size_t n, size_t *len)
{
    uint32_t cp;
    int l = rkm_utf8_decode(s, n, &cp);
    if (l == 0) return 0;
    *len = (size_t)l;
    return (rkm_unicode_flags(cp) & RKM_UC_WS) || cp == 0xFEFF;
}

/* Splits text by the added tokens of trie tr; plain parts go to fn. A
 * token with lstrip/rstrip eats the whitespace next to it. */
static int encode_added(enc_ctx *x, const trie *tr, const char *s, size_t n, int normalized_pass)
{
    const rkm_tokenizer *t = x->t;
    int rc;
    size_t start = 0, i = 0;
    int pending_rstrip = 0;
    while (i <= n) {
        int32_t id = -1;
        size_t m = i < n ? trie_match(t, tr, s + i, n - i, x->parse_special, &id) : 0;
        if (m == 0 && i < n) {
            i++;
            continue;
        }
        /* plain text s[start..i) */
        size_t a = start, b = i;
        size_t l;
        if (pending_rstrip)
            while (a < b && is_trim_space(s + a, b - a, &l)) a += l;
        if (m && t->tok[id].lstrip)
            while (b > a) { /* trim trailing whitespace (scan back to a lead byte) */
                size_t k = b - 1;
                while (k > a && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
                if (!is_trim_space(s + k, b - k, &l)) break;
                b = k;
            }
        if (b > a) {
            if (!normalized_pass && t->has_normalizer) {
                buf_t nb = {0};
                if ((rc = normalize(t, s + a, b - a, &nb))) return rc;
                rc = encode_added(x, &t->trie_norm, nb.p, nb.n, 1);
                free(nb.p);
                if (rc) return rc;
            } else {
                if ((rc = encode_plain(x, s + a, b - a))) return rc;
                x->prev_special = 0;
            }
            if (!normalized_pass) x->section_index++;
        }
        if (m == 0) break;
        if ((rc = id_push(&x->out, id))) return rc;
        x->prev_special = 1;
        if (!normalized_pass) x->section_index++;
        pending_rstrip = t->tok[id].rstrip;
        i += m;
        start = i;
    }
    return 0;
}

int rkm_tokenizer_encode(const rkm_tokenizer *t, const char *text, size_t len, int32_t *ids, int cap, int add_bos,
                         int parse_special)
{
    if (!t || (!text && len) || cap < 0 || (cap && !ids)) return rkm_err(RKM_EINVAL, "tokenizer: bad arguments to encode");
    if (len > TOK_MAX_TEXT) return rkm_err(RKM_EINVAL, "tokenizer: text of %zu bytes is too large", len);
    size_t bad = rkm_utf8_valid_prefix(text, len);
    if (bad < len) return rkm_err(RKM_EINVAL, "tokenizer: invalid UTF-8 at byte %zu", bad);
    enc_ctx x = {0};
    x.t = t;
    x.parse_special = parse_special;
    x.prev_special = 1;
    int rc = 0;
    if (add_bos && t->add_bos && t->bos >= 0) rc = id_push(&x.out, t->bos);
    if (!rc) rc = encode_added(&x, &t->trie_raw, text, len, 0);
    if (!rc && add_bos && t->add_eos && t->eos >= 0) rc = id_push(&x.out, t->eos);
    if (!rc && x.out.n > INT_MAX) rc = rkm_err(RKM_EINVAL, "tokenizer: too many tokens");
    if (!rc) {
        size_t k = x.out.n < (size_t)cap ? x.out.n : (size_t)cap;
        if (k) memcpy(ids, x.out.v, k * sizeof *ids);
        rc = (int)x.out.n;
    } else if (rc == RKM_ENOMEM) {
        rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
    }
    merge_ws_free(&x.mw);
    free(x.cb.cp);
    free(x.cb.fl);
    free(x.cb.off);
    free(x.a.v);
    free(x.b.v);
    free(x.out.v);
    return rc;
}

int rkm_tokenizer_normalize(const rkm_tokenizer *t, const char *s, size_t n, char **out, size_t *out_len)
{
    if (!t || (!s && n) || !out || !out_len) return rkm_err(RKM_EINVAL, "tokenizer: bad arguments to normalize");
    if (rkm_utf8_valid_prefix(s, n) < n) return rkm_err(RKM_EINVAL, "tokenizer: normalize: invalid UTF-8");
    buf_t r = {0};
    int rc = normalize(t, s ? s : "", n, &r);
    if (rc) return rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
    if (!r.p && (rc = buf_put(&r, "", 0))) return rkm_err(RKM_ENOMEM, "tokenizer: out of memory");
    *out = r.p;
    *out_len = r.n;
    return 0;
}

/* ------------------------------------------------------------ getters */

int rkm_tokenizer_n_vocab(const rkm_tokenizer *t) { return t ? t->n_vocab : 0; }
int rkm_tokenizer_bos(const rkm_tokenizer *t) { return t ? t->bos : -1; }
int rkm_tokenizer_eos(const rkm_tokenizer *t) { return t ? t->eos : -1; }
int rkm_tokenizer_add_bos(const rkm_tokenizer *t) { return t ? t->add_bos && t->bos >= 0 : 0; }
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
    int id = str_map_get(t, text, n);
    if (id >= 0 && t->tok[id].text_len == n && !memcmp(t->tok[id].text, text, n)) return id;
    for (int i = 0; i < t->n_vocab; i++) /* rare: a byte-level spelling */
        if (t->tok[i].text_len == n && !memcmp(t->tok[i].text, text, n)) return i;
    return -1;
}

/* ------------------------------------------------------------ decoding */

static int piece_bytes(const rkm_tokenizer *t, int32_t id, const char **p, size_t *n, char *tmp, size_t tmp_cap)
{
    const tok_entry *e = &t->tok[id];
    if (t->model == MODEL_BPE_BYTES || t->model == MODEL_WORDPIECE || e->added) {
        *p = e->ibytes;
        *n = e->ibytes_len;
        return 0;
    }
    if (e->type == RKM_TOKEN_BYTE) {
        for (int b = 0; b < 256; b++)
            if (t->byte_tok[b] == id) {
                tmp[0] = (char)b;
                *p = tmp;
                *n = 1;
                return 0;
            }
    }
    /* SentencePiece: U+2581 stands for a space */
    size_t o = 0;
    for (size_t i = 0; i < e->text_len;) {
        if (i + 3 <= e->text_len && !memcmp(e->text + i, "\xe2\x96\x81", 3)) {
            if (o < tmp_cap) tmp[o] = ' ';
            o++;
            i += 3;
        } else {
            if (o < tmp_cap) tmp[o] = e->text[i];
            o++;
            i++;
        }
    }
    *p = tmp;
    *n = o;
    return o <= tmp_cap ? 0 : -1;
}

int rkm_tokenizer_piece(const rkm_tokenizer *t, int32_t id, char *buf, int cap)
{
    if (!t || id < 0 || id >= t->n_vocab) return 0;
    const tok_entry *e = &t->tok[id];
    size_t tmp_cap = e->text_len + 1;
    char stack[256];
    char *tmp = tmp_cap <= sizeof stack ? stack : malloc(tmp_cap);
    if (!tmp) return rkm_err(RKM_ENOMEM, "out of memory");
    const char *p;
    size_t n;
    piece_bytes(t, id, &p, &n, tmp, tmp_cap);
    int r;
    if (n > (size_t)cap) r = -(int)n;
    else {
        memcpy(buf, p, n);
        r = (int)n;
    }
    if (tmp != stack) free(tmp);
    return r;
}

/* One step of WHATWG UTF-8 decoding with replacement: at s[0..n), returns
 * the bytes consumed and writes the output (the sequence or U+FFFD) to
 * out. *incomplete is set when s holds a valid but unfinished prefix
 * reaching the end of the buffer (a streaming decoder waits for more). */
static size_t utf8_step(const unsigned char *s, size_t n, char *out, size_t *out_n, int *incomplete)
{
    *incomplete = 0;
    unsigned char c = s[0];
    if (c < 0x80) {
        out[0] = (char)c;
        *out_n = 1;
        return 1;
    }
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        memcpy(out, "\xef\xbf\xbd", 3);
        *out_n = 3;
        return 1;
    }
    size_t k = 1;
    while (k <= need && k < n) {
        unsigned char b = s[k];
        if (b < lo || b > hi) break;
        lo = 0x80;
        hi = 0xBF;
        k++;
    }
    if (k == need + 1) {
        memcpy(out, s, k);
        *out_n = k;
        return k;
    }
    if (k == n) *incomplete = 1;
    memcpy(out, "\xef\xbf\xbd", 3);
    *out_n = 3;
    return k;
}

/* The WordPiece decoder's text for the index-th token of a sequence: the
 * continuation prefix removed, else a space before it (not the first
 * token); then, with cleanup, the references' clean_up_tokenization
 * rewrites applied to that text. */
static int wp_decode_piece(const rkm_tokenizer *t, int32_t id, int index, buf_t *out)
{
    static const char *const cleanup[][2] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    const tok_entry *e = &t->tok[id];
    size_t pl = strlen(t->wp_dec_prefix);
    buf_t a = {0};
    int rc;
    if (index > 0 && pl && e->text_len >= pl && !memcmp(e->text, t->wp_dec_prefix, pl))
        rc = buf_put(&a, e->text + pl, e->text_len - pl);
    else if (!(rc = buf_put(&a, " ", index > 0 ? 1 : 0)))
        rc = buf_put(&a, e->text, e->text_len);
    for (size_t k = 0; t->wp_cleanup && !rc && k < RKM_ARRAY_LEN(cleanup); k++) {
        buf_t b = {0};
        rc = replace_all(a.p, a.n, cleanup[k][0], strlen(cleanup[k][0]), cleanup[k][1], strlen(cleanup[k][1]), &b);
        free(a.p);
        a = b;
    }
    if (!rc) rc = buf_put(out, a.p, a.n);
    free(a.p);
    return rc;
}

int rkm_tokenizer_decode(const rkm_tokenizer *t, const int32_t *ids, int n, char *buf, int cap)
{
    if (!t || n < 0 || (n && !ids) || cap < 0) return rkm_err(RKM_EINVAL, "tokenizer: decode: bad arguments");
    buf_t raw = {0};
    int rc = 0;
    char tmp[512];
    for (int i = 0; i < n && !rc; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            rc = rkm_err(RKM_EINVAL, "tokenizer: decode: id %d out of range", (int)ids[i]);
            break;
        }
        if (t->model == MODEL_WORDPIECE) {
            rc = wp_decode_piece(t, ids[i], i, &raw);
            continue;
        }
        const char *p;
        size_t len;
        char *big = NULL;
        if (piece_bytes(t, ids[i], &p, &len, tmp, sizeof tmp) < 0) {
            big = malloc(len + 1);
            if (!big) {
                rc = RKM_ENOMEM;
                break;
            }
            piece_bytes(t, ids[i], &p, &len, big, len + 1);
        }
        if (i == 0 && t->strip_leading_space && len && p[0] == ' ' && !t->tok[ids[i]].added) {
            p++;
            len--;
        }
        rc = buf_put(&raw, p, len);
        free(big);
    }
    size_t o = 0;
    for (size_t i = 0; i < raw.n && !rc;) {
        char u[4];
        size_t un;
        int inc;
        i += utf8_step((const unsigned char *)raw.p + i, raw.n - i, u, &un, &inc);
        if (buf && o + un <= (size_t)cap) memcpy(buf + o, u, un);
        o += un;
    }
    free(raw.p);
    if (rc) return rc == RKM_ENOMEM ? rkm_err(RKM_ENOMEM, "out of memory") : rc;
    if (o > INT_MAX) return rkm_err(RKM_EINVAL, "tokenizer: decode: output too large");
    return (int)o;
}

void rkm_detok_init(rkm_detok *d) { memset(d, 0, sizeof *d); }

static int detok_drain(rkm_detok *d, const unsigned char *s, size_t n, char *out, int final)
{
    size_t i = 0, o = 0;
    while (i < n) {
        size_t un;
        int inc;
        char u[4];
        size_t k = utf8_step(s + i, n - i, u, &un, &inc);
        if (inc && !final) { /* wait for the rest of the sequence */
            memcpy(d->pend, s + i, n - i);
            d->n_pend = (int)(n - i);
            return (int)o;
        }
        memcpy(out + o, u, un);
        o += un;
        i += k;
    }
    d->n_pend = 0;
    return (int)o;
}

int rkm_detok_push(rkm_detok *d, const rkm_tokenizer *t, int32_t id, char *out, int cap)
{
    if (!d || !t || id < 0 || id >= t->n_vocab) return rkm_err(RKM_EINVAL, "tokenizer: decode: bad id %d", (int)id);
    const tok_entry *e = &t->tok[id];
    size_t tmp_cap = e->text_len + 1;
    char stack[256];
    char *tmp = tmp_cap <= sizeof stack ? stack : malloc(tmp_cap);
    if (!tmp) return rkm_err(RKM_ENOMEM, "out of memory");
    const char *p;
    size_t n;
    buf_t wp = {0};
    piece_bytes(t, id, &p, &n, tmp, tmp_cap);
    if (t->model == MODEL_WORDPIECE) {
        if (wp_decode_piece(t, id, d->n_pushed, &wp)) {
            if (tmp != stack) free(tmp);
            return rkm_err(RKM_ENOMEM, "out of memory");
        }
        p = wp.p;
        n = wp.n;
    }
    if (d->n_pushed == 0 && t->strip_leading_space && n && p[0] == ' ' && !e->added) {
        p++;
        n--;
    }
    size_t total = (size_t)d->n_pend + n;
    int rc;
    if (total * 3 > (size_t)cap) {
        rc = rkm_err(RKM_ENOSPC, "tokenizer: decode: output buffer too small");
    } else {
        unsigned char *all = malloc(total + 1);
        if (!all) rc = rkm_err(RKM_ENOMEM, "out of memory");
        else {
            memcpy(all, d->pend, (size_t)d->n_pend);
            memcpy(all + d->n_pend, p, n);
            rc = detok_drain(d, all, total, out, 0);
            d->n_pushed++;
            free(all);
        }
    }
    free(wp.p);
    if (tmp != stack) free(tmp);
    return rc;
}

int rkm_detok_flush(rkm_detok *d, char *out, int cap)
{
    if ((size_t)d->n_pend * 3 > (size_t)cap) return rkm_err(RKM_ENOSPC, "tokenizer: decode: output buffer too small");
    unsigned char tmp[8];
    size_t n = (size_t)d->n_pend;
    memcpy(tmp, d->pend, n);
    return detok_drain(d, tmp, n, out, 1);
}

/* ------------------------------------------------------------ writing */

int rkm_tokenizer_write_gguf(const rkm_tokenizer *t, struct rkm_gguf_writer *w)
{
    if (!t || !w) return rkm_err(RKM_EINVAL, "write_gguf: bad arguments");
    if (t->model == MODEL_WORDPIECE)
        return rkm_err(RKM_EUNSUPPORTED, "write_gguf: WordPiece tokenizers have no supported GGUF form");
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
        types[i] = e->type;
        scores[i] = unigram ? (float)t->uscore[i] : e->score;
        if (e->text_len == 0 && e->type == RKM_TOKEN_UNUSED) { /* id hole: llama.cpp wants unique texts */
            snprintf(hole_names + 24 * (size_t)i, 24, "[PAD%d]", i);
            strs[i] = hole_names + 24 * (size_t)i;
            lens[i] = strlen(strs[i]);
        }
    }
    int spm = t->model != MODEL_BPE_BYTES;
    rkm_gguf_writer_set_str(w, "tokenizer.ggml.model", unigram ? "t5" : spm ? "llama" : "gpt2");
    rkm_gguf_writer_set_str(w, "tokenizer.ggml.pre", t->pre_name[0] ? t->pre_name : "default");
    if (t->model == MODEL_BPE_CHARS && t->from_json) {
        /* BPE over characters as SentencePiece scores: a merge's result
         * scores higher the earlier the merge, so merging by score
         * reproduces the merge order. */
        for (int i = 0; i < n; i++)
            if (!t->tok[i].added && t->tok[i].type == RKM_TOKEN_NORMAL) scores[i] = -1e9f;
        for (int r = t->n_merges - 1; r >= 0; r--) {
            int32_t res = -1;
            pair_map_get(&t->merges, t->merge_list[2 * r], t->merge_list[2 * r + 1], &res);
            if (res >= 0) scores[res] = -(float)r;
        }
        for (int i = 0; i < n; i++) /* single characters: neutral */
            if (scores[i] == -1e9f && rkm_utf8_seq_len((uint8_t)t->tok[i].text[0]) == (int)t->tok[i].text_len)
                scores[i] = 0;
    }
    rkm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, lens, (uint64_t)n);
    rkm_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RKM_GGUF_INT32, types, (uint64_t)n);
    if (spm) {
        rkm_gguf_writer_set_arr(w, "tokenizer.ggml.scores", RKM_GGUF_FLOAT32, scores, (uint64_t)n);
    } else {
        merges = calloc((size_t)t->n_merges + 1, sizeof *merges);
        if (!merges) goto oom;
        for (int r = 0; r < t->n_merges; r++) {
            const tok_entry *a = &t->tok[t->merge_list[2 * r]], *b = &t->tok[t->merge_list[2 * r + 1]];
            merges[r] = malloc((size_t)a->text_len + b->text_len + 2);
            if (!merges[r]) goto oom;
            memcpy(merges[r], a->text, a->text_len);
            merges[r][a->text_len] = ' ';
            memcpy(merges[r] + a->text_len + 1, b->text, b->text_len + 1);
        }
        rkm_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, NULL,
                                    (uint64_t)t->n_merges);
    }
    if (t->bos >= 0) rkm_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)t->bos);
    if (t->eos >= 0) rkm_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)t->eos);
    if (t->unk >= 0) rkm_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)t->unk);
    if (t->pad >= 0) rkm_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)t->pad);
    if (t->eot >= 0) rkm_gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)t->eot);
    rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", t->add_bos);
    rkm_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", t->add_eos);
    if (unigram) {
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

static cJSON *json_split(const char *re)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "Split");
    cJSON *p = cJSON_AddObjectToObject(s, "pattern");
    cJSON_AddStringToObject(p, "Regex", re);
    cJSON_AddStringToObject(s, "behavior", "Isolated");
    cJSON_AddBoolToObject(s, "invert", 0);
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
    const char *pn = t->pre_name;
    if (!strcmp(pn, "gpt-2") || !strcmp(pn, "gpt2") || !strcmp(pn, "olmo") || !strcmp(pn, "gpt-neox")) {
        pre = json_bytelevel(1);
    } else {
        const char *res[3] = {0};
        if (!strcmp(pn, "llama-bpe") || !strcmp(pn, "llama3")) res[0] = RE_LLAMA3;
        else if (!strcmp(pn, "qwen2")) res[0] = RE_QWEN2;
        else if (!strcmp(pn, "deepseek-v3")) {
            res[0] = RE_DS3_NUM;
            res[1] = RE_DS3_CJK;
            res[2] = RE_DS3_MAIN;
        } else {
            return rkm_err(RKM_EUNSUPPORTED, "write_hf_json: pre-tokenizer '%s' has no tokenizer.json form", pn);
        }
        pre = cJSON_CreateObject();
        cJSON_AddStringToObject(pre, "type", "Sequence");
        cJSON *list = cJSON_AddArrayToObject(pre, "pretokenizers");
        for (int k = 0; k < 3 && res[k]; k++) cJSON_AddItemToArray(list, json_split(res[k]));
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
        size_t l = byte_level_encode(e->ibytes, e->ibytes_len, sp);
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
            size_t l = byte_level_encode(e->ibytes, e->ibytes_len, sp);
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
