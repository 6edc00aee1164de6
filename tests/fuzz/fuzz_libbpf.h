/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libbpf prints a warning for most malformed inputs; at fuzzing speed that
 * is megabytes of stderr and most of the time spent. Call once per process.
 */
#ifndef KTEL_FUZZ_LIBBPF_H
#define KTEL_FUZZ_LIBBPF_H

#include <stdarg.h>
#include <stdbool.h>

#include <bpf/libbpf.h>

static int fuzz_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

static inline void fuzz_libbpf_quiet(void)
{
	static bool done;

	if (!done) {
		libbpf_set_print(fuzz_libbpf_print);
		done = true;
	}
}

#endif /* KTEL_FUZZ_LIBBPF_H */
