/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The daemon's interposer of libbpf's btf__load_vmlinux_btf()/btf__free()
 * (vmlinux_btf_interpose.c), which only binaries that link that file (and
 * export both symbols, ktelemetryd.dynlist) may call.
 */
#ifndef KTEL_VMLINUX_BTF_INTERPOSE_H
#define KTEL_VMLINUX_BTF_INTERPOSE_H

/*
 * Check that libbpf's calls reach the daemon's btf__load_vmlinux_btf() and
 * btf__free(), and when they do hand libbpf's own btf__free() to the
 * shared parse (ktel_vmlinux_btf__set_lending()), which turns lending on.
 * Returns 0, or -ENOTSUP when they do not (libbpf then parses its own BTF
 * per load). Call once, early in main(), before any BPF object is loaded.
 */
int ktel_vmlinux_btf__interpose(void);

#endif /* KTEL_VMLINUX_BTF_INTERPOSE_H */
