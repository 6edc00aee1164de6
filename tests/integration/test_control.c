// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Control socket end to end on the real kernel: a daemon (ktel_daemon on its
 * own loop thread, hermetic sandbox) with a ktel_control, driven by the real
 * ktelemetryctl binary.
 *
 * - list/enable/disable round trip; after disable no bpf_link in the kernel
 *   references the metric's programs (the ids the daemon reported), after
 *   enable they do again;
 * - compaction while disabled is not counted, and after enable the series
 *   continues: the sum of all records equals the pinned map's total;
 * - enable --for 2s: the lease ends and the metric is disabled again;
 * - a client that is neither root nor in the group is refused (exit 3,
 *   the message), a member is admitted, the file mode keeps others out;
 * - show draws bars; pull returns records;
 * - protocol limits on a raw connection (bad line, over-long line, busy);
 * - a socket in use is refused, a stale one replaced, a file kept;
 * - inspect on every built-in plugin, and on an unreadable fixture; the
 *   current value of a configured param, read from the running daemon's
 *   program in the kernel;
 * - a record's start_ns/end_ns are wall clock, equal to start/end;
 * - watch prints the lines of a stream socket;
 * - a --config file that does not validate, options after the command,
 *   reopen as text, top on an unknown metric, leases during a lease.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include <bpf/bpf.h>

#include "control_fake.h"
#include "ktel_test.h"
#include "map_total.h"
#include "daemon_harness.h"

#include "config.h"
#include "control.h"
#include "daemon.h"
#include "log.h"
#include "sinks.h"

#define CTL_BIN KTEL_BINARY_DIR "/tools/ktelemetryctl"
#define METRIC "compaction_duration"
#define COMPACTION_PIN "map_compaction_duration_compaction_duration_map"
#define NOBODY 65534

struct rig {
	struct sandbox sb;
	char plugins[600];
	char sock[700];
	char sock2[700]; /* a second control socket, group nogroup */
	struct ktel_config *cfg;
	uv_loop_t loop;
	uv_async_t stop;
	struct ktel_daemon *d;
	struct ktel_control *ctl, *ctl2;
	pthread_t thread;
	int runs;
	char *out, *err; /* of the last ctl run */
	uv_timer_t tick; /* a 10 ms timer: how late the loop runs its timers */
	uint64_t last_tick;
	volatile uint64_t max_gap_ms;
};

/* ---- the daemon on a loop thread ------------------------------------------ */

