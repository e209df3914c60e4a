/*
 * knobs.h - the one registry of rkmojo's environment knobs: every
 * variable the program reads, with its type, default and one line of
 * documentation (`rkmojo doctor --env` prints the table with the values in
 * force). No other file calls getenv().
 *
 * Three scopes:
 *   RKM_KNOB_PROCESS  process-wide tuning (kernel set, threads' spinning,
 *                     huge pages, the NPU runtime's path): read by the
 *                     layer that needs it through rkm_knob();
 *   RKM_KNOB_MODEL    what rkm_model_params carries: the library never
 *                     reads these itself; a program that wants them
 *                     calls rkm_model_params_from_knobs() (the CLI and
 *                     the server do), so an embedding program's params
 *                     are the whole truth;
 *   RKM_KNOB_TEST     test hooks (fault injection, a simulated chip or
 *                     sysfs): not for production use.
 *
 * Values are read from the environment once, on first use; rkm_knob_set
 * overrides one without touching the environment (tests, embedders). Set
 * knobs before the objects that read them are created (a pool reads its
 * spin time when made). Threads: any; the table is guarded by a mutex.
 */
#ifndef RKM_UTIL_KNOBS_H
#define RKM_UTIL_KNOBS_H

enum rkm_knob_id {
    RKM_KNOB_KERNELS = 0, /* process */
    RKM_KNOB_HASH,
    RKM_KNOB_HUGEPAGES,
    RKM_KNOB_SPIN_US,
    RKM_KNOB_PIN,
    RKM_KNOB_RKNN_LIB,
    RKM_KNOB_RKNN_SLOT_BYTES,
    RKM_KNOB_API_KEY,
    RKM_KNOB_ALLOW_HOSTS,
    RKM_KNOB_ALLOW_ORIGINS,
    RKM_KNOB_TMPDIR,
    RKM_KNOB_HF_ENDPOINT,
    RKM_KNOB_HF_TOKEN,
    RKM_KNOB_BACKEND, /* model */
    RKM_KNOB_NPU_DENSE,
    RKM_KNOB_PACK,
    RKM_KNOB_LAZY_EXPERTS,
    RKM_KNOB_VERIFY,
    RKM_KNOB_VERIFY_RESIDENT,
    RKM_KNOB_PREFAULT,
    RKM_KNOB_IO_BACKEND,
    RKM_KNOB_TRACE_OUT,
    RKM_KNOB_FAULT, /* test hooks */
    RKM_KNOB_RKNN_CHIP,
    RKM_KNOB_SYSROOT,
    RKM_KNOB_EMU_CHIP,
    RKM_KNOB_CHAT_DEBUG,
    RKM_KNOB_TOK_REGEX_ONLY,
    RKM_KNOB_PULL_STALL,
    RKM_KNOB_COUNT
};

enum { RKM_KNOB_PROCESS = 0, RKM_KNOB_MODEL, RKM_KNOB_TEST };

typedef struct rkm_knob_info {
    const char *name;  /* the environment variable */
    int scope;         /* RKM_KNOB_PROCESS / MODEL / TEST */
    const char *type;  /* "auto|ref|avx2|...", "integer", "path", "size", "0|1" */
    const char *def;   /* what applies when it is unset */
    const char *doc;   /* one line */
} rkm_knob_info;

const rkm_knob_info *rkm_knob_info_of(int id);
/* The knob's value, or NULL when it is unset or empty. */
const char *rkm_knob(int id);
/* The value as an integer (strtoll, base 0), or def when unset or not a
 * number. */
long long rkm_knob_int(int id, long long def);
/* 1 when the knob is set to exactly `word`. */
int rkm_knob_is(int id, const char *word);
/* Overrides a knob (value copied; NULL unsets it). 0, or RKM_ENOMEM. */
int rkm_knob_set(int id, const char *value);
/* Forgets every override and reads the environment again. */
void rkm_knobs_reload(void);

#endif
