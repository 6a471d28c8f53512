#include "trainer/parameter_updater.h"

#include <algorithm>
#include <cmath>

#include "runtime/status_macros.h"

namespace conveyor {

std::unique_ptr<ParameterUpdater> MakeParameterUpdater(const Config& config,
                                                       std::vector<Parameter*> params,
                                                       GradientGroups groups,
                                                       const OptimizerOps* ops) {
  if (config.parallel().use_distributed_optimizer()) {
    return MakeDistributedOptimizer(config, std::move(params), std::move(groups), ops);
  }
  return MakeReplicatedUpdater(config, std::move(params), std::move(groups), ops);
}

absl::Status ReduceSharedGradients(const std::vector<Parameter*>& params,
                                   const GradientGroups& groups) {
  const bool tp_sum = groups.sequence_parallel && groups.tp != nullptr && groups.tp->size() > 1;
  for (Parameter* p : params) {
    if (tp_sum && p->sequence_parallel) {
      RETURN_IF_ERROR(groups.tp->AllReduceSum(p->grad.data(), p->grad.numel()));
    }
  }
  if (groups.embedding != nullptr && groups.embedding->size() > 1) {
    for (Parameter* p : params) {
      if (p->name == "embedding.word_embeddings.weight") {
        RETURN_IF_ERROR(groups.embedding->AllReduceSum(p->grad.data(), p->grad.numel()));
      }
    }
  }
  return absl::OkStatus();
}

bool CountsTowardNorm(const Parameter& p, const GradientGroups& groups) {
  if (p.sharding.replicated() && groups.tp != nullptr && groups.tp->rank() != 0) return false;
  return std::find(groups.norm_excluded.begin(), groups.norm_excluded.end(), &p) ==
         groups.norm_excluded.end();
}

absl::StatusOr<double> FinishNorm(double local_squares, Communicator* group,
                                  const GradientGroups& groups) {
  if (group != nullptr && group->size() > 1) {
    RETURN_IF_ERROR(group->AllReduceSum(&local_squares, 1));
  }
  if (groups.model_parallel != nullptr && groups.model_parallel->size() > 1) {
    RETURN_IF_ERROR(groups.model_parallel->AllReduceSum(&local_squares, 1));
  }
  return std::sqrt(local_squares);
}

void PackGradients(const std::vector<Parameter*>& params, Tensor* flat) {
  DeviceMemory& memory = MemoryOf(flat->device());
  float* at = flat->data();
  for (const Parameter* p : params) {
    memory.Copy(at, p->grad.data(), p->grad.nbytes());
    at += p->grad.numel();
  }
}

void UnpackGradients(const Tensor& flat, const std::vector<Parameter*>& params) {
  DeviceMemory& memory = MemoryOf(flat.device());
  const float* at = flat.data();
  for (Parameter* p : params) {
    memory.Copy(p->grad.data(), at, p->grad.nbytes());
    at += p->grad.numel();
  }
}

void UnpackValues(const Tensor& flat, const std::vector<Parameter*>& params) {
  DeviceMemory& memory = MemoryOf(flat.device());
  const float* at = flat.data();
  for (Parameter* p : params) {
    memory.Copy(p->value.data(), at, p->value.nbytes());
    at += p->value.numel();
  }
}

}  // namespace conveyor