static void copy_file(const char *from, const char *to)
{
	char cmd[1400];

	snprintf(cmd, sizeof(cmd), "install -m 0644 '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
}

static void on_stop(uv_async_t *h)
{
	struct rig *r = h->data;

	ktel_control__close(r->ctl);
	ktel_control__close(r->ctl2);
	uv_close((uv_handle_t *)&r->tick, NULL);
	ktel_daemon__shutdown(r->d, 0);
	uv_close((uv_handle_t *)h, NULL);
}

static void on_tick(uv_timer_t *t)
{
	struct rig *r = t->data;
	uint64_t now = uv_hrtime() / 1000000;

	if (r->last_tick && now - r->last_tick > r->max_gap_ms)
		r->max_gap_ms = now - r->last_tick;
	r->last_tick = now;
}

static void *loop_thread(void *arg)
{
	struct rig *r = arg;

	uv_run(&r->loop, UV_RUN_DEFAULT);
	return NULL;
}

/* The daemon with plugin (METRIC's when NULL) on a loop thread. */
static void rig_start_plugin(struct rig *r, const char *name, const char *plugin, const char *extra,
			     bool second)
{
	struct ktel_config_errors errs = {0};
	struct ktel_config_vars vars;
	struct ktel_err err;
	char so[600];

	memset(r, 0, sizeof(*r));
	sandbox_init(&r->sb, name);
	snprintf(r->plugins, sizeof(r->plugins), "%s/plugins", r->sb.dir);
	mkdir(r->plugins, 0755);
	snprintf(so, sizeof(so), "%s/%s.so", KTEL_PLUGIN_DIR, plugin ? plugin : METRIC);
	copy_file(so, r->plugins);
	sandbox_write_config(&r->sb, r->plugins, "60s", extra);
	vars.plugin_dir = r->plugins;
	vars.state_dir = r->sb.dir;
	ktel_sinks_register_schemas();
	ktel_log_set_level(KTEL_LOG_WARN);
	if (ktel_config__load_file(r->sb.config, &vars, &r->cfg, &errs, &err))
		fail_msg("config: %s", errs.n ? errs.msgs[0] : err.msg);
	uv_loop_init(&r->loop);
	assert_int_equal(ktel_daemon__new(&r->loop, r->cfg, NULL, &r->d, &err), 0);
	if (ktel_daemon__start(r->d, &err))
		fail_msg("daemon: %s", err.msg);
	/* The daemon opened its own control socket (control_socket). */
	snprintf(r->sock, sizeof(r->sock), "%s", r->cfg->control_socket);
	if (second) {
		snprintf(r->sock2, sizeof(r->sock2), "%s/ctl2/control.sock", r->sb.dir);
		if (ktel_control__new(&r->loop, &ktel_daemon_control_ops, r->d, r->sock2, NOBODY,
				      &r->ctl2, &err))
			fail_msg("control 2: %s", err.msg);
	}
	uv_async_init(&r->loop, &r->stop, on_stop);
	r->stop.data = r;
	uv_timer_init(&r->loop, &r->tick);
	r->tick.data = r;
	uv_timer_start(&r->tick, on_tick, 10, 10);
	assert_int_equal(pthread_create(&r->thread, NULL, loop_thread, r), 0);
}

static void rig_start(struct rig *r, const char *name, const char *extra, bool second)
{
	rig_start_plugin(r, name, NULL, extra, second);
}

static void close_walk(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

/* Shut down (final pull, sinks flushed); pins and output stay for checks. */
static void rig_stop(struct rig *r)
{
	uv_async_send(&r->stop);
	pthread_join(r->thread, NULL);
	uv_walk(&r->loop, close_walk, NULL);
	uv_run(&r->loop, UV_RUN_DEFAULT);
	ktel_daemon__free(r->d);
	uv_loop_close(&r->loop);
	/* The daemon owned the config: ktel_daemon__free released it. */
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* ---- running ktelemetryctl ----------------------------------------------- */

/*
 * Run ktelemetryctl with args (NULL-ended) as root, or as nobody when
 * as_nobody; its stdout and stderr land in r->out and r->err. Returns its
 * exit status, -1 when it hung.
 */
static int ctl(struct rig *r, bool as_nobody, ...)
{
	const char *argv[32] = {CTL_BIN};
	char out[800], errp[800];
	size_t n = 1;
	va_list ap;

	va_start(ap, as_nobody);
	for (const char *a; n < 31 && (a = va_arg(ap, const char *));)
		argv[n++] = a;
	va_end(ap);
	snprintf(out, sizeof(out), "%s/ctl-%d.out", r->sb.dir, r->runs);
	snprintf(errp, sizeof(errp), "%s/ctl-%d.err", r->sb.dir, r->runs++);
	free(r->out);
	free(r->err);
	return ktel_test_run_captured(argv, out, errp, as_nobody ? NOBODY : -1, 30, &r->out,
				      &r->err);
}

/* ktelemetryctl --json ...: the answer, which must be ok. */
static json_t *ctl_json_ok(struct rig *r, const char *cmd, const char *arg)
{
	json_t *j;
	int rc = ctl(r, false, "--socket", r->sock, "--json", cmd, arg, NULL);

	if (rc != 0)
		fail_msg("ktelemetryctl %s %s: exit %d: %s%s", cmd, arg ? arg : "", rc, r->out,
			 r->err);
	j = json_loads(r->out, 0, NULL);
	assert_non_null(j);
	assert_true(json_is_true(json_object_get(j, "ok")));
	return j;
}

/* ---- the kernel's view ----------------------------------------------------- */

/* Does any bpf_link in the kernel reference prog_id? */
static bool prog_linked(uint32_t prog_id)
{
	__u32 id = 0;
	bool found = false;

	while (!found && bpf_link_get_next_id(id, &id) == 0) {
		struct bpf_link_info info;
		__u32 len = sizeof(info);
		int fd = bpf_link_get_fd_by_id(id);

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.prog_id == prog_id)
			found = true;
		close(fd);
	}
	return found;
}

/* Is prog_id in the kernel's program list? */
static bool prog_exists(uint32_t prog_id)
{
	__u32 id = 0;

	while (bpf_prog_get_next_id(id, &id) == 0)
		if (id == prog_id)
			return true;
	return false;
}

/* prog ids of an enable/disable answer; returns how many. */
static size_t answer_prog_ids(const json_t *resp, uint32_t *ids, size_t max)
{
	size_t i, n = 0;
	json_t *p;

	json_array_foreach(json_object_get(resp, "programs"), i, p)
		if (n < max)
			ids[n++] = (uint32_t)json_integer_value(json_object_get(p, "prog_id"));
	return n;
}

static void compact(void)
{
	for (int i = 0; i < 3; i++) {
		trigger_compaction();
		usleep(100000);
	}
}

static const json_t *list_entry(const json_t *list, const char *name)
{
	size_t i;
	json_t *m;

	json_array_foreach(json_object_get(list, "metrics"), i, m)
		if (strcmp(json_string_value(json_object_get(m, "name")), name) == 0)
			return m;
	return NULL;
}

static bool metric_enabled(struct rig *r)
{
	json_t *list = ctl_json_ok(r, "list", NULL);
	bool on = json_is_true(json_object_get(list_entry(list, METRIC), "enabled"));

	json_decref(list);
	return on;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_enable_disable_round_trip(void **state)
{
	struct rig r;
	json_t *j;
	uint32_t ids[8], ids2[8];
	size_t n, n2, records;
	uint64_t before, while_off, sum, final_total;

	rig_start(&r, "ctl-roundtrip", "", false);
	assert_true(metric_enabled(&r));
	/* Human list: a table with a header and the metric's row. */
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "list", NULL), 0);
	assert_non_null(strstr(r.out, "NAME"));
	assert_non_null(strstr(r.out, METRIC));

	compact();
	json_decref(ctl_json_ok(&r, "pull", METRIC));

	j = ctl_json_ok(&r, "disable", METRIC);
	n = answer_prog_ids(j, ids, 8);
	assert_int_equal(n, 2);
	json_decref(j);
	assert_false(metric_enabled(&r));
	for (size_t i = 0; i < n; i++) {
		assert_true(ids[i] > 0);
		/* Still loaded (the object keeps it, so enable is cheap), but
		 * no link in the kernel runs it. */
		assert_true(prog_exists(ids[i]));
		assert_false(prog_linked(ids[i]));
	}

	/* Compaction while disabled is not counted; the map keeps its counts. */
	before = ktel_test_pinned_total(r.sb.pin_root, COMPACTION_PIN);
	assert_true(before >= 1);
	compact();
	while_off = ktel_test_pinned_total(r.sb.pin_root, COMPACTION_PIN);
	assert_int_equal(while_off, before);

	j = ctl_json_ok(&r, "enable", METRIC);
	n2 = answer_prog_ids(j, ids2, 8);
	json_decref(j);
	assert_int_equal(n2, n);
	for (size_t i = 0; i < n2; i++) {
		assert_int_equal(ids2[i], ids[i]);
		assert_true(prog_linked(ids2[i]));
	}
	assert_true(metric_enabled(&r));
	compact();
	json_decref(ctl_json_ok(&r, "pull", METRIC));
	assert_true(ktel_test_pinned_total(r.sb.pin_root, COMPACTION_PIN) > while_off);

	rig_stop(&r);
	final_total = ktel_test_pinned_total(r.sb.pin_root, COMPACTION_PIN);
	assert_int_equal(sum_metric(&r.sb, METRIC, &sum, &records), 0);
	printf("round trip: %zu records summing %llu; kernel total %llu (%llu before disable)\n",
	       records, (unsigned long long)sum, (unsigned long long)final_total,
	       (unsigned long long)before);
	/* The series continued across disable/enable: nothing lost, nothing
	 * counted twice. */
	assert_int_equal(sum, final_total);
	for (size_t i = 0; i < n; i++)
		assert_false(prog_exists(ids[i]) && prog_linked(ids[i]));
	sandbox_cleanup(&r.sb);
}

static void test_lease_expires(void **state)
{
	struct rig r;
	json_t *j;
	uint32_t ids[8];
	size_t n;

	rig_start(&r, "ctl-lease", "\"metrics\": {\"" METRIC "\": {\"enabled\": false}}", false);
	assert_false(metric_enabled(&r));
	/* Usage errors are exit 2 and ask nothing of the daemon. */
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "enable", METRIC, "--for", "soon",
			     NULL),
			 2);
	assert_non_null(strstr(r.err, "--for"));
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "--json", "enable", METRIC, "--for",
			     "2s", NULL),
			 0);
	j = json_loads(r.out, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "lease_ms")), 2000);
	n = answer_prog_ids(j, ids, 8);
	json_decref(j);
	assert_true(n >= 1);
	assert_true(metric_enabled(&r));
	for (size_t i = 0; i < n; i++)
		assert_true(prog_linked(ids[i]));
	/* leases names it while the lease runs, and not after. */
	assert_int_equal(ctl(&r, false, "leases", "--socket", r.sock, NULL), 0);
	if (!strstr(r.out, METRIC) || !strstr(r.out, "2.0s"))
		fail_msg("leases: %s", r.out);
	/* The daemon says how much of the lease is left. */
	assert_int_equal(ctl(&r, false, "leases", "--json", "--socket", r.sock, NULL), 0);
	j = json_loads(r.out, 0, NULL);
	assert_non_null(j);
	{
		json_t *left = json_object_get(json_array_get(json_object_get(j, "leases"), 0),
					       "left_ms");

		if (!json_is_integer(left) || json_integer_value(left) < 1 ||
		    json_integer_value(left) > 2000)
			fail_msg("leases --json: no time left in %s", r.out);
	}
	json_decref(j);
	sleep(3);
	assert_false(metric_enabled(&r));
	assert_int_equal(ctl(&r, false, "leases", "--json", "--socket", r.sock, NULL), 0);
	assert_non_null(strstr(r.out, "\"leases\":[]"));
	for (size_t i = 0; i < n; i++)
		assert_false(prog_linked(ids[i]));
	/* A metric the daemon does not know: exit 1 with the reason. */
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "enable", "no_such_metric", NULL), 1);
	assert_non_null(strstr(r.err, "no metric named \"no_such_metric\""));
	rig_stop(&r);
	sandbox_cleanup(&r.sb);
}

