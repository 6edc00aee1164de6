#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/vm/attr-judge on fabricated daemon records (no VM, no root): each
# kind passes when the records agree with the oracle and fails, naming the
# figures, when one count is off by one, io.stat disagrees, an event went to
# another value of the device, the run-queue sums leave the 5% band, the
# victim has no long tail, the OOM kills differ from memory.events, or the
# block subject came by another path than the one wanted.
# SH (default sh) runs the judge: "busybox sh" is the guest's shell.
set -eu
JUDGE=$1
command -v jq >/dev/null || { echo "SKIP: no jq (tools/vm-test installs it)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0

# blk DIM NAME OP COUNT [MAJ]: one block_io_latency record (loop0 = 7:0).
blk() {
  printf '{"metric":"block_io_latency","dims":{"major":%s,"minor":0,"operation":"%s","%s":"%s"},"histogram":{"counts":[%s,0,0],"sum":0}}\n' \
    "${5:-7}" "$3" "$1" "$2" "$4"
}
# rq CGROUP SUM COUNTS: one runq_latency record.
rq() {
  printf '{"metric":"runq_latency","dims":{"cpu":0,"cgroup":"%s"},"histogram":{"counts":%s,"sum":%s}}\n' "$1" "$3" "$2"
}
expect() { # pass|fail WHAT KIND ARGS...
  want=$1 what=$2
  shift 2
  out=$(${SH:-sh} "$JUDGE" "$@")
  case $out in
  "$want "*) echo "ok   $what: $out" ;;
  *) echo "FAIL $what: want $want, got: $out"; fail=1 ;;
  esac
}

# ---- block I/O by cgroup -------------------------------------------------
{ blk cgroup ktel-io-a read 12; blk cgroup ktel-io-a write 3; blk cgroup ktel-io-b read 5
  blk cgroup ktel-io-c write 17; blk cgroup / read 40 8; } >"$dir/io.jsonl"
printf 'ktel-io-a 12 3 12 3\nktel-io-b 5 0 5 0\nktel-io-c 0 17 0 17\n' >"$dir/io.oracle"
expect pass "block_io exact" block_io cgroup 7:0 "$dir/io.jsonl" "$dir/io.oracle"
printf 'ktel-io-a 12 3 12 3\nktel-io-b 5 0 5 0\nktel-io-c 0 17 0 16\n' >"$dir/io.bad"
expect fail "block_io io.stat differs" block_io cgroup 7:0 "$dir/io.jsonl" "$dir/io.bad"
printf 'ktel-io-a 12 3 12 3\nktel-io-b 6 0 6 0\nktel-io-c 0 17 0 17\n' >"$dir/io.bad"
expect fail "block_io one read short" block_io cgroup 7:0 "$dir/io.jsonl" "$dir/io.bad"
BLOCK_PATH=bio BLOCK_WANT=bio expect pass "block_io through the bio path wanted" \
  block_io cgroup 7:0 "$dir/io.jsonl" "$dir/io.oracle"
BLOCK_PATH=submit BLOCK_WANT=bio expect fail "block_io through the submit path, bio wanted" \
  block_io cgroup 7:0 "$dir/io.jsonl" "$dir/io.oracle"
blk cgroup unknown read 1 >>"$dir/io.jsonl"
expect fail "block_io a read in unknown" block_io cgroup 7:0 "$dir/io.jsonl" "$dir/io.oracle"

# ---- block I/O by user (no io.stat) ----------------------------------------
{ blk user 3999001 read 9; blk user 3999001 write 2; blk user 3999003 write 17; } >"$dir/u.jsonl"
printf '3999001 9 2 - -\n3999003 0 17 - -\n' >"$dir/u.oracle"
expect pass "block_io by user" block_io user 7:0 "$dir/u.jsonl" "$dir/u.oracle"
printf '3999001 9 2 - -\n3999003 0 16 - -\n' >"$dir/u.bad"
expect fail "block_io by user, one write more" block_io user 7:0 "$dir/u.jsonl" "$dir/u.bad"

