// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktel-netdata-conf: a Netdata statsd.d app config for what the statsd sink
 * sends (tags "dotted"), made from the plugins' descriptors, so that every
 * metric has a chart and no name is typed twice.
 *
 *   ktel-netdata-conf [--prefix P] PLUGIN_DIR...   the config, on stdout
 *
 * The names come from the sink's own formatter (ktel_statsd__format) run on
 * a record of each metric whose free dims hold a marker, which becomes a
 * Netdata pattern wildcard: the config cannot drift from the lines. The
 * plugins are opened read-only, as `ktelemetryctl inspect` does; nothing is
 * loaded into the kernel. docs/sinks.md ("Netdata") describes the charts.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "btf_layout.h"
#include "enum_label.h"
#include "plugin_loader.h"
#include "record.h"
#include "statsd/statsd_line.h"

/* Stands for a dim value the config cannot know (a CPU, a device, a label
 * map's string): a Netdata wildcard in the patterns. */
#define MARK "KTELNETDATAMARK"
/* Stands for the attribution dim, name and value: the records carry it only
 * while the device config attributes the metric ("cgroup.<name>." then), so
 * the whole segment becomes a wildcard that also matches nothing. */
#define OPT_MARK "KTELNETDATAOPT"
#define OPT_PAIR OPT_MARK "." OPT_MARK
/* Charts per metric at most for the combinations of its enum dims; more,
 * and the enum dims are wildcards like the others. */
#define MAX_COMBOS 64
#define MAX_ENUM_VALUES 256
#define PRIORITY_BASE 91000

/* One dim as the config sees it: a wildcard, or one of known labels. */
struct dim_plan {
	const char *name;
	size_t n_labels; /* 0: a wildcard */
	char *labels[MAX_ENUM_VALUES];
};

struct gen {
	FILE *out;
	struct ktel_statsd_style style;
	int priority;
};

/* ---- names from the sink's formatter ---------------------------------------- */

struct lines {
	size_t n;
	char *l[KTEL_HIST_BUCKETS + 4];
};

static int collect(void *ctx, const char *unit, size_t len)
{
	struct lines *ls = ctx;

	if (ls->n >= sizeof(ls->l) / sizeof(ls->l[0]))
		return -ENOSPC;
	ls->l[ls->n] = strndup(unit, len);
	if (!ls->l[ls->n])
		return -ENOMEM;
	ls->n++;
	return 0;
}

static void lines_free(struct lines *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->l[i]);
	ls->n = 0;
}

/* The name of a line ("name:value|type"), cut at ':' in place. */
static char *line_name(char *line)
{
	char *c = strchr(line, ':');

	if (c)
		*c = '\0';
	return line;
}

/*
 * A Netdata pattern from a name with markers: every "MARK." becomes "*"
 * (the wildcard takes the dot after the value, so Netdata's name of the
 * dimension, what the wildcards matched joined, reads "8.0.sda"), and with
 * last_bare the last marker becomes a bare "*" (nothing follows it in the
 * name that the dimension should show). *ret_wild: was there a marker?
 */
static void to_pattern(const char *name, bool last_bare, char *buf, size_t size, bool *ret_wild)
{
	const char *last = NULL, *p;
	size_t len = 0;

	for (p = strstr(name, MARK); p; p = strstr(p + 1, MARK))
		last = p;
	*ret_wild = last != NULL;
	for (p = name; *p && len + 2 < size;) {
		if (strncmp(p, OPT_PAIR, strlen(OPT_PAIR)) == 0 && !last) {
			/* No other wildcard: the line is a fixed name, which
			 * Netdata shows as the chart's own dimension name; it
			 * is the name without attribution (a metric attributed
			 * on the device has its lines charted under the other
			 * charts only). */
			p += strlen(OPT_PAIR);
			if (*p == '.')
				p++;
			else if (len && buf[len - 1] == '.')
				len--;
			continue;
		}
		if (strncmp(p, OPT_PAIR, strlen(OPT_PAIR)) == 0) {
			p += strlen(OPT_PAIR);
			/* Last in the name: the dot before it goes into the
			 * wildcard too, or the name without it would not match. */
			if (*p == '.')
				p++;
			else if (len && buf[len - 1] == '.')
				len--;
			/* A wildcard just before matches it already: one, so
			 * Netdata names the dimension as it did without. */
			if (!len || buf[len - 1] != '*')
				buf[len++] = '*';
			continue;
		}
		if (strncmp(p, MARK, strlen(MARK)) == 0) {
			buf[len++] = '*';
			p += strlen(MARK);
			if (*p == '.' && !(last_bare && p - strlen(MARK) == last))
				p++;
			continue;
		}
		buf[len++] = *p++;
	}
	buf[len] = '\0';
}

