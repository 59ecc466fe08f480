# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Script mode (cmake -P): configure, build and run the consumer in SOURCE_DIR
# against the test install at PREFIX only (made by the install_tree test).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}
                  -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                  -DKokkos_DIR=${Kokkos_DIR}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer configure failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer build failed (${rc})")
endif()
execute_process(COMMAND ${WORK_DIR}/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer run failed (${rc})")
endif()
