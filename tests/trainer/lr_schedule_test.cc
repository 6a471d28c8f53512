// Learning-rate schedules against values worked out by hand from Megatron's formulas.
#include "trainer/optimization/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

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
  const LrSchedule s(Schedule("inverse-square-root", 4, 20000));
  EXPECT_NEAR(s.At(4), 1.0, 1e-7);
  EXPECT_NEAR(s.At(16), 0.5, 1e-7);
  EXPECT_NEAR(s.At(10000), 0.1, 1e-7);  // floored at min_lr
  // Megatron checks num_steps > lr_decay_steps before the inverse square root.
  const LrSchedule short_decay(Schedule("inverse-square-root", 4, 8));
  EXPECT_NEAR(short_decay.At(8), 1.0 * std::sqrt(4.0 / 8.0), 1e-7);
  EXPECT_NEAR(short_decay.At(9), 0.1, 1e-7);
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

// Megatron's OptimizerParamScheduler.get_lr, transcribed from
// megatron/core/optimizer_param_scheduler.py in float64, in samples: `n` num_steps,
// lengths lr_warmup_steps / lr_decay_steps / wsd_decay_steps.
struct MegatronScheduler {
  double init_lr = 0.0, max_lr = 0.0, min_lr = 0.0;
  double warmup = 0, decay = 0, wsd_decay = 0;
  std::string style, wsd_style;

  double GetLr(double n) const {
    if (warmup > 0 && n <= warmup) return init_lr + (max_lr - init_lr) * n / warmup;
    if (style == "constant") return max_lr;
    if (n > decay) return min_lr;
    if (style == "inverse-square-root") {
      return std::max(
          min_lr, max_lr * std::pow(std::max(warmup, 1.0), 0.5) / std::pow(std::max(n, 1.0), 0.5));
    }
    const double decay_ratio = (n - warmup) / (decay - warmup);
    double coeff = 0.0;
    if (style == "linear") coeff = 1.0 - decay_ratio;
    if (style == "cosine") coeff = 0.5 * (std::cos(M_PI * decay_ratio) + 1.0);
    if (style == "WSD") {
      const double anneal_start = decay - wsd_decay;
      if (n <= anneal_start) {
        coeff = 1.0;
      } else {
        const double r = (n - anneal_start) / wsd_decay;
        if (wsd_style == "linear") coeff = 1.0 - r;
        if (wsd_style == "cosine") coeff = 0.5 * (std::cos(M_PI * r) + 1.0);
        if (wsd_style == "exponential") coeff = 2.0 * std::pow(0.5, r) - 1.0;
        if (wsd_style == "minus_sqrt") coeff = 1.0 - std::sqrt(r);
      }
    }
    return min_lr + coeff * (max_lr - min_lr);
  }
};

constexpr const char* kWsdStyles[] = {"exponential", "linear", "cosine", "minus_sqrt"};

// --train-iters: Megatron's lengths are iterations times the global batch
// (get_optimizer_param_scheduler), and its scheduler advances by the batch each step.
TEST(LrScheduleTest, WsdFollowsMegatronStepByStepInIterations) {
  for (const char* wsd_style : kWsdStyles) {
    OptimizerConfig c = Schedule("WSD", 3, 40);
    c.set_lr_warmup_init(0.05f);
    c.set_lr_wsd_decay_style(wsd_style);
    c.set_lr_wsd_decay_iters(12);
    const int64_t batch = 16;
    const LrSchedule s(c, batch);
    MegatronScheduler m{c.lr_warmup_init(), c.lr(),       c.min_lr(), 3.0 * batch,
                        40.0 * batch,       12.0 * batch, "WSD",      wsd_style};
    for (int64_t iteration = 1; iteration <= 45; ++iteration) {
      const double want = m.GetLr(static_cast<double>((iteration - 1) * batch));
      EXPECT_NEAR(s.ForIteration(iteration), want, 1e-12) << wsd_style << " it " << iteration;
      EXPECT_NEAR(s.RatesForIteration(iteration).main, want, 1e-12);
    }
    // Stable at the peak until the anneal's first step, min-lr after the decay.
    EXPECT_NEAR(s.At(28), 1.0, 1e-12);
    EXPECT_LT(s.At(29), 1.0);
    EXPECT_NEAR(s.At(40), 0.1, 1e-7);
    EXPECT_NEAR(s.At(41), 0.1, 1e-7);
  }
}

