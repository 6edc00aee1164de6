// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Short enum labels (core/engine/enum_label.c, KTEL_DIM_ENUM_SHORT): the prefix
 * rule on name lists, then on enums built with libbpf's btf__add_* API,
 * hostile enumerator names included (libbpf accepts any non-empty string).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include <bpf/btf.h>

#include "btf_layout.h"
#include "enum_label.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The short label of names[i] under the rule, or "" when it has none. */
static const char *short_of(const char *const *names, size_t n, size_t i)
{
	static char buf[KTEL_ENUM_LABEL_MAX];

	if (ktel_enum_short_name(names[i], ktel_enum_prefix_len(names, n), buf, sizeof(buf)))
		return "";
	return buf;
}

static void test_block_op(void **state)
{
	const char *const names[] = {"BLOCK_OP_READ", "BLOCK_OP_WRITE", "BLOCK_OP_FLUSH",
				     "BLOCK_OP_DISCARD", "BLOCK_OP_OTHER"};
	const char *const want[] = {"read", "write", "flush", "discard", "other"};

	(void)state;
	assert_int_equal(ktel_enum_prefix_len(names, N(names)), strlen("BLOCK_OP_"));
	for (size_t i = 0; i < N(names); i++)
		assert_string_equal(short_of(names, N(names), i), want[i]);
}

/* The prefix ends at a word boundary: RQ_READ/RQ_READA share "RQ_READ". */
static void test_prefix_cut_at_underscore(void **state)
{
	const char *const names[] = {"RQ_READ", "RQ_READA"};

	(void)state;
	assert_int_equal(ktel_enum_prefix_len(names, 2), 3);
	assert_string_equal(short_of(names, 2, 0), "read");
	assert_string_equal(short_of(names, 2, 1), "reada");
}

static void test_single_enumerator(void **state)
{
	const char *const one[] = {"BLOCK_OP_READ"};
	const char *const bare[] = {"READ"};

	(void)state;
	assert_string_equal(short_of(one, 1, 0), "read");
	assert_string_equal(short_of(bare, 1, 0), "read");
}

static void test_no_common_prefix(void **state)
{
	const char *const names[] = {"PROCESS_STATE_UNSPECIFIED", "STATE_NATIVE"};
	const char *const words[] = {"READ", "WRITE"};

	(void)state;
	assert_int_equal(ktel_enum_prefix_len(names, 2), 0);
	assert_string_equal(short_of(names, 2, 0), "process_state_unspecified");
	assert_string_equal(short_of(names, 2, 1), "state_native");
	assert_string_equal(short_of(words, 2, 1), "write");
}

/* An enumerator that is the whole prefix keeps a word: the prefix backs off. */
static void test_enumerator_equal_to_prefix(void **state)
{
	const char *const names[] = {"BLOCK_OP_", "BLOCK_OP_READ"};
	const char *const deeper[] = {"A_B_", "A_B_C", "A_"};
	const char *const under[] = {"_", "_A"};

	(void)state;
	assert_string_equal(short_of(names, 2, 0), "op_");
	assert_string_equal(short_of(names, 2, 1), "op_read");
	/* "A_B_" then "A_" are names themselves: nothing is stripped. */
	assert_int_equal(ktel_enum_prefix_len(deeper, 3), 0);
	assert_string_equal(short_of(deeper, 3, 2), "a_");
	assert_int_equal(ktel_enum_prefix_len(under, 2), 0);
	assert_string_equal(short_of(under, 2, 0), "_");
}

