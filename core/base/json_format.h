/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The JSON line formatter (json_format.c) of the JSON sink and of the sinks
 * that speak the same line format (stream) and `ktelemetryctl show`. The
 * format is documented at the top of json_sink.c.
 */
#ifndef KTEL_JSON_FORMAT_H
#define KTEL_JSON_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

struct ktel_textbuf;

#define KTEL_JSON_STRS_SLOTS 64 /* a power of two */
#define KTEL_JSON_STRS_TEXT 4096
#define KTEL_JSON_STRS_MAX 255 /* longer escaped strings are not kept */

/*
 * The strings of one batch of records, escaped once. The names of the
 * dimensions and fields, the metric, atom, unit, boot id and labels are the
 * same in every record of a batch (one metric's events), and escaping them
 * was most of a line's cost. They are kept by pointer: within one batch
 * every record is alive and unchanged, so one pointer is one string. A
 * later batch may find other text at a freed and reused address, so the
 * kept strings must be forgotten before each batch:
 * ktel_json_strs__reset(). A zeroed struct is an empty one.
 */
struct ktel_json_strs {
	uint32_t gen;  /* slots of another generation are empty */
	uint32_t used; /* bytes of text taken */
	struct {
		const char *str;
		uint32_t gen;
		uint16_t off, len;
	} slot[KTEL_JSON_STRS_SLOTS];
	char text[KTEL_JSON_STRS_TEXT];
};

/* Forget every kept string: call before each batch. */
void ktel_json_strs__reset(struct ktel_json_strs *c);

/*
 * Append the JSON line of r, '\n' included, to b, taking the repeated
 * strings from c (NULL: escape every string). Returns false for an unknown
 * record type (b unchanged); an allocation failure sets b->fail.
 */
bool ktel_json__append(struct ktel_textbuf *b, struct ktel_json_strs *c,
		       const struct ktel_record *r);

/*
 * Append the JSON line of r, '\n' included, to the growable buffer *buf
 * (len bytes used of cap; realloc'd as needed, the caller frees it). On
 * failure the buffer stays consistent and *len is unchanged. Returns 0,
 * -EINVAL for an unknown record type or -ENOMEM.
 */
int ktel_json__format_line(const struct ktel_record *r, char **buf, size_t *len, size_t *cap);

#endif /* KTEL_JSON_FORMAT_H */
