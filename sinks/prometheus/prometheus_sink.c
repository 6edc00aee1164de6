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
 * Records become series as prom_series.h says (names, unit suffixes,
 * labels, cumulative values, histogram buckets): the remote_write sink
 * pushes the same series. Events have no Prometheus form: they are skipped,
 * counted in ktel_prometheus_sink_records_skipped_total and not as dropped.
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
 * `le` strings are immutable once created and families are only ever
 * appended, so the renderer reads them without the lock; a series that
 * ends (record.h series_end) is taken out under the lock, so no later
 * snapshot has it, and freed once no render that copied it is left
 * (`renders`). The rendered
 * text is kept (reference-counted, under `render_lock`, which the loop never
 * takes) and served again until a batch changes the state, so concurrent or
 * repeated scrapes render once. The loop waits for a scrape at most for the
 * snapshot copy; a scrape never waits for a client.
 *
 * Options: listen (IPv4 or IPv6 literal, default 127.0.0.1), port (default
 * 9464, the port the OpenTelemetry Prometheus exporter registered; 0 picks
 * a free one), path (default /metrics), prefix (default "ktel_"),
 * max_series (default 10000), labels (default none; on every series, a
 * colliding dim renamed exported_<name>: prom_series.h).
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
#include <zlib.h>

#include "prometheus_sink.h"
#include "prom_series.h"
#include "textbuf.h"
#include "units.h"

#define DEFAULT_LISTEN "127.0.0.1"
#define DEFAULT_PORT 9464
#define DEFAULT_PATH "/metrics"
#define DEFAULT_PREFIX "ktel_"
#define DEFAULT_MAX_SERIES 10000
#define MAX_MAX_SERIES 1000000
/*
 * HTTP limits, so that slow clients cannot lock scrapes out. SLOTS
 * connections are served at once; a connection that arrives when all are
 * taken evicts one (evict()): a slow or idle one, from the peer (source
 * address) that holds the most, so a scrape from anywhere gets in at once
 * and a peer that opens many connections pushes out its own first. No
 * per-peer limit refuses a connection: scrapers behind one address (NAT, a
 * pair of Prometheus servers on one host) may run many scrapes in
 * parallel. An evicted connection is shut down and counts against
 * libmicrohttpd's own limit (SLOTS + SPARE_SLOTS) until its thread has
 * closed it, so the spare slots keep the listening socket served
 * meanwhile. A connection is idle at most CONNECTION_TIMEOUT_S, and a
 * request takes at most REQUEST_DEADLINE_S from the connection's start or
 * the end of its previous request (slow headers, one byte at a time, keep
 * resetting the idle timeout, not this). A connection younger than
 * EVICT_GRACE_MS (in its current request or idle time) is evicted only
 * when no older one is left: a burst of scrapes does not cut itself.
 */
#define SLOTS 64
#define SPARE_SLOTS 64
#define CONNECTION_TIMEOUT_S 10
#define REQUEST_DEADLINE_S 10
#define EVICT_GRACE_MS 1000
#define WATCHDOG_MS 500
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define HTML_TYPE "text/html; charset=utf-8"

/* A rendered exposition, shared by the cache and in-flight responses. */
struct text {
	atomic_uint refs;
	uint64_t gen; /* the state generation it shows */
	size_t len;
	char data[];
};

/* A connection the deadline watches (socket context, conn_lock). */
struct conn {
	struct conn *next, **pprev;
	int fd;
	uint64_t since_ms;      /* start of the connection or of its request */
	bool cut;               /* shut down by the deadline or evicted */
	bool answering;         /* its request is whole and being answered */
	uint64_t order;         /* when it came, among connections: a burst
				 * comes within one millisecond */
	unsigned char addr[16]; /* the peer's address (IPv4: first 4 bytes) */
	unsigned held;          /* scratch for evict() */
};

struct prom_sink {
	uv_loop_t *loop;
	char *name, *listen, *path, *prefix;
	unsigned port;
	uint64_t max_series;
	double start_time; /* process_start_time_seconds */

