// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* StatsD line formatter and packer. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ktel_test.h"
#include "statsd/statsd_line.h"
#include "units.h"

#define MAX_UNITS 64

struct units {
	size_t n;
	char *u[MAX_UNITS];
};

static int collect(void *ctx, const char *unit, size_t len)
{
	struct units *us = ctx;

	assert_true(us->n < MAX_UNITS);
	us->u[us->n++] = strndup(unit, len);
	return 0;
}

static void units_free(struct units *us)
{
	for (size_t i = 0; i < us->n; i++)
		free(us->u[i]);
	us->n = 0;
}

static void expect_units(const struct ktel_statsd_style *st, const struct ktel_record *r,
			 const char *const *want, size_t n)
{
	struct units us = {0};

	assert_int_equal(ktel_statsd__format(st, r, collect, &us), 0);
	assert_int_equal(us.n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(us.u[i], want[i]);
	units_free(&us);
}

static struct ktel_record reclaim_record(void)
{
	struct ktel_record r = {
		.type = KTEL_RECORD_HISTOGRAM,
		.metric = "direct_reclaim_latency",
		.n_dims = 1,
		.dims = {{"process_state", 2, "STATE_FOREGROUND", false}},
	};

	r.hist.delta.scheme = KTEL_HIST_LOG2;
	r.hist.delta.n_buckets = 32;
	r.hist.delta.counts[0] = 2;
	r.hist.delta.counts[10] = 5;
	r.hist.delta.counts[31] = 1;
	r.hist.delta.has_sum = true;
	r.hist.delta.sum = 9999;
	return r;
}

/* Format r into us (emptied first); returns the number of units. */
static size_t grab(const struct ktel_statsd_style *st, const struct ktel_record *r,
		   struct units *us)
{
	us->n = 0;
	assert_int_equal(ktel_statsd__format(st, r, collect, us), 0);
	return us->n;
}

/*
 * Bucket lines are cumulative, as `le` promises: from the first non-empty
 * bucket on, each counts the values <= its bound; +Inf is the count.
 */
static void test_histogram_dogstatsd(void **state)
{
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOGSTATSD};
	struct ktel_record r = reclaim_record();
	struct units us = {0};
	char want[128];

	/* 32 buckets from bucket 0, then count and sum. */
	assert_int_equal(grab(&st, &r, &us), 34);
	assert_string_equal(us.u[0], "ktel.direct_reclaim_latency.bucket:2|c|#le:1,process_state:"
				     "STATE_FOREGROUND");
	assert_string_equal(us.u[9], "ktel.direct_reclaim_latency.bucket:2|c|#le:512,process_state:"
				     "STATE_FOREGROUND");
	assert_string_equal(us.u[10], "ktel.direct_reclaim_latency.bucket:7|c|#le:1024,"
				      "process_state:STATE_FOREGROUND");
	assert_string_equal(us.u[30], "ktel.direct_reclaim_latency.bucket:7|c|#le:1073741824,"
				      "process_state:STATE_FOREGROUND");
	assert_string_equal(us.u[31], "ktel.direct_reclaim_latency.bucket:8|c|#le:+Inf,"
				      "process_state:STATE_FOREGROUND");
	assert_string_equal(us.u[32], "ktel.direct_reclaim_latency.count:8|c|#process_state:"
				      "STATE_FOREGROUND");
	assert_string_equal(us.u[33], "ktel.direct_reclaim_latency.sum:9999|c|#process_state:"
				      "STATE_FOREGROUND");
	/* Cumulative: never decreasing, and the +Inf bucket equals the count. */
	for (size_t k = 1; k < 32; k++)
		assert_true(strtoull(strchr(us.u[k], ':') + 1, NULL, 10) >=
			    strtoull(strchr(us.u[k - 1], ':') + 1, NULL, 10));
	snprintf(want, sizeof(want), "%s", strchr(us.u[31], ':'));
	*strchr(want, '|') = 0;
	assert_non_null(strstr(us.u[32], want));
	units_free(&us);
}

