#include "trainer/plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "model/memory_model.h"
#include "model/moe_layer.h"
#include "parallel/pipeline/gantt.h"
#include "parallel/rank_layout.h"
#include "trainer/batch_rampup.h"
#include "trainer/flops.h"
#include "trainer/pipeline_report.h"

namespace conveyor {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kMaxGanttColumns = 160;

std::string Bytes(double bytes) {
  if (bytes >= 1024.0 * kMiB) return absl::StrFormat("%.2f GiB", bytes / (1024.0 * kMiB));
  return absl::StrFormat("%.2f MiB", bytes / kMiB);
}

int64_t MoeLayers(const ModelShape& shape) {
  int64_t moe_layers = 0;
  for (int64_t layer = 0; layer < shape.num_layers; ++layer) {
    moe_layers += shape.moe.IsMoeLayer(layer);
  }
  return moe_layers;
}

// A mixture of experts' parameters: all of them (a tensor-parallel rank's share: the
// pipeline ranks of tensor-parallel rank 0, with its E / EP experts split over ETP
// replaced by all E split over TP) and those a token computes with (its top-k experts),
// the count Megatron's TFLOP/s formula follows.
std::string MoeParametersLine(const ModelShape& shape, int tp, int ep, int etp,
                              const std::vector<RankMemory>& memory) {
  const int64_t moe_layers = MoeLayers(shape);
  int64_t total = moe_layers * (shape.moe.experts() * ExpertWeightElements(shape, tp) -
                                shape.moe.experts() / ep * ExpertWeightElements(shape, etp));
  for (const RankMemory& m : memory) total += m.parameters;
  const int64_t active = total - moe_layers * InactiveExpertParameters(shape, tp);
  return absl::StrFormat(
      "plan: mixture of experts: %d experts, top-%d, in %d of %d layers: %d parameters%s, %d "
      "(%.1f%%) active per token%s\n",
      shape.moe.experts(), shape.moe.router.topk, moe_layers, shape.num_layers, total,
      tp > 1 ? " per tensor-parallel rank" : "", active,
      100.0 * static_cast<double>(active) / static_cast<double>(std::max<int64_t>(total, 1)),
      shape.moe.expert_bias
          ? absl::StrFormat("; expert bias (auxiliary-loss-free balancing), %g per step",
                            shape.moe.bias_update_rate)
          : "");
}

// Expert parallelism: the groups (the first few), each rank's experts and parameters, and
// the all-to-all's bytes per step: every MoE layer exchanges a micro-batch's routed rows
// (the rank's share of them when ETP < TP) four times (dispatch, combine, and their
// gradients), (EP - 1) / EP of them leaving the rank under uniform routing; at most
// tokens x top-k rows (fewer when a capacity drops).
std::string ExpertParallelLine(const ModelShape& shape, int tp, int pp, int world, int cp, int ep,
                               int etp, int M, int64_t micro_batch, double element) {
  auto groups = [&](GroupKind kind) {
    const std::vector<std::vector<int>> all = AllGroups(kind, tp, pp, world, cp, ep, etp);
    std::string text;
    for (size_t g = 0; g < std::min<size_t>(all.size(), 4); ++g) {
      absl::StrAppend(&text, g > 0 ? " " : "", "[", absl::StrJoin(all[g], ","), "]");
    }
    if (all.size() > 4) absl::StrAppend(&text, " ... (", all.size(), " groups)");
    return text;
  };
  const int64_t local_experts = shape.moe.experts() / ep;
  const double rows =
      static_cast<double>(micro_batch) * shape.seq / cp * shape.moe.router.topk / (tp / etp);
  const double bytes = 4.0 * static_cast<double>(MoeLayers(shape)) / pp * M * rows * (ep - 1) / ep *
                       shape.hidden * element;
  return absl::StrFormat(
      "plan: expert parallelism: expert TP %d x EP %d x expert DP %d, %d of %d experts per "
      "rank per MoE layer (%d parameters per rank and layer); expert-parallel groups %s; "
      "expert-data-parallel groups %s; all-to-all at most %s per step and rank (uniform "
      "routing)\n",
      etp, ep, ExpertDataParallelSize(world / pp, ep, etp), local_experts, shape.moe.experts(),
      local_experts * ExpertWeightElements(shape, etp), groups(GroupKind::kExpert),
      groups(GroupKind::kExpertData), Bytes(bytes));
}

// --rampup-batch-size's steps, counted by stages of equal batch (a ramp over billions of
// samples has billions of steps), and where --train-samples ends the run.
std::string RampLine(const TrainingConfig& t) {
  const std::vector<RampStage> stages = BatchRampup(t).Stages(t.train_samples());
  if (stages.empty() || stages.front().batch >= t.global_batch_size()) return "";
  int64_t ramp_steps = 0, ramp_samples = 0;
  for (const RampStage& stage : stages) {
    if (stage.batch >= t.global_batch_size()) continue;
    ramp_steps += stage.steps;
    ramp_samples += stage.steps * stage.batch;
  }
  if (stages.back().batch < t.global_batch_size()) {
    const std::string batches = stages.size() == 1
                                    ? absl::StrCat("a global batch of ", stages.front().batch)
                                    : absl::StrCat("global batches from ", stages.front().batch,
                                                   " to ", stages.back().batch);
    return absl::StrFormat(
        "plan: --rampup-batch-size: --train-samples %d ends the run within the ramp: %d steps "
        "on %d samples at %s, never reaching --global-batch-size %d (this plan's)\n",
        t.train_samples(), ramp_steps, ramp_samples, batches, t.global_batch_size());
  }
  return absl::StrFormat(
      "plan: --rampup-batch-size: %d steps ramp the global batch from %d to %d over %d "
      "samples, then %d steps at %d; this plan is for the final global batch (its largest M)\n",
      ramp_steps, stages.front().batch, t.global_batch_size(), t.rampup_batch_size(2),
      t.train_iters() - ramp_steps, t.global_batch_size());
}

}  // namespace

