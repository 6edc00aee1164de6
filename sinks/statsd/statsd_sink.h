/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The "statsd" sink type: StatsD lines over UDP or a unix datagram socket
 * (format "statsd"), or Android StatsEvent datagrams to statsd's socket
 * (format "android"). Options are described in ktel_statsd_sink_keys, the
 * table the config validator can register for type "statsd".
 *
 * Accounting (struct ktel_sink_stats), in records:
 *   sent     handed to the kernel (for UDP: and not refused by the next
 *            send or the socket's pending error right after the burst)
 *   dropped  queue full, peer down (the window in flight and everything
 *            submitted until the reconnect), too big, no atom id (android),
 *            or left over when close() ran out of time
 *   errors   I/O failures: refused, unreachable, failed reconnects
 *   reconnects  transports re-opened after a failure
 *   queued   bytes waiting in the queue or in libuv
 */
#ifndef KTEL_STATSD_SINK_H
#define KTEL_STATSD_SINK_H

#include "config.h"
#include "sink.h"

extern const struct ktel_sink_ops ktel_statsd_sink_ops;
extern const struct ktel_cfg_key ktel_statsd_sink_keys[];

#endif /* KTEL_STATSD_SINK_H */
