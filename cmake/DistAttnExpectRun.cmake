# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ctest -P script: runs a command and checks its exit status, for tests that need
# one status exactly (ctest's own check knows only zero and non-zero).
# Variables: COMMAND (;-list), EXPECT_RC (the status), EXPECT_REGEX (optional: the
# combined output must match it), EXPECT_ONCE (optional: the combined output must
# match it exactly once), ENV (optional ;-list of NAME=VALUE for the command).
execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ENV} ${COMMAND}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT "${_rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit status ${_rc}, expected ${EXPECT_RC}:\n${_out}\n${_err}")
endif()
if(DEFINED EXPECT_REGEX AND NOT "${_out}\n${_err}" MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "the output does not match '${EXPECT_REGEX}':\n${_out}\n${_err}")
endif()
if(DEFINED EXPECT_ONCE)
  string(REGEX MATCHALL "${EXPECT_ONCE}" _hits "${_out}\n${_err}")
  list(LENGTH _hits _n)
  if(NOT _n EQUAL 1)
    message(FATAL_ERROR "the output matches '${EXPECT_ONCE}' ${_n} times, not once:\n${_out}\n${_err}")
  endif()
endif()
message("exit status ${_rc} as expected")
