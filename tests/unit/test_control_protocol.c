// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Control socket protocol without a socket or privileges: line framing and
 * its bound, request checking (every refusal with its message), answers as
 * single lines, records in the JSON sink's format, the peer credential rule,
 * offline inspect of a real plugin and of an unreadable one, and the human
 * rendering (bucket bounds, bars, the aligned list table). The command
 * table is checked against docs/control.md so the two cannot drift.
 * Commands are answered through the ops table by the fake daemon of
 * tests/control_fake.h, with and without a real (unprivileged) socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.h"
#include "control_fake.h"
#include "ctl_render.h"
#include "inspect.h"
#include "ktel_test.h"
#include "utf8.h"

/* ---- framing -------------------------------------------------------------- */

struct lines {
	char got[8][64];
	int n;
	int stop_after; /* return -1 after this many (0: never) */
};

static int collect(char *line, void *ctx)
{
	struct lines *l = ctx;

	snprintf(l->got[l->n++], sizeof(l->got[0]), "%s", line);
	return l->stop_after && l->n >= l->stop_after ? -ECANCELED : 0;
}

static void test_split_lines(void **state)
{
	char buf[64];
	struct lines l = {0};
	size_t len;

	strcpy(buf, "{\"a\":1}\r\n\n{\"b\"");
	len = strlen(buf);
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.got[0], "{\"a\":1}");
	assert_string_equal(l.got[1], "");
	/* The incomplete tail waits at the front for the rest. */
	assert_int_equal(len, 4);
	assert_memory_equal(buf, "{\"b\"", 4);
	memcpy(buf + len, ":2}\n", 4);
	len += 4;
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.got[2], "{\"b\":2}");
	assert_int_equal(len, 0);
}

static int take_one(char *line, void *ctx)
{
	int *n = ctx;

	return (*n)++ ? -EAGAIN : 0;
}

/* -EAGAIN leaves the line in the buffer, '\r' and '\n' restored. */
static void test_split_lines_again(void **state)
{
	char buf[64];
	size_t len = 0;
	int n = 0;

	len = (size_t)snprintf(buf, sizeof(buf), "a\r\nbc\r\nd\n");
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), take_one, &n), -EAGAIN);
	assert_int_equal(n, 2);
	assert_int_equal(len, 6);
	assert_memory_equal(buf, "bc\r\nd\n", 6);
}

static void test_split_lines_limit(void **state)
{
	char buf[16];
	struct lines l = {0};
	size_t len = sizeof(buf);

	/* A full buffer without a newline: the line is over the limit. */
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l), -E2BIG);
	assert_int_equal(l.n, 0);
	/* One byte less still fits: wait for more. */
	len = sizeof(buf) - 1;
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l), 0);
	/* A complete line followed by a full-size tail is still refused. */
	memcpy(buf, "ab\n", 3);
	len = sizeof(buf);
	assert_int_equal(ktel_control_split_lines(buf, &len, 8, collect, &l), -E2BIG);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.got[0], "ab");
}

static void test_split_lines_stop(void **state)
{
	char buf[32] = "a\nb\nc\n";
	struct lines l = {.stop_after = 2};
	size_t len = strlen(buf);

	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l), -ECANCELED);
	assert_int_equal(l.n, 2);
	assert_int_equal(len, 2); /* "c\n" left */
}

/* ---- requests --------------------------------------------------------------- */

static void expect_refusal(const char *line, const char *msg)
{
	const struct ktel_control_cmd *cmd = NULL;
	struct ktel_err err = {0};
	json_t *req = NULL;

	assert_int_equal(ktel_control_parse_request(line, &req, &cmd, &err), -EINVAL);
	assert_null(req);
	if (strcmp(err.msg, msg) != 0)
		fail_msg("%s: got \"%s\", expected \"%s\"", line, err.msg, msg);
}

static void test_request_refusals(void **state)
{
	expect_refusal("[1, 2]", "request is not a JSON object");
	expect_refusal("{}", "request has no \"cmd\" string");
	expect_refusal("{\"cmd\": 5}", "request has no \"cmd\" string");
	expect_refusal("{\"cmd\": \"frobnicate\"}",
		       "unknown command \"frobnicate\" (\"help\" lists them)");
	expect_refusal("{\"cmd\": \"list\", \"name\": \"x\"}", "list: unknown argument \"name\"");
	expect_refusal("{\"cmd\": \"enable\"}", "enable: missing argument \"name\"");
	expect_refusal("{\"cmd\": \"enable\", \"name\": 3}", "enable: \"name\": expected a string");
	expect_refusal("{\"cmd\": \"enable\", \"name\": \"x\", \"for_ms\": \"2s\"}",
		       "enable: \"for_ms\": expected an integer >= 0");
	expect_refusal("{\"cmd\": \"enable\", \"name\": \"x\", \"for_ms\": -1}",
		       "enable: \"for_ms\": expected an integer >= 0");
	expect_refusal("{\"cmd\": \"show\", \"name\": \"a\", \"name\": \"b\"}",
		       "request is not JSON: duplicate object key near '\"name\"' (column 35)");
}

