// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Block device names (core/engine/blockdev.c): the uevent parser on hostile text,
 * then the reader and the cache over a test directory laid out like
 * /sys/dev/block (the sysfs root is a parameter), and last the real /sys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "blockdev.h"
#include "ktel_test.h"

#define S(lit) lit, sizeof(lit) - 1

static int parse(const char *text, size_t len, uint32_t major, uint32_t minor, char *name)
{
	return ktel_blockdev_parse_uevent(text, len, major, minor, name);
}

static void test_parse_real_shapes(void **state)
{
	char name[KTEL_BLOCKDEV_NAME_MAX];

	(void)state;
	assert_int_equal(parse(S("MAJOR=259\nMINOR=0\nDEVNAME=nvme0n1\nDEVTYPE=disk\n"
				 "DISKSEQ=1\n"),
			       259, 0, name),
			 0);
	assert_string_equal(name, "nvme0n1");
	/* No final newline; MAJOR/MINOR absent are not required. */
	assert_int_equal(parse(S("DEVNAME=loop0"), 7, 0, name), 0);
	assert_string_equal(name, "loop0");
	/* A name in a subdirectory of /dev reads as /proc/diskstats spells it. */
	assert_int_equal(parse(S("MAJOR=104\nMINOR=0\nDEVNAME=cciss/c0d0\n"), 104, 0, name), 0);
	assert_string_equal(name, "cciss!c0d0");
	assert_int_equal(parse(S("DEVNAME=dm-0\nPARTN=1\n"), 253, 0, name), 0);
	assert_string_equal(name, "dm-0");
}

static void test_parse_hostile(void **state)
{
	static const struct {
		const char *text;
		size_t len;
	} bad[] = {
		{S("")},
		{S("MAJOR=7\nMINOR=0\n")},           /* no DEVNAME */
		{S("DEVNAME=\n")},                   /* empty */
		{S("DEVNAME=loop0\nDEVNAME=sda\n")}, /* two names */
		{S("DEVNAME=lo\"op0\n")},            /* quote */
		{S("DEVNAME=loop0 x\n")},            /* space */
		{S("DEVNAME=l\xc3\xa9\n")},          /* non-ASCII */
		{S("DEVNAME=loop0\r\n")},            /* CR */
		{S("DEVNAME=lo\0op0\n")},            /* NUL */
		{S("DEVNAME=loop0\nMAJOR=8\n")},     /* not the device asked for */
		{S("MINOR=1\nDEVNAME=loop0\n")},
		{S("MAJOR=00000000007x\nDEVNAME=loop0\n")},        /* not a number */
		{S("MAJOR=4294967303\nDEVNAME=loop0\n")},          /* 2^32 + 7 */
		{S("DEVNAME=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n")}, /* 32 bytes */
	};
	char name[KTEL_BLOCKDEV_NAME_MAX] = "untouched";
	static char big[KTEL_BLOCKDEV_UEVENT_MAX + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i].text, bad[i].len, 7, 0, name) != -EINVAL)
			fail_msg("bad uevent %zu accepted as \"%s\"", i, name);
		assert_string_equal(name, "untouched");
	}
	/* 31 bytes is the longest name. */
	assert_int_equal(parse(S("DEVNAME=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"), 7, 0, name), 0);
	assert_int_equal(strlen(name), 31);
	/* Longer than the bound: refused whole, even with a name first. */
	memset(big, 'X', sizeof(big));
	memcpy(big, "DEVNAME=loop0\n", 14);
	assert_int_equal(parse(big, sizeof(big), 7, 0, name), -EINVAL);
	assert_int_equal(parse(big, sizeof(big) - 1, 7, 0, name), 0);
}

/* ---- a sysfs root in a temporary directory ----------------------------- */

struct root {
	char dir[64];
};

static void put_dev(const struct root *r, uint32_t major, uint32_t minor, const char *text,
		    size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u", r->dir, major, minor);
	assert_int_equal(ktel_test_run("mkdir -p %s", path), 0);
	strcat(path, "/uevent");
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
}

