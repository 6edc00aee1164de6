// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Android StatsEvent encoder: golden bytes, limits, record mapping, decoder;
 * stream events decoded from BTF by the real stream decoder become atoms of
 * their fields with each integer's width; every metric of every built-in
 * plugin round-trips and matches its message in docs/atoms.proto.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/btf.h>

#include "ktel_test.h"
#include "plugin_loader.h"
#include "statsd/android_event.h"
#include "stream_reader.h"

/* The worked example of statsd-wire.md, byte for byte. */
static void test_worked_example(void **state)
{
	static const uint8_t want[40] = {
		0x07, 0x04, 0x01, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x00, 0xf7, 0x2a,
		0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03, 0x02, 0x01, 0x03, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	static const int64_t list[] = {3, 0};
	struct ktel_android_event ev;

	ktel_android_event__begin(&ev, 10999, 0x0102030405060708ULL);
	ktel_android_event__int32(&ev, 2);
	ktel_android_event__int64_array(&ev, list, 2);
	assert_int_equal(ktel_android_event__end(&ev), 0);
	assert_int_equal(ev.len, sizeof(want));
	assert_memory_equal(ev.buf, want, sizeof(want));
}

/* Log header and tag around the event. */
static void test_datagram_header(void **state)
{
	static const uint8_t want_head[15] = {0x05, 0x34, 0x12, 0x07, 0x00, 0x00, 0x00, 0x09,
					      0x00, 0x00, 0x00, 0x74, 0x61, 0x74, 0x73};
	struct ktel_android_event ev;
	uint8_t out[64];
	int n;

	ktel_android_event__begin(&ev, 10999, 0x0102030405060708ULL);
	assert_int_equal(ktel_android_event__end(&ev), 0);
	n = ktel_android__datagram(out, sizeof(out), 0x1234, 7 * 1000000000LL + 9, &ev);
	assert_int_equal(n, 15 + 16);
	assert_memory_equal(out, want_head, sizeof(want_head));
	assert_memory_equal(out + 15, ev.buf, ev.len);
	assert_int_equal(ktel_android__datagram(out, 30, 1, 0, &ev), -ENOSPC);
}

static void le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static struct ktel_record hist_record(uint32_t atom, const char *metric)
{
	struct ktel_record r = {
		.type = KTEL_RECORD_HISTOGRAM,
		.metric = metric,
		.atom_id = atom,
		.end_boottime_ns = 123456789012ULL,
		.end_wall_ns = 1700000000LL * 1000000000LL + 42,
	};

	r.hist.delta.scheme = KTEL_HIST_LOG2;
	r.hist.delta.n_buckets = KTEL_HIST_BUCKETS;
	for (uint32_t k = 0; k < KTEL_HIST_BUCKETS; k++)
		r.hist.delta.counts[k] = (k * 7919ULL) % 1000 + (k == 31 ? (1ULL << 40) : 0);
	return r;
}

/* A 32-bucket histogram is one repeated int64 field: 03 20 01 + 32 x 8 bytes. */
static void test_histogram_record_bytes(void **state)
{
	struct ktel_record r = hist_record(100002, "compaction_duration");
	uint8_t out[KTEL_ANDROID_MAX_DATAGRAM], want[2 + 9 + 5 + 259];
	size_t off = 0;
	int n;

	n = ktel_android__encode_record(&r, 77, out, sizeof(out));
	assert_int_equal(n, 15 + (int)sizeof(want));
	want[off++] = 0x07;
	want[off++] = 3;
	want[off++] = 0x01;
	le64(want + off, r.end_boottime_ns);
	off += 8;
	want[off++] = 0x00;
	want[off++] = 0xa2; /* 100002 = 0x000186a2 */
	want[off++] = 0x86;
	want[off++] = 0x01;
	want[off++] = 0x00;
	want[off++] = 0x03;
	want[off++] = 32;
	want[off++] = 0x01;
	for (int k = 0; k < 32; k++, off += 8)
		le64(want + off, r.hist.delta.counts[k]);
	assert_int_equal(off, sizeof(want));
	assert_memory_equal(out + 15, want, sizeof(want));
	/* tv_sec / tv_nsec from the record's end wall time */
	assert_int_equal(out[3] | out[4] << 8 | out[5] << 16 | (uint32_t)out[6] << 24, 1700000000u);
	assert_int_equal(out[7], 42);
}

/*
 * An attributed record: the same atom with one int32 more after the counts
 * (00 + the code), numElements one higher; the atom's other bytes do not
 * move, so a parser that stops after the counts reads the atom as before.
 * Names never reach the wire: an app is its app id, the rest codes; an
 * attribution by anything else (cgroup) adds no field.
 */
static void test_attribution_field_bytes(void **state)
{
	struct ktel_record r = hist_record(100002, "compaction_duration");
	uint8_t plain[KTEL_ANDROID_MAX_DATAGRAM], out[KTEL_ANDROID_MAX_DATAGRAM];
	int n_plain, n;

	(void)state;
	n_plain = ktel_android__encode_record(&r, 77, plain, sizeof(plain));
	assert_true(n_plain > 0);
	r.n_dims = 1;
	r.dims[0] = (struct ktel_dim){.name = "app", .label = "10123", .derived = true};
	n = ktel_android__encode_record(&r, 77, out, sizeof(out));
	assert_int_equal(n, n_plain + 5);
	assert_int_equal(out[15 + 1], 4); /* numElements: timestamp, atom id, counts, attribution */
	assert_memory_equal(out + 15 + 2, plain + 15 + 2, (size_t)n_plain - 15 - 2);
	assert_int_equal(out[n_plain], 0x00); /* int32 */
	assert_int_equal(out[n_plain + 1] | out[n_plain + 2] << 8, 10123);
	assert_int_equal(out[n_plain + 3], 0);
	assert_int_equal(out[n_plain + 4], 0);
	/* A class by its code. */
	r.dims[0] = (struct ktel_dim){.name = "app_class", .label = "isolated", .derived = true};
	n = ktel_android__encode_record(&r, 77, out, sizeof(out));
	assert_int_equal(n, n_plain + 5);
	assert_int_equal(out[n_plain + 1], KTEL_ANDROID_ATTR_ISOLATED);
	/* Not an attribution an atom carries: no field. */
	r.dims[0] = (struct ktel_dim){.name = "cgroup", .label = "system.slice", .derived = true};
	n = ktel_android__encode_record(&r, 77, out, sizeof(out));
	assert_int_equal(n, n_plain);
	/* The codes, and labels that are no app id. */
	assert_int_equal(ktel_android__attr_code("other"), KTEL_ANDROID_ATTR_OTHER);
	assert_int_equal(ktel_android__attr_code("unknown"), KTEL_ANDROID_ATTR_UNKNOWN);
	assert_int_equal(ktel_android__attr_code("system"), KTEL_ANDROID_ATTR_SYSTEM);
	assert_int_equal(ktel_android__attr_code("app"), KTEL_ANDROID_ATTR_APP);
	assert_int_equal(ktel_android__attr_code("reserved"), KTEL_ANDROID_ATTR_RESERVED);
	assert_int_equal(ktel_android__attr_code("10000"), 10000);
	assert_int_equal(ktel_android__attr_code("19999"), 19999);
	assert_int_equal(ktel_android__attr_code("20000"), KTEL_ANDROID_ATTR_UNKNOWN);
	assert_int_equal(ktel_android__attr_code("9999"), KTEL_ANDROID_ATTR_UNKNOWN);
	assert_int_equal(ktel_android__attr_code("010057"), KTEL_ANDROID_ATTR_UNKNOWN);
	assert_int_equal(ktel_android__attr_code("10057x"), KTEL_ANDROID_ATTR_UNKNOWN);
	assert_int_equal(ktel_android__attr_code("com.example.app"), KTEL_ANDROID_ATTR_UNKNOWN);
	assert_int_equal(ktel_android__attr_code(""), KTEL_ANDROID_ATTR_UNKNOWN);
}

/* 4064 bytes is accepted, one more is refused: never truncated. */
static void test_size_limit(void **state)
{
	static char big[4100];
	struct ktel_android_event ev;
	uint8_t out[KTEL_ANDROID_MAX_DATAGRAM];

	/* 16 bytes of header, 5 of string type+length: 4043 fits exactly. */
	memset(big, 'x', 4043);
	big[4043] = '\0';
	ktel_android_event__begin(&ev, 1, 1);
	ktel_android_event__string(&ev, big);
	assert_int_equal(ktel_android_event__end(&ev), 0);
	assert_int_equal(ev.len, KTEL_ANDROID_MAX_EVENT);
	assert_int_equal(ktel_android__datagram(out, sizeof(out), 1, 1, &ev),
			 KTEL_ANDROID_MAX_DATAGRAM);

	memset(big, 'x', 4044);
	big[4044] = '\0';
	ktel_android_event__begin(&ev, 1, 1);
	ktel_android_event__string(&ev, big);
	ktel_android_event__int32(&ev, 5); /* later writes must not resurrect it */
	assert_int_equal(ktel_android_event__end(&ev), -EMSGSIZE);
}

static void test_oversized_record_refused(void **state)
{
	static char s[201];
	struct ktel_record r = {.type = KTEL_RECORD_EVENT, .metric = "oom_kill", .atom_id = 5};
	struct ktel_event_field fields[KTEL_MAX_EVENT_FIELDS];
	uint8_t out[KTEL_ANDROID_MAX_DATAGRAM];

	memset(s, 'a', 200);
	r.event.n_fields = KTEL_MAX_EVENT_FIELDS;
	r.event.fields = fields;
	for (int i = 0; i < KTEL_MAX_EVENT_FIELDS; i++)
		fields[i] = (struct ktel_event_field){.name = "f",
						      .type = KTEL_FIELD_VALUE_STRING,
						      .s = s};
	assert_int_equal(ktel_android__encode_record(&r, 1, out, sizeof(out)), -EMSGSIZE);
	/* No atom id: cannot be an Android atom. */
	r.atom_id = 0;
	r.event.n_fields = 1;
	assert_int_equal(ktel_android__encode_record(&r, 1, out, sizeof(out)), -EINVAL);
}

static void test_element_limit(void **state)
{
	struct ktel_android_event ev;
	int64_t list[128] = {0};

	ktel_android_event__begin(&ev, 1, 1);
	for (int i = 0; i < 125; i++)
		ktel_android_event__int32(&ev, i);
	assert_int_equal(ktel_android_event__end(&ev), 0);
	assert_int_equal(ev.buf[1], 127);
	ktel_android_event__int32(&ev, 1);
	assert_int_equal(ktel_android_event__end(&ev), -E2BIG);

	ktel_android_event__begin(&ev, 1, 1);
	ktel_android_event__int64_array(&ev, list, 128);
	assert_int_equal(ktel_android_event__end(&ev), -E2BIG);
}

/* ---- every built-in atom: plugin descriptors x encoder x atoms.proto ------ */

/*
 * One field of an atom message in docs/atoms.proto:
 * "  optional|repeated <type> <name> = <number>;".
 */
struct proto_field {
	bool repeated;
	char type[64];
	char name[64];
	int number;
};

#define PROTO_MAX_FIELDS 64

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t cap = 0;

	if (!f)
		fail_msg("%s: cannot open", path);
	assert_true(getdelim(&text, &cap, '\0', f) > 0);
	fclose(f);
	return text;
}

