// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file ring_format.hpp
/// Text rendering of a RingSchedule as the Markdown table of docs/design/schedules.md §1
/// (0-based; entries are (query chunk, key chunk)), for docs and the driver's
/// --print-schedule.
///
/// Forward:  "(7,5)" normal block, "helps 7: (7,0)" helper block, "idle";
///           followed by the merge list of every rank that receives Partials.
/// Backward: the same blocks annotated with where the non-local gradient goes,
///           "(7,5) dkv->5", "helps 7: (7,0) dq->7".

#include <DistAttn/schedule/ring_schedule.hpp>

#include <ostream>
#include <sstream>
#include <string>

namespace DistAttn {

inline std::string to_string(const RingSchedule& s, Pass pass = Pass::Forward) {
  const int P = s.num_ranks();
  const int T = s.num_steps();
  std::ostringstream os;
  os << "RingSchedule P=" << P << ", " << to_string(s.kind()) << ", " << T << " steps, " << to_string(pass)
     << "\n\n";
  os << "| rank |";
  for (int t = 0; t < T; ++t) os << " t=" << t << " |";
  os << "\n|---|";
  for (int t = 0; t < T; ++t) os << "---|";
  os << "\n";
  for (int x = 0; x < P; ++x) {
    os << "| " << x << " |";
    for (int t = 0; t < T; ++t) {
      const RankStep st = s.step(x, t, pass);
      os << ' ';
      if (!st.compute) {
        os << "idle";
      } else {
        const ComputeTask& c = *st.compute;
        if (!c.own_query) os << "helps " << c.q_chunk << ": ";
        os << '(' << c.q_chunk << ',' << c.k_chunk << ')';
        if (st.send_result.active() && pass == Pass::Backward)
          os << ' ' << to_string(st.send_result.kind) << "->" << st.send_result.peer;
      }
      os << " |";
    }
    os << "\n";
  }

  bool any = false;
  std::ostringstream ms;
  for (int x = P - 1; x >= 0; --x) {
    const auto list = s.merges(x, pass);
    if (list.empty()) continue;
    any = true;
    ms << "- rank " << x << (pass == Pass::Forward ? " merges partials from" : " adds") << ' ';
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (i) ms << ", ";
      if (pass == Pass::Backward) ms << to_string(list[i].kind) << " from ";
      ms << list[i].peer << " (t=" << list[i].step << ")";
    }
    ms << "\n";
  }
  os << "\n" << (pass == Pass::Forward ? "Merges:" : "Gradient returns:") << (any ? "\n" : " none\n") << ms.str();
  return os.str();
}

inline std::ostream& operator<<(std::ostream& os, const RingSchedule& s) { return os << to_string(s); }

}  // namespace DistAttn
