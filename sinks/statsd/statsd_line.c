// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* StatsD line formatter and datagram packer; see statsd_line.h for the names. */
#include "statsd_line.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A line (or unit) under construction; overflow marks it unusable. */
struct line {
	char buf[KTEL_STATSD_LINE_MAX];
	size_t len;
	bool overflow;
};

static void put(struct line *l, const char *s, size_t n)
{
	if (l->overflow || n > sizeof(l->buf) - l->len) {
		l->overflow = true;
		return;
	}
	memcpy(l->buf + l->len, s, n);
	l->len += n;
}

static void puts_(struct line *l, const char *s)
{
	put(l, s, strlen(s));
}

static void putf(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void putf(struct line *l, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		l->overflow = true;
		return;
	}
	put(l, tmp, (size_t)n);
}

/*
 * Copy s keeping only characters that cannot end a name, a value or a tag:
 * ':', '|', '@', '#', ',', whitespace and (in dotted segments) '.' would
 * change what the server parses, so they become '_'.
 */
static void put_clean(struct line *l, const char *s, bool allow_dot)
{
	for (; *s; s++) {
		char c = *s;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-' || (allow_dot && c == '.');

		put(l, ok ? &c : "_", 1);
	}
}

/* A dim's text: its label, else its integer. */
static void put_dim_value(struct line *l, const struct ktel_dim *d, bool allow_dot)
{
	if (d->label)
		put_clean(l, d->label, allow_dot);
	else
		putf(l, "%" PRId64, d->value);
}

/* What varies between the lines of one record. */
struct line_spec {
	const char *suffix; /* after the metric name: ".bucket", "_count", "" */
	const char *le;     /* bucket bound, or NULL */
	const char *value;
	const char *type;   /* "c" or "g" */
};

/* Append one complete line (no newline) for rec to l. */
static void build_line(struct line *l, const struct ktel_statsd_style *st,
		       const struct ktel_record *rec, const struct line_spec *sp)
{
	bool dotted = st->tags == KTEL_STATSD_TAGS_DOTTED;

	put_clean(l, st->prefix ? st->prefix : "", true);
	put_clean(l, rec->metric ? rec->metric : "unnamed", true);
	/* Dotted bucket lines carry the bound as the last segment instead. */
	if (!dotted || !sp->le)
		puts_(l, sp->suffix);
	for (uint32_t i = 0; dotted && i < rec->n_dims && i < KTEL_MAX_DIMS; i++) {
		puts_(l, ".");
		put_dim_value(l, &rec->dims[i], false);
	}
	if (dotted && sp->le) {
		puts_(l, ".le_");
		put_clean(l, sp->le, false);
	}
	putf(l, ":%s|%s", sp->value, sp->type);
	if (dotted || (!sp->le && rec->n_dims == 0))
		return;
	puts_(l, "|#");
	if (sp->le) {
		puts_(l, "le:");
		puts_(l, sp->le);
	}
	for (uint32_t i = 0; i < rec->n_dims && i < KTEL_MAX_DIMS; i++) {
		if (i || sp->le)
			puts_(l, ",");
		put_clean(l, rec->dims[i].name ? rec->dims[i].name : "dim", true);
		puts_(l, ":");
		put_dim_value(l, &rec->dims[i], true);
	}
}

/* Running state of one record's formatting: the first error wins. */
struct out {
	ktel_statsd_emit_fn emit;
	void *ctx;
	int err;
};

static void send_unit(struct out *o, const struct line *l)
{
	int r = l->overflow ? -EMSGSIZE : o->emit(o->ctx, l->buf, l->len);

	if (r && !o->err)
		o->err = r;
}

static void one_line(struct out *o, const struct ktel_statsd_style *st,
		     const struct ktel_record *rec, const struct line_spec *sp)
{
	struct line l = {.len = 0};

	build_line(&l, st, rec, sp);
	send_unit(o, &l);
}

static void format_histogram(struct out *o, const struct ktel_statsd_style *st,
			     const struct ktel_record *rec)
{
	const struct ktel_histogram *h = &rec->hist.delta;
	bool dotted = st->tags == KTEL_STATSD_TAGS_DOTTED;
	uint32_t n = h->n_buckets > KTEL_HIST_BUCKETS ? KTEL_HIST_BUCKETS : h->n_buckets;
	char value[32], le[32];

	for (uint32_t k = 0; k < n; k++) {
		bool inf;
		double bound;

		if (!h->counts[k])
			continue;
		bound = ktel_hist_upper_bound(h, k, &inf);
		if (inf)
			snprintf(le, sizeof(le), "%s", dotted ? "Inf" : "+Inf");
		else
			snprintf(le, sizeof(le), "%.0f", bound);
		snprintf(value, sizeof(value), "%" PRIu64, h->counts[k]);
		one_line(o, st, rec, &(struct line_spec){".bucket", le, value, "c"});
	}
	snprintf(value, sizeof(value), "%" PRIu64, ktel_hist_count(h));
	one_line(o, st, rec, &(struct line_spec){"_count", NULL, value, "c"});
	if (h->has_sum) {
		snprintf(value, sizeof(value), "%" PRIu64, h->sum);
		one_line(o, st, rec, &(struct line_spec){"_sum", NULL, value, "c"});
	}
}

/*
 * StatsD reads a leading sign on a gauge as a change to the current value,
 * so a negative level is set in two steps that must travel together.
 */
static void format_gauge(struct out *o, const struct ktel_statsd_style *st,
			 const struct ktel_record *rec)
{
	struct line l = {.len = 0};
	char value[32];

	snprintf(value, sizeof(value), "%" PRId64, rec->gauge);
	if (rec->gauge < 0) {
		build_line(&l, st, rec, &(struct line_spec){"", NULL, "0", "g"});
		puts_(&l, "\n");
	}
	build_line(&l, st, rec, &(struct line_spec){"", NULL, value, "g"});
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
		snprintf(value, sizeof(value), "%" PRIu64, rec->counter.delta);
		one_line(&o, style, rec, &(struct line_spec){"", NULL, value, "c"});
		break;
	case KTEL_RECORD_GAUGE:
		format_gauge(&o, style, rec);
		break;
	case KTEL_RECORD_EVENT:
		one_line(&o, style, rec, &(struct line_spec){"", NULL, "1", "c"});
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
