// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the daemon can still do after ktel_privileges_drop(), measured on the
 * running kernel: the parent loads runq_latency as the daemon does (loaded
 * and pinned, not attached), a forked child with a second thread drops to a
 * capability set and then attaches the tp_btf programs (enable), sees the
 * scheduler's events counted through a batch read (pull), detaches them
 * (disable) and loads another plugin with pins (drop-in or reload). Each
 * case asserts exactly what works and what fails with which errno, which is
 * what docs/privileges.md states. Hermetic: its own pin root, removed.
 */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <linux/capability.h>

#include "bpf_lifecycle.h"
#include "kernel_targets.h"
#include "ktel_test.h"
#include "map_reader.h"
#include "plugin_loader.h"
#include "privileges.h"

#define TEST_GID 12346

static char pin_root[PATH_MAX];
static struct ktel_targets *targets;

/* What a child could do after its drop; sent back through a pipe. */
struct outcome {
	int drop_rc;
	char drop_msg[KTEL_ERR_MSG_MAX];
	uint64_t eff, prm;   /* main thread, after the drop */
	uint64_t helper_eff; /* the second thread, from /proc */
	int attach_rc;       /* first attach failure, or 0 */
	char attach_msg[KTEL_ERR_MSG_MAX];
	size_t attached;
	bool counted; /* the map holds events after attach */
	int read_rc;
	size_t still_attached; /* after detach */
	int load_rc;           /* loading a second plugin; 1: unsupported */
	char load_msg[KTEL_ERR_MSG_MAX];
	gid_t pin_group; /* group of the second plugin's pin */
};

static struct ktel_plugin *open_plugin(const char *name)
{
	struct ktel_plugin *p = NULL;
	struct ktel_err err = {0};
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s.so", KTEL_PLUGIN_DIR, name);
	if (ktel_plugin__open(path, &p, &err) != 0)
		fail_msg("%s", err.msg);
	return p;
}

static int load(const struct ktel_plugin *plugin, gid_t gid, bool attach,
		struct ktel_bpf_plugin **ret, struct ktel_err *err)
{
	struct ktel_bpf_opts opts = {
		.pin_root = pin_root,
		.pin_gid = gid,
		.targets = targets,
		.no_attach = !attach,
	};

	return ktel_bpf_plugin__load(plugin, &opts, ret, err);
}

static pid_t helper_tid;

