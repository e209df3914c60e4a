/*
 * vision_prep.c - a decoded image made into a vision tower's input, as
 * llama.cpp's mtmd makes it (mtmd-image.cpp: the dynamic-size
 * preprocessor of gemma4v and the Qwen-VL towers; bilinear resize, the
 * PAD_CEIL letterbox, the normalisation of clip_image_f32), in the same
 * float arithmetic so that the bytes agree.
 */
#include "runtime/vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/common.h"

static float lerp(float s, float e, float t) { return s + (e - s) * t; }

/* src (sw x sh) into dst (dw x dh): corners aligned, truncated to bytes */
static void resize_bilinear(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh)
{
    const float xr = dw > 1 ? (float)(sw - 1) / (float)(dw - 1) : 0.0f;
    const float yr = dh > 1 ? (float)(sh - 1) / (float)(dh - 1) : 0.0f;
    for (int y = 0; y < dh; y++) {
        const float py = (float)y * yr;
        const int y0 = RKM_MIN((int)py, sh - 1), y1 = RKM_MIN(y0 + 1, sh - 1);
        const float yf = py - (float)y0;
        for (int x = 0; x < dw; x++) {
            const float px = (float)x * xr;
            const int x0 = RKM_MIN((int)px, sw - 1), x1 = RKM_MIN(x0 + 1, sw - 1);
            const float xf = px - (float)x0;
            const uint8_t *p00 = src + ((size_t)y0 * sw + x0) * 3, *p10 = src + ((size_t)y0 * sw + x1) * 3;
            const uint8_t *p01 = src + ((size_t)y1 * sw + x0) * 3, *p11 = src + ((size_t)y1 * sw + x1) * 3;
            uint8_t *d = dst + ((size_t)y * dw + x) * 3;
            for (int c = 0; c < 3; c++) {
                const float top = lerp((float)p00[c], (float)p10[c], xf);
                const float bottom = lerp((float)p01[c], (float)p11[c], xf);
                d[c] = (uint8_t)lerp(top, bottom, yf);
            }
        }
    }
}

int rkm_vision_prep(const rkm_vision_hparams *vp, const uint8_t *rgb, int w, int h, float **out, int *tw, int *th)
{
    *out = NULL;
    if (w < 1 || h < 1) return rkm_err(RKM_EINVAL, "image of %dx%d pixels", w, h);
    int W, H;
    rkm_vision_fit(vp, w, h, &W, &H);
    uint8_t *canvas = calloc((size_t)W * H, 3); /* black */
    float *f = malloc(sizeof(float) * 3 * (size_t)W * H);
    uint8_t *inner = NULL;
    int rc = 0;
    if (!canvas || !f) {
        rc = rkm_err(RKM_ENOMEM, "out of memory for a %dx%d image", W, H);
        goto out;
    }
    if (W == w && H == h) {
        memcpy(canvas, rgb, (size_t)W * H * 3);
    } else {
        const float scale = fminf((float)W / (float)w, (float)H / (float)h);
        const int nw = RKM_MIN((int)ceilf((float)w * scale), W), nh = RKM_MIN((int)ceilf((float)h * scale), H);
        inner = malloc((size_t)RKM_MAX(nw, 1) * RKM_MAX(nh, 1) * 3);
        if (!inner) {
            rc = rkm_err(RKM_ENOMEM, "out of memory for a %dx%d image", nw, nh);
            goto out;
        }
        const int iw = RKM_MAX(nw, 1), ih = RKM_MAX(nh, 1);
        resize_bilinear(rgb, w, h, inner, iw, ih);
        const int ox = (W - iw) / 2, oy = (H - ih) / 2;
        for (int y = 0; y < ih; y++)
            if (y + oy >= 0 && y + oy < H)
                for (int x = 0; x < iw; x++)
                    if (x + ox >= 0 && x + ox < W)
                        memcpy(canvas + ((size_t)(y + oy) * W + x + ox) * 3, inner + ((size_t)y * iw + x) * 3, 3);
    }
    for (int c = 0; c < 3; c++)
        for (size_t i = 0; i < (size_t)W * H; i++)
            f[(size_t)c * W * H + i] = ((float)canvas[i * 3 + c] / 255.0f - vp->mean[c]) / vp->std[c];
    *out = f;
    f = NULL;
    *tw = W;
    *th = H;
out:
    free(canvas);
    free(inner);
    free(f);
    return rc;
}
