#include "trainer/config/batch_rampup.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace conveyor {
namespace {

// Megatron's _parse_numeric_value: an optional K, M, B or T suffix, then
// int(float(rest) * multiplier), which truncates towards zero.
absl::StatusOr<int64_t> ParseScheduleNumber(absl::string_view text, absl::string_view entry) {
  std::string value = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  double multiplier = 1.0;
  if (!value.empty()) {
    const char suffix = value.back();
    multiplier = suffix == 'T'   ? 1e12
                 : suffix == 'B' ? 1e9
                 : suffix == 'M' ? 1e6
                 : suffix == 'K' ? 1e3
                                 : 1.0;
    if (multiplier > 1.0) value.pop_back();
  }
  double number = 0.0;
  // 9.2e18 stays below 2^63 once truncated.
  if (!absl::SimpleAtod(value, &number) || !(std::fabs(number * multiplier) < 9.2e18)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "entry '", entry, "': '", text, "' is not a number (with an optional K, M, B or T)"));
  }
  return static_cast<int64_t>(number * multiplier);
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

absl::StatusOr<std::vector<BatchStep>> ParseStepBatchSizeSchedule(const std::string& text,
                                                                  int64_t seq_length) {
  std::vector<BatchStep> steps;
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), ',', ' ');
  for (absl::string_view entry : absl::StrSplit(spaced, ' ', absl::SkipWhitespace())) {
    const size_t colon = entry.find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry '", entry, "' is not THRESHOLD:BATCH_SIZE"));
    }
    BatchStep step;
    ASSIGN_OR_RETURN(const int64_t tokens, ParseScheduleNumber(entry.substr(0, colon), entry));
    ASSIGN_OR_RETURN(step.batch, ParseScheduleNumber(entry.substr(colon + 1), entry));
    // Python's floor division, for the negative thresholds validation refuses.
    step.first_sample = tokens / seq_length - (tokens % seq_length < 0 ? 1 : 0);
    if (step.batch <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry '", entry, "': the batch size must be positive"));
    }
    steps.push_back(step);
  }
  if (steps.empty()) return absl::InvalidArgumentError("no THRESHOLD:BATCH_SIZE entry");
  std::stable_sort(steps.begin(), steps.end(), [](const BatchStep& a, const BatchStep& b) {
    return a.first_sample < b.first_sample;
  });
  if (steps.front().first_sample != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the first threshold must be 0 (it is ",
                                                   steps.front().first_sample, " samples)"));
  }
  for (size_t i = 1; i < steps.size(); ++i) {
    if (steps[i].first_sample <= steps[i - 1].first_sample) {
      return absl::InvalidArgumentError(
          absl::StrCat("thresholds must be strictly increasing in samples of --seq-length ",
                       seq_length, " tokens; two are at ", steps[i].first_sample, " samples"));
    }
  }
  return steps;
}

