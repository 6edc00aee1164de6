// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The generated key reference (ktelemetryd --config-doc, the body of
 * docs/config.md) is well-formed Markdown: every row has exactly four cells
 * even when a description contains "|", every sink type gets its own table,
 * and the rows are the validator's keys (a key the doc lists is accepted, a
 * key it does not list is refused). The drift between docs/config.md and
 * the generator is the ctest config_doc_current.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "sinks.h"

static char *doc;

/* Cell separators of one row: "|" not escaped as "\|". */
static int separators(const char *line, size_t len)
{
	int n = 0;

	for (size_t i = 0; i < len; i++)
		if (line[i] == '|' && (i == 0 || line[i - 1] != '\\'))
			n++;
	return n;
}

static void test_rows_have_four_cells(void **state)
{
	size_t rows = 0;

	for (const char *l = doc; *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);

		if (len && l[0] == '|') {
			if (separators(l, len) != 5)
				fail_msg("row with %d separators: %.*s", separators(l, len),
					 (int)len, l);
			rows++;
		}
		l += len + (end ? 1 : 0);
	}
	assert_true(rows > 20);
	/* The statsd tags description holds a "|": it must be escaped. */
	assert_non_null(strstr(doc, "N\\|c\\|#le:0.001024"));
}

static void test_every_sink_type_has_a_table(void **state)
{
	char heading[128];

	for (size_t i = 0; ktel_sink_types[i]; i++) {
		snprintf(heading, sizeof(heading), "#### Sink type `%s`\n",
			 ktel_sink_types[i]->type);
		if (!strstr(doc, heading))
			fail_msg("no table for sink type %s", ktel_sink_types[i]->type);
	}
}

/* Validate {"<key>": value} at the top level; returns the error count. */
static size_t check(const char *json)
{
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	struct ktel_err err;
	size_t n;

	ktel_config__load_string(json, "t.json", NULL, &cfg, &errs, &err);
	n = errs.n;
	ktel_config_errors__clear(&errs);
	ktel_config__free(cfg);
	return n;
}

/* Every top-level boolean the doc lists is accepted as one; a name the doc
 * does not list is refused. */
static void test_doc_keys_are_validator_keys(void **state)
{
	static const char *const bools[] = {"emit_zero", "enable_new_plugins", "drop_privileges"};
	char json[128], row[128];

	for (size_t i = 0; i < 3; i++) {
		snprintf(row, sizeof(row), "| `%s` | true or false |", bools[i]);
		assert_non_null(strstr(doc, row));
		snprintf(json, sizeof(json), "{\"%s\": true}", bools[i]);
		assert_int_equal(check(json), 0);
		snprintf(json, sizeof(json), "{\"%s\": 1}", bools[i]);
		assert_int_equal(check(json), 1);
	}
	assert_null(strstr(doc, "`drop_privilege`"));
	assert_int_equal(check("{\"drop_privilege\": true}"), 1);
}

static int setup(void **state)
{
	size_t len = 0;
	FILE *f;

	ktel_sinks_register_schemas();
	f = open_memstream(&doc, &len);
	if (!f || ktel_config__write_doc(f))
		return -1;
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	free(doc);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows_have_four_cells),
		cmocka_unit_test(test_every_sink_type_has_a_table),
		cmocka_unit_test(test_doc_keys_are_validator_keys),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
