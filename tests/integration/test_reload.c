// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `ktelemetryctl reload` against the real daemon: a reload applies the
 * difference between the old and the new config, so a metric the operator
 * disabled (or whose lease ran out) stays off when only a sink changes;
 * settings that cannot change live are refused by name while the old config
 * keeps delivering; a reload whose sinks cannot open answers with every
 * error, exits non-zero, and leaves the running sinks untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include "ktel_test.h"
#include "daemon_harness.h"

#define CTL_BIN KTEL_BINARY_DIR "/tools/ktelemetryctl"

struct rig {
	struct sandbox sb;
	char sock[700];
	pid_t pid;
	int runs;
	char *out; /* the last ktelemetryctl run's stdout and stderr */
};

/* Run ktelemetryctl --socket SOCK args... (NULL-ended); r->out has its output. */
static int ctl(struct rig *r, ...)
{
	const char *argv[16] = {CTL_BIN, "--socket", r->sock};
	char out[800];
	size_t n = 3;
	va_list ap;
	pid_t pid;
	int rc;

	va_start(ap, r);
	for (const char *a; n < 15 && (a = va_arg(ap, const char *));)
		argv[n++] = a;
	va_end(ap);
	snprintf(out, sizeof(out), "%s/ctl-%d.out", r->sb.dir, r->runs++);
	pid = fork();
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	rc = daemon_wait(pid, 30);
	free(r->out);
	r->out = ktel_test_slurp(out);
	return rc;
}

/* The config: the harness's top level, with sinks and extra spliced in. */
static void write_config(struct rig *r, const char *sinks, const char *extra)
{
	FILE *f = fopen(r->sb.config, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s\", \"interval\": \"1s\",\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"}%s%s}%s%s}\n",
		KTEL_PLUGIN_DIR, r->sb.pin_root, r->sb.state, r->sock, r->sb.out,
		sinks && *sinks ? ", " : "", sinks ? sinks : "", extra && *extra ? ", " : "",
		extra ? extra : "");
	fclose(f);
}

static void rig_start(struct rig *r, const char *name, const char *sinks)
{
	memset(r, 0, sizeof(*r));
	sandbox_init(&r->sb, name);
	snprintf(r->sock, sizeof(r->sock), "%s/control.sock", r->sb.dir);
	write_config(r, sinks, "");
	r->pid = daemon_start(&r->sb, NULL);
	if (!log_wait_for(&r->sb, "metric runq_latency: collecting", 20)) {
		dump_log(&r->sb);
		fail_msg("the daemon did not start collecting");
	}
}

static void rig_stop(struct rig *r)
{
	pid_t pid = r->pid;

	r->pid = 0;
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 20), 0);
	free(r->out);
	r->out = NULL;
	sandbox_cleanup(&r->sb);
}

/* The rig of the running test: a failed assertion leaves it to teardown. */
static struct rig the_rig;

static int rig_teardown(void **state)
{
	if (the_rig.pid > 0) {
		kill(the_rig.pid, SIGKILL);
		daemon_wait(the_rig.pid, 5);
		the_rig.pid = 0;
	}
	free(the_rig.out);
	the_rig.out = NULL;
	return 0;
}

/* Is metric enabled, as `ktelemetryctl --json show` says? */
static bool metric_enabled(struct rig *r, const char *metric)
{
	json_t *j;
	bool on;

	if (ctl(r, "--json", "show", metric, NULL) != 0)
		fail_msg("show %s: %s", metric, r->out);
	j = json_loads(r->out, 0, NULL);
	assert_non_null(j);
	on = json_is_true(json_object_get(j, "enabled"));
	json_decref(j);
	return on;
}

/* Where sink name delivers, from `ktelemetryctl --json status` (into buf). */
static void sink_where(struct rig *r, const char *name, char *buf, size_t len)
{
	json_t *j, *s;
	size_t i;

	buf[0] = '\0';
	assert_int_equal(ctl(r, "--json", "status", NULL), 0);
	j = json_loads(r->out, 0, NULL);
	assert_non_null(j);
	json_array_foreach(json_object_get(j, "sinks"), i, s)
		if (strcmp(json_string_value(json_object_get(s, "name")) ?: "", name) == 0)
			snprintf(buf, len, "%s",
				 json_string_value(json_object_get(s, "where")) ?: "");
	json_decref(j);
}

