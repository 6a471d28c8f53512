#include "trainer/parameter_updater.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/status_macros.h"

namespace conveyor {

std::unique_ptr<ParameterUpdater> MakeParameterUpdater(const Config& config,
                                                       std::vector<Parameter*> params,
                                                       GradientGroups groups) {
  if (config.parallel().use_distributed_optimizer()) {
    return MakeDistributedOptimizer(config, std::move(params), std::move(groups));
  }
  return MakeReplicatedUpdater(config, std::move(params), std::move(groups));
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

void PackGradients(const std::vector<Parameter*>& params, float* flat) {
  for (const Parameter* p : params) {
    std::memcpy(flat, p->grad.data(), p->grad.nbytes());
    flat += p->grad.numel();
  }
}

void UnpackGradients(const float* flat, const std::vector<Parameter*>& params) {
  for (Parameter* p : params) {
    std::memcpy(p->grad.data(), flat, p->grad.nbytes());
    flat += p->grad.numel();
  }
}

void UnpackValues(const float* flat, const std::vector<Parameter*>& params) {
  for (Parameter* p : params) {
    std::memcpy(p->value.data(), flat, p->value.nbytes());
    flat += p->value.numel();
  }
}

}  // namespace conveyor
