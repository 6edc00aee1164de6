// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A set of series as a snappy-compressed WriteRequest; see rw_encode.h. */
#include "rw_encode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "remote.pb-c.h"
#include "rw_dlopen.h"

/* The arenas of one request: every struct the message points to. */
struct enc {
	const struct ktel_prom_family *f;
	const struct ktel_prom_series *se;
	int64_t ts;
	bool stale; /* the series at hand ended: its samples are markers */
	/* counts (first pass), then fill positions (second pass) */
	size_t n_ts, n_labels, name_bytes;
	bool fill;
	KtelPrompb__TimeSeries *ts_arr, **ts_ptr;
	KtelPrompb__Sample *smp_arr, **smp_ptr;
	KtelPrompb__Label *lab_arr, **lab_ptr;
	char *names;
	size_t i_ts, i_lab, i_name;
};

static int label_cmp(const void *a, const void *b)
{
	const KtelPrompb__Label *x = *(KtelPrompb__Label *const *)a;
	const KtelPrompb__Label *y = *(KtelPrompb__Label *const *)b;

	return strcmp(x->name, y->name);
}

static void add_label(struct enc *e, KtelPrompb__TimeSeries *t, const char *name, const char *value)
{
	KtelPrompb__Label *l = &e->lab_arr[e->i_lab];

	ktel_prompb__label__init(l);
	l->name = (char *)name;
	l->value = (char *)value;
	e->lab_ptr[e->i_lab++] = l;
	t->n_labels++;
}

/* Sort t's labels by name, as the protocol asks, and keep one of equal
 * names: a receiver refuses a series that repeats a label name, and two
 * dims whose names sanitize alike would (prom_series.h renames a dim that
 * collides with a configured label, so those two are never equal). */
static void sort_labels(KtelPrompb__TimeSeries *t)
{
	size_t n = 0;

	qsort(t->labels, t->n_labels, sizeof(*t->labels), label_cmp);
	for (size_t i = 0; i < t->n_labels; i++)
		if (!n || strcmp(t->labels[n - 1]->name, t->labels[i]->name) != 0)
			t->labels[n++] = t->labels[i];
	t->n_labels = n;
}

static const char *next_str(const char *p)
{
	return p + strlen(p) + 1;
}

/* One sample of the series at hand: counted, or written as a TimeSeries. */
static void on_sample(void *ctx, const struct ktel_prom_sample *sm)
{
	struct enc *e = ctx;
	size_t name_len = strlen(e->f->name) + strlen(sm->suffix) + 1;
	size_t n_labels = 1 + e->se->n_pairs + (sm->le_value ? 1 : 0);
	KtelPrompb__TimeSeries *t;
	KtelPrompb__Sample *s;
	const char *p;
	char *name;

	if (!e->fill) {
		e->n_ts++;
		e->n_labels += n_labels;
		e->name_bytes += name_len;
		return;
	}
	name = e->names + e->i_name;
	e->i_name += name_len;
	strcpy(name, e->f->name);
	strcat(name, sm->suffix);
	t = &e->ts_arr[e->i_ts];
	s = &e->smp_arr[e->i_ts];
	ktel_prompb__time_series__init(t);
	ktel_prompb__sample__init(s);
	if (e->stale) {
		uint64_t bits = KTEL_PROM_STALE_NAN_BITS;

		memcpy(&s->value, &bits, sizeof(s->value));
	} else {
		s->value = sm->value;
	}
	s->timestamp = e->ts;
	e->smp_ptr[e->i_ts] = s;
	t->samples = &e->smp_ptr[e->i_ts];
	t->n_samples = 1;
	t->labels = &e->lab_ptr[e->i_lab];
	add_label(e, t, "__name__", name);
	p = e->se->pairs;
	for (uint32_t i = 0; i < e->se->n_pairs; i++, p = next_str(next_str(p)))
		add_label(e, t, p, next_str(p));
	if (sm->le_value)
		add_label(e, t, "le", sm->le_value);
	sort_labels(t);
	e->ts_ptr[e->i_ts++] = t;
}

static void walk(struct enc *e, const struct ktel_prom_set *set)
{
	for (e->f = set->families; e->f; e->f = e->f->next)
		for (e->se = e->f->first; e->se; e->se = e->se->fnext)
			ktel_prom_series__samples(e->f, e->se, on_sample, e);
	/* Ended series: each of their samples once more, as the staleness
	 * marker, so the receiver ends them now rather than 5 minutes after
	 * their last sample. */
	e->stale = true;
	for (e->se = set->ended; e->se; e->se = e->se->fnext) {
		if (e->se->superseded)
			continue;
		e->f = e->se->fam;
		ktel_prom_series__samples(e->f, e->se, on_sample, e);
	}
	e->stale = false;
}

static void enc_free(struct enc *e)
{
	free(e->ts_arr);
	free(e->ts_ptr);
	free(e->smp_arr);
	free(e->smp_ptr);
	free(e->lab_arr);
	free(e->lab_ptr);
	free(e->names);
}

/* Pack req and compress it into a new buffer. */
static int pack(const KtelPrompb__WriteRequest *req, char **ret_body, size_t *ret_len)
{
	size_t len = ktel_prompb__write_request__get_packed_size(req), out_len;
	uint8_t *raw = malloc(len ?: 1);
	char *out;
	int ret;

	if (!raw)
		return -ENOMEM;
	ktel_prompb__write_request__pack(req, raw);
	out_len = ktel_snappy_max_compressed_length(len);
	out = malloc(out_len ?: 1);
	if (!out) {
		free(raw);
		return -ENOMEM;
	}
	ret = ktel_snappy_compress((const char *)raw, len, out, &out_len);
	free(raw);
	if (ret) {
		free(out);
		return ret;
	}
	*ret_body = out;
	*ret_len = out_len;
	return 0;
}

int ktel_rw_encode(const struct ktel_prom_set *set, int64_t timestamp_ms, char **ret_body,
		   size_t *ret_len, uint64_t *ret_samples)
{
	KtelPrompb__WriteRequest req = KTEL_PROMPB__WRITE_REQUEST__INIT;
	struct enc e = {.ts = timestamp_ms};
	int ret;

	walk(&e, set);
	if (!e.n_ts)
		return -ENODATA;
	e.ts_arr = malloc(e.n_ts * sizeof(*e.ts_arr));
	e.ts_ptr = malloc(e.n_ts * sizeof(*e.ts_ptr));
	e.smp_arr = malloc(e.n_ts * sizeof(*e.smp_arr));
	e.smp_ptr = malloc(e.n_ts * sizeof(*e.smp_ptr));
	e.lab_arr = malloc(e.n_labels * sizeof(*e.lab_arr));
	e.lab_ptr = malloc(e.n_labels * sizeof(*e.lab_ptr));
	e.names = malloc(e.name_bytes);
	if (!e.ts_arr || !e.ts_ptr || !e.smp_arr || !e.smp_ptr || !e.lab_arr || !e.lab_ptr ||
	    !e.names) {
		enc_free(&e);
		return -ENOMEM;
	}
	e.fill = true;
	walk(&e, set);
	req.n_timeseries = e.i_ts;
	req.timeseries = e.ts_ptr;
	ret = pack(&req, ret_body, ret_len);
	if (!ret)
		*ret_samples = e.i_ts;
	enc_free(&e);
	return ret;
}
