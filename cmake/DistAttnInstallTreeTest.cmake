# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ctest -P script (test install_tree, issue #40 item 2): installs the build at
# BUILD_DIR into PREFIX, then checks the tree and the installed tools:
# - the library's headers, package files and license, and no testing header (the
#   examples and consumers must not need one);
# - TOOLS in BINDIR, the plot script and the tile tables in DATADIR/distattn;
# - every tool's --help starts with the tool's own text (not Kokkos' options,
#   which stay behind --kokkos-help);
# - on host builds, the installed driver takes its tile table from the install.
# Variables: BUILD_DIR, PREFIX, TOOLS (;-list), BINDIR, DATADIR, LIBDIR,
# INCLUDEDIR, DOCDIR, HOST_BUILD.
cmake_minimum_required(VERSION 3.23)
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${PREFIX}"
  RESULT_VARIABLE _rc OUTPUT_QUIET)
if(_rc)
  message(FATAL_ERROR "install failed (${_rc})")
endif()

set(_want
  "${INCLUDEDIR}/DistAttn/DistAttn.hpp"
  "${INCLUDEDIR}/DistAttn/core/config.hpp"
  "${LIBDIR}/cmake/DistAttn/DistAttnConfig.cmake"
  "${LIBDIR}/cmake/DistAttn/DistAttnConfigVersion.cmake"
  "${DOCDIR}/LICENSE")
foreach(_tool IN LISTS TOOLS)
  list(APPEND _want "${BINDIR}/${_tool}")
endforeach()
if(TOOLS)
  list(APPEND _want "${DATADIR}/distattn/plot_results.py")
endif()
if("distattn-run" IN_LIST TOOLS)
  list(APPEND _want "${DATADIR}/distattn/tiles/tiles_cpu_float_d64.txt")
endif()
foreach(_f IN LISTS _want)
  if(NOT EXISTS "${PREFIX}/${_f}")
    file(GLOB_RECURSE _have RELATIVE "${PREFIX}" "${PREFIX}/*")
    list(FILTER _have EXCLUDE REGEX "^${INCLUDEDIR}/")
    message(FATAL_ERROR "the install lacks ${_f}; it has (headers left out):\n${_have}")
  endif()
  message("installed: ${_f}")
endforeach()
if(EXISTS "${PREFIX}/${INCLUDEDIR}/DistAttn/testing")
  message(FATAL_ERROR "the install has the test-only headers ${INCLUDEDIR}/DistAttn/testing")
endif()

# --help: the tool's own text first (its description, or its usage line), the
# pointer to Kokkos' options, and none of Kokkos' own lines.
set(_first_line_distattn-run "Exact causal attention over the MPI ranks of the job.")
foreach(_tool IN LISTS TOOLS)
  execute_process(COMMAND "${PREFIX}/${BINDIR}/${_tool}" --help
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(_rc)
    message(FATAL_ERROR "${_tool} --help exited with ${_rc}:\n${_out}\n${_err}")
  endif()
  string(REGEX MATCH "^[^\n]*" _first "${_out}")
  if(DEFINED _first_line_${_tool})
    if(NOT _first STREQUAL _first_line_${_tool})
      message(FATAL_ERROR "${_tool} --help starts with '${_first}', not '${_first_line_${_tool}}'")
    endif()
  elseif(NOT _first MATCHES "^[A-Za-z]")
    message(FATAL_ERROR "${_tool} --help does not start with its own text:\n${_out}")
  endif()
  if("${_out}${_err}" MATCHES "Kokkos command line arguments" OR NOT _out MATCHES "--kokkos-help")
    message(FATAL_ERROR "${_tool} --help: Kokkos' options are not behind --kokkos-help:\n${_out}\n${_err}")
  endif()
  message("${_tool} --help: ${_first}")
endforeach()

if(HOST_BUILD AND "distattn-run" IN_LIST TOOLS)
  execute_process(COMMAND "${PREFIX}/${BINDIR}/distattn-run" --schedule auto --predict-only --seq 128
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(_rc OR NOT _out MATCHES "the shipped table for this device [(]cpu[)] and --dtype float, ${PREFIX}/${DATADIR}/distattn/tiles/tiles_cpu_float_d64[.]txt")
    message(FATAL_ERROR "the installed distattn-run did not take its tile table from the install (${_rc}):\n${_out}\n${_err}")
  endif()
  message("the installed distattn-run takes ${PREFIX}/${DATADIR}/distattn/tiles")
endif()
