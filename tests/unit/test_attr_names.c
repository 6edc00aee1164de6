// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The names of cgroup ids from the kernel's events (core/engine/attr_names.c,
 * ktel_attr_names__cgroup_event), over a test directory laid out like
 * cgroupfs and made-up events: a cgroup made and removed between two walks
 * is named by its mkdir; its release is held until every metric pulled
 * since (settle), then it leaves the cache; a removed cgroup whose release
 * does not come goes by the grace rule, a live one never does; an event's
 * path is hostile input, cut like a walked name and made relative to the
 * mount's subtree; lost events make the next pull walk, and a whole walk
 * marks a cgroup it no longer finds as removed. Then the ageing of user,
 * app and process ids: the liveness of a process id against /proc (a real
 * one and a made-up one), and the sweep of a metric's ids.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attr_names.h"
#include "ktel_test.h"

static void ev(struct ktel_attr_names *n, enum ktel_cgroup_event_kind kind, uint64_t id,
	       const char *path, uint64_t now)
{
	struct ktel_cgroup_ev e = {.kind = kind, .id = id, .level = 1, .path = path};

	ktel_attr_names__cgroup_event(n, &e, now);
}

/* A refill that finds the mkdir of id 500 waiting in the ring. */
static int refills;

static void refill(void *ctx)
{
	refills++;
	ev(ctx, KTEL_CGROUP_MKDIR, 500, "/late.scope", 250);
}

static struct ktel_attr_names *names_at(char *root, const char *mountinfo)
{
	struct ktel_attr_names_opts o = {.grace_ns = 1000,
					 .cgroup_root = root,
					 .mountinfo = mountinfo};
	struct ktel_attr_names *n = NULL;
	struct ktel_err err;

	assert_int_equal(ktel_attr_names__new(&o, &n, &err), 0);
	return n;
}

static void test_event_names(void **state)
{
	char root[] = "/tmp/ktel_attr_ev_XXXXXX", buf[KTEL_ATTR_NAME_MAX + 1];
	const struct ktel_attr_released *rel;
	struct ktel_attr_names_stats st;
	struct ktel_attr_names *n;

	(void)state;
	assert_non_null(mkdtemp(root));
	n = names_at(root, NULL);
	ktel_attr_names__use_events(n, true);
	assert_true(ktel_attr_names__events(n));
	ktel_attr_names__begin_pull(n, 100); /* the walk of what was there */
	/* Made and removed between two pulls: named all the same. */
	ev(n, KTEL_CGROUP_MKDIR, 77, "/system.slice/run-r1.scope", 150);
	ev(n, KTEL_CGROUP_MKDIR, 78, "/a b/\xc3\xa9\"x\n", 151);
	ev(n, KTEL_CGROUP_MKDIR, 79, "/busy.service", 152);
	ev(n, KTEL_CGROUP_RMDIR, 77, NULL, 160);
	ev(n, KTEL_CGROUP_RELEASE, 77, NULL, 170);
	ev(n, KTEL_CGROUP_RMDIR, 78, NULL, 160);
	/* Events of ids never named are not kept. */
	ev(n, KTEL_CGROUP_RMDIR, 99, NULL, 160);
	ev(n, KTEL_CGROUP_RELEASE, 99, NULL, 170);
	ktel_attr_names__begin_pull(n, 200);
	assert_non_null(ktel_attr_names__cgroup(n, 77, buf, sizeof(buf)));
	assert_string_equal(buf, "system.slice/run-*.scope");
	assert_non_null(ktel_attr_names__cgroup(n, 78, buf, sizeof(buf)));
	assert_string_equal(buf, "a_b/___x_");
	/* Released, but a metric has not pulled since: held. */
	ktel_attr_names__settle(n, 160);
	assert_int_equal(ktel_attr_names__released(n, &rel), 0);
	ktel_attr_names__settle(n, 200);
	assert_int_equal(ktel_attr_names__released(n, &rel), 1);
	assert_int_equal(rel[0].id, 77);
	assert_string_equal(rel[0].name, "system.slice/run-*.scope");
	assert_false(rel[0].carried);
	ktel_attr_names__clear_released(n);
	/* 78 was removed and its release never came: after the grace period
	 * without events it goes. 79 is alive and quiet: it stays, however
	 * long no walk saw it. */
	ktel_attr_names__begin_pull(n, 1500);
	assert_int_equal(ktel_attr_names__released(n, &rel), 1);
	assert_int_equal(rel[0].id, 78);
	ktel_attr_names__clear_released(n);
	ktel_attr_names__begin_pull(n, 5000);
	assert_int_equal(ktel_attr_names__released(n, &rel), 0);
	assert_non_null(ktel_attr_names__cgroup(n, 79, buf, sizeof(buf)));
	assert_string_equal(buf, "busy.service");
	ktel_attr_names__stats(n, &st);
	assert_int_equal(st.released_event, 1);
	assert_int_equal(st.events, 8);
	/* Made after the pull's drain, its events read by the pull: a miss
	 * takes the waiting events before it walks. */
	ktel_attr_names__set_refill(n, refill, n);
	assert_non_null(ktel_attr_names__cgroup(n, 500, buf, sizeof(buf)));
	assert_string_equal(buf, "late.scope");
	assert_int_equal(refills, 1);
	ktel_attr_names__stats(n, &st);
	assert_int_equal(st.walks, 1);
	ktel_attr_names__free(n);
	rmdir(root);
}

