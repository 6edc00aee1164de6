// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The generic BTF decoder (core/engine/btf_layout.c). BTF is built inside each test
 * with libbpf's btf__add_* API, with member offsets and sizes taken from real
 * C structs (offsetof/sizeof), so the compiler is the oracle for where each
 * field lives and what its bytes decode to. Broken BTF is built the same way
 * (libbpf 1.1 accepts dangling ids) or by patching serialized bytes and
 * parsing them back with btf__new(). The last tests decode the BTF of the
 * real direct_reclaim_latency BPF object from the build tree and fuzz it.
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

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/btf.h>

#include "btf_layout.h"

#define PLUGIN_OBJ KTEL_BINARY_DIR "/plugins/direct_reclaim_latency/direct_reclaim_latency.bpf.o"

#define assert_msg_has(err, sub)                                                  \
	do {                                                                      \
		if (!strstr((err)->msg, (sub)))                                   \
			fail_msg("error \"%s\" lacks \"%s\"", (err)->msg, (sub)); \
	} while (0)

/* Add a member of a C struct at the offset the compiler gave it. */
#define FIELD(b, cstruct, member, type_id)                                                      \
	assert_int_equal(btf__add_field((b), #member, (type_id), offsetof(cstruct, member) * 8, \
					0),                                                     \
			 0)

struct ids {
	int s8, u8, s16, u16, s32, u32, s64, u64, boolean, s128;
	int uchar, schar, chr;
};

/* The base C types every test uses, named as clang names them. */
static struct btf *new_btf(struct ids *id)
{
	struct btf *b = btf__new_empty();

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
	id->s128 = btf__add_int(b, "__int128", 16, BTF_INT_SIGNED);
	id->chr = btf__add_int(b, "char", 1, BTF_INT_SIGNED); /* as clang emits it */
	id->uchar = id->u8;
	id->schar = id->s8;
	assert_true(id->s8 > 0 && id->u8 > 0 && id->s16 > 0 && id->u16 > 0 && id->s32 > 0 &&
		    id->u32 > 0 && id->s64 > 0 && id->u64 > 0 && id->boolean > 0 && id->s128 > 0 &&
		    id->chr > 0);
	return b;
}

static const struct ktel_field *must_find(const struct ktel_layout *l, const char *name)
{
	const struct ktel_field *f = ktel_layout__find(l, name);

	if (!f)
		fail_msg("layout %s has no field \"%s\"", l->type_name, name);
	return f;
}

static struct ktel_layout *must_layout(const struct btf *b, int type_id, __u32 size)
{
	struct ktel_layout *l = NULL;
	struct ktel_err err = {0};

	if (ktel_btf_validate(b, &err))
		fail_msg("validate: %s", err.msg);
	if (ktel_layout__new(b, type_id, size, &l, &err))
		fail_msg("layout: %s", err.msg);
	return l;
}

/* Layout must be refused; returns the error for the caller to inspect. */
static struct ktel_err must_refuse(const struct btf *b, int type_id, __u32 size)
{
	struct ktel_layout *l = (struct ktel_layout *)0x1; /* untouched on failure */
	struct ktel_err err = {0};
	int rc;

	rc = ktel_layout__new(b, type_id, size, &l, &err);
	assert_int_equal(rc, -EINVAL);
	assert_int_equal(err.code, EINVAL);
	assert_ptr_equal(l, (struct ktel_layout *)0x1);
	return err;
}

/* ---- supported kinds -------------------------------------------------- */

struct ints {
	int8_t s8;
	uint8_t u8;
	int16_t s16;
	uint16_t u16;
	int32_t s32;
	uint32_t u32;
	int64_t s64;
	uint64_t u64;
	bool flag;
};

static void test_ints(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_layout *l;
	const struct ktel_field *f;
	struct ints v = {.s8 = -5,
			 .u8 = 250,
			 .s16 = -300,
			 .u16 = 65000,
			 .s32 = -70000,
			 .u32 = 4000000000u,
			 .s64 = -5000000000000LL,
			 .u64 = UINT64_MAX - 1,
			 .flag = true};
	int s;

	s = btf__add_struct(b, "ints", sizeof(struct ints));
	FIELD(b, struct ints, s8, id.s8);
	FIELD(b, struct ints, u8, id.u8);
	FIELD(b, struct ints, s16, id.s16);
	FIELD(b, struct ints, u16, id.u16);
	FIELD(b, struct ints, s32, id.s32);
	FIELD(b, struct ints, u32, id.u32);
	FIELD(b, struct ints, s64, id.s64);
	FIELD(b, struct ints, u64, id.u64);
	FIELD(b, struct ints, flag, id.boolean);
	l = must_layout(b, s, sizeof(struct ints));
	assert_int_equal(l->n_fields, 9);
	assert_int_equal(l->size, sizeof(struct ints));
	assert_string_equal(l->type_name, "struct ints");
	assert_int_equal(l->hist_field, -1);
	assert_int_equal(l->sum_field, -1);

	f = must_find(l, "s8");
	assert_int_equal(f->kind, KTEL_FIELD_INT);
	assert_true(f->is_signed);
	assert_int_equal(f->size, 1);
	assert_int_equal(ktel_field_read_s64(f, &v), -5);
	assert_int_equal(ktel_field_read_u64(f, &v), 251); /* raw byte 0xfb */
	f = must_find(l, "u8");
	assert_false(f->is_signed);
	assert_int_equal(ktel_field_read_s64(f, &v), 250);
	f = must_find(l, "s16");
	assert_int_equal(f->offset, offsetof(struct ints, s16));
	assert_int_equal(ktel_field_read_s64(f, &v), -300);
	assert_int_equal(ktel_field_read_s64(must_find(l, "u16"), &v), 65000);
	assert_int_equal(ktel_field_read_s64(must_find(l, "s32"), &v), -70000);
	assert_int_equal(ktel_field_read_u64(must_find(l, "u32"), &v), 4000000000u);
	assert_int_equal(ktel_field_read_s64(must_find(l, "s64"), &v), -5000000000000LL);
	f = must_find(l, "u64");
	assert_int_equal(f->offset, offsetof(struct ints, u64));
	assert_int_equal(f->size, 8);
	assert_true(ktel_field_read_u64(f, &v) == UINT64_MAX - 1);
	f = must_find(l, "flag");
	assert_true(f->is_bool);
	assert_int_equal(ktel_field_read_u64(f, &v), 1);
	assert_null(ktel_layout__find(l, "nope"));
	ktel_layout__free(l);

	/* A bare int (a u32 map key) is one field with the empty name. */
	l = must_layout(b, id.u32, 4);
	assert_int_equal(l->n_fields, 1);
	assert_ptr_equal(ktel_layout__find(l, NULL), &l->fields[0]);
	assert_ptr_equal(ktel_layout__find(l, ""), &l->fields[0]);
	ktel_layout__free(l);

	/* 16-byte ints are not read. */
	struct ktel_err err = must_refuse(b, id.s128, 16);
	assert_msg_has(&err, "16-byte integer, not supported");
	ktel_layout__free(NULL);
	btf__free(b);
}

