/*
 * knobs.c - the registry of environment knobs (knobs.h): the table, and
 * one snapshot of their values taken from the environment on first use.
 *
 * Threads: any; `mu` guards the snapshot. Values returned by rkm_knob()
 * stay valid until the knob is set again or the registry reloaded (both
 * are set-up-time operations).
 */
#include "util/knobs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/common.h"

static const rkm_knob_info table[RKM_KNOB_COUNT] = {
    [RKM_KNOB_KERNELS] = {"RKM_KERNELS", RKM_KNOB_PROCESS, "ref|avx2|avxvnni|avx512|avx512vnni|neon|dotprod",
                          "the best the CPU runs", "forces one CPU kernel set (an unsupported one is refused with a message)"},
    [RKM_KNOB_HASH] = {"RKM_HASH", RKM_KNOB_PROCESS, "sse2|avx2", "the widest the CPU runs",
                       "caps the XXH3 checksum implementation"},
    [RKM_KNOB_HUGEPAGES] = {"RKM_HUGEPAGES", RKM_KNOB_PROCESS, "0|1", "1",
                            "0: no transparent-huge-page advice on weight, slot and KV mappings"},
    [RKM_KNOB_SPIN_US] = {"RKM_SPIN_US", RKM_KNOB_PROCESS, "microseconds", "pool default (0 when threads > CPUs)",
                          "how long compute threads spin for the next job before sleeping"},
    [RKM_KNOB_PIN] = {"RKM_PIN", RKM_KNOB_PROCESS, "0|1", "0", "1: pin each compute thread to one CPU"},
    [RKM_KNOB_RKNN_LIB] = {"RKM_RKNN_LIB", RKM_KNOB_PROCESS, "path", "librknnrt.so",
                           "the Rockchip NPU runtime library to dlopen"},
    [RKM_KNOB_RKNN_SLOT_BYTES] = {"RKM_RKNN_SLOT_BYTES", RKM_KNOB_PROCESS, "bytes", "2 GiB - 64 KiB",
                                  "largest NPU buffer for expert-cache slots (0: slots in host memory)"},
    [RKM_KNOB_API_KEY] = {"RKMOJO_API_KEY", RKM_KNOB_PROCESS, "text", "none",
                          "rkmojo serve: the bearer key clients must send (--api-key overrides)"},
    [RKM_KNOB_ALLOW_HOSTS] = {"RKMOJO_ALLOW_HOSTS", RKM_KNOB_PROCESS, "names", "loopback names",
                              "rkmojo serve: Host names answered besides localhost (--allow-host overrides)"},
    [RKM_KNOB_ALLOW_ORIGINS] = {"RKMOJO_ALLOW_ORIGINS", RKM_KNOB_PROCESS, "origins", "own and loopback pages",
                                "rkmojo serve: browser origins allowed to call the API (--allow-origin overrides)"},
    [RKM_KNOB_TMPDIR] = {"TMPDIR", RKM_KNOB_PROCESS, "path", "/tmp", "where rkmojo demo writes its model"},
    [RKM_KNOB_HF_ENDPOINT] = {"HF_ENDPOINT", RKM_KNOB_PROCESS, "URL", "https://huggingface.co",
                              "where rkmojo pull's hf://ORG/REPO:FILE names are fetched from"},
    [RKM_KNOB_HF_TOKEN] = {"HF_TOKEN", RKM_KNOB_PROCESS, "text", "none",
                           "bearer token rkmojo pull sends to HF_ENDPOINT (gated repositories)"},
    [RKM_KNOB_BACKEND] = {"RKM_BACKEND", RKM_KNOB_MODEL, "auto|cpu|rknn", "auto",
                          "where matmuls run when --backend is auto (rkm_model_params.backend)"},
    [RKM_KNOB_NPU_DENSE] = {"RKM_NPU_DENSE", RKM_KNOB_MODEL, "0|force", "on with the NPU backend and no budget",
                            "int8 NPU copies of resident matrices for prefill; force: also on the CPU backend"},
    [RKM_KNOB_PACK] = {"RKM_PACK", RKM_KNOB_MODEL, "0|resident", "all",
                       "0 keeps the file's matrix layout; resident packs only resident matrices (A/B runs)"},
    [RKM_KNOB_LAZY_EXPERTS] = {"RKM_LAZY_EXPERTS", RKM_KNOB_MODEL, "0|1", "0",
                               "1: with every expert resident, read each on first use, not all from open"},
    [RKM_KNOB_VERIFY] = {"RKM_VERIFY", RKM_KNOB_MODEL, "always|first|never", "always",
                         "checksum every expert read, only the first of each expert, or none (measurements)"},
    [RKM_KNOB_VERIFY_RESIDENT] = {"RKM_VERIFY_RESIDENT", RKM_KNOB_MODEL, "load|background|never", "load",
                                  "checksum the resident weights as the model opens, in a thread after it opens "
                                  "(requests fail once one differs), or not at all"},
    [RKM_KNOB_PREFAULT] = {"RKM_PREFAULT", RKM_KNOB_MODEL, "0|1", "1 with a budget",
                           "populate expert-cache slot pages ahead of the reads"},
    [RKM_KNOB_IO_BACKEND] = {"RKM_IO_BACKEND", RKM_KNOB_MODEL, "pread|uring", "io_uring where allowed",
                             "how expert blobs are read"},
    [RKM_KNOB_TRACE_OUT] = {"RKM_TRACE_OUT", RKM_KNOB_MODEL, "path", "none",
                            "record every layer's routed experts to this file (trace-sim replays it)"},
    [RKM_KNOB_FAULT] = {"RKM_FAULT", RKM_KNOB_TEST, "kind:layer:expert:count,...", "none",
                        "inject read errors or corruption into expert reads (eio, short, corrupt)"},
    [RKM_KNOB_RKNN_CHIP] = {"RKM_RKNN_CHIP", RKM_KNOB_TEST, "rk3588|rk3576|...", "from the device tree",
                            "the NPU chip, instead of detecting it"},
    [RKM_KNOB_SYSROOT] = {"RKM_SYSROOT", RKM_KNOB_TEST, "path", "none",
                          "prefix for the /proc and /sys files the NPU detection reads"},
    [RKM_KNOB_EMU_CHIP] = {"RKNN_EMU_CHIP", RKM_KNOB_TEST, "rk3588|rk3576|...", "rk3588",
                           "the chip the emulated librknnrt (tests/rknn) reports"},
    [RKM_KNOB_CHAT_DEBUG] = {"RKM_CHAT_DEBUG", RKM_KNOB_TEST, "0|1", "0",
                             "rkmojo chat: print how many KV rows each turn reused"},
    [RKM_KNOB_TOK_REGEX_ONLY] = {"RKM_TOK_REGEX_ONLY", RKM_KNOB_TEST, "0|1", "0",
                                 "tokenizers loaded from now on run every pre-tokenizer regex in PCRE2, "
                                 "without the hand-written matchers"},
    [RKM_KNOB_PULL_STALL] = {"RKM_PULL_STALL_S", RKM_KNOB_TEST, "seconds", "60",
                             "rkmojo pull retries a range that received no byte for this long"},
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int loaded;
static char *value[RKM_KNOB_COUNT];

static void load_locked(void)
{
    for (int i = 0; i < RKM_KNOB_COUNT; i++) {
        free(value[i]);
        const char *e = getenv(table[i].name);
        value[i] = e && *e ? strdup(e) : NULL;
    }
    loaded = 1;
}

const rkm_knob_info *rkm_knob_info_of(int id)
{
    return id >= 0 && id < RKM_KNOB_COUNT ? &table[id] : NULL;
}

const char *rkm_knob(int id)
{
    if (id < 0 || id >= RKM_KNOB_COUNT) return NULL;
    pthread_mutex_lock(&mu);
    if (!loaded) load_locked();
    const char *v = value[id];
    pthread_mutex_unlock(&mu);
    return v;
}

long long rkm_knob_int(int id, long long def)
{
    const char *v = rkm_knob(id);
    if (!v) return def;
    char *end;
    long long x = strtoll(v, &end, 0);
    return end == v ? def : x;
}

int rkm_knob_is(int id, const char *word)
{
    const char *v = rkm_knob(id);
    return v && !strcmp(v, word);
}

int rkm_knob_set(int id, const char *v)
{
    if (id < 0 || id >= RKM_KNOB_COUNT) return rkm_err(RKM_EINVAL, "knobs: no knob %d", id);
    char *copy = v && *v ? strdup(v) : NULL;
    if (v && *v && !copy) return rkm_err(RKM_ENOMEM, "knobs: out of memory");
    pthread_mutex_lock(&mu);
    if (!loaded) load_locked();
    free(value[id]);
    value[id] = copy;
    pthread_mutex_unlock(&mu);
    return 0;
}

void rkm_knobs_reload(void)
{
    pthread_mutex_lock(&mu);
    load_locked();
    pthread_mutex_unlock(&mu);
}
