// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * remote_write sink: what it encodes, read back with the real libsnappy
 * (linked here, not the sink's dlopen) and protobuf-c's unpack; and the
 * sink on a real libuv loop against a real HTTP server on 127.0.0.1 (a
 * thread answering scripted statuses): protocol headers, retry on 503,
 * refusal on 400 counted as dropped, a full queue dropping the oldest,
 * close flushing, option errors.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <snappy-c.h>

#include "sink_test.h"

#include "prom_series.h"
#include "remote.pb-c.h"
#include "remote_write/remote_write_sink.h"
#include "remote_write/rw_dlopen.h"
#include "remote_write/rw_encode.h"

static const struct ktel_sink_ops *ops(void)
{
	const struct ktel_sink_ops *o = ktel_sink_type_find("remote_write");

	assert_non_null(o);
	assert_ptr_equal(o, &ktel_remote_write_sink_ops);
	return o;
}

static struct ktel_record counter(const char *metric, uint64_t total)
{
	struct ktel_record r = {.type = KTEL_RECORD_COUNTER, .metric = metric, .boot_id = "b"};

	r.counter.delta = total;
	r.counter.total = total;
	return r;
}

/* Uncompress with libsnappy and unpack with protobuf-c; the test fails on
 * any error. */
static KtelPrompb__WriteRequest *decode(const char *body, size_t len)
{
	KtelPrompb__WriteRequest *req;
	size_t raw_len;
	char *raw;

	assert_int_equal(snappy_uncompressed_length(body, len, &raw_len), SNAPPY_OK);
	raw = malloc(raw_len ?: 1);
	assert_non_null(raw);
	assert_int_equal(snappy_uncompress(body, len, raw, &raw_len), SNAPPY_OK);
	req = ktel_prompb__write_request__unpack(NULL, raw_len, (const uint8_t *)raw);
	free(raw);
	assert_non_null(req);
	return req;
}

/* "name=value,..." of a series' labels, in their order. */
static void labels_text(const KtelPrompb__TimeSeries *t, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < t->n_labels && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s=%s", i ? "," : "",
					t->labels[i]->name, t->labels[i]->value);
}

/*
 * A histogram in ns with a dim label, a counter and a gauge with dims that
 * collide with configured labels: every sample, label order, scaling and
 * timestamp as Prometheus expects them, the configured labels kept and the
 * colliding dims renamed exported_<name>.
 */
