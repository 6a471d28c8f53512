#include "trainer/batch_rampup.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace conveyor {

BatchRampup::BatchRampup(const TrainingConfig& t, int64_t global_batch) : final_(global_batch) {
  if (t.rampup_batch_size_size() != 3) return;
  start_ = t.rampup_batch_size(0);
  increment_ = t.rampup_batch_size(1);
  samples_ = t.rampup_batch_size(2);
  if (start_ <= 0 || increment_ <= 0 || final_ <= start_) return;  // refused by validation
  const int64_t increments = (final_ - start_) / increment_;
  samples_per_increment_ = static_cast<double>(samples_) / static_cast<double>(increments);
  ramps_ = true;
}

int64_t BatchRampup::GlobalBatchAt(int64_t consumed_samples) const {
  if (!ramps_ || consumed_samples > samples_) return final_;
  if (samples_per_increment_ <= 0.0) return final_;  // SAMPLES 0: no sample ramps
  const auto steps =
      static_cast<int64_t>(static_cast<double>(consumed_samples) / samples_per_increment_);
  return start_ + steps * increment_;
}

int64_t BatchRampup::RampStageSteps(int64_t consumed, int64_t batch) const {
  // Step i of the stage starts after consumed + i * batch samples; it is at `batch` while
  // that is within SAMPLES and the formula still gives `batch`, a condition that holds
  // for a prefix of i because the batch never falls. Bisect for the prefix's length.
  int64_t in = 1, out = (samples_ - consumed) / batch + 1;  // step `in - 1` holds, `out` not
  while (out - in > 0) {
    const int64_t mid = in + (out - in) / 2;
    if (GlobalBatchAt(consumed + mid * batch) == batch) {
      in = mid + 1;
    } else {
      out = mid;
    }
  }
  return in;
}

std::vector<RampStage> BatchRampup::Stages(int64_t train_samples) const {
  std::vector<RampStage> stages;
  int64_t consumed = 0;
  while (ramps_ && consumed <= samples_) {
    const int64_t batch = GlobalBatchAt(consumed);
    if (batch >= final_) break;  // the rest is at the final batch
    const int64_t fits = train_samples > consumed ? (train_samples - consumed) / batch : 0;
    const int64_t steps = std::min(RampStageSteps(consumed, batch), fits);
    if (steps == 0) return stages;  // no later batch is smaller
    stages.push_back({batch, steps, consumed});
    consumed += steps * batch;
    if (steps == fits) return stages;
  }
  const int64_t steps = train_samples > consumed ? (train_samples - consumed) / final_ : 0;
  if (steps > 0) stages.push_back({final_, steps, consumed});
  return stages;
}

int64_t BatchRampup::TrainIters(int64_t train_samples) const {
  int64_t steps = 0;
  for (const RampStage& stage : Stages(train_samples)) steps += stage.steps;
  return steps;
}

std::vector<std::string> RampupProblems(const TrainingConfig& t, int64_t global_batch,
                                        int64_t samples_per_micro_batch) {
  std::vector<std::string> problems;
  if (t.rampup_batch_size_size() == 0) return problems;
  if (t.rampup_batch_size_size() != 3) {
    problems.push_back(
        absl::StrCat("--rampup-batch-size takes three numbers, START INCREMENT "
                     "SAMPLES; ",
                     t.rampup_batch_size_size(), " given"));
    return problems;
  }
  const int64_t start = t.rampup_batch_size(0), increment = t.rampup_batch_size(1),
                samples = t.rampup_batch_size(2);
  const std::string given =
      absl::StrCat("--rampup-batch-size ", start, " ", increment, " ", samples);
  if (start <= 0 || increment <= 0 || samples < 0) {
    problems.push_back(absl::StrCat(given,
                                    ": START and INCREMENT must be positive and SAMPLES "
                                    "non-negative"));
    return problems;
  }
  if (t.train_samples() <= 0) {
    problems.push_back(absl::StrCat(given,
                                    " ramps sample-based training only (as Megatron): give "
                                    "--train-samples instead of --train-iters"));
  }
  if (global_batch <= 0) return problems;  // the layout decides it
  if (global_batch <= start || (global_batch - start) % increment != 0) {
    problems.push_back(absl::StrCat(
        given, ": --global-batch-size ", global_batch, " must exceed START by a multiple of ",
        "INCREMENT (Megatron's ramp has at least one increment; without one, drop the flag)"));
    return problems;
  }
  if (samples_per_micro_batch <= 0) return problems;
  // The batches the run reaches (Megatron checks each when the ramp reaches it); the
  // first that does not split into micro-batches stands for all.
  int64_t bad = 0, first_bad = 0;
  for (const RampStage& stage : BatchRampup(t, global_batch).Stages(t.train_samples())) {
    if (stage.batch % samples_per_micro_batch != 0 && bad++ == 0) first_bad = stage.batch;
  }
  if (bad > 0) {
    problems.push_back(
        absl::StrCat(given, " reaches a global batch of ", first_bad,
                     bad > 1 ? absl::StrCat(" (and ", bad - 1, " more)") : "",
                     ", not a multiple of --micro-batch-size x DP = ", samples_per_micro_batch,
                     ": choose START and INCREMENT multiples of ", samples_per_micro_batch));
  }
  return problems;
}

}  // namespace conveyor
