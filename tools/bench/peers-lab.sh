#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/bench/peers-lab.sh - the peer tools as Debian ships them, unchanged,
# on the 6.1 lab kernel (qemu TCG; docs/benchmarks.md, "System overhead"):
# do bpftrace's runqlat.bt and biolatency.bt run there, and what does each of
# their programs cost per event next to ktelemetry's runq_latency and
# block_io_latency under the same workload.
#
#   tools/bench/peers-lab.sh [BUILD_DIR]
#
# The guest is tools/vm-test's: Debian's linux-image-6.1.0-*-amd64 (the
# package tools/vm-test unpacked into its cache, or downloaded the same way),
# busybox, null_blk for block requests. Added here: /usr/sbin/bpftrace with
# its libraries, Debian's linux-headers for the guest's kernel (runqlat.bt
# includes <linux/sched.h>), the shipped /usr/sbin/runqlat.bt and
# /usr/sbin/biolatency.bt copied byte for byte, bpftool and jq to read
# bpf_stats, hackbench and fio as the workload, and this build's daemon with
# the two plugins. The guest turns bpf_stats on and runs, one after the
# other: each shipped script alone, the two equivalents of
# tools/bench (runqlat-tp.bt, biolatency-tp.bt), and the daemon with the two
# plugins; each with the same workload, printing each program's runs and
# run time. Under TCG wall time means nothing; bpf_stats run time per event
# is emulated too, so compare the programs with each other within this lab,
# not with the host's figures.
#
# Needs root and ~2.5 GiB of memory for the guest (bpftrace's LLVM is ~200
# MiB and runs twice at once). Environment: KTEL_VM_CACHE (default
# /var/cache/ktelemetry-vm), KTEL_PEERS_TIMEOUT (seconds, default 2400),
# KTEL_PEERS_MEM (default 2560M). Prints the table; exits 1 when the guest
# does not finish. Never passes or fails on a figure.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
ROOT=$KTEL_ROOT
BUILD=$(realpath -m "${1:-$ROOT/build}")
CACHE=${KTEL_VM_CACHE:-/var/cache/ktelemetry-vm}
TIMEOUT=${KTEL_PEERS_TIMEOUT:-2400}
MEM=${KTEL_PEERS_MEM:-2560M}
WORK=$BUILD/peers-lab
# PEERS_REPORT_ONLY=1: print the report of the last run again.
REPORT_ONLY=${PEERS_REPORT_ONLY:-}
[ "$(id -u)" -eq 0 ] || { echo "peers-lab: needs root" >&2; exit 77; }
[ -x "$BUILD/core/ktelemetryd" ] || { echo "peers-lab: build $BUILD first" >&2; exit 2; }
RES=$WORK/results.log
if [ -z "$REPORT_ONLY" ]; then
ktel_install_packages qemu-system-x86 busybox-static cpio jq bpftrace bpftool rt-tests fio
mkdir -p "$CACHE" "$WORK"

# cached_deb PACKAGE: its .deb in the cache, downloaded when absent (as
# tools/vm-test does, so the two share the cache).
cached_deb() {
	local d
	d=$(find "$CACHE" -maxdepth 1 -name "${1}_*_amd64.deb" -o -maxdepth 1 -name "${1}_*_all.deb" |
		sort -V | tail -n1)
	if [ -z "$d" ]; then
		ktel_log "downloading $1 into $CACHE"
		(cd "$CACHE" && apt-get download -o APT::Sandbox::User=root "$1" >/dev/null)
		d=$(find "$CACHE" -maxdepth 1 -name "${1}_*_amd64.deb" -o -maxdepth 1 -name "${1}_*_all.deb" |
			sort -V | tail -n1)
	fi
	echo "$d"
}
unpack() { # PACKAGE DIR
	local deb
	deb=$(cached_deb "$1")
	if [ ! -f "$2/.extracted" ] || [ "$deb" -nt "$2/.extracted" ]; then
		rm -rf "$2"
		dpkg-deb -x "$deb" "$2"
		touch "$2/.extracted"
	fi
}
pkg=$(find "$CACHE" -maxdepth 1 -name 'linux-image-6.1.0-*-amd64_*_amd64.deb' -printf '%f\n' |
	sed 's/_.*//' | sort -V | tail -n1)
