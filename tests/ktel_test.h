/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Shared helpers for CMocka tests. Include after <cmocka.h>'s prerequisites.
 */
#ifndef KTEL_TEST_H
#define KTEL_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

/* Exit code ctest treats as "skipped" (SKIP_RETURN_CODE). */
#define KTEL_TEST_SKIP 77

/*
 * Integration tests need root and the real kernel: without root, say why and
 * exit with the skip code so ctest shows the test as skipped with the reason.
 */
static inline void ktel_test_require_root(const char *test)
{
	if (geteuid() != 0) {
		printf("SKIP %s: needs root (loads BPF programs into the running kernel)\n", test);
		fflush(stdout);
		exit(KTEL_TEST_SKIP);
	}
}

/*
 * Run a shell command built like printf; returns its exit status (-1 when
 * it did not exit), and prints the command when that is not 0.
 */
__attribute__((format(printf, 1, 2))) static inline int ktel_test_run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	st = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (st != 0)
		printf("command failed (status %d): %s\n", st, cmd);
	return st;
}

/*
 * One entry of ktel_test_rm_rf's walk (children before their directory).
 * An entry already gone counts as removed. Returns 0 or a positive errno,
 * which nftw hands back and which cannot be mistaken for its own -1.
 */
static inline int ktel_test_rm_entry(const char *path, const struct stat *st, int type,
				     struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	if (remove(path) && errno != ENOENT)
		return errno;
	return 0;
}

/*
 * Remove path and everything below it, as rm -rf does but without a shell
 * to quote for: symbolic links are removed, never followed, and the walk
 * does not cross into another mounted file system (a mount left behind by
 * a failed test stops the removal instead of being emptied). A path that
 * does not exist is already removed. An empty path or "/" is refused with
 * -EINVAL, so a test whose directory was never named cannot empty the
 * machine. Returns 0 or -errno.
 */
static inline int ktel_test_rm_rf(const char *path)
{
	int r = -ENOTEMPTY;

	if (!path || !path[0] || !path[strspn(path, "/")])
		return -EINVAL;
	/* A daemon writing into the tree (a sink reopening its file) can add
	 * an entry between the walk's unlink and its rmdir: walk again, as
	 * often as it takes within reason. */
	for (int tries = 0; tries < 100 && r == -ENOTEMPTY; tries++) {
		r = nftw(path, ktel_test_rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
		if (r == -1)
			r = errno == ENOENT ? 0 : -errno;
		else
			r = -r;
	}
	return r;
}

/* A whole file as a string ("" when it is missing or unreadable); free() it.
 * (Not inlined: GCC 12 then takes a strstr() into the result for a pointer
 * to the local buf, -Wdangling-pointer.) */
__attribute__((noinline, unused)) static char *ktel_test_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0;

	if (!f || getdelim(&buf, &cap, '\0', f) < 0) {
		free(buf);
		buf = strdup("");
	}
	if (f)
		fclose(f);
	return buf;
}

/*
 * Run argv (NULL-terminated, argv[0] a path) in a child whose stdout and
 * stderr go to out_path and err_path; as_uid >= 0 drops the child to that
 * uid and gid (no supplementary groups) first. Waits up to timeout_s; a
 * child still running then is killed. *ret_out and *ret_err get what it
 * wrote (free() them). Returns its exit status, 128 + the signal that ended
 * it, or -1 when it had to be killed.
 */
static inline int ktel_test_run_captured(const char *const argv[], const char *out_path,
					 const char *err_path, int as_uid, int timeout_s,
					 char **ret_out, char **ret_err)
{
	int status, rc = -1;
	pid_t pid = fork();

	if (pid == 0) {
		int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fo, 1);
		dup2(fe, 2);
		if (as_uid >= 0 &&
		    (setgroups(0, NULL) || setgid((gid_t)as_uid) || setuid((uid_t)as_uid)))
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; pid > 0 && i < timeout_s * 100; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			pid = 0;
			break;
		}
		usleep(10000);
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	*ret_out = ktel_test_slurp(out_path);
	*ret_err = ktel_test_slurp(err_path);
	return rc;
}

static inline void ktel_test_stop_loop(uv_timer_t *t)
{
	uv_stop(t->loop);
}

/* Run loop for ms milliseconds: the timer keeps it running even when
 * nothing else does, and stops it when the time is up. */
static inline void ktel_test_run_for(uv_loop_t *loop, uint64_t ms)
{
	uv_timer_t t;

	uv_timer_init(loop, &t);
	t.data = NULL; /* not what this stack held before: tests walk handles by it */
	uv_timer_start(&t, ktel_test_stop_loop, ms, 0);
	uv_run(loop, UV_RUN_DEFAULT);
	/* The timer lives on this stack: its close completes before return. */
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
}

#endif /* KTEL_TEST_H */
