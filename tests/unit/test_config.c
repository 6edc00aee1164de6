// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Config validation: every error class with its exact message, every error
 * of a document reported in one pass, the model built from a valid document,
 * durations and sizes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fsutil.h"
#include "sinks.h"

static const struct ktel_cfg_key json_keys[] = {
	{"path", KTEL_CFG_STRING, .doc = "output"},
	{"max_queue", KTEL_CFG_SIZE, 1024, 1 << 30, .doc = "queue bound"},
	{NULL},
};
static const struct ktel_cfg_key statsd_keys[] = {
	{"port", KTEL_CFG_INT, 1, 65535, .doc = "port"},
	{"host", KTEL_CFG_STRING, .doc = "host"},
	{"format", KTEL_CFG_STRING, .doc = "statsd or android"},
	{"socket", KTEL_CFG_STRING, .doc = "unix socket"},
	{NULL},
};
static const struct ktel_cfg_sink_schema schemas[] = {
	{"json", json_keys},
	{"statsd", statsd_keys},
	{NULL, NULL},
};

static int setup(void **state)
{
	ktel_config_set_sink_schemas(schemas);
	return 0;
}

/* Load text; return the errors joined by newlines (caller frees). */
static char *errors_of(const char *text)
{
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	struct ktel_err err;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (ktel_config__load_string(text, "t.json", NULL, &cfg, &errs, &err) == 0)
		assert_int_equal(errs.n, 0);
	for (size_t i = 0; i < errs.n; i++)
		fprintf(f, "%s\n", errs.msgs[i]);
	fclose(f);
	ktel_config_errors__clear(&errs);
	ktel_config__free(cfg);
	return out;
}

/* Some line of the errors is exactly want. */
static void expect_error(const char *text, const char *want)
{
	char *got = errors_of(text);
	size_t n = strlen(want);
	bool found = false;

	for (const char *l = got; l && *l; l = strchr(l, '\n') + 1)
		if (strncmp(l, want, n) == 0 && l[n] == '\n')
			found = true;
	if (!found)
		fail_msg("expected the error\n  %s\ngot\n%s", want, got);
	free(got);
}

/* The errors are exactly want (lines, each ending in "\n"). */
static void expect_errors(const char *text, const char *want)
{
	char *got = errors_of(text);

	if (strcmp(got, want) != 0)
		fail_msg("expected the errors\n%sgot\n%s", want, got);
	free(got);
}

static void test_wrong_type_names_path_and_form(void **state)
{
	expect_error("{\"sinks\": {\"statsd\": {\"type\": \"statsd\", \"port\": \"abc\"}}}",
		     "sinks.statsd.port: expected integer 1..65535, got \"abc\"");
	expect_error("{\"sinks\": {\"s\": {\"type\": \"statsd\", \"port\": 70000}}}",
		     "sinks.s.port: expected integer 1..65535, got 70000");
	expect_error("{\"interval\": 10}",
		     "interval: expected duration string such as \"10s\", \"5m\", \"24h\", got 10");
	expect_error("{\"interval\": \"10 parsecs\"}",
		     "interval: expected duration string such as \"10s\", \"5m\", \"24h\", "
		     "got \"10 parsecs\"");
	expect_error("{\"emit_zero\": \"yes\"}", "emit_zero: expected true or false, got \"yes\"");
	expect_error("{\"plugin_dirs\": \"/a\"}",
		     "plugin_dirs: expected array of strings, got \"/a\"");
	expect_error("{\"sinks\": {\"f\": {\"type\": \"json\", \"max_queue\": \"lots\"}}}",
		     "sinks.f.max_queue: expected size such as \"512KiB\", \"10MiB\" or bytes, "
		     "got \"lots\"");
}

/* An element of an array is named by its index. */
static void test_array_errors_name_the_index(void **state)
{
	expect_errors("{\"plugin_dirs\": [\"/a\", \"/b\", 3, {}]}",
		      "plugin_dirs[2]: expected string, got 3\n"
		      "plugin_dirs[3]: expected string, got an object\n");
	expect_errors("{\"sinks\": {\"f\": {\"type\": \"json\"}},"
		      " \"metrics\": {\"m\": {\"sinks\": [\"f\", false]}}}",
		      "metrics.m.sinks[1]: expected string, got false\n");
}

static void test_unknown_key(void **state)
{
	expect_error("{\"intreval\": \"10s\"}",
		     "intreval: unknown key (known keys: plugin_dirs, pin_root, pin_group, "
		     "state_file, control_socket, control_group, interval, emit_zero, "
		     "enable_new_plugins, drop_privileges, attribution_memlock_budget, attribution_release_after, sink_close_timeout, metrics, "
		     "sinks, "
		     "self_telemetry)");
	expect_error("{\"sinks\": {\"f\": {\"type\": \"json\", \"pth\": \"x\"}}}",
		     "sinks.f.pth: unknown key (known keys: type, path, max_queue)");
	expect_error("{\"metrics\": {\"m\": {\"enabeld\": true}}}",
		     "metrics.m.enabeld: unknown key (known keys: enabled, interval, sinks, "
		     "emit_zero, lease, params, attribution)");
}

/* A value of the right form outside its range says the range, not the form. */
static void test_out_of_range_states_the_range(void **state)
{
	expect_errors("{\"interval\": \"50ms\"}",
		      "interval: must be between 100ms and 365d, got \"50ms\"\n");
	expect_errors("{\"interval\": \"366d\"}",
		      "interval: must be between 100ms and 365d, got \"366d\"\n");
	expect_errors("{\"metrics\": {\"m\": {\"lease\": \"10ms\"}}}",
		      "metrics.m.lease: must be between 1s and 365d, got \"10ms\"\n");
	expect_errors("{\"sink_close_timeout\": \"11m\"}",
		      "sink_close_timeout: must be between 0ms and 10m, got \"11m\"\n");
	expect_errors("{\"sinks\": {\"f\": {\"type\": \"json\", \"max_queue\": 100}}}",
		      "sinks.f.max_queue: must be between 1KiB and 1GiB, got 100\n");
	expect_errors("{\"sinks\": {\"f\": {\"type\": \"json\", \"max_queue\": \"2GiB\"}}}",
		      "sinks.f.max_queue: must be between 1KiB and 1GiB, got \"2GiB\"\n");
	expect_errors("{\"interval\": \"100ms\", \"sink_close_timeout\": \"0s\","
		      " \"sinks\": {\"f\": {\"type\": \"json\", \"max_queue\": \"1GiB\"}}}",
		      "");
}

static void test_unknown_sink_and_type(void **state)
{
	expect_error("{\"sinks\": {\"f\": {\"type\": \"json\"}}, "
		     "\"metrics\": {\"m\": {\"sinks\": [\"f\", \"nope\"]}}}",
		     "metrics.m.sinks[1]: unknown sink \"nope\"");
	expect_error("{\"sinks\": {\"f\": {\"type\": \"carrier-pigeon\"}}}",
		     "sinks.f.type: expected one of \"json\", \"statsd\", got \"carrier-pigeon\"");
	expect_errors("{\"sinks\": {\"f\": {\"path\": \"x\"}}}",
		      "sinks.f.path: unknown key (known keys: type)\n"
		      "sinks.f.type: required (one of \"json\", \"statsd\")\n");
	expect_errors("{\"sinks\": {}}", "sinks: expected at least one sink\n");
}

/* self_telemetry.sinks is checked as a metric's sinks are. */
static void test_self_telemetry_sinks(void **state)
{
	expect_errors("{\"sinks\": {\"f\": {\"type\": \"json\"}},"
		      " \"self_telemetry\": {\"sinks\": [\"f\", \"nope\", \"f\"]}}",
		      "self_telemetry.sinks[1]: unknown sink \"nope\"\n"
		      "self_telemetry.sinks[2]: duplicate sink \"f\"\n");
	/* Without "sinks" the only sink is the default "stdout". */
	expect_errors("{\"self_telemetry\": {\"sinks\": [\"stdout\"]}}", "");
	expect_errors("{\"self_telemetry\": {\"sinks\": [\"f\"]}}",
		      "self_telemetry.sinks[0]: unknown sink \"f\"\n");
}

/* params: an object of integers; each other value is named by its path. */
static void test_params_are_integers(void **state)
{
	expect_errors("{\"metrics\": {\"m\": {\"params\": {\"a\": 1, \"b\": 1.5, \"c\": \"2\","
		      " \"d\": -7, \"e\": null}}}}",
		      "metrics.m.params.b: expected integer, got 1.5\n"
		      "metrics.m.params.c: expected integer, got \"2\"\n"
		      "metrics.m.params.e: expected integer, got null\n");
	expect_errors("{\"metrics\": {\"m\": {\"params\": [1]}}}",
		      "metrics.m.params: expected object of integers, got an array\n");
}