static void test_permission(void **state)
{
	struct rig r;

	rig_start(&r, "ctl-perm", "", true);
	/* The file mode (0660 root:root) already keeps nobody out. */
	assert_int_equal(ctl(&r, true, "--socket", r.sock, "list", NULL), 3);
	assert_non_null(strstr(r.err, "Permission denied"));
	/* Past the file mode, the daemon's own check refuses it by name. */
	assert_int_equal(chmod(r.sock, 0666), 0);
	assert_int_equal(ctl(&r, true, "--socket", r.sock, "list", NULL), 3);
	if (!strstr(r.err, "permission denied: uid 65534 is neither root nor in group root"))
		fail_msg("stderr: %s", r.err);
	assert_int_equal(ctl(&r, true, "--socket", r.sock, "--json", "list", NULL), 3);
	assert_non_null(strstr(r.out, "\"code\":\"permission_denied\""));
	/* On a socket of its group (root:nogroup 0660), nobody is admitted. */
	{
		struct stat st;

		assert_int_equal(stat(r.sock2, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0660);
		assert_int_equal(st.st_uid, 0);
		assert_int_equal(st.st_gid, NOBODY);
		assert_int_equal(stat(r.sb.dir, &st), 0);
	}
	/* The daemon created its parent 0750 with the control group, so the
	 * group's members can reach the socket. */
	{
		char dir[800];

		snprintf(dir, sizeof(dir), "%s/ctl2", r.sb.dir);
		struct stat st;

		assert_int_equal(stat(dir, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0750);
		assert_int_equal(st.st_uid, 0);
		assert_int_equal(st.st_gid, NOBODY);
	}
	if (ctl(&r, true, "--socket", r.sock2, "list", NULL) != 0)
		fail_msg("nobody in group nogroup refused: %s", r.err);
	assert_non_null(strstr(r.out, METRIC));
	/* A uid the user database does not know, holding nogroup only as a
	 * supplementary group of its process: the kernel's SO_PEERGROUPS
	 * says so and it is admitted. */
	{
		const gid_t supp[] = {NOBODY};
		pid_t pid = fork();

		if (pid == 0) {
			int devnull = open("/dev/null", O_WRONLY);

			dup2(devnull, 1);
			dup2(devnull, 2);
			if (setgroups(1, supp) || setgid(4242) || setuid(4242))
				_exit(126);
			execl(CTL_BIN, CTL_BIN, "--socket", r.sock2, "list", (char *)NULL);
			_exit(127);
		}
		assert_int_equal(daemon_wait(pid, 30), 0);
	}
	rig_stop(&r);
	sandbox_cleanup(&r.sb);
}

/*
 * watch: the stream sink's {"dropped":N} notice goes to stderr and does not
 * count toward --count. A child plays the stream sink on a unix socket.
 */
static void test_watch_drop_notice(void **state)
{
	static const char lines[] = "{\"dropped\":3}\n{\"metric\":\"a\"}\n"
				    "{\"metric\":\"b\"}\n";
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct rig r = {0};
	int lfd, n = 0;
	pid_t srv;

	sandbox_init(&r.sb, "ctl-watch-notice");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/w.sock", r.sb.dir);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	srv = fork();
	if (srv == 0) {
		int c = accept(lfd, NULL, NULL);

		if (c < 0 || write(c, lines, sizeof(lines) - 1) != (ssize_t)sizeof(lines) - 1)
			_exit(1);
		pause(); /* keep the stream open: watch must stop on --count */
		_exit(0);
	}
	close(lfd);
	assert_int_equal(ctl(&r, false, "watch", "--socket", sa.sun_path, "--count", "2", NULL), 0);
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	/* Records as text, as pull prints them. */
	for (const char *p = r.out; p && (p = strstr(p, "[(all)]: ")); p++)
		n++;
	if (n != 2 || strstr(r.out, "dropped"))
		fail_msg("stdout: %s", r.out);
	if (!strstr(r.err, "3 records dropped"))
		fail_msg("stderr: %s", r.err);
	free(r.out);
	free(r.err);
	sandbox_cleanup(&r.sb);
}

/*
 * On the real daemon: a --config file that does not validate still finds
 * its control_socket (one warning), global options after the command,
 * reopen as text, and top exits 1 on a metric the daemon does not know.
 */
static void test_cli_consistency(void **state)
{
	char bad[700], text[1000];
	struct rig r;
	FILE *f;

	rig_start(&r, "ctl-cli", NULL, false);
	snprintf(bad, sizeof(bad), "%s/bad.json", r.sb.dir);
	snprintf(text, sizeof(text), "{\"control_socket\": \"%s\", \"interval\": \"ten\"}\n",
		 r.sock);
	f = fopen(bad, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	unsetenv("KTELEMETRY_SOCKET");
	if (ctl(&r, false, "--config", bad, "status", NULL) != 0)
		fail_msg("status with a bad config: %s%s", r.out, r.err);
	assert_non_null(strstr(r.out, METRIC));
	assert_non_null(strstr(r.err, "does not validate: interval"));
	assert_null(strstr(strstr(r.err, "does not validate") + 1, "does not validate"));
	assert_int_equal(ctl(&r, false, "status", "--json", "--config", bad, NULL), 0);
	assert_true(r.out[0] == '{');
	assert_int_equal(ctl(&r, false, "reopen", "--socket", r.sock, NULL), 0);
	assert_non_null(strstr(r.out, "reopen: "));
	assert_true(r.out[0] != '{');
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "top", "--count", "1", "no_such_metric",
			     NULL),
			 1);
	assert_non_null(strstr(r.err, "no metric named \"no_such_metric\""));
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "top", "--count", "1", METRIC,
			     "no_such_metric", NULL),
			 1);
	assert_non_null(strstr(r.out, "\n" METRIC));
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "top", "--json", "--count", "1", METRIC,
			     NULL),
			 0);
	assert_non_null(strstr(r.out, "\"metrics\":[{\"ok\":true"));
	rig_stop(&r);
	sandbox_cleanup(&r.sb);
}

