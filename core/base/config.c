// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Config validation and model. The schema table below is the single source
 * of truth: the validator walks it, and docs/config.md is generated from it.
 */
#include "config.h"
#include "fsutil.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CONFIG_ERRORS 200
#define DAY_MS (24ULL * 3600 * 1000)

/*
 * Bounds on the strings a config hands to libraries (NSS, the resolver,
 * open(2), bind(2)): a value of a few MiB must be refused here, not passed
 * on (getgrnam_r aborted on a 4 MiB group name). Every string is at most a
 * path long; keys with a tighter bound name it in a rule (RULE_MAX_LEN,
 * RULE_HOSTNAME, RULE_UNIX_PATH) or in their type (KTEL_CFG_GROUP).
 */
#define MAX_STRING_LEN (PATH_MAX - 1)      /* any string, paths included */
#define MAX_GROUP_LEN (LOGIN_NAME_MAX - 1) /* group names, as glibc bounds logins */
#define MAX_NAME_LEN 255                   /* a member name: metric, sink, param */
#define MAX_HOST_LEN 253                   /* a DNS name (RFC 1035) */
#define MAX_UNIX_LEN (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

static const char *const attr_by_choices[] = {"none",    "cgroup",    "user", "app",
					      "process", "app_class", NULL};
static const char *const attr_subject_choices[] = {"auto", "submitter", "charged", NULL};

/* Attribution of one metric (docs/architecture.md, "Attribution"). */
static const struct ktel_cfg_key attr_keys[] = {
	{"by", KTEL_CFG_ENUM, .choices = attr_by_choices, .default_text = "none",
	 .doc = "Who the metric's events are attributed to: `cgroup` (v2 id, named by its path), "
		"`user` (uid, named by the user name), `app` (Android app id, or the class of a "
		"uid that is no app), `app_class` (the Android class alone: `system`, `app`, "
		"`sdk_sandbox`, `isolated`, ...), `process` (tgid); `none` leaves the dimension "
		"out. Only metrics whose plugin declares an attribution dimension accept it. "
		"Block I/O by `cgroup` is the cgroup the kernel charges or the submitter's: "
		"`block_subject` chooses. "
		"What may leave an Android device is restricted (docs/privacy.md)."},
	{"block_subject", KTEL_CFG_ENUM, .choices = attr_subject_choices, .default_text = "auto",
	 .doc = "Whose block I/O it is, for a metric by `cgroup` of a plugin that can read a "
		"bio's cgroup (block_io_latency): `charged` is the cgroup the kernel charges the "
		"I/O to (io.stat's: the nearest at or above the submitter's with `io` enabled, "
		"for writeback the dirty pages' owner), `submitter` the submitting task's own "
		"cgroup (for writeback the flusher's, a kworker in the root), `auto` `charged` "
		"where the io controller is enabled below the cgroup v2 root and `submitter` "
		"elsewhere. `charged` needs `by: cgroup` (other kinds have no charged form) and "
		"the io controller on cgroup v2: where it is on a v1 hierarchy, whose ids name no "
		"v2 cgroup, the daemon leaves the metric unattributed and logs why. A metric whose "
		"plugin has no such programs keeps its one subject whatever is set (a note in the "
		"log at load; `--check-config` warns for a built-in one). Where the "
		"depth asks for cgroups below the levels that enable `io`, `charged` is coarser "
		"than asked: the daemon logs it at load (docs/architecture.md, Attribution)."},
	{"depth", KTEL_CFG_INT, 0, 255, .default_text = "0",
	 .doc = "`cgroup`: roll each task's cgroup up to its ancestor at this level (root is 0, "
		"`system.slice` 1); 0 keeps the task's own cgroup."},
	{"top", KTEL_CFG_INT, 1, 1000, .default_text = "20; 10 on an Android config",
	 .doc = "Names exported per window (K), ranked by event count; the rest go to `other`, "
		"unresolvable ids to `unknown`: at most K + 2 values."},
	{"max_keys", KTEL_CFG_INT, 1, 1048576, .default_text = "1024",
	 .doc = "Attributed keys the kernel admits into the metric's map; events of new keys past "
		"it are counted under `other` (stage `kernel`), never lost. The map grows by this "
		"many entries, within `attribution_memlock_budget`."},
	{"sticky_windows", KTEL_CFG_INT, 1, 100000, .default_text = "10",
	 .doc = "A name admitted to the top K stays while it had events in this many last "
		"windows, so cumulative series do not flap."},
	{"churn_per_hour", KTEL_CFG_INT, 0, 1000000, .default_text = "4 × top",
	 .doc = "New names admitted to the top K per hour at most (a token bucket); past it "
		"newcomers stay in `other`."},
	{"allow_per_app_export", KTEL_CFG_BOOL, .default_text = "false",
	 .doc = "Let `by: app` go to sinks other than the Android statsd sink (`format: "
		"android`), which otherwise refuse it at `--check-config` (docs/privacy.md)."},
	{"allow_identifying_export", KTEL_CFG_BOOL, .default_text = "false",
	 .doc = "On an Android config (one with a statsd sink of `format: android`): allow "
		"`by` `process`, `cgroup` or `user`, refused otherwise, as pids, Android's "
		"per-uid and per-pid cgroups and uids name apps and processes "
		"(docs/privacy.md)."},
	{NULL},
};

static const struct ktel_cfg_key metric_keys[] = {
	{"enabled", KTEL_CFG_BOOL, .default_text = "enable_new_plugins",
	 .doc = "Load and attach the metric's programs and pull it."},
	{"interval", KTEL_CFG_DURATION, 100, 365 * DAY_MS, .default_text = "interval",
	 .doc = "Pull interval of this metric."},
	{"sinks", KTEL_CFG_STRING_ARRAY, .default_text = "every sink",
	 .doc = "Names of the sinks this metric's records go to."},
	{"emit_zero", KTEL_CFG_BOOL, .default_text = "emit_zero",
	 .doc = "Emit records whose delta is all zero."},
	{"lease", KTEL_CFG_DURATION, 1000, 365 * DAY_MS, .default_text = "none",
	 .doc = "Disable the metric again this long after it was enabled."},
	{"params", KTEL_CFG_INT_MAP, .default_text = "the plugin's defaults",
	 .doc = "Run-time settings of the plugin's BPF programs (integers), by name; "
		"`ktelemetryctl inspect` lists them."},
	{"attribution", KTEL_CFG_OBJECT, .children = attr_keys,
	 .default_text = "{\"by\": \"none\"}",
	 .doc = "Attribute the metric's events to cgroups, users, apps or processes, bounded to "
		"the top K names plus `other` and `unknown` (docs/architecture.md, Attribution)."},
	{NULL},
};

static const struct ktel_cfg_key self_keys[] = {
	{"enabled", KTEL_CFG_BOOL, .default_text = "true",
	 .doc = "Emit the daemon's own telemetry (pull cost, sink counters, drops)."},
	{"interval", KTEL_CFG_DURATION, 1000, 365 * DAY_MS, .default_text = "60s",
	 .doc = "How often self-telemetry records are emitted."},
	{"sinks", KTEL_CFG_STRING_ARRAY, .default_text = "every sink",
	 .doc = "Sinks that receive self-telemetry."},
	{"bpf_stats", KTEL_CFG_BOOL, .default_text = "false",
	 .doc = "Turn the kernel's BPF run-time statistics on while the daemon runs "
		"(BPF_ENABLE_STATS; off again when it exits, even by a crash), so that status "
		"and self-telemetry show each program's run count and time. They cost every BPF "
		"program on the host, not only the daemon's, two clock reads per run: leave it "
		"off except to measure, or set kernel.bpf_stats_enabled instead. Read at start "
		"only."},
	{NULL},
};

static const char *const sink_type_names_default[] = {"json", NULL};
static const char *const *sink_type_names = sink_type_names_default;
static const struct ktel_cfg_sink_schema *sink_schemas;

/* Filled in at run time with the registered sink types. */
static struct ktel_cfg_key sink_common_keys[] = {
	{"type", KTEL_CFG_ENUM, .default_text = KTEL_CFG_REQUIRED,
	 .doc = "Sink type; the other keys of the sink depend on it (docs/sinks.md)."},
	{NULL},
};

static const struct ktel_cfg_key top_keys[] = {
	{"plugin_dirs", KTEL_CFG_STRING_ARRAY, .default_text = "[\"${plugin_dir}\"]",
	 .doc = "Directories searched for `*.so` metric plugins, in order. Each must exist "
		"and be readable: `--check-config` and the start refuse one that is not (the "
		"daemon does not create it). Every file and parent directory must be "
		"root-owned and not group/world-writable."},
	{"pin_root", KTEL_CFG_STRING, .default_text = "/sys/fs/bpf/kernelstats",
	 .doc = "bpffs directory where accumulator maps are pinned as map_<object>_<map>; below the mount point, not the mount point itself."},
	{"pin_group", KTEL_CFG_GROUP, .default_text = "root",
	 .doc = "Group owning the pin directory (0750) and pinned maps (0640)."},
	{"state_file", KTEL_CFG_STRING, .default_text = "/var/lib/ktelemetry/state.bin",
	 .doc = "Delta engine state, written atomically after each pull that changed it, once the durable sinks (a JSON sink on a file) have made that pull's records durable (docs/sinks.md, Delivery guarantees). Missing directories above it are created (mode 0750)."},
	{"control_socket", KTEL_CFG_STRING, .default_text = "/run/ktelemetry/control.sock",
	 .doc = "Unix stream socket ktelemetryctl talks to (mode 0660). Missing directories above it are created (mode 0750)."},
	{"control_group", KTEL_CFG_GROUP, .default_text = "root",
	 .doc = "Group allowed on the control socket besides root."},
	{"interval", KTEL_CFG_DURATION, 100, 365 * DAY_MS, .default_text = "60s",
	 .doc = "Default pull interval of every metric."},
	{"emit_zero", KTEL_CFG_BOOL, .default_text = "false",
	 .doc = "Default zero-delta policy: emit records whose delta is all zero."},
	{"enable_new_plugins", KTEL_CFG_BOOL, .default_text = "true",
	 .doc = "Enable metrics the config does not name, including plugins dropped in "
		"while the daemon runs."},
	{"drop_privileges", KTEL_CFG_BOOL, .default_text = "false",
	 .doc = "Once started, drop every thread to the capabilities run-time work needs "
		"and a reload may need (CAP_BPF, CAP_PERFMON, CAP_CHOWN; docs/privileges.md). "
		"Read at start only."},
	{"attribution_memlock_budget", KTEL_CFG_SIZE, 4096, 1LL << 40, .default_text = "64MiB",
	 .doc = "Largest kernel memory one attributed metric's map may take (entries × (key + "
		"value + 64 bytes)); a `max_keys` that needs more is refused at start, naming "
		"the metric."},
	{"attribution_release_after", KTEL_CFG_DURATION, 1000, 365 * DAY_MS, .default_text = "10m",
	 .doc = "The grace period of attribution's ageing. A removed cgroup whose release event "
		"has not come (or, where the kernel's cgroup events cannot be used, one no "
		"cgroupfs walk finds any more), and a user or app id, count as released after "
		"this long without events (a cgroup is released at its release event, a process "
		"id once its process is gone, both looked for four times per period): the id's "
		"kernel keys are deleted (the kernel admits new ids again), its name is dropped "
		"and, unless another id has its name (a restarted service), its series end "
		"(Prometheus stops exposing them, remote_write sends the staleness marker). Until "
		"then a removed cgroup's late events keep their name."},
	{"sink_close_timeout", KTEL_CFG_DURATION, 0, 600000, .default_text = "2s",
	 .doc = "On shutdown, how long sinks may take to flush."},
	{"metrics", KTEL_CFG_MAP, .children = metric_keys, .default_text = "{}",
	 .doc = "Per-metric settings, by metric name."},
	{"sinks", KTEL_CFG_MAP, .children = sink_common_keys,
	 .default_text = "{\"stdout\": {\"type\": \"json\", \"path\": \"-\"}}",
	 .doc = "Sink instances, by name."},
	{"self_telemetry", KTEL_CFG_OBJECT, .children = self_keys, .default_text = "{}",
	 .doc = "The daemon's own telemetry."},
	{NULL},
};

