/*
 * json_schema.h - JSON Schema to GBNF (text/grammar.h), for structured
 * outputs: the grammar accepts exactly the JSON texts (compact or with a
 * little whitespace) the schema describes, within what it supports:
 *
 *   type (one or a list), object properties in schema order with required
 *   and optional ones, additionalProperties (false, true or a schema),
 *   arrays with items, prefixItems, minItems / maxItems, string minLength /
 *   maxLength and the formats date, time, date-time and uuid, integer and
 *   number, boolean, null, enum, const, anyOf / oneOf (as a union), a
 *   single allOf, $ref into $defs / definitions (recursion included), and
 *   the annotations (title, description, examples, default, $schema, $id,
 *   $comment, deprecated, readOnly, writeOnly), which change nothing.
 *
 * Anything else (pattern, minimum, other formats, ...) is an error naming
 * the keyword and where it is: a request with it gets a 400, never a
 * silently looser grammar.
 *
 * Stateless; any thread. Ownership: the caller frees the returned text.
 */
#ifndef RKM_TEXT_JSON_SCHEMA_H
#define RKM_TEXT_JSON_SCHEMA_H

#include <stddef.h>

struct cJSON;

/* GBNF for the schema (root rule "root"), malloc'd; NULL with the message
 * in rkm_last_error(). */
char *rkm_json_schema_to_gbnf(const struct cJSON *schema);
/* GBNF rules for n alternatives "before[i] <JSON of schemas[i]> after[i]"
 * (literal texts, NULL or "" for none) as the rule "alt", with every rule
 * it needs but no "root": the caller writes root in terms of alt (tool
 * calls: one or several). Malloc'd; NULL with the message (naming the
 * unsupported keyword) in rkm_last_error(). */
char *rkm_json_schema_alts_gbnf(int n, const char *const *before, const struct cJSON *const *schemas,
                                const char *const *after);
/* GBNF for any JSON object (OpenAI json_object, Ollama "json"). */
const char *rkm_json_object_gbnf(void);

#endif
