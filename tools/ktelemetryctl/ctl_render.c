// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Human rendering for ktelemetryctl (see ctl_render.h). */
#include "ctl_render.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ktelemetry/plugin.h>

#include "error.h"
#include "utf8.h"

/* ---- human rendering ---------------------------------------------------------- */

/*
 * "%s" of s into b[0..l) (l > 0); when it does not fit, the cut falls on a
 * character boundary: names, labels and reasons in answers
 * are UTF-8, and half a character would reach the terminal as garbage.
 */
static void copy_text(char *b, size_t l, const char *s)
{
	if ((size_t)snprintf(b, l, "%s", s) >= l)
		ktel_utf8_trim_str(b);
}

static const char *jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

static long long jint(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* 1024 -> "1K", 3145728 -> "3M", 1500 -> "1500" (bpftrace's bounds). */
static void fmt_bound(double v, char *buf, size_t len)
{
	static const char suffix[] = "KMGTP";
	double unit = 1024.0 * 1024 * 1024 * 1024 * 1024;

	for (int i = 4; i >= 0; i--, unit /= 1024)
		if (v >= unit && fmod(v, unit) == 0) {
			snprintf(buf, len, "%.0f%c", v / unit, suffix[i]);
			return;
		}
	snprintf(buf, len, "%.0f", v);
}

static bool le_at(const json_t *le, size_t k, double *ret)
{
	const json_t *v = json_array_get(le, k);

	if (!json_is_number(v))
		return false;
	*ret = json_number_value(v);
	return true;
}

int ktel_ctl_bucket_label(const json_t *hist, size_t k, char *buf, size_t len)
{
	const json_t *le = json_object_get(hist, "le");
	bool inclusive = strcmp(jstr(hist, "scheme"), "log2") == 0;
	char lo[32] = "0", hi[32] = "+Inf";
	double v;

	if (k >= json_array_size(le))
		return -EINVAL;
	if (k > 0 && le_at(le, k - 1, &v))
		fmt_bound(v, lo, sizeof(lo));
	else if (k == 0 && strcmp(jstr(hist, "scheme"), "linear") == 0)
		fmt_bound((double)jint(hist, "linear_min"), lo, sizeof(lo));
	if (le_at(le, k, &v))
		fmt_bound(v, hi, sizeof(hi));
	if (strcmp(hi, "+Inf") == 0)
		snprintf(buf, len, "%c%s, +Inf)", inclusive ? '(' : '[', lo);
	else if (inclusive)
		snprintf(buf, len, "%c%s, %s]", k == 0 ? '[' : '(', lo, hi);
	else
		snprintf(buf, len, "[%s, %s)", lo, hi);
	return 0;
}

void ktel_ctl_draw_hist(FILE *out, const json_t *hist, int width)
{
	const json_t *counts = json_object_get(hist, "counts");
	size_t n = json_array_size(counts), first = n, last = 0;
	unsigned long long max = 0;
	int label_w = 16;
	char label[80];

	for (size_t k = 0; k < n; k++) {
		unsigned long long c = (unsigned long long)json_integer_value(
			json_array_get(counts, k));

		if (!c)
			continue;
		first = first < k ? first : k;
		last = k;
		max = c > max ? c : max;
	}
	if (first == n) {
		fprintf(out, "(no events)\n");
		return;
	}
	for (size_t k = first; k <= last; k++)
		if (!ktel_ctl_bucket_label(hist, k, label, sizeof(label)) &&
		    (int)strlen(label) + 1 > label_w)
			label_w = (int)strlen(label) + 1;
	for (size_t k = first; k <= last; k++) {
		unsigned long long c = (unsigned long long)json_integer_value(
			json_array_get(counts, k));
		int bar = (int)(c * (unsigned long long)width / max);

		if (ktel_ctl_bucket_label(hist, k, label, sizeof(label)))
			break;
		fprintf(out, "%-*s %8llu |", label_w, label, c);
		for (int i = 0; i < width; i++)
			fputc(i < bar ? '@' : ' ', out);
		fprintf(out, "|\n");
	}
}

static void fmt_dims(const json_t *rec, char *buf, size_t len)
{
	const json_t *dims = json_object_get(rec, "dims");
	const char *key;
	json_t *v;
	size_t off = 0;

	buf[0] = '\0';
	json_object_foreach((json_t *)dims, key, v) {
		char *s = json_is_string(v) ? strdup(json_string_value(v))
					    : json_dumps(v, JSON_ENCODE_ANY);

		if (off < len)
			off += (size_t)snprintf(buf + off, len - off, "%s%s=%s", off ? ", " : "",
						key, s ? s : "?");
		free(s);
	}
	/* Past len, a piece was cut (and nothing after it written). */
	if (off >= len)
		ktel_utf8_trim_str(buf);
	if (!buf[0])
		snprintf(buf, len, "(all)");
}

static void render_record(FILE *out, const json_t *rec, bool bars)
{
	const char *type = jstr(rec, "type");
	char dims[512];

	fmt_dims(rec, dims, sizeof(dims));
	if (strcmp(type, "histogram") == 0) {
		const json_t *h = json_object_get(rec, "histogram");

		fprintf(out, "@%s[%s]: count %lld", jstr(rec, "metric"), dims, jint(h, "count"));
		if (json_object_get(h, "sum"))
			fprintf(out, ", sum %lld %s", jint(h, "sum"), jstr(rec, "unit"));
		fprintf(out, "\n");
		if (bars)
			ktel_ctl_draw_hist(out, h, 52);
		return;
	}
	if (strcmp(type, "counter") == 0)
		fprintf(out, "%s[%s]: %lld (total %lld)\n", jstr(rec, "metric"), dims,
			jint(rec, "value"), jint(rec, "total"));
	else
		fprintf(out, "%s[%s]: %lld\n", jstr(rec, "metric"), dims, jint(rec, "value"));
}

/* A metric's attribution, short: "; by cgroup (block_subject charged)", or
 * "; attribution refused: why"; nothing when it has none. */
static void render_metric_attr(FILE *out, const json_t *a)
{
	if (!json_is_object(a))
		return;
	if (json_is_string(json_object_get(a, "refused"))) {
		fprintf(out, "; attribution refused: %s", jstr(a, "refused"));
		return;
	}
	fprintf(out, "; by %s", jstr(a, "by"));
	if (json_is_string(json_object_get(a, "block_subject")))
		fprintf(out, " (block_subject %s)", jstr(a, "block_subject"));
}

static void render_show(FILE *out, const json_t *resp)
{
	const json_t *last = json_object_get(resp, "last_pull");
	const json_t *totals = json_object_get(resp, "totals");
	const json_t *window = json_object_get(resp, "window");
	size_t i;
	json_t *rec;

	fprintf(out, "%s (%s), %s", jstr(resp, "metric"), jstr(resp, "unit"),
		json_is_true(json_object_get(resp, "enabled")) ? "enabled" : "disabled");
	render_metric_attr(out, json_object_get(resp, "attribution"));
	fputc('\n', out);
	if (!json_is_object(last)) {
		fprintf(out, "not pulled yet: nothing to show (ktelemetryctl pull %s)\n",
			jstr(resp, "metric"));
		return;
	}
	fprintf(out, "\ncumulative, as of the last pull (%s):\n", jstr(last, "time"));
	if (!json_array_size(totals))
		fprintf(out, "(no keys)\n");
	json_array_foreach(totals, i, rec)
		render_record(out, rec, true);
	fprintf(out, "\nlast window:\n");
	if (!json_array_size(window))
		fprintf(out, "(nothing new in the last window)\n");
	json_array_foreach(window, i, rec) {
		fprintf(out, "%s .. %s\n", jstr(rec, "start"), jstr(rec, "end"));
		render_record(out, rec, true);
	}
	if (jint(resp, "window_not_kept"))
		fprintf(out, "(and %lld more records, not kept: the sinks have them)\n",
			jint(resp, "window_not_kept"));
}

static void render_pull(FILE *out, const json_t *resp)
{
	const json_t *records = json_object_get(resp, "records");
	size_t i;
	json_t *rec;

	json_array_foreach(records, i, rec)
		render_record(out, rec, false);
	fprintf(out, "%lld metric(s) pulled, %zu record(s)\n", jint(resp, "pulled"),
		json_array_size(records));
	if (jint(resp, "records_not_kept"))
		fprintf(out, "(and %lld more records, not kept: the sinks have them)\n",
			jint(resp, "records_not_kept"));
}

/* A column of the list table: header and how to get the cell. */
struct column {
	const char *header;
	void (*cell)(const json_t *m, char *buf, size_t len);
};

static void cell_name(const json_t *m, char *b, size_t l)
{
	copy_text(b, l, jstr(m, "name"));
}

static void cell_plugin(const json_t *m, char *b, size_t l)
{
	copy_text(b, l, jstr(m, "plugin"));
}

static void cell_state(const json_t *m, char *b, size_t l)
{
	if (json_is_string(json_object_get(m, "problem")))
		snprintf(b, l, "unavailable");
	else
		snprintf(b, l, "%s",
			 json_is_true(json_object_get(m, "enabled")) ? "enabled" : "disabled");
}

static void cell_unit(const json_t *m, char *b, size_t l)
{
	copy_text(b, l, jstr(m, "unit"));
}

static void cell_interval(const json_t *m, char *b, size_t l)
{
	long long ms = jint(m, "interval_ms");

	if (ms % 1000)
		snprintf(b, l, "%lldms", ms);
	else
		snprintf(b, l, "%llds", ms / 1000);
}

static void cell_atom(const json_t *m, char *b, size_t l)
{
	copy_text(b, l, json_is_string(json_object_get(m, "atom")) ? jstr(m, "atom") : "-");
}

static void cell_note(const json_t *m, char *b, size_t l)
{
	if (json_is_string(json_object_get(m, "problem")))
		copy_text(b, l, jstr(m, "problem"));
	else if (jint(m, "lease_ms") && json_is_true(json_object_get(m, "enabled")))
		snprintf(b, l, "lease %lld ms", jint(m, "lease_ms"));
	else
		b[0] = '\0';
}

static const struct column list_columns[] = {
	{"NAME", cell_name}, {"PLUGIN", cell_plugin},     {"STATE", cell_state},
	{"UNIT", cell_unit}, {"INTERVAL", cell_interval}, {"ATOM", cell_atom},
	{"NOTE", cell_note},
};

/* "refused plugin files" and one line per file, when there are any. */
static void render_refused(FILE *out, const json_t *resp)
{
	const json_t *a = json_object_get(resp, "refused"), *r;
	json_int_t more = json_integer_value(json_object_get(resp, "refused_not_listed"));
	size_t i;

	if (!json_array_size(a) && more <= 0)
		return;
	fprintf(out, "\nrefused plugin files\n");
	json_array_foreach(a, i, r)
		fprintf(out, "  %s\n", jstr(r, "reason"));
	if (more > 0)
		fprintf(out, "  and %lld more, not listed (the daemon's log names each)\n",
			(long long)more);
}

static void render_list(FILE *out, const json_t *resp)
{
	const json_t *metrics = json_object_get(resp, "metrics");
	int w[KTEL_ARRAY_SIZE(list_columns)];
	char cell[KTEL_ERR_MSG_MAX];
	size_t i, c;
	json_t *m;

	for (c = 0; c < KTEL_ARRAY_SIZE(list_columns); c++)
		w[c] = (int)strlen(list_columns[c].header);
	json_array_foreach(metrics, i, m)
		for (c = 0; c < KTEL_ARRAY_SIZE(list_columns); c++) {
			list_columns[c].cell(m, cell, sizeof(cell));
			if ((int)strlen(cell) > w[c])
				w[c] = (int)strlen(cell);
		}
	for (c = 0; c < KTEL_ARRAY_SIZE(list_columns); c++)
		fprintf(out, c + 1 < KTEL_ARRAY_SIZE(list_columns) ? "%-*s  " : "%-*s\n",
			c + 1 < KTEL_ARRAY_SIZE(list_columns) ? w[c] : 0, list_columns[c].header);
	json_array_foreach(metrics, i, m)
		for (c = 0; c < KTEL_ARRAY_SIZE(list_columns); c++) {
			list_columns[c].cell(m, cell, sizeof(cell));
			fprintf(out, c + 1 < KTEL_ARRAY_SIZE(list_columns) ? "%-*s  " : "%-*s\n",
				c + 1 < KTEL_ARRAY_SIZE(list_columns) ? w[c] : 0, cell);
		}
	render_refused(out, resp);
}

static void render_program(FILE *out, const json_t *p)
{
	fprintf(out, "    %-28s %-36s ", jstr(p, "name"), jstr(p, "section"));
	if (!json_is_true(json_object_get(p, "selected"))) {
		fprintf(out, "skipped: %s\n", jstr(p, "skip_reason"));
		return;
	}
	fprintf(out, "%s id %lld",
		json_is_true(json_object_get(p, "attached")) ? "attached" : "detached",
		jint(p, "prog_id"));
	if (json_object_get(p, "run_cnt"))
		fprintf(out, ", %lld runs, %.3f ms (%.0f ns/run)", jint(p, "run_cnt"),
			jint(p, "run_time_ns") / 1e6,
			json_number_value(json_object_get(p, "ns_per_run")));
	if (json_object_get(p, "recursion_misses"))
		fprintf(out, ", %lld recursion misses", jint(p, "recursion_misses"));
	if (json_is_string(json_object_get(p, "attach_error")))
		fprintf(out, ", attach error: %s", jstr(p, "attach_error"));
	fputc('\n', out);
}

/* A plugin's programs' cost over status's window, when bpf_stats measured it. */
static void render_cost(FILE *out, const json_t *cost)
{
	if (!json_is_object(cost))
		return;
	fprintf(out,
		"    cost: %.4f%% of one CPU over the last %.1f s (%.3f ms run time); "
		"%lld runs, %.3f ms in all\n",
		100 * json_number_value(json_object_get(cost, "cpu_share")),
		json_number_value(json_object_get(cost, "window_s")),
		jint(cost, "window_run_time_ns") / 1e6, jint(cost, "run_cnt"),
		jint(cost, "run_time_ns") / 1e6);
}

/* How attribution names cgroups: nothing before a metric attributes. */
static void render_attribution(FILE *out, const json_t *a)
{
	if (!json_is_object(a))
		return;
	fprintf(out, "\nattribution\n  naming %s", jstr(a, "naming"));
	if (strcmp(jstr(a, "naming"), "events") == 0)
		fprintf(out, " (the kernel's cgroup events, walks for the cgroups made before)");
	else
		fprintf(out, " (walks of cgroupfs alone)");
	if (json_is_string(json_object_get(a, "naming_problem")))
		fprintf(out, ": %s", jstr(a, "naming_problem"));
	fprintf(out,
		"\n  %lld cgroup names cached, %lld walks, %lld misses, %lld truncated; "
		"%lld cgroups released (%lld at their release event)\n"
		"  cgroup events: %lld taken, %lld lost, %lld malformed, %lld with a cut path\n",
		jint(a, "cgroups"), jint(a, "walks"), jint(a, "misses"), jint(a, "truncated"),
		jint(a, "released"), jint(a, "released_by_event"), jint(a, "events"),
		jint(a, "events_lost"), jint(a, "events_malformed"), jint(a, "events_path_cut"));
}

static void render_status(FILE *out, const json_t *resp)
{
	const json_t *d = json_object_get(resp, "daemon"), *p, *m, *s, *prog;
	size_t i, j;

	fprintf(out,
		"daemon\n  pid %lld, up %.0f s, config %s\n  control socket %s, pin root %s, "
		"state %s\n",
		jint(d, "pid"), json_number_value(json_object_get(d, "uptime_s")),
		jstr(d, "config"), jstr(d, "control_socket"), jstr(d, "pin_root"),
		jstr(d, "state_file"));
	/* Said once here rather than as zeros on every program. */
	if (json_is_true(json_object_get(d, "bpf_stats")))
		fprintf(out, "  bpf_stats on (%s): run counts and times are measured\n",
			strcmp(jstr(d, "bpf_stats_by"), "daemon") == 0
				? "held by the daemon, self_telemetry.bpf_stats"
				: "sysctl kernel.bpf_stats_enabled");
	else
		fprintf(out, "  bpf_stats off: programs' run counts and times are not measured "
			     "(sysctl kernel.bpf_stats_enabled=1, or self_telemetry.bpf_stats)\n");
	if (json_is_number(json_object_get(resp, "programs_cpu_share")))
		fprintf(out,
			"  programs' cost: %.4f%% of one CPU, every plugin, since the last "
			"status\n",
			100 * json_number_value(json_object_get(resp, "programs_cpu_share")));
	if (json_is_string(json_object_get(d, "test_fault")))
		fprintf(out, "  test fault %s\n", jstr(d, "test_fault"));
	fprintf(out, "\nplugins\n");
	json_array_foreach(json_object_get(resp, "plugins"), i, p) {
		fprintf(out, "  %s %s  %s", jstr(p, "name"), jstr(p, "version"), jstr(p, "path"));
		if (json_is_true(json_object_get(p, "unsupported")))
			fprintf(out, "  unsupported: %s", jstr(p, "reason"));
		fputc('\n', out);
		json_array_foreach(json_object_get(p, "programs"), j, prog)
			render_program(out, prog);
		render_cost(out, json_object_get(p, "cost"));
	}
	render_refused(out, resp);
	fprintf(out, "\nmetrics\n");
	json_array_foreach(json_object_get(resp, "metrics"), i, m) {
		const json_t *lp = json_object_get(m, "last_pull");

		fprintf(out, "  %-28s %-8s ", jstr(m, "name"),
			json_is_true(json_object_get(m, "enabled")) ? "enabled" : "disabled");
		if (json_is_object(lp))
			fprintf(out,
				"last pull %s: %lld keys, %s, %lld syscalls, %.1f us, %lld "
				"records%s",
				jstr(lp, "time"), jint(lp, "keys"), jstr(lp, "method"),
				jint(lp, "syscalls"), jint(lp, "duration_ns") / 1000.0,
				jint(lp, "records"),
				json_is_true(json_object_get(lp, "truncated")) ? " (truncated)"
									       : "");
		else
			fprintf(out, "never pulled");
		fprintf(out, "; %lld pulls, %lld errors", jint(m, "pulls"), jint(m, "pull_errors"));
		render_metric_attr(out, json_object_get(m, "attribution"));
		if (json_is_string(json_object_get(m, "problem")))
			fprintf(out, "; %s", jstr(m, "problem"));
		fputc('\n', out);
	}
	fprintf(out, "\nsinks\n");
	json_array_foreach(json_object_get(resp, "sinks"), i, s) {
		fprintf(out,
			"  %s (%s%s%s): sent %lld, dropped %lld, errors %lld, reconnects %lld, "
			"queued %lld, refused %lld",
			jstr(s, "name"), jstr(s, "type"), jstr(s, "where")[0] ? ", " : "",
			jstr(s, "where"), jint(s, "sent"), jint(s, "dropped"), jint(s, "errors"),
			jint(s, "reconnects"), jint(s, "queued"), jint(s, "refused"));
		/* The count alone does not say what failed. */
		if (jstr(s, "last_error")[0])
			fprintf(out, "; last error: %s", jstr(s, "last_error"));
		fputc('\n', out);
	}
	render_attribution(out, json_object_get(resp, "attribution"));
}

static void render_toggle(FILE *out, const json_t *resp)
{
	size_t i;
	json_t *p;

	fprintf(out, "%s: %s", jstr(resp, "metric"),
		json_is_true(json_object_get(resp, "enabled")) ? "enabled" : "disabled");
	if (jint(resp, "lease_ms") && json_is_true(json_object_get(resp, "enabled")))
		fprintf(out, " for %lld ms", jint(resp, "lease_ms"));
	fputc('\n', out);
	json_array_foreach(json_object_get(resp, "programs"), i, p)
		fprintf(out, "  program %s id %lld %s\n", jstr(p, "name"), jint(p, "prog_id"),
			json_is_true(json_object_get(p, "attached")) ? "attached" : "detached");
}

static void render_reload(FILE *out, const json_t *resp)
{
	fprintf(out, "reloaded\n");
}

static void render_reopen(FILE *out, const json_t *resp)
{
	long long n = jint(resp, "sinks");

	fprintf(out, "reopen: %lld sink%s asked to reopen %s file\n", n, n == 1 ? "" : "s",
		n == 1 ? "its" : "their");
}

/* "MS" as a person reads a lease: 1h02m03s, 2m05s, 9.5s, 250ms. */
static void fmt_ms(long long ms, char *buf, size_t len)
{
	if (ms < 1000)
		snprintf(buf, len, "%lldms", ms);
	else if (ms < 60000)
		snprintf(buf, len, "%.1fs", ms / 1000.0);
	else if (ms < 3600000)
		snprintf(buf, len, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
	else
		snprintf(buf, len, "%lldh%02lldm%02llds", ms / 3600000, ms / 60000 % 60,
			 ms / 1000 % 60);
}

/* The client's `leases` answer: {"leases": [{name, lease_ms, left_ms}]}. */
static void render_leases(FILE *out, const json_t *resp)
{
	const json_t *leases = json_object_get(resp, "leases"), *l;
	char name[KTEL_ERR_MSG_MAX], lease[32], left[32];
	int w = (int)strlen("NAME");
	size_t i;

	if (!json_array_size(leases)) {
		fprintf(out, "no metric is enabled with a lease (enable NAME --for DURATION)\n");
		return;
	}
	json_array_foreach(leases, i, l) {
		copy_text(name, sizeof(name), jstr(l, "name"));
		if ((int)strlen(name) > w)
			w = (int)strlen(name);
	}
	fprintf(out, "%-*s  %-10s  %s\n", w, "NAME", "LEASE", "LEFT");
	json_array_foreach(leases, i, l) {
		copy_text(name, sizeof(name), jstr(l, "name"));
		fmt_ms(jint(l, "lease_ms"), lease, sizeof(lease));
		if (json_is_integer(json_object_get(l, "left_ms")))
			fmt_ms(jint(l, "left_ms"), left, sizeof(left));
		else
			snprintf(left, sizeof(left), "?");
		fprintf(out, "%-*s  %-10s  %s\n", w, name, lease, left);
	}
}

static void render_help(FILE *out, const json_t *resp)
{
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(resp, "commands"), i, c)
		fprintf(out, "  %-8s %s\n", jstr(c, "name"), jstr(c, "help"));
}

static void render_watch(FILE *out, const json_t *resp)
{
	size_t i;
	json_t *s;

	json_array_foreach(json_object_get(resp, "sockets"), i, s)
		fprintf(out, "%s %s\n", jstr(s, "sink"), jstr(s, "socket"));
}

static const struct {
	const char *cmd;
	void (*fn)(FILE *out, const json_t *resp);
} renderers[] = {
	{"list", render_list},     {"status", render_status}, {"show", render_show},
	{"pull", render_pull},     {"enable", render_toggle}, {"disable", render_toggle},
	{"reload", render_reload}, {"help", render_help},     {"watch", render_watch},
	{"reopen", render_reopen}, {"leases", render_leases},
};

void ktel_ctl_render_stream_line(FILE *out, const char *line)
{
	json_t *rec = json_loads(line, 0, NULL);

	if (json_is_object(rec) && json_is_string(json_object_get(rec, "metric")))
		render_record(out, rec, false);
	else
		fprintf(out, "%s\n", line);
	json_decref(rec);
}

void ktel_ctl_render(FILE *out, const char *cmd, const json_t *resp)
{
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(renderers); i++)
		if (strcmp(renderers[i].cmd, cmd) == 0) {
			renderers[i].fn(out, resp);
			return;
		}
	json_dumpf(resp, out, JSON_INDENT(2));
	fputc('\n', out);
}

/* Enumerators of a "labels" object ({"0": "BLOCK_OP_READ", ...}), one per
 * line as "NAME = value", the way the plugin's C source spells them. */
static void render_enum_labels(FILE *out, int indent, const json_t *labels)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)labels, k, v)
		fprintf(out, "%*s%s = %s\n", indent, "", json_string_value(v), k);
}