struct chained {
	uint32_t a;
	volatile const int64_t b;
};

static void test_typedef_const_chains(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_layout *l;
	const struct ktel_field *f;
	struct chained v = {.a = 7, .b = -9};
	int td_u32, td2, c, vol, r, s, td_s, cs;

	/* typedef u32_t -> typedef __u32; b: volatile const typedef restrict long */
	td_u32 = btf__add_typedef(b, "__u32", id.u32);
	td2 = btf__add_typedef(b, "u32_t", td_u32);
	r = btf__add_restrict(b, id.s64);
	td_s = btf__add_typedef(b, "s64_t", r);
	c = btf__add_const(b, td_s);
	vol = btf__add_volatile(b, c);
	s = btf__add_struct(b, "chained", sizeof(struct chained));
	FIELD(b, struct chained, a, td2);
	FIELD(b, struct chained, b, vol);
	/* The key type the map names: const typedef of the struct. */
	td_s = btf__add_typedef(b, "chained_t", s);
	cs = btf__add_const(b, td_s);

	l = must_layout(b, cs, sizeof(struct chained));
	assert_string_equal(l->type_name, "struct chained");
	assert_int_equal(l->n_fields, 2);
	f = must_find(l, "a");
	assert_int_equal(f->kind, KTEL_FIELD_INT);
	assert_int_equal(f->size, 4);
	assert_false(f->is_signed);
	assert_int_equal(ktel_field_read_u64(f, &v), 7);
	f = must_find(l, "b");
	assert_true(f->is_signed);
	assert_int_equal(f->offset, offsetof(struct chained, b));
	assert_int_equal(ktel_field_read_s64(f, &v), -9);
	ktel_layout__free(l);
	btf__free(b);
}

struct inner {
	uint16_t x;
	int16_t y;
};

struct outer {
	uint32_t a;
	struct inner in;
	struct {
		uint64_t z;
		union {
			uint32_t w;
		};
	};
	struct {
		struct inner deep;
	} mid;
};

static void test_nested_and_anonymous(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_layout *l;
	struct outer v = {.a = 1,
			  .in = {.x = 2, .y = -3},
			  .z = 4,
			  .w = 5,
			  .mid.deep = {.x = 6, .y = -7}};
	int in, u, anon, mid, o;
	size_t anon_off = offsetof(struct outer, z);

	in = btf__add_struct(b, "inner", sizeof(struct inner));
	FIELD(b, struct inner, x, id.u16);
	FIELD(b, struct inner, y, id.s16);
	u = btf__add_union(b, NULL, 4);
	assert_int_equal(btf__add_field(b, "w", id.u32, 0, 0), 0);
	anon = btf__add_struct(b, NULL, offsetof(struct outer, mid) - anon_off);
	assert_int_equal(btf__add_field(b, "z", id.u64, 0, 0), 0);
	assert_int_equal(btf__add_field(b, NULL, u, (offsetof(struct outer, w) - anon_off) * 8, 0),
			 0);
	mid = btf__add_struct(b, NULL, sizeof(struct inner));
	assert_int_equal(btf__add_field(b, "deep", in, 0, 0), 0);
	o = btf__add_struct(b, "outer", sizeof(struct outer));
	FIELD(b, struct outer, a, id.u32);
	FIELD(b, struct outer, in, in);
	assert_int_equal(btf__add_field(b, NULL, anon, anon_off * 8, 0), 0);
	FIELD(b, struct outer, mid, mid);

	l = must_layout(b, o, sizeof(struct outer));
	assert_int_equal(l->n_fields, 7);
	assert_int_equal(ktel_field_read_u64(must_find(l, "a"), &v), 1);
	assert_int_equal(ktel_field_read_u64(must_find(l, "in.x"), &v), 2);
	assert_int_equal(ktel_field_read_s64(must_find(l, "in.y"), &v), -3);
	assert_int_equal(must_find(l, "in.y")->offset, offsetof(struct outer, in.y));
	/* Anonymous struct and union members add no path component. */
	assert_int_equal(ktel_field_read_u64(must_find(l, "z"), &v), 4);
	assert_int_equal(must_find(l, "w")->offset, offsetof(struct outer, w));
	assert_int_equal(ktel_field_read_u64(must_find(l, "w"), &v), 5);
	assert_int_equal(ktel_field_read_u64(must_find(l, "mid.deep.x"), &v), 6);
	assert_int_equal(ktel_field_read_s64(must_find(l, "mid.deep.y"), &v), -7);
	assert_int_equal(must_find(l, "mid.deep.y")->offset, offsetof(struct outer, mid.deep.y));
	ktel_layout__free(l);
	btf__free(b);
}

struct arrays {
	char comm[16];
	unsigned char uc[3];
	signed char sc[2];
	uint8_t bytes[6];
	const char cc[4];
	uint32_t counts[4];
	int16_t deltas[2];
};

