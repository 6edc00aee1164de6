// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Prometheus sink ("type": "prometheus"): serves GET <path> (default
 * /metrics) over HTTP with libmicrohttpd, in the Prometheus text exposition
 * format 0.0.4.
 *
 * Values are cumulative, as Prometheus expects: each series shows the
 * record's own running total (hist.total, counter.total: what the map holds
 * since it was created), not a sum of deltas since the sink started. The
 * maps are pinned and outlive the daemon, so an exposed counter or bucket
 * goes on from where it was across daemon restarts and reloads, and counts
 * what the last window of the previous daemon saw (no scrape needs to have
 * seen it); it goes back only when the map itself is new (reboot, a plugin
 * whose map had to be recreated), which Prometheus's rate() and increase()
 * treat as a counter reset. process_start_time_seconds is exposed too.
 *
 * Mapping of a record to series:
 * - name: prefix (default "ktel_") + metric, unless the metric already
 *   starts with the prefix; characters outside [a-zA-Z0-9_:] become '_'.
 *   Unit suffix, the only unit handling: time units ns/us/ms/s are exposed
 *   in seconds with the suffix "_seconds" (bounds, sums and values divided,
 *   the Prometheus base-unit rule that promtool checks), "bytes" gets
 *   "_bytes"; any other unit adds nothing. A suffix the name already ends
 *   with is not repeated.
 * - histogram: <name>_bucket{...,le="<bound>"} cumulative over buckets (le
 *   from ktel_hist_upper_bound(), the last one "+Inf"), <name>_sum when the
 *   map has a sum, <name>_count.
 * - counter: <name>_total. gauge: <name>, the last value.
 * - dims are labels: the dim's label when one names the value, else the
 *   integer. Label names outside [a-zA-Z0-9_] get '_'; "le" and names
 *   starting with "__" (reserved) get the prefix "dim_".
 * - events have no Prometheus form: they are skipped, counted in
 *   ktel_prometheus_sink_records_skipped_total and not as dropped (they are
 *   not lost to a fault, and a healthy sink's dropped count stays 0).
 * - a record whose metric changed type or histogram shape, or whose name
 *   collides with another metric's, is dropped and counted.
 * The number of series is bounded (max_series); a record that would add a
 * series beyond it is dropped and counted (ktel_prometheus_sink_series_dropped_total).
 * The sink's own counters are exposed too (ktel_prometheus_sink_*, label
 * sink="<name>"), as of the render (the first scrape after a batch).
 *
 * Threads: the loop thread owns the state and is its only writer; submit()
 * applies a batch under `lock` and does nothing more, so a batch costs the
 * loop time in proportion to its records, not to the series held. The text
 * is rendered on scrape, in libmicrohttpd's thread: under `lock` it copies
 * the values (a consistent snapshot between two batches, a memcpy per
 * series), then renders from the copy without the lock. Names, labels and
 * `le` strings are immutable once created and families and series are only
 * ever appended, so the renderer reads them without the lock. The rendered
 * text is kept (reference-counted, under `render_lock`, which the loop never
 * takes) and served again until a batch changes the state, so concurrent or
 * repeated scrapes render once. The loop waits for a scrape at most for the
 * snapshot copy; a scrape never waits for a client.
 *
 * Options: listen (IPv4 or IPv6 literal, default 127.0.0.1), port (default
 * 9464, the port the OpenTelemetry Prometheus exporter registered; 0 picks
 * a free one), path (default /metrics), prefix (default "ktel_"),
 * max_series (default 10000).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "prometheus_sink.h"
#include "textbuf.h"
#include "units.h"

#define DEFAULT_LISTEN "127.0.0.1"
#define DEFAULT_PORT 9464
#define DEFAULT_PATH "/metrics"
#define DEFAULT_PREFIX "ktel_"
#define DEFAULT_MAX_SERIES 10000
#define MAX_MAX_SERIES 1000000
/* HTTP limits (issue 12.9): a peer holds at most PER_PEER_CONNECTIONS, so
 * MAX_CONNECTIONS leaves room for other peers (Prometheus, a second
 * server); a connection is idle at most CONNECTION_TIMEOUT_S, and a request
 * takes at most REQUEST_DEADLINE_S from the connection's start or the end
 * of its previous request (slow headers, one byte at a time, keep resetting
 * the idle timeout, not this). */
#define MAX_CONNECTIONS 64
#define PER_PEER_CONNECTIONS 8
#define CONNECTION_TIMEOUT_S 10
#define REQUEST_DEADLINE_S 10
#define WATCHDOG_MS 500
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* A rendered exposition, shared by the cache and in-flight responses. */
struct text {
	atomic_uint refs;
	uint64_t gen; /* the state generation it shows */
	size_t len;
	char data[];
};

