// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* JSON sink on a real libuv loop, writing real files in the build tree:
 * the line format parses back, queue bounds drop the newest, stdout mode,
 * option errors, write errors retried with jittered backoff, short writes
 * cut back to whole lines, a torn file cut back at open, rotation and
 * compression, close bounded while work is in flight. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sink_test.h"
#include <zlib.h>

#include "json_format.h"
#include "textbuf.h"
#include "router.h"
#include "sinks.h"
#include "ktel_test.h"
#include "run_wait.h"

static char dir[512];

static int setup_dir(void **state)
{
	snprintf(dir, sizeof(dir), "%s/test-json-sink-%d", KTEL_BINARY_DIR, getpid());
	mkdir(dir, 0700);
	return 0;
}

static int teardown_dir(void **state)
{
	return ktel_test_rm_rf(dir) == 0 ? 0 : -1;
}

static void path_in_dir(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
}

static const struct ktel_sink_ops *ops(void)
{
	const struct ktel_sink_ops *o = ktel_sink_type_find("json");

	assert_non_null(o);
	return o;
}

static void *create(uv_loop_t *loop, const char *opts_json)
{
	return ktel_test_sink_create(ops(), loop, "j", opts_json);
}

/* A sink and the count of its stats the predicates below wait for. */
struct wait_stat {
	void *sink;
	uint64_t n;
};

static bool queue_empty(void *ctx)
{
	struct wait_stat *w = ctx;
	struct ktel_sink_stats st;

	ops()->stats(w->sink, &st);
	return st.queued == 0;
}

static bool sent_n(void *ctx)
{
	struct wait_stat *w = ctx;
	struct ktel_sink_stats st;

	ops()->stats(w->sink, &st);
	return st.sent >= w->n;
}

static bool errors_n(void *ctx)
{
	struct wait_stat *w = ctx;
	struct ktel_sink_stats st;

	ops()->stats(w->sink, &st);
	return st.errors >= w->n;
}

/* Close with a timeout and run the loop until the sink has released. */
static void close_and_run(uv_loop_t *loop, void *priv, uint64_t timeout_ms)
{
	int closed = 0;

	ops()->close(priv, timeout_ms, ktel_test_count_closed, &closed);
	uv_run(loop, UV_RUN_DEFAULT);
	assert_int_equal(closed, 1);
}

static char *slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, len = 0, n;

	assert_non_null(f);
	do {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap + 1);
			assert_non_null(buf);
		}
		n = fread(buf + len, 1, 4096, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = '\0';
	*ret_len = len;
	return buf;
}

/* Parse every line of a JSON Lines text; each must end with '\n'. */
static json_t *parse_lines(const char *text, size_t len)
{
	json_t *arr = json_array();
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		json_error_t jerr;
		json_t *line;

		if (!nl)
			fail_msg("torn line at the end: %.*s", (int)(end - p), p);
		line = json_loadb(p, nl - p, 0, &jerr);
		if (!line)
			fail_msg("bad JSON line (%s): %.*s", jerr.text, (int)(nl - p), p);
		json_array_append_new(arr, line);
		p = nl + 1;
	}
	return arr;
}

static json_t *read_lines(const char *path)
{
	size_t len;
	char *text = slurp(path, &len);
	json_t *arr = parse_lines(text, len);

	free(text);
	return arr;
}

static void make_hist(struct ktel_record *r, uint64_t seq)
{
	memset(r, 0, sizeof(*r));
	r->type = KTEL_RECORD_HISTOGRAM;
	r->metric = "direct_reclaim_latency";
	r->atom = "DirectReclaimLatency";
	r->atom_id = 100001;
	r->unit = "us";
	r->start_boottime_ns = 1000;
	r->end_boottime_ns = 2000;
	r->start_wall_ns = 1700000000123456789LL;
	r->end_wall_ns = 1700000010000000000LL;
	r->boot_id = "b00t";
	r->map_id = 42;
	r->seq = seq;
	r->n_dims = 2;
	r->dims[0] = (struct ktel_dim){.name = "process_state",
				       .value = 4,
				       .label = "STATE_FOREGROUND"};
	r->dims[1] = (struct ktel_dim){.name = "uid", .value = 1000};
	r->hist.delta.scheme = KTEL_HIST_LOG2;
	r->hist.delta.n_buckets = KTEL_HIST_BUCKETS;
	for (int k = 0; k < KTEL_HIST_BUCKETS; k++)
		r->hist.delta.counts[k] = k * 3 + (uint64_t)seq;
	r->hist.delta.has_sum = true;
	r->hist.delta.sum = 987654321;
}

/*
 * The line as jq reads it (real jq, docs/sinks.md's idioms): start_s/end_s
 * go through todate, and the nanosecond start string through the documented
 * sub+fromdateiso8601 idiom, which plain fromdateiso8601 rejects.
 */
static void check_with_jq(const char *path)
{
	char cmd[1200], out[256] = "";
	FILE *p;

	if (system("command -v jq >/dev/null 2>&1") != 0)
		fail_msg("jq is not installed (tools/lib.sh KTEL_PACKAGES has it)");
	snprintf(cmd, sizeof(cmd),
		 "jq -r 'select(.metric == \"direct_reclaim_latency\") | "
		 "\"\\(.start_s | todate) \\(.end_s | todate) "
		 "\\(.start | sub(\"\\\\.[0-9]+Z$\"; \"Z\") | fromdateiso8601)\"' '%s'",
		 path);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(out, sizeof(out), p));
	assert_int_equal(pclose(p), 0);
	assert_string_equal(out, "2023-11-14T22:13:20Z 2023-11-14T22:13:30Z 1700000000\n");
	/* Without the idiom jq refuses the nanosecond string: the reason for
	 * start_s/end_s. */
	snprintf(cmd, sizeof(cmd), "jq '.start | fromdateiso8601' '%s' >/dev/null 2>&1", path);
	assert_true(system(cmd) != 0);
}

