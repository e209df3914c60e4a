/*
 * vision.h - images into embeddings: the preprocessing of a decoded image
 * for a vision tower (vision_prep.c: resized and normalised as llama.cpp's
 * mtmd does for the projector) and the tower itself (vision_encoder.c: the
 * ViT blocks and the projector of an mmproj file, format/vision.h), whose
 * output rows take the place of the image's tokens in the text model's
 * input.
 *
 * Threads: a loaded tower is immutable but for its binding to a model's
 * NPU (rkm_vision_bind, before encoding) and one encode's error state:
 * one rkm_vision_encode at a time per tower (the matmuls use the pool
 * given, the NPU's under the bound model's lock).
 * Ownership: rkm_vision_free frees the tower and every weight it read;
 * the arrays rkm_vision_prep and rkm_vision_encode return are the
 * caller's (free()).
 */
#ifndef RKM_RUNTIME_VISION_H
#define RKM_RUNTIME_VISION_H

#include <stdint.h>

#include "format/vision.h"
#include "kernels/kernels.h"

typedef struct rkm_vision rkm_vision;

/* Reads an mmproj file (every tensor of its projector's table into
 * memory). NULL + rkm_last_error() on failure. */
rkm_vision *rkm_vision_load(const char *path);
void rkm_vision_free(rkm_vision *v);
const rkm_vision_hparams *rkm_vision_hparams_of(const rkm_vision *v);
/* Floats per image token: the projection, then the deep-stack features. */
int rkm_vision_n_out(const rkm_vision *v);
/* Bytes of weights held. */
uint64_t rkm_vision_bytes(const rkm_vision *v);

/* An RGB image (w x h, rows of R G B bytes) as the tower takes it: resized
 * to rkm_vision_fit's size with mtmd's bilinear filter (corners aligned,
 * each value truncated to a byte) into a black letterbox (scaled by the
 * smaller of the two ratios, rounded up, centred), then (x / 255 - mean) /
 * std per channel: *out gets 3 planes of *tw x *th floats (R, G, B). 0, or
 * RKM_ENOMEM / RKM_EINVAL. */
int rkm_vision_prep(const rkm_vision_hparams *vp, const uint8_t *rgb, int w, int h, float **out, int *tw, int *th);

/* rkm_vision_token_limits on the tower's parameters (before encoding). */
int rkm_vision_limit_tokens(rkm_vision *v, int min_tokens, int max_tokens);

/* 0 when rkm_vision_encode runs this tower's projector, else
 * RKM_EUNSUPPORTED with a message naming it. */
int rkm_vision_supported(const rkm_vision *v);

struct rkm_model;
/* Runs the tower's matmuls where the text model m runs its prefill: with
 * m on the NPU (the rknn backend), each matrix gets an rknn_i8 copy (int8
 * per output row, packed here once) that the NPU multiplies through m's
 * backend, holding m's lock for each matmul (one shape per image size, as
 * the NPU wants); with m on the CPU nothing changes. m must outlive the
 * binding. 1 bound to the NPU, 0 on the CPU, or RKM_ENOMEM. */
int rkm_vision_bind(rkm_vision *v, struct rkm_model *m);

/* Encodes a prepared image (3 planes of w x h floats; w and h multiples of
 * patch x merge): *out gets *n_tokens rows of rkm_vision_n_out floats.
 * 0, or an RKM_E* code (a grid larger than the position table, memory). */
int rkm_vision_encode(rkm_vision *v, rkm_pool *pool, const float *img, int w, int h, float **out, int *n_tokens);

#endif
