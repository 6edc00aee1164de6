// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* StatsD line formatter and datagram packer; see statsd_line.h for the names. */
#include "statsd_line.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "textbuf.h"
#include "units.h"

/*
 * A line (or unit) under construction: a textbuf fixed on buf, so a line
 * longer than KTEL_STATSD_LINE_MAX fails it instead of growing (the one
 * byte more is room for the NUL the textbuf keeps after the text).
 */
struct line {
	struct ktel_textbuf t;
	char buf[KTEL_STATSD_LINE_MAX + 1];
};

static void line_init(struct line *l)
{
	l->t = (struct ktel_textbuf){.p = l->buf, .cap = sizeof(l->buf), .fixed = true};
	l->buf[0] = '\0';
}

/*
 * Copy s keeping only characters that cannot end a name, a value or a tag:
 * ':', '|', '@', '#', ',', whitespace and (in dotted segments) '.' would
 * change what the server parses, so they become '_'.
 */
static void put_clean(struct ktel_textbuf *b, const char *s, bool allow_dot)
{
	for (; *s; s++) {
		char c = *s;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-' || (allow_dot && c == '.');

		ktel_textbuf_put(b, ok ? &c : "_", 1);
	}
}

/* A dim's text: its label, else its integer. */
static void put_dim_value(struct ktel_textbuf *b, const struct ktel_dim *d, bool allow_dot)
{
	if (d->label)
		put_clean(b, d->label, allow_dot);
	else
		ktel_textbuf_printf(b, "%" PRId64, d->value);
}

/*
 * How many leading bytes of metric the prefix already says: under the prefix
 * "ktel." the self-telemetry name "ktel_pull_duration" reads
 * "ktel.pull_duration", not "ktel.ktel_pull_duration". Returns 0 when the
 * metric does not start with the prefix (less its dot) and '_', or would
 * be left empty.
 */
static size_t repeated_stem(const char *prefix, const char *metric)
{
	size_t n = strlen(prefix);

	if (n < 2 || prefix[n - 1] != '.')
		return 0;
	n--;
	if (strncmp(prefix, metric, n) != 0 || metric[n] != '_' || !metric[n + 1])
		return 0;
	return n + 1;
}

/*
 * A unit whose rule scales (ns, us, ms into seconds): its values would be
 * fractions in the rule's unit, which integer-only servers cut (Netdata
 * parses a counter with strtoll and logs "excess data" for the rest, and
 * keeps three decimals of a gauge), so they are sent in the record's own
 * unit, as the integers they are.
 */
static const struct ktel_unit_rule *scaled_rule(const struct ktel_record *rec)
{
	const struct ktel_unit_rule *u = ktel_unit_rule(rec->unit);

	return u && u->decimals ? u : NULL;
}

/*
 * prefix, metric and unit suffix: "ktel.runq_latency_seconds". With native,
 * for values sent in the record's own unit, a scaled unit is named as it is
 * ("ktel.pull_duration_ns") instead of by its rule's suffix.
 */
static void put_base_name(struct ktel_textbuf *b, const struct ktel_statsd_style *st,
			  const struct ktel_record *rec, bool native)
{
	const char *prefix = st->prefix ? st->prefix : "";
	const char *metric = rec->metric ? rec->metric : "unnamed";
	const struct ktel_unit_rule *u = ktel_unit_rule(rec->unit);

	put_clean(b, prefix, true);
	put_clean(b, metric + repeated_stem(prefix, metric), true);
	if (native && scaled_rule(rec)) {
		char suffix[40];

		snprintf(suffix, sizeof(suffix), "_%s", rec->unit);
		if (!ktel_str_ends_with(metric, suffix))
			ktel_textbuf_puts(b, suffix);
	} else if (u && !ktel_str_ends_with(metric, u->suffix)) {
		ktel_textbuf_puts(b, u->suffix);
	}
}

/* What varies between the lines of one record. */
struct line_spec {
	const char *part; /* "bucket", "count", "sum", "sum_us", or NULL for the value itself */
	const char *le;   /* bucket bound ("0.001", "+Inf"), or NULL */
	const char *value;
	const char *type; /* "c" or "g" */
};

/*
 * Dotted: every dim as ".<name>.<value>", then ".<part>", then ".le_<bound>"
 * with '.' in the bound as '_' and "+Inf" as "Inf" (a name segment has
 * neither '.' nor '+').
 */
