#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/bench/peers-lab.sh - the peer tools as Debian ships them, unchanged,
# on the 6.1 lab kernel (qemu TCG; docs/benchmarks.md, "System overhead"):
# do bpftrace's runqlat.bt and biolatency.bt and bcc's runqlat-bpfcc and
# biolatency-bpfcc run there, what does each attach, and what does each of
# their programs cost per event next to ktelemetry's runq_latency and
# block_io_latency under the same workload.
#
#   tools/bench/peers-lab.sh [BUILD_DIR]
#
# The guest is tools/vm-test's: Debian's linux-image-6.1.0-*-amd64 (the
# package tools/vm-test unpacked into its cache, or downloaded the same way),
# busybox, null_blk for block requests. Added here: /usr/sbin/bpftrace with
# its libraries, Debian's linux-headers for the guest's kernel (runqlat.bt
# includes <linux/sched.h>; bcc compiles against them), the shipped
# /usr/sbin/runqlat.bt and /usr/sbin/biolatency.bt copied byte for byte,
# bpftool and jq to read bpf_stats, hackbench and fio as the workload, and
# this build's daemon with the two plugins.
#
# bcc is not copied: python3, python3-bpfcc and libbpfcc with its LLVM would
# make the initramfs ~600 MB. The guest mounts the host's own root
# filesystem instead, read-only over virtio-9p, under a tmpfs overlay (so
# that /lib/modules/<guest kernel>/build and source can point at the
# headers, as Debian's linux-headers packages make them), and runs the
# host's /usr/sbin/runqlat-bpfcc and /usr/sbin/biolatency-bpfcc unchanged in
# a chroot with the guest's own /proc, /sys, /dev, /tmp, tracefs, debugfs and
# bpffs. PYTHONUNBUFFERED=1 lets their "Hit Ctrl-C" line through a pipe as
# it is printed; a tool counts as started when that line is out and its
# programs are attached (bpftool perf and bpftool link), never after a fixed
# sleep.
#
# The guest turns bpf_stats on and runs, one after the other: each shipped
# tool alone, the two bpftrace equivalents of tools/bench (runqlat-tp.bt,
# biolatency-tp.bt), and the daemon with the two plugins; each with the same
# workload KTEL_PEERS_RUNS times, printing each program's attach point, runs
# and run time. tools/bench/peers-report turns that into the table and the
# ratios of program time per event, ktelemetry against each peer.
#
# Time in the guest: qemu runs with -icount shift=0 (KTEL_PEERS_ICOUNT), so
# the guest's clock, and with it bpf_stats' run time, advances by 1 ns per
# guest instruction executed, whatever the host's load: ns per run is the
# number of guest instructions a program run takes (with the clock reads
# around it), the same on every run of the same path. That is a count of
# work, not a cost on real hardware: cache misses, atomics and branch
# mispredictions cost one instruction each here. KTEL_PEERS_ICOUNT=off runs
# TCG on the host's clock, where ns/run is noise.
#
# Needs root, ~2.5 GiB of memory for the guest (bpftrace's LLVM is ~200 MiB
# and runs twice at once; bcc's compile in the guest ~400 MiB) and the
# packages it installs when missing (qemu, busybox, bpftrace, bpfcc-tools,
# python3-bpfcc, bpftool, jq, rt-tests, fio). Environment: KTEL_VM_CACHE
# (default /var/cache/ktelemetry-vm), KTEL_PEERS_TIMEOUT (seconds, default
# 5400), KTEL_PEERS_MEM (default 2560M), KTEL_PEERS_WORK (its initramfs and
# results, default BUILD_DIR/peers-lab), KTEL_PEERS_RUNS (workload runs per
# tool, default 5), KTEL_PEERS_TOOLS (which, in order; default
# "runqlat.bt biolatency.bt runqlat-tp.bt biolatency-tp.bt runqlat-bpfcc
# biolatency-bpfcc ktelemetry"), KTEL_PEERS_ICOUNT (qemu -icount options,
# default shift=0,sleep=off; "off" for none). Prints the table; exits 1 when
# the guest does not finish, 3 when a bcc tool asked for did not start,
# attach or run (with the reason). Never passes or fails on a figure.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
ROOT=$KTEL_ROOT
BUILD=$(realpath -m "${1:-$ROOT/build}")
CACHE=${KTEL_VM_CACHE:-/var/cache/ktelemetry-vm}
TIMEOUT=${KTEL_PEERS_TIMEOUT:-5400}
MEM=${KTEL_PEERS_MEM:-2560M}
RUNS=${KTEL_PEERS_RUNS:-5}
TOOLS=${KTEL_PEERS_TOOLS:-runqlat.bt biolatency.bt runqlat-tp.bt biolatency-tp.bt runqlat-bpfcc biolatency-bpfcc ktelemetry}
ICOUNT=${KTEL_PEERS_ICOUNT:-shift=0,sleep=off}
WORK=$(realpath -m "${KTEL_PEERS_WORK:-$BUILD/peers-lab}")
# PEERS_REPORT_ONLY=1: print the report of the last run again.
REPORT_ONLY=${PEERS_REPORT_ONLY:-}
RES=$WORK/results.log
if [ -z "$REPORT_ONLY" ]; then
[ "$(id -u)" -eq 0 ] || { echo "peers-lab: needs root" >&2; exit 77; }
[ -x "$BUILD/core/ktelemetryd" ] || { echo "peers-lab: build $BUILD first" >&2; exit 2; }
case $RUNS in '' | *[!0-9]* | 0) echo "peers-lab: KTEL_PEERS_RUNS must be a positive number" >&2; exit 2 ;; esac
ktel_install_packages qemu-system-x86 busybox-static cpio jq bpftrace bpftool rt-tests fio \
	bpfcc-tools python3-bpfcc
