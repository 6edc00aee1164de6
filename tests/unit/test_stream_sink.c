// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Stream sink on a real libuv loop and a real unix socket in the build
 * tree: a reading subscriber gets every record in order while one that does
 * not read loses its oldest, told how many, without slowing the other;
 * replay of recent records on connect; socket mode and group; close flushes
 * and its timeout bounds a stuck subscriber; stale sockets; option errors. */
#include <errno.h>
#include <malloc.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sink_test.h"

#include "stream/stream_sink.h"
#include "sinks.h"
#include "ktel_test.h"
#include "run_wait.h"

static char dir[512], sock_path[600];

static int setup_dir(void **state)
{
	snprintf(dir, sizeof(dir), "%s/test-stream-%d", KTEL_BINARY_DIR, getpid());
	return mkdir(dir, 0700);
}

/* A socket path of its own for each test, so one test's failure (which
 * leaves its sink open) does not fail the next ones. */
static int new_socket(void **state)
{
	static int n;

	snprintf(sock_path, sizeof(sock_path), "%s/s%d.sock", dir, n++);
	return 0;
}

static int teardown_dir(void **state)
{
	return ktel_test_rm_rf(dir) == 0 ? 0 : -1;
}

static const struct ktel_sink_ops *ops(void)
{
	const struct ktel_sink_ops *o = ktel_sink_type_find("stream");

	assert_non_null(o);
	assert_ptr_equal(o, &ktel_stream_sink_ops);
	return o;
}

__attribute__((format(printf, 2, 3))) static void *create(uv_loop_t *loop, const char *fmt, ...)
{
	struct ktel_err err = {0};
	char buf[1024];
	void *priv = NULL;
	va_list ap;
	json_t *opts;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	opts = json_loads(buf, 0, NULL);
	assert_non_null(opts);
	if (ops()->create(loop, "s", opts, &priv, &err))
		fail_msg("create: %s", err.msg);
	json_decref(opts);
	return priv;
}

/* ---- a subscriber ---- */

struct client {
	uv_pipe_t pipe;
	uv_connect_t conn;
	int status; /* 1: connected, < 0: failed */
	char *data;
	size_t len, cap;
	size_t lines;
	bool eof, closed;
};

static void on_connect(uv_connect_t *req, int status)
{
	struct client *c = req->data;

	c->status = status ? status : 1;
}

static void client_connect(uv_loop_t *loop, struct client *c)
{
	memset(c, 0, sizeof(*c));
	uv_pipe_init(loop, &c->pipe, 0);
	c->pipe.data = c->conn.data = c;
	uv_pipe_connect(&c->conn, &c->pipe, sock_path, on_connect);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct client *c = h->data;

	if (c->len + 65536 > c->cap) {
		c->cap = c->cap ? c->cap * 2 : 1 << 20;
		c->data = realloc(c->data, c->cap + 1);
		assert_non_null(c->data);
	}
	*buf = uv_buf_init(c->data + c->len, c->cap - c->len);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct client *c = s->data;

	if (n < 0) {
		c->eof = true;
		uv_read_stop(s);
		return;
	}
	for (ssize_t i = 0; i < n; i++)
		c->lines += buf->base[i] == '\n';
	c->len += n;
	c->data[c->len] = '\0';
}

static void client_read(struct client *c)
{
	assert_int_equal(uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read), 0);
}

static void on_client_closed(uv_handle_t *h)
{
	((struct client *)h->data)->closed = true;
}

static void client_free(struct client *c)
{
	if (!uv_is_closing((uv_handle_t *)&c->pipe))
		uv_close((uv_handle_t *)&c->pipe, on_client_closed);
	free(c->data);
	c->data = NULL;
}

/* What a subscriber read: records by seq, the drops it was told of. */
struct got {
	size_t records, notices;
	uint64_t announced, first_seq, last_seq;
	uint64_t *seqs;
};

/* Parse every line; each record's seq must follow the previous one exactly,
 * except right after a {"dropped":N} notice, where it skips exactly N. */