struct family {
	struct family *next;   /* in order of first appearance */
	char *metric;          /* the records' metric name */
	char *unit;
	char *name;            /* exposed name, _total included for counters */
	enum ktel_record_type type;
	double scale;          /* divisor into the exposed unit; 1: none */
	struct ktel_histogram shape; /* scheme and bounds; counts unused */
	/* `le="<bound>"` of each bucket, NUL-separated in le_text: formatting a
	 * bound takes up to 17 snprintf/strtod rounds, and the shape never
	 * changes, so it is done once here, not per series per render. */
	char *le_text;
	uint32_t le_off[KTEL_HIST_BUCKETS];
	uint32_t n_series;     /* under the sink's lock */
	struct series *first, *last;
};

struct series {
	struct series *hnext;  /* hash chain */
	struct series *fnext;  /* family's series, in order of appearance */
	struct family *fam;
	uint64_t hash;
	char *labels;          /* `a="x",b="y"`, or "" */
	bool has_sum;
	union {
		struct {
			uint64_t counts[KTEL_HIST_BUCKETS];
			uint64_t sum;
		} h;
		uint64_t total;
		int64_t gauge;
	};
};

/* A connection the deadline watches (socket context, conn_lock). */
struct conn {
	struct conn *next, **pprev;
	int fd;
	uint64_t since_ms; /* start of the connection or of its request */
	bool cut;          /* shut down by the deadline */
};

struct prom_sink {
	uv_loop_t *loop;
	char *name, *listen, *path, *prefix;
	unsigned port;
	uint64_t max_series;
	double start_time; /* process_start_time_seconds */

	struct family *families, *families_tail;
	struct series **table;
	size_t table_size, n_series;
	uint64_t series_dropped;

	struct ktel_textbuf scratch; /* labels of the record at hand */
	/* Every WATCHDOG_MS: shuts down connections past the deadline; at
	 * close, defers done() to the next loop turn. */
	uv_timer_t closer;
	pthread_mutex_t conn_lock; /* guards conns: MHD's thread and the loop */
	struct conn *conns;
	uint64_t deadline_cuts;    /* under conn_lock */

	/* Guards what the renderer copies: values, the family and series
	 * links, the counts below, gen. Written by the loop only. */
	pthread_mutex_t lock;
	uint64_t gen;      /* bumped by every batch */
	size_t n_families;
	uint64_t skipped;  /* records with no Prometheus form (events) */

	pthread_mutex_t render_lock; /* guards cur; taken by scrapes only */
	struct text *cur;
	struct MHD_Daemon *mhd;
	atomic_uint_fast64_t scrapes, render_errors;

	struct ktel_sink_stats st; /* errors unused: see render_errors */
	bool closing;
	ktel_sink_closed_cb done;
	void *done_ctx;
};

/* ---- buffers and escaping ---- */

/* Label values escape backslash, double quote and newline; HELP text only
 * backslash and newline (exposition format 0.0.4). */
static void buf_escaped(struct ktel_textbuf *b, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			ktel_textbuf_puts(b, "\\\\");
		else if (*s == '\n')
			ktel_textbuf_puts(b, "\\n");
		else if (*s == '"' && quote)
			ktel_textbuf_puts(b, "\\\"");
		else
			ktel_textbuf_put(b, s, 1);
	}
}

/* A double as the shortest decimal that reads back as it (units.h). */
static void buf_double(struct ktel_textbuf *b, double v)
{
	char tmp[40];

	ktel_format_shortest(v, tmp, sizeof(tmp));
	ktel_textbuf_puts(b, tmp);
}

static void buf_u64(struct ktel_textbuf *b, uint64_t v, double scale)
{
	if (scale == 1.0)
		ktel_textbuf_printf(b, "%" PRIu64, v);
	else
		buf_double(b, (double)v / scale);
}

/* ---- names ---- */

static bool name_char(char c, bool first, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

/* s with every character outside the allowed set replaced by '_'. */
static void buf_sanitized(struct ktel_textbuf *b, const char *s, bool first, bool colon)
{
	for (; *s; s++, first = false)
		ktel_textbuf_put(b, name_char(*s, first, colon) ? s : "_", 1);
}

/* The exposed name of a metric; NULL on ENOMEM. */
static char *family_name(const struct prom_sink *s, const struct ktel_record *r,
			 double *ret_scale)
{
	const struct ktel_unit_rule *rule = ktel_unit_rule(r->unit);
	struct ktel_textbuf b = { 0 };

	if (strncmp(r->metric, s->prefix, strlen(s->prefix)) != 0)
		ktel_textbuf_puts(&b, s->prefix);
	buf_sanitized(&b, r->metric, b.len == 0, true);
	if (rule && !ktel_str_ends_with(b.p ? b.p : "", rule->suffix))
		ktel_textbuf_puts(&b, rule->suffix);
	if (r->type == KTEL_RECORD_COUNTER && !ktel_str_ends_with(b.p ? b.p : "", "_total"))
		ktel_textbuf_puts(&b, "_total");
	if (b.fail || !b.p) {
		free(b.p);
		return NULL;
	}
	*ret_scale = rule ? rule->scale : 1.0;
	return b.p;
}

/* `name="value",...` of the record's dims into s->scratch. */
static void render_labels(struct prom_sink *s, const struct ktel_record *r)
{
	struct ktel_textbuf *b = &s->scratch;
	uint32_t n = r->n_dims <= KTEL_MAX_DIMS ? r->n_dims : KTEL_MAX_DIMS;

	b->len = 0;
	b->fail = false;
	ktel_textbuf_put(b, "", 0); /* a valid empty string even without dims */
	for (uint32_t i = 0; i < n; i++) {
		const struct ktel_dim *d = &r->dims[i];
		const char *dn = d->name ? d->name : "dim";

		if (i)
			ktel_textbuf_put(b, ",", 1);
		if (strcmp(dn, "le") == 0 || strncmp(dn, "__", 2) == 0)
			ktel_textbuf_puts(b, "dim_");
		buf_sanitized(b, dn, strcmp(dn, "le") != 0 && strncmp(dn, "__", 2) != 0, false);
		ktel_textbuf_puts(b, "=\"");
		if (d->label)
			buf_escaped(b, d->label, true);
		else
			ktel_textbuf_printf(b, "%" PRId64, d->value);
		ktel_textbuf_put(b, "\"", 1);
	}
}

/* ---- series table ---- */

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return (h ^ 0xff) * 0x100000001b3ull; /* separates "ab"+"c" from "a"+"bc" */
}

