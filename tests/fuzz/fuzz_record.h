/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Shared by the sink harnesses: a reader over the fuzzer's bytes and a
 * struct ktel_record built from them, with every string (metric, unit,
 * dimension names and labels, event field names and values) taken from the
 * bytes too, so the formatters meet any byte a plugin's BTF or a label map
 * could put there. Bytes run out as zeros.
 */
#ifndef KTEL_FUZZ_RECORD_H
#define KTEL_FUZZ_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "record.h"

struct fuzz_in {
	const uint8_t *p;
	size_t left;
};

static inline uint64_t fuzz_in__bits(struct fuzz_in *in, size_t nbytes)
{
	uint64_t v = 0;

	for (size_t i = 0; i < nbytes && i < 8; i++) {
		if (!in->left)
			break;
		v |= (uint64_t)in->p[0] << (8 * i);
		in->p++;
		in->left--;
	}
	return v;
}

static inline uint8_t fuzz_in__u8(struct fuzz_in *in)
{
	return (uint8_t)fuzz_in__bits(in, 1);
}

/* Storage of the strings a record borrows. */
#define FUZZ_STR_MAX 80
#define FUZZ_N_STRS (3 + 2 * KTEL_MAX_DIMS + 3 * KTEL_MAX_EVENT_FIELDS)

struct fuzz_record {
	struct ktel_record rec;
	struct ktel_event_field fields[KTEL_MAX_EVENT_FIELDS];
	char strs[FUZZ_N_STRS][FUZZ_STR_MAX + 1];
	unsigned n_strs;
};

/* A string of 0..FUZZ_STR_MAX bytes (length byte, then the bytes; a NUL
 * among them ends it early), or NULL when the length byte is 0xff. */
static inline const char *fuzz_in__str(struct fuzz_in *in, struct fuzz_record *fr)
{
	uint8_t n = fuzz_in__u8(in);
	char *s;

	if (n == 0xff || fr->n_strs == FUZZ_N_STRS)
		return NULL;
	s = fr->strs[fr->n_strs++];
	n %= FUZZ_STR_MAX + 1;
	if (n > in->left)
		n = (uint8_t)in->left;
	memcpy(s, in->p, n);
	s[n] = '\0';
	in->p += n;
	in->left -= n;
	return s;
}

static inline void fuzz_hist(struct fuzz_in *in, struct ktel_histogram *h, uint8_t shape)
{
	h->scheme = (enum ktel_hist_scheme)(shape % 5);
	h->linear_min = (int64_t)fuzz_in__bits(in, 8);
	h->linear_step = (int64_t)fuzz_in__bits(in, 8);
	h->n_buckets = fuzz_in__u8(in) % (KTEL_HIST_BUCKETS + 1);
	h->has_sum = shape & 0x80;
	h->sum = fuzz_in__bits(in, 8);
	for (uint32_t k = 0; k < h->n_buckets; k++)
		/* Mostly small counts and zeros, sometimes any 64 bits. */
		h->counts[k] = fuzz_in__bits(in, (shape & 0x40) ? 8 : 1);
}

/* Build fr->rec from the bytes: every field of the record model reachable. */
static inline void fuzz_record__build(struct fuzz_record *fr, struct fuzz_in *in)
{
	struct ktel_record *r = &fr->rec;
	uint8_t kind = fuzz_in__u8(in), shape;

	memset(fr, 0, sizeof(*fr));
	r->type = (enum ktel_record_type)(kind % 5); /* 0: an unknown type */
	/* The loader admits only non-empty names ([a-z0-9_]+); their bytes
	 * are still anything here, for the formatters' escaping. */
	r->metric = fuzz_in__str(in, fr);
	if (!r->metric || !r->metric[0])
		r->metric = "m";
	r->unit = fuzz_in__str(in, fr);
	r->atom = (kind & 0x10) ? fuzz_in__str(in, fr) : NULL;
	r->atom_id = (kind & 0x20) ? (uint32_t)fuzz_in__bits(in, 4) : 100000 + (kind >> 6);
	r->start_boottime_ns = fuzz_in__bits(in, 8);
	r->end_boottime_ns = fuzz_in__bits(in, 8);
	r->start_wall_ns = (int64_t)fuzz_in__bits(in, 8);
	r->end_wall_ns = (int64_t)fuzz_in__bits(in, 8);
	r->boot_id = "00000000-0000-0000-0000-000000000000";
	r->map_id = (uint32_t)fuzz_in__bits(in, 4);
	r->seq = fuzz_in__bits(in, 8);
	r->n_dims = fuzz_in__u8(in) % (KTEL_MAX_DIMS + 1);
	for (uint32_t i = 0; i < r->n_dims; i++) {
		struct ktel_dim *d = &r->dims[i];
		uint8_t f = fuzz_in__u8(in);

		d->name = fuzz_in__str(in, fr);
		if (!d->name)
			d->name = "d";
		d->value = (int64_t)fuzz_in__bits(in, (f & 1) ? 8 : 1);
		d->label = (f & 2) ? fuzz_in__str(in, fr) : NULL;
		d->id_label = f & 4;
	}
	shape = fuzz_in__u8(in);
	switch (r->type) {
	case KTEL_RECORD_HISTOGRAM:
		fuzz_hist(in, &r->hist.delta, shape);
		r->hist.total = r->hist.delta;
		break;
	case KTEL_RECORD_COUNTER:
		r->counter.delta = fuzz_in__bits(in, 8);
		r->counter.total = fuzz_in__bits(in, 8);
		break;
	case KTEL_RECORD_GAUGE:
		r->gauge = (int64_t)fuzz_in__bits(in, 8);
		break;
	case KTEL_RECORD_EVENT:
		r->event.n_fields = shape % (KTEL_MAX_EVENT_FIELDS + 1);
		r->event.fields = fr->fields;
		for (uint32_t i = 0; i < r->event.n_fields; i++) {
			struct ktel_event_field *f = &fr->fields[i];
			uint8_t t = fuzz_in__u8(in);

			f->name = fuzz_in__str(in, fr);
			if (!f->name)
				f->name = "f";
			f->type = (enum ktel_field_type)(1 + t % 3);
			f->i = (int64_t)fuzz_in__bits(in, 8);
			f->u = (uint64_t)f->i;
			f->s = f->type == KTEL_FIELD_VALUE_STRING ? fuzz_in__str(in, fr) : NULL;
			f->label = (t & 0x10) ? fuzz_in__str(in, fr) : NULL;
			f->size = (uint8_t[]){0, 1, 2, 4, 8}[(t >> 5) % 5];
			f->id_label = t & 0x80;
		}
		break;
	default:
		break;
	}
}

#endif /* KTEL_FUZZ_RECORD_H */
