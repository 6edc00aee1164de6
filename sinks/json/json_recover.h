/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The JSON sink's recovery at daemon start (json_recover.c). */
#ifndef KTEL_JSON_RECOVER_H
#define KTEL_JSON_RECOVER_H

#include <stdint.h>

#include "error.h"
#include "sink.h"

/* How far back from the end of the file recovery reads. */
#define KTEL_JSON_RECOVER_MAX_BYTES (16u << 20)

/*
 * Remove from the file at path (open for appending as wfd, ending in a
 * whole line) the lines of windows emitted after the saved delta state (fn
 * says AFTER): the restarted daemon's next pull reports them again, so
 * keeping them would count them twice. Lines are read back from the end
 * until one the state covers (SAVED), the start of the file or
 * KTEL_JSON_RECOVER_MAX_BYTES; from the first AFTER line on, the file is
 * cut and the lines of that stretch fn does not know (events,
 * self-telemetry, other boots) are written back in order, then fsynced.
 * *size is updated. Logs what it removed, naming sink and file. Blocking.
 */
int ktel_json__recover(const char *sink, const char *path, int wfd, ktel_sink_window_fn fn,
		       void *ctx, uint64_t *size, struct ktel_err *err);

#endif /* KTEL_JSON_RECOVER_H */
