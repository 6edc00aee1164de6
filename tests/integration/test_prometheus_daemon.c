// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Prometheus sink of a REAL daemon, as Prometheus users read it: every
 * built-in plugin loaded, self-telemetry and bpf_stats on, several pulls,
 * then `promtool check metrics` on what curl scraped must print nothing
 * (a valid exposition); slow HTTP clients cannot lock scrapes out.
 * Needs root, curl and promtool (Debian: curl, prometheus).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
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
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon_harness.h"
#include "ktel_test.h"
#include "prom_server.h"
#include "map_total.h"

/* The sandbox config: pull interval, a Prometheus sink on port (0: a free one). */
static void write_config_interval(const struct sandbox *sb, unsigned port, const char *interval)
{
	FILE *f = fopen(sb->config, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"%s\",\n"
		" \"self_telemetry\": {\"interval\": \"1s\"},\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"},\n"
		"  \"prom\": {\"type\": \"prometheus\", \"listen\": \"127.0.0.1\", \"port\": %u}}}\n",
		KTEL_PLUGIN_DIR, sb->pin_root, sb->state, sb->dir, interval, sb->out, port);
	fclose(f);
}

static void write_config_port(const struct sandbox *sb, unsigned port)
{
	write_config_interval(sb, port, "1s");
}


/* The port the daemon's Prometheus sink said it serves on; 0 if none yet. */
/* Scrape into dir/name.txt with curl; returns curl's exit status. */
static int scrape(const struct sandbox *sb, unsigned port, const char *name, int max_s)
{
	return ktel_test_run("curl -sS -f --max-time %d -o '%s/%s.txt' http://127.0.0.1:%u/metrics",
			     max_s, sb->dir, name, port);
}

/* promtool check metrics on dir/name.txt must say nothing and exit 0. */
static char *check_promtool(const struct sandbox *sb, const char *name)
{
	char path[700], out[700], *msgs;
	int st;

	snprintf(path, sizeof(path), "%s/%s.txt", sb->dir, name);
	snprintf(out, sizeof(out), "%s/%s.promtool", sb->dir, name);
	st = ktel_test_run("promtool check metrics < '%s' > '%s' 2>&1", path, out);
	msgs = ktel_test_slurp(out);
	if (st != 0 || *msgs)
		fail_msg("promtool check metrics on %s (exit %d):\n%s", path, st, msgs);
	free(msgs);
	return ktel_test_slurp(path);
}

static void require_tools(void)
{
	static const char *const tools[] = {"curl --version", "promtool --version"};

	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		if (ktel_test_run("%s > /dev/null 2>&1", tools[i]) == 0)
			continue;
		fprintf(stderr,
			"FAIL: `%s` does not run (tools/test installs curl and "
			"prometheus)\n",
			tools[i]);
		exit(1);
	}
}

/* kernel.bpf_stats_enabled: set it to on, return what it was ('0'/'1'). */
static char bpf_stats_set(char on)
{
	char was = '0';
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "r+");

	assert_non_null(f);
	assert_int_equal(fread(&was, 1, 1, f), 1);
	rewind(f);
	fputc(on, f);
	assert_int_equal(fclose(f), 0);
	return was;
}

/* What a failed test leaves: its daemon and Prometheus (killed) and
 * bpf_stats (put back). */
static pid_t daemon_pid, prom_pid;
static char stats_was;

static int teardown(void **state)
{
	(void)state;
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGKILL);
		waitpid(daemon_pid, NULL, 0);
	}
	daemon_pid = 0;
	if (prom_pid > 0) {
		kill(prom_pid, SIGKILL);
		waitpid(prom_pid, NULL, 0);
	}
	prom_pid = 0;
	if (stats_was)
		bpf_stats_set(stats_was);
	stats_was = 0;
	return sandbox_remove_all(state);
}

/*
 * A real daemon, every built-in plugin, self-telemetry and bpf_stats on
 * (the sysctl the daemon reads; BPF_ENABLE_STATS's fd does not show there,
 * so it is set and put back), several pulls: promtool accepts the
 * exposition without a word.
 */