static void test_line_format(void **state)
{
	uv_loop_t loop;
	struct ktel_record recs[4];
	char path[600];
	json_t *lines, *l, *h, *le;
	uint64_t want_count = 0;
	void *s;

	path_in_dir(path, sizeof(path), "format.jsonl");
	uv_loop_init(&loop);
	{
		json_t *o = json_pack("{s:s,s:s}", "type", "json", "path", path);
		struct ktel_err err = {0};

		assert_int_equal(ops()->create(&loop, "j", o, &s, &err), 0);
		json_decref(o);
	}
	make_hist(&recs[0], 5);
	/* As metric_pull adds it (KTEL_DIM_DEV_*): a label, no raw value. */
	recs[0].dims[recs[0].n_dims++] = (struct ktel_dim){.name = "device",
							   .value = 7 << 20,
							   .label = "loop0",
							   .derived = true};
	memset(&recs[1], 0, sizeof(recs[1]));
	recs[1].type = KTEL_RECORD_COUNTER;
	recs[1].metric = "oom_kills";
	recs[1].unit = "events";
	recs[1].counter.delta = 3;
	recs[1].counter.total = 10;
	memset(&recs[2], 0, sizeof(recs[2]));
	recs[2].type = KTEL_RECORD_GAUGE;
	recs[2].metric = "queue \"depth\"\n";
	recs[2].gauge = -7;
	memset(&recs[3], 0, sizeof(recs[3]));
	recs[3].type = KTEL_RECORD_EVENT;
	recs[3].metric = "oom_event";
	recs[3].event.n_fields = 3;
	recs[3].event.fields = (const struct ktel_event_field[]){
		{.name = "comm",
		 .type = KTEL_FIELD_VALUE_STRING,
		 .s = "bad\xff"
		      "utf8"},
		{.name = "pid", .type = KTEL_FIELD_VALUE_INT, .i = -12},
		{.name = "state", .type = KTEL_FIELD_VALUE_UINT, .u = 2, .label = "RUNNING"},
	};
	ops()->submit(s, recs, 4);
	close_and_run(&loop, s, 2000);
	assert_int_equal(uv_loop_close(&loop), 0);

	lines = read_lines(path);
	assert_int_equal(json_array_size(lines), 4);
	l = json_array_get(lines, 0);
	assert_string_equal(json_string_value(json_object_get(l, "metric")),
			    "direct_reclaim_latency");
	assert_string_equal(json_string_value(json_object_get(l, "atom")), "DirectReclaimLatency");
	assert_int_equal(json_integer_value(json_object_get(l, "atom_id")), 100001);
	assert_string_equal(json_string_value(json_object_get(l, "type")), "histogram");
	assert_string_equal(json_string_value(json_object_get(l, "unit")), "us");
	/* start_ns/end_ns are wall clock (epoch ns, as start/end); the
	 * CLOCK_BOOTTIME stamps are start_boot_ns/end_boot_ns. */
	assert_int_equal(json_integer_value(json_object_get(l, "start_ns")), 1700000000123456789LL);
	assert_int_equal(json_integer_value(json_object_get(l, "end_ns")), 1700000010000000000LL);
	assert_int_equal(json_integer_value(json_object_get(l, "start_boot_ns")), 1000);
	assert_int_equal(json_integer_value(json_object_get(l, "end_boot_ns")), 2000);
	assert_string_equal(json_string_value(json_object_get(l, "start")),
			    "2023-11-14T22:13:20.123456789Z");
	assert_string_equal(json_string_value(json_object_get(l, "end")),
			    "2023-11-14T22:13:30.000000000Z");
	assert_int_equal(json_integer_value(json_object_get(l, "start_s")), 1700000000);
	assert_int_equal(json_integer_value(json_object_get(l, "end_s")), 1700000010);
	assert_string_equal(json_string_value(json_object_get(l, "boot_id")), "b00t");
	assert_int_equal(json_integer_value(json_object_get(l, "map_id")), 42);
	assert_int_equal(json_integer_value(json_object_get(l, "seq")), 5);
	/* Labelled dims carry the label in dims and the integer in dims_raw. */
	assert_string_equal(json_string_value(
				    json_object_get(json_object_get(l, "dims"), "process_state")),
			    "STATE_FOREGROUND");
	assert_int_equal(json_integer_value(
				 json_object_get(json_object_get(l, "dims_raw"), "process_state")),
			 4);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(l, "dims"), "uid")),
			 1000);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(l, "dims_raw"), "uid")),
			 1000);
	/* A derived dim is in dims only: dims_raw keeps the raw numbers. */
	assert_string_equal(json_string_value(
				    json_object_get(json_object_get(l, "dims"), "device")),
			    "loop0");
	assert_null(json_object_get(json_object_get(l, "dims_raw"), "device"));
	assert_int_equal(json_object_size(json_object_get(l, "dims_raw")), 2);
	h = json_object_get(l, "histogram");
	assert_string_equal(json_string_value(json_object_get(h, "scheme")), "log2");
	assert_int_equal(json_array_size(json_object_get(h, "counts")), 32);
	le = json_object_get(h, "le");
	assert_int_equal(json_array_size(le), 32);
	for (size_t k = 0; k < 32; k++) {
		json_t *c = json_array_get(json_object_get(h, "counts"), k);

		assert_int_equal(json_integer_value(c), recs[0].hist.delta.counts[k]);
		want_count += recs[0].hist.delta.counts[k];
		if (k < 31) {
			bool inf;
			double want = ktel_hist_upper_bound(&recs[0].hist.delta, k, &inf);

			assert_true(json_is_integer(json_array_get(le, k)));
			assert_true(json_number_value(json_array_get(le, k)) == want);
			assert_true(want == (k == 0 ? 1.0 : ldexp(1.0, k)));
		}
	}
	assert_int_equal(json_integer_value(json_array_get(le, 30)), 1073741824);
	assert_string_equal(json_string_value(json_array_get(le, 31)), "+Inf");
	assert_int_equal(json_integer_value(json_object_get(h, "count")), want_count);
	assert_int_equal(json_integer_value(json_object_get(h, "sum")), 987654321);

	l = json_array_get(lines, 1);
	assert_string_equal(json_string_value(json_object_get(l, "type")), "counter");
	assert_true(json_is_null(json_object_get(l, "atom")));
	assert_int_equal(json_integer_value(json_object_get(l, "value")), 3);
	assert_int_equal(json_integer_value(json_object_get(l, "total")), 10);
	assert_int_equal(json_object_size(json_object_get(l, "dims")), 0);

	l = json_array_get(lines, 2);
	assert_string_equal(json_string_value(json_object_get(l, "metric")), "queue \"depth\"\n");
	assert_int_equal(json_integer_value(json_object_get(l, "value")), -7);

	l = json_array_get(lines, 3);
	assert_string_equal(json_string_value(json_object_get(l, "type")), "event");
	h = json_object_get(l, "fields");
	assert_string_equal(json_string_value(json_object_get(h, "comm")), "bad\xef\xbf\xbdutf8");
	assert_int_equal(json_integer_value(json_object_get(h, "pid")), -12);
	assert_string_equal(json_string_value(json_object_get(h, "state")), "RUNNING");
	h = json_object_get(l, "fields_raw");
	assert_int_equal(json_integer_value(json_object_get(h, "state")), 2);
	assert_int_equal(json_integer_value(json_object_get(h, "pid")), -12);
	assert_null(json_object_get(h, "comm"));
	json_decref(lines);
	check_with_jq(path);
}

static void test_other_schemes(void **state)
{
	uv_loop_t loop;
	struct ktel_record r;
	char path[600], opts[700];
	json_t *lines, *h;
	void *s;

	path_in_dir(path, sizeof(path), "schemes.jsonl");
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\"}", path);
	uv_loop_init(&loop);
	s = create(&loop, opts);
	make_hist(&r, 1);
	r.hist.delta.scheme = KTEL_HIST_LINEAR;
	r.hist.delta.linear_min = 0;
	r.hist.delta.linear_step = 10;
	r.hist.delta.n_buckets = 4;
	r.hist.delta.has_sum = false;
	ops()->submit(s, &r, 1);
	close_and_run(&loop, s, 2000);
	uv_loop_close(&loop);
	lines = read_lines(path);
	h = json_object_get(json_array_get(lines, 0), "histogram");
	assert_string_equal(json_string_value(json_object_get(h, "scheme")), "linear");
	assert_int_equal(json_integer_value(json_object_get(h, "linear_step")), 10);
	assert_int_equal(json_array_size(json_object_get(h, "counts")), 4);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(h, "le"), 0)), 9);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(h, "le"), 2)), 29);
	assert_string_equal(json_string_value(json_array_get(json_object_get(h, "le"), 3)), "+Inf");
	assert_null(json_object_get(h, "sum"));
	json_decref(lines);
}

/* A record that only ends its series (record.h series_end) has no delta:
 * no line, and nothing counted sent, dropped or skipped. */
static void test_series_end_skipped(void **state)
{
	struct ktel_record r[2];
	struct ktel_sink_stats st;
	char path[600], opts[700];
	uv_loop_t loop;
	json_t *lines;
	void *s;

	(void)state;
	path_in_dir(path, sizeof(path), "ends.jsonl");
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\"}", path);
	uv_loop_init(&loop);
	s = create(&loop, opts);
	make_hist(&r[0], 1);
	make_hist(&r[1], 1);
	memset(r[1].hist.delta.counts, 0, sizeof(r[1].hist.delta.counts));
	r[1].hist.delta.sum = 0;
	r[1].series_end = true;
	ops()->submit(s, r, 2);
	ops()->stats(s, &st);
	assert_int_equal(st.dropped + st.skipped, 0);
	close_and_run(&loop, s, 2000);
	uv_loop_close(&loop);
	lines = read_lines(path);
	assert_int_equal(json_array_size(lines), 1);
	json_decref(lines);
}

