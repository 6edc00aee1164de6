#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/bench/footprint.sh - ktelemetryd's own footprint with every built-in
# plugin enabled (docs/benchmarks.md). Prints figures and the method; never
# passes or fails on a number.
#
#   footprint.sh [-b BUILD_DIR] idle [SECONDS]   1 s pulls for SECONDS (60):
#                    RSS, CPU time (utime+stime) and context switches per pull
#   footprint.sh [-b BUILD_DIR] flat [PULLS]     100 ms pulls: RSS at pull 10,
#                    100 and PULLS (1000): memory must stay flat
#   footprint.sh [-b BUILD_DIR] trigger [SUB...] 1 s pulls, bpf_stats on, each
#                    tools/trigger subcommand in turn (or only SUB...): daemon
#                    CPU, and every daemon program's run_cnt / run_time_ns
#                    (body-only time)
#   footprint.sh [-b BUILD_DIR] threads [INTERVAL] [SECONDS] [SINK]   pulls
#                    every INTERVAL (10s, the default config's): each thread's
#                    voluntary context switches over SECONDS (60), per round;
#                    SINK "file" (a JSON file, durable: the state save waits
#                    for its acks; config/default.json's kind) or "stdout"
#   footprint.sh [-b BUILD_DIR] all              idle, flat and trigger
#
# NO_STREAMS=1 in the environment turns the two stream plugins off
# (runq_stall_events, oom_events): their events wake the loop as they come.
#
# Needs root. The daemon gets its own pin root (/sys/fs/bpf/ktel-bench-<pid>),
# state file, control socket and JSON sink file under BUILD_DIR; all removed
# at exit. bpf_stats_enabled is restored at exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$ROOT/build
CLK_TCK=$(getconf CLK_TCK)
DAEMON_PID=
WORK=
PIN_ROOT=/sys/fs/bpf/ktel-bench-$$
STATS_SAVED=

log() { printf 'footprint: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

cleanup() {
	if [ -n "$DAEMON_PID" ]; then
		kill "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
	fi
	[ -z "$STATS_SAVED" ] || echo "$STATS_SAVED" >/proc/sys/kernel/bpf_stats_enabled
	rm -rf "$PIN_ROOT"
	[ -z "$WORK" ] || [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_daemon INTERVAL [SINK]: ktelemetryd with every plugin of the build,
# one JSON sink (SINK "file", the default and config/default.json's kind, or
# "stdout", to $WORK/out.jsonl either way), pulls every INTERVAL;
# waits until it runs (the state file, which the daemon writes after each
# pull).
start_daemon() {
	local interval=$1 sink=${2:-file} path stdout=/dev/null streams= i
	WORK=$(mktemp -d "$BUILD/bench-footprint.XXXXXX")
	case $sink in
	file) path=$WORK/out.jsonl ;;
	stdout) path=- stdout=$WORK/out.jsonl ;;
	*) die "SINK is file or stdout, not '$sink'" ;;
	esac
	# NO_STREAMS=1: the stream plugins off (their events wake the loop as
	# they come: data, not overhead).
	[ -z "${NO_STREAMS:-}" ] || streams='
	  "metrics": { "runq_stall_events": { "enabled": false },
	               "oom_events": { "enabled": false } },'
	cat >"$WORK/config.json" <<-EOF
	{
	  "plugin_dirs": ["$BUILD/lib/ktelemetry/plugins"],
	  "pin_root": "$PIN_ROOT",
	  "state_file": "$WORK/state.bin",
	  "control_socket": "$WORK/control.sock",
	  "interval": "$interval",
	  "enable_new_plugins": true,$streams
	  "sinks": { "file": { "type": "json", "path": "$path" } }
	}
	EOF
	"$BUILD/core/ktelemetryd" --config "$WORK/config.json" --log-level warn \
		>"$stdout" 2>"$WORK/daemon.log" &
	DAEMON_PID=$!
	for ((i = 0; i < 100; i++)); do
		[ -f "$WORK/state.bin" ] && break
		kill -0 "$DAEMON_PID" 2>/dev/null || die "ktelemetryd exited: $(tail -3 "$WORK/daemon.log")"
		sleep 0.1
	done
	[ -f "$WORK/state.bin" ] || die "ktelemetryd made no pull in 10 s: $(tail -3 "$WORK/daemon.log")"
}

stop_daemon() {
	kill "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	rm -rf "$PIN_ROOT" "$WORK"
	WORK=
}

