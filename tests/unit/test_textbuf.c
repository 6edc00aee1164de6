// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The text buffer's printf-free integer appends (core/base/textbuf.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "textbuf.h"

static void expect_text(struct ktel_textbuf *b, const char *want)
{
	assert_false(b->fail);
	assert_string_equal(b->p, want);
	b->len = 0;
	b->p[0] = '\0';
}

static void test_integers_match_printf(void **state)
{
	static const uint64_t u[] = {0,
				     1,
				     9,
				     10,
				     99,
				     100,
				     4294967295u,
				     4294967296u,
				     UINT64_MAX / 10,
				     UINT64_MAX - 1,
				     UINT64_MAX};
	static const int64_t i[] = {0, -1, 1, -9, -10, INT64_MIN, INT64_MIN + 1, INT64_MAX};
	struct ktel_textbuf b = {0};
	char want[64];

	(void)state;
	for (size_t k = 0; k < sizeof(u) / sizeof(u[0]); k++) {
		ktel_textbuf_put_u64(&b, u[k]);
		snprintf(want, sizeof(want), "%" PRIu64, u[k]);
		expect_text(&b, want);
	}
	for (size_t k = 0; k < sizeof(i) / sizeof(i[0]); k++) {
		ktel_textbuf_put_i64(&b, i[k]);
		snprintf(want, sizeof(want), "%" PRId64, i[k]);
		expect_text(&b, want);
	}
	free(b.p);
}

/* The digit count switches at every power of ten and of two: both sides of
 * each, signed and unsigned, against printf. */
static void test_digit_count_boundaries(void **state)
{
	struct ktel_textbuf b = {0};
	char want[64];

	(void)state;
	for (uint64_t p = 1, k = 0; k < 20; k++, p *= 10) {
		uint64_t v[] = {p - 1, p, p + 1, (uint64_t)1 << (k * 3 + 3),
				((uint64_t)1 << (k * 3 + 3)) - 1};

		for (size_t j = 0; j < sizeof(v) / sizeof(v[0]); j++) {
			ktel_textbuf_put_u64(&b, v[j]);
			snprintf(want, sizeof(want), "%" PRIu64, v[j]);
			expect_text(&b, want);
			ktel_textbuf_put_i64(&b, -(int64_t)(v[j] >> 1));
			snprintf(want, sizeof(want), "%" PRId64, -(int64_t)(v[j] >> 1));
			expect_text(&b, want);
		}
	}
	free(b.p);
}

static void test_width_pads_with_zeros(void **state)
{
	struct ktel_textbuf b = {0};

	(void)state;
	ktel_textbuf_put_u64_width(&b, 123, 9);
	expect_text(&b, "000000123");
	ktel_textbuf_put_u64_width(&b, 0, 9);
	expect_text(&b, "000000000");
	ktel_textbuf_put_u64_width(&b, 999999999, 9);
	expect_text(&b, "999999999");
	/* Wider numbers are not cut; a width over 20 is 20. */
	ktel_textbuf_put_u64_width(&b, 1234567890123u, 9);
	expect_text(&b, "1234567890123");
	ktel_textbuf_put_u64_width(&b, 7, 40);
	expect_text(&b, "00000000000000000007");
	free(b.p);
}

static void test_failed_buffer_stays_failed(void **state)
{
	struct ktel_textbuf b = {0};

	(void)state;
	ktel_textbuf_puts(&b, "x");
	b.fail = true;
	ktel_textbuf_put_u64(&b, 42);
	ktel_textbuf_puts(&b, "more");
	assert_int_equal(b.len, 1);
	free(b.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_integers_match_printf),
		cmocka_unit_test(test_digit_count_boundaries),
		cmocka_unit_test(test_width_pads_with_zeros),
		cmocka_unit_test(test_failed_buffer_stays_failed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
