#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The CPU suite once more, built with AddressSanitizer and UndefinedBehaviorSanitizer
# (part of .ci/run). Leak detection is off: Open MPI keeps its allocations until
# exit by design, and every rank would report them. -O1 without debug information
# keeps the build short (2 cores); reports still name the functions. The driver (distattn-run)
# and its tests are in (about 1.5 minutes of tests): its own code (options, bounded collectives,
# memory check, gathers) is covered nowhere else, and a driver test that passes on its output
# also fails on a sanitizer report (perf_tests/CMakeLists.txt). The install test, the perf
# tests and the example programs are left out: they exercise no library code the unit tests do
# not (the examples took 3 of the sanitized suite's 6 minutes of tests).
set -euo pipefail
SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export BUILD_DIR=${SANITIZE_BUILD_DIR:-$SRC_DIR/build-sanitize}
export CMAKE_EXTRA_ARGS="-DDistAttn_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DDistAttn_ENABLE_INSTALL_TEST=OFF -DDistAttn_ENABLE_DRIVER=ON -DDistAttn_ENABLE_PERFTESTS=OFF -DDistAttn_ENABLE_EXAMPLES=OFF ${CMAKE_EXTRA_ARGS:-}"
source "$SRC_DIR/.ci/setup.sh"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 -j "${CTEST_JOBS:-1}"
