/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A test's own observer of a loop device's completed reads, independent of
 * the daemon: tests/bpf/tp_attach_loss.bpf.c, whose count_complete
 * (block_rq_complete) and count_done (block_io_done) count the device's
 * reads in its map counts (key 0 and key 1). Opened and loaded here, told
 * which device; the caller attaches the programs it wants.
 */
#ifndef KTEL_TEST_LOOP_OBSERVER_H
#define KTEL_TEST_LOOP_OBSERVER_H

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "loop_device.h"

/* The loaded object for device l, its counts map's fd in *ret_counts_fd. */
static inline struct bpf_object *ktel_test_loop_observer_open(const struct ktel_test_loop *l,
							      int *ret_counts_fd)
{
	struct bpf_object *obj = bpf_object__open_file(KTEL_TP_ATTACH_LOSS_OBJ, NULL);
	uint32_t k;
	int dev_fd, counts_fd;

	assert_non_null(obj);
	assert_int_equal(bpf_object__load(obj), 0);
	dev_fd = bpf_object__find_map_fd_by_name(obj, "device");
	counts_fd = bpf_object__find_map_fd_by_name(obj, "counts");
	assert_true(dev_fd >= 0 && counts_fd >= 0);
	k = 0;
	assert_int_equal(bpf_map_update_elem(dev_fd, &k, &l->major, BPF_ANY), 0);
	k = 1;
	assert_int_equal(bpf_map_update_elem(dev_fd, &k, &l->minor, BPF_ANY), 0);
	*ret_counts_fd = counts_fd;
	return obj;
}

/* Attach the object's program name; the link. */
static inline struct bpf_link *ktel_test_loop_observer_attach(struct bpf_object *obj,
							      const char *name)
{
	struct bpf_link *link = bpf_program__attach(bpf_object__find_program_by_name(obj, name));

	assert_non_null(link);
	return link;
}

#endif /* KTEL_TEST_LOOP_OBSERVER_H */
