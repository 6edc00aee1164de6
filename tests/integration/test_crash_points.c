// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Crash consistency of the JSON sink (docs/sinks.md "Delivery
 * guarantees"): a real daemon with the compaction plugin and a JSON sink
 * with fsync on is killed (SIGKILL, injected with KTEL_TEST_FAULT) at each
 * point of a pull's way out - records handed to the sinks, written but not
 * fsynced, fsynced but the state not saved, state saved - restarted, and
 * stopped. The file's total of compaction_duration must then equal the
 * kernel's own count of mm_compaction_end (a tracefs instance) exactly: no
 * window lost, none written twice; every line parses (jansson and jq).
 * Then the same oracle over a few kill -9 at random moments.
 *
 * Compactions come from the test (/proc/sys/vm/compact_memory, with
 * proactive compaction off), only while a daemon collects, and the tracefs
 * instance is paused between a daemon's death and its successor collecting:
 * a detached program counts nothing, so the oracle and the map agree (a
 * compaction of someone else's in the few ms around a kill or an attach can
 * still tell them apart: rerun under the kernel-test lock).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ktel_test.h"
#include "map_total.h"
#include "tracefs_oracle.h"
#include "daemon_harness.h"

#define COMPACTION_PIN "map_compaction_duration_compaction_duration_map"
#define PROACTIVE "/proc/sys/vm/compaction_proactiveness"

static char old_proactive[32];
/* The daemon a failed assertion left running (killed by the teardown: it
 * holds ctest's output pipe open). */
static pid_t live_pid;

/* Only compaction_duration, 1 s pulls (or interval), fsync on, no
 * self-telemetry: the JSON writes are the compaction windows only, so the
 * n-th write is the n-th window. */
static void write_config(struct sandbox *sb, const char *interval)
{
	FILE *f = fopen(sb->config, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"%s\",\n"
		" \"enable_new_plugins\": false,\n"
		" \"metrics\": {\"compaction_duration\": {\"enabled\": true}},\n"
		" \"self_telemetry\": {\"enabled\": false},\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\", \"fsync\": true}}}\n",
		KTEL_PLUGIN_DIR, sb->pin_root, sb->state, sb->dir, interval, sb->out);
	fclose(f);
}

/* Start a daemon (with KTEL_TEST_FAULT=fault when not NULL) and wait until
 * it collects; the previous run's log is kept as daemon.log.<run>. */
static pid_t start_collecting(struct sandbox *sb, const char *fault, int run)
{
	char old[700];
	pid_t pid;

	snprintf(old, sizeof(old), "%s.%d", sb->log, run);
	rename(sb->log, old);
	if (fault)
		setenv("KTEL_TEST_FAULT", fault, 1);
	live_pid = pid = daemon_start(sb, NULL);
	unsetenv("KTEL_TEST_FAULT");
	if (!log_wait_for(sb, "metric compaction_duration: collecting", 20)) {
		dump_log(sb);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("daemon did not start collecting compaction_duration");
	}
	return pid;
}

static bool wait_for_file(const char *path, int timeout_s)
{
	for (int i = 0; i < timeout_s * 20; i++) {
		if (access(path, F_OK) == 0)
			return true;
		usleep(50000);
	}
	return false;
}

/*
 * Stop the last daemon, then compare the file with tracefs and the map.
 * Exact against tracefs when every compaction was the test's own; when
 * another task compacted too (another test outside the kernel-test lock,
 * kswapd waking kcompactd), those may fall in a gap no program watched, so
 * then the file must hold exactly what the map counted and at least every
 * compaction of the test's own.
 */
static void stop_and_check(struct sandbox *sb, pid_t pid, struct tracefs_counter *tc,
			   const char *what)
{
	uint64_t sum, own, other, total;
	size_t records;
	int rc;

	kill(pid, SIGTERM);
	rc = daemon_wait(pid, 30);
	live_pid = 0;
	assert_int_equal(tracefs_stop_by_pid(tc, "mm_compaction_end:", getpid(), &own, &other), 0);
	if (rc != 0)
		dump_log(sb);
	assert_int_equal(rc, 0);
	assert_int_equal(sum_metric(sb, "compaction_duration", &sum, &records), 0);
	assert_int_equal(ktel_test_run("jq -e . %s >/dev/null", sb->out), 0);
	total = ktel_test_pinned_total(sb->pin_root, COMPACTION_PIN);
	printf("%s: file %llu in %zu records, tracefs %llu (%llu of others), map %llu\n", what,
	       (unsigned long long)sum, records, (unsigned long long)(own + other),
	       (unsigned long long)other, (unsigned long long)total);
	assert_true(own >= 3);
	assert_int_equal(sum, total);
	if (!other) {
		assert_int_equal(sum, own);
		return;
	}
	printf("%s: %llu compactions of other tasks: exact only against the map\n", what,
	       (unsigned long long)other);
	assert_true(sum >= own && sum <= own + other);
}

