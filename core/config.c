// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Config validation and model. The schema table below is the single source
 * of truth: the validator walks it, and docs/config.md is generated from it.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONFIG_ERRORS 200
#define DAY_MS (24ULL * 3600 * 1000)

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
	{"params", KTEL_CFG_ANY_OBJECT, .default_text = "the plugin's defaults",
	 .doc = "Run-time settings of the plugin's BPF programs (integers), by name; "
		"`ktelemetryctl inspect` lists them."},
	{NULL},
};

static const struct ktel_cfg_key self_keys[] = {
	{"enabled", KTEL_CFG_BOOL, .default_text = "true",
	 .doc = "Emit the daemon's own telemetry (pull cost, sink counters, drops)."},
	{"interval", KTEL_CFG_DURATION, 1000, 365 * DAY_MS, .default_text = "60s",
	 .doc = "How often self-telemetry records are emitted."},
	{"sinks", KTEL_CFG_STRING_ARRAY, .default_text = "every sink",
	 .doc = "Sinks that receive self-telemetry."},
	{NULL},
};

static const char *const sink_type_names_default[] = {"json", NULL};
static const char *const *sink_type_names = sink_type_names_default;
static const struct ktel_cfg_sink_schema *sink_schemas;

/* Filled in at run time with the registered sink types. */
static struct ktel_cfg_key sink_common_keys[] = {
	{"type", KTEL_CFG_ENUM, .default_text = "(required)",
	 .doc = "Sink type; the other keys of the sink depend on it (docs/sinks.md)."},
	{NULL},
};

static const struct ktel_cfg_key top_keys[] = {
	{"plugin_dirs", KTEL_CFG_STRING_ARRAY, .default_text = "[\"${plugin_dir}\"]",
	 .doc = "Directories searched for `*.so` metric plugins, in order. Every file and "
		"parent directory must be root-owned and not group/world-writable."},
	{"pin_root", KTEL_CFG_STRING, .default_text = "/sys/fs/bpf/kernelstats",
	 .doc = "bpffs directory where accumulator maps are pinned as map_<object>_<map>."},
	{"pin_group", KTEL_CFG_GROUP, .default_text = "root",
	 .doc = "Group owning the pin directory (0750) and pinned maps (0640)."},
	{"state_file", KTEL_CFG_STRING, .default_text = "/var/lib/ktelemetry/state.bin",
	 .doc = "Delta engine state, written atomically after each pull that changed it."},
	{"control_socket", KTEL_CFG_STRING, .default_text = "/run/ktelemetry/control.sock",
	 .doc = "Unix stream socket ktelemetryctl talks to (mode 0660)."},
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
		"(CAP_BPF, CAP_PERFMON; CAP_CHOWN with a pin_group; docs/privileges.md). "
		"Read at start only."},
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

/* ---- errors ---------------------------------------------------------- */

static void add_verror(struct ktel_config_errors *errs, const char *fmt, va_list ap)
{
	char **grown;
	char *msg;
	int n;

	if (errs->n >= MAX_CONFIG_ERRORS)
		return;
	n = vasprintf(&msg, fmt, ap);
	if (n < 0)
		return;
	grown = realloc(errs->msgs, (errs->n + 1) * sizeof(*grown));
	if (!grown) {
		free(msg);
		return;
	}
	errs->msgs = grown;
	errs->msgs[errs->n++] = msg;
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

	if (!text || !*text || *text == '-' || *text == '+')
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
	static const char *const units[] = {"", "B", "KiB", "MiB", "GiB", "KB", "MB", "GB",
					    "K", "M", "G", NULL};
	static const uint64_t scale[] = {1, 1, 1ULL << 10, 1ULL << 20, 1ULL << 30,
					 1000, 1000000, 1000000000,
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
	case KTEL_CFG_STRING: return "non-empty string";
	case KTEL_CFG_BOOL: return "true or false";
	case KTEL_CFG_INT:
		snprintf(buf, len, "integer %lld..%lld", (long long)k->min, (long long)k->max);
		return buf;
	case KTEL_CFG_DURATION: return "duration string such as \"10s\", \"5m\", \"24h\"";
	case KTEL_CFG_SIZE: return "size such as \"512KiB\", \"10MiB\" or bytes";
	case KTEL_CFG_STRING_ARRAY: return "array of strings";
	case KTEL_CFG_GROUP: return "group name or numeric gid";
	case KTEL_CFG_OBJECT:
	case KTEL_CFG_MAP:
	case KTEL_CFG_ANY_OBJECT: return "object";
	case KTEL_CFG_ENUM: {
		const char *const *c = k->choices ? k->choices : sink_type_names;
		size_t off = (size_t)snprintf(buf, len, "one of");

		for (size_t i = 0; c[i] && off < len; i++)
			off += (size_t)snprintf(buf + off, len - off, "%s \"%s\"",
						i ? "," : "", c[i]);
		return buf;
	}
	}
	return "?";
}

