#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# ktelemetryd under valgrind (memcheck, leaks) for several pulls of every
# built-in plugin with json, prometheus and stream sinks and self-telemetry.
#   valgrind_daemon.sh BUILD_DIR SOURCE_DIR
# Exit 0 clean, 1 with valgrind's report, 77 (skipped) when not root.
set -euo pipefail
build=$1 src=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP valgrind daemon run: needs root (loads BPF programs)"
  exit 77
fi
work=$build/test-tmp/valgrind-$$
pins=/sys/fs/bpf/ktel-test-valgrind-$$
trap 'rm -rf "$work" "$pins"' EXIT
mkdir -p "$work"
cat >"$work/config.json" <<JSON
{"plugin_dirs": ["$build/lib/ktelemetry/plugins"], "pin_root": "$pins",
 "state_file": "$work/state.bin", "control_socket": "$work/control.sock",
 "interval": "1s", "self_telemetry": {"interval": "1s"},
 "sinks": {"file": {"type": "json", "path": "$work/out.jsonl"},
           "prom": {"type": "prometheus", "port": 0},
           "live": {"type": "stream", "socket": "$work/stream.sock"}}}
JSON
echo 1 > /proc/sys/vm/compact_memory || true
# Not --once: it pulls only once, at its end. The daemon runs until it has
# pulled on its 1 s timers a few times, then SIGTERM makes the final pull.
valgrind --quiet --error-exitcode=1 --leak-check=full \
    --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
    --suppressions="$src/tests/valgrind.supp" \
    "$build/core/ktelemetryd" --config "$work/config.json" --log-level debug \
    2>"$work/valgrind.log" &
vg=$!
for _ in $(seq 600); do   # start-up under valgrind is slow: up to 2 minutes
  grep -q "running with" "$work/valgrind.log" && break
  sleep 0.2
done
sleep 2.5
kill -TERM "$vg"
rc=0
wait "$vg" || rc=$?
if [ "$rc" -ne 0 ]; then
  grep -v "ktelemetryd info\|ktelemetryd warn\|ktelemetryd debug" "$work/valgrind.log" | tail -n 60
  echo "valgrind found errors (above), exit $rc"
  exit 1
fi
pulls=$(grep -c "metric compaction_duration: pulled " "$work/valgrind.log" || true)
lines=$(wc -l <"$work/out.jsonl")
echo "valgrind clean over a daemon run of $pulls pulls; $lines records written"
[ "$pulls" -ge 2 ] && [ "$lines" -gt 0 ]