/* SIGTERM saved the final state after the final flush: a start after it
 * cuts nothing and adds nothing but what the kernel saw happen while that
 * start ran (another task's compaction, on a busy machine). */
static void check_final_state_saved(struct sandbox *sb)
{
	uint64_t before, after, own, other;
	struct tracefs_counter tc;
	size_t records;
	char old[700];
	int rc;

	assert_int_equal(sum_metric(sb, "compaction_duration", &before, &records), 0);
	snprintf(old, sizeof(old), "%s.final", sb->log);
	rename(sb->log, old);
	assert_int_equal(tracefs_start(&tc, "compaction/mm_compaction_end"), 0);
	rc = daemon_wait(daemon_start(sb, "--once", "0", NULL), 30);
	assert_int_equal(tracefs_stop_by_pid(&tc, "mm_compaction_end:", getpid(), &own, &other), 0);
	if (rc != 0)
		dump_log(sb);
	assert_int_equal(rc, 0);
	assert_false(log_wait_for(sb, "written after the last saved state", 0));
	assert_int_equal(sum_metric(sb, "compaction_duration", &after, &records), 0);
	assert_true(after >= before);
	if (after - before > own + other)
		fail_msg("the start after SIGTERM added %llu, the kernel saw %llu compactions",
			 (unsigned long long)(after - before), (unsigned long long)(own + other));
}

/*
 * Kill at the second time point is reached: the first window is written,
 * fsynced and its state saved; the second dies at point. The restarted
 * daemon reports it (again, for the points after the write: the file's copy
 * is cut at start) and a third window; SIGTERM ends it.
 */
static void crash_at(const char *point, int cut_expected)
{
	char fault[64], name[64];
	struct tracefs_counter tc;
	struct sandbox sb;
	pid_t pid;
	int rc;

	snprintf(name, sizeof(name), "crash-%s", point);
	snprintf(fault, sizeof(fault), "%s:2:kill", point);
	sandbox_init(&sb, name);
	write_config(&sb, "1s");
	assert_int_equal(tracefs_start(&tc, "compaction/mm_compaction_end"), 0);
	pid = start_collecting(&sb, fault, 0);
	assert_true(log_wait_for(&sb, "TEST FAULT INJECTION ARMED", 1));
	trigger_compaction();
	/* The first window's state is saved only after its fsync. */
	if (!wait_for_file(sb.state, 10)) {
		dump_log(&sb);
		fail_msg("no state saved after the first window");
	}
	trigger_compaction();
	rc = daemon_wait(pid, 15);
	if (rc != 128 + SIGKILL)
		dump_log(&sb);
	assert_int_equal(rc, 128 + SIGKILL);
	assert_true(log_wait_for(&sb, "point", 0));
	/* No program is attached until the restart collects: compactions of
	 * others (kswapd waking kcompactd under load) count on neither side. */
	tracefs_set_on(&tc, false);

	/* Tracing resumes before the programs attach, so that what tracefs
	 * counts always covers what the map can count. */
	tracefs_set_on(&tc, true);
	pid = start_collecting(&sb, NULL, 1);
	/* Written but not covered by the saved state: cut at start. (After
	 * "routed" the write may have begun on the thread pool: either.) */
	if (cut_expected >= 0)
		assert_int_equal(log_wait_for(&sb, "written after the last saved state", 0),
				 cut_expected);
	trigger_compaction();
	sleep(2);
	stop_and_check(&sb, pid, &tc, point);
	check_final_state_saved(&sb);
	sandbox_cleanup(&sb);
}

static void test_kill_after_routed(void **state)
{
	crash_at("routed", -1);
}

static void test_kill_after_write_before_fsync(void **state)
{
	crash_at("written", 1);
}

static void test_kill_after_fsync_before_save(void **state)
{
	crash_at("synced", 1);
}

static void test_kill_after_save(void **state)
{
	crash_at("saved", 0);
}

/* kill -9 at random moments of a daemon pulling every 100 ms while
 * compactions run, restarted each time. */
