// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Router: named sink instances and batch hand-off; see router.h. */
#include "router.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sinks.h"

/*
 * A group of closes waiting to complete: done(ctx) runs when pending drops
 * to zero. Entries carry a pointer to their group so that the callback of a
 * sink's close never needs the router, which may be gone by then.
 */
struct close_group {
	size_t pending;
	ktel_sink_closed_cb done;
	void *ctx;
	ktel_router_close_report_fn report;
	void *report_ctx;
};

struct sink_entry {
	char *name;
	const struct ktel_sink_ops *ops;
	void *priv;
	struct close_group *group;
	struct ktel_sink_stats last; /* as of the previous self_records call */
	struct ktel_sink_stats before_close;
	bool reported;
	/* Durable sinks (sink.h): the last mark given and the last one the
	 * sink said is durable. live: in the table; closing: on the router's
	 * closing list (its acks still count until its close completes). */
	struct ktel_router *r;
	struct sink_entry *next_closing;
	bool durable, live, closing;
	uint64_t marked, acked;
};

/* A batch routed in parts (ktel_router__batch_begin): its targets are
 * picked at its first part with records. */
struct batch {
	bool open, started, cumulative_only;
	const char *const *names;
	size_t n_names;
	struct sink_entry *to[KTEL_ROUTER_MAX_SINKS];
	size_t n_to;
};

struct ktel_router {
	uv_loop_t *loop;
	struct sink_entry *sinks[KTEL_ROUTER_MAX_SINKS];
	size_t n_sinks;
	struct batch batch;
	struct ktel_router_stats stats;
	ktel_router_close_report_fn report;
	void *report_ctx;
	/* Durability (ktel_router__mark): the last mark handed out, the
	 * level last reported, a cap left by a durable sink that closed in a
	 * full close without making everything durable, and the durable
	 * sinks still closing. */
	uint64_t mark, notified, cap;
	bool closing_all, in_mark;
	struct sink_entry *closing;
	ktel_router_durable_fn durable_fn;
	void *durable_ctx;
};

/* ---- durability ---- */

static uint64_t level_of(const struct ktel_router *r)
{
	uint64_t level = r->mark < r->cap ? r->mark : r->cap;

	for (size_t i = 0; i < r->n_sinks; i++)
		if (r->sinks[i]->durable && r->sinks[i]->acked < level)
			level = r->sinks[i]->acked;
	for (const struct sink_entry *e = r->closing; e; e = e->next_closing)
		if (e->acked < level)
			level = e->acked;
	return level;
}

uint64_t ktel_router__durable_level(const struct ktel_router *r)
{
	return level_of(r);
}

/* Tell the daemon when the level grew (not from inside ktel_router__mark:
 * its caller reads the level itself). */
static void durable_check(struct ktel_router *r)
{
	uint64_t level;

	if (r->in_mark)
		return;
	level = level_of(r);
	if (level <= r->notified)
		return;
	r->notified = level;
	if (r->durable_fn)
		r->durable_fn(r->durable_ctx, level);
}

static void entry_acked(void *ctx, uint64_t mark)
{
	struct sink_entry *e = ctx;

	if (mark <= e->acked)
		return;
	e->acked = mark;
	if (e->r && (e->live || e->closing))
		durable_check(e->r);
}

uint64_t ktel_router__mark(struct ktel_router *r)
{
	r->mark++;
	r->in_mark = true;
	for (size_t i = 0; i < r->n_sinks; i++) {
		struct sink_entry *e = r->sinks[i];

		if (!e->durable)
			continue;
		e->marked = r->mark;
		e->ops->mark(e->priv, r->mark);
	}
	r->in_mark = false;
	return r->mark;
}

void ktel_router__on_durable(struct ktel_router *r, ktel_router_durable_fn fn, void *ctx)
{
	r->durable_fn = fn;
	r->durable_ctx = ctx;
}

bool ktel_router__any_durable(const struct ktel_router *r)
{
	for (size_t i = 0; i < r->n_sinks; i++)
		if (r->sinks[i]->durable)
			return true;
	return false;
}

/* An entry enters the table: what it will be marked starts now. */
static void entry_go_live(struct ktel_router *r, struct sink_entry *e)
{
	e->live = true;
	e->marked = e->acked = r->mark;
}

/* An entry leaves the table to close: a durable one keeps holding the level
 * back until its close completes. */
static void entry_retire(struct ktel_router *r, struct sink_entry *e)
{
	e->live = false;
	if (!e->durable)
		return;
	e->closing = true;
	e->next_closing = r->closing;
	r->closing = e;
}

