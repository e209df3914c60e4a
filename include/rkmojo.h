/*
 * rkmojo.h - the one public header of librkmojo.
 *
 * What an embedding program (the CLI, the HTTP server, a user's program)
 * needs: error codes, opening a converted .rkmojo model directory, sessions
 * (one KV cache + sampler state each; many sessions share one model),
 * prompt evaluation, token-by-token generation with a stopping callback,
 * cancellation from another thread, statistics, and the tokenizer.
 *
 * Threads: a model is read-only after rkm_model_open and may be shared by
 * sessions on different threads; one session must be driven by one thread at
 * a time, except rkm_session_cancel, which any thread may call.
 *
 * Ownership: every _open/_new function has a _close/_free that accepts NULL.
 * Functions return 0 or a negative RKM_E* code; the message of the last
 * failure on the calling thread is rkm_last_error().
 */
#ifndef RKMOJO_H
#define RKMOJO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RKM_VERSION_STRING "0.1.0"

/* Error codes: X(name, value, text). rkm_strerror() is generated from it. */
#define RKM_ERRORS(X)                                           \
    X(RKM_OK, 0, "success")                                     \
    X(RKM_EINVAL, -1, "invalid argument")                       \
    X(RKM_ENOMEM, -2, "out of memory")                          \
    X(RKM_EIO, -3, "input/output error")                        \
    X(RKM_EFORMAT, -4, "malformed or corrupt file")             \
    X(RKM_ECHECKSUM, -5, "checksum mismatch")                   \
    X(RKM_EUNSUPPORTED, -6, "unsupported")                      \
    X(RKM_ENOENT, -7, "not found")                              \
    X(RKM_ECTXFULL, -8, "context is full")                      \
    X(RKM_ECANCELED, -9, "canceled")                            \
    X(RKM_EBUDGET, -10, "memory budget too small")              \
    X(RKM_ENOSPC, -11, "no space left on device")

enum rkm_error {
#define RKM__ENUM(name, val, text) name = val,
    RKM_ERRORS(RKM__ENUM)
#undef RKM__ENUM
};

const char *rkm_strerror(int code);
/* Message of the last error set on this thread ("" if none). */
const char *rkm_last_error(void);

/* ---------------------------------------------------------------- model */

typedef struct rkm_model rkm_model;
typedef struct rkm_session rkm_session;

typedef struct rkm_model_params {
    int n_threads;               /* 0: the performance cores */
    uint64_t mem_budget_bytes;   /* 0: no budget (experts stay resident) */
    int expert_cache_slots;      /* per MoE layer; 0: from the budget */
    int cache_policy;            /* 0 LFU (recency tie-break), 1 LRU */
    int prefetch;                /* -1 default (off), 0 off, 1 on */
    int io_threads;              /* 0: default */
    /* The fields below take 0 as their default. */
    int backend;                 /* 0 auto ($RKM_BACKEND, else the NPU when the
                                    model has NPU weights and it is usable),
                                    1 cpu, 2 rknn (docs/NPU.md) */
    int plan_n_seq;              /* sessions whose KV caches the budget plans for
                                    at once (a server's slots); 0: 1; -1: up to
                                    4, fewer when their KV would cost more than a
                                    quarter of the expert slots one session
                                    leaves (rkm_model_plan says how many) */
    int plan_n_ctx;              /* KV tokens per session the memory budget plans
                                    for (set it to the sessions' n_ctx);
                                    0: min(4096, trained) */
    int lazy_experts;            /* with every expert resident (no budget): 0 reads
                                    them all in the background from open, 1 each
                                    on first use ($RKM_LAZY_EXPERTS=1 too) */
    int cache_scope;             /* with a budget: 0 default (one pool when the
                                    budget gives at least 4x top-k slots per layer),
                                    1 each MoE layer its own slots, 2 one pool of the
                                    same bytes shared by every layer (docs/STREAMING.md) */
    int npu_dense;               /* int8 NPU copies of the resident matrices for
                                    prefill: 0 with the NPU backend and no budget,
                                    1 never, 2 also on the CPU backend (its rknn_i8
                                    kernel; tests compare the two paths) */
    int pack;                    /* matrices in the kernels' packed layout: 0 all,
                                    1 none (the file's layout), 2 resident only */
    int verify;                  /* expert checksums: 0 every read, 1 the first
                                    read of each expert, 2 never (measurements) */
    int prefault;                /* slot pages populated ahead of reads: 0 when
                                    there is a budget, 1 never, 2 always */
    int io_backend;              /* expert reads: 0 io_uring where allowed, else
                                    pread; 1 pread; 2 io_uring */
    const char *trace_out;       /* routing trace file (trace-sim), or NULL */
    int verify_resident;         /* resident weights' checksums: 0 checked at open
                                    (a mismatch fails it), 1 checked by a thread
                                    after open (evals fail once one differs),
                                    2 never (rkm_model_check) */
} rkm_model_params;

