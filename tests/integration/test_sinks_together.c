// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Many sinks at once: the real ktelemetryd with a json, a statsd
 * (to a real Etsy StatsD server), a stream, a prometheus and a remote_write
 * sink (to the real Prometheus server's remote-write receiver), on the real
 * compaction_duration metric (the only plugin in the plugin dir, 1s pulls,
 * events from `echo 1 > /proc/sys/vm/compact_memory`).
 *
 *   1. All five carry the same counts for the same windows: the stream
 *      subscriber (a plain unix socket client) reads byte for byte the lines
 *      of the JSON file; the StatsD server counted, per bucket and in
 *      _count/_sum, the sum of the JSON records' deltas; the Prometheus
 *      scrape's cumulative _bucket/_count/_sum equal the same sums, and so
 *      do the series remote_write pushed, read back with PromQL; and all
 *      of them equal the total of the pinned map (nothing lost on the way).
 *      The sum is whole microseconds in JSON and StatsD and seconds in
 *      Prometheus: see prom_matches() and statsd_sum_matches() for why
 *      each comparison of a sum is exact, not a tolerance.
 *   2. The StatsD server is killed and more events happen: json, stream and
 *      prometheus and remote_write still match each other and the pinned map, none of them
 *      dropped or failed anything, and the statsd sink reports (through
 *      `ktelemetryctl --json status` on the daemon's control socket) the
 *      windows it could not deliver as dropped, with sent + dropped = every
 *      record routed to it.
 *
 * Self-telemetry flows every second through the same sinks, as it would in
 * production. Windows are compared once they settled: other processes may
 * compact too, so each phase polls until every view equals the pinned map's
 * total.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cmocka.h>

#include <bpf/bpf.h>

#include "ktel_test.h"
#include "map_total.h"
#include "sink.h"
#include "daemon_harness.h"
#include "statsd_server.h"
#include "prom_server.h"
#include "units.h"

#define METRIC "compaction_duration"
#define PIN_NAME "map_compaction_duration_compaction_duration_map"
/* The prometheus sink exposes the plugin's "us" in seconds. */
#define PROM_FAMILY "ktel_compaction_duration_seconds"
#define STATSD_PREFIX "t."
#define CTL_BIN KTEL_BINARY_DIR "/tools/ktelemetryctl"
#define SETTLE_S 12
#define MAX_LINES 4096

struct stream_client {
	int fd;
	char buf[1 << 20]; /* bytes of a line not yet complete */
	size_t len;
	char *lines[MAX_LINES];
	size_t n_lines;
	uint64_t drop_notices;
};

/* One sink's view of the metric: summed deltas, or cumulative values. */
struct view {
	uint64_t counts[KTEL_HIST_BUCKETS];
	uint32_t n_buckets;
	bool has_sum;
	uint64_t sum; /* us: JSON lines */
	double sum_s; /* seconds: the Prometheus _sum as exposed */
	size_t records;
	char le[KTEL_HIST_BUCKETS][32]; /* bucket bounds as the JSON line prints them */
};

static struct sandbox sb;
static struct statsd_server statsd = {.pid = -1};
static struct stream_client sub = {.fd = -1};
static pid_t daemon_pid = -1;
static uint16_t prom_port;
static unsigned rw_web_port; /* the Prometheus server receiving remote writes */
static pid_t prom_server_pid;
static char stream_sock[700], ctl_sock[700], plugin_dir[700];

/* ---- the pinned map ------------------------------------------------------- */

/* ---- JSON lines (the file and the stream) ----------------------------------- */

static bool is_metric_line(const char *line)
{
	json_t *rec = json_loads(line, 0, NULL);
	bool yes = rec &&
		   strcmp(json_string_value(json_object_get(rec, "metric")) ?: "", METRIC) == 0;

	json_decref(rec);
	return yes;
}

/* Add one record line of METRIC to v; every line must parse. */
static void view_add_line(struct view *v, const char *line)
{
	json_t *rec = json_loads(line, 0, NULL), *h, *c;
	size_t k;

	assert_non_null(rec);
	h = json_object_get(rec, "histogram");
	assert_non_null(h);
	v->n_buckets = (uint32_t)json_array_size(json_object_get(h, "counts"));
	assert_true(v->n_buckets > 0 && v->n_buckets <= KTEL_HIST_BUCKETS);
	json_array_foreach(json_object_get(h, "counts"), k, c)
		v->counts[k] += (uint64_t)json_integer_value(c);
	json_array_foreach(json_object_get(h, "le"), k, c) {
		if (k >= KTEL_HIST_BUCKETS)
			break;
		if (json_is_string(c))
			snprintf(v->le[k], sizeof(v->le[k]), "%s", json_string_value(c));
		else
			snprintf(v->le[k], sizeof(v->le[k]), "%.0f", json_number_value(c));
	}
	if (json_object_get(h, "sum")) {
		v->has_sum = true;
		v->sum += (uint64_t)json_integer_value(json_object_get(h, "sum"));
	}
	v->records++;
	json_decref(rec);
}

static uint64_t view_count(const struct view *v)
{
	uint64_t n = 0;

	for (uint32_t k = 0; k < v->n_buckets; k++)
		n += v->counts[k];
	return n;
}

/* Complete lines of the JSON sink's file, any metric (self-telemetry too). */
static size_t file_records(void)
{
	FILE *f = fopen(sb.out, "r");
	char *line = NULL;
	size_t cap = 0, n = 0;
	ssize_t len;

	while (f && (len = getline(&line, &cap, f)) > 0 && line[len - 1] == '\n')
		n++;
	free(line);
	if (f)
		fclose(f);
	return n;
}

/* The METRIC lines of the JSON sink's file, in order (caller frees). */
static size_t file_lines(char ***ret)
{
	FILE *f = fopen(sb.out, "r");
	char *line = NULL, **lines = calloc(MAX_LINES, sizeof(*lines));
	size_t cap = 0, n = 0;
	ssize_t len;

	assert_non_null(lines);
	while (f && (len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] != '\n')
			break; /* being written: the next poll sees it whole */
		line[len - 1] = '\0';
		if (is_metric_line(line) && n < MAX_LINES)
			lines[n++] = strdup(line);
	}
	free(line);
	if (f)
		fclose(f);
	*ret = lines;
	return n;
}

static void free_lines(char **lines, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
}

/* ---- the stream subscriber ------------------------------------------------- */

static void stream_connect(void)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", stream_sock);
	sub.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(sub.fd >= 0);
	for (int i = 0; i < 100; i++) {
		if (connect(sub.fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			break;
		assert_true(i < 99);
		usleep(100000);
	}
	assert_int_equal(fcntl(sub.fd, F_SETFL, O_NONBLOCK), 0);
}

/* Read what the sink sent so far; keep the METRIC lines, count notices. */
static void stream_poll(void)
{
	for (;;) {
		ssize_t n = read(sub.fd, sub.buf + sub.len, sizeof(sub.buf) - sub.len);
		char *start = sub.buf, *nl;

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		assert_true(n > 0); /* the daemon does not hang up on us */
		sub.len += (size_t)n;
		while ((nl = memchr(start, '\n', sub.len - (size_t)(start - sub.buf)))) {
			*nl = '\0';
			if (strncmp(start, "{\"dropped\":", 11) == 0)
				sub.drop_notices++;
			else if (is_metric_line(start) && sub.n_lines < MAX_LINES)
				sub.lines[sub.n_lines++] = strdup(start);
			start = nl + 1;
		}
		sub.len -= (size_t)(start - sub.buf);
		memmove(sub.buf, start, sub.len);
		assert_true(sub.len < sizeof(sub.buf));
	}
}

/* ---- prometheus ------------------------------------------------------------- */

/* Scrape with curl; the histogram's cumulative values into v. */
static bool prom_scrape(struct view *v)
{
	char cmd[256], line[1024];
	uint32_t k = 0;
	bool ok;
	FILE *p;

	memset(v, 0, sizeof(*v));
	snprintf(cmd, sizeof(cmd), "curl -sf --max-time 5 http://127.0.0.1:%u/metrics", prom_port);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long n;
		double d;

		if (sscanf(line, PROM_FAMILY "_bucket{le=\"%*[^\"]\"} %llu", &n) == 1 &&
		    k < KTEL_HIST_BUCKETS) {
			v->counts[k++] = n;
		} else if (sscanf(line, PROM_FAMILY "_count %llu", &n) == 1) {
			v->records = n; /* the count, kept aside to compare */
		} else if (sscanf(line, PROM_FAMILY "_sum %lf", &d) == 1) {
			v->has_sum = true;
			v->sum_s = d;
		}
	}
	ok = pclose(p) == 0;
	v->n_buckets = k;
	return ok;
}

/*
 * Prometheus holds cumulative buckets: equal to the running sum of want's.
 * Its _sum is the map's total in seconds: the sink divides the integer
 * microseconds once and prints a decimal that reads back as the same double,
 * so it must equal, exactly, the double nearest want's sum / 1e6 (an IEEE
 * division of two exact doubles: the sum is far below 2^53).
 */
static bool prom_matches(const struct view *prom, const struct view *want)
{
	uint64_t cum = 0;

	if (prom->n_buckets != want->n_buckets || prom->has_sum != want->has_sum ||
	    (want->has_sum && prom->sum_s != (double)want->sum / 1e6))
		return false;
	for (uint32_t k = 0; k < want->n_buckets; k++) {
		cum += want->counts[k];
		if (prom->counts[k] != cum)
			return false;
	}
	return prom->records == cum;
}

/* ---- remote_write (read back from the real Prometheus) ------------------------- */

static int le_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* What Prometheus holds from the remote_write sink, as a cumulative view. */
static void rw_view(struct view *v)
{
	json_t *res = prom_query(&sb, rw_web_port, PROM_FAMILY "_bucket");
	double pairs[KTEL_HIST_BUCKETS][2], d;
	size_t n = 0;

	memset(v, 0, sizeof(*v));
	for (size_t i = 0; i < json_array_size(res) && n < KTEL_HIST_BUCKETS; i++, n++) {
		json_t *e = json_array_get(res, i);
		const char *le = json_string_value(
			json_object_get(json_object_get(e, "metric"), "le"));

		pairs[n][0] = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);
		pairs[n][1] = strtod(json_string_value(
					     json_array_get(json_object_get(e, "value"), 1)),
				     NULL);
	}
	json_decref(res);
	qsort(pairs, n, sizeof(pairs[0]), le_cmp);
	for (size_t k = 0; k < n; k++)
		v->counts[k] = (uint64_t)pairs[k][1];
	v->n_buckets = (uint32_t)n;
	d = prom_query_value(&sb, rw_web_port, PROM_FAMILY "_count");
	v->records = d < 0 ? 0 : (size_t)d;
	d = prom_query_value(&sb, rw_web_port, PROM_FAMILY "_sum");
	/* The pushed double as Prometheus holds it (its API prints the
	 * shortest decimal that reads back exactly): compared like a scrape. */
	v->has_sum = d >= 0;
	v->sum_s = d < 0 ? 0 : d;
}