static size_t records_of(struct rig *r, const char *metric)
{
	uint64_t sum;
	size_t n;

	assert_int_equal(sum_metric(&r->sb, metric, &sum, &n), 0);
	return n;
}

/*
 * A metric disabled with ktelemetryctl and one whose --for lease ran out
 * stay disabled through a reload that only adds a sink: the reload compares
 * the old config with the new one, not with what runs.
 */
static void test_disabled_metric_survives_sink_reload(void **state)
{
	struct rig *r = &the_rig;
	char second[900];

	rig_start(r, "reload-keep", "");
	assert_int_equal(ctl(r, "disable", "compaction_duration", NULL), 0);
	assert_int_equal(ctl(r, "disable", "runq_latency", NULL), 0);
	assert_int_equal(ctl(r, "enable", "runq_latency", "--for", "1s", NULL), 0);
	if (!log_wait_for(&r->sb, "metric runq_latency: lease ended", 10)) {
		dump_log(&r->sb);
		fail_msg("the lease did not end");
	}
	assert_false(metric_enabled(r, "compaction_duration"));
	assert_false(metric_enabled(r, "runq_latency"));

	snprintf(second, sizeof(second),
		 "\"second\": {\"type\": \"json\", \"path\": "
		 "\"%s/second.jsonl\"}",
		 r->sb.dir);
	write_config(r, second, "");
	if (ctl(r, "reload", NULL) != 0)
		fail_msg("reload: %s", r->out);
	assert_true(log_wait_for(&r->sb, "sink second (json): file", 1));
	assert_false(metric_enabled(r, "compaction_duration"));
	assert_false(metric_enabled(r, "runq_latency"));
	/* A metric whose entry changes does follow the new file. */
	write_config(r, second,
		     "\"metrics\": {\"runq_latency\": {\"interval\": \"2s\", "
		     "\"enabled\": true}}");
	if (ctl(r, "reload", NULL) != 0)
		fail_msg("reload: %s", r->out);
	assert_false(metric_enabled(r, "compaction_duration"));
	/* enabled was already true (the default): only the interval changed. */
	assert_false(metric_enabled(r, "runq_latency"));
	write_config(r, second,
		     "\"metrics\": {\"runq_latency\": {\"interval\": \"2s\", "
		     "\"enabled\": true, \"lease\": \"1h\"}}");
	if (ctl(r, "reload", NULL) != 0)
		fail_msg("reload: %s", r->out);
	assert_true(metric_enabled(r, "runq_latency"));
	rig_stop(r);
}

/* A reload that fails must not have changed what the daemon delivers. */
static void assert_still_delivering(struct rig *r)
{
	size_t before = records_of(r, "runq_latency");

	for (int i = 0; i < 100 && records_of(r, "runq_latency") <= before; i++)
		usleep(50000);
	assert_true(records_of(r, "runq_latency") > before);
}

/* Reload with extra spliced in must be refused naming key, and change nothing. */
static void assert_refused(struct rig *r, const char *extra, const char *key)
{
	char want[200];

	write_config(r, "", extra);
	assert_int_equal(ctl(r, "reload", NULL), 1);
	snprintf(want, sizeof(want), "%s: cannot change while the daemon runs", key);
	if (!strstr(r->out, want) || !strstr(r->out, "restart ktelemetryd") ||
	    !strstr(r->out, "the running configuration is unchanged"))
		fail_msg("reload changing %s: unexpected answer:\n%s", key, r->out);
	snprintf(want, sizeof(want), "reload: %s: cannot change", key);
	assert_true(log_wait_for(&r->sb, want, 1));
	assert_still_delivering(r);
}

