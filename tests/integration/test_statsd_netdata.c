// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The statsd sink with its default tag style against a real Netdata (1.37,
 * Debian's netdata package) with the chart config that tools/netdata-install
 * generates from the built plugins (ktel-netdata-conf) installed into the
 * test's own instance: own config/cache/lib/log directories in a mkdtemp
 * directory, statsd on a free UDP port, the web API on a free TCP port, -D
 * (foreground) as root, every data collector off.
 *
 *   1. test_netdata_sink_charts: the sink sends a few windows of a histogram
 *      with a sum (us), a counter with a dim, events and a gauge in ns. The
 *      charts Netdata makes (/api/v1/charts) have the ids and dimension
 *      names the config promises (bucket dimensions named by plain decimal
 *      bounds, "0_000016"), the values (/api/v1/data) add up to exactly
 *      what was sent (the sum too: sent as integer microseconds, Netdata
 *      keeps it whole), and Netdata's log has no STATSD error line.
 *   2. test_netdata_daemon_every_metric: the real ktelemetryd with every
 *      built plugin and self-telemetry each second sends to Netdata and, by
 *      a second statsd sink, to the test. Every name it sent is a dimension
 *      of a ktel chart, each counter's total in Netdata equals what the
 *      daemon sent, each gauge shows its last value, no STATSD error line.
 *
 * Netdata charts a StatsD counter as a rate: each second holds what arrived
 * in it, a window split between two seconds shows in both, so one second's
 * value is not a window's. The values are compared as sums over all the
 * seconds (group=sum), which telescope to the total sent.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "daemon_harness.h"
#include "ktel_test.h"
#include "sink_test.h"
#include "statsd_server.h"
#include "statsd/statsd_sink.h"
#include "units.h"

#define NETDATA "/usr/sbin/netdata"
#define INSTALL KTEL_SOURCE_DIR "/tools/netdata-install"
#define GENERATOR KTEL_BINARY_DIR "/tools/ktel-netdata-conf"

static const struct ktel_sink_ops *ops = &ktel_statsd_sink_ops;

struct netdata {
	char dir[256];
	pid_t pid;
	uint16_t udp_port, web_port;
};

static struct netdata nd = {.pid = -1};
static pid_t daemon_pid = -1;

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

static void netdata_stop(struct netdata *n);

