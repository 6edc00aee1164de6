#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/bench/attr_cost.sh - what attribution adds per event to the real
# runq_latency and block_io_latency programs (docs/benchmarks.md,
# "Attribution cost"): runs build/tools/bench/ktel-bench-attr-cost with
#
#   - the two programs as they were before attribution existed, compiled
#     from git history (the parent of the commit that added
#     bpf/include/ktel_attr.h, with that commit's headers) with the flags of
#     bpf/KtelBpf.cmake, into BUILD_DIR/tools/bench/attr-before/;
#   - a loop device over a 64 MiB file kept in the page cache, so that its
#     4 KiB O_DIRECT reads are block requests that touch no disk.
#
#   tools/bench/attr_cost.sh [-b BUILD_DIR] [-q] [-- BENCH_ARGS...]
#
# -q: a short run (5 repetitions of fewer events), only to see that it runs.
# BENCH_ARGS go to the bench: `-m wall` measures the workload's own time per
# event with bpf_stats off (the sysctl is set to 0 for the run and put
# back), which holds every program run with its dispatch and no
# measurement's own cost; the default `-m body` sums bpf_stats' run times.
# Without git history (a tarball), the `before` rows are left out. Needs
# root; removes the loop device and its file on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$ROOT/build
QUICK=
while getopts b:qh o; do
	case $o in
	b) BUILD=$OPTARG ;;
	q) QUICK=1 ;;
	h) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "$(id -u)" -eq 0 ] || { echo "attr_cost.sh: must run as root" >&2; exit 77; }
BUILD=$(cd "$BUILD" && pwd)
BENCH=$BUILD/tools/bench/ktel-bench-attr-cost
[ -x "$BENCH" ] || nice -n 19 cmake --build "$BUILD" --target ktel-bench-attr-cost >/dev/null

args=()
# ---- the programs before attribution -----------------------------------------
OLD=$BUILD/tools/bench/attr-before
if rev=$(git -C "$ROOT" log --diff-filter=A --format=%H -- bpf/include/ktel_attr.h 2>/dev/null |
	tail -n 1) && [ -n "$rev" ]; then
	clang=$(sed -n 's/^KTEL_CLANG:FILEPATH=//p' "$BUILD/CMakeCache.txt")
	strip=$(sed -n 's/^KTEL_LLVM_STRIP:FILEPATH=//p' "$BUILD/CMakeCache.txt")
	case $(uname -m) in x86_64) arch=x86 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
	rm -rf "$OLD" && mkdir -p "$OLD/src"
	git -C "$ROOT" archive "$rev^" bpf/include plugins/runq_latency plugins/block_io_latency |
		tar -x -C "$OLD/src"
	for p in runq_latency block_io_latency; do
		nice -n 19 "${clang:-clang}" -target bpfel -g -O2 -ffreestanding \
			-D__TARGET_ARCH_$arch -I"$OLD/src/bpf/include" -Wall -Werror \
			-c "$OLD/src/plugins/$p/$p.bpf.c" -o "$OLD/$p.bpf.o.tmp"
		nice -n 19 "${strip:-llvm-strip}" -g "$OLD/$p.bpf.o.tmp" -o "$OLD/$p.bpf.o"
	done
	echo "before: plugins at $(git -C "$ROOT" rev-parse --short "$rev^")" \
		"(parent of $(git -C "$ROOT" rev-parse --short "$rev"), which added ktel_attr.h)"
	args+=(--old-runq "$OLD/runq_latency.bpf.o" --old-block "$OLD/block_io_latency.bpf.o")
else
	echo "before: no git history: the before rows are left out"
fi

# ---- a loop device whose reads stay in memory ---------------------------------
IMG=$BUILD/tools/bench/attr-cost-$$.img
LOOP=
cleanup() {
	set +e
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	rm -f "$IMG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
dd if=/dev/zero of="$IMG" bs=1M count=64 status=none
cat "$IMG" >/dev/null
LOOP=$(losetup --direct-io=off -f --show "$IMG")
args+=(-d "$LOOP")
[ -n "$QUICK" ] && args+=(-r 5 -n 4000 -i 500)
echo "$ $BENCH ${args[*]} $*"
"$BENCH" "${args[@]}" "$@"
