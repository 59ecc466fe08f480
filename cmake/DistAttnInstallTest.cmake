# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Script mode (cmake -P): configure and build the outside project in SOURCE_DIR
# against the test install at PREFIX only (made by the install_tree test), then
# run RUN (a program of that build, optional).
# Variables: PREFIX, SOURCE_DIR, WORK_DIR (its build directory), CXX_COMPILER,
# Kokkos_DIR, JOBS (optional), RUN (optional).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}
                  -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                  -DKokkos_DIR=${Kokkos_DIR} -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configure of ${SOURCE_DIR} failed (${rc})")
endif()
if(NOT JOBS)
  set(JOBS 1)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR} --parallel ${JOBS} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "build of ${SOURCE_DIR} failed (${rc})")
endif()
if(RUN)
  execute_process(COMMAND ${WORK_DIR}/${RUN} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${RUN} failed (${rc})")
  endif()
endif()