static int root_setup(void **state)
{
	struct root *r = calloc(1, sizeof(*r));

	snprintf(r->dir, sizeof(r->dir), "/tmp/ktel-blockdev-XXXXXX");
	if (!mkdtemp(r->dir))
		return -1;
	*state = r;
	return 0;
}

static int root_teardown(void **state)
{
	struct root *r = *state;

	ktel_test_rm_rf(r->dir);
	free(r);
	return 0;
}

static void test_read_files(void **state)
{
	const struct root *r = *state;
	char name[KTEL_BLOCKDEV_NAME_MAX], path[256];

	put_dev(r, 7, 0, S("MAJOR=7\nMINOR=0\nDEVNAME=loop0\nDEVTYPE=disk\n"));
	assert_int_equal(ktel_blockdev_read(r->dir, 7, 0, name), 0);
	assert_string_equal(name, "loop0");
	assert_int_equal(ktel_blockdev_read(r->dir, 7, 1, name), -ENOENT);
	/* uevent a symlink (to a file with a good name): not followed. */
	put_dev(r, 7, 2, S("DEVNAME=loop2\n"));
	snprintf(path, sizeof(path), "%s/dev/block/7:3", r->dir);
	assert_int_equal(ktel_test_run("mkdir -p %s && ln -s ../7:2/uevent %s/uevent", path, path),
			 0);
	assert_int_equal(ktel_blockdev_read(r->dir, 7, 3, name), -ELOOP);
	/* A FIFO nobody writes: refused without blocking. */
	snprintf(path, sizeof(path), "%s/dev/block/7:4", r->dir);
	assert_int_equal(ktel_test_run("mkdir -p %s && mkfifo %s/uevent", path, path), 0);
	assert_int_equal(ktel_blockdev_read(r->dir, 7, 4, name), -EINVAL);
	/* A directory. */
	snprintf(path, sizeof(path), "%s/dev/block/7:5/uevent", r->dir);
	assert_int_equal(ktel_test_run("mkdir -p %s", path), 0);
	assert_int_equal(ktel_blockdev_read(r->dir, 7, 5, name), -EINVAL);
	/* Endless content (a big file): bounded read, refused. */
	snprintf(path, sizeof(path), "%s/dev/block/7:6", r->dir);
	assert_int_equal(ktel_test_run("mkdir -p %s && (echo DEVNAME=loop6; head -c 1000000 "
				       "/dev/zero | tr '\\0' A) > %s/uevent",
				       path, path),
			 0);
	assert_int_equal(ktel_blockdev_read(r->dir, 7, 6, name), -EFBIG);
	/* Hostile text in a file. */
	put_dev(r, 7, 7, S("DEVNAME=../../etc\n"));
	assert_int_equal(ktel_blockdev_read(r->dir, 7, 7, name), 0);
	assert_string_equal(name, "..!..!etc"); /* a label value, never a path */
	put_dev(r, 7, 8, S("DEVNAME=loop8\x1b[2J\n"));
	assert_int_equal(ktel_blockdev_read(r->dir, 7, 8, name), -EINVAL);
}

#define SEC 1000000000ull

