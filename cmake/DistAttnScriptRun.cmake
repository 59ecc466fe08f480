# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Shared by the ctest -P scripts (cmake/DistAttn*Test.cmake): runs a command and
# fails the test, with the command's output, when it exits non-zero.
#   distattn_run_checked(<what> <output variable> <command> [args...])
function(distattn_run_checked what out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${_rc}):\n${_out}\n${_err}")
  endif()
  set(${out_var} "${_out}" PARENT_SCOPE)
endfunction()
