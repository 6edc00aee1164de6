/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every series of a set (prom_series.h) at one timestamp as a Prometheus
 * remote-write 1.0 WriteRequest: protobuf (remote.proto, protoc-c), then
 * snappy block compression, the body a receiver takes as is.
 */
#ifndef KTEL_RW_ENCODE_H
#define KTEL_RW_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "prom_series.h"

/*
 * Encode every series of set with timestamp_ms, each TimeSeries labelled
 * __name__, its dims' labels, `le` for buckets and the n_extra constant
 * labels of extra (name\0value\0..., given way to by a dim label of the
 * same name), sorted by name. *ret_body is malloc'd, *ret_len its length,
 * *ret_samples the samples it holds. 0, -ENODATA when the set has no
 * series, -ENOMEM, or -EINVAL when snappy refuses.
 */
int ktel_rw_encode(const struct ktel_prom_set *set, const char *extra, uint32_t n_extra,
		   int64_t timestamp_ms, char **ret_body, size_t *ret_len, uint64_t *ret_samples);

#endif /* KTEL_RW_ENCODE_H */