void ktel_config_set_sink_schemas(const struct ktel_cfg_sink_schema *schemas)
{
	static const char *names[32];
	size_t n = 0;

	sink_schemas = schemas;
	for (size_t i = 0; schemas && schemas[i].type && n + 1 < 32; i++)
		names[n++] = schemas[i].type;
	names[n] = NULL;
	sink_type_names = names;
}

static const struct ktel_cfg_key *sink_keys_for(const char *type)
{
	for (size_t i = 0; sink_schemas && sink_schemas[i].type; i++)
		if (strcmp(sink_schemas[i].type, type) == 0)
			return sink_schemas[i].keys;
	return NULL;
}

/* ---- relations between a sink's options ------------------------------- */

/*
 * What one key's entry cannot state: how keys of a sink constrain each
 * other, and string forms beyond "non-empty". Each sink checks these again
 * when it opens (sinks/<type>/<type>_sink.c); they are mirrored here, as
 * tables, so that --check-config refuses what the sink would refuse, naming
 * the file, the key and the rule, and docs/config.md lists them.
 */
enum rule_kind {
	RULE_REQUIRES = 1, /* key set: every one of .others must be set too */
	RULE_EXCLUDES,     /* key set (to .equals, if given): none of .others may be */
	RULE_NOT_BELOW,    /* key's value (else its default) >= .others[0]'s */
	RULE_IP_LITERAL,   /* key, when set, is an IPv4 or IPv6 address literal */
	RULE_UNIX_PATH,    /* key, when set, fits in a unix socket address */
	RULE_URL_PATH,     /* key, when set, starts with '/' */
	RULE_MAX_LEN,      /* key, when set, is at most .max bytes long */
	RULE_HOSTNAME,     /* key, when set, is a host name or address literal */
	RULE_HTTP_URL,     /* key, when set, is an http:// or https:// URL with a host */
	RULE_HTTP_HEADERS, /* key's members are HTTP header names and values */
	RULE_LABEL_NAMES,  /* key's members are Prometheus label names a user may set */
};

struct cfg_rule {
	enum rule_kind kind;
	const char *key;
	const char *const *others; /* NULL-terminated */
	const char *equals;        /* RULE_EXCLUDES: only when key is this string */
	const char *why;           /* the reason, in the message and the docs */
	size_t max;                /* RULE_MAX_LEN */
};

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* sinks/json/json_sink.c parse_opts() */
static const struct cfg_rule json_rules[] = {
	{.kind = RULE_EXCLUDES,
	 .key = "path",
	 .equals = "-",
	 .others = KEYS("rotate_bytes", "keep", "compress"),
	 .why = "rotation needs a file path, not \"-\""},
	{.kind = RULE_REQUIRES,
	 .key = "keep",
	 .others = KEYS("rotate_bytes"),
	 .why = "keep and compress apply to rotation"},
	{.kind = RULE_REQUIRES,
	 .key = "compress",
	 .others = KEYS("rotate_bytes"),
	 .why = "keep and compress apply to rotation"},
	{0},
};

/* sinks/statsd/statsd_sink.c check_combinations(), parse_options() */
static const struct cfg_rule statsd_rules[] = {
	{.kind = RULE_EXCLUDES,
	 .key = "socket",
	 .others = KEYS("host", "port"),
	 .why = "choose UDP or a unix socket"},
	{.kind = RULE_EXCLUDES,
	 .key = "format",
	 .equals = "android",
	 .others = KEYS("host", "port"),
	 .why = "it writes to a unix socket; set socket"},
	{.kind = RULE_EXCLUDES,
	 .key = "format",
	 .equals = "android",
	 .others = KEYS("tags", "prefix", "max_packet"),
	 .why = "applies to format \"statsd\" only"},
	{.kind = RULE_UNIX_PATH, .key = "socket"},
	{.kind = RULE_HOSTNAME, .key = "host"},
	{.kind = RULE_MAX_LEN, .key = "prefix", .max = 255, .why = "a metric name prefix"},
	{.kind = RULE_NOT_BELOW, .key = "reconnect_max", .others = KEYS("reconnect_min")},
	{.kind = RULE_NOT_BELOW,
	 .key = "max_queue",
	 .others = KEYS("max_packet"),
	 .why = "it must hold one datagram"},
	{0},
};

/* sinks/prometheus/prometheus_sink.c check_opts(), start_server() */
static const struct cfg_rule prometheus_rules[] = {
	{.kind = RULE_IP_LITERAL, .key = "listen"},
	{.kind = RULE_URL_PATH, .key = "path"},
	{.kind = RULE_MAX_LEN, .key = "path", .max = 1024, .why = "a URL path"},
	{.kind = RULE_MAX_LEN, .key = "prefix", .max = 255, .why = "a metric name prefix"},
	{.kind = RULE_LABEL_NAMES, .key = "labels"},
	{0},
};

/* sinks/stream/stream_sink.c parse_opts(), bind_socket() */
static const struct cfg_rule stream_rules[] = {
	{.kind = RULE_UNIX_PATH, .key = "socket"},
	{.kind = RULE_NOT_BELOW, .key = "ring_records", .others = KEYS("backlog_records")},
	{0},
};

/* sinks/remote_write/remote_write_sink.c parse_opts(), headers_setup() */
static const struct cfg_rule remote_write_rules[] = {
	{.kind = RULE_HTTP_URL, .key = "url"},
	{.kind = RULE_HTTP_HEADERS, .key = "headers"},
	{.kind = RULE_LABEL_NAMES, .key = "labels"},
	{.kind = RULE_MAX_LEN, .key = "prefix", .max = 255, .why = "a metric name prefix"},
	{0},
};

static const struct {
	const char *type;
	const struct cfg_rule *rules;
} sink_rules[] = {
	{"json", json_rules},
	{"statsd", statsd_rules},
	{"prometheus", prometheus_rules},
	{"stream", stream_rules},
	{"remote_write", remote_write_rules},
};

static const struct cfg_rule *rules_for_type(const char *type)
{
	for (size_t i = 0; i < sizeof(sink_rules) / sizeof(sink_rules[0]); i++)
		if (strcmp(sink_rules[i].type, type) == 0)
			return sink_rules[i].rules;
	return NULL;
}

/* The rules of the sink type whose option table keys is, or NULL. */
static const struct cfg_rule *rules_for_keys(const struct ktel_cfg_key *keys)
{
	for (size_t i = 0; keys && sink_schemas && sink_schemas[i].type; i++)
		if (sink_schemas[i].keys == keys)
			return rules_for_type(sink_schemas[i].type);
	return NULL;
}

/* ---- errors ---------------------------------------------------------- */

static void add_vmsg(char ***msgs, size_t *n, const char *fmt, va_list ap)
{
	char **grown;
	char *msg;

	if (*n >= MAX_CONFIG_ERRORS)
		return;
	if (vasprintf(&msg, fmt, ap) < 0)
		return;
	grown = realloc(*msgs, (*n + 1) * sizeof(*grown));
	if (!grown) {
		free(msg);
		return;
	}
	*msgs = grown;
	(*msgs)[(*n)++] = msg;
}

static void add_verror(struct ktel_config_errors *errs, const char *fmt, va_list ap)
{
	add_vmsg(&errs->msgs, &errs->n, fmt, ap);
}

static void add_warning(struct ktel_config_errors *errs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add_warning(struct ktel_config_errors *errs, const char *fmt, ...)
{
	va_list ap;

	if (!errs->want_warnings)
		return;
	va_start(ap, fmt);
	add_vmsg(&errs->warnings, &errs->n_warnings, fmt, ap);
	va_end(ap);
}

void ktel_config_errors__add(struct ktel_config_errors *errs, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_verror(errs, fmt, ap);
	va_end(ap);
}

#define add_error ktel_config_errors__add

void ktel_config_errors__clear(struct ktel_config_errors *errs)
{
	if (!errs)
		return;
	for (size_t i = 0; i < errs->n; i++)
		free(errs->msgs[i]);
	free(errs->msgs);
	errs->msgs = NULL;
	errs->n = 0;
	for (size_t i = 0; i < errs->n_warnings; i++)
		free(errs->warnings[i]);
	free(errs->warnings);
	errs->warnings = NULL;
	errs->n_warnings = 0;
}

/* A short rendering of a JSON value for messages: "abc", 12, true, an object. */
static void describe(const json_t *v, char *buf, size_t len)
{
	char *dump;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		snprintf(buf, len, "an object");
		return;
	case JSON_ARRAY:
		snprintf(buf, len, "an array");
		return;
	default:
		dump = json_dumps(v, JSON_ENCODE_ANY);
		snprintf(buf, len, "%.60s", dump ? dump : "?");
		free(dump);
	}
}

/* ---- scalar parsers --------------------------------------------------- */

static int parse_scaled(const char *text, const char *const *units, const uint64_t *scale,
			uint64_t *ret)
{
	unsigned long long v;
	char *end;

	/* A digit first: strtoull would skip spaces and take a sign, so
	 * " -18446744073709551516ms" wrapped to 100ms. */
	if (!text || !isdigit((unsigned char)*text))
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text)
		return -EINVAL;
	for (size_t i = 0; units[i]; i++) {
		if (strcmp(end, units[i]) != 0)
			continue;
		if (scale[i] && v > UINT64_MAX / scale[i])
			return -ERANGE;
		*ret = v * scale[i];
		return 0;
	}
	return -EINVAL;
}

int ktel_parse_duration(const char *text, uint64_t *ret_ms)
{
	static const char *const units[] = {"ms", "s", "m", "h", "d", NULL};
	static const uint64_t scale[] = {1, 1000, 60000, 3600000, DAY_MS};

	return parse_scaled(text, units, scale, ret_ms);
}

int ktel_parse_size(const char *text, uint64_t *ret_bytes)
{
	/* K/M/G alone are binary, as in dd(1) and most daemons' configs. */
	static const char *const units[] = {"",   "B",  "KiB", "MiB", "GiB", "KB",
					    "MB", "GB", "K",   "M",   "G",   NULL};
	static const uint64_t scale[] = {1,          1,          1ULL << 10, 1ULL << 20,
					 1ULL << 30, 1000,       1000000,    1000000000,
					 1ULL << 10, 1ULL << 20, 1ULL << 30};

	return parse_scaled(text, units, scale, ret_bytes);
}

static int parse_group(const json_t *v, gid_t *ret)
{
	struct group gr, *res = NULL;
	char buf[4096];

	if (json_is_integer(v)) {
		json_int_t g = json_integer_value(v);

		if (g < 0 || g > INT_MAX)
			return -ERANGE;
		*ret = (gid_t)g;
		return 0;
	}
	if (!json_is_string(v) || !*json_string_value(v))
		return -EINVAL;
	/* Before NSS sees it: a name of a few MiB aborted inside getgrnam_r. */
	if (json_string_length(v) > MAX_GROUP_LEN)
		return -ENAMETOOLONG;
	{
		/* A numeric string is a gid, as in chown(1). */
		char *end;
		long long id;

		errno = 0;
		id = strtoll(json_string_value(v), &end, 10);
		if (!*end && !errno && id >= 0 && id <= INT_MAX) {
			*ret = (gid_t)id;
			return 0;
		}
	}
	if (getgrnam_r(json_string_value(v), &gr, buf, sizeof(buf), &res) != 0 || !res)
		return -ENOENT;
	*ret = res->gr_gid;
	return 0;
}

/* ---- validation ------------------------------------------------------- */

