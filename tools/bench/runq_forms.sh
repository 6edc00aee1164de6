#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/bench/runq_forms.sh - what the forms of runq_latency (or of
# runq_stall_events, -p) cost per context switch under hackbench, against
# bpftrace's runqlat equivalent (docs/benchmarks.md, "Run-queue forms").
#
#   tools/bench/runq_forms.sh [-b BUILD_DIR] [-n ROUNDS] [-w WORKLOAD]
#                             [-p runq_latency|runq_stall_events]
#
# Forms: "stamp" (runq_switch_si alone: the scheduler's sched_info stamp),
# "task" (runq_switch + runq_wakeup + runq_wakeup_new, the start in task
# storage), "hash" (the _hash programs), each loaded alone from the build's
# PLUGIN.bpf.o by ktel-bench-prog-runtime (attribution off; for
# runq_stall_events the programs are runq_stall_*, with the default
# threshold_us), and
# "bpftrace" (tools/bench/runqlat-tp.bt). Each round runs the four in a
# fresh random order, each under one run of WORKLOAD (default
# "hackbench -g 4 -l 200"), and reads every program's bpf_stats run time and
# run count over that run (the body time: the dispatch is left out, for
# bpftrace's classic tracepoints as for the tp_btf programs). Printed per
# form: each program's runs and ns per run (mean over the rounds), and the
# form's ns per sched_switch (all its programs' run time over its switch
# program's runs), with a 95% interval over the rounds; each form's ratio
# to bpftrace's per switch, and the stamp form's to the task form's, paired
# by round. Figures, never a verdict.
#
# Needs root, bpftool, bpftrace and hackbench. bpf_stats: the C programs
# turn it on for their run (BPF_ENABLE_STATS); bpftrace's figures need
# kernel.bpf_stats_enabled=1, which the script sets for the bpftrace run
# only when it was off, and restores.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
ROUNDS=10
WORKLOAD="hackbench -g 4 -l 200"
PLUGIN=runq_latency
while getopts b:n:p:w: o; do
	case $o in
	b) BUILD=$OPTARG ;;
	n) ROUNDS=$OPTARG ;;
	p) PLUGIN=$OPTARG ;;
	w) WORKLOAD=$OPTARG ;;
	*) sed -n '2,30p' "$0" >&2; exit 2 ;;
	esac
done
case $PLUGIN in
runq_latency) P=runq ;;
runq_stall_events) P=runq_stall ;;
*) echo "runq_forms.sh: -p runq_latency or runq_stall_events" >&2; exit 2 ;;
esac
OBJ=$BUILD/plugins/$PLUGIN/$PLUGIN.bpf.o
PR=$BUILD/tools/bench/ktel-bench-prog-runtime
BT=$ROOT/tools/bench/runqlat-tp.bt
for f in "$OBJ" "$PR"; do
	[ -e "$f" ] || { echo "runq_forms.sh: $f missing: build the tree first" >&2; exit 1; }
done
OUT=$(mktemp -d)
BT_PID=
cleanup() {
	[ -z "$BT_PID" ] || kill -KILL "$BT_PID" 2>/dev/null || true
	rm -rf "$OUT"
}
trap cleanup EXIT

# "name run_time_ns run_cnt" of every program whose id is in $@.
prog_stats() {
	local id
	for id in "$@"; do
		bpftool prog show id "$id" -j 2>/dev/null |
			python3 -c 'import json,sys; p=json.load(sys.stdin); print(p.get("name","?"), p.get("run_time_ns",0), p.get("run_cnt",0))'
	done
}

