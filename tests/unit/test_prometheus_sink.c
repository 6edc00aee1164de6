// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Prometheus sink on a real libuv loop and a real HTTP server on
 * 127.0.0.1: exact exposition lines (cumulative over resets, unit suffixes,
 * escaping, label renames), a real scrape over TCP, 404/405, series limit,
 * type changes, option errors, a taken port, close. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "sink_test.h"

#include "prom_series.h"
#include "prometheus/prometheus_sink.h"
#include "sinks.h"
#include "ktel_test.h"

static const struct ktel_sink_ops *ops(void)
{
	const struct ktel_sink_ops *o = ktel_sink_type_find("prometheus");

	assert_non_null(o);
	assert_ptr_equal(o, &ktel_prometheus_sink_ops);
	return o;
}

static void *create(uv_loop_t *loop, const char *opts_json)
{
	return ktel_test_sink_create(ops(), loop, "prom", opts_json);
}

static void close_and_run(uv_loop_t *loop, void *priv)
{
	int closed = 0;

	ops()->close(priv, 1000, ktel_test_count_closed, &closed);
	uv_run(loop, UV_RUN_DEFAULT);
	assert_int_equal(closed, 1);
	assert_int_equal(uv_loop_close(loop), 0);
}

static struct ktel_record hist(const char *metric, const char *unit, uint32_t n_buckets,
			       const uint64_t *counts, bool has_sum, uint64_t sum)
{
	struct ktel_record r = {
		.type = KTEL_RECORD_HISTOGRAM,
		.metric = metric,
		.unit = unit,
		.boot_id = "b",
		.map_id = 1,
	};

	r.hist.delta.scheme = KTEL_HIST_LOG2;
	r.hist.delta.n_buckets = n_buckets;
	memcpy(r.hist.delta.counts, counts, n_buckets * sizeof(*counts));
	r.hist.delta.has_sum = has_sum;
	r.hist.delta.sum = sum;
	r.hist.total = r.hist.delta;
	return r;
}

static struct ktel_record counter(const char *metric, const char *unit, uint64_t delta,
				  uint64_t total)
{
	struct ktel_record r = {
		.type = KTEL_RECORD_COUNTER,
		.metric = metric,
		.unit = unit,
		.boot_id = "b",
	};

	r.counter.delta = delta;
	r.counter.total = total;
	return r;
}

/*
 * Check and cut the process_start_time_seconds family that ends every
 * exposition (its value is this process's start: within the last hour and
 * not in the future), so the rest compares byte for byte. Returns t.
 */
static char *strip_start_time(char *t)
{
	static const char head[] = "# HELP process_start_time_seconds Start time of the process "
				   "since unix epoch in seconds.\n"
				   "# TYPE process_start_time_seconds gauge\n"
				   "process_start_time_seconds";
	char *p = strstr(t, head), *end, *v_at;
	double v;

	assert_non_null(p);
	/* The configured labels, when there are, before the value. */
	v_at = p + strlen(head);
	if (*v_at == '{')
		v_at = strchr(v_at, '}') + 1;
	assert_int_equal(*v_at, ' ');
	v = strtod(v_at + 1, &end);
	assert_string_equal(end, "\n");
	assert_true(v <= (double)time(NULL) + 1 && v >= (double)time(NULL) - 3600);
	*p = '\0';
	return t;
}

static char *text(void *priv)
{
	size_t len;
	char *t = ktel_prometheus_sink__text(priv, &len);

	assert_non_null(t);
	assert_int_equal(strlen(t), len);
	return strip_start_time(t);
}

static const char self_fmt[] =
	"# HELP ktel_prometheus_sink_series Series this sink exposes.\n"
	"# TYPE ktel_prometheus_sink_series gauge\n"
	"ktel_prometheus_sink_series{sink=\"prom\"} %d\n"
	"# HELP ktel_prometheus_sink_series_dropped_total Records dropped because they would "
	"add a series beyond max_series.\n"
	"# TYPE ktel_prometheus_sink_series_dropped_total counter\n"
	"ktel_prometheus_sink_series_dropped_total{sink=\"prom\"} %d\n"
	"# HELP ktel_prometheus_sink_records_total Records applied to the exposed state.\n"
	"# TYPE ktel_prometheus_sink_records_total counter\n"
	"ktel_prometheus_sink_records_total{sink=\"prom\"} %d\n"
	"# HELP ktel_prometheus_sink_records_dropped_total Records not exposed (series limit, "
	"type changes, no memory).\n"
	"# TYPE ktel_prometheus_sink_records_dropped_total counter\n"
	"ktel_prometheus_sink_records_dropped_total{sink=\"prom\"} %d\n"
	"# HELP ktel_prometheus_sink_records_skipped_total Records with no Prometheus form "
	"(events), not counted as dropped.\n"
	"# TYPE ktel_prometheus_sink_records_skipped_total counter\n"
	"ktel_prometheus_sink_records_skipped_total{sink=\"prom\"} %d\n"
	"# HELP ktel_prometheus_sink_errors_total Failures to render the exposition.\n"
	"# TYPE ktel_prometheus_sink_errors_total counter\n"
	"ktel_prometheus_sink_errors_total{sink=\"prom\"} 0\n"
	"# HELP ktel_prometheus_sink_scrapes_total Scrapes served.\n"
	"# TYPE ktel_prometheus_sink_scrapes_total counter\n"
	"ktel_prometheus_sink_scrapes_total{sink=\"prom\"} %d\n"
	"# HELP ktel_prometheus_sink_connections_cut_total Connections shut down because a "
	"request took longer than the deadline.\n"
	"# TYPE ktel_prometheus_sink_connections_cut_total counter\n"
	"ktel_prometheus_sink_connections_cut_total{sink=\"prom\"} 0\n"
	"# HELP ktel_prometheus_sink_connections_evicted_total Slow or idle connections shut "
	"down to make room for a new one.\n"
	"# TYPE ktel_prometheus_sink_connections_evicted_total counter\n"
	"ktel_prometheus_sink_connections_evicted_total{sink=\"prom\"} 0\n";

