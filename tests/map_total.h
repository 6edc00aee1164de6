/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The independent side of many checks: what a BPF map holds, read with plain
 * bpf() syscalls (no ktelemetry code), summed over the first 32 u64 words
 * of every value (all of them in a smaller value). For a histogram map that
 * is the number of events counted: its 32 buckets come first, and the sum a
 * struct accumulator_value_sum keeps after them is not a count.
 */
#ifndef KTEL_TEST_MAP_TOTAL_H
#define KTEL_TEST_MAP_TOTAL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#define KTEL_TEST_MAP_TOTAL_WORDS 32

/* Sum of the first KTEL_TEST_MAP_TOTAL_WORDS u64 of every value of the map
 * at fd; UINT64_MAX on error. */
static inline uint64_t ktel_test_map_total(int fd)
{
	uint64_t value[64], total = 0;
	uint8_t key[64], next[64];
	struct bpf_map_info info = {0};
	__u32 len = sizeof(info);
	void *prev = NULL;

	if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.key_size > sizeof(key) ||
	    info.value_size > sizeof(value))
		return UINT64_MAX;
	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		memset(value, 0, sizeof(value));
		if (bpf_map_lookup_elem(fd, next, value) == 0)
			for (unsigned i = 0;
			     i < info.value_size / 8 && i < KTEL_TEST_MAP_TOTAL_WORDS; i++)
				total += value[i];
		memcpy(key, next, info.key_size);
		prev = key;
	}
	return total;
}

/* The same for the map pinned at <pin_root>/<name>; 0 when not pinned yet. */
static inline uint64_t ktel_test_pinned_total(const char *pin_root, const char *name)
{
	char path[512];
	uint64_t total;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_root, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	total = ktel_test_map_total(fd);
	close(fd);
	return total;
}

#endif /* KTEL_TEST_MAP_TOTAL_H */