/* Dotted: dim names and values as segments, then the part, then the bound. */
static void test_histogram_dotted(void **state)
{
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOTTED};
	struct ktel_record r = reclaim_record();
	struct units us = {0};

	assert_int_equal(grab(&st, &r, &us), 34);
	assert_string_equal(us.u[0], "ktel.direct_reclaim_latency.process_state.STATE_FOREGROUND."
				     "bucket.le_1:2|c");
	assert_string_equal(us.u[10], "ktel.direct_reclaim_latency.process_state.STATE_FOREGROUND."
				      "bucket.le_1024:7|c");
	assert_string_equal(us.u[31], "ktel.direct_reclaim_latency.process_state.STATE_FOREGROUND."
				      "bucket.le_Inf:8|c");
	assert_string_equal(us.u[32], "ktel.direct_reclaim_latency.process_state.STATE_FOREGROUND."
				      "count:8|c");
	assert_string_equal(us.u[33], "ktel.direct_reclaim_latency.process_state.STATE_FOREGROUND."
				      "sum:9999|c");
	units_free(&us);
}

/*
 * Units: a time unit is named _seconds and bounds are in seconds, plain
 * decimals (never "1.6e-05"); dotted bounds have '_' for '.'; the sum stays
 * an integer in the record's unit and its part says which ("sum_us"),
 * as Netdata keeps only the integer part of a counter; a name that already
 * ends with the suffix does not get it twice.
 */
static void test_histogram_units(void **state)
{
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOGSTATSD};
	struct ktel_record r = reclaim_record();
	struct units us = {0};

	r.metric = "runq_latency";
	r.unit = "us";
	r.n_dims = 0;
	assert_int_equal(grab(&st, &r, &us), 34);
	assert_string_equal(us.u[0], "ktel.runq_latency_seconds.bucket:2|c|#le:0.000001");
	assert_string_equal(us.u[4], "ktel.runq_latency_seconds.bucket:2|c|#le:0.000016");
	assert_string_equal(us.u[10], "ktel.runq_latency_seconds.bucket:7|c|#le:0.001024");
	assert_string_equal(us.u[31], "ktel.runq_latency_seconds.bucket:8|c|#le:+Inf");
	assert_string_equal(us.u[32], "ktel.runq_latency_seconds.count:8|c");
	assert_string_equal(us.u[33], "ktel.runq_latency_seconds.sum_us:9999|c");
	units_free(&us);
	st.tags = KTEL_STATSD_TAGS_DOTTED;
	assert_int_equal(grab(&st, &r, &us), 34);
	assert_string_equal(us.u[4], "ktel.runq_latency_seconds.bucket.le_0_000016:2|c");
	assert_string_equal(us.u[30], "ktel.runq_latency_seconds.bucket.le_1073_741824:7|c");
	assert_string_equal(us.u[33], "ktel.runq_latency_seconds.sum_us:9999|c");
	units_free(&us);
	r.metric = "alloc_size_bytes";
	r.unit = "bytes";
	assert_int_equal(grab(&st, &r, &us), 34);
	assert_string_equal(us.u[32], "ktel.alloc_size_bytes.count:8|c");
	assert_string_equal(us.u[33], "ktel.alloc_size_bytes.sum:9999|c");
	units_free(&us);
}

/* The default prefix and self-telemetry: ktel_x under "ktel." is ktel.x. */
static void test_prefix_not_repeated(void **state)
{
	static const char *const want_dot[] = {"ktel.pull_duration_us:250|c"};
	static const char *const want_other[] = {"acme.ktel_pull_duration_us:250|c"};
	static const char *const want_only[] = {"ktel.ktel_:3|c"};
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOTTED};
	struct ktel_record r = {.type = KTEL_RECORD_COUNTER,
				.metric = "ktel_pull_duration",
				.unit = "us"};

	r.counter.delta = 250;
	expect_units(&st, &r, want_dot, 1);
	st.prefix = "acme.";
	expect_units(&st, &r, want_other, 1);
	st.prefix = "ktel.";
	r = (struct ktel_record){.type = KTEL_RECORD_COUNTER, .metric = "ktel_"};
	r.counter.delta = 3;
	expect_units(&st, &r, want_only, 1);
}

