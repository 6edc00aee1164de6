/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * bpf_telemetry.h - accumulator helpers for ktelemetry BPF programs.
 *
 * Source-compatible with the header Android's "collect kernel telemetry with
 * eBPF" framework ships, so a program written for it compiles here unchanged.
 *
 * Histogram convention (docs/architecture.md, "Histogram convention"):
 * 32 buckets of u64 counts, log2, upper-inclusive:
 *   bucket 0        holds v <= 1
 *   bucket k 1..30  holds 2^(k-1) < v <= 2^k      (upper bound le = 2^k)
 *   bucket 31       holds v > 2^30                (overflow, exported as +Inf)
 * This is ceil(log2(v)) clamped, the ebpf_exporter "exp2" scheme, and maps
 * exactly onto Prometheus native histograms of schema 0 and OpenTelemetry
 * exponential histograms of scale 0 (OTel index = k - 1).
 */
#ifndef BPF_TELEMETRY_H
#define BPF_TELEMETRY_H

#ifndef KTEL_KERNEL_TYPES_H
#include <ktel_kernel_types.h>
#endif
#include <bpf/bpf_helpers.h>

#define BPF_TELEMETRY_NUM_BUCKETS 32
#define BPF_TELEMETRY_OVERFLOW_BUCKET 31
#define BPF_TELEMETRY_INVALID_BUCKET 0xffffffffU

/*
 * The value type of every histogram map. The decoder recognises a struct with
 * a `buckets` array as a histogram. A struct that also has a u64 `sum` member
 * right after it (struct accumulator_value_sum) exports the sum too.
 */
struct accumulator_value {
	__u64 buckets[BPF_TELEMETRY_NUM_BUCKETS];
};

struct accumulator_value_sum {
	__u64 buckets[BPF_TELEMETRY_NUM_BUCKETS];
	__u64 sum;
};

/*
 * Durations whose end came before their start (clock or pairing trouble) are
 * never bucketed; they are counted here. The daemon reads this from the
 * object's .bss map and exports it as self-telemetry.
 */
__u64 ktel_invalid_durations = 0;

/*
 * Map writes an event needed that the kernel refused: an insert or update
 * (of a start entry, an accumulator key or the overflow key) or a delete.
 * The kernel's hash-map bucket locks give up under contention or nesting
 * instead of spinning, and an LRU map may find no free entry, so a write
 * can fail where nothing is full. An event whose accumulator could not be
 * made is lost; a failed start or delete may cost nothing (the start is
 * written again later, a stale entry is overwritten). Exported by the
 * daemon as self-telemetry (ktel_map_write_failures), so a total that
 * comes out short says whether the kernel side lost events.
 */
__u64 ktel_map_write_failures = 0;

/*
 * End events whose start the program had not recorded (begun before the
 * attach, or their start entry was evicted or never written): no duration,
 * counted here and exported as ktel_unpaired_events.
 */
__u64 ktel_unpaired_events = 0;

/*
 * An audit build (cmake -DKTEL_BPF_AUDIT=ON, never the default: an atomic
 * add on one shared counter per event costs more than the rest of a
 * program) counts every event the accumulator macros recorded, exported as
 * ktel_events_counted: against the events the daemon's pulls took from the
 * maps it says whether a short sum lost its events in the kernel or in the
 * daemon. Without it the macro is empty and the object has no counter.
 */
#ifdef KTEL_BPF_AUDIT
__u64 ktel_events_counted = 0;
#define ktel_audit_counted() __sync_fetch_and_add(&ktel_events_counted, 1)
#else
#define ktel_audit_counted() \
	do {                 \
	} while (0)
#endif

/*
 * Keep a type in the object's BTF even when no map or function refers to it,
 * so the daemon can name it in a descriptor (for example the enum that labels
 * a dimension whose key member is a plain u32). libbpf skips the section.
 */
#define KTEL_EXPORT_TYPE(type, name) \
	type *__ktel_type_##name __attribute__((section(".ktel.types"), used))

/* Bucket index of v under the convention above. Bounded, no loops. */
static __always_inline __u32 ktel_log2_bucket(__u64 v)
{
	__u64 x;
	__u32 k = 0;

	if (v <= 1)
		return 0;
	if (v > (1ULL << 30))
		return BPF_TELEMETRY_OVERFLOW_BUCKET;
	/* v in [2, 2^30]: bucket = floor(log2(v - 1)) + 1 = ceil(log2(v)). */
	x = v - 1;
	if (x >= (1ULL << 16)) {
		x >>= 16;
		k += 16;
	}
	if (x >= (1ULL << 8)) {
		x >>= 8;
		k += 8;
	}
	if (x >= (1ULL << 4)) {
		x >>= 4;
		k += 4;
	}
	if (x >= (1ULL << 2)) {
		x >>= 2;
		k += 2;
	}
	if (x >= (1ULL << 1)) {
		k += 1;
	}
	return k + 1;
}

