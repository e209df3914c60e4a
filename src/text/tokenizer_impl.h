/*
 * tokenizer_impl.h - the tokenizer's private header: struct rkm_tokenizer,
 * the token table and its lookup maps, the normalizer and pre-tokenizer
 * programs a loader builds, the per-call encode scratch, and the
 * rkm_tok__* functions the tok_*.c files call across each other. Only
 * src/text/tok_*.c include it; everything else uses tokenizer.h.
 *
 * Design (one tokenizer, split by concern):
 *  - Every token has its text as stored in the file and its "internal"
 *    bytes: what it stands for in the text being encoded. For byte-level
 *    BPE the GPT-2 byte-to-unicode mapping is undone at load, so merges and
 *    lookups work on raw bytes and a piece is the internal bytes; for the
 *    SentencePiece styles the internal bytes are the text with its U+2581.
 *  - Pre-tokenizer regexes run in PCRE2 (text/regex.h): any pattern of a
 *    tokenizer.json Split, or the patterns of llama.cpp's pre-tokenizer
 *    type. The most common patterns also have a hand-written matcher over
 *    code points and category flags, used when a step's pattern is exactly
 *    the one it implements (tok_pretok.c); a test holds each to PCRE2.
 *  - Merging uses a binary heap of candidate pairs ordered by (rank or
 *    -score, position), so a word of n symbols costs O(n log n); stale heap
 *    entries are detected by the symbol lengths they recorded (tok_bpe.c).
 *
 * Files: tok_vocab.c (token table, maps, trie, construction, getters),
 * tok_gguf.c / tok_json.c (loaders), tok_normalize.c, tok_pretok.c,
 * tok_encode.c (added tokens, Metaspace, the per-call driver), tok_bpe.c,
 * tok_unigram.c, tok_wordpiece.c (one model each), tok_decode.c,
 * tok_write.c, tok_special.c (special-token roles, flags, EOG set).
 *
 * Threads: a loaded tokenizer is read-only; encode/decode allocate their
 * scratch per call, so any number of threads may share one tokenizer.
 * Ownership: rkm_tokenizer_free releases the tokenizer and all its strings.
 * The lookups below are static inline because the merge loops call them
 * once per candidate pair.
 */
#ifndef RKM_TOKENIZER_IMPL_H
#define RKM_TOKENIZER_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/charsmap.h"
#include "text/regex.h"
#include "text/tokenizer.h"
#include "util/arena.h"
#include "util/buf.h"
#include "util/common.h"

/* Longest text one encode call accepts: ids are returned as an int count
 * and every byte may become one id. */
#define TOK_MAX_TEXT ((size_t)1 << 30)

static inline uint64_t rkm_tok__hash_bytes(const void *p, size_t n)
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

static inline uint64_t rkm_tok__hash_u64(uint64_t x)
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
    PRE_REGEX,    /* a regex step (PCRE2, or the fast path named in split_step.fast) */
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
    PRE_NL_RUNS,   /* [^\n]+|[\n]+ (llama.cpp's gemma4): newline runs apart from the rest */
    /* the fast paths above (hand-written matchers) appear only in split_step.fast */
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

/* Hugging Face's SplitDelimiterBehavior. */
enum split_behavior { SPLIT_ISOLATED, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };

struct rkm_regex;