static void render_layout(FILE *out, int indent, const char *what, const json_t *l)
{
	size_t i;
	json_t *f;

	if (!json_is_object(l))
		return;
	fprintf(out, "%*s%s: %s (%lld bytes)\n", indent, "", what, jstr(l, "type"),
		jint(l, "size"));
	json_array_foreach(json_object_get(l, "fields"), i, f) {
		const json_t *labels = json_object_get(f, "labels");

		fprintf(out, "%*s+%-4lld %-24s %-10s %lld byte%s", indent + 2, "",
			jint(f, "offset"), jstr(f, "name")[0] ? jstr(f, "name") : "(scalar)",
			jstr(f, "kind"), jint(f, "size"), jint(f, "size") == 1 ? "" : "s");
		if (jint(f, "count") > 1)
			fprintf(out, " [%lld x %lld]", jint(f, "count"), jint(f, "elem_size"));
		fprintf(out, "%s\n", json_is_true(json_object_get(f, "signed")) ? " signed" : "");
		if (json_object_size(labels))
			render_enum_labels(out, indent + 8, labels);
	}
}

/* Enumerators with the short label records carry: "NAME = value -> label"
 * ("-> (number)" for one the rule cannot shorten). */
static void render_short_labels(FILE *out, int indent, const json_t *labels,
				const json_t *short_labels)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)labels, k, v) {
		const char *sl = json_string_value(json_object_get(short_labels, k));

		fprintf(out, "%*s%s = %s -> %s\n", indent, "", json_string_value(v), k,
			sl ? sl : "(number)");
	}
}