# One run of bpftrace's equivalent: "name ns runs" per program.
run_bpftrace() {
	local before after ids i stats_was
	stats_was=$(sysctl -n kernel.bpf_stats_enabled)
	[ "$stats_was" = 1 ] || sysctl -qw kernel.bpf_stats_enabled=1
	before=$(bpftool prog show -j | python3 -c 'import json,sys; print(" ".join(str(p["id"]) for p in json.load(sys.stdin)))')
	bpftrace "$BT" >"$OUT/bt.log" 2>&1 &
	BT_PID=$!
	for i in $(seq 600); do
		grep -q 'Hit Ctrl-C' "$OUT/bt.log" && break
		sleep 0.1
	done
	ids=$(bpftool prog show -j | python3 -c '
import json, sys
before = set(sys.argv[1:])
print(" ".join(str(p["id"]) for p in json.load(sys.stdin)
               if str(p["id"]) not in before and p.get("type") == "tracepoint"))' $before)
	prog_stats $ids >"$OUT/bt.before"
	sh -c "$WORKLOAD" >/dev/null 2>&1
	prog_stats $ids >"$OUT/bt.after"
	kill -INT "$BT_PID" 2>/dev/null || true
	for i in $(seq 100); do
		kill -0 "$BT_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$BT_PID" 2>/dev/null || true
	wait "$BT_PID" 2>/dev/null || true
	BT_PID=
	[ "$stats_was" = 1 ] || sysctl -qw kernel.bpf_stats_enabled=0
	# bpftrace names its programs after the probe: sched_switch, sched_wakeup...
	paste "$OUT/bt.before" "$OUT/bt.after" | awk '{printf "%s %d %d\n", $1, $5 - $2, $6 - $3}'
}

# One run of a form: "name ns runs" per program.
run_form() {
	local progs
	case $1 in
	stamp) progs="${P}_switch_si" ;;
	task) progs="${P}_switch ${P}_wakeup ${P}_wakeup_new" ;;
	hash) progs="${P}_switch_hash ${P}_wakeup_hash ${P}_wakeup_new_hash" ;;
	esac
	# "NAME  RUNS runs  NS ns/run" -> "NAME total_ns RUNS"
	"$PR" "$OBJ" "$WORKLOAD >/dev/null 2>&1" $progs 2>/dev/null |
		awk '/ns\/run/ {printf "%s %.0f %d\n", $1, $2 * $4, $2}'
}

echo "runq_forms: $PLUGIN, $ROUNDS rounds of '$WORKLOAD', forms in random order per round"
echo "machine: $(nproc) CPUs, $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	for form in $(printf '%s\n' stamp task hash bpftrace | shuf); do
		if [ "$form" = bpftrace ]; then
			run_bpftrace
		else
			run_form "$form"
		fi | sed "s/^/$r $form /" >>"$OUT/runs"
	done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT/runs" "$P" <<'EOF'
import math, statistics, sys
from collections import defaultdict

T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}
def t95(df):
    return T95.get(df) or T95[min(T95, key=lambda k: abs(k - df))]
def ci(xs):
    m = statistics.mean(xs)
    if len(xs) < 2:
        return m, float("nan")
    return m, t95(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))

runs = defaultdict(dict)  # (round, form) -> {prog: (ns, cnt)}
for line in open(sys.argv[1]):
    r, form, name, ns, cnt = line.split()
    runs[(int(r), form)][name] = (int(ns), int(cnt))
P = sys.argv[2]
switch_of = {"stamp": P + "_switch_si", "task": P + "_switch", "hash": P + "_switch_hash",
             "bpftrace": "sched_switch"}
per_switch = defaultdict(dict)  # form -> round -> ns per switch
per_prog = defaultdict(list)    # (form, prog) -> [(ns/run, runs)]
for (r, form), progs in runs.items():
    sw = progs.get(switch_of[form])
    if not sw or not sw[1]:
        continue
    per_switch[form][r] = sum(ns for ns, _ in progs.values()) / sw[1]
    for name, (ns, cnt) in progs.items():
        if cnt:
            per_prog[(form, name)].append((ns / cnt, cnt))
print("\nper program (mean over rounds): runs per workload run, ns per run [95%]")
for (form, name), xs in sorted(per_prog.items()):
    m, h = ci([x for x, _ in xs])
    print(f"  {form:8} {name:24} {statistics.mean(c for _, c in xs):9.0f} runs  {m:7.1f} ns/run [{m - h:.1f}, {m + h:.1f}]")
print("\nper sched_switch (all the form's programs' run time / its switch program's runs)")
for form in ("stamp", "task", "hash", "bpftrace"):
    if per_switch[form]:
        m, h = ci(list(per_switch[form].values()))
        print(f"  {form:8} {m:7.1f} ns [{m - h:.1f}, {m + h:.1f}]")
print("\nratio to bpftrace per switch, paired by round (geometric mean [95%])")
for form in ("stamp", "task", "hash"):
    logs = [math.log(per_switch[form][r] / per_switch["bpftrace"][r])
            for r in per_switch[form] if r in per_switch["bpftrace"]]
    if logs:
        m, h = ci(logs)
        print(f"  {form:8} {math.exp(m):.2f}x [{math.exp(m - h):.2f}, {math.exp(m + h):.2f}]")
print("\nstamp to task per switch, paired by round (geometric mean [95%])")
logs = [math.log(per_switch["stamp"][r] / per_switch["task"][r])
        for r in per_switch["stamp"] if r in per_switch["task"]]
if logs:
    m, h = ci(logs)
    print(f"  stamp    {math.exp(m):.2f}x [{math.exp(m - h):.2f}, {math.exp(m + h):.2f}]")
EOF
