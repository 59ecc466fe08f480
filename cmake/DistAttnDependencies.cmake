# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Finds Kokkos, Kokkos Kernels, MPI, NCCL and presents each as one stable target,
# whatever version or packaging provided it (Debian 12's Kokkos 3.4.01 or Kokkos 4.6.x).
# Used by the build and by the installed DistAttnConfig.cmake; there (DISTATTN_AS_DEPENDENCY
# set) packages are found with find_dependency, which forwards the consumer's QUIET and
# REQUIRED, and nothing is printed when the consumer asked for QUIET.

macro(_distattn_find pkg)
  if(DISTATTN_AS_DEPENDENCY)
    find_dependency(${pkg} ${ARGN})
  else()
    find_package(${pkg} REQUIRED ${ARGN})
  endif()
endmacro()

# A version argument to find_package(Kokkos) fails against 3.4.01's config, so check by hand.
# The installed config hints the locations the library was built with (no cache entry).
set(_da_kokkos_hints "")
set(_da_kk_hints "")
if(DISTATTN_AS_DEPENDENCY)
  set(_da_kokkos_hints HINTS "${DistAttn_Kokkos_DIR}")
  set(_da_kk_hints HINTS "${DistAttn_KokkosKernels_DIR}")
endif()
_distattn_find(Kokkos ${_da_kokkos_hints})
if(Kokkos_VERSION VERSION_LESS 3.4)
  message(FATAL_ERROR "DistAttn needs Kokkos >= 3.4, found ${Kokkos_VERSION}")
endif()
# Debian's exported Kokkos::kokkos names an include directory that does not exist.
if(Kokkos_INCLUDE_DIRS)
  get_target_property(_da_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  set(_da_fix FALSE)
  foreach(_d IN LISTS _da_kokkos_inc)
    if(NOT _d MATCHES "\\$<" AND NOT EXISTS "${_d}")
      set(_da_fix TRUE)
    endif()
  endforeach()
  if(_da_fix)
    set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${Kokkos_INCLUDE_DIRS}")
  endif()
endif()
if(NOT DistAttn_FIND_QUIETLY)
  message(STATUS "DistAttn: Kokkos ${Kokkos_VERSION} (devices: ${Kokkos_DEVICES})")
endif()

# A shared libdistattn built on a static Kokkos carries its own copy of Kokkos, and
# every executable that links both gets a second one: the two free the same
# globals at exit (seen as "double free" after the tests pass, 2026-11-23 on an
# H100). Loading only the shared library (the PyTorch binding) is fine.
if(BUILD_SHARED_LIBS AND NOT DISTATTN_AS_DEPENDENCY AND TARGET Kokkos::kokkoscore)
  get_target_property(_da_kokkos_type Kokkos::kokkoscore TYPE)
  if(_da_kokkos_type STREQUAL "STATIC_LIBRARY")
    message(WARNING "BUILD_SHARED_LIBS=ON with a static Kokkos: programs linking libdistattn.so and Kokkos hold two "
                    "copies of Kokkos and crash at exit. Use this build only for the C ABI / PyTorch binding, or "
                    "build Kokkos and Kokkos Kernels with -DBUILD_SHARED_LIBS=ON.")
  endif()
endif()

_distattn_find(KokkosKernels ${_da_kk_hints})
if(NOT TARGET DistAttn::kokkoskernels)
  add_library(DistAttn::kokkoskernels INTERFACE IMPORTED)
  if(TARGET Kokkos::kokkoskernels)
    set_target_properties(DistAttn::kokkoskernels PROPERTIES INTERFACE_LINK_LIBRARIES Kokkos::kokkoskernels)
  else()
    # Debian's Kokkos Kernels exports library names and an include directory, no target.
    set_target_properties(DistAttn::kokkoskernels PROPERTIES
      INTERFACE_LINK_LIBRARIES "${KokkosKernels_LIBRARIES}"
      INTERFACE_INCLUDE_DIRECTORIES "${KokkosKernels_INCLUDE_DIRS}"
      INTERFACE_LINK_DIRECTORIES "${KokkosKernels_LIBRARY_DIRS}")
  endif()
endif()

# The CPU tiles' products go to the BLAS behind Kokkos Kernels; Debian resolves
# libblas.so through an alternative, which is the slow reference BLAS unless
# OpenBLAS (or another optimized BLAS) is installed.
foreach(_da_lib IN LISTS KokkosKernels_TPL_LIBRARIES)
  if(_da_lib MATCHES "libblas\\.so$" AND EXISTS "${_da_lib}")
    get_filename_component(_da_blas "${_da_lib}" REALPATH)
    message(STATUS "DistAttn: Kokkos Kernels' BLAS resolves to ${_da_blas}")
    if(_da_blas MATCHES "/blas/libblas\\.so")
      message(WARNING "Kokkos Kernels' BLAS is the reference BLAS: the CPU attention tiles' products run 7-45x "
                      "slower. Install an optimized one (Debian: apt-get install libopenblas-dev).")
    endif()
  endif()
endforeach()

set(DISTATTN_KOKKOS_HAS_CUDA OFF)
if("CUDA" IN_LIST Kokkos_DEVICES OR Kokkos_ENABLE_CUDA)
  set(DISTATTN_KOKKOS_HAS_CUDA ON)
endif()

if(DISTATTN_KOKKOS_HAS_CUDA)  # cuBLAS for 16-bit projections (impl/cublas_gemm.hpp)
  _distattn_find(CUDAToolkit)
endif()

if(DistAttn_ENABLE_MPI)
  # DistAttn calls MPI's C API only. Without this, Open MPI 4's mpi.h pulls in the
  # C++ bindings (removed from the standard in MPI-3), and every program needs
  # libmpi_cxx, which Open MPI 5 no longer ships.
  set(MPI_CXX_SKIP_MPICXX ON)
  _distattn_find(MPI COMPONENTS CXX)
endif()

if(DistAttn_ENABLE_NCCL)
  if(NOT DISTATTN_KOKKOS_HAS_CUDA)
    message(FATAL_ERROR "DistAttn_ENABLE_NCCL needs a Kokkos built with the CUDA backend")
  endif()
  if(NOT DistAttn_ENABLE_MPI)
    message(FATAL_ERROR "DistAttn_ENABLE_NCCL needs DistAttn_ENABLE_MPI (the NCCL id is broadcast over MPI)")
  endif()
  if(NOT DISTATTN_AS_DEPENDENCY)  # the installed config sets both to the build's NCCL
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
              PATH_SUFFIXES include)
    find_library(NCCL_LIBRARY nccl HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
                 PATH_SUFFIXES lib lib64)
  endif()
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    message(FATAL_ERROR "NCCL not found: set NCCL_ROOT")
  endif()
  if(NOT TARGET DistAttn::nccl)
    add_library(DistAttn::nccl INTERFACE IMPORTED)
    set_target_properties(DistAttn::nccl PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES "${NCCL_LIBRARY};CUDA::cudart")
  endif()
endif()

if(DistAttn_ENABLE_CUDA_KERNELS AND NOT DISTATTN_KOKKOS_HAS_CUDA)
  message(FATAL_ERROR "DistAttn_ENABLE_CUDA_KERNELS needs a Kokkos built with the CUDA backend")
endif()
