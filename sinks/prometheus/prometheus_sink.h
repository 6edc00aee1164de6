/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Prometheus sink ("type": "prometheus"): an HTTP endpoint serving the
 * cumulative state of the records it was given in the Prometheus text
 * exposition format (version 0.0.4). See prometheus_sink.c for the mapping.
 *
 * The accessors below take the instance that ktel_prometheus_sink_ops.create
 * returned; they are for tests and the daemon's status output, and like the
 * ops they are called on the loop thread.
 */
#ifndef KTEL_PROMETHEUS_SINK_H
#define KTEL_PROMETHEUS_SINK_H

#include <stdbool.h>
#include <stddef.h>

#include "sink.h"

extern const struct ktel_sink_ops ktel_prometheus_sink_ops;

/* The TCP port the endpoint listens on (the one chosen for "port": 0). */
unsigned ktel_prometheus_sink__port(void *priv);

/*
 * Render the exposition text of the current state now (as a scrape does,
 * but never from or into the scrapes' kept text) and return a
 * malloc'd NUL-terminated copy, its length in *ret_len; NULL with errno set.
 */
char *ktel_prometheus_sink__text(void *priv, size_t *ret_len);

/* Longest Accept-Encoding value examined; a longer one is not read. */
#define KTEL_PROMETHEUS_MAX_ACCEPT_ENCODING 1024

/*
 * Does an Accept-Encoding value (NULL: no such header) accept gzip? The
 * codings "gzip" and "x-gzip" (any case) with a qvalue above 0, or "*"
 * above 0 when gzip is not named; "q=0" refuses, as does a malformed
 * qvalue or a value longer than KTEL_PROMETHEUS_MAX_ACCEPT_ENCODING.
 */
bool ktel_prometheus_accepts_gzip(const char *accept_encoding);

#endif /* KTEL_PROMETHEUS_SINK_H */
