// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The daemon's paths, from outside: a state_file that is a JSON sink's file
 * or one of its rotated names, or an existing file the state load refuses
 * (another program's JSON, an empty file, a symlink), is refused by
 * --check-config and by start alike (exit 2), the file left as it was. And
 * the fault hook: a malformed KTEL_TEST_FAULT is refused by both in a build
 * with fault injection, an armed one is shown by --check-config and by
 * `status`; a build without it ignores the variable with one warning.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>

#include "ktel_test.h"
#include "daemon_harness.h"

static const char lines[] = "{\"metric\":\"runq_latency\",\"seq\":1}\n"
			    "{\"metric\":\"runq_latency\",\"seq\":2}\n";

/* Run ktelemetryd --check-config on the sandbox's config, stderr to its log. */
static int check_config(const struct sandbox *sb)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(sb->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(fd, 2);
		execl(KTEL_DAEMON_BIN, KTEL_DAEMON_BIN, "--check-config", sb->config, (char *)NULL);
		_exit(127);
	}
	return daemon_wait(pid, 30);
}

/* A start that must be refused: --once 0 exits at once if it is not. */
static int start_once(struct sandbox *sb)
{
	return daemon_wait(daemon_start(sb, "--once", "0", NULL), 60);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static bool file_is(const char *path, const char *text)
{
	char buf[4096];
	size_t n;
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strcmp(buf, text) == 0;
}

/* An empty plugin directory in the sandbox: starts are fast. */
static void empty_plugins(const struct sandbox *sb, char *dir, size_t size)
{
	snprintf(dir, size, "%s/plugins", sb->dir);
	mkdir(dir, 0755);
}

/*
 * state_file is the JSON sink's own file: refused by both, before any state
 * save could replace the telemetry. With the file there (its lines stay)
 * and without it (start creates nothing there).
 */
static void test_state_file_is_sink_file(void **state)
{
	struct sandbox sb;
	char plugins[700];

	for (int exists = 0; exists < 2; exists++) {
		sandbox_init(&sb, "paths-samefile");
		empty_plugins(&sb, plugins, sizeof(plugins));
		snprintf(sb.state, sizeof(sb.state), "%s", sb.out);
		sandbox_write_config(&sb, plugins, "1s", "");
		if (exists)
			write_file(sb.out, lines);
		assert_int_equal(check_config(&sb), 2);
		assert_true(log_wait_for(&sb, "as state_file", 1));
		assert_int_equal(start_once(&sb), 2);
		if (exists)
			assert_true(file_is(sb.out, lines));
		else
			assert_int_equal(access(sb.out, F_OK), -1);
		sandbox_cleanup(&sb);
	}
}

/* state_file is a name the sink's rotation moves its file to. */
static void test_state_file_is_rotated_name(void **state)
{
	struct sandbox sb;
	char plugins[700];

	sandbox_init(&sb, "paths-rotated");
	empty_plugins(&sb, plugins, sizeof(plugins));
	/* The sink rotates with the default keep (5): out.jsonl.3 is one. */
	snprintf(sb.state, sizeof(sb.state), "%s.3", sb.out);
	{
		FILE *f = fopen(sb.config, "w");

		assert_non_null(f);
		fprintf(f,
			"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": "
			"\"%s\", \"control_socket\": \"%s/control.sock\", \"sinks\": {\"f\": "
			"{\"type\": \"json\", \"path\": \"%s\", \"rotate_bytes\": \"1MiB\"}}}\n",
			plugins, sb.pin_root, sb.state, sb.dir, sb.out);
		fclose(f);
	}
	assert_int_equal(check_config(&sb), 2);
	assert_true(log_wait_for(&sb, "rotates its file to", 1));
	assert_int_equal(start_once(&sb), 2);
	sandbox_cleanup(&sb);
}

/*
 * What the state load refuses without moving it (another program's JSON,
 * an empty file, a symlink to a state file) --check-config refuses too; the
 * file stays as it was and nothing is renamed *.corrupt-*.
 */
static void test_check_refuses_what_start_refuses(void **state)
{
	static const char *const kinds[] = {"foreign", "empty", "symlink"};
	struct sandbox sb;
	char plugins[700], target[700], aside[700];

	for (size_t k = 0; k < 3; k++) {
		sandbox_init(&sb, "paths-state");
		empty_plugins(&sb, plugins, sizeof(plugins));
		sandbox_write_config(&sb, plugins, "1s", "");
		if (k == 0) {
			write_file(sb.state, "{\"not\": \"a state file\"}\n");
		} else if (k == 1) {
			write_file(sb.state, "");
		} else {
			snprintf(target, sizeof(target), "%s/elsewhere.bin", sb.dir);
			write_file(target, "KTELDST1");
			assert_int_equal(symlink(target, sb.state), 0);
		}
		print_message("state_file: %s\n", kinds[k]);
		assert_int_equal(check_config(&sb), 2);
		assert_true(log_wait_for(&sb, "is not a delta state file", 1));
		assert_int_equal(start_once(&sb), 2);
		if (k == 0)
			assert_true(file_is(sb.state, "{\"not\": \"a state file\"}\n"));
		else if (k == 1)
			assert_true(file_is(sb.state, ""));
		else
			assert_true(file_is(target, "KTELDST1"));
		snprintf(aside, sizeof(aside), "ls %s | grep -q corrupt", sb.dir);
		assert_int_not_equal(system(aside), 0);
		sandbox_cleanup(&sb);
	}
}

/* A stream sink's socket on the state file, a JSON sink's file on the
 * control socket: one path, two uses, refused by both. */
static void test_socket_on_file_refused(void **state)
{
	struct sandbox sb;
	char plugins[700];
	FILE *f;

	sandbox_init(&sb, "paths-socket");
	empty_plugins(&sb, plugins, sizeof(plugins));
	f = fopen(sb.config, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\", "
		"\"control_socket\": \"%s/control.sock\", \"sinks\": {\"s\": {\"type\": "
		"\"stream\", \"socket\": \"%s\"}, \"j\": {\"type\": \"json\", \"path\": "
		"\"%s/control.sock\"}}}\n",
		plugins, sb.pin_root, sb.state, sb.dir, sb.state, sb.dir);
	fclose(f);
	assert_int_equal(check_config(&sb), 2);
	assert_true(log_wait_for(&sb, "sinks.s.socket: same path", 1));
	assert_true(log_wait_for(&sb, "sinks.j.path: same path", 1));
	assert_int_equal(start_once(&sb), 2);
	sandbox_cleanup(&sb);
}

/* How many times text occurs in the sandbox's log. */
static size_t log_count_of(const struct sandbox *sb, const char *text)
{
	char *log = ktel_test_slurp(sb->log);
	size_t n = 0;

	for (const char *at = log; (at = strstr(at, text)); at += strlen(text))
		n++;
	free(log);
	return n;
}

/*
 * What would stop a start on this machine beyond the document: a missing
 * plugin directory, one that is a file, a state file and a JSON sink file
 * whose directories cannot be made (a file is in the way), a stream socket
 * in a directory that does not exist. --check-config names every one with
 * its field, once; the start refuses with the same lines, each once, before
 * it touches anything.
 */
static void test_check_reports_what_stops_a_start(void **state)
{
	char want[5][1200], file[700];
	struct sandbox sb;
	FILE *f;

	sandbox_init(&sb, "paths-host");
	snprintf(file, sizeof(file), "%s/file", sb.dir);
	write_file(file, "in the way\n");
	f = fopen(sb.config, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s/no-such-dir\", \"%s\"], \"pin_root\": \"%s\", "
		"\"state_file\": \"%s/state.bin\", \"control_socket\": \"%s/control.sock\", "
		"\"sinks\": {\"j\": {\"type\": \"json\", \"path\": \"%s/out.jsonl\"}, "
		"\"s\": {\"type\": \"stream\", \"socket\": \"%s/gone/s.sock\"}}}\n",
		sb.dir, file, sb.pin_root, file, sb.dir, file, sb.dir);
	fclose(f);
	snprintf(want[0], sizeof(want[0]),
		 "plugin_dirs[0]: %s/no-such-dir: cannot read plugin directory: No such file",
		 sb.dir);
	snprintf(want[1], sizeof(want[1]),
		 "plugin_dirs[1]: %s: cannot read plugin directory: Not a directory", file);
	snprintf(want[2], sizeof(want[2]), "state_file: %s/state.bin: cannot read", file);
	snprintf(want[3], sizeof(want[3]), "sinks.j.path: %s/out.jsonl: %s is not a directory",
		 file, file);
	snprintf(want[4], sizeof(want[4]),
		 "sinks.s.socket: %s/gone/s.sock: cannot reach its directory %s/gone", sb.dir,
		 sb.dir);
	assert_int_equal(check_config(&sb), 2);
	assert_int_equal(start_once(&sb), 2);
	for (size_t i = 0; i < 5; i++) {
		/* Once from the check, once from the start: never twice in a run. */
		if (log_count_of(&sb, want[i]) != 2) {
			dump_log(&sb);
			fail_msg("expected twice in the log (check, start): %s", want[i]);
		}
	}
	/* The start refused before it made anything. */
	assert_int_not_equal(access(sb.pin_root, F_OK), 0);
	sandbox_cleanup(&sb);
}

/* Values the fault hook refuses: a sign, overflow, junk, unknown names, an
 * absurd delay. */
static const char *const malformed[] = {
	"routed:-1:kill",      "saved:18446744073709551615:kill",
	"saved:1:kill ",       "saved:1x:kill",
	"nowhere:1:kill",      "saved:1:explode",
	"routed:1:delay=-5",   "routed:1:delay=3600000",
	"routed:1:delay=10ms", "saved:0:kill",
};

/*
 * With fault injection compiled in: a malformed value stops --check-config
 * and start (exit 2, the reason in the log); an armed one is shown by both
 * and by status. Without it: the variable is ignored with one warning, the
 * daemon starts and status says it is ignored.
 */
static void test_fault_hook(void **state)
{
	struct sandbox sb;
	char plugins[700];
	json_t *st;
	const char *tf;
	pid_t pid;

	sandbox_init(&sb, "paths-fault");
	empty_plugins(&sb, plugins, sizeof(plugins));
	sandbox_write_config(&sb, plugins, "1s", "");
	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		setenv("KTEL_TEST_FAULT", malformed[i], 1);
#ifdef KTEL_FAULT_INJECTION
		print_message("refused: %s\n", malformed[i]);
		assert_int_equal(check_config(&sb), 2);
		assert_int_equal(start_once(&sb), 2);
#else
		assert_int_equal(check_config(&sb), 0);
#endif
	}
#ifdef KTEL_FAULT_INJECTION
	assert_true(log_wait_for(&sb, "the hit count must be a plain number", 1));
	assert_true(log_wait_for(&sb, "the delay must be a plain number", 1));
	assert_true(log_wait_for(&sb, "unknown point", 1));
#endif
	/* Armed (a hit never reached): shown by the check and by status. */
	setenv("KTEL_TEST_FAULT", "saved:1000000:delay=1", 1);
	assert_int_equal(check_config(&sb), 0);
#ifdef KTEL_FAULT_INJECTION
	assert_true(log_wait_for(&sb, "TEST FAULT INJECTION ARMED", 1));
#else
	assert_true(log_wait_for(&sb, "ignored: this build has no fault injection", 1));
#endif
	pid = daemon_start(&sb, NULL);
	unsetenv("KTEL_TEST_FAULT");
	assert_true(log_wait_for(&sb, "running with", 30));
	st = sandbox_status(&sb);
	tf = json_string_value(json_object_get(json_object_get(st, "daemon"), "test_fault"));
	assert_non_null(tf);
#ifdef KTEL_FAULT_INJECTION
	assert_non_null(strstr(tf, "saved:1000000:delay=1 armed"));
#else
	assert_non_null(strstr(tf, "ignored"));
#endif
	json_decref(st);
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 30), 0);
	sandbox_cleanup(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_state_file_is_sink_file),
		cmocka_unit_test(test_state_file_is_rotated_name),
		cmocka_unit_test(test_check_refuses_what_start_refuses),
		cmocka_unit_test(test_socket_on_file_refused),
		cmocka_unit_test(test_check_reports_what_stops_a_start),
		cmocka_unit_test(test_fault_hook),
	};

	ktel_test_require_root("test_paths");
	return cmocka_run_group_tests(tests, NULL, sandbox_remove_all);
}
