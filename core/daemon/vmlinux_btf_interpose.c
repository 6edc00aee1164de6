// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libbpf's btf__load_vmlinux_btf() and btf__free(), interposed by the
 * daemon's executable so that every bpf_object__load() of a plugin scan
 * borrows the scan's one parse of the kernel BTF (vmlinux_btf.h) instead of
 * parsing 5.5 MB twice over. Debian's libbpf.so.1 makes both calls through
 * its PLT (R_X86_64_JUMP_SLOT relocations), so the executable's definitions,
 * exported by core/daemon/ktelemetryd.dynlist, win. Only ktelemetryd (and tests of
 * this file) link it: not ktel_core, not the plugin ABI.
 *
 * A libbpf that binds these calls internally (-Bsymbolic, hidden aliases)
 * never reaches this file; ktel_vmlinux_btf__interpose() notices and leaves
 * lending off, and libbpf parses its own copy per load as before.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>

#include <bpf/btf.h>

#include "vmlinux_btf.h"
#include "vmlinux_btf_interpose.h"

/* btf.h declares both LIBBPF_API (default visibility): exportable. */
static struct btf *(*real_load)(void);
static ktel_btf_free_fn real_free;
static unsigned int frees_seen; /* calls of btf__free(), for the check */

/* libbpf's own definitions, next after the executable in lookup order. */
static bool resolve(void)
{
	if (!real_load)
		real_load = (struct btf * (*)(void)) dlsym(RTLD_NEXT, "btf__load_vmlinux_btf");
	if (!real_free)
		real_free = (ktel_btf_free_fn)dlsym(RTLD_NEXT, "btf__free");
	return real_load && real_free;
}

struct btf *btf__load_vmlinux_btf(void)
{
	struct btf *btf = ktel_vmlinux_btf__lend();

	if (btf)
		return btf;
	if (!resolve()) {
		errno = ENOSYS;
		return NULL;
	}
	return real_load();
}

void btf__free(struct btf *btf)
{
	frees_seen++;
	/* The scan's parse: the lending code frees it when the scan ends,
	 * with real_free, never through here. */
	if (ktel_vmlinux_btf__unlend(btf))
		return;
	if (resolve())
		real_free(btf);
}

/*
 * Lending is safe only if libbpf's internal btf__free() calls come here:
 * otherwise it would free the shared parse at the end of a load. libbpf's
 * btf__new() frees its half-built BTF with btf__free() when the bytes are
 * not BTF, so a call made from inside libbpf is observable. Calls of the
 * other site (bpf_object__load) go through the same PLT slot.
 */
int ktel_vmlinux_btf__interpose(void)
{
	static const unsigned char not_btf[4];
	unsigned int before = frees_seen;
	struct btf *btf;

	if (!resolve())
		return -ENOTSUP;
	btf = btf__new(not_btf, sizeof(not_btf));
	if (btf)
		btf__free(btf); /* not reached: four bytes are no BTF header */
	if (frees_seen == before)
		return -ENOTSUP;
	ktel_vmlinux_btf__set_lending(real_free);
	return 0;
}
