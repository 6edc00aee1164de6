# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# CMake toolchain file: build ktelemetry (daemon, plugins, tests) for arm64 on
# an x86 Debian host, against Debian's multiarch :arm64 libraries
# (tools/lib.sh KTEL_ARM64_PACKAGES installs them).
#
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
# An OEM build of out-of-tree plugins uses the same file: find_package(ktelemetry)
# and pkg-config then resolve in the installed SDK's prefix, and KtelBpf.cmake
# compiles the BPF programs for the target (-D__TARGET_ARCH_arm64) from
# CMAKE_SYSTEM_PROCESSOR, never from the host's.
#
# Tests run through qemu-user (CMAKE_CROSSCOMPILING_EMULATOR), so
# `ctest -L unit` works on the x86 host unchanged.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(KTEL_TRIPLET aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${KTEL_TRIPLET}-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE ${KTEL_TRIPLET})

# Debian multiarch: the target's headers and libraries live in the host's /usr
# under the triplet (/usr/include/aarch64-linux-gnu, /usr/lib/aarch64-linux-gnu),
# the architecture-independent headers in /usr/include. No sysroot is needed; the
# cross compiler searches both. Programs (clang, llvm-strip) are the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config for the target: only the :arm64 .pc files, never the host's
# x86 ones (which would link x86 libraries into an arm64 binary).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${KTEL_TRIPLET}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(PKG_CONFIG_EXECUTABLE pkg-config CACHE FILEPATH "pkg-config (PKG_CONFIG_LIBDIR set for arm64)")

# Run the target's test binaries on the host. libc6:arm64 (pulled in by the
# :arm64 -dev packages) puts the arm64 dynamic loader at /lib/ld-linux-aarch64.so.1
# and its libraries under /usr/lib/aarch64-linux-gnu, where qemu-user finds them.
find_program(KTEL_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(KTEL_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${KTEL_QEMU_AARCH64})
endif()
