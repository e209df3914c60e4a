/*
 * image.c - see image.h. One decoder per format, each reading the size
 * from the header first (check_size), then the rows into one buffer.
 * libpng and libjpeg report errors by longjmp from their callbacks: each
 * decoder keeps what it allocated in a struct that outlives the jump and
 * frees it at one label.
 */
#include "format/image.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <webp/decode.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "util/common.h"

const char *rkm_image_sniff(const void *data, size_t n)
{
    const uint8_t *b = data;
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return "png";
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return "jpeg";
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return "webp";
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) return "gif";
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return "bmp";
    if (n >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4))) return "tiff";
    if (n >= 12 && !memcmp(b + 4, "ftyp", 4) &&
        (!memcmp(b + 8, "heic", 4) || !memcmp(b + 8, "heix", 4) || !memcmp(b + 8, "mif1", 4) || !memcmp(b + 8, "avif", 4)))
        return "heif/avif";
    return NULL;
}

static int check_size(const char *fmt, uint64_t w, uint64_t h, const rkm_image_limits *lim)
{
    const int64_t max_px = lim && lim->max_pixels > 0 ? lim->max_pixels : RKM_IMAGE_MAX_PIXELS;
    const int max_side = lim && lim->max_side > 0 ? lim->max_side : RKM_IMAGE_MAX_SIDE;
    const int min_side = lim && lim->min_side > 0 ? lim->min_side : 2;
    if (w < (uint64_t)min_side || h < (uint64_t)min_side)
        return rkm_err(RKM_EINVAL, "%s image of %llux%llu pixels is too small (at least %dx%d)", fmt, (unsigned long long)w,
                       (unsigned long long)h, min_side, min_side);
    if (w > (uint64_t)max_side || h > (uint64_t)max_side || w * h > (uint64_t)max_px)
        return rkm_err(RKM_EINVAL, "%s image of %llux%llu pixels is too large (at most %dx%d and %lld pixels)", fmt,
                       (unsigned long long)w, (unsigned long long)h, max_side, max_side, (long long)max_px);
    return 0;
}

static int alloc_rgb(rkm_image *out, int w, int h)
{
    out->w = w;
    out->h = h;
    out->rgb = malloc((size_t)w * (size_t)h * 3);
    return out->rgb ? 0 : rkm_err(RKM_ENOMEM, "out of memory for a %dx%d image", w, h);
}

/* ------------------------------------------------------------------ PNG */

typedef struct {
    const uint8_t *data;
    size_t n, pos;
    char msg[200];
} png_src;

static void png_read_mem(png_structp png, png_bytep out, size_t len)
{
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->pos) png_error(png, "the file ends early (truncated)");
    memcpy(out, s->data + s->pos, len);
    s->pos += len;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

typedef struct {
    png_structp png;
    png_infop info;
    png_bytep *rows;
} png_state;