#define GET_BUCKET(value) ktel_log2_bucket((__u64)(value))

/*
 * The BPF_MAP_TYPE_* a BTF-defined map was declared with, as a compile-time
 * constant: __uint(type, T) declares `int (*type)[T]`. The start macros below
 * branch on it, and the compiler drops the branch a map's type does not take,
 * so a program's instructions hold only the form of its own start map.
 */
#define KTEL_MAP_TYPE(map) (sizeof(*(map).type) / sizeof(int))
#define KTEL_IS_TASK_MAP(map) (KTEL_MAP_TYPE(map) == BPF_MAP_TYPE_TASK_STORAGE)

/*
 * Does the end delete the start (a plain hash map) rather than zero it in
 * place? A hash that never evicts and keeps an entry per key that ever
 * started fills up for good when its keys come and go (tids, over a device's
 * life), and a full map measures no new key; deleting keeps it at the starts
 * in flight. An LRU hash evicts idle entries and a task map's slot leaves
 * with its task, so those keep the start in place.
 */
#define KTEL_START_DELETED(map) \
	(KTEL_MAP_TYPE(map) == BPF_MAP_TYPE_HASH || KTEL_MAP_TYPE(map) == BPF_MAP_TYPE_PERCPU_HASH)

/*
 * The start slot of key in start_map, or NULL when it has none. A task map
 * (BPF_MAP_TYPE_TASK_STORAGE, KTEL_DEFINE_TASK_START_MAP) ignores key: its
 * slot is the current task's, created when create is true and the task has
 * none. A hash map's slot is key's entry, never created here.
 */
#define ktel_start_slot(start_map, key, create)                                                   \
	((__u64 *)(KTEL_IS_TASK_MAP(start_map)                                                    \
			   ? bpf_task_storage_get(&(start_map), bpf_get_current_task_btf(), NULL, \
						  (create) ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0)  \
			   : bpf_map_lookup_elem(&(start_map), (key))))

/*
 * Save the current time as key's start with update flags (BPF_NOEXIST keeps a
 * saved start, BPF_ANY replaces it). In an LRU hash or a task map
 * (BPF_MAP_TYPE_TASK_STORAGE: the key is ignored, the start is the current
 * task's and leaves with it) the start stays in place: the end macros set it
 * to 0 ("no start"; bpf_ktime_get_ns() is never 0) instead of deleting it, so
 * an event pays a lookup and a store, and only the first start of a key
 * inserts: an insert and a delete per event would cost more than the lookups
 * and the histogram update together (docs/benchmarks.md, "Per-event
 * overhead"). A plain hash start map is inserted into here and deleted from
 * at the end, as Android's header does (KTEL_START_DELETED says why). 0, or
 * the failed insert's -errno (a full hash map), or -1 when a task has no
 * slot.
 */
#define ktel_save_start(start_map, key, flags)                                            \
	({                                                                                \
		long __ktel_rc = 0;                                                       \
		__u64 *__ktel_slot = KTEL_START_DELETED(start_map)                        \
					     ? NULL                                       \
					     : ktel_start_slot(start_map, key, 1);        \
		if (__ktel_slot) {                                                        \
			if ((flags) == BPF_ANY || !*__ktel_slot)                          \
				*__ktel_slot = bpf_ktime_get_ns();                        \
		} else if (KTEL_IS_TASK_MAP(start_map)) {                                 \
			__ktel_rc = -1;                                                   \
		} else {                                                                  \
			__u64 __ktel_now = bpf_ktime_get_ns();                            \
			__ktel_rc = bpf_map_update_elem(&(start_map), (key), &__ktel_now, \
							(flags));                         \
			/* -EEXIST: BPF_NOEXIST kept the saved start, as asked. */        \
			if (__ktel_rc == -17 && (flags) == BPF_NOEXIST)                   \
				__ktel_rc = 0;                                            \
		}                                                                         \
		__ktel_rc;                                                                \
	})

/* Remember the start time for key unless one is already there. */
#define SAVE_FIRST_START_TIME(start_map, key) ktel_save_start(start_map, key, BPF_NOEXIST)

