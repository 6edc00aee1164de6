#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/bench/system.sh - how much slower standard workloads run with
# ktelemetry attached, side by side with the tools people run instead
# (docs/benchmarks.md, "System overhead").
#
#   tools/bench/system.sh [-b BUILD_DIR] [-n REPS] [-q] [-w WORKLOADS]
#                         [-c CONFIGS] [-s SEED] [-o OUT_DIR]
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
# Method: REPS rounds (default 20; -q: 3 rounds of tiny workloads, only to
# see that everything runs). Each round runs the configurations in a fresh
# random order (SEED, default the time); each configuration is started,
# waited for until attached, runs every workload once, and is stopped. Per
# run: the workload's wall time and CPU time (user + system of its
# processes, from the shell's `times`), the tool's own CPU time and peak
# RSS (its processes' /proc stat and VmHWM) and, when bpf_stats is on
# (sysctl kernel.bpf_stats_enabled=1 before the run; the script leaves it
# as it finds it), the run time of the programs the configuration loaded.
# The summary gives per workload each configuration's mean and its slowdown
# against "none" with a 95% confidence interval from Welch's t on the
# difference of the means (over the mean of "none"). Needs root; installs
# rt-tests, fio, stress-ng, bpftrace and bpfcc-tools when missing. Never
# passes or fails on a figure.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$ROOT/build
REPS=20
QUICK=
WORKLOADS=hackbench,fio,vm
CONFIGS=none,default,server,equiv,bpftrace,bcc
SEED=$(date +%s)
OUT=
while [ $# -gt 0 ]; do
	case $1 in
	-b) BUILD=$2; shift ;;
	-n) REPS=$2; shift ;;
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
	REPS=3
	HB_ARGS=(-g 2 -l 200)
	FIO_SIZE=32M FIO_IO=4M
	VM_OPS=20000 VM_BYTES=24M CACHE_MB=64 CACHE_PASSES=4 VM_LIMIT=$((48 << 20))
else
	HB_ARGS=(-g 10 -l 400)
	FIO_SIZE=512M FIO_IO=64M
	VM_OPS=200000 VM_BYTES=64M CACHE_MB=256 CACHE_PASSES=8 VM_LIMIT=$((128 << 20))
fi
CTL=$BUILD/tools/ktelemetryctl
PLUGINS=$BUILD/lib/ktelemetry/plugins
SB=$(mktemp -d "$BUILD/system-bench.XXXXXX")
OUT=${OUT:-$SB}
mkdir -p "$OUT"
RESULTS=$OUT/system-runs.tsv
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

run_hackbench() { hackbench "${HB_ARGS[@]}" >/dev/null; }

run_fio() {
	fio --name=rand --filename="$LOOP" --direct=1 --rw=randrw --bs=4k --ioengine=psync \
		--size="$FIO_SIZE" --io_size="$FIO_IO" --randrepeat=1 --norandommap \
		--output=/dev/null
}

run_vm() {
	dd if="$SB/cache.img" iflag=nocache count=0 status=none
	# In the cgroup first, so that everything it starts is charged to it.
	sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs"
		stress-ng --vm 1 --vm-bytes "$2" --vm-ops "$3" --quiet &
		for _ in $(seq "$5"); do dd if="$4" of=/dev/null bs=1M status=none; done
		wait $!' sh "$CG" "$VM_BYTES" "$VM_OPS" "$SB/cache.img" "$CACHE_PASSES"
}

# ---- configurations ----------------------------------------------------------

prog_ids() { bpftool prog show -j 2>/dev/null | jq -r '.[].id' | sort -n; }

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
	local p
	for p in "${TOOL_PIDS[@]}"; do
		kill -INT "$p" 2>/dev/null || true
	done
	for p in "${TOOL_PIDS[@]}"; do
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

# Summed run_time_ns of the programs in the ids file.
bpf_run_ns() {
	[ -s "$1" ] || { echo 0; return; }
	bpftool prog show -j 2>/dev/null |
		jq --slurpfile ids <(jq -R 'tonumber' "$1") \
			'[.[] | select(.id as $i | $ids | index($i)) | .run_time_ns // 0] | add // 0'
}

# One timed run: workload under the current config; one TSV line.
measure() {
	local round=$1 cfg=$2 wl=$3 ids=$4 t0 t1 k0 k1 b0 b1 cpu
	k0=$(tool_ticks)
	b0=$(bpf_run_ns "$ids")
	t0=$(date +%s%N)
	# The subshell's `times` second line: its children's user and system time.
	cpu=$( (run_"$wl" && times) | tail -1 | awk '{
		split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
	t1=$(date +%s%N)
	b1=$(bpf_run_ns "$ids")
	k1=$(tool_ticks)
	awk -v r="$round" -v c="$cfg" -v w="$wl" -v ns=$((t1 - t0)) -v cpu="$cpu" \
		-v k=$((k1 - k0)) -v hz="$(getconf CLK_TCK)" -v hwm="$(tool_hwm_kb)" \
		-v b=$((b1 - b0)) 'BEGIN {
		printf "%s\t%s\t%s\t%.6f\t%s\t%.3f\t%s\t%s\n", r, c, w, ns / 1e9, cpu, k / hz, hwm, b }' \
		>>"$RESULTS"
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
	echo "# tools/bench/system.sh $([ -n "$QUICK" ] && echo --quick) -n $REPS -s $SEED"
	echo "# $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
	echo "# $(uptime)"
	echo "# hackbench ${HB_ARGS[*]}; fio randrw 4k direct psync size $FIO_SIZE io_size $FIO_IO"
	echo "# vm: stress-ng --vm 1 --vm-bytes $VM_BYTES --vm-ops $VM_OPS and $CACHE_PASSES reads of a $CACHE_MB MiB file, memory limit $((VM_LIMIT >> 20)) MiB"
	echo "# bpf_stats $([ "$stats" = 1 ] && echo on || echo 'off: no program run times')"
} | tee "$OUT/system-header.txt" >&2
printf 'round\tconfig\tworkload\twall_s\tcpu_s\ttool_cpu_s\ttool_hwm_kb\tbpf_run_ns\n' >"$RESULTS"

