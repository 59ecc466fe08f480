// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file tile_throughput.hpp
/// Measured speed of the building block (attention_fwd_update /
/// attention_bwd_update) per shape class, the compute input of the cost model.
///
/// A shape class is (direction, block kind, dtype, head_dim). A call on a block
/// with `pairs` kept (query, key) pairs and B*H query heads is predicted to take
///   overhead_s + flops / flops_per_s,   flops = 4 d B H pairs (forward), 2.5x that (backward),
/// the FLOP convention of docs/PERFORMANCE.md (a causal S x S problem keeps S(S+1)/2
/// pairs, i.e. about half). Full = no mask; Causal = a masked block whose kept pairs
/// form a staircase (the diagonal block of the ring, the half-chunk diagonals of
/// zigzag, Attention2D's cyclic blocks); its rate is per KEPT pair, so it absorbs
/// the work the kernel spends on partially masked tiles.
///
/// Stored as text, one class per line (`#` starts a comment):
///   tile <fwd|bwd> <full|causal> <dtype> <head_dim> <flops_per_s> <overhead_s> [<tile_rows> [per_head]]
///   elementwise <bytes_per_s>       (merges and gradient sums; 0 = not modelled)
///   copy <bytes_per_s>              (reorders: packing, interleaving, zeroing; 0 = not modelled)
///   reduce <bytes_per_s>            (one step of the backend's sum reduce-scatter, result bytes;
///                                    0 = priced as the link's transfer)
///   balance <seconds>               (CPU ranks outnumbering cores: the scheduler's balance time,
///                                    cost/core_balance.hpp; 0 = the fluid share)
///   heads <batch_heads> <factor> [<ranks_per_core>]
///                                   (a call's arithmetic time per head at that many heads over
///                                    the table's, measured with that many ranks per core, default 1;
///                                    none = 1 at every head count)
/// perf_tests/cost_calibrate writes such a file for the device it runs on.
///
/// tile_rows (optional, 0 = absent): the kernel computes whole tile_rows x
/// tile_rows tiles, so a block's work is counted in tiles (tile_pairs), not kept
/// pairs. It matters where blocks are not much larger than a tile: CPU ranks,
/// whose portable kernel works on 64-row tiles, running zigzag's half-chunks.
/// per_head (optional): overhead_s is charged once per batch x head of a call
/// (TileRate::overhead_per_head), as cost_calibrate measures it on host spaces.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/mask.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

namespace DistAttn {

/// Pairs a kernel that computes whole t x t tiles spends on the block of nq query
/// rows and nk key rows under mask m: every tile counts t * t pairs, partial last
/// tiles included, and each query tile visits the key tiles m.key_rows names (the
/// portable kernels' loops, impl/attn_fwd_portable.hpp). O(nq / t).
inline std::int64_t tile_pairs(const Mask& m, std::int64_t nq, std::int64_t nk, std::int64_t t) {
  DISTATTN_REQUIRE(nq >= 0 && nk >= 0 && t >= 1, "DistAttn::tile_pairs",
                   "row counts must be >= 0 and the tile >= 1 (nq=" << nq << ", nk=" << nk << ", t=" << t << ")");
  DISTATTN_REQUIRE(m.q.stride >= 1 && m.k.stride >= 1, "DistAttn::tile_pairs",
                   "strides must be >= 1 (query stride " << m.q.stride << ", key stride " << m.k.stride << ")");
  if (nq == 0 || nk == 0) return 0;
  std::int64_t tiles = 0;
  for (std::int64_t i0 = 0; i0 < nq; i0 += t) {
    const RowRange kt = m.key_rows(m.q(i0), m.q(std::min(i0 + t, nq) - 1), int(nk)).tiles(int(t));
    tiles += kt.end - kt.begin;
  }
  return tiles * t * t;
}

enum class TileDirection { Forward, Backward };
enum class BlockKind { Full, Causal };

struct ShapeClass {
  TileDirection direction = TileDirection::Forward;
  BlockKind kind = BlockKind::Full;
  std::string dtype = "bf16";  ///< as attn_perf's --dtype: bf16, fp16, float, double
  int head_dim = 128;
};

struct TileRate {
  double flops_per_s = 0;       ///< useful FLOPs per second (convention above)
  double overhead_s = 0;        ///< fixed cost of one call (launch, setup), or of one head of it
  std::int64_t tile_rows = 0;   ///< whole tiles of this many rows (0: pairs counted exactly)
  /// overhead_s is per batch x head of a call, not per call: the host kernels
  /// set up and finish each head on its own (the fitted intercept grew 8-9x from 8
  /// to 72 heads on the development machine's CPU), where a GPU launch covers
  /// every head at once.
  bool overhead_per_head = false;
};

inline const char* to_string(TileDirection d) { return d == TileDirection::Forward ? "fwd" : "bwd"; }
inline const char* to_string(BlockKind k) { return k == BlockKind::Full ? "full" : "causal"; }

/// Bytes of one element of q, k, v, o, dO.
inline int dtype_bytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "float") return 4;
  if (dtype == "double") return 8;
  DISTATTN_REQUIRE(false, "DistAttn::dtype_bytes",
                   "dtype '" << dtype << "' is not one of bf16, fp16, float, double");
  return 0;
}
/// Bytes of the accumulation type (accum_t): fp32 except for double.
inline int accum_bytes(const std::string& dtype) { return dtype_bytes(dtype) == 8 ? 8 : 4; }