absl::StatusOr<std::string> FormatPlan(const ResolvedConfig& resolved, const ModelShape& shape) {
  const Config& config = resolved.config();
  const ParallelConfig& p = config.parallel();
  const TrainingConfig& t = config.training();
  const int world_size = resolved.world_size();
  const int tp = resolved.tp(), pp = resolved.pp(), dp = resolved.dp(), cp = resolved.cp();
  const int V = resolved.virtual_stages();
  const int M = resolved.micro_batches();
  std::string out = RankMap(tp, pp, world_size, cp);
  if (cp > 1) {
    absl::StrAppendFormat(&out,
                          "plan: context parallelism: CP %d ranks share each sample, %d tokens "
                          "each (chunks r and %d-r of %d chunks)\n",
                          cp, shape.seq / cp, 2 * cp - 1, 2 * cp);
  }
  absl::StrAppendFormat(
      &out,
      "plan: global batch %d = K 1 step x M %d micro-batches x DP %d x micro-batch %d "
      "(x seq %d = %d tokens per step)\n"
      "plan: %.3f TFLOP per iteration (Megatron's formula), padded vocabulary %d\n",
      t.global_batch_size(), M, dp, t.micro_batch_size(), shape.seq,
      int64_t{t.global_batch_size()} * shape.seq,
      MegatronFlopsPerIteration(shape, t.global_batch_size()) / 1e12, shape.padded_vocab);
  out += RampLine(t);

  ASSIGN_OR_RETURN(const BubblePrediction bubble, PredictBubble(config));
  // A very large M is simulated by a prefix of the same shape (pipeline::SimulatedMicroBatches).
  const std::string simulated =
      bubble.simulated_micro_batches < M
          ? absl::StrCat("simulated for the first ", bubble.simulated_micro_batches,
                         " micro-batches (the steady state repeats beyond)")
          : "simulated";
  absl::StrAppendFormat(&out,
                        "plan: schedule %s, P %d, V %d, M %d, costs F,B,W = %s: bubble %.1f%% "
                        "(formula), %.1f%% (%s), makespan %.0f units\n",
                        p.pipeline_schedule(), pp, V, M, p.pipeline_costs(), 100 * bubble.formula,
                        100 * bubble.simulated, simulated, bubble.simulation.makespan);
  if (bubble.simulation.makespan <= kMaxGanttColumns) {
    out += pipeline::GanttChart(bubble.simulation.timeline);
  } else {
    absl::StrAppendFormat(&out, "plan: (Gantt chart omitted: %.0f columns)\n",
                          bubble.simulation.makespan);
  }

  ASSIGN_OR_RETURN(const std::vector<RankMemory> memory,
                   PredictRunMemory(config, shape, bubble, resolved.dp()));
  const std::string backend =
      absl::StrCat(resolved.on_gpu() ? "CUDA" : "CPU", " backend, ",
                   config.precision().bf16() ? "bf16 activations and weight copies" : "fp32");
  absl::StrAppend(&out, "plan: memory per GPU (", backend,
                  "; TP rank 0, DP rank 0 of each stage)\n");
  out +=
      "  pp  parameters    weights      grads  optimizer  stashed  act/micro-batch  "
      "activations      total\n";
  for (const RankMemory& m : memory) {
    absl::StrAppendFormat(&out, "  %2d  %10d  %9s  %9s  %9s  %7d  %15s  %11s  %9s\n",
                          m.pipeline_rank, m.parameters, Bytes(m.weight_bytes), Bytes(m.grad_bytes),
                          Bytes(m.optimizer_bytes), m.peak_stashed,
                          Bytes(m.stash_bytes_per_micro_batch), Bytes(m.activation_peak_bytes),
                          Bytes(m.total_bytes()));
  }
  const int ep = std::max(1, p.expert_model_parallel_size());
  const int etp = ExpertTensorParallelSize(p);
  if (shape.moe.experts() > 0) out += MoeParametersLine(shape, tp, ep, etp, memory);
  const bool expert_layout = shape.moe.experts() > 0 && ExpertsHaveOwnGroups(tp, ep, etp);
  if (expert_layout) {
    out += ExpertParallelLine(shape, tp, pp, world_size, cp, ep, etp, M, t.micro_batch_size(),
                              config.precision().bf16() ? 2.0 : 4.0);
  }
  absl::StrAppendFormat(&out,
                        "plan: model state (weights, grads, optimizer) per parameter; Megatron's "
                        "formula for these settings: %.2f bytes\n"
                        "  pp  bytes/param  bucket padding (elements)\n",
                        MegatronBytesPerParameter(config, resolved.dp()));
  for (const RankMemory& m : memory) {
    const double per_parameter =
        static_cast<double>(m.weight_bytes + m.grad_bytes + m.optimizer_bytes) /
        std::max<int64_t>(1, m.parameters);
    absl::StrAppendFormat(&out, "  %2d  %11.2f  %d\n", m.pipeline_rank, per_parameter,
                          m.bucket_padding);
  }

  // Traffic of one step, per rank, in the dtypes messages travel in (activations bf16
  // under --bf16). Pipeline: every (micro-batch, stage boundary) moves an activation
  // forward and its gradient back (this rank's token shard under SP). DP: a ring
  // all-reduce moves 2 (DP-1)/DP of the gradients (bf16 under --grad-reduce-in-bf16);
  // with the distributed optimizer a reduce-scatter, (DP-1)/DP of the gradients, and the
  // parameter all-gather, (DP-1)/DP of the value buffers (the experts' share over the
  // expert-data-parallel ranks instead). TP: per layer and micro-batch,
  // 2 all-reduces forward and 2 backward of the activations (under SP, all-gathers and
  // reduce-scatters that move as much), and the embedding's, the head's and the
  // cross-entropy's (below). CP: per layer and micro-batch, ring attention
  // passes CP - 1 key/value blocks forward, and backward CP - 1 blocks plus CP fp32
  // gradient blocks (and an MoE layer's router all-gathers its logits); gradients are
  // reduced over DP x CP.
  const RankMemory& first = memory.front();
  const double element = config.precision().bf16() ? 2.0 : 4.0;
  const int64_t tokens = int64_t{t.micro_batch_size()} * shape.seq / cp;
  const double message =
      element * PipelineMessageElements(tokens, shape.hidden, tp, p.sequence_parallel());
  const double pipeline_bytes = pp > 1 ? 2.0 * M * message * V : 0.0;
  const double grads = (p.grad_reduce_in_bf16() ? 2.0 : 4.0) *
                       static_cast<double>(first.parameters + first.bucket_padding);
  // The reduction's bytes for state replicated over `replicas` ranks.
  auto reduction_bytes = [&](int replicas) {
    const double share = static_cast<double>(replicas - 1) / replicas;
    return p.use_distributed_optimizer() ? share * (grads + static_cast<double>(first.weight_bytes))
                                         : 2.0 * share * grads;
  };
  // Under expert parallelism the first stage's experts (their share of its parameters) are
  // reduced over the expert-data-parallel ranks only.
  int64_t expert_elements = 0;
  for (int64_t layer = 0; expert_layout && layer < shape.num_layers / pp; ++layer) {
    expert_elements +=
        shape.moe.IsMoeLayer(layer) * (shape.moe.experts() / ep) * ExpertWeightElements(shape, etp);
  }
  const double expert_share =
      static_cast<double>(expert_elements) / std::max<int64_t>(1, first.parameters);
  const double dp_bytes =
      (1.0 - expert_share) * reduction_bytes(dp * cp) +
      expert_share * reduction_bytes(ExpertDataParallelSize(world_size / pp, ep, etp));
  const int64_t local_layers = shape.num_layers / pp;
  const double activation = element * tokens * shape.hidden;
  // A tensor-parallel all-reduce's share of a buffer (a reduce-scatter plus an all-gather
  // move as much); the embedding's region and the output layer's each cross one such per
  // micro-batch, the vocabulary-parallel cross-entropy three of a double per token, and
  // the replicated parameters each rank sees a part of one after the step.
  const double tp_share = 2.0 * (tp - 1) / tp;
  const double head_regions = (first.first_stage ? 1.0 : 0.0) + (first.last_stage ? 1.0 : 0.0);
  const double tp_bytes = tp_share * (M * ((4.0 * local_layers + head_regions) * activation +
                                           (first.last_stage ? 3.0 * 8.0 * tokens : 0.0)) +
                                      4.0 * static_cast<double>(first.tp_summed_elements));
  const double kv_block =
      static_cast<double>(tokens) * 2.0 * (shape.query_groups / tp) * shape.head_dim;
  // A mixture of experts' router gathers the micro-batch's fp32 logits over CP per layer.
  const double router_logits = static_cast<double>(tokens) * shape.moe.experts() * 4.0;
  const double cp_bytes =
      cp > 1 ? local_layers * M * kv_block * (2.0 * (cp - 1) * element + cp * 4.0) +
                   static_cast<double>(MoeLayers(shape)) / pp * M * (cp - 1) * router_logits
             : 0.0;
  absl::StrAppendFormat(&out,
                        "plan: traffic per step and rank: pipeline %s, data-parallel %s, "
                        "tensor-parallel %s",
                        Bytes(pipeline_bytes), Bytes(dp_bytes), Bytes(tp_bytes));
  if (cp > 1) absl::StrAppendFormat(&out, ", context-parallel %s", Bytes(cp_bytes));
  out += "\n";
  return out;
}

}  // namespace conveyor