/* ---- statsd ------------------------------------------------------------------ */

static void add_counter(json_t *o, const char *key, uint64_t n)
{
	if (n)
		json_object_set_new(o, key, json_real((double)n));
}

/*
 * A JSON bound (microseconds) as a dotted StatsD bound: in seconds, a plain
 * decimal, '.' as '_' and "+Inf" as "Inf" (neither '.' nor '+' is a
 * name-segment character).
 */
static void dotted_bound(const char *le, char *out, size_t size)
{
	if (strcmp(le, "+Inf") == 0) {
		snprintf(out, size, "Inf");
		return;
	}
	ktel_format_plain(strtod(le, NULL), 6, out, size);
	for (char *c = out; *c; c++)
		if (*c == '.')
			*c = '_';
}

/*
 * What the server should have counted from want: dotted names with the
 * unit (METRIC is in us: _seconds), no dims, cumulative buckets from the
 * first non-empty one (a record's buckets below it are 0, which is what the
 * server counts for a line not sent, so the sum over records is the
 * cumulative count of the summed view).
 */
static json_t *statsd_expected(const struct view *want)
{
	json_t *o = json_object();
	char key[128], le[40];
	uint64_t cum = 0;

	for (uint32_t k = 0; k < want->n_buckets; k++) {
		cum += want->counts[k];
		dotted_bound(want->le[k], le, sizeof(le));
		snprintf(key, sizeof(key), STATSD_PREFIX METRIC "_seconds.bucket.le_%s", le);
		add_counter(o, key, cum);
	}
	add_counter(o, STATSD_PREFIX METRIC "_seconds.count", view_count(want));
	/* The sum is compared apart: statsd_sum_matches(). */
	return o;
}

