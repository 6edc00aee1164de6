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

# The sandbox stays as tight as it is: systemd-analyze's exposure score (0 is
# best, 10 worst; the unit scores 2.1 with systemd 252) may not grow past
# MAX_EXPOSURE. --offline needs systemd >= 250; older ones skip this.
if(NOT DEFINED MAX_EXPOSURE)
  set(MAX_EXPOSURE 2.5)
endif()
execute_process(COMMAND ${ANALYZE} security --offline=yes --no-pager ${UNIT}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 AND out MATCHES "Overall exposure level for [^:]*: ([0-9]+)\\.([0-9])")
  math(EXPR tenths "${CMAKE_MATCH_1} * 10 + ${CMAKE_MATCH_2}")
  string(REPLACE "." "" max_tenths "${MAX_EXPOSURE}")
  if(tenths GREATER max_tenths)
    message(FATAL_ERROR "${UNIT}: systemd-analyze security exposure ${CMAKE_MATCH_1}.${CMAKE_MATCH_2} > ${MAX_EXPOSURE}:\n${out}")
  endif()
  message(STATUS "${UNIT}: exposure ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
endif()
