/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `ktelemetryctl inspect`: the documented "verify the BTF layout" step as a
 * command. Works offline, without the daemon; only the verify variant loads
 * the programs into the kernel (never attached, never pinned).
 */
#ifndef KTEL_INSPECT_H
#define KTEL_INSPECT_H

#include <sys/types.h>

#include <jansson.h>

#include "error.h"

struct ktel_targets;

/*
 * Describe a plugin file without loading anything into the kernel: open it
 * with the plugin loader (files owned by root or by owner), open its BPF
 * object from memory (no load) and describe, per metric, the key and value
 * layouts as the generic decoder sees them (members, offsets, sizes, enum
 * labels), dimensions, the histogram scheme, and per program its section and
 * whether this kernel has its attach target (targets; NULL: not checked).
 * Returns 0 with the report in *ret_report; -EINVAL with the report AND err
 * naming the metric, map and member when the decoder cannot read some map;
 * another -errno with only err when the plugin cannot be opened.
 */
int ktel_inspect_plugin(const char *path, uid_t owner, const struct ktel_targets *targets,
			json_t **ret_report, struct ktel_err *err);

/*
 * ktel_inspect_plugin(), then, when targets are the running kernel's, the
 * step that says whether the programs load: as the daemon would (params at
 * their defaults, variants chosen, fallbacks tried) but without reusing or
 * making pins and without attaching, load the object into the kernel and
 * free it again. The report gets "load": {"verified", "note"} and each
 * program "loaded" and, when not, "load_reason" (the verifier's last lines
 * included). Not root: "verified" false, the note says the load could not
 * be verified. A kernel refusing the programs does not make this fail.
 */
int ktel_inspect_plugin_verify(const char *path, uid_t owner, const struct ktel_targets *targets,
			       json_t **ret_report, struct ktel_err *err);

/*
 * Fill the report's "params" with the values the kernel holds for them now:
 * status is the running daemon's `status` answer (NULL: none, for the
 * reason no_status says). The plugin of the same name in it names a loaded program; the
 * program's .rodata map, read from the kernel, holds the values the
 * verifier saw. Each param gets "value" (null when it cannot be known) and
 * the report "params_from" (the daemon's file of the plugin),
 * "params_map_id", or "params_note" saying why the values are unknown (no
 * daemon, plugin not loaded, not root). Reads only; never fails.
 */
void ktel_inspect_current_params(json_t *report, const json_t *status, const char *no_status);

#endif /* KTEL_INSPECT_H */