/* No dims: no tag section on count lines; no sum line without a sum. */
static void test_histogram_no_dims_other_schemes(void **state)
{
	static const char *const want_linear[] = {
		"p.compaction_duration.bucket:3|c|#le:-1",
		"p.compaction_duration.bucket:3|c|#le:4",
		"p.compaction_duration.bucket:4|c|#le:+Inf",
		"p.compaction_duration.count:4|c",
	};
	struct units us = {0};
	struct ktel_statsd_style st = {"p.", KTEL_STATSD_TAGS_DOGSTATSD};
	struct ktel_record r = {.type = KTEL_RECORD_HISTOGRAM, .metric = "compaction_duration"};

	r.hist.delta.scheme = KTEL_HIST_LOG2_FLOOR;
	r.hist.delta.n_buckets = 32;
	r.hist.delta.counts[2] = 4; /* [4, 8): le 7 */
	assert_int_equal(grab(&st, &r, &us), 31);
	assert_string_equal(us.u[0], "p.compaction_duration.bucket:4|c|#le:7");
	assert_string_equal(us.u[1], "p.compaction_duration.bucket:4|c|#le:15");
	assert_string_equal(us.u[29], "p.compaction_duration.bucket:4|c|#le:+Inf");
	assert_string_equal(us.u[30], "p.compaction_duration.count:4|c");
	units_free(&us);

	memset(&r.hist.delta, 0, sizeof(r.hist.delta));
	r.hist.delta.scheme = KTEL_HIST_LINEAR;
	r.hist.delta.linear_min = -10;
	r.hist.delta.linear_step = 5;
	r.hist.delta.n_buckets = 4;
	r.hist.delta.counts[1] = 3; /* [-5, 0): le -1 */
	r.hist.delta.counts[3] = 1;
	expect_units(&st, &r, want_linear, 4);
}

/* Labels when present, integers otherwise; protocol characters replaced. */
static void test_dims_and_sanitizing(void **state)
{
	static const char *const want_dog[] = {
		"ktel.cma_allocation_latency.bucket:1|c|#le:2,heap:linux_cma.x,node:-1",
		"ktel.cma_allocation_latency.bucket:1|c|#le:+Inf,heap:linux_cma.x,node:-1",
		"ktel.cma_allocation_latency.count:1|c|#heap:linux_cma.x,node:-1",
	};
	static const char *const want_dot[] = {
		"ktel.cma_allocation_latency.heap.linux_cma_x.node.-1.bucket.le_2:1|c",
		"ktel.cma_allocation_latency.heap.linux_cma_x.node.-1.bucket.le_Inf:1|c",
		"ktel.cma_allocation_latency.heap.linux_cma_x.node.-1.count:1|c",
	};
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOGSTATSD};
	struct ktel_record r = {
		.type = KTEL_RECORD_HISTOGRAM,
		.metric = "cma_allocation_latency",
		.n_dims = 2,
		.dims = {{"heap", 3, "linux,cma.x", true}, {"node", -1, NULL, false}},
	};

	r.hist.delta.scheme = KTEL_HIST_LOG2;
	r.hist.delta.n_buckets = 3;
	r.hist.delta.counts[1] = 1;
	expect_units(&st, &r, want_dog, 3);
	st.tags = KTEL_STATSD_TAGS_DOTTED;
	expect_units(&st, &r, want_dot, 3);
}

