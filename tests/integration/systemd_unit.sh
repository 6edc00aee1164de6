#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# The shipped unit under a real systemd as PID 1: systemd-nspawn boots this
# machine's systemd (252 on Debian 12) in a container whose root is a tmpfs
# with the host's /usr (--volatile=yes), the build tree and /sys/fs/bpf bound
# in (nspawn's own system call filter lets bpf() and perf_event_open through
# only when told). Inside, the unit exactly as built (config/verify/ktelemetryd.service,
# ExecStart pointing at the build tree), with the config picked through
# /etc/default/ktelemetryd as an operator would:
#
#   - the sandbox works: the daemon starts under the system call filter,
#     ProtectProc=invisible, PrivateMounts, the capability bounding set and
#     the loopback-only IP rule (a Prometheus sink on a non-loopback
#     address of the container's own network namespace is not reachable);
#     loads its plugins, drops its privileges,
#     pulls, writes its JSON file in LogsDirectory, answers ktelemetryctl on
#     /run/ktelemetry and serves Prometheus on 127.0.0.1;
#   - a crash loop stops: a copy of the unit whose ExecStart fails reaches
#     the start limit (5 starts in 5 minutes, RestartSec=5s: about 25 s)
#     and stays failed ("Start request repeated too quickly").
#
# Usage: systemd_unit.sh BUILD_DIR SOURCE_DIR. Root only; skips (77) without
# systemd-nspawn (Debian package systemd-container, in tools/lib.sh's list).
set -euo pipefail

build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)

if [ "$(id -u)" != 0 ]; then
  echo "systemd_unit: needs root (systemd-nspawn)" >&2
  exit 77
fi
if ! command -v systemd-nspawn >/dev/null; then
  echo "systemd_unit: no systemd-nspawn (apt-get install systemd-container)" >&2
  exit 77
fi
unit=$build/config/verify/ktelemetryd.service
[ -f "$unit" ] || { echo "systemd_unit: $unit missing (no systemd-analyze at configure?)" >&2; exit 77; }

work=$build/test-tmp/systemd-unit-$$
pins=/sys/fs/bpf/ktel-systemd-unit-$$
# Inside the container the trees are bound at paths of their own: the
# unit's PrivateTmp= and ProtectHome= hide /tmp, /var/tmp, /home and /root
# from the daemon, and a checkout may live in any of them.
cb=/opt/ktel/build
cw=/opt/ktel/work
cs=/opt/ktel/src
mkdir -p "$work/units" "$work/results"
cleanup() {
  rm -rf "$work" "$pins"
}
trap cleanup EXIT

# A free loopback port for the Prometheus sink.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

cat >"$work/ktelemetry.json" <<EOF
{"plugin_dirs": ["$cb/lib/ktelemetry/plugins"],
 "pin_root": "$pins",
 "state_file": "/var/lib/ktelemetry/state.json",
 "control_socket": "/run/ktelemetry/control.sock",
 "interval": "1s",
 "drop_privileges": true,
 "sinks": {"file": {"type": "json", "path": "/var/log/ktelemetry/out.jsonl"},
           "prom": {"type": "prometheus", "port": $port},
           "far": {"type": "prometheus", "listen": "192.0.2.1", "port": $port}}}
EOF
echo "KTEL_CONFIG=$cw/ktelemetry.json" >"$work/default"

sed -e "s|$build|$cb|g" -e "s|$src|$cs|g" "$unit" >"$work/units/ktelemetryd.service"
# The same unit with a daemon that fails at once (exit 1: restarted, unlike a
# bad config's 2), and directories of its own: systemd removes a unit's
# RuntimeDirectory when it stops, which would take the control socket's
# directory from under the real one.
sed -e 's|^ExecStart=.*|ExecStart=/bin/false|' \
  -e 's#^\(RuntimeDirectory\|StateDirectory\|LogsDirectory\)=ktelemetry$#\1=ktelemetry-crash#' \
  "$work/units/ktelemetryd.service" >"$work/units/ktelemetryd-crash.service"
ln -s /dev/null "$work/units/systemd-firstboot.service"

cat >"$work/units/ktel-probe.target" <<'EOF'
[Unit]
Description=ktelemetry unit probe
Wants=ktel-addr.service ktelemetryd.service ktelemetryd-crash.service ktel-check.service
EOF
# The container has a network namespace of its own (--private-network); an
# address that is not loopback on its lo lets the test see the IP rule: the
# daemon's "far" Prometheus sink listens there and must not be reachable.
cat >"$work/units/ktel-addr.service" <<'EOF'
[Unit]
Description=ktelemetry unit probe: a non-loopback address
Before=ktelemetryd.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/sbin/ip link set lo up
ExecStart=/sbin/ip addr add 192.0.2.1/32 dev lo
EOF
cat >"$work/units/ktel-check.service" <<EOF
[Unit]
Description=ktelemetry unit probe: collect what happened
After=ktelemetryd.service
[Service]
Type=oneshot
ExecStart=/bin/sh $cw/check.sh
StandardOutput=journal+console
EOF

# Runs inside the container: wait for what the unit should do, write the
# evidence into $work/results, power off.
cat >"$work/check.sh" <<EOF
#!/bin/sh
r=$cw/results
ctl="$cb/tools/ktelemetryctl --socket /run/ktelemetry/control.sock"
for i in \$(seq 1 120); do
  grep -q '"metric":"runq_latency"' /var/log/ktelemetry/out.jsonl 2>/dev/null && break
  sleep 0.5