#define STATSD_SUM_KEY STATSD_PREFIX METRIC "_seconds.sum_us"

/*
 * The sum the server counted against want's. Each record's sum goes out as
 * the integer number of microseconds the JSON line carries, and integers
 * below 2^53 add exactly as doubles: the server's total is the JSON sum.
 */
/* The rest are integer counts, exact as doubles: compared as they are. */
static bool statsd_counts_match(const json_t *got, const json_t *want)
{
	json_t *counts = json_deep_copy(got);
	bool eq;

	json_object_del(counts, STATSD_SUM_KEY);
	eq = json_equal(counts, want);
	json_decref(counts);
	return eq;
}

static bool statsd_sum_matches(const json_t *got, const struct view *want)
{
	double s = json_number_value(json_object_get(got, STATSD_SUM_KEY));

	assert_true(want->sum < (1ULL << 53));
	return want->has_sum && s == (double)want->sum;
}

static json_t *statsd_got(int gen)
{
	/* Only the metric's names: self-telemetry (t.ktel_sink_sent...) may
	 * arrive too. */
	static const char *const prefixes[] = {STATSD_PREFIX METRIC "_seconds.", NULL};
	json_t *totals = statsd_server_totals(&statsd, gen), *got;

	assert_int_equal(statsd_counter(totals, "statsd.bad_lines_seen"), 0);
	got = statsd_counters_under(totals, prefixes);
	json_decref(totals);
	return got;
}

