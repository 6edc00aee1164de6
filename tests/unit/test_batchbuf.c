// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A batch formatted into its own chunk and spares reused (sinks/batchbuf.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchbuf.h"

struct hdr {
	size_t cap;
	char data[];
};

#define HDR offsetof(struct hdr, data)

/* A batch of n lines of len bytes ("x...x\n"), as its chunk. */
static struct hdr *make_batch(struct ktel_batchbuf *bb, size_t n, size_t len)
{
	char line[4096];
	size_t cap;
	struct hdr *h;

	memset(line, 'x', len - 1);
	line[len - 1] = '\n';
	ktel_batchbuf__begin(bb, n);
	assert_int_equal(bb->text.len, HDR);
	for (size_t i = 0; i < n; i++)
		ktel_textbuf_put(&bb->text, line, len);
	assert_false(bb->text.fail);
	h = ktel_batchbuf__take(bb, n, &cap);
	h->cap = cap;
	assert_true(cap >= HDR + n * len + 1);
	for (size_t i = 0; i < n * len; i++)
		if (h->data[i] != ((i + 1) % len ? 'x' : '\n'))
			fail_msg("byte %zu of the batch is wrong", i);
	return h;
}

/* A steady stream of batches, each kept a while (the stream sink's ring
 * holds 16; here 4) and then released, takes its chunks from the spares
 * once they exist: no fresh block per batch (an mmap, page faults and an
 * munmap each in the daemon), also when lines are a byte longer or
 * shorter from batch to batch. */
static void test_steady_batches_reuse_spares(void **state)
{
	struct hdr *ring[4] = {0}, *seen[64];
	struct ktel_batchbuf bb;
	unsigned n_seen = 0;

	(void)state;
	ktel_batchbuf__init(&bb, HDR);
	for (unsigned round = 0; round < 64; round++) {
		struct hdr *h = make_batch(&bb, 256, 700 + round % 3 - 1), *old = ring[round % 4];
		unsigned k = 0;

		while (k < n_seen && seen[k] != h)
			k++;
		if (k == n_seen)
			seen[n_seen++] = h;
		if (old)
			ktel_batchbuf__release(&bb, old, old->cap, true);
		ring[round % 4] = h;
	}
	/* 4 in the ring, the spares, and the first round's growth. */
	if (n_seen > 4 + KTEL_BATCHBUF_SPARES + 1)
		fail_msg("%u different blocks for 64 batches", n_seen);
	for (unsigned i = 0; i < 4; i++)
		free(ring[i]);
	ktel_batchbuf__free(&bb);
}

/* A spare far larger than a batch needs is not used for it (a ring of
 * small batches would hold big blocks), and a block much larger than its
 * text is given back. */
static void test_small_batch_no_big_block(void **state)
{
	struct ktel_batchbuf bb;
	struct hdr *big, *small;

	(void)state;
	ktel_batchbuf__init(&bb, HDR);
	big = make_batch(&bb, 256, 700);
	ktel_batchbuf__release(&bb, big, big->cap, true);
	small = make_batch(&bb, 1, 700);
	assert_ptr_not_equal(small, big);
	assert_true(small->cap < KTEL_BATCHBUF_ROOM * (HDR + 700 + 1));
	assert_int_equal(bb.n_spare, 1);
	free(small);
	ktel_batchbuf__free(&bb);
	assert_int_equal(bb.n_spare, 0);
}

/* Of two spares, one a little small for the batch and one that holds it
 * with room to spare, the one that holds it is taken: growing the other
 * costs a copy and fresh pages. */
static void test_spare_that_holds_preferred(void **state)
{
	struct ktel_batchbuf bb;
	struct hdr *small, *big, *h;

	(void)state;
	ktel_batchbuf__init(&bb, HDR);
	/* The first batch sets the bytes per line; later ones are sized by it. */
	free(make_batch(&bb, 10, 1000));
	small = make_batch(&bb, 150, 1000);
	big = make_batch(&bb, 500, 1000);
	assert_true(small->cap < HDR + 200 * 1000);
	ktel_batchbuf__release(&bb, small, small->cap, true);
	ktel_batchbuf__release(&bb, big, big->cap, true);
	/* hint: 1001 bytes a line, so 200 lines want ~213 KB */
	h = make_batch(&bb, 200, 1000);
	assert_ptr_equal(h, big);
	free(h);
	ktel_batchbuf__free(&bb);
}

/* Released chunks beyond the spares' count or bytes, or not to be kept,
 * are freed (the sanitizer build sees a leak otherwise). */
static void test_release_bounded(void **state)
{
	struct hdr *h[KTEL_BATCHBUF_SPARES + 3];
	struct ktel_batchbuf bb;
	const int n = KTEL_BATCHBUF_SPARES + 3;

	(void)state;
	ktel_batchbuf__init(&bb, HDR);
	for (int i = 0; i < n; i++)
		h[i] = make_batch(&bb, 4, 100);
	for (int i = 0; i < n; i++)
		ktel_batchbuf__release(&bb, h[i], h[i]->cap, i != 0);
	assert_int_equal(bb.n_spare, KTEL_BATCHBUF_SPARES);
	ktel_batchbuf__free(&bb);
	/* Big chunks: the byte budget, not the count, bounds them. */
	for (int i = 0; i < 8; i++)
		h[i] = make_batch(&bb, 400, 1000);
	for (int i = 0; i < 8; i++)
		ktel_batchbuf__release(&bb, h[i], h[i]->cap, true);
	assert_true(bb.n_spare < 8);
	assert_true(bb.spare_bytes <= KTEL_BATCHBUF_SPARE_BYTES);
	ktel_batchbuf__free(&bb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steady_batches_reuse_spares),
		cmocka_unit_test(test_small_batch_no_big_block),
		cmocka_unit_test(test_spare_that_holds_preferred),
		cmocka_unit_test(test_release_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
