#pragma once
// Command-line parsing shared by the driver and the perf tests, on CLI11 (Debian
// libcli11-dev): numbers are parsed strictly (a fraction, trailing junk or a value
// out of range is an error), and every error names the option and its valid
// range or choices. This file holds only what both programs need on top of CLI11.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <CLI/CLI.hpp>

#include <limits>
#include <string>
#include <vector>

namespace DistAttn::Perf {

/// Element types this build can run (the 16-bit ones need a CUDA build).
inline std::vector<std::string> dtype_choices() {
  std::vector<std::string> c{"float", "double"};
#if defined(KOKKOS_ENABLE_CUDA)
  if (compat::has_bhalf) c.push_back("bf16");
  if (compat::has_half) c.push_back("fp16");
#endif
  return c;
}

/// Integers in [lo, the type's maximum].
template <class T>
CLI::Range at_least(T lo) {
  return CLI::Range(lo, std::numeric_limits<T>::max());
}

/// A sequence length: an integer with an optional binary suffix (4K = 4096), >= 1.
template <class T>
CLI::Option* add_length(CLI::App& app, const std::string& names, T& value, const std::string& help) {
  return app.add_option(names, value, help)
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(T(1), T(std::numeric_limits<int>::max())))
      ->capture_default_str();
}

/// Parses argv into the options bound to `app`. Returns false after -h/--help
/// (the caller prints app.help()); throws InvalidArgument with CLI11's message
/// (option, value, valid range or choices) on any error.
inline bool parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return false;
  } catch (const CLI::ParseError& e) {
    throw InvalidArgument(std::string(e.what()) + " (--help lists the options)");
  }
  return true;
}

}  // namespace DistAttn::Perf
