// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Command-line parsing shared by the driver and the perf tests, on CLI11 (Debian
// libcli11-dev): numbers are parsed strictly and in decimal (a fraction, trailing
// junk, a base prefix or a value out of range is an error), and every error names the option and its valid
// range or choices. This file holds only what both programs need on top of CLI11.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <CLI/CLI.hpp>

#include <cctype>
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

/// Lists --kokkos-help among the tool's options. Kokkos has printed its own by the
/// time the tool parses; the tool then prints its help and stops, as for --help
/// (parse_command_line, args.hpp).
inline void add_kokkos_help(CLI::App& app) {
  if (app.get_option_no_throw("--kokkos-help") == nullptr)
    app.add_flag("--kokkos-help", "print Kokkos' own options (threads, device id, tools, ...), then these");
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

/// Numbers on the command line are decimal. CLI11 reads integers with strtoll's
/// base 0, so "0100" would be octal 64 and "0x40" hexadecimal: this transform drops
/// leading zeros ("0100" -> "100", "-007" -> "-7") and rejects a base prefix.
inline CLI::Validator decimal_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const std::size_t i = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
        auto digit          = [&](std::size_t k) { return k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])); };
        if (s.size() > i + 2 && s[i] == '0' && std::string("xXoObB").find(s[i + 1]) != std::string::npos &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2])))
          return "'" + s + "' is not a decimal number";
        std::size_t j = i;
        while (s[j] == '0' && digit(j + 1)) ++j;
        s.erase(i, j - i);
        return "";
      },
      "", "decimal");
}

/// Adds decimal_number() in front of the other transforms of every numeric option of `app`.
inline void decimal_numbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string t = opt->get_type_name();
    if (t.rfind("INT", 0) == 0 || t.rfind("UINT", 0) == 0 || t.rfind("FLOAT", 0) == 0) opt->transform(decimal_number());
  }
}

/// Parses argv into the options bound to `app`. Returns false after -h/--help
/// (the caller prints app.help()); throws InvalidArgument with CLI11's message
/// (option, value, valid range or choices) on any error.
inline bool parse_command_line(CLI::App& app, int argc, char** argv) {
  add_kokkos_help(app);
  decimal_numbers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return false;
  } catch (const CLI::ParseError& e) {
    throw InvalidArgument(std::string(e.what()) + " (--help lists the options)");
  }
  return app.count("--kokkos-help") == 0;
}

}  // namespace DistAttn::Perf
