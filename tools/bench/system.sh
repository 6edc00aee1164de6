#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/bench/system.sh - how much slower standard workloads run with
# ktelemetry attached, side by side with the tools people run instead
# (docs/benchmarks.md, "System overhead").
#
#   tools/bench/system.sh [-b BUILD_DIR] [-n ROUNDS] [-t SECONDS] [-k RUNS]
#                         [-q] [-w WORKLOADS] [-c CONFIGS] [-s SEED]
#                         [-a CPULIST] [-D NS] [-S NS] [-o OUT_DIR]
#
# Workloads (-w, comma-separated; default all):
#   hackbench  rt-tests' hackbench: processes passing messages over pipes
#              (scheduler-heavy: wakeups and context switches)
#   fio        direct random 4 KiB reads and writes on a loop device this
#              script makes over a file on the build tree's disk, and removes
#   vm         stress-ng --vm (anonymous memory) while a file larger than the
#              rest of the limit is read through the page cache, in a memory
#              cgroup: the limit is hit and the cgroup reclaims
# Configurations (-c, comma-separated; default all):
#   none       nothing attached
#   default    ktelemetryd with config/default.json (every built-in plugin)
#   server     ktelemetryd with config/examples/linux-server.json
#   equiv      ktelemetryd with only runq_latency and block_io_latency, the
#              plugins on the hooks of runqlat and biolatency
#   bpftrace   tools/bench/runqlat-tp.bt + biolatency-tp.bt (the shipped
#              runqlat.bt and biolatency.bt on this kernel's tracepoints)
#   bcc        runqlat-bpfcc + biolatency-bpfcc, unchanged; left out with
#              the reason when they cannot run here (no kernel headers)
# Config paths are rewritten into a sandbox under BUILD_DIR; the daemon runs
# from BUILD_DIR's binaries and plugins.
#
# Method: rounds (-n, default 12; -t SECONDS: keep starting rounds until
# that much time has passed, at least -n; -q: 3 rounds of tiny workloads,
# only to see that everything runs). Each round runs the configurations in a
# fresh random order (SEED, default the time); each configuration is
# started, waited for until attached, runs every workload -k times (default
# 2; alternating), and is stopped. -a CPULIST runs the workloads under
# taskset. Per run: the workload's wall time and CPU time (user + system of
# its processes, from the shell's `times`), the tool's own CPU time and peak
# RSS (its processes' /proc stat and VmHWM), the 1-minute load average and,
# when bpf_stats is on (kernel.bpf_stats_enabled; the script does not change
# it), the run time and run count of each program the configuration loaded.
# The summary gives per workload and configuration:
#   - the slowdown against "none" paired by round: each round's mean of the
#     configuration over that round's mean of "none", the log of that ratio
#     averaged over the rounds, Student's t interval (rounds - 1 degrees of
#     freedom), for wall and for CPU time; and, for comparison, the width of
#     the unpaired Welch interval over all runs;
#   - the programs' share of the workload's CPU time, run by run: (run time
#     + runs * D) / the CPU time every CPU was busy during the run (the
#     programs see every event of the machine, not only the workload's),
#     D the fixed cost per program run that run time leaves out (-D NS,
#     dispatch; default 18, machine A's empty tp_btf program), with its
#     interval (the daemon's programs: the ids its status names; a
#     tracer's: the tracepoint programs that appeared while it started);
#     and the part bpf_stats itself adds (runs * S, -S NS, its
#     two clock reads per run; default 39, machine A's), which every
#     measured slowdown includes while it is on;
#   - each program's runs and run time per workload run.
# Needs root; installs rt-tests, fio, stress-ng, bpftrace and bpfcc-tools
# when missing. Never passes or fails on a figure.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$ROOT/build
REPS=12
BUDGET=0
PER=2
AFF=
DISPATCH_NS=18
STATS_NS=39
QUICK=
WORKLOADS=hackbench,fio,vm
CONFIGS=none,default,server,equiv,bpftrace,bcc
SEED=$(date +%s)
OUT=
while [ $# -gt 0 ]; do
	case $1 in
	-b) BUILD=$2; shift ;;
	-n) REPS=$2; shift ;;
	-t) BUDGET=$2; shift ;;
	-k) PER=$2; shift ;;
	-a) AFF=$2; shift ;;
	-D) DISPATCH_NS=$2; shift ;;
	-S) STATS_NS=$2; shift ;;
	-q | --quick) QUICK=1 ;;
	-w) WORKLOADS=$2; shift ;;
	-c) CONFIGS=$2; shift ;;
	-s) SEED=$2; shift ;;
	-o) OUT=$2; shift ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) echo "system.sh: unknown argument $1 (-h for help)" >&2; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || { echo "system.sh: must run as root" >&2; exit 77; }
