#include "trainer/planning/step_traffic.h"

#include <algorithm>
#include <cstdint>

#include "model/moe_layer.h"
#include "model/moe_shape.h"
#include "parallel/rank_layout.h"

namespace conveyor {
namespace {

// The data-parallel reduction's bytes for state replicated over `replicas` ranks: a
// ring all-reduce moves 2 (R-1)/R of the gradients (bf16 under --grad-reduce-in-bf16);
// with the distributed optimizer a reduce-scatter, (R-1)/R of the gradients, and the
// parameter all-gather, (R-1)/R of the value buffers.
double ReductionBytes(const ParallelConfig& p, const RankMemory& first, int replicas) {
  const double grads = (p.grad_reduce_in_bf16() ? 2.0 : 4.0) *
                       static_cast<double>(first.parameters + first.bucket_padding);
  const double share = static_cast<double>(replicas - 1) / replicas;
  return p.use_distributed_optimizer() ? share * (grads + static_cast<double>(first.weight_bytes))
                                       : 2.0 * share * grads;
}

// Gradients are reduced over DP x CP; under expert parallelism the stage's experts (their
// share of its parameters) over the expert-data-parallel ranks only.
double DataParallelBytes(const ResolvedConfig& resolved, const ModelShape& shape,
                         const RankMemory& first) {
  const ParallelConfig& p = resolved.config().parallel();
  const int pp = resolved.pp(), cp = resolved.cp();
  const int ep = resolved.ep(), etp = resolved.etp();
  const bool expert_layout = shape.moe.experts() > 0 && resolved.layout().experts_have_own_groups();
  int64_t expert_elements = 0;
  for (int64_t layer = 0; expert_layout && layer < shape.num_layers / pp; ++layer) {
    expert_elements +=
        shape.moe.IsMoeLayer(layer) * (shape.moe.experts() / ep) * ExpertWeightElements(shape, etp);
  }
  const double expert_share =
      static_cast<double>(expert_elements) / std::max<int64_t>(1, first.parameters);
  return (1.0 - expert_share) * ReductionBytes(p, first, resolved.dp() * cp) +
         expert_share *
             ReductionBytes(p, first, resolved.expert_dp());
}

}  // namespace

// Pipeline: every (micro-batch, stage boundary) moves an activation forward and its
// gradient back (this rank's token shard under SP). TP: per layer and micro-batch, 2
// all-reduces forward and 2 backward of the activations (under SP, all-gathers and
// reduce-scatters that move as much); the embedding's region and the output layer's each
// cross one per micro-batch, the vocabulary-parallel cross-entropy three of a double per
// token, and the replicated parameters each rank sees a part of one after the step. CP:
// per layer and micro-batch, ring attention passes CP - 1 key/value blocks forward, and
// backward CP - 1 blocks plus CP fp32 gradient blocks, and an MoE layer's router
// all-gathers its fp32 logits.
StepTraffic PredictStepTraffic(const ResolvedConfig& resolved, const ModelShape& shape,
                               const RankMemory& first) {
  const Config& config = resolved.config();
  const ParallelConfig& p = config.parallel();
  const int tp = resolved.tp(), pp = resolved.pp(), cp = resolved.cp();
  const int M = resolved.micro_batches();
  const double element = config.precision().bf16() ? 2.0 : 4.0;
  const int64_t tokens = int64_t{config.training().micro_batch_size()} * shape.seq / cp;
  const int64_t local_layers = shape.num_layers / pp;
  StepTraffic traffic;
  if (pp > 1) {
    traffic.pipeline = 2.0 * M * resolved.virtual_stages() * element *
                       PipelineMessageElements(tokens, shape.hidden, tp, p.sequence_parallel());
  }
  traffic.data_parallel = DataParallelBytes(resolved, shape, first);
  if (shape.moe.global_aux_loss_coeff > 0) {
    // global_aux_loss: per MoE layer and micro-batch, the router's all-reduce of its
    // experts' counts and scores (2 x E doubles) over DP (model/moe_global_load.h).
    const int dp = resolved.dp();
    traffic.data_parallel += static_cast<double>(shape.moe.CountMoeLayers(shape.num_layers)) / pp *
                             M * 2.0 * (dp - 1) / dp * 16.0 * shape.moe.experts();
  }
  // A tensor-parallel all-reduce's share of a buffer (a reduce-scatter plus an all-gather
  // move as much).
  const double tp_share = 2.0 * (tp - 1) / tp;
  const double activation = element * tokens * shape.hidden;
  const double head_regions = (first.first_stage ? 1.0 : 0.0) + (first.last_stage ? 1.0 : 0.0);
  traffic.tensor_parallel = tp_share * (M * ((4.0 * local_layers + head_regions) * activation +
                                             (first.last_stage ? 3.0 * 8.0 * tokens : 0.0)) +
                                        4.0 * static_cast<double>(first.tp_summed_elements));
  if (cp > 1) {
    const double kv_block = static_cast<double>(tokens) * (shape.query_groups / tp) *
                            (shape.head_dim + shape.value_head_dim());
    const double router_logits = static_cast<double>(tokens) * shape.moe.experts() * 4.0;
    traffic.context_parallel = local_layers * M * kv_block * (2.0 * (cp - 1) * element + cp * 4.0) +
                               static_cast<double>(shape.moe.CountMoeLayers(shape.num_layers)) /
                                   pp * M * (cp - 1) * router_logits;
  }
  return traffic;
}

}  // namespace conveyor
