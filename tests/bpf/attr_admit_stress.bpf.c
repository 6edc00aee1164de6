// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The kernel bound of ktel_attr.h under concurrency, driven by
 * tests/integration/test_attr_admit.c: each run of stress_events (through
 * BPF_PROG_TEST_RUN, on the CPU the calling thread is pinned to) counts a
 * batch of events into stress_map with KTEL_ATTR_INCREMENT_SUM, as the
 * plugins do, so two threads on two CPUs insert new keys into one nearly
 * full map at once. The test sets the map's size and the settings before
 * load and checks that the map's counts add up to the events it issued.
 */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>
#include <ktel_attr.h>

struct stress_key {
	__u32 rest; /* the other dimension (a CPU or a device in a plugin) */
	__u32 pad;
	__u64 attr;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16); /* the test sets it */
	__type(key, struct stress_key);
	__type(value, struct accumulator_value_sum);
} stress_map SEC(".maps");

KTEL_ATTR_SETTINGS(stress_map);

/* The batch: event i has attr first + (i % ids) and rest i % rests, and
 * the value i (so several buckets fill). */
struct batch {
	__u64 first, ids, rests, n;
};

static long one_event(__u64 i, void *ctx)
{
	struct batch *b = ctx;
	struct stress_key key = {};

	if (!b->ids || !b->rests)
		return 1;
	key.rest = (__u32)(i % b->rests);
	key.attr = b->first + i % b->ids;
	KTEL_ATTR_INCREMENT_SUM(stress_map, &key, i & 1023);
	return 0;
}

/* ctx: first, ids, rests, n (u64 each). */
SEC("raw_tp")
int stress_events(__u64 *ctx)
{
	struct batch b = {
		.first = ctx[0],
		.ids = ctx[1],
		.rests = ctx[2],
		.n = ctx[3],
	};

	bpf_loop(b.n < 4096 ? (__u32)b.n : 4096, one_event, &b, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
