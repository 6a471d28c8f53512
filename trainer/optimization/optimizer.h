// The optimizer's arithmetic: AdamW (or SGD with momentum) over flat segments of
// parameters and their gradients, each with its own weight-decay setting (Megatron
// excludes biases and norm weights). A segment is a whole parameter, or, under the
// distributed optimizer, the part of one that falls in this rank's shard. Under
// --decoupled-lr the segments of the embedding and output layer weights
// (Parameter::embedding_or_output) step with the decoupled rate.
#ifndef CONVEYOR_TRAINER_OPTIMIZATION_OPTIMIZER_H_
#define CONVEYOR_TRAINER_OPTIMIZATION_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "model/parameter.h"
#include "proto/config.pb.h"
#include "proto/config_choices.h"
#include "runtime/optimizer_ops.h"
#include "runtime/tensor.h"
#include "trainer/optimization/lr_schedule.h"

namespace conveyor {

// param and grad are addresses on the optimizer's device.
struct OptimizerSegment {
  float* param;
  float* grad;
  int64_t n;
  bool weight_decay;
  // The parameter the segment belongs to, and where in its local elements it starts
  // (checkpoints store optimizer state in the parameter's global index space).
  const Parameter* owner;
  int64_t offset;
};

// One segment per parameter, for optimizers that hold every parameter.
std::vector<OptimizerSegment> WholeParameterSegments(const std::vector<Parameter*>& params);

// Megatron's clipping coefficient: max_norm / (norm + 1e-6) when that is below 1, the
// factor every gradient is scaled by; 1 otherwise, and when max_norm <= 0 (no clipping).
double ClipCoefficient(double norm, double max_norm);

class Optimizer {
 public:
  // `kind` is the config's --optimizer, parsed (ResolvedConfig::optimizer()). `ops`
  // (which must outlive the optimizer) computes on the segments' device, where the
  // optimizer's state lives too.
  Optimizer(const OptimizerConfig& config, OptimizerKind kind,
            std::vector<OptimizerSegment> segments, const OptimizerOps* ops);

  // One update: `lr.decoupled` for the embedding and output layer weights under
  // --decoupled-lr, `lr.main` for the rest, from the gradients scaled by grad_scale
  // (ClipCoefficient: each as float(g * grad_scale)). AdamW applies the scale as it reads
  // each gradient; SGD scales them in place first.
  void Step(const StepLearningRates& lr, double grad_scale = 1.0);

  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }  // resuming from a checkpoint

  const std::vector<OptimizerSegment>& segments() const { return segments_; }
  // Adam's first moment (SGD: the momentum buffer) and second moment (empty for SGD)
  // of segment i.
  Tensor& exp_avg(size_t i) { return state_[i].exp_avg; }
  Tensor& exp_avg_sq(size_t i) { return state_[i].exp_avg_sq; }

 private:
  struct State {
    Tensor exp_avg;     // Adam first moment, or SGD momentum buffer
    Tensor exp_avg_sq;  // Adam second moment (empty for SGD)
  };
  OptimizerConfig config_;
  bool adam_;  // AdamW, else SGD with momentum
  std::vector<OptimizerSegment> segments_;
  const OptimizerOps* ops_;
  // Whether segment i steps with the decoupled rate.
  bool Decoupled(size_t i) const;

  // One per segment, for Adam's call per learning rate: [0] the main group, [1] the
  // decoupled one.
  std::vector<AdamWTensor> adam_tensors_[2];
  std::vector<State> state_;
  int64_t steps_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OPTIMIZATION_OPTIMIZER_H_
