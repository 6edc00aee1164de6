// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * BPF lifecycle on the running kernel: the built-in plugins load and attach,
 * pins appear with the right modes and group, a second load reuses them,
 * an incompatible pin is replaced, a compaction trigger reaches the map, a
 * variant group skips a missing vendor hook, a .rodata param reaches the
 * kernel, and a plugin whose hooks do not exist is unsupported while the
 * others still load. A variant that loads but cannot attach gives way to the
 * next one, or makes its plugin unsupported when it was the last; a failed
 * load keeps an incompatible pin, a failed pin removes the pins it made.
 * Hermetic: its own pin root, removed at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <linux/capability.h>

#include <bpf/bpf.h>

#include "bpf_lifecycle.h"
#include "ktel_test.h"
#include "privileges.h"
#include "map_total.h"
#include "pin_root.h"

#define TEST_GID 12345

static struct test_pin_root pins;

static struct ktel_plugin *open_plugin(const char *dir, const char *name)
{
	struct ktel_plugin *p = NULL;
	struct ktel_err err = {0};
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s.so", dir, name);
	if (ktel_plugin__open(path, &p, &err) != 0)
		fail_msg("%s", err.msg);
	return p;
}

static struct ktel_bpf_plugin *load_with(const struct ktel_plugin *plugin, const int64_t *params,
					 const struct ktel_targets *targets, bool no_attach)
{
	struct ktel_bpf_opts opts = {
		.pin_root = pins.path,
		.pin_gid = TEST_GID,
		.targets = targets,
		.param_values = params,
		.no_attach = no_attach,
	};
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_err err = {0};

	if (ktel_bpf_plugin__load(plugin, &opts, &bp, &err) != 0)
		fail_msg("%s", err.msg);
	return bp;
}

static struct ktel_bpf_plugin *load(const struct ktel_plugin *plugin, const int64_t *params)
{
	return load_with(plugin, params, pins.targets, false);
}

/* Whether pr is a variant left out because another of its group was
 * selected (a fallback for kernels without what the selected one uses). */
static bool lost_to_variant(const struct ktel_bpf_prog *pr)
{
	size_t len = strlen(pr->skip_reason);

	return !pr->selected && strncmp(pr->skip_reason, "variant group ", 14) == 0 && len > 9 &&
	       strcmp(pr->skip_reason + len - 9, " selected") == 0;
}

/* Every program selected, loaded and attached, but for variants that lost
 * to another of their group. */
static void expect_all_attached(const struct ktel_bpf_plugin *bp)
{
	size_t i;

	assert_false(bp->unsupported);
	assert_true(bp->n_progs > 0);
	for (i = 0; i < bp->n_progs; i++) {
		const struct ktel_bpf_prog *pr = &bp->progs[i];

		if (lost_to_variant(pr))
			continue;
		if (!pr->selected || !pr->attached)
			fail_msg("%s: selected %d attached %d: %s%s", pr->name, pr->selected,
				 pr->attached, pr->skip_reason, pr->attach_error);
		assert_non_null(pr->link);
		assert_true(pr->prog_id > 0);
	}
}

static void expect_pin(const struct ktel_bpf_map *m, const char *object)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/map_%s_%s", pins.path, object, m->name);
	assert_true(m->pinned);
	assert_string_equal(m->pin_path, path);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, KTEL_PIN_MAP_MODE);
	assert_int_equal(st.st_gid, TEST_GID);
	assert_true(m->map_id > 0);
	assert_true(m->fd >= 0);
}

static void compact_memory(void)
{
	int fd = open("/proc/sys/vm/compact_memory", O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "1", 1), 1);
	close(fd);
}