/// FLOPs of one block call (docs/PERFORMANCE.md convention).
inline double block_flops(TileDirection dir, double batch_heads, double head_dim, double pairs) {
  const double fwd = 4.0 * batch_heads * head_dim * pairs;
  return dir == TileDirection::Forward ? fwd : 2.5 * fwd;
}

/// The call model t = overhead + flops / rate fitted to measured calls (flops[i]
/// took seconds[i]), weighting each point by 1/seconds^2: the model is used on
/// blocks from one tile to thousands of rows, so it is the relative error that must
/// stay small at both ends, which an unweighted fit would give up at the small
/// blocks. A negative intercept (noise, or blocks that run slower per FLOP as they
/// outgrow a cache) is clamped to 0 and the rate refitted through the origin.
inline TileRate fit_tile_rate(const std::vector<double>& flops, const std::vector<double>& seconds) {
  constexpr const char* where = "DistAttn::fit_tile_rate";
  DISTATTN_REQUIRE(flops.size() == seconds.size() && flops.size() >= 2, where,
                   "need at least two (flops, seconds) points of equal count, got " << flops.size() << " and "
                                                                                    << seconds.size());
  double sw = 0, sf = 0, st = 0, sff = 0, sft = 0;
  for (std::size_t i = 0; i < flops.size(); ++i) {
    DISTATTN_REQUIRE(std::isfinite(flops[i]) && flops[i] > 0 && std::isfinite(seconds[i]) && seconds[i] > 0, where,
                     "point " << i << " must have flops > 0 and seconds > 0, got " << flops[i] << ", " << seconds[i]);
    const double w = 1.0 / (seconds[i] * seconds[i]);
    sw += w, sf += w * flops[i], st += w * seconds[i], sff += w * flops[i] * flops[i], sft += w * flops[i] * seconds[i];
  }
  const double det = sw * sff - sf * sf;
  double a = det > 0 ? (st * sff - sf * sft) / det : -1.0, b = det > 0 ? (sw * sft - sf * st) / det : 0.0;
  if (!(a >= 0) || !(b > 0)) a = 0, b = sft / sff;
  DISTATTN_REQUIRE(b > 0 && std::isfinite(b), where, "the points give no positive rate");
  return TileRate{1.0 / b, a, 0};
}

