// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm/impl/entry_agreement.hpp
/// How the ranks of an executor agree before they communicate: at construction
/// (agree_construction) and at the entry of every pass (EntryAgreement). Each
/// rank checks its own arguments, then one small all-gather shares every rank's
/// outcome and configuration, so a bad argument or a differing option on one rank
/// raises InvalidArgument on all of them instead of a hang or a silently wrong
/// result.

#include <DistAttn/comm.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/executor/executor_options.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace DistAttn::Impl {

/// One named value of an executor's configuration; every rank must hold the same.
/// `show` prints the value in a mismatch message (null: as an integer).
struct ConfigField {
  const char* name;
  std::int64_t value;
  std::string (*show)(std::int64_t) = nullptr;
};

/// A floating-point option, compared bit for bit.
inline ConfigField real_field(const char* name, double v) {
  std::int64_t bits = 0;
  static_assert(sizeof bits == sizeof v, "double must be 64 bits");
  std::memcpy(&bits, &v, sizeof v);
  return {name, bits, [](std::int64_t b) {
            double d = 0;
            std::memcpy(&d, &b, sizeof d);
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.17g", d);
            return std::string(buf);
          }};
}

inline ConfigField bool_field(const char* name, bool v) {
  return {name, v ? 1 : 0, [](std::int64_t b) { return std::string(b ? "true" : "false"); }};
}

/// An enum option, printed by its to_string().
template <class E>
ConfigField enum_field(const char* name, E v) {
  return {name, std::int64_t(v), [](std::int64_t x) { return std::string(to_string(E(x))); }};
}

/// FNV-1a of the document offsets: the ranks must hold the same ones, and the
/// agreement exchanges fixed-size fields only.
inline std::int64_t offsets_hash(const std::vector<std::int64_t>& offsets) {
  std::uint64_t x = 14695981039346656037ull;
  for (std::int64_t o : offsets)
    for (int b = 0; b < 8; ++b) x = (x ^ ((std::uint64_t(o) >> (8 * b)) & 0xffu)) * 1099511628211ull;
  return std::int64_t(x);
}

/// The fields of ExecutorOptions that change what a pass computes or whether it
/// communicates. Not listed: fence_each_pass and recv_delay_ms (timing only) and
/// memory_limit_bytes (a rank's own budget; the ranks settle the head group it
/// implies through EntryAgreement::propose). TestOptionAgreement counts the
/// options structs' fields, so a new one cannot be left out unnoticed.
inline std::vector<ConfigField> option_fields(const ExecutorOptions& o, int head_dim) {
  return {bool_field("causal", o.causal),
          {"window_left", o.window.left},
          {"window_right", o.window.right},
          {"documents", std::int64_t(o.documents.size())},
          {"document_offsets_hash", offsets_hash(o.documents)},
          real_field("scale", resolved_scale(o.attn, head_dim)),
          enum_field("kernel_path", o.attn.path),
          bool_field("check_finite", o.attn.check_finite),
          bool_field("deterministic", o.attn.deterministic),
          bool_field("compute_only", o.compute_only),
          {"head_group", o.head_group}};
}