BatchRampup::BatchRampup(const TrainingConfig& t, int64_t global_batch, int64_t seq_length)
    : final_(global_batch) {
  if (!t.step_batch_size_schedule().empty()) {
    absl::StatusOr<std::vector<BatchStep>> schedule =
        ParseStepBatchSizeSchedule(t.step_batch_size_schedule(), std::max<int64_t>(seq_length, 1));
    if (!schedule.ok()) return;  // refused by validation
    schedule_ = *std::move(schedule);
    final_ = schedule_.back().batch;
    ramps_ = true;
    return;
  }
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
  if (!schedule_.empty()) {
    int64_t batch = schedule_.front().batch;
    for (const BatchStep& step : schedule_) {
      if (consumed_samples < step.first_sample) break;
      batch = step.batch;
    }
    return batch;
  }
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

std::vector<RampStage> BatchRampup::ScheduleStages(int64_t train_samples, int64_t max_steps) const {
  std::vector<RampStage> stages;
  int64_t consumed = 0, steps_left = max_steps;
  for (size_t i = 0; i < schedule_.size() && steps_left > 0; ++i) {
    const bool last = i + 1 == schedule_.size();
    // A step may pass several thresholds at once: the entries it skipped never train.
    if (!last && consumed >= schedule_[i + 1].first_sample) continue;
    const int64_t batch = schedule_[i].batch;
    int64_t steps = steps_left;
    if (!last) steps = std::min(steps, CeilDiv(schedule_[i + 1].first_sample - consumed, batch));
    const int64_t fits = train_samples > 0 ? (train_samples - consumed) / batch : steps;
    if (std::min(steps, fits) <= 0) break;
    stages.push_back({batch, std::min(steps, fits), consumed});
    consumed += stages.back().steps * batch;
    steps_left -= stages.back().steps;
    if (fits < steps) break;  // the next step at this batch no longer fits
  }
  return stages;
}

std::vector<RampStage> BatchRampup::RunStages(const TrainingConfig& t) const {
  if (t.train_samples() > 0) return Stages(t.train_samples());
  if (!schedule_.empty()) return ScheduleStages(0, t.train_iters());
  if (t.train_iters() <= 0) return {};
  return {{final_, t.train_iters(), 0}};
}

std::vector<RampStage> BatchRampup::Stages(int64_t train_samples) const {
  if (!schedule_.empty()) {
    return ScheduleStages(train_samples, std::numeric_limits<int64_t>::max());
  }
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
  // With --step-batch-size-schedule too, StepBatchScheduleProblems refuses the pair.
  if (t.rampup_batch_size_size() == 0 || !t.step_batch_size_schedule().empty()) return problems;
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
  for (const RampStage& stage :
       BatchRampup(t, global_batch, /*seq_length=*/0).Stages(t.train_samples())) {
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

std::vector<std::string> StepBatchScheduleProblems(const Config& c,
                                                   int64_t samples_per_micro_batch) {
  const TrainingConfig& t = c.training();
  std::vector<std::string> problems;
  if (t.step_batch_size_schedule().empty()) return problems;
  const std::string given =
      absl::StrCat("--step-batch-size-schedule '", t.step_batch_size_schedule(), "'");
  if (c.model().seq_length() <= 0) return problems;  // --seq-length's own rule reports it
  const absl::StatusOr<std::vector<BatchStep>> schedule =
      ParseStepBatchSizeSchedule(t.step_batch_size_schedule(), c.model().seq_length());
  if (!schedule.ok()) {
    problems.push_back(absl::StrCat(given, ": ", schedule.status().message(),
                                    " (Megatron's form: \"0:768 250B:1536 500B:3072\", "
                                    "thresholds in tokens)"));
    return problems;
  }
  if (t.rampup_batch_size_size() > 0) {
    problems.push_back(absl::StrCat(given,
                                    " and --rampup-batch-size both set the global batch: "
                                    "give one of them (Megatron's schedule replaces the ramp)"));
  }
  const int64_t last = schedule->back().batch;
  if (t.num_micro_batches() > 0 && samples_per_micro_batch > 0 &&
      t.num_micro_batches() * samples_per_micro_batch != last) {
    problems.push_back(absl::StrCat(given, " sets each step's micro-batch count (", last,
                                    " samples at the end): drop --num-micro-batches ",
                                    t.num_micro_batches()));
  }
  if (t.global_batch_size() > 0 && t.global_batch_size() != last) {
    problems.push_back(absl::StrCat(given, " ends at a global batch of ", last,
                                    ", not --global-batch-size ", t.global_batch_size(),
                                    ": drop --global-batch-size (Megatron refuses the two "
                                    "together) or set it to ",
                                    last));
  }
  if (samples_per_micro_batch <= 0 || !problems.empty()) return problems;
  // The batches the run reaches (Megatron checks each when the run reaches it); the
  // first that does not split into micro-batches stands for all.
  int64_t bad = 0, first_bad = 0;
  for (const RampStage& stage : BatchRampup(t, last, c.model().seq_length()).RunStages(t)) {
    if (stage.batch % samples_per_micro_batch != 0 && bad++ == 0) first_bad = stage.batch;
  }
  if (bad > 0) {
    problems.push_back(
        absl::StrCat(given, " reaches a global batch of ", first_bad,
                     bad > 1 ? absl::StrCat(" (and ", bad - 1, " more)") : "",
                     ", not a multiple of --micro-batch-size x DP = ", samples_per_micro_batch,
                     ": choose batches that are multiples of ", samples_per_micro_batch));
  }
  return problems;
}

}  // namespace conveyor