# Warm-up, not recorded: page cache, the loop file's blocks, the binaries.
for w in "${wls[@]}"; do run_"$w"; done

RANDOM=$SEED
for round in $(seq "$REPS"); do
	# $RANDOM read here, not in a subshell, so that SEED decides the orders.
	keyed=()
	for c in "${kept[@]}"; do keyed+=("$RANDOM $c"); done
	mapfile -t order < <(printf '%s\n' "${keyed[@]}" | sort -n | cut -d' ' -f2)
	echo "round $round/$REPS: ${order[*]}" >&2
	for c in "${order[@]}"; do
		prog_ids >"$SB/ids-before"
		start_config "$c"
		prog_ids | comm -13 "$SB/ids-before" - >"$SB/ids-$c"
		for w in "${wls[@]}"; do measure "$round" "$c" "$w" "$SB/ids-$c"; done
		stop_config
	done
done

python3 - "$RESULTS" "$stats" <<'EOF'
import math, sys, collections

rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
stats_on = sys.argv[2] == "1"
data = collections.defaultdict(list)
for r in rows:
    data[(r[2], r[1])].append([float(x) for x in r[3:8]])

# Two-sided 95% quantiles of Student's t by degrees of freedom.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042]

def t95(df):
    if df < 1:
        return float("nan")
    if df <= 30:
        lo = T95[int(math.floor(df)) - 1]
        hi = T95[min(int(math.ceil(df)), 30) - 1]
        return lo + (hi - lo) * (df - math.floor(df))
    return 1.960 + 2.4 / df  # within 0.005 of the exact value above 30

def mean_var(x):
    m = sum(x) / len(x)
    v = sum((a - m) ** 2 for a in x) / (len(x) - 1) if len(x) > 1 else float("nan")
    return m, v

def slowdown(x, base):
    """(mean(x) / mean(base) - 1) with Welch's 95% interval on the
    difference of the means, scaled by mean(base)."""
    mx, vx = mean_var(x)
    mb, vb = mean_var(base)
    d = mx - mb
    se2 = vx / len(x) + vb / len(base)
    if not se2 > 0:
        return 100 * d / mb, float("nan"), float("nan")
    df = se2 ** 2 / ((vx / len(x)) ** 2 / (len(x) - 1) + (vb / len(base)) ** 2 / (len(base) - 1))
    h = t95(df) * math.sqrt(se2)
    return 100 * d / mb, 100 * (d - h) / mb, 100 * (d + h) / mb

print("\nslowdown = mean / mean(none) - 1; [95% CI]: Welch's t on the difference of the means,")
print("over mean(none). wall: elapsed; cpu: the workload's user+system time (a program's run")
print("time is charged to the task it interrupts, so it shows here). tool: the daemon's or")
print("tracer's own CPU seconds per run and peak RSS. bpf: the configuration's programs'")
print("run time per run (bpf_stats)" + ("" if stats_on else ": off, not measured") + ".")
for wl in dict.fromkeys(r[2] for r in rows):
    base = data.get((wl, "none"))
    print(f"\n{wl}")
    print(f"  {'config':<9} {'n':>3} {'wall s':>8} {'slowdown wall':>26} {'cpu s':>8} "
          f"{'slowdown cpu':>26} {'tool cpu s':>10} {'tool MiB':>8} {'bpf ms':>8}")
    for cfg in dict.fromkeys(r[1] for r in rows):
        x = data.get((wl, cfg))
        if not x:
            continue
        cols = list(zip(*x))
        mw, mc = mean_var(cols[0])[0], mean_var(cols[1])[0]
        sw = sc = "-"
        if base and cfg != "none":
            s = slowdown(cols[0], [b[0] for b in base])
            sw = f"{s[0]:+.2f}% [{s[1]:+.2f}, {s[2]:+.2f}]"
            s = slowdown(cols[1], [b[1] for b in base])
            sc = f"{s[0]:+.2f}% [{s[1]:+.2f}, {s[2]:+.2f}]"
            print(f"slowdown {wl} {cfg} wall {sw} cpu {sc}", file=sys.stderr)
        tool = sum(cols[2]) / len(x)
        hwm = max(cols[3]) / 1024
        bpf = sum(cols[4]) / len(x) / 1e6 if stats_on else float("nan")
        print(f"  {cfg:<9} {len(x):>3} {mw:>8.3f} {sw:>26} {mc:>8.3f} {sc:>26} "
              f"{tool:>10.3f} {hwm:>8.1f} {bpf:>8.2f}")
EOF
echo "runs: $RESULTS" >&2
