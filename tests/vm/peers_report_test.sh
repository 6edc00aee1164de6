#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/bench/peers-report on fabricated guest lines (no VM, no root): the
# ratios come from the programs' roles whatever each tool calls them, a
# program that never ran prints "-" and never a zero, and a bcc tool that
# did not attach, or attached and never ran, fails the report (status 3)
# with the reason.
set -eu
REPORT=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
check() { # description condition-status
	if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}

echo "abc /usr/sbin/runqlat-bpfcc" >"$dir/sha"
printf 'mem=2560M\nicount=shift=0,sleep=off\nruns=2\n' >"$dir/setup"

# Both tools ran. ktelemetry: wakeup 100 + switch 200 ns per pair, 300 ns
# per I/O (issue 100 + complete 200). runqlat-bpfcc: 200 + 400. Its block
# peer ran only its start program (400 ns), the completion never.
cat >"$dir/ok" <<'EOF'
PEERS-BOOT 6.1.0-57-amd64 bpftrace v0.17.0 nullb0 iostats 0 -> 1 clock tsc
PEERS-TOOL runqlat-bpfcc status=runs ready_after=300s
PEERS-ATTACH runqlat-bpfcc 11 raw_tracepoint_ raw_tracepoint:sched_wakeup
PEERS-ATTACH runqlat-bpfcc 12 raw_tracepoint_ raw_tracepoint:sched_wakeup_new
PEERS-ATTACH runqlat-bpfcc 13 raw_tracepoint_ raw_tracepoint:sched_switch
PEERS-PROG runqlat-bpfcc 1 11 raw_tracepoint_ raw_tracepoint:sched_wakeup 20000 100
PEERS-PROG runqlat-bpfcc 1 12 raw_tracepoint_ raw_tracepoint:sched_wakeup_new 0 0
PEERS-PROG runqlat-bpfcc 1 13 raw_tracepoint_ raw_tracepoint:sched_switch 80000 200
PEERS-PROG runqlat-bpfcc 2 11 raw_tracepoint_ raw_tracepoint:sched_wakeup 40000 200
PEERS-PROG runqlat-bpfcc 2 12 raw_tracepoint_ raw_tracepoint:sched_wakeup_new 0 0
PEERS-PROG runqlat-bpfcc 2 13 raw_tracepoint_ raw_tracepoint:sched_switch 160000 400
PEERS-HIST runqlat-bpfcc 900
PEERS-TOOL biolatency-bpfcc status=runs ready_after=200s
PEERS-ATTACH biolatency-bpfcc 21 trace_req_start kprobe:blk_mq_start_request
PEERS-ATTACH biolatency-bpfcc 22 trace_req_done kprobe:__blk_account_io_done
PEERS-PROG biolatency-bpfcc 1 21 trace_req_start kprobe:blk_mq_start_request 819200 2048
PEERS-PROG biolatency-bpfcc 1 22 trace_req_done kprobe:__blk_account_io_done 0 0
PEERS-PROG biolatency-bpfcc 2 21 trace_req_start kprobe:blk_mq_start_request 819200 2048
PEERS-PROG biolatency-bpfcc 2 22 trace_req_done kprobe:__blk_account_io_done 0 0
PEERS-HIST biolatency-bpfcc 0
PEERS-TOOL ktelemetry status=runs ready_after=3s
PEERS-PROG ktelemetry 1 31 runq_wakeup link:tracing 10000 100
PEERS-PROG ktelemetry 1 32 runq_switch link:tracing 40000 200
PEERS-PROG ktelemetry 1 33 block_issue link:tracing 204800 2048
PEERS-PROG ktelemetry 1 34 block_complete link:tracing 409600 2048
PEERS-PROG ktelemetry 2 31 runq_wakeup link:tracing 10000 100
PEERS-PROG ktelemetry 2 32 runq_switch link:tracing 80000 400
PEERS-PROG ktelemetry 2 33 block_issue link:tracing 204800 2048
PEERS-PROG ktelemetry 2 34 block_complete link:tracing 409600 2048
PEERS-SHA abc /usr/sbin/runqlat-bpfcc
PEERS-DONE
EOF
st=0
"$REPORT" "$dir/ok" "$dir/sha" "$dir/setup" >"$dir/out" 2>"$dir/err" || st=$?
cat "$dir/out" "$dir/err"
check "both tools ran: status 0" "$st"
grep -q '^| runqlat-bpfcc | 0.50 0.50 | 0.50 | 0.50 - 0.50 |$' "$dir/out"
check "pair ratio 300/600 in each run" $?
grep -q '^| biolatency-bpfcc | 0.75 0.75 | 0.75 |' "$dir/out"
check "per-I/O ratio 600/400 counted over the start program only" $?
grep -q 'biolatency-bpfcc: \*\*nothing\*\*.*never ran: trace_req_done@kprobe:__blk_account_io_done' "$dir/out"
check "the never-run completion is named and the empty histogram said" $?
grep -q '| trace_req_done | kprobe:__blk_account_io_done | 0 0 | - - |' "$dir/out"
check "a program with no runs prints - for ns/run" $?