/* ---- descriptors --------------------------------------------------------- */

static bool is_device_dim(uint32_t flags)
{
	return flags & (KTEL_DIM_DEV_MAJOR | KTEL_DIM_DEV_MINOR | KTEL_DIM_DEV_T);
}

/* The labels of enum dim d in the object's BTF (the daemon's rule: short
 * labels with KTEL_DIM_ENUM_SHORT, else the enumerator). */
static void enum_labels(const struct btf *btf, const struct ktel_dimension_desc *d, uint32_t flags,
			struct dim_plan *dp)
{
	struct ktel_enum_labels *el = NULL;
	struct ktel_err err;
	const struct btf_type *t;
	int id;

	dp->n_labels = 0;
	if (!btf || !d->label_enum)
		return;
	id = btf__find_by_name_kind(btf, d->label_enum, BTF_KIND_ENUM);
	if (id < 0)
		id = btf__find_by_name_kind(btf, d->label_enum, BTF_KIND_ENUM64);
	if (id < 0)
		return;
	t = btf__type_by_id(btf, (__u32)id);
	if ((flags & KTEL_DIM_ENUM_SHORT) && ktel_enum_labels__new(btf, (__u32)id, &el, &err))
		return;
	for (uint16_t i = 0; i < btf_vlen(t) && dp->n_labels < MAX_ENUM_VALUES; i++) {
		int64_t v = btf_is_enum(t) ? (int64_t)btf_enum(t)[i].val
					   : (int64_t)btf_enum64_value(&btf_enum64(t)[i]);
		const char *label = el ? ktel_enum_labels__find(el, v)
				       : ktel_layout_enum_label(btf, (__u32)id, v);
		bool seen = false;

		for (size_t j = 0; label && j < dp->n_labels; j++)
			seen |= strcmp(dp->labels[j], label) == 0;
		if (label && !seen) {
			dp->labels[dp->n_labels] = strdup(label);
			if (dp->labels[dp->n_labels])
				dp->n_labels++;
		}
	}
	ktel_enum_labels__free(el);
}

/* The dims of md's records, in the order the daemon gives them: the
 * declared ones, then "device" when the metric has a block device. */
static size_t plan_dims(const struct ktel_metric_desc *md, const struct btf *btf,
			struct dim_plan *plan)
{
	size_t n = 0;
	bool device = false;

	for (uint32_t i = 0; i < md->n_dims && n + 1 < KTEL_MAX_DIMS; i++) {
		uint32_t flags = md->dim_flags ? md->dim_flags[i] : 0;

		if (flags & KTEL_DIM_ATTRIBUTION) {
			plan[n++] = (struct dim_plan){.name = OPT_MARK};
			continue;
		}
		plan[n] = (struct dim_plan){.name = md->dims[i].name};
		enum_labels(btf, &md->dims[i], flags, &plan[n]);
		device |= is_device_dim(flags);
		n++;
	}
	if (device && md->model == KTEL_MODEL_ACCUMULATOR)
		plan[n++] = (struct dim_plan){.name = KTEL_DEVICE_DIM};
	return n;
}

static void plan_free(struct dim_plan *plan, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < plan[i].n_labels; j++)
			free(plan[i].labels[j]);
}

/* ---- output ------------------------------------------------------------------ */

struct chart {
	const char *id;
	const char *title;
	const char *family;
	const char *units;
	const char *type; /* "line", "stacked" */
};

static void chart_head(struct gen *g, const struct chart *c)
{
	fprintf(g->out,
		"\n[%s]\n    name = %s\n    title = %s\n    family = %s\n    context = ktel.%s\n"
		"    units = %s\n    priority = %d\n    type = %s\n",
		c->id, c->id, c->title, c->family, c->id, c->units, g->priority++, c->type);
}

