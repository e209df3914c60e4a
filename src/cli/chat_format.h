/*
 * chat_format.h - renders a conversation with the model's chat template
 * (or the built-in fallback for its architecture) for the run and chat
 * subcommands, and tokenizes into a malloc'd array.
 */
#ifndef RKM_CLI_CHAT_FORMAT_H
#define RKM_CLI_CHAT_FORMAT_H

#include <stdint.h>

#include "rkmojo.h"
#include "text/chat.h"

/* The prompt text for msgs (malloc'd), or NULL + rkm_last_error(). */
char *rkm_chat_format(const rkm_model *m, const rkm_chat_msg *msgs, int n, int add_generation_prompt);

/* Tokenizes text into a malloc'd array; returns the count or < 0. */
int rkm_tokenize_alloc(const rkm_model *m, const char *text, int add_bos, int parse_special, int32_t **ids);

#endif