typedef struct split_step {
    int kind;        /* PRE_REGEX, PRE_LITERAL, PRE_WS_SPLIT or PRE_BERT */
    int fast;        /* PRE_REGEX: the hand-written matcher of this exact pattern, or 0 */
    int behavior;    /* enum split_behavior (regex and literal steps) */
    int invert;      /* the pattern's matches are the pieces' gaps */
    struct rkm_regex *re; /* PRE_REGEX (owned) */
    char *lit;       /* PRE_LITERAL (owned) */
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
    rkm_arena strings;   /* token texts and internal bytes */
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
    /* GGUF gemma4 (llama.cpp's BPE session over characters): a word of
     * newlines only that is itself a token stays that token; a symbol that
     * is no token becomes the <0xXX> token of each byte, a missing one
     * dropped. */
    int llama_gemma4;
    int strip_leading_space; /* decoder drops one leading space */
    /* Unigram: piece scores as the file gives them (double, as the
     * references sum them), the penalty score of an unknown character
     * (lowest score - 10), how many ids are model pieces (the lattice's
     * vocabulary; for BPE from tokenizer.json the ids of model.vocab, the
     * rest being added tokens) and the longest piece in bytes. */
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

    /* special tokens (tok_special.c): the ids of the roles (-1: none;
     * fim[k] is role RKM_TOK_FIM_PRE + k), the flags (-1 until decided),
     * which ids the file named (1 << role), the end-of-generation set */
    int unk, bos, eos, eot, eom, pad;
    int sep, mask, fim[6];
    int add_bos, add_eos, add_sep;
    uint32_t roles_declared;
    uint8_t *eog;         /* per id */
    trie trie_raw, trie_norm; /* added tokens matched before / after normalizing */
    char *chat_template;
    char model_name[16];
    char pre_name[32];
    int from_json;
};

/* ------------------------------------------------------------ lookups */

