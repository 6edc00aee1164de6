// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Latency histograms carry a sum (so sinks export the mean), through the
 * real ktelemetryd
 * with a JSON and a Prometheus sink, on compaction_duration (events from
 * /proc/sys/vm/compact_memory, counted by the kernel's own tracefs) and
 * runq_latency (the task-storage variant of the duration macros, events all
 * the time):
 *
 *  - a pin of compaction_duration_map left by the plugin version before the
 *    sum (32 buckets, 256-byte values, holding a million counts) is replaced
 *    by a fresh map, the daemon says so, and none of the old counts reach a
 *    sink: the value type changed, so the old values are never decoded as
 *    the new ones nor taken as a baseline;
 *  - every JSON record has a "sum", and it lies within what its bucket
 *    counts allow (tests/hist_bounds.h); every Prometheus series has a
 *    _sum, within what its cumulative buckets allow;
 *  - once the compactions settled, the Prometheus _sum of compaction is
 *    exactly the JSON records' summed sums divided by 1e6 (the map is the
 *    daemon's own, so the deltas add up to its total), its _count the summed
 *    counts, the pinned map's counts the same, and at least what tracefs
 *    saw.
 *
 * Hermetic: own pin root, files under the build tree, removed at the end.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <cmocka.h>

#include <bpf/bpf.h>

#include "ktel_test.h"
#include "daemon_harness.h"
#include "hist_bounds.h"
#include "map_total.h"
#include "statsd_server.h"
#include "tracefs_oracle.h"

#define PIN_NAME "map_compaction_duration_compaction_duration_map"
#define COMPACTION_FAMILY "ktel_compaction_duration_seconds"
#define RUNQ_FAMILY "ktel_runq_latency_seconds"
#define OLD_COUNTS 1000000ULL
#define SETTLE_S 15
#define MAX_SERIES 1100

static struct sandbox sb;
static pid_t daemon_pid = -1;
static uint16_t prom_port;
static char plugin_dir[700];

/* ---- JSON records -------------------------------------------------------- */

struct json_view {
	size_t records;
	uint64_t count, sum;
};

/* Add the records of metric to v, each checked against its own counts. */
static void json_collect(const char *metric, struct json_view *v)
{
	FILE *f = fopen(sb.out, "r");
	char *line = NULL, why[200];
	size_t cap = 0;

	memset(v, 0, sizeof(*v));
	while (f && getline(&line, &cap, f) > 0) {
		json_t *rec = json_loads(line, 0, NULL), *h, *sum, *c;
		uint64_t counts[HIST_BOUNDS_BUCKETS] = {0};
		size_t k;

		if (!rec)
			break; /* a line being written: the next poll sees it whole */
		if (strcmp(json_string_value(json_object_get(rec, "metric")) ?: "", metric)) {
			json_decref(rec);
			continue;
		}
		h = json_object_get(rec, "histogram");
		sum = json_object_get(h, "sum");
		if (!json_is_integer(sum))
			fail_msg("%s: a record without an integer sum: %s", metric, line);
		json_array_foreach(json_object_get(h, "counts"), k, c)
			if (k < HIST_BOUNDS_BUCKETS)
				counts[k] = (uint64_t)json_integer_value(c);
		if (!hist_sum_consistent(counts, HIST_BOUNDS_BUCKETS,
					 (uint64_t)json_integer_value(sum), why, sizeof(why)))
			fail_msg("%s: %s: %s", metric, why, line);
		v->records++;
		v->count += hist_bounds_of(counts, HIST_BOUNDS_BUCKETS).count;
		v->sum += (uint64_t)json_integer_value(sum);
		json_decref(rec);
	}
	free(line);
	if (f)
		fclose(f);
}

/* ---- the Prometheus exposition ------------------------------------------- */

/* One series (label set) of a histogram family, as exposed. */
struct prom_series {
	char labels[160]; /* without le, as printed ("" for none) */
	uint64_t cum[HIST_BOUNDS_BUCKETS];
	uint32_t n_buckets;
	bool has_sum, has_count;
	double sum_s; /* seconds */
	uint64_t count;
};

struct prom_family {
	struct prom_series series[MAX_SERIES];
	size_t n;
};

static struct prom_family compaction_prom, runq_prom;

static struct prom_series *prom_series_get(struct prom_family *f, const char *labels)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->series[i].labels, labels) == 0)
			return &f->series[i];
	assert_true(f->n < MAX_SERIES);
	snprintf(f->series[f->n].labels, sizeof(f->series[f->n].labels), "%s", labels);
	return &f->series[f->n++];
}

