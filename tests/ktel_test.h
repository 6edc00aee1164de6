/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Shared helpers for CMocka tests. Include after <cmocka.h>'s prerequisites.
 */
#ifndef KTEL_TEST_H
#define KTEL_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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
__attribute__((format(printf, 1, 2)))
static inline int ktel_test_run(const char *fmt, ...)
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

#endif /* KTEL_TEST_H */
