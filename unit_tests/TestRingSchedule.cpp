// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ring schedules (docs/design/schedules.md §1) checked against brute-force expectations:
// coverage of every causal block, message matching, result routing, idle
// fractions, the worked examples of §2.3.2 / §2.3.3 and the volume model.
#include <DistAttn/core/error.hpp>
#include <DistAttn/schedule/ring_format.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>
#include <DistAttn/schedule/ring_volume.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace DistAttn;

namespace {

struct Msg {
  int from, to;
  PayloadKind kind;
  int chunk, step;
  bool operator<(const Msg& o) const {
    return std::tie(from, to, kind, chunk, step) < std::tie(o.from, o.to, o.kind, o.chunk, o.step);
  }
  bool operator==(const Msg& o) const {
    return std::tie(from, to, kind, chunk, step) == std::tie(o.from, o.to, o.kind, o.chunk, o.step);
  }
};

std::string label(int P, RingKind k, Pass p) {
  std::ostringstream os;
  os << "P=" << P << " " << to_string(k) << " " << to_string(p);
  return os.str();
}

// Checks one (P, kind, pass) exhaustively. Expectations come from the causal
// structure (every q >= k block exactly once) and from message matching, never
// from the schedule's own formulas.
void check_schedule(int P, RingKind kind, Pass pass) {
  SCOPED_TRACE(label(P, kind, pass));
  const RingSchedule s(P, kind);
  const bool fwd = pass == Pass::Forward;
  const int T = s.num_steps();
  ASSERT_EQ(T, kind == RingKind::Balanced ? P / 2 + 1 : P);

  std::vector<int> count(std::size_t(P) * P, 0);
  std::vector<Msg> in_sent, in_recv, res_sent, res_recv;
  // contributions folded into each chunk's final outputs, following result routing
  std::vector<std::vector<int>> q_contrib(P), kv_contrib(P);
  long long busy = 0;

  for (int x = 0; x < P; ++x) {
    for (int t = 0; t < T; ++t) {
      const RankStep st = s.step(x, t, pass);
      ASSERT_EQ(st.rank, x);
      ASSERT_EQ(st.step, t);
      ASSERT_EQ(st.pass, pass);
      if (st.recv_input.active()) {
        EXPECT_EQ(st.recv_input.peer, ((x - t) % P + P) % P) << "x=" << x << " t=" << t;
        EXPECT_EQ(st.recv_input.step, t);
        in_recv.push_back({st.recv_input.peer, x, st.recv_input.kind, st.recv_input.chunk, t});
      }
      if (st.send_input.active()) {
        EXPECT_EQ(st.send_input.peer, (x + t) % P) << "x=" << x << " t=" << t;
        EXPECT_EQ(st.send_input.chunk, x) << "a rank can only send inputs it owns";
        EXPECT_EQ(st.send_input.step, t);
        in_sent.push_back({x, st.send_input.peer, st.send_input.kind, st.send_input.chunk, t});
      }
      if (st.recv_result.active()) {
        EXPECT_EQ(st.recv_result.peer, (x + t) % P);
        EXPECT_EQ(st.recv_result.chunk, x) << "the receiver of a result owns its chunk";
        EXPECT_EQ(st.recv_result.step, t);
        res_recv.push_back({st.recv_result.peer, x, st.recv_result.kind, st.recv_result.chunk, t});
      }
      if (st.send_result.active()) {
        EXPECT_EQ(st.send_result.peer, ((x - t) % P + P) % P);
        EXPECT_EQ(st.send_result.step, t);
        res_sent.push_back({x, st.send_result.peer, st.send_result.kind, st.send_result.chunk, t});
      }
      if (t == 0) {
        EXPECT_FALSE(st.recv_input.active() || st.send_input.active() || st.send_result.active() ||
                     st.recv_result.active())
            << "step 0 is local";
      }

      if (!st.compute) {
        EXPECT_FALSE(st.recv_input.active()) << "idle rank receives an input";
        EXPECT_FALSE(st.send_result.active()) << "idle rank sends a result";
        continue;
      }
      ++busy;
      const ComputeTask& c = *st.compute;
      ASSERT_TRUE(c.q_chunk >= 0 && c.q_chunk < P && c.k_chunk >= 0 && c.k_chunk < P);
      EXPECT_LE(c.k_chunk, c.q_chunk) << "future block computed at x=" << x << " t=" << t;
      ++count[std::size_t(c.q_chunk) * P + c.k_chunk];
      EXPECT_EQ(c.causal, c.q_chunk == c.k_chunk);
      EXPECT_EQ(c.fresh_state, !c.own_query);
      EXPECT_FALSE(!c.own_query && !c.own_kv) << "a block needs two remote inputs";

      // The data the block needs is local or arrives this step from its owner.
      if (c.own_query) {
        EXPECT_EQ(c.q_chunk, x);
      } else {
        EXPECT_EQ(st.recv_input.kind, fwd ? PayloadKind::Q : PayloadKind::QBundle);
        EXPECT_EQ(st.recv_input.chunk, c.q_chunk);
        EXPECT_EQ(st.recv_input.peer, c.q_chunk);
      }
      if (c.own_kv) {
        EXPECT_EQ(c.k_chunk, x);
      } else {
        EXPECT_EQ(st.recv_input.kind, PayloadKind::KV);
        EXPECT_EQ(st.recv_input.chunk, c.k_chunk);
        EXPECT_EQ(st.recv_input.peer, c.k_chunk);
      }
      if (c.own_query && c.own_kv) {
        EXPECT_FALSE(st.recv_input.active());
      }

      // Outputs: local ones accumulate, remote ones are shipped to their owner.
      if (fwd) {
        if (c.own_query) {
          q_contrib[x].push_back(c.k_chunk);
          EXPECT_FALSE(st.send_result.active());
        } else {
          EXPECT_EQ(st.send_result.kind, PayloadKind::Partial);
          EXPECT_EQ(st.send_result.chunk, c.q_chunk);
          if (st.send_result.active()) q_contrib[st.send_result.peer].push_back(c.k_chunk);
        }
      } else {
        if (c.own_query) {
          q_contrib[x].push_back(c.k_chunk);
        } else {
          EXPECT_EQ(st.send_result.kind, PayloadKind::GradQ);
          EXPECT_EQ(st.send_result.chunk, c.q_chunk);
          if (st.send_result.active()) q_contrib[st.send_result.peer].push_back(c.k_chunk);
        }
        if (c.own_kv) {
          kv_contrib[x].push_back(c.q_chunk);
        } else {
          EXPECT_EQ(st.send_result.kind, PayloadKind::GradKV);
          EXPECT_EQ(st.send_result.chunk, c.k_chunk);
          if (st.send_result.active()) kv_contrib[st.send_result.peer].push_back(c.q_chunk);
        }
        if (c.own_query && c.own_kv) {
          EXPECT_FALSE(st.send_result.active());
        }
      }
    }
  }

  for (int q = 0; q < P; ++q)
    for (int k = 0; k < P; ++k)
      EXPECT_EQ(count[std::size_t(q) * P + k], k <= q ? 1 : 0) << "block (q" << q << ", k" << k << ")";
  EXPECT_EQ(busy, (long long)P * (P + 1) / 2);

  std::sort(in_sent.begin(), in_sent.end());
  std::sort(in_recv.begin(), in_recv.end());
  EXPECT_TRUE(in_sent == in_recv) << "input sends and receives do not match";
  std::sort(res_sent.begin(), res_sent.end());
  std::sort(res_recv.begin(), res_recv.end());
  EXPECT_TRUE(res_sent == res_recv) << "result sends and receives do not match";
  for (const Msg& m : res_sent) {
    if (fwd) EXPECT_EQ(m.kind, PayloadKind::Partial);
    else EXPECT_TRUE(m.kind == PayloadKind::GradKV || m.kind == PayloadKind::GradQ);
  }

  // Each chunk's outputs end up with exactly the blocks causality requires.
  for (int y = 0; y < P; ++y) {
    std::sort(q_contrib[y].begin(), q_contrib[y].end());
    std::vector<int> want_q(y + 1);
    for (int k = 0; k <= y; ++k) want_q[k] = k;
    EXPECT_EQ(q_contrib[y], want_q) << "query chunk " << y;
    if (!fwd) {
      std::sort(kv_contrib[y].begin(), kv_contrib[y].end());
      std::vector<int> want_kv;
      for (int q = y; q < P; ++q) want_kv.push_back(q);
      EXPECT_EQ(kv_contrib[y], want_kv) << "key chunk " << y;
    }
  }

  // Per-rank facts.
  long long tasks = 0;
  for (int x = 0; x < P; ++x) {
    int n = 0;
    for (int t = 0; t < T; ++t) n += s.step(x, t, pass).compute ? 1 : 0;
    EXPECT_EQ(s.num_tasks(x), n);
    tasks += n;
    if (kind == RingKind::Vanilla) {
      EXPECT_EQ(n, x + 1);
    }
    if (kind == RingKind::Balanced && P % 2 == 1) {
      EXPECT_EQ(n, T) << "odd P leaves no idle slot";
    }
    std::vector<Transfer> want;
    for (int t = 0; t < T; ++t)
      if (s.step(x, t, pass).recv_result.active()) want.push_back(s.step(x, t, pass).recv_result);
    EXPECT_EQ(s.merges(x, pass), want);
  }
  EXPECT_EQ(tasks, (long long)P * (P + 1) / 2);
  EXPECT_EQ(s.idle_slots(), (long long)P * T - (long long)P * (P + 1) / 2);
}

}  // namespace