static void test_queue_bound_drops_newest(void **state)
{
	uv_loop_t loop;
	struct ktel_record recs[100];
	struct ktel_sink_stats st;
	char path[600], opts[700];
	json_t *lines;
	void *s;

	path_in_dir(path, sizeof(path), "bound.jsonl");
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\",\"max_queue_bytes\":\"4K\"}", path);
	uv_loop_init(&loop);
	s = create(&loop, opts);
	for (int i = 0; i < 100; i++)
		make_hist(&recs[i], i + 1);
	/* Two batches before the loop runs: the first fills the queue, the
	 * rest of it and all of the second are the newest and dropped. */
	ops()->submit(s, recs, 50);
	ops()->submit(s, recs + 50, 50);
	ops()->stats(s, &st);
	assert_true(st.queued > 0 && st.queued <= 4096);
	assert_true(st.dropped >= 90);
	assert_int_equal(st.sent, 0);
	ktel_test_run_until(&loop, queue_empty, &(struct wait_stat){s, 0});
	ops()->stats(s, &st);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.sent + st.dropped, 100);
	assert_int_equal(st.errors, 0);
	close_and_run(&loop, s, 2000);
	uv_loop_close(&loop);

	lines = read_lines(path);
	assert_int_equal(json_array_size(lines), 100 - st.dropped);
	/* The kept ones are the oldest, in order. */
	for (size_t i = 0; i < json_array_size(lines); i++)
		assert_int_equal(json_integer_value(
					 json_object_get(json_array_get(lines, i), "seq")),
				 i + 1);
	json_decref(lines);
}

/* Every size form the config validator accepts is the same size here
 * ("4KB" is 4000 bytes, "4KiB" 4096), so a checked file never fails at
 * start. */
static void test_sizes_as_config(void **state)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} sizes[] = {{"4KB", 4000}, {"4KiB", 4096}, {"4500B", 4500}, {"4K", 4096}};
	struct ktel_record recs[50];
	struct ktel_sink_stats st;
	char path[600], opts[700];
	uv_loop_t loop;
	void *s;

	for (int i = 0; i < 50; i++)
		make_hist(&recs[i], i + 1);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		path_in_dir(path, sizeof(path), "sizes.jsonl");
		snprintf(opts, sizeof(opts), "{\"path\":\"%s\",\"max_queue_bytes\":\"%s\"}", path,
			 sizes[i].text);
		uv_loop_init(&loop);
		s = create(&loop, opts);
		ops()->submit(s, recs, 50);
		ops()->stats(s, &st);
		/* ~830-byte lines: the queue holds as many as fit the bound. */
		assert_true(st.queued <= sizes[i].bytes);
		assert_true(st.queued + 900 > sizes[i].bytes);
		close_and_run(&loop, s, 0);
		uv_loop_close(&loop);
		unlink(path);
	}
}

static void test_stdout_mode(void **state)
{
	uv_loop_t loop;
	struct ktel_record recs[3];
	char path[600];
	json_t *lines;
	int saved, fd;
	void *s;

	path_in_dir(path, sizeof(path), "stdout.jsonl");
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, STDOUT_FILENO);
	close(fd);

	uv_loop_init(&loop);
	s = create(&loop, "{\"path\":\"-\",\"fsync\":true}");
	for (int i = 0; i < 3; i++)
		make_hist(&recs[i], i + 1);
	ops()->submit(s, recs, 3);
	close_and_run(&loop, s, 2000);
	uv_loop_close(&loop);

	dup2(saved, STDOUT_FILENO);
	close(saved);
	/* stdout stays open for the process after the sink is gone. */
	assert_true(fcntl(STDOUT_FILENO, F_GETFD) >= 0);
	lines = read_lines(path);
	assert_int_equal(json_array_size(lines), 3);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, 2), "seq")), 3);
	json_decref(lines);
}

static void expect_create_error(const char *opts_json, const char *want)
{
	json_t *opts = json_loads(opts_json, 0, NULL);
	struct ktel_err err = {0};
	uv_loop_t loop;
	void *priv = NULL;

	uv_loop_init(&loop);
	assert_non_null(opts);
	assert_true(ops()->create(&loop, "j", opts, &priv, &err) < 0);
	if (!strstr(err.msg, want))
		fail_msg("error \"%s\" does not contain \"%s\"", err.msg, want);
	json_decref(opts);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_option_errors(void **state)
{
	char opts[800], bad[700];

	expect_create_error("{\"path\":\"-\",\"bogus\":1}",
			    "sinks.j.bogus: unknown key (known keys: path,");
	expect_create_error("{\"fsync\":true}", "sinks.j.path: required");
	expect_create_error("{\"path\":\"-\",\"fsync\":1}",
			    "sinks.j.fsync: expected true or false, got 1");
	expect_create_error("{\"path\":\"-\",\"max_queue_bytes\":\"12X\"}",
			    "sinks.j.max_queue_bytes: expected size such as");
	expect_create_error("{\"path\":\"-\",\"max_queue_bytes\":0}", "sinks.j.max_queue_bytes");
	expect_create_error("{\"path\":\"-\",\"rotate_bytes\":1000}", "not \"-\"");
	expect_create_error("{\"path\":\"/tmp/x\",\"keep\":3}", "set rotate_bytes");
	expect_create_error("{\"path\":\"/tmp/x\",\"rotate_bytes\":10,\"keep\":0}", "sinks.j.keep");
	expect_create_error("[1]", "sinks.j: expected object");
	/* A file where a directory must be made: the sink names the path. */
	snprintf(bad, sizeof(bad), "%s/in-the-way", dir);
	close(open(bad, O_WRONLY | O_CREAT, 0644));
	snprintf(bad, sizeof(bad), "%s/in-the-way/out.jsonl", dir);
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\"}", bad);
	expect_create_error(opts, bad);
}

/* The directories above path that are missing are made (0750), as for the
 * state file: run by hand, /var/log/ktelemetry need not exist. */
static void test_missing_directories_made(void **state)
{
	char path[700], opts[800];
	struct stat st;
	uv_loop_t loop;
	void *s;

	snprintf(path, sizeof(path), "%s/made/for/it/out.jsonl", dir);
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\"}", path);
	uv_loop_init(&loop);
	s = create(&loop, opts);
	close_and_run(&loop, s, 1000);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(stat(path, &st), 0);
	snprintf(path, sizeof(path), "%s/made/for", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0027, 0);
}

/* A write that always fails (ENOSPC on /dev/full): errors are counted and
 * retried with backoff, nothing is lost until close gives up and counts it. */
