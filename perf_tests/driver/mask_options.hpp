// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run's mask options: --window L[,R] and --docs FILE (one document length
// per line, summing to --seq). Parsed here into the library's vocabulary
// (core/mask.hpp's Window, ExecutorOptions::documents as global offsets), so the
// executors, the cost model's ranking, the fp64 check and the FLOP count all read
// one rule.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/mask.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace DistAttn::Driver {

/// A whole decimal number >= 0 from `s` (no sign, no junk), or -1.
inline std::int64_t parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18) return -1;
  std::int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

/// "L" or "L,R" (tokens, >= 0): the CLI11 validator's message, or "" if valid.
inline std::string check_window(const std::string& text) {
  const auto comma = text.find(',');
  const std::string l = text.substr(0, comma), r = comma == std::string::npos ? "0" : text.substr(comma + 1);
  if (parse_count(l) >= 0 && parse_count(r) >= 0) return "";
  return "'" + text + "' is not L or L,R with whole numbers of tokens >= 0 (e.g. 4096 or 128,128)";
}

/// --window as the library's Window; the text passed check_window.
inline Window parse_window(const std::string& text) {
  const auto comma = text.find(',');
  return Window{parse_count(text.substr(0, comma)),
                comma == std::string::npos ? 0 : parse_count(text.substr(comma + 1))};
}

/// The document offsets (cu_seqlens: 0, then the running sum) of a --docs file of
/// one length per line summing to `seq`; blank lines are skipped. Throws
/// InvalidArgument naming --docs, the file and the line.
inline std::vector<std::int64_t> read_docs_file(const std::string& path, long seq) {
  const std::string name = "--docs '" + path + "'";
  errno                  = 0;
  std::ifstream in(path);
  if (!in) throw InvalidArgument(name + " cannot be read: " + (errno != 0 ? std::strerror(errno) : "open failed"));
  std::vector<std::int64_t> offsets{0};
  std::string line;
  for (long n = 1; std::getline(in, line); ++n) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last        = line.find_last_not_of(" \t\r");
    const std::string word = line.substr(first, last + 1 - first);
    const std::string at   = name + " line " + std::to_string(n) + ": '" + word + "'";
    const std::int64_t len = parse_count(word);
    if (len == 0 || (word[0] == '-' && parse_count(word.substr(1)) >= 0)) throw InvalidArgument(at + ": a document length must be >= 1");
    if (len < 0) throw InvalidArgument(at + " is not a document length (one whole number of tokens per line)");
    if (offsets.back() + len > seq)
      throw InvalidArgument(at + ": the lengths so far sum to " + std::to_string(offsets.back() + len) +
                            ", more than --seq " + std::to_string(seq));
    offsets.push_back(offsets.back() + len);
  }
  if (in.bad()) throw InvalidArgument(name + " cannot be read: " + std::strerror(errno));
  if (offsets.size() == 1) throw InvalidArgument(name + " holds no document lengths");
  if (offsets.back() != seq)
    throw InvalidArgument(name + ": the lengths sum to " + std::to_string(offsets.back()) + ", not --seq " +
                          std::to_string(seq));
  return offsets;
}

/// --window as text for the header: "-" when unbounded.
inline std::string window_text(const Window& w) {
  auto side = [](std::int64_t x) { return x >= kUnboundedSpan ? std::string("-") : std::to_string(x); };
  return side(w.left) + "," + side(w.right);
}

}  // namespace DistAttn::Driver