/*
 * cgroup_used notes a named id's events as a lookup does (a removed cgroup
 * used within the grace period stays), and the generation moves on with
 * what may change a name (a walk, a mkdir, a release, a prune), not with
 * lookups of named ids, their use or an rmdir.
 */
static void test_used_generation(void **state)
{
	char root[] = "/tmp/ktel_attr_gen_XXXXXX", buf[KTEL_ATTR_NAME_MAX + 1];
	const struct ktel_attr_released *rel;
	struct ktel_attr_names *n;
	uint64_t g0, g, hint = 0, hint2 = 0;

	(void)state;
	assert_non_null(mkdtemp(root));
	n = names_at(root, NULL);
	g = ktel_attr_names__generation(n);
	assert_int_not_equal(g, 0);
	ktel_attr_names__use_events(n, true);
	ktel_attr_names__begin_pull(n, 100); /* walks */
	assert_int_not_equal(ktel_attr_names__generation(n), g);
	g = ktel_attr_names__generation(n);
	ev(n, KTEL_CGROUP_MKDIR, 80, "/x.service", 150);
	assert_int_not_equal(ktel_attr_names__generation(n), g);
	g0 = ktel_attr_names__generation(n);
	ktel_attr_names__begin_pull(n, 200);
	assert_non_null(ktel_attr_names__cgroup(n, 80, buf, sizeof(buf)));
	assert_string_equal(buf, "x.service");
	assert_true(ktel_attr_names__cgroup_used(n, 80, &hint));
	assert_int_not_equal(hint, 0);
	assert_true(ktel_attr_names__cgroup_used(n, 80, &hint));
	/* Not in the cache: nothing done, not even kept as unnamed. */
	assert_false(ktel_attr_names__cgroup_used(n, 81, &hint2));
	ev(n, KTEL_CGROUP_RMDIR, 80, NULL, 300);
	assert_int_equal(ktel_attr_names__generation(n), g0);
	/* Removed, used at 1100: not released at 1400 (only 300 after its
	 * use), though its last lookup (200) and rmdir (300) are older than
	 * the grace period. */
	ktel_attr_names__begin_pull(n, 1100);
	assert_true(ktel_attr_names__cgroup_used(n, 80, &hint));
	ktel_attr_names__begin_pull(n, 1400);
	assert_int_equal(ktel_attr_names__released(n, &rel), 0);
	assert_int_equal(ktel_attr_names__generation(n), g0);
	ktel_attr_names__begin_pull(n, 2200);
	assert_int_equal(ktel_attr_names__released(n, &rel), 1);
	assert_int_equal(rel[0].id, 80);
	ktel_attr_names__clear_released(n);
	assert_int_not_equal(ktel_attr_names__generation(n), g0);
	assert_false(ktel_attr_names__cgroup_used(n, 80, &hint));
	/* A release event moves it on too. */
	ev(n, KTEL_CGROUP_MKDIR, 82, "/y.service", 2300);
	g = ktel_attr_names__generation(n);
	ev(n, KTEL_CGROUP_RELEASE, 82, NULL, 2310);
	assert_int_not_equal(ktel_attr_names__generation(n), g);
	ktel_attr_names__free(n);
	rmdir(root);
}

