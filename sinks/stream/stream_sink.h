/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Stream sink ("type": "stream"): a ring of recent records as JSON lines,
 * fanned out to subscribers on a unix stream socket. See stream_sink.c.
 *
 * The accessor takes the instance ktel_stream_sink_ops.create returned and
 * is called on the loop thread, like the ops.
 */
#ifndef KTEL_STREAM_SINK_H
#define KTEL_STREAM_SINK_H

#include "sink.h"

extern const struct ktel_sink_ops ktel_stream_sink_ops;

/* Subscribers connected now. */
unsigned ktel_stream_sink__subscribers(void *priv);

#endif /* KTEL_STREAM_SINK_H */
