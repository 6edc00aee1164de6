/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The JSON sink's line formatter, shared with the sinks that speak the same
 * line format (stream). The format is documented at the top of json_sink.c.
 */
#ifndef KTEL_JSON_FORMAT_H
#define KTEL_JSON_FORMAT_H

#include <stddef.h>

#include "record.h"

/*
 * Append the JSON line of r, '\n' included, to the growable buffer *buf
 * (len bytes used of cap; realloc'd as needed, the caller frees it). On
 * failure the buffer stays consistent and *len is unchanged. Returns 0,
 * -EINVAL for an unknown record type or -ENOMEM.
 */
int ktel_json__format_line(const struct ktel_record *r, char **buf, size_t *len, size_t *cap);

#endif /* KTEL_JSON_FORMAT_H */