/*
 * One dimension line: a pattern when name has markers (Netdata names each
 * dimension after what the wildcards matched), else the metric itself under
 * fixed_name.
 */
static void dimension(struct gen *g, const char *name, bool last_bare, const char *fixed_name)
{
	char pattern[1024];
	bool wild;

	to_pattern(name, last_bare, pattern, sizeof(pattern), &wild);
	if (wild)
		fprintf(g->out, "    dimension = pattern '%s' '' last 1 1\n", pattern);
	else
		fprintf(g->out, "    dimension = %s '%s' last 1 1\n", pattern, fixed_name);
}

/* A record of md with dims as planned: a marker or combo's label each. */
static struct ktel_record template_record(const struct ktel_metric_desc *md,
					  const struct dim_plan *plan, size_t n_dims,
					  const size_t *combo, enum ktel_record_type type)
{
	struct ktel_record r = {.type = type, .metric = md->name, .unit = md->unit};

	r.n_dims = (uint32_t)n_dims;
	for (size_t i = 0; i < n_dims; i++) {
		r.dims[i].name = plan[i].name;
		if (strcmp(plan[i].name, OPT_MARK) == 0)
			r.dims[i].label = OPT_MARK;
		else
			r.dims[i].label = combo && plan[i].n_labels ? plan[i].labels[combo[i]]
								    : MARK;
	}
	if (type == KTEL_RECORD_HISTOGRAM) {
		r.hist.delta.scheme = md->scheme;
		r.hist.delta.linear_min = md->linear_min;
		r.hist.delta.linear_step = md->linear_step;
		r.hist.delta.n_buckets = KTEL_HIST_BUCKETS;
		r.hist.delta.counts[0] = 1;
		r.hist.delta.has_sum = true;
	}
	return r;
}

/* The lines of rec, or an error naming the metric. */
static int format(struct gen *g, const struct ktel_record *rec, struct lines *ls)
{
	int r = ktel_statsd__format(&g->style, rec, collect, ls);

	if (r)
		fprintf(stderr, "ktel-netdata-conf: %s: cannot format its lines: %s\n", rec->metric,
			strerror(-r));
	return r;
}

/* "<description>: <what>", or the metric's name when it has no description. */
static void title(char *buf, size_t size, const struct ktel_metric_desc *md, const char *what)
{
	snprintf(buf, size, "%s: %s",
		 md->description && *md->description ? md->description : md->name, what);
}

/* Chart ids and the like: [a-z0-9_], anything else '_'. */
static void id_clean(char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
			*s = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : '_';
}

/*
 * The bucket charts of a histogram: one per combination of its enum dims'
 * values (one in all when it has none), the buckets of every series of the
 * combination as dimensions. Other dims are wildcards: their values name
 * the dimensions before the bound ("0.0_000016" for cpu 0).
 */
static int histogram_buckets(struct gen *g, const struct ktel_metric_desc *md,
			     const struct dim_plan *plan, size_t n_dims)
{
	size_t combos = 1, combo[KTEL_MAX_DIMS] = {0};
	struct dim_plan flat[KTEL_MAX_DIMS];
	int r = 0;

	for (size_t i = 0; i < n_dims; i++)
		if (plan[i].n_labels)
			combos *= plan[i].n_labels;
	/* Too many charts: every dim a wildcard. */
	memcpy(flat, plan, n_dims * sizeof(*plan));
	if (combos > MAX_COMBOS) {
		for (size_t i = 0; i < n_dims; i++)
			flat[i].n_labels = 0;
		combos = 1;
	}
	for (size_t c = 0; c < combos && !r; c++) {
		struct ktel_record rec;
		struct lines ls = {0};
		char id[256], what[512], t[1024];
		size_t rest = c;
		int len;

		len = snprintf(id, sizeof(id), "%s", md->name);
		what[0] = '\0';
		for (size_t i = 0; i < n_dims; i++) {
			if (!flat[i].n_labels)
				continue;
			combo[i] = rest % flat[i].n_labels;
			rest /= flat[i].n_labels;
			len += snprintf(id + len, sizeof(id) - (size_t)len, "_%s",
					flat[i].labels[combo[i]]);
			snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s %s",
				 what[0] ? ", " : "", flat[i].name, flat[i].labels[combo[i]]);
		}
		id_clean(id);
		rec = template_record(md, flat, n_dims, combo, KTEL_RECORD_HISTOGRAM);
		r = format(g, &rec, &ls);
		if (r)
			break;
		snprintf(t, sizeof(t), "%s%s%s%s: values <= each bound (cumulative buckets)",
			 md->description && *md->description ? md->description : md->name,
			 what[0] ? " (" : "", what, what[0] ? ")" : "");
		chart_head(g, &(struct chart){id, t, md->name, "values/s", "line"});
		{
			/* The first line is a bucket: its name up to the bound. */
			char *name = line_name(ls.l[0]), *le = strstr(name, ".bucket.le_");
			char pat[1024];

			if (le) {
				snprintf(pat, sizeof(pat), "%.*s.bucket.le_" MARK, (int)(le - name),
					 name);
				dimension(g, pat, true, "");
			}
		}
		lines_free(&ls);
	}
	return r;
}