/* Every field zero: the defaults above. Reads nothing from the
 * environment: the params are the whole truth. */
void rkm_model_params_default(rkm_model_params *p);
/* Applies the environment knobs of model scope (RKM_BACKEND, RKM_NPU_DENSE,
 * RKM_PACK, RKM_LAZY_EXPERTS, RKM_VERIFY, RKM_VERIFY_RESIDENT, RKM_PREFAULT,
 * RKM_IO_BACKEND, RKM_TRACE_OUT;
 * `rkmojo doctor --env` lists them) to fields still at their defaults, as
 * the CLI and the server do. RKM_EINVAL naming the knob for a bad value. */
int rkm_model_params_from_knobs(rkm_model_params *p);

/* Opens a .rkmojo directory. NULL on failure, reason in rkm_last_error(). */
rkm_model *rkm_model_open(const char *dir, const rkm_model_params *p);
void rkm_model_close(rkm_model *m);

/* 0 while the model's weights are sound; RKM_ECHECKSUM once the
 * background check (verify_resident 1) found a resident tensor whose bytes
 * differ from its checksum, RKM_EIO once resident.bin shrank under the
 * running model. Every eval fails with the same error from then on: load
 * the model again. The message is in rkm_last_error(). */
int rkm_model_check(const rkm_model *m);
/* 1 when the model's files on disk were replaced, rewritten or removed
 * since it was opened (open it again to use what is there now; the
 * message names the file), else 0. A few stat calls. */
int rkm_model_files_changed(const rkm_model *m);
/* 1 once the resident weights' checksums have all been checked (at open,
 * or by the background check), else 0. */
int rkm_model_verified(const rkm_model *m);

/* The backend the model's matmuls run on and why, in one line
 * ("rknn: rk3588 ..." or "cpu: <reason>"). */
const char *rkm_model_backend(const rkm_model *m);

/* Hyper-parameters an embedder may want. */
int rkm_model_n_vocab(const rkm_model *m);
int rkm_model_n_embd(const rkm_model *m);
int rkm_model_n_layer(const rkm_model *m);
int rkm_model_n_ctx_train(const rkm_model *m);
/* The memory plan the model was opened with: the sessions and tokens per
 * session whose KV it counts (*n_seq, *n_ctx; either may be NULL), and one
 * line with every figure (resident, KV, scratch, expert slots) in buf,
 * which is returned. */
const char *rkm_model_plan(const rkm_model *m, int *n_seq, int *n_ctx, char *buf, size_t cap);
const char *rkm_model_arch(const rkm_model *m);
/* The model's chat template (Jinja source) or NULL if it has none. */
const char *rkm_model_chat_template(const rkm_model *m);

/* ------------------------------------------------------------- tokens */

/* Tokenizes text. Writes at most cap ids, returns the number needed (may be
 * > cap; call again with a larger buffer) or a negative error.
 * parse_special: recognise special-token text (never for untrusted user
 * text). add_bos: prepend BOS if the model's tokenizer says so. */
int rkm_tokenize(const rkm_model *m, const char *text, size_t len,
                 int32_t *ids, int cap, int add_bos, int parse_special);
