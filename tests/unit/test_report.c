// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `ktelemetryctl report` without a browser (tools/ktelemetryctl/report.c):
 * - quantiles from buckets, against hand-computed values of Prometheus'
 *   histogram_quantile() method;
 * - HTML escaping of names, keys and bytes that are no UTF-8;
 * - --since/--until times;
 * - hostile lines skipped and counted by reason, never kept; duplicates
 *   ignored; the page holds every kept count and no markup or URL from
 *   the input;
 * - few wide windows one column each, many narrow ones summed into
 *   columns, with the page saying which;
 * - files: over-long lines, a last line without newline, gzip, rotated
 *   files read once.
 * The rendered picture is checked in a real browser by
 * tests/integration/test_report_browser.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "ktel_test.h"
#include "report.h"

#define INF INFINITY

/* ---- quantiles ------------------------------------------------------------------- */

static void test_quantile_interpolates_in_bucket(void **state)
{
	const double le[] = {1, 2, 4, 8, INF};
	const uint64_t c[] = {1, 1, 2, 4, 2};
	bool above;

	(void)state;
	/* Rank 5 of 10 falls in (4, 8], the 1st of its 4: 4 + 4 * 1/4. */
	assert_float_equal(ktel_report_quantile(le, c, 5, 0.5, &above), 5.0, 1e-9);
	assert_false(above);
	/* Rank 2 of 10: the end of (1, 2]. */
	assert_float_equal(ktel_report_quantile(le, c, 5, 0.2, NULL), 2.0, 1e-9);
	/* Rank 8: the end of (4, 8]. */
	assert_float_equal(ktel_report_quantile(le, c, 5, 0.8, &above), 8.0, 1e-9);
	assert_false(above);
	/* Rank 9 is in the +Inf bucket: its lower bound, marked above. */
	assert_float_equal(ktel_report_quantile(le, c, 5, 0.9, &above), 8.0, 1e-9);
	assert_true(above);
	/* q = 0: the lower bound of the first bucket holding a count. */
	assert_float_equal(ktel_report_quantile(le, c, 5, 0, NULL), 0.0, 1e-9);
}

static void test_quantile_single_bucket(void **state)
{
	double le[32];
	uint64_t c[32] = {0};
	bool above;

	(void)state;
	for (int k = 0; k < 31; k++)
		le[k] = (double)(1u << k);
	le[31] = INF;
	c[9] = 10; /* (256, 512] */
	assert_float_equal(ktel_report_quantile(le, c, 32, 0.5, &above), 384.0, 1e-9);
	assert_false(above);
	assert_float_equal(ktel_report_quantile(le, c, 32, 0.9, NULL), 256 + 256 * 0.9, 1e-9);
	assert_float_equal(ktel_report_quantile(le, c, 32, 0.99, NULL), 256 + 256 * 0.99, 1e-9);
	assert_float_equal(ktel_report_quantile(le, c, 32, 1, NULL), 512.0, 1e-9);
	/* The first bucket is [0, 1]. */
	memset(c, 0, sizeof(c));
	c[0] = 4;
	assert_float_equal(ktel_report_quantile(le, c, 32, 0.5, NULL), 0.5, 1e-9);
	/* Empty buckets between counts are skipped over. */
	memset(c, 0, sizeof(c));
	c[2] = 1;
	c[20] = 1;
	assert_float_equal(ktel_report_quantile(le, c, 32, 0.5, NULL), 4.0, 1e-9);
	assert_float_equal(ktel_report_quantile(le, c, 32, 0.75, NULL), 524288 + 524288 * 0.5,
			   1e-6);
}