static void test_pin_root(void **state)
{
	struct ktel_err err = {0};
	struct stat st;

	assert_int_equal(stat(pins.path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, KTEL_PIN_DIR_MODE);
	assert_int_equal(st.st_gid, TEST_GID);
	/* Idempotent; a path outside bpffs is refused with the reason. */
	assert_int_equal(ktel_bpffs_ensure(pins.path, TEST_GID, &err), 0);
	assert_int_equal(ktel_bpffs_ensure("/tmp/ktel-not-bpffs", (gid_t)-1, &err), -ENOTSUP);
	assert_string_equal(err.msg, "pin root /tmp/ktel-not-bpffs is not on a bpf filesystem");
	assert_int_equal(ktel_bpffs_ensure("relative/root", (gid_t)-1, &err), -EINVAL);
	/* The mount's root is every BPF user's: refused, its mode untouched. */
	{
		struct stat before, after;

		assert_int_equal(stat("/sys/fs/bpf", &before), 0);
		assert_int_equal(ktel_bpffs_ensure("/sys/fs/bpf", TEST_GID, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "is the root of a bpf filesystem"));
		assert_int_equal(stat("/sys/fs/bpf", &after), 0);
		assert_int_equal(before.st_mode, after.st_mode);
		assert_int_equal(before.st_gid, after.st_gid);
	}
}

/*
 * In a child with its own mount namespace (so nothing outside sees it):
 * without bpffs, an unprivileged caller gets the clear error, root gets
 * bpffs mounted and the pin root created. Exit status = failed step.
 */
static int bpffs_child(void)
{
	char root[PATH_MAX];
	struct ktel_err err = {0};
	struct statfs sfs;
	struct stat st;

	snprintf(root, sizeof(root), "/sys/fs/bpf/ktel-test-mount-%d", (int)getpid());
	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return 1;
	if (umount2("/sys/fs/bpf", MNT_DETACH) != 0)
		return 2;
	if (statfs("/sys/fs/bpf", &sfs) != 0 || sfs.f_type == 0xcafe4a11)
		return 3;
	if (setresuid(65534, 65534, 0) != 0)
		return 4;
	if (ktel_bpffs_ensure(root, (gid_t)-1, &err) != -EPERM ||
	    !strstr(err.msg, "bpffs is not mounted at /sys/fs/bpf and only root can mount it"))
		return 5;
	if (setresuid(0, 0, 0) != 0)
		return 6;
	if (ktel_bpffs_ensure(root, TEST_GID, &err) != 0)
		return 7;
	if (statfs(root, &sfs) != 0 || sfs.f_type != 0xcafe4a11)
		return 8;
	if (stat(root, &st) != 0 || (st.st_mode & 07777) != KTEL_PIN_DIR_MODE ||
	    st.st_gid != TEST_GID)
		return 9;
	return 0;
}

static void test_bpffs_mount(void **state)
{
	int status;
	pid_t pid;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(bpffs_child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_builtin_plugins(void **state)
{
	static const struct {
		const char *name, *map;
	} builtins[] = {
		{"direct_reclaim_latency", "direct_reclaim_latency_map"},
		{"compaction_duration", "compaction_duration_map"},
	};
	struct ktel_bpf_plugin *bp[2], *again;
	struct ktel_plugin *p[2];
	struct ktel_bpf_map *m;
	uint32_t first_id;
	size_t i;

	for (i = 0; i < 2; i++) {
		p[i] = open_plugin(KTEL_PLUGIN_DIR, builtins[i].name);
		bp[i] = load(p[i], NULL);
		expect_all_attached(bp[i]);
		assert_int_equal(bp[i]->n_maps, 1);
		m = ktel_bpf_plugin__map(bp[i], builtins[i].map);
		assert_non_null(m);
		expect_pin(m, builtins[i].name);
		assert_false(m->reused);
		assert_string_equal(m->note, "");
		/* Start maps are private to the programs: never pinned. */
		assert_null(ktel_bpf_plugin__map(bp[i], "compaction_start_map"));
	}

	/* A second start while the first runs shares the same map. */
	m = ktel_bpf_plugin__map(bp[1], "compaction_duration_map");
	first_id = m->map_id;
	again = load(p[1], NULL);
	assert_true(again->maps[0].reused);
	assert_int_equal(again->maps[0].map_id, first_id);
	expect_pin(&again->maps[0], "compaction_duration");
	ktel_bpf_plugin__free(again);

	/* After the first is gone the pin alone keeps the map: still reused. */
	ktel_bpf_plugin__free(bp[1]);
	bp[1] = load(p[1], NULL);
	expect_all_attached(bp[1]);
	assert_true(bp[1]->maps[0].reused);
	assert_int_equal(bp[1]->maps[0].map_id, first_id);

	/* Compaction events reach the (reused) map. */
	compact_memory();
	assert_true(ktel_test_map_total(bp[1]->maps[0].fd) > 0);

	/* Detach stops counting; attach resumes. */
	ktel_bpf_plugin__detach_prog(bp[1], "compaction_end");
	assert_false(ktel_bpf_plugin__prog(bp[1], "compaction_end")->attached);
	assert_null(ktel_bpf_plugin__prog(bp[1], "compaction_end")->link);
	assert_int_equal(ktel_bpf_plugin__attach_prog(bp[1], "compaction_end", NULL), 0);
	assert_true(ktel_bpf_plugin__prog(bp[1], "compaction_end")->attached);
	assert_int_equal(ktel_bpf_plugin__attach_prog(bp[1], "no_such_prog", NULL), -ENOENT);

	for (i = 0; i < 2; i++) {
		assert_int_equal(ktel_bpf_plugin__unpin(bp[i], NULL), 0);
		ktel_bpf_plugin__free(bp[i]);
		ktel_plugin__free(p[i]);
	}
}

/* The vendor hook variant is skipped, the tracepoint one runs; the param arrives. */
static void test_variants_and_params(void **state)
{
	/* Prime and large: a default weight of 1 cannot produce a multiple of it. */
	const int64_t weight[] = {1000003};
	struct ktel_plugin *p = open_plugin(KTEL_TEST_PLUGIN_DIR, "fx_variants");
	struct ktel_bpf_plugin *bp;
	struct ktel_bpf_prog *vh, *tp;
	char path[PATH_MAX];
	uint64_t total;
	int fd;

	/* An incompatible pin (hash, not array) left by an "older version". */
	snprintf(path, sizeof(path), "%s/map_fx_variants_fx_variants_map", pins.path);
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, "old", 4, 8, 1, NULL);
	assert_true(fd >= 0);
	assert_int_equal(bpf_obj_pin(fd, path), 0);
	close(fd);

	bp = load(p, weight);
	vh = ktel_bpf_plugin__prog(bp, "fx_variants_vh");
	tp = ktel_bpf_plugin__prog(bp, "fx_variants_tp");
	assert_false(bp->unsupported);
	assert_false(vh->selected);
	assert_false(vh->attached);
	assert_string_equal(vh->skip_reason,
			    "tracepoint android_vh_ktel_test_compaction not in this kernel");
	assert_true(tp->selected);
	assert_true(tp->attached);
	assert_false(bp->maps[0].reused);
	assert_string_equal(bp->maps[0].note,
			    "replaced incompatible pin: map type 1, object wants 2");
	expect_pin(&bp->maps[0], "fx_variants");

	compact_memory();
	total = ktel_test_map_total(bp->maps[0].fd);
	assert_true(total >= 1000003);
	assert_int_equal(total % 1000003, 0);

	/* The vendor hook variant cannot be attached: it was never loaded. */
	assert_int_equal(ktel_bpf_plugin__attach_prog(bp, "fx_variants_vh", NULL), -EINVAL);
	assert_int_equal(ktel_bpf_plugin__unpin(bp, NULL), 0);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(p);
}

/* A latency plugin whose start is the task's: its task start programs and
 * their hash start fallbacks. */
struct task_start_plugin {
	const char *name;
	const char *task_progs[3]; /* NULL after the last */
	const char *hash_progs[3];
};

static const struct task_start_plugin task_start_plugins[] = {
	{"compaction_duration",
	 {"compaction_begin", "compaction_end"},
	 {"compaction_begin_hash", "compaction_end_hash"}},
	{"memcg_reclaim_latency",
	 {"memcg_reclaim_begin", "memcg_reclaim_end"},
	 {"memcg_reclaim_begin_hash", "memcg_reclaim_end_hash"}},
	{"direct_reclaim_latency",
	 {"direct_reclaim_begin_task", "direct_reclaim_end_task"},
	 {"tracepoint_vmscan_mm_vmscan_direct_reclaim_begin",
	  "tracepoint_vmscan_mm_vmscan_direct_reclaim_end"}},
};

/* Load plugin with or without task storage; expect the one form attached
 * and the other not loaded. Returns the loaded plugin. */
static struct ktel_bpf_plugin *load_start_form(const struct ktel_plugin *p,
					       const struct task_start_plugin *e, bool no_task)
{
	struct ktel_bpf_opts opts = {.pin_root = pins.path,
				     .pin_gid = TEST_GID,
				     .targets = pins.targets,
				     .no_task_storage = no_task};
	const char *const *on = no_task ? e->hash_progs : e->task_progs;
	const char *const *off = no_task ? e->task_progs : e->hash_progs;
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_err err = {0};
	struct ktel_bpf_prog *pr;

	if (ktel_bpf_plugin__load(p, &opts, &bp, &err) != 0)
		fail_msg("%s: %s", e->name, err.msg);
	assert_false(bp->unsupported);
	for (int i = 0; i < 3 && on[i]; i++) {
		pr = ktel_bpf_plugin__prog(bp, on[i]);
		assert_non_null(pr);
		if (!pr->selected || !pr->attached)
			fail_msg("%s: %s not attached: %s%s", e->name, on[i], pr->skip_reason,
				 pr->attach_error);
		pr = ktel_bpf_plugin__prog(bp, off[i]);
		assert_non_null(pr);
		assert_false(pr->selected);
	}
	return bp;
}

/*
 * Every plugin whose start is a task's keeps it in task storage
 * here, and on a kernel without task storage (acted out with
 * no_task_storage: the task map is left out of the load) falls back to its
 * hash start programs, which load, attach and measure: compaction counted
 * in both forms.
 */
static void test_task_start_fallback(void **state)
{
	struct ktel_bpf_plugin *bp;
	struct ktel_plugin *p;
	uint64_t total;

	for (size_t i = 0; i < sizeof(task_start_plugins) / sizeof(task_start_plugins[0]); i++) {
		const struct task_start_plugin *e = &task_start_plugins[i];

		p = open_plugin(KTEL_PLUGIN_DIR, e->name);
		for (int no_task = 0; no_task <= 1; no_task++) {
			bp = load_start_form(p, e, no_task);
			if (i == 0) {
				compact_memory();
				total = ktel_test_map_total(
					ktel_bpf_plugin__map(bp, "compaction_duration_map")->fd);
				if (total < 1)
					fail_msg("%s: no compaction counted (no_task_storage %d)",
						 e->name, no_task);
			}
			assert_int_equal(ktel_bpf_plugin__unpin(bp, NULL), 0);
			ktel_bpf_plugin__free(bp);
		}
		ktel_plugin__free(p);
	}
}

/* A run-queue plugin's forms (runq_latency.bpf.c): its programs, the
 * stamp's switch, the hash trio; where the stamp form shows its waits. */
struct runq_plugin {
	const char *name;
	const char *progs[7];
	const char *hash[3];
	const char *map;   /* a histogram the waits are counted in, or NULL */
	const char *event; /* the stream metric the waits go to, or NULL */
};

static const struct runq_plugin runq_plugins[] = {
	{"runq_latency",
	 {"runq_switch_si", "runq_switch", "runq_wakeup", "runq_wakeup_new", "runq_switch_hash",
	  "runq_wakeup_hash", "runq_wakeup_new_hash"},
	 {"runq_switch_hash", "runq_wakeup_hash", "runq_wakeup_new_hash"},
	 "runq_latency_map",
	 NULL},
	{"runq_stall_events",
	 {"runq_stall_switch_si", "runq_stall_switch", "runq_stall_wakeup", "runq_stall_wakeup_new",
	  "runq_stall_switch_hash", "runq_stall_wakeup_hash", "runq_stall_wakeup_new_hash"},
	 {"runq_stall_switch_hash", "runq_stall_wakeup_hash", "runq_stall_wakeup_new_hash"},
	 NULL,
	 "runq_stall_rb"},
};

/* Bytes waiting in the ring buffer map fd (its consumer never moved). */
static uint64_t ring_bytes(int fd)
{
	long page = sysconf(_SC_PAGESIZE);
	void *cons, *prod;
	uint64_t n;

	cons = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(cons != MAP_FAILED);
	prod = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, page);
	assert_true(prod != MAP_FAILED);
	n = __atomic_load_n((uint64_t *)prod, __ATOMIC_ACQUIRE) -
	    __atomic_load_n((uint64_t *)cons, __ATOMIC_ACQUIRE);
	munmap(prod, page);
	munmap(cons, page);
	return n;
}

/*
 * The run-queue plugins on this kernel (sched_info, task storage): the
 * switch on the scheduler's stamp alone, attached, no wakeup hook; without
 * task storage (acted out) the stamp's switch and the task forms are
 * refused and the hash trio runs. Every form counts waits (runq_latency's
 * histogram) or emits them (runq_stall_events with threshold_us 0).
 */
static void test_runq_forms(void **state)
{
	static const int64_t every_wait[] = {0};

	(void)state;
	for (size_t e = 0; e < sizeof(runq_plugins) / sizeof(runq_plugins[0]); e++) {
		const struct runq_plugin *rp = &runq_plugins[e];
		struct ktel_plugin *p = open_plugin(KTEL_PLUGIN_DIR, rp->name);

		for (int no_task = 0; no_task <= 1; no_task++) {
			struct ktel_bpf_opts opts = {.pin_root = pins.path,
						     .pin_gid = TEST_GID,
						     .targets = pins.targets,
						     .param_values = rp->event ? every_wait : NULL,
						     .no_task_storage = no_task};
			const char *const *on = no_task ? rp->hash : rp->progs;
			size_t n_on = no_task ? 3 : 1;
			struct ktel_bpf_plugin *bp = NULL;
			struct ktel_err err = {0};
			struct ktel_bpf_prog *pr;
			uint64_t seen;
			bool want;

			if (ktel_bpf_plugin__load(p, &opts, &bp, &err) != 0)
				fail_msg("%s: %s", rp->name, err.msg);
			assert_false(bp->unsupported);
			for (size_t i = 0; i < 7; i++) {
				want = false;
				for (size_t k = 0; k < n_on; k++)
					want |= strcmp(rp->progs[i], on[k]) == 0;
				pr = ktel_bpf_plugin__prog(bp, rp->progs[i]);
				assert_non_null(pr);
				if (pr->selected != want || (want && !pr->attached))
					fail_msg("%s no_task_storage %d: %s selected %d attached "
						 "%d: %s%s",
						 rp->name, no_task, rp->progs[i], pr->selected,
						 pr->attached, pr->skip_reason, pr->attach_error);
			}
			usleep(200000); /* the machine switches: some waits are counted */
			if (rp->map)
				seen = ktel_test_map_total(ktel_bpf_plugin__map(bp, rp->map)->fd);
			else
				seen = ring_bytes(ktel_bpf_plugin__map(bp, rp->event)->fd);
			if (seen < 1)
				fail_msg("%s: no wait seen (no_task_storage %d)", rp->name,
					 no_task);
			assert_int_equal(ktel_bpf_plugin__unpin(bp, NULL), 0);
			ktel_bpf_plugin__free(bp);
		}
		ktel_plugin__free(p);
	}
}

/* A plugin whose hooks do not exist is unsupported; the others still load. */
static void test_unsupported_plugin(void **state)
{
	struct ktel_plugin *missing = open_plugin(KTEL_TEST_PLUGIN_DIR, "fx_missing_tp");
	struct ktel_plugin *good = open_plugin(KTEL_PLUGIN_DIR, "compaction_duration");
	struct ktel_bpf_plugin *bp_missing, *bp_good;
	char path[PATH_MAX];
	size_t i;

	bp_missing = load(missing, NULL);
	assert_true(bp_missing->unsupported);
	assert_string_equal(bp_missing->unsupported_reason,
			    "tracepoint ktel_no_such_tracepoint not in this kernel; "
			    "function ktel_no_such_function not in this kernel");
	assert_int_equal(bp_missing->n_progs, 2);
	for (i = 0; i < bp_missing->n_progs; i++) {
		assert_false(bp_missing->progs[i].selected);
		assert_false(bp_missing->progs[i].attached);
	}
	/* Nothing loaded, nothing pinned. */
	snprintf(path, sizeof(path), "%s/map_fx_missing_tp_fx_missing_tp_map", pins.path);
	assert_int_equal(access(path, F_OK), -1);

	bp_good = load(good, NULL);
	expect_all_attached(bp_good);

	assert_int_equal(ktel_bpf_plugin__unpin(bp_good, NULL), 0);
	ktel_bpf_plugin__free(bp_good);
	ktel_bpf_plugin__free(bp_missing);
	ktel_plugin__free(good);
	ktel_plugin__free(missing);
}

/* ---- attach failures ------------------------------------------------ */

static char fake_tracefs[PATH_MAX];

/*
 * The running kernel's targets, but with a tracefs that lists the events
 * ktel_test/<event>: the target check passes, the program loads, and only
 * libbpf's attach (which reads the real tracefs) fails.
 */
static struct ktel_targets *targets_with_fake_event(const char *event)
{
	struct ktel_targets *t;
	struct ktel_err err = {0};
	char path[PATH_MAX + 64];

	snprintf(fake_tracefs, sizeof(fake_tracefs), "%s/tests/integration/fake-tracefs-%d",
		 KTEL_BINARY_DIR, (int)getpid());
	snprintf(path, sizeof(path), "mkdir -p %s/events/ktel_test/%s", fake_tracefs, event);
	assert_int_equal(system(path), 0);
	t = ktel_targets__new(NULL, &err);
	if (!t)
		fail_msg("%s", err.msg);
	assert_int_equal(ktel_targets__set_probe_paths(t, NULL, fake_tracefs), 0);
	return t;
}

static void remove_fake_tracefs(void)
{
	assert_int_equal(ktel_test_rm_rf(fake_tracefs), 0);
}

static uint64_t count_reads(struct ktel_bpf_plugin *bp, const char *map)
{
	char buf[16];
	int fd = open("/dev/zero", O_RDONLY);

	assert_true(fd >= 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(syscall(SYS_read, fd, buf, sizeof(buf)), (long)sizeof(buf));
	close(fd);
	assert_non_null(ktel_bpf_plugin__map(bp, map));
	return ktel_test_map_total(ktel_bpf_plugin__map(bp, map)->fd);
}

/* The variant that loads but cannot attach is excluded; the next one runs. */
static void test_attach_fallback(void **state)
{
	const int64_t params[] = {getpid(), SYS_read};
	struct ktel_plugin *p = open_plugin(KTEL_TEST_PLUGIN_DIR, "fx_attach_fallback");
	struct ktel_targets *t = targets_with_fake_event("ktel_no_such_event");
	const struct ktel_metric_desc *md = &p->desc.metrics[0];
	struct ktel_bpf_prog *tracepoint, *tp;
	struct ktel_err err = {0};
	struct ktel_bpf_plugin *bp;

	for (int no_attach = 0; no_attach < 2; no_attach++) {
		bp = load_with(p, params, t, no_attach);
		tracepoint = ktel_bpf_plugin__prog(bp, "fx_attach_tracepoint");
		tp = ktel_bpf_plugin__prog(bp, "fx_attach_tp");
		assert_false(bp->unsupported);
		assert_false(tracepoint->selected);
		assert_false(tracepoint->attached);
		if (strncmp(tracepoint->skip_reason, "attach failed: ", 15) != 0)
			fail_msg("fx_attach_tracepoint: %s", tracepoint->skip_reason);
		assert_true(tp->selected);
		assert_int_equal(bp->n_groups, 1);
		assert_string_equal(bp->groups[0].name, "read");
		assert_ptr_equal(bp->groups[0].winner, tp);
		if (no_attach) {
			/* Tried, then detached: the daemon attaches per metric. */
			assert_false(tp->attached);
			assert_null(tp->link);
			assert_int_equal(ktel_bpf_plugin__group_state(&bp->groups[0]),
					 KTEL_GROUP_LOADED);
			assert_int_equal(ktel_bpf_plugin__metric_complete(bp, md, &err), -ENODEV);
			assert_string_equal(err.msg,
					    "metric fx_attach_fallback: variant group read: "
					    "fx_attach_tp is not attached");
			assert_int_equal(ktel_bpf_plugin__attach_prog(bp, "fx_attach_tp", &err), 0);
		}
		assert_true(tp->attached);
		assert_int_equal(ktel_bpf_plugin__group_state(&bp->groups[0]), KTEL_GROUP_ATTACHED);
		assert_int_equal(ktel_bpf_plugin__metric_complete(bp, md, &err), 0);
		/* The fallback runs: it counts this process's reads. */
		assert_true(count_reads(bp, "fx_attach_map") >= 10);
		assert_int_equal(ktel_bpf_plugin__unpin(bp, NULL), 0);
		ktel_bpf_plugin__free(bp);
	}
	ktel_targets__free(t);
	remove_fake_tracefs();
	ktel_plugin__free(p);
}

/*
 * The end hook cannot attach and has no other variant: the plugin is
 * unsupported naming that group, its start hook is not left running alone,
 * and nothing is pinned.
 */
static void test_attach_failed_unsupported(void **state)
{
	struct ktel_plugin *p = open_plugin(KTEL_TEST_PLUGIN_DIR, "fx_attach_failed");
	struct ktel_targets *t = targets_with_fake_event("ktel_no_such_end");
	struct ktel_err err = {0};
	struct ktel_bpf_plugin *bp;
	char path[PATH_MAX];

	for (int no_attach = 0; no_attach < 2; no_attach++) {
		bp = load_with(p, NULL, t, no_attach);
		assert_true(bp->unsupported);
		if (strncmp(bp->unsupported_reason,
			    "variant group end: no usable variant (attach failed: ", 53) != 0)
			fail_msg("reason: %s", bp->unsupported_reason);
		assert_null(bp->obj);
		for (size_t i = 0; i < bp->n_progs; i++) {
			assert_false(bp->progs[i].selected);
			assert_false(bp->progs[i].attached);
			assert_null(bp->progs[i].link);
		}
		assert_string_equal(ktel_bpf_plugin__prog(bp, "fx_attach_failed_start")->skip_reason,
				    "not loaded: variant group end has no usable variant");
		assert_int_equal(bp->n_groups, 2);
		assert_int_equal(ktel_bpf_plugin__group_state(&bp->groups[0]), KTEL_GROUP_UNUSABLE);
		assert_int_equal(ktel_bpf_plugin__group_state(&bp->groups[1]), KTEL_GROUP_UNUSABLE);
		assert_int_equal(ktel_bpf_plugin__metric_complete(bp, &p->desc.metrics[0], &err),
				 -ENODEV);
		assert_non_null(
			strstr(err.msg, "metric fx_attach_failed: unsupported: variant group end"));
		snprintf(path, sizeof(path), "%s/map_fx_attach_failed_fx_attach_failed_map",
			 pins.path);
		assert_int_equal(access(path, F_OK), -1);
		ktel_bpf_plugin__free(bp);
	}
	ktel_targets__free(t);
	remove_fake_tracefs();
	ktel_plugin__free(p);
}

/* ---- pins ------------------------------------------------------------ */

/* In a child with CAP_BPF alone (the kernel refuses tp_btf): load plugin. */
static int load_refused_child(const struct ktel_plugin *plugin)
{
	struct ktel_privileges_opts po = {.drop = true,
					  .exact = true,
					  .keep = KTEL_CAP_BIT(CAP_BPF)};
	struct ktel_bpf_opts opts = {.pin_root = pins.path,
				     .pin_gid = (gid_t)-1,
				     .targets = pins.targets};
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_err err = {0};
	int rc;

	if (ktel_privileges_drop(&po, &err) != 0)
		return 1;
	if (ktel_bpf_plugin__load(plugin, &opts, &bp, &err) != 0)
		return 0; /* failing outright is fine too: the pin is what matters */
	rc = bp->unsupported ? 0 : 2;
	ktel_bpf_plugin__free(bp);
	return rc;
}

/* A load that fails leaves an incompatible pin, and what it holds, alone. */
static void test_incompatible_pin_kept_on_failed_load(void **state)
{
	struct ktel_plugin *p = open_plugin(KTEL_PLUGIN_DIR, "compaction_duration");
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	struct ktel_bpf_plugin *bp;
	char path[PATH_MAX];
	int fd, status;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/map_compaction_duration_compaction_duration_map",
		 pins.path);
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "old", 4, 8, 1, NULL);
	assert_true(fd >= 0);
	assert_int_equal(bpf_obj_pin(fd, path), 0);
	close(fd);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(load_refused_child(p));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	fd = bpf_obj_get(path);
	if (fd < 0)
		fail_msg("%s: the failed load removed the old pin: %s", path, strerror(errno));
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	assert_int_equal(info.type, BPF_MAP_TYPE_ARRAY);
	close(fd);

	/* A load that works replaces it, and says so. */
	bp = load(p, NULL);
	expect_all_attached(bp);
	assert_string_equal(bp->maps[0].note,
			    "replaced incompatible pin: map type 2, object wants 1");
	expect_pin(&bp->maps[0], "compaction_duration");
	assert_int_equal(ktel_bpf_plugin__unpin(bp, NULL), 0);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(p);
}

