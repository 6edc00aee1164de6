// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktelemetryd end to end on the real kernel, with the real built plugins:
 * compaction events counted by the daemon match an independent oracle (a
 * tracefs instance counting the same tracepoint over the same window); a
 * kill -9 between pulls loses nothing and counts nothing twice; bad input
 * exits 2 with one line naming the path.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <bpf/bpf.h>

#include "ktel_test.h"
#include "map_total.h"
#include "tracefs_oracle.h"
#include "daemon_harness.h"

#define COMPACTION_PIN "map_compaction_duration_compaction_duration_map"

/*
 * Three compactions counted by tracefs inside the running daemon's window
 * (tracing starts after the attach and stops before the final pull), then
 * SIGTERM: the daemon must exit 0. Restores compaction_proactiveness.
 * Returns the kernel's count.
 */
static uint64_t compact_then_stop(struct sandbox *sb, pid_t pid, const char *proactive,
				  const char *old_proactive)
{
	struct tracefs_counter tc;
	uint64_t oracle;
	int rc;

	assert_int_equal(tracefs_start(&tc, "compaction/mm_compaction_end"), 0);
	for (int i = 0; i < 3; i++) {
		trigger_compaction();
		usleep(100000);
	}
	oracle = tracefs_stop(&tc, "mm_compaction_end:");
	kill(pid, SIGTERM);
	rc = daemon_wait(pid, 30);
	if (old_proactive[0])
		sysctl_set(proactive, old_proactive, NULL, 0);
	if (rc != 0)
		dump_log(sb);
	assert_int_equal(rc, 0);
	return oracle;
}

static void test_compaction_matches_tracefs(void **state)
{
	static const char *proactive = "/proc/sys/vm/compaction_proactiveness";
	char old_proactive[32] = "";
	struct sandbox sb;
	uint64_t sum, oracle;
	size_t records;
	pid_t pid;

	/* Only our triggers compact: kcompactd's proactive compaction is off
	 * for the test (restored after). */
	sysctl_set(proactive, "0", old_proactive, sizeof(old_proactive));
	sandbox_init(&sb, "daemon-oracle");
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "60s", "");
	pid = daemon_start(&sb, NULL);
	if (!log_wait_for(&sb, "metric compaction_duration: collecting", 20)) {
		dump_log(&sb);
		fail_msg("daemon did not start collecting compaction_duration");
	}
	/* The oracle window lies inside the daemon's: tracing starts after the
	 * attach and stops before the final pull (SIGTERM). */
	oracle = compact_then_stop(&sb, pid, proactive, old_proactive);
	assert_int_equal(sum_metric(&sb, "compaction_duration", &sum, &records), 0);
	printf("compaction: daemon counted %llu in %zu record(s); tracefs counted %llu\n",
	       (unsigned long long)sum, records, (unsigned long long)oracle);
	assert_true(oracle >= 1);
	/* Every pair the kernel saw was emitted, once. */
	assert_int_equal(sum, ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN));
	assert_int_equal(sum, oracle);
	sandbox_cleanup(&sb);
}

/*
 * Pins kept, state gone (the state file lost, the pinned maps not): the
 * restarted daemon takes the
 * baseline when it opens the maps, before attaching, so every event after
 * the start is reported by the first pull (here the final one at SIGTERM),
 * exactly the kernel's count; what the map held from before is not.
 */
static void test_pins_without_state_report_from_start(void **state)
{
	static const char *proactive = "/proc/sys/vm/compaction_proactiveness";
	char old_proactive[32] = "";
	struct sandbox sb;
	uint64_t sum, oracle, before;
	size_t records;
	pid_t pid;

	sysctl_set(proactive, "0", old_proactive, sizeof(old_proactive));
	sandbox_init(&sb, "daemon-nostate");
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "60s", "");
	pid = daemon_start(&sb, "--once", "2", NULL);
	assert_true(log_wait_for(&sb, "metric compaction_duration: collecting", 20));
	trigger_compaction();
	assert_int_equal(daemon_wait(pid, 30), 0);
	before = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN);
	/* The state is lost; the old output and log go too, to see the new run. */
	assert_int_equal(unlink(sb.state), 0);
	assert_int_equal(truncate(sb.out, 0), 0);
	assert_int_equal(truncate(sb.log, 0), 0);

	pid = daemon_start(&sb, NULL);
	if (!log_wait_for(&sb, "metric compaction_duration: collecting", 20)) {
		dump_log(&sb);
		fail_msg("daemon did not start collecting compaction_duration");
	}
	oracle = compact_then_stop(&sb, pid, proactive, old_proactive);
	assert_int_equal(sum_metric(&sb, "compaction_duration", &sum, &records), 0);
	printf("pins without state: before %llu, daemon counted %llu after the start, "
	       "tracefs %llu\n",
	       (unsigned long long)before, (unsigned long long)sum, (unsigned long long)oracle);
	assert_true(oracle >= 1);
	/* Every event of the tracefs window is reported (more when others
	 * compact between the start and the window: the machine is shared);
	 * the pre-start counts are not, and nothing after the start is lost. */
	if (sum < oracle)
		dump_log(&sb);
	assert_true(sum >= oracle);
	assert_int_equal(sum + before, ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN));
	assert_true(log_wait_for(&sb, "what it counted before this start is not reported", 0));
	sandbox_cleanup(&sb);
}

static void test_kill9_between_pulls(void **state)
{
	struct sandbox sb;
	uint64_t sum, total;
	size_t records;
	pid_t pid;

	sandbox_init(&sb, "daemon-kill9");
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "1s", "");
	pid = daemon_start(&sb, NULL);
	assert_true(log_wait_for(&sb, "metric compaction_duration: collecting", 20));
	trigger_compaction();
	sleep(3); /* at least two pulls: the first window is in the output */
	trigger_compaction();
	usleep(300000);
	kill(pid, SIGKILL); /* mid-window: these events were never pulled */
	waitpid(pid, NULL, 0);
	trigger_compaction(); /* while no daemon runs */
	pid = daemon_start(&sb, "--once", "1", NULL);
	if (daemon_wait(pid, 30) != 0) {
		dump_log(&sb);
		fail_msg("restarted daemon failed");
	}
	assert_int_equal(sum_metric(&sb, "compaction_duration", &sum, &records), 0);
	total = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN);
	printf("kill -9: records %zu, emitted sum %llu, kernel total %llu\n", records,
	       (unsigned long long)sum, (unsigned long long)total);
	assert_true(total >= 2);
	/* Neither lost nor counted twice. */
	assert_int_equal(sum, total);
	assert_true(log_wait_for(&sb, "reuses pin", 1));
	sandbox_cleanup(&sb);
}