static char *self_text(int series, int series_dropped, int sent, int dropped, int skipped,
		       int scrapes)
{
	char *s = NULL;

	assert_true(asprintf(&s, self_fmt, series, series_dropped, sent, dropped, skipped,
			     scrapes) > 0);
	return s;
}

/* The records of the exact-text test, in two batches: the second resets the
 * histogram and the counter (delta = the new, smaller total), so the text
 * shows the new totals (a counter reset, as Prometheus sees a new map). */
static void submit_mixed(void *priv)
{
	static const uint64_t c1[] = {1, 2, 0, 1}, c2[] = {0, 1, 1, 0}, c3[] = {0, 0, 0, 2};
	struct ktel_record a[4], b[4];

	a[0] = hist("runq_latency", "us", 4, c1, true, 10);
	ktel_test_add_dim(&a[0], "cpu", 3, NULL);
	a[1] = counter("oom_kills", "kills", 5, 5);
	a[2] = (struct ktel_record){.type = KTEL_RECORD_GAUGE,
				    .metric = "ktel_sink_queued",
				    .unit = "items",
				    .gauge = -5};
	ktel_test_add_dim(&a[2], "sink", 0, "prom");
	a[3] = (struct ktel_record){.type = KTEL_RECORD_EVENT, .metric = "oom_kill_events"};
	ops()->submit(priv, a, 4);

	b[0] = hist("runq_latency", "us", 4, c2, true, 5);
	ktel_test_add_dim(&b[0], "cpu", 3, NULL);
	b[1] = hist("runq_latency", "us", 4, c3, false, 0);
	ktel_test_add_dim(&b[1], "cpu", 7, "x\"y\\z\nw");
	b[2] = counter("oom_kills", "kills", 3, 3);
	b[3] = a[2];
	b[3].gauge = 12;
	ops()->submit(priv, b, 4);
}

static const char mixed_text[] =
	"# HELP ktel_runq_latency_seconds ktelemetry metric runq_latency (unit: us, exposed "
	"in seconds)\n"
	"# TYPE ktel_runq_latency_seconds histogram\n"
	"ktel_runq_latency_seconds_bucket{cpu=\"3\",le=\"1e-06\"} 0\n"
	"ktel_runq_latency_seconds_bucket{cpu=\"3\",le=\"2e-06\"} 1\n"
	"ktel_runq_latency_seconds_bucket{cpu=\"3\",le=\"4e-06\"} 2\n"
	"ktel_runq_latency_seconds_bucket{cpu=\"3\",le=\"+Inf\"} 2\n"
	"ktel_runq_latency_seconds_sum{cpu=\"3\"} 5e-06\n"
	"ktel_runq_latency_seconds_count{cpu=\"3\"} 2\n"
	"ktel_runq_latency_seconds_bucket{cpu=\"x\\\"y\\\\z\\nw\",le=\"1e-06\"} 0\n"
	"ktel_runq_latency_seconds_bucket{cpu=\"x\\\"y\\\\z\\nw\",le=\"2e-06\"} 0\n"
	"ktel_runq_latency_seconds_bucket{cpu=\"x\\\"y\\\\z\\nw\",le=\"4e-06\"} 0\n"
	"ktel_runq_latency_seconds_bucket{cpu=\"x\\\"y\\\\z\\nw\",le=\"+Inf\"} 2\n"
	"ktel_runq_latency_seconds_count{cpu=\"x\\\"y\\\\z\\nw\"} 2\n"
	"# HELP ktel_oom_kills_total ktelemetry metric oom_kills (unit: kills)\n"
	"# TYPE ktel_oom_kills_total counter\n"
	"ktel_oom_kills_total 3\n"
	"# HELP ktel_sink_queued ktelemetry metric ktel_sink_queued (unit: items)\n"
	"# TYPE ktel_sink_queued gauge\n"
	"ktel_sink_queued{sink=\"prom\"} 12\n";