static void validate_object(const json_t *obj, const struct ktel_cfg_key *keys,
			    const char *path, struct ktel_config_errors *errs);

static bool in_range(const struct ktel_cfg_key *k, uint64_t v)
{
	return !(k->min || k->max) || (v >= (uint64_t)k->min && v <= (uint64_t)k->max);
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
		break;
	case KTEL_CFG_BOOL:
		ok = json_is_boolean(v);
		break;
	case KTEL_CFG_INT:
		ok = json_is_integer(v) && json_integer_value(v) >= k->min &&
		     json_integer_value(v) <= k->max;
		break;
	case KTEL_CFG_DURATION:
		ok = json_is_string(v) && ktel_parse_duration(json_string_value(v), &n) == 0 &&
		     in_range(k, n);
		break;
	case KTEL_CFG_SIZE:
		if (json_is_integer(v) && json_integer_value(v) >= 0)
			n = (uint64_t)json_integer_value(v); /* bytes */
		else if (!json_is_string(v) || ktel_parse_size(json_string_value(v), &n))
			ok = false;
		ok = ok && in_range(k, n);
		break;
	case KTEL_CFG_STRING_ARRAY: {
		size_t i;
		json_t *e;

		ok = json_is_array(v);
		json_array_foreach(v, i, e)
			if (!json_is_string(e))
				ok = false;
		break;
	}
	case KTEL_CFG_GROUP:
		r = parse_group(v, &gid);
		if (r == -ENOENT) {
			add_error(errs, "%s: group \"%s\" does not exist on this system", path,
				  json_string_value(v));
			return;
		}
		ok = r == 0;
		break;
	case KTEL_CFG_ENUM: {
		const char *const *c = k->choices ? k->choices : sink_type_names;

		ok = false;
		for (size_t i = 0; json_is_string(v) && c[i]; i++)
			if (strcmp(c[i], json_string_value(v)) == 0)
				ok = true;
		break;
	}
	case KTEL_CFG_ANY_OBJECT:
		ok = json_is_object(v);
		break;
	case KTEL_CFG_OBJECT:
		if (!json_is_object(v))
			break;
		validate_object(v, k->children, path, errs);
		return;
	case KTEL_CFG_MAP: {
		const char *name;
		json_t *member;
		char sub[512];

		if (!json_is_object(v)) {
			ok = false;
			break;
		}
		json_object_foreach((json_t *)v, name, member) {
			snprintf(sub, sizeof(sub), "%s.%s", path, name);
			if (!json_is_object(member)) {
				describe(member, got, sizeof(got));
				add_error(errs, "%s: expected object, got %s", sub, got);
				continue;
			}
			validate_object(member, k->children, sub, errs);
		}
		return;
	}
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

static void validate_object(const json_t *obj, const struct ktel_cfg_key *keys,
			    const char *path, struct ktel_config_errors *errs)
{
	const struct ktel_cfg_key *extra = NULL;
	const char *name;
	json_t *v;
	char sub[512];

	/* A sink's keys depend on its type. */
	if (keys == sink_common_keys) {
		json_t *type = json_object_get(obj, "type");

		if (!type)
			add_error(errs, "%s.type: required (%s)", path,
				  type_expectation(&sink_common_keys[0], sub, sizeof(sub)));
		else if (json_is_string(type))
			extra = sink_keys_for(json_string_value(type));
	}
	json_object_foreach((json_t *)obj, name, v) {
		const struct ktel_cfg_key *k = find_key(keys, name);

		if (!k)
			k = find_key(extra, name);
		snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", name);
		if (!k) {
			char known[400];
			size_t off = 0;

			known[0] = '\0';
			for (const struct ktel_cfg_key *set[] = {keys, extra}, **s = set;
			     s < set + 2; s++)
				for (size_t i = 0; *s && (*s)[i].name && off < sizeof(known); i++)
					off += (size_t)snprintf(known + off, sizeof(known) - off,
								"%s%s", off ? ", " : "",
								(*s)[i].name);
			add_error(errs, "%s: unknown key (known keys: %s)", sub, known);
			continue;
		}
		validate_value(v, k, sub, errs);
	}
}

int ktel_config_check_options(const json_t *obj, const struct ktel_cfg_key *keys,
			      const char *path, struct ktel_err *err)
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
				 errs.n > 1 ? " (and more: ktelemetryd --check-config lists all)" : "");
	ktel_config_errors__clear(&errs);
	return r;
}