# bcc did not attach: the reason, and status 3.
cat >"$dir/noattach" <<'EOF'
PEERS-BOOT 6.1.0-57-amd64
PEERS-TOOL runqlat-bpfcc status=fails reason=Exception: Failed to compile BPF module <text>
PEERS-LOG runqlat-bpfcc fatal error: 'linux/sched.h' file not found
PEERS-TOOL ktelemetry status=runs ready_after=3s
PEERS-PROG ktelemetry 1 31 runq_wakeup link:tracing 10000 100
PEERS-PROG ktelemetry 1 32 runq_switch link:tracing 40000 200
PEERS-DONE
EOF
st=0
"$REPORT" "$dir/noattach" "$dir/sha" "$dir/setup" >"$dir/out" 2>"$dir/err" || st=$?
cat "$dir/out" "$dir/err"
[ "$st" -eq 3 ]
check "bcc not attached: status 3" $?
grep -q 'runqlat-bpfcc did not start or attach: Exception: Failed to compile BPF module' "$dir/err"
check "bcc not attached: the reason on stderr" $?
grep -q "^  fatal error: 'linux/sched.h' file not found" "$dir/err"
check "bcc not attached: its last output lines on stderr" $?
grep -q '^| runqlat-bpfcc | \*\*no\*\*: Exception' "$dir/out"
check "bcc not attached: the table says no" $?
if grep -q 'ktelemetry / peer' "$dir/out"; then r=1; else r=0; fi
check "bcc not attached: no ratio printed" $r

# bcc attached and none of its programs ran: status 3, no ratio.
cat >"$dir/noruns" <<'EOF'
PEERS-TOOL runqlat-bpfcc status=runs ready_after=300s
PEERS-PROG runqlat-bpfcc 1 11 raw_tracepoint_ raw_tracepoint:sched_wakeup 0 0
PEERS-PROG runqlat-bpfcc 1 13 raw_tracepoint_ raw_tracepoint:sched_switch 0 0
PEERS-TOOL ktelemetry status=runs ready_after=3s
PEERS-PROG ktelemetry 1 31 runq_wakeup link:tracing 10000 100
PEERS-PROG ktelemetry 1 32 runq_switch link:tracing 40000 200
PEERS-DONE
EOF
st=0
"$REPORT" "$dir/noruns" "$dir/sha" "$dir/setup" >"$dir/out" 2>"$dir/err" || st=$?
cat "$dir/out" "$dir/err"
[ "$st" -eq 3 ]
check "bcc attached, never ran: status 3" $?
grep -q 'runqlat-bpfcc attached, but none of its programs ran' "$dir/err"
check "bcc attached, never ran: the reason on stderr" $?
if grep -q 'ktelemetry / peer' "$dir/out"; then r=1; else r=0; fi
check "bcc attached, never ran: no ratio printed" $r
exit $fail