static void test_missing_config_exit_2(void **state)
{
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "daemon-badcfg");
	/* The config file does not exist. */
	pid = daemon_start(&sb, "--once", "0", NULL);
	assert_int_equal(daemon_wait(pid, 10), 2);
	assert_true(log_wait_for(&sb, sb.config, 1));
	sandbox_cleanup(&sb);
}

static void test_unwritable_state_exit_2(void **state)
{
	struct sandbox sb;
	char extra[700];
	pid_t pid;

	sandbox_init(&sb, "daemon-badstate");
	/* A state path under a regular file can never be created. */
	snprintf(extra, sizeof(extra), "\"emit_zero\": false");
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "1s", extra);
	snprintf(sb.state, sizeof(sb.state), "%s/config.json/state.bin", sb.dir);
	{
		/* rewrite with the impossible state path */
		FILE *f = fopen(sb.config, "w");

		fprintf(f,
			"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": "
			"\"%s\", \"sinks\": {\"f\": {\"type\": \"json\", \"path\": \"%s\"}}}\n",
			KTEL_PLUGIN_DIR, sb.pin_root, sb.state, sb.out);
		fclose(f);
	}
	pid = daemon_start(&sb, "--once", "0", NULL);
	assert_int_equal(daemon_wait(pid, 10), 2);
	assert_true(log_wait_for(&sb, "state.bin", 1));
	sandbox_cleanup(&sb);
}


/*
 * A state_file that names the JSON sink's own output (a classic copy-paste
 * slip) is refused with the reason: exit 2, the file untouched and not
 * renamed to *.corrupt-*. The path check refuses it before the state load
 * would (test_paths has the state load's own refusals).
 */
static void test_state_file_not_a_state_file_exit_2(void **state)
{
	const char *lines = "{\"metric\":\"runq_latency\",\"seq\":1}\n";
	struct sandbox sb;
	char buf[128] = "";
	pid_t pid;
	FILE *f;

	sandbox_init(&sb, "daemon-notstate");
	snprintf(sb.state, sizeof(sb.state), "%s", sb.out);
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "1s", "");
	f = fopen(sb.out, "w");
	assert_non_null(f);
	fputs(lines, f);
	fclose(f);
	pid = daemon_start(&sb, "--once", "0", NULL);
	assert_int_equal(daemon_wait(pid, 10), 2);
	assert_true(log_wait_for(&sb, "sinks.file.path: same path", 1));
	f = fopen(sb.out, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, lines);
	sandbox_cleanup(&sb);
}

/* Lines in path now (0 when it does not exist). */
static size_t file_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;
	int c;

	if (!f)
		return 0;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Wait until path holds more than min lines. */
static bool wait_lines(const char *path, size_t min, int timeout_s)
{
	for (int i = 0; i <= timeout_s * 20; i++) {
		if (file_lines(path) > min)
			return true;
		usleep(50000);
	}
	return false;
}

/* The daemon of the running test, killed by kill_live when the test fails
 * half-way (it would otherwise outlive the test holding its stdout). */
static pid_t live_pid;

static int kill_live(void **state)
{
	if (live_pid > 0 && kill(live_pid, SIGKILL) == 0)
		daemon_wait(live_pid, 10);
	live_pid = 0;
	return 0;
}

static json_t *sink_status(json_t *st, const char *name)
{
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(st, "sinks"), i, e)
		if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
			return e;
	fail_msg("no sink %s in status", name);
	return NULL;
}

/*
 * logrotate and friends: the JSON sink's file renamed (mv) or
 * deleted under the running daemon: new records land in a new file at the
 * path, not in the old or deleted inode. SIGUSR1 and `ktelemetryctl reopen`
 * reopen. The directory removed: status shows the error and, once the
 * queue bound is passed, the drops; the directory back, writing resumes.
 */
static void test_json_file_moved_or_deleted_reopened(void **state)
{
	struct sandbox sb;
	char logs[700], moved[800], cmd[2000];
	size_t n_moved;
	json_t *st, *e;
	pid_t pid;
	FILE *f;

	sandbox_init(&sb, "daemon-reopen");
	snprintf(logs, sizeof(logs), "%s/logs", sb.dir);
	assert_int_equal(mkdir(logs, 0700), 0);
	snprintf(sb.out, sizeof(sb.out), "%s/k.jsonl", logs);
	f = fopen(sb.config, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"100ms\",\n"
		" \"emit_zero\": true,\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\", "
		"\"max_queue_bytes\": \"8K\"}}}\n",
		KTEL_PLUGIN_DIR, sb.pin_root, sb.state, sb.dir, sb.out);
	fclose(f);
	live_pid = pid = daemon_start(&sb, NULL);
	if (!wait_lines(sb.out, 0, 30)) {
		dump_log(&sb);
		fail_msg("no records in %s", sb.out);
	}

	/* mv: the old file stops growing, a new one appears at the path. */
	snprintf(moved, sizeof(moved), "%s.1", sb.out);
	assert_int_equal(rename(sb.out, moved), 0);
	if (!wait_lines(sb.out, 0, 10)) {
		dump_log(&sb);
		fail_msg("nothing written at %s after it was moved", sb.out);
	}
	assert_true(log_wait_for(&sb, "was moved or deleted", 1));
	n_moved = file_lines(moved);
	assert_true(wait_lines(sb.out, 5, 10));
	assert_int_equal(file_lines(moved), n_moved);

	/* rm: the same. */
	assert_int_equal(unlink(sb.out), 0);
	assert_true(wait_lines(sb.out, 0, 10));

	/* SIGUSR1, then ktelemetryctl reopen: each reopens (logged). */
	kill(pid, SIGUSR1);
	assert_true(log_wait_for(&sb, "SIGUSR1: reopening sink files", 10));
	assert_true(log_wait_for(&sb, "sink file: reopened", 10));
	assert_int_equal(rename(sb.out, moved), 0);
	snprintf(cmd, sizeof(cmd),
		 "%s/tools/ktelemetryctl --socket %s/control.sock reopen >/dev/null",
		 KTEL_BINARY_DIR, sb.dir);
	assert_int_equal(system(cmd), 0);
	assert_true(wait_lines(sb.out, 0, 10));

	/* The directory removed: an error in status, then drops. */
	assert_int_equal(ktel_test_rm_rf(logs), 0);
	if (!log_wait_for(&sb, "cannot open", 10)) {
		dump_log(&sb);
		fail_msg("a missing directory was not reported");
	}
	for (int i = 0; i < 200; i++) {
		st = sandbox_status(&sb);
		e = sink_status(st, "file");
		if (json_integer_value(json_object_get(e, "dropped")) > 0)
			break;
		json_decref(st);
		st = NULL;
		usleep(100000);
	}
	assert_non_null(st);
	assert_non_null(strstr(json_string_value(json_object_get(e, "where")),
			       "cannot open: No such file or directory"));
	assert_true(json_integer_value(json_object_get(e, "errors")) > 0);
	json_decref(st);

	/* Back: writing resumes at the path, and status is clean again. */
	assert_int_equal(mkdir(logs, 0700), 0);
	if (!wait_lines(sb.out, 0, 15)) {
		dump_log(&sb);
		fail_msg("nothing written after the directory came back");
	}
	st = sandbox_status(&sb);
	assert_null(strstr(json_string_value(json_object_get(sink_status(st, "file"), "where")),
			   "cannot open"));
	json_decref(st);
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 20), 0);
	live_pid = 0;
	sandbox_cleanup(&sb);
}