/* A dimension: its key member, the values its labels take, its label map. */
static void render_dim(FILE *out, const json_t *d)
{
	const json_t *lm = json_object_get(d, "label_map_layout");
	const json_t *sl = json_object_get(d, "short_labels");

	fprintf(out, "    dimension %s = key.%s", jstr(d, "name"), jstr(d, "key_member"));
	if (json_is_string(json_object_get(d, "label_enum")))
		fprintf(out, ", labels from enum %s", jstr(d, "label_enum"));
	if (json_is_object(sl))
		fprintf(out, ", shortened");
	if (json_is_string(json_object_get(d, "label_map")))
		fprintf(out, ", labels from map %s", jstr(d, "label_map"));
	if (json_is_string(json_object_get(d, "device")))
		fprintf(out, ", block device %s (adds dimension \"device\")", jstr(d, "device"));
	fputc('\n', out);
	if (json_is_object(sl))
		render_short_labels(out, 8, json_object_get(d, "labels"), sl);
	else if (json_object_size(json_object_get(d, "labels")))
		render_enum_labels(out, 8, json_object_get(d, "labels"));
	if (!json_is_object(lm))
		return;
	fprintf(out, "      label map %s: %s, max_entries %lld", jstr(lm, "name"), jstr(lm, "type"),
		jint(lm, "max_entries"));
	if (json_is_string(json_object_get(lm, "id_member")))
		fprintf(out, ", id key.%s, name value.%s", jstr(lm, "id_member"),
			jstr(lm, "name_member"));
	fputc('\n', out);
	render_layout(out, 8, "key", json_object_get(lm, "key"));
	render_layout(out, 8, "value", json_object_get(lm, "value"));
}

