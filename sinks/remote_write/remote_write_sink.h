/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * remote_write sink ("type": "remote_write"): pushes the series of the
 * Prometheus sink (prom_series.h) to a Prometheus remote-write 1.0 receiver.
 * See remote_write_sink.c.
 */
#ifndef KTEL_REMOTE_WRITE_SINK_H
#define KTEL_REMOTE_WRITE_SINK_H

#include "sink.h"

extern const struct ktel_sink_ops ktel_remote_write_sink_ops;

#endif /* KTEL_REMOTE_WRITE_SINK_H */
