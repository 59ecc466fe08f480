// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The command line split between Kokkos and the tool, so that --help starts with
// the tool's own options: Kokkos, handed --help, prints its 40 lines of options
// first. Kokkos gets everything but --help / -h; its own options stay behind
// --kokkos-help, which Kokkos answers. The tool then parses what Kokkos left (its
// --kokkos-* options removed), with --help put back, and --kokkos-help too: the
// tool must not go on to run after Kokkos printed its options (Kokkos 3.4 removes
// the option and returns).
//
//   Perf::KokkosArgs args(argc, argv);
//   Kokkos::ScopeGuard guard(args.kokkos_argc(), args.kokkos_argv());
//   parse(args.tool_argc(), args.tool_argv());

#include <algorithm>
#include <cstring>
#include <vector>

namespace DistAttn::Perf {

class KokkosArgs {
 public:
  KokkosArgs(int argc, char** argv) {
    for (int i = 0; i < argc; ++i) {
      if (i > 0 && (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0))
        help_ = argv[i];
      else
        kokkos_.push_back(argv[i]);
      if (std::strcmp(argv[i], "--kokkos-help") == 0) kokkos_help_ = argv[i];
    }
    kokkos_argc_ = int(kokkos_.size());
    kokkos_.push_back(nullptr);  // argv[argc] is a null pointer, as main's
  }
  KokkosArgs(const KokkosArgs&)            = delete;
  KokkosArgs& operator=(const KokkosArgs&) = delete;

  /// For Kokkos::initialize / ScopeGuard, which removes the options it takes.
  int& kokkos_argc() { return kokkos_argc_; }
  char** kokkos_argv() { return kokkos_.data(); }

  /// What Kokkos left, with --help back where it was asked for (at the end: CLI11
  /// answers it wherever it stands).
  /// Call after Kokkos is initialized.
  int tool_argc() { return int(tool().size()) - 1; }
  char** tool_argv() { return tool().data(); }

 private:
  std::vector<char*>& tool() {
    if (tool_.empty()) {
      tool_.assign(kokkos_.begin(), kokkos_.begin() + kokkos_argc_);
      if (help_ != nullptr) tool_.push_back(help_);
      if (kokkos_help_ != nullptr && std::find(tool_.begin(), tool_.end(), kokkos_help_) == tool_.end())
        tool_.push_back(kokkos_help_);
      tool_.push_back(nullptr);
    }
    return tool_;
  }
  std::vector<char*> kokkos_, tool_;
  int kokkos_argc_ = 0;
  char* help_      = nullptr;
  char* kokkos_help_ = nullptr;
};

}  // namespace DistAttn::Perf