static void parse(const struct client *c, uint64_t first_expected, struct got *g)
{
	uint64_t expect = first_expected, gap = 0;
	const char *p = c->data ? c->data : "";

	memset(g, 0, sizeof(*g));
	g->seqs = calloc(c->lines + 1, sizeof(*g->seqs));
	assert_non_null(g->seqs);
	while (*p) {
		const char *nl = strchr(p, '\n');
		json_error_t jerr;
		json_t *o, *v;

		assert_non_null(nl); /* only whole lines */
		o = json_loadb(p, nl - p, 0, &jerr);
		if (!o)
			fail_msg("line does not parse (%s): %.*s", jerr.text, (int)(nl - p), p);
		if ((v = json_object_get(o, "dropped"))) {
			assert_int_equal(json_object_size(o), 1);
			assert_true(json_integer_value(v) > 0);
			gap += json_integer_value(v);
			g->announced += json_integer_value(v);
			g->notices++;
		} else {
			uint64_t seq = json_integer_value(json_object_get(o, "seq"));

			assert_string_equal(json_string_value(json_object_get(o, "metric")),
					    "stream_test");
			if (seq != expect + gap)
				fail_msg("record %zu: seq %llu, expected %llu", g->records,
					 (unsigned long long)seq,
					 (unsigned long long)(expect + gap));
			if (!g->records)
				g->first_seq = seq;
			g->seqs[g->records++] = seq;
			g->last_seq = seq;
			expect = seq + 1;
			gap = 0;
		}
		json_decref(o);
		p = nl + 1;
	}
	assert_int_equal(gap, 0); /* a notice is always followed by a record */
}

static void submit_range(void *priv, uint64_t from, uint64_t n)
{
	struct ktel_record r[64];

	assert_true(n <= 64);
	for (uint64_t i = 0; i < n; i++) {
		r[i] = (struct ktel_record){
			.type = KTEL_RECORD_COUNTER,
			.metric = "stream_test",
			.unit = "events",
			.boot_id = "0123456789abcdef0123456789abcdef",
			.map_id = 7,
			.seq = from + i,
			.n_dims = 2,
		};
		r[i].dims[0] = (struct ktel_dim){.name = "process_state",
						 .value = 2,
						 .label = "STATE_FOREGROUND"};
		r[i].dims[1] = (struct ktel_dim){.name = "uid", .value = 10000 + i};
		r[i].counter.delta = i;
		r[i].counter.total = from + i;
	}
	ops()->submit(priv, r, n);
}

struct wait_subs {
	void *priv;
	unsigned n;
};

static bool have_subs(void *ctx)
{
	struct wait_subs *w = ctx;

	return ktel_stream_sink__subscribers(w->priv) == w->n;
}

static void wait_subscribers(uv_loop_t *loop, void *priv, unsigned n)
{
	struct wait_subs w = {priv, n};

	ktel_test_run_until(loop, have_subs, &w);
}

struct wait_lines {
	struct client *c;
	size_t n;
};

static bool have_lines(void *ctx)
{
	struct wait_lines *w = ctx;

	return w->c->lines >= w->n;
}

static bool is_closed(void *ctx)
{
	return *(int *)ctx > 0;
}

static bool is_eof(void *ctx)
{
	return ((struct client *)ctx)->eof;
}

static bool both_eof(void *ctx)
{
	struct client *c = ctx;

	return c[0].eof && c[1].eof;
}

/* Nothing waits in the sink for subscriber c, nothing in its socket, and
 * what it read ends on a whole line. */
struct drained {
	void *priv;
	struct client *c;
};

static bool is_drained(void *ctx)
{
	struct drained *d = ctx;
	struct ktel_sink_stats st;
	uv_os_fd_t fd;
	int unread = -1;

	ops()->stats(d->priv, &st);
	if (st.queued)
		return false;
	assert_int_equal(uv_fileno((uv_handle_t *)&d->c->pipe, &fd), 0);
	assert_int_equal(ioctl(fd, FIONREAD, &unread), 0);
	return unread == 0 && (!d->c->len || d->c->data[d->c->len - 1] == '\n');
}

static void finish_loop(uv_loop_t *loop)
{
	uv_run(loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(loop), 0);
}

