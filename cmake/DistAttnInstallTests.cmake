# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Tests of the install (label install), sharing one test install in the build
# tree (fixture distattn_install):
#   install_tree         installs, then checks the tree (library, package files,
#                        license, tools in bin/, plot script and tile tables in
#                        share/distattn/, no testing headers) and each tool's --help;
#   install_and_consume  builds unit_tests/install_test, which knows only
#                        find_package(DistAttn), against that prefix and runs it;
#   examples_build       builds examples/ (the programs of docs/api.md) against that
#                        prefix as an outside project (fixture distattn_examples),
#   example_*            and runs them on 2 to 5 ranks, and on a rank count one
#                        of them rejects (one message, exit status 2, no abort).
set(_da_install_prefix ${PROJECT_BINARY_DIR}/install_test/prefix)
set(_da_host_build ON)  # the driver's shipped CPU tile table applies
if(DISTATTN_KOKKOS_HAS_CUDA)
  set(_da_host_build OFF)
endif()
add_test(NAME install_tree
  COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DPREFIX=${_da_install_prefix}
          "-DTOOLS=${DISTATTN_INSTALLED_TOOLS}" -DBINDIR=${CMAKE_INSTALL_BINDIR} -DDATADIR=${CMAKE_INSTALL_DATADIR}
          -DLIBDIR=${CMAKE_INSTALL_LIBDIR} -DINCLUDEDIR=${CMAKE_INSTALL_INCLUDEDIR} -DDOCDIR=${CMAKE_INSTALL_DOCDIR}
          -DHOST_BUILD=${_da_host_build}
          -P ${PROJECT_SOURCE_DIR}/cmake/DistAttnInstallTreeTest.cmake)
set_tests_properties(install_tree PROPERTIES LABELS "install" TIMEOUT 300 FIXTURES_SETUP distattn_install)

add_test(NAME install_and_consume
  COMMAND ${CMAKE_COMMAND} -DPREFIX=${_da_install_prefix}
          -DSOURCE_DIR=${PROJECT_SOURCE_DIR}/unit_tests/install_test
          -DWORK_DIR=${PROJECT_BINARY_DIR}/install_test/consumer
          -DCXX_COMPILER=${CMAKE_CXX_COMPILER} -DKokkos_DIR=${Kokkos_DIR} -DRUN=consumer
          -P ${PROJECT_SOURCE_DIR}/cmake/DistAttnInstallTest.cmake)
set_tests_properties(install_and_consume PROPERTIES LABELS "install" TIMEOUT 600 FIXTURES_REQUIRED distattn_install)

if(DistAttn_ENABLE_EXAMPLES AND DistAttn_ENABLE_MPI)
  set(_da_examples_dir ${PROJECT_BINARY_DIR}/examples_outside)
  cmake_host_system_information(RESULT _da_cores QUERY NUMBER_OF_LOGICAL_CORES)
  add_test(NAME examples_build
    COMMAND ${CMAKE_COMMAND} -DPREFIX=${_da_install_prefix} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}/examples
            -DWORK_DIR=${_da_examples_dir} -DCXX_COMPILER=${CMAKE_CXX_COMPILER} -DKokkos_DIR=${Kokkos_DIR}
            -DJOBS=${_da_cores} -P ${PROJECT_SOURCE_DIR}/cmake/DistAttnInstallTest.cmake)
  set_tests_properties(examples_build PROPERTIES LABELS "install;example" TIMEOUT 900 RUN_SERIAL TRUE
    FIXTURES_REQUIRED distattn_install FIXTURES_SETUP distattn_examples)

  # example_<exe>[_<variant>]_np<n> for each rank count n (N = 1001, which none
  # of them divides, so every run pads).
  function(distattn_add_example exe variant)
    distattn_filter_ranks(nps example_${exe} ${ARGN})
    set(name example_${exe})
    if(NOT variant STREQUAL "")  # not if(variant): "no" is false to CMake
      set(name ${name}_${variant})
    endif()
    foreach(np IN LISTS nps)
      add_test(NAME ${name}_np${np}
        COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                ${_da_examples_dir}/example_${exe} ${MPIEXEC_POSTFLAGS} ${variant})
      set_tests_properties(${name}_np${np} PROPERTIES PROCESSORS ${np} LABELS "mpi;example" TIMEOUT 300
        FIXTURES_REQUIRED distattn_examples PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")
    endforeach()
  endfunction()
  distattn_add_example(ring zigzag 3 5)
  distattn_add_example(ring balanced 3)
  distattn_add_example(ring vanilla 2)
  distattn_add_example(grid2d no 3 5)
  distattn_add_example(grid2d o 4)
  distattn_add_example(ulysses "" 2 3)
  distattn_add_example(hybrid "" 4)
  # A rank count the executor cannot use (Ulysses: 4 does not divide 6 heads):
  # status 2 and the library's reason once, not an abort on every rank.
  distattn_filter_ranks(_da_np example_ulysses_wrong_ranks 4)
  if(_da_np)
    add_test(NAME example_ulysses_wrong_ranks_np4
      COMMAND ${CMAKE_COMMAND} -DEXPECT_RC=2 "-DEXPECT_ONCE=heads [(]6[)] must be divisible by the number of ranks P=4"
              "-DCOMMAND=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};4;${MPIEXEC_PREFLAGS};${_da_examples_dir}/example_ulysses;${MPIEXEC_POSTFLAGS}"
              -P ${PROJECT_SOURCE_DIR}/cmake/DistAttnExpectRun.cmake)
    set_tests_properties(example_ulysses_wrong_ranks_np4 PROPERTIES PROCESSORS 4 LABELS "mpi;example;bad_input"
      TIMEOUT 120 FIXTURES_REQUIRED distattn_examples)
  endif()
endif()
