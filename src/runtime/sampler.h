/*
 * sampler.h - choosing the next token from logits: repetition penalties,
 * top-k, top-p, min-p, temperature, then a draw from a seeded generator
 * (xoshiro256**), or the argmax when the temperature is 0.
 *
 * Order (as llama.cpp's default chain): penalties on the raw logits, top-k,
 * top-p and min-p on softmax(logits) at temperature 1, then the survivors'
 * logits are divided by the temperature and sampled. A sampler is owned by
 * one session; not thread-safe.
 */
#ifndef RKM_SAMPLER_H
#define RKM_SAMPLER_H

#include <stdint.h>

#include "rkmojo.h"

typedef struct rkm_sampler rkm_sampler;

rkm_sampler *rkm_sampler_new(const rkm_sampler_params *p, int n_vocab);
void rkm_sampler_free(rkm_sampler *s);
/* Restarts the random sequence with this seed. */
void rkm_sampler_seed(rkm_sampler *s, uint64_t seed);
const rkm_sampler_params *rkm_sampler_get_params(const rkm_sampler *s);
void rkm_sampler_set_params(rkm_sampler *s, const rkm_sampler_params *p);
/* Picks an id from logits (n_vocab); hist: the ids so far (penalties look at
 * the last repeat_last_n of them). Logits are not modified. */
int32_t rkm_sampler_sample(rkm_sampler *s, const float *logits, const int32_t *hist, int n_hist);
/* The probabilities the sampler draws from (0 for excluded ids), n_vocab
 * floats, for tests and for logprobs; greedy gives a one-hot vector. */
void rkm_sampler_probs(rkm_sampler *s, const float *logits, const int32_t *hist, int n_hist,
                       float *probs);
/* Uniform double in [0, 1) from the sampler's generator. */
double rkm_sampler_uniform(rkm_sampler *s);

#endif
