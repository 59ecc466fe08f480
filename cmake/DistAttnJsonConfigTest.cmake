# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ctest -P script: runs distattn-run with --json and checks values of its "config"
# record, i.e. what the run took its options to mean.
# Variables: COMMAND (;-list, the run without --json), WORK_DIR, EXPECT (;-list of
# KEY=VALUE: config.KEY must equal VALUE, as a number where VALUE is one).
include(${CMAKE_CURRENT_LIST_DIR}/DistAttnScriptRun.cmake)
file(MAKE_DIRECTORY "${WORK_DIR}")
set(_json "${WORK_DIR}/config.json")
file(REMOVE "${_json}")
distattn_run_checked("distattn-run" _out ${COMMAND} --json ${_json})
file(READ "${_json}" _doc)
foreach(_pair IN LISTS EXPECT)
  string(REGEX MATCH "^([^=]+)=(.*)$" _ok "${_pair}")
  set(_key ${CMAKE_MATCH_1})
  set(_want ${CMAKE_MATCH_2})
  string(JSON _got GET "${_doc}" config ${_key})
  if(_want MATCHES "^-?[0-9.]+$")
    if(NOT _got EQUAL _want)
      message(FATAL_ERROR "config.${_key} is ${_got}, expected ${_want}")
    endif()
  elseif(NOT _got STREQUAL _want)
    message(FATAL_ERROR "config.${_key} is '${_got}', expected '${_want}'")
  endif()
  message("config.${_key} = ${_got}")
endforeach()
