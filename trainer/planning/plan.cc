#include "trainer/planning/plan.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "model/memory_model.h"
#include "model/mla_attention.h"
#include "model/moe_layer.h"
#include "model/mtp_block.h"
#include "parallel/pipeline/gantt.h"
#include "parallel/rank_layout.h"
#include "trainer/config/batch_rampup.h"
#include "trainer/planning/flops.h"
#include "trainer/planning/pipeline_report.h"
#include "trainer/planning/step_traffic.h"

namespace conveyor {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kMaxGanttColumns = 160;

std::string Bytes(double bytes) {
  if (bytes >= 1024.0 * kMiB) return absl::StrFormat("%.2f GiB", bytes / (1024.0 * kMiB));
  return absl::StrFormat("%.2f MiB", bytes / kMiB);
}

// The router's settings after its top-k: the load-balancing losses with their
// coefficients, the expert bias, and the gate's dtype when it is not the compute type.
std::string RouterSettings(const MoeShape& moe) {
  std::string out;
  const std::pair<const char*, float> losses[] = {{"aux_loss", moe.aux_loss_coeff},
                                                  {"seq_aux_loss", moe.seq_aux_loss_coeff},
                                                  {"global_aux_loss", moe.global_aux_loss_coeff}};
  for (const auto& [type, coeff] : losses) {
    if (coeff > 0) absl::StrAppendFormat(&out, "; %s x %g", type, coeff);
  }
  if (moe.expert_bias) {
    absl::StrAppendFormat(&out, "; expert bias (auxiliary-loss-free balancing), %g per step",
                          moe.bias_update_rate);
  }
  if (moe.router_fp32) out += "; router GEMM in fp32";
  return out;
}

// A mixture of experts' parameters: all of them (a tensor-parallel rank's share: the
// pipeline ranks of tensor-parallel rank 0, with its E / EP experts split over ETP
// replaced by all E split over TP) and those a token computes with (its top-k experts),
// the count Megatron's TFLOP/s formula follows.
std::string MoeParametersLine(const ModelShape& shape, int tp, int ep, int etp,
                              const std::vector<RankMemory>& memory) {
  // The multi-token prediction depths' layers count too, as in Megatron's MoE figures.
  const int64_t layers = shape.num_layers + shape.mtp_layers;
  const int64_t moe_layers = MtpLayerShape(shape).moe.CountMoeLayers(layers);
  int64_t total = moe_layers * (shape.moe.experts() * ExpertWeightElements(shape, tp) -
                                shape.moe.experts() / ep * ExpertWeightElements(shape, etp));
  for (const RankMemory& m : memory) total += m.parameters;
  const int64_t active = total - moe_layers * InactiveExpertParameters(shape, tp);
  const RouterSpec& router = shape.moe.router;
  const std::string groups =
      router.group_topk > 0
          ? absl::StrFormat(" from %d of %d expert groups", router.group_topk, router.num_groups)
          : "";
  return absl::StrFormat(
      "plan: mixture of experts: %d experts, top-%d%s, in %d of %d layers: %d parameters%s, %d "
      "(%.1f%%) active per token%s\n",
      shape.moe.experts(), router.topk, groups, moe_layers, layers, total,
      tp > 1 ? " per tensor-parallel rank" : "", active,
      100.0 * static_cast<double>(active) / static_cast<double>(std::max<int64_t>(total, 1)),
      RouterSettings(shape.moe));
}

// Multi-token prediction: where its depths run and how their losses weigh.
std::string MtpLine(const ModelShape& shape, int pp) {
  const bool moe = MtpLayerShape(shape).moe.IsMoeLayer(shape.num_layers);
  return absl::StrFormat(
      "plan: multi-token prediction: %d depth%s (layers %d to %d, %s like the last) on "
      "pipeline rank %d; loss = lm loss + %g / %d x (the depths' losses)\n",
      shape.mtp_layers, shape.mtp_layers == 1 ? "" : "s", shape.num_layers,
      shape.num_layers + shape.mtp_layers - 1, moe ? "mixture-of-experts" : "dense", pp - 1,
      shape.mtp_loss_scaling, shape.mtp_layers);
}

// Expert parallelism: the groups (the first few), each rank's experts and parameters, and
// the all-to-all's bytes per step: every MoE layer exchanges a micro-batch's routed rows
// (the rank's share of them when ETP < TP) four times (dispatch, combine, and their
// gradients), (EP - 1) / EP of them leaving the rank under uniform routing; at most
// tokens x top-k rows (fewer when a capacity drops).
std::string ExpertParallelLine(const ModelShape& shape, const ParallelSizes& layout, int M,
                               int64_t micro_batch, double element) {
  const int tp = layout.tp, pp = layout.pp, cp = layout.cp, ep = layout.ep, etp = layout.etp;
  auto groups = [&](GroupKind kind) {
    const std::vector<std::vector<int>> all = AllGroups(kind, layout);
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
  const double bytes = 4.0 * static_cast<double>(shape.moe.CountMoeLayers(shape.num_layers)) / pp *
                       M * rows * (ep - 1) / ep * shape.hidden * element;
  return absl::StrFormat(
      "plan: expert parallelism: expert TP %d x EP %d x expert DP %d, %d of %d experts per "
      "rank per MoE layer (%d parameters per rank and layer); expert-parallel groups %s; "
      "expert-data-parallel groups %s; all-to-all at most %s per step and rank (uniform "
      "routing)\n",
      etp, ep, layout.expert_dp(), local_experts, shape.moe.experts(),
      local_experts * ExpertWeightElements(shape, etp), groups(GroupKind::kExpert),
      groups(GroupKind::kExpertData), Bytes(bytes));
}

// --step-batch-size-schedule's steps, counted by stages of equal batch.
std::string StepScheduleLine(const Config& c) {
  std::string stages;
  for (const RampStage& stage : BatchRampup(c).RunStages(c.training())) {
    absl::StrAppend(&stages, stages.empty() ? "" : ", ", stage.steps, " at ", stage.batch,
                    " from sample ", stage.first_consumed);
  }
  return absl::StrFormat(
      "plan: --step-batch-size-schedule: steps by global batch: %s; this plan is for the last "
      "global batch %d\n",
      stages, c.training().global_batch_size());
}

// --rampup-batch-size's steps, counted by stages of equal batch (a ramp over billions of
// samples has billions of steps), and where --train-samples ends the run.
std::string RampLine(const Config& c) {
  const TrainingConfig& t = c.training();
  if (!t.step_batch_size_schedule().empty()) return StepScheduleLine(c);
  const std::vector<RampStage> stages = BatchRampup(c).Stages(t.train_samples());
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

// Multi-latent attention, RoPE's scaling and the sliding window, when the model has any
// (Megatron's FLOPs formula above counts full causal attention either way, MLA's branch
// half of it).
std::string PositionsLine(const ModelShape& shape) {
  std::vector<std::string> parts;
  const MlaShape& m = shape.mla;
  if (m.enabled) {
    parts.push_back(absl::StrFormat(
        "multi-latent (query latent %s, key/value latent %d, query and key heads %d + %d "
        "rotated, value heads %d, softmax scale %.6g)",
        m.q_lora_rank > 0 ? absl::StrCat(m.q_lora_rank) : "none", m.kv_lora_rank,
        m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim, MlaSoftmaxScale(shape)));
  }
  const RopeScaling& r = shape.rope_scaling;
  if (r.kind == RopeScalingKind::kLlama3) {
    parts.push_back(absl::StrFormat(
        "RoPE scaled as Llama 3.1 (factor %g, frequency factors %g and %g, original context %d)",
        r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_positions));
  } else if (r.kind == RopeScalingKind::kYarn) {
    parts.push_back(absl::StrFormat(
        "RoPE scaled by YaRN (s %g, original context %d, beta %g/%g, cos and sin x %.4f)", r.factor,
        r.original_max_positions, r.beta_fast, r.beta_slow, RopeConcentration(r)));
  }
  int64_t sliding = 0, window = -1;
  for (const int64_t w : shape.layer_windows) {
    sliding += w >= 0;
    window = std::max(window, w);
  }
  if (sliding > 0) {
    parts.push_back(
        absl::StrFormat("sliding window of the %d keys before each query in %d of "
                        "%d layers",
                        window, sliding, shape.num_layers));
  }
  return parts.empty() ? "" : absl::StrCat("plan: attention: ", absl::StrJoin(parts, "; "), "\n");
}

// The rank map, context parallelism's split, the batch arithmetic, FLOPs and the ramp.
std::string BatchLines(const ResolvedConfig& resolved, const ModelShape& shape) {
  const TrainingConfig& t = resolved.config().training();
  const int cp = resolved.cp();
  std::string out = RankMap(resolved.tp(), resolved.pp(), resolved.world_size(), cp);
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
      t.global_batch_size(), resolved.micro_batches(), resolved.dp(), t.micro_batch_size(),
      shape.seq, int64_t{t.global_batch_size()} * shape.seq,
      MegatronFlopsPerIteration(shape, t.global_batch_size()) / 1e12, shape.padded_vocab);
  return out + PositionsLine(shape) + RampLine(resolved.config());
}

// The schedule's bubble, formula and simulation, and its Gantt chart.
std::string ScheduleLines(const ResolvedConfig& resolved, const BubblePrediction& bubble) {
  const ParallelConfig& p = resolved.config().parallel();
  const int M = resolved.micro_batches();
  // A very large M is simulated by a prefix of the same shape (pipeline::SimulatedMicroBatches).
  const std::string simulated =
      bubble.simulated_micro_batches < M
          ? absl::StrCat("simulated for the first ", bubble.simulated_micro_batches,
                         " micro-batches (the steady state repeats beyond)")
          : "simulated";
  std::string out = absl::StrFormat(
      "plan: schedule %s, P %d, V %d, M %d, costs F,B,W = %s: bubble %.1f%% (formula), %.1f%% "
      "(%s), makespan %.0f units\n",
      p.pipeline_schedule(), resolved.pp(), resolved.virtual_stages(), M, p.pipeline_costs(),
      100 * bubble.formula, 100 * bubble.simulated, simulated, bubble.simulation.makespan);
  if (bubble.simulation.makespan <= kMaxGanttColumns) {
    return out + pipeline::GanttChart(bubble.simulation.timeline);
  }
  return out +
         absl::StrFormat("plan: (Gantt chart omitted: %.0f columns)\n", bubble.simulation.makespan);
}

// Memory per pipeline rank, the mixture of experts' and expert parallelism's lines, and
// the model state's bytes per parameter against Megatron's formula.
std::string MemoryLines(const ResolvedConfig& resolved, const ModelShape& shape,
                        const std::vector<RankMemory>& memory) {
  const Config& config = resolved.config();
  const int tp = resolved.tp();
  const std::string backend =
      absl::StrCat(resolved.on_gpu() ? "CUDA" : "CPU", " backend, ",
                   config.precision().bf16() ? "bf16 activations and weight copies" : "fp32");
  std::string out =
      absl::StrCat("plan: memory per GPU (", backend, "; TP rank 0, DP rank 0 of each stage)\n");
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
  const int ep = resolved.ep(), etp = resolved.etp();
  if (shape.mtp_layers > 0) out += MtpLine(shape, resolved.pp());
  if (shape.moe.experts() > 0) out += MoeParametersLine(shape, tp, ep, etp, memory);
  if (shape.moe.experts() > 0 && resolved.layout().experts_have_own_groups()) {
    out += ExpertParallelLine(shape, resolved.layout(), resolved.micro_batches(),
                              config.training().micro_batch_size(),
                              config.precision().bf16() ? 2.0 : 4.0);
  }
  absl::StrAppendFormat(&out,
                        "plan: model state (weights, grads, optimizer) per parameter; Megatron's "
                        "formula for these settings: %.2f bytes\n"
                        "  pp  bytes/param  bucket padding (elements)\n",
                        MegatronBytesPerParameter(MemoryInputsOf(resolved)));
  for (const RankMemory& m : memory) {
    const double per_parameter =
        static_cast<double>(m.weight_bytes + m.grad_bytes + m.optimizer_bytes) /
        std::max<int64_t>(1, m.parameters);
    absl::StrAppendFormat(&out, "  %2d  %11.2f  %d\n", m.pipeline_rank, per_parameter,
                          m.bucket_padding);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> FormatPlan(const ResolvedConfig& resolved) {
  const ModelShape& shape = resolved.model_shape();
  std::string out = BatchLines(resolved, shape);
  ASSIGN_OR_RETURN(const BubblePrediction bubble, PredictBubble(resolved));
  out += ScheduleLines(resolved, bubble);
  ASSIGN_OR_RETURN(const std::vector<RankMemory> memory,
                   PredictRunMemory(resolved, bubble));
  out += MemoryLines(resolved, shape, memory);
  const StepTraffic traffic = PredictBusiestStepTraffic(resolved, memory);
  absl::StrAppendFormat(&out,
                        "plan: traffic per step and rank: pipeline %s, data-parallel %s, "
                        "tensor-parallel %s",
                        Bytes(traffic.pipeline), Bytes(traffic.data_parallel),
                        Bytes(traffic.tensor_parallel));
  if (resolved.cp() > 1) {
    absl::StrAppendFormat(&out, ", context-parallel %s", Bytes(traffic.context_parallel));
  }
  out += "\n";
  return out;
}

}  // namespace conveyor