for t in runqlat-bpfcc biolatency-bpfcc; do
	[ -x "/usr/sbin/$t" ] || { echo "peers-lab: /usr/sbin/$t missing after installing bpfcc-tools" >&2; exit 2; }
done
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
sha256sum /usr/sbin/runqlat.bt /usr/sbin/biolatency.bt /usr/sbin/runqlat-bpfcc \
	/usr/sbin/biolatency-bpfcc >"$WORK/shipped.sha256"
printf 'KVER=%s\nRUNS=%s\nTOOLS="%s"\n' "$KVER" "$RUNS" "$TOOLS" >"$R/peers/env"
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
# The host's root over virtio-9p and the overlay that makes it writable.
for m in virtio_pci 9pnet_virtio 9p overlay; do add_module $m; done

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
. /peers/env
echo 1 >/proc/sys/kernel/bpf_stats_enabled
# null_blk comes up with I/O accounting off; a disk has it on, and
# biolatency.bt's kprobes are on the accounting functions.
IOSTATS=$(cat /sys/block/nullb0/queue/iostats)
echo 1 >/sys/block/nullb0/queue/iostats
OUT=/dev/ttyS1
say() { echo "$*" >$OUT; }
say "PEERS-BOOT $(uname -r) bpftrace $(bpftrace --version 2>&1) nullb0 iostats $IOSTATS -> $(cat /sys/block/nullb0/queue/iostats) clock $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
workload() {
	hackbench -g 2 -l 100 >/dev/null 2>&1
	fio --name=r --filename=/dev/nullb0 --direct=1 --rw=randread --bs=4k --ioengine=psync \
		--size=64M --io_size=8M --randrepeat=1 --norandommap --output=/dev/null
}
up() { cut -d. -f1 /proc/uptime; }
stats() { bpftool prog show -j | jq -r '.[] | [.id, .name // "?", .run_time_ns // 0, .run_cnt // 0] | @tsv'; }
# attached: "prog_id<TAB>what it is attached to" for every program attached
# through a perf event (kprobe, tracepoint, raw tracepoint) or a link; the
# first form found names a program attached both ways.
attached() {
	{
		bpftool perf -j 2>/dev/null | jq -r '.[] | [.prog_id,
			(.fd_type + ":" + ((.func // .tracepoint // "?") | tostring))] | @tsv'
		bpftool link -j 2>/dev/null | jq -r '.[] | [.prog_id,
			("link:" + (.type | tostring) + (if .tp_name then ":" + .tp_name else "" end))] | @tsv'
	} | awk -F'\t' '!seen[$1]++'
}
# The host's root for bcc: read-only over virtio-9p, a tmpfs overlay on
# top, the guest's own kernel file systems in it, and the guest kernel's
# headers where Debian's linux-headers package puts them.
BCC_ROOT=
bcc_root() {
	[ -z "$BCC_ROOT" ] || return 0
	mkdir -p /host /bccrw /bcc
	mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /host ||
		{ echo "cannot mount the host's root over virtio-9p" >/tmp/bcc_root.err; return 1; }
	mount -t tmpfs bccrw /bccrw && mkdir -p /bccrw/upper /bccrw/work
	mount -t overlay overlay -o lowerdir=/host,upperdir=/bccrw/upper,workdir=/bccrw/work /bcc ||
		{ echo "cannot mount an overlay on the host's root (9p lower)" >/tmp/bcc_root.err; return 1; }
	mount -t proc proc /bcc/proc; mount -t sysfs sys /bcc/sys; mount -t devtmpfs dev /bcc/dev
	mount -t tmpfs tmp /bcc/tmp; mount -t tmpfs run /bcc/run; mount -t bpf bpf /bcc/sys/fs/bpf
	mount -t debugfs debugfs /bcc/sys/kernel/debug; mount -t tracefs tracefs /bcc/sys/kernel/tracing
	mount -o bind /usr/src /bcc/usr/src
	mkdir -p /bcc/lib/modules/$KVER
	ln -sfn /usr/src/linux-headers-$KVER /bcc/lib/modules/$KVER/build
	ln -sfn /usr/src/linux-headers-${KVER%-amd64}-common /bcc/lib/modules/$KVER/source
	BCC_ROOT=/bcc
}
# hist_total LOG: the events in the histograms a tool printed at exit (bcc's
# "lo -> hi : count" rows, bpftrace's "[lo, hi) count |" rows).
hist_total() {
	awk '/^ *[0-9]+ -> [0-9]+ *: *[0-9]+/ { s = $0; sub(/.*: */, "", s); n += s + 0 }
		/^\[[^]]*[])] +[0-9]+ +\|/ { s = $0; sub(/^\[[^]]*[])] +/, "", s); n += s + 0 }
		END { print n + 0 }' "$1"
}
# stop PID: SIGINT, as Ctrl-C ends each tool and makes the tracers print
# their histograms; SIGKILL when it has not exited 600 guest seconds later
# (a zombie has exited).
stop() {
	kill -INT $1 2>/dev/null
	t1=$(up)
	while kill -0 $1 2>/dev/null && [ "$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null)" != Z ]; do
		if [ $(($(up) - t1)) -gt 600 ]; then
			say "PEERS-WAIT $name did not exit within 600s of SIGINT: killed"
			kill -KILL $1
			break
		fi
		sleep 1
	done
	wait $1 2>/dev/null
}
# run NAME READY_PATTERN CMD...: start CMD, wait for READY_PATTERN in its
# output and for its programs to be attached, run the workload RUNS times,
# report every program that appeared.
run() {
	name=$1 ready=$2; shift 2
	stats >/tmp/s0
	: >/tmp/$name.log
	"$@" >>/tmp/$name.log 2>&1 &
	pid=$!
	# Guest seconds (the clock -icount drives), not loop turns: bpftool and
	# jq take seconds of their own under TCG.
	t0=$(up) i=0 seen= told=0
	while :; do
		i=$(($(up) - t0))
		if grep -q "$ready" /tmp/$name.log; then
			[ -n "$seen" ] || seen=$i
			attached >/tmp/a
			stats | awk -F'\t' 'FILENAME == ARGV[1] { old[$1] = 1; next }
				FILENAME == ARGV[2] { at[$1] = $2; next }
				!($1 in old) && ($1 in at) { print $1 "\t" at[$1] }' /tmp/s0 /tmp/a - >/tmp/$name.attach
			[ ! -s /tmp/$name.attach ] || break
		fi
		reason=
		if ! kill -0 $pid 2>/dev/null; then
			# python's exception line says the most; else the first error.
			reason=$(grep -m1 '^[A-Za-z]*\(Exception\|Error\): ' /tmp/$name.log ||
				grep -m1 -iE 'error|could not|cannot|fail|exception' /tmp/$name.log || tail -n1 /tmp/$name.log)
			reason=${reason:-exited with no output}
		elif [ -n "$seen" ] && [ $((i - seen)) -gt 120 ]; then
			reason="printed \"$ready\" ${seen}s after its start, but bpftool perf and bpftool link show no program of it attached $((i - seen))s later"
		elif [ $i -gt 3600 ]; then
			reason="not started after ${i}s: $(tail -n1 /tmp/$name.log)"
		fi
		if [ -n "$reason" ]; then
			say "PEERS-TOOL $name status=fails reason=$reason"
			tail -n 20 /tmp/$name.log | while read -r l; do say "PEERS-LOG $name $l"; done
			stop $pid
			return
		fi
		# A sign of life every 5 minutes of guest time for whoever watches
		# the results file; the report leaves these lines out.
		if [ $((i / 300)) -gt $told ]; then
			told=$((i / 300))
			say "PEERS-WAIT $name ${i}s new_programs=$(stats | awk -F'\t' 'FILENAME == ARGV[1] { old[$1] = 1; next } !($1 in old)' /tmp/s0 - | wc -l) last_output=$(tail -n1 /tmp/$name.log)"
		fi
		sleep 1
	done
	say "PEERS-TOOL $name status=runs ready_after=${i}s"
	stats | awk -F'\t' -v n="$name" 'FILENAME == ARGV[1] { old[$1] = 1; next }
		FILENAME == ARGV[2] { at[$1] = $2; next }
		!($1 in old) { printf "PEERS-ATTACH %s %s %s %s\n", n, $1, $2, ($1 in at) ? at[$1] : "-" }' \
		/tmp/s0 /tmp/$name.attach - >$OUT
	r=1
	while [ $r -le $RUNS ]; do
		stats >/tmp/s1
		workload
		stats >/tmp/s2
		awk -F'\t' -v n="$name" -v r=$r 'FILENAME == ARGV[1] { old[$1] = 1; next }
			FILENAME == ARGV[2] { at[$1] = $2; next }
			FILENAME == ARGV[3] { if (!($1 in old)) { ns[$1] = $3; c[$1] = $4; nm[$1] = $2 }; next }
			($1 in ns) { printf "PEERS-PROG %s %s %s %s %s %d %d\n", n, r, $1, nm[$1],
				($1 in at) ? at[$1] : "-", $3 - ns[$1], $4 - c[$1] }' \
			/tmp/s0 /tmp/$name.attach /tmp/s1 /tmp/s2 >$OUT
		r=$((r + 1))
	done
	stop $pid
	# The daemon's records go to its sink, not to its output.
	[ "$name" = ktelemetry ] || say "PEERS-HIST $name $(hist_total /tmp/$name.log)"
}
mkdir -p /tmp/ktel
for t in $TOOLS; do
	case $t in
	*.bt) run $t 'Hit Ctrl-C' bpftrace /peers/$t ;;
	*-bpfcc)
		if bcc_root; then
			# A shell starts a background command with SIGINT ignored,
			# and python then never raises KeyboardInterrupt, with which
			# bcc's tools print and exit: env gives SIGINT back its
			# default first.
			run $t 'Hit Ctrl-C' chroot $BCC_ROOT /usr/bin/env --default-signal=INT \
				PYTHONUNBUFFERED=1 /usr/sbin/$t
		else
			say "PEERS-TOOL $t status=fails reason=$(cat /tmp/bcc_root.err)"
		fi
		;;
	ktelemetry) run ktelemetry 'running with' ktelemetryd --config /peers/config.json ;;
	*) say "PEERS-TOOL $t status=fails reason=unknown tool" ;;
	esac