static void test_arrays(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_layout *l;
	const struct ktel_field *f;
	struct arrays v = {.comm = "kswapd0",
			   .bytes = {1, 2, 3, 250},
			   .counts = {10, 20, 30, 4000000000u},
			   .deltas = {-1, 2}};
	int ix, a_comm, a_uc, a_sc, u8t, a_bytes, a_cc, a_counts, a_deltas, s;

	ix = btf__add_int(b, "__ARRAY_SIZE_TYPE__", 4, 0);
	a_comm = btf__add_array(b, ix, id.chr, 16);
	a_uc = btf__add_array(b, ix, id.uchar, 3);
	a_sc = btf__add_array(b, ix, id.schar, 2);
	u8t = btf__add_typedef(b, "__u8", id.uchar);
	a_bytes = btf__add_array(b, ix, u8t, 6);
	a_cc = btf__add_array(b, ix, btf__add_const(b, id.chr), 4);
	a_counts = btf__add_array(b, ix, id.u32, 4);
	a_deltas = btf__add_array(b, ix, id.s16, 2);
	s = btf__add_struct(b, "arrays", sizeof(struct arrays));
	FIELD(b, struct arrays, comm, a_comm);
	FIELD(b, struct arrays, uc, a_uc);
	FIELD(b, struct arrays, sc, a_sc);
	FIELD(b, struct arrays, bytes, a_bytes);
	FIELD(b, struct arrays, cc, a_cc);
	FIELD(b, struct arrays, counts, a_counts);
	FIELD(b, struct arrays, deltas, a_deltas);

	l = must_layout(b, s, sizeof(struct arrays));
	f = must_find(l, "comm");
	assert_int_equal(f->kind, KTEL_FIELD_CHAR_ARRAY);
	assert_int_equal(f->count, 16);
	assert_int_equal(f->size, 16);
	assert_string_equal((const char *)&v + f->offset, "kswapd0");
	assert_int_equal(must_find(l, "uc")->kind, KTEL_FIELD_CHAR_ARRAY);
	assert_int_equal(must_find(l, "sc")->kind, KTEL_FIELD_CHAR_ARRAY);
	assert_int_equal(must_find(l, "cc")->kind, KTEL_FIELD_CHAR_ARRAY);
	/* A typedef'd byte is data, not text. */
	f = must_find(l, "bytes");
	assert_int_equal(f->kind, KTEL_FIELD_INT_ARRAY);
	assert_int_equal(f->elem_size, 1);
	assert_int_equal(f->count, 6);
	assert_int_equal(ktel_field_read_elem_u64(f, &v, 3), 250);
	f = must_find(l, "counts");
	assert_int_equal(f->kind, KTEL_FIELD_INT_ARRAY);
	assert_int_equal(f->offset, offsetof(struct arrays, counts));
	assert_int_equal(f->elem_size, 4);
	assert_int_equal(f->count, 4);
	assert_int_equal(f->size, 16);
	assert_int_equal(ktel_field_read_elem_u64(f, &v, 0), 10);
	assert_int_equal(ktel_field_read_elem_u64(f, &v, 3), 4000000000u);
	assert_int_equal(ktel_field_read_elem_u64(f, &v, 4), 0); /* past the end */
	f = must_find(l, "deltas");
	assert_int_equal(ktel_field_read_elem_s64(f, &v, 0), -1);
	assert_int_equal(ktel_field_read_elem_s64(f, &v, 1), 2);
	ktel_layout__free(l);

	/* A bare array type (a value that is just u32[4]) has one nameless field. */
	l = must_layout(b, a_counts, 16);
	assert_int_equal(l->fields[0].kind, KTEL_FIELD_INT_ARRAY);
	assert_int_equal(l->hist_field, -1);
	ktel_layout__free(l);
	btf__free(b);
}

static void test_arrays_refused(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_err err;
	int ix, in, a_st, a_aa, a_zero, e, a_en, s1, s2, s3, s4;

	ix = btf__add_int(b, "__ARRAY_SIZE_TYPE__", 4, 0);
	in = btf__add_struct(b, "pt", 8);
	assert_int_equal(btf__add_field(b, "x", id.u32, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "y", id.u32, 32, 0), 0);
	a_st = btf__add_array(b, ix, in, 2);
	a_aa = btf__add_array(b, ix, btf__add_array(b, ix, id.u64, 2), 2);
	a_zero = btf__add_array(b, ix, id.u32, 0);
	e = btf__add_enum(b, "color", 4);
	assert_int_equal(btf__add_enum_value(b, "RED", 0), 0);
	a_en = btf__add_array(b, ix, e, 2);
	s1 = btf__add_struct(b, "has_structs", 16);
	assert_int_equal(btf__add_field(b, "points", a_st, 0, 0), 0);
	s2 = btf__add_struct(b, "has_matrix", 32);
	assert_int_equal(btf__add_field(b, "m", a_aa, 0, 0), 0);
	s3 = btf__add_struct(b, "has_flex", 4);
	assert_int_equal(btf__add_field(b, "n", id.u32, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "data", a_zero, 32, 0), 0);
	s4 = btf__add_struct(b, "has_enums", 8);
	assert_int_equal(btf__add_field(b, "colors", a_en, 0, 0), 0);
	assert_int_equal(ktel_btf_validate(b, NULL), 0);

	err = must_refuse(b, s1, 16);
	assert_string_equal(err.msg,
			    "struct has_structs: member points is an array of structs, not supported");
	err = must_refuse(b, s2, 32);
	assert_msg_has(&err, "member m is an array of array");
	err = must_refuse(b, s3, 4);
	assert_msg_has(&err, "member data is a zero-length array");
	err = must_refuse(b, s4, 8);
	assert_msg_has(&err, "member colors is an array of enum");
	btf__free(b);
}

/* ---- enums -------------------------------------------------------------- */

