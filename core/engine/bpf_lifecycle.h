/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * BPF lifecycle of one plugin: open its embedded object, set its params,
 * pick the programs the kernel supports, reuse or replace pinned maps, load,
 * pin, attach program by program; later detach/attach per program and free.
 *
 * Pins: the maps of accumulator metrics and their label maps live at
 * <pin_root>/map_<object>_<map> (object = plugin name), so a restarted daemon
 * continues the same cumulative histograms. Stream ring buffers, lost
 * counters and the programs' private maps (start times, ...) are not pinned.
 */
#ifndef KTEL_BPF_LIFECYCLE_H
#define KTEL_BPF_LIFECYCLE_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "kernel_targets.h"
#include "plugin_loader.h"

struct bpf_object;
struct bpf_program;
struct bpf_map;
struct bpf_link;

#define KTEL_PIN_ROOT_DEFAULT "/sys/fs/bpf/kernelstats"
#define KTEL_BPFFS_MOUNT "/sys/fs/bpf"
#define KTEL_PIN_DIR_MODE 0750
#define KTEL_PIN_MAP_MODE 0640
#define KTEL_LIFECYCLE_MSG_MAX 256

/*
 * libbpf's messages. libbpf_set_print() is process-global, so this is too:
 * the first ktel call that may make libbpf talk installs a handler that
 * keeps the first warning since the last ktel_libbpf_log__reset() (only to
 * explain failures in ktel_err: which program the kernel refused is learnt
 * from libbpf's API, not from its messages) and forwards messages to fn. Until
 * ktel_libbpf_log__set() is called nothing is forwarded, so core code never
 * prints. level is LIBBPF_WARN, LIBBPF_INFO or LIBBPF_DEBUG; msg has no
 * trailing newline and may span lines (verifier logs).
 */
typedef void (*ktel_libbpf_log_fn)(int level, const char *msg, void *ctx);

/* Route libbpf's messages to fn (NULL: drop them); debug ones only if debug. */
void ktel_libbpf_log__set(ktel_libbpf_log_fn fn, void *ctx, bool debug);

/* Install the handler if not yet done; forget the captured warning. */
void ktel_libbpf_log__reset(void);

/* First line of the first warning since the last reset, or "". */
const char *ktel_libbpf_log__last(void);

/* The verifier's last lines, as ktel_verifier_tail() keeps them. */
#define KTEL_VERIFIER_TAIL_MAX 400
/* Each program's verifier log buffer, written only if it is refused (its tail kept). */
#define KTEL_VERIFIER_LOG_SIZE (256 * 1024)

/*
 * The last lines of a verifier log that say something (not blank, not the
 * "processed N insns" and "verification time" statistics), at most 3,
 * joined by " | ", into out; when longer than KTEL_VERIFIER_TAIL_MAX bytes
 * the front is cut on a UTF-8 character boundary and marked "...". Returns
 * the length written.
 */
size_t ktel_verifier_tail(const char *log, char *out, size_t len);

/*
 * Describe a libbpf error (negative or positive, libbpf's own codes >= 4000
 * included) into buf; return the positive errno to report for it (libbpf's
 * own codes become EINVAL).
 */
int ktel_libbpf_strerror(int err, char *buf, size_t len);

/*
 * Find the integer variable name in obj's .rodata (from its BTF DATASEC,
 * before or after load). Returns 0 and its byte offset and size (1, 2, 4 or
 * 8), or -ENOENT when there is no such variable of such a size.
 */
int ktel_bpf_rodata_var(const struct bpf_object *obj, const char *name, size_t *ret_offset,
			size_t *ret_size);

/*
 * Make sure pin_root can hold pins: when the nearest existing ancestor of
 * pin_root is not on bpffs and pin_root is under /sys/fs/bpf, mount bpffs
 * there if we are root, else fail with a message saying how to mount it;
 * then create the missing directories of pin_root and give pin_root mode
 * 0750 and group gid ((gid_t)-1: leave the group). Returns 0 or -errno.
 */
