/*
 * tokenizer.h - text <-> token ids, exact against the reference
 * implementations (llama.cpp for GGUF vocabularies, Hugging Face
 * tokenizers for tokenizer.json).
 *
 * Supported: byte-level BPE (GPT-2, Llama 3, Qwen 2/3, DeepSeek LLM/V3,
 * Falcon, OLMo/GPT-NeoX pre-tokenizers), SentencePiece-style BPE from GGUF
 * (`llama` model: merges by token score, byte tokens for unknown
 * characters) and from tokenizer.json (BPE over characters with
 * byte_fallback: Llama 2, Gemma 3), GGUF `gemma4` (Gemma 4: BPE merges
 * by rank over UTF-8 characters, spaces as U+2581, newline runs apart,
 * <0xXX> byte tokens for unknown symbols, llama.cpp's rules; written from
 * a Gemma tokenizer.json for a Gemma 4 model as llama.cpp's converter
 * writes it), SentencePiece Unigram from
 * tokenizer.json and from GGUF `t5` (Viterbi over piece scores, unknown
 * runs fused, byte_fallback; the Precompiled charsmap normalizer) and
 * BERT WordPiece from tokenizer.json. Normalizers: NFC, NFD, NFKC, NFKD,
 * Precompiled, Prepend, Replace (string, or the Regex " {2,}"), Strip,
 * Lowercase, BertNormalizer. Pre-tokenizers: ByteLevel, Split (any regex
 * or literal, every behaviour, invert), Metaspace, WhitespaceSplit,
 * BertPreTokenizer; from GGUF, every tokenizer.ggml.pre type llama.cpp
 * knows. Regexes run in PCRE2 (text/regex.h) with hand-written fast paths
 * for the common patterns (tok_pretok.c); a pattern PCRE2 cannot compile
 * is RKM_EUNSUPPORTED at load, naming it.
 *
 * Threads: a tokenizer is immutable after load and may be used from many
 * threads at once. A rkm_detok belongs to one stream (one thread).
 * Ownership: rkm_tokenizer_free releases everything; strings returned by
 * the getters live as long as the tokenizer.
 */
#ifndef RKM_TOKENIZER_H
#define RKM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

struct rkm_gguf;
struct rkm_gguf_writer;

typedef struct rkm_tokenizer rkm_tokenizer;

/* Token types, as GGUF's tokenizer.ggml.token_type stores them. */
enum rkm_token_type {
    RKM_TOKEN_NORMAL = 1,
    RKM_TOKEN_UNKNOWN = 2,
    RKM_TOKEN_CONTROL = 3,
    RKM_TOKEN_USER_DEFINED = 4,
    RKM_TOKEN_UNUSED = 5,
    RKM_TOKEN_BYTE = 6,
};

/* From a GGUF's tokenizer.ggml.* metadata (see src/format/gguf.h). */
rkm_tokenizer *rkm_tokenizer_from_gguf(const struct rkm_gguf *g);
/* From a file: *.gguf (tokenizer metadata) or tokenizer.json (+ optional
 * tokenizer_config.json path, may be NULL; when NULL, a
 * tokenizer_config.json next to tokenizer.json is used if present).
 * NULL + rkm_err message on failure. */
rkm_tokenizer *rkm_tokenizer_load(const char *path, const char *config_path);
/* From tokenizer.json text in memory (config_json may be NULL). */
rkm_tokenizer *rkm_tokenizer_from_json(const char *json, size_t len, const char *config_json,
                                       size_t config_len);
void rkm_tokenizer_free(rkm_tokenizer *t);

int rkm_tokenizer_n_vocab(const rkm_tokenizer *t);

/* Encodes; writes up to cap ids, returns count needed or negative RKM_E*.
 * add_bos: per the tokenizer's add_bos setting. parse_special: recognise
 * special-token text (added tokens marked special); added tokens that are
 * not special (user-defined) are always recognised, as the references do.
 * Invalid UTF-8 is RKM_EINVAL. */
