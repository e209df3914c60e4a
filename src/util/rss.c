/* rss.c - process memory figures for statistics (Linux getrusage). */
#include <sys/resource.h>

#include "util/common.h"

uint64_t rkm_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}