/* Id of the token whose internal bytes are s[0..n), or -1. */
static inline int rkm_tok__lookup(const rkm_tokenizer *t, const char *s, size_t n)
{
    uint64_t h = rkm_tok__hash_bytes(s, n);
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

/* The byte a SentencePiece byte token's text <0xXX> names (either case of
 * hex digits), or -1 for any other text. */
static inline int rkm_tok__byte_text(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Rank of merging (l, r) with the merged token in *result, or -1. */
static inline int rkm_tok__pair_get(const pair_map *m, int32_t l, int32_t r, int32_t *result)
{
    if (!m->slot) return -1;
    uint64_t k = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
    size_t i = rkm_tok__hash_u64(k) & m->mask;
    while (m->slot[i].key) {
        if (m->slot[i].key == k) {
            *result = m->slot[i].result;
            return m->slot[i].rank;
        }
        i = (i + 1) & m->mask;
    }
    return -1;
}

/* ------------------------------------------------------------ scratch */

typedef struct { size_t s, e; } span;

typedef struct {
    span *v;
    size_t n, cap;
} span_vec;

typedef struct {
    int32_t *v;
    size_t n, cap;
} id_vec;

static inline int rkm_tok__id_push(id_vec *iv, int32_t id)
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

/* Per-call scratch for the models, reused across the words of one call. */
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

/* A text as code points, their RKM_UC_* flags and byte offsets, and the
 * pieces the split steps cut it into. */
typedef struct {
    uint32_t *cp;
    uint8_t *fl;
    uint32_t *off; /* byte offset of each code point; off[n] = byte length */
    size_t cap;
    span_vec a, b; /* a: the pieces (code point indices); b: scratch */
    span_vec mk;   /* one step's matches and gaps in a piece ... */
    uint8_t *mk_m; /* ... and which of them are matches */
    size_t mk_cap;
    rkm_regex_scratch rx;
} tok_pieces;

/* ------------------------------------------------------------ tok_vocab.c */

/* An empty tokenizer of n_vocab ids (all fields defaulted), or NULL. */
rkm_tokenizer *rkm_tok__new(int n_vocab);
/* Sets token id from its file text. Byte-level vocabularies store normal
 * tokens in the GPT-2 byte alphabet; added/control tokens are plain text. */
int rkm_tok__set(rkm_tokenizer *t, int id, const char *s, size_t n, float score, int type, int added);
/* After all tokens are set: lookup map, added-token tries. */
int rkm_tok__finish(rkm_tokenizer *t);
int rkm_tok__pair_map_init(pair_map *m, size_t n);
/* Adds merge "a b" (texts in the vocabulary's own spelling) at rank. */
int rkm_tok__add_merge(rkm_tokenizer *t, const char *a, size_t an, const char *b, size_t bn, int rank);
/* Raw bytes s[0..n) in GPT-2's byte alphabet into out (room for 2n
 * bytes); returns the length. */
size_t rkm_tok__byte_level_encode(const char *s, size_t n, char *out);

/* ------------------------------------------------------------ tok_special.c */

/* The special tokens of a GGUF vocabulary as llama.cpp reads them: the
 * model's and pre-tokenizer's defaults, the tokenizer.ggml.* ids and
 * add_* flags, then rkm_tok__special_finish with the token types
 * llama.cpp forces. Needs the tokens set, before rkm_tok__finish. */
int rkm_tok__special_from_gguf(rkm_tokenizer *t, const struct rkm_gguf *g);
/* Roles found by token text where none is set, the end-of-generation set,
 * and the defaults of flags a loader left undecided (-1). force_types:
 * give the tokens llama.cpp's forced types (GGUF; a tokenizer.json keeps
 * its own, as Hugging Face tokenizers do). 0 or RKM_E* with a message. */
int rkm_tok__special_finish(rkm_tokenizer *t, int force_types);
/* Writes the declared ids and the add_* flags as tokenizer.ggml.* keys. */
/* add_bos_always: write add_bos_token true whatever t says (gemma4). */
void rkm_tok__special_write_gguf(const rkm_tokenizer *t, struct rkm_gguf_writer *w, int add_bos_always);
/* The id field of a role. */
int *rkm_tok__role_id(rkm_tokenizer *t, int role);

/* ------------------------------------------------------------ tok_pretok.c */

/* Appends a regex split step: pattern re[0..n) compiled (RKM_EUNSUPPORTED
 * naming the pattern when it does not compile), the fast path attached
 * when there is one for exactly this pattern. */
int rkm_tok__add_regex_split(rkm_tokenizer *t, const char *re, size_t n, int behavior, int invert);
/* Frees t's split steps. */
void rkm_tok__split_free(rkm_tokenizer *t);
/* The pattern the fast path `kind` (enum pre_kind) implements. */
const char *rkm_tok__fast_pattern(int kind);
/* The split program of llama.cpp's tokenizer.ggml.pre `name` (every type
 * llama.cpp knows; RKM_EUNSUPPORTED naming an unknown one). */
int rkm_tok__set_pre_by_name(rkm_tokenizer *t, const char *name);
/* The name llama.cpp gives t's split program, or "" when no type of
 * llama.cpp's has these regexes. */
void rkm_tok__guess_pre_name(rkm_tokenizer *t);
/* Runs split steps [from, to) over valid UTF-8 s[0..n): the pieces are
 * left in p->a with the byte offsets in p->off. */
int rkm_tok__split(const rkm_tokenizer *t, tok_pieces *p, const char *s, size_t n, int from, int to);
void rkm_tok__pieces_free(tok_pieces *p);

/* ------------------------------------------------------------ tok_normalize.c */

/* Applies t's normalizers to s[0..n) into *res (initialised here). */
int rkm_tok__normalize(const rkm_tokenizer *t, const char *s, size_t n, rkm_buf *res);
/* Appends s[0..n) with every a[0..an) replaced by b[0..bn) to out;
 * 0 or RKM_ENOMEM. */
int rkm_tok__replace_all(const char *s, size_t n, const char *a, size_t an, const char *b, size_t bn, rkm_buf *out);

/* ------------------------------------------------------------ models */

/* Room for n symbols in w's start/len/prev/next/id (tok_encode.c). */
int rkm_tok__ws_reserve(merge_ws *w, size_t n);
/* BPE (byte-level or over characters) and llama.cpp SentencePiece:
 * merges one word s[0..n) and appends its ids (tok_bpe.c). */
int rkm_tok__bpe_word(const rkm_tokenizer *t, merge_ws *w, const char *s, size_t n, id_vec *out);
/* Unigram segmentation of one word (tok_unigram.c). */
int rkm_tok__unigram_words(const rkm_tokenizer *t, merge_ws *w, const char *s, size_t n, id_vec *out);
/* WordPiece greedy longest match of one word (tok_wordpiece.c). */
int rkm_tok__wordpiece_word(const rkm_tokenizer *t, const char *s, size_t n, id_vec *out);

#endif
