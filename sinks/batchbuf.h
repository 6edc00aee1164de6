/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A batch of lines formatted straight into the memory that becomes its
 * queue chunk (no copy), and released chunks kept for the next batches.
 * The JSON sink formats every submitted batch this way (the stream sink,
 * whose lines live on in its ring, packs them into blocks instead).
 *
 * Why spares: a batch of 256 stream events is ~170 KiB, over malloc's mmap
 * threshold in the daemon (core/base/memory.c), so a fresh chunk per batch is an
 * mmap, its page faults and an munmap with a TLB shootdown. Why the size
 * rules: batch sizes vary (a loaded loop drains the ring buffer in
 * batches of 3 to 256 events), and a spare that had to fit exactly was
 * almost never used; shrinking a spare for a small batch and growing it
 * again for the next large one cost more (mremap, page faults, shootdowns)
 * than formatting the batch. So a spare is taken when it is between half
 * and ROOM times what the batch needs, and a chunk is shrunk only when it
 * is emptier than that. At most KTEL_BATCHBUF_SPARES chunks (of at most
 * KTEL_BATCHBUF_SPARE_BYTES) are spares at a time, so at most that many
 * oversized chunks are in a queue at once; the others are allocated at
 * their batch's size.
 *
 * The owner's chunk struct comes first (hdr bytes; the text is formatted
 * after it) and records the chunk's cap, which release needs.
 */
#ifndef KTEL_BATCHBUF_H
#define KTEL_BATCHBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "textbuf.h"

/* Spares kept: at most this many, of at most this many bytes in all. At
 * saturation one write cycle of the JSON sink takes several batches, all
 * released at once when it completes; 2 spares (the first design) saw
 * every cycle mmap and munmap most of its chunks. */
#define KTEL_BATCHBUF_SPARES 8
#define KTEL_BATCHBUF_SPARE_BYTES (1u << 20)
/* A spare is taken for a batch needing at least 1/ROOM of it. */
#define KTEL_BATCHBUF_ROOM 4

struct ktel_batchbuf {
	struct ktel_textbuf text; /* the batch: hdr bytes, then its lines */
	size_t hdr;
	size_t hint_line; /* bytes per line of the last batch */
	void *spare[KTEL_BATCHBUF_SPARES];
	size_t spare_cap[KTEL_BATCHBUF_SPARES];
	unsigned n_spare;
	size_t spare_bytes;
};

/* An empty buffer for chunks with hdr bytes of header. */
void ktel_batchbuf__init(struct ktel_batchbuf *bb, size_t hdr);

/*
 * Start a batch of about n lines: text.len = hdr, room from a fitting spare
 * or a new block sized from the last batch's bytes per line (with neither,
 * the first append grows it). Lines are appended to bb->text; a line that
 * fails is taken back by resetting text.len (and text.fail).
 */
void ktel_batchbuf__begin(struct ktel_batchbuf *bb, size_t n);

/*
 * The batch of `lines` (> 0) lines as a chunk of *ret_cap bytes (header
 * included, not filled in); the text is bytes hdr .. text.len of it and a
 * NUL follows. The next batch starts from another block.
 */
void *ktel_batchbuf__take(struct ktel_batchbuf *bb, size_t lines, size_t *ret_cap);

/* A chunk the owner is done with: kept as a spare when keep and there is
 * room among the spares, else freed. */
void ktel_batchbuf__release(struct ktel_batchbuf *bb, void *chunk, size_t cap, bool keep);

/* Free the spares and a batch still being formatted. */
void ktel_batchbuf__free(struct ktel_batchbuf *bb);

#endif /* KTEL_BATCHBUF_H */