/* ---- the daemon's own account of its sinks ------------------------------------ */

/* Stats of sink name from `ktelemetryctl --json status`. */
static struct ktel_sink_stats ctl_sink_stats(const char *name)
{
	char cmd[1024], *out = NULL;
	struct ktel_sink_stats st = {0};
	json_t *resp, *s;
	size_t len = 0, i;
	FILE *p, *mem;
	int c;

	snprintf(cmd, sizeof(cmd), "%s --socket %s --json status", CTL_BIN, ctl_sock);
	p = popen(cmd, "r");
	assert_non_null(p);
	mem = open_memstream(&out, &len);
	while ((c = fgetc(p)) != EOF)
		fputc(c, mem);
	fclose(mem);
	assert_int_equal(pclose(p), 0);
	resp = json_loads(out, 0, NULL);
	if (!resp)
		fail_msg("ktelemetryctl --json status: not JSON: %s", out);
	json_array_foreach(json_object_get(resp, "sinks"), i, s) {
		if (strcmp(json_string_value(json_object_get(s, "name")) ?: "", name))
			continue;
		st.sent = (uint64_t)json_integer_value(json_object_get(s, "sent"));
		st.dropped = (uint64_t)json_integer_value(json_object_get(s, "dropped"));
		st.errors = (uint64_t)json_integer_value(json_object_get(s, "errors"));
		st.reconnects = (uint64_t)json_integer_value(json_object_get(s, "reconnects"));
		st.queued = (uint64_t)json_integer_value(json_object_get(s, "queued"));
		snprintf(st.last_error, sizeof(st.last_error), "%s",
			 json_string_value(json_object_get(s, "last_error")) ?: "");
		json_decref(resp);
		free(out);
		return st;
	}
	fail_msg("sink %s not in the status answer: %s", name, out);
	return st;
}

