/* fuzz-manifest.c - libFuzzer target: the .rkmojo manifest parser. */
#include <stddef.h>
#include <stdint.h>

#include "format/model_dir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rkm_model_dir *md = rkm_model_dir_parse_manifest((const char *)data, size, "/nonexistent");
    rkm_model_dir_close(md);
    return 0;
}