static const char *type_expectation(const struct ktel_cfg_key *k, char *buf, size_t len)
{
	switch (k->type) {
	case KTEL_CFG_STRING:
		return "non-empty string";
	case KTEL_CFG_BOOL:
		return "true or false";
	case KTEL_CFG_INT:
		snprintf(buf, len, "integer %lld..%lld", (long long)k->min, (long long)k->max);
		return buf;
	case KTEL_CFG_DURATION:
		return "duration string such as \"10s\", \"5m\", \"24h\"";
	case KTEL_CFG_SIZE:
		return "size such as \"512KiB\", \"10MiB\" or bytes";
	case KTEL_CFG_STRING_ARRAY:
		return "array of strings";
	case KTEL_CFG_GROUP:
		return "group name or numeric gid";
	case KTEL_CFG_OBJECT:
	case KTEL_CFG_MAP:
		return "object";
	case KTEL_CFG_INT_MAP:
		return "object of integers";
	case KTEL_CFG_STRING_MAP:
		return "object of strings";
	case KTEL_CFG_ENUM: {
		const char *const *c = k->choices ? k->choices : sink_type_names;
		size_t off = (size_t)snprintf(buf, len, "one of");

		for (size_t i = 0; c[i] && off < len; i++)
			off += (size_t)snprintf(buf + off, len - off, "%s \"%s\"", i ? "," : "",
						c[i]);
		return buf;
	}
	}
	return "?";
}

/* "path.name", or "name" at the top level. */
static void join_path(char *buf, size_t len, const char *path, const char *name)
{
	snprintf(buf, len, "%s%s%s", path, *path ? "." : "", name);
}

/*
 * A bound of a DURATION or SIZE key in the largest unit that states it
 * exactly, as the user would write it: 100 -> "100ms", 31536000000 -> "365d".
 */
static void format_bound(const struct ktel_cfg_key *k, uint64_t v, char *buf, size_t len)
{
	static const char *const dur_units[] = {"d", "h", "m", "s", "ms"};
	static const uint64_t dur_scale[] = {DAY_MS, 3600000, 60000, 1000, 1};
	static const char *const size_units[] = {"GiB", "MiB", "KiB", ""};
	static const uint64_t size_scale[] = {1ULL << 30, 1ULL << 20, 1ULL << 10, 1};
	bool dur = k->type == KTEL_CFG_DURATION;
	const char *const *units = dur ? dur_units : size_units;
	const uint64_t *scale = dur ? dur_scale : size_scale;
	size_t i = 0;

	while (scale[i] > 1 && (v == 0 || v % scale[i]))
		i++;
	snprintf(buf, len, "%llu%s", (unsigned long long)(v / scale[i]), units[i]);
}

/* The value of a DURATION (ms), SIZE (bytes) or non-negative INT: false when
 * v does not have the key's form. Ranges are not checked. */
static bool number_of(const struct ktel_cfg_key *k, const json_t *v, uint64_t *ret)
{
	switch (k->type) {
	case KTEL_CFG_INT:
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return false;
		*ret = (uint64_t)json_integer_value(v);
		return true;
	case KTEL_CFG_DURATION:
		return json_is_string(v) && ktel_parse_duration(json_string_value(v), ret) == 0;
	case KTEL_CFG_SIZE:
		if (json_is_integer(v) && json_integer_value(v) >= 0) {
			*ret = (uint64_t)json_integer_value(v); /* bytes */
			return true;
		}
		return json_is_string(v) && ktel_parse_size(json_string_value(v), ret) == 0;
	default:
		return false;
	}
}

static bool in_range(const struct ktel_cfg_key *k, uint64_t v)
{
	return !(k->min || k->max) || (v >= (uint64_t)k->min && v <= (uint64_t)k->max);
}

static void validate_object(const json_t *obj, const struct ktel_cfg_key *keys, const char *path,
			    struct ktel_config_errors *errs);

/* A DURATION or SIZE of the right form outside the key's range: the message
 * states the range, in the units the user writes. */
static void report_range(const json_t *v, const struct ktel_cfg_key *k, const char *path,
			 struct ktel_config_errors *errs)
{
	char lo[32], hi[32], got[80];

	format_bound(k, (uint64_t)k->min, lo, sizeof(lo));
	format_bound(k, (uint64_t)k->max, hi, sizeof(hi));
	describe(v, got, sizeof(got));
	add_error(errs, "%s: must be between %s and %s, got %s", path, lo, hi, got);
}

/* Is the string v at most MAX_STRING_LEN bytes? Else the error names path. */
static bool string_fits(const json_t *v, const char *path, struct ktel_config_errors *errs)
{
	if (json_string_length(v) <= MAX_STRING_LEN)
		return true;
	add_error(errs, "%s: string of %zu bytes: at most %d bytes (PATH_MAX)", path,
		  json_string_length(v), MAX_STRING_LEN);
	return false;
}

/* Is a member name (a metric's, a sink's, a param's) at most MAX_NAME_LEN bytes? */
static bool name_fits(const char *name, const char *path, struct ktel_config_errors *errs)
{
	size_t n = strlen(name);

	if (n <= MAX_NAME_LEN)
		return true;
	add_error(errs, "%s%s(a name of %zu bytes): names are at most %d bytes", path,
		  *path ? " " : "", n, MAX_NAME_LEN);
	return false;
}

/* Each element by its index: "plugin_dirs[2]: expected string, got 3". */
static bool validate_string_array(const json_t *v, const char *path,
				  struct ktel_config_errors *errs)
{
	char got[80];
	size_t i;
	json_t *e;

	if (!json_is_array(v))
		return false;
	json_array_foreach(v, i, e) {
		char sub[512];

		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		if (json_is_string(e)) {
			string_fits(e, sub, errs);
			continue;
		}
		describe(e, got, sizeof(got));
		add_error(errs, "%s: expected string, got %s", sub, got);
	}
	return true;
}

/*
 * Each member of a map by its path, every one of type want (JSON_STRING or
 * JSON_INTEGER): "sinks.rw.headers.X-Org: expected string, got 3",
 * "metrics.m.params.depth: expected integer, got 1.5".
 */
static bool validate_typed_map(const json_t *v, const char *path, json_type want,
			       struct ktel_config_errors *errs)
{
	char sub[512], got[80];
	const char *name;
	json_t *member;

	if (!json_is_object(v))
		return false;
	json_object_foreach((json_t *)v, name, member) {
		if (!name_fits(name, path, errs))
			continue;
		join_path(sub, sizeof(sub), path, name);
		if (json_typeof(member) == want) {
			if (want == JSON_STRING)
				string_fits(member, sub, errs);
			continue;
		}
		describe(member, got, sizeof(got));
		add_error(errs, "%s: expected %s, got %s", sub,
			  want == JSON_STRING ? "string" : "integer", got);
	}
	return true;
}

static void validate_map(const json_t *v, const struct ktel_cfg_key *k, const char *path,
			 struct ktel_config_errors *errs)
{
	char sub[512], got[80];
	const char *name;
	json_t *member;

	json_object_foreach((json_t *)v, name, member) {
		if (!name_fits(name, path, errs))
			continue;
		join_path(sub, sizeof(sub), path, name);
		if (!json_is_object(member)) {
			describe(member, got, sizeof(got));
			add_error(errs, "%s: expected object, got %s", sub, got);
			continue;
		}
		validate_object(member, k->children, sub, errs);
	}
}

static bool enum_has(const struct ktel_cfg_key *k, const json_t *v)
{
	const char *const *c = k->choices ? k->choices : sink_type_names;

	for (size_t i = 0; json_is_string(v) && c[i]; i++)
		if (strcmp(c[i], json_string_value(v)) == 0)
			return true;
	return false;
}

static void validate_value(const json_t *v, const struct ktel_cfg_key *k, const char *path,
			   struct ktel_config_errors *errs)
{
	char exp[256], got[80];
	uint64_t n = 0;
	gid_t gid;
	bool ok = true;
	int r;

	switch (k->type) {
	case KTEL_CFG_STRING:
		ok = json_is_string(v) && json_string_length(v) > 0;
		if (ok && !string_fits(v, path, errs))
			return;
		break;
	case KTEL_CFG_BOOL:
		ok = json_is_boolean(v);
		break;
	case KTEL_CFG_INT:
		ok = json_is_integer(v) && json_integer_value(v) >= k->min &&
		     json_integer_value(v) <= k->max;
		break;
	case KTEL_CFG_DURATION:
	case KTEL_CFG_SIZE:
		ok = number_of(k, v, &n);
		if (ok && !in_range(k, n)) {
			report_range(v, k, path, errs);
			return;
		}
		break;
	case KTEL_CFG_STRING_ARRAY:
		ok = validate_string_array(v, path, errs);
		break;
	case KTEL_CFG_GROUP:
		r = parse_group(v, &gid);
		if (r == -ENOENT) {
			add_error(errs, "%s: group \"%s\" does not exist on this system", path,
				  json_string_value(v));
			return;
		}
		if (r == -ENAMETOOLONG) {
			add_error(errs,
				  "%s: group name of %zu bytes: at most %d bytes (LOGIN_NAME_MAX)",
				  path, json_string_length(v), MAX_GROUP_LEN);
			return;
		}
		ok = r == 0;
		break;
	case KTEL_CFG_ENUM:
		ok = enum_has(k, v);
		break;
	case KTEL_CFG_INT_MAP:
		ok = validate_typed_map(v, path, JSON_INTEGER, errs);
		break;
	case KTEL_CFG_STRING_MAP:
		ok = validate_typed_map(v, path, JSON_STRING, errs);
		break;
	case KTEL_CFG_OBJECT:
		ok = json_is_object(v);
		if (ok)
			validate_object(v, k->children, path, errs);
		break;
	case KTEL_CFG_MAP:
		ok = json_is_object(v);
		if (ok)
			validate_map(v, k, path, errs);
		break;
	}
	if (!ok) {
		describe(v, got, sizeof(got));
		add_error(errs, "%s: expected %s, got %s", path,
			  type_expectation(k, exp, sizeof(exp)), got);
	}
}