/*
 * Save the current time as key's start, replacing any saved one. For events
 * that cannot nest: a start left behind by a missed end (the end program
 * attached later, a detach in between) is stale, and the next begin must
 * replace it rather than be measured from it.
 */
#define SAVE_START_TIME(start_map, key) ktel_save_start(start_map, key, BPF_ANY)

/*
 * A duration macro's "no duration" result: no start was saved, or the end
 * came before it. Never a real duration: a u64 of nanoseconds divided by 1000
 * stays below it.
 */
#define BPF_TELEMETRY_INVALID_DURATION (~0ULL)

/*
 * Whole microseconds from begin to end (ns), rounded down: the value a
 * latency histogram buckets and adds to its sum. An end before its begin is
 * counted in ktel_invalid_durations and gives BPF_TELEMETRY_INVALID_DURATION.
 */
static __always_inline __u64 ktel_duration_us(__u64 begin, __u64 end)
{
	if (end >= begin)
		return (end - begin) / 1000;
	__sync_fetch_and_add(&ktel_invalid_durations, 1);
	return BPF_TELEMETRY_INVALID_DURATION;
}

/* Bucket of a duration macro's result; BPF_TELEMETRY_INVALID_BUCKET for none. */
static __always_inline __u32 ktel_duration_bucket_of(__u64 us)
{
	if (us == BPF_TELEMETRY_INVALID_DURATION)
		return BPF_TELEMETRY_INVALID_BUCKET;
	return GET_BUCKET(us);
}

/* Bucket of the microseconds from begin to end (ns), as ktel_duration_us. */
static __always_inline __u32 ktel_duration_bucket(__u64 begin, __u64 end)
{
	return ktel_duration_bucket_of(ktel_duration_us(begin, end));
}

/*
 * Microseconds elapsed since the start saved for key (ktel_duration_us),
 * clearing that start (set to 0 in place, or deleted from a plain hash: see
 * ktel_save_start; never creates a slot). BPF_TELEMETRY_INVALID_DURATION when no start was saved or
 * the clock went backwards (the latter is counted in
 * ktel_invalid_durations). Pass the result to INCREMENT_ACCUMULATOR_SUM to
 * bucket it and add it to the histogram's sum.
 */
#define GET_LATENCY_US(start_map, key)                                          \
	({                                                                      \
		__u64 __ktel_us = BPF_TELEMETRY_INVALID_DURATION;               \
		__u64 *__ktel_start = ktel_start_slot(start_map, key, 0);       \
		if (__ktel_start && *__ktel_start) {                            \
			__u64 __ktel_begin = *__ktel_start;                     \
			__u64 __ktel_end = bpf_ktime_get_ns();                  \
			if (KTEL_START_DELETED(start_map))                      \
				bpf_map_delete_elem(&(start_map), (key));       \
			else                                                    \
				*__ktel_start = 0;                              \
			__ktel_us = ktel_duration_us(__ktel_begin, __ktel_end); \
		}                                                               \
		__ktel_us;                                                      \
	})

/*
 * Bucket of the microseconds elapsed since the start saved for key, clearing
 * that start. BPF_TELEMETRY_INVALID_BUCKET when no start was saved or the
 * clock went backwards (the latter is counted in ktel_invalid_durations).
 * Android's macro: it loses the duration, so a histogram filled from it has
 * no sum; prefer GET_LATENCY_US.
 */
#define GET_LATENCY_BUCKET(start_map, key) ktel_duration_bucket_of(GET_LATENCY_US(start_map, key))

/*
 * Starts kept in task local storage, for start/end pairs that belong to one
 * task. SAVE_FIRST_START_TIME, SAVE_START_TIME and GET_LATENCY_US take such
 * a map too (the current task's start); these take any task, for a start
 * saved in one task for another (runq_latency: the waker saves the wakee's).
 * The u64 slot is created once per task, written at the start, read and set
 * to 0 at the end (0 means "no start"; bpf_ktime_get_ns() is never 0), and
 * freed by the kernel when the task exits, so no LRU or max_entries is
 * needed and a reused tid never inherits a stale start; nothing is inserted
 * or looked up by key on the event path. docs/benchmarks.md "Per-event
 * overhead" measures the forms (configs cdel, c, ct, t). Task storage is available
 * to tp_btf programs since Linux 5.11; a plugin with a task start map has a
 * hash start variant for kernels without it (docs/plugin-authoring.md).
 * task is a BTF task_struct pointer (a tp_btf argument or
 * bpf_get_current_task_btf()).
 */
