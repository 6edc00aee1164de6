/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Per-device configuration: one JSON document, validated strictly
 * against a table of keys (config_schema[] in config.c) that is also the source
 * of docs/config.md (`ktelemetryd --config-doc`), so the two cannot drift.
 *
 * Validation reports every error of a file in one pass, each naming the JSON
 * path and the expected form or the rule broken (callers put the file name
 * before each message):
 *   sinks.statsd.port: expected integer 1..65535, got "abc"
 *   interval: must be between 100ms and 365d, got "50ms"
 *   sinks.s.host: not allowed with socket (choose UDP or a unix socket)
 *   sinks.j: duplicate key
 * A config is either wholly valid or rejected: callers never see half a model.
 */
#ifndef KTEL_CONFIG_H
#define KTEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>
#include <ktelemetry/plugin.h>

#include "error.h"

/* Defaults of metrics.<name>.attribution (the schema's default texts). */
#define KTEL_ATTR_TOP_DEFAULT 20
#define KTEL_ATTR_TOP_DEFAULT_ANDROID 10
#define KTEL_ATTR_MAX_KEYS_DEFAULT 1024
#define KTEL_ATTR_STICKY_DEFAULT 10
#define KTEL_ATTR_MEMLOCK_BUDGET_DEFAULT (64ULL << 20)

/* metrics.<name>.attribution.block_subject: whose block I/O it is. */
enum ktel_attr_subject {
	KTEL_ATTR_SUBJECT_AUTO = 0,      /* charged where io is enabled below the v2 root */
	KTEL_ATTR_SUBJECT_SUBMITTER = 1, /* the submitting task (submit programs) */
	KTEL_ATTR_SUBJECT_CHARGED = 2,   /* the cgroup the kernel charges (bio->bi_blkg) */
};

/* metrics.<name>.attribution. */
struct ktel_attr_cfg {
	enum ktel_attr_by by; /* KTEL_ATTR_BY_NONE: off */
	enum ktel_attr_subject block_subject;
	uint32_t depth;
	uint32_t top;            /* K */
	uint32_t max_keys;       /* attributed keys the kernel admits */
	uint32_t sticky_windows; /* W */
	uint32_t churn_per_hour;
	bool allow_per_app_export;     /* `app` to a sink other than Android's statsd */
	bool allow_identifying_export; /* `process`, `cgroup`, `user` on an Android config */
};

/* "none", "cgroup", "user", "app", "process", "app_class": the config's and
 * the records' name of by. */
const char *ktel_attr_by_name(enum ktel_attr_by by);

/* "auto", "submitter", "charged": the config's name of subject. */
const char *ktel_attr_subject_name(enum ktel_attr_subject subject);

struct ktel_metric_cfg {
	char *name;
	bool enabled;
	uint64_t interval_ms;
	bool emit_zero;
	uint64_t lease_ms; /* 0: no lease; else disable again after this long */
	char **sinks;      /* NULL: every sink */
	size_t n_sinks;
	json_t *params; /* plugin run-time settings (BPF .rodata), or NULL */
	struct ktel_attr_cfg attr;
};

struct ktel_sink_cfg {
	char *name;
	char *type;
	json_t *options; /* the whole sink object, "type" included */
};

struct ktel_config {
	char *source; /* file path, or "<embedded default>" */
	char **plugin_dirs;
	size_t n_plugin_dirs;
	char *pin_root;
	gid_t pin_gid;
	char *state_file;
	char *control_socket;
	gid_t control_gid;
	uint64_t interval_ms; /* default pull interval */
	bool emit_zero;       /* default zero-delta policy */
	bool enable_new_plugins;
	bool drop_privileges; /* after start keep only the capabilities still needed */
	uint64_t sink_close_timeout_ms;
	uint64_t attr_memlock_budget;   /* bytes, per attributed metric's map */
	uint64_t attr_release_after_ms; /* a removed, quiet cgroup counts as released */
	bool self_enabled;
	uint64_t self_interval_ms;
	bool self_bpf_stats; /* hold BPF_ENABLE_STATS while running */
	char **self_sinks;
	size_t n_self_sinks;
	struct ktel_metric_cfg *metrics;
	size_t n_metrics;
	struct ktel_sink_cfg *sinks;
	size_t n_sinks;
};

/* Every validation error of one document, in document order, and, when the
 * caller sets want_warnings (and then always clears errs), the warnings of a
 * document that is valid (the caller logs them). */
struct ktel_config_errors {
	char **msgs;
	size_t n;
	bool want_warnings;
	char **warnings;
	size_t n_warnings;
};

/* Values substituted into strings: "${plugin_dir}" and "${build_dir}". */
struct ktel_config_vars {
	const char *plugin_dir;
	const char *state_dir;
	const char *run_dir; /* run-time files: the control socket */
};

/*
 * Parse and validate a document. On success *ret is a complete model. On
 * failure returns -EINVAL with every error in errs (the caller frees it with
 * ktel_config_errors__clear), or another -errno for I/O with err set.
 */
int ktel_config__load_file(const char *path, const struct ktel_config_vars *vars,
			   struct ktel_config **ret, struct ktel_config_errors *errs,
			   struct ktel_err *err);
int ktel_config__load_string(const char *text, const char *source,
			     const struct ktel_config_vars *vars, struct ktel_config **ret,
			     struct ktel_config_errors *errs, struct ktel_err *err);
