/*
 * chat_format.h - prompt tokens for the run and chat subcommands: a
 * conversation through rkm_chat_prompt (the rule the server follows too),
 * and tokenizing into a malloc'd array.
 */
#ifndef RKM_CLI_CHAT_FORMAT_H
#define RKM_CLI_CHAT_FORMAT_H

#include <stdint.h>

#include "rkmojo.h"

/* Tokens of the rendered conversation (with the generation prompt), BOS as
 * rkm_chat_prompt says unless allow_bos is 0. Returns the count, or < 0
 * with rkm_last_error(). */
int rkm_chat_tokens(const rkm_model *m, const rkm_chat_message *msgs, int n, int allow_bos,
                    int32_t **ids);


#endif
