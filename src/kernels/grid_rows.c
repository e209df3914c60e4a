/*
 * grid_rows.c - the grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S) decoded a row at a time into the integer form of
 * kernels_impl.h, for the SIMD sets' matmuls, which decode a weight row
 * once and multiply it by every activation row. Eight values a step: a
 * grid entry is one 64-bit load (IQ2; two 32-bit ones for IQ3) and its
 * signs a byte mask (one table load) applied without branches. The result is exactly
 * rkm_qblock_unpack's (qblock.c, the plain statement the reference
 * multiplies); tests/test-kernels-types.c holds every set to the
 * reference. Block layouts are written in quant_iq.c.
 *
 * Stateless; any thread.
 */
#include <pthread.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/quant.h"
#include "kernels/quant_tables.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "byte j of a 64-bit word is value j");

static inline uint64_t ld64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* sign_mask[s]: byte j 0xff where bit j of s is set. */
static uint64_t sign_mask[256];
static pthread_once_t sign_once = PTHREAD_ONCE_INIT;

static void sign_init(void)
{
    for (unsigned s = 0; s < 256; s++) {
        uint64_t m = 0;
        for (int j = 0; j < 8; j++)
            if (s >> j & 1) m |= 0xffull << 8 * j;
        sign_mask[s] = m;
    }
}

/* Eight magnitudes (bytes 1..127: the grids hold no 0) negated where bit
 * j of s is set: -g is (g ^ 0xff) + 1, which never carries into the next
 * byte. */
static inline uint64_t signed8(uint64_t g, unsigned s)
{
    const uint64_t m = sign_mask[s & 255];
    return (g ^ m) + (m & 0x0101010101010101ull);
}

static inline uint64_t grid3(const uint8_t (*grid)[4], unsigned i0, unsigned i1)
{
    return (uint64_t)rkm_le32(grid[i0]) | (uint64_t)rkm_le32(grid[i1]) << 32;
}

/* IQ1: 8 grid + delta, delta +1 or -1 (kernels_impl.h). */
static inline void iq1_8(int8_t *q, const int8_t *g, int neg)
{
    const int dl = neg ? -1 : 1;
    for (int j = 0; j < 8; j++) q[j] = (int8_t)(8 * g[j] + dl);
}

static inline void sc32(int16_t *sc, int v) { sc[0] = sc[1] = (int16_t)v; }

