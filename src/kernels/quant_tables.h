/*
 * quant_tables.h - the lookup tables that are part of ggml's IQ and MXFP4
 * formats, defined in the GENERATED quant_tables.c (tools/gen-quant-tables.c
 * recovers them from ggml's own dequantization). Read-only; any thread.
 */
#ifndef RKM_QUANT_TABLES_H
#define RKM_QUANT_TABLES_H

#include <stdint.h>

/* The 16 non-linear levels of IQ4_NL and IQ4_XS. */
extern const int8_t rkm_kvalues_iq4nl[16];
/* MXFP4's e2m1 levels, doubled (paired with half of 2^(e-127)). */
extern const int8_t rkm_kvalues_mxfp4[16];
/* IQ1_S/IQ1_M: the offset added to every grid value (sign in qh). */
extern const float rkm_iq1s_delta;
/* Grids: entry k holds the magnitudes of 8 (IQ2) or 4 (IQ3) values. */
extern const uint8_t rkm_iq2xxs_grid[256][8];
extern const uint8_t rkm_iq2xs_grid[512][8];
extern const uint8_t rkm_iq2s_grid[1024][8];
extern const uint8_t rkm_iq3xxs_grid[256][4];
extern const uint8_t rkm_iq3s_grid[512][4];
/* IQ1 grid: 8 values in {-1, 0, 1} per entry. */
extern const int8_t rkm_iq1s_grid[2048][8];

/* The IQ2/IQ3 sign byte of 7 stored bits: the 8th makes the count of
 * negative values even (bit j set: value j negative). */
static inline unsigned rkm_iq_signs8(unsigned s7)
{
    s7 &= 127;
    return s7 | (unsigned)__builtin_parity(s7) << 7;
}

#endif