/* The text from the line after "<head> {" up to its closing "}" line. */
static const char *proto_block(const char *proto, const char *head, const char **ret_end)
{
	char open[160];
	const char *p;

	snprintf(open, sizeof(open), "%s {\n", head);
	p = strstr(proto, open);
	if (!p)
		fail_msg("docs/atoms.proto: no \"%s {\"", head);
	p += strlen(open);
	*ret_end = strstr(p, "\n}");
	if (!*ret_end)
		fail_msg("docs/atoms.proto: \"%s\" is not closed", head);
	return p;
}

/* Fields of message atom_name, in file order; comments and blank lines skipped. */
static uint32_t proto_message(const char *proto, const char *atom_name, struct proto_field *out)
{
	char head[96], line[256], label[16];
	const char *p, *end;
	uint32_t n = 0;

	snprintf(head, sizeof(head), "message %s", atom_name);
	p = proto_block(proto, head, &end);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char *comment;
		struct proto_field *f = &out[n];

		snprintf(line, sizeof(line), "%.*s", (int)len, p);
		p += len + 1;
		comment = strstr(line, "//");
		if (comment)
			*comment = '\0';
		if (strspn(line, " \t") == strlen(line))
			continue;
		if (n == PROTO_MAX_FIELDS)
			fail_msg("docs/atoms.proto: message %s: over %d fields", atom_name,
				 PROTO_MAX_FIELDS);
		if (sscanf(line, " %15s %63s %63s = %d ;", label, f->type, f->name, &f->number) !=
			    4 ||
		    (strcmp(label, "optional") && strcmp(label, "repeated")))
			fail_msg("docs/atoms.proto: message %s: cannot read \"%s\"", atom_name,
				 line);
		f->repeated = !strcmp(label, "repeated");
		n++;
	}
	return n;
}

