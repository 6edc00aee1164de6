// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Privileges logic that needs no privileges: the kept set per kernel and pin
 * group, the memlock rule per kernel release, the formatting of sets, and
 * the drop itself in forked children (root or not, every thread ends up
 * with at most the kept set; a thread that blocks the drop signal is named).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <linux/capability.h>

#include "privileges.h"

#define BPF_PERFMON (KTEL_CAP_BIT(CAP_BPF) | KTEL_CAP_BIT(CAP_PERFMON))
/* What a reload may need that a start may: groups of sockets and pins, and a
 * port below 1024. */
#define RELOAD (KTEL_CAP_BIT(CAP_CHOWN) | KTEL_CAP_BIT(CAP_NET_BIND_SERVICE))

/* CAP_CHOWN is kept whatever pin_group is: a reload may add a stream sink
 * with a group even when the config at start named none. */
static void test_keep_set_modern_kernel(void **state)
{
	struct ktel_privileges_opts o = {.drop = true, .pin_gid = 0};

	assert_int_equal(ktel_privileges_keep_set(&o, 40), BPF_PERFMON | RELOAD);
	assert_int_equal(ktel_privileges_keep_set(&o, CAP_BPF), BPF_PERFMON | RELOAD);
	o.pin_gid = (gid_t)-1;
	assert_int_equal(ktel_privileges_keep_set(&o, 40), BPF_PERFMON | RELOAD);
	o.pin_gid = 1234;
	assert_int_equal(ktel_privileges_keep_set(&o, 40), BPF_PERFMON | RELOAD);
}

static void test_keep_set_old_kernel(void **state)
{
	struct ktel_privileges_opts o = {.drop = true};

	/* 5.7 and older: cap_last_cap is CAP_AUDIT_READ (37). */
	assert_int_equal(ktel_privileges_keep_set(&o, CAP_AUDIT_READ),
			 KTEL_CAP_BIT(CAP_SYS_ADMIN) | RELOAD);
}

static void test_keep_set_extra_and_exact(void **state)
{
	struct ktel_privileges_opts o = {.drop = true, .keep = KTEL_CAP_BIT(CAP_DAC_OVERRIDE)};

	assert_int_equal(ktel_privileges_keep_set(&o, 40),
			 BPF_PERFMON | RELOAD | KTEL_CAP_BIT(CAP_DAC_OVERRIDE));
	o.keep = KTEL_CAP_BIT(CAP_NET_BIND_SERVICE);
	o.exact = true;
	o.pin_gid = 1234;
	assert_int_equal(ktel_privileges_keep_set(&o, 40), KTEL_CAP_BIT(CAP_NET_BIND_SERVICE));
	o.keep = 0;
	assert_int_equal(ktel_privileges_keep_set(&o, 40), 0);
}

static void test_memlock_rule(void **state)
{
	assert_true(ktel_privileges_memlock_charged("5.10.198-android13-4-00050-g12f3388846c3"));
	assert_true(ktel_privileges_memlock_charged("4.19.191"));
	assert_false(ktel_privileges_memlock_charged("5.11.0"));
	assert_false(ktel_privileges_memlock_charged("5.15.0-91-generic"));
	assert_false(ktel_privileges_memlock_charged("6.18.0"));
	assert_true(ktel_privileges_memlock_charged("garbage"));
	assert_true(ktel_privileges_memlock_charged(NULL));
}

static void test_format(void **state)
{
	char buf[128];

	ktel_privileges_format(0, buf, sizeof(buf));
	assert_string_equal(buf, "none");
	ktel_privileges_format(BPF_PERFMON | KTEL_CAP_BIT(CAP_CHOWN), buf, sizeof(buf));
	assert_string_equal(buf, "CAP_CHOWN,CAP_PERFMON,CAP_BPF");
	ktel_privileges_format(KTEL_CAP_BIT(50), buf, sizeof(buf));
	assert_string_equal(buf, "cap_50");
	ktel_privileges_format(BPF_PERFMON, buf, 8);
	assert_string_equal(buf, "CAP_PER");
}

static void test_cap_last_cap(void **state)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	int want = CAP_LAST_CAP;

	if (f) {
		assert_int_equal(fscanf(f, "%d", &want), 1);
		fclose(f);
	}
	assert_int_equal(ktel_privileges_cap_last_cap(), want);
}