/* A duplicate key is reported by its JSON path, with every other error. */
static void test_duplicates(void **state)
{
	expect_errors("{\"sinks\": {\"f\": {\"type\": \"json\"}, \"f\": {\"type\": \"json\"}}}",
		      "sinks.f: duplicate key\n");
	expect_errors("{\"interval\": \"1s\", \"interval\": \"2s\", \"interval\": \"3s\"}",
		      "interval: duplicate key\ninterval: duplicate key\n");
	/* Keys are compared decoded; braces and quotes in strings are not syntax. */
	expect_errors("{\"pin_root\": \"}{\\\"\", \"pin_\\u0072oot\": \"/x\"}",
		      "pin_root: duplicate key\n");
	expect_errors("{\"metrics\": {\"m\": {\"params\": {\"a\": 1}}, \"n\": {\"params\":"
		      " {\"a\": 1, \"b\": 2, \"a\": 3}}}}",
		      "metrics.n.params.a: duplicate key\n");
	expect_errors("{\"sinks\": {\"f\": {\"type\": \"json\"}},"
		      " \"metrics\": {\"m\": {\"sinks\": [\"f\", \"f\"]}}}",
		      "metrics.m.sinks[1]: duplicate sink \"f\"\n");
	/* The same key in two objects is no duplicate. */
	expect_errors("{\"metrics\": {\"m\": {\"enabled\": true}, \"n\": {\"enabled\": true}}}",
		      "");
}

/* One pass reports every error of the file, the duplicate key among them. */
static void test_all_errors_in_one_run(void **state)
{
	expect_errors("{\"interval\": 5, \"bogus\": 1, \"emit_zero\": 2,\n"
		      " \"plugin_dirs\": [\"/a\", 7],\n"
		      " \"sinks\": {\"s\": {\"type\": \"statsd\", \"port\": 0}},\n"
		      " \"metrics\": {\"m\": {\"lease\": \"1ms\", \"params\": {\"x\": true},"
		      " \"sinks\": [\"s\", \"t\"]}},\n"
		      " \"self_telemetry\": {\"sinks\": [\"u\"], \"enabled\": true,"
		      " \"enabled\": false}}",
		      "self_telemetry.enabled: duplicate key\n"
		      "interval: expected duration string such as \"10s\", \"5m\", \"24h\", got 5\n"
		      "bogus: unknown key (known keys: plugin_dirs, pin_root, pin_group, "
		      "state_file, control_socket, control_group, interval, emit_zero, "
		      "enable_new_plugins, drop_privileges, attribution_memlock_budget, attribution_release_after, sink_close_timeout, metrics, "
		      "sinks, "
		      "self_telemetry)\n"
		      "emit_zero: expected true or false, got 2\n"
		      "plugin_dirs[1]: expected string, got 7\n"
		      "sinks.s.port: expected integer 1..65535, got 0\n"
		      "metrics.m.lease: must be between 1s and 365d, got \"1ms\"\n"
		      "metrics.m.params.x: expected integer, got true\n"
		      "metrics.m.sinks[1]: unknown sink \"t\"\n"
		      "self_telemetry.sinks[0]: unknown sink \"u\"\n");
}

/* A syntax error names line and column once, without the file name (the
 * caller puts the file name before every message). */
static void test_invalid_json(void **state)
{
	expect_errors("{\"interval\": }",
		      "line 1, column 14: invalid JSON: unexpected token near '}'\n");
	expect_errors("[1, 2]", "(top level): expected object\n");
}

static void test_model(void **state)
{
	struct ktel_config_vars vars = {.plugin_dir = "/p", .state_dir = "/s", .run_dir = "/r"};
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	struct ktel_err err;
	const char *text = "{\"interval\": \"2m\", \"state_file\": \"${state_dir}/st\","
			   " \"control_socket\": \"${run_dir}/c.sock\","
			   " \"enable_new_plugins\": false,"
			   " \"sinks\": {\"a\": {\"type\": \"json\", \"path\": \"-\"},"
			   "             \"b\": {\"type\": \"statsd\", \"port\": 8125}},"
			   " \"metrics\": {\"m\": {\"enabled\": true, \"interval\": \"10s\","
			   "                       \"sinks\": [\"b\"], \"lease\": \"1h\"}}}";

	assert_int_equal(ktel_config__load_string(text, "t", &vars, &cfg, &errs, &err), 0);
	assert_string_equal(cfg->plugin_dirs[0], "/p");
	assert_string_equal(cfg->state_file, "/s/st");
	assert_string_equal(cfg->control_socket, "/r/c.sock");
	assert_int_equal(cfg->interval_ms, 120000);
	assert_int_equal(cfg->n_sinks, 2);
	assert_true(ktel_config__metric_enabled(cfg, "m"));
	assert_false(ktel_config__metric_enabled(cfg, "other"));
	assert_int_equal(ktel_config__metric_interval(cfg, "m"), 10000);
	assert_int_equal(ktel_config__metric_interval(cfg, "other"), 120000);
	assert_int_equal(ktel_config__metric(cfg, "m")->lease_ms, 3600000);
	assert_string_equal(ktel_config__metric(cfg, "m")->sinks[0], "b");
	ktel_config__free(cfg);
}

/*
 * A sink's string options starting with a variable are expanded as the
 * top-level paths are (config/default.json keeps its JSON file under
 * ${state_dir}), before the paths are compared: the same file named through
 * a variable and literally is one path.
 */
static void test_sink_options_expanded(void **state)
{
	char dir[] = "/tmp/ktel-cfg-vars-XXXXXX", text[1024];
	struct ktel_config_vars vars = {.plugin_dir = "/p", .run_dir = "/r"};
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	struct ktel_err err;
	const json_t *o;

	assert_non_null(mkdtemp(dir));
	vars.state_dir = dir;
	if (ktel_config__load_string("{\"state_file\": \"${state_dir}/state.bin\","
				     " \"sinks\": {\"f\": {\"type\": \"json\","
				     " \"path\": \"${state_dir}/records.jsonl\","
				     " \"max_queue\": \"1MiB\"},"
				     " \"s\": {\"type\": \"json\", \"path\": \"${run_dir}/s.jsonl\"}}}",
				     "t", &vars, &cfg, &errs, &err))
		fail_msg("%s", errs.n ? errs.msgs[0] : err.msg);
	assert_int_equal(cfg->n_sinks, 2);
	o = cfg->sinks[0].options;
	snprintf(text, sizeof(text), "%s/records.jsonl", dir);
	assert_string_equal(json_string_value(json_object_get(o, "path")), text);
	assert_string_equal(json_string_value(json_object_get(o, "max_queue")), "1MiB");
	assert_string_equal(json_string_value(json_object_get(cfg->sinks[1].options, "path")),
			    "/r/s.jsonl");
	ktel_config__free(cfg);
	/* The literal path of the state file, through a variable: one path. */
	snprintf(text, sizeof(text),
		 "{\"state_file\": \"%s/x\", \"sinks\": {\"f\": {\"type\": \"json\","
		 " \"path\": \"${state_dir}/x\"}}}",
		 dir);
	assert_int_not_equal(ktel_config__load_string(text, "t", &vars, &cfg, &errs, &err), 0);
	assert_true(errs.n >= 1);
	assert_non_null(strstr(errs.msgs[0], "same path"));
	ktel_config_errors__clear(&errs);
	rmdir(dir);
}

