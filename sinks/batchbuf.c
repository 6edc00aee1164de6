// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "batchbuf.h"

#include <stdlib.h>
#include <string.h>

void ktel_batchbuf__init(struct ktel_batchbuf *bb, size_t hdr)
{
	memset(bb, 0, sizeof(*bb));
	bb->hdr = hdr;
}

/* Is spare a better pick than spare b for want? One that holds the batch
 * (the smallest such) beats one that must grow (the largest such). */
static bool better(size_t a, size_t b, size_t want)
{
	if ((a >= want) != (b >= want))
		return a >= want;
	return a >= want ? a < b : a > b;
}

/* Take the best spare for want (better()) among those of at least half of
 * it (the text grows one, by doubling, at most once) and at most ROOM
 * times it. */
static bool take_spare(struct ktel_batchbuf *bb, size_t want)
{
	unsigned best = bb->n_spare;

	for (unsigned i = 0; i < bb->n_spare; i++) {
		size_t cap = bb->spare_cap[i];

		if (cap >= want / 2 && cap <= KTEL_BATCHBUF_ROOM * want &&
		    (best == bb->n_spare || better(cap, bb->spare_cap[best], want)))
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
