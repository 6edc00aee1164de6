// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Test fixture: a valid object; fx_shared_ring's descriptor is what the loader refuses. */
#include <ktel_kernel_types.h>
#include <bpf/bpf_helpers.h>
#include <bpf_telemetry.h>

struct fx_ring_event {
	__u64 ts_ns;
};
KTEL_EXPORT_TYPE(struct fx_ring_event, fx_ring_event);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} fx_shared_rb SEC(".maps");

SEC("tp_btf/mm_compaction_end")
int fx_shared_ring_end(__u64 *ctx)
{
	struct fx_ring_event *e = bpf_ringbuf_reserve(&fx_shared_rb, sizeof(*e), 0);

	if (!e)
		return 0;
	e->ts_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