static void test_show_and_pull(void **state)
{
	struct rig r;
	json_t *j, *rec;
	uint64_t total = 0;
	size_t i;

	rig_start(&r, "ctl-show", "", false);
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "show", METRIC, NULL), 0);
	compact();
	j = ctl_json_ok(&r, "pull", METRIC);
	assert_int_equal(json_integer_value(json_object_get(j, "pulled")), 1);
	rec = json_array_get(json_object_get(j, "records"), 0);
	assert_string_equal(json_string_value(json_object_get(rec, "metric")), METRIC);
	json_decref(j);
	/* show: the totals are the pinned map's. */
	j = ctl_json_ok(&r, "show", METRIC);
	json_array_foreach(json_object_get(j, "totals"), i, rec) {
		json_t *c;
		size_t k;

		json_array_foreach(json_object_get(json_object_get(rec, "histogram"), "counts"), k,
				   c)
			total += (uint64_t)json_integer_value(c);
	}
	assert_true(total >= 1);
	assert_int_equal(total, ktel_test_pinned_total(r.sb.pin_root, COMPACTION_PIN));
	assert_true(json_array_size(json_object_get(j, "window")) >= 1);
	json_decref(j);
	/* Human show: bpftrace-like bars with upper-inclusive bounds. */
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "show", METRIC, NULL), 0);
	printf("%s", r.out);
	assert_non_null(strstr(r.out, "@" METRIC "[(all)]"));
	assert_non_null(strstr(r.out, "|@"));
	assert_true(strstr(r.out, "]  ") || strstr(r.out, "] "));
	assert_non_null(strstr(r.out, "last window"));
	/* status names the programs with their ids and the sink. */
	j = ctl_json_ok(&r, "status", NULL);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "daemon"), "pid")),
			 getpid());
	rec = json_array_get(json_object_get(json_array_get(json_object_get(j, "plugins"), 0),
					     "programs"),
			     0);
	assert_true(json_integer_value(json_object_get(rec, "prog_id")) > 0);
	assert_non_null(json_object_get(rec, "recursion_misses"));
	assert_string_equal(json_string_value(
				    json_object_get(json_array_get(json_object_get(j, "sinks"), 0),
						    "name")),
			    "file");
	json_decref(j);
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "status", NULL), 0);
	printf("%s", r.out);
	assert_non_null(strstr(r.out, "compaction_begin"));
	rig_stop(&r);
	sandbox_cleanup(&r.sb);
}

#define BLOCK_METRIC "block_io_latency"
#define BLOCK_PIN "map_block_io_latency_block_io_latency_map"
#define MANY_KEYS 600   /* more than two windows (KTEL_PULL_WINDOW) */
#define FAKE_MAJOR 4000 /* no such block device: no "device" dimension */

/* MANY_KEYS keys of a device nobody has in the pinned block_io_latency map
 * (key: major, minor, op; value: 32 buckets and a sum). */
static void fill_block_map(const struct rig *r)
{
	char path[600];
	__u64 value[KTEL_HIST_BUCKETS + 1] = {0};
	int fd;

	snprintf(path, sizeof(path), "%s/%s", r->sb.pin_root, BLOCK_PIN);
	fd = bpf_obj_get(path);
	assert_true(fd >= 0);
	for (__u32 i = 0; i < MANY_KEYS; i++) {
		__u32 key[3] = {FAKE_MAJOR, i, 0};

		value[3] = i + 1;
		value[KTEL_HIST_BUCKETS] = (i + 1) * 5;
		assert_int_equal(bpf_map_update_elem(fd, key, value, BPF_ANY), 0);
	}
	close(fd);
}

static bool fake_device(const json_t *rec)
{
	const json_t *dims = json_object_get(rec, "dims_raw");

	return json_integer_value(json_object_get(dims, "major")) == FAKE_MAJOR;
}

/* The JSON sink's lines of metric with sequence number seq, in order. */
static json_t *sink_lines(const struct rig *r, const char *metric, json_int_t seq)
{
	char *text = ktel_test_slurp(r->sb.out), *save = NULL;
	json_t *a = json_array();

	assert_non_null(text);
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *j = json_loads(line, 0, NULL);

		assert_non_null(j);
		if (strcmp(json_string_value(json_object_get(j, "metric")), metric) == 0 &&
		    json_integer_value(json_object_get(j, "seq")) == seq)
			json_array_append(a, j);
		json_decref(j);
	}
	free(text);
	return a;
}

/*
 * A pull of more keys than a window holds (routed in windows as it is made):
 * the JSON sink gets every record of it, in the order the control pull
 * reports them, all with one sequence number; show's last window rebuilds
 * the same records.
 */
static void test_pull_in_windows(void **state)
{
	struct rig r;
	json_t *pulled, *shown, *recs, *window, *lines, *rec;
	json_int_t seq;
	size_t i, fake = 0;

	rig_start_plugin(&r, "ctl-windows", BLOCK_METRIC, "", false);
	fill_block_map(&r);
	pulled = ctl_json_ok(&r, "pull", BLOCK_METRIC);
	recs = json_object_get(pulled, "records");
	seq = json_integer_value(json_object_get(json_array_get(recs, 0), "seq"));
	assert_true(seq > 0);
	json_array_foreach(recs, i, rec) {
		assert_int_equal(json_integer_value(json_object_get(rec, "seq")), seq);
		fake += fake_device(rec);
	}
	assert_int_equal(fake, MANY_KEYS);
	shown = ctl_json_ok(&r, "show", BLOCK_METRIC);
	window = json_object_get(shown, "window");
	assert_int_equal(json_array_size(window), json_array_size(recs));
	assert_true(json_equal(window, recs));
	rig_stop(&r);
	lines = sink_lines(&r, BLOCK_METRIC, seq);
	assert_int_equal(json_array_size(lines), json_array_size(recs));
	assert_true(json_equal(lines, recs));
	json_decref(lines);
	json_decref(shown);
	json_decref(pulled);
	sandbox_cleanup(&r.sb);
}

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = {.tv_sec = 10};

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* One answer line from fd (NULL at EOF). */
/* One answer line into buf (no allocation: a forked child of this
 * threaded process may not malloc, see test_idle_clients_and_root_slot). */
static size_t raw_line(int fd, char *buf, size_t size)
{
	size_t n = 0;

	while (n + 1 < size && read(fd, buf + n, 1) == 1 && buf[n] != '\n')
		n++;
	buf[n] = '\0';
	return n;
}

static json_t *raw_answer(int fd)
{
	char buf[8192];

	return raw_line(fd, buf, sizeof(buf)) ? json_loads(buf, 0, NULL) : NULL;
}

static const char *code(const json_t *j)
{
	return json_string_value(json_object_get(j, "code"));
}

