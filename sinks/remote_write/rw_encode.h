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
 * __name__, its series' labels (dims and configured labels, prom_series.h)
 * and `le` for buckets, sorted by name; the set's ended series (not
 * superseded) once each with Prometheus' staleness marker as the value. *ret_body is malloc'd, *ret_len its length,
 * *ret_samples the samples it holds. 0, -ENODATA when the set has no
 * series, -ENOMEM, or -EINVAL when snappy refuses.
 */
int ktel_rw_encode(const struct ktel_prom_set *set, int64_t timestamp_ms, char **ret_body,
		   size_t *ret_len, uint64_t *ret_samples);

#endif /* KTEL_RW_ENCODE_H */