TEST(LrScheduleTest, WsdFollowsMegatronInSamplesWithAVaryingBatch) {
  for (const char* wsd_style : kWsdStyles) {
    OptimizerConfig c = Schedule("WSD", 0, 0);
    c.set_lr_warmup_samples(50);
    c.set_lr_decay_samples(1000);
    c.set_lr_wsd_decay_style(wsd_style);
    c.set_lr_wsd_decay_samples(300);
    const LrSchedule s(c, 32);
    const MegatronScheduler m{0.0, c.lr(), c.min_lr(), 50, 1000, 300, "WSD", wsd_style};
    for (int64_t consumed = 0; consumed <= 1100; consumed += 7) {
      EXPECT_NEAR(s.AfterSamples(consumed), m.GetLr(static_cast<double>(consumed)), 1e-12)
          << wsd_style << " after " << consumed;
    }
  }
}

// --train-iters with a varying batch (--step-batch-size-schedule): Megatron's scheduler
// advances by each step's batch over lengths of iterations times the (last) global batch.
TEST(LrScheduleTest, IterationLengthsCountSamplesOfAVaryingBatch) {
  OptimizerConfig c = Schedule("cosine", 2, 10);
  const LrSchedule s(c, 8);
  const MegatronScheduler m{0.0, c.lr(), c.min_lr(), 16, 80, 0, "cosine", ""};
  int64_t consumed = 0;
  for (const int64_t batch : {2, 2, 4, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8}) {
    EXPECT_NEAR(s.AfterSamples(consumed), m.GetLr(static_cast<double>(consumed)), 1e-12)
        << consumed;
    consumed += batch;
  }
}

TEST(LrScheduleTest, OtherStylesFollowMegatronStepByStep) {
  for (const char* style : {"linear", "cosine", "constant", "inverse-square-root"}) {
    OptimizerConfig c = Schedule(style, 5, 30);
    c.set_lr_warmup_init(0.02f);
    const LrSchedule s(c, 4);
    const MegatronScheduler m{c.lr_warmup_init(), c.lr(), c.min_lr(), 20, 120, 0, style, ""};
    for (int64_t steps = 0; steps <= 35; ++steps) {
      EXPECT_NEAR(s.At(steps), m.GetLr(static_cast<double>(steps * 4)), 1e-12)
          << style << " after " << steps;
    }
  }
}

// --decoupled-lr: the same scheduler with the group's max_lr / min_lr overrides; the
// warmup still starts from the shared init_lr.
TEST(LrScheduleTest, DecoupledGroupHasItsOwnPeakAndFloor) {
  for (const bool own_min : {false, true}) {
    OptimizerConfig c = Schedule("cosine", 4, 20);
    c.set_lr_warmup_init(0.01f);
    c.set_decoupled_lr(0.5f);
    if (own_min) c.set_decoupled_min_lr(0.02f);
    const LrSchedule s(c, 2);
    const MegatronScheduler main{c.lr_warmup_init(), c.lr(), c.min_lr(), 8, 40, 0, "cosine", ""};
    MegatronScheduler decoupled = main;
    decoupled.max_lr = c.decoupled_lr();
    decoupled.min_lr = own_min ? c.decoupled_min_lr() : c.min_lr();
    for (int64_t iteration = 1; iteration <= 24; ++iteration) {
      const double n = static_cast<double>((iteration - 1) * 2);
      const StepLearningRates rates = s.RatesForIteration(iteration);
      EXPECT_NEAR(rates.main, main.GetLr(n), 1e-12) << iteration;
      EXPECT_NEAR(rates.decoupled, decoupled.GetLr(n), 1e-12) << iteration;
    }
    EXPECT_NEAR(s.RatesForIteration(1).decoupled, 0.01, 1e-7);  // warmup from init
    EXPECT_NEAR(s.RatesForIteration(24).decoupled, own_min ? 0.02 : 0.1, 1e-7);
  }
  // Without --decoupled-lr both groups follow --lr.
  const LrSchedule plain(Schedule("cosine", 4, 20));
  EXPECT_EQ(plain.RatesForIteration(7).decoupled, plain.RatesForIteration(7).main);
}

}  // namespace
}  // namespace conveyor
