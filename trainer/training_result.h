// What a run of the training loop returns, and the held-out splits it evaluates on: the
// loop and evaluation share them without depending on each other.
#ifndef CONVEYOR_TRAINER_TRAINING_RESULT_H_
#define CONVEYOR_TRAINER_TRAINING_RESULT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "data/sample_source.h"

namespace conveyor {

struct TrainingResult {
  std::vector<double> losses;        // per iteration: mean over micro-batches and DP ranks
  std::vector<double> grad_norms;    // per iteration, before clipping
  std::vector<double> valid_losses;  // per evaluation (--eval-interval)
  // After a run that reached --train-iters (EvaluateAfterTraining).
  std::optional<double> final_valid_loss;
  std::optional<double> test_loss;
  int64_t skipped_iterations = 0;
  int64_t nan_iterations = 0;
  int64_t consumed_samples = 0;
  bool exited_early = false;  // an exit condition stopped the run before --train-iters
  // This process's model-state bytes after the first step, as the allocator counts them
  // (what the memory model predicts exactly).
  struct ModelStateBytes {
    int64_t weights = 0, grads = 0, optimizer = 0;
  } model_state;
};

// The held-out splits a run evaluates on; either may be null.
struct EvaluationSplits {
  const SampleSource* valid = nullptr;  // every --eval-interval, and after training
  const SampleSource* test = nullptr;   // after training
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_TRAINING_RESULT_H_