static void test_exact_text(void **state)
{
	uv_loop_t loop;
	struct ktel_sink_stats st;
	void *priv;
	char *t, *self, *want;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"port\":0}");
	submit_mixed(priv);
	t = text(priv);
	self = self_text(4, 0, 7, 0, 1, 0);
	assert_true(asprintf(&want, "%s%s", mixed_text, self) > 0);
	assert_string_equal(t, want);
	ops()->stats(priv, &st);
	assert_int_equal(st.sent, 7);
	assert_int_equal(st.dropped, 0); /* the event is skipped, not lost */
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.queued, 0);
	free(t);
	free(self);
	free(want);
	close_and_run(&loop, priv);
}

/* Every bound formatting path at once, for a byte-for-byte comparison with
 * the text the sink produced before bounds were computed once per family:
 * log2-floor bounds in ns (fractions of a second), linear bounds in ms with
 * a negative minimum, scaled counters and gauges, two series per family
 * submitted interleaved. */
static void submit_bounds(void *priv)
{
	uint64_t c32[32], c6[6] = {1, 0, 2, 0, 0, 3};
	struct ktel_record r[5];

	for (int k = 0; k < 32; k++)
		c32[k] = (uint64_t)k % 3;
	r[0] = hist("wake_ns", "ns", 32, c32, true, 123456789);
	r[0].hist.delta.scheme = KTEL_HIST_LOG2_FLOOR;
	ktel_test_add_dim(&r[0], "cpu", 0, NULL);
	r[1] = hist("io_ms", "ms", 6, c6, true, 7);
	r[1].hist.delta.scheme = KTEL_HIST_LINEAR;
	r[1].hist.delta.linear_min = -5;
	r[1].hist.delta.linear_step = 3;
	r[2] = counter("busy", "ns", 1500, 1500);
	r[3] = (struct ktel_record){.type = KTEL_RECORD_GAUGE,
				    .metric = "lag",
				    .unit = "us",
				    .gauge = -2500};
	r[4] = r[0];
	r[4].dims[0].value = 1;
	ops()->submit(priv, r, 5);
	/* The same series again, its totals grown by the same counts. */
	for (int k = 0; k < 32; k++)
		r[0].hist.total.counts[k] *= 2;
	r[0].hist.delta.has_sum = false;
	r[1].dims[0] = (struct ktel_dim){.name = "dev", .label = "sda"};
	r[1].n_dims = 1;
	ops()->submit(priv, r, 2);
}

static const char bounds_text[] =
#include "prometheus_bounds_text.inc"
	;

static void test_exact_bounds_text(void **state)
{
	uv_loop_t loop;
	void *priv;
	char *t, *self, *want;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"port\":0}");
	submit_bounds(priv);
	t = text(priv);
	self = self_text(6, 0, 7, 0, 0, 0);
	assert_true(asprintf(&want, "%s%s", bounds_text, self) > 0);
	assert_string_equal(t, want);
	free(t);
	free(self);
	free(want);
	close_and_run(&loop, priv);
}

/* A full 32-bucket log2 histogram in bytes: integer bounds up to 2^30 then
 * +Inf, the overflow bucket only in +Inf; dims named "le" and "__x" and
 * with a '-' renamed; a prefix already present is not doubled. */
static void test_full_histogram_and_names(void **state)
{
	uint64_t c[32] = {0};
	struct ktel_record r;
	uv_loop_t loop;
	void *priv;
	char *t;

	c[10] = 3;
	c[31] = 1;
	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"port\":0,\"prefix\":\"kt:\"}");
	r = hist("dmabuf.sizes", "bytes", 32, c, true, 100);
	ktel_test_add_dim(&r, "le", 2, NULL);
	ktel_test_add_dim(&r, "__x", -1, NULL);
	ktel_test_add_dim(&r, "process-state", 4, "STATE_TOP");
	ops()->submit(priv, &r, 1);
	r = counter("kt:already_total", NULL, 2, 2);
	ops()->submit(priv, &r, 1);
	t = text(priv);
#define LBL "{dim_le=\"2\",dim___x=\"-1\",process_state=\"STATE_TOP\""
	assert_non_null(strstr(t, "# TYPE kt:dmabuf_sizes_bytes histogram\n"));
	assert_non_null(strstr(t, "\nkt:dmabuf_sizes_bytes_bucket" LBL ",le=\"1\"} 0\n"));
	assert_non_null(strstr(t, "\nkt:dmabuf_sizes_bytes_bucket" LBL ",le=\"512\"} 0\n"));
	assert_non_null(strstr(t, "\nkt:dmabuf_sizes_bytes_bucket" LBL ",le=\"1024\"} 3\n"));
	assert_non_null(strstr(t, "\nkt:dmabuf_sizes_bytes_bucket" LBL ",le=\"1073741824\"} 3\n"));
	assert_non_null(strstr(t, "\nkt:dmabuf_sizes_bytes_bucket" LBL ",le=\"+Inf\"} 4\n"));
	assert_non_null(strstr(t, "\nkt:dmabuf_sizes_bytes_sum" LBL "} 100\n"));
	assert_non_null(strstr(t, "\nkt:dmabuf_sizes_bytes_count" LBL "} 4\n"));
	assert_non_null(strstr(t, "# TYPE kt:already_total counter\nkt:already_total 2\n"));