static void netdata_start(struct netdata *n)
{
	char cmd[1024], conf[512];
	json_t *info = NULL;

	/* A test that failed before its netdata_stop() left its instance. */
	netdata_stop(n);
	snprintf(n->dir, sizeof(n->dir), "%s/netdata-XXXXXX", KTEL_BINARY_DIR);
	assert_non_null(mkdtemp(n->dir));
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %1$s/conf/statsd.d %1$s/cache %1$s/lib %1$s/log %1$s/run", n->dir);
	assert_int_equal(statsd_run(cmd), 0);
	/* The documented command, into this instance's statsd.d. */
	snprintf(cmd, sizeof(cmd),
		 "'%s' --dest %s/conf/statsd.d --no-restart --generator '%s' --plugins '%s' "
		 ">/dev/null",
		 INSTALL, n->dir, GENERATOR, KTEL_PLUGIN_DIR);
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

/* ---- what Netdata shows ------------------------------------------------------ */

/* The chart's dimensions: id (the StatsD name) -> name. */
static json_t *chart_dims(json_t *charts, const char *chart)
{
	json_t *c = json_object_get(json_object_get(charts, "charts"), chart);

	return c ? json_object_get(c, "dimensions") : NULL;
}

/*
 * Dimension dim_name of chart over every second it has (group=sum of the
 * per-second points: for a counter the total that arrived), or with last,
 * its latest value. NAN when the chart or dimension is missing.
 */
static double dim_value(const char *chart, const char *dim_name, bool last)
{
	char path[512];
	json_t *data, *labels, *rows, *row;
	double v = NAN;
	size_t i, j;

	/* One point a second (update every = 1), newest first, unaligned so
	 * that no second is cut in two. */
	snprintf(path, sizeof(path),
		 "/api/v1/data?chart=%s&after=-%d&points=%d&group=average&format=json"
		 "&options=unaligned",
		 chart, last ? 3 : 120, last ? 3 : 120);
	data = api(&nd, path);
	if (!data)
		return NAN;
	labels = json_object_get(data, "labels");
	rows = json_object_get(data, "data");
	for (i = 1; i < json_array_size(labels); i++) {
		if (strcmp(json_string_value(json_array_get(labels, i)), dim_name) != 0)
			continue;
		v = 0;
		json_array_foreach(rows, j, row) {
			json_t *x = json_array_get(row, i);

			if (!json_is_number(x))
				continue;
			if (last) {
				v = json_number_value(x);
				break;
			}
			v += json_number_value(x);
		}
	}
	if (getenv("KTEL_TEST_DEBUG")) {
		char *t = json_dumps(data, JSON_COMPACT);

		print_error("%s -> %s\n", path, t);
		free(t);
	}
	json_decref(data);
	return v;
}

/*
 * Equal up to the precision Netdata stores a number with (about 7
 * significant digits) and adds per-second points with: a fraction cut off
 * at the sink (Netdata keeps a counter's integer part) is far outside it.
 */
static bool close_enough(double got, double want)
{
	return fabs(got - want) <= 1e-5 * fabs(want) + 0.01;
}

/*
 * Error lines of Netdata's log from its StatsD threads: what the sink sent
 * ("STATSD: excess data '.367' after value '7.367'"), not the INFO lines
 * they log at start.
 */
static size_t statsd_error_lines(void)
{
	char path[400], *line = NULL;
	size_t cap = 0, n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/log/error.log", nd.dir);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0)
		if (strstr(line, "STATSD") && strstr(line, "ERROR")) {
			print_error("netdata: %s", line);
			n++;
		}
	free(line);
	fclose(f);
	return n;
}

/* ---- 1: the sink's lines -------------------------------------------------------- */

#define WINDOWS 6
/* Per window: 3 values <= 16us, 4 <= 64us, 2 over; their sum in us. */
#define WINDOW_SUM_US 7367123

static void make_records(struct ktel_record *r)
{
	r[0] = (struct ktel_record){.type = KTEL_RECORD_HISTOGRAM,
				    .metric = "compaction_duration",
				    .unit = "us"};
	r[0].hist.delta.scheme = KTEL_HIST_LOG2;
	r[0].hist.delta.n_buckets = KTEL_HIST_BUCKETS;
	r[0].hist.delta.counts[4] = 3;
	r[0].hist.delta.counts[6] = 4;
	r[0].hist.delta.counts[31] = 2;
	r[0].hist.delta.has_sum = true;
	r[0].hist.delta.sum = WINDOW_SUM_US;
	r[1] = (struct ktel_record){.type = KTEL_RECORD_COUNTER,
				    .metric = "oom_kills",
				    .unit = "kills",
				    .n_dims = 1,
				    .dims = {{"process_state", 900, "STATE_CACHED", false}}};
	r[1].counter.delta = 3;
	r[2] = (struct ktel_record){.type = KTEL_RECORD_EVENT,
				    .metric = "runq_stall_events",
				    .unit = "events",
				    .n_dims = 1,
				    .dims = {{"cpu", 1, NULL, false}}};
	r[3] = r[2];
	r[4] = (struct ktel_record){.type = KTEL_RECORD_GAUGE,
				    .metric = "ktel_pull_duration",
				    .unit = "ns",
				    .gauge = 123456,
				    .n_dims = 1,
				    .dims = {{"metric", 0, "runq_latency", false}}};
}

/* The name Netdata gives the bucket dimension of bucket k: the bound in
 * seconds as a plain decimal, '_' for '.'. */
static void bucket_dim(uint32_t k, char *buf, size_t size)
{
	struct ktel_histogram h = {.scheme = KTEL_HIST_LOG2, .n_buckets = KTEL_HIST_BUCKETS};
	bool inf;
	double bound = ktel_hist_upper_bound(&h, k, &inf);

	if (inf) {
		snprintf(buf, size, "Inf");
		return;
	}
	ktel_format_plain(bound, 6, buf, size);
	for (char *c = buf; *c; c++)
		if (*c == '.')
			*c = '_';
}

static void check_sink_charts(const struct ktel_record *r)
{
	json_t *charts = api(&nd, "/api/v1/charts"), *dims;
	uint64_t cum[KTEL_HIST_BUCKETS], c = 0;
	char name[64];

	assert_non_null(charts);
	for (uint32_t k = 0; k < KTEL_HIST_BUCKETS; k++)
		cum[k] = c += r[0].hist.delta.counts[k];
	/* Buckets 4..31 were sent: one dimension each, named by the bound. */
	dims = chart_dims(charts, "ktel.compaction_duration");
	if (!dims)
		fail_msg("netdata has no chart ktel.compaction_duration");
	assert_int_equal(json_object_size(dims), 28);
	for (uint32_t k = 4; k < KTEL_HIST_BUCKETS; k++) {
		const char *id;
		json_t *d;
		bool found = false;
		double got;

		bucket_dim(k, name, sizeof(name));
		json_object_foreach(dims, id, d)
			found |= strcmp(json_string_value(json_object_get(d, "name")), name) == 0;
		if (!found)
			fail_msg("ktel.compaction_duration has no dimension %s", name);
		got = dim_value("ktel.compaction_duration", name, false);
		if (!close_enough(got, (double)(WINDOWS * cum[k])))
			fail_msg("bucket %s: netdata counted %f, the sink sent %llu", name, got,
				 (unsigned long long)(WINDOWS * cum[k]));
	}
	{
		static const struct {
			const char *chart, *dim;
			double want;
			bool last;
		} want[] = {
			{"ktel.compaction_duration_rate", "values", WINDOWS * 9.0, false},
			{"ktel.compaction_duration_sum", "sum", WINDOWS * (double)WINDOW_SUM_US,
			 false},
			{"ktel.oom_kills", "STATE_CACHED", WINDOWS * 3.0, false},
			{"ktel.runq_stall_events", "1", WINDOWS * 2.0, false},
			{"ktel.ktel_pull_duration", "runq_latency", 123456, true},
		};

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			double got = dim_value(want[i].chart, want[i].dim, want[i].last);

			if (!close_enough(got, want[i].want))
				fail_msg("%s dimension %s: netdata shows %f, the sink sent %f",
					 want[i].chart, want[i].dim, got, want[i].want);
		}
	}
	json_decref(charts);
}