class TileThroughput {
 public:
  void set(const ShapeClass& c, TileRate r) {
    DISTATTN_REQUIRE(std::isfinite(r.flops_per_s) && r.flops_per_s > 0, "DistAttn::TileThroughput::set",
                     "flops_per_s must be finite and > 0 for " << describe(c) << ", got " << r.flops_per_s);
    DISTATTN_REQUIRE(std::isfinite(r.overhead_s) && r.overhead_s >= 0, "DistAttn::TileThroughput::set",
                     "overhead_s must be finite and >= 0 for " << describe(c) << ", got " << r.overhead_s);
    DISTATTN_REQUIRE(r.tile_rows >= 0, "DistAttn::TileThroughput::set",
                     "tile_rows must be >= 0 for " << describe(c) << ", got " << r.tile_rows);
    dtype_bytes(c.dtype);
    DISTATTN_REQUIRE(c.head_dim >= 1, "DistAttn::TileThroughput::set", "head_dim must be >= 1, got " << c.head_dim);
    rates_[key(c)] = r;
  }
  bool has(const ShapeClass& c) const { return rates_.count(key(c)) != 0; }
  TileRate rate(const ShapeClass& c) const {
    const auto it = rates_.find(key(c));
    DISTATTN_REQUIRE(it != rates_.end(), "DistAttn::TileThroughput::rate",
                     "no calibrated tile throughput for " << describe(c)
                                                          << "; run perf_tests/cost_calibrate for it or add the line");
    return it->second;
  }
  /// Predicted seconds of one call; 0 for an empty block (the executors skip it).
  double call_seconds(const ShapeClass& c, double batch_heads, double pairs) const {
    if (pairs <= 0) return 0;
    const TileRate r = rate(c);
    return r.overhead_s * (r.overhead_per_head ? batch_heads : 1.0) +
           head_factor(batch_heads) * block_flops(c.direction, batch_heads, c.head_dim, pairs) / r.flops_per_s;
  }
  /// A call's arithmetic time per head relative to the table's rates, which were
  /// measured at one head count: on CPU ranks a call over fewer heads runs faster
  /// per head (its K/V stay in cache longer), and Ulysses calls 1-18 heads where
  /// the ring calls all 72 (docs/PERFORMANCE.md, issue #11). Interpolated in
  /// log(heads) between the measured counts, the nearest outside them. Ranks that
  /// take turns on a core gain more from fewer heads per call: 9 ranks on 2 cores
  /// measured 0.907 at 2 heads, two ranks with a core each 0.949 (docs/PERFORMANCE.md,
  /// "Heads per call on shared cores"). So each set of counts is measured at some ranks per core,
  /// and the table answers at core_share() (set_core_share): the set measured
  /// there, linear in ranks per core between two sets, the nearest outside them.
  double head_factor(double batch_heads) const {
    const auto& s = head_sets_;
    if (s.empty() || !(batch_heads > 0)) return 1.0;
    const auto hi = s.lower_bound(core_share_);
    if (hi == s.end()) return curve(std::prev(hi)->second, batch_heads);
    if (hi == s.begin() || hi->first == core_share_) return curve(hi->second, batch_heads);
    const auto lo = std::prev(hi);
    const double w = (core_share_ - lo->first) / (hi->first - lo->first);
    return curve(lo->second, batch_heads) + w * (curve(hi->second, batch_heads) - curve(lo->second, batch_heads));
  }
  /// (heads, factor) points measured at `ranks_per_core`, heads increasing; empty:
  /// no set there.
  std::vector<std::pair<int, double>> head_factors(double ranks_per_core = 1) const {
    const auto it = head_sets_.find(ranks_per_core);
    return it == head_sets_.end() ? std::vector<std::pair<int, double>>{} : it->second;
  }
  /// The ranks per core of every measured set, increasing.
  std::vector<double> head_factor_shares() const {
    std::vector<double> out;
    for (const auto& kv : head_sets_) out.push_back(kv.first);
    return out;
  }
  /// Replaces the set measured at `ranks_per_core` (>= 1) ranks per core; an empty `f` removes it.
  void set_head_factors(std::vector<std::pair<int, double>> f, double ranks_per_core = 1) {
    DISTATTN_REQUIRE(std::isfinite(ranks_per_core) && ranks_per_core >= 1, "DistAttn::TileThroughput::set_head_factors",
                     "ranks_per_core must be finite and >= 1, got " << ranks_per_core);
    for (std::size_t i = 0; i < f.size(); ++i)
      DISTATTN_REQUIRE(f[i].first >= 1 && std::isfinite(f[i].second) && f[i].second > 0 &&
                           (i == 0 || f[i].first > f[i - 1].first),
                       "DistAttn::TileThroughput::set_head_factors",
                       "need increasing head counts >= 1 with finite factors > 0, got " << f[i].first << " "
                                                                                         << f[i].second);
    if (f.empty()) head_sets_.erase(ranks_per_core);
    else head_sets_[ranks_per_core] = std::move(f);
  }
  /// The ranks per core head_factor answers at (1: a core each). A property of the
  /// run, not of the host: with_shared_cores sets it.
  double core_share() const { return core_share_; }
  void set_core_share(double ranks_per_core) {
    DISTATTN_REQUIRE(std::isfinite(ranks_per_core) && ranks_per_core >= 1, "DistAttn::TileThroughput::set_core_share",
                     "ranks_per_core must be finite and >= 1, got " << ranks_per_core);
    core_share_ = ranks_per_core;
  }
  /// The `heads` lines of the set at `ranks_per_core`, as to_text writes them.
  std::string head_factors_text(double ranks_per_core) const {
    std::ostringstream os;
    os.precision(6);
    os << std::scientific;
    for (const auto& [h, f] : head_factors(ranks_per_core)) {
      os << "heads " << h << ' ' << f;
      if (ranks_per_core != 1) os << ' ' << ranks_per_core;
      os << '\n';
    }
    return os.str();
  }
  /// The pairs a call on nq query rows at positions q against nk keys at k is
  /// charged for: kept pairs (causal) or all of them, or whole tiles where the
  /// class has tile_rows.
  double block_pairs(const ShapeClass& c, PositionMap q, std::int64_t nq, PositionMap k, std::int64_t nk) const {
    return block_pairs(c, c.kind == BlockKind::Causal ? Mask::causal(q, k) : Mask{MaskKind::None, q, k}, nq, nk);
  }
  /// The same under the mask m (its position maps place the block).
  double block_pairs(const ShapeClass& c, const Mask& m, std::int64_t nq, std::int64_t nk) const {
    if (const std::int64_t t = rate(c).tile_rows; t > 0) return double(tile_pairs(m, nq, nk, t));
    return double(m.allowed_pairs(nq, nk));
  }
  /// Seconds of a call on nq queries at q against nk keys at k under a global
  /// rule (causal or not, key window, documents; on global positions). A block
  /// the rule skips costs nothing (the executors skip it), one it allows whole is
  /// an unmasked (full) call, and any other is a masked (causal-class) call charged
  /// for its allowed pairs, or the tiles its kernel visits. A dense rule is priced
  /// as before windows and documents existed: by the class it names.
  double masked_block_seconds(ShapeClass c, double batch_heads, const Mask& rule, PositionMap q, std::int64_t nq,
                              PositionMap k, std::int64_t nk) const {
    if (rule.is_dense()) {
      c.kind = rule.is_causal() ? BlockKind::Causal : BlockKind::Full;
      return block_seconds(c, batch_heads, q, nq, k, nk);
    }
    if (nq <= 0 || nk <= 0) return 0;
    const Mask m = rule.at(q, k);
    switch (m.relation(0, nq, 0, nk)) {
      case Relation::Skip: return 0;
      case Relation::Full: c.kind = BlockKind::Full; return block_seconds(c, batch_heads, q, nq, k, nk);
      case Relation::Partial: break;
    }
    c.kind = BlockKind::Causal;
    return call_seconds(c, batch_heads, block_pairs(c, m, nq, nk));
  }
  /// Predicted seconds of that call.
  double block_seconds(const ShapeClass& c, double batch_heads, PositionMap q, std::int64_t nq, PositionMap k,
                       std::int64_t nk) const {
    return call_seconds(c, batch_heads, block_pairs(c, q, nq, k, nk));
  }