static void test_real_daemon_passes_promtool(void **state)
{
	struct sandbox sb;
	unsigned port;
	char *text;

	(void)state;
	stats_was = bpf_stats_set('1');
	assert_true(stats_was == '0' || stats_was == '1');
	sandbox_init(&sb, "prom-daemon");
	write_config_port(&sb, 0);
	daemon_pid = daemon_start(&sb, NULL);
	port = daemon_prom_port(&sb);
	trigger_compaction();
	sleep(4); /* several pulls and self-telemetry rounds */
	trigger_compaction();
	sleep(1);
	assert_int_equal(scrape(&sb, port, "real", 10), 0);
	bpf_stats_set(stats_was);
	stats_was = 0;
	text = check_promtool(&sb, "real");
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 20), 0);
	daemon_pid = 0;
	/* What promtool checked holds the self-telemetry named by their units. */
	assert_non_null(strstr(text, "\n# TYPE ktel_pull_duration_seconds gauge\n"));
	assert_non_null(strstr(text, "\n# TYPE ktel_prog_run_time_per_run_seconds gauge\n"));
	assert_non_null(strstr(text, "\n# TYPE ktel_prog_recursion_misses_total counter\n"));
	assert_non_null(strstr(text, "\n# TYPE ktel_invalid_durations_total counter\n"));
	assert_non_null(strstr(text, "\n# TYPE ktel_pull_errors_total counter\n"));
	assert_non_null(strstr(text, "\n# HELP ktel_sink_errors_total ktelemetry metric "
				     "ktel_sink_errors (unit: errors)\n"));
	assert_null(strstr(text, "_us"));
	assert_null(strstr(text, "_ns"));
	free(text);
	sandbox_cleanup(&sb);
}

/* A TCP connection from src (a 127/8 address: each is its own peer) to port. */
static int slow_client(const char *src, unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	inet_pton(AF_INET, src, &a.sin_addr);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	a.sin_port = htons(port);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Has the server ended fd's connection (EOF or reset)? */
static bool server_closed(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

#define N_SLOW 16

/*
 * 16 slow-header clients (one header byte per second) from one peer and 8
 * from another do not keep a scrape from a third out, and none outlives the
 * request deadline although each keeps sending.
 */
static void test_slow_clients_do_not_block_scrapes(void **state)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
				  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	int fds[N_SLOW + 8], closed_at[N_SLOW + 8];
	struct sandbox sb;
	unsigned port;
	int open_after_scrape = 0;

	(void)state;
	sandbox_init(&sb, "prom-slow");
	write_config_port(&sb, 0);
	daemon_pid = daemon_start(&sb, NULL);
	port = daemon_prom_port(&sb);
	for (int i = 0; i < N_SLOW + 8; i++) {
		fds[i] = slow_client(i < N_SLOW ? "127.0.0.1" : "127.0.0.3", port);
		closed_at[i] = -1;
	}
	for (int t = 0; t < 14; t++) {
		for (int i = 0; i < N_SLOW + 8; i++) {
			if (closed_at[i] < 0 && server_closed(fds[i]))
				closed_at[i] = t;
			if (closed_at[i] < 0)
				(void)!send(fds[i], req + t, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		if (t == 3) {
			/* A scrape from a third peer, while every slow client sends. */
			assert_int_equal(ktel_test_run("curl -sS -f --interface 127.0.0.2 --max-time 5 "
						       "-o '%s/slow.txt' http://127.0.0.1:%u/metrics",
						       sb.dir, port),
					 0);
			for (int i = 0; i < N_SLOW + 8; i++)
				open_after_scrape += closed_at[i] < 0 && !server_closed(fds[i]);
		}
		sleep(1);
	}
	for (int i = 0; i < N_SLOW + 8; i++) {
		if (closed_at[i] < 0 && server_closed(fds[i]))
			closed_at[i] = 14;
		if (closed_at[i] < 0)
			fail_msg("slow client %d still connected after 14 s of one byte a second",
				 i);
		close(fds[i]);
	}
	/* All were admitted (no per-peer limit; slots to spare), then cut by
	 * the deadline. */
	assert_int_equal(open_after_scrape, N_SLOW + 8);
	assert_int_equal(scrape(&sb, port, "after", 10), 0);
	/* Each served slow client was cut by the deadline, and counted. */
	{
		char path[700], *after;

		snprintf(path, sizeof(path), "%s/after.txt", sb.dir);
		after = ktel_test_slurp(path);
		assert_non_null(
			strstr(after,
			       "ktel_prometheus_sink_connections_cut_total{sink=\"prom\"} 24\n"));
		free(after);
	}
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 20), 0);
	daemon_pid = 0;
	sandbox_cleanup(&sb);
}

/* 20 peers (127.0.0.10..29), 4 slow clients each: more than the 64 slots. */
#define HOLD_PEERS 20
#define HOLD_EACH 4
#define HOLD (HOLD_PEERS * HOLD_EACH)

/* Reopen every holder the server closed; each sends one more header byte
 * (t-th) at most once a second. */
static void hold_slots(int *fds, unsigned port, int t)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
	char src[32];

	for (int i = 0; i < HOLD; i++) {
		if (fds[i] >= 0 && !server_closed(fds[i])) {
			(void)!send(fds[i], t < (int)sizeof(req) - 1 ? req + t : "a", 1,
				    MSG_NOSIGNAL | MSG_DONTWAIT);
			continue;
		}
		if (fds[i] >= 0)
			close(fds[i]);
		snprintf(src, sizeof(src), "127.0.0.%d", 10 + i / HOLD_EACH);
		fds[i] = slow_client(src, port);
	}
}