static struct series *series_find(const struct prom_sink *s, uint64_t hash, const char *metric,
				  const char *labels)
{
	struct series *se;

	for (se = s->table[hash & (s->table_size - 1)]; se; se = se->hnext)
		if (se->hash == hash && strcmp(se->fam->metric, metric) == 0 &&
		    strcmp(se->labels, labels) == 0)
			return se;
	return NULL;
}

static int table_grow(struct prom_sink *s)
{
	size_t size = s->table_size * 2;
	struct series **t = calloc(size, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < s->table_size; i++) {
		struct series *se, *next;

		for (se = s->table[i]; se; se = next) {
			next = se->hnext;
			se->hnext = t[se->hash & (size - 1)];
			t[se->hash & (size - 1)] = se;
		}
	}
	free(s->table);
	s->table = t;
	s->table_size = size;
	return 0;
}

static void family_free(struct family *f)
{
	free(f->metric);
	free(f->unit);
	free(f->name);
	free(f->le_text);
	free(f);
}

/* The `le` label of every bucket of f's shape, into f->le_text. */
static int family_set_le(struct family *f)
{
	struct ktel_textbuf b = { 0 };

	for (uint32_t k = 0; k < f->shape.n_buckets; k++) {
		bool inf;
		double bound = ktel_hist_upper_bound(&f->shape, k, &inf);

		f->le_off[k] = (uint32_t)b.len;
		ktel_textbuf_puts(&b, "le=\"");
		if (inf)
			ktel_textbuf_puts(&b, "+Inf");
		else
			buf_double(&b, bound / f->scale);
		ktel_textbuf_put(&b, "\"", 2); /* with the NUL that ends it */
	}
	if (b.fail || !b.p) {
		free(b.p);
		return -ENOMEM;
	}
	f->le_text = b.p;
	return 0;
}

/* A metric keeps the type and histogram shape it first came with. */
static bool fits(const struct family *f, const struct ktel_record *r)
{
	const struct ktel_histogram *h = &r->hist.delta;

	if (f->type != r->type)
		return false;
	return r->type != KTEL_RECORD_HISTOGRAM ||
	       (f->shape.n_buckets == h->n_buckets && f->shape.scheme == h->scheme &&
		f->shape.linear_min == h->linear_min && f->shape.linear_step == h->linear_step);
}

/* The family of r's metric, created when new; NULL when r does not fit it
 * (type or histogram shape changed, name taken) or on ENOMEM. */
static struct family *family_get(struct prom_sink *s, const struct ktel_record *r)
{
	struct family *f;
	double scale = 1.0;
	char *name;

	for (f = s->families; f; f = f->next)
		if (strcmp(f->metric, r->metric) == 0)
			break;
	if (!f) {
		name = family_name(s, r, &scale);
		if (!name)
			return NULL;
		for (f = s->families; f; f = f->next)
			if (strcmp(f->name, name) == 0)
				break;
		if (f) { /* another metric sanitizes to the same name */
			free(name);
			return NULL;
		}
		f = calloc(1, sizeof(*f));
		if (!f || !(f->metric = strdup(r->metric)) ||
		    (r->unit && !(f->unit = strdup(r->unit)))) {
			if (f)
				family_free(f);
			free(name);
			return NULL;
		}
		f->name = name;
		f->type = r->type;
		f->scale = scale;
		if (r->type == KTEL_RECORD_HISTOGRAM) {
			f->shape = r->hist.delta;
			memset(f->shape.counts, 0, sizeof(f->shape.counts));
			if (family_set_le(f)) {
				family_free(f);
				return NULL;
			}
		}
		s->n_families++;
		if (s->families_tail)
			s->families_tail->next = f;
		else
			s->families = f;
		s->families_tail = f;
	}
	return fits(f, r) ? f : NULL;
}

