#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# README's main command: set up, build, run the driver on CPU MPI ranks with a
# correctness check against the fp64 reference. Extra arguments go to the driver.
set -euo pipefail
# The driver alone: the tests and the other tools are the test command's (test.sh).
DISTATTN_BUILD_TARGETS=distattn-run
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
RANKS=${RANKS:-4}
exec mpiexec -n "$RANKS" $MPIEXEC_PREFLAGS "$BUILD_DIR/perf_tests/distattn-run" --check "$@"
