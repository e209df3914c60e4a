/*
 * openai.h - the OpenAI-compatible API of rkmojo serve (openai.c): the
 * request parser and the reply formatters dispatch.c picks for the
 * SRV_OPENAI_* kinds. Pure functions; returned strings are malloc'd (NULL
 * when out of memory).
 */
#ifndef RKM_SERVER_OPENAI_H
#define RKM_SERVER_OPENAI_H

#include <cjson/cJSON.h>

#include "server/api.h"

/* Fills r (already set to the common defaults) from root; 0 or -1 + err. */
int srv_openai_parse(srv_request *r, const cJSON *root, char *err, size_t errcap);
/* {"error":{"message","type","param","code"}}; status picks type and code. */
char *srv_openai_error(int status, const char *msg);
/* n choices: rs[0..n) (usage: the prompt once, every choice's tokens). */
char *srv_openai_result(const srv_request *rq, const srv_result *rs, int n);
/* "data: {...}\n\n"; first adds the assistant role (chat). */
char *srv_openai_chunk(const srv_request *rq, const srv_result *r, const char *delta, int first);
/* The finish chunk, the usage chunk when asked, "data: [DONE]". */
char *srv_openai_stream_end(const srv_request *rq, const srv_result *r);
/* ... in parts, for n > 1: one choice's finish chunk; the rest. */
char *srv_openai_choice_end(const srv_request *rq, const srv_result *r);
char *srv_openai_stream_tail(const srv_request *rq, const srv_result *r);
char *srv_openai_stream_error(const char *msg);
char *srv_openai_embeddings(const srv_request *rq, const char *model, const float *vecs, int n,
                            int dim, int n_tokens);

#endif