/// `a` followed by `b`.
inline std::vector<ConfigField> operator+(std::vector<ConfigField> a, const std::vector<ConfigField>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// The collective step of the entry check (see the file comment). Owns the small
/// buffers of its all-gather, so a pass allocates nothing after the first.
template <class CommSpace, class Exec>
class EntryAgreement {
 public:
  using Comm = Communicator<CommSpace, Exec>;
  using Mem  = typename Exec::memory_space;

  /// A value this rank proposes in the next run() (inside local_checks); after it,
  /// agreed_minimum() is the smallest any rank proposed (max() if none did): how
  /// ranks settle a choice that depends on local state, such as free memory.
  void propose(std::int64_t v) { proposal_ = v; }
  std::int64_t agreed_minimum() const { return agreed_; }
  /// A yes/no this rank votes in the next run() (inside local_checks); after it,
  /// unanimous() is true only if every rank voted yes (no vote counts as no): how
  /// ranks settle a shortcut that is safe only where every rank can take it.
  void vote(bool yes) { vote_ = yes; }
  bool unanimous() const { return unanimous_; }

  /// Bytes of the all-gather buffers the first run() allocates on a group of P ranks.
  static constexpr std::size_t buffer_bytes(int P) { return std::size_t(kWords) * sizeof(std::int64_t) * (1 + P); }

  /// Runs `local_checks` (which throws InvalidArgument on a bad argument), then
  /// all-gathers every rank's outcome and configuration. Returns only when every
  /// rank's checks passed and all configurations agree; otherwise throws
  /// InvalidArgument on every rank, prefixed with the failing rank: its own error
  /// on a rank that raised one, the first failing rank's on the others.
  template <class F>
  void run(Comm& comm, const char* where, const std::vector<ConfigField>& config, F&& local_checks) {
    bool own = false;
    std::string own_msg;
    try {
      local_checks();
    } catch (const InvalidArgument& e) {
      own     = true;
      own_msg = e.what();
    }
    DISTATTN_REQUIRE(config.size() <= std::size_t(kFields), where, "too many configuration fields");
    const int P = comm.size();
    if (send_.extent(0) == 0) {
      send_ = Kokkos::View<std::int64_t*, Mem>("DistAttn::entry_check.send", kWords);
      recv_ = Kokkos::View<std::int64_t*, Mem>("DistAttn::entry_check.recv", std::size_t(kWords) * P);
      hs_   = Kokkos::create_mirror_view(send_);  // kept: host mirrors of device buffers are allocations too
      hr_   = Kokkos::create_mirror_view(recv_);
    }
    const auto& hs = hs_;
    Kokkos::deep_copy(hs, std::int64_t(0));
    hs(0)         = own ? 1 : 0;
    hs(1)         = std::int64_t(config.size());
    hs(kProposal) = proposal_;
    hs(kVote)     = vote_ ? 1 : 0;
    proposal_     = std::numeric_limits<std::int64_t>::max();
    vote_         = false;
    for (std::size_t i = 0; i < config.size(); ++i) hs(2 + i) = config[i].value;
    const std::size_t n = std::min(own_msg.size(), std::size_t(kMsgChars));
    std::memcpy(reinterpret_cast<char*>(hs.data() + kMsgWord), own_msg.data(), n);
    Kokkos::deep_copy(send_, hs);
    all_gather(comm, send_, recv_).wait();
    const auto& hr = hr_;
    Kokkos::deep_copy(hr, recv_);

    const std::int64_t* mine = hr.data() + std::size_t(kWords) * comm.rank();
    for (int r = 0; r < P; ++r) {
      const std::int64_t* theirs = hr.data() + std::size_t(kWords) * r;
      if (!std::equal(mine + 1, mine + 2 + config.size(), theirs + 1))
        throw_invalid_argument(where, mismatch_message(hr.data(), P, config));
    }
    agreed_    = std::numeric_limits<std::int64_t>::max();
    unanimous_ = true;
    for (int r = 0; r < P; ++r) {
      agreed_ = std::min(agreed_, hr(std::size_t(kWords) * r + kProposal));
      unanimous_ &= hr(std::size_t(kWords) * r + kVote) != 0;
    }
    int first = -1, failed = 0;
    for (int r = 0; r < P; ++r)
      if (hr(std::size_t(kWords) * r) != 0) {
        if (first < 0) first = r;
        ++failed;
      }
    if (failed == 0) return;
    // A failing rank reports its own error (untruncated), the others the first failing rank's.
    const int shown = own ? comm.rank() : first;
    std::string msg = own_msg;
    if (!own) {
      const char* m = reinterpret_cast<const char*>(hr.data() + std::size_t(kWords) * first + kMsgWord);
      msg           = std::string(m, strnlen(m, kMsgChars));
    }
    std::ostringstream os;
    os << "rank " << shown << " rejected its arguments";
    if (failed > 1) os << " (" << failed << " ranks did)";
    os << ": " << msg;
    throw_invalid_argument(where, os.str());
  }

 private:
  // Per rank: [0] status, [1] field count, [2, 2 + kFields) fields, the proposal,
  // the vote, then the message.
  static constexpr int kFields   = 32;
  static constexpr int kProposal = 2 + kFields;
  static constexpr int kVote     = 3 + kFields;
  static constexpr int kMsgWord  = 4 + kFields;
  static constexpr int kWords    = 96;
  static constexpr int kMsgChars = (kWords - kMsgWord) * int(sizeof(std::int64_t)) - 1;

  /// Names each field that differs with the ranks holding each value, e.g.
  /// "scale differs: 0.125 on ranks 0, 2, 3; 0.25 on rank 1".
  static std::string mismatch_message(const std::int64_t* all, int P, const std::vector<ConfigField>& config) {
    auto word = [&](int r, std::size_t i) { return all[std::size_t(kWords) * r + i]; };
    std::ostringstream os;
    os << "ranks were configured differently (every rank must build the executor with the same extents and "
          "options, and call the same pass):";
    bool counts_differ = false;
    for (int r = 1; r < P; ++r) counts_differ |= word(r, 1) != word(0, 1);
    if (counts_differ) {
      os << " the ranks run different executors (their configurations have different fields)";
      return os.str();
    }
    const char* sep = " ";
    for (std::size_t i = 0; i < config.size(); ++i) {
      std::map<std::int64_t, std::vector<int>> holders;
      for (int r = 0; r < P; ++r) holders[word(r, 2 + i)].push_back(r);
      if (holders.size() < 2) continue;
      os << sep << config[i].name << " differs:";
      const char* vsep = " ";
      for (const auto& [value, ranks] : holders) {
        os << vsep << (config[i].show ? config[i].show(value) : std::to_string(value)) << " on rank"
           << (ranks.size() > 1 ? "s" : "");
        for (std::size_t j = 0; j < ranks.size(); ++j) os << (j ? ", " : " ") << ranks[j];
        vsep = "; ";
      }
      sep = ". ";
    }
    return os.str();
  }

  Kokkos::View<std::int64_t*, Mem> send_, recv_;
  typename Kokkos::View<std::int64_t*, Mem>::HostMirror hs_, hr_;
  std::int64_t proposal_ = std::numeric_limits<std::int64_t>::max(), agreed_ = proposal_;
  bool vote_ = false, unanimous_ = false;
};

/// The first step of an executor's constructor that communicates or that any rank
/// may reject: runs `local_checks` and agrees on the outcome and on `config` with
/// every rank of `comm` before any other collective, so a rank whose own arguments
/// are bad fails on every rank instead of leaving the others blocked in a
/// communicator split or duplicate. Returns `comm` (for a member initializer).
template <class CommSpace, class Exec, class F>
Communicator<CommSpace, Exec>& agree_construction(Communicator<CommSpace, Exec>& comm, const char* where,
                                                  const std::vector<ConfigField>& config, F&& local_checks) {
  EntryAgreement<CommSpace, Exec> agreement;
  agreement.run(comm, where, config, std::forward<F>(local_checks));
  return comm;
}

}  // namespace DistAttn::Impl
