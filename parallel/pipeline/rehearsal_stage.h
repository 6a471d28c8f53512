// A Stage whose actions only take time: F, B and W each sleep their cost, and the
// tensors passed between stages are real (so transfers are real). Running a schedule
// on it measures the executor and the transfers against the simulator's makespan for
// the same costs: the pipeline's overhead, without the model's noise.
#ifndef CONVEYOR_PARALLEL_PIPELINE_REHEARSAL_STAGE_H_
#define CONVEYOR_PARALLEL_PIPELINE_REHEARSAL_STAGE_H_

#include <cstdint>

#include "parallel/pipeline/simulator.h"
#include "parallel/pipeline/stage.h"

namespace conveyor {
namespace pipeline {

class RehearsalStage : public Stage {
 public:
  // Each cost unit lasts `seconds_per_unit`; `boundary_elements` sizes the tensors.
  RehearsalStage(const Costs& costs, double seconds_per_unit, int64_t boundary_elements)
      : costs_(costs), seconds_per_unit_(seconds_per_unit), boundary_elements_(boundary_elements) {}

  int64_t BoundaryElements() const override { return boundary_elements_; }
  DType BoundaryDType() const override { return DType::kFloat32; }
  Device device() const override { return Device::kCpu; }
  absl::StatusOr<Tensor> Forward(int micro_batch, int chunk, Tensor input) override;
  absl::StatusOr<Tensor> BackwardInput(int micro_batch, int chunk, Tensor output_grad) override;
  absl::Status BackwardWeight(int micro_batch, int chunk) override;

 private:
  Tensor Work(double units) const;

  Costs costs_;
  double seconds_per_unit_;
  int64_t boundary_elements_;
};

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_REHEARSAL_STAGE_H_