static void test_write_errors_retried(void **state)
{
	uv_loop_t loop;
	struct ktel_record recs[5];
	struct ktel_sink_stats st;
	void *s;

	if (access("/dev/full", W_OK) != 0)
		skip();
	uv_loop_init(&loop);
	s = create(&loop, "{\"path\":\"/dev/full\"}");
	for (int i = 0; i < 5; i++)
		make_hist(&recs[i], i + 1);
	ops()->submit(s, recs, 5);
	/* Three attempts, the last two after a backoff (its delays are
	 * test_retry_backoff_jittered's). */
	ktel_test_run_until(&loop, errors_n, &(struct wait_stat){s, 3});
	ops()->stats(s, &st);
	assert_true(st.errors >= 3);
	assert_int_equal(st.sent, 0);
	assert_int_equal(st.dropped, 0);
	assert_true(st.queued > 0);
	close_and_run(&loop, s, 50);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/*
 * The delays the sinks' retry timers are started with, seen after each loop
 * turn's I/O callbacks (a uv_check handle). A retry is started by a failed
 * write's completion, an I/O callback of that turn, and the loop's time
 * stands still until the turn ends: the time left on the timer there is
 * the delay the sink chose, whatever the machine's load did to when the
 * turn ran.
 */
enum {
	N_SINKS = 20,
	N_DELAYS = 3
};

struct retry_watch {
	uv_check_t check;
	void *sinks[N_SINKS];
	uv_handle_t *timer[N_SINKS];
	uint64_t delay[N_SINKS][N_DELAYS];
	uint64_t due[N_SINKS];
	unsigned seen[N_SINKS];
};

static void see_retry_timer(uv_handle_t *h, void *arg)
{
	struct retry_watch *w = arg;
	uint64_t left;

	if (h->type != UV_TIMER)
		return;
	for (int i = 0; i < N_SINKS; i++) {
		/* The sink's timers: the retry is the one that runs (its close
		 * deadline runs only once it closes). */
		if (h->data != w->sinks[i] || (w->timer[i] && h != w->timer[i]))
			continue;
		if (!uv_is_active(h))
			continue;
		w->timer[i] = h;
		/* Started anew (it may have fired, failed and been started again
		 * within one turn): due at another time. One overdue (0 left)
		 * was seen when it started, as every delay is over 0. */
		left = uv_timer_get_due_in((uv_timer_t *)h);
		if (!left || uv_now(h->loop) + left == w->due[i])
			continue;
		w->due[i] = uv_now(h->loop) + left;
		if (w->seen[i] < N_DELAYS)
			w->delay[i][w->seen[i]++] = left;
	}
}

static void on_turn_see_retries(uv_check_t *h)
{
	uv_walk(h->loop, see_retry_timer, h->data);
}

static bool all_delays_seen(void *ctx)
{
	const struct retry_watch *w = ctx;

	for (int i = 0; i < N_SINKS; i++)
		if (w->seen[i] < N_DELAYS)
			return false;
	return true;
}

/* Retries of sinks that failed together spread out (equal jitter), never
 * later than the plain doubling: on /dev/full each delay is half to all of
 * the backoff, which doubles from 50 ms, and 20 sinks do not all pick the
 * same delays. */
static void test_retry_backoff_jittered(void **state)
{
	struct retry_watch w = {0};
	struct ktel_record rec;
	struct ktel_sink_stats st;
	bool all_same = true;
	uv_loop_t loop;
	int closed = 0;

	if (access("/dev/full", W_OK) != 0)
		skip();
	uv_loop_init(&loop);
	uv_check_init(&loop, &w.check);
	w.check.data = &w;
	uv_check_start(&w.check, on_turn_see_retries);
	make_hist(&rec, 1);
	for (int i = 0; i < N_SINKS; i++) {
		w.sinks[i] = create(&loop, "{\"path\":\"/dev/full\"}");
		ops()->submit(w.sinks[i], &rec, 1);
	}
	ktel_test_run_until(&loop, all_delays_seen, &w);
	uv_close((uv_handle_t *)&w.check, NULL);
	for (int i = 0; i < N_SINKS; i++) {
		ops()->stats(w.sinks[i], &st);
		assert_true(st.errors >= N_DELAYS);
		for (int k = 0; k < N_DELAYS; k++) {
			uint64_t backoff = 50u << k;

			if (w.delay[i][k] < backoff / 2 || w.delay[i][k] > backoff)
				fail_msg("sink %d, retry %d: delay %" PRIu64
					 " ms, not half to all of %" PRIu64 " ms",
					 i, k + 1, w.delay[i][k], backoff);
			if (w.delay[i][k] != w.delay[0][k])
				all_same = false;
		}
	}
	if (all_same)
		fail_msg("all %d sinks retried after %" PRIu64 ", %" PRIu64 " and %" PRIu64
			 " ms: retries not jittered",
			 N_SINKS, w.delay[0][0], w.delay[0][1], w.delay[0][2]);
	for (int i = 0; i < N_SINKS; i++)
		ops()->close(w.sinks[i], 0, ktel_test_count_closed, &closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(closed, N_SINKS);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static off_t file_size_of(const char *path)
{
	struct stat sb;

	assert_int_equal(stat(path, &sb), 0);
	return sb.st_size;
}

static void write_file(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
}

/* A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes the write that
 * crosses it short and the ones after it fail, like a full disk. The
 * process's soft limit only: the hard one stays, so it can be raised. */
static void limit_file_size(rlim_t bytes)
{
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = bytes;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

/*
 * A sink's stats and its file's bytes the moment its first write error is
 * counted: in the loop turn of that write's completion, after its I/O
 * callbacks (a uv_check handle). Its retry is then a timer just started,
 * and nothing of the sink runs on the writer thread until the loop runs
 * its timers again, however late the machine lets it.
 */
struct first_error {
	void *sink;
	const char *path;
	uv_check_t check;
	struct ktel_sink_stats st;
	char *text;
	size_t len;
};

static void on_turn_first_error(uv_check_t *h)
{
	struct first_error *f = h->data;

	ops()->stats(f->sink, &f->st);
	if (!f->st.errors || f->text)
		return;
	f->text = slurp(f->path, &f->len);
	uv_check_stop(h);
}

static bool have_first_error(void *ctx)
{
	return ((struct first_error *)ctx)->text != NULL;
}

static void see_first_error(uv_loop_t *loop, struct first_error *f)
{
	uv_check_init(loop, &f->check);
	f->check.data = f;
	uv_check_start(&f->check, on_turn_first_error);
	ktel_test_run_until(loop, have_first_error, f);
	uv_close((uv_handle_t *)&f->check, NULL);
}

/* ~560-byte lines under a 3000-byte limit: 5 lines fit, the 6th write is
 * short. The file must end on the 5th line's '\n' (the torn part cut off
 * again), the 6th line stays queued whole, and once the limit is gone
 * every line arrives exactly once, in order. */
static void test_short_write_cut_back(void **state)
{
	struct first_error first = {0};
	uv_loop_t loop;
	struct ktel_record recs[10];
	struct ktel_sink_stats st = {0};
	char path[600], opts[700];
	json_t *lines;
	void *s;

	path_in_dir(path, sizeof(path), "short.jsonl");
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\"}", path);
	signal(SIGXFSZ, SIG_IGN);
	limit_file_size(3000);
	uv_loop_init(&loop);
	s = create(&loop, opts);
	for (int i = 0; i < 10; i++)
		make_hist(&recs[i], i + 1);
	/* One record per batch, so one write may take several batches and
	 * end mid-line anywhere in them. */
	for (int i = 0; i < 10; i++)
		ops()->submit(s, &recs[i], 1);
	/* The file as the error left it: it is counted once the torn part
	 * is cut off, and a retry runs only after its backoff. */
	first.sink = s;
	first.path = path;
	see_first_error(&loop, &first);
	st = first.st;
	assert_true(st.errors >= 1);
	assert_int_equal(st.dropped, 0);
	assert_true(st.sent >= 1 && st.sent < 10);
	assert_true(first.len < 3000);
	lines = parse_lines(first.text, first.len); /* fails on a torn last line */
	assert_int_equal(json_array_size(lines), st.sent);
	json_decref(lines);
	free(first.text);

	limit_file_size(RLIM_INFINITY);
	/* Written once a jittered backoff (at most 200 ms) has passed. */
	ktel_test_run_until(&loop, sent_n, &(struct wait_stat){s, 10});
	ops()->stats(s, &st);
	assert_int_equal(st.sent, 10);
	assert_int_equal(st.queued, 0);
	close_and_run(&loop, s, 1000);
	assert_int_equal(uv_loop_close(&loop), 0);
	lines = read_lines(path);
	assert_int_equal(json_array_size(lines), 10);
	for (size_t i = 0; i < 10; i++)
		assert_int_equal(json_integer_value(
					 json_object_get(json_array_get(lines, i), "seq")),
				 i + 1);
	json_decref(lines);
}

/* A file left by a writer killed mid-line: its fragment is cut off at
 * open (here one longer than the sink's read block, and a file with no
 * whole line at all), so the new lines do not merge with it. */
static void check_torn_file(const char *name, const char *head, size_t head_len,
			    size_t fragment_len, size_t want_old_lines)
{
	uv_loop_t loop;
	struct ktel_record recs[2];
	char path[600], opts[700], *text;
	json_t *lines;
	void *s;

	path_in_dir(path, sizeof(path), name);
	text = malloc(head_len + fragment_len);
	assert_non_null(text);
	memcpy(text, head, head_len);
	memset(text + head_len, 'x', fragment_len);
	if (fragment_len)
		text[head_len] = '{';
	write_file(path, text, head_len + fragment_len);
	free(text);
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\"}", path);
	uv_loop_init(&loop);
	s = create(&loop, opts);
	assert_int_equal(file_size_of(path), head_len);
	make_hist(&recs[0], 1);
	make_hist(&recs[1], 2);
	ops()->submit(s, recs, 2);
	close_and_run(&loop, s, 1000);
	assert_int_equal(uv_loop_close(&loop), 0);
	lines = read_lines(path);
	assert_int_equal(json_array_size(lines), want_old_lines + 2);
	if (want_old_lines)
		assert_int_equal(json_integer_value(
					 json_object_get(json_array_get(lines, 0), "old")),
				 1);
	assert_int_equal(json_integer_value(
				 json_object_get(json_array_get(lines, want_old_lines + 1), "seq")),
			 2);
	json_decref(lines);
}

static void test_open_cuts_torn_tail(void **state)
{
	static const char whole[] = "{\"old\":1}\n{\"old\":2}\n";

	check_torn_file("torn-short.jsonl", whole, sizeof(whole) - 1, 7, 2);
	check_torn_file("torn-long.jsonl", whole, sizeof(whole) - 1, 40000, 2);
	check_torn_file("torn-only.jsonl", "", 0, 300, 0);
	/* A whole file is left as it is. */
	check_torn_file("whole.jsonl", whole, sizeof(whole) - 1, 0, 2);
}

/* Close with a blocked write (a FIFO nobody reads) and with a compression
 * on the thread pool: each reports closed at the timeout, and the work in
 * flight finishes afterwards and frees the sink (ASan/valgrind see no
 * use-after-free or leak; uv_run returns only once it did). */
struct bounded_close {
	void *sink;
	int rfd, closed;
	struct ktel_test_latency latency;
	double done_ms, waited_ms;
	struct ktel_sink_stats st;
	bool watchdog_fired, plain_existed;
	const char *plain;
	uv_timer_t watchdog;
};

static void bounded_done(void *ctx)
{
	struct bounded_close *b = ctx;

	b->closed++;
	b->done_ms = ktel_test_latency_end(&b->latency, &b->waited_ms);
	ops()->stats(b->sink, &b->st);
	if (b->plain)
		b->plain_existed = exists(b->plain);
	/* Unblock the write: the reader goes, the write ends (EPIPE). */
	if (b->rfd >= 0)
		close(b->rfd);
	b->rfd = -1;
	uv_close((uv_handle_t *)&b->watchdog, NULL);
}

/* Without a bounded close, nothing would ever unblock the write. Late
 * enough that no load fires it first: the bound is done_ms's. */
static void on_watchdog(uv_timer_t *t)
{
	struct bounded_close *b = t->data;

	b->watchdog_fired = true;
	if (b->rfd >= 0)
		close(b->rfd);
	b->rfd = -1;
}

static void start_bounded_close(uv_loop_t *loop, struct bounded_close *b, uint64_t timeout_ms)
{
	uv_timer_init(loop, &b->watchdog);
	b->watchdog.data = b;
	uv_timer_start(&b->watchdog, on_watchdog, 30000, 0);
	ktel_test_latency_start(&b->latency, 0, 0);
	ops()->close(b->sink, timeout_ms, bounded_done, b);
	uv_run(loop, UV_RUN_DEFAULT);
	assert_int_equal(b->closed, 1);
	assert_int_equal(uv_loop_close(loop), 0);
	assert_false(b->watchdog_fired);
	/* Reported at the timeout: the loop's own time to it, less what the
	 * machine's load kept this thread waiting for a CPU. */
	printf("close with %" PRIu64 " ms timeout reported after %.0f ms, %.0f ms of it waiting "
	       "for a CPU\n",
	       timeout_ms, b->done_ms, b->waited_ms);
	assert_true(b->done_ms - b->waited_ms < 1000);
}

/* Closing while the limit still holds: the lines that never fit are
 * counted dropped and the file still ends in a whole line. */
static void test_short_write_then_close(void **state)
{
	struct bounded_close b = {.rfd = -1};
	struct ktel_record recs[10];
	char path[600], opts[700];
	json_t *lines;
	uv_loop_t loop;

	path_in_dir(path, sizeof(path), "short-close.jsonl");
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\"}", path);
	signal(SIGXFSZ, SIG_IGN);
	limit_file_size(3000);
	uv_loop_init(&loop);
	b.sink = create(&loop, opts);
	for (int i = 0; i < 10; i++)
		make_hist(&recs[i], i + 1);
	ops()->submit(b.sink, recs, 10);
	ktel_test_run_until(&loop, errors_n, &(struct wait_stat){b.sink, 1});
	start_bounded_close(&loop, &b, 100);
	limit_file_size(RLIM_INFINITY);
	assert_true(b.st.errors >= 1);
	assert_true(b.st.sent >= 1 && b.st.sent < 10);
	assert_int_equal(b.st.sent + b.st.dropped, 10);
	lines = read_lines(path); /* fails on a torn last line */
	assert_int_equal(json_array_size(lines), b.st.sent);
	json_decref(lines);
}

static void test_close_bounded_write_in_flight(void **state)
{
	struct bounded_close b = {.rfd = -1};
	struct ktel_record recs[200];
	char path[600], opts[700];
	uv_loop_t loop;

	path_in_dir(path, sizeof(path), "blocked.fifo");
	assert_int_equal(mkfifo(path, 0600), 0);
	signal(SIGPIPE, SIG_IGN);
	b.rfd = open(path, O_RDONLY | O_NONBLOCK);
	assert_true(b.rfd >= 0);
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\"}", path);
	uv_loop_init(&loop);
	b.sink = create(&loop, opts);
	/* ~110 KiB in one write: past the 64 KiB pipe buffer, so it blocks. */
	for (int i = 0; i < 200; i++)
		make_hist(&recs[i], i + 1);
	ops()->submit(b.sink, recs, 200);
	ktel_test_run_for(&loop, 50);
	start_bounded_close(&loop, &b, 50);
	/* The write in flight is reported as not flushed. */
	assert_int_equal(b.st.sent, 0);
	assert_int_equal(b.st.dropped, 200);
}