/* The series of r, created when new; NULL (counted) when it cannot be. */
static struct series *series_get(struct prom_sink *s, const struct ktel_record *r)
{
	struct family *f;
	struct series *se;
	uint64_t hash;

	render_labels(s, r);
	if (s->scratch.fail)
		return NULL;
	hash = fnv1a(fnv1a(0xcbf29ce484222325ull, r->metric), s->scratch.p);
	se = series_find(s, hash, r->metric, s->scratch.p);
	if (se)
		return fits(se->fam, r) ? se : NULL;
	if (s->n_series >= s->max_series) {
		s->series_dropped++;
		return NULL;
	}
	if (s->n_series >= s->table_size && table_grow(s))
		return NULL;
	f = family_get(s, r);
	if (!f)
		return NULL;
	se = calloc(1, sizeof(*se));
	if (!se || !(se->labels = strdup(s->scratch.p))) {
		free(se);
		return NULL;
	}
	se->fam = f;
	se->hash = hash;
	se->hnext = s->table[hash & (s->table_size - 1)];
	s->table[hash & (s->table_size - 1)] = se;
	if (f->last)
		f->last->fnext = se;
	else
		f->first = se;
	f->last = se;
	f->n_series++;
	s->n_series++;
	return se;
}

enum applied { APPLIED, SKIPPED, DROPPED };

/* Set r's running totals as its series' values. Events have no Prometheus
 * form: SKIPPED. */
static enum applied apply(struct prom_sink *s, const struct ktel_record *r)
{
	struct series *se;

	if (r->type == KTEL_RECORD_EVENT)
		return SKIPPED;
	if (!r->metric || !*r->metric || r->type < KTEL_RECORD_HISTOGRAM || r->type > KTEL_RECORD_GAUGE ||
	    (r->type == KTEL_RECORD_HISTOGRAM && (r->hist.delta.n_buckets == 0 ||
						  r->hist.delta.n_buckets > KTEL_HIST_BUCKETS ||
						  r->hist.total.n_buckets != r->hist.delta.n_buckets)))
		return DROPPED;
	se = series_get(s, r);
	if (!se)
		return DROPPED;
	switch (r->type) {
	case KTEL_RECORD_HISTOGRAM:
		memcpy(se->h.counts, r->hist.total.counts,
		       r->hist.total.n_buckets * sizeof(se->h.counts[0]));
		se->has_sum = r->hist.total.has_sum;
		se->h.sum = r->hist.total.sum;
		break;
	case KTEL_RECORD_COUNTER:
		se->total = r->counter.total;
		break;
	default:
		se->gauge = r->gauge;
		break;
	}
	return APPLIED;
}

/* ---- rendering ---- */

static void render_header(struct ktel_textbuf *b, const struct family *f)
{
	static const char *const types[] = {
		[KTEL_RECORD_HISTOGRAM] = "histogram",
		[KTEL_RECORD_COUNTER] = "counter",
		[KTEL_RECORD_GAUGE] = "gauge",
	};

	ktel_textbuf_printf(b, "# HELP %s ktelemetry metric ", f->name);
	buf_escaped(b, f->metric, false);
	if (f->unit && *f->unit) {
		ktel_textbuf_puts(b, " (unit: ");
		buf_escaped(b, f->unit, false);
		if (f->scale != 1.0)
			ktel_textbuf_puts(b, ", exposed in seconds");
		ktel_textbuf_puts(b, ")");
	}
	ktel_textbuf_printf(b, "\n# TYPE %s %s\n", f->name, types[f->type]);
}

/* `name{labels}` or `name{labels,extra}`; braces left out when empty. */
static void render_series_name(struct ktel_textbuf *b, const char *name, const char *suffix,
			       const char *labels, const char *extra)
{
	ktel_textbuf_puts(b, name);
	ktel_textbuf_puts(b, suffix);
	if (!*labels && !extra)
		return;
	ktel_textbuf_put(b, "{", 1);
	ktel_textbuf_puts(b, labels);
	if (extra) {
		if (*labels)
			ktel_textbuf_put(b, ",", 1);
		ktel_textbuf_puts(b, extra);
	}
	ktel_textbuf_put(b, "}", 1);
}

static void render_histogram(struct ktel_textbuf *b, const struct family *f, const struct series *se)
{
	uint64_t cum = 0;

	for (uint32_t k = 0; k < f->shape.n_buckets; k++) {
		cum += se->h.counts[k];
		render_series_name(b, f->name, "_bucket", se->labels, f->le_text + f->le_off[k]);
		ktel_textbuf_printf(b, " %" PRIu64 "\n", cum);
	}
	if (se->has_sum) {
		render_series_name(b, f->name, "_sum", se->labels, NULL);
		ktel_textbuf_put(b, " ", 1);
		buf_u64(b, se->h.sum, f->scale);
		ktel_textbuf_put(b, "\n", 1);
	}
	render_series_name(b, f->name, "_count", se->labels, NULL);
	ktel_textbuf_printf(b, " %" PRIu64 "\n", cum);
}