/* params (BPF .rodata, set at load), control_group and friends: refused by name. */
static void test_refuses_what_needs_a_restart(void **state)
{
	struct rig *r = &the_rig;

	rig_start(r, "reload-refuse", "");
	assert_true(log_wait_for(&r->sb, "metric runq_stall_events: collecting", 10));
	assert_refused(r,
		       "\"metrics\": {\"runq_stall_events\": {\"params\": "
		       "{\"threshold_us\": 5}}}",
		       "metrics.runq_stall_events.params");
	assert_refused(r, "\"control_group\": \"nogroup\"", "control_group");
	assert_refused(r, "\"pin_group\": \"nogroup\"", "pin_group");
	assert_refused(r, "\"drop_privileges\": true", "drop_privileges");
	/* Refused means refused: the metric the refused file disabled still runs. */
	assert_refused(r,
		       "\"control_group\": \"nogroup\", \"metrics\": {\"runq_latency\": "
		       "{\"enabled\": false}}",
		       "control_group");
	assert_true(metric_enabled(r, "runq_latency"));
	assert_false(log_wait_for(&r->sb, "configuration reloaded", 0));
	rig_stop(r);
}

static int busy_port(uint16_t *ret_port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*ret_port = ntohs(sin.sin_port);
	return fd;
}

/*
 * Two sinks that cannot open (a taken port, a socket in a missing
 * directory) next to a changed port-0 prometheus sink: the reply names both
 * failures, ktelemetryctl exits non-zero, and the prometheus sink was never
 * closed (it still serves on the port it bound at start).
 */
static void test_broken_reload_reports_every_error(void **state)
{
	char sinks[1500], before[300], after[300];
	struct rig *r = &the_rig;
	uint16_t port;
	int busy = busy_port(&port);

	rig_start(r, "reload-broken", "\"prom\": {\"type\": \"prometheus\", \"port\": 0}");
	sink_where(r, "prom", before, sizeof(before));
	assert_non_null(strstr(before, "http://127.0.0.1:"));

	snprintf(sinks, sizeof(sinks),
		 "\"prom\": {\"type\": \"prometheus\", \"port\": 0, \"prefix\": \"x_\"},"
		 " \"taken\": {\"type\": \"prometheus\", \"port\": %u},"
		 " \"nowhere\": {\"type\": \"stream\", \"socket\": \"%s/no/such/dir/s.sock\"}",
		 port, r->sb.dir);
	write_config(r, sinks, "");
	assert_int_equal(ctl(r, "reload", NULL), 1);
	if (!strstr(r->out, "sinks.taken") || !strstr(r->out, "sinks.nowhere") ||
	    !strstr(r->out, "2 errors: the running configuration is unchanged"))
		fail_msg("unexpected answer:\n%s", r->out);
	sink_where(r, "prom", after, sizeof(after));
	assert_string_equal(before, after);
	sink_where(r, "taken", after, sizeof(after));
	assert_string_equal(after, "");
	assert_still_delivering(r);

	/* Fixed, the same sinks apply; prom moves to its new instance only now. */
	close(busy);
	snprintf(sinks, sizeof(sinks),
		 "\"prom\": {\"type\": \"prometheus\", \"port\": 0, \"prefix\": \"x_\"},"
		 " \"taken\": {\"type\": \"prometheus\", \"port\": %u},"
		 " \"nowhere\": {\"type\": \"stream\", \"socket\": \"%s/s.sock\"}",
		 port, r->sb.dir);
	write_config(r, sinks, "");
	if (ctl(r, "reload", NULL) != 0)
		fail_msg("reload: %s", r->out);
	sink_where(r, "taken", after, sizeof(after));
	assert_non_null(strstr(after, "http://127.0.0.1:"));
	rig_stop(r);
}