static void test_encode_decodes(void **state)
{
	static const char *const want[] = {
		"__name__=ktel_lat_seconds_bucket,cpu=0,device=d1,le=1e-09,zone=cold = 1",
		"__name__=ktel_lat_seconds_bucket,cpu=0,device=d1,le=2e-09,zone=cold = 1",
		"__name__=ktel_lat_seconds_bucket,cpu=0,device=d1,le=4e-09,zone=cold = 4",
		"__name__=ktel_lat_seconds_bucket,cpu=0,device=d1,le=+Inf,zone=cold = 9",
		"__name__=ktel_lat_seconds_sum,cpu=0,device=d1,zone=cold = 2e-06",
		"__name__=ktel_lat_seconds_count,cpu=0,device=d1,zone=cold = 9",
		"__name__=ktel_oom_kills_total,device=d1,zone=cold = 3",
		"Zone=a,__name__=ktel_temp,device=d1,exported_device=own,exported_zone=hot,"
		"zone=cold = -5",
	};
	struct ktel_prom_set set;
	struct ktel_record r[3] = {{.type = KTEL_RECORD_HISTOGRAM, .metric = "lat", .unit = "ns"},
				   counter("oom_kills", 3),
				   {.type = KTEL_RECORD_GAUGE, .metric = "temp", .gauge = -5}};
	struct ktel_err err = {0};
	KtelPrompb__WriteRequest *req;
	uint64_t samples;
	size_t len;
	char *body, line[512];

	(void)state;
	assert_int_equal(ktel_rw_libs_load(&err), 0);
	r[0].hist.delta = (struct ktel_histogram){.scheme = KTEL_HIST_LOG2,
						  .n_buckets = 4,
						  .counts = {1, 0, 3, 5},
						  .has_sum = true,
						  .sum = 2000};
	r[0].hist.total = r[0].hist.delta;
	ktel_test_add_dim(&r[0], "cpu", 0, NULL);
	ktel_test_add_dim(&r[2], "zone", 1, "hot");   /* renamed: the configured zone=cold stays */
	ktel_test_add_dim(&r[2], "Zone", 2, "a");     /* sorts before "__name__" */
	ktel_test_add_dim(&r[2], "device", 3, "own"); /* renamed: device=d1 stays */
	assert_int_equal(ktel_prom_set__init(&set, "ktel_", 100), 0);
	assert_int_equal(ktel_prom_set__add_label(&set, "zone", "cold"), 0);
	assert_int_equal(ktel_prom_set__add_label(&set, "device", "d1"), 0);
	assert_int_equal(ktel_rw_encode(&set, 1700000000123, &body, &len, &samples), -ENODATA);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ktel_prom_set__apply(&set, &r[i]), KTEL_PROM_APPLIED);
	assert_int_equal(ktel_rw_encode(&set, 1700000000123, &body, &len, &samples), 0);
	assert_int_equal(samples, 8);
	req = decode(body, len);
	assert_int_equal(req->n_timeseries, 8);
	for (size_t i = 0; i < req->n_timeseries; i++) {
		const KtelPrompb__TimeSeries *t = req->timeseries[i];
		char got[512];

		assert_int_equal(t->n_samples, 1);
		assert_int_equal(t->samples[0]->timestamp, 1700000000123);
		labels_text(t, line, sizeof(line));
		snprintf(got, sizeof(got), "%s = %.15g", line, t->samples[0]->value);
		assert_string_equal(got, want[i]);
	}
	ktel_prompb__write_request__free_unpacked(req, NULL);
	free(body);
	ktel_prom_set__fini(&set);
}

/* Is v Prometheus' staleness marker (that NaN, bit for bit)? */
static bool stale(double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	return bits == KTEL_PROM_STALE_NAN_BITS;
}

/*
 * A record with series_end ends its series: the next request carries each
 * of its samples once with the staleness marker, the live ones their
 * values; after it the series is gone. Made again before a request, it is
 * sent with its value and no marker (a receiver refuses two samples of a
 * series at one timestamp).
 */
