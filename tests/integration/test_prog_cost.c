// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the plugins' programs cost, as `ktelemetryctl status` and
 * self-telemetry show it, against the kernel's own counters. The real
 * daemon runs compaction_duration (its programs fire when the test writes
 * /proc/sys/vm/compact_memory):
 *
 * - with kernel.bpf_stats_enabled=1, status's run counts grow with the
 *   compactions the test triggers and lie between two reads the test makes
 *   itself of the same program ids (bpf_obj_get_info_by_fd, what bpftool
 *   prog show prints); each plugin has a cost with its share of one CPU,
 *   status a total, the text shows them; self-telemetry has the counters
 *   ktel_prog_run_time and ktel_prog_runs with plugin and program;
 * - with it 0, status says once that bpf_stats is off and shows no counts;
 * - self_telemetry.bpf_stats makes the daemon hold the statistics on
 *   itself (BPF_ENABLE_STATS), with the sysctl still 0.
 *
 * Every test puts the sysctl back as it found it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <bpf/bpf.h>

#include "daemon_harness.h"

#define PLUGIN "compaction_duration"
#define STATS_SYSCTL "/proc/sys/kernel/bpf_stats_enabled"

static pid_t live = -1;
static char stats_was = '0';

/* Write '0' or '1' to the sysctl; return what it held. */
static char stats_set(char on)
{
	char was = '0';
	FILE *f = fopen(STATS_SYSCTL, "r+");

	assert_non_null(f);
	assert_int_equal(fread(&was, 1, 1, f), 1);
	rewind(f);
	assert_int_equal(fputc(on, f), on);
	fclose(f);
	return was;
}

static int save_stats(void **state)
{
	FILE *f = fopen(STATS_SYSCTL, "r");

	(void)state;
	if (!f || fread(&stats_was, 1, 1, f) != 1)
		stats_was = '0';
	if (f)
		fclose(f);
	return 0;
}

/* Teardown: the daemon stopped, the sysctl as it was, the sandboxes gone. */
static int restore(void **state)
{
	if (live > 0) {
		kill(live, SIGKILL);
		waitpid(live, NULL, 0);
		live = -1;
	}
	stats_set(stats_was);
	return sandbox_remove_all(state);
}

/* The daemon on a sandbox holding only PLUGIN, self-telemetry every second;
 * returns once its control socket answers. */
static void start(struct sandbox *sb, const char *name, const char *self_extra)
{
	char plugins[600], sock[700], self[200];

	sandbox_init(sb, name);
	snprintf(plugins, sizeof(plugins), "%s/plugins", sb->dir);
	mkdir(plugins, 0755);
	assert_int_equal(ktel_test_run("install -m 0644 %s/%s.so %s", KTEL_PLUGIN_DIR, PLUGIN,
				       plugins),
			 0);
	snprintf(self, sizeof(self), "\"self_telemetry\": {\"interval\": \"1s\"%s}", self_extra);
	sandbox_write_config(sb, plugins, "60s", self);
	live = daemon_start(sb, NULL);
	snprintf(sock, sizeof(sock), "%s/control.sock", sb->dir);
	for (int i = 0; i < 400 && access(sock, F_OK) != 0; i++)
		usleep(50000);
	if (access(sock, F_OK) != 0) {
		dump_log(sb);
		fail_msg("the daemon did not open its control socket");
	}
}

static void stop(struct sandbox *sb)
{
	kill(live, SIGTERM);
	assert_int_equal(daemon_wait(live, 30), 0);
	live = -1;
}

static const json_t *find_named(const json_t *a, const char *name)
{
	size_t i;
	json_t *o;

	json_array_foreach(a, i, o)
		if (strcmp(json_string_value(json_object_get(o, "name")) ?: "", name) == 0)
			return o;
	return NULL;
}

static const json_t *plugin_of(const json_t *st)
{
	const json_t *p = find_named(json_object_get(st, "plugins"), PLUGIN);

	assert_non_null(p);
	return p;
}

/* The kernel's run count of program id, read by the test itself. */
static uint64_t kernel_run_cnt(uint32_t id)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id);

	assert_true(fd >= 0);
	memset(&info, 0, sizeof(info));
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	close(fd);
	return info.run_cnt;
}

