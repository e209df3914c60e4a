/*
 * qblock.c - the integer form of one weight block of every type the
 * matmuls run natively (kernels_impl.h, rkm_qblock): the reference kernels
 * multiply it by quantized activations, and the tests use it as the
 * independent statement of what each SIMD kernel must compute. Layouts of
 * the blocks are written next to their decoders (quant.c, quant_iq.c).
 *
 * Stateless; any thread.
 */
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/quant_tables.h"

/* 6-bit scale and min j of a q4_K/q5_K super-block (12 packed bytes). */
static void scale_min_k4(int j, const uint8_t *q, int16_t *d, int16_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (int16_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (int16_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* 8 grid magnitudes with their signs. */
static void grid8(int8_t *q, const uint8_t *g, unsigned signs)
{
    for (int j = 0; j < 8; j++) q[j] = (int8_t)(signs >> j & 1 ? -g[j] : g[j]);
}

/* The IQ1 values: ggml's x = d*(2s+1) * (grid + delta), delta = +-1/8, is
 * d/8 * (2s+1) * (8 grid +- 1). */
static void iq1_8(int8_t *q, const int8_t *g, int neg)
{
    for (int j = 0; j < 8; j++) q[j] = (int8_t)(8 * g[j] + (neg ? -1 : 1));
}

int rkm_qblock_values(int type)
{
    switch (type) {
    case RKM_TYPE_Q8_0:
    case RKM_TYPE_Q4_0:
    case RKM_TYPE_Q4_1:
    case RKM_TYPE_Q5_0:
    case RKM_TYPE_Q5_1:
    case RKM_TYPE_IQ4_NL:
    case RKM_TYPE_MXFP4: return 32;
    case RKM_TYPE_Q2_K:
    case RKM_TYPE_Q3_K:
    case RKM_TYPE_Q4_K:
    case RKM_TYPE_Q5_K:
    case RKM_TYPE_Q6_K:
    case RKM_TYPE_IQ4_XS: return 256;
    default: return rkm_type_grid(type) ? 256 : 0;
    }
}

int rkm_qblock_unpack(int type, const uint8_t *b, rkm_qblock *o)
{
    memset(o, 0, sizeof *o);
    switch (type) {
    case RKM_TYPE_Q8_0:
        o->sub = 32;
        o->d = rkm_f16_le(b);
        o->sc[0] = 1;
        for (int j = 0; j < 32; j++) o->q[j] = (int8_t)b[2 + j];
        return 0;
    case RKM_TYPE_Q4_0:
    case RKM_TYPE_IQ4_NL:
    case RKM_TYPE_MXFP4: {
        const uint8_t *qs = b + (type == RKM_TYPE_MXFP4 ? 1 : 2);
        o->sub = 32;
        o->d = type == RKM_TYPE_MXFP4 ? rkm_e8m0_half(b[0]) : rkm_f16_le(b);
        o->sc[0] = 1;
        for (int j = 0; j < 16; j++) {
            int lo = qs[j] & 15, hi = qs[j] >> 4;
            if (type == RKM_TYPE_Q4_0) o->q[j] = (int8_t)(lo - 8), o->q[j + 16] = (int8_t)(hi - 8);
            else {
                const int8_t *kv = type == RKM_TYPE_IQ4_NL ? rkm_kvalues_iq4nl : rkm_kvalues_mxfp4;
                o->q[j] = kv[lo];
                o->q[j + 16] = kv[hi];
            }
        }
        return 0;
    }
    case RKM_TYPE_Q4_1:
    case RKM_TYPE_Q5_0:
    case RKM_TYPE_Q5_1: {
        /* x = d*q + m (q4_1, q5_1: dmin = -m, one min of weight 1) or
         * d*(q - 16) (q5_0); q5's fifth bits: bit k of qh for value k */
        const int has_m = type != RKM_TYPE_Q5_0, q5 = type != RKM_TYPE_Q4_1;
        const uint8_t *qhp = b + (has_m ? 4 : 2), *qs = qhp + (q5 ? 4 : 0);
        const uint32_t qh = q5 ? (uint32_t)qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 | (uint32_t)qhp[3] << 24 : 0;
        o->sub = 32;
        o->d = rkm_f16_le(b);
        o->sc[0] = 1;
        if (has_m) o->dmin = -rkm_f16_le(b + 2), o->mn[0] = 1, o->has_min = 1;
        for (int j = 0; j < 16; j++) {
            o->q[j] = (int8_t)(((qs[j] & 15) | ((qh >> j) & 1) << 4) - (has_m ? 0 : 16));
            o->q[j + 16] = (int8_t)(((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - (has_m ? 0 : 16));
        }
        return 0;
    }
    case RKM_TYPE_Q2_K: {
        const uint8_t *sc = b, *q = b + 16;
        o->sub = 16;
        o->d = rkm_f16_le(b + 80);
        o->dmin = rkm_f16_le(b + 82);
        o->has_min = 1;
        int k = 0, s = 0;
        for (int half = 0; half < 2; half++, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int g = 0; g < 2; g++, s++) {
                    o->sc[s] = sc[s] & 0xF;
                    o->mn[s] = sc[s] >> 4;
                    for (int l = 0; l < 16; l++) o->q[k++] = (int8_t)((q[16 * g + l] >> shift) & 3);
                }
        return 0;
    }
    case RKM_TYPE_Q3_K: {
        const uint8_t *hm = b, *q = b + 32, *sc = b + 96;
        o->sub = 16;
        o->d = rkm_f16_le(b + 108);
        int k = 0, s = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++, q += 32)
            for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                for (int g = 0; g < 2; g++, s++) {
                    int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4, hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
                    o->sc[s] = (int16_t)((lo | hi << 4) - 32);
                    for (int l = 0; l < 16; l++)
                        o->q[k++] = (int8_t)(((q[16 * g + l] >> shift) & 3) - ((hm[16 * g + l] & m) ? 0 : 4));
                }
        return 0;
    }
    case RKM_TYPE_Q4_K:
    case RKM_TYPE_Q5_K: {
        const int q5 = type == RKM_TYPE_Q5_K;
        const uint8_t *sc = b + 4, *qh = b + 16, *ql = b + (q5 ? 48 : 16);
        o->sub = 32;
        o->d = rkm_f16_le(b);
        o->dmin = rkm_f16_le(b + 2);
        o->has_min = 1;
        for (int c = 0; c < 4; c++, ql += 32) {
            scale_min_k4(2 * c, sc, &o->sc[2 * c], &o->mn[2 * c]);
            scale_min_k4(2 * c + 1, sc, &o->sc[2 * c + 1], &o->mn[2 * c + 1]);
            for (int l = 0; l < 32; l++) {
                int h1 = q5 && (qh[l] >> (2 * c)) & 1, h2 = q5 && (qh[l] >> (2 * c + 1)) & 1;
                o->q[64 * c + l] = (int8_t)((ql[l] & 0xF) | h1 << 4);
                o->q[64 * c + 32 + l] = (int8_t)((ql[l] >> 4) | h2 << 4);
            }
        }
        return 0;
    }
    case RKM_TYPE_Q6_K: {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        o->sub = 16;
        o->d = rkm_f16_le(b + 208);
        for (int s = 0; s < 16; s++) o->sc[s] = sc[s];
        for (int n = 0; n < 256; n += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; l++) {
                o->q[n + l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                o->q[n + l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                o->q[n + l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                o->q[n + l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        return 0;
    }
    case RKM_TYPE_IQ4_XS: {
        const unsigned sh = (unsigned)(b[2] | (b[3] << 8));
        const uint8_t *qs = b + 8;
        o->sub = 32;
        o->d = rkm_f16_le(b);
        for (int ib = 0; ib < 8; ib++, qs += 16) {
            o->sc[ib] = (int16_t)((((b[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | ((sh >> 2 * ib) & 3) << 4) - 32);
            for (int j = 0; j < 16; j++) {
                o->q[32 * ib + j] = rkm_kvalues_iq4nl[qs[j] & 0xf];
                o->q[32 * ib + j + 16] = rkm_kvalues_iq4nl[qs[j] >> 4];
            }
        }
        return 0;
    }
    /* The grid types (layouts in quant_iq.c). Their sub-block scales are
     * (0.5 + s) / 4 (IQ2), (0.5 + s) / 2 (IQ3_XXS), 1 + 2s (IQ3_S, IQ1):
     * the integer 2s + 1 with d scaled by 1/8 or 1/4, which is exact. */
    case RKM_TYPE_IQ2_XXS:
    case RKM_TYPE_IQ3_XXS: {
        const int iq3 = type == RKM_TYPE_IQ3_XXS;
        o->sub = 32;
        o->d = rkm_f16_le(b) * (iq3 ? 0.25f : 0.125f);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *qs = b + 2 + 8 * ib;
            const uint32_t aux = rkm_le32(iq3 ? b + 66 + 4 * ib : qs + 4);
            o->sc[ib] = (int16_t)(2 * (aux >> 28) + 1);
            for (int l = 0; l < 4; l++) {
                const unsigned sg = rkm_iq_signs8((aux >> 7 * l) & 127);
                int8_t *q = o->q + 32 * ib + 8 * l;
                if (!iq3) grid8(q, rkm_iq2xxs_grid[qs[l]], sg);
                else {
                    uint8_t g[8];
                    memcpy(g, rkm_iq3xxs_grid[qs[2 * l]], 4);
                    memcpy(g + 4, rkm_iq3xxs_grid[qs[2 * l + 1]], 4);
                    grid8(q, g, sg);
                }
            }
        }
        return 0;
    }
    case RKM_TYPE_IQ2_XS:
        o->sub = 16;
        o->d = rkm_f16_le(b) * 0.125f;
        for (int ib = 0; ib < 8; ib++) {
            o->sc[2 * ib] = (int16_t)(2 * (b[66 + ib] & 0xf) + 1);
            o->sc[2 * ib + 1] = (int16_t)(2 * (b[66 + ib] >> 4) + 1);
            for (int l = 0; l < 4; l++) {
                const unsigned v = rkm_le16(b + 2 + 2 * (4 * ib + l));
                grid8(o->q + 32 * ib + 8 * l, rkm_iq2xs_grid[v & 511], rkm_iq_signs8(v >> 9));
            }
        }
        return 0;
    case RKM_TYPE_IQ2_S: {
        const uint8_t *qs = b + 2, *sg = b + 34, *qh = b + 66, *sc = b + 74;
        o->sub = 16;
        o->d = rkm_f16_le(b) * 0.125f;
        for (int ib = 0; ib < 8; ib++) {
            o->sc[2 * ib] = (int16_t)(2 * (sc[ib] & 0xf) + 1);
            o->sc[2 * ib + 1] = (int16_t)(2 * (sc[ib] >> 4) + 1);
            for (int l = 0; l < 4; l++)
                grid8(o->q + 32 * ib + 8 * l, rkm_iq2s_grid[qs[4 * ib + l] | ((qh[ib] >> 2 * l) & 3) << 8],
                      sg[4 * ib + l]);
        }
        return 0;
    }
    case RKM_TYPE_IQ3_S: {
        const uint8_t *qs = b + 2, *qh = b + 66, *sg = b + 74, *sc = b + 106;
        o->sub = 32;
        o->d = rkm_f16_le(b);
        for (int ib = 0; ib < 8; ib++) {
            o->sc[ib] = (int16_t)(1 + 2 * (ib % 2 ? sc[ib / 2] >> 4 : sc[ib / 2] & 0xf));
            for (int l = 0; l < 4; l++) {
                uint8_t g[8];
                memcpy(g, rkm_iq3s_grid[qs[8 * ib + 2 * l] | ((qh[ib] >> 2 * l) & 1) << 8], 4);
                memcpy(g + 4, rkm_iq3s_grid[qs[8 * ib + 2 * l + 1] | ((qh[ib] >> (2 * l + 1)) & 1) << 8], 4);
                grid8(o->q + 32 * ib + 8 * l, g, sg[4 * ib + l]);
            }
        }
        return 0;
    }
    case RKM_TYPE_IQ1_S:
        o->sub = 32;
        o->d = rkm_f16_le(b) * 0.125f;
        for (int ib = 0; ib < 8; ib++) {
            const unsigned qh = rkm_le16(b + 34 + 2 * ib);
            o->sc[ib] = (int16_t)(2 * ((qh >> 12) & 7) + 1);
            for (int l = 0; l < 4; l++)
                iq1_8(o->q + 32 * ib + 8 * l, rkm_iq1s_grid[b[2 + 4 * ib + l] | ((qh >> 3 * l) & 7) << 8], qh >> 15);
        }
        return 0;
    case RKM_TYPE_IQ1_M: {
        unsigned sc[4];
        for (int i = 0; i < 4; i++) sc[i] = rkm_le16(b + 48 + 2 * i);
        const unsigned dh = (sc[0] >> 12) | ((sc[1] >> 8) & 0xf0) | ((sc[2] >> 4) & 0xf00) | (sc[3] & 0xf000);
        o->sub = 16;
        o->d = rkm_f16_to_f32((rkm_f16)dh) * 0.125f;
        for (int ib = 0; ib < 8; ib++) {
            o->sc[2 * ib] = (int16_t)(2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1);
            o->sc[2 * ib + 1] = (int16_t)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
            for (int l = 0; l < 4; l++) {
                const unsigned h = (b[32 + 2 * ib + l / 2] >> 4 * (l % 2)) & 0xf;
                iq1_8(o->q + 32 * ib + 8 * l, rkm_iq1s_grid[b[4 * ib + l] | (h & 7) << 8], h >> 3);
            }
        }
        return 0;
    }
    default: return -1;
    }
}

int rkm_type_acts_k(int type) { return rkm_qblock_values(type) == 256; }
