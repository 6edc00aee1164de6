// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The statsd sink with its default tag style against a real Netdata (1.37,
 * Debian's netdata package) using the shipped chart config
 * config/netdata/statsd.d/ktelemetry.conf. The test starts its own netdata:
 * own config/cache/lib/log directories in a mkdtemp directory, statsd on a
 * free UDP port, the web API on a free TCP port, -D (foreground) as root,
 * every data collector off. It sends a few windows of one histogram and
 * reads netdata's API back:
 *   - /api/v1/charts has one chart ktel.compaction_duration whose dimensions
 *     are the buckets sent (from the first non-empty one to le_Inf);
 *   - /api/v1/data for that chart shows, per dimension, the cumulative
 *     bucket count of a window (le_Inf = the count).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>
#include <uv.h>

#include "ktel_test.h"
#include "sink_test.h"
#include "statsd_server.h"
#include "statsd/statsd_sink.h"
#include "units.h"

#define NETDATA "/usr/sbin/netdata"
#define CHART "ktel.compaction_duration"
#define CHART_CONF KTEL_SOURCE_DIR "/config/netdata/statsd.d/ktelemetry.conf"

static const struct ktel_sink_ops *ops = &ktel_statsd_sink_ops;

struct netdata {
	char dir[256];
	pid_t pid;
	uint16_t udp_port, web_port;
};

static struct netdata nd = {.pid = -1};

static void write_conf(const struct netdata *n)
{
	char path[512], text[4096];

	snprintf(text, sizeof(text),
		 "[global]\n  run as user = root\n  memory mode = ram\n  update every = 1\n"
		 "  hostname = ktel-test\n"
		 "[directories]\n  config = %1$s/conf\n  stock config = /usr/lib/netdata/conf.d\n"
		 "  cache = %1$s/cache\n  lib = %1$s/lib\n  log = %1$s/log\n  run = %1$s/run\n"
		 "  home = %1$s\n"
		 "[logs]\n  error = %1$s/log/error.log\n  access = none\n  debug = none\n"
		 "[web]\n  bind to = 127.0.0.1:%2$u\n"
		 "[plugins]\n  enable running new plugins = no\n  proc = no\n  diskspace = no\n"
		 "  cgroups = no\n  tc = no\n  idlejitter = no\n  timex = no\n  checks = no\n"
		 "  apps = no\n  python.d = no\n  charts.d = no\n  go.d = no\n  ebpf = no\n"
		 "  statsd = yes\n"
		 "[statsd]\n  enabled = yes\n  bind to = udp:127.0.0.1:%3$u\n"
		 "  update every (flushInterval) = 1\n"
		 "  create private charts for metrics matching = !*\n"
		 "[health]\n  enabled = no\n[ml]\n  enabled = no\n",
		 n->dir, n->web_port, n->udp_port);
	snprintf(path, sizeof(path), "%s/conf/netdata.conf", n->dir);
	statsd_write_file(path, text);
	/* No anonymous statistics from a test instance. */
	snprintf(path, sizeof(path), "%s/conf/.opt-out-from-anonymous-statistics", n->dir);
	statsd_write_file(path, "");
}

/* GET path from the instance's API; NULL when it does not answer. */
static json_t *api(const struct netdata *n, const char *path)
{
	char cmd[1024];
	FILE *f;
	json_t *j;

	snprintf(cmd, sizeof(cmd), "curl -sf --max-time 2 'http://127.0.0.1:%u%s'", n->web_port,
		 path);
	f = popen(cmd, "r");
	assert_non_null(f);
	j = json_loadf(f, 0, NULL);
	pclose(f);
	return j;
}