#undef LBL
	/* 32 bucket lines, one per bound. */
	{
		int n = 0;

		for (const char *p = t; (p = strstr(p, "_bytes_bucket{")); p++)
			n++;
		assert_int_equal(n, 32);
	}
	free(t);
	close_and_run(&loop, priv);
}

/* ---- a real HTTP client over TCP ---- */

struct http_reply {
	int status;
	char *head, *body;
	size_t body_len;
};

static void http(unsigned port, const char *method, const char *path, struct http_reply *ret)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	char req[256], *buf = NULL, *sep;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd;

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	snprintf(req, sizeof(req),
		 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
		 "Content-Length: 0\r\n\r\n",
		 method, path);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	do {
		if (len + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 16384;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		n = read(fd, buf + len, 4096);
		assert_true(n >= 0);
		len += n;
	} while (n > 0);
	close(fd);
	buf[len] = '\0';
	sep = strstr(buf, "\r\n\r\n");
	assert_non_null(sep);
	*sep = '\0';
	assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &ret->status), 1);
	ret->head = buf;
	ret->body = sep + 4;
	if (ret->status == 200 && strcmp(method, "GET") == 0)
		strip_start_time(ret->body);
	ret->body_len = strlen(ret->body);
}

static void test_http_scrape(void **state)
{
	struct http_reply r;
	uv_loop_t loop;
	unsigned port;
	void *priv;
	char *self, *want;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"listen\":\"127.0.0.1\",\"port\":0}");
	port = ktel_prometheus_sink__port(priv);
	assert_true(port > 0);

	/* Before any record: the sink's own counters, nothing else. */
	http(port, "GET", "/metrics", &r);
	assert_int_equal(r.status, 200);
	self = self_text(0, 0, 0, 0, 0, 0);
	assert_string_equal(r.body, self);
	free(self);
	free(r.head);

	/* The loop renders what was submitted; the scrape serves it. */
	submit_mixed(priv);
	ktel_test_run_for(&loop, 20);
	http(port, "GET", "/metrics", &r);
	assert_int_equal(r.status, 200);
	assert_non_null(
		strcasestr(r.head, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"));
	self = self_text(4, 0, 7, 0, 1, 1); /* rendered after the first scrape */
	assert_true(asprintf(&want, "%s%s", mixed_text, self) > 0);
	assert_string_equal(r.body, want);
	assert_int_equal(r.body_len, strlen(want));
	free(self);
	free(want);
	free(r.head);

	/* HEAD: headers only. Other paths: 404. Other methods: 405. */
	http(port, "HEAD", "/metrics", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, 0);
	free(r.head);
	http(port, "GET", "/index.html", &r);
	assert_int_equal(r.status, 404);
	free(r.head);
	http(port, "GET", "/metrics/x", &r);
	assert_int_equal(r.status, 404);
	free(r.head);
	http(port, "POST", "/metrics", &r);
	assert_int_equal(r.status, 405);
	assert_non_null(strcasestr(r.head, "\r\nAllow: GET, HEAD"));
	free(r.head);

	/* A custom path; after close nothing listens any more. */
	close_and_run(&loop, priv);
	{
		struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
		assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), -1);
		assert_int_equal(errno, ECONNREFUSED);
		close(fd);
	}
}

/* A GET of path with one extra request header line (may be NULL); the
 * body as it came (binary), its length in body_len. */
static void http_get(unsigned port, const char *path, const char *header, struct http_reply *ret)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	char req[2048], *buf = NULL, *sep;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd;

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%sConnection: close\r\n\r\n", path,
		 header ? header : "", header ? "\r\n" : "");
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	do {
		if (len + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 16384;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		n = read(fd, buf + len, 4096);
		assert_true(n >= 0);
		len += n;
	} while (n > 0);
	close(fd);
	buf[len] = '\0';
	sep = strstr(buf, "\r\n\r\n");
	assert_non_null(sep);
	*sep = '\0';
	assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &ret->status), 1);
	ret->head = buf;
	ret->body = sep + 4;
	ret->body_len = len - (size_t)(ret->body - buf);
}

/* A gzip member, inflated; NUL-terminated. */
static char *gunzip(const char *in, size_t len)
{
	z_stream z = {0};
	size_t cap = 1 << 20;
	char *out = malloc(cap);

	assert_non_null(out);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)cap - 1;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	out[z.total_out] = '\0';
	inflateEnd(&z);
	return out;
}

