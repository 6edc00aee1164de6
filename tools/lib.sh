# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Shared by tools/run and tools/test: install what is missing, build.
# shellcheck shell=bash
set -euo pipefail

KTEL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Debian packages the project builds and tests with (libclang-rt-14-dev: clang's
# libFuzzer and sanitizer runtimes for build-fuzz, only recommended by clang;
# protobuf-compiler: the protoc that docs/plugin-authoring.md checks an atom
# with, run by the doc_commands test).
KTEL_PACKAGES=(cmake make gcc pkg-config clang llvm libbpf-dev libelf-dev zlib1g-dev
  libjansson-dev libuv1-dev libcmocka-dev bpftool valgrind libmicrohttpd-dev prometheus curl
  strace jq clang-format libclang-rt-14-dev netdata libprotobuf-c-dev protobuf-c-compiler protobuf-compiler libsnappy-dev
  libcurl4-openssl-dev systemd-container python3 chromium tmux)

# The arm64 cross build (cmake/aarch64-linux-gnu.cmake): Debian's cross
# compiler, the :arm64 multiarch libraries, and qemu-user to run its tests.
KTEL_ARM64_PACKAGES=(gcc-aarch64-linux-gnu qemu-user-static libbpf-dev:arm64 libelf-dev:arm64
  zlib1g-dev:arm64 libjansson-dev:arm64 libuv1-dev:arm64 libcmocka-dev:arm64
  libmicrohttpd-dev:arm64 libprotobuf-c-dev:arm64 libsnappy-dev:arm64 libcurl4-openssl-dev:arm64)

ktel_log() { printf '==> %s\n' "$*" >&2; }

# Install the Debian packages in "$@" that are not installed yet.
ktel_install_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    ktel_log "missing packages: ${missing[*]} (run as root, or install them with apt-get)"
    return 1
  fi
  local start=$SECONDS
  ktel_log "installing ${#missing[@]} Debian packages (apt-get, a few minutes the first time): ${missing[*]}"
  ktel_log "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  ktel_log "apt-get install (${#missing[@]} packages and what they need)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  ktel_log "installed ${#missing[@]} packages in $((SECONDS - start)) s"
}

# Install KTEL_ARM64_PACKAGES, adding the arm64 architecture to dpkg first
# (root only; then apt needs fresh lists that include arm64).
ktel_install_arm64() {
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    if [ "$(id -u)" -ne 0 ]; then
      ktel_log "the arm64 cross build needs: dpkg --add-architecture arm64 (as root)"
      return 1
    fi
    ktel_log "adding the arm64 architecture to dpkg"
    dpkg --add-architecture arm64
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
  fi
  ktel_install_packages "${KTEL_ARM64_PACKAGES[@]}"
}

# node and npm run the real StatsD server in tests. The machine image may
# ship its own Node.js (whose nodejs package conflicts with Debian's npm):
# install Debian's only when npm is missing.
ktel_install_node() {
  command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 && return 0
  ktel_install_packages nodejs npm
}

# Mount bpffs and tracefs when they are missing (root only).
ktel_mount_fs() {
  [ "$(id -u)" -eq 0 ] || return 0
  if ! mountpoint -q /sys/fs/bpf; then
    mount -t bpf bpf /sys/fs/bpf
  fi
  if ! mountpoint -q /sys/kernel/tracing; then
    mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
  fi
}

# Make's "[ 42%] Building C object ..." lines of a build as progress: on a
# terminal one line rewritten in place, else a line at every tenth of the
# way. Every line goes to the build's log (the caller shows its end when the
# build fails).
ktel_build_progress() {
  local dir=$1 log=$2 line pct last=-10
  local tty=0
  [ -t 2 ] && tty=1
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    [[ $line =~ ^\[\ *([0-9]+)%\]\ (.*)$ ]] || continue
    pct=${BASH_REMATCH[1]}
    if [ $tty -eq 1 ]; then
      line=${BASH_REMATCH[2]}
      printf '\r\033[K==> building %s: %3d%% %.60s' "$dir" "$pct" "$line" >&2
    elif [ "$pct" -ge $((last + 10)) ]; then
      ktel_log "building $dir: $pct%"
      last=$pct
    fi
  done
  [ $tty -eq 0 ] || printf '\r\033[K' >&2
}

# ktel_build DIR [--target T]... [cmake args...]: configure and build into
# DIR, all of it or only the targets named. A tree is configured when it is
# new or when cmake args are given, so an existing tree takes them too
# (tools/test's trees turn KTEL_FAULT_INJECTION on, tools/run's own tree
# keeps it off: docs/sinks.md, "Testing the guarantees"). Progress is shown
# as it goes, the time at the end; the whole output is in DIR/build.log.
ktel_build() {
  local dir=$1; shift
  local targets=() names=() start=$SECONDS rc
  while [ $# -gt 1 ] && [ "$1" = --target ]; do
    targets+=(--target "$2")
    names+=("$2")
    shift 2
  done
  mkdir -p "$dir"
  : >"$dir/build.log"
  if [ ! -f "$dir/CMakeCache.txt" ] || [ $# -gt 0 ]; then
    ktel_log "configuring $dir"
    if ! cmake -S "$KTEL_ROOT" -B "$dir" "$@" >>"$dir/build.log" 2>&1; then
      tail -n 30 "$dir/build.log" >&2
      ktel_log "configuring $dir failed (all of it: $dir/build.log)"
      return 1
    fi
  fi
  ktel_log "building $dir${names[*]:+ (only ${names[*]})}"
  set +e
  cmake --build "$dir" -j"$(nproc)" "${targets[@]}" -- --no-print-directory 2>&1 |
    ktel_build_progress "$dir" "$dir/build.log"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    grep -E 'error|Error' "$dir/build.log" | tail -n 30 >&2 || tail -n 30 "$dir/build.log" >&2
    ktel_log "building $dir failed after $((SECONDS - start)) s (all of it: $dir/build.log)"
    return 1
  fi
  ktel_log "built $dir in $((SECONDS - start)) s"
}