  /// The same table on a device `factor` times slower (P ranks sharing fewer cores).
  TileThroughput slowed_down(double factor) const {
    DISTATTN_REQUIRE(std::isfinite(factor) && factor > 0, "DistAttn::TileThroughput::slowed_down",
                     "factor must be finite and > 0, got " << factor);
    TileThroughput t = *this;
    for (auto& kv : t.rates_)
      kv.second.flops_per_s /= factor, kv.second.overhead_s *= factor;
    t.elementwise_ /= factor;
    t.copy_ /= factor;
    return t;
  }

  /// Memory-bound passes (state merges, gradient sums): bytes read + written per
  /// second; 0 leaves them out of the prediction.
  double elementwise_bytes_per_s() const { return elementwise_; }
  void set_elementwise_bytes_per_s(double b) {
    elementwise_ = checked_rate(b, "DistAttn::TileThroughput::set_elementwise_bytes_per_s");
  }
  double elementwise_seconds(double bytes) const { return seconds_at(bytes, elementwise_); }

  /// Reorders (the executors' packing and interleaving copies, zero fills): bytes
  /// read + written per second. A rate of its own because a copy does no
  /// arithmetic: on CPU ranks it runs several times faster than a merge, whose
  /// exponentials dominate. 0 leaves reorders out of the prediction.
  double copy_bytes_per_s() const { return copy_; }
  void set_copy_bytes_per_s(double b) { copy_ = checked_rate(b, "DistAttn::TileThroughput::set_copy_bytes_per_s"); }
  double copy_seconds(double bytes) const { return seconds_at(bytes, copy_); }

