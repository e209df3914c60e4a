/* fuzz-gguf.c - libFuzzer target: the GGUF reader on arbitrary bytes, then
 * every accessor and the hparams mapping on what it accepted. */
#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "format/hparams.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rkm_gguf *g = rkm_gguf_open_mem(data, size);
    if (!g) return 0;
    for (int i = 0; i < rkm_gguf_n_kv(g); i++) {
        uint64_t n = rkm_gguf_arr_n(g, i);
        for (uint64_t j = 0; j < n && j < 4; j++) {
            size_t len;
            (void)rkm_gguf_arr_str(g, i, j, &len);
            (void)rkm_gguf_arr_int(g, i, j);
            (void)rkm_gguf_arr_float(g, i, j);
        }
    }
    for (int i = 0; i < rkm_gguf_n_tensors(g); i++) {
        const rkm_gguf_tensor *t = rkm_gguf_tensor_at(g, i);
        uint8_t buf[64];
        size_t n = t->nbytes < sizeof buf ? (size_t)t->nbytes : sizeof buf;
        (void)rkm_gguf_read(g, t, 0, buf, n);
    }
    rkm_hparams hp;
    (void)rkm_hparams_from_gguf(g, &hp);
    rkm_gguf_close(g);
    return 0;
}