static const struct ktel_cfg_key *find_key(const struct ktel_cfg_key *keys, const char *name)
{
	for (size_t i = 0; keys && keys[i].name; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

static bool is_required(const struct ktel_cfg_key *k)
{
	return k->default_text && strcmp(k->default_text, KTEL_CFG_REQUIRED) == 0;
}

static void check_required(const json_t *obj, const struct ktel_cfg_key *keys, const char *path,
			   struct ktel_config_errors *errs)
{
	char sub[512], exp[256];

	for (size_t i = 0; keys && keys[i].name; i++) {
		if (!is_required(&keys[i]) || json_object_get(obj, keys[i].name))
			continue;
		join_path(sub, sizeof(sub), path, keys[i].name);
		if (keys[i].type == KTEL_CFG_ENUM)
			add_error(errs, "%s: required (%s)", sub,
				  type_expectation(&keys[i], exp, sizeof(exp)));
		else
			add_error(errs, "%s: required", sub);
	}
}

/*
 * The value of a key that a rule may rely on: present, not false, and of
 * the key's form (a malformed value has its own error already).
 */
static const json_t *valid_value(const json_t *obj, const struct ktel_cfg_key *keys,
				 const char *name)
{
	const struct ktel_cfg_key *k = find_key(keys, name);
	const json_t *v = json_object_get(obj, name);
	struct ktel_config_errors scratch = {0};
	bool ok;

	if (!k || !v || json_is_false(v))
		return NULL;
	validate_value(v, k, name, &scratch);
	ok = scratch.n == 0;
	ktel_config_errors__clear(&scratch);
	return ok ? v : NULL;
}

/* A number for RULE_NOT_BELOW: the key's value, else its documented
 * default; text says which, for the message. */
static bool rule_number(const json_t *obj, const struct ktel_cfg_key *keys, const char *name,
			uint64_t *ret, char *text, size_t len)
{
	const struct ktel_cfg_key *k = find_key(keys, name);
	const json_t *v = json_object_get(obj, name);
	json_t *def;
	bool ok;

	if (!k)
		return false;
	if (v) {
		if (!valid_value(obj, keys, name) || !number_of(k, v, ret))
			return false;
		describe(v, text, len);
		return true;
	}
	if (!k->default_text)
		return false;
	/* The default as the docs state it: "100ms", "1MiB", "1024". */
	def = k->type == KTEL_CFG_INT ? json_loads(k->default_text, JSON_DECODE_ANY, NULL)
				      : json_string(k->default_text);
	ok = def && number_of(k, def, ret);
	json_decref(def);
	snprintf(text, len, "default %s", k->default_text);
	return ok;
}

static void check_not_below(const json_t *obj, const struct ktel_cfg_key *keys,
			    const struct cfg_rule *r, const char *path,
			    struct ktel_config_errors *errs)
{
	char a_text[80], b_text[80], sub[512];
	uint64_t a, b;

	if (!json_object_get(obj, r->key) && !json_object_get(obj, r->others[0]))
		return;
	if (!rule_number(obj, keys, r->key, &a, a_text, sizeof(a_text)) ||
	    !rule_number(obj, keys, r->others[0], &b, b_text, sizeof(b_text)) || a >= b)
		return;
	/* Name the key the user set: the other one may be at its default. */
	if (json_object_get(obj, r->key)) {
		join_path(sub, sizeof(sub), path, r->key);
		add_error(errs, "%s: must not be below %s (%s < %s)%s%s", sub, r->others[0], a_text,
			  b_text, r->why ? ": " : "", r->why ? r->why : "");
	} else {
		join_path(sub, sizeof(sub), path, r->others[0]);
		add_error(errs, "%s: must not be above %s (%s > %s)%s%s", sub, r->key, b_text,
			  a_text, r->why ? ": " : "", r->why ? r->why : "");
	}
}

/* One error per other key the rule refuses (EXCLUDES) or misses (REQUIRES). */
static void check_relation(const json_t *obj, const struct ktel_cfg_key *keys,
			   const struct cfg_rule *r, const char *path,
			   struct ktel_config_errors *errs)
{
	const json_t *v = valid_value(obj, keys, r->key);
	char sub[512];

	if (!v || (r->equals && strcmp(json_string_value(v), r->equals) != 0))
		return;
	for (size_t i = 0; r->others[i]; i++) {
		bool set = json_object_get(obj, r->others[i]) &&
			   !json_is_false(json_object_get(obj, r->others[i]));

		if (r->kind == RULE_REQUIRES && !set) {
			join_path(sub, sizeof(sub), path, r->key);
			add_error(errs, "%s: requires %s (%s)", sub, r->others[i], r->why);
		} else if (r->kind == RULE_EXCLUDES && set && r->equals) {
			join_path(sub, sizeof(sub), path, r->others[i]);
			add_error(errs, "%s: not allowed when %s is \"%s\" (%s)", sub, r->key,
				  r->equals, r->why);
		} else if (r->kind == RULE_EXCLUDES && set) {
			join_path(sub, sizeof(sub), path, r->others[i]);
			add_error(errs, "%s: not allowed with %s (%s)", sub, r->key, r->why);
		}
	}
}

/* A DNS name as the resolver takes it, or an IPv4/IPv6 literal. */
static bool host_ok(const char *s)
{
	unsigned char addr[sizeof(struct in6_addr)];
	size_t label = 0, n = strlen(s);

	if (inet_pton(AF_INET6, s, addr) == 1)
		return true;
	if (n == 0 || n > MAX_HOST_LEN)
		return false;
	for (const char *c = s; *c; c++) {
		if (*c == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_')
			return false;
		if (++label > 63)
			return false;
	}
	return true;
}

/* An http:// or https:// URL with a host, no space or control character. */
static bool http_url_ok(const char *s)
{
	const char *host = NULL;

	if (strncmp(s, "http://", 7) == 0)
		host = s + 7;
	else if (strncmp(s, "https://", 8) == 0)
		host = s + 8;
	if (!host || !*host || *host == '/' || *host == ':')
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	return true;
}

/* Does an http(s) URL carry user[:password]@ before its host? */
static bool url_has_userinfo(const char *s)
{
	const char *host = strstr(s, "://") + 3;
	size_t authority = strcspn(host, "/?#");

	return memchr(host, '@', authority) != NULL;
}

/* An HTTP header name: an RFC 9110 token. */
static bool header_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("!#$%&'*+-.^_`|~", *p))
			return false;
	return true;
}

/* A header value: visible characters, spaces and tabs; no CR, LF or NUL. */
static bool header_value_ok(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] < ' ' && s[i] != '\t') || s[i] == 0x7f)
			return false;
	return true;
}

/* The headers the sink sets itself: the protocol's, not the user's. */
static bool header_reserved(const char *s)
{
	static const char *const fixed[] = {
		"Content-Encoding",
		"Content-Type",
		"Content-Length",
		"X-Prometheus-Remote-Write-Version",
		"Expect",
		"Host",
		"Transfer-Encoding",
	};

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (strcasecmp(s, fixed[i]) == 0)
			return true;
	return false;
}

/* A label name a user may set: [a-zA-Z_][a-zA-Z0-9_]*, not "le", not "__*". */
static bool label_name_ok(const char *s)
{
	if (!*s || strcmp(s, "le") == 0 || strncmp(s, "__", 2) == 0 || isdigit((unsigned char)*s))
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return true;
}

/* The string forms: address literal, unix socket path, URL path, lengths. */
static void check_form(const json_t *obj, const struct ktel_cfg_key *keys, const struct cfg_rule *r,
		       const char *path, struct ktel_config_errors *errs)
{
	const json_t *v = valid_value(obj, keys, r->key);
	const char *s = json_string_value(v);
	unsigned char addr[sizeof(struct in6_addr)];
	size_t max_unix = MAX_UNIX_LEN;
	char sub[512];

	if (!s)
		return;
	join_path(sub, sizeof(sub), path, r->key);
	if (r->kind == RULE_IP_LITERAL && inet_pton(AF_INET, s, addr) != 1 &&
	    inet_pton(AF_INET6, s, addr) != 1)
		add_error(errs,
			  "%s: \"%.60s\" is not an IPv4 or IPv6 address (a literal, not a "
			  "host name)",
			  sub, s);
	else if (r->kind == RULE_UNIX_PATH && strlen(s) > max_unix)
		add_error(errs, "%s: unix socket path longer than %zu bytes", sub, max_unix);
	else if (r->kind == RULE_URL_PATH && s[0] != '/')
		add_error(errs, "%s: expected a URL path starting with '/', got \"%.60s\"", sub, s);
	else if (r->kind == RULE_MAX_LEN && strlen(s) > r->max)
		add_error(errs, "%s: %zu bytes: at most %zu bytes (%s)", sub, strlen(s), r->max,
			  r->why);
	else if (r->kind == RULE_HOSTNAME && !host_ok(s))
		add_error(errs,
			  "%s: \"%.60s\" is not a host name (at most %d bytes, labels of "
			  "1..63 letters, digits, '-' and '_', dot-separated) or an IP address",
			  sub, s, MAX_HOST_LEN);
	else if (r->kind == RULE_HTTP_URL && !http_url_ok(s))
		add_error(errs,
			  "%s: \"%.60s\" is not an http:// or https:// URL with a host "
			  "(no spaces or control characters)",
			  sub, s);
	else if (r->kind == RULE_HTTP_URL && url_has_userinfo(s))
		add_error(errs,
			  "%s: no user or password in the URL (the URL is logged): put "
			  "them in an Authorization header",
			  sub);
}

/* The members of an object-valued key: header names and values, label names. */
static void check_members(const json_t *obj, const struct ktel_cfg_key *keys,
			  const struct cfg_rule *r, const char *path,
			  struct ktel_config_errors *errs)
{
	const json_t *v = valid_value(obj, keys, r->key);
	const char *name;
	json_t *member;
	char sub[512];

	json_object_foreach((json_t *)v, name, member) {
		const char *val = json_string_value(member);

		snprintf(sub, sizeof(sub), "%s%s%s.%s", path, *path ? "." : "", r->key, name);
		if (r->kind == RULE_LABEL_NAMES && !label_name_ok(name))
			add_error(errs,
				  "%s: \"%.60s\" is not a label name a config may set "
				  "([a-zA-Z_][a-zA-Z0-9_]*, not \"le\", not starting with \"__\")",
				  sub, name);
		else if (r->kind == RULE_HTTP_HEADERS && !header_name_ok(name))
			add_error(errs,
				  "%s: not an HTTP header name (letters, digits and "
				  "!#$%%&'*+-.^_`|~)",
				  sub);
		else if (r->kind == RULE_HTTP_HEADERS && header_reserved(name))
			add_error(errs, "%s: the sink sets this header itself", sub);
		else if (r->kind == RULE_HTTP_HEADERS &&
			 !header_value_ok(val, json_string_length(member)))
			add_error(errs,
				  "%s: a header value may not hold CR, LF or other control "
				  "characters",
				  sub);
	}
}

static void check_rules(const json_t *obj, const struct ktel_cfg_key *keys,
			const struct cfg_rule *rules, const char *path,
			struct ktel_config_errors *errs)
{
	for (const struct cfg_rule *r = rules; r && r->kind; r++) {
		switch (r->kind) {
		case RULE_REQUIRES:
		case RULE_EXCLUDES:
			check_relation(obj, keys, r, path, errs);
			break;
		case RULE_NOT_BELOW:
			check_not_below(obj, keys, r, path, errs);
			break;
		case RULE_IP_LITERAL:
		case RULE_UNIX_PATH:
		case RULE_URL_PATH:
		case RULE_MAX_LEN:
		case RULE_HOSTNAME:
		case RULE_HTTP_URL:
			check_form(obj, keys, r, path, errs);
			break;
		case RULE_HTTP_HEADERS:
		case RULE_LABEL_NAMES:
			check_members(obj, keys, r, path, errs);
			break;
		}
	}
}

static void report_unknown(const char *sub, const struct ktel_cfg_key *keys,
			   const struct ktel_cfg_key *extra, struct ktel_config_errors *errs)
{
	const struct ktel_cfg_key *set[] = {keys, extra};
	char known[400];
	size_t off = 0;

	known[0] = '\0';
	for (size_t s = 0; s < 2; s++)
		for (size_t i = 0; set[s] && set[s][i].name && off < sizeof(known); i++)
			off += (size_t)snprintf(known + off, sizeof(known) - off, "%s%s",
						off ? ", " : "", set[s][i].name);
	add_error(errs, "%s: unknown key (known keys: %s)", sub, known);
}

/*
 * Every key of obj against keys (and, for a sink, its type's keys), then the
 * keys that must be present, then the relations between the sink's keys.
 */
static void validate_object(const json_t *obj, const struct ktel_cfg_key *keys, const char *path,
			    struct ktel_config_errors *errs)
{
	const struct ktel_cfg_key *extra = NULL;
	const char *name;
	json_t *v;
	char sub[512];

	/* A sink's keys depend on its type. */
	if (keys == sink_common_keys) {
		json_t *type = json_object_get(obj, "type");

		if (json_is_string(type))
			extra = sink_keys_for(json_string_value(type));
	}
	json_object_foreach((json_t *)obj, name, v) {
		const struct ktel_cfg_key *k = find_key(keys, name);

		if (!k)
			k = find_key(extra, name);
		join_path(sub, sizeof(sub), path, name);
		if (!k)
			report_unknown(sub, keys, extra, errs);
		else
			validate_value(v, k, sub, errs);
	}
	check_required(obj, keys, path, errs);
	check_required(obj, extra, path, errs);
	extra = extra ? extra : keys;
	check_rules(obj, extra, rules_for_keys(extra), path, errs);
}

int ktel_config_check_options(const json_t *obj, const struct ktel_cfg_key *keys, const char *path,
			      struct ktel_err *err)
{
	struct ktel_config_errors errs = {0};
	json_t *copy;
	int r = 0;

