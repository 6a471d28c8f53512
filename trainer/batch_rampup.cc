#include "trainer/batch_rampup.h"

#include <set>

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

std::vector<int64_t> BatchRampup::RampSteps() const {
  std::vector<int64_t> batches;
  if (!ramps_) return batches;
  for (int64_t consumed = 0; consumed <= samples_;) {
    batches.push_back(GlobalBatchAt(consumed));
    consumed += batches.back();
  }
  return batches;
}

int64_t BatchRampup::TrainIters(int64_t train_samples) const {
  int64_t consumed = 0;
  const std::vector<int64_t> ramp = RampSteps();
  for (const int64_t batch : ramp) consumed += batch;
  const int64_t left = train_samples - consumed;
  // Python's floor division: a ramp longer than --train-samples takes steps back.
  const int64_t whole = left >= 0 ? left / final_ : -((-left + final_ - 1) / final_);
  return static_cast<int64_t>(ramp.size()) + whole;
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
  std::set<int64_t> reached;
  for (const int64_t batch : BatchRampup(t, global_batch).RampSteps()) {
    if (batch % samples_per_micro_batch != 0 && reached.insert(batch).second) {
      problems.push_back(absl::StrCat(
          given, " reaches a global batch of ", batch, ", not a multiple of --micro-batch-size x ",
          "DP = ", samples_per_micro_batch, ": choose START and INCREMENT multiples of ",
          samples_per_micro_batch));
    }
  }
  return problems;
}

}  // namespace conveyor
