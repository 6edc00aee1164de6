/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * android_bpf_defs.h - Android bpfloader macros on top of libbpf.
 *
 * Lets BPF code written for Android's framework (DEFINE_BPF_MAP_GRO,
 * DEFINE_BPF_PROG, AID_*) compile unchanged for ktelemetry. Maps become
 * libbpf BTF-defined maps, programs plain SEC() functions. Android's per-map
 * and per-program uid/gid are accepted and ignored: ktelemetryd pins maps
 * itself with the mode and group its configuration names.
 *
 * Android's bpfloader refuses non-GPL objects for these program types, and
 * the Android examples do not declare a license, so this header declares
 * "Dual BSD/GPL" for the object, the string of ktelemetry's own BPF
 * programs: GPL-compatible, so the kernel allows its GPL-only helpers.
 * LICENSE() is accepted for source compatibility and ignored.
 */
#ifndef ANDROID_BPF_DEFS_H
#define ANDROID_BPF_DEFS_H

#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>

/* Android ids (system/core/libcutils/include/private/android_filesystem_config.h). */
#define AID_ROOT 0
#define AID_SYSTEM 1000
#define AID_RADIO 1001
#define AID_BLUETOOTH 1002
#define AID_GRAPHICS 1003
#define AID_INPUT 1004
#define AID_AUDIO 1005
#define AID_CAMERA 1006
#define AID_LOG 1007
#define AID_WIFI 1010
#define AID_NET_BT_ADMIN 3001
#define AID_NET_BT 3002
#define AID_INET 3003
#define AID_NET_ADMIN 3005
#define AID_READPROC 3009
#define AID_NET_BW_ACCT 3007
#define AID_EVERYBODY 9997

char _ktel_android_license[] SEC("license") = "Dual BSD/GPL";
#define LICENSE(NAME) _Static_assert(sizeof(NAME) > 0, "license")
#define CRITICAL(REASON) _Static_assert(sizeof(REASON) > 0, "critical")

/*
 * A map plus Android's typed accessors bpf_<name>_{lookup,update,delete}_elem.
 * TYPE is the suffix of BPF_MAP_TYPE_<TYPE> (HASH, ARRAY, PERCPU_HASH, ...).
 * TASK_STORAGE declares a task map (the kernel wants no preallocation, no
 * max_entries and a 4-byte key): a start map declared so makes
 * bpf_telemetry.h's start macros keep the current task's start in the task,
 * the cheapest form (docs/plugin-authoring.md); num_entries is then ignored.
 */
#define KTEL_ANDROID_IS_TASK(type) ((type) == BPF_MAP_TYPE_TASK_STORAGE)
#define DEFINE_BPF_MAP_UGM(the_map, TYPE, KeyType, ValueType, num_entries, usr, grp, md)          \
	struct {                                                                                  \
		__uint(type, BPF_MAP_TYPE_##TYPE);                                                \
		__uint(max_entries,                                                               \
		       KTEL_ANDROID_IS_TASK(BPF_MAP_TYPE_##TYPE) ? 0 : (num_entries));            \
		__uint(map_flags,                                                                 \
		       KTEL_ANDROID_IS_TASK(BPF_MAP_TYPE_##TYPE) ? BPF_F_NO_PREALLOC : 0);        \
		__type(key, KeyType);                                                             \
		__type(value, ValueType);                                                         \
	} the_map SEC(".maps");                                                                   \
	static inline __attribute__((unused))                                                     \
	ValueType *bpf_##the_map##_lookup_elem(const KeyType *k)                                  \
	{                                                                                         \
		return bpf_map_lookup_elem(&the_map, k);                                          \
	}                                                                                         \
	static inline                                                                             \
		__attribute__((unused)) int bpf_##the_map##_update_elem(const KeyType *k,         \
									const ValueType *v,       \
									unsigned long long flags) \
	{                                                                                         \
		return bpf_map_update_elem(&the_map, k, v, flags);                                \
	}                                                                                         \
	static inline __attribute__((unused)) int bpf_##the_map##_delete_elem(const KeyType *k)   \
	{                                                                                         \
		return bpf_map_delete_elem(&the_map, k);                                          \
	}

#define DEFINE_BPF_MAP_GRO(the_map, TYPE, KeyType, ValueType, num_entries, gid) \
	DEFINE_BPF_MAP_UGM(the_map, TYPE, KeyType, ValueType, num_entries, AID_ROOT, gid, 0440)
#define DEFINE_BPF_MAP_GRW(the_map, TYPE, KeyType, ValueType, num_entries, gid) \
	DEFINE_BPF_MAP_UGM(the_map, TYPE, KeyType, ValueType, num_entries, AID_ROOT, gid, 0660)
#define DEFINE_BPF_MAP_GWO(the_map, TYPE, KeyType, ValueType, num_entries, gid) \
	DEFINE_BPF_MAP_UGM(the_map, TYPE, KeyType, ValueType, num_entries, AID_ROOT, gid, 0220)
#define DEFINE_BPF_MAP(the_map, TYPE, KeyType, ValueType, num_entries) \
	DEFINE_BPF_MAP_UGM(the_map, TYPE, KeyType, ValueType, num_entries, AID_ROOT, AID_ROOT, 0600)

/* A program in section SECTION_NAME; the parameter list follows the macro. */
#define DEFINE_BPF_PROG(SECTION_NAME, prog_uid, prog_gid, the_prog) SEC(SECTION_NAME) int the_prog
#define DEFINE_OPTIONAL_BPF_PROG(SECTION_NAME, prog_uid, prog_gid, the_prog) \
	DEFINE_BPF_PROG(SECTION_NAME, prog_uid, prog_gid, the_prog)
#define DEFINE_BPF_PROG_KVER(SECTION_NAME, prog_uid, prog_gid, the_prog, min_kv) \
	DEFINE_BPF_PROG(SECTION_NAME, prog_uid, prog_gid, the_prog)
#define DEFINE_BPF_PROG_KVER_RANGE(SECTION_NAME, prog_uid, prog_gid, the_prog, min_kv, max_kv) \
	DEFINE_BPF_PROG(SECTION_NAME, prog_uid, prog_gid, the_prog)

#endif /* ANDROID_BPF_DEFS_H */
