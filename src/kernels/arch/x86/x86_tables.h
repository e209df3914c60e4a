/*
 * x86_tables.h - lookup tables shared by the x86 kernels (x86_tables.c).
 */
#ifndef RKM_X86_TABLES_H
#define RKM_X86_TABLES_H

#include "util/fp16.h"

/* f16 -> f32 of every half (256 KiB; filled by rkm_x86_init_f16_table,
 * idempotent, before any x86 kernel runs). Kernels look weight scales up
 * here: a load is cheaper than a conversion in the inner loops. */
extern float rkm_x86_f16_table[65536];
void rkm_x86_init_f16_table(void);

#endif