	if (!json_is_object(obj))
		return ktel_err_set(err, EINVAL, "%s: expected object", path);
	/* "type" chose the sink type: it is not one of the type's options. */
	copy = json_copy((json_t *)obj);
	if (!copy)
		return ktel_err_set(err, ENOMEM, "%s: out of memory", path);
	json_object_del(copy, "type");
	validate_object(copy, keys, path, &errs);
	json_decref(copy);
	if (errs.n)
		r = ktel_err_set(err, EINVAL, "%s%s", errs.msgs[0],
				 errs.n > 1 ? " (and more: ktelemetryd --check-config lists all)"
					    : "");
	ktel_config_errors__clear(&errs);
	return r;
}

/* Names of sinks in a "sinks" list (a metric's, self-telemetry's): each must
 * name a configured sink, once. */
static void check_sink_list(const json_t *list, const char *path, const json_t *sinks,
			    struct ktel_config_errors *errs)
{
	/* The names seen so far, in a hash table: O(n) for a list of n (a
	 * pairwise scan took 14.6 s for 60,000 names, blocking a reload). */
	json_t *seen = json_object();
	const char *name;
	size_t i;
	json_t *e;

	json_array_foreach(list, i, e) {
		if (!json_is_string(e))
			continue;
		name = json_string_value(e);
		if (sinks ? !json_object_get(sinks, name) : strcmp(name, "stdout") != 0)
			add_error(errs, "%s[%zu]: unknown sink \"%.255s\"", path, i, name);
		if (json_object_get(seen, name))
			add_error(errs, "%s[%zu]: duplicate sink \"%.255s\"", path, i, name);
		else if (seen)
			json_object_set_new(seen, name, json_null());
	}
	json_decref(seen);
}

/* Cross-references the schema cannot express: the sink names lists use. */
static void validate_references(const json_t *root, struct ktel_config_errors *errs)
{
	const json_t *sinks = json_object_get(root, "sinks");
	const json_t *metrics = json_object_get(root, "metrics");
	const json_t *self = json_object_get(root, "self_telemetry");
	const char *mname;
	char path[512];
	json_t *m;

	if (!json_is_object(sinks))
		sinks = NULL; /* wrong type reported already; only "stdout" exists */
	json_object_foreach((json_t *)metrics, mname, m) {
		snprintf(path, sizeof(path), "metrics.%s.sinks", mname);
		check_sink_list(json_object_get(m, "sinks"), path, sinks, errs);
	}
	check_sink_list(json_object_get(self, "sinks"), "self_telemetry.sinks", sinks, errs);
	if (sinks && json_object_size(sinks) == 0)
		add_error(errs, "sinks: expected at least one sink");
}

/* ---- duplicate keys --------------------------------------------------- */

/*
 * jansson either refuses a duplicate key as a syntax error (which hides every
 * other error and names a line and column, not a path) or keeps the last
 * value without a word. So the document is parsed keeping the last value,
 * and this scan of the text, which jansson has already accepted as JSON,
 * reports every duplicate by its JSON path. The path is built in one buffer
 * and cut back after each member, so deep documents cost no stack per level
 * beyond the call itself.
 */
struct dup_scan {
	const char *p;
	char path[512];
	size_t len;
	struct ktel_config_errors *errs;
};

static void scan_value(struct dup_scan *s);

static void skip_space(struct dup_scan *s)
{
	while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')
		s->p++;
}

/* Past the string token at s->p (on its opening quote). */
static void skip_string(struct dup_scan *s)
{
	for (s->p++; *s->p && *s->p != '"'; s->p++)
		if (*s->p == '\\' && s->p[1])
			s->p++;
	if (*s->p)
		s->p++;
}

/* Take the path's new length after snprintf wrote n more bytes (clamped). */
static size_t grow_path(struct dup_scan *s, size_t old, int n)
{
	if (n > 0)
		s->len = old + (size_t)n < sizeof(s->path) ? old + (size_t)n : sizeof(s->path) - 1;
	return old;
}

/* Append ".key" (or "key" at the top); returns the length to cut back to. */
static size_t push_key(struct dup_scan *s, const char *key)
{
	size_t old = s->len;

	return grow_path(s, old,
			 snprintf(s->path + old, sizeof(s->path) - old, "%s%s", old ? "." : "",
				  key));
}

/* Append "[index]"; returns the length to cut back to. */
static size_t push_index(struct dup_scan *s, size_t index)
{
	size_t old = s->len;

	return grow_path(s, old, snprintf(s->path + old, sizeof(s->path) - old, "[%zu]", index));
}

static void pop_path(struct dup_scan *s, size_t old)
{
	s->len = old;
	s->path[old] = '\0';
}

static void scan_object(struct dup_scan *s)
{
	json_t *seen = json_object();
	const char *start;
	json_t *key;
	size_t old;

	for (s->p++, skip_space(s); *s->p == '"'; skip_space(s)) {
		start = s->p;
		skip_string(s);
		/* Decode the key as jansson did: "a" and "\u0061" are one key. */
		key = json_loadb(start, (size_t)(s->p - start), JSON_DECODE_ANY, NULL);
		old = push_key(s, json_string_value(key) ? json_string_value(key) : "?");
		if (json_string_value(key) && json_object_get(seen, json_string_value(key)))
			add_error(s->errs, "%s: duplicate key", s->path);
		else if (json_string_value(key))
			json_object_set_new(seen, json_string_value(key), json_null());
		json_decref(key);
		skip_space(s);
		if (*s->p == ':')
			s->p++;
		scan_value(s);
		pop_path(s, old);
		skip_space(s);
		if (*s->p == ',')
			s->p++;
	}
	if (*s->p == '}')
		s->p++;
	json_decref(seen);
}

static void scan_array(struct dup_scan *s)
{
	size_t old;

	s->p++;
	skip_space(s);
	for (size_t i = 0; *s->p && *s->p != ']'; i++) {
		old = push_index(s, i);
		scan_value(s);
		pop_path(s, old);
		skip_space(s);
		if (*s->p == ',')
			s->p++;
		skip_space(s);
	}
	if (*s->p == ']')
		s->p++;
}

static void scan_value(struct dup_scan *s)
{
	skip_space(s);
	if (*s->p == '{')
		scan_object(s);
	else if (*s->p == '[')
		scan_array(s);
	else if (*s->p == '"')
		skip_string(s);
	else
		while (*s->p && !strchr(",]} \t\r\n", *s->p))
			s->p++;
}

/* Report each duplicate key of text (valid JSON) as "<path>: duplicate key". */
static void report_duplicate_keys(const char *text, struct ktel_config_errors *errs)
{
	struct dup_scan s = {.p = text, .errs = errs};

	scan_value(&s);
}

/* ---- model ------------------------------------------------------------ */

static char *expand(const char *s, const struct ktel_config_vars *vars)
{
	static const char *const names[] = {"${plugin_dir}", "${state_dir}", "${run_dir}"};
	const char *values[] = {vars ? vars->plugin_dir : NULL, vars ? vars->state_dir : NULL,
				vars ? vars->run_dir : NULL};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i]);
		char *out;

		if (strncmp(s, names[i], n) != 0 || !values[i])
			continue;
		if (asprintf(&out, "%s%s", values[i], s + n) < 0)
			return NULL;
		return out;
	}
	return strdup(s);
}

static int copy_strings(const json_t *arr, const struct ktel_config_vars *vars, char ***ret,
			size_t *ret_n)
{
	size_t i, n = json_array_size(arr);
	json_t *e;
	char **out;

	*ret = NULL;
	*ret_n = 0;
	if (!arr)
		return 0;
	out = calloc(n + 1, sizeof(*out));
	if (!out)
		return -ENOMEM;
	json_array_foreach(arr, i, e) {
		out[i] = expand(json_string_value(e), vars);
		if (!out[i]) {
			while (i--)
				free(out[i]);
			free(out);
			return -ENOMEM;
		}
	}
	*ret = out;
	*ret_n = n;
	return 0;
}

static void free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

uint64_t ktel_cfg_duration(const json_t *obj, const char *key, uint64_t def_ms)
{
	uint64_t ms = def_ms;
	const json_t *v = json_object_get(obj, key);

	if (v && ktel_parse_duration(json_string_value(v), &ms))
		ms = def_ms;
	return ms;
}

uint64_t ktel_cfg_size(const json_t *obj, const char *key, uint64_t def)
{
	uint64_t n = def;
	const json_t *v = json_object_get(obj, key);

	if (json_is_integer(v) && json_integer_value(v) >= 0)
		return (uint64_t)json_integer_value(v);
	if (v && ktel_parse_size(json_string_value(v), &n))
		n = def;
	return n;
}

bool ktel_cfg_bool(const json_t *obj, const char *key, bool def)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_boolean(v) ? json_is_true(v) : def;
}

int64_t ktel_cfg_int(const json_t *obj, const char *key, int64_t def)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_integer(v) ? json_integer_value(v) : def;
}

const char *ktel_cfg_string(const json_t *obj, const char *key, const char *def)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_string(v) ? json_string_value(v) : def;
}

gid_t ktel_cfg_group(const json_t *obj, const char *key, gid_t def)
{
	gid_t gid = def;
	const json_t *v = json_object_get(obj, key);

	if (v && parse_group(v, &gid))
		gid = def;
	return gid;
}

static char *string_or(const json_t *obj, const char *key, const char *def,
		       const struct ktel_config_vars *vars)
{
	const json_t *v = json_object_get(obj, key);

	return expand(v ? json_string_value(v) : def, vars);
}

/* metrics.<name>.attribution, already validated against attr_keys;
 * android: the config is an Android one (is_android_config). */
static void build_attribution(struct ktel_attr_cfg *a, const json_t *m, bool android)
{
	const json_t *o = json_object_get(m, "attribution");
	const char *by = ktel_cfg_string(o, "by", "none"), *subject;

	a->by = KTEL_ATTR_BY_NONE;
	for (int i = 1; attr_by_choices[i]; i++)
		if (strcmp(by, attr_by_choices[i]) == 0)
			a->by = (enum ktel_attr_by)i;
	subject = ktel_cfg_string(o, "block_subject", "auto");
	a->block_subject = KTEL_ATTR_SUBJECT_AUTO;
	for (int i = 1; attr_subject_choices[i]; i++)
		if (strcmp(subject, attr_subject_choices[i]) == 0)
			a->block_subject = (enum ktel_attr_subject)i;
	a->depth = (uint32_t)ktel_cfg_int(o, "depth", 0);
	a->top = (uint32_t)ktel_cfg_int(o, "top",
					android ? KTEL_ATTR_TOP_DEFAULT_ANDROID
						: KTEL_ATTR_TOP_DEFAULT);
	a->max_keys = (uint32_t)ktel_cfg_int(o, "max_keys", KTEL_ATTR_MAX_KEYS_DEFAULT);
	a->sticky_windows = (uint32_t)ktel_cfg_int(o, "sticky_windows", KTEL_ATTR_STICKY_DEFAULT);
	a->churn_per_hour = (uint32_t)ktel_cfg_int(o, "churn_per_hour", 4 * (int64_t)a->top);
	a->allow_per_app_export = ktel_cfg_bool(o, "allow_per_app_export", false);
	a->allow_identifying_export = ktel_cfg_bool(o, "allow_identifying_export", false);
}

const char *ktel_attr_by_name(enum ktel_attr_by by)
{
	return (unsigned)by < sizeof(attr_by_choices) / sizeof(attr_by_choices[0]) - 1
		       ? attr_by_choices[by]
		       : "none";
}

const char *ktel_attr_subject_name(enum ktel_attr_subject subject)
{
	return (unsigned)subject <
			       sizeof(attr_subject_choices) / sizeof(attr_subject_choices[0]) - 1
		       ? attr_subject_choices[subject]
		       : "auto";
}

/* A sink object that writes Android atoms (type statsd, format android). */
static bool is_android_sink(const json_t *sink)
{
	return strcmp(ktel_cfg_string(sink, "type", ""), "statsd") == 0 &&
	       strcmp(ktel_cfg_string(sink, "format", ""), "android") == 0;
}

