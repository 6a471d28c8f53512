// The executor on its own: two pipeline ranks as threads of this process run a
// schedule's actions on a stage that records its calls, so the test sees the order of
// the computations and every activation and gradient that crossed a stage boundary,
// over the wire or handed over on one rank.
#include "parallel/pipeline/executor.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/pipeline/schedule.h"
#include "tests/util/in_process_world.h"

namespace conveyor {
namespace pipeline {
namespace {

constexpr int64_t kBoundary = 6;

// What global stage `stage` hands on for `micro_batch`: its activation, and (negated)
// the gradient it hands back. Small integers, exact in bf16 too.
float Activation(int stage, int micro_batch) { return 10.0f * (stage + 1) + micro_batch; }

Tensor Filled(float value, DType dtype) {
  Tensor t = Tensor::Zeros({kBoundary}, MemoryCategory::kActivations, dtype);
  for (int64_t i = 0; i < kBoundary; ++i) {
    if (dtype == DType::kBFloat16) {
      static_cast<BFloat16*>(t.raw())[i] = ToBFloat16(value);
    } else {
      t.data()[i] = value;
    }
  }
  return t;
}

float Element(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kBFloat16 ? ToFloat(static_cast<const BFloat16*>(t.raw())[i])
                                       : t.data()[i];
}

// Records each call as "F3c1 <- 21": the action, and what arrived (the first element
// of a tensor whose elements are all equal, "mixed" when they are not, "none" for an
// empty one, "wrong dtype" for one not of the boundary's dtype).
class RecordingStage : public Stage {
 public:
  explicit RecordingStage(const PipelinePlace& place, DType dtype = DType::kFloat32)
      : place_(place), dtype_(dtype) {}

  int64_t BoundaryElements() const override { return kBoundary; }
  DType BoundaryDType() const override { return dtype_; }
  Device device() const override { return Device::kCpu; }

  absl::StatusOr<Tensor> Forward(int micro_batch, int chunk, Tensor input) override {
    Record(pipeline::Forward(micro_batch, chunk), input);
    const int stage = place_.GlobalStage(chunk);
    if (stage == place_.num_stages() - 1) return Tensor();
    return Filled(Activation(stage, micro_batch), dtype_);
  }
  absl::StatusOr<Tensor> BackwardInput(int micro_batch, int chunk, Tensor output_grad) override {
    Record(pipeline::BackwardInput(micro_batch, chunk), output_grad);
    return InputGradient(micro_batch, chunk);
  }
  absl::Status BackwardWeight(int micro_batch, int chunk) override {
    Record(pipeline::BackwardWeight(micro_batch, chunk), Tensor());
    return absl::OkStatus();
  }
  absl::StatusOr<Tensor> Backward(int micro_batch, int chunk, Tensor output_grad) override {
    Record(pipeline::Backward(micro_batch, chunk), output_grad);
    return InputGradient(micro_batch, chunk);
  }

  const std::vector<std::string>& calls() const { return calls_; }

 private:
  Tensor InputGradient(int micro_batch, int chunk) const {
    const int stage = place_.GlobalStage(chunk);
    return stage == 0 ? Tensor() : Filled(-Activation(stage, micro_batch), dtype_);
  }
  void Record(const Action& action, const Tensor& received) {
    std::string what = "none";
    if (!received.empty()) {
      what = absl::StrCat(Element(received, 0));
      for (int64_t i = 0; i < received.numel(); ++i) {
        if (Element(received, i) != Element(received, 0)) what = "mixed";
      }
      if (received.dtype() != dtype_) what = "wrong dtype";
    }
    calls_.push_back(absl::StrCat(ToString(action), " <- ", what));
  }