static void entry_unretire(struct sink_entry *e)
{
	struct ktel_router *r = e->r;

	if (!e->closing || !r)
		return;
	for (struct sink_entry **p = &r->closing; *p; p = &(*p)->next_closing)
		if (*p == e) {
			*p = e->next_closing;
			break;
		}
	e->closing = false;
	/* A durable sink that did not make everything durable by the end of a
	 * full close (its close timed out): nothing after what it acked may
	 * be reported durable. One removed by a reload no longer matters. */
	if (r->closing_all && e->acked < e->marked && e->acked < r->cap)
		r->cap = e->acked;
	durable_check(r);
}

int ktel_router__recover(struct ktel_router *r, ktel_sink_window_fn fn, void *ctx,
			 struct ktel_err *err)
{
	for (size_t i = 0; i < r->n_sinks; i++) {
		struct sink_entry *e = r->sinks[i];
		int ret;

		if (!e->ops->recover)
			continue;
		ret = e->ops->recover(e->priv, fn, ctx, err);
		if (ret)
			return ret;
	}
	return 0;
}

struct ktel_router *ktel_router__new(uv_loop_t *loop)
{
	struct ktel_router *r;

	if (!loop) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->loop = loop;
	r->cap = UINT64_MAX;
	return r;
}

static void group_put(struct close_group *g)
{
	if (!g || --g->pending)
		return;
	if (g->done)
		g->done(g->ctx);
	free(g);
}

static void entry_closed(void *ctx)
{
	struct sink_entry *e = ctx;
	struct close_group *g = e->group;

	/* Inside done a sink's stats are final and still readable (sink.h). */
	if (g && g->report) {
		struct ktel_sink_stats st = {0};

		e->ops->stats(e->priv, &st);
		g->report(e->name, &st, st.dropped - e->before_close.dropped, g->report_ctx);
	}
	entry_unretire(e);
	free(e->name);
	free(e);
	group_put(g);
}

/* Close entries[0..n) with one group; the extra reference held during the
 * loop covers sinks that complete synchronously. */
static int close_entries(const struct ktel_router *r, struct sink_entry **entries, size_t n,
			 uint64_t timeout_ms, ktel_sink_closed_cb done, void *ctx)
{
	struct close_group *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->pending = n + 1;
	g->done = done;
	g->ctx = ctx;
	g->report = r->report;
	g->report_ctx = r->report_ctx;
	for (size_t i = 0; i < n; i++) {
		entries[i]->group = g;
		entries[i]->ops->stats(entries[i]->priv, &entries[i]->before_close);
		entries[i]->ops->close(entries[i]->priv, timeout_ms, entry_closed, entries[i]);
	}
	group_put(g);
	return 0;
}

void ktel_router__close(struct ktel_router *r, uint64_t timeout_ms, ktel_sink_closed_cb done,
			void *ctx)
{
	struct sink_entry *entries[KTEL_ROUTER_MAX_SINKS];
	size_t n = r->n_sinks;

	memcpy(entries, r->sinks, n * sizeof(entries[0]));
	r->n_sinks = 0;
	r->closing_all = true;
	for (size_t i = 0; i < n; i++)
		entry_retire(r, entries[i]);
	if (close_entries(r, entries, n, timeout_ms, done, ctx) == 0)
		return;
	/* No memory for a group: close one by one without a shared
	 * completion; the caller still hears back once, now. */
	for (size_t i = 0; i < n; i++) {
		entries[i]->group = NULL;
		entries[i]->ops->close(entries[i]->priv, 0, entry_closed, entries[i]);
	}
	if (done)
		done(ctx);
}

void ktel_router__free(struct ktel_router *r)
{
	if (!r)
		return;
	if (r->n_sinks)
		ktel_router__close(r, 0, NULL, NULL);
	/* Sinks still closing must not reach the router any more. */
	for (struct sink_entry *e = r->closing; e; e = e->next_closing)
		e->r = NULL;
	free(r);
}

static ssize_t find(const struct ktel_router *r, const char *name)
{
	for (size_t i = 0; i < r->n_sinks; i++)
		if (strcmp(r->sinks[i]->name, name) == 0)
			return i;
	return -1;
}

