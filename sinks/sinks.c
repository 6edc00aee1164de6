// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The table of sink types the daemon knows. Add a sink: one line here. */
#include <string.h>

#include "sinks.h"

extern const struct ktel_sink_ops ktel_json_sink_ops;
extern const struct ktel_sink_ops ktel_statsd_sink_ops;
extern const struct ktel_sink_ops ktel_prometheus_sink_ops;
extern const struct ktel_sink_ops ktel_stream_sink_ops;
extern const struct ktel_sink_ops ktel_remote_write_sink_ops;

const struct ktel_sink_ops *const ktel_sink_types[] = {
	&ktel_json_sink_ops,   &ktel_statsd_sink_ops,       &ktel_prometheus_sink_ops,
	&ktel_stream_sink_ops, &ktel_remote_write_sink_ops, NULL,
};

const struct ktel_sink_ops *ktel_sink_type_find(const char *type)
{
	for (size_t i = 0; ktel_sink_types[i]; i++)
		if (strcmp(ktel_sink_types[i]->type, type) == 0)
			return ktel_sink_types[i];
	return NULL;
}

void ktel_sinks_register_schemas(void)
{
	static struct ktel_cfg_sink_schema schemas[KTEL_ARRAY_SIZE(ktel_sink_types)];
	size_t n = 0;

	for (size_t i = 0; ktel_sink_types[i]; i++) {
		schemas[n].type = ktel_sink_types[i]->type;
		schemas[n].keys = ktel_sink_types[i]->options;
		n++;
	}
	ktel_config_set_sink_schemas(schemas);
}
