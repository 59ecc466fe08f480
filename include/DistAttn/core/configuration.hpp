// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Build and runtime configuration, printed in perf-test and driver preambles.

#include <iosfwd>
#include <string>

namespace DistAttn {

/// Library version, e.g. "0.1.0".
std::string version();

/// One line per fact: DistAttn version and options, Kokkos version and backend,
/// communication backends. Used as the header of every perf table.
void print_configuration(std::ostream& os);

}  // namespace DistAttn
