/* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception */
/* The package tests' libdistattn.so in a build with a static libdistattn.a
 * (python/CMakeLists.txt): the whole archive is linked in; this file only gives
 * the shared library target a source. */
#include <DistAttn/c/distattn.h>

int distattn_python_test_library_api_version(void) { return DISTATTN_C_API_VERSION; }