/*
 * "{cpu="0",le="1e-06"} 5" -> labels "cpu="0"", le "1e-06", rest " 5";
 * "{le="+Inf"} 5" -> labels "". Our sink prints le last.
 */
static bool split_labels(const char *s, char *labels, size_t len, char *le, size_t le_len,
			 const char **rest)
{
	const char *end = strchr(s, '}'), *l;

	labels[0] = le[0] = '\0';
	if (*s != '{') {
		*rest = s;
		return true;
	}
	if (!end)
		return false;
	*rest = end + 1;
	l = strstr(s, "le=\"");
	if (!l || l > end) {
		snprintf(labels, len, "%.*s", (int)(end - s - 1), s + 1);
		return true;
	}
	snprintf(le, le_len, "%.*s", (int)(strchr(l + 4, '"') - l - 4), l + 4);
	snprintf(labels, len, "%.*s", (int)(l > s + 1 ? l - s - 2 : 0), s + 1);
	return true;
}

/* Parse one exposition line of family into f; other lines are ignored. */
static void prom_line(struct prom_family *f, const char *family, const char *line)
{
	size_t n = strlen(family);
	char labels[160], le[40];
	const char *rest;
	struct prom_series *se;

	if (strncmp(line, family, n) != 0 || line[n] != '_')
		return;
	line += n + 1;
	if (strncmp(line, "bucket", 6) == 0) {
		assert_true(split_labels(line + 6, labels, sizeof(labels), le, sizeof(le), &rest));
		se = prom_series_get(f, labels);
		assert_true(se->n_buckets < HIST_BOUNDS_BUCKETS);
		se->cum[se->n_buckets++] = strtoull(rest, NULL, 10);
	} else if (strncmp(line, "sum", 3) == 0) {
		assert_true(split_labels(line + 3, labels, sizeof(labels), le, sizeof(le), &rest));
		se = prom_series_get(f, labels);
		se->has_sum = true;
		se->sum_s = strtod(rest, NULL);
	} else if (strncmp(line, "count", 5) == 0) {
		assert_true(split_labels(line + 5, labels, sizeof(labels), le, sizeof(le), &rest));
		se = prom_series_get(f, labels);
		se->has_count = true;
		se->count = strtoull(rest, NULL, 10);
	}
}

static void prom_scrape(void)
{
	char cmd[256], line[1024];
	FILE *p;

	memset(&compaction_prom, 0, sizeof(compaction_prom));
	memset(&runq_prom, 0, sizeof(runq_prom));
	snprintf(cmd, sizeof(cmd), "curl -sf --max-time 5 http://127.0.0.1:%u/metrics", prom_port);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		prom_line(&compaction_prom, COMPACTION_FAMILY, line);
		prom_line(&runq_prom, RUNQ_FAMILY, line);
	}
	assert_int_equal(pclose(p), 0);
}

/*
 * The series' sum in whole microseconds: the sink divided the integer sum
 * by 1e6 once and printed a decimal that reads back as that double, so
 * multiplying back and rounding recovers the integer exactly (sums far
 * below 2^51 us).
 */
static uint64_t prom_sum_us(const struct prom_series *se)
{
	return (uint64_t)llround(se->sum_s * 1e6);
}

