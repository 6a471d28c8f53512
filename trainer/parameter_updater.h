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
#ifndef CONVEYOR_TRAINER_PARAMETER_UPDATER_H_
#define CONVEYOR_TRAINER_PARAMETER_UPDATER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/parameter.h"
#include "parallel/communicator.h"
#include "proto/config.pb.h"
#include "trainer/optimizer.h"

namespace conveyor {

// The groups a rank's gradients travel through; null means a group of one.
struct GradientGroups {
  Communicator* tp = nullptr;
  Communicator* dp = nullptr;
  Communicator* model_parallel = nullptr;  // TP x PP: the gradient norm's group
  Communicator* embedding = nullptr;       // first and last stage of tied embeddings
  bool sequence_parallel = false;
  // Parameters that are a copy of another stage's (the last stage's tied embedding):
  // the embedding group keeps their gradient equal, and the norm skips them.
  std::vector<const Parameter*> norm_excluded;
};

class ParameterUpdater {
 public:
  virtual ~ParameterUpdater() = default;

  // Backward has finished these parameters' gradients for the step
  // (--overlap-grad-reduce may start reducing them).
  virtual void GradientsReady(const std::vector<Parameter*>& params) {}
  // Sums gradients over the ranks that share their parameters.
  virtual absl::Status ReduceGradients() = 0;
  // L2 norm of the whole model's gradient, the same on every rank.
  virtual absl::StatusOr<double> GradNorm() = 0;
  // Clips by `grad_norm` to --clip-grad, applies one optimizer step with `lr`, and
  // leaves every rank's parameters current.
  virtual absl::Status Step(double grad_norm, double lr) = 0;

  // The optimizer, for checkpoints: its state tensors and step count.
  virtual Optimizer& optimizer() = 0;
  // After parameters were loaded from a checkpoint: refresh any copy of them.
  virtual void ParametersLoaded() {}
};

// Picks the implementation by --use-distributed-optimizer. `ops` computes on the
// parameters' device and must outlive the updater.
std::unique_ptr<ParameterUpdater> MakeParameterUpdater(const Config& config,
                                                       std::vector<Parameter*> params,
                                                       GradientGroups groups,
                                                       const OptimizerOps* ops);

// Shared by both implementations.
// Sums the gradients of sequence-parallel parameters over TP (under SP), and the
// tied embedding's copies over the embedding group.
absl::Status ReduceSharedGradients(const std::vector<Parameter*>& params,
                                   const GradientGroups& groups);
// Whether a parameter's squares count toward the norm on this rank: replicated-over-
// TP parameters count on TP rank 0 only, excluded copies never.
bool CountsTowardNorm(const Parameter& p, const GradientGroups& groups);
// sqrt of the sum of `local_squares` over `group` (may be null) and model parallel.
absl::StatusOr<double> FinishNorm(double local_squares, Communicator* group,
                                  const GradientGroups& groups);

// The flat buffers both updaters reduce over: parameters' tensors laid end to end in
// `params` order, on the parameters' device.
void PackGradients(const std::vector<Parameter*>& params, Tensor* flat);
void UnpackGradients(const Tensor& flat, const std::vector<Parameter*>& params);
void UnpackValues(const Tensor& flat, const std::vector<Parameter*>& params);

std::unique_ptr<ParameterUpdater> MakeReplicatedUpdater(const Config& config,
                                                        std::vector<Parameter*> params,
                                                        GradientGroups groups,
                                                        const OptimizerOps* ops);
std::unique_ptr<ParameterUpdater> MakeDistributedOptimizer(const Config& config,
                                                           std::vector<Parameter*> params,
                                                           GradientGroups groups,
                                                           const OptimizerOps* ops);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PARAMETER_UPDATER_H_