static void test_protocol_limits(void **state)
{
	struct rig r;
	int fd, fd2, fds[KTEL_CONTROL_MAX_CLIENTS];
	char *big;
	json_t *j;
	char c;

	rig_start(&r, "ctl-limits", "", false);
	fd = raw_connect(r.sock);
	/* A bad line is answered; the connection stays usable. */
	assert_int_equal(write(fd, "nonsense\n{\"cmd\":\"list\"}\n", 25), 25);
	j = raw_answer(fd);
	assert_string_equal(code(j), "bad_request");
	json_decref(j);
	j = raw_answer(fd);
	assert_true(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	/* An error that echoes a long multibyte name (past the message
	 * limit, every alignment): valid JSON with its error, the name cut on a
	 * character boundary. */
	fd2 = raw_connect(r.sock);
	for (int pre = 0; pre < 3; pre++) {
		char line[4096];
		int n = snprintf(line, sizeof(line), "{\"cmd\":\"show\",\"name\":\"%.*s", pre,
				 "xx");

		while (n < 3000)
			n += snprintf(line + n, sizeof(line) - n, "\xe2\x82\xac");
		n += snprintf(line + n, sizeof(line) - n, "\"}\n");
		assert_int_equal(write(fd2, line, n), n);
		j = raw_answer(fd2);
		assert_non_null(j);
		assert_false(json_is_true(json_object_get(j, "ok")));
		assert_non_null(json_string_value(json_object_get(j, "error")));
		assert_string_equal(code(j), "not_found");
		json_decref(j);
	}
	close(fd2);
	/* A line over the limit: one answer, then the end. */
	big = malloc(KTEL_CONTROL_MAX_LINE + 16);
	memset(big, 'x', KTEL_CONTROL_MAX_LINE + 16);
	assert_int_equal(write(fd, big, KTEL_CONTROL_MAX_LINE + 16), KTEL_CONTROL_MAX_LINE + 16);
	free(big);
	j = raw_answer(fd);
	assert_string_equal(code(j), "too_long");
	json_decref(j);
	/* EOF, or a reset: the bytes past the limit were never read. */
	assert_true(read(fd, &c, 1) <= 0);
	close(fd);
	/* Clients beyond the limit are told so and closed. */
	for (int i = 0; i < KTEL_CONTROL_MAX_CLIENTS; i++) {
		fds[i] = raw_connect(r.sock);
		assert_int_equal(write(fds[i], "{\"cmd\":\"help\"}\n", 15), 15);
		json_decref(raw_answer(fds[i])); /* admitted and served */
	}
	fd = raw_connect(r.sock);
	j = raw_answer(fd);
	assert_string_equal(code(j), "busy");
	json_decref(j);
	close(fd);
	for (int i = 0; i < KTEL_CONTROL_MAX_CLIENTS; i++)
		close(fds[i]);
	usleep(200000);
	/* With the others gone there is room again. */
	json_decref(ctl_json_ok(&r, "list", NULL));
	rig_stop(&r);
	sandbox_cleanup(&r.sb);
}

/* daemon.control.<key> and the sum of the sinks' drops, from a status answer. */
static json_int_t control_stat(const json_t *st, const char *key)
{
	return json_integer_value(
		json_object_get(json_object_get(json_object_get(st, "daemon"), "control"), key));
}

static json_int_t sinks_dropped(const json_t *st)
{
	const json_t *a = json_object_get(st, "sinks");
	json_int_t n = 0;

	for (size_t i = 0; i < json_array_size(a); i++)
		n += json_integer_value(json_object_get(json_array_get(a, i), "dropped"));
	return n;
}

static json_int_t metric_pulls(const json_t *st)
{
	const json_t *a = json_object_get(st, "metrics");

	for (size_t i = 0; i < json_array_size(a); i++)
		if (!strcmp(json_string_value(json_object_get(json_array_get(a, i), "name")) ?: "",
			    METRIC))
			return json_integer_value(json_object_get(json_array_get(a, i), "pulls"));
	return -1;
}

/*
 * 16 idle clients of a member (nobody, on the second socket): 15 are
 * admitted, the 16th is busy (the last slot is root's), root still gets
 * status; the idle ones are closed with idle_timeout after the timeout.
 */
#define IDLE_MS 1500
static void test_idle_clients_and_root_slot(void **state)
{
	int pfd[2], fds[KTEL_CONTROL_MAX_CLIENTS], fd, res[3] = {0};
	struct rig r;
	pid_t pid;
	char c;
	json_t *j;

	ktel_control_set_idle_timeout(IDLE_MS);
	rig_start(&r, "ctl-idle", "", true);
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	if (pid == 0) {
		uint64_t t0, t;
		int busy = 0, idle = 0, slow = 0;

		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		struct timeval tv = {.tv_sec = 10};

		/* No cmocka asserts in the child: it must never run on into the
		 * other tests. The alarm bounds it whatever happens. No malloc
		 * either (no jansson): the fork copied this process while the
		 * rig's loop thread may have held the allocator's lock, and under
		 * ASan the child then hung in malloc until the alarm (seen once
		 * in a fresh-clone CI run: the parent read EOF). */
		alarm(60);
		close(pfd[0]);
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(126);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", r.sock2);
		for (int i = 0; i < KTEL_CONTROL_MAX_CLIENTS; i++) {
			fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)))
				_exit(123);
			setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		}
		t0 = uv_hrtime() / 1000000;
		if (write(pfd[1], "c", 1) != 1)
			_exit(125);
		for (int i = 0; i < KTEL_CONTROL_MAX_CLIENTS; i++) {
			char line[1024];

			raw_line(fds[i], line, sizeof(line));
			t = uv_hrtime() / 1000000;
			if (strstr(line, "\"" KTEL_CTL_E_BUSY "\""))
				busy++;
			else if (strstr(line, "\"" KTEL_CTL_E_IDLE "\""))
				idle++, slow += t - t0 >= IDLE_MS - 300;
		}
		res[0] = busy, res[1] = idle, res[2] = slow;
		_exit(write(pfd[1], res, sizeof(res)) == sizeof(res) ? 0 : 124);
	}
	close(pfd[1]); /* a dead child gives EOF, not a hang */
	assert_int_equal(read(pfd[0], &c, 1), 1);
	usleep(200000);
	/* Root gets in although members hold every other slot. */
	fd = raw_connect(r.sock2);
	assert_int_equal(write(fd, "{\"cmd\":\"status\"}\n", 17), 17);
	j = raw_answer(fd);
	assert_non_null(j);
	assert_true(json_is_true(json_object_get(j, "ok")));
	printf("with 16 idle member clients: root status ok, %lld busy so far\n",
	       (long long)control_stat(j, "busy"));
	json_decref(j);
	close(fd);
	assert_int_equal(read(pfd[0], res, sizeof(res)), sizeof(res));
	assert_int_equal(daemon_wait(pid, 30), 0);
	printf("members: %d busy, %d closed idle (%d after >= %d ms)\n", res[0], res[1], res[2],
	       IDLE_MS - 300);
	assert_int_equal(res[0], 1);
	assert_int_equal(res[1], KTEL_CONTROL_MAX_CLIENTS - 1);
	assert_int_equal(res[2], KTEL_CONTROL_MAX_CLIENTS - 1);
	close(pfd[0]);
	rig_stop(&r);
	ktel_control_set_idle_timeout(0);
	sandbox_cleanup(&r.sb);
}