done
say "PEERS-SHA $(sha256sum /peers/runqlat.bt /peers/biolatency.bt | tr '\n' ' ')"
[ -z "$BCC_ROOT" ] || say "PEERS-SHA $(cd $BCC_ROOT && sha256sum usr/sbin/runqlat-bpfcc usr/sbin/biolatency-bpfcc | sed 's| usr/sbin/| /usr/sbin/|' | tr '\n' ' ')"
say PEERS-DONE
poweroff -f
EOF
chmod -R go-w "$R"
chmod 0755 "$R/init"
ktel_log "peers-lab: packing the initramfs ($(du -sh "$R" | cut -f1))"
(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$WORK/initramfs.gz"

# ---- boot -------------------------------------------------------------------
rm -f "$RES" "$WORK/console.log"
icount=()
[ "$ICOUNT" = off ] || icount=(-icount "$ICOUNT")
ktel_log "peers-lab: booting Linux $KVER under qemu TCG ($MEM${icount:+, -icount $ICOUNT}), up to ${TIMEOUT}s: $TOOLS"
rc=0
# The host's root goes in read-only: the guest runs bcc from it and can
# write nothing back.
timeout "$TIMEOUT" nice -n 19 qemu-system-x86_64 -accel tcg "${icount[@]}" -m "$MEM" -smp 1 \
	-nodefaults -no-user-config -display none -no-reboot \
	-kernel "$VMLINUZ" -initrd "$WORK/initramfs.gz" \
	-append "console=ttyS0 panic=-1 loglevel=4 rdinit=/init" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-serial "file:$WORK/console.log" -serial "file:$RES" >"$WORK/qemu.out" 2>&1 || rc=$?
tr -d '\r' <"$RES" >"$RES.txt" 2>/dev/null || : >"$RES.txt"
printf '%s\n' "mem=$MEM" "icount=$ICOUNT" "runs=$RUNS" >"$WORK/setup"
if ! grep -q PEERS-DONE "$RES.txt"; then
	echo "peers-lab: the guest did not finish (qemu status $rc); last console lines:" >&2
	tail -n 20 "$WORK/console.log" >&2
	grep PEERS "$RES.txt" >&2 || true
	exit 1
fi
fi

# ---- report -----------------------------------------------------------------
exec "$ROOT/tools/bench/peers-report" "$RES.txt" "$WORK/shipped.sha256" "$WORK/setup"
