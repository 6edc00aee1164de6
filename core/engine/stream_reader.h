/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Stream metrics: one BPF ring buffer of events, consumed on
 * the libuv loop and decoded generically from BTF into KTEL_RECORD_EVENT
 * records.
 *
 * A descriptor of model KTEL_MODEL_STREAM names the ring buffer (map_name),
 * the BTF struct of one event (event_type) and, optionally, a per-CPU array
 * (lost_map, u32 key 0 -> u64) where the program counts failed
 * bpf_ringbuf_reserve() calls. Its dimensions name event members: label_enum
 * labels the member's value with a BTF enum, label_map resolves it through
 * an id -> name map the kernel side fills (ktel_labels.h), and every
 * dimension is also copied into the record's dims.
 *
 * Decoding: every member of the event is a field, in layout order, with its
 * dotted name; ints and bools are INT or UINT; enums are INT/UINT labelled
 * with their enumerator; char arrays are strings (up to the first NUL);
 * other int arrays are strings of comma-separated decimal elements (at most
 * KTEL_STREAM_ARRAY_MAX of them, then ",..."). A u64 member named ts_ns or
 * timestamp_ns holds bpf_ktime_get_ns() (CLOCK_MONOTONIC): the record's time
 * is that instant on CLOCK_BOOTTIME and on the wall clock, through offsets
 * read once per batch; an event without one is stamped with the time the
 * daemon read it.
 *
 * Consumption: uv_poll on the ring buffer's epoll fd, never a timer. One poll
 * callback consumes at most KTEL_STREAM_BUDGET events and returns to the loop
 * (pulls and sinks' I/O completions get their turn; the fd stays readable,
 * level-triggered, so the rest follows on the next iteration). Records go to the callback in
 * batches of at most KTEL_STREAM_BATCH from fixed arrays allocated in _new:
 * memory does not grow with a burst. What the kernel cannot store is counted
 * by the program in the lost map; what the daemon reads but cannot decode (a
 * sample shorter than the event type) is counted as dropped_daemon.
 *
 * All calls happen on the loop thread.
 */
#ifndef KTEL_STREAM_READER_H
#define KTEL_STREAM_READER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include <ktelemetry/plugin.h>

#include "error.h"
#include "record.h"

struct bpf_object;
struct btf;

/* Records handed to the callback at most per call. */
#define KTEL_STREAM_BATCH 256
/*
 * Events consumed at most per poll callback before yielding to the loop: one
 * batch. Sinks complete at most about one I/O per loop iteration (the JSON
 * sink writes one submitted batch per uv_fs_write, one after the other), so
 * a budget of several batches per iteration lets their queues outgrow what
 * they write: with 4096, the JSON sink wrote ~9k events/s and dropped 90%;
 * with 256, ~300k/s and nothing (docs/benchmarks.md). One epoll_wait per 256
 * events costs next to nothing.
 */
#define KTEL_STREAM_BUDGET KTEL_STREAM_BATCH
/* Label map ids cached per dimension; larger ids get no label. */
#define KTEL_STREAM_LABEL_IDS 1024
#define KTEL_STREAM_LABEL_LEN 64
/* Elements of an int array member formatted into its string. */
#define KTEL_STREAM_ARRAY_MAX 64

struct ktel_stream_reader;

typedef void (*ktel_stream_records_fn)(void *ctx, const struct ktel_record *recs, size_t n);

struct ktel_stream_stats {
	uint64_t delivered;      /* events handed to the callback */
	uint64_t lost_kernel;    /* failed reservations (lost map, all CPUs) */
	uint64_t dropped_daemon; /* events read but not delivered */
	uint64_t batches;        /* callback calls */
};

/*
 * Resolve metric md (model STREAM) of a loaded object: its ring buffer map,
 * the event layout from the object's BTF, the dimensions' labels and the
 * lost map. Nothing is consumed before _start. Errors name the metric, map,
 * type or member ("metric x: event type struct y: member z is a bitfield").
 */
int ktel_stream_reader__new(uv_loop_t *loop, const struct ktel_metric_desc *md,
			    struct bpf_object *obj, ktel_stream_records_fn fn, void *ctx,
			    struct ktel_stream_reader **ret, struct ktel_err *err);