static void test_quantile_edges(void **state)
{
	const double le[] = {10, 20, 30, INF};
	const double neg[] = {-5, 0, 5, INF};
	const uint64_t none[] = {0, 0, 0, 0};
	const uint64_t all_inf[] = {0, 0, 0, 7};
	const uint64_t first[] = {2, 0, 0, 0};
	const uint64_t big[] = {UINT64_MAX, UINT64_MAX, 0, 0};
	bool above = true;

	(void)state;
	assert_true(isnan(ktel_report_quantile(le, none, 4, 0.5, &above)));
	assert_false(above);
	assert_true(isnan(ktel_report_quantile(le, first, 0, 0.5, NULL)));
	assert_true(isnan(ktel_report_quantile(le, first, 4, 1.5, NULL)));
	assert_true(isnan(ktel_report_quantile(le, first, 4, NAN, NULL)));
	assert_float_equal(ktel_report_quantile(le, all_inf, 4, 0.5, &above), 30.0, 1e-9);
	assert_true(above);
	/* Linear buckets from a bound <= 0: the first starts one width below. */
	assert_float_equal(ktel_report_quantile(neg, first, 4, 0.5, NULL), -7.5, 1e-9);
	/* Counts near the top of uint64 do not overflow the estimate. */
	assert_float_equal(ktel_report_quantile(le, big, 4, 0.5, NULL), 10.0, 1e-6);
}

/* ---- escaping ----------------------------------------------------------------------- */

static char *escaped(const char *s, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	assert_non_null(f);
	ktel_report_escape(f, s, len);
	fclose(f);
	return buf;
}

static void expect_escape(const char *in, size_t len, const char *want)
{
	char *got = escaped(in, len);

	assert_string_equal(got, want);
	free(got);
}

