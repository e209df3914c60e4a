/*
 * tools.h - the request side of tool calling, shared by both APIs: the
 * "tools" list, "tool_choice" and "parallel_tool_calls", and the tool
 * fields of chat messages (an assistant's earlier "tool_calls", a tool
 * result's "tool_call_id" and name), normalised to the shape chat
 * templates read: tool_calls[i] = {id, type: "function", function: {name,
 * arguments}} with arguments an object (OpenAI sends a JSON string; a
 * string that is not a JSON object stays a string).
 *
 * Pure functions (no globals, no I/O), any thread. What they store in the
 * request is freed by srv_request_free.
 */
#ifndef RKM_SERVER_TOOLS_H
#define RKM_SERVER_TOOLS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "server/api.h"

/* tools, tool_choice, parallel_tool_calls of a chat body into r. 0, or -1
 * with a message for the client in err. */
int srv_get_tools(srv_request *r, const cJSON *root, char *err, size_t errcap);
/* The tool fields of message m (already r->msgs[r->n_msgs - 1] = d). */
int srv_get_msg_tools(srv_request *r, srv_msg *d, const cJSON *m, char *err, size_t errcap);
/* Is s[0..n) a function name rkmojo takes? OpenAI's rule
 * ([A-Za-z0-9_-]{1,64}) with '.' and ':', as some tool sets use: names go
 * into grammars and replies. */
int srv_tool_name_ok(const char *s, size_t n);
/* Does the request give the template tools (tools present, choice not none)? */
int srv_tools_active(const srv_request *r);
/* The tool named name in r->tools (its "function" object), or NULL. */
const cJSON *srv_tool_find(const srv_request *r, const char *name);

#endif
