// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * UTF-8 cuts (a cut must not split a character): at every cut position of
 * text with 2, 3 and 4
 * byte characters, ktel_utf8_trim leaves valid UTF-8 (jansson accepts it)
 * and loses no more than the split character; ktel_err_set and
 * ktel_control_error keep replies valid with their "error" key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "control.h"
#include "error.h"
#include "utf8.h"

/* "a" é (2) € (3) 😀 (4) "b", repeated. */
static const char text[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
			   "b"
			   "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";

static bool valid(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);

	json_decref(j);
	return j != NULL;
}

static void test_trim_every_cut(void **state)
{
	size_t total = strlen(text);

	for (size_t cut = 0; cut <= total; cut++) {
		size_t n = ktel_utf8_trim(text, cut);

		assert_true(n <= cut);
		assert_true(cut - n <= 3);
		assert_true(valid(text, n));
		/* Nothing is lost when the cut falls on a boundary. */
		if (valid(text, cut))
			assert_int_equal(n, cut);
	}
}

static void test_err_set_cuts_on_boundary(void **state)
{
	char name[2 * KTEL_ERR_MSG_MAX];
	struct ktel_err err;

	/* Every alignment of a long run of 2, 3 and 4 byte characters. */
	for (size_t pre = 0; pre < 4; pre++) {
		for (size_t w = 2; w <= 4; w++) {
			static const char *ch[] = {NULL, NULL, "\xc3\xa9", "\xe2\x82\xac",
						   "\xf0\x9f\x98\x80"};
			size_t n = 0;
			json_t *j;

			memset(name, 'x', pre);
			n = pre;
			while (n + w < sizeof(name) - 1) {
				memcpy(name + n, ch[w], w);
				n += w;
			}
			name[n] = '\0';
			ktel_err_set(&err, EINVAL, "metric %s: no such metric", name);
			assert_true(strlen(err.msg) < sizeof(err.msg));
			assert_true(valid(err.msg, strlen(err.msg)));
			j = ktel_control_error("not_found", err.msg);
			assert_non_null(j);
			assert_string_equal(json_string_value(json_object_get(j, "error")),
					    err.msg);
			json_decref(j);
		}
	}
}

static void test_error_reply_with_invalid_bytes(void **state)
{
	json_t *j = ktel_control_error("failed", "plugin /x/\xff\xfe.so: bad \xc3");
	char *line;

	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "error")),
			    "plugin /x/??.so: bad ?");
	line = ktel_control_dump_line(j, NULL);
	assert_non_null(line);
	json_decref(j);
	j = json_loads(line, 0, NULL);
	assert_non_null(json_object_get(j, "error"));
	json_decref(j);
	free(line);
}

static void test_sanitize(void **state)
{
	char s[] = "ok \xc3\xa9 \xe0\x80\x80 \xed\xa0\x80 \xf4\x90\x80\x80 \xc3";

	ktel_utf8_sanitize(s);
	assert_true(valid(s, strlen(s)));
	assert_string_equal(s, "ok \xc3\xa9 ??? ??? ???? ?");
}

/* Bytes that are not UTF-8, and control characters, become \\xNN; valid
 * characters stay; a cut never splits a character or an escape. */
static void test_escape(void **state)
{
	char buf[64];

	assert_int_equal(ktel_utf8_escape("a\xff\xfe\xc3\xa9"
					  "b",
					  buf, sizeof(buf)),
			 12);
	assert_string_equal(buf, "a\\xff\\xfe\xc3\xa9"
				 "b");
	ktel_utf8_escape("x\ny\tz\x7f", buf, sizeof(buf));
	assert_string_equal(buf, "x\\x0ay\tz\\x7f");
	/* An overlong form and a lone continuation byte are not characters. */
	ktel_utf8_escape("\xc0\xaf\x80", buf, sizeof(buf));
	assert_string_equal(buf, "\\xc0\\xaf\\x80");
	assert_int_equal(ktel_utf8_escape("ab\xff", buf, 6), 2);
	assert_string_equal(buf, "ab");
	assert_int_equal(ktel_utf8_escape("a\xc3\xa9", buf, 3), 1);
	assert_string_equal(buf, "a");
	assert_int_equal(ktel_utf8_escape("abc", buf, 0), 0);
}

/* One character's length, or 0 where no valid character starts, including
 * one the given length cuts (the bytes after it are not read). */
static void test_char_len(void **state)
{
	assert_int_equal(ktel_utf8_char_len("a", 1), 1);
	assert_int_equal(ktel_utf8_char_len("\xc3\xa9", 2), 2);
	assert_int_equal(ktel_utf8_char_len("\xe2\x82\xac", 3), 3);
	assert_int_equal(ktel_utf8_char_len("\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(ktel_utf8_char_len("\xf0\x9f\x98\x80", 3), 0);
	assert_int_equal(ktel_utf8_char_len("\xc3\xa9", 1), 0);
	assert_int_equal(ktel_utf8_char_len("\x80", 1), 0);
	assert_int_equal(ktel_utf8_char_len("\xc0\xaf", 2), 0);
	assert_int_equal(ktel_utf8_char_len("\xe0\x80\x80", 3), 0);
	assert_int_equal(ktel_utf8_char_len("\xed\xa0\x80", 3), 0);
	assert_int_equal(ktel_utf8_char_len("\xf4\x90\x80\x80", 4), 0);
	assert_int_equal(ktel_utf8_char_len("\xc3", 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trim_every_cut),
		cmocka_unit_test(test_err_set_cuts_on_boundary),
		cmocka_unit_test(test_error_reply_with_invalid_bytes),
		cmocka_unit_test(test_sanitize),
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_char_len),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