/*
 * The statsd sink's stats at a moment when every record it was handed is
 * also in the JSON file: the same routing call gives a record (the metric's
 * and self-telemetry alike) to every sink, so sent + dropped must then equal
 * the file's record count (nothing stays queued for long: the sink sends or
 * drops on the next loop turn).
 */
static struct ktel_sink_stats statsd_stats_settled(size_t *ret_records)
{
	struct ktel_sink_stats st = {0};
	size_t before = 0, after = 0;

	for (int i = 0; i < 50; i++) {
		before = file_records();
		st = ctl_sink_stats("statsd");
		after = file_records();
		if (before == after && st.sent + st.dropped == after && !st.queued) {
			*ret_records = after;
			return st;
		}
		usleep(100000);
	}
	fail_msg("statsd sink: sent %llu + dropped %llu (queued %llu) never matched the %zu "
		 "records of the JSON file",
		 (unsigned long long)st.sent, (unsigned long long)st.dropped,
		 (unsigned long long)st.queued, after);
	return st;
}

/* ---- one settled snapshot of every view --------------------------------------- */

struct snapshot {
	uint64_t pinned;
	struct view json, stream, prom, rw;
	char **file;
	size_t n_file;
	json_t *statsd_want, *statsd_got; /* NULL when the server is not asked */
};

static void snapshot_release(struct snapshot *s)
{
	free_lines(s->file, s->n_file);
	json_decref(s->statsd_want);
	json_decref(s->statsd_got);
	memset(s, 0, sizeof(*s));
}

/* The settled views of the two phases (released by teardown on failure). */
static struct snapshot s1, s2;

/* Take every view; true when they all agree with each other and the map. */
static bool snapshot_take(struct snapshot *s, int statsd_gen)
{
	bool ok;

	memset(s, 0, sizeof(*s));
	s->pinned = ktel_test_pinned_total(sb.pin_root, PIN_NAME);
	prom_scrape(&s->prom);
	rw_view(&s->rw);
	stream_poll();
	s->n_file = file_lines(&s->file);
	for (size_t i = 0; i < s->n_file; i++)
		view_add_line(&s->json, s->file[i]);
	for (size_t i = 0; i < sub.n_lines; i++)
		view_add_line(&s->stream, sub.lines[i]);
	ok = s->json.records > 0 && view_count(&s->json) == s->pinned && sub.n_lines == s->n_file &&
	     prom_matches(&s->prom, &s->json) && prom_matches(&s->rw, &s->json);
	for (size_t i = 0; ok && i < s->n_file; i++)
		ok = strcmp(s->file[i], sub.lines[i]) == 0;
	if (statsd_gen > 0) {
		s->statsd_want = statsd_expected(&s->json);
		s->statsd_got = statsd_got(statsd_gen);
		ok = ok && statsd_sum_matches(s->statsd_got, &s->json) &&
		     statsd_counts_match(s->statsd_got, s->statsd_want);
	}
	return ok;
}

static void snapshot_explain(const struct snapshot *s)
{
	print_error("pinned map total %llu\n", (unsigned long long)s->pinned);
	print_error("json:   %zu records, count %llu\n", s->json.records,
		    (unsigned long long)view_count(&s->json));
	print_error("stream: %zu lines, count %llu, %llu drop notices\n", sub.n_lines,
		    (unsigned long long)view_count(&s->stream),
		    (unsigned long long)sub.drop_notices);
	print_error("json sum %llu us; prometheus: %u buckets, _count %zu, _sum %.17g s\n",
		    (unsigned long long)s->json.sum, s->prom.n_buckets, s->prom.records,
		    s->prom.sum_s);
	print_error("remote_write: %u buckets, _count %zu, _sum %.17g s\n", s->rw.n_buckets,
		    s->rw.records, s->rw.sum_s);
	if (s->statsd_want) {
		char *a = json_dumps(s->statsd_got, JSON_SORT_KEYS);
		char *b = json_dumps(s->statsd_want, JSON_SORT_KEYS);

		print_error("statsd counted %s\nexpected       %s\n", a, b);
		free(a);
		free(b);
	}
	dump_log(&sb);
}