BUILD=$(cd "$BUILD" && pwd)
[ -x "$BUILD/core/ktelemetryd" ] || { echo "system.sh: build $BUILD first" >&2; exit 2; }
if [ -n "$QUICK" ]; then
	REPS=3 BUDGET=0 PER=1
	HB_ARGS=(-g 2 -l 200)
	FIO_SIZE=32M FIO_IO=4M
	VM_OPS=20000 VM_BYTES=24M CACHE_MB=64 CACHE_PASSES=4 VM_LIMIT=$((48 << 20))
else
	# Short runs, many of them: the intervals narrow with the number of
	# rounds, and a short run is less likely to straddle a change of the
	# shared machine's load.
	HB_ARGS=(-g 4 -l 200)
	FIO_SIZE=256M FIO_IO=16M
	VM_OPS=50000 VM_BYTES=32M CACHE_MB=128 CACHE_PASSES=4 VM_LIMIT=$((64 << 20))
fi
PIN=()
[ -z "$AFF" ] || PIN=(taskset -c "$AFF")
CTL=$BUILD/tools/ktelemetryctl
PLUGINS=$BUILD/lib/ktelemetry/plugins
SB=$(mktemp -d "$BUILD/system-bench.XXXXXX")
OUT=${OUT:-$SB}
mkdir -p "$OUT"
RESULTS=$OUT/system-runs.tsv
PROGS=$OUT/system-progs.tsv
CG=
LOOP=
TOOL_PIDS=()
CUR=