/* f's header and its n series, copies taken by snapshot_take(). */
static void render_family(struct ktel_textbuf *b, const struct family *f,
			  const struct series *copies, size_t n)
{
	render_header(b, f);
	for (const struct series *se = copies; se < copies + n; se++) {
		if (f->type == KTEL_RECORD_HISTOGRAM) {
			render_histogram(b, f, se);
			continue;
		}
		render_series_name(b, f->name, "", se->labels, NULL);
		ktel_textbuf_put(b, " ", 1);
		if (f->type == KTEL_RECORD_COUNTER)
			buf_u64(b, se->total, f->scale);
		else if (f->scale == 1.0)
			ktel_textbuf_printf(b, "%" PRId64, se->gauge);
		else
			buf_double(b, (double)se->gauge / f->scale);
		ktel_textbuf_put(b, "\n", 1);
	}
}

/* A consistent copy of what the text shows, taken under the lock. */
struct snapshot {
	uint64_t gen;
	size_t n_families, n_series;
	const struct family **families; /* n_series of each in their order */
	struct series *series;          /* copies, family after family */
	uint64_t series_dropped, sent, dropped, skipped, deadline_cuts;
};

static void snapshot_free(struct snapshot *snap)
{
	free(snap->families);
	free(snap->series);
}

/* Copy the state under the lock: a memcpy per series, nothing formatted,
 * so the loop waits at most this long for a scrape. */
static int snapshot_take(struct prom_sink *s, struct snapshot *snap)
{
	size_t i = 0, j = 0;

	memset(snap, 0, sizeof(*snap));
	pthread_mutex_lock(&s->lock);
	snap->families = malloc((s->n_families ?: 1) * sizeof(*snap->families));
	snap->series = malloc((s->n_series ?: 1) * sizeof(*snap->series));
	if (!snap->families || !snap->series) {
		pthread_mutex_unlock(&s->lock);
		snapshot_free(snap);
		return -ENOMEM;
	}
	for (const struct family *f = s->families; f; f = f->next) {
		snap->families[i++] = f;
		for (const struct series *se = f->first; se; se = se->fnext)
			snap->series[j++] = *se;
	}
	snap->n_families = i;
	snap->n_series = j;
	snap->gen = s->gen;
	snap->series_dropped = s->series_dropped;
	snap->sent = s->st.sent;
	snap->dropped = s->st.dropped;
	snap->skipped = s->skipped;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&s->conn_lock);
	snap->deadline_cuts = s->deadline_cuts;
	pthread_mutex_unlock(&s->conn_lock);
	return 0;
}

/* The process's start, seconds since the epoch (/proc/self/stat field 22,
 * clock ticks after /proc/stat's btime); now when /proc cannot say. */
static double process_start_time(void)
{
	unsigned long long start = 0, btime = 0;
	char buf[1024], *p;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	long tck = sysconf(_SC_CLK_TCK);

	if (f)
		fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d "
			"%*d %*d %*d %*d %*d %llu", &start) != 1)
		start = 0;
	f = fopen("/proc/stat", "r");
	while (f && fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	if (f)
		fclose(f);
	if (!start || !btime || tck <= 0)
		return (double)time(NULL);
	return (double)btime + (double)start / (double)tck;
}

static void render_self(struct ktel_textbuf *b, const struct prom_sink *s,
			const struct snapshot *snap)
{
	const struct {
		const char *name, *type, *help;
		uint64_t value;
	} self[] = {
		{ "series", "gauge", "Series this sink exposes.", snap->n_series },
		{ "series_dropped_total", "counter",
		  "Records dropped because they would add a series beyond max_series.",
		  snap->series_dropped },
		{ "records_total", "counter", "Records applied to the exposed state.", snap->sent },
		{ "records_dropped_total", "counter",
		  "Records not exposed (series limit, type changes, no memory).", snap->dropped },
		{ "records_skipped_total", "counter",
		  "Records with no Prometheus form (events), not counted as dropped.",
		  snap->skipped },
		{ "errors_total", "counter", "Failures to render the exposition.",
		  atomic_load(&s->render_errors) },
		{ "scrapes_total", "counter", "Scrapes served.", atomic_load(&s->scrapes) },
		{ "connections_cut_total", "counter",
		  "Connections shut down because a request took longer than the deadline.",
		  snap->deadline_cuts },
	};

	for (size_t i = 0; i < KTEL_ARRAY_SIZE(self); i++) {
		ktel_textbuf_printf(b, "# HELP ktel_prometheus_sink_%s %s\n", self[i].name, self[i].help);
		ktel_textbuf_printf(b, "# TYPE ktel_prometheus_sink_%s %s\n", self[i].name, self[i].type);
		ktel_textbuf_printf(b, "ktel_prometheus_sink_%s{sink=\"", self[i].name);
		buf_escaped(b, s->name, true);
		ktel_textbuf_printf(b, "\"} %" PRIu64 "\n", self[i].value);
	}
	ktel_textbuf_puts(b, "# HELP process_start_time_seconds Start time of the process since "
			  "unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
			  "process_start_time_seconds ");
	buf_double(b, s->start_time);
	ktel_textbuf_put(b, "\n", 1);
}

