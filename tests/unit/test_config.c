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

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static const struct ktel_cfg_key json_keys[] = {
	{"path", KTEL_CFG_STRING, .doc = "output"},
	{"max_queue", KTEL_CFG_SIZE, 1024, 1 << 30, .doc = "queue bound"},
	{NULL},
};
static const struct ktel_cfg_key statsd_keys[] = {
	{"port", KTEL_CFG_INT, 1, 65535, .doc = "port"},
	{"host", KTEL_CFG_STRING, .doc = "host"},
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

static void expect_error(const char *text, const char *want)
{
	char *got = errors_of(text);

	if (!strstr(got, want))
		fail_msg("expected error\n  %s\ngot\n  %s", want, got);
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
	expect_error("{\"plugin_dirs\": [\"/a\", 3]}",
		     "plugin_dirs: expected array of strings, got an array");
	expect_error("{\"sinks\": {\"f\": {\"type\": \"json\", \"max_queue\": \"lots\"}}}",
		     "sinks.f.max_queue: expected size such as \"512KiB\", \"10MiB\" or bytes, "
		     "got \"lots\"");
}

static void test_unknown_key(void **state)
{
	expect_error("{\"intreval\": \"10s\"}", "intreval: unknown key (known keys: plugin_dirs,");
	expect_error("{\"sinks\": {\"f\": {\"type\": \"json\", \"pth\": \"x\"}}}",
		     "sinks.f.pth: unknown key (known keys: type, path, max_queue)");
	expect_error("{\"metrics\": {\"m\": {\"enabeld\": true}}}",
		     "metrics.m.enabeld: unknown key (known keys: enabled,");
}

static void test_out_of_range(void **state)
{
	expect_error("{\"interval\": \"1ms\"}", "interval: expected duration string");
	expect_error("{\"metrics\": {\"m\": {\"lease\": \"10ms\"}}}",
		     "metrics.m.lease: expected duration string");
}

static void test_unknown_sink_and_type(void **state)
{
	expect_error("{\"sinks\": {\"f\": {\"type\": \"json\"}}, "
		     "\"metrics\": {\"m\": {\"sinks\": [\"f\", \"nope\"]}}}",
		     "metrics.m.sinks[1]: unknown sink \"nope\"");
	expect_error("{\"sinks\": {\"f\": {\"type\": \"carrier-pigeon\"}}}",
		     "sinks.f.type: expected one of \"json\", \"statsd\", got \"carrier-pigeon\"");
	expect_error("{\"sinks\": {\"f\": {\"path\": \"x\"}}}",
		     "sinks.f.type: required (one of \"json\", \"statsd\")");
	expect_error("{\"sinks\": {}}", "sinks: expected at least one sink");
}

static void test_duplicates(void **state)
{
	expect_error("{\"sinks\": {\"f\": {\"type\": \"json\"}, \"f\": {\"type\": \"json\"}}}",
		     "t.json:1:");
	expect_error("{\"sinks\": {\"f\": {\"type\": \"json\"}}, "
		     "\"metrics\": {\"m\": {\"sinks\": [\"f\", \"f\"]}}}",
		     "metrics.m.sinks[1]: duplicate sink \"f\"");
}

static void test_all_errors_in_one_run(void **state)
{
	char *got = errors_of("{\"interval\": 5, \"bogus\": 1, \"emit_zero\": 2,"
			      " \"sinks\": {\"s\": {\"type\": \"statsd\", \"port\": 0}}}");
	size_t lines = 0;

	for (char *c = got; *c; c++)
		lines += *c == '\n';
	assert_int_equal(lines, 4);
	free(got);
}

static void test_invalid_json(void **state)
{
	expect_error("{\"interval\": }", "t.json:1:");
	expect_error("[1, 2]", "(top level): expected object");
}

static void test_model(void **state)
{
	struct ktel_config_vars vars = {.plugin_dir = "/p", .state_dir = "/s"};
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	struct ktel_err err;
	const char *text =
		"{\"interval\": \"2m\", \"state_file\": \"${state_dir}/st\","
		" \"enable_new_plugins\": false,"
		" \"sinks\": {\"a\": {\"type\": \"json\", \"path\": \"-\"},"
		"             \"b\": {\"type\": \"statsd\", \"port\": 8125}},"
		" \"metrics\": {\"m\": {\"enabled\": true, \"interval\": \"10s\","
		"                       \"sinks\": [\"b\"], \"lease\": \"1h\"}}}";

	assert_int_equal(ktel_config__load_string(text, "t", &vars, &cfg, &errs, &err), 0);
	assert_string_equal(cfg->plugin_dirs[0], "/p");
	assert_string_equal(cfg->state_file, "/s/st");
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrong_type_names_path_and_form),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_unknown_sink_and_type),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_all_errors_in_one_run),
		cmocka_unit_test(test_invalid_json),
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_durations_and_sizes),
		cmocka_unit_test(test_doc_lists_every_key),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