/* The same into a malloc'd array (*ids, caller frees); returns the count,
 * or a negative error with the message in rkm_last_error(). */
int rkm_tokenize_alloc(const rkm_model *m, const char *text, size_t len, int add_bos, int parse_special,
                       int32_t **ids);
/* Appends the text of one token to buf; returns bytes written, or the
 * negative size needed. */
int rkm_token_to_piece(const rkm_model *m, int32_t id, char *buf, int cap);
int rkm_token_bos(const rkm_model *m);
int rkm_token_eos(const rkm_model *m);
int rkm_token_is_eog(const rkm_model *m, int32_t id);

/* ----------------------------------------------------------- sessions */

typedef struct rkm_sampler_params {
    float temperature;       /* 0: greedy */
    int top_k;               /* 0: off */
    float top_p;             /* 1: off */
    float min_p;             /* 0: off */
    float repeat_penalty;    /* 1: off */
    int repeat_last_n;       /* window of the repeat penalty */
    float presence_penalty;  /* OpenAI semantics, 0: off */
    float frequency_penalty; /* OpenAI semantics, 0: off */
    uint64_t seed;
} rkm_sampler_params;

/* The one set of defaults (docs/SERVER.md): temperature 0.8, top_k 40,
 * top_p 0.95, min_p 0.05, repeat_penalty 1 (off) over 64 tokens, no
 * presence / frequency penalty, seed 0x5eed. */
void rkm_sampler_params_default(rkm_sampler_params *p);
/* The defaults for generating with model m (m may be NULL): the one set
 * above, with the settings the model's authors recommend laid over it
 * (GGUF general.sampling.*, Hugging Face generation_config.json, kept by
 * the converter in the manifest). What a front end starts from before
 * applying the settings a user or request gave. */
void rkm_sampler_params_for_model(const rkm_model *m, rkm_sampler_params *p);

typedef struct rkm_session_params {
    int n_ctx;         /* KV capacity in tokens; 0: min(4096, trained) */
    int n_chunk;       /* prefill chunk rows; 0: 128 */
    rkm_sampler_params sampler;
} rkm_session_params;

void rkm_session_params_default(rkm_session_params *p);

rkm_session *rkm_session_new(rkm_model *m, const rkm_session_params *p);
void rkm_session_free(rkm_session *s);

/* Number of tokens held in the KV cache. */
int rkm_session_n_past(const rkm_session *s);
/* KV capacity in tokens (n_ctx after defaults). */
int rkm_session_n_ctx(const rkm_session *s);
/* Drops KV rows from position n on (n <= n_past). */
int rkm_session_truncate(rkm_session *s, int n);

/* Appends tokens to the context (chunked prefill). When logits is non-NULL
 * it receives the logits after the last token (n_vocab floats). */
int rkm_session_eval(rkm_session *s, const int32_t *ids, int n, float *logits);

/* Appends n rows of input embeddings (n x rkm_session_n_embd_in floats,
 * the vision tower's rows of an image, taken as they are) to the context;
 * logits as rkm_session_eval. The rows are recorded in rkm_session_tokens
 * as rkm_media_token(key, 0..n-1): key identifies the image (a hash of
 * its bytes), so that comparing two sessions' ids tells images apart.
 * nx: the image's tokens per row (0: one row); models with multi-axis
 * RoPE (Qwen3-VL) place row i at time p, height p + i / nx, width p +
 * i % nx from the next position p, and the text after the image at p +
 * max(nx, n / nx), as llama.cpp's mtmd does; other models one position a
 * row. bidirectional: every row attends to every other row of the image
 * (Gemma 4), which then must fit one prefill chunk (n <= n_chunk); else
 * causally. Rows given this way cannot be evaluated again:
 * rkm_session_truncate refuses (RKM_EUNSUPPORTED) a cut that would replay
 * them. */
int rkm_session_eval_embd(rkm_session *s, const float *rows, int n, int nx, uint64_t key, int bidirectional,
                          float *logits);