/* metrics.<name>.attribution: the model, its defaults, its errors. */
static void test_attribution(void **state)
{
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	const struct ktel_metric_cfg *mc;
	struct ktel_err err;
	const char *text = "{\"attribution_memlock_budget\": \"8MiB\","
			   " \"metrics\": {\"a\": {\"attribution\": {\"by\": \"cgroup\","
			   " \"depth\": 2, \"top\": 7, \"max_keys\": 64, \"sticky_windows\": 3,"
			   " \"churn_per_hour\": 9}}, \"b\": {\"attribution\": {\"by\": \"app\","
			   " \"allow_per_app_export\": true}},"
			   " \"c\": {}}}";

	(void)state;
	assert_int_equal(ktel_config__load_string(text, "t", NULL, &cfg, &errs, &err), 0);
	assert_int_equal(cfg->attr_memlock_budget, 8 << 20);
	mc = ktel_config__metric(cfg, "a");
	assert_int_equal(mc->attr.by, KTEL_ATTR_BY_CGROUP);
	assert_int_equal(mc->attr.depth, 2);
	assert_int_equal(mc->attr.top, 7);
	assert_int_equal(mc->attr.max_keys, 64);
	assert_int_equal(mc->attr.sticky_windows, 3);
	assert_int_equal(mc->attr.churn_per_hour, 9);
	mc = ktel_config__metric(cfg, "b");
	assert_int_equal(mc->attr.by, KTEL_ATTR_BY_APP);
	assert_int_equal(mc->attr.top, KTEL_ATTR_TOP_DEFAULT);
	assert_int_equal(mc->attr.max_keys, KTEL_ATTR_MAX_KEYS_DEFAULT);
	assert_int_equal(mc->attr.sticky_windows, KTEL_ATTR_STICKY_DEFAULT);
	assert_int_equal(mc->attr.churn_per_hour, 4 * KTEL_ATTR_TOP_DEFAULT);
	assert_int_equal(ktel_config__metric(cfg, "c")->attr.by, KTEL_ATTR_BY_NONE);
	assert_string_equal(ktel_attr_by_name(KTEL_ATTR_BY_USER), "user");
	ktel_config__free(cfg);
	expect_error("{\"metrics\": {\"m\": {\"attribution\": {\"by\": \"pod\"}}}}",
		     "metrics.m.attribution.by: expected one of \"none\", \"cgroup\", \"user\", "
		     "\"app\", \"process\", \"app_class\", got \"pod\"");
	expect_errors("{\"metrics\": {\"m\": {\"attribution\": {\"top\": 0}}}}",
		      "metrics.m.attribution.top: expected integer 1..1000, got 0\n");
	/* A built-in metric without an attribution dimension: refused. */
	expect_error("{\"metrics\": {\"kswapd_latency\": {\"attribution\": {\"by\": \"user\"}}}}",
		     "metrics.kswapd_latency.attribution.by: user: metric kswapd_latency has no "
		     "attribution dimension (metrics that have one: block_io_latency, "
		     "cma_allocation_latency, compaction_duration, direct_reclaim_latency, "
		     "dmabuf_request_sizes, memcg_reclaim_latency, oom_kills, runq_latency)");
	expect_error("{\"metrics\": {\"m\": {\"attribution\": {\"bye\": \"user\"}}}}",
		     "metrics.m.attribution.bye: unknown key (known keys: by, block_subject, depth, "
		     "top, max_keys, "
		     "sticky_windows, churn_per_hour, allow_per_app_export, "
		     "allow_identifying_export)");
}

/* An Android config: its statsd sink writes atoms; "log" is a JSON file. */
#define ANDROID_SINKS                                                              \
	"\"sinks\": {\"statsd\": {\"type\": \"statsd\", \"format\": \"android\", " \
	"\"socket\": \"/dev/socket/statsdw\"}, \"log\": {\"type\": \"json\", \"path\": \"/l\"}}"

/* Load text, which must be valid. */
static struct ktel_config *load_ok(const char *text)
{
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	struct ktel_err err;

	if (ktel_config__load_string(text, "t", NULL, &cfg, &errs, &err))
		fail_msg("%s", errs.n ? errs.msgs[0] : err.msg);
	return cfg;
}

/*
 * What attribution may send where (docs/privacy.md): per app only to the
 * Android statsd sink unless allow_per_app_export; on an Android config no
 * process, cgroup or user unless allow_identifying_export; the Android sink
 * only app and app_class; each refusal names the metric and the sink. An
 * Android config's default top is 10.
 */
static void test_attribution_privacy(void **state)
{
	struct ktel_config *cfg;

	(void)state;
	/* Per app to a JSON sink, on any config. */
	expect_error("{\"sinks\": {\"f\": {\"type\": \"json\", \"path\": \"/f\"}},"
		     " \"metrics\": {\"runq_latency\": {\"attribution\": {\"by\": \"app\"}}}}",
		     "metrics.runq_latency.attribution.by: app: per-app output to sink f (type "
		     "json) is refused: only a statsd sink of format android takes it; set "
		     "metrics.runq_latency.attribution.allow_per_app_export to true to export it "
		     "(docs/privacy.md)");
	/* On an Android config, to every sink: the JSON one is refused. */
	expect_error("{" ANDROID_SINKS ", \"metrics\": {\"runq_latency\": {\"attribution\": "
		     "{\"by\": \"app\"}}}}",
		     "metrics.runq_latency.attribution.by: app: per-app output to sink log (type "
		     "json) is refused: only a statsd sink of format android takes it; set "
		     "metrics.runq_latency.attribution.allow_per_app_export to true to export it "
		     "(docs/privacy.md)");
	/* Process, cgroup and user on an Android config. */
	expect_error("{" ANDROID_SINKS ", \"metrics\": {\"runq_latency\": {\"sinks\": [\"log\"],"
		     " \"attribution\": {\"by\": \"process\"}}}}",
		     "metrics.runq_latency.attribution.by: process: refused on an Android config "
		     "(sink statsd writes Android atoms): a process is named by its pid; set "
		     "metrics.runq_latency.attribution.allow_identifying_export to true to allow "
		     "it (docs/privacy.md)");
	expect_error("{" ANDROID_SINKS ", \"metrics\": {\"oom_kills\": {\"sinks\": [\"log\"],"
		     " \"attribution\": {\"by\": \"cgroup\"}}}}",
		     "metrics.oom_kills.attribution.by: cgroup: refused on an Android config "
		     "(sink statsd writes Android atoms): Android's cgroups are per uid and pid "
		     "(uid_<uid>/pid_<pid>); set metrics.oom_kills.attribution."
		     "allow_identifying_export to true to allow it (docs/privacy.md)");
	expect_error("{" ANDROID_SINKS ", \"metrics\": {\"oom_kills\": {\"sinks\": [\"log\"],"
		     " \"attribution\": {\"by\": \"user\"}}}}",
		     "metrics.oom_kills.attribution.by: user: refused on an Android config (sink "
		     "statsd writes Android atoms): a uid names an app; set metrics.oom_kills."
		     "attribution.allow_identifying_export to true to allow it (docs/privacy.md)");
	/* Allowed, but never as an atom: its field is an integer. */
	expect_errors("{" ANDROID_SINKS ", \"metrics\": {\"oom_kills\": {\"attribution\": "
		      "{\"by\": \"cgroup\", \"allow_identifying_export\": true}}}}",
		      "metrics.oom_kills.attribution.by: cgroup: sink statsd writes Android atoms, "
		      "whose attribution field is an integer: only app or app_class\n");
	/* What passes: classes anywhere; per app to the Android sink alone;
	 * the opt-ins. */
	cfg = load_ok("{" ANDROID_SINKS ", \"metrics\": {\"runq_latency\": {\"attribution\": "
		      "{\"by\": \"app_class\"}}, \"oom_kills\": {\"sinks\": [\"statsd\"],"
		      " \"attribution\": {\"by\": \"app\"}}, \"block_io_latency\": {\"sinks\": "
		      "[\"log\"], \"attribution\": {\"by\": \"cgroup\", "
		      "\"allow_identifying_export\": true}}, \"memcg_reclaim_latency\": "
		      "{\"attribution\": {\"by\": \"app\", \"allow_per_app_export\": true}}}}");
	assert_int_equal(ktel_config__metric(cfg, "runq_latency")->attr.by, KTEL_ATTR_BY_APP_CLASS);
	assert_string_equal(ktel_attr_by_name(KTEL_ATTR_BY_APP_CLASS), "app_class");
	assert_int_equal(ktel_config__metric(cfg, "runq_latency")->attr.top,
			 KTEL_ATTR_TOP_DEFAULT_ANDROID);
	ktel_config__free(cfg);
	/* Not an Android config: by cgroup, user or process anywhere. */
	cfg = load_ok("{\"sinks\": {\"f\": {\"type\": \"json\", \"path\": \"/f\"}},"
		      " \"metrics\": {\"runq_latency\": {\"attribution\": {\"by\": \"process\"}},"
		      " \"oom_kills\": {\"attribution\": {\"by\": \"user\"}}}}");
	assert_int_equal(ktel_config__metric(cfg, "oom_kills")->attr.top, KTEL_ATTR_TOP_DEFAULT);
	ktel_config__free(cfg);
}

static void test_durations_and_sizes(void **state)
{
	uint64_t v;

	assert_int_equal(ktel_parse_duration("250ms", &v), 0);
	assert_int_equal(v, 250);
	assert_int_equal(ktel_parse_duration("24h", &v), 0);
	assert_int_equal(v, 86400000);
	assert_int_equal(ktel_parse_duration("1d", &v), 0);
	assert_int_equal(v, 86400000);
	assert_int_equal(ktel_parse_duration("-1s", &v), -EINVAL);
	assert_int_equal(ktel_parse_duration("s", &v), -EINVAL);
	assert_int_equal(ktel_parse_duration("10", &v), -EINVAL);
	assert_int_equal(ktel_parse_size("10MiB", &v), 0);
	assert_int_equal(v, 10 << 20);
	assert_int_equal(ktel_parse_size("512", &v), 0);
	assert_int_equal(v, 512);
	assert_int_equal(ktel_parse_size("99999999999999999999GiB", &v), -EINVAL);
	assert_int_equal(ktel_parse_size("18446744073GiB", &v), -ERANGE);
}


