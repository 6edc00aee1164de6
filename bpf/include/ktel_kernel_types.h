/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The few kernel and UAPI declarations ktelemetry's BPF programs need.
 *
 * BPF sources must not depend on the build machine's kernel headers: a plugin
 * built on one machine has to load on every kernel from 6.1 on. So instead of
 * <linux/bpf.h> and a generated vmlinux.h we declare here:
 *   - the fixed-width __u8..__u64 types libbpf's BPF headers expect;
 *   - the stable UAPI enum values used in map definitions and helper flags;
 *   - the kernel structs our programs read, as CO-RE types with
 *     preserve_access_index, listing only the members we read. libbpf relocates
 *     each access against the running kernel's BTF at load time, so member
 *     offsets here do not matter and the declarations never go stale.
 */
#ifndef KTEL_KERNEL_TYPES_H
#define KTEL_KERNEL_TYPES_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;
typedef __u32 gfp_t;
typedef int pid_t;
/* bool and size_t come from the compiler's freestanding headers, so BPF code
 * that includes <stdbool.h> or <stddef.h> itself (as Android's does) still
 * compiles, in either order. */
#include <stdbool.h>
#include <stddef.h>

/* UAPI: enum bpf_map_type (values are kernel ABI and never change). */
enum bpf_map_type {
	BPF_MAP_TYPE_UNSPEC = 0,
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PROG_ARRAY = 3,
	BPF_MAP_TYPE_PERF_EVENT_ARRAY = 4,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_STACK_TRACE = 7,
	BPF_MAP_TYPE_CGROUP_ARRAY = 8,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_LRU_PERCPU_HASH = 10,
	BPF_MAP_TYPE_LPM_TRIE = 11,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

/* UAPI: update flags and map flags. */
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
	BPF_F_LOCK = 4,
};

enum {
	BPF_F_NO_PREALLOC = (1U << 0),
	BPF_F_RDONLY_PROG = (1U << 7),
};

/* UAPI: BPF_FUNC_get_current_task and friends take/return these. */
enum {
	BPF_RB_NO_WAKEUP = (1ULL << 0),
	BPF_RB_FORCE_WAKEUP = (1ULL << 1),
};

/* UAPI: flags of bpf_task_storage_get() and the other local storage getters. */
enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = (1ULL << 0),
};

#define BPF_F_CURRENT_CPU 0xffffffffULL

#ifndef __ktel_core
#define __ktel_core __attribute__((preserve_access_index))
#endif

/* Kernel types, CO-RE relocated: only the members our programs read. */
struct signal_struct {
	short oom_score_adj;
} __ktel_core;

struct mm_struct {
	unsigned long total_vm;
} __ktel_core;

struct task_struct {
	int pid;
	int tgid;
	char comm[16];
	struct signal_struct *signal;
	struct mm_struct *mm;
} __ktel_core;

struct compact_control {
	int order;
} __ktel_core;

#endif /* KTEL_KERNEL_TYPES_H */
