/* fuzz-safetensors.c - libFuzzer target: the safetensors header parser. */
#include <stddef.h>
#include <stdint.h>

#include "format/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rkm_safetensors *s = rkm_safetensors_open_mem(data, size);
    if (!s) return 0;
    for (int i = 0; i < rkm_safetensors_n_tensors(s); i++) {
        const rkm_st_tensor *t = rkm_safetensors_tensor_at(s, i);
        uint8_t buf[64];
        size_t n = t->nbytes < sizeof buf ? (size_t)t->nbytes : sizeof buf;
        (void)rkm_safetensors_read(s, t, 0, buf, n);
    }
    rkm_safetensors_close(s);
    return 0;
}
