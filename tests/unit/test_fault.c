// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * KTEL_TEST_FAULT: the strict parse (the same in every build), and what the
 * build does with a valid value: armed where fault injection is compiled in
 * (KTEL_FAULT_INJECTION), ignored, with its points doing nothing, where not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

static void expect_refused(const char *text, const char *why)
{
	struct ktel_fault_spec spec = {.n = 42};
	struct ktel_err err = {0};

	if (ktel_fault_parse(text, &spec, &err) != -EINVAL)
		fail_msg("\"%s\" was accepted", text);
	if (!strstr(err.msg, why))
		fail_msg("\"%s\": expected \"%s\" in \"%s\"", text, why, err.msg);
	assert_int_equal(spec.n, 42); /* untouched */
}

static void test_parse_refuses(void **state)
{
	expect_refused("routed:-1:kill", "hit count");
	expect_refused("routed:+1:kill", "hit count");
	expect_refused("routed: 1:kill", "hit count");
	expect_refused("saved:18446744073709551615:kill", "hit count");
	expect_refused("saved:18446744073709551617:kill", "hit count");
	expect_refused("saved:1000001:kill", "hit count");
	expect_refused("saved:0:kill", "hit count");
	expect_refused("saved:1x:kill", "hit count");
	expect_refused("saved::kill", "hit count");
	expect_refused("saved:1", "hit count");
	expect_refused("saved:1:kill ", "unknown action");
	expect_refused("saved:1:killer", "unknown action");
	expect_refused("saved:1:", "unknown action");
	expect_refused("nowhere:1:kill", "unknown point");
	expect_refused("Saved:1:kill", "unknown point");
	expect_refused("", "unknown point");
	expect_refused("routed:1:delay=", "delay");
	expect_refused("routed:1:delay=-1", "delay");
	expect_refused("routed:1:delay=0", "delay");
	expect_refused("routed:1:delay=60001", "delay");
	expect_refused("routed:1:delay=99999999999999999999999", "delay");
	expect_refused("routed:1:delay=10ms", "delay");
	expect_refused("routed:1:delay=5 ", "delay");
}

static void test_parse_accepts(void **state)
{
	struct ktel_fault_spec spec;
	struct ktel_err err;

	assert_int_equal(ktel_fault_parse("saved:1:kill", &spec, &err), 0);
	assert_string_equal(spec.point, "saved");
	assert_int_equal(spec.n, 1);
	assert_true(spec.kill);
	assert_int_equal(ktel_fault_parse("written:1000000:delay=60000", &spec, &err), 0);
	assert_string_equal(spec.point, "written");
	assert_int_equal(spec.n, 1000000);
	assert_false(spec.kill);
	assert_int_equal(spec.delay_ms, 60000);
	assert_int_equal(ktel_fault_parse("synced:007:delay=1", &spec, &err), 0);
	assert_int_equal(spec.n, 7);
}

/* A valid value: armed, its hits counted, where fault injection is
 * compiled in; ignored, its points doing nothing, where it is not. */
static void test_build_decides(void **state)
{
	char line[300];

	setenv(KTEL_FAULT_ENV, "routed:2:delay=1", 1);
#ifdef KTEL_FAULT_INJECTION
	assert_true(ktel_fault_compiled());
	assert_int_equal(ktel_fault__init(NULL), KTEL_FAULT_ARMED);
	ktel_fault__point("routed");
	ktel_fault__point("saved");
	assert_int_equal(ktel_fault__describe(line, sizeof(line)), KTEL_FAULT_ARMED);
	assert_non_null(strstr(line, "armed"));
	assert_non_null(strstr(line, "hit 1 of 2"));
	ktel_fault__point("routed");
	ktel_fault__describe(line, sizeof(line));
	assert_non_null(strstr(line, "hit 2 of 2"));
#else
	assert_false(ktel_fault_compiled());
	assert_int_equal(ktel_fault__init(NULL), KTEL_FAULT_IGNORED);
	ktel_fault__point("routed");
	ktel_fault__point("routed");
	assert_int_equal(ktel_fault__describe(line, sizeof(line)), KTEL_FAULT_IGNORED);
	assert_non_null(strstr(line, "ignored: this build has no fault injection"));
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_refuses),
		cmocka_unit_test(test_parse_accepts),
		cmocka_unit_test(test_build_decides),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
