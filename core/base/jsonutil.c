// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "jsonutil.h"

int ktel_json_set_str(json_t *o, const char *key, const char *s)
{
	return json_object_set_new(o, key, s ? json_string(s) : json_null());
}

int ktel_json_set_int(json_t *o, const char *key, json_int_t v)
{
	return json_object_set_new(o, key, json_integer(v));
}

int ktel_json_set_bool(json_t *o, const char *key, bool v)
{
	return json_object_set_new(o, key, json_boolean(v));
}
