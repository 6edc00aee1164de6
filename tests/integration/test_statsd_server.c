// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The statsd sink against a real Etsy StatsD server (npm statsd 0.9.0, bound
 * to 127.0.0.1 on a free port). A small backend in the server appends each
 * flush's counters and gauges as one JSON line to a file; the test sums them.
 *
 *   1. window 1 through two sinks (dotted names and DogStatsD tags): the
 *      server's counters equal the records' cumulative bucket counts (each
 *      le counter counts the values <= its bound, le=Inf the count), no bad
 *      lines,
 *      and a negative gauge arrives as its value (sent as "0|g" then "-N|g");
 *   2. the server is killed; window 2 is counted as dropped by the sinks;
 *   3. a new server on the same port; window 3, submitted at once, arrives
 *      whole, and that delivery is the one reconnect. Only window 2 was lost.
 * And with the default reconnect_max (30s): an outage of ~6s, a window
 * submitted every 200ms all through it (dropped, no reconnect counted while
 * the server is away); the window submitted right after the restart arrives
 * (UDP keeps sending while down, so no backoff outlives the outage).
 *
 * And values and names every server keeps: a histogram's sum in integer
 * microseconds (".sum_us"), a gauge in nanoseconds, bucket names as plain
 * decimals (test_etsy_statsd_exact_sums_plain_names).
 *
 * Node and the npm package are installed when missing (npm into the build
 * tree); the test is skipped, saying why, only when that is impossible.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sink_test.h"
#include <jansson.h>
#include <uv.h>

#include "ktel_test.h"
#include "statsd_server.h"
#include "statsd/statsd_sink.h"

#define N_RECS 6

static const struct ktel_sink_ops *ops = &ktel_statsd_sink_ops;
static struct statsd_server server = {.pid = -1};

/* Counters under our two prefixes, as the server keyed them. */
static json_t *ours(const json_t *totals)
{
	static const char *const prefixes[] = {"dot.", "dog.", NULL};

	return statsd_counters_under(totals, prefixes);
}

/* ---- records and what the server should make of them --------------------- */

static const char *const states[] = {"STATE_FOREGROUND", "STATE_BACKGROUND", "STATE_CACHED"};

static void make_window(struct ktel_record *recs, unsigned seed)
{
	for (int i = 0; i < N_RECS; i++) {
		struct ktel_record *r = &recs[i];

		*r = (struct ktel_record){
			.type = KTEL_RECORD_HISTOGRAM,
			.metric = i < 3 ? "direct_reclaim_latency" : "compaction_duration",
			.n_dims = i < 3 ? 1 : 0,
		};
		if (i < 3)
			r->dims[0] = (struct ktel_dim){"process_state", i, states[i], false, false};
		r->hist.delta.scheme = KTEL_HIST_LOG2;
		r->hist.delta.n_buckets = KTEL_HIST_BUCKETS;
		for (int k = 0; k < KTEL_HIST_BUCKETS; k++)
			r->hist.delta.counts[k] = (uint64_t)(rand_r(&seed) % 4
								     ? 0
								     : rand_r(&seed) % 50);
		r->hist.delta.counts[31] += i; /* overflow bucket in most records */
		r->hist.delta.has_sum = true;
		r->hist.delta.sum = 1000 + (uint64_t)i;
	}
}

static void add(json_t *want, const char *key, uint64_t n)
{
	json_t *old = json_object_get(want, key);

	if (!n)
		return;
	json_object_set_new(want, key, json_real((old ? json_number_value(old) : 0) + (double)n));
}

/*
 * The keys Etsy StatsD makes of our lines: dotted names as they are,
 * DogStatsD tags as ";k=v" with '+' removed by its key sanitizer. Bucket
 * counters are cumulative: from the first non-empty bucket each one counts
 * the values <= its bound, and le=Inf is the count.
 */
