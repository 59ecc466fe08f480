# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ctest -P script: distattn-run --json on 1 and 2 ranks (a small CPU problem), then
# perf_tests/scripts/plot_results.py renders both plots from the files. Fails when
# a run fails, a JSON file lacks a field the plots use, or a PNG is not written;
# exits through the plot script's status 77 (skipped) when matplotlib is missing.
# Variables: MPIEXEC, NP_FLAG, PREFLAGS (;-list), POSTFLAGS, DRIVER, DRIVER_ARGS (;-list), PYTHON, SCRIPT,
# WORK_DIR.
include(${CMAKE_CURRENT_LIST_DIR}/DistAttnScriptRun.cmake)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(_files "")
foreach(np IN ITEMS 1 2)
  set(_json "${WORK_DIR}/balanced_np${np}.json")
  distattn_run_checked("distattn-run on ${np} ranks" _out
    ${MPIEXEC} ${NP_FLAG} ${np} ${PREFLAGS} ${DRIVER} ${POSTFLAGS} --schedule balanced --seq 256 --heads 2
    --kv-heads 1 --dim 32 -w 1 -n 3 --json ${_json} ${DRIVER_ARGS})
  if(NOT _out MATCHES "# verdict: DONE [(]not checked[)]")
    message(FATAL_ERROR "distattn-run on ${np} ranks printed no DONE verdict:\n${_out}")
  endif()
  list(APPEND _files "${_json}")
endforeach()
execute_process(COMMAND ${PYTHON} ${SCRIPT} "${WORK_DIR}/plots" ${_files}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(_rc EQUAL 77)
  message("SKIPPED: ${_err}")
  # ctest's SKIP_REGULAR_EXPRESSION turns this into a skip.
  return()
endif()
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "plot_results.py failed (${_rc}):\n${_out}\n${_err}")
endif()
foreach(png IN ITEMS efficiency timeline)
  if(NOT EXISTS "${WORK_DIR}/plots/${png}.png")
    message(FATAL_ERROR "plot_results.py wrote no ${png}.png")
  endif()
  file(SIZE "${WORK_DIR}/plots/${png}.png" _size)
  if(_size LESS 1000)
    message(FATAL_ERROR "${png}.png has only ${_size} bytes")
  endif()
endforeach()
message("plots: ${WORK_DIR}/plots/efficiency.png ${WORK_DIR}/plots/timeline.png")
