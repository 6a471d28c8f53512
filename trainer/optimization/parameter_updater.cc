#include "trainer/optimization/parameter_updater.h"

#include <algorithm>
#include <cmath>

#include "base/status_macros.h"
#include "model/gpt_model.h"
#include "parallel/tensor_buffer.h"

namespace conveyor {

std::unique_ptr<ParameterUpdater> MakeParameterUpdater(const ResolvedConfig& config,
                                                       const RankContext& context,
                                                       UpdatedParameters params,
                                                       const OptimizerOps* ops) {
  if (config.config().parallel().use_distributed_optimizer()) {
    return MakeDistributedOptimizer(config, context, std::move(params), ops);
  }
  return MakeReplicatedUpdater(config, context, std::move(params), ops);
}

namespace {

// Whether this rank's gradient of `p` is one part of a sum over the TP group.
bool PartialOverTp(const Parameter& p, const RankContext& context) {
  return context.tp_size() > 1 &&
         ((p.sequence_parallel && context.sequence_parallel()) || p.partial_over_heads);
}

}  // namespace

bool TakesSharedSum(const Parameter& p, const RankContext& context) {
  return PartialOverTp(p, context) ||
         p.name == kWordEmbeddingName;  // the tied copies' sums, local and over the group
}

absl::Status ReduceSharedGradients(const std::vector<Parameter*>& params,
                                   const RankContext& context, const OptimizerOps& ops) {
  // One rank may hold both copies of a tied word embedding (the embedding and the head
  // in different chunks): each gets the sum, before the sum over the embedding group.
  std::vector<Parameter*> local_copies;
  for (Parameter* p : params) {
    if (p->name == kWordEmbeddingName) local_copies.push_back(p);
  }
  if (local_copies.size() == 2) {
    Tensor& a = local_copies[0]->grad;
    Tensor& b = local_copies[1]->grad;
    ops.Add(a.data(), b.data(), b.numel());
    a.CopyFrom(b);
  }
  for (Parameter* p : params) {
    if (PartialOverTp(*p, context)) {
      RETURN_IF_ERROR(context.tp().AllReduceSum(TensorBuffer(p->grad)));
    }
  }
  if (context.tied_embedding().size() > 1) {
    for (Parameter* p : params) {
      if (p->name == kWordEmbeddingName) {
        RETURN_IF_ERROR(context.tied_embedding().AllReduceSum(TensorBuffer(p->grad)));
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

absl::StatusOr<int64_t> FinishCount(int64_t count, const RankContext& context) {
  double total = static_cast<double>(count);  // exact below 2^53
  RETURN_IF_ERROR(context.model_parallel().AllReduceSum(&total, 1));
  return static_cast<int64_t>(total);
}

absl::StatusOr<double> FinishNorm(double squares, const RankContext& context) {
  RETURN_IF_ERROR(context.model_parallel().AllReduceSum(&squares, 1));
  return std::sqrt(squares);
}

}  // namespace conveyor