static void expect(json_t *want, const struct ktel_record *recs)
{
	char key[256];

	for (int i = 0; i < N_RECS; i++) {
		const struct ktel_record *r = &recs[i];
		const char *dim = r->n_dims ? r->dims[0].label : NULL;
		char dotdim[64] = "", dogdim[64] = "";
		uint64_t total = 0;

		if (dim) {
			snprintf(dotdim, sizeof(dotdim), ".process_state.%s", dim);
			snprintf(dogdim, sizeof(dogdim), ";process_state=%s", dim);
		}
		for (int k = 0; k < KTEL_HIST_BUCKETS; k++) {
			char le[16];

			total += r->hist.delta.counts[k];
			if (k == 31)
				snprintf(le, sizeof(le), "Inf");
			else
				snprintf(le, sizeof(le), "%llu", k ? 1ULL << k : 1ULL);
			snprintf(key, sizeof(key), "dot.%s%s.bucket.le_%s", r->metric, dotdim, le);
			add(want, key, total);
			snprintf(key, sizeof(key), "dog.%s.bucket;le=%s%s", r->metric, le, dogdim);
			add(want, key, total);
		}
		snprintf(key, sizeof(key), "dot.%s%s.count", r->metric, dotdim);
		add(want, key, total);
		snprintf(key, sizeof(key), "dog.%s.count%s", r->metric, dogdim);
		add(want, key, total);
		snprintf(key, sizeof(key), "dot.%s%s.sum", r->metric, dotdim);
		add(want, key, r->hist.delta.sum);
		snprintf(key, sizeof(key), "dog.%s.sum%s", r->metric, dogdim);
		add(want, key, r->hist.delta.sum);
	}
}

/*
 * What a Prometheus/Telegraf user relies on, read from the server's own
 * counters: along le the bucket counters never decrease, and le=Inf equals
 * the count, for every series of recs.
 */
static void check_cumulative(const json_t *got, const struct ktel_record *recs)
{
	char key[256];

	for (int i = 0; i < N_RECS; i++) {
		const struct ktel_record *r = &recs[i];
		const char *dim = r->n_dims ? r->dims[0].label : "";
		double prev = 0, v;

		for (int k = 0; k < KTEL_HIST_BUCKETS; k++) {
			char le[16];

			if (k == 31)
				snprintf(le, sizeof(le), "Inf");
			else
				snprintf(le, sizeof(le), "%llu", k ? 1ULL << k : 1ULL);
			snprintf(key, sizeof(key), "dog.%s.bucket;le=%s%s%s", r->metric, le,
				 r->n_dims ? ";process_state=" : "", dim);
			v = json_number_value(json_object_get(got, key));
			assert_true(v >= prev);
			prev = v;
		}
		snprintf(key, sizeof(key), "dog.%s.count%s%s", r->metric,
			 r->n_dims ? ";process_state=" : "", dim);
		assert_true(prev > 0);
		assert_true(prev == json_number_value(json_object_get(got, key)));
	}
}

/* Poll the server's flushes until our counters equal want (or 5s pass). */
static json_t *wait_counts(int gen, const json_t *want)
{
	json_t *got = NULL, *totals = NULL;

	for (int i = 0; i < 100; i++) {
		json_decref(got);
		json_decref(totals);
		totals = statsd_server_totals(&server, gen);
		got = ours(totals);
		if (json_equal(got, (json_t *)want))
			break;
		usleep(50000);
	}
	/* One more flush: nothing extra may trickle in. */
	usleep(250000);
	json_decref(got);
	json_decref(totals);
	totals = statsd_server_totals(&server, gen);
	got = ours(totals);
	if (!json_equal(got, (json_t *)want)) {
		char *a = json_dumps(got, JSON_SORT_KEYS), *b = json_dumps(want, JSON_SORT_KEYS);

		print_error("server counted %s\nexpected       %s\n", a, b);
		free(a);
		free(b);
		fail_msg("server counters differ from the records' bucket counts");
	}
	assert_int_equal(statsd_counter(totals, "statsd.bad_lines_seen"), 0);
	json_decref(got);
	return totals;
}

/* ---- the sinks --------------------------------------------------------------- */

