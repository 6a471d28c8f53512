// Learning-rate schedules against values worked out by hand from Megatron's formulas.
#include "trainer/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

OptimizerConfig Schedule(const std::string& style, int warmup, int decay) {
  OptimizerConfig c;
  c.set_lr(1.0f);
  c.set_min_lr(0.1f);
  c.set_lr_decay_style(style);
  c.set_lr_warmup_iters(warmup);
  c.set_lr_decay_iters(decay);
  return c;
}

TEST(LrScheduleTest, WarmupIsLinearFromInitAndFirstIterationUsesStepZero) {
  OptimizerConfig c = Schedule("linear", 4, 14);
  c.set_lr_warmup_init(0.2f);
  const LrSchedule s(c);
  EXPECT_NEAR(s.ForIteration(1), 0.2, 1e-7);  // no step taken yet
  EXPECT_NEAR(s.At(1), 0.2 + 0.8 * 0.25, 1e-7);
  EXPECT_NEAR(s.At(4), 1.0, 1e-7);
}

TEST(LrScheduleTest, LinearDecaysToMinAndStaysThere) {
  const LrSchedule s(Schedule("linear", 4, 14));
  EXPECT_NEAR(s.At(9), 0.1 + 0.9 * 0.5, 1e-7);  // halfway through 10 decay steps
  EXPECT_NEAR(s.At(14), 0.1, 1e-7);
  EXPECT_NEAR(s.At(100), 0.1, 1e-7);
}

TEST(LrScheduleTest, CosineFollowsHalfCosine) {
  const LrSchedule s(Schedule("cosine", 0, 8));
  EXPECT_NEAR(s.At(0), 1.0, 1e-7);
  EXPECT_NEAR(s.At(2), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 4)), 1e-6);
  EXPECT_NEAR(s.At(4), 0.55, 1e-6);
  EXPECT_NEAR(s.At(8), 0.1, 1e-7);
}

TEST(LrScheduleTest, ConstantIgnoresDecay) {
  const LrSchedule s(Schedule("constant", 2, 4));
  EXPECT_NEAR(s.At(1), 0.5, 1e-7);
  EXPECT_NEAR(s.At(3), 1.0, 1e-7);
  EXPECT_NEAR(s.At(1000), 1.0, 1e-7);
}

TEST(LrScheduleTest, InverseSquareRootDecaysFromWarmup) {
  const LrSchedule s(Schedule("inverse-square-root", 4, 0));
  EXPECT_NEAR(s.At(4), 1.0, 1e-7);
  EXPECT_NEAR(s.At(16), 0.5, 1e-7);
  EXPECT_NEAR(s.At(10000), 0.1, 1e-7);  // floored at min_lr
}

TEST(LrScheduleTest, SamplesCountTheGlobalBatchPerStep) {
  // --train-samples: warmup 20 samples and decay 100, 8 samples a step.
  OptimizerConfig c;
  c.set_lr(1.0f);
  c.set_min_lr(0.1f);
  c.set_lr_decay_style("linear");
  c.set_lr_warmup_samples(20);
  c.set_lr_decay_samples(100);
  const LrSchedule s(c, /*samples_per_step=*/8);
  EXPECT_NEAR(s.At(1), 8.0 / 20, 1e-7);
  EXPECT_NEAR(s.At(2), 16.0 / 20, 1e-7);
  EXPECT_NEAR(s.At(3), 0.1 + 0.9 * (1 - 4.0 / 80), 1e-7);  // 24 samples: 4 into the decay
  EXPECT_NEAR(s.At(13), 0.1, 1e-7);                        // 104 > 100

  // Whole steps: the same schedule as in iterations (up to rounding: the inverse square
  // root divides other numbers).
  for (const std::string style : {"linear", "cosine", "inverse-square-root"}) {
    OptimizerConfig by_samples = Schedule(style, 0, 0);
    by_samples.set_lr_warmup_samples(16);
    by_samples.set_lr_decay_samples(80);
    const LrSchedule samples(by_samples, 8);
    const LrSchedule iterations(Schedule(style, 2, 10));
    for (int step = 0; step < 14; ++step) {
      EXPECT_DOUBLE_EQ(samples.At(step), iterations.At(step)) << style << " step " << step;
    }
  }
}

}  // namespace
}  // namespace conveyor