static bool proto_is_enum(const char *proto, const char *type)
{
	char head[96];

	snprintf(head, sizeof(head), "\nenum %s {\n", type);
	return strstr(proto, head) != NULL;
}

/* Entries of the Atom oneof: how many atoms the schema defines. */
static uint32_t proto_atom_count(const char *proto)
{
	const char *end, *p = proto_block(proto, "message Atom {\n  oneof pushed", &end);
	uint32_t n = 0;

	for (; p < end; p++)
		n += *p == ';';
	return n;
}

/* The StatsEvent type a non-repeated scalar of the schema is written as. */
static uint8_t proto_wire_type(const char *proto, const char *atom, const struct proto_field *f)
{
	if (f->repeated)
		fail_msg("docs/atoms.proto: %s.%s: repeated where a scalar belongs", atom, f->name);
	if (!strcmp(f->type, "int32") || proto_is_enum(proto, f->type))
		return KTEL_ANDROID_INT32;
	if (!strcmp(f->type, "int64"))
		return KTEL_ANDROID_INT64;
	if (!strcmp(f->type, "string"))
		return KTEL_ANDROID_STRING;
	fail_msg("docs/atoms.proto: %s.%s: type %s has no StatsEvent mapping here", atom, f->name,
		 f->type);
	return 0xff;
}

/* Field i of the message is field number i + 1, named as the record names it. */
static void check_proto_slot(const char *atom, const struct proto_field *f, uint32_t i,
			     const char *name)
{
	if (f->number != (int)i + 1)
		fail_msg("docs/atoms.proto: %s.%s is field %d, the encoder writes it as field %u",
			 atom, f->name, f->number, i + 1);
	if (strcmp(f->name, name))
		fail_msg("docs/atoms.proto: %s field %u is \"%s\", the record's is \"%s\"", atom,
			 i + 1, f->name, name);
}

static void check_string_field(const struct ktel_android_field *f, const char *want)
{
	assert_int_equal(f->type, KTEL_ANDROID_STRING);
	assert_int_equal(f->len, strlen(want));
	assert_memory_equal(f->data, want, f->len);
}

/* The datagram around every atom, and the atom id the descriptor gave. */
static void check_envelope(const struct ktel_android_decoded *d, const struct ktel_record *r,
			   const struct ktel_metric_desc *md, uint32_t n_fields)
{
	assert_true(d->has_header);
	assert_int_equal(d->log_id, KTEL_ANDROID_LOG_ID_STATS);
	assert_int_equal(d->tid, 0xbeef);
	assert_int_equal(d->tag, KTEL_ANDROID_STATS_TAG);
	assert_int_equal(d->timestamp_ns, r->end_boottime_ns);
	if (d->atom_id != md->atom_id)
		fail_msg("metric %s: atom %u on the wire, descriptor says %u", md->name, d->atom_id,
			 md->atom_id);
	assert_int_equal(d->n_fields, n_fields);
	/* timestamp and atom id are elements too */
	assert_int_equal(d->n_elements, n_fields + 2);
}

static enum ktel_record_type metric_record_type(const struct ktel_metric_desc *md)
{
	if (md->scheme != KTEL_HIST_NONE)
		return KTEL_RECORD_HISTOGRAM;
	return md->value_kind == KTEL_VALUE_GAUGE ? KTEL_RECORD_GAUGE : KTEL_RECORD_COUNTER;
}

/*
 * The dimensions an atom carries as its first fields: the declared ones but
 * an attribution dimension (KTEL_DIM_ATTRIBUTION), which records do not
 * carry while the metric is not attributed and which, attributed by app or
 * app class, is the atom's last field, after the value. The built-in
 * plugins declare it last.
 */
static uint32_t atom_dims(const struct ktel_metric_desc *md)
{
	uint32_t n = md->n_dims;

	for (uint32_t i = 0; md->dim_flags && i < md->n_dims; i++)
		if (md->dim_flags[i] & KTEL_DIM_ATTRIBUTION) {
			if (i != md->n_dims - 1)
				fail_msg("metric %s: the attribution dimension is not the last",
					 md->name);
			n--;
		}
	return n;
}