int rkm_tokenizer_encode(const rkm_tokenizer *t, const char *text, size_t len, int32_t *ids,
                         int cap, int add_bos, int parse_special);
/* The tokenizer's normalizer chain (tokenizer.json "normalizer"; for GGUF
 * t5 the charsmap and whitespace rules) applied to valid UTF-8 s[0..n),
 * into a malloc'd NUL-terminated *out. 0 or a negative RKM_E*. */
int rkm_tokenizer_normalize(const rkm_tokenizer *t, const char *s, size_t n, char **out, size_t *out_len);
/* Raw bytes of one token's text (byte tokens decoded, SentencePiece '▁' ->
 * ' '); control tokens give their text. Returns the length, or minus the
 * size needed when cap is too small; an id out of range gives 0 bytes. */
int rkm_tokenizer_piece(const rkm_tokenizer *t, int32_t id, char *buf, int cap);
int rkm_tokenizer_bos(const rkm_tokenizer *t); /* -1 if none */
int rkm_tokenizer_eos(const rkm_tokenizer *t);
/* End of generation: eos, eot, eom and the tokens llama.cpp stops on by
 * their text (<|im_end|>, <end_of_turn>, <|return|>, ...; see tok_special.c). */
int rkm_tokenizer_is_eog(const rkm_tokenizer *t, int32_t id);
int rkm_tokenizer_add_bos(const rkm_tokenizer *t); /* encode(add_bos=1) starts with bos */
int rkm_tokenizer_add_eos(const rkm_tokenizer *t); /* ... and ends with eos */
int rkm_tokenizer_add_sep(const rkm_tokenizer *t); /* llama.cpp's add-SEP flag (BERT, RoBERTa) */

/* The special-token roles llama.cpp keeps, in its order of GGUF keys. */
enum rkm_tok_role {
    RKM_TOK_BOS, RKM_TOK_EOS, RKM_TOK_UNK, RKM_TOK_SEP, RKM_TOK_PAD, RKM_TOK_MASK,
    RKM_TOK_EOT,     /* end of turn */
    RKM_TOK_EOM,     /* end of message (Llama 3.1 tool calls) */
    RKM_TOK_FIM_PRE, RKM_TOK_FIM_SUF, RKM_TOK_FIM_MID, RKM_TOK_FIM_PAD, RKM_TOK_FIM_REP, RKM_TOK_FIM_SEP,
    RKM_TOK_N_ROLES
};
/* The id of a role, or -1 (none, or a role out of range). */
int rkm_tokenizer_special(const rkm_tokenizer *t, int role);
/* "bos", "eot", "fim_pre", ... (llama.cpp's names), or NULL. */
const char *rkm_tokenizer_role_name(int role);
const char *rkm_tokenizer_token_text(const rkm_tokenizer *t, int32_t id); /* e.g. "<|im_start|>" */
int rkm_tokenizer_token_type(const rkm_tokenizer *t, int32_t id);        /* enum rkm_token_type */
/* Id of a token by its exact text (added tokens first), or -1. */
int rkm_tokenizer_find(const rkm_tokenizer *t, const char *text);
const char *rkm_tokenizer_chat_template(const rkm_tokenizer *t); /* or NULL */
/* "gpt2" (byte-level BPE), "llama" (SentencePiece style), "t5"
 * (Unigram), "gemma4" (GGUF gemma4) or "bert" (WordPiece), and the
 * pre-tokenizer name as llama.cpp spells it ("llama-bpe", "qwen2", ...). */
const char *rkm_tokenizer_model_name(const rkm_tokenizer *t);
const char *rkm_tokenizer_pre_name(const rkm_tokenizer *t);
/* llama.cpp's pre-tokenizer types, i = 0, 1, ...: the type's
 * tokenizer.ggml.pre names (space-separated, the first is the one written),
 * its regexes (NULL-terminated, in order), whether a piece that is a token
 * skips the merges, whether it splits a BPE over UTF-8 (model gemma4)
 * rather than byte-level BPE. NULL past the last type. */
const char *rkm_tokenizer_pre_type(int i, const char *const **regexes, int *ignore_merges, int *raw);