/* Is s all of [-]digits? */
static bool is_integer_text(const char *s, size_t len)
{
	size_t i = len && s[0] == '-';

	if (i == len)
		return false;
	for (; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/*
 * The value of a line ("name:V|t...") is an integer: what Netdata's counters
 * keep whole (it parses them with strtoll and logs "excess data" for a
 * fraction).
 */
static void assert_integer_value(const char *line)
{
	const char *v = strchr(line, ':'), *end;

	assert_non_null(v);
	v++;
	end = strchr(v, '|');
	assert_non_null(end);
	if (!is_integer_text(v, (size_t)(end - v)))
		fail_msg("value of \"%s\" is not an integer", line);
}

/*
 * The bound of a dotted bucket line, "....bucket.le_<bound>:", back as the
 * integer in the record's unit: the digits of "<int>_<frac>" with the
 * fraction padded to decimals places. Fails on anything but plain digits.
 */
static void bound_digits(const char *line, unsigned decimals, char *out, size_t size)
{
	const char *le = strstr(line, ".bucket.le_"), *end;
	char text[128], whole[128] = "", frac[128] = "";
	char *us;

	assert_non_null(le);
	le += strlen(".bucket.le_");
	end = strchr(le, ':');
	assert_non_null(end);
	snprintf(text, sizeof(text), "%.*s", (int)(end - le), le);
	us = strchr(text, '_');
	if (us) {
		*us = '\0';
		snprintf(frac, sizeof(frac), "%s", us + 1);
		/* No trailing zeros: one name per bound. */
		assert_true(frac[0] && frac[strlen(frac) - 1] != '0');
	}
	snprintf(whole, sizeof(whole), "%s", text);
	if (!is_integer_text(whole, strlen(whole)) ||
	    (frac[0] && !is_integer_text(frac, strlen(frac))) || strlen(frac) > decimals)
		fail_msg("bucket name \"%s\" is not a plain decimal", line);
	while (strlen(frac) < decimals)
		strcat(frac, "0");
	snprintf(out, size, "%s%s", whole, frac);
	/* Leading zeros of the integer go; "0" stays. */
	while (out[0] == '0' && out[1])
		memmove(out, out + 1, strlen(out));
}

/*
 * Every bucket name of every unit the sinks know (and of no unit), for all
 * 32 log2 buckets, is a plain decimal ("le_0_000016", never "le_1_6e-05")
 * whose digits are exactly the bound's, and every value, sum included, is
 * an integer.
 */
static void test_bucket_names_plain_every_unit(void **state)
{
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOTTED};
	size_t n_rules;
	const struct ktel_unit_rule *rules = ktel_unit_rules(&n_rules);

	assert_true(n_rules >= 6);
	for (size_t i = 0; i <= n_rules; i++) {
		const char *unit = i < n_rules ? rules[i].unit : "events";
		unsigned decimals = i < n_rules ? rules[i].decimals : 0;
		struct ktel_record r = {.type = KTEL_RECORD_HISTOGRAM, .metric = "m", .unit = unit};
		struct units us = {0};

		r.hist.delta.scheme = KTEL_HIST_LOG2;
		r.hist.delta.n_buckets = KTEL_HIST_BUCKETS;
		for (int k = 0; k < KTEL_HIST_BUCKETS; k++)
			r.hist.delta.counts[k] = 1;
		r.hist.delta.has_sum = true;
		r.hist.delta.sum = 123456789;
		assert_int_equal(ktel_statsd__format(&st, &r, collect, &us), 0);
		/* 32 buckets (the last is +Inf), count, sum */
		assert_int_equal(us.n, KTEL_HIST_BUCKETS + 2);
		for (size_t k = 0; k + 1 < KTEL_HIST_BUCKETS; k++) {
			char got[128], want[32];

			bound_digits(us.u[k], decimals, got, sizeof(got));
			snprintf(want, sizeof(want), "%llu", k ? 1ULL << k : 1ULL);
			if (strcmp(got, want) != 0)
				fail_msg("unit %s bucket %zu: \"%s\" reads as %s, the bound is %s",
					 unit, k, us.u[k], got, want);
		}
		assert_non_null(strstr(us.u[KTEL_HIST_BUCKETS - 1], ".bucket.le_Inf:"));
		for (size_t k = 0; k < us.n; k++)
			assert_integer_value(us.u[k]);
		/* The sum's name says its unit when it is not that of the bounds. */
		assert_non_null(strstr(us.u[us.n - 1], decimals ? ".sum_" : ".sum:"));
		assert_non_null(strstr(us.u[us.n - 1], ":123456789|c"));
		units_free(&us);

		/* A counter and a gauge in the unit: integers, named for it. */
		r = (struct ktel_record){.type = KTEL_RECORD_GAUGE, .metric = "g", .unit = unit};
		r.gauge = 1500;
		assert_int_equal(ktel_statsd__format(&st, &r, collect, &us), 0);
		assert_int_equal(us.n, 1);
		assert_integer_value(us.u[0]);
		assert_non_null(strstr(us.u[0], ":1500|g"));
		units_free(&us);
		r = (struct ktel_record){.type = KTEL_RECORD_COUNTER, .metric = "c", .unit = unit};
		r.counter.delta = 7;
		assert_int_equal(ktel_statsd__format(&st, &r, collect, &us), 0);
		assert_int_equal(us.n, 1);
		assert_non_null(strstr(us.u[0], ":7|c"));
		units_free(&us);
	}
}

/* Plain decimals: exact digits, no exponent, no trailing zeros. */
static void test_format_plain(void **state)
{
	static const struct {
		double v;
		unsigned decimals;
		const char *want;
	} cases[] = {
		{16, 6, "0.000016"},
		{1, 9, "0.000000001"},
		{1000, 6, "0.001"},
		{1073741824, 6, "1073.741824"},
		{4611686018427387904.0, 9, "4611686018.427387904"},
		{1024, 0, "1024"},
		{0, 6, "0"},
		{-5, 0, "-5"},
		{-1500, 3, "-1.5"},
		{1e300, 0, NULL},
		{INFINITY, 6, "+Inf"},
		{-INFINITY, 6, "-Inf"},
		{2.4, 3, "0.002"},
	};
	char buf[KTEL_PLAIN_DECIMAL_MAX], small[4];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ktel_format_plain(cases[i].v, cases[i].decimals, buf, sizeof(buf));
		if (cases[i].want)
			assert_string_equal(buf, cases[i].want);
		else
			assert_true(strlen(buf) == 301 && !strchr(buf, 'e') && !strchr(buf, '.'));
	}
	/* A short buffer gets the text cut, NUL-terminated. */
	ktel_format_plain(1073741824, 6, small, sizeof(small));
	assert_string_equal(small, "107");
}