static void test_enums(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_layout *l;
	const struct ktel_field *f;
	int e1, e2, e4, e8, es, s;
	struct {
		uint8_t e1;
		uint16_t e2;
		uint32_t e4;
		uint64_t e8;
		int32_t es;
	} v = {.e1 = 200, .e2 = 60000, .e4 = 3, .e8 = 1ULL << 40, .es = -2};

	e1 = btf__add_enum(b, "tiny", 1);
	assert_int_equal(btf__add_enum_value(b, "TINY_A", 1), 0);
	assert_int_equal(btf__add_enum_value(b, "TINY_B", 200), 0);
	e2 = btf__add_enum(b, "small", 2);
	assert_int_equal(btf__add_enum_value(b, "SMALL_MAX", 60000), 0);
	e4 = btf__add_enum(b, "process_state", 4);
	assert_int_equal(btf__add_enum_value(b, "STATE_NATIVE", 1), 0);
	assert_int_equal(btf__add_enum_value(b, "STATE_PERSISTENT", 3), 0);
	e8 = btf__add_enum64(b, "wide", 8, false);
	assert_int_equal(btf__add_enum64_value(b, "WIDE_BIG", 1ULL << 40), 0);
	assert_int_equal(btf__add_enum64_value(b, "WIDE_TOP", UINT64_MAX), 0);
	es = btf__add_enum(b, "signed_e", 4);
	assert_int_equal(btf__add_enum_value(b, "NEG_TWO", -2), 0);
	assert_int_equal(btf__add_enum_value(b, "POS_ONE", 1), 0);
	s = btf__add_struct(b, "enums", sizeof(v));
	assert_int_equal(btf__add_field(b, "e1", e1, offsetof(typeof(v), e1) * 8, 0), 0);
	assert_int_equal(btf__add_field(b, "e2", e2, offsetof(typeof(v), e2) * 8, 0), 0);
	assert_int_equal(btf__add_field(b, "e4", e4, offsetof(typeof(v), e4) * 8, 0), 0);
	assert_int_equal(btf__add_field(b, "e8", e8, offsetof(typeof(v), e8) * 8, 0), 0);
	assert_int_equal(btf__add_field(b, "es", es, offsetof(typeof(v), es) * 8, 0), 0);

	l = must_layout(b, s, sizeof(v));
	f = must_find(l, "e1");
	assert_int_equal(f->kind, KTEL_FIELD_ENUM);
	assert_int_equal(f->size, 1);
	assert_int_equal(f->enum_type_id, e1);
	assert_string_equal(ktel_layout_enum_label(b, f->enum_type_id, ktel_field_read_s64(f, &v)),
			    "TINY_B");
	f = must_find(l, "e2");
	assert_int_equal(f->size, 2);
	assert_string_equal(ktel_layout_enum_label(b, f->enum_type_id, ktel_field_read_s64(f, &v)),
			    "SMALL_MAX");
	f = must_find(l, "e4");
	assert_int_equal(f->size, 4);
	assert_string_equal(ktel_layout_enum_label(b, f->enum_type_id, ktel_field_read_s64(f, &v)),
			    "STATE_PERSISTENT");
	assert_null(ktel_layout_enum_label(b, f->enum_type_id, 2));
	f = must_find(l, "e8");
	assert_int_equal(f->kind, KTEL_FIELD_ENUM);
	assert_int_equal(f->size, 8);
	assert_int_equal(f->enum_type_id, e8);
	assert_false(f->is_signed);
	assert_string_equal(ktel_layout_enum_label(b, e8, ktel_field_read_s64(f, &v)), "WIDE_BIG");
	assert_string_equal(ktel_layout_enum_label(b, e8, -1), "WIDE_TOP");
	f = must_find(l, "es");
	assert_true(f->is_signed);
	assert_int_equal(ktel_field_read_s64(f, &v), -2);
	assert_string_equal(ktel_layout_enum_label(b, es, -2), "NEG_TWO");
	/* The same -2 read from an unsigned u32 key member still finds it... */
	assert_string_equal(ktel_layout_enum_label(b, es, 0xfffffffeLL), "NEG_TWO");
	/* ...but a value wider than the enum does not alias into it. */
	assert_null(ktel_layout_enum_label(b, e1, 200 + 256));
	assert_null(ktel_layout_enum_label(b, e4, (1LL << 32) + 3));
	/* No enum at that id: no label, no crash. */
	assert_null(ktel_layout_enum_label(b, id.u32, 0));
	assert_null(ktel_layout_enum_label(b, 100000, 0));
	ktel_layout__free(l);

	/* Lookup by name, as a descriptor's label_enum does. */
	assert_int_equal(ktel_btf_find_enum(b, "process_state"), e4);
	assert_int_equal(ktel_btf_find_enum(b, "wide"), e8);
	assert_int_equal(ktel_btf_find_enum(b, "enums"), -ENOENT);
	assert_int_equal(ktel_btf_find_struct(b, "enums"), s);
	assert_int_equal(ktel_btf_find_struct(b, "process_state"), -ENOENT);
	assert_int_equal(ktel_btf_find_type(b, "unsigned int", BTF_KIND_INT), id.u32);
	assert_int_equal(ktel_btf_find_type(b, "", BTF_KIND_INT), -EINVAL);
	assert_int_equal(ktel_btf_find_type(NULL, "x", BTF_KIND_INT), -EINVAL);
	btf__free(b);
}

/* ---- histograms ---------------------------------------------------------- */

static int hist_struct(struct btf *b, const struct ids *id, const char *name, int elem, __u32 n,
		       bool with_sum)
{
	int ix = btf__add_int(b, "__ARRAY_SIZE_TYPE__", 4, 0);
	int arr = btf__add_array(b, ix, elem, n);
	__u32 esz = btf__resolve_size(b, elem);
	int s = btf__add_struct(b, name, esz * n + (with_sum ? 8 : 0));

	assert_int_equal(btf__add_field(b, "buckets", arr, 0, 0), 0);
	if (with_sum)
		assert_int_equal(btf__add_field(b, "sum", id->u64, esz * n * 8, 0), 0);
	return s;
}

static void test_histograms(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_layout *l;
	uint64_t v[33];
	int u64t, plain, with_sum, narrow, sgn;

	u64t = btf__add_typedef(b, "__u64", id.u64);
	plain = hist_struct(b, &id, "accumulator_value", u64t, 32, false);
	with_sum = hist_struct(b, &id, "accumulator_value_sum", u64t, 32, true);
	narrow = hist_struct(b, &id, "narrow", id.u32, 32, false);
	sgn = hist_struct(b, &id, "signed_buckets", id.s64, 16, true);

	l = must_layout(b, plain, 256);
	assert_int_equal(l->hist_field, 0);
	assert_int_equal(l->n_buckets, 32);
	assert_int_equal(l->sum_field, -1);
	for (int i = 0; i < 33; i++)
		v[i] = (uint64_t)i * 1000;
	assert_int_equal(ktel_field_read_elem_u64(&l->fields[l->hist_field], v, 31), 31000);
	ktel_layout__free(l);

	l = must_layout(b, with_sum, 264);
	assert_int_equal(l->hist_field, 0);
	assert_int_equal(l->n_buckets, 32);
	assert_int_equal(l->sum_field, 1);
	assert_int_equal(ktel_field_read_u64(&l->fields[l->sum_field], v), 32000);
	ktel_layout__free(l);

	/* u32 or signed buckets are plain arrays, not the histogram convention. */
	l = must_layout(b, narrow, 128);
	assert_int_equal(l->hist_field, -1);
	ktel_layout__free(l);
	l = must_layout(b, sgn, 136);
	assert_int_equal(l->hist_field, -1);
	assert_int_equal(l->sum_field, -1);
	ktel_layout__free(l);
	btf__free(b);
}