/* An Android config: one with a sink that writes Android atoms. */
static bool is_android_config(const json_t *sinks)
{
	const char *name;
	json_t *s;

	json_object_foreach((json_t *)sinks, name, s)
		if (is_android_sink(s))
			return true;
	return false;
}

static int build_metrics(struct ktel_config *cfg, const json_t *metrics, bool android,
			 const struct ktel_config_vars *vars)
{
	const char *name;
	json_t *m;
	size_t i = 0;

	cfg->metrics = calloc(json_object_size(metrics) + 1, sizeof(*cfg->metrics));
	if (!cfg->metrics)
		return -ENOMEM;
	json_object_foreach((json_t *)metrics, name, m) {
		struct ktel_metric_cfg *mc = &cfg->metrics[i++];

		cfg->n_metrics = i;
		mc->name = strdup(name);
		if (!mc->name)
			return -ENOMEM;
		mc->enabled = ktel_cfg_bool(m, "enabled", cfg->enable_new_plugins);
		mc->interval_ms = ktel_cfg_duration(m, "interval", cfg->interval_ms);
		mc->emit_zero = ktel_cfg_bool(m, "emit_zero", cfg->emit_zero);
		mc->lease_ms = ktel_cfg_duration(m, "lease", 0);
		if (json_object_get(m, "params"))
			mc->params = json_incref(json_object_get(m, "params"));
		build_attribution(&mc->attr, m, android);
		if (copy_strings(json_object_get(m, "sinks"), vars, &mc->sinks, &mc->n_sinks))
			return -ENOMEM;
	}
	return 0;
}

/*
 * A sink's options with each string option that starts with a variable
 * expanded, as the top-level paths are: config/default.json keeps its JSON
 * file under ${state_dir}. A new reference, NULL when out of memory.
 */
static json_t *expand_options(const json_t *s, const struct ktel_config_vars *vars)
{
	json_t *copy = json_copy((json_t *)s), *v;
	const char *key;
	void *tmp;

	if (!copy)
		return NULL;
	json_object_foreach_safe(copy, tmp, key, v) {
		char *x;

		if (!json_is_string(v) || strncmp(json_string_value(v), "${", 2) != 0)
			continue;
		x = expand(json_string_value(v), vars);
		if (!x || json_object_set_new(copy, key, json_string(x))) {
			free(x);
			json_decref(copy);
			return NULL;
		}
		free(x);
	}
	return copy;
}

static int build_sinks(struct ktel_config *cfg, const json_t *sinks,
		       const struct ktel_config_vars *vars)
{
	const char *name;
	json_t *s;
	size_t i = 0;

	cfg->sinks = calloc(json_object_size(sinks) + 1, sizeof(*cfg->sinks));
	if (!cfg->sinks)
		return -ENOMEM;
	json_object_foreach((json_t *)sinks, name, s) {
		struct ktel_sink_cfg *sc = &cfg->sinks[i++];

		cfg->n_sinks = i;
		sc->name = strdup(name);
		sc->type = strdup(json_string_value(json_object_get(s, "type")));
		sc->options = expand_options(s, vars);
		if (!sc->name || !sc->type || !sc->options)
			return -ENOMEM;
	}
	return 0;
}

static int build_model(const json_t *root, const char *source, const struct ktel_config_vars *vars,
		       struct ktel_config **ret)
{
	const json_t *self = json_object_get(root, "self_telemetry");
	json_t *default_sinks = NULL;
	const json_t *sinks = json_object_get(root, "sinks");
	struct ktel_config *cfg;
	int r = -ENOMEM;

	cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return -ENOMEM;
	cfg->source = strdup(source);
	cfg->pin_root = string_or(root, "pin_root", "/sys/fs/bpf/kernelstats", vars);
	cfg->state_file = string_or(root, "state_file", "/var/lib/ktelemetry/state.bin", vars);
	cfg->control_socket = string_or(root, "control_socket", "/run/ktelemetry/control.sock",
					vars);
	if (!cfg->source || !cfg->pin_root || !cfg->state_file || !cfg->control_socket)
		goto err_free;
	cfg->pin_gid = ktel_cfg_group(root, "pin_group", 0);
	cfg->control_gid = ktel_cfg_group(root, "control_group", 0);
	cfg->interval_ms = ktel_cfg_duration(root, "interval", 60000);
	cfg->emit_zero = ktel_cfg_bool(root, "emit_zero", false);
	cfg->enable_new_plugins = ktel_cfg_bool(root, "enable_new_plugins", true);
	cfg->drop_privileges = ktel_cfg_bool(root, "drop_privileges", false);
	cfg->sink_close_timeout_ms = ktel_cfg_duration(root, "sink_close_timeout", 2000);
	cfg->attr_memlock_budget = ktel_cfg_size(root, "attribution_memlock_budget",
						 KTEL_ATTR_MEMLOCK_BUDGET_DEFAULT);
	cfg->attr_release_after_ms = ktel_cfg_duration(root, "attribution_release_after", 600000);
	cfg->self_enabled = ktel_cfg_bool(self, "enabled", true);
	cfg->self_interval_ms = ktel_cfg_duration(self, "interval", 60000);
	cfg->self_bpf_stats = ktel_cfg_bool(self, "bpf_stats", false);
	if (copy_strings(json_object_get(self, "sinks"), vars, &cfg->self_sinks,
			 &cfg->n_self_sinks))
		goto err_free;
	if (json_object_get(root, "plugin_dirs")) {
		if (copy_strings(json_object_get(root, "plugin_dirs"), vars, &cfg->plugin_dirs,
				 &cfg->n_plugin_dirs))
			goto err_free;
	} else {
		cfg->plugin_dirs = calloc(2, sizeof(char *));
		if (!cfg->plugin_dirs)
			goto err_free;
		cfg->plugin_dirs[0] = expand("${plugin_dir}", vars);
		cfg->n_plugin_dirs = 1;
	}
	if (build_metrics(cfg, json_object_get(root, "metrics"), is_android_config(sinks), vars))
		goto err_free;
	if (!sinks) {
		default_sinks = json_pack("{s{ss ss}}", "stdout", "type", "json", "path", "-");
		sinks = default_sinks;
	}
	if (!sinks || build_sinks(cfg, sinks, vars))
		goto err_free;
	json_decref(default_sinks);
	*ret = cfg;
	return 0;

err_free:
	json_decref(default_sinks);
	ktel_config__free(cfg);
	return r;
}

/* One expanded path of the model against its bound (the file's text may use
 * "${run_dir}" and the like, so the text's length is not the path's). */
static void check_path_len(const char *key, const char *v, size_t max, const char *limit,
			   struct ktel_config_errors *errs)
{
	if (strlen(v) > max)
		add_error(errs, "%s: \"%.60s...\" is %zu bytes: at most %zu bytes (%s)", key, v,
			  strlen(v), max, limit);
}

/*
 * What only one holder can have: a listening TCP address, a path the daemon
 * binds, writes or replaces (the state file, a JSON sink's file and the
 * names its rotation moves it to, a unix socket, the pin root). Each is
 * registered in a hash set under its key, so n sinks cost O(n). A path is
 * one key whatever uses it ("path /run/k/c.sock"), so a socket on the
 * state file collides as two files do; an existing regular file is also
 * claimed by its inode, so a hard link to another's file collides.
 */
struct claims {
	json_t *seen;     /* key -> "sinks.NAME.OPTION" (or "control_socket") */
	json_t *rotating; /* resolved JSON path -> {"who", "keep"} */
	struct ktel_config_errors *errs;
};

/* Claim key for who; a second claim is an error naming both. False then. */
static bool claim(struct claims *c, const char *key, const char *who, const char *what)
{
	const json_t *first = json_object_get(c->seen, key);

	if (first) {
		add_error(c->errs, "%s: %s as %s: only one can bind or write it", who, what,
			  json_string_value(first));
		return false;
	}
	json_object_set_new(c->seen, key, json_string(who));
	return true;
}

/*
 * A path, resolved: "a//b", "a/./b" and a symlink to b are one path; an
 * existing regular file is claimed by its inode too (a hard link is the
 * same file). Only regular files: a terminal or the journal's socket
 * behind both /dev/stdout and /dev/stderr is written, never replaced.
 * The resolved path in *ret_real (caller frees) when not NULL.
 */
static void claim_path(struct claims *c, const char *path, const char *who, char **ret_real)
{
	char *real = ktel_path_resolve(path), *key, msg[160];
	struct stat st;

	if (!real)
		return;
	snprintf(msg, sizeof(msg), "same path %.100s", real);
	if (asprintf(&key, "path %s", real) >= 0) {
		bool first = claim(c, key, who, msg);

		free(key);
		if (first && stat(real, &st) == 0 && S_ISREG(st.st_mode) &&
		    asprintf(&key, "inode %llu:%llu", (unsigned long long)st.st_dev,
			     (unsigned long long)st.st_ino) >= 0) {
			snprintf(msg, sizeof(msg), "same file %.100s (linked under two names)",
				 real);
			claim(c, key, who, msg);
			free(key);
		}
	}
	if (ret_real)
		*ret_real = real;
	else
		free(real);
}

/* Unix sockets the daemon binds: an existing path that is not a socket is
 * refused by the bind at start (never replaced), so it is refused here. */
static void claim_socket(struct claims *c, const char *path, const char *who)
{
	struct stat st;

	claim_path(c, path, who, NULL);
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
		add_error(c->errs,
			  "%s: %.100s exists and is not a unix socket: the daemon binds a "
			  "socket there and never replaces another file",
			  who, path);
}

const char *const ktel_rotated_exts[] = {"", ".gz", ".gz.tmp", NULL};

int ktel_rotated_name(char *buf, size_t size, const char *path, unsigned k, const char *ext)
{
	int n = snprintf(buf, size, "%s.%u%s", path, k, ext);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/*
 * Is path (resolved) one of the names a rotating JSON sink moves its file
 * to: "<its path>.<k><ext>", k in 1..keep? Then the entry of that sink.
 */
static const json_t *rotated_of(const struct claims *c, const char *path)
{
	char base[PATH_MAX];
	size_t len = strlen(path), elen;
	const json_t *r;
	unsigned long k;
	char *end;

	for (size_t e = 0; ktel_rotated_exts[e]; e++) {
		elen = strlen(ktel_rotated_exts[e]);
		if (len <= elen || len - elen >= sizeof(base) ||
		    strcmp(path + len - elen, ktel_rotated_exts[e]) != 0)
			continue;
		snprintf(base, sizeof(base), "%.*s", (int)(len - elen), path);
		end = strrchr(base, '.');
		if (!end || end[1] < '1' || end[1] > '9')
			continue;
		errno = 0;
		k = strtoul(end + 1, &end, 10);
		if (*end || errno)
			continue;
		*strrchr(base, '.') = '\0';
		r = json_object_get(c->rotating, base);
		if (r && k <= (unsigned long)json_integer_value(json_object_get(r, "keep")))
			return r;
	}
	return NULL;
}

/* After every claim: no claimed path is a rotated name of a JSON sink's
 * file, or the pin root or below it (bpffs holds only the pins). */
static void check_claimed_paths(struct claims *c, const char *pin_root)
{
	const char *key;
	const json_t *who, *rot;
	size_t n = pin_root ? strlen(pin_root) : 0;

	json_object_foreach(c->seen, key, who) {
		const char *path = key + 5;

		if (strncmp(key, "path ", 5) != 0)
			continue;
		rot = rotated_of(c, path);
		if (rot)
			add_error(c->errs,
				  "%s: %.100s is a name %s rotates its file to (keep %lld): "
				  "the rotation would replace it",
				  json_string_value(who), path,
				  json_string_value(json_object_get(rot, "who")),
				  (long long)json_integer_value(json_object_get(rot, "keep")));
		if (n && strncmp(path, pin_root, n) == 0 && (path[n] == '/' || !path[n]))
			add_error(c->errs,
				  "%s: %.100s is within pin_root %s: the pin root holds only "
				  "the daemon's BPF pins",
				  json_string_value(who), path, pin_root);
	}
}

/* An option's value, else its documented default, as a string ("9464"). */
static const char *option_text(const struct ktel_sink_cfg *sc, const char *key, char *buf,
			       size_t len)
{
	const json_t *v = json_object_get(sc->options, key);
	const struct ktel_cfg_key *k = find_key(sink_keys_for(sc->type), key);

	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_integer(v)) {
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
		return buf;
	}
	return !v && k ? k->default_text : NULL;
}