done
cp /var/log/ktelemetry/out.jsonl \$r/out.jsonl 2>/dev/null
\$ctl --json status >\$r/status.json 2>&1
curl -s -m 5 http://127.0.0.1:$port/metrics >\$r/metrics.txt 2>&1
curl -sS -m 3 http://192.0.2.1:$port/metrics >\$r/far.txt 2>&1
echo "exit \$?" >>\$r/far.txt
pid=\$(systemctl show -P MainPID ktelemetryd)
grep -E '^(CapEff|CapBnd|Seccomp|NoNewPrivs):' /proc/\$pid/status >\$r/main.proc 2>&1
systemctl show -p ActiveState -p SubState -p NRestarts ktelemetryd >\$r/main.show
for i in \$(seq 1 120); do
  [ "\$(systemctl show -P ActiveState ktelemetryd-crash)" = failed ] && break
  sleep 1
done
# Still failed a while later: nothing restarts it.
sleep 7
systemctl show -p ActiveState -p Result -p NRestarts ktelemetryd-crash >\$r/crash.show
systemctl status --no-pager ktelemetryd-crash >\$r/crash.status 2>&1
journalctl --no-pager -u ktelemetryd >\$r/main.journal 2>&1
journalctl --no-pager -u ktelemetryd-crash >\$r/crash.journal 2>&1
systemctl poweroff --no-block
EOF

rc=0
timeout 240 systemd-nspawn -q --register=no --keep-unit --volatile=yes -D / --console=pipe \
  --private-network --capability=all --system-call-filter='bpf perf_event_open' --bind=/sys/fs/bpf --bind-ro="$work/units:/etc/systemd/system" \
  --bind-ro="$work/default:/etc/default/ktelemetryd" --bind-ro="$build:$cb" --bind="$work:$cw" \
  --bind-ro="$src:$cs" -b -- systemd.unit=ktel-probe.target >"$work/boot.log" 2>&1 || rc=$?
r=$work/results

fail() {
  echo "systemd_unit: $*" >&2
  for f in "$r"/*; do
    echo "==== $(basename "$f")" >&2
    if [ "$(basename "$f")" = main.journal ]; then
      grep -vE 'ktelemetryd info: (plugin|metric) ' "$f" | head -n 60 >&2
    else
      tail -n 40 "$f" >&2
    fi
  done
  echo "==== boot.log" >&2
  tail -n 40 "$work/boot.log" >&2
  exit 1
}

[ "$rc" = 0 ] || fail "the container did not power off by itself (exit $rc)"
[ -f "$r/crash.show" ] || fail "the check inside the container did not finish"

# The sandboxed daemon ran: collecting, answering, serving, dropped.
grep -qx 'ActiveState=active' "$r/main.show" || fail "ktelemetryd is not active"
grep -qx 'NRestarts=0' "$r/main.show" || fail "ktelemetryd restarted"
grep -q '"metric":"runq_latency"' "$r/out.jsonl" || fail "no runq_latency record in the JSON file"
jq -e '.plugins | length > 0' "$r/status.json" >/dev/null 2>&1 ||
  jq -e '.metrics | length > 0' "$r/status.json" >/dev/null || fail "status lists no metric"
grep -q '^ktel_runq_latency' "$r/metrics.txt" || fail "Prometheus did not serve runq_latency"
grep -q 'sink far (prometheus): http://192.0.2.1' "$r/main.journal" || fail "the far sink did not open"
grep -qE '^exit (7|28)$' "$r/far.txt" || fail "the sink on a non-loopback address was reachable"
grep -q 'drop_privileges: every thread now holds only' "$r/main.journal" ||
  fail "the journal does not say privileges were dropped"
grep -q '^Seccomp:[[:space:]]*2' "$r/main.proc" || fail "no seccomp filter on the daemon"
grep -q '^NoNewPrivs:[[:space:]]*1' "$r/main.proc" || fail "NoNewPrivileges not set"
# What the sandbox and the drop leave the daemon is what it needs: every
# plugin loads or is refused exactly as with full root outside any sandbox
# (this kernel lacks some tracepoints and kprobes).
outcome() {
  grep -oE 'plugin [a-z_0-9]+: (unsupported|load failed)' | sort -u
}
cat >"$work/host.json" <<EOF
{"plugin_dirs": ["$build/lib/ktelemetry/plugins"], "pin_root": "$pins-host",
 "state_file": "$work/host-state.json", "control_socket": "$work/host.sock",
 "sinks": {"file": {"type": "json", "path": "$work/host.jsonl"}}}
EOF
"$build/core/ktelemetryd" --config "$work/host.json" --once 1 >"$work/host.log" 2>&1 || true
rm -rf "$pins-host"
if [ "$(outcome <"$r/main.journal")" != "$(outcome <"$work/host.log")" ]; then
  echo "under the unit:" >&2
  outcome <"$r/main.journal" >&2
  echo "as root outside:" >&2
  outcome <"$work/host.log" >&2
  fail "plugins fare differently under the unit than as root outside it"
fi
if grep -qiE 'Bad system call|Read-only file system|Permission denied' "$r/main.journal"; then
  fail "the sandbox refused something the daemon does"
fi

# The crash loop stopped at the start limit and stayed down.
grep -qx 'ActiveState=failed' "$r/crash.show" || fail "the failing unit is not failed"
grep -qx 'NRestarts=5' "$r/crash.show" || fail "the failing unit was not restarted 5 times"
grep -q 'Start request repeated too quickly' "$r/crash.journal" ||
  fail "the journal does not say the start limit was hit"
grep -q 'Start request repeated too quickly' "$r/crash.status" ||
  fail "systemctl status does not show that the start limit was hit"
starts=$(grep -c 'Main process exited' "$r/crash.journal" || true)
[ "$starts" = 5 ] || fail "the failing unit ran $starts times, not 5"

echo "systemd_unit: the hardened unit runs the daemon under systemd $(systemctl --version | head -n1 | cut -d' ' -f2); a failing one stops after $starts starts"
