/*
 * fp16.h - IEEE half and bfloat16 conversions (portable, bit exact, round
 * to nearest even). Header-only; used by the format readers, the converter
 * and the kernels' reference paths.
 */
#ifndef RKM_FP16_H
#define RKM_FP16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t rkm_f16;
typedef uint16_t rkm_bf16;

static inline uint32_t rkm__f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float rkm__bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float rkm_f16_to_f32(rkm_f16 h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) return rkm__bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return rkm__bits_f32(sign | 0x7f800000u | (man << 13));
    return rkm__bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline rkm_f16 rkm_f32_to_f16(float f)
{
    uint32_t x = rkm__f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (rkm_f16)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (rkm_f16)(sign | 0x7c00); /* overflow */
    if (ax < 0x38800000u) { /* subnormal or zero in half */
        if (ax < 0x33000000u) return (rkm_f16)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14 + (112 - (e - 127)) ... */
        uint32_t r = m >> (shift - 0);
        /* value = m * 2^(e-150); half subnormal unit 2^-24 -> m >> (126-e) */
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (rkm_f16)(sign | r);
    }
    uint32_t r = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (rkm_f16)(sign | r);
}

static inline float rkm_bf16_to_f32(rkm_bf16 h) { return rkm__bits_f32((uint32_t)h << 16); }

static inline rkm_bf16 rkm_f32_to_bf16(float f)
{
    uint32_t x = rkm__f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (rkm_bf16)((x >> 16) | 64); /* quiet nan */
    x += 0x7fff + ((x >> 16) & 1);
    return (rkm_bf16)(x >> 16);
}

#endif
