/*
 * reasoning.c - <think> blocks split from the answer (see reasoning.h).
 */
#include "server/reasoning.h"

#include <string.h>

static const char open_tag[] = "<think>", close_tag[] = "</think>";

void srv_think_init(srv_think *t, int inside)
{
    memset(t, 0, sizeof *t);
    t->state = inside ? 1 : 0;
}

void srv_think_init_harmony(srv_think *t)
{
    memset(t, 0, sizeof *t);
    t->harmony = 1;
}

static const char h_message[] = "<|message|>", h_channel[] = "<|channel|>", h_end[] = "<|end|>";

/* Harmony: one byte. */
static void step_harmony(srv_think *t, char c, rkm_buf *reasoning, rkm_buf *content)
{
    if (t->state == 4) {
        rkm_buf_addc(content, c);
        return;
    }
    t->hold[t->n_hold++] = c;
    if (t->state == 0) { /* a header up to <|message|> */
        if (t->n_hold <= 2 && memcmp(t->hold, "<|", (size_t)t->n_hold)) {
            /* plain text: the model wrote no channel */
            rkm_buf_add(content, t->hold, (size_t)t->n_hold);
            t->n_hold = 0;
            t->state = 4;
            return;
        }
        size_t ml = sizeof h_message - 1;
        if ((size_t)t->n_hold >= ml && !memcmp(t->hold + t->n_hold - ml, h_message, ml)) {
            t->hold[t->n_hold] = 0;
            const char *ch = strstr(t->hold, h_channel);
            /* a message to a recipient (" to=functions.NAME") is a tool
             * call: the tool-call parser (toolcall.h) reads it, not us */
            t->state = strstr(t->hold, " to=") || !strncmp(t->hold, "to=", 3) ? 5
                       : ch && !strncmp(ch + sizeof h_channel - 1, "analysis", 8) ? 1 : 3;
            t->n_hold = 0;
        } else if (t->n_hold == (int)sizeof t->hold - 1) { /* no header after all */
            rkm_buf_add(content, t->hold, (size_t)t->n_hold);
            t->n_hold = 0;
            t->state = 4;
        }
        return;
    }
    /* a message's text up to <|end|> */
    rkm_buf *out = t->state == 1 ? reasoning : t->state == 5 ? NULL : content;
    while (t->n_hold && memcmp(t->hold, h_end, (size_t)t->n_hold)) {
        if (out) rkm_buf_addc(out, t->hold[0]);
        memmove(t->hold, t->hold + 1, (size_t)--t->n_hold);
    }
    if (t->n_hold == (int)sizeof h_end - 1) {
        t->n_hold = 0;
        t->state = 0;
    }
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* One byte through the machine. */
static void step(srv_think *t, char c, rkm_buf *reasoning, rkm_buf *content)
{
    switch (t->state) {
    case 0: { /* start: leading whitespace, then <think> or the answer */
        t->hold[t->n_hold++] = c;
        int w = 0;
        while (w < t->n_hold && is_space(t->hold[w])) w++;
        int rest = t->n_hold - w;
        if (rest == 0 && t->n_hold < (int)sizeof t->hold) return;
        if (rest > 0 && !memcmp(t->hold + w, open_tag, (size_t)rest)) {
            if (rest == (int)sizeof open_tag - 1) { /* the block: its leading whitespace goes */
                t->n_hold = 0;
                t->state = 1;
            } else if (t->n_hold == (int)sizeof t->hold) {
                break;
            }
            return;
        }
        break; /* not the tag: the answer from the first byte */
    }
    case 1: /* reasoning until </think> */
        t->hold[t->n_hold++] = c;
        while (t->n_hold && memcmp(t->hold, close_tag, (size_t)t->n_hold)) {
            rkm_buf_addc(reasoning, t->hold[0]); /* the first held byte cannot start the tag */
            memmove(t->hold, t->hold + 1, (size_t)--t->n_hold);
        }
        if (t->n_hold == (int)sizeof close_tag - 1) {
            t->n_hold = 0;
            t->state = 2;
        }
        return;
    case 2: /* after </think>: skip whitespace */
        if (is_space(c)) return;
        t->state = 3;
        rkm_buf_addc(content, c);
        return;
    default:
        rkm_buf_addc(content, c);
        return;
    }
    /* state 0 decided for the answer */
    rkm_buf_add(content, t->hold, (size_t)t->n_hold);
    t->n_hold = 0;
    t->state = 3;
}

void srv_think_push(srv_think *t, const char *s, size_t n, rkm_buf *reasoning, rkm_buf *content)
{
    for (size_t i = 0; i < n; i++) {
        if (t->harmony) step_harmony(t, s[i], reasoning, content);
        else step(t, s[i], reasoning, content);
    }
}

void srv_think_finish(srv_think *t, rkm_buf *reasoning, rkm_buf *content)
{
    /* a harmony header never finished says nothing */
    if (t->harmony && t->state == 0) t->n_hold = 0;
    if (t->n_hold && t->state != 5) rkm_buf_add(t->state == 1 ? reasoning : content, t->hold, (size_t)t->n_hold);
    t->n_hold = 0;
    if (t->state == 0) t->state = 3;
}

int srv_think_prompt_inside(const char *prompt)
{
    const char *o = NULL, *c = NULL;
    for (const char *p = prompt; (p = strstr(p, open_tag)); p++) o = p;
    for (const char *p = prompt; (p = strstr(p, close_tag)); p++) c = p;
    return o && (!c || c < o);
}