/* Two subscribers: the fast one reads as records come and gets all of them
 * in order; the slow one does not read until the end, loses its oldest
 * records and is told how many right where they are missing. */
static void test_slow_subscriber_loses_oldest(void **state)
{
	const uint64_t total = 4000, backlog = 32;
	struct client c[2];
	struct ktel_sink_stats st;
	struct got fast, slow;
	uv_loop_t loop;
	void *priv;
	int closed = 0, small = 1024;
	uv_os_fd_t fd;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"socket\":\"%s\",\"backlog_records\":%llu,\"ring_records\":64}",
		      sock_path, (unsigned long long)backlog);
	client_connect(&loop, &c[0]);
	client_connect(&loop, &c[1]);
	wait_subscribers(&loop, priv, 2);
	assert_int_equal(c[0].status, 1);
	assert_int_equal(c[1].status, 1);
	assert_int_equal(uv_fileno((uv_handle_t *)&c[1].pipe, &fd), 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	client_read(&c[0]);

	for (uint64_t i = 0; i < total; i += 20) {
		struct wait_lines w = {&c[0], i + 20};

		submit_range(priv, i, 20);
		ktel_test_run_until(&loop, have_lines, &w);
	}
	ops()->stats(priv, &st);
	assert_true(st.dropped > 0);            /* the slow one is already losing */
	assert_true(st.queued <= backlog + 64); /* its backlog plus one write */

	/* Now it reads; close flushes what it still has coming, then EOF. */
	client_read(&c[1]);
	ops()->close(priv, 5000, ktel_test_count_closed, &closed);
	ktel_test_run_until(&loop, is_closed, &closed);
	ktel_test_run_until(&loop, both_eof, c);

	parse(&c[0], 0, &fast);
	assert_int_equal(fast.records, total);
	assert_int_equal(fast.notices, 0);
	assert_int_equal(fast.last_seq, total - 1);

	parse(&c[1], 0, &slow);
	assert_true(slow.notices >= 1);
	assert_int_equal(slow.first_seq, 0); /* what fit in the socket came first */
	assert_int_equal(slow.last_seq, total - 1);
	assert_int_equal(slow.records + slow.announced, total);
	/* Oldest lost, newest kept: the last backlog records all arrived. */
	for (uint64_t k = 0; k < backlog; k++)
		assert_int_equal(slow.seqs[slow.records - backlog + k], total - backlog + k);

	free(fast.seqs);
	free(slow.seqs);
	client_free(&c[0]);
	client_free(&c[1]);
	finish_loop(&loop);
}

/* The sink's counters match what the subscribers saw (read while the sink
 * lives: after close it is gone). */
static void test_stats_match_subscribers(void **state)
{
	struct client c[2];
	struct ktel_sink_stats st;
	struct got fast, slow;
	uv_loop_t loop;
	void *priv;
	int closed = 0;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"socket\":\"%s\",\"backlog_records\":16,\"ring_records\":16}",
		      sock_path);
	client_connect(&loop, &c[0]);
	client_connect(&loop, &c[1]);
	wait_subscribers(&loop, priv, 2);
	client_read(&c[0]);
	for (uint64_t i = 0; i < 3000; i += 50) {
		struct wait_lines w = {&c[0], i + 50};

		submit_range(priv, i, 50);
		ktel_test_run_until(&loop, have_lines, &w);
	}
	client_read(&c[1]);
	{
		/* Drain the slow one: all handed to its socket, all read. */
		struct drained d = {priv, &c[1]};

		ktel_test_run_until(&loop, is_drained, &d);
	}
	ops()->stats(priv, &st);
	parse(&c[0], 0, &fast);
	parse(&c[1], 0, &slow);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.sent, fast.records + slow.records);
	assert_int_equal(st.dropped, slow.announced);
	assert_int_equal(fast.records, 3000);
	assert_int_equal(slow.records + slow.announced, 3000);
	ops()->close(priv, 1000, ktel_test_count_closed, &closed);
	ktel_test_run_until(&loop, is_closed, &closed);
	free(fast.seqs);
	free(slow.seqs);
	client_free(&c[0]);
	client_free(&c[1]);
	finish_loop(&loop);
}