/*
 * A window of an accumulator metric with every descriptor dimension set:
 * label_map dims carry a run-time id and (when named) its label, label_enum
 * dims an enum value and its name, the others a bare integer.
 */
static void accumulator_record(const struct ktel_metric_desc *md, bool named, struct ktel_record *r)
{
	static char labels[KTEL_MAX_DIMS][32];

	assert_true(md->n_dims <= KTEL_MAX_DIMS);
	*r = hist_record(md->atom_id, md->name);
	r->type = metric_record_type(md);
	if (r->type == KTEL_RECORD_COUNTER) {
		r->counter.delta = 99 + md->atom_id;
		r->counter.total = 1ULL << 50;
	} else if (r->type == KTEL_RECORD_GAUGE)
		r->gauge = -12345678901LL - md->atom_id;
	r->n_dims = atom_dims(md);
	for (uint32_t i = 0; i < atom_dims(md); i++) {
		const struct ktel_dimension_desc *dd = &md->dims[i];

		snprintf(labels[i], sizeof(labels[i]), "%s-label", dd->name);
		r->dims[i] = (struct ktel_dim){
			.name = dd->name,
			.value = dd->label_map ? 1000 + i : 3 + i,
			.label = dd->label_enum || (dd->label_map && named) ? labels[i] : NULL,
			.id_label = dd->label_map != NULL,
		};
	}
	/* The "device" dim metric_pull adds for KTEL_DIM_DEV_*: derived, so
	 * not a field of the atom (the round trip counts the fields). */
	for (uint32_t i = 0; md->dim_flags && i < md->n_dims; i++)
		if (md->dim_flags[i] & (KTEL_DIM_DEV_MAJOR | KTEL_DIM_DEV_T)) {
			r->dims[r->n_dims++] = (struct ktel_dim){.name = KTEL_DEVICE_DIM,
								 .value = 7 << 20,
								 .label = "loop0",
								 .derived = true};
			break;
		}
}

/*
 * Each dimension is its field, in descriptor order: label_map dims a string
 * (the label, or the decimal id when the map had no name), the others int32;
 * the schema agrees (string / enum / int32). Then the value: counts as one
 * repeated int64, or an int64 value.
 */
static void check_accumulator_atom(const char *proto, const struct ktel_metric_desc *md,
				   const struct ktel_record *r,
				   const struct ktel_android_decoded *d, const int32_t *attr)
{
	static struct proto_field pf[PROTO_MAX_FIELDS];
	uint32_t n = proto_message(proto, md->atom_name, pf);
	const uint32_t nd = atom_dims(md);
	const bool attributable = nd != md->n_dims;
	const struct ktel_android_field *v = &d->fields[nd];

	if (n != nd + 1 + attributable)
		fail_msg("docs/atoms.proto: %s has %u fields; %u dims + 1 value%s expected",
			 md->atom_name, n, nd, attributable ? " + attribution" : "");
	/* The attribution field: an int32 after the value, on the wire only
	 * when the record is attributed. */
	if (attributable) {
		check_proto_slot(md->atom_name, &pf[nd + 1], nd + 1, "attribution");
		if (strcmp(pf[nd + 1].type, "int32"))
			fail_msg("docs/atoms.proto: %s.attribution is %s, not int32", md->atom_name,
				 pf[nd + 1].type);
	}
	check_envelope(d, r, md, nd + 1 + (attr != NULL));
	if (attr) {
		assert_int_equal(d->fields[nd + 1].type, KTEL_ANDROID_INT32);
		assert_int_equal(d->fields[nd + 1].i, *attr);
	}
	assert_int_equal(d->tv_sec, 1700000000u);
	assert_int_equal(d->tv_nsec, 42);
	for (uint32_t i = 0; i < nd; i++) {
		const struct ktel_dimension_desc *dd = &md->dims[i];
		const struct ktel_android_field *f = &d->fields[i];
		uint8_t wire = proto_wire_type(proto, md->atom_name, &pf[i]);
		char num[24];

		check_proto_slot(md->atom_name, &pf[i], i, dd->name);
		if (dd->label_map) {
			if (strcmp(pf[i].type, "string"))
				fail_msg("docs/atoms.proto: %s.%s is %s; a label_map dimension "
					 "is a string",
					 md->atom_name, dd->name, pf[i].type);
			snprintf(num, sizeof(num), "%" PRId64, r->dims[i].value);
			check_string_field(f, r->dims[i].label ? r->dims[i].label : num);
			continue;
		}
		if (dd->label_enum && !proto_is_enum(proto, pf[i].type))
			fail_msg("docs/atoms.proto: %s.%s is %s; a label_enum dimension is an enum",
				 md->atom_name, dd->name, pf[i].type);
		if (!dd->label_enum && strcmp(pf[i].type, "int32"))
			fail_msg("docs/atoms.proto: %s.%s is %s; a plain dimension is an int32",
				 md->atom_name, dd->name, pf[i].type);
		assert_int_equal(wire, KTEL_ANDROID_INT32);
		assert_int_equal(f->type, KTEL_ANDROID_INT32);
		assert_int_equal(f->i, r->dims[i].value);
	}
	if (r->type == KTEL_RECORD_HISTOGRAM) {
		check_proto_slot(md->atom_name, &pf[nd], nd, "counts");
		if (!pf[nd].repeated || strcmp(pf[nd].type, "int64"))
			fail_msg("docs/atoms.proto: %s.counts is not a repeated int64",
				 md->atom_name);
		assert_int_equal(v->type, KTEL_ANDROID_LIST);
		assert_int_equal(v->list_type, KTEL_ANDROID_INT64);
		assert_int_equal(v->len, KTEL_HIST_BUCKETS);
		for (uint32_t k = 0; k < KTEL_HIST_BUCKETS; k++)
			assert_int_equal(ktel_android_field__list_i64(v, k),
					 r->hist.delta.counts[k]);
		return;
	}
	check_proto_slot(md->atom_name, &pf[nd], nd, "value");
	assert_int_equal(proto_wire_type(proto, md->atom_name, &pf[nd]), KTEL_ANDROID_INT64);
	assert_int_equal(v->type, KTEL_ANDROID_INT64);
	assert_int_equal(v->i,
			 r->type == KTEL_RECORD_COUNTER ? (int64_t)r->counter.delta : r->gauge);
}

