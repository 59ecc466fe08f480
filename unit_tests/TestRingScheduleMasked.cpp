// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Masked ring schedules (RingSchedule(layout, rule)): communication follows the
// mask. Checked against brute force over every (query row, key row) pair of every
// two ranks, never against the schedule's own formulas: a block is computed
// exactly once iff the mask allows one of its pairs, every message is matched by
// its peer at the same step (rows included), nothing is sent for a block that is
// not computed, and the K/V rows that travel hold every key an allowed pair reaches.

#include <DistAttn/core/mask.hpp>
#include <DistAttn/schedule/ring_layout.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace DistAttn;

namespace {

// Whether any query row of rank y sees any key row of rank z under `rule`.
bool allows_any(const RingLayout& lay, const Mask& rule, int y, int z) {
  for (std::int64_t i = 0; i < lay.chunk(); ++i)
    for (std::int64_t j = 0; j < lay.chunk(); ++j)
      if (rule.allowed(lay.position(y, i), lay.position(z, j))) return true;
  return false;
}

using Msg = std::tuple<int, int, PayloadKind, int, int, std::int64_t, std::int64_t>;  // from, to, kind, chunk, step, rows

void check_masked(int P, RingKind kind, const Mask& rule, const std::string& what) {
  SCOPED_TRACE(what);
  const std::int64_t c = 12;
  const RingLayout lay(P, c, kind);
  const RingSchedule s(lay, rule);
  EXPECT_TRUE(s.masked());
  for (Pass pass : {Pass::Forward, Pass::Backward}) {
    std::vector<int> count(std::size_t(P) * P, 0);
    std::vector<Msg> in_sent, in_recv, res_sent, res_recv;
    for (int x = 0; x < P; ++x)
      for (int t = 0; t < s.num_steps(); ++t) {
        const RankStep st = s.step(x, t, pass);
        if (st.compute) ++count[std::size_t(st.compute->q_chunk) * P + std::size_t(st.compute->k_chunk)];
        else EXPECT_FALSE(st.recv_input.active() || st.send_result.active()) << "x=" << x << " t=" << t;
        const auto msg = [&](const Transfer& tr, int from, int to) {
          return Msg{from, to, tr.kind, tr.chunk, t, tr.rows_begin, tr.rows_end};
        };
        if (st.send_input.active()) in_sent.push_back(msg(st.send_input, x, st.send_input.peer));
        if (st.recv_input.active()) in_recv.push_back(msg(st.recv_input, st.recv_input.peer, x));
        if (st.send_result.active()) res_sent.push_back(msg(st.send_result, x, st.send_result.peer));
        if (st.recv_result.active()) res_recv.push_back(msg(st.recv_result, st.recv_result.peer, x));
        if (st.compute && st.recv_input.kind == PayloadKind::KV) {
          const Transfer& in = st.recv_input;
          EXPECT_EQ(in.rows_begin == 0 && in.rows_end == -1, in.whole());
          for (std::int64_t i = 0; i < c; ++i)
            for (std::int64_t j = 0; j < c; ++j)
              if (rule.allowed(lay.position(st.compute->q_chunk, i), lay.position(st.compute->k_chunk, j))) {
                EXPECT_TRUE(in.whole() || (j >= in.rows_begin && j < in.rows_end))
                    << "x=" << x << " t=" << t << " key row " << j << " is not sent";
              }
          if (pass == Pass::Backward) {
            EXPECT_EQ(st.send_result.rows_begin, in.rows_begin);
            EXPECT_EQ(st.send_result.rows_end, in.rows_end);
          }
        }
      }
    for (int y = 0; y < P; ++y)
      for (int z = 0; z < P; ++z)
        EXPECT_EQ(count[std::size_t(y) * P + std::size_t(z)], allows_any(lay, rule, y, z) ? 1 : 0)
            << to_string(pass) << " block (q" << y << ", k" << z << ")";
    for (auto* v : {&in_sent, &in_recv, &res_sent, &res_recv}) std::sort(v->begin(), v->end());
    EXPECT_EQ(in_sent, in_recv) << to_string(pass) << ": input sends and receives do not match";
    EXPECT_EQ(res_sent, res_recv) << to_string(pass) << ": result sends and receives do not match";
    // No step after the last one with a block.
    bool last_busy = false;
    for (int x = 0; x < P; ++x) last_busy |= bool(s.step(x, s.num_steps() - 1, pass).compute);
    EXPECT_TRUE(last_busy) << to_string(pass);
  }
}

TEST(RingScheduleMasked, BlocksAndMessagesFollowTheMask) {
  const std::vector<std::int64_t> docs{0, 7, 8, 20, 31, 44, 60, 61, 96};
  for (int P = 1; P <= 8; ++P) {
    const std::int64_t N = 12 * P;
    std::vector<std::int64_t> d;
    for (auto o : docs)
      if (o < N) d.push_back(o);
    d.push_back(N);
    const Documents D{d.data(), int(d.size()) - 1};
    for (RingKind kind : {RingKind::Vanilla, RingKind::Balanced, RingKind::Zigzag}) {
      std::vector<std::pair<Mask, std::string>> rules{{Mask::causal().with_window(Window{3, 0}), "causal W=3"},
                                                      {Mask::causal().with_window(Window{5, 0}), "causal W=5"},
                                                      {Mask::causal().with_window(Window{13, 0}), "causal W=13"},
                                                      {Mask::causal().with_window(Window{30, 0}), "causal W=30"},
                                                      {Mask::causal().with_documents(D), "causal documents"},
                                                      {Mask::causal().with_window(Window{4, 0}).with_documents(D),
                                                       "causal W=4 documents"}};
      if (kind == RingKind::Zigzag) {
        rules.push_back({Mask::none().with_window(Window{4, 6}), "full window {4,6}"});
        rules.push_back({Mask::none().with_documents(D), "full documents"});
      }
      for (const auto& [rule, name] : rules) {
        std::ostringstream os;
        os << "P=" << P << " " << to_string(kind) << " " << name;
        check_masked(P, kind, rule, os.str());
      }
    }
  }
}

// A causal window within one chunk needs the chunk before each rank's own only:
// vanilla and balanced end after step 1 and receive the window's rows of it, and
// a dense rule keeps the plain schedule.
TEST(RingScheduleMasked, NarrowWindowEndsAfterOneStep) {
  for (int P = 2; P <= 8; ++P)
    for (RingKind kind : {RingKind::Vanilla, RingKind::Balanced}) {
      const RingLayout lay(P, 12, kind);
      EXPECT_EQ(RingSchedule(lay, Mask::causal().with_window(Window{12, 0})).num_steps(), 2) << P;
      const RingSchedule w5(lay, Mask::causal().with_window(Window{5, 0}));
      ASSERT_EQ(w5.num_steps(), 2) << P;
      for (int x = 1; x < P; ++x) EXPECT_EQ(w5.forward(x, 1).recv_input.rows(12), 5) << "P=" << P << " x=" << x;
      const RingSchedule dense(lay, Mask::causal());
      EXPECT_FALSE(dense.masked());
      EXPECT_EQ(dense.num_steps(), RingSchedule(P, kind).num_steps());
    }
}

}  // namespace
