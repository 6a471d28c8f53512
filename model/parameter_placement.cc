#include "model/parameter_placement.h"

namespace conveyor {

void PlaceParameters(const Ops& ops, const std::vector<Parameter*>& params) {
  for (Parameter* p : params) {
    if (p->value.device() != ops.device()) {
      p->value = p->value.To(ops.device(), MemoryCategory::kWeights);
      p->grad = p->grad.To(ops.device(), MemoryCategory::kGrads);
    }
    if (p->read_in_compute_type && ops.compute_dtype() != DType::kFloat32) {
      p->compute = Tensor::Zeros(p->value.shape(), MemoryCategory::kWeights, ops.compute_dtype(),
                                 ops.device());
    }
  }
  RefreshComputeCopies(ops, params);
}

void RefreshComputeCopies(const Ops& ops, const std::vector<Parameter*>& params) {
  for (Parameter* p : params) {
    // A parameter without fp32 values gets its copy from the distributed optimizer.
    if (!p->compute.empty() && !p->value.empty()) ops.Cast(p->value, &p->compute);
  }
}

}  // namespace conveyor