static void text_unref(void *cls)
{
	struct text *t = cls;

	if (t && atomic_fetch_sub(&t->refs, 1) == 1)
		free(t);
}

/*
 * The whole exposition as a new text with one reference, on whatever thread
 * calls it; NULL (counted) on ENOMEM. Formatting happens outside the lock.
 */
static struct text *render(struct prom_sink *s)
{
	struct ktel_textbuf b = { 0 };
	struct snapshot snap;
	const struct series *copies;
	struct text *t = NULL;

	if (snapshot_take(s, &snap)) {
		atomic_fetch_add(&s->render_errors, 1);
		return NULL;
	}
	ktel_textbuf_put(&b, "", 0);
	copies = snap.series;
	for (size_t i = 0; i < snap.n_families; i++) {
		size_t n = 0;

		while (copies + n < snap.series + snap.n_series && copies[n].fam == snap.families[i])
			n++;
		render_family(&b, snap.families[i], copies, n);
		copies += n;
	}
	render_self(&b, s, &snap);
	if (!b.fail)
		t = malloc(sizeof(*t) + b.len + 1);
	if (t) {
		atomic_init(&t->refs, 1);
		t->gen = snap.gen;
		t->len = b.len;
		memcpy(t->data, b.p, b.len + 1);
	} else {
		atomic_fetch_add(&s->render_errors, 1);
	}
	free(b.p);
	snapshot_free(&snap);
	return t;
}

static uint64_t state_gen(struct prom_sink *s)
{
	uint64_t gen;

	pthread_mutex_lock(&s->lock);
	gen = s->gen;
	pthread_mutex_unlock(&s->lock);
	return gen;
}

/*
 * A reference to a text of the current state: the kept one when no batch
 * came since it was rendered, else a new one, kept for the next scrape.
 * Scrapes only (render_lock serializes them so that they render once); on
 * ENOMEM the previous text, or NULL when there is none.
 */
static struct text *current_text(struct prom_sink *s)
{
	struct text *t;

	pthread_mutex_lock(&s->render_lock);
	if (!s->cur || s->cur->gen != state_gen(s)) {
		t = render(s);
		if (t) {
			text_unref(s->cur);
			s->cur = t;
		}
	}
	t = s->cur;
	if (t)
		atomic_fetch_add(&t->refs, 1);
	pthread_mutex_unlock(&s->render_lock);
	return t;
}

/* ---- HTTP (libmicrohttpd's thread) ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *msg)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Runs on the server thread: renders or reuses the text (current_text). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct prom_sink *s = cls;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	struct text *t;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (strcmp(url, s->path) != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, "not found\n");
	t = current_text(s);
	if (!t)
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE,
			     "cannot render the exposition: out of memory\n");
	resp = MHD_create_response_from_buffer_with_free_callback_cls(t->len, t->data,
								      text_unref, t);
	if (!resp) {
		text_unref(t);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES)
		atomic_fetch_add(&s->scrapes, 1);
	return ret;
}

/* MHD's thread: track each connection for the request deadline. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct prom_sink *s = cls;
	const union MHD_ConnectionInfo *info;
	struct conn *cn = *socket_context;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		cn = calloc(1, sizeof(*cn));
		if (!cn || !info) {
			free(cn);
			return; /* unwatched: the idle timeout still applies */
		}
		cn->fd = info->connect_fd;
		cn->since_ms = uv_hrtime() / 1000000;
		pthread_mutex_lock(&s->conn_lock);
		cn->next = s->conns;
		cn->pprev = &s->conns;
		if (s->conns)
			s->conns->pprev = &cn->next;
		s->conns = cn;
		pthread_mutex_unlock(&s->conn_lock);
		*socket_context = cn;
		return;
	}
	if (!cn)
		return;
	/* CLOSED comes before MHD closes the socket: once cn is unlinked the
	 * watchdog cannot touch the fd. */
	pthread_mutex_lock(&s->conn_lock);
	*cn->pprev = cn->next;
	if (cn->next)
		cn->next->pprev = cn->pprev;
	pthread_mutex_unlock(&s->conn_lock);
	free(cn);
	*socket_context = NULL;
}

/* MHD's thread: a request ended; the next one on the connection gets its
 * own deadline. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct prom_sink *s = cls;
	const union MHD_ConnectionInfo *info;

	(void)con_cls;
	(void)toe;
	info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (!info || !info->socket_context)
		return;
	pthread_mutex_lock(&s->conn_lock);
	((struct conn *)info->socket_context)->since_ms = uv_hrtime() / 1000000;
	pthread_mutex_unlock(&s->conn_lock);
}

/* The loop: shut down (not close: MHD owns the fd) every connection whose
 * request has taken longer than the deadline; MHD then sees the end of
 * the stream and closes it. */