/* Accept-Encoding as a client may send it, hostile ones included. */
static void test_accept_encoding(void **state)
{
	static const struct {
		const char *v;
		bool gzip;
	} cases[] = {
		{NULL, false},
		{"", false},
		{"gzip", true},
		{"GZip", true},
		{"x-gzip", true},
		{"deflate, gzip;q=1.0, *;q=0.5", true},
		{"br;q=1.0, gzip;q=0.8, *;q=0.1", true},
		{"gzip;q=0", false},
		{"gzip; q=0.000", false},
		{"gzip;Q=0.001", true},
		{"gzip;q=0, *", false},
		{"*", true},
		{"*;q=0", false},
		{"identity", false},
		{"deflate", false},
		{"gzipx", false},
		{"xgzip", false},
		{"gzip;q=", false},
		{"gzip;q=2", false},
		{"gzip;q=0.5x", false},
		{"gzip;level=9", true},
		{",,, ,gzip", true},
		{";;;q=1,gzip;;", true},
		{"gzip;q=1;q=0", false},
		{" \t gzip \t ", true},
	};
	char *huge;

	(void)state;
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(cases); i++)
		if (ktel_prometheus_accepts_gzip(cases[i].v) != cases[i].gzip)
			fail_msg("Accept-Encoding \"%s\": expected %s", cases[i].v ?: "(none)",
				 cases[i].gzip ? "gzip" : "no gzip");
	/* Past the bound the value is not read at all. */
	huge = malloc(KTEL_PROMETHEUS_MAX_ACCEPT_ENCODING + 2);
	assert_non_null(huge);
	memset(huge, ' ', KTEL_PROMETHEUS_MAX_ACCEPT_ENCODING + 1);
	memcpy(huge, "gzip", 4);
	huge[KTEL_PROMETHEUS_MAX_ACCEPT_ENCODING + 1] = '\0';
	assert_false(ktel_prometheus_accepts_gzip(huge));
	huge[KTEL_PROMETHEUS_MAX_ACCEPT_ENCODING] = '\0';
	assert_true(ktel_prometheus_accepts_gzip(huge));
	free(huge);
}

/*
 * Over real TCP: gzip when the request accepts it (Content-Encoding: gzip,
 * the same text once inflated), plain when it does not or refuses it with
 * q=0, Vary: Accept-Encoding on both; "/" is a small HTML page linking to
 * the (custom, escaped) metrics path.
 */