	struct ktel_prom_set set; /* the series; written under lock */
	/* Every WATCHDOG_MS: shuts down connections past the deadline; at
	 * close, defers done() to the next loop turn. */
	uv_timer_t closer;
	pthread_mutex_t conn_lock; /* guards conns: MHD's thread and the loop */
	struct conn *conns;
	uint64_t conns_seen;    /* under conn_lock: the next conn's order */
	unsigned live;          /* in conns, not cut; under conn_lock */
	uint64_t deadline_cuts; /* under conn_lock */
	uint64_t evictions;     /* under conn_lock */

	/* Guards what the renderer copies: values, the family and series
	 * links, the counts below, gen. Written by the loop only. */
	pthread_mutex_t lock;
	uint64_t gen;  /* bumped by every batch */
	bool in_batch; /* between begin and end: the lock is held */
	/* Renders that copied the series and still read their labels: ended
	 * series (prom_series.h) are freed only when there are none. Taken
	 * under lock, given back atomically. */
	atomic_uint renders;
	uint64_t skipped; /* records with no Prometheus form (events) */

	pthread_mutex_t render_lock; /* guards cur, cur_gz; taken by scrapes only */
	struct text *cur;
	struct text *cur_gz; /* cur gzip-compressed, made at the first scrape asking */
	char *landing;       /* the HTML page served at "/" */
	/* Labels of the sink's own series: sink="<name>" and the configured
	 * labels; the configured labels alone (process_start_time_seconds). */
	char *self_labels, *const_labels;
	struct MHD_Daemon *mhd;
	atomic_uint_fast64_t scrapes, render_errors;

	struct ktel_sink_stats st; /* errors unused: see render_errors */
	bool closing;
	ktel_sink_closed_cb done;
	void *done_ctx;
};

/* ---- text ---- */

static void buf_u64(struct ktel_textbuf *b, uint64_t v, double scale)
{
	if (scale == 1.0)
		ktel_textbuf_printf(b, "%" PRIu64, v);
	else
		ktel_prom_put_double(b, (double)v / scale);
}

/* ---- rendering ---- */

