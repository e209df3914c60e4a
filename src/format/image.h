/*
 * image.h - PNG, JPEG and WebP images decoded to 8-bit RGB, for the
 * vision encoders: Debian's libpng, libjpeg-turbo and libwebp.
 *
 * Pixels come out as llama.cpp's mtmd loads them (stb_image asked for 3
 * channels): rows top to bottom, R G B bytes; alpha dropped (not blended
 * onto a background); gray replicated to the three channels; palettes
 * expanded; 16-bit samples cut to their high byte; Adam7 interlacing
 * undone; no gamma or colour-profile transform; EXIF orientation not
 * applied. (mtmd reads no WebP: here WebP decodes as libwebp's RGB.)
 *
 * Untrusted input: the format is told by its signature (GIF, BMP, TIFF,
 * HEIC/AVIF and anything else get a clear "unsupported" or "not an image"
 * error); the size is read from the header and checked against the
 * limits before any pixel buffer is allocated (a decompression bomb never
 * allocates); a truncated or corrupt file is an error that names what the
 * library found (a JPEG that ends early is an error, not gray rows).
 *
 * Threads: stateless; any thread may decode. Ownership: rkm_image_free
 * frees the pixels an rkm_image holds.
 */
#ifndef RKM_FORMAT_IMAGE_H
#define RKM_FORMAT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct rkm_image {
    int w, h;
    uint8_t *rgb; /* h rows of w R, G, B bytes */
} rkm_image;

typedef struct rkm_image_limits {
    int64_t max_pixels; /* w x h at most (0: RKM_IMAGE_MAX_PIXELS) */
    int max_side;       /* w and h at most (0: RKM_IMAGE_MAX_SIDE) */
    int min_side;       /* w and h at least (0: 2) */
} rkm_image_limits;

#define RKM_IMAGE_MAX_PIXELS (64ll << 20)
#define RKM_IMAGE_MAX_SIDE 16384
/* rkm_image_load reads files of at most this many bytes */
#define RKM_IMAGE_MAX_BYTES (256u << 20)

/* "png", "jpeg", "webp", the name of a known format this decoder does
 * not read ("gif", "bmp", "tiff", "heif/avif"), or NULL. */
const char *rkm_image_sniff(const void *data, size_t n);
/* Decodes data (n bytes) into *out. 0, or RKM_EUNSUPPORTED (another
 * format, an animated WebP, a JPEG colour space without an RGB
 * conversion), RKM_EFORMAT (not an image, truncated, corrupt) or
 * RKM_EINVAL (outside the limits), with a message; lim may be NULL. */
int rkm_image_decode(const void *data, size_t n, const rkm_image_limits *lim, rkm_image *out);
/* The same from a file. */
int rkm_image_load(const char *path, const rkm_image_limits *lim, rkm_image *out);
void rkm_image_free(rkm_image *im);

#endif