# Packages: only what this benchmark needs, so tools/run and tools/test do
# not carry them.
need=()
for p in hackbench:rt-tests fio:fio stress-ng:stress-ng bpftrace:bpftrace \
	runqlat-bpfcc:bpfcc-tools jq:jq bpftool:bpftool; do
	command -v "${p%%:*}" >/dev/null || need+=("${p#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "system.sh: installing ${need[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2
fi

cleanup() {
	set +e
	stop_config
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	[ -n "$CG" ] && rmdir "$CG" 2>/dev/null
	rm -rf /sys/fs/bpf/ktel-bench-$$-*
	rm -f "$SB/loop.img" "$SB/cache.img"
	# The sandbox goes unless the results are in it.
	[ "$OUT" = "$SB" ] || rm -rf "$SB"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- workloads ---------------------------------------------------------------

setup_fio() {
	truncate -s "$FIO_SIZE" "$SB/loop.img"
	# Written once, so reads hit allocated blocks.
	dd if=/dev/zero of="$SB/loop.img" bs=1M count=$((${FIO_SIZE%M})) conv=notrunc \
		status=none
	LOOP=$(losetup --direct-io=on -f --show "$SB/loop.img")
}

setup_vm() {
	local v1=/sys/fs/cgroup/memory
	# Written past the page cache, so that its reads are charged to the
	# cgroup and its clean pages can be dropped before each run.
	dd if=/dev/zero of="$SB/cache.img" bs=1M count="$CACHE_MB" oflag=direct status=none
	if [ -d "$v1" ] && [ -f "$v1/memory.limit_in_bytes" ]; then
		CG=$v1/ktel-bench-$$
		mkdir -p "$CG"
		echo "$VM_LIMIT" >"$CG/memory.limit_in_bytes"
	elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
		CG=/sys/fs/cgroup/ktel-bench-$$
		mkdir -p "$CG"
		echo "$VM_LIMIT" >"$CG/memory.max"
	else
		echo "system.sh: no memory cgroup controller: vm runs without a limit" >&2
	fi
}

run_hackbench() { "${PIN[@]}" hackbench "${HB_ARGS[@]}" >/dev/null; }

run_fio() {
	"${PIN[@]}" fio --name=rand --filename="$LOOP" --direct=1 --rw=randrw --bs=4k --ioengine=psync \
		--size="$FIO_SIZE" --io_size="$FIO_IO" --randrepeat=1 --norandommap \
		--output=/dev/null
}

run_vm() {
	dd if="$SB/cache.img" iflag=nocache count=0 status=none
	# In the cgroup first, so that everything it starts is charged to it.
	"${PIN[@]}" sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs"
		stress-ng --vm 1 --vm-bytes "$2" --vm-ops "$3" --quiet &
		for _ in $(seq "$5"); do dd if="$4" of=/dev/null bs=1M status=none; done
		wait $!' sh "$CG" "$VM_BYTES" "$VM_OPS" "$SB/cache.img" "$CACHE_PASSES"
}

# ---- configurations ----------------------------------------------------------

prog_ids() { bpftool prog show -j 2>/dev/null | jq -r ".[].id" | sort; }

# A config file of the repository with its paths moved into the sandbox.
sandbox_config() {
	local src=$1 name=$2 plugdir=$3
	jq --arg p "$plugdir" --arg pin "/sys/fs/bpf/ktel-bench-$$-$name" \
		--arg d "$SB/$name" '
		.plugin_dirs = [$p] | .pin_root = $pin | .state_file = ($d + "/state.bin")
		| .control_socket = ($d + "/control.sock")
		| .sinks |= with_entries(
			if .value.type == "json" then .value.path = ($d + "/records.jsonl")
			elif .value.type == "prometheus" then .value.listen = "127.0.0.1"
				| .value.port = 0
			else . end)' "$src" >"$SB/$name/config.json"
}

start_daemon() {
	local name=$1 src=$2 plugdir=$3
	mkdir -p "$SB/$name"
	sandbox_config "$src" "$name" "$plugdir"
	"$BUILD/core/ktelemetryd" --config "$SB/$name/config.json" 2>>"$SB/$name/daemon.log" &
	TOOL_PIDS=($!)
	for _ in $(seq 300); do
		"$CTL" --socket "$SB/$name/control.sock" status >/dev/null 2>&1 && return 0
		kill -0 "${TOOL_PIDS[0]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "system.sh: $name: the daemon did not start (see $SB/$name/daemon.log)" >&2
	tail -5 "$SB/$name/daemon.log" >&2
	return 1
}

# Start a tracer (bpftrace or a bcc tool) and wait for its banner.
start_tracer() {
	local log=$1
	shift
	"$@" >"$log" 2>&1 &
	TOOL_PIDS+=($!)
	for _ in $(seq 600); do
		grep -q 'Hit Ctrl-C' "$log" && return 0
		kill -0 "${TOOL_PIDS[-1]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "system.sh: $* did not start:" >&2
	tail -3 "$log" >&2
	return 1
}

start_config() {
	CUR=$1
	TOOL_PIDS=()
	case $1 in
	none) ;;
	default) start_daemon default "$ROOT/config/default.json" "$PLUGINS" ;;
	server) start_daemon server "$ROOT/config/examples/linux-server.json" "$PLUGINS" ;;
	equiv)
		mkdir -p "$SB/equiv/plugins"
		install -m 0644 "$PLUGINS/runq_latency.so" "$PLUGINS/block_io_latency.so" \
			"$SB/equiv/plugins/"
		start_daemon equiv "$ROOT/config/default.json" "$SB/equiv/plugins"
		;;
	bpftrace)
		start_tracer "$SB/bt-runq.log" bpftrace "$ROOT/tools/bench/runqlat-tp.bt"
		start_tracer "$SB/bt-bio.log" bpftrace "$ROOT/tools/bench/biolatency-tp.bt"
		;;
	bcc)
		start_tracer "$SB/bcc-runq.log" runqlat-bpfcc
		start_tracer "$SB/bcc-bio.log" biolatency-bpfcc
		;;
	esac
}