/* Lost events: the next pull walks, and a whole walk marks what it does not
 * find as removed (its rmdir was lost), so the grace rule releases it. */
static void test_events_lost(void **state)
{
	char root[] = "/tmp/ktel_attr_lost_XXXXXX", path[600], buf[KTEL_ATTR_NAME_MAX + 1];
	const struct ktel_attr_released *rel;
	struct ktel_attr_names_stats st;
	struct ktel_attr_names *n;
	struct stat sa;

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/kept.service", root);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(stat(path, &sa), 0);
	n = names_at(root, NULL);
	ktel_attr_names__use_events(n, true);
	ktel_attr_names__begin_pull(n, 100);
	ktel_attr_names__stats(n, &st);
	assert_int_equal(st.walks, 1);
	ev(n, KTEL_CGROUP_MKDIR, 4242, "/gone.service", 150);
	/* No more walks while nothing is lost. */
	ktel_attr_names__begin_pull(n, 400);
	ktel_attr_names__stats(n, &st);
	assert_int_equal(st.walks, 1);
	ktel_attr_names__events_lost(n);
	ktel_attr_names__begin_pull(n, 500);
	ktel_attr_names__stats(n, &st);
	assert_int_equal(st.walks, 2);
	assert_int_equal(st.event_losses, 1);
	assert_non_null(ktel_attr_names__cgroup(n, sa.st_ino, buf, sizeof(buf)));
	assert_string_equal(buf, "kept.service");
	ktel_attr_names__begin_pull(n, 1800);
	assert_int_equal(ktel_attr_names__released(n, &rel), 1);
	assert_int_equal(rel[0].id, 4242);
	ktel_attr_names__clear_released(n);
	ktel_attr_names__free(n);
	rmdir(path);
	rmdir(root);
}

/* A mount that shows a subtree of the hierarchy (mountinfo's root field
 * "/sub"): an event's path is made relative to it like a walked one; a
 * cgroup outside it is not named. */
static void test_event_subtree(void **state)
{
	char dir[] = "/tmp/ktel_attr_mi_XXXXXX", mi[600], buf[KTEL_ATTR_NAME_MAX + 1];
	struct ktel_attr_names_opts o = {.grace_ns = 1000};
	struct ktel_attr_names *n = NULL;
	struct ktel_err err;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(mi, sizeof(mi), "%s/mountinfo", dir);
	f = fopen(mi, "w");
	assert_non_null(f);
	fprintf(f, "40 30 0:37 /sub %s rw,relatime - cgroup2 cgroup2 rw\n", dir);
	fclose(f);
	o.mountinfo = mi;
	assert_int_equal(ktel_attr_names__new(&o, &n, &err), 0);
	ktel_attr_names__use_events(n, true);
	ktel_attr_names__begin_pull(n, 100);
	ev(n, KTEL_CGROUP_MKDIR, 1001, "/sub/app.service", 110);
	ev(n, KTEL_CGROUP_MKDIR, 1002, "/subway/x.service", 110);
	ev(n, KTEL_CGROUP_MKDIR, 1003, "/sub", 110);
	ktel_attr_names__begin_pull(n, 200);
	assert_non_null(ktel_attr_names__cgroup(n, 1001, buf, sizeof(buf)));
	assert_string_equal(buf, "app.service");
	assert_null(ktel_attr_names__cgroup(n, 1002, buf, sizeof(buf)));
	assert_non_null(ktel_attr_names__cgroup(n, 1003, buf, sizeof(buf)));
	assert_string_equal(buf, "/");
	ktel_attr_names__free(n);
	unlink(mi);
	rmdir(dir);
}