/* Every series of f has 32 buckets ending in _count, a _sum, and that sum
 * within its buckets' bounds (the bounds in us: bucket k's le is 2^k us). */
static void prom_check_family(const struct prom_family *f, const char *family)
{
	char why[200];

	assert_true(f->n > 0);
	for (size_t i = 0; i < f->n; i++) {
		const struct prom_series *se = &f->series[i];
		uint64_t counts[HIST_BOUNDS_BUCKETS];

		if (se->n_buckets != HIST_BOUNDS_BUCKETS || !se->has_count || !se->has_sum)
			fail_msg("%s{%s}: %u buckets, _count %s, _sum %s", family, se->labels,
				 se->n_buckets, se->has_count ? "present" : "missing",
				 se->has_sum ? "present" : "missing");
		assert_int_equal(se->cum[HIST_BOUNDS_BUCKETS - 1], se->count);
		for (uint32_t k = 0; k < HIST_BOUNDS_BUCKETS; k++)
			counts[k] = se->cum[k] - (k ? se->cum[k - 1] : 0);
		if (!hist_sum_consistent(counts, HIST_BOUNDS_BUCKETS, prom_sum_us(se), why,
					 sizeof(why)))
			fail_msg("%s{%s}: %s", family, se->labels, why);
	}
}

/* ---- setup --------------------------------------------------------------- */

static void write_config(void)
{
	FILE *f = fopen(sb.config, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"1s\",\n"
		" \"sinks\": {\n"
		"  \"file\": {\"type\": \"json\", \"path\": \"%s\"},\n"
		"  \"prom\": {\"type\": \"prometheus\", \"listen\": \"127.0.0.1\", \"port\": %u}\n"
		" }}\n",
		plugin_dir, sb.pin_root, sb.state, sb.dir, sb.out, prom_port);
	assert_int_equal(fclose(f), 0);
}

/* compaction_duration and runq_latency, copied into a root-owned 0755 dir. */
static void make_plugin_dir(void)
{
	snprintf(plugin_dir, sizeof(plugin_dir), "%s/plugins", sb.dir);
	assert_int_equal(mkdir(plugin_dir, 0755), 0);
	assert_int_equal(chmod(plugin_dir, 0755), 0);
	assert_int_equal(ktel_test_run("cp %s/compaction_duration.so %s/runq_latency.so %s/ && "
				       "chmod 0644 %s/*.so",
				       KTEL_PLUGIN_DIR, KTEL_PLUGIN_DIR, plugin_dir, plugin_dir),
			 0);
}

/*
 * The map as compaction_duration 1.0 pinned it: key u32, value struct
 * accumulator_value (32 u64 buckets, no sum), one entry, holding
 * OLD_COUNTS in bucket 5.
 */
static void pin_old_layout_map(void)
{
	uint64_t old[HIST_BOUNDS_BUCKETS] = {[5] = OLD_COUNTS};
	char path[700];
	/* Today's key (reserved, pad, the attribution id): only the value is
	 * of the old layout, so the value is what the replacement names. */
	struct {
		uint32_t reserved, pad;
		uint64_t attr;
	} key = {0};
	int fd;

	assert_int_equal(mkdir(sb.pin_root, 0750), 0);
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, "compaction_dura", sizeof(key), sizeof(old), 1,
			    NULL);
	assert_true(fd >= 0);
	assert_int_equal(bpf_map_update_elem(fd, &key, old, BPF_ANY), 0);
	snprintf(path, sizeof(path), "%s/%s", sb.pin_root, PIN_NAME);
	assert_int_equal(bpf_obj_pin(fd, path), 0);
	close(fd);
	assert_int_equal(ktel_test_pinned_total(sb.pin_root, PIN_NAME), OLD_COUNTS);
}