# sample: "cpu_ticks rss_kb anon_kb voluntary nonvoluntary threads hwm_kb" of
# the daemon; context switches summed over its threads (libuv's pool included).
sample() {
	local stat utime stime rss anon vol nvol threads hwm
	stat=$(cat "/proc/$DAEMON_PID/stat")
	stat=${stat##*) }  # fields after "(comm)", from field 3 (state)
	read -r _ _ _ _ _ _ _ _ _ _ _ utime stime _ <<<"$stat"
	rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status")
	anon=$(awk '/^RssAnon:/ { print $2 }' "/proc/$DAEMON_PID/status")
	vol=$(cat /proc/"$DAEMON_PID"/task/*/status | awk '/^voluntary_ctxt_switches:/ { s += $2 } END { print s }')
	nvol=$(cat /proc/"$DAEMON_PID"/task/*/status | awk '/^nonvoluntary_ctxt_switches:/ { s += $2 } END { print s }')
	threads=$(awk '/^Threads:/ { print $2 }' "/proc/$DAEMON_PID/status")
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$DAEMON_PID/status")
	echo "$((utime + stime)) $rss $anon $vol $nvol $threads $hwm"
}

ms_of_ticks() { echo $(($1 * 1000 / CLK_TCK)); }

cmd_idle() {
	local secs=${1:-60} a b
	start_daemon 1s
	sleep 3 # let the first pulls and the sink settle
	read -r -a a <<<"$(sample)"
	sleep "$secs"
	read -r -a b <<<"$(sample)"
	echo "idle: $secs s at 1 s pulls ($secs pulls of each metric, an hour-equivalent at 60 s"
	echo "      pulls), every built-in plugin enabled, no events triggered"
	printf '  RSS %d KiB (anon %d KiB) -> %d KiB (anon %d KiB)\n' "${a[1]}" "${a[2]}" "${b[1]}" "${b[2]}"
	printf '  CPU (utime+stime) %d ms over %d s = %d.%03d ms per pull round (tick %d ms)\n' \
		"$(ms_of_ticks $((b[0] - a[0])))" "$secs" \
		$(((b[0] - a[0]) * 1000 / CLK_TCK / secs)) \
		$((((b[0] - a[0]) * 1000000 / CLK_TCK / secs) % 1000)) $((1000 / CLK_TCK))
	printf '  context switches: %d voluntary (wakeups), %d involuntary = %d.%02d wakeups per pull round\n' \
		$((b[3] - a[3])) $((b[4] - a[4])) $(((b[3] - a[3]) / secs)) $((((b[3] - a[3]) * 100 / secs) % 100))
	printf '  threads: %d; sink lines written: %d\n' "${b[5]}" "$(wc -l <"$WORK/out.jsonl")"
	# One line for scripts (tools/bench/run-all): key=value, KiB and counts.
	printf 'result idle rss_kib=%d anon_kib=%d hwm_kib=%d threads=%d wakeups_per_round=%d.%02d\n' \
		"${b[1]}" "${b[2]}" "${b[6]}" "${b[5]}" \
		$(((b[3] - a[3]) / secs)) $((((b[3] - a[3]) * 100 / secs) % 100))
	stop_daemon
}

cmd_flat() {
	local pulls=${1:-1000} s10 s100 sN
	[ "$pulls" -gt 100 ] || die "flat: PULLS must be above 100"
	start_daemon 100ms
	sleep 1
	read -r -a s10 <<<"$(sample)"
	sleep 9
	read -r -a s100 <<<"$(sample)"
	sleep $(((pulls - 100) / 10))
	read -r -a sN <<<"$(sample)"
	echo "flat: 100 ms pulls of every metric; RSS at about pull 10, 100 and $pulls"
	printf '  pull %5d: RSS %6d KiB, anon %6d KiB\n' 10 "${s10[1]}" "${s10[2]}"
	printf '  pull %5d: RSS %6d KiB, anon %6d KiB\n' 100 "${s100[1]}" "${s100[2]}"
	printf '  pull %5d: RSS %6d KiB, anon %6d KiB (growth from pull 10: %+d KiB)\n' \
		"$pulls" "${sN[1]}" "${sN[2]}" $((sN[1] - s10[1]))
	printf '  CPU %d ms over the %d pulls after pull 10\n' \
		"$(ms_of_ticks $((sN[0] - s10[0])))" $((pulls - 10))
	printf 'result flat pulls=%d rss_kib=%d anon_kib=%d hwm_kib=%d threads=%d growth_kib=%d\n' \
		"$pulls" "${sN[1]}" "${sN[2]}" "${sN[6]}" "${sN[5]}" $((sN[1] - s10[1]))
	stop_daemon
}

# prog_ids: ids of the BPF programs the daemon holds (fds and links).
prog_ids() {
	grep -h '^prog_id:' /proc/"$DAEMON_PID"/fdinfo/* 2>/dev/null | awk '{ print $2 }' | sort -un
}

# prog_stats: "id name run_cnt run_time_ns" for each daemon program. One
# bpftool call per id: a listing of every program fails when another one
# disappears while it is listed.
prog_stats() {
	local id
	for id in $(prog_ids); do
		bpftool prog show id "$id" --json 2>/dev/null | python3 -c '
import json, sys
p = json.load(sys.stdin)
print(p["id"], p.get("name", "?"), p.get("run_cnt", 0), p.get("run_time_ns", 0))
' || true
	done
}

cmd_trigger() {
	local sub a b t0 t1 before after subs=("$@")
	[ ${#subs[@]} -gt 0 ] || subs=(compaction memcg-reclaim runq blockio oom)
	command -v bpftool >/dev/null || die "bpftool is needed (Debian package bpftool)"
	STATS_SAVED=$(cat /proc/sys/kernel/bpf_stats_enabled)
	echo 1 >/proc/sys/kernel/bpf_stats_enabled
	start_daemon 1s
	sleep 2
	echo "trigger: 1 s pulls, bpf_stats on; per tools/trigger subcommand: daemon CPU and"
	echo "each daemon program's runs and run_time_ns/run_cnt (BODY ONLY: bpf_stats times"
	echo "the program body, not the dispatch - add the floor from ktel-bench-overhead)"
	for sub in "${subs[@]}"; do
		before=$(prog_stats)
		read -r -a a <<<"$(sample)"
		t0=$(date +%s%N)
		if ! "$ROOT/tools/trigger" "$sub" >/dev/null 2>"$BUILD/bench-trigger.err"; then
			echo "  $sub: trigger failed: $(tail -1 "$BUILD/bench-trigger.err")"
			continue
		fi
		t1=$(date +%s%N)
		sleep 1.5 # one more pull after the events
		read -r -a b <<<"$(sample)"
		after=$(prog_stats)
		printf '  %s: %d ms, daemon CPU %d ms, %d wakeups\n' "$sub" $(((t1 - t0) / 1000000)) \
			"$(ms_of_ticks $((b[0] - a[0])))" $((b[3] - a[3]))
		# join: id name runs0 time0 name runs1 time1
		join <(echo "$before" | sort) <(echo "$after" | sort) | awk '{
			runs = $6 - $3; t = $7 - $4
			if (runs > 0)
				printf "      %-24s %10d runs %8.1f ns/run (body)\n", $2, runs, t / runs
		}'
	done
	rm -f "$BUILD/bench-trigger.err"
	stop_daemon
}

# Each thread's voluntary context switches (its sleeps, so its wakeups) over
# secs at pulls every interval: the loop thread apart from libuv's pool.
cmd_threads() {
	local interval=${1:-10s} secs=${2:-60} sink=${3:-file} t n ms rounds name
	declare -A before
	start_daemon "$interval" "$sink"
	sleep 12 # past the first rounds
	for t in /proc/"$DAEMON_PID"/task/*; do
		before[${t##*/}]=$(awk '/^voluntary_ctxt_switches:/ { print $2 }' "$t/status")
	done
	sleep "$secs"
	case $interval in
	*ms) ms=${interval%ms} ;;
	*s) ms=$((${interval%s} * 1000)) ;;
	*) die "threads: INTERVAL like 10s or 500ms" ;;
	esac
	rounds=$((secs * 1000 / ms))
	echo "threads: pulls every $interval, $sink sink, voluntary context switches per thread over $secs s ($rounds rounds)"
	echo "  (a thread's switches are its sleeps: the loop's polls, a writer's waits for work and its fsyncs)"
	for t in /proc/"$DAEMON_PID"/task/*; do
		n=$(( $(awk '/^voluntary_ctxt_switches:/ { print $2 }' "$t/status") - ${before[${t##*/}]:-0} ))
		name=$(cat "$t/comm")
		[ "${t##*/}" != "$DAEMON_PID" ] || name=loop
		[ "$name" != ktelemetryd ] || name=pool-${t##*/} # libuv's pool
		printf 'result threads sink=%s thread=%s switches=%d per_round=%d.%02d\n' "$sink" \
			"$name" "$n" $((n / rounds)) $(((n * 100 / rounds) % 100))
	done
	stop_daemon
}

while getopts b:h o; do
	case $o in
	b) BUILD=$(cd "$OPTARG" && pwd) ;;
	h) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "$(id -u)" -eq 0 ] || { log "must run as root (skipped)"; exit 77; }
[ -x "$BUILD/core/ktelemetryd" ] || die "no $BUILD/core/ktelemetryd: build first or pass -b BUILD_DIR"
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

echo "machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r)"
case ${1:-all} in
idle) cmd_idle "${2:-60}" ;;
flat) cmd_flat "${2:-1000}" ;;
trigger) shift; cmd_trigger "$@" ;;
threads) cmd_threads "${2:-10s}" "${3:-60}" "${4:-file}" ;;
all) cmd_idle 60; cmd_flat 1000; cmd_trigger ;;
*) die "unknown mode '$1' (idle, flat, trigger, threads, all)" ;;
esac