static bool wildcard(const char *addr)
{
	return strcmp(addr, "0.0.0.0") == 0 || strcmp(addr, "::") == 0;
}

/* A prometheus sink's listening port: one holder per address, and a
 * wildcard address holds the port on every address. Port 0 is never shared. */
static void claim_port(struct claims *c, const struct ktel_sink_cfg *sc, const char *who)
{
	char pbuf[32], lbuf[32], exact[128], wild[64], any[64];
	const char *port = option_text(sc, "port", pbuf, sizeof(pbuf));
	const char *listen = option_text(sc, "listen", lbuf, sizeof(lbuf));
	const json_t *first;

	if (!port || !listen || strcmp(port, "0") == 0)
		return;
	snprintf(exact, sizeof(exact), "tcp %.60s %s", listen, port);
	snprintf(wild, sizeof(wild), "tcp-wildcard %s", port);
	snprintf(any, sizeof(any), "tcp-any %s", port);
	first = json_object_get(c->seen, exact);
	if (!first)
		first = json_object_get(c->seen, wild);
	if (!first && wildcard(listen))
		first = json_object_get(c->seen, any);
	if (first) {
		add_error(c->errs, "%s: same TCP port %s as %s: only one can listen on it", who,
			  port, json_string_value(first));
		return;
	}
	json_object_set_new(c->seen, exact, json_string(who));
	if (!json_object_get(c->seen, any))
		json_object_set_new(c->seen, any, json_string(who));
	if (wildcard(listen))
		json_object_set_new(c->seen, wild, json_string(who));
}

/* A JSON sink's file: claimed with, when it rotates, the names its
 * rotation moves it to (checked once every path is claimed). */
static void claim_json(struct claims *c, const struct ktel_sink_cfg *sc, const char *path,
		       const char *who)
{
	char buf[32], *real = NULL;
	const char *keep = option_text(sc, "keep", buf, sizeof(buf));
	struct stat st;

	claim_path(c, path, who, &real);
	if (stat(path, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode)))
		add_error(c->errs, "%s: %.100s is a %s: the sink appends to a file", who, path,
			  S_ISDIR(st.st_mode) ? "directory" : "unix socket");
	if (real && json_object_get(sc->options, "rotate_bytes"))
		json_object_set_new(c->rotating, real,
				    json_pack("{s:s, s:I}", "who", who, "keep",
					      (json_int_t)(keep ? strtoll(keep, NULL, 10) : 0)));
	free(real);
}

/*
 * Two sinks on one port or path, a stream socket that is the control
 * socket, a state file that is a sink's file or one of its rotated names:
 * start would fail binding, or one file would overwrite another. The same
 * check runs at --check-config, at start and at reload (it is part of
 * every load of a config).
 */
static void check_exclusive(const struct ktel_config *cfg, struct ktel_config_errors *errs)
{
	struct claims c = {.seen = json_object(), .rotating = json_object(), .errs = errs};
	char who[300], buf[32], *pin_root = NULL;
	const char *v;

	if (!c.seen || !c.rotating)
		goto out;
	claim_path(&c, cfg->state_file, "state_file", NULL);
	claim_socket(&c, cfg->control_socket, "control_socket");
	for (size_t i = 0; i < cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *sc = &cfg->sinks[i];

		if (strcmp(sc->type, "prometheus") == 0) {
			snprintf(who, sizeof(who), "sinks.%s.port", sc->name);
			claim_port(&c, sc, who);
		} else if (strcmp(sc->type, "stream") == 0 &&
			   (v = option_text(sc, "socket", buf, sizeof(buf)))) {
			snprintf(who, sizeof(who), "sinks.%s.socket", sc->name);
			claim_socket(&c, v, who);
		} else if (strcmp(sc->type, "json") == 0 &&
			   (v = option_text(sc, "path", buf, sizeof(buf))) && strcmp(v, "-")) {
			snprintf(who, sizeof(who), "sinks.%s.path", sc->name);
			claim_json(&c, sc, v, who);
		}
	}
	pin_root = ktel_path_resolve(cfg->pin_root);
	check_claimed_paths(&c, pin_root);
out:
	free(pin_root);
	json_decref(c.rotating);
	json_decref(c.seen);
}

/* ---- metric names ---------------------------------------------------- */

/*
 * The metrics of the plugins in this source tree (plugins/<name>: each
 * provides one metric of its own name). A name under "metrics" that is none
 * of these, not a metric a running daemon loaded, and not a plugin file in
 * plugin_dirs, but within a typo of one of these, is a typo: an error
 * naming the closest. Any other name no installed plugin provides is a
 * warning, since a plugin of another vendor may provide it where it is
 * installed.
 */
static const char *const builtin_metrics[] = {
	"block_io_latency",
	"cma_allocation_latency",
	"compaction_duration",
	"direct_reclaim_latency",
	"dmabuf_request_sizes",
	"kswapd_latency",
	"memcg_reclaim_latency",
	"oom_events",
	"oom_kills",
	"runq_latency",
	"runq_stall_events",
	"suspend_resume_latency",
	NULL,
};

static const char *const *installed_metrics;
static size_t n_installed_metrics;

void ktel_config_set_installed_metrics(const char *const *names, size_t n)
{
	installed_metrics = names;
	n_installed_metrics = names ? n : 0;
}

#define TYPO_MAX_NAME 64

/* Levenshtein distance of a and b (both at most TYPO_MAX_NAME bytes). */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[TYPO_MAX_NAME + 1];

	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

const char *ktel_config_closest_metric(const char *name)
{
	size_t len = strlen(name), best = 3, d;
	const char *closest = NULL;

	/* A typo: at most 2 edits, and fewer than a third of the name. */
	if (len > TYPO_MAX_NAME)
		return NULL;
	for (size_t i = 0; builtin_metrics[i]; i++) {
		size_t lk = strlen(builtin_metrics[i]);

		if ((lk > len ? lk - len : len - lk) >= best)
			continue; /* the distance is at least the length difference */
		d = edit_distance(name, builtin_metrics[i]);
		if (d < best && d * 3 < len) {
			best = d;
			closest = builtin_metrics[i];
		}
	}
	return closest;
}