/*
 * One 64 KiB write of 4,369 pulls: every one is answered, in order, the
 * loop's timers keep running, the pulls are coalesced and no sink drops.
 */
#define FLOOD 4369
static void test_pull_flood(void **state)
{
	static const char req[] = "{\"cmd\":\"pull\"}\n";
	json_int_t pulls0, req0, pulls1, req1;
	size_t n = (sizeof(req) - 1) * FLOOD, answered = 0, cap = 0;
	char *buf = malloc(n), *line = NULL;
	uint64_t t0;
	struct rig r;
	json_t *st;
	FILE *f;
	int fd;

	rig_start(&r, "ctl-flood", "", false);
	for (int i = 0; i < FLOOD; i++)
		memcpy(buf + i * (sizeof(req) - 1), req, sizeof(req) - 1);
	st = ctl_json_ok(&r, "status", NULL);
	pulls0 = metric_pulls(st);
	req0 = control_stat(st, "requests");
	json_decref(st);
	compact();
	fd = raw_connect(r.sock);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &(struct timeval){.tv_sec = 30},
		   sizeof(struct timeval));
	usleep(100000);
	r.max_gap_ms = 0;
	t0 = uv_hrtime();
	assert_int_equal(write(fd, buf, n), (ssize_t)n);
	f = fdopen(fd, "r");
	while (answered < FLOOD && getline(&line, &cap, f) > 0) {
		json_t *a = json_loads(line, 0, NULL);

		assert_non_null(a);
		assert_true(json_is_true(json_object_get(a, "ok")));
		assert_non_null(json_object_get(a, "records"));
		json_decref(a);
		answered++;
	}
	free(line);
	fclose(f);
	free(buf);
	assert_int_equal(answered, FLOOD);
	st = ctl_json_ok(&r, "status", NULL);
	pulls1 = metric_pulls(st);
	req1 = control_stat(st, "requests");
	printf("%d pulls in one write: answered in %.0f ms, %lld pulls ran, longest gap of a "
	       "10 ms timer %llu ms, sinks dropped %lld\n",
	       FLOOD, (uv_hrtime() - t0) / 1e6, (long long)(pulls1 - pulls0),
	       (unsigned long long)r.max_gap_ms, (long long)sinks_dropped(st));
	assert_int_equal(req1 - req0, FLOOD + 1);
	assert_true(pulls1 - pulls0 >= 1);
	assert_true(pulls1 - pulls0 <= FLOOD / 16);
	assert_int_equal(sinks_dropped(st), 0);
	assert_true(r.max_gap_ms < 500);
	json_decref(st);
	rig_stop(&r);
	sandbox_cleanup(&r.sb);
}

struct pipeline_writer {
	int fd;
	const char *buf;
	size_t len;
	ssize_t written;
};

static void *pipeline_write(void *arg)
{
	struct pipeline_writer *w = arg;
	size_t off = 0;
	ssize_t n;

	while (off < w->len && (n = write(w->fd, w->buf + off, w->len - off)) > 0)
		off += (size_t)n;
	w->written = (ssize_t)off;
	return NULL;
}

/*
 * 50,000 requests pipelined by a client that reads its answers slowly but
 * steadily (16 KiB, then a pause), pulls and status in turn (a status
 * answer is large): their answers add up to far more than
 * KTEL_CONTROL_MAX_PENDING, yet the client is slowed (its requests wait),
 * not disconnected, and gets every answer, in order; the loop's timers keep
 * running.
 */
#define PIPELINE 50000
static void test_pipelining_reader_is_slowed(void **state)
{
	static const char req[] = "{\"cmd\":\"pull\"}\n{\"cmd\":\"status\"}\n";
	struct pipeline_writer w = {0};
	size_t answered = 0, len = 0, cap = 1 << 20, bytes = 0, biggest = 0;
	json_int_t over0, over1, req0, req1;
	char *buf = malloc(PIPELINE / 2 * (sizeof(req) - 1)), *in = malloc(cap + 1);
	pthread_t writer;
	struct rig r;
	json_t *st;

	(void)state;
	rig_start(&r, "ctl-pipeline", "", false);
	for (int i = 0; i < PIPELINE / 2; i++)
		memcpy(buf + i * (sizeof(req) - 1), req, sizeof(req) - 1);
	st = ctl_json_ok(&r, "status", NULL);
	over0 = control_stat(st, "overflows");
	req0 = control_stat(st, "requests");
	json_decref(st);
	compact();
	w.fd = raw_connect(r.sock);
	w.buf = buf;
	w.len = PIPELINE / 2 * (sizeof(req) - 1);
	setsockopt(w.fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){.tv_sec = 30},
		   sizeof(struct timeval));
	r.max_gap_ms = 0;
	assert_int_equal(pthread_create(&writer, NULL, pipeline_write, &w), 0);
	while (answered < PIPELINE) {
		ssize_t n = recv(w.fd, in + len, cap - len < 16384 ? cap - len : 16384, 0);
		char *p = in, *nl;

		if (n <= 0)
			fail_msg("disconnected after %zu answers (%zu bytes)", answered, bytes);
		len += (size_t)n;
		bytes += (size_t)n;
		in[len] = '\0';
		while ((nl = strchr(p, '\n'))) {
			*nl = '\0';
			if (strncmp(p, "{\"ok\":true", 10) != 0 ||
			    !strstr(p, answered % 2 ? "\"daemon\":{" : "\"records\":["))
				fail_msg("answer %zu: %.200s", answered, p);
			if ((size_t)(nl + 1 - p) > biggest)
				biggest = (size_t)(nl + 1 - p);
			answered++;
			p = nl + 1;
		}
		len -= (size_t)(p - in);
		memmove(in, p, len);
		usleep(2000); /* slowly: about 8 MB/s at most */
	}
	assert_int_equal(pthread_join(writer, NULL), 0);
	assert_int_equal((size_t)w.written, w.len);
	st = ctl_json_ok(&r, "status", NULL);
	over1 = control_stat(st, "overflows");
	req1 = control_stat(st, "requests");
	json_decref(st);
	printf("%d pipelined requests: %zu answers, %zu bytes (largest %zu), longest gap of a "
	       "10 ms timer %llu ms\n",
	       PIPELINE, answered, bytes, biggest, (unsigned long long)r.max_gap_ms);
	assert_true(bytes > 2 * KTEL_CONTROL_MAX_PENDING);
	assert_int_equal(over1 - over0, 0);
	assert_int_equal(req1 - req0, PIPELINE + 1);
	assert_true(r.max_gap_ms < 500);
	close(w.fd);
	free(buf);
	free(in);
	rig_stop(&r);
	sandbox_cleanup(&r.sb);
}