static void put_dotted(struct ktel_textbuf *b, const struct ktel_record *rec,
		       const struct line_spec *sp)
{
	for (uint32_t i = 0; i < rec->n_dims && i < KTEL_MAX_DIMS; i++) {
		ktel_textbuf_puts(b, ".");
		put_clean(b, rec->dims[i].name ? rec->dims[i].name : "dim", false);
		ktel_textbuf_puts(b, ".");
		put_dim_value(b, &rec->dims[i], false);
	}
	if (sp->part) {
		ktel_textbuf_puts(b, ".");
		ktel_textbuf_puts(b, sp->part);
	}
	if (sp->le) {
		ktel_textbuf_puts(b, ".le_");
		put_clean(b, sp->le[0] == '+' ? sp->le + 1 : sp->le, false);
	}
	ktel_textbuf_printf(b, ":%s|%s", sp->value, sp->type);
}

/* DogStatsD: ".<part>:V|t|#le:<bound>,<name>:<value>,...". */
static void put_tagged(struct ktel_textbuf *b, const struct ktel_record *rec,
		       const struct line_spec *sp)
{
	if (sp->part) {
		ktel_textbuf_puts(b, ".");
		ktel_textbuf_puts(b, sp->part);
	}
	ktel_textbuf_printf(b, ":%s|%s", sp->value, sp->type);
	if (!sp->le && rec->n_dims == 0)
		return;
	ktel_textbuf_puts(b, "|#");
	if (sp->le) {
		ktel_textbuf_puts(b, "le:");
		ktel_textbuf_puts(b, sp->le);
	}
	for (uint32_t i = 0; i < rec->n_dims && i < KTEL_MAX_DIMS; i++) {
		if (i || sp->le)
			ktel_textbuf_puts(b, ",");
		put_clean(b, rec->dims[i].name ? rec->dims[i].name : "dim", true);
		ktel_textbuf_puts(b, ":");
		put_dim_value(b, &rec->dims[i], true);
	}
}

/* Append one complete line (no newline) for rec to b. */
static void build_line(struct ktel_textbuf *b, const struct ktel_statsd_style *st,
		       const struct ktel_record *rec, const struct line_spec *sp)
{
	/* A histogram's name keeps the rule's unit, that of its bounds;
	 * a counter or gauge is named in the unit of its value. */
	put_base_name(b, st, rec, rec->type != KTEL_RECORD_HISTOGRAM);
	if (st->tags == KTEL_STATSD_TAGS_DOTTED)
		put_dotted(b, rec, sp);
	else
		put_tagged(b, rec, sp);
}

/* Running state of one record's formatting: the first error wins. */
struct out {
	ktel_statsd_emit_fn emit;
	void *ctx;
	int err;
};

static void send_unit(struct out *o, const struct line *l)
{
	int r = l->t.fail ? -EMSGSIZE : o->emit(o->ctx, l->t.p, l->t.len);

	if (r && !o->err)
		o->err = r;
}

static void one_line(struct out *o, const struct ktel_statsd_style *st,
		     const struct ktel_record *rec, const struct line_spec *sp)
{
	struct line l;

	line_init(&l);
	build_line(&l.t, st, rec, sp);
	send_unit(o, &l);
}

/* A raw integer value, exactly: in the record's own unit (scaled_rule). */
static void format_value(char *buf, size_t size, int64_t v, bool is_signed)
{
	snprintf(buf, size, is_signed ? "%" PRId64 : "%" PRIu64, v);
}

/*
 * Buckets are cumulative, as `le` promises to Telegraf and Prometheus: each
 * bucket line counts the values <= its bound, the last (+Inf) is the count.
 * Lines start at the first non-empty bucket (the ones below it are 0, what a
 * StatsD server assumes for a line not sent) and run to +Inf.
 */
static void format_buckets(struct out *o, const struct ktel_statsd_style *st,
			   const struct ktel_record *rec)
{
	const struct ktel_histogram *h = &rec->hist.delta;
	uint32_t n = h->n_buckets > KTEL_HIST_BUCKETS ? KTEL_HIST_BUCKETS : h->n_buckets;
	uint64_t cum = 0;
	const struct ktel_unit_rule *u = ktel_unit_rule(rec->unit);
	bool inf = false;
	char value[32], le[KTEL_PLAIN_DECIMAL_MAX];

	for (uint32_t k = 0; k < n; k++) {
		double bound = ktel_hist_upper_bound(h, k, &inf);

		cum += h->counts[k];
		if (!cum)
			continue;
		/* A plain decimal in the rule's unit ("0.000016"): the same
		 * name on every machine, and no exponent for a server to
		 * take apart. */
		ktel_format_plain(inf ? INFINITY : bound, u ? u->decimals : 0, le, sizeof(le));
		snprintf(value, sizeof(value), "%" PRIu64, cum);
		one_line(o, st, rec, &(struct line_spec){"bucket", le, value, "c"});
	}
	if (cum && !inf) {
		snprintf(value, sizeof(value), "%" PRIu64, cum);
		one_line(o, st, rec, &(struct line_spec){"bucket", "+Inf", value, "c"});
	}
}