stop_config() {
	local p i
	for p in "${TOOL_PIDS[@]}"; do
		kill -INT "$p" 2>/dev/null || true
	done
	# bpftrace 0.17 now and then sleeps on in epoll_wait after a SIGINT (seen
	# after 12 minutes): a second one ends it; after 20 s, SIGKILL.
	for p in "${TOOL_PIDS[@]}"; do
		for i in $(seq 200); do
			kill -0 "$p" 2>/dev/null || break
			[ "$i" -ne 50 ] || kill -INT "$p" 2>/dev/null || true
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	TOOL_PIDS=()
	[ -n "$CUR" ] && rm -rf "/sys/fs/bpf/ktel-bench-$$-$CUR"
	CUR=
}

# CPU ticks (user + system) of the tool's processes and their children.
tool_ticks() {
	local p t=0 s
	for p in "${TOOL_PIDS[@]}"; do
		s=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null) || continue
		set -- $s
		t=$((t + ${12} + ${13}))
	done
	echo $t
}

tool_hwm_kb() {
	local p h t=0
	for p in "${TOOL_PIDS[@]}"; do
		h=$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status" 2>/dev/null) || continue
		t=$((t + ${h:-0}))
	done
	echo $t
}

# CPU ticks every CPU spent busy (user, nice, system, irq, softirq): the
# programs run on whatever the machine does, so their run time is set
# against all of it.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat; }

# One line per program in the ids file: id, name, run_time_ns, run_cnt.
prog_stats() {
	[ -s "$1" ] || return 0
	bpftool prog show -j 2>/dev/null |
		jq -r --slurpfile ids <(jq -R 'tonumber' "$1") '.[]
			| select(.id as $i | $ids | index($i))
			| [.id, .name // "?", .run_time_ns // 0, .run_cnt // 0] | @tsv'
}

# One timed run: workload under the current config; one line in RESULTS,
# one per program in PROGS.
measure() {
	local round=$1 cfg=$2 wl=$3 rep=$4 ids=$5 t0 t1 k0 k1 u0 u1 cpu st load
	k0=$(tool_ticks)
	prog_stats "$ids" >"$SB/p0"
	st=$(cat /proc/sys/kernel/bpf_stats_enabled)
	u0=$(busy_ticks)
	t0=$(date +%s%N)
	# The subshell's `times` second line: its children's user and system time.
	cpu=$( (run_"$wl" && times) | tail -1 | awk '{
		split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
	t1=$(date +%s%N)
	u1=$(busy_ticks)
	prog_stats "$ids" >"$SB/p1"
	k1=$(tool_ticks)
	read -r load _ </proc/loadavg
	# Per program: the difference of its counters over the run.
	awk -F'\t' -v pre="$round\t$cfg\t$wl\t$rep" 'NR == FNR { ns[$1] = $3; n[$1] = $4; next }
		($1 in ns) { printf "%s\t%s\t%s\t%s\n", pre, $2, $3 - ns[$1], $4 - n[$1] }' \
		"$SB/p0" "$SB/p1" >"$SB/pd"
	cat "$SB/pd" >>"$PROGS"
	awk -F'\t' -v r="$round" -v c="$cfg" -v w="$wl" -v rep="$rep" -v ns=$((t1 - t0)) \
		-v cpu="$cpu" -v k=$((k1 - k0)) -v hz="$(getconf CLK_TCK)" -v hwm="$(tool_hwm_kb)" \
		-v st="$st" -v load="$load" -v busy=$((u1 - u0)) '{ b += $6; bn += $7 } END {
		printf "%s\t%s\t%s\t%s\t%.6f\t%s\t%.3f\t%s\t%d\t%d\t%s\t%s\t%.2f\n", r, c, w,
			rep, ns / 1e9, cpu, k / hz, hwm, b, bn, st, load, busy / hz }' "$SB/pd" >>"$RESULTS"
}

# ---- main --------------------------------------------------------------------

IFS=, read -ra wls <<<"$WORKLOADS"
IFS=, read -ra cfgs <<<"$CONFIGS"
for w in "${wls[@]}"; do
	case $w in
	hackbench) ;;
	fio) setup_fio ;;
	vm) setup_vm ;;
	*) echo "system.sh: unknown workload $w" >&2; exit 2 ;;
	esac