/* ---- refusals ------------------------------------------------------------ */

static void test_bitfield_refused(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_err err;
	int foo, inner, outer;

	foo = btf__add_struct(b, "foo", 4);
	assert_int_equal(btf__add_field(b, "ok", id.u16, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "bar", id.u32, 16, 3), 0);
	inner = btf__add_struct(b, "inner", 4);
	assert_int_equal(btf__add_field(b, "flags", id.u32, 0, 5), 0);
	outer = btf__add_struct(b, "outer", 8);
	assert_int_equal(btf__add_field(b, "x", id.u32, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "in", inner, 32, 0), 0);
	assert_int_equal(ktel_btf_validate(b, NULL), 0);

	err = must_refuse(b, foo, 4);
	assert_string_equal(err.msg, "struct foo: member bar is a bitfield, not supported");
	err = must_refuse(b, outer, 8);
	assert_string_equal(err.msg, "struct outer: member in.flags is a bitfield, not supported");
	btf__free(b);
}

static void test_unsupported_kinds(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_layout *l;
	struct ktel_err err;
	int ptr, flt, fwd, fwdp, u2, u1, s_ptr, s_flt, s_fwdp, s_u2, s_u1, s_empty, fn;

	ptr = btf__add_ptr(b, id.u32);
	flt = btf__add_float(b, "double", 8);
	fwd = btf__add_fwd(b, "opaque", BTF_FWD_STRUCT);
	u2 = btf__add_union(b, "either", 4);
	assert_int_equal(btf__add_field(b, "i", id.s32, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "u", id.u32, 0, 0), 0);
	u1 = btf__add_union(b, "only", 8);
	assert_int_equal(btf__add_field(b, "v", id.u64, 0, 0), 0);
	s_ptr = btf__add_struct(b, "with_ptr", 8);
	assert_int_equal(btf__add_field(b, "next", ptr, 0, 0), 0);
	s_flt = btf__add_struct(b, "with_float", 16);
	assert_int_equal(btf__add_field(b, "n", id.u64, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "ratio", flt, 64, 0), 0);
	fwdp = btf__add_ptr(b, fwd);
	s_fwdp = btf__add_struct(b, "with_fwd", 8);
	assert_int_equal(btf__add_field(b, "o", fwdp, 0, 0), 0);
	s_u2 = btf__add_struct(b, "with_union", 4);
	assert_int_equal(btf__add_field(b, "e", u2, 0, 0), 0);
	s_u1 = btf__add_struct(b, "with_single_union", 8);
	assert_int_equal(btf__add_field(b, "o", u1, 0, 0), 0);
	s_empty = btf__add_struct(b, "empty", 0);
	fn = btf__add_func(b, "f", BTF_FUNC_GLOBAL, btf__add_func_proto(b, id.s32));
	assert_int_equal(ktel_btf_validate(b, NULL), 0);

	err = must_refuse(b, s_ptr, 8);
	assert_string_equal(err.msg, "struct with_ptr: member next is a pointer, not supported");
	err = must_refuse(b, s_flt, 16);
	assert_string_equal(err.msg, "struct with_float: member ratio is a float, not supported");
	err = must_refuse(b, s_fwdp, 8);
	assert_msg_has(&err, "member o is a pointer");
	err = must_refuse(b, s_u2, 4);
	assert_string_equal(err.msg,
			    "struct with_union: member e is a union of 2 members, not supported");
	err = must_refuse(b, fwd, 0);
	assert_msg_has(&err, "is a forward declaration, not supported");
	err = must_refuse(b, fn, 0);
	assert_msg_has(&err, "is a function, not supported");
	err = must_refuse(b, s_empty, 0);
	assert_msg_has(&err, "no members to decode");
	err = must_refuse(b, 0, 4);
	assert_msg_has(&err, "type id 0");
	err = must_refuse(b, 424242, 4);
	assert_msg_has(&err, "type id 424242");
	/* A union of one member is just that member. */
	l = must_layout(b, s_u1, 8);
	assert_int_equal(must_find(l, "o.v")->size, 8);
	ktel_layout__free(l);
	btf__free(b);
}

static void test_size_mismatch(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_layout *l;
	struct ktel_err err;
	int s;

	s = btf__add_struct(b, "key", 8);
	assert_int_equal(btf__add_field(b, "a", id.u32, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "b", id.u32, 32, 0), 0);
	err = must_refuse(b, s, 4);
	assert_string_equal(err.msg, "struct key: size 8 does not match the map's size 4");
	err = must_refuse(b, id.u64, 4);
	assert_msg_has(&err, "size 8 does not match the map's size 4");
	/* 0: no size to match (ring buffer events). */
	l = must_layout(b, s, 0);
	assert_int_equal(l->size, 8);
	ktel_layout__free(l);
	btf__free(b);
}

static void test_field_limits(void **state)
{
	struct ids id;
	struct btf *b = new_btf(&id);
	struct ktel_err err;
	char name[32];
	int wide, deep, prev, i;

	/* One more field than a layout holds: refused, not truncated. */
	wide = btf__add_struct(b, "wide", (KTEL_LAYOUT_MAX_FIELDS + 1) * 4);
	for (i = 0; i <= KTEL_LAYOUT_MAX_FIELDS; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(btf__add_field(b, name, id.u32, i * 32, 0), 0);
	}
	err = must_refuse(b, wide, (KTEL_LAYOUT_MAX_FIELDS + 1) * 4);
	assert_msg_has(&err, "limit of 256 fields");

	/* Names nested past the dotted-name limit are refused too. */
	prev = id.u32;
	for (i = 0; i < 12; i++) {
		deep = btf__add_struct(b, "level", 4);
		assert_int_equal(btf__add_field(b, "a_rather_long_member", prev, 0, 0), 0);
		prev = deep;
	}
	assert_int_equal(ktel_btf_validate(b, NULL), 0);
	err = must_refuse(b, deep, 4);
	assert_msg_has(&err, "longer than 127");
	btf__free(b);
}

/* ---- broken BTF ------------------------------------------------------------ */

