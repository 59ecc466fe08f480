// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// distattn-run's mask options: --window L[,R] and --docs FILE (one document length
// per line, summing to --seq) or --docs dist:NAME:SEED (lengths drawn from a named
// distribution). Parsed here into the library's vocabulary
// (core/mask.hpp's Window, ExecutorOptions::documents as global offsets), so the
// executors, the cost model's ranking, the fp64 check and the FLOP count all read
// one rule.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/mask.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
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

/// Offsets of documents whose lengths are log-normal with mean `mean` and sigma 1
/// (a long tail: most documents short, a few many times the mean), each capped at
/// what is left of `seq`, so they sum to it exactly. The normal deviates come from
/// mt19937_64 by Box-Muller rather than std::lognormal_distribution, whose output
/// differs between standard libraries: a seed gives the same documents everywhere.
inline std::vector<std::int64_t> lognormal_docs(long seq, double mean, std::uint64_t seed) {
  const double sigma = 1.0, mu = std::log(mean) - sigma * sigma / 2;
  const double two_pi = 6.283185307179586;
  std::mt19937_64 gen(seed);
  auto uniform = [&gen] { return (double(gen() >> 11) + 1.0) * 0x1.0p-53; };  // (0, 1]
  std::vector<std::int64_t> offsets{0};
  while (offsets.back() < seq) {
    const double u1 = uniform(), u2 = uniform();  // in this order, for the same lengths on every compiler
    const double z  = std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
    const auto len  = std::max<std::int64_t>(1, std::llround(std::exp(mu + sigma * z)));
    offsets.push_back(offsets.back() + std::min<std::int64_t>(len, seq - offsets.back()));
  }
  return offsets;
}

/// --docs: a file of lengths, or dist:NAME:SEED for a named distribution
/// (lognormal8k: log-normal, mean 8192 tokens). Throws InvalidArgument naming --docs.
inline std::vector<std::int64_t> read_docs(const std::string& arg, long seq) {
  const std::string prefix = "dist:";
  if (arg.compare(0, prefix.size(), prefix) != 0) return read_docs_file(arg, seq);
  const auto colon       = arg.find(':', prefix.size());
  const std::string name = arg.substr(prefix.size(), colon == std::string::npos ? colon : colon - prefix.size());
  const std::int64_t seed = colon == std::string::npos ? -1 : parse_count(arg.substr(colon + 1));
  if (name != "lognormal8k" || seed < 0)
    throw InvalidArgument("--docs '" + arg + "' is not dist:NAME:SEED with NAME lognormal8k and a whole-number SEED");
  return lognormal_docs(seq, 8192.0, std::uint64_t(seed));
}

/// --window as text for the header: "-" when unbounded.
inline std::string window_text(const Window& w) {
  auto side = [](std::int64_t x) { return x >= kUnboundedSpan ? std::string("-") : std::to_string(x); };
  return side(w.left) + "," + side(w.right);
}

}  // namespace DistAttn::Driver
