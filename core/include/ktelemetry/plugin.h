/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ktelemetry plugin ABI.
 *
 * A plugin is a shared object that exports exactly one const symbol,
 * `ktel_plugin` (KTEL_PLUGIN_SYMBOL), of type struct ktel_plugin_desc. It is
 * data only: the daemon never calls code in a plugin. Everything it needs -
 * the embedded BPF ELF object and the description of the metrics the object's
 * maps hold - is in the descriptor.
 *
 * Versioning: abi_major changes break compatibility and are refused; minor
 * versions only append fields at the end of a struct. Every struct carries its
 * own size, so a newer daemon reads an older plugin's fields only when the size
 * says they exist, and an older daemon ignores fields it does not know.
 *
 * This is the only header a plugin includes. Write a descriptor with the
 * KTEL_PLUGIN() macro (see docs/plugin-authoring.md).
 */
#ifndef KTELEMETRY_PLUGIN_H
#define KTELEMETRY_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KTEL_PLUGIN_ABI_MAJOR 1
#define KTEL_PLUGIN_ABI_MINOR 4
#define KTEL_PLUGIN_SYMBOL "ktel_plugin"

/* How the daemon consumes a metric's map. */
enum ktel_metric_model {
	KTEL_MODEL_ACCUMULATOR = 1, /* pulled on a timer: histograms, counters */
	KTEL_MODEL_STREAM = 2,      /* BPF ring buffer of events */
};

/* Bucket scheme of a histogram value (a struct with a `buckets` array). */
enum ktel_hist_scheme {
	KTEL_HIST_NONE = 0,       /* the value is not a histogram */
	KTEL_HIST_LOG2 = 1,       /* project convention: upper-inclusive log2,
				    * bucket 0 <= 1, k: (2^(k-1), 2^k], last +Inf */
	KTEL_HIST_LOG2_FLOOR = 2, /* libbpf-tools: slot s = [2^s, 2^(s+1)) */
	KTEL_HIST_LINEAR = 3,     /* bucket k: [min + k*step, min + (k+1)*step) */
};

/* What the integer members of a non-histogram value mean. */
enum ktel_value_kind {
	KTEL_VALUE_COUNTER = 0, /* monotonic: deltas are emitted */
	KTEL_VALUE_GAUGE = 1,   /* current level: emitted as read */
};

/*
 * One dimension of a metric: a member of the map's key struct.
 * key_member names the member (dotted path for nested structs); label_enum
 * optionally names a BTF enum in the object whose enumerators label the
 * values; label_map optionally names a BPF map (u32 id -> char name[N]) that
 * the kernel side fills, so strings travel as small integer ids.
 */
struct ktel_dimension_desc {
	const char *name;       /* field name in records, e.g. "process_state" */
	const char *key_member; /* member of the key struct; NULL: same as name */
	const char *label_enum; /* BTF enum type name, or NULL */
	const char *label_map;  /* BPF map name of an id -> name map, or NULL */
};

/*
 * How a dimension's value is labelled (ABI 1.1: ktel_metric_desc.dim_flags,
 * docs/plugin-authoring.md "Label values"):
 *  - KTEL_DIM_ENUM_SHORT: the enum label is the enumerator without the
 *    enum's common prefix, lowercased: BLOCK_OP_READ -> "read".
 *  - KTEL_DIM_DEV_MAJOR and KTEL_DIM_DEV_MINOR on two dimensions, or
 *    KTEL_DIM_DEV_T on one holding a kernel dev_t (major << 20 | minor):
 *    records get one more dimension, "device", the block device's kernel
 *    name ("nvme0n1", node_exporter's label) from sysfs, when it resolves.
 *    Accumulator metrics only.
 *  - KTEL_DIM_ATTRIBUTION (ABI 1.2) on at most one u64 key member of an
 *    accumulator metric: the "who" of the event (a cgroup id, a uid, a
 *    process), filled by the helpers of bpf/include/ktel_attr.h as the
 *    config's metrics.<name>.attribution.by says. With attribution off the
 *    member stays 0 and the dimension is not in records at all; with it on,
 *    the daemon folds the values into at most K names plus "other" and
 *    "unknown" and names the dimension after `by` ("cgroup", "user", "app",
 *    "process"). No enum or map label, no other flag on that member.
 */
