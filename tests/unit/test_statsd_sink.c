// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The statsd sink on a real libuv loop: UDP to sockets this test binds on
 * 127.0.0.1 and ::1, unix datagram sockets in a directory under the build
 * tree, peers that go away and come back, back-pressure, close().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "sink_test.h"

#include "ktel_test.h"
#include "statsd/android_event.h"
#include "statsd/statsd_line.h"
#include "statsd/statsd_sink.h"

static const struct ktel_sink_ops *ops = &ktel_statsd_sink_ops;
static char tmpdir[256];

/* ---- helpers ------------------------------------------------------------- */

static void loop_for(uv_loop_t *loop, int ms)
{
	uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000;

	while (uv_hrtime() < end) {
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
}

static struct ktel_sink_stats stats_of(void *sink)
{
	struct ktel_sink_stats st;

	ops->stats(sink, &st);
	return st;
}

/* Run the loop until the sink's counters satisfy pred, or fail after 3s. */
static void wait_stats(uv_loop_t *loop, void *sink,
		       int (*pred)(const struct ktel_sink_stats *, uint64_t), uint64_t arg)
{
	uint64_t end = uv_hrtime() + 3000000000ULL;

	for (;;) {
		struct ktel_sink_stats st = stats_of(sink);

		if (pred(&st, arg))
			return;
		if (uv_hrtime() > end) {
			print_error("stats: sent %llu dropped %llu errors %llu reconnects %llu\n",
				    (unsigned long long)st.sent, (unsigned long long)st.dropped,
				    (unsigned long long)st.errors,
				    (unsigned long long)st.reconnects);
			fail_msg("sink counters never reached the expected state");
		}
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(500);
	}
}

static int sent_at_least(const struct ktel_sink_stats *st, uint64_t n)
{
	return st->sent >= n;
}

static int dropped_at_least(const struct ktel_sink_stats *st, uint64_t n)
{
	return st->dropped >= n;
}

static void *create(uv_loop_t *loop, const char *opts_json)
{
	return ktel_test_sink_create(ops, loop, "s", opts_json);
}

struct closed {
	bool done;
	struct ktel_sink_stats st;
	void *sink;
};

static void on_closed(void *ctx)
{
	struct closed *c = ctx;

	/* The contract: stats are final and still readable in done(). */
	ops->stats(c->sink, &c->st);
	c->done = true;
}

static struct ktel_sink_stats close_sink(uv_loop_t *loop, void *sink, uint64_t timeout_ms)
{
	struct closed c = {.sink = sink};

	ops->close(sink, timeout_ms, on_closed, &c);
	for (int i = 0; i < 5000 && !c.done; i++) {
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_true(c.done);
	return c.st;
}

static int bind_udp(int family, uint16_t *port)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		in->sin_port = htons(*port);
		len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_loopback;
		in6->sin6_port = htons(*port);
		len = sizeof(*in6);
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		close(fd);
		return -1;
	}
	len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	*port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					: ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static int bind_unix(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

/* Read every datagram waiting on fd; returns how many, bodies in out. */
static size_t drain(int fd, char out[][KTEL_ANDROID_MAX_DATAGRAM + 1], size_t *lens, size_t max)
{
	size_t n = 0;
	ssize_t r;
	char skip[KTEL_ANDROID_MAX_DATAGRAM + 1];

	for (;;) {
		char *buf = n < max ? out[n] : skip;

		r = recv(fd, buf, KTEL_ANDROID_MAX_DATAGRAM, 0);
		if (r < 0)
			break;
		buf[r] = '\0';
		if (n < max)
			lens[n] = (size_t)r;
		n++;
	}
	return n;
}

static char rx[256][KTEL_ANDROID_MAX_DATAGRAM + 1];
static size_t rxlen[256];

static struct ktel_record hist(const char *metric, uint32_t atom, uint64_t scale)
{
	struct ktel_record r = {
		.type = KTEL_RECORD_HISTOGRAM,
		.metric = metric,
		.atom_id = atom,
		.end_boottime_ns = 5000000000ULL,
		.end_wall_ns = 1700000000LL * 1000000000LL,
		.n_dims = 1,
		.dims = {{"process_state", 1, "STATE_FOREGROUND", false}},
	};

	r.hist.delta.scheme = KTEL_HIST_LOG2;
	/* Few buckets: cumulative bucket lines run from the first non-empty
	 * one to +Inf, and these tests want a record to fit one datagram. */
	r.hist.delta.n_buckets = 5;
	r.hist.delta.counts[3] = 4 * scale;
	r.hist.delta.counts[4] = scale;
	return r;
}

/* The lines the formatter makes for recs, joined by '\n' (one datagram). */
static int join_line(void *ctx, const char *unit, size_t len)
{
	char *out = ctx;
	size_t off = strlen(out);

	sprintf(out + off, "%s%.*s", off ? "\n" : "", (int)len, unit);
	return 0;
}

static void expected_text(const struct ktel_statsd_style *st, const struct ktel_record *recs,
			  size_t n, char *out)
{
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		assert_int_equal(ktel_statsd__format(st, &recs[i], join_line, out), 0);
}

/* ---- UDP ------------------------------------------------------------------ */

static void udp_roundtrip(int family, const char *host)
{
	uv_loop_t loop;
	uint16_t port = 0;
	int fd = bind_udp(family, &port);
	char json[256], want[4096];
	struct ktel_record recs[3] = {hist("direct_reclaim_latency", 0, 1)};
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOTTED} /* the default */;
	struct ktel_sink_stats s;
	void *sink;

	if (fd < 0 && family == AF_INET6) {
		/* A host without IPv6 loopback cannot run this case. */
		print_message("SKIP ::1 case: cannot bind [::1] (%s)\n", strerror(errno));
		skip();
	}
	assert_true(fd >= 0);
	recs[1] = (struct ktel_record){.type = KTEL_RECORD_COUNTER, .metric = "oom_kills"};
	recs[1].counter.delta = 7;
	recs[2] = (struct ktel_record){.type = KTEL_RECORD_GAUGE, .metric = "level", .gauge = -3};
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json), "{\"type\":\"statsd\",\"host\":\"%s\",\"port\":%u}", host,
		 port);
	sink = create(&loop, json);
	ops->submit(sink, recs, 3);
	wait_stats(&loop, sink, sent_at_least, 3);
	expected_text(&st, recs, 3, want);
	assert_int_equal(drain(fd, rx, rxlen, 256), 1);
	assert_string_equal(rx[0], want);
	assert_non_null(strstr(rx[0], "ktel.level:0|g\nktel.level:-3|g"));
	s = close_sink(&loop, sink, 1000);
	assert_int_equal(s.sent, 3);
	assert_int_equal(s.dropped, 0);
	assert_int_equal(s.errors, 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
}