/* Rate and sum per series, then the bucket charts. */
static int histogram_charts(struct gen *g, const struct ktel_metric_desc *md,
			    const struct dim_plan *plan, size_t n_dims)
{
	struct ktel_record rec = template_record(md, plan, n_dims, NULL, KTEL_RECORD_HISTOGRAM);
	struct lines ls = {0};
	char id[256], t[1024], units[64];
	int r = format(g, &rec, &ls);

	/* bucket 0 and +Inf, count, sum */
	if (r || ls.n < 3) {
		lines_free(&ls);
		return r ? r : -EINVAL;
	}
	snprintf(id, sizeof(id), "%s_rate", md->name);
	title(t, sizeof(t), md, "values per second, per series");
	chart_head(g, &(struct chart){id, t, md->name, "values/s", "line"});
	dimension(g, line_name(ls.l[ls.n - 2]), true, "values");
	/* The sum: an integer in the record's unit (".sum_us") or in the
	 * name's (".sum", bytes), per second. */
	snprintf(id, sizeof(id), "%s_sum", md->name);
	title(t, sizeof(t), md, "sum of the values per second, per series");
	snprintf(units, sizeof(units), "%s/s", md->unit && *md->unit ? md->unit : "values");
	chart_head(g, &(struct chart){id, t, md->name, units, "line"});
	dimension(g, line_name(ls.l[ls.n - 1]), true, "sum");
	lines_free(&ls);
	return histogram_buckets(g, md, plan, n_dims);
}

/* Counters, gauges and events: one chart, a dimension per series. */
static int value_chart(struct gen *g, const struct ktel_metric_desc *md, const char *family,
		       const struct dim_plan *plan, size_t n_dims, enum ktel_record_type type)
{
	struct ktel_record rec = template_record(md, plan, n_dims, NULL, type);
	struct lines ls = {0};
	char t[1024], units[64];
	const char *unit = md->unit && *md->unit ? md->unit : "values";
	int r = format(g, &rec, &ls);

	if (r || ls.n != 1) {
		lines_free(&ls);
		return r ? r : -EINVAL;
	}
	/* Netdata charts a StatsD counter as its rate. */
	snprintf(units, sizeof(units), type == KTEL_RECORD_GAUGE ? "%s" : "%s/s", unit);
	title(t, sizeof(t), md,
	      type == KTEL_RECORD_EVENT     ? "events per second, per series"
	      : type == KTEL_RECORD_COUNTER ? "per second, per series"
					    : "level, per series");
	chart_head(g, &(struct chart){md->name, t, family, units, "line"});
	dimension(g, line_name(ls.l[0]), true, md->name);
	lines_free(&ls);
	return 0;
}