/* Floats in one row of rkm_session_eval_embd: n_embd, times 1 + the
 * deep-stack rows of Qwen3-VL's text models (added after their first
 * layers). */
int rkm_session_n_embd_in(const rkm_session *s);
/* The RoPE position the next token takes: n_past, but for models whose
 * images take fewer positions than rows (multi-axis RoPE). */
int rkm_session_n_pos(const rkm_session *s);
/* The id recorded for row i of the embedding rows keyed key: negative
 * (below -1), never a vocabulary id; distinct keys give distinct ids but
 * with a chance of 2^-30 per row. */
int32_t rkm_media_token(uint64_t key, int i);

/* Logits of every position of ids (n * n_vocab floats), for perplexity. */
int rkm_session_eval_all(rkm_session *s, const int32_t *ids, int n,
                         float *logits_all);

/* Replaces the session's sampler settings and restarts its random
 * sequence from p->seed (e.g. per request in a server). */
int rkm_session_set_sampler(rkm_session *s, const rkm_sampler_params *p);

/* Holds what the session generates from now on to the sentences of a
 * grammar in GBNF, llama.cpp's text form (start rule "root"): each pick
 * is a token the grammar allows, and an end-of-generation token comes
 * only where the text is complete (and is the only choice once nothing
 * can follow). NULL removes it. RKM_EINVAL names a grammar error. */
int rkm_session_set_grammar(rkm_session *s, const char *gbnf);
/* The GBNF for a JSON Schema (schema: JSON text of len bytes; NULL: any
 * JSON object), malloc'd, the caller frees it; NULL with the message in
 * rkm_last_error() for bad JSON or a keyword it does not support (named,
 * with its place in the schema). */
char *rkm_json_schema_grammar(const char *schema, size_t len);

/* Samples the next id from the current logits with the session's sampler. */
int rkm_session_sample(rkm_session *s, int32_t *out_id);

/* Log-probabilities from the current logits (those the next token is
 * sampled from; inside an rkm_token_cb, those the token came from): the
 * model's own distribution (softmax at temperature 1, before penalties and
 * truncation). *lp gets id's; the k most likely ids (k <= 64) and theirs go
 * to top_ids / top_lps, best first. */
int rkm_session_logprobs(const rkm_session *s, int32_t id, int k, float *lp, int32_t *top_ids, float *top_lps);

/* Called for each generated token; return non-zero to stop. */
typedef int (*rkm_token_cb)(int32_t id, void *user);

/* Generates up to n_max tokens after what has been evaluated: sample, call
 * cb, feed the token back. Stops at an end-of-generation token (not passed
 * to cb), when cb returns non-zero, or on cancel (RKM_ECANCELED). */
int rkm_session_generate(rkm_session *s, int n_max, rkm_token_cb cb,
                         void *user);

/* Thread-safe: the running eval/generate returns RKM_ECANCELED soon. */
void rkm_session_cancel(rkm_session *s);

/* Batches: several sessions of one model advanced in one forward pass.
 * Each session's rows (a prompt chunk, or the one token it decoded) join
 * the same matmuls, so every weight is read once for all of them, and a
 * routed expert is read and applied once for every row that chose it.
 * Each session keeps its own cache, sampler, grammar, limits and stop
 * rules: after rkm_batch_eval it stands as rkm_session_eval would leave
 * it (its logits ready for rkm_session_sample). A sequence leaves a batch
 * by not being passed to the next step. With the packed q8_0 / q4_0 /
 * MXFP4 weights rkmojo stores, a sequence's logits are bit-identical to
 * running it alone. The batch owns the scratch for max_rows rows of
 * sessions holding up to n_ctx positions (0: the model's default). One
 * thread drives a batch; batches and sessions of one model serialise on
 * it, one forward pass at a time. A pass's expert-cache hits, misses,
 * bytes read and IO wait are shared out among its sessions' rkm_stats in
 * proportion to their rows. */
