/* rss.c - process and machine memory figures (Linux getrusage, /proc). */
#include <stdio.h>
#include <sys/resource.h>

#include "util/common.h"

uint64_t rkm_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}

/* MemAvailable of /proc/meminfo (free memory plus what the kernel can
 * reclaim without swapping), or 0 when unknown. */
uint64_t rkm_mem_available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024u;
}