static void test_encode_stale_marker(void **state)
{
	struct ktel_prom_set set;
	struct ktel_record a = counter("ev", 5), b = counter("ev", 7), end;
	struct ktel_err err = {0};
	KtelPrompb__WriteRequest *req;
	uint64_t samples;
	size_t len, n_stale = 0;
	char *body, line[512];

	(void)state;
	assert_int_equal(ktel_rw_libs_load(&err), 0);
	ktel_test_add_dim(&a, "cgroup", 0, "a.service");
	ktel_test_add_dim(&b, "cgroup", 0, "b.service");
	assert_int_equal(ktel_prom_set__init(&set, "ktel_", 100), 0);
	assert_int_equal(ktel_prom_set__apply(&set, &a), KTEL_PROM_APPLIED);
	assert_int_equal(ktel_prom_set__apply(&set, &b), KTEL_PROM_APPLIED);
	end = a;
	end.counter.delta = 0;
	end.series_end = true;
	assert_int_equal(ktel_prom_set__apply(&set, &end), KTEL_PROM_APPLIED);
	assert_int_equal(set.n_series, 1);
	assert_int_equal(ktel_rw_encode(&set, 1000, &body, &len, &samples), 0);
	assert_int_equal(samples, 2);
	req = decode(body, len);
	for (size_t i = 0; i < req->n_timeseries; i++) {
		const KtelPrompb__TimeSeries *t = req->timeseries[i];

		labels_text(t, line, sizeof(line));
		if (strstr(line, "cgroup=a.service")) {
			assert_true(stale(t->samples[0]->value));
			n_stale++;
		} else {
			assert_string_equal(line, "__name__=ktel_ev_total,cgroup=b.service");
			assert_true(t->samples[0]->value == 7);
		}
	}
	assert_int_equal(n_stale, 1);
	ktel_prompb__write_request__free_unpacked(req, NULL);
	free(body);
	/* Once: the sink frees the ended series after the request. */
	ktel_prom_set__free_ended(&set);
	assert_int_equal(ktel_rw_encode(&set, 2000, &body, &len, &samples), 0);
	assert_int_equal(samples, 1);
	free(body);
	/* Ended, then made again before the next request: no marker. */
	end = b;
	end.series_end = true;
	assert_int_equal(ktel_prom_set__apply(&set, &end), KTEL_PROM_APPLIED);
	assert_int_equal(ktel_prom_set__apply(&set, &b), KTEL_PROM_APPLIED);
	assert_int_equal(ktel_rw_encode(&set, 3000, &body, &len, &samples), 0);
	assert_int_equal(samples, 1);
	req = decode(body, len);
	assert_false(stale(req->timeseries[0]->samples[0]->value));
	ktel_prompb__write_request__free_unpacked(req, NULL);
	free(body);
	/* An end of a series the set does not have changes nothing. */
	end = counter("ev", 1);
	end.series_end = true;
	assert_int_equal(ktel_prom_set__apply(&set, &end), KTEL_PROM_APPLIED);
	assert_int_equal(set.n_series, 1);
	ktel_prom_set__fini(&set);
}

/* ---- a scripted HTTP server ---- */

#define MAX_REQ 64

struct server {
	int fd;
	unsigned port;
	pthread_t thread;
	pthread_mutex_t lock;
	const int *statuses; /* per request; the last repeats */
	size_t n_statuses;
	size_t n_req;
	char *head[MAX_REQ];
	char *body[MAX_REQ];
	size_t body_len[MAX_REQ];
};

/* One request of a connection: head until the blank line, Content-Length bytes. */
static int read_request(int c, char **ret_head, char **ret_body, size_t *ret_len)
{
	char *buf = malloc(1 << 20), *end, *cl;
	size_t n = 0, want;
	ssize_t got;

	while (!(buf[n] = '\0', end = strstr(buf, "\r\n\r\n"))) {
		got = recv(c, buf + n, (1 << 20) - 1 - n, 0);
		if (got <= 0) {
			free(buf);
			return -1;
		}
		n += (size_t)got;
	}
	*end = '\0';
	cl = strcasestr(buf, "Content-Length:");
	want = cl ? strtoul(cl + 15, NULL, 10) : 0;
	end += 4;
	while ((size_t)(buf + n - end) < want) {
		got = recv(c, buf + n, (1 << 20) - 1 - n, 0);
		if (got <= 0) {
			free(buf);
			return -1;
		}
		n += (size_t)got;
	}
	*ret_body = malloc(want ?: 1);
	memcpy(*ret_body, end, want);
	*ret_len = want;
	*ret_head = buf;
	return 0;
}

static void *serve(void *arg)
{
	struct server *sv = arg;
	int c;

	while ((c = accept(sv->fd, NULL, NULL)) >= 0) {
		char *head, *body, reply[256];
		size_t len;

		while (read_request(c, &head, &body, &len) == 0) {
			int status;

			pthread_mutex_lock(&sv->lock);
			status = sv->statuses[sv->n_req < sv->n_statuses ? sv->n_req
									 : sv->n_statuses - 1];
			if (sv->n_req < MAX_REQ) {
				sv->head[sv->n_req] = head;
				sv->body[sv->n_req] = body;
				sv->body_len[sv->n_req] = len;
				sv->n_req++;
			} else {
				free(head);
				free(body);
			}
			pthread_mutex_unlock(&sv->lock);
			snprintf(reply, sizeof(reply),
				 "HTTP/1.1 %d X\r\nContent-Length: 10\r\n\r\n"
				 "bad sample",
				 status);
			send(c, reply, strlen(reply), MSG_NOSIGNAL);
		}
		close(c);
	}
	return NULL;
}

