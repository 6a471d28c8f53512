// Exact action lists for small cases, and the refusals.
#include "parallel/pipeline/schedule.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace pipeline {
namespace {

using ::testing::HasSubstr;

std::string Actions(absl::string_view schedule, int P, int V, int M, int rank) {
  absl::StatusOr<Schedule> s = ScheduleByName(schedule);
  EXPECT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::vector<Action>> actions = s->actions(P, V, M, rank);
  EXPECT_TRUE(actions.ok()) << actions.status();
  return actions.ok() ? ToString(*actions) : "";
}

std::string ComputeOnly(absl::string_view schedule, int P, int V, int M, int rank) {
  absl::StatusOr<std::vector<Action>> actions = ScheduleByName(schedule)->actions(P, V, M, rank);
  EXPECT_TRUE(actions.ok()) << actions.status();
  std::vector<Action> compute;
  for (const Action& a : *actions) {
    if (IsCompute(a)) compute.push_back(a);
  }
  return ToString(compute);
}

TEST(ScheduleTest, OneFOneBFirstRankIsMegatrons) {
  // P-1 = 3 warm-up forwards, then send_forward_recv_backward / backward pairs: the
  // batch after each forward is {send its activation, receive the next gradient}.
  EXPECT_EQ(Actions("1f1b", 4, 1, 8, 0),
            "F0 sF0>1 F1 sF1>1 F2 sF2>1 F3 sF3>1 rB0<1 BW0 F4 sF4>1 rB1<1 BW1 "
            "F5 sF5>1 rB2<1 BW2 F6 sF6>1 rB3<1 BW3 F7 sF7>1 rB4<1 BW4 "
            "rB5<1 BW5 rB6<1 BW6 rB7<1 BW7");
}

TEST(ScheduleTest, OneFOneBLastRank) {
  // No warm-up: F and B alternate. The next activation is received while rank 2 sends
  // it, before BW (Megatron receives it after, batched with the gradient's send; both
  // orders are deadlock-free, this one lets rank 2 go on at once).
  EXPECT_EQ(Actions("1f1b", 4, 1, 8, 3),
            "rF0<2 F0 rF1<2 BW0 sB0>2 F1 BW1 rF2<2 sB1>2 F2 BW2 rF3<2 sB2>2 F3 BW3 "
            "rF4<2 sB3>2 F4 BW4 rF5<2 sB4>2 F5 BW5 rF6<2 sB5>2 F6 BW6 rF7<2 sB6>2 F7 BW7 "
            "sB7>2");
}

TEST(ScheduleTest, GpipeRunsAllForwardsThenBackwardsInReverse) {
  EXPECT_EQ(Actions("gpipe", 4, 1, 4, 0),
            "F0 sF0>1 F1 sF1>1 F2 sF2>1 F3 sF3>1 rB3<1 BW3 rB2<1 BW2 rB1<1 BW1 rB0<1 BW0");
  EXPECT_EQ(Actions("gpipe", 4, 1, 4, 1),
            "rF0<0 F0 rF1<0 sF0>2 F1 rF2<0 sF1>2 F2 rF3<0 sF2>2 F3 sF3>2 "
            "rB3<2 BW3 sB3>0 rB2<2 BW2 sB2>0 rB1<2 BW1 sB1>0 rB0<2 BW0 sB0>0");
}

TEST(ScheduleTest, InterleavedComputeOrderIsMegatrons) {
  // P=2, V=2, M=4: rank 0 warms up with (P-1)*2 + (V-1)*P = 4 forwards, group of P=2
  // micro-batches through chunk 0, then chunk 1; backwards start on the last chunk.
  EXPECT_EQ(ComputeOnly("interleaved-1f1b", 2, 2, 4, 0),
            "F0 F1 F0c1 F1c1 F2 BW0c1 F3 BW1c1 F2c1 BW0 F3c1 BW1 BW2c1 BW3c1 BW2 BW3");
  EXPECT_EQ(ComputeOnly("interleaved-1f1b", 2, 2, 4, 1),
            "F0 F1 F0c1 BW0c1 F1c1 BW1c1 F2 BW0 F3 BW1 F2c1 BW2c1 F3c1 BW3c1 BW2 BW3");
}

TEST(ScheduleTest, InterleavedWithTwoRanksSendsBothWaysToOnePeer) {
  // PP=2 with virtual stages: every transfer goes to the same peer, activations and
  // gradients mixed in one order that both sides share.
  EXPECT_EQ(Actions("interleaved-1f1b", 2, 2, 4, 0),
            "F0 sF0>1 F1 sF1>1 rF0c1<1 F0c1 sF0c1>1 rF1c1<1 F1c1 sF1c1>1 F2 sF2>1 rB0c1<1 "
            "BW0c1 F3 sB0c1>1 sF3>1 rB1c1<1 BW1c1 rF2c1<1 F2c1 sB1c1>1 sF2c1>1 rB0<1 BW0 "
            "rF3c1<1 F3c1 sF3c1>1 rB1<1 BW1 rB2c1<1 BW2c1 sB2c1>1 rB3c1<1 BW3c1 sB3c1>1 "
            "rB2<1 BW2 rB3<1 BW3");
}

TEST(ScheduleTest, ZeroBubbleH1DefersRankRsFirstRWeightGradients) {
  EXPECT_EQ(ComputeOnly("zb-h1", 4, 1, 6, 0),
            "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5");
  EXPECT_EQ(ComputeOnly("zb-h1", 4, 1, 6, 3),
            "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5");
}

TEST(ScheduleTest, ZbvTurnsOnTheLastRankWithoutTransfers) {
  // P=2: rank 1 holds stages 1 and 2, so F0 -> F0c1 and B0c1 -> B0 stay local.
  const std::string rank1 = Actions("zbv", 2, 2, 4, 1);
  EXPECT_THAT(rank1, HasSubstr("rF0<0 F0 rF1<0 F0c1"));
  EXPECT_THAT(rank1, ::testing::Not(HasSubstr("sF0>")));
}

TEST(ScheduleTest, RegistryKnowsExactlyTheDocumentedNames) {
  EXPECT_THAT(ScheduleNames(),
              ::testing::ElementsAre("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv"));
  for (const std::string& name : ScheduleNames()) {
    absl::StatusOr<Schedule> s = ScheduleByName(name);
    ASSERT_TRUE(s.ok()) << name;
    EXPECT_EQ(s->name, name);
  }
  EXPECT_EQ(ScheduleByName("zbv")->layout, StageLayout::kVShape);
  absl::Status unknown = ScheduleByName("1F1B").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.message()),
              HasSubstr("gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv"));
}

