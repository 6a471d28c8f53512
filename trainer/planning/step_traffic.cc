#include "trainer/planning/step_traffic.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/moe_layer.h"
#include "model/model_shape.h"
#include "model/moe_shape.h"
#include "parallel/rank_layout.h"

namespace conveyor {
namespace {

// The data-parallel reduction's bytes for state replicated over `replicas` ranks: a
// ring all-reduce moves 2 (R-1)/R of the gradients (bf16 under --grad-reduce-in-bf16);
// with the distributed optimizer a reduce-scatter, (R-1)/R of the gradients, and the
// parameter all-gather, (R-1)/R of the value buffers.
double ReductionBytes(const ParallelConfig& p, const RankMemory& rank, int replicas) {
  const double grads = (p.grad_reduce_in_bf16() ? 2.0 : 4.0) *
                       static_cast<double>(rank.parameters + rank.bucket_padding);
  const double share = static_cast<double>(replicas - 1) / replicas;
  return p.use_distributed_optimizer() ? share * (grads + static_cast<double>(rank.weight_bytes))
                                       : 2.0 * share * grads;
}

// The multi-token prediction depths on `rank` (all of them on the last stage's rank,
// model/mtp_block.h), and whether each depth's layer is a mixture of experts (built like
// the model's last layer).
int64_t MtpDepths(const ModelShape& shape, const RankMemory& rank) {
  return rank.last_stage ? shape.mtp_layers : 0;
}
bool MtpLayerIsMoe(const ModelShape& shape) { return shape.moe.IsMoeLayer(shape.num_layers - 1); }

// The mixture-of-experts layers on `rank`: its share of the model's, and its depths'.
double MoeLayers(const ModelShape& shape, int pp, const RankMemory& rank) {
  return static_cast<double>(shape.moe.CountMoeLayers(shape.num_layers)) / pp +
         (MtpLayerIsMoe(shape) ? static_cast<double>(MtpDepths(shape, rank)) : 0.0);
}

// Gradients are reduced over DP x CP; under expert parallelism the stage's experts (their
// share of its parameters, the depths' included) over the expert-data-parallel ranks only.
double DataParallelBytes(const ResolvedConfig& resolved, const ModelShape& shape,
                         const RankMemory& rank) {
  const ParallelConfig& p = resolved.config().parallel();
  const int pp = resolved.pp(), cp = resolved.cp();
  const int ep = resolved.ep(), etp = resolved.etp();
  const bool expert_layout = shape.moe.experts() > 0 && resolved.layout().experts_have_own_groups();
  int64_t expert_elements = 0;
  for (int64_t layer = 0; expert_layout && layer < shape.num_layers / pp; ++layer) {
    expert_elements +=
        shape.moe.IsMoeLayer(layer) * (shape.moe.experts() / ep) * ExpertWeightElements(shape, etp);
  }
  if (expert_layout && MtpLayerIsMoe(shape)) {
    expert_elements +=
        MtpDepths(shape, rank) * (shape.moe.experts() / ep) * ExpertWeightElements(shape, etp);
  }
  const double expert_share =
      static_cast<double>(expert_elements) / std::max<int64_t>(1, rank.parameters);
  return (1.0 - expert_share) * ReductionBytes(p, rank, resolved.dp() * cp) +
         expert_share *
             ReductionBytes(p, rank, resolved.expert_dp());
}

}  // namespace

// Pipeline: every (micro-batch, stage boundary) moves an activation forward and its
// gradient back (this rank's token shard under SP). TP: per layer and micro-batch, 2
// all-reduces forward and 2 backward of the activations (under SP, all-gathers and
// reduce-scatters that move as much); the embedding's region and the output layer's each
// cross one per micro-batch, the vocabulary-parallel cross-entropy three of a double per
// token, and the replicated parameters each rank sees a part of one after the step. A
// multi-token prediction depth (last stage) runs a layer, the embedding's and the output
// layer's regions and the cross-entropy again, and M_k's regions move 3 more activations:
// its [enorm(e); hnorm(h)] input, 2 hidden wide, enters once backward (an all-reduce;
// under SP its all-gather forward and reduce-scatter backward move as much) and its
// gathered output exits once forward. CP: per layer (the depths' included) and
// micro-batch, ring attention passes CP - 1 key/value blocks forward, and backward CP - 1
// blocks plus CP fp32 gradient blocks, and an MoE layer's router all-gathers its fp32
// logits.
StepTraffic PredictStepTraffic(const ResolvedConfig& resolved, const RankMemory& rank) {
  const Config& config = resolved.config();
  const ModelShape& shape = resolved.model_shape();
  const ParallelConfig& p = config.parallel();
  const int tp = resolved.tp(), pp = resolved.pp(), cp = resolved.cp();
  const int M = resolved.micro_batches();
  const double element = config.precision().bf16() ? 2.0 : 4.0;
  const int64_t tokens = int64_t{config.training().micro_batch_size()} * shape.seq / cp;
  const int64_t depths = MtpDepths(shape, rank);
  const int64_t local_layers = shape.num_layers / pp + depths;
  StepTraffic traffic;
  if (pp > 1) {
    traffic.pipeline = 2.0 * M * resolved.virtual_stages() * element *
                       PipelineMessageElements(tokens, shape.hidden, tp, p.sequence_parallel());
  }
  traffic.data_parallel = DataParallelBytes(resolved, shape, rank);
  if (shape.moe.global_aux_loss_coeff > 0) {
    // global_aux_loss: per MoE layer and micro-batch, the router's all-reduce of its
    // experts' counts and scores (2 x E doubles) over DP (model/moe_global_load.h).
    const int dp = resolved.dp();
    traffic.data_parallel +=
        MoeLayers(shape, pp, rank) * M * 2.0 * (dp - 1) / dp * 16.0 * shape.moe.experts();
  }
  // A tensor-parallel all-reduce's share of a buffer (a reduce-scatter plus an all-gather
  // move as much).
  const double tp_share = 2.0 * (tp - 1) / tp;
  const double activation = element * tokens * shape.hidden;
  const double outputs = (rank.last_stage ? 1.0 : 0.0) + depths;  // cross-entropies
  const double regions = 4.0 * local_layers + (rank.first_stage ? 1.0 : 0.0) + outputs +
                         4.0 * depths;  // the depths' embeddings and M_k
  traffic.tensor_parallel =
      tp_share * (M * (regions * activation + outputs * 3.0 * 8.0 * tokens) +
                  4.0 * static_cast<double>(rank.tp_summed_elements));
  if (cp > 1) {
    const double kv_block = static_cast<double>(tokens) * (shape.query_groups / tp) *
                            (shape.head_dim + shape.value_head_dim());
    const double router_logits = static_cast<double>(tokens) * shape.moe.experts() * 4.0;
    traffic.context_parallel = local_layers * M * kv_block * (2.0 * (cp - 1) * element + cp * 4.0) +
                               MoeLayers(shape, pp, rank) * M * (cp - 1) * router_logits;
  }
  return traffic;
}

StepTraffic PredictBusiestStepTraffic(const ResolvedConfig& resolved,
                                      const std::vector<RankMemory>& memory) {
  StepTraffic busiest;
  for (const RankMemory& rank : memory) {
    const StepTraffic t = PredictStepTraffic(resolved, rank);
    busiest.pipeline = std::max(busiest.pipeline, t.pipeline);
    busiest.data_parallel = std::max(busiest.data_parallel, t.data_parallel);
    busiest.tensor_parallel = std::max(busiest.tensor_parallel, t.tensor_parallel);
    busiest.context_parallel = std::max(busiest.context_parallel, t.context_parallel);
  }
  return busiest;
}

}  // namespace conveyor