/* Strict: no leading space, no sign, no overflow (" -18446744073709551516ms"
 * wrapped to 100ms through strtoull). */
static void test_durations_and_sizes_are_strict(void **state)
{
	static const char *const bad[] = {" -18446744073709551516ms",
					  "-18446744073709551516ms",
					  " 5s",
					  "+5s",
					  "\t5s",
					  "-0s",
					  "5 s",
					  "18446744073709551616ms",
					  NULL};
	static const char *const bad_sizes[] = {" -1",   "-1KiB", "+1MiB",
						" 1MiB", "-0",    "18446744073709551616",
						NULL};
	uint64_t v = 7;

	for (size_t i = 0; bad[i]; i++) {
		assert_int_not_equal(ktel_parse_duration(bad[i], &v), 0);
		assert_int_equal(v, 7);
	}
	for (size_t i = 0; bad_sizes[i]; i++) {
		assert_int_not_equal(ktel_parse_size(bad_sizes[i], &v), 0);
		assert_int_equal(v, 7);
	}
	assert_int_equal(ktel_parse_duration("18446744073709551615ms", &v), 0);
	assert_int_equal(ktel_parse_duration("18446744073709552s", &v), -ERANGE);
	expect_errors("{\"interval\": \" -18446744073709551516ms\"}",
		      "interval: expected duration string such as \"10s\", \"5m\", \"24h\", got "
		      "\" -18446744073709551516ms\"\n");
	expect_errors("{\"sinks\": {\"j\": {\"type\": \"json\", \"path\": \"-\", "
		      "\"max_queue\": \"-1KiB\"}}}",
		      "sinks.j.max_queue: expected size such as \"512KiB\", \"10MiB\" or bytes, "
		      "got \"-1KiB\"\n");
}