/* Start polling the ring buffer's epoll fd (no-op when started). */
int ktel_stream_reader__start(struct ktel_stream_reader *sr, struct ktel_err *err);

/*
 * Deliver everything the ring holds now (in budgets, bounded by the ring's
 * size), then stop polling: events produced later wait in the ring (or are
 * lost when it fills) until the next _start. No-op when stopped.
 */
void ktel_stream_reader__stop(struct ktel_stream_reader *sr);

/* Counters so far; lost_kernel is read from the lost map now (0 without). */
void ktel_stream_reader__stats(const struct ktel_stream_reader *sr, struct ktel_stream_stats *ret);

/* Id of the ring buffer map (records carry it as map_id). */
uint32_t ktel_stream_reader__map_id(const struct ktel_stream_reader *sr);

/*
 * Self-telemetry: three KTEL_RECORD_COUNTER records in recs[0..max),
 * ktel_stream_delivered, ktel_stream_lost_kernel, ktel_stream_dropped_daemon,
 * each a copy of *tmpl (window, boot_id, seq are the caller's) with
 * counter.total the count and counter.delta its growth since the previous
 * call, and one dimension "metric" labelled with the stream's metric name.
 * Returns -ENOSPC when max < 3, else 0 with *ret_n set.
 */
#define KTEL_STREAM_SELF_RECORDS 3
int ktel_stream_reader__self_records(struct ktel_stream_reader *sr, const struct ktel_record *tmpl,
				     struct ktel_record *recs, size_t max, size_t *ret_n);

/*
 * Stop, close the uv handle and free everything in its close callback, so the
 * loop must run once more. Events still in the ring are not delivered.
 * Accepts NULL and a reader that was never started.
 */
void ktel_stream_reader__free(struct ktel_stream_reader *sr);

/* ---- the decoder alone (used by the reader; unit-tested without BPF) ---- */

struct ktel_stream_decoder;

/*
 * Resolve the name of label-map id `id` for dimension `dim` (index in
 * md->dims) into buf (NUL-terminated, len bytes). 0 when found, -ENOENT when
 * the map has no such id, another -errno on failure.
 */
typedef int (*ktel_stream_label_fn)(void *ctx, uint32_t dim, uint64_t id, char *buf, size_t len);

/* Offsets from CLOCK_MONOTONIC to CLOCK_BOOTTIME / CLOCK_REALTIME, and now. */
struct ktel_stream_clock {
	int64_t mono_to_boot_ns;
	int64_t mono_to_wall_ns;
	uint64_t now_boot_ns;
	int64_t now_wall_ns;
};

/* Read the clocks once (per batch). */
void ktel_stream_clock__read(struct ktel_stream_clock *ret);

/*
 * Build the decoder of md's event type in btf (which must stay alive: enum
 * labels point into it). label_fn resolves dimensions with a label_map and
 * may be NULL when md has none. Errors name the metric, type and member.
 */
int ktel_stream_decoder__new(const struct ktel_metric_desc *md, const struct btf *btf,
			     ktel_stream_label_fn label_fn, void *label_ctx,
			     struct ktel_stream_decoder **ret, struct ktel_err *err);
void ktel_stream_decoder__free(struct ktel_stream_decoder *dec);

/* Size of one event, and bytes of string storage one decoded record needs. */
size_t ktel_stream_decoder__event_size(const struct ktel_stream_decoder *dec);
size_t ktel_stream_decoder__strbuf_size(const struct ktel_stream_decoder *dec);

/*
 * A new batch: ids that a label map did not have are asked again (once per
 * batch, so an unknown id costs at most one lookup per batch).
 */
void ktel_stream_decoder__new_batch(struct ktel_stream_decoder *dec);

/*
 * Decode one event of size bytes into *rec (type, metric, atom, unit, time,
 * dims, fields; boot_id, map_id and seq are left to the caller). The fields
 * go into fields (KTEL_MAX_EVENT_FIELDS entries) and strings into strbuf
 * (strbuf_size bytes); rec borrows both. Returns 0, or -EMSGSIZE when size is
 * smaller than the event type.
 */
int ktel_stream_decoder__decode(struct ktel_stream_decoder *dec, const void *data, size_t size,
				const struct ktel_stream_clock *clk, struct ktel_record *rec,
				struct ktel_event_field *fields, char *strbuf);

#endif /* KTEL_STREAM_READER_H */