/*
 * Whether a program would load, and when not, why (its skip reason names
 * the variant that won or the argument count that did not match). A
 * trampoline program (fentry/fexit) can still be refused when it loads.
 */
static void render_program_verdict(FILE *out, const json_t *r, const json_t *p)
{
	bool present = json_is_true(json_object_get(p, "target_present"));
	bool selected = json_is_true(json_object_get(p, "selected"));
	const json_t *load = json_object_get(r, "load");

	if (!json_object_get(p, "target_present"))
		return;
	if (present)
		fprintf(out, " target present");
	else
		fprintf(out, " target MISSING: %s", jstr(p, "target_reason"));
	if (!selected) {
		fprintf(out, ", would not load");
		if (strcmp(jstr(p, "skip_reason"), jstr(p, "target_reason")) != 0)
			fprintf(out, ": %s", jstr(p, "skip_reason"));
	} else if (json_is_true(json_object_get(p, "loaded"))) {
		fprintf(out, ", would load (loaded by this kernel)");
	} else if (json_is_false(json_object_get(p, "loaded"))) {
		fprintf(out, ", would not load: %s", jstr(p, "load_reason"));
	} else if (json_is_object(load)) {
		fprintf(out, "; load not verified");
	} else if (json_is_true(json_object_get(p, "trampoline"))) {
		fprintf(out, "; load not verified (kernels may refuse fentry/fexit at load)");
	} else {
		fprintf(out, ", would load");
	}
}