/*
 * A second SIGTERM while the shutdown flush waits on a stalled sink (a FIFO
 * nobody reads, its pipe full) must not kill the daemon with the default
 * action: it is logged, the flush finishes within the close
 * timeout, the drops are said, exit 0.
 */
static void test_second_sigterm_during_flush(void **state)
{
	struct sandbox sb;
	int reader;
	pid_t pid;
	FILE *f;

	sandbox_init(&sb, "daemon-sigterm2");
	snprintf(sb.out, sizeof(sb.out), "%s/fifo", sb.dir);
	assert_int_equal(mkfifo(sb.out, 0600), 0);
	reader = open(sb.out, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	assert_true(reader >= 0);
	f = fopen(sb.config, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"100ms\",\n"
		" \"emit_zero\": true, \"sink_close_timeout\": \"3s\",\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"}}}\n",
		KTEL_PLUGIN_DIR, sb.pin_root, sb.state, sb.dir, sb.out);
	fclose(f);
	live_pid = pid = daemon_start(&sb, NULL);
	assert_true(log_wait_for(&sb, "running with", 30));
	sleep(2); /* the pipe (64 KiB) fills: the sink's write blocks */
	kill(pid, SIGTERM);
	assert_true(log_wait_for(&sb, "final pull, flushing sinks", 10));
	usleep(200000);
	kill(pid, SIGTERM);
	assert_true(log_wait_for(&sb, "not flushed before the close timeout", 10));
	/* The write blocked in the thread pool finishes once the pipe drains. */
	{
		char buf[65536];

		for (int i = 0; i < 100 && read(reader, buf, sizeof(buf)) != 0; i++)
			usleep(20000);
	}
	if (daemon_wait(pid, 30) != 0) {
		dump_log(&sb);
		fail_msg("a second SIGTERM during the flush did not let the daemon finish it");
	}
	live_pid = 0;
	assert_true(log_wait_for(&sb, "again: still flushing the sinks", 0));
	assert_true(log_wait_for(&sb, "not flushed before the close timeout", 0));
	close(reader);
	sandbox_cleanup(&sb);
}

/*
 * A start that fails after plugins loaded (here: the control socket cannot be
 * created) exits 2 and writes nothing: no records, no state file.
 */
static void test_failed_start_writes_nothing(void **state)
{
	struct sandbox sb;
	struct stat st;
	pid_t pid;
	FILE *f;

	sandbox_init(&sb, "daemon-failstart");
	f = fopen(sb.config, "w");
	assert_non_null(f);
	/* A socket under a regular file (the config) can never be created. */
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/c.sock\", \"emit_zero\": true,\n"
		/* a stream with events in its ring before the start fails */
		" \"metrics\": {\"runq_stall_events\": {\"params\": {\"threshold_us\": 0}}},\n"
		" \"sinks\": {\"f\": {\"type\": \"json\", \"path\": \"%s\"}}}\n",
		KTEL_PLUGIN_DIR, sb.pin_root, sb.state, sb.config, sb.out);
	fclose(f);
	pid = daemon_start(&sb, NULL);
	assert_int_equal(daemon_wait(pid, 30), 2);
	assert_true(log_wait_for(&sb, "c.sock", 1));
	/* The sink opened (its file may exist) but got no record. */
	assert_true(stat(sb.out, &st) != 0 || st.st_size == 0);
	assert_int_equal(stat(sb.state, &st), -1);
	assert_int_equal(errno, ENOENT);
	sandbox_cleanup(&sb);
}

/*
 * Drop plugin file src into dir with mode, the way an installer would: copy
 * under a hidden name, then rename into place.
 */
static void drop_in(const char *src, const char *dir, mode_t mode)
{
	const char *base = strrchr(src, '/') + 1;
	char cmd[2000];

	snprintf(cmd, sizeof(cmd), "cp %s %s/.%s && chmod %o %s/.%s && mv %s/.%s %s/%s", src, dir,
		 base, (unsigned)mode, dir, base, dir, base, dir, base);
	assert_int_equal(system(cmd), 0);
}

