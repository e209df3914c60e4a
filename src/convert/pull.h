/*
 * pull.h - `rkmojo pull`: a model installed straight from an http(s) URL
 * or a Hugging Face repository, converted while its bytes arrive, so the
 * source never lands on disk whole.
 *
 * The source is one GGUF, or a repository's safetensors checkpoint
 * (hf://ORG/REPO without a file: config.json, the shard index and the
 * tokenizer's and generation's files fetched whole into OUT/.pull/hf,
 * then the shards). The remote files are mirrored side by side into one
 * sparse staging file inside the output directory (OUT/.pull/NAME): each
 * file's header first, then its tensors as byte ranges, several requests
 * at once, in the order the converter reads them (rkm_convert_read_order,
 * mapped to file bytes by rkm_source_file_spans), at most `window` bytes
 * ahead of it. Once the converter has used a tensor its bytes are punched
 * out of the staging file (fallocate), so the disk holds the output plus
 * the window. The output is the converter's (rkm_convert_source) for the
 * same options: byte for byte what `rkmojo convert` writes from the
 * downloaded file or directory (a checkpoint's manifest names it as
 * "hf:ORG/REPO@REVISION").
 *
 * Resumable: the conversion records its progress (convert.h, resume_key:
 * the URL, the file's size and ETag, the options), so a pull interrupted
 * at any point (an error, SIGKILL, a reboot) and run again keeps
 * resident.bin and every expert file that landed and whose checksums read
 * back, and fetches only the rest; a file changed on the server starts
 * over. The manifest is written last.
 *
 * Checked: every answer's size and ETag (fetch.h); and when the server
 * names each file's SHA-256 (Hugging Face does for its large files), the
 * files are hashed in order while the conversion runs (a hasher
 * thread; a used piece is punched only once hashed, so pieces the
 * converter used early wait for the hash to reach them) and compared
 * before the manifest is written: a mismatch fails the pull and drops its
 * progress. The hash's state is kept with the conversion's progress, so a
 * resumed pull goes on hashing where the interrupted one was (reading the
 * kept outputs' bytes into memory, not to disk); a progress without it
 * (the hash was not asked for then) says the check was not made.
 *
 * Threads: the calling thread converts (with the converter's workers);
 * `connections` fetch threads run ahead of it. Ownership: nothing
 * outlives the call but the output; on failure the staging file goes,
 * the converted outputs and their progress stay for the next run.
 */
#ifndef RKM_CONVERT_PULL_H
#define RKM_CONVERT_PULL_H

#include <stdint.h>
#include <stdio.h>

#include "convert/convert.h"

typedef struct rkm_pull_opts {
    rkm_convert_opts conv; /* --quant, --target, --expert-layout (its progress is not used) */
    FILE *progress;        /* NULL: silent */
    int connections;       /* requests at once (0: 4) */
    uint64_t window;       /* bytes fetched ahead of the converter at most (0: 256 MiB) */
    const char *token;     /* bearer token (NULL: $HF_TOKEN for Hugging Face sources) */
    volatile int *cancel;  /* nonzero: stop with RKM_ECANCELED */
    /* Called as bytes arrive (from the fetch and converter threads, one
     * at a time): received so far of total (what this pull has to receive),
     * and the file's ETag ("" if none). NULL: none. */
    void (*on_progress)(void *user, uint64_t received, uint64_t total, const char *etag);
    void *user;
} rkm_pull_opts;

/* What a pull did, for its report and its tests. */
typedef struct rkm_pull_stats {
    uint64_t source_bytes;  /* the remote file's size */
    uint64_t fetched_bytes; /* bytes received (a range fetched twice counts twice) */
    uint64_t peak_staged;   /* most bytes held in the staging file at once */
    int punched;            /* 1 if the staging file's used bytes were freed as it went */
    int resumed;            /* outputs kept from an interrupted pull (convert.h's resumed) */
    int verified;           /* the file's SHA-256 (named by the server) checked: 1; named but a
                               resumed pull's progress held no hash state: -1; not named: 0 */
} rkm_pull_stats;

/* The URL a source names: http(s) URLs as they are; hf://ORG/REPO:FILE
 * (or hf://ORG/REPO@REV:FILE) as $HF_ENDPOINT/ORG/REPO/resolve/REV/FILE
 * (endpoint https://huggingface.co, revision main by default), and
 * hf://ORG/REPO[@REV] as the repository's .../resolve/REV/. NULL (and a
 * message) for a source that is not a URL or a malformed name; malloc'd. */
char *rkm_pull_url(const char *source);

/* The model's name a source suggests: its last path part (after '/' or
 * ':', before any query) without ".gguf", into name. -1 when that is
 * empty or does not fit. */
int rkm_pull_model_name(const char *source, char *name, size_t cap);

/* Installs source (a URL, an hf:// name, or a local GGUF or Hugging Face
 * directory, which is converted as it is) as the model directory out. */
int rkm_pull(const char *source, const char *out, const rkm_pull_opts *o, rkm_pull_stats *st);

#endif