static void *helper_main(void *arg)
{
	int *fds = arg;
	char c;

	helper_tid = (pid_t)syscall(SYS_gettid);
	/* Blocked in read() like a pool thread waiting for work. */
	while (read(fds[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static uint64_t thread_cap_eff(pid_t tid)
{
	char path[64], line[256];
	uint64_t v = UINT64_MAX;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return v;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "CapEff:", 7) == 0)
			v = strtoull(line + 7, NULL, 16);
	fclose(f);
	return v;
}

static bool map_has_events(struct ktel_bpf_plugin *bp, int *ret_rc)
{
	struct ktel_bpf_map *m = ktel_bpf_plugin__map(bp, "runq_latency_map");
	struct ktel_map_reader *r = NULL;
	struct ktel_map_snapshot snap;
	struct ktel_err err;
	bool any = false;

	*ret_rc = m ? ktel_map_reader__new(m->fd, NULL, &r, &err) : -ENOENT;
	if (!*ret_rc)
		*ret_rc = ktel_map_reader__read(r, &snap, &err);
	for (size_t i = 0; !*ret_rc && i < snap.count * snap.value_size; i++)
		any |= ((const unsigned char *)snap.values)[i] != 0;
	ktel_map_reader__free(r);
	return any;
}

/* Make the scheduler busy: wakeups and switches for runq_latency. */
static void sched_activity(void)
{
	for (int i = 0; i < 200; i++)
		usleep(1000);
}

/* The child: drop, then enable / pull / disable / load; never returns. */
static void child(int out_fd, struct ktel_bpf_plugin *bp, const struct ktel_privileges_opts *po)
{
	struct outcome o = {.pin_group = (gid_t)-1};
	struct ktel_bpf_plugin *second = NULL;
	struct ktel_plugin *plugin;
	struct ktel_err err = {0};
	pthread_t th;
	int fds[2];

	if (pipe(fds) || pthread_create(&th, NULL, helper_main, fds))
		_exit(3);
	while (!__atomic_load_n(&helper_tid, __ATOMIC_SEQ_CST))
		usleep(1000);
	o.drop_rc = ktel_privileges_drop(po, &err);
	snprintf(o.drop_msg, sizeof(o.drop_msg), "%s", o.drop_rc ? err.msg : "");
	ktel_privileges_current(&o.eff, &o.prm);
	o.helper_eff = thread_cap_eff(helper_tid);
	for (size_t i = 0; i < bp->n_progs; i++) {
		int r;

		if (!bp->progs[i].selected)
			continue;
		r = ktel_bpf_plugin__attach_prog(bp, bp->progs[i].name, &err);
		if (r && !o.attach_rc) {
			o.attach_rc = r;
			snprintf(o.attach_msg, sizeof(o.attach_msg), "%s", err.msg);
		}
		o.attached += !r;
	}
	sched_activity();
	o.counted = map_has_events(bp, &o.read_rc);
	ktel_bpf_plugin__detach_all(bp);
	for (size_t i = 0; i < bp->n_progs; i++)
		o.still_attached += bp->progs[i].attached || bp->progs[i].link;
	plugin = open_plugin("compaction_duration");
	o.load_rc = load(plugin, po->pin_gid, false, &second, &err);
	snprintf(o.load_msg, sizeof(o.load_msg), "%s", o.load_rc ? err.msg : "");
	/* The lifecycle reports a program the kernel refuses as "unsupported". */
	if (!o.load_rc && second->unsupported) {
		o.load_rc = 1;
		snprintf(o.load_msg, sizeof(o.load_msg), "%s", second->unsupported_reason);
	}
	if (!o.load_rc) {
		struct stat st;

		for (size_t i = 0; i < second->n_maps; i++)
			if (second->maps[i].pinned && stat(second->maps[i].pin_path, &st) == 0)
				o.pin_group = st.st_gid;
		ktel_bpf_plugin__unpin(second, &err);
	}
	ktel_bpf_plugin__free(second);
	ktel_plugin__free(plugin);
	if (write(out_fd, &o, sizeof(o)) != (ssize_t)sizeof(o))
		_exit(4);
	close(fds[1]);
	pthread_join(th, NULL);
	_exit(0);
}

/* Load runq_latency unattached, run the child with po, collect its outcome. */
static void run_case(const struct ktel_privileges_opts *po, struct outcome *o)
{
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_plugin *plugin = open_plugin("runq_latency");
	struct ktel_err err = {0};
	int fds[2], status;
	pid_t pid;

	if (load(plugin, 0, false, &bp, &err))
		fail_msg("%s", err.msg);
	assert_false(bp->unsupported);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		child(fds[1], bp, po);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], o, sizeof(*o)), sizeof(*o));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ktel_bpf_plugin__unpin(bp, &err);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(plugin);
}

static void expect_dropped_to(const struct outcome *o, uint64_t set)
{
	char want[256], have[256];

	if (o->drop_rc)
		fail_msg("drop: %s", o->drop_msg);
	ktel_privileges_format(set, want, sizeof(want));
	ktel_privileges_format(o->eff, have, sizeof(have));
	if (o->eff != set || o->prm != set || o->helper_eff != set)
		fail_msg("expected %s in every thread, main has %s, helper 0x%llx", want, have,
			 (unsigned long long)o->helper_eff);
}

/* Enable, pull and disable of loaded programs after the drop. */
static void expect_runtime_works(const struct outcome *o)
{
	if (o->attach_rc)
		fail_msg("attach after the drop: %s", o->attach_msg);
	assert_true(o->attached > 0);
	assert_int_equal(o->read_rc, 0);
	assert_true(o->counted);
	assert_int_equal(o->still_attached, 0);
}

/* What a reload may need that a start may: a group for a socket or pin, a
 * port below 1024. */
#define RELOAD_CAPS (KTEL_CAP_BIT(CAP_CHOWN) | KTEL_CAP_BIT(CAP_NET_BIND_SERVICE))

/* The computed set with pins owned by root: CAP_BPF + CAP_PERFMON and what a
 * reload may need, and all run-time work still works, including loading a
 * new plugin. */
static void test_default_set(void **state)
{
	struct ktel_privileges_opts po = {.drop = true, .pin_gid = 0};
	struct outcome o;

	run_case(&po, &o);
	expect_dropped_to(&o, KTEL_CAP_BIT(CAP_BPF) | KTEL_CAP_BIT(CAP_PERFMON) | RELOAD_CAPS);
	expect_runtime_works(&o);
	if (o.load_rc)
		fail_msg("load after the drop: %s", o.load_msg);
	assert_int_equal(o.pin_group, 0);
}

