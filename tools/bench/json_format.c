// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktel-bench-format: the CPU cost of the JSON line of a stream event, the
 * part of the stream path (ktel_bench_stream) that the JSON and stream
 * sinks share, without a kernel, a ring buffer or a second thread - so it
 * can run under `valgrind --tool=callgrind`, whose instruction counts do
 * not move with the machine's load.
 *
 * Usage: ktel-bench-format [BATCHES [RUNS]]   (default 2000 batches, 5 runs)
 *
 * Method: one batch of 256 event records shaped as fx_stream_flood's (the
 * producer of ktel_bench_stream): 11 fields (u64, s32, an enum label, a
 * label-map id with its label, bool, s8, a nested struct's two members, a
 * char array, a byte array), 2 dims, every record a different time and
 * sequence. Each run formats the batch BATCHES times into one reused text
 * buffer, as a sink does per submit: once with the batch's strings kept
 * (struct ktel_json_strs, reset per batch) and once with every string
 * escaped (no cache, as `show` formats a single record). Prints thread CPU
 * ns per line (median of RUNS) and bytes per line.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_format.h"
#include "textbuf.h"

#define BATCH 256
#define N_FIELDS 11

static struct ktel_event_field fields[BATCH][N_FIELDS];
static struct ktel_record recs[BATCH];
static char comms[BATCH][16];

static const char *const field_names[N_FIELDS] = {
	"ts_ns", "seq",     "tid",     "color", "label_id", "odd",
	"neg",   "inner.a", "inner.b", "comm",  "bytes",
};

static void make_batch(void)
{
	static const char *const colors[] = {"FX_RED", "FX_GREEN", "FX_BLUE"};

	for (unsigned i = 0; i < BATCH; i++) {
		struct ktel_event_field *f = fields[i];
		struct ktel_record *r = &recs[i];
		uint64_t seq = 1000000 + i;

		snprintf(comms[i], sizeof(comms[i]), "ktel_bench_%u", i % 7);
		for (unsigned k = 0; k < N_FIELDS; k++) {
			f[k].name = field_names[k];
			f[k].type = KTEL_FIELD_VALUE_UINT;
		}
		f[0].u = 5123456789012ULL + 1000 * i;
		f[1].u = seq;
		f[2].type = KTEL_FIELD_VALUE_INT;
		f[2].i = 4242;
		f[3].u = seq % 3;
		f[3].label = colors[seq % 3];
		f[4].u = 1;
		f[4].label = "ktel_bench_stre";
		f[5].u = seq & 1;
		f[6].type = KTEL_FIELD_VALUE_INT;
		f[6].i = -(int64_t)(seq % 100);
		f[7].u = seq & 0xffff;
		f[8].type = KTEL_FIELD_VALUE_INT;
		f[8].i = -1;
		f[9].type = KTEL_FIELD_VALUE_STRING;
		f[9].s = comms[i];
		f[10].type = KTEL_FIELD_VALUE_STRING;
		f[10].s = "[1,2,3,4]";
		r->type = KTEL_RECORD_EVENT;
		r->metric = "fx_stream_flood";
		r->atom = NULL;
		r->unit = "events";
		r->start_boottime_ns = r->end_boottime_ns = f[0].u;
		r->start_wall_ns = r->end_wall_ns = 1764790000123456789LL + 1000 * i;
		r->boot_id = "0b7e5c2a-64a4-4f1e-9d55-8d3c0f6a2b11";
		r->map_id = 42;
		r->seq = seq;
		r->n_dims = 2;
		r->dims[0].name = "label_id";
		r->dims[0].value = 1;
		r->dims[0].label = "ktel_bench_stre";
		r->dims[1].name = "color";
		r->dims[1].value = (int64_t)(seq % 3);
		r->dims[1].label = colors[seq % 3];
		r->event.n_fields = N_FIELDS;
		r->event.fields = f;
	}
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* One run: BATCHES batches; CPU ns per line, bytes per line in *ret_bytes. */
static double run(unsigned batches, struct ktel_json_strs *strs, double *ret_bytes)
{
	struct ktel_textbuf b = {0};
	uint64_t t0 = cpu_ns(), bytes = 0;

	for (unsigned k = 0; k < batches; k++) {
		b.len = 0;
		if (strs)
			ktel_json_strs__reset(strs);
		for (unsigned i = 0; i < BATCH; i++)
			ktel_json__append(&b, strs, &recs[i]);
		if (b.fail) {
			fprintf(stderr, "ktel-bench-format: out of memory\n");
			exit(1);
		}
		bytes += b.len;
	}
	free(b.p);
	*ret_bytes = (double)bytes / ((double)batches * BATCH);
	return (double)(cpu_ns() - t0) / ((double)batches * BATCH);
}

int main(int argc, char **argv)
{
	unsigned batches = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 2000;
	unsigned runs = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 5;
	static struct ktel_json_strs strs;
	const char *const modes[] = {"kept strings", "every string escaped"};

	if (!batches || !runs || runs > 99) {
		fprintf(stderr, "usage: ktel-bench-format [BATCHES [RUNS (1-99)]]\n");
		return 2;
	}
	make_batch();
	printf("ktel-bench-format: %u batches of %u fx_stream_flood-shaped events, %u runs, "
	       "thread CPU time\n",
	       batches, BATCH, runs);
	for (unsigned m = 0; m < 2; m++) {
		uint64_t ns[99];
		double bytes = 0;

		for (unsigned r = 0; r < runs; r++)
			ns[r] = (uint64_t)(1000 * run(batches, m == 0 ? &strs : NULL, &bytes));
		qsort(ns, runs, sizeof(ns[0]), cmp_u64);
		printf("%-22s %7.1f ns/line (median; min %.1f, max %.1f)  %.0f lines per CPU "
		       "second  %.0f bytes/line\n",
		       modes[m], ns[runs / 2] / 1000.0, ns[0] / 1000.0, ns[runs - 1] / 1000.0,
		       1e12 / (double)ns[runs / 2], bytes);
	}
	return 0;
}