/* The params of an inspect report: name, current value, default, unit,
 * description; where the values came from, or why they are unknown. */
static void render_params(FILE *out, const json_t *r)
{
	const json_t *params = json_object_get(r, "params"), *p;
	size_t i;

	if (!json_array_size(params))
		return;
	fprintf(out, "\n  params (metrics.NAME.params)\n");
	json_array_foreach(params, i, p) {
		const char *unit = jstr(p, "unit");
		const json_t *v = json_object_get(p, "value");

		fprintf(out, "    %-20s current ", jstr(p, "name"));
		if (json_is_integer(v))
			fprintf(out, "%lld%s%s", (long long)json_integer_value(v), *unit ? " " : "",
				unit);
		else
			fprintf(out, "?");
		fprintf(out, ", default %lld%s%s: %s\n", jint(p, "default"), *unit ? " " : "", unit,
			jstr(p, "description"));
	}
	if (json_is_string(json_object_get(r, "params_note")))
		fprintf(out, "    (%s)\n", jstr(r, "params_note"));
	else if (json_is_string(json_object_get(r, "params_from")))
		fprintf(out, "    (current: the kernel's .rodata map %lld of the daemon's %s)\n",
			jint(r, "params_map_id"), jstr(r, "params_from"));
}

void ktel_ctl_render_inspect(FILE *out, const json_t *r)
{
	size_t i, j;
	json_t *m, *p, *d;

	fprintf(out, "plugin %s %s: %s\n  %s, BPF object %lld bytes\n", jstr(r, "plugin"),
		jstr(r, "version"), jstr(r, "description"), jstr(r, "path"), jint(r, "bpf_bytes"));
	json_array_foreach(json_object_get(r, "metrics"), i, m) {
		const json_t *h = json_object_get(m, "histogram");
		const json_t *map = json_object_get(m, "map");

		fprintf(out, "\n  metric %s (%s, unit %s", jstr(m, "name"), jstr(m, "model"),
			jstr(m, "unit"));
		if (json_is_string(json_object_get(m, "atom")))
			fprintf(out, ", atom %s %lld", jstr(m, "atom"), jint(m, "atom_id"));
		fprintf(out, ")\n");
		if (json_is_object(map))
			fprintf(out, "    map %s: %s, max_entries %lld\n", jstr(map, "name"),
				jstr(map, "type"), jint(map, "max_entries"));
		render_layout(out, 4, "key", json_object_get(m, "key"));
		render_layout(out, 4, "value", json_object_get(m, "value"));
		render_layout(out, 4, "event", json_object_get(m, "event"));
		if (json_is_object(h))
			fprintf(out, "    histogram: scheme %s, %lld buckets%s\n",
				jstr(h, "scheme"), jint(h, "buckets"),
				json_is_true(json_object_get(h, "sum")) ? ", with sum" : "");
		if (json_is_string(json_object_get(m, "values")))
			fprintf(out, "    values: %s per integer member\n", jstr(m, "values"));
		json_array_foreach(json_object_get(m, "dims"), j, d)
			render_dim(out, d);
		if (json_is_string(json_object_get(m, "error")))
			fprintf(out, "    UNREADABLE: %s\n", jstr(m, "error"));
	}
	fprintf(out, "\n  programs\n");
	json_array_foreach(json_object_get(r, "programs"), i, p) {
		fprintf(out, "    %-28s %-36s", jstr(p, "name"), jstr(p, "section"));
		if (json_is_string(json_object_get(p, "variant_group")))
			fprintf(out, " variant of %s", jstr(p, "variant_group"));
		render_program_verdict(out, r, p);
		fputc('\n', out);
	}
	render_params(out, r);
	if (json_is_object(json_object_get(r, "load")))
		fprintf(out, "\n  load %s: %s\n",
			json_is_true(json_object_get(json_object_get(r, "load"), "verified"))
				? "checked"
				: "NOT VERIFIED",
			jstr(json_object_get(r, "load"), "note"));
	if (json_is_string(json_object_get(r, "unsupported")))
		fprintf(out, "\n  unsupported on this kernel: %s\n", jstr(r, "unsupported"));
}

