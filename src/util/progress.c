/* progress.c - see progress.h. */
#include "util/progress.h"

#include <unistd.h>

#include "util/common.h"

void rkm_progress_init(rkm_progress *p, FILE *out, const char *label, uint64_t total)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = out && isatty(fileno(out));
    p->label = label;
    p->total = total;
    p->t_start = p->t_last = rkm_now();
}

static void draw(rkm_progress *p, int final)
{
    double t = rkm_now(), el = t - p->t_start;
    double rate = el > 0 ? (double)p->done / el : 0;
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;
    double eta = rate > 0 && p->total > p->done ? (double)(p->total - p->done) / rate : 0;
    char a[32], b[32], r[32];
    rkm_fmt_bytes(p->done, a, sizeof a);
    rkm_fmt_bytes(p->total, b, sizeof b);
    rkm_fmt_bytes((uint64_t)rate, r, sizeof r);
    if (p->tty) {
        char bar[31];
        int fill = (int)(frac * 30);
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(p->out, "\r%s [%s] %5.1f%% %s / %s  %s/s  ETA %4.0fs ", p->label, bar, frac * 100, a, b, r, eta);
        if (final) fputc('\n', p->out);
    } else {
        fprintf(p->out, "%s: %5.1f%% %s / %s, %s/s, %s %.0fs\n", p->label, frac * 100, a, b, r,
                final ? "took" : "ETA", final ? el : eta);
    }
    fflush(p->out);
}

void rkm_progress_add(rkm_progress *p, uint64_t bytes)
{
    p->done += bytes;
    if (!p->out) return;
    double t = rkm_now();
    if (t - p->t_last >= (p->tty ? 0.2 : 5.0)) {
        p->t_last = t;
        draw(p, 0);
    }
}

void rkm_progress_done(rkm_progress *p)
{
    if (p->out) draw(p, 1);
}
