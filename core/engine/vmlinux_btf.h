/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * vmlinux_btf - the kernel's BTF, parsed once and shared while it is held.
 *
 * libbpf 1.1 parses the kernel's BTF in every bpf_object__load() that has a
 * tp_btf or fentry program, and btf__parse() holds the 5.5 MB file twice at
 * once (a read buffer and btf_new()'s copy): that was the daemon's start
 * peak (docs/benchmarks.md, "Daemon footprint"). This module parses it once per
 * plugin scan, with one copy only (sysfs mapped read-only where the kernel
 * allows it, 6.16+), and lends that parse to libbpf through the daemon's
 * interposed btf__load_vmlinux_btf()/btf__free() (vmlinux_btf_interpose.c,
 * linked into ktelemetryd only, with its own header). Without the
 * interposer, or with a libbpf whose calls do not reach it, libbpf parses
 * its own as before: bigger, never wrong.
 *
 * The shared parse lives while it is held (ktel_vmlinux_btf__hold()) or lent
 * to libbpf, and is freed when the last of those ends.
 */
#ifndef KTEL_VMLINUX_BTF_H
#define KTEL_VMLINUX_BTF_H

#include <stdbool.h>

#include "error.h"

struct btf;

#define KTEL_VMLINUX_BTF_PATH "/sys/kernel/btf/vmlinux"
/* Larger than any kernel's BTF (6.x: 5-10 MB); a bigger file is refused. */
#define KTEL_VMLINUX_BTF_MAX (256u << 20)

/* What the module did since the process started (tests, benchmarks). */
struct ktel_vmlinux_btf_stats {
	unsigned int parses; /* shared parses made by ktel_vmlinux_btf__hold() */
	unsigned int mapped; /* of those, from a read-only mapping of the file */
	unsigned int lends;  /* times libbpf was handed the shared parse */
};

/*
 * Parse the kernel BTF file at path (NULL: KTEL_VMLINUX_BTF_PATH) into a
 * new BTF the caller frees with btf__free(). A file on sysfs is mapped
 * read-only, so libbpf's copy is the only one in memory; anything else (or a
 * kernel that cannot map it, before 6.16) goes through btf__parse(). Writes
 * to *ret_mapped (may be NULL) whether the mapping was used. Returns NULL
 * with errno set and err naming the path on a missing, oversized or invalid
 * file.
 */
struct btf *ktel_vmlinux_btf__parse(const char *path, bool *ret_mapped, struct ktel_err *err);

/*
 * Hold the shared kernel BTF, parsing it on the first hold. Returns it
 * (borrowed: valid until the matching ktel_vmlinux_btf__release()), or NULL
 * with errno set and err filled. Holds nest.
 */
const struct btf *ktel_vmlinux_btf__hold(struct ktel_err *err);

/* End one hold; the last hold or loan to end frees the parse. */
void ktel_vmlinux_btf__release(void);

/* The shared parse while held or lent, else NULL. */
const struct btf *ktel_vmlinux_btf__get(void);

/*
 * Where ktel_vmlinux_btf__hold() parses from (NULL: the kernel's file);
 * tests point it at a synthetic BTF. Takes effect at the next parse; the
 * string is copied. Returns 0 or -ENOMEM.
 */
int ktel_vmlinux_btf__set_path(const char *path);

/* libbpf's btf__free(). */
typedef void (*ktel_btf_free_fn)(struct btf *btf);

/*
 * For the interposer, which calls into this module and never the other way.
 * Lending is off until ktel_vmlinux_btf__set_lending() hands over free_btf,
 * which only the interposer does, once it has seen that libbpf's own
 * btf__free() calls reach it (else libbpf would free the shared parse).
 * free_btf must be libbpf's own btf__free(), resolved past the interposer:
 * the shared parse is freed with it, so that freeing it never goes through
 * the interposer. NULL turns lending off (the parse is then freed with
 * libbpf's btf__free(), looked up the same way).
 *  - lend: the shared parse with a loan taken, or NULL when lending is off
 *    or nothing is held (libbpf then parses its own).
 *  - unlend: true when btf is the shared parse (a loan, if any, ends, and
 *    the last one frees it: the caller must not free it), false for any
 *    other BTF.
 */
void ktel_vmlinux_btf__set_lending(ktel_btf_free_fn free_btf);
bool ktel_vmlinux_btf__lending(void);
struct btf *ktel_vmlinux_btf__lend(void);
bool ktel_vmlinux_btf__unlend(const struct btf *btf);

void ktel_vmlinux_btf__stats(struct ktel_vmlinux_btf_stats *ret_stats);

#endif /* KTEL_VMLINUX_BTF_H */