static void test_udp_ipv4(void **state)
{
	udp_roundtrip(AF_INET, "127.0.0.1");
}

static void test_udp_ipv6(void **state)
{
	udp_roundtrip(AF_INET6, "::1");
}

/* A name goes through uv_getaddrinfo; records submitted meanwhile wait. */
static void test_udp_hostname(void **state)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *res;

	assert_int_equal(getaddrinfo("localhost", "1", &hints, &res), 0);
	hints.ai_family = res->ai_family;
	freeaddrinfo(res);
	udp_roundtrip(hints.ai_family, "localhost");
}

/* Lines are packed up to max_packet and never split across datagrams. */
static void test_udp_packing(void **state)
{
	uv_loop_t loop;
	uint16_t port = 0;
	int fd = bind_udp(AF_INET, &port);
	struct ktel_statsd_style st = {"ktel.", KTEL_STATSD_TAGS_DOTTED};
	struct ktel_record recs[20];
	static char want[65536], got[65536];
	char json[256];
	size_t n, off = 0;
	void *sink;

	assert_true(fd >= 0);
	for (int i = 0; i < 20; i++)
		recs[i] = hist("direct_reclaim_latency", 0, (uint64_t)i + 1);
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json),
		 "{\"type\":\"statsd\",\"port\":%u,\"tags\":\"dotted\",\"max_packet\":200}", port);
	sink = create(&loop, json);
	ops->submit(sink, recs, 20);
	wait_stats(&loop, sink, sent_at_least, 20);
	n = drain(fd, rx, rxlen, 256);
	assert_true(n > 1);
	for (size_t i = 0; i < n; i++) {
		assert_true(rxlen[i] <= 200);
		/* each datagram is whole lines: starts with a name, ends with a type */
		assert_memory_equal(rx[i], "ktel.", 5);
		assert_int_equal(rx[i][rxlen[i] - 1], 'c');
		off += (size_t)snprintf(got + off, sizeof(got) - off, "%s%.*s", i ? "\n" : "",
					(int)rxlen[i], rx[i]);
		assert_true(off < sizeof(got));
	}
	expected_text(&st, recs, 20, want);
	assert_string_equal(got, want);
	close_sink(&loop, sink, 1000);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
}