/* Write text to dir/name. */
static void put_file(const char *dir, const char *name, const char *text)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The io controller is on cgroup v2 and enabled below its root only when
 * the cgroup2 mount's cgroup.subtree_control lists "io" itself (not "iocost"
 * nor a longer word); a controller only available there (cgroup.controllers)
 * does not count; without a cgroup2 mount it is not; an unreadable file is
 * an error. */
static void test_io_on_v2(void **state)
{
	static const struct {
		const char *controllers;
		bool on;
	} cases[] = {
		{"cpuset cpu io memory hugetlb pids rdma misc\n", true},
		{"io\n", true},
		{"cpu memory pids\n", false},
		{"cpu ioio memory iox\n", false},
		{"", false},
	};
	char dir[] = "/tmp/ktel_attr_io_XXXXXX", mi[600], mi_none[600], line[700];
	struct ktel_err err;
	bool on = true;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(line, sizeof(line),
		 "30 20 0:26 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw,blkio\n"
		 "40 30 0:37 / %s rw,relatime - cgroup2 cgroup2 rw\n",
		 dir);
	put_file(dir, "mountinfo", line);
	snprintf(mi, sizeof(mi), "%s/mountinfo", dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		put_file(dir, "cgroup.subtree_control", cases[i].controllers);
		assert_int_equal(ktel_attr_io_on_v2(mi, &on, &err), 0);
		assert_int_equal(on, cases[i].on);
	}
	put_file(dir, "mountinfo_none",
		 "30 20 0:26 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw\n");
	snprintf(mi_none, sizeof(mi_none), "%s/mountinfo_none", dir);
	on = true;
	assert_int_equal(ktel_attr_io_on_v2(mi_none, &on, &err), 0);
	assert_false(on);
	/* Available on v2 but enabled for no cgroup below the root. */
	put_file(dir, "cgroup.subtree_control", "cpu memory pids\n");
	put_file(dir, "cgroup.controllers", "cpuset cpu io memory pids\n");
	assert_int_equal(ktel_attr_io_on_v2(mi, &on, &err), 0);
	assert_false(on);
	snprintf(line, sizeof(line), "%s/cgroup.controllers", dir);
	unlink(line);
	snprintf(line, sizeof(line), "%s/cgroup.subtree_control", dir);
	unlink(line);
	on = true;
	assert_int_equal(ktel_attr_io_on_v2(mi, &on, &err), -ENOENT);
	assert_true(on);
	assert_non_null(strstr(err.msg, "cgroup.subtree_control"));
	unlink(mi);
	unlink(mi_none);
	rmdir(dir);
}

/* The io controller is on cgroup v2 at all when the cgroup2 mount's
 * cgroup.controllers lists "io" (enabled below the root or not); not on a
 * hybrid host, where it is bound to a v1 hierarchy, nor without a cgroup2
 * mount; an unreadable file is an error. */
static void test_io_v2_available(void **state)
{
	char dir[] = "/tmp/ktel_attr_ioav_XXXXXX", mi[600], line[700];
	struct ktel_err err;
	bool on = false;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(line, sizeof(line), "40 30 0:37 / %s rw,relatime - cgroup2 cgroup2 rw\n", dir);
	put_file(dir, "mountinfo", line);
	snprintf(mi, sizeof(mi), "%s/mountinfo", dir);
	put_file(dir, "cgroup.controllers", "cpuset cpu io memory pids\n");
	assert_int_equal(ktel_attr_io_v2_available(mi, &on, &err), 0);
	assert_true(on);
	put_file(dir, "cgroup.controllers", "cpu iocost memory\n");
	assert_int_equal(ktel_attr_io_v2_available(mi, &on, &err), 0);
	assert_false(on);
	put_file(dir, "mountinfo", "30 20 0:26 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw\n");
	on = true;
	assert_int_equal(ktel_attr_io_v2_available(mi, &on, &err), 0);
	assert_false(on);
	put_file(dir, "mountinfo", line);
	snprintf(line, sizeof(line), "%s/cgroup.controllers", dir);
	unlink(line);
	on = true;
	assert_int_equal(ktel_attr_io_v2_available(mi, &on, &err), -ENOENT);
	assert_true(on);
	assert_non_null(strstr(err.msg, "cgroup.controllers"));
	unlink(mi);
	rmdir(dir);
}

