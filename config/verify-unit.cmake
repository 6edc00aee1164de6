# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# ctest helper: `systemd-analyze verify` the unit, failing on any complaint
# (it exits 0 on unknown keys and similar warnings), and check that every
# capability the unit names is one systemd knows (it ignores unknown ones).
#   cmake -DANALYZE=/usr/bin/systemd-analyze -DUNIT=.../ktelemetryd.service -P verify-unit.cmake
execute_process(COMMAND ${ANALYZE} verify --man=no ${UNIT}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT "${out}${err}" STREQUAL "")
  message(FATAL_ERROR "systemd-analyze verify ${UNIT} (exit ${rc}):\n${out}${err}")
endif()

file(STRINGS ${UNIT} lines REGEX "^(CapabilityBoundingSet|AmbientCapabilities)=")
foreach(line ${lines})
  string(REGEX REPLACE "^[A-Za-z]+=~?" "" caps "${line}")
  separate_arguments(caps UNIX_COMMAND "${caps}")
  foreach(cap ${caps})
    execute_process(COMMAND ${ANALYZE} capability ${cap}
      RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${UNIT}: ${line}: ${cap}: ${err}")
    endif()
  endforeach()
endforeach()
message(STATUS "${UNIT}: verified")
