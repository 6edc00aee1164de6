#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# sdk_cross_test.sh BINARY_DIR EXAMPLE_SRC TOOLCHAIN BPF_ARCH CTL EMULATOR...
#
# The SDK of a cross-built tree works for a cross-built OEM plugin:
#  1. `cmake --install --component dev` into a fresh prefix;
#  2. the example plugin (docs/examples) configures with the same toolchain
#     file against that prefix only, and builds;
#  3. its .so is an ELF for the target machine (e_machine), its BPF program
#     was compiled for the target (-D__TARGET_ARCH_<arch>, the byte order's
#     BPF target), and the pkg-config file resolves inside the prefix;
#  4. this tree's ktelemetryctl, run by the emulator, dlopens the plugin and
#     decodes its maps from BTF (`inspect`: no kernel needed).
set -eu
bin=$1 example=$2 toolchain=$3 arch=$4 ctl=$5
shift 5
work=$bin/sdk-cross-test
fail() { echo "sdk_cross_test: FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
chmod 0755 "$work"
cmake --install "$bin" --prefix "$work/prefix" --component dev >/dev/null ||
  fail "cmake --install $bin --component dev"
cmake -S "$example" -B "$work/ex" -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
  -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log" 2>&1 ||
  fail "configure: $(tail -n 5 "$work/configure.log")"
cmake --build "$work/ex" >"$work/build.log" 2>&1 || fail "build: $(tail -n 5 "$work/build.log")"
grep -q "^ktelemetry_DIR:PATH=$work/prefix/" "$work/ex/CMakeCache.txt" ||
  fail "the example did not find the SDK in $work/prefix"

so=$work/ex/signal_delivery_latency.so
[ -f "$so" ] || fail "no $so"
# e_machine: 2 bytes at offset 18, little-endian on every target we build for.
machine=$(od -An -tu2 -j18 -N2 "$so" | tr -d ' ')
case $arch in
arm64) want_machine=183 ;; # EM_AARCH64
x86) want_machine=62 ;;    # EM_X86_64
*) fail "no e_machine known for $arch" ;;
esac
[ "$machine" = "$want_machine" ] || fail "$so: e_machine $machine, want $want_machine ($arch)"

rules=$(grep -rl -- '-target bpf' "$work/ex/CMakeFiles") || fail "no BPF compile rule in $work/ex"
grep -q -- "-D__TARGET_ARCH_$arch" $rules || fail "BPF program not compiled with -D__TARGET_ARCH_$arch"
grep -q -- "-target bpfel" $rules || fail "BPF program not compiled for bpfel (little-endian target)"

cflags=$(PKG_CONFIG_LIBDIR=$(dirname "$(find "$work/prefix" -name ktelemetry.pc)") pkg-config --cflags ktelemetry)
case $cflags in
*"$work/prefix"*) ;;
*) fail "pkg-config --cflags ktelemetry: $cflags (not in $work/prefix)" ;;
esac

"$@" "$ctl" inspect "$so" >"$work/inspect.txt" 2>&1 ||
  fail "$* $ctl inspect: $(tail -n 5 "$work/inspect.txt")"
grep -q signal_delivery_latency "$work/inspect.txt" ||
  fail "inspect does not name the metric: $(head -n 5 "$work/inspect.txt")"
echo "sdk_cross_test: $arch plugin built from the installed SDK, e_machine $machine, inspected under $1"
