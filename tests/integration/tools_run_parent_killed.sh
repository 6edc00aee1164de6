#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/run killed with kill -9 (or its terminal closed): the daemon it
# started and its live view stop too, instead of running on unseen.
# Usage: tools_run_parent_killed.sh SOURCE_DIR. Needs root (77 otherwise).
set -euo pipefail
src=$1
[ "$(id -u)" -eq 0 ] || { echo "needs root: skipped"; exit 77; }
out=$(mktemp)
daemon=
run=
cleanup() {
  [ -z "$daemon" ] || kill -9 "$daemon" 2>/dev/null || true
  # On a failure before the kill below, tools/run (its own session, so its
  # own process group) and whatever it started must not outlive the test.
  [ -z "$run" ] || kill -9 -- "-$run" 2>/dev/null || true
  rm -f "$out"
}
trap cleanup EXIT
# Running: it exists and is not a zombie (one its new parent has not reaped
# yet has exited).
alive() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }
  [ "${st%% *}" != Z ]
}

setsid bash "$src/tools/run" >"$out" 2>&1 </dev/null &
run=$!
# tools/run builds its own tree (build-run) first when tools/test has not.
for _ in $(seq 2400); do
  daemon=$(sed -n 's/^ktelemetryd is running (pid \([0-9]*\)).*/\1/p' "$out")
  [ -n "$daemon" ] && break
  kill -0 "$run" 2>/dev/null || { echo "FAIL: tools/run exited:"; cat "$out"; exit 1; }
  sleep 0.1
done
[ -n "$daemon" ] || { echo "FAIL: tools/run did not start the daemon in 240 s:"; cat "$out"; exit 1; }
sleep 4 # the live view is running
top=$(pgrep -P "$run" -f 'ktelemetryctl.* top' || true)
[ -n "$top" ] || { echo "FAIL: no ktelemetryctl top under tools/run:"; cat "$out"; exit 1; }
echo "tools/run $run, daemon $daemon, top $top: kill -9 tools/run"
kill -9 "$run"
wait "$run" 2>/dev/null || true
for _ in $(seq 100); do
  alive "$daemon" || break
  sleep 0.1
done
if alive "$daemon"; then
  echo "FAIL: the daemon (pid $daemon) still runs 10 s after tools/run died"
  exit 1
fi
daemon=
if alive "$top"; then
  sleep 2
  if alive "$top"; then
    kill -9 "$top"
    echo "FAIL: ktelemetryctl top (pid $top) still runs after tools/run died"
    exit 1
  fi
fi
echo "ok: the daemon and the live view stopped with tools/run"
