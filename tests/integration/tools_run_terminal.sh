#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/run in a real terminal (tmux) at 80x24 and at 200x50: the live view
# fits the screen (its header is still the first line, no line wider than
# the terminal), says the daemon's pull interval, and Ctrl-C ends it with
# exit 0, the daemon's final pull done and no warning on the terminal or in
# the daemon's log.
# Usage: tools_run_terminal.sh SOURCE_DIR. Needs root and tmux (77 otherwise).
set -euo pipefail
src=$(cd "$1" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "needs root: skipped"; exit 77; }
command -v tmux >/dev/null || { echo "needs tmux (tools/lib.sh installs it): skipped"; exit 77; }
work=$(mktemp -d)
server=ktel-test-$$
tm() { tmux -L "$server" "$@"; }

# The daemons tools/run of this checkout started: ktelemetryd processes
# whose working directory is the checkout (other checkouts may run theirs).
our_daemons() {
  local p
  for p in $(pgrep -x ktelemetryd || true); do
    [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$src" ] && echo "$p"
  done
  return 0
}
cleanup() {
  local p
  # A closed terminal: tools/run stops its daemon on SIGHUP; whatever is
  # left after that is killed, so no daemon outlives the test.
  tm kill-server 2>/dev/null || true
  sleep 1
  for p in $(our_daemons); do kill -TERM "$p" 2>/dev/null || true; done
  sleep 2
  for p in $(our_daemons); do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

if [ -n "$(our_daemons)" ]; then
  echo "FAIL: a ktelemetryd of this checkout already runs (tools/run?): $(our_daemons)"
  exit 1
fi

fail() {
  echo "FAIL ($1x$2): $3"
  echo "--- the terminal:"
  tm capture-pane -p -J -S - -t run 2>/dev/null || true
  exit 1
}

# Wait (up to $3 s) until the pane or what scrolled off it shows a line
# matching the regex $4.
wait_for() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    tm capture-pane -p -J -S - -t run | grep -qE "$4" && return 0
    sleep 0.1
  done
  fail "$1" "$2" "no line matching '$4' after $3 s"
}

run_at() {
  local cols=$1 rows=$2 rc_file=$work/rc-$1 log=$src/build-run/var/ktelemetryd.log
  local log_lines=0 screen line n
  [ -f "$log" ] && log_lines=$(wc -l <"$log")
  rm -f "$rc_file"
  tm new-session -d -s run -x "$cols" -y "$rows" \
    "bash '$src/tools/run'; echo \$? >'$rc_file'; exec sleep 600"
  # tools/run builds its tree first when tools/test has not.
  wait_for "$cols" "$rows" 600 '^ktelemetry +[0-9:]+ '
  # The view has drawn (and replaced) a screen or two by now.
  sleep 3
  screen=$(tm capture-pane -p -J -t run)
  # The whole view is on the screen: its first line is still the header
  # (a view taller than the terminal scrolls it away).
  line=$(head -n 1 <<<"$screen")
  [[ $line =~ ^ktelemetry\ [0-9:]+\ \ last\ pull\ [0-9]+s\ ago,\ pulls\ every\ 10s ]] ||
    fail "$cols" "$rows" "the first line is not the header with the pull interval: '$line'"
  [ "$(sed -n 2p <<<"$screen" | cut -c1-11)" = "METRIC[KEY]" ] ||
    fail "$cols" "$rows" "the second line is not the table's head"
  n=$(grep -c '' <<<"$screen")
  [ "$n" -le "$rows" ] || fail "$cols" "$rows" "$n lines on $rows rows"
  # -J joins what the terminal wrapped: a line wider than it shows here.
  while IFS= read -r line; do
    line=${line%"${line##*[! ]}"}
    [ "${#line}" -le "$cols" ] || fail "$cols" "$rows" "a line of ${#line} columns: '$line'"
  done <<<"$screen"
  grep -qE '^runq_latency' <<<"$screen" || fail "$cols" "$rows" "no runq_latency row"
  echo "ok ${cols}x${rows}: the view fits:"
  echo "$screen"

  # --clean refuses while the daemon runs, and leaves its pins alone.
  if bash "$src/tools/run" --clean >"$work/clean.out" 2>&1; then
    fail "$cols" "$rows" "tools/run --clean ran while the daemon runs: $(cat "$work/clean.out")"
  fi
  [ -d /sys/fs/bpf/kernelstats ] || fail "$cols" "$rows" "the pins went while the daemon runs"

  tm send-keys -t run C-c
  for _ in $(seq 300); do
    [ -s "$rc_file" ] && break
    sleep 0.1
  done
  [ -s "$rc_file" ] || fail "$cols" "$rows" "tools/run still runs 30 s after Ctrl-C"
  [ "$(cat "$rc_file")" = 0 ] || fail "$cols" "$rows" "tools/run exited $(cat "$rc_file") after Ctrl-C"
  screen=$(tm capture-pane -p -J -S - -t run)
  if grep -iE 'warn|again|error|terminated|killed|fail' <<<"$screen"; then
    fail "$cols" "$rows" "warning text on the terminal after Ctrl-C"
  fi
  grep -q 'stopped after a final pull' <<<"$screen" ||
    fail "$cols" "$rows" "tools/run did not say the daemon stopped"
  # From the stop on: one signal, one final pull, no warning (a second
  # signal during the flush is one: "... again: still flushing").
  tail -n +"$((log_lines + 1))" "$log" | sed -n '/final pull/,$p' >"$work/stop.log"
  [ -s "$work/stop.log" ] || fail "$cols" "$rows" "the daemon's log has no final pull"
  if grep -E 'ktelemetryd (warn|error):' "$work/stop.log"; then
    fail "$cols" "$rows" "the daemon logged a warning or an error while it stopped"
  fi
  [ -z "$(our_daemons)" ] || fail "$cols" "$rows" "a daemon still runs after tools/run exited"
  echo "ok ${cols}x${rows}: Ctrl-C: exit 0, final pull, no warning"
  tm kill-session -t run
}

run_at 80 24
run_at 200 50

# --clean once stopped: the pins and build-run/var are gone. Only when no
# other tools/run (of another checkout, on the same pin root) is running.
others=$(pgrep -f 'ktelemetryd --config config/default.json' || true)
if [ -z "$others" ]; then
  bash "$src/tools/run" --clean || { echo "FAIL: tools/run --clean exited $?"; exit 1; }
  [ ! -e /sys/fs/bpf/kernelstats ] || { echo "FAIL: --clean left /sys/fs/bpf/kernelstats"; exit 1; }
  [ ! -e "$src/build-run/var" ] || { echo "FAIL: --clean left build-run/var"; exit 1; }
  echo "ok: tools/run --clean removed the pins and build-run/var"
else
  echo "another tools/run is running ($others): --clean not tried"
fi
echo "ok: tools/run fits 80x24 and 200x50 and stops cleanly on Ctrl-C"
