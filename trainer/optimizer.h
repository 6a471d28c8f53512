// The optimizer step of a training iteration: global gradient norm, clipping, and
// AdamW (or SGD with momentum) over every parameter, with Megatron's weight-decay
// exclusions (a parameter's weight_decay flag; biases and norm weights have none).
#ifndef CONVEYOR_TRAINER_OPTIMIZER_H_
#define CONVEYOR_TRAINER_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "model/parameter.h"
#include "proto/config.pb.h"
#include "runtime/tensor.h"

namespace conveyor {

// L2 norm of all gradients together, accumulated in double.
double GlobalGradNorm(const std::vector<Parameter*>& params);

// Megatron's clipping: when norm > max_norm, scale every gradient by
// max_norm / (norm + 1e-6). max_norm <= 0 disables clipping.
void ClipGradients(const std::vector<Parameter*>& params, double norm, double max_norm);

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& config, std::vector<Parameter*> params);

  // One update with learning rate `lr`; steps taken so far is steps() afterwards.
  void Step(double lr);

  int64_t steps() const { return steps_; }

 private:
  struct State {
    Tensor exp_avg;     // Adam first moment, or SGD momentum buffer
    Tensor exp_avg_sq;  // Adam second moment (empty for SGD)
  };
  OptimizerConfig config_;
  std::vector<Parameter*> params_;
  std::vector<State> state_;
  int64_t steps_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OPTIMIZER_H_
