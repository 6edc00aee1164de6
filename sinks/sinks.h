/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The sink types built into the daemon (sinks.c). The daemon and
 * ktelemetryctl find a type here; the sink interface itself (struct
 * ktel_sink_ops) is in the base layer's sink.h, which knows no sink type.
 */
#ifndef KTEL_SINKS_H
#define KTEL_SINKS_H

#include "sink.h"

/* The sink types built into the daemon, NULL-terminated. */
extern const struct ktel_sink_ops *const ktel_sink_types[];

/* Find a sink type by name, or NULL. */
const struct ktel_sink_ops *ktel_sink_type_find(const char *type);

/* Tell the config validator every sink type's options. */
void ktel_sinks_register_schemas(void);

#endif /* KTEL_SINKS_H */
