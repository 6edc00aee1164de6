// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Build check: BPF code written for Android's framework often includes the
 * compiler's <stdbool.h> and <stddef.h> before (or after) the framework
 * headers. Both orders must compile; this file is built with every build,
 * so a redefinition of bool or size_t in bpf/include breaks the build.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <android_bpf_defs.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>
#include <stddef.h>
#include <stdbool.h>

DEFINE_BPF_MAP_GRO(std_headers_map, HASH, uint32_t, struct accumulator_value, 8, AID_SYSTEM);

DEFINE_BPF_PROG("tp_btf/sched_process_exit", AID_ROOT, AID_SYSTEM, std_headers_prog)
(uint64_t *args)
{
	uint32_t key = 0;
	size_t len = sizeof(key);
	bool big = len > 2;

	(void)args;
	INCREMENT_ACCUMULATOR(std_headers_map, &key, big ? GET_BUCKET(len) : 0);
	return 0;
}

LICENSE("Dual BSD/GPL");