// A prediction simulates M itself up to max(1024, 4P) micro-batches, beyond that the
// largest count within the bound with M's remainder modulo P.
TEST(ScheduleTest, SimulatedMicroBatchesKeepTheRemainderModuloP) {
  EXPECT_EQ(SimulatedMicroBatches(2, 8), 8);
  EXPECT_EQ(SimulatedMicroBatches(2, 1024), 1024);
  EXPECT_EQ(SimulatedMicroBatches(2, 200000000), 1024);
  EXPECT_EQ(SimulatedMicroBatches(2, 200000001), 1023);
  EXPECT_EQ(SimulatedMicroBatches(3, 1025), 1022);    // both 2 (mod 3)
  EXPECT_EQ(SimulatedMicroBatches(3, 1026), 1023);    // both 0
  EXPECT_EQ(SimulatedMicroBatches(3, 1027), 1024);    // both 1
  EXPECT_EQ(SimulatedMicroBatches(300, 1200), 1200);  // the bound is 4P = 1200
  EXPECT_EQ(SimulatedMicroBatches(300, 5000), 1100);  // both 200 (mod 300)
}

TEST(ScheduleTest, RefusalsSpellOutTheConstraint) {
  auto message = [](absl::string_view name, int P, int V, int M, int rank) {
    absl::StatusOr<std::vector<Action>> r = ScheduleByName(name)->actions(P, V, M, rank);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  EXPECT_THAT(message("1f1b", 4, 2, 8, 0), HasSubstr("interleaved-1f1b"));
  EXPECT_THAT(message("interleaved-1f1b", 4, 1, 8, 0), HasSubstr("at least 2 virtual"));
  EXPECT_THAT(message("interleaved-1f1b", 4, 2, 6, 0), HasSubstr("M % P == 0"));
  EXPECT_THAT(message("interleaved-1f1b", 4, 2, 6, 0), HasSubstr("--num-micro-batches 8 or 4"));
  EXPECT_THAT(message("interleaved-1f1b", 4, 2, 2, 0), HasSubstr("--num-micro-batches 4 "));
  EXPECT_THAT(message("zbv", 4, 3, 8, 0), HasSubstr("2 model chunks"));
  EXPECT_THAT(message("zb-h1", 4, 1, 8, 4), HasSubstr("outside 0..3"));
  EXPECT_THAT(message("gpipe", 0, 1, 0, 0), HasSubstr("P=0 must be >= 1; micro-batches M=0"));
  EXPECT_THAT(std::string(MakePlan("nope", 2, 1, 2).status().message()), HasSubstr("nope"));
}

}  // namespace
}  // namespace pipeline
}  // namespace conveyor