/* A cgroup of the fake tree at dir/rel, with its subtree_control (NULL:
 * none, a leaf). */
static void put_cgroup(const char *dir, const char *rel, const char *subtree)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	if (rel[0])
		assert_int_equal(mkdir(path, 0755), 0);
	if (subtree)
		put_file(path, "cgroup.subtree_control", subtree);
}

/*
 * Where the charged cgroup is coarser than a depth asks: the cgroups at the
 * levels above it with a child but no io in their subtree_control. The
 * tree: the root enables io; a (level 1) does not, and has a child; b does,
 * and its child b/y (level 2) does not, with a child b/y/z; c enables
 * nothing but is a leaf. Depth 1 asks for level 1, where every cgroup has
 * io: no gap; depth 2 finds a; depth 3 and 0 (every level) a and b/y. A
 * root that enables nothing is itself the gap ("/").
 */
static void test_io_gaps(void **state)
{
	char dir[] = "/tmp/ktel_attr_gaps_XXXXXX", mi[600], line[700];
	struct ktel_attr_io_gaps g;
	struct ktel_err err;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(line, sizeof(line), "40 30 0:37 / %s rw,relatime - cgroup2 cgroup2 rw\n", dir);
	snprintf(mi, sizeof(mi), "%s.mountinfo", dir);
	{
		FILE *f = fopen(mi, "w");

		assert_non_null(f);
		fputs(line, f);
		fclose(f);
	}
	put_cgroup(dir, "", "cpu io memory\n");
	put_cgroup(dir, "a", "cpu memory\n");
	put_cgroup(dir, "a/x", "");
	put_cgroup(dir, "b", "io\n");
	put_cgroup(dir, "b/y", "\n");
	put_cgroup(dir, "b/y/z", "");
	put_cgroup(dir, "c", "");
	assert_int_equal(ktel_attr_io_gaps(mi, 1, &g, &err), 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(ktel_attr_io_gaps(mi, 2, &g, &err), 0);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.first, "/a");
	assert_false(g.truncated);
	assert_int_equal(ktel_attr_io_gaps(mi, 3, &g, &err), 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(ktel_attr_io_gaps(mi, 0, &g, &err), 0);
	assert_int_equal(g.n, 2);
	assert_true(strcmp(g.first, "/a") == 0 || strcmp(g.first, "/b/y") == 0);
	/* The walk runs on the daemon's loop: past its bound of cgroups it
	 * stops and says there may be more. */
	for (int i = 0; i < 4200; i++) {
		snprintf(line, sizeof(line), "%s/c/%d", dir, i);
		assert_int_equal(mkdir(line, 0755), 0);
	}
	assert_int_equal(ktel_attr_io_gaps(mi, 0, &g, &err), 0);
	assert_true(g.truncated);
	assert_true(g.n >= 1); /* c at least, a and b/y as the walk met them */
	assert_int_equal(ktel_attr_io_gaps(mi, 2, &g, &err), 0);
	assert_false(g.truncated);
	put_cgroup(dir, "", "cpu memory\n");
	assert_int_equal(ktel_attr_io_gaps(mi, 1, &g, &err), 0);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.first, "/");
	unlink(mi);
	assert_int_equal(ktel_attr_io_gaps(mi, 1, &g, &err), -ENOENT);
	snprintf(line, sizeof(line), "rm -rf '%s'", dir);
	assert_int_equal(system(line), 0);
}

/* The process of a by-process id: alive while its tgid exists and its
 * leader started no later than the id's thread; a /proc/<tgid>/stat whose
 * command holds ") " is parsed from the last ')'. */
static void write_stat(const char *dir, int tgid, unsigned long long start_ticks)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d", dir, tgid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%d/stat", dir, tgid);
	f = fopen(path, "w");
	assert_non_null(f);
	/* pid (comm) state, then fields 4..21, then starttime (22). */
	fprintf(f, "%d (a) 1 2 3 (b) S", tgid);
	for (int i = 4; i <= 21; i++)
		fprintf(f, " %d", i);
	fprintf(f, " %llu 99 98\n", start_ticks);
	fclose(f);
}