void ktel_config__free(struct ktel_config *cfg);
void ktel_config_errors__clear(struct ktel_config_errors *errs);
/* Append one message (bounded; beyond the bound messages are dropped). */
void ktel_config_errors__add(struct ktel_config_errors *errs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Metric names under "metrics" are checked against what is known (design in
 * docs/config.md, "Metric names"): the metrics of ktelemetry's own plugins,
 * the names set here (the metrics of the plugins a running daemon loaded;
 * NULL, 0 for none; the array must outlive the loads that use it), and a
 * plugin file "<name>.so" in one of plugin_dirs.
 */
void ktel_config_set_installed_metrics(const char *const *names, size_t n);

/* The built-in metric closest to name within a typo's distance, or NULL. */
const char *ktel_config_closest_metric(const char *name);

/* The settings for a metric, or NULL when the config does not name it. */
const struct ktel_metric_cfg *ktel_config__metric(const struct ktel_config *cfg, const char *name);

/* Is the metric enabled: its own setting, else enable_new_plugins. */
bool ktel_config__metric_enabled(const struct ktel_config *cfg, const char *name);

/* Pull interval of a metric: its own, else the default. */
uint64_t ktel_config__metric_interval(const struct ktel_config *cfg, const char *name);

/* "10s", "250ms", "2m", "24h", "1d" -> milliseconds. */
int ktel_parse_duration(const char *text, uint64_t *ret_ms);
/* "512", "64KiB", "10MiB", "1GiB", "10MB" -> bytes. */
int ktel_parse_size(const char *text, uint64_t *ret_bytes);

/* Write the reference of every key (Markdown) generated from the schema. */
int ktel_config__write_doc(FILE *out);

/*
 * Sink option schemas are owned by the sinks; sink types register the keys
 * they accept so validation reports unknown or mistyped options with the rest.
 */
enum ktel_cfg_type {
	KTEL_CFG_STRING = 1,
	KTEL_CFG_BOOL,
	KTEL_CFG_INT,
	KTEL_CFG_DURATION,
	KTEL_CFG_SIZE,
	KTEL_CFG_STRING_ARRAY,
	KTEL_CFG_GROUP,      /* group name or numeric gid */
	KTEL_CFG_OBJECT,     /* nested keys in .children */
	KTEL_CFG_MAP,        /* object of user-named objects, each per .children */
	KTEL_CFG_INT_MAP,    /* object of integers under free-form names */
	KTEL_CFG_ENUM,       /* string out of .choices */
	KTEL_CFG_STRING_MAP, /* object of strings under free-form names */
};

/*
 * A key whose default_text is this must be present: the docs show it and the
 * validator enforces it from the same field, so the two cannot disagree.
 */
#define KTEL_CFG_REQUIRED "(required)"

struct ktel_cfg_key {
	const char *name;
	enum ktel_cfg_type type;
	int64_t min, max;                    /* KTEL_CFG_INT, DURATION(ms), SIZE; both 0: any */
	const char *const *choices;          /* KTEL_CFG_ENUM, NULL-terminated */
	const struct ktel_cfg_key *children; /* OBJECT / MAP, {NULL}-terminated */
	const char *default_text;            /* for the docs */
	const char *doc;
};

/* Sink-type option tables: {type, keys} pairs, NULL-terminated; set by the
 * daemon from the sink registry before loading configs. */
struct ktel_cfg_sink_schema {
	const char *type;
	const struct ktel_cfg_key *keys;
};
void ktel_config_set_sink_schemas(const struct ktel_cfg_sink_schema *schemas);

/*
 * Check an object of options (a sink's) against keys, with the messages
 * --check-config gives: unknown keys, types, ranges, required keys, and the
 * relations between keys of the sink type whose table keys is ("type" is
 * skipped).
 * path prefixes the messages ("sinks.out"). 0, or -EINVAL with the first
 * error in err.
 */
int ktel_config_check_options(const json_t *obj, const struct ktel_cfg_key *keys, const char *path,
			      struct ktel_err *err);

/*
 * Typed reads of an option already checked against its key table: the value
 * of key in obj, or def when it is absent (or, unchecked, malformed).
 */
const char *ktel_cfg_string(const json_t *obj, const char *key, const char *def);
bool ktel_cfg_bool(const json_t *obj, const char *key, bool def);
int64_t ktel_cfg_int(const json_t *obj, const char *key, int64_t def);
uint64_t ktel_cfg_duration(const json_t *obj, const char *key, uint64_t def_ms);
uint64_t ktel_cfg_size(const json_t *obj, const char *key, uint64_t def);
gid_t ktel_cfg_group(const json_t *obj, const char *key, gid_t def);

/*
 * The names a rotating file sink moves its file to: "<path>.<k><ext>", k in
 * 1..keep, ext each of ktel_rotated_exts (NULL-terminated: the plain file,
 * its .gz and the .gz.tmp it is compressed through). The JSON sink names its
 * rotated files with ktel_rotated_name(), and the config's path check
 * refuses another path (the state file, a socket, another sink's file)
 * among them. 0, or -ENAMETOOLONG when buf is too small.
 */
extern const char *const ktel_rotated_exts[];
int ktel_rotated_name(char *buf, size_t size, const char *path, unsigned k, const char *ext);

#endif /* KTEL_CONFIG_H */
