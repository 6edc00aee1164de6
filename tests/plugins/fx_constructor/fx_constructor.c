// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test fixture: a valid plugin whose ELF constructor (what dlopen runs)
 * creates the file $KTEL_FX_CONSTRUCTOR_MARKER names. Anything that finds
 * the marker ran plugin code.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <ktelemetry/plugin.h>

#include "fx_constructor.bpf.h"

__attribute__((constructor)) static void fx_constructor_ran(void)
{
	const char *marker = getenv("KTEL_FX_CONSTRUCTOR_MARKER");
	int fd;

	if (!marker)
		return;
	fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
}

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_constructor", .map_name = "fx_constructor_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "events", .scheme = KTEL_HIST_LOG2),
};

KTEL_PLUGIN(.name = "fx_constructor", .version = "1.0",
	    .bpf_object = ktel_bpf_object, .bpf_object_size = sizeof(ktel_bpf_object),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
