// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Prometheus sink scraped by curl and checked by Prometheus's own
 * `promtool check metrics` (parser and linter): every record shape the
 * daemon produces, before and after map resets (exposed values are the maps'
 * running totals), a plugin's description as HELP (escaped), the text
 * plain and gzip-compressed (curl --compressed), and the landing page at
 * "/". Needs no privileges, but needs curl and promtool: tools/test
 * installs them, so as root (CI) their absence fails the test; otherwise it
 * is skipped with the reason. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sink_test.h"

#include "prometheus/prometheus_sink.h"
#include "sink.h"
#include "ktel_test.h"

static char dir[512];

/* As a plugin descriptor may have it: a newline and a backslash. */
#define HELP_TEXT "Time spent in direct reclaim.\nPer process state \\ uid."

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[1024];

	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, prog);
		if (access(buf, X_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

static void require_tools(void)
{
	static const char *const tools[] = {"curl", "promtool"};

	for (size_t i = 0; i < 2; i++) {
		if (in_path(tools[i]))
			continue;
		if (geteuid() == 0) {
			fprintf(stderr,
				"FAIL: %s not installed (tools/test installs curl and "
				"prometheus; run it, or apt-get install them)\n",
				tools[i]);
			exit(1);
		}
		printf("SKIP test_prometheus_promtool: %s not installed and not root to "
		       "install it (apt-get install curl prometheus)\n",
		       tools[i]);
		fflush(stdout);
		exit(KTEL_TEST_SKIP);
	}
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "%s/test-prom-promtool-%d", KTEL_BINARY_DIR, getpid());
	return mkdir(dir, 0700);
}

static int teardown(void **state)
{
	return ktel_test_rm_rf(dir) == 0 ? 0 : -1;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* One window of every record shape: log2 histograms in us (seconds on the
 * wire) and bytes with labelled and plain dims, log2_floor and linear
 * schemes, counters, gauges, the router's self records, and an event. The
 * deltas scale with k, the maps' running totals with tot; reset makes every
 * map report a fresh start (delta = the new total), as the delta engine does
 * after a map was recreated. The sink's own counter grows regardless. */
static void submit_window(void *priv, uint64_t k, uint64_t tot, bool reset)
{
	static uint64_t sent;
	static const char *const states[] = {"STATE_TOP", "STATE_FOREGROUND", "weird \"x\"\\"};
	struct ktel_record r[12];
	size_t n = 0;

	memset(r, 0, sizeof(r));
	for (int s = 0; s < 3; s++, n++) {
		r[n].type = KTEL_RECORD_HISTOGRAM;
		r[n].metric = "direct_reclaim_latency";
		r[n].unit = "us";
		r[n].n_dims = 2;
		r[n].dims[0] = (struct ktel_dim){.name = "process_state",
						 .value = s,
						 .label = states[s]};
		r[n].dims[1] = (struct ktel_dim){.name = "uid", .value = 1000 + s};
		r[n].hist.delta.scheme = KTEL_HIST_LOG2;
		r[n].hist.delta.n_buckets = 32;
		for (int b = 0; b < 32; b++)
			r[n].hist.delta.counts[b] = (b * 7 + s) % 5 * k;
		r[n].hist.delta.has_sum = true;
		r[n].hist.delta.sum = 12345 * k;
		r[n].hist.total = r[n].hist.delta;
		for (int b = 0; b < 32; b++)
			r[n].hist.total.counts[b] = (b * 7 + s) % 5 * tot;
		r[n].hist.total.sum = 12345 * tot;
		r[n].description = HELP_TEXT;
	}
	r[n].type = KTEL_RECORD_HISTOGRAM;
	r[n].metric = "dmabuf_request_sizes";
	r[n].unit = "bytes";
	r[n].hist.delta.scheme = KTEL_HIST_LOG2_FLOOR;
	r[n].hist.delta.n_buckets = 32;
	r[n].hist.delta.counts[12] = k;
	r[n].hist.delta.counts[31] = reset ? 0 : 1;
	r[n].hist.total = r[n].hist.delta;
	r[n].hist.total.counts[12] = tot;
	r[n++].hist.total.counts[31] = reset ? 0 : tot > 1 ? 2 : 1;
	r[n].type = KTEL_RECORD_HISTOGRAM;
	r[n].metric = "queue_fill";
	r[n].hist.delta.scheme = KTEL_HIST_LINEAR;
	r[n].hist.delta.linear_min = 0;
	r[n].hist.delta.linear_step = 10;
	r[n].hist.delta.n_buckets = 10;
	r[n].hist.delta.counts[3] = 2 * k;
	r[n].hist.total = r[n].hist.delta;
	r[n++].hist.total.counts[3] = 2 * tot;
	r[n].type = KTEL_RECORD_COUNTER;
	r[n].metric = "oom_kills";
	r[n].unit = "kills";
	r[n].counter.delta = k;
	r[n++].counter.total = tot;
	r[n].type = KTEL_RECORD_COUNTER;
	r[n].metric = "ktel_sink_sent";
	r[n].unit = "records";
	r[n].n_dims = 1;
	r[n].dims[0] = (struct ktel_dim){.name = "sink", .label = "prom"};
	r[n].counter.delta = 3 * k;
	sent += 3 * k;
	r[n++].counter.total = sent;
	r[n].type = KTEL_RECORD_GAUGE;
	r[n].metric = "ktel_sink_queued";
	r[n].unit = "items";
	r[n++].gauge = -(int64_t)k;
	r[n].type = KTEL_RECORD_GAUGE;
	r[n].metric = "pull_duration";
	r[n].unit = "ns";
	r[n++].gauge = 1500 * k;
	r[n].type = KTEL_RECORD_EVENT;
	r[n++].metric = "oom_kill_events";
	for (size_t i = 0; i < n; i++) {
		r[i].boot_id = "boot";
		r[i].seq = k;
	}
	ktel_prometheus_sink_ops.submit(priv, r, n);
}

/* Scrape with curl into name (asking for gzip when compressed: curl
 * inflates it); promtool must accept it without a word. */
static char *scrape_and_check(unsigned port, const char *name, bool compressed)
{
	char path[700], out[700], head[700], *text, *msgs;

	snprintf(path, sizeof(path), "%s/%s.txt", dir, name);
	snprintf(out, sizeof(out), "%s/%s.promtool", dir, name);
	snprintf(head, sizeof(head), "%s/%s.head", dir, name);
	assert_int_equal(ktel_test_run("curl -sS -f --max-time 10 %s -D '%s' -o '%s' "
				       "http://127.0.0.1:%u/metrics",
				       compressed ? "--compressed" : "", head, path, port),
			 0);
	msgs = slurp(head);
	assert_true((strcasestr(msgs, "\r\nContent-Encoding: gzip\r\n") != NULL) == compressed);
	assert_non_null(strcasestr(msgs, "\r\nVary: Accept-Encoding\r\n"));
	free(msgs);
	if (ktel_test_run("promtool check metrics < '%s' > '%s' 2>&1", path, out) != 0) {
		msgs = slurp(out);
		fail_msg("promtool check metrics rejected %s:\n%s", path, msgs);
	}
	msgs = slurp(out);
	assert_string_equal(msgs, "");
	free(msgs);
	text = slurp(path);
	return text;
}

static uint64_t value_of(const char *text, const char *series)
{
	const char *p = strstr(text, series);
	char line[64];

	if (!p)
		fail_msg("no series %s in:\n%s", series, text);
	p += strlen(series);
	assert_int_equal(*p, ' ');
	snprintf(line, sizeof(line), "%.*s", (int)strcspn(p + 1, "\n"), p + 1);
	return strtoull(line, NULL, 10);
}

#define DRL "ktel_direct_reclaim_latency_seconds"
#define TOP "{process_state=\"STATE_TOP\",uid=\"1000\""

static void test_promtool_accepts_scrapes(void **state)
{
	struct json_t *opts = json_pack("{s:s, s:i}", "type", "prometheus", "port", 0);
	struct ktel_err err = {0};
	uint64_t count1, count2, kills1, kills2;
	uv_loop_t loop;
	char *t1, *t2;
	void *priv = NULL;
	int closed = 0;

	uv_loop_init(&loop);
	if (ktel_prometheus_sink_ops.create(&loop, "prom", opts, &priv, &err))
		fail_msg("create: %s", err.msg);
	json_decref(opts);

	submit_window(priv, 1, 1, false);
	submit_window(priv, 2, 3, false);
	ktel_test_run_for(&loop, 20);
	t1 = scrape_and_check(ktel_prometheus_sink__port(priv), "scrape1", false);
	/* The maps were recreated: totals restart small, and so do the exposed
	 * values (the series show the maps' totals: a counter reset). */
	submit_window(priv, 1, 1, true);
	ktel_test_run_for(&loop, 20);
	t2 = scrape_and_check(ktel_prometheus_sink__port(priv), "scrape2", true);

	count1 = value_of(t1, "\n" DRL "_count" TOP "}");
	count2 = value_of(t2, "\n" DRL "_count" TOP "}");
	kills1 = value_of(t1, "\nktel_oom_kills_total");
	kills2 = value_of(t2, "\nktel_oom_kills_total");
	assert_int_equal(kills1, 3);
	assert_int_equal(kills2, 1);
	assert_true(count1 > 0);
	assert_int_equal(count2, count1 / 3); /* totals 3, then a new map's 1 */
	assert_int_equal(value_of(t2, "\nktel_sink_sent_total{sink=\"prom\"}"), 12);
	assert_non_null(strstr(t2, "\n" DRL "_bucket" TOP ",le=\"1e-06\"} "));
	assert_non_null(strstr(t2, "\nktel_pull_duration_seconds 1.5e-06\n"));
	assert_non_null(strstr(t2, "\nktel_queue_fill_bucket{le=\"9\"} 0\n"));
	assert_non_null(strstr(t2, "\nktel_queue_fill_bucket{le=\"39\"} 2\n"));
	assert_non_null(strstr(t2, "process_state=\"weird \\\"x\\\"\\\\\""));
	assert_non_null(strstr(t2, "# HELP " DRL " Time spent in direct reclaim.\\nPer process "
				   "state \\\\ uid.\n# TYPE " DRL " histogram\n"));
	/* The landing page: HTML linking to the metrics. */
	{
		char page[700], *html;

		snprintf(page, sizeof(page), "%s/landing.html", dir);
		assert_int_equal(ktel_test_run("curl -sS -f --max-time 10 -o '%s' "
					       "http://127.0.0.1:%u/",
					       page, ktel_prometheus_sink__port(priv)),
				 0);
		html = slurp(page);
		assert_non_null(strstr(html, "<a href=\"/metrics\">"));
		free(html);
		assert_int_not_equal(ktel_test_run("curl -sS -f --max-time 10 -o /dev/null "
						   "http://127.0.0.1:%u/nothing-here 2>/dev/null",
						   ktel_prometheus_sink__port(priv)),
				     0);
	}
	free(t1);
	free(t2);

	ktel_prometheus_sink_ops.close(priv, 1000, ktel_test_count_closed, &closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(closed, 1);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* The check above can fail: promtool does reject a malformed exposition and
 * a lint problem, with the same invocation. */
static void test_promtool_rejects_bad_text(void **state)
{
	static const char *const bad[] = {
		"# TYPE x counter\nx_total 1\n# TYPE x counter\nx_total 2\n",
		"# HELP a_us x\n# TYPE a_us gauge\na_us 1\n",
		"x{le=\"1\"} 1 2 3\n",
	};
	char path[700];

	for (size_t i = 0; i < KTEL_ARRAY_SIZE(bad); i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/bad%zu.txt", dir, i);
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(bad[i], f);
		fclose(f);
		assert_int_not_equal(ktel_test_run("promtool check metrics < '%s' > /dev/null 2>&1",
						   path),
				     0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_promtool_accepts_scrapes),
		cmocka_unit_test(test_promtool_rejects_bad_text),
	};

	require_tools();
	return cmocka_run_group_tests(tests, setup, teardown);
}