static void format_histogram(struct out *o, const struct ktel_statsd_style *st,
			     const struct ktel_record *rec)
{
	const struct ktel_histogram *h = &rec->hist.delta;
	const struct ktel_unit_rule *u = scaled_rule(rec);
	char value[32], part[48];

	format_buckets(o, st, rec);
	snprintf(value, sizeof(value), "%" PRIu64, ktel_hist_count(h));
	one_line(o, st, rec, &(struct line_spec){"count", NULL, value, "c"});
	if (h->has_sum) {
		/* The sum is an integer in the record's unit; in seconds it
		 * would be a fraction. Its part names that unit ("sum_us")
		 * when it is not the unit of the name and bounds. */
		snprintf(part, sizeof(part), u ? "sum_%s" : "sum", u ? rec->unit : "");
		format_value(value, sizeof(value), (int64_t)h->sum, false);
		one_line(o, st, rec, &(struct line_spec){part, NULL, value, "c"});
	}
}

/*
 * StatsD reads a leading sign on a gauge as a change to the current value,
 * so a negative level is set in two steps that must travel together.
 */
static void format_gauge(struct out *o, const struct ktel_statsd_style *st,
			 const struct ktel_record *rec)
{
	struct line l;
	char value[32];

	line_init(&l);
	format_value(value, sizeof(value), rec->gauge, true);
	if (rec->gauge < 0) {
		build_line(&l.t, st, rec, &(struct line_spec){NULL, NULL, "0", "g"});
		ktel_textbuf_puts(&l.t, "\n");
	}
	build_line(&l.t, st, rec, &(struct line_spec){NULL, NULL, value, "g"});
	send_unit(o, &l);
}

int ktel_statsd__format(const struct ktel_statsd_style *style, const struct ktel_record *rec,
			ktel_statsd_emit_fn emit, void *ctx)
{
	struct out o = {.emit = emit, .ctx = ctx};
	char value[32];

	switch (rec->type) {
	case KTEL_RECORD_HISTOGRAM:
		format_histogram(&o, style, rec);
		break;
	case KTEL_RECORD_COUNTER:
		format_value(value, sizeof(value), (int64_t)rec->counter.delta, false);
		one_line(&o, style, rec, &(struct line_spec){NULL, NULL, value, "c"});
		break;
	case KTEL_RECORD_GAUGE:
		format_gauge(&o, style, rec);
		break;
	case KTEL_RECORD_EVENT:
		one_line(&o, style, rec, &(struct line_spec){NULL, NULL, "1", "c"});
		break;
	default:
		return -EINVAL;
	}
	return o.err;
}

/* ---- packer ------------------------------------------------------------ */

int ktel_statsd_packer__init(struct ktel_statsd_packer *p, size_t max, ktel_statsd_flush_fn flush,
			     void *ctx)
{
	if (!max || max >= KTEL_STATSD_UDP_MAX || !flush)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->buf = malloc(max);
	if (!p->buf)
		return -ENOMEM;
	p->max = max;
	p->flush = flush;
	p->ctx = ctx;
	return 0;
}

void ktel_statsd_packer__release(struct ktel_statsd_packer *p)
{
	if (!p)
		return;
	free(p->buf);
	p->buf = NULL;
	p->len = 0;
}

int ktel_statsd_packer__flush(struct ktel_statsd_packer *p)
{
	size_t len = p->len;

	if (!len)
		return 0;
	p->len = 0;
	return p->flush(p->ctx, p->buf, len);
}

int ktel_statsd_packer__add(struct ktel_statsd_packer *p, const char *unit, size_t len)
{
	int r = 0;

	if (len > p->max) {
		p->oversize++;
		return -EMSGSIZE;
	}
	/* Units are joined by '\n': one more byte unless the datagram is empty. */
	if (p->len && p->len + 1 + len > p->max)
		r = ktel_statsd_packer__flush(p);
	if (p->len)
		p->buf[p->len++] = '\n';
	memcpy(p->buf + p->len, unit, len);
	p->len += len;
	return r;
}
