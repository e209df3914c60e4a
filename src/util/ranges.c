/*
 * ranges.c - see ranges.h.
 */
#include "util/ranges.h"

#include <stdlib.h>

typedef struct {
    uint64_t off, len;
    int i;
} span;

static int by_offset(const void *x, const void *y)
{
    const span *a = x, *b = y;
    return a->off != b->off ? (a->off < b->off ? -1 : 1) : a->i - b->i; /* ties in array order */
}

int rkm_ranges_overlap(int n, rkm_range_of range, const void *ctx, int *a, int *b)
{
    if (n < 2) return 0;
    span *s = malloc(sizeof *s * (size_t)n);
    if (!s) return -1;
    int k = 0;
    for (int i = 0; i < n; i++) {
        range(ctx, i, &s[k].off, &s[k].len);
        s[k].i = i;
        k += s[k].len > 0;
    }
    qsort(s, (size_t)k, sizeof *s, by_offset);
    int found = 0;
    for (int i = 0; i + 1 < k && !found; i++)
        if (s[i].off + s[i].len > s[i + 1].off) {
            *a = s[i].i;
            *b = s[i + 1].i;
            found = 1;
        }
    free(s);
    return found;
}
