// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Android StatsEvent encoder and decoder, byte-compatible with AOSP
 * libstatssocket's stats_event.c and statsd's LogEvent parser.
 */
#include "android_event.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- encoding ----------------------------------------------------------- */

static void put_bytes(struct ktel_android_event *ev, const void *p, size_t n)
{
	if (ev->err)
		return;
	if (n > sizeof(ev->buf) - ev->len) {
		ev->err = -EMSGSIZE;
		return;
	}
	memcpy(ev->buf + ev->len, p, n);
	ev->len += n;
}

static void put_u8(struct ktel_android_event *ev, uint8_t v)
{
	put_bytes(ev, &v, 1);
}

/* Little-endian, whatever the host is. */
static void put_le(struct ktel_android_event *ev, uint64_t v, size_t n)
{
	uint8_t b[8];

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put_bytes(ev, b, n);
}

/* Every top-level value counts towards numElements (a u8, at most 127). */
static void element(struct ktel_android_event *ev, uint8_t type)
{
	if (!ev->err && ++ev->n_elements > KTEL_ANDROID_MAX_ELEMENTS)
		ev->err = -E2BIG;
	put_u8(ev, type);
}

void ktel_android_event__begin(struct ktel_android_event *ev, uint32_t atom_id,
			       uint64_t timestamp_ns)
{
	ev->len = 0;
	ev->n_elements = 0;
	ev->err = 0;
	put_u8(ev, KTEL_ANDROID_OBJECT);
	put_u8(ev, 0); /* numElements, written by __end() */
	element(ev, KTEL_ANDROID_INT64);
	put_le(ev, timestamp_ns, 8);
	element(ev, KTEL_ANDROID_INT32);
	put_le(ev, atom_id, 4);
}

void ktel_android_event__int32(struct ktel_android_event *ev, int32_t v)
{
	element(ev, KTEL_ANDROID_INT32);
	put_le(ev, (uint32_t)v, 4);
}

void ktel_android_event__int64(struct ktel_android_event *ev, int64_t v)
{
	element(ev, KTEL_ANDROID_INT64);
	put_le(ev, (uint64_t)v, 8);
}

void ktel_android_event__string(struct ktel_android_event *ev, const char *s)
{
	size_t n = strlen(s);

	element(ev, KTEL_ANDROID_STRING);
	if (n > INT32_MAX) {
		ev->err = ev->err ? ev->err : -EMSGSIZE;
		return;
	}
	put_le(ev, (uint32_t)n, 4);
	put_bytes(ev, s, n);
}

void ktel_android_event__int64_array(struct ktel_android_event *ev, const int64_t *v, size_t n)
{
	element(ev, KTEL_ANDROID_LIST);
	if (n > KTEL_ANDROID_MAX_LIST) {
		ev->err = ev->err ? ev->err : -E2BIG;
		return;
	}
	put_u8(ev, (uint8_t)n);
	put_u8(ev, KTEL_ANDROID_INT64);
	for (size_t i = 0; i < n; i++)
		put_le(ev, (uint64_t)v[i], 8);
}

int ktel_android_event__end(struct ktel_android_event *ev)
{
	if (ev->err)
		return ev->err;
	ev->buf[1] = (uint8_t)ev->n_elements;
	return 0;
}