/* The datagrams a sink on a fresh port sends for recs[0..20): in one
 * submit (parts 0), or in submits of parts records between begin and end,
 * as a pull routed in windows hands them over. Returns how many, in
 * rx/rxlen. */
static size_t packed(const struct ktel_record *recs, size_t parts)
{
	uv_loop_t loop;
	uint16_t port = 0;
	int fd = bind_udp(AF_INET, &port);
	char json[256];
	size_t n;
	void *sink;

	assert_true(fd >= 0);
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json),
		 "{\"type\":\"statsd\",\"port\":%u,\"tags\":\"dotted\",\"max_packet\":200}", port);
	sink = create(&loop, json);
	if (!parts) {
		ops->submit(sink, recs, 20);
	} else {
		ops->begin(sink);
		for (size_t i = 0; i < 20; i += parts)
			ops->submit(sink, recs + i, 20 - i < parts ? 20 - i : parts);
		ops->end(sink);
	}
	wait_stats(&loop, sink, sent_at_least, 20);
	n = drain(fd, rx, rxlen, 256);
	close_sink(&loop, sink, 1000);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
	return n;
}

/* A batch in several submits between begin and end (a pull routed in
 * windows) packs into the very datagrams one submit of it makes: lines
 * keep packing across the submits, the last datagram goes at end. */
static void test_udp_batch_in_parts(void **state)
{
	static char want[256][KTEL_ANDROID_MAX_DATAGRAM + 1];
	static size_t want_len[256];
	struct ktel_record recs[20];
	size_t n_want, n;

	for (int i = 0; i < 20; i++)
		recs[i] = hist("direct_reclaim_latency", 0, (uint64_t)i + 1);
	n_want = packed(recs, 0);
	memcpy(want, rx, sizeof(want));
	memcpy(want_len, rxlen, sizeof(want_len));
	n = packed(recs, 3);
	assert_int_equal(n, n_want);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(rxlen[i], want_len[i]);
		assert_memory_equal(rx[i], want[i], rxlen[i]);
	}
}

/* A line longer than max_packet is dropped and its record counted; the
 * other records of the batch still go. */
static void test_udp_oversize_line(void **state)
{
	uv_loop_t loop;
	uint16_t port = 0;
	int fd = bind_udp(AF_INET, &port);
	struct ktel_record recs[3] = {hist("a", 0, 1), hist("b", 0, 1), hist("c", 0, 1)};
	static const char label[] =
		"a_label_long_enough_to_push_every_line_of_its_record_past_max_packet_bytes";
	struct ktel_sink_stats s;
	char json[256];
	size_t n;
	void *sink;

	assert_true(fd >= 0);
	recs[1].dims[0].label = label;
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json), "{\"type\":\"statsd\",\"port\":%u,\"max_packet\":100}", port);
	sink = create(&loop, json);
	ops->submit(sink, recs, 3);
	wait_stats(&loop, sink, sent_at_least, 2);
	s = stats_of(sink);
	assert_int_equal(s.dropped, 1);
	n = drain(fd, rx, rxlen, 256);
	for (size_t i = 0; i < n; i++) {
		assert_true(rxlen[i] <= 100);
		assert_null(strstr(rx[i], label));
	}
	close_sink(&loop, sink, 1000);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
}

/*
 * Nobody listens: the window is refused (ICMP) and counted as dropped; no
 * reconnect is counted while the server is still away (a UDP connect()
 * proves nothing); the first records after a server is back arrive, at
 * once, and that delivery is the one reconnect.
 */
static void test_udp_peer_down_and_back(void **state)
{
	uv_loop_t loop;
	uint16_t port = 0;
	int fd = bind_udp(AF_INET, &port);
	struct ktel_record recs[3] = {hist("a", 0, 1), hist("b", 0, 2), hist("c", 0, 3)};
	struct ktel_sink_stats s;
	char json[256];
	void *sink;

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json),
		 "{\"type\":\"statsd\",\"port\":%u,\"reconnect_min\":\"20ms\","
		 "\"reconnect_max\":\"100ms\"}",
		 port);
	sink = create(&loop, json);
	ops->submit(sink, recs, 3);
	wait_stats(&loop, sink, dropped_at_least, 3);
	s = stats_of(sink);
	assert_int_equal(s.sent, 0);
	assert_int_equal(s.dropped, 3);
	assert_true(s.errors >= 1);
	/* The count comes with what failed: "1 errors" alone says nothing. */
	snprintf(json, sizeof(json), "sendto 127.0.0.1:%u: connection refused", port);
	assert_string_equal(s.last_error, json);
	loop_for(&loop, 150); /* several backoff periods */
	assert_int_equal(stats_of(sink).reconnects, 0);

	fd = bind_udp(AF_INET, &port);
	assert_true(fd >= 0);
	ops->submit(sink, recs, 2);
	wait_stats(&loop, sink, sent_at_least, 2);
	loop_for(&loop, 20);
	assert_int_equal(stats_of(sink).reconnects, 1);
	assert_int_equal(drain(fd, rx, rxlen, 256), 1);
	assert_non_null(strstr(rx[0], "ktel.a.process_state."));
	assert_non_null(strstr(rx[0], "ktel.b.process_state."));
	s = close_sink(&loop, sink, 1000);
	assert_int_equal(s.sent, 2);
	assert_int_equal(s.dropped, 3);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
}

