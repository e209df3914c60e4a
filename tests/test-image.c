/*
 * test-image.c - images decoded to RGB (format/image.c). The files are
 * written here with the libraries' own encoders (libpng, libjpeg-turbo,
 * libwebp) from known pixels:
 *  - PNG in every colour type (RGB, RGBA, gray, gray + alpha, palette
 *    with transparency, 1-bit gray), 16-bit and Adam7-interlaced: exactly
 *    the pixels as stb_image gives them to mtmd (alpha dropped, gray
 *    replicated, the high byte of 16-bit samples);
 *  - WebP lossless (RGB and RGBA) exactly; lossy WebP and JPEG (colour and
 *    gray) within a small mean error of the pixels;
 *  - bad input, each a clear error and nothing allocated: empty and random
 *    bytes, GIF / BMP signatures, PNG / JPEG / WebP cut short or with a
 *    flipped byte, headers claiming 20000x20000 pixels (PNG, JPEG) or
 *    16384x16384 (WebP's largest), refused before any pixel buffer, 1x1 below the minimum, an animated
 *    WebP's flag, the limits given by the caller, a missing file.
 */
#include <stdio.h> /* before jpeglib.h */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

#include "common/test.h"
#include "format/image.h"
#include "util/common.h"

/* ----------------------------------------------------------- encoders */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} mem;

static void mem_write(png_structp png, png_bytep d, size_t len)
{
    mem *m = png_get_io_ptr(png);
    if (m->n + len > m->cap) {
        m->cap = (m->n + len) * 2;
        m->p = realloc(m->p, m->cap);
    }
    memcpy(m->p + m->n, d, len);
    m->n += len;
}
static void mem_flush(png_structp png) { (void)png; }

/* A PNG of w x h samples (ch channels of depth bits; rows packed as libpng
 * takes them) of colour type color. */
static mem write_png(int w, int h, int color, int depth, const uint8_t *rows, size_t row_bytes, int interlace,
                     const png_color *pal, int n_pal, const uint8_t *trns, int n_trns)
{
    mem m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(m.p);
        return (mem){0};
    }
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (pal) png_set_PLTE(png, info, pal, n_pal);
    if (trns) png_set_tRNS(png, info, trns, n_trns, NULL);
    png_write_info(png, info);
    if (depth == 16) png_set_swap(png); /* rows hold little-endian samples here */
    png_bytep *rp = malloc(sizeof *rp * (size_t)h);
    for (int y = 0; y < h; y++) rp[y] = (png_bytep)(rows + (size_t)y * row_bytes);
    png_write_image(png, rp);
    png_write_end(png, NULL);
    free(rp);
    png_destroy_write_struct(&png, &info);
    return m;
}

static mem write_jpeg(int w, int h, int comps, const uint8_t *px, int quality)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &buf, &n);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * (size_t)w * (size_t)comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    mem m = {malloc(n), n, n};
    memcpy(m.p, buf, n);
    free(buf);
    return m;
}

/* ------------------------------------------------------------- helpers */

static uint8_t px_at(int x, int y, int c) { return (uint8_t)((x * 37 + y * 91 + c * 53 + x * y) & 255); }

static int decode(const mem *m, const rkm_image_limits *lim, rkm_image *im)
{
    return rkm_image_decode(m->p, m->n, lim, im);
}

/* im equals want (w x h x 3) exactly */
static int same_rgb(const rkm_image *im, int w, int h, const uint8_t *want)
{
    return im->w == w && im->h == h && im->rgb && !memcmp(im->rgb, want, (size_t)w * (size_t)h * 3);
}

static double mean_abs_err(const rkm_image *im, const uint8_t *want, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += abs((int)im->rgb[i] - (int)want[i]);
    return s / (double)n;
}

/* an error of code, whose message holds what, and nothing left in im */
static void bad(const void *data, size_t n, const rkm_image_limits *lim, int code, const char *what, const char *label)
{
    rkm_image im = {7, 7, (uint8_t *)1};
    int rc = rkm_image_decode(data, n, lim, &im);
    CHECK_MSG(rc == code && strstr(rkm_last_error(), what) && !im.rgb && !im.w, "%s: rc %d, '%s'", label, rc,
              rkm_last_error());
}

/* --------------------------------------------------------------- tests */