static int metric_charts(struct gen *g, const struct ktel_metric_desc *md, const struct btf *btf)
{
	struct dim_plan plan[KTEL_MAX_DIMS];
	size_t n = plan_dims(md, btf, plan);
	int r;

	if (md->model == KTEL_MODEL_STREAM)
		r = value_chart(g, md, md->name, plan, n, KTEL_RECORD_EVENT);
	else if (md->scheme != KTEL_HIST_NONE)
		r = histogram_charts(g, md, plan, n);
	else
		r = value_chart(g, md, md->name, plan, n,
				md->value_kind == KTEL_VALUE_GAUGE ? KTEL_RECORD_GAUGE
								   : KTEL_RECORD_COUNTER);
	plan_free(plan, n);
	return r;
}

/* ---- self-telemetry ----------------------------------------------------------- */

/*
 * The daemon's own records (docs/sinks.md, "Self-telemetry"): not in any
 * plugin, so listed here. test_statsd_netdata runs the daemon and fails when
 * it sends a name that no chart of this config takes.
 */
static const struct self_metric {
	const char *name;
	enum ktel_record_type type;
	const char *unit;
	const char *dim;
	const char *description;
	const char *dim2; /* a second dimension, or NULL */
} self_metrics[] = {
	{"ktel_sink_sent", KTEL_RECORD_COUNTER, "records", "sink", "Records each sink sent", NULL},
	{"ktel_sink_dropped", KTEL_RECORD_COUNTER, "records", "sink", "Records each sink dropped",
	 NULL},
	{"ktel_sink_errors", KTEL_RECORD_COUNTER, "errors", "sink", "I/O errors of each sink",
	 NULL},
	{"ktel_sink_reconnects", KTEL_RECORD_COUNTER, "reconnects", "sink",
	 "Deliveries after a failure, per sink", NULL},
	{"ktel_sink_skipped", KTEL_RECORD_COUNTER, "records", "sink",
	 "Records a sink's format has no form for", NULL},
	{"ktel_sink_refused", KTEL_RECORD_COUNTER, "connections", "sink",
	 "Peers each sink turned away", NULL},
	{"ktel_sink_queued", KTEL_RECORD_GAUGE, "items", "sink", "What waits in each sink's queue",
	 NULL},
	{"ktel_pull_duration", KTEL_RECORD_GAUGE, "ns", "metric",
	 "Duration of each metric's last pull", NULL},
	{"ktel_pull_keys", KTEL_RECORD_GAUGE, "keys", "metric",
	 "Keys read by each metric's last pull", NULL},
	{"ktel_pull_errors", KTEL_RECORD_COUNTER, "pulls", "metric", "Failed pulls per metric",
	 NULL},
	{"ktel_prog_recursion_misses", KTEL_RECORD_COUNTER, "runs", "program",
	 "Program runs the kernel skipped (recursion)", NULL},
	{"ktel_prog_run_time_per_run", KTEL_RECORD_GAUGE, "ns", "program",
	 "Program run time per run (kernel.bpf_stats_enabled)", NULL},
	{"ktel_prog_run_time", KTEL_RECORD_COUNTER, "ns", "plugin",
	 "Program run time, by plugin and program (bpf_stats)", "program"},
	{"ktel_prog_runs", KTEL_RECORD_COUNTER, "runs", "plugin",
	 "Program runs, by plugin and program (bpf_stats)", "program"},
	{"ktel_invalid_durations", KTEL_RECORD_COUNTER, "events", "plugin",
	 "Durations a plugin dropped (end before start)", NULL},
	{"ktel_map_write_failures", KTEL_RECORD_COUNTER, "writes", "plugin",
	 "Map writes a plugin's programs needed and the kernel refused", NULL},
	{"ktel_unpaired_events", KTEL_RECORD_COUNTER, "events", "plugin",
	 "End events without a recorded start", NULL},
	{"ktel_stream_delivered", KTEL_RECORD_COUNTER, "events", "metric",
	 "Stream events decoded and routed", NULL},
	{"ktel_stream_lost_kernel", KTEL_RECORD_COUNTER, "events", "metric",
	 "Stream events the kernel could not reserve", NULL},
	{"ktel_stream_dropped_daemon", KTEL_RECORD_COUNTER, "events", "metric",
	 "Stream samples the daemon dropped", NULL},
};

