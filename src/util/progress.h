/*
 * progress.h - progress reporting for long jobs (convert, synth): a
 * redrawn bar with bytes, rate and ETA on a terminal, a plain line every
 * few seconds otherwise. Single-threaded (the job's driving thread).
 */
#ifndef RKM_PROGRESS_H
#define RKM_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct rkm_progress {
    FILE *out;        /* NULL: silent */
    int tty;
    const char *label;
    uint64_t total, done;
    double t_start, t_last;
} rkm_progress;

void rkm_progress_init(rkm_progress *p, FILE *out, const char *label, uint64_t total);
void rkm_progress_add(rkm_progress *p, uint64_t bytes);
/* Final line with the average rate. */
void rkm_progress_done(rkm_progress *p);

#endif