/* Read fd's whole HTTP answer (to EOF, 10 s at most): did it say 200 and
 * end with the exposition's last series? */
static bool read_ok_answer(int fd)
{
	static char buf[4 << 20];
	size_t len = 0;
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){.tv_sec = 10},
		   sizeof(struct timeval));
	while (len < sizeof(buf) - 1 && (n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	return strncmp(buf, "HTTP/1.1 200", 12) == 0 &&
	       strstr(buf, "\nprocess_start_time_seconds ") != NULL;
}

/*
 * 5 rounds of 20 scrapes from src at once (scrapers behind one address):
 * all 20 connections are open and have sent their request before any
 * answer is read. How many failed.
 */
static int parallel_scrapes(unsigned port, const char *src)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				  "Connection: close\r\n\r\n";
	int fds[20], failed = 0;

	for (int round = 0; round < 5; round++) {
		for (int i = 0; i < 20; i++) {
			fds[i] = slow_client(src, port);
			(void)!send(fds[i], req, sizeof(req) - 1, MSG_NOSIGNAL);
		}
		for (int i = 0; i < 20; i++) {
			failed += !read_ok_answer(fds[i]);
			close(fds[i]);
		}
	}
	return failed;
}

/*
 * Slow clients from 20 peers keep more connections open than there are
 * slots, reopening each one the server closes. Meanwhile a real Prometheus
 * (scrape timeout 1 s) scrapes every second and never misses, a scrape
 * from a new peer each second succeeds, and 100 scrapes from one peer, 20
 * at a time (scrapers behind one NAT), all succeed: the slow ones are
 * evicted to make room.
 */

/* The daemon stops cleanly on SIGTERM, then Prometheus goes, then the
 * sandbox. */