/* Validation must fail with -EINVAL and a message containing sub. */
static void must_be_invalid(const struct btf *b, const char *sub)
{
	struct ktel_err err = {0};

	assert_int_equal(ktel_btf_validate(b, &err), -EINVAL);
	assert_int_equal(err.code, EINVAL);
	assert_msg_has(&err, sub);
}

/* No layout of any type may crash or hang on broken BTF. */
static void layouts_survive(const struct btf *b)
{
	struct ktel_layout *l;
	__u32 i, n = btf__type_cnt(b);

	for (i = 0; i <= n; i++) {
		l = NULL;
		if (ktel_layout__new(b, i, 0, &l, NULL) == 0)
			ktel_layout__free(l);
	}
}

static void test_invalid_ids(void **state)
{
	struct ids id;
	struct btf *b;
	int ix, s, p;

	b = new_btf(&id);
	btf__add_typedef(b, "dangling", 999);
	must_be_invalid(b, "typedef refers to type id 999, out of range");
	layouts_survive(b);
	btf__free(b);

	b = new_btf(&id);
	s = btf__add_struct(b, "key", 8);
	btf__add_field(b, "a", id.u32, 0, 0);
	btf__add_field(b, "b", 5000, 32, 0);
	must_be_invalid(b, "member refers to type id 5000");
	layouts_survive(b);
	struct ktel_err err = must_refuse(b, s, 8);
	assert_msg_has(&err, "struct key: member b refers to type id 5000, out of range");
	btf__free(b);

	b = new_btf(&id);
	ix = btf__add_int(b, "__ARRAY_SIZE_TYPE__", 4, 0);
	btf__add_array(b, ix, 777, 4);
	must_be_invalid(b, "array element refers to type id 777");
	layouts_survive(b);
	btf__free(b);

	b = new_btf(&id);
	btf__add_array(b, 778, id.u32, 4);
	must_be_invalid(b, "array index refers to type id 778");
	btf__free(b);

	b = new_btf(&id);
	p = btf__add_func_proto(b, id.s32);
	btf__add_func_param(b, "x", 4242);
	must_be_invalid(b, "parameter refers to type id 4242");
	(void)p;
	btf__free(b);

	b = new_btf(&id);
	btf__add_func_proto(b, 4243);
	must_be_invalid(b, "return type refers to type id 4243");
	btf__free(b);

	b = new_btf(&id);
	btf__add_var(b, "v", BTF_VAR_GLOBAL_ALLOCATED, 4244);
	must_be_invalid(b, "variable refers to type id 4244");
	btf__free(b);

	b = new_btf(&id);
	btf__add_datasec(b, ".data", 8);
	btf__add_datasec_var_info(b, 4245, 0, 8);
	must_be_invalid(b, "section entry refers to type id 4245");
	btf__free(b);

	b = new_btf(&id);
	btf__add_ptr(b, 4246);
	must_be_invalid(b, "pointer refers to type id 4246");
	btf__free(b);
}

static void test_cycles(void **state)
{
	struct ids id;
	struct btf *b;
	int ta, tb, s, ix, node;

	/* typedef a -> typedef b -> typedef a */
	b = new_btf(&id);
	ta = btf__type_cnt(b);
	btf__add_typedef(b, "a", ta + 1);
	btf__add_typedef(b, "b", ta);
	must_be_invalid(b, "contains itself without a pointer in between");
	layouts_survive(b);
	struct ktel_err err = must_refuse(b, ta, 0);
	assert_msg_has(&err, "chain longer than 32");
	btf__free(b);

	/* struct s { s_t x; } with typedef s_t -> const -> s */
	b = new_btf(&id);
	s = btf__type_cnt(b);
	btf__add_struct(b, "s", 4);
	btf__add_field(b, "x", s + 2, 0, 0);
	btf__add_const(b, s);
	btf__add_typedef(b, "s_t", s + 1);
	must_be_invalid(b, "contains itself");
	layouts_survive(b);
	err = must_refuse(b, s, 4);
	assert_msg_has(&err, "nests more than 32 levels");
	btf__free(b);

	/* An array whose element is (volatile) itself. */
	b = new_btf(&id);
	ix = btf__add_int(b, "__ARRAY_SIZE_TYPE__", 4, 0);
	tb = btf__type_cnt(b);
	btf__add_array(b, ix, tb + 1, 2);
	btf__add_volatile(b, tb);
	must_be_invalid(b, "contains itself");
	layouts_survive(b);
	btf__free(b);

	/* Through a pointer it is a list node, which is fine. */
	b = new_btf(&id);
	node = btf__type_cnt(b);
	btf__add_struct(b, "node", 16);
	btf__add_field(b, "next", node + 1, 0, 0);
	btf__add_field(b, "val", id.u64, 64, 0);
	btf__add_ptr(b, node);
	assert_int_equal(ktel_btf_validate(b, NULL), 0);
	err = must_refuse(b, node, 16);
	assert_msg_has(&err, "member next is a pointer");
	btf__free(b);
}

static void test_depth(void **state)
{
	struct ids id;
	struct btf *b;
	int i, t;

	/* A 32-deep chain is allowed, 33 is not. */
	b = new_btf(&id);
	t = id.u32;
	for (i = 0; i < KTEL_BTF_MAX_DEPTH; i++)
		t = btf__add_typedef(b, "t", t);
	assert_int_equal(ktel_btf_validate(b, NULL), 0);
	btf__add_typedef(b, "t", t);
	must_be_invalid(b, "nest more than 32 levels");
	btf__free(b);

	/* Deep structs: each level one struct, 40 levels. */
	b = new_btf(&id);
	t = id.u32;
	for (i = 0; i < 40; i++) {
		int s = btf__add_struct(b, "lvl", 4);

		btf__add_field(b, "m", t, 0, 0);
		t = s;
	}
	must_be_invalid(b, "nest more than 32 levels");
	struct ktel_err err = must_refuse(b, t, 4);
	assert_msg_has(&err, "nests more than 32 levels");
	btf__free(b);
}