static void test_process_alive(void **state)
{
	char dir[] = "/tmp/ktel_attr_proc_XXXXXX";
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec mono;
	pid_t pid;
	int status;

	(void)state;
	assert_non_null(mkdtemp(dir));
	write_stat(dir, 123, 500ULL * (unsigned long long)hz);
	write_stat(dir, 124, 5000ULL * (unsigned long long)hz);
	assert_true(ktel_attr_process_alive(dir, 123ULL << 32 | 1000));
	/* The tgid's leader started after the id's thread: used again. */
	assert_false(ktel_attr_process_alive(dir, 124ULL << 32 | 1000));
	assert_false(ktel_attr_process_alive(dir, 125ULL << 32 | 1000));
	assert_false(ktel_attr_process_alive(dir, 0));
	/* The real /proc: this process (a thread started now), and a child
	 * that exited. */
	clock_gettime(CLOCK_MONOTONIC, &mono);
	assert_true(
		ktel_attr_process_alive(NULL, (uint64_t)getpid() << 32 | (uint64_t)mono.tv_sec));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_false(ktel_attr_process_alive(NULL, (uint64_t)pid << 32 | (uint64_t)mono.tv_sec));
	(void)ktel_test_run("rm -rf %s", dir);
}

/* The ids a metric saw: swept by the caller's rule, the rest kept. */
static bool older_than_100(void *ctx, uint64_t id, uint64_t used_ns)
{
	(void)ctx;
	(void)id;
	return used_ns < 100;
}

static bool is_7(void *ctx, uint64_t id)
{
	(void)ctx;
	return id == 7;
}

static void test_ids_sweep(void **state)
{
	struct ktel_attr_ids *t = NULL;
	const uint64_t *gone;

	(void)state;
	assert_int_equal(ktel_attr_ids__new(&t), 0);
	for (uint64_t id = 1; id <= 1000; id++)
		assert_int_equal(ktel_attr_ids__used(t, id, id % 2 ? 50 : 150), 0);
	assert_int_equal(ktel_attr_ids__used(t, 7, 200), 0); /* events again */
	assert_int_equal(ktel_attr_ids__count(t), 1000);
	assert_int_equal(ktel_attr_ids__sweep(t, older_than_100, NULL, &gone), 499);
	for (size_t i = 0; i < 499; i++)
		assert_true(gone[i] % 2 == 1 && gone[i] != 7);
	assert_int_equal(ktel_attr_ids__count(t), 501);
	assert_true(ktel_attr_ids__any(t, is_7, NULL));
	assert_int_equal(ktel_attr_ids__sweep(t, older_than_100, NULL, &gone), 0);
	ktel_attr_ids__free(t);
	ktel_attr_ids__free(NULL);
}

/*
 * Names past the bound are never cut into another cgroup's look-alike: a
 * long name ends in '~' and its hash (one path, one name), and a mkdir
 * event whose path the kernel may have cut names nothing: the cgroup (here
 * a test directory, which no kernfs handle opens) is named by the next
 * pull's walk, with its whole path.
 */
