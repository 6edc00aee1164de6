/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Android statsd push format (docs: shared/reference/statsd-wire.md): a pure
 * StatsEvent encoder, the datagram around it, the mapping from records to
 * atoms, and a decoder that parses a datagram back (for tests and tools).
 *
 * Datagram, little-endian: 11-byte log header (u8 5, u16 tid, u32 tv_sec,
 * u32 tv_nsec), u32 tag 1937006964, then the StatsEvent:
 *   07 <numElements> 01 <boottime ns:i64> 00 <atom id:i32> <fields...>
 *
 * A record becomes one atom:
 *   - histogram, counter, gauge: first its dims in record order: int32 of
 *     the value (Android enums), except dims whose value is a run-time id
 *     (ktel_dim.id_label): string label (the decimal id when the label is
 *     missing, so the field type is stable); then
 *   - histogram: the delta buckets as one repeated int64 field;
 *   - counter: the delta as int64; gauge: the value as int64;
 *   - event: only its fields, in order (its dims are among them): integers
 *     of 1..4 bytes as int32, of 8 bytes (or unknown width, size 0) as
 *     int64, bits unchanged; label-map ids (ktel_event_field.id_label) as
 *     their label string like dims; strings (char arrays, int arrays) as
 *     strings.
 * Records without an atom id cannot be expressed and are refused (-EINVAL).
 */
#ifndef KTEL_ANDROID_EVENT_H
#define KTEL_ANDROID_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

#define KTEL_ANDROID_LOG_ID_STATS 5
#define KTEL_ANDROID_LOG_HEADER_SIZE 11
#define KTEL_ANDROID_STATS_TAG 1937006964u
/* Largest StatsEvent buffer statsd accepts for a pushed event. */
#define KTEL_ANDROID_MAX_EVENT 4064
#define KTEL_ANDROID_MAX_DATAGRAM (KTEL_ANDROID_LOG_HEADER_SIZE + 4 + KTEL_ANDROID_MAX_EVENT)
#define KTEL_ANDROID_MAX_ELEMENTS 127
#define KTEL_ANDROID_MAX_LIST 127
#define KTEL_ANDROID_DEFAULT_SOCKET "/dev/socket/statsdw"

/* Type byte low nibble. */
enum ktel_android_type {
	KTEL_ANDROID_INT32 = 0x00,
	KTEL_ANDROID_INT64 = 0x01,
	KTEL_ANDROID_STRING = 0x02,
	KTEL_ANDROID_LIST = 0x03,
	KTEL_ANDROID_FLOAT = 0x04,
	KTEL_ANDROID_BOOL = 0x05,
	KTEL_ANDROID_BYTE_ARRAY = 0x06,
	KTEL_ANDROID_OBJECT = 0x07,
	KTEL_ANDROID_KEY_VALUE_PAIRS = 0x08,
	KTEL_ANDROID_ATTRIBUTION_CHAIN = 0x09,
	KTEL_ANDROID_ERROR = 0x0F,
};

/*
 * A StatsEvent under construction. Writes past KTEL_ANDROID_MAX_EVENT or
 * beyond 127 elements set err and write nothing more: the event is then
 * refused by __end(), never truncated.
 */
struct ktel_android_event {
	uint8_t buf[KTEL_ANDROID_MAX_EVENT];
	size_t len;
	uint32_t n_elements;
	int err;
};

void ktel_android_event__begin(struct ktel_android_event *ev, uint32_t atom_id,
			       uint64_t timestamp_ns);
void ktel_android_event__int32(struct ktel_android_event *ev, int32_t v);
void ktel_android_event__int64(struct ktel_android_event *ev, int64_t v);
/* A string without its NUL. */
void ktel_android_event__string(struct ktel_android_event *ev, const char *s);
/* A repeated int64 field of n (<= 127) elements. */
void ktel_android_event__int64_array(struct ktel_android_event *ev, const int64_t *v, size_t n);
/* Finish: write numElements. Returns 0, -EMSGSIZE (over 4064 bytes) or
 * -E2BIG (more than 127 elements, or a list longer than 127). */
