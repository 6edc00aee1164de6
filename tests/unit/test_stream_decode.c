// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The stream decoder (core/engine/stream_reader.c) without BPF: event types are
 * built with libbpf's btf__add_* API at the offsets the compiler gives a
 * real C struct (offsetof/sizeof), events are filled as that C struct, and
 * the records must hold exactly its values. Covered: every field kind
 * (ints of each width and signedness, bool, enums signed/unsigned/64-bit,
 * typedef/const/volatile chains, nested, anonymous and single-member union
 * members, char arrays with and without NUL, int arrays with truncation),
 * timestamps, dimensions with enum and label-map labels (and the label
 * cache's lookup discipline), the string storage bound, short samples and
 * every refusal with its message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/btf.h>
#include <linux/btf.h>

#include "stream_reader.h"

#define assert_msg_has(err, sub)                                                  \
	do {                                                                      \
		if (!strstr((err)->msg, (sub)))                                   \
			fail_msg("error \"%s\" lacks \"%s\"", (err)->msg, (sub)); \
	} while (0)

#define FIELD(b, cstruct, member, type_id)                                                      \
	assert_int_equal(btf__add_field((b), #member, (type_id), offsetof(cstruct, member) * 8, \
					0),                                                     \
			 0)

enum color {
	RED = 0,
	GREEN = 1,
	BLUE = 2
};
enum level {
	LOW = -2,
	HIGH = 7
};

struct ev_inner {
	uint16_t a;
	int8_t b;
};

#define LONG_ARR 80

struct ev {
	uint64_t ts_ns;
	int8_t s8;
	uint8_t u8;
	int16_t s16;
	uint16_t u16;
	int32_t s32; /* through typedef + const + volatile */
	uint32_t u32;
	int64_t s64;
	uint64_t u64;
	bool flag;
	enum color color;
	enum level level;
	uint64_t big; /* an ENUM64 */
	struct ev_inner inner;
	struct {
		uint32_t anon_x;
	};
	union {
		uint32_t only;
	} un;
	char name[8];
	uint8_t ubytes[4]; /* typedef __u8: bytes, not a string */
	int32_t sarr[3];
	uint16_t long_arr[LONG_ARR];
	uint32_t label_id;
	uint32_t state; /* labelled by label_enum "color" */
};

#define N_EV_FIELDS 23

struct ids {
	int s8, u8, s16, u16, s32, u32, s64, u64, boolean, chr, u8_td;
	int color, level, big, ev;
};

/* The types of struct ev, as clang would emit them. */
/* Where decoded events' fields go (the reader's per-batch arrays in the daemon). */
static struct ktel_event_field fields_store[4][KTEL_MAX_EVENT_FIELDS];

static struct ktel_event_field *fields_of(int i)
{
	return fields_store[i];
}

static struct btf *ev_btf(struct ids *id)
{
	struct btf *b = btf__new_empty();
	int inner, anon, un, name, ubytes, sarr, larr, s32_cv;

	assert_non_null(b);
	id->s8 = btf__add_int(b, "signed char", 1, BTF_INT_SIGNED);
	id->u8 = btf__add_int(b, "unsigned char", 1, 0);
	id->s16 = btf__add_int(b, "short", 2, BTF_INT_SIGNED);
	id->u16 = btf__add_int(b, "unsigned short", 2, 0);
	id->s32 = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	id->u32 = btf__add_int(b, "unsigned int", 4, 0);
	id->s64 = btf__add_int(b, "long", 8, BTF_INT_SIGNED);
	id->u64 = btf__add_int(b, "unsigned long long", 8, 0);
	id->boolean = btf__add_int(b, "_Bool", 1, BTF_INT_BOOL);
	id->chr = btf__add_int(b, "char", 1, BTF_INT_SIGNED);
	id->u8_td = btf__add_typedef(b, "__u8", id->u8);
	s32_cv = btf__add_const(b, btf__add_volatile(b, btf__add_typedef(b, "__s32", id->s32)));

	id->color = btf__add_enum(b, "color", 4);
	btf__add_enum_value(b, "RED", RED);
	btf__add_enum_value(b, "GREEN", GREEN);
	btf__add_enum_value(b, "BLUE", BLUE);
	id->level = btf__add_enum(b, "level", 4);
	btf__add_enum_value(b, "LOW", LOW);
	btf__add_enum_value(b, "HIGH", HIGH);
	id->big = btf__add_enum64(b, "big", 8, false);
	btf__add_enum64_value(b, "HUGE", 1ULL << 40);

	inner = btf__add_struct(b, "ev_inner", sizeof(struct ev_inner));
	FIELD(b, struct ev_inner, a, id->u16);
	FIELD(b, struct ev_inner, b, id->s8);
	anon = btf__add_struct(b, NULL, 4);
	assert_int_equal(btf__add_field(b, "anon_x", id->u32, 0, 0), 0);
	un = btf__add_union(b, NULL, 4);
	assert_int_equal(btf__add_field(b, "only", id->u32, 0, 0), 0);
	name = btf__add_array(b, id->u32, id->chr, 8);
	ubytes = btf__add_array(b, id->u32, id->u8_td, 4);
	sarr = btf__add_array(b, id->u32, id->s32, 3);
	larr = btf__add_array(b, id->u32, id->u16, LONG_ARR);

	id->ev = btf__add_struct(b, "ev", sizeof(struct ev));
	FIELD(b, struct ev, ts_ns, id->u64);
	FIELD(b, struct ev, s8, id->s8);
	FIELD(b, struct ev, u8, id->u8);
	FIELD(b, struct ev, s16, id->s16);
	FIELD(b, struct ev, u16, id->u16);
	FIELD(b, struct ev, s32, s32_cv);
	FIELD(b, struct ev, u32, id->u32);
	FIELD(b, struct ev, s64, id->s64);
	FIELD(b, struct ev, u64, id->u64);
	FIELD(b, struct ev, flag, id->boolean);
	FIELD(b, struct ev, color, id->color);
	FIELD(b, struct ev, level, id->level);
	FIELD(b, struct ev, big, id->big);
	FIELD(b, struct ev, inner, inner);
	assert_int_equal(btf__add_field(b, NULL, anon, offsetof(struct ev, anon_x) * 8, 0), 0);
	FIELD(b, struct ev, un, un);
	FIELD(b, struct ev, name, name);
	FIELD(b, struct ev, ubytes, ubytes);
	FIELD(b, struct ev, sarr, sarr);
	FIELD(b, struct ev, long_arr, larr);
	FIELD(b, struct ev, label_id, id->u32);
	FIELD(b, struct ev, state, id->u32);
	return b;
}

/* ---- label map resolver -------------------------------------------------- */

struct resolver {
	unsigned calls;
	unsigned calls_for[8];
	bool three_known; /* id 3 appears in the map later */
};

static int resolve(void *ctx, uint32_t dim, uint64_t id, char *buf, size_t len)
{
	static const char *const names[] = {NULL, "one", "two", "three"};
	struct resolver *r = ctx;

	assert_int_equal(dim, 0); /* only dimension 0 has a label map */
	assert_int_equal(len, KTEL_STREAM_LABEL_LEN);
	r->calls++;
	if (id < 8)
		r->calls_for[id]++;
	if (id == 1 || id == 2 || (id == 3 && r->three_known)) {
		snprintf(buf, len, "%s", names[id]);
		return 0;
	}
	return -ENOENT;
}

static const struct ktel_dimension_desc ev_dims[] = {
	{.name = "label_id", .label_map = "names"},
	{.name = "state", .label_enum = "color"},
	{.name = "level"},
	{.name = "inner_a", .key_member = "inner.a"},
};

static const struct ktel_metric_desc ev_md = {
	.struct_size = sizeof(struct ktel_metric_desc),
	.name = "ev_stream",
	.atom_name = "EvStream",
	.atom_id = 4242,
	.map_name = "ev_rb",
	.model = KTEL_MODEL_STREAM,
	.unit = "events",
	.dims = ev_dims,
	.n_dims = 4,
	.event_type = "ev",
};

struct fixture {
	struct btf *btf;
	struct ids id;
	struct resolver res;
	struct ktel_stream_decoder *dec;
	char *strbuf;
	size_t strbuf_size;
};

#define CANARY 0x5a

static struct fixture *fixture_new(const struct ktel_metric_desc *md)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ktel_err err = {0};

	assert_non_null(f);
	f->btf = ev_btf(&f->id);
	if (ktel_stream_decoder__new(md, f->btf, resolve, &f->res, &f->dec, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(ktel_stream_decoder__event_size(f->dec), sizeof(struct ev));
	f->strbuf_size = ktel_stream_decoder__strbuf_size(f->dec);
	/* Room for two records' strings and a canary after each. */
	f->strbuf = malloc(2 * (f->strbuf_size + 16));
	assert_non_null(f->strbuf);
	memset(f->strbuf, CANARY, 2 * (f->strbuf_size + 16));
	return f;
}

static void fixture_free(struct fixture *f)
{
	ktel_stream_decoder__free(f->dec);
	btf__free(f->btf);
	free(f->strbuf);
	free(f);
}

static char *strbuf_of(struct fixture *f, int i)
{
	return f->strbuf + i * (f->strbuf_size + 16);
}

static void assert_canaries(struct fixture *f)
{
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 16; j++)
			assert_int_equal((unsigned char)strbuf_of(f, i)[f->strbuf_size + j],
					 CANARY);
}

static void fill(struct ev *e)
{
	memset(e, 0, sizeof(*e));
	e->ts_ns = 1000000000ULL;
	e->s8 = -128;
	e->u8 = 255;
	e->s16 = -32768;
	e->u16 = 65535;
	e->s32 = -2147483647 - 1;
	e->u32 = 4294967295U;
	e->s64 = INT64_MIN;
	e->u64 = UINT64_MAX;
	e->flag = true;
	e->color = BLUE;
	e->level = LOW;
	e->big = 1ULL << 40;
	e->inner.a = 513;
	e->inner.b = -5;
	e->anon_x = 77;
	e->un.only = 99;
	memcpy(e->name, "abc", 4);
	e->ubytes[0] = 0;
	e->ubytes[1] = 1;
	e->ubytes[2] = 128;
	e->ubytes[3] = 255;
	e->sarr[0] = -1;
	e->sarr[1] = 0;
	e->sarr[2] = 2147483647;
	for (int i = 0; i < LONG_ARR; i++)
		e->long_arr[i] = (uint16_t)i;
	e->label_id = 2;
	e->state = GREEN;
}

static const struct ktel_event_field *field(const struct ktel_record *r, const char *name)
{
	for (uint32_t i = 0; i < r->event.n_fields; i++)
		if (!strcmp(r->event.fields[i].name, name))
			return &r->event.fields[i];
	fail_msg("no field %s", name);
	return NULL;
}

static void expect_int(const struct ktel_record *r, const char *name, int64_t v, const char *label)
{
	const struct ktel_event_field *f = field(r, name);

	assert_int_equal(f->type, KTEL_FIELD_VALUE_INT);
	assert_int_equal(f->i, v);
	assert_int_equal(f->u, (uint64_t)v);
	if (label)
		assert_string_equal(f->label, label);
	else
		assert_null(f->label);
}

static void expect_uint(const struct ktel_record *r, const char *name, uint64_t v,
			const char *label)
{
	const struct ktel_event_field *f = field(r, name);

	assert_int_equal(f->type, KTEL_FIELD_VALUE_UINT);
	assert_int_equal(f->u, v);
	if (label)
		assert_string_equal(f->label, label);
	else
		assert_null(f->label);
}

static void expect_str(const struct ktel_record *r, const char *name, const char *s)
{
	const struct ktel_event_field *f = field(r, name);

	assert_int_equal(f->type, KTEL_FIELD_VALUE_STRING);
	assert_non_null(f->s);
	assert_string_equal(f->s, s);
	assert_null(f->label);
}

static const struct ktel_stream_clock test_clock = {
	.mono_to_boot_ns = 5000,
	.mono_to_wall_ns = 1700000000000000000LL,
	.now_boot_ns = 42,
	.now_wall_ns = 43,
};

/* ---- tests ------------------------------------------------------------- */

static void test_every_kind(void **state)
{
	struct fixture *f = fixture_new(&ev_md);
	struct ktel_record rec;
	char expect_long[1024], *p = expect_long;
	struct ev e;

	fill(&e);
	memset(&rec, 0xff, sizeof(rec));
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	assert_int_equal(rec.type, KTEL_RECORD_EVENT);
	assert_string_equal(rec.metric, "ev_stream");
	assert_string_equal(rec.atom, "EvStream");
	assert_int_equal(rec.atom_id, 4242);
	assert_string_equal(rec.unit, "events");
	assert_int_equal(rec.event.n_fields, N_EV_FIELDS);
	/* Fields come in member order. */
	assert_string_equal(rec.event.fields[0].name, "ts_ns");
	assert_string_equal(rec.event.fields[N_EV_FIELDS - 1].name, "state");

	expect_uint(&rec, "ts_ns", 1000000000ULL, NULL);
	expect_int(&rec, "s8", -128, NULL);
	expect_uint(&rec, "u8", 255, NULL);
	expect_int(&rec, "s16", -32768, NULL);
	expect_uint(&rec, "u16", 65535, NULL);
	expect_int(&rec, "s32", INT32_MIN, NULL);
	expect_uint(&rec, "u32", UINT32_MAX, NULL);
	expect_int(&rec, "s64", INT64_MIN, NULL);
	expect_uint(&rec, "u64", UINT64_MAX, NULL);
	expect_uint(&rec, "flag", 1, NULL);
	expect_uint(&rec, "color", BLUE, "BLUE");
	expect_int(&rec, "level", LOW, "LOW");
	expect_uint(&rec, "big", 1ULL << 40, "HUGE");
	expect_uint(&rec, "inner.a", 513, NULL);
	expect_int(&rec, "inner.b", -5, NULL);
	expect_uint(&rec, "anon_x", 77, NULL);
	expect_uint(&rec, "un.only", 99, NULL);
	expect_str(&rec, "name", "abc");
	expect_str(&rec, "ubytes", "0,1,128,255");
	expect_str(&rec, "sarr", "-1,0,2147483647");
	for (int i = 0; i < KTEL_STREAM_ARRAY_MAX; i++)
		p += sprintf(p, "%s%d", i ? "," : "", i);
	strcpy(p, ",...");
	expect_str(&rec, "long_arr", expect_long);
	expect_uint(&rec, "label_id", 2, "two");
	expect_uint(&rec, "state", GREEN, "GREEN");

	/* Dimensions, in descriptor order, from the same members. */
	assert_int_equal(rec.n_dims, 4);
	assert_string_equal(rec.dims[0].name, "label_id");
	assert_int_equal(rec.dims[0].value, 2);
	assert_string_equal(rec.dims[0].label, "two");
	assert_true(rec.dims[0].id_label);
	assert_string_equal(rec.dims[1].name, "state");
	assert_int_equal(rec.dims[1].value, GREEN);
	assert_string_equal(rec.dims[1].label, "GREEN");
	assert_false(rec.dims[1].id_label);
	assert_string_equal(rec.dims[2].name, "level");
	assert_int_equal(rec.dims[2].value, LOW);
	assert_string_equal(rec.dims[2].label, "LOW");
	assert_string_equal(rec.dims[3].name, "inner_a");
	assert_int_equal(rec.dims[3].value, 513);
	assert_null(rec.dims[3].label);

	/* A value no enumerator has: no label. */
	e.color = (enum color)7;
	e.level = (enum level) - 9;
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	expect_uint(&rec, "color", 7, NULL);
	expect_int(&rec, "level", -9, NULL);
	assert_canaries(f);
	fixture_free(f);
}

/*
 * KTEL_DIM_ENUM_SHORT on stream dimensions: the dimension and the event
 * field both carry the short label, from label_enum ("color") or from an
 * enum-typed member ("level"); an unflagged enum keeps its names.
 */
static void test_short_enum_labels(void **state)
{
	static const uint32_t flags[] = {0, KTEL_DIM_ENUM_SHORT, KTEL_DIM_ENUM_SHORT, 0};
	struct ktel_metric_desc md = ev_md;
	struct ktel_record rec;
	struct fixture *f;
	struct ev e;

	(void)state;
	md.dim_flags = flags;
	f = fixture_new(&md);
	fill(&e);
	e.level = HIGH;
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	assert_string_equal(rec.dims[1].label, "green");
	assert_string_equal(rec.dims[2].label, "high");
	assert_string_equal(field(&rec, "state")->label, "green");
	assert_string_equal(field(&rec, "level")->label, "high");
	/* Not a dimension: its enum keeps the enumerator's name. */
	assert_string_equal(field(&rec, "color")->label, "BLUE");
	fixture_free(f);
}

static void test_strings(void **state)
{
	struct fixture *f = fixture_new(&ev_md);
	struct ktel_record r0, r1;
	struct ev e;
	char expect_long[1024], *p = expect_long;

	/* A name filling its array has no NUL: all 8 bytes, terminated by us. */
	fill(&e);
	memcpy(e.name, "12345678", 8);
	for (int i = 0; i < LONG_ARR; i++)
		e.long_arr[i] = 65535; /* the widest text */
	e.sarr[0] = e.sarr[1] = e.sarr[2] = INT32_MIN;
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &r0,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	/* An empty one, decoded into another record's storage. */
	fill(&e);
	memset(e.name, 0, sizeof(e.name));
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &r1,
						     fields_of(1), strbuf_of(f, 1)),
			 0);
	expect_str(&r0, "name", "12345678");
	expect_str(&r1, "name", "");
	for (int i = 0; i < KTEL_STREAM_ARRAY_MAX; i++)
		p += sprintf(p, "%s65535", i ? "," : "");
	strcpy(p, ",...");
	expect_str(&r0, "long_arr", expect_long);
	expect_str(&r0, "sarr", "-2147483648,-2147483648,-2147483648");
	expect_str(&r1, "sarr", "-1,0,2147483647");
	/* Strings live inside each record's storage, never past it. */
	assert_true(field(&r0, "name")->s >= strbuf_of(f, 0) &&
		    field(&r0, "name")->s < strbuf_of(f, 0) + f->strbuf_size);
	assert_true(field(&r1, "long_arr")->s >= strbuf_of(f, 1) &&
		    field(&r1, "long_arr")->s < strbuf_of(f, 1) + f->strbuf_size);
	assert_canaries(f);
	fixture_free(f);
}