/* A pin that fails after others were made removes those: no half-pinned plugin. */
static void test_pin_failure_unpins(void **state)
{
	struct ktel_plugin *p = open_plugin(KTEL_PLUGIN_DIR, "suspend_resume_latency");
	struct ktel_bpf_opts opts = {.pin_root = pins.path,
				     .pin_gid = TEST_GID,
				     .targets = pins.targets};
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_err err = {0};
	char labels[PATH_MAX], metric[PATH_MAX], want[PATH_MAX * 2];

	/*
	 * The label map's pin comes second. A dangling symlink in its place
	 * looks absent (opening it gives ENOENT), so the first map is pinned
	 * and only the second pin fails (EEXIST).
	 */
	snprintf(metric, sizeof(metric), "%s/map_suspend_resume_latency_suspend_resume_latency_map",
		 pins.path);
	snprintf(labels, sizeof(labels), "%s/map_suspend_resume_latency_suspend_phase_names",
		 pins.path);
	assert_int_equal(symlink("ktel-no-such-pin", labels), 0);

	assert_int_equal(ktel_bpf_plugin__load(p, &opts, &bp, &err), -EEXIST);
	snprintf(want, sizeof(want),
		 "plugin suspend_resume_latency: map suspend_phase_names: "
		 "cannot pin at %s: %s",
		 labels, strerror(EEXIST));
	assert_string_equal(err.msg, want);
	assert_null(bp);
	if (access(metric, F_OK) == 0) {
		unlink(metric);
		fail_msg("%s: left pinned by a load that failed", metric);
	}
	assert_int_equal(unlink(labels), 0);
	ktel_plugin__free(p);
}

static int setup(void **state)
{
	return test_pin_root_setup(&pins, "lifecycle", TEST_GID);
}

static int teardown(void **state)
{
	return test_pin_root_teardown(&pins);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pin_root),
		cmocka_unit_test(test_bpffs_mount),
		cmocka_unit_test(test_builtin_plugins),
		cmocka_unit_test(test_variants_and_params),
		cmocka_unit_test(test_unsupported_plugin),
		cmocka_unit_test(test_task_start_fallback),
		cmocka_unit_test(test_runq_forms),
		cmocka_unit_test(test_attach_fallback),
		cmocka_unit_test(test_attach_failed_unsupported),
		cmocka_unit_test(test_incompatible_pin_kept_on_failed_load),
		cmocka_unit_test(test_pin_failure_unpins),
	};

	ktel_test_require_root("test_lifecycle");
	/* KTEL_TEST_FILTER=name runs one test while working on it. */
	if (getenv("KTEL_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KTEL_TEST_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
