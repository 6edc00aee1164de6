#!/usr/bin/env bash
# tools/run killed with kill -9 (or its terminal closed): the daemon it
# started and its live view stop too, instead of running on unseen.
# Usage: tools_run_parent_killed.sh SOURCE_DIR. Needs root (77 otherwise).
set -euo pipefail
src=$1
[ "$(id -u)" -eq 0 ] || { echo "needs root: skipped"; exit 77; }
out=$(mktemp)
daemon=
cleanup() {
  [ -z "$daemon" ] || kill -9 "$daemon" 2>/dev/null || true
  rm -f "$out"
}
trap cleanup EXIT

setsid bash "$src/tools/run" >"$out" 2>&1 </dev/null &
run=$!
for _ in $(seq 600); do
  daemon=$(sed -n 's/^ktelemetryd is running (pid \([0-9]*\)).*/\1/p' "$out")
  [ -n "$daemon" ] && break
  kill -0 "$run" 2>/dev/null || { echo "FAIL: tools/run exited:"; cat "$out"; exit 1; }
  sleep 0.1
done
[ -n "$daemon" ] || { echo "FAIL: tools/run did not start the daemon in 60 s:"; cat "$out"; exit 1; }
sleep 4 # the live view is running
top=$(pgrep -P "$run" -f 'ktelemetryctl.* top' || true)
echo "tools/run $run, daemon $daemon, top ${top:-?}: kill -9 tools/run"
kill -9 "$run"
wait "$run" 2>/dev/null || true
for _ in $(seq 100); do
  kill -0 "$daemon" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$daemon" 2>/dev/null; then
  echo "FAIL: the daemon (pid $daemon) still runs 10 s after tools/run died"
  exit 1
fi
daemon=
if [ -n "$top" ] && kill -0 "$top" 2>/dev/null; then
  sleep 2
  if kill -0 "$top" 2>/dev/null; then
    kill -9 "$top"
    echo "FAIL: ktelemetryctl top (pid $top) still runs after tools/run died"
    exit 1
  fi
fi
echo "ok: the daemon and the live view stopped with tools/run"