static void test_socket_path_rules(void **state)
{
	struct ktel_control *a = NULL, *b = NULL;
	struct ctl_fake fake; /* no daemon needed: only the path matters here */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct sandbox sb;
	struct ktel_err err;
	char path[700];
	uv_loop_t loop;
	int fd;

	sandbox_init(&sb, "ctl-path");
	ctl_fake_init(&fake);
	uv_loop_init(&loop);
	snprintf(path, sizeof(path), "%s/run/sub/control.sock", sb.dir);
	assert_int_equal(ktel_control__new(&loop, &ctl_fake_ops, &fake, path, (gid_t)-1, &a, &err),
			 0);
	/* A second daemon on the same path is refused, and says why. */
	assert_int_equal(ktel_control__new(&loop, &ctl_fake_ops, &fake, path, (gid_t)-1, &b, &err),
			 -EADDRINUSE);
	assert_non_null(strstr(err.msg, "another daemon is listening on it"));
	ktel_control__close(a);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(access(path, F_OK), -1); /* removed on close */

	/* A stale socket (nobody listens) is replaced. */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	assert_int_equal(ktel_control__new(&loop, &ctl_fake_ops, &fake, path, (gid_t)-1, &a, &err),
			 0);
	ktel_control__close(a);
	uv_run(&loop, UV_RUN_DEFAULT);

	/* A regular file there is never replaced. */
	close(open(path, O_WRONLY | O_CREAT, 0600));
	assert_int_equal(ktel_control__new(&loop, &ctl_fake_ops, &fake, path, (gid_t)-1, &a, &err),
			 -EEXIST);
	assert_non_null(strstr(err.msg, "exists and is not a socket"));
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	sandbox_cleanup(&sb);
}

static void test_inspect_plugins(void **state)
{
	struct rig r = {0};
	DIR *dir = opendir(KTEL_PLUGIN_DIR);
	struct dirent *e;
	int n = 0;

	sandbox_init(&r.sb, "ctl-inspect");
	assert_non_null(dir);
	while ((e = readdir(dir))) {
		char path[1024];
		size_t len = strlen(e->d_name);

		if (len < 4 || strcmp(e->d_name + len - 3, ".so") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", KTEL_PLUGIN_DIR, e->d_name);
		if (ctl(&r, false, "inspect", path, NULL) != 0)
			fail_msg("inspect %s: %s", path, r.err);
		assert_non_null(strstr(r.out, "plugin "));
		assert_non_null(strstr(r.out, "programs"));
		n++;
	}
	closedir(dir);
	assert_true(n >= 10);
	assert_int_equal(ctl(&r, false, "inspect", KTEL_TEST_PLUGIN_DIR "/fx_unreadable.so", NULL),
			 1);
	assert_non_null(strstr(r.err, "member flags is a bitfield"));
	assert_non_null(strstr(r.out, "UNREADABLE"));
	/* A char array as a dimension: the daemon refuses it, so must inspect. */
	assert_int_equal(ctl(&r, false, "inspect", KTEL_TEST_PLUGIN_DIR "/fx_string_key.so", NULL),
			 1);
	assert_non_null(strstr(r.err, "key struct fx_string_key member heap is a char_array"));
	assert_int_equal(ctl(&r, false, "inspect", NULL), 2);
	free(r.out);
	free(r.err);
	sandbox_cleanup(&r.sb);
}

/*
 * inspect against a running daemon whose config sets a param to a value
 * other than the plugin's default: the report carries the value the kernel
 * holds (the loaded program's .rodata), the default and the unit, in JSON
 * and in text; with no daemon the value is unknown and the report says why.
 */
static void test_inspect_current_params(void **state)
{
	struct rig r;
	char so[700];
	json_t *j, *p;

	rig_start_plugin(&r, "ctl-params", "runq_stall_events",
			 "\"metrics\": {\"runq_stall_events\": {\"params\": "
			 "{\"threshold_us\": 25000}}}",
			 false);
	snprintf(so, sizeof(so), "%s/runq_stall_events.so", r.plugins);
	if (ctl(&r, false, "--socket", r.sock, "--json", "inspect", so, NULL) != 0)
		fail_msg("inspect: %s%s", r.out, r.err);
	j = json_loads(r.out, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_array_size(json_object_get(j, "params")), 1);
	p = json_array_get(json_object_get(j, "params"), 0);
	assert_string_equal(json_string_value(json_object_get(p, "name")), "threshold_us");
	assert_int_equal(json_integer_value(json_object_get(p, "value")), 25000);
	assert_int_equal(json_integer_value(json_object_get(p, "default")), 100000);
	assert_string_equal(json_string_value(json_object_get(p, "unit")), "us");
	assert_non_null(
		strstr(json_string_value(json_object_get(p, "description")), "microseconds"));
	assert_string_equal(json_string_value(json_object_get(j, "params_from")), so);
	assert_null(json_object_get(j, "params_note"));
	json_decref(j);
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "inspect", so, NULL), 0);
	printf("%s", r.out);
	assert_non_null(
		strstr(r.out, "threshold_us         current 25000 us, default 100000 us: "));
	/* No daemon on the socket: the value is unknown, and inspect still works. */
	rig_stop(&r);
	assert_int_equal(ctl(&r, false, "--socket", r.sock, "--json", "inspect", so, NULL), 0);
	j = json_loads(r.out, 0, NULL);
	assert_non_null(j);
	p = json_array_get(json_object_get(j, "params"), 0);
	assert_true(json_is_null(json_object_get(p, "value")));
	assert_int_equal(json_integer_value(json_object_get(p, "default")), 100000);
	assert_non_null(strstr(json_string_value(json_object_get(j, "params_note")), "no daemon"));
	json_decref(j);
	free(r.out);
	free(r.err);
	sandbox_cleanup(&r.sb);
}

/* ns since the epoch of an RFC 3339 UTC time with 9 fraction digits. */
static int64_t parse_utc_ns(const char *s)
{
	struct tm tm = {0};
	const char *frac = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	char *end;
	long ns;

	assert_non_null(frac);
	assert_int_equal(*frac, '.');
	ns = strtol(frac + 1, &end, 10);
	assert_int_equal(end - (frac + 1), 9);
	assert_string_equal(end, "Z");
	return (int64_t)timegm(&tm) * 1000000000 + ns;
}

static int64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define NS_PER_S 1000000000LL

/*
 * A record's times as a reader of the JSON gets them: start_ns/end_ns are
 * wall-clock ns since the epoch (what pandas and jq take as time), equal to
 * the start/end strings and consistent with start_s/end_s; the
 * CLOCK_BOOTTIME stamps are start_boot_ns/end_boot_ns. Checked on a pull's
 * answer against CLOCK_REALTIME and CLOCK_BOOTTIME around the pull, and on
 * every line of the JSON sink's file.
 */