static void test_request_not_json(void **state)
{
	const struct ktel_control_cmd *cmd;
	struct ktel_err err = {0};
	json_t *req = NULL;

	assert_int_equal(ktel_control_parse_request("{\"cmd\": ", &req, &cmd, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "request is not JSON: "));
	assert_non_null(strstr(err.msg, "(column "));
}

static void test_request_accepted(void **state)
{
	const struct ktel_control_cmd *cmd = NULL;
	struct ktel_err err = {0};
	json_t *req = NULL;

	assert_int_equal(ktel_control_parse_request("{\"cmd\":\"enable\",\"name\":\"runq_latency\","
						    "\"for_ms\":2000}",
						    &req, &cmd, &err),
			 0);
	assert_string_equal(cmd->name, "enable");
	assert_int_equal(json_integer_value(json_object_get(req, "for_ms")), 2000);
	json_decref(req);
	assert_int_equal(ktel_control_parse_request("{\"cmd\":\"pull\"}", &req, &cmd, &err), 0);
	assert_string_equal(cmd->name, "pull");
	json_decref(req);
}

static void test_command_table(void **state)
{
	size_t n = 0;

	for (const struct ktel_control_cmd *c = ktel_control_cmds; c->name; c++, n++) {
		assert_non_null(c->fn);
		assert_true(c->help && c->help[0]);
		assert_ptr_equal(ktel_control_cmd_find(c->name), c);
	}
	assert_true(n >= 9);
	assert_null(ktel_control_cmd_find("nope"));
	assert_null(ktel_control_cmd_find(NULL));
}

/*
 * Every command of the protocol has a "### `name`" section in
 * docs/control.md. The sections of the client's own commands (top, leases,
 * inspect), and that every section names a command, test_ctl_cli checks
 * against ktelemetryctl --help.
 */
static void test_docs_match_table(void **state)
{
	for (const struct ktel_control_cmd *c = ktel_control_cmds; c->name; c++) {
		FILE *f = fopen(KTEL_SOURCE_DIR "/docs/control.md", "r");
		char line[512], want[80];
		bool found = false;

		assert_non_null(f);
		snprintf(want, sizeof(want), "### `%s`\n", c->name);
		while (!found && fgets(line, sizeof(line), f))
			found = strcmp(line, want) == 0;
		fclose(f);
		if (!found)
			fail_msg("command \"%s\" has no \"### `%s`\" section in docs/control.md",
				 c->name, c->name);
	}
}

/* ---- answers ------------------------------------------------------------------ */

static void test_answer_one_line(void **state)
{
	json_t *e = ktel_control_error(KTEL_CTL_E_FAILED, "two\nlines");
	size_t len;
	char *line = ktel_control_dump_line(e, &len);
	json_t *back;

	assert_non_null(line);
	assert_int_equal(strlen(line), len);
	assert_int_equal(line[len - 1], '\n');
	assert_null(memchr(line, '\n', len - 1));
	back = json_loads(line, 0, NULL);
	assert_non_null(back);
	assert_true(json_is_false(json_object_get(back, "ok")));
	assert_string_equal(json_string_value(json_object_get(back, "error")), "two\nlines");
	assert_string_equal(json_string_value(json_object_get(back, "code")), "failed");
	/* "ok" comes first: a reader can tell success from the first bytes. */
	assert_memory_equal(line, "{\"ok\":false", 11);
	json_decref(back);
	json_decref(e);
	free(line);
}

static void test_record_json(void **state)
{
	struct ktel_record r = {
		.type = KTEL_RECORD_HISTOGRAM,
		.metric = "m",
		.unit = "us",
		.boot_id = "b",
		.map_id = 7,
		.seq = 3,
		.n_dims = 1,
		.dims = {{.name = "cpu", .value = 2}},
	};
	json_t *j, *h;

	r.hist.delta.scheme = KTEL_HIST_LOG2;
	r.hist.delta.n_buckets = 32;
	r.hist.delta.counts[9] = 12;
	r.hist.total = r.hist.delta;
	j = ktel_control_record_json(&r);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "metric")), "m");
	assert_int_equal(json_integer_value(json_object_get(j, "map_id")), 7);
	h = json_object_get(j, "histogram");
	assert_int_equal(json_integer_value(json_array_get(json_object_get(h, "counts"), 9)), 12);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(h, "le"), 9)), 512);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "dims"), "cpu")), 2);
	json_decref(j);
}

/* ---- commands through the ops table ------------------------------------------ */