/* Write len bytes of text to a new file; returns its path (caller frees). */
static char *temp_file(const char *text, size_t len)
{
	char *path = strdup("/tmp/ktel-test-config-XXXXXX");
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

/* Text after a NUL byte is not silently ignored. */
static void test_nul_byte_is_an_error(void **state)
{
	static const char text[] = "{\"interval\": \"10s\"}\0{\"interval\": \"50ms\"}";
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	char *path = temp_file(text, sizeof(text) - 1);
	struct ktel_err err;

	assert_int_equal(ktel_config__load_file(path, NULL, &cfg, &errs, &err), -EINVAL);
	assert_null(cfg);
	assert_int_equal(errs.n, 1);
	assert_string_equal(errs.msgs[0], "byte 19: NUL byte (a config is text; what follows "
					  "it would be ignored)");
	ktel_config_errors__clear(&errs);
	unlink(path);
	free(path);
	path = temp_file(text, strlen(text));
	assert_int_equal(ktel_config__load_file(path, NULL, &cfg, &errs, &err), 0);
	assert_int_equal(cfg->interval_ms, 10000);
	ktel_config__free(cfg);
	unlink(path);
	free(path);
}

/*
 * A sinks list of 60,000 names (and as many sinks) is checked in linear
 * time: it took 14.6 s pairwise. The time is printed, not asserted; the
 * behaviour is: exactly the one duplicate and the one unknown name found.
 */
static void test_long_sink_list(void **state)
{
	enum {
		N = 60000
	};
	size_t cap = (size_t)N * 64 + 256, off = 0;
	char *text = malloc(cap);
	struct timespec t0, t1;
	char want[256];

	assert_non_null(text);
	off += (size_t)snprintf(text + off, cap - off, "{\"sinks\": {");
	for (int i = 0; i < N; i++)
		off += (size_t)snprintf(text + off, cap - off,
					"%s\"s%d\": {\"type\": \"json\", "
					"\"path\": \"-\"}",
					i ? ", " : "", i);
	off += (size_t)snprintf(text + off, cap - off, "}, \"self_telemetry\": {\"sinks\": [");
	for (int i = 0; i < N; i++)
		off += (size_t)snprintf(text + off, cap - off, "\"s%d\", ", i);
	snprintf(text + off, cap - off, "\"s17\", \"nosuch\"]}}");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	snprintf(want, sizeof(want),
		 "self_telemetry.sinks[%d]: duplicate sink \"s17\"\n"
		 "self_telemetry.sinks[%d]: unknown sink \"nosuch\"\n",
		 N, N + 1);
	expect_errors(text, want);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	print_message("%d sinks and a list of %d names validated in %.3f s\n", N, N + 2,
		      (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	free(text);
}

static void test_doc_lists_every_key(void **state)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_int_equal(ktel_config__write_doc(f), 0);
	fclose(f);
	assert_non_null(strstr(out, "| `metrics.<name>.lease` |"));
	assert_non_null(strstr(out, "| `sinks.<name>.port` | integer 1..65535 |"));
	assert_non_null(strstr(out, "| `self_telemetry.interval` |"));
	free(out);
}


/* A string of n copies of c (caller frees). */
static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* {"<key>": "<n copies of c>"} (caller frees), with a sink when key is under one. */
static char *doc_with(const char *fmt, char c, size_t n)
{
	char *v = repeat(c, n), *text;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	if (asprintf(&text, fmt, v) < 0)
		fail_msg("out of memory");
#pragma GCC diagnostic pop
	free(v);
	return text;
}

static void expect_bounded(const char *fmt, char c, size_t ok, size_t bad, const char *want)
{
	char *text = doc_with(fmt, c, ok);

	expect_errors(text, "");
	free(text);
	text = doc_with(fmt, c, bad);
	expect_error(text, want);
	free(text);
}

/* Group names reach NSS (getgrnam_r aborted on 4 MiB): LOGIN_NAME_MAX - 1 bytes.
 * A name of the bound's length passes the bound and then is looked up. */
static void test_group_names_are_bounded(void **state)
{
	char *text = doc_with("{\"pin_group\": \"%s\"}", 'g', 4u << 20), *want;

	expect_errors(text, "pin_group: group name of 4194304 bytes: at most 255 bytes "
			    "(LOGIN_NAME_MAX)\n");
	free(text);
	text = doc_with("{\"control_group\": \"%s\"}", 'g', 256);
	expect_errors(text, "control_group: group name of 256 bytes: at most 255 bytes "
			    "(LOGIN_NAME_MAX)\n");
	free(text);
	text = doc_with("{\"control_group\": \"%s\"}", 'g', 255);
	want = doc_with("control_group: group \"%s\" does not exist on this system", 'g', 255);
	expect_error(text, want);
	free(text);
	free(want);
}

/* Every string is at most PATH_MAX - 1 bytes; expanded paths too. */
static void test_strings_and_paths_are_bounded(void **state)
{
	char *text;

	expect_bounded("{\"state_file\": \"/%s\"}", 's', 4094, 4095,
		       "state_file: string of 4096 bytes: at most 4095 bytes (PATH_MAX)");
	expect_bounded("{\"pin_root\": \"/%s\"}", 'p', 4094, 4095,
		       "pin_root: string of 4096 bytes: at most 4095 bytes (PATH_MAX)");
	expect_bounded("{\"plugin_dirs\": [\"/a\", \"/%s\"]}", 'd', 4094, 4095,
		       "plugin_dirs[1]: string of 4096 bytes: at most 4095 bytes (PATH_MAX)");
	expect_bounded("{\"control_socket\": \"/%s\"}", 'c', 106, 107,
		       "control_socket: \"/ccccccccccccccccccccccccccccccccccccccccccccccccccc"
		       "cccccccc...\" is 108 bytes: at most 107 bytes (the sun_path of a unix "
		       "socket address)");
	expect_bounded("{\"sinks\": {\"j\": {\"type\": \"json\", \"path\": \"/%s\"}}}", 'j', 4094,
		       4095, "sinks.j.path: string of 4096 bytes: at most 4095 bytes (PATH_MAX)");
	text = doc_with("{\"self_telemetry\": {\"sinks\": [\"stdout\", \"%s\"]}}", 'x', 4096);
	expect_error(text, "self_telemetry.sinks[1]: string of 4096 bytes: at most 4095 bytes "
			   "(PATH_MAX)");
	free(text);
}

/* The expansion of ${run_dir} counts: the socket path bind(2) sees. */
static void test_expanded_socket_path_is_bounded(void **state)
{
	struct ktel_config_vars vars = {.run_dir = NULL};
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	char *run = repeat('r', 101);
	struct ktel_err err;

	run[0] = '/';
	vars.run_dir = run;
	assert_int_equal(ktel_config__load_string("{\"control_socket\": \"${run_dir}/c.sock\"}",
						  "t.json", &vars, &cfg, &errs, &err),
			 -EINVAL);
	assert_null(cfg);
	assert_int_equal(errs.n, 1);
	assert_non_null(strstr(errs.msgs[0], "control_socket: "));
	assert_non_null(strstr(errs.msgs[0], " is 108 bytes: at most 107 bytes (the sun_path"));
	ktel_config_errors__clear(&errs);
	run[94] = '\0';
	assert_int_equal(ktel_config__load_string("{\"control_socket\": \"${run_dir}/c.sock\"}",
						  "t.json", &vars, &cfg, &errs, &err),
			 0);
	ktel_config__free(cfg);
	free(run);
}

/* Names of metrics, sinks and params are at most 255 bytes. */
static void test_names_are_bounded(void **state)
{
	expect_bounded("{\"metrics\": {\"%s\": {}}}", 'm', 255, 256,
		       "metrics (a name of 256 bytes): names are at most 255 bytes");
	expect_bounded("{\"metrics\": {\"m\": {\"params\": {\"%s\": 1}}}}", 'k', 255, 300,
		       "metrics.m.params (a name of 300 bytes): names are at most 255 bytes");
}


/* Load text; the warnings joined by newlines (caller frees). The text must be valid. */
static char *warnings_of(const char *text)
{
	struct ktel_config_errors errs = {.want_warnings = true};
	struct ktel_config *cfg = NULL;
	struct ktel_err err;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_int_equal(ktel_config__load_string(text, "t.json", NULL, &cfg, &errs, &err), 0);
	for (size_t i = 0; i < errs.n_warnings; i++)
		fprintf(f, "%s\n", errs.warnings[i]);
	fclose(f);
	ktel_config_errors__clear(&errs);
	ktel_config__free(cfg);
	return out;
}

static void expect_warnings(const char *text, const char *want)
{
	char *got = warnings_of(text);

	if (strcmp(got, want) != 0)
		fail_msg("expected the warnings\n%sgot\n%s", want, got);
	free(got);
}

/*
 * A misspelled metric (within a typo of a built-in one) is an error naming
 * the closest; a metric no installed plugin provides is a warning; a metric
 * of a loaded plugin or of a plugin file in plugin_dirs is neither.
 */
static void test_metric_names(void **state)
{
	static const char *const loaded[] = {"vendor_gpu_latency"};
	char dir[] = "/tmp/ktel-test-plugins-XXXXXX", path[128], text[512];
	FILE *f;

	expect_errors("{\"metrics\": {\"runq_latncy\": {\"enabled\": false}}}",
		      "metrics.runq_latncy: unknown metric (did you mean runq_latency?)\n");
	expect_errors("{\"metrics\": {\"oom_kill\": {}, \"compaction_duratoin\": {}}}",
		      "metrics.oom_kill: unknown metric (did you mean oom_kills?)\n"
		      "metrics.compaction_duratoin: unknown metric (did you mean "
		      "compaction_duration?)\n");
	assert_null(ktel_config_closest_metric("oom"));
	assert_null(ktel_config_closest_metric("vendor_gpu_latency"));
	expect_warnings("{\"metrics\": {\"vendor_gpu_latency\": {}, \"runq_latency\": {}}}",
			"metrics.vendor_gpu_latency: no installed plugin provides this metric and "
			"it is not one of ktelemetry's own: its settings apply once a plugin "
			"providing it is installed\n"
			"metrics.runq_latency: no installed plugin provides this metric (no "
			"runq_latency.so in plugin_dirs): its settings apply once the plugin is "
			"installed\n");
	/* Provided by a loaded plugin (the running daemon's), or a file. */
	ktel_config_set_installed_metrics(loaded, 1);
	expect_warnings("{\"metrics\": {\"vendor_gpu_latency\": {}}}", "");
	ktel_config_set_installed_metrics(NULL, 0);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/runq_latency.so", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(text, sizeof(text),
		 "{\"plugin_dirs\": [\"%s\"], \"metrics\": "
		 "{\"runq_latency\": {}}}",
		 dir);
	expect_warnings(text, "");
	unlink(path);
	rmdir(dir);
}

/* ---- the daemon's sink tables: required keys, relations between keys ---- */

/* Two sinks on one port or path, a stream socket that is the control socket:
 * refused by the loader that start, reload and --check-config share,
 * comparing resolved paths. */
static void test_exclusive_ports_and_paths(void **state)
{
	char dir[] = "/tmp/ktel-test-claims-XXXXXX", text[2048];

	assert_non_null(mkdtemp(dir));
	snprintf(text, sizeof(text),
		 "{\"control_socket\": \"%s/c.sock\", \"sinks\": {"
		 "\"a\": {\"type\": \"stream\", \"socket\": \"%s//c.sock\"},"
		 "\"b\": {\"type\": \"stream\", \"socket\": \"%s/./s.sock\"},"
		 "\"c\": {\"type\": \"stream\", \"socket\": \"%s/s.sock\"},"
		 "\"j1\": {\"type\": \"json\", \"path\": \"%s/o.jsonl\"},"
		 "\"j2\": {\"type\": \"json\", \"path\": \"%s/../%s/o.jsonl\"},"
		 "\"o1\": {\"type\": \"json\", \"path\": \"-\"},"
		 "\"o2\": {\"type\": \"json\", \"path\": \"-\"},"
		 "\"p1\": {\"type\": \"prometheus\"},"
		 "\"p2\": {\"type\": \"prometheus\", \"listen\": \"0.0.0.0\"},"
		 "\"p3\": {\"type\": \"prometheus\", \"port\": 9000, \"listen\": \"127.0.0.1\"},"
		 "\"p4\": {\"type\": \"prometheus\", \"port\": 9000, \"listen\": \"127.0.0.2\"},"
		 "\"p5\": {\"type\": \"prometheus\", \"port\": 0},"
		 "\"p6\": {\"type\": \"prometheus\", \"port\": 0}}}",
		 dir, dir, dir, dir, dir, dir, strrchr(dir, '/') + 1);
	{
		char want[2048];

		snprintf(want, sizeof(want),
			 "sinks.a.socket: same path %s/c.sock as control_socket: only one "
			 "can bind or write it\n"
			 "sinks.c.socket: same path %s/s.sock as sinks.b.socket: only one "
			 "can bind or write it\n"
			 "sinks.j2.path: same path %s/o.jsonl as sinks.j1.path: only one can bind "
			 "or write it\n"
			 "sinks.p2.port: same TCP port 9464 as sinks.p1.port: only one can listen "
			 "on it\n",
			 dir, dir, dir);
		expect_errors(text, want);
	}
	/* Different ports, "-" twice, port 0 twice, two addresses: fine. */
	snprintf(text, sizeof(text),
		 "{\"control_socket\": \"%s/c.sock\", \"sinks\": {"
		 "\"b\": {\"type\": \"stream\", \"socket\": \"%s/s.sock\"},"
		 "\"o1\": {\"type\": \"json\", \"path\": \"-\"},"
		 "\"o2\": {\"type\": \"json\", \"path\": \"-\"},"
		 "\"p1\": {\"type\": \"prometheus\"},"
		 "\"p2\": {\"type\": \"prometheus\", \"listen\": \"0.0.0.0\", \"port\": 9465}}}",
		 dir, dir);
	expect_errors(text, "");
	rmdir(dir);
}

/* A unix socket bound at dir/name; its fd. */
static int bind_unix(const char *dir, const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/*
 * The state file, the sinks' files and their rotated names, the sockets and
 * the pin root are one set of paths: none may be another, a link to
 * another, or a name another's rotation moves its file to; a socket path
 * may not be an existing file of another kind, a JSON path not a directory.
 */
static void test_paths_cannot_collide(void **state)
{
	char dir[] = "/tmp/ktel-test-paths-XXXXXX", text[2048], want[2048], path[600];
	const char *rot = "\"rotate_bytes\": \"1MiB\"";

	assert_non_null(mkdtemp(dir));
	/* The state file is the sink's file. */
	snprintf(text, sizeof(text),
		 "{\"state_file\": \"%s/o.jsonl\", \"control_socket\": \"%s/c.sock\", "
		 "\"sinks\": {\"j\": {\"type\": \"json\", \"path\": \"%s/./o.jsonl\"}}}",
		 dir, dir, dir);
	snprintf(want, sizeof(want),
		 "sinks.j.path: same path %s/o.jsonl as state_file: only one can bind or write "
		 "it\n",
		 dir);
	expect_errors(text, want);
	/* One of its rotated names (keep 3: .1 .. .3, plain, .gz, .gz.tmp). */
	for (int k = 1; k <= 4; k++) {
		for (int e = 0; e < 3; e++) {
			static const char *const ext[] = {"", ".gz", ".gz.tmp"};

			snprintf(text, sizeof(text),
				 "{\"state_file\": \"%s/o.jsonl.%d%s\", \"control_socket\": "
				 "\"%s/c.sock\", \"sinks\": {\"j\": {\"type\": \"json\", \"path\": "
				 "\"%s/o.jsonl\", \"keep\": 3, %s}}}",
				 dir, k, ext[e], dir, dir, rot);
			if (k > 3) {
				expect_errors(text, "");
				continue;
			}
			snprintf(want, sizeof(want),
				 "state_file: %s/o.jsonl.%d%s is a name sinks.j.path rotates its "
				 "file to (keep 3): the rotation would replace it\n",
				 dir, k, ext[e]);
			expect_errors(text, want);
		}
	}
	/* Without rotation the same name is free; the default keep is 5. */
	snprintf(text, sizeof(text),
		 "{\"state_file\": \"%s/o.jsonl.1\", \"control_socket\": \"%s/c.sock\", "
		 "\"sinks\": {\"j\": {\"type\": \"json\", \"path\": \"%s/o.jsonl\"}}}",
		 dir, dir, dir);
	expect_errors(text, "");
	snprintf(text, sizeof(text),
		 "{\"state_file\": \"%s/o.jsonl.5\", \"control_socket\": \"%s/c.sock\", "
		 "\"sinks\": {\"j\": {\"type\": \"json\", \"path\": \"%s/o.jsonl\", %s}}}",
		 dir, dir, dir, rot);
	snprintf(want, sizeof(want),
		 "state_file: %s/o.jsonl.5 is a name sinks.j.path rotates its file to (keep "
		 "5): the rotation would replace it\n",
		 dir);
	expect_errors(text, want);
	/* A stream socket on the state file, another JSON sink's rotated name. */
	snprintf(text, sizeof(text),
		 "{\"state_file\": \"%s/st\", \"control_socket\": \"%s/c.sock\", "
		 "\"sinks\": {\"s\": {\"type\": \"stream\", \"socket\": \"%s/st\"}, "
		 "\"j\": {\"type\": \"json\", \"path\": \"%s/o\", %s}, "
		 "\"k\": {\"type\": \"json\", \"path\": \"%s/o.2.gz\"}}}",
		 dir, dir, dir, dir, rot, dir);
	snprintf(want, sizeof(want),
		 "sinks.s.socket: same path %s/st as state_file: only one can bind or write it\n"
		 "sinks.k.path: %s/o.2.gz is a name sinks.j.path rotates its file to (keep 5): "
		 "the rotation would replace it\n",
		 dir, dir);
	expect_errors(text, want);
	/* A hard link to the sink's file; the control socket on a regular
	 * file; a JSON path that is a directory. */
	snprintf(path, sizeof(path), "%s/o.jsonl", dir);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	snprintf(path, sizeof(path), "%s/st.bin", dir);
	assert_int_equal(link(strcat(strcpy(want, dir), "/o.jsonl"), path), 0);
	snprintf(text, sizeof(text),
		 "{\"state_file\": \"%s/st.bin\", \"control_socket\": \"%s/o.jsonl\", "
		 "\"sinks\": {\"j\": {\"type\": \"json\", \"path\": \"%s/o.jsonl\"}, "
		 "\"d\": {\"type\": \"json\", \"path\": \"%s\"}}}",
		 dir, dir, dir, dir);
	snprintf(want, sizeof(want),
		 "control_socket: same file %s/o.jsonl (linked under two names) as state_file: "
		 "only one can bind or write it\n"
		 "control_socket: %s/o.jsonl exists and is not a unix socket: the daemon binds "
		 "a socket there and never replaces another file\n"
		 "sinks.j.path: same path %s/o.jsonl as control_socket: only one can bind or "
		 "write it\n"
		 "sinks.d.path: %s is a directory: the sink appends to a file\n",
		 dir, dir, dir, dir);
	expect_errors(text, want);
	/* An existing socket is fine for a socket, not for a JSON sink. */
	{
		int fd1 = bind_unix(dir, "live.sock"), fd2 = bind_unix(dir, "other.sock");

		snprintf(text, sizeof(text),
			 "{\"control_socket\": \"%s/live.sock\", \"sinks\": {\"j\": {\"type\": "
			 "\"json\", \"path\": \"%s/other.sock\"}}}",
			 dir, dir);
		snprintf(want, sizeof(want),
			 "sinks.j.path: %s/other.sock is a unix socket: the sink appends to a "
			 "file\n",
			 dir);
		expect_errors(text, want);
		close(fd1);
		close(fd2);
		snprintf(path, sizeof(path), "%s/live.sock", dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/other.sock", dir);
		unlink(path);
	}
	/* Within the pin root. */
	snprintf(text, sizeof(text),
		 "{\"pin_root\": \"%s/pins\", \"state_file\": \"%s/pins/state.bin\", "
		 "\"control_socket\": \"%s/c.sock\"}",
		 dir, dir, dir);
	snprintf(want, sizeof(want),
		 "state_file: %s/pins/state.bin is within pin_root %s/pins: the pin root holds "
		 "only the daemon's BPF pins\n",
		 dir, dir);
	expect_errors(text, want);
	unlink(path);
	snprintf(path, sizeof(path), "%s/o.jsonl", dir);
	unlink(path);
	rmdir(dir);
}

/* --check-config's pin_root check: what ktel_bpffs_ensure refuses at start. */
static void test_pin_root_check(void **state)
{
	struct ktel_err err;

	assert_int_equal(ktel_pin_root_check("pins", "/sys/fs/bpf", &err), -EINVAL);
	assert_string_equal(err.msg, "pin_root pins: must be an absolute path");
	assert_int_equal(ktel_pin_root_check("/tmp/ktel-no-such/pins", "/sys/fs/bpf", &err),
			 -ENOTSUP);
	assert_string_equal(err.msg, "pin_root /tmp/ktel-no-such/pins: not on a bpf file system "
				     "(/tmp is on another file system; pins live below a bpffs "
				     "mount such as /sys/fs/bpf)");
	/* Below the mount point the daemon mounts bpffs when none is there. */
	assert_int_equal(ktel_pin_root_check("/tmp/ktel-no-such/pins", "/tmp", &err), 0);
}


static int setup_real_sinks(void **state)
{
	ktel_sinks_register_schemas();
	return 0;
}

/* A sink: {"sinks": {"<name>": <body>}}. */
static char *sink_doc(const char *name, const char *body)
{
	char *text;

	if (asprintf(&text, "{\"sinks\": {\"%s\": %s}}", name, body) < 0)
		fail_msg("out of memory");
	return text;
}

static void expect_sink_errors(const char *name, const char *body, const char *want)
{
	char *text = sink_doc(name, body);

	expect_errors(text, want);
	free(text);
}

static void test_sink_required_keys(void **state)
{
	expect_sink_errors("j", "{\"type\": \"json\", \"fsync\": true}",
			   "sinks.j.path: required\n");
	expect_sink_errors("s", "{\"type\": \"stream\"}", "sinks.s.socket: required\n");
	expect_sink_errors("j", "{\"type\": \"json\", \"path\": \"-\"}", "");
	expect_sink_errors("s", "{\"type\": \"stream\", \"socket\": \"/run/k.sock\"}", "");
}

static void test_sink_excludes(void **state)
{
	expect_sink_errors("d", "{\"type\": \"statsd\", \"host\": \"::1\", \"socket\": \"/x\"}",
			   "sinks.d.host: not allowed with socket (choose UDP or a unix socket)\n");
	expect_sink_errors("d",
			   "{\"type\": \"statsd\", \"socket\": \"/x\", \"port\": 9,"
			   " \"host\": \"h\"}",
			   "sinks.d.host: not allowed with socket (choose UDP or a unix socket)\n"
			   "sinks.d.port: not allowed with socket (choose UDP or a unix socket)\n");
	expect_sink_errors("d",
			   "{\"type\": \"statsd\", \"format\": \"android\", \"port\": 9,"
			   " \"tags\": \"dotted\"}",
			   "sinks.d.port: not allowed when format is \"android\" (it writes to a "
			   "unix socket; set socket)\n"
			   "sinks.d.tags: not allowed when format is \"android\" (applies to format "
			   "\"statsd\" only)\n");
	expect_sink_errors("j",
			   "{\"type\": \"json\", \"path\": \"-\", \"rotate_bytes\": \"1MiB\","
			   " \"keep\": 2}",
			   "sinks.j.rotate_bytes: not allowed when path is \"-\" (rotation needs a "
			   "file path, not \"-\")\n"
			   "sinks.j.keep: not allowed when path is \"-\" (rotation needs a file "
			   "path, not \"-\")\n");
	expect_sink_errors("d", "{\"type\": \"statsd\", \"socket\": \"/x\"}", "");
	expect_sink_errors("d", "{\"type\": \"statsd\", \"format\": \"android\"}", "");
	expect_sink_errors("d", "{\"type\": \"statsd\", \"host\": \"::1\", \"port\": 9}", "");
}

static void test_sink_requires(void **state)
{
	expect_sink_errors("j",
			   "{\"type\": \"json\", \"path\": \"/l\", \"keep\": 3,"
			   " \"compress\": true}",
			   "sinks.j.keep: requires rotate_bytes (keep and compress apply to "
			   "rotation)\n"
			   "sinks.j.compress: requires rotate_bytes (keep and compress apply to "
			   "rotation)\n");
	/* compress false asks for nothing, as in the sink. */
	expect_sink_errors("j", "{\"type\": \"json\", \"path\": \"/l\", \"compress\": false}", "");
	expect_sink_errors("j",
			   "{\"type\": \"json\", \"path\": \"/l\", \"keep\": 3,"
			   " \"compress\": true, \"rotate_bytes\": \"10MiB\"}",
			   "");
}

/* Orders between two keys, either of them at its documented default. */
static void test_sink_not_below(void **state)
{
	expect_sink_errors("d",
			   "{\"type\": \"statsd\", \"reconnect_min\": \"2s\","
			   " \"reconnect_max\": \"1s\"}",
			   "sinks.d.reconnect_max: must not be below reconnect_min "
			   "(\"1s\" < \"2s\")\n");
	expect_sink_errors("d", "{\"type\": \"statsd\", \"reconnect_min\": \"1m\"}",
			   "sinks.d.reconnect_min: must not be above reconnect_max "
			   "(\"1m\" > default 30s)\n");
	expect_sink_errors("d",
			   "{\"type\": \"statsd\", \"max_packet\": 8192,"
			   " \"max_queue\": \"4KiB\"}",
			   "sinks.d.max_queue: must not be below max_packet (\"4KiB\" < 8192): "
			   "it must hold one datagram\n");
	expect_sink_errors("r",
			   "{\"type\": \"stream\", \"socket\": \"/k\","
			   " \"backlog_records\": 5000}",
			   "sinks.r.backlog_records: must not be above ring_records "
			   "(5000 > default 4096)\n");
	expect_sink_errors("r",
			   "{\"type\": \"stream\", \"socket\": \"/k\","
			   " \"backlog_records\": 5000, \"ring_records\": 5000}",
			   "");
	/* A malformed value has its own error and no second one. */
	expect_sink_errors("d", "{\"type\": \"statsd\", \"reconnect_max\": \"soon\"}",
			   "sinks.d.reconnect_max: expected duration string such as \"10s\", "
			   "\"5m\", \"24h\", got \"soon\"\n");
}

static void test_sink_string_forms(void **state)
{
	char long_path[160], body[256];

	expect_sink_errors("p", "{\"type\": \"prometheus\", \"listen\": \"localhost\"}",
			   "sinks.p.listen: \"localhost\" is not an IPv4 or IPv6 address (a literal, "
			   "not a host name)\n");
	expect_sink_errors("p", "{\"type\": \"prometheus\", \"listen\": \"::1\"}", "");
	expect_sink_errors("p", "{\"type\": \"prometheus\", \"listen\": \"0.0.0.0\"}", "");
	expect_sink_errors("p", "{\"type\": \"prometheus\", \"path\": \"metrics\"}",
			   "sinks.p.path: expected a URL path starting with '/', got \"metrics\"\n");
	memset(long_path, 'a', sizeof(long_path));
	long_path[0] = '/';
	long_path[108] = '\0'; /* 108 bytes: one more than sun_path holds */
	snprintf(body, sizeof(body), "{\"type\": \"stream\", \"socket\": \"%s\"}", long_path);
	expect_sink_errors("s", body, "sinks.s.socket: unix socket path longer than 107 bytes\n");
	long_path[107] = '\0';
	snprintf(body, sizeof(body), "{\"type\": \"statsd\", \"socket\": \"%s\"}", long_path);
	expect_sink_errors("s", body, "");
}


/* The sinks' strings handed to libraries: group, host, prefix, URL path. */
static void test_sink_strings_are_bounded(void **state)
{
	expect_bounded("{\"sinks\": {\"s\": {\"type\": \"stream\", \"socket\": \"/k\","
		       " \"group\": \"0%s\"}}}",
		       '0', 3, 4u << 20,
		       "sinks.s.group: group name of 4194305 bytes: at most 255 bytes "
		       "(LOGIN_NAME_MAX)");
	expect_bounded("{\"sinks\": {\"d\": {\"type\": \"statsd\", \"host\": \"%s.example\"}}}",
		       'h', 63, 64,
		       "sinks.d.host: \"hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh\" is "
		       "not a host name (at most 253 bytes, labels of 1..63 letters, digits, '-' "
		       "and '_', dot-separated) or an IP address");
	expect_sink_errors("d", "{\"type\": \"statsd\", \"host\": \"::1\"}", "");
	expect_sink_errors("d", "{\"type\": \"statsd\", \"host\": \"a..b\"}",
			   "sinks.d.host: \"a..b\" is not a host name (at most 253 bytes, labels "
			   "of 1..63 letters, digits, '-' and '_', dot-separated) or an IP address\n");
	expect_bounded("{\"sinks\": {\"d\": {\"type\": \"statsd\", \"prefix\": \"%s\"}}}", 'p', 255,
		       256,
		       "sinks.d.prefix: 256 bytes: at most 255 bytes (a metric "
		       "name prefix)");
	expect_bounded("{\"sinks\": {\"p\": {\"type\": \"prometheus\", \"prefix\": \"%s\"}}}", 'p',
		       255, 256,
		       "sinks.p.prefix: 256 bytes: at most 255 bytes (a metric "
		       "name prefix)");
	expect_bounded("{\"sinks\": {\"p\": {\"type\": \"prometheus\", \"path\": \"/%s\"}}}", 'u',
		       1023, 1024, "sinks.p.path: 1025 bytes: at most 1024 bytes (a URL path)");
}

/* A sink checks its options at open with the same rules and messages. */
static void test_sink_open_uses_the_same_rules(void **state)
{
	json_t *opts = json_pack("{ss ss ss}", "type", "statsd", "host", "::1", "socket", "/x");
	struct ktel_err err;

	assert_int_equal(ktel_config_check_options(opts, ktel_sink_type_find("statsd")->options,
						   "sinks.d", &err),
			 -EINVAL);
	assert_string_equal(err.msg, "sinks.d.host: not allowed with socket (choose UDP or a "
				     "unix socket)");
	json_decref(opts);
	opts = json_pack("{ss}", "type", "json");
	assert_int_equal(ktel_config_check_options(opts, ktel_sink_type_find("json")->options,
						   "sinks.j", &err),
			 -EINVAL);
	assert_string_equal(err.msg, "sinks.j.path: required");
	json_decref(opts);
}

/* A sink error among others, a duplicate key among them: all in one pass. */
static void test_sink_errors_with_the_rest(void **state)
{
	expect_errors("{\"sinks\": {\"j\": {\"type\": \"json\", \"keep\": 2},\n"
		      "  \"d\": {\"type\": \"statsd\", \"socket\": \"/x\", \"port\": 1},\n"
		      "  \"p\": {\"type\": \"prometheus\", \"listen\": \"example.org\","
		      " \"listen\": \"h\"}},\n"
		      " \"interval\": \"50ms\",\n"
		      " \"self_telemetry\": {\"sinks\": [\"j\", \"x\"]}}",
		      "sinks.p.listen: duplicate key\n"
		      "sinks.j.path: required\n"
		      "sinks.j.keep: requires rotate_bytes (keep and compress apply to rotation)\n"
		      "sinks.d.port: not allowed with socket (choose UDP or a unix socket)\n"
		      "sinks.p.listen: \"h\" is not an IPv4 or IPv6 address (a literal, not a "
		      "host name)\n"
		      "interval: must be between 100ms and 365d, got \"50ms\"\n"
		      "self_telemetry.sinks[1]: unknown sink \"x\"\n");
}

/*
 * Every shipped example is a valid document: the checks of a machine
 * (directories, pin root) are the integration test test_examples', which
 * moves the example's paths into a sandbox first.
 */
static int is_json_file(const struct dirent *e)
{
	size_t len = strlen(e->d_name);

	return len > 5 && strcmp(e->d_name + len - 5, ".json") == 0;
}

static void test_examples_are_valid(void **state)
{
	const struct ktel_config_vars vars = {"/usr/lib/ktelemetry/plugins", "/var/lib/ktelemetry",
					      "/run/ktelemetry"};
	struct dirent **list;
	char path[1024];
	int n = scandir(KTEL_SOURCE_DIR "/config/examples", &list, is_json_file, alphasort);

	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		struct ktel_config_errors errs = {0};
		struct ktel_config *cfg = NULL;
		struct ktel_err err;
		int r;

		snprintf(path, sizeof(path), "%s/config/examples/%s", KTEL_SOURCE_DIR,
			 list[i]->d_name);
		r = ktel_config__load_file(path, &vars, &cfg, &errs, &err);
		for (size_t k = 0; k < errs.n; k++)
			print_error("%s: %s\n", path, errs.msgs[k]);
		assert_int_equal(r, 0);
		ktel_config__free(cfg);
		ktel_config_errors__clear(&errs);
		free(list[i]);
	}
	free(list);
}

/* docs/config.md lists the rules under each sink type's table. */
static void test_doc_lists_sink_rules(void **state)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_int_equal(ktel_config__write_doc(f), 0);
	fclose(f);
	assert_non_null(strstr(out, "\n- `socket` excludes `host`, `port`: choose UDP or a "
				    "unix socket.\n"));
	assert_non_null(strstr(out, "\n- `keep` requires `rotate_bytes`: keep and compress "
				    "apply to rotation.\n"));
	assert_non_null(strstr(out, "\n- `listen` must be an IPv4 or IPv6 address literal.\n"));
	assert_non_null(strstr(out, "| `sinks.<name>.path` | non-empty string | `(required)` |"));
	free(out);
}

/*
 * metrics.<name>.attribution.block_subject: auto by default; charged only
 * by cgroup (another kind has no charged form: an error naming the rule),
 * accepted with by none (nothing is attributed); set on a built-in metric
 * with no block I/O subject to choose, ignored with a warning that says so.
 */
static void test_block_subject(void **state)
{
	static const char *const no_charged_form[] = {"user", "app", "process", "app_class"};
	struct ktel_config *cfg;
	char text[400], want[400], *got;

	(void)state;
	cfg = load_ok("{\"metrics\": {\"block_io_latency\": {\"attribution\": {\"by\": "
		      "\"cgroup\"}}, \"a\": {\"attribution\": {\"by\": \"cgroup\", "
		      "\"block_subject\": \"submitter\"}}, \"b\": {\"attribution\": {\"by\": "
		      "\"cgroup\", \"block_subject\": \"charged\"}}, \"c\": {\"attribution\": "
		      "{\"by\": \"user\", \"block_subject\": \"submitter\"}}, \"d\": "
		      "{\"attribution\": {\"block_subject\": \"charged\"}}}}");
	assert_int_equal(ktel_config__metric(cfg, "block_io_latency")->attr.block_subject,
			 KTEL_ATTR_SUBJECT_AUTO);
	assert_int_equal(ktel_config__metric(cfg, "a")->attr.block_subject,
			 KTEL_ATTR_SUBJECT_SUBMITTER);
	assert_int_equal(ktel_config__metric(cfg, "b")->attr.block_subject,
			 KTEL_ATTR_SUBJECT_CHARGED);
	assert_int_equal(ktel_config__metric(cfg, "c")->attr.block_subject,
			 KTEL_ATTR_SUBJECT_SUBMITTER);
	assert_int_equal(ktel_config__metric(cfg, "d")->attr.block_subject,
			 KTEL_ATTR_SUBJECT_CHARGED);
	assert_int_equal(ktel_config__metric(cfg, "d")->attr.by, KTEL_ATTR_BY_NONE);
	ktel_config__free(cfg);
	assert_string_equal(ktel_attr_subject_name(KTEL_ATTR_SUBJECT_AUTO), "auto");
	assert_string_equal(ktel_attr_subject_name(KTEL_ATTR_SUBJECT_SUBMITTER), "submitter");
	assert_string_equal(ktel_attr_subject_name(KTEL_ATTR_SUBJECT_CHARGED), "charged");
	expect_error("{\"metrics\": {\"m\": {\"attribution\": {\"by\": \"cgroup\", "
		     "\"block_subject\": \"bio\"}}}}",
		     "metrics.m.attribution.block_subject: expected one of \"auto\", "
		     "\"submitter\", \"charged\", got \"bio\"");
	for (size_t i = 0; i < sizeof(no_charged_form) / sizeof(no_charged_form[0]); i++) {
		snprintf(text, sizeof(text),
			 "{\"metrics\": {\"block_io_latency\": {\"attribution\": {\"by\": "
			 "\"%s\", \"block_subject\": \"charged\"}}}}",
			 no_charged_form[i]);
		snprintf(want, sizeof(want),
			 "metrics.block_io_latency.attribution.block_subject: charged: only with "
			 "by cgroup (the kernel charges block I/O to a cgroup; by %s has no "
			 "charged form): use submitter or auto",
			 no_charged_form[i]);
		expect_error(text, want);
	}
	/* No choice on a built-in metric other than block I/O: ignored, said
	 * (among the warnings about plugins this machine has not installed). */
	got = warnings_of("{\"metrics\": {\"runq_latency\": {\"attribution\": {\"by\": "
			  "\"cgroup\", \"block_subject\": \"charged\"}}}}");
	assert_non_null(strstr(got, "metrics.runq_latency.attribution.block_subject: charged: "
				    "ignored: metric runq_latency has no block I/O subject to "
				    "choose (only block_io_latency has)\n"));
	free(got);
	got = warnings_of("{\"metrics\": {\"block_io_latency\": {\"attribution\": {\"by\": "
			  "\"cgroup\", \"block_subject\": \"charged\"}}}}");
	assert_null(strstr(got, "block_subject"));
	free(got);
	/* A vendor's metric is judged when its plugin loads. */
	got = warnings_of("{\"metrics\": {\"vendor_io\": {\"attribution\": {\"by\": "
			  "\"cgroup\", \"block_subject\": \"submitter\"}}}}");
	assert_null(strstr(got, "block_subject"));
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrong_type_names_path_and_form),
		cmocka_unit_test(test_array_errors_name_the_index),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_out_of_range_states_the_range),
		cmocka_unit_test(test_unknown_sink_and_type),
		cmocka_unit_test(test_self_telemetry_sinks),
		cmocka_unit_test(test_params_are_integers),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_all_errors_in_one_run),
		cmocka_unit_test(test_invalid_json),
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_sink_options_expanded),
		cmocka_unit_test(test_attribution),
		cmocka_unit_test(test_attribution_privacy),
		cmocka_unit_test(test_block_subject),
		cmocka_unit_test(test_durations_and_sizes),
		cmocka_unit_test(test_durations_and_sizes_are_strict),
		cmocka_unit_test(test_nul_byte_is_an_error),
		cmocka_unit_test(test_long_sink_list),
		cmocka_unit_test(test_doc_lists_every_key),
		cmocka_unit_test(test_group_names_are_bounded),
		cmocka_unit_test(test_strings_and_paths_are_bounded),
		cmocka_unit_test(test_expanded_socket_path_is_bounded),
		cmocka_unit_test(test_names_are_bounded),
		cmocka_unit_test(test_metric_names),
	};

	const struct CMUnitTest sink_tests[] = {
		cmocka_unit_test(test_sink_required_keys),
		cmocka_unit_test(test_sink_excludes),
		cmocka_unit_test(test_sink_requires),
		cmocka_unit_test(test_sink_not_below),
		cmocka_unit_test(test_sink_string_forms),
		cmocka_unit_test(test_sink_strings_are_bounded),
		cmocka_unit_test(test_exclusive_ports_and_paths),
		cmocka_unit_test(test_paths_cannot_collide),
		cmocka_unit_test(test_pin_root_check),
		cmocka_unit_test(test_sink_open_uses_the_same_rules),
		cmocka_unit_test(test_sink_errors_with_the_rest),
		cmocka_unit_test(test_doc_lists_sink_rules),
		cmocka_unit_test(test_examples_are_valid),
	};
	int failed = cmocka_run_group_tests_name("schema", tests, setup, NULL);

	return failed + cmocka_run_group_tests_name("sinks", sink_tests, setup_real_sinks, NULL);
}
