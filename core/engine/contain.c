// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Run one job in a forked child and bring back its answer (contain.h).
 *
 * Only the calling thread exists in the child: it runs the job and _exit()s,
 * never returning into the caller's stack or running atexit handlers. The
 * job must not take a lock another thread of the daemon may hold (malloc is
 * safe: glibc resets its locks in the child); the caller's job silences the
 * daemon's log for that reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "contain.h"

/*
 * The children running now, for ktel_contain__kill_all(). A pid is listed
 * from the fork until just before it is reaped, so a pid killed from the
 * list is always a child of ours, never a recycled number.
 */
#define MAX_RUNNING 64

static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t running[MAX_RUNNING];

static void running_set(pid_t pid, pid_t to)
{
	pthread_mutex_lock(&running_lock);
	for (size_t i = 0; i < MAX_RUNNING; i++)
		if (running[i] == pid) {
			running[i] = to;
			break;
		}
	pthread_mutex_unlock(&running_lock);
}

void ktel_contain__kill_all(void)
{
	pthread_mutex_lock(&running_lock);
	for (size_t i = 0; i < MAX_RUNNING; i++)
		if (running[i] > 0)
			kill(running[i], SIGKILL);
	pthread_mutex_unlock(&running_lock);
}

struct answer {
	int rc;
	struct ktel_err err;
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Default dispositions, nothing blocked, no core file: a crash ends the child. */
static void child_signals(void)
{
	struct rlimit no_core = {0, 0};
	sigset_t none;

	setrlimit(RLIMIT_CORE, &no_core);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static __attribute__((noreturn)) void child_run(int fd, ktel_contain_fn fn, void *ctx)
{
	struct answer a;
	const char *p = (const char *)&a;
	size_t left = sizeof(a);
	ssize_t n;

	child_signals();
	memset(&a, 0, sizeof(a));
	a.rc = fn(ctx, &a.err);
	while (left) {
		n = write(fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(1);
		p += n;
		left -= (size_t)n;
	}
	_exit(0);
}

/* Read the answer until it is whole, EOF, or the deadline: bytes read. */
static size_t read_answer(int fd, struct answer *a, long long deadline)
{
	char *p = (char *)a;
	size_t got = 0;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	ssize_t n;
	int wait_ms;

	while (got < sizeof(*a)) {
		wait_ms = (int)(deadline - now_ms());
		if (wait_ms <= 0)
			break;
		n = poll(&pfd, 1, wait_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		n = read(fd, p + got, sizeof(*a) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

static int reap(pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

int ktel_contain__run(const char *what, ktel_contain_fn fn, void *ctx, int timeout_ms,
		      struct ktel_err *err)
{
	long long deadline = now_ms() + timeout_ms;
	struct answer a;
	int fds[2], status = 0, rc;
	size_t got;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return ktel_err_set(err, errno, "%s: cannot start a child: pipe: %s", what,
				    strerror(errno));
	pid = fork();
	if (pid < 0) {
		rc = errno;
		close(fds[0]);
		close(fds[1]);
		return ktel_err_set(err, rc, "%s: cannot start a child: fork: %s", what,
				    strerror(rc));
	}
	if (pid == 0) {
		close(fds[0]);
		child_run(fds[1], fn, ctx);
	}
	running_set(0, pid); /* a full list: not listed, not killed early */
	close(fds[1]);
	memset(&a, 0, sizeof(a));
	got = read_answer(fds[0], &a, deadline);
	close(fds[0]);
	if (got < sizeof(a))
		kill(pid, SIGKILL); /* a hang, or an answer cut short: no waiting for it */
	running_set(pid, 0);
	rc = reap(pid, &status);
	if (rc)
		return ktel_err_set(err, -rc, "%s: waiting for the child: %s", what, strerror(-rc));
	if (got == sizeof(a)) {
		a.err.msg[sizeof(a.err.msg) - 1] = '\0';
		if (err)
			*err = a.err;
		return a.rc > 0 ? -a.rc : a.rc;
	}
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && now_ms() >= deadline)
		return ktel_err_set(err, ECHILD, "%s did not finish in %d ms (killed)", what,
				    timeout_ms);
	if (WIFSIGNALED(status))
		return ktel_err_set(err, ECHILD, "%s crashed (signal %d, %s)", what,
				    WTERMSIG(status), strsignal(WTERMSIG(status)));
	return ktel_err_set(err, ECHILD, "%s ended without an answer (exit status %d)", what,
			    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}
