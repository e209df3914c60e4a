/* fuzz-gguf.c - libFuzzer target: the GGUF reader on arbitrary bytes, then
 * every accessor, the hparams mapping, the mmproj reader (vision towers)
 * with the resize rule of what it accepts, and on the first row of each
 * tensor the converter's checks (non-finite scales) and decoder. */
#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "format/hparams.h"
#include "format/vision.h"
#include "kernels/quant.h"

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
        uint8_t buf[2048];
        float f[512];
        size_t n = t->nbytes < sizeof buf ? (size_t)t->nbytes : sizeof buf;
        if (rkm_gguf_read(g, t, 0, buf, n)) continue;
        /* a first row that fits: checked and decoded as the converter does */
        size_t rb = rkm_type_row_bytes(t->type, t->ne[0]);
        if (rkm_type_readable(t->type) && rb && rb <= n && t->ne[0] <= 512) {
            (void)rkm_row_find_nonfinite(t->type, buf, t->ne[0]);
            rkm_dequantize_row(t->type, buf, f, t->ne[0]);
        }
    }
    rkm_hparams hp;
    (void)rkm_hparams_from_gguf(g, &hp);
    rkm_vision_hparams vp;
    if (rkm_vision_read(g, &vp) == 0) {
        int tw, th;
        (void)rkm_vision_fit(&vp, 640, 480, &tw, &th);
        (void)rkm_vision_fit(&vp, 2, 16384, &tw, &th);
    }
    rkm_gguf_close(g);
    return 0;
}
