/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Router: the named sink instances of the daemon, and the
 * hand-off of record batches to them. Routing is a plain loop over the
 * target sinks' submit(), which never blocks (each sink queues into its own
 * bounded queue), so a slow or dead sink never delays a pull or another sink.
 *
 * Sink names are checked when the configuration is built
 * (ktel_router__check_names): a name that is not known there is a config
 * error. At route time a name that is not (or no longer) known is skipped
 * and counted in ktel_router_stats.unrouted, never an error.
 *
 * All calls happen on the loop thread.
 */
#ifndef KTEL_ROUTER_H
#define KTEL_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "error.h"
#include "record.h"
#include "sink.h"

#define KTEL_ROUTER_MAX_SINKS 64
/* Self-telemetry records produced per sink by ktel_router__self_records. */
#define KTEL_ROUTER_SELF_PER_SINK 7

struct ktel_router;

struct ktel_router_stats {
	uint64_t batches;  /* route calls */
	uint64_t unrouted; /* targets named at route time that no sink has */
};

/* NULL with errno set on failure. */
struct ktel_router *ktel_router__new(uv_loop_t *loop);

/*
 * Free the router. Sinks still open are closed with a zero timeout (what is
 * queued is dropped) and release themselves when their close completes; to
 * flush first, call ktel_router__close and free from its callback.
 */
void ktel_router__free(struct ktel_router *r);

/*
 * Create a sink instance of the built-in type `type` (ktel_sink_type_find)
 * named name, from its JSON options. Errors: -EEXIST (name taken), -ENOENT
 * (unknown type), -E2BIG (too many sinks), or what the sink's create
 * returned; err names the sink.
 */
int ktel_router__add_sink(struct ktel_router *r, const char *name, const char *type,
			  const json_t *opts, struct ktel_err *err);

/* The same with an explicit ops table (sinks not in the built-in list,
 * tests). */
int ktel_router__add_sink_ops(struct ktel_router *r, const char *name,
			      const struct ktel_sink_ops *ops, const json_t *opts,
			      struct ktel_err *err);

/*
 * Remove a sink by name: it stops receiving records at once, flushes within
 * timeout_ms and then calls done(ctx) (done may be NULL). -ENOENT when no
 * sink has that name.
 */
int ktel_router__remove_sink(struct ktel_router *r, const char *name, uint64_t timeout_ms,
			     ktel_sink_closed_cb done, void *ctx);

/*
 * Two-phase replacement, for a reload that must not touch the running sinks
 * until every new one has opened. prepare creates an instance of type named
 * name from opts without routing anything to it (a running sink of that name
 * is untouched); errors as ktel_router__add_sink. install routes to it from
 * now on: it takes the place (and the "sink" dimension index) of the running
 * sink of the same name, which stops receiving records at once and closes
 * within timeout_ms, or is appended; -E2BIG (and *s still the caller's) when
 * there is no room. discard closes a prepared instance that was never
 * installed. Each prepared instance is installed or discarded exactly once.
 */
struct ktel_router_staged;
int ktel_router__prepare_sink(struct ktel_router *r, const char *name, const char *type,
			      const json_t *opts, struct ktel_router_staged **ret,
			      struct ktel_err *err);
int ktel_router__install_sink(struct ktel_router *r, struct ktel_router_staged *s,
			      uint64_t timeout_ms);
void ktel_router__discard_sink(struct ktel_router_staged *s);

/* Every name in names must be a sink of r (config-time check): 0, or
 * -ENOENT with err naming the first unknown one. */
int ktel_router__check_names(const struct ktel_router *r, const char *const *names, size_t n_names,
			     struct ktel_err *err);

/*
 * Hand n records to the sinks named in sink_names (NULL or n_names == 0:
 * every sink). Each sink gets the batch at most once even when named twice.
 * The records' strings need only stay valid during the call.
 */
void ktel_router__route(struct ktel_router *r, const struct ktel_record *recs, size_t n,
			const char *const *sink_names, size_t n_names);

/*
 * One batch routed in parts, as a pull makes its records window by window
 * (metric_pull.h): batch_begin names the target sinks as route does, each
 * batch_add hands a part to them, in order, and batch_end closes the batch.
 * Sinks with begin/end ops (sink.h) get begin before the first part and end
 * after the last, so that their output is what one route of all the
 * records made; the others get the parts. Nothing reaches a sink, nor is
 * counted, before a part with records: a batch without records routes
 * nothing, as route does. sink_names must stay valid until batch_end. One
 * batch at a time, with no sink added or removed in between (a pull runs
 * in one go on the loop).
 */
void ktel_router__batch_begin(struct ktel_router *r, const char *const *sink_names, size_t n_names);
/* A batch of totals, to the cumulative sinks among them only (as
 * ktel_router__route_totals). */
