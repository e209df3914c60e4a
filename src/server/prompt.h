/*
 * prompt.h - request -> prompt tokens (chat template through
 * rkm_chat_prompt, Ollama's system override, raw prompts). Worker thread
 * only; see prompt.c.
 */
#ifndef RKM_SERVER_PROMPT_H
#define RKM_SERVER_PROMPT_H

#include "rkmojo.h"
#include "runtime/media.h"
#include "server/api.h"

/* The prompt text of a generation request (malloc'd): the chat template
 * with the request's messages, tools and switches, or the raw prompt;
 * *add_bos: the tokenizer should add BOS. NULL + a message in err. */
char *srv_prompt_text(const rkm_model *m, const srv_request *rq, int *add_bos, char *err, size_t errcap);
/* Prompt tokens of a generation request (malloc'd *ids), with prefill (the
 * start of the reply written for the model, or NULL) after the template's
 * text; *think_inside: the rendered prompt ends inside a <think> block. 0,
 * or a negative code with a message for the client in err (status 400). */
int srv_prompt_tokens(const rkm_model *m, const srv_request *rq, const char *prefill, int32_t **ids, int *n_ids,
                      int *think_inside, char *err, size_t errcap);
/* The same for a request with images: the prompt with the images' rows
 * at their markers (runtime/media.h) for a tower of parameters vp; takes
 * the decoded images imgs[0..rq->n_images) (freed on failure too). 0, or
 * a code with a message for the client in err (400: markers and images
 * that do not pair up). */
int srv_prompt_media(const rkm_model *m, const srv_request *rq, const char *prefill, const rkm_vision_hparams *vp,
                     rkm_image *imgs, rkm_media_prompt *out, int *think_inside, char *err, size_t errcap);
/* Plain text with BOS, no special tokens (embeddings). */
int srv_text_tokens(const rkm_model *m, const char *text, int32_t **ids, int *n_ids, char *err,
                    size_t errcap);

#endif