static void test_close_bounded_while_compressing(void **state)
{
	struct bounded_close b = {.rfd = -1};
	struct ktel_sink_stats st = {0};
	struct ktel_record rec;
	char path[600], opts[800], plain[700], gz[700], line[128];
	uv_loop_t loop;
	uint64_t x = 88172645463325252ULL;
	FILE *f;

	path_in_dir(path, sizeof(path), "big.jsonl");
	snprintf(plain, sizeof(plain), "%s.1", path);
	snprintf(gz, sizeof(gz), "%s.1.gz", path);
	/* 16 MiB of lines that compress slowly (random digits): the file
	 * rotates at the first write and its gzip takes far longer than the
	 * 30 ms close timeout. */
	f = fopen(path, "w");
	assert_non_null(f);
	for (size_t n = 0; n < (16u << 20);) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		n += snprintf(line, sizeof(line), "{\"noise\":%" PRIu64 ",\"more\":%" PRIu64 "}\n",
			      x, x * 2654435761u);
		fputs(line, f);
	}
	assert_int_equal(fclose(f), 0);
	snprintf(opts, sizeof(opts),
		 "{\"path\":\"%s\",\"rotate_bytes\":\"1M\",\"keep\":2,\"compress\":true}", path);
	uv_loop_init(&loop);
	b.sink = create(&loop, opts);
	b.plain = plain;
	make_hist(&rec, 1);
	ops()->submit(b.sink, &rec, 1);
	/* The line is written once the rotation is done (its directory fsync
	 * may wait for the 16 MiB to reach the disk), compression started. */
	ktel_test_run_until(&loop, sent_n, &(struct wait_stat){b.sink, 1});
	ops()->stats(b.sink, &st);
	assert_int_equal(st.sent, 1);
	start_bounded_close(&loop, &b, 30);
	/* Reported while path.1 was still being compressed ... */
	assert_true(b.plain_existed);
	assert_int_equal(b.st.sent, 1);
	assert_int_equal(b.st.dropped, 0);
	/* ... which then completed before the loop ran out of work. */
	assert_false(exists(plain));
	assert_true(exists(gz));
}

static bool router_sent_one(void *ctx)
{
	struct ktel_sink_stats st;

	assert_int_equal(ktel_router__sink_stats(ctx, "file", &st), 0);
	return st.sent >= 1;
}