#define KTEL_DEFINE_TASK_START_MAP(name)                 \
	struct {                                         \
		__uint(type, BPF_MAP_TYPE_TASK_STORAGE); \
		__uint(map_flags, BPF_F_NO_PREALLOC);    \
		__type(key, int);                        \
		__type(value, __u64);                    \
	} name SEC(".maps")

/* task's start slot, created when missing; NULL when it cannot be. */
#define ktel_task_start_slot(map, task) \
	((__u64 *)bpf_task_storage_get(&(map), (task), NULL, BPF_LOCAL_STORAGE_GET_F_CREATE))

/*
 * Save the current time as task's start, replacing any saved one (the
 * SAVE_START_TIME rule: for events that cannot nest). 0, or -1 when the
 * kernel could not give the task a slot (no memory, or a task storage call
 * already running on this CPU).
 */
#define KTEL_TASK_SAVE_START(map, task)                               \
	({                                                            \
		__u64 *__ktel_slot = ktel_task_start_slot(map, task); \
		if (__ktel_slot)                                      \
			*__ktel_slot = bpf_ktime_get_ns();            \
		__ktel_slot ? 0 : -1;                                 \
	})

/* Save task's start unless one is saved (the SAVE_FIRST_START_TIME rule). */
#define KTEL_TASK_SAVE_FIRST_START(map, task)                         \
	({                                                            \
		__u64 *__ktel_slot = ktel_task_start_slot(map, task); \
		if (__ktel_slot && !*__ktel_slot)                     \
			*__ktel_slot = bpf_ktime_get_ns();            \
		__ktel_slot ? 0 : -1;                                 \
	})

/*
 * GET_LATENCY_US for a task start: the microseconds since the start saved
 * for task, which is cleared (set to 0, the slot kept for the next start).
 * BPF_TELEMETRY_INVALID_DURATION when no start is saved (never creates a
 * slot) or the clock went backwards (counted in ktel_invalid_durations).
 */
#define KTEL_TASK_LATENCY_US(map, task)                                                      \
	({                                                                                   \
		__u64 __ktel_us = BPF_TELEMETRY_INVALID_DURATION;                            \
		__u64 *__ktel_slot = (__u64 *)bpf_task_storage_get(&(map), (task), NULL, 0); \
		if (__ktel_slot && *__ktel_slot) {                                           \
			__u64 __ktel_begin = *__ktel_slot;                                   \
			__u64 __ktel_end = bpf_ktime_get_ns();                               \
			*__ktel_slot = 0;                                                    \
			__ktel_us = ktel_duration_us(__ktel_begin, __ktel_end);              \
		}                                                                            \
		__ktel_us;                                                                   \
	})

/* KTEL_TASK_LATENCY_US as a bucket (BPF_TELEMETRY_INVALID_BUCKET for none). */
#define KTEL_TASK_LATENCY_BUCKET(map, task) ktel_duration_bucket_of(KTEL_TASK_LATENCY_US(map, task))

/*
 * Return the histogram for key, creating a zeroed one when missing. Works for
 * any value type whose first member is the bucket array. NULL when the map
 * refused the insert: the caller's event is lost, counted in
 * ktel_map_write_failures.
 */
#define ktel_get_or_create(map, key, value_type)                                       \
	({                                                                             \
		value_type *__ktel_v = bpf_map_lookup_elem(&(map), (key));             \
		if (!__ktel_v) {                                                       \
			value_type __ktel_zero = {};                                   \
			bpf_map_update_elem(&(map), (key), &__ktel_zero, BPF_NOEXIST); \
			__ktel_v = bpf_map_lookup_elem(&(map), (key));                 \
			if (!__ktel_v)                                                 \
				__sync_fetch_and_add(&ktel_map_write_failures, 1);     \
		}                                                                      \
		__ktel_v;                                                              \
	})

/* Add one to bucket of the histogram at key, creating it when missing. */
#define INCREMENT_ACCUMULATOR(map, key, bucket)                                               \
	({                                                                                    \
		__u32 __ktel_b = (bucket);                                                    \
		struct accumulator_value                                                      \
			*__ktel_acc = ktel_get_or_create(map, key, struct accumulator_value); \
		if (__ktel_acc && __ktel_b < BPF_TELEMETRY_NUM_BUCKETS) {                     \
			__sync_fetch_and_add(&__ktel_acc->buckets[__ktel_b], 1);              \
			ktel_audit_counted();                                                 \
		}                                                                             \
	})