  /// The backend's sum reduce-scatter: result bytes of one step (one peer's shard
  /// received and summed) per second, as cost_calibrate times it on several ranks.
  /// A rate of its own because a collective library's reduction can be far below
  /// its point-to-point rate: Open MPI 4.1's reduce-scatter of 21 MB per rank on
  /// two CPU ranks ran at ~0.8 GB/s where a send ran at 12. 0 = the link's transfer.
  double reduce_bytes_per_s() const { return reduce_; }
  void set_reduce_bytes_per_s(double b) { reduce_ = checked_rate(b, "DistAttn::TileThroughput::set_reduce_bytes_per_s"); }
  double reduce_seconds(double bytes) const { return seconds_at(bytes, reduce_); }

  /// How long this host's scheduler takes to even out ranks that do not divide
  /// over its cores (cost/core_balance.hpp), as `cost_calibrate --balance-cores`
  /// measures it. A property of the host, not of the rates: slowed_down keeps it.
  double balance_seconds() const { return balance_; }
  void set_balance_seconds(double s) {
    DISTATTN_REQUIRE(std::isfinite(s) && s >= 0, "DistAttn::TileThroughput::set_balance_seconds",
                     "seconds must be finite and >= 0, got " << s);
    balance_ = s;
  }

  std::string to_text() const {
    std::ostringstream os;
    os.precision(6);
    os << std::scientific;
    for (const auto& [k, r] : rates_) {
      os << "tile " << std::get<0>(k) << ' ' << std::get<1>(k) << ' ' << std::get<2>(k) << ' ' << std::get<3>(k)
         << ' ' << r.flops_per_s << ' ' << r.overhead_s;
      if (r.tile_rows > 0 || r.overhead_per_head) os << ' ' << r.tile_rows;
      if (r.overhead_per_head) os << " per_head";
      os << '\n';
    }
    os << "elementwise " << elementwise_ << '\n';
    os << "copy " << copy_ << '\n';
    if (reduce_ > 0) os << "reduce " << reduce_ << '\n';
    if (balance_ > 0) os << "balance " << balance_ << '\n';
    std::string text = os.str();
    for (const auto& kv : head_sets_) text += head_factors_text(kv.first);
    return text;
  }
  static TileThroughput from_text(const std::string& text, const std::string& source = "text") {
    constexpr const char* where = "DistAttn::TileThroughput::from_text";
    TileThroughput t;
    std::istringstream in(text);
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (const auto h = line.find('#'); h != std::string::npos) line.erase(h);
      std::istringstream ls(line);
      std::string word;
      if (!(ls >> word)) continue;
      // Called once a record is read: anything left on the line is an error.
      const auto end_of_record = [&] {
        ls.clear();
        std::string junk;
        DISTATTN_REQUIRE(!(ls >> junk), where,
                         source << ":" << lineno << ": unexpected '" << junk << "' after the '" << word << "' record");
      };
      // One-number records: the word, the number's unit (for the message) and its setter.
      const auto scalar = [&](const char* unit, auto&& set) {
        double v = -1;
        DISTATTN_REQUIRE(ls >> v, where, source << ":" << lineno << ": expected '" << word << " <" << unit << ">'");
        end_of_record();
        set(v);
      };
      if (word == "elementwise") {
        scalar("bytes_per_s", [&](double v) { t.set_elementwise_bytes_per_s(v); });
        continue;
      }
      if (word == "copy") {
        scalar("bytes_per_s", [&](double v) { t.set_copy_bytes_per_s(v); });
        continue;
      }
      if (word == "reduce") {
        scalar("bytes_per_s", [&](double v) { t.set_reduce_bytes_per_s(v); });
        continue;
      }
      if (word == "balance") {
        scalar("seconds", [&](double v) { t.set_balance_seconds(v); });
        continue;
      }
      if (word == "heads") {
        int h = 0;
        double f = 0, share = 1;
        DISTATTN_REQUIRE(ls >> h >> f, where,
                         source << ":" << lineno << ": expected 'heads <batch_heads> <factor> [<ranks_per_core>]'");
        if (!(ls >> share)) share = 1;
        end_of_record();
        DISTATTN_REQUIRE(std::isfinite(share) && share >= 1, where,
                         source << ":" << lineno << ": ranks_per_core must be >= 1, got " << share);
        auto all = t.head_factors(share);
        all.emplace_back(h, f);
        std::sort(all.begin(), all.end());
        t.set_head_factors(std::move(all), share);
        continue;
      }
      DISTATTN_REQUIRE(word == "tile", where,
                       source << ":" << lineno << ": unknown record '" << word
                                              << "' (tile, elementwise, copy, reduce, balance or heads)");
      std::string dir, kind;
      ShapeClass c;
      TileRate r;
      DISTATTN_REQUIRE(ls >> dir >> kind >> c.dtype >> c.head_dim >> r.flops_per_s >> r.overhead_s, where,
                       source << ":" << lineno
                              << ": expected 'tile <fwd|bwd> <full|causal> <dtype> <head_dim> <flops_per_s> "
                                 "<overhead_s> [<tile_rows> [per_head]]'");
      if (std::int64_t rows = 0; ls >> rows) {
        r.tile_rows = rows;
        if (std::string unit; ls >> unit) {
          DISTATTN_REQUIRE(unit == "per_head", where,
                           source << ":" << lineno << ": '" << unit << "' after tile_rows is not 'per_head'");
          r.overhead_per_head = true;
        }
      }
      end_of_record();
      DISTATTN_REQUIRE(dir == "fwd" || dir == "bwd", where,
                       source << ":" << lineno << ": direction '" << dir << "' is not fwd or bwd");
      DISTATTN_REQUIRE(kind == "full" || kind == "causal", where,
                       source << ":" << lineno << ": block kind '" << kind << "' is not full or causal");
      c.direction = dir == "fwd" ? TileDirection::Forward : TileDirection::Backward;
      c.kind = kind == "full" ? BlockKind::Full : BlockKind::Causal;
      t.set(c, r);
    }
    return t;
  }
  /// Reads a table written by to_text (cost_calibrate). The path must name a
  /// regular file: a FIFO would block, a directory reads as nothing.
  static TileThroughput load(const std::string& path) {
    constexpr const char* where = "DistAttn::TileThroughput::load";
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    DISTATTN_REQUIRE(std::filesystem::exists(st), where,
                     "cannot open tile throughput file '" << path << "': "
                                                          << (ec ? ec.message() : std::string("no such file")));
    DISTATTN_REQUIRE(std::filesystem::is_regular_file(st), where,
                     "tile throughput file '" << path << "' is not a regular file (a directory, FIFO or device)");
    errno = 0;
    std::ifstream f(path, std::ios::binary);
    DISTATTN_REQUIRE(f.good(), where,
                     "cannot open tile throughput file '" << path << "': " << std::strerror(errno));
    std::string text;
    char buf[4096];
    while (f.read(buf, sizeof buf) || f.gcount() > 0) text.append(buf, std::size_t(f.gcount()));
    // read() sets badbit when the file system reports an error (not at the end).
    DISTATTN_REQUIRE(!f.bad(), where,
                     "error reading tile throughput file '" << path << "' after " << text.size() << " bytes");
    return from_text(text, path);
  }

  static std::string describe(const ShapeClass& c) {
    std::ostringstream os;
    os << "(" << to_string(c.direction) << ", " << to_string(c.kind) << ", " << c.dtype << ", d=" << c.head_dim << ")";
    return os.str();
  }

 private:
  static double checked_rate(double b, const char* where) {
    DISTATTN_REQUIRE(std::isfinite(b) && b >= 0, where, "bytes_per_s must be finite and >= 0, got " << b);
    return b;
  }
  static double seconds_at(double bytes, double rate) { return rate > 0 ? bytes / rate : 0.0; }
  using Key = std::tuple<std::string, std::string, std::string, int>;
  static Key key(const ShapeClass& c) { return Key{to_string(c.direction), to_string(c.kind), c.dtype, c.head_dim}; }
  static double curve(const std::vector<std::pair<int, double>>& f, double batch_heads) {
    if (batch_heads <= f.front().first) return f.front().second;
    if (batch_heads >= f.back().first) return f.back().second;
    std::size_t i = 1;
    while (f[i].first < batch_heads) ++i;
    const double w = std::log(batch_heads / f[i - 1].first) / std::log(double(f[i].first) / f[i - 1].first);
    return f[i - 1].second + w * (f[i].second - f[i - 1].second);
  }
  std::map<Key, TileRate> rates_;
  double elementwise_ = 0;
  double copy_ = 0;
  double reduce_ = 0;
  double balance_ = 0;
  std::map<double, std::vector<std::pair<int, double>>> head_sets_;  ///< by ranks per core
  double core_share_ = 1;
};

}  // namespace DistAttn
