#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/bench/default_output.sh - how much config/default.json writes on a
# busy machine (docs/benchmarks.md, "Default output"). Prints MB/min and
# records/min, in all and per metric, with the method; never passes or fails
# on a number.
#
#   default_output.sh [-b BUILD_DIR] [SECONDS]     (SECONDS: 60)
#
# The daemon runs on config/default.json as it is (interval, emit_zero,
# params, sink options, rotation) with only its paths moved into a scratch
# directory under BUILD_DIR: plugin_dirs (BUILD_DIR's plugins), pin_root
# (/sys/fs/bpf/ktel-bench-<pid>), state_file, control_socket and the JSON
# sink's path. THRESHOLD_US=N in the environment sets
# metrics.runq_stall_events.params.threshold_us instead of the plugin's
# default, to compare thresholds.
#
# The load, for the whole run: 2 x CPUs + 1 busy loops (a run queue longer
# than the CPUs: runq_latency, runq_stall_events), one dd writing and reading
# back a 64 MiB file with O_DIRECT in a loop under BUILD_DIR (block_io_latency),
# and one loop starting /bin/true (fork, exec, exit: wakeups). stress-ng or
# hackbench are not needed; the load is the same on every machine with bash
# and coreutils, and what else the machine runs adds to it (the load average
# is printed).
#
# Needs root. Everything it makes is removed at exit (KEEP=1 keeps the
# scratch directory with the records).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$ROOT/build
PIN_ROOT=/sys/fs/bpf/ktel-bench-$$
DAEMON_PID=
LOAD_PIDS=()
WORK=

log() { printf 'default_output: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

stop_load() {
	local p
	for p in "${LOAD_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	for p in "${LOAD_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	LOAD_PIDS=()
}

cleanup() {
	stop_load
	if [ -n "$DAEMON_PID" ]; then
		kill "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
	fi
	rm -rf "$PIN_ROOT"
	[ -z "$WORK" ] || [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

while getopts b:h o; do
	case $o in
	b) BUILD=$OPTARG ;;
	h) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
SECS=${1:-60}
[ "$(id -u)" -eq 0 ] || { log "must run as root (it loads the plugins)"; exit 77; }
command -v jq >/dev/null || die "needs jq (tools/lib.sh installs it)"
[ -x "$BUILD/core/ktelemetryd" ] || die "$BUILD/core/ktelemetryd: build first"
BUILD=$(cd "$BUILD" && pwd)
WORK=$(mktemp -d "$BUILD/bench-default-output.XXXXXX")
OUT=$WORK/records.jsonl

# config/default.json with its paths moved; everything else as shipped.
params='.'
[ -z "${THRESHOLD_US:-}" ] ||
	params=".metrics.runq_stall_events.params.threshold_us = ${THRESHOLD_US}"
jq --arg plugins "$BUILD/lib/ktelemetry/plugins" --arg pins "$PIN_ROOT" --arg work "$WORK" \
	--arg out "$OUT" '
	.plugin_dirs = [$plugins] | .pin_root = $pins | .state_file = ($work + "/state.bin")
	| .control_socket = ($work + "/control.sock")
	| .sinks |= with_entries(if .value.type == "json" then .value.path = $out else . end)
	| '"$params" "$ROOT/config/default.json" >"$WORK/config.json"
sink=$(jq -c '.sinks | to_entries[] | select(.value.type == "json") | .value' "$WORK/config.json")
[ -n "$sink" ] || die "config/default.json has no json sink"

start_load() {
	local n i
	n=$(($(nproc) * 2 + 1))
	for ((i = 0; i < n; i++)); do
		(while :; do :; done) &
		LOAD_PIDS+=($!)
	done
	(while :; do
		dd if=/dev/zero of="$WORK/io.img" bs=1M count=64 oflag=direct status=none
		dd if="$WORK/io.img" of=/dev/null bs=1M iflag=direct status=none
	done) &
	LOAD_PIDS+=($!)
	(while :; do /bin/true; done) &
	LOAD_PIDS+=($!)
}

# Uncompressed bytes and the lines of the sink's file and its rotations.
all_lines() {
	local f
	for f in "$OUT".*.gz; do
		[ -e "$f" ] && zcat "$f"
	done
	for f in $(ls -r "$OUT".[0-9]* 2>/dev/null | grep -v '\.gz'); do
		cat "$f"
	done
	[ ! -e "$OUT" ] || cat "$OUT"
}

start_load
sleep 2
"$BUILD/core/ktelemetryd" --config "$WORK/config.json" --log-level warn 2>"$WORK/daemon.log" &
DAEMON_PID=$!
for ((i = 0; i < 100; i++)); do
	[ -S "$WORK/control.sock" ] && break
	kill -0 "$DAEMON_PID" 2>/dev/null || die "ktelemetryd exited: $(tail -3 "$WORK/daemon.log")"
	sleep 0.1
done
[ -S "$WORK/control.sock" ] || die "ktelemetryd did not start in 10 s"
t0=$(date +%s.%N)
threshold=$("$BUILD/tools/ktelemetryctl" --socket "$WORK/control.sock" --json inspect \
	"$BUILD/lib/ktelemetry/plugins/runq_stall_events.so" 2>/dev/null |
	jq -r '.params[] | select(.name == "threshold_us") | .value // "?"') || threshold="?"
sleep "$SECS"
load=$(cut -d' ' -f1-3 /proc/loadavg)
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=
t1=$(date +%s.%N)
stop_load

all_lines >"$WORK/all.jsonl"
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
echo "method: ktelemetryd on config/default.json (paths moved; sink $sink)"
echo "  for ${SECS} s from its start to its final pull at SIGTERM ($secs s measured),"
echo "  under $(($(nproc) * 2 + 1)) busy loops on $(nproc) CPUs, an O_DIRECT dd write/read loop (64 MiB)"
echo "  and a /bin/true loop; load average at the end: $load; kernel $(uname -r)"
echo "  runq_stall_events threshold_us in the kernel: $threshold"
echo "  bytes: the JSON lines written, newline included (rotated files uncompressed); MB = 10^6 bytes"
# One pass over the lines: records and bytes per metric (the first key of
# every line is "metric"), then the totals and the headline.
LC_ALL=C awk -v secs="$secs" -v thr="$threshold" -v load="${load%% *}" '
	{
		m = "?"
		if (match($0, /^\{"metric":"[^"]*"/))
			m = substr($0, 12, RLENGTH - 12)
		n[m]++; b[m] += length($0) + 1; lines++; bytes += length($0) + 1
	}
	END {
		mins = secs / 60
		printf "%-28s %12s %12s\n", "metric", "records/min", "MB/min"
		for (m in n)
			printf "%-28s %12.1f %12.3f\n", m, n[m] / mins, b[m] / mins / 1e6 | "sort -k2 -rn"
		close("sort -k2 -rn")
		printf "%-28s %12.1f %12.3f\n", "(all)", lines / mins, bytes / mins / 1e6
		printf "result default_output threshold_us=%s records_per_min=%.0f mb_per_min=%.3f load=%s\n",
			thr, lines / mins, bytes / mins / 1e6, load
	}' "$WORK/all.jsonl"