/* A subscriber of a stream socket, reads timing out after 15 s. */
static int sub_connect(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = 15};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)))
		fail_msg("connect %s: %s", path, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Read until a whole line came (true) or EOF, an error or the timeout. */
static bool sub_got_line(int fd)
{
	char buf[4096];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (memchr(buf, '\n', (size_t)n))
			return true;
	return false;
}

/* Read until EOF (true) or an error or the timeout (false). */
static bool sub_reaches_eof(int fd)
{
	char buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	return n == 0;
}

/* The rig with extra top-level settings. */
static void rig_start_extra(struct rig *r, const char *name, const char *sinks, const char *extra)
{
	memset(r, 0, sizeof(*r));
	sandbox_init(&r->sb, name);
	snprintf(r->sock, sizeof(r->sock), "%s/control.sock", r->sb.dir);
	write_config(r, sinks, extra);
	r->pid = daemon_start(&r->sb, NULL);
	if (!log_wait_for(&r->sb, "metric runq_latency: collecting", 20)) {
		dump_log(&r->sb);
		fail_msg("the daemon did not start collecting");
	}
}

static void reload_ok(struct rig *r, const char *sinks, const char *extra)
{
	write_config(r, sinks, extra);
	if (ctl(r, "reload", NULL) != 0) {
		dump_log(&r->sb);
		fail_msg("reload: %s", r->out);
	}
}

/*
 * A changed stream sink that keeps its socket: the new instance takes the
 * path without the old one closing first, the subscriber of the old one
 * gets EOF once it was sent what was queued, and the socket serves.
 */
static void test_same_socket_handed_over(void **state)
{
	char sinks[1000], sock[800], where[300];
	struct rig *r = &the_rig;
	int fd;

	snprintf(sock, sizeof(sock), "%s/test-tmp/reload-sock-%d.sock", KTEL_BINARY_DIR, getpid());
	snprintf(sinks, sizeof(sinks), "\"s\": {\"type\": \"stream\", \"socket\": \"%s\"}", sock);
	rig_start(r, "reload-sock", sinks);
	fd = sub_connect(sock);
	snprintf(sinks, sizeof(sinks),
		 "\"s\": {\"type\": \"stream\", \"socket\": \"%s\", "
		 "\"backlog_records\": 10}",
		 sock);
	reload_ok(r, sinks, "");
	assert_false(log_wait_for(&r->sb, "sink s: closed first", 0));
	assert_true(sub_reaches_eof(fd));
	close(fd);
	sink_where(r, "s", where, sizeof(where));
	assert_non_null(strstr(where, sock));
	assert_int_equal(ctl(r, "watch", "--count", "1", NULL), 0);
	rig_stop(r);
	assert_int_equal(access(sock, F_OK), -1);
}

#define TEST_GID 12346

/*
 * Under drop_privileges, a stream sink with a group survives a reload that
 * only changes backlog_records, and a reload may add another such sink: the
 * daemon kept what giving a socket a group takes. The privileges it kept are
 * in the log. A reload that fails elsewhere (a sink in a missing directory)
 * leaves the stream socket with its subscriber serving.
 */
static void test_group_socket_reload_after_drop(void **state)
{
	char sinks[2000], sock[800], sock2[800], where[300];
	struct rig *r = &the_rig;
	struct stat st;
	int fd;

	snprintf(sock, sizeof(sock), "%s/test-tmp/reload-grp-%d.sock", KTEL_BINARY_DIR, getpid());
	snprintf(sock2, sizeof(sock2), "%s/test-tmp/reload-grp2-%d.sock", KTEL_BINARY_DIR,
		 getpid());
	snprintf(sinks, sizeof(sinks),
		 "\"s\": {\"type\": \"stream\", \"socket\": \"%s\", \"group\": %d}", sock,
		 TEST_GID);
	rig_start_extra(r, "reload-grp", sinks, "\"drop_privileges\": true");

	/* Only backlog_records changes. */
	snprintf(sinks, sizeof(sinks),
		 "\"s\": {\"type\": \"stream\", \"socket\": \"%s\", \"group\": %d, "
		 "\"backlog_records\": 10}",
		 sock, TEST_GID);
	reload_ok(r, sinks, "\"drop_privileges\": true");
	assert_int_equal(stat(sock, &st), 0);
	assert_int_equal(st.st_gid, TEST_GID);
	sink_where(r, "s", where, sizeof(where));
	assert_non_null(strstr(where, sock));
	fd = sub_connect(sock);
	assert_true(sub_got_line(fd));

	/* A second one added by reload. */
	snprintf(sinks, sizeof(sinks),
		 "\"s\": {\"type\": \"stream\", \"socket\": \"%s\", \"group\": %d, "
		 "\"backlog_records\": 10}, "
		 "\"t\": {\"type\": \"stream\", \"socket\": \"%s\", \"group\": %d}",
		 sock, TEST_GID, sock2, TEST_GID);
	reload_ok(r, sinks, "\"drop_privileges\": true");
	assert_int_equal(stat(sock2, &st), 0);
	assert_int_equal(st.st_gid, TEST_GID);

	/* A reload that changes s and fails on another sink (its file would
	 * be below the config file, which no directory can be made over): s
	 * keeps serving its subscriber, at its path. */
	snprintf(sinks, sizeof(sinks),
		 "\"s\": {\"type\": \"stream\", \"socket\": \"%s\", \"group\": %d, "
		 "\"backlog_records\": 20}, "
		 "\"t\": {\"type\": \"stream\", \"socket\": \"%s\", \"group\": %d}, "
		 "\"bad\": {\"type\": \"json\", \"path\": \"%s/x.jsonl\"}",
		 sock, TEST_GID, sock2, TEST_GID, r->sb.config);
	write_config(r, sinks, "\"drop_privileges\": true");
	assert_int_not_equal(ctl(r, "reload", NULL), 0);
	assert_true(sub_got_line(fd));
	assert_true(sub_got_line(fd));
	close(fd);
	fd = sub_connect(sock);
	assert_true(sub_got_line(fd));
	close(fd);
	assert_true(log_wait_for(&r->sb, "drop_privileges: every thread now holds only", 0));
	assert_true(log_wait_for(&r->sb, "CAP_CHOWN", 0));
	rig_stop(r);
	unlink(sock2);
}

/* An HTTP GET of /metrics on 127.0.0.1:port: did it answer 200? */
static bool scrape_ok(uint16_t port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
	struct timeval tv = {.tv_sec = 10};
	char buf[64] = "";
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ok = connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	     write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1) &&
	     read(fd, buf, sizeof(buf) - 1) > 0 && strstr(buf, " 200 ");
	close(fd);
	return ok;
}