static void test_escape(void **state)
{
	(void)state;
	expect_escape("plain_name.sub-1", 16, "plain_name.sub-1");
	expect_escape("<script>alert('x')</script>", 27,
		      "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
	expect_escape("a&b\"c", 5, "a&amp;b&quot;c");
	/* Entities in the input are text, escaped again. */
	expect_escape("&lt;", 4, "&amp;lt;");
	/* Control characters, DEL and an embedded NUL. */
	expect_escape("a\x01"
		      "b\n\x7f"
		      "c\0d",
		      8, "a&#xfffd;b&#xfffd;&#xfffd;c&#xfffd;d");
	/* Valid UTF-8 stays; every byte of invalid UTF-8 is one U+FFFD. */
	expect_escape("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9,
		      "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	expect_escape("x\xff"
		      "y",
		      3, "x&#xfffd;y");
	expect_escape("\xe2\x82", 2, "&#xfffd;&#xfffd;");
	/* Overlong '<' and a UTF-16 surrogate are no UTF-8. */
	expect_escape("\xc0\xbc", 2, "&#xfffd;&#xfffd;");
	expect_escape("\xed\xa0\x80", 3, "&#xfffd;&#xfffd;&#xfffd;");
}

/* ---- times ----------------------------------------------------------------------------- */

static void test_parse_when(void **state)
{
	int64_t ms;
	bool rel;

	(void)state;
	assert_int_equal(ktel_report_parse_when("1796208285", &ms, &rel), 0);
	assert_true(ms == 1796208285000LL && !rel);
	assert_int_equal(ktel_report_parse_when("2026-12-02", &ms, &rel), 0);
	assert_true(ms == 1796169600000LL && !rel);
	assert_int_equal(ktel_report_parse_when("2026-12-02T10:44", &ms, &rel), 0);
	assert_true(ms == 1796208240000LL);
	assert_int_equal(ktel_report_parse_when("2026-12-02 10:44:45Z", &ms, &rel), 0);
	assert_true(ms == 1796208285000LL);
	assert_int_equal(ktel_report_parse_when("2026-12-02T10:44:45.640989132Z", &ms, &rel), 0);
	assert_true(ms == 1796208285640LL);
	assert_int_equal(ktel_report_parse_when("6h", &ms, &rel), 0);
	assert_true(ms == 6 * 3600000LL && rel);
	assert_int_equal(ktel_report_parse_when("90m", &ms, &rel), 0);
	assert_true(ms == 90 * 60000LL && rel);
	assert_int_equal(ktel_report_parse_when("", &ms, &rel), -EINVAL);
	assert_int_equal(ktel_report_parse_when("yesterday", &ms, &rel), -EINVAL);
	assert_int_equal(ktel_report_parse_when("2026-02-30", &ms, &rel), -EINVAL);
	assert_int_equal(ktel_report_parse_when("2026-12-02T25:00", &ms, &rel), -EINVAL);
	assert_int_equal(ktel_report_parse_when("2026-12-02T10:44:45.Z", &ms, &rel), -EINVAL);
	assert_int_equal(ktel_report_parse_when("1969-12-31", &ms, &rel), -EINVAL);
	assert_int_equal(ktel_report_parse_when("99999999999999999999", &ms, &rel), -EINVAL);
}

/* ---- records --------------------------------------------------------------------------- */

static const char le32[] =
	"[1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,"
	"524288,1048576,2097152,4194304,8388608,16777216,33554432,67108864,134217728,268435456,"
	"536870912,1073741824,\"+Inf\"]";

/* A histogram line of metric with count n in bucket k (32 log2 buckets),
 * window [start_s, start_s + len_s), dims as JSON, seq for its identity. */
static char *hist_line(const char *metric, const char *dims, int64_t start_s, int64_t len_s,
		       unsigned k, uint64_t n, int seq)
{
	char counts[256] = "[", *line;
	size_t used = 1;

	for (unsigned b = 0; b < 32; b++)
		used += (size_t)snprintf(counts + used, sizeof(counts) - used, "%s%" PRIu64,
					 b ? "," : "", b == k ? n : 0);
	snprintf(counts + used, sizeof(counts) - used, "]");
	assert_true(asprintf(&line,
			     "{\"metric\":\"%s\",\"unit\":\"us\",\"type\":\"histogram\","
			     "\"start_s\":%" PRId64 ",\"end_s\":%" PRId64
			     ",\"boot_id\":\"b\",\"map_id\":1,\"seq\":%d,\"dims\":%s,"
			     "\"histogram\":{\"scheme\":\"log2\",\"counts\":%s,\"le\":%s,"
			     "\"count\":%" PRIu64 "}}",
			     metric, start_s, start_s + len_s, seq, dims, counts, le32, n) > 0);
	return line;
}

static void add(struct ktel_report *r, const char *line)
{
	ktel_report__add_line(r, line, strlen(line), "t.jsonl", 1);
}

static void add_hist(struct ktel_report *r, const char *metric, const char *dims, int64_t start_s,
		     int64_t len_s, unsigned k, uint64_t n, int seq)
{
	char *line = hist_line(metric, dims, start_s, len_s, k, n, seq);

	add(r, line);
	free(line);
}

/* The page of r as a string. */
static char *page(struct ktel_report *r)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	assert_non_null(f);
	assert_int_equal(ktel_report__write_html(r, f), 0);
	fclose(f);
	return buf;
}

