// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sink_close.h"

#include <errno.h>
#include <stddef.h>

static void on_deadline(uv_timer_t *t)
{
	/* The timer's data is the owner's, so the state is found from the
	 * timer's place in it. */
	struct ktel_sink_close *c = (struct ktel_sink_close *)((char *)t -
							       offsetof(struct ktel_sink_close,
									timer));

	c->timed_out = true;
	c->expired(t->data);
}

void ktel_sink_close__init(struct ktel_sink_close *c, uv_loop_t *loop, void *owner,
			   void (*expired)(void *owner))
{
	uv_timer_init(loop, &c->timer);
	c->timer.data = owner;
	c->expired = expired;
	c->done = NULL;
	c->done_ctx = NULL;
	c->closing = false;
	c->timed_out = false;
}

int ktel_sink_close__begin(struct ktel_sink_close *c, uint64_t timeout_ms, ktel_sink_closed_cb done,
			   void *ctx)
{
	if (c->closing)
		return -EALREADY;
	c->closing = true;
	c->done = done;
	c->done_ctx = ctx;
	if (timeout_ms == 0)
		c->timed_out = true;
	else
		uv_timer_start(&c->timer, on_deadline, timeout_ms, 0);
	return 0;
}

void ktel_sink_close__report(struct ktel_sink_close *c)
{
	ktel_sink_closed_cb done = c->done;

	/* Cleared first: done may end in a path that reports again. */
	c->done = NULL;
	if (done)
		done(c->done_ctx);
}
