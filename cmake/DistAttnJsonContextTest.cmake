# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ctest -P script: runs distattn-run with --json and checks its "context" record
# (issue #40, item 5): every field is present, and those a result is traced by
# have a value of the right form.
# Variables: COMMAND (;-list, the run without --json), WORK_DIR, RANKS (the job's size),
# ARGS_REGEX (must match context.command_line).
include(${CMAKE_CURRENT_LIST_DIR}/DistAttnScriptRun.cmake)
file(MAKE_DIRECTORY "${WORK_DIR}")
set(_json "${WORK_DIR}/context.json")
file(REMOVE "${_json}")
distattn_run_checked("distattn-run" _out ${COMMAND} --json ${_json})
file(READ "${_json}" _doc)

# NAME~TYPES~REGEX: context.NAME must have one of the JSON types TYPES (a regex of
# CMake's type names; NULL where the build has no such library) and, where given, match REGEX.
foreach(_field
    "distattn_version~STRING~^[0-9]+[.][0-9]+[.][0-9]+$"
    "git_hash~STRING~^([0-9a-f]+|unknown)$"
    "git_dirty~BOOLEAN~"
    "library_build_type~STRING~"
    "compiler~STRING~."
    "date~STRING~^20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]Z$"
    "host~STRING~."
    "hosts~NUMBER~^[1-9][0-9]*$"
    "ranks~NUMBER~^${RANKS}$"
    "devices~ARRAY~"
    "num_cpus~NUMBER~"
    "load_avg~ARRAY|NULL~"
    "executable~STRING~distattn-run$"
    "command_line~STRING~${ARGS_REGEX}"
    "execution_space~STRING~."
    "kokkos_version~STRING~^[0-9]+[.][0-9]+[.][0-9]+$"
    "kokkos_kernels_version~STRING|NULL~"
    "mpi_version~STRING~^[0-9]+[.][0-9]+$"
    "mpi_library~STRING~."
    "nccl_version~STRING|NULL~"
    "cuda_runtime_version~STRING|NULL~^[0-9]+[.][0-9]+"
    "cuda_driver_version~STRING|NULL~^[0-9]+[.][0-9]+")
  string(REGEX MATCH "^([^~]*)~([^~]*)~(.*)$" _ok "${_field}")
  set(_name "${CMAKE_MATCH_1}")
  set(_types "${CMAKE_MATCH_2}")
  set(_regex "${CMAKE_MATCH_3}")
  string(JSON _type ERROR_VARIABLE _err TYPE "${_doc}" context ${_name})
  if(_err)
    message(FATAL_ERROR "context.${_name} is missing: ${_err}\n${_doc}")
  endif()
  if(NOT _type MATCHES "^(${_types})$")
    message(FATAL_ERROR "context.${_name} is ${_type}, expected ${_types}")
  endif()
  if(_type MATCHES "STRING|NUMBER|BOOLEAN")
    string(JSON _value GET "${_doc}" context ${_name})
    if(NOT _regex STREQUAL "" AND NOT _value MATCHES "${_regex}")
      message(FATAL_ERROR "context.${_name} = '${_value}' does not match '${_regex}'")
    endif()
    message("context.${_name} = ${_value}")
  else()
    message("context.${_name}: ${_type}")
  endif()
endforeach()

# One device record per rank, in rank order, each naming its host.
string(JSON _n LENGTH "${_doc}" context devices)
if(NOT _n EQUAL RANKS)
  message(FATAL_ERROR "context.devices has ${_n} records for ${RANKS} ranks")
endif()
math(EXPR _last "${_n} - 1")
foreach(_r RANGE ${_last})
  string(JSON _rank GET "${_doc}" context devices ${_r} rank)
  string(JSON _host GET "${_doc}" context devices ${_r} host)
  string(JSON _device GET "${_doc}" context devices ${_r} device)
  if(NOT _rank EQUAL _r OR _host STREQUAL "" OR _device STREQUAL "")
    message(FATAL_ERROR "context.devices[${_r}] is rank '${_rank}' on host '${_host}', device '${_device}'")
  endif()
endforeach()
# The verdict says what was checked (item 6): this run has no --check.
string(JSON _verdict GET "${_doc}" verdict)
string(JSON _checked GET "${_doc}" checked)
if(NOT _verdict STREQUAL "DONE" OR NOT _checked STREQUAL "none")
  message(FATAL_ERROR "verdict '${_verdict}', checked '${_checked}': expected DONE and none without --check")
endif()