/* ---- unix sockets ------------------------------------------------------- */

static void path_in_tmp(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmpdir, name);
}

static void test_unix_statsd(void **state)
{
	uv_loop_t loop;
	char path[300], json[512], want[4096];
	struct ktel_record r = hist("kswapd_latency", 0, 1);
	struct ktel_statsd_style st = {"x_", KTEL_STATSD_TAGS_DOTTED};
	int fd;
	void *sink;

	path_in_tmp(path, sizeof(path), "statsd.sock");
	fd = bind_unix(path);
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json), "{\"type\":\"statsd\",\"socket\":\"%s\",\"prefix\":\"x_\"}",
		 path);
	sink = create(&loop, json);
	ops->submit(sink, &r, 1);
	wait_stats(&loop, sink, sent_at_least, 1);
	expected_text(&st, &r, 1, want);
	assert_int_equal(drain(fd, rx, rxlen, 256), 1);
	assert_string_equal(rx[0], want);
	close_sink(&loop, sink, 1000);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
	unlink(path);
}

static void check_android(const char *buf, size_t len, const struct ktel_record *r)
{
	static struct ktel_android_decoded d;

	assert_int_equal(ktel_android__decode((const uint8_t *)buf, len, true, &d), 0);
	assert_int_equal(d.atom_id, r->atom_id);
	assert_int_equal(d.timestamp_ns, r->end_boottime_ns);
	assert_int_equal(d.tv_sec, (uint32_t)(r->end_wall_ns / 1000000000));
	assert_int_equal(d.tid, (uint16_t)gettid());
	assert_int_equal(d.n_fields, r->n_dims + 1);
	for (uint32_t k = 0; k < 32; k++)
		assert_int_equal(ktel_android_field__list_i64(&d.fields[r->n_dims], k),
				 r->hist.delta.counts[k]);
}

static void test_android_unix(void **state)
{
	static char big[300];
	uv_loop_t loop;
	char path[300], json[512];
	struct ktel_record recs[4] = {hist("direct_reclaim_latency", 100001, 1),
				      hist("cma_allocation_latency", 100004, 2),
				      hist("no_atom", 0, 1),
				      {.type = KTEL_RECORD_EVENT, .metric = "big", .atom_id = 9}};
	struct ktel_event_field big_fields[20];
	struct ktel_sink_stats s;
	int fd;
	void *sink;

	recs[1].dims[0] = (struct ktel_dim){"heap", 3, "reserved", true, false};
	memset(big, 'b', sizeof(big) - 1);
	recs[3].event.n_fields = 20; /* 20 x 305 bytes: over 4064, refused */
	recs[3].event.fields = big_fields;
	for (int i = 0; i < 20; i++)
		big_fields[i] = (struct ktel_event_field){.type = KTEL_FIELD_VALUE_STRING,
							  .s = big};
	path_in_tmp(path, sizeof(path), "statsdw");
	fd = bind_unix(path);
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json),
		 "{\"type\":\"statsd\",\"format\":\"android\",\"socket\":\"%s\"}", path);
	sink = create(&loop, json);
	ops->submit(sink, recs, 4);
	wait_stats(&loop, sink, sent_at_least, 2);
	s = stats_of(sink);
	assert_int_equal(s.dropped, 1); /* too big; no atom id is not a loss */
	assert_int_equal(drain(fd, rx, rxlen, 256), 2);
	check_android(rx[0], rxlen[0], &recs[0]);
	check_android(rx[1], rxlen[1], &recs[1]);
	s = close_sink(&loop, sink, 1000);
	assert_int_equal(s.sent, 2);
	assert_int_equal(s.errors, 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
	unlink(path);
}