static int decode_png(const uint8_t *data, size_t n, const rkm_image_limits *lim, rkm_image *out)
{
    /* the size from IHDR before libpng reads on (libpng refuses a file
     * whose first chunk is not IHDR, so a file it reads was checked here) */
    if (n >= 24 && !memcmp(data + 12, "IHDR", 4)) {
        const uint64_t w = (uint64_t)data[16] << 24 | (uint64_t)data[17] << 16 | (uint64_t)data[18] << 8 | data[19],
                       h = (uint64_t)data[20] << 24 | (uint64_t)data[21] << 16 | (uint64_t)data[22] << 8 | data[23];
        int rc0 = check_size("PNG", w, h, lim);
        if (rc0) return rc0;
    }
    png_src src = {data, n, 0, ""};
    /* volatile: read after a longjmp */
    png_state *volatile st = calloc(1, sizeof *st);
    volatile int rc = 0;
    if (!st) return rkm_err(RKM_ENOMEM, "out of memory");
    st->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    if (st->png) st->info = png_create_info_struct(st->png);
    if (!st->png || !st->info) {
        rc = rkm_err(RKM_ENOMEM, "out of memory");
        goto done;
    }
    if (setjmp(png_jmpbuf(st->png))) {
        rc = rc ? rc : rkm_err(RKM_EFORMAT, "corrupt PNG image: %s", src.msg[0] ? src.msg : "unknown error");
        goto done;
    }
    png_set_read_fn(st->png, &src, png_read_mem);
    png_set_user_limits(st->png, RKM_IMAGE_MAX_SIDE * 2u, RKM_IMAGE_MAX_SIDE * 2u);
    png_read_info(st->png, st->info);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(st->png, st->info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st->png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(st->png);
    if (depth == 16) png_set_strip_16(st->png); /* the high byte, as stb_image */
    /* alpha, and the alpha a tRNS chunk expands to, dropped */
    if ((color & PNG_COLOR_MASK_ALPHA) || png_get_valid(st->png, st->info, PNG_INFO_tRNS)) png_set_strip_alpha(st->png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(st->png);
    png_set_interlace_handling(st->png);
    png_read_update_info(st->png, st->info);
    if (png_get_rowbytes(st->png, st->info) != (size_t)w * 3) {
        rc = rkm_err(RKM_EUNSUPPORTED, "PNG image of colour type %d and depth %d does not decode to RGB", color, depth);
        goto done;
    }
    if ((rc = alloc_rgb(out, (int)w, (int)h))) goto done;
    st->rows = malloc(sizeof *st->rows * h);
    if (!st->rows) {
        rc = rkm_err(RKM_ENOMEM, "out of memory");
        goto done;
    }
    for (png_uint_32 y = 0; y < h; y++) st->rows[y] = out->rgb + (size_t)y * w * 3;
    png_read_image(st->png, st->rows);
    png_read_end(st->png, NULL); /* the CRCs of the chunks after the pixels too */
done:
    if (st->png) png_destroy_read_struct(&st->png, st->info ? &st->info : NULL, NULL);
    free(st->rows);
    free(st);
    return rc;
}

/* ----------------------------------------------------------------- JPEG */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_on_error(j_common_ptr c)
{
    jpeg_err *e = (jpeg_err *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings are kept quiet, but a file that ends early is an error (libjpeg
 * would fill the missing rows with gray). */
static void jpeg_on_message(j_common_ptr c, int level)
{
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
        jpeg_err *e = (jpeg_err *)c->err;
        snprintf(e->msg, sizeof e->msg, "the file ends early (truncated)");
        longjmp(e->jb, 1);
    }
    if (level < 0) c->err->num_warnings++;
}

typedef struct {
    struct jpeg_decompress_struct d;
    jpeg_err err;
    int created;
} jpeg_state;

static int decode_jpeg(const uint8_t *data, size_t n, const rkm_image_limits *lim, rkm_image *out)
{
    jpeg_state *volatile st = calloc(1, sizeof *st);
    volatile int rc = 0;
    if (!st) return rkm_err(RKM_ENOMEM, "out of memory");
    st->d.err = jpeg_std_error(&st->err.pub);
    st->err.pub.error_exit = jpeg_on_error;
    st->err.pub.emit_message = jpeg_on_message;
    if (setjmp(st->err.jb)) {
        if (!rc)
            rc = st->err.pub.msg_code == JERR_CONVERSION_NOTIMPL
                     ? rkm_err(RKM_EUNSUPPORTED, "JPEG image in a colour space without an RGB conversion (CMYK?)")
                     : rkm_err(RKM_EFORMAT, "corrupt JPEG image: %s", st->err.msg);
        goto done;
    }
    jpeg_create_decompress(&st->d);
    st->created = 1;
    st->d.mem->max_memory_to_use = 512l << 20;
    jpeg_mem_src(&st->d, data, (unsigned long)n);
    jpeg_read_header(&st->d, TRUE);
    if ((rc = check_size("JPEG", st->d.image_width, st->d.image_height, lim))) goto done;
    st->d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&st->d);
    if (st->d.output_components != 3) {
        rc = rkm_err(RKM_EUNSUPPORTED, "JPEG image with %d components does not decode to RGB", st->d.output_components);
        goto done;
    }
    if ((rc = alloc_rgb(out, (int)st->d.output_width, (int)st->d.output_height))) goto done;
    while (st->d.output_scanline < st->d.output_height) {
        JSAMPROW row = out->rgb + (size_t)st->d.output_scanline * st->d.output_width * 3;
        jpeg_read_scanlines(&st->d, &row, 1);
    }
    jpeg_finish_decompress(&st->d);
done:
    if (st->created) jpeg_destroy_decompress(&st->d);
    free(st);
    return rc;
}

/* ----------------------------------------------------------------- WebP */

static int decode_webp(const uint8_t *data, size_t n, const rkm_image_limits *lim, rkm_image *out)
{
    WebPBitstreamFeatures f;
    VP8StatusCode s = WebPGetFeatures(data, n, &f);
    if (s == VP8_STATUS_NOT_ENOUGH_DATA) return rkm_err(RKM_EFORMAT, "corrupt WebP image: the file ends early (truncated)");
    if (s != VP8_STATUS_OK) return rkm_err(RKM_EFORMAT, "corrupt WebP image (libwebp status %d)", (int)s);
    if (f.has_animation) return rkm_err(RKM_EUNSUPPORTED, "animated WebP images are not supported");
    int rc = check_size("WebP", (uint64_t)f.width, (uint64_t)f.height, lim);
    if (rc || (rc = alloc_rgb(out, f.width, f.height))) return rc;
    const size_t stride = (size_t)f.width * 3;
    if (!WebPDecodeRGBInto(data, n, out->rgb, stride * (size_t)f.height, (int)stride)) {
        rkm_image_free(out);
        return rkm_err(RKM_EFORMAT, "corrupt or truncated WebP image");
    }
    return 0;
}

/* --------------------------------------------------------------- public */

int rkm_image_decode(const void *data, size_t n, const rkm_image_limits *lim, rkm_image *out)
{
    memset(out, 0, sizeof *out);
    const char *fmt = rkm_image_sniff(data, n);
    int rc;
    if (!fmt) rc = rkm_err(RKM_EFORMAT, "not an image (PNG, JPEG or WebP expected; %zu bytes)", n);
    else if (!strcmp(fmt, "png")) rc = decode_png(data, n, lim, out);
    else if (!strcmp(fmt, "jpeg")) rc = decode_jpeg(data, n, lim, out);
    else if (!strcmp(fmt, "webp")) rc = decode_webp(data, n, lim, out);
    else rc = rkm_err(RKM_EUNSUPPORTED, "%s images are not supported (PNG, JPEG or WebP)", fmt);
    if (rc) rkm_image_free(out);
    return rc;
}

int rkm_image_load(const char *path, const rkm_image_limits *lim, rkm_image *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = rkm_err(errno == ENOENT ? RKM_ENOENT : RKM_EIO, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > (off_t)RKM_IMAGE_MAX_BYTES) {
        close(fd);
        return rkm_err(RKM_EINVAL, "%s: not a regular file of at most %u MiB", path, RKM_IMAGE_MAX_BYTES >> 20);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    int rc = buf ? rkm_pread_all(fd, buf, n, 0, path) : rkm_err(RKM_ENOMEM, "out of memory");
    close(fd);
    if (!rc) rc = rkm_image_decode(buf, n, lim, out);
    if (rc) rkm_err_prefix(rc, "%s", path);
    free(buf);
    return rc;
}

void rkm_image_free(rkm_image *im)
{
    if (!im) return;
    free(im->rgb);
    im->rgb = NULL;
    im->w = im->h = 0;
}