/* Poll until every view settled on the same counts (SETTLE_S at most). */
static void settle(struct snapshot *s, int statsd_gen, const char *phase)
{
	for (int i = 0; i < SETTLE_S * 5; i++) {
		if (snapshot_take(s, statsd_gen))
			return;
		if (i + 1 < SETTLE_S * 5)
			snapshot_release(s);
		usleep(200000);
	}
	snapshot_explain(s);
	fail_msg("%s: the sinks did not settle on the same counts within %ds", phase, SETTLE_S);
}

/* ---- setup ------------------------------------------------------------------- */

static void write_config(void)
{
	FILE *f = fopen(sb.config, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s\", \"interval\": \"1s\",\n"
		" \"self_telemetry\": {\"interval\": \"1s\"},\n"
		" \"sinks\": {\n"
		"  \"file\": {\"type\": \"json\", \"path\": \"%s\"},\n"
		"  \"statsd\": {\"type\": \"statsd\", \"host\": \"127.0.0.1\", \"port\": %u,\n"
		"             \"tags\": \"dotted\", \"prefix\": \"" STATSD_PREFIX "\",\n"
		"             \"reconnect_min\": \"50ms\", \"reconnect_max\": \"200ms\"},\n"
		"  \"live\": {\"type\": \"stream\", \"socket\": \"%s\"},\n"
		"  \"prom\": {\"type\": \"prometheus\", \"listen\": \"127.0.0.1\", \"port\": %u},\n"
		"  \"rw\": {\"type\": \"remote_write\", \"interval\": \"1s\",\n"
		"          \"url\": \"http://127.0.0.1:%u/api/v1/write\"}\n"
		" }}\n",
		plugin_dir, sb.pin_root, sb.state, ctl_sock, sb.out, statsd.udp_port, stream_sock,
		prom_port, rw_web_port);
	assert_int_equal(fclose(f), 0);
}

/* Only compaction_duration: its .so copied into a root-owned 0755 dir, 0644. */
static void make_plugin_dir(void)
{
	char cmd[2000];

	snprintf(plugin_dir, sizeof(plugin_dir), "%s/plugins", sb.dir);
	assert_int_equal(mkdir(plugin_dir, 0755), 0);
	assert_int_equal(chmod(plugin_dir, 0755), 0);
	snprintf(cmd, sizeof(cmd), "cp %s/compaction_duration.so %s/ && chmod 0644 %s/*.so",
		 KTEL_PLUGIN_DIR, plugin_dir, plugin_dir);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	char dir[700];

	sandbox_init(&sb, "sinks-together");
	snprintf(stream_sock, sizeof(stream_sock), "%s/stream.sock", sb.dir);
	snprintf(ctl_sock, sizeof(ctl_sock), "%s/control.sock", sb.dir);
	snprintf(dir, sizeof(dir), "%s/statsd", sb.dir);
	statsd_server_init(&statsd, dir);
	prom_port = statsd_free_port(SOCK_STREAM);
	rw_web_port = prom_free_port();
	make_plugin_dir();
	write_config();
	return 0;
}

static int teardown(void **state)
{
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGTERM);
		if (daemon_wait(daemon_pid, 20) != 0)
			dump_log(&sb);
		daemon_pid = -1;
	}
	snapshot_release(&s1);
	snapshot_release(&s2);
	if (prom_server_pid > 0) {
		kill(prom_server_pid, SIGTERM);
		waitpid(prom_server_pid, NULL, 0);
		prom_server_pid = 0;
	}
	if (sub.fd >= 0)
		close(sub.fd);
	for (size_t i = 0; i < sub.n_lines; i++)
		free(sub.lines[i]);
	statsd_server_cleanup(&statsd);
	sandbox_cleanup(&sb);
	return 0;
}

