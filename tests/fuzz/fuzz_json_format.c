// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The JSON line formatter (core/base/json_format.c) on records built from
 * the bytes (fuzz_record.h), differentially: a batch formatted with its
 * repeated strings kept (struct ktel_json_strs, what the json and stream
 * sinks do) must equal, byte for byte, each record formatted alone with
 * every string escaped (what `show` does), and every line must parse.
 * Records share string pointers as the bytes say (one metric's events
 * share their names and labels), and a second batch after a reset finds
 * a shared string changed in place: the kept text must not leak into it.
 */
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "fuzz_record.h"
#include "json_format.h"
#include "textbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_RECS 4

static struct fuzz_record recs[N_RECS];
static struct ktel_record batch[N_RECS + 1];
static struct ktel_json_strs strs;

/* Record k (> 0) borrows record 0's strings where the bits say. */
static void share(struct ktel_record *r, const struct ktel_record *r0, uint8_t bits)
{
	if (bits & 1)
		r->metric = r0->metric;
	if (bits & 2)
		r->unit = r0->unit;
	for (uint32_t i = 0; i < r->n_dims && i < r0->n_dims; i++) {
		if (bits & 4)
			r->dims[i].name = r0->dims[i].name;
		if (bits & 8)
			r->dims[i].label = r0->dims[i].label;
	}
	if (r->type != KTEL_RECORD_EVENT || r0->type != KTEL_RECORD_EVENT)
		return;
	for (uint32_t i = 0; i < r->event.n_fields && i < r0->event.n_fields; i++) {
		struct ktel_event_field *f = (struct ktel_event_field *)&r->event.fields[i];

		if (bits & 16)
			f->name = r0->event.fields[i].name;
		if (bits & 32)
			f->label = r0->event.fields[i].label;
	}
}

/* The batch through kept strings equals the lines made alone. */
static void check_batch(size_t n)
{
	struct ktel_textbuf b = {0}, want = {0};

	ktel_json_strs__reset(&strs);
	for (size_t i = 0; i < n; i++) {
		size_t at = want.len;
		bool ok = ktel_json__format_line(&batch[i], &want.p, &want.len, &want.cap) == 0;

		if (ktel_json__append(&b, &strs, &batch[i]) != ok)
			abort();
		if (ok) {
			json_error_t jerr;
			json_t *j = json_loadb(want.p + at, want.len - at, JSON_DECODE_INT_AS_REAL,
					       &jerr);

			if (!j) {
				fprintf(stderr, "line does not parse (%s): %.*s\n", jerr.text,
					(int)(want.len - at), want.p + at);
				abort();
			}
			json_decref(j);
		}
	}
	if (b.fail || b.len != want.len || (b.len && memcmp(b.p, want.p, b.len))) {
		fprintf(stderr, "batch:\n%.*s\nalone:\n%.*s\n", (int)b.len, b.p ? b.p : "",
			(int)want.len, want.p ? want.p : "");
		abort();
	}
	free(b.p);
	free(want.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	uint8_t n = (uint8_t)(1 + fuzz_in__u8(&in) % N_RECS), bits = fuzz_in__u8(&in);
	char *first;

	for (uint8_t k = 0; k < n; k++) {
		fuzz_record__build(&recs[k], &in);
		batch[k] = recs[k].rec;
		if (k)
			share(&batch[k], &batch[0], (uint8_t)(bits >> (k - 1)));
	}
	/* The first record again at the end: every string of it kept. */
	batch[n] = batch[0];
	check_batch(n + 1u);
	/* Record 0's first string changed in place: a new batch after the
	 * reset must show the new text wherever the pointer is shared. */
	first = recs[0].n_strs ? recs[0].strs[0] : NULL;
	if (first && first[0]) {
		first[0] = first[0] == 'x' ? '"' : 'x';
		check_batch(n + 1u);
	}
	return 0;
}
