// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file core_balance.hpp
/// CPU ranks outnumbering cores when the busy ranks do not divide evenly over them
/// (3 on 2 cores, 9 on 2). The fluid share (every busy rank gets cores / busy of a
/// core) holds only over times long enough for the scheduler to move ranks between
/// cores; over a shorter call the core that holds ceil(busy / cores) of them sets the
/// step's end, while the ranks done first keep polling in their MPI waits. On the
/// development machine three ranks on two cores took 1.6-2.1x one rank's time for
/// 2-95 ms calls (fluid: 1.5, whole ranks: 2; docs/PERFORMANCE.md). The model
/// blends the two with one time constant, the balance time tau, measured by
/// `cost_calibrate --balance-cores`:
///
///   t = t_fluid * (1 + (whole / fluid - 1) * tau / (tau + alone)),
///   fluid = max(1, busy / cores), whole = max(1, ceil(busy / cores)), alone = t_fluid / fluid
///
/// tau = 0 is the fluid share (and so is any whole busy / cores).

#include <DistAttn/core/error.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace DistAttn {

/// Ranks per core on the fullest core, and on average, for `busy` ranks on `cores`.
struct CoreLoad {
  double fluid = 1, whole = 1;
  CoreLoad(double busy, double cores) {
    if (!(cores > 0)) return;
    fluid = std::max(1.0, busy / cores);
    // busy is a work-weighted count (a rank with a tenth of the largest work
    // counts a tenth): round away the float noise of whole counts before the ceil.
    whole = std::max(1.0, std::ceil(busy / cores - 1e-9));
  }
};

/// A step's compute `t_fluid` (the fluid share of `busy` ranks on `cores`) with the
/// uneven placement blended in (see the file comment).
inline double balanced_share_seconds(double t_fluid, double busy, double cores, double balance_s) {
  if (!(t_fluid > 0) || !(balance_s > 0)) return t_fluid;
  const CoreLoad l(busy, cores);
  const double alone = t_fluid / l.fluid;
  return t_fluid * (1.0 + (l.whole / l.fluid - 1.0) * balance_s / (balance_s + alone));
}

/// The same step when the fuller core keeps its ranks throughout (no balancing).
inline double whole_share_seconds(double t_fluid, double busy, double cores) {
  if (!(t_fluid > 0)) return t_fluid;
  const CoreLoad l(busy, cores);
  return t_fluid * l.whole / l.fluid;
}

/// The balance time from calls timed alone (`alone[i]`: one rank per core) and
/// with `ranks` ranks on `cores` cores (`shared[i]`, barrier to barrier): the tau
/// whose blend is nearest the measured ratios shared / alone in least squares,
/// searched over 0 and 10 us to 100 s in steps of 1 %. One point per call length
/// would give its own tau; single points scatter (the ratio of a ~2 ms call fell
/// between the fluid and the whole-rank ratio from run to run), so all of them
/// are fitted at once. ranks / cores must not be whole (nothing to measure then).
inline double fit_balance_seconds(const std::vector<double>& alone, const std::vector<double>& shared, int ranks,
                                  double cores) {
  constexpr const char* where = "DistAttn::fit_balance_seconds";
  DISTATTN_REQUIRE(alone.size() == shared.size() && !alone.empty(), where,
                   "need one or more (alone, shared) pairs of equal count, got " << alone.size() << " and "
                                                                                 << shared.size());
  const CoreLoad l(ranks, cores);
  DISTATTN_REQUIRE(cores > 0 && l.whole > l.fluid, where,
                   ranks << " ranks on " << cores << " cores divide evenly: no uneven placement to measure");
  for (std::size_t i = 0; i < alone.size(); ++i)
    DISTATTN_REQUIRE(alone[i] > 0 && shared[i] > 0 && std::isfinite(alone[i]) && std::isfinite(shared[i]), where,
                     "point " << i << " must have positive finite times, got " << alone[i] << ", " << shared[i]);
  auto residual = [&](double tau) {
    double r = 0;
    for (std::size_t i = 0; i < alone.size(); ++i) {
      const double e = balanced_share_seconds(alone[i] * l.fluid, ranks, cores, tau) / alone[i] - shared[i] / alone[i];
      r += e * e;
    }
    return r;
  };
  double best = 0, best_r = residual(0);
  for (double tau = 1e-5; tau <= 100; tau *= 1.01)
    if (const double r = residual(tau); r < best_r) best = tau, best_r = r;
  return best;
}

}  // namespace DistAttn