typedef struct rkm_batch rkm_batch;
rkm_batch *rkm_batch_new(rkm_model *m, int max_rows, int n_ctx);
void rkm_batch_free(rkm_batch *b);
/* One pass: session ss[i] evaluates n[i] >= 1 tokens ids[i], for
 * i < n_seq (distinct sessions of the batch's model, sum of n[i] <=
 * max_rows; on a model with sliding-window layers n[i] at most the
 * session's n_chunk). On an error no session's n_past moves. */
int rkm_batch_eval(rkm_batch *b, rkm_session *const *ss, const int32_t *const *ids, const int *n, int n_seq);
/* Thread-safe: the running rkm_batch_eval returns RKM_ECANCELED soon. */
void rkm_batch_cancel(rkm_batch *b);

/* Token ids held in the KV cache (n_past of them; an image's rows as
 * rkm_media_token ids, below -1); valid until the next call that changes
 * the session. */
const int32_t *rkm_session_tokens(const rkm_session *s, int *n);

/* Makes dst hold what src holds (tokens, K/V rows, the current logits),
 * as if it had evaluated the same tokens: several continuations of one
 * prompt evaluated once. Sessions of one model; dst's n_ctx at least src's
 * n_past. Sampler, grammar and stats stay dst's own. */
int rkm_session_copy(rkm_session *dst, const rkm_session *src);

/* Saves the KV state (tokens + K/V rows) to path: written to a temporary
 * file, checksummed, fsynced and renamed. */
int rkm_session_save(const rkm_session *s, const char *path);
/* Restores a saved state into a session of the same model; verifies the
 * model identity and the checksum (RKM_EFORMAT / RKM_ECHECKSUM). */
int rkm_session_load(rkm_session *s, const char *path);

/* Last hidden state (after the final norm) of the last evaluated token,
 * n_embd floats. */
int rkm_session_embedding(const rkm_session *s, float *out);

/* Router decisions, for tests and debugging (rkmojo perplexity
 * --router-margins, --router-ties). A decision's margin is the k-th
 * selected expert's router probability minus the best one left out: a
 * small margin is a near-tie that rounding may decide either way. */
/* Keeps every MoE layer's margin at each position evaluated from now on
 * (on), or stops and frees them (off). n_ctx x n_layer floats. */
int rkm_session_record_router(rkm_session *s, int on);
/* The recorded margins of positions [pos, pos + n): n rows of
 * rkm_model_n_layer floats, NaN for a layer without routed experts or a
 * position not evaluated while recording. */
int rkm_session_router_margins(const rkm_session *s, int pos, int n, float *out);
/* From the next evaluation on, layer il at position pos takes the
 * runner-up expert in place of its k-th selection; il < 0 clears it. */
int rkm_session_router_flip(rkm_session *s, int il, int pos);

/* The router-tie analysis of ids (n <= n_ctx, evaluated from position 0):
 * every decision with a margin under thresh is forced, one at a time, to
 * the runner-up, and the ids evaluated again from its position; tie[p]
 * is 1 where that changes position p's top-1 or brings its top two logits
 * within tie_gap. The session is left holding a prefix of the ids. */
typedef struct rkm_router_ties {
    int n_flipped;     /* decisions under the threshold (each forced once) */
    int *top1;         /* n: the argmax after each position, unforced */
    float *gap;        /* n: its logit gap to the runner-up */
    float *min_margin; /* n: the smallest margin over the layers (+inf: none) */
    int *min_layer;    /* n: its layer (-1: none) */
    char *tie;         /* n: 1 at a router tie */
    float *margins;    /* n x n_layer: every margin (NaN: no routed experts) */
} rkm_router_ties;
int rkm_router_ties_run(rkm_session *s, const int32_t *ids, int n, float thresh, float tie_gap,
                        rkm_router_ties *out);
void rkm_router_ties_free(rkm_router_ties *t);

