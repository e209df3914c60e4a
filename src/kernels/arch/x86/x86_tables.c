/*
 * x86_tables.c - tables shared by the x86 kernel files: the f16 -> f32
 * lookup of weight scales. Filled once (pthread_once) when an x86 set is
 * activated, read-only afterwards. Built without ISA flags: runs anywhere.
 */
#include <pthread.h>

#include "kernels/arch/x86/x86_tables.h"

float rkm_x86_f16_table[65536];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void fill_table(void)
{
    for (uint32_t i = 0; i < 65536; i++) rkm_x86_f16_table[i] = rkm_f16_to_f32((rkm_f16)i);
}

void rkm_x86_init_f16_table(void) { pthread_once(&table_once, fill_table); }