static void test_counter_and_gauges(void **state)
{
	static const char *const want_c[] = {"ktel.oom_kills:3|c|#process_state:STATE_CACHED"};
	static const char *const want_g[] = {"ktel.free_pages:42|g"};
	static const char *const want_neg[] = {"ktel.temp_delta:0|g\nktel.temp_delta:-5|g"};
	static const char *const want_min[] = {
		"ktel.temp_delta:0|g\nktel.temp_delta:-9223372036854775808|g"};
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOGSTATSD};
	struct ktel_record r = {
		.type = KTEL_RECORD_COUNTER,
		.metric = "oom_kills",
		.n_dims = 1,
		.dims = {{"process_state", 900, "STATE_CACHED", false}},
	};

	r.counter.delta = 3;
	expect_units(&st, &r, want_c, 1);
	r = (struct ktel_record){.type = KTEL_RECORD_GAUGE, .metric = "free_pages", .gauge = 42};
	expect_units(&st, &r, want_g, 1);
	/* A negative level must be one unit: reset then relative change. */
	r.metric = "temp_delta";
	r.gauge = -5;
	expect_units(&st, &r, want_neg, 1);
	r.gauge = INT64_MIN;
	expect_units(&st, &r, want_min, 1);
}

/*
 * StatsD has no events: each stream event record is one count of its event
 * type, named after the metric, with the record's dims as tags (or dotted
 * segments); the event's other fields do not appear.
 */