static void test_png(void)
{
    const int w = 37, h = 23;
    uint8_t *rgb = malloc((size_t)w * h * 3), *rgba = malloc((size_t)w * h * 4), *gray = malloc((size_t)w * h),
            *ga = malloc((size_t)w * h * 2), *want = malloc((size_t)w * h * 3);
    uint16_t *rgb16 = malloc(sizeof(uint16_t) * (size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const size_t i = (size_t)y * w + x;
            for (int c = 0; c < 3; c++) {
                rgb[3 * i + c] = rgba[4 * i + c] = px_at(x, y, c);
                rgb16[3 * i + c] = (uint16_t)(px_at(x, y, c) << 8 | px_at(y, x, c)); /* high byte px_at */
            }
            rgba[4 * i + 3] = (uint8_t)(x * 7); /* alpha that must not blend */
            gray[i] = ga[2 * i] = px_at(x, y, 1);
            ga[2 * i + 1] = (uint8_t)(y * 11);
        }
    rkm_image im;
    for (int il = 0; il < 2; il++) {
        mem m = write_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb, (size_t)w * 3, il, NULL, 0, NULL, 0);
        CHECK_MSG(decode(&m, NULL, &im) == 0 && same_rgb(&im, w, h, rgb), "RGB interlace %d: %s", il, rkm_last_error());
        rkm_image_free(&im);
        /* a byte flipped inside the pixel data: the chunk's CRC */
        m.p[m.n / 2] ^= 0x5a;
        bad(m.p, m.n, NULL, RKM_EFORMAT, "corrupt PNG", "PNG with a flipped byte");
        m.p[m.n / 2] ^= 0x5a;
        bad(m.p, m.n / 2, NULL, RKM_EFORMAT, "truncated", "PNG cut in half");
        bad(m.p, 40, NULL, RKM_EFORMAT, "corrupt PNG", "PNG cut after its header");
        free(m.p);
    }
    mem m = write_png(w, h, PNG_COLOR_TYPE_RGBA, 8, rgba, (size_t)w * 4, 0, NULL, 0, NULL, 0);
    CHECK_MSG(decode(&m, NULL, &im) == 0 && same_rgb(&im, w, h, rgb), "RGBA: alpha dropped");
    rkm_image_free(&im);
    free(m.p);
    m = write_png(w, h, PNG_COLOR_TYPE_RGB, 16, (const uint8_t *)rgb16, (size_t)w * 6, 1, NULL, 0, NULL, 0);
    CHECK_MSG(decode(&m, NULL, &im) == 0 && same_rgb(&im, w, h, rgb), "16-bit interlaced: the high byte");
    rkm_image_free(&im);
    free(m.p);
    for (size_t i = 0; i < (size_t)w * h; i++) want[3 * i] = want[3 * i + 1] = want[3 * i + 2] = gray[i];
    m = write_png(w, h, PNG_COLOR_TYPE_GRAY, 8, gray, (size_t)w, 0, NULL, 0, NULL, 0);
    CHECK_MSG(decode(&m, NULL, &im) == 0 && same_rgb(&im, w, h, want), "gray: replicated");
    rkm_image_free(&im);
    free(m.p);
    m = write_png(w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga, (size_t)w * 2, 0, NULL, 0, NULL, 0);
    CHECK_MSG(decode(&m, NULL, &im) == 0 && same_rgb(&im, w, h, want), "gray + alpha");
    rkm_image_free(&im);
    free(m.p);
    /* 1-bit gray: 0 and 255 */
    uint8_t *bits = calloc((size_t)h, (size_t)(w + 7) / 8);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const int on = (x + y) % 3 == 0;
            if (on) bits[(size_t)y * ((w + 7) / 8) + x / 8] |= (uint8_t)(0x80 >> (x % 8));
            memset(want + 3 * ((size_t)y * w + x), on ? 255 : 0, 3);
        }
    m = write_png(w, h, PNG_COLOR_TYPE_GRAY, 1, bits, (size_t)(w + 7) / 8, 0, NULL, 0, NULL, 0);
    CHECK_MSG(decode(&m, NULL, &im) == 0 && same_rgb(&im, w, h, want), "1-bit gray");
    rkm_image_free(&im);
    free(m.p);
    /* a palette with transparency: the palette's colours, alpha dropped */
    png_color pal[16];
    uint8_t trns[16], *idx = malloc((size_t)w * h);
    for (int k = 0; k < 16; k++) pal[k] = (png_color){(uint8_t)(k * 16), (uint8_t)(255 - k * 9), (uint8_t)(k * k)}, trns[k] = (uint8_t)(k * 17);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        idx[i] = (uint8_t)(i * 7 % 16);
        want[3 * i] = pal[idx[i]].red, want[3 * i + 1] = pal[idx[i]].green, want[3 * i + 2] = pal[idx[i]].blue;
    }
    m = write_png(w, h, PNG_COLOR_TYPE_PALETTE, 8, idx, (size_t)w, 0, pal, 16, trns, 16);
    CHECK_MSG(decode(&m, NULL, &im) == 0 && same_rgb(&im, w, h, want), "palette + tRNS");
    rkm_image_free(&im);
    /* the caller's limits */
    rkm_image_limits lim = {.max_pixels = 500};
    bad(m.p, m.n, &lim, RKM_EINVAL, "too large", "over the caller's max_pixels");
    lim = (rkm_image_limits){.min_side = 24};
    bad(m.p, m.n, &lim, RKM_EINVAL, "too small", "under the caller's min_side");
    free(m.p);
    /* 1x1: below the default minimum */
    m = write_png(1, 1, PNG_COLOR_TYPE_RGB, 8, rgb, 3, 0, NULL, 0, NULL, 0);
    bad(m.p, m.n, NULL, RKM_EINVAL, "1x1 pixels is too small", "1x1 PNG");
    free(m.p);
    free(idx);
    free(bits);
    free(rgb);
    free(rgba);
    free(gray);
    free(ga);
    free(want);
    free(rgb16);
}

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