void ktel_router__batch_begin_totals(struct ktel_router *r, const char *const *sink_names,
				     size_t n_names);
void ktel_router__batch_add(struct ktel_router *r, const struct ktel_record *recs, size_t n);
void ktel_router__batch_end(struct ktel_router *r);

/* The same, to the cumulative sinks (sink.h) among them only: records that
 * carry totals which the delta sinks must not count again. */
void ktel_router__route_totals(struct ktel_router *r, const struct ktel_record *recs, size_t n,
			       const char *const *sink_names, size_t n_names);

/*
 * Durability (docs/sinks.md, "Delivery guarantees"). A durable sink (sink.h
 * ops durable/mark: a JSON sink on a file) says when what it was given is
 * durable. ktel_router__mark stamps everything routed so far with a new mark
 * (1, 2, ...) and returns it; the durable level is the highest mark every
 * durable sink has made durable (with no durable sink: the last mark), and
 * fn(ctx, level) is called when it grows, from the sinks' I/O callbacks
 * (never from inside ktel_router__mark: read ktel_router__durable_level
 * after it). A durable sink removed or replaced holds the level back until
 * its close completes; in a full close (ktel_router__close) one that could
 * not make everything durable in time keeps it back for good.
 */
typedef void (*ktel_router_durable_fn)(void *ctx, uint64_t level);
uint64_t ktel_router__mark(struct ktel_router *r);
uint64_t ktel_router__durable_level(const struct ktel_router *r);
void ktel_router__on_durable(struct ktel_router *r, ktel_router_durable_fn fn, void *ctx);
bool ktel_router__any_durable(const struct ktel_router *r);

/* At start, before anything is routed: every sink with a recover op removes
 * the windows its output holds past the saved state (sink.h). */
int ktel_router__recover(struct ktel_router *r, ktel_sink_window_fn fn, void *ctx,
			 struct ktel_err *err);

/* Is any sink cumulative? */
bool ktel_router__any_cumulative(const struct ktel_router *r);

/*
 * Close every sink, each with timeout_ms to flush (the sink contract bounds
 * it), then call done(ctx) once all have reported, possibly before
 * returning. The router is empty afterwards and may be reused or freed.
 */
/*
 * Called once per sink as it finishes closing (remove or close): its final
 * stats and how many records it dropped during the close (what it could not
 * flush in time). The name is valid during the call only.
 */
typedef void (*ktel_router_close_report_fn)(const char *sink, const struct ktel_sink_stats *final,
					    uint64_t dropped_at_close, void *ctx);
void ktel_router__on_close_report(struct ktel_router *r, ktel_router_close_report_fn fn, void *ctx);

void ktel_router__close(struct ktel_router *r, uint64_t timeout_ms, ktel_sink_closed_cb done,
			void *ctx);

size_t ktel_router__n_sinks(const struct ktel_router *r);
/* Name of the i-th sink (creation order), or NULL. */
const char *ktel_router__sink_name(const struct ktel_router *r, size_t i);
/* Stats of a sink by name; -ENOENT when unknown. */
int ktel_router__sink_stats(const struct ktel_router *r, const char *name,
			    struct ktel_sink_stats *ret);
void ktel_router__stats(const struct ktel_router *r, struct ktel_router_stats *ret);

/* Ask every sink that has a file to reopen it at its configured path
 * (ktel_sink_ops.reopen); returns how many were asked. */
size_t ktel_router__reopen(struct ktel_router *r);

/* Where sink name delivers (ktel_sink_ops.where), "" when it does not say. */
int ktel_router__sink_where(const struct ktel_router *r, const char *name, char *buf, size_t len);

/*
 * Self-telemetry: KTEL_ROUTER_SELF_PER_SINK records per sink, built from the
 * sinks' stats, in recs[0..max). Each starts as a copy of *tmpl (window,
 * boot_id, seq are the caller's) and gets:
 *   ktel_sink_sent, ktel_sink_dropped, ktel_sink_errors, ktel_sink_reconnects,
 *   ktel_sink_skipped, ktel_sink_refused
 *     KTEL_RECORD_COUNTER, counter.total = the sink's count, counter.delta =
 *     the growth since the previous call (the count itself the first time);
 *   ktel_sink_queued  KTEL_RECORD_GAUGE, what waits in the queue now.
 * One dimension: "sink", value = the sink's index, label = its name (valid
 * until the sink is removed). Returns -ENOSPC (nothing written) when max is
 * too small, else 0 with *ret_n set.
 */
int ktel_router__self_records(struct ktel_router *r, const struct ktel_record *tmpl,
			      struct ktel_record *recs, size_t max, size_t *ret_n);

#endif /* KTEL_ROUTER_H */