/* attr_dim/attr_label: an attributed record's derived dimension, and the
 * field's value it must become (attr_dim NULL: not attributed). */
static void round_trip_accumulator(const char *proto, const struct ktel_metric_desc *md, bool named,
				   const char *attr_dim, const char *attr_label, int32_t attr)
{
	static struct ktel_android_decoded d;
	uint8_t out[KTEL_ANDROID_MAX_DATAGRAM];
	struct ktel_record r;
	int n;

	accumulator_record(md, named, &r);
	if (attr_dim)
		r.dims[r.n_dims++] = (struct ktel_dim){.name = attr_dim,
						       .label = attr_label,
						       .derived = true};
	n = ktel_android__encode_record(&r, 0xbeef, out, sizeof(out));
	if (n <= 0)
		fail_msg("metric %s: encode: %d", md->name, n);
	assert_int_equal(ktel_android__decode(out, (size_t)n, true, &d), 0);
	check_accumulator_atom(proto, md, &r, &d, attr_dim ? &attr : NULL);
}

/* Label maps of stream dims: even ids have a name, odd ones do not. */
static int stream_labels(void *ctx, uint32_t dim, uint64_t id, char *buf, size_t len)
{
	if (id & 1)
		return -ENOENT;
	snprintf(buf, len, "name-%u-%" PRIu64, dim, id);
	return 0;
}

/*
 * The atom of one event is its fields in struct order: each field's type on
 * the wire follows the record (strings and label-map ids as strings,
 * integers of up to 4 bytes int32, wider int64, bits kept), and the schema's
 * field of the same number has that name and type.
 */
static void check_stream_atom(const char *proto, const struct ktel_metric_desc *md,
			      const struct ktel_record *r, const struct ktel_android_decoded *d)
{
	static struct proto_field pf[PROTO_MAX_FIELDS];
	uint32_t n = proto_message(proto, md->atom_name, pf);

	if (n != r->event.n_fields)
		fail_msg("docs/atoms.proto: %s has %u fields, struct %s has %u", md->atom_name, n,
			 md->event_type, r->event.n_fields);
	check_envelope(d, r, md, n);
	for (uint32_t i = 0; i < n; i++) {
		const struct ktel_event_field *ef = &r->event.fields[i];
		const struct ktel_android_field *f = &d->fields[i];
		uint64_t bits = ef->type == KTEL_FIELD_VALUE_INT ? (uint64_t)ef->i : ef->u;
		uint8_t want;
		char num[24];

		check_proto_slot(md->atom_name, &pf[i], i, ef->name);
		if (ef->type == KTEL_FIELD_VALUE_STRING || ef->id_label)
			want = KTEL_ANDROID_STRING;
		else if (ef->size && ef->size <= 4)
			want = KTEL_ANDROID_INT32;
		else
			want = KTEL_ANDROID_INT64;
		if (proto_wire_type(proto, md->atom_name, &pf[i]) != want)
			fail_msg("docs/atoms.proto: %s.%s is %s; the event member (%u bytes) is "
				 "written as StatsEvent type %u",
				 md->atom_name, ef->name, pf[i].type, ef->size, want);
		assert_int_equal(f->type, want);
		if (ef->type == KTEL_FIELD_VALUE_STRING) {
			check_string_field(f, ef->s ? ef->s : "");
		} else if (ef->id_label) {
			snprintf(num, sizeof(num), "%" PRIu64, ef->u);
			check_string_field(f, ef->label ? ef->label : num);
		} else if (want == KTEL_ANDROID_INT32) {
			assert_int_equal(f->i, (int32_t)(uint32_t)bits);
		} else {
			assert_int_equal(f->i, (int64_t)bits);
		}
	}
	/* The descriptor's dims travel as the fields of the same name. */
	for (uint32_t k = 0; k < md->n_dims; k++) {
		uint32_t i = 0;

		while (i < n && strcmp(pf[i].name, md->dims[k].name))
			i++;
		if (i == n)
			fail_msg("docs/atoms.proto: %s has no field for dimension %s",
				 md->atom_name, md->dims[k].name);
	}
}

/*
 * One event of a stream metric, decoded from a filled buffer by the real
 * stream decoder over the plugin's own BTF, then encoded and read back. The
 * fill makes every byte differ, so a field read at the wrong width or offset
 * shows.
 */
static void round_trip_stream(const char *proto, const struct ktel_plugin *p,
			      const struct ktel_metric_desc *md)
{
	static const struct ktel_stream_clock clk = {.mono_to_boot_ns = 5000};
	static struct ktel_android_decoded d;
	struct ktel_event_field fields[KTEL_MAX_EVENT_FIELDS];
	uint8_t out[KTEL_ANDROID_MAX_DATAGRAM];
	struct ktel_stream_decoder *dec;
	struct ktel_err err = {0};
	struct bpf_object *obj;
	struct ktel_record r;
	uint8_t *event;
	char *strbuf;
	size_t size;
	int n;

	obj = bpf_object__open_mem(p->desc.bpf_object, p->desc.bpf_object_size, NULL);
	if (!obj)
		fail_msg("plugin %s: BPF object does not open", p->path);
	if (ktel_stream_decoder__new(md, bpf_object__btf(obj), stream_labels, NULL, &dec, &err))
		fail_msg("%s", err.msg);
	size = ktel_stream_decoder__event_size(dec);
	event = malloc(size);
	strbuf = malloc(ktel_stream_decoder__strbuf_size(dec));
	assert_non_null(event);
	assert_non_null(strbuf);
	for (size_t i = 0; i < size; i++)
		event[i] = (uint8_t)('a' + i % 26);
	memset(&r, 0, sizeof(r));
	assert_int_equal(ktel_stream_decoder__decode(dec, event, size, &clk, &r, fields, strbuf),
			 0);
	n = ktel_android__encode_record(&r, 0xbeef, out, sizeof(out));
	if (n <= 0)
		fail_msg("metric %s: encode: %d", md->name, n);
	assert_int_equal(ktel_android__decode(out, (size_t)n, true, &d), 0);
	check_stream_atom(proto, md, &r, &d);
	free(strbuf);
	free(event);
	ktel_stream_decoder__free(dec);
	bpf_object__close(obj);
}