static void *make_sink_with(uv_loop_t *loop, const char *tags, const char *prefix, const char *more)
{
	char json[512];
	struct ktel_err err = {0};
	json_t *opts;
	void *sink = NULL;

	snprintf(json, sizeof(json),
		 "{\"type\":\"statsd\",\"host\":\"127.0.0.1\",\"port\":%u,\"tags\":\"%s\","
		 "\"prefix\":\"%s\"%s}",
		 server.udp_port, tags, prefix, more);
	opts = json_loads(json, 0, NULL);
	assert_non_null(opts);
	if (ops->create(loop, tags, opts, &sink, &err))
		fail_msg("create: %s", err.msg);
	json_decref(opts);
	return sink;
}

static void *make_sink(uv_loop_t *loop, const char *tags, const char *prefix)
{
	return make_sink_with(loop, tags, prefix,
			      ",\"reconnect_min\":\"50ms\",\"reconnect_max\":\"200ms\"");
}

static struct ktel_sink_stats st(void *sink)
{
	struct ktel_sink_stats s;

	ops->stats(sink, &s);
	return s;
}

/* Run the loop until the sink's stats field at offset reaches n (4 s). */
static void run_until(uv_loop_t *loop, void *sink, size_t off, uint64_t n)
{
	for (int i = 0; i < 4000; i++) {
		struct ktel_sink_stats s = st(sink);

		if (*(uint64_t *)((char *)&s + off) >= n)
			return;
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	{
		struct ktel_sink_stats s = st(sink);

		fail_msg("sink counter at offset %zu never reached %llu (sent %llu dropped %llu "
			 "errors %llu reconnects %llu queued %llu)",
			 off, (unsigned long long)n, (unsigned long long)s.sent,
			 (unsigned long long)s.dropped, (unsigned long long)s.errors,
			 (unsigned long long)s.reconnects, (unsigned long long)s.queued);
	}
}

/* Run the loop until both sinks' field at offset reaches n. */
static void wait_field(uv_loop_t *loop, void *const sinks[2], size_t off, uint64_t n)
{
	run_until(loop, sinks[0], off, n);
	run_until(loop, sinks[1], off, n);
}

static void submit_both(void *const sinks[2], const struct ktel_record *recs, size_t n)
{
	ops->submit(sinks[0], recs, n);
	ops->submit(sinks[1], recs, n);
}

static void test_etsy_statsd_restart(void **state)
{
	struct ktel_record w1[N_RECS], w2[N_RECS], w3[N_RECS + 1];
	json_t *want = json_object(), *totals;
	void *sinks[2];
	uv_loop_t loop;
	int closed = 0;

	make_window(w1, 1);
	make_window(w2, 2);
	make_window(w3, 3);
	/* A negative level: StatsD needs "0|g" then "-42|g" in one packet. */
	w3[N_RECS] = (struct ktel_record){.type = KTEL_RECORD_GAUGE,
					  .metric = "level",
					  .gauge = -42};

	statsd_server_start(&server, 1);
	assert_int_equal(uv_loop_init(&loop), 0);
	sinks[0] = make_sink(&loop, "dotted", "dot.");
	sinks[1] = make_sink(&loop, "dogstatsd", "dog.");

	/* 1: everything arrives and is counted as sent */
	submit_both(sinks, w1, N_RECS);
	wait_field(&loop, sinks, offsetof(struct ktel_sink_stats, sent), N_RECS);
	expect(want, w1);
	totals = wait_counts(1, want);
	{
		json_t *got = ours(totals);

		check_cumulative(got, w1);
		json_decref(got);
	}
	json_decref(totals);

	/* 2: server gone: the window is dropped and counted */
	statsd_server_stop(&server);
	submit_both(sinks, w2, N_RECS);
	wait_field(&loop, sinks, offsetof(struct ktel_sink_stats, dropped), N_RECS);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(st(sinks[i]).dropped, N_RECS);
		assert_int_equal(st(sinks[i]).sent, N_RECS);
		assert_true(st(sinks[i]).errors >= 1);
	}

	/* 3: a new server on the same port; the sinks deliver at once, and
	 * that is the reconnect */
	statsd_server_start(&server, 2);
	submit_both(sinks, w3, N_RECS + 1);
	wait_field(&loop, sinks, offsetof(struct ktel_sink_stats, sent), 2 * N_RECS + 1);
	assert_int_equal(st(sinks[0]).reconnects, 1);
	assert_int_equal(st(sinks[1]).reconnects, 1);
	json_object_clear(want);
	expect(want, w3);
	totals = wait_counts(2, want);
	assert_int_equal(json_number_value(
				 json_object_get(json_object_get(totals, "gauges"), "dot.level")),
			 -42);
	assert_int_equal(json_number_value(
				 json_object_get(json_object_get(totals, "gauges"), "dog.level")),
			 -42);
	json_decref(totals);
	for (int i = 0; i < 2; i++) {
		struct ktel_sink_stats s = st(sinks[i]);

		assert_int_equal(s.sent, 2 * N_RECS + 1);
		assert_int_equal(s.dropped, N_RECS); /* window 2 and nothing else */
	}

	ops->close(sinks[0], 1000, ktel_test_count_closed, &closed);
	ops->close(sinks[1], 1000, ktel_test_count_closed, &closed);
	for (int i = 0; i < 2000 && closed < 2; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(closed, 2);
	assert_int_equal(uv_loop_close(&loop), 0);
	json_decref(want);
	statsd_server_stop(&server);
}

static void run_loop_ms(uv_loop_t *loop, unsigned ms)
{
	for (unsigned i = 0; i < ms; i++) {
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
}

/* Default reconnect_max: the loss ends when the outage does. */
static void test_default_backoff_outage(void **state)
{
	struct ktel_record w1[N_RECS], w2[N_RECS], w3[N_RECS];
	json_t *want = json_object();
	struct ktel_sink_stats s;
	uv_loop_t loop;
	int closed = 0, outage_windows = 0;
	void *sinks[2];

	make_window(w1, 11);
	make_window(w2, 12);
	make_window(w3, 13);
	statsd_server_start(&server, 3);
	assert_int_equal(uv_loop_init(&loop), 0);
	sinks[0] = make_sink_with(&loop, "dotted", "dot.", "");
	sinks[1] = make_sink_with(&loop, "dogstatsd", "dog.", "");
	submit_both(sinks, w1, N_RECS);
	wait_field(&loop, sinks, offsetof(struct ktel_sink_stats, sent), N_RECS);
	expect(want, w1);
	json_decref(wait_counts(3, want));

	/* ~6s down, a pull every 200ms: with the old doubling backoff (100ms
	 * .. 30s) the sink would be waiting out a ~6s delay at the restart. */
	statsd_server_stop(&server);
	for (; outage_windows < 30; outage_windows++) {
		submit_both(sinks, w2, N_RECS);
		run_loop_ms(&loop, 200);
	}
	for (int i = 0; i < 2; i++) {
		s = st(sinks[i]);
		assert_int_equal(s.dropped, (uint64_t)outage_windows * N_RECS);
		assert_int_equal(s.reconnects, 0); /* nothing delivered yet */
		assert_true(s.errors >= 1);
	}

	/* Back: the window submitted at once arrives within a second. */
	statsd_server_start(&server, 4);
	submit_both(sinks, w3, N_RECS);
	run_loop_ms(&loop, 1000);
	for (int i = 0; i < 2; i++) {
		s = st(sinks[i]);
		assert_int_equal(s.sent, 2 * N_RECS);
		assert_int_equal(s.dropped, (uint64_t)outage_windows * N_RECS);
		assert_int_equal(s.reconnects, 1);
	}
	json_object_clear(want);
	expect(want, w3);
	json_decref(wait_counts(4, want));

	ops->close(sinks[0], 1000, ktel_test_count_closed, &closed);
	ops->close(sinks[1], 1000, ktel_test_count_closed, &closed);
	for (int i = 0; i < 2000 && closed < 2; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(closed, 2);
	assert_int_equal(uv_loop_close(&loop), 0);
	json_decref(want);
	statsd_server_stop(&server);
}

/* Keep only want's keys under prefix (one sink's share of expect()). */
static void keep_under(json_t *want, const char *prefix)
{
	const char *key;
	json_t *v;
	void *tmp;

	json_object_foreach_safe(want, tmp, key, v)
		if (strncmp(key, prefix, strlen(prefix)) != 0)
			json_object_del(want, key);
}

/*
 * TCP (the Etsy server's servers/tcp): newline-terminated lines arrive and
 * are counted; the server killed, the sink sees the connection close, the
 * window sent during the outage is dropped and counted, and after a restart
 * the sink reconnects (backoff) and the next window arrives whole.
 */
static void test_etsy_statsd_tcp_restart(void **state)
{
	struct ktel_record w1[N_RECS], w2[N_RECS], w3[N_RECS];
	json_t *want = json_object();
	struct ktel_sink_stats s;
	uv_loop_t loop;
	int closed = 0;
	void *sink;

	make_window(w1, 21);
	make_window(w2, 22);
	make_window(w3, 23);
	server.tcp = true;
	statsd_server_start(&server, 5);
	assert_int_equal(uv_loop_init(&loop), 0);
	sink = make_sink_with(&loop, "dotted", "dot.",
			      ",\"transport\":\"tcp\",\"reconnect_min\":\"50ms\","
			      "\"reconnect_max\":\"200ms\"");
	ops->submit(sink, w1, N_RECS);
	run_until(&loop, sink, offsetof(struct ktel_sink_stats, sent), N_RECS);
	expect(want, w1);
	keep_under(want, "dot.");
	json_decref(wait_counts(5, want));

	/* Down: the sink notices the close by itself; the window is dropped. */
	statsd_server_stop(&server);
	run_until(&loop, sink, offsetof(struct ktel_sink_stats, errors), 1);
	ops->submit(sink, w2, N_RECS);
	run_until(&loop, sink, offsetof(struct ktel_sink_stats, dropped), N_RECS);
	run_loop_ms(&loop, 300); /* a few failed reconnects */
	s = st(sink);
	assert_int_equal(s.sent, N_RECS);
	assert_int_equal(s.dropped, N_RECS);
	assert_int_equal(s.reconnects, 0);

	/* Back: the window submitted now arrives whole; one reconnect. */
	statsd_server_start(&server, 6);
	ops->submit(sink, w3, N_RECS);
	run_until(&loop, sink, offsetof(struct ktel_sink_stats, sent), 2 * N_RECS);
	s = st(sink);
	assert_int_equal(s.sent, 2 * N_RECS);
	assert_int_equal(s.dropped, N_RECS);
	assert_int_equal(s.reconnects, 1);
	json_object_clear(want);
	expect(want, w3);
	keep_under(want, "dot.");
	json_decref(wait_counts(6, want));

	ops->close(sink, 1000, ktel_test_count_closed, &closed);
	for (int i = 0; i < 2000 && closed < 1; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(closed, 1);
	assert_int_equal(uv_loop_close(&loop), 0);
	json_decref(want);
	statsd_server_stop(&server);
	server.tcp = false;
}

/*
 * Values that integer-only servers keep and names without exponents: a
 * histogram in us whose sums in seconds would be fractions (0.1 + 0.2 is
 * not 0.3 in a double), a gauge in ns. The server's counters are exact
 * integers: the sum, in microseconds under ".sum_us", is the records' sum;
 * the gauge is its nanoseconds under "_ns"; every bucket is named by its
 * bound in seconds as a plain decimal ("le_0_000016"), never "1_6e-05".
 */
static void test_etsy_statsd_exact_sums_plain_names(void **state)
{
	struct ktel_record recs[N_RECS + 1];
	uint64_t sum = 0, cum[KTEL_HIST_BUCKETS] = {0};
	json_t *totals = NULL, *got = NULL;
	static const char *const prefixes[] = {"dot.", NULL};
	uv_loop_t loop;
	int closed = 0;
	void *sink;

	make_window(recs, 31);
	for (int i = 0; i < N_RECS; i++) {
		uint64_t c = 0;

		recs[i].metric = "compaction_duration";
		recs[i].unit = "us";
		recs[i].n_dims = 0;
		recs[i].hist.delta.sum = 100000 * (uint64_t)i + 200001; /* 0.200001 s, ... */
		sum += recs[i].hist.delta.sum;
		for (int k = 0; k < KTEL_HIST_BUCKETS; k++)
			cum[k] += c += recs[i].hist.delta.counts[k];
	}
	recs[N_RECS] = (struct ktel_record){.type = KTEL_RECORD_GAUGE,
					    .metric = "ktel_pull_duration",
					    .unit = "ns",
					    .gauge = 123457};
	statsd_server_start(&server, 7);
	assert_int_equal(uv_loop_init(&loop), 0);
	sink = make_sink(&loop, "dotted", "dot.");
	ops->submit(sink, recs, N_RECS + 1);
	run_until(&loop, sink, offsetof(struct ktel_sink_stats, sent), N_RECS + 1);
	for (int i = 0; i < 100; i++) {
		json_decref(totals);
		totals = statsd_server_totals(&server, 7);
		if (statsd_counter(totals, "dot.compaction_duration_seconds.sum_us") == (double)sum)
			break;
		usleep(50000);
	}
	if (statsd_counter(totals, "dot.compaction_duration_seconds.sum_us") != (double)sum)
		fail_msg("server's sum_us is %f, the records' sum %llu us",
			 statsd_counter(totals, "dot.compaction_duration_seconds.sum_us"),
			 (unsigned long long)sum);
	assert_int_equal(json_number_value(json_object_get(json_object_get(totals, "gauges"),
							   "dot.ktel_pull_duration_ns")),
			 123457);
	got = statsd_counters_under(totals, prefixes);
	{
		const char *key;
		json_t *v;

		json_object_foreach(got, key, v) {
			const char *le = strstr(key, ".le_");

			if (le && strpbrk(le + 4, "e-+"))
				fail_msg("bucket name with an exponent: %s", key);
		}
	}
	for (int k = 0; k < KTEL_HIST_BUCKETS; k++) {
		char key[128], le[64];

		if (!cum[k])
			continue;
		if (k == KTEL_HIST_BUCKETS - 1)
			snprintf(le, sizeof(le), "Inf");
		else
			snprintf(le, sizeof(le), "%s",
				 (const char *[]){"0_000001",   "0_000002",   "0_000004",
						  "0_000008",   "0_000016",   "0_000032",
						  "0_000064",   "0_000128",   "0_000256",
						  "0_000512",   "0_001024",   "0_002048",
						  "0_004096",   "0_008192",   "0_016384",
						  "0_032768",   "0_065536",   "0_131072",
						  "0_262144",   "0_524288",   "1_048576",
						  "2_097152",   "4_194304",   "8_388608",
						  "16_777216",  "33_554432",  "67_108864",
						  "134_217728", "268_435456", "536_870912",
						  "1073_741824"}[k]);
		snprintf(key, sizeof(key), "dot.compaction_duration_seconds.bucket.le_%s", le);
		if (statsd_counter(totals, key) != (double)cum[k])
			fail_msg("%s: server counted %f, the records %llu", key,
				 statsd_counter(totals, key), (unsigned long long)cum[k]);
	}
	assert_int_equal(statsd_counter(totals, "statsd.bad_lines_seen"), 0);
	json_decref(got);
	json_decref(totals);
	ops->close(sink, 1000, ktel_test_count_closed, &closed);
	for (int i = 0; i < 2000 && !closed; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(closed, 1);
	assert_int_equal(uv_loop_close(&loop), 0);
	statsd_server_stop(&server);
}

static int setup(void **state)
{
	char dir[300];

	snprintf(dir, sizeof(dir), "%s/test-statsd-server-%d", KTEL_BINARY_DIR, getpid());
	statsd_server_init(&server, dir);
	return 0;
}

static int teardown(void **state)
{
	statsd_server_cleanup(&server);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_etsy_statsd_restart),
		cmocka_unit_test(test_default_backoff_outage),
		cmocka_unit_test(test_etsy_statsd_tcp_restart),
		cmocka_unit_test(test_etsy_statsd_exact_sums_plain_names),
	};

	statsd_ensure_installed("test_statsd_server");
	return cmocka_run_group_tests(tests, setup, teardown);
}