static json_int_t jint(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* `ktelemetryctl status` as text. */
static char *status_text(const struct sandbox *sb)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/status.txt", sb->dir);
	assert_int_equal(ktel_test_run("%s/tools/ktelemetryctl --socket %s/control.sock status "
				       "> %s",
				       KTEL_BINARY_DIR, sb->dir, path),
			 0);
	return ktel_test_slurp(path);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Every program of PLUGIN that is attached, with counts that agree with the
 * kernel's, growing with the compactions; the plugin's cost and the total. */
static void check_counts_follow_kernel(struct sandbox *sb, const char *by)
{
	json_t *st1 = sandbox_status(sb), *st2;
	const json_t *progs1 = json_object_get(plugin_of(st1), "programs"), *p, *cost;
	uint64_t before[8] = {0}, after[8] = {0};
	json_int_t grew = 0;
	size_t i, n = json_array_size(progs1);

	assert_true(n >= 1 && n <= 8);
	assert_true(json_is_true(json_object_get(json_object_get(st1, "daemon"), "bpf_stats")));
	assert_string_equal(json_string_value(json_object_get(json_object_get(st1, "daemon"),
							      "bpf_stats_by")),
			    by);
	for (int k = 0; k < 5; k++) {
		trigger_compaction();
		usleep(100000);
	}
	json_array_foreach(progs1, i, p)
		if (json_is_true(json_object_get(p, "attached")))
			before[i] = kernel_run_cnt((uint32_t)jint(p, "prog_id"));
	st2 = sandbox_status(sb);
	json_array_foreach(progs1, i, p) {
		const json_t *q;

		if (!json_is_true(json_object_get(p, "attached")))
			continue;
		after[i] = kernel_run_cnt((uint32_t)jint(p, "prog_id"));
		q = find_named(json_object_get(plugin_of(st2), "programs"),
			       json_string_value(json_object_get(p, "name")));
		assert_non_null(q);
		assert_int_equal(jint(q, "prog_id"), jint(p, "prog_id"));
		/* Read between the test's two reads of the same program. */
		assert_true((uint64_t)jint(q, "run_cnt") >= before[i]);
		assert_true((uint64_t)jint(q, "run_cnt") <= after[i]);
		assert_true(jint(q, "run_cnt") >= jint(p, "run_cnt"));
		grew += jint(q, "run_cnt") - jint(p, "run_cnt");
		if (jint(q, "run_cnt"))
			assert_true(json_real_value(json_object_get(q, "ns_per_run")) > 0);
		printf("%s: %lld runs, %lld ns (kernel %llu..%llu)\n",
		       json_string_value(json_object_get(q, "name")), (long long)jint(q, "run_cnt"),
		       (long long)jint(q, "run_time_ns"), (unsigned long long)before[i],
		       (unsigned long long)after[i]);
	}
	/* Five compactions ran each program at least once more. */
	assert_true(grew > 0);
	cost = json_object_get(plugin_of(st2), "cost");
	assert_true(json_is_object(cost));
	assert_true(jint(cost, "run_cnt") > 0);
	assert_true(jint(cost, "window_run_time_ns") > 0);
	assert_true(jint(cost, "window_run_time_ns") <= jint(cost, "run_time_ns"));
	/* The window is the time since the first status (about half a second). */
	assert_true(json_real_value(json_object_get(cost, "window_s")) > 0.3);
	assert_true(json_real_value(json_object_get(cost, "window_s")) < 30);
	assert_true(json_real_value(json_object_get(cost, "cpu_share")) > 0);
	assert_true(json_real_value(json_object_get(cost, "cpu_share")) < 1);
	assert_true(json_real_value(json_object_get(st2, "programs_cpu_share")) >=
		    json_real_value(json_object_get(cost, "cpu_share")));
	json_decref(st1);
	json_decref(st2);
}

/* Lines of the JSON output naming metric and PLUGIN's plugin dimension. */
static size_t out_lines(const struct sandbox *sb, const char *metric)
{
	char *out = ktel_test_slurp(sb->out), *line, *save = NULL;
	char want[200];
	size_t n = 0;

	snprintf(want, sizeof(want), "\"metric\":\"%s\"", metric);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, want) && strstr(line, "\"plugin\":\"" PLUGIN "\"") &&
		    strstr(line, "\"program\":\"") && strstr(line, "\"type\":\"counter\""))
			n++;
	free(out);
	return n;
}

static void test_stats_on_counts_follow_kernel(void **state)
{
	struct sandbox sb;
	char *text;

	stats_set('1');
	start(&sb, "cost-on", "");
	check_counts_follow_kernel(&sb, "sysctl");
	text = status_text(&sb);
	assert_non_null(strstr(text, "bpf_stats on (sysctl"));
	assert_non_null(strstr(text, "    cost: "));
	assert_non_null(strstr(text, "programs' cost: "));
	assert_non_null(strstr(text, " runs, "));
	free(text);
	/* Two self-telemetry rounds with the programs attached. */
	usleep(2500000);
	stop(&sb);
	assert_true(out_lines(&sb, "ktel_prog_run_time") >= 1);
	assert_true(out_lines(&sb, "ktel_prog_runs") >= 1);
	sandbox_cleanup(&sb);
}

static void test_stats_off_said_once(void **state)
{
	json_t *st;
	const json_t *p;
	struct sandbox sb;
	char *text;
	size_t i;

	stats_set('0');
	start(&sb, "cost-off", "");
	st = sandbox_status(&sb);
	assert_false(json_is_true(json_object_get(json_object_get(st, "daemon"), "bpf_stats")));
	assert_null(json_object_get(st, "programs_cpu_share"));
	assert_null(json_object_get(plugin_of(st), "cost"));
	json_array_foreach(json_object_get(plugin_of(st), "programs"), i, p) {
		assert_null(json_object_get(p, "run_cnt"));
		assert_null(json_object_get(p, "run_time_ns"));
	}
	json_decref(st);
	text = status_text(&sb);
	assert_int_equal(count(text, "bpf_stats off"), 1);
	assert_int_equal(count(text, " runs, "), 0);
	assert_int_equal(count(text, "cost:"), 0);
	free(text);
	usleep(1500000);
	stop(&sb);
	assert_int_equal(out_lines(&sb, "ktel_prog_runs"), 0);
	sandbox_cleanup(&sb);
}

static void test_daemon_holds_stats(void **state)
{
	struct sandbox sb;
	char *text;

	stats_set('0');
	start(&sb, "cost-held", ", \"bpf_stats\": true");
	check_counts_follow_kernel(&sb, "daemon");
	text = status_text(&sb);
	assert_non_null(strstr(text, "bpf_stats on (held by the daemon"));
	free(text);
	stop(&sb);
	sandbox_cleanup(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_stats_on_counts_follow_kernel, restore),
		cmocka_unit_test_teardown(test_stats_off_said_once, restore),
		cmocka_unit_test_teardown(test_daemon_holds_stats, restore),
	};

	ktel_test_require_root("test_prog_cost");
	if (access(STATS_SYSCTL, W_OK) != 0) {
		printf("SKIP test_prog_cost: no writable %s\n", STATS_SYSCTL);
		return KTEL_TEST_SKIP;
	}
	return cmocka_run_group_tests(tests, save_stats, sandbox_remove_all);
}