TEST(RingSchedule, ExhaustiveP1to64) {
  for (int P = 1; P <= 64; ++P)
    for (RingKind k : {RingKind::Vanilla, RingKind::Balanced})
      for (Pass p : {Pass::Forward, Pass::Backward}) check_schedule(P, k, p);
}

TEST(RingSchedule, SamePassBlocksForwardAndBackward) {
  for (int P = 1; P <= 64; ++P)
    for (RingKind k : {RingKind::Vanilla, RingKind::Balanced}) {
      const RingSchedule s(P, k);
      for (int x = 0; x < P; ++x)
        for (int t = 0; t < s.num_steps(); ++t) {
          EXPECT_EQ(s.forward(x, t).compute, s.backward(x, t).compute) << "P=" << P << " x=" << x << " t=" << t;
          EXPECT_EQ(s.task(x, t), s.forward(x, t).compute);
        }
    }
}

TEST(RingSchedule, IdleFractions) {
  for (int P = 1; P <= 64; ++P) {
    const double Pd = P;
    const RingSchedule v(P, RingKind::Vanilla), b(P, RingKind::Balanced);
    EXPECT_NEAR(v.idle_fraction(), (Pd * Pd - Pd) / (2 * Pd * Pd), 1e-15) << P;
    EXPECT_NEAR(v.idle_fraction_printed(), (Pd * Pd - Pd) / (2 * Pd * Pd), 1e-15) << P;
    EXPECT_NEAR(b.idle_fraction(), P % 2 ? 0.0 : 1.0 / (Pd + 2), 1e-15) << P;
    EXPECT_NEAR(b.idle_fraction_printed(), P % 2 ? 0.0 : 1.0 / (2 * Pd), 1e-15) << P;
  }
  // The paper's "expected speedup 7.2x" at P = 8: 36 blocks in 5 steps.
  EXPECT_NEAR(8 * (1 - RingSchedule(8, RingKind::Balanced).idle_fraction()), 7.2, 1e-12);
}