/* Names that are no identifier get no label and do not shape the prefix. */
static void test_hostile_names(void **state)
{
	char longname[KTEL_ENUM_LABEL_MAX + 8];
	const char *const names[] =
		{"BLOCK_OP_READ", "X\xc3\xa9t\xc3\xa9", "BLOCK_OP_WRITE", "", NULL,
		 "BLOCK_OP_a\"b", "BLOCK_OP_\n",        longname};
	char buf[KTEL_ENUM_LABEL_MAX];

	(void)state;
	memset(longname, 'A', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(ktel_enum_prefix_len(names, N(names)), strlen("BLOCK_OP_"));
	assert_string_equal(short_of(names, N(names), 0), "read");
	assert_string_equal(short_of(names, N(names), 2), "write");
	for (size_t i = 1; i < N(names); i++)
		if (i != 2)
			assert_int_equal(ktel_enum_short_name(names[i], 0, buf, sizeof(buf)),
					 -EINVAL);
	/* A name one short of the bound is still a name. */
	longname[KTEL_ENUM_LABEL_MAX - 1] = '\0';
	assert_true(ktel_enum_name_valid(longname));
	/* Nothing valid at all: no prefix, no labels. */
	assert_int_equal(ktel_enum_prefix_len(names + 3, 2), 0);
	/* A buffer too small is refused, not overrun. */
	assert_int_equal(ktel_enum_short_name("BLOCK_OP_DISCARD", 9, buf, 7), -EINVAL);
	assert_int_equal(ktel_enum_short_name("BLOCK_OP_DISCARD", 9, buf, 8), 0);
	assert_string_equal(buf, "discard");
}

/* An enum in BTF: labels by value, aliases, signed values, a hostile name. */
static void test_btf_enum(void **state)
{
	struct btf *btf = btf__new_empty();
	struct ktel_enum_labels *el = NULL;
	struct ktel_err err = {0};
	int id;

	(void)state;
	assert_non_null(btf);
	id = btf__add_enum(btf, "block_op", 4);
	assert_true(id > 0);
	assert_int_equal(btf__add_enum_value(btf, "BLOCK_OP_READ", 0), 0);
	assert_int_equal(btf__add_enum_value(btf, "BLOCK_OP_WRITE", 1), 0);
	assert_int_equal(btf__add_enum_value(btf, "BLOCK_OP_\xff\x01", 2), 0);
	assert_int_equal(btf__add_enum_value(btf, "BLOCK_OP_LAST", 1), 0); /* alias */
	assert_int_equal(btf__add_enum_value(btf, "BLOCK_OP_NEG", -1), 0);
	assert_int_equal(ktel_enum_labels__new(btf, (__u32)id, &el, &err), 0);
	assert_string_equal(ktel_enum_labels__find(el, 0), "read");
	assert_string_equal(ktel_enum_labels__find(el, 1), "write"); /* first of the value */
	assert_null(ktel_enum_labels__find(el, 2));                  /* hostile: a number */
	assert_null(ktel_enum_labels__find(el, 7));                  /* no enumerator */
	/* The same value match as ktel_layout_enum_label: a 4-byte enum's -1. */
	assert_string_equal(ktel_enum_labels__find(el, -1), "neg");
	assert_string_equal(ktel_enum_labels__find(el, 0xffffffffLL), "neg");
	assert_null(ktel_enum_labels__find(NULL, 0));
	ktel_enum_labels__free(el);
	/* Not an enum. */
	id = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	assert_int_equal(ktel_enum_labels__new(btf, (__u32)id, &el, &err), -EINVAL);
	ktel_enum_labels__free(NULL);
	btf__free(btf);
}

/* ENUM64 enumerators get the same rule. */
static void test_btf_enum64(void **state)
{
	struct btf *btf = btf__new_empty();
	struct ktel_enum_labels *el = NULL;
	struct ktel_err err = {0};
	int id;

	(void)state;
	id = btf__add_enum64(btf, "big", 8, false);
	assert_true(id > 0);
	assert_int_equal(btf__add_enum64_value(btf, "BIG_SMALL", 1), 0);
	assert_int_equal(btf__add_enum64_value(btf, "BIG_HUGE", 1ULL << 40), 0);
	assert_int_equal(ktel_enum_labels__new(btf, (__u32)id, &el, &err), 0);
	assert_string_equal(ktel_enum_labels__find(el, 1), "small");
	assert_string_equal(ktel_enum_labels__find(el, 1LL << 40), "huge");
	ktel_enum_labels__free(el);
	btf__free(btf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_op),
		cmocka_unit_test(test_prefix_cut_at_underscore),
		cmocka_unit_test(test_single_enumerator),
		cmocka_unit_test(test_no_common_prefix),
		cmocka_unit_test(test_enumerator_equal_to_prefix),
		cmocka_unit_test(test_hostile_names),
		cmocka_unit_test(test_btf_enum),
		cmocka_unit_test(test_btf_enum64),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