static size_t occurrences(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_hostile_lines_skipped_and_counted(void **state)
{
	static const struct {
		const char *line;
		enum ktel_report_skip why;
	} bad[] = {
		{"not json", KTEL_REPORT_SKIP_NOT_JSON},
		{"[1,2,3]", KTEL_REPORT_SKIP_NOT_JSON},
		{"{\"metric\":\"a\",\"metric\":\"b\"}", KTEL_REPORT_SKIP_NOT_JSON},
		{"{\"type\":\"histogram\"}", KTEL_REPORT_SKIP_NO_METRIC},
		{"{\"metric\":\"\",\"type\":\"histogram\"}", KTEL_REPORT_SKIP_NO_METRIC},
		{"{\"metric\":7,\"type\":\"histogram\"}", KTEL_REPORT_SKIP_NO_METRIC},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"histogram\":{\"counts\":[1],\"le\":["
		 "\"+Inf\"]}}",
		 KTEL_REPORT_SKIP_BAD_TIME},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":20,\"end_s\":10,"
		 "\"histogram\":{\"counts\":[1],\"le\":[\"+Inf\"]}}",
		 KTEL_REPORT_SKIP_BAD_TIME},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":-5,\"end_s\":10,"
		 "\"histogram\":{\"counts\":[1],\"le\":[\"+Inf\"]}}",
		 KTEL_REPORT_SKIP_BAD_TIME},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start\":\"2026-13-01T00:00:00Z\","
		 "\"end_s\":10,\"histogram\":{\"counts\":[1],\"le\":[\"+Inf\"]}}",
		 KTEL_REPORT_SKIP_BAD_TIME},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2,"
		 "\"histogram\":{\"counts\":[1,2],\"le\":[\"+Inf\"]}}",
		 KTEL_REPORT_SKIP_BAD_HISTOGRAM},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2,"
		 "\"histogram\":{\"counts\":[-1,2],\"le\":[1,\"+Inf\"]}}",
		 KTEL_REPORT_SKIP_BAD_HISTOGRAM},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2,"
		 "\"histogram\":{\"counts\":[1,2],\"le\":[4,2]}}",
		 KTEL_REPORT_SKIP_BAD_HISTOGRAM},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2,"
		 "\"histogram\":{\"counts\":[1,2],\"le\":[\"+Inf\",2]}}",
		 KTEL_REPORT_SKIP_BAD_HISTOGRAM},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2,"
		 "\"histogram\":{\"counts\":[1,2],\"le\":[1,\"+Inf\"],\"count\":4}}",
		 KTEL_REPORT_SKIP_BAD_HISTOGRAM},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2,"
		 "\"histogram\":{\"counts\":[1.5],\"le\":[\"+Inf\"]}}",
		 KTEL_REPORT_SKIP_BAD_HISTOGRAM},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2,"
		 "\"histogram\":{\"counts\":[9223372036854775807,9223372036854775807,2],"
		 "\"le\":[1,2,\"+Inf\"],\"count\":1}}",
		 KTEL_REPORT_SKIP_BAD_HISTOGRAM},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2}",
		 KTEL_REPORT_SKIP_BAD_HISTOGRAM},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2,\"dims\":{"
		 "\"a\":{\"b\":1}},\"histogram\":{\"counts\":[1],\"le\":[\"+Inf\"]}}",
		 KTEL_REPORT_SKIP_BAD_DIMS},
		{"{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,\"end_s\":2,\"dims\":[1],"
		 "\"histogram\":{\"counts\":[1],\"le\":[\"+Inf\"]}}",
		 KTEL_REPORT_SKIP_BAD_DIMS},
	};
	struct ktel_report *r = ktel_report__new(NULL);
	const struct ktel_report_stats *st;
	uint64_t want[KTEL_REPORT_SKIP_N] = {0};
	char *line, *html,
		big[4096] = "{\"metric\":\"m\",\"type\":\"histogram\",\"start_s\":1,"
			    "\"end_s\":2,\"dims\":{";

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		add(r, bad[i].line);
		want[bad[i].why]++;
	}
	/* 17 dims are more than a record has. */
	for (int d = 0; d < 17; d++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "%s\"d%d\":%d", d ? "," : "",
			 d, d);
	strcat(big, "},\"histogram\":{\"counts\":[1],\"le\":[\"+Inf\"]}}");
	add(r, big);
	want[KTEL_REPORT_SKIP_BAD_DIMS]++;
	/* A metric whose buckets change: the first record's stay. */
	add_hist(r, "lat", "{}", 1796208000, 10, 3, 5, 1);
	add(r, "{\"metric\":\"lat\",\"unit\":\"us\",\"type\":\"histogram\",\"start_s\":1796208010,"
	       "\"end_s\":1796208020,\"histogram\":{\"counts\":[1,1],\"le\":[1,\"+Inf\"]}}");
	want[KTEL_REPORT_SKIP_BUCKETS_CHANGED]++;
	/* Not histograms, and blank lines: neither skipped nor drawn. */
	add(r, "{\"metric\":\"c\",\"type\":\"counter\",\"value\":3,\"total\":9}");
	add(r, "{\"metric\":\"e\",\"type\":\"event\",\"fields\":{}}");
	add(r, "");
	add(r, "  \r");
	/* The same window twice (the same boot, map, seq, dims). */
	line = hist_line("lat", "{}", 1796208000, 10, 3, 5, 1);
	add(r, line);
	free(line);
	st = ktel_report__stats(r);
	for (int k = 0; k < KTEL_REPORT_SKIP_N; k++)
		if (st->skip[k] != want[k])
			fail_msg("reason %s: %" PRIu64 " skipped, want %" PRIu64,
				 ktel_report_skip_id(k), st->skip[k], want[k]);
	assert_int_equal(st->first[KTEL_REPORT_SKIP_NOT_JSON][0] != 0, 1);
	assert_string_equal(st->first[KTEL_REPORT_SKIP_NOT_JSON], "t.jsonl:1");
	assert_int_equal(st->other, 2);
	assert_int_equal(st->duplicates, 1);
	assert_int_equal(st->lines, sizeof(bad) / sizeof(bad[0]) + 6);
	html = page(r);
	assert_int_equal(st->windows, 1);
	assert_int_equal(occurrences(html, "class=\"cell\""), 1);
	assert_non_null(strstr(html, "data-count=\"5\""));
	assert_int_equal(occurrences(html, "class=\"heatmap\""), 1);
	free(html);
	ktel_report__free(r);
}