/*
 * Prometheus on a fixed port and remote_write (to a closed loopback port)
 * under drop_privileges, through reloads that change their options: the
 * Prometheus sink closes for its successor and serves again on the same
 * port, remote_write is replaced, both stay listed.
 */
static void test_http_sinks_reload_after_drop(void **state)
{
	char sinks[1500], where[300];
	struct rig *r = &the_rig;
	uint16_t port, dead;
	int fd;

	fd = busy_port(&port);
	close(fd);
	fd = busy_port(&dead);
	close(fd);
	for (int round = 0; round < 3; round++) {
		snprintf(sinks, sizeof(sinks),
			 "\"prom\": {\"type\": \"prometheus\", \"port\": %u, "
			 "\"max_series\": %d}, "
			 "\"rw\": {\"type\": \"remote_write\", "
			 "\"url\": \"http://127.0.0.1:%u/api/v1/write\", \"interval\": \"%ds\"}",
			 port, 1000 + round, dead, 1 + round);
		if (round == 0)
			rig_start_extra(r, "reload-http", sinks, "\"drop_privileges\": true");
		else
			reload_ok(r, sinks, "\"drop_privileges\": true");
		assert_true(scrape_ok(port));
		sink_where(r, "prom", where, sizeof(where));
		assert_true(where[0] != '\0');
		sink_where(r, "rw", where, sizeof(where));
		assert_true(where[0] != '\0');
	}
	rig_stop(r);
}

/*
 * A stream subscriber across a daemon restart: at the stop it gets what was
 * queued and then EOF, the socket file goes; the restarted daemon serves
 * the path again and a subscriber that reconnects gets lines.
 */
