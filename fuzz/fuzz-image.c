/* fuzz-image.c - libFuzzer target: the PNG, JPEG and WebP decoders
 * (format/image.c), with limits small enough that no input allocates much. */
#include <stddef.h>
#include <stdint.h>

#include "format/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const rkm_image_limits lim = {.max_pixels = 1 << 20, .max_side = 4096, .min_side = 1};
    rkm_image im;
    if (rkm_image_decode(data, size, &lim, &im) == 0) {
        unsigned sum = 0;
        for (size_t i = 0; i < (size_t)im.w * (size_t)im.h * 3; i++) sum += im.rgb[i]; /* every pixel written */
        (void)sum;
    }
    rkm_image_free(&im);
    return 0;
}
