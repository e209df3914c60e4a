/*
 * media.h - prompts with images, as llama.cpp's mtmd assembles them: the
 * text split at each media marker ("<__media__>"), each text piece
 * tokenized on its own with special tokens parsed, BOS first when the
 * vocabulary asks for it, and at each marker the next image's rows
 * between its projector's begin and end text (format/vision.h). The
 * prompt knows every position's id before any image is encoded (an
 * image's rows are rkm_media_token ids of a hash of its pixels), so a
 * session already holding a prefix of it, images included, evaluates
 * only the rest: an image is encoded only when its rows are not there.
 *
 * Threads: a prompt is used by one thread at a time; the tower is only
 * read (rkm_vision_encode runs on the pool given).
 * Ownership: rkm_media_prompt_build takes the images' pixels (the
 * rkm_image arrays are emptied); rkm_media_prompt_free frees them and the
 * ids. The tower, the pool and the session stay the caller's.
 */
#ifndef RKM_RUNTIME_MEDIA_H
#define RKM_RUNTIME_MEDIA_H

#include <stdint.h>

#include "format/image.h"
#include "runtime/vision.h"
#include "util/common.h"

/* llama.cpp's default media marker */
#define RKM_MEDIA_MARKER "<__media__>"

typedef struct rkm_media_image {
    rkm_image im;      /* the decoded pixels */
    uint64_t key;      /* XXH3-64 of the size and pixels */
    int pos, n_tokens; /* its rows: positions pos .. pos + n_tokens - 1 */
    int nx;            /* its tokens per row (the grid's width) */
} rkm_media_image;

typedef struct rkm_media_prompt {
    int32_t *ids;          /* every position: text ids, images' rows as media ids */
    int n_ids;
    rkm_media_image *img;  /* in prompt order */
    int n_img;
    int bidirectional;     /* the projector's images are attended both ways */
    int max_image_tokens;  /* the most rows of one image */
    /* called with each image's rows as the tower made them, before they
     * are evaluated (set by the caller after building; may be NULL) */
    int (*on_rows)(void *user, int image, const float *rows, int n, int cols);
    void *user;
} rkm_media_prompt;

/* Builds the prompt of text (NUL-terminated) with the images in order,
 * one per marker, for model m and a tower of parameters vp (NULL when
 * there are no images). add_bos: BOS first if the vocabulary asks for it.
 * 0, or RKM_EINVAL when the markers and images do not pair up (message
 * names both counts), or a tokenizer / memory error. */
int rkm_media_prompt_build(const rkm_model *m, const rkm_vision_hparams *vp, const char *text, rkm_image *imgs,
                           int n_img, int add_bos, rkm_media_prompt *out);
void rkm_media_prompt_free(rkm_media_prompt *p);

/* Image i of p encoded by v on pool and its rows evaluated into s at
 * s's end (which must be the image's first position): the tower bound to
 * s's model first (its NPU, rkm_vision_bind), p->on_rows called. 0 or an
 * RKM_E* code. The three steps it takes, for a caller that encodes on
 * another thread (the server): */
int rkm_media_image_eval(rkm_session *s, const rkm_media_prompt *p, int i, rkm_vision *v, rkm_pool *pool);
/* image i prepared for v (*img: 3 planes of *w x *h floats, the caller's) */
int rkm_media_image_prep(const rkm_media_prompt *p, int i, const rkm_vision *v, float **img, int *w, int *h);
/* rows (nt of n_out floats, as rkm_vision_encode made them from the
 * prepared image) checked against the image and the text model, given to
 * p->on_rows and evaluated into s */
int rkm_media_image_put(rkm_session *s, const rkm_media_prompt *p, int i, const float *rows, int nt, int n_out);
/* The media markers in text. */
int rkm_media_count_markers(const char *text);

/* Makes session s hold the whole prompt, with the logits after it: what
 * it already holds of the prompt's beginning is kept (cut back to the
 * start of an image it would split, or to the first position if
 * that cannot be cut), the rest evaluated, each image there encoded by v
 * on pool (v may be NULL when no image is left to evaluate). *n_encoded
 * (may be NULL) gets the number of images encoded. 0 or an RKM_E* code. */
int rkm_media_prompt_eval(rkm_session *s, const rkm_media_prompt *p, rkm_vision *v, rkm_pool *pool, int *n_encoded);

#endif