/*
 * statsd not there yet (ENOENT) for long enough that the backoff grew to
 * over a second; then there: the next submit re-opens the socket instead of
 * dropping until the retry timer, and that delivery is the reconnect. Then
 * restarted under us.
 */
static void test_android_peer_missing_then_restarted(void **state)
{
	uv_loop_t loop;
	char path[300], json[512];
	struct ktel_record r = hist("direct_reclaim_latency", 100001, 1);
	struct ktel_sink_stats s;
	int fd;
	void *sink;

	path_in_tmp(path, sizeof(path), "late.sock");
	unlink(path);
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json),
		 "{\"type\":\"statsd\",\"format\":\"android\",\"socket\":\"%s\","
		 "\"reconnect_min\":\"10ms\",\"reconnect_max\":\"30s\"}",
		 path);
	sink = create(&loop, json);
	ops->submit(sink, &r, 1);
	loop_for(&loop, 700);
	s = stats_of(sink);
	assert_int_equal(s.dropped, 1);
	assert_true(s.errors >= 4); /* retries at ~10, 30, 70, 150, 310 ms... */
	snprintf(json, sizeof(json), "connect %s: no such file or directory", path);
	assert_string_equal(s.last_error, json);
	assert_int_equal(s.sent, 0);
	assert_int_equal(s.reconnects, 0);

	fd = bind_unix(path);
	ops->submit(sink, &r, 1);
	loop_for(&loop, 5);
	assert_int_equal(stats_of(sink).sent, 1);
	assert_int_equal(stats_of(sink).reconnects, 1);
	assert_int_equal(drain(fd, rx, rxlen, 256), 1);
	check_android(rx[0], rxlen[0], &r);

	/* A new statsd at the same path: the sink reconnects once and the
	 * datagram goes to the new socket; nothing is lost. */
	close(fd);
	fd = bind_unix(path);
	s = stats_of(sink);
	ops->submit(sink, &r, 1);
	wait_stats(&loop, sink, sent_at_least, 2);
	assert_int_equal(stats_of(sink).reconnects, s.reconnects + 1);
	assert_int_equal(stats_of(sink).dropped, 1);
	assert_int_equal(drain(fd, rx, rxlen, 256), 1);
	check_android(rx[0], rxlen[0], &r);
	close_sink(&loop, sink, 1000);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
	unlink(path);
}

/*
 * A receiver that does not read: the kernel queue fills (EAGAIN), the sink's
 * bounded queue fills and drops; once the receiver reads, the rest flows.
 */
static void test_backpressure_bounded(void **state)
{
	enum {
		N = 200
	};
	uv_loop_t loop;
	char path[300], json[512];
	static struct ktel_record recs[N];
	struct ktel_sink_stats s;
	size_t got = 0;
	int fd;
	void *sink;

	for (int i = 0; i < N; i++)
		recs[i] = hist("direct_reclaim_latency", 100001, (uint64_t)i + 1);
	path_in_tmp(path, sizeof(path), "slow.sock");
	fd = bind_unix(path);
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json),
		 "{\"type\":\"statsd\",\"format\":\"android\",\"socket\":\"%s\","
		 "\"max_queue\":\"8KiB\"}",
		 path);
	sink = create(&loop, json);
	ops->submit(sink, recs, N);
	loop_for(&loop, 20);
	s = stats_of(sink);
	assert_true(s.dropped > 0);
	assert_true(s.queued > 0 && s.queued <= 8192);
	assert_true(s.sent + s.dropped < N); /* some still wait */
	for (int i = 0; i < 1000 && stats_of(sink).queued; i++) {
		got += drain(fd, rx, rxlen, 0);
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(500);
	}
	got += drain(fd, rx, rxlen, 0);
	s = stats_of(sink);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.sent + s.dropped, N);
	assert_int_equal(got, s.sent);
	close_sink(&loop, sink, 1000);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
	unlink(path);
}