static void test_timestamps(void **state)
{
	struct fixture *f = fixture_new(&ev_md);
	struct ktel_err err = {0};
	struct ktel_stream_decoder *dec;
	struct ktel_record rec;
	struct ev e;
	int id, s;
	struct {
		uint32_t ts_ns; /* too narrow: not a timestamp */
		uint64_t timestamp_ns;
	} ev2 = {.ts_ns = 1, .timestamp_ns = 2000};
	struct {
		uint32_t x;
	} ev3 = {.x = 1};
	struct ktel_metric_desc md = ev_md;

	/* ts_ns: bpf_ktime_get_ns() moved to boottime and to the wall clock. */
	fill(&e);
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	assert_int_equal(rec.start_boottime_ns, 1000000000ULL + 5000);
	assert_int_equal(rec.end_boottime_ns, rec.start_boottime_ns);
	assert_int_equal(rec.start_wall_ns, 1000000000LL + 1700000000000000000LL);
	assert_int_equal(rec.end_wall_ns, rec.start_wall_ns);

	/* A stamp the clocks' offsets cannot be added to saturates instead of
	 * wrapping (found by tests/fuzz/fuzz_stream_decode: signed overflow). */
	e.ts_ns = UINT64_MAX - 1000;
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	assert_true(rec.start_boottime_ns == UINT64_MAX);
	assert_true(rec.start_wall_ns == INT64_MAX);
	e.ts_ns = (uint64_t)INT64_MAX - 1000;
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	assert_true(rec.start_boottime_ns == (uint64_t)INT64_MAX + 4000);
	assert_true(rec.start_wall_ns == INT64_MAX);

	/* A measured boottime offset a few ns below zero (no suspend since
	 * boot) subtracts; it must not saturate every event to UINT64_MAX
	 * (the first saturating version did: CI's live stream test). */
	{
		struct ktel_stream_clock neg = test_clock;

		neg.mono_to_boot_ns = -7;
		e.ts_ns = 1000;
		assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &neg, &rec,
							     fields_of(0), strbuf_of(f, 0)),
				 0);
		assert_true(rec.start_boottime_ns == 993);
		e.ts_ns = 3;
		assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &neg, &rec,
							     fields_of(0), strbuf_of(f, 0)),
				 0);
		assert_true(rec.start_boottime_ns == 0);
	}

	/* timestamp_ns works too; a 4-byte ts_ns does not count. */
	id = btf__add_struct(f->btf, "ev2", sizeof(ev2));
	assert_int_equal(btf__add_field(f->btf, "ts_ns", f->id.u32, 0, 0), 0);
	assert_int_equal(btf__add_field(f->btf, "timestamp_ns", f->id.u64,
					offsetof(typeof(ev2), timestamp_ns) * 8, 0),
			 0);
	assert_true(id > 0);
	md.dims = NULL;
	md.n_dims = 0;
	md.event_type = "ev2";
	if (ktel_stream_decoder__new(&md, f->btf, NULL, NULL, &dec, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(ktel_stream_decoder__decode(dec, &ev2, sizeof(ev2), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	assert_int_equal(rec.start_boottime_ns, 2000 + 5000);
	assert_int_equal(rec.n_dims, 0);
	ktel_stream_decoder__free(dec);

	/* No timestamp member: stamped with the batch's now. */
	s = btf__add_struct(f->btf, "ev3", sizeof(ev3));
	assert_int_equal(btf__add_field(f->btf, "x", f->id.u32, 0, 0), 0);
	assert_true(s > 0);
	md.event_type = "ev3";
	if (ktel_stream_decoder__new(&md, f->btf, NULL, NULL, &dec, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(ktel_stream_decoder__decode(dec, &ev3, sizeof(ev3), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	assert_int_equal(rec.start_boottime_ns, 42);
	assert_int_equal(rec.start_wall_ns, 43);
	assert_int_equal(rec.event.n_fields, 1);
	ktel_stream_decoder__free(dec);
	fixture_free(f);
}

static void test_clock_read(void **state)
{
	struct ktel_stream_clock c;
	struct timespec m, w;
	int64_t mono, wall;

	ktel_stream_clock__read(&c);
	clock_gettime(CLOCK_MONOTONIC, &m);
	clock_gettime(CLOCK_REALTIME, &w);
	mono = (int64_t)m.tv_sec * 1000000000LL + m.tv_nsec;
	wall = (int64_t)w.tv_sec * 1000000000LL + w.tv_nsec;
	/* The offset maps now on one clock to now on the other, within 10 ms. */
	assert_true(llabs(mono + c.mono_to_wall_ns - wall) < 10000000);
	assert_true(c.mono_to_boot_ns >= -1000000); /* boottime >= monotonic */
	assert_true(llabs(c.now_wall_ns - wall) < 1000000000);
}

static void test_label_cache(void **state)
{
	struct fixture *f = fixture_new(&ev_md);
	struct ktel_record rec;
	struct ev e;

	fill(&e);
	/* A known id is asked once, then served from the cache. */
	for (int i = 0; i < 5; i++) {
		ktel_stream_decoder__new_batch(f->dec);
		assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock,
							     &rec, fields_of(0), strbuf_of(f, 0)),
				 0);
		expect_uint(&rec, "label_id", 2, "two");
	}
	assert_int_equal(f->res.calls_for[2], 1);
	/* An id the map lacks: asked once per batch, not once per event. */
	e.label_id = 3;
	ktel_stream_decoder__new_batch(f->dec);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock,
							     &rec, fields_of(0), strbuf_of(f, 0)),
				 0);
		expect_uint(&rec, "label_id", 3, NULL);
		assert_null(rec.dims[0].label);
		assert_true(rec.dims[0].id_label);
	}
	assert_int_equal(f->res.calls_for[3], 1);
	/* The kernel side names it later: the next batch finds it. */
	f->res.three_known = true;
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	assert_null(field(&rec, "label_id")->label);
	ktel_stream_decoder__new_batch(f->dec);
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	expect_uint(&rec, "label_id", 3, "three");
	assert_int_equal(f->res.calls_for[3], 2);
	/* Ids past the cache are never looked up, and have no label. */
	e.label_id = KTEL_STREAM_LABEL_IDS;
	f->res.calls = 0;
	assert_int_equal(ktel_stream_decoder__decode(f->dec, &e, sizeof(e), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	expect_uint(&rec, "label_id", KTEL_STREAM_LABEL_IDS, NULL);
	assert_int_equal(f->res.calls, 0);
	fixture_free(f);
}

static void test_short_sample(void **state)
{
	struct fixture *f = fixture_new(&ev_md);
	unsigned char buf[sizeof(struct ev) + 8] = {0};
	struct ktel_record rec;

	assert_int_equal(ktel_stream_decoder__decode(f->dec, buf, sizeof(struct ev) - 1,
						     &test_clock, &rec, fields_of(0),
						     strbuf_of(f, 0)),
			 -EMSGSIZE);
	assert_int_equal(ktel_stream_decoder__decode(f->dec, buf, 0, &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 -EMSGSIZE);
	/* Ring buffer samples are rounded up: a longer one decodes. */
	assert_int_equal(ktel_stream_decoder__decode(f->dec, buf, sizeof(buf), &test_clock, &rec,
						     fields_of(0), strbuf_of(f, 0)),
			 0);
	expect_str(&rec, "name", "");
	fixture_free(f);
}

/* ---- refusals ---------------------------------------------------------- */

static void expect_refusal(struct btf *btf, const struct ktel_metric_desc *md,
			   ktel_stream_label_fn fn, int code, const char *sub1, const char *sub2)
{
	struct ktel_stream_decoder *dec = (void *)0x1;
	struct ktel_err err = {0};
	struct resolver res = {0};

	assert_int_equal(ktel_stream_decoder__new(md, btf, fn, &res, &dec, &err), -code);
	assert_ptr_equal(dec, (void *)0x1); /* untouched on failure */
	assert_int_equal(err.code, code);
	assert_msg_has(&err, md->name);
	assert_msg_has(&err, sub1);
	if (sub2)
		assert_msg_has(&err, sub2);
}

static void test_refusals(void **state)
{
	struct ids id;
	struct btf *btf = ev_btf(&id);
	struct ktel_metric_desc md = ev_md;
	struct ktel_dimension_desc dims[KTEL_MAX_DIMS + 1];
	char name[16];
	int big, bits;

	md.event_type = NULL;
	expect_refusal(btf, &md, resolve, EINVAL, "without event_type", NULL);
	md.event_type = "nosuch";
	expect_refusal(btf, &md, resolve, ENOENT, "struct nosuch", "KTEL_EXPORT_TYPE");

	/* A bitfield member is refused by the layout, named. */
	bits = btf__add_struct(btf, "bits", 4);
	assert_int_equal(btf__add_field(btf, "flags", id.u32, 0, 3), 0);
	assert_true(bits > 0);
	md.event_type = "bits";
	expect_refusal(btf, &md, resolve, EINVAL, "flags", NULL);

	/* More members than a record holds. */
	big = btf__add_struct(btf, "wide", 4 * (KTEL_MAX_EVENT_FIELDS + 1));
	for (int i = 0; i <= KTEL_MAX_EVENT_FIELDS; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(btf__add_field(btf, name, id.u32, i * 32, 0), 0);
	}
	assert_true(big > 0);
	md.event_type = "wide";
	md.dims = NULL;
	md.n_dims = 0;
	expect_refusal(btf, &md, resolve, E2BIG, "struct wide", "at most 32");

	/* Dimensions. */
	md = ev_md;
	dims[0] = (struct ktel_dimension_desc){.name = "nosuch"};
	md.dims = dims;
	md.n_dims = 1;
	expect_refusal(btf, &md, resolve, EINVAL, "dimension nosuch", "member nosuch");
	dims[0] = (struct ktel_dimension_desc){.name = "name"};
	expect_refusal(btf, &md, resolve, EINVAL, "dimension name", "integer or enum");
	dims[0] = (struct ktel_dimension_desc){.name = "state", .label_enum = "nosuch_enum"};
	expect_refusal(btf, &md, resolve, ENOENT, "enum nosuch_enum", "KTEL_EXPORT_TYPE");
	dims[0] = (struct ktel_dimension_desc){.name = "label_id", .label_map = "names"};
	expect_refusal(btf, &md, NULL, EINVAL, "label map names", NULL);
	for (int i = 0; i <= KTEL_MAX_DIMS; i++)
		dims[i] = (struct ktel_dimension_desc){.name = "u32"};
	md.n_dims = KTEL_MAX_DIMS + 1;
	expect_refusal(btf, &md, resolve, EINVAL, "9 dimensions", NULL);
	btf__free(btf);
}

/* Destructors accept NULL. */
static void test_free_null(void **state)
{
	ktel_stream_decoder__free(NULL);
	ktel_stream_reader__free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_kind),   cmocka_unit_test(test_short_enum_labels),
		cmocka_unit_test(test_strings),      cmocka_unit_test(test_timestamps),
		cmocka_unit_test(test_clock_read),   cmocka_unit_test(test_label_cache),
		cmocka_unit_test(test_short_sample), cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_free_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
