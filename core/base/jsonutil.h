/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* jansson one-liners shared by the control socket and inspect. */
#ifndef KTEL_JSONUTIL_H
#define KTEL_JSONUTIL_H

#include <stdbool.h>

#include <jansson.h>

/* Set key to s (JSON null when s is NULL). 0 or -1 like jansson. */
int ktel_json_set_str(json_t *o, const char *key, const char *s);
int ktel_json_set_int(json_t *o, const char *key, json_int_t v);
int ktel_json_set_bool(json_t *o, const char *key, bool v);

#endif /* KTEL_JSONUTIL_H */