enum ktel_dim_flags {
	KTEL_DIM_ENUM_SHORT = 1u << 0,
	KTEL_DIM_DEV_MAJOR = 1u << 1,
	KTEL_DIM_DEV_MINOR = 1u << 2,
	KTEL_DIM_DEV_T = 1u << 3,
	KTEL_DIM_ATTRIBUTION = 1u << 4,
};

/*
 * Attribution subjects: the values of the .rodata global <map>_attr_by a
 * plugin declares with KTEL_ATTR_SETTINGS (bpf/include/ktel_attr.h), and
 * the attribution value the kernel side writes when the metric's bound of
 * attributed keys is reached (the event is counted there, never lost).
 */
enum ktel_attr_by {
	KTEL_ATTR_BY_NONE = 0,
	KTEL_ATTR_BY_CGROUP = 1,
	KTEL_ATTR_BY_USER = 2,
	KTEL_ATTR_BY_APP = 3,
	KTEL_ATTR_BY_PROCESS = 4,
	/* The config's `app_class`: the kernel collects it as KTEL_ATTR_BY_APP
	 * (the uid; never written to a plugin's .rodata), the daemon names the
	 * class only (system, app, sdk_sandbox, isolated, ...). */
	KTEL_ATTR_BY_APP_CLASS = 5,
};
#define KTEL_ATTR_OVERFLOW_ID UINT64_MAX
/* The subject was not seen (KTEL_ATTR_UNKNOWN): named "unknown". */
#define KTEL_ATTR_UNKNOWN_ID (UINT64_MAX - 1)
/* The dimension block-device dimensions add; no declared one may be it. */
#define KTEL_DEVICE_DIM "device"
#define KTEL_DIM_FLAGS_ALL                                                                \
	(KTEL_DIM_ENUM_SHORT | KTEL_DIM_DEV_MAJOR | KTEL_DIM_DEV_MINOR | KTEL_DIM_DEV_T | \
	 KTEL_DIM_ATTRIBUTION)

/*
 * One metric: a map of the BPF object and how to read it.
 */
struct ktel_metric_desc {
	uint32_t struct_size;  /* sizeof(struct ktel_metric_desc) */
	const char *name;      /* unique metric name, e.g. "direct_reclaim_latency" */
	const char *atom_name; /* e.g. "DirectReclaimLatency" */
	uint32_t atom_id;      /* statsd atom id */
	const char *map_name;  /* BPF map holding the metric */
	enum ktel_metric_model model;
	const char *unit;                /* "us", "bytes", "events", ... */
	enum ktel_hist_scheme scheme;    /* for histogram values */
	int64_t linear_min;              /* KTEL_HIST_LINEAR only */
	int64_t linear_step;             /* KTEL_HIST_LINEAR only */
	enum ktel_value_kind value_kind; /* for integer (non-histogram) values */
	const char *description;
	const struct ktel_dimension_desc *dims;
	uint32_t n_dims;
	/* Stream metrics: BTF struct name of one event, and an optional per-CPU
	 * array map (u32 -> u64) where the program counts failed reservations. */
	const char *event_type;
	const char *lost_map;
	/* Optional: the programs this metric needs; all of the object's programs
	 * when NULL. Used by enable/disable to attach/detach per metric. */
	const char *const *programs;
	uint32_t n_programs;
	/* ABI 1.1, optional: n_dims flags (enum ktel_dim_flags), dim_flags[i]
	 * for dims[i]; NULL: none. A separate array, not a member of
	 * ktel_dimension_desc, so the dims stride stays that of 1.0 and a 1.0
	 * daemon still loads this plugin (without these labels). */
	const uint32_t *dim_flags;
};

/*
 * Program variants. Programs of the object that share a group are
 * alternatives for one hook; the loader keeps the first one, in table order,
 * whose attach target exists in the running kernel (and, when nr_args >= 0,
 * whose tracepoint/function has exactly that many arguments) and turns
 * autoload off for the others (and falls back to the next one when the
 * kernel refuses to load or attach it). Every hook is required: when a group
 * has no usable variant, or a program in no group cannot run, the plugin is
 * reported unsupported and nothing of it is loaded.
 */