static void test_router_creates_json(void **state)
{
	uv_loop_t loop;
	struct ktel_router *r;
	struct ktel_record rec;
	struct ktel_sink_stats st;
	struct ktel_err err = {0};
	char path[600];
	json_t *opts, *lines;
	int closed = 0;

	path_in_dir(path, sizeof(path), "router.jsonl");
	uv_loop_init(&loop);
	r = ktel_router__new(&loop);
	opts = json_pack("{s:s,s:s}", "type", "json", "path", path);
	assert_int_equal(ktel_router__add_sink(r, "file", "json", opts, &err), 0);
	json_decref(opts);
	make_hist(&rec, 1);
	ktel_router__route(r, &rec, 1, NULL, 0);
	ktel_test_run_until(&loop, router_sent_one, r);
	assert_int_equal(ktel_router__sink_stats(r, "file", &st), 0);
	assert_int_equal(st.sent, 1);
	ktel_router__close(r, 1000, ktel_test_count_closed, &closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(closed, 1);
	ktel_router__free(r);
	assert_int_equal(uv_loop_close(&loop), 0);
	lines = read_lines(path);
	assert_int_equal(json_array_size(lines), 1);
	json_decref(lines);
}

/* Read all lines of a rotated set, oldest file first, and check each
 * file stays within rotate_bytes and holds only whole lines. */
static json_t *read_rotated(const char *path, unsigned keep, bool gz, size_t rotate_bytes)
{
	json_t *all = json_array();
	char name[700];

	for (unsigned k = keep + 1; k-- > 0;) {
		char *text;
		size_t len;
		json_t *lines;

		if (k == 0)
			snprintf(name, sizeof(name), "%s", path);
		else
			snprintf(name, sizeof(name), "%s.%u%s", path, k, gz ? ".gz" : "");
		if (!exists(name))
			continue;
		if (gz && k) {
			gzFile f = gzopen(name, "rb");
			int n;

			assert_non_null(f);
			text = malloc(1 << 20);
			n = gzread(f, text, 1 << 20);
			assert_true(n >= 0);
			gzclose(f);
			len = n;
		} else {
			text = slurp(name, &len);
		}
		assert_true(len <= rotate_bytes);
		lines = parse_lines(text, len);
		json_array_extend(all, lines);
		json_decref(lines);
		free(text);
	}
	return all;
}

static void check_rotation(const char *name, bool gz)
{
	uv_loop_t loop;
	struct ktel_record rec;
	struct ktel_sink_stats st;
	char path[600], opts[800], extra[700];
	json_t *all;
	size_t n;
	uint64_t seq0;
	void *s;

	path_in_dir(path, sizeof(path), name);
	snprintf(opts, sizeof(opts),
		 "{\"path\":\"%s\",\"rotate_bytes\":4000,\"keep\":3,\"compress\":%s}", path,
		 gz ? "true" : "false");
	uv_loop_init(&loop);
	s = create(&loop, opts);
	/* ~560-byte lines, 60 batches: many rotations. */
	for (int i = 1; i <= 60; i++) {
		make_hist(&rec, i);
		ops()->submit(s, &rec, 1);
		if (i % 7 == 0)
			ktel_test_run_for(&loop, 30);
	}
	/* Compression of each rotated file holds the next rotation back: a
	 * slow machine (valgrind, a loaded one) takes its time. */
	ktel_test_run_until(&loop, sent_n, &(struct wait_stat){s, 60});
	ops()->stats(s, &st);
	assert_int_equal(st.sent, 60);
	assert_int_equal(st.errors, 0);
	close_and_run(&loop, s, 2000);
	uv_loop_close(&loop);

	assert_true(exists(path));
	for (unsigned k = 1; k <= 3; k++) {
		snprintf(extra, sizeof(extra), "%s.%u%s", path, k, gz ? ".gz" : "");
		assert_true(exists(extra));
		if (gz) {
			snprintf(extra, sizeof(extra), "%s.%u", path, k);
			assert_false(exists(extra));
		}
	}
	snprintf(extra, sizeof(extra), "%s.4%s", path, gz ? ".gz" : "");
	assert_false(exists(extra));
	all = read_rotated(path, 3, gz, 4000);
	n = json_array_size(all);
	/* Four files of 4 or so ~830-byte lines: the newest lines, in order,
	 * none missing between the first kept and the last. */
	assert_true(n >= 4 * 4 && n <= 4 * 7);
	seq0 = json_integer_value(json_object_get(json_array_get(all, 0), "seq"));
	for (size_t i = 0; i < n; i++)
		assert_int_equal(json_integer_value(json_object_get(json_array_get(all, i), "seq")),
				 seq0 + i);
	assert_int_equal(seq0 + n - 1, 60);
	json_decref(all);
}

static void test_rotation(void **state)
{
	check_rotation("rot.jsonl", false);
}

static void test_rotation_compressed(void **state)
{
	check_rotation("rotgz.jsonl", true);
}

/* ---- the fast formatter against a reference, hostile values ---- */

/* The reference: the JSON string escape as docs/sinks.md describes it, a
 * byte at a time with printf (the formatter before the fast path). */
static void ref_str(char **p, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	if (!s) {
		*p += sprintf(*p, "null");
		return;
	}
	*(*p)++ = '"';
	while (*s) {
		int n = s[0] >= 0xf5   ? 0
			: s[0] >= 0xf0 ? 4
			: s[0] >= 0xe0 ? 3
			: s[0] >= 0xc2 ? 2
				       : 0;
		int ok = n;

		for (int i = 1; i < n; i++)
			if ((s[i] & 0xc0) != 0x80)
				ok = 0;
		/* overlong, surrogate, over U+10FFFF: invalid */
		if (ok && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
			   (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f)))
			ok = 0;
		if (*s == '"' || *s == '\\') {
			*p += sprintf(*p, "\\%c", *s++);
		} else if (*s < 0x20 || *s == 0x7f) {
			*p += sprintf(*p, "\\u%04x", *s++);
		} else if (*s < 0x7f) {
			*(*p)++ = (char)*s++;
		} else if (ok) {
			memcpy(*p, s, (size_t)ok);
			*p += ok;
			s += ok;
		} else {
			*p += sprintf(*p, "\\ufffd");
			s++;
		}
	}
	*(*p)++ = '"';
}

static void ref_wall(char **p, int64_t ns)
{
	int64_t sec = ns / 1000000000, frac = ns % 1000000000;
	time_t t;
	struct tm tm;
	char date[64];

	if (frac < 0) {
		frac += 1000000000;
		sec--;
	}
	t = (time_t)sec;
	if (!gmtime_r(&t, &tm) || !strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm)) {
		*p += sprintf(*p, "null");
		return;
	}
	*p += sprintf(*p, "\"%s.%09" PRId64 "Z\"", date, frac);
}

static int64_t ref_floor_s(int64_t ns)
{
	return ns / 1000000000 - (ns % 1000000000 < 0);
}

/* The whole line of an event record, by the documented schema. */
static void ref_event_line(const struct ktel_record *r, char *out)
{
	char *p = out;
	bool first = true;

	p += sprintf(p, "{\"metric\":");
	ref_str(&p, r->metric);
	p += sprintf(p, ",\"atom\":");
	ref_str(&p, r->atom);
	p += sprintf(p, ",\"atom_id\":%" PRIu32 ",\"unit\":", r->atom_id);
	ref_str(&p, r->unit);
	p += sprintf(p,
		     ",\"type\":\"event\",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64
		     ",\"start\":",
		     r->start_wall_ns, r->end_wall_ns);
	ref_wall(&p, r->start_wall_ns);
	p += sprintf(p, ",\"end\":");
	ref_wall(&p, r->end_wall_ns);
	p += sprintf(p,
		     ",\"start_s\":%" PRId64 ",\"end_s\":%" PRId64 ",\"start_boot_ns\":%" PRIu64
		     ",\"end_boot_ns\":%" PRIu64 ",\"boot_id\":",
		     ref_floor_s(r->start_wall_ns), ref_floor_s(r->end_wall_ns),
		     r->start_boottime_ns, r->end_boottime_ns);
	ref_str(&p, r->boot_id);
	p += sprintf(p, ",\"map_id\":%" PRIu32 ",\"seq\":%" PRIu64 ",\"dims\":{", r->map_id,
		     r->seq);
	for (uint32_t i = 0; i < r->n_dims; i++) {
		p += sprintf(p, "%s", i ? "," : "");
		ref_str(&p, r->dims[i].name);
		*p++ = ':';
		if (r->dims[i].label)
			ref_str(&p, r->dims[i].label);
		else
			p += sprintf(p, "%" PRId64, r->dims[i].value);
	}
	p += sprintf(p, "},\"dims_raw\":{");
	for (uint32_t i = 0; i < r->n_dims; i++) {
		p += sprintf(p, "%s", i ? "," : "");
		ref_str(&p, r->dims[i].name);
		p += sprintf(p, ":%" PRId64, r->dims[i].value);
	}
	p += sprintf(p, "},\"fields\":{");
	for (uint32_t i = 0; i < r->event.n_fields; i++) {
		const struct ktel_event_field *f = &r->event.fields[i];

		p += sprintf(p, "%s", i ? "," : "");
		ref_str(&p, f->name);
		*p++ = ':';
		if (f->type == KTEL_FIELD_VALUE_STRING)
			ref_str(&p, f->s);
		else if (f->label)
			ref_str(&p, f->label);
		else if (f->type == KTEL_FIELD_VALUE_INT)
			p += sprintf(p, "%" PRId64, f->i);
		else
			p += sprintf(p, "%" PRIu64, f->u);
	}
	p += sprintf(p, "},\"fields_raw\":{");
	for (uint32_t i = 0; i < r->event.n_fields; i++) {
		const struct ktel_event_field *f = &r->event.fields[i];

		if (f->type == KTEL_FIELD_VALUE_STRING)
			continue;
		p += sprintf(p, "%s", first ? "" : ",");
		first = false;
		ref_str(&p, f->name);
		if (f->type == KTEL_FIELD_VALUE_INT)
			p += sprintf(p, ":%" PRId64, f->i);
		else
			p += sprintf(p, ":%" PRIu64, f->u);
	}
	sprintf(p, "}}\n");
}