static void test_cache_refresh(void **state)
{
	const struct root *r = *state;
	struct ktel_blockdev_cache *c = ktel_blockdev_cache__new(r->dir, 4);
	const struct ktel_blockdev_stats *st;
	const char *n;

	assert_non_null(c);
	st = ktel_blockdev_cache__stats(c);
	put_dev(r, 8, 0, S("DEVNAME=sda\n"));
	n = ktel_blockdev_cache__name(c, 8, 0, 100 * SEC);
	assert_string_equal(n, "sda");
	assert_ptr_equal(ktel_blockdev_cache__name(c, 8, 0, 100 * SEC), n);
	assert_int_equal(st->reads, 1);
	/* The minor is reused by another disk: the old name holds for the TTL. */
	put_dev(r, 8, 0, S("DEVNAME=sdb\n"));
	assert_string_equal(ktel_blockdev_cache__name(c, 8, 0, 101 * SEC), "sda");
	assert_int_equal(st->reads, 1);
	assert_string_equal(ktel_blockdev_cache__name(c, 8, 0, 100 * SEC + KTEL_BLOCKDEV_TTL_NS),
			    "sdb");
	assert_int_equal(st->reads, 2);
	/* A device sysfs does not know: asked again at each new time only. */
	assert_null(ktel_blockdev_cache__name(c, 8, 16, 200 * SEC));
	assert_null(ktel_blockdev_cache__name(c, 8, 16, 200 * SEC));
	assert_int_equal(st->reads, 3);
	assert_int_equal(st->unresolved, 1);
	put_dev(r, 8, 16, S("DEVNAME=sdb\n"));
	assert_string_equal(ktel_blockdev_cache__name(c, 8, 16, 201 * SEC), "sdb");
	assert_int_equal(st->reads, 4);
	/* It goes away: the name holds until the TTL, then it is none. */
	assert_int_equal(ktel_test_run("rm -r %s/dev/block/8:16", r->dir), 0);
	assert_string_equal(ktel_blockdev_cache__name(c, 8, 16, 202 * SEC), "sdb");
	assert_null(ktel_blockdev_cache__name(c, 8, 16, 201 * SEC + KTEL_BLOCKDEV_TTL_NS));
	ktel_blockdev_cache__free(c);
	ktel_blockdev_cache__free(NULL);
	assert_null(ktel_blockdev_cache__new(r->dir, 0));
}

/* Bounded: a full cache replaces an entry not used at this time, never one
 * whose name a record of this pull may still point at. */
static void test_cache_bounded(void **state)
{
	const struct root *r = *state;
	struct ktel_blockdev_cache *c = ktel_blockdev_cache__new(r->dir, 2);
	const struct ktel_blockdev_stats *st = ktel_blockdev_cache__stats(c);
	const char *a, *b;

	put_dev(r, 9, 1, S("DEVNAME=md1\n"));
	put_dev(r, 9, 2, S("DEVNAME=md2\n"));
	put_dev(r, 9, 3, S("DEVNAME=md3\n"));
	a = ktel_blockdev_cache__name(c, 9, 1, 10 * SEC);
	b = ktel_blockdev_cache__name(c, 9, 2, 10 * SEC);
	assert_null(ktel_blockdev_cache__name(c, 9, 3, 10 * SEC));
	assert_int_equal(st->full, 1);
	assert_string_equal(a, "md1");
	assert_string_equal(b, "md2");
	/* Next pull: 9:2 used, then 9:3 replaces 9:1, the least recently used. */
	assert_string_equal(ktel_blockdev_cache__name(c, 9, 2, 11 * SEC), "md2");
	assert_string_equal(ktel_blockdev_cache__name(c, 9, 3, 11 * SEC), "md3");
	assert_string_equal(ktel_blockdev_cache__name(c, 9, 2, 11 * SEC), "md2");
	assert_int_equal(st->full, 1);
	assert_int_equal(st->reads, 3);
	ktel_blockdev_cache__free(c);
}

/* The running system: every disk sysfs lists resolves to its directory name
 * under /sys/block (the name /proc/diskstats uses). */
static void test_real_sysfs(void **state)
{
	FILE *f = fopen("/proc/diskstats", "r");
	unsigned major, minor;
	char disk[64], name[KTEL_BLOCKDEV_NAME_MAX];
	size_t seen = 0;

	(void)state;
	if (!f)
		skip();
	while (fscanf(f, " %u %u %63s %*[^\n]", &major, &minor, disk) == 3) {
		assert_int_equal(ktel_blockdev_read("/sys", major, minor, name), 0);
		assert_string_equal(name, disk);
		seen++;
	}
	fclose(f);
	printf("%zu devices of /proc/diskstats resolved from /sys\n", seen);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_real_shapes),
		cmocka_unit_test(test_parse_hostile),
		cmocka_unit_test_setup_teardown(test_read_files, root_setup, root_teardown),
		cmocka_unit_test_setup_teardown(test_cache_refresh, root_setup, root_teardown),
		cmocka_unit_test_setup_teardown(test_cache_bounded, root_setup, root_teardown),
		cmocka_unit_test(test_real_sysfs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