static void put32be(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v; }

/* Headers that claim 20000 x 20000 pixels (a decompression bomb's): refused
 * from the header, before any pixel buffer. */
static void test_bombs(void)
{
    /* PNG: the signature and an IHDR with its CRC, nothing else */
    uint8_t png[33] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    put32be(png + 16, 20000);
    put32be(png + 20, 20000);
    png[24] = 8, png[25] = 0; /* 8-bit gray */
    put32be(png + 29, crc32_of(png + 12, 17));
    bad(png, sizeof png, NULL, RKM_EINVAL, "20000x20000 pixels is too large", "PNG bomb");
    /* JPEG: a real 16x16 file with its frame header's size patched */
    uint8_t px[16 * 16 * 3];
    for (int i = 0; i < (int)sizeof px; i++) px[i] = (uint8_t)(i * 13);
    mem j = write_jpeg(16, 16, 3, px, 90);
    int patched = 0;
    for (size_t i = 2; i + 9 < j.n && !patched; i++)
        if (j.p[i] == 0xFF && j.p[i + 1] == 0xC0) { /* SOF0: length, precision, height, width */
            j.p[i + 5] = 20000 >> 8, j.p[i + 6] = 20000 & 255, j.p[i + 7] = 20000 >> 8, j.p[i + 8] = 20000 & 255;
            patched = 1;
        }
    CHECK(patched);
    bad(j.p, j.n, NULL, RKM_EINVAL, "20000x20000 pixels is too large", "JPEG bomb");
    free(j.p);
    /* WebP: an extended header (VP8X) whose canvas is 20000 x 20000 */
    uint8_t *wp = NULL;
    size_t wn = WebPEncodeLosslessRGB(px, 16, 16, 48, &wp);
    CHECK(wn > 20);
    /* RIFF size, WEBP, VP8X chunk (flags, canvas w-1, h-1 in 24 bits), then the VP8L chunk */
    uint8_t *x = malloc(wn + 18);
    memcpy(x, "RIFF", 4);
    const uint32_t riff = (uint32_t)(wn + 18 - 8);
    x[4] = (uint8_t)riff, x[5] = (uint8_t)(riff >> 8), x[6] = (uint8_t)(riff >> 16), x[7] = (uint8_t)(riff >> 24);
    memcpy(x + 8, "WEBPVP8X", 8);
    x[16] = 10, x[17] = x[18] = x[19] = 0;
    memset(x + 20, 0, 4);
    const uint32_t d = 20000 - 1;
    x[24] = (uint8_t)d, x[25] = (uint8_t)(d >> 8), x[26] = (uint8_t)(d >> 16);
    x[27] = (uint8_t)d, x[28] = (uint8_t)(d >> 8), x[29] = (uint8_t)(d >> 16);
    memcpy(x + 30, wp + 12, wn - 12); /* the original's chunks after "WEBP" */
    /* WebP: a lossless header of 16384 x 16384 (its largest), nothing else */
    uint8_t vl[30] = {'R', 'I', 'F', 'F', 22, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'L', 10, 0, 0, 0, 0x2f};
    const uint32_t bitsv = 16383u | 16383u << 14; /* width - 1, height - 1; no alpha, version 0 */
    vl[21] = (uint8_t)bitsv, vl[22] = (uint8_t)(bitsv >> 8), vl[23] = (uint8_t)(bitsv >> 16), vl[24] = (uint8_t)(bitsv >> 24);
    bad(vl, sizeof vl, NULL, RKM_EINVAL, "16384x16384 pixels is too large", "WebP bomb");
    /* animated: the VP8X animation flag */
    x[20] = 0x02;
    x[24] = 15, x[25] = x[26] = 0, x[27] = 15, x[28] = x[29] = 0;
    bad(x, wn + 18, NULL, RKM_EUNSUPPORTED, "animated", "animated WebP");
    free(x);
    WebPFree(wp);
}