struct ktel_prog_variant {
	const char *group; /* e.g. "cma_start" */
	const char *prog;  /* BPF program (function) name */
	int32_t nr_args;   /* required argument count, or -1 for any */
};

/*
 * ABI 1.3: a program needed only while a metric is attributed (the hook
 * that records an event's subject for a later program, which attribution
 * off does not need). With the metric's attribution off the loader does
 * not load it, and a variant group all of whose programs are such is not
 * required. A program listed for several metrics is loaded when any of
 * them is attributed.
 */
struct ktel_attr_prog {
	const char *prog;   /* BPF program (function) name */
	const char *metric; /* a metric of this plugin */
};

/*
 * ABI 1.4: when an attr_progs entry is not needed although its metric is
 * attributed (ktel_plugin_desc.attr_prog_flags):
 *  - KTEL_ATTR_PROG_BLKCG: not while the metric is attributed by cgroup with
 *    the charged cgroup as its subject (attribution.block_subject), which
 *    the daemon allows only with the io controller on the cgroup v2
 *    hierarchy. The kernel then
 *    records in every bio the cgroup it charges the I/O to (bio->bi_blkg),
 *    and the plugin's programs read that instead, under the .rodata switch
 *    <map>_attr_blkcg (KTEL_ATTR_SETTINGS), which the daemon sets to 1
 *    exactly when it leaves such programs out.
 */
enum ktel_attr_prog_flags {
	KTEL_ATTR_PROG_BLKCG = 1u << 0,
};
#define KTEL_ATTR_PROG_FLAGS_ALL (KTEL_ATTR_PROG_BLKCG)

/*
 * Run-time settings of the BPF object: read-only globals (const volatile in
 * .rodata) the daemon may set from the config before load.
 */
struct ktel_param_desc {
	const char *name; /* config key and .rodata variable name */
	const char *description;
	int64_t default_value;
};

struct ktel_plugin_desc {
	uint16_t abi_major;   /* KTEL_PLUGIN_ABI_MAJOR */
	uint16_t abi_minor;   /* KTEL_PLUGIN_ABI_MINOR */
	uint32_t struct_size; /* sizeof(struct ktel_plugin_desc) */
	const char *name;     /* object name: pins are map_<name>_<map> */
	const char *version;
	const char *description;
	const void *bpf_object; /* embedded BPF ELF bytes */
	size_t bpf_object_size;
	const struct ktel_metric_desc *metrics;
	uint32_t n_metrics;
	const struct ktel_prog_variant *variants;
	uint32_t n_variants;
	const struct ktel_param_desc *params;
	uint32_t n_params;
	/* ABI 1.3, optional: programs needed only while a metric is
	 * attributed. */
	const struct ktel_attr_prog *attr_progs;
	uint32_t n_attr_progs;
	/* ABI 1.4, optional: n_attr_progs flags (enum ktel_attr_prog_flags),
	 * attr_prog_flags[i] for attr_progs[i]; NULL: none. A separate array,
	 * so that attr_progs keeps the stride of 1.3. */
	const uint32_t *attr_prog_flags;
};

#define KTEL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define KTEL_PLUGIN_EXPORT __attribute__((visibility("default"), used))
#else
#define KTEL_PLUGIN_EXPORT
#endif

/*
 * Define the plugin's descriptor. Usage:
 *   KTEL_PLUGIN(.name = "x", .version = "1.0", .bpf_object = bytes, ...);
 * ABI version and struct size are filled in.
 */
#define KTEL_PLUGIN(...)                                               \
	KTEL_PLUGIN_EXPORT const struct ktel_plugin_desc ktel_plugin = \
		{.abi_major = KTEL_PLUGIN_ABI_MAJOR,                   \
		 .abi_minor = KTEL_PLUGIN_ABI_MINOR,                   \
		 .struct_size = sizeof(struct ktel_plugin_desc),       \
		 __VA_ARGS__}

/* Start a metric descriptor inside a metrics array. */
#define KTEL_METRIC(...)                                                    \
	{                                                                   \
		.struct_size = sizeof(struct ktel_metric_desc), __VA_ARGS__ \
	}

#ifdef __cplusplus
}
#endif

#endif /* KTELEMETRY_PLUGIN_H */