int ktel_bpffs_ensure(const char *pin_root, gid_t gid, struct ktel_err *err);

/*
 * Attribution settings of one metric's map (bpf/include/ktel_attr.h), set
 * before load: the .rodata globals <map>_attr_by, _attr_depth, _attr_limit,
 * and the map's max_entries raised by limit (the object's max_entries bounds
 * the other dimensions' combinations, each of which may need its overflow
 * key). A map whose size would pass memlock_budget bytes is refused.
 */
struct ktel_bpf_attr {
	const char *metric;   /* for messages */
	const char *map_name; /* the metric's map */
	uint32_t by;          /* enum ktel_attr_by; KTEL_ATTR_BY_NONE: nothing set */
	uint32_t depth;
	uint64_t limit;
	/* By cgroup: read the cgroup the kernel charges each bio to (bi_blkg)
	 * instead of the submitter's. The daemon sets it only where the io
	 * controller is on the cgroup v2 hierarchy (ktel_attr_io_on_v2()), so
	 * that a bio's cgroup is a v2 cgroup. The metric's programs flagged
	 * KTEL_ATTR_PROG_BLKCG are then not loaded for it, and its
	 * <map>_attr_blkcg is 1. Ignored for a metric that has no such
	 * programs. */
	bool blkcg;
};

/*
 * The memlock budget check of the load (a map whose size with attr's
 * max_keys would pass budget bytes is refused) from plugin's BPF object
 * alone, opened but not loaded: for --check-config. 0, -ENOSPC with err
 * naming the metric, or -errno when the object cannot be read.
 */
int ktel_bpf_attr_check_budget(const struct ktel_plugin *plugin, const struct ktel_bpf_attr *attr,
			       size_t n_attr, uint64_t budget, struct ktel_err *err);

/* Bytes a hash map of one entry takes besides its key and value (the
 * kernel's htab_elem and its bucket, rounded up), for the memlock budget. */
#define KTEL_BPF_HASH_ELEM_OVERHEAD 64

struct ktel_bpf_opts {
	const char *pin_root;               /* NULL: KTEL_PIN_ROOT_DEFAULT; must exist */
	gid_t pin_gid;                      /* group of new pins; (gid_t)-1: leave it */
	const struct ktel_targets *targets; /* the running kernel's; required */
	const int64_t *param_values;        /* desc.n_params values, NULL: defaults */
	bool no_attach;                     /* load and pin only */
	bool load_only;                     /* load only: no pin is reused or made,
				       * nothing attached (inspect's check) */
	const struct ktel_bpf_attr *attr;   /* n_attr metrics' attribution, or NULL */
	size_t n_attr;
	uint64_t attr_memlock_budget; /* bytes per attributed map; 0: no bound */
	bool no_task_storage;         /* act as on a kernel without task storage
				       * (its fallback variants are tested so) */
};

/* One program of the object. */
struct ktel_bpf_prog {
	const char *name;    /* function name */
	const char *section; /* ELF section, e.g. "tp_btf/mm_compaction_begin" */
	struct bpf_program *prog;
	bool selected; /* loaded (its target exists and it won its group) */
	/* Not needed by this load: only an attributed metric needs it
	 * (desc.attr_progs) and none of its metrics is, or each that is reads
	 * the bio's cgroup instead (KTEL_ATTR_PROG_BLKCG, ktel_bpf_attr.blkcg). */
	bool unneeded;
	char skip_reason[KTEL_TARGET_REASON_MAX]; /* why not selected */
	int nr_args;                              /* of its target, -1 unknown */
	uint32_t prog_id;                         /* kernel id once loaded */
	struct bpf_link *link;                    /* non-NULL while attached */
	bool attached;
	char attach_error[KTEL_LIFECYCLE_MSG_MAX]; /* last attach failure, or "" */
	/* When the kernel refused to load it: the verifier's last lines. */
	char verifier_log[KTEL_VERIFIER_TAIL_MAX + 8];
};

