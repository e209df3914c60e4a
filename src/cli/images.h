/*
 * images.h - the image inputs of `rkmojo run`: each --image decoded
 * (format/image.h), prepared and encoded by the vision tower of the
 * mmproj file (runtime/vision.h), and with --image-embd-out written as
 * PREFIX.N.npy (float32, one row per image token) for comparison with
 * another engine. Single-threaded driver; the encoder uses its own pool.
 */
#ifndef RKM_CLI_IMAGES_H
#define RKM_CLI_IMAGES_H

#include "format/image.h"
#include "runtime/vision.h"

/* 0, or an exit status with the message printed. n_threads 0: the
 * performance cores. */
int rkm_cli_images_encode(const char *mmproj, const char *const *files, int n, int n_threads, const char *embd_prefix,
                          int min_tokens, int max_tokens);

/* For a prompt with images: the tower loaded (*v, a message with its
 * size on stderr) with the image tokens bounded (min_tokens, max_tokens:
 * <= 0 the projector's default) and each file decoded into imgs[i]. 0,
 * or an exit status with the message printed and nothing left
 * allocated. */
int rkm_cli_images_open(const char *mmproj, const char *const *files, int n, int min_tokens, int max_tokens,
                        rkm_vision **v, rkm_image *imgs);

/* The most rows one image of the tower mmproj has (max_tokens > 0: that
 * bound) when the text model attends them both ways (a prefill chunk must
 * hold them), else 0; 0 also when the file's header cannot be read (the
 * error comes at its load). */
int rkm_cli_tower_rows(const char *mmproj, int max_tokens);

/* float32 rows x cols as a .npy file (format version 1.0); 0 or RKM_EIO. */
int rkm_cli_write_npy(const char *path, const float *x, int rows, int cols);

#endif