/*
 * Record value (bucketed with GET_BUCKET) and add it to the sum, both with
 * atomic adds, in a struct accumulator_value_sum histogram; value is in the
 * metric's unit. A u64 sum of microseconds wraps after 584,000 years of
 * summed time; of bytes, after 16 EiB. BPF_TELEMETRY_INVALID_DURATION (what
 * the duration macros give for no duration) is ignored, so their result can
 * be passed straight in.
 */
#define INCREMENT_ACCUMULATOR_SUM(map, key, value)                                               \
	({                                                                                       \
		__u64 __ktel_val = (value);                                                      \
		__u32 __ktel_b = GET_BUCKET(__ktel_val);                                         \
		struct accumulator_value_sum *__ktel_acc;                                        \
		if (__ktel_val != BPF_TELEMETRY_INVALID_DURATION) {                              \
			__ktel_acc = ktel_get_or_create(map, key, struct accumulator_value_sum); \
			if (__ktel_acc && __ktel_b < BPF_TELEMETRY_NUM_BUCKETS) {                \
				__sync_fetch_and_add(&__ktel_acc->buckets[__ktel_b], 1);         \
				__sync_fetch_and_add(&__ktel_acc->sum, __ktel_val);              \
				ktel_audit_counted();                                            \
			}                                                                        \
		}                                                                                \
	})

/*
 * Process state, numbered exactly like the ProcessState enum of Android's
 * DirectReclaimLatency atom. The decoder labels dimensions with these names.
 */
enum process_state {
	PROCESS_STATE_UNSPECIFIED = 0,
	STATE_NATIVE = 1,
	STATE_SYSTEM = 2,
	STATE_PERSISTENT = 3,
	STATE_FOREGROUND = 4,
	STATE_VISIBLE = 5,
	STATE_PERCEPTIBLE = 6,
	STATE_SERVICE_BACKGROUND = 7,
	STATE_CACHED = 8,
};

/*
 * Thresholds on oom_score_adj, from Android's ProcessList values:
 *   adj <  -900                 STATE_NATIVE      (NATIVE_ADJ -1000)
 *   -900 <= adj < -800          STATE_SYSTEM      (SYSTEM_ADJ -900)
 *   -800 <= adj < 0             STATE_PERSISTENT  (PERSISTENT_PROC_ADJ -800,
 *                                                  PERSISTENT_SERVICE_ADJ -700)
 *   0    <= adj < 100           STATE_FOREGROUND  (FOREGROUND_APP_ADJ 0)
 *   100  <= adj < 200           STATE_VISIBLE     (VISIBLE_APP_ADJ 100)
 *   200  <= adj < 300           STATE_PERCEPTIBLE (PERCEPTIBLE_APP_ADJ 200,
 *                                                  PERCEPTIBLE_LOW_APP_ADJ 250)
 *   300  <= adj < 900           STATE_SERVICE_BACKGROUND (BACKUP 300,
 *                     HEAVY_WEIGHT 400, SERVICE 500, HOME 600, PREVIOUS 700,
 *                     SERVICE_B 800)
 *   adj >= 900                  STATE_CACHED      (CACHED_APP_MIN 900 .. 999)
 * On a plain Linux server nearly every task has adj 0 (STATE_FOREGROUND);
 * systemd-oomd and container runtimes move some up or down.
 */
KTEL_EXPORT_TYPE(enum process_state, process_state);

#define KTEL_ADJ_SYSTEM (-900)
#define KTEL_ADJ_PERSISTENT (-800)
#define KTEL_ADJ_FOREGROUND 0
#define KTEL_ADJ_VISIBLE 100
#define KTEL_ADJ_PERCEPTIBLE 200
#define KTEL_ADJ_SERVICE_BACKGROUND 300
#define KTEL_ADJ_CACHED 900

static __always_inline enum process_state get_process_state(int oom_score_adj)
{
	if (oom_score_adj < KTEL_ADJ_SYSTEM)
		return STATE_NATIVE;
	if (oom_score_adj < KTEL_ADJ_PERSISTENT)
		return STATE_SYSTEM;
	if (oom_score_adj < KTEL_ADJ_FOREGROUND)
		return STATE_PERSISTENT;
	if (oom_score_adj < KTEL_ADJ_VISIBLE)
		return STATE_FOREGROUND;
	if (oom_score_adj < KTEL_ADJ_PERCEPTIBLE)
		return STATE_VISIBLE;
	if (oom_score_adj < KTEL_ADJ_SERVICE_BACKGROUND)
		return STATE_PERCEPTIBLE;
	if (oom_score_adj < KTEL_ADJ_CACHED)
		return STATE_SERVICE_BACKGROUND;
	return STATE_CACHED;
}

#endif /* BPF_TELEMETRY_H */