typedef struct rkm_stats {
    int n_prompt;              /* tokens evaluated by eval calls */
    int n_gen;                 /* tokens generated */
    double t_prompt_s;         /* wall time of prompt evaluation */
    double t_gen_s;            /* wall time of generation */
    double ttft_s;             /* first eval start to first token sampled */
    uint64_t expert_hits, expert_misses;
    uint64_t bytes_read;       /* expert bytes read from disk */
    double io_wait_s;          /* time the compute threads waited for IO */
    int grammar_picks;         /* tokens sampled under a grammar */
    int grammar_masked;        /* ... of which the sampler's own pick broke it (a masked draw) */
    int grammar_masks_built;   /* masks walked over the vocabulary (the others came from the cache) */
} rkm_stats;

void rkm_session_stats(const rkm_session *s, rkm_stats *out);
void rkm_session_stats_reset(rkm_session *s);

/* --------------------------------------------------------- text output */

/* Turns generated tokens into text that is safe to show or send: never half
 * a UTF-8 character, never a prefix of a stop string that may still
 * complete, nothing from a matched stop string on. Ids are detokenized with
 * the model's streaming decoder; bytes that are not valid UTF-8 come out as
 * U+FFFD (one per invalid byte), before stop strings are matched, so stops
 * match the text the reader sees. One textout per generation, one thread. */
typedef struct rkm_textout rkm_textout;

/* stop: n_stop strings, copied (empty ones are ignored). m detokenizes the
 * ids given to rkm_textout_push_token (NULL: bytes only). NULL + reason in
 * rkm_last_error() when out of memory. */
rkm_textout *rkm_textout_new(const rkm_model *m, const char *const *stop, int n_stop);
void rkm_textout_free(rkm_textout *t);
/* Adds one generated token (resp. n raw bytes). *text receives the text
 * now safe to emit, NUL-terminated, *len bytes (may be 0); it stays valid
 * until the next call on t. Returns 1 when a stop string completed (the
 * generation should stop; later pushes emit nothing), 0, or a negative
 * RKM_E* code. */
int rkm_textout_push_token(rkm_textout *t, int32_t id, const char **text, size_t *len);
int rkm_textout_push_bytes(rkm_textout *t, const char *bytes, size_t n, const char **text,
                           size_t *len);
/* End of generation: whatever is still held back, an unfinished UTF-8
 * sequence at the very end as U+FFFD. Same returns as the pushes. */
int rkm_textout_flush(rkm_textout *t, const char **text, size_t *len);

/* ---------------------------------------------------------- chat prompt */

/* One turn of a conversation (the same shape as the chat template's). */
typedef struct rkm_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool" */
    const char *content; /* UTF-8 */
} rkm_chat_message;

/* The prompt text of a conversation, rendered with the model's chat
 * template. A model without one (or with an empty one) gets the built-in
 * template of its architecture, which is ChatML for every architecture
 * without a known format, and a one-line warning on stderr the first time
 * a model is rendered that way. *add_bos (may be NULL) is set to 1 when
 * the caller should let the tokenizer add BOS, 0 when the text already
 * starts with the BOS token's text. Tokenize the result with special-token
 * parsing. Malloc'd, or NULL + rkm_last_error(). */
char *rkm_chat_prompt(const rkm_model *m, const rkm_chat_message *msgs, int n_msgs,
                      int add_generation_prompt, int *add_bos);
/* The same with more template variables: vars_json, a JSON object whose
 * members the template sees (e.g. {"enable_thinking": false,
 * "reasoning_effort": "high", "tools": [...]}); NULL: none. A "messages"
 * member replaces msgs: messages as the template reads them, with the
 * fields rkm_chat_message has no room for (an assistant's "tool_calls", a
 * tool result's "tool_call_id" and "name"); pass msgs NULL, n_msgs 0. */
char *rkm_chat_prompt_vars(const rkm_model *m, const rkm_chat_message *msgs, int n_msgs,
                           int add_generation_prompt, int *add_bos, const char *vars_json);

/* Peak resident set size of the process, in bytes. */
uint64_t rkm_peak_rss_bytes(void);

#ifdef __cplusplus
}
#endif
#endif /* RKMOJO_H */