static void test_reload_and_drop_in(void **state)
{
	char plugdir[700], cfg2[2000], out2[700], path[900];
	struct sandbox sb;
	uint64_t sum;
	size_t records;
	pid_t pid;
	FILE *f;

	sandbox_init(&sb, "daemon-reload");
	/* A watched plugin directory that starts with one plugin. */
	snprintf(plugdir, sizeof(plugdir), "%s/plugins", sb.dir);
	assert_int_equal(mkdir(plugdir, 0755), 0);
	drop_in(KTEL_PLUGIN_DIR "/compaction_duration.so", plugdir, 0644);
	snprintf(path, sizeof(path), "%s/compaction_duration.so", plugdir);
	sandbox_write_config(&sb, plugdir, "1s", "");
	pid = daemon_start(&sb, "--log-level", "debug", NULL);
	assert_true(log_wait_for(&sb, "metric compaction_duration: collecting", 20));

	/* Drop-in at run time: a new plugin starts collecting. */
	drop_in(KTEL_PLUGIN_DIR "/runq_latency.so", plugdir, 0644);
	if (!log_wait_for(&sb, "metric runq_latency: collecting", 10)) {
		dump_log(&sb);
		fail_msg("dropped-in plugin was not picked up");
	}
	/* A group-writable plugin is refused, naming the rule. */
	drop_in(KTEL_PLUGIN_DIR "/memcg_reclaim_latency.so", plugdir, 0664);
	if (!log_wait_for(&sb, "memcg_reclaim_latency.so: refused: group- or world-writable", 10)) {
		dump_log(&sb);
		fail_msg("unsafe plugin was not refused with its rule");
	}
	/* A replaced file (new inode) is reloaded. */
	drop_in(KTEL_PLUGIN_DIR "/compaction_duration.so", plugdir, 0644);
	if (!log_wait_for(&sb, "compaction_duration.so: unloading: file replaced", 10)) {
		dump_log(&sb);
		fail_msg("replaced plugin was not reloaded");
	}
	assert_true(log_wait_for(&sb, "reuses pin", 5));
	/* Removal detaches the plugin. */
	snprintf(path, sizeof(path), "%s/runq_latency.so", plugdir);
	unlink(path);
	assert_true(log_wait_for(&sb, "runq_latency.so: unloading: file removed", 10));

	/* Reload: a new sink replaces the old one, a metric is disabled. */
	snprintf(out2, sizeof(out2), "%s/out2.jsonl", sb.dir);
	snprintf(cfg2, sizeof(cfg2),
		 "{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\","
		 " \"control_socket\": \"%s/control.sock\", \"interval\": \"1s\", \"emit_zero\": true,"
		 " \"sinks\": {\"second\": {\"type\": \"json\", \"path\": \"%s\"}}}",
		 plugdir, sb.pin_root, sb.state, sb.dir, out2);
	f = fopen(sb.config, "w");
	fputs(cfg2, f);
	fclose(f);
	kill(pid, SIGHUP);
	if (!log_wait_for(&sb, "configuration reloaded", 10)) {
		dump_log(&sb);
		fail_msg("reload did not apply");
	}
	assert_true(log_wait_for(&sb, "sink file: removed", 1));
	trigger_compaction(); /* the map gets its key; emit_zero repeats it */
	sleep(3);
	{
		struct sandbox view = sb;

		snprintf(view.out, sizeof(view.out), "%s", out2);
		assert_int_equal(sum_metric(&view, "compaction_duration", &sum, &records), 0);
		assert_true(records >= 1);
	}

	/* A broken file keeps the running config and says why. */
	f = fopen(sb.config, "w");
	fputs("{\"interval\": \"soon\", \"sinks\": {\"x\": {\"type\": \"json\"}}}", f);
	fclose(f);
	kill(pid, SIGHUP);
	if (!log_wait_for(&sb, "reload: interval: expected duration", 10)) {
		dump_log(&sb);
		fail_msg("broken reload did not report its errors");
	}
	assert_true(log_wait_for(&sb, "the running configuration is unchanged", 1));
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 20), 0);
	sandbox_cleanup(&sb);
}

/* Count lines of the output naming metric and containing text. */
static size_t count_lines(const struct sandbox *sb, const char *metric, const char *text)
{
	char *line = NULL, want[200];
	size_t cap = 0, n = 0;
	FILE *f = fopen(sb->out, "r");

	snprintf(want, sizeof(want), "\"metric\":\"%s\"", metric);
	while (f && getline(&line, &cap, f) > 0)
		n += strstr(line, want) && (!text || strstr(line, text));
	free(line);
	if (f)
		fclose(f);
	return n;
}

static void test_self_telemetry(void **state)
{
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "daemon-self");
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "1s",
			     "\"self_telemetry\": {\"interval\": \"1s\"}");
	pid = daemon_start(&sb, "--once", "2.5", NULL);
	assert_int_equal(daemon_wait(pid, 30), 0);
	/* Each sink says where it delivers. */
	{
		char want[800];

		snprintf(want, sizeof(want), "sink file (json): file %s", sb.out);
		assert_true(log_wait_for(&sb, want, 1));
	}
	/* Sink counters, per sink; pull cost and errors, per metric. */
	assert_true(count_lines(&sb, "ktel_sink_sent", "\"sink\":\"file\"") >= 2);
	assert_true(count_lines(&sb, "ktel_sink_dropped", NULL) >= 2);
	assert_true(count_lines(&sb, "ktel_pull_duration", "\"metric\":\"compaction_duration\"") >=
		    2);
	/* Units are declared, not spelled into the name (sinks/units.h). */
	assert_true(count_lines(&sb, "ktel_pull_duration", "\"unit\":\"ns\"") >= 2);
	assert_int_equal(count_lines(&sb, "ktel_pull_duration_us", NULL), 0);
	assert_true(count_lines(&sb, "ktel_pull_errors", "\"value\":0") >= 2);
	/* Running totals are counters. */
	assert_true(count_lines(&sb, "ktel_prog_recursion_misses", "\"type\":\"counter\"") >= 1);
	assert_int_equal(count_lines(&sb, "ktel_prog_recursion_misses", "\"type\":\"gauge\""), 0);
	assert_int_equal(count_lines(&sb, "ktel_invalid_durations", "\"type\":\"gauge\""), 0);
	assert_true(count_lines(&sb, "ktel_sink_errors", "\"unit\":\"errors\"") >= 2);
	/* On shutdown each sink says what it delivered and what it could not. */
	assert_true(log_wait_for(&sb, "sink file: closed: ", 1));
	assert_true(log_wait_for(&sb, "0 of them not flushed before the close timeout", 1));
	sandbox_cleanup(&sb);
}

/*
 * Self-telemetry speaks only of what the config uses: with one metric
 * enabled, no program or plugin record names another plugin.
 */
static void test_self_telemetry_only_enabled(void **state)
{
	struct sandbox sb;
	pid_t pid;
	size_t invalid, progs;

	sandbox_init(&sb, "daemon-self-enabled");
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "1s",
			     "\"self_telemetry\": {\"interval\": \"1s\"}, "
			     "\"enable_new_plugins\": false, "
			     "\"metrics\": {\"compaction_duration\": {\"enabled\": true}}");
	pid = daemon_start(&sb, "--once", "2.5", NULL);
	assert_int_equal(daemon_wait(pid, 30), 0);
	invalid = count_lines(&sb, "ktel_invalid_durations", NULL);
	assert_true(invalid >= 1);
	assert_int_equal(count_lines(&sb, "ktel_invalid_durations",
				     "\"plugin\":\"compaction_duration\""),
			 invalid);
	progs = count_lines(&sb, "ktel_prog_recursion_misses", NULL);
	assert_true(progs >= 1);
	assert_int_equal(count_lines(&sb, "ktel_prog_recursion_misses",
				     "\"program\":\"compaction_begin\"") +
				 count_lines(&sb, "ktel_prog_recursion_misses",
					     "\"program\":\"compaction_end\""),
			 progs);
	assert_int_equal(count_lines(&sb, "ktel_pull_duration", "\"metric\":\"runq_latency\""), 0);
	sandbox_cleanup(&sb);
}