[ -n "$pkg" ] || pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' |
	awk '{ print $1 }' | sort -V | tail -n1)
[ -n "$pkg" ] || { echo "peers-lab: no linux-image-6.1.0-*-amd64 known to apt or cached" >&2; exit 1; }
KDIR=$CACHE/$pkg
unpack "$pkg" "$KDIR"
VMLINUZ=$(find "$KDIR/boot" -name 'vmlinuz-*' | head -n1)
MODDIR=$(find "$KDIR/lib/modules" -mindepth 1 -maxdepth 1 -type d | head -n1)
KVER=${MODDIR##*/}
# linux-headers-<KVER> points into linux-headers-<version>-common.
HDIR=$CACHE/headers-$KVER
unpack "linux-headers-$KVER" "$HDIR"
unpack "linux-headers-${KVER%-amd64}-common" "$HDIR-common"

# ---- initramfs --------------------------------------------------------------
R=$WORK/rootfs
rm -rf "$R"
mkdir -p "$R"/{bin,sbin,proc,sys,dev,tmp,run,etc,usr/bin,usr/sbin,usr/src,peers/plugins} \
	"$R/lib/modules/$KVER"
cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list-full); do
	case $a in */*) d=${a%/*} ;; *) d=. ;; esac
	[ -e "$R/$a" ] || { mkdir -p "$R/$d"; ln -s /bin/busybox "$R/$a"; }
done
bins=(/usr/bin/bpftrace "$(command -v bpftool)" "$(command -v jq)" "$(command -v hackbench)"
	"$(command -v fio)" "$BUILD/core/ktelemetryd")
for b in "${bins[@]}"; do
	case $b in "$BUILD"/*) cp "$b" "$R/usr/sbin/" ;; *) rm -f "$R$b"; mkdir -p "$R${b%/*}"; cp "$b" "$R$b" ;; esac
done
for f in "${bins[@]}" "$BUILD"/lib/ktelemetry/plugins/{runq_latency,block_io_latency}.so; do
	ldd "$f" | awk '/=> \// { print $3 } /^\t\/[^ ]* \(/ { print $1 }'
done | sort -u | while read -r lib; do
	mkdir -p "$R/$(dirname "$lib")"
	cp -L "$lib" "$R/$lib"
done
cp "$BUILD"/lib/ktelemetry/plugins/{runq_latency,block_io_latency}.so "$R/peers/plugins/"
# The shipped scripts, byte for byte, and the equivalents system.sh runs.
cp /usr/sbin/runqlat.bt /usr/sbin/biolatency.bt "$R/peers/"
cp "$ROOT"/tools/bench/runqlat-tp.bt "$ROOT"/tools/bench/biolatency-tp.bt "$R/peers/"
sha256sum /usr/sbin/runqlat.bt /usr/sbin/biolatency.bt >"$WORK/shipped.sha256"
# Kernel headers where bpftrace looks for them, linked as Debian's
# linux-headers packages link them: build is the configured tree, source the
# common one.
cp -a "$HDIR/usr/src/." "$HDIR-common/usr/src/." "$R/usr/src/"
ln -s "/usr/src/linux-headers-$KVER" "$R/lib/modules/$KVER/build"
ln -s "/usr/src/linux-headers-${KVER%-amd64}-common" "$R/lib/modules/$KVER/source"
# null_blk and what it needs, dependencies first.
declare -A ko_path=() ko_done=()
while read -r f; do
	n=${f##*/}; n=${n%%.ko*}; ko_path[${n//-/_}]=$f
done < <(find "$MODDIR/kernel" -name '*.ko*')
: >"$R/lib/modules/order"
add_module() {
	local n=${1//-/_} dep deps
	[ -z "${ko_done[$n]:-}" ] || return 0
	ko_done[$n]=1
	deps=$(strings -a "${ko_path[$n]}" | sed -n 's/^depends=//p' | head -n1)
	for dep in ${deps//,/ }; do add_module "$dep"; done
	case ${ko_path[$n]} in
	*.ko) cp "${ko_path[$n]}" "$R/lib/modules/$n.ko" ;;
	*.ko.xz) xz -dc "${ko_path[$n]}" >"$R/lib/modules/$n.ko" ;;
	esac
	echo "$n.ko" >>"$R/lib/modules/order"
}
add_module null_blk

cat >"$R/peers/config.json" <<'EOF'
{
  "plugin_dirs": ["/peers/plugins"],
  "pin_root": "/sys/fs/bpf/ktel",
  "state_file": "/tmp/ktel/state.bin",
  "control_socket": "/tmp/ktel/control.sock",
  "interval": "1h",
  "sinks": { "out": { "type": "json", "path": "/tmp/ktel/records.jsonl" } }
}
EOF
cat >"$R/init" <<'EOF'
#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/tmp
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp; mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug; mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
ulimit -l unlimited
for m in $(cat /lib/modules/order); do insmod /lib/modules/$m; done
echo 1 >/proc/sys/kernel/bpf_stats_enabled
# null_blk comes up with I/O accounting off; a disk has it on, and
# biolatency.bt's kprobes are on the accounting functions.
IOSTATS=$(cat /sys/block/nullb0/queue/iostats)
echo 1 >/sys/block/nullb0/queue/iostats
OUT=/dev/ttyS1
say() { echo "$*" >$OUT; }
say "PEERS-BOOT $(uname -r) bpftrace $(bpftrace --version 2>&1) nullb0 iostats $IOSTATS -> $(cat /sys/block/nullb0/queue/iostats)"
workload() {
	hackbench -g 2 -l 100 >/dev/null 2>&1
	fio --name=r --filename=/dev/nullb0 --direct=1 --rw=randread --bs=4k --ioengine=psync \
		--size=64M --io_size=8M --randrepeat=1 --norandommap --output=/dev/null
}
stats() { bpftool prog show -j | jq -r '.[] | [.id, .name // "?", .run_time_ns // 0, .run_cnt // 0] | @tsv'; }
# run NAME READY_PATTERN CMD...: start CMD, wait for READY_PATTERN in its
# output, run the workload, report every program that appeared.
run() {
	name=$1 ready=$2; shift 2
	stats >/tmp/s0
	"$@" >/tmp/$name.log 2>&1 &
	pid=$!
	i=0
	while ! grep -q "$ready" /tmp/$name.log; do
		if ! kill -0 $pid 2>/dev/null || [ $i -gt 1800 ]; then
			say "PEERS-TOOL $name status=fails reason=$(grep -m1 -iE 'error|could not|cannot|fail' /tmp/$name.log || tail -n1 /tmp/$name.log)"
			kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null
			return
		fi
		i=$((i + 1)); sleep 1
	done
	say "PEERS-TOOL $name status=runs ready_after=${i}s"
	for r in 1 2 3; do
		stats >/tmp/s1
		workload
		stats >/tmp/s2
		awk -F'\t' -v n="$name" -v r=$r 'FILENAME == ARGV[1] { old[$1] = 1; next }
			FILENAME == ARGV[2] { if (!($1 in old)) { ns[$1] = $3; c[$1] = $4; nm[$1] = $2 }; next }
			($1 in ns) { printf "PEERS-PROG %s %s %s %d %d\n", n, r, nm[$1], $3 - ns[$1], $4 - c[$1] }' \
			/tmp/s0 /tmp/s1 /tmp/s2 >$OUT
	done
	kill -INT $pid; wait $pid 2>/dev/null
}
run runqlat.bt 'Hit Ctrl-C' bpftrace /peers/runqlat.bt
run biolatency.bt 'Hit Ctrl-C' bpftrace /peers/biolatency.bt
run runqlat-tp.bt 'Hit Ctrl-C' bpftrace /peers/runqlat-tp.bt
run biolatency-tp.bt 'Hit Ctrl-C' bpftrace /peers/biolatency-tp.bt
mkdir -p /tmp/ktel
run ktelemetry 'running with' ktelemetryd --config /peers/config.json
say "PEERS-SHA $(sha256sum /peers/runqlat.bt /peers/biolatency.bt | tr '\n' ' ')"
say PEERS-DONE
poweroff -f
EOF
chmod -R go-w "$R"
chmod 0755 "$R/init"
ktel_log "peers-lab: packing the initramfs ($(du -sh "$R" | cut -f1))"
(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$WORK/initramfs.gz"

# ---- boot -------------------------------------------------------------------
rm -f "$RES" "$WORK/console.log"
ktel_log "peers-lab: booting Linux $KVER under qemu TCG ($MEM), up to ${TIMEOUT}s"
rc=0
timeout "$TIMEOUT" qemu-system-x86_64 -accel tcg -m "$MEM" -smp 1 -nodefaults -no-user-config \
	-display none -no-reboot -kernel "$VMLINUZ" -initrd "$WORK/initramfs.gz" \
	-append "console=ttyS0 panic=-1 loglevel=4 rdinit=/init" \
	-serial "file:$WORK/console.log" -serial "file:$RES" >"$WORK/qemu.out" 2>&1 || rc=$?
tr -d '\r' <"$RES" >"$RES.txt" 2>/dev/null || : >"$RES.txt"
if ! grep -q PEERS-DONE "$RES.txt"; then
	echo "peers-lab: the guest did not finish (qemu status $rc); last console lines:" >&2
	tail -n 20 "$WORK/console.log" >&2
	grep PEERS "$RES.txt" >&2 || true
	exit 1
fi
fi

# ---- report -----------------------------------------------------------------
echo "# tools/bench/peers-lab.sh, $(date -u +%FT%TZ), guest Linux $(sed -n "s/^PEERS-BOOT \([^ ]*\).*/\1/p" "$RES.txt") (qemu TCG, $MEM, 1 CPU), host $(uname -r)"
grep '^PEERS-BOOT' "$RES.txt"
echo "# shipped scripts on the host: $(awk '{ printf "%s %s ", $2, substr($1, 1, 16) }' "$WORK/shipped.sha256")"
echo "# in the guest:                $(sed -n 's/^PEERS-SHA //p' "$RES.txt" | awk '{ for (i = 1; i < NF; i += 2) printf "%s %s ", $(i + 1), substr($i, 1, 16) }')"
echo
echo "Per program, for each of the 3 workload runs: runs, and ns per run (bpf_stats"
echo "run time / runs). Under TCG on a busy host the guest's clock jumps with the"
echo "host's preemptions and can step back between CPUs' reads: ns/run is noise"
echo "(negative when the sum wrapped); the runs are exact."
echo
echo "| tool | runs unchanged | program | runs per workload run | ns/run, runs 1 / 2 / 3 |"
echo "|---|---|---|---:|---:|"
grep '^PEERS-TOOL' "$RES.txt" | while read -r _ name st rest; do
	st=${st#status=}
	if [ "$st" != runs ]; then
		echo "| $name | no: ${rest#reason=} | | | |"
		continue
	fi
	grep "^PEERS-PROG $name " "$RES.txt" | awk -v t="$name" '
		# One script can load programs of one name (biolatency.bt: four
		# kprobes): the n-th of a name in a run is one program.
		{ k = $4 "#" (++dup[$3 SUBSEP $4]); if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		  cnt[k] = cnt[k] " " $6; per[k] = per[k] ($6 > 0 ? sprintf(" %.0f", $5 / $6) : " -") }
		END { for (i = 1; i <= n; i++) { k = order[i]
			name = k; sub(/#1$/, "", name)
			printf "| %s | yes | %s |%s |%s |\n", t, name, cnt[k], per[k] } }'
done