/* A sink instance not (yet) in the table. */
static int new_entry(struct ktel_router *r, const char *name, const struct ktel_sink_ops *ops,
		     const json_t *opts, struct sink_entry **ret, struct ktel_err *err)
{
	struct sink_entry *e = calloc(1, sizeof(*e));
	int rc;

	if (!e || !(e->name = strdup(name))) {
		free(e);
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
	}
	e->ops = ops;
	e->r = r;
	rc = ops->create(r->loop, name, opts, &e->priv, err);
	if (rc) {
		free(e->name);
		free(e);
		return rc;
	}
	e->durable = ops->durable && ops->mark && ops->durable(e->priv, entry_acked, e);
	*ret = e;
	return 0;
}

int ktel_router__add_sink_ops(struct ktel_router *r, const char *name,
			      const struct ktel_sink_ops *ops, const json_t *opts,
			      struct ktel_err *err)
{
	struct sink_entry *e;
	int ret;

	if (find(r, name) >= 0)
		return ktel_err_set(err, EEXIST, "sinks.%s: a sink with this name exists", name);
	if (r->n_sinks >= KTEL_ROUTER_MAX_SINKS)
		return ktel_err_set(err, E2BIG, "sinks.%s: more than %d sinks", name,
				    KTEL_ROUTER_MAX_SINKS);
	ret = new_entry(r, name, ops, opts, &e, err);
	if (ret)
		return ret;
	entry_go_live(r, e);
	r->sinks[r->n_sinks++] = e;
	return 0;
}

int ktel_router__add_sink(struct ktel_router *r, const char *name, const char *type,
			  const json_t *opts, struct ktel_err *err)
{
	const struct ktel_sink_ops *ops = ktel_sink_type_find(type);

	if (!ops)
		return ktel_err_set(err, ENOENT, "sinks.%s.type: unknown sink type \"%s\"", name,
				    type);
	return ktel_router__add_sink_ops(r, name, ops, opts, err);
}

/* Close one entry already taken out of the table. */
static void close_entry(struct ktel_router *r, struct sink_entry *e, uint64_t timeout_ms,
			ktel_sink_closed_cb done, void *ctx)
{
	if (close_entries(r, &e, 1, timeout_ms, done, ctx) == 0)
		return;
	e->group = NULL;
	e->ops->close(e->priv, 0, entry_closed, e);
	if (done)
		done(ctx);
}

int ktel_router__remove_sink(struct ktel_router *r, const char *name, uint64_t timeout_ms,
			     ktel_sink_closed_cb done, void *ctx)
{
	ssize_t i = find(r, name);
	struct sink_entry *e;

	if (i < 0)
		return -ENOENT;
	e = r->sinks[i];
	/* Keep creation order: indexes are the "sink" dimension's value. */
	memmove(&r->sinks[i], &r->sinks[i + 1], (r->n_sinks - i - 1) * sizeof(r->sinks[0]));
	r->n_sinks--;
	entry_retire(r, e);
	close_entry(r, e, timeout_ms, done, ctx);
	return 0;
}

/* A prepared instance: an entry that is not in the table yet. */
struct ktel_router_staged {
	struct sink_entry *e;
};

int ktel_router__prepare_sink(struct ktel_router *r, const char *name, const char *type,
			      const json_t *opts, struct ktel_router_staged **ret,
			      struct ktel_err *err)
{
	const struct ktel_sink_ops *ops = ktel_sink_type_find(type);
	struct ktel_router_staged *s;
	int rc;

	if (!ops)
		return ktel_err_set(err, ENOENT, "sinks.%s.type: unknown sink type \"%s\"", name,
				    type);
	s = calloc(1, sizeof(*s));
	if (!s)
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
	rc = new_entry(r, name, ops, opts, &s->e, err);
	if (rc) {
		free(s);
		return rc;
	}
	*ret = s;
	return 0;
}

int ktel_router__install_sink(struct ktel_router *r, struct ktel_router_staged *s,
			      uint64_t timeout_ms)
{
	struct sink_entry *e = s->e, *old;
	ssize_t i = find(r, e->name);

	if (i < 0) {
		if (r->n_sinks >= KTEL_ROUTER_MAX_SINKS)
			return -E2BIG;
		entry_go_live(r, e);
		r->sinks[r->n_sinks++] = e;
		free(s);
		return 0;
	}
	old = r->sinks[i];
	entry_go_live(r, e);
	r->sinks[i] = e;
	free(s);
	entry_retire(r, old);
	close_entry(r, old, timeout_ms, NULL, NULL);
	return 0;
}

void ktel_router__discard_sink(struct ktel_router_staged *s)
{
	struct sink_entry *e;

	if (!s)
		return;
	e = s->e;
	free(s);
	/* It never delivered anything: no close report, nothing to flush. */
	e->group = NULL;
	e->r = NULL;
	e->ops->close(e->priv, 0, entry_closed, e);
}