enum ktel_bpf_map_role {
	KTEL_MAP_METRIC = 0, /* a metric's map_name */
	KTEL_MAP_LABEL = 1,  /* a dimension's label_map */
	KTEL_MAP_LOST = 2,   /* a stream metric's lost_map */
};

/* One map a metric names. */
struct ktel_bpf_map {
	const char *name;      /* BPF map name, as the descriptor spells it */
	const char *metric;    /* name of the first metric naming it */
	uint32_t metric_index; /* its index in desc.metrics */
	enum ktel_bpf_map_role role;
	struct bpf_map *map;
	int fd;                            /* owned by the bpf_object */
	uint32_t map_id;                   /* kernel id */
	bool pinned;                       /* kept at pin_path */
	bool reused;                       /* an existing compatible pin was reused */
	bool replace_pin;                  /* an incompatible pin is at pin_path: it is
				   * removed only once the object has loaded */
	char pin_path[PATH_MAX];           /* "" when not pinned */
	char note[KTEL_LIFECYCLE_MSG_MAX]; /* "replaced incompatible pin: ..." or "" */
};

/* One variant group of the descriptor (desc.variants), in table order. */
struct ktel_bpf_group {
	const char *name;             /* as the descriptor spells it */
	struct ktel_bpf_prog *winner; /* the variant loaded for it; NULL when none
				       * (the plugin is then unsupported) */
};

enum ktel_bpf_group_state {
	KTEL_GROUP_UNUSABLE = 0,      /* no variant runs here: see unsupported_reason */
	KTEL_GROUP_LOADED = 1,        /* winner loaded, detached */
	KTEL_GROUP_ATTACHED = 2,      /* winner attached */
	KTEL_GROUP_ATTACH_FAILED = 3, /* winner's last attach failed: its attach_error */
};

struct ktel_bpf_plugin {
	const struct ktel_plugin *plugin;
	struct bpf_object *obj;
	bool unsupported; /* some hook cannot run on this kernel: nothing loaded */
	char unsupported_reason[KTEL_ERR_MSG_MAX]; /* shown as "unsupported: <reason>" */
	struct ktel_bpf_prog *progs;
	size_t n_progs;
	struct ktel_bpf_group *groups;
	size_t n_groups;
	struct ktel_bpf_map *maps;
	size_t n_maps;
	bool no_task_storage; /* from ktel_bpf_opts */
};

/*
 * Open plugin's BPF object (named after the plugin), set its .rodata params,
 * choose programs with ktel_targets__choose() (unchosen ones do not load),
 * reuse compatible pins, load, attach every selected program one by one,
 * then replace incompatible pins and pin new maps (mode 0640, group
 * pin_gid). With opts->no_attach each program is detached again right after
 * its attach succeeded: the attach is only tried, so that a variant which
 * loads but cannot attach is found while falling back is still possible.
 *
 * A selected program the kernel refuses to load or to attach is excluded
 * and the object is loaded again, so its variant group falls back to the
 * next variant. When a variant group has no usable variant left, or a
 * program in no group cannot run, the plugin is returned with unsupported
 * set and the reason, nothing loaded, attached or pinned: that is not an
 * error. Returns 0 and the new state in *ret, or -errno with err naming the
 * plugin (open, param, load or pin failures; a pin failure removes the pins
 * this call made).
 */
int ktel_bpf_plugin__load(const struct ktel_plugin *plugin, const struct ktel_bpf_opts *opts,
			  struct ktel_bpf_plugin **ret, struct ktel_err *err);

/*
 * Would plugins a and b pin a map at the same path? Pins are named
 * "map_<plugin>_<map>" under one pin root, for the metric map of every
 * accumulator metric and every label map; so two plugins of one name always
 * collide, and "a_b" with map "c" collides with "a" with map "b_c". Decided
 * from the descriptors alone, before anything is loaded. Returns true and
 * the colliding pin's name in buf when they would.
 */
