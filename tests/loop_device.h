/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A loop device over a file in the test's sandbox: block I/O whose count
 * the test knows, on a device nothing else uses. Attached with losetup,
 * named (loopN, the daemon's device label) and numbered (its key's
 * major:minor), detached at teardown.
 */
#ifndef KTEL_TEST_LOOP_DEVICE_H
#define KTEL_TEST_LOOP_DEVICE_H

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "ktel_test.h"

struct ktel_test_loop {
	char dev[64];  /* /dev/loopN; "" when none is attached */
	char name[32]; /* loopN */
	unsigned int major, minor;
};

/* Attach a loop device over DIR/disk.img, a sparse file of MIB MiB. */
static inline void ktel_test_loop_attach(struct ktel_test_loop *l, const char *dir,
					 unsigned int mib)
{
	char out[700], *text;
	struct stat st;

	snprintf(out, sizeof(out), "%s/losetup.out", dir);
	assert_int_equal(ktel_test_run("truncate -s %uM %s/disk.img && losetup --show -f "
				       "%s/disk.img > %s",
				       mib, dir, dir, out),
			 0);
	text = ktel_test_slurp(out);
	assert_non_null(text);
	text[strcspn(text, "\n")] = '\0';
	snprintf(l->dev, sizeof(l->dev), "%s", text);
	free(text);
	assert_non_null(strrchr(l->dev, '/'));
	snprintf(l->name, sizeof(l->name), "%s", strrchr(l->dev, '/') + 1);
	assert_int_equal(stat(l->dev, &st), 0);
	l->major = major(st.st_rdev);
	l->minor = minor(st.st_rdev);
	/* Let udev's probe of the new device finish before anything counts. */
	(void)system("udevadm settle -t 5 >/dev/null 2>&1");
}

/* Detach it, if one is attached (a teardown after any failure). */
static inline void ktel_test_loop_detach(struct ktel_test_loop *l)
{
	if (l->dev[0])
		(void)ktel_test_run("losetup -d %s", l->dev);
	l->dev[0] = '\0';
}

/* Completed reads of the device, its own count (/sys/block/loopN/stat). */
static inline uint64_t ktel_test_loop_reads(const struct ktel_test_loop *l)
{
	char path[128], *text;
	uint64_t n;

	snprintf(path, sizeof(path), "/sys/block/%s/stat", l->name);
	text = ktel_test_slurp(path);
	assert_non_null(text);
	n = strtoull(text, NULL, 10);
	free(text);
	return n;
}

/*
 * In a child that does the test's I/O: join the cgroup v2 directory
 * cgroup_dir (NULL: stay where it is), then open the device with flags |
 * O_DIRECT and a buffer of one aligned block. A failure ends the child:
 * exit 10 (the cgroup), 11 (the device or the buffer).
 */
static inline int ktel_test_loop_child_open(const struct ktel_test_loop *l, const char *cgroup_dir,
					    int flags, void **ret_buf)
{
	char procs[700];
	FILE *f;
	int fd;

	if (cgroup_dir) {
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup_dir);
		f = fopen(procs, "w");
		if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f))
			_exit(10);
	}
	fd = open(l->dev, flags | O_DIRECT);
	if (fd < 0 || posix_memalign(ret_buf, 4096, 4096))
		_exit(11);
	return fd;
}

#endif /* KTEL_TEST_LOOP_DEVICE_H */