static int setup(void **state)
{
	(void)state;
	sandbox_init(&sb, "hist-sum");
	prom_port = statsd_free_port(SOCK_STREAM);
	make_plugin_dir();
	write_config();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGTERM);
		if (daemon_wait(daemon_pid, 20) != 0)
			dump_log(&sb);
		daemon_pid = -1;
	}
	sandbox_cleanup(&sb);
	return 0;
}

/* ---- the test ------------------------------------------------------------ */

/* Compaction views settled: JSON, Prometheus and the pinned map agree. */
static bool compaction_settled(struct json_view *js, uint64_t *ret_pinned)
{
	const struct prom_series *se;

	*ret_pinned = ktel_test_pinned_total(sb.pin_root, PIN_NAME);
	prom_scrape();
	json_collect("compaction_duration", js);
	if (compaction_prom.n != 1)
		return false;
	se = &compaction_prom.series[0];
	return js->records > 0 && js->count == *ret_pinned && se->count == js->count &&
	       se->has_sum && se->sum_s == (double)js->sum / 1e6;
}

static void test_latency_sums(void **state)
{
	struct tracefs_counter tc;
	struct json_view js = {0}, runq = {0};
	uint64_t oracle, pinned = 0;
	bool settled = false;

	(void)state;
	pin_old_layout_map();
	daemon_pid = daemon_start(&sb, NULL);
	if (!log_wait_for(&sb, "metric compaction_duration: collecting", 30) ||
	    !log_wait_for(&sb, "metric runq_latency: collecting", 5)) {
		dump_log(&sb);
		fail_msg("the daemon did not start collecting");
	}
	if (!log_wait_for(&sb, "replaced incompatible pin: value_size 256, object wants 264", 1)) {
		dump_log(&sb);
		fail_msg("the old-layout pin was not reported replaced");
	}

	assert_int_equal(tracefs_start(&tc, "compaction/mm_compaction_end"), 0);
	for (int i = 0; i < 3; i++) {
		trigger_compaction();
		usleep(100000);
	}
	oracle = tracefs_stop(&tc, "mm_compaction_end:");
	assert_true(oracle != UINT64_MAX && oracle >= 1);

	for (int i = 0; i < SETTLE_S * 5 && !settled; i++) {
		settled = compaction_settled(&js, &pinned);
		if (!settled)
			usleep(200000);
	}
	if (!settled) {
		dump_log(&sb);
		fail_msg("compaction: json %zu records, count %llu, sum %llu us; pinned %llu; "
			 "prometheus %zu series, _count %llu, _sum %.17g s",
			 js.records, (unsigned long long)js.count, (unsigned long long)js.sum,
			 (unsigned long long)pinned, compaction_prom.n,
			 (unsigned long long)(compaction_prom.n ? compaction_prom.series[0].count
								: 0),
			 compaction_prom.n ? compaction_prom.series[0].sum_s : 0.0);
	}
	printf("compaction: %llu events (tracefs %llu), %llu us in all; prometheus _sum %.17g s\n",
	       (unsigned long long)js.count, (unsigned long long)oracle, (unsigned long long)js.sum,
	       compaction_prom.series[0].sum_s);
	/* The old counts were neither decoded nor a baseline: the map is new. */
	assert_true(js.count >= oracle);
	assert_true(js.count < OLD_COUNTS);
	/* Compacting every zone takes microseconds, at least once. */
	assert_true(js.sum > 0);
	prom_check_family(&compaction_prom, COMPACTION_FAMILY);

	json_collect("runq_latency", &runq);
	prom_check_family(&runq_prom, RUNQ_FAMILY);
	printf("runq_latency: %zu records, %llu waits, %llu us in all; %zu prometheus series\n",
	       runq.records, (unsigned long long)runq.count, (unsigned long long)runq.sum,
	       runq_prom.n);
	assert_true(runq.count > 0 && runq.sum > 0);

	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 20), 0);
	daemon_pid = -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_latency_sums, setup, teardown),
	};

	ktel_test_require_root("test_histogram_sum");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