/* The live view tools/run ends in: `ktelemetryctl top` against the real daemon. */
static void test_top_live_view(void **state)
{
	char cmd[1400], out[700];
	struct sandbox sb;
	char *text = NULL;
	size_t cap = 0;
	FILE *f;
	pid_t pid;

	sandbox_init(&sb, "daemon-top");
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "60s", "");
	pid = daemon_start(&sb, NULL);
	assert_true(log_wait_for(&sb, "metric compaction_duration: collecting", 20));
	trigger_compaction();
	snprintf(out, sizeof(out), "%s/top.txt", sb.dir);
	snprintf(cmd, sizeof(cmd),
		 "%s/tools/ktelemetryctl --socket %s/control.sock top --count 1 "
		 "compaction_duration > %s",
		 KTEL_BINARY_DIR, sb.dir, out);
	assert_int_equal(system(cmd), 0);
	f = fopen(out, "r");
	assert_non_null(f);
	assert_true(getdelim(&text, &cap, '\0', f) > 0);
	fclose(f);
	/* top pulled first: the metric's row and the bars of its last window
	 * (the busiest key's), not "not pulled yet". */
	if (!strstr(text, "\ncompaction_duration ") || strstr(text, "not pulled yet") ||
	    !strstr(text, "|@"))
		fail_msg("unexpected top output:\n%s", text);
	free(text);
	text = NULL;
	/* show on a stream metric says what it is instead of "not loaded". */
	snprintf(cmd, sizeof(cmd),
		 "%s/tools/ktelemetryctl --socket %s/control.sock show oom_events "
		 "> %s 2>&1",
		 KTEL_BINARY_DIR, sb.dir, out);
	assert_int_equal(WEXITSTATUS(system(cmd)), 1);
	f = fopen(out, "r");
	assert_non_null(f);
	assert_true(getdelim(&text, &cap, '\0', f) > 0);
	fclose(f);
	assert_non_null(strstr(text, "metric oom_events: a stream of events"));
	free(text);
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 20), 0);
	sandbox_cleanup(&sb);
}

/* A prometheus sink on port 0 says which port it bound. */
static void test_sink_where_port_zero(void **state)
{
	struct sandbox sb;
	char cfg[2000];
	FILE *f;
	pid_t pid;

	sandbox_init(&sb, "daemon-where");
	snprintf(cfg, sizeof(cfg),
		 "{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\","
		 " \"sinks\": {\"prom\": {\"type\": \"prometheus\", \"port\": 0}}}",
		 KTEL_PLUGIN_DIR, sb.pin_root, sb.state);
	f = fopen(sb.config, "w");
	fputs(cfg, f);
	fclose(f);
	pid = daemon_start(&sb, "--once", "0.5", NULL);
	assert_int_equal(daemon_wait(pid, 30), 0);
	assert_true(log_wait_for(&sb, "sink prom (prometheus): http://127.0.0.1:", 1));
	assert_false(log_wait_for(&sb, "http://127.0.0.1:0/", 0));
	sandbox_cleanup(&sb);
}

/*
 * A reload whose changed sink cannot open (its port is taken) undoes
 * everything it opened: the added sink is gone again and the old sinks run
 * with their old options.
 */
static void test_reload_failure_undoes_sinks(void **state)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	char cfg[3000], cmd[1500], out[800], *text = NULL;
	struct sandbox sb;
	size_t cap = 0;
	int busy;
	FILE *f;
	pid_t pid;

	/* A port nobody else can take while the test holds it. */
	busy = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(busy, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(busy, 1), 0);
	assert_int_equal(getsockname(busy, (struct sockaddr *)&sin, &len), 0);

	sandbox_init(&sb, "daemon-undo");
	snprintf(cfg, sizeof(cfg),
		 "{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\","
		 " \"control_socket\": \"%s/control.sock\","
		 " \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"},"
		 "             \"prom\": {\"type\": \"prometheus\", \"port\": 0}}}",
		 KTEL_PLUGIN_DIR, sb.pin_root, sb.state, sb.dir, sb.out);
	f = fopen(sb.config, "w");
	fputs(cfg, f);
	fclose(f);
	pid = daemon_start(&sb, NULL);
	assert_true(log_wait_for(&sb, "metric compaction_duration: collecting", 20));

	/* New sink "extra"; "prom" changed to the taken port: cannot open. */
	snprintf(cfg, sizeof(cfg),
		 "{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\","
		 " \"control_socket\": \"%s/control.sock\","
		 " \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"},"
		 "             \"extra\": {\"type\": \"json\", \"path\": \"%s/extra.jsonl\"},"
		 "             \"prom\": {\"type\": \"prometheus\", \"port\": %u}}}",
		 KTEL_PLUGIN_DIR, sb.pin_root, sb.state, sb.dir, sb.out, sb.dir,
		 ntohs(sin.sin_port));
	f = fopen(sb.config, "w");
	fputs(cfg, f);
	fclose(f);
	kill(pid, SIGHUP);
	if (!log_wait_for(&sb, "the running configuration is unchanged", 10)) {
		dump_log(&sb);
		fail_msg("the failed reload was not reported");
	}
	assert_true(log_wait_for(&sb, "(kept the previous options)", 0));

	/* The daemon's own view: exactly the old two sinks, prom on a free port. */
	snprintf(out, sizeof(out), "%s/status.json", sb.dir);
	snprintf(cmd, sizeof(cmd),
		 "%s/tools/ktelemetryctl --socket %s/control.sock --json status "
		 "> %s",
		 KTEL_BINARY_DIR, sb.dir, out);
	assert_int_equal(system(cmd), 0);
	f = fopen(out, "r");
	assert_non_null(f);
	assert_true(getdelim(&text, &cap, '\0', f) > 0);
	fclose(f);
	{
		json_t *st = json_loads(text, 0, NULL), *sinks = json_object_get(st, "sinks"), *e;
		char taken[32];
		size_t i;

		assert_non_null(st);
		assert_int_equal(json_array_size(sinks), 2);
		snprintf(taken, sizeof(taken), ":%u/", ntohs(sin.sin_port));
		json_array_foreach(sinks, i, e) {
			const char *name = json_string_value(json_object_get(e, "name"));

			assert_true(strcmp(name, "file") == 0 || strcmp(name, "prom") == 0);
			assert_null(strstr(json_string_value(json_object_get(e, "where")), taken));
		}
		json_decref(st);
	}
	free(text);
	close(busy);
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 20), 0);
	sandbox_cleanup(&sb);
}

/* How many times text occurs in the file at path. */
static size_t file_count(const char *path, const char *text)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (f && getdelim(&buf, &cap, '\0', f) > 0)
		for (const char *p = buf; (p = strstr(p, text)); p += strlen(text))
			n++;
	free(buf);
	if (f)
		fclose(f);
	return n;
}