static void on_watchdog(uv_timer_t *t)
{
	struct prom_sink *s = t->data;
	uint64_t now = uv_hrtime() / 1000000;

	pthread_mutex_lock(&s->conn_lock);
	for (struct conn *cn = s->conns; cn; cn = cn->next) {
		if (cn->cut || now - cn->since_ms < REQUEST_DEADLINE_S * 1000ull)
			continue;
		shutdown(cn->fd, SHUT_RDWR);
		cn->cut = true;
		s->deadline_cuts++;
	}
	pthread_mutex_unlock(&s->conn_lock);
}

static int start_server(struct prom_sink *s, struct ktel_err *err)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(s->port) };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(s->port) };
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
	const struct sockaddr *sa = (const struct sockaddr *)&sin;
	const union MHD_DaemonInfo *info;

	if (inet_pton(AF_INET6, s->listen, &sin6.sin6_addr) == 1) {
		sa = (const struct sockaddr *)&sin6;
		flags |= MHD_USE_IPv6;
	} else if (inet_pton(AF_INET, s->listen, &sin.sin_addr) != 1) {
		return ktel_err_set(err, EINVAL,
				    "sinks.%s.listen: \"%s\" is not an IPv4 or IPv6 address",
				    s->name, s->listen);
	}
	errno = 0;
	s->mhd = MHD_start_daemon(flags, s->port, NULL, NULL, on_request, s,
				  MHD_OPTION_SOCK_ADDR, sa,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PER_PEER_CONNECTIONS,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				  MHD_OPTION_END);
	if (!s->mhd) {
		int e = errno ? errno : EADDRINUSE;

		return ktel_err_set(err, e, "sinks.%s: cannot serve HTTP on %s port %u: %s",
				    s->name, s->listen, s->port, strerror(e));
	}
	info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
	if (info && info->port)
		s->port = info->port;
	return 0;
}

/* ---- ops ---- */

static void prom_submit(void *priv, const struct ktel_record *recs, size_t n)
{
	struct prom_sink *s = priv;

	if (s->closing) {
		s->st.dropped += n;
		return;
	}
	/* Only the records' own work here: the text is rendered on scrape. */
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		switch (apply(s, &recs[i])) {
		case APPLIED:
			s->st.sent++;
			break;
		case SKIPPED:
			s->skipped++;
			s->st.skipped++;
			break;
		default:
			s->st.dropped++;
			break;
		}
	}
	s->gen++;
	pthread_mutex_unlock(&s->lock);
}

static void prom_stats(void *priv, struct ktel_sink_stats *ret)
{
	struct prom_sink *s = priv;

	*ret = s->st; /* the loop is the only writer: no lock needed to read */
	ret->errors = atomic_load(&s->render_errors);
	ret->queued = 0; /* nothing waits: the state is served as it is */
}

static void free_sink(struct prom_sink *s)
{
	struct family *f, *fnext;

	if (s->mhd)
		MHD_stop_daemon(s->mhd); /* joins the thread, closes connections */
	for (f = s->families; f; f = fnext) {
		struct series *se, *snext;

		fnext = f->next;
		for (se = f->first; se; se = snext) {
			snext = se->fnext;
			free(se->labels);
			free(se);
		}
		family_free(f);
	}
	text_unref(s->cur);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->render_lock);
	pthread_mutex_destroy(&s->conn_lock);
	free(s->table);
	free(s->scratch.p);
	free(s->name);
	free(s->listen);
	free(s->path);
	free(s->prefix);
	free(s);
}

static void on_closer_closed(uv_handle_t *h)
{
	struct prom_sink *s = h->data;
	ktel_sink_closed_cb done = s->done;
	void *ctx = s->done_ctx;

	/* done first: its stats are final and still readable (sink.h). */
	if (done)
		done(ctx);
	free_sink(s);
}

/* Nothing is queued, so nothing can be lost: stop the server at once (MHD
 * closes open connections without waiting for their clients, well inside
 * any timeout) and release. */
static void prom_close(void *priv, uint64_t timeout_ms, ktel_sink_closed_cb done, void *ctx)
{
	struct prom_sink *s = priv;

	(void)timeout_ms;
	if (s->closing)
		return;
	s->closing = true;
	s->done = done;
	s->done_ctx = ctx;
	if (s->mhd) {
		MHD_stop_daemon(s->mhd);
		s->mhd = NULL;
	}
	uv_close((uv_handle_t *)&s->closer, on_closer_closed);
}