TEST(RingSchedule, FinishStep) {
  for (int P = 1; P <= 64; ++P) {
    const RingSchedule v(P, RingKind::Vanilla), b(P, RingKind::Balanced);
    for (int x = 0; x < P; ++x) {
      // [REF]'s rule (schedules.md §1.3), extended to odd P.
      EXPECT_EQ(b.finish_step(x), x <= P / 2 ? x : P / 2) << "P=" << P << " x=" << x;
      EXPECT_EQ(v.finish_step(x), x);
      // Vanilla backward: own blocks up to step x, dk/dv from rank x+t up to t = P-1-x.
      EXPECT_EQ(v.finish_step(x, Pass::Backward), std::max(x, P - 1 - x));
      EXPECT_GE(b.finish_step(x, Pass::Backward), b.finish_step(x));
      EXPECT_LT(b.finish_step(x, Pass::Backward), b.num_steps());
    }
  }
  // P = 8 backward: rank 0 gets dk/dv from rank 4's (4,0) at t = 4.
  EXPECT_EQ(RingSchedule(8, RingKind::Balanced).finish_step(0, Pass::Backward), 4);
}

// [DFA] Fig. 1b (schedules.md §1.3), 1-based as printed: entries (query owner, key owner), {0,0} = idle.
TEST(RingSchedule, MatchesSpecTableP8) {
  const int table[8][5][2] = {
      {{1, 1}, {8, 1}, {7, 1}, {6, 1}, {0, 0}}, {{2, 2}, {2, 1}, {8, 2}, {7, 2}, {0, 0}},
      {{3, 3}, {3, 2}, {3, 1}, {8, 3}, {0, 0}}, {{4, 4}, {4, 3}, {4, 2}, {4, 1}, {0, 0}},
      {{5, 5}, {5, 4}, {5, 3}, {5, 2}, {5, 1}}, {{6, 6}, {6, 5}, {6, 4}, {6, 3}, {6, 2}},
      {{7, 7}, {7, 6}, {7, 5}, {7, 4}, {7, 3}}, {{8, 8}, {8, 7}, {8, 6}, {8, 5}, {8, 4}},
  };
  const RingSchedule s(8, RingKind::Balanced);
  ASSERT_EQ(s.num_steps(), 5);
  for (int w = 1; w <= 8; ++w)
    for (int t = 0; t < 5; ++t) {
      const auto task = s.task(w - 1, t);
      if (table[w - 1][t][0] == 0) {
        EXPECT_FALSE(task) << "worker " << w << " t=" << t;
        continue;
      }
      ASSERT_TRUE(task) << "worker " << w << " t=" << t;
      EXPECT_EQ(task->q_chunk, table[w - 1][t][0] - 1);
      EXPECT_EQ(task->k_chunk, table[w - 1][t][1] - 1);
      EXPECT_EQ(task->own_query, table[w - 1][t][0] == w);
    }
  // Merges (1-based): 8 <- 1@1, 2@2, 3@3; 7 <- 1@2, 2@3; 6 <- 1@3; 5 and below none.
  auto peers = [&](int rank) {
    std::vector<std::pair<int, int>> v;
    for (const Transfer& m : s.merges(rank)) {
      EXPECT_EQ(m.kind, PayloadKind::Partial);
      v.emplace_back(m.peer + 1, m.step);
    }
    return v;
  };
  EXPECT_EQ(peers(7), (std::vector<std::pair<int, int>>{{1, 1}, {2, 2}, {3, 3}}));
  EXPECT_EQ(peers(6), (std::vector<std::pair<int, int>>{{1, 2}, {2, 3}}));
  EXPECT_EQ(peers(5), (std::vector<std::pair<int, int>>{{1, 3}}));
  for (int r = 0; r <= 4; ++r) EXPECT_TRUE(peers(r).empty()) << r;
}