int ktel_router__check_names(const struct ktel_router *r, const char *const *names, size_t n_names,
			     struct ktel_err *err)
{
	for (size_t i = 0; i < n_names; i++)
		if (!names[i] || find(r, names[i]) < 0)
			return ktel_err_set(err, ENOENT, "sink \"%s\": no sink has this name",
					    names[i] ? names[i] : "(null)");
	return 0;
}

/* The sinks a batch goes to, each once: the named ones (all when none),
 * only the cumulative ones if asked; names no sink has are counted. */
static size_t targets(struct ktel_router *r, const char *const *sink_names, size_t n_names,
		      bool cumulative_only, struct sink_entry **to)
{
	bool done[KTEL_ROUTER_MAX_SINKS] = {false};
	size_t n = 0;

	if (cumulative_only)
		for (size_t i = 0; i < r->n_sinks; i++)
			done[i] = !r->sinks[i]->ops->cumulative;
	if (!sink_names || !n_names) {
		for (size_t i = 0; i < r->n_sinks; i++)
			if (!done[i])
				to[n++] = r->sinks[i];
		return n;
	}
	for (size_t j = 0; j < n_names; j++) {
		ssize_t i = sink_names[j] ? find(r, sink_names[j]) : -1;

		if (i < 0) {
			r->stats.unrouted++;
			continue;
		}
		if (done[i])
			continue;
		done[i] = true;
		to[n++] = r->sinks[i];
	}
	return n;
}

static void route(struct ktel_router *r, const struct ktel_record *recs, size_t n,
		  const char *const *sink_names, size_t n_names, bool cumulative_only)
{
	struct sink_entry *to[KTEL_ROUTER_MAX_SINKS];
	size_t n_to;

	r->stats.batches++;
	if (!n)
		return;
	n_to = targets(r, sink_names, n_names, cumulative_only, to);
	for (size_t i = 0; i < n_to; i++)
		to[i]->ops->submit(to[i]->priv, recs, n);
}

void ktel_router__batch_begin(struct ktel_router *r, const char *const *sink_names, size_t n_names)
{
	r->batch = (struct batch){.open = true, .names = sink_names, .n_names = n_names};
}

void ktel_router__batch_begin_totals(struct ktel_router *r, const char *const *sink_names,
				     size_t n_names)
{
	ktel_router__batch_begin(r, sink_names, n_names);
	r->batch.cumulative_only = true;
}

/* The first part with records: the batch counts from here, as a route. */
static void batch_start(struct ktel_router *r, struct batch *b)
{
	b->started = true;
	r->stats.batches++;
	b->n_to = targets(r, b->names, b->n_names, b->cumulative_only, b->to);
	for (size_t i = 0; i < b->n_to; i++)
		if (b->to[i]->ops->begin)
			b->to[i]->ops->begin(b->to[i]->priv);
}

void ktel_router__batch_add(struct ktel_router *r, const struct ktel_record *recs, size_t n)
{
	struct batch *b = &r->batch;

	if (!b->open || !n)
		return;
	if (!b->started)
		batch_start(r, b);
	for (size_t i = 0; i < b->n_to; i++)
		b->to[i]->ops->submit(b->to[i]->priv, recs, n);
}

void ktel_router__batch_end(struct ktel_router *r)
{
	struct batch *b = &r->batch;

	for (size_t i = 0; b->started && i < b->n_to; i++)
		if (b->to[i]->ops->end)
			b->to[i]->ops->end(b->to[i]->priv);
	*b = (struct batch){0};
}

void ktel_router__route(struct ktel_router *r, const struct ktel_record *recs, size_t n,
			const char *const *sink_names, size_t n_names)
{
	route(r, recs, n, sink_names, n_names, false);
}

bool ktel_router__any_cumulative(const struct ktel_router *r)
{
	for (size_t i = 0; i < r->n_sinks; i++)
		if (r->sinks[i]->ops->cumulative)
			return true;
	return false;
}

void ktel_router__route_totals(struct ktel_router *r, const struct ktel_record *recs, size_t n,
			       const char *const *sink_names, size_t n_names)
{
	route(r, recs, n, sink_names, n_names, true);
}

size_t ktel_router__n_sinks(const struct ktel_router *r)
{
	return r->n_sinks;
}

