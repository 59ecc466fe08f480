# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Tests of the install (label install), sharing one test install in the build
# tree (fixture distattn_install):
#   install_tree         installs, then checks the tree (library, package files,
#                        license, tools in bin/, plot script and tile tables in
#                        share/distattn/, no testing headers) and each tool's --help;
#   install_and_consume  builds unit_tests/install_test, which knows only
#                        find_package(DistAttn), against that prefix and runs it.
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
          -DCXX_COMPILER=${CMAKE_CXX_COMPILER} -DKokkos_DIR=${Kokkos_DIR}
          -P ${PROJECT_SOURCE_DIR}/cmake/DistAttnInstallTest.cmake)
set_tests_properties(install_and_consume PROPERTIES LABELS "install" TIMEOUT 600 FIXTURES_REQUIRED distattn_install)
