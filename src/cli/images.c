/*
 * images.c - see images.h.
 */
#include "cli/images.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "format/image.h"
#include "runtime/vision.h"
#include "util/common.h"

int rkm_cli_write_npy(const char *path, const float *x, int rows, int cols)
{
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols);
    const int pad = (64 - (10 + n + 1) % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return rkm_err(RKM_EIO, "cannot write %s", path);
    const uint16_t hl = (uint16_t)(n + pad + 1);
    const uint8_t hl_le[2] = {(uint8_t)(hl & 0xff), (uint8_t)(hl >> 8)};
    int ok = fwrite("\x93NUMPY\x01\x00", 1, 8, f) == 8 && fwrite(hl_le, 1, 2, f) == 2 &&
             fwrite(hdr, 1, (size_t)n, f) == (size_t)n;
    for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && fwrite(x, sizeof(float), (size_t)rows * cols, f) == (size_t)rows * cols;
    if (fclose(f) || !ok) return rkm_err(RKM_EIO, "writing %s failed", path);
    return 0;
}

int rkm_cli_images_encode(const char *mmproj, const char *const *files, int n, int n_threads, const char *embd_prefix,
                          int min_tokens, int max_tokens)
{
    double t0 = rkm_now();
    rkm_vision *v = rkm_vision_load(mmproj);
    if (!v) {
        fprintf(stderr, "rkmojo run: %s\n", rkm_last_error());
        return 1;
    }
    if (rkm_vision_limit_tokens(v, min_tokens, max_tokens)) {
        fprintf(stderr, "rkmojo run: %s\n", rkm_last_error());
        rkm_vision_free(v);
        return 2;
    }
    char b1[32];
    fprintf(stderr, "vision tower: %s, %s of weights, loaded in %.0f ms\n", rkm_proj_info_of(rkm_vision_hparams_of(v)->proj)->name,
            rkm_fmt_bytes(rkm_vision_bytes(v), b1, sizeof b1), 1e3 * (rkm_now() - t0));
    rkm_pool *pool = rkm_pool_new(n_threads);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        rkm_image im = {0};
        float *prep = NULL, *emb = NULL;
        int tw, th, nt;
        int e = rkm_image_load(files[i], NULL, &im);
        const double t1 = rkm_now();
        if (!e) e = rkm_vision_prep(rkm_vision_hparams_of(v), im.rgb, im.w, im.h, &prep, &tw, &th);
        if (!e) e = rkm_vision_encode(v, pool, prep, tw, th, &emb, &nt);
        const double ms = 1e3 * (rkm_now() - t1);
        if (!e && embd_prefix) {
            char path[4096];
            if (snprintf(path, sizeof path, "%s.%d.npy", embd_prefix, i) >= (int)sizeof path)
                e = rkm_err(RKM_EINVAL, "--image-embd-out prefix too long");
            else
                e = rkm_cli_write_npy(path, emb, nt, rkm_vision_n_out(v));
        }
        if (e) {
            fprintf(stderr, "rkmojo run: image %s: %s\n", files[i], rkm_last_error());
            rc = e == RKM_EINVAL || e == RKM_EFORMAT || e == RKM_EUNSUPPORTED ? 2 : 1;
        } else {
            fprintf(stderr, "image %d: %s, %dx%d -> %dx%d, %d tokens, encoded in %.0f ms\n", i, files[i], im.w, im.h, tw,
                    th, nt, ms);
        }
        rkm_image_free(&im);
        free(prep);
        free(emb);
    }
    rkm_pool_free(pool);
    rkm_vision_free(v);
    return rc;
}

int rkm_cli_images_open(const char *mmproj, const char *const *files, int n, int min_tokens, int max_tokens,
                        rkm_vision **v, rkm_image *imgs)
{
    double t0 = rkm_now();
    *v = rkm_vision_load(mmproj);
    if (!*v) {
        fprintf(stderr, "rkmojo run: %s\n", rkm_last_error());
        return 1;
    }
    if (rkm_vision_supported(*v) || rkm_vision_limit_tokens(*v, min_tokens, max_tokens)) {
        fprintf(stderr, "rkmojo run: %s: %s\n", mmproj, rkm_last_error());
        rkm_vision_free(*v);
        *v = NULL;
        return 2;
    }
    char b1[32];
    fprintf(stderr, "vision tower: %s, %s of weights, loaded in %.0f ms\n",
            rkm_proj_info_of(rkm_vision_hparams_of(*v)->proj)->name, rkm_fmt_bytes(rkm_vision_bytes(*v), b1, sizeof b1),
            1e3 * (rkm_now() - t0));
    for (int i = 0; i < n; i++) {
        int e = rkm_image_load(files[i], NULL, &imgs[i]);
        if (e) {
            fprintf(stderr, "rkmojo run: image %s: %s\n", files[i], rkm_last_error());
            for (int j = 0; j < i; j++) rkm_image_free(&imgs[j]);
            rkm_vision_free(*v);
            *v = NULL;
            return e == RKM_EINVAL || e == RKM_EFORMAT || e == RKM_EUNSUPPORTED ? 2 : 1;
        }
    }
    return 0;
}

int rkm_cli_tower_rows(const char *mmproj, int max_tokens)
{
    rkm_gguf *g = rkm_gguf_open(mmproj);
    rkm_vision_hparams vp;
    int rows = 0;
    if (g && rkm_vision_read(g, &vp) == 0) {
        const rkm_proj_info *pi = rkm_proj_info_of(vp.proj);
        if (pi && pi->bidirectional) rows = max_tokens > 0 ? max_tokens : pi->max_tokens;
    }
    rkm_gguf_close(g);
    return rows;
}