static bool has_label_map(const struct ktel_metric_desc *md)
{
	for (uint32_t i = 0; i < md->n_dims; i++)
		if (md->dims[i].label_map)
			return true;
	return false;
}

/* Every metric of one plugin file; returns how many. */
static uint32_t round_trip_plugin(const char *proto, const char *path)
{
	struct ktel_plugin *p = NULL;
	struct ktel_err err = {0};
	uint32_t n;

	if (ktel_plugin__open_owner(path, getuid(), &p, &err))
		fail_msg("%s", err.msg);
	for (uint32_t i = 0; i < p->desc.n_metrics; i++) {
		const struct ktel_metric_desc *md = &p->desc.metrics[i];

		if (md->model == KTEL_MODEL_STREAM) {
			round_trip_stream(proto, p, md);
			continue;
		}
		round_trip_accumulator(proto, md, true, NULL, NULL, 0);
		/* an id whose name the map did not have: the decimal id */
		if (has_label_map(md))
			round_trip_accumulator(proto, md, false, NULL, NULL, 0);
		/* Attributed: an app by its app id, classes and other by their
		 * codes, never a name. */
		if (atom_dims(md) != md->n_dims) {
			round_trip_accumulator(proto, md, true, "app", "10057", 10057);
			round_trip_accumulator(proto, md, true, "app", "other",
					       KTEL_ANDROID_ATTR_OTHER);
			round_trip_accumulator(proto, md, true, "app_class", "sdk_sandbox",
					       KTEL_ANDROID_ATTR_SDK_SANDBOX);
			round_trip_accumulator(proto, md, true, "app_class", "app",
					       KTEL_ANDROID_ATTR_APP);
		}
	}
	n = p->desc.n_metrics;
	ktel_plugin__free(p);
	return n;
}

/*
 * Every metric of every plugin built into KTEL_PLUGIN_DIR goes through the
 * encoder and the strict decoder, and its atom is checked field by field
 * against its message in docs/atoms.proto. A metric added later is covered
 * by being in a plugin; the count must match the schema's Atom oneof.
 */