static void test_gzip_and_landing_page(void **state)
{
	struct http_reply plain, gz, no;
	uv_loop_t loop;
	unsigned port;
	void *priv;
	char *text;

	(void)state;
	uv_loop_init(&loop);
	priv = create(&loop, "{\"port\":0,\"path\":\"/m&x\"}");
	port = ktel_prometheus_sink__port(priv);
	submit_mixed(priv);
	ktel_test_run_for(&loop, 20);

	http_get(port, "/m&x", "Accept-Encoding: deflate, gzip;q=0.5", &gz);
	http_get(port, "/m&x", NULL, &plain);
	http_get(port, "/m&x", "accept-encoding: gzip;q=0, identity", &no);
	assert_int_equal(gz.status, 200);
	assert_non_null(strcasestr(gz.head, "\r\nContent-Encoding: gzip"));
	assert_non_null(strcasestr(gz.head, "\r\nVary: Accept-Encoding"));
	assert_non_null(
		strcasestr(gz.head, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"));
	assert_true(gz.body_len < plain.body_len);
	text = gunzip(gz.body, gz.body_len);
	/* No batch came between the two scrapes: the same text, byte for byte. */
	assert_int_equal(strlen(text), plain.body_len);
	assert_string_equal(text, plain.body);
	assert_non_null(strstr(text, "# TYPE ktel_oom_kills_total counter\n"));
	free(text);
	assert_int_equal(plain.status, 200);
	assert_null(strcasestr(plain.head, "Content-Encoding"));
	assert_non_null(strcasestr(plain.head, "\r\nVary: Accept-Encoding"));
	assert_int_equal(no.status, 200);
	assert_null(strcasestr(no.head, "Content-Encoding"));
	assert_string_equal(no.body, plain.body);
	free(gz.head);
	free(plain.head);
	free(no.head);

	http_get(port, "/", NULL, &plain);
	assert_int_equal(plain.status, 200);
	assert_non_null(strcasestr(plain.head, "\r\nContent-Type: text/html; charset=utf-8"));
	assert_non_null(strstr(plain.body, "<!DOCTYPE html>"));
	assert_non_null(strstr(plain.body, "<a href=\"/m&amp;x\">Metrics</a>"));
	/* Self-contained: nothing fetched from elsewhere. */
	assert_null(strstr(plain.body, "src="));
	assert_null(strstr(plain.body, "http"));
	free(plain.head);
	http_get(port, "/metrics", NULL, &plain);
	assert_int_equal(plain.status, 404);
	free(plain.head);
	close_and_run(&loop, priv);
}

/*
 * A batch costs the loop only its records: submit() leaves no work on the
 * loop (no render pass queued) and a scrape renders the state it finds, with
 * the loop never run. Without a batch in between, a scrape serves the text
 * rendered before (the scrape count in it does not move); after one, it
 * renders again.
 */
static void test_scrape_renders_without_loop(void **state)
{
	struct ktel_record r = counter("c", NULL, 2, 2);
	struct http_reply a, b, c;
	uv_loop_t loop;
	unsigned port;
	void *priv;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"port\":0}");
	port = ktel_prometheus_sink__port(priv);
	ops()->submit(priv, &r, 1);
	assert_int_equal(uv_loop_alive(&loop), 0);
	http(port, "GET", "/metrics", &a);
	assert_int_equal(a.status, 200);
	assert_non_null(strstr(a.body, "\nktel_c_total 2\n"));
	assert_non_null(strstr(a.body, "ktel_prometheus_sink_scrapes_total{sink=\"prom\"} 0\n"));
	http(port, "GET", "/metrics", &b);
	assert_string_equal(b.body, a.body);
	r.counter.total = 4;
	ops()->submit(priv, &r, 1);
	http(port, "GET", "/metrics", &c);
	assert_non_null(strstr(c.body, "\nktel_c_total 4\n"));
	assert_non_null(strstr(c.body, "ktel_prometheus_sink_scrapes_total{sink=\"prom\"} 2\n"));
	free(a.head);
	free(b.head);
	free(c.head);
	close_and_run(&loop, priv);
}

static void test_custom_path_and_ipv6(void **state)
{
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
	struct http_reply r;
	uv_loop_t loop;
	void *priv;
	int fd;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"port\":0,\"path\":\"/x/metrics\"}");
	http(ktel_prometheus_sink__port(priv), "GET", "/x/metrics", &r);
	assert_int_equal(r.status, 200);
	free(r.head);
	http(ktel_prometheus_sink__port(priv), "GET", "/metrics", &r);
	assert_int_equal(r.status, 404);
	free(r.head);
	close_and_run(&loop, priv);

	/* IPv6 loopback, when the host has it. */
	fd = socket(AF_INET6, SOCK_STREAM, 0);
	inet_pton(AF_INET6, "::1", &sin6.sin6_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin6, sizeof(sin6))) {
		printf("# no IPv6 loopback here: IPv6 listen not checked\n");
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"port\":0,\"listen\":\"::1\"}");
	{
		struct sockaddr_in6 to = sin6;
		char req[] = "GET /metrics HTTP/1.0\r\n\r\n", buf[32] = {0};

		to.sin6_port = htons(ktel_prometheus_sink__port(priv));
		fd = socket(AF_INET6, SOCK_STREAM, 0);
		assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
		assert_int_equal(write(fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
		assert_true(read(fd, buf, sizeof(buf) - 1) > 12);
		assert_memory_equal(buf, "HTTP/1.", 7); /* MHD answers 1.1 */
		assert_memory_equal(buf + 8, " 200", 4);
		close(fd);
	}
	close_and_run(&loop, priv);
}

static void test_series_limit_and_type_change(void **state)
{
	struct ktel_record r[3], g;
	struct ktel_sink_stats st;
	uv_loop_t loop;
	void *priv;
	char *t, *self;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"port\":0,\"max_series\":2}");
	for (int i = 0; i < 3; i++) {
		r[i] = counter("c", NULL, 1, 1);
		ktel_test_add_dim(&r[i], "i", i, NULL);
	}
	ops()->submit(priv, r, 3);
	/* The existing series still update; the third never appears. */
	for (int i = 0; i < 3; i++)
		r[i].counter.total = 2;
	ops()->submit(priv, r, 3);
	/* Same metric as a gauge: refused, the counter family stays. */
	g = (struct ktel_record){.type = KTEL_RECORD_GAUGE, .metric = "c", .gauge = 1};
	ktel_test_add_dim(&g, "i", 0, NULL);
	ops()->submit(priv, &g, 1);
	t = text(priv);
	self = self_text(2, 2, 4, 3, 0, 0);
	{
		char *want;

		assert_true(asprintf(&want,
				     "# HELP ktel_c_total ktelemetry metric c\n"
				     "# TYPE ktel_c_total counter\n"
				     "ktel_c_total{i=\"0\"} 2\nktel_c_total{i=\"1\"} 2\n%s",
				     self) > 0);
		assert_string_equal(t, want);
		free(want);
	}
	ops()->stats(priv, &st);
	assert_int_equal(st.sent, 4);
	assert_int_equal(st.dropped, 3);
	free(t);
	free(self);
	close_and_run(&loop, priv);
}

/*
 * A record with series_end (record.h) ends its series: the next scrape no
 * longer shows it, the series count falls, and it frees its place under
 * max_series; made again later, it starts from the record's total. Scrapes
 * in between (a render holding copies) are served throughout.
 */
static void test_series_end(void **state)
{
	struct ktel_record r[2], end;
	struct http_reply a, b, c;
	uv_loop_t loop;
	unsigned port;
	void *priv;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"port\":0,\"max_series\":2}");
	port = ktel_prometheus_sink__port(priv);
	for (int i = 0; i < 2; i++) {
		r[i] = counter("c", NULL, 3, 3);
		ktel_test_add_dim(&r[i], "cgroup", i, i ? "b.service" : "a.service");
	}
	ops()->submit(priv, r, 2);
	http(port, "GET", "/metrics", &a);
	assert_non_null(strstr(a.body, "ktel_c_total{cgroup=\"a.service\"} 3\n"));
	end = r[0];
	end.counter.delta = 0;
	end.series_end = true;
	ops()->submit(priv, &end, 1);
	http(port, "GET", "/metrics", &b);
	assert_null(strstr(b.body, "a.service"));
	assert_non_null(strstr(b.body, "ktel_c_total{cgroup=\"b.service\"} 3\n"));
	assert_non_null(strstr(b.body, "ktel_prometheus_sink_series{sink=\"prom\"} 1\n"));
	/* Its place is free again: a third series fits under max_series 2. */
	r[0] = counter("c", NULL, 1, 1);
	ktel_test_add_dim(&r[0], "cgroup", 2, "c.service");
	ops()->submit(priv, r, 1);
	http(port, "GET", "/metrics", &c);
	assert_non_null(strstr(c.body, "ktel_c_total{cgroup=\"c.service\"} 1\n"));
	assert_non_null(
		strstr(c.body, "ktel_prometheus_sink_series_dropped_total{sink=\"prom\"} 0\n"));
	free(a.head);
	free(b.head);
	free(c.head);
	close_and_run(&loop, priv);
}

