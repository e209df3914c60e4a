/*
 * make_image.c - deterministic test images for the vision tests: a smooth
 * colour field with fine detail and noise (so that resizing and patching
 * are exercised), W x H pixels, written as PNG (libpng), JPEG
 * (libjpeg-turbo, quality 90) or WebP (libwebp, lossless) by the output's
 * extension. Not part of rkmojo.
 *
 *   make-image OUT.png|OUT.jpg|OUT.webp W H [SEED]
 */
#include <math.h>
#include <png.h>
#include <jpeglib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <webp/encode.h>

static void die(const char *what)
{
    fprintf(stderr, "make-image: %s\n", what);
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc < 4) die("usage: make-image OUT.png|OUT.jpg|OUT.webp W H [SEED]");
    const char *out = argv[1];
    const int w = atoi(argv[2]), h = atoi(argv[3]);
    uint64_t s = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    if (w < 1 || h < 1 || w > 20000 || h > 20000) die("W and H: 1..20000");
    uint8_t *rgb = malloc((size_t)w * h * 3);
    if (!rgb) die("out of memory");
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                double v = 128 + 90 * sin(0.013 * (c + 1) * x + 0.021 * y + c) * cos(0.017 * y - 0.007 * x * c) +
                           20 * sin(0.4 * x + 0.3 * y) + (double)((s >> 33) % 31) - 15;
                rgb[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    const char *ext = strrchr(out, '.');
    FILE *f = fopen(out, "wb");
    if (!f || !ext) die("cannot write the output");
    if (!strcmp(ext, ".png")) {
        png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
        png_infop info = png_create_info_struct(png);
        if (!png || !info || setjmp(png_jmpbuf(png))) die("libpng failed");
        png_init_io(png, f);
        png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
        png_write_info(png, info);
        for (int y = 0; y < h; y++) png_write_row(png, rgb + (size_t)y * w * 3);
        png_write_end(png, NULL);
        png_destroy_write_struct(&png, &info);
    } else if (!strcmp(ext, ".jpg")) {
        struct jpeg_compress_struct cj;
        struct jpeg_error_mgr jerr;
        cj.err = jpeg_std_error(&jerr);
        jpeg_create_compress(&cj);
        jpeg_stdio_dest(&cj, f);
        cj.image_width = (JDIMENSION)w;
        cj.image_height = (JDIMENSION)h;
        cj.input_components = 3;
        cj.in_color_space = JCS_RGB;
        jpeg_set_defaults(&cj);
        jpeg_set_quality(&cj, 90, TRUE);
        jpeg_start_compress(&cj, TRUE);
        while (cj.next_scanline < cj.image_height) {
            JSAMPROW row = rgb + (size_t)cj.next_scanline * w * 3;
            jpeg_write_scanlines(&cj, &row, 1);
        }
        jpeg_finish_compress(&cj);
        jpeg_destroy_compress(&cj);
    } else if (!strcmp(ext, ".webp")) {
        uint8_t *buf = NULL;
        size_t n = WebPEncodeLosslessRGB(rgb, w, h, w * 3, &buf);
        if (!n || fwrite(buf, 1, n, f) != n) die("libwebp failed");
        WebPFree(buf);
    } else {
        die("the output must end in .png, .jpg or .webp");
    }
    if (fclose(f)) die("write failed");
    free(rgb);
    return 0;
}