/* How many times text occurs in the daemon's log. */
static size_t log_count(const struct sandbox *sb, const char *text)
{
	return file_count(sb->log, text);
}

/* A plugin directory of its own in the sandbox, holding copies of srcs. */
static void sandbox_plugin_dir(const struct sandbox *sb, char *dir, size_t len,
			       const char *const *srcs, size_t n)
{
	snprintf(dir, len, "%s/plugins", sb->dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	for (size_t i = 0; i < n; i++)
		drop_in(srcs[i], dir, 0644);
}

/*
 * A plugin overwritten in place (`cp` over it: same inode, new content)
 * while the daemon runs it: the daemon loads the new version, with its new
 * metric, not the old library glibc still held under that name and inode.
 */
static void test_plugin_overwritten_in_place_runs_new_code(void **state)
{
	static const char *const srcs[] = {KTEL_TEST_PLUGIN_DIR "/fx_replace_v1.so"};
	char plugdir[700], cmd[2000];
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "daemon-inplace");
	sandbox_plugin_dir(&sb, plugdir, sizeof(plugdir), srcs, 1);
	/* v1 is installed as fx_replace.so. */
	snprintf(cmd, sizeof(cmd), "mv %s/fx_replace_v1.so %s/fx_replace.so", plugdir, plugdir);
	assert_int_equal(system(cmd), 0);
	sandbox_write_config(&sb, plugdir, "60s", "");
	pid = daemon_start(&sb, NULL);
	if (!log_wait_for(&sb, "metric fx_replace_old: collecting", 20)) {
		dump_log(&sb);
		fail_msg("fx_replace v1 did not start");
	}
	assert_false(log_wait_for(&sb, "fx_replace_new", 0));
	snprintf(cmd, sizeof(cmd), "cp %s/fx_replace_v2.so %s/fx_replace.so", KTEL_TEST_PLUGIN_DIR,
		 plugdir);
	assert_int_equal(system(cmd), 0);
	if (!log_wait_for(&sb, "fx_replace.so: unloading: file replaced", 10) ||
	    !log_wait_for(&sb, "metric fx_replace_new: collecting", 10)) {
		dump_log(&sb);
		fail_msg("the in-place replacement did not load version 2");
	}
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 20), 0);
	sandbox_cleanup(&sb);
}

/*
 * A plugin copied slowly in place into the watched directory (scp, adb
 * push): the daemon neither crashes on the partial file (dlopen of one was
 * a SIGBUS) nor refuses it while it grows, and loads it once complete.
 */
static void test_slow_drop_in_loads_when_complete(void **state)
{
	static const char *const srcs[] = {KTEL_PLUGIN_DIR "/compaction_duration.so"};
	char plugdir[700], path[800];
	static unsigned char img[1 << 20];
	struct sandbox sb;
	ssize_t size;
	pid_t pid;
	int fd;

	fd = open(KTEL_TEST_PLUGIN_DIR "/fx_replace_v1.so", O_RDONLY);
	assert_true(fd >= 0);
	size = read(fd, img, sizeof(img));
	close(fd);
	assert_true(size > 8192 && size < (ssize_t)sizeof(img));
	sandbox_init(&sb, "daemon-slow-drop-in");
	sandbox_plugin_dir(&sb, plugdir, sizeof(plugdir), srcs, 1);
	sandbox_write_config(&sb, plugdir, "60s", "");
	pid = daemon_start(&sb, NULL);
	assert_true(log_wait_for(&sb, "metric compaction_duration: collecting", 20));
	snprintf(path, sizeof(path), "%s/fx_replace.so", plugdir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0644), 0);
	/* Three pieces, each within the quiet period of the one before. */
	for (ssize_t done = 0, piece = size / 3 + 1; done < size; done += piece) {
		ssize_t n = size - done < piece ? size - done : piece;

		assert_int_equal(write(fd, img + done, (size_t)n), n);
		if (done + n < size)
			usleep(600 * 1000);
		assert_int_equal(kill(pid, 0), 0);
		assert_false(log_wait_for(&sb, "fx_replace.so: refused", 0));
		assert_false(log_wait_for(&sb, "metric fx_replace_old: collecting", 0));
	}
	assert_int_equal(close(fd), 0);
	if (!log_wait_for(&sb, "metric fx_replace_old: collecting", 10)) {
		dump_log(&sb);
		fail_msg("the slowly written plugin was not loaded once complete");
	}
	assert_false(log_wait_for(&sb, "fx_replace.so: refused", 0));
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 20), 0);
	sandbox_cleanup(&sb);
}

/* A drop-in repeating a running metric's name is refused, naming both files. */
static void test_duplicate_metric_drop_in_refused(void **state)
{
	static const char *const srcs[] = {KTEL_PLUGIN_DIR "/compaction_duration.so"};
	char plugdir[700], want[2000];
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "daemon-dup");
	sandbox_plugin_dir(&sb, plugdir, sizeof(plugdir), srcs, 1);
	sandbox_write_config(&sb, plugdir, "60s", "");
	pid = daemon_start(&sb, NULL);
	assert_true(log_wait_for(&sb, "metric compaction_duration: collecting", 20));
	drop_in(KTEL_TEST_PLUGIN_DIR "/fx_dup_metric.so", plugdir, 0644);
	snprintf(want, sizeof(want),
		 "%s/fx_dup_metric.so: refused: duplicate metric name "
		 "compaction_duration (already provided by %s/compaction_duration.so)",
		 plugdir, plugdir);
	if (!log_wait_for(&sb, want, 10)) {
		dump_log(&sb);
		fail_msg("no refusal line: %s", want);
	}
	/* The running plugin keeps its metric. */
	assert_int_equal(log_count(&sb, "metric compaction_duration: collecting"), 1);
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 20), 0);
	sandbox_cleanup(&sb);
}

/* A configured plugin directory that cannot be read: exit 2 naming it and why. */
static void test_unreadable_plugin_dir_exit_2(void **state)
{
	static const struct {
		const char *name;
		int err;
	} cases[] = {{"no-such-dir", ENOENT}, {"config.json", ENOTDIR}};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char dir[700], want[1000];
		struct sandbox sb;
		pid_t pid;

		sandbox_init(&sb, "daemon-nodir");
		snprintf(dir, sizeof(dir), "%s/%s", sb.dir, cases[i].name);
		sandbox_write_config(&sb, dir, "1s", "");
		pid = daemon_start(&sb, "--once", "0", NULL);
		assert_int_equal(daemon_wait(pid, 30), 2);
		snprintf(want, sizeof(want), "%s: cannot read plugin directory: %s", dir,
			 strerror(cases[i].err));
		if (!log_wait_for(&sb, want, 0)) {
			dump_log(&sb);
			fail_msg("expected \"%s\"", want);
		}
		sandbox_cleanup(&sb);
	}
}