static void le_store(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int ktel_android__datagram(uint8_t *out, size_t cap, uint16_t tid, int64_t wall_ns,
			   const struct ktel_android_event *ev)
{
	size_t total = KTEL_ANDROID_LOG_HEADER_SIZE + 4 + ev->len;

	if (cap < total)
		return -ENOSPC;
	if (wall_ns < 0)
		wall_ns = 0;
	out[0] = KTEL_ANDROID_LOG_ID_STATS;
	le_store(out + 1, tid, 2);
	le_store(out + 3, (uint32_t)(wall_ns / 1000000000), 4);
	le_store(out + 7, (uint32_t)(wall_ns % 1000000000), 4);
	le_store(out + 11, KTEL_ANDROID_STATS_TAG, 4);
	memcpy(out + 15, ev->buf, ev->len);
	return (int)total;
}

static int32_t clamp_i32(int64_t v)
{
	return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

/* Android atoms carry enums as int32; run-time ids mean nothing off-host. */
static void encode_dim(struct ktel_android_event *ev, const struct ktel_dim *d)
{
	char num[24];

	if (!d->id_label) {
		ktel_android_event__int32(ev, clamp_i32(d->value));
		return;
	}
	if (d->label) {
		ktel_android_event__string(ev, d->label);
		return;
	}
	snprintf(num, sizeof(num), "%" PRId64, d->value);
	ktel_android_event__string(ev, num);
}

/*
 * One event field as an atom field. Integers keep their width: up to 4
 * bytes an int32, 8 bytes (or unknown) an int64, with the bits unchanged (a
 * u32 above INT32_MAX reads back through an atom's uint32 field; Android has
 * no unsigned types on the wire). A run-time label-map id is sent as its
 * label, like a dimension (encode_dim), since the id means nothing
 * off-host.
 */
static void encode_event_field(struct ktel_android_event *ev, const struct ktel_event_field *f)
{
	uint64_t bits = f->type == KTEL_FIELD_VALUE_INT ? (uint64_t)f->i : f->u;
	char num[24];

	if (f->type == KTEL_FIELD_VALUE_STRING) {
		ktel_android_event__string(ev, f->s ? f->s : "");
	} else if (f->id_label) {
		if (!f->label)
			snprintf(num, sizeof(num), "%" PRIu64, f->u);
		ktel_android_event__string(ev, f->label ? f->label : num);
	} else if (f->size && f->size <= 4) {
		ktel_android_event__int32(ev, (int32_t)(uint32_t)bits);
	} else {
		ktel_android_event__int64(ev, (int64_t)bits);
	}
}

int32_t ktel_android__attr_code(const char *label)
{
	static const struct {
		const char *name;
		int32_t code;
	} codes[] = {
		{"other", KTEL_ANDROID_ATTR_OTHER},
		{"unknown", KTEL_ANDROID_ATTR_UNKNOWN},
		{"system", KTEL_ANDROID_ATTR_SYSTEM},
		{"app", KTEL_ANDROID_ATTR_APP},
		{"sdk_sandbox", KTEL_ANDROID_ATTR_SDK_SANDBOX},
		{"isolated", KTEL_ANDROID_ATTR_ISOLATED},
		{"ext_gid", KTEL_ANDROID_ATTR_EXT_GID},
		{"shared_gid", KTEL_ANDROID_ATTR_SHARED_GID},
		{"reserved", KTEL_ANDROID_ATTR_RESERVED},
	};
	unsigned long v = 0;
	size_t i;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(label, codes[i].name) == 0)
			return codes[i].code;
	/* An app id: 5 decimal digits, 10000-19999, nothing else. */
	for (i = 0; label[i] >= '0' && label[i] <= '9' && i < 6; i++)
		v = v * 10 + (unsigned long)(label[i] - '0');
	if (i == 5 && !label[i] && v >= 10000 && v < 20000)
		return (int32_t)v;
	return KTEL_ANDROID_ATTR_UNKNOWN;
}

/* The record's attribution dimension as an atom carries it (the names
 * "app" and "app_class" are attribution's own: no plugin declares them),
 * or NULL. */
static const struct ktel_dim *attr_dim(const struct ktel_record *rec)
{
	for (uint32_t i = 0; i < rec->n_dims && i < KTEL_MAX_DIMS; i++)
		if (rec->dims[i].derived && rec->dims[i].name && rec->dims[i].label &&
		    (strcmp(rec->dims[i].name, "app") == 0 ||
		     strcmp(rec->dims[i].name, "app_class") == 0))
			return &rec->dims[i];
	return NULL;
}

int ktel_android__encode_record(const struct ktel_record *rec, uint16_t tid, uint8_t *out,
				size_t cap)
{
	const struct ktel_dim *attr = rec->type == KTEL_RECORD_EVENT ? NULL : attr_dim(rec);
	struct ktel_android_event ev;
	int64_t buckets[KTEL_HIST_BUCKETS];
	uint32_t nb;
	int r;

	if (!rec->atom_id || rec->atom_id > INT32_MAX)
		return -EINVAL;
	ktel_android_event__begin(&ev, rec->atom_id, rec->end_boottime_ns);
	/* An event's dims are some of its fields: the fields alone, in order,
	 * are its atom. */
	for (uint32_t i = 0; rec->type != KTEL_RECORD_EVENT && i < rec->n_dims && i < KTEL_MAX_DIMS;
	     i++)
		if (!rec->dims[i].derived) /* not a field of the atom (atoms.proto) */
			encode_dim(&ev, &rec->dims[i]);
	switch (rec->type) {
	case KTEL_RECORD_HISTOGRAM:
		nb = rec->hist.delta.n_buckets;
		if (nb > KTEL_HIST_BUCKETS)
			nb = KTEL_HIST_BUCKETS;
		for (uint32_t k = 0; k < nb; k++)
			buckets[k] = (int64_t)rec->hist.delta.counts[k];
		ktel_android_event__int64_array(&ev, buckets, nb);
		break;
	case KTEL_RECORD_COUNTER:
		ktel_android_event__int64(&ev, (int64_t)rec->counter.delta);
		break;
	case KTEL_RECORD_GAUGE:
		ktel_android_event__int64(&ev, rec->gauge);
		break;
	case KTEL_RECORD_EVENT:
		for (uint32_t i = 0; i < rec->event.n_fields && i < KTEL_MAX_EVENT_FIELDS; i++)
			encode_event_field(&ev, &rec->event.fields[i]);
		break;
	default:
		return -EINVAL;
	}
	/* After every field of the atom: parsers that do not know it stop
	 * before it. */
	if (attr)
		ktel_android_event__int32(&ev, ktel_android__attr_code(attr->label));
	r = ktel_android_event__end(&ev);
	if (r)
		return r;
	return ktel_android__datagram(out, cap, tid, rec->end_wall_ns, &ev);
}

/* ---- decoding ----------------------------------------------------------- */

struct reader {
	const uint8_t *p;
	size_t left;
	bool bad;
};

static const uint8_t *take(struct reader *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || n > r->left) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	r->left -= n;
	return p;
}