/* ---- the live view (top) ------------------------------------------------------- */

/* A row of the live view: one key of one metric. */
struct top_row {
	char label[256];       /* metric[dims], control bytes replaced */
	char brief[256];       /* metric[values of the dims], for a narrow column */
	long long last, total; /* events in the last window, since the map was created */
	const json_t *hist;    /* the last window's histogram, or NULL */
	const char *unit;
	char note[160]; /* instead of numbers: "not pulled yet", an error */
};

struct top_rows {
	struct top_row *v;
	size_t n, cap;
};

static struct top_row *top_row_add(struct top_rows *rows)
{
	if (rows->n == rows->cap) {
		size_t cap = rows->cap ? rows->cap * 2 : 32;
		struct top_row *v = realloc(rows->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		rows->v = v;
		rows->cap = cap;
	}
	memset(&rows->v[rows->n], 0, sizeof(rows->v[0]));
	return &rows->v[rows->n++];
}

/* A name or a label from the daemon on one line of the screen: a control
 * byte (a newline, an escape sequence) would move the cursor or break the
 * line count the screen is fitted to. */
static void strip_controls(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* Events a record counts: a histogram's count, a counter's or gauge's value
 * (for a cumulative counter record, its total). */
static long long record_events(const json_t *rec, bool cumulative)
{
	const json_t *h = json_object_get(rec, "histogram");

	if (json_is_object(h))
		return jint(h, "count");
	if (cumulative && json_is_integer(json_object_get(rec, "total")))
		return jint(rec, "total");
	return jint(rec, "value");
}

/* The last window's record of the key of rec (same dims), or NULL. */
static const json_t *window_of(const json_t *window, const json_t *rec)
{
	const json_t *dims = json_object_get(rec, "dims");
	size_t i;
	json_t *w;

	json_array_foreach(window, i, w)
		if (json_equal(json_object_get(w, "dims"), (json_t *)dims) ||
		    (!json_object_size(dims) && !json_object_size(json_object_get(w, "dims"))))
			return w;
	return NULL;
}

/* "254,0,read,vda": the values of a record's dims, without their names. */
static void fmt_dim_values(const json_t *rec, char *buf, size_t len)
{
	const char *key;
	json_t *v;
	size_t off = 0;

	buf[0] = '\0';
	json_object_foreach(json_object_get(rec, "dims"), key, v) {
		char *str = json_is_string(v) ? strdup(json_string_value(v))
					      : json_dumps(v, JSON_ENCODE_ANY);

		if (off < len)
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "",
						str ? str : "?");
		free(str);
	}
	if (off >= len)
		ktel_utf8_trim_str(buf);
}

static void top_rows_of(struct top_rows *rows, const json_t *show)
{
	const json_t *totals = json_object_get(show, "totals");
	const json_t *window = json_object_get(show, "window");
	const char *metric = jstr(show, "metric");
	struct top_row *row;
	size_t i;
	json_t *rec;

	if (!json_is_true(json_object_get(show, "ok")) ||
	    !json_is_object(json_object_get(show, "last_pull")) || !json_array_size(totals)) {
		row = top_row_add(rows);
		if (!row)
			return;
		copy_text(row->label, sizeof(row->label), metric[0] ? metric : "?");
		if (!json_is_true(json_object_get(show, "ok")))
			copy_text(row->note, sizeof(row->note), jstr(show, "error"));
		else if (!json_is_object(json_object_get(show, "last_pull")))
			snprintf(row->note, sizeof(row->note), "not pulled yet");
		else
			snprintf(row->note, sizeof(row->note), "no keys yet");
		strip_controls(row->label);
		strip_controls(row->note);
		row->last = row->total = -1;
		return;
	}
	json_array_foreach(totals, i, rec) {
		const json_t *w = window_of(window, rec);
		char dims[200];

		row = top_row_add(rows);
		if (!row)
			return;
		fmt_dims(rec, dims, sizeof(dims));
		if (strcmp(dims, "(all)") == 0) {
			copy_text(row->label, sizeof(row->label), metric);
		} else {
			snprintf(row->label, sizeof(row->label), "%s[%s]", metric, dims);
			fmt_dim_values(rec, dims, sizeof(dims));
			snprintf(row->brief, sizeof(row->brief), "%s[%s]", metric, dims);
		}
		ktel_utf8_trim_str(row->label);
		ktel_utf8_trim_str(row->brief);
		strip_controls(row->label);
		strip_controls(row->brief);
		row->total = record_events(rec, true);
		row->last = w ? record_events(w, false) : 0;
		row->hist = w && json_is_object(json_object_get(w, "histogram"))
				    ? json_object_get(w, "histogram")
				    : NULL;
		row->unit = jstr(show, "unit");
	}
}

/* Events in the last window first, most first; then the most events since
 * the map was created; rows without numbers (not pulled, errors) last. */
static int top_row_cmp(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;

	if ((x->last > 0) != (y->last > 0))
		return x->last > 0 ? -1 : 1;
	if (x->last != y->last)
		return x->last > y->last ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(x->label, y->label);
}

/* A bucket bound in the metric's unit, short: 512ns, 16.4us, 2.05ms, 3G. */
static void fmt_qty(double v, const char *unit, char *buf, size_t len)
{
	static const char *const times[] = {"ns", "us", "ms", "s"};
	int t = -1;

	for (int i = 0; i < 4; i++)
		if (strcmp(unit, times[i]) == 0)
			t = i;
	if (t >= 0) {
		for (; t < 3 && v >= 1000; t++)
			v /= 1000;
		snprintf(buf, len, "%.3g%s", v, times[t]);
		return;
	}
	if (strcmp(unit, "bytes") == 0) {
		static const char suffix[] = " KMGTP";
		int i = 0;

		for (; i < 5 && v >= 1024; i++)
			v /= 1024;
		snprintf(buf, len, i ? "%.3g%cB" : "%.3gB", v, suffix[i]);
		return;
	}
	snprintf(buf, len, "%.3g", v);
}

/* The bound of the bucket holding the q-quantile of hist: "<=2.05ms" (the
 * quantile is at most that), ">1.07s" for the overflow bucket; "-" without
 * events. */
static void fmt_quantile(const json_t *hist, double q, const char *unit, char *buf, size_t len)
{
	const json_t *counts = json_object_get(hist, "counts"), *le = json_object_get(hist, "le");
	bool inclusive = strcmp(jstr(hist, "scheme"), "log2") == 0;
	unsigned long long total = 0, cum = 0, want;
	size_t n = json_array_size(counts);
	char b[32];
	double v;

	for (size_t k = 0; k < n; k++)
		total += (unsigned long long)json_integer_value(json_array_get(counts, k));
	snprintf(buf, len, "-");
	if (!total)
		return;
	want = (unsigned long long)ceil(q * (double)total);
	for (size_t k = 0; k < n; k++) {
		cum += (unsigned long long)json_integer_value(json_array_get(counts, k));
		if (cum < want)
			continue;
		if (le_at(le, k, &v)) {
			fmt_qty(v, unit, b, sizeof(b));
			snprintf(buf, len, "%s%s", inclusive ? "<=" : "<", b);
		} else if (k > 0 && le_at(le, k - 1, &v)) {
			fmt_qty(v, unit, b, sizeof(b));
			snprintf(buf, len, ">%s", b);
		}
		return;
	}
}

/* The last window's buckets, from the first to the last non-empty one, one
 * character each by its share of the fullest (at most width characters). */
static void fmt_spark(const json_t *hist, int width, char *buf, size_t len)
{
	static const char level[] = " .:-=+*#%@";
	const json_t *counts = json_object_get(hist, "counts");
	size_t n = json_array_size(counts), first = n, last = 0, o = 0;
	unsigned long long max = 0;

	for (size_t k = 0; k < n; k++) {
		unsigned long long c = (unsigned long long)json_integer_value(
			json_array_get(counts, k));

		if (!c)
			continue;
		first = first < k ? first : k;
		last = k;
		max = c > max ? c : max;
	}
	for (size_t k = first; k <= last && k < n && o + 1 < len && (int)o < width; k++) {
		unsigned long long c = (unsigned long long)json_integer_value(
			json_array_get(counts, k));

		buf[o++] = c ? level[1 + c * 8 / max] : level[0];
	}
	buf[o] = '\0';
}

long long ktel_ctl_top_newest_pull(const json_t *shows)
{
	long long newest = 0;
	size_t i;
	json_t *s;

	json_array_foreach(shows, i, s) {
		const char *t = jstr(json_object_get(s, "last_pull"), "time");
		struct tm tm;
		char *end;

		memset(&tm, 0, sizeof(tm));
		end = strptime(t, "%Y-%m-%dT%H:%M:%SZ", &tm);
		if (end && !*end && (long long)timegm(&tm) > newest)
			newest = (long long)timegm(&tm);
	}
	return newest;
}

static void fmt_secs(long long ms, char *buf, size_t len)
{
	if (ms % 1000)
		snprintf(buf, len, "%.1fs", ms / 1000.0);
	else if (ms >= 120000 && ms % 60000 == 0)
		snprintf(buf, len, "%lldm", ms / 60000);
	else
		snprintf(buf, len, "%llds", ms / 1000);
}

static void top_header(FILE *out, const struct ktel_ctl_top *t)
{
	long long newest = ktel_ctl_top_newest_pull(t->shows);
	char every[48], lo[16], hi[16], redraw[48];
	time_t now = (time_t)t->now;
	char clock[16];

	strftime(clock, sizeof(clock), "%H:%M:%S", localtime(&now));
	fmt_secs(t->interval_min_ms, lo, sizeof(lo));
	fmt_secs(t->interval_max_ms, hi, sizeof(hi));
	if (t->interval_min_ms <= 0)
		snprintf(every, sizeof(every), "on no timer");
	else if (t->interval_min_ms == t->interval_max_ms)
		snprintf(every, sizeof(every), "every %s", lo);
	else
		snprintf(every, sizeof(every), "every %s to %s", lo, hi);
	/* Without --interval a screen is drawn after each pull: the pull
	 * interval is also how fresh the screen is. */
	redraw[0] = '\0';
	if (t->redraw_ms > 0) {
		fmt_secs(t->redraw_ms, lo, sizeof(lo));
		snprintf(redraw, sizeof(redraw), ", redrawn every %s", lo);
	}
	if (newest)
		fprintf(out, "ktelemetry %s  last pull %llds ago, pulls %s%s  Ctrl-C quits\n",
			clock, t->now > newest ? t->now - newest : 0, every, redraw);
	else
		fprintf(out, "ktelemetry %s  not pulled yet, pulls %s%s  Ctrl-C quits\n", clock,
			every, redraw);
}

/* Columns right of the name: "  LAST  TOTAL  P50  P99". */
#define TOP_NUM_W 42

static void top_table(FILE *out, const struct ktel_ctl_top *t, struct top_rows *rows, int lines)
{
	int name_w = 12, spark_w = 0, shown;
	char p50[32], p99[32], spark[64];

	for (size_t i = 0; i < rows->n; i++) {
		int w = (int)strlen(rows->v[i].label);

		name_w = w > name_w ? w : name_w;
	}
	/* A wide terminal has room for the distribution; the name column
	 * never takes more than it needs, nor the whole screen. */
	if (name_w > 60)
		name_w = 60;
	if (name_w + TOP_NUM_W > t->cols)
		name_w = t->cols - TOP_NUM_W > 12 ? t->cols - TOP_NUM_W : 12;
	spark_w = t->cols - name_w - TOP_NUM_W - 2;
	spark_w = spark_w >= 12 ? (spark_w > 32 ? 32 : spark_w) : 0;
	fprintf(out, "%-*s  %8s  %10s  %8s  %8s%s%s\n", name_w, "METRIC[KEY]", "LAST", "TOTAL",
		"P50", "P99", spark_w ? "  " : "", spark_w ? "BUCKETS" : "");
	shown = (int)rows->n <= lines ? (int)rows->n : lines - 1;
	for (int i = 0; i < shown; i++) {
		const struct top_row *r = &rows->v[i];
		char label[256];

		/* The keys' values tell rows apart where the names of the
		 * dimensions no longer fit. */
		copy_text(label, sizeof(label),
			  (int)strlen(r->label) > name_w && r->brief[0] ? r->brief : r->label);
		if ((int)strlen(label) > name_w) {
			label[name_w] = '\0';
			ktel_utf8_trim_str(label);
		}
		if (r->note[0]) {
			fprintf(out, "%-*s  %s\n", name_w, label, r->note);
			continue;
		}
		fmt_quantile(r->hist, 0.5, r->unit, p50, sizeof(p50));
		fmt_quantile(r->hist, 0.99, r->unit, p99, sizeof(p99));
		spark[0] = '\0';
		if (spark_w && r->hist)
			fmt_spark(r->hist, spark_w, spark, sizeof(spark));
		fprintf(out, "%-*s  %8lld  %10lld  %8s  %8s%s%s\n", name_w, label, r->last,
			r->total, p50, p99, spark[0] ? "  " : "", spark);
	}
	if (shown < (int)rows->n)
		fprintf(out, "+%d more (a taller terminal shows them; ktelemetryctl show NAME)\n",
			(int)rows->n - shown);
}

/* The busiest key's last window as bars, when all of them fit in lines. */
static void top_bars(FILE *out, const struct ktel_ctl_top *t, const struct top_rows *rows,
		     int lines)
{
	const struct top_row *r = rows->n ? &rows->v[0] : NULL;
	char *buf = NULL;
	size_t len = 0;
	int n = 0, width = t->cols - 40;
	FILE *mem;

	if (!r || !r->hist || r->last <= 0 || lines < 4)
		return;
	mem = open_memstream(&buf, &len);
	if (!mem)
		return;
	ktel_ctl_draw_hist(mem, r->hist, width < 10 ? 10 : width > 52 ? 52 : width);
	fclose(mem);
	for (size_t i = 0; i < len; i++)
		n += buf[i] == '\n';
	if (n + 2 <= lines) {
		fprintf(out, "\nthe busiest key's last window (%s): %s\n", r->unit, r->label);
		fwrite(buf, 1, len, out);
	}
	free(buf);
}

/* text onto out, at most rows lines of at most cols characters; no newline
 * after the last line (a screen of exactly rows lines must not scroll). */
static void fit_screen(FILE *out, const char *text, size_t len, int rows, int cols)
{
	int line = 0, col = 0;

	for (size_t i = 0; i < len && line < rows; i++) {
		unsigned char c = (unsigned char)text[i];

		if (c == '\n') {
			line++;
			col = 0;
			if (line < rows && i + 1 < len)
				fputc('\n', out);
			continue;
		}
		/* A UTF-8 continuation byte belongs to the character before. */
		if ((c & 0xc0) != 0x80)
			col++;
		if (col > cols)
			continue;
		fputc(c < 0x20 || c == 0x7f ? '?' : c, out);
	}
}

void ktel_ctl_render_top(FILE *out, const struct ktel_ctl_top *t)
{
	struct top_rows rows = {0};
	char *buf = NULL;
	size_t len = 0, i;
	int lines;
	json_t *s;
	FILE *mem = open_memstream(&buf, &len);

	if (!mem)
		return;
	json_array_foreach(t->shows, i, s)
		top_rows_of(&rows, s);
	if (rows.n)
		qsort(rows.v, rows.n, sizeof(rows.v[0]), top_row_cmp);
	top_header(mem, t);
	/* The header and the table's head take two lines; the table takes
	 * what it needs of the rest, the bars what is left after it. */
	lines = t->rows - 2;
	if (lines < 1)
		lines = 1;
	top_table(mem, t, &rows, lines);
	top_bars(mem, t, &rows, lines - ((int)rows.n < lines ? (int)rows.n : lines));
	fclose(mem);
	fit_screen(out, buf, len, t->rows, t->cols);
	free(buf);
	free(rows.v);
}