static void check_times(const json_t *rec, int64_t real_lo, int64_t real_hi, int64_t boot_lo,
			int64_t boot_hi)
{
	int64_t start = json_integer_value(json_object_get(rec, "start_ns"));
	int64_t end = json_integer_value(json_object_get(rec, "end_ns"));
	int64_t bstart = json_integer_value(json_object_get(rec, "start_boot_ns"));
	int64_t bend = json_integer_value(json_object_get(rec, "end_boot_ns"));

	assert_true(end >= real_lo && end <= real_hi);
	assert_true(start <= end && start >= real_lo - 120 * NS_PER_S);
	assert_int_equal(start, parse_utc_ns(json_string_value(json_object_get(rec, "start"))));
	assert_int_equal(end, parse_utc_ns(json_string_value(json_object_get(rec, "end"))));
	assert_int_equal(json_integer_value(json_object_get(rec, "start_s")), start / NS_PER_S);
	assert_int_equal(json_integer_value(json_object_get(rec, "end_s")), end / NS_PER_S);
	assert_true(bend >= boot_lo && bend <= boot_hi);
	assert_true(bstart <= bend);
	/* The two clocks measure the same window. */
	assert_true(llabs((end - start) - (bend - bstart)) < NS_PER_S);
}

static void test_record_times(void **state)
{
	int64_t real0, boot0, real1, boot1, real2, boot2;
	char *text, *save = NULL;
	struct rig r;
	json_t *j, *rec;
	size_t i, n = 0;

	real0 = clock_ns(CLOCK_REALTIME);
	boot0 = clock_ns(CLOCK_BOOTTIME);
	rig_start(&r, "ctl-times", "", false);
	compact();
	real1 = clock_ns(CLOCK_REALTIME);
	boot1 = clock_ns(CLOCK_BOOTTIME);
	j = ctl_json_ok(&r, "pull", METRIC);
	real2 = clock_ns(CLOCK_REALTIME);
	boot2 = clock_ns(CLOCK_BOOTTIME);
	assert_true(json_array_size(json_object_get(j, "records")) >= 1);
	json_array_foreach(json_object_get(j, "records"), i, rec) {
		printf("pull: start_ns %lld start %s end_boot_ns %lld; CLOCK_REALTIME %lld\n",
		       (long long)json_integer_value(json_object_get(rec, "start_ns")),
		       json_string_value(json_object_get(rec, "start")),
		       (long long)json_integer_value(json_object_get(rec, "end_boot_ns")),
		       (long long)real2);
		check_times(rec, real1 - NS_PER_S, real2 + NS_PER_S, boot1, boot2);
	}
	json_decref(j);
	rig_stop(&r);
	real2 = clock_ns(CLOCK_REALTIME);
	boot2 = clock_ns(CLOCK_BOOTTIME);
	text = ktel_test_slurp(r.sb.out);
	assert_non_null(text);
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		rec = json_loads(line, 0, NULL);
		assert_non_null(rec);
		check_times(rec, real0 - NS_PER_S, real2 + NS_PER_S, boot0, boot2);
		json_decref(rec);
		n++;
	}
	free(text);
	assert_true(n >= 1);
	sandbox_cleanup(&r.sb);
}

struct line_server {
	int fd;
	int n_lines;
};

static void *serve_lines(void *arg)
{
	struct line_server *s = arg;
	int c = accept(s->fd, NULL, NULL);

	for (int i = 0; c >= 0 && i < s->n_lines; i++) {
		char line[64];
		int n = snprintf(line, sizeof(line), "{\"metric\":\"m\",\"seq\":%d}\n", i);

		(void)!write(c, line, (size_t)n);
	}
	if (c >= 0)
		close(c);
	return NULL;
}

static void test_watch(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct line_server s = {.n_lines = 3};
	struct rig r = {0};
	pthread_t t;

	sandbox_init(&r.sb, "ctl-watch");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/stream.sock", r.sb.dir);
	s.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(s.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s.fd, 1), 0);
	pthread_create(&t, NULL, serve_lines, &s);
	assert_int_equal(ctl(&r, false, "watch", "--json", "--socket", sa.sun_path, NULL), 0);
	pthread_join(t, NULL);
	close(s.fd);
	assert_string_equal(r.out, "{\"metric\":\"m\",\"seq\":0}\n{\"metric\":\"m\",\"seq\":1}\n"
				   "{\"metric\":\"m\",\"seq\":2}\n");
	/* Nothing listening: exit 3. */
	assert_int_equal(ctl(&r, false, "watch", "--socket", sa.sun_path, NULL), 3);
	/* No daemon at all: exit 3 and a hint. */
	assert_int_equal(ctl(&r, false, "--socket", sa.sun_path, "list", NULL), 3);
	assert_non_null(strstr(r.err, "cannot connect"));
	free(r.out);
	free(r.err);
	sandbox_cleanup(&r.sb);
}

/*
 * A socket path is never cut (a cut path names another file): one too long
 * for a unix socket
 * (here 4097 bytes of 3-byte characters after one ASCII byte, so a cut at
 * PATH_MAX would split one) is refused as a usage error whole, with a
 * message that stays valid UTF-8; so is one just over sun_path's 107.
 */
static void test_socket_path_never_cut(void **state)
{
	static char path[4200];
	struct rig r = {0};
	json_t *j;
	size_t off = 1;

	sandbox_init(&r.sb, "ctl-longpath");
	path[0] = '/';
	for (; off + 3 < sizeof(path) && off < 4097; off += 3)
		memcpy(path + off, "\xe2\x82\xac", 3);
	path[off] = '\0';
	assert_int_equal(ctl(&r, false, "--socket", path, "list", NULL), 2);
	assert_non_null(strstr(r.err, "a unix socket path has at most 107"));
	j = json_string(r.err);
	assert_non_null(j); /* valid UTF-8 */
	json_decref(j);
	assert_int_equal(ctl(&r, false, "watch", "--socket", path, NULL), 2);
	assert_non_null(strstr(r.err, "watch --socket: the socket path is"));
	memset(path + 1, 'a', 107); /* '/' and 107 bytes: one more than sun_path takes */
	path[108] = '\0';
	assert_int_equal(ctl(&r, false, "--socket", path, "list", NULL), 2);
	assert_non_null(strstr(r.err, "the socket path is 108 bytes"));
	free(r.out);
	free(r.err);
	sandbox_cleanup(&r.sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enable_disable_round_trip),
		cmocka_unit_test(test_lease_expires),
		cmocka_unit_test(test_permission),
		cmocka_unit_test(test_show_and_pull),
		cmocka_unit_test(test_cli_consistency),
		cmocka_unit_test(test_pull_in_windows),
		cmocka_unit_test(test_watch_drop_notice),
		cmocka_unit_test(test_protocol_limits),
		cmocka_unit_test(test_idle_clients_and_root_slot),
		cmocka_unit_test(test_pull_flood),
		cmocka_unit_test(test_pipelining_reader_is_slowed),
		cmocka_unit_test(test_socket_path_rules),
		cmocka_unit_test(test_socket_path_never_cut),
		cmocka_unit_test(test_inspect_plugins),
		cmocka_unit_test(test_inspect_current_params),
		cmocka_unit_test(test_record_times),
		cmocka_unit_test(test_watch),
	};

	ktel_test_require_root("test_control");
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, sandbox_remove_all);
}