/* The socket is 0660 with the configured group, numeric or by name; a new
 * subscriber first gets the recent records (at most its backlog). */
static void test_mode_group_and_replay(void **state)
{
	struct group *gr = getgrgid(getegid());
	struct client c;
	struct got g;
	struct stat st;
	uv_loop_t loop;
	void *priv;
	int closed = 0;

	for (int named = 0; named < 2; named++) {
		uv_loop_init(&loop);
		if (named) {
			assert_non_null(gr);
			priv = create(&loop,
				      "{\"socket\":\"%s\",\"group\":\"%s\","
				      "\"backlog_records\":4,\"ring_records\":8}",
				      sock_path, gr->gr_name);
		} else {
			priv = create(&loop, "{\"socket\":\"%s\",\"group\":%u}", sock_path,
				      (unsigned)getegid());
		}
		assert_int_equal(lstat(sock_path, &st), 0);
		assert_true(S_ISSOCK(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0660);
		assert_int_equal(st.st_gid, getegid());

		submit_range(priv, 0, 10);
		client_connect(&loop, &c);
		client_read(&c);
		{
			struct wait_lines w = {&c, named ? 4 : 10};

			ktel_test_run_until(&loop, have_lines, &w);
		}
		ops()->close(priv, 1000, ktel_test_count_closed, &closed);
		ktel_test_run_until(&loop, is_closed, &closed);
		closed = 0;
		while (!c.eof)
			uv_run(&loop, UV_RUN_ONCE);
		parse(&c, named ? 6 : 0, &g);
		/* backlog 4: the newest 4 of 10, no drop notice for a newcomer */
		assert_int_equal(g.records, named ? 4 : 10);
		assert_int_equal(g.notices, 0);
		assert_int_equal(g.last_seq, 9);
		free(g.seqs);
		assert_int_equal(access(sock_path, F_OK), -1); /* close removed it */
		client_free(&c);
		finish_loop(&loop);
	}
}

/* Close sends everything queued to a reading subscriber before EOF. */
static void test_close_flushes(void **state)
{
	struct client c;
	struct ktel_sink_stats st;
	struct got g;
	uv_loop_t loop;
	void *priv;
	int closed = 0;

	uv_loop_init(&loop);
	priv = create(&loop,
		      "{\"socket\":\"%s\",\"backlog_records\":2000,"
		      "\"ring_records\":2000}",
		      sock_path);
	client_connect(&loop, &c);
	wait_subscribers(&loop, priv, 1);
	client_read(&c);
	for (uint64_t i = 0; i < 1000; i += 50)
		submit_range(priv, i, 50); /* far more than the socket takes at once */
	ops()->stats(priv, &st);
	assert_true(st.queued > 0);
	ops()->close(priv, 5000, ktel_test_count_closed, &closed);
	submit_range(priv, 1000, 1); /* after close: dropped */
	ktel_test_run_until(&loop, is_closed, &closed);
	while (!c.eof)
		uv_run(&loop, UV_RUN_ONCE);
	parse(&c, 0, &g);
	assert_int_equal(g.records, 1000);
	assert_int_equal(g.notices, 0);
	free(g.seqs);
	client_free(&c);
	finish_loop(&loop);
}

/* Lines are packed into 64 KiB blocks: a line longer than a block gets a
 * block of its own, between blocks of short lines, and every line arrives
 * whole and in order (the sanitizer build sees a block leaked or used
 * after it was freed). */
static void test_lines_across_blocks(void **state)
{
	static char big[200000];
	struct ktel_record r = {
		.type = KTEL_RECORD_COUNTER,
		.metric = "stream_test",
		.unit = "events",
		.boot_id = "b",
		.n_dims = 1,
	};
	struct ktel_sink_stats st;
	struct client c;
	struct got g;
	uv_loop_t loop;
	void *priv;
	int closed = 0;

	memset(big, 'L', sizeof(big) - 1);
	uv_loop_init(&loop);
	priv = create(&loop,
		      "{\"socket\":\"%s\",\"backlog_records\":3000,"
		      "\"ring_records\":3000}",
		      sock_path);
	client_connect(&loop, &c);
	wait_subscribers(&loop, priv, 1);
	client_read(&c);
	for (uint64_t i = 0; i < 2000; i += 50) {
		submit_range(priv, i, 49);
		/* every 50th: a line over three blocks long */
		r.seq = i + 49;
		r.dims[0] = (struct ktel_dim){.name = "d", .value = 1, .label = big};
		ops()->submit(priv, &r, 1);
		uv_run(&loop, UV_RUN_NOWAIT);
	}
	ops()->stats(priv, &st);
	assert_int_equal(st.dropped, 0);
	ops()->close(priv, 5000, ktel_test_count_closed, &closed);
	ktel_test_run_until(&loop, is_closed, &closed);
	while (!c.eof)
		uv_run(&loop, UV_RUN_ONCE);
	parse(&c, 0, &g);
	assert_int_equal(g.records, 2000);
	assert_int_equal(g.notices, 0);
	/* 40 whole copies of the long label */
	for (const char *p = c.data, *q; (q = strstr(p, "\"d\":\"L")); p = q + 1) {
		assert_int_equal(strspn(q + 5, "L"), sizeof(big) - 1);
		assert_int_equal(q[5 + sizeof(big) - 1], '"');
		closed++;
	}
	assert_int_equal(closed, 1 + 40);
	free(g.seqs);
	client_free(&c);
	finish_loop(&loop);
}

/* Lines whose worst case (every byte escaped) is over a block get a block
 * each, cut to the line: a ring of 500 lines of 11 KB holds ~6 MB, not 500
 * buffers grown by doubling (256 KiB each, 128 MB). malloc's own count of
 * bytes in use is the measure; under a sanitizer, which keeps its own,
 * mallinfo2() says 0 and only the delivery is checked. */
static void test_long_lines_cut_to_size(void **state)
{
	static char label[11000];
	struct ktel_record r = {
		.type = KTEL_RECORD_COUNTER,
		.metric = "stream_test",
		.unit = "events",
		.boot_id = "b",
		.n_dims = 1,
	};
	struct ktel_sink_stats st;
	struct mallinfo2 before, after;
	size_t used_before, used_after;
	uv_loop_t loop;
	void *priv;
	int closed = 0;

	memset(label, 'x', sizeof(label) - 1);
	uv_loop_init(&loop);
	priv = create(&loop,
		      "{\"socket\":\"%s\",\"backlog_records\":500,"
		      "\"ring_records\":500}",
		      sock_path);
	before = mallinfo2();
	for (uint64_t i = 0; i < 500; i++) {
		r.seq = i;
		r.dims[0] = (struct ktel_dim){.name = "d", .value = 1, .label = label};
		ops()->submit(priv, &r, 1);
	}
	after = mallinfo2();
	ops()->stats(priv, &st);
	assert_int_equal(st.dropped, 0);
	used_before = before.uordblks + before.hblkhd;
	used_after = after.uordblks + after.hblkhd;
	if (used_before || used_after) {
		printf("500 lines of %zu bytes: %zu bytes more in use\n", sizeof(label),
		       used_after - used_before);
		assert_true(used_after - used_before < 500 * 2 * sizeof(label));
	}
	ops()->close(priv, 1000, ktel_test_count_closed, &closed);
	ktel_test_run_until(&loop, is_closed, &closed);
	finish_loop(&loop);
}

/* A subscriber that never reads cannot hold close past its timeout; what it
 * was not sent is counted. */
static void test_close_timeout(void **state)
{
	struct client c;
	struct ktel_sink_stats st;
	struct ktel_test_latency l;
	double ms, waited;
	uv_loop_t loop;
	void *priv;
	int closed = 0;

	uv_loop_init(&loop);
	priv = create(&loop,
		      "{\"socket\":\"%s\",\"backlog_records\":4000,"
		      "\"ring_records\":4000}",
		      sock_path);
	client_connect(&loop, &c);
	wait_subscribers(&loop, priv, 1);
	for (uint64_t i = 0; i < 4000; i += 50)
		submit_range(priv, i, 50);
	for (int k = 0; k < 20; k++)
		uv_run(&loop, UV_RUN_NOWAIT);
	/* Nothing dropped yet (the backlog holds all), some waiting. */
	ops()->stats(priv, &st);
	assert_true(st.queued > 0);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.sent + st.queued, 4000);
	ktel_test_latency_start(&l, 0, 0);
	ops()->close(priv, 100, ktel_test_count_closed, &closed);
	ktel_test_run_until(&loop, is_closed, &closed);
	/* The loop's time to close, less what the machine's load added (the
	 * sink runs on this thread only). */
	ms = ktel_test_latency_end(&l, &waited);
	printf("close with a subscriber that does not read: %.0f ms, %.0f ms of it waiting "
	       "for a CPU\n",
	       ms, waited);
	assert_true(ms - waited < 2000);
	client_free(&c);
	finish_loop(&loop);
}