static void test_names_escaped_everywhere(void **state)
{
	struct ktel_report *r = ktel_report__new(NULL);
	char *html;

	(void)state;
	add_hist(r, "<script>alert(1)</script>",
		 "{\"dev\\\"><img src=x>\":\"</svg><a href='http://x'>\"}", 1796208000, 10, 4, 3,
		 1);
	add_hist(r, "m&amp;\\u0001\\u2028", "{\"k\":\"\\u0007v\"}", 1796208000, 10, 4, 3, 1);
	html = page(r);
	assert_null(strstr(html, "<script"));
	assert_null(strstr(html, "<img"));
	/* The only links are the page's own anchors. */
	assert_int_equal(occurrences(html, "<a "), occurrences(html, "<a href=\"#m"));
	assert_null(strstr(html, "href='"));
	assert_null(strstr(html, "\x01"));
	assert_non_null(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_non_null(
		strstr(html, "dev&quot;&gt;&lt;img src=x&gt;=&lt;/svg&gt;&lt;a href=&#39;"));
	assert_non_null(strstr(html, "m&amp;amp;&#xfffd;\xe2\x80\xa8"));
	assert_non_null(strstr(html, "k=&#xfffd;v"));
	/* The page allows no script and no fetch. */
	assert_non_null(strstr(html, "content=\"default-src 'none'; style-src 'unsafe-inline'\""));
	free(html);
	ktel_report__free(r);
}

/* The data-binned note of the n-th (0-based) key section of html. */
static int binned_note(const char *html)
{
	const char *p = strstr(html, "data-binned=\"");

	assert_non_null(p);
	return p[strlen("data-binned=\"")] - '0';
}

static void test_daily_windows_one_column_each(void **state)
{
	struct ktel_report *r = ktel_report__new(NULL);
	char *html;

	(void)state;
	for (int d = 0; d < 7; d++) {
		add_hist(r, "daily", "{\"uid\":1000}", 1796169600 + d * 86400LL, 86400, 8 + d % 3,
			 (uint64_t)d + 1, d);
	}
	html = page(r);
	assert_int_equal(binned_note(html), 0);
	assert_int_equal(occurrences(html, "class=\"cell\""), 7);
	assert_int_equal(occurrences(html, "class=\"win\""), 7);
	for (int d = 0; d < 7; d++) {
		char want[64];

		snprintf(want, sizeof(want), "data-bucket=\"%d\" data-count=\"%d\"", 8 + d % 3,
			 d + 1);
		assert_non_null(strstr(html, want));
	}
	assert_non_null(strstr(html, "uid=1000"));
	assert_non_null(strstr(html, "7 windows, one column each"));
	/* Nothing to fetch: no URL at all. */
	assert_null(strstr(html, "://"));
	assert_null(strstr(html, "url("));
	assert_int_equal(ktel_report__stats(r)->windows, 7);
	free(html);
	ktel_report__free(r);
}

/* The data-count values of html's cells, summed. */
static uint64_t cells_sum(const char *html, size_t *ret_cells)
{
	uint64_t sum = 0;
	size_t n = 0;

	for (const char *p = html; (p = strstr(p, "class=\"cell\"")); p++) {
		const char *c = strstr(p, "data-count=\"");

		assert_non_null(c);
		sum += strtoull(c + strlen("data-count=\""), NULL, 10);
		n++;
	}
	*ret_cells = n;
	return sum;
}

static void test_many_windows_summed_into_columns(void **state)
{
	struct ktel_report *r = ktel_report__new(NULL);
	uint64_t sum = 0;
	size_t cells;
	char *html;

	(void)state;
	/* A day of 10 s pulls: 8640 windows, more than the plot's pixels. */
	for (int i = 0; i < 8640; i++) {
		add_hist(r, "server", "{\"cpu\":0}", 1796169600 + i * 10LL, 10, 5 + i % 2,
			 (uint64_t)(i % 7) + 1, i);
		sum += (uint64_t)(i % 7) + 1;
	}
	html = page(r);
	assert_int_equal(binned_note(html), 1);
	assert_non_null(strstr(html, "8640 windows drawn in 360 columns of 4 min each"));
	assert_int_equal(occurrences(html, "class=\"win\""), 360);
	/* Every count is in some column, once. */
	assert_int_equal(cells_sum(html, &cells), sum);
	assert_int_equal(cells, 720);
	free(html);
	ktel_report__free(r);
}

static void test_filters(void **state)
{
	static const char *const pats[] = {"block_*"};
	struct ktel_report_filter f = {.metrics = pats, .n_metrics = 1};
	struct ktel_report *r;
	size_t cells;
	char *html;

	(void)state;
	/* --metric, and --since 1h: the last hour before the newest window. */
	f.since_set = f.since_rel = true;
	f.since_ms = 3600000;
	r = ktel_report__new(&f);
	for (int i = 0; i < 24; i++) {
		add_hist(r, "block_io", "{}", 1796169600 + i * 600LL, 600, 3, 1, i);
		add_hist(r, "other", "{}", 1796169600 + i * 600LL, 600, 3, 1, i);
	}
	html = page(r);
	/* Windows ending after newest - 1h: the last 6. */
	assert_int_equal(cells_sum(html, &cells), 6);
	assert_int_equal(ktel_report__stats(r)->filtered, 24 + 18);
	assert_null(strstr(html, "data-metric=\"other\""));
	free(html);
	ktel_report__free(r);

	/* --until as an absolute time, at parse. */
	f = (struct ktel_report_filter){.until_set = true, .until_ms = 1796169600000LL + 1200000};
	r = ktel_report__new(&f);
	for (int i = 0; i < 24; i++)
		add_hist(r, "block_io", "{}", 1796169600 + i * 600LL, 600, 3, 1, i);
	html = page(r);
	assert_int_equal(cells_sum(html, &cells), 2);
	free(html);
	ktel_report__free(r);
}

static void test_keys_share_the_colour_scale(void **state)
{
	struct ktel_report *r = ktel_report__new(NULL);
	const char *legend, *p;
	char *html;
	unsigned levels = 0;

	(void)state;
	add_hist(r, "lat", "{\"dev\":\"a\"}", 1796169600, 10, 3, 1000, 1);
	add_hist(r, "lat", "{\"dev\":\"b\"}", 1796169600, 10, 3, 1, 2);
	html = page(r);
	legend = strstr(html, "class=\"legend\"");
	assert_non_null(legend);
	for (p = legend;
	     (p = strstr(p, "class=\"swatch\" data-level=\"")) && p < strstr(legend, "</svg>"); p++)
		levels++;
	/* no window, 0, and 8 steps up to 1000. */
	assert_int_equal(levels, 10);
	assert_non_null(strstr(html, "data-min=\"422\" data-max=\"1000\""));
	assert_non_null(strstr(html, "data-count=\"1000\" data-level=\"7\""));
	assert_non_null(strstr(html, "data-count=\"1\" data-level=\"0\""));
	/* The key with most counts comes first. */
	assert_true(strstr(html, "data-key=\"dev=a\"") < strstr(html, "data-key=\"dev=b\""));
	free(html);
	ktel_report__free(r);
}

/* ---- files -------------------------------------------------------------------------------- */

static void test_files(void **state)
{
	char dir[] = "/tmp/ktel-report-XXXXXX", path[128], gz_path[160], *line;
	struct ktel_report *r;
	struct ktel_err err;
	size_t cells;
	char *html, *big;
	FILE *f;
	gzFile gz;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/k.jsonl", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	line = hist_line("lat", "{}", 1796169600, 10, 3, 2, 1);
	fprintf(f, "%s\n", line);
	free(line);
	/* A 2 MiB line, then a good one, then one without its newline. */
	big = malloc(2u << 20);
	memset(big, 'x', 2u << 20);
	fwrite(big, 1, 2u << 20, f);
	free(big);
	fputc('\n', f);
	line = hist_line("lat", "{}", 1796169610, 10, 3, 3, 2);
	fprintf(f, "%s\n", line);
	free(line);
	line = hist_line("lat", "{}", 1796169620, 10, 3, 4, 3);
	fputs(line, f);
	free(line);
	fclose(f);
	/* Its rotated, compressed predecessor. */
	snprintf(gz_path, sizeof(gz_path), "%s.1.gz", path);
	gz = gzopen(gz_path, "wb");
	assert_non_null(gz);
	line = hist_line("lat", "{}", 1796169590, 10, 3, 1, 0);
	gzprintf(gz, "%s\n", line);
	free(line);
	gzclose(gz);

	r = ktel_report__new(NULL);
	assert_int_equal(ktel_report__read_file(r, path, &err), 0);
	assert_int_equal(ktel_report__read_file(r, gz_path, &err), 0);
	/* The same file again (another name for it) is not read twice. */
	assert_int_equal(ktel_report__read_file(r, path, &err), 0);
	assert_int_equal(ktel_report__read_file(r, dir, &err), -EISDIR);
	assert_int_equal(ktel_report__read_file(r, "/nonexistent/x", &err), -ENOENT);
	assert_non_null(strstr(err.msg, "/nonexistent/x"));
	assert_int_equal(ktel_report__stats(r)->skip[KTEL_REPORT_SKIP_TOO_LONG], 1);
	snprintf(gz_path, sizeof(gz_path), "%s:2", path);
	assert_string_equal(ktel_report__stats(r)->first[KTEL_REPORT_SKIP_TOO_LONG], gz_path);
	html = page(r);
	assert_int_equal(cells_sum(html, &cells), 1 + 2 + 3 + 4);
	assert_int_equal(cells, 4);
	free(html);
	ktel_report__free(r);
	assert_int_equal(ktel_test_rm_rf(dir), 0);
}

static void test_empty_report(void **state)
{
	struct ktel_report *r = ktel_report__new(NULL);
	char *html;

	(void)state;
	html = page(r);
	assert_non_null(strstr(html, "No histogram window to draw."));
	assert_non_null(strstr(html, "</html>"));
	free(html);
	ktel_report__free(r);
	ktel_report__free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantile_interpolates_in_bucket),
		cmocka_unit_test(test_quantile_single_bucket),
		cmocka_unit_test(test_quantile_edges),
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_parse_when),
		cmocka_unit_test(test_hostile_lines_skipped_and_counted),
		cmocka_unit_test(test_names_escaped_everywhere),
		cmocka_unit_test(test_daily_windows_one_column_each),
		cmocka_unit_test(test_many_windows_summed_into_columns),
		cmocka_unit_test(test_filters),
		cmocka_unit_test(test_keys_share_the_colour_scale),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_empty_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
