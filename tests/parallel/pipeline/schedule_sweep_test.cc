// Every schedule over P in {1, 2, 4, 8}, V in {1, 2, 3}, M in 1..16: each list does all
// the work exactly once, every send meets its receive, and the simulator finds no
// deadlock and the peak memory the formula gives.
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "parallel/pipeline/bubble.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/simulator.h"

namespace conveyor {
namespace pipeline {
namespace {

// What the registry should accept, written out independently of the generators.
bool Valid(const std::string& name, int P, int V, int M) {
  if (name == "interleaved-1f1b") return V >= 2 && M % P == 0;
  if (name == "zbv") return V == 2;
  return V == 1;
}

void CheckPlan(const Plan& plan) {
  const int P = plan.num_ranks, M = plan.num_micro_batches;
  // (stage, micro-batch) -> how often F, B, W, fused B ran.
  std::map<std::pair<int, int>, std::vector<int>> work;
  // (from, to) -> the transfers in list order, as (is forward, micro-batch, from stage).
  std::map<std::pair<int, int>, std::vector<std::tuple<bool, int, int>>> sent, received;
  for (int rank = 0; rank < P; ++rank) {
    for (const Action& a : plan.ranks[rank]) {
      const int stage = GlobalStage(plan.layout, P, rank, a.chunk);
      std::vector<int>& w = work[{stage, a.micro_batch}];
      w.resize(4);
      switch (a.type) {
        case ActionType::kForward:
          ++w[0];
          break;
        case ActionType::kBackwardInput:
          ++w[1];
          break;
        case ActionType::kBackwardWeight:
          ++w[2];
          break;
        case ActionType::kBackward:
          ++w[3];
          break;
        default: {
          const bool forward = IsForwardP2p(a.type);
          if (IsSend(a.type)) {
            sent[{rank, a.peer}].push_back({forward, a.micro_batch, stage});
          } else {
            // The sender's stage is the previous one for activations, the next for
            // gradients.
            received[{a.peer, rank}].push_back(
                {forward, a.micro_batch, forward ? stage - 1 : stage + 1});
          }
        }
      }
    }
  }
  for (int s = 0; s < plan.num_stages(); ++s) {
    for (int m = 0; m < M; ++m) {
      std::vector<int> w = work[{s, m}];
      w.resize(4);
      const std::string where = absl::StrCat("stage ", s, " micro-batch ", m);
      EXPECT_EQ(w[0], 1) << where;
      if (w[1] + w[2] > 0) {  // B and W split: each once, no fused backward
        EXPECT_EQ(w[1], 1) << where;
        EXPECT_EQ(w[2], 1) << where;
        EXPECT_EQ(w[3], 0) << where;
      } else {
        EXPECT_EQ(w[3], 1) << where;
      }
    }
  }
  EXPECT_EQ(sent, received);
}

TEST(ScheduleSweepTest, EveryScheduleEveryShape) {
  int checked = 0;
  for (const std::string& name : ScheduleNames()) {
    for (int P : {1, 2, 4, 8}) {
      for (int V : {1, 2, 3}) {
        for (int M = 1; M <= 16; ++M) {
          SCOPED_TRACE(absl::StrCat(name, " P=", P, " V=", V, " M=", M));
          absl::StatusOr<Plan> plan = MakePlan(name, P, V, M);
          ASSERT_EQ(plan.ok(), Valid(name, P, V, M)) << plan.status();
          if (!plan.ok()) {
            EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
            continue;
          }
          CheckPlan(*plan);
          absl::StatusOr<SimulationResult> result = Simulate(*plan);
          ASSERT_TRUE(result.ok()) << result.status();
          int messages = 0;
          for (int rank = 0; rank < P; ++rank) {
            messages += result->ranks[rank].messages_sent;
            const int peak = *PeakStashed(name, P, V, M, rank);
            if (name == "zbv") {
              EXPECT_LE(result->ranks[rank].peak_stashed, peak) << "rank " << rank;
            } else {
              EXPECT_EQ(result->ranks[rank].peak_stashed, peak) << "rank " << rank;
            }
          }
          EXPECT_EQ(messages, result->p2p_messages);
          // Each micro-batch crosses every boundary between ranks twice (activation
          // down, gradient back), except the V-shape's local turn.
          const int crossings = plan->num_stages() - 1 - (name == "zbv" ? 1 : 0);
          EXPECT_EQ(result->p2p_messages, P == 1 ? 0 : 2 * M * crossings);
          ++checked;
        }
      }
    }
  }
  // gpipe, 1f1b, zb-h1, zb-h2: 4 P x 16 M; zbv: 4 x 16; interleaved: V 2 and 3 with
  // M % P == 0: P=1: 16, P=2: 8, P=4: 4, P=8: 2, twice.
  EXPECT_EQ(checked, 5 * 64 + 2 * (16 + 8 + 4 + 2));
}

}  // namespace
}  // namespace pipeline
}  // namespace conveyor
