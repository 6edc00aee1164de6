// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The remote_write sink of a REAL daemon pushing to the REAL Prometheus
 * server (--web.enable-remote-write-receiver), next to a Prometheus sink on
 * the same daemon:
 * - PromQL over the pushed series gives what a scrape of the Prometheus
 *   sink shows (the same names, labels and cumulative values);
 * - Prometheus stopped for several push intervals and started again on the
 *   same storage and port: every push made meanwhile arrives (they fit in
 *   the queue), none is dropped, and the values still agree;
 * - the PromQL of docs/sinks.md ("as your tools see it") answers.
 * Needs root, curl and prometheus (Debian: curl, prometheus).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon_harness.h"
#include "ktel_test.h"
#include "prom_server.h"

#define METRIC "ktel_compaction_duration_seconds"
#define INSTANCE "rw-test"

static pid_t daemon_pid, prom_pid;

static void write_config(const struct sandbox *sb, unsigned web)
{
	FILE *f = fopen(sb->config, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"1s\",\n"
		" \"self_telemetry\": {\"interval\": \"1s\"},\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"},\n"
		"  \"prom\": {\"type\": \"prometheus\", \"listen\": \"127.0.0.1\", \"port\": 0},\n"
		"  \"rw\": {\"type\": \"remote_write\", \"interval\": \"1s\", \"timeout\": \"2s\",\n"
		"          \"url\": \"http://127.0.0.1:%u/api/v1/write\",\n"
		"          \"labels\": {\"instance\": \"" INSTANCE "\"}}}}\n",
		KTEL_PLUGIN_DIR, sb->pin_root, sb->state, sb->dir, sb->out, web);
	fclose(f);
}

/* The port the daemon's Prometheus sink serves on (waits up to 10 s). */
/* Trigger compactions for about s seconds. */
static void compact_for(int s)
{
	for (int i = 0; i < s * 4; i++) {
		trigger_compaction();
		usleep(250000);
	}
}

/* The sum of the values of the exposition lines that start with prefix
 * (and, when le is given, hold le="<le>"); -1 when none. */
static double text_sum(const char *text, const char *prefix, const char *le)
{
	char want_le[64];
	double sum = -1;

	snprintf(want_le, sizeof(want_le), "le=\"%s\"", le ? le : "");
	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *end = strchr(l, '\n'), *sp;

		if (strncmp(l, prefix, strlen(prefix)) != 0)
			continue;
		if (le && (!(sp = strstr(l, want_le)) || (end && sp > end)))
			continue;
		sp = strstr(l, "} ");
		sp = sp && (!end || sp < end) ? sp + 2 : strchr(l, ' ') + 1;
		sum = (sum < 0 ? 0 : sum) + strtod(sp, NULL);
	}
	return sum;
}

/*
 * Does PromQL over the pushed series agree with a scrape of the Prometheus
 * sink: sum of _count, of _sum, and of each bucket? Returns the number of
 * disagreements (0: all agree); says the first on stderr when verbose.
 */
static int compare_once(const struct sandbox *sb, unsigned web, unsigned port, bool verbose,
			double *ret_count)
{
	char path[700], q[256];
	json_t *res;
	char *text;
	int bad = 0;
	double a, b;

	snprintf(path, sizeof(path), "%s/scrape.txt", sb->dir);
	assert_int_equal(ktel_test_run("curl -sS -f --max-time 5 -o '%s' "
				       "http://127.0.0.1:%u/metrics",
				       path, port),
			 0);
	text = ktel_test_slurp(path);
	a = prom_query_value(sb, web, "sum(" METRIC "_count{instance=\"" INSTANCE "\"})");
	b = text_sum(text, METRIC "_count", NULL);
	*ret_count = a;
	if (a != b || a <= 0) {
		if (verbose)
			fprintf(stderr, "_count: pushed %g, scraped %g\n", a, b);
		bad++;
	}
	a = prom_query_value(sb, web, "sum(" METRIC "_sum{instance=\"" INSTANCE "\"})");
	b = text_sum(text, METRIC "_sum", NULL);
	if (b >= 0 && a != b) {
		if (verbose)
			fprintf(stderr, "_sum: pushed %.17g, scraped %.17g\n", a, b);
		bad++;
	}
	res = prom_query(sb, web, "sum by (le) (" METRIC "_bucket{instance=\"" INSTANCE "\"})");
	if (json_array_size(res) < 2)
		bad++;
	for (size_t i = 0; i < json_array_size(res); i++) {
		json_t *e = json_array_get(res, i);
		const char *le = json_string_value(
			json_object_get(json_object_get(e, "metric"), "le"));
		double v = strtod(json_string_value(json_array_get(json_object_get(e, "value"), 1)),
				  NULL);

		snprintf(q, sizeof(q), METRIC "_bucket");
		b = text_sum(text, q, le);
		if (v != b) {
			if (verbose)
				fprintf(stderr, "bucket le=%s: pushed %g, scraped %g\n", le, v, b);
			bad++;
		}
	}
	json_decref(res);
	free(text);
	return bad;
}

/* Agreement within 10 s: a pull, a push and a scrape may be a second apart. */
static double expect_agreement(const struct sandbox *sb, unsigned web, unsigned port)
{
	double count = 0;

	for (int i = 0; i < 10; i++) {
		if (compare_once(sb, web, port, false, &count) == 0)
			return count;
		sleep(1);
	}
	compare_once(sb, web, port, true, &count);
	fail_msg("PromQL over the pushed series disagrees with the scrape (above)");
	return 0;
}