/*
 * metrics.<name>.params naming a param the plugin does not have refuses the
 * plugin, naming the JSON path and the params it has; a known one is applied.
 */
static void test_plugin_params_checked(void **state)
{
	static const char *const srcs[] = {KTEL_PLUGIN_DIR "/runq_stall_events.so"};
	static const struct {
		const char *params, *want;
	} cases[] = {
		{"{\"threshold\": 5000}",
		 "runq_stall_events.so: refused: metrics.runq_stall_events.params.threshold: no "
		 "such param (plugin runq_stall_events has params: threshold_us)"},
		{"{\"threshold_us\": \"5000\"}", "params.threshold_us"},
		{"{\"threshold_us\": 5000}", NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char plugdir[700], extra[300];
		struct sandbox sb;
		pid_t pid;
		int rc;

		sandbox_init(&sb, "daemon-params");
		sandbox_plugin_dir(&sb, plugdir, sizeof(plugdir), srcs, 1);
		snprintf(extra, sizeof(extra),
			 "\"metrics\": {\"runq_stall_events\": "
			 "{\"params\": %s}}",
			 cases[i].params);
		sandbox_write_config(&sb, plugdir, "1s", extra);
		pid = daemon_start(&sb, "--once", "0", NULL);
		rc = daemon_wait(pid, 30);
		if (cases[i].want && !log_wait_for(&sb, cases[i].want, 0)) {
			dump_log(&sb);
			fail_msg("params %s: expected \"%s\"", cases[i].params, cases[i].want);
		}
		/* Refused (by the loader, or the config for a non-integer) or collected. */
		assert_int_equal(log_wait_for(&sb, "metric runq_stall_events: collecting", 0),
				 cases[i].want == NULL);
		if (!cases[i].want)
			assert_int_equal(rc, 0);
		sandbox_cleanup(&sb);
	}
}

/* --once pulls once, at the end, however short the interval. */
static void test_once_pulls_once(void **state)
{
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "daemon-once");
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "1s", "");
	pid = daemon_start(&sb, "--once", "2.5", "--log-level", "debug", NULL);
	assert_int_equal(daemon_wait(pid, 30), 0);
	if (log_count(&sb, "metric compaction_duration: pulled ") != 1) {
		dump_log(&sb);
		fail_msg("compaction_duration pulled %zu times in a --once run",
			 log_count(&sb, "metric compaction_duration: pulled "));
	}
	sandbox_cleanup(&sb);
}

/* Voluntary context switches (sleeps that ended) of the daemon's main thread. */
static long main_thread_wakeups(pid_t pid)
{
	char path[64], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* A plugin directory in the sandbox holding only the built-in plugin name. */
static void one_plugin_dir(struct sandbox *sb, const char *name, char *dir, size_t size)
{
	snprintf(dir, size, "%s/plugins", sb->dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(ktel_test_run("cp %s/%s.so %s/", KTEL_PLUGIN_DIR, name, dir), 0);
}

/*
 * Between pulls an idle daemon sleeps until its next timer: no wakeup
 * without work.
 * The control server's idle-client sweep used to run every second with no
 * client connected: 4 wakeups in 4 s at a 60 s interval. It now runs only
 * while a client is connected.
 */
static void test_idle_daemon_sleeps_between_pulls(void **state)
{
	char dir[600];
	long w0, w1;
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "daemon-idle-wakeups");
	one_plugin_dir(&sb, "compaction_duration", dir, sizeof(dir));
	sandbox_write_config(&sb, dir, "60s", "");
	pid = daemon_start(&sb, NULL);
	if (!log_wait_for(&sb, "metric compaction_duration: collecting", 20)) {
		dump_log(&sb);
		fail_msg("daemon did not start collecting compaction_duration");
	}
	sleep(2); /* the start's first pull and the plugin dir's debounce */
	w0 = main_thread_wakeups(pid);
	sleep(4);
	w1 = main_thread_wakeups(pid);
	printf("idle daemon, 60 s interval: %ld wakeups of the main thread in 4 s\n", w1 - w0);
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 30), 0);
	assert_true(w0 >= 0 && w1 >= w0);
	assert_true(w1 - w0 <= 1);
	sandbox_cleanup(&sb);
}