static void stop_daemon_and_prometheus(struct sandbox *sb)
{
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 20), 0);
	daemon_pid = 0;
	kill(prom_pid, SIGTERM);
	waitpid(prom_pid, NULL, 0);
	prom_pid = 0;
	sandbox_cleanup(sb);
}
static void test_held_slots_do_not_block_scrapes(void **state)
{
	unsigned port = prom_free_port(), web = prom_free_port();
	int fds[HOLD], failed;
	struct sandbox sb;
	double up_min, up_n, evicted;
	char *text, path[700];

	(void)state;
	sandbox_init(&sb, "prom-held");
	write_config_port(&sb, port);
	daemon_pid = daemon_start(&sb, NULL);
	daemon_prom_port(&sb);
	prom_server_start(&sb, web, port, NULL, &prom_pid);
	/* Prometheus up before the slots are taken. */
	for (int i = 0; i < 100 && prom_query_value(&sb, web, "up{job=\"ktel\"}") != 1; i++)
		usleep(200000);
	assert_true(prom_query_value(&sb, web, "up{job=\"ktel\"}") == 1);
	/* Scrapers behind one address, in parallel: no per-peer limit refuses them. */
	failed = parallel_scrapes(port, "127.0.0.200");
	if (failed)
		fail_msg("%d of 100 parallel scrapes from one peer failed", failed);
	for (int i = 0; i < HOLD; i++)
		fds[i] = -1;
	for (int t = 0; t < 3; t++) {
		hold_slots(fds, port, t);
		sleep(1);
	}
	/* 15 s of held slots (past the 10 s request deadline, so the holders
	 * reopen too): a scrape from a new peer each second. */
	for (int t = 3; t < 18; t++) {
		hold_slots(fds, port, t);
		if (ktel_test_run("curl -sS -f --interface 127.0.0.%d --max-time 3 -o '%s/held.txt' "
				  "http://127.0.0.1:%u/metrics",
				  100 + t, sb.dir, port) != 0)
			fail_msg("a scrape from 127.0.0.%d failed while the slots were held",
				 100 + t);
		usleep(500000);
	}
	/* Prometheus scraped every second of it, each within its 1 s timeout. */
	up_n = prom_query_value(&sb, web, "count_over_time(up{job=\"ktel\"}[14s])");
	up_min = prom_query_value(&sb, web, "min_over_time(up{job=\"ktel\"}[14s])");
	if (up_n < 10 || up_min != 1)
		fail_msg("Prometheus: %.0f scrapes in 14 s, up at least %.0f", up_n, up_min);
	/* And while the slots are held. */
	hold_slots(fds, port, 18);
	failed = parallel_scrapes(port, "127.0.0.201");
	if (failed)
		fail_msg("%d of 100 parallel scrapes from one peer failed (slots held)", failed);
	/* Every holder reconnected just now, inside its grace as the scrapes
	 * are: the scrapes, whole requests, are still not the ones evicted. */
	for (int i = 0; i < HOLD; i++) {
		close(fds[i]);
		fds[i] = -1;
	}
	hold_slots(fds, port, 19);
	failed = parallel_scrapes(port, "127.0.0.202");
	if (failed)
		fail_msg("%d of 100 parallel scrapes from one peer failed (holders just "
			 "reconnected)",
			 failed);
	for (int i = 0; i < HOLD; i++)
		close(fds[i]);
	/* The room was made by eviction, and counted. */
	assert_int_equal(scrape(&sb, port, "after", 10), 0);
	snprintf(path, sizeof(path), "%s/after.txt", sb.dir);
	text = ktel_test_slurp(path);
	evicted = -1;
	{
		const char *p = strstr(text, "ktel_prometheus_sink_connections_evicted_total{sink="
					     "\"prom\"} ");

		if (p)
			evicted = strtod(strchr(p, '}') + 2, NULL);
	}
	free(text);
	printf("held slots: %.0f Prometheus scrapes in 14 s, all up; %.0f connections evicted\n",
	       up_n, evicted);
	assert_true(evicted >= HOLD - 64);
	stop_daemon_and_prometheus(&sb);
}

#define COUNT "ktel_compaction_duration_seconds_count"
#define COMPACTION_PIN "map_compaction_duration_compaction_duration_map"

/* Trigger compactions for about s seconds. */
static void compact_for(int s)
{
	for (int i = 0; i < s * 4; i++) {
		trigger_compaction();
		usleep(250000);
	}
}

/*
 * Real Prometheus scraping the real daemon across a daemon restart: the raw
 * counter never goes back (no resets, every sample >= the one before), and
 * at the end Prometheus's count lies between the kernel map's totals read
 * before and after the last pull + scrape (the documented bound: one pull
 * interval + one scrape interval behind). The PromQL of docs/sinks.md
 * ("as your tools see it") runs here too.
 */