static void test_kill9_at_random(void **state)
{
	struct tracefs_counter tc;
	struct sandbox sb;
	pid_t pid;

	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	sandbox_init(&sb, "crash-random");
	write_config(&sb, "100ms");
	assert_int_equal(tracefs_start(&tc, "compaction/mm_compaction_end"), 0);
	pid = start_collecting(&sb, NULL, 0);
	trigger_compaction();
	/* A saved state first: without one, a restart takes the reused map's
	 * counts as its baseline and reports nothing of them (by design). */
	assert_true(wait_for_file(sb.state, 10));
	for (int run = 1; run <= 6; run++) {
		int ms = rand() % 1500;

		for (int t = 0; t < ms; t += 150) {
			trigger_compaction();
			usleep((rand() % 150) * 1000);
		}
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		tracefs_set_on(&tc, false);
		printf("run %d: killed after %d ms\n", run, ms);
		/* On again before the programs attach: a compaction of another
		 * task between the attach and this would count in the map only. */
		tracefs_set_on(&tc, true);
		pid = start_collecting(&sb, NULL, run);
	}
	trigger_compaction();
	sleep(1);
	stop_and_check(&sb, pid, &tc, "random kill -9");
	check_final_state_saved(&sb);
	sandbox_cleanup(&sb);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The state file is written off the loop: while a save stalls (a disk that
 * takes seconds per fsync, injected as a 5 s delay after the write), the
 * control socket answers, the next windows are written, and the state saved
 * at the end is the newest.
 */
static void test_slow_save_leaves_loop_running(void **state)
{
	struct tracefs_counter tc;
	struct sandbox sb;
	char sock[600];
	uint64_t t0;
	pid_t pid;
	int rc;

	sandbox_init(&sb, "slow-save");
	write_config(&sb, "1s");
	snprintf(sock, sizeof(sock), "%s/control.sock", sb.dir);
	assert_int_equal(tracefs_start(&tc, "compaction/mm_compaction_end"), 0);
	pid = start_collecting(&sb, "saved:1:delay=5000", 0);
	trigger_compaction();
	if (!log_wait_for(&sb, "point saved reached", 10)) {
		dump_log(&sb);
		fail_msg("no state save reached the stall");
	}
	/* The loop is free while the pool thread sleeps in the save. */
	t0 = mono_ms();
	rc = ktel_test_run("timeout 3 %s/tools/ktelemetryctl --socket %s status >/dev/null",
			   KTEL_BINARY_DIR, sock);
	printf("status during the stalled save: exit %d after %llu ms\n", rc,
	       (unsigned long long)(mono_ms() - t0));
	assert_int_equal(rc, 0);
	assert_true(mono_ms() - t0 < 3000);
	/* Windows go on being written meanwhile. */
	trigger_compaction();
	sleep(2);
	stop_and_check(&sb, pid, &tc, "slow save");
	check_final_state_saved(&sb);
	sandbox_cleanup(&sb);
}

/*
 * SIGTERM stops counting before the final pull: a compaction during the
 * shutdown (here while the final save is stalled 3 s) reaches neither the
 * map nor the file, so the file holds exactly what the map counted and a
 * start after it adds nothing. (Before, the programs stayed attached until
 * the exit: the map counted it, no line did, and the next start reported it
 * as a window of the next run.)
 */
static void test_nothing_counted_after_final_pull(void **state)
{
	uint64_t sum, total;
	struct sandbox sb;
	size_t records;
	pid_t pid;
	int rc;

	sandbox_init(&sb, "after-final-pull");
	write_config(&sb, "60s"); /* the final pull is the first */
	pid = start_collecting(&sb, "saved:1:delay=3000", 0);
	trigger_compaction();
	kill(pid, SIGTERM);
	if (!log_wait_for(&sb, "point saved reached", 10)) {
		dump_log(&sb);
		fail_msg("the final save did not reach the stall");
	}
	trigger_compaction(); /* the daemon is still running, its save stalled */
	rc = daemon_wait(pid, 30);
	live_pid = 0;
	if (rc != 0)
		dump_log(&sb);
	assert_int_equal(rc, 0);
	assert_int_equal(sum_metric(&sb, "compaction_duration", &sum, &records), 0);
	total = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN);
	printf("after the final pull: file %llu in %zu records, map %llu\n",
	       (unsigned long long)sum, records, (unsigned long long)total);
	assert_true(sum > 0);
	assert_int_equal(sum, total);
	check_final_state_saved(&sb);
	sandbox_cleanup(&sb);
}

static int kill_live(void **state)
{
	if (live_pid > 0) {
		kill(live_pid, SIGKILL);
		waitpid(live_pid, NULL, 0);
		live_pid = 0;
	}
	return 0;
}

static int setup(void **state)
{
	sysctl_set(PROACTIVE, "0", old_proactive, sizeof(old_proactive));
	return 0;
}

static int teardown(void **state)
{
	if (old_proactive[0])
		sysctl_set(PROACTIVE, old_proactive, NULL, 0);
	return sandbox_remove_all(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_kill_after_routed, kill_live),
		cmocka_unit_test_teardown(test_kill_after_write_before_fsync, kill_live),
		cmocka_unit_test_teardown(test_kill_after_fsync_before_save, kill_live),
		cmocka_unit_test_teardown(test_kill_after_save, kill_live),
		cmocka_unit_test_teardown(test_kill9_at_random, kill_live),
		cmocka_unit_test_teardown(test_slow_save_leaves_loop_running, kill_live),
		cmocka_unit_test_teardown(test_nothing_counted_after_final_pull, kill_live),
	};

	ktel_test_require_root("crash points");
	if (getenv("KTEL_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KTEL_TEST_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
