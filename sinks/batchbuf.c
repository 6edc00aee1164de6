// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "batchbuf.h"

#include <stdlib.h>
#include <string.h>

void ktel_batchbuf__init(struct ktel_batchbuf *bb, size_t hdr)
{
	memset(bb, 0, sizeof(*bb));
	bb->hdr = hdr;
}

/* How far cap is from want (the spare that fits best is the nearest). */
static size_t misfit(size_t cap, size_t want)
{
	return cap > want ? cap - want : want - cap;
}

/* Take the spare nearest to want, when it is at least half of it (the
 * text grows it, by doubling, at most once) and at most four times. */
static bool take_spare(struct ktel_batchbuf *bb, size_t want)
{
	unsigned best = bb->n_spare;

	for (unsigned i = 0; i < bb->n_spare; i++) {
		size_t cap = bb->spare_cap[i];

		if (cap >= want / 2 && cap <= KTEL_BATCHBUF_ROOM * want &&
		    (best == bb->n_spare || misfit(cap, want) < misfit(bb->spare_cap[best], want)))
			best = i;
	}
	if (best == bb->n_spare)
		return false;
	bb->text.p = bb->spare[best];
	bb->text.cap = bb->spare_cap[best];
	bb->spare_bytes -= bb->spare_cap[best];
	bb->n_spare--;
	bb->spare[best] = bb->spare[bb->n_spare];
	bb->spare_cap[best] = bb->spare_cap[bb->n_spare];
	return true;
}

void ktel_batchbuf__begin(struct ktel_batchbuf *bb, size_t n)
{
	size_t want = bb->hdr + bb->hint_line * n + bb->hint_line * n / 16 + 1;

	bb->text.fail = false;
	bb->text.len = bb->hdr;
	/* A batch that made no line left its block: use it again. */
	if (bb->text.p || !bb->hint_line)
		return;
	if (!take_spare(bb, want) && (bb->text.p = malloc(want)))
		bb->text.cap = want;
}

void *ktel_batchbuf__take(struct ktel_batchbuf *bb, size_t lines, size_t *ret_cap)
{
	size_t used = bb->text.len + 1, cap = bb->text.cap;
	void *c = bb->text.p;

	bb->hint_line = (bb->text.len - bb->hdr) / lines + 1;
	/* Over what take_spare() accepts (ROOM times the estimate, which is
	 * ~6% over the use): a block this empty is given back. */
	if (cap > KTEL_BATCHBUF_ROOM * (used + used / 8)) {
		void *shrunk = realloc(c, used);

		if (shrunk) {
			c = shrunk;
			cap = used;
		}
	}
	bb->text = (struct ktel_textbuf){0};
	*ret_cap = cap;
	return c;
}

void ktel_batchbuf__release(struct ktel_batchbuf *bb, void *chunk, size_t cap, bool keep)
{
	if (keep && bb->n_spare < KTEL_BATCHBUF_SPARES &&
	    bb->spare_bytes + cap <= KTEL_BATCHBUF_SPARE_BYTES) {
		bb->spare[bb->n_spare] = chunk;
		bb->spare_cap[bb->n_spare++] = cap;
		bb->spare_bytes += cap;
		return;
	}
	free(chunk);
}

void ktel_batchbuf__free(struct ktel_batchbuf *bb)
{
	while (bb->n_spare)
		free(bb->spare[--bb->n_spare]);
	bb->spare_bytes = 0;
	free(bb->text.p);
	bb->text = (struct ktel_textbuf){0};
}