static void test_events_counted(void **state)
{
	static const char *const want_dog[] = {
		"ktel.oom_events:1|c|#process_state:STATE_CACHED,cpu:3"};
	static const char *const want_dot[] = {
		"ktel.oom_events.process_state.STATE_CACHED.cpu.3:1|c"};
	static const char *const want_plain[] = {"ktel.runq_stall_events:1|c"};
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOGSTATSD};
	struct ktel_record r = {
		.type = KTEL_RECORD_EVENT,
		.metric = "oom_events",
		.n_dims = 2,
		.dims = {{"process_state", 8, "STATE_CACHED", false}, {"cpu", 3, NULL, false}},
	};

	r.event.n_fields = 2;
	r.event.fields = (const struct ktel_event_field[]){
		{.name = "pid", .type = KTEL_FIELD_VALUE_INT, .i = 4321, .size = 4},
		{.name = "comm", .type = KTEL_FIELD_VALUE_STRING, .s = "a:b|c"},
	};
	expect_units(&st, &r, want_dog, 1);
	st.tags = KTEL_STATSD_TAGS_DOTTED;
	expect_units(&st, &r, want_dot, 1);
	r = (struct ktel_record){.type = KTEL_RECORD_EVENT, .metric = "runq_stall_events"};
	expect_units(&st, &r, want_plain, 1);
	st.tags = KTEL_STATSD_TAGS_DOGSTATSD;
	expect_units(&st, &r, want_plain, 1);
}

/* A line over the formatter's limit is refused; the record's other lines go. */
static void test_line_too_long(void **state)
{
	static char label[KTEL_STATSD_LINE_MAX];
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOGSTATSD};
	struct ktel_record r = {.type = KTEL_RECORD_COUNTER, .metric = "m", .n_dims = 1};
	struct units us = {0};

	memset(label, 'a', sizeof(label) - 1);
	r.dims[0] = (struct ktel_dim){"d", 1, label, false, false};
	assert_int_equal(ktel_statsd__format(&st, &r, collect, &us), -EMSGSIZE);
	assert_int_equal(us.n, 0);
}

/* ---- packer ---------------------------------------------------------- */

struct packets {
	size_t n;
	char *p[256];
	size_t len[256];
};

static int take_packet(void *ctx, const char *data, size_t len)
{
	struct packets *ps = ctx;

	assert_true(ps->n < 256);
	ps->p[ps->n] = strndup(data, len);
	ps->len[ps->n++] = len;
	return 0;
}

static void packets_free(struct packets *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		free(ps->p[i]);
	ps->n = 0;
}

static void test_packer_exact_fit_and_order(void **state)
{
	struct ktel_statsd_packer p;
	struct packets ps = {0};

	assert_int_equal(ktel_statsd_packer__init(&p, 20, take_packet, &ps), 0);
	/* 9 + '\n' + 10 = 20: fits exactly */
	assert_int_equal(ktel_statsd_packer__add(&p, "a:1|c|#x:", 9), 0);
	assert_int_equal(ktel_statsd_packer__add(&p, "bb:22|c|#y", 10), 0);
	assert_int_equal(ps.n, 0);
	/* next one does not fit: the first datagram goes out whole */
	assert_int_equal(ktel_statsd_packer__add(&p, "c:3|c", 5), 0);
	assert_int_equal(ps.n, 1);
	assert_string_equal(ps.p[0], "a:1|c|#x:\nbb:22|c|#y");
	assert_int_equal(ps.len[0], 20);
	assert_int_equal(ktel_statsd_packer__flush(&p), 0);
	assert_int_equal(ps.n, 2);
	assert_string_equal(ps.p[1], "c:3|c");
	/* nothing pending: no empty datagram */
	assert_int_equal(ktel_statsd_packer__flush(&p), 0);
	assert_int_equal(ps.n, 2);
	packets_free(&ps);
	ktel_statsd_packer__release(&p);
}