static int self_charts(struct gen *g)
{
	for (size_t i = 0; i < sizeof(self_metrics) / sizeof(self_metrics[0]); i++) {
		const struct self_metric *sm = &self_metrics[i];
		struct ktel_metric_desc md = {.name = sm->name,
					      .unit = sm->unit,
					      .description = sm->description,
					      .value_kind = sm->type == KTEL_RECORD_GAUGE
								    ? KTEL_VALUE_GAUGE
								    : KTEL_VALUE_COUNTER};
		struct dim_plan plan[2] = {{.name = sm->dim}, {.name = sm->dim2}};
		int r = value_chart(g, &md, "ktel_self_telemetry", plan, sm->dim2 ? 2 : 1,
				    sm->type);

		if (r)
			return r;
	}
	return 0;
}

/* ---- main ------------------------------------------------------------------------ */

static int plugin_charts(struct gen *g, const struct ktel_plugin *p)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = p->desc.name);
	/* Validated by the loader; opened, never loaded, for its BTF enums. */
	struct bpf_object *obj = bpf_object__open_mem(p->desc.bpf_object, p->desc.bpf_object_size,
						      &opts);
	const struct btf *btf = obj ? bpf_object__btf(obj) : NULL;
	int r = 0;

	for (uint32_t i = 0; i < p->desc.n_metrics && !r; i++)
		r = metric_charts(g, &p->desc.metrics[i], btf);
	bpf_object__close(obj);
	return r;
}

static void on_refusal(const char *path, const struct ktel_err *err, void *ctx)
{
	fprintf(stderr, "ktel-netdata-conf: %s\n", err->msg);
	*(bool *)ctx = true;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ktel-netdata-conf [--prefix PREFIX] PLUGIN_DIR...\n"
		   "Writes a Netdata statsd.d app config for the statsd sink's lines (tags "
		   "\"dotted\",\nprefix PREFIX, default \"ktel.\") of the plugins in each "
		   "PLUGIN_DIR and of the\ndaemon's self-telemetry to stdout.\n");
}

int main(int argc, char **argv)
{
	struct gen g = {.out = stdout,
			.style = {"ktel.", KTEL_STATSD_TAGS_DOTTED},
			.priority = PRIORITY_BASE};
	bool refused = false;
	int i = 1, r = 0;

	if (i + 1 < argc && strcmp(argv[i], "--prefix") == 0) {
		g.style.prefix = argv[i + 1];
		i += 2;
	}
	if (i >= argc || argv[i][0] == '-') {
		usage(i < argc && strcmp(argv[i], "--help") == 0 ? stdout : stderr);
		return i < argc && strcmp(argv[i], "--help") == 0 ? 0 : 2;
	}
	if (!g.style.prefix[0] || g.style.prefix[strlen(g.style.prefix) - 1] != '.') {
		fprintf(stderr, "ktel-netdata-conf: --prefix must end with '.' (\"ktel.\")\n");
		return 2;
	}
	libbpf_set_print(NULL);
	fprintf(g.out,
		"# Netdata statsd.d charts for ktelemetry's statsd sink (tags \"dotted\", the\n"
		"# default; prefix \"%s\"). Generated by ktel-netdata-conf from the plugins'\n"
		"# descriptors: do not edit; install it with tools/netdata-install\n"
		"# (docs/sinks.md, \"Netdata\").\n"
		"\n[app]\n    name = ktel\n    metrics = %s*\n    private charts = no\n"
		"    gaps when not collected = no\n",
		g.style.prefix, g.style.prefix);
	for (; i < argc && !r; i++) {
		struct ktel_plugin_scan_opts opts = {.owner = geteuid(),
						     .on_refusal = on_refusal,
						     .ctx = &refused};
		struct ktel_plugin_list *list = NULL;
		struct ktel_err err;

		r = ktel_plugin_dir__scan(argv[i], &opts, &list, &err);
		if (r) {
			fprintf(stderr, "ktel-netdata-conf: %s\n", err.msg);
			break;
		}
		for (size_t j = 0; j < list->n && !r; j++)
			r = plugin_charts(&g, list->items[j]);
		ktel_plugin_list__free(list);
	}
	if (!r)
		r = self_charts(&g);
	if (fflush(g.out) || ferror(g.out)) {
		fprintf(stderr, "ktel-netdata-conf: cannot write the config\n");
		return 1;
	}
	return r || refused ? 1 : 0;
}