const char *ktel_router__sink_name(const struct ktel_router *r, size_t i)
{
	return i < r->n_sinks ? r->sinks[i]->name : NULL;
}

int ktel_router__sink_stats(const struct ktel_router *r, const char *name,
			    struct ktel_sink_stats *ret)
{
	ssize_t i = find(r, name);

	if (i < 0)
		return -ENOENT;
	memset(ret, 0, sizeof(*ret));
	r->sinks[i]->ops->stats(r->sinks[i]->priv, ret);
	return 0;
}

size_t ktel_router__reopen(struct ktel_router *r)
{
	size_t n = 0;

	for (size_t i = 0; r && i < r->n_sinks; i++)
		if (r->sinks[i]->ops->reopen) {
			r->sinks[i]->ops->reopen(r->sinks[i]->priv);
			n++;
		}
	return n;
}

int ktel_router__sink_where(const struct ktel_router *r, const char *name, char *buf, size_t len)
{
	ssize_t i = find(r, name);

	if (i < 0)
		return -ENOENT;
	buf[0] = '\0';
	if (r->sinks[i]->ops->where)
		r->sinks[i]->ops->where(r->sinks[i]->priv, buf, len);
	return 0;
}

void ktel_router__stats(const struct ktel_router *r, struct ktel_router_stats *ret)
{
	*ret = r->stats;
}

static const struct self_counter {
	const char *metric;
	const char *unit; /* what it counts */
	size_t offset;
} self_counters[] = {
	{"ktel_sink_sent", "records", offsetof(struct ktel_sink_stats, sent)},
	{"ktel_sink_dropped", "records", offsetof(struct ktel_sink_stats, dropped)},
	{"ktel_sink_errors", "errors", offsetof(struct ktel_sink_stats, errors)},
	{"ktel_sink_reconnects", "reconnects", offsetof(struct ktel_sink_stats, reconnects)},
	{"ktel_sink_skipped", "records", offsetof(struct ktel_sink_stats, skipped)},
	{"ktel_sink_refused", "connections", offsetof(struct ktel_sink_stats, refused)},
};

_Static_assert(KTEL_ARRAY_SIZE(self_counters) + 1 == KTEL_ROUTER_SELF_PER_SINK,
	       "self records per sink");

static uint64_t stat_at(const struct ktel_sink_stats *s, size_t offset)
{
	return *(const uint64_t *)((const char *)s + offset);
}

static void self_record(struct ktel_record *rec, const struct ktel_record *tmpl,
			const struct sink_entry *e, size_t index, const char *metric)
{
	*rec = *tmpl;
	rec->metric = metric;
	rec->atom = NULL;
	rec->atom_id = 0;
	rec->unit = "records";
	rec->n_dims = 1;
	rec->dims[0].name = "sink";
	rec->dims[0].value = (int64_t)index;
	rec->dims[0].label = e->name;
}

int ktel_router__self_records(struct ktel_router *r, const struct ktel_record *tmpl,
			      struct ktel_record *recs, size_t max, size_t *ret_n)
{
	size_t n = 0;

	if (max < r->n_sinks * KTEL_ROUTER_SELF_PER_SINK)
		return -ENOSPC;
	for (size_t i = 0; i < r->n_sinks; i++) {
		struct sink_entry *e = r->sinks[i];
		struct ktel_sink_stats st = {0};

		e->ops->stats(e->priv, &st);
		for (size_t c = 0; c < KTEL_ARRAY_SIZE(self_counters); c++) {
			struct ktel_record *rec = &recs[n++];
			uint64_t cur = stat_at(&st, self_counters[c].offset);
			uint64_t prev = e->reported ? stat_at(&e->last, self_counters[c].offset)
						    : 0;

			self_record(rec, tmpl, e, i, self_counters[c].metric);
			rec->unit = self_counters[c].unit;
			rec->type = KTEL_RECORD_COUNTER;
			rec->counter.total = cur;
			rec->counter.delta = cur >= prev ? cur - prev : cur;
		}
		self_record(&recs[n], tmpl, e, i, "ktel_sink_queued");
		recs[n].type = KTEL_RECORD_GAUGE;
		recs[n].gauge = st.queued > INT64_MAX ? INT64_MAX : (int64_t)st.queued;
		recs[n].unit = "items";
		n++;
		e->last = st;
		e->reported = true;
	}
	*ret_n = n;
	return 0;
}

void ktel_router__on_close_report(struct ktel_router *r, ktel_router_close_report_fn fn, void *ctx)
{
	r->report = fn;
	r->report_ctx = ctx;
}
