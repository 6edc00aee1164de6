// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * docs/atoms.proto and the built-in plugins agree: every metric's atom name
 * and id appear in the Atom oneof as `<AtomName> <metric> = <atom_id>;`, and
 * every atom there has a message definition.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin_loader.h"

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t cap = 0;

	assert_non_null(f);
	assert_true(getdelim(&text, &cap, '\0', f) > 0);
	fclose(f);
	return text;
}

static void test_plugins_match_schema(void **state)
{
	char *proto = read_all(KTEL_SOURCE_DIR "/docs/atoms.proto");
	DIR *dir = opendir(KTEL_PLUGIN_DIR);
	struct dirent *e;
	size_t checked = 0;

	assert_non_null(dir);
	while ((e = readdir(dir))) {
		struct ktel_plugin *p = NULL;
		struct ktel_err err;
		char path[1024];

		if (!strstr(e->d_name, ".so"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", KTEL_PLUGIN_DIR, e->d_name);
		if (ktel_plugin__open_owner(path, getuid(), &p, &err))
			fail_msg("%s", err.msg);
		for (uint32_t i = 0; i < p->desc.n_metrics; i++) {
			const struct ktel_metric_desc *md = &p->desc.metrics[i];
			char entry[256], message[256];

			snprintf(entry, sizeof(entry), "%s %s = %u;", md->atom_name, md->name,
				 md->atom_id);
			snprintf(message, sizeof(message), "message %s {", md->atom_name);
			if (!strstr(proto, entry))
				fail_msg("docs/atoms.proto lacks \"%s\" (plugin %s)", entry, path);
			if (!strstr(proto, message))
				fail_msg("docs/atoms.proto lacks \"%s\"", message);
			checked++;
		}
		ktel_plugin__free(p);
	}
	closedir(dir);
	free(proto);
	assert_true(checked >= 12);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plugins_match_schema),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