static void test_bad_sizes(void **state)
{
	struct ids id;
	struct btf *b;
	int ix, big;

	/* 2^30 x u64: 8 GiB does not fit 32 bits. */
	b = new_btf(&id);
	ix = btf__add_int(b, "__ARRAY_SIZE_TYPE__", 4, 0);
	big = btf__add_array(b, ix, id.u64, 1U << 30);
	must_be_invalid(b, "overflows 32 bits");
	struct ktel_err err = must_refuse(b, big, 0);
	assert_msg_has(&err, "too large");
	btf__free(b);

	/* Array of arrays that overflows only when multiplied out. */
	b = new_btf(&id);
	ix = btf__add_int(b, "__ARRAY_SIZE_TYPE__", 4, 0);
	btf__add_array(b, ix, btf__add_array(b, ix, id.u32, 1U << 16), 1U << 16);
	must_be_invalid(b, "overflows 32 bits");
	btf__free(b);

	/* A member past the end of its struct. */
	b = new_btf(&id);
	btf__add_struct(b, "short_struct", 4);
	btf__add_field(b, "a", id.u32, 0, 0);
	btf__add_field(b, "b", id.u64, 32, 0);
	must_be_invalid(b, "lies outside 4 bytes");
	err = must_refuse(b, btf__type_cnt(b) - 1, 4);
	assert_msg_has(&err, "member b at offset 4 (8 bytes) lies outside its 4-byte parent");
	btf__free(b);

	/* A member of a type that has no size. */
	b = new_btf(&id);
	int proto = btf__add_func_proto(b, id.s32);
	btf__add_struct(b, "odd", 4);
	btf__add_field(b, "f", proto, 0, 0);
	must_be_invalid(b, "has no size");
	btf__free(b);
}

/*
 * Serialize b, overwrite the u32 at byte field_off of type id's record with
 * value, and parse the bytes back: libbpf 1.1 accepts what this produces.
 */
static struct btf *patched(const struct btf *b, __u32 id, size_t field_off, __u32 value)
{
	const struct btf_header *h;
	const void *raw;
	struct btf *nb;
	uint8_t *copy;
	size_t off;
	__u32 size;

	raw = btf__raw_data(b, &size);
	assert_non_null(raw);
	copy = malloc(size);
	assert_non_null(copy);
	memcpy(copy, raw, size);
	h = (const struct btf_header *)copy;
	/* Types are contiguous: the distance from type 1 is the record offset. */
	off = h->hdr_len + h->type_off + field_off +
	      ((const char *)btf__type_by_id(b, id) - (const char *)btf__type_by_id(b, 1));
	assert_true(off + 4 <= size);
	memcpy(copy + off, &value, 4);
	nb = btf__new(copy, size);
	free(copy);
	return nb;
}

static void test_bad_name_offsets(void **state)
{
	struct ids id;
	struct btf *b, *nb;
	const struct btf_header *h;
	__u32 size, str_len;
	int s, e;

	b = new_btf(&id);
	s = btf__add_struct(b, "victim", 8);
	btf__add_field(b, "a", id.u32, 0, 0);
	btf__add_field(b, "b", id.u32, 32, 0);
	e = btf__add_enum(b, "colors", 4);
	btf__add_enum_value(b, "RED", 0);
	h = btf__raw_data(b, &size);
	str_len = h->str_len;
	assert_int_equal(ktel_btf_validate(b, NULL), 0);

	/* The struct's own name just past the strings. */
	nb = patched(b, s, offsetof(struct btf_type, name_off), str_len);
	assert_non_null(nb);
	must_be_invalid(nb, "type name offset");
	layouts_survive(nb);
	assert_int_equal(ktel_btf_find_struct(nb, "victim"), -ENOENT);
	btf__free(nb);

	/* Member b's name far outside. */
	nb = patched(b, s,
		     sizeof(struct btf_type) + sizeof(struct btf_member) +
			     offsetof(struct btf_member, name_off),
		     0xfffffff0u);
	assert_non_null(nb);
	must_be_invalid(nb, "member name offset 4294967280 is outside the string section");
	struct ktel_err err = must_refuse(nb, s, 8);
	assert_msg_has(&err, "name offset outside the strings");
	btf__free(nb);

	/* An enumerator's name. */
	nb = patched(b, e, sizeof(struct btf_type) + offsetof(struct btf_enum, name_off),
		     str_len + 7);
	assert_non_null(nb);
	must_be_invalid(nb, "enumerator name offset");
	assert_null(ktel_layout_enum_label(nb, e, 0)); /* no name, no crash */
	btf__free(nb);

	/* A member's type id patched out of range in the raw bytes. */
	nb = patched(b, s, sizeof(struct btf_type) + offsetof(struct btf_member, type),
		     0x7ffffff0u);
	assert_non_null(nb);
	must_be_invalid(nb, "refers to type id 2147483632");
	layouts_survive(nb);
	btf__free(nb);

	/* An int of 3 bytes, which btf__add_int would not make. */
	nb = patched(b, id.u32, offsetof(struct btf_type, size), 3);
	assert_non_null(nb);
	must_be_invalid(nb, "int of 3 bytes");
	layouts_survive(nb);
	btf__free(nb);
	btf__free(b);
}

/* ---- the real plugin object ------------------------------------------------ */

static void test_real_plugin(void **state)
{
	struct btf *b = btf__parse_elf(PLUGIN_OBJ, NULL);
	struct ktel_layout *key, *val;
	struct ktel_err err = {0};
	const struct ktel_field *f;
	uint32_t k = 4;
	__s32 key_id, val_id, enum_id;

	if (!b)
		fail_msg("cannot parse %s: %s (build the plugins first)", PLUGIN_OBJ,
			 strerror(errno));
	if (ktel_btf_validate(b, &err))
		fail_msg("validate %s: %s", PLUGIN_OBJ, err.msg);

	key_id = ktel_btf_find_struct(b, "direct_reclaim_key");
	val_id = ktel_btf_find_struct(b, "accumulator_value_sum");
	enum_id = ktel_btf_find_enum(b, "process_state");
	assert_true(key_id > 0 && val_id > 0 && enum_id > 0);

	/* process_state, the explicit pad, and the attribution member. */
	assert_int_equal(ktel_layout__new(b, key_id, 16, &key, &err), 0);
	assert_int_equal(key->n_fields, 3);
	assert_int_equal(must_find(key, "attr")->size, 8);
	assert_int_equal(must_find(key, "attr")->offset, 8);
	f = must_find(key, "process_state");
	assert_int_equal(f->kind, KTEL_FIELD_INT); /* a uint32_t labelled by the enum */
	assert_int_equal(f->size, 4);
	assert_false(f->is_signed);
	assert_string_equal(ktel_layout_enum_label(b, enum_id, ktel_field_read_s64(f, &k)),
			    "STATE_FOREGROUND");
	assert_string_equal(ktel_layout_enum_label(b, enum_id, 8), "STATE_CACHED");
	assert_null(ktel_layout_enum_label(b, enum_id, 99));

	/* Buckets, then the sum of the microseconds bucketed. */
	assert_int_equal(ktel_layout__new(b, val_id, 264, &val, &err), 0);
	assert_int_equal(val->hist_field, 0);
	assert_int_equal(val->n_buckets, 32);
	assert_int_equal(val->sum_field, 1);
	assert_int_equal(val->fields[0].elem_size, 8);
	assert_int_equal(val->fields[1].offset, 256);
	assert_int_equal(val->fields[1].size, 8);
	assert_int_equal(ktel_layout__new(b, val_id, 256, &key, &err), -EINVAL);
	assert_msg_has(&err,
		       "struct accumulator_value_sum: size 264 does not match the map's size 256");

	ktel_layout__free(key);
	ktel_layout__free(val);
	btf__free(b);
}

