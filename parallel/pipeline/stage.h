// What the executor runs: the part of the model one pipeline rank holds, as V model
// chunks (virtual stages), each offering forward, backward-input and backward-weight
// for one micro-batch. The model implements it (model/gpt_stage.h); the executor
// never looks inside.
#ifndef CONVEYOR_PARALLEL_PIPELINE_STAGE_H_
#define CONVEYOR_PARALLEL_PIPELINE_STAGE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "runtime/tensor.h"

namespace conveyor {
namespace pipeline {

class Stage {
 public:
  virtual ~Stage() = default;

  // Elements of the activation a chunk hands to the next stage for one micro-batch
  // (and of the gradient that comes back): what a receive must make room for.
  virtual int64_t BoundaryElements() const = 0;
  // Their dtype: what Forward and BackwardInput return and what a receive holds, so
  // that they travel in it (bf16 as 2 bytes an element).
  virtual DType BoundaryDType() const = 0;
  // Where the stage computes: received activations and gradients are placed there.
  virtual Device device() const = 0;

  // F. `input` is the previous stage's activation (empty on the first global stage,
  // which reads the data). Returns the activation for the next stage (empty on the
  // last global stage, which computes the loss).
  virtual absl::StatusOr<Tensor> Forward(int micro_batch, int chunk, Tensor input) = 0;

  // B. `output_grad` is the next stage's gradient w.r.t. this chunk's output (empty
  // on the last global stage). Returns the gradient w.r.t. this chunk's input (empty
  // on the first global stage).
  virtual absl::StatusOr<Tensor> BackwardInput(int micro_batch, int chunk, Tensor output_grad) = 0;

  // W: accumulates the chunk's weight gradients for the micro-batch and frees what
  // its forward kept.
  virtual absl::Status BackwardWeight(int micro_batch, int chunk) = 0;

  // B and W fused, for schedules that do not split them. A stage may override it to
  // interleave the two layer by layer, freeing each layer's activations as soon as
  // its weight gradient is done (what autograd does); the result must not change.
  virtual absl::StatusOr<Tensor> Backward(int micro_batch, int chunk, Tensor output_grad) {
    ASSIGN_OR_RETURN(Tensor grad, BackwardInput(micro_batch, chunk, std::move(output_grad)));
    RETURN_IF_ERROR(BackwardWeight(micro_batch, chunk));
    return grad;
  }
};

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_STAGE_H_