static json_t *answer(struct ctl_fake *f, const char *line)
{
	json_t *resp = ktel_control_answer_line(&ctl_fake_ops, f, line);

	assert_non_null(resp);
	return resp;
}

static const char *jstr_of(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* The checked arguments reach the operation: the name, for_ms as the lease. */
static void test_ops_arguments(void **state)
{
	struct ctl_fake f;
	json_t *resp;

	ctl_fake_init(&f);
	resp = answer(&f, "{\"cmd\":\"enable\",\"name\":\"runq_latency\",\"for_ms\":2500}");
	assert_true(json_is_true(json_object_get(resp, "ok")));
	assert_string_equal(f.last_op, "enable");
	assert_string_equal(f.last_name, "runq_latency");
	assert_int_equal(f.last_lease_ms, 2500);
	assert_string_equal(jstr_of(resp, "metric"), "runq_latency");
	assert_int_equal(json_integer_value(json_object_get(resp, "lease_ms")), 2500);
	json_decref(resp);
	resp = answer(&f, "{\"cmd\":\"enable\",\"name\":\"runq_latency\"}");
	assert_int_equal(f.last_lease_ms, 0); /* no for_ms: for good */
	json_decref(resp);
	/* pull without a name: NULL, every enabled metric. */
	resp = answer(&f, "{\"cmd\":\"pull\"}");
	assert_string_equal(f.last_op, "pull");
	assert_true(f.last_name_null);
	assert_int_equal(json_integer_value(json_object_get(resp, "pulled")), 2);
	assert_int_equal(json_array_size(json_object_get(resp, "records")), 2);
	json_decref(resp);
	resp = answer(&f, "{\"cmd\":\"reopen\"}");
	assert_int_equal(json_integer_value(json_object_get(resp, "sinks")), 1);
	json_decref(resp);
}

/* -ENOENT is not_found, -EINVAL bad_request, others failed; what the
 * operation filled in stays in the answer. */
static void test_ops_errors(void **state)
{
	struct ctl_fake f;
	json_t *resp, *errors;

	ctl_fake_init(&f);
	resp = answer(&f, "{\"cmd\":\"show\",\"name\":\"nope\"}");
	assert_true(json_is_false(json_object_get(resp, "ok")));
	assert_string_equal(jstr_of(resp, "code"), KTEL_CTL_E_NOT_FOUND);
	assert_string_equal(jstr_of(resp, "error"),
			    "no metric named \"nope\" (\"list\" shows them)");
	json_decref(resp);
	f.reload_errors[0] = "sinks[0].type: expected one of ...";
	f.reload_errors[1] = "metrics.x: unknown key";
	resp = answer(&f, "{\"cmd\":\"reload\"}");
	assert_string_equal(jstr_of(resp, "code"), KTEL_CTL_E_REQUEST);
	errors = json_object_get(resp, "errors");
	assert_int_equal(json_array_size(errors), 2);
	assert_string_equal(json_string_value(json_array_get(errors, 1)), "metrics.x: unknown key");
	json_decref(resp);
	f.fail = EIO;
	resp = answer(&f, "{\"cmd\":\"pull\",\"name\":\"runq_latency\"}");
	assert_string_equal(jstr_of(resp, "code"), KTEL_CTL_E_FAILED);
	assert_string_equal(jstr_of(resp, "error"), "fake pull failed");
	assert_true(json_is_array(json_object_get(resp, "records")));
	json_decref(resp);
}

/* status: the daemon's part, then the server's socket and counters. */
static void test_ops_status(void **state)
{
	struct ctl_fake f;
	json_t *resp, *d;
	const char *key;
	json_t *v;
	int i = 0, at_socket = -1, at_control = -1;

	ctl_fake_init(&f);
	resp = answer(&f, "{\"cmd\":\"status\"}");
	d = json_object_get(resp, "daemon");
	assert_string_equal(jstr_of(d, "config"), "fake");
	/* The path the answer came through replaces the configured one, in
	 * its place; no socket here, so "". */
	assert_string_equal(jstr_of(d, "control_socket"), "");
	assert_int_equal(json_integer_value(
				 json_object_get(json_object_get(d, "control"), "requests")),
			 0);
	json_object_foreach(d, key, v) {
		if (strcmp(key, "control_socket") == 0)
			at_socket = i;
		if (strcmp(key, "control") == 0)
			at_control = i;
		i++;
	}
	assert_int_equal(at_socket, 2);
	assert_int_equal(at_control, i - 1);
	assert_int_equal(json_array_size(json_object_get(resp, "metrics")), 2);
	json_decref(resp);
	/* A failed status is the operation's error, without the server's part. */
	f.fail = EIO;
	resp = answer(&f, "{\"cmd\":\"status\"}");
	assert_string_equal(jstr_of(resp, "code"), KTEL_CTL_E_FAILED);
	json_decref(resp);
}

/* help and refused requests never reach the daemon. */
static void test_ops_not_reached(void **state)
{
	struct ctl_fake f;
	json_t *resp;

	ctl_fake_init(&f);
	resp = answer(&f, "{\"cmd\":\"help\"}");
	assert_true(json_array_size(json_object_get(resp, "commands")) >= 9);
	json_decref(resp);
	resp = answer(&f, "{\"cmd\":\"enable\"}");
	assert_string_equal(jstr_of(resp, "code"), KTEL_CTL_E_REQUEST);
	assert_string_equal(jstr_of(resp, "error"), "enable: missing argument \"name\"");
	json_decref(resp);
	resp = answer(&f, "not json");
	assert_string_equal(jstr_of(resp, "code"), KTEL_CTL_E_REQUEST);
	json_decref(resp);
	assert_int_equal(f.calls, 0);
}

/* A server needs its ops. */
static void test_server_needs_ops(void **state)
{
	struct ktel_control *c = NULL;
	struct ktel_err err = {0};
	uv_loop_t loop;

	uv_loop_init(&loop);
	assert_int_equal(ktel_control__new(&loop, NULL, NULL, "/nonexistent/c.sock", (gid_t)-1, &c,
					   &err),
			 -EINVAL);
	assert_null(c);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/*
 * A real socket (no privileges: the peer's group is the socket's): pulls a
 * client pipelines are answered by one pull of the daemon, in order, and
 * the request behind them waits for their answers.
 */
static void test_server_coalesces_pulls(void **state)
{
	static const char reqs[] = "{\"cmd\":\"pull\"}\n{\"cmd\":\"pull\"}\n{\"cmd\":\"pull\"}\n"
				   "{\"cmd\":\"list\"}\n";
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ktel_control *c = NULL;
	struct ktel_err err = {0};
	char dir[200], got[16384] = "", *line, *save;
	struct ctl_fake f;
	size_t len = 0;
	uv_loop_t loop;
	int fd, i;

	ctl_fake_init(&f);
	mkdir(KTEL_BINARY_DIR "/test-tmp", 0755);
	snprintf(dir, sizeof(dir), "%s/test-tmp/ctl-unit-%d", KTEL_BINARY_DIR, getpid());
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/c.sock", dir);
	uv_loop_init(&loop);
	if (ktel_control__new(&loop, &ctl_fake_ops, &f, sa.sun_path, getgid(), &c, &err))
		fail_msg("%s", err.msg);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, reqs, strlen(reqs)), (ssize_t)strlen(reqs));
	for (i = 0; i < 5000 && count_lines(got) < 4; i++) {
		ssize_t n;

		uv_run(&loop, UV_RUN_NOWAIT);
		n = recv(fd, got + len, sizeof(got) - 1 - len, MSG_DONTWAIT);
		if (n > 0)
			len += (size_t)n;
		got[len] = '\0';
		if (n <= 0)
			usleep(1000);
	}
	assert_int_equal(count_lines(got), 4);
	assert_int_equal(f.pulls, 1);
	line = strtok_r(got, "\n", &save);
	for (i = 0; i < 3; i++, line = strtok_r(NULL, "\n", &save)) {
		assert_non_null(strstr(line, "\"ok\":true"));
		assert_non_null(strstr(line, "\"pulled\":1"));
	}
	assert_non_null(strstr(line, "\"metrics\":["));
	close(fd);
	ktel_control__close(c);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(access(sa.sun_path, F_OK), -1);
	rmdir(dir);
}