/* Whole-sequence decode into buf (the way the reference decoders do:
 * SentencePiece drops the space its prefix added; invalid UTF-8 becomes
 * U+FFFD). Writes at most cap bytes and returns the length needed (may be
 * > cap: call again with a larger buffer), or a negative RKM_E* (an id out
 * of range is RKM_EINVAL). */
int rkm_tokenizer_decode(const rkm_tokenizer *t, const int32_t *ids, int n, char *buf, int cap);

/* Streaming decoder: feeds ids, emits only complete UTF-8 sequences;
 * bytes that can never form a valid sequence come out as U+FFFD. */
typedef struct rkm_detok {
    unsigned char pend[8]; /* bytes of an incomplete UTF-8 sequence */
    int n_pend;
    int n_pushed;          /* ids pushed so far (for the leading-space rule) */
} rkm_detok;
void rkm_detok_init(rkm_detok *d);
/* Returns bytes written to out (cap >= 16 + the longest piece suffices),
 * or RKM_ENOSPC (nothing consumed) if out is too small. */
int rkm_detok_push(rkm_detok *d, const rkm_tokenizer *t, int32_t id, char *out, int cap);
int rkm_detok_flush(rkm_detok *d, char *out, int cap);

/* The built-in small byte-level BPE vocabulary for synthetic models: 256
 * GPT-2 byte symbols, merges learned deterministically by BPE training on
 * a small embedded English/code text, then control tokens <|endoftext|>
 * (bos=eos), <|pad|>, <|im_start|>, <|im_end|>; n_vocab total (>= 260).
 * When the text has no more pairs to merge, the gap before the four
 * control tokens is filled with <|reserved_N|> control tokens. */
rkm_tokenizer *rkm_tokenizer_builtin(int n_vocab);

/* Writes the tokenizer as GGUF metadata (tokenizer.ggml.model, .pre,
 * .tokens, .token_type, .merges or .scores, the special ids its source
 * named (llama.cpp finds the others again), add_bos/eos_token,
 * chat_template; for Unigram "t5" also add_space_prefix,
 * remove_extra_whitespaces and precompiled_charsmap) into a writer, the
 * way llama.cpp's GGUF files store it. RKM_EUNSUPPORTED for WordPiece and
 * for Unigram normalizers llama.cpp's t5 cannot express (NFKC, ...). */
int rkm_tokenizer_write_gguf(const rkm_tokenizer *t, struct rkm_gguf_writer *w);
/* The same for a model of GGUF architecture arch (general.architecture,
 * may be NULL): for "gemma4", a Gemma tokenizer.json (BPE over characters
 * with byte_fallback and the Replace ' ' -> U+2581 normalizer) is written
 * as llama.cpp's converter writes Gemma 4's: model gemma4, tokens by id,
 * scores -1000, token types (<0xXX> BYTE, special tokens CONTROL, Gemma
 * 4's <|channel>, <channel|>, <|tool_call>, <tool_call|>,
 * <|tool_response>, <tool_response|> and <|"|> USER_DEFINED, the rest of
 * model.vocab NORMAL), merges, special ids, add_bos_token true,
 * add_space_prefix false, no pre-tokenizer name. */
int rkm_tokenizer_write_gguf_arch(const rkm_tokenizer *t, struct rkm_gguf_writer *w, const char *arch);
/* The tokenizer.ggml.model rkm_tokenizer_write_gguf_arch writes for arch:
 * "gpt2", "llama", "t5" or "gemma4"; NULL if none (WordPiece). */
const char *rkm_tokenizer_gguf_model(const rkm_tokenizer *t, const char *arch);
/* Writes a Hugging Face tokenizer.json equivalent (byte-level BPE
 * tokenizers; others are RKM_EUNSUPPORTED). */
int rkm_tokenizer_write_hf_json(const rkm_tokenizer *t, const char *path);
/* Writes the matching tokenizer_config.json (special tokens, add_bos,
 * chat template). */
int rkm_tokenizer_write_hf_config(const rkm_tokenizer *t, const char *path);

#endif
