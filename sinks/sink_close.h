/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The part of a sink's close (sink.h, ktel_sink_ops.close) that every sink
 * with something to flush does the same way: close once, keep done and its
 * context for the end, and a deadline after which what is still waiting is
 * given up. The sink embeds a struct ktel_sink_close, decides itself when
 * nothing waits any more, and closes `timer` with its other handles.
 *
 * The timer's data stays the sink's own (the owner given to init), so the
 * sink's handle close callback treats it like the sink's other handles.
 */
#ifndef KTEL_SINK_CLOSE_H
#define KTEL_SINK_CLOSE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "sink.h"

struct ktel_sink_close {
	uv_timer_t timer;
	/* Called with the owner when the deadline passes (timed_out is set
	 * by then): the sink gives up what still waits. */
	void (*expired)(void *owner);
	ktel_sink_closed_cb done;
	void *done_ctx;
	bool closing;   /* close was called */
	bool timed_out; /* the deadline passed, or close had no time at all */
};

/* Initialise the deadline's timer on loop; owner becomes its data. */
void ktel_sink_close__init(struct ktel_sink_close *c, uv_loop_t *loop, void *owner,
			   void (*expired)(void *owner));

/*
 * Start closing: keep done and ctx, and start the deadline of timeout_ms.
 * A timeout of 0 leaves no time: timed_out is set at once and expired is
 * not called (the sink, still in its close op, gives up what waits
 * itself). Returns 0, or -EALREADY when close was called before (the
 * second call does nothing).
 */
int ktel_sink_close__begin(struct ktel_sink_close *c, uint64_t timeout_ms, ktel_sink_closed_cb done,
			   void *ctx);

/* Call done once, if close gave one; the stats must be final by then. */
void ktel_sink_close__report(struct ktel_sink_close *c);

#endif /* KTEL_SINK_CLOSE_H */