static void run_loop_for(uv_loop_t *loop, unsigned ms)
{
	for (unsigned i = 0; i < ms; i++) {
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
}

static void test_netdata_sink_charts(void **state)
{
	struct ktel_record r[5];
	struct ktel_err err = {0};
	char json[256];
	json_t *opts;
	void *sink = NULL;
	uv_loop_t loop;
	int closed = 0;

	make_records(r);
	netdata_start(&nd);
	assert_int_equal(uv_loop_init(&loop), 0);
	/* The defaults: prefix "ktel.", tags (dotted). */
	snprintf(json, sizeof(json), "{\"type\":\"statsd\",\"host\":\"127.0.0.1\",\"port\":%u}",
		 nd.udp_port);
	opts = json_loads(json, 0, NULL);
	if (ops->create(&loop, "netdata", opts, &sink, &err))
		fail_msg("create: %s", err.msg);
	json_decref(opts);
	for (int w = 0; w < WINDOWS; w++) {
		ops->submit(sink, r, 5);
		run_loop_for(&loop, 700);
	}
	ops->close(sink, 1000, ktel_test_count_closed, &closed);
	for (int i = 0; i < 2000 && !closed; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(closed, 1);
	assert_int_equal(uv_loop_close(&loop), 0);
	/* Netdata flushes each second and stores the seconds after. */
	sleep(4);
	check_sink_charts(r);
	assert_int_equal(statsd_error_lines(), 0);
	netdata_stop(&nd);
}

/* ---- 2: the daemon's every metric ------------------------------------------------- */

/* What the daemon sent, per name: counters summed, gauges last. */
struct sent {
	json_t *counters, *gauges;
};

static void take_line(struct sent *s, char *line)
{
	char *colon = strrchr(line, ':'), *bar;
	double v;

	if (!colon || !(bar = strchr(colon, '|')))
		fail_msg("the daemon sent a line without value or type: %s", line);
	*colon = '\0';
	v = strtod(colon + 1, NULL);
	if (strncmp(bar, "|c", 2) == 0) {
		json_t *old = json_object_get(s->counters, line);

		json_object_set_new(s->counters, line,
				    json_real((old ? json_number_value(old) : 0) + v));
	} else if (strncmp(bar, "|g", 2) == 0) {
		json_t *old = json_object_get(s->gauges, line);

		/* "name:0|g" then "name:-N|g" for a negative level */
		if (colon[1] == '-' || colon[1] == '+')
			v += old ? json_number_value(old) : 0;
		json_object_set_new(s->gauges, line, json_real(v));
	} else {
		fail_msg("the daemon sent a line of another type: %s", line);
	}
}

static void drain_capture(int fd, struct sent *s)
{
	char buf[65536];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
		char *save = NULL;

		buf[n] = '\0';
		for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
			take_line(s, l);
	}
}

static int capture_socket(uint16_t *ret_port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rcvbuf = 8 << 20;

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*ret_port = ntohs(a.sin_port);
	return fd;
}

/* The chart and dimension name of the dimension with id (a StatsD name). */
static bool find_dim(json_t *charts, const char *id, const char **ret_chart, const char **ret_name)
{
	const char *cid;
	json_t *c;

	json_object_foreach(json_object_get(charts, "charts"), cid, c) {
		json_t *d = json_object_get(json_object_get(c, "dimensions"), id);

		if (d && strncmp(cid, "ktel.", 5) == 0) {
			*ret_chart = cid;
			*ret_name = json_string_value(json_object_get(d, "name"));
			return true;
		}
	}
	return false;
}

static void test_netdata_daemon_every_metric(void **state)
{
	struct sandbox sb;
	struct sent sent = {json_object(), json_object()};
	char extra[1024];
	json_t *charts, *v;
	const char *key;
	uint16_t cap_port;
	int cap = capture_socket(&cap_port);
	size_t uncharted = 0, checked = 0;
	pid_t pid;

	netdata_start(&nd);
	sandbox_init(&sb, "statsd-netdata");
	snprintf(extra, sizeof(extra),
		 "\"self_telemetry\": {\"interval\": \"1s\"},\n"
		 " \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"},\n"
		 "   \"netdata\": {\"type\": \"statsd\", \"host\": \"127.0.0.1\", \"port\": %u},\n"
		 "   \"copy\": {\"type\": \"statsd\", \"host\": \"127.0.0.1\", \"port\": %u}}",
		 sb.out, nd.udp_port, cap_port);
	/* sandbox_write_config's own "sinks" comes first; the later key wins
	 * in jansson's object: write the config whole instead. */
	{
		FILE *f = fopen(sb.config, "w");

		assert_non_null(f);
		fprintf(f,
			"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
			" \"control_socket\": \"%s/control.sock\", \"interval\": \"1s\",\n %s}\n",
			KTEL_PLUGIN_DIR, sb.pin_root, sb.state, sb.dir, extra);
		fclose(f);
	}
	pid = daemon_pid = daemon_start(&sb, NULL);
	assert_true(pid > 0);
	for (int i = 0; i < 80; i++) {
		if (i % 10 == 0)
			trigger_compaction();
		drain_capture(cap, &sent);
		usleep(100000);
	}
	kill(pid, SIGTERM);
	daemon_pid = -1;
	if (daemon_wait(pid, 20) != 0) {
		dump_log(&sb);
		fail_msg("ktelemetryd did not stop cleanly");
	}
	drain_capture(cap, &sent);
	close(cap);
	sleep(4);
	assert_true(json_object_size(sent.counters) > 0);
	assert_true(json_object_size(sent.gauges) > 0);

	charts = api(&nd, "/api/v1/charts");
	assert_non_null(charts);
	for (int pass = 0; pass < 2; pass++) {
		json_object_foreach(pass ? sent.gauges : sent.counters, key, v) {
			const char *chart, *name;
			double got;

			if (!find_dim(charts, key, &chart, &name)) {
				print_error("no ktel chart has the daemon's %s\n", key);
				uncharted++;
				continue;
			}
			got = dim_value(chart, name, pass == 1);
			checked++;
			if (!close_enough(got, json_number_value(v)))
				fail_msg("%s (chart %s, dimension %s): netdata shows %f, the daemon "
					 "sent %f",
					 key, chart, name, got, json_number_value(v));
		}
	}
	printf("netdata: %zu names the daemon sent checked, %zu counters, %zu gauges\n", checked,
	       json_object_size(sent.counters), json_object_size(sent.gauges));
	assert_int_equal(uncharted, 0);
	assert_int_equal(statsd_error_lines(), 0);
	json_decref(charts);
	json_decref(sent.counters);
	json_decref(sent.gauges);
	sandbox_cleanup(&sb);
	netdata_stop(&nd);
}

static int teardown(void **state)
{
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGKILL);
		waitpid(daemon_pid, NULL, 0);
	}
	netdata_stop(&nd);
	return sandbox_remove_all(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_netdata_sink_charts),
		cmocka_unit_test(test_netdata_daemon_every_metric),
	};

	ktel_test_require_root("test_statsd_netdata");
	if (access(NETDATA, X_OK) != 0) {
		printf("SKIP test_statsd_netdata: %s missing (apt-get install netdata)\n", NETDATA);
		return KTEL_TEST_SKIP;
	}
	return cmocka_run_group_tests(tests, NULL, teardown);
}