static void test_round_trip_builtin_atoms(void **state)
{
	char *proto = read_text(KTEL_SOURCE_DIR "/docs/atoms.proto");
	DIR *dir = opendir(KTEL_PLUGIN_DIR);
	uint32_t metrics = 0;
	struct dirent *e;

	if (!dir)
		fail_msg("%s: cannot open the plugin directory", KTEL_PLUGIN_DIR);
	while ((e = readdir(dir))) {
		char path[1024];
		size_t len = strlen(e->d_name);

		if (len < 4 || strcmp(e->d_name + len - 3, ".so"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", KTEL_PLUGIN_DIR, e->d_name);
		metrics += round_trip_plugin(proto, path);
	}
	closedir(dir);
	if (!metrics)
		fail_msg("%s: no plugin metrics to round-trip", KTEL_PLUGIN_DIR);
	if (metrics != proto_atom_count(proto))
		fail_msg("%s: %u metrics in the plugins, %u atoms in docs/atoms.proto",
			 KTEL_PLUGIN_DIR, metrics, proto_atom_count(proto));
	free(proto);
}

static void test_counter_gauge_event(void **state)
{
	static struct ktel_android_decoded d;
	struct ktel_record r = {.type = KTEL_RECORD_COUNTER, .atom_id = 7, .counter.delta = 99};
	uint8_t out[KTEL_ANDROID_MAX_DATAGRAM];
	int n;

	n = ktel_android__encode_record(&r, 1, out, sizeof(out));
	assert_int_equal(ktel_android__decode(out, (size_t)n, true, &d), 0);
	assert_int_equal(d.n_fields, 1);
	assert_int_equal(d.fields[0].type, KTEL_ANDROID_INT64);
	assert_int_equal(d.fields[0].i, 99);

	r.type = KTEL_RECORD_GAUGE;
	r.gauge = -12345678901LL;
	n = ktel_android__encode_record(&r, 1, out, sizeof(out));
	assert_int_equal(ktel_android__decode(out, (size_t)n, true, &d), 0);
	assert_int_equal(d.fields[0].i, -12345678901LL);

	r.type = KTEL_RECORD_EVENT;
	r.event.n_fields = 3;
	r.event.fields = (const struct ktel_event_field[]){
		{.type = KTEL_FIELD_VALUE_INT, .i = -3},
		{.type = KTEL_FIELD_VALUE_UINT, .u = 17},
		{.type = KTEL_FIELD_VALUE_STRING, .s = "kworker"},
	};
	n = ktel_android__encode_record(&r, 1, out, sizeof(out));
	assert_int_equal(ktel_android__decode(out, (size_t)n, true, &d), 0);
	assert_int_equal(d.n_fields, 3);
	/* No width given (size 0): int64, which holds any value. */
	assert_int_equal(d.fields[0].type, KTEL_ANDROID_INT64);
	assert_int_equal(d.fields[0].i, -3);
	assert_int_equal(d.fields[1].type, KTEL_ANDROID_INT64);
	assert_int_equal(d.fields[1].i, 17);
	assert_int_equal(d.fields[2].type, KTEL_ANDROID_STRING);
	assert_memory_equal(d.fields[2].data, "kworker", 7);
}

/* ---- stream events through the real decoder ------------------------------ */

/* An OOM-like event, as a BPF program would emit it. */
struct oomish {
	uint64_t ts_ns;
	int32_t pid;
	uint32_t uid;
	int16_t adj;
	uint32_t state;   /* enum pstate, labelled by its BTF enum */
	uint32_t heap_id; /* labelled through a label map */
	uint64_t rss;
	char comm[8];
};

#define OOMISH_FIELD(b, member, type_id)                                         \
	assert_int_equal(btf__add_field((b), #member, (type_id),                 \
					offsetof(struct oomish, member) * 8, 0), \
			 0)

/* The types of struct oomish, as clang would emit them. */
static struct btf *oomish_btf(void)
{
	struct btf *b = btf__new_empty();
	int u64, s32, u32, s16, chr, pstate, comm;

	assert_non_null(b);
	u64 = btf__add_int(b, "unsigned long long", 8, 0);
	s32 = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	u32 = btf__add_int(b, "unsigned int", 4, 0);
	s16 = btf__add_int(b, "short", 2, BTF_INT_SIGNED);
	chr = btf__add_int(b, "char", 1, BTF_INT_SIGNED);
	pstate = btf__add_enum(b, "pstate", 4);
	btf__add_enum_value(b, "STATE_FOREGROUND", 4);
	btf__add_enum_value(b, "STATE_CACHED", 8);
	comm = btf__add_array(b, u32, chr, 8);
	assert_true(btf__add_struct(b, "oomish", sizeof(struct oomish)) > 0);
	OOMISH_FIELD(b, ts_ns, u64);
	OOMISH_FIELD(b, pid, s32);
	OOMISH_FIELD(b, uid, u32);
	OOMISH_FIELD(b, adj, s16);
	OOMISH_FIELD(b, state, pstate);
	OOMISH_FIELD(b, heap_id, u32);
	OOMISH_FIELD(b, rss, u64);
	OOMISH_FIELD(b, comm, comm);
	return b;
}

/* Label map of heap_id (dimension 1): only id 3 has a name. */
static int heap_names(void *ctx, uint32_t dim, uint64_t id, char *buf, size_t len)
{
	assert_int_equal(dim, 1);
	if (id != 3)
		return -ENOENT;
	snprintf(buf, len, "system-heap");
	return 0;
}

static const struct ktel_dimension_desc oomish_dims[] = {
	{.name = "state", .label_enum = "pstate"},
	{.name = "heap_id", .label_map = "heap_names"},
};

static const struct ktel_metric_desc oomish_md = {
	.struct_size = sizeof(struct ktel_metric_desc),
	.name = "oomish_events",
	.atom_name = "OomishEvent",
	.atom_id = 100099,
	.map_name = "oomish_rb",
	.model = KTEL_MODEL_STREAM,
	.unit = "events",
	.dims = oomish_dims,
	.n_dims = 2,
	.event_type = "oomish",
};

struct bytes {
	uint8_t b[512];
	size_t len;
};

static void put_le(struct bytes *w, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		w->b[w->len++] = (uint8_t)(v >> (8 * i));
}

static void put_str(struct bytes *w, const char *s)
{
	w->b[w->len++] = KTEL_ANDROID_STRING;
	put_le(w, strlen(s), 4);
	memcpy(w->b + w->len, s, strlen(s));
	w->len += strlen(s);
}

/*
 * The atom of one event: its 8 fields in struct order and nothing else (the
 * dims are among them): u64 as int64, s32/u32/s16/enum as int32 (bits kept:
 * uid 0xfffffffe is int32 -2), the label-map id as its label (or the decimal
 * id when the map has no name), the char array as a string.
 */
static void check_oomish(struct ktel_stream_decoder *dec, char *strbuf, uint32_t heap_id,
			 const char *heap_text)
{
	static const struct ktel_stream_clock clk = {.mono_to_boot_ns = 5000,
						     .mono_to_wall_ns = 1700000000000000000LL};
	static struct ktel_android_decoded d;
	struct oomish e = {.ts_ns = 123456789,
			   .pid = -5,
			   .uid = 0xfffffffeu,
			   .adj = -900,
			   .state = 8,
			   .heap_id = heap_id,
			   .rss = 1ULL << 40};
	uint8_t out[KTEL_ANDROID_MAX_DATAGRAM];
	struct ktel_event_field fields[KTEL_MAX_EVENT_FIELDS];
	struct ktel_record rec;
	struct bytes want = {.len = 0};
	int n;

	memcpy(e.comm, "kwork", 6);
	memset(&rec, 0xff, sizeof(rec));
	assert_int_equal(ktel_stream_decoder__decode(dec, &e, sizeof(e), &clk, &rec, fields,
						     strbuf),
			 0);
	assert_int_equal(rec.n_dims, 2);
	n = ktel_android__encode_record(&rec, 7, out, sizeof(out));
	assert_true(n > 15);

	want.b[want.len++] = KTEL_ANDROID_OBJECT;
	want.b[want.len++] = 2 + 8;
	want.b[want.len++] = KTEL_ANDROID_INT64;
	put_le(&want, e.ts_ns + 5000, 8); /* boottime of the event */
	want.b[want.len++] = KTEL_ANDROID_INT32;
	put_le(&want, 100099, 4);
	want.b[want.len++] = KTEL_ANDROID_INT64; /* ts_ns */
	put_le(&want, e.ts_ns, 8);
	want.b[want.len++] = KTEL_ANDROID_INT32; /* pid */
	put_le(&want, 0xfffffffbu, 4);
	want.b[want.len++] = KTEL_ANDROID_INT32; /* uid */
	put_le(&want, 0xfffffffeu, 4);
	want.b[want.len++] = KTEL_ANDROID_INT32; /* adj -900 */
	put_le(&want, 0xfffffc7cu, 4);
	want.b[want.len++] = KTEL_ANDROID_INT32; /* state: the enum's value */
	put_le(&want, 8, 4);
	put_str(&want, heap_text);               /* heap_id */
	want.b[want.len++] = KTEL_ANDROID_INT64; /* rss */
	put_le(&want, e.rss, 8);
	put_str(&want, "kwork"); /* comm */
	assert_int_equal((size_t)n, 15 + want.len);
	assert_memory_equal(out + 15, want.b, want.len);

	/* And the decoder reads it back as the same typed fields. */
	assert_int_equal(ktel_android__decode(out, (size_t)n, true, &d), 0);
	assert_int_equal(d.atom_id, 100099);
	assert_int_equal(d.n_fields, 8);
	assert_int_equal(d.fields[1].type, KTEL_ANDROID_INT32);
	assert_int_equal(d.fields[1].i, -5);
	assert_int_equal(d.fields[2].i, -2);
	assert_int_equal(d.fields[3].i, -900);
	assert_int_equal(d.fields[5].type, KTEL_ANDROID_STRING);
	assert_int_equal(d.fields[5].len, strlen(heap_text));
	assert_memory_equal(d.fields[5].data, heap_text, d.fields[5].len);
	assert_int_equal(d.fields[6].type, KTEL_ANDROID_INT64);
	assert_int_equal(d.fields[6].i, 1LL << 40);
}

static void test_stream_event_atom(void **state)
{
	struct btf *btf = oomish_btf();
	struct ktel_stream_decoder *dec;
	struct ktel_err err = {0};
	char *strbuf;

	if (ktel_stream_decoder__new(&oomish_md, btf, heap_names, NULL, &dec, &err))
		fail_msg("%s", err.msg);
	strbuf = malloc(ktel_stream_decoder__strbuf_size(dec));
	assert_non_null(strbuf);
	check_oomish(dec, strbuf, 3, "system-heap");
	check_oomish(dec, strbuf, 9, "9");
	free(strbuf);
	ktel_stream_decoder__free(dec);
	btf__free(btf);
}

/* Anything statsd would reject, the decoder rejects too. */
static void test_decoder_rejects(void **state)
{
	static struct ktel_android_decoded d;
	struct ktel_record r = hist_record(100001, "direct_reclaim_latency");
	uint8_t out[KTEL_ANDROID_MAX_DATAGRAM + 1];
	int n;

	r.n_dims = 1;
	r.dims[0] = (struct ktel_dim){"heap", 1, "reserved", true, false};
	n = ktel_android__encode_record(&r, 1, out, sizeof(out));
	assert_true(n > 0);
	for (int len = 0; len < n; len++)
		assert_int_equal(ktel_android__decode(out, (size_t)len, true, &d), -EBADMSG);
	out[n] = 0;
	assert_int_equal(ktel_android__decode(out, (size_t)n + 1, true, &d), -EBADMSG);
	out[16]++; /* numElements */
	assert_int_equal(ktel_android__decode(out, (size_t)n, true, &d), -EBADMSG);
	out[16]--;
	out[0] = 4; /* not LOG_ID_STATS */
	assert_int_equal(ktel_android__decode(out, (size_t)n, true, &d), -EBADMSG);
	out[0] = 5;
	assert_int_equal(ktel_android__decode(out, (size_t)n, true, &d), 0);
	/* Bare event (a pulled atom) without header. */
	assert_int_equal(ktel_android__decode(out + 15, (size_t)n - 15, false, &d), 0);
	assert_int_equal(d.atom_id, 100001);
}

/* Annotations (as AOSP writes them) are skipped; an error field rejects. */
static void test_decoder_annotations_and_error(void **state)
{
	static struct ktel_android_decoded d;
	static const uint8_t annotated[] = {
		0x07, 0x03, 0x01, 1,    0,    0,    0,    0,    0,    0,    0,
		0x10, 0x05, 0x00, 0x00, 0x00, 0x02, 0x05, 0x01, /* atom 5, TRUNCATE_TIMESTAMP */
		0x20, 0x2a, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x03, 0x05, 0x01, /* int32 42 +2 */
	};
	static const uint8_t error_event[] = {
		0x07, 0x03, 0x01, 1,    0,    0,    0,    0,    0,    0,    0,
		0x00, 0x05, 0x00, 0x00, 0x00, 0x0f, 0x01, 0x00, 0x00, 0x00,
	};

	assert_int_equal(ktel_android__decode(annotated, sizeof(annotated), false, &d), 0);
	assert_int_equal(d.atom_id, 5);
	assert_int_equal(d.atom_annotations, 1);
	assert_int_equal(d.n_fields, 1);
	assert_int_equal(d.fields[0].i, 42);
	assert_int_equal(d.fields[0].n_annotations, 2);
	assert_int_equal(ktel_android__decode(error_event, sizeof(error_event), false, &d),
			 -EBADMSG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_worked_example),
		cmocka_unit_test(test_datagram_header),
		cmocka_unit_test(test_histogram_record_bytes),
		cmocka_unit_test(test_size_limit),
		cmocka_unit_test(test_oversized_record_refused),
		cmocka_unit_test(test_element_limit),
		cmocka_unit_test(test_round_trip_builtin_atoms),
		cmocka_unit_test(test_attribution_field_bytes),
		cmocka_unit_test(test_counter_gauge_event),
		cmocka_unit_test(test_stream_event_atom),
		cmocka_unit_test(test_decoder_rejects),
		cmocka_unit_test(test_decoder_annotations_and_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