/* close() gives up after its timeout and counts what it could not send. */
static void test_close_timeout_counts_leftovers(void **state)
{
	enum {
		N = 100
	};
	uv_loop_t loop;
	char path[300], json[512];
	static struct ktel_record recs[N];
	struct ktel_sink_stats s;
	uint64_t t0;
	size_t got;
	int fd;
	void *sink;

	for (int i = 0; i < N; i++)
		recs[i] = hist("direct_reclaim_latency", 100001, 1);
	path_in_tmp(path, sizeof(path), "stuck.sock");
	fd = bind_unix(path);
	assert_int_equal(uv_loop_init(&loop), 0);
	snprintf(json, sizeof(json),
		 "{\"type\":\"statsd\",\"format\":\"android\",\"socket\":\"%s\"}", path);
	sink = create(&loop, json);
	ops->submit(sink, recs, N);
	t0 = uv_hrtime();
	s = close_sink(&loop, sink, 100);
	assert_true(uv_hrtime() - t0 >= 90000000ULL);
	got = drain(fd, rx, rxlen, 0);
	assert_true(s.dropped > 0);
	assert_int_equal(s.sent + s.dropped, N);
	assert_int_equal(got, s.sent);
	assert_int_equal(s.queued, 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd);
	unlink(path);
}

/* ---- options -------------------------------------------------------------- */

static void expect_error(const char *json, const char *msg)
{
	uv_loop_t loop;
	struct ktel_err err = {0};
	json_t *opts = json_loads(json, 0, NULL);
	void *sink = NULL;

	assert_non_null(opts);
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_true(ops->create(&loop, "s", opts, &sink, &err) < 0);
	assert_null(sink);
	assert_string_equal(err.msg, msg);
	json_decref(opts);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_options(void **state)
{
	expect_error("{\"type\":\"statsd\",\"bogus\":1}",
		     "sinks.s.bogus: unknown key (known keys: format, host, port, transport, socket, prefix, tags, "
		     "max_packet, max_queue, reconnect_min, reconnect_max)");
	expect_error("{\"type\":\"statsd\",\"port\":\"abc\"}",
		     "sinks.s.port: expected integer 1..65535, got \"abc\"");
	expect_error("{\"type\":\"statsd\",\"max_packet\":65507}",
		     "sinks.s.max_packet: expected integer 64..65506, got 65507");
	expect_error("{\"type\":\"statsd\",\"tags\":\"graphite\"}",
		     "sinks.s.tags: expected one of \"dogstatsd\", \"dotted\", got \"graphite\"");
	expect_error("{\"type\":\"statsd\",\"max_queue\":100}",
		     "sinks.s.max_queue: must be between 4KiB and 1GiB, got 100");
	expect_error("{\"type\":\"statsd\",\"format\":\"android\",\"host\":\"::1\"}",
		     "sinks.s.host: not used by format \"android\", which writes to a unix socket "
		     "(set socket)");
	expect_error("{\"type\":\"statsd\",\"socket\":\"/x\",\"port\":9}",
		     "sinks.s.socket: conflicts with host/port/transport (choose UDP/TCP or a unix "
		     "socket)");
	expect_error("{\"type\":\"statsd\",\"socket\":\"/x\",\"transport\":\"tcp\"}",
		     "sinks.s.socket: conflicts with host/port/transport (choose UDP/TCP or a unix "
		     "socket)");
	expect_error("{\"type\":\"statsd\",\"transport\":\"sctp\"}",
		     "sinks.s.transport: expected one of \"udp\", \"tcp\", got \"sctp\"");
	expect_error("{\"type\":\"statsd\",\"format\":\"android\",\"transport\":\"tcp\"}",
		     "sinks.s.transport: not used by format \"android\", which writes to a unix "
		     "socket (set socket)");
	expect_error("{\"type\":\"statsd\",\"format\":\"android\",\"tags\":\"dotted\"}",
		     "sinks.s.tags: applies to format \"statsd\" only");
	expect_error("{\"type\":\"statsd\",\"reconnect_min\":\"2s\",\"reconnect_max\":\"1s\"}",
		     "sinks.s.reconnect_max: must not be below reconnect_min");
}

static int setup(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/test-statsd-sink-%d", KTEL_BINARY_DIR, getpid());
	return mkdir(tmpdir, 0700);
}

static int teardown(void **state)
{
	return rmdir(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_udp_ipv4),
		cmocka_unit_test(test_udp_ipv6),
		cmocka_unit_test(test_udp_hostname),
		cmocka_unit_test(test_udp_packing),
		cmocka_unit_test(test_udp_batch_in_parts),
		cmocka_unit_test(test_udp_oversize_line),
		cmocka_unit_test(test_udp_peer_down_and_back),
		cmocka_unit_test(test_unix_statsd),
		cmocka_unit_test(test_android_unix),
		cmocka_unit_test(test_android_peer_missing_then_restarted),
		cmocka_unit_test(test_backpressure_bounded),
		cmocka_unit_test(test_close_timeout_counts_leftovers),
		cmocka_unit_test(test_options),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