static void netdata_start(struct netdata *n)
{
	char cmd[1024], conf[512];
	json_t *info = NULL;

	snprintf(n->dir, sizeof(n->dir), "%s/netdata-XXXXXX", KTEL_BINARY_DIR);
	assert_non_null(mkdtemp(n->dir));
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %1$s/conf/statsd.d %1$s/cache %1$s/lib %1$s/log "
		 "%1$s/run && cp '%2$s' %1$s/conf/statsd.d/",
		 n->dir, CHART_CONF);
	assert_int_equal(statsd_run(cmd), 0);
	n->udp_port = statsd_free_port(SOCK_DGRAM);
	n->web_port = statsd_free_port(SOCK_STREAM);
	write_conf(n);
	snprintf(conf, sizeof(conf), "%s/conf/netdata.conf", n->dir);
	n->pid = fork();
	assert_true(n->pid >= 0);
	if (n->pid == 0) {
		char out[600];
		int fd;

		snprintf(out, sizeof(out), "%s/log/stdout.log", n->dir);
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(NETDATA, NETDATA, "-D", "-c", conf, "-u", "root", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 150 && !info; i++) {
		usleep(100000);
		info = api(n, "/api/v1/info");
	}
	if (!info)
		fail_msg("netdata did not answer on 127.0.0.1:%u within 15s (see %s/log)",
			 n->web_port, n->dir);
	json_decref(info);
}

static void netdata_stop(struct netdata *n)
{
	if (n->pid > 0) {
		kill(n->pid, SIGTERM);
		for (int i = 0; i < 100 && waitpid(n->pid, NULL, WNOHANG) == 0; i++)
			usleep(100000);
		kill(n->pid, SIGKILL);
		waitpid(n->pid, NULL, 0);
		n->pid = -1;
	}
	if (n->dir[0]) {
		ktel_test_rm_rf(n->dir);
		n->dir[0] = 0;
	}
}

/* A window of compaction_duration (us): 3 values <= 16us, 4 <= 64us, 2 over. */
static struct ktel_record window(void)
{
	struct ktel_record r = {
		.type = KTEL_RECORD_HISTOGRAM,
		.metric = "compaction_duration",
		.unit = "us",
	};

	r.hist.delta.scheme = KTEL_HIST_LOG2;
	r.hist.delta.n_buckets = KTEL_HIST_BUCKETS;
	r.hist.delta.counts[4] = 3;
	r.hist.delta.counts[6] = 4;
	r.hist.delta.counts[31] = 2;
	return r;
}

/* The dimension names the shipped config makes, and their values per window. */
static uint64_t expected_value(const char *name, const struct ktel_record *r)
{
	const struct ktel_histogram *h = &r->hist.delta;
	uint64_t cum = 0;

	for (uint32_t k = 0; k < h->n_buckets; k++) {
		char want[64], b[40];
		bool inf;
		double bound = ktel_hist_upper_bound(h, k, &inf);

		cum += h->counts[k];
		if (inf)
			snprintf(b, sizeof(b), "Inf");
		else
			ktel_format_shortest(bound / 1e6, b, sizeof(b));
		for (char *c = b; *c; c++)
			if (*c == '.')
				*c = '_';
		/* netdata names a pattern dimension after what the trailing '*'
		 * matched: the bound. */
		snprintf(want, sizeof(want), "%s", b);
		if (strcmp(want, name) == 0)
			return cum;
	}
	fail_msg("netdata has a dimension %s that the record does not make", name);
	return 0;
}