/* The sinks' batch path (kept strings): the first line keeps the batch's
 * strings, the second takes every repeated one from there; both equal the
 * reference. */
static void expect_batch_like_reference(const struct ktel_record *r, const char *want)
{
	static struct ktel_json_strs strs;
	struct ktel_textbuf b = {0};
	size_t len = strlen(want);

	ktel_json_strs__reset(&strs);
	assert_true(ktel_json__append(&b, &strs, r));
	assert_true(ktel_json__append(&b, &strs, r));
	assert_false(b.fail);
	assert_int_equal(b.len, 2 * len);
	if (memcmp(b.p, want, len) || memcmp(b.p + len, want, len))
		fail_msg("batch got  %.*s\nwant %s", (int)b.len, b.p, want);
	free(b.p);
}

/* One event line from the sink's formatter equals the reference, byte for
 * byte, and parses. */
static void expect_like_reference(const struct ktel_record *r)
{
	static char want[1 << 16];
	char *buf = NULL;
	size_t len = 0, cap = 0;
	json_error_t jerr;
	json_t *j;

	ref_event_line(r, want);
	assert_int_equal(ktel_json__format_line(r, &buf, &len, &cap), 0);
	assert_int_equal(len, strlen(want));
	if (memcmp(buf, want, len))
		fail_msg("got  %.*s\nwant %s", (int)len, buf, want);
	/* (integers over INT64_MAX are JSON; jansson takes them as reals) */
	j = json_loadb(buf, len, JSON_DECODE_INT_AS_REAL, &jerr);
	if (!j)
		fail_msg("does not parse: %s: %.*s", jerr.text, (int)len, buf);
	json_decref(j);
	free(buf);
	expect_batch_like_reference(r, want);
}

static void test_format_matches_reference(void **state)
{
	/* Escapes, UTF-8 (valid, truncated, invalid lead and continuation
	 * bytes, surrogates, overlong forms, over U+10FFFF), and strings
	 * of every length around the 8-byte scan with the hostile byte at
	 * every position. */
	static const char *const hostile[] = {
		"",
		"a",
		"\"",
		"\\",
		"\x01",
		"\x1f",
		"\x7f",
		" ",
		"~",
		"\t\n\r\b\f",
		"caf\xc3\xa9",
		"\xe2\x82\xac",
		"\xf0\x9f\x98\x80",
		"\xf4\x8f\xbf\xbf",
		"\xc3",
		"\xe2\x82",
		"\xf0\x9f\x98",
		"\xc0\xaf",
		"\xc1\xbf",
		"\xf5\x80\x80\x80",
		"\xff",
		"\xfe\xff",
		"\x80",
		"\xbf\xbf",
		"\xed\xa0\x80",
		"\xe0\x80\x80",
		"\xed\x9f\xbf",
		"\xe0\xa0\x80",
		"\xf0\x8f\xbf\xbf",
		"\xf4\x90\x80\x80",
		"a\"b\\c\x01"
		"d\x7f"
		"e\xc3\xa9"
		"f\xff"
		"g",
		"0123456789abcdef0123456789abcdef\"",
		"\"0123456789abcdef0123456789abcdef",
	};
	static const int64_t ints[] = {0,         -1, 1,  INT64_MIN,   INT64_MIN + 1,
				       INT64_MAX, -9, 10, -1000000000, 999999999};
	static const int64_t walls[] = {0,
					1,
					-1,
					999999999,
					1000000000,
					-1000000000,
					-1000000001,
					1700000000123456789LL,
					INT64_MAX,
					INT64_MIN + 1,
					4102444800000000001LL};
	char str[64];
	struct ktel_event_field fields[5];
	struct ktel_record r;

	(void)state;
	memset(&r, 0, sizeof(r));
	r.type = KTEL_RECORD_EVENT;
	r.metric = "m";
	r.unit = "events";
	r.boot_id = "b00t";
	r.n_dims = 2;
	r.dims[0] = (struct ktel_dim){.name = "d0", .value = -5, .label = "L"};
	r.dims[1] = (struct ktel_dim){.name = "d1", .value = INT64_MIN};
	r.event.fields = fields;
	r.event.n_fields = 5;
	fields[0] = (struct ktel_event_field){.name = "s", .type = KTEL_FIELD_VALUE_STRING};
	fields[1] = (struct ktel_event_field){.name = "i", .type = KTEL_FIELD_VALUE_INT};
	fields[2] = (struct ktel_event_field){.name = "u", .type = KTEL_FIELD_VALUE_UINT};
	fields[3] = (struct ktel_event_field){.name = "l",
					      .type = KTEL_FIELD_VALUE_UINT,
					      .u = 3,
					      .label = "LABEL"};
	fields[4] = (struct ktel_event_field){.name = "z", .type = KTEL_FIELD_VALUE_INT};
	for (size_t k = 0; k < sizeof(hostile) / sizeof(hostile[0]); k++) {
		/* Every string as a value, a key, a label, metric, unit, atom. */
		fields[0].s = hostile[k];
		fields[1].name = hostile[k];
		fields[3].label = hostile[k];
		r.dims[0].name = hostile[k];
		r.dims[0].label = hostile[k];
		r.metric = hostile[k];
		r.atom = hostile[k];
		r.unit = hostile[k];
		expect_like_reference(&r);
		/* ... and at every offset of a longer plain string. */
		for (size_t len = 0; len + strlen(hostile[k]) < sizeof(str) - 1 && len < 40;
		     len++) {
			memset(str, 'x', len);
			strcpy(str + len, hostile[k]);
			strcat(str, "yyyyyyyyy" + (len % 10));
			fields[0].s = str;
			fields[1].name = str;
			expect_like_reference(&r);
		}
	}
	fields[0].s = "plain";
	fields[1].name = "i";
	r.metric = "m";
	r.atom = NULL;
	r.unit = NULL;
	r.dims[0].name = "d0";
	r.dims[0].label = NULL;
	for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
		fields[1].i = ints[k];
		fields[2].u = (uint64_t)ints[k]; /* UINT64_MAX, 2^63 ... */
		fields[4].i = ints[k];
		r.dims[0].value = ints[k];
		r.seq = (uint64_t)ints[k];
		r.atom_id = (uint32_t)ints[k];
		r.map_id = UINT32_MAX - (uint32_t)k;
		r.start_boottime_ns = (uint64_t)ints[k];
		r.end_boottime_ns = UINT64_MAX - (uint64_t)k;
		expect_like_reference(&r);
		/* end = start: the number written once, repeated. */
		r.end_boottime_ns = r.start_boottime_ns;
		expect_like_reference(&r);
	}
	for (size_t k = 0; k < sizeof(walls) / sizeof(walls[0]); k++) {
		/* end = start (the kept text) and end != start, in turn. */
		r.start_wall_ns = walls[k];
		r.end_wall_ns = walls[k];
		expect_like_reference(&r);
		r.end_wall_ns = walls[(k + 1) % (sizeof(walls) / sizeof(walls[0]))];
		expect_like_reference(&r);
	}
}

