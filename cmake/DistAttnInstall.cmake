# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
include(CMakePackageConfigHelpers)
set(DISTATTN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/DistAttn)

install(TARGETS distattn EXPORT DistAttnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILE_SET impl_headers DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT DistAttnTargets NAMESPACE DistAttn:: DESTINATION ${DISTATTN_INSTALL_CMAKEDIR})

configure_package_config_file(cmake/DistAttnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/DistAttnConfig.cmake INSTALL_DESTINATION ${DISTATTN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/DistAttnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/DistAttnConfig.cmake ${PROJECT_BINARY_DIR}/DistAttnConfigVersion.cmake
  cmake/DistAttnDependencies.cmake DESTINATION ${DISTATTN_INSTALL_CMAKEDIR})

# The license travels with every install and package made from it.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
