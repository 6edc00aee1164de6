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
 *   dropped  queue full, peer down (UDP: the datagrams the peer refused,
 *            only while it is away; unix socket: the window in flight and
 *            what is submitted until a re-open works), too big, or left
 *            over when close() ran out of time. Records the format cannot
 *            express (android: no atom id, e.g. self-telemetry) are not
 *            sent and not counted: they are not a loss.
 *   errors   I/O failures: refused, unreachable, failed reconnects; the
 *            last one's text is kept in last_error ("sendto
 *            127.0.0.1:8125: connection refused")
 *   reconnects  deliveries that succeeded after a failure
 *   queued   bytes waiting in the queue or in libuv
 */
#ifndef KTEL_STATSD_SINK_H
#define KTEL_STATSD_SINK_H

#include "config.h"
#include "sink.h"

extern const struct ktel_sink_ops ktel_statsd_sink_ops;
extern const struct ktel_cfg_key ktel_statsd_sink_keys[];

#endif /* KTEL_STATSD_SINK_H */
