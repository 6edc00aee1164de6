/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * memory - the daemon's malloc policy (docs/benchmarks.md, "Daemon footprint").
 *
 * Two facts of glibc's allocator decide most of the daemon's resident size:
 *  - a large block (record buffers sized by a map's max_entries, libbpf's
 *    16 MiB verifier log) is mmap'd only while the mmap threshold is low;
 *    glibc raises that threshold each time such a block is freed, after which
 *    calloc() takes large blocks from the heap and touches every page. With a
 *    fixed threshold a buffer costs only the pages a pull really fills.
 *  - a plugin scan parses the kernel's BTF (5.5 MB, once per scan since
 *    vmlinux_btf.c; before, once per plugin load): megabytes freed in the
 *    middle of the heap stay resident until malloc_trim() hands them back.
 */
#ifndef KTEL_MEMORY_H
#define KTEL_MEMORY_H

/* Blocks of at least this many bytes are mmap'd (glibc's default start). */
#define KTEL_MMAP_THRESHOLD (128 * 1024)

/* Fix the allocator's thresholds; call once, first thing in main(). */
void ktel_memory__init(void);

/* Give free heap memory back to the kernel; call after bursts (plugin loads). */
void ktel_memory__release(void);

#endif