int ktel_android_event__end(struct ktel_android_event *ev);

/*
 * Write header + tag + event into out (cap bytes). wall_ns is CLOCK_REALTIME
 * of the event. Returns the datagram length, or -ENOSPC when out is short.
 */
int ktel_android__datagram(uint8_t *out, size_t cap, uint16_t tid, int64_t wall_ns,
			   const struct ktel_android_event *ev);

/*
 * Encode rec as one datagram (see the mapping above) into out, stamped with
 * the record's end times. Returns the length, -EINVAL (no atom id, unknown
 * record type), -EMSGSIZE / -E2BIG (over the limits) or -ENOSPC.
 */
int ktel_android__encode_record(const struct ktel_record *rec, uint16_t tid, uint8_t *out,
				size_t cap);

/*
 * The attribution field: an attributed record (a derived dimension "app" or
 * "app_class", docs/privacy.md) adds one int32 field after the atom's
 * others, so a parser of the atom without it ignores it. Integers only, no
 * name: KTEL_ANDROID_ATTR_* for "other", "unknown" and the classes, an
 * app's app id (10000-19999, `by: app`) for an app.
 */
#define KTEL_ANDROID_ATTR_OTHER 1
#define KTEL_ANDROID_ATTR_UNKNOWN 2
#define KTEL_ANDROID_ATTR_SYSTEM 3
#define KTEL_ANDROID_ATTR_APP 4
#define KTEL_ANDROID_ATTR_SDK_SANDBOX 5
#define KTEL_ANDROID_ATTR_ISOLATED 6
#define KTEL_ANDROID_ATTR_EXT_GID 7
#define KTEL_ANDROID_ATTR_SHARED_GID 8
#define KTEL_ANDROID_ATTR_RESERVED 9

/* The attribution field's value for an attribution label (a class name,
 * "other", "unknown", or an app id in decimal); KTEL_ANDROID_ATTR_UNKNOWN
 * for anything else. */
int32_t ktel_android__attr_code(const char *label);

/* ---- decoding ------------------------------------------------------------ */

#define KTEL_ANDROID_DECODE_MAX_FIELDS KTEL_ANDROID_MAX_ELEMENTS

struct ktel_android_field {
	uint8_t type;          /* enum ktel_android_type */
	uint8_t n_annotations; /* annotations after the value (skipped) */
	int64_t i;             /* INT32, INT64, BOOL */
	float f;               /* FLOAT */
	const uint8_t *data;   /* STRING, BYTE_ARRAY bytes; LIST raw elements */
	uint32_t len;          /* STRING, BYTE_ARRAY length; LIST element count */
	uint8_t list_type;     /* LIST element type */
};

struct ktel_android_decoded {
	bool has_header;
	uint8_t log_id;
	uint16_t tid;
	uint32_t tv_sec, tv_nsec;
	uint32_t tag;
	uint8_t n_elements;
	uint64_t timestamp_ns;
	uint32_t atom_id;
	uint8_t atom_annotations;
	uint32_t n_fields;
	struct ktel_android_field fields[KTEL_ANDROID_DECODE_MAX_FIELDS];
};

/*
 * Parse buf (a datagram when with_header, else a bare StatsEvent). Field
 * data point into buf. Returns 0, or -EBADMSG for anything statsd would
 * reject: short or trailing bytes, wrong header, wrong element count, an
 * error field (ret->fields is then not filled).
 */
int ktel_android__decode(const uint8_t *buf, size_t len, bool with_header,
			 struct ktel_android_decoded *ret);

/* Element i of an int32/int64/bool LIST field, as int64. */
int64_t ktel_android_field__list_i64(const struct ktel_android_field *f, uint32_t i);

#endif /* KTEL_ANDROID_EVENT_H */