static uint64_t get_le(struct reader *r, size_t n)
{
	const uint8_t *p = take(r, n);
	uint64_t v = 0;

	for (size_t i = 0; p && i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Annotations: <id:u8> <type:u8> <bool u8 | int32>; they are checked, not kept. */
static void skip_annotations(struct reader *r, unsigned n)
{
	for (unsigned i = 0; i < n && !r->bad; i++) {
		uint8_t type;

		get_le(r, 1);
		type = (uint8_t)get_le(r, 1);
		if (type == KTEL_ANDROID_BOOL)
			get_le(r, 1);
		else if (type == KTEL_ANDROID_INT32)
			get_le(r, 4);
		else
			r->bad = true;
	}
}

static size_t scalar_size(uint8_t type)
{
	switch (type) {
	case KTEL_ANDROID_INT32:
	case KTEL_ANDROID_FLOAT:
		return 4;
	case KTEL_ANDROID_INT64:
		return 8;
	case KTEL_ANDROID_BOOL:
		return 1;
	default:
		return 0;
	}
}

static void read_list(struct reader *r, struct ktel_android_field *f)
{
	uint8_t count = (uint8_t)get_le(r, 1);
	size_t size;

	f->list_type = (uint8_t)get_le(r, 1);
	f->len = count;
	f->data = r->p;
	if (count > KTEL_ANDROID_MAX_LIST) {
		r->bad = true;
		return;
	}
	if (f->list_type == KTEL_ANDROID_STRING) {
		for (unsigned i = 0; i < count && !r->bad; i++)
			take(r, (size_t)(uint32_t)get_le(r, 4));
		return;
	}
	size = scalar_size(f->list_type);
	if (!size)
		r->bad = true;
	else
		take(r, size * count);
}

static void read_attribution(struct reader *r, struct ktel_android_field *f)
{
	uint8_t n = (uint8_t)get_le(r, 1);

	f->len = n;
	f->data = r->p;
	for (unsigned i = 0; i < n && !r->bad; i++) {
		get_le(r, 4);
		take(r, (size_t)(uint32_t)get_le(r, 4));
	}
}

/* Read one field's value after its type byte. */
static void read_value(struct reader *r, struct ktel_android_field *f)
{
	uint32_t bits;

	switch (f->type) {
	case KTEL_ANDROID_INT32:
		f->i = (int32_t)(uint32_t)get_le(r, 4);
		break;
	case KTEL_ANDROID_INT64:
		f->i = (int64_t)get_le(r, 8);
		break;
	case KTEL_ANDROID_BOOL:
		f->i = (int64_t)get_le(r, 1);
		break;
	case KTEL_ANDROID_FLOAT:
		bits = (uint32_t)get_le(r, 4);
		memcpy(&f->f, &bits, sizeof(f->f));
		break;
	case KTEL_ANDROID_STRING:
	case KTEL_ANDROID_BYTE_ARRAY:
		f->len = (uint32_t)get_le(r, 4);
		f->data = take(r, f->len);
		break;
	case KTEL_ANDROID_LIST:
		read_list(r, f);
		break;
	case KTEL_ANDROID_ATTRIBUTION_CHAIN:
		read_attribution(r, f);
		break;
	default:
		/* ERROR, OBJECT inside an event, KEY_VALUE_PAIRS: statsd drops
		 * the event; so do we. */
		r->bad = true;
	}
}

static int decode_header(struct reader *r, struct ktel_android_decoded *d)
{
	d->has_header = true;
	d->log_id = (uint8_t)get_le(r, 1);
	d->tid = (uint16_t)get_le(r, 2);
	d->tv_sec = (uint32_t)get_le(r, 4);
	d->tv_nsec = (uint32_t)get_le(r, 4);
	d->tag = (uint32_t)get_le(r, 4);
	if (r->bad || d->log_id != KTEL_ANDROID_LOG_ID_STATS || d->tag != KTEL_ANDROID_STATS_TAG)
		return -EBADMSG;
	return 0;
}

int ktel_android__decode(const uint8_t *buf, size_t len, bool with_header,
			 struct ktel_android_decoded *ret)
{
	struct reader r = {.p = buf, .left = len};
	struct ktel_android_decoded *d = ret;
	uint8_t type;

	memset(d, 0, sizeof(*d));
	if (with_header && decode_header(&r, d))
		return -EBADMSG;
	if (get_le(&r, 1) != KTEL_ANDROID_OBJECT)
		return -EBADMSG;
	d->n_elements = (uint8_t)get_le(&r, 1);
	if (get_le(&r, 1) != KTEL_ANDROID_INT64)
		return -EBADMSG;
	d->timestamp_ns = get_le(&r, 8);
	type = (uint8_t)get_le(&r, 1);
	if ((type & 0x0f) != KTEL_ANDROID_INT32)
		return -EBADMSG;
	d->atom_id = (uint32_t)get_le(&r, 4);
	d->atom_annotations = type >> 4;
	skip_annotations(&r, d->atom_annotations);
	while (!r.bad && r.left) {
		struct ktel_android_field *f;

		if (d->n_fields >= KTEL_ANDROID_DECODE_MAX_FIELDS)
			return -EBADMSG;
		f = &d->fields[d->n_fields++];
		type = (uint8_t)get_le(&r, 1);
		f->type = type & 0x0f;
		f->n_annotations = type >> 4;
		read_value(&r, f);
		skip_annotations(&r, f->n_annotations);
	}
	if (r.bad || d->n_elements != d->n_fields + 2)
		return -EBADMSG;
	return 0;
}

int64_t ktel_android_field__list_i64(const struct ktel_android_field *f, uint32_t i)
{
	struct reader r;
	size_t size = scalar_size(f->list_type);

	if (f->type != KTEL_ANDROID_LIST || i >= f->len || !size ||
	    f->list_type == KTEL_ANDROID_FLOAT)
		return 0;
	r = (struct reader){.p = f->data + size * i, .left = size};
	if (size == 4)
		return (int32_t)(uint32_t)get_le(&r, 4);
	return (int64_t)get_le(&r, size);
}