bool ktel_bpf_pins_collide(const struct ktel_plugin *a, const struct ktel_plugin *b, char *buf,
			   size_t len);

/*
 * Find a program or map by name; NULL when absent. Use this rather than
 * bpf_object__find_map_by_name(): libbpf 1.1 renames a reused map to the
 * kernel's truncated name.
 */
struct ktel_bpf_prog *ktel_bpf_plugin__prog(struct ktel_bpf_plugin *p, const char *name);
struct ktel_bpf_map *ktel_bpf_plugin__map(struct ktel_bpf_plugin *p, const char *name);

/*
 * Attach one selected program (no-op when attached). Returns 0, -ENOENT
 * when no such program, -EINVAL when it was not loaded, or the attach error,
 * also kept in attach_error.
 */
int ktel_bpf_plugin__attach_prog(struct ktel_bpf_plugin *p, const char *name, struct ktel_err *err);

/* State of a group of p, from its winner. */
enum ktel_bpf_group_state ktel_bpf_plugin__group_state(const struct ktel_bpf_group *g);

/*
 * Is metric md of p complete: is every hook it needs attached? md needs each
 * variant group with a program md uses (md->programs; all when NULL) and
 * each program in no group it uses. Returns 0, or -ENODEV with err naming
 * the metric, the first hook that is not attached and why. A daemon must not
 * call a metric collecting unless this returns 0.
 */
int ktel_bpf_plugin__metric_complete(const struct ktel_bpf_plugin *p,
				     const struct ktel_metric_desc *md, struct ktel_err *err);

/* Detach one program (no-op when detached). Returns 0 or -ENOENT. */
int ktel_bpf_plugin__detach_prog(struct ktel_bpf_plugin *p, const char *name);

/* Attach every selected, detached program; returns how many are attached. */
size_t ktel_bpf_plugin__attach_all(struct ktel_bpf_plugin *p);

/* Detach every program. */
void ktel_bpf_plugin__detach_all(struct ktel_bpf_plugin *p);

/*
 * Remove this plugin's pins (for "reset" and for tests); the maps live on
 * while the object holds them. Returns 0 or the first unlink error.
 */
int ktel_bpf_plugin__unpin(struct ktel_bpf_plugin *p, struct ktel_err *err);

/* Detach everything, close the object; pins stay. Accepts NULL. */
void ktel_bpf_plugin__free(struct ktel_bpf_plugin *p);

/* Is kernel.bpf_stats_enabled on (programs' run_time_ns/run_cnt counted)? */
bool ktel_bpf_stats_enabled(void);

/*
 * Turn the kernel's run-time statistics on for as long as the returned file
 * descriptor stays open (BPF_ENABLE_STATS, needs CAP_SYS_ADMIN). The sysctl
 * kernel.bpf_stats_enabled does not show it: it reads what was last written
 * to it. Returns the descriptor or -errno with err saying why.
 */
int ktel_bpf_stats_hold(struct ktel_err *err);

/* What the kernel counts for one loaded program (struct bpf_prog_info). */
struct ktel_bpf_prog_stats {
	uint64_t run_cnt;          /* runs, counted only while bpf_stats is on */
	uint64_t run_time_ns;      /* the program body's time in those runs (not the
			       * dispatch to it), likewise */
	uint64_t recursion_misses; /* runs skipped: already running on that CPU */
	uint64_t load_time_ns;     /* when it was loaded, CLOCK_BOOTTIME */
};

/*
 * Read p's counters from the kernel. Returns 0 and *ret, -EINVAL when p is
 * not loaded, or the -errno of the kernel's answer.
 */
int ktel_bpf_prog__stats(const struct ktel_bpf_prog *p, struct ktel_bpf_prog_stats *ret);

#endif /* KTEL_BPF_LIFECYCLE_H */
