/*
 * ollama.h - the Ollama-compatible API of rkmojo serve (ollama.c): the
 * request parser and the reply formatters dispatch.c picks for the
 * SRV_OLLAMA_* kinds. Pure functions; returned strings are malloc'd (NULL
 * when out of memory).
 */
#ifndef RKM_SERVER_OLLAMA_H
#define RKM_SERVER_OLLAMA_H

#include <cjson/cJSON.h>

#include "server/api.h"

/* Fills r (already set to the common defaults) from root; 0 or -1 + err. */
int srv_ollama_parse(srv_request *r, const cJSON *root, char *err, size_t errcap);
/* {"error":"message"} */
char *srv_ollama_error(const char *msg);
char *srv_ollama_result(const srv_request *rq, const srv_result *r);
/* One NDJSON line with done:false. */
char *srv_ollama_chunk(const srv_request *rq, const srv_result *r, const char *delta);
/* The done:true line with the timings. */
char *srv_ollama_stream_end(const srv_request *rq, const srv_result *r);
char *srv_ollama_stream_error(const char *msg);
char *srv_ollama_embeddings(const srv_request *rq, const char *model, const float *vecs, int n, int dim,
                            int n_tokens, double t_total_s, double t_load_s);

#endif