static void test_jpeg_webp(void)
{
    const int w = 64, h = 48;
    uint8_t *px = malloc((size_t)w * h * 4), *rgb = malloc((size_t)w * h * 3), *gray = malloc((size_t)w * h),
            *want = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const size_t i = (size_t)y * w + x;
            for (int c = 0; c < 3; c++) rgb[3 * i + c] = px[4 * i + c] = (uint8_t)(x * 2 + y + c * 30); /* smooth */
            px[4 * i + 3] = (uint8_t)(255 - x);
            gray[i] = (uint8_t)(x * 2 + y * 3);
            want[3 * i] = want[3 * i + 1] = want[3 * i + 2] = gray[i];
        }
    rkm_image im;
    mem j = write_jpeg(w, h, 3, rgb, 95);
    CHECK_MSG(decode(&j, NULL, &im) == 0 && im.w == w && im.h == h, "JPEG: %s", rkm_last_error());
    if (im.rgb) CHECK_MSG(mean_abs_err(&im, rgb, (size_t)w * h * 3) < 3, "JPEG error %g", mean_abs_err(&im, rgb, (size_t)w * h * 3));
    rkm_image_free(&im);
    bad(j.p, j.n * 2 / 3, NULL, RKM_EFORMAT, "truncated", "JPEG cut to two thirds");
    bad(j.p, 200, NULL, RKM_EFORMAT, "JPEG", "JPEG cut in its header");
    free(j.p);
    j = write_jpeg(w, h, 1, gray, 95);
    CHECK_MSG(decode(&j, NULL, &im) == 0 && im.w == w, "gray JPEG: %s", rkm_last_error());
    if (im.rgb) {
        int replicated = 1;
        for (size_t i = 0; i < (size_t)w * h; i++) replicated &= im.rgb[3 * i] == im.rgb[3 * i + 1] && im.rgb[3 * i] == im.rgb[3 * i + 2];
        CHECK_MSG(replicated && mean_abs_err(&im, want, (size_t)w * h * 3) < 3, "gray JPEG: replicated, close");
    }
    rkm_image_free(&im);
    free(j.p);

    uint8_t *wp = NULL;
    size_t wn = WebPEncodeLosslessRGB(rgb, w, h, w * 3, &wp);
    CHECK(decode(&(mem){wp, wn, wn}, NULL, &im) == 0 && same_rgb(&im, w, h, rgb));
    rkm_image_free(&im);
    bad(wp, wn / 2, NULL, RKM_EFORMAT, "WebP", "WebP cut in half");
    WebPFree(wp);
    wn = WebPEncodeLosslessRGBA(px, w, h, w * 4, &wp);
    CHECK_MSG(decode(&(mem){wp, wn, wn}, NULL, &im) == 0 && same_rgb(&im, w, h, rgb), "WebP with alpha: alpha dropped");
    rkm_image_free(&im);
    WebPFree(wp);
    wn = WebPEncodeRGB(rgb, w, h, w * 3, 90, &wp);
    CHECK(decode(&(mem){wp, wn, wn}, NULL, &im) == 0 && im.w == w && im.h == h);
    if (im.rgb) CHECK_MSG(mean_abs_err(&im, rgb, (size_t)w * h * 3) < 4, "lossy WebP error %g", mean_abs_err(&im, rgb, (size_t)w * h * 3));
    rkm_image_free(&im);
    WebPFree(wp);
    free(px);
    free(rgb);
    free(gray);
    free(want);
}

static void test_not_images(void)
{
    bad("", 0, NULL, RKM_EFORMAT, "not an image", "empty");
    uint8_t junk[300];
    for (int i = 0; i < 300; i++) junk[i] = (uint8_t)(i * 97 + 13);
    bad(junk, sizeof junk, NULL, RKM_EFORMAT, "not an image", "random bytes");
    bad("GIF89a\x10\x00\x10\x00", 10, NULL, RKM_EUNSUPPORTED, "gif images are not supported", "GIF");
    bad("BM\x36\x00\x00\x00", 6, NULL, RKM_EUNSUPPORTED, "bmp", "BMP");
    bad("\x89PNG\r\n\x1a\n", 8, NULL, RKM_EFORMAT, "corrupt PNG", "a PNG signature alone");
    rkm_image im;
    char path[1024];
    snprintf(path, sizeof path, "%s/none.png", test_tmpdir());
    CHECK(rkm_image_load(path, NULL, &im) == RKM_ENOENT && strstr(rkm_last_error(), "none.png"));
    /* a file: decoded as from memory, errors named after it */
    snprintf(path, sizeof path, "%s/junk.png", test_tmpdir());
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(junk, 1, sizeof junk, f) == sizeof junk);
    if (f) fclose(f);
    CHECK(rkm_image_load(path, NULL, &im) == RKM_EFORMAT && strstr(rkm_last_error(), "junk.png") && !im.rgb);
}

int main(void)
{
    test_png();
    test_bombs();
    test_jpeg_webp();
    test_not_images();
    return test_done();
}
