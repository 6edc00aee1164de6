// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The live view of ktelemetryctl top (ktel_ctl_render_top) on made-up
 * `show` answers:
 * - a screen holds at most the terminal's rows, no line wider than its
 *   columns, at 80x24, 200x50 and a tiny 30x4, however many keys and however
 *   long their names;
 * - the keys with events in the last window come first, most events first,
 *   then the others by their totals; what does not fit is counted on a
 *   "+N more" line;
 * - the header says how long ago the daemon pulled and how often it pulls;
 * - a control byte in a name from the daemon reaches the terminal as '?'.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ctl_render.h"

/* A log2 histogram record of metric with dims {"cpu": key}: count events in
 * bucket 4, and the 32 bounds. */
static json_t *hist_record(const char *key, long long count)
{
	json_t *counts = json_array(), *le = json_array();

	for (int k = 0; k < 32; k++) {
		json_array_append_new(counts, json_integer(k == 4 ? count : 0));
		json_array_append_new(le, json_integer(1LL << k));
	}
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:I, s:s, s:o, s:o}}", "metric", "m", "type",
			 "histogram", "dims", "cpu", key, "histogram", "count", (json_int_t)count,
			 "scheme", "log2", "counts", counts, "le", le);
}

/* A show answer of metric with n keys; key i has i events in the last
 * window when i is odd (none when even) and 1000 + i in all. */
static json_t *show_answer(const char *metric, int n, const char *pulled)
{
	json_t *totals = json_array(), *window = json_array();
	char key[64];

	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "key-%03d-with-a-rather-long-name-to-cut", i);
		json_array_append_new(totals, hist_record(key, 1000 + i));
		if (i % 2)
			json_array_append_new(window, hist_record(key, i));
	}
	return json_pack("{s:b, s:s, s:s, s:b, s:{s:s}, s:o, s:o}", "ok", true, "metric", metric,
			 "unit", "us", "enabled", true, "last_pull", "time", pulled, "totals",
			 totals, "window", window);
}

/* Render at rows x cols; the screen as malloc'd text. */
static char *render(const json_t *shows, int rows, int cols)
{
	struct ktel_ctl_top t = {.shows = shows,
				 .interval_min_ms = 10000,
				 .interval_max_ms = 10000,
				 .now = 1700000003, /* 2023-11-14T22:13:23Z */
				 .rows = rows,
				 .cols = cols};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	ktel_ctl_render_top(f, &t);
	fclose(f);
	return buf;
}

/* Every line at most cols characters (UTF-8), at most rows lines, no
 * newline after the last; the number of lines. */
static int check_fits(const char *s, int rows, int cols)
{
	int lines = 1, col = 0;

	for (const char *p = s; *p; p++) {
		if (*p == '\n') {
			assert_true(p[1] != '\0');
			lines++;
			col = 0;
			continue;
		}
		assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
		if (((unsigned char)*p & 0xc0) != 0x80)
			col++;
		if (col > cols)
			fail_msg("a line of more than %d columns in:\n%s", cols, s);
	}
	if (lines > rows)
		fail_msg("%d lines on a screen of %d:\n%s", lines, rows, s);
	return lines;
}

static json_t *many_keys(void)
{
	return json_pack("[o, o]", show_answer("runq_latency", 120, "2023-11-14T22:13:20Z"),
			 show_answer("block_io_latency", 40, "2023-11-14T22:13:20Z"));
}

static void test_fits_every_size(void **state)
{
	static const int sizes[][2] = {{24, 80}, {50, 200}, {4, 30}, {1, 10}};
	json_t *shows = many_keys();

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *s = render(shows, sizes[i][0], sizes[i][1]);

		check_fits(s, sizes[i][0], sizes[i][1]);
		free(s);
	}
	json_decref(shows);
}

static void test_header_and_order(void **state)
{
	json_t *shows = many_keys();
	char *s = render(shows, 24, 80), *l2, *l3, *l4;

	assert_int_equal(check_fits(s, 24, 80), 24);
	assert_non_null(strstr(s, "last pull 3s ago, pulls every 10s"));
	/* The busiest keys of the last window first: runq_latency's key 119
	 * (119 events), then 117, then block_io_latency's 39 is far below. */
	l2 = strchr(s, '\n') + 1;
	assert_true(strncmp(l2, "METRIC[KEY]", 11) == 0);
	l3 = strchr(l2, '\n') + 1;
	assert_true(strncmp(l3, "runq_latency[", 13) == 0);
	assert_non_null(strstr(l3, "119"));
	l4 = strchr(l3, '\n') + 1;
	assert_true(strncmp(l4, "runq_latency[", 13) == 0);
	assert_non_null(strstr(l4, "117"));
	/* 160 keys on 24 rows: the rest counted, on the last line. */
	assert_non_null(strstr(s, "\n+139 more"));
	free(s);
	json_decref(shows);
}

static void test_wide_screen_has_bars(void **state)
{
	json_t *shows = json_pack("[o]", show_answer("runq_latency", 5, "2023-11-14T22:13:20Z"));
	char *s = render(shows, 50, 200);

	check_fits(s, 50, 200);
	/* Keys 1 and 3 had events: the busiest one's bars follow the table. */
	assert_non_null(strstr(s, "the busiest key's last window (us): runq_latency[cpu=key-003"));
	assert_non_null(strstr(s, "(8, 16]"));
	assert_null(strstr(s, "more ("));
	free(s);
	json_decref(shows);
}

static void test_not_pulled_and_control_bytes(void **state)
{
	json_t *shows = json_pack("[{s:b, s:s, s:s, s:b, s:n, s:[], s:[]}, {s:b, s:s}]", "ok", true,
				  "metric", "evil\033[2Jname\n", "unit", "us", "enabled", true,
				  "last_pull", "totals", "window", "ok", false, "error",
				  "metric x: not loaded");
	char *s = render(shows, 24, 80);

	check_fits(s, 24, 80);
	assert_non_null(strstr(s, "not pulled yet"));
	assert_non_null(strstr(s, "evil?[2Jname?"));
	assert_non_null(strstr(s, "metric x: not loaded"));
	free(s);
	json_decref(shows);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits_every_size),
		cmocka_unit_test(test_header_and_order),
		cmocka_unit_test(test_wide_screen_has_bars),
		cmocka_unit_test(test_not_pulled_and_control_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