/* A histogram whose shape changes (bucket count) is refused; a metric that
 * sanitizes to another's name is refused. */
static void test_shape_and_name_collisions(void **state)
{
	static const uint64_t c[32] = {1};
	struct ktel_record r[3];
	struct ktel_sink_stats st;
	uv_loop_t loop;
	void *priv;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"type\":\"prometheus\",\"port\":0}");
	r[0] = hist("h", NULL, 4, c, false, 0);
	r[1] = hist("h", NULL, 8, c, false, 0);
	r[2] = hist("h", NULL, 4, c, false, 0);
	ops()->submit(priv, r, 3);
	r[0] = counter("a.b", NULL, 1, 1);
	r[1] = counter("a_b", NULL, 1, 1);
	ops()->submit(priv, r, 2);
	ops()->stats(priv, &st);
	assert_int_equal(st.sent, 3);
	assert_int_equal(st.dropped, 2);
	close_and_run(&loop, priv);
}

static void expect_create_error(const char *opts_json, int code, const char *msg)
{
	json_t *opts = json_loads(opts_json, 0, NULL);
	struct ktel_err err = {0};
	void *priv = NULL;
	uv_loop_t loop;

	uv_loop_init(&loop);
	assert_non_null(opts);
	assert_int_equal(ops()->create(&loop, "prom", opts, &priv, &err), -code);
	assert_null(priv);
	assert_string_equal(err.msg, msg);
	json_decref(opts);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_option_errors(void **state)
{
	char opts[128], msg[256];
	uv_loop_t loop;
	void *priv;

	expect_create_error("{\"port\":70000}", EINVAL,
			    "sinks.prom.port: expected integer 0..65535, got 70000");
	expect_create_error("{\"port\":\"80\"}", EINVAL,
			    "sinks.prom.port: expected integer 0..65535, got \"80\"");
	expect_create_error("{\"port\":0,\"listen\":\"localhost\"}", EINVAL,
			    "sinks.prom.listen: \"localhost\" is not an IPv4 or IPv6 address");
	expect_create_error("{\"path\":\"metrics\"}", EINVAL,
			    "sinks.prom.path: expected a URL path starting with '/'");
	expect_create_error("{\"prefix\":\"9x\"}", EINVAL,
			    "sinks.prom.prefix: \"9x\" is not a Prometheus metric name prefix "
			    "([a-zA-Z_:][a-zA-Z0-9_:]*)");
	expect_create_error("{\"max_series\":0}", EINVAL,
			    "sinks.prom.max_series: expected integer 1..1000000, got 0");
	expect_create_error("{\"bogus\":1}", EINVAL,
			    "sinks.prom.bogus: unknown key (known keys: listen, port, path, prefix, "
			    "max_series, labels)");
	expect_create_error("{\"port\":0,\"labels\":{\"le\":\"x\"}}", EINVAL,
			    "sinks.prom.labels: \"le\" is not a label name a user may set, or not "
			    "a string");
	expect_create_error("[]", EINVAL, "sinks.prom: expected object");

	/* A port that is taken: the error names address and port. */
	uv_loop_init(&loop);
	priv = create(&loop, "{\"port\":0}");
	snprintf(opts, sizeof(opts), "{\"port\":%u}", ktel_prometheus_sink__port(priv));
	snprintf(msg, sizeof(msg), "sinks.prom: cannot serve HTTP on 127.0.0.1 port %u: %s",
		 ktel_prometheus_sink__port(priv), strerror(EADDRINUSE));
	expect_create_error(opts, EADDRINUSE, msg);
	close_and_run(&loop, priv);

	/* Every option the code takes is in the table the validator uses. */
	{
		static const char *const names[] = {"listen", "port",       "path",
						    "prefix", "max_series", "labels"};
		const struct ktel_cfg_key *k = ops()->options;
		size_t n = 0;

		for (; k->name; k++, n++)
			assert_string_equal(k->name, names[n]);
		assert_int_equal(n, 6);
	}
}

/* The rename rule alone: a dim whose label name a configured label has is
 * prefixed exported_ until it collides with nothing, as Prometheus renames
 * exposed labels that collide with target labels; others only sanitized. */
static void test_label_names_rule(void **state)
{
	static const struct {
		const char *dims[4];
		uint32_t n;
		const char *taken[3];
		uint32_t n_taken;
		const char *want[4];
	} cases[] = {
		{{"cpu", "le", "__x", "a-b"}, 4, {"host"}, 1, {"cpu", "dim_le", "dim___x", "a_b"}},
		{{"device", "cpu"}, 2, {"device"}, 1, {"exported_device", "cpu"}},
		{{"device"}, 1, {"device", "exported_device"}, 2, {"exported_exported_device"}},
		{{"device", "exported_device"},
		 2,
		 {"device"},
		 1,
		 {"exported_exported_device", "exported_device"}},
		{{"a-b", "a_b"}, 2, {"a_b"}, 1, {"exported_a_b", "exported_exported_a_b"}},
		{{"le"}, 1, {"dim_le"}, 1, {"exported_dim_le"}},
		{{NULL}, 1, {"dim"}, 1, {"exported_dim"}},
		{{"cpu"}, 1, {NULL}, 0, {"cpu"}},
	};
	const char *many[KTEL_PROM_MAX_DIM_NAMES + 1] = {0};
	uint32_t off[KTEL_PROM_MAX_DIM_NAMES];
	bool renamed[KTEL_PROM_MAX_DIM_NAMES];
	struct ktel_textbuf b = {0};

	(void)state;
	for (size_t c = 0; c < KTEL_ARRAY_SIZE(cases); c++) {
		assert_int_equal(ktel_prom_label_names(cases[c].dims, cases[c].n, cases[c].taken,
						       cases[c].n_taken, &b, off, renamed),
				 0);
		for (uint32_t i = 0; i < cases[c].n; i++) {
			assert_string_equal(b.p + off[i], cases[c].want[i]);
			assert_int_equal(renamed[i],
					 strncmp(cases[c].want[i], "exported_", 9) == 0 &&
						 (!cases[c].dims[i] ||
						  strcmp(cases[c].dims[i], cases[c].want[i]) != 0));
		}
	}
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(many); i++)
		many[i] = "x";
	assert_int_equal(ktel_prom_label_names(many, KTEL_ARRAY_SIZE(many), NULL, 0, &b, off, NULL),
			 -E2BIG);
	free(b.p);
}

