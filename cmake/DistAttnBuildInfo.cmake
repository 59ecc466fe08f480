# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# cmake -P script run at every build (target distattn_build_info): writes the
# source tree's git commit into a header for distattn-run's --json context. It
# runs at build time, not configure time, so a rebuild after a new commit records
# the new hash; the header is rewritten only when the hash changes, so an
# unchanged tree recompiles nothing.
# Variables: SOURCE_DIR, OUTPUT (the header).
set(_hash "unknown")
set(_dirty 0)
find_program(_git git)
if(_git)
  execute_process(COMMAND ${_git} -C "${SOURCE_DIR}" rev-parse HEAD
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0)
    set(_hash "${_out}")
    # Tracked files changed since that commit: the binary is not exactly the commit.
    execute_process(COMMAND ${_git} -C "${SOURCE_DIR}" diff-index --quiet HEAD --
      RESULT_VARIABLE _rc ERROR_QUIET)
    if(NOT _rc EQUAL 0)
      set(_dirty 1)
    endif()
  endif()
endif()
set(_text "// Generated at build time by cmake/DistAttnBuildInfo.cmake.\n#pragma once\n#define DISTATTN_GIT_HASH \"${_hash}\"\n#define DISTATTN_GIT_DIRTY ${_dirty}\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" _old)
  if(_old STREQUAL _text)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${_text}")