static void test_packer_oversize_dropped(void **state)
{
	struct ktel_statsd_packer p;
	struct packets ps = {0};
	char big[21];

	memset(big, 'z', sizeof(big));
	assert_int_equal(ktel_statsd_packer__init(&p, 20, take_packet, &ps), 0);
	assert_int_equal(ktel_statsd_packer__add(&p, "a:1|c", 5), 0);
	assert_int_equal(ktel_statsd_packer__add(&p, big, 21), -EMSGSIZE);
	assert_int_equal(p.oversize, 1);
	assert_int_equal(ktel_statsd_packer__add(&p, big, 20), 0); /* exactly max: own datagram */
	assert_int_equal(ktel_statsd_packer__flush(&p), 0);
	assert_int_equal(ps.n, 2);
	assert_string_equal(ps.p[0], "a:1|c");
	assert_int_equal(ps.len[1], 20);
	packets_free(&ps);
	ktel_statsd_packer__release(&p);
	assert_int_equal(ktel_statsd_packer__init(&p, KTEL_STATSD_UDP_MAX, take_packet, &ps),
			 -EINVAL);
}

/*
 * Many units of random length (some with the two-line gauge form): every
 * datagram fits, and splitting the datagrams at '\n' gives back the lines
 * in order, so no unit was ever cut.
 */
static void test_packer_never_splits(void **state)
{
	enum {
		N = 150,
		MAX = 64
	};
	struct ktel_statsd_packer p;
	struct packets ps = {0};
	char *units[N], joined[N * MAX + N], *cat;
	size_t off = 0, total = 0;
	unsigned seed = 12345;

	assert_int_equal(ktel_statsd_packer__init(&p, MAX, take_packet, &ps), 0);
	for (int i = 0; i < N; i++) {
		size_t len = 1 + (size_t)(rand_r(&seed) % MAX);

		units[i] = malloc(len + 1);
		for (size_t j = 0; j < len; j++)
			units[i][j] = (char)('a' + (i + j) % 26);
		units[i][len] = '\0';
		if (len > 3 && i % 7 == 0)
			units[i][len / 2] = '\n'; /* a two-line unit */
		assert_int_equal(ktel_statsd_packer__add(&p, units[i], len), 0);
		off += (size_t)sprintf(joined + off, "%s%s", i ? "\n" : "", units[i]);
		if (ps.n == 256)
			fail();
	}
	assert_int_equal(ktel_statsd_packer__flush(&p), 0);
	cat = calloc(1, sizeof(joined));
	for (size_t i = 0; i < ps.n; i++) {
		assert_true(ps.len[i] <= MAX);
		assert_true(ps.len[i] > 0);
		total += (size_t)sprintf(cat + total, "%s%s", i ? "\n" : "", ps.p[i]);
	}
	assert_string_equal(cat, joined);
	/* each datagram boundary falls between units: check by prefix sums */
	off = 0;
	for (size_t i = 0, u = 0; i < ps.n; i++) {
		size_t got = 0;

		while (u < N && got + (got ? 1 : 0) + strlen(units[u]) <= ps.len[i]) {
			got += (got ? 1 : 0) + strlen(units[u]);
			u++;
		}
		assert_int_equal(got, ps.len[i]);
	}
	for (int i = 0; i < N; i++)
		free(units[i]);
	free(cat);
	packets_free(&ps);
	ktel_statsd_packer__release(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_histogram_dogstatsd),
		cmocka_unit_test(test_histogram_dotted),
		cmocka_unit_test(test_histogram_units),
		cmocka_unit_test(test_prefix_not_repeated),
		cmocka_unit_test(test_histogram_no_dims_other_schemes),
		cmocka_unit_test(test_dims_and_sanitizing),
		cmocka_unit_test(test_counter_and_gauges),
		cmocka_unit_test(test_bucket_names_plain_every_unit),
		cmocka_unit_test(test_format_plain),
		cmocka_unit_test(test_events_counted),
		cmocka_unit_test(test_line_too_long),
		cmocka_unit_test(test_packer_exact_fit_and_order),
		cmocka_unit_test(test_packer_oversize_dropped),
		cmocka_unit_test(test_packer_never_splits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