done
stats=$(cat /proc/sys/kernel/bpf_stats_enabled)
kept=()
for c in "${cfgs[@]}"; do
	case $c in
	bcc)
		# As shipped they compile their C at start against the kernel's
		# headers: where that fails, say why and go on without them.
		if ! timeout 120 runqlat-bpfcc 1 1 >"$SB/bcc-check.log" 2>&1; then
			echo "skip bcc: runqlat-bpfcc cannot run here: $(grep -m1 -iE \
				'kernel headers|Exception|error' "$SB/bcc-check.log" ||
				tail -1 "$SB/bcc-check.log")" | tee -a "$OUT/system-notes.txt"
			continue
		fi
		;;
	none | default | server | equiv | bpftrace) ;;
	*) echo "system.sh: unknown configuration $c" >&2; exit 2 ;;
	esac
	kept+=("$c")
done
{
	echo "# tools/bench/system.sh $([ -n "$QUICK" ] && echo --quick) -n $REPS -t $BUDGET -k $PER -s $SEED${AFF:+ -a $AFF} -D $DISPATCH_NS -S $STATS_NS"
	echo "# $(date -u +%FT%TZ), commit $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown), nice $(nice)"
	echo "# $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
	echo "# $(uptime)"
	echo "# hackbench ${HB_ARGS[*]}; fio randrw 4k direct psync size $FIO_SIZE io_size $FIO_IO"
	echo "# vm: stress-ng --vm 1 --vm-bytes $VM_BYTES --vm-ops $VM_OPS and $CACHE_PASSES reads of a $CACHE_MB MiB file, memory limit $((VM_LIMIT >> 20)) MiB"
	echo "# bpf_stats $([ "$stats" = 1 ] && echo on || echo 'off: no program run times') at the start (recorded per run)"
} | tee "$OUT/system-header.txt" >&2
printf 'round\tconfig\tworkload\trep\twall_s\tcpu_s\ttool_cpu_s\ttool_hwm_kb\tbpf_run_ns\tbpf_run_cnt\tbpf_stats\tload1\tbusy_s\n' >"$RESULTS"
printf 'round\tconfig\tworkload\trep\tprog\trun_ns\trun_cnt\n' >"$PROGS"

# Warm-up, not recorded: page cache, the loop file's blocks, the binaries.
for w in "${wls[@]}"; do run_"$w"; done

RANDOM=$SEED
T_START=$SECONDS
round=0
while [ $round -lt "$REPS" ] || [ $((SECONDS - T_START)) -lt "$BUDGET" ]; do
	round=$((round + 1))
	# $RANDOM read here, not in a subshell, so that SEED decides the orders.
	keyed=()
	for c in "${kept[@]}"; do keyed+=("$RANDOM $c"); done
	mapfile -t order < <(printf '%s\n' "${keyed[@]}" | sort -n | cut -d' ' -f2)
	echo "round $round ($((SECONDS - T_START)) s, load $(cut -d' ' -f1 /proc/loadavg)): ${order[*]}" >&2
	for c in "${order[@]}"; do
		prog_ids >"$SB/ids-before"
		start_config "$c"
		prog_ids | comm -13 "$SB/ids-before" - >"$SB/ids-new"
		# Whose programs: the daemon names its own; of the programs that
		# appeared while a tracer started, bpftrace's are the tracepoint
		# ones (other users' daemons and tests load tp_btf and fentry).
		case $c in
		default | server | equiv)
			"$CTL" --socket "$SB/$c/control.sock" --json status |
				jq -r '.. | objects | .prog_id? // empty' | sort -u >"$SB/ids-$c"
			;;
		*)
			bpftool prog show -j | jq -r '.[] | select(.type == "tracepoint") | .id' |
				sort | comm -12 "$SB/ids-new" - >"$SB/ids-$c"
			;;
		esac
		for k in $(seq "$PER"); do
			for w in "${wls[@]}"; do measure "$round" "$c" "$w" "$k" "$SB/ids-$c"; done
		done
		stop_config
	done
done

echo "# end $(date -u +%FT%TZ), $round rounds, $(uptime)" | tee -a "$OUT/system-header.txt" >&2
python3 "$ROOT/tools/bench/system_stats.py" -D "$DISPATCH_NS" -S "$STATS_NS" "$RESULTS" "$PROGS"
echo "runs: $RESULTS, programs: $PROGS" >&2
exit 0