/* drop=false changes nothing (this process is not forked: it must not). */
static void test_disabled_is_noop(void **state)
{
	struct ktel_privileges_opts o = {.drop = false};
	uint64_t eff0, prm0, eff1, prm1;
	struct ktel_err err = {0};

	assert_int_equal(ktel_privileges_current(&eff0, &prm0), 0);
	assert_int_equal(ktel_privileges_drop(&o, &err), 0);
	assert_int_equal(ktel_privileges_drop(NULL, &err), 0);
	assert_int_equal(ktel_privileges_current(&eff1, &prm1), 0);
	assert_int_equal(eff0, eff1);
	assert_int_equal(prm0, prm1);
}

struct helper {
	pthread_t th;
	int fds[2];
	pid_t tid;
	bool block_all;
};

static void *helper_main(void *arg)
{
	struct helper *h = arg;
	sigset_t all;
	char c;

	if (h->block_all) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, NULL);
	}
	pthread_setname_np(pthread_self(), h->block_all ? "blocker" : "helper");
	__atomic_store_n(&h->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	while (read(h->fds[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static int start_helper(struct helper *h, bool block_all)
{
	h->block_all = block_all;
	h->tid = 0;
	if (pipe(h->fds) || pthread_create(&h->th, NULL, helper_main, h))
		return -1;
	while (!__atomic_load_n(&h->tid, __ATOMIC_SEQ_CST))
		usleep(1000);
	usleep(10000); /* let it reach read() with its final mask */
	return 0;
}

static uint64_t thread_caps(pid_t tid, const char *key)
{
	char path[64], line[256];
	uint64_t v = UINT64_MAX;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return v;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':')
			v = strtoull(line + strlen(key) + 1, NULL, 16);
	fclose(f);
	return v;
}

/* Run fn in a child; the child's exit code is fn's result (0: pass). */
static void in_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) != 0)
		fail_msg("child failed at step %d", WEXITSTATUS(status));
}

/* Every thread, the helper included, ends with nothing beyond the kept set. */
static int child_drop_all_threads(void)
{
	struct ktel_privileges_opts o = {.drop = true,
					 .exact = true,
					 .keep = KTEL_CAP_BIT(CAP_CHOWN)};
	uint64_t eff, prm, before;
	struct ktel_err err = {0};
	struct helper h;

	if (start_helper(&h, false))
		return 10;
	if (ktel_privileges_current(&before, &prm))
		return 11;
	if (ktel_privileges_drop(&o, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 12;
	}
	if (ktel_privileges_current(&eff, &prm))
		return 13;
	/* Root keeps CAP_CHOWN; an unprivileged run had nothing to keep. */
	if (eff != (before & o.keep) || prm != eff)
		return 14;
	if (thread_caps(h.tid, "CapEff") != eff || thread_caps(h.tid, "CapPrm") != eff)
		return 15;
	if (thread_caps(h.tid, "CapInh") != 0 || thread_caps(h.tid, "CapAmb") != 0)
		return 16;
	close(h.fds[1]);
	pthread_join(h.th, NULL);
	return 0;
}

static void test_drop_reaches_every_thread(void **state)
{
	in_child(child_drop_all_threads);
}

/* A thread that blocks the drop signal fails the drop, by name. */
static int child_blocked_thread(void)
{
	struct ktel_privileges_opts o = {.drop = true, .exact = true, .keep = 0};
	struct ktel_err err = {0};
	struct helper h;
	int r;

	if (start_helper(&h, true))
		return 20;
	r = ktel_privileges_drop(&o, &err);
	if (r != -EBUSY)
		return 21;
	if (!strstr(err.msg, "(blocker) blocks signal"))
		return 22;
	return 0;
}

static void test_blocked_thread_is_named(void **state)
{
	in_child(child_blocked_thread);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keep_set_modern_kernel),
		cmocka_unit_test(test_keep_set_old_kernel),
		cmocka_unit_test(test_keep_set_extra_and_exact),
		cmocka_unit_test(test_memlock_rule),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_cap_last_cap),
		cmocka_unit_test(test_disabled_is_noop),
		cmocka_unit_test(test_drop_reaches_every_thread),
		cmocka_unit_test(test_blocked_thread_is_named),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
