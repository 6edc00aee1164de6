// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Two machines of a fleet, one REAL Prometheus: two REAL daemons, each
 * with block_io_latency, a remote_write sink pushing into the one
 * Prometheus (--web.enable-remote-write-receiver) and a Prometheus sink
 * that Prometheus scrapes. Daemon A names itself with the label "device"
 * (the name of block_io_latency's own dimension), daemon B with
 * "instance". After O_DIRECT I/O on a loop device made here, PromQL finds
 * the device's series of both machines, distinct:
 *  - pushed by A: device="edge-a" (the configured identity) and
 *    exported_device="loopN" (the dimension, renamed as Prometheus renames
 *    a label that collides with a target label);
 *  - pushed by B: instance="edge-b", device="loopN";
 *  - scraped from A and from B: the same, next to Prometheus' own
 *    job/instance target labels;
 * and the daemon A, not B, warned about the collision, once per sink. The
 * scraped HELP is block_io_latency's descriptor text, as Prometheus' own
 * metadata API shows it.
 * And --check-config says the same before any start: the collision named
 * per sink, the check passing; config/examples/fleet.json has none.
 * Needs root, losetup, curl and prometheus.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon_harness.h"
#include "ktel_test.h"
#include "prom_server.h"

#define METRIC "ktel_block_io_latency_seconds_count"
#define IO_SIZE 4096
#define DESCRIPTION "Block request latency (issue to completion), per disk and operation"
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static pid_t pids[3]; /* daemon A, daemon B, prometheus */
static char loop_path[64];

static int teardown(void **state)
{
	for (size_t i = 0; i < N_OF(pids); i++)
		if (pids[i] > 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
			pids[i] = 0;
		}
	if (loop_path[0])
		ktel_test_run("losetup -d '%s'", loop_path);
	loop_path[0] = '\0';
	return sandbox_remove_all(state);
}

/* A loop device over an 8 MiB file in dir; its name (loopN) into name. */
static void loop_attach(const char *dir, char *name, size_t len)
{
	char cmd[800];
	FILE *p;

	assert_int_equal(ktel_test_run("truncate -s 8M '%s/disk.img'", dir), 0);
	snprintf(cmd, sizeof(cmd), "losetup --find --show '%s/disk.img'", dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (!fgets(loop_path, sizeof(loop_path), p))
		loop_path[0] = '\0';
	assert_int_equal(pclose(p), 0);
	loop_path[strcspn(loop_path, "\n")] = '\0';
	assert_non_null(strrchr(loop_path, '/'));
	snprintf(name, len, "%s", strrchr(loop_path, '/') + 1);
	(void)!system("udevadm settle -t 10 >/dev/null 2>&1");
}

/* n O_DIRECT writes of IO_SIZE on the loop device. */
static void direct_writes(int n)
{
	void *buf = NULL;
	int fd = open(loop_path, O_WRONLY | O_DIRECT | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(posix_memalign(&buf, IO_SIZE, IO_SIZE), 0);
	memset(buf, 0x5a, IO_SIZE);
	for (int i = 0; i < n; i++)
		assert_int_equal(pwrite(fd, buf, IO_SIZE, (off_t)i * IO_SIZE), IO_SIZE);
	free(buf);
	close(fd);
}

/* One machine: block_io_latency only, both sinks carrying labels. */
static void write_config(const struct sandbox *sb, unsigned prom_port, unsigned web,
			 const char *labels)
{
	FILE *f = fopen(sb->config, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"1s\",\n"
		" \"enable_new_plugins\": false,\n"
		" \"metrics\": {\"block_io_latency\": {\"enabled\": true}},\n"
		" \"sinks\": {\n"
		"  \"prom\": {\"type\": \"prometheus\", \"listen\": \"127.0.0.1\", \"port\": %u,\n"
		"            \"labels\": %s},\n"
		"  \"rw\": {\"type\": \"remote_write\", \"interval\": \"1s\", \"timeout\": \"2s\",\n"
		"          \"url\": \"http://127.0.0.1:%u/api/v1/write\", \"labels\": %s}}}\n",
		KTEL_PLUGIN_DIR, sb->pin_root, sb->state, sb->dir, prom_port, labels, web, labels);
	fclose(f);
}

/* The number of series a query selects, polled up to 30 s until there is one. */
static size_t series_within(const struct sandbox *sb, unsigned web, const char *query)
{
	size_t n = 0;

	for (int i = 0; i < 30 && !n; i++) {
		json_t *res = prom_query(sb, web, query);

		n = json_array_size(res);
		json_decref(res);
		if (!n)
			sleep(1);
	}
	return n;
}

/* How often the log holds text. */
static int log_count(const struct sandbox *sb, const char *text)
{
	char *log = ktel_test_slurp(sb->log);
	int n = 0;

	for (const char *p = log; p && (p = strstr(p, text)); p++)
		n++;
	free(log);
	return n;
}

static void test_two_identities_one_prometheus(void **state)
{
	unsigned web = prom_free_port(), ports[2];
	struct sandbox a, b;
	char dev[32], q[512];
	/* Each machine's series, pushed (no job) and scraped (job="ktel"):
	 * the selector, and the label that holds the loop device's name. */
	const struct {
		const char *what, *sel, *dev_label;
	} want[] = {
		{"A's pushed series", "job=\"\",device=\"edge-a\",instance=\"\"",
		 "exported_device"},
		{"B's pushed series", "job=\"\",instance=\"edge-b\"", "device"},
		{"A's scraped series", "job=\"ktel\",device=\"edge-a\"", "exported_device"},
		{"B's scraped series", "job=\"ktel\",exported_instance=\"edge-b\"", "device"},
	};

	(void)state;
	ports[0] = prom_free_port();
	do
		ports[1] = prom_free_port();
	while (ports[1] == ports[0]);
	sandbox_init(&a, "fleet-a");
	sandbox_init(&b, "fleet-b");
	loop_attach(a.dir, dev, sizeof(dev));
	write_config(&a, ports[0], web, "{\"device\": \"edge-a\"}");
	write_config(&b, ports[1], web, "{\"instance\": \"edge-b\"}");
	prom_server_start_targets(&a, web, ports, 2, "--web.enable-remote-write-receiver",
				  &pids[2]);
	pids[0] = daemon_start(&a, NULL);
	pids[1] = daemon_start(&b, NULL);
	for (int i = 0; i < 2; i++)
		if (!log_wait_for(i ? &b : &a, "metric block_io_latency: collecting", 30)) {
			dump_log(i ? &b : &a);
			fail_msg("daemon %c: block_io_latency not collecting", 'A' + i);
		}
	direct_writes(100);

	for (size_t i = 0; i < N_OF(want); i++) {
		snprintf(q, sizeof(q), METRIC "{%s,%s=\"%s\"}", want[i].sel, want[i].dev_label,
			 dev);
		if (series_within(&a, web, q) == 0)
			fail_msg("no %s in Prometheus: %s", want[i].what, q);
	}
	/* Both machines saw the same writes: the same count, kept apart. */
	snprintf(q, sizeof(q), "sum(%s{job=\"\",device=\"edge-a\",exported_device=\"%s\"})", METRIC,
		 dev);
	assert_true(prom_query_value(&a, web, q) >= 100);
	snprintf(q, sizeof(q), "sum(%s{job=\"\",instance=\"edge-b\",device=\"%s\"})", METRIC, dev);
	assert_true(prom_query_value(&a, web, q) >= 100);

	/* The plugin's words as HELP, in the scrape and as Prometheus keeps them. */
	{
		char path[700], *text;

		snprintf(path, sizeof(path), "%s/metadata.json", a.dir);
		for (int i = 0; i < 30; i++) {
			assert_int_equal(ktel_test_run("curl -sf -o '%s' 'http://127.0.0.1:%u/api/v1/"
						       "metadata?metric=ktel_block_io_latency_seconds'",
						       path, web),
					 0);
			text = ktel_test_slurp(path);
			if (strstr(text, DESCRIPTION))
				break;
			free(text);
			text = NULL;
			sleep(1);
		}
		if (!text)
			fail_msg("Prometheus' metadata of ktel_block_io_latency_seconds lacks the "
				 "descriptor's text \"%s\"",
				 DESCRIPTION);
		free(text);
	}

	/* A warned once per sink, at start; B has nothing to warn about. */
	assert_int_equal(log_count(&a,
				   "metric block_io_latency has a dimension \"device\" too: the "
				   "configured label keeps the name, the dimension is sent as "
				   "\"exported_device\""),
			 2);
	assert_int_equal(log_count(&a, "sinks.rw.labels: metric block_io_latency"), 1);
	assert_int_equal(log_count(&a, "sinks.prom.labels: metric block_io_latency"), 1);
	assert_int_equal(log_count(&b, "has a dimension"), 0);

	for (int i = 0; i < 2; i++) {
		kill(pids[i], SIGTERM);
		assert_int_equal(daemon_wait(pids[i], 20), 0);
		pids[i] = 0;
	}
	kill(pids[2], SIGTERM);
	waitpid(pids[2], NULL, 0);
	pids[2] = 0;
	ktel_test_run("losetup -d '%s'", loop_path);
	loop_path[0] = '\0';
	sandbox_cleanup(&a);
	sandbox_cleanup(&b);
}

/* ktelemetryd --check-config FILE: its exit status, stderr into *ret_err. */
static int check_config(const struct sandbox *sb, const char *file, char **ret_err)
{
	char err[700];
	int rc;

	snprintf(err, sizeof(err), "%s/check.err", sb->dir);
	rc = ktel_test_run("'%s' --check-config '%s' > /dev/null 2> '%s'", KTEL_DAEMON_BIN, file,
			   err);
	*ret_err = ktel_test_slurp(err);
	return rc;
}

static void test_check_config_names_collisions(void **state)
{
	struct sandbox sb;
	char *err, want[300];

	(void)state;
	sandbox_init(&sb, "fleet-check");
	write_config(&sb, 9, 9, "{\"device\": \"edge-a\", \"fleet\": \"f\"}");
	assert_int_equal(check_config(&sb, sb.config, &err), 0);
	for (int i = 0; i < 2; i++) {
		snprintf(want, sizeof(want),
			 "%s: warning: sinks.%s.labels: metric block_io_latency has a dimension "
			 "\"device\" too: the configured label keeps the name, the dimension is "
			 "sent as \"exported_device\"\n",
			 sb.config, i ? "rw" : "prom");
		if (!strstr(err, want))
			fail_msg("--check-config did not say\n%s\nit said:\n%s", want, err);
	}
	assert_null(strstr(err, "\"fleet\""));
	free(err);
	/* The shipped fleet example names its machine with a label no metric has. */
	assert_int_equal(check_config(&sb, KTEL_SOURCE_DIR "/config/examples/fleet.json", &err), 0);
	assert_null(strstr(err, "has a dimension"));
	free(err);
	sandbox_cleanup(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_check_config_names_collisions, teardown),
		cmocka_unit_test_teardown(test_two_identities_one_prometheus, teardown),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: needs root (BPF, loop devices)\n");
		return 77;
	}
	if (ktel_test_run("prometheus --version > /dev/null 2>&1") != 0 ||
	    ktel_test_run("curl --version > /dev/null 2>&1") != 0 ||
	    ktel_test_run("losetup --version > /dev/null 2>&1") != 0) {
		fprintf(stderr, "FAIL: prometheus, curl and losetup must run (tools/test installs "
				"them)\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
