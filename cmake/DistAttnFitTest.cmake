# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ctest -P script: distattn-run --fit against what a run allocates. For each
# schedule, --fit with DISTATTN_MEMORY_LIMIT=LIMIT names the longest sequence S and
# the bytes it needs (the driver's tensors plus the executor's workspace plan);
# then the schedule runs forward and backward at S with the kv heads per pass the
# fit named, and the library's own allocations (--json lib_peak_bytes) must be the
# planned workspace plus the entry agreement's small buffers (at most 4 KiB), and
# the need at S must be within LIMIT while the next length's is not. A run at 4 S
# must then fail before allocating, with S as the longest sequence that fits.
# Variables: MPIEXEC, NP_FLAG, PREFLAGS (;-list), POSTFLAGS, DRIVER, DRIVER_ARGS (;-list), WORK_DIR, LIMIT.
include(${CMAKE_CURRENT_LIST_DIR}/DistAttnScriptRun.cmake)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(_shape --heads 4 --kv-heads 2 --dim 32)
foreach(sched IN ITEMS zigzag balanced grid2d-o ulysses hybrid)
  distattn_run_checked("${sched}: distattn-run --fit" _out
    ${CMAKE_COMMAND} -E env DISTATTN_MEMORY_LIMIT=${LIMIT}
    ${MPIEXEC} ${NP_FLAG} 2 ${PREFLAGS} ${DRIVER} ${POSTFLAGS} --schedule ${sched} ${_shape} --fit ${DRIVER_ARGS})
  if(NOT _out MATCHES "longest sequence ([0-9]+) tokens \\(multiple of [0-9]+\\); rank 0 needs ([0-9]+) bytes \\(.*tensors ([0-9.]+), workspace [0-9.]+\\); [0-9]+ tokens would need ([0-9]+) bytes")
    message(FATAL_ERROR "${sched}: no fit line:\n${_out}")
  endif()
  set(_seq ${CMAKE_MATCH_1})
  set(_need ${CMAKE_MATCH_2})
  set(_next ${CMAKE_MATCH_4})
  if(_need GREATER LIMIT OR NOT _next GREATER LIMIT)
    message(FATAL_ERROR "${sched}: S=${_seq} needs ${_need} bytes and the next length ${_next}; the limit is ${LIMIT}")
  endif()
  set(_group "")
  if(_out MATCHES "\\(--head-group ([0-9]+)\\)")
    set(_group --head-group ${CMAKE_MATCH_1})
  endif()
  set(_json "${WORK_DIR}/${sched}.json")
  distattn_run_checked("${sched}: the run at S=${_seq}" _run
    ${MPIEXEC} ${NP_FLAG} 2 ${PREFLAGS} ${DRIVER} ${POSTFLAGS} --schedule ${sched} ${_shape} --seq ${_seq}
    ${_group} -w 0 -n 1 --json ${_json} ${DRIVER_ARGS})
  # The run's own allocations against the workspace the fit planned.
  file(READ "${_json}" _doc)
  string(JSON _lib GET "${_doc}" ranks 0 lib_peak_bytes)
  if(NOT _out MATCHES "workspace_bytes ([0-9]+)")
    message(FATAL_ERROR "${sched}: the fit line names no workspace_bytes:\n${_out}")
  endif()
  set(_ws ${CMAKE_MATCH_1})
  math(EXPR _extra "${_lib} - ${_ws}")
  if(_extra LESS 0 OR _extra GREATER 4096)
    message(FATAL_ERROR "${sched}: at S=${_seq} the library allocated ${_lib} bytes, the fit planned ${_ws}")
  endif()
  # A run that does not fit fails before allocating, and its hint is the length
  # just run: the same plan as --fit.
  math(EXPR _long "${_seq} * 4")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env DISTATTN_MEMORY_LIMIT=${LIMIT}
    ${MPIEXEC} ${NP_FLAG} 2 ${PREFLAGS} ${DRIVER} ${POSTFLAGS} --schedule ${sched} ${_shape} --seq ${_long}
    -w 0 -n 1 ${DRIVER_ARGS} RESULT_VARIABLE _rc OUTPUT_VARIABLE _hint_out ERROR_VARIABLE _hint_err)
  if(_rc EQUAL 0 OR NOT _hint_err MATCHES "not enough memory for --seq ${_long} [^\n]*the longest sequence that fits is ${_seq} tokens")
    message(FATAL_ERROR "${sched}: a run at S=${_long} with the same limit must fail, hinting S=${_seq} (exit ${_rc}):\n${_hint_out}\n${_hint_err}")
  endif()
  message("${sched}: fits S=${_seq} (${_need} of ${LIMIT} bytes); the run's library peak ${_lib} = plan ${_ws} + ${_extra}; S=${_long} fails hinting S=${_seq}")
endforeach()