static void expect_create_error(const char *opts_json, int code, const char *msg)
{
	json_t *opts = json_loads(opts_json, 0, NULL);
	struct ktel_err err = {0};
	void *priv = NULL;
	uv_loop_t loop;

	uv_loop_init(&loop);
	assert_non_null(opts);
	assert_int_equal(ops()->create(&loop, "s", opts, &priv, &err), -code);
	assert_null(priv);
	assert_string_equal(err.msg, msg);
	json_decref(opts);
	finish_loop(&loop);
}

static void test_socket_path_rules(void **state)
{
	char opts[800], msg[900];
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	uv_loop_t loop;
	void *priv;
	int fd, closed = 0;
	FILE *f;

	snprintf(opts, sizeof(opts), "{\"socket\":\"%s\"}", sock_path);

	/* A regular file is never replaced. */
	f = fopen(sock_path, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(msg, sizeof(msg), "sinks.s.socket: %s exists and is not a socket", sock_path);
	expect_create_error(opts, EEXIST, msg);
	unlink(sock_path);

	/* A stale socket (nobody listening) is. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	strcpy(sun.sun_path, sock_path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
	uv_loop_init(&loop);
	priv = create(&loop, "%s", opts);

	ops()->close(priv, 100, ktel_test_count_closed, &closed);
	finish_loop(&loop);
	assert_int_equal(closed, 1);
	assert_int_equal(access(sock_path, F_OK), -1); /* close removed it */

	/* A live one of another listener is not. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(fd, 1), 0);
	snprintf(msg, sizeof(msg), "sinks.s.socket: %s is served by another process", sock_path);
	expect_create_error(opts, EADDRINUSE, msg);
	assert_int_equal(access(sock_path, F_OK), 0); /* and left it alone */
	close(fd);
	unlink(sock_path);
}

static bool connected(void *ctx)
{
	return ((struct client *)ctx)->status != 0;
}

/* Connect a client that reads, and wait until priv counts n subscribers. */
static void subscribe(uv_loop_t *loop, struct client *c, void *priv, unsigned n)
{
	client_connect(loop, c);
	ktel_test_run_until(loop, connected, c);
	assert_int_equal(c->status, 1);
	client_read(c);
	wait_subscribers(loop, priv, n);
}

/*
 * A second instance at the path of a live one of this process (what a
 * reload that changes the sink's options makes) is complete before it
 * takes the path: new subscribers reach it, the old one's stay. Discarded,
 * it gives the path back to the old one; the old one closing leaves the new
 * one's file in place, and no name behind.
 */
static void test_replacement_takes_path(void **state)
{
	struct client c[4];
	char backup[700];
	uv_loop_t loop;
	void *a, *b;
	int closed = 0;

	snprintf(backup, sizeof(backup), "%s.%d.old", sock_path, (int)getpid());
	uv_loop_init(&loop);
	a = create(&loop, "{\"socket\":\"%s\"}", sock_path);
	subscribe(&loop, &c[0], a, 1);
	b = create(&loop, "{\"socket\":\"%s\",\"backlog_records\":10}", sock_path);
	subscribe(&loop, &c[1], b, 1);
	assert_int_equal(ktel_stream_sink__subscribers(a), 1);
	assert_int_equal(access(backup, F_OK), 0);

	/* Discarded: the path serves a again. */
	ops()->close(b, 100, ktel_test_count_closed, &closed);
	ktel_test_run_until(&loop, is_closed, &closed);
	closed = 0;
	assert_int_equal(access(backup, F_OK), -1);
	subscribe(&loop, &c[2], a, 2);
	submit_range(a, 0, 1);
	{
		struct wait_lines w = {&c[2], 1};

		ktel_test_run_until(&loop, have_lines, &w);
	}

	/* Installed: a closes, b's file stays, and so does b. */
	b = create(&loop, "{\"socket\":\"%s\",\"backlog_records\":10}", sock_path);
	ops()->close(a, 100, ktel_test_count_closed, &closed);
	ktel_test_run_until(&loop, is_closed, &closed);
	closed = 0;
	assert_int_equal(access(sock_path, F_OK), 0);
	assert_int_equal(access(backup, F_OK), -1);
	subscribe(&loop, &c[3], b, 1);
	ops()->close(b, 100, ktel_test_count_closed, &closed);
	for (int i = 0; i < 4; i++)
		client_free(&c[i]);
	finish_loop(&loop);
	assert_int_equal(closed, 1);
	assert_int_equal(access(sock_path, F_OK), -1);
}

/* A replacement that cannot be made leaves the serving instance's socket
 * alone (here its temporary name is taken by a directory). */
static void test_failed_replacement_keeps_old(void **state)
{
	char tmp[700], opts[800];
	struct ktel_err err = {0};
	struct client c;
	uv_loop_t loop;
	json_t *o;
	void *a, *b = NULL;
	int closed = 0;

	snprintf(tmp, sizeof(tmp), "%s.%d.new", sock_path, (int)getpid());
	uv_loop_init(&loop);
	a = create(&loop, "{\"socket\":\"%s\"}", sock_path);
	assert_int_equal(mkdir(tmp, 0700), 0);
	snprintf(opts, sizeof(opts), "{\"socket\":\"%s\",\"backlog_records\":10}", sock_path);
	o = json_loads(opts, 0, NULL);
	assert_int_not_equal(ops()->create(&loop, "s", o, &b, &err), 0);
	json_decref(o);
	assert_non_null(strstr(err.msg, "cannot bind"));
	rmdir(tmp);
	subscribe(&loop, &c, a, 1);
	ops()->close(a, 100, ktel_test_count_closed, &closed);
	client_free(&c);
	finish_loop(&loop);
	assert_int_equal(closed, 1);
}

/* The protocol is one-way: a subscriber that writes is disconnected and
 * counted as refused, and so is one over max_subscribers. */
static void test_writer_refused(void **state)
{
	struct ktel_sink_stats st = {0};
	struct client c[3];
	uv_loop_t loop;
	void *priv;
	int closed = 0;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"socket\":\"%s\",\"max_subscribers\":1}", sock_path);
	subscribe(&loop, &c[0], priv, 1);
	assert_int_equal(write(c[0].pipe.io_watcher.fd, "hello\n", 6), 6);
	ktel_test_run_until(&loop, is_eof, &c[0]);
	wait_subscribers(&loop, priv, 0);
	ops()->stats(priv, &st);
	assert_int_equal(st.refused, 1);

	/* The one over the limit. */
	subscribe(&loop, &c[1], priv, 1);
	client_connect(&loop, &c[2]);
	ktel_test_run_until(&loop, connected, &c[2]);
	client_read(&c[2]);
	ktel_test_run_until(&loop, is_eof, &c[2]);
	ops()->stats(priv, &st);
	assert_int_equal(st.refused, 2);
	assert_int_equal(ktel_stream_sink__subscribers(priv), 1);
	ops()->close(priv, 100, ktel_test_count_closed, &closed);
	for (int i = 0; i < 3; i++)
		client_free(&c[i]);
	finish_loop(&loop);
	assert_int_equal(closed, 1);
}