// The odd example of schedules.md §1.3 (P = 5), 0-based.
TEST(RingSchedule, MatchesSpecOddExampleP5) {
  const RingSchedule s(5, RingKind::Balanced);
  ASSERT_EQ(s.num_steps(), 3);
  auto qk = [&](int x, int t) {
    const auto task = s.task(x, t);
    return task ? std::make_pair(task->q_chunk, task->k_chunk) : std::make_pair(-1, -1);
  };
  using PR = std::pair<int, int>;
  EXPECT_EQ(qk(0, 1), PR(4, 0));
  EXPECT_EQ(qk(1, 1), PR(1, 0));
  EXPECT_EQ(qk(2, 1), PR(2, 1));
  EXPECT_EQ(qk(3, 1), PR(3, 2));
  EXPECT_EQ(qk(4, 1), PR(4, 3));
  EXPECT_EQ(qk(0, 2), PR(3, 0));
  EXPECT_EQ(qk(1, 2), PR(4, 1));
  EXPECT_EQ(qk(2, 2), PR(2, 0));
  EXPECT_EQ(qk(3, 2), PR(3, 1));
  EXPECT_EQ(qk(4, 2), PR(4, 2));
  EXPECT_FALSE(s.task(0, 1)->own_query);
  EXPECT_EQ(s.forward(4, 1).recv_result, (Transfer{PayloadKind::Partial, 0, 4, 1}));
  EXPECT_EQ(s.forward(3, 2).recv_result, (Transfer{PayloadKind::Partial, 0, 3, 2}));
  EXPECT_EQ(s.forward(4, 2).recv_result, (Transfer{PayloadKind::Partial, 1, 4, 2}));
  for (int x = 0; x < 5; ++x) EXPECT_EQ(s.num_tasks(x), 3) << "15 blocks in 3 steps, no idle slot";
  // The printed guard t != floor(P/2) would skip helping at t = 2: (q3,k0) and (q4,k1) lost.
  EXPECT_TRUE(s.helps(2));
}

