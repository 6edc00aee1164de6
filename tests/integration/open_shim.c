// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Preloaded into ktelemetryd by test_intake: libbpf's bpf_object__open_mem()
 * hangs (KTEL_TEST_HANG_OBJECT) or fails (KTEL_TEST_FAIL_OBJECT) for the BPF
 * object of that name, but only in a child of the daemon - the contained
 * parse (contain.h) - never in the daemon itself. Every other call goes to
 * libbpf.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <bpf/libbpf.h>

typedef struct bpf_object *(*open_mem_fn)(const void *, size_t,
					  const struct bpf_object_open_opts *);

static pid_t daemon_pid;

__attribute__((constructor)) static void remember_daemon(void)
{
	daemon_pid = getpid();
}

static bool named(const char *var, const struct bpf_object_open_opts *opts)
{
	const char *want = getenv(var);

	return want && opts && opts->object_name && strcmp(opts->object_name, want) == 0;
}

struct bpf_object *bpf_object__open_mem(const void *buf, size_t size,
					const struct bpf_object_open_opts *opts)
{
	static open_mem_fn real;

	if (getpid() != daemon_pid) {
		if (named("KTEL_TEST_HANG_OBJECT", opts)) {
			/* Never outlive the daemon (a test that failed and
			 * killed it), nor a minute. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			alarm(60);
			for (;;)
				pause();
		}
		if (named("KTEL_TEST_FAIL_OBJECT", opts)) {
			errno = EINVAL;
			return NULL;
		}
	}
	if (!real)
		real = (open_mem_fn)dlsym(RTLD_NEXT, "bpf_object__open_mem");
	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	return real(buf, size, opts);
}