# ---- run queue ---------------------------------------------------------------
{ rq ktel-rq-hog1 1000 '[0,0,100,0,0]'; rq ktel-rq-hog2 1100 '[0,0,0,100,0]'
  rq ktel-rq-victim 3000 '[0,0,0,0,0,0,0,0,0,0,0,0,3]'; rq / 50 '[0,0,0,0,0,0,0,0,0,0,0,0,0,0,9]'; } >"$dir/rq.jsonl"
# hog1: sum 1000 + 100 waits; run_delay 1090 us: inside the band.
printf 'ktel-rq-hog1 hog 1090000 1400000\nktel-rq-hog2 hog 1100500 1500000\nktel-rq-victim victim 3001000 20000\n' >"$dir/rq.oracle"
expect pass "runq agrees" runq "$dir/rq.jsonl" "$dir/rq.oracle"
# hog1's run_delay 1200 us: sum + waits = 1100 < 0.95 * 1200.
printf 'ktel-rq-hog1 hog 1200000 1400000\nktel-rq-hog2 hog 1100500 1500000\nktel-rq-victim victim 3001000 20000\n' >"$dir/rq.bad"
expect fail "runq histogram short of run_delay" runq "$dir/rq.jsonl" "$dir/rq.bad"
# The victim's sum 3000 > 1.05 * 2800.
printf 'ktel-rq-hog1 hog 1090000 1400000\nktel-rq-hog2 hog 1100500 1500000\nktel-rq-victim victim 2800000 20000\n' >"$dir/rq.bad"
expect fail "runq histogram above run_delay" runq "$dir/rq.jsonl" "$dir/rq.bad"
printf 'ktel-rq-hog1 hog 1090000 1400000\nktel-rq-hog2 hog 1100500 1500000\nktel-rq-victim victim 3001000 1450000\n' >"$dir/rq.bad"
expect fail "runq victim not the least CPU" runq "$dir/rq.jsonl" "$dir/rq.bad"
{ rq ktel-rq-hog1 1000 '[0,0,0,0,0,0,0,0,0,0,0,0,0,100]'; rq ktel-rq-hog2 1100 '[0,0,0,100,0]'
  rq ktel-rq-victim 3000 '[0,0,0,0,0,0,0,0,0,0,0,0,3]'; } >"$dir/rq2.jsonl"
expect fail "runq victim without the long tail" runq "$dir/rq2.jsonl" "$dir/rq.oracle"
printf 'ktel-rq-hog1 hog 1090000 1400000\nktel-rq-gone hog 1000 1500000\nktel-rq-victim victim 3001000 20000\n' >"$dir/rq.bad"
expect fail "runq cgroup without records" runq "$dir/rq.jsonl" "$dir/rq.bad"

# ---- OOM and memcg reclaim ------------------------------------------------------
{ printf '{"metric":"oom_kills","dims":{"process_state":"STATE_NATIVE","cgroup":"ktel-oom"},"value":2}\n'
  printf '{"metric":"oom_kills","dims":{"process_state":"STATE_CACHED","cgroup":"ktel-oom"},"value":1}\n'
  printf '{"metric":"oom_kills","dims":{"process_state":"STATE_CACHED","cgroup":"/"},"value":1}\n'
  printf '{"metric":"memcg_reclaim_latency","dims":{"process_state":"STATE_NATIVE","cgroup":"ktel-oom"},"histogram":{"counts":[0,40,2],"sum":90}}\n'
} >"$dir/oom.jsonl"
echo "3 3 45 0 137,137,137" >"$dir/oom.oracle"
expect pass "oom exact" oom ktel-oom "$dir/oom.jsonl" "$dir/oom.oracle"
expect pass "memcg reclaim within max" memcg_reclaim ktel-oom "$dir/oom.jsonl" "$dir/oom.oracle"
echo "3 4 45 0 137,137,137" >"$dir/oom.bad"
expect fail "oom memory.events differs" oom ktel-oom "$dir/oom.jsonl" "$dir/oom.bad"
echo "3 3 41 0 137,137,137" >"$dir/oom.bad"
expect fail "memcg reclaims past max events" memcg_reclaim ktel-oom "$dir/oom.jsonl" "$dir/oom.bad"
expect fail "oom other cgroup" oom ktel-other "$dir/oom.jsonl" "$dir/oom.oracle"
exit $fail
