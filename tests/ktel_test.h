/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Shared helpers for CMocka tests. Include after <cmocka.h>'s prerequisites.
 */
#ifndef KTEL_TEST_H
#define KTEL_TEST_H

#include <stdio.h>
#include <stdlib.h>
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

#endif /* KTEL_TEST_H */
