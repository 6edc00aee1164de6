// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Cgroup paths longer than the kernel's buffer of a mkdir event's path
 * (TRACE_CGROUP_PATH_LEN, 1024 bytes), on the real kernel: the daemon's
 * cgroup event object (cgroup_events.bpf.c) and the names (attr_names.c),
 * with deep cgroups under the cgroup2 mount.
 *
 *   X  a cgroup whose path below the hierarchy's root is exactly 1023 bytes:
 *      it fills the buffer, so its event says "may be cut", and its name is
 *      the long form of its whole path.
 *   D  X/d.service: its event's path is cut to X's path. The record says so,
 *      and D is named by its own whole path (read from the kernel by its
 *      id), never by X's.
 *   E  X/e.service, removed before the events are taken: nothing can read
 *      its path any more, and it has no name (unknown), never X's.
 *
 * Needs root, a cgroup2 mount shown from its hierarchy's root, and a kernel
 * with BTF (tp_btf).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "attr_names.h"
#include "cgroup_events.h"
#include "ktel_test.h"

#define N_IDS 3

static char mount_dir[4096], base[4096];
static struct ktel_attr_names *names;
static uint64_t cut_ids[N_IDS];
static size_t n_cut;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Every event to the names; the ids whose record said "may be cut" noted. */
static void on_event(void *ctx, const struct ktel_cgroup_ev *ev)
{
	if (ev->kind == KTEL_CGROUP_MKDIR && ev->path_cut && n_cut < N_IDS)
		cut_ids[n_cut++] = ev->id;
	ktel_attr_names__cgroup_event(names, ev, now_ns());
}

static bool was_cut(uint64_t id)
{
	for (size_t i = 0; i < n_cut; i++)
		if (cut_ids[i] == id)
			return true;
	return false;
}

static uint64_t ino(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_ino;
}

static void test_long_paths(void **state)
{
	char x[4096], d[4096], e[4096], comp[256], want[KTEL_ATTR_NAME_MAX + 1];
	char got[KTEL_ATTR_NAME_MAX + 1], xname[KTEL_ATTR_NAME_MAX + 1];
	struct ktel_cgroup_events *evs = NULL;
	struct ktel_attr_names_stats st;
	struct ktel_err err = {0};
	uint64_t id_x, id_d, id_e, walks;
	size_t len, rel;
	int rc;

	(void)state;
	assert_int_equal(ktel_attr_names__new(NULL, &names, &err), 0);
	assert_int_equal(ktel_attr_cgroup2_mount(NULL, mount_dir, sizeof(mount_dir)), 0);
	ktel_attr_names__use_events(names, true);
	ktel_attr_names__begin_pull(names, now_ns());
	rc = ktel_cgroup_events__open(on_event, NULL, &evs, &err);
	if (rc) {
		printf("SKIP test_attr_long_names: %s\n", err.msg);
		ktel_attr_names__free(names);
		exit(KTEL_TEST_SKIP);
	}

	/* X: components of 150 bytes, the last one sized (50 to 200 bytes)
	 * so that X's path below the mount is 1023 bytes. */
	snprintf(base, sizeof(base), "%s/ktel-long-%d", mount_dir, (int)getpid());
	rel = strlen(mount_dir);
	assert_int_equal(mkdir(base, 0755), 0);
	len = (size_t)snprintf(x, sizeof(x), "%s", base);
	memset(comp, 'c', sizeof(comp));
	comp[150] = '\0';
	while (KTEL_CGROUP_PATH_MAX - (len - rel) > 201) {
		len += (size_t)snprintf(x + len, sizeof(x) - len, "/%s", comp);
		assert_int_equal(mkdir(x, 0755), 0);
	}
	memset(comp, 'c', sizeof(comp));
	comp[KTEL_CGROUP_PATH_MAX - (len - rel) - 1] = '\0';
	len += (size_t)snprintf(x + len, sizeof(x) - len, "/%s", comp);
	assert_int_equal(len - rel, KTEL_CGROUP_PATH_MAX);
	assert_int_equal(mkdir(x, 0755), 0);
	snprintf(d, sizeof(d), "%s/d.service", x);
	snprintf(e, sizeof(e), "%s/e.service", x);
	assert_int_equal(mkdir(d, 0755), 0);
	assert_int_equal(mkdir(e, 0755), 0);
	id_x = ino(x);
	id_d = ino(d);
	id_e = ino(e);
	assert_int_equal(rmdir(e), 0);

	assert_true(ktel_cgroup_events__drain(evs, NULL) >= 0);
	/* The records of X, D and E said their paths filled the buffer. */
	assert_true(was_cut(id_x));
	assert_true(was_cut(id_d));
	assert_true(was_cut(id_e));
	ktel_attr_names__stats(names, &st);
	assert_true(st.event_paths_cut >= 3);
	walks = st.walks;

	/* X and D: named by their whole paths, read from the kernel at their
	 * events (no walk). Both are longer than a name: the long form. */
	ktel_attr_cgroup_name(x + rel, xname, sizeof(xname));
	assert_non_null(ktel_attr_names__cgroup(names, id_x, got, sizeof(got)));
	assert_string_equal(got, xname);
	assert_non_null(strchr(xname, '~'));
	ktel_attr_cgroup_name(d + rel, want, sizeof(want));
	assert_non_null(ktel_attr_names__cgroup(names, id_d, got, sizeof(got)));
	assert_string_equal(got, want);
	assert_string_not_equal(got, xname);
	ktel_attr_names__stats(names, &st);
	assert_int_equal(st.walks, walks);

	/* E: gone before anything could read its path. The next pull walks
	 * and does not find it: no name, never X's. */
	ktel_attr_names__begin_pull(names, now_ns());
	assert_null(ktel_attr_names__cgroup(names, id_e, got, sizeof(got)));
	ktel_attr_names__stats(names, &st);
	assert_true(st.walks > walks);

	ktel_cgroup_events__free(evs);
	ktel_attr_names__free(names);
}

/* Remove the tree, deepest first (a cgroup's directory goes by rmdir
 * once it has no children). */
static int teardown(void **state)
{
	(void)state;
	if (base[0])
		ktel_test_run("find '%s' -depth -type d -exec rmdir {} \\;", base);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_long_paths, teardown),
	};

	ktel_test_require_root("test_attr_long_names");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
