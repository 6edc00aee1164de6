/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A hermetic pin root for tests that load plugins in-process: its own
 * directory under /sys/fs/bpf and the running kernel's attach targets. The
 * teardown requires the root to be empty (every test unpins what it pinned):
 * whatever a failed test left is reported, removed anyway, and fails the run.
 */
#ifndef KTEL_TEST_PIN_ROOT_H
#define KTEL_TEST_PIN_ROOT_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bpf_lifecycle.h"
#include "kernel_targets.h"

struct test_pin_root {
	char path[PATH_MAX];
	struct ktel_targets *targets;
};

/* Create /sys/fs/bpf/ktel-test-<name>-<pid> (group gid) and read the targets. */
static inline int test_pin_root_setup(struct test_pin_root *pr, const char *name, gid_t gid)
{
	struct ktel_err err = {0};

	snprintf(pr->path, sizeof(pr->path), "/sys/fs/bpf/ktel-test-%s-%d", name, (int)getpid());
	if (ktel_bpffs_ensure(pr->path, gid, &err) != 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	pr->targets = ktel_targets__new(NULL, &err);
	if (!pr->targets) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	return 0;
}

static inline int test_pin_root_teardown(struct test_pin_root *pr)
{
	char path[PATH_MAX + 256];
	struct dirent *de;
	int left = 0;
	DIR *d;

	ktel_targets__free(pr->targets);
	pr->targets = NULL;
	d = opendir(pr->path);
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", pr->path, de->d_name);
		fprintf(stderr, "left behind: %s\n", path);
		unlink(path);
		left++;
	}
	if (d)
		closedir(d);
	if (rmdir(pr->path) != 0) {
		fprintf(stderr, "%s: %s\n", pr->path, strerror(errno));
		return -1;
	}
	return left ? -1 : 0;
}

#endif /* KTEL_TEST_PIN_ROOT_H */
