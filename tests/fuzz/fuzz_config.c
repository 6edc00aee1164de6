// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Config parsing (core/base/config.c) from bytes: the whole document as
 * ktel_config__load_string() gets it from --check-config, start and reload,
 * with the sink types' option schemas registered as the daemon does. The
 * duration and size parsers also get the bytes as one value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "sinks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ktel_config_vars vars = {
		.plugin_dir = "/fuzz/plugins",
		.state_dir = "/fuzz/state",
		.run_dir = "/fuzz/run",
	};
	static bool registered;
	struct ktel_config_errors errs = {0};
	struct ktel_config *cfg = NULL;
	struct ktel_err err = {0};
	uint64_t v;
	char *text;

	if (!registered) {
		ktel_sinks_register_schemas();
		registered = true;
	}
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (ktel_config__load_string(text, "fuzz.json", &vars, &cfg, &errs, &err) == 0) {
		/* A model that loaded answers every question about it. */
		for (size_t i = 0; i < cfg->n_metrics; i++) {
			ktel_config__metric_enabled(cfg, cfg->metrics[i].name);
			ktel_config__metric_interval(cfg, cfg->metrics[i].name);
		}
		ktel_config__free(cfg);
	}
	ktel_config_errors__clear(&errs);
	if (size < 64) {
		ktel_parse_duration(text, &v);
		ktel_parse_size(text, &v);
	}
	free(text);
	return 0;
}
