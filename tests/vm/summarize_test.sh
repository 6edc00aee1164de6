#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/vm/summarize on a fabricated daemon run (no VM, no root): a loaded
# metric without events gets its own trigger as the reason, a loaded metric
# with events gets "-", an unsupported one keeps the daemon's words.
set -eu
SUMMARIZE=$1
command -v jq >/dev/null || { echo "SKIP: no jq (tools/vm-test installs it)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

cat >"$dir/log" <<'LOG'
2026-01-01T00:00:00.000Z ktelemetryd info: metric block_io_latency: collecting every 3600000 ms
2026-01-01T00:00:00.000Z ktelemetryd info: metric memcg_reclaim_latency: collecting every 3600000 ms
2026-01-01T00:00:00.000Z ktelemetryd info: metric oom_events: collecting every 3600000 ms
2026-01-01T00:00:00.000Z ktelemetryd info: metric some_new_metric: collecting every 3600000 ms
2026-01-01T00:00:00.000Z ktelemetryd info: metric runq_latency: collecting every 3600000 ms
2026-01-01T00:00:00.000Z ktelemetryd info: metric cma_allocation_latency: not collected: unsupported: tracepoint cma_alloc_start not in this kernel
LOG
echo '{"metric":"runq_latency","type":"histogram","histogram":{"counts":[2,3]}}' >"$dir/jsonl"

out=$("$SUMMARIZE" 6.1 "$dir/log" "$dir/jsonl")
fail=0
expect() { # metric expected-tail
  line=$(printf '%s\n' "$out" | grep " metric=$1 " || true)
  case $line in
  *"$2") echo "ok   $1" ;;
  *) echo "FAIL $1: want ...$2, got: ${line:-no line}"; fail=1 ;;
  esac
}
expect block_io_latency "status=loaded events=0 reason=no block device request completed in the window"
expect memcg_reclaim_latency "status=loaded events=0 reason=no memory cgroup reached its limit in the window"
expect oom_events "status=loaded events=0 reason=no OOM kill in the window"
expect some_new_metric "status=loaded events=0 reason=no events in the window"
expect runq_latency "status=loaded events=5 reason=-"
expect cma_allocation_latency "status=unsupported events=0 reason=tracepoint cma_alloc_start not in this kernel"
exit $fail