/* Cross-references the schema cannot express: sink names a metric uses. */
static void validate_references(const json_t *root, struct ktel_config_errors *errs)
{
	const json_t *sinks = json_object_get(root, "sinks");
	const json_t *metrics = json_object_get(root, "metrics");
	const char *mname;
	json_t *m;

	json_object_foreach((json_t *)metrics, mname, m) {
		json_t *list = json_object_get(m, "sinks"), *e;
		size_t i, j;

		json_array_foreach(list, i, e) {
			if (!json_is_string(e))
				continue;
			if (sinks ? !json_object_get(sinks, json_string_value(e))
				  : strcmp(json_string_value(e), "stdout") != 0)
				add_error(errs, "metrics.%s.sinks[%zu]: unknown sink \"%s\"", mname,
					  i, json_string_value(e));
			for (j = 0; j < i; j++)
				if (json_equal(json_array_get(list, j), e))
					add_error(errs, "metrics.%s.sinks[%zu]: duplicate sink \"%s\"",
						  mname, i, json_string_value(e));
		}
	}
	if (json_is_object(sinks) && json_object_size(sinks) == 0)
		add_error(errs, "sinks: expected at least one sink");
}

/* ---- model ------------------------------------------------------------ */

static char *expand(const char *s, const struct ktel_config_vars *vars)
{
	static const char *const names[] = {"${plugin_dir}", "${state_dir}"};
	const char *values[] = {vars ? vars->plugin_dir : NULL, vars ? vars->state_dir : NULL};

	for (size_t i = 0; i < 2; i++) {
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

static int build_metrics(struct ktel_config *cfg, const json_t *metrics,
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
		if (copy_strings(json_object_get(m, "sinks"), vars, &mc->sinks, &mc->n_sinks))
			return -ENOMEM;
	}
	return 0;
}

static int build_sinks(struct ktel_config *cfg, const json_t *sinks)
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
		sc->options = json_incref(s);
		if (!sc->name || !sc->type)
			return -ENOMEM;
	}
	return 0;
}

static int build_model(const json_t *root, const char *source,
		       const struct ktel_config_vars *vars, struct ktel_config **ret)
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
	cfg->self_enabled = ktel_cfg_bool(self, "enabled", true);
	cfg->self_interval_ms = ktel_cfg_duration(self, "interval", 60000);
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
	if (build_metrics(cfg, json_object_get(root, "metrics"), vars))
		goto err_free;
	if (!sinks) {
		default_sinks = json_pack("{s{ss ss}}", "stdout", "type", "json", "path", "-");
		sinks = default_sinks;
	}
	if (!sinks || build_sinks(cfg, sinks))
		goto err_free;
	json_decref(default_sinks);
	*ret = cfg;
	return 0;

err_free:
	json_decref(default_sinks);
	ktel_config__free(cfg);
	return r;
}

int ktel_config__load_string(const char *text, const char *source,
			     const struct ktel_config_vars *vars, struct ktel_config **ret,
			     struct ktel_config_errors *errs, struct ktel_err *err)
{
	json_error_t jerr;
	json_t *root;
	int r;

	root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		add_error(errs, "%s:%d:%d: %s", source, jerr.line, jerr.column, jerr.text);
		return ktel_err_set(err, EINVAL, "%s: invalid JSON", source);
	}
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
	r = build_model(root, source, vars, ret);
	json_decref(root);
	if (r)
		return ktel_err_set(err, -r, "%s: %s", source, strerror(-r));
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

const struct ktel_metric_cfg *ktel_config__metric(const struct ktel_config *cfg,
						  const char *name)
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

int ktel_config__write_doc(FILE *out)
{
	fprintf(out, "| key | type | default | effect |\n|---|---|---|---|\n");
	write_keys(out, top_keys, "");
	for (size_t i = 0; sink_schemas && sink_schemas[i].type; i++) {
		char prefix[128];

		fprintf(out, "\n#### Sink type `%s`\n\n| key | type | default | effect |\n"
			     "|---|---|---|---|\n", sink_schemas[i].type);
		snprintf(prefix, sizeof(prefix), "sinks.<name>.");
		write_keys(out, sink_schemas[i].keys, prefix);
	}
	return ferror(out) ? -EIO : 0;
}