TEST(RingSchedule, StepDetailsP8) {
  const RingSchedule s(8, RingKind::Balanced);
  // Normal rank 7 at t=1: kv of chunk 6 from 6; sends q7 to helper 0; merges 0's partial.
  RankStep f = s.forward(7, 1);
  EXPECT_EQ(f.recv_input, (Transfer{PayloadKind::KV, 6, 6, 1}));
  EXPECT_EQ(f.send_input, (Transfer{PayloadKind::Q, 0, 7, 1}));
  EXPECT_EQ(f.recv_result, (Transfer{PayloadKind::Partial, 0, 7, 1}));
  EXPECT_FALSE(f.send_result.active());
  // Helper 0 at t=1.
  f = s.forward(0, 1);
  EXPECT_EQ(f.recv_input, (Transfer{PayloadKind::Q, 7, 7, 1}));
  EXPECT_EQ(f.send_input, (Transfer{PayloadKind::KV, 1, 0, 1}));
  EXPECT_EQ(f.send_result, (Transfer{PayloadKind::Partial, 7, 7, 1}));
  ASSERT_TRUE(f.compute);
  EXPECT_TRUE(f.compute->fresh_state && f.compute->own_kv && !f.compute->own_query && !f.compute->causal);
  // Backward mirror.
  RankStep b = s.backward(0, 1);
  EXPECT_EQ(b.recv_input, (Transfer{PayloadKind::QBundle, 7, 7, 1}));
  EXPECT_EQ(b.send_result, (Transfer{PayloadKind::GradQ, 7, 7, 1}));
  EXPECT_EQ(b.recv_result, (Transfer{PayloadKind::GradKV, 1, 0, 1}));
  b = s.backward(6, 2);
  EXPECT_EQ(b.send_result, (Transfer{PayloadKind::GradKV, 4, 4, 2}));
  EXPECT_EQ(b.recv_result, (Transfer{PayloadKind::GradQ, 0, 6, 2}));
  // Even P, t = P/2: ranks 0..3 idle but still receive dk/dv from 4..7.
  b = s.backward(2, 4);
  EXPECT_FALSE(b.compute);
  EXPECT_EQ(b.send_input, (Transfer{PayloadKind::KV, 6, 2, 4}));
  EXPECT_EQ(b.recv_result, (Transfer{PayloadKind::GradKV, 6, 2, 4}));
  // Diagonal mask carries global positions.
  const Mask m = s.task(3, 0)->mask(100, Mask::causal());
  EXPECT_EQ(m.kind, MaskKind::Causal);
  EXPECT_EQ(m.q.offset, 300);
  EXPECT_EQ(m.k.offset, 300);
  EXPECT_TRUE(m.allowed(5, 5));
  EXPECT_FALSE(m.allowed(5, 6));
  EXPECT_EQ(s.task(3, 1)->mask(100, Mask::causal()).kind, MaskKind::None);
  // A window reaches every block: off the diagonal the block carries it too.
  const Mask w = s.task(3, 1)->mask(100, Mask::causal().with_window(Window{150, 0}));
  EXPECT_EQ(int(w.relation(0, 100, 0, 100)), int(Relation::Partial));
  EXPECT_TRUE(w.allowed(0, 99));   // position 300 sees 199 (150 back reaches 150)
  EXPECT_FALSE(w.allowed(99, 0));  // position 399 does not see 100
}