/* ---- the test ------------------------------------------------------------------ */

/*
 * Compaction events in two windows: the groups are more than the 1s pull
 * interval apart, so a pull boundary falls between them.
 */
static void trigger_two_windows(void)
{
	for (int w = 0; w < 2; w++) {
		if (w)
			usleep(1100000);
		for (int i = 0; i < 3; i++) {
			trigger_compaction();
			usleep(50000);
		}
	}
}

static void test_five_sinks_same_counts(void **state)
{
	struct ktel_sink_stats st1, st2, other;
	size_t records;
	static const char *const healthy[] = {"file", "live", "prom", "rw"};

	statsd_server_start(&statsd, 1);
	prom_server_start(&sb, rw_web_port, 0, "--web.enable-remote-write-receiver",
			  &prom_server_pid);
	daemon_pid = daemon_start(&sb, NULL);
	if (!log_wait_for(&sb, "metric " METRIC ": collecting", 20)) {
		dump_log(&sb);
		fail_msg("daemon did not start collecting " METRIC);
	}
	/* Connected before the first event: the ring replays anything earlier. */
	stream_connect();

	/* 1: all five sinks */
	trigger_two_windows();
	settle(&s1, 1, "all five sinks");
	assert_true(s1.json.records >= 2);
	st1 = statsd_stats_settled(&records);
	printf("phase 1: %zu records (all metrics), %llu events; statsd sent %llu dropped %llu\n",
	       records, (unsigned long long)view_count(&s1.json), (unsigned long long)st1.sent,
	       (unsigned long long)st1.dropped);
	assert_int_equal(st1.dropped, 0);
	assert_int_equal(st1.errors, 0);

	/* 2: the StatsD server is gone; the others carry on */
	statsd_server_stop(&statsd);
	trigger_two_windows();
	for (int i = 0; i < SETTLE_S * 5; i++) {
		if (snapshot_take(&s2, 0) && s2.json.records >= s1.json.records + 2)
			break;
		if (i + 1 == SETTLE_S * 5) {
			snapshot_explain(&s2);
			fail_msg("without statsd: json, stream, prometheus and remote_write did not settle on "
				 "new events within %ds",
				 SETTLE_S);
		}
		snapshot_release(&s2);
		usleep(200000);
	}
	/* Every record routed to statsd was sent or counted as dropped
	 * (statsd_stats_settled); at least the metric's windows since the
	 * kill were dropped. */
	st2 = statsd_stats_settled(&records);
	printf("phase 2: %zu records (all metrics), %llu events; statsd sent %llu dropped %llu errors %llu "
	       "reconnects %llu\n",
	       records, (unsigned long long)view_count(&s2.json), (unsigned long long)st2.sent,
	       (unsigned long long)st2.dropped, (unsigned long long)st2.errors,
	       (unsigned long long)st2.reconnects);
	assert_true(s2.json.records >= s1.json.records + 2);
	assert_true(st2.dropped >= s2.json.records - s1.json.records);
	assert_true(st2.errors >= 1);
	/* Status says which error, not only how many. */
	{
		char want[128];

		snprintf(want, sizeof(want), "sendto 127.0.0.1:%u: connection refused",
			 statsd.udp_port);
		assert_string_equal(ctl_sink_stats("statsd").last_error, want);
	}
	/* The others were not touched by it. */
	for (size_t i = 0; i < sizeof(healthy) / sizeof(healthy[0]); i++) {
		other = ctl_sink_stats(healthy[i]);
		if (other.dropped || other.errors)
			fail_msg("sink %s: dropped %llu, errors %llu while statsd was down",
				 healthy[i], (unsigned long long)other.dropped,
				 (unsigned long long)other.errors);
	}
	assert_int_equal(sub.drop_notices, 0);
	snapshot_release(&s1);
	snapshot_release(&s2);

	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 20), 0);
	daemon_pid = -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_five_sinks_same_counts, setup, teardown),
	};

	ktel_test_require_root("test_sinks_together");
	statsd_ensure_installed("test_sinks_together");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
