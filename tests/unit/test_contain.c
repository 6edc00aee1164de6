// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * core/engine/contain.c: a job run in a forked child answers through the pipe;
 * a crash, an exit without an answer and a hang each come back as a
 * refusal naming what happened, and leave the caller untouched.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "contain.h"

static int answered_counter;

static int job_answers(void *ctx, struct ktel_err *err)
{
	int *seen = ctx;

	*seen = 42;            /* the child's copy only */
	answered_counter += 1; /* likewise */
	return ktel_err_set(err, ENOENT, "job: map %s absent", "fx_counters");
}

enum act {
	SUCCEED,
	SEGFAULT,
	ABORT,
	EXIT_3,
	HANG,
	RAISE_TERM
};

/*
 * One job, told what to do by ctx. A fault is raised as libbpf's would
 * arrive (no sanitizer reports it first); SIGTERM stands for a signal the
 * caller ignores or blocks (the daemon's).
 */
static int job(void *ctx, struct ktel_err *err)
{
	(void)err;
	switch (*(const enum act *)ctx) {
	case SEGFAULT:
		raise(SIGSEGV);
		break;
	case ABORT:
		abort();
	case EXIT_3:
		_exit(3);
	case HANG:
		sleep(3600);
		break;
	case RAISE_TERM:
		raise(SIGTERM);
		break;
	case SUCCEED:
		break;
	}
	return 0;
}

static int run(enum act act, int timeout_ms, struct ktel_err *err)
{
	return ktel_contain__run("parse", job, &act, timeout_ms, err);
}

/* No child is left behind: every one was reaped. */
static void assert_no_child(void)
{
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static void test_answer_comes_back(void **state)
{
	struct ktel_err err = {0};
	int seen = 0;

	(void)state;
	assert_int_equal(ktel_contain__run("job", job_answers, &seen, 5000, &err), -ENOENT);
	assert_int_equal(err.code, ENOENT);
	assert_string_equal(err.msg, "job: map fx_counters absent");
	assert_int_equal(seen, 0);
	assert_int_equal(answered_counter, 0);
	assert_int_equal(run(SUCCEED, 5000, &err), 0);
	assert_no_child();
}

static void test_crash_refused(void **state)
{
	struct ktel_err err = {0};

	(void)state;
	assert_int_equal(run(SEGFAULT, 5000, &err), -ECHILD);
	assert_string_equal(err.msg, "parse crashed (signal 11, Segmentation fault)");
	assert_int_equal(run(ABORT, 5000, &err), -ECHILD);
	assert_non_null(strstr(err.msg, "parse crashed (signal 6, "));
	assert_no_child();
}

static void test_exit_without_answer(void **state)
{
	struct ktel_err err = {0};

	(void)state;
	assert_int_equal(run(EXIT_3, 5000, &err), -ECHILD);
	assert_string_equal(err.msg, "parse ended without an answer (exit status 3)");
	assert_no_child();
}

static void test_hang_killed(void **state)
{
	struct ktel_err err = {0};
	struct timespec a, b;
	long ms;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(run(HANG, 300, &err), -ECHILD);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	assert_string_equal(err.msg, "parse did not finish in 300 ms (killed)");
	/* Not before the timeout (kept in whole milliseconds, so 299.x reads
	 * 299 here), and long before the job's own hour. */
	assert_true(ms >= 299 && ms < 60000);
	assert_no_child();
}

/* The caller's handlers and blocked signals are not the child's. */
static void test_caller_signal_state_not_inherited(void **state)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_term;
	struct ktel_err err = {0};
	sigset_t term, old_mask;

	(void)state;
	sigaction(SIGTERM, &ign, &old_term);
	assert_int_equal(run(RAISE_TERM, 5000, &err), -ECHILD);
	assert_string_equal(err.msg, "parse crashed (signal 15, Terminated)");
	sigaction(SIGTERM, &old_term, NULL);
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigprocmask(SIG_BLOCK, &term, &old_mask);
	assert_int_equal(run(RAISE_TERM, 5000, &err), -ECHILD);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	assert_string_equal(err.msg, "parse crashed (signal 15, Terminated)");
	assert_no_child();
}

struct hang_run {
	int rc;
	struct ktel_err err;
};

static void *hang_thread(void *arg)
{
	struct hang_run *h = arg;

	h->rc = run(HANG, 30000, &h->err);
	return NULL;
}

/* A caller that stops kills the children other threads wait for: their
 * runs come back at once, not after the timeout. */
static void test_kill_all_cuts_a_hang_short(void **state)
{
	struct hang_run h = {0};
	struct timespec t0, t1;
	pthread_t t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pthread_create(&t, NULL, hang_thread, &h), 0);
	usleep(300000);
	ktel_contain__kill_all();
	assert_int_equal(pthread_join(t, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(h.rc, -ECHILD);
	assert_non_null(strstr(h.err.msg, "parse crashed (signal 9"));
	assert_true(t1.tv_sec - t0.tv_sec < 20);
	assert_no_child();
	/* Nothing is left to kill; a later run is not affected. */
	ktel_contain__kill_all();
	assert_int_equal(run(SUCCEED, 10000, &h.err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_comes_back),
		cmocka_unit_test(test_crash_refused),
		cmocka_unit_test(test_exit_without_answer),
		cmocka_unit_test(test_hang_killed),
		cmocka_unit_test(test_kill_all_cuts_a_hang_short),
		cmocka_unit_test(test_caller_signal_state_not_inherited),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