static void render_header(struct ktel_textbuf *b, const struct ktel_prom_family *f)
{
	static const char *const types[] = {
		[KTEL_RECORD_HISTOGRAM] = "histogram",
		[KTEL_RECORD_COUNTER] = "counter",
		[KTEL_RECORD_GAUGE] = "gauge",
	};

	ktel_textbuf_printf(b, "# HELP %s ", f->name);
	if (f->help) {
		/* The descriptor's own words, as node_exporter shows its collectors'. */
		ktel_prom_put_escaped(b, f->help, false);
	} else {
		ktel_textbuf_puts(b, "ktelemetry metric ");
		ktel_prom_put_escaped(b, f->metric, false);
		if (f->unit && *f->unit) {
			ktel_textbuf_puts(b, " (unit: ");
			ktel_prom_put_escaped(b, f->unit, false);
			if (f->scale != 1.0)
				ktel_textbuf_puts(b, ", exposed in seconds");
			ktel_textbuf_puts(b, ")");
		}
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

struct render_ctx {
	struct ktel_textbuf *b;
	const struct ktel_prom_family *f;
	const struct ktel_prom_series *se;
};

/* One value line: `name<suffix>{labels[,le]} value`. */
static void render_sample(void *ctx, const struct ktel_prom_sample *sm)
{
	struct render_ctx *rc = ctx;
	struct ktel_textbuf *b = rc->b;

	render_series_name(b, rc->f->name, sm->suffix, rc->se->labels, sm->le_label);
	ktel_textbuf_put(b, " ", 1);
	if (sm->kind == KTEL_PROM_U64)
		buf_u64(b, sm->u, 1.0);
	else if (sm->kind == KTEL_PROM_I64)
		ktel_textbuf_printf(b, "%" PRId64, sm->i);
	else
		ktel_prom_put_double(b, sm->value);
	ktel_textbuf_put(b, "\n", 1);
}

/* f's header and its n series, copies taken by snapshot_take(). */
static void render_family(struct ktel_textbuf *b, const struct ktel_prom_family *f,
			  const struct ktel_prom_series *copies, size_t n)
{
	struct render_ctx rc = {.b = b, .f = f};

	render_header(b, f);
	for (rc.se = copies; rc.se < copies + n; rc.se++)
		ktel_prom_series__samples(f, rc.se, render_sample, &rc);
}

/* A consistent copy of what the text shows, taken under the lock. */
struct snapshot {
	uint64_t gen;
	size_t n_families, n_series;
	const struct ktel_prom_family **families; /* n_series of each in their order */
	struct ktel_prom_series *series;          /* copies, family after family */
	uint64_t series_dropped, sent, dropped, skipped, deadline_cuts, evictions;
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
	snap->families = malloc((s->set.n_families ?: 1) * sizeof(*snap->families));
	snap->series = malloc((s->set.n_series ?: 1) * sizeof(*snap->series));
	if (!snap->families || !snap->series) {
		pthread_mutex_unlock(&s->lock);
		snapshot_free(snap);
		return -ENOMEM;
	}
	for (const struct ktel_prom_family *f = s->set.families; f; f = f->next) {
		snap->families[i++] = f;
		for (const struct ktel_prom_series *se = f->first; se; se = se->fnext)
			snap->series[j++] = *se;
	}
	snap->n_families = i;
	snap->n_series = j;
	snap->gen = s->gen;
	atomic_fetch_add(&s->renders, 1);
	snap->series_dropped = s->set.series_dropped;
	snap->sent = s->st.sent;
	snap->dropped = s->st.dropped;
	snap->skipped = s->skipped;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&s->conn_lock);
	snap->deadline_cuts = s->deadline_cuts;
	snap->evictions = s->evictions;
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
	if (p && sscanf(p + 2,
			"%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d "
			"%*d %*d %*d %*d %*d %llu",
			&start) != 1)
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
		{"series", "gauge", "Series this sink exposes.", snap->n_series},
		{"series_dropped_total", "counter",
		 "Records dropped because they would add a series beyond max_series.",
		 snap->series_dropped},
		{"records_total", "counter", "Records applied to the exposed state.", snap->sent},
		{"records_dropped_total", "counter",
		 "Records not exposed (series limit, type changes, no memory).", snap->dropped},
		{"records_skipped_total", "counter",
		 "Records with no Prometheus form (events), not counted as dropped.",
		 snap->skipped},
		{"errors_total", "counter", "Failures to render the exposition.",
		 atomic_load(&s->render_errors)},
		{"scrapes_total", "counter", "Scrapes served.", atomic_load(&s->scrapes)},
		{"connections_cut_total", "counter",
		 "Connections shut down because a request took longer than the deadline.",
		 snap->deadline_cuts},
		{"connections_evicted_total", "counter",
		 "Slow or idle connections shut down to make room for a new one.", snap->evictions},
	};

	for (size_t i = 0; i < KTEL_ARRAY_SIZE(self); i++) {
		ktel_textbuf_printf(b, "# HELP ktel_prometheus_sink_%s %s\n", self[i].name,
				    self[i].help);
		ktel_textbuf_printf(b, "# TYPE ktel_prometheus_sink_%s %s\n", self[i].name,
				    self[i].type);
		ktel_textbuf_printf(b, "ktel_prometheus_sink_%s{", self[i].name);
		ktel_textbuf_puts(b, s->self_labels);
		ktel_textbuf_printf(b, "} %" PRIu64 "\n", self[i].value);
	}
	ktel_textbuf_puts(b, "# HELP process_start_time_seconds Start time of the process since "
			     "unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
			     "process_start_time_seconds");
	if (*s->const_labels) {
		ktel_textbuf_put(b, "{", 1);
		ktel_textbuf_puts(b, s->const_labels);
		ktel_textbuf_put(b, "}", 1);
	}
	ktel_textbuf_put(b, " ", 1);
	ktel_prom_put_double(b, s->start_time);
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
	struct ktel_textbuf b = {0};
	struct snapshot snap;
	const struct ktel_prom_series *copies;
	struct text *t = NULL;

	if (snapshot_take(s, &snap)) {
		atomic_fetch_add(&s->render_errors, 1);
		return NULL;
	}
	ktel_textbuf_put(&b, "", 0);
	copies = snap.series;
	for (size_t i = 0; i < snap.n_families; i++) {
		size_t n = 0;

		while (copies + n < snap.series + snap.n_series &&
		       copies[n].fam == snap.families[i])
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
	atomic_fetch_sub(&s->renders, 1);
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

/* t gzip-compressed, as a new text of t's generation; NULL on failure. */
static struct text *gzip_text(const struct text *t)
{
	z_stream z = {0};
	struct text *out = NULL;
	size_t bound;

	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return NULL;
	bound = deflateBound(&z, t->len);
	out = malloc(sizeof(*out) + bound + 1);
	if (!out)
		goto end;
	z.next_in = (Bytef *)t->data;
	z.avail_in = (uInt)t->len;
	z.next_out = (Bytef *)out->data;
	z.avail_out = (uInt)bound;
	if (t->len > UINT32_MAX || bound > UINT32_MAX || deflate(&z, Z_FINISH) != Z_STREAM_END) {
		free(out);
		out = NULL;
		goto end;
	}
	atomic_init(&out->refs, 1);
	out->gen = t->gen;
	out->len = z.total_out;
end:
	deflateEnd(&z);
	return out;
}

/*
 * A reference to a text of the current state: the kept one when no batch
 * came since it was rendered, else a new one, kept for the next scrape;
 * *gzip: its compressed form, also kept (compressed once per state, and
 * only when a scraper asks); *gzip is left true only when the text is
 * compressed (false when compression failed). Scrapes only (render_lock
 * serializes them so that they render once); on ENOMEM the previous text,
 * or NULL when there is none.
 */
static struct text *current_text(struct prom_sink *s, bool *gzip)
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
	if (*gzip && s->cur && (!s->cur_gz || s->cur_gz->gen != s->cur->gen)) {
		t = gzip_text(s->cur);
		if (t) {
			text_unref(s->cur_gz);
			s->cur_gz = t;
		} else {
			atomic_fetch_add(&s->render_errors, 1);
		}
	}
	*gzip = *gzip && s->cur_gz && s->cur && s->cur_gz->gen == s->cur->gen;
	t = *gzip ? s->cur_gz : s->cur;
	if (t)
		atomic_fetch_add(&t->refs, 1);
	pthread_mutex_unlock(&s->render_lock);
	return t;
}

/* ---- Accept-Encoding ---- */

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

/* Is [p, end) a qvalue above 0 ("1", "1.000", "0.5"; RFC 9110 12.4.2)? A
 * malformed one is not. */
static bool qvalue_positive(const char *p, const char *end)
{
	bool positive;
	int digits = 0;

	if (p == end || (*p != '0' && *p != '1'))
		return false;
	positive = *p++ == '1';
	if (p < end && *p == '.')
		for (p++; p < end && *p >= '0' && *p <= '9' && digits < 3; p++, digits++)
			positive |= *p != '0';
	return positive && p == end;
}

bool ktel_prometheus_accepts_gzip(const char *v)
{
	int gzip = -1, star = -1; /* -1: not named; else named with q > 0 */
	const char *p, *end;
	size_t len;

	if (!v)
		return false;
	len = strnlen(v, KTEL_PROMETHEUS_MAX_ACCEPT_ENCODING + 1);
	if (len > KTEL_PROMETHEUS_MAX_ACCEPT_ENCODING)
		return false;
	for (p = v, end = v + len; p < end;) {
		const char *tok, *tok_end;
		bool ok = true;

		while (p < end && (is_space(*p) || *p == ','))
			p++;
		for (tok = p; p < end && *p != ',' && *p != ';' && !is_space(*p); p++)
			;
		tok_end = p;
		/* Parameters: only q counts; the last one given wins. */
		while (p < end && *p != ',') {
			const char *val, *val_end;

			if (*p++ != ';')
				continue;
			while (p < end && is_space(*p))
				p++;
			if (end - p < 2 || (*p != 'q' && *p != 'Q') || p[1] != '=')
				continue;
			for (val = p += 2; p < end && *p != ',' && *p != ';' && !is_space(*p); p++)
				;
			val_end = p;
			ok = qvalue_positive(val, val_end);
		}
		if ((tok_end - tok == 4 && strncasecmp(tok, "gzip", 4) == 0) ||
		    (tok_end - tok == 6 && strncasecmp(tok, "x-gzip", 6) == 0))
			gzip = ok;
		else if (tok_end - tok == 1 && *tok == '*')
			star = ok;
	}
	return gzip >= 0 ? gzip == 1 : star == 1;
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

/* The landing page at "/", as node_exporter has one: a link to the metrics. */
static enum MHD_Result reply_html(struct MHD_Connection *c, const char *html)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(strlen(html), (void *)html, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, HTML_TYPE);
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* s HTML-escaped into b (text and attribute values alike). */
static void put_html(struct ktel_textbuf *b, const char *s)
{
	static const struct {
		char c;
		const char *e;
	} esc[] = {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&#39;"}};

	for (; *s; s++) {
		size_t i = 0;

		while (i < KTEL_ARRAY_SIZE(esc) && esc[i].c != *s)
			i++;
		if (i < KTEL_ARRAY_SIZE(esc))
			ktel_textbuf_puts(b, esc[i].e);
		else
			ktel_textbuf_put(b, s, 1);
	}
}

/* The landing page: self-contained (no script, style sheet or image from
 * elsewhere), naming the sink and linking to its metrics path. */
static char *landing_page(const struct prom_sink *s)
{
	struct ktel_textbuf b = {0};

	ktel_textbuf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"
			      "<title>ktelemetry</title></head>\n<body>\n<h1>ktelemetry</h1>\n"
			      "<p>eBPF kernel telemetry, Prometheus sink &quot;");
	put_html(&b, s->name);
	ktel_textbuf_puts(&b, "&quot;.</p>\n<p><a href=\"");
	put_html(&b, s->path);
	ktel_textbuf_puts(&b, "\">Metrics</a></p>\n</body>\n</html>\n");
	if (b.fail) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* The labels of the sink's own series, by the rule of every series
 * (prom_series.h): sink="<name>" when with_sink, and the configured ones. */
static char *self_labels(struct prom_sink *s, bool with_sink)
{
	struct ktel_record r = {.type = KTEL_RECORD_GAUGE, .metric = "self"};

	if (with_sink) {
		r.n_dims = 1;
		r.dims[0] = (struct ktel_dim){.name = "sink", .label = s->name};
	}
	return ktel_prom_set__labels_text(&s->set, &r);
}

/* Runs on the server thread: renders or reuses the text (current_text). */
/* MHD's thread: mark c's watched connection as answering its request (or
 * no longer, once the request ended). */
static void set_answering(struct prom_sink *s, struct MHD_Connection *c, bool answering)
{
	const union MHD_ConnectionInfo *info;

	info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (!info || !info->socket_context)
		return;
	pthread_mutex_lock(&s->conn_lock);
	((struct conn *)info->socket_context)->answering = answering;
	pthread_mutex_unlock(&s->conn_lock);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	struct prom_sink *s = cls;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	struct text *t;
	bool gzip;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	set_answering(s, c, true);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (strcmp(url, s->path) != 0 && strcmp(url, "/") == 0)
		return reply_html(c, s->landing);
	if (strcmp(url, s->path) != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, "not found\n");
	gzip = ktel_prometheus_accepts_gzip(
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
	t = current_text(s, &gzip);
	if (!t)
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE,
			     "cannot render the exposition: out of memory\n");
	resp = MHD_create_response_from_buffer_with_free_callback_cls(t->len, t->data, text_unref,
								      t);
	if (!resp) {
		text_unref(t);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	/* Caches must not serve one form to a client that asked for the other. */
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	if (gzip)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES)
		atomic_fetch_add(&s->scrapes, 1);
	return ret;
}

/* Shut down (not close: MHD owns the fd) a watched connection; MHD then
 * sees the end of the stream and closes it. Under conn_lock. */
static void cut(struct prom_sink *s, struct conn *cn)
{
	shutdown(cn->fd, SHUT_RDWR);
	cn->cut = true;
	s->live--;
}

/* Is a evicted before b? One still sending its request (or idle) before
 * one being answered: an answer ends as soon as the exposition is sent,
 * while slow headers are what locks scrapes out. Then past the grace
 * first. Two inside their grace: the older, whatever its peer, so that a
 * burst of scrapes from one address does not push out its own requests
 * (not yet read, so not answering) when slow clients have just reconnected
 * too. Two past it: the peer holding more connections, then the older. */
static bool evict_before(const struct conn *a, const struct conn *b, uint64_t now)
{
	bool a_old = now - a->since_ms >= EVICT_GRACE_MS;
	bool b_old = now - b->since_ms >= EVICT_GRACE_MS;

	if (a->answering != b->answering)
		return !a->answering;
	if (a_old != b_old)
		return a_old;
	if (a_old && a->held != b->held)
		return a->held > b->held;
	if (a->since_ms != b->since_ms)
		return a->since_ms < b->since_ms;
	return a->order < b->order;
}

/*
 * All SLOTS are taken and fresh has come: cut the connection that slows
 * scrapes least (see SLOTS). Under conn_lock; at most 2 * SLOTS
 * connections, so counting each one's peer here is cheap.
 */
static void evict(struct prom_sink *s, const struct conn *fresh)
{
	uint64_t now = uv_hrtime() / 1000000;
	struct conn *victim = NULL;

	for (struct conn *a = s->conns; a; a = a->next) {
		a->held = 0;
		for (const struct conn *b = s->conns; b && !a->cut; b = b->next)
			a->held += !b->cut && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
	}
	for (struct conn *a = s->conns; a; a = a->next)
		if (!a->cut && a != fresh && (!victim || evict_before(a, victim, now)))
			victim = a;
	if (!victim)
		return;
	cut(s, victim);
	s->evictions++;
}

/* The peer's address bytes (IPv4 and IPv6; others stay zero). */
static void peer_addr(struct MHD_Connection *c, unsigned char addr[16])
{
	const union MHD_ConnectionInfo
		*info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = info ? info->client_addr : NULL;

	if (sa && sa->sa_family == AF_INET)
		memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa && sa->sa_family == AF_INET6)
		memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

/* MHD's thread: track each connection for the request deadline and the
 * slots. */
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
		peer_addr(c, cn->addr);
		pthread_mutex_lock(&s->conn_lock);
		cn->order = s->conns_seen++;
		cn->next = s->conns;
		cn->pprev = &s->conns;
		if (s->conns)
			s->conns->pprev = &cn->next;
		s->conns = cn;
		if (++s->live > SLOTS)
			evict(s, cn);
		pthread_mutex_unlock(&s->conn_lock);
		*socket_context = cn;
		return;
	}
	if (!cn)
		return;
	/* CLOSED comes before MHD closes the socket: once cn is unlinked the
	 * watchdog cannot touch the fd. */
	pthread_mutex_lock(&s->conn_lock);
	if (!cn->cut)
		s->live--;
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
	((struct conn *)info->socket_context)->answering = false;
	pthread_mutex_unlock(&s->conn_lock);
}

/* The loop: shut down every connection whose request has taken longer
 * than the deadline. */
static void on_watchdog(uv_timer_t *t)
{
	struct prom_sink *s = t->data;
	uint64_t now = uv_hrtime() / 1000000;

	pthread_mutex_lock(&s->conn_lock);
	for (struct conn *cn = s->conns; cn; cn = cn->next) {
		if (cn->cut || now - cn->since_ms < REQUEST_DEADLINE_S * 1000ull)
			continue;
		cut(s, cn);
		s->deadline_cuts++;
	}
	pthread_mutex_unlock(&s->conn_lock);
}

static int start_server(struct prom_sink *s, struct ktel_err *err)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(s->port)};
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(s->port)};
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
	s->mhd = MHD_start_daemon(flags, s->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
				  sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(SLOTS + SPARE_SLOTS),
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
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

/*
 * A pull routed in windows (sink.h begin/end) is applied under one hold of
 * the lock, and the generation moves once, at end: a scrape shows a pull
 * whole or not at all, as when it came in one submit.
 */
static void prom_begin(void *priv)
{
	struct prom_sink *s = priv;

	pthread_mutex_lock(&s->lock);
	s->in_batch = true;
}

/* Under lock: free the ended series once no render reads them. A render
 * that starts later copies the series under the lock, where they are
 * unlinked already. */
static void free_ended(struct prom_sink *s)
{
	if (s->set.ended && atomic_load(&s->renders) == 0)
		ktel_prom_set__free_ended(&s->set);
}

static void prom_end(void *priv)
{
	struct prom_sink *s = priv;

	free_ended(s);
	s->in_batch = false;
	s->gen++;
	pthread_mutex_unlock(&s->lock);
}

static void prom_submit(void *priv, const struct ktel_record *recs, size_t n)
{
	struct prom_sink *s = priv;

	if (s->closing) {
		s->st.dropped += n;
		return;
	}
	/* Only the records' own work here: the text is rendered on scrape. */
	if (!s->in_batch)
		pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		switch (ktel_prom_set__apply(&s->set, &recs[i])) {
		case KTEL_PROM_APPLIED:
			s->st.sent++;
			break;
		case KTEL_PROM_SKIPPED:
			s->skipped++;
			s->st.skipped++;
			break;
		default:
			s->st.dropped++;
			break;
		}
	}
	if (s->in_batch)
		return;
	free_ended(s);
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
	if (s->mhd)
		MHD_stop_daemon(s->mhd); /* joins the thread, closes connections */
	ktel_prom_set__fini(&s->set);
	text_unref(s->cur);
	text_unref(s->cur_gz);
	free(s->landing);
	free(s->self_labels);
	free(s->const_labels);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->render_lock);
	pthread_mutex_destroy(&s->conn_lock);
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
	{"labels", KTEL_CFG_STRING_MAP, .default_text = "{}",
	 .doc = "Labels added to every exposed series, name to value, as the remote_write "
		"sink's: a metric dimension of the same name is renamed exported_<name>. "
		"The scraping Prometheus adds its own target labels (job, instance) the "
		"same way."},
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
		return ktel_err_set(err, EINVAL,
				    "sinks.%s.path: expected a URL path starting "
				    "with '/'",
				    s->name);
	for (const char *p = s->prefix; *p; p++)
		if (!ktel_prom_name_char(*p, p == s->prefix, true))
			return ktel_err_set(err, EINVAL,
					    "sinks.%s.prefix: \"%s\" is not a "
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
	    !(s->path = strdup(DEFAULT_PATH)) || !(s->prefix = strdup(DEFAULT_PREFIX))) {
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
	s->loop = loop;
	s->port = DEFAULT_PORT;
	s->max_series = DEFAULT_MAX_SERIES;
	s->start_time = process_start_time();
	ret = parse_opts(s, opts, err);
	if (ret)
		goto fail;
	ret = ktel_prom_set__init(&s->set, s->prefix, s->max_series);
	if (ret) {
		ktel_err_set(err, ret, "sinks.%s: out of memory", name);
		goto fail;
	}
	ret = ktel_prom_set__add_labels(&s->set, json_object_get(opts, "labels"), name, err);
	if (ret)
		goto fail;
	s->landing = landing_page(s);
	s->self_labels = self_labels(s, true);
	s->const_labels = self_labels(s, false);
	if (!s->landing || !s->self_labels || !s->const_labels) {
		ret = ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
		goto fail;
	}
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
	.begin = prom_begin,
	.end = prom_end,
	.close = prom_close,
	.stats = prom_stats,
	.cumulative = true,
};
