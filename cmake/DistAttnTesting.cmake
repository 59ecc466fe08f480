# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# distattn_add_unit_test(name FILES f... [MPI NP n...] [TIMEOUT s])
# Single-process tests run directly; MPI tests run once per rank count through
# MPIEXEC_EXECUTABLE / MPIEXEC_NUMPROC_FLAG / MPIEXEC_PREFLAGS (never a bare mpirun:
# root or oversubscribed runs put their flags in MPIEXEC_PREFLAGS).
# distattn_filter_ranks(out what np...): the rank counts the launcher can start, i.e.
# at most MPIEXEC_MAX_NUMPROCS (FindMPI: this machine's cores unless set; .ci/setup.sh
# raises it together with --oversubscribe). Dropped counts are reported, never run.
function(distattn_filter_ranks out what)
  set(kept "")
  foreach(np IN LISTS ARGN)
    if(NOT MPIEXEC_MAX_NUMPROCS OR np LESS_EQUAL MPIEXEC_MAX_NUMPROCS)
      list(APPEND kept ${np})
    else()
      list(APPEND _dropped ${np})
    endif()
  endforeach()
  if(_dropped)
    message(STATUS "DistAttn: ${what} on ${_dropped} ranks not registered "
                   "(MPIEXEC_MAX_NUMPROCS=${MPIEXEC_MAX_NUMPROCS})")
  endif()
  set(${out} ${kept} PARENT_SCOPE)
endfunction()

function(distattn_add_unit_test name)
  cmake_parse_arguments(T "MPI" "TIMEOUT" "FILES;NP" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set(exe distattn_test_${name})
  if(T_MPI)
    add_executable(${exe} ${T_FILES} ${PROJECT_SOURCE_DIR}/unit_tests/mpi_main.cpp)
  else()
    add_executable(${exe} ${T_FILES} ${PROJECT_SOURCE_DIR}/unit_tests/main.cpp)
  endif()
  target_link_libraries(${exe} PRIVATE DistAttn::distattn DistAttn::testing GTest::gtest)
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/unit_tests)
  if(T_MPI)
    distattn_filter_ranks(T_NP ${name} ${T_NP})
    foreach(np IN LISTS T_NP)
      add_test(NAME ${name}_np${np}
        COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                $<TARGET_FILE:${exe}> ${MPIEXEC_POSTFLAGS})
      set_tests_properties(${name}_np${np} PROPERTIES PROCESSORS ${np} LABELS "mpi" TIMEOUT ${T_TIMEOUT})
    endforeach()
  else()
    add_test(NAME ${name} COMMAND ${exe})
    set_tests_properties(${name} PROPERTIES LABELS "unit" TIMEOUT ${T_TIMEOUT})
  endif()
endfunction()

# GPU tests. DistAttn_TEST_GPUS is the GPUs of a test node (nvidia-smi at configure
# time, 1 when it finds none); NCCL tests start one rank per GPU, so they register
# with that many ranks. Each GPU test holds its GPUs through a CTest resource group
# ("gpus" slots, one per rank), so `ctest -j N --resource-spec-file
# <build>/gpu_resources.json` never runs two of them on the same GPUs at once.
if(DISTATTN_KOKKOS_HAS_CUDA)
  if(NOT DEFINED DistAttn_TEST_GPUS)
    execute_process(COMMAND nvidia-smi -L OUTPUT_VARIABLE _da_gpus ERROR_QUIET RESULT_VARIABLE _da_smi)
    string(REGEX MATCHALL "GPU [0-9]+:" _da_gpu_list "${_da_gpus}")
    list(LENGTH _da_gpu_list _da_ngpu)
    if(NOT _da_smi EQUAL 0 OR _da_ngpu EQUAL 0)
      set(_da_ngpu 1)
    endif()
    set(DistAttn_TEST_GPUS ${_da_ngpu} CACHE STRING "GPUs of a test node (NCCL tests use one rank per GPU)")
  endif()
  set(_da_gpu_slots "")
  math(EXPR _da_last_gpu "${DistAttn_TEST_GPUS} - 1")
  foreach(g RANGE ${_da_last_gpu})
    if(_da_gpu_slots)
      string(APPEND _da_gpu_slots ", ")
    endif()
    string(APPEND _da_gpu_slots "{\"id\": \"${g}\", \"slots\": 1}")
  endforeach()
  file(WRITE ${PROJECT_BINARY_DIR}/gpu_resources.json
       "{\"version\": {\"major\": 1, \"minor\": 0}, \"local\": [{\"gpus\": [${_da_gpu_slots}]}]}\n")
endif()

# distattn_gpu_test(test ranks): labels `test` gpu and gives it one GPU per rank.
function(distattn_gpu_test name ranks)
  set_property(TEST ${name} APPEND PROPERTY LABELS gpu)
  set_property(TEST ${name} PROPERTY RESOURCE_GROUPS "${ranks},gpus:1")
endfunction()
