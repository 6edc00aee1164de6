/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Sink interface. A sink type is a table of operations; a sink
 * instance is created by name from its JSON options. All calls happen on the
 * daemon's libuv loop thread. submit() never blocks: it formats the records
 * into the instance's own bounded queue and returns; I/O happens later on the
 * loop (uv_fs_*, uv_udp_send, uv_write). When the queue is full the records
 * are dropped and counted, never the caller delayed.
 */
#ifndef KTEL_SINK_H
#define KTEL_SINK_H

#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "config.h"
#include "error.h"
#include "record.h"

/* Room for ktel_sink_stats.last_error, NUL included; longer text is cut. */
#define KTEL_SINK_LAST_ERROR_MAX 160

struct ktel_sink_stats {
	uint64_t sent;       /* records handed to the transport */
	uint64_t dropped;    /* records dropped: queue full, peer down, too big */
	uint64_t errors;     /* I/O errors */
	uint64_t reconnects; /* transport re-opened after a failure */
	uint64_t skipped;    /* records the sink's format has no form for (not a loss) */
	uint64_t queued;     /* bytes or records waiting now */
	uint64_t refused;    /* peers turned away: over a limit or breaking the protocol */
	/* The text of the last I/O error counted in errors, "" when none or
	 * when the sink keeps none: what failed, where, and why
	 * ("sendto 127.0.0.1:8125: connection refused"). */
	char last_error[KTEL_SINK_LAST_ERROR_MAX];
};

typedef void (*ktel_sink_closed_cb)(void *ctx);

/* A durable sink made everything marked up to mark durable (see
 * ktel_sink_ops.durable). */
typedef void (*ktel_sink_durable_cb)(void *ctx, uint64_t mark);

/* Recovery at start: where a window read back from a sink's output stands
 * against the daemon's saved delta state (the daemon's fn answers one of
 * these; the delta engine judges it). */
enum ktel_window_standing {
	KTEL_WINDOW_UNKNOWN = 0, /* another boot, metric or map; not a pulled window */
	KTEL_WINDOW_SAVED = 1,   /* the saved state covers it */
	KTEL_WINDOW_AFTER = 2,   /* emitted after the state was saved */
};
typedef int (*ktel_sink_window_fn)(void *ctx, const char *boot_id, const char *metric,
				   uint32_t map_id, uint64_t seq);

struct ktel_sink_ops {
	const char *type; /* the "type" in config: "json", "statsd", ... */
	/* Create an instance. opts is the sink's config object (validated by
	 * the config module); ret_priv receives the instance. */
	int (*create)(uv_loop_t *loop, const char *name, const json_t *opts, void **ret_priv,
		      struct ktel_err *err);
	/* Queue records for output; never blocks. */
	void (*submit)(void *priv, const struct ktel_record *recs, size_t n);
	/*
	 * Optional, together: the submits between begin and end are one
	 * batch (a pull routed window by window as it is made, router.h
	 * ktel_router__batch_begin). A sink that finishes something per
	 * submit (statsd: the last datagram; prometheus: the state a scrape
	 * sees) does it once, at end, so its output is what one submit of
	 * all the records made. Without them a sink gets the submits alone.
	 */
	void (*begin)(void *priv);
	void (*end)(void *priv);
	/* Flush what can be flushed within timeout_ms, call done(ctx) exactly
	 * once (possibly before returning), then release everything. Unflushed
	 * data is counted in stats as dropped before done is called, and
	 * stats() may be called from inside done: the counts are final. */
	void (*close)(void *priv, uint64_t timeout_ms, ktel_sink_closed_cb done, void *ctx);
	void (*stats)(void *priv, struct ktel_sink_stats *ret);
	/* Optional: where the instance delivers, for logs and status
	 * ("file /var/log/k.jsonl", "udp 127.0.0.1:8125",
	 * "http://127.0.0.1:9464/metrics" with the port actually bound). */
	void (*where)(void *priv, char *buf, size_t len);
	/* Optional: reopen the output at its configured path (logrotate's
	 * postrotate: SIGUSR1, ktelemetryctl reopen). Never blocks for long. */
	void (*reopen)(void *priv);
	/*
	 * Optional, together: a durable sink (docs/sinks.md, "Delivery
	 * guarantees"). durable() registers cb and returns true when this
	 * instance can say when records are durable (a JSON sink on a
	 * regular file; false for stdout). mark(m) then says: everything
	 * submitted so far belongs to mark m (marks only grow); the sink
	 * calls cb(ctx, m) once all of it is durable (written, and fsynced
	 * with fsync on), possibly from inside mark, never after close's
	 * done. Records dropped (queue full) are not waited for.
	 */
	bool (*durable)(void *priv, ktel_sink_durable_cb cb, void *ctx);
	void (*mark)(void *priv, uint64_t mark);
	/*
	 * Optional: at daemon start, before any record is submitted, remove
	 * from the output the windows emitted after the saved state (fn
	 * says AFTER): the next pull reports them again. Blocking file I/O.
	 * 0 or -errno with err set.
	 */
	int (*recover)(void *priv, ktel_sink_window_fn fn, void *ctx, struct ktel_err *err);
	/* The options the type accepts besides "type", {NULL}-terminated; the
	 * config validator checks them and docs/config.md lists them. */
	const struct ktel_cfg_key *options;
	/* The sink shows running totals (the records' `total`), not deltas:
	 * it also gets every series' totals right after start, zero-delta
	 * ones included (ktel_router__route_totals). */
	bool cumulative;
};

#endif /* KTEL_SINK_H */