static void server_start(struct server *sv, const int *statuses, size_t n)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);

	memset(sv, 0, sizeof(*sv));
	sv->statuses = statuses;
	sv->n_statuses = n;
	pthread_mutex_init(&sv->lock, NULL);
	sv->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	assert_int_equal(bind(sv->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(sv->fd, 8), 0);
	assert_int_equal(getsockname(sv->fd, (struct sockaddr *)&a, &alen), 0);
	sv->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&sv->thread, NULL, serve, sv), 0);
}

static void server_stop(struct server *sv)
{
	shutdown(sv->fd, SHUT_RDWR);
	pthread_join(sv->thread, NULL);
	close(sv->fd);
	for (size_t i = 0; i < sv->n_req; i++) {
		free(sv->head[i]);
		free(sv->body[i]);
	}
	pthread_mutex_destroy(&sv->lock);
}

static size_t server_requests(struct server *sv)
{
	size_t n;

	pthread_mutex_lock(&sv->lock);
	n = sv->n_req;
	pthread_mutex_unlock(&sv->lock);
	return n;
}

/* Run the loop until the server has seen n requests (at most 10 s). */
static void run_until_requests(uv_loop_t *loop, struct server *sv, size_t n)
{
	for (int i = 0; i < 1000 && server_requests(sv) < n; i++) {
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(10000);
	}
	if (server_requests(sv) < n)
		fail_msg("the server saw %zu requests, not %zu", server_requests(sv), n);
}

static void *create(uv_loop_t *loop, const char *fmt, ...)
{
	char opts[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(opts, sizeof(opts), fmt, ap);
	va_end(ap);
	return ktel_test_sink_create(ops(), loop, "rw", opts);
}

static void close_and_run(uv_loop_t *loop, void *priv, uint64_t timeout_ms,
			  struct ktel_sink_stats *ret)
{
	int closed = 0;

	ops()->close(priv, timeout_ms, ktel_test_count_closed, &closed);
	uv_run(loop, UV_RUN_DEFAULT);
	assert_int_equal(closed, 1);
	assert_int_equal(uv_loop_close(loop), 0);
	(void)ret;
}

/* Stats read from inside done: final (sink.h). */
struct final {
	int closed;
	void *priv;
	struct ktel_sink_stats st;
};

static void on_final(void *ctx)
{
	struct final *f = ctx;

	ops()->stats(f->priv, &f->st);
	f->closed++;
}

/*
 * 503: kept and retried (same bytes); 400: refused, the record it carried
 * dropped and the reason not retried; 204: delivered. The protocol headers
 * and the configured one are on every request.
 */
static void test_retry_refuse_deliver(void **state)
{
	static const int statuses[] = {503, 400, 204};
	struct ktel_record r = counter("c", 7);
	struct ktel_sink_stats st;
	struct server sv;
	uv_loop_t loop;
	void *priv;
	KtelPrompb__WriteRequest *req;

	(void)state;
	server_start(&sv, statuses, 3);
	uv_loop_init(&loop);
	priv = create(&loop,
		      "{\"url\":\"http://127.0.0.1:%u/api/v1/write\",\"interval\":\"100ms\","
		      "\"headers\":{\"X-Scope-OrgID\":\"t1\"},\"labels\":{\"device\":\"d1\"}}",
		      sv.port);
	ops()->submit(priv, &r, 1);
	run_until_requests(&loop, &sv, 3);
	ops()->stats(priv, &st);
	assert_int_equal(st.errors, 2);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.sent, 0); /* what was delivered carried no new record */
	assert_int_equal(sv.body_len[0], sv.body_len[1]);
	assert_memory_equal(sv.body[0], sv.body[1], sv.body_len[0]);
	for (size_t i = 0; i < 3; i++) {
		assert_non_null(strstr(sv.head[i], "POST /api/v1/write HTTP/1.1\r\n"));
		assert_non_null(strstr(sv.head[i], "\r\nContent-Encoding: snappy"));
		assert_non_null(strstr(sv.head[i], "\r\nContent-Type: application/x-protobuf"));
		assert_non_null(strstr(sv.head[i], "\r\nX-Prometheus-Remote-Write-Version: 0.1.0"));
		assert_non_null(strstr(sv.head[i], "\r\nUser-Agent: ktelemetry-remote-write/"));
		assert_non_null(strstr(sv.head[i], "\r\nX-Scope-OrgID: t1"));
	}
	req = decode(sv.body[2], sv.body_len[2]);
	assert_int_equal(req->n_timeseries, 1);
	assert_string_equal(req->timeseries[0]->labels[0]->value, "ktel_c_total");
	assert_string_equal(req->timeseries[0]->labels[1]->name, "device");
	assert_true(req->timeseries[0]->samples[0]->value == 7);
	ktel_prompb__write_request__free_unpacked(req, NULL);
	/* A new record is sent with the next request delivered. */
	r.counter.total = 9;
	ops()->submit(priv, &r, 1);
	for (int i = 0; i < 1000 && (ops()->stats(priv, &st), st.sent == 0); i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
	}
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.dropped, 1);
	close_and_run(&loop, priv, 1000, NULL);
	server_stop(&sv);
}