int rkm_grid_decode_row(int type, const uint8_t *w, int64_t nb, int8_t *q, int16_t *sc, float *d)
{
    if (!rkm_type_grid(type)) return -1;
    pthread_once(&sign_once, sign_init);
    const size_t bb = rkm_type_block_bytes(type);
    for (int64_t i = 0; i < nb; i++, w += bb, q += 256, sc += 16) {
        const uint8_t *b = w;
        switch (type) {
        case RKM_TYPE_IQ2_XXS:
            d[i] = rkm_f16_le(b) * 0.125f;
            for (int ib = 0; ib < 8; ib++) {
                const uint8_t *g = b + 2 + 8 * ib;
                const uint32_t aux = rkm_le32(g + 4);
                sc32(sc + 2 * ib, 2 * (int)(aux >> 28) + 1);
                for (int l = 0; l < 4; l++) {
                    const uint64_t v = signed8(ld64(rkm_iq2xxs_grid[g[l]]), rkm_iq_signs8(aux >> 7 * l));
                    memcpy(q + 32 * ib + 8 * l, &v, 8);
                }
            }
            break;
        case RKM_TYPE_IQ2_XS:
            d[i] = rkm_f16_le(b) * 0.125f;
            for (int ib = 0; ib < 8; ib++) {
                sc[2 * ib] = (int16_t)(2 * (b[66 + ib] & 0xf) + 1);
                sc[2 * ib + 1] = (int16_t)(2 * (b[66 + ib] >> 4) + 1);
                for (int l = 0; l < 4; l++) {
                    const unsigned x = rkm_le16(b + 2 + 2 * (4 * ib + l));
                    const uint64_t v = signed8(ld64(rkm_iq2xs_grid[x & 511]), rkm_iq_signs8(x >> 9));
                    memcpy(q + 32 * ib + 8 * l, &v, 8);
                }
            }
            break;
        case RKM_TYPE_IQ2_S: {
            const uint8_t *qs = b + 2, *sg = b + 34, *qh = b + 66, *s = b + 74;
            d[i] = rkm_f16_le(b) * 0.125f;
            for (int ib = 0; ib < 8; ib++) {
                sc[2 * ib] = (int16_t)(2 * (s[ib] & 0xf) + 1);
                sc[2 * ib + 1] = (int16_t)(2 * (s[ib] >> 4) + 1);
                for (int l = 0; l < 4; l++) {
                    const unsigned x = qs[4 * ib + l] | ((qh[ib] >> 2 * l) & 3) << 8;
                    const uint64_t v = signed8(ld64(rkm_iq2s_grid[x]), sg[4 * ib + l]);
                    memcpy(q + 32 * ib + 8 * l, &v, 8);
                }
            }
            break;
        }
        case RKM_TYPE_IQ3_XXS: {
            const uint8_t *qs = b + 2;
            d[i] = rkm_f16_le(b) * 0.25f;
            for (int ib = 0; ib < 8; ib++, qs += 8) {
                const uint32_t aux = rkm_le32(b + 66 + 4 * ib);
                sc32(sc + 2 * ib, 2 * (int)(aux >> 28) + 1);
                for (int l = 0; l < 4; l++) {
                    const uint64_t v = signed8(grid3(rkm_iq3xxs_grid, qs[2 * l], qs[2 * l + 1]), rkm_iq_signs8(aux >> 7 * l));
                    memcpy(q + 32 * ib + 8 * l, &v, 8);
                }
            }
            break;
        }
        case RKM_TYPE_IQ3_S: {
            const uint8_t *qs = b + 2, *qh = b + 66, *sg = b + 74, *s = b + 106;
            d[i] = rkm_f16_le(b);
            for (int ib = 0; ib < 8; ib++, qs += 8) {
                sc32(sc + 2 * ib, 1 + 2 * (ib % 2 ? s[ib / 2] >> 4 : s[ib / 2] & 0xf));
                for (int l = 0; l < 4; l++) {
                    const unsigned i0 = qs[2 * l] | ((qh[ib] >> 2 * l) & 1) << 8;
                    const unsigned i1 = qs[2 * l + 1] | ((qh[ib] >> (2 * l + 1)) & 1) << 8;
                    const uint64_t v = signed8(grid3(rkm_iq3s_grid, i0, i1), sg[4 * ib + l]);
                    memcpy(q + 32 * ib + 8 * l, &v, 8);
                }
            }
            break;
        }
        case RKM_TYPE_IQ1_S:
            d[i] = rkm_f16_le(b) * 0.125f;
            for (int ib = 0; ib < 8; ib++) {
                const unsigned qh = rkm_le16(b + 34 + 2 * ib);
                sc32(sc + 2 * ib, 2 * (int)((qh >> 12) & 7) + 1);
                for (int l = 0; l < 4; l++)
                    iq1_8(q + 32 * ib + 8 * l, rkm_iq1s_grid[b[2 + 4 * ib + l] | ((qh >> 3 * l) & 7) << 8], qh >> 15);
            }
            break;
        default: { /* IQ1_M */
            unsigned s[4];
            for (int k = 0; k < 4; k++) s[k] = rkm_le16(b + 48 + 2 * k);
            const unsigned dh = (s[0] >> 12) | ((s[1] >> 8) & 0xf0) | ((s[2] >> 4) & 0xf00) | (s[3] & 0xf000);
            d[i] = rkm_f16_to_f32((rkm_f16)dh) * 0.125f;
            for (int ib = 0; ib < 8; ib++) {
                sc[2 * ib] = (int16_t)(2 * ((s[ib / 2] >> (6 * (ib % 2))) & 7) + 1);
                sc[2 * ib + 1] = (int16_t)(2 * ((s[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
                for (int l = 0; l < 4; l++) {
                    const unsigned h = (b[32 + 2 * ib + l / 2] >> 4 * (l % 2)) & 0xf;
                    iq1_8(q + 32 * ib + 8 * l, rkm_iq1s_grid[b[4 * ib + l] | (h & 7) << 8], h >> 3);
                }
            }
            break;
        }
        }
    }
    return 0;
}