TEST(RingSchedule, ToString) {
  const std::string fwd = to_string(RingSchedule(8, RingKind::Balanced));
  EXPECT_NE(fwd.find("| rank | t=0 | t=1 | t=2 | t=3 | t=4 |"), std::string::npos) << fwd;
  EXPECT_NE(fwd.find("| 0 | (0,0) | helps 7: (7,0) | helps 6: (6,0) | helps 5: (5,0) | idle |"), std::string::npos)
      << fwd;
  EXPECT_NE(fwd.find("| 7 | (7,7) | (7,6) | (7,5) | (7,4) | (7,3) |"), std::string::npos) << fwd;
  EXPECT_NE(fwd.find("- rank 7 merges partials from 0 (t=1), 1 (t=2), 2 (t=3)"), std::string::npos) << fwd;
  const std::string bwd = to_string(RingSchedule(5, RingKind::Balanced), Pass::Backward);
  EXPECT_NE(bwd.find("| 0 | (0,0) | helps 4: (4,0) dq->4 | helps 3: (3,0) dq->3 |"), std::string::npos) << bwd;
  EXPECT_NE(bwd.find("| 4 | (4,4) | (4,3) dkv->3 | (4,2) dkv->2 |"), std::string::npos) << bwd;
  std::ostringstream os;
  os << RingSchedule(3, RingKind::Vanilla);
  EXPECT_NE(os.str().find("| 2 | (2,2) | (2,1) | (2,0) |"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("Merges: none"), std::string::npos) << os.str();
}

TEST(RingSchedule, VolumeModel) {
  RingSizes z;
  z.chunk_tokens = 1000;
  z.heads = 32;
  z.kv_heads = 8;
  z.head_dim = 128;
  z.io_bytes = 2;
  const std::int64_t kv = 2LL * 1000 * 8 * 128, q = 1000LL * 32 * 128, stats = 1000LL * 32;
  EXPECT_EQ(payload_words(PayloadKind::KV, z), kv);
  EXPECT_EQ(payload_words(PayloadKind::Q, z), q);
  EXPECT_EQ(payload_words(PayloadKind::Partial, z), q + 2 * stats);
  EXPECT_EQ(payload_words(PayloadKind::QBundle, z), 2 * q + 2 * stats);
  EXPECT_EQ(payload_words(PayloadKind::GradKV, z), kv);
  EXPECT_EQ(payload_words(PayloadKind::GradQ, z), q);
  EXPECT_EQ(payload_bytes(PayloadKind::KV, z), kv * 2);
  EXPECT_EQ(payload_bytes(PayloadKind::Partial, z), (q + 2 * stats) * 4);
  EXPECT_EQ(payload_bytes(PayloadKind::QBundle, z), 2 * q * 2 + 2 * stats * 4);
  EXPECT_EQ(payload_bytes(PayloadKind::GradQ, z), q * 4);

  for (int P = 1; P <= 24; ++P) {
    SCOPED_TRACE(P);
    const RingSchedule v(P, RingKind::Vanilla), b(P, RingKind::Balanced);
    for (int x = 0; x < P; ++x) {
      const RingVolume fv = ring_volume(v, x, Pass::Forward, z);
      EXPECT_EQ(fv.messages_received(PayloadKind::KV), x);
      EXPECT_EQ(fv.messages_sent(PayloadKind::KV), P - 1 - x);
      EXPECT_EQ(fv.total_words_received(), x * kv);
      const RingVolume bv = ring_volume(v, x, Pass::Backward, z);
      EXPECT_EQ(bv.total_words_received(), x * kv + (P - 1 - x) * kv) << "kv in, dk/dv back";
    }
    // Balanced: totals over ranks from the block census (normal vs helper blocks).
    const int T = P / 2;
    std::int64_t normal = 0;
    for (int x = 0; x < P; ++x) normal += std::min(x, T);
    const std::int64_t helper = std::int64_t(P) * (P - 1) / 2 - normal;
    for (Pass pass : {Pass::Forward, Pass::Backward}) {
      RingVolume::PerKind sent{}, recv{};
      for (int x = 0; x < P; ++x) {
        const RingVolume r = ring_volume(b, x, pass, z);
        for (int k = 0; k < kNumPayloadKinds; ++k) {
          sent[k] += r.sent_words[k];
          recv[k] += r.recv_words[k];
        }
      }
      EXPECT_EQ(sent, recv);
      EXPECT_EQ(recv[int(PayloadKind::KV)], normal * kv);
      if (pass == Pass::Forward) {
        EXPECT_EQ(recv[int(PayloadKind::Q)], helper * q);
        EXPECT_EQ(recv[int(PayloadKind::Partial)], helper * (q + 2 * stats));
      } else {
        EXPECT_EQ(recv[int(PayloadKind::QBundle)], helper * (2 * q + 2 * stats));
        EXPECT_EQ(recv[int(PayloadKind::GradQ)], helper * q);
        EXPECT_EQ(recv[int(PayloadKind::GradKV)], normal * kv);
      }
    }
  }
  // P = 8 by hand: rank 7 gets kv at t=1..4 and 3 partials; sends q three times.
  const RingVolume r7 = ring_volume(RingSchedule(8, RingKind::Balanced), 7, Pass::Forward, z);
  EXPECT_EQ(r7.messages_received(PayloadKind::KV), 4);
  EXPECT_EQ(r7.messages_received(PayloadKind::Partial), 3);
  EXPECT_EQ(r7.messages_sent(PayloadKind::Q), 3);
  EXPECT_EQ(r7.total_words_sent(), 3 * q);
  EXPECT_EQ(r7.total_bytes_received(), 4 * kv * 2 + 3 * (q + 2 * stats) * 4);
  const RingVolume r0 = ring_volume(RingSchedule(8, RingKind::Balanced), 0, Pass::Forward, z);
  EXPECT_EQ(r0.messages_sent(PayloadKind::KV), 4);
  EXPECT_EQ(r0.messages_sent(PayloadKind::Partial), 3);
  EXPECT_EQ(r0.messages_received(PayloadKind::Q), 3);
}

TEST(RingSchedule, BadInput) {
  EXPECT_THROW(RingSchedule(0, RingKind::Balanced), InvalidArgument);
  EXPECT_THROW(RingSchedule(-3, RingKind::Vanilla), InvalidArgument);
  const RingSchedule s(4, RingKind::Balanced);
  EXPECT_THROW(s.forward(4, 0), InvalidArgument);
  EXPECT_THROW(s.forward(-1, 0), InvalidArgument);
  EXPECT_THROW(s.backward(0, 3), InvalidArgument);
  EXPECT_THROW(s.num_tasks(7), InvalidArgument);
  try {
    s.forward(0, 3);
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("t=3"), std::string::npos) << e.what();
  }
  RingSizes z;
  z.heads = 6;
  z.kv_heads = 4;
  EXPECT_THROW(payload_words(PayloadKind::KV, z), InvalidArgument);
  z.kv_heads = 3;
  EXPECT_THROW(ring_volume(s, 4, Pass::Forward, z), InvalidArgument);
}