/* The fake's pull with a PAD_BYTES answer: large answers, as a pull of
 * many metrics gives. */
#define PAD_BYTES (80 * 1024)
static int padded_pull(void *ctx, const char *name, json_t *resp, struct ktel_err *err)
{
	static char pad[PAD_BYTES + 1];
	int r = ctl_fake_pull(ctx, name, resp, err);

	if (!pad[0])
		memset(pad, 'p', PAD_BYTES);
	json_object_set_new(resp, "pad", json_string(pad));
	return r;
}

/* A server on a fresh socket in dir, with the padded pull; its address in *sa. */
static struct ktel_control *padded_server(uv_loop_t *loop, struct ctl_fake *f,
					  struct ktel_control_ops *ops, const char *name, char *dir,
					  size_t dir_len, struct sockaddr_un *sa)
{
	struct ktel_control *c = NULL;
	struct ktel_err err = {0};

	ctl_fake_init(f);
	*ops = ctl_fake_ops;
	ops->pull = padded_pull;
	mkdir(KTEL_BINARY_DIR "/test-tmp", 0755);
	snprintf(dir, dir_len, "%s/test-tmp/ctl-%s-%d", KTEL_BINARY_DIR, name, getpid());
	sa->sun_family = AF_UNIX;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/c.sock", dir);
	uv_loop_init(loop);
	if (ktel_control__new(loop, ops, f, sa->sun_path, getgid(), &c, &err))
		fail_msg("%s", err.msg);
	return c;
}