static void test_real_prometheus_across_restart(void **state)
{
	unsigned port = prom_free_port(), web = prom_free_port();
	uint64_t k_before, k_after;
	double before_restart, after_restart, last;
	struct sandbox sb;
	json_t *res, *values;
	size_t i;

	(void)state;
	sandbox_init(&sb, "prom-restart");
	write_config_port(&sb, port);
	prom_server_start(&sb, web, port, NULL, &prom_pid);
	daemon_pid = daemon_start(&sb, NULL);
	daemon_prom_port(&sb);
	compact_for(4);
	sleep(3); /* a pull and a scrape after the last compaction */
	before_restart = prom_query_value(&sb, web, "sum(" COUNT ")");
	assert_true(before_restart > 0);
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 20), 0);
	/* Events while no daemon runs: the next one's totals include them. */
	compact_for(2);
	daemon_pid = daemon_start(&sb, NULL);
	sleep(3);
	after_restart = prom_query_value(&sb, web, "sum(" COUNT ")");
	if (after_restart < before_restart)
		fail_msg("after the restart Prometheus counts %.0f, before it %.0f", after_restart,
			 before_restart);
	compact_for(3);
	k_before = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN);
	sleep(3);
	last = prom_query_value(&sb, web, "sum(" COUNT ")");
	k_after = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN);
	if (last < (double)k_before || last > (double)k_after)
		fail_msg("Prometheus counts %.0f, the kernel map %" PRIu64 "..%" PRIu64, last,
			 k_before, k_after);
	assert_true(last > after_restart);
	/* Every raw sample across the restart: never lower than the one before. */
	res = prom_query(&sb, web, COUNT "[5m]");
	assert_true(json_array_size(res) >= 1);
	values = json_object_get(json_array_get(res, 0), "values");
	assert_true(json_array_size(values) >= 5);
	for (i = 1; i < json_array_size(values); i++) {
		double a = strtod(json_string_value(
					  json_array_get(json_array_get(values, i - 1), 1)),
				  NULL);
		double b = strtod(json_string_value(json_array_get(json_array_get(values, i), 1)),
				  NULL);

		if (b < a)
			fail_msg("sample %zu went back: %.0f after %.0f", i, b, a);
	}
	json_decref(res);
	assert_true(prom_query_value(&sb, web, "sum(resets(" COUNT "[5m]))") == 0);
	assert_true(prom_query_value(&sb, web, "sum(increase(" COUNT "[5m]))") > 0);
	/* docs/sinks.md, "as your tools see it". */
	assert_true(prom_query_value(&sb, web,
				     "histogram_quantile(0.9, sum by (le) "
				     "(rate(ktel_compaction_duration_seconds_bucket[1m])))") > 0);
	assert_true(prom_query_value(&sb, web, "sum(rate(" COUNT "[1m]))") > 0);
	assert_true(prom_query_value(&sb, web, "max(process_start_time_seconds{job=\"ktel\"})") >
		    0);
	stop_daemon_and_prometheus(&sb);
}

/* The value of an unlabelled series in an exposition; -1 when absent. */
static double series_value(const char *text, const char *series)
{
	char want[200];
	const char *p;

	snprintf(want, sizeof(want), "\n%s ", series);
	p = strstr(text, want);
	return p ? strtod(p + strlen(want), NULL) : -1;
}

/*
 * A scrape right after start, with the pull interval of linux-server.json
 * (1 min), shows the series at their cumulative values, although no event
 * happened since the previous daemon stopped: no empty page until the first
 * interval.
 */
static void test_scrape_right_after_start(void **state)
{
	struct sandbox sb;
	uint64_t k_before, k_after;
	unsigned port;
	double count;
	char *text;

	(void)state;
	sandbox_init(&sb, "prom-start");
	write_config_interval(&sb, 0, "1s");
	daemon_pid = daemon_start(&sb, NULL);
	daemon_prom_port(&sb);
	compact_for(2);
	sleep(2);
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 20), 0);
	assert_true(ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN) > 0);

	write_config_interval(&sb, 0, "60s");
	(void)!truncate(sb.log, 0);
	k_before = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN);
	daemon_pid = daemon_start(&sb, NULL);
	port = daemon_prom_port(&sb);
	/* Started: the control socket is made right after the plugins are
	 * loaded; the sink served only its own counters until then. */
	{
		char sock[700];
		struct stat st;
		int i;

		snprintf(sock, sizeof(sock), "%s/control.sock", sb.dir);
		for (i = 0; i < 400 && stat(sock, &st) != 0; i++)
			usleep(50000);
		assert_true(i < 400);
	}
	usleep(300000);
	assert_int_equal(scrape(&sb, port, "start", 10), 0);
	k_after = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN);
	text = check_promtool(&sb, "start");
	count = series_value(text, COUNT);
	if (count < (double)k_before || count > (double)k_after)
		fail_msg("first scrape: %s = %.0f, the kernel map %" PRIu64 "..%" PRIu64, COUNT,
			 count, k_before, k_after);
	/* Every enabled accumulator metric with keys has its family there. */
	assert_non_null(strstr(text, "\n# TYPE ktel_runq_latency_seconds histogram\n"));
	free(text);
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 20), 0);
	daemon_pid = 0;
	sandbox_cleanup(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_real_daemon_passes_promtool, teardown),
		cmocka_unit_test_teardown(test_slow_clients_do_not_block_scrapes, teardown),
		cmocka_unit_test_teardown(test_held_slots_do_not_block_scrapes, teardown),
		cmocka_unit_test_teardown(test_real_prometheus_across_restart, teardown),
		cmocka_unit_test_teardown(test_scrape_right_after_start, teardown),
	};

	ktel_test_require_root("test_prometheus_daemon");
	require_tools();
	return cmocka_run_group_tests(tests, NULL, teardown);
}