static void check_chart(const struct ktel_record *r)
{
	json_t *charts = api(&nd, "/api/v1/charts"), *chart, *dims, *dim, *data, *rows, *labels;
	double scale = 0;
	const char *id;
	size_t i, j;

	assert_non_null(charts);
	chart = json_object_get(json_object_get(charts, "charts"), CHART);
	if (!chart)
		fail_msg("netdata has no chart %s", CHART);
	dims = json_object_get(chart, "dimensions");
	/* Buckets 4..31 were sent: 28 dimensions, one per bucket. */
	assert_int_equal(json_object_size(dims), 28);
	json_object_foreach(dims, id, dim)
		expected_value(json_string_value(json_object_get(dim, "name")), r);
	json_decref(charts);

	/*
	 * The maxima over the last seconds. Netdata sums the counters that
	 * arrive within one flush and interpolates the result onto whole
	 * seconds, so the value of one window can show as 18 (two windows in
	 * one flush) or 5.8 (a window split between two seconds): the scale
	 * is netdata's. What the sink decides is the same in every row: each
	 * dimension is its bucket's cumulative count, in the same proportion
	 * to the le=Inf dimension (the count) as in the record. Netdata
	 * scales every dimension of a chart alike (they arrive together), so
	 * the maxima keep that proportion.
	 */
	data = api(&nd, "/api/v1/data?chart=" CHART "&after=-5&group=max&points=1&format=json");
	assert_non_null(data);
	labels = json_object_get(data, "labels");
	rows = json_object_get(data, "data");
	assert_int_equal(json_array_size(labels), 29);
	assert_true(json_array_size(rows) >= 1);
	for (int pass = 0; pass < 2; pass++) {
		for (i = 1; i < json_array_size(labels); i++) {
			const char *name = json_string_value(json_array_get(labels, i));
			double got = 0, want = (double)expected_value(name, r) * scale;

			json_array_foreach(rows, j, dim)
				got = fmax(got, json_number_value(json_array_get(dim, i)));
			if (pass == 0) {
				if (strcmp(name, "Inf") == 0)
					scale = got / (double)expected_value(name, r);
				continue;
			}
			if (fabs(got - want) > 0.02 * want + 1e-9)
				fail_msg("dimension %s: netdata shows %g, want %g (%llu of a window, "
					 "netdata's scale %g)",
					 name, got, want,
					 (unsigned long long)expected_value(name, r), scale);
		}
		/* At least half a window in the busiest second. */
		if (pass == 0 && !(scale >= 0.5))
			fail_msg("netdata shows le=Inf at %g of a window", scale);
	}
	json_decref(data);
}

static void test_netdata_chart(void **state)
{
	struct ktel_record r = window();
	struct ktel_err err = {0};
	char json[256];
	json_t *opts;
	void *sink = NULL;
	uv_loop_t loop;
	int closed = 0;

	netdata_start(&nd);
	assert_int_equal(uv_loop_init(&loop), 0);
	/* The defaults: prefix "ktel.", tags (dotted). */
	snprintf(json, sizeof(json), "{\"type\":\"statsd\",\"host\":\"127.0.0.1\",\"port\":%u}",
		 nd.udp_port);
	opts = json_loads(json, 0, NULL);
	if (ops->create(&loop, "netdata", opts, &sink, &err))
		fail_msg("create: %s", err.msg);
	json_decref(opts);
	/* One window a second, as netdata flushes, paced by the clock: 6. */
	uint64_t t0 = uv_hrtime();

	for (int w = 0; w < 6; w++) {
		ops->submit(sink, &r, 1);
		while (uv_hrtime() - t0 < (uint64_t)(w + 1) * 1000000000ull) {
			uv_run(&loop, UV_RUN_NOWAIT);
			usleep(1000);
		}
	}
	check_chart(&r);
	ops->close(sink, 1000, ktel_test_count_closed, &closed);
	for (int i = 0; i < 2000 && !closed; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(closed, 1);
	assert_int_equal(uv_loop_close(&loop), 0);
	netdata_stop(&nd);
}

static int teardown(void **state)
{
	netdata_stop(&nd);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_netdata_chart),
	};

	ktel_test_require_root("test_statsd_netdata");
	if (access(NETDATA, X_OK) != 0) {
		printf("SKIP test_statsd_netdata: %s missing (apt-get install netdata)\n", NETDATA);
		return KTEL_TEST_SKIP;
	}
	return cmocka_run_group_tests(tests, NULL, teardown);
}