  PipelinePlace place_;
  DType dtype_;
  std::vector<std::string> calls_;
};

// What the calls of `place`'s compute actions must record: each forward receives the
// previous stage's activation, each backward (B or fused) the next stage's gradient.
std::vector<std::string> ExpectedCalls(const std::vector<Action>& actions,
                                       const PipelinePlace& place) {
  std::vector<std::string> expected;
  for (const Action& a : actions) {
    if (!IsCompute(a)) continue;
    const int stage = place.GlobalStage(a.chunk);
    std::string what = "none";
    if (a.type == ActionType::kForward && stage > 0) {
      what = absl::StrCat(Activation(stage - 1, a.micro_batch));
    } else if ((a.type == ActionType::kBackward || a.type == ActionType::kBackwardInput) &&
               stage < place.num_stages() - 1) {
      what = absl::StrCat(-Activation(stage + 1, a.micro_batch));
    }
    expected.push_back(absl::StrCat(ToString(a), " <- ", what));
  }
  return expected;
}

struct ScheduleCase {
  std::string schedule;
  int V;
  int M;
  DType dtype = DType::kFloat32;  // of the boundary tensors: what travels
};

class ExecutorTest : public ::testing::TestWithParam<ScheduleCase> {};

// Two ranks run their actions; each computes in its list's order, receives exactly
// what the neighbour stage sent, and times every action in order.
TEST_P(ExecutorTest, RunsActionsInOrderAndPassesEveryBoundaryTensor) {
  const ScheduleCase& c = GetParam();
  constexpr int kRanks = 2;
  absl::StatusOr<Plan> plan = MakePlan(c.schedule, kRanks, c.V, c.M);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<PipelinePlace> places;
  std::vector<RecordingStage> stages;
  for (int r = 0; r < kRanks; ++r) places.push_back({plan->layout, kRanks, c.V, r});
  for (int r = 0; r < kRanks; ++r) stages.emplace_back(places[r], c.dtype);
  std::vector<std::vector<TimedAction>> timelines(kRanks);
  testing_util::InProcessWorld world(kRanks);
  const std::vector<absl::Status> statuses = world.Run([&](int r, Communicator& pp) {
    return RunActions(plan->ranks[r], places[r], pp, stages[r], &timelines[r]);
  });
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(absl::StrCat(c.schedule, " rank ", r));
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    EXPECT_THAT(stages[r].calls(),
                ::testing::ElementsAreArray(ExpectedCalls(plan->ranks[r], places[r])));
    ASSERT_EQ(timelines[r].size(), plan->ranks[r].size());
    for (size_t i = 0; i < timelines[r].size(); ++i) {
      EXPECT_EQ(timelines[r][i].action, plan->ranks[r][i]) << "action " << i;
      EXPECT_LE(timelines[r][i].start, timelines[r][i].end);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, ExecutorTest,
                         ::testing::Values(ScheduleCase{"1f1b", 1, 3},
                                           ScheduleCase{"interleaved-1f1b", 2, 4},
                                           ScheduleCase{"zb-h1", 1, 3},
                                           // The V-shape: rank 1 hands stage 1's output to
                                           // stage 2 without a transfer.
                                           ScheduleCase{"zbv", 2, 4},
                                           // bf16 messages travel as bf16 (the receiver's
                                           // buffer has 2 bytes an element).
                                           ScheduleCase{"1f1b", 1, 3, DType::kBFloat16},
                                           ScheduleCase{"zbv", 2, 4, DType::kBFloat16}),
                         [](const ::testing::TestParamInfo<ScheduleCase>& test) {
                           std::string name = test.param.schedule;
                           if (test.param.dtype == DType::kBFloat16) name += "_bf16";
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// A send whose tensor no computation produced is the schedule's error, named.
TEST(ExecutorErrorTest, SendBeforeItsComputeFails) {
  const PipelinePlace place{StageLayout::kLoop, 2, 1, 0};
  RecordingStage stage(place);
  testing_util::InProcessWorld world(2);
  const absl::Status status =
      RunActions({{ActionType::kSendForward, 0, 0, 1}}, place, world.rank(0), stage, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("has nothing to send"));
  EXPECT_TRUE(stage.calls().empty());
}

}  // namespace
}  // namespace pipeline
}  // namespace conveyor