static void padded_server_stop(uv_loop_t *loop, struct ktel_control *c, const char *dir)
{
	ktel_control__close(c);
	uv_run(loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(loop), 0);
	rmdir(dir);
}

/*
 * A client pipelines far more pulls with large answers than
 * KTEL_CONTROL_MAX_PENDING holds (every 50th request a list) and reads its
 * answers in small pieces: it is slowed, not closed, and gets every answer,
 * in order.
 */
#define PIPELINED 1500
static void test_server_backpressure_reader(void **state)
{
	static const char pull[] = "{\"cmd\":\"pull\"}\n", list[] = "{\"cmd\":\"list\"}\n";
	struct ktel_control_ops ops;
	struct ktel_control_stats st;
	struct sockaddr_un sa;
	struct ktel_control *c;
	struct ctl_fake f;
	char dir[200], *reqs, *line;
	size_t len = 0, cap = 2 * PAD_BYTES, n_reqs = 0, answered = 0;
	long long last_seq = -1;
	uv_loop_t loop;
	int fd;

	(void)state;
	c = padded_server(&loop, &f, &ops, "bp", dir, sizeof(dir), &sa);
	reqs = malloc(PIPELINED * sizeof(pull));
	line = malloc(cap);
	for (int i = 0; i < PIPELINED; i++) {
		const char *r = i % 50 == 49 ? list : pull;

		memcpy(reqs + n_reqs, r, strlen(r));
		n_reqs += strlen(r);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, reqs, n_reqs), (ssize_t)n_reqs);
	for (int spins = 0; answered < PIPELINED && spins < 2000000; spins++) {
		ssize_t n;
		char *nl;

		uv_run(&loop, UV_RUN_NOWAIT);
		/* Slowly but steadily: at most 16 KiB a turn. */
		n = recv(fd, line + len, cap - 1 - len < 16384 ? cap - 1 - len : 16384,
			 MSG_DONTWAIT);
		if (n == 0)
			fail_msg("closed after %zu answers", answered);
		if (n < 0) {
			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
			usleep(100);
			continue;
		}
		len += (size_t)n;
		line[len] = '\0';
		while ((nl = strchr(line, '\n'))) {
			const char *seq;

			*nl = '\0';
			assert_non_null(strstr(line, "\"ok\":true"));
			if (answered % 50 == 49) {
				assert_non_null(strstr(line, "\"metrics\":["));
			} else {
				assert_non_null(strstr(line, "\"pulled\":1"));
				seq = strstr(line, "\"seq\":");
				assert_non_null(seq);
				/* Pulls run in order: no answer older than the one before. */
				assert_true(atoll(seq + 6) >= last_seq);
				last_seq = atoll(seq + 6);
			}
			answered++;
			len -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, len + 1);
		}
	}
	assert_int_equal(answered, PIPELINED);
	ktel_control__stats(c, &st);
	assert_int_equal(st.overflows, 0);
	assert_int_equal(st.requests, PIPELINED);
	/* Coalesced, yet never more queued than fits. */
	assert_true(f.pulls > 1);
	close(fd);
	free(reqs);
	free(line);
	padded_server_stop(&loop, c, dir);
}

/*
 * A client that pipelines pulls and never reads is still closed: once none
 * of its answers was read for the idle timeout, and counted as an overflow.
 */