/*
 * Nothing listens: requests queue up to max_queue_bytes and the oldest go,
 * counted with the records they carried; close after its timeout counts
 * what is left.
 */
static void test_full_queue_drops_oldest(void **state)
{
	struct ktel_record r[40];
	char names[40][16];
	struct final f = {0};
	struct ktel_sink_stats st;
	struct server sv;
	uv_loop_t loop;
	unsigned port;

	(void)state;
	server_start(&sv, (const int[]){204}, 1);
	port = sv.port;
	server_stop(&sv); /* the port is free again: connections are refused */
	uv_loop_init(&loop);
	f.priv = create(&loop,
			"{\"url\":\"http://127.0.0.1:%u/w\",\"interval\":\"100ms\","
			"\"max_queue_bytes\":1024}",
			port);
	for (int i = 0; i < 40; i++) {
		snprintf(names[i], sizeof(names[i]), "metric_%d", i);
		r[i] = counter(names[i], (uint64_t)i * 1000003);
	}
	ops()->submit(f.priv, r, 40);
	for (int i = 0; i < 150; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(10000);
	}
	ops()->stats(f.priv, &st);
	assert_int_equal(st.dropped, 40); /* the first request, dropped for newer ones */
	assert_true(st.errors >= 1);
	assert_true(st.queued > 0 && st.queued <= 1024);
	assert_int_equal(st.sent, 0);
	ops()->submit(f.priv, r, 2); /* carried by the request close adds */
	ops()->close(f.priv, 200, on_final, &f);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(f.closed, 1);
	assert_int_equal(f.st.dropped, 42);
	assert_int_equal(f.st.queued, 0);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* Close sends what came since the last push, within the timeout. */
static void test_close_flushes(void **state)
{
	struct ktel_record r = counter("c", 1);
	struct final f = {0};
	struct server sv;
	uv_loop_t loop;

	(void)state;
	server_start(&sv, (const int[]){200}, 1);
	uv_loop_init(&loop);
	f.priv = create(&loop, "{\"url\":\"http://127.0.0.1:%u/w\",\"interval\":\"1h\"}", sv.port);
	ops()->submit(f.priv, &r, 1);
	ops()->close(f.priv, 5000, on_final, &f);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(f.closed, 1);
	assert_int_equal(f.st.sent, 1);
	assert_int_equal(f.st.dropped, 0);
	assert_int_equal(server_requests(&sv), 1);
	assert_int_equal(uv_loop_close(&loop), 0);
	server_stop(&sv);
}

static void expect_create_error(const char *opts_json, const char *msg)
{
	json_t *opts = json_loads(opts_json, 0, NULL);
	struct ktel_err err = {0};
	uv_loop_t loop;
	void *priv = NULL;

	assert_non_null(opts);
	uv_loop_init(&loop);
	if (ops()->create(&loop, "rw", opts, &priv, &err) != -EINVAL)
		fail_msg("%s: created, or not EINVAL: %s", opts_json, err.msg);
	assert_null(priv);
	assert_string_equal(err.msg, msg);
	json_decref(opts);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_option_errors(void **state)
{
	(void)state;
	expect_create_error("{}", "sinks.rw.url: required");
	expect_create_error("{\"url\":\"ftp://h/w\"}",
			    "sinks.rw.url: \"ftp://h/w\" is not an "
			    "http:// or https:// URL with a host (no spaces or control characters)");
	expect_create_error("{\"url\":\"http:///w\"}",
			    "sinks.rw.url: \"http:///w\" is not an "
			    "http:// or https:// URL with a host (no spaces or control characters)");
	expect_create_error("{\"url\":\"https://u:secret@h/w\"}",
			    "sinks.rw.url: no user or "
			    "password in the URL (the URL is logged): put them in an Authorization "
			    "header");
	expect_create_error("{\"url\":\"http://h/w\",\"headers\":{\"X-A\":\"a\\r\\nX-B: b\"}}",
			    "sinks.rw.headers.X-A: a header value may not hold CR, LF or other "
			    "control characters");
	expect_create_error("{\"url\":\"http://h/w\",\"headers\":{\"X A\":\"a\"}}",
			    "sinks.rw.headers.X A: not an HTTP header name (letters, digits and "
			    "!#$%&'*+-.^_`|~)");
	expect_create_error("{\"url\":\"http://h/w\",\"headers\":{\"content-type\":\"a\"}}",
			    "sinks.rw.headers.content-type: the sink sets this header itself");
	expect_create_error("{\"url\":\"http://h/w\",\"headers\":{\"X-A\":1}}",
			    "sinks.rw.headers.X-A: expected string, got 1");
	expect_create_error("{\"url\":\"http://h/w\",\"labels\":{\"__name__\":\"x\"}}",
			    "sinks.rw.labels.__name__: \"__name__\" is not a label name a config "
			    "may set ([a-zA-Z_][a-zA-Z0-9_]*, not \"le\", not starting with \"__\")");
	expect_create_error("{\"url\":\"http://h/w\",\"labels\":{\"1a\":\"x\"}}",
			    "sinks.rw.labels.1a: \"1a\" is not a label name a config may set "
			    "([a-zA-Z_][a-zA-Z0-9_]*, not \"le\", not starting with \"__\")");
	expect_create_error("{\"url\":\"http://h/w\",\"interval\":\"10ms\"}",
			    "sinks.rw.interval: must be between 100ms and 1h, got \"10ms\"");
	expect_create_error("{\"url\":\"http://h/w\",\"prefix\":\"9x\"}",
			    "sinks.rw.prefix: \"9x\" is not a Prometheus metric name prefix "
			    "([a-zA-Z_:][a-zA-Z0-9_:]*)");
	expect_create_error("{\"url\":\"http://h/w\",\"bogus\":1}",
			    "sinks.rw.bogus: unknown key (known keys: url, interval, timeout, "
			    "max_queue_bytes, headers, labels, prefix, max_series)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_decodes),
		cmocka_unit_test(test_encode_stale_marker),
		cmocka_unit_test(test_retry_refuse_deliver),
		cmocka_unit_test(test_full_queue_drops_oldest),
		cmocka_unit_test(test_close_flushes),
		cmocka_unit_test(test_option_errors),
	};

	ktel_sinks_register_schemas(); /* the option rules, as the daemon has them */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