/* daemon_start with the daemon's stdout going to sb->out. */
static pid_t daemon_start_stdout_to_out(struct sandbox *sb)
{
	pid_t pid = fork();

	if (pid == 0) {
		int log = open(sb->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int out = open(sb->out, O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(log, 2);
		dup2(out, 1);
		execl(KTEL_DAEMON_BIN, KTEL_DAEMON_BIN, "--config", sb->config, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/*
 * A round of pulls wakes the loop once. With stdout as the sink
 * (not durable: no ack to wait for) and records every round (runq_latency: the
 * scheduler always runs), the round's
 * JSON write and state save complete on the daemon's own threads without
 * waking the loop again (core/base/worker.h). With libuv's pool each completion
 * woke it: 3 wakeups a round, about 18 in the 6 s measured here.
 */
static void test_round_wakes_loop_once(void **state)
{
	char dir[600];
	size_t lines0, lines1;
	long w0, w1;
	struct sandbox sb;
	pid_t pid;
	FILE *f;

	sandbox_init(&sb, "daemon-round-wakeups");
	one_plugin_dir(&sb, "runq_latency", dir, sizeof(dir));
	f = fopen(sb.config, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"1s\",\n"
		" \"self_telemetry\": {\"enabled\": false},\n"
		" \"sinks\": {\"stdout\": {\"type\": \"json\", \"path\": \"-\"}}}\n",
		dir, sb.pin_root, sb.state, sb.dir);
	fclose(f);
	live_pid = pid = daemon_start_stdout_to_out(&sb);
	if (!log_wait_for(&sb, "metric runq_latency: collecting", 20)) {
		dump_log(&sb);
		fail_msg("daemon did not start collecting runq_latency");
	}
	sleep(2); /* the first rounds, the plugin dir's debounce */
	w0 = main_thread_wakeups(pid);
	lines0 = file_lines(sb.out);
	sleep(6);
	w1 = main_thread_wakeups(pid);
	lines1 = file_lines(sb.out);
	printf("1 s rounds, stdout sink: %ld wakeups of the main thread and %zu lines in 6 s\n",
	       w1 - w0, lines1 - lines0);
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 30), 0);
	live_pid = 0;
	assert_true(lines1 - lines0 >= 5); /* a write every round */
	assert_true(w0 >= 0 && w1 >= w0);
	/* 6 rounds; slack for a round at an edge and a futex wait. */
	assert_true(w1 - w0 <= 9);
	sandbox_cleanup(&sb);
}

/* Capabilities of every thread of pid: false when one holds more than keep. */
static bool threads_hold_at_most(pid_t pid, uint64_t keep, int *ret_threads)
{
	char path[64], line[256];
	struct dirent *e;
	bool ok = true;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	*ret_threads = 0;
	while ((e = readdir(d))) {
		unsigned long long eff = ~0ULL;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			sscanf(line, "CapEff: %llx", &eff);
		fclose(f);
		(*ret_threads)++;
		if (eff & ~keep) {
			printf("thread %s holds CapEff %llx\n", e->d_name, eff);
			ok = false;
		}
	}
	closedir(d);
	return ok;
}

/*
 * drop_privileges reaches the daemon's own threads: the state and files
 * threads exist before the drop (state init, sink open) and must take its
 * signal (a thread blocking it fails the start), and they still write the
 * lines and the state with the smaller set.
 */
static void test_drop_privileges_reaches_writer_threads(void **state)
{
	/* CAP_BPF, CAP_PERFMON, and what a reload may need: CAP_CHOWN always,
	 * CAP_NET_BIND_SERVICE when the daemon held it (root does). */
	const uint64_t keep = (1ULL << 39) | (1ULL << 38) | (1ULL << 0) | (1ULL << 10);
	char dir[600];
	struct sandbox sb;
	int threads = 0;
	pid_t pid;

	sandbox_init(&sb, "daemon-drop-threads");
	one_plugin_dir(&sb, "runq_latency", dir, sizeof(dir));
	sandbox_write_config(&sb, dir, "200ms", "\"drop_privileges\": true");
	live_pid = pid = daemon_start(&sb, NULL);
	if (!log_wait_for(&sb, "running with", 20) || !wait_lines(sb.out, 3, 10)) {
		dump_log(&sb);
		fail_msg("the daemon did not run and write with drop_privileges");
	}
	assert_true(threads_hold_at_most(pid, keep, &threads));
	printf("drop_privileges: %d threads, each within CAP_BPF|CAP_PERFMON|CAP_CHOWN|"
	       "CAP_NET_BIND_SERVICE\n",
	       threads);
	assert_true(threads >= 3); /* the loop, ktel-state, ktel-files */
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 30), 0);
	live_pid = 0;
	assert_int_equal(access(sb.state, F_OK), 0);
	sandbox_cleanup(&sb);
}

/*
 * A plugin scan parses the kernel's BTF once (every parse held the file
 * twice and raised the start's peak memory), and every plugin's
 * bpf_object__load() borrows that parse (core/engine/vmlinux_btf.c) instead of
 * libbpf reading the file again. Observed from outside: the daemon opens
 * /sys/kernel/btf/vmlinux once during a start that loads every built-in
 * plugin (before: once for the targets, then once per plugin load).
 */
static void test_start_reads_kernel_btf_once(void **state)
{
	char trace[700];
	size_t opens, loaded;
	struct sandbox sb;

	if (ktel_test_run("command -v strace >/dev/null"))
		skip();
	sandbox_init(&sb, "daemon-btf-once");
	snprintf(trace, sizeof(trace), "%s/strace.txt", sb.dir);
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "1s", "\"enable_new_plugins\": true");
	/* LeakSanitizer cannot run under ptrace (the ASan build); the other
	 * daemon tests check for leaks. */
	assert_int_equal(ktel_test_run("ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "
				       "strace -f -qq -e trace=open,openat -o %s %s --config %s "
				       "--once 0 --log-level info 2>>%s",
				       trace, KTEL_DAEMON_BIN, sb.config, sb.log),
			 0);
	opens = file_count(trace, "\"/sys/kernel/btf/vmlinux\"");
	loaded = log_count(&sb, ": collecting every");
	printf("%zu plugins collecting; /sys/kernel/btf/vmlinux opened %zu times\n", loaded, opens);
	if (loaded < 2 || opens != 1) {
		dump_log(&sb);
		fail_msg("%zu plugins loaded, kernel BTF opened %zu times (want 1)", loaded, opens);
	}
	sandbox_cleanup(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_compaction_matches_tracefs, kill_live),
		cmocka_unit_test_teardown(test_kill9_between_pulls, kill_live),
		cmocka_unit_test_teardown(test_missing_config_exit_2, kill_live),
		cmocka_unit_test_teardown(test_unwritable_state_exit_2, kill_live),
		cmocka_unit_test_teardown(test_state_file_not_a_state_file_exit_2, kill_live),
		cmocka_unit_test_teardown(test_pins_without_state_report_from_start, kill_live),
		cmocka_unit_test_teardown(test_json_file_moved_or_deleted_reopened, kill_live),
		cmocka_unit_test_teardown(test_second_sigterm_during_flush, kill_live),
		cmocka_unit_test_teardown(test_failed_start_writes_nothing, kill_live),
		cmocka_unit_test_teardown(test_reload_and_drop_in, kill_live),
		cmocka_unit_test_teardown(test_self_telemetry, kill_live),
		cmocka_unit_test_teardown(test_self_telemetry_only_enabled, kill_live),
		cmocka_unit_test_teardown(test_top_live_view, kill_live),
		cmocka_unit_test_teardown(test_sink_where_port_zero, kill_live),
		cmocka_unit_test_teardown(test_reload_failure_undoes_sinks, kill_live),
		cmocka_unit_test_teardown(test_plugin_overwritten_in_place_runs_new_code,
					  kill_live),
		cmocka_unit_test_teardown(test_slow_drop_in_loads_when_complete, kill_live),
		cmocka_unit_test_teardown(test_duplicate_metric_drop_in_refused, kill_live),
		cmocka_unit_test_teardown(test_unreadable_plugin_dir_exit_2, kill_live),
		cmocka_unit_test_teardown(test_plugin_params_checked, kill_live),
		cmocka_unit_test_teardown(test_once_pulls_once, kill_live),
		cmocka_unit_test_teardown(test_idle_daemon_sleeps_between_pulls, kill_live),
		cmocka_unit_test_teardown(test_start_reads_kernel_btf_once, kill_live),
		cmocka_unit_test_teardown(test_round_wakes_loop_once, kill_live),
		cmocka_unit_test_teardown(test_drop_privileges_reaches_writer_threads, kill_live),
	};

	ktel_test_require_root("daemon end to end");
	/* KTEL_TEST_FILTER=name runs one test while working on it. */
	if (getenv("KTEL_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KTEL_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, sandbox_remove_all);
}
