// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one block device a test's BPF object counts: its numbers in the map
 * device (key 0: major, key 1: minor), written by the test after load
 * (tests/loop_observer.h does it for tp_attach_loss.bpf.c).
 */
#ifndef KTEL_TEST_LOOP_DEVICE_MAP_H
#define KTEL_TEST_LOOP_DEVICE_MAP_H

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} device SEC(".maps");

/* Is (major, minor) the test's device? */
static __always_inline int is_device(__u32 major, __u32 minor)
{
	__u32 k0 = 0, k1 = 1;
	__u32 *ma = bpf_map_lookup_elem(&device, &k0), *mi = bpf_map_lookup_elem(&device, &k1);

	return ma && mi && *ma == major && *mi == minor;
}

#endif /* KTEL_TEST_LOOP_DEVICE_MAP_H */