static void test_server_cuts_non_reader(void **state)
{
	static const char pull[] = "{\"cmd\":\"pull\"}\n";
	struct ktel_control_ops ops;
	struct ktel_control_stats st;
	struct sockaddr_un sa;
	struct ktel_control *c;
	struct ctl_fake f;
	char dir[200], reqs[1000 * (sizeof(pull) - 1)];
	uv_loop_t loop;
	int fd;

	(void)state;
	ktel_control_set_idle_timeout(300);
	c = padded_server(&loop, &f, &ops, "nr", dir, sizeof(dir), &sa);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	for (int i = 0; i < 1000; i++)
		memcpy(reqs + i * (sizeof(pull) - 1), pull, sizeof(pull) - 1);
	/* One write: a unix socket holds far fewer small ones. */
	assert_int_equal(write(fd, reqs, sizeof(reqs)), (ssize_t)sizeof(reqs));
	for (int i = 0; i < 3000; i++) {
		ktel_control__stats(c, &st);
		if (st.overflows)
			break;
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	ktel_control__stats(c, &st);
	assert_int_equal(st.overflows, 1);
	assert_int_equal(st.clients, 0);
	/* Queued at most the mark and one batch, never the hard limit. */
	assert_true(f.pulls >= 1);
	close(fd);
	ktel_control_set_idle_timeout(0);
	padded_server_stop(&loop, c, dir);
}

/* ---- peers ------------------------------------------------------------------- */

static void test_peer_check(void **state)
{
	const gid_t held[] = {777, 65534};
	const gid_t other[] = {4321};
	struct ktel_err err = {0};

	assert_int_equal(ktel_control_peer_check(0, 1234, NULL, 0, 0, &err), 0);
	/* nobody: uid 65534, primary group nogroup (65534). */
	assert_int_equal(ktel_control_peer_check(65534, 65534, NULL, 0, 0, &err), -EACCES);
	assert_string_equal(err.msg, "permission denied: uid 65534 is neither root nor in group "
				     "root");
	/* Its process gid is the group. */
	assert_int_equal(ktel_control_peer_check(65534, 65534, NULL, 0, 65534, &err), 0);
	/* The process holds the group among its supplementary groups, whatever
	 * the user database says (uid 4242 has no passwd entry). */
	assert_int_equal(ktel_control_peer_check(4242, 4242, held, 2, 65534, &err), 0);
	/* The process does not hold it, though its passwd primary group is it:
	 * what the process holds decides. */
	assert_int_equal(ktel_control_peer_check(65534, 4321, other, 1, 65534, &err), -EACCES);
	/* The kernel could not say (n < 0): the user database decides. */
	assert_int_equal(ktel_control_peer_check(65534, 4321, NULL, -1, 65534, &err), 0);
	/* A group without a name is shown by number; an unknown uid is no member. */
	assert_int_equal(ktel_control_peer_check(4242, 4242, NULL, -1, 54321, &err), -EACCES);
	assert_string_equal(err.msg, "permission denied: uid 4242 is neither root nor in group "
				     "54321");
}

/* Without the process's groups, a supplementary member (from /etc/group) is
 * admitted through the user database. */
static void test_peer_check_supplementary(void **state)
{
	struct group *g;
	bool tested = false;

	setgrent();
	while (!tested && (g = getgrent())) {
		for (char **mem = g->gr_mem; *mem && !tested; mem++) {
			struct passwd *pw = getpwnam(*mem);
			struct ktel_err err;

			if (!pw || pw->pw_uid == 0 || pw->pw_gid == g->gr_gid)
				continue;
			assert_int_equal(ktel_control_peer_check(pw->pw_uid, pw->pw_gid, NULL, -1,
								 g->gr_gid, &err),
					 0);
			tested = true;
		}
	}
	endgrent();
	if (!tested)
		skip();
}

/* ---- inspect ------------------------------------------------------------------ */

static void test_inspect_builtin(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL, *m, *value, *f;

	assert_int_equal(ktel_inspect_plugin(KTEL_PLUGIN_DIR "/compaction_duration.so", getuid(),
					     NULL, &report, &err),
			 0);
	assert_true(json_is_true(json_object_get(report, "readable")));
	m = json_array_get(json_object_get(report, "metrics"), 0);
	assert_string_equal(json_string_value(json_object_get(m, "name")), "compaction_duration");
	value = json_object_get(m, "value");
	/* struct accumulator_value_sum: 32 u64 buckets, then the u64 sum. */
	assert_int_equal(json_integer_value(json_object_get(value, "size")), 264);
	f = json_array_get(json_object_get(value, "fields"), 0);
	assert_string_equal(json_string_value(json_object_get(f, "name")), "buckets");
	assert_int_equal(json_integer_value(json_object_get(f, "count")), 32);
	f = json_array_get(json_object_get(value, "fields"), 1);
	assert_string_equal(json_string_value(json_object_get(f, "name")), "sum");
	assert_int_equal(json_integer_value(json_object_get(f, "offset")), 256);
	assert_string_equal(json_string_value(
				    json_object_get(json_object_get(m, "histogram"), "scheme")),
			    "log2");
	/* The task start programs and their hash start fallbacks. */
	assert_int_equal(json_array_size(json_object_get(report, "programs")), 4);
	json_decref(report);
}

static void test_inspect_unreadable(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL, *m;

	assert_int_equal(ktel_inspect_plugin(KTEL_TEST_PLUGIN_DIR "/fx_unreadable.so", getuid(),
					     NULL, &report, &err),
			 -EINVAL);
	assert_non_null(report);
	assert_non_null(strstr(err.msg, "metric fx_unreadable: map fx_unreadable_map value: "
					"struct fx_unreadable_value: member flags is a bitfield"));
	assert_true(json_is_false(json_object_get(report, "readable")));
	m = json_array_get(json_object_get(report, "metrics"), 0);
	assert_non_null(strstr(json_string_value(json_object_get(m, "error")), "flags"));
	json_decref(report);
}

static void test_inspect_refused(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL;

	assert_true(ktel_inspect_plugin(KTEL_TEST_PLUGIN_DIR "/fx_abi_major.so", getuid(), NULL,
					&report, &err) < 0);
	assert_null(report);
	assert_non_null(strstr(err.msg, "refused"));
}

/* ---- rendering ------------------------------------------------------------------- */

static json_t *log2_hist(void)
{
	json_t *counts = json_array(), *le = json_array();

	for (int k = 0; k < 32; k++) {
		json_array_append_new(counts, json_integer(k == 9 ? 12 : k == 10 ? 24 : 0));
		json_array_append_new(le, k == 31 ? json_string("+Inf")
						  : json_integer((json_int_t)1 << k));
	}
	return json_pack("{s:s, s:o, s:o}", "scheme", "log2", "counts", counts, "le", le);
}

static void test_bucket_labels(void **state)
{
	json_t *h = log2_hist(), *lin;
	char buf[64];

	assert_int_equal(ktel_ctl_bucket_label(h, 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "[0, 1]");
	ktel_ctl_bucket_label(h, 1, buf, sizeof(buf));
	assert_string_equal(buf, "(1, 2]");
	ktel_ctl_bucket_label(h, 9, buf, sizeof(buf));
	assert_string_equal(buf, "(256, 512]");
	ktel_ctl_bucket_label(h, 11, buf, sizeof(buf));
	assert_string_equal(buf, "(1K, 2K]");
	ktel_ctl_bucket_label(h, 21, buf, sizeof(buf));
	assert_string_equal(buf, "(1M, 2M]");
	ktel_ctl_bucket_label(h, 31, buf, sizeof(buf));
	assert_string_equal(buf, "(1G, +Inf)");
	assert_int_equal(ktel_ctl_bucket_label(h, 32, buf, sizeof(buf)), -EINVAL);
	lin = json_pack("{s:s, s:i, s:[i, i, s]}", "scheme", "linear", "linear_min", 100, "le", 150,
			200, "+Inf");
	ktel_ctl_bucket_label(lin, 0, buf, sizeof(buf));
	assert_string_equal(buf, "[100, 150)");
	ktel_ctl_bucket_label(lin, 1, buf, sizeof(buf));
	assert_string_equal(buf, "[150, 200)");
	ktel_ctl_bucket_label(lin, 2, buf, sizeof(buf));
	assert_string_equal(buf, "[200, +Inf)");
	json_decref(lin);
	json_decref(h);
}

static char *render(void (*fn)(FILE *, const json_t *), const json_t *j)
{
	FILE *f = tmpfile();
	long len;
	char *out;

	assert_non_null(f);
	fn(f, j);
	len = ftell(f);
	rewind(f);
	out = calloc(1, (size_t)len + 1);
	assert_int_equal(fread(out, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	return out;
}

static void draw52(FILE *f, const json_t *h)
{
	ktel_ctl_draw_hist(f, h, 52);
}

static void test_draw_hist(void **state)
{
	json_t *h = log2_hist();
	char *out = render(draw52, h);
	char bar26[80], bar52[80];

	/* Only the non-empty range, bars scaled to the largest count. */
	snprintf(bar26, sizeof(bar26), "|%.*s%26s|", 26,
		 "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@", "");
	snprintf(bar52, sizeof(bar52), "|%.*s|", 52,
		 "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@");
	assert_non_null(strstr(out, "(256, 512]             12 "));
	assert_non_null(strstr(out, bar26));
	assert_non_null(strstr(out, "(512, 1K]              24 "));
	assert_non_null(strstr(out, bar52));
	assert_null(strstr(out, "(128, 256]"));
	assert_null(strstr(out, "(1K, 2K]"));
	free(out);
	json_decref(h);
}

static void render_list(FILE *f, const json_t *j)
{
	ktel_ctl_render(f, "list", j);
}

static void test_render_list(void **state)
{
	json_t *resp = json_pack("{s:b, s:[{s:s, s:s, s:b, s:s, s:i, s:s, s:i, s:n},"
				 " {s:s, s:s, s:b, s:s, s:i, s:n, s:i, s:s}]}",
				 "ok", 1, "metrics", "name", "compaction_duration", "plugin",
				 "compaction_duration", "enabled", 1, "unit", "us", "interval_ms",
				 10000, "atom", "CompactionDuration", "lease_ms", 0, "problem",
				 "name", "x", "plugin", "long_plugin_name", "enabled", 0, "unit",
				 "bytes", "interval_ms", 250, "atom", "lease_ms", 0, "problem",
				 "unsupported: tracepoint foo not in this kernel");
	char *out = render(render_list, resp), *l1, *l2, *l3;

	l1 = out;
	l2 = strchr(l1, '\n') + 1;
	l3 = strchr(l2, '\n') + 1;
	/* Columns line up: each header starts where its cells do. */
	assert_int_equal(strstr(l1, "STATE") - l1, strstr(l2, "enabled") - l2);
	assert_int_equal(strstr(l1, "STATE") - l1, strstr(l3, "unavailable") - l3);
	assert_int_equal(strstr(l1, "INTERVAL") - l1, strstr(l2, "10s") - l2);
	assert_int_equal(strstr(l1, "INTERVAL") - l1, strstr(l3, "250ms") - l3);
	assert_int_equal(strstr(l1, "NOTE") - l1, strstr(l3, "unsupported: tracepoint") - l3);
	assert_non_null(strstr(l3, " - "));
	free(out);
	json_decref(resp);
}

/* ---- cuts on a character boundary ----------------------------------------- */

static bool utf8_valid(const char *s)
{
	json_t *j = json_string(s); /* jansson refuses invalid UTF-8 */

	json_decref(j);
	return j != NULL;
}

/* pre ASCII bytes, then ch (a 2, 3 or 4 byte character) to len bytes. */
static void fill_wide(char *buf, size_t len, size_t pre, const char *ch)
{
	size_t off = 0, w = strlen(ch);

	for (; off < pre; off++)
		buf[off] = 'x';
	for (; off + w <= len; off += w)
		memcpy(buf + off, ch, w);
	buf[off] = '\0';
}

static void render_pull(FILE *f, const json_t *j)
{
	ktel_ctl_render(f, "pull", j);
}

/* out holds name's first n bytes less the character the cut split. */
static void expect_cut(const char *out, const char *name, size_t n)
{
	char prefix[KTEL_ERR_MSG_MAX];

	assert_true(utf8_valid(out));
	snprintf(prefix, sizeof(prefix), "%.*s", (int)(n - 3), name);
	ktel_utf8_trim_str(prefix);
	assert_non_null(strstr(out, prefix));
}

/*
 * Names, labels and reasons longer than the table cells and the dimension
 * text, at every alignment of 2, 3 and 4 byte characters: what is printed
 * stays valid UTF-8 and keeps all but the split character.
 */
static void test_render_cuts_on_boundary(void **state)
{
	static const char *const wide[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
	char name[800];

	for (size_t w = 0; w < KTEL_ARRAY_SIZE(wide); w++) {
		for (size_t pre = 0; pre < 4; pre++) {
			json_t *list, *pull;
			char *out;

			fill_wide(name, sizeof(name) - 1, pre, wide[w]);
			list = json_pack("{s:b, s:[{s:s, s:s, s:b, s:s, s:i, s:s, s:i, s:s}]}",
					 "ok", 1, "metrics", "name", name, "plugin", name,
					 "enabled", 1, "unit", name, "interval_ms", 1000, "atom",
					 name, "lease_ms", 0, "problem", name);
			out = render(render_list, list);
			expect_cut(out, name, KTEL_ERR_MSG_MAX - 1);
			free(out);
			pull = json_pack("{s:b, s:i, s:[{s:s, s:s, s:{s:s}, s:i, s:i}]}", "ok", 1,
					 "pulled", 1, "records", "type", "counter", "metric", "m",
					 "dims", "comm", name, "value", 1, "total", 2);
			out = render(render_pull, pull);
			/* The dimension text is 512 bytes, "comm=" first. */
			expect_cut(out, name, 511 - 5);
			free(out);
			json_decref(list);
			json_decref(pull);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_lines),
		cmocka_unit_test(test_split_lines_limit),
		cmocka_unit_test(test_split_lines_again),
		cmocka_unit_test(test_split_lines_stop),
		cmocka_unit_test(test_request_refusals),
		cmocka_unit_test(test_request_not_json),
		cmocka_unit_test(test_request_accepted),
		cmocka_unit_test(test_command_table),
		cmocka_unit_test(test_docs_match_table),
		cmocka_unit_test(test_answer_one_line),
		cmocka_unit_test(test_record_json),
		cmocka_unit_test(test_ops_arguments),
		cmocka_unit_test(test_ops_errors),
		cmocka_unit_test(test_ops_status),
		cmocka_unit_test(test_ops_not_reached),
		cmocka_unit_test(test_server_needs_ops),
		cmocka_unit_test(test_server_coalesces_pulls),
		cmocka_unit_test(test_server_backpressure_reader),
		cmocka_unit_test(test_server_cuts_non_reader),
		cmocka_unit_test(test_peer_check),
		cmocka_unit_test(test_peer_check_supplementary),
		cmocka_unit_test(test_inspect_builtin),
		cmocka_unit_test(test_inspect_unreadable),
		cmocka_unit_test(test_inspect_refused),
		cmocka_unit_test(test_bucket_labels),
		cmocka_unit_test(test_draw_hist),
		cmocka_unit_test(test_render_list),
		cmocka_unit_test(test_render_cuts_on_boundary),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