static void test_option_errors(void **state)
{
	expect_create_error("{}", EINVAL, "sinks.s.socket: required");
	expect_create_error("{\"socket\":\"\"}", EINVAL,
			    "sinks.s.socket: expected non-empty string, got \"\"");
	expect_create_error("{\"socket\":\"/x\",\"backlog_records\":100,\"ring_records\":10}",
			    EINVAL,
			    "sinks.s: ring_records (10) must be at least backlog_records "
			    "(100)");
	expect_create_error("{\"socket\":\"/x\",\"backlog_records\":0}", EINVAL,
			    "sinks.s.backlog_records: expected integer 1..1048576, got 0");
	expect_create_error(
		"{\"socket\":\"/x\",\"group\":\"no-such-group-ktel\"}", EINVAL,
		"sinks.s.group: group \"no-such-group-ktel\" does not exist on this system");
	expect_create_error("{\"socket\":\"/x\",\"group\":true}", EINVAL,
			    "sinks.s.group: expected group name or numeric gid, got true");
	expect_create_error("{\"socket\":\"/x\",\"max_subscribers\":0}", EINVAL,
			    "sinks.s.max_subscribers: expected integer 1..1024, got 0");
	expect_create_error("{\"socket\":\"/x\",\"bogus\":1}", EINVAL,
			    "sinks.s.bogus: unknown key (known keys: socket, group, backlog_records, "
			    "ring_records, max_subscribers)");
	{
		char opts[300], msg[300];

		snprintf(opts, sizeof(opts), "{\"socket\":\"/%0120d/%0120d\"}", 0, 0);
		snprintf(msg, sizeof(msg), "sinks.s.socket: longer than %zu bytes",
			 sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		expect_create_error(opts, ENAMETOOLONG, msg);
	}
	{
		static const char *const names[] = {"socket", "group", "backlog_records",
						    "ring_records", "max_subscribers"};
		const struct ktel_cfg_key *k = ops()->options;
		size_t n = 0;

		for (; k->name; k++, n++)
			assert_string_equal(k->name, names[n]);
		assert_int_equal(n, 5);
	}
}

/* Beyond max_subscribers a connection is closed at once; one that leaves
 * is forgotten. */
static void test_max_subscribers(void **state)
{
	struct client c[2];
	uv_loop_t loop;
	void *priv;
	int closed = 0;

	uv_loop_init(&loop);
	priv = create(&loop, "{\"socket\":\"%s\",\"max_subscribers\":1}", sock_path);
	client_connect(&loop, &c[0]);
	wait_subscribers(&loop, priv, 1);
	client_connect(&loop, &c[1]);
	client_read(&c[0]);
	while (c[1].status == 0)
		uv_run(&loop, UV_RUN_ONCE);
	client_read(&c[1]);
	while (!c[1].eof)
		uv_run(&loop, UV_RUN_ONCE);
	assert_int_equal(ktel_stream_sink__subscribers(priv), 1);
	submit_range(priv, 0, 1);
	{
		struct wait_lines w = {&c[0], 1};

		ktel_test_run_until(&loop, have_lines, &w);
	}
	assert_int_equal(c[1].len, 0);
	client_free(&c[0]);
	wait_subscribers(&loop, priv, 0);
	ops()->close(priv, 100, ktel_test_count_closed, &closed);
	client_free(&c[1]);
	finish_loop(&loop);
	assert_int_equal(closed, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_slow_subscriber_loses_oldest, new_socket),
		cmocka_unit_test_setup(test_lines_across_blocks, new_socket),
		cmocka_unit_test_setup(test_long_lines_cut_to_size, new_socket),
		cmocka_unit_test_setup(test_stats_match_subscribers, new_socket),
		cmocka_unit_test_setup(test_mode_group_and_replay, new_socket),
		cmocka_unit_test_setup(test_close_flushes, new_socket),
		cmocka_unit_test_setup(test_close_timeout, new_socket),
		cmocka_unit_test_setup(test_socket_path_rules, new_socket),
		cmocka_unit_test_setup(test_option_errors, new_socket),
		cmocka_unit_test_setup(test_max_subscribers, new_socket),
		cmocka_unit_test_setup(test_replacement_takes_path, new_socket),
		cmocka_unit_test_setup(test_failed_replacement_keeps_old, new_socket),
		cmocka_unit_test_setup(test_writer_refused, new_socket),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