static void stop(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGTERM);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
}

static int teardown(void **state)
{
	(void)state;
	if (daemon_pid > 0)
		kill(daemon_pid, SIGKILL);
	if (prom_pid > 0)
		kill(prom_pid, SIGKILL);
	if (daemon_pid > 0)
		waitpid(daemon_pid, NULL, 0);
	if (prom_pid > 0)
		waitpid(prom_pid, NULL, 0);
	daemon_pid = prom_pid = 0;
	return sandbox_remove_all(state);
}

/* Pushed samples of the machine's _count with timestamps in (from, to]. */
static double samples_between(const struct sandbox *sb, unsigned web, time_t from, time_t to)
{
	char q[256];

	snprintf(q, sizeof(q),
		 "count_over_time(" METRIC "_count{instance=\"" INSTANCE "\"}[%llds] "
		 "@ %lld)",
		 (long long)(to - from), (long long)to);
	return prom_query_value(sb, web, q);
}

static void test_push_matches_scrape_and_survives_receiver_restart(void **state)
{
	unsigned web = prom_free_port(), port;
	struct sandbox sb;
	double before, after, during, dropped;
	time_t down, up;

	(void)state;
	sandbox_init(&sb, "remote-write");
	write_config(&sb, web);
	prom_server_start(&sb, web, 0, "--web.enable-remote-write-receiver", &prom_pid);
	daemon_pid = daemon_start(&sb, NULL);
	port = daemon_prom_port(&sb);
	compact_for(3);
	before = expect_agreement(&sb, web, port);

	/* The receiver goes away for 6 push intervals, with new events. */
	stop(&prom_pid);
	down = time(NULL);
	compact_for(6);
	up = time(NULL);
	prom_server_start(&sb, web, 0, "--web.enable-remote-write-receiver", &prom_pid);
	/* The queue drains within one backoff (at most a few seconds here). */
	for (int i = 0; i < 30 && samples_between(&sb, web, down, up) < (double)(up - down) - 1;
	     i++)
		sleep(1);
	during = samples_between(&sb, web, down, up);
	if (during < (double)(up - down) - 1)
		fail_msg("%.0f pushed samples from the %llds Prometheus was down, expected one a "
			 "second",
			 during, (long long)(up - down));
	after = expect_agreement(&sb, web, port);
	assert_true(after > before);
	/* The sink says so too: failed attempts, nothing dropped. */
	assert_true(prom_query_value(&sb, web, "max(ktel_sink_errors_total{sink=\"rw\"})") > 0);
	dropped = prom_query_value(&sb, web, "max(ktel_sink_dropped_total{sink=\"rw\"})");
	assert_true(dropped == 0 || dropped == -1); /* -1: never dropped, so never emitted */
	/* docs/sinks.md, "as your tools see it". */
	assert_true(prom_query_value(&sb, web,
				     "histogram_quantile(0.9, sum by (le) (rate(" METRIC
				     "_bucket{instance=\"" INSTANCE "\"}[1m])))") > 0);
	assert_true(prom_query_value(&sb, web,
				     "sum by (instance) (increase(" METRIC "_count[1m]))") > 0);
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 20), 0);
	daemon_pid = 0;
	assert_true(log_wait_for(&sb, "sink rw: closed: ", 1));
	stop(&prom_pid);
	sandbox_cleanup(&sb);
}

/*
 * A machine without libcurl or libsnappy (they are dlopened only for this
 * sink): the daemon refuses to start (exit 2) with a message naming the
 * sink, the library and the Debian packages, and writes nothing. The
 * library is hidden in a private mount namespace (/dev/null bound over it).
 */
static void refused_without(const char *soname, const char *what)
{
	struct sandbox sb;
	char log[1200];
	char *text;
	int rc;

	sandbox_init(&sb, "remote-write-no-lib");
	write_config(&sb, prom_free_port());
	snprintf(log, sizeof(log), "%s/no-lib.log", sb.dir);
	rc = ktel_test_run("unshare -m sh -c 'lib=$(ldconfig -p | awk -v n=%s \"\\$1 == n "
			   "{ print \\$NF; exit }\"); [ -n \"$lib\" ] && mount --bind /dev/null "
			   "\"$lib\" && exec %s --config %s' 2>%s",
			   soname, KTEL_DAEMON_BIN, sb.config, log);
	text = ktel_test_slurp(log);
	assert_non_null(text);
	printf("without %s: exit %d: %s", soname, rc, text);
	assert_int_equal(rc, 2);
	assert_non_null(strstr(text, "sinks.rw: the remote_write sink needs"));
	assert_non_null(strstr(text, what));
	assert_non_null(strstr(text, "apt-get install libcurl4 libsnappy1v5"));
	/* A refused start leaves the outputs as they were. */
	assert_int_equal(access(sb.state, F_OK), -1);
	free(text);
	sandbox_cleanup(&sb);
}

static void test_missing_libraries_refused(void **state)
{
	(void)state;
	refused_without("libcurl.so.4", "libcurl (libcurl.so.4)");
	refused_without("libsnappy.so.1", "libsnappy (libsnappy.so.1)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_missing_libraries_refused, teardown),
		cmocka_unit_test_teardown(test_push_matches_scrape_and_survives_receiver_restart,
					  teardown),
	};

	if (ktel_test_run("prometheus --version > /dev/null 2>&1") != 0 ||
	    ktel_test_run("curl --version > /dev/null 2>&1") != 0) {
		fprintf(stderr, "FAIL: prometheus and curl must run (tools/test installs them)\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
