// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Android StatsEvent (sinks/statsd/android_event.c), both directions:
 *  - the decoder on the raw bytes, as a datagram and as a bare StatsEvent;
 *  - a round trip: a record built from the bytes (fuzz_record.h) is encoded
 *    and, when the encoder accepts it, the datagram must decode, within
 *    statsd's limits, to exactly the atom the mapping in android_event.h
 *    promises: atom id, timestamp, field count, types and values.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "statsd/android_event.h"
#include "fuzz_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                          \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "round trip: %s failed at %s:%d\n", #cond, __FILE__, \
				__LINE__);                                                   \
			abort();                                                             \
		}                                                                            \
	} while (0)

static struct ktel_android_decoded dec;

static void check_string(const struct ktel_android_field *f, const char *want)
{
	CHECK(f->type == KTEL_ANDROID_STRING);
	CHECK(f->len == strlen(want));
	CHECK(memcmp(f->data, want, f->len) == 0);
}

static void check_dim(const struct ktel_android_field *f, const struct ktel_dim *d)
{
	char num[24];

	if (!d->id_label) {
		int64_t v = d->value > INT32_MAX   ? INT32_MAX
			    : d->value < INT32_MIN ? INT32_MIN
						   : d->value;

		CHECK(f->type == KTEL_ANDROID_INT32);
		CHECK(f->i == v);
		return;
	}
	snprintf(num, sizeof(num), "%" PRId64, d->value);
	check_string(f, d->label ? d->label : num);
}

static void check_field(const struct ktel_android_field *f, const struct ktel_event_field *e)
{
	uint64_t bits = e->type == KTEL_FIELD_VALUE_INT ? (uint64_t)e->i : e->u;
	char num[24];

	if (e->type == KTEL_FIELD_VALUE_STRING) {
		check_string(f, e->s ? e->s : "");
	} else if (e->id_label) {
		snprintf(num, sizeof(num), "%" PRIu64, e->u);
		check_string(f, e->label ? e->label : num);
	} else if (e->size && e->size <= 4) {
		CHECK(f->type == KTEL_ANDROID_INT32);
		CHECK(f->i == (int32_t)(uint32_t)bits);
	} else {
		CHECK(f->type == KTEL_ANDROID_INT64);
		CHECK(f->i == (int64_t)bits);
	}
}

static void round_trip(struct fuzz_in *in)
{
	static struct fuzz_record fr;
	static uint8_t out[KTEL_ANDROID_MAX_DATAGRAM];
	const struct ktel_record *r = &fr.rec;
	uint32_t n = 0, nb;
	int len;

	fuzz_record__build(&fr, in);
	len = ktel_android__encode_record(r, 4242, out, sizeof(out));
	if (len < 0)
		return;
	CHECK((size_t)len <= sizeof(out));
	CHECK(ktel_android__decode(out, (size_t)len, true, &dec) == 0);
	CHECK(dec.atom_id == r->atom_id);
	CHECK(dec.timestamp_ns == r->end_boottime_ns);
	CHECK(dec.tid == 4242);
	if (r->type != KTEL_RECORD_EVENT) {
		for (uint32_t i = 0; i < r->n_dims; i++, n++) {
			CHECK(n < dec.n_fields);
			check_dim(&dec.fields[n], &r->dims[i]);
		}
	}
	switch (r->type) {
	case KTEL_RECORD_HISTOGRAM:
		nb = r->hist.delta.n_buckets;
		CHECK(n < dec.n_fields);
		CHECK(dec.fields[n].type == KTEL_ANDROID_LIST);
		CHECK(dec.fields[n].list_type == KTEL_ANDROID_INT64);
		CHECK(dec.fields[n].len == nb);
		for (uint32_t k = 0; k < nb; k++)
			CHECK(ktel_android_field__list_i64(&dec.fields[n], k) ==
			      (int64_t)r->hist.delta.counts[k]);
		n++;
		break;
	case KTEL_RECORD_COUNTER:
		CHECK(n < dec.n_fields);
		CHECK(dec.fields[n].type == KTEL_ANDROID_INT64);
		CHECK(dec.fields[n++].i == (int64_t)r->counter.delta);
		break;
	case KTEL_RECORD_GAUGE:
		CHECK(n < dec.n_fields);
		CHECK(dec.fields[n].type == KTEL_ANDROID_INT64);
		CHECK(dec.fields[n++].i == r->gauge);
		break;
	case KTEL_RECORD_EVENT:
		for (uint32_t i = 0; i < r->event.n_fields; i++, n++) {
			CHECK(n < dec.n_fields);
			check_field(&dec.fields[n], &r->event.fields[i]);
		}
		break;
	default:
		CHECK(!"an unknown record type was encoded");
	}
	CHECK(n == dec.n_fields);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};

	/* The raw bytes as a peer's datagram and as a bare event. */
	ktel_android__decode(data, size, true, &dec);
	if (ktel_android__decode(data, size, false, &dec) == 0) {
		for (uint32_t i = 0; i < dec.n_fields; i++)
			if (dec.fields[i].type == KTEL_ANDROID_LIST)
				for (uint32_t k = 0; k < dec.fields[i].len; k++)
					ktel_android_field__list_i64(&dec.fields[i], k);
	}
	round_trip(&in);
	return 0;
}