/* With a pin group, new pins get that group. */
static void test_pin_group_keeps_chown(void **state)
{
	struct ktel_privileges_opts po = {.drop = true, .pin_gid = TEST_GID};
	struct outcome o;

	run_case(&po, &o);
	expect_dropped_to(&o, KTEL_CAP_BIT(CAP_BPF) | KTEL_CAP_BIT(CAP_PERFMON) | RELOAD_CAPS);
	expect_runtime_works(&o);
	if (o.load_rc)
		fail_msg("load after the drop: %s", o.load_msg);
	assert_int_equal(o.pin_group, TEST_GID);
}

/* Without CAP_CHOWN a pin cannot be given a group root is not in. */
static void test_pin_group_without_chown_fails(void **state)
{
	struct ktel_privileges_opts po = {
		.drop = true,
		.pin_gid = TEST_GID,
		.exact = true,
		.keep = KTEL_CAP_BIT(CAP_BPF) | KTEL_CAP_BIT(CAP_PERFMON),
	};
	struct outcome o;

	run_case(&po, &o);
	expect_dropped_to(&o, po.keep);
	expect_runtime_works(&o);
	assert_int_equal(o.load_rc, -EPERM);
	assert_non_null(strstr(o.load_msg, "cannot set mode/group"));
}

/*
 * With no capability at all, attaching and detaching programs loaded before
 * the drop still work (the kernel checks capabilities at load, not at
 * attach of tp_btf), and so do reads; only loading does not.
 */
static void test_no_capabilities(void **state)
{
	struct ktel_privileges_opts po = {.drop = true, .exact = true, .keep = 0};
	struct outcome o;

	run_case(&po, &o);
	expect_dropped_to(&o, 0);
	expect_runtime_works(&o);
	assert_int_equal(o.load_rc, -EPERM);
}

/*
 * Loading a tracing program needs both CAP_BPF and CAP_PERFMON. With CAP_BPF
 * alone maps and BTF load but the kernel refuses the tp_btf program, which
 * the lifecycle reports as unsupported; with CAP_PERFMON alone libbpf's
 * first probe (a trivial program) already fails.
 */
static void test_load_needs_bpf_and_perfmon(void **state)
{
	static const struct {
		int cap;
		int rc;
		const char *msg;
	} cases[] = {
		{CAP_BPF, 1, "Operation not permitted"},
		{CAP_PERFMON, -EPERM, "Operation not permitted"},
	};

	for (size_t i = 0; i < 2; i++) {
		struct ktel_privileges_opts po = {
			.drop = true,
			.exact = true,
			.keep = KTEL_CAP_BIT(cases[i].cap),
		};
		struct outcome o;

		run_case(&po, &o);
		expect_dropped_to(&o, po.keep);
		expect_runtime_works(&o);
		if (o.load_rc != cases[i].rc || !strstr(o.load_msg, cases[i].msg))
			fail_msg("keeping only cap %d: load gave %d (%s), expected %d (%s)",
				 cases[i].cap, o.load_rc, o.load_msg, cases[i].rc, cases[i].msg);
	}
}

static int setup(void **state)
{
	struct ktel_err err = {0};

	snprintf(pin_root, sizeof(pin_root), "/sys/fs/bpf/ktel-test-priv-%d", (int)getpid());
	if (ktel_bpffs_ensure(pin_root, (gid_t)-1, &err))
		fail_msg("%s", err.msg);
	targets = ktel_targets__new(NULL, &err);
	if (!targets)
		fail_msg("%s", err.msg);
	return 0;
}

static int teardown(void **state)
{
	ktel_targets__free(targets);
	rmdir(pin_root);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_set),
		cmocka_unit_test(test_pin_group_keeps_chown),
		cmocka_unit_test(test_pin_group_without_chown_fails),
		cmocka_unit_test(test_no_capabilities),
		cmocka_unit_test(test_load_needs_bpf_and_perfmon),
	};

	ktel_test_require_root("test_privileges");
	if (ktel_privileges_cap_last_cap() < CAP_BPF) {
		printf("SKIP test_privileges: kernel without CAP_BPF (< 5.8)\n");
		return KTEL_TEST_SKIP;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
