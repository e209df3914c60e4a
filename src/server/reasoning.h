/*
 * reasoning.h - splits a reply into its reasoning and its answer as the
 * text streams: a leading <think>...</think> block (Qwen3, DeepSeek-R1,
 * GLM and other thinking models) is reasoning, the rest is content. A
 * generation that starts inside the block (the template opened <think> in
 * the prompt) is reasoning up to the first </think>. A tag cut across
 * pieces is held back until it is decided; whitespace right after
 * </think> is dropped. A <think> that comes after the answer has started
 * is content.
 *
 * Harmony (gpt-oss): the reply is messages "<|channel|>NAME<|message|>
 * TEXT<|end|>", the later ones opened by "<|start|>assistant": the
 * analysis channel is reasoning, the final (and commentary) channels
 * content; headers and markers are dropped, and so is a message to a
 * recipient ("to=functions.NAME": a tool call, server/toolcall.h's). A
 * reply that does not start with a marker is content.
 *
 * Pure and single-threaded: one splitter per generation, owned by its
 * caller (no allocation of its own).
 */
#ifndef RKM_SERVER_REASONING_H
#define RKM_SERVER_REASONING_H

#include <stddef.h>

#include "util/buf.h"

typedef struct srv_think {
    int harmony;     /* gpt-oss's channels instead of <think> */
    int state;       /* tags: 0 start, 1 reasoning, 2 after </think> (whitespace dropped), 3 content;
                      * harmony: 0 header, 1 analysis text, 3 other text, 4 plain content,
                      * 5 a message to a recipient (a tool call: dropped) */
    char hold[160];  /* a possible tag prefix (or a harmony header) held back */
    int n_hold;
} srv_think;

/* inside: the prompt ends inside a <think> block. */
void srv_think_init(srv_think *t, int inside);
/* A splitter of gpt-oss's harmony channels. */
void srv_think_init_harmony(srv_think *t);
/* Feeds n bytes; appends what is decided to reasoning and content. */
void srv_think_push(srv_think *t, const char *s, size_t n, rkm_buf *reasoning, rkm_buf *content);
/* End of the reply: whatever is held goes where it was heading. */
void srv_think_finish(srv_think *t, rkm_buf *reasoning, rkm_buf *content);
/* Does a rendered prompt end inside a <think> block (the template opened
 * it for the model)? */
int srv_think_prompt_inside(const char *prompt);

#endif
