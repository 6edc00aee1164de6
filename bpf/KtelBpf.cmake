# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# KtelBpf.cmake - build ktelemetry plugins: compile a BPF program with clang,
# embed the object in a MODULE library with the plugin's descriptor.
#
# Used by the project itself and installed for out-of-tree plugins:
#   find_package(ktelemetry REQUIRED)
#   ktel_add_plugin(my_metric BPF my_metric.bpf.c SOURCES my_metric.c)
# The descriptor source includes "<name>.bpf.h", which defines
#   static const unsigned char ktel_bpf_object[]
# holding the BPF ELF bytes (debug info stripped, BTF kept).

find_program(KTEL_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(KTEL_LLVM_STRIP NAMES llvm-strip llvm-strip-16 llvm-strip-15 llvm-strip-14 REQUIRED)
set(KTEL_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/ktel_embed.cmake CACHE INTERNAL "")

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(KTEL_BPF_ARCH x86 CACHE INTERNAL "")
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(KTEL_BPF_ARCH arm64 CACHE INTERNAL "")
else()
  set(KTEL_BPF_ARCH ${CMAKE_SYSTEM_PROCESSOR} CACHE INTERNAL "")
endif()
# The BPF program runs on the target, not on the build host: both its
# architecture (pt_regs layout for kprobe arguments, -D__TARGET_ARCH_*) and its
# byte order come from the target (CMAKE_SYSTEM_PROCESSOR and the C compiler's
# byte order, which a toolchain file sets), never from clang's host default.
if(CMAKE_C_BYTE_ORDER STREQUAL "BIG_ENDIAN")
  set(KTEL_BPF_TARGET bpfeb CACHE INTERNAL "")
else()
  set(KTEL_BPF_TARGET bpfel CACHE INTERNAL "")
endif()

# ktel_bpf_object(<out_var> <source> INCLUDES dirs...): compile one BPF program
# into the current binary dir; sets <out_var> to the object path.
function(ktel_bpf_object out_var src)
  cmake_parse_arguments(B "" "" "INCLUDES" ${ARGN})
  get_filename_component(base ${src} NAME_WE)
  get_filename_component(src_abs ${src} ABSOLUTE)
  set(obj ${CMAKE_CURRENT_BINARY_DIR}/${base}.bpf.o)
  set(incs)
  foreach(dir ${B_INCLUDES} ${KTEL_BPF_INCLUDE_DIRS})
    list(APPEND incs -I${dir})
  endforeach()
  # An audit build counts every recorded event (bpf_telemetry.h).
  if(KTEL_BPF_AUDIT)
    list(APPEND incs -DKTEL_BPF_AUDIT)
  endif()
  # -MT: the depfile must name the command's OUTPUT (the stripped object),
  # not clang's -o file, or a changed header (bpf_telemetry.h) rebuilds
  # nothing.
  add_custom_command(OUTPUT ${obj}
    COMMAND ${KTEL_CLANG} -target ${KTEL_BPF_TARGET} -g -O2 -ffreestanding
            -D__TARGET_ARCH_${KTEL_BPF_ARCH} ${incs} -Wall -Werror
            -MD -MF ${obj}.d -MT ${obj} -c ${src_abs} -o ${obj}.tmp
    COMMAND ${KTEL_LLVM_STRIP} -g ${obj}.tmp -o ${obj}
    DEPFILE ${obj}.d
    DEPENDS ${src_abs}
    COMMENT "BPF ${base}.bpf.c"
    VERBATIM)
  set(${out_var} ${obj} PARENT_SCOPE)
endfunction()

# ktel_add_plugin(<name> BPF <prog.bpf.c> SOURCES <descriptor.c>...
#                 [OUTPUT_DIR dir] [INCLUDES dirs...])
function(ktel_add_plugin name)
  cmake_parse_arguments(P "" "BPF;OUTPUT_DIR" "SOURCES;INCLUDES" ${ARGN})
  ktel_bpf_object(obj ${P_BPF} INCLUDES ${P_INCLUDES})
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR}/gen)
  set(hdr ${gen_dir}/${name}.bpf.h)
  add_custom_command(OUTPUT ${hdr}
    COMMAND ${CMAKE_COMMAND} -DIN=${obj} -DOUT=${hdr} -P ${KTEL_EMBED_SCRIPT}
    DEPENDS ${obj} ${KTEL_EMBED_SCRIPT}
    COMMENT "Embedding ${name}.bpf.o"
    VERBATIM)
  add_library(${name} MODULE ${P_SOURCES} ${hdr})
  target_include_directories(${name} PRIVATE ${gen_dir})
  target_link_libraries(${name} PRIVATE ktelemetry::plugin_api)
  set_target_properties(${name} PROPERTIES PREFIX "" C_VISIBILITY_PRESET hidden)
  if(P_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIR})
  endif()
  if(TARGET ktel_plugins)
    add_dependencies(ktel_plugins ${name})
  endif()
endfunction()
