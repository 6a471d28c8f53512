// Everything between the last backward of a step and the next forward: summing
// gradients over the ranks that share them, the global gradient norm, clipping, the
// optimizer step, and making every rank's parameters current again.
//
// Two implementations, as in Megatron:
//  - replicated (DDP): gradients summed over data-parallel ranks in buckets
//    (parameters in reverse order, so that the first bucket holds the gradients
//    backward finishes first); every rank holds the whole optimizer state;
//  - distributed (ZeRO-1, --use-distributed-optimizer): gradients reduce-scattered
//    over a flat buffer, each DP rank updating only its 1/DP shard with 1/DP of the
//    optimizer state, then the parameters all-gathered.
#ifndef CONVEYOR_TRAINER_OPTIMIZATION_PARAMETER_UPDATER_H_
#define CONVEYOR_TRAINER_OPTIMIZATION_PARAMETER_UPDATER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/parameter.h"
#include "proto/config.pb.h"
#include "trainer/config/resolved_config.h"
#include "trainer/optimization/optimizer.h"
#include "trainer/rank_context.h"

namespace conveyor {

// The parameters an updater steps, and those among them that are a copy of another
// stage's parameter (the head's copy of a tied word embedding): the tied-embedding
// group keeps their gradient equal to the original's, and the norm skips them.
struct UpdatedParameters {
  std::vector<Parameter*> all;
  std::vector<const Parameter*> norm_excluded;
};

class ParameterUpdater {
 public:
  virtual ~ParameterUpdater() = default;

  // Backward has finished these parameters' gradients for the step
  // (--overlap-grad-reduce may start reducing them).
  virtual void GradientsReady(const std::vector<Parameter*>& /*params*/) {}
  // The next forward is about to read these parameters: under --overlap-param-gather,
  // waits for their all-gather.
  virtual absl::Status ParametersNeeded(const std::vector<Parameter*>& /*params*/) {
    return absl::OkStatus();
  }
  // Waits until every parameter is current (before a checkpoint reads them).
  virtual absl::Status ParametersCurrent() { return absl::OkStatus(); }
  // Sums gradients over the ranks that share their parameters.
  virtual absl::Status ReduceGradients() = 0;
  // L2 norm of the whole model's gradient, the same on every rank.
  virtual absl::StatusOr<double> GradNorm() = 0;
  // L2 norm of the whole model's fp32 parameters, counted as the gradient norm counts
  // them (--log-params-norm).
  virtual absl::StatusOr<double> ParamsNorm() = 0;
  // Gradient elements equal to zero in the whole model, counted as the norm counts them
  // (--log-num-zeros-in-grad), after ReduceGradients.
  virtual absl::StatusOr<int64_t> GradZeros() = 0;
  // Clips by `grad_norm` to --clip-grad, applies one optimizer step with `lr`, and
  // leaves every rank's parameters current.
  virtual absl::Status Step(double grad_norm, const StepLearningRates& lr) = 0;

  // The optimizer, for checkpoints: its state tensors and step count.
  virtual Optimizer& optimizer() = 0;

  // The fp32 values of a parameter whose `value` is empty (the distributed optimizer
  // under --bf16 keeps them only in its master shard): `values` holds its local elements
  // [offset, offset + values.numel()). Checkpoints read and write these instead.
  struct MasterPiece {
    const Parameter* owner;
    int64_t offset;
    Tensor values;
  };
  virtual absl::Span<MasterPiece> MasterPieces() { return {}; }
  // After parameters (or master pieces) were loaded: make every copy of them current.
  // Every rank calls it (it may communicate).
  virtual absl::Status ParametersLoaded() { return absl::OkStatus(); }
};

// Picks the implementation by --use-distributed-optimizer. `context` and `ops`, which
// computes on the parameters' device, must outlive the updater.
std::unique_ptr<ParameterUpdater> MakeParameterUpdater(const ResolvedConfig& config,
                                                       const RankContext& context,
                                                       UpdatedParameters params,
                                                       const OptimizerOps* ops);

// Shared by both implementations.
// Sums the gradients of sequence-parallel parameters over TP (under SP) and of
// --qk-layernorm's norms (each TP rank holds other heads), and the tied
// embedding's copies: those one rank holds both of (with `ops`, on their device), then
// over the tied-embedding group.
absl::Status ReduceSharedGradients(const std::vector<Parameter*>& params,
                                   const RankContext& context, const OptimizerOps& ops);
// Whether ReduceSharedGradients may change this parameter's gradient: the distributed
// optimizer cannot reduce-scatter its bucket before that sum (--overlap-grad-reduce).
bool TakesSharedSum(const Parameter& p, const RankContext& context);
// Whether a parameter's squares count toward the norm on this rank: replicated-over-
// TP parameters count on TP rank 0 only, excluded copies never.
bool CountsTowardNorm(const Parameter& p, const UpdatedParameters& params,
                      const RankContext& context);
// sqrt of the sum of `squares` over model parallelism (TP x PP).
absl::StatusOr<double> FinishNorm(double squares, const RankContext& context);
// The sum of `count` over model parallelism (TP x PP).
absl::StatusOr<int64_t> FinishCount(int64_t count, const RankContext& context);

std::unique_ptr<ParameterUpdater> MakeReplicatedUpdater(const ResolvedConfig& config,
                                                        const RankContext& context,
                                                        UpdatedParameters params,
                                                        const OptimizerOps* ops);
std::unique_ptr<ParameterUpdater> MakeDistributedOptimizer(const ResolvedConfig& config,
                                                           const RankContext& context,
                                                           UpdatedParameters params,
                                                           const OptimizerOps* ops);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OPTIMIZATION_PARAMETER_UPDATER_H_