static void test_long_and_cut(void **state)
{
	char root[] = "/tmp/ktel_attr_cut_XXXXXX", path[4096], rel[4096],
	     cut[KTEL_CGROUP_PATH_MAX + 1];
	char a[KTEL_ATTR_NAME_MAX + 1], b[KTEL_ATTR_NAME_MAX + 1], buf[KTEL_ATTR_NAME_MAX + 1];
	char comp[201];
	struct ktel_attr_names_stats st;
	struct ktel_cgroup_ev e = {.kind = KTEL_CGROUP_MKDIR, .level = 6};
	struct ktel_attr_names *n;
	struct stat sd;
	size_t len;

	(void)state;
	/* A name of 250 bytes and the cgroup whose name is its first 200. */
	memset(comp, 'a', 200);
	comp[200] = '\0';
	snprintf(path, sizeof(path), "/%s/%.49s", comp, comp);
	assert_int_equal(ktel_attr_cgroup_name(path, a, sizeof(a)), KTEL_ATTR_NAME_MAX);
	snprintf(rel, sizeof(rel), "/%s", a);
	rel[KTEL_ATTR_NAME_MAX + 1] = '\0';
	ktel_attr_cgroup_name(rel, b, sizeof(b));
	assert_string_not_equal(a, b);
	assert_null(strchr(b, '~'));
	assert_int_equal(a[KTEL_ATTR_NAME_MAX - KTEL_ATTR_LONG_SUFFIX], '~');
	assert_memory_equal(a, b, KTEL_ATTR_NAME_MAX - KTEL_ATTR_LONG_SUFFIX);
	/* One path, one name; another long path, another name. */
	ktel_attr_cgroup_name(path, b, sizeof(b));
	assert_string_equal(a, b);
	snprintf(path, sizeof(path), "/%s/%.48sb", comp, comp);
	ktel_attr_cgroup_name(path, b, sizeof(b));
	assert_string_not_equal(a, b);

	/* A directory more than 1023 bytes below the root. */
	assert_non_null(mkdtemp(root));
	len = (size_t)snprintf(path, sizeof(path), "%s", root);
	for (int i = 0; i < 6; i++) {
		len += (size_t)snprintf(path + len, sizeof(path) - len, "/%s", comp);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	assert_int_equal(stat(path, &sd), 0);
	snprintf(rel, sizeof(rel), "%s", path + strlen(root));
	n = names_at(root, NULL);
	ktel_attr_names__use_events(n, true);
	ktel_attr_names__begin_pull(n, 100);
	/* A cgroup the walk named: its cut event keeps the walk's name. */
	snprintf(cut, sizeof(cut), "%s", rel);
	e.id = (uint64_t)sd.st_ino;
	e.path = cut;
	e.path_cut = true;
	ktel_attr_names__cgroup_event(n, &e, 150);
	ktel_attr_cgroup_name(rel, a, sizeof(a));
	assert_non_null(ktel_attr_names__cgroup(n, e.id, buf, sizeof(buf)));
	assert_string_equal(buf, a);
	/* A new one, whose cut path is the whole path of another cgroup
	 * (4001). Not named by it; the next pull walks and names it. */
	snprintf(path + len, sizeof(path) - len, "/x");
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(stat(path, &sd), 0);
	snprintf(rel, sizeof(rel), "%s", path + strlen(root));
	snprintf(cut, sizeof(cut), "%s", rel);
	ev(n, KTEL_CGROUP_MKDIR, 4001, cut, 160);
	e.id = (uint64_t)sd.st_ino;
	e.path = cut;
	ktel_attr_names__cgroup_event(n, &e, 161);
	ktel_attr_names__stats(n, &st);
	assert_int_equal(st.event_paths_cut, 2);
	assert_int_equal(st.walks, 1);
	ktel_attr_names__begin_pull(n, 200);
	ktel_attr_names__stats(n, &st);
	assert_int_equal(st.walks, 2);
	ktel_attr_cgroup_name(rel, a, sizeof(a));
	ktel_attr_cgroup_name(cut, b, sizeof(b));
	assert_string_not_equal(a, b);
	assert_non_null(ktel_attr_names__cgroup(n, e.id, buf, sizeof(buf)));
	assert_string_equal(buf, a);
	assert_int_equal(strlen(buf), KTEL_ATTR_NAME_MAX);
	assert_non_null(ktel_attr_names__cgroup(n, 4001, buf, sizeof(buf)));
	assert_string_equal(buf, b);
	ktel_attr_names__free(n);
	rmdir(path);
	for (int i = 0; i < 6; i++) {
		path[len] = '\0';
		rmdir(path);
		len -= 201;
	}
	rmdir(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_names),     cmocka_unit_test(test_events_lost),
		cmocka_unit_test(test_event_subtree),   cmocka_unit_test(test_io_on_v2),
		cmocka_unit_test(test_io_v2_available), cmocka_unit_test(test_io_gaps),
		cmocka_unit_test(test_process_alive),   cmocka_unit_test(test_ids_sweep),
		cmocka_unit_test(test_used_generation), cmocka_unit_test(test_long_and_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