/* Configured labels are on every series with their name and value; a dim
 * of the same name is exposed as exported_<name>; the descriptor's text is
 * the HELP, escaped (backslash, newline), other control characters and
 * invalid UTF-8 replaced. */
static void test_configured_labels_and_help(void **state)
{
	struct ktel_record r = counter("io", NULL, 1, 5);
	uv_loop_t loop;
	size_t len;
	void *priv;
	char *t;

	(void)state;
	uv_loop_init(&loop);
	priv = create(&loop, "{\"port\":0,\"labels\":{\"device\":\"edge-1\","
			     "\"exported_device\":\"x\"}}");
	r.description = "I/O done,\nper device \\ and cpu\r\t\xff";
	ktel_test_add_dim(&r, "cpu", 1, NULL);
	ktel_test_add_dim(&r, "device", 0, "vda");
	ops()->submit(priv, &r, 1);
	t = text(priv);
	assert_non_null(strstr(t, "# HELP ktel_io_total I/O done,\\nper device \\\\ and cpu  ?\n"
				  "# TYPE ktel_io_total counter\n"
				  "ktel_io_total{cpu=\"1\",exported_exported_device=\"vda\","
				  "device=\"edge-1\",exported_device=\"x\"} 5\n"));
	/* The sink's own series carry them too. */
	assert_non_null(strstr(t, "\nktel_prometheus_sink_series{sink=\"prom\",device=\"edge-1\","
				  "exported_device=\"x\"} 1\n"));
	free(t);
	t = ktel_prometheus_sink__text(priv, &len);
	assert_non_null(strstr(t, "\nprocess_start_time_seconds{device=\"edge-1\","
				  "exported_device=\"x\"} "));
	free(t);
	close_and_run(&loop, priv);
}

/* Records submitted after close are dropped and counted; close with
 * scrapes in the past completes. */
static void test_submit_after_close(void **state)
{
	struct ktel_record r = counter("c", NULL, 1, 1);
	struct ktel_sink_stats st;
	uv_loop_t loop;
	void *priv;
	int closed = 0;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"port\":0}");
	ops()->close(priv, 100, ktel_test_count_closed, &closed);
	ops()->submit(priv, &r, 1);
	ops()->stats(priv, &st);
	assert_int_equal(st.dropped, 1);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(closed, 1);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_text),
		cmocka_unit_test(test_exact_bounds_text),
		cmocka_unit_test(test_full_histogram_and_names),
		cmocka_unit_test(test_http_scrape),
		cmocka_unit_test(test_accept_encoding),
		cmocka_unit_test(test_gzip_and_landing_page),
		cmocka_unit_test(test_scrape_renders_without_loop),
		cmocka_unit_test(test_custom_path_and_ipv6),
		cmocka_unit_test(test_series_limit_and_type_change),
		cmocka_unit_test(test_series_end),
		cmocka_unit_test(test_shape_and_name_collisions),
		cmocka_unit_test(test_option_errors),
		cmocka_unit_test(test_submit_after_close),
		cmocka_unit_test(test_label_names_rule),
		cmocka_unit_test(test_configured_labels_and_help),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