/* Kept strings are forgotten at a batch's reset: the same address holding
 * other text in the next batch (a freed and reused name) is escaped anew. */
static void test_kept_strings_forgotten_per_batch(void **state)
{
	static struct ktel_json_strs strs;
	struct ktel_event_field f = {.type = KTEL_FIELD_VALUE_UINT, .u = 7};
	struct ktel_record r = {.type = KTEL_RECORD_EVENT, .unit = "events"};
	struct ktel_textbuf b = {0};
	char name[16] = "first";

	(void)state;
	f.name = name;
	r.metric = name;
	r.dims[0] = (struct ktel_dim){.name = name, .value = 1, .label = name};
	r.n_dims = 1;
	r.event.fields = &f;
	r.event.n_fields = 1;
	ktel_json_strs__reset(&strs);
	assert_true(ktel_json__append(&b, &strs, &r));
	assert_non_null(strstr(b.p, "\"first\""));
	strcpy(name, "other");
	b.len = 0;
	ktel_json_strs__reset(&strs);
	assert_true(ktel_json__append(&b, &strs, &r));
	assert_false(b.fail);
	assert_null(strstr(b.p, "first"));
	assert_non_null(strstr(b.p, "{\"metric\":\"other\""));
	assert_non_null(strstr(b.p, "\"dims\":{\"other\":\"other\"}"));
	assert_non_null(strstr(b.p, "\"fields_raw\":{\"other\":7}"));
	free(b.p);
}

/* ---- durability (sink.h durable/mark) and recovery at start ---- */

struct acks {
	uint64_t last;
	int calls;
};

static void on_ack(void *ctx, uint64_t mark)
{
	struct acks *a = ctx;

	assert_true(mark > a->last);
	a->last = mark;
	a->calls++;
}

static bool acked_3(void *ctx)
{
	return ((struct acks *)ctx)->last >= 3;
}

/* A mark is acked once the batches before it are written and fsynced; a
 * mark with nothing queued at once; stdout is not durable. */
static void check_marks(bool fsync_on)
{
	struct ktel_record recs[4];
	struct acks a = {0};
	char path[600], opts[700];
	uv_loop_t loop;
	json_t *lines;
	void *s;

	path_in_dir(path, sizeof(path), fsync_on ? "marks-fsync.jsonl" : "marks.jsonl");
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\",\"fsync\":%s}", path,
		 fsync_on ? "true" : "false");
	uv_loop_init(&loop);
	s = create(&loop, opts);
	assert_true(ops()->durable(s, on_ack, &a));
	/* Nothing queued: durable now. */
	ops()->mark(s, 1);
	assert_int_equal(a.last, 1);
	for (int i = 0; i < 4; i++)
		make_hist(&recs[i], i + 1);
	ops()->submit(s, recs, 2);
	ops()->mark(s, 2);
	ops()->submit(s, recs + 2, 2);
	ops()->mark(s, 3);
	/* Queued, not written: not durable. */
	assert_int_equal(a.last, 1);
	/* Written (and fsynced) on the writer thread, as late as the machine
	 * lets it. */
	ktel_test_run_until(&loop, acked_3, &a);
	assert_int_equal(a.last, 3);
	/* The two batches of one loop turn went out in one write (and one
	 * fsync): one ack for both, not one per batch. */
	assert_int_equal(a.calls, 2);
	lines = read_lines(path);
	assert_int_equal(json_array_size(lines), 4);
	json_decref(lines);
	close_and_run(&loop, s, 2000);
	uv_loop_close(&loop);
}

static void test_marks_acked_when_durable(void **state)
{
	uv_loop_t loop;
	struct acks a = {0};
	void *s;

	check_marks(true);
	check_marks(false);
	uv_loop_init(&loop);
	s = create(&loop, "{\"path\":\"-\"}");
	assert_false(ops()->durable(s, on_ack, &a));
	close_and_run(&loop, s, 100);
	uv_loop_close(&loop);
}

/* The saved state of the test: metric m of boot B, map 7, up to seq 2. */
static int window_fn(void *ctx, const char *boot_id, const char *metric, uint32_t map_id,
		     uint64_t seq)
{
	(*(int *)ctx)++;
	if (!boot_id || !metric || strcmp(boot_id, "B") || strcmp(metric, "m") || map_id != 7)
		return 0;
	return seq <= 2 ? 1 : 2;
}

static void check_recover(const char *name, const char *before, const char *after)
{
	char path[600], opts[700];
	struct ktel_err err = {0};
	size_t len;
	uv_loop_t loop;
	char *text;
	int calls = 0;
	FILE *f;
	void *s;

	path_in_dir(path, sizeof(path), name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(before, f);
	fclose(f);
	uv_loop_init(&loop);
	snprintf(opts, sizeof(opts), "{\"path\":\"%s\"}", path);
	s = create(&loop, opts);
	assert_int_equal(ops()->recover(s, window_fn, &calls, &err), 0);
	text = slurp(path, &len);
	assert_string_equal(text, after);
	free(text);
	/* The sink appends after the cut (its size followed). */
	{
		struct ktel_record r;

		make_hist(&r, 99);
		ops()->submit(s, &r, 1);
	}
	close_and_run(&loop, s, 2000);
	uv_loop_close(&loop);
	text = slurp(path, &len);
	assert_int_equal(strncmp(text, after, strlen(after)), 0);
	assert_non_null(strstr(text + strlen(after), "\"seq\":99"));
	assert_int_equal(text[len - 1], '\n');
	free(text);
}

#define L(boot, metric, map, seq)                                                               \
	"{\"metric\":\"" metric "\",\"boot_id\":\"" boot "\",\"map_id\":" #map ",\"seq\":" #seq \
	"}\n"

static void test_recover_cuts_windows_past_state(void **state)
{
	/* Windows 3 and 4 came after the state: cut; the event line between
	 * them (another metric) and a line that does not parse are kept. */
	check_recover("rec1.jsonl",
		      L("B", "m", 7, 1) L("B", "m", 7, 2) L("B", "m", 7, 3)
			      L("B", "ev", 9, 1) "not json\n" L("B", "m", 7, 4),
		      L("B", "m", 7, 1) L("B", "m", 7, 2) L("B", "ev", 9, 1) "not json\n");
	/* Nothing past the state: untouched. */
	check_recover("rec2.jsonl", L("B", "m", 7, 1) L("B", "m", 7, 2) L("B", "ev", 9, 5),
		      L("B", "m", 7, 1) L("B", "m", 7, 2) L("B", "ev", 9, 5));
	/* Another boot, another map: not this state's windows. */
	check_recover("rec3.jsonl", L("A", "m", 7, 9) L("B", "m", 8, 9),
		      L("A", "m", 7, 9) L("B", "m", 8, 9));
	/* Everything past the state, back to the start of the file. */
	check_recover("rec4.jsonl", L("B", "m", 7, 3) L("B", "m", 7, 4), "");
	check_recover("rec5.jsonl", "", "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_marks_acked_when_durable),
		cmocka_unit_test(test_recover_cuts_windows_past_state),
		cmocka_unit_test(test_line_format),
		cmocka_unit_test(test_format_matches_reference),
		cmocka_unit_test(test_kept_strings_forgotten_per_batch),
		cmocka_unit_test(test_other_schemes),
		cmocka_unit_test(test_series_end_skipped),
		cmocka_unit_test(test_queue_bound_drops_newest),
		cmocka_unit_test(test_sizes_as_config),
		cmocka_unit_test(test_stdout_mode),
		cmocka_unit_test(test_option_errors),
		cmocka_unit_test(test_missing_directories_made),
		cmocka_unit_test(test_write_errors_retried),
		cmocka_unit_test(test_retry_backoff_jittered),
		cmocka_unit_test(test_short_write_cut_back),
		cmocka_unit_test(test_short_write_then_close),
		cmocka_unit_test(test_open_cuts_torn_tail),
		cmocka_unit_test(test_close_bounded_write_in_flight),
		cmocka_unit_test(test_close_bounded_while_compressing),
		cmocka_unit_test(test_router_creates_json),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_rotation_compressed),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