static void *read_file(const char *path, size_t *ret_size)
{
	FILE *f = fopen(path, "rb");
	void *buf;
	long n;

	if (!f)
		fail_msg("cannot open %s: %s (build the plugins first)", path, strerror(errno));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	buf = malloc(n);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, n, f), (size_t)n);
	fclose(f);
	*ret_size = n;
	return buf;
}

/*
 * The object's bytes are checked before libbpf opens them: with the type of
 * the .maps variable direct_reclaim_latency_map pointed out of range,
 * libbpf 1.1's bpf_object__open_mem() dereferences NULL; this must refuse it.
 */
static void test_validate_elf(void **state)
{
	struct btf *b = btf__parse_elf(PLUGIN_OBJ, NULL);
	struct ktel_err err = {0};
	const struct btf_header *h;
	const struct btf_type *var;
	uint8_t *obj, *at, *name;
	__u32 raw_size, bad = 9999;
	size_t size, off;

	assert_non_null(b);
	obj = read_file(PLUGIN_OBJ, &size);
	if (ktel_btf_validate_elf(obj, size, &err))
		fail_msg("%s", err.msg);

	/* The .BTF section is the raw BTF, byte for byte: find it in the file. */
	h = btf__raw_data(b, &raw_size);
	at = memmem(obj, size, h, raw_size);
	assert_non_null(at);
	var = btf__type_by_id(b, btf__find_by_name_kind(b, "direct_reclaim_latency_map",
							BTF_KIND_VAR));
	assert_non_null(var);
	off = h->hdr_len + h->type_off + offsetof(struct btf_type, type) +
	      ((const char *)var - (const char *)btf__type_by_id(b, 1));
	memcpy(at + off, &bad, 4);
	assert_int_equal(ktel_btf_validate_elf(obj, size, &err), -EINVAL);
	assert_msg_has(&err, "BPF object .BTF: BTF type [");
	assert_msg_has(&err, "variable refers to type id 9999, out of range");

	/* No .BTF section at all: rename it in the section names (where
	 * ".BTF" may be the tail of ".rel.BTF"). */
	name = memmem(obj, size, ".BTF", 5);
	assert_non_null(name);
	name[1] = 'X';
	assert_int_equal(ktel_btf_validate_elf(obj, size, &err), -ENOENT);
	assert_msg_has(&err, "no .BTF section");

	/* Not an ELF file. */
	memset(obj, 0, 16);
	assert_int_equal(ktel_btf_validate_elf(obj, size, &err), -EINVAL);
	assert_msg_has(&err, "not an ELF file");
	assert_int_equal(ktel_btf_validate_elf(NULL, 0, &err), -EINVAL);
	free(obj);
	btf__free(b);
}

/*
 * Corrupt the real object's BTF at random (fixed seed, so any failure
 * reproduces) in its type and string sections, and feed whatever libbpf
 * still parses to the validator and the layout builder. Neither may crash,
 * hang or leak (run under valgrind/ASan); the validator must catch some.
 */
static void test_fuzz_real_btf(void **state)
{
	struct btf *b = btf__parse_elf(PLUGIN_OBJ, NULL), *nb;
	const struct btf_header *h;
	const uint8_t *raw;
	uint8_t *copy;
	__u32 size, body;
	int i, j, parsed = 0, refused = 0, passed = 0;
	libbpf_print_fn_t old_print;

	if (!b)
		fail_msg("cannot parse %s", PLUGIN_OBJ);
	raw = btf__raw_data(b, &size);
	h = (const struct btf_header *)raw;
	body = size - h->hdr_len;
	copy = malloc(size);
	assert_non_null(copy);
	/* libbpf logs each malformed type it rejects; that is expected here. */
	old_print = libbpf_set_print(NULL);
	srand(20240601);
	for (i = 0; i < 3000; i++) {
		memcpy(copy, raw, size);
		for (j = 0; j < 1 + i % 4; j++)
			copy[h->hdr_len + rand() % body] ^= (uint8_t)(1u << (rand() % 8)) |
							    (uint8_t)(i % 7 ? 0 : 0xff);
		nb = btf__new(copy, size);
		if (!nb)
			continue;
		parsed++;
		if (ktel_btf_validate(nb, NULL))
			refused++;
		else
			passed++;
		layouts_survive(nb);
		btf__free(nb);
	}
	libbpf_set_print(old_print);
	free(copy);
	btf__free(b);
	print_message("fuzz: %d parsed by libbpf, %d refused, %d passed validation\n", parsed,
		      refused, passed);
	assert_true(parsed > 100);
	assert_true(refused > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ints),
		cmocka_unit_test(test_typedef_const_chains),
		cmocka_unit_test(test_nested_and_anonymous),
		cmocka_unit_test(test_arrays),
		cmocka_unit_test(test_arrays_refused),
		cmocka_unit_test(test_enums),
		cmocka_unit_test(test_histograms),
		cmocka_unit_test(test_bitfield_refused),
		cmocka_unit_test(test_unsupported_kinds),
		cmocka_unit_test(test_size_mismatch),
		cmocka_unit_test(test_field_limits),
		cmocka_unit_test(test_invalid_ids),
		cmocka_unit_test(test_cycles),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_bad_sizes),
		cmocka_unit_test(test_bad_name_offsets),
		cmocka_unit_test(test_real_plugin),
		cmocka_unit_test(test_validate_elf),
		cmocka_unit_test(test_fuzz_real_btf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