static bool in_list(const char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; list && (n ? i < n : list[i] != NULL); i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

/* Is there a plugin file "<name>.so" in one of the plugin directories? */
static bool plugin_file_present(const struct ktel_config *cfg, const char *name)
{
	char path[PATH_MAX];

	for (size_t i = 0; i < cfg->n_plugin_dirs; i++)
		if (snprintf(path, sizeof(path), "%s/%s.so", cfg->plugin_dirs[i], name) <
			    (int)sizeof(path) &&
		    access(path, F_OK) == 0)
			return true;
	return false;
}

static void check_metric_name(const struct ktel_config *cfg, const char *name,
			      struct ktel_config_errors *errs)
{
	const char *closest;

	if (in_list(installed_metrics, n_installed_metrics, name) || plugin_file_present(cfg, name))
		return;
	if (in_list(builtin_metrics, 0, name)) {
		add_warning(errs,
			    "metrics.%s: no installed plugin provides this metric (no %s.so "
			    "in plugin_dirs): its settings apply once the plugin is installed",
			    name, name);
		return;
	}
	closest = ktel_config_closest_metric(name);
	if (closest)
		add_error(errs, "metrics.%s: unknown metric (did you mean %s?)", name, closest);
	else
		add_warning(errs,
			    "metrics.%s: no installed plugin provides this metric and it is "
			    "not one of ktelemetry's own: its settings apply once a plugin "
			    "providing it is installed",
			    name);
}

/*
 * The built-in metrics whose plugin declares an attribution dimension
 * (KTEL_DIM_ATTRIBUTION). `by` on another built-in metric is an error here,
 * as the daemon would refuse the plugin at start; a metric of another
 * vendor's plugin is judged when the daemon loads it.
 */
static const char *const attributing_metrics[] = {
	"block_io_latency",
	"cma_allocation_latency",
	"compaction_duration",
	"direct_reclaim_latency",
	"dmabuf_request_sizes",
	"memcg_reclaim_latency",
	"oom_kills",
	"runq_latency",
	NULL,
};

static void check_attribution(const struct ktel_metric_cfg *mc, struct ktel_config_errors *errs)
{
	if (mc->attr.by == KTEL_ATTR_BY_NONE || !in_list(builtin_metrics, 0, mc->name) ||
	    in_list(attributing_metrics, 0, mc->name))
		return;
	add_error(errs,
		  "metrics.%s.attribution.by: %s: metric %s has no attribution dimension "
		  "(metrics that have one: block_io_latency, cma_allocation_latency, "
		  "compaction_duration, direct_reclaim_latency, dmabuf_request_sizes, "
		  "memcg_reclaim_latency, oom_kills, runq_latency)",
		  mc->name, ktel_attr_by_name(mc->attr.by), mc->name);
}

/*
 * The built-in metrics whose plugin can read a bio's cgroup instead of the
 * submitter's (KTEL_ATTR_PROG_BLKCG): block_subject chooses between them.
 */
static const char *const block_subject_metrics[] = {
	"block_io_latency",
	NULL,
};

/*
 * block_subject: `charged` is a cgroup, so only `by: cgroup` has it (an
 * error with another kind, which has no charged form); set on a built-in
 * metric that has no such choice it is ignored, which the warning says. A
 * metric of another vendor's plugin is judged when the daemon loads it.
 */
static void check_block_subject(const struct ktel_metric_cfg *mc, struct ktel_config_errors *errs)
{
	const struct ktel_attr_cfg *a = &mc->attr;
	const char *subject = ktel_attr_subject_name(a->block_subject);

	if (a->block_subject == KTEL_ATTR_SUBJECT_AUTO || a->by == KTEL_ATTR_BY_NONE)
		return;
	if (a->block_subject == KTEL_ATTR_SUBJECT_CHARGED && a->by != KTEL_ATTR_BY_CGROUP) {
		add_error(errs,
			  "metrics.%s.attribution.block_subject: charged: only with by cgroup "
			  "(the kernel charges block I/O to a cgroup; by %s has no charged "
			  "form): use submitter or auto",
			  mc->name, ktel_attr_by_name(a->by));
		return;
	}
	if (in_list(builtin_metrics, 0, mc->name) && !in_list(block_subject_metrics, 0, mc->name))
		add_warning(errs,
			    "metrics.%s.attribution.block_subject: %s: ignored: metric %s "
			    "has no block I/O subject to choose (only block_io_latency has)",
			    mc->name, subject, mc->name);
}

/* Why `by` identifies on Android, or NULL where it does not. */
static const char *identifying_reason(enum ktel_attr_by by)
{
	switch (by) {
	case KTEL_ATTR_BY_PROCESS:
		return "a process is named by its pid";
	case KTEL_ATTR_BY_CGROUP:
		return "Android's cgroups are per uid and pid (uid_<uid>/pid_<pid>)";
	case KTEL_ATTR_BY_USER:
		return "a uid names an app";
	default:
		return NULL;
	}
}

/*
 * What an attributed metric may send where (docs/privacy.md):
 *   - a sink writing Android atoms carries the attribution as an integer
 *     field: only `app` (app ids and class codes) and `app_class`;
 *   - `app` (per app) goes only to such a sink, unless allow_per_app_export;
 *   - on an Android config (one with such a sink), `process`, `cgroup` and
 *     `user` name processes and apps: refused unless allow_identifying_export.
 */
static void check_attribution_privacy(const struct ktel_config *cfg,
				      const struct ktel_metric_cfg *mc,
				      struct ktel_config_errors *errs)
{
	const struct ktel_attr_cfg *a = &mc->attr;
	const char *by = ktel_attr_by_name(a->by), *why = identifying_reason(a->by);
	const struct ktel_sink_cfg *android = NULL;

	if (a->by == KTEL_ATTR_BY_NONE)
		return;
	for (size_t i = 0; i < cfg->n_sinks && !android; i++)
		if (is_android_sink(cfg->sinks[i].options))
			android = &cfg->sinks[i];
	if (android && why && !a->allow_identifying_export)
		add_error(errs,
			  "metrics.%s.attribution.by: %s: refused on an Android config (sink %s "
			  "writes Android atoms): %s; set metrics.%s.attribution."
			  "allow_identifying_export to true to allow it (docs/privacy.md)",
			  mc->name, by, android->name, why, mc->name);
	for (size_t i = 0; i < cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *s = &cfg->sinks[i];

		if (mc->sinks && !in_list((const char *const *)mc->sinks, mc->n_sinks, s->name))
			continue;
		if (is_android_sink(s->options)) {
			if (a->by != KTEL_ATTR_BY_APP && a->by != KTEL_ATTR_BY_APP_CLASS)
				add_error(errs,
					  "metrics.%s.attribution.by: %s: sink %s writes Android "
					  "atoms, whose attribution field is an integer: only app or "
					  "app_class",
					  mc->name, by, s->name);
		} else if (a->by == KTEL_ATTR_BY_APP && !a->allow_per_app_export) {
			add_error(errs,
				  "metrics.%s.attribution.by: app: per-app output to sink %s (type "
				  "%s) is refused: only a statsd sink of format android takes it; "
				  "set metrics.%s.attribution.allow_per_app_export to true to "
				  "export it (docs/privacy.md)",
				  mc->name, s->name, s->type, mc->name);
		}
	}
}

/* The model's paths as bind(2) and open(2) will see them. */
static void check_model(const struct ktel_config *cfg, struct ktel_config_errors *errs)
{
	char key[64];

	check_path_len("control_socket", cfg->control_socket, MAX_UNIX_LEN,
		       "the sun_path of a unix socket address", errs);
	check_path_len("pin_root", cfg->pin_root, MAX_STRING_LEN, "PATH_MAX", errs);
	check_path_len("state_file", cfg->state_file, MAX_STRING_LEN, "PATH_MAX", errs);
	for (size_t i = 0; i < cfg->n_plugin_dirs; i++) {
		snprintf(key, sizeof(key), "plugin_dirs[%zu]", i);
		check_path_len(key, cfg->plugin_dirs[i], MAX_STRING_LEN, "PATH_MAX", errs);
	}
	check_exclusive(cfg, errs);
	for (size_t i = 0; i < cfg->n_metrics && errs->n < MAX_CONFIG_ERRORS; i++) {
		check_metric_name(cfg, cfg->metrics[i].name, errs);
		check_attribution(&cfg->metrics[i], errs);
		check_block_subject(&cfg->metrics[i], errs);
		check_attribution_privacy(cfg, &cfg->metrics[i], errs);
	}
}

int ktel_config__load_string(const char *text, const char *source,
			     const struct ktel_config_vars *vars, struct ktel_config **ret,
			     struct ktel_config_errors *errs, struct ktel_err *err)
{
	struct ktel_config *cfg = NULL;
	json_error_t jerr;
	json_t *root;
	int r;

	/*
	 * Duplicate keys are not refused by the parser (the last value is kept)
	 * but reported by path with every other error; callers prefix messages
	 * with the file name, so a syntax error names only line and column.
	 */
	root = json_loads(text, 0, &jerr);
	if (!root) {
		add_error(errs, "line %d, column %d: invalid JSON: %s", jerr.line, jerr.column,
			  jerr.text);
		return ktel_err_set(err, EINVAL, "%s: invalid JSON", source);
	}
	report_duplicate_keys(text, errs);
	if (!json_is_object(root))
		add_error(errs, "(top level): expected object");
	else {
		validate_object(root, top_keys, "", errs);
		validate_references(root, errs);
	}
	if (errs->n) {
		json_decref(root);
		return ktel_err_set(err, EINVAL, "%s: %zu configuration error%s", source, errs->n,
				    errs->n == 1 ? "" : "s");
	}
	r = build_model(root, source, vars, &cfg);
	json_decref(root);
	if (r)
		return ktel_err_set(err, -r, "%s: %s", source, strerror(-r));
	check_model(cfg, errs);
	if (errs->n) {
		ktel_config__free(cfg);
		return ktel_err_set(err, EINVAL, "%s: %zu configuration error%s", source, errs->n,
				    errs->n == 1 ? "" : "s");
	}
	*ret = cfg;
	return 0;
}

int ktel_config__load_file(const char *path, const struct ktel_config_vars *vars,
			   struct ktel_config **ret, struct ktel_config_errors *errs,
			   struct ktel_err *err)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	f = fopen(path, "re");
	if (!f)
		return ktel_err_set(err, errno, "%s: cannot open: %s", path, strerror(errno));
	{
		FILE *mem = open_memstream(&text, &len);
		char buf[8192];
		size_t n;

		if (!mem) {
			fclose(f);
			return ktel_err_set(err, ENOMEM, "%s: out of memory", path);
		}
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			fwrite(buf, 1, n, mem);
		r = ferror(f) ? -EIO : 0;
		fclose(mem);
	}
	fclose(f);
	if (r) {
		free(text);
		return ktel_err_set(err, EIO, "%s: read error", path);
	}
	/* The parser would stop at a NUL byte and ignore the rest of the file. */
	if (strlen(text) != len) {
		add_error(errs,
			  "byte %zu: NUL byte (a config is text; what follows it would "
			  "be ignored)",
			  strlen(text));
		free(text);
		return ktel_err_set(err, EINVAL, "%s: 1 configuration error", path);
	}
	r = ktel_config__load_string(text, path, vars, ret, errs, err);
	free(text);
	return r;
}

void ktel_config__free(struct ktel_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n_metrics; i++) {
		free(cfg->metrics[i].name);
		free_strings(cfg->metrics[i].sinks, cfg->metrics[i].n_sinks);
		json_decref(cfg->metrics[i].params);
	}
	free(cfg->metrics);
	for (size_t i = 0; i < cfg->n_sinks; i++) {
		free(cfg->sinks[i].name);
		free(cfg->sinks[i].type);
		json_decref(cfg->sinks[i].options);
	}
	free(cfg->sinks);
	free_strings(cfg->plugin_dirs, cfg->n_plugin_dirs);
	free_strings(cfg->self_sinks, cfg->n_self_sinks);
	free(cfg->source);
	free(cfg->pin_root);
	free(cfg->state_file);
	free(cfg->control_socket);
	free(cfg);
}

const struct ktel_metric_cfg *ktel_config__metric(const struct ktel_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_metrics; i++)
		if (strcmp(cfg->metrics[i].name, name) == 0)
			return &cfg->metrics[i];
	return NULL;
}

bool ktel_config__metric_enabled(const struct ktel_config *cfg, const char *name)
{
	const struct ktel_metric_cfg *m = ktel_config__metric(cfg, name);

	return m ? m->enabled : cfg->enable_new_plugins;
}

uint64_t ktel_config__metric_interval(const struct ktel_config *cfg, const char *name)
{
	const struct ktel_metric_cfg *m = ktel_config__metric(cfg, name);

	return m ? m->interval_ms : cfg->interval_ms;
}

/* ---- docs ------------------------------------------------------------- */

/* A Markdown table cell: a bare "|" would end the cell, even in `code`. */
static void put_cell(FILE *out, const char *before, const char *text, const char *after)
{
	fputs(before, out);
	for (const char *c = text ? text : ""; *c; c++) {
		if (*c == '|')
			fputc('\\', out);
		fputc(*c, out);
	}
	fputs(after, out);
}

static void write_keys(FILE *out, const struct ktel_cfg_key *keys, const char *prefix)
{
	char exp[256], path[256];

	for (size_t i = 0; keys && keys[i].name; i++) {
		const struct ktel_cfg_key *k = &keys[i];

		snprintf(path, sizeof(path), "%s%s", prefix, k->name);
		put_cell(out, "| `", path, "` ");
		put_cell(out, "| ", type_expectation(k, exp, sizeof(exp)), " ");
		put_cell(out, "| `", k->default_text, "` ");
		put_cell(out, "| ", k->doc, " |\n");
		if (k->type == KTEL_CFG_OBJECT || k->type == KTEL_CFG_MAP) {
			char sub[256];

			snprintf(sub, sizeof(sub), "%s%s", path,
				 k->type == KTEL_CFG_MAP ? ".<name>." : ".");
			write_keys(out, k->children, sub);
		}
	}
}

/* One Markdown bullet per rule, in words. */
static void write_rules(FILE *out, const struct cfg_rule *rules)
{
	for (const struct cfg_rule *r = rules; r && r->kind; r++) {
		fprintf(out, "- `%s`", r->key);
		if (r->equals)
			fprintf(out, " \"%s\"", r->equals);
		switch (r->kind) {
		case RULE_REQUIRES:
		case RULE_EXCLUDES:
			fputs(r->kind == RULE_REQUIRES ? " requires" : " excludes", out);
			for (size_t i = 0; r->others[i]; i++)
				fprintf(out, "%s `%s`", i ? "," : "", r->others[i]);
			break;
		case RULE_NOT_BELOW:
			fprintf(out, " must not be below `%s`", r->others[0]);
			break;
		case RULE_IP_LITERAL:
			fputs(" must be an IPv4 or IPv6 address literal", out);
			break;
		case RULE_UNIX_PATH:
			fprintf(out, " must fit a unix socket address (at most %zu bytes)",
				sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
			break;
		case RULE_URL_PATH:
			fputs(" must start with `/`", out);
			break;
		case RULE_MAX_LEN:
			fprintf(out, " must be at most %zu bytes", r->max);
			break;
		case RULE_HOSTNAME:
			fprintf(out,
				" must be an IP address or a host name of at most %d bytes "
				"(labels of 1..63 letters, digits, `-`, `_`)",
				MAX_HOST_LEN);
			break;
		case RULE_HTTP_URL:
			fputs(" must be an `http://` or `https://` URL with a host and no "
			      "user or password (the URL is logged; use a header)",
			      out);
			break;
		case RULE_HTTP_HEADERS:
			fputs(" names must be HTTP header names (not Content-Type, Content-Encoding, "
			      "Content-Length, X-Prometheus-Remote-Write-Version, Expect, Host, "
			      "Transfer-Encoding: the sink sets those), values without CR, LF "
			      "or control characters",
			      out);
			break;
		case RULE_LABEL_NAMES:
			fputs(" names must be label names (`[a-zA-Z_][a-zA-Z0-9_]*`, not `le`, not "
			      "starting with `__`)",
			      out);
			break;
		}
		fprintf(out, "%s%s.\n", r->why ? ": " : "", r->why ? r->why : "");
	}
}

int ktel_config__write_doc(FILE *out)
{
	fprintf(out, "| key | type | default | effect |\n|---|---|---|---|\n");
	write_keys(out, top_keys, "");
	for (size_t i = 0; sink_schemas && sink_schemas[i].type; i++) {
		char prefix[128];

		fprintf(out,
			"\n#### Sink type `%s`\n\n| key | type | default | effect |\n"
			"|---|---|---|---|\n",
			sink_schemas[i].type);
		snprintf(prefix, sizeof(prefix), "sinks.<name>.");
		write_keys(out, sink_schemas[i].keys, prefix);
		if (rules_for_type(sink_schemas[i].type)) {
			fprintf(out,
				"\nBesides each key's own form, `--check-config` and the "
				"sink when it opens check (a key whose default is `%s` "
				"must be set):\n\n",
				KTEL_CFG_REQUIRED);
			write_rules(out, rules_for_type(sink_schemas[i].type));
		}
	}
	return ferror(out) ? -EIO : 0;
}