static const struct ktel_cfg_key prom_options[] = {
	{"listen", KTEL_CFG_STRING, .default_text = DEFAULT_LISTEN,
	 .doc = "IPv4 or IPv6 address (a literal, not a host name) the HTTP endpoint "
		"listens on."},
	{"port", KTEL_CFG_INT, 0, 65535, .default_text = "9464",
	 .doc = "TCP port of the endpoint; 0 picks a free one."},
	{"path", KTEL_CFG_STRING, .default_text = DEFAULT_PATH,
	 .doc = "URL path that serves the exposition; others answer 404."},
	{"prefix", KTEL_CFG_STRING, .default_text = "\"" DEFAULT_PREFIX "\"",
	 .doc = "Prepended to metric names that do not already start with it."},
	{"max_series", KTEL_CFG_INT, 1, MAX_MAX_SERIES, .default_text = "10000",
	 .doc = "Bound on exposed series (metric and dims); records that would add one "
		"beyond it are dropped and counted."},
	{NULL},
};

/* Replace *ret with a copy of key's string option when present. */
static int take_string(struct prom_sink *s, const json_t *opts, const char *key, char **ret,
		       struct ktel_err *err)
{
	const char *v = ktel_cfg_string(opts, key, NULL);
	char *copy;

	if (!v)
		return 0;
	copy = strdup(v);
	if (!copy)
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", s->name);
	free(*ret);
	*ret = copy;
	return 0;
}

static int check_opts(const struct prom_sink *s, struct ktel_err *err)
{
	if (s->path[0] != '/')
		return ktel_err_set(err, EINVAL, "sinks.%s.path: expected a URL path starting "
				    "with '/'", s->name);
	for (const char *p = s->prefix; *p; p++)
		if (!name_char(*p, p == s->prefix, true))
			return ktel_err_set(err, EINVAL, "sinks.%s.prefix: \"%s\" is not a "
					    "Prometheus metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)",
					    s->name, s->prefix);
	return 0;
}

static int parse_opts(struct prom_sink *s, const json_t *opts, struct ktel_err *err)
{
	char path[128];
	int ret;

	snprintf(path, sizeof(path), "sinks.%s", s->name);
	ret = ktel_config_check_options(opts, prom_options, path, err);
	ret = ret ?: take_string(s, opts, "listen", &s->listen, err);
	ret = ret ?: take_string(s, opts, "path", &s->path, err);
	ret = ret ?: take_string(s, opts, "prefix", &s->prefix, err);
	if (ret)
		return ret;
	s->port = (unsigned)ktel_cfg_int(opts, "port", DEFAULT_PORT);
	s->max_series = (uint64_t)ktel_cfg_int(opts, "max_series", DEFAULT_MAX_SERIES);
	return check_opts(s, err);
}

static int prom_create(uv_loop_t *loop, const char *name, const json_t *opts, void **ret_priv,
		       struct ktel_err *err)
{
	struct prom_sink *s = calloc(1, sizeof(*s));
	int ret;

	if (!s || !(s->name = strdup(name)) || !(s->listen = strdup(DEFAULT_LISTEN)) ||
	    !(s->path = strdup(DEFAULT_PATH)) || !(s->prefix = strdup(DEFAULT_PREFIX)) ||
	    !(s->table = calloc(256, sizeof(*s->table)))) {
		if (s) {
			free(s->name);
			free(s->listen);
			free(s->path);
			free(s->prefix);
		}
		free(s);
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->render_lock, NULL);
	pthread_mutex_init(&s->conn_lock, NULL);
	s->table_size = 256;
	s->loop = loop;
	s->port = DEFAULT_PORT;
	s->max_series = DEFAULT_MAX_SERIES;
	s->start_time = process_start_time();
	ret = parse_opts(s, opts, err);
	if (ret)
		goto fail;
	ret = start_server(s, err);
	if (ret)
		goto fail;
	uv_timer_init(loop, &s->closer);
	s->closer.data = s;
	uv_timer_start(&s->closer, on_watchdog, WATCHDOG_MS, WATCHDOG_MS);
	uv_unref((uv_handle_t *)&s->closer); /* never keeps the loop alive */
	*ret_priv = s;
	return 0;
fail:
	free_sink(s);
	return ret;
}

unsigned ktel_prometheus_sink__port(void *priv)
{
	return ((struct prom_sink *)priv)->port;
}

char *ktel_prometheus_sink__text(void *priv, size_t *ret_len)
{
	struct prom_sink *s = priv;
	struct text *t = render(s);
	char *copy;

	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	copy = malloc(t->len + 1);
	if (copy) {
		memcpy(copy, t->data, t->len + 1);
		*ret_len = t->len;
	} else {
		errno = ENOMEM;
	}
	text_unref(t);
	return copy;
}

/* Options for the config validator and docs/config.md (parse_opts applies them). */

/* See ktel_sink_ops.where. */
static void prom_where(void *priv, char *buf, size_t len)
{
	const struct prom_sink *s = priv;

	/* IPv6 literals in brackets, as in a URL. */
	snprintf(buf, len, strchr(s->listen, ':') ? "http://[%s]:%u%s" : "http://%s:%u%s",
		 s->listen, s->port, s->path);
}

const struct ktel_sink_ops ktel_prometheus_sink_ops = {
	.type = "prometheus",
	.where = prom_where,
	.options = prom_options,
	.create = prom_create,
	.submit = prom_submit,
	.close = prom_close,
	.stats = prom_stats,
	.cumulative = true,
};