static void test_stream_subscriber_across_restart(void **state)
{
	char sinks[1000], sock[800];
	struct rig *r = &the_rig;
	int fd;

	snprintf(sock, sizeof(sock), "%s/test-tmp/restart-%d.sock", KTEL_BINARY_DIR, getpid());
	snprintf(sinks, sizeof(sinks), "\"s\": {\"type\": \"stream\", \"socket\": \"%s\"}", sock);
	rig_start(r, "stream-restart", sinks);
	fd = sub_connect(sock);
	assert_true(sub_got_line(fd));
	kill(r->pid, SIGTERM);
	assert_int_equal(daemon_wait(r->pid, 20), 0);
	r->pid = 0;
	assert_true(sub_reaches_eof(fd));
	close(fd);
	assert_int_equal(access(sock, F_OK), -1);

	r->pid = daemon_start(&r->sb, NULL);
	for (int i = 0; i < 200 && access(sock, F_OK); i++)
		usleep(50000);
	fd = sub_connect(sock);
	assert_true(sub_got_line(fd));
	close(fd);
	rig_stop(r);
}

/*
 * A SIGHUP with group names of 4 MiB (which aborted the daemon inside NSS)
 * is refused by name: the daemon keeps running on the old config and keeps
 * delivering every pull.
 */
static void test_sighup_huge_group_name_keeps_running(void **state)
{
	size_t n = 4u << 20, len = n + 200;
	struct rig *r = &the_rig;
	char *name, *extra;

	rig_start(r, "reload-huge-group", "");
	name = malloc(n + 1);
	extra = malloc(len);
	assert_non_null(name);
	assert_non_null(extra);
	memset(name, 'g', n);
	name[n] = '\0';
	snprintf(extra, len, "\"pin_group\": \"%s\"", name);
	write_config(r, "", extra);
	free(extra);
	free(name);
	assert_int_equal(kill(r->pid, SIGHUP), 0);
	if (!log_wait_for(&r->sb,
			  "reload: pin_group: group name of 4194304 bytes: at most 255 "
			  "bytes (LOGIN_NAME_MAX)",
			  10)) {
		dump_log(&r->sb);
		fail_msg("the refused reload was not logged with its reason");
	}
	assert_true(log_wait_for(&r->sb, "the running configuration is unchanged", 1));
	assert_int_equal(kill(r->pid, 0), 0);
	assert_still_delivering(r);
	assert_true(metric_enabled(r, "runq_latency"));
	rig_stop(r); /* exits 0 after its final pull */
}

/*
 * A misspelled metric under "metrics" is refused naming the closest one, and
 * the metric it meant keeps running; a metric no installed plugin provides
 * is applied with a warning saying so.
 */
static void test_metric_names_on_reload(void **state)
{
	struct rig *r = &the_rig;

	rig_start(r, "reload-metric-names", "");
	write_config(r, "", "\"metrics\": {\"runq_latncy\": {\"enabled\": false}}");
	assert_int_equal(ctl(r, "reload", NULL), 1);
	if (!strstr(r->out, "metrics.runq_latncy: unknown metric (did you mean runq_latency?)"))
		fail_msg("unexpected answer:\n%s", r->out);
	assert_true(metric_enabled(r, "runq_latency"));
	assert_still_delivering(r);
	write_config(r, "", "\"metrics\": {\"vendor_gpu_latency\": {\"enabled\": false}}");
	if (ctl(r, "reload", NULL) != 0)
		fail_msg("reload: %s", r->out);
	assert_true(log_wait_for(&r->sb,
				 "metrics.vendor_gpu_latency: no installed plugin "
				 "provides this metric",
				 1));
	rig_stop(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_disabled_metric_survives_sink_reload, rig_teardown),
		cmocka_unit_test_teardown(test_refuses_what_needs_a_restart, rig_teardown),
		cmocka_unit_test_teardown(test_broken_reload_reports_every_error, rig_teardown),
		cmocka_unit_test_teardown(test_same_socket_handed_over, rig_teardown),
		cmocka_unit_test_teardown(test_group_socket_reload_after_drop, rig_teardown),
		cmocka_unit_test_teardown(test_http_sinks_reload_after_drop, rig_teardown),
		cmocka_unit_test_teardown(test_stream_subscriber_across_restart, rig_teardown),
		cmocka_unit_test_teardown(test_sighup_huge_group_name_keeps_running, rig_teardown),
		cmocka_unit_test_teardown(test_metric_names_on_reload, rig_teardown),
	};

	ktel_test_require_root("reload end to end");
	return cmocka_run_group_tests(tests, NULL, sandbox_remove_all);
}
