#include "trainer/parameter_updater.h"

#include <algorithm>
#include <cmath>

#include "base/status_macros.h"

namespace conveyor {

std::unique_ptr<ParameterUpdater> MakeParameterUpdater(const Config& config,
                                                       const RankContext& context,
                                                       UpdatedParameters params,
                                                       const OptimizerOps* ops) {
  if (config.parallel().use_distributed_optimizer()) {
    return MakeDistributedOptimizer(config, context, std::move(params), ops);
  }
  return MakeReplicatedUpdater(config, context, std::move(params), ops);
}

absl::Status ReduceSharedGradients(const std::vector<Parameter*>& params,
                                   const RankContext& context) {
  if (context.sequence_parallel() && context.tp_size() > 1) {
    for (Parameter* p : params) {
      if (p->sequence_parallel) {
        RETURN_IF_ERROR(context.tp().AllReduceSum(p->grad.data(), p->grad.numel()));
      }
    }
  }
  if (context.tied_embedding().size() > 1) {
    for (Parameter* p : params) {
      if (p->name == "embedding.word_embeddings.weight") {
        RETURN_IF_ERROR(context.tied_embedding().AllReduceSum(p->grad.data(), p->grad.numel()));
      }
    }
  }
  return absl::OkStatus();
}

bool CountsTowardNorm(const Parameter& p, const UpdatedParameters& params,
                      const RankContext& context) {
  if (p.sharding.replicated() && context.tp_rank() != 0) return false;
  return std::find(params.norm_excluded.begin(), params.norm_excluded.end(), &p) ==
         params.norm_excluded.end();
}

absl::StatusOr<double> FinishNorm(double squares, const RankContext& context) {
  RETURN_IF_ERROR(context.model_parallel().AllReduceSum(&squares, 1));
  return std::sqrt(squares);
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
